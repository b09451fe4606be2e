"""One function per feature of the matrix: the cell's scenario, and the invariants checked.

Every cell gets a :class:`Cell` (the table on DynamoDB Local, the test's lock clients of one
kind sharing a ManualClock, the entry point under test). A feature the entry point does not
accept is a cell too: it asserts the refusal (TypeError or ValueError naming the option, before
anything is written). Time is fake (the clients' ManualClock) except for the write held "in
flight", whose answer comes late in real time.
"""
from __future__ import annotations

import dataclasses
import datetime
from typing import Any, Dict, Optional, Tuple

from boto3.dynamodb.types import TypeSerializer

from _matrix.checks import (assert_exclusive, assert_free, assert_refused, assert_rows_held, assert_session_rows,
                            nothing_written)
from _matrix.entries import (ACQUIRE_FIRST_LOCK, ACQUIRE_LOCKS, KEYS, TRY_ACQUIRE_LOCKS, Held, acquire,
                             accepts, hold_every_key, waits)
from helpers import LockClients
from python_dynamodb_lock.python_dynamodb_lock import DynamoDBLockError
from python_dynamodb_lock.testing import LockTable

seconds = datetime.timedelta
#: The dead holders' lease (fake seconds); the triers try once per fake second.
LEASE = 4
#: The per-lock lease of the ``lease`` cell (shorter than the client's).
LOCK_LEASE = 2
#: The lease a lock row stores under a session (the holder's ``expiry_period``).
ROW_LEASE = 3 * LEASE
SHORT = {'lease_duration': seconds(seconds=LEASE), 'heartbeat_period': seconds(seconds=1),
         'safe_period': seconds(seconds=2)}
#: How long (real seconds) a cancelled acquisition may take to answer when its write is in
#: flight: generous (the documented time is about 50 ms), so that a loaded machine does not
#: fail it; the answer of the write itself comes ``LATE_ANSWER`` seconds after it landed.
CANCEL_ANSWER_BOUND = 2.0
LATE_ANSWER = 2.5


@dataclasses.dataclass
class Cell:
    engine: LockTable
    clients: LockClients
    entry: str

    @property
    def kind(self) -> str:
        return self.clients.kind

    @property
    def clock(self) -> Any:
        return self.clients.clock

    @property
    def keys(self) -> Tuple[Tuple[str, str], ...]:
        return KEYS[self.entry]

    def make(self, name: str, **kwargs: Any) -> Any:
        """A client with a boto3 resource of its own (its calls recorded apart); hand-driven
        unless ``session=True`` (a session is renewed in the background, on the ManualClock)."""
        if kwargs.get('session'):
            kwargs.setdefault('hand_driven', False)
        return self.clients.make(self.engine.new_resource(), owner_name=name, **kwargs)

    def accepts(self, option: str) -> bool:
        return accepts(self.entry, self.kind, option)

    def refused(self, client: Any, option: str, error: Any = TypeError, **options: Any) -> None:
        """The entry point refuses ``options`` (naming ``option``) before anything is written."""
        assert_refused(self.engine, client._dynamodb_resource, self.keys,
                       lambda: acquire(client, self.entry, retry_timeout=0, **options), error, option)


def once(cell: Cell, client: Any, **options: Any) -> Optional[Held]:
    """One attempt of the entry point: a try, or a waiting entry point with ``retry_timeout=0``
    (None when it timed out)."""
    if not waits(cell.entry):
        return acquire(client, cell.entry, **options)
    try:
        return acquire(client, cell.entry, retry_timeout=0, **options)
    except DynamoDBLockError as error:
        if error.code != DynamoDBLockError.ACQUIRE_TIMEOUT:
            raise
        return None


def held_once(cell: Cell, client: Any, **options: Any) -> Held:
    held = once(cell, client, **options)
    assert held is not None, f'{cell.entry} could not take free keys'
    return held


# --- holding ----------------------------------------------------------------------------

def exclusive(cell: Cell) -> None:
    """A holder's rows exist while it holds; another client takes none of its keys; after the
    release another client takes every key at once."""
    holder, checker = cell.make('holder'), cell.make('checker')
    held = held_once(cell, holder)
    expected = 1 if cell.entry == ACQUIRE_FIRST_LOCK else len(cell.keys)
    assert len(held.locks) == expected and all(lock.status == lock.LOCKED for lock in held.locks)
    assert_rows_held(cell.engine, held)
    assert_exclusive(checker, held.keys)
    held.release()
    assert_free(checker, cell.keys, 'after the release')


def session(cell: Cell) -> None:
    """``session=True``: the holder's rows name its session, whose row exists while it holds;
    another session client (which takes over a lock whose session is gone) takes none of them."""
    holder, checker = cell.make('holder', session=True), cell.make('checker', session=True)
    held = held_once(cell, holder)
    assert_exclusive(checker, held.keys)
    assert_session_rows(cell.engine, held)
    held.release()
    assert_free(checker, cell.keys, 'after the release')


def shared(cell: Cell) -> None:
    """``shared=True``: two clients hold the key together; an exclusive acquirer of a third
    client gets none of it; after both release, it gets it."""
    first, second, writer = cell.make('reader-1'), cell.make('reader-2'), cell.make('writer')
    if not cell.accepts('shared'):
        cell.refused(first, 'shared', shared=True)
        return
    one, two = held_once(cell, first, shared=True), held_once(cell, second, shared=True)
    assert one.locks[0].shared and two.locks[0].shared
    assert_rows_held(cell.engine, one)
    assert_rows_held(cell.engine, two)
    assert_exclusive(writer, one.keys, 'held shared')
    one.release()
    assert_exclusive(writer, one.keys, 'held shared by one reader')
    two.release()
    assert_free(writer, cell.keys, 'after both readers released')


def session_shared(cell: Cell) -> None:
    """A shared lock under ``session=True`` is refused (ValueError naming the session)."""
    cell.refused(cell.make('reader', session=True), 'session', ValueError, shared=True)


def _put_item(engine: LockTable, partition_key: str, sort_key: str, **values: Any) -> None:
    serializer = TypeSerializer()
    item = {engine.partition_key_name: partition_key, **values}
    if engine.sort_key_name is not None:
        item[engine.sort_key_name] = sort_key
    engine.client.put_item(TableName=engine.table_name,
                           Item={name: serializer.serialize(value) for name, value in item.items()})


def existing_item(cell: Cell) -> None:
    """``lock_existing_item=True, only_if_exists=True`` on an application's item: held while
    the item keeps its data; another client takes none of it; after the release the item and
    its data are still there, and another client locks it again."""
    holder, checker = cell.make('holder'), cell.make('checker')
    options: Dict[str, Any] = {'lock_existing_item': True, 'only_if_exists': True}
    if not cell.accepts('lock_existing_item'):
        cell.refused(holder, 'lock_existing_item', **options)
        return
    for partition_key, sort_key in cell.keys:
        _put_item(cell.engine, partition_key, sort_key, payload='data')
    held = held_once(cell, holder, **options)
    for row in assert_rows_held(cell.engine, held):
        assert row['payload'] == 'data'
    assert_exclusive(checker, held.keys)
    assert once(cell, checker, **options) is None
    held.release()
    for partition_key, sort_key in held.keys:
        assert (cell.engine.read_item(partition_key, sort_key) or {}).get('payload') == 'data', 'the item is gone'
    again = held_once(cell, checker, **options)
    again.release()


def keep_row(cell: Cell) -> None:
    """``keep_row=False`` deletes the row at release, ``keep_row=True`` keeps it released."""
    holder, checker = cell.make('holder'), cell.make('checker')
    if not cell.accepts('keep_row'):
        cell.refused(holder, 'keep_row', keep_row=False)
        return
    for keep in (False, True):
        held = held_once(cell, holder, keep_row=keep)
        assert_exclusive(checker, held.keys)
        held.release()
        for partition_key, sort_key in held.keys:
            row = cell.engine.read_item(partition_key, sort_key)
            if keep:
                assert row is not None and row.get('released_at') is not None, f'keep_row=True: {row}'
            else:
                assert row is None, f'keep_row=False left the row {row}'
        assert_free(checker, cell.keys, 'after the release')


def release_attributes(cell: Cell) -> None:
    """``release(attributes=...)`` leaves them for the next holder (another client); a set of
    keys refuses them (TypeError) and stays held."""
    holder, following = cell.make('holder'), cell.make('following')
    held = held_once(cell, holder)
    if cell.entry in (ACQUIRE_LOCKS, TRY_ACQUIRE_LOCKS):
        with nothing_written(cell.engine, holder._dynamodb_resource, []):
            try:
                held.release(attributes={'result': 'ok'})
            except TypeError as error:
                assert 'attributes' in str(error)
            else:
                raise AssertionError('release(attributes=...) of a set of keys was accepted')
        assert_rows_held(cell.engine, held)
        assert_exclusive(following, held.keys)
        held.release()
        return
    assert held.release(attributes={'result': 'ok'}) is True
    after = held_once(cell, following)
    assert after.keys == held.keys
    assert after.locks[0].additional_attributes.get('result') == 'ok', after.locks[0].additional_attributes
    after.release()


# --- dead holders ---------------------------------------------------------------------------

def tries_until_taken(cell: Cell, trier: Any, most: int, **options: Any) -> Tuple[float, Held]:
    """One attempt of the entry point per fake second: (the fake seconds from the first try to
    the one that took the keys, what it took)."""
    started = cell.clock.monotonic()
    for _ in range(most):
        held = once(cell, trier, **options)
        if held is not None:
            return cell.clock.monotonic() - started, held
        cell.clock.advance(1)
    raise AssertionError(f'repeated {cell.entry} did not take over a dead holder within {most} tries '
                         f'(its lease: {LEASE}s)')


def _dies_holding(cell: Cell, **client_options: Any) -> Any:
    holder = cell.make('holder', **SHORT, **client_options)
    hold_every_key(holder, cell.entry)
    holder.close()                       # no release, no more heartbeats: its rows are left
    return holder


def _taken_over(cell: Cell, held: Held, lease: float, elapsed: float) -> None:
    assert elapsed >= lease, f'a dead holder was taken over {elapsed}s after the first look, before its {lease}s lease'
    assert elapsed <= lease + 2, f'a dead holder was taken over only {elapsed}s after the first look (lease {lease}s)'
    for lock in held.locks:
        assert lock.took_over_from is not None and lock.took_over_from.owner_name == 'holder'
    assert_rows_held(cell.engine, held)
    assert_exclusive(cell.make('checker'), held.keys, 'taken over')
    held.release()


def dead_holder_tries(cell: Cell) -> None:
    """A holder closed without releasing is taken over by repeated one-attempt calls after its
    lease, not before."""
    _dies_holding(cell)
    elapsed, held = tries_until_taken(cell, cell.make('trier'), 4 * LEASE)
    _taken_over(cell, held, LEASE, elapsed)


def dead_session_holder(cell: Cell) -> None:
    """The same with the dead holder under ``session=True``: a session-aware trier takes its
    locks over after the session lease (the client's lease), not before. A set of keys does not
    watch sessions (docs/sessions.rst): it takes them after the lock rows' long lease (the
    holder's ``expiry_period``), not before."""
    _dies_holding(cell, session=True, expiry_period=seconds(seconds=ROW_LEASE))
    elapsed, held = tries_until_taken(cell, cell.make('trier', session=True), 2 * ROW_LEASE)
    watches_sessions = cell.entry not in (ACQUIRE_LOCKS, TRY_ACQUIRE_LOCKS)
    _taken_over(cell, held, LEASE if watches_sessions else ROW_LEASE, elapsed)


def dead_holder_waiting(cell: Cell) -> None:
    """A waiting acquisition takes a dead holder over after its lease, not before."""
    _dies_holding(cell)
    trier = cell.make('trier')
    started = cell.clock.monotonic()
    with cell.clock.auto_advance_in_current_thread():
        held = acquire(trier, cell.entry, retry_period=1, retry_timeout=10 * LEASE)
    assert held is not None
    _taken_over(cell, held, LEASE, cell.clock.monotonic() - started)


def lease(cell: Cell) -> None:
    """A per-lock ``lease_duration=`` is stored in the row, and a dead holder of that lock is
    taken over after it (shorter than the client's lease), not before."""
    holder = cell.make('holder', **SHORT)
    if not cell.accepts('lease_duration'):
        cell.refused(holder, 'lease_duration', lease_duration=seconds(seconds=LOCK_LEASE))
        return
    held = held_once(cell, holder, lease_duration=seconds(seconds=LOCK_LEASE))
    for row in assert_rows_held(cell.engine, held):
        assert row['lease_duration'] == LOCK_LEASE, row
    holder.close()
    elapsed, taken = tries_until_taken(cell, cell.make('trier'), 4 * LEASE)
    _taken_over(cell, taken, LOCK_LEASE, elapsed)
