"""What the threaded and the asyncio clients share that does no I/O.

:class:`ClientCore` holds a client's settings, registry and observer, steps protocols (handling
the effects that need no I/O: events and registry updates) and applies the core's verdicts to
lock objects. A driver adds only what waits: sending requests, sleeping, running background
rounds, and serialising the operations on one lock.
"""
from __future__ import annotations

import concurrent.futures
import dataclasses
import functools
import os
import threading
import urllib.parse
from decimal import Decimal
from typing import Any, Callable, Dict, Generic, List, Mapping, Optional, Sequence, Set, Tuple, TypeVar

from boto3.dynamodb.types import Binary

from ._clock import SystemClock
from ._config import (AcquireArguments, Settings, acquire_arguments, check_additional_attributes,
                      check_attribute_update, check_key, check_release_attributes, make_settings)
from ._core.acquire import Observations, TimedOut, acquire
from ._core.write import AcquireAttempt, Written
from ._core.first import NoneFree, acquire_first
from ._core.effects import Drop, Emit, Hold, Protocol, Settle, Unregister
from ._core.stepper import Done
from ._core.events import Event, Kind
from ._core.heartbeat import (Batching, HeartbeatSettings, check_round, extend, heartbeat_round, renew_batch,
                              renew_one, update_attributes)
from ._core.messages import describe_key
from ._core.guard import MAX_TRANSACTION_BYTES, check_actions, guarded_write, size_of
from ._core.item_size import check_release_size, check_update_size, handover_fits
from ._core.answers import Applied
from ._core.multi import MAX_KEYS, NotAll, acquire_all, free_all, set_name
from ._core.scan import force_release, next_page
from ._core.release import (ReleaseSettings, ReleaseVerdict, free_handed, precheck_release, release, release_again,
                            release_verdict)
from ._core.session import (Session, SessionSettings, due_for_refresh, end_session, ensure_session, extend_session,
                            session_round)
from ._core.shared import describe_holders, holders_of
from ._core.state import Status, lock_safe_period
from ._errors import DynamoDBLockError, Reason, cancelled_error
from ._observe import Observer, logger
from ._registry import Registry, WaiterState
from ._requests import Request, query, scan
from ._schema import (COL_LEASE_DURATION, COL_LOCK_SESSION, NO_SORT_KEY, Item, PartitionKey, Schema, TableLayout,
                      binary_bytes)
from ._validation import require_bool

__all__ = ['ClientCore', 'Done', 'Steps', 'cancelled_error', 'is_cancellation', 'unique_identifier_of']

T = TypeVar('T')
L = TypeVar('L')

#: Workers of the callback executor a client makes when it is given none (published: 5).
APP_CALLBACK_THREADPOOL_SIZE = 5


class Steps:
    """What a driver keeps while it runs one protocol.

    ``wake`` cuts the protocol's sleeps short; ``cancel`` (the threaded client's
    ``acquire_lock(cancel=...)``) ends it; ``thrown`` is the last exception thrown into it;
    ``inflight`` the call an interruption left on the wire (a future or task whose answer will
    still arrive), handed to the protocol that settles it; ``pending`` is that call, for a
    settling protocol; ``settle_by`` when an interrupted caller stops waiting for its undo.
    """

    __slots__ = ('wake', 'cancel', 'thrown', 'inflight', 'pending', 'kick', 'settle_by')

    def __init__(self, wake: Any, cancel: Any = None, pending: Any = None) -> None:
        self.wake = wake
        self.cancel = cancel
        self.thrown: Optional[BaseException] = None
        self.inflight: Any = None
        self.pending = pending
        self.kick: Any = None
        self.settle_by: Optional[float] = None

    @property
    def interrupted(self) -> bool:
        """Whether the caller is being interrupted (Ctrl-C, cancellation), so that settling
        work must not keep it waiting."""
        thrown = self.thrown
        return thrown is not None and (not isinstance(thrown, Exception) or is_cancellation(thrown))

    def settle_timeout(self, now: float, grace: float) -> Optional[float]:
        """How long the caller waits for undo work it hands off (``Settle``): until it is done
        (None), unless the caller is being interrupted; then for what is left of ``grace``
        seconds from its first undo, all of its undo work together, the rest going on in the
        background."""
        if not self.interrupted:
            return None
        if self.settle_by is None:
            self.settle_by = now + grace
        return max(0.0, self.settle_by - now)


def is_cancellation(error: BaseException) -> bool:
    return isinstance(error, DynamoDBLockError) and error.code == DynamoDBLockError.ACQUIRE_CANCELLED


class ClientCore(Generic[L]):
    """Shared state and glue of a lock client. Subclasses are the drivers."""

    _settings: Settings
    _schema: Schema
    _registry: 'Registry[L]'
    _observer: Observer
    _batching: Batching
    _heartbeat_settings: HeartbeatSettings
    _clock: Any
    _pid: int
    _shutdown: Any   # a threading.Event or an asyncio.Event: set by close()
    _closed: bool
    _owner_name: str
    _owns_app_callback_executor: bool
    _app_callback_executor: Any

    def _configure(self, low_level_client: Any, clock: Any, app_callback_executor: Any, metrics: Any,
                   background_heartbeats: Any, **setting_arguments: Any) -> Settings:
        """Check every constructor argument (before anything starts), set the client up, and log
        the warnings risky settings deserve."""
        settings = make_settings(low_level_client=low_level_client, **setting_arguments)
        if app_callback_executor is not None and not callable(getattr(app_callback_executor, 'submit', None)):
            raise TypeError('app_callback_executor must be a concurrent.futures.Executor (or None)')
        if metrics is not None and not callable(metrics):
            raise TypeError(f'metrics must be a callable (it gets a LockEvent), not {type(metrics).__name__}')
        if not isinstance(background_heartbeats, bool):
            raise TypeError(f'background_heartbeats must be a bool, not {type(background_heartbeats).__name__}')
        if settings.session and not background_heartbeats:
            raise ValueError('session=True needs background_heartbeats=True: the session is renewed in the background')
        self._init_core(settings, clock if clock is not None else SystemClock(),
                        Observer(self._dispatch_callback, metrics, clock, settings.keep_released_rows))
        for warning in settings.warnings:
            logger.warning('%s', warning)
        self._owns_app_callback_executor = app_callback_executor is None
        self._app_callback_executor = app_callback_executor or concurrent.futures.ThreadPoolExecutor(
            max_workers=APP_CALLBACK_THREADPOOL_SIZE, thread_name_prefix=f'{type(self).__name__}-callback')
        self._owner_name = settings.owner_name
        self._table_name = settings.schema.table_name
        self._safe_period_s = settings.safe_period
        return settings

    def _dispatch_callback(self, callback: Callable[..., Any], lock: Any, code: str) -> None:
        raise NotImplementedError   # each driver runs callbacks its own way

    def _log_started(self, kind: str, background_heartbeats: bool) -> None:
        settings = self._settings
        logger.info('Started %s %s on table %s (heartbeat %ss, safe %ss, lease %ss%s)', kind, self._owner_name,
                    self._table_name, settings.heartbeat_period, settings.safe_period, settings.lease_duration,
                    '' if background_heartbeats else ', heartbeats sent by the application')

    def _init_core(self, settings: Settings, clock: Any, observer: Observer) -> None:
        self._settings = settings
        self._schema = settings.schema
        self._clock = clock
        self._observer = observer
        self._registry = Registry()
        self._batching = Batching(settings.heartbeat_batch_size)
        self._release_settings = ReleaseSettings(settings.schema, settings.expiry_period, settings.keep_released_rows)
        self._heartbeat_settings = HeartbeatSettings(
            settings.schema, settings.heartbeat_period, settings.safe_period, settings.expiry_period,
            settings.heartbeat_tps, settings.heartbeat_batch_size)
        self._pid = os.getpid()
        self._heartbeats_in_flight: Set[Any] = set()
        self._in_flight_guard = threading.Lock()
        # Undo and follow-up work of interrupted calls (threads or tasks), until it is done.
        self._settling: Set[Any] = set()
        # The holders' versions seen by this client's acquisitions, kept across calls.
        self._observations = Observations(guard=threading.Lock())   # the threads of a client share it
        # Keys whose last shared acquisition here joined other holders: the next one guesses the
        # same with its first write (one write instead of two on a key that stays shared).
        self._joined_beside: Dict[str, bool] = {}
        self._session = Session(settings.owner_name, threading.Lock()) if settings.session else None
        self._session_settings = SessionSettings(settings.schema, settings.owner_name, settings.lease_duration,
                                                 settings.expiry_period, settings.expiry_period)

    # -- read-only views (public on both clients) ---------------------------------------

    @property
    def owner_name(self) -> str:
        """The ``owner_name`` this client writes into the rows of its locks (the constructor's,
        or the host name and a random suffix it chose)."""
        return self._owner_name

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` has been called."""
        return self._closed

    @property
    def table_layout(self) -> TableLayout:
        """The table's name, key names and types, and TTL attribute, as this client uses them
        (given to the constructor, or read from the table by ``for_table``)."""
        return self._schema.layout

    @property
    def heartbeats_in_flight(self) -> int:
        """How many held locks have a renewal on the wire right now (0: the client is quiet)."""
        with self._in_flight_guard:
            return len(self._heartbeats_in_flight)

    # -- stepping protocols ------------------------------------------------------------

    def _advance(self, protocol: Protocol[Any], value: Any, thrown: Optional[BaseException] = None) -> Any:
        """Send ``value`` (or throw ``thrown``) into ``protocol`` and run it up to its next effect
        that needs I/O.

        Events and registry updates are handled here; the effect returned is a Call, Sleep or
        Submit for the driver, or :class:`Done` with the protocol's result.
        """
        while True:
            try:
                if thrown is not None:
                    effect, thrown = protocol.throw(thrown), None
                else:
                    effect = protocol.send(value)
            except StopIteration as finished:
                return Done(finished.value)
            except DynamoDBLockError as error:
                self._public_error(error)   # the holder described as a BaseDynamoDBLock
                raise
            if isinstance(effect, Emit):
                self._observer.emit(effect.event)
                value = None
            elif isinstance(effect, Unregister):
                self._unregister(effect.lock)
                value = None
            elif isinstance(effect, Drop):
                effect.lock._mutex.release()
                value = None
            else:
                return effect

    def _take_due(self, locks: Sequence[Any]) -> List[Any]:
        """The locks of a group whose previous heartbeat is no longer in flight, now marked in
        flight; the others are reported and skipped."""
        with self._in_flight_guard:
            due = [lock for lock in locks if lock not in self._heartbeats_in_flight]
            self._heartbeats_in_flight.update(due)
        for lock in locks:
            if lock not in due:
                self._emit(Kind.HEARTBEAT_IN_FLIGHT, lock)
        return due

    def _done_with(self, locks: Sequence[Any], failure: Optional[BaseException] = None) -> None:
        """Heartbeats of ``locks`` have ended (``failure``: with an unexpected exception)."""
        if failure is not None:
            self._emit(Kind.HEARTBEAT_TASK_FAILED, keys=', '.join(lock.unique_identifier for lock in locks),
                       exception=failure)
        with self._in_flight_guard:
            self._heartbeats_in_flight.difference_update(locks)

    def _emit(self, kind: Kind, lock: Any = None, key: str = '', **fields: Any) -> None:
        self._observer.emit(Event(kind, key or getattr(lock, 'unique_identifier', ''), lock, fields))

    # -- processes ---------------------------------------------------------------------

    def _check_process(self) -> None:
        """Refuse to work in a process forked from the one that made the client.

        A forked child has none of the client's background threads, and shares the parent's
        connection pool and held locks: it could neither keep a lock alive nor tell its locks
        from the parent's. The client must be created after forking.
        """
        if os.getpid() != self._pid:
            raise DynamoDBLockError(
                DynamoDBLockError.UNKNOWN,
                f'This lock client was created in process {self._pid} and cannot be used in process '
                f'{os.getpid()}, a fork of it: create the boto3 resource and the lock client after '
                'forking (for example in a gunicorn post_fork hook or a Celery worker_process_init signal)',
                reason=Reason.FORKED,
            )

    # -- acquiring ---------------------------------------------------------------------

    def _attempt(self, partition_key: PartitionKey, sort_key: str, arguments: AcquireArguments) -> AcquireAttempt:
        unique_identifier = unique_identifier_of(partition_key, sort_key)
        template = arguments.item_template
        if self._session is not None:   # a lock row under a session: names it, with the long row lease
            template = {**template, COL_LOCK_SESSION: self._session.id,
                        COL_LEASE_DURATION: Decimal(repr(self._session_settings.row_lease))}
        return AcquireAttempt(self._schema, partition_key, sort_key, unique_identifier, template,
                              arguments.retry_period, arguments.retry_timeout, self._settings.expiry_period,
                              self._settings.lease_duration, arguments.keep_row, self._settings.max_clock_skew,
                              arguments.shared, join_beside=self._joined_beside.get(unique_identifier, False),
                              lock_existing_item=arguments.lock_existing_item,
                              only_if_exists=arguments.only_if_exists, sessions=self._session is not None)

    def _acquire_arguments(self, partition_key: Any, sort_key: Any, retry_period: Any, retry_timeout: Any,
                           additional_attributes: Any, app_callback: Any, reentrant: Any,
                           options: Mapping[str, Any]) -> AcquireArguments:
        """Every argument of ``acquire_lock`` / ``try_acquire_lock`` checked, before anything is
        written; ``options``: ``shared``, ``lease_duration``, ``lock_existing_item``,
        ``only_if_exists``, ``keep_row``."""
        self._check_process()
        shared = options.get('shared', False)
        arguments = acquire_arguments(self._settings, partition_key, sort_key, retry_period, retry_timeout,
                                      additional_attributes, app_callback,
                                      **{name: value for name, value in options.items() if name != 'shared'})
        require_bool('reentrant', reentrant)
        return self._shared_arguments(arguments, shared)

    def _shared_arguments(self, arguments: AcquireArguments, shared: Any) -> AcquireArguments:
        """``arguments`` of an acquisition with ``shared=`` checked (before anything is written)."""
        if not require_bool('shared', shared):
            return arguments
        if self._schema.extra_names(arguments.item_template):
            raise ValueError('a shared lock takes no additional_attributes (the row belongs to all its holders)')
        if arguments.lock_existing_item:
            raise ValueError('a shared lock cannot be on an existing item (lock_existing_item=True)')
        if self._session is not None:
            raise ValueError('a shared lock is not held under a client session (session=True): use a client '
                             'without one for shared locks')
        return dataclasses.replace(arguments, shared=True)

    def _woken(self, wake: Any, woken: bool) -> Any:
        """What a ``Sleep`` on ``wake`` answers: False when its time ran out; for a waiter woken
        early, the row a release handed over to it or True (see ``WaiterState.take_wake``). The
        ``wake`` event of ``acquire_first_lock`` is used up (cleared), so the next wait is real."""
        if not woken:
            return False
        if isinstance(wake, WaiterState):
            return wake.take_wake()
        if wake is not self._shutdown:
            wake.clear()
        return True

    def _reenter(self, unique_identifier: str, holder: Any) -> Optional[L]:
        """A reentrant acquisition: the lock this very thread (or task) already holds for the
        key, with one more hold on it; None when it holds none."""
        lock = self._registry.get(unique_identifier)
        if lock is None or getattr(lock, '_holder', None) is not holder or not lock._state.held:  # type: ignore[attr-defined]
            return None
        lock._holds += 1  # type: ignore[attr-defined]
        return lock

    def _release_nested(self, lock: Any, best_effort: bool) -> Optional[bool]:
        """Release one hold of a lock acquired more than once (reentrantly): when holds remain,
        nothing is written and the answer is whether the lock is still held (None: this is the
        last hold, to be released for real); a strict release of a lost lock still raises."""
        if lock._holds <= 1:
            return None
        lock._holds -= 1
        if not best_effort and lock._state.status == Status.INVALID:
            verdict = precheck_release(lock._state, self._owns(lock), best_effort, lock.unique_identifier,
                                       self._settings.owner_name)
            if verdict is not None and verdict.error is not None:
                raise self._public_error(verdict.error)
        held: bool = lock._state.held
        return held

    def _adopt(self, written: Written, app_callback: Any, raise_context_exception: bool,
               make_lock: Callable[..., L], holder: Any, attempt: AcquireAttempt) -> Tuple[L, Optional[L]]:
        """Make the lock object for a row we wrote and register it.

        :returns: the lock, and the older lock object of this client on the same key that it
            replaced, if any: the driver settles that one with :meth:`_settle_replaced` while
            holding its mutex, so that a release of it still under way finishes first.
        """
        fields = self._schema.lock_fields(written.item, self._settings.lease_duration)
        token = fields.pop('fencing_token')
        lock = make_lock(**fields, app_callback=app_callback, raise_context_exception=raise_context_exception)
        state = lock._state  # type: ignore[attr-defined]
        state.acquired(written.attempt_started, token, Schema.acquisition_of(written.item))
        session, named = self._session, Schema.session_of(written.item)
        if session is not None and named is not None:   # a session lost meanwhile: in danger at once
            confirmed = session.confirmed_at if named == session.id and session.confirmed_at is not None else -1e18
            state.bind_session(named, self._settings.lease_duration, confirmed)
        state.safe_period = lock_safe_period(self._settings.safe_period, self._settings.lease_duration,
                                             state.lease_duration)
        lock.took_over_from = self._describe_row(written.replaced)  # type: ignore[attr-defined]
        lock._holder = holder  # type: ignore[attr-defined]
        lock.shared = written.shared  # type: ignore[attr-defined]
        lock._keep_row = attempt.keep_released_rows  # type: ignore[attr-defined]
        lock._existing_item = attempt.lock_existing_item  # type: ignore[attr-defined]
        lock._own_row = written.own_row  # type: ignore[attr-defined]
        if written.shared:
            if len(self._joined_beside) >= _MAX_JOIN_GUESSES:
                self._joined_beside.clear()
            self._joined_beside[lock.unique_identifier] = written.beside_others  # type: ignore[attr-defined]
        previous = self._registry.register(lock, _slot(lock))
        self._emit(Kind.ACQUIRED, lock, version=state.version, duration=written.waited,
                   fencing_token=token, takeover=written.replaced is not None)
        return lock, previous

    def _settle_replaced(self, previous: Any) -> None:
        """An older lock object of this client on the same key, whose row our put just replaced."""
        final = previous._state.replaced_by_new_acquisition()
        if final == Status.RELEASED:
            self._emit(Kind.REPLACED_RELEASED, previous)
        elif final == Status.INVALID:
            self._emit(Kind.REPLACED_LOST, previous)

    def _timeout_error(self, attempt: AcquireAttempt, timed_out: TimedOut) -> DynamoDBLockError:
        owner = Schema.owner_of(timed_out.blocking)
        own = self._registry.get(attempt.unique_identifier)
        shared_holders = None if attempt.shared else describe_holders(timed_out.blocking, self._owner_name)
        if shared_holders is not None:
            owner = shared_holders
        elif own is not None and own._state.held and owner == self._owner_name:  # type: ignore[attr-defined]
            owner = ('this client (pass reentrant=True where the thread or task that holds it takes it again, '
                     f'or release it first; owner_name {owner})')
        elif timed_out.blocking is not None and Schema.version_of(timed_out.blocking) is None:
            owner += (' (the item at this key carries no lock attributes: it is an item of the application; '
                      'pass lock_existing_item=True to lock it without replacing it)')
        return DynamoDBLockError(
            DynamoDBLockError.ACQUIRE_TIMEOUT,
            f'Could not acquire {describe_key(self._schema, attempt.partition_key, attempt.sort_key)} within '
            f'{attempt.retry_timeout}s: held by {owner}',
            holder=self._describe_row(timed_out.blocking),
        )

    def _extend_protocol(self, lock: Any) -> Protocol[None]:
        self._check_renewable(lock)
        if self._session is not None and lock._state.session_id == self._session.id:   # renew the session
            return extend_session(self._session_settings, self._session, self._registry.held(), lock, self._clock)
        return extend(self._heartbeat_settings, lock, self._clock)

    def _check_renewable(self, lock: Any) -> None:
        if lock.lock_client is not self or (lock._state.held and not self._owns(lock)):
            raise DynamoDBLockError(DynamoDBLockError.LOCK_NOT_OWNED, f'{lock.unique_identifier} is not held by '
                                    f'this client ({self._settings.owner_name})')

    def _update_attributes_protocol(self, lock: Any, values: Any, remove: Any) -> Protocol[None]:
        """``lock.update_attributes``: the arguments checked now (before anything is sent), and
        the protocol that writes them with a heartbeat of the lock, under its mutex (a heartbeat
        of it under way finishes first; its version is then the one the condition names)."""
        self._check_process()
        update = check_attribute_update(self._schema, values, remove)
        if lock.shared:
            raise ValueError(f'{lock.unique_identifier} is a shared lock: it carries no additional attributes')
        if lock._existing_item:
            raise ValueError(f'{lock.unique_identifier} is a lock on an existing item: it carries no additional '
                             "attributes (the item's own are the application's; update the item yourself)")
        self._check_renewable(lock)
        check_update_size(self._schema, lock, dict(update[0]), update[1])
        return self._holding(lock, update_attributes(self._heartbeat_settings, lock, self._clock, update))

    @staticmethod
    def _holding(lock: Any, protocol: Protocol[T]) -> Protocol[T]:
        """Run ``protocol`` holding ``lock``'s mutex."""
        yield Hold(lock)
        try:
            return (yield from protocol)
        finally:
            yield Drop(lock)

    # -- guarded writes ----------------------------------------------------------------

    def _guard_protocol(self, lock: Any, items: Any, typed: bool, options: Mapping[str, Any],
                        client_token: Optional[str], wire: Any) -> Protocol[Dict[str, Any]]:
        """Check a guarded write before anything is sent, and the protocol that sends it."""
        self._check_process()
        locks = lock if isinstance(lock, tuple) else (lock,)    # a tuple: a multi-lock's locks
        for each in locks:
            if each.lock_client is not self:
                raise DynamoDBLockError(DynamoDBLockError.LOCK_NOT_OWNED, f'{each.unique_identifier} is not held by '
                                        f'this client ({self._settings.owner_name})')
            if each.shared:
                raise ValueError(f'{each.unique_identifier} is a shared lock: guarded writes need an exclusive one')
        if typed:
            items = wire.to_python('transact_write_items', {'TransactItems': items})['TransactItems']
        actions = check_actions(self._schema, locks[0].partition_key, locks[0].sort_key, items,
                                [(each.partition_key, each.sort_key) for each in locks[1:]],
                                any(each._existing_item for each in locks))
        unknown = sorted(set(options) - {'ReturnConsumedCapacity', 'ReturnItemCollectionMetrics'})
        if unknown:
            raise TypeError(f'transact_write_items takes TransactItems, ClientRequestToken, ReturnConsumedCapacity '
                            f'and ReturnItemCollectionMetrics; not {", ".join(unknown)}')
        if client_token is not None and not isinstance(client_token, str):
            raise TypeError(f'ClientRequestToken must be a str, not {type(client_token).__name__}')
        return guarded_write(self._schema, lock, actions, options, client_token)

    # -- releasing ---------------------------------------------------------------------

    def _owns(self, lock: Any) -> bool:
        return lock.lock_client is self and self._registry.holds(lock, _slot(lock))

    def _apply_release(self, lock: Any, verdict: ReleaseVerdict, handed_over: bool = False) -> None:
        """Apply a release verdict to ``lock``; raise its error, if any. A lock handed over to a
        waiter wakes nobody else (they would only find it held)."""
        if verdict.final_status is not None:
            lock._state.forget(verdict.final_status, verdict.loss)
            self._unregister(lock, wake=not handed_over)
        row = verdict.loss.row if verdict.loss else None
        self._emit(verdict.event, lock, status=lock._state.status, owner=Schema.owner_of(row),
                   error=verdict.error.message if verdict.error else verdict.detail, lease=lock.lease_duration,
                   duration=verdict.duration, handed_over=verdict.handed_over)
        if verdict.error is not None:
            raise self._public_error(verdict.error)

    def _unregister(self, lock: Any, wake: bool = True) -> None:
        self._registry.forget(lock, _slot(lock))
        if wake:
            self._registry.wake_longest_waiting(lock.unique_identifier)

    def _release_attributes(self, lock: Any, attributes: Any, keep_row: Any) -> Optional[Mapping[str, Any]]:
        """``release_lock(attributes=..., keep_row=...)`` checked before anything is written: the
        attributes to write (None: none), which only a release that keeps the row can write."""
        if keep_row is not None:
            require_bool('keep_row', keep_row)
        checked = check_release_attributes(self._schema, attributes, lock.keep_row if keep_row is None else keep_row)
        check_release_size(self._schema, lock, checked)
        return checked or None

    def _releasing(self, lock: Any, best_effort: bool, attributes: Optional[Mapping[str, Any]] = None,
                   keep_row: Optional[bool] = None) -> Protocol[bool]:
        """``release_lock``: one hold of a reentrant lock, or the release itself under the
        lock's mutex (a heartbeat of it under way finishes first). True when this call
        released the lock (see :attr:`ReleaseVerdict.released`), or one of its holds.
        ``attributes`` and ``keep_row`` (None: the lock's) as :meth:`_release_attributes` checked them."""
        yield Hold(lock)
        try:
            if attributes and lock.shared:
                raise ValueError(f'{lock.unique_identifier} is a shared lock: a release of it writes no attributes')
            if attributes and lock._existing_item:
                raise ValueError(f'{lock.unique_identifier} is a lock on an existing item: its release writes no '
                                 'attributes (write them to the item yourself)')
            if attributes and lock._holds > 1:
                raise ValueError(f'attributes are written when the last hold of {lock.unique_identifier} is released; '
                                 f'{lock._holds} holds remain (it was acquired reentrantly)')
            keep = lock.keep_row if keep_row is None else keep_row
            nested = self._release_nested(lock, best_effort)
            if nested is not None:
                return nested
            return (yield from self._release_flow(lock, best_effort, attributes, keep))
        finally:
            yield Drop(lock)

    def _release_flow(self, lock: Any, best_effort: bool, attributes: Optional[Mapping[str, Any]] = None,
                      keep_row: Optional[bool] = None) -> Protocol[bool]:
        """Release ``lock`` (the driver holds its mutex): judge first whether a write is needed,
        hand the lock to this client's longest waiter for the key in the same write if there is
        one, and apply the verdict to the lock (raising its error, if any).

        Interrupted (cancelled, Ctrl-C, ``cancel``) before the verdict: the lock is forgotten at
        once, as a best-effort release would (nobody renews it, so no heartbeat can report a
        theft that is only our own release landing), a claimed waiter goes on waiting, and the
        release is finished apart from the caller until the row no longer carries our versions.
        """
        verdict = precheck_release(lock._state, self._owns(lock), best_effort, lock.unique_identifier,
                                   self._owner_name)
        if lock.lock_client is self:
            self._observations.forget(lock.unique_identifier)
        if verdict is None:
            successor = None if lock.shared else self._registry.claim_successor(lock.unique_identifier)
            if successor is not None and (successor.attempt.lock_existing_item != lock._existing_item or not
                                          handover_fits(self._schema, successor.attempt.item_template, attributes)):
                # A lock on an existing item and a plain one write different rows (and a row too
                # large for DynamoDB cannot be written): no handover.
                self._registry.hand_over(lock.unique_identifier, successor, None)
                successor = None
            versions = lock._state.our_versions()
            try:
                verdict = yield from self._release_protocol(lock, best_effort, successor, attributes, keep_row)
            except BaseException:
                if successor is not None:
                    self._registry.hand_over(lock.unique_identifier, successor, None)
                yield self._release_cut_short([(lock, versions)], attributes, keep_row)
                raise
        self._apply_release(lock, verdict, verdict.handed_over)
        return verdict.released

    def _release_cut_short(self, locks: Sequence[Tuple[Any, Sequence[str]]],
                           attributes: Optional[Mapping[str, Any]] = None, keep_row: Optional[bool] = None) -> Any:
        """Releases an interruption cut short: each lock is forgotten at once (nobody renews it),
        and the returned ``Settle`` finishes its release apart from the caller, until its row no
        longer carries its ``versions``."""
        for lock, _ in locks:
            lock._state.forget(Status.RELEASED)
            self._unregister(lock)
            self._emit(Kind.RELEASE_INTERRUPTED, lock)

        def releasing_again() -> Protocol[None]:
            for lock, versions in locks:
                yield from release_again(self._release_settings, lock, versions, self._clock, lock.lease_duration,
                                         attributes, keep_row)

        return Settle(releasing_again())

    def _begin_close(self) -> bool:
        """The first call of ``close()``: stop everything waiting. False on later calls."""
        if self._closed:
            return False
        self._closed = True
        logger.info('Closing lock client %s', self._owner_name)
        self._shutdown.set()
        for waiter in self._registry.all_waiters():
            waiter.set()
        return True

    def _locks_to_release_at_close(self, release_locks: bool) -> List[Any]:
        return self._registry.held() if release_locks and not self._forked() else []

    def _end_close(self) -> None:
        if self._owns_app_callback_executor:
            self._app_callback_executor.shutdown(wait=False)
        logger.info('Closed lock client %s', self._owner_name)

    def _release_protocol(self, lock: Any, best_effort: bool, successor: Any,
                          attributes: Optional[Mapping[str, Any]] = None,
                          keep_row: Optional[bool] = None) -> Protocol[ReleaseVerdict]:
        """Release ``lock`` (handing it to ``successor``, a claimed waiter, if any): the verdict."""
        started = self._clock.monotonic()
        result = yield from release(self._release_settings, lock, self._clock,
                                    successor.attempt if successor is not None else None, attributes, keep_row)
        if successor is not None and not self._registry.hand_over(lock.unique_identifier, successor, result.handed) \
                and result.handed is not None:
            yield Settle(free_handed(self._release_settings, (lock.partition_key, lock.sort_key), result.handed,
                                     self._clock, attributes))
        verdict = release_verdict(result, best_effort, self._schema, lock.unique_identifier)
        return dataclasses.replace(verdict, handed_over=result.handed is not None,
                                   duration=self._clock.monotonic() - started)

    def _finish_wait(self, waiter: Any, outcome: Any, attempt: AcquireAttempt, timeout_is_error: bool,
                     app_callback: Any, raise_context_exception: bool, make_lock: Callable[..., L],
                     holder: Any) -> Optional[Tuple[L, Optional[L]]]:
        """An acquisition has stopped waiting with ``outcome``: None after a timeout that is not
        an error, else the new lock and the older lock object it replaced (see :meth:`_adopt`).

        :raises DynamoDBLockError: ``ACQUIRE_TIMEOUT`` after a timeout when ``timeout_is_error``.
        """
        outcome = self._left_waiting(waiter, outcome)
        if isinstance(outcome, TimedOut):
            if timeout_is_error:
                raise self._timeout_error(attempt, outcome)
            return None
        return self._adopt(outcome, app_callback, raise_context_exception, make_lock, holder, attempt)

    def _forked(self) -> bool:
        """Whether this client is being used in a process forked from the one that made it."""
        try:
            self._check_process()
        except DynamoDBLockError:
            return True
        return False

    def _heartbeat_round(self) -> Protocol[None]:
        locks = self._registry.held()
        if self._session is not None:   # one session write; lock rows only when their slow refresh is due
            yield from session_round(self._session_settings, self._session, locks, self._clock)
            locks = due_for_refresh(self._session_settings, self._registry.held(), self._clock.monotonic())
        yield from heartbeat_round(self._heartbeat_settings, locks, self._batching, self._clock, self._shutdown.is_set)

    def _starting_session(self, attempts: Sequence[AcquireAttempt]) -> Protocol[List[AcquireAttempt]]:
        """Before an acquisition of a client with ``session=True`` writes: its session row; the
        attempts, naming that session (a session lost since they were made is replaced)."""
        if self._session is None:
            return list(attempts)
        session_id = yield from ensure_session(self._session_settings, self._session, self._clock)
        return [attempt if attempt.item_template.get(COL_LOCK_SESSION) == session_id else dataclasses.replace(
            attempt, item_template={**attempt.item_template, COL_LOCK_SESSION: session_id}) for attempt in attempts]

    def _ending_session(self) -> Protocol[None]:
        """At ``close()``, after the locks it releases: end the session if no lock is left under it."""
        if self._session is not None and not self._forked():
            yield from end_session(self._session_settings, self._session, self._registry.held())

    def _renewing(self, locks: Sequence[Any]) -> Protocol[None]:
        """Renew a group of locks: in one batch when batching, else one by one.

        A lock whose mutex is busy (a release of it is under way) is not waited for while the
        others' are held: it gets a heartbeat of its own afterwards. A lock no longer held by
        this client is skipped.
        """
        one_by_one: List[Any] = list(locks)
        if self._batching.enabled:
            free = []
            for lock in locks:
                if (yield Hold(lock, wait=False)):
                    free.append(lock)
            one_by_one = [lock for lock in locks if lock not in free or lock.shared]
            try:
                owned = [lock for lock in free if self._owns(lock) and not lock.shared]   # shared: one by one
                one_by_one += yield from renew_batch(self._heartbeat_settings, owned, self._batching, self._clock)
            finally:
                for lock in free:
                    yield Drop(lock)
        for lock in one_by_one:
            yield Hold(lock)
            try:
                if self._owns(lock):
                    yield from renew_one(self._heartbeat_settings, lock, self._clock)
            finally:
                yield Drop(lock)

    def _heartbeat_groups(self, locks: Optional[Any], lock_type: type) -> List[List[Any]]:
        """``send_heartbeats``' locks (all held ones by default), checked, in the groups that
        are renewed together."""
        chosen = self._registry.held() if locks is None else list(locks)
        for lock in chosen:
            if not isinstance(lock, lock_type):
                raise TypeError(f'send_heartbeats takes {lock_type.__name__} objects, not {type(lock).__name__}')
        size = self._batching.batch_size if self._batching.enabled else 1
        return [chosen[start:start + size] for start in range(0, len(chosen), size)]

    def _checker_round(self) -> Protocol[None]:
        return check_round(self._heartbeat_settings, self._registry.held(), self._clock)

    def _force_release_protocol(self, lock: Any) -> Protocol[bool]:
        """Free ``lock``'s row if it still carries that version (an operator's release); a
        waiter of this client for the key is woken."""
        freed: bool = yield from force_release(self._release_settings, lock, self._clock)
        if freed:
            self._emit(Kind.FORCE_RELEASED, lock, version=lock.record_version_number, owner=lock.owner_name)
            self._registry.wake_longest_waiting(lock.unique_identifier)
        return freed

    def _left_waiting(self, waiter: Any, outcome: Any) -> Any:
        """An acquisition stops waiting with ``outcome``: a lock handed over to it meanwhile
        is its result instead of a timeout."""
        handed = self._registry.leave(waiter.attempt.unique_identifier, waiter)
        if handed is None or isinstance(outcome, Written):
            return outcome
        return handed

    def _queue(self, partition_key: PartitionKey, sort_key: str, arguments: AcquireArguments, holder: Any,
               reentrant: bool, make_waiter: Callable[[AcquireAttempt], Any]) -> Tuple[Optional[L], Any]:
        """The first step of an acquisition: the lock this very holder already holds (reentrant),
        or a new waiter, queued for the key in this client."""
        attempt = self._attempt(partition_key, sort_key, arguments)
        if reentrant:
            held = self._reenter(attempt.unique_identifier, holder)
            if held is not None:
                if held._existing_item != attempt.lock_existing_item:  # type: ignore[attr-defined]
                    held._holds -= 1  # type: ignore[attr-defined]
                    raise ValueError(f'{attempt.unique_identifier} is held by this thread or task with '
                                     f'lock_existing_item={not attempt.lock_existing_item}: a reentrant acquisition '
                                     'must ask for the same kind of lock')
                return held, None
        waiter = make_waiter(attempt)
        self._registry.add_waiter(attempt.unique_identifier, waiter)
        return None, waiter

    def _acquisition(self, waiter: Any, holder: Any, timeout_is_error: bool, app_callback: Any,
                     raise_context_exception: bool, make_lock: Callable[..., L]) -> Protocol[Optional[L]]:
        """An acquisition from its first write to the lock handed to the caller, for both
        clients: wait (``waiter`` is this acquisition's place in the client's queue for the
        key), adopt the row written, settle the older lock object it replaced, and refuse the
        lock if the client was closed meanwhile.

        Interrupted anywhere (cancelled, Ctrl-C, ``cancel``), or refused at the end, the caller
        is not handed the lock, so nobody may keep or renew it: a row written for it (or handed
        to it by a release) is freed apart from the caller (``Settle``), where a second
        interruption cannot stop it.
        """
        attempt = waiter.attempt
        unique_identifier = attempt.unique_identifier
        try:
            attempt = waiter.attempt = (yield from self._starting_session([attempt]))[0]
            outcome = yield from acquire(attempt, self._clock, self._shutdown.is_set, self._observations)
        except BaseException:
            handed = self._registry.leave(unique_identifier, waiter)
            if handed is not None:
                yield Settle(free_handed(self._release_settings, (attempt.partition_key, attempt.sort_key), handed,
                                         self._clock))
            raise
        adopted = self._finish_wait(waiter, outcome, attempt, timeout_is_error, app_callback,
                                    raise_context_exception, make_lock, holder)
        if adopted is None:
            return None
        return (yield from self._installing(*adopted))

    def _installing(self, lock: L, previous: Optional[L]) -> Protocol[L]:
        """The last step of an acquisition, after :meth:`_adopt`: settle the older lock object
        it replaced, and refuse the lock if the client was closed meanwhile."""
        installed = yield from self._installing_all([(lock, previous)])
        return installed[0]

    def _installing_all(self, adopted: Sequence[Tuple[L, Optional[L]]]) -> Protocol[List[L]]:
        """:meth:`_installing` for the locks of one acquisition (several for ``acquire_locks``):
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
            if self._shutdown.is_set():
                raise DynamoDBLockError(DynamoDBLockError.CLIENT_SHUTDOWN, 'The lock client has been closed')
        except BaseException:
            yield Settle(self._give_up_all([(lock, previous if index >= settled else None)
                                            for index, (lock, previous) in enumerate(adopted)]))
            raise
        return [lock for lock, _ in adopted]

    def _give_up_all(self, adopted: Sequence[Tuple[Any, Any]]) -> Protocol[None]:
        for lock, previous in adopted:
            yield from self._give_up(lock, previous)

    def _give_up(self, lock: Any, previous: Any) -> Protocol[None]:
        """An acquisition whose caller is not handed ``lock``: settle the older lock object it
        replaced (if not done yet), and release the lock, best effort."""
        if previous is not None:
            yield Hold(previous)
            self._settle_replaced(previous)
            yield Drop(previous)
        yield from self._releasing(lock, True)

    # -- conversions -------------------------------------------------------------------

    def _describe_row(self, row: Optional[Mapping[str, Any]]) -> Any:
        """A ``BaseDynamoDBLock`` for a row (None for no row, or a released one); the lock
        attributes a row lacks (one written by another program) read as empty."""
        if not row or Schema.is_released(row):
            return None
        described = self._base_lock_class(**self._schema.lock_fields(row, self._settings.lease_duration))
        described.shared_holders = holders_of(row, self._settings.lease_duration)
        return described

    def _public_error(self, error: DynamoDBLockError) -> DynamoDBLockError:
        """The error with ``holder`` as a ``BaseDynamoDBLock`` instead of a raw row."""
        if isinstance(error.holder, dict):
            error.holder = self._describe_row(error.holder)
        return error

    def _rows_to_locks(self, items: List[Dict[str, Any]]) -> List[Any]:
        return [self._describe_row(item) for item in items if self._schema.is_lock_row(item)]

    def _listing(self, partition_key: Optional[PartitionKey]) -> Request:
        """The first request of ``list_locks``: a scan of the whole table, or with
        ``partition_key`` a query of the rows under that key (checked first, as a key)."""
        self._check_process()
        if partition_key is None:
            return scan(self._schema)
        check_key(self._schema, partition_key, NO_SORT_KEY)
        return query(self._schema, partition_key)

    def _listed(self, request: Request, answer: Any) -> Tuple[List[Any], Optional[Request]]:
        """The locks of the page ``request`` read (rows that are not held locks skipped), and
        the request of the next page (None after the last)."""
        rows, following = next_page(self._schema, request, answer)
        return self._rows_to_locks(rows), following

    _base_lock_class: Any = None   # set by the public module: BaseDynamoDBLock

    def _item_of(self, lock: Any) -> Item:
        return self._schema.lock_item(lock.partition_key, lock.sort_key, lock.owner_name, lock.lease_duration,
                                      lock.record_version_number, lock.expiry_time, lock.additional_attributes)

    # -- public, read-only settings (for recipes and other code built on the client) -----

    @property
    def clock(self) -> Any:
        """The clock the client times everything with (``clock=`` of the constructor, or the
        system clock): ``monotonic()``, ``time()``, ``sleep(seconds, event)``; recipes wait on it."""
        return self._clock

    @property
    def heartbeat_period(self) -> float:
        """Seconds between renewals of a held lock."""
        return self._settings.heartbeat_period

    @property
    def safe_period(self) -> float:
        """Seconds without a confirmed renewal after which a lock is ``IN_DANGER``."""
        return self._settings.safe_period

    @property
    def lease_duration(self) -> float:
        """Seconds a lock row of this client is presumed alive without a renewal."""
        return self._settings.lease_duration

    def check_lock_arguments(self, partition_key: PartitionKey, sort_key: str,
                             additional_attributes: Optional[Mapping[str, Any]] = None) -> None:
        """Check a key and additional attributes as ``acquire_lock`` would, without any call:
        for code that builds on the client and wants to refuse bad input early.

        :raises TypeError, ValueError: as ``acquire_lock``; a sort key on a table without one
            (or none on a table with one) is a ValueError that names the sort key.
        """
        check_key(self._schema, partition_key, sort_key)
        check_additional_attributes(self._schema, additional_attributes)

    # -- acquiring the first free of several keys (``acquire_first_lock``) ---------------

    #: The most keys one ``acquire_first_lock`` may try.
    MAX_FIRST_KEYS = 1000

    def _first_attempts(self, partition_key: PartitionKey, sort_keys: Any, retry_period: Any, retry_timeout: Any,
                        additional_attributes: Any, app_callback: Any) -> List[AcquireAttempt]:
        """Check the arguments of ``acquire_first_lock`` (before anything is written): one
        acquisition per sort key."""
        self._check_process()
        if isinstance(sort_keys, (str, bytes)) or not isinstance(sort_keys, (list, tuple)):
            raise TypeError(f'sort_keys must be a list or tuple of str, not {type(sort_keys).__name__}')
        if not 1 <= len(sort_keys) <= self.MAX_FIRST_KEYS:
            raise ValueError(f'sort_keys must hold from 1 to {self.MAX_FIRST_KEYS} keys, got {len(sort_keys)}')
        if len(set(sort_keys)) != len(sort_keys):
            raise ValueError('sort_keys may not repeat a key')
        attempts = []
        for sort_key in sort_keys:
            arguments = acquire_arguments(self._settings, partition_key, sort_key, retry_period, retry_timeout,
                                          additional_attributes, app_callback)
            # No writer-waiting marker: the keys it does not take would keep theirs (shared_locks.rst).
            attempts.append(dataclasses.replace(self._attempt(partition_key, sort_key, arguments),
                                                writer_marker=False))
        return attempts

    def _first_acquisition(self, attempts: Sequence[AcquireAttempt], holder: Any, app_callback: Any,
                           raise_context_exception: bool, make_lock: Callable[..., L]) -> Protocol[L]:
        """``acquire_first_lock``: the lock of the first key written, adopted and installed as
        ``acquire_lock``'s is (interrupted, what was written is settled the same way)."""
        attempts = yield from self._starting_session(attempts)
        outcome = yield from acquire_first(attempts, self._clock, self._shutdown.is_set, self._observations)
        if isinstance(outcome, NoneFree):
            first = attempts[0]
            keys = ', '.join(repr(attempt.sort_key) for attempt in attempts)
            owners = sorted({str(Schema.owner_of(each.blocking)) for each in outcome.timed_out})
            raise DynamoDBLockError(
                DynamoDBLockError.ACQUIRE_TIMEOUT,
                f'Could not acquire any of the sort keys {keys} of '
                f'{describe_key(self._schema, first.partition_key, first.sort_key)} within {first.retry_timeout}s: '
                f'held by {", ".join(owners)}',
                holder=self._describe_row(outcome.timed_out[0].blocking),
            )
        lock, previous = self._adopt(outcome.written, app_callback, raise_context_exception, make_lock, holder,
                                     attempts[outcome.index])
        return (yield from self._installing(lock, previous))

    # -- several keys at once, all or nothing (``acquire_locks``) ------------------------

    def _multi_attempts(self, keys: Any, retry_period: Any, retry_timeout: Any, additional_attributes: Any,
                        app_callback: Any) -> List[AcquireAttempt]:
        """Check the arguments of ``acquire_locks`` (before anything is written): one
        acquisition per key, each checked as ``acquire_lock`` checks its own."""
        self._check_process()
        if isinstance(keys, (str, bytes, Mapping)) or not isinstance(keys, Sequence):
            raise TypeError('keys must be a list or tuple of partition keys or (partition_key, sort_key) tuples, '
                            f'not {type(keys).__name__}')
        if not 1 <= len(keys) <= MAX_KEYS:
            raise ValueError(f'keys must hold from 1 to {MAX_KEYS} keys (one TransactWriteItems call takes at most '
                             f'{MAX_KEYS} actions), got {len(keys)}; nothing was written')
        attempts: List[AcquireAttempt] = []
        seen: Set[str] = set()
        for index, key in enumerate(keys):
            if isinstance(key, tuple) and len(key) != 2:
                raise ValueError(f'keys[{index}] must be a partition key or a (partition_key, sort_key) tuple, '
                                 f'got a tuple of {len(key)}')
            partition_key, sort_key = key if isinstance(key, tuple) else (key, '-')
            arguments = acquire_arguments(self._settings, partition_key, sort_key, retry_period, retry_timeout,
                                          additional_attributes, app_callback)
            attempt = self._attempt(partition_key, sort_key, arguments)
            if attempt.unique_identifier in seen:
                raise ValueError(f'keys names {attempt.unique_identifier} more than once')
            seen.add(attempt.unique_identifier)
            attempts.append(attempt)
        size = size_of(attempts[0].item_template) * len(attempts)
        if size > MAX_TRANSACTION_BYTES:
            raise ValueError(f'acquiring these keys with these additional_attributes writes about {size} bytes in one '
                             f'transaction; DynamoDB takes at most {MAX_TRANSACTION_BYTES}')
        return attempts

    def _multi_acquisition(self, attempts: Sequence[AcquireAttempt], holder: Any, timeout_is_error: bool,
                           multi: Any, make_lock: Callable[..., L]) -> Protocol[Any]:
        """``acquire_locks``: every key written in one transaction (:func:`acquire_all`), each
        row adopted and installed as ``acquire_lock``'s is, and handed to ``multi`` (whose
        ``_member_callback`` the locks call). None after a timeout that is not an error."""
        attempts = yield from self._starting_session(attempts)
        outcome = yield from acquire_all(attempts, self._clock, self._shutdown.is_set, self._observations)
        if isinstance(outcome, NotAll):
            if not timeout_is_error:
                return None
            held = [(attempt, row) for attempt, row in zip(attempts, outcome.blocking) if row is not None]
            what = ', '.join(f'{attempt.unique_identifier} held by {Schema.owner_of(row)}' for attempt, row in held)
            raise DynamoDBLockError(
                DynamoDBLockError.ACQUIRE_TIMEOUT,
                f'Could not acquire all of {set_name(attempts)} within {attempts[0].retry_timeout}s: '
                f'{what or "the transaction kept conflicting"}; none of them is held',
                holder=self._describe_row(held[0][1] if held else None))
        adopted = [self._adopt(written, multi._member_callback, multi.raise_context_exception, make_lock, holder,
                               attempt) for attempt, written in zip(attempts, outcome.written)]
        multi._attach([lock for lock, _ in adopted])
        yield from self._installing_all(adopted)
        return multi

    def _releasing_all(self, locks: Sequence[Any], best_effort: bool) -> Protocol[bool]:
        """A multi-lock's release: the rows of every held lock freed in one transaction per 100
        (under every lock's mutex, taken in one order); when a transaction cannot free them all
        (a key lost meanwhile, DynamoDB failing), the locks are released one by one, each judged
        on its own. Every lock is dealt with before the first error is raised. True when this
        call released every lock."""
        released = True
        held: List[Any] = []
        errors: List[DynamoDBLockError] = []
        pending: List[Any] = []
        try:
            for lock in sorted(locks, key=lambda each: str(each.unique_identifier)):
                yield Hold(lock)
                held.append(lock)
            for lock in locks:
                verdict = precheck_release(lock._state, self._owns(lock), best_effort, lock.unique_identifier,
                                           self._owner_name)
                if verdict is None:
                    pending.append(lock)
                else:
                    released = self._applying(lock, verdict, errors) and released
            for start in range(0, len(pending), MAX_KEYS):
                chunk = pending[start:start + MAX_KEYS]
                started = self._clock.monotonic()
                answer = yield from free_all(self._schema, chunk, self._clock, self._settings.expiry_period,
                                             self._settings.keep_released_rows)
                for lock in chunk:
                    if isinstance(answer, Applied):
                        verdict = ReleaseVerdict(Status.RELEASED, Kind.RELEASED, released=True,
                                                 duration=self._clock.monotonic() - started)
                        released = self._applying(lock, verdict, errors) and released
                    else:
                        try:
                            released = (yield from self._release_flow(lock, best_effort)) and released
                        except DynamoDBLockError as error:
                            released = False
                            errors.append(error)
        except BaseException:
            left = [(lock, lock._state.our_versions()) for lock in pending if lock._state.held]
            if left:
                yield self._release_cut_short(left)
            raise
        finally:
            for lock in held:
                yield Drop(lock)
        if errors:
            raise errors[0]
        return released

    def _applying(self, lock: Any, verdict: ReleaseVerdict, errors: List[DynamoDBLockError]) -> bool:
        """Apply a verdict of the multi-lock's release; whether it released the lock."""
        try:
            self._apply_release(lock, verdict)
        except DynamoDBLockError as error:
            errors.append(error)
            return False
        return verdict.released


#: How many keys the guesses of shared acquisitions are kept for (then they start over).
_MAX_JOIN_GUESSES = 10_000


def _slot(lock: Any) -> str:
    """Where the registry keeps a held lock: its key, or for a shared lock its key and its
    holder id (a client may hold several shared locks on one key)."""
    if getattr(lock, 'shared', False):
        return f'{lock.unique_identifier}\x00{lock._state.acquisition_id}'
    return str(lock.unique_identifier)


def unique_identifier_of(partition_key: Any, sort_key: str) -> str:
    """``quote(partition_key) + '|' + quote(sort_key)``, as the published package names locks
    (a binary partition key is quoted as its bytes, a number one as its plain decimal text, the
    way DynamoDB gives it back: ``5``, ``Decimal('5.0')`` and ``Decimal('5')`` name one lock)."""
    if type(partition_key) is str and type(sort_key) is str:
        return _quoted_pair(partition_key, sort_key)
    if isinstance(partition_key, (str, bytes, bytearray)):
        key: Any = partition_key
    elif isinstance(partition_key, Binary):
        key = binary_bytes(partition_key)
    elif isinstance(partition_key, (int, Decimal)) and not isinstance(partition_key, bool):
        key = _number_text(Decimal(partition_key))
    else:
        key = str(partition_key)
    return urllib.parse.quote(key) + '|' + urllib.parse.quote(sort_key)


@functools.lru_cache(maxsize=1024)
def _quoted_pair(partition_key: str, sort_key: str) -> str:
    return urllib.parse.quote(partition_key) + '|' + urllib.parse.quote(sort_key)


def _number_text(number: Decimal) -> str:
    if not number.is_finite():
        return str(number)
    text = format(number.normalize(), 'f')
    return '0' if text in ('-0', '0') else text
