"""A blocking facade over :class:`~python_dynamodb_lock.aio.AsyncDynamoDBLockClient`, so that one
synchronous test body runs against both lock clients.

:class:`BlockingAsyncClient` has the threaded client's API. Each call runs the asyncio client's
coroutine on an event loop in a background thread (:class:`EventLoopThread`, one per test) and
blocks until it is done. It returns :class:`BlockingAsyncLock` proxies that forward every
attribute to the asyncio lock, keep their identity (one proxy per lock, also in callbacks and
``held_locks()``), and support ``with`` and ``lock.release()``.

What is specific to the asyncio client stays visible:

* the coroutine of a call runs in a task named after the calling thread, in a copy of that
  thread's context (so a :class:`ManualClock` mode set by the caller follows it), and the
  task declares itself with :meth:`ManualClock.acting_for`, so ``clock.wait_until_idle([thread])``
  sees a thread blocked on a call as idle once its task sleeps on the clock;
* the client's background "threads" are its asyncio tasks (:class:`TaskHandle`);
* callbacks run where the asyncio client runs them: plain functions on its executor (an
  inline executor runs them on the loop thread), coroutine functions as tasks;
* the aiobotocore client made for a boto3 resource is linked to it
  (:func:`python_dynamodb_lock.testing.link_clients`), so a ``FaultInjector`` or
  ``CallRecorder`` attached to the resource sees the asyncio client's calls.

A blocking call made on the loop thread itself (from a callback run inline) would wait for
itself: ``close()`` is then started as a task, as an asyncio application would do; other
calls raise ``RuntimeError``.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import threading
import time
from typing import Any, Awaitable, Callable, Dict, Iterable, Iterator, List, Optional, Tuple, TypeVar

import botocore.config

from python_dynamodb_lock._embedded import DUMMY_ACCESS_KEY_ID, DUMMY_REGION, DUMMY_SECRET_ACCESS_KEY
from python_dynamodb_lock.aio import AsyncDynamoDBLock, AsyncDynamoDBLockClient
from python_dynamodb_lock.testing import REAL_TIMEOUT, link_clients
from python_dynamodb_lock.testing._engines import _aiobotocore_session

__all__ = ['BlockingAsyncClient', 'BlockingAsyncLock', 'EventLoopThread', 'TaskHandle']

T = TypeVar('T')


class EventLoopThread:
    """An asyncio event loop running in a daemon thread, with the aiobotocore clients made on it."""

    def __init__(self, name: str = 'asyncio-lock-clients') -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)
        self.thread.start()
        self._clients: Dict[int, Tuple[Any, Any, Any]] = {}   # id(boto3 client) -> (boto3 client, context, client)
        self._closed = False

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def in_loop_thread(self) -> bool:
        return threading.current_thread() is self.thread

    def submit(self, coroutine: Awaitable[T], context: Optional[contextvars.Context] = None
               ) -> 'concurrent.futures.Future[T]':
        """Run ``coroutine`` as a task on the loop, in ``context`` (default: a copy of the
        calling thread's context)."""
        future: 'concurrent.futures.Future[T]' = concurrent.futures.Future()

        def start() -> None:
            task = self.loop.create_task(coroutine)  # type: ignore[arg-type]

            def done(finished: 'asyncio.Task[T]') -> None:
                if finished.cancelled():
                    future.set_exception(concurrent.futures.CancelledError())
                elif finished.exception() is not None:
                    future.set_exception(finished.exception())  # type: ignore[arg-type]
                else:
                    future.set_result(finished.result())

            task.add_done_callback(done)

        self.loop.call_soon_threadsafe(start, context=context if context is not None else contextvars.copy_context())
        return future

    def run(self, coroutine: Awaitable[T], context: Optional[contextvars.Context] = None) -> T:
        """Run ``coroutine`` on the loop and wait for its result (or exception)."""
        if self.in_loop_thread():
            raise RuntimeError('a blocking call on the event loop thread would wait for itself')
        return self.submit(coroutine, context).result()

    async def async_client_for(self, boto3_object: Any) -> Any:
        """The aiobotocore client standing for a boto3 resource (one per resource's client,
        linked to it); anything else is returned as it is, for the bad-input tests."""
        base = getattr(getattr(boto3_object, 'meta', None), 'client', None)
        service = getattr(getattr(getattr(base, 'meta', None), 'service_model', None), 'service_name', None)
        if service != 'dynamodb':
            return boto3_object
        meta = base.meta
        known = self._clients.get(id(base))
        if known is not None:
            return known[2]
        config = meta.config
        context = _aiobotocore_session().create_client(
            'dynamodb', endpoint_url=meta.endpoint_url, region_name=meta.region_name or DUMMY_REGION,
            aws_access_key_id=DUMMY_ACCESS_KEY_ID, aws_secret_access_key=DUMMY_SECRET_ACCESS_KEY,
            config=botocore.config.Config(retries=dict(config.retries or {}), connect_timeout=config.connect_timeout,
                                          read_timeout=config.read_timeout,
                                          max_pool_connections=config.max_pool_connections))
        client = await context.__aenter__()
        link_clients(base, client)
        self._clients[id(base)] = (base, context, client)
        return client

    def close(self) -> None:
        """Cancel what still runs, close the aiobotocore clients, stop the loop and its thread."""
        if self._closed:
            return
        self._closed = True

        async def shut_down() -> None:
            current = asyncio.current_task()
            pending = [task for task in asyncio.all_tasks() if task is not current]
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
            for _, context, _ in self._clients.values():
                await context.__aexit__(None, None, None)
            self._clients.clear()
            await self.loop.shutdown_asyncgens()
            await self.loop.shutdown_default_executor()   # the worker threads of asyncio.to_thread

        try:
            self.run(shut_down(), context=contextvars.Context())
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(REAL_TIMEOUT)
            if not self.thread.is_alive():
                self.loop.close()


class TaskHandle:
    """A background task of an asyncio lock client, looking like the threaded client's threads."""

    def __init__(self, task: 'asyncio.Task[Any]') -> None:
        self.task = task
        self.name = task.get_name()
        self.ident = id(task)

    def is_alive(self) -> bool:
        return not self.task.done()

    def join(self, timeout: Optional[float] = None) -> None:
        deadline = time.monotonic() + (timeout if timeout is not None else 3600.0)
        while not self.task.done() and time.monotonic() < deadline:
            time.sleep(0.001)

    def __repr__(self) -> str:
        return f'<TaskHandle {self.name} {"alive" if self.is_alive() else "done"}>'


class _LoopEvent:
    """An asyncio.Event of the client, set and read from another thread through the loop."""

    def __init__(self, runner: EventLoopThread, event: asyncio.Event) -> None:
        self._runner = runner
        self._event = event

    def set(self) -> None:
        async def set_it() -> None:
            self._event.set()

        self._runner.run(set_it())

    def is_set(self) -> bool:
        return self._event.is_set()


class BlockingAsyncLock:
    """A held lock of a :class:`BlockingAsyncClient`: an :class:`AsyncDynamoDBLock` behind the
    threaded lock's interface. Attributes are read from and written to the asyncio lock."""

    def __init__(self, lock: AsyncDynamoDBLock, facade: 'BlockingAsyncClient') -> None:
        object.__setattr__(self, '_lock', lock)
        object.__setattr__(self, '_facade', facade)

    def __getattr__(self, name: str) -> Any:
        if name in ('_lock', '_facade'):
            raise AttributeError(name)
        return getattr(self._lock, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._lock, name, value)

    @property
    def lock_client(self) -> 'BlockingAsyncClient':
        return self._facade

    @property
    def app_callback(self) -> Any:
        return self._facade._original_callback(self._lock.app_callback)

    def release(self, best_effort: bool = True, **options: Any) -> None:
        self._facade.release_lock(self, best_effort, **options)

    # The asyncio lock's coroutine methods, as the threaded lock's blocking ones.

    def extend(self) -> None:
        self._facade._call(self._lock.extend)

    def transact_write_items(self, TransactItems: Any, **options: Any) -> Dict[str, Any]:
        answer: Dict[str, Any] = self._facade._call(
            lambda: self._lock.transact_write_items(TransactItems, **options))
        return answer

    def put_item(self, **params: Any) -> Dict[str, Any]:
        answer: Dict[str, Any] = self._facade._call(lambda: self._lock.put_item(**params))
        return answer

    def update_item(self, **params: Any) -> Dict[str, Any]:
        answer: Dict[str, Any] = self._facade._call(lambda: self._lock.update_item(**params))
        return answer

    def delete_item(self, **params: Any) -> Dict[str, Any]:
        answer: Dict[str, Any] = self._facade._call(lambda: self._lock.delete_item(**params))
        return answer

    def __enter__(self) -> 'BlockingAsyncLock':
        return self

    def __exit__(self, exc_type: Any, exc_value: Any, traceback: Any) -> bool:
        suppress: bool = self._facade._call(lambda: self._lock.__aexit__(exc_type, exc_value, traceback))
        return suppress

    def __str__(self) -> str:
        return f'Blocking{self._lock}'

    __repr__ = __str__


class BlockingAsyncClient:
    """The threaded client's API over an :class:`AsyncDynamoDBLockClient` on ``runner``'s loop.

    ``dynamodb_resource`` is the boto3 resource the threaded client would take: the asyncio
    client gets an aiobotocore client on the same endpoint, with the same retries and
    timeouts, linked to it. The other arguments are the clients' own.
    """

    def __init__(self, dynamodb_resource: Any, runner: EventLoopThread, **kwargs: Any) -> None:
        self._runner = runner
        self._dynamodb_resource = dynamodb_resource
        self._proxies: Dict[AsyncDynamoDBLock, BlockingAsyncLock] = {}
        self._wrapped_callbacks: Dict[Any, Any] = {}
        self._guard = threading.Lock()
        self._detached: List['asyncio.Task[Any]'] = []
        self.dynamodb: Any = None

        async def create() -> AsyncDynamoDBLockClient:
            dynamodb = await runner.async_client_for(dynamodb_resource)
            self.dynamodb = dynamodb     # the aiobotocore client the asyncio client was given
            return AsyncDynamoDBLockClient(dynamodb, **kwargs)

        # A fresh context: the client's background tasks must not inherit the caller's clock mode.
        self._client: AsyncDynamoDBLockClient = runner.run(create(), context=contextvars.Context())
        self._clock = kwargs.get('clock')   # the test's clock (None: the client's real one, which has no acting_for)

    # -- plumbing --------------------------------------------------------------------------

    def __getattr__(self, name: str) -> Any:
        if name == '_client':
            raise AttributeError(name)
        return getattr(self._client, name)

    @property
    def async_client(self) -> AsyncDynamoDBLockClient:
        return self._client

    @property
    def _shutdown(self) -> _LoopEvent:
        return _LoopEvent(self._runner, self._client._shutdown)  # private: mirrors the threaded client

    def _call(self, make: Callable[[], Awaitable[T]]) -> T:
        """Run ``make()`` on the loop in a task named after the calling thread, and wait."""
        caller = threading.current_thread()

        async def on_behalf_of_caller() -> T:
            task = asyncio.current_task()
            if task is not None:
                task.set_name(caller.name)
            acting_for = getattr(self._clock, 'acting_for', None)
            if acting_for is None:
                return await make()
            with acting_for(caller):
                return await make()

        return self._runner.run(on_behalf_of_caller())

    def _proxy(self, lock: Any) -> Any:
        if not isinstance(lock, AsyncDynamoDBLock):
            return lock
        with self._guard:
            proxy = self._proxies.get(lock)
            if proxy is None:
                proxy = self._proxies[lock] = BlockingAsyncLock(lock, self)
            return proxy

    @staticmethod
    def _unwrap(lock: Any) -> Any:
        return lock._lock if isinstance(lock, BlockingAsyncLock) else lock

    def _wrap_callback(self, callback: Any) -> Any:
        """The callback, handed the lock's proxy instead of the asyncio lock."""
        if callback is None or not callable(callback):
            return callback

        def with_proxy(code: str, lock: Any) -> Any:
            return callback(code, self._proxy(lock))

        self._wrapped_callbacks[with_proxy] = callback
        return with_proxy

    def _original_callback(self, callback: Any) -> Any:
        return self._wrapped_callbacks.get(callback, callback)

    def background_tasks(self) -> List[TaskHandle]:
        """The heartbeat sender and checker tasks, and any close started from the loop thread."""
        # private: needs a public view of the asyncio client's background tasks
        return [TaskHandle(task) for task in [*self._client._background, *self._detached]]

    # -- the threaded client's API ---------------------------------------------------------

    def acquire_lock(self, partition_key: Any, sort_key: Any = '-', retry_period: Any = None, retry_timeout: Any = None,
                     additional_attributes: Any = None, app_callback: Any = None,
                     raise_context_exception: bool = False, *, reentrant: bool = False,
                     **options: Any) -> BlockingAsyncLock:
        callback = self._wrap_callback(app_callback)

        async def acquire() -> Any:
            return await self._client.acquire_lock(partition_key, sort_key, retry_period, retry_timeout,
                                                   additional_attributes, callback, raise_context_exception,
                                                   reentrant=reentrant, **options)

        lock: BlockingAsyncLock = self._proxy(self._call(acquire))
        return lock

    def try_acquire_lock(self, partition_key: Any, sort_key: Any = '-', additional_attributes: Any = None,
                         app_callback: Any = None,
                         raise_context_exception: bool = False, *, reentrant: bool = False, **options: Any
                         ) -> Optional[BlockingAsyncLock]:
        callback = self._wrap_callback(app_callback)
        lock: Optional[BlockingAsyncLock] = self._proxy(self._call(lambda: self._client.try_acquire_lock(
            partition_key, sort_key, additional_attributes, callback, raise_context_exception, reentrant=reentrant,
            **options)))
        return lock

    def release_lock(self, lock: Any, best_effort: bool = True, **options: Any) -> None:
        self._call(lambda: self._client.release_lock(self._unwrap(lock), best_effort, **options))

    def close(self, release_locks: bool = False) -> None:
        if self._runner.in_loop_thread():   # from a callback run inline: what an asyncio app does
            self._detached.append(self._runner.loop.create_task(self._client.close(release_locks)))
            return
        self._call(lambda: self._client.close(release_locks))

    def get_lock(self, partition_key: Any, sort_key: Any = '-') -> Any:
        return self._call(lambda: self._client.get_lock(partition_key, sort_key))

    def list_locks(self) -> Iterator[Any]:
        async def collect() -> List[Any]:
            return [lock async for lock in self._client.list_locks()]

        return iter(self._call(collect))

    def force_release_lock(self, lock: Any) -> bool:
        deleted: bool = self._call(lambda: self._client.force_release_lock(self._unwrap(lock)))
        return deleted

    def held_locks(self) -> List[BlockingAsyncLock]:
        return [self._proxy(lock) for lock in self._client.held_locks()]

    def send_heartbeats(self, locks: Optional[Iterable[Any]] = None) -> None:
        chosen = None if locks is None else [self._unwrap(lock) for lock in locks]
        self._call(lambda: self._client.send_heartbeats(chosen))

    def check_locks(self) -> None:
        async def check() -> None:
            self._client.check_locks()

        self._call(check)

    def __enter__(self) -> 'BlockingAsyncClient':
        self._call(self._client.__aenter__)
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self._call(lambda: self._client.__aexit__(*exc_info))

    def __str__(self) -> str:
        return f'Blocking{self._client}'
