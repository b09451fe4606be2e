"""Client sessions (``session=True``, docs/sessions.rst): one session row renewed every period
keeps all of a client's locks alive; lock rows get a slow refresh; a waiter that knows sessions
takes a lock over once the holder's session went unrenewed for its lease, in one transaction that
ends the session; the holder then loses every lock of the session at once.

Exclusion claims run on DynamoDB Local, with both clients, on the shared ManualClock.
"""
from __future__ import annotations

import collections
import datetime
import signal
import time
from typing import Any, List

import pytest
from helpers import LockClients, is_registered, step

from python_dynamodb_lock import DynamoDBLockError, Reason
from python_dynamodb_lock.python_dynamodb_lock import DynamoDBLock, DynamoDBLockClient
from python_dynamodb_lock.testing import CallRecorder, FaultInjector, SystemClock


PERIOD = 5
LEASE = 30
ROW_LEASE = 60      # expiry_period: the lease stored in lock rows under a session
#: The documented key namespace of session rows (docs/sessions.rst).
SESSION_PREFIX = 'python_dynamodb_lock/session/'


def _seconds(value: float) -> datetime.timedelta:
    return datetime.timedelta(seconds=value)


def _session_client(clients: LockClients, **kwargs: Any) -> Any:
    kwargs.setdefault('heartbeat_period', _seconds(PERIOD))
    kwargs.setdefault('lease_duration', _seconds(LEASE))
    kwargs.setdefault('safe_period', _seconds(15))
    kwargs.setdefault('expiry_period', _seconds(ROW_LEASE))
    return clients.make(hand_driven=False, session=True, **kwargs)


def _key_of(call: Any) -> str:
    key = call.params.get('Key') or call.params.get('Item') or {}
    return str(key.get('lock_key', {}).get('S', ''))


def _session_writes(calls: CallRecorder) -> List[Any]:
    return [call for call in calls.writes() if _key_of(call).startswith(SESSION_PREFIX)]


def _lock_writes(calls: CallRecorder) -> List[Any]:
    return [call for call in calls.writes() if not _key_of(call).startswith(SESSION_PREFIX)]


def test_many_locks_cost_one_session_write_per_period(local_engine: Any, local_clients: LockClients) -> None:
    clock = local_clients.clock
    client = _session_client(local_clients)
    locks = [client.acquire_lock(f'many-{index}') for index in range(20)]
    row = local_engine.read_item('many-0')
    assert row['lock_session'].startswith(SESSION_PREFIX) and float(row['lease_duration']) == ROW_LEASE
    with CallRecorder(local_engine.resource, clock) as calls:
        step(clock, ROW_LEASE, client)
    # 12 periods: one session write each; each lock row gets a slow refresh once ROW_LEASE / 3
    # has passed since its last one (spread over the period like heartbeats): 2 or 3 in a row lease.
    assert len(_session_writes(calls)) == ROW_LEASE // PERIOD
    refreshes = collections.Counter(_key_of(call) for call in _lock_writes(calls))
    assert sorted(refreshes) == sorted(f'many-{index}' for index in range(20))
    assert set(refreshes.values()) <= {2, 3}
    assert all(lock.status == DynamoDBLock.LOCKED and is_registered(client, lock) for lock in locks)
    assert all(lock.lease_remaining() > 0 for lock in locks)
    assert len(list(client.list_locks())) == 20       # the session row is not listed as a lock


def test_without_sessions_every_lock_is_renewed_every_period(local_engine: Any, local_clients: LockClients) -> None:
    """The comparison the setting is for: the same locks, today's heartbeats."""
    clock = local_clients.clock
    client = local_clients.make(hand_driven=False, heartbeat_period=_seconds(PERIOD))
    for index in range(20):
        client.acquire_lock(f'plain-{index}')
    with CallRecorder(local_engine.resource, clock) as calls:
        step(clock, ROW_LEASE, client)
    # every period renews every lock (the last round is still being spread over its period)
    assert len(calls.writes()) > 20 * (ROW_LEASE // PERIOD - 1)


def test_waiter_takes_over_after_the_session_lease_in_one_transaction(
        local_engine: Any, local_clients: LockClients) -> None:
    clock = local_clients.clock
    holder = _session_client(local_clients, owner_name='holder')
    lock = holder.acquire_lock('left')
    session_key = local_engine.read_item('left')['lock_session']
    holder.close()      # leaves its lock: its session is no longer renewed
    waiter = _session_client(local_clients, owner_name='waiter')
    unaware = local_clients.make(owner_name='unaware', heartbeat_period=_seconds(PERIOD),
                                 lease_duration=_seconds(LEASE))
    assert waiter.try_acquire_lock('left') is None          # starts watching the session
    step(clock, LEASE - 1, waiter)
    assert waiter.try_acquire_lock('left') is None
    assert unaware.try_acquire_lock('left') is None
    step(clock, 1, waiter)
    with CallRecorder(local_engine.resource, clock) as calls:
        taken = waiter.try_acquire_lock('left')
    assert taken is not None and taken.owner_name == 'waiter'
    assert calls.count('TransactWriteItems') == 1
    assert taken.fencing_token is not None and lock.fencing_token is not None
    assert taken.fencing_token > lock.fencing_token
    ended = local_engine.read_item(session_key)
    assert 'released_at' in ended                           # the session is marked ended
    row = local_engine.read_item('left')
    assert row['lock_session'] != session_key and row['lock_session'].startswith(SESSION_PREFIX + 'waiter/')
    # The session-unaware client still sees the (long) row lease running: it never took it.
    assert unaware.try_acquire_lock('left') is None


def test_a_paused_holder_loses_all_its_locks_at_its_next_session_renewal(
        local_engine: Any, local_clients: LockClients) -> None:
    clock = local_clients.clock
    callbacks: List[Any] = []
    holder = _session_client(local_clients, owner_name='paused')
    locks = [holder.acquire_lock(f'paused-{index}', app_callback=lambda code, lock: callbacks.append(code))
             for index in range(3)]
    waiter = _session_client(local_clients, owner_name='waiter')
    lost_session = local_engine.read_item('paused-0')['lock_session']
    with FaultInjector(local_engine.resource) as faults:
        # The holder's session renewals stop reaching DynamoDB (a pause, a partition).
        faults.fail_calls('UpdateItem', code='InternalServerError', status=500, times=None,
                          when=lambda params: _key_of_body(params).startswith(SESSION_PREFIX + 'paused/'))
        assert waiter.try_acquire_lock('paused-0') is None
        step(clock, 20, holder, waiter)
        assert all(lock.status == DynamoDBLock.IN_DANGER for lock in locks)
        assert DynamoDBLockError.LOCK_IN_DANGER in callbacks
        step(clock, LEASE - 20, holder, waiter)
        taken = waiter.try_acquire_lock('paused-0')
        assert taken is not None
        # Before it hears of it, the paused holder's guarded write is refused by DynamoDB: the
        # lock row carries the new holder's acquisition id.
        assert locks[0].status == DynamoDBLock.IN_DANGER
        with pytest.raises(DynamoDBLockError) as refused:
            locks[0].put_item(TableName=local_engine.table_name, Item=_data_item('paused'))
        assert refused.value.code == DynamoDBLockError.LOCK_STOLEN
        assert local_engine.read_item('data', 'x') is None
    # The holder's renewals resume: refused (the session was ended), every lock is lost.
    step(clock, PERIOD, holder, waiter)
    assert all(lock.status == DynamoDBLock.INVALID for lock in locks)
    assert {lock.loss_reason for lock in locks[1:]} == {Reason.SESSION_LOST}   # locks[0]: its guarded write
    assert callbacks.count(DynamoDBLockError.LOCK_STOLEN) == 3
    assert holder.held_locks() == []
    with pytest.raises(DynamoDBLockError) as refused:
        locks[1].put_item(TableName=local_engine.table_name, Item=_data_item('later'))
    assert refused.value.code == DynamoDBLockError.LOCK_STOLEN
    assert local_engine.read_item('data', 'x') is None
    # The other locks of the lost session are free to session-aware clients at once.
    assert waiter.try_acquire_lock('paused-1') is not None
    # The holder's next acquisition starts a new session.
    again = holder.acquire_lock('fresh')
    session_key = local_engine.read_item('fresh')['lock_session']
    assert session_key.startswith(SESSION_PREFIX + 'paused/') and session_key != lost_session
    assert local_engine.read_item(session_key) is not None
    step(clock, PERIOD, holder, waiter)
    assert again.status == DynamoDBLock.LOCKED and again.lease_remaining() == LEASE


def test_a_renewed_session_keeps_its_locks_from_waiters(local_engine: Any, local_clients: LockClients) -> None:
    clock = local_clients.clock
    holder = _session_client(local_clients, owner_name='alive')
    holder.acquire_lock('alive')
    waiter = _session_client(local_clients, owner_name='waiter')
    assert waiter.try_acquire_lock('alive') is None
    for _ in range(4):
        step(clock, LEASE / 2, holder, waiter)
        assert waiter.try_acquire_lock('alive') is None
    assert [lock.unique_identifier for lock in holder.held_locks()] == ['alive|-']


def test_close_with_release_ends_the_session(local_engine: Any, local_clients: LockClients) -> None:
    client = _session_client(local_clients, owner_name='closing')
    client.acquire_lock('closing')
    session_key = local_engine.read_item('closing')['lock_session']
    assert local_engine.read_item(session_key) is not None
    client.close(release_locks=True)
    assert local_engine.read_item(session_key) is None
    assert 'lock_session' not in local_engine.read_item('closing')     # the released row names no session


def test_session_renewal_retries_a_transaction_conflict(local_engine: Any, local_clients: LockClients) -> None:
    """DynamoDB Local never reports TransactionConflict: it is injected with a botocore hook."""
    clock = local_clients.clock
    holder = _session_client(local_clients, owner_name='conflict')
    lock = holder.acquire_lock('conflict')
    with FaultInjector(local_engine.resource) as faults:
        fault = faults.fail_calls('UpdateItem', code='TransactionConflictException', times=2,
                                  when=lambda params: _key_of_body(params).startswith(SESSION_PREFIX))
        step(clock, PERIOD + 2, holder)     # the retries wait 50 and 100 ms (one step of the clock each)
    assert fault.hits == 2
    # confirmed from the renewal's first attempt, at PERIOD: not refused, not merely failed
    assert lock.status == DynamoDBLock.LOCKED and lock.lease_remaining() == LEASE - 2


def _data_item(value: str) -> Any:
    return {'lock_key': 'data', 'sort_key': 'x', 'value': value}


def _key_of_body(params: Any) -> str:
    return str((params.get('Key') or {}).get('lock_key', {}).get('S', ''))


@pytest.mark.parametrize('arguments, message', [
    ({'partition_key_type': 'N'}, 'string partition key'),
    ({'background_heartbeats': False}, 'background_heartbeats'),
    ({'owner_name': 'x' * 2040}, 'owner_name short enough'),
])
def test_impossible_session_settings_are_refused(arguments: Any, message: str) -> None:
    import boto3

    resource = boto3.resource('dynamodb', region_name='us-east-1', aws_access_key_id='x', aws_secret_access_key='x')
    with pytest.raises(ValueError, match=message):
        DynamoDBLockClient(resource, session=True, **arguments)


def test_a_session_client_refuses_shared_locks_before_any_write(local_engine: Any,
                                                                 local_clients: LockClients) -> None:
    client = _session_client(local_clients)
    with CallRecorder(local_engine.resource, local_clients.clock) as calls:
        with pytest.raises(ValueError, match='not held under a client session'):
            client.acquire_lock('reader', shared=True)
        with pytest.raises(ValueError, match='not held under a client session'):
            client.try_acquire_lock('reader', shared=True)
    assert calls.writes() == []
    assert local_engine.read_item('reader') is None


# --- a mixed fleet: published 0.9.1 clients in the same table (real clock, short periods) -------

def test_a_published_client_never_takes_a_lock_whose_session_lives(local_engine: Any,
                                                                     local_clients: LockClients) -> None:
    from test_interop import EXPIRY, HEARTBEAT, LEASE as SHORT_LEASE, SAFE, Published

    ours = local_clients.make(hand_driven=False, clock=SystemClock(), owner_name='ours', session=True,
                              heartbeat_period=_seconds(HEARTBEAT), safe_period=_seconds(SAFE),
                              lease_duration=_seconds(SHORT_LEASE), expiry_period=_seconds(EXPIRY))
    published = Published('0.9.1', local_engine.endpoint_url, local_engine.table_name)
    try:
        lock = ours.acquire_lock('mixed')
        # The row's stored lease is EXPIRY; its slow refresh (every EXPIRY / 3) changes its version
        # well within that: the published client, timing that lease, never takes it.
        refused = published.acquire('mixed', timeout=3 * EXPIRY)
        assert refused['event'] == 'acquire_failed' and refused['code'] == 'ACQUIRE_TIMEOUT'
        assert lock.status == DynamoDBLock.LOCKED and is_registered(ours, lock)
        assert local_engine.read_item('mixed')['owner_name'] == 'ours'
        # Once the session's holder stops (closed without release), the row lease runs out and
        # the published client takes the lock, as it would any abandoned lock.
        ours.close()
        taken = published.acquire('mixed', timeout=3 * EXPIRY)
        assert taken['event'] == 'acquired'
        assert local_engine.read_item('mixed')['owner_name'] == 'published-0.9.1'
    finally:
        published.close()
        ours.close()


# --- real processes: a session holder SIGKILLed, and one SIGSTOPped past its session lease -------

KEYS = [f'proc-{index}' for index in range(12)]


def _process_waiter(local_clients: LockClients) -> Any:
    from test_pause import LEASE as SHORT_LEASE

    return local_clients.make(hand_driven=False, clock=SystemClock(), owner_name='successor', session=True,
                              heartbeat_period=_seconds(0.25), safe_period=_seconds(1),
                              lease_duration=_seconds(SHORT_LEASE), expiry_period=_seconds(3600))


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(signal, 'SIGKILL'), reason='needs SIGKILL')
def test_a_killed_session_holders_locks_are_all_taken_over_after_the_session_lease(
        local_engine: Any, local_clients: LockClients) -> None:
    from test_pause import LEASE as SHORT_LEASE, Holder

    holder = Holder({'endpoint': local_engine.endpoint_url, 'table': local_engine.table_name, 'key': KEYS[0],
                     'more_keys': KEYS[1:], 'mode': 'hold', 'session': True, 'expiry': 3600})
    try:
        assert holder.wait_for('acquired')['more'] == len(KEYS) - 1
        waiter = _process_waiter(local_clients)
        assert waiter.try_acquire_lock(KEYS[0]) is None            # the session lives
        holder.process.kill()                                       # SIGKILL: nothing is released
        holder.process.wait(30)
        started = time.monotonic()
        with CallRecorder(local_engine.resource) as calls:
            taken = [waiter.acquire_lock(key, retry_period=_seconds(0.1), retry_timeout=_seconds(4 * SHORT_LEASE))
                     for key in KEYS]
        waited = time.monotonic() - started
    finally:
        holder.stop()
    assert [lock.owner_name for lock in taken] == ['successor'] * len(KEYS)
    # One transaction ended the session; the other locks were taken at once, with plain writes.
    assert calls.count('TransactWriteItems') == 1
    assert SHORT_LEASE <= waited < 3600           # the session lease, not the locks' hour-long row lease


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(signal, 'SIGSTOP'), reason='needs SIGSTOP')
def test_a_stopped_session_holders_guarded_writes_are_refused_and_nothing_overlaps(
        local_engine: Any, local_clients: LockClients) -> None:
    from test_pause import Holder

    table = f'{local_engine.table_name}-data'
    local_engine.client.create_table(TableName=table, KeySchema=[{'AttributeName': 'id', 'KeyType': 'HASH'}],
                                     AttributeDefinitions=[{'AttributeName': 'id', 'AttributeType': 'S'}],
                                     BillingMode='PAY_PER_REQUEST')
    holder = Holder({'endpoint': local_engine.endpoint_url, 'table': local_engine.table_name, 'key': KEYS[0],
                     'more_keys': KEYS[1:4], 'data_table': table, 'mode': 'guarded', 'session': True,
                     'pause_gap': 1.0})
    waiter = _process_waiter(local_clients)
    try:
        first = holder.wait_for('acquired')
        holder.wait_for('committed')
        holder.pause()                                             # SIGSTOP, past the session lease
        lock = waiter.acquire_lock(KEYS[0], retry_period=_seconds(0.1), retry_timeout=_seconds(10))
        assert lock.fencing_token > first['token']
        for _ in range(5):
            lock.update_item(TableName=table, Key={'id': 'counter'},
                             UpdateExpression='SET n = if_not_exists(n, :zero) + :one, '
                                              'writers = list_append(if_not_exists(writers, :empty), :me)',
                             ExpressionAttributeValues={':zero': 0, ':one': 1, ':empty': [],
                                                        ':me': [lock.fencing_token]})
        holder.resume()                                            # SIGCONT
        refused = holder.wait_for('refused')
        holder.wait_for('done')
        item = local_engine.client.get_item(TableName=table, Key={'id': {'S': 'counter'}}, ConsistentRead=True)
    finally:
        holder.stop()
        local_engine.client.delete_table(TableName=table)
    assert refused['paused'] is True and refused['code'] == 'LOCK_STOLEN'
    assert not any(event['event'] == 'committed' and event['paused'] for event in holder.events)
    writers = [int(entry['N']) for entry in item['Item']['writers']['L']]
    holder_commits = sum(1 for event in holder.events if event['event'] == 'committed')
    assert int(item['Item']['n']['N']) == len(writers) == holder_commits + 5      # no lost update
    assert writers == sorted(writers)             # no write of the old holder after the new one's
    # The holder's other locks went with its session: free to a session-aware client at once.
    assert all(waiter.try_acquire_lock(key) is not None for key in KEYS[1:4])


@pytest.mark.threaded_only
def test_acquire_first_lock_holds_its_lock_under_the_session(local_engine: Any, local_clients: LockClients) -> None:
    clock = local_clients.clock
    client = _session_client(local_clients)
    lock = client.acquire_first_lock('first', ['a', 'b'])
    assert local_engine.read_item('first', lock.sort_key)['lock_session'].startswith(SESSION_PREFIX)
    with CallRecorder(local_engine.resource, clock) as calls:
        step(clock, 2 * PERIOD, client)
    assert len(_session_writes(calls)) == 2 and _lock_writes(calls) == []
    assert lock.status == DynamoDBLock.LOCKED


def test_extend_renews_the_session(local_engine: Any, local_clients: LockClients) -> None:
    clock = local_clients.clock
    holder = _session_client(local_clients, owner_name='extending')
    locks = [holder.acquire_lock(f'extend-{index}') for index in range(3)]
    session_key = local_engine.read_item('extend-0')['lock_session']
    step(clock, PERIOD - 1, holder)
    before = local_engine.read_item(session_key)['record_version_number']
    with CallRecorder(local_engine.resource, clock) as calls:
        locks[0].extend()
    assert [_key_of(call) for call in calls.writes()] == [session_key]         # one write, the session's
    assert local_engine.read_item(session_key)['record_version_number'] != before
    assert all(lock.lease_remaining() == LEASE for lock in locks)               # every lock under it
    local_engine.client.delete_item(TableName=local_engine.table_name,
                                    Key={'lock_key': {'S': session_key}, 'sort_key': {'S': '-'}})
    with pytest.raises(DynamoDBLockError) as lost:
        locks[1].extend()
    assert lost.value.code == DynamoDBLockError.LOCK_STOLEN and lost.value.reason == Reason.SESSION_LOST
    assert all(lock.status == DynamoDBLock.INVALID for lock in locks)


@pytest.mark.parametrize('entry', ['acquire_locks', 'try_acquire_locks'])
def test_a_set_acquired_first_under_a_session_writes_its_session_row_and_keeps_waiters_out(
        local_engine: Any, local_clients: LockClients, entry: str) -> None:
    """Issue 27, finding 1: a session client whose first acquisition is a set starts its session
    before writing the set; its live locks are not taken by a session-aware waiter."""
    from test_multi_keys import acquire_locks, try_acquire_locks
    clock = local_clients.clock
    holder = _session_client(local_clients, owner_name='holder')
    multi = (acquire_locks if entry == 'acquire_locks' else try_acquire_locks)(holder, ['set-a', 'set-b'])
    assert multi is not None
    for key in ('set-a', 'set-b'):
        session_key = local_engine.read_item(key)['lock_session']
        assert session_key.startswith(SESSION_PREFIX + 'holder/')
        assert local_engine.read_item(session_key) is not None, f'{key} names a session row that does not exist'
    waiter = _session_client(local_clients, owner_name='waiter')
    for _ in range(4):
        assert waiter.try_acquire_lock('set-a') is None
        assert waiter.try_acquire_lock('set-b') is None
        step(clock, LEASE / 2, holder, waiter)
    assert all(lock.status == DynamoDBLock.LOCKED for lock in multi.locks)
    multi.release()
