"""Acquiring a lock: when to write, when to wait, when a holder is presumed dead, and how a
refused or unanswered write is judged.

The first attempt is one conditional put. A refused put returns the row in the way; the waiter
watches that row's ``record_version_number`` on its own monotonic clock and takes the lock over
with a put conditioned on that exact version once it has stayed the same for the lease stored
in the row (or once the row's TTL has passed). No two clients' clocks are compared.

What a client has seen is kept across its calls (:class:`Observations`): a version first seen by
an earlier ``try_acquire_lock`` or ``acquire_lock`` of the same client object is still being
watched by the next one, so that one try per invocation of a long-lived client takes a dead
holder over once its version has stayed the same for its lease.
"""
from __future__ import annotations

import collections
import contextlib
import dataclasses
from typing import Any, Callable, ContextManager, Optional, Tuple, Union

from .._model.schema import Item, Schema
from .effects import Emit, Protocol, Settle, Sleep
from .events import Event, Kind
from .shared import is_shared
from .session import SessionWatch, watch_session
from .shared_ops import WriterWait, join_step, writer_step
from .write import AcquireAttempt, Blocked, Written, is_abandoned, raise_if_closed, read_row, write_lock
from .state import TimeSource

__all__ = ['MAX_OBSERVED_KEYS', 'Observations', 'TimedOut', 'Watch', 'acquire']

# How many refused writes are judged at once, without a wait, before the next poll.
_IMMEDIATE_RETRIES = 3


@dataclasses.dataclass(frozen=True)
class TimedOut:
    """``retry_timeout`` was spent; ``blocking`` is the row last seen in the way."""

    blocking: Optional[Item]


#: How many keys a client remembers what it saw at (see :class:`Observations`).
MAX_OBSERVED_KEYS = 1000


class Observations:
    """What one client has seen at each key, across its acquisitions: the version of the row in
    the way, and when (on the client's monotonic clock) that version was first seen.

    A version is a fresh UUID at every write of the row, so seeing the same one twice means the
    row was not written in between: the holder did not renew. Only the latest version of a key
    is kept; a different one starts the watch again. At most ``capacity`` keys are kept, the
    least recently seen forgotten first (forgetting only makes a later takeover wait longer).
    Safe to share between the threads of a client when given a ``guard`` (a lock the driver
    makes: the core takes no locks of its own).
    """

    def __init__(self, capacity: int = MAX_OBSERVED_KEYS, guard: Optional[ContextManager[Any]] = None) -> None:
        self._capacity = capacity
        self._seen: 'collections.OrderedDict[str, Tuple[Optional[str], float]]' = collections.OrderedDict()
        self._guard: ContextManager[Any] = guard if guard is not None else contextlib.nullcontext()

    def first_seen(self, key: str, version: Optional[str], now: float) -> float:
        """Note that the row at ``key`` carries ``version`` at ``now``: when that version was
        first seen there, unchanged since (``now`` when it is new)."""
        with self._guard:
            seen = self._seen.get(key)
            if seen is None or seen[0] != version:
                seen = (version, now)
                self._seen[key] = seen
            self._seen.move_to_end(key)
            while len(self._seen) > self._capacity:
                self._seen.popitem(last=False)
            return seen[1]

    def forget(self, key: str) -> None:
        """This client acquired or released ``key``: what it saw there is over."""
        with self._guard:
            self._seen.pop(key, None)

    def __len__(self) -> int:
        with self._guard:
            return len(self._seen)


def acquire(attempt: AcquireAttempt, clock: TimeSource, is_closed: Callable[[], bool],
            observations: Optional[Observations] = None) -> Protocol[Union[Written, TimedOut]]:
    """The acquire loop: the item written, or :class:`TimedOut`.

    The holder's version is watched from when ``observations`` (the client's memory, kept
    across calls; by default one for this call only) first saw it; the key is forgotten there
    once written.

    ``Sleep`` returns True when this client released the key meanwhile (the next step is then a
    write at once instead of a read), or the :class:`Written` row a release of this client wrote
    for this acquisition (the lock handed over: nothing more to do).

    :raises DynamoDBLockError: ``CLIENT_SHUTDOWN`` once ``is_closed()``; ``UNKNOWN`` when a
        write or read fails.
    """
    writer = WriterWait(attempt, observations)    # what this acquisition knows of shared holders in its way
    try:
        return (yield from _acquire_loop(attempt, clock, is_closed, writer, observations))
    except GeneratorExit:
        raise
    except BaseException:
        if writer.marked:     # interrupted or failed while waiting for shared holders: readers may join again
            yield Settle(writer.give_up(clock))
        raise


def _acquire_loop(attempt: AcquireAttempt, clock: TimeSource, is_closed: Callable[[], bool], writer: WriterWait,
                  observations: Optional[Observations]) -> Protocol[Union[Written, TimedOut]]:
    schema = attempt.schema
    seen = observations if observations is not None else Observations()
    key = attempt.unique_identifier
    started = clock.monotonic()
    deadline = started + attempt.retry_timeout
    watch = Watch(attempt, seen)
    immediate_retries = 0
    while True:
        raise_if_closed(is_closed)
        outcome: Union[Written, Blocked, None] = None
        blocking = watch.blocking
        if attempt.shared:
            outcome = yield from join_step(attempt, clock, blocking, writer.watch)
        elif blocking is not None and writer.in_the_way(blocking):
            outcome = yield from writer_step(attempt, clock, blocking, writer)
        elif (yield from watch.may_write(clock)):
            outcome = yield from write_lock(attempt, clock, blocking, watch.session)
        if isinstance(outcome, Written):
            seen.forget(key)
            return dataclasses.replace(outcome, waited=clock.monotonic() - started)
        if isinstance(outcome, Blocked) and immediate_retries < _IMMEDIATE_RETRIES:
            # A write was refused: judge the row now in the way (None: it is free) at once.
            watch.see(outcome.raw)
            immediate_retries += 1
            continue
        remaining = deadline - clock.monotonic()
        blocking = watch.blocking
        if remaining <= 0:
            yield from writer.give_up(clock)
            yield Emit(Event(Kind.ACQUIRE_TIMED_OUT, attempt.unique_identifier, fields={
                'owner': Schema.owner_of(blocking), 'duration': clock.monotonic() - started}))
            return TimedOut(None if Schema.is_released(blocking) else blocking)
        wait = min(attempt.retry_period, remaining)
        yield Emit(Event(Kind.WAITING, attempt.unique_identifier,
                         fields={'owner': Schema.owner_of(blocking), 'retry_in': wait}))
        released_here = yield Sleep(wait)
        if isinstance(released_here, Written):   # a release in this client handed the lock over to us
            seen.forget(key)
            return dataclasses.replace(released_here, waited=clock.monotonic() - started)
        immediate_retries = 0
        raise_if_closed(is_closed)
        if released_here:
            watch.see(None)     # this client just released the key: go straight to the write
        else:
            watch.see((yield from read_row(schema, attempt.partition_key, attempt.sort_key, 'read')))


class Watch:
    """What a waiter knows of one key: the row in the way (``blocking``; None: believed free),
    and since when that row's version has stayed the same, on this process's monotonic clock.

    Written once for every acquisition: ``acquire`` keeps one, ``acquire_all`` one per key.
    """

    __slots__ = ('attempt', 'blocking', 'session', '_seen', '_warned_unfenced', '_sessions')

    def __init__(self, attempt: AcquireAttempt, observations: Optional[Observations] = None,
                 sessions: bool = True) -> None:
        self.attempt = attempt
        self.blocking: Optional[Item] = None
        # The session of the row in the way, when its lock is taken because that session died
        # (the write then also ends the session: see write_lock); None otherwise.
        self.session: Optional[SessionWatch] = None
        # Whether this acquisition may watch the session a row names (``attempt.sessions``; not
        # for a multi-key transaction, which has no room for the session's update).
        self._sessions = sessions and attempt.sessions
        # The client's memory of what it saw at this key, across its calls (try_acquire_lock
        # once a minute still sees a dead holder's version stay the same); a private one if none.
        self._seen = observations if observations is not None else Observations()
        self._warned_unfenced = False

    def see(self, row: Optional[Item]) -> None:
        """The row now in the way, as an answer or a read gave it (a released row is free, except
        to a shared acquisition, which reads a writer's marker even there)."""
        self.blocking = row if self.attempt.shared else Blocked(row, self.attempt.lock_existing_item).row

    def may_write(self, clock: TimeSource) -> Protocol[bool]:
        """Whether the key may be written now: it is believed free, or the holder in the way
        is presumed dead (its version unchanged for its lease: ``TAKING_OVER`` is emitted, and
        the write goes over ``blocking``)."""
        attempt, blocking = self.attempt, self.blocking
        self.session = None
        if blocking is None:
            return True
        version = Schema.version_of(blocking)
        now = clock.monotonic()
        since = self._seen.first_seen(attempt.unique_identifier, version, now)
        if not self._warned_unfenced and (version is None or _unfenced(blocking)):
            self._warned_unfenced = True
            # No version: an item of the application, which a plain lock never replaces.
            yield Emit(Event(Kind.UNFENCED_HOLDER if version is not None else Kind.NOT_A_LOCK,
                             attempt.unique_identifier, fields={'owner': Schema.owner_of(blocking)}))
        if version is None:
            return False
        unchanged_for = now - since
        # A released row in the way (only a lock on an item finds one there) is taken over at once.
        if Schema.is_released(blocking) or is_abandoned(
                attempt.schema, blocking, unchanged_for, clock.time(), attempt.default_lease,
                attempt.max_clock_skew, not attempt.lock_existing_item):
            yield Emit(Event(Kind.TAKING_OVER, attempt.unique_identifier, fields={
                'owner': Schema.owner_of(blocking), 'version': version, 'unchanged_for': unchanged_for,
                'duration': unchanged_for}))
            return True
        session_id = Schema.session_of(blocking)
        if not self._sessions or session_id is None:
            return False
        # A lock held under a client session: the session's row is watched instead of the
        # lock's (whose long lease keeps session-unaware clients away).
        session = yield from watch_session(attempt.schema, str(session_id), self._seen, clock, attempt.default_lease)
        if not (session.over or session.expired_version is not None):
            return False
        yield Emit(Event(Kind.TAKING_OVER, attempt.unique_identifier, fields={
            'owner': Schema.owner_of(blocking), 'version': version, 'unchanged_for': unchanged_for,
            'duration': unchanged_for, 'session': session.session_id}))
        self.session = session
        return True


def _unfenced(row: Item) -> bool:
    """Whether ``row`` was written by a client that writes no fencing token (a published 0.9.x
    client). A shared row of this package has no token until the key is first held exclusively
    (its token is the last exclusive holder's: docs/shared_locks.rst): it is not one."""
    return Schema.fencing_token_of(row) is None and not is_shared(row)
