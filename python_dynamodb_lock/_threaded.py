"""The threaded client's runner: how it performs the core's effects with threads.

:class:`ThreadRunner` is what :class:`~python_dynamodb_lock.DynamoDBLockClient` adds to
:class:`~python_dynamodb_lock._base.ClientCore`: sending a request (on a worker thread when the
call can be cancelled), sleeping on an event, taking a lock's mutex, running undo work on a thread
of its own, the two background threads and the heartbeat workers, and the callback executor. It
makes no decision: every protocol it runs comes from the core.
"""
from __future__ import annotations

import concurrent.futures
import datetime
import logging
import threading
import time
from typing import Any, Callable, List, Mapping, Optional, Sequence, Tuple, TypeVar

from . import _config
from ._base import ClientCore, Done, Steps, cancelled_error, is_cancellation
from ._core.effects import Call, Hold, Pending, Protocol, Settle, Sleep, Submit
from ._core.heartbeat import background_loop
from ._locks import BaseDynamoDBLock
from ._registry import WaiterState
from ._schema import COL_LEASE_DURATION, COL_OWNER_NAME, COL_RECORD_VERSION_NUMBER, Item, PartitionKey
from ._store import Store
from ._validation import require_thread_event

__all__ = ['ThreadRunner']

logger = logging.getLogger('python_dynamodb_lock.python_dynamodb_lock')

T = TypeVar('T')
L = TypeVar('L')

#: Real seconds between two looks, by the thread that watches an acquisition's ``cancel`` event,
#: at whether the acquisition is over (a ``threading.Event`` set meanwhile wakes it at once).
_CANCEL_POLL = 0.05


class _Waiter(WaiterState, threading.Event):
    """An acquisition waiting in this client: woken (and maybe handed the lock) by a release."""

    def __init__(self, attempt: Any) -> None:
        threading.Event.__init__(self)
        self.init_waiter(attempt)


def _relay(cancel: threading.Event, events: Sequence[threading.Event]) -> threading.Event:
    """Set ``events`` as soon as ``cancel`` is set, until the returned event is set (a daemon
    thread that waits on ``cancel``, looking every ``_CANCEL_POLL`` seconds whether it is still
    needed). An event that fails (an application's own, whose ``wait`` raises) is logged: the
    acquisition goes on, but can no longer be cancelled."""
    done = threading.Event()

    def relay() -> None:
        try:
            while not done.is_set():
                if cancel.wait(_CANCEL_POLL):
                    for event in events:
                        event.set()
                    return
        except BaseException:
            logger.exception('Watching the cancel event %r failed: the acquisition can no longer be cancelled',
                             cancel)

    threading.Thread(target=relay, name='DynamoDBLockClient-cancel', daemon=True).start()
    return done


class ThreadRunner(ClientCore[L]):
    """Runs the core's protocols in threads (see the module docstring)."""

    #: Seconds a caller interrupted by Ctrl-C waits, in all, for the undo of what it left in
    #: flight before it leaves the rest to the background.
    _SETTLE_GRACE = 0.5
    #: The same for a caller whose ``cancel`` event was set: it answers within about 50 ms.
    _CANCEL_GRACE = 0.03

    def _start_threads(self, low_level_client: Any, typed: bool, settings: _config.Settings,
                       background_heartbeats: bool) -> None:
        """Make the store (``typed``: the client takes typed JSON), the executors and the two
        background threads (started only with ``background_heartbeats``)."""
        self._store = Store(low_level_client, typed)
        self._shutdown = threading.Event()
        self._close_guard = threading.Lock()
        self._closed = False
        # Calls of acquisitions that can be cancelled (acquire_lock(cancel=...)) are sent here,
        # so that the caller can stop waiting for an answer; threads start only when used.
        self._call_executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=settings.heartbeat_workers, thread_name_prefix='DynamoDBLockClient-call')
        self._heartbeat_executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=settings.heartbeat_workers,
            thread_name_prefix='DynamoDBLockClient-heartbeat',
        )
        self._heartbeat_sender = threading.Thread(
            target=self._run_loop, args=('heartbeat sender', self._heartbeat_round),
            name='DynamoDBLockClient-heartbeat-sender', daemon=True,
        )
        self._heartbeat_checker = threading.Thread(
            target=self._run_loop, args=('heartbeat checker', self._checker_round),
            name='DynamoDBLockClient-heartbeat-checker', daemon=True,
        )
        if background_heartbeats:
            self._heartbeat_sender.start()
            self._heartbeat_checker.start()

    @property
    def background_threads(self) -> Tuple[threading.Thread, ...]:
        """The client's background threads that were started (the heartbeat sender and the
        danger checker; none with ``background_heartbeats=False``): alive until :meth:`close`."""
        return tuple(thread for thread in (self._heartbeat_sender, self._heartbeat_checker) if thread.ident is not None)

    def _stop_threads(self) -> None:
        """What :meth:`close` does after it has set the shutdown event: join the background
        threads and stop the executors."""
        for thread in (self._heartbeat_sender, self._heartbeat_checker):
            if thread.is_alive() and thread is not threading.current_thread():
                thread.join()
        self._heartbeat_executor.shutdown(wait=False, cancel_futures=True)
        self._call_executor.shutdown(wait=False)

    # -- what the published client kept in private attributes, for code that reads them -----

    _COL_OWNER_NAME = COL_OWNER_NAME
    _COL_LEASE_DURATION = COL_LEASE_DURATION
    _COL_RECORD_VERSION_NUMBER = COL_RECORD_VERSION_NUMBER

    def _keep_published_attributes(self, heartbeat_period: datetime.timedelta, safe_period: datetime.timedelta,
                                   lease_duration: datetime.timedelta, expiry_period: datetime.timedelta,
                                   heartbeat_tps: float) -> None:
        schema, settings = self._schema, self._settings
        self._partition_key_name = schema.partition_key_name
        self._sort_key_name = schema.sort_key_name
        self._ttl_attribute_name = schema.ttl_attribute_name
        self._heartbeat_period = heartbeat_period
        self._safe_period = safe_period
        self._lease_duration = lease_duration
        self._expiry_period = expiry_period
        self._heartbeat_tps = heartbeat_tps
        self._heartbeat_period_s = settings.heartbeat_period
        self._lease_duration_s = settings.lease_duration
        self._expiry_period_s = settings.expiry_period

    def _get_item_from_lock(self, lock: BaseDynamoDBLock) -> Item:
        """The table item for ``lock``, in boto3's Python types."""
        return self._item_of(lock)

    def _get_lock_from_item(self, item: Mapping[str, Any]) -> BaseDynamoDBLock:
        """A :class:`BaseDynamoDBLock` describing a table item."""
        return BaseDynamoDBLock(**self._schema.lock_fields(item, self._settings.lease_duration))

    # -- the runner ------------------------------------------------------------------------

    def _run(self, protocol: Protocol[T], wake: Optional[threading.Event] = None,
             cancel: Optional[threading.Event] = None, pending: Any = None) -> T:
        """Run a protocol to its end in this thread; ``wake`` cuts its sleeps short, ``cancel``
        ends it (see ``acquire_lock``); ``pending``: the future of the call a settling protocol
        settles.

        An exception raised while performing an effect (an interrupt, a bug in a hook) is thrown
        into the protocol, which accounts for what was in flight before it lets it through.
        """
        steps = Steps(wake if wake is not None else self._shutdown, cancel, pending)
        relay_done = None
        if cancel is not None:
            steps.kick = threading.Event()
            relay_done = _relay(cancel, (steps.wake, steps.kick))
        try:
            step = self._advance(protocol, None)
            while True:
                try:
                    while not isinstance(step, Done):
                        value, steps.thrown = self._perform(step, steps)
                        step = self._advance(protocol, value, steps.thrown)
                    break
                except BaseException as exc:
                    if protocol.gi_frame is None:   # type: ignore[attr-defined]  # it came from the protocol
                        raise
                    # A Ctrl-C that landed in this loop rather than in a call: the protocol still
                    # accounts for it (a mutex it holds is given back, a write in flight undone).
                    steps.thrown = exc
                    step = self._advance(protocol, None, exc)
        finally:
            if relay_done is not None:
                relay_done.set()
        result: T = step.value
        return result

    def _perform(self, effect: Any, steps: Steps) -> Tuple[Any, Optional[BaseException]]:
        """Perform one effect: (its result, None), or (None, what it raised)."""
        try:
            if isinstance(effect, Call):
                if steps.cancel is None:
                    return self._store.send(effect.request), None
                return self._send_cancellably(effect.request, steps), None
            if isinstance(effect, Sleep):
                woken = self._clock.sleep(effect.seconds, steps.wake)
                if steps.cancel is not None and steps.cancel.is_set():
                    raise cancelled_error()
                return self._woken(steps.wake, woken), None
            if isinstance(effect, Submit):
                return self._submit_heartbeats(effect.locks), None
            if isinstance(effect, Hold):
                return effect.lock._mutex.acquire(blocking=effect.wait), None
            if isinstance(effect, Settle):
                self._settle(effect.protocol, steps, effect.follow_up)
                return None, None
            if isinstance(effect, Pending):
                return (steps.pending.result() if steps.pending is not None else None), None
            raise TypeError(f'unknown effect {effect!r}')
        except BaseException as exc:
            return None, exc

    def _send_cancellably(self, request: Any, steps: Steps) -> Any:
        """Send on a worker thread and wait for the answer or the cancel event, whichever comes
        first; a cancelled call's future is kept (``steps.inflight``) for the undo to wait on."""
        steps.kick.clear()
        future = self._call_executor.submit(self._store.send, request)
        future.add_done_callback(lambda _: steps.kick.set())
        steps.kick.wait()
        if future.done():
            return future.result()
        steps.inflight = future
        raise cancelled_error()

    def _settle(self, protocol: Protocol[None], steps: Steps, follow_up: bool) -> None:
        """Run undo or follow-up work on a thread of its own, which no interruption of the caller
        stops; wait for it (not for a ``follow_up``), except that an interrupted caller waits, for
        all its undo work, at most ``_SETTLE_GRACE`` seconds after Ctrl-C, ``_CANCEL_GRACE``
        after its ``cancel`` event was set, and leaves the rest to the background."""
        def settle() -> None:
            try:
                self._run(protocol, pending=steps.inflight)
            except BaseException:
                logger.exception('Settling an interrupted call in lock client %s failed', self._owner_name)
            finally:
                self._settling.discard(threading.current_thread())

        thread = threading.Thread(target=settle, name='DynamoDBLockClient-settle', daemon=True)
        self._settling.add(thread)
        thread.start()
        if not follow_up:
            cancelled = steps.thrown is not None and is_cancellation(steps.thrown)
            grace = self._CANCEL_GRACE if cancelled else self._SETTLE_GRACE
            thread.join(steps.settle_timeout(time.monotonic(), grace))

    def _wait_settled(self, timeout: Optional[float]) -> bool:
        """Join the settling threads, and those they start meanwhile (an undo starts its watch
        for a late landing), until there are none or ``timeout`` is spent."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while self._settling:
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                break
            for thread in list(self._settling):
                thread.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
        return not self._settling

    @staticmethod
    def _check_cancel(cancel: Optional[threading.Event], wake: Optional[threading.Event] = None) -> None:
        """Refuse a ``cancel`` (or ``wake``) that is not a thread's event, and give up at once
        when ``cancel`` is set."""
        require_thread_event('wake', wake)
        require_thread_event('cancel', cancel)
        if cancel is not None and cancel.is_set():
            raise cancelled_error()

    def _acquire(self, partition_key: PartitionKey, sort_key: str, arguments: _config.AcquireArguments,
                 app_callback: Any, raise_context_exception: bool,
                 timeout_is_error: bool, reentrant: bool = False,
                 cancel: Optional[threading.Event] = None) -> Optional[L]:
        holder = threading.current_thread()   # not get_ident(): an ident is reused by later threads
        held, waiter = self._queue(partition_key, sort_key, arguments, holder, reentrant, _Waiter)
        if held is not None:
            return held
        return self._run(self._acquisition(waiter, holder, timeout_is_error, app_callback, raise_context_exception,
                                           self._new_lock), waiter, cancel)

    def _new_lock(self, **fields: Any) -> L:
        raise NotImplementedError

    def _dispatch_callback(self, callback: Callable[..., Any], lock: Any, code: str) -> None:
        """Run ``callback(code, lock)`` on the callback executor, logging what it raises."""
        def run_callback() -> None:
            try:
                callback(code, lock)
            except Exception:
                logger.exception('app_callback(%s, %s) raised', code, lock.unique_identifier)

        self._app_callback_executor.submit(run_callback)

    # -- heartbeats ----------------------------------------------------------------------

    def _run_loop(self, name: str, make_round: Callable[[], Protocol[None]]) -> None:
        self._run(background_loop(name, self._owner_name, make_round, self._shutdown.is_set,
                                  self._settings.heartbeat_period))

    def _submit_heartbeats(self, locks: Sequence[L]) -> int:
        """Hand a group of heartbeats to a worker; returns how many were skipped as in flight."""
        due = self._take_due(locks)
        if due:
            try:
                self._heartbeat_executor.submit(self._heartbeat_task, due)
            except RuntimeError:   # the executor was shut down by close()
                self._done_with(due)
        return len(locks) - len(due)

    def _heartbeat_task(self, locks: List[L]) -> None:
        try:
            self._renew(locks)
        except Exception as exc:
            self._done_with(locks, exc)
        else:
            self._done_with(locks)

    def _renew(self, locks: Sequence[L]) -> None:
        self._run(self._renewing(locks))
