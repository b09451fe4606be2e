"""What a recipe needs of a lock client and of a lock it holds, as typing Protocols.

The recipes use only the clients' public API (``acquire_lock``, ``acquire_first_lock``,
``release_lock``, ``get_lock``, ``check_lock_arguments``, ``clock`` and the read-only settings),
and see it through these Protocols: this package imports no client module.
:func:`require_client` refuses, before anything is written, an object that is not a client of the
kind a handler drives (a threaded client's calls block; an asyncio client's are coroutines).
"""
from __future__ import annotations

import asyncio
import datetime
import inspect
import threading
from typing import Any, Awaitable, Callable, Mapping, Optional, Protocol, Sequence, Type, TypeVar, runtime_checkable

from .._common.clock import Clock
from .._common.locks import BaseDynamoDBLock, HeldLock
from .._model.schema import PartitionKey

__all__ = ['AsyncRecipeClient', 'ClientSettings', 'RecipeClient', 'RecipeLock', 'require_client']

#: ``app_callback(code, lock)`` of an acquisition.
LockCallback = Callable[[str, Any], Any]
C = TypeVar('C')


class RecipeLock(Protocol):
    """What a recipe reads of a lock it holds (``DynamoDBLock`` and ``AsyncDynamoDBLock`` are such locks)."""

    @property
    def sort_key(self) -> str: ...

    @property
    def fencing_token(self) -> Optional[int]: ...

    @property
    def status(self) -> str: ...

    @property
    def took_over_from(self) -> Optional[BaseDynamoDBLock]: ...

    def lease_remaining(self) -> float: ...


@runtime_checkable
class ClientSettings(Protocol):
    """What a recipe reads of either client: its settings, its clock and its argument check."""

    @property
    def owner_name(self) -> str: ...

    @property
    def heartbeat_period(self) -> float: ...

    @property
    def safe_period(self) -> float: ...

    @property
    def lease_duration(self) -> float: ...

    @property
    def clock(self) -> Clock: ...

    def check_lock_arguments(self, partition_key: PartitionKey, sort_key: str,
                             additional_attributes: Optional[Mapping[str, Any]] = None) -> None: ...


@runtime_checkable
class RecipeClient(ClientSettings, Protocol):
    """The calls a recipe makes of the threaded client (``DynamoDBLockClient``); they block."""

    def acquire_lock(self, partition_key: PartitionKey, sort_key: str, retry_period: Optional[datetime.timedelta],
                     retry_timeout: Optional[datetime.timedelta], additional_attributes: Optional[Mapping[str, Any]],
                     app_callback: Optional[LockCallback], raise_context_exception: bool = ..., *,
                     cancel: Optional[threading.Event] = ...) -> RecipeLock: ...

    def acquire_first_lock(self, partition_key: PartitionKey, sort_keys: Sequence[str],
                           retry_period: Optional[datetime.timedelta], retry_timeout: Optional[datetime.timedelta],
                           additional_attributes: Optional[Mapping[str, Any]], app_callback: Optional[LockCallback],
                           raise_context_exception: bool = ..., *, cancel: Optional[threading.Event] = ...,
                           wake: Optional[threading.Event] = ...) -> RecipeLock: ...

    def release_lock(self, lock: Any, best_effort: bool = ...) -> bool: ...

    def get_lock(self, partition_key: PartitionKey, sort_key: str = ...) -> Optional[BaseDynamoDBLock]: ...


@runtime_checkable
class AsyncRecipeClient(ClientSettings, Protocol):
    """The calls a recipe makes of the asyncio client (``AsyncDynamoDBLockClient``); they are awaited."""

    def acquire_lock(self, partition_key: PartitionKey, sort_key: str, retry_period: Optional[datetime.timedelta],
                     retry_timeout: Optional[datetime.timedelta], additional_attributes: Optional[Mapping[str, Any]],
                     app_callback: Optional[LockCallback],
                     raise_context_exception: bool = ...) -> Awaitable[RecipeLock]: ...

    async def acquire_first_lock(self, partition_key: PartitionKey, sort_keys: Sequence[str],
                                 retry_period: Optional[datetime.timedelta],
                                 retry_timeout: Optional[datetime.timedelta],
                                 additional_attributes: Optional[Mapping[str, Any]],
                                 app_callback: Optional[LockCallback], raise_context_exception: bool = ..., *,
                                 wake: Optional[asyncio.Event] = ...) -> RecipeLock: ...

    async def release_lock(self, lock: HeldLock, best_effort: bool = ...) -> bool: ...

    async def get_lock(self, partition_key: PartitionKey, sort_key: str = ...) -> Optional[BaseDynamoDBLock]: ...


def require_client(lock_client: object, protocol: Type[C], asynchronous: bool, name: str) -> C:
    """``lock_client`` if it offers what ``protocol`` names, its calls being coroutines exactly when
    ``asynchronous``; else TypeError naming the client class wanted (``name``)."""
    calls = getattr(lock_client, 'acquire_first_lock', None)
    if not isinstance(lock_client, protocol) or inspect.iscoroutinefunction(calls) is not asynchronous:
        raise TypeError(f'lock_client must be a {name}, not {type(lock_client).__name__}')
    return lock_client
