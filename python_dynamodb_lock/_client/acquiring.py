"""Acquiring: one key (``acquire_lock``, ``try_acquire_lock``) and the first free of several
keys (``acquire_first_lock``), from a checked :class:`~.call.AcquireCall` to the lock object
handed to the caller. The waiting and writing are the core's (:mod:`.._core.acquire`,
:mod:`.._core.first`); here: the queue of this client's waiters, adopting the row written,
and giving up what an interrupted or refused acquisition wrote.
"""
from __future__ import annotations

import dataclasses
from operator import itemgetter
import datetime
from typing import Any, Callable, Generic, List, Mapping, Optional, Sequence, Tuple, TypeVar

from .._core.acquire import TimedOut, acquire
from .._core.effects import Drop, Hold, Protocol, Settle
from .._core.events import Kind
from .._core.first import NoneFree, acquire_first
from .._core.messages import describe_key
from .._core.release import free_handed
from .._core.shared import describe_holders
from .._core.state import Status, lock_safe_period
from .._core.write import AcquireAttempt, Written
from .._model.errors import DynamoDBLockError
from .._common.locks import holder_of, mark_acquired, state_of
from .._common.registry import WaiterState
from .._model.schema import PartitionKey, Schema
from .call import AcquireCall, acquire_call
from .context import ClientState, Held, L
from .releasing import Releasing
from .sessions import Sessions
from .shared import slot

__all__ = ['Acquiring', 'MAX_FIRST_KEYS']


W = TypeVar('W', bound=WaiterState)
#: The most keys one ``acquire_first_lock`` may try.
MAX_FIRST_KEYS = 1000


class Acquiring(Generic[L]):
    """Acquisitions of one client (see the module docstring)."""

    def __init__(self, state: ClientState[L], sessions: Sessions, releasing: Releasing) -> None:
        self._state = state
        self._sessions = sessions
        self._releasing = releasing

    # -- one key -------------------------------------------------------------------------

    def queue(self, call: AcquireCall, holder: object,
              make_waiter: Callable[[AcquireAttempt], W]) -> Tuple[Optional[L], Optional[W]]:
        """The first step of an acquisition: the lock this very holder already holds (reentrant),
        or a new waiter, queued for the key in this client."""
        attempt = call.attempt(self._state)
        if call.reentrant:
            held = self._reenter(attempt.unique_identifier, holder)
            if held is not None:
                if held.lock_existing_item != attempt.lock_existing_item:
                    held._holds -= 1
                    raise ValueError(f'{attempt.unique_identifier} is held by this thread or task with '
                                     f'lock_existing_item={not attempt.lock_existing_item}: a reentrant acquisition '
                                     'must ask for the same kind of lock')
                return held, None
        waiter = make_waiter(attempt)
        self._state.registry.add_waiter(attempt.unique_identifier, waiter)
        return None, waiter

    def _reenter(self, unique_identifier: str, holder: object) -> Optional[L]:
        """A reentrant acquisition: the lock this very thread (or task) already holds for the
        key, with one more hold on it; None when it holds none."""
        lock = self._state.registry.get(unique_identifier)
        if lock is None or holder_of(lock) is not holder or not state_of(lock).held:
            return None
        lock._holds += 1
        return lock

    def acquisition(self, waiter: WaiterState, holder: object, call: AcquireCall) -> Protocol[Optional[L]]:
        """An acquisition from its first write to the lock handed to the caller, for both
        clients: wait (``waiter`` is this acquisition's place in the client's queue for the
        key), adopt the row written, settle the older lock object it replaced, and refuse the
        lock if the client was closed meanwhile.

        Interrupted anywhere (cancelled, Ctrl-C, ``cancel``), or refused at the end, the caller
        is not handed the lock, so nobody may keep or renew it: a row written for it (or handed
        to it by a release) is freed apart from the caller (``Settle``), where a second
        interruption cannot stop it.
        """
        state = self._state
        attempt = waiter.attempt
        unique_identifier = attempt.unique_identifier
        try:
            if state.session is not None:
                attempt = waiter.attempt = (yield from self._sessions.starting([attempt]))[0]
            outcome = yield from acquire(attempt, state.clock, state.shutdown.is_set, state.observations)
        except BaseException:
            handed = state.registry.leave(unique_identifier, waiter)
            if handed is not None:
                yield Settle(free_handed(state.release_settings, (attempt.partition_key, attempt.sort_key), handed,
                                         state.clock, unique_identifier=unique_identifier))
            raise
        handed = state.registry.leave(unique_identifier, waiter)
        if handed is not None and not isinstance(outcome, Written):
            outcome = handed     # a lock handed over to it meanwhile is its result instead of a timeout
        if isinstance(outcome, TimedOut):
            if call.timeout_is_error:
                raise self._timeout_error(attempt, outcome)
            return None
        adopted = self.adopt(outcome, call.app_callback, call.raise_context_exception, holder, attempt)
        return (yield from self.installing_all((adopted,)))[0]

    def _timeout_error(self, attempt: AcquireAttempt, timed_out: TimedOut) -> DynamoDBLockError:
        state = self._state
        owner = Schema.owner_of(timed_out.blocking)
        own = state.registry.get(attempt.unique_identifier)
        shared_holders = None if attempt.shared else describe_holders(timed_out.blocking, state.owner_name)
        if shared_holders is not None:
            owner = shared_holders
        elif own is not None and state_of(own).held and owner == state.owner_name:
            owner = ('this client (pass reentrant=True where the thread or task that holds it takes it again, '
                     f'or release it first; owner_name {owner})')
        elif timed_out.blocking is not None and Schema.version_of(timed_out.blocking) is None:
            owner += (' (the item at this key carries no lock attributes: it is an item of the application; '
                      'pass lock_existing_item=True to lock it without replacing it)')
        return DynamoDBLockError(
            DynamoDBLockError.ACQUIRE_TIMEOUT,
            f'Could not acquire {describe_key(state.schema, attempt.partition_key, attempt.sort_key)} within '
            f'{attempt.retry_timeout}s: held by {owner}',
            holder=state.describe_row(timed_out.blocking),
        )

    # -- adopting the row written ----------------------------------------------------------

    def adopt(self, written: Written, app_callback: Optional[Callable[..., Any]], raise_context_exception: bool,
              holder: object,
              attempt: AcquireAttempt) -> Tuple[L, Optional[L]]:
        """Make the lock object for a row we wrote and register it.

        :returns: the lock, and the older lock object of this client on the same key that it
            replaced, if any: :meth:`installing` settles that one while holding its mutex, so
            that a release of it still under way finishes first.
        """
        state = self._state
        settings = state.settings
        fields = state.schema.lock_fields(written.item, settings.lease_duration)
        token = fields.pop('fencing_token')
        lock = state.new_lock(**fields, app_callback=app_callback, raise_context_exception=raise_context_exception)
        lock_state = state_of(lock)
        lock_state.acquired(written.attempt_started, token, Schema.acquisition_of(written.item))
        session, named = state.session, Schema.session_of(written.item)
        if session is not None and named is not None:   # a session lost meanwhile: in danger at once
            confirmed = session.confirmed_at if named == session.id and session.confirmed_at is not None else -1e18
            lock_state.bind_session(named, settings.lease_duration, confirmed)
        lock_state.safe_period = lock_safe_period(settings.safe_period, settings.lease_duration,
                                                  lock_state.lease_duration)
        mark_acquired(lock, holder, written.shared, attempt.keep_released_rows,
                      attempt.lock_existing_item, written.own_row,
                      None if written.replaced is None else state.describe_row(written.replaced), state.describe_row)
        if written.shared:
            state.join_guesses.remember(lock.unique_identifier, written.beside_others)
        previous = state.registry.register(lock, slot(lock))
        state.emit(Kind.ACQUIRED, lock, version=lock_state.version, duration=written.waited,
                   fencing_token=token, takeover=written.replaced is not None)
        return lock, previous

    def _settle_replaced(self, previous: Held) -> None:
        """An older lock object of this client on the same key, whose row our put just replaced."""
        final = state_of(previous).replaced_by_new_acquisition()
        if final == Status.RELEASED:
            self._state.emit(Kind.REPLACED_RELEASED, previous)
        elif final == Status.INVALID:
            self._state.emit(Kind.REPLACED_LOST, previous)

    def installing(self, lock: L, previous: Optional[L]) -> Protocol[L]:
        """The last step of an acquisition, after :meth:`adopt`: settle the older lock object
        it replaced, and refuse the lock if the client was closed meanwhile."""
        installed = yield from self.installing_all([(lock, previous)])
        return installed[0]

    def installing_all(self, adopted: Sequence[Tuple[L, Optional[L]]]) -> Protocol[List[L]]:
        """:meth:`installing` for the locks of one acquisition (several for ``acquire_locks``):
        interrupted or refused, every one of them is given up."""
        settled = 0       # how many of the older lock objects are settled
        try:
            for _, previous in adopted:
                if previous is not None:
                    yield Hold(previous)      # a release or heartbeat of it under way finishes first
                    self._settle_replaced(previous)
                    settled += 1
                    yield Drop(previous)
                else:
                    settled += 1
            if self._state.shutdown.is_set():
                raise DynamoDBLockError(DynamoDBLockError.CLIENT_SHUTDOWN, 'The lock client has been closed')
        except BaseException:
            yield Settle(self._give_up_all([(lock, previous if index >= settled else None)
                                            for index, (lock, previous) in enumerate(adopted)]))
            raise
        return list(map(itemgetter(0), adopted))

    def _give_up_all(self, adopted: Sequence[Tuple[Held, Optional[Held]]]) -> Protocol[None]:
        """An acquisition whose caller is not handed its locks: settle the older lock objects
        they replaced (if not done yet), and release the locks, best effort."""
        for lock, previous in adopted:
            if previous is not None:
                yield Hold(previous)
                self._settle_replaced(previous)
                yield Drop(previous)
            yield from self._releasing.releasing(lock, True)

    # -- the first free of several keys (``acquire_first_lock``) ---------------------------

    def first_attempts(self, partition_key: PartitionKey, sort_keys: Sequence[str],
                       retry_period: Optional[datetime.timedelta], retry_timeout: Optional[datetime.timedelta],
                       additional_attributes: Optional[Mapping[str, Any]],
                       app_callback: Optional[Callable[..., Any]]) -> List[AcquireAttempt]:
        """Check the arguments of ``acquire_first_lock`` (before anything is written): one
        acquisition per sort key."""
        state = self._state
        state.check_process()
        if isinstance(sort_keys, (str, bytes)) or not isinstance(sort_keys, (list, tuple)):
            raise TypeError(f'sort_keys must be a list or tuple of str, not {type(sort_keys).__name__}')
        if not 1 <= len(sort_keys) <= MAX_FIRST_KEYS:
            raise ValueError(f'sort_keys must hold from 1 to {MAX_FIRST_KEYS} keys, got {len(sort_keys)}')
        if len(set(sort_keys)) != len(sort_keys):
            raise ValueError('sort_keys may not repeat a key')
        attempts = []
        for sort_key in sort_keys:
            call = acquire_call(state, partition_key, sort_key, retry_period, retry_timeout,
                                additional_attributes, app_callback, True)
            # No writer-waiting marker: the keys it does not take would keep theirs (shared_locks.rst).
            attempts.append(dataclasses.replace(call.attempt(state), writer_marker=False))
        return attempts

    def first(self, attempts: Sequence[AcquireAttempt], holder: object, app_callback: Optional[Callable[..., Any]],
              raise_context_exception: bool) -> Protocol[L]:
        """``acquire_first_lock``: the lock of the first key written, adopted and installed as
        ``acquire_lock``'s is (interrupted, what was written is settled the same way)."""
        state = self._state
        attempts = yield from self._sessions.starting(attempts)
        outcome = yield from acquire_first(attempts, state.clock, state.shutdown.is_set, state.observations)
        if isinstance(outcome, NoneFree):
            first = attempts[0]
            keys = ', '.join(repr(attempt.sort_key) for attempt in attempts)
            owners = sorted({str(Schema.owner_of(each.blocking)) for each in outcome.timed_out})
            raise DynamoDBLockError(
                DynamoDBLockError.ACQUIRE_TIMEOUT,
                f'Could not acquire any of the sort keys {keys} of '
                f'{describe_key(state.schema, first.partition_key, first.sort_key)} within {first.retry_timeout}s: '
                f'held by {", ".join(owners)}',
                holder=state.describe_row(outcome.timed_out[0].blocking),
            )
        lock, previous = self.adopt(outcome.written, app_callback, raise_context_exception, holder,
                                    attempts[outcome.index])
        return (yield from self.installing(lock, previous))
