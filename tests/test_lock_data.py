"""Data on a lock and per-lock leases (issue 19): ``lock.update_attributes`` (a heartbeat that
sets and removes additional attributes), ``release_lock(attributes=...)`` (data left on the
released row for the next holder), and ``lease_duration`` on ``acquire_lock`` /
``try_acquire_lock``.

Both clients, on moto and DynamoDB Local (``engine``), on a ManualClock; the claims about
exclusion (a waiter does not take over a holder that only updates its attributes; one that
watches a short per-lock lease takes over after it) run on DynamoDB Local only.
"""
from __future__ import annotations

import datetime
import logging
from decimal import Decimal
from typing import Any

import pytest
from helpers import BackgroundCall, CallRecorder, FaultInjector, LockClients, advance_until_done, settle

from python_dynamodb_lock import Reason
from python_dynamodb_lock.python_dynamodb_lock import DynamoDBLock, DynamoDBLockError
from python_dynamodb_lock.testing import CallbackRecorder, LockTable

seconds = datetime.timedelta
MODULE = 'python_dynamodb_lock.python_dynamodb_lock'


# --------------------------------------------------------------------------------------------
# lock.update_attributes
# --------------------------------------------------------------------------------------------

def test_update_attributes_sets_and_removes_with_a_renewal(engine: LockTable, clients: LockClients) -> None:
    clock = clients.clock
    client = clients.make()
    lock = client.acquire_lock('job', additional_attributes={'progress': 0, 'stage': 'download'})
    version = lock.record_version_number
    clock.advance(25)                                    # past the safe period: in danger
    assert lock.status == DynamoDBLock.IN_DANGER
    with CallRecorder(engine.resource) as calls:
        lock.update_attributes({'progress': 40, 'note': 'half way'}, remove=['stage'])
    assert calls.operations() == ['UpdateItem']          # one write: the data and the renewal together
    assert lock.additional_attributes == {'progress': 40, 'note': 'half way'}
    assert lock.record_version_number != version         # it is a heartbeat: a new version, a fresh lease
    assert lock.status == DynamoDBLock.LOCKED
    assert lock.lease_remaining() == pytest.approx(30)
    row = engine.read_item('job')
    assert row['progress'] == 40 and row['note'] == 'half way' and 'stage' not in row
    assert row['record_version_number'] == lock.record_version_number
    assert row['fencing_token'] == lock.fencing_token   # the same acquisition
    assert row['owner_name'] == lock.owner_name
    params = calls.calls[0].params
    assert params['ConditionExpression'] == 'record_version_number = :expected_version_0'
    assert version in calls.calls[0].expression_values().values()
    # Every name the application chose goes through ExpressionAttributeNames.
    assert {'progress', 'note', 'stage'} <= set(params['ExpressionAttributeNames'].values())
    assert 'progress' not in params['UpdateExpression'] and 'stage' not in params['UpdateExpression']


def test_get_lock_and_list_locks_show_the_latest_attributes(engine: LockTable, clients: LockClients) -> None:
    holder = clients.make(owner_name='worker')
    reader = clients.make(owner_name='reader')
    lock = holder.acquire_lock('report', additional_attributes={'progress': 0})
    lock.update_attributes({'progress': 75})
    seen = reader.get_lock('report')
    assert seen is not None and seen.additional_attributes == {'progress': 75}
    assert seen.record_version_number == lock.record_version_number
    (listed,) = [each for each in reader.list_locks() if each.partition_key == 'report']
    assert listed.additional_attributes == {'progress': 75}
    lock.update_attributes(remove=['progress'])
    seen = reader.get_lock('report')
    assert seen is not None and seen.additional_attributes == {}


@pytest.mark.parametrize('values, remove, error, words', [
    ({'owner_name': 'me'}, (), ValueError, "lock's own attributes"),
    ({'lock_key': 'other'}, (), ValueError, "lock's own attributes"),
    ({'sort_key': 'other'}, (), ValueError, "lock's own attributes"),
    ({'expiry_time': 1}, (), ValueError, "lock's own attributes"),
    ({'record_version_number': 'v'}, (), ValueError, "lock's own attributes"),
    ({'lease_duration': 1}, (), ValueError, "lock's own attributes"),
    ({'fencing_token': 1}, (), ValueError, "lock's own attributes"),
    ({'acquisition_id': 'a'}, (), ValueError, "lock's own attributes"),
    (None, ['lease_expiry'], ValueError, "lock's own attributes"),
    (None, ['released_at'], ValueError, "lock's own attributes"),
    ({'a': 1}, ['a'], ValueError, 'both set'),
    (None, (), ValueError, 'both were empty'),
    ({}, [], ValueError, 'both were empty'),
    ({'ratio': 0.5}, (), TypeError, 'float'),
    ({'nan': Decimal('NaN')}, (), ValueError, 'NaN'),
    ({'': 1}, (), ValueError, 'values key'),
    (None, 'stage', TypeError, 'remove must be a list'),
    (['a'], (), TypeError, 'values must be a dict'),
])
def test_update_attributes_refuses_bad_input_before_any_write(
        engine: LockTable, clients: LockClients, values: Any, remove: Any, error: type, words: str) -> None:
    client = clients.make()
    lock = client.acquire_lock('guarded', additional_attributes={'stage': 'one'})
    version = lock.record_version_number
    with CallRecorder(engine.resource) as calls:
        with pytest.raises(error) as refused:
            lock.update_attributes(values, remove)
    assert words in str(refused.value)
    assert calls.count() == 0
    assert lock.record_version_number == version and lock.additional_attributes == {'stage': 'one'}
    assert engine.read_item('guarded')['stage'] == 'one'


def test_update_attributes_of_a_stolen_lock_marks_it_lost_as_a_heartbeat_would(
        engine: LockTable, clients: LockClients) -> None:
    callback = CallbackRecorder()
    client = clients.make()
    lock = client.acquire_lock('taken', additional_attributes={'progress': 1}, app_callback=callback)
    engine.steal_row('taken', owner_name='the-thief')
    with pytest.raises(DynamoDBLockError) as stolen:
        lock.update_attributes({'progress': 2})
    assert stolen.value.code == DynamoDBLockError.LOCK_STOLEN and stolen.value.reason == Reason.TAKEN_OVER
    assert stolen.value.holder is not None and stolen.value.holder.owner_name == 'the-thief'
    assert lock.status == DynamoDBLock.INVALID and client.held_locks() == []
    assert callback.codes == [DynamoDBLockError.LOCK_STOLEN]
    assert lock.additional_attributes == {'progress': 1}        # unchanged: nothing was written
    assert engine.read_item('taken')['progress'] == 1           # the thief's row is left alone


def test_update_attributes_of_a_released_lock_raises_lock_not_owned(engine: LockTable, clients: LockClients) -> None:
    client = clients.make()
    lock = client.acquire_lock('done')
    lock.release()
    with pytest.raises(DynamoDBLockError) as not_owned:
        lock.update_attributes({'late': True})
    assert not_owned.value.code == DynamoDBLockError.LOCK_NOT_OWNED
    assert 'late' not in (engine.read_item('done') or {})


def test_update_attributes_when_dynamodb_fails_changes_nothing_locally(engine: LockTable,
                                                                      clients: LockClients) -> None:
    client = clients.make()
    lock = client.acquire_lock('flaky', additional_attributes={'progress': 1})
    version = lock.record_version_number
    with FaultInjector(engine.resource) as faults:
        faults.fail_calls('UpdateItem', code='InternalServerError', status=500, times=1)
        with pytest.raises(DynamoDBLockError) as failed:
            lock.update_attributes({'progress': 2})
    assert failed.value.code == DynamoDBLockError.UNKNOWN
    assert 'Could not update the attributes of' in failed.value.message
    assert lock.status == DynamoDBLock.LOCKED and lock.record_version_number == version
    assert lock.additional_attributes == {'progress': 1}
    lock.update_attributes({'progress': 2})                     # try again: it works
    assert engine.read_item('flaky')['progress'] == 2 and lock.additional_attributes == {'progress': 2}


def test_update_attributes_after_a_heartbeat_whose_answer_was_lost(engine: LockTable, clients: LockClients) -> None:
    """A heartbeat landed but its answer was lost: the row carries a version the lock has not
    confirmed. The update's condition names it too (as the next heartbeat's would), so the
    update is not taken for a theft."""
    client = clients.make()
    lock = client.acquire_lock('unconfirmed')
    confirmed = lock.record_version_number
    with FaultInjector(engine.resource) as faults:
        faults.lose_answers('UpdateItem', retry=False)
        client.send_heartbeats([lock])
    assert lock.record_version_number == confirmed              # the lost answer confirmed nothing
    assert engine.read_item('unconfirmed')['record_version_number'] != confirmed
    lock.update_attributes({'progress': 10})
    assert lock.status == DynamoDBLock.LOCKED
    row = engine.read_item('unconfirmed')
    assert row['progress'] == 10 and row['record_version_number'] == lock.record_version_number


def test_update_attributes_whose_answer_was_lost_and_retried_meets_its_own_write(
        engine: LockTable, clients: LockClients) -> None:
    client = clients.make()
    lock = client.acquire_lock('retried')
    with FaultInjector(engine.resource) as faults:
        faults.lose_answers('UpdateItem', retry=True)
        lock.update_attributes({'progress': 99})
    assert lock.status == DynamoDBLock.LOCKED and lock.additional_attributes == {'progress': 99}
    assert engine.read_item('retried')['record_version_number'] == lock.record_version_number


def test_updated_attributes_are_removed_at_release(engine: LockTable, clients: LockClients) -> None:
    client = clients.make()
    lock = client.acquire_lock('cleaned', additional_attributes={'a': 1})
    lock.update_attributes({'b': 2}, remove=['a'])
    lock.release()
    row = engine.read_item('cleaned')
    assert row is not None and 'released_at' in row and 'a' not in row and 'b' not in row


def test_a_holder_that_only_updates_its_attributes_is_never_taken_over(
        local_engine: LockTable, local_clients: LockClients) -> None:
    """update_attributes is a heartbeat: a waiter that watches the version sees it change."""
    clock = local_clients.clock
    holder = local_clients.make(owner_name='reporter')
    waiter = local_clients.make(owner_name='waiter')
    lock = holder.acquire_lock('progress', additional_attributes={'done': 0})
    attempt = BackgroundCall(waiter.acquire_lock, 'progress', retry_period=seconds(seconds=2),
                             retry_timeout=seconds(seconds=100), name='waiter')
    for second in range(100):
        settle(clock, threads=[attempt.thread])
        if second % 10 == 0:
            lock.update_attributes({'done': second})
        clock.advance(1)
    error = attempt.error()
    assert isinstance(error, DynamoDBLockError) and error.code == DynamoDBLockError.ACQUIRE_TIMEOUT
    assert lock.status == DynamoDBLock.LOCKED
    assert local_engine.read_item('progress')['done'] == 90


# --------------------------------------------------------------------------------------------
# release_lock(attributes=...)
# --------------------------------------------------------------------------------------------

def test_attributes_at_release_are_left_on_the_row_for_the_next_holder(engine: LockTable,
                                                                       clients: LockClients) -> None:
    first = clients.make(owner_name='first')
    second = clients.make(owner_name='second')
    lock = first.acquire_lock('handoff', additional_attributes={'progress': 100, 'scratch': 'x'})
    lock.release(attributes={'result': 'ok', 'progress': 100})
    row = engine.read_item('handoff')
    assert row is not None and 'released_at' in row
    assert row['result'] == 'ok' and row['progress'] == 100 and 'scratch' not in row
    assert second.get_lock('handoff') is None                       # the key is free
    following = second.acquire_lock('handoff', additional_attributes={'progress': 0})
    # The next holder reads what was left; its own attributes win over those of the same name.
    assert following.additional_attributes == {'result': 'ok', 'progress': 0}
    seen = first.get_lock('handoff')
    assert seen is not None and seen.owner_name == 'second'
    assert seen.additional_attributes == {'result': 'ok', 'progress': 0}
    assert following.fencing_token is not None and lock.fencing_token is not None
    assert following.fencing_token > lock.fencing_token
    following.release()                                             # no attributes: nothing is left
    row = engine.read_item('handoff')
    assert 'result' not in row and 'progress' not in row


def test_release_attributes_through_release_lock(engine: LockTable, clients: LockClients) -> None:
    client = clients.make()
    lock = client.acquire_lock('via-client')
    client.release_lock(lock, best_effort=False, attributes={'exit_code': 0})
    assert lock.status == DynamoDBLock.RELEASED
    assert engine.read_item('via-client')['exit_code'] == 0


def test_release_attributes_reach_a_waiter_the_lock_is_handed_to(local_engine: LockTable,
                                                                 local_clients: LockClients) -> None:
    clock = local_clients.clock
    client = local_clients.make()
    lock = client.acquire_lock('queue', additional_attributes={'old': 1})
    waiting = BackgroundCall(client.acquire_lock, 'queue', retry_timeout=seconds(seconds=60),
                             additional_attributes={'mine': 2}, name='waiter')
    settle(clock, threads=[waiting.thread])
    lock.release(attributes={'left': 'for you'})
    handed = waiting.result()
    assert handed.additional_attributes == {'left': 'for you', 'mine': 2}
    row = local_engine.read_held_row('queue')
    assert row is not None and row['left'] == 'for you' and row['mine'] == 2 and 'old' not in row


def test_release_attributes_are_refused_when_the_row_is_deleted(engine: LockTable, clients: LockClients) -> None:
    client = clients.make(keep_released_rows=False)
    lock = client.acquire_lock('deleted-row')
    with CallRecorder(engine.resource) as calls:
        with pytest.raises(ValueError, match='deletes the row'):
            lock.release(attributes={'result': 'ok'})
    assert calls.count() == 0
    assert lock.status == DynamoDBLock.LOCKED and engine.read_held_row('deleted-row') is not None
    lock.release()                                                   # without attributes it is released
    assert engine.read_item('deleted-row') is None


@pytest.mark.parametrize('attributes, error', [
    ({'owner_name': 'x'}, ValueError), ({'released_at': 1}, ValueError), ({'f': 1.5}, TypeError),
    ('result', TypeError),
])
def test_release_attributes_are_checked_before_any_write(engine: LockTable, clients: LockClients,
                                                         attributes: Any, error: type) -> None:
    client = clients.make()
    lock = client.acquire_lock('checked')
    with CallRecorder(engine.resource) as calls:
        with pytest.raises(error):
            lock.release(best_effort=True, attributes=attributes)
    assert calls.count() == 0 and lock.status == DynamoDBLock.LOCKED


@pytest.mark.threaded_only      # reentrancy is per task in the asyncio client (the facade runs each call in its own)
def test_release_attributes_on_a_reentrant_hold_are_refused(engine: LockTable, clients: LockClients) -> None:
    client = clients.make()
    lock = client.acquire_lock('nested')
    assert client.acquire_lock('nested', reentrant=True) is lock
    with pytest.raises(ValueError, match='holds remain'):
        lock.release(attributes={'result': 'early'})
    assert lock.holds == 2
    lock.release()
    lock.release(attributes={'result': 'last'})
    assert engine.read_item('nested')['result'] == 'last'


# --------------------------------------------------------------------------------------------
# Per-lock lease_duration
# --------------------------------------------------------------------------------------------

def test_a_per_lock_lease_is_written_and_renewed(engine: LockTable, clients: LockClients) -> None:
    clock = clients.clock
    client = clients.make()
    lock = client.acquire_lock('long-job', lease_duration=seconds(minutes=2))
    assert lock.lease_duration == 120 and lock.lease_remaining() == pytest.approx(120)
    row = engine.read_item('long-job')
    assert row['lease_duration'] == 120
    assert float(row['lease_expiry']) == pytest.approx(clock.time() + 120, abs=0.002)
    clock.advance(10)
    client.send_heartbeats()
    row = engine.read_item('long-job')
    assert row['lease_duration'] == 120                              # heartbeats keep the lock's lease
    assert float(row['lease_expiry']) == pytest.approx(clock.time() + 120, abs=0.002)
    assert lock.lease_remaining() == pytest.approx(120)
    other = client.acquire_lock('default-lease')
    assert other.lease_duration == 30 and engine.read_item('default-lease')['lease_duration'] == 30
    seen = client.get_lock('long-job')
    assert seen is not None and seen.lease_duration == 120


def test_try_acquire_lock_takes_a_lease_too(engine: LockTable, clients: LockClients) -> None:
    client = clients.make()
    lock = client.try_acquire_lock('tried', lease_duration=seconds(seconds=45))
    assert lock is not None and lock.lease_duration == 45
    assert engine.read_item('tried')['lease_duration'] == 45


def test_the_safe_period_of_a_lock_is_the_same_fraction_of_its_own_lease(engine: LockTable,
                                                                         clients: LockClients) -> None:
    """The client's safe period is 20 s of a 30 s lease: a 60 s lock is in danger after 40 s,
    a 6 s lock after 4 s."""
    clock = clients.clock
    long_callback, short_callback = CallbackRecorder(), CallbackRecorder()
    client = clients.make(heartbeat_period=seconds(seconds=1))
    long_lock = client.acquire_lock('long', lease_duration=seconds(seconds=60), app_callback=long_callback)
    short_lock = client.acquire_lock('short', lease_duration=seconds(seconds=6), app_callback=short_callback)
    clock.advance(4.5)
    assert short_lock.status == DynamoDBLock.IN_DANGER and long_lock.status == DynamoDBLock.LOCKED
    client.check_locks()
    assert short_callback.codes == [DynamoDBLockError.LOCK_IN_DANGER] and long_callback.codes == []
    clock.advance(25)                        # 29.5 s: past the client's 20 s, within the long lock's 40 s
    client.check_locks()
    assert long_lock.status == DynamoDBLock.LOCKED and long_callback.codes == []
    clock.advance(11)                        # 40.5 s
    client.check_locks()
    assert long_lock.status == DynamoDBLock.IN_DANGER
    assert long_callback.codes == [DynamoDBLockError.LOCK_IN_DANGER]


@pytest.mark.parametrize('lease, error, words', [
    (30, TypeError, 'timedelta'),
    (seconds(0), ValueError, 'lease_duration'),
    (seconds(seconds=-1), ValueError, 'lease_duration'),
    (seconds(seconds=5), ValueError, 'heartbeat_period'),     # not longer than the 5 s heartbeat period
    (seconds(hours=2), ValueError, 'expiry_period'),          # longer than the 1 h expiry period
])
def test_a_per_lock_lease_is_checked_as_the_clients_is(engine: LockTable, clients: LockClients, lease: Any,
                                                       error: type, words: str) -> None:
    client = clients.make()
    with CallRecorder(engine.resource) as calls:
        with pytest.raises(error, match=words):
            client.acquire_lock('refused', lease_duration=lease)
        with pytest.raises(error, match=words):
            client.try_acquire_lock('refused', lease_duration=lease)
    assert calls.count() == 0


def test_a_short_per_lock_lease_is_warned_about_as_the_clients_is(engine: LockTable, clients: LockClients,
                                                                  caplog: pytest.LogCaptureFixture) -> None:
    client = clients.make()
    with caplog.at_level(logging.WARNING, logger=MODULE):
        client.acquire_lock('tight', lease_duration=seconds(seconds=8))
        client.acquire_lock('tight-too', lease_duration=seconds(seconds=8))     # said once per client
        client.acquire_lock('roomy', lease_duration=seconds(seconds=60))
    warned = [record.getMessage() for record in caplog.records if 'is not well below' in record.getMessage()]
    assert len(warned) == 1 and 'lease_duration (8.0s)' in warned[0]


def test_a_waiter_takes_over_after_the_dead_holders_own_lease(local_engine: LockTable,
                                                              local_clients: LockClients) -> None:
    clock = local_clients.clock
    holder = local_clients.make(owner_name='short-lived')
    waiter = local_clients.make(owner_name='waiter')
    holder.acquire_lock('brief', lease_duration=seconds(seconds=10))       # and never renewed
    attempt = BackgroundCall(waiter.acquire_lock, 'brief', retry_period=seconds(seconds=1),
                             retry_timeout=seconds(seconds=60), name='waiter')
    waited = advance_until_done(clock, attempt, 60)
    taken = attempt.result()
    assert 10 <= waited <= 10 + 1 + 2                           # its own 10 s lease, not the client's 30 s
    assert taken.took_over_from is not None and taken.took_over_from.owner_name == 'short-lived'
    assert taken.lease_duration == 30                           # the waiter's own (the client's) lease


def test_the_default_retry_timeout_follows_the_locks_own_lease(local_engine: LockTable,
                                                              local_clients: LockClients) -> None:
    clock = local_clients.clock
    holder = local_clients.make(owner_name='holder')
    waiter = local_clients.make(owner_name='waiter')
    holder.acquire_lock('slow', lease_duration=seconds(minutes=10))    # silent, but its lease is long
    attempt = BackgroundCall(waiter.acquire_lock, 'slow', lease_duration=seconds(seconds=60), name='waiter')
    waited = advance_until_done(clock, attempt, 300)
    error = attempt.error()
    assert isinstance(error, DynamoDBLockError) and error.code == DynamoDBLockError.ACQUIRE_TIMEOUT
    assert 60 + 5 <= waited <= 60 + 5 + 1 + 5                   # 60 s + the 5 s heartbeat period, not 30 + 5
