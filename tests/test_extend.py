"""``lock.extend()``: an application that keeps its locks alive itself (AWS Lambda, scripts:
``background_heartbeats=False``) renews one lock now and is told whether it worked.

Both clients (the asyncio lock's ``extend`` is a coroutine; here it is run through the blocking
facade's loop), on a ManualClock. The claim that a holder extending in time is never taken
over runs on DynamoDB Local.
"""
from __future__ import annotations

import datetime
from typing import Any

import pytest
from helpers import BackgroundCall, FaultInjector, LockClients, advance_until_done, settle

from python_dynamodb_lock import Reason
from python_dynamodb_lock.python_dynamodb_lock import DynamoDBLock, DynamoDBLockError
from python_dynamodb_lock.testing import LockTable

seconds = datetime.timedelta


def extend(lock: Any) -> None:
    """``lock.extend()`` for either kind of client (the asyncio facade's lock awaits the asyncio
    lock's ``extend()`` on the event loop)."""
    lock.extend()


def test_extend_renews_the_lock_now(engine: LockTable, clients: LockClients) -> None:
    clock = clients.clock
    client = clients.make()                  # hand-driven: no background heartbeats
    lock = client.acquire_lock('serverless')
    first_version = lock.record_version_number
    clock.advance(25)                        # past the safe period (20 s): in danger, as of now
    assert lock.status == DynamoDBLock.IN_DANGER
    assert lock.lease_remaining() == pytest.approx(5)
    extend(lock)
    assert lock.status == DynamoDBLock.LOCKED
    assert lock.lease_remaining() == pytest.approx(30)
    assert lock.record_version_number != first_version
    row = engine.read_item('serverless')
    assert row['record_version_number'] == lock.record_version_number
    assert float(row['lease_expiry']) == pytest.approx(clock.time() + 30, abs=0.002)
    assert row['fencing_token'] == lock.fencing_token      # a renewal keeps the acquisition's token


def test_extend_of_a_stolen_lock_raises_lock_stolen(engine: LockTable, clients: LockClients) -> None:
    client = clients.make()
    lock = client.acquire_lock('stolen')
    engine.steal_row('stolen', owner_name='the-thief')
    with pytest.raises(DynamoDBLockError) as stolen:
        extend(lock)
    assert stolen.value.code == DynamoDBLockError.LOCK_STOLEN
    assert stolen.value.reason == Reason.TAKEN_OVER
    assert stolen.value.holder is not None and stolen.value.holder.owner_name == 'the-thief'
    assert lock.status == DynamoDBLock.INVALID
    assert client.held_locks() == []
    with pytest.raises(DynamoDBLockError) as again:    # and it stays lost
        extend(lock)
    assert again.value.code == DynamoDBLockError.LOCK_STOLEN


def test_a_guarded_write_of_a_lock_known_lost_names_its_holder(engine: LockTable, clients: LockClients) -> None:
    """Refused before anything is sent (the client already knows the lock is lost), the error
    still names the holder as a lock, as a refusal by DynamoDB does."""
    client = clients.make()
    lock = client.acquire_lock('lost-then-written')
    engine.steal_row('lost-then-written', owner_name='the-thief')
    with pytest.raises(DynamoDBLockError):
        extend(lock)                                   # the client learns of the loss
    with pytest.raises(DynamoDBLockError) as refused:
        lock.put_item(TableName=engine.table_name, Item={'lock_key': 'data', 'sort_key': '-'})
    assert refused.value.code == DynamoDBLockError.LOCK_STOLEN
    assert refused.value.holder is not None and refused.value.holder.owner_name == 'the-thief'


def test_extend_of_a_force_released_lock_says_its_row_is_gone(engine: LockTable, clients: LockClients) -> None:
    client = clients.make(owner_name='holder')
    operator = clients.make(owner_name='operator')
    lock = client.acquire_lock('cleared')
    assert operator.force_release_lock(operator.get_lock('cleared'))
    with pytest.raises(DynamoDBLockError) as gone:
        extend(lock)
    assert gone.value.code == DynamoDBLockError.LOCK_STOLEN and gone.value.reason == Reason.ROW_GONE
    assert gone.value.holder is None


def test_extend_of_a_released_lock_raises_lock_not_owned(engine: LockTable, clients: LockClients) -> None:
    client = clients.make()
    lock = client.acquire_lock('done')
    lock.release()
    with pytest.raises(DynamoDBLockError) as not_owned:
        extend(lock)
    assert not_owned.value.code == DynamoDBLockError.LOCK_NOT_OWNED
    assert engine.read_held_row('done') is None


def test_extend_when_dynamodb_fails_keeps_the_lock(engine: LockTable, clients: LockClients) -> None:
    client = clients.make()
    lock = client.acquire_lock('flaky')
    version = lock.record_version_number
    with FaultInjector(engine.resource) as faults:
        faults.fail_calls('UpdateItem', code='InternalServerError', status=500, times=1)
        with pytest.raises(DynamoDBLockError) as failed:
            extend(lock)
    assert failed.value.code == DynamoDBLockError.UNKNOWN
    assert 'may still be held' in failed.value.message
    assert lock.status == DynamoDBLock.LOCKED and lock.record_version_number == version
    extend(lock)                                # try again: it works
    assert lock.record_version_number != version
    assert engine.read_item('flaky')['record_version_number'] == lock.record_version_number


def test_extend_through_another_client_is_refused(engine: LockTable, clients: LockClients) -> None:
    if clients.kind != 'threaded':
        pytest.skip('the asyncio lock knows its own client only')
    client = clients.make()
    other = clients.make()
    lock = client.acquire_lock('mine')
    with pytest.raises(DynamoDBLockError) as refused:
        other._calls.extend(lock)  # private: no public path extends through another client
    assert refused.value.code == DynamoDBLockError.LOCK_NOT_OWNED


def test_extend_works_with_background_heartbeats_too(engine: LockTable, clients: LockClients) -> None:
    client = clients.make(hand_driven=False)
    lock = client.acquire_lock('both')
    version = lock.record_version_number
    extend(lock)
    assert lock.record_version_number != version
    lock.release()


def test_a_holder_that_extends_in_time_is_never_taken_over(local_engine: LockTable, local_clients: LockClients) -> None:
    """The serverless pattern: no background heartbeats, an extend() every 10 s of a 30 s
    lease. A waiter in another thread watches for 100 s and never gets the lock; once the
    holder stops extending, the waiter takes it over after one lease."""
    clock = local_clients.clock
    holder = local_clients.make(owner_name='lambda')
    waiter = local_clients.make(owner_name='waiter')
    lock = holder.acquire_lock('invocation')
    attempt = BackgroundCall(waiter.acquire_lock, 'invocation', retry_period=seconds(seconds=2),
                             retry_timeout=seconds(seconds=100), name='waiter')
    for second in range(100):
        settle(clock, threads=[attempt.thread])
        if second % 10 == 0:
            extend(lock)
        clock.advance(1)
    error = attempt.error()
    assert isinstance(error, DynamoDBLockError) and error.code == DynamoDBLockError.ACQUIRE_TIMEOUT
    assert lock.status == DynamoDBLock.LOCKED

    attempt = BackgroundCall(waiter.acquire_lock, 'invocation', retry_period=seconds(seconds=2),
                             retry_timeout=seconds(seconds=100), name='waiter')
    waited = advance_until_done(clock, attempt, 100)
    taken = attempt.result()
    # A lease after the last extend (at second 90, 10 s before this call began), plus polling:
    # the waiter remembers since when it has seen that version, from its first call.
    assert 30 - 10 <= waited <= 30 - 10 + 2 + 1 + 10
    assert taken.took_over_from is not None and taken.took_over_from.owner_name == 'lambda'
    assert lock.lease_remaining() <= 0           # the holder's own lease had run out too
    with pytest.raises(DynamoDBLockError) as stolen:
        extend(lock)
    assert stolen.value.code == DynamoDBLockError.LOCK_STOLEN
    assert stolen.value.holder.owner_name == 'waiter'
