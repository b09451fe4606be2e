"""Shared (read) locks (docs/shared_locks.rst), on DynamoDB Local, for both clients.

Exclusion claims run on DynamoDB Local. Time is a ManualClock shared by the test's clients
(hand-driven: heartbeats are sent by the test), so that "a lease passed" is a step of the
clock, not a sleep.
"""
from __future__ import annotations

from datetime import timedelta
import asyncio
import threading
from typing import Any, Dict

import pytest

from helpers import (BackgroundCall, CallRecorder, FaultInjector, HoldBack, LockClients, ManualClock, step,
                     wait_until)
from test_aio import REAL_TIMEOUT, eventually, run
from python_dynamodb_lock.python_dynamodb_lock import DynamoDBLockError
from python_dynamodb_lock.testing import LockTable, is_acquire

seconds = timedelta
# Short periods: a lease is a few steps of the clock.
PERIODS = {'heartbeat_period': seconds(seconds=1), 'safe_period': seconds(seconds=2),
           'lease_duration': seconds(seconds=3)}
LEASE = 3


def reader(clients: LockClients, name: str) -> Any:
    return clients.make(owner_name=name, **PERIODS)


def holder_id(lock: Any) -> str:
    return str(lock.holder_id)


def test_many_shared_holders_at_once_exclude_an_exclusive_one(local_engine: Any, local_clients: LockClients) -> None:
    readers = [reader(local_clients, f'reader-{index}') for index in range(3)]
    writer = reader(local_clients, 'writer')
    locks = [client.acquire_lock('key', shared=True, retry_timeout=seconds(0)) for client in readers]
    locks.append(readers[0].acquire_lock('key', shared=True, retry_timeout=seconds(0)))   # twice in one client
    assert all(lock.shared and lock.status == lock.LOCKED for lock in locks)
    row = local_engine.read_item('key')
    assert sorted(row['shared_holders']) == sorted(holder_id(lock) for lock in locks)
    assert 'acquisition_id' not in row and row['lease_duration'] == LEASE
    assert writer.try_acquire_lock('key') is None
    described = writer.get_lock('key')
    assert sorted(holder.owner_name for holder in described.shared_holders) == [
        'reader-0', 'reader-0', 'reader-1', 'reader-2']
    assert [lock.shared_holders for lock in writer.list_locks()] == [described.shared_holders]
    for lock in locks[:-1]:
        lock.release(best_effort=False)
        assert writer.try_acquire_lock('key') is None        # one shared holder is enough
    locks[-1].release(best_effort=False)
    row = local_engine.read_item('key')
    assert row.get('released_at') is not None and 'shared_holders' not in row   # the last one freed it
    assert writer.try_acquire_lock('key') is not None


def test_an_exclusive_holder_excludes_shared_ones_who_then_see_its_fencing_token(
        local_engine: Any, local_clients: LockClients) -> None:
    writer, readers = reader(local_clients, 'writer'), [reader(local_clients, f'r{index}') for index in range(2)]
    exclusive = writer.acquire_lock('key', retry_timeout=seconds(0))
    assert readers[0].try_acquire_lock('key', shared=True) is None
    token = exclusive.fencing_token
    exclusive.release(best_effort=False)
    shared = [client.acquire_lock('key', shared=True, retry_timeout=seconds(0)) for client in readers]
    assert [lock.fencing_token for lock in shared] == [token, token]   # the last exclusive release's
    for lock in shared:
        lock.release(best_effort=False)
    after = writer.acquire_lock('key', retry_timeout=seconds(0))
    assert after.fencing_token == token + 1          # shared holds take no token


def test_a_shared_holder_renews_its_own_entry_and_the_row_version(local_engine: Any,
                                                                  local_clients: LockClients) -> None:
    first, second = reader(local_clients, 'first'), reader(local_clients, 'second')
    mine = first.acquire_lock('key', shared=True, retry_timeout=seconds(0))
    other = second.acquire_lock('key', shared=True, retry_timeout=seconds(0))
    before = local_engine.read_item('key')
    first.send_heartbeats()
    after = local_engine.read_item('key')
    assert after['record_version_number'] != before['record_version_number']     # published clients see it move
    assert after['shared_holders'][holder_id(mine)]['version'] == mine.record_version_number \
        != before['shared_holders'][holder_id(mine)]['version']
    assert after['shared_holders'][holder_id(other)] == before['shared_holders'][holder_id(other)]
    assert mine.status == mine.LOCKED and other.status == other.LOCKED


def test_a_dead_shared_holder_is_removed_after_its_lease_while_a_live_one_keeps_the_writer_out(
        local_engine: Any, local_clients: LockClients) -> None:
    clock = local_clients.clock
    alive, dead, writer = (reader(local_clients, name) for name in ('alive', 'dead', 'writer'))
    kept = alive.acquire_lock('key', shared=True, retry_timeout=seconds(0))
    gone = dead.acquire_lock('key', shared=True, retry_timeout=seconds(0))
    waiter = BackgroundCall(writer.acquire_lock, 'key', retry_period=seconds(seconds=1),
                            retry_timeout=seconds(hours=1))
    step(clock, 0, writer, threads=[waiter.thread])
    assert local_engine.read_item('key')['writer_waiting']['owner'] == 'writer'
    for _ in range(LEASE + 2):           # 'dead' never renews; 'alive' does
        alive.send_heartbeats()
        step(clock, 1, writer, threads=[waiter.thread])
    row = local_engine.read_item('key')
    assert list(row['shared_holders']) == [holder_id(kept)]     # the dead entry is gone, the live one kept
    assert not waiter.done                                      # and the writer still waits for it
    dead.send_heartbeats()                                      # the dead holder comes back: its lock is lost
    assert gone.status == gone.INVALID
    kept.release(best_effort=False)
    step(clock, 1, writer, threads=[waiter.thread])
    lock = waiter.result()
    assert lock.status == lock.LOCKED and not lock.shared
    assert 'writer_waiting' not in local_engine.read_item('key')


def test_an_abandoned_shared_row_is_taken_over_by_a_writer_after_the_lease(local_engine: Any,
                                                                           local_clients: LockClients) -> None:
    clock = local_clients.clock
    dead, writer = reader(local_clients, 'dead'), reader(local_clients, 'writer')
    gone = dead.acquire_lock('key', shared=True, retry_timeout=seconds(0))
    waiter = BackgroundCall(writer.acquire_lock, 'key', retry_period=seconds(seconds=1),
                            retry_timeout=seconds(hours=1))
    step(clock, LEASE + 1, writer, threads=[waiter.thread])
    lock = waiter.result()
    assert lock.took_over_from is not None and lock.took_over_from.shared_holders[0].owner_name == 'dead'
    row = local_engine.read_item('key')
    assert 'shared_holders' not in row and row['record_version_number'] == lock.record_version_number
    dead.send_heartbeats()
    assert gone.status == gone.INVALID


def test_a_waiting_writer_is_not_starved_by_new_shared_holders(local_engine: Any,
                                                               local_clients: LockClients) -> None:
    clock = local_clients.clock
    first, late, writer = reader(local_clients, 'first'), reader(local_clients, 'late'), reader(local_clients, 'w')
    held = first.acquire_lock('key', shared=True, retry_timeout=seconds(0))
    assert late.try_acquire_lock('key', shared=True) is not None      # no writer waits yet: joins
    late.release_lock(late.held_locks()[0], best_effort=False)
    waiter = BackgroundCall(writer.acquire_lock, 'key', retry_period=seconds(seconds=1),
                            retry_timeout=seconds(hours=1))
    step(clock, 0, writer, threads=[waiter.thread])
    for _ in range(3):                                                 # a stream of new readers
        assert late.try_acquire_lock('key', shared=True) is None
        first.send_heartbeats()
        step(clock, 1, writer, threads=[waiter.thread])
    held.release(best_effort=False)
    step(clock, 1, writer, threads=[waiter.thread])
    exclusive = waiter.result()
    assert late.try_acquire_lock('key', shared=True) is None           # the writer holds it now
    exclusive.release(best_effort=False)
    assert late.try_acquire_lock('key', shared=True) is not None


def test_a_dead_writers_marker_is_ignored_after_its_lease(local_engine: Any, local_clients: LockClients) -> None:
    clock = local_clients.clock
    first, late, writer = reader(local_clients, 'first'), reader(local_clients, 'late'), reader(local_clients, 'w')
    first.acquire_lock('key', shared=True, retry_timeout=seconds(0))
    waiter = BackgroundCall(writer.acquire_lock, 'key', retry_period=seconds(seconds=1),
                            retry_timeout=seconds(seconds=1))
    step(clock, 2, writer, threads=[waiter.thread])
    with pytest.raises(DynamoDBLockError):
        waiter.result()            # timed out: it takes its marker off
    assert 'writer_waiting' not in local_engine.read_item('key')
    # A marker whose writer died (left behind): new readers wait one lease for it, then join.
    layout = writer.table_layout
    key = {layout.partition_key_name: 'key'}
    if layout.sort_key_name is not None:
        key[layout.sort_key_name] = '-'
    local_engine.resource.Table(layout.table_name).update_item(
        Key=key, UpdateExpression='SET writer_waiting = :marker',
        ExpressionAttributeValues={':marker': {'id': 'gone', 'owner': 'gone', 'version': 'v', 'lease': LEASE}})
    assert late.try_acquire_lock('key', shared=True) is None
    joiner = BackgroundCall(late.acquire_lock, 'key', shared=True, retry_period=seconds(seconds=1),
                            retry_timeout=seconds(hours=1))
    for _ in range(LEASE + 1):
        first.send_heartbeats()
        step(clock, 1, late, threads=[joiner.thread])
    assert joiner.result().shared
    assert 'writer_waiting' not in local_engine.read_item('key')


def test_shared_locks_refuse_additional_attributes_and_guarded_writes(local_engine: Any,
                                                                     local_clients: LockClients) -> None:
    client = reader(local_clients, 'reader')
    with pytest.raises(ValueError, match='shared lock takes no additional_attributes'):
        client.acquire_lock('key', shared=True, additional_attributes={'x': 1})
    with pytest.raises(TypeError, match='shared must be a bool'):
        client.try_acquire_lock('key', shared='yes')
    assert local_engine.read_item('key') is None        # nothing written
    lock = client.acquire_lock('key', shared=True, retry_timeout=seconds(0))
    with pytest.raises(ValueError, match='guarded writes need an exclusive one'):
        lock.transact_write_items([])


# --- interruptions: a shared acquire cut short while its write is in flight ----------------------

@pytest.mark.threaded_only
def test_a_shared_acquire_cancelled_while_its_write_is_in_flight_leaves_no_entry(local_engine: LockTable) -> None:
    """asyncio: the task is cancelled while the join has landed but its answer is held back;
    the caller gets nothing and the entry is taken out again (the row, its only entry gone, is
    freed). Without the undo the entry would hold the key, shared, for a lease."""
    async def main() -> None:
        async with local_engine.async_lock_client(clock=ManualClock(), background_heartbeats=False) as client:
            with FaultInjector(local_engine.resource) as faults:
                late = faults.add_latency('UpdateItem', 3600, times=1, after_sending=True)
                task = asyncio.ensure_future(client.acquire_lock('key', shared=True))
                await eventually(lambda: late.hits == 1, 'the answer to be held back')
                assert local_engine.read_item('key')['shared_holders']      # it landed
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task
                assert await client.wait_settled(REAL_TIMEOUT)
            assert client.held_locks() == []
            row = local_engine.read_item('key')
            assert row.get('released_at') is not None and 'shared_holders' not in row, row

    run(main())


@pytest.mark.threaded_only
def test_a_shared_acquire_cancel_set_while_its_write_is_held_back_takes_the_entry_out_once_it_lands(
        local_engine: LockTable) -> None:
    """threaded ``cancel=``: the event is set while the join is held back before it is sent; the
    caller returns ``ACQUIRE_CANCELLED`` and the join, which lands later, is undone. Another
    shared holder is there, so the row stays shared, with only that holder's entry."""
    other = local_engine.lock_client(background_heartbeats=False, owner_name='other')
    kept = other.acquire_lock('key', shared=True, retry_timeout=seconds(0))
    before = local_engine.read_item('key')['record_version_number']
    client = local_engine.lock_client(background_heartbeats=False)
    cancel = threading.Event()

    hold_back = HoldBack()

    with FaultInjector(local_engine.resource) as faults:
        faults.before_call('UpdateItem', hold_back, when=joins_beside_others)
        acquiring = BackgroundCall(client.acquire_lock, 'key', shared=True, cancel=cancel)
        assert hold_back.sending.wait(REAL_TIMEOUT)
        cancel.set()
        error = acquiring.error()
        hold_back.let_go()
        # the join lands (the row's version moves), then the undo takes the entry out
        wait_until(lambda: local_engine.read_item('key')['record_version_number'] != before)
        assert client.wait_settled(REAL_TIMEOUT)
    assert isinstance(error, DynamoDBLockError) and error.code == DynamoDBLockError.ACQUIRE_CANCELLED
    assert list(local_engine.read_item('key')['shared_holders']) == [holder_id(kept)]
    assert client.held_locks() == []
    client.close()
    other.close()


def test_a_force_released_shared_row_loses_every_shared_holder(local_engine: Any, local_clients: LockClients) -> None:
    readers = [reader(local_clients, f'r{index}') for index in range(2)]
    locks = [client.acquire_lock('key', shared=True, retry_timeout=seconds(0)) for client in readers]
    operator = reader(local_clients, 'operator')
    assert operator.force_release_lock(operator.get_lock('key'))
    row = local_engine.read_item('key')
    assert row.get('released_at') is not None and 'shared_holders' not in row
    for client, lock in zip(readers, locks):
        client.send_heartbeats()
        assert lock.status == lock.INVALID


def test_a_release_never_hands_the_key_to_a_shared_waiter_of_the_same_client_as_an_exclusive_lock(
        local_engine: Any, local_clients: LockClients) -> None:
    client = reader(local_clients, 'one-client')
    exclusive = client.acquire_lock('key', retry_timeout=seconds(0))
    waiter = BackgroundCall(client.acquire_lock, 'key', shared=True, retry_period=seconds(seconds=1),
                            retry_timeout=seconds(hours=1))
    step(local_clients.clock, 0, client, threads=[waiter.thread])
    exclusive.release(best_effort=False)       # wakes the waiter, which joins by itself
    step(local_clients.clock, 1, client, threads=[waiter.thread])
    lock = waiter.result()
    assert lock.shared and list(local_engine.read_item('key')['shared_holders']) == [lock.holder_id]


@pytest.mark.threaded_only     # (acquire_first is written once, for both clients, in _core/first.py)
def test_acquire_first_lock_leaves_no_writer_marker_on_a_shared_key_it_does_not_take(
        local_engine: Any, local_clients: LockClients) -> None:
    readers, writer = reader(local_clients, 'reader'), reader(local_clients, 'writer')
    readers.acquire_lock('pool', 'slot-0', shared=True, retry_timeout=seconds(0))
    lock = writer.acquire_first_lock('pool', ['slot-0', 'slot-1'], retry_timeout=seconds(hours=1))
    assert lock.sort_key == 'slot-1'
    assert 'writer_waiting' not in local_engine.read_item('pool', 'slot-0')
    assert readers.try_acquire_lock('pool', 'slot-0', shared=True) is not None    # readers still join


@pytest.mark.parametrize('retry', [True, False], ids=['botocore-retries', 'read-timeout'])
def test_a_shared_acquire_whose_answer_was_lost_holds_its_entry(local_engine: Any, local_clients: LockClients,
                                                                retry: bool) -> None:
    """The join landed but its answer was lost: botocore's retry meets the entry (refused by it),
    or the call fails with a read timeout and a consistent read finds it. Either way the caller
    holds the lock, with the one entry that landed."""
    other = reader(local_clients, 'other')
    kept = other.acquire_lock('key', shared=True, retry_timeout=seconds(0))
    client = reader(local_clients, 'reader')
    with FaultInjector(local_engine.resource) as faults:
        lost = faults.lose_answers('UpdateItem', retry=retry, when=joins_beside_others)
        lock = client.acquire_lock('key', shared=True, retry_timeout=seconds(0))
    assert lost.hits == 1 and lock.shared and lock.status == lock.LOCKED
    assert sorted(local_engine.read_item('key')['shared_holders']) == sorted([kept.holder_id, lock.holder_id])


def joins_beside_others(params: Dict[str, Any]) -> bool:
    """A ``when`` filter: a shared join beside other holders (the join that lands)."""
    return is_acquire(params) and ':entry' in (params.get('ExpressionAttributeValues') or {})


def test_the_rows_lease_is_at_least_every_shared_holders(local_engine: Any, local_clients: LockClients) -> None:
    short = local_clients.make(owner_name='short', **PERIODS)
    long = local_clients.make(owner_name='long', **{**PERIODS, 'lease_duration': seconds(seconds=6)})
    first = short.acquire_lock('key', shared=True, retry_timeout=seconds(0))
    assert local_engine.read_item('key')['lease_duration'] == LEASE
    long.acquire_lock('key', shared=True, retry_timeout=seconds(0))
    assert local_engine.read_item('key')['lease_duration'] == 6          # raised by the longer lease
    short.acquire_lock('key', shared=True, retry_timeout=seconds(0))
    assert local_engine.read_item('key')['lease_duration'] == 6          # never lowered while shared
    first.release(best_effort=False)
    assert local_engine.read_item('key')['lease_duration'] == 6


@pytest.mark.threaded_only
def test_a_writer_cancelled_while_it_waits_for_shared_holders_takes_its_marker_off(
        local_engine: Any, local_clients: LockClients) -> None:
    first, late, writer = reader(local_clients, 'first'), reader(local_clients, 'late'), reader(local_clients, 'w')
    first.acquire_lock('key', shared=True, retry_timeout=seconds(0))
    cancel = threading.Event()
    waiter = BackgroundCall(writer.acquire_lock, 'key', retry_period=seconds(seconds=1),
                            retry_timeout=seconds(hours=1), cancel=cancel)
    step(local_clients.clock, 0, writer, threads=[waiter.thread])
    assert 'writer_waiting' in local_engine.read_item('key')
    cancel.set()
    error = waiter.error()
    assert isinstance(error, DynamoDBLockError) and error.code == DynamoDBLockError.ACQUIRE_CANCELLED
    assert writer.wait_settled(REAL_TIMEOUT)
    assert 'writer_waiting' not in local_engine.read_item('key')
    assert late.try_acquire_lock('key', shared=True) is not None      # readers join again at once


def test_a_client_that_joined_other_holders_joins_with_one_write_next_time(local_engine: Any,
                                                                           local_clients: LockClients) -> None:
    other, client = reader(local_clients, 'other'), reader(local_clients, 'reader')
    kept = other.acquire_lock('key', shared=True, retry_timeout=seconds(0))
    with CallRecorder(local_engine.resource) as calls:
        client.acquire_lock('key', shared=True, retry_timeout=seconds(0)).release(best_effort=False)
        first = [call.action for call in calls.of('UpdateItem')]
        calls.clear()
        lock = client.acquire_lock('key', shared=True, retry_timeout=seconds(0))
        again = [call.action for call in calls.of('UpdateItem')]
    assert first == ['acquire', 'acquire', 'release']     # guessed free, refused; then joined
    assert again == ['acquire']                            # guessed beside others: one write
    lock.release(best_effort=False)
    kept.release(best_effort=False)
    lock = client.acquire_lock('key', shared=True, retry_timeout=seconds(0))     # a wrong guess: the key is free
    assert lock.shared and list(local_engine.read_item('key')['shared_holders']) == [lock.holder_id]
