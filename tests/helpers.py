"""Shared test utilities: a hand-driven clock, recording executors, call counting, fault injection.

Import them in a test module with ``from helpers import ...`` (the tests folder is on
``sys.path`` under pytest's default import mode, as for ``conftest``).

The pieces:

* :class:`ManualClock` -- a :class:`python_dynamodb_lock._clock.Clock` whose time moves only
  when a test says so, so that timing logic (retry periods, leases, safe periods) runs in
  milliseconds and is asserted on fake time, never on wall-clock durations.
* :class:`RecordingExecutor` and :class:`CallbackRecorder` -- see what the lock client submits
  to its callback executor and which callbacks ran, on which thread, with which code.
* :class:`CallRecorder` -- a ``before-call`` botocore hook counting every DynamoDB API call a
  boto3 client makes, with the request as sent (typed DynamoDB JSON).
* :class:`FaultInjector` -- botocore hooks that make calls fail in the ways a real service
  does: canned errors (throttling, 500) for a whole call or for single HTTP attempts, requests
  that never get sent, writes whose answer is lost (with and without botocore retrying), and
  arbitrary actions run just before a call (to interleave another client's write). Every fault
  works on moto in-process and on DynamoDB Local.
* :class:`LockClients` -- lock clients for a test, closed at its end; hand-driven ones run no
  background threads, so the test renews and checks through the public seams itself.
* table helpers (:func:`put_lock_row`, :func:`read_item`, :func:`read_typed_item`,
  :func:`another_resource`) and thread helpers (:class:`BackgroundCall`, :func:`wait_until`,
  :func:`settle`).
"""
from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import json
import threading
import time
import uuid
from decimal import Decimal
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

from boto3.dynamodb.types import TypeDeserializer, TypeSerializer
from botocore.awsrequest import AWSResponse
from botocore.exceptions import ReadTimeoutError

try:  # Imported before any boto3 session is made here, so moto can patch the sessions we create.
    import moto  # noqa: F401
except ImportError:  # pragma: no cover - moto is a test requirement
    pass

from python_dynamodb_lock._embedded import default_client_config, dummy_boto3_session
from python_dynamodb_lock.python_dynamodb_lock import DynamoDBLock, DynamoDBLockClient

__all__ = [
    'REAL_TIMEOUT',
    'BackgroundCall',
    'CallRecorder',
    'CallbackCall',
    'CallbackRecorder',
    'Fault',
    'FaultInjector',
    'LockClients',
    'ManualClock',
    'RecordedCall',
    'RecordingExecutor',
    'WRITE_OPERATIONS',
    'another_resource',
    'background_threads',
    'is_registered',
    'low_level_client',
    'no_retry_backoff',
    'offline_resource',
    'put_lock_row',
    'read_item',
    'read_typed_item',
    'run_checker_round',
    'settle',
    'step',
    'wait_until',
]

#: Real seconds any helper waits for a background thread before declaring a test stuck.
REAL_TIMEOUT = 20.0

WRITE_OPERATIONS = frozenset({'PutItem', 'UpdateItem', 'DeleteItem', 'BatchWriteItem', 'TransactWriteItems'})

_MICROS = 1_000_000


# --------------------------------------------------------------------------------------------
# Time
# --------------------------------------------------------------------------------------------

class ManualClock:
    """A clock for tests: time moves only when a test advances it.

    ``monotonic()`` starts at ``start_monotonic``; ``time()`` is the wall clock, starting at
    ``start_time`` (default: the real time now, so rows written with it are not already past
    their TTL on an engine that deletes expired rows) and moving with ``monotonic()`` unless
    :meth:`shift_wall_clock` skews it. Time is kept in whole microseconds so that repeated small
    advances add up exactly.

    ``sleep(seconds, wake)`` behaves in one of three ways, chosen per thread:

    * by default the sleeper blocks (polling ``wake`` every few real milliseconds, so that
      ``close()`` still interrupts it) until another thread's :meth:`advance` brings the fake
      time to its deadline;
    * in a thread inside :meth:`auto_advance_in_current_thread` a sleep moves the clock forward
      by its own length at once (and wakes the other sleepers whose deadline that passes);
    * in a thread inside :meth:`sleeps_return_at_once_in_current_thread` a sleep returns at
      once and time does not move (to call a round method that ends with a sleep).

    Every sleep is recorded in :attr:`sleeps` as ``(thread name, seconds)``.
    """

    def __init__(self, start_monotonic: float = 1000.0, start_time: Optional[float] = None,
                 poll_interval: float = 0.002) -> None:
        self._cond = threading.Condition()
        self._now_us = round(start_monotonic * _MICROS)
        wall = time.time() if start_time is None else start_time
        self._wall_offset_us = round(wall * _MICROS) - self._now_us
        self._poll_interval = poll_interval
        self._sleepers: Dict[threading.Thread, int] = {}
        self._mode = threading.local()
        self.sleeps: List[Tuple[str, float]] = []

    # -- the Clock protocol ---------------------------------------------------------------

    def monotonic(self) -> float:
        with self._cond:
            return self._now_us / _MICROS

    def time(self) -> float:
        with self._cond:
            return (self._now_us + self._wall_offset_us) / _MICROS

    def sleep(self, seconds: float, wake: threading.Event) -> bool:
        me = threading.current_thread()
        with self._cond:
            self.sleeps.append((me.name, seconds))
        if seconds <= 0 or wake.is_set():
            return wake.is_set()
        mode = getattr(self._mode, 'value', None)
        if mode == 'at-once':
            return False
        if mode == 'auto':
            self.advance(seconds)
            return False
        with self._cond:
            deadline = self._now_us + max(1, round(seconds * _MICROS))
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

    # -- driving it -----------------------------------------------------------------------

    def advance(self, seconds: float) -> None:
        """Move both clocks forward by ``seconds``, waking the sleepers whose deadline passes."""
        if seconds < 0:
            raise ValueError('a monotonic clock never goes backwards')
        with self._cond:
            self._now_us += round(seconds * _MICROS)
            self._cond.notify_all()

    def shift_wall_clock(self, seconds: float) -> None:
        """Skew ``time()`` by ``seconds`` (either way) without touching ``monotonic()``."""
        with self._cond:
            self._wall_offset_us += round(seconds * _MICROS)

    @contextlib.contextmanager
    def auto_advance_in_current_thread(self) -> Iterator['ManualClock']:
        """Within the block, this thread's sleeps advance the clock instead of blocking."""
        previous = getattr(self._mode, 'value', None)
        self._mode.value = 'auto'
        try:
            yield self
        finally:
            self._mode.value = previous

    @contextlib.contextmanager
    def sleeps_return_at_once_in_current_thread(self) -> Iterator['ManualClock']:
        """Within the block, this thread's sleeps return at once and time stands still."""
        previous = getattr(self._mode, 'value', None)
        self._mode.value = 'at-once'
        try:
            yield self
        finally:
            self._mode.value = previous

    # -- observing it ---------------------------------------------------------------------

    def is_idle(self, thread: threading.Thread) -> bool:
        """True when ``thread`` has finished, or sleeps on this clock with a deadline still ahead."""
        if not thread.is_alive():
            return True
        with self._cond:
            deadline = self._sleepers.get(thread)
            return deadline is not None and deadline > self._now_us

    def wait_until_idle(self, threads: Iterable[threading.Thread], timeout: float = REAL_TIMEOUT) -> None:
        """Block (real time) until every thread :meth:`is_idle`; AssertionError after ``timeout``."""
        threads = list(threads)
        wait_until(lambda: all(self.is_idle(thread) for thread in threads), timeout,
                   lambda: f'threads still busy: {[t.name for t in threads if not self.is_idle(t)]}')

    def sleeps_of(self, thread_name: str) -> List[float]:
        """The lengths of the sleeps ``thread_name`` asked for, in order."""
        with self._cond:
            return [seconds for name, seconds in self.sleeps if name == thread_name]


def wait_until(predicate: Callable[[], bool], timeout: float = REAL_TIMEOUT,
               message: Callable[[], str] = lambda: 'condition not reached') -> None:
    """Poll ``predicate`` every millisecond (real time); AssertionError after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f'gave up after {timeout}s: {message()}')
        time.sleep(0.001)


# --------------------------------------------------------------------------------------------
# Callbacks and executors
# --------------------------------------------------------------------------------------------

class RecordingExecutor(concurrent.futures.Executor):
    """An executor that records each submission.

    ``inline=True`` (default) runs each function at once in the submitting thread, which keeps
    tests deterministic; ``inline=False`` keeps them until :meth:`run_pending`. After
    :meth:`shutdown`, ``submit`` raises ``RuntimeError`` like a real executor;
    :attr:`shutdown_calls` counts the shutdowns.
    """

    def __init__(self, inline: bool = True) -> None:
        self.inline = inline
        self.submissions: List[str] = []          # the submitting threads' names
        self.shutdown_calls = 0
        self._pending: List[Tuple[concurrent.futures.Future, Callable[..., Any], tuple, dict]] = []
        self._guard = threading.Lock()
        self._is_shut_down = False

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> concurrent.futures.Future:
        future: concurrent.futures.Future = concurrent.futures.Future()
        with self._guard:
            if self._is_shut_down:
                raise RuntimeError('cannot schedule new futures after shutdown')
            self.submissions.append(threading.current_thread().name)
            if not self.inline:
                self._pending.append((future, fn, args, kwargs))
                return future
        self._run(future, fn, args, kwargs)
        return future

    def run_pending(self) -> int:
        """Run what was kept (``inline=False``) in this thread; return how many ran."""
        with self._guard:
            pending, self._pending = self._pending, []
        for future, fn, args, kwargs in pending:
            self._run(future, fn, args, kwargs)
        return len(pending)

    @staticmethod
    def _run(future: concurrent.futures.Future, fn: Callable[..., Any], args: tuple, kwargs: dict) -> None:
        if not future.set_running_or_notify_cancel():
            return
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as exc:  # recorded on the future, as a real executor does
            future.set_exception(exc)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        with self._guard:
            self._is_shut_down = True
            self.shutdown_calls += 1

    @property
    def submission_count(self) -> int:
        with self._guard:
            return len(self.submissions)


@dataclasses.dataclass
class CallbackCall:
    code: str
    lock: Any
    thread: str


class CallbackRecorder:
    """An ``app_callback`` that records ``(code, lock, thread name)``; optionally raises or acts.

    :param raise_on: codes for which the callback raises ``RuntimeError`` after recording.
    :param action: run as ``action(code, lock)`` after recording (e.g. to call ``close()``).
    """

    def __init__(self, raise_on: Sequence[str] = (), action: Optional[Callable[[str, Any], Any]] = None) -> None:
        self.calls: List[CallbackCall] = []
        self.raise_on = set(raise_on)
        self.action = action
        self._guard = threading.Lock()
        self.called = threading.Event()

    def __call__(self, code: str, lock: Any) -> None:
        with self._guard:
            self.calls.append(CallbackCall(code, lock, threading.current_thread().name))
        self.called.set()
        if self.action is not None:
            self.action(code, lock)
        if code in self.raise_on:
            raise RuntimeError(f'callback told to fail on {code}')

    @property
    def codes(self) -> List[str]:
        with self._guard:
            return [call.code for call in self.calls]


# --------------------------------------------------------------------------------------------
# Watching and breaking DynamoDB calls
# --------------------------------------------------------------------------------------------

def low_level_client(client_or_resource: Any) -> Any:
    """The botocore client behind a boto3 resource, or the client itself."""
    meta = client_or_resource.meta
    return meta.client if hasattr(meta, 'client') else client_or_resource


def _operation_of(event_name: str) -> str:
    return event_name.rsplit('.', 1)[-1]


def _event(stage: str, operation: str) -> str:
    return f'{stage}.dynamodb' if operation in ('*', None) else f'{stage}.dynamodb.{operation}'


def _decode_body(body: Any) -> Dict[str, Any]:
    if isinstance(body, (bytes, bytearray)):
        body = body.decode('utf-8')
    if not body:
        return {}
    try:
        decoded = json.loads(body)
    except ValueError:
        return {}
    return decoded if isinstance(decoded, dict) else {}


@dataclasses.dataclass
class RecordedCall:
    """One DynamoDB API call: its operation, the request body as sent, who made it and when."""

    operation: str
    params: Dict[str, Any]
    thread: str
    clock_time: Optional[float]

    @property
    def is_write(self) -> bool:
        return self.operation in WRITE_OPERATIONS

    def expression_values(self) -> Dict[str, Any]:
        """``ExpressionAttributeValues`` turned into Python values."""
        deserializer = TypeDeserializer()
        return {name: deserializer.deserialize(value)
                for name, value in self.params.get('ExpressionAttributeValues', {}).items()}

    def item(self) -> Dict[str, Any]:
        """The ``Item`` of a PutItem, turned into Python values."""
        deserializer = TypeDeserializer()
        return {name: deserializer.deserialize(value) for name, value in self.params.get('Item', {}).items()}


class CallRecorder:
    """Counts every DynamoDB API call of one boto3 client or resource (not every HTTP attempt).

    It listens on ``before-call.dynamodb`` of the low-level client's event system, which sees
    each API call once, after its parameters were serialised; ``params`` holds the request body
    (typed DynamoDB JSON), e.g. ``params['ConsistentRead']``. ``clock`` (optional) stamps each
    call with the fake time. Use as a context manager, or call :meth:`stop`.
    """

    def __init__(self, client_or_resource: Any, clock: Optional[ManualClock] = None) -> None:
        self._events = low_level_client(client_or_resource).meta.events
        self._clock = clock
        self._guard = threading.Lock()
        self._calls: List[RecordedCall] = []
        self._unique_id = f'call-recorder-{uuid.uuid4().hex}'
        self._events.register('before-call.dynamodb', self._record, unique_id=self._unique_id)

    def _record(self, params: Dict[str, Any], event_name: str, **kwargs: Any) -> None:
        call = RecordedCall(
            operation=_operation_of(event_name),
            params=_decode_body(params.get('body')),
            thread=threading.current_thread().name,
            clock_time=self._clock.monotonic() if self._clock is not None else None,
        )
        with self._guard:
            self._calls.append(call)

    @property
    def calls(self) -> List[RecordedCall]:
        with self._guard:
            return list(self._calls)

    def operations(self) -> List[str]:
        return [call.operation for call in self.calls]

    def count(self, operation: Optional[str] = None) -> int:
        return sum(1 for call in self.calls if operation is None or call.operation == operation)

    def of(self, operation: str) -> List[RecordedCall]:
        return [call for call in self.calls if call.operation == operation]

    def writes(self) -> List[RecordedCall]:
        return [call for call in self.calls if call.is_write]

    def clear(self) -> None:
        with self._guard:
            self._calls.clear()

    def stop(self) -> None:
        self._events.unregister('before-call.dynamodb', unique_id=self._unique_id)

    def __enter__(self) -> 'CallRecorder':
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.stop()


@dataclasses.dataclass
class Fault:
    """One armed fault. ``times`` is how often it may still fire (None: every time)."""

    description: str
    times: Optional[int]
    when: Optional[Callable[[Dict[str, Any]], bool]] = None
    hits: int = 0
    _guard: threading.Lock = dataclasses.field(default_factory=threading.Lock, repr=False)

    def take(self, params: Dict[str, Any]) -> bool:
        """Whether to fire for a request with these (decoded) params; counts the hit."""
        if self.when is not None and not self.when(params):
            return False
        with self._guard:
            if self.times is not None and self.hits >= self.times:
                return False
            self.hits += 1
            return True

    def disarm(self) -> None:
        with self._guard:
            self.times = self.hits


class _RawBody:
    """The ``raw`` of a canned :class:`AWSResponse`."""

    def __init__(self, body: bytes) -> None:
        self._body = body

    def stream(self, **kwargs: Any) -> Iterator[bytes]:
        yield self._body


#: Where a canned per-attempt response pretends to have gone. moto's in-process stubber runs
#: after our before-send hook on the same event and ignores hosts it does not know, so pointing
#: the (per-attempt, throw-away) request here keeps moto from executing it; on a real endpoint
#: nothing is sent at all because botocore uses the canned response.
_NOWHERE = 'http://fault-injected.invalid/'


def _error_body(code: str, message: str) -> bytes:
    return json.dumps({'__type': f'com.amazonaws.dynamodb.v20120810#{code}', 'message': message}).encode()


class FaultInjector:
    """Makes the DynamoDB calls of one boto3 client or resource fail, through botocore hooks.

    ``operation`` is an API operation name (``'PutItem'``, ``'UpdateItem'``, ...) or ``'*'`` for
    all; ``times`` how many calls or attempts fail (None: all); ``when(params)`` an optional
    filter on the decoded request body. Each method returns the :class:`Fault`, whose ``hits``
    counts how often it fired. :meth:`clear` (or leaving the ``with`` block) removes them all.

    The kinds of fault:

    * :meth:`fail_calls` -- the whole API call fails with a canned error, nothing is sent, and
      botocore does not retry (``before-call``): one injected fault is one failed call as the
      lock client sees it. Default: 400 ``ProvisionedThroughputExceededException``.
    * :meth:`fail_attempts` -- single HTTP attempts get a canned error without being sent
      (``before-send``); botocore's retry logic then decides whether to try again.
    * :meth:`raise_in_attempts` -- single attempts raise an exception before being sent (e.g.
      ``EndpointConnectionError``: botocore retries connection errors).
    * :meth:`lose_answers` -- the request is executed by the engine and its (successful) answer
      is lost. ``retry=True``: botocore retries at once (``needs-retry``), so the retry meets the
      first attempt's own effect, typically as a failed condition -- what a read timeout does.
      ``retry=False``: the call raises ``ReadTimeoutError`` after the write landed (``after-call``).
    * :meth:`before_call` -- run ``action(params)`` just before the call is sent (once per API
      call), e.g. to let another client win a race.
    * :meth:`add_latency` -- sleep (real time) before each attempt is sent.
    """

    def __init__(self, client_or_resource: Any) -> None:
        self._events = low_level_client(client_or_resource).meta.events
        self._registered: List[Tuple[str, str]] = []
        self.faults: List[Fault] = []

    def _register(self, event_name: str, handler: Callable[..., Any], fault: Fault) -> Fault:
        unique_id = f'fault-{uuid.uuid4().hex}'
        self._events.register(event_name, handler, unique_id=unique_id)
        self._registered.append((event_name, unique_id))
        self.faults.append(fault)
        return fault

    def _register_before_call(self, operation: str, handler: Callable[..., Any], fault: Fault) -> Fault:
        """Hook ``before-call`` on the service-wide event, after every other handler there.

        ``before-call`` stops at the first handler that answers; registering last on the same
        event as :class:`CallRecorder` lets the recorder count the calls a fault answers.
        """
        def filtered(event_name: str, **kwargs: Any) -> Any:
            if operation not in ('*', None) and _operation_of(event_name) != operation:
                return None
            return handler(event_name=event_name, **kwargs)

        unique_id = f'fault-{uuid.uuid4().hex}'
        self._events.register_last('before-call.dynamodb', filtered, unique_id=unique_id)
        self._registered.append(('before-call.dynamodb', unique_id))
        self.faults.append(fault)
        return fault

    def fail_calls(self, operation: str = '*', code: str = 'ProvisionedThroughputExceededException',
                   status: int = 400, message: str = 'injected fault', times: Optional[int] = 1,
                   when: Optional[Callable[[Dict[str, Any]], bool]] = None) -> Fault:
        fault = Fault(f'{operation}: whole call fails with {status} {code}', times, when)

        def handler(params: Dict[str, Any], **kwargs: Any) -> Optional[Tuple[AWSResponse, Dict[str, Any]]]:
            if not fault.take(_decode_body(params.get('body'))):
                return None
            http = AWSResponse(params.get('url', _NOWHERE), status, {'x-amzn-requestid': 'injected'},
                               _RawBody(_error_body(code, message)))
            parsed = {
                'Error': {'Code': code, 'Message': message},
                'ResponseMetadata': {'HTTPStatusCode': status, 'HTTPHeaders': {}, 'RetryAttempts': 0},
            }
            return http, parsed

        return self._register_before_call(operation, handler, fault)

    def fail_attempts(self, operation: str = '*', code: str = 'ProvisionedThroughputExceededException',
                      status: int = 400, message: str = 'injected fault', times: Optional[int] = 1,
                      when: Optional[Callable[[Dict[str, Any]], bool]] = None) -> Fault:
        fault = Fault(f'{operation}: attempts fail with {status} {code}', times, when)

        def handler(request: Any, **kwargs: Any) -> Optional[AWSResponse]:
            if not fault.take(_decode_body(request.body)):
                return None
            request.url = _NOWHERE
            return AWSResponse(_NOWHERE, status, {'x-amzn-requestid': 'injected'},
                               _RawBody(_error_body(code, message)))

        return self._register(_event('before-send', operation), handler, fault)

    def raise_in_attempts(self, operation: str, exception: Callable[[], BaseException],
                          times: Optional[int] = 1,
                          when: Optional[Callable[[Dict[str, Any]], bool]] = None) -> Fault:
        fault = Fault(f'{operation}: attempts raise before sending', times, when)

        def handler(request: Any, **kwargs: Any) -> None:
            if fault.take(_decode_body(request.body)):
                raise exception()

        return self._register(_event('before-send', operation), handler, fault)

    def lose_answers(self, operation: str, times: Optional[int] = 1, retry: bool = True,
                     when: Optional[Callable[[Dict[str, Any]], bool]] = None,
                     between: Optional[Callable[[], Any]] = None) -> Fault:
        """See the class docstring; ``between()`` (with ``retry=True``) runs after the answer was
        lost and before botocore's retry, e.g. to let another client write in that gap."""
        how = 'botocore retries' if retry else 'ReadTimeoutError raised'
        fault = Fault(f'{operation}: the answer is lost after the write landed ({how})', times, when)
        if retry:
            def retry_handler(response: Any, attempts: int, caught_exception: Any,
                              request_dict: Dict[str, Any], **kwargs: Any) -> Optional[int]:
                if caught_exception is not None or response is None or response[0].status_code >= 300:
                    return None
                if not fault.take(_decode_body(request_dict.get('body'))):
                    return None
                if between is not None:
                    between()
                return 0   # retry at once, as after a read timeout

            return self._register(_event('needs-retry', operation), retry_handler, fault)

        def raising_handler(http_response: Any, **kwargs: Any) -> None:
            if http_response.status_code < 300 and fault.take({}):
                raise ReadTimeoutError(endpoint_url='injected-lost-answer')

        return self._register(_event('after-call', operation), raising_handler, fault)

    def before_call(self, operation: str, action: Callable[[Dict[str, Any]], Any], times: Optional[int] = 1,
                    when: Optional[Callable[[Dict[str, Any]], bool]] = None) -> Fault:
        fault = Fault(f'{operation}: action before the call', times, when)

        def handler(params: Dict[str, Any], **kwargs: Any) -> None:
            body = _decode_body(params.get('body'))
            if fault.take(body):
                action(body)

        return self._register_before_call(operation, handler, fault)

    def add_latency(self, operation: str, seconds: float, times: Optional[int] = None) -> Fault:
        fault = Fault(f'{operation}: {seconds}s latency', times)

        def handler(request: Any, **kwargs: Any) -> None:
            if fault.take({}):
                time.sleep(seconds)

        return self._register(_event('before-send', operation), handler, fault)

    def clear(self) -> None:
        for event_name, unique_id in self._registered:
            self._events.unregister(event_name, unique_id=unique_id)
        self._registered.clear()

    def __enter__(self) -> 'FaultInjector':
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.clear()


# --------------------------------------------------------------------------------------------
# Lock clients
# --------------------------------------------------------------------------------------------

def run_checker_round(client: DynamoDBLockClient, clock: ManualClock) -> None:
    """One pass of the heartbeat checker (what the background checker does each period)."""
    client.check_locks()


def background_threads(client: DynamoDBLockClient) -> List[threading.Thread]:
    """The client's background threads that were started."""
    return [thread for thread in (client._heartbeat_sender, client._heartbeat_checker) if thread.ident is not None]


class LockClients:
    """Makes lock clients for one test and closes them all at its end.

    :param engine: the ``EngineTable`` the clients use (table name and default resource).
    :param clock: the clock handed to every client (a fresh :class:`ManualClock` by default).
    """

    def __init__(self, engine: Any = None, clock: Optional[ManualClock] = None) -> None:
        self.engine = engine
        self.clock = clock if clock is not None else ManualClock()
        self.clients: List[DynamoDBLockClient] = []

    def make(self, resource: Any = None, *, hand_driven: bool = True, **kwargs: Any) -> DynamoDBLockClient:
        """A new client; defaults: the engine's table and resource, this clock, and an inline
        :class:`RecordingExecutor` for callbacks. A hand-driven client runs no background
        threads (``background_heartbeats=False``): the test renews with ``send_heartbeats`` and
        checks with ``check_locks``. Real (not hand-driven) clients on a :class:`ManualClock` are
        returned once both background threads sleep on it."""
        if resource is None:
            resource = self.engine.resource
        if self.engine is not None:
            kwargs.setdefault('table_name', self.engine.table_name)
        kwargs.setdefault('clock', self.clock)
        kwargs.setdefault('app_callback_executor', RecordingExecutor())
        if hand_driven:
            kwargs.setdefault('background_heartbeats', False)
        client = DynamoDBLockClient(resource, **kwargs)
        self.clients.append(client)
        clock = kwargs['clock']
        if not hand_driven and isinstance(clock, ManualClock):
            clock.wait_until_idle(background_threads(client))
        return client

    __call__ = make

    def close_all(self) -> None:
        for client in self.clients:
            client.close()
        for client in self.clients:
            for thread in background_threads(client):
                thread.join(REAL_TIMEOUT)


def settle(clock: ManualClock, *clients: DynamoDBLockClient, threads: Iterable[threading.Thread] = (),
           timeout: float = REAL_TIMEOUT) -> None:
    """Wait (real time) until the fake present has been fully processed.

    That is: the clients' background threads and ``threads`` have finished or sleep on
    ``clock`` with a deadline still ahead, and no heartbeat of the clients is in flight.
    """
    watched = [thread for client in clients for thread in background_threads(client)] + list(threads)

    def busy() -> List[str]:
        names = [thread.name for thread in watched if not clock.is_idle(thread)]
        names += [f'{client._owner_name}: heartbeat in flight' for client in clients
                  if client._heartbeats_in_flight]
        return names

    wait_until(lambda: not busy(), timeout, lambda: f'still busy: {busy()}')


def step(clock: ManualClock, seconds: float, *clients: DynamoDBLockClient,
         threads: Iterable[threading.Thread] = (), by: float = 1.0) -> None:
    """Advance ``clock`` by ``seconds`` in steps of ``by``, letting everything :func:`settle` after each.

    Settling first means that work due at the current fake time is done before time moves.
    """
    settle(clock, *clients, threads=threads)
    for _ in range(round(seconds / by)):
        clock.advance(by)
        settle(clock, *clients, threads=threads)


class BackgroundCall:
    """Runs ``fn(*args, **kwargs)`` in a daemon thread; :meth:`result` joins and returns or raises."""

    def __init__(self, fn: Callable[..., Any], *args: Any, name: Optional[str] = None, **kwargs: Any) -> None:
        self._value: Any = None
        self._error: Optional[BaseException] = None
        self.thread = threading.Thread(target=self._run, args=(fn, args, kwargs),
                                       name=name or f'background-{fn.__name__}', daemon=True)
        self.thread.start()

    def _run(self, fn: Callable[..., Any], args: tuple, kwargs: dict) -> None:
        try:
            self._value = fn(*args, **kwargs)
        except BaseException as exc:
            self._error = exc

    @property
    def done(self) -> bool:
        return not self.thread.is_alive()

    def result(self, timeout: float = REAL_TIMEOUT) -> Any:
        self.thread.join(timeout)
        if self.thread.is_alive():
            raise AssertionError(f'{self.thread.name} did not return within {timeout}s')
        if self._error is not None:
            raise self._error
        return self._value

    def error(self, timeout: float = REAL_TIMEOUT) -> Optional[BaseException]:
        """Join; return the exception raised (None when it returned normally)."""
        self.thread.join(timeout)
        if self.thread.is_alive():
            raise AssertionError(f'{self.thread.name} did not return within {timeout}s')
        return self._error


# --------------------------------------------------------------------------------------------
# Tables
# --------------------------------------------------------------------------------------------

_session_guard = threading.Lock()
_session: Any = None


def another_resource(engine: Any) -> Any:
    """A second boto3 resource on the engine of ``engine`` (its own client and event hooks)."""
    global _session
    with _session_guard:
        if _session is None:
            _session = dummy_boto3_session()
        return _session.resource('dynamodb', endpoint_url=engine.endpoint_url, config=default_client_config())


def offline_resource() -> Any:
    """A boto3 resource pointing at a closed port on 127.0.0.1, for tests that must make no
    call at all (a call would fail with a connection error, and a CallRecorder still sees it)."""
    global _session
    with _session_guard:
        if _session is None:
            _session = dummy_boto3_session()
        return _session.resource('dynamodb', endpoint_url='http://127.0.0.1:9', config=default_client_config())


def no_retry_backoff(monkeypatch: Any) -> None:
    """Make botocore retry at once instead of sleeping its exponential backoff (this test only)."""
    import botocore.endpoint

    class _NoSleep:
        @staticmethod
        def sleep(seconds: float) -> None:
            return None

    monkeypatch.setattr(botocore.endpoint, 'time', _NoSleep)


def put_lock_row(engine: Any, partition_key: str, sort_key: str = '-', *, owner_name: str = 'someone-else',
                 lease_duration: Any = 30, record_version_number: Optional[str] = None,
                 expiry_time: Optional[int] = None, extra: Optional[Dict[str, Any]] = None,
                 table_name: Optional[str] = None) -> Dict[str, Any]:
    """Write a lock row directly (through ``engine.client``, bypassing any lock client), the
    way another process holding the lock would have; returns the item as Python values.

    ``expiry_time`` defaults to one hour from the real time now.
    """
    item: Dict[str, Any] = dict(extra or {})
    item.update({
        'lock_key': partition_key,
        'sort_key': sort_key,
        'owner_name': owner_name,
        'lease_duration': Decimal(str(lease_duration)),
        'record_version_number': record_version_number or str(uuid.uuid4()),
        'expiry_time': int(time.time() + 3600) if expiry_time is None else int(expiry_time),
    })
    serializer = TypeSerializer()
    engine.client.put_item(TableName=table_name or engine.table_name,
                           Item={name: serializer.serialize(value) for name, value in item.items()})
    return item


def read_typed_item(engine: Any, partition_key: str, sort_key: str = '-',
                    table_name: Optional[str] = None) -> Optional[Dict[str, Any]]:
    """The row as stored (typed DynamoDB JSON), by a consistent read; None when absent."""
    response = engine.client.get_item(TableName=table_name or engine.table_name,
                                      Key={'lock_key': {'S': partition_key}, 'sort_key': {'S': sort_key}},
                                      ConsistentRead=True)
    return response.get('Item')


def read_item(engine: Any, partition_key: str, sort_key: str = '-',
              table_name: Optional[str] = None) -> Optional[Dict[str, Any]]:
    """The row as Python values, by a consistent read; None when absent."""
    typed = read_typed_item(engine, partition_key, sort_key, table_name)
    if typed is None:
        return None
    deserializer = TypeDeserializer()
    return {name: deserializer.deserialize(value) for name, value in typed.items()}


def is_registered(client: DynamoDBLockClient, lock: DynamoDBLock) -> bool:
    """Whether ``client`` heartbeats this very lock object."""
    return any(held is lock for held in client.held_locks())


def steal_row(engine: Any, key: str, owner: str = 'thief') -> str:
    """Another client takes the row over (new version and owner); returns the new version."""
    version = str(uuid.uuid4())
    engine.client.update_item(
        TableName=engine.table_name, Key={'lock_key': {'S': key}, 'sort_key': {'S': '-'}},
        UpdateExpression='SET record_version_number = :v, owner_name = :o',
        ExpressionAttributeValues={':v': {'S': version}, ':o': {'S': owner}})
    return version
