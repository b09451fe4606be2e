"""Leader election, for both clients: its decisions (:class:`ElectionLogic`), the reasons a
leader loses (:class:`LossReason`), and the asyncio face :class:`AsyncLeaderElection`
(published as ``python_dynamodb_lock.aio.AsyncLeaderElection``). The threaded face,
``LeaderElection``, is in :mod:`python_dynamodb_lock.recipes`.
"""
from __future__ import annotations

import datetime
import logging
import threading
from types import TracebackType
from typing import Any, Callable, Generic, Mapping, Optional, Set, Type, TypeVar

from .._model.errors import DynamoDBLockError
from .._common.locks import BaseDynamoDBLock, HeldLock
from .common import CHUNK, HELD, NO_SORT_KEY, Duration, call_safely, ended, logger, retry_period_of, timeout_seconds
from .handlers import Tasks
from .operations import AcquireFirst, GetLock, Join, Recipe, Release, Wait
from .seams import RecipeLock

__all__ = ['CANDIDATE_ATTRIBUTE', 'AsyncLeaderElection', 'ElectionLogic', 'LossReason']

OnElected = Callable[[Optional[int]], Any]
OnLost = Callable[[Optional[int], str], Any]
T = TypeVar('T', bound=RecipeLock)

# The additional attribute in which the leader's row records its candidate id.
CANDIDATE_ATTRIBUTE = 'candidate_id'


class LossReason:
    """Why a :class:`LeaderElection` lost leadership: the ``reason`` given to ``on_lost``.

    * ``IN_DANGER`` -- no renewal of the leader's lock was confirmed for the client's
      ``safe_period``: DynamoDB is unreachable or throttling, or this process was paused (a
      long garbage collection, ``SIGSTOP``, a suspended virtual machine). Reported *before*
      another candidate can be elected (see :class:`LeaderElection`).
    * ``STOLEN`` -- the lock was taken over or its row removed (``lock.loss_reason`` says which):
      someone else may lead already. Only a process that was paused past its lease, an operator's
      ``force_release_lock``, or candidates with an over-optimistic ``max_clock_skew`` get here
      without an ``IN_DANGER`` first.
    * ``RELEASED`` -- the lock was released behind the election's back (the application released
      ``election.lock``, or closed the client with ``release_locks=True``).
    * ``RESIGNED`` -- :meth:`LeaderElection.resign` was called.
    * ``CLOSED`` -- :meth:`LeaderElection.close` was called.
    """

    IN_DANGER = 'IN_DANGER'
    STOLEN = 'STOLEN'
    RELEASED = 'RELEASED'
    RESIGNED = 'RESIGNED'
    CLOSED = 'CLOSED'


class ElectionLogic(Generic[T]):
    """The decisions of a leader election, for both clients (see :class:`LeaderElection`);
    ``T`` is the client's lock class. Waits and calls go through ``self._handler``."""

    #: The handler class of the face (``Threads`` or ``Tasks``), which names the client it takes.
    _handler_class: Any = None

    def __init__(
        self,
        lock_client: object,
        name: Any,
        *,
        sort_key: str = NO_SORT_KEY,
        candidate_id: Optional[str] = None,
        on_elected: Optional[OnElected] = None,
        on_lost: Optional[OnLost] = None,
        retry_period: Optional[datetime.timedelta] = None,
        additional_attributes: Optional[Mapping[str, Any]] = None,
    ) -> None:
        handler = self._handler_class.for_client(lock_client)
        client = handler.client
        if not client.safe_period < client.lease_duration:
            raise ValueError(
                f'a leader election needs a lock client whose safe_period ({client.safe_period}s) is shorter than '
                f'its lease_duration ({client.lease_duration}s): the difference is the time a leader has to '
                'step down before another can be elected')
        client.check_lock_arguments(name, sort_key)
        if candidate_id is None:
            candidate_id = client.owner_name
        if not isinstance(candidate_id, str) or not candidate_id:
            raise TypeError('candidate_id must be a non-empty str')
        for label, callback in (('on_elected', on_elected), ('on_lost', on_lost)):
            if callback is not None and not callable(callback):
                raise TypeError(f'{label} must be callable or None, not {type(callback).__name__}')
        client.check_lock_arguments(name, sort_key, additional_attributes)
        extra = dict(additional_attributes or {})
        if CANDIDATE_ATTRIBUTE in extra:
            raise ValueError(f'additional_attributes may not use {CANDIDATE_ATTRIBUTE!r}: the election writes it')
        extra[CANDIDATE_ATTRIBUTE] = candidate_id
        self._handler = handler
        self._client = client
        self._clock = client.clock
        self.name = name
        self.sort_key = sort_key
        self.candidate_id = candidate_id
        self._on_elected = on_elected
        self._on_lost = on_lost
        self._retry_period = retry_period_of(client, retry_period)
        self._attributes = extra
        self._lease = float(client.lease_duration)
        self._safe = float(client.safe_period)
        # Transitions (elected, stepped down, resigned, closed) and their callbacks happen under
        # this lock, one at a time; reentrant, so that a callback may resign or close. Nothing
        # under it waits (a release under it is started, not awaited, by the asyncio handler).
        self._guard = threading.RLock()
        self._wake = handler.event()
        self._stop = handler.event()    # set by resign() and close(): ends a campaign's acquisition
        self._campaigning = False
        self._closed = False
        self._lock: Optional[T] = None
        self._ended: Optional[T] = None     # the lock whose term is over, until stepped down
        self._announced: Optional[T] = None  # the lock whose on_elected has returned
        self._term: Optional[int] = None
        self._task: Any = None
        self._waiters: Set[Any] = set()
        self._waiters_guard = threading.Lock()

    # -- what the application reads -------------------------------------------------------

    @property
    def is_leader(self) -> bool:
        """Whether this candidate leads right now, that is, its lock is held and its last
        confirmed renewal is younger than the client's ``safe_period``. Computed at each read, so it is
        False from the moment leadership may be ending, even before ``on_lost`` has run."""
        lock = self._lock
        return lock is not None and self._leads_with(lock)

    @property
    def term(self) -> Optional[int]:
        """The current term (the lock's fencing token) while :attr:`is_leader`; None otherwise."""
        term = self._term
        return term if self.is_leader else None

    @property
    def lock(self) -> Optional[T]:
        """The election's lock while :attr:`is_leader`, for guarded writes (its
        ``transact_write_items``, ``put_item``, ...); None otherwise. Do not release it: use
        :meth:`resign`."""
        lock = self._lock
        return lock if lock is not None and self._leads_with(lock) else None

    @property
    def campaigning(self) -> bool:
        """True between :meth:`start` and :meth:`resign` / :meth:`close`."""
        return self._campaigning

    @property
    def worker(self) -> Any:
        """The election's background work (the thread, or the asyncio task, that campaigns and
        watches the lock), None before :meth:`start`: for a test to wait until it is idle, say."""
        return self._task

    def __repr__(self) -> str:
        return (f'{type(self).__name__}({self.name!r}, candidate={self.candidate_id!r}, leader={self.is_leader}, '
                f'term={self.term})')

    # -- the decisions ------------------------------------------------------------------------

    def _current_leader(self) -> Recipe[Optional[BaseDynamoDBLock]]:
        row: Optional[BaseDynamoDBLock] = yield GetLock(self.name, self.sort_key)
        return row

    def _waiting_for_leadership(self, timeout: Optional[Duration]) -> Recipe[bool]:
        seconds = timeout_seconds(timeout)
        deadline = None if seconds is None else self._clock.monotonic() + seconds
        notified = self._handler.event()
        with self._waiters_guard:
            self._waiters.add(notified)
        try:
            while not (self.is_leader and self._announced is self._lock):
                if self._closed:
                    return False
                remaining = CHUNK if deadline is None else deadline - self._clock.monotonic()
                if remaining <= 0:
                    return False
                yield Wait(remaining, notified)
                notified.clear()
            return True
        finally:
            with self._waiters_guard:
                self._waiters.discard(notified)

    def _starting(self) -> None:
        """``start()``: campaign (the background work starts on the first call)."""
        with self._guard:
            if self._closed:
                raise RuntimeError(f'the leader election {self.name!r} is closed')
            self._campaigning = True
            self._stop.clear()
            if self._task is None:
                self._task = self._handler.spawn(f'{type(self).__name__}-{self.name}', self._running())
        self._handler.set(self._wake)

    def _resigning(self) -> Recipe[None]:
        with self._guard:
            self._campaigning = False
            self._handler.set(self._stop)
            lock = self._lock
            if lock is not None:
                yield from self._step_down(lock, LossReason.RESIGNED)
        self._handler.set(self._wake)

    def _closing(self) -> Recipe[None]:
        with self._guard:
            if self._closed:
                return
            self._closed = True
            self._campaigning = False
            self._handler.set(self._stop)
            lock = self._lock
            if lock is not None:
                yield from self._step_down(lock, LossReason.CLOSED)
            task = self._task
        self._handler.set(self._wake)
        self._notify_waiters()
        if task is not None:
            yield Join(task)

    def _leads_with(self, lock: T) -> bool:
        """The lock is held, and its last confirmed renewal is younger than the safe period.

        Once that was found false, the term is over for good (the thread steps down next): a
        renewal that succeeds afterwards does not make it true again.
        """
        if self._ended is lock:
            return False
        if lock.status == 'LOCKED' and self._until_step_down(lock) > 0:
            return True
        self._ended = lock
        return False

    def _until_step_down(self, lock: RecipeLock) -> float:
        """Seconds until ``last confirmed + safe_period``."""
        return float(lock.lease_remaining()) - (self._lease - self._safe)

    def _running(self) -> Recipe[None]:
        """The election's background work: campaign, watch, step down, until closed."""
        logger.info('Leader election %r: candidate %s started', self.name, self.candidate_id)
        while True:
            self._wake.clear()        # before reading the state: a change after this sets it again
            with self._guard:
                if self._closed:
                    break
                lock, campaigning = self._lock, self._campaigning
            try:
                if lock is not None:
                    yield from self._watch(lock)
                elif campaigning:
                    yield from self._campaign()
                else:
                    yield Wait(CHUNK, self._wake)
            except DynamoDBLockError as error:
                if error.code == DynamoDBLockError.CLIENT_SHUTDOWN:
                    logger.warning('Leader election %r: the lock client was closed; candidate %s stops campaigning',
                                   self.name, self.candidate_id)
                    with self._guard:
                        self._campaigning = False
                    continue
                logger.warning('Leader election %r: candidate %s failed (%s); trying again in %ss', self.name,
                               self.candidate_id, error, self._retry_period, exc_info=True)
                yield Wait(self._retry_period, self._wake)
            except Exception:
                logger.exception('Leader election %r: unexpected error in candidate %s; trying again in %ss',
                                  self.name, self.candidate_id, self._retry_period)
                yield Wait(self._retry_period, self._wake)
        logger.info('Leader election %r: candidate %s stopped', self.name, self.candidate_id)

    def _campaign(self) -> Recipe[None]:
        with self._guard:
            wanted = self._campaigning and not self._closed
        if not wanted:
            return
        try:
            lock = yield AcquireFirst(self.name, [self.sort_key], self._retry_period, CHUNK, self._attributes,
                                      self._lock_trouble, self._stop)
        except DynamoDBLockError as error:
            if ended(error):
                return    # campaign again (or stop: resigned or closed)
            raise
        with self._guard:
            if self._campaigning and not self._closed:
                self._lock, self._term = lock, lock.fencing_token
                logger.info('Leader election %r: candidate %s elected, term %s', self.name, self.candidate_id,
                            lock.fencing_token)
                call_safely(f'on_elected of leader election {self.name!r}', self._on_elected, lock.fencing_token)
                self._announced = lock
                elected = True
            else:
                elected = False
        if elected:
            self._notify_waiters()
        else:     # resigned or closed while the winning write was in flight
            yield Release(lock)

    def _watch(self, lock: T) -> Recipe[None]:
        """Sleep until the lock may be in trouble; step down once leadership is not safe."""
        if self._leads_with(lock):
            # Until the safe period ends; a LOCK_STOLEN / LOCK_IN_DANGER callback wakes it
            # sooner, and a release behind its back is noticed within a retry period.
            yield Wait(min(self._until_step_down(lock), self._retry_period), self._wake)
            return
        status = lock.status
        reason = (LossReason.STOLEN if status == 'INVALID'
                  else LossReason.RELEASED if status == 'RELEASED' else LossReason.IN_DANGER)
        with self._guard:
            yield from self._step_down(lock, reason)

    def _step_down(self, lock: T, reason: str) -> Recipe[None]:
        """Called under ``_guard``: report the loss, then release the lock."""
        if self._lock is not lock:
            return
        term = self._term
        self._lock = None
        level = logging.WARNING if reason in (LossReason.IN_DANGER, LossReason.STOLEN) else logging.INFO
        logger.log(level, 'Leader election %r: candidate %s is no longer leader (term %s): %s', self.name,
                   self.candidate_id, term, reason)
        call_safely(f'on_lost of leader election {self.name!r}', self._on_lost, term, reason)
        if self._ended_lock_held(lock):
            yield Release(lock, True, wait=False)

    @staticmethod
    def _ended_lock_held(lock: RecipeLock) -> bool:
        return lock.status in HELD

    def _lock_trouble(self, code: str, lock: HeldLock) -> None:
        """The lock's app_callback (LOCK_STOLEN, LOCK_IN_DANGER): wake the election to look."""
        self._handler.set(self._wake)

    def _notify_waiters(self) -> None:
        with self._waiters_guard:
            for waiter in self._waiters:
                self._handler.set(waiter)


class AsyncLeaderElection(ElectionLogic[HeldLock]):
    """:class:`~python_dynamodb_lock.recipes.LeaderElection` for the asyncio client: the same
    decisions, guarantees and arguments; the election's background work is a task of the loop.

    Make it, and call :meth:`start`, in a coroutine on the client's loop. ``on_elected`` and
    ``on_lost`` are plain functions, called on the loop (keep them short).
    ``async with AsyncLeaderElection(...)`` starts it and closes it at the end.
    """

    _handler: 'Tasks'
    _handler_class = Tasks

    async def current_leader(self) -> Optional[BaseDynamoDBLock]:
        """The election's lock row as it is in the table now; see ``LeaderElection.current_leader``."""
        return await self._handler.run(self._current_leader())

    async def wait_for_leadership(self, timeout: Optional[Duration] = None) -> bool:
        """Wait until this candidate leads; see ``LeaderElection.wait_for_leadership``."""
        return await self._handler.run(self._waiting_for_leadership(timeout))

    def start(self) -> 'AsyncLeaderElection':
        """Start (or resume) campaigning, in a task; returns at once. Call it on the loop.

        :raises RuntimeError: after :meth:`close`.
        """
        self._starting()
        return self

    async def resign(self) -> None:
        """Stop campaigning, and step down if leading; see ``LeaderElection.resign``."""
        await self._handler.run(self._resigning())

    async def close(self) -> None:
        """Resign for good and wait for the election's task to end; see ``LeaderElection.close``."""
        await self._handler.run(self._closing())

    async def __aenter__(self) -> 'AsyncLeaderElection':
        return self.start()

    async def __aexit__(self, exc_type: Optional[Type[BaseException]], exc_value: Optional[BaseException],
                        traceback: Optional[TracebackType]) -> None:
        await self.close()
