"""One simulation run, a function of (seed, workload, fault plan): :func:`simulate`; and
:class:`SimulationFailure`, raised when an invariant broke, naming the seed and printing the
trace (every effect in order, with the simulated time and the task that performed it)."""
from __future__ import annotations

import dataclasses
from typing import List, Optional

from .chance import SplitMix64
from .clients import SimulatedClient, Workload
from .clock import SimulatedClock, World
from .faults import FaultPlan, Faults
from .interruptions import Interruptions, SettlingChecker
from .invariants import Violation
from .scheduler import Scheduler
from .tasks_protocol import AsyncioClient
from .simulated import SimulatedTable
from .transport import SimulatedTransport

__all__ = ['Result', 'SimulationFailure', 'simulate']

#: A run stops after this many steps or this many simulated seconds, whatever happens.
MAX_STEPS = 200_000
HORIZON = 3600.0


class SimulationFailure(AssertionError):
    """An invariant broke in the run of ``seed``; the message holds the trace."""

    def __init__(self, seed: int, problem: str, trace: List[str], tail: Optional[int] = 400) -> None:
        shown = trace if tail is None else trace[-tail:]
        cut = '' if len(shown) == len(trace) else f'... ({len(trace) - len(shown)} earlier lines left out)\n'
        super().__init__(f'simulation seed {seed} failed: {problem}\nreplay: simulate({seed}) with the same workload '
                         f'and fault plan\ntrace:\n{cut}' + '\n'.join(shown))
        self.seed = seed
        self.problem = problem
        self.trace = trace


@dataclasses.dataclass
class Result:
    """What a run did: its trace, how many steps, simulated seconds, acquisitions, takeovers,
    loss reports, faults, and the simulated seconds the locks were held."""

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


def simulate(seed: int, workload: Workload = Workload(), plan: FaultPlan = FaultPlan()) -> Result:
    """Run ``workload.clients`` simulated clients against one simulated table, scheduled and
    faulted by ``seed``; raise :class:`SimulationFailure` at the first broken invariant."""
    rng = SplitMix64(seed)
    world = World()
    rates = [1.0 + rng.uniform(-workload.max_rate_drift, workload.max_rate_drift) for _ in range(workload.clients)]
    table = SimulatedTable('locks', ('lock_key', 'S'), ('sort_key', 'S'), clock=lambda: world.now)
    transport = SimulatedTransport(table)
    checker = SettlingChecker(world, max(rates), transport)
    faults = Faults(plan)
    interruptions = Interruptions(faults, plan.cancel, plan.cancel_again, plan.cancel_at_yield)
    scheduler = Scheduler(world, rng, interruptions, checker.check)
    interruptions.attach(scheduler, world)
    clients: List[SimulatedClient] = []
    for index, rate in enumerate(rates):
        offset = rng.uniform(-workload.max_clock_skew / 2, workload.max_clock_skew / 2)
        clock = SimulatedClock(world, rate, origin=1000.0 * (index + 1), offset=offset)
        tasks = workload.asyncio_share > 0 and rng.chance(workload.asyncio_share)
        kind = AsyncioClient if tasks else SimulatedClient
        clients.append(kind(f'c{index + 1}', scheduler, transport, clock, checker, workload))
        if isinstance(clients[-1], AsyncioClient):
            interruptions.enlist(clients[-1])
        checker.watch(clients[-1])
    for client in clients:
        client.start(rng.fork(), workload)
    try:
        scheduler.run(HORIZON, MAX_STEPS)
    except Violation as violation:
        raise SimulationFailure(seed, str(violation), scheduler.trace) from None
    except Exception as exc:
        raise SimulationFailure(seed, f'{type(exc).__name__}: {exc}', scheduler.trace) from exc
    if scheduler.tasks:
        raise SimulationFailure(seed, f'the run did not end: {scheduler.tasks} still running after '
                                f'{scheduler.steps} steps, {world.now:.1f} simulated seconds', scheduler.trace)
    try:
        checker.settled(clients, interruptions.landed_after_close())
    except Violation as violation:
        raise SimulationFailure(seed, str(violation), scheduler.trace) from None
    return Result(seed, scheduler.trace, scheduler.steps, world.now, checker.acquisitions, checker.takeovers,
                  checker.losses, faults.lost, faults.throttled, faults.server_errors, faults.pauses,
                  checker.held_seconds)
