"""Fencing tokens and guarded writes, through the public API, on moto and DynamoDB Local.

Tokens: one per acquisition, stored in the row by the acquiring write itself, unchanged by
heartbeats, strictly increasing across releases, takeovers, force releases, hand-overs and a
TTL-style deletion of the row. Guarded writes: they commit while the lock is held and write
nothing once it is not; conflicts (which DynamoDB Local never raises: injected with a botocore
hook) are retried, never reported as a lost lock.
"""
from __future__ import annotations

import datetime
import logging
import threading
import uuid
from typing import Any, Dict, Iterator, List, Optional

import pytest
from botocore.exceptions import ClientError

from helpers import (
    BackgroundCall,
    CallbackRecorder,
    CallRecorder,
    FaultInjector,
    LockClients,
    step,
)
from python_dynamodb_lock.python_dynamodb_lock import DynamoDBLock, DynamoDBLockClient, DynamoDBLockError

MODULE = 'python_dynamodb_lock.python_dynamodb_lock'
seconds = datetime.timedelta
STOLEN = DynamoDBLockError.LOCK_STOLEN


@pytest.fixture
def data_table(engine: Any) -> Iterator[str]:
    """A second table, for the data the locks protect."""
    yield from made_data_table(engine)


@pytest.fixture
def local_data_table(local_engine: Any) -> Iterator[str]:
    """The same on DynamoDB Local."""
    yield from made_data_table(local_engine)


def made_data_table(engine: Any) -> Iterator[str]:
    name = f'{engine.table_name}-data-{uuid.uuid4().hex[:6]}'
    engine.client.create_table(TableName=name, KeySchema=[{'AttributeName': 'id', 'KeyType': 'HASH'}],
                               AttributeDefinitions=[{'AttributeName': 'id', 'AttributeType': 'S'}],
                               BillingMode='PAY_PER_REQUEST')
    yield name
    engine.client.delete_table(TableName=name)


def data(engine: Any, table: str, key: str = 'x') -> Optional[Dict[str, Any]]:
    item = engine.client.get_item(TableName=table, Key={'id': {'S': key}}, ConsistentRead=True).get('Item')
    return None if item is None else {name: list(value.values())[0] for name, value in item.items()}


# --------------------------------------------------------------------------------------------
# Tokens
# --------------------------------------------------------------------------------------------

def test_the_token_is_written_by_the_acquiring_write_and_kept_by_heartbeats(engine: Any,
                                                                             clients: LockClients) -> None:
    client = clients.make()
    with CallRecorder(engine.resource) as calls:
        lock = client.acquire_lock('tokened')
    assert calls.operations() == ['UpdateItem']               # no read, no second write
    token = lock.fencing_token
    assert isinstance(token, int) and token > 0
    row = engine.read_item('tokened')
    assert row['fencing_token'] == token and row['acquisition_id'] == lock.record_version_number
    for _ in range(3):
        client.send_heartbeats([lock])
    assert lock.fencing_token == token and engine.read_item('tokened')['fencing_token'] == token
    assert engine.read_item('tokened')['acquisition_id'] != lock.record_version_number   # the version moved on
    seen = client.get_lock('tokened')
    assert seen.fencing_token == token and f'fencing_token={token}' in str(seen)
    assert [listed.fencing_token for listed in client.list_locks()] == [token]


def test_tokens_grow_across_releases_takeovers_force_releases_and_ttl_deletion(engine: Any,
                                                                               clients: LockClients) -> None:
    clock = clients.clock
    first, second = clients.make(owner_name='first'), clients.make(owner_name='second')
    tokens: List[int] = []

    lock = first.acquire_lock('k')
    tokens.append(lock.fencing_token)
    lock.release()                                             # kept, marked released
    lock = second.acquire_lock('k', retry_timeout=seconds(0))
    tokens.append(lock.fencing_token)
    # second dies holding it (it is never renewed): first takes it over after the lease.
    with clock.auto_advance_in_current_thread():
        lock = first.acquire_lock('k', retry_period=seconds(seconds=5), retry_timeout=seconds(seconds=60))
    assert lock.took_over_from is not None and lock.took_over_from.owner_name == 'second'
    assert lock.took_over_from.fencing_token == tokens[-1]
    tokens.append(lock.fencing_token)
    assert second.force_release_lock(second.get_lock('k'))     # an operator frees it
    lock = second.acquire_lock('k', retry_timeout=seconds(0))
    tokens.append(lock.fencing_token)
    # DynamoDB's TTL deletes an abandoned row (simulated: the row is deleted directly).
    engine.client.delete_item(TableName=engine.table_name, Key={'lock_key': {'S': 'k'}, 'sort_key': {'S': '-'}})
    lock = first.acquire_lock('k', retry_timeout=seconds(0))
    tokens.append(lock.fencing_token)
    assert all(later > earlier for earlier, later in zip(tokens, tokens[1:])), tokens
    assert tokens[1:4] == [tokens[0] + 1, tokens[0] + 2, tokens[0] + 3]   # while the row is kept: one more each


def test_a_release_keeps_the_row_free_and_invisible_to_get_and_list(engine: Any, clients: LockClients) -> None:
    client = clients.make()
    lock = client.acquire_lock('kept', additional_attributes={'purpose': 'report'})
    with CallRecorder(engine.resource) as calls:
        lock.release(best_effort=False)
    assert calls.operations() == ['UpdateItem']
    row = engine.read_item('kept')
    assert row['fencing_token'] == lock.fencing_token and 'released_at' in row and row['lease_duration'] == 0
    assert 'purpose' not in row and 'acquisition_id' not in row
    assert client.get_lock('kept') is None and list(client.list_locks()) == []
    other = clients.make()
    with CallRecorder(engine.resource) as calls:
        again = other.acquire_lock('kept', retry_timeout=seconds(0))   # free at once: one write
    assert calls.operations() == ['UpdateItem'] and again.fencing_token == lock.fencing_token + 1


def test_a_client_that_keeps_no_released_rows_deletes_them(engine: Any, clients: LockClients) -> None:
    client = clients.make(keep_released_rows=False)
    lock = client.acquire_lock('deleted')
    with CallRecorder(engine.resource) as calls:
        lock.release(best_effort=False)
    assert calls.operations() == ['DeleteItem'] and engine.read_item('deleted') is None


def test_a_lock_handed_to_a_waiting_thread_gets_the_next_token_in_the_same_write(local_engine: Any,
                                                                                 local_clients: LockClients) -> None:
    client = local_clients.make(hand_driven=False)
    lock = client.acquire_lock('handed', additional_attributes={'mine': 1})
    waiter = BackgroundCall(client.acquire_lock, 'handed', retry_period=seconds(hours=1),
                            retry_timeout=seconds(hours=1), additional_attributes={'theirs': 2})
    step(local_clients.clock, 0, client, threads=[waiter.thread])   # the waiter waits (the fake clock stands)
    with CallRecorder(local_engine.resource) as calls:
        lock.release(best_effort=False)
        handed = waiter.result()
    assert calls.operations() == ['UpdateItem']                    # one write: release and hand-over
    assert handed.fencing_token == lock.fencing_token + 1 and handed.status == DynamoDBLock.LOCKED
    row = local_engine.read_item('handed')
    assert row['record_version_number'] == handed.record_version_number
    assert row['theirs'] == 2 and 'mine' not in row
    assert lock.status == DynamoDBLock.RELEASED


# --------------------------------------------------------------------------------------------
# Guarded writes
# --------------------------------------------------------------------------------------------

def test_a_guarded_write_commits_in_one_call_while_the_lock_is_held(engine: Any, clients: LockClients,
                                                                    data_table: str) -> None:
    client = clients.make()
    lock = client.acquire_lock('guard')
    with CallRecorder(engine.resource) as calls:
        lock.put_item(TableName=data_table, Item={'id': 'x', 'n': 1})
        lock.update_item(TableName=data_table, Key={'id': 'x'}, UpdateExpression='SET n = n + :one',
                         ExpressionAttributeValues={':one': 1})
    assert calls.operations() == ['TransactWriteItems'] * 2
    check = calls.calls[0].params['TransactItems'][-1]['ConditionCheck']
    assert check['ExpressionAttributeValues'] == {':acquisition': {'S': lock.record_version_number}}
    assert data(engine, data_table)['n'] == '2'
    lock.transact_write_items([{'Delete': {'TableName': data_table, 'Key': {'id': {'S': 'x'}}}}], typed=True)
    assert data(engine, data_table) is None


def test_a_guarded_write_of_a_lost_lock_writes_nothing_and_says_who_holds_it(engine: Any, clients: LockClients,
                                                                             data_table: str) -> None:
    mine, thief = clients.make(owner_name='mine'), clients.make(owner_name='thief')
    callback = CallbackRecorder()
    lock = mine.acquire_lock('guard', app_callback=callback)
    assert thief.force_release_lock(thief.get_lock('guard'))
    thief.acquire_lock('guard', retry_timeout=seconds(0))
    with CallRecorder(engine.resource) as calls, pytest.raises(DynamoDBLockError) as raised:
        lock.put_item(TableName=data_table, Item={'id': 'x', 'n': 99})
    assert calls.operations() == ['TransactWriteItems']             # the answer named the holder: no read
    assert raised.value.code == STOLEN and raised.value.reason == 'TAKEN_OVER'
    assert raised.value.holder.owner_name == 'thief' and 'thief' in raised.value.message
    assert data(engine, data_table) is None
    assert lock.status == DynamoDBLock.INVALID and callback.codes == [STOLEN]
    with CallRecorder(engine.resource) as calls, pytest.raises(DynamoDBLockError) as again:
        lock.put_item(TableName=data_table, Item={'id': 'x', 'n': 100})
    assert again.value.code == STOLEN and calls.calls == []          # known lost: nothing sent


def test_the_applications_own_condition_failure_is_boto3s_error_and_the_lock_stays(engine: Any,
                                                                                     clients: LockClients,
                                                                                     data_table: str) -> None:
    client = clients.make()
    lock = client.acquire_lock('guard')
    lock.put_item(TableName=data_table, Item={'id': 'x', 'n': 1})
    with pytest.raises(ClientError) as raised:
        lock.put_item(TableName=data_table, Item={'id': 'x', 'n': 2}, ConditionExpression='attribute_not_exists(id)')
    assert raised.value.response['Error']['Code'] == 'TransactionCanceledException'
    reasons = raised.value.response['CancellationReasons']
    assert reasons[0]['Code'] == 'ConditionalCheckFailed' and reasons[1]['Code'] in ('None', None)
    assert data(engine, data_table)['n'] == '1' and lock.status == DynamoDBLock.LOCKED


def test_a_guarded_write_is_checked_before_anything_is_sent(engine: Any, clients: LockClients,
                                                            data_table: str) -> None:
    client = clients.make()
    lock = client.acquire_lock('guard')
    with CallRecorder(engine.resource) as calls:
        with pytest.raises(ValueError, match='lock row itself'):
            lock.update_item(TableName=engine.table_name, Key={'lock_key': 'guard', 'sort_key': '-'},
                             UpdateExpression='SET x = :x', ExpressionAttributeValues={':x': 1})
        with pytest.raises(ValueError, match='at most 99'):
            lock.transact_write_items([{'Put': {'TableName': data_table, 'Item': {'id': str(i)}}} for i in range(100)])
        with pytest.raises(TypeError, match='ReturnValues'):
            lock.delete_item(TableName=data_table, Key={'id': 'x'}, ReturnValues='ALL_OLD')
    assert calls.calls == []


def _transaction_conflict(request: Dict[str, Any]) -> Dict[str, Any]:
    """The cancellation reasons of a TransactWriteItems cancelled with TransactionConflict on
    the lock check (the last item), as DynamoDB does while a heartbeat writes the lock row
    (DynamoDB Local never raises it, so it is injected: ``FaultInjector.fail_calls`` on the
    table's boto3 resource reaches the asyncio lock client's aiobotocore client too)."""
    count = len(request['TransactItems'])
    return {'CancellationReasons': [{'Code': 'None'}] * (count - 1) + [
        {'Code': 'TransactionConflict', 'Message': 'Transaction is ongoing for the item'}]}


def test_transaction_conflicts_are_retried_and_never_a_lost_lock(engine: Any, clients: LockClients,
                                                                 data_table: str) -> None:
    client = clients.make()
    callback = CallbackRecorder()
    lock = client.acquire_lock('guard', app_callback=callback)
    with FaultInjector(engine.resource) as faults:
        conflicts = faults.fail_calls('TransactWriteItems', 'TransactionCanceledException', message='injected conflict',
                                      times=3, details=_transaction_conflict)
        # The retries back off on the client's (fake) clock: let this thread's sleeps move it.
        with CallRecorder(engine.resource) as calls, clients.clock.auto_advance_in_current_thread():
            lock.put_item(TableName=data_table, Item={'id': 'x', 'n': 1})
    assert conflicts.hits == 3 and calls.operations() == ['TransactWriteItems'] * 4
    tokens = [call.params['ClientRequestToken'] for call in calls.calls]
    assert len(set(tokens)) == 4                         # each a new transaction: nothing was applied
    assert data(engine, data_table)['n'] == '1'
    assert lock.status == DynamoDBLock.LOCKED and callback.codes == []


def test_a_lost_answer_is_resent_with_the_same_token_and_applies_once(local_engine: Any, local_clients: LockClients,
                                                                      local_data_table: str) -> None:
    engine, name = local_engine, local_data_table
    client = local_clients.make()
    lock = client.acquire_lock('guard')
    with FaultInjector(engine.resource) as faults, CallRecorder(engine.resource) as calls, \
            local_clients.clock.auto_advance_in_current_thread():
        faults.lose_answers('TransactWriteItems', retry=False)     # committed, answer lost
        lock.update_item(TableName=name, Key={'id': 'x'}, UpdateExpression='ADD n :one',
                         ExpressionAttributeValues={':one': 1})
    tokens = [call.params['ClientRequestToken'] for call in calls.calls]
    assert len(tokens) == 2 and tokens[0] == tokens[1]
    assert data(engine, name)['n'] == '1'                           # idempotent: applied once


def test_a_heartbeat_refused_by_a_transaction_in_progress_is_retried_quietly(
        engine: Any, clients: LockClients, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger=MODULE)
    client = clients.make()
    lock = client.acquire_lock('busy-row')
    version = lock.record_version_number
    with FaultInjector(engine.resource) as faults, clients.clock.auto_advance_in_current_thread():
        faults.fail_calls('UpdateItem', code='TransactionConflictException', status=400, times=2)
        client.send_heartbeats([lock])
    assert lock.record_version_number != version and lock.status == DynamoDBLock.LOCKED
    assert not [record for record in caplog.records if record.levelno >= logging.WARNING]


def test_many_threads_writing_through_one_lock_lose_no_update(local_engine: Any, local_clients: LockClients,
                                                              local_data_table: str) -> None:
    """Guarded writes of one holder from several threads, with heartbeats running: all commit."""
    engine, name = local_engine, local_data_table
    client = local_clients.make()
    lock = client.acquire_lock('shared-writers')
    errors: List[BaseException] = []

    def write() -> None:
        try:
            for _ in range(10):
                lock.update_item(TableName=name, Key={'id': 'x'}, UpdateExpression='ADD n :one',
                                 ExpressionAttributeValues={':one': 1})
                client.send_heartbeats([lock])
        except BaseException as error:  # reported below
            errors.append(error)

    threads = [threading.Thread(target=write) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == [] and data(engine, name)['n'] == '40'


# --------------------------------------------------------------------------------------------
# Renewing by hand: lock.extend() and lock.lease_remaining()
# --------------------------------------------------------------------------------------------

def test_extend_renews_now_keeps_the_token_and_says_when_it_cannot(engine: Any, clients: LockClients) -> None:
    client = clients.make()
    lease = DynamoDBLockClient._DEFAULT_LEASE_DURATION.total_seconds()  # private: published 0.9.1 attribute
    lock = client.acquire_lock('extended')
    token, version = lock.fencing_token, lock.record_version_number
    assert lock.lease_remaining() == pytest.approx(lease)
    clients.clock.advance(10)
    assert lock.lease_remaining() == pytest.approx(lease - 10)
    with CallRecorder(engine.resource) as calls:
        lock.extend()
    assert [call.action for call in calls.calls] == ['heartbeat']
    assert lock.record_version_number != version and lock.fencing_token == token
    assert engine.read_item('extended')['record_version_number'] == lock.record_version_number
    assert lock.lease_remaining() == pytest.approx(lease) and lock.status == DynamoDBLock.LOCKED

    engine.steal_row('extended', owner_name='thief')
    with pytest.raises(DynamoDBLockError) as stolen:
        lock.extend()
    assert stolen.value.code == STOLEN and stolen.value.holder.owner_name == 'thief'
    assert lock.status == DynamoDBLock.INVALID and lock.lease_remaining() == 0.0

    released = client.acquire_lock('released-then-extended')
    released.release(best_effort=False)
    with CallRecorder(engine.resource) as calls, pytest.raises(DynamoDBLockError) as not_owned:
        released.extend()
    assert not_owned.value.code == DynamoDBLockError.LOCK_NOT_OWNED and calls.calls == []
