"""The five acquire entry points, what each accepts, and one way to call any of them on either
client (the threaded ``DynamoDBLockClient``, or the asyncio client behind
:class:`aio_facade.BlockingAsyncClient`).

Which options each entry point accepts is written out in :data:`ACCEPTS` (from the signatures in
``python_dynamodb_lock.py`` and ``aio.py``); ``test_matrix.py`` checks it against
the signatures, so that a change of a signature is a change of this table too.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import datetime
import threading
from typing import Any, Callable, Dict, FrozenSet, List, Optional, Sequence, Tuple

from helpers import ASYNCIO, THREADED, BackgroundCall, is_asyncio
from python_dynamodb_lock import DynamoDBMultiLock
from python_dynamodb_lock.aio import AsyncDynamoDBMultiLock
from python_dynamodb_lock.python_dynamodb_lock import DynamoDBLockError

seconds = datetime.timedelta

ACQUIRE_LOCK = 'acquire_lock'
TRY_ACQUIRE_LOCK = 'try_acquire_lock'
ACQUIRE_FIRST_LOCK = 'acquire_first_lock'
ACQUIRE_LOCKS = 'acquire_locks'
TRY_ACQUIRE_LOCKS = 'try_acquire_locks'
ENTRY_POINTS = (ACQUIRE_LOCK, TRY_ACQUIRE_LOCK, ACQUIRE_FIRST_LOCK, ACQUIRE_LOCKS, TRY_ACQUIRE_LOCKS)

#: The per-acquisition options of issue 27's features (``session`` is the client's).
OPTIONS = ('shared', 'lease_duration', 'lock_existing_item', 'only_if_exists', 'keep_row', 'cancel')
_SINGLE = frozenset({'shared', 'lease_duration', 'lock_existing_item', 'only_if_exists', 'keep_row'})

#: (entry point, client kind) -> the options of :data:`OPTIONS` its signature takes. The asyncio
#: client takes no ``cancel=``: its acquisitions are cancelled by cancelling their task.
ACCEPTS: Dict[Tuple[str, str], FrozenSet[str]] = {
    (ACQUIRE_LOCK, THREADED): _SINGLE | {'cancel'},
    (ACQUIRE_LOCK, ASYNCIO): _SINGLE,
    (TRY_ACQUIRE_LOCK, THREADED): _SINGLE,
    (TRY_ACQUIRE_LOCK, ASYNCIO): _SINGLE,
    (ACQUIRE_FIRST_LOCK, THREADED): frozenset({'cancel'}),
    (ACQUIRE_FIRST_LOCK, ASYNCIO): frozenset(),
    (ACQUIRE_LOCKS, THREADED): frozenset({'cancel'}),
    (ACQUIRE_LOCKS, ASYNCIO): frozenset(),
    (TRY_ACQUIRE_LOCKS, THREADED): frozenset(),
    (TRY_ACQUIRE_LOCKS, ASYNCIO): frozenset(),
}

#: The keys each entry point is called with: one key; a pool of two sort keys (it takes one);
#: a set of two keys (it takes both).
KEYS: Dict[str, Tuple[Tuple[str, str], ...]] = {
    ACQUIRE_LOCK: (('k', '-'),),
    TRY_ACQUIRE_LOCK: (('k', '-'),),
    ACQUIRE_FIRST_LOCK: (('pool', 'a'), ('pool', 'b')),
    ACQUIRE_LOCKS: (('m1', '-'), ('m2', '-')),
    TRY_ACQUIRE_LOCKS: (('m1', '-'), ('m2', '-')),
}

#: What a cancelled acquisition raises: ``ACQUIRE_CANCELLED`` (threaded ``cancel=``), or the
#: task's cancellation (asyncio; through the facade's future as concurrent's CancelledError).
CANCELLED = (asyncio.CancelledError, concurrent.futures.CancelledError)


def waits(entry: str) -> bool:
    """Whether the entry point waits for a held key (the others make one attempt)."""
    return entry in (ACQUIRE_LOCK, ACQUIRE_FIRST_LOCK, ACQUIRE_LOCKS)


def accepts(entry: str, kind: str, option: str) -> bool:
    return option in ACCEPTS[(entry, kind)]


def is_cancellation(error: Optional[BaseException]) -> bool:
    if isinstance(error, DynamoDBLockError):
        return error.code == DynamoDBLockError.ACQUIRE_CANCELLED
    return isinstance(error, CANCELLED)


@dataclasses.dataclass
class Held:
    """What an acquisition returned: its locks (facade proxies for the asyncio client) and, for
    a set of keys, the multi-lock."""

    client: Any
    locks: List[Any]
    multi: Any = None

    @property
    def keys(self) -> List[Tuple[str, str]]:
        return [(lock.partition_key, lock.sort_key) for lock in self.locks]

    def release(self, **options: Any) -> Any:
        """Release it: ``lock.release(**options)``; a set with ``multi.release(**options)``."""
        if self.multi is None:
            return self.locks[0].release(**options)
        multi = self.multi
        if not is_asyncio(self.client):
            return multi.release(**options)

        async def release() -> Any:
            return await multi.release(**options)

        return run_on_loop(self.client, release)


def run_on_loop(facade: Any, make: Callable[[], Any], started: Optional[List[Any]] = None) -> Any:
    """Run the asyncio client's coroutine ``make()`` on the facade's loop, in a task named after
    the calling thread that acts for it on the test's ManualClock (as the facade's own calls
    do); ``started`` gets the task, for a test that cancels it."""
    caller = threading.current_thread()

    async def on_behalf_of_caller() -> Any:
        task = asyncio.current_task()
        assert task is not None
        task.set_name(caller.name)
        if started is not None:
            started.append(task)
        acting_for = getattr(facade._clock, 'acting_for', None)   # the facade's clock (test plumbing)
        with acting_for(caller) if acting_for is not None else contextlib.nullcontext():
            return await make()

    return facade._runner.run(on_behalf_of_caller())


def _as_held(client: Any, result: Any) -> Optional[Held]:
    if result is None:
        return None

    def proxy(lock: Any) -> Any:
        return client._proxy(lock) if is_asyncio(client) else lock

    if isinstance(result, (DynamoDBMultiLock, AsyncDynamoDBMultiLock)):
        return Held(client, [proxy(lock) for lock in result.locks], result)
    return Held(client, [proxy(result)])


def acquire(client: Any, entry: str, *, retry_period: float = 1.0, retry_timeout: Optional[float] = None,
            started: Optional[List[Any]] = None, cancel_at_once: bool = False, **options: Any) -> Optional[Held]:
    """Call ``entry`` of ``client`` on the entry's :data:`KEYS` with ``options`` (passed as they
    are, accepted or not); a waiting entry point polls every ``retry_period`` (fake) seconds for
    at most ``retry_timeout`` (None: the client's default). None when a try found a key held.

    asyncio client: ``started`` gets the task (to cancel it); ``cancel_at_once`` cancels it
    before it starts."""
    waiting: Dict[str, Any] = {}
    if waits(entry):
        waiting['retry_period'] = seconds(seconds=retry_period)
        if retry_timeout is not None:
            waiting['retry_timeout'] = seconds(seconds=retry_timeout)
    keys = KEYS[entry]
    arguments: Tuple[Any, ...]
    if entry in (ACQUIRE_LOCK, TRY_ACQUIRE_LOCK):
        arguments = keys[0]
    elif entry == ACQUIRE_FIRST_LOCK:
        arguments = (keys[0][0], [sort_key for _, sort_key in keys])
    else:
        arguments = ([partition_key for partition_key, _ in keys],)
    if not is_asyncio(client):
        return _as_held(client, getattr(client, entry)(*arguments, **waiting, **options))
    method = getattr(client.async_client, entry)

    async def call() -> Any:
        if not cancel_at_once:
            return await method(*arguments, **waiting, **options)
        task = asyncio.ensure_future(method(*arguments, **waiting, **options))
        task.cancel()
        return await task

    return _as_held(client, run_on_loop(client, call, started))


class Pending:
    """An acquisition running in a background thread, to be cancelled: with ``cancel=`` (a
    ``threading.Event``) on the threaded client, by cancelling its task on the asyncio one."""

    def __init__(self, client: Any, entry: str, **kwargs: Any) -> None:
        self.client = client
        self._tasks: List[Any] = []
        self._event: Optional[threading.Event] = None
        if is_asyncio(client):
            kwargs['started'] = self._tasks
        else:
            self._event = kwargs['cancel'] = threading.Event()
        self.call = BackgroundCall(acquire, client, entry, name=f'matrix-{entry}', **kwargs)

    @property
    def thread(self) -> threading.Thread:
        return self.call.thread

    def cancel(self) -> None:
        if self._event is not None:
            self._event.set()
            return
        assert self._tasks, 'the task has not started'
        task = self._tasks[0]
        self.client._runner.loop.call_soon_threadsafe(task.cancel)


def wait_settled(client: Any, timeout: float) -> bool:
    """The client's ``wait_settled`` (the asyncio client's is a coroutine)."""
    if is_asyncio(client):
        settled: bool = run_on_loop(client, lambda: client.async_client.wait_settled(timeout))
        return settled
    settled = client.wait_settled(timeout)
    return settled


def hold_every_key(client: Any, entry: str, **options: Any) -> List[Held]:
    """Acquire every key of the entry point with the entry point itself (``acquire_first_lock``
    is called once per key of its pool)."""
    calls = len(KEYS[entry]) if entry == ACQUIRE_FIRST_LOCK else 1
    held = [acquire(client, entry, retry_timeout=0, **options) if waits(entry) else acquire(client, entry, **options)
            for _ in range(calls)]
    assert all(each is not None for each in held), f'{entry} could not take free keys'
    return [each for each in held if each is not None]


def keys_of(held: Sequence[Held]) -> List[Tuple[str, str]]:
    return [key for each in held for key in each.keys]
