"""Turning events into what people see: log lines, application callbacks, metrics.

Per-heartbeat and per-poll lines are DEBUG, the life cycle of locks and clients is INFO, trouble
is WARNING (ERROR for bugs: an exception nobody expected). Every line goes to the published
logger ``python_dynamodb_lock.python_dynamodb_lock``.

WARNING and ERROR lines are rate-limited per client: at most one line of each kind (for the lines
of the background loops, of each kind and loop) per :data:`RATE_LIMIT_PERIOD` seconds of the
client's clock; the next line of that kind says how many were left out. A lost lock is always
logged. Metrics hooks and application callbacks still get every event.

An :class:`Observer` never raises: a failing callback dispatcher or metrics hook is logged.
"""
from __future__ import annotations

import dataclasses
import logging
import threading
from typing import Any, Callable, Dict, Hashable, List, Mapping, Optional, Tuple

from .clock import Clock, SystemClock
from .._core.events import Event, Kind
from .._model.errors import DynamoDBLockError

__all__ = ['LOGGER_NAME', 'RATE_LIMIT_PERIOD', 'LockEvent', 'MetricsHook', 'Observer', 'RateLimiter', 'logger']

LOGGER_NAME = 'python_dynamodb_lock.python_dynamodb_lock'
logger = logging.getLogger(LOGGER_NAME)

DEBUG, INFO, WARNING, ERROR = logging.DEBUG, logging.INFO, logging.WARNING, logging.ERROR

# kind -> (level, %-style template, the event values it names in order). The templates are the
# library's log messages; record.msg stays the template (record.args the values), so log tools can
# group by it, and every record carries ``lock_event`` (the kind) and ``lock_key`` as extras.
_LINES: Dict[Kind, Tuple[int, str, Tuple[str, ...]]] = {
    Kind.ACQUIRED: (INFO, 'Acquired %s (version %s)',
        ('key', 'version')),
    Kind.ACQUIRE_ATTEMPT: (DEBUG, 'Acquire attempt on %s: %s in %.3fs',
        ('key', 'outcome', 'duration')),
    Kind.ACQUIRE_TIMED_OUT: (DEBUG, 'Gave up acquiring %s after %.3fs: held by %s',
        ('key', 'duration', 'owner')),
    Kind.TAKING_OVER: (INFO, 'Taking over %s from %s: version %s unchanged for %.3fs',
        ('key', 'owner', 'version', 'unchanged_for')),
    Kind.UNFENCED_HOLDER: (WARNING,
        '%s is held by %s, a client that writes no fencing token (a published 0.9.x client?): fencing '
        'tokens of this key stay increasing only as far as the clocks of the hosts agree',
        ('key', 'owner')),
    Kind.NOT_A_LOCK: (WARNING,
        '%s is an item without lock attributes (an item of the application, not a lock): it counts as held and '
        'is never replaced; pass lock_existing_item=True to lock the item itself',
        ('key',)),
    Kind.WAITING: (DEBUG, '%s is held by %s; retrying in %.3fs',
        ('key', 'owner', 'retry_in')),
    Kind.ORPHAN_UNVERIFIED: (INFO,
        'DynamoDB could not be reached to remove a row the failed acquire of %s may have left (%s); '
        'if there is one, others take it over after its lease of %ss',
        ('what', 'error', 'lease')),
    Kind.ORPHAN_CLEANUP_FAILED: (WARNING,
        'Could not clean up a possible row of %s after a failed acquire; it is taken over'
        ' after its lease: %s',
        ('what', 'error')),
    Kind.REPLACED_RELEASED: (INFO, 'Lock %s was released by the earlier release whose answer was lost',
        ('key',)),
    Kind.REPLACED_LOST: (WARNING,
        'Lock %s was lost: this client acquired the key again while that lock object '
        'still held it',
        ('key',)),
    Kind.RELEASED: (INFO, 'Released %s',
        ('key',)),
    Kind.RELEASE_ROW_GONE: (INFO, 'The row of %s was already gone when it was released',
        ('key',)),
    Kind.RELEASE_MET_NEXT_HOLDER: (INFO,
        'The delete of %s met the next holder (%s): an earlier attempt had released it',
        ('key', 'owner')),
    Kind.RELEASE_STOLEN: (WARNING,
        'Lock stolen: %s was taken over by %s before it was released; their row was left '
        'alone',
        ('key', 'owner')),
    Kind.RELEASE_FAILED_FORGOTTEN: (WARNING,
        'Could not free the row of %s (%s); forgetting it anyway: others take it over '
        'after its lease of %ss',
        ('key', 'error', 'lease')),
    Kind.RELEASE_FAILED: (DEBUG, 'Strict release of %s failed: %s',
        ('key', 'error')),
    Kind.RELEASE_INTERRUPTED: (INFO, 'The release of %s was interrupted; it is forgotten here and its row is '
        'freed in the background', ('key',)),
    Kind.RELEASE_SKIPPED: (DEBUG, 'Not releasing %s: its status is %s',
        ('key', 'status')),
    Kind.RELEASE_NOT_OWNED: (WARNING, 'Not releasing %s: that lock object was acquired through another lock client',
        ('key',)),
    Kind.RENEWED: (DEBUG, 'Heartbeat of %s: version %s',
        ('key', 'version')),
    Kind.RENEWAL_LANDED_UNANSWERED: (DEBUG, 'Heartbeat of %s landed though its answer was lost',
        ('key',)),
    Kind.RENEWAL_ADOPTED_EARLIER: (INFO, 'Heartbeat of %s found an earlier unconfirmed renewal of its own',
        ('key',)),
    Kind.RECOVERED: (INFO, 'Lock %s is safe again after a successful heartbeat',
        ('key',)),
    Kind.RENEWAL_FAILED: (WARNING, 'Heartbeat of %s failed, will retry next period: %s',
        ('key', 'error')),
    Kind.STOLEN: (WARNING, 'Lock %s was stolen by %s',
        ('key', 'owner')),
    Kind.RELEASED_BY_LOST_ANSWER: (INFO, 'Lock %s was released by the earlier release whose answer was lost',
        ('key',)),
    Kind.SETTLE_FAILED: (ERROR, 'Settling the heartbeat of %s failed',
        ('key',)),
    Kind.IN_DANGER: (WARNING, 'Lock %s is in danger: not renewed for %.1fs (safe period %ss)',
        ('key', 'unconfirmed_for', 'safe_period')),
    Kind.ROUND_OVERRUN: (WARNING,
        'A round of %s heartbeats at heartbeat_tps=%s took %.3fs longer than the '
        'heartbeat period',
        ('count', 'heartbeat_tps', 'overrun')),
    Kind.HEARTBEATS_BEHIND: (WARNING,
        "Heartbeats are falling behind: %s of %s locks still had last period's heartbeat "
        'in flight (heartbeat_workers, heartbeat_batch_size or more clients would help)',
        ('skipped', 'count')),
    Kind.HEARTBEAT_IN_FLIGHT: (DEBUG, 'Heartbeat of %s still in flight; skipping this round',
        ('key',)),
    Kind.BATCHING_UNAVAILABLE: (WARNING,
        'heartbeat_batch_size=%s needs PartiQL (BatchExecuteStatement) and the IAM '
        'permission dynamodb:PartiQLUpdate on table %s; renewing one lock per UpdateItem '
        'call from now on: %s',
        ('batch_size', 'table', 'error')),
    Kind.HEARTBEAT_TASK_FAILED: (ERROR, 'Heartbeats of %s failed unexpectedly',
        ('keys',)),
    Kind.SESSION_STARTED: (INFO, 'Lock client %s started session %s',
        ('owner', 'session')),
    Kind.SESSION_RENEWED: (DEBUG, 'Session %s renewed: version %s',
        ('session', 'version')),
    Kind.SESSION_RENEWAL_FAILED: (WARNING, 'Could not renew session %s: %s',
        ('session', 'error')),
    Kind.SESSION_LOST: (WARNING, 'Session %s was lost (%s): its %s locks are lost',
        ('session', 'owner', 'count')),
    Kind.SESSION_ENDED: (INFO, 'Session %s ended',
        ('session',)),
    Kind.LOOP_STARTED: (INFO, 'Lock client %s: %s started',
        ('owner', 'name')),
    Kind.LOOP_STOPPED: (INFO, 'Lock client %s: %s stopped',
        ('owner', 'name')),
    Kind.LOOP_ROUND_FAILED: (ERROR, 'Lock client %s: %s round failed; carrying on',
        ('owner', 'name')),
    Kind.GUARD_RETRY: (DEBUG, 'Guarded write under %s: %s, attempt %s; trying again',
        ('key', 'code', 'attempt')),
    Kind.FORCE_RELEASED: (WARNING, 'Force-released %s (version %s, owner %s)',
        ('key', 'version', 'owner')),
}

#: Seconds (of the client's clock) in which at most one WARNING or ERROR line of each kind is
#: logged; the next line of that kind after the period counts the ones left out.
RATE_LIMIT_PERIOD = 10.0

#: The ``stolen`` line when nobody took the lock but its row was released or deleted by someone
#: else (a force release, ...): the event's ``how`` says which.
_LOST_ROW_LINE: Tuple[str, Tuple[str, ...]] = ('Lock %s was lost: %s', ('key', 'how'))

#: Appended to a line after others of its kind were left out by the rate limit.
_SUPPRESSED = ' (%s more like this in the last %.1fs not logged)'

# Events that happen at most once per lock object (its loss, an operator's release): each is
# logged, whatever the rate limit, because each names a different lock's fate. Their number is
# bounded by the application's acquisitions, not by time, so they cannot flood the log.
_NOT_RATE_LIMITED = frozenset({
    Kind.STOLEN, Kind.REPLACED_LOST, Kind.RELEASE_STOLEN, Kind.RELEASE_FAILED_FORGOTTEN, Kind.FORCE_RELEASED,
    Kind.SESSION_LOST,
})

# Events that the application hears through its app_callback, with the published codes.
_CALLBACK_CODES = {
    Kind.STOLEN: DynamoDBLockError.LOCK_STOLEN,
    Kind.REPLACED_LOST: DynamoDBLockError.LOCK_STOLEN,
    Kind.IN_DANGER: DynamoDBLockError.LOCK_IN_DANGER,
}

CallbackDispatcher = Callable[[Any, Any, str], None]   # (callback, lock, code)


@dataclasses.dataclass(frozen=True)
class LockEvent:
    """Something that happened to a lock or a client, for a metrics hook.

    :ivar name: what happened: ``acquire_attempt`` (one conditional write; ``outcome`` is
        ``applied``, ``refused`` or ``failed``), ``acquired`` (``duration``: the wait;
        ``takeover``; ``fencing_token``), ``acquire_timed_out``, ``taking_over``, ``waiting``,
        ``renewed`` and ``renewal_failed`` (``duration``: the call's latency; ``reason``),
        ``recovered``, ``in_danger`` (``duration``: time since the last confirmed renewal),
        ``stolen`` (``reason``), ``released`` (``duration``; ``handed_over``),
        ``release_stolen``, ``release_failed``, ``release_failed_forgotten``,
        ``heartbeats_behind``, ``guard_retry``, ``force_released``, and the other values of
        ``_core.events.Kind``.
    :ivar key: the lock's ``unique_identifier`` ('' for client-wide events).
    :ivar duration: seconds, for the events that measure something; else None.
    :ivar attributes: the event's other values (never the lock object itself).
    """

    name: str
    key: str
    duration: Optional[float]
    attributes: Mapping[str, Any]


MetricsHook = Callable[[LockEvent], Any]


class RateLimiter:
    """At most one line per kind per ``period`` seconds of ``clock``; thread-safe."""

    def __init__(self, clock: Clock, period: float = RATE_LIMIT_PERIOD) -> None:
        self._clock = clock
        self._period = period
        self._guard = threading.Lock()
        self._windows: Dict[Hashable, List[Any]] = {}   # kind -> [when its last line was logged, lines left out]

    def admit(self, kind: Hashable) -> Optional[Tuple[int, float]]:
        """None: leave this line out. Else log it: the number of lines of its kind left out
        since the last one logged, and the seconds since that one."""
        now = self._clock.monotonic()
        with self._guard:
            window = self._windows.get(kind)
            if window is None:
                self._windows[kind] = [now, 0]
                return 0, 0.0
            logged_at, left_out = window
            if now - logged_at < self._period:
                window[1] += 1
                return None
            window[:] = [now, 0]
            return left_out, now - logged_at


class Observer:
    """Logs every event and hands the callback events to ``dispatch``.

    :param dispatch: ``dispatch(callback, lock, code)`` runs ``callback(code, lock)`` somewhere
        other than the caller's thread or task (the client's callback executor, or the loop).
    :param clock: the client's clock, for the rate limit of WARNING and ERROR lines.
    :param keep_released_rows: the client's setting: whether the rolling-upgrade advice applies.
    """

    def __init__(self, dispatch: CallbackDispatcher, metrics: Optional[MetricsHook] = None,
                 clock: Optional[Clock] = None, keep_released_rows: bool = True) -> None:
        self._dispatch = dispatch
        self._metrics = metrics
        self._limiter = RateLimiter(clock if clock is not None else SystemClock())
        self._upgrade_advice_due = keep_released_rows
        self._advice_guard = threading.Lock()

    def emit(self, event: Event) -> None:
        if self._metrics is not None:
            self._measure(event)
        level, template, names = _LINES[event.kind]
        if event.kind is Kind.STOLEN and event.fields.get('how'):
            template, names = _LOST_ROW_LINE     # nobody holds it: say what happened to the row
        if logger.isEnabledFor(level):
            values = {'key': event.key, **event.fields}
            exception = event.fields.get('exception')
            exc_info = (type(exception), exception, exception.__traceback__) if exception is not None else None
            args = tuple(values.get(name, '?') for name in names)
            # per kind; the background loops' lines per loop (their 'name')
            limit = ((event.kind, event.fields.get('name')) if level >= WARNING and event.kind not in _NOT_RATE_LIMITED
                     else None)
            self._log(limit, level, template, args, exc_info,
                      extra={'lock_event': event.kind.value, 'lock_key': event.key})
        if event.kind == Kind.UNFENCED_HOLDER:
            self._advise_rolling_upgrade(event)
        code = _CALLBACK_CODES.get(event.kind)
        if code is not None:
            self.callback(event.lock, code)

    def _measure(self, event: Event) -> None:
        """Hand the event to the metrics hook (only when there is one); never raises."""
        assert self._metrics is not None
        fields = event.fields
        attributes = {name: value for name, value in fields.items() if name not in ('duration', 'exception')}
        duration = fields.get('duration')
        try:
            self._metrics(LockEvent(event.kind.value, event.key,
                                    float(duration) if duration is not None else None, attributes))
        except Exception:
            self._log('metrics_hook_raised', ERROR, 'The metrics hook raised on %s %s', (event.kind.value, event.key),
                      True)

    def _log(self, limit: Optional[Hashable], level: int, template: str, args: Tuple[Any, ...], exc_info: Any,
             extra: Optional[Mapping[str, Any]] = None) -> None:
        """Log one line, unless the rate limit of its kind ``limit`` (None: no limit) leaves it out."""
        if limit is not None:
            admitted = self._limiter.admit(limit)
            if admitted is None:
                return
            left_out, since = admitted
            if left_out:
                template += _SUPPRESSED
                args += (left_out, since)
        logger.log(level, template, *args, exc_info=exc_info, extra=extra)

    def _advise_rolling_upgrade(self, event: Event) -> None:
        """Once per client, at the first lock it finds held by a published 0.9.x client, when
        the client keeps released rows: its waiters then take a released row before a published
        client can (see the migration page). Not rate-limited: logged once anyway."""
        with self._advice_guard:
            due, self._upgrade_advice_due = self._upgrade_advice_due, False
        if due:
            logger.warning(
                'Clients of the published 0.9.x package share keys with this client (%s holds %s): during a '
                "rolling upgrade they are starved by this package's waiters, which take a released row at once, "
                'unless keep_released_rows=False is set. Set keep_released_rows=False on every client of this '
                'package until every client is upgraded (logged once per client)',
                event.fields.get('owner', '?'), event.key,
                extra={'lock_event': 'rolling_upgrade_advice', 'lock_key': event.key})

    def callback(self, lock: object, code: str) -> None:
        """Run ``lock.app_callback(code, lock)`` through the dispatcher; never raises."""
        callback: Optional[Callable[..., Any]] = getattr(lock, 'app_callback', None)
        if callback is None:
            return
        try:
            self._dispatch(callback, lock, code)
        except Exception:
            self._log('callback_not_submitted', ERROR, 'Could not submit app_callback(%s, %s)',
                      (code, getattr(lock, 'unique_identifier', lock)), True)
