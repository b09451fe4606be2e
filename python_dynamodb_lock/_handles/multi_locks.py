"""The multi-lock objects ``acquire_locks`` / ``try_acquire_locks`` of both clients return,
and :class:`Acquisition`, what an asyncio acquisition returns: public faces.

The decisions are in :mod:`python_dynamodb_lock._core.multi` (one transaction, the watch of each
key) and the orchestration in :mod:`python_dynamodb_lock._client.several_keys`. Here are only
:class:`DynamoDBMultiLock` / :class:`AsyncDynamoDBMultiLock`, which hold the client's driver and
orchestration. Each key is an ordinary held lock of the client (registered,
renewed by the batched heartbeats, listed by ``held_locks``); the multi-lock ties them together.
See the "Several keys at once" page of the documentation.
"""
from __future__ import annotations

import asyncio
import threading
from types import TracebackType
from typing import (Any, Callable, Coroutine, Dict, Generator, Generic, Mapping, Optional, Sequence,
                    Set, Tuple, Type, TypeVar, Union, cast)

from .._client.orchestration import Orchestration
from .._client.several_keys import Key
from .._core.effects import Protocol as CoreProtocol
from .._core.guard import MAX_ACTIONS
from .._core.multi import set_name
from .._core.state import Status
from .._core.write import AcquireAttempt
from .._drivers.tasks import TaskDriver
from .._drivers.threads import ThreadDriver
from .._common.locks import HeldLock, suppress_after_block

__all__ = ['Acquisition', 'AsyncDynamoDBMultiLock', 'DynamoDBMultiLock', 'Key', 'acquiring']

L = TypeVar('L', bound=HeldLock)
T = TypeVar('T')
_CODES_TOLD_ONCE = frozenset({'LOCK_STOLEN'})


class _MultiLock(Generic[L]):
    """What both multi-locks share: the locks, the set's status, and its callback."""

    def __init__(self, lock_client: object, app_callback: Optional[Callable[..., Any]],
                 raise_context_exception: bool) -> None:
        self.lock_client = lock_client
        self._driver: Any = None        # the client's driver and orchestration (see ``acquiring``)
        self._orchestration: Optional[Orchestration[Any]] = None
        self.app_callback = app_callback
        self.raise_context_exception = raise_context_exception
        self._locks: Tuple[L, ...] = ()
        self._told: Set[str] = set()     # the codes told once, already told
        self._told_guard = threading.Lock()

    def _attach(self, locks: Sequence[L]) -> None:
        self._locks = tuple(locks)

    @property
    def locks(self) -> Tuple[L, ...]:
        """One held lock per key, in the order the keys were given (each with its own
        ``fencing_token``)."""
        return self._locks

    @property
    def unique_identifier(self) -> str:
        """The keys' identifiers, as log lines name the set."""
        return set_name(self._locks)

    @property
    def status(self) -> str:
        """The set's status: ``INVALID`` once any key was lost, ``RELEASED`` once any key was
        released, else ``IN_DANGER`` while any key is, else ``LOCKED``."""
        statuses = {lock.status for lock in self._locks}
        for status in (Status.INVALID, Status.RELEASED, Status.IN_DANGER, Status.PENDING):
            if status in statuses:
                return status
        return Status.LOCKED

    @property
    def fencing_tokens(self) -> Tuple[Optional[int], ...]:
        """Every key's fencing token, in the order of :attr:`locks`."""
        return tuple(lock.fencing_token for lock in self._locks)

    @property
    def actions_left(self) -> int:
        """How many actions of the application's fit in one guarded write under this set
        (DynamoDB's 100 per transaction, less one check per key)."""
        return MAX_ACTIONS - len(self._locks)

    def _member_callback(self, code: str, lock: HeldLock) -> Any:
        """Each key's ``app_callback``: the set's callback, called with the set; ``LOCK_STOLEN``
        once, whichever keys are lost."""
        if code in _CODES_TOLD_ONCE:
            with self._told_guard:
                if code in self._told:
                    return None
                self._told.add(code)
        return None if self.app_callback is None else self.app_callback(code, self)

    def _guard(self, items: Sequence[Mapping[str, Any]], typed: bool, options: Mapping[str, Any],
               client_token: Optional[str]) -> Any:
        assert self._orchestration is not None
        return self._orchestration.renewing.guarded(self._locks, items, typed, options, client_token,
                                                    self._driver.transport.wire)

    def _releasing(self, best_effort: bool) -> Any:
        assert self._orchestration is not None
        self._orchestration.state.check_process()
        return self._orchestration.several.releasing(self._locks, best_effort)

    def __str__(self) -> str:
        return f'{type(self).__name__}({self.unique_identifier}, status={self.status})'

    __repr__ = __str__


class DynamoDBMultiLock(_MultiLock[HeldLock]):
    """Every key of :meth:`DynamoDBLockClient.acquire_locks
    <python_dynamodb_lock.python_dynamodb_lock.DynamoDBLockClient.acquire_locks>`, held together.

    A context manager (released best effort on exit; an exception raised in the block
    propagates, unless the set was acquired with ``raise_context_exception=False``). Losing any
    key makes the whole set lost: ``status`` reads ``INVALID``, the callback is called once with
    ``LOCK_STOLEN`` and the set, and a strict :meth:`release` raises ``LOCK_STOLEN`` (after
    freeing the other keys).
    """

    def release(self, best_effort: bool = True) -> bool:
        """Free every key still held: one ``TransactWriteItems`` call per 100 keys; see
        :doc:`multi_keys` for what happens when one of them was lost.

        :returns: True when this call released every key of the set; False when any key was
            not released by it (already released, lost, or, best effort, a release that failed).
        """
        driver: ThreadDriver = self._driver
        released: bool = driver.run(self._releasing(best_effort))
        return released

    def transact_write_items(self, TransactItems: Sequence[Mapping[str, Any]], *, typed: bool = False,
                             ClientRequestToken: Optional[str] = None, **options: object) -> Dict[str, Any]:
        """Write only while every key is held: the application's actions (at most
        :attr:`actions_left`) and one check per key, in one transaction; otherwise as
        :meth:`DynamoDBLock.transact_write_items
        <python_dynamodb_lock.python_dynamodb_lock.DynamoDBLock.transact_write_items>`."""
        driver: ThreadDriver = self._driver
        response: Dict[str, Any] = driver.run(self._guard(TransactItems, typed, options, ClientRequestToken))
        return response

    def __enter__(self) -> 'DynamoDBMultiLock':
        return self

    def __exit__(self, exc_type: Optional[Type[BaseException]], exc_value: Optional[BaseException],
                 traceback: Optional[TracebackType]) -> bool:
        self.release(best_effort=True)
        return suppress_after_block(cast(Any, self), exc_type, exc_value, traceback)


class AsyncDynamoDBMultiLock(_MultiLock[HeldLock]):
    """The asyncio twin of :class:`DynamoDBMultiLock`: ``await multi.release()``,
    ``await multi.transact_write_items(...)``, ``async with``."""

    async def release(self, best_effort: bool = True) -> bool:
        """Free every key still held; True when this call released every key (see
        :meth:`DynamoDBMultiLock.release`). A coroutine: once it has started, cancelling the
        awaiting task does not stop the release (it runs on as a task of its own)."""
        driver: TaskDriver = self._driver
        releasing = driver.detached(self._releasing(best_effort))
        released: bool = await asyncio.shield(releasing)
        return released

    async def transact_write_items(self, TransactItems: Sequence[Mapping[str, Any]], *, typed: bool = False,
                                   ClientRequestToken: Optional[str] = None, **options: object) -> Dict[str, Any]:
        """Write only while every key is held; see :meth:`DynamoDBMultiLock.transact_write_items`."""
        driver: TaskDriver = self._driver
        response: Dict[str, Any] = await driver.run(self._guard(TransactItems, typed, options, ClientRequestToken))
        return response

    async def __aenter__(self) -> 'AsyncDynamoDBMultiLock':
        return self

    async def __aexit__(self, exc_type: Optional[Type[BaseException]], exc_value: Optional[BaseException],
                        traceback: Optional[TracebackType]) -> bool:
        await asyncio.shield(self.release(best_effort=True))
        return suppress_after_block(cast(Any, self), exc_type, exc_value, traceback)


class Acquisition(Coroutine[Any, Any, T]):
    """What an asyncio acquisition returns: a coroutine (await it for the result, or schedule it
    with ``asyncio.create_task``), or an async context manager holding the result for the
    ``async with`` block.

    It is a :class:`collections.abc.Coroutine` delegating ``send``, ``throw`` and ``close`` to
    the acquisition's own coroutine (as aiohttp's request context managers do), so that it can
    be used wherever asyncio takes a coroutine; awaited once, like any coroutine.
    """

    __slots__ = ('_coroutine', '_result')

    def __init__(self, coroutine: Coroutine[Any, Any, T], public_name: Optional[str] = None) -> None:
        if public_name is not None:
            # Named after the public call, so that "coroutine ... was never awaited" names it,
            # not the internal coroutine it runs.
            coroutine.__qualname__ = public_name  # type: ignore[attr-defined]
            coroutine.__name__ = public_name.rpartition('.')[2]  # type: ignore[attr-defined]
        self._coroutine = coroutine
        self._result: Any = None

    def send(self, value: object) -> Any:
        return self._coroutine.send(value)

    def throw(self, *args: Any) -> Any:
        return self._coroutine.throw(*args)

    def close(self) -> None:
        self._coroutine.close()

    def __await__(self) -> Generator[Any, None, T]:
        return self._coroutine.__await__()

    async def __aenter__(self) -> T:
        self._result = await self._coroutine
        return cast(T, self._result)

    async def __aexit__(self, exc_type: Optional[Type[BaseException]], exc_value: Optional[BaseException],
                        traceback: Optional[TracebackType]) -> bool:
        assert self._result is not None
        suppress: bool = await self._result.__aexit__(exc_type, exc_value, traceback)
        return suppress


M = TypeVar('M', bound=_MultiLock[Any])


def acquiring(multi: M, driver: Union[ThreadDriver, TaskDriver], orchestration: Orchestration[Any],
              attempts: Sequence[AcquireAttempt],
              holder: object, timeout_is_error: bool) -> CoreProtocol[Optional[M]]:
    """``acquire_locks``: ``multi`` holding every key of ``attempts`` (None: the acquisition
    timed out, and none is held); each key's callback is the set's. ``driver`` and
    ``orchestration`` are the client's: the set's release and guarded writes use them."""
    multi._driver, multi._orchestration = driver, orchestration
    locks = yield from orchestration.several.acquiring(attempts, holder, timeout_is_error,
                                                              multi._member_callback, multi.raise_context_exception)
    if locks is None:
        return None
    multi._attach(locks)
    return multi


# Reprs, pickles and the documentation name the public import paths.
DynamoDBMultiLock.__module__ = 'python_dynamodb_lock'
AsyncDynamoDBMultiLock.__module__ = 'python_dynamodb_lock.aio'
