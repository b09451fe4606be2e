"""The threaded client's driver: how it performs the core's effects with threads.

:class:`ThreadDriver` sends a request (on a worker thread when the call can be cancelled),
sleeps on an event, takes a lock's mutex, runs undo work on a thread of its own, and keeps the
two background threads, the heartbeat workers and the callback executor. It makes no
decision: every protocol it runs comes from the orchestration and the core.
"""
from __future__ import annotations

import concurrent.futures
import logging
import threading
import time
from typing import Any, Callable, List, Optional, Sequence, Set, Tuple, TypeVar

from .._core.effects import Call, Drop, Hold, Pending, Protocol, Settle, Sleep, Submit
from .._core.heartbeat import background_loop
from .._core.effects import Effect
from .._core.stepper import Done, advance
from .._core.write import AcquireAttempt
from .._model.errors import DynamoDBLockError, cancelled_error, is_cancellation
from .._common.locks import HeldLock
from .._common.registry import WaiterState
from .._wire.requests import Request
from .._model.validation import require_thread_event
from .steps import CANCEL_GRACE, SETTLE_GRACE, Host, Steps, hand_off, woken
from .thread_transport import ThreadTransport

__all__ = ['ThreadDriver']

logger = logging.getLogger('python_dynamodb_lock.python_dynamodb_lock')

T = TypeVar('T')

#: Real seconds between two looks, by the thread that watches an acquisition's ``cancel`` event,
#: at whether the acquisition is over (a ``threading.Event`` set meanwhile wakes it at once).
_CANCEL_POLL = 0.05


class Waiter(WaiterState, threading.Event):
    """An acquisition waiting in this client: woken (and maybe handed the lock) by a release."""

    def __init__(self, attempt: AcquireAttempt) -> None:
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


def check_cancel(cancel: Optional[threading.Event], wake: Optional[threading.Event] = None) -> None:
    """Refuse a ``cancel`` (or ``wake``) that is not a thread's event, and give up at once when
    ``cancel`` is set."""
    require_thread_event('wake', wake)
    require_thread_event('cancel', cancel)
    if cancel is not None and cancel.is_set():
        raise cancelled_error()


class ThreadDriver:
    """Runs protocols in threads (see the module docstring). Made with its transport, the
    number of heartbeat workers and the callback executor; :meth:`serve` gives it the client
    it runs protocols for, and starts the background threads."""

    #: Seconds a caller interrupted by Ctrl-C waits, in all, for the undo of what it left in
    #: flight before it leaves the rest to the background.
    settle_grace = SETTLE_GRACE
    #: The same for a caller whose ``cancel`` event was set: it answers within about 50 ms.
    cancel_grace = CANCEL_GRACE

    def __init__(self, transport: ThreadTransport, workers: int,
                 callback_executor: concurrent.futures.Executor) -> None:
        self.transport = transport
        self.shutdown = threading.Event()
        self.settling: Set[threading.Thread] = set()   # undo work of interrupted calls, until it is done
        self._callback_executor = callback_executor
        # Calls of acquisitions that can be cancelled (acquire_lock(cancel=...)) are sent here,
        # so that the caller can stop waiting for an answer; threads start only when used.
        self._call_executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=workers, thread_name_prefix='DynamoDBLockClient-call')
        self._heartbeat_executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=workers, thread_name_prefix='DynamoDBLockClient-heartbeat')
        self._background: Tuple[threading.Thread, ...] = ()

    def serve(self, host: Host, heartbeat_period: float, background_heartbeats: bool) -> None:
        self._host = host
        self._local = {**host.local, Drop: _drop}
        self._public_error = host.public_error
        self._heartbeat_period = heartbeat_period
        self._background = (
            threading.Thread(target=self._run_loop, args=('heartbeat sender', host.heartbeat_round),
                             name='DynamoDBLockClient-heartbeat-sender', daemon=True),
            threading.Thread(target=self._run_loop, args=('heartbeat checker', host.checker_round),
                             name='DynamoDBLockClient-heartbeat-checker', daemon=True),
        )
        if background_heartbeats:
            for thread in self._background:
                thread.start()

    @property
    def background_threads(self) -> Tuple[threading.Thread, ...]:
        return tuple(thread for thread in self._background if thread.ident is not None)

    def stop(self) -> None:
        """What ``close()`` does after the shutdown event was set: join the background threads
        and stop the executors."""
        for thread in self._background:
            if thread.is_alive() and thread is not threading.current_thread():
                thread.join()
        self._heartbeat_executor.shutdown(wait=False, cancel_futures=True)
        self._call_executor.shutdown(wait=False)

    # -- running a protocol ------------------------------------------------------------------

    def run(self, protocol: Protocol[T], wake: Optional[threading.Event] = None,
            cancel: Optional[threading.Event] = None, pending: Optional[concurrent.futures.Future[Any]] = None) -> T:
        """Run a protocol to its end in this thread; ``wake`` cuts its sleeps short, ``cancel``
        ends it (see ``acquire_lock``); ``pending``: the future of the call a settling protocol
        settles.

        An exception raised while performing an effect (an interrupt, a bug in a hook) is thrown
        into the protocol, which accounts for what was in flight before it lets it through.
        """
        steps = Steps(wake if wake is not None else self.shutdown, cancel, pending)
        relay_done = None
        if cancel is not None:
            steps.kick = threading.Event()
            relay_done = _relay(cancel, (steps.wake, steps.kick))
        local = self._local
        try:
            step = None
            while True:
                try:
                    if step is None:     # a protocol may refuse before its first effect
                        step = advance(protocol, None, None, local)
                    while not isinstance(step, Done):
                        value, steps.thrown = self._perform(step, steps)
                        step = advance(protocol, value, steps.thrown, local)
                    break
                except DynamoDBLockError as error:
                    self._public_error(error)   # the holder described as a BaseDynamoDBLock
                    raise
                except BaseException as exc:
                    if protocol.gi_frame is None:   # type: ignore[attr-defined]  # it came from the protocol
                        raise
                    # A Ctrl-C that landed in this loop rather than in a call: the protocol still
                    # accounts for it (a mutex it holds is given back, a write in flight undone).
                    steps.thrown = exc
                    step = advance(protocol, None, exc, local)
        finally:
            if relay_done is not None:
                relay_done.set()
        result: T = step.value
        return result

    def _perform(self, effect: Effect, steps: Steps) -> Tuple[Any, Optional[BaseException]]:
        """Perform one effect: (its result, None), or (None, what it raised)."""
        try:
            if isinstance(effect, Call):
                if steps.cancel is None:
                    return self.transport.send(effect.request), None
                return self._send_cancellably(effect.request, steps), None
            if isinstance(effect, Sleep):
                was_woken = self._host.clock.sleep(effect.seconds, steps.wake)
                if steps.cancel is not None and steps.cancel.is_set():
                    raise cancelled_error()
                return woken(steps.wake, was_woken, self.shutdown), None
            if isinstance(effect, Submit):
                return self._submit_heartbeats(effect.locks), None
            if isinstance(effect, Hold):
                return effect.lock.thread_lock.acquire(blocking=effect.wait), None
            if isinstance(effect, Settle):
                self._settle(effect.protocol, steps, effect.follow_up)
                return None, None
            if isinstance(effect, Pending):
                return (steps.pending.result() if steps.pending is not None else None), None
            raise TypeError(f'unknown effect {effect!r}')
        except BaseException as exc:
            return None, exc

    def _send_cancellably(self, request: Request, steps: Steps) -> Any:
        """Send on a worker thread and wait for the answer or the cancel event, whichever comes
        first; a cancelled call's future is kept (``steps.inflight``) for the undo to wait on."""
        steps.kick.clear()
        future = self._call_executor.submit(self.transport.send, request)
        future.add_done_callback(lambda _: steps.kick.set())
        steps.kick.wait()
        if future.done():
            return future.result()
        steps.inflight = future
        raise cancelled_error()

    def _settle(self, protocol: Protocol[None], steps: Steps, follow_up: bool) -> None:
        """Run undo or follow-up work on a thread of its own, which no interruption of the caller
        stops; wait for it (not for a ``follow_up``), except that an interrupted caller waits, for
        all its undo work, at most ``settle_grace`` seconds after Ctrl-C, ``cancel_grace``
        after its ``cancel`` event was set, and leaves the rest to the background."""
        def settle() -> None:
            try:
                self.run(protocol, pending=steps.inflight)
            except BaseException:
                logger.exception('Settling an interrupted call in lock client %s failed', self._host.owner_name)
            finally:
                self.settling.discard(threading.current_thread())

        thread = threading.Thread(target=settle, name='DynamoDBLockClient-settle', daemon=True)
        self.settling.add(thread)
        thread.start()
        wait = hand_off(follow_up, steps, time.monotonic(), steps.thrown is not None and is_cancellation(steps.thrown),
                        self.cancel_grace, self.settle_grace)
        if wait.waits:
            thread.join(wait.timeout)

    def wait_settled(self, timeout: Optional[float]) -> bool:
        """Join the settling threads, and those they start meanwhile (an undo starts its watch
        for a late landing), until there are none or ``timeout`` is spent."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.settling:
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                break
            for thread in list(self.settling):
                thread.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
        return not self.settling

    # -- callbacks and heartbeats ------------------------------------------------------------

    def dispatch_callback(self, callback: Callable[..., Any], lock: HeldLock, code: str) -> None:
        """Run ``callback(code, lock)`` on the callback executor, logging what it raises."""
        def run_callback() -> None:
            try:
                callback(code, lock)
            except Exception:
                logger.exception('app_callback(%s, %s) raised', code, lock.unique_identifier)

        self._callback_executor.submit(run_callback)

    def _run_loop(self, name: str, make_round: Callable[[], Protocol[None]]) -> None:
        self.run(background_loop(name, self._host.owner_name, make_round, self.shutdown.is_set,
                                 self._heartbeat_period))

    def _submit_heartbeats(self, locks: Sequence[Any]) -> int:
        """Hand a group of heartbeats to a worker; returns how many were skipped as in flight."""
        due = self._host.take_due(locks)
        if due:
            try:
                self._heartbeat_executor.submit(self._heartbeat_task, due)
            except RuntimeError:   # the executor was shut down by close()
                self._host.done_with(due)
        return len(locks) - len(due)

    def _heartbeat_task(self, locks: List[Any]) -> None:
        try:
            self.renew(locks)
        except Exception as exc:
            self._host.done_with(locks, exc)
        else:
            self._host.done_with(locks)

    def renew(self, locks: Sequence[Any]) -> None:
        """Renew a group of locks in this thread."""
        self.run(self._host.renewals(locks))


def _drop(effect: Drop) -> None:
    """Give a lock's mutex back (``Drop``: no I/O, performed on the way)."""
    effect.lock.thread_lock.release()
