"""What a public call does once its arguments are checked: the client's orchestration run on its
driver. :class:`ThreadCalls` serves :class:`~python_dynamodb_lock.python_dynamodb_lock.DynamoDBLockClient`
and its lock objects, :class:`TaskCalls` the asyncio client and its lock objects.

Each public face holds one (``_calls``) and its methods are signature, docstring and one
delegating line; the lock objects a client hands out hold the same object, so ``lock.extend()``
and the guarded writes go down to the orchestration, never back up into the face.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import datetime
import logging
import threading
from typing import Any, AsyncIterator, Callable, Dict, Iterable, Iterator, Mapping, Optional, Sequence

from .._client.call import AcquireCall
from .._client.context import make_state
from .._client.orchestration import Orchestration
from .._common.clock import Clock
from .._common.config import Settings
from .._core.heartbeat import check_locks
from .._core.write import AcquireAttempt
from .._drivers.task_transport import TaskTransport
from .._drivers.tasks import TaskDriver
from .._drivers.tasks import Waiter as TaskWaiter
from .._drivers.thread_transport import ThreadTransport
from .._drivers.threads import ThreadDriver, Waiter, check_cancel
from .lock_objects import AsyncDynamoDBLock, DynamoDBLock, made_for, made_for_tasks
from .multi_locks import AsyncDynamoDBMultiLock, DynamoDBMultiLock, Key
from .multi_locks import acquiring as several_keys
from .._common.locks import BaseDynamoDBLock
from .._common.observe import MetricsHook
from .._wire.requests import Request
from .._model.schema import PartitionKey

__all__ = ['TaskCalls', 'ThreadCalls']

# The published client's logger: both clients log their lifecycle there.
logger = logging.getLogger('python_dynamodb_lock.python_dynamodb_lock')

#: ``release_lock`` of a face, as ``close(release_locks=True)`` calls it (a subclass may override it).
Release = Callable[..., Any]


class _Owned:
    """The callback executor of a client, shut down at close when the client made it."""

    def __init__(self, executor: Optional[concurrent.futures.Executor], name: str, size: int) -> None:
        self.owned = executor is None
        self.executor = executor or concurrent.futures.ThreadPoolExecutor(max_workers=size,
                                                                          thread_name_prefix=f'{name}-callback')

    def shutdown(self) -> None:
        if self.owned:
            self.executor.shutdown(wait=False)


class ThreadCalls:
    """The threaded client's calls (see the module docstring): its driver, its orchestration,
    and the callback executor (``executor``: the constructor's, or one made here of ``size``)."""

    def __init__(self, face: object, transport: ThreadTransport, settings: Settings, clock: Optional[Clock],
                 metrics: Optional[MetricsHook], executor: Optional[concurrent.futures.Executor], size: int) -> None:
        self.callbacks = _Owned(executor, type(face).__name__, size)
        self.driver = driver = ThreadDriver(transport, settings.heartbeat_workers, self.callbacks.executor)
        self.face = face
        self.orchestration = Orchestration(make_state(
            settings, clock, driver.dispatch_callback, metrics, face, self.new_lock, driver.shutdown,
            threading.Lock), threading.Lock)
        self.state = self.orchestration.state
        self._close_guard = threading.Lock()

    def start(self, background_heartbeats: bool) -> None:
        """Start serving the client (its background threads, unless ``background_heartbeats`` is False)."""
        settings = self.state.settings
        self.driver.serve(self.orchestration, settings.heartbeat_period, background_heartbeats)
        logger.info('Started lock client %s on table %s (heartbeat %ss, safe %ss, lease %ss%s)', settings.owner_name,
                    settings.schema.table_name, settings.heartbeat_period, settings.safe_period,
                    settings.lease_duration, '' if background_heartbeats else ', heartbeats sent by the application')

    def new_lock(self, **fields: Any) -> DynamoDBLock:
        """A lock object of this client (``fields``: the constructor's, but its client)."""
        return made_for(self, DynamoDBLock(lock_client=self.face, **fields))

    def get_lock(self, partition_key: PartitionKey, sort_key: str) -> Optional[BaseDynamoDBLock]:
        """``get_lock``."""
        described: Optional[BaseDynamoDBLock] = self.driver.run(self.orchestration.listing.reading(partition_key,
                                                                                                   sort_key))
        return described

    def list_locks(self, partition_key: Optional[PartitionKey]) -> Iterator[BaseDynamoDBLock]:
        """``list_locks``: page by page, as the caller iterates."""
        listing = self.orchestration.listing
        request: Optional[Request] = listing.first_page(partition_key)
        while request is not None:
            locks, request = listing.page(request, self.driver.transport.send(request))
            yield from locks

    def force_release(self, lock: BaseDynamoDBLock) -> bool:
        """``force_release_lock``."""
        freed: bool = self.driver.run(self.orchestration.listing.force_releasing(lock))
        return freed

    def send_heartbeats(self, locks: Optional[Iterable[DynamoDBLock]]) -> None:
        """``send_heartbeats``."""
        for group in self.orchestration.renewing.groups(locks, DynamoDBLock):
            self.driver.renew(group)

    def check_locks(self) -> None:
        """``check_locks``."""
        state = self.state
        state.check_process()
        self.driver.run(check_locks(state.heartbeat_settings, state.registry.held(), state.clock))

    def acquire(self, call: AcquireCall, cancel: Optional[threading.Event] = None) -> Optional[DynamoDBLock]:
        """``acquire_lock`` / ``try_acquire_lock`` of a checked call."""
        if cancel is not None:        # the common call, without one, makes no call for it
            check_cancel(cancel)
        acquiring = self.orchestration.acquiring
        holder = threading.current_thread()   # not get_ident(): an ident is reused by later threads
        held, waiter = acquiring.queue(call, holder, Waiter)
        if held is not None:
            return held
        assert waiter is not None
        acquired: Optional[DynamoDBLock] = self.driver.run(acquiring.acquisition(waiter, holder, call), waiter, cancel)
        return acquired

    def acquire_first(self, partition_key: PartitionKey, sort_keys: Sequence[str],
                      retry_period: Optional[datetime.timedelta],
                      retry_timeout: Optional[datetime.timedelta], additional_attributes: Optional[Mapping[str, Any]],
                      app_callback: Optional[Callable[..., Any]], raise_context_exception: bool,
                      cancel: Optional[threading.Event], wake: Optional[threading.Event]) -> DynamoDBLock:
        """``acquire_first_lock``."""
        acquiring = self.orchestration.acquiring
        attempts = acquiring.first_attempts(partition_key, sort_keys, retry_period, retry_timeout,
                                            additional_attributes, app_callback)
        check_cancel(cancel, wake)
        first = acquiring.first(attempts, threading.current_thread(), app_callback, raise_context_exception)
        if wake is None and cancel is not None:
            wake = threading.Event()     # the cancel relay sets it: never the client's shutdown event
        lock: DynamoDBLock = self.driver.run(first, wake, cancel)
        return lock

    def acquire_all(self, keys: Sequence[Key], retry_period: Optional[datetime.timedelta],
                    retry_timeout: Optional[datetime.timedelta],
                    additional_attributes: Optional[Mapping[str, Any]], app_callback: Optional[Callable[..., Any]],
                    raise_context_exception: bool, timeout_is_error: bool,
                    cancel: Optional[threading.Event]) -> Optional[DynamoDBMultiLock]:
        """``acquire_locks`` (``timeout_is_error``) and ``try_acquire_locks``."""
        parts = self.orchestration
        attempts = parts.several.attempts(keys, retry_period, retry_timeout, additional_attributes, app_callback)
        check_cancel(cancel)
        multi = DynamoDBMultiLock(self.face, app_callback, raise_context_exception)
        wake = threading.Event() if cancel is not None else None   # never the client's shutdown event
        acquired: Optional[DynamoDBMultiLock] = self.driver.run(several_keys(
            multi, self.driver, parts, attempts, threading.current_thread(), timeout_is_error), wake, cancel)
        return acquired

    def release(self, lock: DynamoDBLock, best_effort: bool, attributes: Optional[Mapping[str, Any]],
                keep_row: Optional[bool]) -> bool:
        """``release_lock``."""
        self.state.check_process()
        if not isinstance(lock, DynamoDBLock):
            raise TypeError(f'release_lock takes a DynamoDBLock, not {type(lock).__name__}')
        releasing = self.orchestration.releasing
        attributes = releasing.attributes(lock, attributes, keep_row)
        released: bool = self.driver.run(releasing.releasing(lock, best_effort, attributes, keep_row))
        return released

    def close(self, release_locks: bool, release_lock: Release) -> bool:
        """``close``: False when the client was closed already."""
        parts = self.orchestration
        with self._close_guard:
            if not parts.releasing.begin_close():
                return False
        self.driver.stop()
        for lock in (self.state.registry.held() if release_locks and not self.state.forked() else []):
            release_lock(lock, best_effort=True)
        self.driver.run(parts.sessions.ending())
        self.callbacks.shutdown()
        logger.info('Closed lock client %s', self.state.owner_name)
        return True

    # -- what the lock objects call ----------------------------------------------------------

    def extend(self, lock: DynamoDBLock) -> None:
        """``lock.extend()``."""
        with lock.thread_lock:
            self.driver.run(self.orchestration.renewing.extending(lock))

    def update_attributes(self, lock: DynamoDBLock, values: Optional[Mapping[str, Any]], remove: Iterable[str]) -> None:
        """``lock.update_attributes()``."""
        self.driver.run(self.orchestration.renewing.updating(lock, values, remove))

    def guarded_write(self, lock: DynamoDBLock, items: Sequence[Mapping[str, Any]], typed: bool,
                      options: Mapping[str, Any], client_token: Optional[str]) -> Dict[str, Any]:
        """``lock.transact_write_items()``."""
        response: Dict[str, Any] = self.driver.run(self.orchestration.renewing.guarded(
            lock, items, typed, options, client_token, self.driver.transport.wire))
        return response


class TaskCalls:
    """The asyncio client's calls (see the module docstring and :class:`ThreadCalls`)."""

    def __init__(self, face: object, transport: TaskTransport, loop: asyncio.AbstractEventLoop, settings: Settings,
                 clock: Optional[Clock], metrics: Optional[MetricsHook],
                 executor: Optional[concurrent.futures.Executor], size: int) -> None:
        self.callbacks = _Owned(executor, type(face).__name__, size)
        self.driver = driver = TaskDriver(transport, loop, settings.heartbeat_workers, self.callbacks.executor)
        self.face = face
        self.orchestration = Orchestration(make_state(
            settings, clock, driver.dispatch_callback, metrics, face, self.new_lock, driver.shutdown,
            threading.Lock), threading.Lock)
        self.state = self.orchestration.state

    def start(self, background_heartbeats: bool) -> None:
        """Start serving the client (its background tasks, unless ``background_heartbeats`` is False)."""
        settings = self.state.settings
        self.driver.serve(self.orchestration, settings.heartbeat_period, background_heartbeats)
        logger.info('Started asyncio lock client %s on table %s (heartbeat %ss, safe %ss, lease %ss%s)',
                    settings.owner_name, settings.schema.table_name, settings.heartbeat_period, settings.safe_period,
                    settings.lease_duration, '' if background_heartbeats else ', heartbeats sent by the application')

    def new_lock(self, **fields: Any) -> AsyncDynamoDBLock:
        """A lock object of this client (``fields``: the constructor's, but its client)."""
        return made_for_tasks(self, AsyncDynamoDBLock(lock_client=self.face, **fields))

    async def get_lock(self, partition_key: PartitionKey, sort_key: str) -> Optional[BaseDynamoDBLock]:
        """``get_lock``."""
        described: Optional[BaseDynamoDBLock] = await self.driver.run(
            self.orchestration.listing.reading(partition_key, sort_key))
        return described

    async def list_locks(self, partition_key: Optional[PartitionKey]) -> AsyncIterator[BaseDynamoDBLock]:
        """``list_locks``: page by page, as the caller iterates."""
        listing = self.orchestration.listing
        request: Optional[Request] = listing.first_page(partition_key)
        while request is not None:
            locks, request = listing.page(request, await self.driver.transport.send(request))
            for lock in locks:
                yield lock

    async def force_release(self, lock: BaseDynamoDBLock) -> bool:
        """``force_release_lock``."""
        freed: bool = await self.driver.run(self.orchestration.listing.force_releasing(lock))
        return freed

    async def send_heartbeats(self, locks: Optional[Iterable[AsyncDynamoDBLock]]) -> None:
        """``send_heartbeats``."""
        groups = self.orchestration.renewing.groups(locks, AsyncDynamoDBLock)
        await asyncio.gather(*(self.driver.renew(group) for group in groups))

    def check_locks(self) -> None:
        """``check_locks``."""
        state = self.state
        state.check_process()
        self.driver.finish(check_locks(state.heartbeat_settings, state.registry.held(), state.clock))

    async def acquire(self, call: AcquireCall) -> Optional[AsyncDynamoDBLock]:
        """``acquire_lock`` / ``try_acquire_lock`` of a checked call."""
        acquiring = self.orchestration.acquiring
        holder = asyncio.current_task()
        held, waiter = acquiring.queue(call, holder, TaskWaiter)
        if held is not None:
            return held
        assert waiter is not None
        acquired: Optional[AsyncDynamoDBLock] = await self.driver.run(acquiring.acquisition(waiter, holder, call),
                                                                      waiter)
        return acquired

    async def acquire_first(self, attempts: Sequence[AcquireAttempt], app_callback: Optional[Callable[..., Any]],
                            raise_context_exception: bool, wake: Optional[asyncio.Event]) -> AsyncDynamoDBLock:
        """``acquire_first_lock`` of checked attempts."""
        lock: AsyncDynamoDBLock = await self.driver.run(self.orchestration.acquiring.first(
            attempts, asyncio.current_task(), app_callback, raise_context_exception), wake)
        return lock

    async def acquire_all(self, attempts: Sequence[AcquireAttempt], app_callback: Optional[Callable[..., Any]],
                          raise_context_exception: bool, timeout_is_error: bool) -> Optional[AsyncDynamoDBMultiLock]:
        """``acquire_locks`` (``timeout_is_error``) and ``try_acquire_locks`` of checked attempts."""
        multi = AsyncDynamoDBMultiLock(self.face, app_callback, raise_context_exception)
        acquired: Optional[AsyncDynamoDBMultiLock] = await self.driver.run(several_keys(
            multi, self.driver, self.orchestration, attempts, asyncio.current_task(), timeout_is_error))
        return acquired

    def begin_release(self, lock: AsyncDynamoDBLock, best_effort: bool, attributes: Optional[Mapping[str, Any]],
                      keep_row: Optional[bool]) -> 'asyncio.Task[bool]':
        """Check ``release_lock``'s arguments and start the release as a task of its own."""
        self.state.check_process()
        if not isinstance(lock, AsyncDynamoDBLock):
            raise TypeError(f'release_lock takes an AsyncDynamoDBLock, not {type(lock).__name__}')
        releasing = self.orchestration.releasing
        attributes = releasing.attributes(lock, attributes, keep_row)
        return self.driver.detached(releasing.releasing(lock, best_effort, attributes, keep_row))

    async def close(self, release_locks: bool, release_lock: Release) -> bool:
        """``close``: False when the client was closed already."""
        parts = self.orchestration
        if not parts.releasing.begin_close():
            return False
        await self.driver.stop()
        for lock in (self.state.registry.held() if release_locks and not self.state.forked() else []):
            await release_lock(lock, best_effort=True)
        await self.driver.wait_settled(None)    # the undo work ends at once now (one last look at each row)
        await self.driver.run(parts.sessions.ending())
        self.callbacks.shutdown()
        logger.info('Closed lock client %s', self.state.owner_name)
        return True

    # -- what the lock objects call ----------------------------------------------------------

    async def extend(self, lock: AsyncDynamoDBLock) -> None:
        """``await lock.extend()``."""
        self.state.check_process()
        async with lock.task_lock:
            await self.driver.run(self.orchestration.renewing.extending(lock))

    async def update_attributes(self, lock: AsyncDynamoDBLock, values: Optional[Mapping[str, Any]],
                                remove: Iterable[str]) -> None:
        """``await lock.update_attributes()``."""
        await self.driver.run(self.orchestration.renewing.updating(lock, values, remove))

    async def guarded_write(self, lock: AsyncDynamoDBLock, items: Sequence[Mapping[str, Any]], typed: bool,
                            options: Mapping[str, Any], client_token: Optional[str]) -> Dict[str, Any]:
        """``await lock.transact_write_items()``."""
        response: Dict[str, Any] = await self.driver.run(self.orchestration.renewing.guarded(
            lock, items, typed, options, client_token, self.driver.transport.wire))
        return response
