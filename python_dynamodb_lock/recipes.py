"""Leader election and a counting semaphore, built on the lock client's public API.

Both recipes are thin layers over the ordinary lock machinery, so they inherit its behaviour
and its guarantees: leases renewed in the background, takeover of a crashed holder's lock only
after its version has stayed unchanged for a whole lease on the waiter's own monotonic clock,
fencing tokens, guarded writes, ``LOCK_STOLEN`` and ``LOCK_IN_DANGER``.

* :class:`LeaderElection` -- one lock per election; whoever holds it is the leader, and the
  lock's fencing token is the leader's *term*.
* :class:`Semaphore` -- N locks per semaphore (the sort keys ``slot-0`` to ``slot-<N-1>``
  under the semaphore's name); whoever holds one of them holds a :class:`Permit`.

These take the threaded client, :class:`~python_dynamodb_lock.python_dynamodb_lock.DynamoDBLockClient`;
their asyncio twins, :class:`python_dynamodb_lock.aio.AsyncLeaderElection` and
:class:`python_dynamodb_lock.aio.AsyncSemaphore`, take the asyncio client and behave the same.

How they are built (and how to build your own): the decisions of each recipe are written once,
as generators that yield *operations* (acquire the first free of several keys, acquire one key,
release, read a row, wait on the client's clock) and receive their results; a small handler
performs the operations with one client's public API (:class:`Threads` blocks in the calling
thread, the asyncio handler awaits). Only public members of the clients are used: ``acquire_lock``,
``acquire_first_lock``, ``release_lock``, ``get_lock``, ``check_lock_arguments``, ``clock``
and the read-only settings. See the "Recipes" page of the documentation for worked examples
and failure modes.
"""
from __future__ import annotations

import dataclasses
import datetime
import logging
import math
import random
import threading
from types import TracebackType
from typing import (Any, Callable, Dict, Generator, Generic, List, Mapping, Optional, Sequence, Set, Tuple, Type,
                    TypeVar, Union)

from ._validation import require_duration
from .python_dynamodb_lock import BaseDynamoDBLock, DynamoDBLock, DynamoDBLockClient, DynamoDBLockError

__all__ = ['LeaderElection', 'LossReason', 'Permit', 'Semaphore']

logger = logging.getLogger(__name__)

#: A duration: a :class:`datetime.timedelta`, or a number of seconds.
Duration = Union[datetime.timedelta, float, int]
OnElected = Callable[[Optional[int]], Any]
OnLost = Callable[[Optional[int], str], Any]
AppCallback = Callable[[str, DynamoDBLock], Any]
T = TypeVar('T')

# A wait "forever" is made of acquisitions of this length, one after the other (the lock
# machinery wants a finite ``retry_timeout``). A holder that dies just before the end of one
# is taken over at most one lease later than it would have been.
_CHUNK = 24 * 3600.0
# The most slots a semaphore may have: an acquisition that finds every slot busy costs one
# conditional write per slot, then one read per slot per retry period.
MAX_SEMAPHORE_LIMIT = 1000
# The additional attribute in which a permit's row records the limit of its semaphore.
LIMIT_ATTRIBUTE = 'semaphore_limit'
# The additional attribute in which the leader's row records its candidate id.
CANDIDATE_ATTRIBUTE = 'candidate_id'
# The sort key the published package uses on a table without sort keys.
_NO_SORT_KEY = '-'
_HELD = ('LOCKED', 'IN_DANGER')


# --------------------------------------------------------------------------------------------
# Operations: what a recipe asks its handler to do
# --------------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class AcquireFirst:
    """``acquire_first_lock`` (or ``acquire_lock`` for one key without ``wake``); ``stop``: an
    event of the handler whose setting ends the acquisition with ``ACQUIRE_CANCELLED``, nothing
    held; ``wake``: one whose setting makes it look at every key at once."""

    partition_key: Any
    sort_keys: Sequence[str]
    retry_period: float
    retry_timeout: float
    additional_attributes: Mapping[str, Any]
    app_callback: Any
    stop: Any = None
    wake: Any = None


@dataclasses.dataclass(frozen=True)
class Release:
    """``release_lock(lock, best_effort)``; ``wait=False``: start it and go on (the asyncio
    handler does not await it; the threaded one cannot help but finish it)."""

    lock: Any
    best_effort: bool = True
    wait: bool = True


@dataclasses.dataclass(frozen=True)
class GetLock:
    """``get_lock(partition_key, sort_key)``."""

    partition_key: Any
    sort_key: str


@dataclasses.dataclass(frozen=True)
class Wait:
    """Sleep ``seconds`` on the client's clock, or until ``event`` is set: True when woken."""

    seconds: float
    event: Any


@dataclasses.dataclass(frozen=True)
class Join:
    """Wait until the background work ``handle`` (from ``Handler.spawn``) has ended."""

    handle: Any


#: A recipe's logic: a generator of operations, returning the recipe's result.
Recipe = Generator[Any, Any, T]


def advance(recipe: Recipe[Any], value: Any, error: Optional[BaseException]) -> Tuple[bool, Any]:
    """Send ``value`` (or throw ``error``) into a recipe: (False, its next operation), or
    (True, its result)."""
    try:
        return False, (recipe.throw(error) if error is not None else recipe.send(value))
    except StopIteration as done:
        return True, done.value


def outcome(function: Callable[[Any], Any], argument: Any) -> Tuple[Any, Optional[BaseException]]:
    """``(function(argument), None)``, or ``(None, what it raised)`` (to be thrown into a recipe)."""
    try:
        return function(argument), None
    except BaseException as exc:
        return None, exc


class Handler:
    """Performs a recipe's operations with one kind of lock client (``client_class``): events,
    setting them, background work (``spawn``), and running a recipe (``run``)."""

    client_class: type = object

    def __init__(self, client: Any) -> None:
        self.client = client

    @classmethod
    def for_client(cls, lock_client: Any) -> Any:
        return cls(_require_client(lock_client, cls.client_class))


class Threads(Handler):
    """Performs a recipe's operations with the threaded client, blocking the calling thread."""

    client_class = DynamoDBLockClient
    client: DynamoDBLockClient

    def event(self) -> threading.Event:
        return threading.Event()

    def set(self, event: threading.Event) -> None:
        event.set()

    def spawn(self, name: str, recipe: Recipe[None]) -> threading.Thread:
        thread = threading.Thread(target=self.run, args=(recipe,), name=name, daemon=True)
        thread.start()
        return thread

    def run(self, recipe: Recipe[T]) -> T:
        """Run a recipe to its end: each operation's result is sent in, what it raises thrown in."""
        finished, step = advance(recipe, None, None)
        while not finished:
            finished, step = advance(recipe, *outcome(self.perform, step))
        result: T = step
        return result

    def perform(self, operation: Any) -> Any:
        client = self.client
        if isinstance(operation, Wait):
            return client.clock.sleep(operation.seconds, operation.event)
        if isinstance(operation, AcquireFirst):
            retry_period = datetime.timedelta(seconds=operation.retry_period)
            retry_timeout = datetime.timedelta(seconds=operation.retry_timeout)
            if operation.wake is None and len(operation.sort_keys) == 1:
                return client.acquire_lock(operation.partition_key, operation.sort_keys[0], retry_period,
                                           retry_timeout, operation.additional_attributes, operation.app_callback,
                                           raise_context_exception=True, cancel=operation.stop)
            return client.acquire_first_lock(operation.partition_key, list(operation.sort_keys), retry_period,
                                             retry_timeout, operation.additional_attributes, operation.app_callback,
                                             raise_context_exception=True, cancel=operation.stop, wake=operation.wake)
        if isinstance(operation, Release):
            return client.release_lock(operation.lock, operation.best_effort)
        if isinstance(operation, GetLock):
            return client.get_lock(operation.partition_key, operation.sort_key)
        if isinstance(operation, Join):
            if operation.handle is not threading.current_thread():
                operation.handle.join()
            return None
        raise TypeError(f'unknown recipe operation {operation!r}')


# --------------------------------------------------------------------------------------------
# Arguments
# --------------------------------------------------------------------------------------------

def _require_client(lock_client: Any, kind: type) -> Any:
    if not isinstance(lock_client, kind):
        raise TypeError(f'lock_client must be a {kind.__name__}, not {type(lock_client).__name__}')
    return lock_client


def _seconds(name: str, value: Any, *, allow_none: bool) -> Optional[float]:
    """A duration given as a timedelta or a number of seconds: its seconds (None stays None)."""
    if value is None:
        if allow_none:
            return None
        raise TypeError(f'{name} must be a datetime.timedelta or a number of seconds, not None')
    if isinstance(value, datetime.timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = float(value)
    else:
        raise TypeError(f'{name} must be a datetime.timedelta or a number of seconds, not {type(value).__name__}')
    if math.isnan(seconds) or seconds < 0:
        raise ValueError(f'{name} must be zero or positive, got {value!r}')
    return seconds


def _retry_period(client: Any, retry_period: Optional[datetime.timedelta]) -> float:
    if retry_period is None:
        return float(client.heartbeat_period)
    # Positive (zero would poll without a pause) and at most 3650 days, like the client's periods.
    return require_duration('retry_period', retry_period)


def _require_limit(limit: Any) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int):
        raise TypeError(f'limit must be a positive int, not {type(limit).__name__}')
    if not 1 <= limit <= MAX_SEMAPHORE_LIMIT:
        raise ValueError(f'limit must be from 1 to {MAX_SEMAPHORE_LIMIT}, got {limit}')
    return limit


def _call_safely(what: str, function: Optional[Callable[..., Any]], *args: Any) -> None:
    """Run an application callback; what it raises is logged, never propagated."""
    if function is None:
        return
    try:
        function(*args)
    except Exception:
        logger.exception('%s raised', what)


def _ended(error: BaseException) -> bool:
    """An acquisition that ran out of time or was stopped: not a failure."""
    return isinstance(error, DynamoDBLockError) and error.code in (DynamoDBLockError.ACQUIRE_TIMEOUT,
                                                                    DynamoDBLockError.ACQUIRE_CANCELLED)


# --------------------------------------------------------------------------------------------
# Leader election
# --------------------------------------------------------------------------------------------

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

    #: The handler class (its client class is ``_handler.client_class``).
    _handler_class: Any = None

    def __init__(
        self,
        lock_client: Any,
        name: Any,
        *,
        sort_key: str = _NO_SORT_KEY,
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
        self._retry_period = _retry_period(client, retry_period)
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
        seconds = _seconds('timeout', timeout, allow_none=True)
        deadline = None if seconds is None else self._clock.monotonic() + seconds
        notified = self._handler.event()
        with self._waiters_guard:
            self._waiters.add(notified)
        try:
            while not (self.is_leader and self._announced is self._lock):
                if self._closed:
                    return False
                remaining = _CHUNK if deadline is None else deadline - self._clock.monotonic()
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

    def _leads_with(self, lock: Any) -> bool:
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

    def _until_step_down(self, lock: Any) -> float:
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
                    yield Wait(_CHUNK, self._wake)
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
            lock = yield AcquireFirst(self.name, [self.sort_key], self._retry_period, _CHUNK, self._attributes,
                                      self._lock_trouble, self._stop)
        except DynamoDBLockError as error:
            if _ended(error):
                return    # campaign again (or stop: resigned or closed)
            raise
        with self._guard:
            if self._campaigning and not self._closed:
                self._lock, self._term = lock, lock.fencing_token
                logger.info('Leader election %r: candidate %s elected, term %s', self.name, self.candidate_id,
                            lock.fencing_token)
                _call_safely(f'on_elected of leader election {self.name!r}', self._on_elected, lock.fencing_token)
                self._announced = lock
                elected = True
            else:
                elected = False
        if elected:
            self._notify_waiters()
        else:     # resigned or closed while the winning write was in flight
            yield Release(lock)

    def _watch(self, lock: Any) -> Recipe[None]:
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

    def _step_down(self, lock: Any, reason: str) -> Recipe[None]:
        """Called under ``_guard``: report the loss, then release the lock."""
        if self._lock is not lock:
            return
        term = self._term
        self._lock = None
        level = logging.WARNING if reason in (LossReason.IN_DANGER, LossReason.STOLEN) else logging.INFO
        logger.log(level, 'Leader election %r: candidate %s is no longer leader (term %s): %s', self.name,
                   self.candidate_id, term, reason)
        _call_safely(f'on_lost of leader election {self.name!r}', self._on_lost, term, reason)
        if self._ended_lock_held(lock):
            yield Release(lock, True, wait=False)

    @staticmethod
    def _ended_lock_held(lock: Any) -> bool:
        return lock.status in _HELD

    def _lock_trouble(self, code: str, lock: Any) -> None:
        """The lock's app_callback (LOCK_STOLEN, LOCK_IN_DANGER): wake the election to look."""
        self._handler.set(self._wake)

    def _notify_waiters(self) -> None:
        with self._waiters_guard:
            for waiter in self._waiters:
                self._handler.set(waiter)


class LeaderElection(ElectionLogic[DynamoDBLock]):
    """Campaign for leadership of ``name`` among every candidate that uses the same table.

    The leader is whoever holds the lock ``(name, sort_key)``. A background thread (one per
    election, started by :meth:`start` or by entering the ``with`` block) acquires it, waiting
    and taking over the lock of a leader that died exactly as ``acquire_lock`` does, watches
    it while it is held, and campaigns again after leadership is lost. Every wait of that
    thread is on the lock client's clock and ends at once when the election is resigned or
    closed. Nothing it meets stops it: a failed call or any other exception is logged and the
    campaign goes on after ``retry_period``.

    **Terms.** ``term`` is the lock's fencing token: every election of a leader gets a term
    larger than every earlier term of this election (across releases, takeovers and crashes;
    see the Safety and fencing page for the one caveat, a row deleted by TTL after a long
    time without any leader). Pass it to the resources the leader writes to, so that they can
    refuse a deposed leader's late writes; or write through ``election.lock``'s guarded writes.

    **Losing leadership is reported before anybody else can win.** Leadership ends when no
    renewal of the lock has been confirmed for the client's ``safe_period``, which must be
    shorter than its ``lease_duration``; this election refuses a client configured otherwise.
    The argument:

    1. Another candidate can only take the lock over after it has seen the lock row carry the
       same version for a whole ``lease_duration``, timed on its own monotonic clock from a
       read made *after* that version was written. Every renewal of ours writes a new version,
       and we time our side from *before* we sent it (``last confirmed``). So no one else can
       win before ``last confirmed + lease_duration`` on our clock (clock *rates* agree; no
       wall clocks are compared).
    2. ``is_leader`` is computed when it is read: it is True only while the lock is held and
       ``last confirmed + safe_period`` is still ahead. It turns False at that moment even if
       this process was paused, and even before the background thread has run; and it stays
       False for that term (a renewal that succeeds later does not revive it: the election
       steps down, and a new election gives a new term). The first read after a pause past
       the safe period is False.
    3. The background thread never sleeps past ``last confirmed + safe_period`` (it wakes then,
       every ``retry_period``, and on a ``LOCK_STOLEN`` / ``LOCK_IN_DANGER`` callback), re-checks,
       and steps down: it calls ``on_lost(term, reason)`` and only *then* releases the lock. The application
       thus has ``lease_duration - safe_period`` to stop acting as leader before another
       candidate can possibly be elected (on DynamoDB being unreachable, the release fails and
       the others wait out the lease; when DynamoDB works, the release lets them in at once,
       after ``on_lost`` returned).
    4. A resumed leader that finds its lock taken (``STOLEN``) was already not leader by (2).

    What it cannot cover: a process paused *while* it acts on a leadership it checked before
    the pause (use the term as a fencing token, or guarded writes, for that), an operator's
    ``force_release_lock``, and candidates whose clients set ``max_clock_skew`` larger than
    the real skew between hosts.

    After stepping down, the election campaigns again (a new term, if it wins again), except
    after :meth:`resign` or :meth:`close`.

    :param lock_client: the :class:`~python_dynamodb_lock.python_dynamodb_lock.DynamoDBLockClient`
        to hold the lock with. Its ``heartbeat_period``, ``safe_period`` and ``lease_duration``
        are the election's timings; ``safe_period`` must be shorter than ``lease_duration``.
    :param name: the election's name: the partition key of its lock.
    :param sort_key: the lock's sort key (default ``'-'``, as for ``acquire_lock``).
    :param candidate_id: stored in the lock row (attribute ``candidate_id``) while this
        candidate leads, so that others can see who leads (:meth:`current_leader`). Default:
        the client's ``owner_name``.
    :param on_elected: ``on_elected(term)``, called on the election's thread when this candidate
        has become leader.
    :param on_lost: ``on_lost(term, reason)``, called on the election's thread when leadership
        has ended, before the lock is released; ``reason`` is a :class:`LossReason` value.
        Keep it short: the lock is released (and another candidate elected) only after it
        returns, unless DynamoDB is unreachable, when the others may win once the lease runs out.
    :param retry_period: how often a candidate polls the lock while someone else leads, and
        pauses after an error (default: the client's ``heartbeat_period``). A new leader is
        elected within about ``lease_duration + 2 * retry_period`` of the last renewal of a
        leader that died, and within ``retry_period`` of a resignation.
    :param additional_attributes: more attributes for the lock row while this candidate leads.
    :raises TypeError, ValueError: for bad arguments, before anything is written.
    """

    _handler: 'Threads'
    _handler_class = Threads

    def current_leader(self) -> Optional[BaseDynamoDBLock]:
        """The election's lock row as it is in the table now (a consistent read): its
        ``owner_name``, ``fencing_token`` (the term) and ``additional_attributes['candidate_id']``;
        None when nobody leads. A leader that died still shows until its lock is taken over.

        :raises DynamoDBLockError: ``UNKNOWN`` when the read fails.
        """
        return self._handler.run(self._current_leader())

    def wait_for_leadership(self, timeout: Optional[Duration] = None) -> bool:
        """Wait until this candidate leads (and ``on_elected`` has returned).

        :param timeout: a ``datetime.timedelta`` or seconds, on the lock client's clock;
            None waits for as long as it takes.
        :returns: True when it leads; False when the timeout passed first, or the election
            was closed.
        """
        return self._handler.run(self._waiting_for_leadership(timeout))

    def start(self) -> 'LeaderElection':
        """Start (or, after :meth:`resign`, resume) campaigning; returns at once.

        :raises RuntimeError: after :meth:`close`.
        """
        self._starting()
        return self

    def resign(self) -> None:
        """Stop campaigning, and step down if leading: ``on_lost(term, RESIGNED)``, then the lock
        is released (best effort), so that another candidate is elected within its
        ``retry_period``. :meth:`start` campaigns again."""
        self._handler.run(self._resigning())

    def close(self) -> None:
        """Resign for good and stop the election's thread; safe to call twice, and from a
        callback. Returns once the thread has stopped (unless called on it); a call to
        DynamoDB in flight is not interrupted. The lock client is not closed."""
        self._handler.run(self._closing())

    def __enter__(self) -> 'LeaderElection':
        return self.start()

    def __exit__(self, exc_type: Optional[Type[BaseException]], exc_value: Optional[BaseException],
                 traceback: Optional[TracebackType]) -> None:
        self.close()


# --------------------------------------------------------------------------------------------
# Counting semaphore
# --------------------------------------------------------------------------------------------

def _slot_key(slot: int) -> str:
    return f'slot-{slot}'


class PermitBase:
    """What a permit of either client's semaphore is (see :class:`Permit`)."""

    def __init__(self, semaphore: Any, slot: int, lock: Any) -> None:
        self.semaphore = semaphore
        #: The slot's number, from 0 to ``limit - 1``.
        self.slot = slot
        #: The slot lock's sort key, ``'slot-<n>'``.
        self.sort_key = lock.sort_key
        #: The lock of the slot (guarded writes, ``status``, ``lease_remaining()``, ...).
        self.lock = lock

    @property
    def fencing_token(self) -> Optional[int]:
        """The slot lock's fencing token, larger than every earlier token *of this slot*
        (tokens of different slots are unrelated, so fence per slot)."""
        token: Optional[int] = self.lock.fencing_token
        return token

    @property
    def held(self) -> bool:
        """Whether the slot is still held (its lock ``LOCKED`` or ``IN_DANGER``)."""
        return self.lock.status in _HELD

    @property
    def took_over_from(self) -> Optional[BaseDynamoDBLock]:
        """The holder presumed dead whose slot this permit took over, if any."""
        holder: Optional[BaseDynamoDBLock] = self.lock.took_over_from
        return holder

    def __repr__(self) -> str:
        return (f'{type(self).__name__}({self.semaphore.name!r}, slot={self.slot}, '
                f'fencing_token={self.fencing_token}, status={self.lock.status})')


class Permit(PermitBase):
    """One of a :class:`Semaphore`'s N permits, held by this process: the lock of one slot.

    A context manager that releases it when the block ends (an exception in the block
    propagates). The slot is renewed in the background like any lock; ``lock`` gives its
    guarded writes, and ``fencing_token`` its token.
    """

    semaphore: 'Semaphore'
    lock: DynamoDBLock

    def release(self, best_effort: bool = True) -> None:
        """Give the permit back: see :meth:`Semaphore.release`."""
        self.semaphore.release(self, best_effort)

    def __enter__(self) -> 'Permit':
        return self

    def __exit__(self, exc_type: Optional[Type[BaseException]], exc_value: Optional[BaseException],
                 traceback: Optional[TracebackType]) -> None:
        self.release(best_effort=True)


class SemaphoreLogic:
    """The decisions of a counting semaphore, for both clients (see :class:`Semaphore`). Waits
    and calls go through ``self._handler``; ``_permit`` makes the client's kind of permit."""

    _permit: Callable[..., Any] = PermitBase
    _handler_class: Any = None

    def __init__(
        self,
        lock_client: Any,
        name: Any,
        limit: int,
        *,
        retry_period: Optional[datetime.timedelta] = None,
        additional_attributes: Optional[Mapping[str, Any]] = None,
    ) -> None:
        self.limit = _require_limit(limit)
        handler = self._handler_class.for_client(lock_client)
        client = handler.client
        # A table without a sort key refuses the slots' sort keys here ("... has no sort key").
        client.check_lock_arguments(name, _slot_key(limit - 1), additional_attributes)
        extra = dict(additional_attributes or {})
        if LIMIT_ATTRIBUTE in extra:
            raise ValueError(f'additional_attributes may not use {LIMIT_ATTRIBUTE!r}: the semaphore writes it')
        extra[LIMIT_ATTRIBUTE] = self.limit
        self._handler = handler
        self._clock = client.clock
        self.name = name
        self._retry_period = _retry_period(client, retry_period)
        self._attributes = extra
        self._guard = threading.Lock()
        self._waiters: Set[Any] = set()
        self._limits_seen: Set[Any] = set()
        self._entered: Dict[Any, List[Any]] = {}   # permits of ``with`` blocks, per thread or task

    @property
    def sort_keys(self) -> List[str]:
        """The slots' sort keys, ``['slot-0', ..., 'slot-<limit-1>']``."""
        return [_slot_key(slot) for slot in range(self.limit)]

    def __repr__(self) -> str:
        return f'{type(self).__name__}({self.name!r}, limit={self.limit})'

    # -- the decisions ------------------------------------------------------------------------

    def _acquiring(self, timeout: Optional[float], app_callback: Any) -> Recipe[Optional[Any]]:
        """A permit, or None once ``timeout`` seconds (None: no limit) have passed."""
        first = random.randrange(self.limit)
        order = [_slot_key((first + offset) % self.limit) for offset in range(self.limit)]
        deadline = None if timeout is None else self._clock.monotonic() + timeout
        wake = self._handler.event()      # set by a release through this object: look again at once
        with self._guard:
            self._waiters.add(wake)
        try:
            while True:
                chunk = _CHUNK if deadline is None else min(_CHUNK, max(0.0, deadline - self._clock.monotonic()))
                try:
                    lock = yield AcquireFirst(self.name, order, self._retry_period, chunk, self._attributes,
                                              app_callback, wake=wake)
                except DynamoDBLockError as error:
                    if not _ended(error):
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

    def _acquiring_or_raise(self, timeout: Optional[Duration], app_callback: Any) -> Recipe[Any]:
        seconds = _seconds('timeout', timeout, allow_none=True)
        permit = yield from self._acquiring(seconds, app_callback)
        if permit is None:
            raise DynamoDBLockError(DynamoDBLockError.ACQUIRE_TIMEOUT,
                                    f'No permit of semaphore {self.name!r} (limit {self.limit}) within {seconds}s')
        return permit

    def _releasing(self, permit: Any, best_effort: bool) -> Recipe[None]:
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

    def _enter(self, holder: Any, permit: Any) -> Any:
        with self._guard:
            self._entered.setdefault(holder, []).append(permit)
        return permit

    def _exit(self, holder: Any) -> Any:
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


class Semaphore(SemaphoreLogic):
    """At most ``limit`` holders of ``name`` at a time, across every process using the table.

    The semaphore is ``limit`` locks: ``(name, 'slot-0')`` to ``(name, 'slot-<limit-1>')``.
    A permit is one of them, acquired with the lock client's own machinery, so a permit is
    renewed in the background, reported ``LOCK_STOLEN`` / ``LOCK_IN_DANGER`` to its
    ``app_callback``, and the slot of a holder that crashed is taken over once its version has
    stayed unchanged for a lease. Exclusion per slot is the lock's exclusion; N slots make at
    most N holders.

    Why slots rather than one counter item: a counter cannot tell a crashed holder from a slow
    one, so its count leaks; slots are leases, renewed and reclaimed like locks, and each permit
    gets a fencing token and guarded writes. The price is that an acquisition looks at slots
    one by one: taking a free slot costs one conditional write per busy slot tried before it
    (the order starts at a random slot, to spread holders), and a waiter polls each slot with a
    consistent read every ``retry_period``. That suits small limits; ``limit`` may not exceed
    1000. There is no queue: waiters are not served in arrival order.

    **All holders must agree on the limit.** A semaphore with a smaller limit only looks at
    its own slots, so with mixed limits the bound is the largest limit in use, and holders with
    the smaller limit get fewer permits. Each permit's row records its semaphore's limit
    (attribute ``semaphore_limit``); an acquisition that finds every slot busy looks at the row in
    the way of the first slot it tried (a random one), and a semaphore that meets a row with another
    limit so logs a WARNING once per limit seen. Changing the limit therefore needs all holders to move to the
    new value; during a rolling change the larger limit applies.

    :param lock_client: the :class:`~python_dynamodb_lock.python_dynamodb_lock.DynamoDBLockClient`
        holding the permits.
    :param name: the partition key of the slots.
    :param limit: N, a positive int (at most 1000); checked before anything is written.
    :param retry_period: how often a waiting acquisition polls the slots (default: the client's
        ``heartbeat_period``). A permit released through this same object wakes the waiters
        of this object at once.
    :param additional_attributes: more attributes for the slot rows this semaphore writes.
    :raises TypeError, ValueError: for bad arguments, before anything is written; a table
        without a sort key cannot hold a semaphore.
    """

    _permit = Permit
    _handler: 'Threads'
    _handler_class = Threads

    def try_acquire(self, app_callback: Optional[AppCallback] = None) -> Optional[Permit]:
        """A permit if one is free right now (or held by a holder whose TTL has passed); never
        waits. None when every slot is held.

        :raises DynamoDBLockError: ``UNKNOWN`` when DynamoDB fails, ``CLIENT_SHUTDOWN`` after
            the client was closed.
        """
        permit: Optional[Permit] = self._handler.run(self._acquiring(0.0, app_callback))
        return permit

    def acquire(self, timeout: Optional[Duration] = None, app_callback: Optional[AppCallback] = None) -> Permit:
        """Wait for a permit.

        :param timeout: a ``datetime.timedelta`` or seconds, on the lock client's clock;
            None (the default) waits for as long as it takes, 0 tries once.
        :param app_callback: ``app_callback(code, lock)`` for the permit's lock, as for
            ``acquire_lock`` (``LOCK_STOLEN``, ``LOCK_IN_DANGER``).
        :raises DynamoDBLockError: ``ACQUIRE_TIMEOUT`` when no permit came within ``timeout``;
            ``UNKNOWN`` when DynamoDB fails; ``CLIENT_SHUTDOWN`` after the client was closed
            (a waiting acquisition notices within a ``retry_period``).
        """
        permit: Permit = self._handler.run(self._acquiring_or_raise(timeout, app_callback))
        return permit

    def release(self, permit: Permit, best_effort: bool = True) -> None:
        """Give a permit back: its slot's lock is released (see ``release_lock``:
        ``best_effort=False`` raises when the slot was lost), and waiters of this object poll at once."""
        self._handler.run(self._releasing(permit, best_effort))

    def holders(self) -> List[BaseDynamoDBLock]:
        """The slots held right now, as their rows (one consistent read per slot). A holder
        that died shows until its slot is taken over."""
        holders: List[BaseDynamoDBLock] = self._handler.run(self._listing())
        return holders

    def __enter__(self) -> Permit:
        return self._enter(threading.current_thread(), self.acquire())  # type: ignore[no-any-return]

    def __exit__(self, exc_type: Optional[Type[BaseException]], exc_value: Optional[BaseException],
                 traceback: Optional[TracebackType]) -> None:
        self._exit(threading.current_thread()).release(best_effort=True)
