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
"""
from __future__ import annotations

import concurrent.futures
import datetime
import logging
import socket
import threading
import urllib.parse
import uuid
from decimal import Decimal
from types import TracebackType
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Type

from botocore.exceptions import BotoCoreError, ClientError

from . import _validation as validation
from ._clock import Clock, SystemClock
from ._store import (
    COL_LEASE_DURATION,
    COL_OWNER_NAME,
    COL_RECORD_VERSION_NUMBER,
    ConditionFailed,
    MAX_BATCH_STATEMENTS,
    LockTable,
    Renewal,
    error_code,
    outcome_unknown,
)

__all__ = ['DynamoDBLockClient', 'BaseDynamoDBLock', 'DynamoDBLock', 'DynamoDBLockError']

logger = logging.getLogger(__name__)

AppCallback = Callable[[str, 'DynamoDBLock'], Any]

# How many of the versions whose write may or may not have landed (lost answers) a condition
# names; DynamoDB allows up to 100 operands in IN. All of them are remembered (up to
# _MAX_REMEMBERED_VERSIONS) to recognise our own row when a condition fails.
_MAX_UNCONFIRMED_VERSIONS = 20
_MAX_REMEMBERED_VERSIONS = 10_000
# A statement throttled inside a successful BatchExecuteStatement is not retried by botocore:
# the client sends it again, after 50 ms and then 100 ms, like botocore's own backoff.
_BATCH_STATEMENT_ATTEMPTS = 3
_BATCH_RETRY_BASE_DELAY_S = 0.05
_RETRYABLE_STATEMENT_ERRORS = frozenset({'ThrottlingError', 'ProvisionedThroughputExceeded', 'RequestLimitExceeded'})


class DynamoDBLockError(Exception):
    """Raised by the lock client; ``code`` says what went wrong, ``message`` explains.

    ``code`` is one of the class constants below. The original exception, where there is
    one, is chained as ``__cause__``.
    """

    CLIENT_SHUTDOWN = 'CLIENT_SHUTDOWN'
    ACQUIRE_TIMEOUT = 'ACQUIRE_TIMEOUT'
    LOCK_NOT_OWNED = 'LOCK_NOT_OWNED'
    LOCK_STOLEN = 'LOCK_STOLEN'
    LOCK_IN_DANGER = 'LOCK_IN_DANGER'
    UNKNOWN = 'UNKNOWN'

    def __init__(self, code: str = 'UNKNOWN', message: str = 'Unknown error') -> None:
        super().__init__(code, message)
        self.code = code
        self.message = message

    def __str__(self) -> str:
        return f'{self.__class__.__name__}: {self.code} - {self.message}'


class BaseDynamoDBLock:
    """A lock as it is stored in the table, typically one held by somebody else.

    It is a description only: it cannot be released or renewed.
    """

    def __init__(
        self,
        partition_key: str,
        sort_key: str,
        owner_name: str,
        lease_duration: float,
        record_version_number: str,
        expiry_time: int,
        additional_attributes: Optional[Mapping[str, Any]],
    ) -> None:
        self.partition_key = partition_key
        self.sort_key = sort_key
        self.owner_name = owner_name
        self.lease_duration = float(lease_duration)
        self.record_version_number = record_version_number
        self.expiry_time = int(expiry_time)
        self.additional_attributes: Dict[str, Any] = dict(additional_attributes or {})
        self.unique_identifier = urllib.parse.quote(partition_key) + '|' + urllib.parse.quote(sort_key)

    def __str__(self) -> str:
        return (
            f'{self.__class__.__name__}({self.unique_identifier}, owner={self.owner_name}, '
            f'version={self.record_version_number}, lease={self.lease_duration}s, '
            f'expiry_time={self.expiry_time})'
        )

    __repr__ = __str__


class DynamoDBLock(BaseDynamoDBLock):
    """A lock held by this process, as returned by :meth:`DynamoDBLockClient.acquire_lock`.

    Use it as a context manager, or call :meth:`release` when done. ``status`` moves from
    ``PENDING`` to ``LOCKED`` when acquired; to ``IN_DANGER`` when heartbeats have failed for
    longer than the client's ``safe_period`` (and back to ``LOCKED`` when one succeeds); to
    ``RELEASED`` when released; to ``INVALID`` when another client has taken it.
    """

    PENDING = 'PENDING'
    LOCKED = 'LOCKED'
    RELEASED = 'RELEASED'
    IN_DANGER = 'IN_DANGER'
    INVALID = 'INVALID'

    def __init__(
        self,
        partition_key: str,
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
        super().__init__(
            partition_key, sort_key, owner_name, lease_duration,
            record_version_number, expiry_time, additional_attributes,
        )
        self.app_callback = app_callback
        self.lock_client = lock_client
        self.raise_context_exception = raise_context_exception
        clock = lock_client._clock if isinstance(lock_client, DynamoDBLockClient) else SystemClock()
        self.last_updated_time = clock.monotonic()
        self.thread_lock = threading.RLock()
        self.status = self.PENDING
        # Guards status, version and timestamps for the quick in-memory transitions; held
        # only briefly, never across a call to DynamoDB (thread_lock serialises those).
        self._state_guard = threading.Lock()
        # Versions we tried to write whose answer never arrived: any of them may be in the row.
        self._unconfirmed_versions: List[str] = []
        # A release whose delete may have landed although it was reported as failed (UNKNOWN).
        self._delete_maybe_applied = False

    def release(self, best_effort: bool = True) -> None:
        """Release this lock: see :meth:`DynamoDBLockClient.release_lock`."""
        self.lock_client.release_lock(self, best_effort)

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
        if exc_value is None or self.raise_context_exception:
            return False
        if not isinstance(exc_value, Exception):
            return False
        logger.warning(
            'Suppressed an exception raised while holding %s (raise_context_exception=False)',
            self.unique_identifier,
            exc_info=(exc_type, exc_value, traceback),
        )
        return True


class DynamoDBLockClient:
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
    :raises TypeError, ValueError: for arguments that cannot work (non-positive periods,
        ``heartbeat_tps`` of 0, a heartbeat period not shorter than the lease, an expiry
        period shorter than the lease, ...). Unsafe but workable settings are logged as
        warnings.
    """

    _DEFAULT_TABLE_NAME = 'DynamoDBLockTable'
    _DEFAULT_PARTITION_KEY_NAME = 'lock_key'
    _DEFAULT_SORT_KEY_NAME = 'sort_key'
    _DEFAULT_TTL_ATTRIBUTE_NAME = 'expiry_time'
    _DEFAULT_HEARTBEAT_PERIOD = datetime.timedelta(seconds=5)
    _DEFAULT_SAFE_PERIOD = datetime.timedelta(seconds=20)
    _DEFAULT_LEASE_DURATION = datetime.timedelta(seconds=30)
    _DEFAULT_EXPIRY_PERIOD = datetime.timedelta(hours=1)
    _DEFAULT_HEARTBEAT_TPS = -1
    _DEFAULT_APP_CALLBACK_THREADPOOL_SIZE = 5
    _DEFAULT_READ_CAPACITY = 5
    _DEFAULT_WRITE_CAPACITY = 5
    _DEFAULT_SORT_KEY_VALUE = '-'

    _COL_OWNER_NAME = COL_OWNER_NAME
    _COL_LEASE_DURATION = COL_LEASE_DURATION
    _COL_RECORD_VERSION_NUMBER = COL_RECORD_VERSION_NUMBER

    def __init__(
        self,
        dynamodb_resource: Any,
        table_name: str = _DEFAULT_TABLE_NAME,
        partition_key_name: str = _DEFAULT_PARTITION_KEY_NAME,
        sort_key_name: str = _DEFAULT_SORT_KEY_NAME,
        ttl_attribute_name: str = _DEFAULT_TTL_ATTRIBUTE_NAME,
        owner_name: Optional[str] = None,
        heartbeat_period: datetime.timedelta = _DEFAULT_HEARTBEAT_PERIOD,
        safe_period: datetime.timedelta = _DEFAULT_SAFE_PERIOD,
        lease_duration: datetime.timedelta = _DEFAULT_LEASE_DURATION,
        expiry_period: datetime.timedelta = _DEFAULT_EXPIRY_PERIOD,
        heartbeat_tps: float = _DEFAULT_HEARTBEAT_TPS,
        app_callback_executor: Optional[concurrent.futures.Executor] = None,
        *,
        clock: Optional[Clock] = None,
        heartbeat_workers: Optional[int] = None,
        heartbeat_batch_size: int = 1,
    ) -> None:
        if dynamodb_resource is None:
            raise TypeError('dynamodb_resource must be a boto3 DynamoDB resource, not None')
        low_level_client = getattr(getattr(dynamodb_resource, 'meta', None), 'client', None)
        if low_level_client is None:
            raise TypeError(
                'dynamodb_resource must be a boto3 DynamoDB resource (boto3.resource("dynamodb")); '
                f'got {type(dynamodb_resource).__name__}'
            )
        validation.require_text('table_name', table_name)
        attribute_names = {
            'partition_key_name': validation.require_attribute_name('partition_key_name', partition_key_name),
            'sort_key_name': validation.require_attribute_name('sort_key_name', sort_key_name),
            'ttl_attribute_name': validation.require_attribute_name('ttl_attribute_name', ttl_attribute_name),
        }
        reserved = {COL_OWNER_NAME, COL_LEASE_DURATION, COL_RECORD_VERSION_NUMBER}
        for argument, value in attribute_names.items():
            if value in reserved:
                raise ValueError(f'{argument}={value!r} collides with the lock attribute of that name')
        if len(set(attribute_names.values())) != len(attribute_names):
            raise ValueError(f'partition, sort and TTL attribute names must differ: {attribute_names}')
        if owner_name is None:
            owner_name = socket.getfqdn() + uuid.uuid4().hex
        validation.require_text('owner_name', owner_name)
        self._heartbeat_period_s = validation.require_duration('heartbeat_period', heartbeat_period)
        self._safe_period_s = validation.require_duration('safe_period', safe_period)
        self._lease_duration_s = validation.require_duration('lease_duration', lease_duration)
        self._expiry_period_s = validation.require_duration('expiry_period', expiry_period)
        if isinstance(heartbeat_tps, bool) or not isinstance(heartbeat_tps, (int, float)):
            raise TypeError(f'heartbeat_tps must be a number, not {type(heartbeat_tps).__name__}')
        if heartbeat_tps != -1 and not heartbeat_tps > 0:
            raise ValueError(f'heartbeat_tps must be -1 (adaptive) or positive, got {heartbeat_tps!r}')
        if heartbeat_workers is None:
            pool_size = getattr(getattr(low_level_client.meta, 'config', None), 'max_pool_connections', None)
            heartbeat_workers = pool_size if isinstance(pool_size, int) and pool_size > 0 else 10
        if isinstance(heartbeat_workers, bool) or not isinstance(heartbeat_workers, int) or heartbeat_workers < 1:
            raise ValueError(f'heartbeat_workers must be a positive int, got {heartbeat_workers!r}')
        if (isinstance(heartbeat_batch_size, bool) or not isinstance(heartbeat_batch_size, int)
                or not 1 <= heartbeat_batch_size <= MAX_BATCH_STATEMENTS):
            raise ValueError(
                f'heartbeat_batch_size must be an int from 1 to {MAX_BATCH_STATEMENTS}, got {heartbeat_batch_size!r}'
            )
        if app_callback_executor is not None and not callable(getattr(app_callback_executor, 'submit', None)):
            raise TypeError('app_callback_executor must be a concurrent.futures.Executor (or None)')
        self._check_period_consistency()

        self._dynamodb_resource = dynamodb_resource
        self._table_name = table_name
        self._partition_key_name = partition_key_name
        self._sort_key_name = sort_key_name
        self._ttl_attribute_name = ttl_attribute_name
        self._owner_name = owner_name
        self._heartbeat_period = heartbeat_period
        self._safe_period = safe_period
        self._lease_duration = lease_duration
        self._expiry_period = expiry_period
        self._heartbeat_tps = heartbeat_tps
        self._heartbeat_batch_size = heartbeat_batch_size
        # Cleared for good when DynamoDB refuses BatchExecuteStatement (permission, engine).
        self._batching = heartbeat_batch_size > 1
        self._clock: Clock = clock if clock is not None else SystemClock()
        self._table = LockTable(low_level_client, table_name, partition_key_name, sort_key_name, ttl_attribute_name)

        self._locks: Dict[str, DynamoDBLock] = {}
        self._waiters: Dict[str, List[threading.Event]] = {}
        self._registry_guard = threading.Lock()
        self._heartbeats_in_flight: set = set()
        self._in_flight_guard = threading.Lock()
        self._shutdown = threading.Event()
        self._close_guard = threading.Lock()
        self._closed = False

        self._owns_app_callback_executor = app_callback_executor is None
        self._app_callback_executor = app_callback_executor or concurrent.futures.ThreadPoolExecutor(
            max_workers=self._DEFAULT_APP_CALLBACK_THREADPOOL_SIZE,
            thread_name_prefix='DynamoDBLockClient-callback',
        )
        self._heartbeat_executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=heartbeat_workers,
            thread_name_prefix='DynamoDBLockClient-heartbeat',
        )
        self._heartbeat_sender = threading.Thread(
            target=self._run_loop,
            args=('heartbeat sender', self._send_heartbeat_round),
            name='DynamoDBLockClient-heartbeat-sender',
            daemon=True,
        )
        self._heartbeat_checker = threading.Thread(
            target=self._run_loop,
            args=('heartbeat checker', self._check_heartbeat_round),
            name='DynamoDBLockClient-heartbeat-checker',
            daemon=True,
        )
        self._heartbeat_sender.start()
        self._heartbeat_checker.start()
        logger.info(
            'Started lock client %s on table %s (heartbeat %ss, safe %ss, lease %ss)',
            self._owner_name, self._table_name, self._heartbeat_period_s, self._safe_period_s,
            self._lease_duration_s,
        )

    def _check_period_consistency(self) -> None:
        heartbeat, safe, lease, expiry = (
            self._heartbeat_period_s, self._safe_period_s, self._lease_duration_s, self._expiry_period_s,
        )
        if heartbeat >= lease:
            raise ValueError(
                f'heartbeat_period ({heartbeat}s) must be shorter than lease_duration ({lease}s): '
                'otherwise other clients take the lock over between heartbeats'
            )
        if expiry < lease:
            raise ValueError(
                f'expiry_period ({expiry}s) must not be shorter than lease_duration ({lease}s): '
                'the row would expire, and be taken over, while the lock is still held'
            )
        if heartbeat > lease / 3:
            logger.warning(
                'heartbeat_period (%ss) is not well below lease_duration (%ss): one or two slow '
                'heartbeats can let another client take the lock over; a third of the lease or '
                'less is recommended', heartbeat, lease,
            )
        if safe >= lease:
            logger.warning(
                'safe_period (%ss) is not shorter than lease_duration (%ss): LOCK_IN_DANGER would '
                'come after other clients may already have taken the lock over', safe, lease,
            )
        elif safe <= heartbeat:
            logger.warning(
                'safe_period (%ss) is not longer than heartbeat_period (%ss): healthy locks will '
                'be reported IN_DANGER between heartbeats', safe, heartbeat,
            )

    # -- public API ----------------------------------------------------------------------

    def acquire_lock(
        self,
        partition_key: str,
        sort_key: str = _DEFAULT_SORT_KEY_VALUE,
        retry_period: Optional[datetime.timedelta] = None,
        retry_timeout: Optional[datetime.timedelta] = None,
        additional_attributes: Optional[Mapping[str, Any]] = None,
        app_callback: Optional[AppCallback] = None,
        raise_context_exception: bool = False,
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
        :raises TypeError, ValueError: for bad arguments, before anything is written.
        :raises DynamoDBLockError: ``ACQUIRE_TIMEOUT`` when ``retry_timeout`` is spent,
            ``CLIENT_SHUTDOWN`` after :meth:`close`, ``UNKNOWN`` for any other failure (the
            cause is chained), including a missing table.
        """
        retry_period_s, retry_timeout_s, item = self._prepare_acquire(
            partition_key, sort_key, retry_period, retry_timeout, additional_attributes, app_callback,
        )
        lock, blocking = self._acquire(partition_key, sort_key, item, retry_period_s, retry_timeout_s,
                                       app_callback, raise_context_exception)
        if lock is None:
            raise DynamoDBLockError(
                DynamoDBLockError.ACQUIRE_TIMEOUT,
                f'Could not acquire {self._describe_key(partition_key, sort_key)} within '
                f'{retry_timeout_s}s: held by {self._owner_of(blocking)}',
            )
        return lock

    def try_acquire_lock(
        self,
        partition_key: str,
        sort_key: str = _DEFAULT_SORT_KEY_VALUE,
        additional_attributes: Optional[Mapping[str, Any]] = None,
        app_callback: Optional[AppCallback] = None,
        raise_context_exception: bool = False,
    ) -> Optional[DynamoDBLock]:
        """Acquire the lock if it can be had right now; never waits.

        :returns: the held :class:`DynamoDBLock`, or None when someone else holds the lock.
        :raises: as :meth:`acquire_lock`, except that a held lock is not an error.
        """
        _, _, item = self._prepare_acquire(
            partition_key, sort_key, None, datetime.timedelta(0), additional_attributes, app_callback,
        )
        lock, _ = self._acquire(partition_key, sort_key, item, 0.0, 0.0, app_callback, raise_context_exception)
        return lock

    def release_lock(self, lock: DynamoDBLock, best_effort: bool = True) -> None:
        """Release ``lock``: one delete, conditioned on the row still carrying its version.

        A lock that is not ``LOCKED`` or ``IN_DANGER`` (already released, stolen) is left
        alone. The lock may be released after :meth:`close`.

        With ``best_effort=True`` (the default) nothing is raised: failures are logged and the
        lock is forgotten locally either way; a row that could not be deleted is taken over by
        others after its lease. With ``best_effort=False``:

        :raises DynamoDBLockError: ``LOCK_NOT_OWNED`` when this client does not hold the lock;
            ``LOCK_STOLEN`` when another client has taken it over (the new holder's row is
            left alone); ``UNKNOWN`` for other failures, in which case the lock is still held
            and kept alive, so the release can be retried.
        """
        if not isinstance(lock, DynamoDBLock):
            raise TypeError(f'release_lock takes a DynamoDBLock, not {type(lock).__name__}')
        with lock.thread_lock:
            with lock._state_guard:
                status = lock.status
            if status not in (DynamoDBLock.LOCKED, DynamoDBLock.IN_DANGER):
                logger.debug('Not releasing %s: its status is %s', lock.unique_identifier, status)
                return
            if lock.lock_client is not self or not self._is_registered(lock):
                message = f'{lock.unique_identifier} is not held by this client ({self._owner_name})'
                if best_effort:
                    logger.warning('Not releasing: %s', message)
                    return
                raise DynamoDBLockError(DynamoDBLockError.LOCK_NOT_OWNED, message)
            try:
                self._delete_own_row(lock)
            except ConditionFailed as refused:
                self._forget(lock, DynamoDBLock.INVALID)
                message = (
                    f'{lock.unique_identifier} was taken over by {self._owner_of(refused.item)} '
                    'before it was released; their row was left alone'
                )
                if best_effort:
                    logger.warning('Lock stolen: %s', message)
                    return
                raise DynamoDBLockError(DynamoDBLockError.LOCK_STOLEN, message) from None
            except (ClientError, BotoCoreError) as exc:
                if best_effort:
                    self._forget(lock, DynamoDBLock.RELEASED)
                    logger.warning(
                        'Could not delete the row of %s (%s); forgetting it anyway: others take it '
                        'over after its lease of %ss', lock.unique_identifier, exc, lock.lease_duration,
                    )
                    return
                raise DynamoDBLockError(
                    DynamoDBLockError.UNKNOWN,
                    f'Could not release {lock.unique_identifier}: {self._explain(exc)}; '
                    'the lock is still held and kept alive',
                ) from exc
            self._forget(lock, DynamoDBLock.RELEASED)
            logger.info('Released %s', lock.unique_identifier)

    def close(self, release_locks: bool = False) -> None:
        """Stop the background threads, promptly; safe to call twice and from any thread.

        Held locks are not released unless ``release_locks`` is True (then best effort): a
        lock left behind is taken over by others after its lease, and its row is deleted by
        DynamoDB's TTL. The callback executor is shut down if the client created it.
        """
        with self._close_guard:
            if self._closed:
                return
            self._closed = True
        logger.info('Closing lock client %s', self._owner_name)
        self._shutdown.set()
        with self._registry_guard:
            waiters = [event for events in self._waiters.values() for event in events]
        for event in waiters:
            event.set()
        for thread in (self._heartbeat_sender, self._heartbeat_checker):
            if thread is not threading.current_thread():
                thread.join()
        self._heartbeat_executor.shutdown(wait=False, cancel_futures=True)
        if release_locks:
            for lock in self._held_locks():
                self.release_lock(lock, best_effort=True)
        if self._owns_app_callback_executor:
            self._app_callback_executor.shutdown(wait=False)
        logger.info('Closed lock client %s', self._owner_name)

    def get_lock(self, partition_key: str, sort_key: str = _DEFAULT_SORT_KEY_VALUE) -> Optional[BaseDynamoDBLock]:
        """Who holds ``(partition_key, sort_key)`` right now: a consistent read.

        :returns: a :class:`BaseDynamoDBLock` describing the row (it cannot be used to release
            the lock), or None when there is no row.
        :raises DynamoDBLockError: ``UNKNOWN`` when the read fails.
        """
        self._check_key(partition_key, sort_key)
        try:
            item = self._table.get(partition_key, sort_key)
        except (ClientError, BotoCoreError) as exc:
            raise DynamoDBLockError(DynamoDBLockError.UNKNOWN, self._explain(exc)) from exc
        return None if item is None else self._get_lock_from_item(item)

    def list_locks(self) -> Iterator[BaseDynamoDBLock]:
        """Every lock in the table (a consistent, paginated scan), as :class:`BaseDynamoDBLock`.

        Rows that are not locks (no ``record_version_number``) are skipped.

        :raises DynamoDBLockError: ``UNKNOWN`` when the scan fails.
        """
        try:
            for item in self._table.scan():
                if COL_RECORD_VERSION_NUMBER in item and self._partition_key_name in item:
                    yield self._get_lock_from_item(item)
        except (ClientError, BotoCoreError) as exc:
            raise DynamoDBLockError(DynamoDBLockError.UNKNOWN, self._explain(exc)) from exc

    def force_release_lock(self, lock: BaseDynamoDBLock) -> bool:
        """Delete a lock's row, whoever holds it, but only if it still carries ``lock``'s version.

        An operator's tool: pass what :meth:`get_lock` or :meth:`list_locks` returned. A lock
        that was renewed, released or taken over since is never deleted.

        :returns: True when the row was deleted, False when it had changed or was gone.
        :raises DynamoDBLockError: ``UNKNOWN`` when the delete fails.
        """
        if not isinstance(lock, BaseDynamoDBLock):
            raise TypeError(f'force_release_lock takes a BaseDynamoDBLock, not {type(lock).__name__}')
        try:
            self._table.delete_if_version(lock.partition_key, lock.sort_key, [lock.record_version_number])
        except ConditionFailed:
            return False
        except (ClientError, BotoCoreError) as exc:
            raise DynamoDBLockError(DynamoDBLockError.UNKNOWN, self._explain(exc)) from exc
        logger.warning('Force-released %s (version %s, owner %s)',
                       lock.unique_identifier, lock.record_version_number, lock.owner_name)
        self._wake_waiters(lock.unique_identifier)
        return True

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
        dynamodb_client: Any,
        table_name: str = _DEFAULT_TABLE_NAME,
        partition_key_name: str = _DEFAULT_PARTITION_KEY_NAME,
        sort_key_name: str = _DEFAULT_SORT_KEY_NAME,
        ttl_attribute_name: str = _DEFAULT_TTL_ATTRIBUTE_NAME,
        read_capacity: int = _DEFAULT_READ_CAPACITY,
        write_capacity: int = _DEFAULT_WRITE_CAPACITY,
        *,
        billing_mode: str = 'PROVISIONED',
        exist_ok: bool = False,
    ) -> Dict[str, Any]:
        """Create the lock table, wait until it is ACTIVE, and turn TTL on for ``ttl_attribute_name``.

        Meant for deploy time or tests; it takes the low-level client
        (``boto3.client('dynamodb')``).

        :param billing_mode: ``'PROVISIONED'`` (with ``read_capacity`` / ``write_capacity``) or
            ``'PAY_PER_REQUEST'`` (on-demand; the capacities are ignored).
        :param exist_ok: accept an existing table with the right key schema (TTL is then
            turned on if it is off).
        :returns: the table description from ``describe_table``.
        :raises DynamoDBLockError: ``UNKNOWN`` when the table exists (and ``exist_ok`` is
            False), exists with another key schema, or cannot be created.
        :raises TypeError, ValueError: for bad arguments.
        """
        validation.require_text('table_name', table_name)
        for argument, value in (('partition_key_name', partition_key_name), ('sort_key_name', sort_key_name),
                                ('ttl_attribute_name', ttl_attribute_name)):
            validation.require_attribute_name(argument, value)
        if billing_mode not in ('PROVISIONED', 'PAY_PER_REQUEST'):
            raise ValueError(f"billing_mode must be 'PROVISIONED' or 'PAY_PER_REQUEST', got {billing_mode!r}")
        params: Dict[str, Any] = {
            'TableName': table_name,
            'KeySchema': [
                {'AttributeName': partition_key_name, 'KeyType': 'HASH'},
                {'AttributeName': sort_key_name, 'KeyType': 'RANGE'},
            ],
            'AttributeDefinitions': [
                {'AttributeName': partition_key_name, 'AttributeType': 'S'},
                {'AttributeName': sort_key_name, 'AttributeType': 'S'},
            ],
            'BillingMode': billing_mode,
        }
        if billing_mode == 'PROVISIONED':
            for argument, value in (('read_capacity', read_capacity), ('write_capacity', write_capacity)):
                if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                    raise ValueError(f'{argument} must be a positive int, got {value!r}')
            params['ProvisionedThroughput'] = {
                'ReadCapacityUnits': read_capacity, 'WriteCapacityUnits': write_capacity,
            }
        try:
            try:
                dynamodb_client.create_table(**params)
                logger.info('Creating lock table %s', table_name)
            except ClientError as exc:
                if error_code(exc) != 'ResourceInUseException':
                    raise
                cls._check_existing_table(dynamodb_client, table_name, partition_key_name, sort_key_name, exist_ok)
            dynamodb_client.get_waiter('table_exists').wait(TableName=table_name)
            ttl = dynamodb_client.describe_time_to_live(TableName=table_name).get('TimeToLiveDescription', {})
            if ttl.get('TimeToLiveStatus') not in ('ENABLED', 'ENABLING') or \
                    ttl.get('AttributeName') != ttl_attribute_name:
                dynamodb_client.update_time_to_live(
                    TableName=table_name,
                    TimeToLiveSpecification={'Enabled': True, 'AttributeName': ttl_attribute_name},
                )
                dynamodb_client.get_waiter('table_exists').wait(TableName=table_name)
            return dynamodb_client.describe_table(TableName=table_name)['Table']
        except (ClientError, BotoCoreError) as exc:
            raise DynamoDBLockError(
                DynamoDBLockError.UNKNOWN, f'Could not create the lock table {table_name!r}: {exc}',
            ) from exc

    @staticmethod
    def _check_existing_table(
        dynamodb_client: Any, table_name: str, partition_key_name: str, sort_key_name: str, exist_ok: bool,
    ) -> None:
        table = dynamodb_client.describe_table(TableName=table_name)['Table']
        key_schema = {key['KeyType']: key['AttributeName'] for key in table.get('KeySchema', [])}
        types = {definition['AttributeName']: definition['AttributeType']
                 for definition in table.get('AttributeDefinitions', [])}
        expected = {'HASH': partition_key_name, 'RANGE': sort_key_name}
        if key_schema != expected or any(types.get(name) != 'S' for name in expected.values()):
            raise DynamoDBLockError(
                DynamoDBLockError.UNKNOWN,
                f'Table {table_name!r} already exists with key schema {key_schema} '
                f'(types {types}); a lock table needs a string HASH key {partition_key_name!r} and '
                f'a string RANGE key {sort_key_name!r}',
            )
        if not exist_ok:
            raise DynamoDBLockError(
                DynamoDBLockError.UNKNOWN,
                f'Table {table_name!r} already exists (pass exist_ok=True to accept it)',
            )
        logger.info('Lock table %s already exists with the right key schema', table_name)

    # -- item conversion -----------------------------------------------------------------

    def _get_item_from_lock(self, lock: BaseDynamoDBLock) -> Dict[str, Any]:
        """The table item for ``lock``, in boto3's Python types."""
        item: Dict[str, Any] = dict(lock.additional_attributes)
        item.update({
            self._partition_key_name: lock.partition_key,
            self._sort_key_name: lock.sort_key,
            COL_OWNER_NAME: lock.owner_name,
            COL_LEASE_DURATION: Decimal(repr(float(lock.lease_duration))),
            COL_RECORD_VERSION_NUMBER: lock.record_version_number,
            self._ttl_attribute_name: int(lock.expiry_time),
        })
        return item

    def _get_lock_from_item(self, item: Mapping[str, Any]) -> BaseDynamoDBLock:
        """A :class:`BaseDynamoDBLock` describing a table item."""
        own_attributes = {
            self._partition_key_name, self._sort_key_name, self._ttl_attribute_name,
            COL_OWNER_NAME, COL_LEASE_DURATION, COL_RECORD_VERSION_NUMBER,
        }
        return BaseDynamoDBLock(
            partition_key=item[self._partition_key_name],
            sort_key=item[self._sort_key_name],
            owner_name=item.get(COL_OWNER_NAME, ''),
            lease_duration=float(item.get(COL_LEASE_DURATION, self._lease_duration_s)),
            record_version_number=item.get(COL_RECORD_VERSION_NUMBER, ''),
            expiry_time=int(item.get(self._ttl_attribute_name, 0)),
            additional_attributes={name: value for name, value in item.items() if name not in own_attributes},
        )

    # -- acquiring -----------------------------------------------------------------------

    def _check_key(self, partition_key: Any, sort_key: Any) -> None:
        validation.require_key('partition_key', partition_key, validation.MAX_PARTITION_KEY_BYTES)
        validation.require_key('sort_key', sort_key, validation.MAX_SORT_KEY_BYTES)

    def _prepare_acquire(
        self,
        partition_key: Any,
        sort_key: Any,
        retry_period: Optional[datetime.timedelta],
        retry_timeout: Optional[datetime.timedelta],
        additional_attributes: Optional[Mapping[str, Any]],
        app_callback: Optional[AppCallback],
    ) -> tuple[float, float, Dict[str, Any]]:
        """Validate acquire arguments; return retry period, timeout and the item to write."""
        self._check_key(partition_key, sort_key)
        retry_period_s = (self._heartbeat_period_s if retry_period is None
                          else validation.require_duration('retry_period', retry_period, allow_zero=True))
        retry_timeout_s = (self._lease_duration_s + self._heartbeat_period_s if retry_timeout is None
                           else validation.require_duration('retry_timeout', retry_timeout, allow_zero=True))
        validation.require_callable('app_callback', app_callback)
        if additional_attributes is None:
            additional_attributes = {}
        if not isinstance(additional_attributes, Mapping):
            raise TypeError(f'additional_attributes must be a dict, not {type(additional_attributes).__name__}')
        reserved = {
            self._partition_key_name, self._sort_key_name, self._ttl_attribute_name,
            COL_OWNER_NAME, COL_LEASE_DURATION, COL_RECORD_VERSION_NUMBER,
        }
        for name in additional_attributes:
            validation.require_attribute_name('additional_attributes key', name)
            if name in reserved:
                raise ValueError(
                    f'additional_attributes may not set {name!r}: it is one of the lock\'s own '
                    f'attributes {sorted(reserved)}'
                )
        try:
            self._table.check_storable(additional_attributes)
        except TypeError as exc:
            raise TypeError(f'additional_attributes cannot be stored in DynamoDB: {exc}') from exc
        template = BaseDynamoDBLock(
            partition_key, sort_key, self._owner_name, self._lease_duration_s, '', 0, additional_attributes,
        )
        return retry_period_s, retry_timeout_s, self._get_item_from_lock(template)

    def _acquire(
        self,
        partition_key: str,
        sort_key: str,
        item_template: Dict[str, Any],
        retry_period_s: float,
        retry_timeout_s: float,
        app_callback: Optional[AppCallback],
        raise_context_exception: bool,
    ) -> tuple[Optional[DynamoDBLock], Optional[Dict[str, Any]]]:
        """The acquire loop: (the held lock, None), or (None, the row in the way) on timeout."""
        unique_identifier = BaseDynamoDBLock(partition_key, sort_key, '', 0, '', 0, None).unique_identifier
        clock = self._clock
        deadline = clock.monotonic() + retry_timeout_s
        wake = threading.Event()
        self._add_waiter(unique_identifier, wake)
        blocking: Optional[Dict[str, Any]] = None   # the row in the way; None: believed free
        watched_version: Optional[str] = None
        watched_since = 0.0
        immediate_retries = 0
        try:
            while True:
                self._raise_if_closed()
                outcome: Any = _WAIT
                if blocking is None:
                    outcome = self._write_lock(item_template, None)
                else:
                    version = blocking.get(COL_RECORD_VERSION_NUMBER)
                    now = clock.monotonic()
                    if version != watched_version:
                        watched_version, watched_since = version, now
                    if self._is_abandoned(blocking, now - watched_since):
                        logger.info(
                            'Taking over %s from %s: version %s unchanged for %.3fs',
                            unique_identifier, self._owner_of(blocking), version, now - watched_since,
                        )
                        outcome = self._write_lock(item_template, version)
                if isinstance(outcome, _WrittenItem):
                    return self._register_acquired(outcome, app_callback, raise_context_exception), None
                if outcome is not _WAIT and immediate_retries < 3:
                    # A write was refused: judge the row now in the way (None: it is gone) at once.
                    blocking = outcome
                    immediate_retries += 1
                    continue
                remaining = deadline - clock.monotonic()
                if remaining <= 0:
                    return None, blocking
                logger.debug('%s is held by %s; retrying in %.3fs', unique_identifier,
                             self._owner_of(blocking), min(retry_period_s, remaining))
                released_here = clock.sleep(min(retry_period_s, remaining), wake)
                wake.clear()
                immediate_retries = 0
                self._raise_if_closed()
                if released_here:
                    # This client just deleted the row: go straight to the conditional put.
                    blocking = None
                else:
                    blocking = self._read_for_acquire(partition_key, sort_key)
        finally:
            self._remove_waiter(unique_identifier, wake)

    def _write_lock(
        self, item_template: Dict[str, Any], expected_version: Optional[str],
    ) -> Any:
        """One conditional put of a new version of the lock.

        :returns: the written item (a ``_WrittenItem``) on success; otherwise the row that was
            in the way (a dict), or None when the row is gone.
        """
        new_version = str(uuid.uuid4())
        item = dict(item_template)
        item[COL_RECORD_VERSION_NUMBER] = new_version
        item[self._ttl_attribute_name] = int(self._clock.time() + self._expiry_period_s)
        partition_key, sort_key = item[self._partition_key_name], item[self._sort_key_name]
        # Others time our lease from when they first see the row, which can be long before the
        # answer arrives (a lost answer, a retry after backoff): time our own side from here.
        attempt_started = self._clock.monotonic()
        try:
            if expected_version is None:
                self._table.put_if_absent(item)
            else:
                self._table.put_if_version(item, expected_version)
        except ConditionFailed as refused:
            if refused.item is not None and refused.item.get(COL_RECORD_VERSION_NUMBER) == new_version:
                # Our put landed but its answer was lost; botocore's retry then met our own row.
                return _WrittenItem(item, attempt_started)
            if refused.item is None and expected_version is None:
                # An engine that ignores ALL_OLD: find out what is in the way.
                return self._read_for_acquire(partition_key, sort_key)
            return refused.item
        except (ClientError, BotoCoreError) as exc:
            if outcome_unknown(exc):
                try:
                    current = self._table.get(partition_key, sort_key)
                except (ClientError, BotoCoreError):
                    current = None
                if current is not None and current.get(COL_RECORD_VERSION_NUMBER) == new_version:
                    return _WrittenItem(item, attempt_started)
                self._delete_orphan(partition_key, sort_key, new_version)
            raise DynamoDBLockError(
                DynamoDBLockError.UNKNOWN,
                f'Could not acquire {self._describe_key(partition_key, sort_key)}: {self._explain(exc)}',
            ) from exc
        return _WrittenItem(item, attempt_started)

    def _delete_orphan(self, partition_key: str, sort_key: str, version: str) -> None:
        """Best effort: delete a row that a put we are reporting as failed may have written.

        Conditioned on the version that put wrote, so it can only ever remove our own row,
        which would otherwise block everybody, this client included, for a whole lease.
        """
        try:
            self._table.delete_if_version(partition_key, sort_key, [version])
        except ConditionFailed:
            pass
        except (ClientError, BotoCoreError) as exc:
            logger.warning('Could not clean up a possible row of %s after a failed acquire; it is '
                           'taken over after its lease: %s', self._describe_key(partition_key, sort_key), exc)

    def _read_for_acquire(self, partition_key: str, sort_key: str) -> Optional[Dict[str, Any]]:
        try:
            return self._table.get(partition_key, sort_key)
        except (ClientError, BotoCoreError) as exc:
            raise DynamoDBLockError(
                DynamoDBLockError.UNKNOWN,
                f'Could not read {self._describe_key(partition_key, sort_key)}: {self._explain(exc)}',
            ) from exc

    def _is_abandoned(self, item: Mapping[str, Any], unchanged_for: float) -> bool:
        """Whether the holder of ``item`` is presumed dead.

        True once its version has stayed the same for its own stored lease duration, as timed
        by this process, or once its TTL epoch has passed.
        """
        try:
            lease = float(item.get(COL_LEASE_DURATION, self._lease_duration_s))
        except (TypeError, ValueError):
            lease = self._lease_duration_s
        if unchanged_for >= lease:
            return True
        expiry_time = item.get(self._ttl_attribute_name)
        try:
            return expiry_time is not None and float(expiry_time) < self._clock.time()
        except (TypeError, ValueError):
            return False

    def _register_acquired(
        self, written: '_WrittenItem', app_callback: Optional[AppCallback], raise_context_exception: bool,
    ) -> DynamoDBLock:
        base = self._get_lock_from_item(written.item)
        lock = DynamoDBLock(
            base.partition_key, base.sort_key, base.owner_name, base.lease_duration,
            base.record_version_number, base.expiry_time, base.additional_attributes,
            app_callback, self, raise_context_exception,
        )
        lock.status = DynamoDBLock.LOCKED
        lock.last_updated_time = written.attempt_started
        with self._registry_guard:
            previous = self._locks.get(lock.unique_identifier)
            self._locks[lock.unique_identifier] = lock
        logger.info('Acquired %s (version %s)', lock.unique_identifier, lock.record_version_number)
        if previous is not None and previous is not lock:
            self._invalidate_replaced(previous)
        if self._shutdown.is_set():
            # close() ran while we were writing: report shutdown, and don't leave the row held.
            self.release_lock(lock, best_effort=True)
            self._raise_if_closed()
        return lock

    def _invalidate_replaced(self, previous: DynamoDBLock) -> None:
        """An older lock object of this client on the same key whose row our put just replaced.

        Our conditional put succeeded, so the row no longer carries any of its versions: it
        lost the lock (its row was deleted or taken over) without having noticed yet.
        """
        with previous.thread_lock:   # waits for a heartbeat of it in flight, which may notice first
            with previous._state_guard:
                was_held = previous.status in (DynamoDBLock.LOCKED, DynamoDBLock.IN_DANGER)
                # A release of it reported as failed (UNKNOWN) may have deleted the row: then
                # it was released, and that is why our put found the key free.
                released_by_its_owner = was_held and previous._delete_maybe_applied
                if was_held:
                    previous.status = DynamoDBLock.RELEASED if released_by_its_owner else DynamoDBLock.INVALID
                    previous._unconfirmed_versions.clear()
        if released_by_its_owner:
            logger.info('Lock %s was released by the earlier release whose answer was lost',
                        previous.unique_identifier)
        elif was_held:
            logger.warning('Lock %s was lost: this client acquired the key again while that lock '
                           'object still held it', previous.unique_identifier)
            self._dispatch_callback(previous, DynamoDBLockError.LOCK_STOLEN)

    # -- releasing -----------------------------------------------------------------------

    def _delete_own_row(self, lock: DynamoDBLock) -> None:
        """Delete the lock's row if it carries one of our versions.

        :raises ConditionFailed: when someone else's row is there (a missing row counts as
            released: either our delete landed and its answer was lost, or the row expired).
        """
        versions = [lock.record_version_number, *lock._unconfirmed_versions[-_MAX_UNCONFIRMED_VERSIONS:]]
        try:
            try:
                self._table.delete_if_version(lock.partition_key, lock.sort_key, versions)
            except ConditionFailed as refused:
                row_version = refused.item.get(COL_RECORD_VERSION_NUMBER) if refused.item else None
                if row_version is None or row_version not in lock._unconfirmed_versions:
                    raise
                # An old renewal of ours that landed unconfirmed, beyond the condition's list.
                self._table.delete_if_version(lock.partition_key, lock.sort_key, [row_version])
        except ConditionFailed as refused:
            if refused.item is None:
                logger.info('The row of %s was already gone when it was released', lock.unique_identifier)
            elif (refused.retried or lock._delete_maybe_applied) and self._lease_still_running(lock):
                logger.info('The delete of %s met the next holder (%s): an earlier attempt had '
                            'released it', lock.unique_identifier, self._owner_of(refused.item))
            else:
                raise
        except (ClientError, BotoCoreError) as exc:
            if not outcome_unknown(exc):
                raise
            lock._delete_maybe_applied = True
            current = self._table.get(lock.partition_key, lock.sort_key)
            if current is not None and current.get(COL_RECORD_VERSION_NUMBER) in (
                    lock.record_version_number, *lock._unconfirmed_versions):
                raise
            if current is not None and not self._lease_still_running(lock):
                raise ConditionFailed(current) from exc

    def _lease_still_running(self, lock: DynamoDBLock) -> bool:
        """Whether nobody can have taken ``lock`` over yet: its last renewal is less than a lease ago.

        A waiter takes a lock over only after seeing one version unchanged for the lease on its
        own clock, counted from after that version was written; ``last_updated_time`` is taken
        before the write is sent. So a foreign row found within the lease was not a takeover:
        our own (retried) delete freed the lock and somebody acquired it since.
        """
        return self._clock.monotonic() - lock.last_updated_time < lock.lease_duration

    def _forget(self, lock: DynamoDBLock, status: str) -> None:
        """Set a final status and drop the lock from the registry (only this very object)."""
        with lock._state_guard:
            lock.status = status
            lock._unconfirmed_versions.clear()
        with self._registry_guard:
            if self._locks.get(lock.unique_identifier) is lock:
                del self._locks[lock.unique_identifier]
        self._wake_waiters(lock.unique_identifier)

    # -- heartbeats ----------------------------------------------------------------------

    def _run_loop(self, name: str, one_round: Callable[[], None]) -> None:
        """Run ``one_round`` until shutdown; an exception is logged and the loop goes on."""
        logger.info('Lock client %s: %s started', self._owner_name, name)
        while not self._shutdown.is_set():
            try:
                one_round()
            except Exception:
                logger.exception('Lock client %s: %s round failed; carrying on', self._owner_name, name)
                self._clock.sleep(self._heartbeat_period_s, self._shutdown)
        logger.info('Lock client %s: %s stopped', self._owner_name, name)

    def _send_heartbeat_round(self) -> None:
        """Start one heartbeat per held lock, spread over the period, then wait out the period.

        Heartbeats go out in groups of ``heartbeat_batch_size``; a group leaves when the
        pacing (``heartbeat_tps``, or an even spread) allows its first heartbeat.
        """
        clock = self._clock
        round_start = clock.monotonic()
        locks = self._held_locks()
        if locks:
            if self._heartbeat_tps == -1:
                interval = self._heartbeat_period_s / len(locks)
            else:
                interval = 1.0 / self._heartbeat_tps
            batch_size = self._heartbeat_batch_size if self._batching else 1
            skipped = 0
            for index in range(0, len(locks), batch_size):
                delay = round_start + index * interval - clock.monotonic()
                # Below a millisecond a wait costs more than it paces: send a small burst.
                if delay > 0.001 and clock.sleep(delay, self._shutdown):
                    return
                if self._shutdown.is_set():
                    return
                skipped += self._submit_heartbeats(locks[index:index + batch_size])
            overrun = clock.monotonic() - round_start - self._heartbeat_period_s
            if overrun > 0:
                logger.warning(
                    'A round of %d heartbeats at heartbeat_tps=%s took %.3fs longer than the '
                    'heartbeat period', len(locks), self._heartbeat_tps, overrun,
                )
            if skipped:
                logger.warning(
                    'Heartbeats are falling behind: %d of %d locks still had last period\'s heartbeat '
                    'in flight (heartbeat_workers, heartbeat_batch_size or more clients would help)',
                    skipped, len(locks),
                )
        clock.sleep(round_start + self._heartbeat_period_s - clock.monotonic(), self._shutdown)

    def _submit_heartbeats(self, locks: Sequence[DynamoDBLock]) -> int:
        """Hand a group of heartbeats to a worker; returns how many were skipped as in flight."""
        with self._in_flight_guard:
            due = [lock for lock in locks if lock not in self._heartbeats_in_flight]
            self._heartbeats_in_flight.update(due)
        for lock in locks:
            if lock not in due:
                logger.debug('Heartbeat of %s still in flight; skipping this round', lock.unique_identifier)
        if due:
            try:
                self._heartbeat_executor.submit(self._heartbeat_task, due)
            except RuntimeError:   # the executor was shut down by close()
                with self._in_flight_guard:
                    self._heartbeats_in_flight.difference_update(due)
        return len(locks) - len(due)

    def _heartbeat_task(self, locks: List[DynamoDBLock]) -> None:
        try:
            if self._batching:
                self._send_heartbeat_batch(locks)
            else:
                for lock in locks:
                    self._send_heartbeat(lock)
        except Exception:
            logger.exception('Heartbeats of %s failed unexpectedly',
                             ', '.join(lock.unique_identifier for lock in locks))
        finally:
            with self._in_flight_guard:
                self._heartbeats_in_flight.difference_update(locks)

    def _prepare_heartbeat(self, lock: DynamoDBLock) -> Optional[Renewal]:
        """The renewal of a lock we still hold, or None; call with ``lock.thread_lock`` held."""
        with lock._state_guard:
            if lock.status not in (DynamoDBLock.LOCKED, DynamoDBLock.IN_DANGER):
                return None
            expected_versions = [lock.record_version_number,
                                 *lock._unconfirmed_versions[-_MAX_UNCONFIRMED_VERSIONS:]]
        if not self._is_registered(lock):
            return None
        return Renewal(lock.partition_key, lock.sort_key, expected_versions, str(uuid.uuid4()),
                       int(self._clock.time() + self._expiry_period_s))

    def _send_heartbeat(self, lock: DynamoDBLock) -> None:
        """Renew one lock: a new version and TTL, conditioned on the version we hold."""
        with lock.thread_lock:
            renewal = self._prepare_heartbeat(lock)
            if renewal is None:
                return
            attempt_started = self._clock.monotonic()
            outcome: Optional[Exception] = None
            try:
                self._table.renew(*renewal)
            except (ConditionFailed, ClientError, BotoCoreError) as exc:
                outcome = exc
            self._settle_heartbeat(lock, renewal, attempt_started, outcome)

    def _send_heartbeat_batch(self, locks: Sequence[DynamoDBLock]) -> None:
        """Renew a group of locks in one ``BatchExecuteStatement`` call.

        A lock whose ``thread_lock`` is busy (a release of it is under way) is not waited for
        while holding the others: it gets a heartbeat of its own afterwards.
        """
        held: List[DynamoDBLock] = []
        busy: List[DynamoDBLock] = []
        try:
            for lock in locks:
                (held if lock.thread_lock.acquire(blocking=False) else busy).append(lock)
            pending = [(lock, renewal) for lock in held
                       if (renewal := self._prepare_heartbeat(lock)) is not None]
            for attempt in range(_BATCH_STATEMENT_ATTEMPTS):
                if not pending:
                    break
                attempt_started = self._clock.monotonic()
                try:
                    outcomes = self._renew_batch([renewal for _, renewal in pending])
                except _BatchingUnavailable as unavailable:
                    for lock, renewal in pending:
                        if outcome_unknown(unavailable.cause):
                            self._settle_heartbeat_safely(lock, renewal, attempt_started, unavailable.cause)
                        busy.append(lock)    # renewed on its own below, with UpdateItem
                    break
                last_attempt = attempt + 1 == _BATCH_STATEMENT_ATTEMPTS
                retry = []
                for (lock, renewal), outcome in zip(pending, outcomes):
                    if not last_attempt and self._statement_retryable(outcome):
                        retry.append(((lock, renewal), outcome))
                    else:
                        self._settle_heartbeat_safely(lock, renewal, attempt_started, outcome)
                pending = [entry for entry, _ in retry]
                if pending and self._clock.sleep(_BATCH_RETRY_BASE_DELAY_S * 2 ** attempt, self._shutdown):
                    for (lock, renewal), outcome in retry:   # closing: no more retries
                        self._settle_heartbeat_safely(lock, renewal, attempt_started, outcome)
                    break
        finally:
            for lock in held:
                lock.thread_lock.release()
        for lock in busy:
            self._send_heartbeat(lock)

    def _renew_batch(self, renewals: List[Renewal]) -> List[Optional[Exception]]:
        """One ``BatchExecuteStatement`` call; a failure of the whole call is every statement's.

        :raises _BatchingUnavailable: when DynamoDB refuses the operation itself (no
            ``dynamodb:PartiQLUpdate`` permission, or an engine without PartiQL); batching is
            then switched off for the life of the client.
        """
        try:
            return self._table.renew_many(renewals)
        except (ClientError, BotoCoreError) as exc:
            if error_code(exc) not in ('AccessDeniedException', 'UnknownOperationException'):
                return [exc] * len(renewals)
            if self._batching:
                self._batching = False
                logger.warning(
                    'heartbeat_batch_size=%d needs PartiQL (BatchExecuteStatement) and the IAM '
                    'permission dynamodb:PartiQLUpdate on table %s; renewing one lock per UpdateItem '
                    'call from now on: %s', self._heartbeat_batch_size, self._table_name, exc,
                )
            raise _BatchingUnavailable(exc) from exc

    @staticmethod
    def _statement_retryable(outcome: Optional[Exception]) -> bool:
        """A statement refused for throughput inside a successful batch, and surely not applied."""
        return (isinstance(outcome, ClientError) and outcome.operation_name == 'BatchExecuteStatement'
                and error_code(outcome) in _RETRYABLE_STATEMENT_ERRORS and not outcome_unknown(outcome))

    def _settle_heartbeat_safely(self, lock: DynamoDBLock, renewal: Renewal, attempt_started: float,
                                 outcome: Optional[Exception]) -> None:
        """:meth:`_settle_heartbeat`, logging any exception so the rest of a batch is settled."""
        try:
            self._settle_heartbeat(lock, renewal, attempt_started, outcome)
        except Exception:
            # This renewal may have been applied: remember its version, so it is not taken for a theft.
            logger.exception('Settling the heartbeat of %s failed', lock.unique_identifier)
            self._remember_unconfirmed(lock, renewal.new_version)

    @staticmethod
    def _remember_unconfirmed(lock: DynamoDBLock, version: str) -> None:
        """A renewal that may have landed unanswered: later conditions accept its version too."""
        with lock._state_guard:
            lock._unconfirmed_versions.append(version)
            del lock._unconfirmed_versions[:-_MAX_REMEMBERED_VERSIONS]

    def _settle_heartbeat(self, lock: DynamoDBLock, renewal: Renewal, attempt_started: float,
                          outcome: Optional[Exception]) -> None:
        """Apply the answer to one renewal; call with ``lock.thread_lock`` held.

        A refused condition means the lock was taken over (LOCK_STOLEN), unless the row
        carries a version we wrote ourselves and never heard back about. Any other failure
        is logged; the lock stays as it is, and the checker flags it IN_DANGER once it has
        gone unrenewed for ``safe_period``.
        """
        new_version = renewal.new_version
        if isinstance(outcome, ConditionFailed):
            refused = outcome
            row_version = refused.item.get(COL_RECORD_VERSION_NUMBER) if refused.item else None
            if row_version == new_version:
                logger.debug('Heartbeat of %s landed though its answer was lost', lock.unique_identifier)
            elif row_version is not None and row_version in lock._unconfirmed_versions:
                # An older renewal of ours landed unconfirmed: adopt it; renew next period.
                with lock._state_guard:
                    lock.record_version_number = row_version
                    lock._unconfirmed_versions.clear()
                logger.info('Heartbeat of %s found an earlier unconfirmed renewal of its own',
                            lock.unique_identifier)
                return
            elif lock._delete_maybe_applied and (refused.item is None or self._lease_still_running(lock)):
                # Our own release, reported as failed (UNKNOWN), had gone through after all.
                self._forget(lock, DynamoDBLock.RELEASED)
                logger.info('Lock %s was released by the earlier release whose answer was lost',
                            lock.unique_identifier)
                return
            else:
                self._forget(lock, DynamoDBLock.INVALID)
                logger.warning('Lock %s was stolen by %s', lock.unique_identifier, self._owner_of(refused.item))
                self._dispatch_callback(lock, DynamoDBLockError.LOCK_STOLEN)
                return
        elif outcome is not None:
            if outcome_unknown(outcome):
                self._remember_unconfirmed(lock, new_version)
            logger.warning('Heartbeat of %s failed, will retry next period: %s',
                           lock.unique_identifier, self._explain(outcome))
            return
        with lock._state_guard:
            lock.record_version_number = new_version
            lock.expiry_time = renewal.new_expiry_time
            lock.last_updated_time = attempt_started
            lock._unconfirmed_versions.clear()
            recovered = lock.status == DynamoDBLock.IN_DANGER
            lock.status = DynamoDBLock.LOCKED
        if recovered:
            logger.info('Lock %s is safe again after a successful heartbeat', lock.unique_identifier)
        logger.debug('Heartbeat of %s: version %s', lock.unique_identifier, new_version)

    def _check_heartbeat_round(self) -> None:
        """Flag locks not renewed for ``safe_period`` as IN_DANGER, then wait a period."""
        now = self._clock.monotonic()
        for lock in self._held_locks():
            with lock._state_guard:
                in_danger = (lock.status == DynamoDBLock.LOCKED
                             and now - lock.last_updated_time > self._safe_period_s)
                if in_danger:
                    lock.status = DynamoDBLock.IN_DANGER
            if in_danger:
                logger.warning(
                    'Lock %s is in danger: not renewed for %.1fs (safe period %ss)',
                    lock.unique_identifier, now - lock.last_updated_time, self._safe_period_s,
                )
                self._dispatch_callback(lock, DynamoDBLockError.LOCK_IN_DANGER)
        self._clock.sleep(self._heartbeat_period_s, self._shutdown)

    def _dispatch_callback(self, lock: DynamoDBLock, code: str) -> None:
        """Run ``lock.app_callback(code, lock)`` on the callback executor; never raises."""
        callback = lock.app_callback
        if callback is None:
            return

        def run_callback() -> None:
            try:
                callback(code, lock)
            except Exception:
                logger.exception('app_callback(%s, %s) raised', code, lock.unique_identifier)

        try:
            self._app_callback_executor.submit(run_callback)
        except Exception:
            logger.exception('Could not submit app_callback(%s, %s)', code, lock.unique_identifier)

    # -- registry ------------------------------------------------------------------------

    def _held_locks(self) -> List[DynamoDBLock]:
        with self._registry_guard:
            return list(self._locks.values())

    def _is_registered(self, lock: DynamoDBLock) -> bool:
        with self._registry_guard:
            return self._locks.get(lock.unique_identifier) is lock

    def _add_waiter(self, unique_identifier: str, event: threading.Event) -> None:
        with self._registry_guard:
            self._waiters.setdefault(unique_identifier, []).append(event)

    def _remove_waiter(self, unique_identifier: str, event: threading.Event) -> None:
        with self._registry_guard:
            events = self._waiters.get(unique_identifier, [])
            if event in events:
                events.remove(event)
            if not events:
                self._waiters.pop(unique_identifier, None)

    def _wake_waiters(self, unique_identifier: str) -> None:
        """Wake the thread that has waited longest for this key in this client.

        Only one: waking them all would have all but one spend a failed conditional put. The
        others keep polling, and are woken in turn by later releases.
        """
        with self._registry_guard:
            events = self._waiters.get(unique_identifier)
            longest_waiting = events[0] if events else None
        if longest_waiting is not None:
            longest_waiting.set()

    # -- helpers -------------------------------------------------------------------------

    def _raise_if_closed(self) -> None:
        if self._shutdown.is_set():
            raise DynamoDBLockError(DynamoDBLockError.CLIENT_SHUTDOWN, 'The lock client has been closed')

    @staticmethod
    def _owner_of(item: Optional[Mapping[str, Any]]) -> str:
        if not item:
            return 'nobody'
        return str(item.get(COL_OWNER_NAME, 'an unknown owner'))

    def _describe_key(self, partition_key: str, sort_key: str) -> str:
        return f'lock {partition_key!r}/{sort_key!r} in table {self._table_name!r}'

    def _explain(self, exc: BaseException) -> str:
        """A message for a DynamoDB failure, with the fix for the common mistakes."""
        code = error_code(exc)
        if code == 'ResourceNotFoundException':
            return (
                f'table {self._table_name!r} does not exist: create it with '
                'DynamoDBLockClient.create_dynamodb_table(boto3.client("dynamodb"), '
                f'table_name={self._table_name!r}) or `dynamodb-lock create-table --table '
                f'{self._table_name}` ({exc})'
            )
        if code == 'ValidationException' and 'key' in str(exc).lower():
            return (
                f'table {self._table_name!r} does not have the expected key schema (string HASH key '
                f'{self._partition_key_name!r}, string RANGE key {self._sort_key_name!r}): {exc}'
            )
        return str(exc)


_WAIT = object()   # the acquire loop's "nothing to write yet" outcome


class _BatchingUnavailable(Exception):
    """DynamoDB refused ``BatchExecuteStatement`` itself; ``cause`` is its error."""

    def __init__(self, cause: Exception) -> None:
        super().__init__(cause)
        self.cause = cause


class _WrittenItem:
    """A lock item that a conditional put has just stored, and when that put was started."""

    __slots__ = ('item', 'attempt_started')

    def __init__(self, item: Dict[str, Any], attempt_started: float) -> None:
        self.item = item
        self.attempt_started = attempt_started
