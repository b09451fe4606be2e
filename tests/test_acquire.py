"""acquire_lock and try_acquire_lock: success, waiting, takeover, timeouts, races, errors.

Time is a ManualClock: a waiting acquire runs in the test thread with the clock auto-advancing,
so "wait 35 seconds" takes milliseconds and is asserted on fake time. Calls to DynamoDB are
counted with a botocore hook on the lock client's resource.
"""
from __future__ import annotations

import datetime
import uuid
from typing import Any, Dict, Iterator, Tuple

import pytest
from botocore.exceptions import ClientError

from python_dynamodb_lock.testing import readable_expression
from helpers import (
    ASYNCIO,
    THREADED,
    BackgroundCall,
    CallRecorder,
    FaultInjector,
    LockClients,
    ManualClock,
    is_registered,
    offline_resource,
    wait_until,
)
from python_dynamodb_lock.python_dynamodb_lock import DynamoDBLock, DynamoDBLockClient, DynamoDBLockError

seconds = datetime.timedelta


def acquire_fast(client: DynamoDBLockClient, clock: ManualClock, *args: Any, **kwargs: Any) -> DynamoDBLock:
    """acquire_lock in the test thread, its waits moving the fake clock instead of blocking."""
    with clock.auto_advance_in_current_thread():
        return client.acquire_lock(*args, **kwargs)


def bump_version(engine: Any, key: str, sort_key: str = '-') -> None:
    """What a live holder's heartbeat does to the row: a new record_version_number."""
    engine.client.update_item(
        TableName=engine.table_name, Key={'lock_key': {'S': key}, 'sort_key': {'S': sort_key}},
        UpdateExpression='SET record_version_number = :v', ExpressionAttributeValues={':v': {'S': str(uuid.uuid4())}})


def is_acquire(params: Dict[str, Any]) -> bool:
    """An acquiring write: the UpdateItem that takes the lock and its next fencing token
    (heartbeats and releases never touch the token)."""
    return 'fencing_token' in readable_expression(params)


def is_takeover(params: Dict[str, Any]) -> bool:
    """An acquiring UpdateItem conditioned on a version (a takeover), not on the key being free."""
    return is_acquire(params) and 'attribute_not_exists' not in params.get('ConditionExpression', '')


def is_acquire_free(params: Dict[str, Any]) -> bool:
    """An acquiring UpdateItem conditioned on the key being free (no row, or a released one)."""
    return is_acquire(params) and 'attribute_not_exists' in params.get('ConditionExpression', '')


# --- success --------------------------------------------------------------------------------

def test_uncontended_acquire_is_exactly_one_conditional_update(engine: Any, clients: LockClients) -> None:
    client = clients.make(owner_name='me')
    with CallRecorder(engine.resource) as calls:
        lock = client.acquire_lock('free', additional_attributes={'purpose': 'test'})
    assert calls.operations() == ['UpdateItem']
    assert is_acquire_free(calls.calls[0].params)
    assert lock.status == DynamoDBLock.LOCKED
    assert is_registered(client, lock)
    assert (lock.partition_key, lock.sort_key, lock.owner_name) == ('free', '-', 'me')
    assert lock.additional_attributes == {'purpose': 'test'}
    assert lock.lock_client is client
    row = engine.read_item('free')
    assert row['owner_name'] == 'me'
    assert row['record_version_number'] == lock.record_version_number
    assert row['purpose'] == 'test'
    assert row['fencing_token'] == lock.fencing_token
    assert row['acquisition_id'] == lock.record_version_number


def test_locks_with_different_sort_keys_are_independent(engine: Any, clients: LockClients) -> None:
    client = clients.make()
    first = client.acquire_lock('resource', 'a')
    second = client.acquire_lock('resource', 'b')
    assert first.unique_identifier != second.unique_identifier
    assert engine.read_item('resource', 'a')['record_version_number'] == first.record_version_number
    assert engine.read_item('resource', 'b')['record_version_number'] == second.record_version_number


def test_acquire_after_release_by_the_same_and_by_another_client(engine: Any, clients: LockClients) -> None:
    client = clients.make()
    other_resource = engine.new_resource()
    other = clients.make(other_resource)
    client.acquire_lock('reuse').release()
    again = client.acquire_lock('reuse')
    again.release()
    with CallRecorder(other_resource) as calls:
        theirs = other.acquire_lock('reuse')
    assert calls.operations() == ['UpdateItem']
    assert engine.read_item('reuse')['owner_name'] == other.owner_name
    assert theirs.status == DynamoDBLock.LOCKED
    assert theirs.fencing_token == again.fencing_token + 1     # the released row kept the count


def test_acquire_after_close_raises_client_shutdown_without_calls(engine: Any, clients: LockClients) -> None:
    client = clients.make()
    client.close()
    with CallRecorder(engine.resource) as calls:
        with pytest.raises(DynamoDBLockError) as raised:
            client.acquire_lock('closed')
        with pytest.raises(DynamoDBLockError) as raised_try:
            client.try_acquire_lock('closed')
    assert raised.value.code == DynamoDBLockError.CLIENT_SHUTDOWN
    assert raised_try.value.code == DynamoDBLockError.CLIENT_SHUTDOWN
    assert calls.calls == []
    assert engine.read_item('closed') is None


# --- takeover (correction 1) ----------------------------------------------------------------

@pytest.mark.parametrize('lease, retry_period', [(30, 5), (30, 7), (1.1, 0.5), (0.1, 0.03)])
def test_abandoned_lock_is_taken_over_after_its_lease_within_one_retry_period(
        engine: Any, clients: LockClients, lease: float, retry_period: float) -> None:
    """The monotonic rule: the version must stay unchanged for the stored lease, timed here."""
    clock = clients.clock
    client = clients.make()
    dead = engine.put_lock_row('abandoned', lease_duration=lease, owner_name='dead-process')
    first_seen = clock.monotonic()
    with CallRecorder(engine.resource, clock) as calls:
        lock = acquire_fast(client, clock, 'abandoned', retry_period=seconds(seconds=retry_period),
                            retry_timeout=seconds(seconds=10 * lease))
    takeover = calls.writes()[-1]
    waited = takeover.clock_time - first_seen
    assert lease - 1e-6 <= waited <= lease + retry_period + 1e-6, f'took over after {waited}s'
    assert [call.operation for call in calls.writes()] == ['UpdateItem', 'UpdateItem']
    assert is_acquire_free(calls.writes()[0].params) and is_takeover(takeover.params)
    assert dead['record_version_number'] in takeover.expression_values().values()
    assert all(call.operation == 'GetItem' for call in calls.calls[1:-1])
    row = engine.read_item('abandoned')
    assert row['owner_name'] == client.owner_name
    assert row['record_version_number'] == lock.record_version_number
    assert row['fencing_token'] == lock.fencing_token == dead['fencing_token'] + 1
    assert lock.status == DynamoDBLock.LOCKED


def test_lock_of_a_client_that_died_is_taken_over(engine: Any, clients: LockClients) -> None:
    clock = clients.clock
    dead_client = clients.make(engine.new_resource(), owner_name='crashes')
    dead_client.acquire_lock('crash')
    dead_client.close()           # does not release: the row stays, nobody renews it
    waiter = clients.make(owner_name='survivor')
    start = clock.monotonic()
    lock = acquire_fast(waiter, clock, 'crash', retry_timeout=seconds(minutes=2))
    assert lock.owner_name == 'survivor'
    assert 30 <= clock.monotonic() - start <= 35
    assert engine.read_item('crash')['owner_name'] == 'survivor'


def test_takeover_uses_the_lease_stored_in_the_row_not_the_waiters(engine: Any, clients: LockClients) -> None:
    clock = clients.clock
    client = clients.make(lease_duration=seconds(seconds=300), heartbeat_period=seconds(seconds=5),
                          safe_period=seconds(seconds=20))
    engine.put_lock_row('short-lease', lease_duration=2)
    start = clock.monotonic()
    acquire_fast(client, clock, 'short-lease', retry_period=seconds(seconds=1), retry_timeout=seconds(seconds=60))
    assert 2 <= clock.monotonic() - start <= 3


@pytest.mark.parametrize('skew', [-600, 600])
def test_takeover_ignores_wall_clock_skew(engine: Any, clients: LockClients, skew: float) -> None:
    """Only the waiter's monotonic clock decides; its wall clock may be off by minutes."""
    clock = clients.clock
    client = clients.make()
    engine.put_lock_row('skewed', lease_duration=30)
    clock.shift_wall_clock(skew)
    start = clock.monotonic()
    acquire_fast(client, clock, 'skewed', retry_period=seconds(seconds=5), retry_timeout=seconds(seconds=120))
    assert 30 <= clock.monotonic() - start <= 35


def test_lock_whose_ttl_has_passed_is_taken_at_once(engine: Any, clients: LockClients) -> None:
    clock = clients.clock
    client = clients.make()
    engine.put_lock_row('expired', lease_duration=30, expiry_time=int(clock.time()) - 60)
    start = clock.monotonic()
    lock = acquire_fast(client, clock, 'expired', retry_period=seconds(seconds=5), retry_timeout=seconds(seconds=60))
    assert clock.monotonic() == start, 'waited before taking over a lock whose TTL had passed'
    assert engine.read_item('expired')['record_version_number'] == lock.record_version_number


def test_live_lock_is_never_taken_over(engine: Any, clients: LockClients) -> None:
    """A holder whose heartbeats keep changing the version keeps its lock, however long we wait."""
    clock = clients.clock
    client = clients.make()
    engine.put_lock_row('live', lease_duration=30, owner_name='alive')
    with FaultInjector(engine.resource) as faults, CallRecorder(engine.resource) as calls:
        faults.before_call('GetItem', lambda params: bump_version(engine, 'live'), times=None)
        with pytest.raises(DynamoDBLockError) as raised:
            acquire_fast(client, clock, 'live', retry_period=seconds(seconds=5), retry_timeout=seconds(seconds=120))
    assert raised.value.code == DynamoDBLockError.ACQUIRE_TIMEOUT
    assert [call.operation for call in calls.writes()] == ['UpdateItem']
    assert is_acquire_free(calls.writes()[0].params)
    assert engine.read_item('live')['owner_name'] == 'alive'


# --- waiting, timeouts, retry parameters (corrections 2 and 8) -------------------------------

def test_waiting_polls_with_consistent_reads_and_never_writes(engine: Any, clients: LockClients) -> None:
    clock = clients.clock
    client = clients.make()
    engine.put_lock_row('held', lease_duration=30)
    start = clock.monotonic()
    with CallRecorder(engine.resource) as calls:
        with pytest.raises(DynamoDBLockError) as raised:
            acquire_fast(client, clock, 'held', retry_period=seconds(seconds=5), retry_timeout=seconds(seconds=20))
    assert raised.value.code == DynamoDBLockError.ACQUIRE_TIMEOUT
    assert clock.monotonic() - start == pytest.approx(20)
    assert calls.operations()[0] == 'UpdateItem' and is_acquire_free(calls.calls[0].params)
    polls = calls.calls[1:]
    assert len(polls) >= 4
    assert all(call.operation == 'GetItem' and call.params.get('ConsistentRead') is True for call in polls)


def test_timeout_error_names_the_lock_and_its_holder(engine: Any, clients: LockClients) -> None:
    clock = clients.clock
    client = clients.make()
    engine.put_lock_row('named', owner_name='the-holder')
    with pytest.raises(DynamoDBLockError) as raised:
        acquire_fast(client, clock, 'named', retry_timeout=seconds(seconds=10))
    assert raised.value.code == DynamoDBLockError.ACQUIRE_TIMEOUT
    assert 'named' in raised.value.message and 'the-holder' in raised.value.message


def test_zero_retry_timeout_makes_exactly_one_call_when_the_lock_is_held(engine: Any, clients: LockClients) -> None:
    client = clients.make()
    engine.put_lock_row('once')
    with CallRecorder(engine.resource) as calls:
        with pytest.raises(DynamoDBLockError) as raised:
            client.acquire_lock('once', retry_timeout=seconds(0))
    assert raised.value.code == DynamoDBLockError.ACQUIRE_TIMEOUT
    assert calls.operations() == ['UpdateItem']
    assert is_acquire_free(calls.calls[0].params)


def test_try_acquire_lock_makes_one_call_and_returns_none_when_held(engine: Any, clients: LockClients) -> None:
    client = clients.make()
    engine.put_lock_row('try-held')
    with CallRecorder(engine.resource) as calls:
        assert client.try_acquire_lock('try-held') is None
    assert calls.operations() == ['UpdateItem']
    assert is_acquire_free(calls.calls[0].params)
    lock = client.try_acquire_lock('try-free', 'x', additional_attributes={'a': 'b'})
    assert lock is not None and lock.status == DynamoDBLock.LOCKED and is_registered(client, lock)
    assert engine.read_item('try-free', 'x')['a'] == 'b'


def test_default_retry_timeout_is_lease_plus_heartbeat_period(engine: Any, clients: LockClients) -> None:
    clock = clients.clock
    client = clients.make(heartbeat_period=seconds(seconds=4), lease_duration=seconds(seconds=30),
                          safe_period=seconds(seconds=20))
    engine.put_lock_row('default-timeout')
    start = clock.monotonic()
    with FaultInjector(engine.resource) as faults:
        faults.before_call('GetItem', lambda params: bump_version(engine, 'default-timeout'), times=None)
        with pytest.raises(DynamoDBLockError) as raised:
            acquire_fast(client, clock, 'default-timeout', retry_timeout=None)
    assert raised.value.code == DynamoDBLockError.ACQUIRE_TIMEOUT
    assert clock.monotonic() - start == pytest.approx(34)


def test_default_retry_period_is_the_heartbeat_period(engine: Any, clients: LockClients) -> None:
    import threading
    clock = clients.clock
    client = clients.make(heartbeat_period=seconds(seconds=3), lease_duration=seconds(seconds=30),
                          safe_period=seconds(seconds=20))
    engine.put_lock_row('default-period')
    with pytest.raises(DynamoDBLockError):
        acquire_fast(client, clock, 'default-period', retry_period=None, retry_timeout=seconds(seconds=10))
    sleeps = clock.sleeps_of(threading.current_thread().name)
    assert sleeps[:3] == [3, 3, 3]
    assert sleeps[3] == pytest.approx(1)


def test_zero_retry_period_polls_without_sleeping(engine: Any, clients: LockClients) -> None:
    import threading
    clock = clients.clock
    client = clients.make()
    engine.put_lock_row('no-pause')

    def poll_takes_a_second(params: Dict[str, Any]) -> None:
        bump_version(engine, 'no-pause')
        clock.advance(1)

    with FaultInjector(engine.resource) as faults, CallRecorder(engine.resource) as calls:
        faults.before_call('GetItem', poll_takes_a_second, times=None)
        with pytest.raises(DynamoDBLockError) as raised:
            acquire_fast(client, clock, 'no-pause', retry_period=seconds(0), retry_timeout=seconds(seconds=5))
    assert raised.value.code == DynamoDBLockError.ACQUIRE_TIMEOUT
    assert all(length <= 0 for length in clock.sleeps_of(threading.current_thread().name))
    assert calls.count('GetItem') >= 5


# --- races -----------------------------------------------------------------------------------

@pytest.mark.parametrize('rival_frees', ['released', 'deleted'])
def test_losing_the_race_for_a_free_lock_is_a_retry_not_an_error(engine: Any, clients: LockClients,
                                                                 rival_frees: str) -> None:
    """A rival takes the free lock just before our acquiring write, and frees it before our
    poll: by a release of this package (the row is kept, marked released) or by deleting it
    (a published client, or DynamoDB's TTL)."""
    clock = clients.clock
    client = clients.make()
    rival = clients.make(engine.new_resource(), owner_name='rival')
    rival_locks: list = []

    def rival_wins(params: Dict[str, Any]) -> None:
        rival_locks.append(rival.acquire_lock('race', retry_timeout=seconds(0)))

    def rival_releases(params: Dict[str, Any]) -> None:
        if rival_frees == 'released':
            rival_locks[0].release(best_effort=False)
        else:
            engine.client.delete_item(TableName=engine.table_name,
                                      Key={'lock_key': {'S': 'race'}, 'sort_key': {'S': '-'}})

    with FaultInjector(engine.resource) as faults:
        won = faults.before_call('UpdateItem', rival_wins, times=1, when=is_acquire)
        released = faults.before_call('GetItem', rival_releases, times=1)
        lock = acquire_fast(client, clock, 'race', retry_period=seconds(seconds=1), retry_timeout=seconds(seconds=10))
    assert (won.hits, released.hits) == (1, 1)
    assert lock.status == DynamoDBLock.LOCKED
    assert engine.read_item('race')['owner_name'] == client.owner_name
    if rival_frees == 'released':              # the kept row kept the count
        assert lock.fencing_token == rival_locks[0].fencing_token + 1


def test_losing_the_race_with_zero_timeout_is_a_timeout_not_an_error(engine: Any, clients: LockClients) -> None:
    client = clients.make()
    with FaultInjector(engine.resource) as faults:
        rival = faults.before_call('UpdateItem', lambda params: engine.put_lock_row('race-once', owner_name='rival'),
                                   when=is_acquire)
        assert client.try_acquire_lock('race-once') is None
        with pytest.raises(DynamoDBLockError) as raised:
            client.acquire_lock('race-once', retry_timeout=seconds(0))
    assert rival.hits == 1
    assert raised.value.code == DynamoDBLockError.ACQUIRE_TIMEOUT
    assert engine.read_item('race-once')['owner_name'] == 'rival'


def test_losing_a_takeover_race_waits_a_full_lease_for_the_winner(engine: Any, clients: LockClients) -> None:
    """Another waiter took the abandoned lock first: its fresh row gets a fresh lease."""
    clock = clients.clock
    client = clients.make()
    engine.put_lock_row('takeover-race', lease_duration=10, owner_name='dead', fencing_token=1)
    winner_at: list = []

    def rival_takes_over(params: Dict[str, Any]) -> None:
        winner_at.append(clock.monotonic())
        engine.put_lock_row('takeover-race', lease_duration=10, owner_name='rival', fencing_token=2)

    with FaultInjector(engine.resource) as faults, CallRecorder(engine.resource, clock) as calls:
        rival = faults.before_call('UpdateItem', rival_takes_over, times=1, when=is_takeover)
        lock = acquire_fast(client, clock, 'takeover-race', retry_period=seconds(seconds=1),
                            retry_timeout=seconds(seconds=60))
    assert rival.hits == 1
    assert lock.status == DynamoDBLock.LOCKED
    takeovers = [call for call in calls.writes() if is_takeover(call.params)]
    assert len(takeovers) == 2            # the one that lost, then the one that won
    assert takeovers[1].clock_time - winner_at[0] >= 10
    assert engine.read_item('takeover-race')['owner_name'] == client.owner_name
    assert lock.fencing_token == 3        # one more than the winner's, whose row it took over


def waiting_for(client: Any, clock: ManualClock, key: str, name: str) -> BackgroundCall:
    """A thread of ``client`` acquiring ``key`` (retry period 5 s, timeout 5 min), returned once
    it waits on the clock."""
    waiter = BackgroundCall(client.acquire_lock, key, retry_period=seconds(seconds=5),
                            retry_timeout=seconds(minutes=5), name=name)
    clock.wait_until_idle([waiter.thread])
    return waiter


def test_a_waiter_is_woken_as_soon_as_the_same_client_releases(engine: Any, clients: LockClients) -> None:
    """The clock never moves here: only the release can end the wait."""
    clock = clients.clock
    client = clients.make()
    held = client.acquire_lock('handoff')
    waiter = waiting_for(client, clock, 'handoff', 'handoff-waiter')
    assert not waiter.done
    held.release()
    second = waiter.result()
    assert second.status == DynamoDBLock.LOCKED
    assert second is not held
    assert engine.read_item('handoff')['record_version_number'] == second.record_version_number



def test_a_release_wakes_only_the_longest_waiting_thread(engine: Any, clients: LockClients) -> None:
    """Two threads wait; the clock never moves, so only releases can end their waits. Each
    release hands the lock to one waiter, oldest first, in the release's own write: nobody
    spends a write of its own, let alone a failed one."""
    clock = clients.clock
    client = clients.make()
    held = client.acquire_lock('queue')
    first = waiting_for(client, clock, 'queue', 'first-waiter')
    second = waiting_for(client, clock, 'queue', 'second-waiter')
    calls = CallRecorder(engine.resource)
    held.release()
    first_lock = first.result()
    clock.wait_until_idle([second.thread])
    assert not second.done                          # still waiting: it was not woken
    assert calls.operations() == ['UpdateItem']     # the release handing over, and no other write
    handover = calls.calls[0]
    assert is_takeover(handover.params) and held.record_version_number in handover.expression_values().values()
    assert first_lock.status == DynamoDBLock.LOCKED
    assert engine.read_item('queue')['record_version_number'] == first_lock.record_version_number
    assert first_lock.fencing_token == held.fencing_token + 1
    calls.clear()
    first_lock.release()
    second_lock = second.result()
    calls.stop()
    assert calls.operations() == ['UpdateItem']
    assert second_lock.status == DynamoDBLock.LOCKED
    assert engine.read_item('queue')['record_version_number'] == second_lock.record_version_number
    assert second_lock.fencing_token == first_lock.fencing_token + 1


def test_a_woken_waiter_that_loses_the_race_waits_a_retry_period_again(engine: Any, clients: LockClients) -> None:
    """The client's heartbeat finds its lock stolen, which wakes the client's waiter for the key;
    the thief still holds it, so the waiter's one write is refused and it goes back to waiting.
    (It once kept the wake and wrote again and again, hundreds of times a second.) The clock
    never moves until the end: a waiter that did not wait would not become idle."""
    clock = clients.clock
    client = clients.make()
    held = client.acquire_lock('stolen-then-woken')
    waiter = waiting_for(client, clock, 'stolen-then-woken', 'woken-waiter')
    engine.steal_row('stolen-then-woken')
    with CallRecorder(engine.resource) as calls:
        client.send_heartbeats([held])
        assert held.status == DynamoDBLock.INVALID
        wait_until(lambda: len(calls.writes()) >= 2, message=lambda: 'the woken waiter did not write')
        clock.wait_until_idle([waiter.thread])
        assert [call.action for call in calls.writes()] == ['heartbeat', 'acquire']
        assert not waiter.done
        engine.delete_row('stolen-then-woken')
        clock.advance(5)
        lock = waiter.result()
    assert lock.status == DynamoDBLock.LOCKED
    assert engine.read_item('stolen-then-woken')['record_version_number'] == lock.record_version_number


# --- lost answers ---------------------------------------------------------------------------

@pytest.mark.parametrize('retry', [True, False], ids=['botocore-retries', 'timeout-raised'])
def test_acquiring_write_whose_answer_was_lost_still_acquires(engine: Any, clients: LockClients,
                                                              retry: bool) -> None:
    client = clients.make()
    with FaultInjector(engine.resource) as faults, CallRecorder(engine.resource) as calls:
        # The only UpdateItem of the block is the acquiring one (``when`` needs the body,
        # which the raising variant does not see).
        lost = faults.lose_answers('UpdateItem', retry=retry)
        lock = client.acquire_lock('lost-put', retry_timeout=seconds(0))
    assert lost.hits == 1
    assert [call.operation for call in calls.writes()] == ['UpdateItem'] and is_acquire(calls.writes()[0].params)
    assert lock.status == DynamoDBLock.LOCKED
    row = engine.read_item('lost-put')
    assert row['record_version_number'] == lock.record_version_number
    assert row['fencing_token'] == lock.fencing_token          # the token the lost answer carried
    client.send_heartbeats([lock])                     # and the lock works afterwards
    assert lock.status == DynamoDBLock.LOCKED
    lock.release(best_effort=False)
    assert engine.read_held_row('lost-put') is None
    assert engine.read_item('lost-put')['fencing_token'] == lock.fencing_token   # kept, released


def test_takeover_whose_answer_was_lost_still_acquires(engine: Any, clients: LockClients) -> None:
    clock = clients.clock
    client = clients.make()
    engine.put_lock_row('lost-takeover', lease_duration=10)
    with FaultInjector(engine.resource) as faults:
        lost = faults.lose_answers('UpdateItem', retry=True, when=is_takeover)
        lock = acquire_fast(client, clock, 'lost-takeover', retry_period=seconds(seconds=2),
                            retry_timeout=seconds(seconds=30))
    assert lost.hits == 1
    row = engine.read_item('lost-takeover')
    assert row['record_version_number'] == lock.record_version_number
    assert row['fencing_token'] == lock.fencing_token == 2     # one more than the abandoned row's


# --- errors ---------------------------------------------------------------------------------

def test_dynamodb_error_on_the_acquiring_write_is_unknown_with_the_cause_chained(engine: Any,
                                                                                 clients: LockClients) -> None:
    client = clients.make()
    with FaultInjector(engine.resource) as faults:
        throttled = faults.fail_calls('UpdateItem', code='ProvisionedThroughputExceededException', when=is_acquire)
        with pytest.raises(DynamoDBLockError) as raised:
            client.acquire_lock('throttled')
    assert throttled.hits == 1
    assert raised.value.code == DynamoDBLockError.UNKNOWN
    cause = raised.value.__cause__
    assert isinstance(cause, ClientError)
    assert cause.response['Error']['Code'] == 'ProvisionedThroughputExceededException'
    assert engine.read_item('throttled') is None
    assert client.held_locks() == []


def test_server_error_on_an_acquiring_write_that_did_not_land_is_unknown(engine: Any, clients: LockClients) -> None:
    client = clients.make()
    with FaultInjector(engine.resource) as faults:
        failed = faults.fail_calls('UpdateItem', code='InternalServerError', status=500, when=is_acquire)
        with pytest.raises(DynamoDBLockError) as raised:
            client.acquire_lock('server-error')
    assert failed.hits == 1
    assert raised.value.code == DynamoDBLockError.UNKNOWN
    assert isinstance(raised.value.__cause__, ClientError)
    assert client.held_locks() == []
    assert engine.read_item('server-error') is None


def test_dynamodb_error_while_polling_is_unknown(engine: Any, clients: LockClients) -> None:
    clock = clients.clock
    client = clients.make()
    engine.put_lock_row('poll-error')
    with FaultInjector(engine.resource) as faults:
        faults.fail_calls('GetItem', code='InternalServerError', status=500)
        with pytest.raises(DynamoDBLockError) as raised:
            acquire_fast(client, clock, 'poll-error', retry_timeout=seconds(seconds=60))
    assert raised.value.code == DynamoDBLockError.UNKNOWN
    assert isinstance(raised.value.__cause__, ClientError)


def test_missing_table_error_names_the_table_and_how_to_create_it(engine: Any, clients: LockClients) -> None:
    client = clients.make(table_name='no-such-lock-table')
    with pytest.raises(DynamoDBLockError) as raised:
        client.acquire_lock('anything')
    assert raised.value.code == DynamoDBLockError.UNKNOWN
    assert 'no-such-lock-table' in raised.value.message
    assert 'create_dynamodb_table' in raised.value.message
    assert isinstance(raised.value.__cause__, ClientError)


def test_missing_table_for_the_other_operations(engine: Any, clients: LockClients) -> None:
    client = clients.make()
    lock = client.acquire_lock('doomed')
    engine.client.delete_table(TableName=engine.table_name)
    for operation in (lambda: client.get_lock('x'), lambda: list(client.list_locks()),
                      lambda: client.try_acquire_lock('x'), lambda: client.release_lock(lock, best_effort=False)):
        with pytest.raises(DynamoDBLockError) as raised:
            operation()
        assert raised.value.code == DynamoDBLockError.UNKNOWN
        assert engine.table_name in raised.value.message and 'create_dynamodb_table' in raised.value.message


# --- bad input (correction 12) ----------------------------------------------------------------

BAD_ACQUIRE_ARGUMENTS = [
    pytest.param(dict(partition_key=None), TypeError, id='partition-key-none'),
    pytest.param(dict(partition_key=42), TypeError, id='partition-key-int'),
    pytest.param(dict(partition_key=b'bytes'), TypeError, id='partition-key-bytes'),
    pytest.param(dict(partition_key=''), ValueError, id='partition-key-empty'),
    pytest.param(dict(sort_key=''), ValueError, id='sort-key-empty'),
    pytest.param(dict(sort_key=None), TypeError, id='sort-key-none'),
    pytest.param(dict(partition_key='x' * 2049), ValueError, id='partition-key-2049-bytes'),
    pytest.param(dict(partition_key='é' * 1025), ValueError, id='partition-key-1025-two-byte-chars'),
    pytest.param(dict(partition_key='😀' * 513), ValueError, id='partition-key-513-four-byte-chars'),
    pytest.param(dict(sort_key='x' * 1025), ValueError, id='sort-key-1025-bytes'),
    pytest.param(dict(sort_key='€' * 342), ValueError, id='sort-key-342-three-byte-chars'),
    pytest.param(dict(additional_attributes={'owner_name': 'forged'}), ValueError, id='overwrites-owner'),
    pytest.param(dict(additional_attributes={'lease_duration': 1}), ValueError, id='overwrites-lease'),
    pytest.param(dict(additional_attributes={'record_version_number': 'v'}), ValueError, id='overwrites-version'),
    pytest.param(dict(additional_attributes={'expiry_time': 1}), ValueError, id='overwrites-ttl'),
    pytest.param(dict(additional_attributes={'lock_key': 'other'}), ValueError, id='overwrites-partition-key'),
    pytest.param(dict(additional_attributes={'sort_key': 'other'}), ValueError, id='overwrites-sort-key'),
    pytest.param(dict(additional_attributes={'ratio': 0.5}), TypeError, id='float-value'),
    pytest.param(dict(additional_attributes={'nested': {'ratio': 0.5}}), TypeError, id='nested-float'),
    pytest.param(dict(additional_attributes=[('a', 'b')]), TypeError, id='attributes-not-a-dict'),
    pytest.param(dict(retry_period=5), TypeError, id='retry-period-int'),
    pytest.param(dict(retry_period=seconds(seconds=-1)), ValueError, id='retry-period-negative'),
    pytest.param(dict(retry_timeout=30.0), TypeError, id='retry-timeout-float'),
    pytest.param(dict(retry_timeout=seconds(seconds=-1)), ValueError, id='retry-timeout-negative'),
    pytest.param(dict(app_callback='not callable'), TypeError, id='callback-not-callable'),
    pytest.param(dict(additional_attributes={1: 'x'}), TypeError, id='attribute-name-not-str'),
    pytest.param(dict(additional_attributes={'': 'x'}), ValueError, id='attribute-name-empty'),
    pytest.param(dict(partition_key='bad\ud800key'), ValueError, id='partition-key-lone-surrogate'),
]


@pytest.fixture(scope='module', params=[THREADED, ASYNCIO])
def offline_client(request: pytest.FixtureRequest) -> Iterator[Tuple[DynamoDBLockClient, Any]]:
    """A client (of each kind) and its resource, which points at a closed local port: any call
    would show in a recorder."""
    factory = LockClients(kind=request.param)
    resource = offline_resource()
    yield factory.make(resource, table_name='offline'), resource
    factory.close_all()


@pytest.mark.parametrize('overrides, error', BAD_ACQUIRE_ARGUMENTS)
def test_bad_arguments_are_rejected_before_any_call(offline_client: Tuple[DynamoDBLockClient, Any],
                                                    overrides: Dict[str, Any],
                                                    error: type) -> None:
    client, resource = offline_client
    arguments: Dict[str, Any] = dict(partition_key='valid', sort_key='-')
    arguments.update(overrides)
    with CallRecorder(resource) as calls:
        with pytest.raises(error):
            client.acquire_lock(**arguments)
        try_arguments = {name: value for name, value in arguments.items()
                         if name not in ('retry_period', 'retry_timeout')}
        if try_arguments != dict(partition_key='valid', sort_key='-'):
            with pytest.raises(error):
                client.try_acquire_lock(**try_arguments)
    assert calls.calls == []


def test_keys_at_the_size_limits_are_accepted(engine: Any, clients: LockClients) -> None:
    client = clients.make()
    partition_key = 'é' * 1024                      # 2048 bytes in UTF-8
    sort_key = '😀' * 256                           # 1024 bytes in UTF-8
    lock = client.acquire_lock(partition_key, sort_key)
    assert engine.read_item(partition_key, sort_key)['record_version_number'] == lock.record_version_number


def test_additional_attributes_with_custom_key_names_are_checked(client_kind: str) -> None:
    factory = LockClients(kind=client_kind)
    resource = offline_resource()
    client = factory.make(resource, table_name='offline', partition_key_name='pk', sort_key_name='sk',
                          ttl_attribute_name='ttl')
    with CallRecorder(resource) as calls:
        for name in ('pk', 'sk', 'ttl'):
            with pytest.raises(ValueError):
                client.acquire_lock('x', additional_attributes={name: 'forged'})
    factory.close_all()
    assert calls.calls == []
