"""The simulation driver's scheduler: one thread, no real sleeping.

Each simulated task runs a *script* (a generator of :class:`Run` and :class:`Idle` commands);
a :class:`Run` steps a protocol of the orchestration with the one stepper
(:func:`~python_dynamodb_lock._core.stepper.advance`) and performs its effects with the
semantics the thread driver gives them (``_drivers/threads.py``): ``Call`` goes to the simulated
table after a simulated latency, ``Sleep`` parks the task until a simulated time (woken early
by its wake event), ``Hold``/``Drop`` take and give back a lock's mutex cooperatively,
``Settle`` runs its protocol as a task of its own (waited for unless a follow-up), ``Submit``
starts heartbeat renewals as tasks, ``Emit``/``Unregister`` go through the host's ``local`` map.
At each effect boundary the seed chooses which ready task runs next, and which fault strikes.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Dict, Generator, List, Optional

from ..._core.effects import Call, Drop, Emit, Hold, Pending, Settle, Sleep, Submit
from ..._core.stepper import Done, advance
from ..._drivers.steps import woken
from ..._model.errors import DynamoDBLockError
from .chance import SplitMix64
from .clock import World
from .primitives import SimulatedEvent
from .trace import describe_effect, describe_value

__all__ = ['Idle', 'Outcome', 'Run', 'Scheduler', 'Task']

INFINITY = float('inf')
READY, SLEEPING, MUTEX, JOINING, DONE = 'ready', 'sleeping', 'mutex', 'joining', 'done'


@dataclasses.dataclass
class Run:
    """A script's command: run ``protocol`` to its end; ``wake`` cuts its sleeps short (None:
    the client's shutdown event, as the thread driver's ``run``)."""

    protocol: Any
    wake: Any = None


@dataclasses.dataclass
class Idle:
    """A script's command: do nothing for ``seconds`` of the client's clock."""

    seconds: float


@dataclasses.dataclass
class Outcome:
    """What a :class:`Run` ended with: its value, or the exception the protocol raised."""

    value: Any = None
    error: Optional[BaseException] = None


Script = Generator[Any, Outcome, None]


@dataclasses.dataclass(frozen=True)
class _Woken:
    """A sleep cut short by ``event``: its answer is read when the task runs next."""

    event: Any


class Task:
    """One simulated thread of one client (see the module docstring)."""

    def __init__(self, client: Any, name: str, script: Script) -> None:
        self.client = client
        self.name = name
        self.script = script
        self.protocol: Any = None
        self.wake: Any = None          # the running protocol's wake event
        self.sleep_on: Any = None      # the event the task sleeps on now (None: only its deadline)
        self.value: Any = None
        self.thrown: Optional[BaseException] = None
        self.outcome: Optional[Outcome] = None   # None: the script has not started
        self.state = READY
        self.deadline = INFINITY
        self.joiners: List['Task'] = []
        self.local: Dict[type, Callable[[Any], Any]] = {}

    def __repr__(self) -> str:
        return f'Task({self.name}, {self.state})'


class Scheduler:
    """Runs the tasks of the simulated clients (see the module docstring). ``faults`` decides,
    for each call, which fault strikes it (None: none); ``check`` runs after every step."""

    def __init__(self, world: World, rng: SplitMix64, faults: Any, check: Callable[[], None],
                 latency: float = 0.02) -> None:
        self.world = world
        self.rng = rng
        self.faults = faults
        self.check = check
        self.latency = latency
        self.tasks: List[Task] = []
        self.trace: List[str] = []
        self.current: Optional[Task] = None
        self.steps = 0
        #: Performs an effect with other semantics than the thread driver's (the asyncio
        #: clients': ``tasks_protocol.py``): True when it did.
        self.perform_hook: Optional[Callable[['Scheduler', Task, Any], bool]] = None
        self._finished = False   # a task is done since the task list was last swept

    # -- tasks ---------------------------------------------------------------------------------
    def spawn(self, client: Any, name: str, script: Script) -> Task:
        task = Task(client, name, script)
        host = client.orchestration
        task.local = {**host.local, Emit: self._emitter(host.local[Emit])}
        self.tasks.append(task)
        return task

    def spawn_protocol(self, client: Any, name: str, protocol: Any, wake: Any = None,
                       done: Optional[Callable[[Outcome], None]] = None) -> Task:
        """A task that runs one protocol (a settle, a renewal, a background loop)."""
        def script() -> Script:
            outcome = yield Run(protocol, wake)
            if done is not None:
                done(outcome)
            elif outcome.error is not None:
                self.note(f'{name} raised {describe_value(outcome.error)}')
        return self.spawn(client, name, script())

    def event_set(self, event: SimulatedEvent) -> None:
        """``event`` was set: the tasks sleeping on it wake."""
        for task in self.tasks:
            if task.state == SLEEPING and task.sleep_on is event:
                # What the sleep answers is read when the task runs, as a woken thread reads it
                # (a waiter's wake is used up then, and a handover meanwhile is not missed).
                task.state, task.deadline, task.sleep_on = READY, INFINITY, None
                task.value = _Woken(event)

    def note(self, text: str) -> None:
        name = self.current.name if self.current is not None else '-'
        self.trace.append(f'{self.world.now:12.6f} {name:<18} {text}')

    def _emitter(self, emit: Callable[[Any], Any]) -> Callable[[Any], Any]:
        def recorded(effect: Emit) -> Any:
            event = effect.event
            self.note(f'event {event.kind.value} {event.key}')
            if self.current is not None:
                self.current.client.observe(event, self.world.now)
            return emit(effect)
        return recorded

    # -- the loop ------------------------------------------------------------------------------
    def run(self, until: float, max_steps: int) -> None:
        """Step ready tasks, chosen by the seed, until every task is done, ``until`` (global
        seconds) has passed or ``max_steps`` were taken."""
        while self.steps < max_steps:
            now = self.world.now
            ready = [task for task in self.tasks if task.state == READY and task.client.paused_until <= now]
            if not ready:
                later = [task.deadline for task in self.tasks if task.state == SLEEPING]
                later += [task.client.paused_until for task in self.tasks
                          if task.state == READY and task.client.paused_until > now]
                if not later or min(later) > until:
                    return
                self.world.advance_to(min(later))
                for task in self.tasks:
                    if task.state == SLEEPING and task.deadline <= self.world.now:
                        task.state, task.deadline, wake, task.sleep_on = READY, INFINITY, task.sleep_on, None
                        if wake is not None:   # a Sleep (else: an answer arriving, or an Idle ending)
                            task.value = _Woken(wake) if wake.is_set() else False
                continue
            task = ready[self.rng.below(len(ready))]
            self.steps += 1
            self.current = task
            try:
                if self.faults.at_boundary(self, task):
                    continue     # its client was just paused: it does not run yet
                self._step(task)
            finally:
                self.current = None
            self.check()
            if self._finished:
                self._finished = False
                self.tasks = [each for each in self.tasks if each.state != DONE]

    def _step(self, task: Task) -> None:
        if task.protocol is None:
            self._next_command(task)
            return
        if isinstance(task.value, _Woken):
            task.value = woken(task.value.event, True, task.client.shutdown)
        try:
            step = advance(task.protocol, task.value, task.thrown, task.local)
        except DynamoDBLockError as error:
            self._finish_run(task, Outcome(error=task.client.orchestration.public_error(error)))
            return
        except (KeyboardInterrupt, SystemExit, GeneratorExit):
            raise
        except AssertionError:
            raise     # an invariant broken while the protocol ran (an event it emitted), or its own assert
        except BaseException as exc:  # noqa: BLE001 - handed to the script, which decides (a simulated cancellation too)
            self._finish_run(task, Outcome(error=exc))
            return
        task.value, task.thrown = None, None
        if isinstance(step, Done):
            self._finish_run(task, Outcome(step.value))
            return
        self._perform(task, step)

    def _finish_run(self, task: Task, outcome: Outcome) -> None:
        task.protocol, task.wake, task.outcome = None, None, outcome
        self.note(f'returned {describe_value(outcome.error if outcome.error is not None else outcome.value)}')

    def _next_command(self, task: Task) -> None:
        try:
            command = next(task.script) if task.outcome is None else task.script.send(task.outcome)
        except StopIteration:
            task.state, self._finished = DONE, True
            for joiner in task.joiners:
                joiner.state = READY
            return
        task.outcome = Outcome()
        if isinstance(command, Idle):
            task.state, task.sleep_on = SLEEPING, None
            task.deadline = self.world.now + task.client.clock.global_seconds(command.seconds)
        else:
            task.protocol, task.value, task.thrown = command.protocol, None, None
            task.wake = command.wake if command.wake is not None else task.client.shutdown

    def _perform(self, task: Task, effect: Any) -> None:
        client = task.client
        self.note(describe_effect(effect))
        if self.perform_hook is not None and self.perform_hook(self, task, effect):
            return
        if isinstance(effect, Call):
            fault = self.faults.for_call(self, task, effect.request)
            task.value = client.transport.send(effect.request, fault)
            self.note(f'  answer {describe_value(task.value)}{f" ({fault})" if fault else ""}')
            # The answer arrives after a simulated latency chosen by the seed.
            task.state, task.sleep_on = SLEEPING, None
            task.deadline = self.world.now + self.faults.latency(self.rng, self.latency)
        elif isinstance(effect, Sleep):
            wake = task.wake
            if wake.is_set() or not effect.seconds > 0:
                task.value = woken(wake, wake.is_set(), client.shutdown)
            else:
                task.state, task.sleep_on = SLEEPING, wake
                task.deadline = self.world.now + client.clock.global_seconds(effect.seconds)
        elif isinstance(effect, Hold):
            mutex = effect.lock._mutex
            if mutex.try_take(task):
                task.value = True
            elif not effect.wait:
                task.value = False
            else:
                task.state = MUTEX
                mutex.waiting.append(task)
        elif isinstance(effect, Drop):
            nxt = effect.lock._mutex.give_back(task)
            if nxt is not None:
                nxt.state, nxt.value = READY, True
        elif isinstance(effect, Submit):
            task.value = self._submit(client, effect.locks)
        elif isinstance(effect, Settle):
            settler = self.spawn_protocol(client, client.task_name('settle'), effect.protocol)
            if not effect.follow_up:
                task.state = JOINING
                settler.joiners.append(task)
        elif isinstance(effect, Pending):
            task.value = None   # no call is ever left in flight by an interruption (none yet)
        else:
            raise TypeError(f'unknown effect {effect!r}')

    def _submit(self, client: Any, locks: Any) -> int:
        host = client.orchestration
        due = host.take_due(locks)
        if due:
            def done(outcome: Outcome) -> None:
                failure = outcome.error if isinstance(outcome.error, Exception) else None
                host.done_with(due, failure)
            self.spawn_protocol(client, client.task_name('renew'), host.renewals(due), done=done)
        return len(locks) - len(due)
