"""Keeping locks alive: renewals one by one or in batches, the paced round that sends them,
and the checker that flags locks whose renewals keep failing.
"""
from __future__ import annotations

import dataclasses
import uuid
from typing import Any, Callable, List, Optional, Sequence, Tuple

from .._wire.renewals import Renewal, renew, renew_many
from .._wire.requests import MAX_BATCH_STATEMENTS, Request
from .._model.errors import DynamoDBLockError
from .._model.schema import Schema, lease_expiry
from .answers import Answer, Failed, Refused, statement_retryable
from .effects import Call, Emit, Protocol, Sleep, Submit, Unregister
from .events import Event, Kind
from .messages import explain
from .shared_ops import entry_answer, renewal_request
from .state import LockState, LockView, RenewalResult, RenewalVerdict, Status, TimeSource, how_lost, loss_from_row

__all__ = [
    'Batching',
    'background_loop',
    'HeartbeatSettings',
    'Unregister',
    'check_locks',
    'check_round',
    'extend',
    'heartbeat_round',
    'not_extended',
    'renew_batch',
    'renew_one',
    'send_renewal',
    'settle_events',
    'update_attributes',
]

# A statement throttled inside a successful BatchExecuteStatement is not retried by botocore:
# it is sent again after 50 ms and then 100 ms, like botocore's own backoff.
BATCH_STATEMENT_ATTEMPTS = 3
BATCH_RETRY_BASE_DELAY = 0.05
# A renewal refused because a guarded write (a transaction) on the lock row was in progress is
# sent again after 50 and 100 ms before it counts as a failed heartbeat.
CONFLICT_ATTEMPTS = 3
# Error codes with which DynamoDB refuses BatchExecuteStatement itself (permission, engine).
_BATCHING_REFUSED = frozenset({'AccessDeniedException', 'UnknownOperationException'})


@dataclasses.dataclass(frozen=True)
class HeartbeatSettings:
    schema: Schema
    heartbeat_period: float
    safe_period: float
    expiry_period: float
    heartbeat_tps: float
    batch_size: int


class Batching:
    """Whether heartbeats still go out in batches; switched off for good when DynamoDB refuses
    ``BatchExecuteStatement`` itself."""

    def __init__(self, batch_size: int) -> None:
        self.batch_size = batch_size
        self.enabled = batch_size > 1


#: ``lock.update_attributes``' change: the attributes set (name-value pairs) and the names removed.
AttributeUpdate = Tuple[Tuple[Tuple[str, Any], ...], Tuple[str, ...]]


def _next_renewal(settings: HeartbeatSettings, lock: LockView, clock: TimeSource,
                  update: Optional[AttributeUpdate] = None) -> Optional[Renewal]:
    state: LockState = lock._state
    now = clock.time()
    expiry = None if lock.lock_existing_item else int(now + settings.expiry_period)  # no TTL on an item
    # The lease the row stores (under a client session, the long row lease: see bind_session).
    renewal = state.next_renewal(str(uuid.uuid4()), expiry,
                                 lock.partition_key, lock.sort_key, lease_expiry(now, state.row_lease))
    if renewal is None or update is None:
        return renewal
    return renewal._replace(set_attributes=update[0], remove_attributes=update[1])


def renew_one(settings: HeartbeatSettings, lock: LockView, clock: TimeSource,
              update: Optional[AttributeUpdate] = None) -> Protocol[Optional[RenewalResult]]:
    """One heartbeat of a held lock: a new version and TTL (and ``update``'s attributes),
    conditioned on the version we hold.

    :returns: the verdict, or None when the lock is no longer held (nothing was sent).
    """
    # The lease this renewal writes (lease_expiry) is counted from a wall-clock reading taken
    # now, so the holder counts its own lease from no later than now either, whichever attempt
    # lands: otherwise a renewal retried after a conflict would let the holder believe in its
    # lease for longer than the one it wrote (which waiters with max_clock_skew go by).
    prepared = clock.monotonic()
    renewal = _next_renewal(settings, lock, clock, update)
    if renewal is None:
        return None
    shared = getattr(lock, 'shared', False)   # a shared holder renews its own entry
    request = renewal_request(settings.schema, lock, renewal) if shared else renew(settings.schema, renewal)
    answer, attempt_started = yield from send_renewal(
        request, clock, lambda: lock._state.remember_unconfirmed(renewal.new_version))
    answer = entry_answer(lock, answer)
    return (yield from settle(settings, lock, renewal, answer, attempt_started, clock, prepared))


def send_renewal(request: Request, clock: TimeSource,
                 interrupted: Callable[[], None]) -> Protocol[Tuple[Answer, float]]:
    """Send one renewal (a lock's, or a client session's), again after 50 and 100 ms when a
    transaction on its row (a guarded write, a takeover) made DynamoDB refuse it untouched.

    :returns: the answer, and when its attempt was started. ``interrupted()`` is called when an
        exception (Ctrl-C, a cancellation) cuts a call short: the renewal may land.
    """
    for attempt in range(CONFLICT_ATTEMPTS):
        attempt_started = clock.monotonic()
        try:
            answer = yield Call(request)
        except GeneratorExit:
            raise
        except BaseException:
            interrupted()
            raise
        conflict = isinstance(answer, Failed) and answer.code == 'TransactionConflictException'
        if not conflict or answer.maybe_applied or attempt + 1 == CONFLICT_ATTEMPTS:
            break
        if (yield Sleep(BATCH_RETRY_BASE_DELAY * 2 ** attempt)):
            break
    return answer, attempt_started


def extend(settings: HeartbeatSettings, lock: LockView, clock: TimeSource) -> Protocol[None]:
    """Renew one lock now, for an application that renews its locks itself: return when it was
    renewed, raise when it was not.

    :raises DynamoDBLockError: ``LOCK_STOLEN`` (the lock was lost: taken over or its row gone;
        ``holder`` names who holds it now), ``LOCK_NOT_OWNED`` (it was released), ``UNKNOWN``
        (DynamoDB failed; the lock is still held, as far as anyone knows: try again before the
        lease runs out).
    """
    result = yield from renew_one(settings, lock, clock)
    _raise_unless_renewed(settings, lock, result, (RenewalVerdict.ADOPTED_EARLIER,), 'renew')


#: Sends of one ``update_attributes``: a send refused by an earlier renewal of ours that had
#: landed unanswered (ADOPTED_EARLIER) wrote nothing, and is sent again with that version.
UPDATE_ATTEMPTS = 3


def update_attributes(settings: HeartbeatSettings, lock: LockView, clock: TimeSource,
                      update: AttributeUpdate) -> Protocol[None]:
    """``lock.update_attributes``: one heartbeat of the lock that also sets and removes
    additional attributes, under the same condition (the row still carries a version of this
    acquisition), judged exactly as a heartbeat: a refusal by a foreign row marks the lock lost.
    The lock's ``additional_attributes`` change only once the write is known to have landed.

    :raises DynamoDBLockError: as :func:`extend`; ``UNKNOWN`` when DynamoDB failed (the change
        may or may not have landed: the lock keeps its old ``additional_attributes``).
    """
    for _ in range(UPDATE_ATTEMPTS):
        result = yield from renew_one(settings, lock, clock, update)
        if result is None or result.verdict is not RenewalVerdict.ADOPTED_EARLIER:
            break
    _raise_unless_renewed(settings, lock, result, (), 'update the attributes of')
    attributes = {name: value for name, value in lock.additional_attributes.items() if name not in update[1]}
    attributes.update(update[0])
    lock.additional_attributes = attributes


def _raise_unless_renewed(settings: HeartbeatSettings, lock: LockView, result: Optional[RenewalResult],
                          also_fine: Tuple[RenewalVerdict, ...], verb: str) -> None:
    """Return when a renewal's ``result`` says the row now carries it (or one of ``also_fine``);
    else raise what the caller is told."""
    verdict = result.verdict if result is not None else RenewalVerdict.NOT_HELD
    if verdict in (RenewalVerdict.RENEWED, RenewalVerdict.LANDED_UNANSWERED, *also_fine):
        return
    if verdict is RenewalVerdict.ADOPTED_EARLIER:
        raise DynamoDBLockError(DynamoDBLockError.UNKNOWN,
                                f'Could not {verb} {lock.unique_identifier}: earlier renewals of it kept landing '
                                'unanswered; the lock is still held: try again')
    failed = verdict is RenewalVerdict.FAILED and result is not None
    raise not_extended(settings.schema, lock, result.failure if failed and result is not None else None, verb)


def not_extended(schema: Schema, lock: LockView, failure: Optional[Failed], verb: str = 'renew') -> DynamoDBLockError:
    """The error of a renewal asked for by the application (``extend()``, ``update_attributes``)
    that did not renew ``lock``: ``failure`` (DynamoDB failed), or the lock was lost, or it is
    not held."""
    state: LockState = lock._state
    if failure is not None:
        error = DynamoDBLockError(
            DynamoDBLockError.UNKNOWN,
            f'Could not {verb} {lock.unique_identifier}: {explain(schema, failure.error)}; the lock may '
            'still be held until its lease runs out', reason=failure.reason)
        error.__cause__ = failure.error
        return error
    if state.status == Status.INVALID:
        loss = state.loss or loss_from_row(None)
        return DynamoDBLockError(DynamoDBLockError.LOCK_STOLEN,
                                 f'{lock.unique_identifier} was lost ({loss.reason}): held by '
                                 f'{Schema.owner_of(loss.row)} now', reason=loss.reason, holder=loss.row)
    return DynamoDBLockError(DynamoDBLockError.LOCK_NOT_OWNED,
                             f'{lock.unique_identifier} is not held ({state.status}): nothing to renew')


def settle(settings: HeartbeatSettings, lock: LockView, renewal: Renewal, answer: Answer, attempt_started: float,
           clock: TimeSource, prepared: Optional[float] = None) -> Protocol[RenewalResult]:
    """Apply one renewal's answer to its lock, and tell what it meant.

    ``prepared`` is when the renewal was made (before its ``lease_expiry`` was read off the
    wall clock): a renewal that lands counts the lease from then, or from ``attempt_started``
    if that is earlier.
    """
    now = clock.monotonic()
    confirmed_at = attempt_started if prepared is None else min(prepared, attempt_started)
    result: RenewalResult = lock._state.settle_renewal(renewal, answer, confirmed_at, now)
    if result.verdict in (RenewalVerdict.STOLEN, RenewalVerdict.RELEASED_EARLIER):
        yield Unregister(lock)
    for event in settle_events(settings, lock, renewal, answer, result, now - attempt_started):
        yield Emit(event)
    return result


def settle_events(settings: HeartbeatSettings, lock: LockView, renewal: Renewal, answer: Answer,
                  result: RenewalResult, latency: float) -> List[Event]:
    key = lock.unique_identifier
    verdict = result.verdict
    events: List[Event] = []
    if verdict is RenewalVerdict.LANDED_UNANSWERED:
        events.append(Event(Kind.RENEWAL_LANDED_UNANSWERED, key, lock))
    if result.recovered:
        events.append(Event(Kind.RECOVERED, key, lock))
    if verdict in (RenewalVerdict.RENEWED, RenewalVerdict.LANDED_UNANSWERED):
        events.append(Event(Kind.RENEWED, key, lock, {'version': renewal.new_version, 'duration': latency}))
    elif verdict is RenewalVerdict.ADOPTED_EARLIER:
        events.append(Event(Kind.RENEWAL_ADOPTED_EARLIER, key, lock))
    elif verdict is RenewalVerdict.RELEASED_EARLIER:
        events.append(Event(Kind.RELEASED_BY_LOST_ANSWER, key, lock))
    elif verdict is RenewalVerdict.STOLEN:
        loss = lock._state.loss
        fields = {'owner': Schema.owner_of(loss.row if loss else None), 'reason': loss.reason if loss else None}
        how = how_lost(answer.item) if isinstance(answer, Refused) else None
        events.append(Event(Kind.STOLEN, key, lock, {**fields, 'how': how} if how else fields))
    elif verdict is RenewalVerdict.FAILED:
        assert isinstance(answer, Failed)
        events.append(Event(Kind.RENEWAL_FAILED, key, lock, {
            'error': explain(settings.schema, answer.error), 'reason': answer.reason, 'duration': latency}))
    return events


def renew_batch(settings: HeartbeatSettings, locks: Sequence[Any], batching: Batching,
                clock: TimeSource) -> Protocol[List[Any]]:
    """Renew a group of locks in ``BatchExecuteStatement`` calls of up to 25 statements.

    A statement throttled inside a successful batch is sent again after 50 ms and 100 ms, then
    left for the next period (``Sleep`` returning True, for shutdown, stops the retries). When
    DynamoDB refuses the operation itself, batching is switched off for good.

    :returns: the locks to renew one by one instead (batching refused).
    """
    prepared = clock.monotonic()     # see renew_one
    pending: List[Tuple[Any, Renewal]] = []
    for lock in locks:
        renewal = _next_renewal(settings, lock, clock)
        if renewal is not None:
            pending.append((lock, renewal))
    fallback: List[Any] = []
    for attempt in range(BATCH_STATEMENT_ATTEMPTS):
        if not pending:
            break
        attempt_started = clock.monotonic()
        try:
            answers = yield Call(renew_many(settings.schema, [renewal for _, renewal in pending]))
        except GeneratorExit:
            raise
        except BaseException:
            for lock, renewal in pending:                          # interrupted in flight: any may land
                lock._state.remember_unconfirmed(renewal.new_version)
            raise
        if isinstance(answers, Failed):
            if answers.code in _BATCHING_REFUSED:
                if batching.enabled:
                    batching.enabled = False
                    yield Emit(Event(Kind.BATCHING_UNAVAILABLE, fields={
                        'batch_size': batching.batch_size, 'table': settings.schema.table_name,
                        'error': str(answers.error)}))
                for lock, renewal in pending:
                    if answers.maybe_applied:
                        yield from _settle_safely(settings, lock, renewal, answers, attempt_started, clock, prepared)
                    fallback.append(lock)
                break
            answers = [answers] * len(pending)
        last_attempt = attempt + 1 == BATCH_STATEMENT_ATTEMPTS
        retry: List[Tuple[Tuple[Any, Renewal], Answer]] = []
        for (lock, renewal), answer in zip(pending, answers):
            if not last_attempt and statement_retryable(answer):
                retry.append(((lock, renewal), answer))
            else:
                yield from _settle_safely(settings, lock, renewal, answer, attempt_started, clock, prepared)
        pending = [entry for entry, _ in retry]
        if pending and (yield Sleep(BATCH_RETRY_BASE_DELAY * 2 ** attempt)):
            for (lock, renewal), answer in retry:   # closing: no more retries
                yield from _settle_safely(settings, lock, renewal, answer, attempt_started, clock, prepared)
            break
    return fallback


def _settle_safely(settings: HeartbeatSettings, lock: LockView, renewal: Renewal, answer: Answer,
                   attempt_started: float, clock: TimeSource, prepared: Optional[float] = None) -> Protocol[None]:
    """:func:`settle`, reporting an exception so that the rest of a batch is settled."""
    try:
        yield from settle(settings, lock, renewal, answer, attempt_started, clock, prepared)
    except Exception as exc:  # noqa: BLE001 - reported, and the batch goes on
        # This renewal may have been applied: remember its version, so it is not taken for a theft.
        lock._state.remember_unconfirmed(renewal.new_version)
        yield Emit(Event(Kind.SETTLE_FAILED, lock.unique_identifier, lock, {'exception': exc}))


def heartbeat_round(settings: HeartbeatSettings, locks: Sequence[Any], batching: Batching, clock: TimeSource,
                    is_closed: Callable[[], bool]) -> Protocol[None]:
    """Start one heartbeat per held lock, spread over the period, then wait out the period.

    Heartbeats go out in groups of ``batch_size`` (when batching); a group leaves when the
    pacing (``heartbeat_tps``, or an even spread over the period) allows its first heartbeat.
    """
    round_start = clock.monotonic()
    if locks:
        if settings.heartbeat_tps == -1:
            interval = settings.heartbeat_period / len(locks)
        else:
            interval = 1.0 / settings.heartbeat_tps
        group = min(batching.batch_size, MAX_BATCH_STATEMENTS) if batching.enabled else 1
        skipped = 0
        for index in range(0, len(locks), group):
            delay = round_start + index * interval - clock.monotonic()
            # Below a millisecond a wait costs more than it paces: send a small burst.
            if delay > 0.001 and (yield Sleep(delay)):
                return
            if is_closed():
                return
            skipped += yield Submit(tuple(locks[index:index + group]))
        overrun = clock.monotonic() - round_start - settings.heartbeat_period
        if overrun > 0:
            yield Emit(Event(Kind.ROUND_OVERRUN, fields={
                'count': len(locks), 'heartbeat_tps': settings.heartbeat_tps, 'overrun': overrun}))
        if skipped:
            yield Emit(Event(Kind.HEARTBEATS_BEHIND, fields={'skipped': skipped, 'count': len(locks)}))
    yield Sleep(round_start + settings.heartbeat_period - clock.monotonic())


def background_loop(name: str, owner: str, make_round: Callable[[], Protocol[None]], is_closed: Callable[[], bool],
                    pause: float) -> Protocol[None]:
    """Run rounds until the client closes. A round that fails (an exception raised in it, or
    thrown into it by the driver) is reported, followed by a pause, and the loop goes on: no
    background loop dies silently."""
    yield Emit(Event(Kind.LOOP_STARTED, fields={'owner': owner, 'name': name}))
    while not is_closed():
        try:
            yield from make_round()
        except Exception as exc:  # noqa: BLE001 - reported, and the loop goes on
            yield Emit(Event(Kind.LOOP_ROUND_FAILED, fields={'owner': owner, 'name': name, 'exception': exc}))
            yield Sleep(pause)
    yield Emit(Event(Kind.LOOP_STOPPED, fields={'owner': owner, 'name': name}))


def check_locks(settings: HeartbeatSettings, locks: Sequence[Any], clock: TimeSource) -> Protocol[None]:
    """Flag locks not confirmed for their safe period (``lock_safe_period``) as IN_DANGER."""
    now = clock.monotonic()
    for lock in locks:
        state: LockState = lock._state
        safe_period = settings.safe_period if state.safe_period is None else state.safe_period
        unconfirmed_for = state.mark_in_danger(now, safe_period)
        if unconfirmed_for is not None:
            yield Emit(Event(Kind.IN_DANGER, lock.unique_identifier, lock, {
                'unconfirmed_for': unconfirmed_for, 'safe_period': safe_period,
                'duration': unconfirmed_for}))


def check_round(settings: HeartbeatSettings, locks: Sequence[Any], clock: TimeSource) -> Protocol[None]:
    """One round of the checker: :func:`check_locks`, then wait a period."""
    yield from check_locks(settings, locks, clock)
    yield Sleep(settings.heartbeat_period)
