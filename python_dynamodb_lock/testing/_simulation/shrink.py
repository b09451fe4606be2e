"""The shrinker: a failing ``(seed, workload, plan)`` reduced to a smaller one that fails the
same way, for a short trace to read.

A smaller workload (fewer clients, operations, keys; an entry point's share or the published
client turned off; under a user's script, fewer clients only) or fault plan (a fault kind turned
off) gives another schedule, so each candidate is tried with a few seeds (the current one
first); the first that breaks the same invariant is kept, and the search goes on from there
until no candidate fails or the budget of runs is spent. Last, among a few
seeds of the smallest workload and plan, the shortest failing schedule is kept. Everything is
deterministic: the same failure shrinks to the same reproducer.
"""
from __future__ import annotations

import dataclasses
import re
from typing import Callable, Iterator, List, Optional, Tuple, TypeVar, Union

from .clients import Workload
from .faults import FaultPlan
from .run import SimulationFailure, simulate
from .user import UserScript

__all__ = ['Reproducer', 'problem_kind', 'shrink']

Settings = TypeVar('Settings', Workload, FaultPlan)
Same = Callable[[SimulationFailure], bool]


def problem_kind(problem: str) -> str:
    """What a problem says with its numbers, times, keys' and clients' indexes and details left
    out: two failures of the same invariant (or the same error) have the same kind - ``two
    exclusive holders of k# at #, both LOCKED on their own clocks``, ``AssertionError: an update
    was lost``."""
    first = re.sub(r'\d+(?:\.\d+)?', '#', problem.split('\n', 1)[0])
    error = re.match(r'[A-Za-z_]\w*: ', first)     # an exception's name, then its message
    head = error.group(0) if error else ''
    return head + first[len(head):].split(': ', 1)[0]


@dataclasses.dataclass(frozen=True)
class Reproducer:
    """The smallest failing run found: replay it with ``simulate(seed, workload, plan)``;
    ``failure`` is its :class:`SimulationFailure` (``problem``, ``trace``); ``runs`` how many
    simulations the shrinker ran; ``original_steps`` the failing run's trace length before."""

    seed: int
    workload: Workload
    plan: FaultPlan
    failure: SimulationFailure
    runs: int
    original_steps: int

    @property
    def replay(self) -> str:
        return f'simulate({self.seed}, {self.workload!r}, {self.plan!r})'

    def __str__(self) -> str:
        return (f'shrunk in {self.runs} runs from {self.original_steps} to {len(self.failure.trace)} trace lines: '
                f'{self.failure.problem}\nreplay: {self.replay}\ntrace:\n' + '\n'.join(self.failure.trace))


def _smaller(settings: Settings, only: Optional[Tuple[str, ...]] = None) -> Iterator[Settings]:
    """Each one-field reduction of a workload or fault plan (of the fields ``only`` names, when
    given): a count (clients, keys, operations, ...) down to 1, half, one less; a share
    (``*_share``) or a fault's probability to 0."""
    for field in dataclasses.fields(settings):
        if only is not None and field.name not in only:
            continue
        value = getattr(settings, field.name)
        if isinstance(value, bool):
            continue
        changes: List[Union[int, float]] = []
        if isinstance(value, int) and value > 1:
            changes = sorted({1, value // 2, value - 1})
        elif isinstance(value, float) and value > 0 and _is_probability(settings, field.name):
            changes = [0.0]
        for smaller in changes:
            yield dataclasses.replace(settings, **{field.name: smaller})  # type: ignore[arg-type]  # the field's type


def _is_probability(settings: Union[Workload, FaultPlan], name: str) -> bool:
    if isinstance(settings, Workload):
        return name.endswith('_share')
    return not name.endswith(('_min', '_max'))


class _Search:
    def __init__(self, script: Optional[UserScript], same: Same, budget: int) -> None:
        self.script, self.same, self.budget, self.runs = script, same, budget, 0

    def failing(self, seed: int, workload: Workload, plan: FaultPlan) -> Optional[SimulationFailure]:
        """The failure of this run when it fails the same way (None otherwise, or the budget spent)."""
        if self.runs >= self.budget:
            return None
        self.runs += 1
        try:
            simulate(seed, workload, plan, script=self.script)
        except SimulationFailure as failure:
            return failure if self.same(failure) else None
        return None


def shrink(seed: int, workload: Workload = Workload(), plan: FaultPlan = FaultPlan(), *,
           script: Optional[UserScript] = None, same: Optional[Same] = None, seeds: int = 6,
           budget: int = 400) -> Reproducer:
    """Reduce the failing run ``simulate(seed, workload, plan, script=script)`` (see the module
    docstring). ``same``: whether another failure is the same problem (default: the same
    :func:`problem_kind`); ``seeds``: the seeds tried per candidate; ``budget``: at most this many
    runs. ValueError when the run given does not fail."""
    if seeds < 1 or budget < 1:
        raise ValueError(f'seeds and budget must be at least 1, not {seeds} and {budget}')
    try:
        simulate(seed, workload, plan, script=script)
    except SimulationFailure as found:
        original = found
    else:
        raise ValueError(f'simulate({seed}, {workload!r}, {plan!r}) does not fail: nothing to shrink') from None
    kind = problem_kind(original.problem)
    search = _Search(script, same or (lambda failure: problem_kind(failure.problem) == kind), budget)
    # A user's script runs instead of the workload's callers: of the workload, only the number of
    # clients then matters.
    fields = ('clients',) if script is not None else None
    best: Tuple[int, Workload, FaultPlan, SimulationFailure] = (seed, workload, plan, original)
    progress = True
    while progress and search.runs < budget:
        progress = False
        current_seed, current_workload, current_plan, _ = best
        candidates: List[Tuple[Workload, FaultPlan]] = [(smaller, current_plan)
                                                        for smaller in _smaller(current_workload, fields)]
        candidates += [(current_workload, smaller) for smaller in _smaller(current_plan)]
        for candidate_workload, candidate_plan in candidates:
            failing = _first_failing(search, _seeds(current_seed, seeds), candidate_workload, candidate_plan)
            if failing is not None:
                best = (failing[0], candidate_workload, candidate_plan, failing[1])
                progress = True
                break
    best = _shortest(search, best, seeds)
    return Reproducer(best[0], best[1], best[2], best[3], search.runs + 1, len(original.trace))


def _seeds(first: int, count: int) -> List[int]:
    return [first + offset for offset in range(count)]


def _first_failing(search: _Search, seeds: List[int], workload: Workload,
                   plan: FaultPlan) -> Optional[Tuple[int, SimulationFailure]]:
    for each in seeds:
        failure = search.failing(each, workload, plan)
        if failure is not None:
            return each, failure
    return None


def _shortest(search: _Search, best: Tuple[int, Workload, FaultPlan, SimulationFailure],
              seeds: int) -> Tuple[int, Workload, FaultPlan, SimulationFailure]:
    """Among a few more seeds of the smallest workload and plan, the shortest failing trace."""
    seed, workload, plan, failure = best
    for each in _seeds(seed + 1, 2 * seeds):
        other = search.failing(each, workload, plan)
        if other is not None and len(other.trace) < len(best[3].trace):
            best = (each, workload, plan, other)
    return best
