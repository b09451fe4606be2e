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
from types import TracebackType
from typing import (TYPE_CHECKING, Any, Callable, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple,
                    Type, TypeVar)

from botocore.exceptions import ClientError

from . import _config
from ._base import ClientCore, Done, Steps, cancelled_error
from ._locks import BaseDynamoDBLock, Defaults, HeldLock, check_for_table_arguments, suppress_after_block
from ._clock import Clock, SystemClock
from ._core.acquire import read_row
from ._core.effects import Call, Hold, Pending, Protocol, Settle, Sleep, Submit
from ._core.guard import single_action
from ._core.heartbeat import background_loop, check_locks
from ._core.scan import next_page
from ._errors import DynamoDBLockError
from ._observe import MetricsHook
from ._registry import WaiterState
from ._requests import scan
from ._schema import COL_LEASE_DURATION, COL_OWNER_NAME, COL_RECORD_VERSION_NUMBER, Item, PartitionKey
from ._store import Store
from ._tables import creating_table, describing_table, require_low_level_client, run_admin

if TYPE_CHECKING:  # the boto3-stubs types (pip install 'boto3-stubs[dynamodb]'); nothing at run time
    from mypy_boto3_dynamodb import DynamoDBClient, DynamoDBServiceResource

__all__ = ['DynamoDBLockClient', 'BaseDynamoDBLock', 'DynamoDBLock', 'DynamoDBLockError']

logger = logging.getLogger(__name__)

# The error class lives in a private module so the core can raise it; it is published here.
DynamoDBLockError.__module__ = __name__

AppCallback = Callable[[str, 'DynamoDBLock'], Any]
T = TypeVar('T')


class DynamoDBLock(HeldLock):
    """A lock held by this process, as returned by :meth:`DynamoDBLockClient.acquire_lock`.

    Use it as a context manager, or call :meth:`release` when done. ``status`` moves from
    ``PENDING`` to ``LOCKED`` when acquired; to ``IN_DANGER`` when heartbeats have failed for
    longer than the client's ``safe_period`` (and back to ``LOCKED`` when one succeeds); to
    ``RELEASED`` when released; to ``INVALID`` when another client has taken it.
    """

    def __init__(
        self,
        partition_key: PartitionKey,
        sort_key: str,
        owner_name: str,
        lease_duration: float,
        record_version_number: str,
        expiry_time: int,
        additional_attributes: Optional[Mapping[str, Any]],
        app_callback: Optional[AppCallback],
        lock_client: 'DynamoDBLockClient',
        raise_context_exception: bool = False,
    ) -> None:
        clock = lock_client._clock if isinstance(lock_client, DynamoDBLockClient) else SystemClock()
        super().__init__(
            partition_key, sort_key, owner_name, lease_duration, record_version_number, expiry_time,
            additional_attributes, app_callback, lock_client, raise_context_exception, clock=clock,
        )
        # Serialises the calls to DynamoDB about this lock (a release and a heartbeat).
        self.thread_lock = threading.RLock()
        self._mutex = self.thread_lock

    def release(self, best_effort: bool = True, *, keep_row: Optional[bool] = None) -> None:
        """Release this lock: see :meth:`DynamoDBLockClient.release_lock`."""
        if keep_row is None:    # the published call, which stand-in clients know
            self.lock_client.release_lock(self, best_effort)
        else:
            self.lock_client.release_lock(self, best_effort, keep_row=keep_row)

    def extend(self) -> None:
        """Renew this lock now, in the calling thread, and say whether it worked: for
        applications that keep their locks alive themselves (``background_heartbeats=False``,
        AWS Lambda), or that want to be sure before a long step.

        :raises DynamoDBLockError: ``LOCK_STOLEN`` when the lock was lost (``holder`` says to
            whom), ``LOCK_NOT_OWNED`` when it was released, ``UNKNOWN`` when DynamoDB failed
            (the lock may still be held until its lease runs out: try again).
        """
        self.lock_client._extend(self)

    def transact_write_items(self, TransactItems: Sequence[Mapping[str, Any]], *, typed: bool = False,
                             ClientRequestToken: Optional[str] = None, **options: Any) -> Dict[str, Any]:
        """Write, only while this lock is still held: one ``TransactWriteItems`` call with the
        application's actions and a check that the lock row still belongs to this acquisition.

        ``TransactItems`` are the actions as the boto3 client takes them (``Put``, ``Update``,
        ``Delete``, ``ConditionCheck``), with values as Python values like boto3's resource layer
        (``typed=True``: as typed DynamoDB JSON). ``ReturnConsumedCapacity`` and
        ``ReturnItemCollectionMetrics`` pass through; ``ClientRequestToken`` (default: a new
        uuid) makes a repeated call idempotent for 10 minutes. Conflicts with other writes of
        the same items (a heartbeat of this very lock, say) are retried; an answer lost on the
        way is retried with the same token. See the Safety and fencing page.

        :returns: DynamoDB's answer to ``TransactWriteItems``.
        :raises DynamoDBLockError: ``LOCK_STOLEN`` when the lock is no longer held: nothing was
            written, and ``holder`` describes who holds the key now; ``LOCK_NOT_OWNED`` after
            the lock was released; ``UNKNOWN`` for other failures (``reason`` says which).
        :raises botocore.exceptions.ClientError: ``TransactionCanceledException`` when an
            application condition refused (nothing was written; ``CancellationReasons`` line up
            with ``TransactItems``).
        :raises TypeError, ValueError: for actions DynamoDB would refuse (more than 99, over
            4 MB, on the lock row itself, ...), before anything is sent.
        """
        response: Dict[str, Any] = self.lock_client._guarded_write(self, TransactItems, typed, options,
                                                                   ClientRequestToken)
        return response

    def put_item(self, **params: Any) -> Dict[str, Any]:
        """A ``put_item`` (boto3's arguments) that commits only while this lock is held; see
        :meth:`transact_write_items`."""
        actions, options = single_action('Put', params)
        return self.transact_write_items(actions, **options)

    def update_item(self, **params: Any) -> Dict[str, Any]:
        """An ``update_item`` (boto3's arguments) that commits only while this lock is held."""
        actions, options = single_action('Update', params)
        return self.transact_write_items(actions, **options)

    def delete_item(self, **params: Any) -> Dict[str, Any]:
        """A ``delete_item`` (boto3's arguments) that commits only while this lock is held."""
        actions, options = single_action('Delete', params)
        return self.transact_write_items(actions, **options)

    def __enter__(self) -> 'DynamoDBLock':
        return self

    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc_value: Optional[BaseException],
        traceback: Optional[TracebackType],
    ) -> bool:
        """Release best effort; suppress an ``Exception`` from the block unless asked not to.

        Suppressing is the published default (``raise_context_exception=False``); what is
        suppressed is logged with its traceback. ``KeyboardInterrupt``, ``SystemExit`` and
        other ``BaseException`` subclasses that are not ``Exception`` always propagate.
        """
        self.release(best_effort=True)
        return suppress_after_block(self, exc_type, exc_value, traceback)


class _Waiter(WaiterState, threading.Event):
    """An acquisition waiting in this client: woken (and maybe handed the lock) by a release."""

    def __init__(self, attempt: Any) -> None:
        threading.Event.__init__(self)
        self.init_waiter(attempt)


#: Real seconds between two looks at an acquisition's ``cancel`` event (threading.Event has no
#: way to be told when it is set).
_CANCEL_POLL = 0.05


def _relay(cancel: threading.Event, events: Sequence[threading.Event]) -> threading.Event:
    """Set ``events`` as soon as ``cancel`` is set, until the returned event is set (a daemon
    thread that looks at ``cancel`` every ``_CANCEL_POLL`` seconds)."""
    done = threading.Event()

    def relay() -> None:
        while not done.is_set():
            if cancel.wait(_CANCEL_POLL):
                for event in events:
                    event.set()
                return

    threading.Thread(target=relay, name='DynamoDBLockClient-cancel', daemon=True).start()
    return done


class DynamoDBLockClient(ClientCore[DynamoDBLock], Defaults):
    """Hands out distributed locks stored in one DynamoDB table, and keeps them alive.

    Create one client at start-up and :meth:`close` it at shut-down. The constructor starts
    two daemon threads: one renews held locks every ``heartbeat_period`` (paced by
    ``heartbeat_tps``), the other flags locks whose renewals have failed for longer than
    ``safe_period`` as ``IN_DANGER``. Application callbacks run on ``app_callback_executor``.

    :param dynamodb_resource: a boto3 DynamoDB service resource, ``boto3.resource('dynamodb')``.
        The client uses its low-level client (``dynamodb_resource.meta.client``).
    :param heartbeat_tps: ``-1`` spreads each round of heartbeats evenly over
        ``heartbeat_period``; a positive number caps heartbeats per second.
    :param app_callback_executor: where callbacks run; by default a ``ThreadPoolExecutor`` of
        5 workers that the client creates and shuts down on :meth:`close`.
    :param clock: a time source (see :mod:`python_dynamodb_lock._clock`); for tests.
    :param heartbeat_workers: how many heartbeats may be in flight at once; by default the
        boto3 client's ``max_pool_connections`` (10 unless configured), so concurrent
        heartbeats never overflow its connection pool. Raising both helps while call latency
        is the limit; once the client's CPU is, ``heartbeat_batch_size`` helps more.
    :param heartbeat_batch_size: how many heartbeats go out in one DynamoDB call. At ``1``
        (the default) each heartbeat is its own ``UpdateItem``, as in the published package.
        From 2 to 25, heartbeats are grouped into PartiQL ``BatchExecuteStatement`` calls: each
        statement is still conditional on its own lock's version and costs the same write
        unit, but a call carries up to 25 of them, so one client keeps many more locks alive
        before its CPU (botocore spends about a millisecond per call) runs out. It needs the
        IAM permission ``dynamodb:PartiQLUpdate`` on the table besides ``dynamodb:UpdateItem``,
        and an engine that runs PartiQL (DynamoDB and DynamoDB Local do; moto does not); when
        DynamoDB refuses the operation itself, the client warns once and goes back to one
        ``UpdateItem`` per lock. A statement throttled inside a batch is sent again after 50 ms
        and 100 ms, then left for the next period.
        ``heartbeat_tps`` still counts heartbeats, not calls.
    :param keep_released_rows: ``True`` (the default) keeps a released lock's row, marked
        released, so that its fencing token keeps growing (see the Safety and fencing page);
        ``False`` deletes it, as the published package did.
    :param metrics: a callable that gets a :class:`~python_dynamodb_lock.LockEvent`
        for every acquire attempt, acquisition, wait, renewal, danger, loss and release, with
        timings; it runs on the thread where the event happens and must be quick. None (the
        default) costs nothing.
    :param sort_key_name: ``None`` for a table whose key is a partition key only (locks there all
        have the sort key ``'-'``); :meth:`for_table` reads the table's shape for you.
    :param partition_key_type: the type of the table's partition key: ``'S'`` (the published
        layout; keys are ``str``), ``'N'`` (``int`` or ``Decimal``) or ``'B'`` (``bytes``).
    :param max_clock_skew: opt-in faster takeover of crashed holders, for functions that cannot
        wait a whole lease after a crash (AWS Lambda): the largest difference you trust between
        the wall clocks of the hosts sharing the table. A waiter then takes a lock over as soon
        as the end of its lease, as its holder wrote it (``lease_expiry``), plus this skew has
        passed on the waiter's wall clock - at first sight, instead of after watching its version
        stay the same for a whole lease. If clocks differ by more, a live holder can lose its
        lock: keep it None (the default) unless your clocks are synchronised (NTP, Amazon Time
        Sync) and you need it.
    :param background_heartbeats: ``False`` starts no threads at all: locks are renewed only
        when the application calls :meth:`send_heartbeats` (or ``lock.extend()``), and danger
        is flagged by :meth:`check_locks` and by ``lock.status`` itself. For AWS Lambda and
        short scripts; :meth:`close` is then instant.
    :raises TypeError, ValueError: for arguments that cannot work (non-positive periods,
        ``heartbeat_tps`` of 0, a heartbeat period not shorter than the lease, an expiry
        period shorter than the lease, ...). Unsafe but workable settings are logged as
        warnings.
    """

    _COL_OWNER_NAME = COL_OWNER_NAME
    _COL_LEASE_DURATION = COL_LEASE_DURATION
    _COL_RECORD_VERSION_NUMBER = COL_RECORD_VERSION_NUMBER

    _base_lock_class = BaseDynamoDBLock

    def __init__(
        self,
        dynamodb_resource: DynamoDBServiceResource,
        table_name: str = Defaults._DEFAULT_TABLE_NAME,
        partition_key_name: str = Defaults._DEFAULT_PARTITION_KEY_NAME,
        sort_key_name: Optional[str] = Defaults._DEFAULT_SORT_KEY_NAME,
        ttl_attribute_name: str = Defaults._DEFAULT_TTL_ATTRIBUTE_NAME,
        owner_name: Optional[str] = None,
        heartbeat_period: datetime.timedelta = Defaults._DEFAULT_HEARTBEAT_PERIOD,
        safe_period: datetime.timedelta = Defaults._DEFAULT_SAFE_PERIOD,
        lease_duration: datetime.timedelta = Defaults._DEFAULT_LEASE_DURATION,
        expiry_period: datetime.timedelta = Defaults._DEFAULT_EXPIRY_PERIOD,
        heartbeat_tps: float = Defaults._DEFAULT_HEARTBEAT_TPS,
        app_callback_executor: Optional[concurrent.futures.Executor] = None,
        *,
        clock: Optional[Clock] = None,
        heartbeat_workers: Optional[int] = None,
        heartbeat_batch_size: int = 1,
        background_heartbeats: bool = True,
        keep_released_rows: bool = True,
        metrics: Optional[MetricsHook] = None,
        max_clock_skew: Optional[datetime.timedelta] = None,
        partition_key_type: str = 'S',
    ) -> None:
        if dynamodb_resource is None:
            raise TypeError('dynamodb_resource must be a boto3 DynamoDB resource, not None')
        low_level_client = getattr(getattr(dynamodb_resource, 'meta', None), 'client', None)
        if low_level_client is None:
            raise TypeError(
                'dynamodb_resource must be a boto3 DynamoDB resource (boto3.resource("dynamodb")); '
                f'got {type(dynamodb_resource).__name__}'
            )
        settings = self._configure(
            low_level_client, clock, app_callback_executor, metrics, background_heartbeats,
            table_name=table_name, partition_key_name=partition_key_name, sort_key_name=sort_key_name,
            ttl_attribute_name=ttl_attribute_name, owner_name=owner_name, heartbeat_period=heartbeat_period,
            safe_period=safe_period, lease_duration=lease_duration, expiry_period=expiry_period,
            heartbeat_tps=heartbeat_tps, heartbeat_workers=heartbeat_workers,
            heartbeat_batch_size=heartbeat_batch_size, keep_released_rows=keep_released_rows,
            max_clock_skew=max_clock_skew, partition_key_type=partition_key_type)

        # The published private attributes, for code that reads them.
        self._dynamodb_resource = dynamodb_resource
        self._partition_key_name = settings.schema.partition_key_name
        self._sort_key_name = settings.schema.sort_key_name
        self._ttl_attribute_name = settings.schema.ttl_attribute_name
        self._heartbeat_period = heartbeat_period
        self._safe_period = safe_period
        self._lease_duration = lease_duration
        self._expiry_period = expiry_period
        self._heartbeat_tps = heartbeat_tps
        self._heartbeat_period_s = settings.heartbeat_period
        self._lease_duration_s = settings.lease_duration
        self._expiry_period_s = settings.expiry_period

        self._store = Store(low_level_client)
        self._shutdown = threading.Event()
        self._close_guard = threading.Lock()
        self._closed = False
        self._owns_app_callback_executor = app_callback_executor is None
        self._app_callback_executor = app_callback_executor or concurrent.futures.ThreadPoolExecutor(
            max_workers=Defaults._DEFAULT_APP_CALLBACK_THREADPOOL_SIZE,
            thread_name_prefix='DynamoDBLockClient-callback',
        )
        # Calls of acquisitions that can be cancelled (acquire_lock(cancel=...)) are sent here,
        # so that the caller can stop waiting for an answer; threads start only when used.
        self._call_executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=settings.heartbeat_workers, thread_name_prefix='DynamoDBLockClient-call')
        self._heartbeat_executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=settings.heartbeat_workers,
            thread_name_prefix='DynamoDBLockClient-heartbeat',
        )
        self._heartbeat_sender = threading.Thread(
            target=self._run_loop, args=('heartbeat sender', self._heartbeat_round),
            name='DynamoDBLockClient-heartbeat-sender', daemon=True,
        )
        self._heartbeat_checker = threading.Thread(
            target=self._run_loop, args=('heartbeat checker', self._checker_round),
            name='DynamoDBLockClient-heartbeat-checker', daemon=True,
        )
        if background_heartbeats:
            self._heartbeat_sender.start()
            self._heartbeat_checker.start()
        logger.info(
            'Started lock client %s on table %s (heartbeat %ss, safe %ss, lease %ss%s)',
            self._owner_name, self._table_name, settings.heartbeat_period, settings.safe_period,
            settings.lease_duration, '' if background_heartbeats else ', heartbeats sent by the application',
        )

    # -- public API ----------------------------------------------------------------------

    def acquire_lock(
        self,
        partition_key: PartitionKey,
        sort_key: str = Defaults._DEFAULT_SORT_KEY_VALUE,
        retry_period: Optional[datetime.timedelta] = None,
        retry_timeout: Optional[datetime.timedelta] = None,
        additional_attributes: Optional[Mapping[str, Any]] = None,
        app_callback: Optional[AppCallback] = None,
        raise_context_exception: bool = False,
        *,
        reentrant: bool = False,
        lock_existing_item: bool = False,
        only_if_exists: bool = False,
        keep_row: Optional[bool] = None,
        cancel: Optional[threading.Event] = None,
    ) -> DynamoDBLock:
        """Acquire the lock on ``(partition_key, sort_key)``, waiting for it if it is held.

        The first attempt is a single conditional put. While the lock is held by someone else
        the client polls it with a consistent read every ``retry_period`` (default: the
        heartbeat period), and takes it over once its ``record_version_number`` has stayed the
        same for the lock's stored lease duration, timed on this process's monotonic clock, or
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
        :param reentrant: when this very thread already holds the lock through this client,
            return that lock, with one more hold on it, instead of waiting for itself; the row
            is released when the last hold is released. Other threads of this client still wait,
            as with ``threading.RLock``. Nothing is written for a reentrant acquisition (its
            ``additional_attributes`` and ``app_callback`` are not used).
        :param cancel: a ``threading.Event`` that another thread may set to give up: the wait,
            or a call to DynamoDB in flight, ends within about 50 ms with ``ACQUIRE_CANCELLED``,
            and nothing is held. A write that was in flight is undone in the background once
            its answer arrives (see "Interruptions" in the documentation).
        :param lock_existing_item: add the lock's attributes to the item at the key, keeping its
            other attributes (UpdateItem); its release removes only them. ``only_if_exists``: fail
            with ``ITEM_NOT_FOUND`` when there is no item. See "Locking an existing item".
        :param keep_row: whether the release keeps the row, marked released (None: the client's
            ``keep_released_rows``); a release may choose otherwise.

        Interrupted by ``KeyboardInterrupt`` (Ctrl-C), the call raises it within about half a
        second, whatever DynamoDB does; a write that was in flight may still land, so it is
        freed, and watched for one lease, in the background (:meth:`wait_settled` waits for that).

        :raises TypeError, ValueError: for bad arguments, before anything is written.
        :raises DynamoDBLockError: ``ACQUIRE_TIMEOUT`` when ``retry_timeout`` is spent,
            ``ACQUIRE_CANCELLED`` when ``cancel`` was set, ``CLIENT_SHUTDOWN`` after
            :meth:`close`, ``UNKNOWN`` for any other failure (the cause is chained), including a
            missing table.
        """
        self._check_process()
        arguments = _config.acquire_arguments(self._settings, partition_key, sort_key, retry_period, retry_timeout,
                                              additional_attributes, app_callback,
                                              lock_existing_item=lock_existing_item, only_if_exists=only_if_exists,
                                              keep_row=keep_row)
        _config.require_bool('reentrant', reentrant)
        if cancel is not None:
            if not callable(getattr(cancel, 'wait', None)) or not callable(getattr(cancel, 'is_set', None)):
                raise TypeError(f'cancel must be a threading.Event, not {type(cancel).__name__}')
            if cancel.is_set():
                raise cancelled_error()
        lock = self._acquire(partition_key, sort_key, arguments, app_callback, raise_context_exception, True,
                             reentrant, cancel)
        assert lock is not None   # a timeout raises here: timeout_is_error=True
        return lock

    def try_acquire_lock(
        self,
        partition_key: PartitionKey,
        sort_key: str = Defaults._DEFAULT_SORT_KEY_VALUE,
        additional_attributes: Optional[Mapping[str, Any]] = None,
        app_callback: Optional[AppCallback] = None,
        raise_context_exception: bool = False,
        *,
        reentrant: bool = False,
        lock_existing_item: bool = False,
        only_if_exists: bool = False,
        keep_row: Optional[bool] = None,
    ) -> Optional[DynamoDBLock]:
        """Acquire the lock if it can be had right now; never waits.

        :returns: the held :class:`DynamoDBLock`, or None when someone else holds the lock.
        :raises: as :meth:`acquire_lock`, except that a held lock is not an error.
        """
        self._check_process()
        arguments = _config.acquire_arguments(self._settings, partition_key, sort_key, None, datetime.timedelta(0),
                                              additional_attributes, app_callback,
                                              lock_existing_item=lock_existing_item, only_if_exists=only_if_exists,
                                              keep_row=keep_row)
        _config.require_bool('reentrant', reentrant)
        return self._acquire(partition_key, sort_key, arguments, app_callback, raise_context_exception, False,
                             reentrant)

    def release_lock(self, lock: DynamoDBLock, best_effort: bool = True, *, keep_row: Optional[bool] = None) -> None:
        """Release ``lock``: one delete, conditioned on the row still carrying its version.

        A lock already released is left alone. The lock may be released after :meth:`close`.

        With ``best_effort=True`` (the default) nothing is raised: failures are logged and the
        lock is forgotten locally either way; a row that could not be deleted is taken over by
        others after its lease. With ``best_effort=False``:

        ``keep_row`` (None: the lock's choice, see ``acquire_lock``) keeps the row marked released
        or deletes it; a lock on an existing item never deletes its item.

        :raises DynamoDBLockError: ``LOCK_NOT_OWNED`` when this client does not hold the lock;
            ``LOCK_STOLEN`` when another client has taken it over, before or during this
            release (the new holder's row is left alone; ``error.holder`` describes it);
            ``UNKNOWN`` for other failures, in which case the lock is still held and kept
            alive, so the release can be retried.
        """
        self._check_process()
        if not isinstance(lock, DynamoDBLock):
            raise TypeError(f'release_lock takes a DynamoDBLock, not {type(lock).__name__}')
        self._run(self._releasing(lock, best_effort, keep_row))

    def close(self, release_locks: bool = False) -> None:
        """Stop the background threads, promptly; safe to call twice and from any thread.

        Held locks are not released unless ``release_locks`` is True (then best effort): a
        lock left behind is taken over by others after its lease, and its row is deleted by
        DynamoDB's TTL. The callback executor is shut down if the client created it. In a
        process forked from the one that created the client, locks are never released.
        """
        with self._close_guard:
            if not self._begin_close():
                return
        for thread in (self._heartbeat_sender, self._heartbeat_checker):
            if thread.is_alive() and thread is not threading.current_thread():
                thread.join()
        self._heartbeat_executor.shutdown(wait=False, cancel_futures=True)
        self._call_executor.shutdown(wait=False)
        for lock in self._locks_to_release_at_close(release_locks):
            self.release_lock(lock, best_effort=True)
        self._end_close()

    def get_lock(self, partition_key: PartitionKey,
                 sort_key: str = Defaults._DEFAULT_SORT_KEY_VALUE) -> Optional[BaseDynamoDBLock]:
        """Who holds ``(partition_key, sort_key)`` right now: a consistent read.

        :returns: a :class:`BaseDynamoDBLock` describing the row (it cannot be used to release
            the lock), or None when there is no row.
        :raises DynamoDBLockError: ``UNKNOWN`` when the read fails.
        """
        self._check_process()
        _config.check_key(self._schema, partition_key, sort_key)
        row = self._run(read_row(self._schema, partition_key, sort_key, None))
        described: Optional[BaseDynamoDBLock] = self._describe_row(row)
        return described

    def list_locks(self) -> Iterator[BaseDynamoDBLock]:
        """Every lock in the table (a consistent, paginated scan), as :class:`BaseDynamoDBLock`.

        Rows that are not locks (no ``record_version_number``) are skipped.

        :raises DynamoDBLockError: ``UNKNOWN`` when the scan fails.
        """
        self._check_process()
        request: Optional[Any] = scan(self._schema)
        while request is not None:
            rows, request = next_page(self._schema, self._store.send(request))
            yield from self._rows_to_locks(rows)

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
        self._check_process()
        if not isinstance(lock, BaseDynamoDBLock):
            raise TypeError(f'force_release_lock takes a BaseDynamoDBLock, not {type(lock).__name__}')
        freed: bool = self._run(self._force_release_protocol(lock))
        return freed

    def held_locks(self) -> List[DynamoDBLock]:
        """The locks this client holds and keeps alive right now (a snapshot)."""
        return self._registry.held()

    def send_heartbeats(self, locks: Optional[Iterable[DynamoDBLock]] = None) -> None:
        """Renew held locks now, in the calling thread: all of them, or those given.

        What the background sender does each period, without its pacing: one conditional
        update per lock (or batches of ``heartbeat_batch_size``). Outcomes show as they do for
        background heartbeats: in ``lock.status`` and through the locks' callbacks. Locks this
        client does not hold are skipped. With ``background_heartbeats=False`` this is how
        locks are kept alive; call it well within every ``heartbeat_period``.
        """
        self._check_process()
        for group in self._heartbeat_groups(locks, DynamoDBLock):
            self._renew(group)

    def check_locks(self) -> None:
        """Flag held locks not renewed for ``safe_period`` as ``IN_DANGER`` now, calling their
        callbacks with ``LOCK_IN_DANGER``: what the background checker does each period."""
        self._check_process()
        self._run(check_locks(self._heartbeat_settings, self._registry.held(), self._clock))

    def __enter__(self) -> 'DynamoDBLockClient':
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def __str__(self) -> str:
        return f'DynamoDBLockClient(table={self._table_name}, owner={self._owner_name})'

    # -- table creation ------------------------------------------------------------------

    @classmethod
    def create_dynamodb_table(
        cls,
        dynamodb_client: DynamoDBClient,
        table_name: str = Defaults._DEFAULT_TABLE_NAME,
        partition_key_name: str = Defaults._DEFAULT_PARTITION_KEY_NAME,
        sort_key_name: Optional[str] = Defaults._DEFAULT_SORT_KEY_NAME,
        ttl_attribute_name: str = Defaults._DEFAULT_TTL_ATTRIBUTE_NAME,
        read_capacity: int = Defaults._DEFAULT_READ_CAPACITY,
        write_capacity: int = Defaults._DEFAULT_WRITE_CAPACITY,
        *,
        billing_mode: str = 'PROVISIONED',
        exist_ok: bool = False,
        partition_key_type: str = 'S',
    ) -> Dict[str, Any]:
        """Create the lock table, wait until it is ACTIVE, and turn TTL on for ``ttl_attribute_name``.

        Meant for deploy time or tests; it takes the low-level client
        (``boto3.client('dynamodb')``).

        :param sort_key_name: the string RANGE key; ``None`` creates a table whose key is the
            partition key alone (its locks all have the sort key ``'-'``).
        :param partition_key_type: the partition key's type: ``'S'`` (string, the published
            layout), ``'N'`` (number) or ``'B'`` (binary).
        :param billing_mode: ``'PROVISIONED'`` (with ``read_capacity`` / ``write_capacity``) or
            ``'PAY_PER_REQUEST'`` (on-demand; the capacities are ignored).
        :param exist_ok: accept an existing table with the right key schema (TTL is then
            turned on if it is off).
        :returns: the table description from ``describe_table``.
        :raises DynamoDBLockError: ``UNKNOWN`` when the table exists (and ``exist_ok`` is
            False), exists with another key schema, or cannot be created; ``reason`` tells
            which (``TABLE_EXISTS``, ``WRONG_KEY_SCHEMA``, ...).
        :raises TypeError, ValueError: for bad arguments.
        """
        require_low_level_client(dynamodb_client)
        description: Dict[str, Any] = run_admin(dynamodb_client, creating_table(
            table_name, partition_key_name, sort_key_name, ttl_attribute_name, read_capacity, write_capacity,
            billing_mode, exist_ok, partition_key_type))
        return description

    @classmethod
    def for_table(cls, dynamodb_resource: DynamoDBServiceResource, table_name: str,
                  **kwargs: Any) -> 'DynamoDBLockClient':
        """A client for an existing table, whatever its key schema: the partition key's name and
        type, whether there is a sort key and its name, and the TTL attribute are read from the
        table (``DescribeTable`` and ``DescribeTimeToLive``), so they need not be repeated here.

        ``kwargs`` are the other arguments of the constructor (``owner_name``, the periods, ...);
        ``ttl_attribute_name`` may be given to override the table's TTL attribute (a difference
        is logged as a warning), and is the default ``expiry_time`` when the table has no TTL.
        On a table without a sort key, leave ``sort_key`` at its default ``'-'``; on a number
        key table, keys are ``int`` or ``Decimal``, on a binary one ``bytes``.

        :raises TypeError: for ``partition_key_name``, ``sort_key_name`` or
            ``partition_key_type`` in ``kwargs`` (they come from the table), and as the
            constructor does.
        :raises DynamoDBLockError: ``UNKNOWN`` when the table cannot be described (``reason``
            ``TABLE_NOT_FOUND``, ``ACCESS_DENIED``, ...) or when its key schema cannot hold
            locks (``reason`` ``WRONG_KEY_SCHEMA``: a sort key that is not a string, a key named
            like one of the lock's own attributes).
        """
        check_for_table_arguments(table_name, kwargs)
        low_level_client = getattr(getattr(dynamodb_resource, 'meta', None), 'client', None)
        if low_level_client is None:
            raise TypeError('for_table takes a boto3 DynamoDB resource (boto3.resource("dynamodb")), '
                            f'not {type(dynamodb_resource).__name__}')
        return cls(dynamodb_resource, **run_admin(low_level_client, describing_table(table_name, kwargs)))

    # -- the published private helpers ---------------------------------------------------

    def _get_item_from_lock(self, lock: BaseDynamoDBLock) -> Item:
        """The table item for ``lock``, in boto3's Python types."""
        return self._item_of(lock)

    def _get_lock_from_item(self, item: Mapping[str, Any]) -> BaseDynamoDBLock:
        """A :class:`BaseDynamoDBLock` describing a table item."""
        return BaseDynamoDBLock(**self._schema.lock_fields(item, self._settings.lease_duration))

    _base_lock_class = BaseDynamoDBLock

    # -- the driver ----------------------------------------------------------------------

    def _run(self, protocol: Protocol[T], wake: Optional[threading.Event] = None,
             cancel: Optional[threading.Event] = None, pending: Any = None) -> T:
        """Run a protocol to its end in this thread; ``wake`` cuts its sleeps short, ``cancel``
        ends it (see ``acquire_lock``); ``pending``: the future of the call a settling protocol
        settles.

        An exception raised while performing an effect (an interrupt, a bug in a hook) is thrown
        into the protocol, which accounts for what was in flight before it lets it through.
        """
        steps = Steps(wake if wake is not None else self._shutdown, cancel, pending)
        relay_done = None
        if cancel is not None:
            steps.kick = threading.Event()
            relay_done = _relay(cancel, (steps.wake, steps.kick))
        try:
            step = self._advance(protocol, None)
            while True:
                try:
                    while not isinstance(step, Done):
                        value, steps.thrown = self._perform(step, steps)
                        step = self._advance(protocol, value, steps.thrown)
                    break
                except BaseException as exc:
                    if protocol.gi_frame is None:   # type: ignore[attr-defined]  # it came from the protocol
                        raise
                    # A Ctrl-C that landed in this loop rather than in a call: the protocol still
                    # accounts for it (a mutex it holds is given back, a write in flight undone).
                    steps.thrown = exc
                    step = self._advance(protocol, None, exc)
        finally:
            if relay_done is not None:
                relay_done.set()
        result: T = step.value
        return result

    def _perform(self, effect: Any, steps: Steps) -> Tuple[Any, Optional[BaseException]]:
        """Perform one effect: (its result, None), or (None, what it raised)."""
        try:
            if isinstance(effect, Call):
                if steps.cancel is None:
                    return self._store.send(effect.request), None
                return self._send_cancellably(effect.request, steps), None
            if isinstance(effect, Sleep):
                woken = self._clock.sleep(effect.seconds, steps.wake)
                if steps.cancel is not None and steps.cancel.is_set():
                    raise cancelled_error()
                return self._woken(steps.wake, woken), None
            if isinstance(effect, Submit):
                return self._submit_heartbeats(effect.locks), None
            if isinstance(effect, Hold):
                return effect.lock._mutex.acquire(blocking=effect.wait), None
            if isinstance(effect, Settle):
                self._settle(effect.protocol, steps, effect.follow_up)
                return None, None
            if isinstance(effect, Pending):
                return (steps.pending.result() if steps.pending is not None else None), None
            raise TypeError(f'unknown effect {effect!r}')
        except BaseException as exc:
            return None, exc

    def _send_cancellably(self, request: Any, steps: Steps) -> Any:
        """Send on a worker thread and wait for the answer or the cancel event, whichever comes
        first; a cancelled call's future is kept (``steps.inflight``) for the undo to wait on."""
        steps.kick.clear()
        future = self._call_executor.submit(self._store.send, request)
        future.add_done_callback(lambda _: steps.kick.set())
        steps.kick.wait()
        if future.done():
            return future.result()
        steps.inflight = future
        raise cancelled_error()

    def _settle(self, protocol: Protocol[None], steps: Steps, follow_up: bool) -> None:
        """Run undo or follow-up work on a thread of its own, which no interruption of the caller
        stops; wait for it (not for a ``follow_up``), except that an interrupted caller (Ctrl-C,
        cancel) waits at most ``_SETTLE_GRACE`` seconds and leaves the rest to the background."""
        def settle() -> None:
            try:
                self._run(protocol, pending=steps.inflight)
            except BaseException:
                logger.exception('Settling an interrupted call in lock client %s failed', self._owner_name)
            finally:
                self._settling.discard(threading.current_thread())

        thread = threading.Thread(target=settle, name='DynamoDBLockClient-settle', daemon=True)
        self._settling.add(thread)
        thread.start()
        if not follow_up:
            thread.join(self._SETTLE_GRACE if steps.interrupted else None)

    #: Seconds an interrupted caller waits for the undo of what it left in flight.
    _SETTLE_GRACE = 0.5

    def wait_settled(self, timeout: Optional[float] = None) -> bool:
        """Wait until the undo of every interrupted call of this client is done (see
        "Interruptions" in the documentation): True when it is, False after ``timeout`` real
        seconds (a thread join: real time, whatever clock the client was given)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        for thread in list(self._settling):
            thread.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
        return not self._settling

    def _extend(self, lock: DynamoDBLock) -> None:
        self._check_process()
        with lock.thread_lock:
            self._run(self._extend_protocol(lock))

    def _guarded_write(self, lock: DynamoDBLock, items: Any, typed: bool, options: Mapping[str, Any],
                       client_token: Optional[str]) -> Dict[str, Any]:
        response: Dict[str, Any] = self._run(
            self._guard_protocol(lock, items, typed, options, client_token, self._store.wire))
        return response

    def _new_lock(self, **fields: Any) -> DynamoDBLock:
        return DynamoDBLock(lock_client=self, **fields)

    def _acquire(self, partition_key: PartitionKey, sort_key: str, arguments: _config.AcquireArguments,
                 app_callback: Optional[AppCallback], raise_context_exception: bool,
                 timeout_is_error: bool, reentrant: bool = False,
                 cancel: Optional[threading.Event] = None) -> Optional[DynamoDBLock]:
        holder = threading.current_thread()   # not get_ident(): an ident is reused by later threads
        held, waiter = self._queue(partition_key, sort_key, arguments, holder, reentrant, _Waiter)
        if held is not None:
            return held
        return self._run(self._acquisition(waiter, holder, timeout_is_error, app_callback, raise_context_exception,
                                           self._new_lock), waiter, cancel)

    def _install(self, lock: DynamoDBLock, previous: Optional[DynamoDBLock]) -> DynamoDBLock:
        """The last step of an acquisition, after :meth:`_adopt` (see ``_installing``)."""
        return self._run(self._installing(lock, previous))

    def _dispatch_callback(self, callback: Callable[..., Any], lock: Any, code: str) -> None:
        """Run ``callback(code, lock)`` on the callback executor, logging what it raises."""
        def run_callback() -> None:
            try:
                callback(code, lock)
            except Exception:
                logger.exception('app_callback(%s, %s) raised', code, lock.unique_identifier)

        self._app_callback_executor.submit(run_callback)

    # -- heartbeats ----------------------------------------------------------------------

    def _run_loop(self, name: str, make_round: Callable[[], Protocol[None]]) -> None:
        self._run(background_loop(name, self._owner_name, make_round, self._shutdown.is_set,
                                  self._settings.heartbeat_period))

    def _submit_heartbeats(self, locks: Sequence[DynamoDBLock]) -> int:
        """Hand a group of heartbeats to a worker; returns how many were skipped as in flight."""
        due = self._take_due(locks)
        if due:
            try:
                self._heartbeat_executor.submit(self._heartbeat_task, due)
            except RuntimeError:   # the executor was shut down by close()
                self._done_with(due)
        return len(locks) - len(due)

    def _heartbeat_task(self, locks: List[DynamoDBLock]) -> None:
        try:
            self._renew(locks)
        except Exception as exc:
            self._done_with(locks, exc)
        else:
            self._done_with(locks)

    def _renew(self, locks: Sequence[DynamoDBLock]) -> None:
        self._run(self._renewing(locks))

    # -- acquiring the first free of several keys ----------------------------------------

    def acquire_first_lock(
        self,
        partition_key: PartitionKey,
        sort_keys: Sequence[str],
        retry_period: Optional[datetime.timedelta] = None,
        retry_timeout: Optional[datetime.timedelta] = None,
        additional_attributes: Optional[Mapping[str, Any]] = None,
        app_callback: Optional[AppCallback] = None,
        raise_context_exception: bool = False,
        *,
        cancel: Optional[threading.Event] = None,
        wake: Optional[threading.Event] = None,
    ) -> DynamoDBLock:
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
        :param cancel: as for :meth:`acquire_lock`.
        :param wake: a ``threading.Event``; setting it makes a waiting call look at every key at
            once (it is cleared when used). Without it, :meth:`close` also ends the wait at once;
            with it, at the next poll.
        :returns: the held lock; its ``sort_key`` says which key it is.
        :raises TypeError, ValueError: for bad arguments (any key), before anything is written.
        :raises DynamoDBLockError: ``ACQUIRE_TIMEOUT`` when every key was held for
            ``retry_timeout``; otherwise as :meth:`acquire_lock`.
        """
        attempts = self._first_attempts(partition_key, sort_keys, retry_period, retry_timeout,
                                        additional_attributes, app_callback)
        if cancel is not None and cancel.is_set():
            raise cancelled_error()
        acquiring = self._first_acquisition(attempts, threading.current_thread(), app_callback,
                                            raise_context_exception, self._new_lock)
        if wake is None and cancel is not None:
            wake = threading.Event()     # the cancel relay sets it: never the client's shutdown event
        return self._run(acquiring, wake, cancel)

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
