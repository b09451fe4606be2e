"""The demo's outcome: the holds the workers reported, their overlaps, the takeover of the killed
holder's lock, and the verdict printed at the end."""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Optional, Tuple

from .settings import VICTIM_INDEX, DemoSettings, worker_name

__all__ = ['DemoReport', 'Hold', 'Takeover', 'find_overlaps']


@dataclass(frozen=True)
class Hold:
    """A wall-clock interval during which ``worker`` certainly held the lock of ``key``."""

    worker: int
    key: str
    start: float
    end: float
    killed: bool = False


def find_overlaps(holds: Iterable[Hold]) -> List[Tuple[Hold, Hold]]:
    """Pairs of holds of the same key whose intervals intersect (each pair found once per later hold).

    Each reported interval lies inside the real hold (taken after acquire returned and before
    release was called), so any intersection is a real violation of mutual exclusion.
    """
    by_key: Dict[str, List[Hold]] = defaultdict(list)
    for hold in holds:
        by_key[hold.key].append(hold)
    overlaps: List[Tuple[Hold, Hold]] = []
    for key_holds in by_key.values():
        key_holds.sort(key=lambda hold: (hold.start, hold.end))
        longest: Optional[Hold] = None
        for hold in key_holds:
            if longest is not None and hold.start < longest.end:
                overlaps.append((longest, hold))
            if longest is None or hold.end > longest.end:
                longest = hold
    return overlaps


@dataclass
class Takeover:
    victim_key: str
    killed_at: float
    taker: Optional[int] = None
    taken_at: Optional[float] = None

    @property
    def seconds(self) -> Optional[float]:
        return None if self.taken_at is None else self.taken_at - self.killed_at


@dataclass
class DemoReport:
    """The outcome; :attr:`passed` is the verdict."""

    settings: DemoSettings
    engine_name: str
    acquisitions: int = 0
    increments: Dict[str, int] = field(default_factory=dict)
    counters: Dict[str, int] = field(default_factory=dict)
    holds: List[Hold] = field(default_factory=list)
    overlaps: List[Tuple[Hold, Hold]] = field(default_factory=list)
    takeover: Optional[Takeover] = None
    timeouts: int = 0
    lost_locks: int = 0
    failed_releases: int = 0
    problems: List[str] = field(default_factory=list)
    start_time: float = 0.0  # wall time at which the workers were told to go

    @property
    def counter_mismatches(self) -> Dict[str, Tuple[int, int]]:
        keys = set(self.increments) | set(self.counters)
        return {key: (self.counters.get(key, 0), self.increments.get(key, 0)) for key in sorted(keys)
                if self.counters.get(key, 0) != self.increments.get(key, 0)}

    @property
    def passed(self) -> bool:
        return (not self.overlaps and not self.counter_mismatches and not self.problems
                and self.takeover is not None and self.takeover.taken_at is not None)

    def verdict_lines(self) -> List[str]:
        """The verdict as printed: one fact per line, then PASS or FAIL."""
        settings = self.settings

        def line(label: str, text: str) -> str:
            return f'  {label + ":":<20}{text}'

        finished = sum(self.increments.values())
        lines = ['Verdict', line('acquisitions', (
            f'{self.acquisitions} by {settings.workers} workers ({finished} finished critical '
            'sections' + (', 1 cut short by the kill)' if self.takeover else ')')))]
        for key in settings.key_names:
            counter, increments = self.counters.get(key, 0), self.increments.get(key, 0)
            verdict = ('ok' if counter == increments
                       else 'LOST UPDATES' if counter < increments else 'MISMATCH')
            lines.append(line(f'counter {key}', f'{counter}, critical sections that incremented '
                                                f'it: {increments}  {verdict}'))
        lines.append(line('overlapping holds', str(len(self.overlaps))))
        for first, second in self.overlaps[:5]:
            lines.append(f'    {first.key}: {worker_name(first.worker)} held it until '
                         f'{first.end - self.start_time:.3f} s, {worker_name(second.worker)} from '
                         f'{second.start - self.start_time:.3f} s')
        takeover = self.takeover
        if takeover is None:
            lines.append(line('crash takeover', 'none: no worker was killed'))
        elif takeover.taken_at is None:
            lines.append(line('crash takeover', f'NONE: nobody took {takeover.victim_key} over after '
                                                f'{worker_name(VICTIM_INDEX)} was killed'))
        else:
            lines.append(line('crash takeover', (
                f'{worker_name(VICTIM_INDEX)} was SIGKILLed holding {takeover.victim_key}; '
                f'{worker_name(takeover.taker or 0)} took it over {takeover.seconds:.2f} s later '
                f'(lease {settings.lease_duration:g} s, heartbeat {settings.heartbeat_period:g} s)')))
        lines.append(line('acquire timeouts', f'{self.timeouts} (waits over {settings.retry_timeout:g} s;'
                                              ' the worker tried again: not an error)'))
        if self.lost_locks or self.failed_releases:
            lines.append(line('locks lost', f'{self.lost_locks} noticed before writing (write '
                                            f'skipped), {self.failed_releases} at release'))
        for problem in self.problems:
            lines.append(line('problem', problem))
        if self.passed:
            lines.append('PASS: no two holders of a key overlapped, no increment was lost, '
                         "and the dead holder's lock was taken over after its lease.")
        else:
            lines.append('FAIL: see above.')
        return lines

