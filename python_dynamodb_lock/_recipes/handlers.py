"""The two handlers that run a recipe: :class:`Threads` with the threaded client, blocking the
calling thread, and :class:`Tasks` with the asyncio client, in the calling task.

Both step the recipe with the package's one stepper (:func:`~python_dynamodb_lock._core.stepper.advance`):
each operation's result is sent in, and what performing it raised is thrown in, for the recipe to
decide. Only the client's public API is used (seen through :mod:`.seams`).
"""
from __future__ import annotations

import asyncio
import datetime
import threading
from typing import Any, Optional, Set, Type, TypeVar

from .._core.stepper import Done, advance
from .._model.errors import cancelled_error
from .._common.locks import HeldLock
from .operations import AcquireFirst, GetLock, Join, Operation, Recipe, Release, Wait
from .seams import AsyncRecipeClient, RecipeClient, RecipeLock, require_client

__all__ = ['Handler', 'Tasks', 'Threads']

T = TypeVar('T')
H = TypeVar('H', bound='Handler')


class Handler:
    """Performs a recipe's operations with one kind of lock client: events, setting them,
    background work (``spawn``), and running a recipe (``run``)."""

    #: The client class this handler drives, as errors name it.
    client_name = ''
    #: The Protocol the client must fit, and whether its calls are coroutines.
    client_protocol: Type[Any] = object
    asynchronous = False

    def __init__(self, client: object) -> None:
        self.client = client

    @classmethod
    def for_client(cls: Type[H], lock_client: object) -> H:
        """A handler of ``lock_client``; TypeError when it is not a client of this handler's kind."""
        return cls(require_client(lock_client, cls.client_protocol, cls.asynchronous, cls.client_name))


class Threads(Handler):
    """Performs a recipe's operations with the threaded client, blocking the calling thread."""

    client_name = 'DynamoDBLockClient'
    client_protocol = RecipeClient
    client: RecipeClient

    def event(self) -> threading.Event:
        return threading.Event()

    def set(self, event: threading.Event) -> None:
        event.set()

    def spawn(self, name: str, recipe: Recipe[None]) -> threading.Thread:
        thread = threading.Thread(target=self.run, args=(recipe,), name=name, daemon=True)
        thread.start()
        return thread

    def run(self, recipe: Recipe[T]) -> T:
        """Run a recipe to its end: each operation's result is sent in, what it raises thrown in."""
        step = advance(recipe, None)
        while not isinstance(step, Done):
            try:
                value, thrown = self.perform(step), None
            except BaseException as exc:     # thrown into the recipe, which decides
                value, thrown = None, exc
            step = advance(recipe, value, thrown)
        return step.value

    def perform(self, operation: Operation) -> Any:
        client = self.client
        if isinstance(operation, Wait):
            return client.clock.sleep(operation.seconds, operation.event)
        if isinstance(operation, AcquireFirst):
            retry_period = datetime.timedelta(seconds=operation.retry_period)
            retry_timeout = datetime.timedelta(seconds=operation.retry_timeout)
            if operation.wake is None and len(operation.sort_keys) == 1:
                return client.acquire_lock(operation.partition_key, operation.sort_keys[0], retry_period,
                                           retry_timeout, operation.additional_attributes, operation.app_callback,
                                           raise_context_exception=True, cancel=operation.stop)
            return client.acquire_first_lock(operation.partition_key, list(operation.sort_keys), retry_period,
                                             retry_timeout, operation.additional_attributes, operation.app_callback,
                                             raise_context_exception=True, cancel=operation.stop, wake=operation.wake)
        if isinstance(operation, Release):
            return client.release_lock(operation.lock, operation.best_effort)
        if isinstance(operation, GetLock):
            return client.get_lock(operation.partition_key, operation.sort_key)
        if isinstance(operation, Join):
            if operation.handle is not threading.current_thread():
                operation.handle.join()
            return None
        raise TypeError(f'unknown recipe operation {operation!r}')


class Tasks(Handler):
    """Performs a recipe's operations with the asyncio client, in the calling task. Background
    work is a task; events are ``asyncio.Event`` (set from another thread through the loop)."""

    client_name = 'AsyncDynamoDBLockClient'
    client_protocol = AsyncRecipeClient
    asynchronous = True
    client: AsyncRecipeClient

    def __init__(self, client: AsyncRecipeClient) -> None:
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
            running: Optional[asyncio.AbstractEventLoop] = asyncio.get_running_loop()
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
        step = advance(recipe, None)
        while not isinstance(step, Done):
            try:
                value, thrown = await self.perform(step), None
            except BaseException as exc:     # thrown into the recipe, which decides
                value, thrown = None, exc
            step = advance(recipe, value, thrown)
        return step.value

    async def perform(self, operation: Operation) -> Any:
        client = self.client
        if isinstance(operation, Wait):
            return await client.clock.sleep_async(operation.seconds, operation.event)
        if isinstance(operation, AcquireFirst):
            return await self._until_set(self._acquiring(operation), operation.stop)
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

    async def _acquiring(self, operation: AcquireFirst) -> RecipeLock:
        """The client's ``acquire_lock`` (one key, no ``wake``) or ``acquire_first_lock``."""
        client = self.client
        retry_period = datetime.timedelta(seconds=operation.retry_period)
        retry_timeout = datetime.timedelta(seconds=operation.retry_timeout)
        if operation.wake is None and len(operation.sort_keys) == 1:
            return await client.acquire_lock(operation.partition_key, operation.sort_keys[0], retry_period,
                                              retry_timeout, operation.additional_attributes, operation.app_callback,
                                              raise_context_exception=True)
        return await client.acquire_first_lock(operation.partition_key, list(operation.sort_keys), retry_period,
                                               retry_timeout, operation.additional_attributes,
                                               operation.app_callback, raise_context_exception=True,
                                               wake=operation.wake)

    async def _until_set(self, acquiring: Any, stop: Optional[asyncio.Event]) -> RecipeLock:
        """Await an acquisition, cancelling it (``ACQUIRE_CANCELLED``, nothing held) once ``stop``
        is set. Cancelled itself, the acquisition is cancelled too; a lock it got at that very
        moment is released, since nobody will be handed it."""
        if stop is None:
            lock: RecipeLock = await acquiring
            return lock
        task: 'asyncio.Task[RecipeLock]' = asyncio.ensure_future(acquiring)
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

    def _release_in_background(self, lock: HeldLock, best_effort: bool) -> None:
        """Start ``release_lock`` as a task of its own and go on: the task is kept until it
        ends, and its outcome read (a best-effort release has logged its trouble)."""
        task = asyncio.get_running_loop().create_task(self.client.release_lock(lock, best_effort))
        self._releasing.add(task)
        task.add_done_callback(self._releasing.discard)
        task.add_done_callback(_retrieve)


def _retrieve(task: 'asyncio.Future[Any]') -> None:
    if not task.cancelled():
        task.exception()
