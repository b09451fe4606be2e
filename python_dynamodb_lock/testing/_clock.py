"""A clock whose time moves only when a test says so, for both lock clients.

:class:`ManualClock` implements the clock protocol of :mod:`python_dynamodb_lock._common.clock`:
``monotonic()``, ``time()``, ``sleep(seconds, threading.Event)`` for the threaded client and
``sleep_async(seconds, asyncio.Event)`` for the asyncio client. Every sleeper is tracked by
who sleeps (a thread, or an asyncio task), so a test can advance time and then wait until
everything has done what was due (:meth:`ManualClock.wait_until_idle`).
"""
from __future__ import annotations

import asyncio
import contextlib
import contextvars
import threading
import time
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Set, Tuple, Union

__all__ = ['REAL_TIMEOUT', 'Actor', 'ManualClock', 'wait_until']

#: Real seconds the helpers wait for a thread or task before declaring a test stuck.
REAL_TIMEOUT = 20.0

#: What can sleep on a :class:`ManualClock`: a thread, or an asyncio task.
Actor = Union[threading.Thread, 'asyncio.Task[Any]']

_MICROS = 1_000_000
_FOREVER_S = 1e12          # a deadline no test reaches: sleeps longer than this never end by time
_AUTO = 'auto'
_AT_ONCE = 'at-once'


def wait_until(predicate: Callable[[], bool], timeout: float = REAL_TIMEOUT,
               message: Callable[[], str] = lambda: 'condition not reached') -> None:
    """Poll ``predicate`` every millisecond (real time) until it is true.

    :raises AssertionError: after ``timeout`` real seconds, with ``message()`` in the text.
    """
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f'gave up after {timeout}s: {message()}')
        time.sleep(0.001)


def _resolve(future: 'asyncio.Future[None]') -> None:
    if not future.done():
        future.set_result(None)


def _current_task() -> Optional['asyncio.Task[Any]']:
    try:
        return asyncio.current_task()
    except RuntimeError:   # no running event loop in this thread
        return None


def _is_finished(actor: Any) -> bool:
    if isinstance(actor, threading.Thread):
        return not actor.is_alive()
    return bool(actor.done())


class ManualClock:
    """A clock for tests: time moves only when the test calls :meth:`advance`.

    Give it to a lock client (``clock=ManualClock()``, for either client) and the client's
    waits, retry periods, heartbeat periods and leases all run on it: a test of "the lock is
    taken over after its 30-second lease" takes milliseconds, and asserts on fake time, never
    on how long something took.

    ``monotonic()`` starts at ``start_monotonic``; ``time()`` (the wall clock, used for the TTL
    attribute) starts at ``start_time`` (default: the real time now, so that rows are not
    already past their TTL on an engine that deletes expired rows) and moves with
    ``monotonic()`` unless :meth:`shift_wall_clock` skews it. Time is kept in whole
    microseconds, so many small advances add up exactly.

    A sleep (``sleep`` in a thread, ``sleep_async`` in a task) behaves in one of three ways:

    * by default the sleeper waits until :meth:`advance`, called by someone else, brings the
      fake time to its deadline, or until its wake event is set (``close()`` sets it);
    * inside :meth:`auto_advance_in_current_thread` a sleep moves the clock forward by its own
      length at once (waking the other sleepers whose deadline that passes): a blocking call
      such as a waiting ``acquire_lock`` then runs to its end in the calling thread;
    * inside :meth:`sleeps_return_at_once_in_current_thread` a sleep returns at once and time
      stands still.

    The two modes are kept in a :class:`contextvars.ContextVar`, so they follow the caller:
    into a coroutine it awaits, into a coroutine it submits to an event loop with
    :func:`asyncio.run_coroutine_threadsafe` (which runs in a copy of the submitting thread's
    context), and into tasks created inside the block. Background threads, and tasks created
    outside the block, keep the default.

    Every sleep is recorded in :attr:`sleeps` as ``(name, seconds)``, the name being the
    thread's name or the asyncio task's name.
    """

    def __init__(self, start_monotonic: float = 1000.0, start_time: Optional[float] = None,
                 poll_interval: float = 0.002) -> None:
        self._cond = threading.Condition()
        self._now_us = round(start_monotonic * _MICROS)
        wall = time.time() if start_time is None else start_time
        self._wall_offset_us = round(wall * _MICROS) - self._now_us
        self._poll_interval = poll_interval
        self._sleepers: Dict[Any, int] = {}
        self._alarms: Dict[Any, Tuple[asyncio.AbstractEventLoop, 'asyncio.Future[None]']] = {}
        self._delegations: Dict[threading.Thread, Any] = {}
        self._mode: contextvars.ContextVar[Optional[str]] = contextvars.ContextVar(
            f'ManualClock-mode-{id(self):x}', default=None)
        #: ``(thread or task name, seconds)`` of every sleep asked for, in order.
        self.sleeps: List[Tuple[str, float]] = []

    # -- the Clock protocol ---------------------------------------------------------------

    def monotonic(self) -> float:
        """The fake monotonic time, in seconds."""
        with self._cond:
            return self._now_us / _MICROS

    def time(self) -> float:
        """The fake wall-clock time, in seconds since the epoch."""
        with self._cond:
            return (self._now_us + self._wall_offset_us) / _MICROS

    def sleep(self, seconds: float, wake: threading.Event) -> bool:
        """Sleep in a thread until the fake time has moved ``seconds`` on, or ``wake`` is set.

        :returns: True when woken by ``wake``, False when the time ran out.
        """
        me = threading.current_thread()
        with self._cond:
            self.sleeps.append((me.name, seconds))
        if not seconds > 0 or wake.is_set():
            return wake.is_set()
        mode = self._mode.get()
        if mode == _AT_ONCE:
            return False
        if mode == _AUTO:
            self.advance(seconds)
            return False
        with self._cond:
            deadline = self._deadline(seconds)
            self._sleepers[me] = deadline
            try:
                while True:
                    if wake.is_set():
                        return True
                    if self._now_us >= deadline:
                        return False
                    self._cond.wait(self._poll_interval)
            finally:
                del self._sleepers[me]

    async def sleep_async(self, seconds: float, wake: asyncio.Event) -> bool:
        """Like :meth:`sleep`, in an asyncio task: the task waits, the event loop does not."""
        me = _current_task()
        with self._cond:
            self.sleeps.append((me.get_name() if me is not None else threading.current_thread().name, seconds))
        if not seconds > 0 or wake.is_set():
            return wake.is_set()
        mode = self._mode.get()
        if mode == _AT_ONCE:
            return False
        if mode == _AUTO:
            self.advance(seconds)
            await asyncio.sleep(0)
            return False
        loop = asyncio.get_running_loop()
        key: Any = me if me is not None else object()
        with self._cond:
            deadline = self._deadline(seconds)
            alarm: 'asyncio.Future[None]' = loop.create_future()
            self._sleepers[key] = deadline
            self._alarms[key] = (loop, alarm)
        woken = loop.create_task(wake.wait())
        try:
            while True:
                if wake.is_set():
                    return True
                with self._cond:
                    if self._now_us >= deadline:
                        return False
                    if alarm.done():
                        alarm = loop.create_future()
                        self._alarms[key] = (loop, alarm)
                waits: 'Set[asyncio.Future[Any]]' = {alarm, woken}
                await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            woken.cancel()
            with self._cond:
                del self._sleepers[key]
                del self._alarms[key]

    def _deadline(self, seconds: float) -> int:
        return self._now_us + max(1, round(min(seconds, _FOREVER_S) * _MICROS))

    # -- driving it -----------------------------------------------------------------------

    def advance(self, seconds: float) -> None:
        """Move both clocks forward by ``seconds``, waking the sleepers whose deadline passes.

        Safe from any thread and from a coroutine.
        """
        if seconds < 0:
            raise ValueError('a monotonic clock never goes backwards')
        with self._cond:
            self._now_us += round(seconds * _MICROS)
            self._cond.notify_all()
            due = [alarm for key, alarm in self._alarms.items() if self._sleepers[key] <= self._now_us]
        for loop, future in due:
            try:
                loop.call_soon_threadsafe(_resolve, future)
            except RuntimeError:   # that loop is closed: its sleeper is gone with it
                pass

    def shift_wall_clock(self, seconds: float) -> None:
        """Skew ``time()`` by ``seconds`` (either way) without touching ``monotonic()``."""
        with self._cond:
            self._wall_offset_us += round(seconds * _MICROS)

    @contextlib.contextmanager
    def auto_advance_in_current_thread(self) -> Iterator['ManualClock']:
        """Within the block, sleeps of the caller (and of what it runs, see the class) advance
        the clock by their own length instead of waiting."""
        token = self._mode.set(_AUTO)
        try:
            yield self
        finally:
            self._mode.reset(token)

    @contextlib.contextmanager
    def sleeps_return_at_once_in_current_thread(self) -> Iterator['ManualClock']:
        """Within the block, sleeps of the caller return at once and time stands still."""
        token = self._mode.set(_AT_ONCE)
        try:
            yield self
        finally:
            self._mode.reset(token)

    @contextlib.contextmanager
    def acting_for(self, thread: threading.Thread) -> Iterator[None]:
        """Declare that the current task (or thread) does the work ``thread`` is waiting for.

        For a thread that blocks until a coroutine it submitted to an event loop has finished
        (``asyncio.run_coroutine_threadsafe(...).result()``): within the block,
        :meth:`is_idle` judges ``thread`` by the task doing its work, so a test can wait until
        a blocked caller's task sleeps on this clock.
        """
        worker: Any = _current_task() or threading.current_thread()
        with self._cond:
            self._delegations[thread] = worker
        try:
            yield
        finally:
            with self._cond:
                if self._delegations.get(thread) is worker:
                    del self._delegations[thread]

    # -- observing it ---------------------------------------------------------------------

    def is_idle(self, actor: Actor) -> bool:
        """True when ``actor`` (a thread or an asyncio task) has finished, or sleeps on this
        clock with a deadline still ahead; a thread blocked on a task it declared with
        :meth:`acting_for` is idle when that task is."""
        if _is_finished(actor):
            return True
        with self._cond:
            deadline = self._sleepers.get(actor)
            if deadline is not None:
                return deadline > self._now_us
            delegate = self._delegations.get(actor) if isinstance(actor, threading.Thread) else None
        return delegate is not None and delegate is not actor and self.is_idle(delegate)

    def wait_until_idle(self, actors: Iterable[Actor], timeout: float = REAL_TIMEOUT) -> None:
        """Block (real time) until every thread or task :meth:`is_idle`.

        :raises AssertionError: after ``timeout`` real seconds, naming the busy ones.
        """
        actors = list(actors)
        wait_until(lambda: all(self.is_idle(actor) for actor in actors), timeout,
                   lambda: f'still busy: {[_name_of(actor) for actor in actors if not self.is_idle(actor)]}')

    def sleeper_count(self) -> int:
        """How many sleeps (of threads or asyncio tasks) are waiting on this clock now: for a test
        that must let a thread or task reach its sleep before it calls :meth:`advance`."""
        with self._cond:
            return len(self._sleepers)

    def sleeps_of(self, name: str) -> List[float]:
        """The lengths of the sleeps the thread or task called ``name`` asked for, in order."""
        with self._cond:
            return [seconds for sleeper, seconds in self.sleeps if sleeper == name]


def _name_of(actor: object) -> str:
    if isinstance(actor, threading.Thread):
        return actor.name
    get_name = getattr(actor, 'get_name', None)
    return str(get_name()) if get_name is not None else repr(actor)
