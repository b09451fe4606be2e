"""Test utilities specific to this suite; the general ones come from ``python_dynamodb_lock.testing``.

Import them in a test module with ``from helpers import ...`` (the tests folder is on
``sys.path`` under pytest's default import mode, as for ``conftest``).

From :mod:`python_dynamodb_lock.testing` (re-exported here for the tests' convenience):
:class:`ManualClock`, :class:`CallRecorder`, :class:`FaultInjector`, :class:`CallbackRecorder`,
:func:`wait_until` and their small companions.

Specific to this suite:

* :class:`LockClients` -- lock clients of the test's kind (threaded, or the asyncio client
  behind :class:`aio_facade.BlockingAsyncClient`), closed at the end of the test;
  hand-driven ones run no background threads or tasks, so the test renews and checks through
  the public seams itself.
* :class:`RecordingExecutor` -- an executor that records what the client submits to it.
* :func:`settle`, :func:`step`, :func:`background_threads`, :func:`run_checker_round`,
  :func:`is_registered`, :func:`current_actor_name` -- driving and observing clients of either
  kind on a :class:`ManualClock`.
* :class:`BackgroundCall` -- run a blocking call in a thread.
* :func:`offline_resource`, :func:`no_retry_backoff`, :func:`holding_lock_mutex`,
  :func:`rewrite_batch_answers`.
* :func:`attribute_names_in`, :func:`assigned_values` -- reading a request's expressions
  whatever goes through ``ExpressionAttributeNames`` (an application's names) and whatever is
  written directly (this package's own); :func:`readable_expression` (from
  :mod:`python_dynamodb_lock.testing`) gives a whole expression so.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import re
import threading
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Tuple

try:  # Imported before any boto3 session is made here, so moto can patch the sessions we create.
    import moto  # noqa: F401
except ImportError:  # pragma: no cover - moto is a test requirement
    pass

from python_dynamodb_lock.python_dynamodb_lock import DynamoDBLockClient
from python_dynamodb_lock.testing import (
    readable_expression,
    REAL_TIMEOUT,
    CallbackCall,
    CallbackRecorder,
    CallRecorder,
    Fault,
    FaultInjector,
    ManualClock,
    RecordedCall,
    default_client_config,
    dummy_boto3_session,
    wait_until,
)

__all__ = [
    'ASYNCIO',
    'HoldAnswer',
    'HoldBack',
    'REAL_TIMEOUT',
    'THREADED',
    'assigned_values',
    'attribute_names_in',
    'readable_expression',
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
    'background_threads',
    'callback_thread_prefix',
    'current_actor_name',
    'holding_lock_mutex',
    'is_asyncio',
    'is_registered',
    'no_retry_backoff',
    'offline_resource',
    'rewrite_batch_answers',
    'run_checker_round',
    'settle',
    'step',
    'wait_until',
]

# --------------------------------------------------------------------------------------------
# Reading requests
# --------------------------------------------------------------------------------------------

_PLACEHOLDER = re.compile(r'#\w+')
_WORD = re.compile(r'(?<![#:\w])[A-Za-z_]\w*')
_FUNCTIONS = frozenset({'SET', 'REMOVE', 'ADD', 'DELETE', 'AND', 'OR', 'NOT', 'IN', 'BETWEEN', 'if_not_exists',
                        'attribute_exists', 'attribute_not_exists', 'attribute_type', 'begins_with', 'contains',
                        'size', 'list_append'})


def attribute_names_in(params: Dict[str, Any], field: str = 'UpdateExpression') -> set:
    """The attribute names ``params[field]`` reads or writes (placeholders resolved; the first
    element of a document path)."""
    names = params.get('ExpressionAttributeNames') or {}
    text = re.sub(r'\.[#\w]+', '', params.get(field) or '')      # nested path elements aside
    found = {names[token] for token in _PLACEHOLDER.findall(text) if token in names}
    return found | {word for word in _WORD.findall(_PLACEHOLDER.sub(' ', text)) if word not in _FUNCTIONS}


def assigned_values(params: Dict[str, Any]) -> Dict[str, Any]:
    """``{attribute name: value}`` for each ``name = :placeholder`` of an UpdateExpression's SET clause."""
    text = readable_expression(params).split(' REMOVE ')[0]
    values = params.get('ExpressionAttributeValues') or {}
    return {name: values[placeholder] for name, placeholder in re.findall(r'([\w.]+) = (:\w+)(?=,|$)', text)
            if placeholder in values}


#: The kinds of lock client the behavioural tests run against.
THREADED = 'threaded'
ASYNCIO = 'asyncio'


# --------------------------------------------------------------------------------------------
# Callbacks and executors
# --------------------------------------------------------------------------------------------

class RecordingExecutor(concurrent.futures.Executor):
    """An executor that records each submission.

    ``inline=True`` (default) runs each function at once in the submitting thread (for the
    asyncio client: on its event loop thread), which keeps tests deterministic;
    ``inline=False`` keeps them until :meth:`run_pending`. After :meth:`shutdown`, ``submit``
    raises ``RuntimeError`` like a real executor; :attr:`shutdown_calls` counts the shutdowns.
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


def callback_thread_prefix(client: Any) -> str:
    """The name prefix of the threads of the callback executor a client creates by default."""
    return 'AsyncDynamoDBLockClient-callback' if is_asyncio(client) else 'DynamoDBLockClient-callback'


# --------------------------------------------------------------------------------------------
# Lock clients of either kind
# --------------------------------------------------------------------------------------------

def is_asyncio(client: Any) -> bool:
    from aio_facade import BlockingAsyncClient

    return isinstance(client, BlockingAsyncClient)


def background_threads(client: Any) -> List[Any]:
    """The client's background workers that were started: the threaded client's two threads,
    or the asyncio client's tasks (as :class:`aio_facade.TaskHandle`, with ``name``,
    ``is_alive()`` and ``join()``)."""
    if is_asyncio(client):
        tasks: List[Any] = client.background_tasks()
        return tasks
    return list(client.background_threads)


def _actors(workers: Iterable[Any]) -> List[Any]:
    """Threads and tasks, as a ManualClock knows them."""
    return [getattr(worker, 'task', worker) for worker in workers]


def current_actor_name() -> str:
    """The name of the asyncio task running this code, or else of the thread."""
    try:
        task = asyncio.current_task()
    except RuntimeError:
        task = None
    return task.get_name() if task is not None else threading.current_thread().name


def run_checker_round(client: Any, clock: ManualClock) -> None:
    """One pass of the heartbeat checker (what the background checker does each period)."""
    client.check_locks()


def is_registered(client: Any, lock: Any) -> bool:
    """Whether ``client`` heartbeats this very lock object."""
    return any(held is lock for held in client.held_locks())


class LockClients:
    """Makes lock clients of one kind for one test, and closes them all at its end.

    :param engine: the :class:`~python_dynamodb_lock.testing.LockTable` the clients use (table
        name and default resource).
    :param clock: the clock handed to every client (a fresh :class:`ManualClock` by default).
    :param kind: ``'threaded'`` (``DynamoDBLockClient``) or ``'asyncio'``
        (``AsyncDynamoDBLockClient`` behind :class:`aio_facade.BlockingAsyncClient`, on an
        event loop of this factory's own).
    """

    def __init__(self, engine: Any = None, clock: Optional[ManualClock] = None, kind: str = THREADED) -> None:
        if kind not in (THREADED, ASYNCIO):
            raise ValueError(f'unknown client kind {kind!r}')
        self.engine = engine
        self.kind = kind
        self.clock = clock if clock is not None else ManualClock()
        self.clients: List[Any] = []
        self._runner: Any = None

    @property
    def runner(self) -> Any:
        """The event loop thread of the asyncio clients (started on first use)."""
        if self._runner is None:
            from aio_facade import EventLoopThread

            self._runner = EventLoopThread()
        return self._runner

    def make(self, resource: Any = None, *, hand_driven: bool = True, **kwargs: Any) -> Any:
        """A new client; defaults: the engine's table and resource, this clock, and an inline
        :class:`RecordingExecutor` for callbacks. A hand-driven client runs no background
        threads or tasks (``background_heartbeats=False``): the test renews with
        ``send_heartbeats`` and checks with ``check_locks``. Real (not hand-driven) clients on a
        :class:`ManualClock` are returned once both background workers sleep on it."""
        if resource is None and self.engine is not None:
            resource = self.engine.resource
        if self.engine is not None:
            kwargs.setdefault('table_name', self.engine.table_name)
        kwargs.setdefault('clock', self.clock)
        kwargs.setdefault('app_callback_executor', RecordingExecutor())
        if hand_driven:
            kwargs.setdefault('background_heartbeats', False)
        if self.kind == ASYNCIO:
            from aio_facade import BlockingAsyncClient

            client: Any = BlockingAsyncClient(resource, self.runner, **kwargs)
        else:
            client = DynamoDBLockClient(resource, **kwargs)
        self.clients.append(client)
        clock = kwargs['clock']
        if not hand_driven and isinstance(clock, ManualClock):
            clock.wait_until_idle(_actors(background_threads(client)))
        return client

    __call__ = make

    def close_all(self) -> None:
        try:
            for client in self.clients:
                client.close()
            for client in self.clients:
                for worker in background_threads(client):
                    worker.join(REAL_TIMEOUT)
        finally:
            if self._runner is not None:
                self._runner.close()


def settle(clock: ManualClock, *clients: Any, threads: Iterable[threading.Thread] = (),
           timeout: float = REAL_TIMEOUT) -> None:
    """Wait (real time) until the fake present has been fully processed.

    That is: the clients' background threads or tasks, and ``threads``, have finished or sleep
    on ``clock`` with a deadline still ahead, and no heartbeat of the clients is in flight.
    """
    watched = [worker for client in clients for worker in background_threads(client)] + list(threads)

    def busy() -> List[str]:
        names = [worker.name for worker, actor in zip(watched, _actors(watched)) if not clock.is_idle(actor)]
        names += [f'{client}: heartbeat in flight' for client in clients if client.heartbeats_in_flight]
        return names

    wait_until(lambda: not busy(), timeout, lambda: f'still busy: {busy()}')


def step(clock: ManualClock, seconds: float, *clients: Any, threads: Iterable[threading.Thread] = (),
         by: float = 1.0) -> None:
    """Advance ``clock`` by ``seconds`` in steps of ``by``, letting everything :func:`settle` after each.

    Settling first means that work due at the current fake time is done before time moves.
    """
    settle(clock, *clients, threads=threads)
    for _ in range(round(seconds / by)):
        clock.advance(by)
        settle(clock, *clients, threads=threads)


def advance_until_done(clock: ManualClock, call: 'BackgroundCall', limit: float, by: float = 1.0) -> float:
    """Advance ``clock`` by ``by`` at a time, letting ``call`` settle before each step, until it is
    done or ``limit`` seconds have passed; return the seconds that passed."""
    started = clock.monotonic()
    while not call.done and clock.monotonic() - started < limit:
        settle(clock, threads=[call.thread])
        clock.advance(by)
    return clock.monotonic() - started


@contextlib.contextmanager
def holding_lock_mutex(lock: Any) -> Iterator[None]:
    """Hold the per-lock mutex a release holds while it runs (the threaded lock's
    ``thread_lock``, the asyncio lock's ``asyncio.Lock``), as if a release were under way."""
    facade = lock.lock_client
    if not is_asyncio(facade):
        assert lock.thread_lock.acquire(timeout=5)
        try:
            yield
        finally:
            lock.thread_lock.release()
        return
    mutex = lock.task_lock

    async def take() -> None:
        await mutex.acquire()

    async def give_back() -> None:
        mutex.release()

    facade._runner.run(take())
    try:
        yield
    finally:
        facade._runner.run(give_back())


def rewrite_batch_answers(client: Any, monkeypatch: Any,
                          rewrite: Callable[[List[Dict[str, Any]], Callable[[List[Dict[str, Any]]], Dict[str, Any]]],
                                            Dict[str, Any]]) -> None:
    """Route the lock client's BatchExecuteStatement calls through ``rewrite(statements, send)``.

    ``rewrite`` gets the statements and a function sending a (possibly changed) list of
    statements to the engine; it returns the response the lock client should see. For the
    asyncio client it runs in a worker thread, ``send`` going through the event loop.
    """
    if not is_asyncio(client):
        low_level = client._dynamodb_resource.meta.client  # private: published 0.9.1 attribute
        real_call = low_level.batch_execute_statement

        def call(Statements: List[Dict[str, Any]]) -> Dict[str, Any]:
            return rewrite(Statements, lambda statements: real_call(Statements=statements))

        monkeypatch.setattr(low_level, 'batch_execute_statement', call)
        return
    dynamodb = client.dynamodb      # the aiobotocore client the facade gave the asyncio client
    real_async_call = dynamodb.batch_execute_statement
    loop = client._runner.loop

    def send(statements: List[Dict[str, Any]]) -> Dict[str, Any]:
        answer: Dict[str, Any] = asyncio.run_coroutine_threadsafe(real_async_call(Statements=statements),
                                                                  loop).result()
        return answer

    async def async_call(Statements: List[Dict[str, Any]]) -> Dict[str, Any]:
        answer: Dict[str, Any] = await asyncio.to_thread(rewrite, Statements, send)
        return answer

    monkeypatch.setattr(dynamodb, 'batch_execute_statement', async_call)


class HoldBack:
    """A before-call action (``FaultInjector.before_call``) that holds each matching call back,
    unsent, until :meth:`let_go`; ``sending`` is set once one is held."""

    def __init__(self) -> None:
        self.sending = threading.Event()
        self._go = threading.Event()

    def __call__(self, params: Dict[str, Any]) -> None:
        self.sending.set()
        self._go.wait(REAL_TIMEOUT)

    def let_go(self) -> None:
        self._go.set()


class HoldAnswer:
    """Holds back the answer of the first ``operation`` call (of a boto3 client or resource)
    whose decoded request ``when(body)`` accepts, after DynamoDB has applied it, until
    :meth:`let_go`: the write has landed and its caller is still waiting for the answer.
    ``holding`` is set once one is held (for three times ``REAL_TIMEOUT`` at most, longer
    than a test waits for the caller). Use it as a context manager (the hook is removed at the
    end, and a held answer let go)."""

    def __init__(self, target: Any, operation: str,
                 when: Optional[Callable[[Dict[str, Any]], bool]] = None) -> None:
        self.holding = threading.Event()
        self._go = threading.Event()
        self._when = when
        self._taken = threading.Lock()
        self._event_name = f'needs-retry.dynamodb.{operation}'
        self._events = getattr(target.meta, 'client', target).meta.events     # a resource's client, or the client
        self._events.register(self._event_name, self._hold, unique_id=f'hold-answer-{id(self)}')

    def _hold(self, request_dict: Dict[str, Any], caught_exception: Any = None, **kwargs: Any) -> None:
        if caught_exception is not None or self.holding.is_set():
            return
        body = json.loads(request_dict.get('body') or b'{}')
        if self._when is not None and not self._when(body):
            return
        with self._taken:
            if self.holding.is_set():
                return
            self.holding.set()
        self._go.wait(3 * REAL_TIMEOUT)     # longer than a test waits for anything meanwhile

    def let_go(self) -> None:
        self._go.set()

    def __enter__(self) -> 'HoldAnswer':
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.let_go()
        self._events.unregister(self._event_name, unique_id=f'hold-answer-{id(self)}')


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
# boto3 odds and ends
# --------------------------------------------------------------------------------------------

_session_guard = threading.Lock()
_session: Any = None


def offline_resource() -> Any:
    """A boto3 resource pointing at a closed port on 127.0.0.1, for tests that must make no
    call at all (a call would fail with a connection error, and a CallRecorder still sees it)."""
    global _session
    with _session_guard:
        if _session is None:
            _session = dummy_boto3_session()
        return _session.resource('dynamodb', endpoint_url='http://127.0.0.1:9', config=default_client_config())


def no_retry_backoff(monkeypatch: Any) -> None:
    """Make botocore (and aiobotocore) retry at once instead of sleeping its exponential
    backoff (this test only)."""
    import botocore.endpoint

    class _NoSleep:
        @staticmethod
        def sleep(seconds: float) -> None:
            return None

    monkeypatch.setattr(botocore.endpoint, 'time', _NoSleep)
    try:
        import aiobotocore.endpoint as aio_endpoint
    except ImportError:  # pragma: no cover - aiobotocore is a test requirement
        return

    if hasattr(aio_endpoint.AioEndpoint, '_sleep'):   # aiobotocore 3
        async def no_sleep(self: Any, seconds: float) -> None:
            return None

        monkeypatch.setattr(aio_endpoint.AioEndpoint, '_sleep', no_sleep)
        return

    class AsyncioWithoutBackoff:                       # older releases call asyncio.sleep in the module
        def __getattr__(self, name: str) -> Any:
            return getattr(asyncio, name)

        @staticmethod
        async def sleep(seconds: float, *args: Any, **kwargs: Any) -> None:
            await asyncio.sleep(0)

    monkeypatch.setattr(aio_endpoint, 'asyncio', AsyncioWithoutBackoff())
