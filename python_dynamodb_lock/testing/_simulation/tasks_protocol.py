"""The asyncio protocol in the simulation: what the task driver (``_drivers/tasks.py``) does
differently from the thread driver, for the simulated clients the seed makes asyncio clients.

* **A call is a value in flight** (:class:`InFlight`): the request travels to the table for a
  simulated while before it lands, and its answer travels back. An awaiting task cancelled
  meanwhile gets :class:`SimulatedCancellation` at once (the task driver's ``CancelledError``)
  and never the answer: a request not yet sent is never sent, or it is already on the wire and
  lands later - maybe after the undo looked (the seed says which). ``Pending`` answers None.
* **Cancellation is delivered at a suspension point**: a call, a sleep, a wait for a lock's
  mutex, a wait for settling work, an awaited release. A task cancelled between two of them
  raises at its next one (a request is then not sent); a task already woken (an answer in, the
  mutex handed to it) loses what it was woken with, as an asyncio task does.
* **Settling work is a task of its own**, which no cancellation of its caller stops; the caller
  waits for it as :func:`~python_dynamodb_lock._drivers.steps.hand_off` decides (the decision
  the task driver makes): until it is done, or, cancelled, for what is left of 30 ms.
* **A release is a task of its own** (``TaskCalls.begin_release``): a caller cancelled while it
  awaits its release goes on; the release finishes.
* **close()** sets the shutdown event, wakes the waiters and cancels the heartbeat renewals in
  flight (``TaskDriver.stop``); it may come from another task while a call is in flight.
"""
from __future__ import annotations

import dataclasses
import datetime
from typing import Any, Callable, Dict, List, Optional, Tuple, cast
from typing import Protocol as TypingProtocol

from ..._client.call import acquire_call
from ..._core.effects import Call, Emit, Hold, Protocol, Settle, Sleep
from ..._drivers.steps import CANCEL_GRACE, SETTLE_GRACE, Steps, hand_off
from ..._model.errors import DynamoDBLockError
from ..._common.locks import HeldLock
from ..._wire.requests import Request
from .chance import SplitMix64
from .clients import SimulatedClient, Workload, done_working, working_on
from .clock import SimulatedClock, World
from .invariants import Tenure
from .scheduler import DONE, INFINITY, MUTEX, READY, SLEEPING, Idle, Outcome, Run, Scheduler, Script, Task
from .trace import describe_effect, describe_value

__all__ = ['AsyncioClient', 'AsyncioSemantics', 'Awaiting', 'InFlight', 'SimulatedCancellation']

#: The longest a cancelled request still on the wire may take to land (global seconds): a
#: request held on the wire lands after the undo looked (the late landing the undo watches for).
LATE_LANDING = 2.0
#: The share of answers that come back late, and how late at most (global seconds): a slow
#: release lets another task of the client write the key before the release's answer is in.
LATE_ANSWERS = 0.1
LATE_ANSWER = 1.5
#: The share of asyncio clients with two application tasks (else one), and with a task that
#: closes the client at a random moment (calls may be in flight).
TWO_TASKS = 0.5
#: The chance that a task's cancellation also cancels the other tasks of its client (a task
#: group cancels its tasks together), delivered at their next suspension point.
SIBLINGS = 0.3
#: How much likelier a task is cancelled at a rare suspension point than at a call or a sleep
#: (a wait for a lock's mutex, for a release), so that a CI-sized run reaches them.
WEIGHTS: Dict[type, float] = {}
#: A release runs as a task of its own (``TaskCalls.begin_release``); False: in the awaiting
#: task, as before b6a459c, where the task's cancellation reaches it (a fault-injection switch).
RELEASE_AS_TASK = True
CLOSED_EARLY = 0.2


class SimulatedCancellation(BaseException):
    """A simulated task's cancellation (``asyncio.CancelledError``, which the simulation may not
    import; like it, not an ``Exception``)."""


@dataclasses.dataclass(frozen=True)
class Awaiting:
    """An effect of the simulation's own: await ``task`` (a release started as a task)."""

    task: Task


def awaiting(task: Task) -> Protocol[Outcome]:
    """``await task``: its outcome."""
    # The simulation's own effect, outside the core's vocabulary (its scheduler handles it first).
    outcome: Outcome = yield Awaiting(task)  # type: ignore[misc]
    return outcome


WEIGHTS.update({Hold: 10.0, Awaiting: 4.0})


class InFlight:
    """A call an asyncio task sent: its request, the fault drawn for it, the task awaiting its
    answer (None once that task was cancelled), and the wire task that lands it."""

    __slots__ = ('request', 'fault', 'caller', 'wire', 'landed', 'dropped')

    def __init__(self, request: Request, fault: Optional[str], caller: Task) -> None:
        self.request = request
        self.fault = fault
        self.caller: Optional[Task] = caller
        self.wire: Optional[Task] = None
        self.landed = False
        self.dropped = False


class _Parked:
    """What a task waiting for another task sleeps on (never set: the other task's end, or the
    deadline, wakes it)."""

    def is_set(self) -> bool:
        return False


class _Network:
    """The wire's pseudo-client: its tasks land requests and bring answers back (never paused)."""

    name = 'net'
    paused_until = 0.0

    def __init__(self, world: World) -> None:
        self.clock = SimulatedClock(world)
        self.orchestration = self
        self.local: Dict[type, Callable[[Any], Any]] = {Emit: _ignore}


def _ignore(effect: object) -> None:
    return None


class AsyncioSemantics:
    """Performs the effects of the asyncio clients' tasks (see the module docstring): the
    scheduler's ``perform_hook``; :meth:`cancel` is the interruption."""

    def __init__(self, scheduler: Scheduler, world: World, cancel_again: float = 0.0,
                 cancel_at_yield: float = 0.0) -> None:
        self.scheduler = scheduler
        self.world = world
        self.cancel_again = cancel_again
        self.cancel_at_yield = cancel_at_yield
        self.soon: List[Task] = []     # to cancel at the next step, while they wait where they yielded
        self.network = _Network(world)
        self.cancellations = 0
        self.late_landings = 0
        self._flights: Dict[Task, InFlight] = {}
        # The suspending effect a task's protocol waits on (or was woken from), with that protocol.
        self._suspended: Dict[Task, Tuple[Any, Any]] = {}
        self._must_cancel: Dict[Task, Any] = {}      # cancelled between two suspensions: the protocol it was in
        self._delivered: Dict[Task, BaseException] = {}
        self._steps: Dict[Task, Tuple[Any, Steps]] = {}
        self._parked: Dict[Task, _Parked] = {}
        self._outcomes: Dict[Task, Outcome] = {}
        self._awaited_by: Dict[Task, List[Tuple[Task, _Parked]]] = {}
        self.landed_after_close: List[Tuple[Any, str]] = []   # (client, key) of writes landed after close began
        scheduler.perform_hook = self.perform

    # -- performing --------------------------------------------------------------------------
    def perform(self, scheduler: Scheduler, task: Task, effect: object) -> bool:
        """Perform ``effect`` for ``task`` if it is an asyncio client's (True), else leave it to
        the scheduler's thread semantics (False)."""
        if not isinstance(task.client, AsyncioClient):
            return False
        steps = self._steps_of(task)
        steps.thrown = self._delivered.pop(task, None)
        self._suspended.pop(task, None)
        if isinstance(effect, Call):
            if not self._deliver_pending(task, 'before sending'):
                self._send(task, effect)
            return True
        if isinstance(effect, Settle):
            return self._hand_off(task, effect, steps)
        if isinstance(effect, Awaiting):
            if effect.task in self._outcomes:
                task.value = self._outcomes[effect.task]
            elif not self._deliver_pending(task, 'awaiting'):
                self._park(task, effect.task, INFINITY)
                self._suspend(task, effect)
            return True
        if isinstance(effect, Sleep):
            if task.wake.is_set() or not effect.seconds > 0:
                return False
            if self._deliver_pending(task, 'before sleeping'):
                return True
            self._suspend(task, effect)
            return False
        if isinstance(effect, Hold):
            mutex = effect.lock._mutex
            if not effect.wait or mutex.owner is None or mutex.owner is task:
                return False        # taken at once (an asyncio.Lock that is free does not suspend)
            if self._deliver_pending(task, 'waiting for the mutex'):
                return True
            self._suspend(task, effect)
            return False
        return False

    def _suspend(self, task: Task, effect: object) -> None:
        self._suspended[task] = (task.protocol, effect)
        chance = min(1.0, self.cancel_at_yield * WEIGHTS.get(type(effect), 1.0))
        if '/caller' in task.name and chance and self.scheduler.rng.chance(chance):
            self.soon.append(task)      # cancelled while it waits here (a call on the wire, a mutex, ...)

    def _steps_of(self, task: Task) -> Steps:
        kept = self._steps.get(task)
        if kept is None or kept[0] is not task.protocol:
            kept = (task.protocol, Steps(task.wake))
            self._steps[task] = kept
        return kept[1]

    def _send(self, task: Task, effect: Call) -> None:
        scheduler = self.scheduler
        flight = InFlight(effect.request, scheduler.faults.for_call(scheduler, task, effect.request), task)
        self._flights[task] = flight
        self._suspend(task, effect)
        task.state, task.sleep_on, task.deadline = SLEEPING, None, INFINITY
        flight.wire = scheduler.spawn(self.network, f'net/{task.name}', self._wire(flight, task.client))

    def _wire(self, flight: InFlight, client: SimulatedClient) -> Script:
        scheduler = self.scheduler
        yield Idle(scheduler.rng.uniform(0.0, scheduler.latency / 2))
        if flight.dropped:
            scheduler.note(f'never sent: {describe_effect(Call(flight.request))}')
            return
        answer = client.transport.send(flight.request, flight.fault)
        flight.landed = True
        if client.orchestration.state.closed:
            self.landed_after_close.append((client, _key_of(flight.request)))
        scheduler.note(f'landed {describe_effect(Call(flight.request))} (of {client.name}): {describe_value(answer)}'
                       f'{f" ({flight.fault})" if flight.fault else ""}')
        late = scheduler.rng.chance(LATE_ANSWERS)
        yield Idle(scheduler.rng.uniform(0.0, LATE_ANSWER if late else scheduler.latency / 2))
        caller = flight.caller
        if caller is None or self._flights.get(caller) is not flight:
            scheduler.note('  its answer reaches nobody (the caller was cancelled)')
            return
        del self._flights[caller]
        caller.state, caller.deadline, caller.value = READY, INFINITY, answer

    def _hand_off(self, task: Task, effect: Settle, steps: Steps) -> bool:
        scheduler, client = self.scheduler, task.client
        name = client.task_name('settle')

        def settled(outcome: Outcome) -> None:
            if outcome.error is not None:
                scheduler.note(f'{name} raised {describe_value(outcome.error)}')
        settler = self.start(client, name, effect.protocol, settled)
        cancelled = isinstance(steps.thrown, SimulatedCancellation)
        wait = hand_off(effect.follow_up, steps, client.clock.monotonic(), cancelled, CANCEL_GRACE, SETTLE_GRACE)
        if not wait.waits:
            return True
        if not self._deliver_pending(task, 'handing off'):
            until = INFINITY if wait.timeout is None else self.world.now + client.clock.global_seconds(wait.timeout)
            self._park(task, settler, until)
            self._suspend(task, effect)
        return True

    def start(self, client: SimulatedClient, name: str, protocol: Protocol[Any],
              done: Callable[[Outcome], object]) -> Task:
        """A task of its own running ``protocol`` (settling work, a release); ``done`` sees its
        outcome, and the tasks awaiting it wake with it."""
        started: List[Task] = []

        def finished(outcome: Outcome) -> None:
            done(outcome)
            self._wake_awaiting(started[0], outcome)
        started.append(self.scheduler.spawn_protocol(client, name, protocol, done=finished))
        return started[0]

    def _park(self, task: Task, target: Task, until: float) -> None:
        parked = _Parked()
        self._parked[task] = parked
        self._awaited_by.setdefault(target, []).append((task, parked))
        task.state, task.sleep_on, task.deadline = SLEEPING, parked, until

    def _wake_awaiting(self, target: Task, outcome: Outcome) -> None:
        self._outcomes[target] = outcome
        for waiting, parked in self._awaited_by.pop(target, []):
            if waiting.state == SLEEPING and waiting.sleep_on is parked:
                waiting.state, waiting.deadline, waiting.sleep_on, waiting.value = READY, INFINITY, None, outcome

    # -- cancelling --------------------------------------------------------------------------
    def cancel(self, task: Task) -> None:
        """``task.cancel()``: delivered now if the task waits (or was woken and has not run),
        else at its next suspension point."""
        if task.protocol is None or task.state == DONE:
            return
        self.cancellations += 1
        self.scheduler.note(f'fault: {task.name} cancelled')
        if self.scheduler.rng.chance(SIBLINGS):      # its task group cancels the others too
            for other in self.scheduler.tasks:
                if other is not task and other.client is task.client and '/caller' in other.name and other.protocol:
                    self.scheduler.note(f'fault: {other.name} cancelled with it (at its next suspension point)')
                    self._must_cancel[other] = other.protocol
        protocol, effect = self._suspended.pop(task, (None, None))
        if protocol is not task.protocol:     # running between two suspension points (or not started)
            self._must_cancel[task] = task.protocol
            return
        if isinstance(effect, Call):
            self._cut_flight(task)
        elif isinstance(effect, Hold):
            mutex = effect.lock._mutex
            if task.state == MUTEX:
                mutex.waiting.remove(task)
            elif mutex.owner is task:           # handed the mutex, not yet run: it never takes it
                nxt = mutex.give_back(task)
                if nxt is not None:
                    nxt.state, nxt.value = READY, True
        self._parked.pop(task, None)
        self._deliver(task)

    def _cut_flight(self, task: Task) -> None:
        flight = self._flights.pop(task, None)
        if flight is None:
            return       # its answer was in: lost
        flight.caller = None
        if flight.landed:
            return       # its answer is on its way back: it reaches nobody
        rng = self.scheduler.rng
        if rng.chance(0.5):
            flight.dropped = True
        elif flight.wire is not None and flight.wire.state == SLEEPING:
            self.late_landings += 1
            flight.wire.deadline = self.world.now + rng.uniform(0.0, LATE_LANDING)

    def _deliver_pending(self, task: Task, where: str) -> bool:
        """Deliver a cancellation that waited for this suspension point, if any."""
        if self._must_cancel.pop(task, None) is not task.protocol:
            return False
        self.scheduler.note(f'  cancellation delivered {where}')
        self._deliver(task)
        return True

    def _deliver(self, task: Task) -> None:
        error = SimulatedCancellation()
        self._delivered[task] = error
        task.state, task.deadline, task.sleep_on = READY, INFINITY, None
        task.value, task.thrown = None, error
        if self.cancel_again and self.scheduler.rng.chance(self.cancel_again):
            self.cancellations += 1
            self.scheduler.note(f'fault: {task.name} cancelled again')
            self._must_cancel[task] = task.protocol


def _key_of(request: Request) -> str:
    params = request.params
    key = params.get('Key') or params.get('Item') or {}
    return '|'.join(str(next(iter(value.values()))) for value in key.values() if isinstance(value, dict))


class AsyncioClient(SimulatedClient):
    """A simulated client of the asyncio protocol: its effects are performed with the task
    driver's semantics (:class:`AsyncioSemantics`), its callers are tasks that can be cancelled."""

    semantics: AsyncioSemantics
    widened = False      # its callers run the narrow workload (``task_caller``), without sim29a's faults

    def start(self, rng: SplitMix64, workload: Workload, caller: Any = None) -> None:
        """As the threaded client's, with ``task_caller`` as its callers (``caller`` is not used)."""
        from ..._core.heartbeat import background_loop
        host = self.orchestration
        period = self.settings.heartbeat_period
        for label, make_round in (('heartbeat', host.heartbeat_round), ('checker', host.checker_round)):
            loop = background_loop(f'heartbeat {label}', self.name, make_round, self.shutdown.is_set, period)
            self.scheduler.spawn_protocol(self, f'{self.name}/{label}', loop)
        callers = 2 if rng.chance(TWO_TASKS) else 1
        for index in range(callers):
            working_on(self.checker, self.name)
            self.scheduler.spawn(self, f'{self.name}/caller{index + 1 if index else ""}',
                                 task_caller(self, rng.fork(), workload))
        if rng.chance(CLOSED_EARLY):
            self.scheduler.spawn(self, f'{self.name}/closer', closer(self, rng.uniform(0.0, workload.operations * (
                workload.hold + workload.think))))

    def close(self) -> None:
        """``await client.close()``: shut down, and cancel the renewals in flight."""
        if not self.orchestration.releasing.begin_close():
            return
        for task in list(self.scheduler.tasks):
            if task.client is self and '/renew#' in task.name:
                self.semantics.cancel(task)


def closer(client: AsyncioClient, after: float) -> Script:
    """Another task of the application that closes the client while calls may be in flight."""
    yield Idle(after)
    client.scheduler.note(f'close() of {client.name}')
    client.close()


def _unexpected(outcome: Outcome) -> Optional[BaseException]:
    """The outcome's error if the caller expects it (a DynamoDBLockError, its cancellation);
    raise any other."""
    error = outcome.error
    if error is not None and not isinstance(error, (DynamoDBLockError, SimulatedCancellation)):
        raise error
    return error


class _Ledger(TypingProtocol):
    """What a task's caller tells the run's checker (``interruptions.SettlingChecker``)."""

    def acquired(self, client: SimulatedClient, lock: HeldLock) -> Tenure: ...

    def leaving(self, tenure: Tenure) -> None: ...

    def not_handed(self, client: SimulatedClient, holder: object) -> None: ...


def task_caller(client: AsyncioClient, rng: SplitMix64, workload: Workload) -> Script:
    """One asyncio task of the application: as the threaded caller (``clients.caller``), each
    call an awaited coroutine that the seed may cancel; a release is a task of its own, awaited."""
    host = client.orchestration
    state = host.state
    checker = cast(_Ledger, client.checker)
    holder = object()    # this task, for reentrancy
    again: Optional[str] = None     # the key to take again at once
    for _ in range(workload.operations):
        if state.closed:
            break
        key = again or f'k{rng.below(workload.keys)}'
        again = None
        trying = rng.chance(workload.try_share)
        if not trying and rng.chance(workload.first_share):
            attempts = host.acquiring.first_attempts(key, ['lock', 'spare'], None, None, None, None)
            outcome = yield Run(host.acquiring.first(attempts, holder, None, True))   # wake: the shutdown
        else:
            call = acquire_call(state, key, 'lock', None, datetime.timedelta(0) if trying else None, None, None,
                                False, not trying)
            held, waiter = host.acquiring.queue(call, holder, client.new_waiter)
            assert held is None and waiter is not None
            outcome = yield Run(host.acquiring.acquisition(waiter, holder, call), waiter)
        if _unexpected(outcome) is not None or outcome.value is None:
            checker.not_handed(client, holder)
        else:
            lock = outcome.value
            tenure = checker.acquired(client, lock)
            yield Idle(rng.uniform(0.0, workload.hold))
            checker.leaving(tenure)
            releasing: Protocol[Any] = host.releasing.releasing(lock, True)
            if RELEASE_AS_TASK:
                releasing = awaiting(client.semantics.start(client, client.task_name('release'), releasing,
                                                            _unexpected))
            if isinstance(_unexpected((yield Run(releasing))), SimulatedCancellation) and rng.chance(0.5):
                again = key        # gave up waiting for its release, and takes the key again at once
                client.scheduler.note(f'takes {key} again at once')
                yield Idle(rng.uniform(0.0, client.scheduler.latency))
                continue
        yield Idle(rng.uniform(0.0, workload.think))
    done_working(client.checker, client.name)
    client.close()


