"""Distributed locks on Amazon DynamoDB for asyncio applications.

:class:`AsyncDynamoDBLockClient` is the asyncio twin of
:class:`~python_dynamodb_lock.python_dynamodb_lock.DynamoDBLockClient`: the same arguments,
defaults, item layout and rules (both run the one protocol core), with coroutines instead of
blocking calls, and the heartbeat sender and danger checker as asyncio tasks. Locks of both
clients exclude each other on one table, and published 0.9.x clients too.

It talks to DynamoDB through an `aiobotocore <https://github.com/aio-libs/aiobotocore>`_
client (``pip install '.[asyncio]'`` from a checkout)::

    from aiobotocore.session import get_session
    from python_dynamodb_lock.aio import AsyncDynamoDBLockClient

    async def main():
        async with get_session().create_client('dynamodb') as dynamodb:
            async with AsyncDynamoDBLockClient(dynamodb) as lock_client:
                async with lock_client.acquire_lock('my_key') as lock:
                    ...  # only one holder of 'my_key' at a time
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import datetime
import logging
from typing import (
    TYPE_CHECKING,
    Any,
    AsyncIterator,
    Callable,
    Coroutine,
    Dict,
    Iterable,
    List,
    Mapping,
    Optional,
    Sequence,
    Tuple,
    TypeVar,
    Union,
    cast,
)

from ._client.acquiring import MAX_FIRST_KEYS
from ._client.call import acquire_call
from ._handles.calls import TaskCalls
from ._client.context import check_construction
from ._common.config import check_lock_arguments
from ._handles.lock_objects import AsyncAppCallback, AsyncDynamoDBLock
from ._handles.multi_locks import Acquisition, AsyncDynamoDBMultiLock, Key
from ._common.clock import Clock
from ._drivers.task_transport import TaskTransport
from ._model.errors import DynamoDBLockError, Reason
from ._common.observe import MetricsHook
from ._recipes import AsyncLeaderElection, AsyncPermit, AsyncSemaphore
from ._model.schema import PartitionKey, TableLayout  # noqa: F401  (TableLayout: importable here, as it was)
from ._common.tables import creating_table, describing_table, run_admin_async
from ._model.validation import require_asyncio_event
from ._common.locks import APP_CALLBACK_THREADPOOL_SIZE, BaseDynamoDBLock, ClientViews, check_for_table_arguments
from ._common.locks import HeldLock  # noqa: F401  (importable here, as it was)
from ._common.locks import Defaults as _Defaults

if TYPE_CHECKING:  # the types-aiobotocore types (pip install 'types-aiobotocore[dynamodb]'); nothing at run time
    from types_aiobotocore_dynamodb import DynamoDBClient

__all__ = ['AsyncDynamoDBLock', 'AsyncDynamoDBLockClient', 'AsyncDynamoDBMultiLock', 'BaseDynamoDBLock',
           'DynamoDBLockError', 'Reason']

logger = logging.getLogger('python_dynamodb_lock.python_dynamodb_lock')

T = TypeVar('T')


class _Acquisition(Acquisition[AsyncDynamoDBLock]):
    """What :meth:`AsyncDynamoDBLockClient.acquire_lock` returns: a coroutine (await it for the
    lock, or schedule it with ``asyncio.create_task``), or an async context manager holding the
    lock for the ``async with`` block (see :class:`~python_dynamodb_lock._handles.multi_locks.Acquisition`)."""

    __slots__ = ()


class AsyncDynamoDBLockClient:
    """Hands out distributed locks stored in one DynamoDB table, and keeps them alive, in asyncio.

    Create it inside a running event loop (it starts two tasks: the heartbeat sender and the
    danger checker) and ``await client.close()`` at shut-down, or use ``async with``. Every
    argument means what it means for the threaded client; the first is an aiobotocore DynamoDB
    client (``session.create_client('dynamodb')``), which the lock client uses but does not
    close.

    Callbacks may be plain functions (run on ``app_callback_executor``, a thread pool of 5 by
    default, never on the loop) or coroutine functions (run as tasks on the loop); either way
    they get ``(code, lock)``.

    :raises TypeError, ValueError: for arguments that cannot work, before anything starts.
    :raises RuntimeError: when no event loop is running.
    """

    #: The most keys one :meth:`acquire_first_lock` may try.
    MAX_FIRST_KEYS = MAX_FIRST_KEYS

    def __init__(self, dynamodb_client: DynamoDBClient, table_name: str = _Defaults._DEFAULT_TABLE_NAME,
                 partition_key_name: str = _Defaults._DEFAULT_PARTITION_KEY_NAME,
                 sort_key_name: Optional[str] = _Defaults._DEFAULT_SORT_KEY_NAME,
                 ttl_attribute_name: str = _Defaults._DEFAULT_TTL_ATTRIBUTE_NAME, owner_name: Optional[str] = None,
                 heartbeat_period: datetime.timedelta = _Defaults._DEFAULT_HEARTBEAT_PERIOD,
                 safe_period: datetime.timedelta = _Defaults._DEFAULT_SAFE_PERIOD,
                 lease_duration: datetime.timedelta = _Defaults._DEFAULT_LEASE_DURATION,
                 expiry_period: datetime.timedelta = _Defaults._DEFAULT_EXPIRY_PERIOD,
                 heartbeat_tps: float = _Defaults._DEFAULT_HEARTBEAT_TPS,
                 app_callback_executor: Optional[concurrent.futures.Executor] = None, *, clock: Optional[Clock] = None,
                 heartbeat_workers: Optional[int] = None, heartbeat_batch_size: int = 1,
                 background_heartbeats: bool = True, keep_released_rows: bool = True,
                 metrics: Optional[MetricsHook] = None, max_clock_skew: Optional[datetime.timedelta] = None,
                 partition_key_type: str = 'S', session: bool = False) -> None:
        if not _is_async_dynamodb_client(dynamodb_client):
            raise TypeError(
                'dynamodb_client must be an aiobotocore DynamoDB client '
                '(aiobotocore.session.get_session().create_client("dynamodb")), '
                f'not {type(dynamodb_client).__name__}'
            )
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            raise RuntimeError('AsyncDynamoDBLockClient must be created inside a running event loop '
                               '(in a coroutine)') from None
        settings = check_construction(
            dynamodb_client, app_callback_executor, metrics, background_heartbeats,
            table_name=table_name, partition_key_name=partition_key_name, sort_key_name=sort_key_name,
            ttl_attribute_name=ttl_attribute_name, owner_name=owner_name, heartbeat_period=heartbeat_period,
            safe_period=safe_period, lease_duration=lease_duration, expiry_period=expiry_period,
            heartbeat_tps=heartbeat_tps, heartbeat_workers=heartbeat_workers,
            heartbeat_batch_size=heartbeat_batch_size, keep_released_rows=keep_released_rows,
            max_clock_skew=max_clock_skew, partition_key_type=partition_key_type, session=session)
        self._dynamodb_client, self._loop = dynamodb_client, loop
        self._calls = calls = TaskCalls(self, TaskTransport(dynamodb_client), loop, settings, clock, metrics,
                                        app_callback_executor, APP_CALLBACK_THREADPOOL_SIZE)
        self._app_callback_executor = calls.callbacks.executor
        self._state, self._settings, self._schema, self._driver = calls.state, settings, settings.schema, calls.driver
        self._clock, self._shutdown, self._store = calls.state.clock, calls.driver.shutdown, calls.driver.transport
        self._owner_name, self._table_name = settings.owner_name, settings.schema.table_name
        self._safe_period_s = settings.safe_period
        calls.start(background_heartbeats)

    # -- read-only views -----------------------------------------------------------------

    # The read-only properties both clients publish (names, docstrings, values: _locks.ClientViews).
    owner_name = ClientViews.owner_name
    closed = ClientViews.closed
    table_layout = ClientViews.table_layout
    heartbeats_in_flight = ClientViews.heartbeats_in_flight
    clock = ClientViews.clock
    heartbeat_period = ClientViews.heartbeat_period
    safe_period = ClientViews.safe_period
    lease_duration = ClientViews.lease_duration

    @property
    def background_tasks(self) -> Tuple['asyncio.Task[None]', ...]:
        """The client's background tasks (the heartbeat sender and the danger checker; none with
        ``background_heartbeats=False``): running until ``close()``."""
        return tuple(self._driver.background)

    def check_lock_arguments(self, partition_key: PartitionKey, sort_key: str,
                             additional_attributes: Optional[Mapping[str, Any]] = None) -> None:
        """Check a key and additional attributes as ``acquire_lock`` would, without any call:
        for code that builds on the client and wants to refuse bad input early.

        :raises TypeError, ValueError: as ``acquire_lock``; a sort key on a table without one
            (or none on a table with one) is a ValueError that names the sort key.
        """
        check_lock_arguments(self._schema, partition_key, sort_key, additional_attributes)

    # -- public API ----------------------------------------------------------------------

    def acquire_lock(self, partition_key: PartitionKey, sort_key: str = _Defaults._DEFAULT_SORT_KEY_VALUE,
                     retry_period: Optional[datetime.timedelta] = None,
                     retry_timeout: Optional[datetime.timedelta] = None,
                     additional_attributes: Optional[Mapping[str, Any]] = None,
                     app_callback: Optional[AsyncAppCallback] = None, raise_context_exception: bool = True, *,
                     reentrant: bool = False, shared: bool = False, lease_duration: Optional[datetime.timedelta] = None,
                     lock_existing_item: bool = False, only_if_exists: bool = False,
                     keep_row: Optional[bool] = None) -> _Acquisition:
        """Acquire the lock on ``(partition_key, sort_key)``, waiting for it if it is held.

        ``lock = await client.acquire_lock(...)``, ``asyncio.create_task(client.acquire_lock(...))``
        (it is a coroutine), or ``async with client.acquire_lock(...) as lock:``. Arguments,
        waiting, takeover and errors are those of the threaded client's ``acquire_lock``; bad
        arguments raise at the call, before anything is awaited.
        An exception raised in the ``async with`` block propagates, after the release:
        ``raise_context_exception`` is True by default for the asyncio client (it has no
        published counterpart); pass False to have it logged and suppressed, as the threaded
        client's published ``acquire_lock`` does by default.
        ``reentrant`` is per task: the lock this very task already holds is returned with one
        more hold; other tasks of this client still wait. ``shared=True``: a shared (read) lock
        (see "Shared locks" in the documentation).
        Cancelling the awaiting task (anywhere: waiting, writing, or settling an older lock object
        of the key) hands it nothing and leaves nothing held: a write that was in flight is undone
        by a task of its own, which a second cancellation does not stop (the cancelled task
        waits for it at most 30 ms, and ends within about 50 ms whatever DynamoDB does): a landed
        row is freed, and a write that may still be on the wire is watched for one lease and freed
        if it lands late (:meth:`wait_settled` waits for that).
        """
        call = acquire_call(
            self._state, partition_key, sort_key, retry_period, retry_timeout, additional_attributes,
            app_callback, raise_context_exception, reentrant=reentrant, shared=shared, lease_duration=lease_duration,
            lock_existing_item=lock_existing_item, only_if_exists=only_if_exists, keep_row=keep_row)
        acquiring = self._calls.acquire(call)
        return _Acquisition(cast(Coroutine[Any, Any, AsyncDynamoDBLock], acquiring),
                            'AsyncDynamoDBLockClient.acquire_lock')

    async def try_acquire_lock(self, partition_key: PartitionKey, sort_key: str = _Defaults._DEFAULT_SORT_KEY_VALUE,
                               additional_attributes: Optional[Mapping[str, Any]] = None,
                               app_callback: Optional[AsyncAppCallback] = None, raise_context_exception: bool = True, *,
                               reentrant: bool = False, shared: bool = False,
                               lease_duration: Optional[datetime.timedelta] = None, lock_existing_item: bool = False,
                               only_if_exists: bool = False,
                               keep_row: Optional[bool] = None) -> Optional[AsyncDynamoDBLock]:
        """Acquire the lock if it can be had right now; None when someone else holds it. With
        ``reentrant``, the lock this very task already holds is returned with one more hold;
        ``shared`` and ``raise_context_exception`` (True: an exception in the block propagates)
        as :meth:`acquire_lock`'s."""
        return await self._calls.acquire(acquire_call(
            self._state, partition_key, sort_key, None, datetime.timedelta(0), additional_attributes,
            app_callback, raise_context_exception, False, reentrant=reentrant, shared=shared,
            lease_duration=lease_duration, lock_existing_item=lock_existing_item, only_if_exists=only_if_exists,
            keep_row=keep_row))

    async def release_lock(self, lock: AsyncDynamoDBLock, best_effort: bool = True, *,
                           attributes: Optional[Mapping[str, Any]] = None,
                           keep_row: Optional[bool] = None) -> bool:
        """Release ``lock``; see :meth:`DynamoDBLockClient.release_lock
        <python_dynamodb_lock.python_dynamodb_lock.DynamoDBLockClient.release_lock>`: awaited,
        True when this call released the lock.

        A coroutine: ``await`` it (or ``asyncio.create_task`` it). Once it has started, the
        release runs as a task of its own: cancelling the awaiting task (``asyncio.wait_for``
        timing out, say) does not stop it, so a lock whose release has begun is never left held
        and renewed (:meth:`wait_settled` waits for it). A coroutine that is never awaited
        releases nothing (asyncio warns that it was never awaited).
        """
        released: bool = await asyncio.shield(self._calls.begin_release(lock, best_effort, attributes, keep_row))
        return released

    async def close(self, release_locks: bool = False) -> None:
        """Stop the background tasks, promptly; a second call is a no-op. Held locks are released
        (best effort) only with ``release_locks=True``; the aiobotocore client is not closed."""
        await self._calls.close(release_locks, self.release_lock)

    async def get_lock(self, partition_key: PartitionKey,
                       sort_key: str = _Defaults._DEFAULT_SORT_KEY_VALUE) -> Optional[BaseDynamoDBLock]:
        """Who holds ``(partition_key, sort_key)`` right now (a consistent read); None: nobody."""
        return await self._calls.get_lock(partition_key, sort_key)

    async def list_locks(self, partition_key: Optional[PartitionKey] = None) -> AsyncIterator[BaseDynamoDBLock]:
        """Every lock in the table (a consistent, paginated scan), or with ``partition_key`` the
        locks under that key (a query): ``async for lock in ...``."""
        async for lock in self._calls.list_locks(partition_key):
            yield lock

    async def force_release_lock(self, lock: BaseDynamoDBLock) -> bool:
        """Free a lock, whoever holds it, only if its row still carries ``lock``'s version: the row
        is kept, marked released, with its fencing token (deleted instead with
        ``keep_released_rows=False``); see the threaded client."""
        return await self._calls.force_release(lock)

    def held_locks(self) -> List[AsyncDynamoDBLock]:
        """The locks this client holds and keeps alive right now (a snapshot)."""
        return self._state.registry.held()

    async def send_heartbeats(self, locks: Optional[Iterable[AsyncDynamoDBLock]] = None) -> None:
        """Renew held locks now: all of them, or those given; see the threaded client."""
        await self._calls.send_heartbeats(locks)

    def check_locks(self) -> None:
        """Flag held locks not renewed for ``safe_period`` as ``IN_DANGER`` now (with callbacks)."""
        self._calls.check_locks()

    async def __aenter__(self) -> 'AsyncDynamoDBLockClient':
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        await self.close()

    def __str__(self) -> str:
        return f'AsyncDynamoDBLockClient(table={self._table_name}, owner={self._owner_name})'

    @classmethod
    async def create_dynamodb_table(cls, dynamodb_client: DynamoDBClient,
                                    table_name: str = _Defaults._DEFAULT_TABLE_NAME,
                                    partition_key_name: str = _Defaults._DEFAULT_PARTITION_KEY_NAME,
                                    sort_key_name: Optional[str] = _Defaults._DEFAULT_SORT_KEY_NAME,
                                    ttl_attribute_name: str = _Defaults._DEFAULT_TTL_ATTRIBUTE_NAME,
                                    read_capacity: int = _Defaults._DEFAULT_READ_CAPACITY,
                                    write_capacity: int = _Defaults._DEFAULT_WRITE_CAPACITY, *,
                                    billing_mode: str = 'PROVISIONED', exist_ok: bool = False,
                                    partition_key_type: str = 'S',
                                    tags: Optional[Union[Mapping[str, str], Sequence[Mapping[str, str]]]] = None,
                                    allow_global_table: bool = False) -> Dict[str, Any]:
        """Create the lock table with an aiobotocore client; see the threaded client's."""
        if not _is_async_dynamodb_client(dynamodb_client):
            raise TypeError('create_dynamodb_table takes an aiobotocore DynamoDB client '
                            f'(session.create_client("dynamodb")), not {type(dynamodb_client).__name__}')
        description: Dict[str, Any] = await run_admin_async(dynamodb_client, creating_table(
            table_name, partition_key_name, sort_key_name, ttl_attribute_name, read_capacity, write_capacity,
            billing_mode, exist_ok, partition_key_type, tags, allow_global_table))
        return description

    @classmethod
    async def for_table(cls, dynamodb_client: DynamoDBClient, table_name: str, *,
                        allow_global_table: bool = False, **kwargs: Any) -> 'AsyncDynamoDBLockClient':
        """A client for an existing table whose key schema and TTL attribute are read from the
        table (``DescribeTable``, ``DescribeTimeToLive``); see the threaded client's
        :meth:`~python_dynamodb_lock.python_dynamodb_lock.DynamoDBLockClient.for_table`. Await
        it inside a running event loop."""
        if not _is_async_dynamodb_client(dynamodb_client):
            raise TypeError('for_table takes an aiobotocore DynamoDB client '
                            f'(session.create_client("dynamodb")), not {type(dynamodb_client).__name__}')
        check_for_table_arguments(table_name, kwargs)
        return cls(dynamodb_client, **(await run_admin_async(dynamodb_client, describing_table(
            table_name, kwargs, allow_global_table))))

    async def wait_settled(self, timeout: Optional[float] = None) -> bool:
        """Wait until the undo of every interrupted call of this client is done (see
        "Interruptions" in the documentation): True when it is, False after ``timeout`` seconds."""
        return await self._driver.wait_settled(timeout)

    # -- acquiring the first free of several keys ----------------------------------------

    async def acquire_first_lock(self, partition_key: PartitionKey, sort_keys: Sequence[str],
                                 retry_period: Optional[datetime.timedelta] = None,
                                 retry_timeout: Optional[datetime.timedelta] = None,
                                 additional_attributes: Optional[Mapping[str, Any]] = None,
                                 app_callback: Optional[AsyncAppCallback] = None, raise_context_exception: bool = True,
                                 *, wake: Optional[asyncio.Event] = None) -> AsyncDynamoDBLock:
        """Acquire the first lock of ``(partition_key, sort_key)`` for ``sort_keys`` that can be
        had; see :meth:`DynamoDBLockClient.acquire_first_lock
        <python_dynamodb_lock.python_dynamodb_lock.DynamoDBLockClient.acquire_first_lock>`
        (``wake`` is an ``asyncio.Event``). Cancelling the task leaves nothing held, as for
        :meth:`acquire_lock`. ``raise_context_exception`` is True by default: an exception raised
        in the lock's ``async with`` block propagates."""
        attempts = self._calls.orchestration.acquiring.first_attempts(
            partition_key, sort_keys, retry_period, retry_timeout, additional_attributes, app_callback)
        require_asyncio_event('wake', wake)
        return await self._calls.acquire_first(attempts, app_callback, raise_context_exception, wake)

    # -- several keys at once, all or nothing ------------------------------------------------

    def acquire_locks(self, keys: Sequence[Key], retry_period: Optional[datetime.timedelta] = None,
                      retry_timeout: Optional[datetime.timedelta] = None,
                      additional_attributes: Optional[Mapping[str, Any]] = None,
                      app_callback: Optional[Callable[[str, AsyncDynamoDBMultiLock], Any]] = None,
                      raise_context_exception: bool = True) -> Acquisition[AsyncDynamoDBMultiLock]:
        """Acquire every key of ``keys`` or none (``await`` it, or ``async with``); see the
        threaded client's :meth:`~python_dynamodb_lock.python_dynamodb_lock.DynamoDBLockClient.acquire_locks`
        (an exception raised in the ``async with`` block propagates, unless
        ``raise_context_exception=False``). Cancelling the task leaves no key held."""
        attempts = self._calls.orchestration.several.attempts(keys, retry_period, retry_timeout,
                                                              additional_attributes, app_callback)
        return Acquisition(cast(Coroutine[Any, Any, AsyncDynamoDBMultiLock],
                                self._calls.acquire_all(attempts, app_callback, raise_context_exception, True)),
                           'AsyncDynamoDBLockClient.acquire_locks')

    async def try_acquire_locks(self, keys: Sequence[Key], additional_attributes: Optional[Mapping[str, Any]] = None,
                                app_callback: Optional[Callable[[str, AsyncDynamoDBMultiLock], Any]] = None,
                                raise_context_exception: bool = True) -> Optional[AsyncDynamoDBMultiLock]:
        """Acquire every key of ``keys`` if they can all be had right now; None otherwise."""
        attempts = self._calls.orchestration.several.attempts(keys, None, datetime.timedelta(0),
                                                              additional_attributes, app_callback)
        return await self._calls.acquire_all(attempts, app_callback, raise_context_exception, False)


def _is_async_dynamodb_client(client: Any) -> bool:
    """An aiobotocore client of the DynamoDB service."""
    try:
        from aiobotocore.client import AioBaseClient
    except ImportError:   # pragma: no cover - the asyncio extra is not installed
        raise ImportError("AsyncDynamoDBLockClient needs aiobotocore: pip install '.[asyncio]'") from None
    service = getattr(getattr(getattr(client, 'meta', None), 'service_model', None), 'service_name', None)
    return isinstance(client, AioBaseClient) and service == 'dynamodb'


# The asyncio twins of the recipes (python_dynamodb_lock.recipes), on this client.
__all__ += ['AsyncLeaderElection', 'AsyncPermit', 'AsyncSemaphore']
