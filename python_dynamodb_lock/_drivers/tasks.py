"""The asyncio client's driver: how it performs the core's effects on an event loop.

:class:`TaskDriver` sends a request, sleeps on an event, takes a lock's mutex, runs undo work
as a task of its own, and keeps the two background tasks, the heartbeat tasks and the
callbacks. It makes no decision: every protocol it runs comes from the orchestration and the
core.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import inspect
import logging
from typing import Any, Awaitable, Callable, List, Optional, Sequence, Set, Tuple, TypeVar

from .._core.effects import Call, Drop, Hold, Pending, Protocol, Settle, Sleep, Submit
from .._core.heartbeat import background_loop
from .._core.effects import Effect
from .._core.stepper import Done, advance
from .._core.write import AcquireAttempt
from .._model.errors import DynamoDBLockError
from .._common.locks import HeldLock
from .._common.registry import WaiterState
from .steps import CANCEL_GRACE, SETTLE_GRACE, Host, Steps, hand_off, woken
from .task_transport import TaskTransport

__all__ = ['TaskDriver']

logger = logging.getLogger('python_dynamodb_lock.python_dynamodb_lock')

T = TypeVar('T')


class Waiter(WaiterState, asyncio.Event):
    """An acquisition waiting in this client: woken (and maybe handed the lock) by a release."""

    def __init__(self, attempt: AcquireAttempt) -> None:
        asyncio.Event.__init__(self)
        self.init_waiter(attempt)


class TaskDriver:
    """Runs protocols as asyncio tasks on ``loop`` (see the module docstring); :meth:`serve`
    gives it the client it runs protocols for, and starts the background tasks."""

    #: Seconds a cancelled caller waits, in all, for the undo of what it left in flight (it
    #: ends within about 50 ms); the rest goes on in the background. After another interruption
    #: (``KeyboardInterrupt`` in the loop): half a second, as the threaded client's Ctrl-C.
    cancel_grace = CANCEL_GRACE
    settle_grace = SETTLE_GRACE

    def __init__(self, transport: TaskTransport, loop: asyncio.AbstractEventLoop, workers: int,
                 callback_executor: concurrent.futures.Executor) -> None:
        self.transport = transport
        self.loop = loop
        self.shutdown = asyncio.Event()
        self.settling: Set['asyncio.Task[Any]'] = set()   # undo work and releases, until done
        self._callback_executor = callback_executor
        self._heartbeat_slots = asyncio.Semaphore(workers)
        self._heartbeat_tasks: Set['asyncio.Task[None]'] = set()
        self._callback_tasks: Set['asyncio.Task[Any]'] = set()
        self.background: List['asyncio.Task[None]'] = []

    def serve(self, host: Host, heartbeat_period: float, background_heartbeats: bool) -> None:
        self._host = host
        self._local = {**host.local, Drop: _drop}
        self._public_error = host.public_error
        self._heartbeat_period = heartbeat_period
        if background_heartbeats:
            self.background = [
                self.loop.create_task(self._run_loop('heartbeat sender', host.heartbeat_round),
                                      name='AsyncDynamoDBLockClient-heartbeat-sender'),
                self.loop.create_task(self._run_loop('heartbeat checker', host.checker_round),
                                      name='AsyncDynamoDBLockClient-heartbeat-checker'),
            ]

    async def stop(self) -> None:
        """What ``close()`` does after the shutdown event was set: wait for the background
        tasks and cancel the heartbeats in flight."""
        await asyncio.gather(*self.background, return_exceptions=True)
        for task in list(self._heartbeat_tasks):
            task.cancel()
        await asyncio.gather(*self._heartbeat_tasks, return_exceptions=True)

    def detached(self, protocol: Protocol[T]) -> 'asyncio.Task[T]':
        """Run ``protocol`` (a release) as a task of its own, which no cancellation of its caller stops."""
        releasing = self.loop.create_task(self.run(protocol))
        self.settling.add(releasing)
        releasing.add_done_callback(self.settling.discard)
        releasing.add_done_callback(_retrieve)
        return releasing

    async def wait_settled(self, timeout: Optional[float]) -> bool:
        """Wait for the settling tasks, and those they start meanwhile (an undo starts its watch
        for a late landing), until there are none or ``timeout`` is spent."""
        deadline = None if timeout is None else self.loop.time() + timeout
        while True:
            settling = {task for task in self.settling if not task.done()}
            remaining = None if deadline is None else deadline - self.loop.time()
            if not settling or (remaining is not None and remaining <= 0):
                return not settling
            await asyncio.wait(settling, timeout=remaining)

    # -- running a protocol ------------------------------------------------------------------

    async def run(self, protocol: Protocol[T], wake: Optional[asyncio.Event] = None) -> T:
        """Run a protocol to its end on the loop; ``wake`` cuts its sleeps short. An exception
        raised while performing an effect (cancellation included) is thrown into the protocol."""
        steps = Steps(wake if wake is not None else self.shutdown)
        local = self._local
        try:
            step = advance(protocol, None, None, local)
            while not isinstance(step, Done):
                value, steps.thrown = await self._perform(step, steps)
                step = advance(protocol, value, steps.thrown, local)
        except DynamoDBLockError as error:
            self._public_error(error)   # the holder described as a BaseDynamoDBLock
            raise
        result: T = step.value
        return result

    def finish(self, protocol: Protocol[T]) -> T:
        """Run a protocol that needs no I/O (it only emits events)."""
        try:
            step = advance(protocol, None, None, self._local)
        except DynamoDBLockError as error:
            self._public_error(error)
            raise
        if not isinstance(step, Done):
            raise TypeError(f'{protocol!r} asked for {step!r}')
        result: T = step.value
        return result

    async def _perform(self, effect: Effect, steps: Steps) -> Tuple[Any, Optional[BaseException]]:
        try:
            if isinstance(effect, Call):
                # A cancelled call ends here: a request not yet sent is never sent, one already
                # on the wire may still land (and is then undone, Pending answering None).
                return await self.transport.send(effect.request), None
            if isinstance(effect, Sleep):
                was_woken = await self._host.clock.sleep_async(effect.seconds, steps.wake)
                return woken(steps.wake, was_woken, self.shutdown), None
            if isinstance(effect, Submit):
                return self._submit_heartbeats(effect.locks), None
            if isinstance(effect, Hold):
                if not effect.wait and effect.lock.task_lock.locked():
                    return False, None
                return await effect.lock.task_lock.acquire(), None
            if isinstance(effect, Settle):
                await self._hand_off(effect, steps)
                return None, None
            if isinstance(effect, Pending):
                return None, None     # a cancelled call's answer can never be known
            raise TypeError(f'unknown effect {effect!r}')
        except BaseException as exc:
            return None, exc

    async def _hand_off(self, effect: Settle, steps: Steps) -> None:
        """Run undo or follow-up work as a task of its own; wait for it (not for a follow-up),
        an interrupted caller only for what is left of its grace."""
        settling = self.loop.create_task(self._settle(effect.protocol))
        self.settling.add(settling)
        settling.add_done_callback(self.settling.discard)
        wait = hand_off(effect.follow_up, steps, self.loop.time(), isinstance(steps.thrown, asyncio.CancelledError),
                        self.cancel_grace, self.settle_grace)
        if not wait.waits:
            return
        if wait.timeout is None:
            await asyncio.shield(settling)    # cancelled again: it goes on in the background
        else:      # an interrupted caller leaves the rest of it to the background
            await asyncio.wait({settling}, timeout=wait.timeout)

    async def _settle(self, protocol: Protocol[None]) -> None:
        try:
            await self.run(protocol)
        except Exception:
            logger.exception('Settling an interrupted call in lock client %s failed', self._host.owner_name)

    # -- callbacks and heartbeats ------------------------------------------------------------

    def dispatch_callback(self, callback: Callable[..., Any], lock: HeldLock, code: str) -> None:
        """Coroutine functions run as tasks on the loop; plain functions on the executor."""
        if _is_coroutine_function(callback):
            task = self.loop.create_task(_await_callback(callback(code, lock), lock, code))
            self._callback_tasks.add(task)
            task.add_done_callback(self._callback_tasks.discard)
            return

        def run_callback() -> None:
            try:
                result = callback(code, lock)
                if inspect.isawaitable(result):
                    asyncio.run_coroutine_threadsafe(_await_callback(result, lock, code), self.loop)
            except Exception:
                logger.exception('app_callback(%s, %s) raised', code, lock.unique_identifier)

        self._callback_executor.submit(run_callback)

    async def _run_loop(self, name: str, make_round: Callable[[], Protocol[None]]) -> None:
        await self.run(background_loop(name, self._host.owner_name, make_round, self.shutdown.is_set,
                                       self._heartbeat_period))

    def _submit_heartbeats(self, locks: Sequence[Any]) -> int:
        """Start a task renewing a group of locks; returns how many were skipped as in flight."""
        due = self._host.take_due(locks)
        if due:
            task = self.loop.create_task(self._heartbeat_task(due))
            self._heartbeat_tasks.add(task)
            task.add_done_callback(self._heartbeat_tasks.discard)
        return len(locks) - len(due)

    async def _heartbeat_task(self, locks: List[Any]) -> None:
        failure: Optional[BaseException] = None
        try:
            async with self._heartbeat_slots:
                await self.renew(locks)
        except Exception as exc:
            failure = exc
        finally:
            self._host.done_with(locks, failure)

    async def renew(self, locks: Sequence[Any]) -> None:
        """Renew a group of locks."""
        await self.run(self._host.renewals(locks))


async def _await_callback(awaitable: Awaitable[Any], lock: HeldLock, code: str) -> None:
    try:
        await awaitable
    except Exception:
        logger.exception('app_callback(%s, %s) raised', code, lock.unique_identifier)


def _drop(effect: Drop) -> None:
    """Give a lock's mutex back (``Drop``: no I/O, performed on the way)."""
    effect.lock.task_lock.release()


def _retrieve(task: 'asyncio.Task[Any]') -> None:
    """Retrieve a release's outcome even when its caller was cancelled and never sees it (a
    best-effort release has logged its trouble; asyncio would warn about an error nobody read)."""
    if not task.cancelled():
        task.exception()


def _is_coroutine_function(function: object) -> bool:
    while isinstance(function, functools.partial):
        function = function.func
    return inspect.iscoroutinefunction(function) or (
        callable(function) and inspect.iscoroutinefunction(type(function).__call__))
