"""The state of one held lock, and every rule about how DynamoDB's answers change it.

A :class:`LockState` belongs to one lock object; nothing else changes its fields. Each
transition is a method that takes values (the answer, the time) and returns a verdict; the
drivers act on verdicts (forget the lock, run a callback, log) but never decide them.

Each transition runs under ``guard``, a mutex supplied by the driver (a ``threading.Lock`` for
the threaded client, a no-op for the asyncio client, whose transitions all run on one loop). It
is held for the few assignments of one transition, never across a call to DynamoDB.
"""
from __future__ import annotations

import contextlib
import dataclasses
import enum
from decimal import Decimal
from typing import Any, ContextManager, Dict, List, NamedTuple, Optional
from typing import Protocol as TypingProtocol

from .._wire.renewals import Renewal
from .._wire.requests import MAX_CONDITION_VERSIONS
from .._model.errors import Reason
from .._model.schema import PartitionKey, Schema
from .answers import Answer, Failed, Refused

__all__ = ['FirstSeen', 'LockRow', 'LockState', 'LockView', 'Loss', 'RenewalResult', 'RenewalVerdict', 'Status',
           'TimeSource', 'how_lost', 'lock_safe_period', 'loss_from_row', 'null_guard']

# How many versions whose write may or may not have landed (lost answers) are remembered to
# recognise our own row when a condition fails; the newest of them are named in conditions.
MAX_REMEMBERED_VERSIONS = 10_000


class Status:
    """The status values of a held lock (the published ``DynamoDBLock`` constants)."""

    PENDING = 'PENDING'
    LOCKED = 'LOCKED'
    RELEASED = 'RELEASED'
    IN_DANGER = 'IN_DANGER'
    INVALID = 'INVALID'

    HELD = frozenset({LOCKED, IN_DANGER})


def null_guard() -> ContextManager[Any]:
    """A guard for state that only one thread touches (the asyncio client's)."""
    return contextlib.nullcontext()


@dataclasses.dataclass(frozen=True)
class Loss:
    """Why a lock was lost: a :class:`~python_dynamodb_lock.Reason` and the row found
    instead (None when the row was gone)."""

    reason: str
    row: Optional[Dict[str, Any]]


class RenewalVerdict(enum.Enum):
    """What one heartbeat's answer means for its lock."""

    RENEWED = 'renewed'                       # applied: a new version and a fresh lease
    LANDED_UNANSWERED = 'landed-unanswered'   # refused by our own new version: a retry met its own write
    ADOPTED_EARLIER = 'adopted-earlier'       # the row holds an earlier renewal of ours that landed unanswered
    RELEASED_EARLIER = 'released-earlier'     # our own release, reported as failed, had gone through
    STOLEN = 'stolen'                         # the row belongs to someone else, or is gone
    FAILED = 'failed'                         # not renewed; the lock stays as it is
    NOT_HELD = 'not-held'                     # the lock was released or lost meanwhile: nothing to do


class RenewalResult(NamedTuple):
    verdict: RenewalVerdict
    recovered: bool = False                   # the renewal took the lock out of IN_DANGER
    failure: Optional[Failed] = None          # why a FAILED renewal failed


class LockState:
    """Status, version and timing of one held lock."""

    def __init__(self, version: str, expiry_time: int, last_confirmed: float, lease_duration: float,
                 guard: Optional[ContextManager[Any]] = None) -> None:
        self._guard: ContextManager[Any] = guard if guard is not None else contextlib.nullcontext()
        self.status = Status.PENDING
        self.version = version
        self.expiry_time = int(expiry_time)
        # Monotonic time at which the last confirmed write was *sent*: others time our lease
        # from when they first see that write, which is never earlier.
        self.last_confirmed = last_confirmed
        self.lease_duration = float(lease_duration)
        self.unconfirmed: List[str] = []
        # A release whose write may have landed although it was reported as failed.
        self.release_maybe_applied = False
        self.loss: Optional[Loss] = None
        self.fencing_token: Optional[int] = None
        self.acquisition_id: Optional[str] = None
        # This lock's safe period (see lock_safe_period); None: the client's.
        self.safe_period: Optional[float] = None
        # The lease stored in the row (what renewals of the row write into lease_expiry). Under a
        # client session (see bind_session) it is the long row lease, while ``lease_duration``
        # and ``last_confirmed`` follow the session's renewals; ``row_confirmed`` those of the row.
        self.row_lease = self.lease_duration
        self.session_id: Optional[str] = None
        self.row_confirmed = last_confirmed
        # When the row's slow refresh under way was planned (None: none is): see plan_row_refresh.
        self.row_refresh_planned: Optional[float] = None
        # On an existing-item key: whether this lock created its row (there was no item), so that
        # its row holds nothing but the lock (see ``Written.own_row``).
        self.own_row = False

    # -- reading -------------------------------------------------------------------------

    @property
    def held(self) -> bool:
        return self.status in Status.HELD

    def status_at(self, now: float, safe_period: Optional[float]) -> str:
        """The status as of ``now``: a held lock not confirmed for longer than ``safe_period``
        (or its lease) reads IN_DANGER even before the checker has flagged it."""
        status = self.status
        if status == Status.LOCKED and safe_period is not None:
            if now - self.last_confirmed > min(safe_period, self.lease_duration):
                return Status.IN_DANGER
        return status

    def lease_remaining(self, now: float) -> float:
        """Seconds until another client may take the lock over, counted from the last
        confirmed renewal (negative once past; 0.0 once released or lost)."""
        if not self.held:
            return 0.0
        return self.lease_duration - (now - self.last_confirmed)

    def lease_running(self, now: float) -> bool:
        """Whether nobody can have taken the lock over yet.

        A waiter takes a lock over only after seeing one version unchanged for the lease on its
        own clock, counted from after that version was written; ``last_confirmed`` is taken
        before the write is sent. So a foreign row found within the lease was not a takeover:
        our own (retried) write freed the lock and somebody acquired it since.
        """
        return now - self.last_confirmed < self.lease_duration

    def our_versions(self) -> List[str]:
        """The versions a condition on our row names: the current one and the newest unconfirmed."""
        with self._guard:
            return [self.version, *self.unconfirmed[-(MAX_CONDITION_VERSIONS - 1):]]

    def is_unconfirmed(self, version: Optional[str]) -> bool:
        """Whether ``version`` is one of our writes whose answer was lost."""
        with self._guard:
            return version is not None and version in self.unconfirmed

    def is_ours(self, version: Optional[str]) -> bool:
        """Whether ``version`` was written by us for this lock (confirmed or not)."""
        with self._guard:
            return version is not None and (version == self.version or version in self.unconfirmed)

    # -- transitions ---------------------------------------------------------------------

    def acquired(self, at: float, fencing_token: Optional[int], acquisition_id: Optional[str]) -> None:
        with self._guard:
            self.status = Status.LOCKED
            self.last_confirmed = at
            self.fencing_token = fencing_token
            self.acquisition_id = acquisition_id

    def bind_session(self, session_id: str, session_lease: float, session_confirmed: float) -> None:
        """The lock was acquired under a client session: it is safe as long as the session is
        renewed (a waiter may take it over once the session's version has stayed unchanged for
        ``session_lease``, which it may have watched since ``session_confirmed``)."""
        with self._guard:
            self.session_id = session_id
            self.row_confirmed = self.last_confirmed
            self.last_confirmed = min(self.last_confirmed, session_confirmed)
            self.lease_duration = float(session_lease)

    def session_confirmed(self, at: float) -> bool:
        """A renewal of the lock's session, sent at ``at``, was confirmed. True when that took
        the lock out of IN_DANGER."""
        with self._guard:
            if self.status not in Status.HELD:
                return False
            recovered = self.status == Status.IN_DANGER
            self.last_confirmed = max(self.last_confirmed, at)
            self.status = Status.LOCKED
            return recovered

    def plan_row_refresh(self, now: float, every: float) -> bool:
        """Whether the row's slow refresh (under a session) is due at ``now``: ``every`` seconds
        have passed since the last confirmed one, and since one was last planned. A refresh found
        due counts as planned from ``now`` until its answer is settled, so that one still in
        flight when the next period starts is not planned a second time (it would then be sent
        again as soon as its first send is answered)."""
        with self._guard:
            last = self.row_confirmed
            if self.row_refresh_planned is not None:
                last = max(last, self.row_refresh_planned)
            if now - last < every:
                return False
            self.row_refresh_planned = now
            return True

    def remember_unconfirmed(self, version: str) -> None:
        """A write that may have landed unanswered: later conditions accept its version too."""
        with self._guard:
            self.unconfirmed.append(version)
            del self.unconfirmed[:-MAX_REMEMBERED_VERSIONS]

    def note_release_maybe_applied(self) -> None:
        """A release reported as failed may have removed the row all the same."""
        with self._guard:
            self.release_maybe_applied = True

    def forget(self, status: str, loss: Optional[Loss] = None) -> None:
        """Set a final status (RELEASED or INVALID)."""
        with self._guard:
            self.status = status
            self.unconfirmed.clear()
            if loss is not None:
                self.loss = loss

    def mark_in_danger(self, now: float, safe_period: float) -> Optional[float]:
        """LOCKED -> IN_DANGER once not confirmed for longer than ``safe_period``.

        :returns: how long the lock has gone unconfirmed when this call made the change, else None.
        """
        with self._guard:
            unconfirmed_for = now - self.last_confirmed
            if self.status == Status.LOCKED and unconfirmed_for > safe_period:
                self.status = Status.IN_DANGER
                return unconfirmed_for
        return None

    def next_renewal(self, new_version: str, new_expiry_time: Optional[int], partition_key: PartitionKey,
                     sort_key: str, new_lease_expiry: Optional[Decimal] = None) -> Optional[Renewal]:
        """The renewal to send while the lock is held, or None when it no longer is."""
        with self._guard:
            if self.status not in Status.HELD:
                return None
            expected = [self.version, *self.unconfirmed[-(MAX_CONDITION_VERSIONS - 1):]]
        return Renewal(partition_key, sort_key, expected, new_version, new_expiry_time, new_lease_expiry)

    def settle_renewal(self, renewal: Renewal, answer: Answer, attempt_started: float, now: float) -> RenewalResult:
        """Apply the answer to one renewal.

        A refused condition means the lock was taken over (STOLEN), unless the row carries a
        version we wrote ourselves and never heard back about, or our own release (reported as
        failed) had removed it. Any other failure leaves the lock as it is; once it has gone
        unconfirmed for the safe period the checker flags it IN_DANGER.

        A planned slow refresh (:meth:`plan_row_refresh`) is over, whatever the answer: a
        confirmed one moved ``row_confirmed``; any other is planned again next period.
        """
        with self._guard:
            self.row_refresh_planned = None
        if isinstance(answer, Refused):
            row_version = Schema.version_of(answer.item)
            if row_version != renewal.new_version:
                return RenewalResult(self._settle_refused_renewal(answer, row_version, now))
            verdict = RenewalVerdict.LANDED_UNANSWERED
        elif isinstance(answer, Failed):
            if answer.maybe_applied:
                self.remember_unconfirmed(renewal.new_version)
            return RenewalResult(RenewalVerdict.FAILED, failure=answer)
        else:
            verdict = RenewalVerdict.RENEWED
        with self._guard:
            if self.status not in Status.HELD:
                return RenewalResult(RenewalVerdict.NOT_HELD)
            self.version = renewal.new_version
            if renewal.new_expiry_time is not None:
                self.expiry_time = renewal.new_expiry_time
            self.unconfirmed.clear()
            self.row_confirmed = attempt_started
            if self.session_id is not None:
                # The row's slow refresh: it keeps the row alive for others, but only the
                # session's renewals keep the lock safe from session-aware waiters.
                return RenewalResult(verdict)
            recovered = self.status == Status.IN_DANGER
            self.last_confirmed = attempt_started
            self.status = Status.LOCKED
        return RenewalResult(verdict, recovered)

    def _settle_refused_renewal(self, refused: Refused, row_version: Optional[str], now: float) -> RenewalVerdict:
        with self._guard:
            if self.status not in Status.HELD:
                return RenewalVerdict.NOT_HELD
            if row_version is not None and row_version in self.unconfirmed:
                # An older renewal of ours landed unconfirmed: adopt it; renew next period.
                self.version = row_version
                self.unconfirmed.clear()
                return RenewalVerdict.ADOPTED_EARLIER
            if self.release_maybe_applied and (Schema.holds_no_lock(refused.item) or self.lease_running(now)):
                self.status = Status.RELEASED
                self.unconfirmed.clear()
                return RenewalVerdict.RELEASED_EARLIER
            self.status = Status.INVALID
            self.unconfirmed.clear()
            self.loss = loss_from_row(refused.item)
            return RenewalVerdict.STOLEN

    def settle_guard_refused(self, row: Optional[Dict[str, Any]], now: float) -> Optional[str]:
        """A guarded write found the lock row without this acquisition's id.

        :returns: the new final status: RELEASED when our own release (reported as failed)
            explains it, INVALID otherwise; None when the lock was no longer held anyway.
        """
        with self._guard:
            if self.status not in Status.HELD:
                return None
            if self.release_maybe_applied and (Schema.holds_no_lock(row) or self.lease_running(now)):
                self.status = Status.RELEASED
            else:
                self.status = Status.INVALID
                self.loss = loss_from_row(row)
            self.unconfirmed.clear()
            return self.status

    def replaced_by_new_acquisition(self) -> Optional[str]:
        """This client acquired the key again with a conditional write, so our row is gone.

        :returns: ``RELEASED`` when a release of ours reported as failed had deleted it,
            ``INVALID`` when the lock was lost without our noticing, None when it was no
            longer held anyway.
        """
        with self._guard:
            if self.status not in Status.HELD:
                return None
            self.status = Status.RELEASED if self.release_maybe_applied else Status.INVALID
            if self.status == Status.INVALID:
                self.loss = Loss(Reason.ROW_GONE, None)
            self.unconfirmed.clear()
            return self.status


def lock_safe_period(client_safe_period: float, client_lease: float, lease: float) -> float:
    """The safe period of a lock whose lease is ``lease``: the client's safe period for a lock of
    the client's lease, else the same fraction of the lock's own lease (20 s of 30 s, the
    defaults, makes 40 s of a 60 s lease and 4 s of a 6 s one). A fixed margin (lease minus 10 s)
    would leave short leases no safe period at all; a fraction keeps IN_DANGER before the lease
    ends for every lease."""
    if lease == client_lease:
        return client_safe_period
    return client_safe_period * lease / client_lease


def loss_from_row(row: Optional[Dict[str, Any]]) -> Loss:
    """The loss a refused condition reveals: taken over (a foreign lock row) or gone (no row,
    a row marked released, or an item whose lock attributes were removed, by a force release)."""
    if Schema.holds_no_lock(row):
        return Loss(Reason.ROW_GONE, None)
    return Loss(Reason.TAKEN_OVER, row)


def how_lost(row: Optional[Dict[str, Any]]) -> Optional[str]:
    """What happened to a lock whose row holds no lock any more (a ``ROW_GONE`` loss), in words
    for the log; None when the row is another holder's (taken over). A row marked released by
    someone else than its holder can only be a force release; a row gone may be one too."""
    if not Schema.holds_no_lock(row):
        return None
    if not row:
        return 'its row was deleted by someone else (a force release, a TTL expiry or another program)'
    if Schema.is_released(row):
        return ('force-released by someone else (an operator\'s force_release_lock or `dynamodb-lock release '
                '--force`): its row was marked released')
    return 'force-released by someone else: the lock attributes of its item were removed'


class TimeSource(TypingProtocol):
    """What the protocol core reads of a clock: the time, never a wait (a wait is a
    :class:`~python_dynamodb_lock._core.effects.Sleep` its driver performs). The clients'
    :class:`~python_dynamodb_lock._clock.Clock` is one."""

    def monotonic(self) -> float:
        """Seconds on a clock that never goes backwards."""

    def time(self) -> float:
        """Wall-clock seconds since the epoch."""


class LockRow(TypingProtocol):
    """What the protocol core reads of a lock as it is stored (``BaseDynamoDBLock`` is one):
    its key and the published attributes its writes carry."""

    partition_key: PartitionKey
    sort_key: str
    unique_identifier: str
    owner_name: str
    lease_duration: float
    additional_attributes: Dict[str, Any]
    record_version_number: str
    expiry_time: int
    fencing_token: Optional[int]


class LockView(LockRow, TypingProtocol):
    """What the protocol core sees of a held lock (``HeldLock`` is one): a :class:`LockRow`
    with its :class:`LockState` and its clock."""

    _state: LockState
    _clock: TimeSource

    #: Whether the lock was added to an existing item of the application.
    lock_existing_item: bool


class FirstSeen(TypingProtocol):
    """The client's memory of the rows it saw (``acquire.Observations`` is one), as a session
    watch reads it."""

    def first_seen(self, key: str, version: Optional[str], now: float) -> float:
        """When ``version`` was first seen at ``key``, unchanged since (``now`` when new)."""
