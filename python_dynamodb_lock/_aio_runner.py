"""The asyncio client's runner: how it performs the core's effects on an event loop.

:class:`TaskRunner` is what :class:`~python_dynamodb_lock.aio.AsyncDynamoDBLockClient` adds to
:class:`~python_dynamodb_lock._base.ClientCore`: sending a request, sleeping on an event, taking
a lock's mutex, running undo work as a task of its own, the two background tasks and the
heartbeat tasks, and the callbacks. It makes no decision: every protocol it runs comes from the
core.
"""
from __future__ import annotations

import asyncio
import functools
import inspect
import logging
from typing import Any, Awaitable, Callable, List, Optional, Sequence, Set, Tuple, TypeVar

from . import _config
from ._aio_store import AsyncStore
from ._base import ClientCore, Done, Steps
from ._core.effects import Call, Hold, Pending, Protocol, Settle, Sleep, Submit
from ._core.heartbeat import background_loop
from ._registry import WaiterState
from ._schema import PartitionKey

__all__ = ['TaskRunner']

logger = logging.getLogger('python_dynamodb_lock.python_dynamodb_lock')

T = TypeVar('T')
L = TypeVar('L')


class _AsyncWaiter(WaiterState, asyncio.Event):
    """An acquisition waiting in this client: woken (and maybe handed the lock) by a release."""

    def __init__(self, attempt: Any) -> None:
        asyncio.Event.__init__(self)
        self.init_waiter(attempt)


class TaskRunner(ClientCore[L]):
    """Runs the core's protocols as asyncio tasks (see the module docstring)."""

    _loop: asyncio.AbstractEventLoop

    #: Seconds a cancelled caller waits, in all, for the undo of what it left in flight (it
    #: ends within about 50 ms); the rest goes on in the background. After another interruption
    #: (``KeyboardInterrupt`` in the loop): half a second, as the threaded client's Ctrl-C.
    _CANCEL_GRACE = 0.03
    _SETTLE_GRACE = 0.5

    def _start_tasks(self, dynamodb_client: Any, settings: _config.Settings, background_heartbeats: bool) -> None:
        """Make the store and the callback executor, and start the two background tasks (only
        with ``background_heartbeats``)."""
        self._store = AsyncStore(dynamodb_client)
        self._shutdown = asyncio.Event()
        self._closed = False
        self._heartbeat_slots = asyncio.Semaphore(settings.heartbeat_workers)
        self._heartbeat_tasks: Set['asyncio.Task[None]'] = set()
        self._callback_tasks: Set['asyncio.Task[Any]'] = set()
        self._background: List['asyncio.Task[None]'] = []
        if background_heartbeats:
            self._background = [
                self._loop.create_task(self._run_loop('heartbeat sender', self._heartbeat_round),
                                       name='AsyncDynamoDBLockClient-heartbeat-sender'),
                self._loop.create_task(self._run_loop('heartbeat checker', self._checker_round),
                                       name='AsyncDynamoDBLockClient-heartbeat-checker'),
            ]

    @property
    def background_tasks(self) -> Tuple['asyncio.Task[None]', ...]:
        """The client's background tasks (the heartbeat sender and the danger checker; none with
        ``background_heartbeats=False``): running until ``close()``."""
        return tuple(self._background)

    async def _stop_tasks(self) -> None:
        """What ``close()`` does after it has set the shutdown event: wait for the background
        tasks and cancel the heartbeats in flight."""
        await asyncio.gather(*self._background, return_exceptions=True)
        for task in list(self._heartbeat_tasks):
            task.cancel()
        await asyncio.gather(*self._heartbeat_tasks, return_exceptions=True)

    def _start_release(self, lock: L, best_effort: bool, attributes: Any = None,
                       keep_row: Optional[bool] = None) -> 'asyncio.Task[bool]':
        """A release as a task of its own, which no cancellation of its caller stops."""
        return self._start_detached(self._releasing(lock, best_effort, attributes, keep_row))

    def _start_detached(self, protocol: Protocol[T]) -> 'asyncio.Task[T]':
        """Run ``protocol`` (a release) as a task of its own, which no cancellation of its caller stops."""
        releasing = self._loop.create_task(self._run(protocol))
        self._settling.add(releasing)
        releasing.add_done_callback(self._settling.discard)
        releasing.add_done_callback(_retrieve)
        return releasing

    def _new_lock(self, **fields: Any) -> L:
        raise NotImplementedError

    async def _wait_settled(self, timeout: Optional[float]) -> bool:
        """Wait for the settling tasks, and those they start meanwhile (an undo starts its watch
        for a late landing), until there are none or ``timeout`` is spent."""
        deadline = None if timeout is None else self._loop.time() + timeout
        while True:
            settling = {task for task in self._settling if not task.done()}
            remaining = None if deadline is None else deadline - self._loop.time()
            if not settling or (remaining is not None and remaining <= 0):
                return not settling
            await asyncio.wait(settling, timeout=remaining)

    async def _run(self, protocol: Protocol[T], wake: Optional[asyncio.Event] = None) -> T:
        """Run a protocol to its end on the loop; ``wake`` cuts its sleeps short. An exception
        raised while performing an effect (cancellation included) is thrown into the protocol."""
        steps = Steps(wake if wake is not None else self._shutdown)
        step = self._advance(protocol, None)
        while not isinstance(step, Done):
            value, steps.thrown = await self._perform(step, steps)
            step = self._advance(protocol, value, steps.thrown)
        result: T = step.value
        return result

    async def _perform(self, effect: Any, steps: Steps) -> Tuple[Any, Optional[BaseException]]:
        try:
            if isinstance(effect, Call):
                # A cancelled call ends here: a request not yet sent is never sent, one already
                # on the wire may still land (and is then undone, Pending answering None).
                return await self._store.send(effect.request), None
            if isinstance(effect, Sleep):
                woken = await self._clock.sleep_async(effect.seconds, steps.wake)
                return self._woken(steps.wake, woken), None
            if isinstance(effect, Submit):
                return self._submit_heartbeats(effect.locks), None
            if isinstance(effect, Hold):
                if not effect.wait and effect.lock._mutex.locked():
                    return False, None
                return await effect.lock._mutex.acquire(), None
            if isinstance(effect, Settle):
                settling = self._loop.create_task(self._settle(effect.protocol))
                self._settling.add(settling)
                settling.add_done_callback(self._settling.discard)
                if not effect.follow_up:
                    grace = self._CANCEL_GRACE if isinstance(steps.thrown, asyncio.CancelledError) \
                        else self._SETTLE_GRACE
                    timeout = steps.settle_timeout(self._loop.time(), grace)
                    if timeout is None:
                        await asyncio.shield(settling)    # cancelled again: it goes on in the background
                    else:      # an interrupted caller leaves the rest of it to the background
                        await asyncio.wait({settling}, timeout=timeout)
                return None, None
            if isinstance(effect, Pending):
                return None, None     # a cancelled call's answer can never be known
            raise TypeError(f'unknown effect {effect!r}')
        except BaseException as exc:
            return None, exc

    async def _settle(self, protocol: Protocol[None]) -> None:
        try:
            await self._run(protocol)
        except Exception:
            logger.exception('Settling an interrupted call in lock client %s failed', self._owner_name)

    def _finish(self, protocol: Protocol[T]) -> T:
        """Run a protocol that needs no I/O (it only emits events)."""
        step = self._advance(protocol, None)
        if not isinstance(step, Done):
            raise TypeError(f'{protocol!r} asked for {step!r}')
        result: T = step.value
        return result

    async def _acquire(self, partition_key: PartitionKey, sort_key: str, arguments: _config.AcquireArguments,
                       app_callback: Any, raise_context_exception: bool,
                       timeout_is_error: bool, reentrant: bool = False) -> Optional[L]:
        holder = asyncio.current_task()
        held, waiter = self._queue(partition_key, sort_key, arguments, holder, reentrant, _AsyncWaiter)
        if held is not None:
            return held
        return await self._run(self._acquisition(waiter, holder, timeout_is_error, app_callback,
                                                 raise_context_exception, self._new_lock), waiter)

    def _dispatch_callback(self, callback: Callable[..., Any], lock: Any, code: str) -> None:
        """Coroutine functions run as tasks on the loop; plain functions on the executor."""
        if _is_coroutine_function(callback):
            task = self._loop.create_task(self._await_callback(callback(code, lock), lock, code))
            self._callback_tasks.add(task)
            task.add_done_callback(self._callback_tasks.discard)
            return

        def run_callback() -> None:
            try:
                result = callback(code, lock)
                if inspect.isawaitable(result):
                    asyncio.run_coroutine_threadsafe(self._await_callback(result, lock, code), self._loop)
            except Exception:
                logger.exception('app_callback(%s, %s) raised', code, lock.unique_identifier)

        self._app_callback_executor.submit(run_callback)

    @staticmethod
    async def _await_callback(awaitable: Awaitable[Any], lock: Any, code: str) -> None:
        try:
            await awaitable
        except Exception:
            logger.exception('app_callback(%s, %s) raised', code, lock.unique_identifier)

    # -- heartbeats ----------------------------------------------------------------------

    async def _run_loop(self, name: str, make_round: Callable[[], Protocol[None]]) -> None:
        await self._run(background_loop(name, self._owner_name, make_round, self._shutdown.is_set,
                                        self._settings.heartbeat_period))

    def _submit_heartbeats(self, locks: Sequence[L]) -> int:
        """Start a task renewing a group of locks; returns how many were skipped as in flight."""
        due = self._take_due(locks)
        if due:
            task = self._loop.create_task(self._heartbeat_task(due))
            self._heartbeat_tasks.add(task)
            task.add_done_callback(self._heartbeat_tasks.discard)
        return len(locks) - len(due)

    async def _heartbeat_task(self, locks: List[L]) -> None:
        failure: Optional[BaseException] = None
        try:
            async with self._heartbeat_slots:
                await self._renew(locks)
        except Exception as exc:
            failure = exc
        finally:
            self._done_with(locks, failure)

    async def _renew(self, locks: Sequence[L]) -> None:
        await self._run(self._renewing(locks))



def _retrieve(task: 'asyncio.Task[Any]') -> None:
    """Retrieve a release's outcome even when its caller was cancelled and never sees it (a
    best-effort release has logged its trouble; asyncio would warn about an error nobody read)."""
    if not task.cancelled():
        task.exception()


def _is_coroutine_function(function: Any) -> bool:
    while isinstance(function, functools.partial):
        function = function.func
    return inspect.iscoroutinefunction(function) or (
        callable(function) and inspect.iscoroutinefunction(type(function).__call__))


