"""What both lock clients share and is not I/O: the lock classes, the published defaults, and
two small helpers of their public methods.

Published at :mod:`python_dynamodb_lock.python_dynamodb_lock` (the import path of the published
package) and, for :class:`HeldLock`, at the package root; :mod:`python_dynamodb_lock.aio` imports
them from here, not from the threaded client's module.
"""
from __future__ import annotations

import datetime
import functools
import logging
import operator
import threading
import urllib.parse
from decimal import Decimal
from types import TracebackType
from typing import TYPE_CHECKING, Any, Callable, ContextManager, Dict, Generic, Mapping, Optional, Tuple, Type, TypeVar
from typing import NoReturn, overload

from boto3.dynamodb.types import Binary

from .clock import Clock
from .._core.shared import SharedHolder
from .._core.state import LockState, Status, TimeSource
from .._model.schema import (COL_LEASE_DURATION, COL_OWNER_NAME, COL_RECORD_VERSION_NUMBER, PartitionKey,
                             TableLayout, binary_bytes)

__all__ = ['APP_CALLBACK_THREADPOOL_SIZE', 'BaseDynamoDBLock', 'ClientViews', 'Defaults', 'HeldLock', 'View',
           'check_for_table_arguments', 'holder_of', 'holds_of', 'mark_acquired', 'state_of', 'suppress_after_block',
           'unique_identifier_of']

#: Workers of the callback executor a client makes when it is given none (published: 5).
APP_CALLBACK_THREADPOOL_SIZE = 5

# The published module's logger: every log line of both clients goes here.
logger = logging.getLogger('python_dynamodb_lock.python_dynamodb_lock')

_PUBLISHED_MODULE = 'python_dynamodb_lock.python_dynamodb_lock'


class Defaults:
    """The published defaults of ``DynamoDBLockClient`` (its class attributes), for both clients,
    and the published client's column names (``_COL_*``), for code that reads them."""

    _DEFAULT_TABLE_NAME = 'DynamoDBLockTable'
    _DEFAULT_PARTITION_KEY_NAME = 'lock_key'
    _DEFAULT_SORT_KEY_NAME = 'sort_key'
    _DEFAULT_TTL_ATTRIBUTE_NAME = 'expiry_time'
    _DEFAULT_HEARTBEAT_PERIOD = datetime.timedelta(seconds=5)
    _DEFAULT_SAFE_PERIOD = datetime.timedelta(seconds=20)
    _DEFAULT_LEASE_DURATION = datetime.timedelta(seconds=30)
    _DEFAULT_EXPIRY_PERIOD = datetime.timedelta(hours=1)
    _DEFAULT_HEARTBEAT_TPS = -1
    _DEFAULT_APP_CALLBACK_THREADPOOL_SIZE = APP_CALLBACK_THREADPOOL_SIZE
    _DEFAULT_READ_CAPACITY = 5
    _DEFAULT_WRITE_CAPACITY = 5
    _DEFAULT_SORT_KEY_VALUE = '-'
    _COL_OWNER_NAME = COL_OWNER_NAME
    _COL_LEASE_DURATION = COL_LEASE_DURATION
    _COL_RECORD_VERSION_NUMBER = COL_RECORD_VERSION_NUMBER



V = TypeVar('V')


class View(property, Generic[V]):
    """A published read-only property of the clients, read from what the client holds
    (``path``: dotted attribute names from the client); a ``property`` whose getter says it
    returns ``kind``, so that ``help()`` and the documentation show it as before."""

    def __init__(self, path: str, kind: object, doc: str) -> None:
        get = operator.attrgetter(path)

        def read(client: object) -> Any:
            return get(client)

        read.__annotations__ = {'client': object, 'return': kind}
        super().__init__(read)
        self.__doc__ = doc   # (property.__init__ leaves a subclass's instance with the class docstring)

    if TYPE_CHECKING:   # what a type checker reads from it: its value's type
        @overload
        def __get__(self, instance: None, owner: Optional[type] = None) -> View[V]: ...

        @overload
        def __get__(self, instance: object, owner: Optional[type] = None) -> V: ...

        def __get__(self, instance: object, owner: Optional[type] = None) -> Any: ...

        def __set__(self, instance: object, value: NoReturn) -> None: ...   # read-only: no value fits


class ClientViews:
    """The read-only properties both clients publish, written once: each client's class names
    them (``owner_name = ClientViews.owner_name`` ...)."""

    owner_name: View[str] = View(
        '_settings.owner_name', str,
        """The ``owner_name`` this client writes into the rows of its locks (the constructor's,
        or the host name and a random suffix it chose).""")
    closed: View[bool] = View('_state.closed', bool, """Whether :meth:`close` has been called.""")
    table_layout: View[TableLayout] = View(
        '_schema.layout', TableLayout,
        """The table's name, key names and types, and TTL attribute, as this client uses them
        (given to the constructor, or read from the table by ``for_table``).""")
    heartbeats_in_flight: View[int] = View(
        '_calls.orchestration.renewing.in_flight', int,
        """How many held locks have a renewal on the wire right now (0: the client is quiet).""")
    clock: View[Clock] = View(
        '_clock', Clock,
        """The clock the client times everything with (``clock=`` of the constructor, or the
        system clock): ``monotonic()``, ``time()``, ``sleep(seconds, event)``; recipes wait on it.""")
    heartbeat_period: View[float] = View(
        '_settings.heartbeat_period', float, """Seconds between renewals of a held lock.""")
    safe_period: View[float] = View(
        '_settings.safe_period', float,
        """Seconds without a confirmed renewal after which a lock is ``IN_DANGER``.""")
    lease_duration: View[float] = View(
        '_settings.lease_duration', float,
        """Seconds a lock row of this client is presumed alive without a renewal.""")


class BaseDynamoDBLock:
    """A lock as it is stored in the table, typically one held by somebody else.

    It is a description only: it cannot be released or renewed.
    """

    #: True for a shared (read) lock held by this process (``acquire_lock(..., shared=True)``).
    shared: bool = False
    #: The shared holders the row named when it was read (``get_lock``, ``list_locks``), as
    #: :class:`SharedHolder` tuples; empty for an exclusive lock. See docs/shared_locks.rst.
    shared_holders: Tuple[SharedHolder, ...] = ()

    def __init__(
        self,
        partition_key: PartitionKey,
        sort_key: str,
        owner_name: str,
        lease_duration: float,
        record_version_number: str,
        expiry_time: int,
        additional_attributes: Optional[Mapping[str, Any]],
        *,
        fencing_token: Optional[int] = None,
    ) -> None:
        self.partition_key = partition_key
        self.sort_key = sort_key
        self.owner_name = owner_name
        self.lease_duration = float(lease_duration)
        self.record_version_number = record_version_number
        self.expiry_time = int(expiry_time)
        self.additional_attributes: Dict[str, Any] = dict(additional_attributes or {})
        self.unique_identifier = unique_identifier_of(partition_key, sort_key)
        #: The acquisition's fencing token: it grows with every acquisition of the key and stays
        #: the same while the lock is held (None for a lock written by a published 0.9.x client).
        self.fencing_token = fencing_token

    def __str__(self) -> str:
        token = '' if self.fencing_token is None else f', fencing_token={self.fencing_token}'
        if self.shared_holders:
            token += f', shared_holders={len(self.shared_holders)}'
        elif self.shared:
            token += ', shared'
        return (
            f'{self.__class__.__name__}({self.unique_identifier}, owner={self.owner_name}, '
            f'version={self.record_version_number}, lease={self.lease_duration}s, '
            f'expiry_time={self.expiry_time}{token})'
        )

    __repr__ = __str__


class HeldLock(BaseDynamoDBLock):
    """What a lock held by this process offers, whichever client holds it.

    :class:`DynamoDBLock` (threaded) and ``AsyncDynamoDBLock`` (asyncio) add how it is released.
    ``status``, ``record_version_number``, ``expiry_time`` and ``last_updated_time`` read the
    lock's state, which only its client changes.
    """

    PENDING = Status.PENDING
    LOCKED = Status.LOCKED
    RELEASED = Status.RELEASED
    IN_DANGER = Status.IN_DANGER
    INVALID = Status.INVALID

    _state: LockState
    #: Whether this lock was added to an existing item (``acquire_lock(lock_existing_item=True)``):
    #: its release then removes only the lock's attributes, never the item (a row the lock
    #: created, there being no item at the key, is freed as a plain lock's row is).
    lock_existing_item: bool = False

    def __init__(
        self,
        partition_key: PartitionKey,
        sort_key: str,
        owner_name: str,
        lease_duration: float,
        record_version_number: str,
        expiry_time: int,
        additional_attributes: Optional[Mapping[str, Any]],
        app_callback: Optional[Callable[..., Any]],
        lock_client: Any,
        raise_context_exception: bool = False,
        *,
        clock: TimeSource,
        guard: Optional[ContextManager[Any]] = None,
    ) -> None:
        self._clock = clock
        self._describe: Optional[Callable[[Any], Optional[BaseDynamoDBLock]]] = None   # set at acquisition
        self._state = LockState(record_version_number, expiry_time, clock.monotonic(), lease_duration,
                                guard if guard is not None else threading.Lock())
        super().__init__(
            partition_key, sort_key, owner_name, lease_duration,
            record_version_number, expiry_time, additional_attributes, fencing_token=None,
        )
        self.app_callback = app_callback
        self.lock_client = lock_client
        self.raise_context_exception = raise_context_exception
        self._holds = 1          # acquisitions of this lock not yet released (reentrant ones add)
        self._holder: Any = None  # the thread (or task) that acquired it, for reentrancy
        self._keep_row = True          # set at acquisition: acquire_lock(keep_row=...) or the client's
        #: When this acquisition took the key over from a holder presumed dead: that holder's
        #: lock as it was in the table (its owner, version and fencing token), so that the
        #: application can recover what it left half done. None otherwise.
        self.took_over_from: Optional[BaseDynamoDBLock] = None

    # The published attributes, kept by the lock's state.

    @property
    def record_version_number(self) -> str:
        return self._state.version

    @record_version_number.setter
    def record_version_number(self, value: str) -> None:
        self._state.version = value

    @property
    def expiry_time(self) -> int:
        return self._state.expiry_time

    @expiry_time.setter
    def expiry_time(self, value: int) -> None:
        self._state.expiry_time = int(value)

    @property
    def fencing_token(self) -> Optional[int]:
        """This acquisition's fencing token (see the Safety and fencing page): larger than the
        token of every earlier acquisition of the key, the same for as long as this lock is
        held. None until acquired, or on an engine that did not return it."""
        return self._state.fencing_token

    @fencing_token.setter
    def fencing_token(self, value: Optional[int]) -> None:
        self._state.fencing_token = value

    @property
    def last_updated_time(self) -> float:
        """Monotonic seconds at which the last confirmed write of this lock was sent."""
        return self._state.last_confirmed

    @last_updated_time.setter
    def last_updated_time(self, value: float) -> None:
        self._state.last_confirmed = value

    @property
    def status(self) -> str:
        """``PENDING``, ``LOCKED``, ``IN_DANGER``, ``RELEASED`` or ``INVALID``, as of now.

        A held lock whose last confirmed renewal is older than its safe period (the client's
        ``safe_period``; for a lock acquired with a ``lease_duration`` of its own, the same
        fraction of that lease) reads ``IN_DANGER`` at once, even before the heartbeat checker
        has noticed (after a pause of the process, say), and so does one past its lease.
        """
        safe_period = self._state.safe_period
        if safe_period is None:
            safe_period = getattr(self.lock_client, 'safe_period', None)   # the client's (a property)
        return self._state.status_at(self._clock.monotonic(), safe_period)

    @status.setter
    def status(self, value: str) -> None:
        self._state.status = value

    def lease_remaining(self) -> float:
        """Seconds until another client may take this lock over if no renewal succeeds.

        Counted from when the last confirmed renewal (or the acquisition) was sent, on this
        process's monotonic clock. Negative once the lease has run out; 0.0 once the lock was
        released or lost.
        """
        return self._state.lease_remaining(self._clock.monotonic())

    @property
    def keep_row(self) -> bool:
        """Whether releasing this lock keeps its row, marked released with its fencing token
        (``acquire_lock(keep_row=...)``, by default the client's ``keep_released_rows``); a
        release may choose otherwise. On an existing item: whether the fencing token stays."""
        return self._keep_row

    @property
    def holds(self) -> int:
        """How many acquisitions of this lock are not yet released: more than 1 after reentrant
        acquisitions (``reentrant=True``); the row is released with the last one."""
        return self._holds

    @property
    def holder_id(self) -> Optional[str]:
        """A shared lock's id: the key of its entry in the row's ``shared_holders`` (None for an
        exclusive lock)."""
        return self._state.acquisition_id if self.shared else None

    @property
    def loss_reason(self) -> Optional[str]:
        """Why this lock was lost (a :class:`~python_dynamodb_lock.Reason`:
        ``TAKEN_OVER`` or ``ROW_GONE``), or None while it was not lost."""
        loss = self._state.loss
        return loss.reason if loss and self._state.status == Status.INVALID else None

    @property
    def lost_to(self) -> Optional[BaseDynamoDBLock]:
        """The lock found in its place when this lock was lost (None if the row was gone)."""
        loss = self._state.loss
        if not loss or not loss.row or self._describe is None:
            return None
        return self._describe(loss.row)


#: The orchestration's seams to a held lock's own bookkeeping: its :class:`LockState` (what the
#: core's functions take) and its hold count (acquisitions not yet released). Public here, and
#: not attributes of the published lock classes; C getters, so that the hot path makes no extra
#: Python call (tests/test_call_budget.py).
state_of: Callable[[HeldLock], LockState] = operator.attrgetter('_state')
holds_of: Callable[[HeldLock], int] = operator.attrgetter('_holds')


def check_for_table_arguments(table_name: object, kwargs: Mapping[str, Any]) -> None:
    """Check ``for_table``'s own arguments before any call."""
    fixed = sorted({'partition_key_name', 'sort_key_name', 'partition_key_type'} & set(kwargs))
    if fixed:
        raise TypeError(f'for_table reads {", ".join(fixed)} from the table; do not pass them')
    if not isinstance(table_name, str) or not table_name:
        raise TypeError(f'table_name must be a non-empty str, not {table_name!r}')


def suppress_after_block(lock: HeldLock, exc_type: Optional[Type[BaseException]],
                          exc_value: Optional[BaseException], traceback: Optional[TracebackType]) -> bool:
    """Whether a lock's ``with`` block swallows the exception it raised: an ``Exception`` of a
    lock acquired with ``raise_context_exception=False`` (the published default of the threaded
    ``acquire_lock`` and ``try_acquire_lock``; the other entry points default to True)."""
    if exc_value is None or lock.raise_context_exception or not isinstance(exc_value, Exception):
        return False
    logger.warning(
        'Suppressed an exception raised while holding %s (raise_context_exception=False)',
        lock.unique_identifier,
        exc_info=exc_value,
    )
    return True



def mark_acquired(lock: HeldLock, holder: object, shared: bool, keep_row: bool, existing_item: bool, own_row: bool,
                  took_over_from: Optional[BaseDynamoDBLock],
                  describe: Callable[[Any], Optional[BaseDynamoDBLock]]) -> None:
    """What a client records on a lock object it hands out: who acquired it (for reentrancy),
    how (shared, keep_row, on an existing item, on a row of its own), whom it took over from, and
    how the client describes a row (for :attr:`HeldLock.lost_to`)."""
    lock._holder = holder
    lock._describe = describe
    lock.shared = shared
    lock._keep_row = keep_row
    lock.lock_existing_item = existing_item
    state_of(lock).own_row = own_row
    lock.took_over_from = took_over_from


def holder_of(lock: HeldLock) -> Any:
    """The thread or task that acquired ``lock``."""
    return lock._holder


def unique_identifier_of(partition_key: PartitionKey, sort_key: str) -> str:
    """``quote(partition_key) + '|' + quote(sort_key)``, as the published package names locks
    (a binary partition key is quoted as its bytes, a number one as its plain decimal text, the
    way DynamoDB gives it back: ``5``, ``Decimal('5.0')`` and ``Decimal('5')`` name one lock)."""
    if type(partition_key) is str and type(sort_key) is str:
        return _quoted_pair(partition_key, sort_key)
    if isinstance(partition_key, (str, bytes, bytearray)):
        key: Any = partition_key
    elif isinstance(partition_key, Binary):
        key = binary_bytes(partition_key)
    elif isinstance(partition_key, (int, Decimal)) and not isinstance(partition_key, bool):
        key = _number_text(Decimal(partition_key))
    else:
        key = str(partition_key)
    return urllib.parse.quote(key) + '|' + urllib.parse.quote(sort_key)


@functools.lru_cache(maxsize=1024)
def _quoted_pair(partition_key: str, sort_key: str) -> str:
    return urllib.parse.quote(partition_key) + '|' + urllib.parse.quote(sort_key)


def _number_text(number: Decimal) -> str:
    if not number.is_finite():
        return str(number)
    text = format(number.normalize(), 'f')
    return '0' if text in ('-0', '0') else text


# Pickles and reprs name the published module, as they did.
BaseDynamoDBLock.__module__ = _PUBLISHED_MODULE
HeldLock.__module__ = 'python_dynamodb_lock'
