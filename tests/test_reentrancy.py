"""``acquire_lock(..., reentrant=True)``: per thread (threaded client) or per task (asyncio).

The thread (or task) that holds a lock gets it again, with one more hold and nothing written;
the row is released when the last hold is released. Another thread of the same client still
waits, as with ``threading.RLock``, and gets the lock when the last hold is released (on
DynamoDB Local, where conditional writes exclude each other).
"""
from __future__ import annotations

import asyncio
import datetime
import threading
from typing import Any, Iterator, List

import pytest
from helpers import BackgroundCall, CallRecorder, LockClients, ManualClock, settle

from python_dynamodb_lock.aio import AsyncDynamoDBLock
from python_dynamodb_lock.python_dynamodb_lock import DynamoDBLock, DynamoDBLockError
from python_dynamodb_lock.testing import LockTable, lock_table, unique_table_name

seconds = datetime.timedelta

pytestmark = pytest.mark.threaded_only     # the asyncio client's reentrancy is per task: tested below


def test_the_holding_thread_gets_the_same_lock_again_without_a_write(engine: LockTable,
                                                                     clients: LockClients) -> None:
    client = clients.make()
    outer = client.acquire_lock('job', reentrant=True)
    with CallRecorder(engine.resource) as calls:
        again = client.try_acquire_lock('job', reentrant=True)   # first: a regression fails here, not hangs
        assert again is outer
        inner = client.acquire_lock('job', reentrant=True)
    assert inner is outer
    assert calls.calls == []
    assert outer.holds == 3

    assert inner.release() is True           # one hold released; the lock is still held
    assert again.release() is True
    assert outer.status == DynamoDBLock.LOCKED
    assert engine.read_held_row('job') is not None
    assert client.held_locks() == [outer]
    assert outer.release() is True
    assert outer.status == DynamoDBLock.RELEASED
    assert engine.read_held_row('job') is None
    assert outer.release() is False          # one more: nothing to do
    assert client.held_locks() == []


def test_nested_with_blocks(engine: LockTable, clients: LockClients) -> None:
    client = clients.make()
    with client.acquire_lock('nested', reentrant=True, raise_context_exception=True) as outer:
        with client.acquire_lock('nested', reentrant=True, raise_context_exception=True,
                                 retry_timeout=seconds(0)) as inner:
            assert inner is outer
        assert outer.status == DynamoDBLock.LOCKED
        assert engine.read_held_row('nested') is not None
    assert outer.status == DynamoDBLock.RELEASED
    assert engine.read_held_row('nested') is None


def test_without_reentrant_the_holding_thread_waits_for_itself(engine: LockTable, clients: LockClients) -> None:
    client = clients.make()
    lock = client.acquire_lock('plain')
    assert client.try_acquire_lock('plain') is None
    with pytest.raises(DynamoDBLockError) as timed_out:
        with clients.clock.auto_advance_in_current_thread():
            client.acquire_lock('plain', retry_period=seconds(seconds=1), retry_timeout=seconds(seconds=3))
    assert timed_out.value.code == DynamoDBLockError.ACQUIRE_TIMEOUT
    # A lock acquired without reentrant=True is reentered by its thread all the same.
    assert client.try_acquire_lock('plain', reentrant=True) is lock
    lock.release()
    assert engine.read_held_row('plain') is not None
    lock.release()
    assert engine.read_held_row('plain') is None


def test_a_lost_lock_is_not_reentered(engine: LockTable, clients: LockClients) -> None:
    client = clients.make()
    lock = client.acquire_lock('lost', reentrant=True)
    engine.steal_row('lost', owner_name='thief')
    client.send_heartbeats()
    assert lock.status == DynamoDBLock.INVALID
    assert client.try_acquire_lock('lost', reentrant=True) is None


def test_a_strict_release_of_a_nested_hold_of_a_lost_lock_raises(engine: LockTable, clients: LockClients) -> None:
    client = clients.make()
    lock = client.acquire_lock('strict', reentrant=True)
    client.acquire_lock('strict', reentrant=True)
    engine.steal_row('strict', owner_name='thief')
    client.send_heartbeats()
    with pytest.raises(DynamoDBLockError) as stolen:
        lock.release(best_effort=False)
    assert stolen.value.code == DynamoDBLockError.LOCK_STOLEN
    assert lock.release() is False           # best effort: silent, and says the lock is not held
    assert engine.read_item('strict')['owner_name'] == 'thief'


def test_another_thread_reusing_a_finished_threads_identity_does_not_reenter(engine: LockTable,
                                                                            clients: LockClients) -> None:
    """A thread that ended still holding a lock: a later thread, even one that got the same
    thread identifier from the system, is another thread and does not get that lock."""
    client = clients.make()
    held: List[Any] = []
    first = threading.Thread(target=lambda: held.append(client.acquire_lock('orphan', reentrant=True)))
    first.start()
    first.join()
    reentered: List[Any] = []
    second = threading.Thread(target=lambda: reentered.append(client.try_acquire_lock('orphan', reentrant=True)))
    second.start()
    second.join()
    assert reentered == [None], f'first ident {first.ident}, second ident {second.ident}'
    assert held[0].status == DynamoDBLock.LOCKED
    held[0].release()


@pytest.fixture
def local_threads(local_engine: LockTable) -> Iterator[LockClients]:
    factory = LockClients(local_engine, ManualClock())
    yield factory
    factory.close_all()


def test_another_thread_of_the_client_waits_until_the_last_hold_is_released(local_engine: LockTable,
                                                                         local_threads: LockClients) -> None:
    clock = local_threads.clock
    client = local_threads.make()
    lock = client.acquire_lock('shared', reentrant=True)
    client.acquire_lock('shared', reentrant=True)
    other = BackgroundCall(client.acquire_lock, 'shared', reentrant=True, retry_period=seconds(seconds=1),
                           retry_timeout=seconds(seconds=600), name='other-thread')
    for _ in range(40):                      # well past the lease: the holder is alive (its row is renewed)
        settle(clock, threads=[other.thread])
        client.send_heartbeats()
        clock.advance(1)
    settle(clock, threads=[other.thread])
    assert not other.done
    lock.release()                           # one hold left: still held, the other thread still waits
    clock.advance(1)
    settle(clock, threads=[other.thread])
    assert not other.done and lock.status == DynamoDBLock.LOCKED
    lock.release()                           # the last hold: handed to the waiting thread
    taken = other.result()
    assert taken is not lock and taken.status == DynamoDBLock.LOCKED
    assert taken.fencing_token > lock.fencing_token
    assert lock.status == DynamoDBLock.RELEASED
    assert local_engine.read_item('shared')['record_version_number'] == taken.record_version_number
    taken.release()


# --------------------------------------------------------------------------------------------
# The asyncio client: per task
# --------------------------------------------------------------------------------------------

@pytest.fixture(params=['moto-server', pytest.param('local', marks=pytest.mark.local)])
def async_table(request: pytest.FixtureRequest) -> Iterator[LockTable]:
    engine = request.getfixturevalue('moto_server' if request.param == 'moto-server' else 'dynamodb_local')
    with lock_table(engine, unique_table_name(request.node.name)) as table:
        yield table


def test_the_holding_task_gets_the_same_lock_again(async_table: LockTable) -> None:
    async def scenario() -> None:
        async with async_table.async_lock_client(background_heartbeats=False, clock=ManualClock()) as client:
            outer = await client.acquire_lock('job', reentrant=True)
            with CallRecorder(async_table.resource) as calls:
                async with client.acquire_lock('job', reentrant=True) as inner:
                    assert inner is outer
                assert await client.try_acquire_lock('job', reentrant=True) is outer
            assert calls.calls == []
            assert await outer.release() is True        # the awaited result: one hold released
            assert outer.status == AsyncDynamoDBLock.LOCKED
            assert async_table.read_held_row('job') is not None
            assert await outer.release() is True        # the row released
            assert outer.status == AsyncDynamoDBLock.RELEASED
            assert async_table.read_held_row('job') is None
            assert await client.release_lock(outer) is False     # already released

    asyncio.run(scenario())


def test_another_task_waits_until_the_last_hold_is_released(async_table: LockTable) -> None:
    async def scenario() -> None:
        clock = ManualClock()
        async with async_table.async_lock_client(background_heartbeats=False, clock=clock) as client:
            lock = await client.acquire_lock('shared', reentrant=True)
            await client.acquire_lock('shared', reentrant=True)

            async def other_task() -> Any:
                return await client.acquire_lock('shared', reentrant=True, retry_period=seconds(seconds=1),
                                                 retry_timeout=seconds(seconds=600))

            other = asyncio.create_task(other_task())
            for _ in range(5):
                await asyncio.sleep(0.05)
                clock.advance(1)
            assert not other.done()
            await lock.release()
            await asyncio.sleep(0.05)
            assert not other.done() and lock.status == AsyncDynamoDBLock.LOCKED
            await lock.release()
            taken = await asyncio.wait_for(other, 20)
            assert taken is not lock and taken.fencing_token > lock.fencing_token
            await taken.release()

    asyncio.run(scenario())
