"""A counting semaphore, for both clients: its decisions (:class:`SemaphoreLogic`), and the
asyncio face :class:`AsyncSemaphore` (published as ``python_dynamodb_lock.aio.AsyncSemaphore``).
The threaded face, ``Semaphore``, is in :mod:`python_dynamodb_lock.recipes`.
"""
from __future__ import annotations

import asyncio
import datetime
import random
import threading
from types import TracebackType
from typing import Any, Callable, Dict, List, Mapping, Optional, Set, Type

from .._model.errors import DynamoDBLockError
from .._common.locks import BaseDynamoDBLock, HeldLock
from .._model.schema import PartitionKey
from .common import CHUNK, Duration, ended, logger, retry_period_of, timeout_seconds
from .handlers import Tasks
from .operations import AcquireFirst, GetLock, Recipe, Release
from .permit import AsyncPermit, PermitBase, slot_key

__all__ = ['LIMIT_ATTRIBUTE', 'MAX_SEMAPHORE_LIMIT', 'AsyncSemaphore', 'SemaphoreLogic']

AsyncAppCallback = Callable[[str, HeldLock], Any]

# The most slots a semaphore may have: an acquisition that finds every slot busy costs one
# conditional write per slot, then one read per slot per retry period.
MAX_SEMAPHORE_LIMIT = 1000
# The additional attribute in which a permit's row records the limit of its semaphore.
LIMIT_ATTRIBUTE = 'semaphore_limit'


def require_limit(limit: object) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int):
        raise TypeError(f'limit must be a positive int, not {type(limit).__name__}')
    if not 1 <= limit <= MAX_SEMAPHORE_LIMIT:
        raise ValueError(f'limit must be from 1 to {MAX_SEMAPHORE_LIMIT}, got {limit}')
    return limit


class SemaphoreLogic:
    """The decisions of a counting semaphore, for both clients (see :class:`Semaphore`). Waits
    and calls go through ``self._handler``; ``_permit`` makes the client's kind of permit."""

    _permit: Callable[..., Any] = PermitBase
    _handler_class: Any = None

    def __init__(
        self,
        lock_client: object,
        name: PartitionKey,
        limit: int,
        *,
        retry_period: Optional[datetime.timedelta] = None,
        additional_attributes: Optional[Mapping[str, Any]] = None,
    ) -> None:
        self.limit = require_limit(limit)
        handler = self._handler_class.for_client(lock_client)
        client = handler.client
        # A table without a sort key refuses the slots' sort keys here ("... has no sort key").
        client.check_lock_arguments(name, slot_key(limit - 1), additional_attributes)
        extra = dict(additional_attributes or {})
        if LIMIT_ATTRIBUTE in extra:
            raise ValueError(f'additional_attributes may not use {LIMIT_ATTRIBUTE!r}: the semaphore writes it')
        extra[LIMIT_ATTRIBUTE] = self.limit
        self._handler = handler
        self._clock = client.clock
        self.name = name
        self._retry_period = retry_period_of(client, retry_period)
        self._attributes = extra
        self._guard = threading.Lock()
        self._waiters: Set[Any] = set()
        self._limits_seen: Set[Any] = set()
        self._entered: Dict[Any, List[Any]] = {}   # permits of ``with`` blocks, per thread or task

    @property
    def sort_keys(self) -> List[str]:
        """The slots' sort keys, ``['slot-0', ..., 'slot-<limit-1>']``."""
        return [slot_key(slot) for slot in range(self.limit)]

    def __repr__(self) -> str:
        return f'{type(self).__name__}({self.name!r}, limit={self.limit})'

    # -- the decisions ------------------------------------------------------------------------

    def _acquiring(self, timeout: Optional[float], app_callback: Any) -> Recipe[Optional[Any]]:
        """A permit, or None once ``timeout`` seconds (None: no limit) have passed."""
        first = random.randrange(self.limit)
        order = [slot_key((first + offset) % self.limit) for offset in range(self.limit)]
        deadline = None if timeout is None else self._clock.monotonic() + timeout
        wake = self._handler.event()      # set by a release through this object: look again at once
        with self._guard:
            self._waiters.add(wake)
        try:
            while True:
                chunk = CHUNK if deadline is None else min(CHUNK, max(0.0, deadline - self._clock.monotonic()))
                try:
                    lock = yield AcquireFirst(self.name, order, self._retry_period, chunk, self._attributes,
                                              app_callback, wake=wake)
                except DynamoDBLockError as error:
                    if not ended(error):
                        raise
                    if error.code == DynamoDBLockError.ACQUIRE_TIMEOUT:
                        self._check_limit(error.holder)
                        if deadline is not None and self._clock.monotonic() >= deadline:
                            return None
                    continue
                return self._permit(self, int(lock.sort_key[len('slot-'):]), lock)
        finally:
            with self._guard:
                self._waiters.discard(wake)

    def _acquiring_or_raise(self, timeout: Optional[Duration], app_callback: object) -> Recipe[Any]:
        seconds = timeout_seconds(timeout)
        permit = yield from self._acquiring(seconds, app_callback)
        if permit is None:
            raise DynamoDBLockError(DynamoDBLockError.ACQUIRE_TIMEOUT,
                                    f'No permit of semaphore {self.name!r} (limit {self.limit}) within {seconds}s')
        return permit

    def _releasing(self, permit: object, best_effort: bool) -> Recipe[None]:
        if not isinstance(permit, PermitBase) or permit.semaphore is not self:
            raise TypeError('release takes a Permit of this semaphore')
        try:
            yield Release(permit.lock, best_effort)
        finally:
            with self._guard:
                for waiter in self._waiters:
                    self._handler.set(waiter)

    def _listing(self) -> Recipe[List[BaseDynamoDBLock]]:
        found = []
        for sort_key in self.sort_keys:
            row = yield GetLock(self.name, sort_key)
            if row is not None:
                found.append(row)
        return found

    def _enter(self, holder: object, permit: object) -> Any:
        with self._guard:
            self._entered.setdefault(holder, []).append(permit)
        return permit

    def _exit(self, holder: object) -> Any:
        with self._guard:
            stack = self._entered[holder]
            permit = stack.pop()
            if not stack:
                del self._entered[holder]
        return permit

    def _check_limit(self, holder: Optional[BaseDynamoDBLock]) -> None:
        """Warn (once per value) about a slot row written by a semaphore with another limit."""
        seen = holder.additional_attributes.get(LIMIT_ATTRIBUTE) if holder is not None else None
        if seen is None or seen == self.limit:
            return
        with self._guard:
            if seen in self._limits_seen:
                return
            self._limits_seen.add(seen)
        logger.warning('Semaphore %r: this process uses limit %s, but a holder uses limit %s; with mixed limits '
                       'up to the largest one hold permits at once', self.name, self.limit, seen)



class AsyncSemaphore(SemaphoreLogic):
    """:class:`~python_dynamodb_lock.recipes.Semaphore` for the asyncio client: the same slots,
    decisions, arguments and guarantees; its methods are coroutines, and a waiting acquisition
    is cancelled, leaving nothing held, by cancelling its task."""

    _permit = AsyncPermit

    _handler: 'Tasks'
    _handler_class = Tasks

    async def try_acquire(self, app_callback: Optional[AsyncAppCallback] = None) -> Optional[AsyncPermit]:
        """A permit if one is free right now, else None; see ``Semaphore.try_acquire``."""
        permit: Optional[AsyncPermit] = await self._handler.run(self._acquiring(0.0, app_callback))
        return permit

    async def acquire(self, timeout: Optional[Duration] = None,
                      app_callback: Optional[AsyncAppCallback] = None) -> AsyncPermit:
        """Wait for a permit; see ``Semaphore.acquire``."""
        permit: AsyncPermit = await self._handler.run(self._acquiring_or_raise(timeout, app_callback))
        return permit

    async def release(self, permit: AsyncPermit, best_effort: bool = True) -> None:
        """Give a permit back; see ``Semaphore.release``."""
        await self._handler.run(self._releasing(permit, best_effort))

    async def holders(self) -> List[BaseDynamoDBLock]:
        """The slots held right now, as their rows; see ``Semaphore.holders``."""
        holders: List[BaseDynamoDBLock] = await self._handler.run(self._listing())
        return holders

    async def __aenter__(self) -> AsyncPermit:
        return self._enter(asyncio.current_task(), await self.acquire())  # type: ignore[no-any-return]

    async def __aexit__(self, exc_type: Optional[Type[BaseException]], exc_value: Optional[BaseException],
                        traceback: Optional[TracebackType]) -> None:
        await self._exit(asyncio.current_task()).release(best_effort=True)
