"""Distributed locks on Amazon DynamoDB.

The public face of the package: :class:`DynamoDBLockClient`, :class:`BaseDynamoDBLock`,
:class:`DynamoDBLock` and :class:`DynamoDBLockError`, with the names, arguments, defaults and
table layout of the published ``python_dynamodb_lock`` package.

A client creates one item per held lock, keyed by ``(partition_key, sort_key)``, with a
conditional put. While it holds the lock a background thread renews the item every
``heartbeat_period`` by writing a fresh ``record_version_number``. Another client that finds
the lock held watches that version on its own monotonic clock; when the version has not
changed for the lock's ``lease_duration`` the holder is presumed dead and the lock is taken
over with a write conditioned on that exact version. No two clients' clocks are compared.

The rules live in :mod:`python_dynamodb_lock._core` (no I/O); :class:`DynamoDBLockClient` is
the threaded driver that runs them (see the Design page of the documentation).
"""
from __future__ import annotations

import concurrent.futures
import datetime
import logging
import threading
import time
from typing import (TYPE_CHECKING, Any, Callable, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple,
                    TypeVar, Union)

from botocore.exceptions import ClientError

from ._client.acquiring import MAX_FIRST_KEYS
from ._client.call import acquire_call
from ._common.config import check_lock_arguments, published_attributes
from ._handles.calls import ThreadCalls
from ._client.context import check_construction
from ._common.clock import Clock
from ._drivers.thread_transport import ThreadTransport
from ._model.errors import DynamoDBLockError, Reason  # noqa: F401  (Reason: importable here, not in __all__)
from ._common.locks import (APP_CALLBACK_THREADPOOL_SIZE, BaseDynamoDBLock, ClientViews, Defaults,
                            check_for_table_arguments)
from ._common.locks import HeldLock  # noqa: F401  (importable here, as it was: the lock types of this module)
from ._handles.lock_objects import AppCallback, DynamoDBLock
from ._handles.multi_locks import DynamoDBMultiLock, Key
from ._common.observe import MetricsHook
from ._model.schema import Item, PartitionKey, TableLayout  # noqa: F401  (TableLayout: importable here, as it was)
from ._common.tables import creating_table, describing_table, lock_transport_of, require_low_level_client, run_admin

if TYPE_CHECKING:  # the boto3-stubs types (pip install 'boto3-stubs[dynamodb]'); nothing at run time
    from mypy_boto3_dynamodb import DynamoDBClient, DynamoDBServiceResource

__all__ = ['DynamoDBLockClient', 'BaseDynamoDBLock', 'DynamoDBLock', 'DynamoDBLockError']

logger = logging.getLogger(__name__)

# The error class lives in a private module so the core can raise it; it is published here.
DynamoDBLockError.__module__ = __name__

T = TypeVar('T')


class DynamoDBLockClient(Defaults):
    """Hands out distributed locks stored in one DynamoDB table, and keeps them alive.

    Create one client at start-up and :meth:`close` it at shut-down. The constructor starts
    two daemon threads: one renews held locks every ``heartbeat_period`` (paced by
    ``heartbeat_tps``), the other flags locks whose renewals have failed for longer than
    ``safe_period`` as ``IN_DANGER``. Application callbacks run on ``app_callback_executor``.

    Every argument (the published ones and this package's keyword-only additions) is described
    under :ref:`client-arguments`; :doc:`settings` says how to choose them.

    :raises TypeError, ValueError: for arguments that cannot work (non-positive periods,
        ``heartbeat_tps`` of 0, a heartbeat period not shorter than the lease, an expiry
        period shorter than the lease, ...). Unsafe but workable settings are logged as
        warnings.
    """

    #: The most keys one :meth:`acquire_first_lock` may try.
    MAX_FIRST_KEYS = MAX_FIRST_KEYS

    def __init__(self, dynamodb_resource: Union[DynamoDBServiceResource, DynamoDBClient],
                 table_name: str = Defaults._DEFAULT_TABLE_NAME,
                 partition_key_name: str = Defaults._DEFAULT_PARTITION_KEY_NAME,
                 sort_key_name: Optional[str] = Defaults._DEFAULT_SORT_KEY_NAME,
                 ttl_attribute_name: str = Defaults._DEFAULT_TTL_ATTRIBUTE_NAME, owner_name: Optional[str] = None,
                 heartbeat_period: datetime.timedelta = Defaults._DEFAULT_HEARTBEAT_PERIOD,
                 safe_period: datetime.timedelta = Defaults._DEFAULT_SAFE_PERIOD,
                 lease_duration: datetime.timedelta = Defaults._DEFAULT_LEASE_DURATION,
                 expiry_period: datetime.timedelta = Defaults._DEFAULT_EXPIRY_PERIOD,
                 heartbeat_tps: float = Defaults._DEFAULT_HEARTBEAT_TPS,
                 app_callback_executor: Optional[concurrent.futures.Executor] = None, *, clock: Optional[Clock] = None,
                 heartbeat_workers: Optional[int] = None, heartbeat_batch_size: int = 1,
                 background_heartbeats: bool = True, keep_released_rows: bool = True,
                 metrics: Optional[MetricsHook] = None, max_clock_skew: Optional[datetime.timedelta] = None,
                 partition_key_type: str = 'S', session: bool = False) -> None:
        low_level_client, typed = lock_transport_of(dynamodb_resource)
        settings = check_construction(
            low_level_client, app_callback_executor, metrics, background_heartbeats,
            table_name=table_name, partition_key_name=partition_key_name, sort_key_name=sort_key_name,
            ttl_attribute_name=ttl_attribute_name, owner_name=owner_name, heartbeat_period=heartbeat_period,
            safe_period=safe_period, lease_duration=lease_duration, expiry_period=expiry_period,
            heartbeat_tps=heartbeat_tps, heartbeat_workers=heartbeat_workers,
            heartbeat_batch_size=heartbeat_batch_size, keep_released_rows=keep_released_rows,
            max_clock_skew=max_clock_skew, partition_key_type=partition_key_type, session=session)

        self._calls = calls = ThreadCalls(self, ThreadTransport(low_level_client, typed), settings, clock, metrics,
                                          app_callback_executor, APP_CALLBACK_THREADPOOL_SIZE)
        self._state, self._settings, self._schema, self._driver = calls.state, settings, settings.schema, calls.driver
        self._clock, self._shutdown, self._store = calls.state.clock, calls.driver.shutdown, calls.driver.transport
        # The published client's private attributes (``_owner_name``, ``_lease_duration_s`` ...), as given.
        vars(self).update(published_attributes(
            settings, dynamodb_resource=dynamodb_resource, app_callback_executor=calls.callbacks.executor,
            heartbeat_period=heartbeat_period, safe_period=safe_period, lease_duration=lease_duration,
            expiry_period=expiry_period, heartbeat_tps=heartbeat_tps))
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
    def background_threads(self) -> Tuple[threading.Thread, ...]:
        """The client's background threads that were started (the heartbeat sender and the
        danger checker; none with ``background_heartbeats=False``): alive until :meth:`close`."""
        return self._driver.background_threads

    def check_lock_arguments(self, partition_key: PartitionKey, sort_key: str,
                             additional_attributes: Optional[Mapping[str, Any]] = None) -> None:
        """Check a key and additional attributes as ``acquire_lock`` would, without any call:
        for code that builds on the client and wants to refuse bad input early.

        :raises TypeError, ValueError: as ``acquire_lock``; a sort key on a table without one
            (or none on a table with one) is a ValueError that names the sort key.
        """
        check_lock_arguments(self._schema, partition_key, sort_key, additional_attributes)

    def acquire_lock(self, partition_key: PartitionKey, sort_key: str = Defaults._DEFAULT_SORT_KEY_VALUE,
                     retry_period: Optional[datetime.timedelta] = None,
                     retry_timeout: Optional[datetime.timedelta] = None,
                     additional_attributes: Optional[Mapping[str, Any]] = None,
                     app_callback: Optional[AppCallback] = None, raise_context_exception: bool = False, *,
                     reentrant: bool = False, lock_existing_item: bool = False, only_if_exists: bool = False,
                     keep_row: Optional[bool] = None, cancel: Optional[threading.Event] = None, shared: bool = False,
                     lease_duration: Optional[datetime.timedelta] = None) -> DynamoDBLock:
        """Acquire the lock on ``(partition_key, sort_key)``, waiting for it if it is held.

        The first attempt is a single conditional put. While the lock is held by someone else
        the client polls it with a consistent read every ``retry_period`` (default: the
        heartbeat period), and takes it over once its ``record_version_number`` has stayed the
        same for the lock's stored lease duration, timed on this process's monotonic clock (from
        when this client object first saw that version, in this call or an earlier one), or
        once its TTL ``expiry_time`` has passed. A thread waiting for a lock held by this same
        client is woken as soon as the client releases it. Losing a race to another client is
        not an error: it is one more retry.

        :param retry_timeout: how long to keep trying (default: lease duration + heartbeat
            period). ``timedelta(0)`` makes exactly one attempt.
        :param additional_attributes: extra attributes stored in the item (values as boto3
            accepts them, e.g. ``Decimal`` rather than ``float``); they may not use the names
            of the lock's own attributes.
        :param app_callback: ``app_callback(code, lock)``, called on the callback executor
            with ``LOCK_STOLEN`` or ``LOCK_IN_DANGER``.

        The keyword-only options (``reentrant``, ``cancel``, ``shared``, ``lease_duration``,
        ``lock_existing_item``, ``only_if_exists``, ``keep_row``) are described under
        :ref:`acquire-options`.

        Interrupted by ``KeyboardInterrupt`` (Ctrl-C), the call raises it within about half a
        second, whatever DynamoDB does; a write that was in flight may still land, so it is
        freed, and watched for one lease, in the background (:meth:`wait_settled` waits for that).

        :raises TypeError, ValueError: for bad arguments, before anything is written.
        :raises DynamoDBLockError: ``ACQUIRE_TIMEOUT`` when ``retry_timeout`` is spent,
            ``ACQUIRE_CANCELLED`` when ``cancel`` was set, ``CLIENT_SHUTDOWN`` after
            :meth:`close`, ``UNKNOWN`` for any other failure (the cause is chained), including a
            missing table.
        """
        lock = self._calls.acquire(acquire_call(
            self._state, partition_key, sort_key, retry_period, retry_timeout, additional_attributes,
            app_callback, raise_context_exception, reentrant=reentrant, shared=shared, lease_duration=lease_duration,
            lock_existing_item=lock_existing_item, only_if_exists=only_if_exists, keep_row=keep_row), cancel)
        assert lock is not None   # a timeout raises here: timeout_is_error=True
        return lock

    def try_acquire_lock(self, partition_key: PartitionKey, sort_key: str = Defaults._DEFAULT_SORT_KEY_VALUE,
                         additional_attributes: Optional[Mapping[str, Any]] = None,
                         app_callback: Optional[AppCallback] = None, raise_context_exception: bool = False, *,
                         reentrant: bool = False, shared: bool = False,
                         lease_duration: Optional[datetime.timedelta] = None, lock_existing_item: bool = False,
                         only_if_exists: bool = False, keep_row: Optional[bool] = None) -> Optional[DynamoDBLock]:
        """Acquire the lock if it can be had right now (``shared``: as ``acquire_lock``'s); never
        waits. A holder whose version this client has seen unchanged for its lease, over earlier
        calls, is taken over (see "Trying again later" in the documentation).

        :returns: the held :class:`DynamoDBLock`, or None when someone else holds the lock.
        :raises: as :meth:`acquire_lock`, except that a held lock is not an error.
        """
        return self._calls.acquire(acquire_call(
            self._state, partition_key, sort_key, None, datetime.timedelta(0), additional_attributes,
            app_callback, raise_context_exception, False, reentrant=reentrant, shared=shared,
            lease_duration=lease_duration, lock_existing_item=lock_existing_item, only_if_exists=only_if_exists,
            keep_row=keep_row))

    def release_lock(self, lock: DynamoDBLock, best_effort: bool = True, *,
                     attributes: Optional[Mapping[str, Any]] = None, keep_row: Optional[bool] = None) -> bool:
        """Release ``lock``: one delete, conditioned on the row still carrying its version.

        ``attributes`` are written onto the released row for the next holder (see "Data on a
        lock" in the usage page); a ValueError before any write when the row is deleted, or when
        the released row would exceed DynamoDB's 400 KB item limit (the lock stays held).

        A lock already released is left alone. The lock may be released after :meth:`close`.

        :returns: True when this call released the lock (or one reentrant hold of it, the lock
            still held); False when it found it already released, gone (expired,
            force-released), taken over, or held by another client, or (best effort) its write
            failed (see "Releasing a lock" in the errors page). The published package returned None.

        With ``best_effort=True`` (the default) nothing is raised: failures are logged and the
        lock is forgotten locally either way; a row that could not be deleted is taken over by
        others after its lease. With ``best_effort=False``:

        ``keep_row`` (None: the lock's choice, see ``acquire_lock``) keeps the row marked released
        or deletes it; a lock on an existing item never deletes the application's item.

        :raises DynamoDBLockError: ``LOCK_NOT_OWNED`` when this client does not hold the lock;
            ``LOCK_STOLEN`` when another client has taken it over, before or during this
            release (the new holder's row is left alone; ``error.holder`` describes it);
            ``UNKNOWN`` for other failures, in which case the lock is still held and kept
            alive, so the release can be retried.
        """
        return self._calls.release(lock, best_effort, attributes, keep_row)

    def close(self, release_locks: bool = False) -> None:
        """Stop the background threads, promptly; safe to call twice and from any thread.

        Held locks are not released unless ``release_locks`` is True (then best effort): a
        lock left behind is taken over by others after its lease, and its row is deleted by
        DynamoDB's TTL. The callback executor is shut down if the client created it. In a
        process forked from the one that created the client, locks are never released.
        """
        self._calls.close(release_locks, self.release_lock)

    def get_lock(self, partition_key: PartitionKey,
                 sort_key: str = Defaults._DEFAULT_SORT_KEY_VALUE) -> Optional[BaseDynamoDBLock]:
        """Who holds ``(partition_key, sort_key)`` right now: a consistent read.

        :returns: a :class:`BaseDynamoDBLock` describing the row (it cannot be used to release
            the lock), or None when there is no row.
        :raises DynamoDBLockError: ``UNKNOWN`` when the read fails.
        """
        return self._calls.get_lock(partition_key, sort_key)

    def list_locks(self, partition_key: Optional[PartitionKey] = None) -> Iterator[BaseDynamoDBLock]:
        """Every lock in the table (a consistent, paginated scan), as :class:`BaseDynamoDBLock`;
        with ``partition_key``, only the locks under that key (a consistent, paginated query).

        Rows that are not locks (no ``record_version_number``) are skipped.

        :raises DynamoDBLockError: ``UNKNOWN`` when the scan or query fails.
        """
        yield from self._calls.list_locks(partition_key)

    def force_release_lock(self, lock: BaseDynamoDBLock) -> bool:
        """Free a lock, whoever holds it, but only if its row still carries ``lock``'s version.

        An operator's tool: pass what :meth:`get_lock` or :meth:`list_locks` returned. A lock
        that was renewed, released or taken over since is left alone. The row is freed as a
        release frees it: it is kept, marked released (a lease of 0, ``released_at``), with its
        ``fencing_token`` and without the holder's additional attributes, so that the next
        holder's token is larger; DynamoDB's TTL deletes it ``expiry_period`` later. A client
        made with ``keep_released_rows=False`` deletes the row instead. The former holder learns
        of it at its next heartbeat (``LOCK_STOLEN``).

        :returns: True when the lock was freed, False when its row had changed or was gone.
        :raises DynamoDBLockError: ``UNKNOWN`` when the write fails.
        """
        return self._calls.force_release(lock)

    def held_locks(self) -> List[DynamoDBLock]:
        """The locks this client holds and keeps alive right now (a snapshot)."""
        return self._state.registry.held()

    def send_heartbeats(self, locks: Optional[Iterable[DynamoDBLock]] = None) -> None:
        """Renew held locks now, in the calling thread: all of them, or those given.

        What the background sender does each period, without its pacing: one conditional
        update per lock (or batches of ``heartbeat_batch_size``). Outcomes show as they do for
        background heartbeats: in ``lock.status`` and through the locks' callbacks. Locks this
        client does not hold are skipped. With ``background_heartbeats=False`` this is how
        locks are kept alive; call it well within every ``heartbeat_period``.
        """
        self._calls.send_heartbeats(locks)

    def check_locks(self) -> None:
        """Flag held locks not renewed for ``safe_period`` as ``IN_DANGER`` now, calling their
        callbacks with ``LOCK_IN_DANGER``: what the background checker does each period."""
        self._calls.check_locks()

    def __enter__(self) -> 'DynamoDBLockClient':
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def __str__(self) -> str:
        return f'DynamoDBLockClient(table={self._schema.table_name}, owner={self._settings.owner_name})'

    @classmethod
    def create_dynamodb_table(cls, dynamodb_client: DynamoDBClient, table_name: str = Defaults._DEFAULT_TABLE_NAME,
                              partition_key_name: str = Defaults._DEFAULT_PARTITION_KEY_NAME,
                              sort_key_name: Optional[str] = Defaults._DEFAULT_SORT_KEY_NAME,
                              ttl_attribute_name: str = Defaults._DEFAULT_TTL_ATTRIBUTE_NAME,
                              read_capacity: int = Defaults._DEFAULT_READ_CAPACITY,
                              write_capacity: int = Defaults._DEFAULT_WRITE_CAPACITY, *,
                              billing_mode: str = 'PROVISIONED', exist_ok: bool = False, partition_key_type: str = 'S',
                              tags: Optional[Union[Mapping[str, str], Sequence[Mapping[str, str]]]] = None,
                              allow_global_table: bool = False) -> Dict[str, Any]:
        """Create the lock table, wait until it is ACTIVE, and turn TTL on for ``ttl_attribute_name``;
        takes ``boto3.client('dynamodb')``, and returns the table's description. Every argument
        and error: :ref:`table-administration`."""
        require_low_level_client(dynamodb_client)
        description: Dict[str, Any] = run_admin(dynamodb_client, creating_table(
            table_name, partition_key_name, sort_key_name, ttl_attribute_name, read_capacity, write_capacity,
            billing_mode, exist_ok, partition_key_type, tags, allow_global_table))
        return description

    @classmethod
    def for_table(cls, dynamodb_resource: Union[DynamoDBServiceResource, DynamoDBClient], table_name: str, *,
                  allow_global_table: bool = False, **kwargs: Any) -> 'DynamoDBLockClient':
        """A client for an existing table whose key names and types and TTL attribute are read
        from the table; ``kwargs`` are the constructor's other arguments. A global table is
        refused unless ``allow_global_table``. Details and errors: :ref:`table-administration`."""
        check_for_table_arguments(table_name, kwargs)
        low_level_client, _ = lock_transport_of(dynamodb_resource)
        return cls(dynamodb_resource, **run_admin(low_level_client, describing_table(table_name, kwargs,
                                                                                     allow_global_table)))

    def wait_settled(self, timeout: Optional[float] = None) -> bool:
        """Wait until the undo of every interrupted call of this client is done (see
        "Interruptions" in the documentation): True when it is, False after ``timeout`` real
        seconds (a thread join: real time, whatever clock the client was given)."""
        return self._driver.wait_settled(timeout)

    def _get_item_from_lock(self, lock: BaseDynamoDBLock) -> Item:
        """The table item for ``lock``, in boto3's Python types."""
        return self._schema.lock_item(lock.partition_key, lock.sort_key, lock.owner_name, lock.lease_duration,
                                      lock.record_version_number, lock.expiry_time, lock.additional_attributes)

    def _get_lock_from_item(self, item: Mapping[str, Any]) -> BaseDynamoDBLock:
        """A :class:`BaseDynamoDBLock` describing a table item."""
        return BaseDynamoDBLock(**self._schema.lock_fields(item, self._settings.lease_duration))

    def acquire_first_lock(self, partition_key: PartitionKey, sort_keys: Sequence[str],
                           retry_period: Optional[datetime.timedelta] = None,
                           retry_timeout: Optional[datetime.timedelta] = None,
                           additional_attributes: Optional[Mapping[str, Any]] = None,
                           app_callback: Optional[AppCallback] = None, raise_context_exception: bool = True, *,
                           cancel: Optional[threading.Event] = None,
                           wake: Optional[threading.Event] = None) -> DynamoDBLock:
        """Acquire the first lock of ``(partition_key, sort_key)`` for ``sort_keys`` that can be had
        (a pool of interchangeable locks: the slots of a semaphore, say).

        Each key is acquired exactly as :meth:`acquire_lock` acquires it (its first conditional
        put, waiting, the takeover of a holder presumed dead), keys tried in the order given:
        the first key gets its put before the second, and while all are held each one is
        polled every ``retry_period``. The first key written wins; only one lock is ever held.
        ``retry_timeout`` bounds the whole call (``timedelta(0)``: one attempt per key).
        Waiting here is not queued behind this client's own releases: a release of one of the
        keys is noticed at the next poll, or at once when the releaser sets ``wake``.

        :param sort_keys: a list or tuple of 1 to 1000 distinct sort keys.
        :param raise_context_exception: True by default here (unlike :meth:`acquire_lock`'s
            published default): an exception raised in the lock's ``with`` block propagates,
            after the release. False: it is logged and suppressed.
        :param cancel: as for :meth:`acquire_lock`.
        :param wake: a ``threading.Event``; setting it makes a waiting call look at every key at
            once (it is cleared when used). Without it, :meth:`close` also ends the wait at once;
            with it, at the next poll.
        :returns: the held lock; its ``sort_key`` says which key it is.
        :raises TypeError, ValueError: for bad arguments (any key), before anything is written.
        :raises DynamoDBLockError: ``ACQUIRE_TIMEOUT`` when every key was held for
            ``retry_timeout``; otherwise as :meth:`acquire_lock`.
        """
        return self._calls.acquire_first(partition_key, sort_keys, retry_period, retry_timeout, additional_attributes,
                                         app_callback, raise_context_exception, cancel, wake)

    def acquire_locks(self, keys: Sequence[Key], retry_period: Optional[datetime.timedelta] = None,
                      retry_timeout: Optional[datetime.timedelta] = None,
                      additional_attributes: Optional[Mapping[str, Any]] = None,
                      app_callback: Optional[Callable[[str, DynamoDBMultiLock], Any]] = None,
                      raise_context_exception: bool = True, *,
                      cancel: Optional[threading.Event] = None) -> DynamoDBMultiLock:
        """Acquire every key of ``keys`` (partition keys, or ``(partition_key, sort_key)``
        tuples; 1 to 100, distinct) or none, in one ``TransactWriteItems``, waiting as
        :meth:`acquire_lock` waits; see :doc:`multi_keys`.

        An exception raised in the multi-lock's ``with`` block propagates (after the keys are
        released): ``raise_context_exception`` is True by default here, unlike the published
        ``acquire_lock``'s; pass False to have it logged and suppressed instead.

        :raises TypeError, ValueError: for bad arguments (any key), before anything is written.
        :raises DynamoDBLockError: as :meth:`acquire_lock`; after ``ACQUIRE_TIMEOUT`` no key is held.
        """
        multi = self._calls.acquire_all(keys, retry_period, retry_timeout, additional_attributes, app_callback,
                                        raise_context_exception, True, cancel)
        assert multi is not None   # a timeout raises here: timeout_is_error=True
        return multi

    def try_acquire_locks(self, keys: Sequence[Key], additional_attributes: Optional[Mapping[str, Any]] = None,
                          app_callback: Optional[Callable[[str, DynamoDBMultiLock], Any]] = None,
                          raise_context_exception: bool = True) -> Optional[DynamoDBMultiLock]:
        """Acquire every key of ``keys`` if they can all be had right now (one attempt); None
        when any is held by someone else, and then none is. ``raise_context_exception`` as for
        :meth:`acquire_locks` (True: an exception in the ``with`` block propagates)."""
        return self._calls.acquire_all(keys, None, datetime.timedelta(0), additional_attributes, app_callback,
                                       raise_context_exception, False, None)


# ``from python_dynamodb_lock.python_dynamodb_lock import *``: the published module had no
# ``__all__``, so its star import also gave the modules and names it imported, and code written
# against it uses them (its own integration app calls ``datetime.timedelta``). They are exported
# here too, after the four classes, which remain the documented API (``time``, ``threading``,
# ``datetime`` and ``logging`` are imported at the top).
import socket  # noqa: E402
import uuid  # noqa: E402
from concurrent.futures import ThreadPoolExecutor  # noqa: E402
from decimal import Decimal  # noqa: E402
from urllib.parse import quote  # noqa: E402

# The names the published module's star import gave besides its classes.
__all__ += ['ClientError', 'Decimal', 'ThreadPoolExecutor', 'datetime', 'logger', 'logging', 'quote', 'socket',
            'threading', 'time', 'uuid']
