"""What only the asyncio client has: ``async with``, cancellation, coroutine callbacks, the loop.

The behavioural suite runs against this client too (behind ``aio_facade.BlockingAsyncClient``);
these tests use it directly, in coroutines, as an asyncio application does. Each test runs its
coroutine with ``asyncio.run``; time-dependent ones drive a ManualClock. "moto" here is the
serialised moto server (moto in-process does not serve aiobotocore); what needs DynamoDB
Local's atomic writes or PartiQL runs there only.
"""
from __future__ import annotations

import asyncio
import collections.abc
import datetime
import threading
from typing import Any, Awaitable, Callable, List, Optional, TypeVar

import pytest

from helpers import ASYNCIO, CallbackRecorder, CallRecorder, FaultInjector, ManualClock
from python_dynamodb_lock.aio import AsyncDynamoDBLock, AsyncDynamoDBLockClient
from python_dynamodb_lock.python_dynamodb_lock import DynamoDBLock, DynamoDBLockClient, DynamoDBLockError
from python_dynamodb_lock.testing import LockTable

seconds = datetime.timedelta
T = TypeVar('T')
STOLEN = DynamoDBLockError.LOCK_STOLEN
IN_DANGER = DynamoDBLockError.LOCK_IN_DANGER
REAL_TIMEOUT = 20.0


@pytest.fixture
def client_kind() -> str:
    """These tests are about the asyncio client: ``engine``'s "moto" is the moto server."""
    return ASYNCIO


def run(coroutine: Awaitable[T]) -> T:
    """Run a test's coroutine on a fresh event loop; a hang fails after REAL_TIMEOUT seconds."""
    async def guarded() -> T:
        return await asyncio.wait_for(coroutine, REAL_TIMEOUT)

    return asyncio.run(guarded())


async def eventually(predicate: Callable[[], bool], what: str) -> None:
    """Yield to the loop until ``predicate()`` holds (real time, REAL_TIMEOUT at most)."""
    deadline = asyncio.get_running_loop().time() + REAL_TIMEOUT
    while not predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f'gave up waiting for {what}')
        await asyncio.sleep(0.001)


async def read_item(table: LockTable, key: str) -> Optional[dict]:
    """The row, read by the test's boto3 client in a worker thread (the loop goes on)."""
    return await asyncio.to_thread(table.read_item, key)


async def assert_released_row(table: LockTable, key: str, lock: Optional[AsyncDynamoDBLock] = None) -> None:
    """The key is free: its row is kept only as a released one (``released_at``, lease 0, no
    acquisition id), holding no lock, with ``lock``'s fencing token when given."""
    row = await read_item(table, key)
    assert row is not None and 'released_at' in row and row['lease_duration'] == 0, row
    assert 'acquisition_id' not in row
    assert await asyncio.to_thread(table.read_held_row, key) is None
    if lock is not None:
        assert row['fencing_token'] == lock.fencing_token


def is_release(body: dict) -> bool:
    """Whether a decoded UpdateItem request is a release (it marks the row released)."""
    return ':released_at' in body.get('ExpressionAttributeValues', {})


# --- async with --------------------------------------------------------------------------------

def test_async_with_holds_the_lock_for_the_block_and_releases_it(engine: LockTable) -> None:
    async def main() -> None:
        async with engine.async_lock_client(clock=ManualClock(), background_heartbeats=False) as client:
            with CallRecorder(engine.resource) as calls:
                async with client.acquire_lock('block', additional_attributes={'job': 'x'}) as lock:
                    assert isinstance(lock, AsyncDynamoDBLock)
                    assert lock.status == DynamoDBLock.LOCKED
                    assert client.held_locks() == [lock]
                    row = await read_item(engine, 'block')
                    assert row is not None and row['record_version_number'] == lock.record_version_number
                    assert row['job'] == 'x' and row['fencing_token'] == lock.fencing_token
            assert calls.operations() == ['UpdateItem', 'UpdateItem']    # acquire, release
            assert not is_release(calls.calls[0].params) and is_release(calls.calls[1].params)
            assert lock.status == DynamoDBLock.RELEASED
            assert client.held_locks() == []
            await assert_released_row(engine, 'block', lock)
            assert 'job' not in (await read_item(engine, 'block'))      # the additional attributes go
            awaited = await client.acquire_lock('block')        # the plain await form
            await awaited.release(best_effort=False)
            assert awaited.status == DynamoDBLock.RELEASED

    run(main())


def test_a_task_cancelled_inside_the_block_releases_the_lock(engine: LockTable) -> None:
    async def main() -> None:
        async with engine.async_lock_client(clock=ManualClock(), background_heartbeats=False) as client:
            entered = asyncio.Event()
            held: List[AsyncDynamoDBLock] = []

            async def worker() -> None:
                async with client.acquire_lock('cancelled-inside') as lock:
                    held.append(lock)
                    entered.set()
                    await asyncio.Event().wait()          # works until cancelled

            task = asyncio.create_task(worker())
            await entered.wait()
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert held[0].status == DynamoDBLock.RELEASED
            await assert_released_row(engine, 'cancelled-inside', held[0])
            assert client.held_locks() == []

    run(main())


def test_a_release_cancelled_again_still_completes(engine: LockTable) -> None:
    """Cancelled inside the block, and again while its release is in flight: the task ends at
    once, and the (shielded) release still marks the row released."""
    async def main() -> None:
        async with engine.async_lock_client(clock=ManualClock(), background_heartbeats=False) as client:
            entered = asyncio.Event()
            held: List[AsyncDynamoDBLock] = []

            async def worker() -> None:
                async with client.acquire_lock('cancelled-twice') as lock:
                    held.append(lock)
                    entered.set()
                    await asyncio.Event().wait()

            task = asyncio.create_task(worker())

            async def cancel_again(params: Any) -> None:
                task.cancel()                         # while the release's delete is being sent
                await asyncio.sleep(0)

            with FaultInjector(engine.resource) as faults:
                again = faults.before_call('UpdateItem', cancel_again, when=is_release)
                await entered.wait()
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task
                await eventually(lambda: held[0].status == DynamoDBLock.RELEASED, 'the shielded release')
            assert again.hits == 1
            await assert_released_row(engine, 'cancelled-twice', held[0])

    run(main())


# --- cancelling an acquire -----------------------------------------------------------------------

@pytest.mark.parametrize('when', ['before-sending', 'after-landing'])
def test_a_cancelled_acquire_leaves_no_row_behind(local_engine: LockTable, when: str) -> None:
    """A task acquiring a lock is cancelled while its acquiring write is in flight (latency
    injected): before the write was sent, or after it landed while its answer is late. Either
    way the client holds nothing afterwards and leaves no held row behind: a write that never
    went out leaves no row at all; one that landed is marked released (keeping its fencing
    token, so the next acquisition's is larger)."""
    async def main() -> None:
        async with local_engine.async_lock_client(clock=ManualClock(), background_heartbeats=False) as client:
            with FaultInjector(local_engine.resource) as faults, CallRecorder(local_engine.resource) as calls:
                delayed = faults.add_latency('UpdateItem', 3600, times=1, after_sending=(when == 'after-landing'))
                task = asyncio.ensure_future(client.acquire_lock('cancelled-acquire'))
                await eventually(lambda: delayed.hits == 1, 'the put (or its answer) to be held back')
                landed = await read_item(local_engine, 'cancelled-acquire')
                assert (landed is not None) == (when == 'after-landing')
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task
            assert delayed.hits == 1
            assert calls.operations()[0] == 'UpdateItem' and not is_release(calls.calls[0].params)
            assert client.held_locks() == []
            if landed is None:
                assert await read_item(local_engine, 'cancelled-acquire') is None
            else:
                await assert_released_row(local_engine, 'cancelled-acquire')
            lock = await client.acquire_lock('cancelled-acquire', retry_timeout=seconds(0))   # free again
            assert lock.status == DynamoDBLock.LOCKED
            if landed is not None:
                assert lock.fencing_token == landed['fencing_token'] + 1

    run(main())


def test_a_cancelled_wait_for_a_held_lock_writes_nothing(engine: LockTable) -> None:
    async def main() -> None:
        clock = ManualClock()
        engine.put_lock_row('held-elsewhere', owner_name='someone-else')
        async with engine.async_lock_client(clock=clock, background_heartbeats=False) as client:
            with CallRecorder(engine.resource) as calls:
                task = asyncio.ensure_future(client.acquire_lock('held-elsewhere', retry_timeout=seconds(hours=1)))
                await eventually(lambda: calls.count('UpdateItem') == 1 and clock.is_idle(task), 'the waiter to sleep')
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task
            assert [call.operation for call in calls.writes()] == ['UpdateItem']   # the refused first write only
            row = await read_item(engine, 'held-elsewhere')
            assert row is not None and row['owner_name'] == 'someone-else'
            assert client.held_locks() == []

    run(main())


# --- callbacks -------------------------------------------------------------------------------------

def test_coroutine_callbacks_run_as_tasks_on_the_loop(engine: LockTable) -> None:
    async def main() -> None:
        clock = ManualClock()
        loop = asyncio.get_running_loop()
        calls: List[Any] = []
        called = asyncio.Event()

        async def on_event(code: str, lock: AsyncDynamoDBLock) -> None:
            calls.append((code, lock, asyncio.get_running_loop() is loop, asyncio.current_task()))
            called.set()

        async with engine.async_lock_client(clock=clock, background_heartbeats=False) as client:
            stolen = await client.acquire_lock('coroutine-stolen', app_callback=on_event)
            danger = await client.acquire_lock('coroutine-danger', app_callback=on_event)
            engine.steal_row('coroutine-stolen')
            await client.send_heartbeats([stolen])
            await asyncio.wait_for(called.wait(), REAL_TIMEOUT)
            clock.advance(21)
            client.check_locks()
            await eventually(lambda: len(calls) == 2, 'the danger callback')
            assert (stolen.status, danger.status) == (DynamoDBLock.INVALID, DynamoDBLock.IN_DANGER)
        assert [(code, lock) for code, lock, _, _ in calls] == [(STOLEN, stolen), (IN_DANGER, danger)]
        assert all(on_loop and task is not None for _, _, on_loop, task in calls)

    run(main())


def test_plain_callbacks_run_on_the_executor_not_on_the_loop(engine: LockTable) -> None:
    async def main() -> None:
        callback = CallbackRecorder()
        async with engine.async_lock_client(clock=ManualClock(), background_heartbeats=False) as client:
            lock = await client.acquire_lock('plain-stolen', app_callback=callback)
            engine.steal_row('plain-stolen')
            await client.send_heartbeats([lock])
            assert lock.status == DynamoDBLock.INVALID
            assert await asyncio.to_thread(callback.called.wait, REAL_TIMEOUT)
        assert [(call.code, call.lock) for call in callback.calls] == [(STOLEN, lock)]
        assert callback.calls[0].thread.startswith('AsyncDynamoDBLockClient-callback')
        assert callback.calls[0].task is None

    run(main())


def test_a_plain_callback_returning_an_awaitable_is_awaited_on_the_loop(engine: LockTable) -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        seen: List[bool] = []
        done = threading.Event()

        async def follow_up(code: str) -> None:
            seen.append(asyncio.get_running_loop() is loop)
            done.set()

        def on_event(code: str, lock: AsyncDynamoDBLock) -> Awaitable[None]:
            return follow_up(code)

        async with engine.async_lock_client(clock=ManualClock(), background_heartbeats=False) as client:
            lock = await client.acquire_lock('returns-awaitable', app_callback=on_event)
            engine.steal_row('returns-awaitable')
            await client.send_heartbeats([lock])
            assert await asyncio.to_thread(done.wait, REAL_TIMEOUT)
        assert seen == [True]

    run(main())


def test_a_raising_coroutine_callback_is_logged(engine: LockTable, caplog: pytest.LogCaptureFixture) -> None:
    async def main() -> None:
        async def fails(code: str, lock: AsyncDynamoDBLock) -> None:
            raise RuntimeError(f'callback failed on {code}')

        async with engine.async_lock_client(clock=ManualClock(), background_heartbeats=False) as client:
            lock = await client.acquire_lock('raising-coroutine', app_callback=fails)
            engine.steal_row('raising-coroutine')
            await client.send_heartbeats([lock])
            await eventually(lambda: any(record.exc_info and isinstance(record.exc_info[1], RuntimeError)
                                         for record in caplog.records), 'the logged failure')
            other = await client.acquire_lock('still-works', retry_timeout=seconds(0))
            await other.release(best_effort=False)

    caplog.set_level('ERROR', logger='python_dynamodb_lock')
    run(main())


# --- close -----------------------------------------------------------------------------------------

def test_close_with_release_locks_releases_every_row_and_stops_the_tasks(engine: LockTable) -> None:
    async def main() -> None:
        clock = ManualClock()
        async with engine.async_lock_client(clock=clock) as client:
            background = list(client.background_tasks)
            assert [task.get_name() for task in background] == [
                'AsyncDynamoDBLockClient-heartbeat-sender', 'AsyncDynamoDBLockClient-heartbeat-checker']
            locks = [await client.acquire_lock(f'closing-{index}') for index in range(3)]
            with CallRecorder(engine.resource) as calls:
                await client.close(release_locks=True)
            assert calls.operations() == ['UpdateItem'] * 3
            assert all(is_release(call.params) for call in calls.calls)
            assert all(task.done() for task in background)
            assert all(lock.status == DynamoDBLock.RELEASED for lock in locks)
            for index in range(3):
                await assert_released_row(engine, f'closing-{index}', locks[index])
            await client.close()                                  # a second close is a no-op
            with pytest.raises(DynamoDBLockError) as raised:
                await client.acquire_lock('after-close')
            assert raised.value.code == DynamoDBLockError.CLIENT_SHUTDOWN

    run(main())


def test_close_without_release_keeps_the_rows(engine: LockTable) -> None:
    async def main() -> None:
        async with engine.async_lock_client(clock=ManualClock()) as client:
            lock = await client.acquire_lock('kept-at-close')
            await client.close()
            row = await read_item(engine, 'kept-at-close')
            assert row is not None and row['record_version_number'] == lock.record_version_number
            await lock.release(best_effort=False)                 # releasing after close still works
            await assert_released_row(engine, 'kept-at-close', lock)

    run(main())


# --- batched heartbeats ------------------------------------------------------------------------------

def test_batched_heartbeats_renew_up_to_25_locks_per_call(local_engine: LockTable) -> None:
    async def main() -> None:
        async with local_engine.async_lock_client(clock=ManualClock(), background_heartbeats=False,
                                                  heartbeat_batch_size=25) as client:
            locks = [await client.acquire_lock(f'batched-{index}') for index in range(30)]
            old_versions = [lock.record_version_number for lock in locks]
            with CallRecorder(local_engine.resource) as calls:
                await client.send_heartbeats()
            assert calls.operations() == ['BatchExecuteStatement', 'BatchExecuteStatement']
            assert sorted(len(call.params['Statements']) for call in calls.calls) == [5, 25]
            for lock, old_version in zip(locks, old_versions):
                row = await read_item(local_engine, lock.partition_key)
                assert lock.status == DynamoDBLock.LOCKED and lock.record_version_number != old_version
                assert row is not None and row['record_version_number'] == lock.record_version_number

    run(main())


def test_background_heartbeats_go_out_in_batches(local_engine: LockTable) -> None:
    async def main() -> None:
        clock = ManualClock()
        async with local_engine.async_lock_client(clock=clock, heartbeat_batch_size=4,
                                                  heartbeat_period=seconds(seconds=8)) as client:
            def settled() -> bool:
                return all(clock.is_idle(task) for task in client.background_tasks) and not client.heartbeats_in_flight

            locks = [await client.acquire_lock(f'round-{index}') for index in range(8)]
            with CallRecorder(local_engine.resource, clock) as calls:
                for _ in range(16):                    # a fake second at a time, settling in between
                    await eventually(settled, 'the tasks to settle')
                    clock.advance(1)
                await eventually(settled, 'the tasks to settle')
            assert len(calls.calls) >= 2
            assert set(calls.operations()) == {'BatchExecuteStatement'}
            assert [len(call.params['Statements']) for call in calls.calls] == [4] * len(calls.calls)
            for lock in locks:
                row = await read_item(local_engine, lock.partition_key)
                assert lock.status == DynamoDBLock.LOCKED
                assert row is not None and row['record_version_number'] == lock.record_version_number

    run(main())


# --- the loop, the table, the other client ----------------------------------------------------------

def test_created_outside_a_running_loop_is_an_error(engine: LockTable) -> None:
    async def make_client() -> Any:
        async with engine.new_async_client() as dynamodb:
            return dynamodb

    dynamodb = run(make_client())
    with pytest.raises(RuntimeError, match='running event loop'):
        AsyncDynamoDBLockClient(dynamodb, table_name=engine.table_name)


def test_the_asyncio_client_takes_an_aiobotocore_client(engine: LockTable) -> None:
    async def main() -> None:
        for wrong in (engine.resource, engine.client, None):
            with pytest.raises(TypeError, match='aiobotocore'):
                AsyncDynamoDBLockClient(wrong, table_name=engine.table_name)

    run(main())


def test_create_dynamodb_table_with_an_aiobotocore_client(engine: LockTable) -> None:
    name = f'{engine.table_name}-aio'

    async def main() -> None:
        async with engine.new_async_client() as dynamodb:
            description = await AsyncDynamoDBLockClient.create_dynamodb_table(
                dynamodb, table_name=name, billing_mode='PAY_PER_REQUEST')
            assert description['TableStatus'] == 'ACTIVE'
            assert {key['AttributeName']: key['KeyType'] for key in description['KeySchema']} == \
                {'lock_key': 'HASH', 'sort_key': 'RANGE'}
            ttl = await dynamodb.describe_time_to_live(TableName=name)
            assert ttl['TimeToLiveDescription']['AttributeName'] == 'expiry_time'
            with pytest.raises(DynamoDBLockError) as exists:
                await AsyncDynamoDBLockClient.create_dynamodb_table(dynamodb, table_name=name)
            assert exists.value.code == DynamoDBLockError.UNKNOWN and 'exist_ok' in exists.value.message
            again = await AsyncDynamoDBLockClient.create_dynamodb_table(dynamodb, table_name=name, exist_ok=True)
            assert again['TableName'] == name
            with pytest.raises(TypeError, match='aiobotocore'):
                await AsyncDynamoDBLockClient.create_dynamodb_table(engine.client, table_name=name)
            lock_client = AsyncDynamoDBLockClient(dynamodb, table_name=name, background_heartbeats=False)
            try:
                lock = await lock_client.acquire_lock('in-the-new-table')
                assert lock.status == DynamoDBLock.LOCKED
            finally:
                await lock_client.close(release_locks=True)

    try:
        run(main())
    finally:
        engine.client.delete_table(TableName=name)


def test_both_clients_exclude_each_other_on_one_table(local_engine: LockTable) -> None:
    threaded = DynamoDBLockClient(local_engine.new_resource(), table_name=local_engine.table_name,
                                  background_heartbeats=False)

    async def main() -> None:
        async with local_engine.async_lock_client(background_heartbeats=False) as client:
            held = await asyncio.to_thread(threaded.acquire_lock, 'shared')
            assert await client.try_acquire_lock('shared') is None
            await asyncio.to_thread(held.release, False)
            mine = await client.acquire_lock('shared', retry_timeout=seconds(0))
            assert await asyncio.to_thread(threaded.try_acquire_lock, 'shared') is None
            await mine.release(best_effort=False)
            theirs = await asyncio.to_thread(threaded.acquire_lock, 'shared', retry_timeout=seconds(0))
            assert theirs.status == DynamoDBLock.LOCKED

    try:
        run(main())
    finally:
        threaded.close(release_locks=True)


# --- acquire_lock() is a coroutine -------------------------------------------------------------

def test_acquire_lock_can_be_scheduled_with_create_task(engine: LockTable) -> None:
    """``acquire_lock()`` returns a real coroutine (a ``collections.abc.Coroutine`` delegating
    to the acquisition's own, as aiohttp's request context managers do): ``create_task`` takes
    it, a task made from it can be cancelled while it waits, and closing one never awaited
    writes nothing. It was an awaitable only, and ``create_task`` raised TypeError."""
    async def main() -> None:
        clock = ManualClock()
        async with engine.async_lock_client(clock=clock, background_heartbeats=False) as client:
            acquisition = client.acquire_lock('scheduled')
            assert isinstance(acquisition, collections.abc.Coroutine) and asyncio.iscoroutine(acquisition)
            task = asyncio.create_task(acquisition)
            lock = await task
            assert isinstance(lock, AsyncDynamoDBLock) and lock.status == DynamoDBLock.LOCKED
            assert client.held_locks() == [lock]
            row = await read_item(engine, 'scheduled')
            assert row is not None and row['record_version_number'] == lock.record_version_number
            with pytest.raises(RuntimeError, match='cannot reuse already awaited coroutine'):
                await acquisition                              # used once, like any coroutine

            # A task waiting for a held lock is cancelled through the coroutine's throw().
            with CallRecorder(engine.resource) as calls:
                waiting = asyncio.create_task(client.acquire_lock('scheduled', retry_timeout=seconds(hours=1)))
                await eventually(lambda: calls.count('UpdateItem') == 1 and clock.is_idle(waiting),
                                 'the waiter to sleep')
                waiting.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await waiting
            assert [call.operation for call in calls.writes()] == ['UpdateItem']   # its refused write only
            assert client.held_locks() == [lock] and lock.status == DynamoDBLock.LOCKED

            # Never awaited, closed: nothing is sent (and no "never awaited" warning is due).
            with CallRecorder(engine.resource) as calls:
                unused = client.acquire_lock('never-awaited')
                unused.close()
            assert calls.calls == [] and await read_item(engine, 'never-awaited') is None

            await lock.release(best_effort=False)
            async with client.acquire_lock('scheduled', retry_timeout=seconds(0)) as again:   # still a context manager
                assert again.status == DynamoDBLock.LOCKED and again.fencing_token == lock.fencing_token + 1
            assert again.status == DynamoDBLock.RELEASED

    run(main())
