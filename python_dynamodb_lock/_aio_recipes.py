"""The asyncio twins of the recipes: :class:`AsyncLeaderElection` and :class:`AsyncSemaphore`.

They run the very decisions of :class:`~python_dynamodb_lock.recipes.LeaderElection` and
:class:`~python_dynamodb_lock.recipes.Semaphore` (the generators of
:mod:`python_dynamodb_lock.recipes`), with :class:`Tasks`, a handler that performs their
operations with the asyncio client's public API. Published as ``python_dynamodb_lock.aio.*``.
"""
from __future__ import annotations

import asyncio
import datetime
from types import TracebackType
from typing import Any, Callable, List, Optional, Set, Tuple, Type, TypeVar

from ._errors import cancelled_error
from .aio import AsyncDynamoDBLock, AsyncDynamoDBLockClient, BaseDynamoDBLock
from .recipes import (
    AcquireFirst,
    Duration,
    ElectionLogic,
    GetLock,
    Handler,
    Join,
    PermitBase,
    Recipe,
    Release,
    SemaphoreLogic,
    Wait,
    advance,
)

__all__ = ['AsyncLeaderElection', 'AsyncPermit', 'AsyncSemaphore', 'Tasks']

T = TypeVar('T')
AsyncAppCallback = Callable[[str, AsyncDynamoDBLock], Any]


class Tasks(Handler):
    """Performs a recipe's operations with the asyncio client, in the calling task. Background
    work is a task; events are ``asyncio.Event`` (set from another thread through the loop)."""

    client_class = AsyncDynamoDBLockClient
    client: AsyncDynamoDBLockClient

    def __init__(self, client: AsyncDynamoDBLockClient) -> None:
        super().__init__(client)
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._unwanted: Set['asyncio.Future[Any]'] = set()
        self._releasing: Set['asyncio.Task[bool]'] = set()

    def event(self) -> asyncio.Event:
        return asyncio.Event()

    def set(self, event: asyncio.Event) -> None:
        """Set ``event``; from a thread other than the loop's (a callback on the client's
        executor), through the loop."""
        loop = self._loop
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if loop is None or running is loop:
            event.set()
        else:
            loop.call_soon_threadsafe(event.set)

    def spawn(self, name: str, recipe: Recipe[None]) -> 'asyncio.Task[None]':
        self._loop = asyncio.get_running_loop()
        return self._loop.create_task(self.run(recipe), name=name)

    async def run(self, recipe: Recipe[T]) -> T:
        """Run a recipe to its end: each operation's result is sent in, what it raises thrown in."""
        self._loop = asyncio.get_running_loop()
        finished, step = advance(recipe, None, None)
        while not finished:
            try:
                done: Tuple[Any, Optional[BaseException]] = (await self.perform(step), None)
            except BaseException as exc:     # thrown into the recipe, which decides
                done = (None, exc)
            finished, step = advance(recipe, *done)
        result: T = step
        return result

    async def perform(self, operation: Any) -> Any:
        client = self.client
        if isinstance(operation, Wait):
            return await client.clock.sleep_async(operation.seconds, operation.event)
        if isinstance(operation, AcquireFirst):
            retry_period = datetime.timedelta(seconds=operation.retry_period)
            retry_timeout = datetime.timedelta(seconds=operation.retry_timeout)
            if operation.wake is None and len(operation.sort_keys) == 1:
                acquiring: Any = client.acquire_lock(operation.partition_key, operation.sort_keys[0], retry_period,
                                                     retry_timeout, operation.additional_attributes,
                                                     operation.app_callback, raise_context_exception=True)
            else:
                acquiring = client.acquire_first_lock(operation.partition_key, list(operation.sort_keys), retry_period,
                                                      retry_timeout, operation.additional_attributes,
                                                      operation.app_callback, raise_context_exception=True,
                                                      wake=operation.wake)
            return await self._until_set(acquiring, operation.stop)
        if isinstance(operation, Release):
            if operation.wait:
                return await client.release_lock(operation.lock, operation.best_effort)
            self._release_in_background(operation.lock, operation.best_effort)
            return None
        if isinstance(operation, GetLock):
            return await client.get_lock(operation.partition_key, operation.sort_key)
        if isinstance(operation, Join):
            if operation.handle is not asyncio.current_task():
                await asyncio.wait({operation.handle})
            return None
        raise TypeError(f'unknown recipe operation {operation!r}')

    async def _until_set(self, acquiring: Any, stop: Optional[asyncio.Event]) -> AsyncDynamoDBLock:
        """Await an acquisition, cancelling it (``ACQUIRE_CANCELLED``, nothing held) once ``stop``
        is set. Cancelled itself, the acquisition is cancelled too; a lock it got at that very
        moment is released, since nobody will be handed it."""
        if stop is None:
            lock: AsyncDynamoDBLock = await acquiring
            return lock
        task: 'asyncio.Task[AsyncDynamoDBLock]' = asyncio.ensure_future(acquiring)
        stopping = asyncio.ensure_future(stop.wait())
        try:
            await asyncio.wait({task, stopping}, return_when=asyncio.FIRST_COMPLETED)
            if not task.done():
                task.cancel()
                await asyncio.wait({task})
        except BaseException:
            task.cancel()
            self._unwanted.add(task)
            task.add_done_callback(self._release_unwanted)
            raise
        finally:
            stopping.cancel()
        if task.cancelled():
            raise cancelled_error()      # as the threaded client's cancel event gives it
        return task.result()

    def _release_unwanted(self, task: 'asyncio.Future[Any]') -> None:
        self._unwanted.discard(task)
        if task.cancelled() or task.exception() is not None:
            return
        self._release_in_background(task.result(), True)

    def _release_in_background(self, lock: AsyncDynamoDBLock, best_effort: bool) -> None:
        """Start ``release_lock`` as a task of its own and go on: the task is kept until it
        ends, and its outcome read (a best-effort release has logged its trouble)."""
        task = asyncio.get_running_loop().create_task(self.client.release_lock(lock, best_effort))
        self._releasing.add(task)
        task.add_done_callback(self._releasing.discard)
        task.add_done_callback(_retrieve)


def _retrieve(task: 'asyncio.Future[Any]') -> None:
    if not task.cancelled():
        task.exception()


class AsyncLeaderElection(ElectionLogic[AsyncDynamoDBLock]):
    """:class:`~python_dynamodb_lock.recipes.LeaderElection` for the asyncio client: the same
    decisions, guarantees and arguments; the election's background work is a task of the loop.

    Make it, and call :meth:`start`, in a coroutine on the client's loop. ``on_elected`` and
    ``on_lost`` are plain functions, called on the loop (keep them short).
    ``async with AsyncLeaderElection(...)`` starts it and closes it at the end.
    """

    _handler: 'Tasks'
    _handler_class = Tasks

    async def current_leader(self) -> Optional[BaseDynamoDBLock]:
        """The election's lock row as it is in the table now; see ``LeaderElection.current_leader``."""
        return await self._handler.run(self._current_leader())

    async def wait_for_leadership(self, timeout: Optional[Duration] = None) -> bool:
        """Wait until this candidate leads; see ``LeaderElection.wait_for_leadership``."""
        return await self._handler.run(self._waiting_for_leadership(timeout))

    def start(self) -> 'AsyncLeaderElection':
        """Start (or resume) campaigning, in a task; returns at once. Call it on the loop.

        :raises RuntimeError: after :meth:`close`.
        """
        self._starting()
        return self

    async def resign(self) -> None:
        """Stop campaigning, and step down if leading; see ``LeaderElection.resign``."""
        await self._handler.run(self._resigning())

    async def close(self) -> None:
        """Resign for good and wait for the election's task to end; see ``LeaderElection.close``."""
        await self._handler.run(self._closing())

    async def __aenter__(self) -> 'AsyncLeaderElection':
        return self.start()

    async def __aexit__(self, exc_type: Optional[Type[BaseException]], exc_value: Optional[BaseException],
                        traceback: Optional[TracebackType]) -> None:
        await self.close()


class AsyncPermit(PermitBase):
    """:class:`~python_dynamodb_lock.recipes.Permit` of an :class:`AsyncSemaphore`:
    ``await permit.release()``, or ``async with permit:``."""

    semaphore: 'AsyncSemaphore'
    lock: AsyncDynamoDBLock

    async def release(self, best_effort: bool = True) -> None:
        """Give the permit back: see :meth:`AsyncSemaphore.release`."""
        await self.semaphore.release(self, best_effort)

    async def __aenter__(self) -> 'AsyncPermit':
        return self

    async def __aexit__(self, exc_type: Optional[Type[BaseException]], exc_value: Optional[BaseException],
                        traceback: Optional[TracebackType]) -> None:
        await self.release(best_effort=True)


class AsyncSemaphore(SemaphoreLogic):
    """:class:`~python_dynamodb_lock.recipes.Semaphore` for the asyncio client: the same slots,
    decisions, arguments and guarantees; its methods are coroutines, and a waiting acquisition
    is cancelled, leaving nothing held, by cancelling its task."""

    _permit = AsyncPermit

    _handler: 'Tasks'
    _handler_class = Tasks

    async def try_acquire(self, app_callback: Optional[AsyncAppCallback] = None) -> Optional[AsyncPermit]:
        """A permit if one is free right now, else None; see ``Semaphore.try_acquire``."""
        permit: Optional[AsyncPermit] = await self._handler.run(self._acquiring(0.0, app_callback))
        return permit

    async def acquire(self, timeout: Optional[Duration] = None,
                      app_callback: Optional[AsyncAppCallback] = None) -> AsyncPermit:
        """Wait for a permit; see ``Semaphore.acquire``."""
        permit: AsyncPermit = await self._handler.run(self._acquiring_or_raise(timeout, app_callback))
        return permit

    async def release(self, permit: AsyncPermit, best_effort: bool = True) -> None:
        """Give a permit back; see ``Semaphore.release``."""
        await self._handler.run(self._releasing(permit, best_effort))

    async def holders(self) -> List[BaseDynamoDBLock]:
        """The slots held right now, as their rows; see ``Semaphore.holders``."""
        holders: List[BaseDynamoDBLock] = await self._handler.run(self._listing())
        return holders

    async def __aenter__(self) -> AsyncPermit:
        return self._enter(asyncio.current_task(), await self.acquire())  # type: ignore[no-any-return]

    async def __aexit__(self, exc_type: Optional[Type[BaseException]], exc_value: Optional[BaseException],
                        traceback: Optional[TracebackType]) -> None:
        await self._exit(asyncio.current_task()).release(best_effort=True)
