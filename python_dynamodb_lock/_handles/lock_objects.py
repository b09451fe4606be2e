"""The lock objects the two clients hand out: :class:`DynamoDBLock` (threaded) and
:class:`AsyncDynamoDBLock` (asyncio), what they add to :class:`~python_dynamodb_lock._common.locks.HeldLock`:
how a lock is released, renewed and written under, through its client.

Published at :mod:`python_dynamodb_lock.python_dynamodb_lock` and :mod:`python_dynamodb_lock.aio`
(their ``__module__`` says so); the clients import them from here.
"""
from __future__ import annotations

import asyncio
import threading
from types import TracebackType
from typing import (TYPE_CHECKING, Any, Awaitable, Callable, Dict, Iterable, Mapping, Optional, Protocol, Sequence,
                    Type)

from .._common.clock import Clock, SystemClock
from .._core.guard import single_action
from .._core.state import null_guard
from .._model.errors import DynamoDBLockError
from .._common.locks import HeldLock, suppress_after_block
from .._model.schema import PartitionKey

if TYPE_CHECKING:   # named, not imported: the clients import this module
    DynamoDBLockClient = Any
    AsyncDynamoDBLockClient = Any

__all__ = ['AppCallback', 'AsyncAppCallback', 'AsyncDynamoDBLock', 'AsyncLockCalls', 'DynamoDBLock', 'LockCalls',
           'made_for', 'made_for_tasks']

AppCallback = Callable[[str, 'DynamoDBLock'], Any]
AsyncAppCallback = Callable[[str, 'AsyncDynamoDBLock'], Any]


class LockCalls(Protocol):
    """What a threaded lock calls to be renewed and written under: its client's
    :class:`~python_dynamodb_lock._handles.calls.ThreadCalls`."""

    def extend(self, lock: 'DynamoDBLock') -> None: ...

    def update_attributes(self, lock: 'DynamoDBLock', values: Optional[Mapping[str, Any]],
                          remove: Iterable[str]) -> None: ...

    def guarded_write(self, lock: 'DynamoDBLock', items: Sequence[Mapping[str, Any]], typed: bool,
                      options: Mapping[str, Any], client_token: Optional[str]) -> Dict[str, Any]: ...


class AsyncLockCalls(Protocol):
    """The asyncio twin of :class:`LockCalls` (:class:`~python_dynamodb_lock._handles.calls.TaskCalls`)."""

    def extend(self, lock: 'AsyncDynamoDBLock') -> Awaitable[None]: ...

    def update_attributes(self, lock: 'AsyncDynamoDBLock', values: Optional[Mapping[str, Any]],
                          remove: Iterable[str]) -> Awaitable[None]: ...

    def guarded_write(self, lock: 'AsyncDynamoDBLock', items: Sequence[Mapping[str, Any]], typed: bool,
                      options: Mapping[str, Any], client_token: Optional[str]) -> Awaitable[Dict[str, Any]]: ...


def made_for(calls: LockCalls, lock: 'DynamoDBLock') -> 'DynamoDBLock':
    """``lock``, handed out by the client whose calls are ``calls``: what it renews and writes
    through (a lock object made by hand has none, and is not held)."""
    lock._calls = calls
    return lock


def made_for_tasks(calls: AsyncLockCalls, lock: 'AsyncDynamoDBLock') -> 'AsyncDynamoDBLock':
    """:func:`made_for`, for the asyncio client's locks."""
    lock._calls = calls
    return lock


def _not_handed_out(lock: HeldLock) -> DynamoDBLockError:
    return DynamoDBLockError(DynamoDBLockError.LOCK_NOT_OWNED,
                             f'{lock.unique_identifier} was not handed out by a lock client: it is not held')


def _clock_of(lock_client: Any) -> Clock:
    """The clock of the client a lock is made for (``clock``, a property of the lock clients), or
    the system clock for a stand-in client."""
    if isinstance(getattr(type(lock_client), 'clock', None), property):
        clock: Clock = lock_client.clock
        return clock
    return SystemClock()


class DynamoDBLock(HeldLock):
    """A lock held by this process, as returned by :meth:`DynamoDBLockClient.acquire_lock`.

    Use it as a context manager, or call :meth:`release` when done. ``status`` moves from
    ``PENDING`` to ``LOCKED`` when acquired; to ``IN_DANGER`` when heartbeats have failed for
    longer than the client's ``safe_period`` (and back to ``LOCKED`` when one succeeds); to
    ``RELEASED`` when released; to ``INVALID`` when another client has taken it.
    """

    def __init__(self, partition_key: PartitionKey, sort_key: str, owner_name: str, lease_duration: float,
                 record_version_number: str, expiry_time: int, additional_attributes: Optional[Mapping[str, Any]],
                 app_callback: Optional[AppCallback], lock_client: 'DynamoDBLockClient',
                 raise_context_exception: bool = False) -> None:
        super().__init__(
            partition_key, sort_key, owner_name, lease_duration, record_version_number, expiry_time,
            additional_attributes, app_callback, lock_client, raise_context_exception, clock=_clock_of(lock_client),
        )
        # Serialises the calls to DynamoDB about this lock (a release and a heartbeat).
        self.thread_lock = threading.RLock()
        self._calls: Optional[LockCalls] = None    # the client's, when it hands the lock out (made_for)

    def _through(self) -> LockCalls:
        if self._calls is None:
            raise _not_handed_out(self)
        return self._calls

    def release(self, best_effort: bool = True, *, attributes: Optional[Mapping[str, Any]] = None,
                keep_row: Optional[bool] = None) -> bool:
        """Release this lock: see :meth:`DynamoDBLockClient.release_lock` (True when this call
        released it)."""
        # The published call when neither is given (a stand-in lock_client may take no more).
        extra = {name: value for name, value in (('attributes', attributes), ('keep_row', keep_row))
                 if value is not None}
        released: bool = self.lock_client.release_lock(self, best_effort, **extra)
        return released

    def update_attributes(self, values: Optional[Mapping[str, Any]] = None, remove: Iterable[str] = ()) -> None:
        """Set ``values`` and remove the names in ``remove`` among the lock's additional
        attributes, in one heartbeat of the lock (see "Data on a lock" in the usage page).

        :raises TypeError, ValueError: for bad arguments, before anything is written.
        :raises DynamoDBLockError: as :meth:`extend`.
        """
        self._through().update_attributes(self, values, remove)

    def extend(self) -> None:
        """Renew this lock now, in the calling thread, and say whether it worked: for
        applications that keep their locks alive themselves (``background_heartbeats=False``,
        AWS Lambda), or that want to be sure before a long step.

        :raises DynamoDBLockError: ``LOCK_STOLEN`` when the lock was lost (``holder`` says to
            whom), ``LOCK_NOT_OWNED`` when it was released, ``UNKNOWN`` when DynamoDB failed
            (the lock may still be held until its lease runs out: try again).
        """
        self._through().extend(self)

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
        response: Dict[str, Any] = self._through().guarded_write(self, TransactItems, typed, options,
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


class AsyncDynamoDBLock(HeldLock):
    """A lock held by this process through an :class:`AsyncDynamoDBLockClient`.

    Release it with ``await lock.release()``, or use ``async with``. Statuses, attributes and
    :meth:`lease_remaining` are those of
    :class:`~python_dynamodb_lock.python_dynamodb_lock.DynamoDBLock`.
    """

    def __init__(self, partition_key: PartitionKey, sort_key: str, owner_name: str, lease_duration: float,
                 record_version_number: str, expiry_time: int, additional_attributes: Optional[Mapping[str, Any]],
                 app_callback: Optional[AsyncAppCallback], lock_client: 'AsyncDynamoDBLockClient',
                 raise_context_exception: bool = False) -> None:
        super().__init__(
            partition_key, sort_key, owner_name, lease_duration, record_version_number, expiry_time,
            additional_attributes, app_callback, lock_client, raise_context_exception,
            clock=lock_client.clock, guard=null_guard(),
        )
        #: Serialises the calls to DynamoDB about this lock (a release, a heartbeat, a guarded
        #: write): the twin of the threaded lock's ``thread_lock``. Holding it holds them off.
        self.task_lock = asyncio.Lock()
        self._calls: Optional[AsyncLockCalls] = None    # the client's, when it hands the lock out (made_for)

    def _through(self) -> AsyncLockCalls:
        if self._calls is None:
            raise _not_handed_out(self)
        return self._calls

    async def release(self, best_effort: bool = True, *, attributes: Optional[Mapping[str, Any]] = None,
                      keep_row: Optional[bool] = None) -> bool:
        """Release this lock (``await lock.release()``, True when this call released it): see
        :meth:`AsyncDynamoDBLockClient.release_lock`; once started, a cancelled caller does not
        stop it."""
        extra = {name: value for name, value in (('attributes', attributes), ('keep_row', keep_row))
                 if value is not None}
        released: bool = await self.lock_client.release_lock(self, best_effort, **extra)
        return released

    async def update_attributes(self, values: Optional[Mapping[str, Any]] = None, remove: Iterable[str] = ()) -> None:
        """Set and remove additional attributes in one heartbeat; see the threaded lock's
        :meth:`~python_dynamodb_lock.python_dynamodb_lock.DynamoDBLock.update_attributes`."""
        await self._through().update_attributes(self, values, remove)

    async def extend(self) -> None:
        """Renew this lock now; see the threaded lock's
        :meth:`~python_dynamodb_lock.python_dynamodb_lock.DynamoDBLock.extend`."""
        await self._through().extend(self)

    async def transact_write_items(self, TransactItems: Sequence[Mapping[str, Any]], *, typed: bool = False,
                                   ClientRequestToken: Optional[str] = None, **options: object) -> Dict[str, Any]:
        """Write only while this lock is held; see the threaded lock's
        :meth:`~python_dynamodb_lock.python_dynamodb_lock.DynamoDBLock.transact_write_items`."""
        response: Dict[str, Any] = await self._through().guarded_write(self, TransactItems, typed, options,
                                                                       ClientRequestToken)
        return response

    async def put_item(self, **params: Any) -> Dict[str, Any]:
        """A ``put_item`` that commits only while this lock is held."""
        actions, options = single_action('Put', params)
        return await self.transact_write_items(actions, **options)

    async def update_item(self, **params: Any) -> Dict[str, Any]:
        """An ``update_item`` that commits only while this lock is held."""
        actions, options = single_action('Update', params)
        return await self.transact_write_items(actions, **options)

    async def delete_item(self, **params: Any) -> Dict[str, Any]:
        """A ``delete_item`` that commits only while this lock is held."""
        actions, options = single_action('Delete', params)
        return await self.transact_write_items(actions, **options)

    async def __aenter__(self) -> 'AsyncDynamoDBLock':
        return self

    async def __aexit__(self, exc_type: Optional[Type[BaseException]], exc_value: Optional[BaseException],
                        traceback: Optional[TracebackType]) -> bool:
        """Release best effort, even when the task was cancelled; an ``Exception`` from the
        block propagates, unless the lock was acquired with ``raise_context_exception=False``
        (then it is logged and suppressed)."""
        # Shielded: a task cancelled inside the block still releases (shield starts the release
        # as a task at once); cancelled again meanwhile, the release completes in the background.
        await asyncio.shield(self.release(best_effort=True))
        return suppress_after_block(self, exc_type, exc_value, traceback)


# Reprs, pickles and the documentation name the public import paths.
DynamoDBLock.__module__ = 'python_dynamodb_lock.python_dynamodb_lock'
AsyncDynamoDBLock.__module__ = 'python_dynamodb_lock.aio'
