"""close(): prompt, idempotent, safe from any thread and from a callback, releases only when asked,
and shuts down only the executor it created (correction 3)."""
from __future__ import annotations

import concurrent.futures
import datetime
import logging
import threading
import uuid
from typing import Any, Dict

import pytest

from helpers import (
    attribute_names_in,
    BackgroundCall,
    CallbackRecorder,
    CallRecorder,
    FaultInjector,
    LockClients,
    ManualClock,
    background_threads,
    step,
)
from python_dynamodb_lock.python_dynamodb_lock import DynamoDBLock, DynamoDBLockError
from python_dynamodb_lock.testing import is_acquire

MODULE = 'python_dynamodb_lock.python_dynamodb_lock'
seconds = datetime.timedelta


def is_release(params: Dict[str, Any]) -> bool:
    """A release: the UpdateItem that marks the row released (and takes no token)."""
    return 'released_at' in attribute_names_in(params) and not is_acquire(params)


def assert_released(engine: Any, lock: Any, key: str) -> None:
    """The row no longer records a held lock; it is kept, marked released, with the lock's token."""
    assert engine.read_held_row(key) is None
    row = engine.read_item(key)
    assert row is not None and 'released_at' in row and row['fencing_token'] == lock.fencing_token


def test_close_returns_without_waiting_out_a_long_heartbeat_period(engine: Any, clients: LockClients) -> None:
    """The clock never moves: a close that waited for the next round would never return."""
    client = clients.make(hand_driven=False, heartbeat_period=seconds(hours=1), safe_period=seconds(hours=2),
                          lease_duration=seconds(hours=4), expiry_period=seconds(hours=8))
    client.acquire_lock('long-period')
    closing = BackgroundCall(client.close, name='closer')
    closing.result(timeout=30)
    assert not any(thread.is_alive() for thread in background_threads(client))


def test_close_with_the_real_clock_does_not_wait_for_the_next_round(engine: Any, clients: LockClients) -> None:
    from python_dynamodb_lock.testing import SystemClock
    client = clients.make(hand_driven=False, clock=SystemClock(), heartbeat_period=seconds(hours=1),
                          safe_period=seconds(hours=2), lease_duration=seconds(hours=4),
                          expiry_period=seconds(hours=8))
    client.acquire_lock('real-clock')
    BackgroundCall(client.close, name='closer').result(timeout=30)
    assert not any(thread.is_alive() for thread in background_threads(client))


def test_close_from_another_thread_interrupts_a_waiting_acquire(engine: Any, clients: LockClients) -> None:
    clock = clients.clock
    client = clients.make(hand_driven=False)
    holder = clients.make(engine.resource)
    holder.acquire_lock('blocked')
    waiter = BackgroundCall(client.acquire_lock, 'blocked', retry_timeout=seconds(hours=1), name='waiter')
    clock.wait_until_idle([waiter.thread])
    BackgroundCall(client.close, name='closer').result()
    error = waiter.error()
    assert isinstance(error, DynamoDBLockError) and error.code == DynamoDBLockError.CLIENT_SHUTDOWN


def test_close_while_the_acquiring_write_is_in_flight_reports_shutdown_and_leaves_no_held_row(
        engine: Any, clients: LockClients) -> None:
    client = clients.make(hand_driven=False)
    with FaultInjector(engine.resource) as faults:
        closing = faults.before_call('UpdateItem', lambda params: client.close(), when=is_acquire)
        with pytest.raises(DynamoDBLockError) as raised:
            client.acquire_lock('closing-race')
    assert closing.hits == 1
    assert raised.value.code == DynamoDBLockError.CLIENT_SHUTDOWN
    assert engine.read_held_row('closing-race') is None
    assert client.held_locks() == []


def test_close_twice_is_a_no_op(engine: Any, clients: LockClients, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=MODULE)
    client = clients.make(hand_driven=False)
    client.close()
    records = len(caplog.records)
    client.close()
    client.close(release_locks=True)
    assert len(caplog.records) == records


def test_concurrent_closes_all_return(engine: Any, clients: LockClients) -> None:
    client = clients.make(hand_driven=False)
    lock = client.acquire_lock('concurrent-close')
    closers = [BackgroundCall(client.close, True, name=f'closer-{index}') for index in range(4)]
    for closer in closers:
        closer.result()
    assert lock.status == DynamoDBLock.RELEASED
    assert_released(engine, lock, 'concurrent-close')


def test_close_does_not_release_by_default(engine: Any, clients: LockClients) -> None:
    client = clients.make(hand_driven=False)
    lock = client.acquire_lock('kept')
    with CallRecorder(engine.resource) as calls:
        client.close()
    assert calls.calls == []
    assert engine.read_item('kept')['record_version_number'] == lock.record_version_number
    step(clients.clock, 20)                       # and it is no longer renewed
    assert engine.read_item('kept')['record_version_number'] == lock.record_version_number


def test_close_with_release_locks_releases_every_row(engine: Any, clients: LockClients) -> None:
    client = clients.make(hand_driven=False)
    locks = [client.acquire_lock(f'release-all-{index}') for index in range(3)]
    with CallRecorder(engine.resource) as calls:
        client.close(release_locks=True)
    assert calls.operations() == ['UpdateItem'] * 3
    assert all(is_release(call.params) for call in calls.calls)
    released_versions = {value for call in calls.calls for value in call.expression_values().values()}
    assert {lock.record_version_number for lock in locks} <= released_versions
    assert all(lock.status == DynamoDBLock.RELEASED for lock in locks)
    for index, lock in enumerate(locks):
        assert_released(engine, lock, f'release-all-{index}')


def test_close_with_release_locks_deletes_every_row_when_told_to_keep_none(engine: Any,
                                                                          clients: LockClients) -> None:
    client = clients.make(hand_driven=False, keep_released_rows=False)
    locks = [client.acquire_lock(f'delete-all-{index}') for index in range(3)]
    with CallRecorder(engine.resource) as calls:
        client.close(release_locks=True)
    assert calls.operations() == ['DeleteItem'] * 3
    assert all(lock.status == DynamoDBLock.RELEASED for lock in locks)
    assert all(engine.read_item(f'delete-all-{index}') is None for index in range(3))


def test_close_with_release_locks_leaves_a_stolen_row_alone(engine: Any, clients: LockClients) -> None:
    client = clients.make(hand_driven=False)
    mine = client.acquire_lock('mine-at-close')
    lost = client.acquire_lock('lost-at-close')
    engine.client.update_item(
        TableName=engine.table_name, Key={'lock_key': {'S': 'lost-at-close'}, 'sort_key': {'S': '-'}},
        UpdateExpression='SET record_version_number = :v', ExpressionAttributeValues={':v': {'S': 'thief'}})
    client.close(release_locks=True)
    assert mine.status == DynamoDBLock.RELEASED and lost.status == DynamoDBLock.INVALID
    assert engine.read_item('lost-at-close')['record_version_number'] == 'thief'


def test_close_shuts_down_the_executor_it_created(engine: Any, clients: LockClients) -> None:
    client = clients.make(hand_driven=False, app_callback_executor=None)
    executor = client._app_callback_executor  # private: published 0.9.1 attribute
    assert isinstance(executor, concurrent.futures.ThreadPoolExecutor)
    client.close()
    with pytest.raises(RuntimeError):
        executor.submit(lambda: None)


def test_close_never_shuts_down_a_callers_executor(engine: Any, clients: LockClients) -> None:
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as executor:
        client = clients.make(hand_driven=False, app_callback_executor=executor)
        client.close(release_locks=True)
        assert executor.submit(lambda: 'still open').result(timeout=10) == 'still open'


def test_client_context_manager_closes(engine: Any, clients: LockClients) -> None:
    with clients.make(hand_driven=False, clock=ManualClock()) as client:
        client.acquire_lock('client-context')
        threads = background_threads(client)
    assert not any(thread.is_alive() for thread in threads)
    with pytest.raises(DynamoDBLockError) as raised:
        client.acquire_lock('client-context-2')
    assert raised.value.code == DynamoDBLockError.CLIENT_SHUTDOWN


@pytest.mark.parametrize('release_locks', [False, True])
def test_close_from_inside_a_stolen_callback(engine: Any, clients: LockClients, release_locks: bool) -> None:
    """The callback runs on a heartbeat worker (inline executor) and closes the client there."""
    clock = clients.clock
    client = clients.make(hand_driven=False)
    closed = threading.Event()

    def close_on_theft(code: str, lock: Any) -> None:
        client.close(release_locks=release_locks)
        closed.set()

    client.acquire_lock('closes-on-theft', app_callback=CallbackRecorder(action=close_on_theft))
    other = client.acquire_lock('other-lock')
    engine.client.update_item(
        TableName=engine.table_name, Key={'lock_key': {'S': 'closes-on-theft'}, 'sort_key': {'S': '-'}},
        UpdateExpression='SET record_version_number = :v', ExpressionAttributeValues={':v': {'S': str(uuid.uuid4())}})
    step(clock, 5, client)
    assert closed.wait(30)
    for thread in background_threads(client):
        thread.join(30)
        assert not thread.is_alive()
    assert (engine.read_held_row('other-lock') is None) == release_locks
    if release_locks:
        assert_released(engine, other, 'other-lock')
    assert other.status == (DynamoDBLock.RELEASED if release_locks else DynamoDBLock.LOCKED)


def test_close_from_inside_a_danger_callback_on_the_checker_thread(engine: Any, clients: LockClients) -> None:
    clock = clients.clock
    client = clients.make(hand_driven=False)
    closed = threading.Event()

    def close_on_danger(code: str, lock: Any) -> None:
        client.close()
        closed.set()

    client.acquire_lock('closes-on-danger', app_callback=CallbackRecorder(action=close_on_danger))
    faults = FaultInjector(engine.resource)
    faults.fail_calls('UpdateItem', times=None)   # heartbeats fail, so the checker flags the lock
    clock.advance(25)
    assert closed.wait(30)
    faults.clear()
    for thread in background_threads(client):
        thread.join(30)
        assert not thread.is_alive()
