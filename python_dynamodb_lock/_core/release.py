"""Releasing a lock: one conditional delete, and how its answer is judged.

The delete names every version this lock may carry (the confirmed one and renewals whose
answers were lost). A refusal is judged by the row returned with it; an unanswered delete by a
consistent read. :func:`release_verdict` then says what the caller is told.
"""
from __future__ import annotations

import dataclasses
import enum
import uuid
from typing import Any, Callable, Dict, Mapping, Optional, Sequence, Tuple

from .._wire.lock_writes import acquire_over, free_row
from .._wire.requests import get
from .._model.errors import DynamoDBLockError, Reason
from .._model.schema import COL_RECORD_VERSION_NUMBER, PartitionKey, Schema
from .write import AcquireAttempt, Written, free_landed, new_lock_item, token_floor, undo_write, with_token
from .answers import Answer, Applied, Failed, Refused
from .effects import Call, Emit, Protocol, Settle, Sleep
from .events import Event, Kind
from .messages import describe_key, explain
from .shared_ops import entry_answer, leave_write
from .state import LockState, LockView, Loss, Status, TimeSource, loss_from_row

__all__ = ['ReleaseOutcome', 'ReleaseResult', 'ReleaseSettings', 'ReleaseVerdict', 'free_handed', 'precheck_release',
           'release', 'release_again', 'release_verdict']


class ReleaseOutcome(enum.Enum):
    RELEASED = 'released'
    ROW_GONE = 'row_gone'                 # nothing to delete: our delete landed unanswered, or the row expired
    MET_NEXT_HOLDER = 'met_next_holder'   # an earlier attempt released it; the next holder is there now
    STOLEN = 'stolen'
    FAILED = 'failed'


@dataclasses.dataclass(frozen=True)
class ReleaseResult:
    outcome: ReleaseOutcome
    row: Optional[Dict[str, Any]] = None
    failed: Optional[Failed] = None
    handed: Optional[Written] = None    # the row written for the successor the lock was handed to
    earlier_attempt: bool = False       # ROW_GONE: an earlier attempt of this release may have freed it


@dataclasses.dataclass(frozen=True)
class ReleaseVerdict:
    """What a release comes to: the lock's final status (None: still held), the event to emit,
    the error to raise (None: return normally), and what ``release()`` returns (``released``:
    whether this release freed the row)."""

    final_status: Optional[str]
    event: Kind
    error: Optional[DynamoDBLockError] = None
    loss: Optional[Loss] = None
    handed_over: bool = False
    duration: Optional[float] = None    # seconds the release took
    detail: str = ''                    # why a best-effort release failed (for the log)
    released: bool = False              # this release freed the row (False: gone, not ours, failed)


def precheck_release(state: LockState, owned_here: bool, best_effort: bool,
                     unique_identifier: str, owner_name: str) -> Optional[ReleaseVerdict]:
    """The verdict for a lock that is not ours to delete, or None when the delete should go ahead.

    Already released: a no-op. Lost (INVALID): a strict release raises LOCK_STOLEN naming the
    new holder, so code that relies on a strict release learns its critical section was not
    protected; best effort says nothing. Held by another client object: LOCK_NOT_OWNED.
    """
    status = state.status
    if status == Status.INVALID and not best_effort:
        loss = state.loss or Loss(Reason.TAKEN_OVER, None)
        return ReleaseVerdict(None, Kind.RELEASE_SKIPPED, _stolen_error(unique_identifier, loss, 'before it was'), loss)
    if status not in Status.HELD:
        return ReleaseVerdict(None, Kind.RELEASE_SKIPPED)
    if not owned_here:
        message = f'{unique_identifier} is not held by this client ({owner_name})'
        error = None if best_effort else DynamoDBLockError(DynamoDBLockError.LOCK_NOT_OWNED, message)
        return ReleaseVerdict(None, Kind.RELEASE_NOT_OWNED, error)
    return None


@dataclasses.dataclass(frozen=True)
class ReleaseSettings:
    schema: Schema
    expiry_period: float
    keep_released_rows: bool = True


def release(settings: ReleaseSettings, lock: LockView, clock: TimeSource, successor: Optional[AcquireAttempt] = None,
            attributes: Optional[Mapping[str, Any]] = None,
            keep_row: Optional[bool] = None) -> Protocol[ReleaseResult]:
    """Free the lock's row if it carries one of our versions, and judge the answer.

    The row is kept, marked released, with its fencing token (or deleted, when ``keep_row`` is
    False; None: the client's ``keep_released_rows``); either write is conditioned on every
    version the row may carry. A lock on an existing item removes only the lock's attributes
    (the fencing token stays unless ``keep_row`` is False), never the item. With a
    ``successor`` (an acquisition of this client waiting for the key), the same single write
    hands the lock over instead: it writes the successor's row, with the next fencing token,
    and ``ReleaseResult.handed`` carries it.

    ``attributes`` (``release_lock(attributes=...)``) are written onto the released row, for
    the next holder: a successor's row gets them too, under its own additional attributes.
    """
    schema = settings.schema
    state: LockState = lock._state
    attempt_started = clock.monotonic()     # before the successor's lease_expiry is read off the wall clock
    view = _view_of(lock)
    if successor is not None:
        item = {**(attributes or {}), **new_lock_item(successor, clock)}
        ours = item[COL_RECORD_VERSION_NUMBER]
        removed = schema.extra_names(lock.additional_attributes) - set(item)

        def write(versions: Sequence[str]) -> Protocol[Answer]:
            answer: Answer = yield Call(acquire_over(schema, item, versions, token_floor(clock), removed))
            return answer
    elif getattr(lock, 'shared', False):
        item, ours = {}, ''    # a shared holder's entry leaves; the row shows no version of ours

        def write(versions: Sequence[str]) -> Protocol[Answer]:
            return view((yield from _leave(settings, lock, versions, clock)))
    else:
        item, ours = {}, str(uuid.uuid4())
        keep = settings.keep_released_rows if keep_row is None else keep_row
        existing = on_item(lock)

        def write(versions: Sequence[str]) -> Protocol[Answer]:
            answer: Answer = yield Call(free_row(schema, lock.partition_key, lock.sort_key, versions, ours,
                                                 int(clock.time() + settings.expiry_period), int(clock.time()),
                                                 lock.additional_attributes, keep, attributes, existing))
            return answer

    def released(row: Optional[Mapping[str, Any]] = None) -> ReleaseResult:
        handed = (Written(with_token(item, row, not successor.lock_existing_item), attempt_started,
                          own_row=successor.lock_existing_item and lock._state.own_row)
                  if successor is not None else None)
        return ReleaseResult(ReleaseOutcome.RELEASED, handed=handed)

    try:
        answer = yield from write(state.our_versions())
        if isinstance(answer, Refused):
            row_version = Schema.version_of(answer.item)
            if state.is_unconfirmed(row_version):
                # An old renewal of ours that landed unconfirmed, beyond the condition's list.
                answer = yield from write([str(row_version)])
    except GeneratorExit:
        raise
    except BaseException:
        state.note_release_maybe_applied()    # interrupted in flight: the write may land
        if successor is not None:             # and the row it hands over would be nobody's
            yield Settle(undo_write(successor, clock, ours))
        raise
    if isinstance(answer, Applied):
        return released(answer.response.get('Attributes'))
    if isinstance(answer, Refused):
        row = answer.item
        if Schema.version_of(row) == ours:
            return released(row)              # ours landed; botocore's retry met it
        if Schema.holds_no_lock(row):     # no lock there (an item's lock removed, too)
            earlier = answer.retried or state.release_maybe_applied
            if earlier and row is not None and _held_by_another_after_us(state, row, clock.monotonic()):
                return ReleaseResult(ReleaseOutcome.STOLEN, dict(row))
            return ReleaseResult(ReleaseOutcome.ROW_GONE, earlier_attempt=earlier)
        if (answer.retried or state.release_maybe_applied) and state.lease_running(clock.monotonic()):
            return ReleaseResult(ReleaseOutcome.MET_NEXT_HOLDER, row)
        return ReleaseResult(ReleaseOutcome.STOLEN, row)
    assert isinstance(answer, Failed)
    return (yield from _check_lost_answer(settings, lock, state, clock, answer, successor, ours, view, released))


def _check_lost_answer(settings: ReleaseSettings, lock: LockView, state: LockState, clock: TimeSource,
                       answer: Failed,
                       successor: Optional[AcquireAttempt], ours: str, view: Callable[[Answer], Answer],
                       released: Callable[..., ReleaseResult]) -> Protocol[ReleaseResult]:
    """:func:`release` after a failed write: one read tells whether it landed (``ours``: the
    version a handover wrote). A handover whose landing cannot be told frees the row it may have
    written for the successor, apart from the caller."""
    schema = settings.schema
    if not answer.maybe_applied:
        return ReleaseResult(ReleaseOutcome.FAILED, failed=answer)
    state.note_release_maybe_applied()
    try:
        read = yield Call(get(schema, lock.partition_key, lock.sort_key))
    except GeneratorExit:
        raise
    except BaseException:
        if successor is not None:     # the row handed over may be there, and nobody's
            yield Settle(free_landed(successor, clock, ours, False))
        raise
    if not isinstance(read, Applied):
        if successor is not None:     # the row handed over may be there: the successor goes on waiting
            yield Settle(free_landed(successor, clock, ours, False))
        return ReleaseResult(ReleaseOutcome.FAILED, failed=read if isinstance(read, Failed) else answer)
    seen = view(Refused(read.response.get('Item') or None))
    current = seen.item if isinstance(seen, Refused) else None
    if Schema.version_of(current) == ours:
        return released(current)
    if current is None or Schema.holds_no_lock(current):
        if _held_by_another_after_us(state, current, clock.monotonic()):
            return ReleaseResult(ReleaseOutcome.STOLEN, dict(current or {}))
        return ReleaseResult(ReleaseOutcome.RELEASED)
    if state.is_ours(Schema.version_of(current)):
        return ReleaseResult(ReleaseOutcome.FAILED, failed=answer)
    if not state.lease_running(clock.monotonic()):
        return ReleaseResult(ReleaseOutcome.STOLEN, dict(current))
    return ReleaseResult(ReleaseOutcome.RELEASED)


def _held_by_another_after_us(state: LockState, row: Optional[Mapping[str, Any]], now: float) -> bool:
    """Whether a free row (released, or an item's lock removed), found by a release whose write
    may have landed (an answer lost, or an earlier attempt's), shows a loss rather than our release.

    The rule: a free row whose fencing token is larger than the lock's was acquired by another
    holder after us (every acquisition makes the token grow; our release keeps ours). If our
    lease still runs, nobody could take the key from us: our release landed first and the next
    holder came after it, so "released" is right. If it ran out, the other may have taken the
    key over before our write landed (which then found no version of ours): we cannot tell the
    two apart, and since every loss is reported, the release reports the lock stolen. Telling a
    lock that was in fact released "lost" leaves nothing held; telling a lock that was taken
    over "released" would hide the loss. A row without a token (a published client's, or no
    row at all) tells nothing: the release stands.
    """
    token, ours = Schema.fencing_token_of(row), state.fencing_token
    if token is None or ours is None or token <= ours:
        return False
    return not state.lease_running(now)


def release_again(settings: ReleaseSettings, lock: LockView, versions: Sequence[str], clock: TimeSource,
                  lease: float, attributes: Optional[Mapping[str, Any]] = None,
                  keep_row: Optional[bool] = None) -> Protocol[None]:
    """Finish a release that an interruption cut short, apart from the caller (``Settle``).

    The lock has already been forgotten (nobody renews it; the caller was told nothing). Its
    row must stop carrying any of ``versions``: the release is sent again, conditioned on them,
    until an answer says the row is freed or no longer ours (the interrupted write may have got
    there first), retried at growing intervals for one lease when DynamoDB fails.
    """
    schema = settings.schema
    deadline = clock.monotonic() + lease
    delay = _FIRST_RETRY
    keep = settings.keep_released_rows if keep_row is None else keep_row
    while True:
        if getattr(lock, 'shared', False):
            answer = yield from _leave(settings, lock, versions, clock)
        else:
            answer = yield Call(free_row(schema, lock.partition_key, lock.sort_key, versions, str(uuid.uuid4()),
                                         int(clock.time() + settings.expiry_period), int(clock.time()),
                                         lock.additional_attributes, keep, attributes, on_item(lock)))
        remaining = deadline - clock.monotonic()
        if not isinstance(answer, Failed) or remaining <= 0:
            return
        if (yield Sleep(min(delay, remaining))):
            deadline = clock.monotonic()    # the client is closing: one last try
        delay = min(delay * 2, _LONGEST_RETRY)


def on_item(lock: LockView) -> bool:
    """Whether ``lock``'s release removes only the lock's attributes from an item of the
    application: a lock on an existing item, unless its row holds nothing but the lock (there
    was no item at the key: see ``Written.own_row``), which is freed as a plain lock's row is
    (marked released with a TTL, or deleted), leaving no row without a holder or a TTL."""
    return lock.lock_existing_item and not lock._state.own_row


def _leave(settings: ReleaseSettings, lock: LockView, versions: Sequence[str], clock: TimeSource) -> Protocol[Answer]:
    """A shared holder's release: its entry leaves the row (the last one frees it)."""
    return (yield from leave_write(settings.schema, lock.partition_key, lock.sort_key,
                                   str(lock._state.acquisition_id), versions, clock, settings.expiry_period,
                                   settings.keep_released_rows))


def _view_of(lock: LockView) -> Callable[[Answer], Answer]:
    """How a release judges the rows its answers return: a shared holder sees its entry."""
    return lambda answer: entry_answer(lock, answer)


# Retries of a release finished in the background: the first after this many seconds, each
# later one twice as late, up to the longest gap.
_FIRST_RETRY = 0.25
_LONGEST_RETRY = 5.0


def free_handed(settings: ReleaseSettings, lock_key: Tuple[PartitionKey, str], handed: Written, clock: TimeSource,
                attributes: Optional[Mapping[str, Any]] = None, unique_identifier: str = '') -> Protocol[None]:
    """Free a row a release handed over to a waiter that had stopped waiting meanwhile: nobody
    holds it, and it would block everybody for a lease. ``attributes``: those the release left
    (they stay on the freed row). A row written for a lock on an existing item (the one without
    a TTL) loses only its lock attributes. A row it could not free is reported
    (``ORPHAN_CLEANUP_FAILED`` for ``unique_identifier``)."""
    schema = settings.schema
    item_lock = schema.ttl_attribute_name not in handed.item and not handed.own_row
    freed = yield Call(free_row(schema, lock_key[0], lock_key[1], [str(Schema.version_of(handed.item))],
                                str(uuid.uuid4()), int(clock.time() + settings.expiry_period), int(clock.time()),
                                () if item_lock else handed.item, settings.keep_released_rows,
                                None if item_lock else attributes, item_lock))
    if isinstance(freed, Failed):     # the row is left: others take it over after its lease
        yield Emit(Event(Kind.ORPHAN_CLEANUP_FAILED, unique_identifier, fields={
            'what': describe_key(schema, lock_key[0], lock_key[1]), 'error': explain(schema, freed.error)}))


def release_verdict(result: ReleaseResult, best_effort: bool, schema: Schema, unique_identifier: str) -> ReleaseVerdict:
    """What the caller is told, and the lock's final status.

    A failed strict release keeps the lock held (and renewed) so that it can be retried; a
    failed best-effort release forgets it (others take it over after its lease). The release
    freed the row (``released``) when its write was applied, or when an earlier attempt of it
    (a retry after a lost answer, or a release of this lock that reported a failure) explains
    the row found gone or held by the next holder; a row gone otherwise (expired,
    force-released) or taken over was not freed by it.
    """
    outcome = result.outcome
    if outcome is ReleaseOutcome.RELEASED:
        return ReleaseVerdict(Status.RELEASED, Kind.RELEASED, released=True)
    if outcome is ReleaseOutcome.ROW_GONE:
        if result.earlier_attempt or best_effort:
            return ReleaseVerdict(Status.RELEASED, Kind.RELEASE_ROW_GONE, released=result.earlier_attempt)
        # Nobody freed it for us: its lease ran out and it was taken over and released, or its row
        # expired, or it was force-released. A strict release says so, as the published package's
        # failed condition does (LOCK_STOLEN).
        loss = Loss(Reason.ROW_GONE, None)
        return ReleaseVerdict(Status.INVALID, Kind.RELEASE_ROW_GONE,
                              _stolen_error(unique_identifier, loss, 'before it was'), loss)
    if outcome is ReleaseOutcome.MET_NEXT_HOLDER:
        return ReleaseVerdict(Status.RELEASED, Kind.RELEASE_MET_NEXT_HOLDER, released=True)
    if outcome is ReleaseOutcome.STOLEN:
        # A free row here was acquired by another holder after us (a larger fencing token).
        loss = Loss(Reason.TAKEN_OVER, result.row) if Schema.holds_no_lock(result.row) else loss_from_row(result.row)
        error = None if best_effort else _stolen_error(unique_identifier, loss, 'before it was')
        return ReleaseVerdict(Status.INVALID, Kind.RELEASE_STOLEN, error, loss)
    failed = result.failed
    assert failed is not None
    if best_effort:
        return ReleaseVerdict(Status.RELEASED, Kind.RELEASE_FAILED_FORGOTTEN, detail=explain(schema, failed.error))
    error = DynamoDBLockError(
        DynamoDBLockError.UNKNOWN,
        f'Could not release {unique_identifier}: {explain(schema, failed.error)}; '
        'the lock is still held and kept alive',
        reason=failed.reason,
    )
    error.__cause__ = failed.error
    return ReleaseVerdict(None, Kind.RELEASE_FAILED, error)


def _stolen_error(unique_identifier: str, loss: Loss, when: str) -> DynamoDBLockError:
    if loss.row is None:
        message = f'{unique_identifier} was lost {when} released: its row was gone (expired or force-released)'
    elif Schema.holds_no_lock(loss.row):    # held by another after us (a larger fencing token), free again now
        message = (f'{unique_identifier} was taken over by another holder (fencing token '
                   f'{Schema.fencing_token_of(loss.row)}) {when} released, after its lease ran out; '
                   'the key is free again')
    else:
        message = (f'{unique_identifier} was taken over by {Schema.owner_of(loss.row)} {when} released; '
                   'their row was left alone')
    return DynamoDBLockError(DynamoDBLockError.LOCK_STOLEN, message, reason=loss.reason, holder=loss.row)
