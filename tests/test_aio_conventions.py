"""The asyncio client behaves like asyncio: releases are coroutine functions (``create_task``,
``iscoroutinefunction``, ``AsyncMock(spec=...)`` see what they expect), a release that has started
completes when its awaiting task is cancelled, and warnings name the public calls.
"""
from __future__ import annotations

import asyncio
import gc
import inspect
import warnings
from typing import Any, List
from unittest.mock import AsyncMock

import pytest

from python_dynamodb_lock.aio import AsyncDynamoDBLock, AsyncDynamoDBLockClient, AsyncDynamoDBMultiLock
from python_dynamodb_lock.testing import FaultInjector, LockTable, is_release

REAL_TIMEOUT = 60.0


def run(coroutine: Any) -> Any:
    async def guarded() -> Any:
        return await asyncio.wait_for(coroutine, REAL_TIMEOUT)

    return asyncio.run(guarded())


@pytest.mark.parametrize('function', [AsyncDynamoDBLock.release, AsyncDynamoDBLockClient.release_lock,
                                      AsyncDynamoDBMultiLock.release], ids=lambda function: function.__qualname__)
def test_releases_are_coroutine_functions(function: Any) -> None:
    assert inspect.iscoroutinefunction(function)


def test_async_mocks_of_the_locks_have_awaitable_releases() -> None:
    async def main() -> None:
        for spec in (AsyncDynamoDBLock, AsyncDynamoDBMultiLock):
            mock = AsyncMock(spec=spec)
            assert isinstance(mock.release, AsyncMock)
            await mock.release(best_effort=False)
            mock.release.assert_awaited_once_with(best_effort=False)
        client = AsyncMock(spec=AsyncDynamoDBLockClient)
        assert isinstance(client.release_lock, AsyncMock)

    run(main())


def test_releases_can_be_scheduled_as_tasks(local_engine: LockTable) -> None:
    async def main() -> None:
        async with local_engine.async_lock_client(background_heartbeats=False) as client:
            lock = await client.acquire_lock('task')
            assert await asyncio.create_task(lock.release()) is True
            again = await client.acquire_lock('task')
            assert await asyncio.create_task(client.release_lock(again, best_effort=False)) is True
            multi = await client.acquire_locks(['m1', 'm2'])
            assert await asyncio.create_task(multi.release()) is True
            assert client.held_locks() == []

    run(main())
    for key in ('task', 'm1', 'm2'):
        assert local_engine.read_held_row(key) is None


def _hold_back(faults: FaultInjector, operation: str, started: asyncio.Event, go: asyncio.Event, **kwargs: Any) -> Any:
    """The next ``operation`` call waits, once it is about to be sent, until ``go`` is set."""
    async def wait_for_go(params: Any) -> None:
        started.set()
        await go.wait()

    return faults.before_call(operation, wait_for_go, **kwargs)


@pytest.mark.parametrize('what', ['lock.release', 'client.release_lock', 'multi.release'])
def test_a_release_cancelled_midway_still_frees_the_row(local_engine: LockTable, what: str) -> None:
    """The awaiting task is cancelled while the release's write is held back: the release goes
    on by itself, and ``wait_settled`` returns once the row is free."""
    keys: List[str] = ['c1', 'c2'] if what == 'multi.release' else ['c1']

    async def main() -> None:
        async with local_engine.async_lock_client(background_heartbeats=False) as client:
            if what == 'multi.release':
                held: Any = await client.acquire_locks(keys)
                releasing = held.release(best_effort=False)
                operation, when = 'TransactWriteItems', None
            else:
                held = await client.acquire_lock('c1')
                releasing = held.release() if what == 'lock.release' else client.release_lock(held)
                operation, when = 'UpdateItem', is_release
            started, go = asyncio.Event(), asyncio.Event()
            with FaultInjector(local_engine.resource) as faults:
                _hold_back(faults, operation, started, go, when=when)
                task = asyncio.create_task(releasing)
                await started.wait()                  # the release's write is about to be sent
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task
                for key in keys:                      # nothing written yet
                    assert local_engine.read_held_row(key) is not None
                go.set()
                assert await client.wait_settled(REAL_TIMEOUT)
            locks = held.locks if what == 'multi.release' else (held,)
            assert all(lock.status == 'RELEASED' for lock in locks)
            assert client.held_locks() == []

    run(main())
    for key in keys:
        assert local_engine.read_held_row(key) is None


def _never_awaited(call: Any) -> List[str]:
    """The RuntimeWarnings of dropping ``call()``'s awaitable without awaiting it."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        call()
        gc.collect()
    return [str(warning.message) for warning in caught if issubclass(warning.category, RuntimeWarning)]


def test_a_never_awaited_call_is_named_by_its_public_name(local_engine: LockTable) -> None:
    async def main() -> None:
        async with local_engine.async_lock_client(background_heartbeats=False) as client:
            assert _never_awaited(lambda: client.acquire_lock('dropped')) == [
                "coroutine 'AsyncDynamoDBLockClient.acquire_lock' was never awaited"]
            assert _never_awaited(lambda: client.acquire_locks(['d1', 'd2'])) == [
                "coroutine 'AsyncDynamoDBLockClient.acquire_locks' was never awaited"]
            lock = await client.acquire_lock('held')
            assert _never_awaited(lambda: lock.release()) == [
                "coroutine 'AsyncDynamoDBLock.release' was never awaited"]
            # A release that is never awaited does nothing: the lock is still held.
            assert lock.status == 'LOCKED' and client.held_locks() == [lock]
            assert local_engine.read_held_row('held') is not None
            assert await lock.release() is True

    run(main())
    assert local_engine.read_item('dropped') is None


def test_every_public_coroutine_is_named_by_its_public_name_when_never_awaited(local_engine: LockTable) -> None:
    """Each call of the asyncio faces that returns a coroutine, dropped unawaited, is named in
    asyncio's warning by the class and method a user called (none by an internal helper)."""
    async def main() -> None:
        async with local_engine.async_lock_client(background_heartbeats=False) as client:
            lock = await client.acquire_lock('held')
            multi = await client.acquire_locks(['m1', 'm2'])
            calls = {
                'AsyncDynamoDBLockClient.try_acquire_lock': lambda: client.try_acquire_lock('d'),
                'AsyncDynamoDBLockClient.try_acquire_locks': lambda: client.try_acquire_locks(['d1', 'd2']),
                'AsyncDynamoDBLockClient.acquire_first_lock': lambda: client.acquire_first_lock('pool', ['a', 'b']),
                'AsyncDynamoDBLockClient.get_lock': lambda: client.get_lock('held'),
                'AsyncDynamoDBLockClient.release_lock': lambda: client.release_lock(lock),
                'AsyncDynamoDBLockClient.force_release_lock': lambda: client.force_release_lock(lock),
                'AsyncDynamoDBLockClient.send_heartbeats': lambda: client.send_heartbeats(),
                'AsyncDynamoDBLock.extend': lambda: lock.extend(),
                'AsyncDynamoDBMultiLock.release': lambda: multi.release(),
            }
            for name, call in calls.items():
                assert _never_awaited(call) == [f"coroutine '{name}' was never awaited"], name
            assert lock.status == 'LOCKED' and all(held.status == 'LOCKED' for held in multi.locks)
            assert await multi.release() is True and await lock.release() is True

    run(main())
    for key in ('d', 'd1', 'd2'):                    # nothing was acquired
        assert local_engine.read_item(key) is None
    for sort_key in ('a', 'b'):
        assert local_engine.read_item('pool', sort_key) is None
