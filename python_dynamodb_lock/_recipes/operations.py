"""What a recipe asks its handler to do: the operations a recipe's generator yields.

A recipe is a generator (:data:`Recipe`): it yields these operations and receives their results
(what an operation raises is thrown into it, and the recipe decides). The handlers of
:mod:`.handlers` perform them with one client's public API.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Generator, Mapping, Optional, Sequence, TypeVar, Union

from .._model.schema import PartitionKey
from .seams import LockCallback

__all__ = ['AcquireFirst', 'GetLock', 'Join', 'Operation', 'Recipe', 'Release', 'Wait']

T = TypeVar('T')


@dataclasses.dataclass(frozen=True)
class AcquireFirst:
    """``acquire_first_lock`` (or ``acquire_lock`` for one key without ``wake``); ``stop``: an
    event of the handler whose setting ends the acquisition with ``ACQUIRE_CANCELLED``, nothing
    held; ``wake``: one whose setting makes it look at every key at once."""

    partition_key: PartitionKey
    sort_keys: Sequence[str]
    retry_period: float
    retry_timeout: float
    additional_attributes: Mapping[str, Any]
    app_callback: Optional[LockCallback]
    stop: Any = None       # the handler's event (threading.Event or asyncio.Event)
    wake: Any = None


@dataclasses.dataclass(frozen=True)
class Release:
    """``release_lock(lock, best_effort)``; ``wait=False``: start it and go on (the asyncio
    handler does not await it; the threaded one cannot help but finish it)."""

    lock: Any             # a lock of the handler's client
    best_effort: bool = True
    wait: bool = True


@dataclasses.dataclass(frozen=True)
class GetLock:
    """``get_lock(partition_key, sort_key)``."""

    partition_key: PartitionKey
    sort_key: str


@dataclasses.dataclass(frozen=True)
class Wait:
    """Sleep ``seconds`` on the client's clock, or until ``event`` is set: True when woken."""

    seconds: float
    event: Any


@dataclasses.dataclass(frozen=True)
class Join:
    """Wait until the background work ``handle`` (from ``Handler.spawn``) has ended."""

    handle: Any           # a threading.Thread or an asyncio.Task


Operation = Union[AcquireFirst, Release, GetLock, Wait, Join]

#: A recipe's logic: a generator of operations, returning the recipe's result.
Recipe = Generator[Operation, Any, T]
