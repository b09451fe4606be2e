"""What happens to an exception raised in a lock's ``with`` / ``async with`` block.

The published threaded ``acquire_lock`` / ``try_acquire_lock`` keep the published default
(``raise_context_exception=False``: logged and suppressed). Every entry point without a published
counterpart propagates by default: ``acquire_locks``, ``try_acquire_locks`` and
``acquire_first_lock`` of both clients, the asyncio client's ``acquire_lock`` / ``try_acquire_lock``,
and the locks the recipes hand out. Either way the lock is released when the block ends, and
the parameter still chooses.
"""
from __future__ import annotations

import asyncio
import datetime
import inspect
import logging
from typing import Any, Callable, Dict

import pytest

from python_dynamodb_lock import Semaphore
from python_dynamodb_lock.aio import AsyncDynamoDBLockClient, AsyncSemaphore
from python_dynamodb_lock.python_dynamodb_lock import DynamoDBLockClient
from python_dynamodb_lock.testing import LockTable

seconds = datetime.timedelta
NOW = seconds(0)


class Boom(Exception):
    """Raised in the blocks."""


def free(table: LockTable, key: str, sort_key: str = '-') -> bool:
    return table.read_held_row(key, sort_key) is None


# --- the defaults, as the signatures say ----------------------------------------------------

@pytest.mark.parametrize('method, default', [
    (DynamoDBLockClient.acquire_lock, False),
    (DynamoDBLockClient.try_acquire_lock, False),
    (DynamoDBLockClient.acquire_first_lock, True),
    (DynamoDBLockClient.acquire_locks, True),
    (DynamoDBLockClient.try_acquire_locks, True),
    (AsyncDynamoDBLockClient.acquire_lock, True),
    (AsyncDynamoDBLockClient.try_acquire_lock, True),
    (AsyncDynamoDBLockClient.acquire_first_lock, True),
    (AsyncDynamoDBLockClient.acquire_locks, True),
    (AsyncDynamoDBLockClient.try_acquire_locks, True),
], ids=lambda value: getattr(value, '__qualname__', str(value)))
def test_only_the_published_entry_points_suppress_by_default(method: Callable[..., Any], default: bool) -> None:
    assert inspect.signature(method).parameters['raise_context_exception'].default is default


# --- the threaded client --------------------------------------------------------------------

THREADED_BLOCKS: Dict[str, Callable[..., Any]] = {
    'acquire_locks': lambda client, **kw: client.acquire_locks(['a', 'b'], retry_timeout=NOW, **kw),
    'try_acquire_locks': lambda client, **kw: client.try_acquire_locks(['a', 'b'], **kw),
    'acquire_first_lock': lambda client, **kw: client.acquire_first_lock('a', ['x', 'y'], retry_timeout=NOW, **kw),
}


@pytest.mark.parametrize('entry_point', sorted(THREADED_BLOCKS))
def test_threaded_entry_points_without_a_published_counterpart_propagate(engine: LockTable,
                                                                         entry_point: str) -> None:
    client = engine.lock_client(background_heartbeats=False)
    try:
        with pytest.raises(Boom):
            with THREADED_BLOCKS[entry_point](client):
                raise Boom('in the block')
        assert client.held_locks() == []
        assert free(engine, 'a') and free(engine, 'b') and free(engine, 'a', 'x')
    finally:
        client.close()


@pytest.mark.parametrize('entry_point', sorted(THREADED_BLOCKS))
def test_threaded_entry_points_still_suppress_when_asked(engine: LockTable, entry_point: str,
                                                         caplog: pytest.LogCaptureFixture) -> None:
    client = engine.lock_client(background_heartbeats=False)
    try:
        with caplog.at_level(logging.WARNING, logger='python_dynamodb_lock.python_dynamodb_lock'):
            with THREADED_BLOCKS[entry_point](client, raise_context_exception=False):
                raise Boom('suppressed, as asked')
        assert 'Suppressed an exception' in caplog.text
        assert client.held_locks() == []
    finally:
        client.close()


def test_the_published_acquire_lock_keeps_suppressing(engine: LockTable, caplog: pytest.LogCaptureFixture) -> None:
    client = engine.lock_client(background_heartbeats=False)
    try:
        with caplog.at_level(logging.WARNING, logger='python_dynamodb_lock.python_dynamodb_lock'):
            with client.acquire_lock('published'):
                raise Boom('suppressed: the published default')
            with client.try_acquire_lock('published'):
                raise Boom('suppressed: the published default')
        assert caplog.text.count('Suppressed an exception') == 2
        assert free(engine, 'published')
    finally:
        client.close()


def test_a_semaphore_permits_lock_propagates(engine: LockTable) -> None:
    client = engine.lock_client(background_heartbeats=False)
    try:
        semaphore = Semaphore(client, 'pool', 2)
        with pytest.raises(Boom):
            with semaphore as permit:
                with permit.lock:
                    raise Boom('in the slot lock block')
        assert client.held_locks() == []
    finally:
        client.close()


# --- the asyncio client ---------------------------------------------------------------------

def run(coroutine: Any) -> Any:
    async def guarded() -> Any:
        return await asyncio.wait_for(coroutine, 60)

    return asyncio.run(guarded())


ASYNC_BLOCKS: Dict[str, Callable[[Any], Any]] = {
    'acquire_lock': lambda client: client.acquire_lock('a'),
    'acquire_locks': lambda client: client.acquire_locks(['a', 'b'], retry_timeout=NOW),
}
ASYNC_AWAITED: Dict[str, Callable[[Any], Any]] = {
    'try_acquire_lock': lambda client: client.try_acquire_lock('a'),
    'try_acquire_locks': lambda client: client.try_acquire_locks(['a', 'b']),
    'acquire_first_lock': lambda client: client.acquire_first_lock('a', ['x', 'y'], retry_timeout=NOW),
    'acquire_lock (awaited)': lambda client: client.acquire_lock('a'),
}


@pytest.mark.parametrize('entry_point', sorted(ASYNC_BLOCKS) + sorted(ASYNC_AWAITED))
def test_asyncio_entry_points_propagate(local_engine: LockTable, entry_point: str) -> None:
    async def main() -> None:
        async with local_engine.async_lock_client(background_heartbeats=False) as client:
            with pytest.raises(Boom):
                if entry_point in ASYNC_BLOCKS:
                    async with ASYNC_BLOCKS[entry_point](client):
                        raise Boom('in the block')
                else:
                    async with await ASYNC_AWAITED[entry_point](client):
                        raise Boom('in the block')
            assert client.held_locks() == []

    run(main())
    assert free(local_engine, 'a') and free(local_engine, 'b') and free(local_engine, 'a', 'x')


def test_asyncio_acquire_lock_suppresses_when_asked(local_engine: LockTable,
                                                    caplog: pytest.LogCaptureFixture) -> None:
    async def main() -> None:
        async with local_engine.async_lock_client(background_heartbeats=False) as client:
            async with client.acquire_lock('a', raise_context_exception=False):
                raise Boom('suppressed, as asked')
            async with client.acquire_locks(['a', 'b'], raise_context_exception=False):
                raise Boom('suppressed, as asked')
            assert client.held_locks() == []

    with caplog.at_level(logging.WARNING, logger='python_dynamodb_lock.python_dynamodb_lock'):
        run(main())
    assert caplog.text.count('Suppressed an exception') == 2
    assert free(local_engine, 'a')


def test_an_async_semaphore_permits_lock_propagates(local_engine: LockTable) -> None:
    async def main() -> None:
        async with local_engine.async_lock_client(background_heartbeats=False) as client:
            semaphore = AsyncSemaphore(client, 'pool', 2)
            with pytest.raises(Boom):
                async with semaphore as permit:
                    async with permit.lock:
                        raise Boom('in the slot lock block')
            assert client.held_locks() == []

    run(main())
