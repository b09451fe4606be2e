"""get_lock, list_locks and force_release_lock: the basics (the CLI's tests go further)."""
from __future__ import annotations

import datetime
from decimal import Decimal
from typing import Any

import pytest

from helpers import (
    BackgroundCall,
    CallRecorder,
    CallbackRecorder,
    FaultInjector,
    LockClients,
)
from python_dynamodb_lock.python_dynamodb_lock import BaseDynamoDBLock, DynamoDBLock, DynamoDBLockError

seconds = datetime.timedelta


def test_get_lock_is_one_consistent_read(engine: Any, clients: LockClients) -> None:
    client = clients.make()
    held = client.acquire_lock('inspected', 'part', additional_attributes={'job': 'x'})
    with CallRecorder(engine.resource) as calls:
        seen = client.get_lock('inspected', 'part')
    assert calls.operations() == ['GetItem']
    assert calls.calls[0].params['ConsistentRead'] is True
    assert type(seen) is BaseDynamoDBLock
    assert (seen.partition_key, seen.sort_key, seen.owner_name, seen.record_version_number) == \
        ('inspected', 'part', client.owner_name, held.record_version_number)
    assert seen.lease_duration == 30.0 and seen.expiry_time == held.expiry_time
    assert seen.additional_attributes == {'job': 'x'}
    assert seen.fencing_token == held.fencing_token
    assert client.get_lock('nobody-holds-this') is None
    held.release(best_effort=False)
    assert engine.read_item('inspected', 'part') is not None      # kept for its fencing token,
    assert client.get_lock('inspected', 'part') is None           # but no lock


def test_get_lock_checks_its_arguments(clients: LockClients, engine: Any) -> None:
    client = clients.make()
    with pytest.raises(TypeError):
        client.get_lock(None)
    with pytest.raises(ValueError):
        client.get_lock('x', '')


def test_get_lock_error_is_unknown(engine: Any, clients: LockClients) -> None:
    client = clients.make()
    with FaultInjector(engine.resource) as faults:
        faults.fail_calls('GetItem', code='InternalServerError', status=500)
        with pytest.raises(DynamoDBLockError) as raised:
            client.get_lock('x')
    assert raised.value.code == DynamoDBLockError.UNKNOWN


def test_list_locks_returns_every_lock_and_skips_other_rows(engine: Any, clients: LockClients) -> None:
    client = clients.make()
    mine = client.acquire_lock('listed-a')
    theirs = engine.put_lock_row('listed-b', 'x', owner_name='other', lease_duration=Decimal('1.1'))
    engine.client.put_item(TableName=engine.table_name,
                           Item={'lock_key': {'S': 'not-a-lock'}, 'sort_key': {'S': '-'}, 'note': {'S': 'hi'}})
    client.acquire_lock('listed-released').release(best_effort=False)      # a kept released row
    assert engine.read_item('listed-released') is not None
    found = {lock.unique_identifier: lock for lock in client.list_locks()}
    assert set(found) == {'listed-a|-', 'listed-b|x'}
    assert found['listed-a|-'].record_version_number == mine.record_version_number
    assert found['listed-b|x'].owner_name == 'other'
    assert found['listed-b|x'].lease_duration == 1.1
    assert found['listed-b|x'].record_version_number == theirs['record_version_number']
    assert all(type(lock) is BaseDynamoDBLock for lock in found.values())


def test_list_locks_pages_through_a_large_table(engine: Any, clients: LockClients) -> None:
    client = clients.make()
    padding = 'x' * 50_000               # ~50 kB per row: a 1 MB scan page holds about 20
    for index in range(45):
        engine.put_lock_row(f'big-{index:02d}', extra={'padding': padding})
    with CallRecorder(engine.resource) as calls:
        keys = sorted(lock.partition_key for lock in client.list_locks())
    assert keys == [f'big-{index:02d}' for index in range(45)]
    assert calls.count('Scan') >= 2


def test_force_release_frees_the_version_it_was_given(engine: Any, clients: LockClients) -> None:
    """One write, conditioned on the version the operator saw, marks the row released (kept for
    its fencing token, as a release does)."""
    holder = clients.make()
    operator = clients.make()
    callback = CallbackRecorder()
    lock = holder.acquire_lock('forced', app_callback=callback)
    seen = operator.get_lock('forced')
    with CallRecorder(engine.resource) as calls:
        assert operator.force_release_lock(seen) is True
    assert calls.operations() == ['UpdateItem']
    assert seen.record_version_number in calls.calls[0].expression_values().values()
    assert engine.read_held_row('forced') is None
    kept = engine.read_item('forced')
    assert 'released_at' in kept and kept['fencing_token'] == lock.fencing_token
    assert kept['record_version_number'] != seen.record_version_number
    holder.send_heartbeats([lock])                    # the holder learns it lost the lock
    assert lock.status == DynamoDBLock.INVALID
    assert callback.codes == [DynamoDBLockError.LOCK_STOLEN]


def test_force_release_deletes_the_version_it_was_given_when_rows_are_not_kept(engine: Any,
                                                                               clients: LockClients) -> None:
    holder = clients.make()
    operator = clients.make(keep_released_rows=False)
    callback = CallbackRecorder()
    lock = holder.acquire_lock('forced', app_callback=callback)
    seen = operator.get_lock('forced')
    with CallRecorder(engine.resource) as calls:
        assert operator.force_release_lock(seen) is True
    assert calls.operations() == ['DeleteItem']
    assert seen.record_version_number in calls.calls[0].expression_values().values()
    assert engine.read_item('forced') is None
    holder.send_heartbeats([lock])
    assert lock.status == DynamoDBLock.INVALID
    assert callback.codes == [DynamoDBLockError.LOCK_STOLEN]


def test_force_release_of_a_renewed_lock_deletes_nothing(engine: Any, clients: LockClients) -> None:
    holder = clients.make()
    operator = clients.make()
    lock = holder.acquire_lock('renewed-meanwhile')
    seen = operator.get_lock('renewed-meanwhile')
    holder.send_heartbeats([lock])
    assert operator.force_release_lock(seen) is False
    assert engine.read_item('renewed-meanwhile')['record_version_number'] == lock.record_version_number
    lock.release(best_effort=False)
    released = engine.read_item('renewed-meanwhile')
    assert operator.force_release_lock(seen) is False         # released: nothing to free
    assert engine.read_item('renewed-meanwhile') == released


def test_force_release_rejects_other_types(clients: LockClients, engine: Any) -> None:
    with pytest.raises(TypeError):
        clients.make().force_release_lock('forced')


def test_force_release_wakes_a_waiter_of_the_same_client(engine: Any, clients: LockClients) -> None:
    clock = clients.clock
    client = clients.make()
    engine.put_lock_row('stuck', owner_name='gone-for-good', lease_duration=3600)
    waiter = BackgroundCall(client.acquire_lock, 'stuck', retry_timeout=seconds(hours=2), name='stuck-waiter')
    clock.wait_until_idle([waiter.thread])
    assert client.force_release_lock(client.get_lock('stuck')) is True
    lock = waiter.result()                           # fake time never moved
    assert engine.read_item('stuck')['record_version_number'] == lock.record_version_number
    assert lock.fencing_token == 2                   # the force-released row kept the holder's token, 1
