"""Shared (read) locks: the steps of the acquire loop, the heartbeat and the release that differ
from an exclusive lock's. The loop, the renewal judgement and the release judgement themselves
are the exclusive lock's (``acquire.acquire``, ``state.LockState``, ``release.release``): a
shared holder's protocol sees the row through :func:`~.shared.entry_view`, where its entry's
version plays the row's. See docs/shared_locks.rst.
"""
from __future__ import annotations

import uuid
from typing import Any, Dict, Optional, Sequence, Union

from .._model.errors import DynamoDBLockError, Reason
from .._wire.requests import Request, get
from .._model.schema import (
    COL_ACQUISITION_ID,
    COL_FENCING_TOKEN,
    COL_RECORD_VERSION_NUMBER,
    Item,
    PartitionKey,
    Schema,
)
from .._wire.shared_requests import JoinMode, entry, join, leave, mark_writer, renew_entry, unmark_writer
from .write import AcquireAttempt, Blocked, Written, is_abandoned, read_row, undo, write_failed, write_lock
from .answers import Answer, Applied, Failed, Refused
from .effects import Call, Emit, Protocol, Settle
from .events import Event, Kind
from .shared import MAX_SHARED_HOLDERS, SharedWatch, entry_of, entry_view, holders_of, is_shared
from .state import FirstSeen, LockView, TimeSource

__all__ = ['WriterWait', 'entry_answer', 'join_step', 'leave_write', 'renewal_request', 'writer_step']


def _lease(attempt: AcquireAttempt) -> float:
    return attempt.schema.lease_of(attempt.item_template, attempt.default_lease)


def _owner(attempt: AcquireAttempt) -> str:
    return Schema.owner_of(attempt.item_template)


# -- shared acquirers ------------------------------------------------------------------


def join_step(attempt: AcquireAttempt, clock: TimeSource, row: Optional[Item],
              watch: SharedWatch) -> Protocol[Union[Written, Blocked, None]]:
    """One step of a shared acquisition facing ``row`` (None: believed free; a released row
    is passed as it is, for its writer-waiting marker): the entry written, blocked by a row,
    or None (wait: a live writer waits, or an exclusive holder lives)."""
    schema = attempt.schema
    now = clock.monotonic()
    judged = watch.judge(row, now, attempt.default_lease)
    if judged.marker_live:
        return None     # a writer waits: let it in first
    dead_marker = judged.marker.version if judged.marker is not None else None
    lease = _lease(attempt)
    options: Dict[str, Any] = {'dead_marker': dead_marker}
    beside = row is None and attempt.join_beside and not watch.guessed
    watch.guessed = True
    if beside or is_shared(row):
        mode = JoinMode.SHARED
        # (a first guess keeps the row's lease: a shorter one refuses it, and the row then tells)
        options.update(raise_lease=row is not None and schema.lease_of(row, attempt.default_lease) < lease,
                       dead_holders=judged.dead, max_holders=MAX_SHARED_HOLDERS)
    elif row is None or Schema.is_released(row):
        mode = JoinMode.FREE
    else:
        version = str(Schema.version_of(row))
        unchanged_for = watch.unchanged_for('row', version, now)
        if not is_abandoned(schema, row, unchanged_for, clock.time(), attempt.default_lease, attempt.max_clock_skew):
            return None
        yield Emit(Event(Kind.TAKING_OVER, attempt.unique_identifier, fields={
            'owner': Schema.owner_of(row), 'version': version, 'unchanged_for': unchanged_for,
            'duration': unchanged_for}))
        mode = JoinMode.OVER
        options.update(expected_version=version, remove=schema.extra_names(row))
    holder_id, entry_version = str(uuid.uuid4()), str(uuid.uuid4())
    attempt_started = clock.monotonic()
    expiry_time = int(clock.time() + attempt.expiry_period)
    write = join(schema, attempt.partition_key, attempt.sort_key, holder_id,
                 entry(_owner(attempt), entry_version, lease), str(uuid.uuid4()), expiry_time, mode, **options)
    try:
        answer = yield Call(write)
    except GeneratorExit:
        raise
    except BaseException:
        # Interrupted while the write was in flight: an entry that lands would hold the key
        # (shared) for a lease with nobody renewing it; take it out again.
        yield Settle(undo(attempt, clock, lambda written: _is_entry(written, holder_id, entry_version),
                          lambda known: _leave_if_there(attempt, clock, holder_id, entry_version, known)))
        raise
    yield Emit(Event(Kind.ACQUIRE_ATTEMPT, attempt.unique_identifier, fields={
        'outcome': type(answer).__name__.lower(), 'takeover': mode == JoinMode.OVER,
        'duration': clock.monotonic() - attempt_started}))

    def held(written: Optional[Item]) -> Written:
        item: Item = {**attempt.item_template, COL_RECORD_VERSION_NUMBER: entry_version,
                      COL_ACQUISITION_ID: holder_id, schema.ttl_attribute_name: expiry_time}
        token = Schema.fencing_token_of(written)
        if token is not None:
            item[COL_FENCING_TOKEN] = token
        return Written(item, attempt_started, row if mode == JoinMode.OVER else None, shared=True,
                       beside_others=mode == JoinMode.SHARED)

    if isinstance(answer, Applied):
        return held(answer.response.get('Attributes'))
    if isinstance(answer, Refused):
        if _is_entry(answer.item, holder_id, entry_version):
            return held(answer.item)      # ours landed; botocore's retry met it
        if answer.item is None and mode != JoinMode.OVER:
            # An engine that ignores ALL_OLD: find out what is in the way.
            return Blocked((yield from read_row(schema, attempt.partition_key, attempt.sort_key, 'read')))
        return Blocked(answer.item)
    assert isinstance(answer, Failed)
    if answer.maybe_applied:
        read = yield Call(get(schema, attempt.partition_key, attempt.sort_key))
        current = read.response.get('Item') if isinstance(read, Applied) else None
        if _is_entry(current, holder_id, entry_version):
            return held(current)
        if not isinstance(read, Applied):   # unknown: take the entry out, if it is there (else after its lease)
            yield from leave_write(schema, attempt.partition_key, attempt.sort_key, holder_id, [entry_version],
                                   clock, attempt.expiry_period, attempt.keep_released_rows)
    raise write_failed(attempt, answer)


def _is_entry(row: Optional[Item], holder_id: str, version: str) -> bool:
    found = entry_of(row, holder_id)
    return found is not None and found.record_version_number == version


def _leave_if_there(attempt: AcquireAttempt, clock: TimeSource, holder_id: str, version: str,
                    known: bool) -> Protocol[Optional[bool]]:
    """Remove the entry ``holder_id`` if it carries ``version``: True when it did; None when
    the entry is not there (yet); False when DynamoDB could not be asked."""
    schema = attempt.schema
    if not known:
        read = yield Call(get(schema, attempt.partition_key, attempt.sort_key))
        if not isinstance(read, Applied):
            return False
        if not _is_entry(read.response.get('Item'), holder_id, version):
            return None
    answer = yield from leave_write(schema, attempt.partition_key, attempt.sort_key, holder_id, [version], clock,
                                    attempt.expiry_period, attempt.keep_released_rows)
    if isinstance(answer, Applied):
        return True
    return None if isinstance(answer, Refused) else False


# -- exclusive acquirers facing shared holders -----------------------------------------


class WriterWait:
    """What an exclusive acquisition knows of the shared holders in its way: the entries'
    versions it watches, and its writer-waiting marker (``waiter_id``) once written."""

    def __init__(self, attempt: AcquireAttempt, memory: Optional[FirstSeen] = None) -> None:
        self.attempt = attempt
        self._memory = memory     # the client's memory of what it saw (see SharedWatch)
        self._watch: Optional[SharedWatch] = None
        self._waiter_id: Optional[str] = None
        self.marked = False

    # Made when first needed: most acquisitions never meet a shared row.
    @property
    def watch(self) -> SharedWatch:
        if self._watch is None:
            self._watch = SharedWatch(self._memory, self.attempt.unique_identifier)
        return self._watch

    @property
    def waiter_id(self) -> str:
        if self._waiter_id is None:
            self._waiter_id = str(uuid.uuid4())
        return self._waiter_id

    @staticmethod
    def in_the_way(row: Optional[Item]) -> bool:
        return is_shared(row)

    def may_write(self, clock: TimeSource, row: Item, refresh: bool = True) -> Protocol[bool]:
        """Whether the shared row ``row`` may be written over now: True once every entry is
        presumed dead (``TAKING_OVER`` is emitted; the write is conditioned on the row's version,
        which every shared write changes). Else False, after setting (refreshing) this
        acquisition's writer-waiting marker, so that no new shared holder joins while it waits
        (not with ``attempt.writer_marker`` False, nor while another writer's live marker is there;
        with ``refresh`` False, a marker this acquisition has set is not written again).

        The one judgement of an exclusive acquirer facing shared holders: ``acquire`` (one key)
        and ``acquire_all`` (a set, one per key) both make it."""
        attempt = self.attempt
        judged = self.watch.judge(row, clock.monotonic(), attempt.default_lease, own_marker=self.waiter_id)
        if not judged.live:
            yield Emit(Event(Kind.TAKING_OVER, attempt.unique_identifier, fields={
                'owner': Schema.owner_of(row), 'version': Schema.version_of(row), 'unchanged_for': judged.dead_for,
                'duration': judged.dead_for}))
            return True
        if not attempt.writer_marker:
            return False    # (acquire_first_lock: a key it does not take would keep the marker)
        if judged.marker_live and judged.marker is not None and judged.marker.waiter_id != self.waiter_id:
            return False    # another writer waits first
        if self.marked and not refresh:
            return False
        dead_marker = judged.marker.version if judged.marker_dead and judged.marker is not None else None
        answer = yield Call(mark_writer(attempt.schema, attempt.partition_key, attempt.sort_key, self.waiter_id,
                                        _owner(attempt), str(uuid.uuid4()), _lease(attempt), dead_marker,
                                        judged.dead))
        if isinstance(answer, Applied):
            self.marked = True
        return False

    def give_up(self, clock: TimeSource) -> Protocol[None]:
        """The acquisition timed out: take its marker off the row, if it set one (best effort:
        a marker left behind is ignored after its lease)."""
        if self.marked:
            attempt = self.attempt
            yield Call(unmark_writer(attempt.schema, attempt.partition_key, attempt.sort_key, self.waiter_id))
            self.marked = False


def writer_step(attempt: AcquireAttempt, clock: TimeSource, row: Item,
                writer: WriterWait) -> Protocol[Union[Written, Blocked, None]]:
    """One step of an exclusive acquisition facing a shared row: the write over it once every
    entry is presumed dead, else None (wait; see :meth:`WriterWait.may_write`)."""
    if (yield from writer.may_write(clock, row)):
        return (yield from write_lock(attempt, clock, row))
    return None


# -- shared holders: heartbeat and release ---------------------------------------------


def renewal_request(schema: Schema, lock: LockView, renewal: Any) -> Request:
    """The heartbeat of a shared holder: its entry's new version, and a new row version."""
    return renew_entry(schema, renewal.partition_key, renewal.sort_key, str(lock._state.acquisition_id),
                       renewal.expected_versions, renewal.new_version, str(uuid.uuid4()), renewal.new_expiry_time)


def entry_answer(lock: LockView, answer: Answer) -> Answer:
    """An answer about a shared holder's row, as the exclusive lock's rules judge it (the row
    returned with a refusal seen through :func:`entry_view`)."""
    if isinstance(answer, Refused) and getattr(lock, 'shared', False):
        return Refused(entry_view(answer.item, str(lock._state.acquisition_id)), answer.retried)
    return answer


def leave_write(schema: Schema, partition_key: PartitionKey, sort_key: str, holder_id: str, versions: Sequence[str],
                clock: TimeSource, expiry_period: float, keep_released_rows: bool) -> Protocol[Answer]:
    """Remove a shared holder's entry: beside other holders, or as the last one (freeing the
    row). Which it is shows in the row a refusal returns, so a refused guess is tried again the
    other way (other holders may join or leave meanwhile: up to ``_LEAVE_ATTEMPTS`` times). The
    answer of the last write."""
    last = False
    for _ in range(_LEAVE_ATTEMPTS):
        now = clock.time()
        answer: Answer = yield Call(leave(schema, partition_key, sort_key, holder_id, versions, str(uuid.uuid4()),
                                          last, int(now + expiry_period), int(now), keep_released_rows))
        if not isinstance(answer, Refused):
            return answer
        found = entry_of(answer.item, holder_id)
        if found is None or found.record_version_number not in versions:
            return answer
        last = len(holders_of(answer.item)) <= 1
    crowded = DynamoDBLockError(DynamoDBLockError.UNKNOWN,
                                f'other shared holders joined or left {_LEAVE_ATTEMPTS} times while this one left')
    return Failed(crowded, False, Reason.OTHER)


# How many times a shared holder's release guesses whether it is the last one.
_LEAVE_ATTEMPTS = 10
