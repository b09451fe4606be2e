"""Several keys at once, all or nothing (``acquire_locks``), and their release in one call.

One ``TransactWriteItems`` writes every key: each action is the very conditional write a single
acquisition sends (:func:`~python_dynamodb_lock._core.write.write_request`: where the key is
free or released, or over a holder presumed dead, conditioned on its version), with its own next
fencing token. DynamoDB applies all of them or none, so a caller never holds part of a set, and
callers that lock overlapping sets in any order cannot deadlock: nobody ever waits while holding.

A refused transaction returns, per key, the row that refused (``ReturnValuesOnConditionCheckFailure``
in ``CancellationReasons``): each key keeps a :class:`~python_dynamodb_lock._core.acquire.Watch`,
the single acquisition's observation of the holder in the way, so waiting needs no reads, and a
holder whose version stayed unchanged for its lease is taken over within the set exactly as alone.
A key that is held and not yet abandoned is still part of each attempt (conditioned on being
free): the attempt is the poll. ``TransactionConflict`` (another transaction on one of the rows)
is sent again after a short backoff; an answer that may have been lost is asked again with the
same client request token (idempotent), and then settled by one read of every row.
"""
from __future__ import annotations

import dataclasses
import uuid
from typing import Any, Callable, List, Optional, Sequence, Tuple, Union

from .._model.errors import DynamoDBLockError, Reason
from .._wire.lock_writes import free_row
from .._wire.requests import Request, get_many, transact
from .._model.schema import COL_RECORD_VERSION_NUMBER, Item, Schema
from .acquire import Observations, Watch
from .write import (AcquireAttempt, Written, free_if_landed, free_landed, raise_if_closed, read_row, with_token,
                    write_request)
from .answers import Answer, Applied, Failed, deserialize
from .effects import Call, Emit, Pending, Protocol, Settle, Sleep
from .events import Event, Kind
from .guard import (GUARD_ATTEMPTS, MAX_ACTIONS, RETRYABLE_ERRORS, RETRYABLE_REASONS, UNANSWERED_ATTEMPTS, backoff,
                    reasons_of, transaction_action)
from .messages import explain
from .shared_ops import WriterWait
from .state import TimeSource

__all__ = ['AllWritten', 'MAX_KEYS', 'NotAll', 'acquire_all', 'free_all', 'set_name', 'undo_all']

#: The most keys one ``acquire_locks`` takes: DynamoDB's actions per transaction.
MAX_KEYS = MAX_ACTIONS

# How many refused attempts are judged at once, without a wait, when every key looks free.
_IMMEDIATE_RETRIES = 3
_CANCELLED = 'TransactionCanceledException'


@dataclasses.dataclass(frozen=True)
class AllWritten:
    """Every key was written, in the order given."""

    written: Tuple[Written, ...]


@dataclasses.dataclass(frozen=True)
class NotAll:
    """``retry_timeout`` was spent; ``blocking``: per key, the row last seen in the way (None: free)."""

    blocking: Tuple[Optional[Item], ...]


class _Refused:
    """The transaction was refused: the watches were told what is in the way."""


class _Conflicted:
    """The transaction was cancelled by another transaction on one of its rows: nothing written."""


def set_name(attempts: Sequence[Any]) -> str:
    """How log lines and errors name a set of keys (the first three, and how many more)."""
    names = [attempt.unique_identifier for attempt in attempts]
    more = f' and {len(names) - 3} more' if len(names) > 3 else ''
    return '{' + ', '.join(names[:3]) + more + '}'


def acquire_all(attempts: Sequence[AcquireAttempt], clock: TimeSource, is_closed: Callable[[], bool],
                observations: Optional[Observations] = None) -> Protocol[Union[AllWritten, NotAll]]:
    """Write every key of ``attempts`` in one transaction, waiting (every ``retry_period`` of the
    first attempt, for its ``retry_timeout``) until that can be done.

    A key held by shared holders is judged as ``acquire`` judges one
    (:meth:`~python_dynamodb_lock._core.shared_ops.WriterWait.may_write`): the set sets its
    writer-waiting marker there, so that a stream of new readers cannot keep it out, and takes
    its markers off when it times out, fails or is interrupted (its own write removes them when
    it gets the set). A set given no time to wait (``try_acquire_locks``) sets no marker.

    :raises DynamoDBLockError: ``CLIENT_SHUTDOWN`` once ``is_closed()``; ``UNKNOWN`` when the
        transaction fails otherwise (whatever of it may have landed is freed first).
    """
    marking = attempts[0].retry_timeout > 0
    writers = [WriterWait(attempt if marking else dataclasses.replace(attempt, writer_marker=False), observations)
               for attempt in attempts]
    try:
        return (yield from _acquire_all_loop(attempts, clock, is_closed, writers, observations))
    except GeneratorExit:
        raise
    except BaseException:
        if any(writer.marked for writer in writers):   # readers may join again (apart from the caller)
            yield Settle(_give_up(writers, clock))
        raise


def _give_up(writers: Sequence[WriterWait], clock: TimeSource) -> Protocol[None]:
    """Take every marker of the set off (best effort: one left behind is ignored after its lease)."""
    for writer in writers:
        yield from writer.give_up(clock)


def _acquire_all_loop(attempts: Sequence[AcquireAttempt], clock: TimeSource, is_closed: Callable[[], bool],
                      writers: Sequence[WriterWait],
                      observations: Optional[Observations]) -> Protocol[Union[AllWritten, NotAll]]:
    first = attempts[0]
    name = set_name(attempts)
    started = clock.monotonic()
    deadline = started + first.retry_timeout
    seen = observations if observations is not None else Observations()
    watches = [Watch(attempt, seen, sessions=False) for attempt in attempts]
    immediate_retries = conflicts = 0
    refused_just_now = False
    while True:
        raise_if_closed(is_closed)
        ready = []
        for watch, writer in zip(watches, writers):   # notes each holder's version in the client's memory
            blocking = watch.blocking
            if blocking is not None and writer.in_the_way(blocking):    # shared holders: as acquire judges them
                ready.append((yield from writer.may_write(clock, blocking, refresh=not refused_just_now)))
            else:
                ready.append((yield from watch.may_write(clock)))
        # Just refused, and a key is held by a holder not (yet) presumed dead: sending again now
        # would be refused again. Otherwise (every key free, or its holder abandoned) send.
        if not (refused_just_now and not all(ready)):
            outcome = yield from _transact(watches, ready, clock, name)
            if isinstance(outcome, AllWritten):
                for attempt in attempts:
                    seen.forget(attempt.unique_identifier)
                waited = clock.monotonic() - started
                return AllWritten(tuple(dataclasses.replace(written, waited=waited) for written in outcome.written))
            if isinstance(outcome, _Conflicted):
                if conflicts < GUARD_ATTEMPTS:
                    # Not a refusal: nothing is known to be in the way. Sent again soon, even by a
                    # call that makes one attempt (retry_timeout 0).
                    yield Sleep(backoff(conflicts))
                    conflicts += 1
                    continue
            else:
                conflicts = 0
                if immediate_retries < _IMMEDIATE_RETRIES:
                    # Refused: judge the rows now in the way at once (free, or abandoned by a
                    # holder this client has seen unchanged for its lease, possibly over earlier
                    # calls: try_acquire_locks repeated takes over a dead holder).
                    immediate_retries += 1
                    refused_just_now = True
                    continue
        refused_just_now = False
        blocking = next((watch.blocking for watch in watches if watch.blocking is not None), None)
        remaining = deadline - clock.monotonic()
        if remaining <= 0:
            yield from _give_up(writers, clock)
            yield Emit(Event(Kind.ACQUIRE_TIMED_OUT, name, fields={
                'owner': Schema.owner_of(blocking), 'duration': clock.monotonic() - started}))
            return NotAll(tuple(watch.blocking for watch in watches))
        wait = min(first.retry_period, remaining)
        yield Emit(Event(Kind.WAITING, name, fields={'owner': Schema.owner_of(blocking), 'retry_in': wait}))
        yield Sleep(wait)
        immediate_retries = 0


def _transact(watches: Sequence[Watch], ready: Sequence[bool], clock: TimeSource,
              name: str) -> Protocol[Union[AllWritten, _Refused, _Conflicted]]:
    """One attempt: every key's write in one transaction, sent again with the same token while
    its answer may have been lost."""
    attempt_started = clock.monotonic()
    schema = watches[0].attempt.schema
    over = [watch.blocking if may else None for watch, may in zip(watches, ready)]
    items: List[Item] = []
    actions = []
    for watch, row in zip(watches, over):
        item, write = write_request(watch.attempt, clock, row)
        items.append(item)
        actions.append(transaction_action(write))
    versions = [str(item[COL_RECORD_VERSION_NUMBER]) for item in items]
    attempts = [watch.attempt for watch in watches]
    answer: Optional[Answer] = None
    try:
        answer = yield from _send_transaction(transact(actions, str(uuid.uuid4())))
        yield Emit(Event(Kind.ACQUIRE_ATTEMPT, name, fields={
            'outcome': type(answer).__name__.lower(), 'takeover': any(row is not None for row in over),
            'duration': clock.monotonic() - attempt_started}))
        assert isinstance(answer, (Applied, Failed)), answer
        rows: Optional[List[Optional[Item]]] = None
        if isinstance(answer, Applied) or answer.maybe_applied:
            rows = yield from _read_rows(schema, watches)
        if rows is not None and all(Schema.version_of(row) == version for row, version in zip(rows, versions)):
            return AllWritten(tuple(Written(with_token(item, row), attempt_started, replaced)
                                    for item, row, replaced in zip(items, rows, over)))
        if isinstance(answer, Applied):
            # Committed, but the rows could not be read back: the tokens stay unknown.
            return AllWritten(tuple(Written(item, attempt_started, replaced) for item, replaced in zip(items, over)))
        if answer.code == _CANCELLED:
            judged = yield from _judge_cancelled(watches, ready, reasons_of(answer.error))
            if judged is not None:
                return judged
        if answer.maybe_applied and rows is None:
            # The outcome stays unknown and the rows could not be read: free whatever landed.
            for attempt, version in zip(attempts, versions):
                yield from free_if_landed(attempt, clock, version)
    except GeneratorExit:
        raise
    except BaseException:
        # Interrupted (cancelled, Ctrl-C) while the transaction was in flight, or after it may
        # have landed: nobody will be handed these rows, so whatever of them landed is freed.
        if answer is None:
            yield Settle(undo_all(attempts, clock, versions))
        elif not isinstance(answer, Failed) or answer.maybe_applied:
            yield Settle(_free_written(attempts, clock, versions, isinstance(answer, Applied)))
        raise
    raise DynamoDBLockError(DynamoDBLockError.UNKNOWN, f'Could not acquire {name}: {explain(schema, answer.error)}',
                            reason=answer.reason) from answer.error


def _send_transaction(request: Request) -> Protocol[Answer]:
    """Send a transaction; again, with the same client request token, while its answer may
    have been lost (if an earlier attempt committed, DynamoDB answers as if this one did)."""
    answer: Answer = Applied({})
    for attempt in range(UNANSWERED_ATTEMPTS):
        answer = yield Call(request)
        if not isinstance(answer, Failed) or answer.code == _CANCELLED \
                or not (answer.maybe_applied or answer.code in RETRYABLE_ERRORS):
            return answer
        if attempt + 1 < UNANSWERED_ATTEMPTS:
            yield Sleep(backoff(attempt))
    return answer


def _judge_cancelled(watches: Sequence[Watch], ready: Sequence[bool],
                     reasons: Sequence[Any]) -> Protocol[Union[_Refused, _Conflicted, None]]:
    """A cancelled transaction, by its ``CancellationReasons`` (one per key): refused (each
    refusing key's watch sees the row in the way; a key written as a poll whose condition held
    is free), conflicting, or None for another failure."""
    if len(reasons) != len(watches):
        return None
    refused = False
    for watch, may, reason in zip(watches, ready, reasons):
        code = reason.get('Code')
        if code == 'ConditionalCheckFailed':
            refused = True
            row = deserialize(reason.get('Item'))
            if row is None and not (may and watch.blocking is not None):
                # A write where the key was believed free is refused only by a row: an engine
                # that ignores ALL_OLD did not return it.
                attempt = watch.attempt
                row = yield from read_row(attempt.schema, attempt.partition_key, attempt.sort_key, 'read')
            watch.see(row)
        elif code in (None, 'None') and not may:
            watch.see(None)      # its "free" condition held: the holder has gone
    if refused:
        return _Refused()
    if any(reason.get('Code') in RETRYABLE_REASONS for reason in reasons):
        return _Conflicted()
    return None


def _read_rows(schema: Schema, watches: Sequence[Watch]) -> Protocol[Optional[List[Optional[Item]]]]:
    """Every key's row, in one serializable read (sent again while it conflicts); None when
    DynamoDB could not be asked."""
    request = get_many(schema, [(watch.attempt.partition_key, watch.attempt.sort_key) for watch in watches])
    for attempt in range(GUARD_ATTEMPTS):
        answer = yield Call(request)
        if isinstance(answer, Applied):
            responses = answer.response.get('Responses') or []
            if len(responses) != len(watches):
                return None
            return [dict(response['Item']) if response.get('Item') else None for response in responses]
        retryable = isinstance(answer, Failed) and (answer.code in (_CANCELLED, *RETRYABLE_ERRORS)
                                                    or answer.reason == Reason.THROTTLED)
        if not retryable:
            return None
        yield Sleep(backoff(attempt))
    return None


def undo_all(attempts: Sequence[AcquireAttempt], clock: TimeSource, versions: Sequence[str]) -> Protocol[None]:
    """Settle a transaction of ``acquire_all`` that an interruption cut short (see
    :func:`~python_dynamodb_lock._core.write.undo_write`, which this is for every key): a
    cancelled one left nothing; a committed one is freed key by key; one whose answer can never
    be known is freed wherever it landed, and watched for one lease."""
    answer = yield Pending()
    if isinstance(answer, Failed) and not answer.maybe_applied:
        return      # cancelled or refused before it was applied: nothing of ours landed
    yield from _free_written(attempts, clock, versions, isinstance(answer, Applied))


def _free_written(attempts: Sequence[AcquireAttempt], clock: TimeSource, versions: Sequence[str],
                  known: bool) -> Protocol[None]:
    """Free every key a transaction of ours wrote (``known``: it surely committed), as an
    interrupted single write is freed."""
    for attempt, version in zip(attempts, versions):
        yield from free_landed(attempt, clock, version, known)


def free_all(schema: Schema, locks: Sequence[Any], clock: TimeSource, expiry_period: float,
             keep_released_rows: bool) -> Protocol[Union[Applied, Failed]]:
    """Free the rows of held ``locks`` (at most 100) in one transaction, each write conditioned on
    the versions its lock may carry, as a single release's is; the answer.

    Conflicts are sent again with a new token, a lost answer with the same one; a refusal (a key
    lost meanwhile) or any other failure is returned: nothing was freed, and the caller releases
    the locks one by one, which judges each key on its own.
    """
    now = clock.time()
    actions = [transaction_action(free_row(
        schema, lock.partition_key, lock.sort_key, lock._state.our_versions(), str(uuid.uuid4()),
        int(now + expiry_period), int(now), lock.additional_attributes, keep_released_rows)) for lock in locks]
    token = str(uuid.uuid4())
    unanswered = 0
    answer: Union[Applied, Failed] = Applied({})
    for attempt in range(GUARD_ATTEMPTS):
        try:
            answer = yield Call(transact(actions, token))
        except GeneratorExit:
            raise
        except BaseException:
            for lock in locks:
                lock._state.note_release_maybe_applied()
            raise
        if isinstance(answer, Applied):
            return answer
        reasons = reasons_of(answer.error) if answer.code == _CANCELLED else []
        conflicted = any(reason.get('Code') in RETRYABLE_REASONS for reason in reasons) and not any(
            reason.get('Code') == 'ConditionalCheckFailed' for reason in reasons)
        if answer.maybe_applied:
            unanswered += 1
            for lock in locks:
                lock._state.note_release_maybe_applied()
        elif conflicted or answer.code in RETRYABLE_ERRORS:
            token = str(uuid.uuid4()) if not unanswered else token
        else:
            return answer
        if unanswered >= UNANSWERED_ATTEMPTS:
            return answer
        yield Sleep(backoff(attempt))
    return answer
