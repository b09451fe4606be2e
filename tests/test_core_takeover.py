"""Two clients, real heartbeat threads, one fake clock: a live holder keeps its lock, a dead or
stalled one loses it after its lease (corrections 1, 5 and 9).

The waiter runs acquire_lock in its own thread; the test advances fake time one step at a time
and lets every thread settle in between, so each poll sees exactly what the holder's threads
have written by then.
"""
from __future__ import annotations

import datetime
from decimal import Decimal
from typing import Any

import pytest

from helpers import (
    attribute_names_in,
    BackgroundCall,
    CallbackRecorder,
    CallRecorder,
    FaultInjector,
    LockClients,
    step,
)
from python_dynamodb_lock.python_dynamodb_lock import DynamoDBLock, DynamoDBLockError

seconds = datetime.timedelta


def test_a_live_holder_is_never_taken_over(engine: Any, clients: LockClients) -> None:
    clock = clients.clock
    holder = clients.make(engine.new_resource(), hand_driven=False, owner_name='holder')
    callback = CallbackRecorder()
    lock = holder.acquire_lock('contended', app_callback=callback)
    waiter = clients.make(owner_name='waiter')
    with CallRecorder(engine.resource) as waiter_calls:
        attempt = BackgroundCall(waiter.acquire_lock, 'contended', retry_period=seconds(seconds=2),
                                 retry_timeout=seconds(seconds=100), name='waiter')
        step(clock, 100, holder, threads=[attempt.thread])
        error = attempt.error()
    assert isinstance(error, DynamoDBLockError) and error.code == DynamoDBLockError.ACQUIRE_TIMEOUT
    # One write, the first attempt where the key is free (no row, or a released one); never a
    # takeover (conditioned on the holder's version).
    writes = waiter_calls.writes()
    assert [call.operation for call in writes] == ['UpdateItem']
    assert 'attribute_not_exists' in writes[0].params['ConditionExpression']
    assert attribute_names_in(writes[0].params, 'ConditionExpression') == {'lock_key', 'released_at'}
    assert lock.status == DynamoDBLock.LOCKED
    assert callback.calls == []
    assert engine.read_item('contended')['owner_name'] == 'holder'


def test_a_holder_that_dies_is_taken_over_a_lease_after_its_last_heartbeat(engine: Any, clients: LockClients) -> None:
    clock = clients.clock
    holder = clients.make(engine.new_resource(), hand_driven=False, owner_name='holder')
    dead = holder.acquire_lock('dies')
    waiter = clients.make(owner_name='waiter')
    with CallRecorder(engine.resource, clock) as waiter_calls:
        attempt = BackgroundCall(waiter.acquire_lock, 'dies', retry_period=seconds(seconds=1),
                                 retry_timeout=seconds(seconds=200), name='waiter')
        step(clock, 12, holder, threads=[attempt.thread])      # two heartbeats seen (at +5 and +10)
        last_version = engine.read_item('dies')['record_version_number']
        died_at = clock.monotonic()
        holder.close()                                          # crash: no release, no more heartbeats
        while not attempt.done:
            step(clock, 1, threads=[attempt.thread])
            assert clock.monotonic() - died_at < 60, 'never took over'
        lock = attempt.result()
    takeover = waiter_calls.writes()[-1]
    assert takeover.operation == 'UpdateItem'
    assert last_version in takeover.expression_values().values()
    assert 30 <= takeover.clock_time - (died_at - 2) <= 30 + 1 + 2   # last heartbeat was at died_at - 2
    assert engine.read_item('dies')['record_version_number'] == lock.record_version_number
    assert lock.fencing_token == dead.fencing_token + 1               # the row's counter, carried forward
    assert lock.took_over_from is not None and lock.took_over_from.owner_name == 'holder'


@pytest.mark.parametrize('lease', [0.1, 1.1])
def test_fractional_leases_are_stored_exactly_and_taken_over_after_them(engine: Any, clients: LockClients,
                                                                        lease: float) -> None:
    clock = clients.clock
    short = clients.make(engine.new_resource(), owner_name='short-lease',
                         lease_duration=seconds(seconds=lease), heartbeat_period=seconds(seconds=lease / 4),
                         safe_period=seconds(seconds=lease / 2))
    short.acquire_lock('fraction')
    assert engine.read_item('fraction')['lease_duration'] == Decimal(str(lease))
    short.close()
    waiter = clients.make()
    start = clock.monotonic()
    with clock.auto_advance_in_current_thread():
        lock = waiter.acquire_lock('fraction', retry_period=seconds(seconds=lease / 10),
                                   retry_timeout=seconds(seconds=10))
    assert lease - 1e-6 <= clock.monotonic() - start <= lease * 1.1 + 1e-6
    assert engine.read_item('fraction')['record_version_number'] == lock.record_version_number


def test_a_stalled_holder_goes_in_danger_then_learns_it_was_stolen(engine: Any, clients: LockClients) -> None:
    """The holder cannot reach DynamoDB for longer than its lease: warned, then told it lost."""
    clock = clients.clock
    holder_resource = engine.new_resource()
    holder = clients.make(holder_resource, hand_driven=False, owner_name='stalled')
    callback = CallbackRecorder()
    lock = holder.acquire_lock('stalled', app_callback=callback)
    waiter = clients.make(owner_name='waiter')
    with FaultInjector(holder_resource) as faults:
        faults.fail_calls('UpdateItem', code='InternalServerError', status=500, times=None)
        attempt = BackgroundCall(waiter.acquire_lock, 'stalled', retry_period=seconds(seconds=1),
                                 retry_timeout=seconds(seconds=60), name='waiter')
        while not attempt.done:
            step(clock, 1, holder, threads=[attempt.thread])
        taken = attempt.result()
        assert lock.status == DynamoDBLock.IN_DANGER
        assert callback.codes == [DynamoDBLockError.LOCK_IN_DANGER]
    step(clock, 5, holder)                                 # DynamoDB is back: the next renewal fails its condition
    assert lock.status == DynamoDBLock.INVALID
    assert callback.codes == [DynamoDBLockError.LOCK_IN_DANGER, DynamoDBLockError.LOCK_STOLEN]
    assert engine.read_item('stalled')['record_version_number'] == taken.record_version_number
