"""One simulation run, a function of (seed, workload, fault plan): :func:`simulate`; and
:class:`SimulationFailure`, raised when an invariant broke, naming the seed and printing the
trace (every effect in order, with the simulated time and the task that performed it)."""
from __future__ import annotations

import dataclasses
from typing import Any, Dict, List, Optional, Tuple, Union

from .callers import caller
from .chance import SplitMix64
from .clients import SimulatedClient, Workload
from .clock import SimulatedClock, World
from .faults import FaultPlan, Faults
from .interruptions import Interruptions, SettlingChecker
from .invariants import Violation
from .published import PublishedClient
from .scheduler import Scheduler, Task
from .settling import Liveness, prepare_table
from .tasks_protocol import AsyncioClient
from .simulated import SimulatedTable
from .transport import SimulatedTransport
from .user import UserScript, user_caller

__all__ = ['SimulationResult', 'SimulationFailure', 'simulate']

#: A run stops after this many steps or this many simulated seconds, whatever happens.
MAX_STEPS = 200_000
HORIZON = 3600.0


class SimulationFailure(AssertionError):
    """An invariant broke (or the code run raised) in the run of ``seed`` with ``workload`` and
    ``plan``; ``problem`` says what, ``trace`` is every line of the run's trace; the message
    holds the call that replays it and the last ``tail`` lines of the trace (None: all)."""

    def __init__(self, seed: int, problem: str, trace: List[str], tail: Optional[int] = 400, *,
                 workload: Optional[Workload] = None, plan: Optional[FaultPlan] = None) -> None:
        shown = trace if tail is None else trace[-tail:]
        cut = '' if len(shown) == len(trace) else f'... ({len(trace) - len(shown)} earlier lines left out)\n'
        replay = (f'simulate({seed})' if workload is None and plan is None
                  else f'simulate({seed}, {workload or Workload()!r}, {plan or FaultPlan()!r})')
        super().__init__(f'simulation seed {seed} failed: {problem}\nreplay: {replay} (with the same script, if any)'
                         f'\ntrace:\n{cut}' + '\n'.join(shown))
        self.seed = seed
        self.problem = problem
        self.trace = trace
        self.workload = workload if workload is not None else Workload()
        self.plan = plan if plan is not None else FaultPlan()


@dataclasses.dataclass
class SimulationResult:
    """What a run did: its trace, how many steps, simulated seconds, acquisitions, takeovers,
    loss reports, faults, the simulated seconds the locks were held, and the name of its
    published-style client (``p2``; None: it had none)."""

    seed: int
    trace: List[str]
    steps: int
    simulated_seconds: float
    acquisitions: int
    takeovers: int
    losses: int
    lost_answers: int
    throttled: int
    server_errors: int
    pauses: int
    held_seconds: float
    published: Optional[str] = None     # the published-style client's name, when the run had one


def simulate(seed: int, workload: Workload = Workload(), plan: FaultPlan = FaultPlan(), *,
             script: Optional[UserScript] = None) -> SimulationResult:
    """Run ``workload.clients`` simulated clients against one simulated table, scheduled and
    faulted by ``seed``; raise :class:`SimulationFailure` at the first broken invariant (or
    error). ``script``: the user's code each client's caller runs instead of the workload's
    acquisitions (see :class:`~.user.SimulatedCaller`; the workload's clients, keys'
    settings, clock skew and drift still apply)."""
    if script is not None and not callable(script):
        raise TypeError(f'script must be a generator function taking a SimulatedCaller, not {script!r}')
    rng = SplitMix64(seed)
    world = World()
    rates = [1.0 + rng.uniform(-workload.max_rate_drift, workload.max_rate_drift) for _ in range(workload.clients)]
    table = SimulatedTable('locks', ('lock_key', 'S'), ('sort_key', 'S'), clock=lambda: world.now)
    transport = SimulatedTransport(table)
    checker = SettlingChecker(world, max(rates), transport)
    prepare_table(transport, checker)
    checker.strict_loss_reports = workload.strict_loss_reports
    if script is None:     # (a user's script has no liveness probe)
        checker.liveness = Liveness(world, *_probe_bounds(workload, plan))
    faults = Faults(plan)
    interruptions = Interruptions(faults, plan.cancel, plan.cancel_again, plan.cancel_at_yield)
    scheduler = Scheduler(world, rng, interruptions, checker.check)
    interruptions.attach(scheduler, world)
    clocks = []
    for index, rate in enumerate(rates):
        offset = rng.uniform(-workload.max_clock_skew / 2, workload.max_clock_skew / 2)
        clocks.append(SimulatedClock(world, rate, origin=1000.0 * (index + 1), offset=offset))
    # One client in a share of the runs (none under a user's script) is a published-style one.
    chosen = script is None and workload.published_share > 0 and rng.chance(workload.published_share)
    published = rng.below(len(clocks)) if chosen else -1
    clients: List[Union[SimulatedClient, PublishedClient]] = []
    for index, clock in enumerate(clocks):
        if index == published:
            clients.append(PublishedClient(f'p{index + 1}', scheduler, transport, clock, checker, workload))
            continue
        # A user's script runs in threaded-protocol clients only (its caller is one task).
        tasks = script is None and workload.asyncio_share > 0 and rng.chance(workload.asyncio_share)
        if tasks:
            ours: SimulatedClient = AsyncioClient(f'c{index + 1}', scheduler, transport, clock, checker, workload)
        else:
            ours = SimulatedClient(f'c{index + 1}', scheduler, transport, clock, checker, workload,
                                   session=script is None and rng.chance(workload.session_share),
                                   trusting=not rng.chance(workload.untrusting_share))
        if isinstance(ours, AsyncioClient):
            interruptions.enlist(ours)
        checker.watch(ours)
        clients.append(ours)
    faults.on_death = lambda client: _died(checker, client)
    faults.on_landing = lambda key, owner: checker.excused.add((key, owner))
    shared: Dict[str, Any] = {}     # what the user's callers of this run share
    for client in clients:
        client.start(rng.fork(), workload, caller)
        if script is not None and isinstance(client, SimulatedClient):
            _run_script(scheduler, client, script, rng.fork(), shared)
    try:
        scheduler.run(HORIZON, MAX_STEPS)
    except Violation as violation:
        _bury_all(scheduler.tasks)
        raise SimulationFailure(seed, str(violation), scheduler.trace, workload=workload, plan=plan) from None
    except Exception as exc:
        _bury_all(scheduler.tasks)
        raise SimulationFailure(seed, f'{type(exc).__name__}: {exc}', scheduler.trace, workload=workload,
                                plan=plan) from exc
    _bury_all([task for task in scheduler.tasks if _dead(task)])
    if any(not _dead(task) for task in scheduler.tasks):
        raise SimulationFailure(seed, f'the run did not end: {scheduler.tasks} still running after '
                                f'{scheduler.steps} steps, {world.now:.1f} simulated seconds', scheduler.trace,
                                workload=workload, plan=plan)
    try:
        checker.settled([client for client in clients if isinstance(client, SimulatedClient)],
                        interruptions.landed_after_close())
    except Violation as violation:
        raise SimulationFailure(seed, str(violation), scheduler.trace, workload=workload, plan=plan) from None
    return SimulationResult(seed, scheduler.trace, scheduler.steps, world.now, checker.acquisitions,
                            checker.takeovers, checker.losses, faults.lost, faults.throttled, faults.server_errors,
                            faults.pauses, checker.held_seconds,
                            clients[published].name if published >= 0 else None)


def _died(checker: SettlingChecker, client: Any) -> None:
    """``client`` died (a fault): its holds end, its callers do no more work."""
    checker.died(client)
    if checker.liveness is not None:
        checker.liveness.gone(client.name)


def _dead(task: Task) -> bool:
    return bool(getattr(task.client, 'dead', False))


def _bury_all(tasks: List[Task]) -> None:
    """End the generators of tasks that will never run again (a dead client's, or all of them
    after a failure) quietly: their ``finally`` blocks yield effects, which nobody performs;
    closed by the garbage collector, they would complain."""
    generators: List[Any] = [each for task in tasks for each in (task.protocol, task.script) if each is not None]
    for generator in generators:
        try:
            generator.throw(GeneratorExit)
            for _ in range(1000):
                generator.send(None)
        except BaseException:  # noqa: BLE001,S110 - whatever it ends with, it is over
            pass


def _probe_bounds(workload: Workload, plan: FaultPlan) -> Tuple[float, float]:
    """How long a liveness probe may wait once every caller is done (global seconds), for keys
    held without a session and for keys held under one (their rows carry the long row lease):
    the lease twice over, a pause, a late request and every client's probe."""
    extra = plan.pause_max + plan.late_max + 2 * workload.clients * workload.heartbeat_period + 5
    row_lease = workload.lease_duration * max(workload.expiry_factor, 1.0)
    return 2 * workload.lease_duration + extra, 2 * row_lease + extra


def _run_script(scheduler: Scheduler, client: SimulatedClient, script: UserScript, rng: SplitMix64,
                shared: Dict[str, Any]) -> None:
    """The caller task ``client.start`` spawned runs the user's script instead (it has not run yet)."""
    caller = next(task for task in scheduler.tasks if task.name == f'{client.name}/caller')
    if caller.outcome is not None:
        raise AssertionError(f'{caller.name} started before its script was set')
    caller.script.close()
    caller.script = user_caller(client, rng, script, shared)
