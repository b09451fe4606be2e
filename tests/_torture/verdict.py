"""The verdict on lost locks of a torture: a loss is legitimate only once the holder's lease was
spent, and every loss is reported.

A loaded machine may starve a holder's heartbeats past its lease; another client then takes the
lock over, as it must (the holder is indistinguishable from a dead one), and the holder is told
``LOCK_STOLEN``. "No ``LOCK_STOLEN`` at all" is then the wrong verdict. What the library
promises, and what :meth:`History.problems` checks, is:

1. **no steal while the holder's lease ran**: every loss reported to a holder (a ``LOCK_STOLEN``
   callback, a release that found the lock taken) is preceded by a takeover of that key from
   that holder (a ``taking_over`` event of a waiter's metrics hook) claimed after the holder's
   lease was spent, i.e. at least ``lease_duration`` after its last confirmed renewal was sent
   (``lock.last_updated_time``), and before the holder was told. A waiter times the lease
   from when it first saw the holder's version, which is never earlier than that send: so the
   stealing takeover's claim always lies in that window, however late the heartbeats ran;
2. **every loss is reported**: a takeover that landed while a hold lasted (the taker's
   ``acquire`` had returned it, ``took_over_from`` naming that hold's owner and fencing token)
   was reported lost to that hold;
3. **no overlap except of holds reported lost**: two holds of one key never overlap in time,
   unless the earlier one was reported lost (whose report is checked by 1).

Times are of one monotonic clock shared by the holders and the takers (``time.monotonic``, or
the tests' ``ManualClock``). The check is pure (:func:`verdict`), so that a synthetic history
shows it has teeth (tests/test_torture_verdict.py).
"""
from __future__ import annotations

import dataclasses
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Set

__all__ = ['Claim', 'History', 'LossReport', 'Takeover', 'Tenure', 'steals_within_lease', 'torture_losses',
           'unexcused_overlaps', 'unreported_losses', 'verdict']

STOLEN = 'LOCK_STOLEN'
# The events of a row a client could not free, which it leaves to expire.
ABANDONED = frozenset({'release_failed_forgotten', 'orphan_cleanup_failed', 'orphan_unverified'})


@dataclasses.dataclass(frozen=True)
class Claim:
    """A waiter presumed the holder ``owner`` of ``key`` dead and was about to write over its row
    (the ``taking_over`` event), at ``at``."""

    key: str
    owner: str
    at: float


@dataclasses.dataclass(frozen=True)
class Takeover:
    """A takeover that succeeded: the taker's acquisition returned a lock whose ``took_over_from``
    names ``owner`` and ``token``; the write had landed by ``landed_by``."""

    key: str
    owner: str
    token: Optional[int]
    landed_by: float


@dataclasses.dataclass(frozen=True)
class LossReport:
    """The holder ``owner`` of ``key`` was told at ``at`` that it lost its lock, whose last
    confirmed write had been sent at ``last_renewed``, for a lease of ``lease`` seconds."""

    key: str
    owner: str
    last_renewed: float
    lease: float
    at: float
    how: str = 'callback'


@dataclasses.dataclass
class Tenure:
    """A hold as its holder saw it: from ``start`` to ``end`` it relied on the lock."""

    key: str
    owner: str
    token: Optional[int]
    start: float
    end: float = float('inf')
    lost: bool = False          # the library reported this hold's lock lost
    lock: Any = dataclasses.field(default=None, repr=False, compare=False)


def _unexplained(report: LossReport, claims: List[Claim]) -> bool:
    spent = report.last_renewed + report.lease
    return not any(claim.key == report.key and claim.owner == report.owner and spent <= claim.at <= report.at
                   for claim in claims)


def steals_within_lease(reports: List[LossReport], claims: List[Claim]) -> List[str]:
    """Promise 1: every loss reported is explained by a takeover claimed once the lease was spent."""
    return [f'LOCK_STOLEN while the lease ran: {report} (no takeover of {report.key} from {report.owner} '
            f'claimed between {report.last_renewed + report.lease:.3f} and {report.at:.3f})'
            for report in reports if _unexplained(report, claims)]


def unreported_losses(tenures: List[Tenure], takeovers: List[Takeover]) -> List[str]:
    """Promise 2: a takeover that landed during a hold was reported lost to that hold."""
    return [f'a loss nobody was told of: {takeover} while {tenure}'
            for takeover in takeovers for tenure in tenures
            if tenure.key == takeover.key and tenure.owner == takeover.owner and not tenure.lost
            and (takeover.token is None or tenure.token == takeover.token)
            and tenure.start <= takeover.landed_by < tenure.end]


def unexcused_overlaps(tenures: List[Tenure]) -> List[str]:
    """Promise 3: holds of one key overlap only when the earlier one was reported lost."""
    problems = []
    by_key: Dict[str, List[Tenure]] = {}
    for tenure in tenures:
        by_key.setdefault(tenure.key, []).append(tenure)
    for holds in by_key.values():
        holds.sort(key=lambda tenure: tenure.start)
        for index, earlier in enumerate(holds):
            for later in holds[index + 1:]:
                if later.start >= earlier.end:
                    break
                if not earlier.lost:
                    problems.append(f'overlapping holds, the first not reported lost: {earlier} and {later}')
    return problems


def verdict(reports: List[LossReport], claims: List[Claim], tenures: List[Tenure],
            takeovers: List[Takeover]) -> List[str]:
    """What breaks the promises 1-3 of this module; empty when all is well."""
    return (steals_within_lease(reports, claims) + unreported_losses(tenures, takeovers)
            + unexcused_overlaps(tenures))


def torture_losses(holds: List[Any], workers: List[Dict[str, Any]], lease: float) -> List[str]:
    """Promises 1 and 2 on a multi-process torture's records (:class:`_torture.runner.TortureResult`:
    its exclusive holds, the workers' callbacks and claims; overlaps are checked there, holds
    reported lost excused). A hold is reported lost by a ``LOCK_STOLEN`` callback, or by its
    strict release or guarded write (``Hold.lost``), when the worker recorded it (after its release)."""
    claims = [Claim(*claim) for worker in workers for claim in worker.get('claims', ())]
    reports = [LossReport(call[1], call[2], call[6], call[7], call[4]) for worker in workers
               for call in worker['callbacks'] if call[0] == STOLEN and len(call) > 7]
    exclusive = [hold for hold in holds if hold.mode not in ('shared', 'published')]
    reports += [LossReport(hold.key, hold.owner, hold.last_renewed, lease, hold.released_at, 'release or write')
                for hold in exclusive if hold.lost and hold.released_at is not None]
    told = set()    # the hold each callback was about: its owner's latest hold of the key by then
    for report in reports:
        mine = [hold for hold in exclusive if (hold.key, hold.owner) == (report.key, report.owner)
                and hold.start <= report.at]
        if mine:
            told.add(id(max(mine, key=lambda hold: hold.start)))
    tenures = [Tenure(hold.key, hold.owner, hold.fencing_token, hold.start, hold.end,
                      lost=hold.lost or id(hold) in told) for hold in exclusive]
    takeovers = [Takeover(hold.key, hold.took_over_from[0], hold.took_over_from[1], hold.start)
                 for hold in exclusive if hold.took_over_from]
    return steals_within_lease(reports, claims) + unreported_losses(tenures, takeovers)


class History:
    """Records what :func:`verdict` needs while a torture runs, from the public API only.

    Give each lock client ``metrics=history.metrics()``, each acquisition
    ``app_callback=history.on_callback`` (or a :class:`CallbackRecorder` whose ``action`` it
    is); call :meth:`acquired` with each lock an acquisition returned, :meth:`enter` /
    :meth:`leave` around the time the caller relies on it, :meth:`released` once its release
    returned or was cut short. Thread-safe. ``clock``: the clients' monotonic clock.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.now = clock
        self.claims: List[Claim] = []
        self.takeovers: List[Takeover] = []
        self.tenures: List[Tenure] = []
        self.reports: List[LossReport] = []
        self._release_stolen: List[Any] = []       # (owner, key, at): a release found the lock taken
        #: Keys of rows the clients said they could not free (a release or the undo of an
        #: interrupted acquire failed): such a row is left for others to take over after its lease.
        self.abandoned: Set[str] = set()
        self._told: Dict[int, float] = {}           # id(lock) -> when its LOCK_STOLEN callback came
        self._guard = threading.Lock()

    # -- recording ---------------------------------------------------------------------------

    def metrics(self, owner: str) -> Callable[[Any], None]:
        """A ``metrics=`` hook for the lock client whose ``owner_name`` is ``owner``."""
        def hook(event: Any) -> None:
            if event.name == 'taking_over':
                with self._guard:
                    self.claims.append(Claim(event.key, str(event.attributes.get('owner')), self.now()))
            elif event.name == 'release_stolen':
                with self._guard:
                    self._release_stolen.append((owner, event.key, self.now()))
            elif event.name in ABANDONED:
                with self._guard:
                    self.abandoned.add(event.key)
        return hook

    def on_callback(self, code: str, lock: Any) -> None:
        """An ``app_callback``: a ``LOCK_STOLEN`` is a loss reported to the holder."""
        if code != STOLEN:
            return
        for each in getattr(lock, 'locks', (lock,)):
            self._report(each, 'callback')

    def acquired(self, lock: Any) -> None:
        """An acquisition returned ``lock``: a takeover, if it took the key over."""
        taken = getattr(lock, 'took_over_from', None)
        if taken is not None:
            with self._guard:
                self.takeovers.append(Takeover(lock.unique_identifier, taken.owner_name, taken.fencing_token,
                                               self.now()))

    def enter(self, lock: Any) -> Tenure:
        tenure = Tenure(lock.unique_identifier, lock.owner_name, lock.fencing_token, self.now(), lock=lock)
        with self._guard:
            self.tenures.append(tenure)
        return tenure

    def leave(self, tenure: Tenure) -> None:
        tenure.end = self.now()

    def released(self, tenure: Tenure) -> None:
        """Its release returned (or was cut short): a lock found taken then (status ``INVALID``)
        was reported lost by the release."""
        if tenure.lock.status == 'INVALID':
            self._report(tenure.lock, 'release')

    def _report(self, lock: Any, how: str) -> None:
        with self._guard:
            if id(lock) in self._told:
                return
            self._told[id(lock)] = at = self.now()
            self.reports.append(LossReport(lock.unique_identifier, lock.owner_name, lock.last_updated_time,
                                           float(lock.lease_duration), at, how))

    # -- judging -----------------------------------------------------------------------------

    def _settle(self) -> None:
        """Mark the tenures reported lost: told by a callback or a release, or the release
        finished in the background (after an interrupted release) found the lock taken."""
        for tenure in self.tenures:
            if tenure.lock is not None and tenure.lock.status == 'INVALID':
                self._report(tenure.lock, 'status')
            if id(tenure.lock) in self._told:
                tenure.lost = True
        for owner, key, at in self._release_stolen:
            mine = [tenure for tenure in self.tenures if tenure.owner == owner and tenure.key == key
                    and tenure.start <= at]
            if mine:
                tenure = max(mine, key=lambda each: each.start)
                if not tenure.lost:
                    tenure.lost = True
                    with self._guard:
                        self._told[id(tenure.lock)] = at
                        self.reports.append(LossReport(key, owner, tenure.lock.last_updated_time,
                                                       float(tenure.lock.lease_duration), at, 'background release'))

    def problems(self) -> List[str]:
        """:func:`verdict` on what was recorded (call it once every client settled)."""
        self._settle()
        with self._guard:
            return verdict(list(self.reports), list(self.claims), list(self.tenures), list(self.takeovers))

    def lost(self) -> int:
        """How many locks were reported lost (legitimate takeovers, once :meth:`problems` is empty)."""
        return len(self.reports)
