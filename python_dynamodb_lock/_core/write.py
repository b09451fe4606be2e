"""One conditional write of a lock, and what follows it: the request, the judgement of its
answer, and the undo of a write whose caller was interrupted (freed if it lands, now or later).

The pieces every way of acquiring builds on (:mod:`.acquire` for one key, :mod:`.shared_ops` for
shared holders, :mod:`.multi` for a set, :mod:`.release` for hand-overs); it imports none of them.
"""
from __future__ import annotations

import dataclasses
import uuid
from typing import Any, Callable, Dict, FrozenSet, Mapping, Optional, Tuple, Union
from typing import Protocol as TypingProtocol

from .._model.errors import DynamoDBLockError, Reason
from .._wire.lock_writes import acquire_free, acquire_over, free_row
from .._wire.requests import Request, get
from .._wire.sessions import take_over_in_session
from .._model.schema import (
    COL_ACQUISITION_ID,
    COL_FENCING_TOKEN,
    COL_LEASE_EXPIRY,
    COL_RECORD_VERSION_NUMBER,
    COL_RELEASED_AT,
    Item,
    PartitionKey,
    Schema,
    lease_expiry,
)
from .answers import Answer, Applied, Failed, Refused
from .effects import Call, Emit, Pending, Protocol, Settle, Sleep
from .events import Event, Kind
from .messages import describe_key, explain
from .state import TimeSource

__all__ = ['AcquireAttempt', 'Blocked', 'SessionToEnd', 'Written', 'free_if_landed', 'free_landed', 'is_abandoned',
           'is_free', 'new_lock_item', 'raise_if_closed', 'read_row', 'token_after', 'token_floor', 'undo',
           'undo_write', 'with_token', 'write_failed', 'write_lock', 'write_request']


class SessionToEnd(TypingProtocol):
    """The session of a row taken over because that session died: the takeover also ends it."""

    @property
    def session_id(self) -> str: ...

    @property
    def expired_version(self) -> Optional[str]: ...



@dataclasses.dataclass(frozen=True)
class AcquireAttempt:
    """Everything one acquisition needs to know, fixed before it starts."""

    schema: Schema
    partition_key: PartitionKey
    sort_key: str
    unique_identifier: str
    item_template: Item          # the lock item without version, TTL and acquisition id
    retry_period: float
    retry_timeout: float
    expiry_period: float
    default_lease: float         # for rows without a readable lease
    keep_released_rows: bool = True
    max_clock_skew: Optional[float] = None   # trust wall clocks to this much: take over past lease_expiry
    shared: bool = False         # a shared (read) lock: see _core/shared.py
    writer_marker: bool = True   # facing shared holders, set a writer-waiting marker (see _core/shared_ops.py)
    join_beside: bool = False    # a shared acquisition's first write guesses that other holders are there
    lock_existing_item: bool = False   # add the lock to the item at the key; its other attributes stay
    only_if_exists: bool = False       # ... and only if that item exists (else ITEM_NOT_FOUND)
    sessions: bool = False       # watch the session a row names instead of the row (docs/sessions.rst)


@dataclasses.dataclass(frozen=True)
class Written:
    """The lock item a conditional write stored (its fencing token included, when the engine
    returned it), and when that write was started."""

    item: Item
    attempt_started: float
    replaced: Optional[Item] = None   # the abandoned row this write took over
    waited: float = 0.0               # seconds from the start of the acquisition
    shared: bool = False              # a shared holder's entry (``item`` is its view of the row)
    beside_others: bool = False       # that entry joined other shared holders
    # A lock on an existing item whose row holds nothing but the lock: there was no item at the
    # key (the write created it), or only a released lock row. Its release frees the row as a
    # plain lock's does, so that no row without a TTL or a holder is left behind.
    own_row: bool = False


class Blocked:
    """A write was refused: ``row`` is what is in the way (None: the row is free)."""

    __slots__ = ('row', 'raw')

    def __init__(self, row: Optional[Item], existing_item: bool = False) -> None:
        self.row = None if is_free(row, existing_item) else row
        self.raw = row     # a released row too: shared acquirers read its writer-waiting marker


def is_free(row: Optional[Mapping[str, Any]], existing_item: bool = False) -> bool:
    """Whether the key is free for an acquisition.

    A plain lock finds it free when there is no row or a released one. A row without lock
    attributes (an application's item) is judged held by an unknown owner: it would be
    replaced. A lock on an existing item (``existing_item``) finds it free when the row carries
    no lock (no ``record_version_number``); a released row is taken over instead (it is judged
    abandoned at once: its lease is 0), so that the TTL its release set is removed.
    """
    if existing_item:
        return Schema.version_of(row) is None
    return row is None or Schema.is_released(row)


def token_floor(clock: TimeSource) -> int:
    """The fencing token an acquisition starts from when the row has none (it is new, or it was
    deleted by TTL or by a client that keeps no released rows): the writer's wall clock in
    microseconds, so that a token issued later is larger as long as clocks agree to within the
    time the row was gone."""
    return int(clock.time() * 1_000_000)


def is_abandoned(schema: Schema, row: Mapping[str, Any], unchanged_for: float, wall_now: float,
                 default_lease: float, max_clock_skew: Optional[float] = None, trust_ttl: bool = True) -> bool:
    """Whether the holder of ``row`` is presumed dead.

    True once its version has stayed the same for its own stored lease duration, as timed by
    this process, or once its TTL epoch has passed (unless not ``trust_ttl``: on an existing
    item the TTL attribute is the application's, not the holder's). With ``max_clock_skew`` (the waiter trusts
    the wall clocks of all hosts to agree to within that), also once the lease's end that the
    holder wrote (``lease_expiry``), plus that skew, has passed on this host's wall clock: a
    crashed holder's lock is then taken at first sight instead of after a whole lease of watching.
    """
    if unchanged_for >= schema.lease_of(row, default_lease):
        return True
    expiry_time = schema.expiry_of(row) if trust_ttl else None
    if expiry_time is not None and expiry_time + (max_clock_skew or 0.0) < wall_now:
        return True
    if max_clock_skew is None:
        return False
    lease_expiry = Schema.lease_expiry_of(row)
    return lease_expiry is not None and lease_expiry + max_clock_skew < wall_now


def write_lock(attempt: AcquireAttempt, clock: TimeSource, blocking: Optional[Item],
           watch: Optional[SessionToEnd] = None) -> Protocol[Union[Written, Blocked]]:
    """One conditional write of a new version of the lock: where the key is free (``blocking``
    None), or over the abandoned row ``blocking``. Written, or blocked by a row.

    Over a row whose session stayed unchanged for its lease (``watch``), the write is one
    transaction that also ends that session, conditioned on the version watched."""
    schema = attempt.schema
    # Others time our lease from when they first see the row, which can be long before the
    # answer arrives (a lost answer, a retry after backoff): time our own side from here,
    # before the wall-clock reading of the lease_expiry we write.
    attempt_started = clock.monotonic()
    item, write = write_request(attempt, clock, blocking)
    new_version = item[COL_RECORD_VERSION_NUMBER]

    def written(row: Optional[Mapping[str, Any]], own_row: Optional[bool] = None) -> Written:
        # What the row holds besides the lock comes along, unless the row is the application's item.
        if own_row is None:     # over a released lock row, a lock on an item holds the lock's own row
            own_row = attempt.lock_existing_item and Schema.is_released(blocking)
        return Written(with_token(item, row, not attempt.lock_existing_item), attempt_started, blocking,
                       own_row=own_row)
    if watch is not None and watch.expired_version is not None and blocking is not None:
        write = take_over_in_session(schema, write, watch.session_id, watch.expired_version, str(uuid.uuid4()),
                                     int(clock.time()))
    try:
        answer = yield Call(write)
    except GeneratorExit:
        raise
    except BaseException:
        # Interrupted (cancelled, Ctrl-C) while the write was in flight: it may land, now or
        # later, leaving a row that nobody holds and that blocks everybody for a lease.
        yield Settle(undo_write(attempt, clock, new_version))
        raise
    try:
        return (yield from _judge_write(attempt, clock, write, answer, blocking, written, new_version,
                                             attempt_started))
    except (GeneratorExit, DynamoDBLockError):
        raise
    except BaseException:
        # Interrupted while the answer was being checked (the read after a transaction, or
        # after an unanswered write): the write landed, or may have, and nobody is handed it.
        if not isinstance(answer, Refused):
            yield Settle(free_landed(attempt, clock, new_version, isinstance(answer, Applied)))
        raise


def _judge_write(attempt: AcquireAttempt, clock: Any, write: Request, answer: Answer, blocking: Optional[Item],
                 written: Callable[..., Written], new_version: str,
                 attempt_started: float) -> Protocol[Union[Written, Blocked]]:
    """What the answer to the acquiring ``write`` (of ``new_version``) says: Written (the row
    read where the answer does not carry it), or Blocked by a row; raises when it failed."""
    schema = attempt.schema
    yield Emit(Event(Kind.ACQUIRE_ATTEMPT, attempt.unique_identifier, fields={
        'outcome': type(answer).__name__.lower(), 'takeover': blocking is not None,
        'duration': clock.monotonic() - attempt_started}))
    if write.operation == 'transact_write_items' and not isinstance(answer, Refused):
        if isinstance(answer, Applied) or answer.code == 'TransactionCanceledException':
            # A transaction returns no values: the fencing token (when it applied), or the row
            # in the way (when it was cancelled: a condition failed, or a conflict), is read.
            row = yield from read_row(schema, attempt.partition_key, attempt.sort_key, 'read')
            if Schema.version_of(row) == new_version or isinstance(answer, Applied):
                return written(row if Schema.version_of(row) == new_version else None)
            return Blocked(row, attempt.lock_existing_item)
    if isinstance(answer, Applied):
        if write.params.get('ReturnValues') == 'ALL_OLD':    # a lock added to the item at the key
            before = answer.response.get('Attributes')
            return written(token_after(write, before), own_row=not before)
        return written(answer.response.get('Attributes'))
    if isinstance(answer, Refused):
        if Schema.version_of(answer.item) == new_version:
            # Our write landed; botocore's retry met our own row.
            return written(answer.item)
        if answer.item is None and blocking is None:
            # No item, or an engine that ignores ALL_OLD: find out what is in the way.
            row = yield from read_row(schema, attempt.partition_key, attempt.sort_key, 'read')
            if row is None and attempt.only_if_exists:
                raise DynamoDBLockError(
                    DynamoDBLockError.ITEM_NOT_FOUND,
                    f'Could not acquire {describe_key(schema, attempt.partition_key, attempt.sort_key)}: there is no '
                    'item at that key (only_if_exists=True); nothing was written')
            return Blocked(row, attempt.lock_existing_item)
        return Blocked(answer.item, attempt.lock_existing_item)
    assert isinstance(answer, Failed)
    if answer.maybe_applied:
        landed = yield from _settle_unanswered_write(attempt, clock, new_version)
        if landed is not None:
            return written(landed)
    raise write_failed(attempt, answer)


def token_after(write: Request, before: Optional[Mapping[str, Any]]) -> Dict[str, Any]:
    """The fencing token an applied acquiring ``write`` that answered with the item as it was
    (``before``; None: there was none) gave the row: one more than the item's, or than the
    write's floor (see ``_wire.lock_writes._lock_update``)."""
    token = Schema.fencing_token_of(before)
    return {COL_FENCING_TOKEN: (write.params['ExpressionAttributeValues'][':token_floor'] if token is None
                                else token) + 1}


def write_failed(attempt: AcquireAttempt, answer: Failed) -> DynamoDBLockError:
    """The error of an acquiring write that failed (and did not land)."""
    error = DynamoDBLockError(
        DynamoDBLockError.UNKNOWN,
        f'Could not acquire {describe_key(attempt.schema, attempt.partition_key, attempt.sort_key)}: '
        f'{explain(attempt.schema, answer.error)}',
        reason=answer.reason,
    )
    error.__cause__ = answer.error
    return error


def write_request(attempt: AcquireAttempt, clock: TimeSource, blocking: Optional[Item]) -> Tuple[Item, Request]:
    """A new acquisition's item, and the conditional write of it: where the key is free
    (``blocking`` None), or over the abandoned row ``blocking`` (conditioned on its version)."""
    schema = attempt.schema
    item = new_lock_item(attempt, clock)
    if blocking is None:
        return item, acquire_free(schema, item, token_floor(clock), attempt.lock_existing_item,
                                  attempt.only_if_exists)
    return item, acquire_over(schema, item, [str(Schema.version_of(blocking))], token_floor(clock),
                              _replaced_names(attempt, blocking))


def _replaced_names(attempt: AcquireAttempt, blocking: Item) -> FrozenSet[str]:
    """What a takeover of ``blocking`` removes besides what it writes: a plain lock, the old
    lock's additional attributes; a lock on an existing item, nothing of the item's own, only
    the TTL a plain release set on a released row (DynamoDB would delete the item by it)."""
    if not attempt.lock_existing_item:
        return attempt.schema.extra_names(blocking)
    return frozenset({attempt.schema.ttl_attribute_name}) if Schema.is_released(blocking) else frozenset()


def new_lock_item(attempt: AcquireAttempt, clock: TimeSource) -> Item:
    """The item of a new acquisition: the attempt's template with a fresh version (also its
    acquisition id) and TTL (none on an existing item)."""
    new_version = str(uuid.uuid4())
    now = clock.time()
    item: Item = dict(attempt.item_template)
    item[COL_RECORD_VERSION_NUMBER] = new_version
    item[COL_ACQUISITION_ID] = new_version
    if not attempt.lock_existing_item:
        item[attempt.schema.ttl_attribute_name] = int(now + attempt.expiry_period)
    item[COL_LEASE_EXPIRY] = lease_expiry(now, attempt.schema.lease_of(attempt.item_template, attempt.default_lease))
    return item


def with_token(item: Item, written: Optional[Mapping[str, Any]], keep_others: bool = True) -> Item:
    """``item`` with the fencing token the write gave it (from the answer or the row read back),
    and the attributes the row kept besides (those a release left for the next holder:
    ``release_lock(attributes=...)``); ``item``'s own values win. Not with ``keep_others``
    False (a lock on an existing item: the item's other attributes are the application's)."""
    token = Schema.fencing_token_of(written)
    kept = {name: value for name, value in (written or {}).items()
            if keep_others and name not in item and name not in (COL_FENCING_TOKEN, COL_RELEASED_AT)}
    return {**kept, **item, COL_FENCING_TOKEN: token} if token is not None else {**kept, **item}


def _free_own_row(attempt: AcquireAttempt, clock: TimeSource, version: str) -> Request:
    """The write that frees the row a failed or interrupted write of ours may have left."""
    return free_row(attempt.schema, attempt.partition_key, attempt.sort_key, [version], str(uuid.uuid4()),
                    int(clock.time() + attempt.expiry_period), int(clock.time()),
                    attempt.schema.extra_names(attempt.item_template), attempt.keep_released_rows,
                    existing_item=attempt.lock_existing_item)


# Follow-up reads of a row an interrupted write of ours may still land on: the first after this
# many seconds, each later one twice as late, up to the longest gap.
_FIRST_FOLLOW_UP = 0.25
_LONGEST_FOLLOW_UP = 5.0


def undo_write(attempt: AcquireAttempt, clock: TimeSource, version: str) -> Protocol[None]:
    """Settle an acquiring write (``version``) that an interruption cut short; run by the driver
    apart from the interrupted caller (``Settle``), so that a second interruption cannot stop it.

    The write's answer, when the driver could still wait for it (``Pending``), says whether it
    landed: a refused write left nothing; a landed one is freed. When the answer can never be
    known (the call itself was cut short, as a cancellation or a Ctrl-C cuts it), the row is
    freed if it is ours now, and then watched in the background for one lease (``follow_up``):
    the write may still be on the wire, and a late landing is freed too. Past that lease a late
    landing is an abandoned lock like any other: others take it over after its lease.
    """
    return (yield from undo(attempt, clock, lambda row: Schema.version_of(row) == version,
                            lambda known: free_if_landed(attempt, clock, version, assume_landed=known)))


def undo(attempt: AcquireAttempt, clock: TimeSource, ours: Callable[[Optional[Item]], bool],
         free: Callable[[bool], Protocol[Optional[bool]]]) -> Protocol[None]:
    """:func:`undo_write` for any acquiring write: ``ours(row)`` says whether a row returned
    with a refusal is our write's; ``free(known_landed)`` frees what it left (as
    :func:`free_if_landed` answers)."""
    answer = yield Pending()
    if isinstance(answer, Refused) and not ours(answer.item):
        return      # refused: nothing of ours landed
    if isinstance(answer, Failed) and not answer.maybe_applied:
        return      # refused before it was applied (throttled, invalid)
    yield from _free_and_watch(attempt, clock, free, isinstance(answer, (Applied, Refused)))


def free_landed(attempt: AcquireAttempt, clock: TimeSource, version: str, known: bool) -> Protocol[None]:
    """Free the row an interrupted write of ours (``version``) left: ``known`` when the write
    surely landed. When that cannot be told yet, the row is watched for one lease in the
    background (``Settle(follow_up=True)``), and freed whenever it carries ``version``."""
    yield from _free_and_watch(attempt, clock,
                               lambda known: free_if_landed(attempt, clock, version, assume_landed=known), known)


def _free_and_watch(attempt: AcquireAttempt, clock: TimeSource, free: Callable[[bool], Protocol[Optional[bool]]],
                    known: bool) -> Protocol[None]:
    landed = yield from free(known)
    if landed or (known and landed is None):
        return
    yield Settle(_watch_for_late_landing(attempt, clock, known, free), follow_up=True)


def _watch_for_late_landing(attempt: AcquireAttempt, clock: TimeSource, known: bool,
                            free: Callable[[bool], Protocol[Optional[bool]]]) -> Protocol[None]:
    """Read the row at growing intervals for one lease, and free it whenever it carries our
    write (an interrupted write of ours that landed late, or whose undo failed)."""
    lease = attempt.schema.lease_of(attempt.item_template, attempt.default_lease)
    watch_until = clock.monotonic() + lease
    delay = _FIRST_FOLLOW_UP
    landed: Optional[bool] = None
    while True:
        remaining = watch_until - clock.monotonic()
        if remaining <= 0:
            if landed is False:
                yield Emit(Event(Kind.ORPHAN_UNVERIFIED, attempt.unique_identifier, fields={
                    'what': describe_key(attempt.schema, attempt.partition_key, attempt.sort_key),
                    'error': 'the interrupted write could not be checked', 'lease': lease}))
            return
        if (yield Sleep(min(delay, remaining))):
            watch_until = clock.monotonic()   # the client is closing: one last look, then stop
        delay = min(delay * 2, _LONGEST_FOLLOW_UP)
        landed = yield from free(known)
        if landed or (known and landed is None):
            return


def free_if_landed(attempt: AcquireAttempt, clock: TimeSource, version: str,
                   assume_landed: bool = False) -> Protocol[Optional[bool]]:
    """Free the row if it carries ``version`` (a write of ours that nobody was handed).

    :returns: True when the row was ours and is now freed; None when it is not ours (yet: a
        write still on the wire may land later); False when DynamoDB could not be asked.
    """
    schema = attempt.schema
    if not assume_landed:
        read = yield Call(get(schema, attempt.partition_key, attempt.sort_key))
        if not isinstance(read, Applied):
            return False
        if Schema.version_of(read.response.get('Item')) != version:
            return None
    freed = yield Call(_free_own_row(attempt, clock, version))
    if isinstance(freed, Applied):
        return True
    if isinstance(freed, Refused):
        return None     # not (or no longer) ours
    return False


def _settle_unanswered_write(attempt: AcquireAttempt, clock: TimeSource, new_version: str) -> Protocol[Optional[Item]]:
    """A write we are about to report as failed may have landed: did it? If it did, it is ours
    (the row is returned).

    A consistent read tells. When the read fails too, a write conditioned on the version ours
    wrote frees the row if it is there (it can only ever touch our own row, which would
    otherwise block everybody, this client included, for a whole lease). When DynamoDB cannot
    be reached even for that, the row (if any) is taken over by others after its lease.
    """
    schema = attempt.schema
    answer = yield Call(get(schema, attempt.partition_key, attempt.sort_key))
    if isinstance(answer, Applied):
        row = answer.response.get('Item') or None
        return dict(row) if row is not None and Schema.version_of(row) == new_version else None
    cleanup = yield Call(_free_own_row(attempt, clock, new_version))
    if isinstance(cleanup, Failed):
        kind = Kind.ORPHAN_UNVERIFIED if cleanup.reason == Reason.UNREACHABLE else Kind.ORPHAN_CLEANUP_FAILED
        yield Emit(Event(kind, attempt.unique_identifier, fields={
            'what': describe_key(schema, attempt.partition_key, attempt.sort_key),
            'error': explain(schema, cleanup.error),
            'lease': schema.lease_of(attempt.item_template, attempt.default_lease)}))
    return None


def read_row(schema: Schema, partition_key: PartitionKey, sort_key: str,
             verb: Optional[str] = 'read') -> Protocol[Optional[Dict[str, Any]]]:
    """A consistent read of the lock row (None: no row).

    :raises DynamoDBLockError: ``UNKNOWN`` when the read fails; the message starts with
        "Could not <verb> <key>: " unless ``verb`` is None.
    """
    answer = yield Call(get(schema, partition_key, sort_key))
    if isinstance(answer, Applied):
        return dict(answer.response['Item']) if answer.response.get('Item') else None
    assert isinstance(answer, Failed), answer
    message = explain(schema, answer.error)
    if verb is not None:
        message = f'Could not {verb} {describe_key(schema, partition_key, sort_key)}: {message}'
    raise DynamoDBLockError(DynamoDBLockError.UNKNOWN, message, reason=answer.reason) from answer.error


def raise_if_closed(is_closed: Callable[[], bool]) -> None:
    if is_closed():
        raise DynamoDBLockError(DynamoDBLockError.CLIENT_SHUTDOWN, 'The lock client has been closed')
