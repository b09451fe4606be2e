"""Locks on existing application items (``lock_existing_item``, ``only_if_exists``) and the
per-lock and per-release ``keep_row``, on DynamoDB Local, for both clients.

A lock on an existing item adds the lock's attributes to the item at the key with one
UpdateItem, and its release removes only them: the item's own attributes must come out of
acquire, heartbeats, release and takeover exactly as they went in (compared as typed DynamoDB
JSON, so a number's digits or a binary's bytes would show any change).
"""
from __future__ import annotations

import asyncio
import datetime
import logging
from decimal import Decimal
from typing import Any, Dict, Optional, Tuple

import pytest
from boto3.dynamodb.types import TypeSerializer

from helpers import BackgroundCall, CallRecorder, LockClients, ManualClock, is_registered, step
from python_dynamodb_lock.aio import AsyncDynamoDBLock
from python_dynamodb_lock.python_dynamodb_lock import DynamoDBLock, DynamoDBLockError

seconds = datetime.timedelta
# The lock's own attributes on an item (the fencing token stays after a release that keeps the row).
LOCK_NAMES = {'owner_name', 'lease_duration', 'record_version_number', 'acquisition_id', 'lease_expiry',
              'fencing_token', 'released_at'}
# An application item: reserved words as names (data, name, status, size), every type.
APP = {
    'data': 'order 42', 'name': 'Ada', 'status': 'PAID', 'size': Decimal('12345678901234567890.5'),
    'blob': b'\x00\x01\xfe\xff', 'nested': {'list': [Decimal(1), 'two', None, True], 'map': {'k': 'v'}},
    'tags': {'a', 'b'}, 'numbers': {Decimal(1), Decimal('2.5')}, 'empty': '',
}


@pytest.fixture
def engine(local_engine: Any) -> Any:
    return local_engine


def put_app_item(engine: Any, key: str, attributes: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """Write an application item (no lock attributes) at the lock key; its typed form."""
    serializer = TypeSerializer()
    item = {'lock_key': key, 'sort_key': '-', **(APP if attributes is None else attributes)}
    engine.client.put_item(TableName=engine.table_name,
                           Item={name: serializer.serialize(value) for name, value in item.items()})
    typed: Dict[str, Any] = engine.read_typed_item(key)
    return typed


def own_part(typed: Dict[str, Any]) -> Dict[str, Any]:
    """The item's own attributes (and keys), without the lock's."""
    return {name: value for name, value in typed.items() if name not in LOCK_NAMES}


def test_a_lock_on_an_existing_item_leaves_its_attributes_untouched_from_acquire_to_release(
        engine: Any, local_clients: LockClients) -> None:
    client = local_clients.make(owner_name='worker')
    before = put_app_item(engine, 'order-42')
    with CallRecorder(engine.resource) as calls:
        lock = client.acquire_lock('order-42', lock_existing_item=True, retry_timeout=seconds(0))
    assert calls.operations() == ['UpdateItem']           # added to the item, never a Put that replaces it
    assert lock.lock_existing_item and lock.additional_attributes == {}
    held = engine.read_typed_item('order-42')
    assert own_part(held) == before
    assert held['owner_name'] == {'S': 'worker'} and held['record_version_number'] == {'S': lock.record_version_number}
    assert 'expiry_time' not in held                      # no TTL: DynamoDB would delete the item by it
    assert lock.fencing_token is not None and lock.expiry_time == 0
    client.send_heartbeats()
    renewed = engine.read_typed_item('order-42')
    assert renewed['record_version_number'] == {'S': lock.record_version_number} != held['record_version_number']
    assert own_part(renewed) == before and 'expiry_time' not in renewed
    lock.release(best_effort=False)
    after = engine.read_typed_item('order-42')
    assert after == {**before, 'fencing_token': {'N': str(lock.fencing_token)}}   # the token stays (keep_row)
    assert lock.status == DynamoDBLock.RELEASED and not is_registered(client, lock)


def test_keep_row_false_leaves_the_item_exactly_as_it_was(engine: Any, local_clients: LockClients) -> None:
    client = local_clients.make()
    before = put_app_item(engine, 'exact')
    lock = client.acquire_lock('exact', lock_existing_item=True, keep_row=False)
    assert lock.keep_row is False
    lock.release(best_effort=False)
    assert engine.read_typed_item('exact') == before


def test_the_fencing_token_kept_on_the_item_keeps_growing(engine: Any, local_clients: LockClients) -> None:
    client = local_clients.make()
    put_app_item(engine, 'tokens')
    tokens = []
    for _ in range(3):
        lock = client.acquire_lock('tokens', lock_existing_item=True, retry_timeout=seconds(0))
        tokens.append(lock.fencing_token)
        lock.release(best_effort=False)
    assert tokens[1] == tokens[0] + 1 and tokens[2] == tokens[1] + 1


def test_without_the_opt_in_an_item_without_lock_attributes_is_held_by_an_unknown_owner(
        engine: Any, local_clients: LockClients, caplog: pytest.LogCaptureFixture) -> None:
    """The published behaviour is kept: the item is neither replaced nor locked; the error says
    how to lock it."""
    caplog.set_level(logging.INFO, logger='python_dynamodb_lock')
    client = local_clients.make()
    before = put_app_item(engine, 'plain')
    assert client.try_acquire_lock('plain') is None
    with CallRecorder(engine.resource) as calls:
        with pytest.raises(DynamoDBLockError) as raised, \
                local_clients.clock.auto_advance_in_current_thread():
            client.acquire_lock('plain', retry_timeout=seconds(seconds=70))     # more than two leases
    assert raised.value.code == DynamoDBLockError.ACQUIRE_TIMEOUT
    assert 'unknown owner' in raised.value.message and 'lock_existing_item=True' in raised.value.message
    # One write, then only reads: such an item is never "taken over" (no futile conditional writes).
    assert len(calls.writes()) == 1 and len(calls.calls) > 10
    warnings = [record.getMessage() for record in caplog.records if 'item without lock attributes' in
                record.getMessage()]
    assert warnings and all('lock_existing_item=True' in line for line in warnings)   # once per wait, rate-limited
    assert not any('writes no fencing token' in record.getMessage() for record in caplog.records)
    assert engine.read_typed_item('plain') == before


@pytest.mark.parametrize('try_only', [False, True], ids=['acquire_lock', 'try_acquire_lock'])
def test_only_if_exists_refuses_a_missing_item_and_writes_nothing(engine: Any, local_clients: LockClients,
                                                                   try_only: bool) -> None:
    client = local_clients.make()
    with pytest.raises(DynamoDBLockError) as raised:
        if try_only:
            client.try_acquire_lock('missing', lock_existing_item=True, only_if_exists=True)
        else:
            client.acquire_lock('missing', lock_existing_item=True, only_if_exists=True)
    assert raised.value.code == DynamoDBLockError.ITEM_NOT_FOUND and 'no item' in raised.value.message
    assert engine.read_item('missing') is None
    put_app_item(engine, 'missing')
    lock = client.acquire_lock('missing', lock_existing_item=True, only_if_exists=True, retry_timeout=seconds(0))
    assert engine.read_item('missing')['record_version_number'] == lock.record_version_number


def test_without_only_if_exists_a_missing_item_is_created_and_freed_as_a_plain_lock_at_release(
        engine: Any, local_clients: LockClients) -> None:
    """The lock created the row (there was no item): its release leaves the key as a plain
    lock's does, here deleted (keep_row=False); see test_release_checks.py for the kept row."""
    client = local_clients.make()
    lock = client.acquire_lock('fresh', lock_existing_item=True, keep_row=False)
    assert engine.read_item('fresh')['record_version_number'] == lock.record_version_number
    lock.release(best_effort=False)
    assert engine.read_item('fresh') is None


def test_a_lock_on_an_item_excludes_others_and_is_taken_over_after_its_lease_with_the_item_intact(
        engine: Any, local_clients: LockClients) -> None:
    clock = local_clients.clock
    before = put_app_item(engine, 'shared-item')
    dead = local_clients.make(engine.new_resource(), owner_name='crashes')
    first = dead.acquire_lock('shared-item', lock_existing_item=True)
    waiter = local_clients.make(owner_name='survivor')
    assert waiter.try_acquire_lock('shared-item', lock_existing_item=True) is None
    assert waiter.try_acquire_lock('shared-item') is None            # a plain lock is excluded too
    dead.close()                                                      # dies holding it: nobody renews
    start = clock.monotonic()
    with clock.auto_advance_in_current_thread():
        lock = waiter.acquire_lock('shared-item', lock_existing_item=True, retry_timeout=seconds(minutes=2))
    assert 30 <= clock.monotonic() - start <= 35
    assert lock.took_over_from is not None and lock.took_over_from.owner_name == 'crashes'
    assert lock.fencing_token == first.fencing_token + 1
    row = engine.read_typed_item('shared-item')
    assert own_part(row) == before and row['owner_name'] == {'S': 'survivor'}
    lock.release(best_effort=False)
    assert own_part(engine.read_typed_item('shared-item')) == before


def test_a_released_plain_row_is_taken_and_its_ttl_removed(engine: Any, local_clients: LockClients) -> None:
    """A plain lock's kept row carries the TTL its release set: a lock on the item must not
    leave it there, or DynamoDB would delete the item while it is held."""
    client = local_clients.make()
    client.acquire_lock('was-plain').release(best_effort=False)
    assert 'expiry_time' in engine.read_item('was-plain')
    lock = client.acquire_lock('was-plain', lock_existing_item=True, retry_timeout=seconds(0))
    row = engine.read_item('was-plain')
    assert row['record_version_number'] == lock.record_version_number
    assert 'expiry_time' not in row and 'released_at' not in row


def test_strict_release_of_a_lock_on_an_item_taken_over_leaves_everything_alone(
        engine: Any, local_clients: LockClients) -> None:
    client = local_clients.make()
    before = put_app_item(engine, 'stolen-item')
    lock = client.acquire_lock('stolen-item', lock_existing_item=True)
    engine.steal_row('stolen-item')
    with pytest.raises(DynamoDBLockError) as raised:
        lock.release(best_effort=False)
    assert raised.value.code == DynamoDBLockError.LOCK_STOLEN and raised.value.holder.owner_name == 'thief'
    row = engine.read_typed_item('stolen-item')
    assert own_part(row) == before and row['owner_name'] == {'S': 'thief'}


def force_released_lock_on_item(engine: Any, local_clients: LockClients, key: str) -> Tuple[Any, Any, Dict[str, Any]]:
    """A lock on an item, then removed from it by another client's force release: the client,
    the lock and the item as it was before."""
    client = local_clients.make()
    before = put_app_item(engine, key)
    lock = client.acquire_lock(key, lock_existing_item=True)
    other = local_clients.make(engine.new_resource())
    described = other.get_lock(key)
    assert described is not None and described.expiry_time == 0
    assert other.force_release_lock(described)
    assert own_part(engine.read_typed_item(key)) == before
    assert 'record_version_number' not in engine.read_item(key)
    return client, lock, before


def test_release_after_the_lock_attributes_were_removed_counts_as_gone(engine: Any,
                                                                       local_clients: LockClients) -> None:
    """Someone removed the lock from the item (a force release): the row is gone, not taken by
    another holder; a strict release says the lock was lost (ROW_GONE) and touches nothing."""
    _, lock, before = force_released_lock_on_item(engine, local_clients, 'removed')
    with pytest.raises(DynamoDBLockError) as lost:
        lock.release(best_effort=False)
    assert lost.value.code == DynamoDBLockError.LOCK_STOLEN and lost.value.reason == 'ROW_GONE'
    assert lock.status == DynamoDBLock.INVALID and lock.lost_to is None
    assert own_part(engine.read_typed_item('removed')) == before


def test_a_heartbeat_after_the_lock_was_removed_from_the_item_reports_the_row_gone(
        engine: Any, local_clients: LockClients) -> None:
    client, lock, before = force_released_lock_on_item(engine, local_clients, 'gone')
    client.send_heartbeats()
    assert lock.status == DynamoDBLock.INVALID and lock.loss_reason == 'ROW_GONE' and lock.lost_to is None
    assert own_part(engine.read_typed_item('gone')) == before


def test_guarded_writes_to_the_locked_item_are_refused_before_anything_is_sent(
        engine: Any, local_clients: LockClients) -> None:
    client = local_clients.make()
    before = put_app_item(engine, 'guarded')
    lock = client.acquire_lock('guarded', lock_existing_item=True)
    key = {'lock_key': 'guarded', 'sort_key': '-'}
    with CallRecorder(engine.resource) as calls:
        with pytest.raises(ValueError, match='touches one item twice'):
            lock.update_item(TableName=engine.table_name, Key=key, UpdateExpression='SET #s = :s',
                             ExpressionAttributeNames={'#s': 'status'}, ExpressionAttributeValues={':s': 'SHIPPED'})
        with pytest.raises(ValueError, match='lock_existing_item=True'):
            lock.delete_item(TableName=engine.table_name, Key=key)
    assert calls.calls == []
    assert own_part(engine.read_typed_item('guarded')) == before
    # Another item is written under the lock's guard as usual.
    lock.put_item(TableName=engine.table_name, Item={'lock_key': 'audit', 'sort_key': '-', 'note': 'shipped'})
    assert engine.read_item('audit')['note'] == 'shipped'
    # The documented way to write the locked item itself while holding the lock.
    engine.resource.Table(engine.table_name).update_item(
        Key=key, UpdateExpression='SET #s = :s',
        ConditionExpression='#token = :token AND attribute_exists(#version)',
        ExpressionAttributeNames={'#s': 'status', '#token': 'fencing_token', '#version': 'record_version_number'},
        ExpressionAttributeValues={':s': 'SHIPPED', ':token': lock.fencing_token})
    assert engine.read_item('guarded')['status'] == 'SHIPPED'


def test_a_release_hands_a_lock_on_an_item_to_a_waiting_thread_in_the_same_write(
        engine: Any, local_clients: LockClients) -> None:
    client = local_clients.make(hand_driven=False)
    before = put_app_item(engine, 'handed')
    lock = client.acquire_lock('handed', lock_existing_item=True)
    waiter = BackgroundCall(client.acquire_lock, 'handed', retry_period=seconds(hours=1),
                            retry_timeout=seconds(hours=1), lock_existing_item=True)
    step(local_clients.clock, 0, client, threads=[waiter.thread])   # the waiter waits (the fake clock stands)
    with CallRecorder(engine.resource) as calls:
        lock.release(best_effort=False)
        handed = waiter.result()
    assert calls.operations() == ['UpdateItem']                     # one write: release and hand-over
    assert handed.lock_existing_item and handed.fencing_token == lock.fencing_token + 1
    row = engine.read_typed_item('handed')
    assert row['record_version_number'] == {'S': handed.record_version_number} and 'expiry_time' not in row
    assert own_part(row) == before


def test_a_plain_lock_is_not_handed_to_a_waiter_for_the_item(engine: Any, local_clients: LockClients) -> None:
    """The two write different rows: the plain release marks its row released (with a TTL) and
    the woken waiter takes that row over, removing the TTL."""
    client = local_clients.make(hand_driven=False)
    lock = client.acquire_lock('mixed')
    waiter = BackgroundCall(client.acquire_lock, 'mixed', retry_period=seconds(hours=1),
                            retry_timeout=seconds(hours=1), lock_existing_item=True)
    step(local_clients.clock, 0, client, threads=[waiter.thread])
    with CallRecorder(engine.resource) as calls:
        lock.release(best_effort=False)
        taken = waiter.result()
    writes = [call.expression() for call in calls.writes()]
    assert 'released_at' in writes[0] and 'fencing_token' not in writes[0]     # a release, no hand-over
    assert any('fencing_token' in names for names in writes[1:]) and taken.lock_existing_item
    row = engine.read_item('mixed')
    assert row['record_version_number'] == taken.record_version_number
    assert 'expiry_time' not in row and 'released_at' not in row


def test_an_item_too_large_for_the_lock_attributes_fails_clearly(engine: Any, local_clients: LockClients) -> None:
    client = local_clients.make()
    before = put_app_item(engine, 'huge', {'payload': 'x' * (400 * 1024 - 100)})
    with pytest.raises(DynamoDBLockError) as raised:
        client.acquire_lock('huge', lock_existing_item=True, retry_timeout=seconds(0))
    assert raised.value.code == DynamoDBLockError.UNKNOWN and '400 KB' in raised.value.message
    assert engine.read_typed_item('huge') == before


@pytest.mark.parametrize('batch_size', [1, 25], ids=['one-by-one', 'batched'])
def test_heartbeats_of_locks_on_items_write_no_ttl(engine: Any, local_clients: LockClients, batch_size: int) -> None:
    client = local_clients.make(heartbeat_batch_size=batch_size)
    befores = {key: put_app_item(engine, key) for key in ('hb-1', 'hb-2')}
    plain = client.acquire_lock('hb-plain')
    locks = [client.acquire_lock(key, lock_existing_item=True) for key in befores]
    plain_ttl = engine.read_item('hb-plain')['expiry_time']
    local_clients.clock.advance(5)
    client.send_heartbeats()
    for lock, (key, before) in zip(locks, befores.items()):
        row = engine.read_typed_item(key)
        assert row['record_version_number'] == {'S': lock.record_version_number}
        assert own_part(row) == before and 'expiry_time' not in row
    assert engine.read_item('hb-plain')['record_version_number'] == plain.record_version_number
    assert engine.read_item('hb-plain')['expiry_time'] >= plain_ttl


def test_acquire_arguments_are_checked_before_anything_is_written(engine: Any, local_clients: LockClients) -> None:
    client = local_clients.make()
    lock = client.acquire_lock('checked')
    with CallRecorder(engine.resource) as calls:
        with pytest.raises(ValueError, match='only_if_exists=True needs lock_existing_item=True'):
            client.acquire_lock('x', only_if_exists=True)
        with pytest.raises(ValueError, match='takes no additional_attributes'):
            client.acquire_lock('x', lock_existing_item=True, additional_attributes={'a': 1})
        with pytest.raises(TypeError, match='lock_existing_item must be a bool'):
            client.try_acquire_lock('x', lock_existing_item='yes')
        with pytest.raises(TypeError, match='keep_row must be a bool'):
            client.acquire_lock('x', keep_row=1)
        with pytest.raises(TypeError, match='keep_row must be a bool'):
            client.release_lock(lock, keep_row='no')
    assert calls.calls == []
    assert lock.status == DynamoDBLock.LOCKED


@pytest.mark.threaded_only     # the asyncio client's reentrancy is per task: tested below
def test_a_reentrant_acquisition_must_ask_for_the_same_kind_of_lock(engine: Any, local_clients: LockClients) -> None:
    client = local_clients.make()
    put_app_item(engine, 'again-item')
    lock = client.acquire_lock('again-item', lock_existing_item=True)
    with CallRecorder(engine.resource) as calls:
        assert client.acquire_lock('again-item', reentrant=True, lock_existing_item=True) is lock
        with pytest.raises(ValueError, match='same kind of lock'):
            client.acquire_lock('again-item', reentrant=True)
    assert calls.calls == [] and lock.holds == 2
    lock.release()
    lock.release()
    assert lock.status == DynamoDBLock.RELEASED


def test_a_reentrant_acquisition_of_the_asyncio_client_must_ask_for_the_same_kind_of_lock(local_engine: Any) -> None:
    put_app_item(local_engine, 'again-task')

    async def scenario() -> None:
        async with local_engine.async_lock_client(background_heartbeats=False, clock=ManualClock()) as client:
            lock = await client.acquire_lock('again-task', lock_existing_item=True, reentrant=True)
            assert await client.try_acquire_lock('again-task', lock_existing_item=True, reentrant=True) is lock
            with pytest.raises(ValueError, match='same kind of lock'):
                await client.try_acquire_lock('again-task', reentrant=True)
            assert lock.holds == 2
            await lock.release()
            await lock.release()
            assert lock.status == AsyncDynamoDBLock.RELEASED

    asyncio.run(scenario())


# -- keep_row per lock and per release (plain locks) ----------------------------------------

@pytest.mark.parametrize('client_keeps, on_acquire, on_release, kept', [
    (True, None, None, True),
    (True, False, None, False),
    (False, True, None, True),
    (False, None, None, False),
    (True, False, True, True),
    (False, True, False, False),
    (True, None, False, False),
])
def test_keep_row_per_lock_and_per_release(engine: Any, local_clients: LockClients, client_keeps: bool,
                                           on_acquire: Optional[bool], on_release: Optional[bool],
                                           kept: bool) -> None:
    client = local_clients.make(keep_released_rows=client_keeps)
    lock = client.acquire_lock('keep', keep_row=on_acquire)
    assert lock.keep_row is (client_keeps if on_acquire is None else on_acquire)
    with CallRecorder(engine.resource) as calls:
        lock.release(best_effort=False, keep_row=on_release)
    assert calls.operations() == (['UpdateItem'] if kept else ['DeleteItem'])
    row = engine.read_item('keep')
    if kept:
        assert row is not None and 'released_at' in row and row['fencing_token'] == lock.fencing_token
    else:
        assert row is None


def test_a_row_deleted_by_keep_row_false_is_acquired_again(engine: Any, local_clients: LockClients) -> None:
    client = local_clients.make()
    client.acquire_lock('again', keep_row=False).release()
    assert engine.read_item('again') is None
    lock = client.acquire_lock('again', retry_timeout=seconds(0))
    assert lock.keep_row is True
