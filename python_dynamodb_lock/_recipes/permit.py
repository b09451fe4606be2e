"""A permit of a semaphore, for both clients: what it is (:class:`PermitBase`), and the
asyncio client's :class:`AsyncPermit` (published as ``python_dynamodb_lock.aio.AsyncPermit``).
The threaded client's ``Permit`` is in :mod:`python_dynamodb_lock.recipes`.
"""
from __future__ import annotations

from types import TracebackType
from typing import Any, Optional, Protocol, Type

from .._common.locks import BaseDynamoDBLock, HeldLock
from .common import HELD
from .seams import RecipeLock

__all__ = ['AsyncPermit', 'PermitBase', 'slot_key']


def slot_key(slot: int) -> str:
    """The sort key of a semaphore's slot ``slot``."""
    return f'slot-{slot}'


class _AsyncSemaphore(Protocol):
    """What an :class:`AsyncPermit` needs of its semaphore."""

    name: Any

    async def release(self, permit: 'AsyncPermit', best_effort: bool = True) -> None: ...


class PermitBase:
    """What a permit of either client's semaphore is (see :class:`Permit`)."""

    def __init__(self, semaphore: Any, slot: int, lock: HeldLock) -> None:
        self.semaphore = semaphore
        #: The slot's number, from 0 to ``limit - 1``.
        self.slot = slot
        #: The slot lock's sort key, ``'slot-<n>'``.
        self.sort_key = lock.sort_key
        #: The lock of the slot (guarded writes, ``status``, ``lease_remaining()``, ...).
        self.lock: RecipeLock = lock

    @property
    def fencing_token(self) -> Optional[int]:
        """The slot lock's fencing token, larger than every earlier token *of this slot*
        (tokens of different slots are unrelated, so fence per slot)."""
        token: Optional[int] = self.lock.fencing_token
        return token

    @property
    def held(self) -> bool:
        """Whether the slot is still held (its lock ``LOCKED`` or ``IN_DANGER``)."""
        return self.lock.status in HELD

    @property
    def took_over_from(self) -> Optional[BaseDynamoDBLock]:
        """The holder presumed dead whose slot this permit took over, if any."""
        holder: Optional[BaseDynamoDBLock] = self.lock.took_over_from
        return holder

    def __repr__(self) -> str:
        return (f'{type(self).__name__}({self.semaphore.name!r}, slot={self.slot}, '
                f'fencing_token={self.fencing_token}, status={self.lock.status})')


class AsyncPermit(PermitBase):
    """:class:`~python_dynamodb_lock.recipes.Permit` of an :class:`AsyncSemaphore`:
    ``await permit.release()``, or ``async with permit:``."""

    semaphore: _AsyncSemaphore
    lock: HeldLock

    async def release(self, best_effort: bool = True) -> None:
        """Give the permit back: see :meth:`AsyncSemaphore.release`."""
        await self.semaphore.release(self, best_effort)

    async def __aenter__(self) -> 'AsyncPermit':
        return self

    async def __aexit__(self, exc_type: Optional[Type[BaseException]], exc_value: Optional[BaseException],
                        traceback: Optional[TracebackType]) -> None:
        await self.release(best_effort=True)
