"""Watching and breaking DynamoDB calls with botocore event hooks, for boto3 and aiobotocore.

:class:`CallRecorder` counts the API calls of a client; :class:`FaultInjector` makes them fail
the ways the real service fails. Both attach to a boto3 client or resource, or to an
aiobotocore client; :func:`link_clients` makes hooks attached to a boto3 client reach
aiobotocore clients that stand for it as well (the lock tables of this package link the
asyncio lock clients they make to ``table.resource``).
"""
from __future__ import annotations

import asyncio
import dataclasses
import inspect
import json
import re
import threading
import time
import uuid
import weakref
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple, cast

from boto3.dynamodb.types import TypeDeserializer
from botocore.awsrequest import AWSResponse
from botocore.exceptions import ReadTimeoutError

__all__ = [
    'WRITE_OPERATIONS',
    'CallRecorder',
    'Fault',
    'FaultInjector',
    'RecordedCall',
    'canned_response',
    'is_acquire',
    'is_async_client',
    'is_heartbeat',
    'is_release',
    'link_clients',
    'lock_action',
    'low_level_client',
]

#: The DynamoDB operations that write.
WRITE_OPERATIONS = frozenset({'PutItem', 'UpdateItem', 'DeleteItem', 'BatchWriteItem', 'TransactWriteItems',
                              'BatchExecuteStatement', 'ExecuteStatement', 'ExecuteTransaction'})

#: Where a canned per-attempt response pretends to have gone. moto's in-process stubber runs
#: after the fault's before-send hook on the same event and ignores hosts it does not know, so
#: pointing the (per-attempt, throw-away) request here keeps moto from executing it; on a real
#: endpoint nothing is sent at all because botocore uses the canned response.
_NOWHERE = 'http://fault-injected.invalid/'


# --------------------------------------------------------------------------------------------
# What a lock client's write does
# --------------------------------------------------------------------------------------------

def lock_action(params: Dict[str, Any]) -> Optional[str]:
    """What a lock client's request does, from its decoded body (what ``when`` filters and
    :attr:`RecordedCall.params` get): ``'acquire'``, ``'heartbeat'``, ``'release'``, or None
    for anything else (reads, the application's own writes).

    Acquiring, renewing and releasing are all ``UpdateItem`` calls (a release keeps the row,
    marked ``released_at``; a client with ``keep_released_rows=False`` releases with a
    conditional ``DeleteItem``); batched heartbeats are ``BatchExecuteStatement`` calls.
    """
    values = params.get('ExpressionAttributeValues') or {}
    if ':released_at' in values:
        return 'release'
    if ':token_floor' in values:
        return 'acquire'
    if ':row_version' in values or ':entry_version_0' in values:   # shared (read) locks
        if ':entry' in values or ':holders' in values:
            return 'acquire'
        return 'heartbeat' if ':new_version' in values else 'release'
    statements = params.get('Statements') or []
    if ':new_lease_expiry' in values or (statements and all(
            '"record_version_number" IN [' in statement.get('Statement', '') for statement in statements)):
        return 'heartbeat'
    if 'UpdateExpression' not in params and 'Item' not in params and ':expected_version_0' in values \
            and 'Key' in params:
        return 'release'   # a conditional DeleteItem
    return None


_PLACEHOLDER = re.compile(r'#\w+')


def readable_expression(params: Dict[str, Any], field: str = 'UpdateExpression') -> str:
    """``params[field]`` (``'UpdateExpression'``, ``'ConditionExpression'``, ...) with every
    ``#placeholder`` replaced by the attribute name it stands for: what the expression does,
    whether a name went through ``ExpressionAttributeNames`` (the names an application chooses:
    keys, TTL attribute, additional attributes) or is written directly (the lock's own
    attributes, such as ``record_version_number``). ``''`` when the request has no such field."""
    names = params.get('ExpressionAttributeNames') or {}
    return _PLACEHOLDER.sub(lambda match: str(names.get(match.group(0), match.group(0))), params.get(field) or '')


def is_acquire(params: Dict[str, Any]) -> bool:
    """A ``when`` filter: the request acquires a lock (first write, takeover or hand-over)."""
    return lock_action(params) == 'acquire'


def is_heartbeat(params: Dict[str, Any]) -> bool:
    """A ``when`` filter: the request renews locks (``UpdateItem``, or a batch)."""
    return lock_action(params) == 'heartbeat'


def is_release(params: Dict[str, Any]) -> bool:
    """A ``when`` filter: the request releases a lock (or force-releases one)."""
    return lock_action(params) == 'release'


# --------------------------------------------------------------------------------------------
# Clients and links
# --------------------------------------------------------------------------------------------

def low_level_client(client_or_resource: Any) -> Any:
    """The botocore client behind a boto3 resource, or the client itself."""
    meta = client_or_resource.meta
    return meta.client if hasattr(meta, 'client') else client_or_resource


def is_async_client(client: Any) -> bool:
    """Whether ``client`` is an aiobotocore client (False when aiobotocore is not installed)."""
    try:
        from aiobotocore.client import AioBaseClient
    except ImportError:
        return False
    return isinstance(client, AioBaseClient)


class _Hook:
    """One handler, registered on a client and on every aiobotocore client linked to it."""

    def __init__(self, event_name: str, make: Callable[[bool], Callable[..., Any]], last: bool) -> None:
        self.event_name = event_name
        self.make = make            # make(is_async) -> the handler for that kind of client
        self.last = last
        self.unique_id = f'python-dynamodb-lock-testing-{uuid.uuid4().hex}'
        self.emitters: List[Any] = []

    def register_on(self, client: Any) -> None:
        events = client.meta.events
        if any(events is emitter for emitter in self.emitters):
            return
        register = events.register_last if self.last else events.register
        register(self.event_name, self.make(is_async_client(client)), unique_id=self.unique_id)
        self.emitters.append(events)

    def remove(self) -> None:
        for events in self.emitters:
            events.unregister(self.event_name, unique_id=self.unique_id)
        self.emitters.clear()


class _Link:
    def __init__(self) -> None:
        self.async_clients: 'weakref.WeakSet[Any]' = weakref.WeakSet()
        self.hooks: List[_Hook] = []


_links: 'weakref.WeakKeyDictionary[Any, _Link]' = weakref.WeakKeyDictionary()
_links_guard = threading.RLock()


def link_clients(target: Any, async_client: Any) -> None:
    """Make hooks attached to ``target`` reach ``async_client`` too, now and later.

    ``target`` is a boto3 client or resource; ``async_client`` an aiobotocore DynamoDB client
    that stands for it (typically: one on the same endpoint, made for an asyncio lock client).
    Every :class:`CallRecorder` and :class:`FaultInjector` attached to ``target``, before or
    after this call, then also sees and breaks the calls of ``async_client``.
    """
    if not is_async_client(async_client):
        raise TypeError(f'link_clients links an aiobotocore client, not {type(async_client).__name__}')
    client = low_level_client(target)
    with _links_guard:
        link = _links.setdefault(client, _Link())
        link.async_clients.add(async_client)
        for hook in link.hooks:
            hook.register_on(async_client)


def _attach(target: Any, event_name: str, make: Callable[[bool], Callable[..., Any]], last: bool = False) -> _Hook:
    client = low_level_client(target)
    hook = _Hook(event_name, make, last)
    with _links_guard:
        hook.register_on(client)
        if not is_async_client(client):
            link = _links.setdefault(client, _Link())
            link.hooks.append(hook)
            for async_client in list(link.async_clients):
                hook.register_on(async_client)
    return hook


def _detach(target: Any, hook: _Hook) -> None:
    client = low_level_client(target)
    with _links_guard:
        hook.remove()
        link = _links.get(client)
        if link is not None and hook in link.hooks:
            link.hooks.remove(hook)


# --------------------------------------------------------------------------------------------
# Small pieces
# --------------------------------------------------------------------------------------------

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


def _task_name() -> Optional[str]:
    try:
        task = asyncio.current_task()
    except RuntimeError:
        return None
    return task.get_name() if task is not None else None


class _RawBody:
    """The ``raw`` of a canned botocore response (read through ``stream()``)."""

    def __init__(self, body: bytes) -> None:
        self._body = body

    def stream(self, **kwargs: Any) -> Iterator[bytes]:
        yield self._body


class _AsyncRawBody:
    """The ``raw`` of a canned aiobotocore response: aiobotocore awaits ``raw.read()``."""

    def __init__(self, body: bytes) -> None:
        self._body = body

    async def read(self, amt: Optional[int] = None) -> bytes:
        return self._body


def _error_body(code: str, message: str) -> bytes:
    return json.dumps({'__type': f'com.amazonaws.dynamodb.v20120810#{code}', 'message': message}).encode()


def canned_response(url: str, status: int, code: str, message: str, is_async: bool = False) -> AWSResponse:
    """A DynamoDB error answer as botocore (or, with ``is_async``, aiobotocore) receives it:
    what a ``before-send`` hook returns to replace an HTTP attempt."""
    body = _error_body(code, message)
    headers = {'Content-Type': 'application/x-amz-json-1.0', 'Content-Length': str(len(body)),
               'x-amzn-RequestId': 'fault-injection'}
    if is_async:
        from aiobotocore.awsrequest import AioAWSResponse

        return AioAWSResponse(url, status, cast(Any, headers), _AsyncRawBody(body))
    return AWSResponse(url, status, cast(Any, headers), _RawBody(body))


async def _run_action(action: Callable[..., Any], *args: Any) -> Any:
    """An action from a hook of an aiobotocore client: a coroutine function is awaited on the
    loop; anything else runs in a worker thread (in a copy of the caller's context), so that it
    may block, or call back into the loop, without stalling the loop."""
    if inspect.iscoroutinefunction(action):
        return await action(*args)
    result = await asyncio.to_thread(action, *args)
    if inspect.isawaitable(result):
        result = await result
    return result


# --------------------------------------------------------------------------------------------
# Recording calls
# --------------------------------------------------------------------------------------------

@dataclasses.dataclass
class RecordedCall:
    """One DynamoDB API call as sent.

    :ivar operation: the API name (``'PutItem'``, ``'UpdateItem'``, ...).
    :ivar params: the request body, decoded: typed DynamoDB JSON (``{'S': 'x'}``).
    :ivar thread: the name of the thread that made the call.
    :ivar clock_time: the recorder's clock's ``monotonic()`` at the call, if it has a clock.
    :ivar task: the name of the asyncio task that made the call (None outside a task).
    """

    operation: str
    params: Dict[str, Any]
    thread: str
    clock_time: Optional[float]
    task: Optional[str] = None

    @property
    def is_write(self) -> bool:
        """Whether the operation writes (one of :data:`WRITE_OPERATIONS`)."""
        return self.operation in WRITE_OPERATIONS

    @property
    def action(self) -> Optional[str]:
        """What the call does to a lock: ``'acquire'``, ``'heartbeat'``, ``'release'`` or None
        (see :func:`lock_action`)."""
        return lock_action(self.params)

    def expression(self, field: str = 'UpdateExpression') -> str:
        """An expression of the call with its attribute names put in (:func:`readable_expression`)."""
        return readable_expression(self.params, field)

    def expression_values(self) -> Dict[str, Any]:
        """``ExpressionAttributeValues`` as Python values."""
        deserializer = TypeDeserializer()
        return {name: deserializer.deserialize(value)
                for name, value in self.params.get('ExpressionAttributeValues', {}).items()}

    def item(self) -> Dict[str, Any]:
        """The ``Item`` of a PutItem as Python values."""
        deserializer = TypeDeserializer()
        return {name: deserializer.deserialize(value) for name, value in self.params.get('Item', {}).items()}


class CallRecorder:
    """Records every DynamoDB API call of one client (each call once, not each HTTP attempt).

    ``target`` is a boto3 client or resource (boto3 resources share nothing: the recorder sees
    the calls made through that one), or an aiobotocore client. Attached to a boto3 object, it
    also records the calls of every aiobotocore client linked to it (:func:`link_clients`).
    ``clock`` (optional, e.g. a :class:`ManualClock`) stamps each call with its
    ``monotonic()``. Use it as a context manager, or call :meth:`stop`::

        with CallRecorder(table.resource) as calls:
            lock = client.acquire_lock('job')
        assert calls.operations() == ['UpdateItem'] and calls.calls[0].action == 'acquire'
    """

    def __init__(self, target: Any, clock: Any = None) -> None:
        self._target = target
        self._clock = clock
        self._guard = threading.Lock()
        self._calls: List[RecordedCall] = []
        self._hook = _attach(target, 'before-call.dynamodb', lambda is_async: self._record)

    def _record(self, params: Dict[str, Any], event_name: str, **kwargs: Any) -> None:
        call = RecordedCall(
            operation=_operation_of(event_name),
            params=_decode_body(params.get('body')),
            thread=threading.current_thread().name,
            clock_time=self._clock.monotonic() if self._clock is not None else None,
            task=_task_name(),
        )
        with self._guard:
            self._calls.append(call)

    @property
    def calls(self) -> List[RecordedCall]:
        """The calls so far, oldest first (a copy)."""
        with self._guard:
            return list(self._calls)

    def operations(self) -> List[str]:
        """The operation of each call, in order."""
        return [call.operation for call in self.calls]

    def count(self, operation: Optional[str] = None) -> int:
        """How many calls (of ``operation``, or of any)."""
        return sum(1 for call in self.calls if operation is None or call.operation == operation)

    def of(self, operation: str) -> List[RecordedCall]:
        """The calls of one operation."""
        return [call for call in self.calls if call.operation == operation]

    def writes(self) -> List[RecordedCall]:
        """The calls that write."""
        return [call for call in self.calls if call.is_write]

    def clear(self) -> None:
        """Forget the calls recorded so far."""
        with self._guard:
            self._calls.clear()

    def stop(self) -> None:
        """Stop recording (what was recorded stays)."""
        _detach(self._target, self._hook)

    def __enter__(self) -> 'CallRecorder':
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.stop()


# --------------------------------------------------------------------------------------------
# Faults
# --------------------------------------------------------------------------------------------

@dataclasses.dataclass
class Fault:
    """One armed fault, as returned by the :class:`FaultInjector` methods.

    :ivar description: what it does, for messages.
    :ivar times: how often it may fire in all (None: every time).
    :ivar when: a filter on the decoded request body: the fault fires only where it is true.
    :ivar hits: how often it fired.
    """

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
        """Fire no more."""
        with self._guard:
            self.times = self.hits


class FaultInjector:
    """Makes the DynamoDB calls of one client fail the ways DynamoDB and networks fail.

    ``target`` is a boto3 client or resource, or an aiobotocore client. Attached to a boto3
    object, the faults also reach every aiobotocore client linked to it
    (:func:`link_clients`), such as the asyncio lock clients a :class:`LockTable` makes. No
    local engine ever throttles or loses an answer; these hooks make the client meet exactly
    that, on moto in-process, the moto server or DynamoDB Local alike.

    Every method takes ``operation``, an API name (``'UpdateItem'``, ``'GetItem'``,
    ``'BatchExecuteStatement'``...) or ``'*'`` for all; ``times``, how many calls or attempts
    fail (None: all); and ``when(params)``, an optional filter on the decoded request body.
    A lock client acquires, renews and releases with ``UpdateItem``: tell them apart with
    ``when=is_acquire``, ``when=is_heartbeat`` or ``when=is_release``. Each returns the
    :class:`Fault`, whose ``hits`` counts how often it fired. :meth:`clear` (or leaving the
    ``with`` block) removes them all::

        with FaultInjector(table.resource) as faults:
            faults.fail_calls('UpdateItem', times=None, when=is_heartbeat)   # every heartbeat is throttled
            ...

    Actions (``before_call``, ``lose_answers(between=...)``) run, for an aiobotocore client, in
    a worker thread (so they may block, or call a blocking wrapper of the asyncio client),
    unless they are coroutine functions, which are awaited on the loop; latency is
    ``asyncio.sleep`` there, so the loop goes on meanwhile.
    """

    def __init__(self, target: Any) -> None:
        self._target = target
        self._hooks: List[_Hook] = []
        #: Every fault armed so far.
        self.faults: List[Fault] = []

    def _register(self, event_name: str, make: Callable[[bool], Callable[..., Any]], fault: Fault,
                  last: bool = False) -> Fault:
        self._hooks.append(_attach(self._target, event_name, make, last))
        self.faults.append(fault)
        return fault

    def _register_before_call(self, operation: str, make: Callable[[bool], Callable[..., Any]],
                              fault: Fault) -> Fault:
        """Hook ``before-call`` on the service-wide event, after every other handler there.

        ``before-call`` stops at the first handler that answers; registering last lets a
        :class:`CallRecorder` on the same client count the calls a fault answers.
        """
        def make_filtered(is_async: bool) -> Callable[..., Any]:
            handler = make(is_async)

            def filtered(event_name: str, **kwargs: Any) -> Any:
                if operation not in ('*', None) and _operation_of(event_name) != operation:
                    return None
                return handler(event_name=event_name, **kwargs)

            return filtered

        return self._register('before-call.dynamodb', make_filtered, fault, last=True)

    def fail_calls(self, operation: str = '*', code: str = 'ProvisionedThroughputExceededException',
                   status: int = 400, message: str = 'injected fault', times: Optional[int] = 1,
                   when: Optional[Callable[[Dict[str, Any]], bool]] = None,
                   details: Optional[Callable[[Dict[str, Any]], Dict[str, Any]]] = None) -> Fault:
        """The whole API call fails with ``status`` and error ``code``; nothing is sent and
        botocore does not retry: one fault is one failed call as the caller sees it.

        Default: 400 ``ProvisionedThroughputExceededException`` (throttling); a 5xx is
        ``code='InternalServerError', status=500``. ``details(params)``, if given, returns more
        fields of the error answer, made from the decoded request: for instance the
        ``CancellationReasons`` of a cancelled ``TransactWriteItems``, one per item::

            def conflict(params):
                items = params['TransactItems']
                return {'CancellationReasons': [{'Code': 'None'}] * (len(items) - 1)
                                               + [{'Code': 'TransactionConflict'}]}

            faults.fail_calls('TransactWriteItems', 'TransactionCanceledException', details=conflict)
        """
        fault = Fault(f'{operation}: whole call fails with {status} {code}', times, when)

        def make(is_async: bool) -> Callable[..., Any]:
            def handler(params: Dict[str, Any], **kwargs: Any) -> Optional[Tuple[AWSResponse, Dict[str, Any]]]:
                request = _decode_body(params.get('body'))
                if not fault.take(request):
                    return None
                http = canned_response(params.get('url', _NOWHERE), status, code, message, is_async)
                parsed = {
                    'Error': {'Code': code, 'Message': message},
                    **(details(request) if details is not None else {}),
                    'ResponseMetadata': {'HTTPStatusCode': status, 'HTTPHeaders': {}, 'RetryAttempts': 0},
                }
                return http, parsed

            return handler

        return self._register_before_call(operation, make, fault)

    def fail_attempts(self, operation: str = '*', code: str = 'ProvisionedThroughputExceededException',
                      status: int = 400, message: str = 'injected fault', times: Optional[int] = 1,
                      when: Optional[Callable[[Dict[str, Any]], bool]] = None) -> Fault:
        """Single HTTP attempts get the error without being sent; botocore's retry logic then
        decides whether to try again (it does for throttling and 5xx, within its attempts)."""
        fault = Fault(f'{operation}: attempts fail with {status} {code}', times, when)

        def make(is_async: bool) -> Callable[..., Any]:
            def handler(request: Any, **kwargs: Any) -> Optional[AWSResponse]:
                if not fault.take(_decode_body(request.body)):
                    return None
                request.url = _NOWHERE
                return canned_response(_NOWHERE, status, code, message, is_async)

            return handler

        return self._register(_event('before-send', operation), make, fault)

    def raise_in_attempts(self, operation: str, exception: Callable[[], BaseException],
                          times: Optional[int] = 1,
                          when: Optional[Callable[[Dict[str, Any]], bool]] = None) -> Fault:
        """Single attempts raise ``exception()`` before being sent. botocore retries connection
        errors (``EndpointConnectionError``) within its attempts; other exceptions end the call."""
        fault = Fault(f'{operation}: attempts raise before sending', times, when)

        def make(is_async: bool) -> Callable[..., Any]:
            def handler(request: Any, **kwargs: Any) -> None:
                if fault.take(_decode_body(request.body)):
                    raise exception()

            return handler

        return self._register(_event('before-send', operation), make, fault)

    def lose_answers(self, operation: str, times: Optional[int] = 1, retry: bool = True,
                     when: Optional[Callable[[Dict[str, Any]], bool]] = None,
                     between: Optional[Callable[[], Any]] = None) -> Fault:
        """The request reaches the engine and is applied; its (successful) answer is lost.

        ``retry=True``: botocore retries at once, as after a read timeout, so the retry meets
        the first attempt's own effect (a conditional write then fails its condition against
        the caller's own write). ``between()`` runs after the answer was lost and before the
        retry, e.g. to let another client write in that gap. ``retry=False``: the call raises
        ``ReadTimeoutError`` after the write landed.
        """
        how = 'botocore retries' if retry else 'ReadTimeoutError raised'
        fault = Fault(f'{operation}: the answer is lost after the write landed ({how})', times, when)
        if retry:
            def make_retry(is_async: bool) -> Callable[..., Any]:
                def lost(response: Any, caught_exception: Any, request_dict: Dict[str, Any]) -> bool:
                    if caught_exception is not None or response is None or response[0].status_code >= 300:
                        return False
                    return fault.take(_decode_body(request_dict.get('body')))

                if is_async:
                    async def async_handler(response: Any, attempts: int, caught_exception: Any,
                                            request_dict: Dict[str, Any], **kwargs: Any) -> Optional[int]:
                        if not lost(response, caught_exception, request_dict):
                            return None
                        if between is not None:
                            await _run_action(between)
                        return 0   # retry at once

                    return async_handler

                def handler(response: Any, attempts: int, caught_exception: Any,
                            request_dict: Dict[str, Any], **kwargs: Any) -> Optional[int]:
                    if not lost(response, caught_exception, request_dict):
                        return None
                    if between is not None:
                        between()
                    return 0   # retry at once

                return handler

            return self._register(_event('needs-retry', operation), make_retry, fault)

        # after-call does not see the request: a before-call hook leaves its decoded body in the
        # call's context (the same dict for both events) for ``when``.
        slot = f'python_dynamodb_lock.testing.body.{uuid.uuid4().hex}'

        def make_keeping(is_async: bool) -> Callable[..., Any]:
            def keep(params: Dict[str, Any], context: Optional[Dict[str, Any]] = None, **kwargs: Any) -> None:
                if context is not None and fault.when is not None:
                    context[slot] = _decode_body(params.get('body'))

            return keep

        def make_raising(is_async: bool) -> Callable[..., Any]:
            def handler(http_response: Any, context: Optional[Dict[str, Any]] = None, **kwargs: Any) -> None:
                body = (context or {}).get(slot, {})
                if http_response.status_code < 300 and fault.take(body):
                    raise ReadTimeoutError(endpoint_url='injected-lost-answer')

            return handler

        self._hooks.append(_attach(self._target, _event('before-call', operation), make_keeping))
        return self._register(_event('after-call', operation), make_raising, fault)

    def before_call(self, operation: str, action: Callable[[Dict[str, Any]], Any], times: Optional[int] = 1,
                    when: Optional[Callable[[Dict[str, Any]], bool]] = None) -> Fault:
        """Run ``action(params)`` just before the call is sent (once per API call, with the
        decoded request body): to let another client win a race, change the row, close the
        client..."""
        fault = Fault(f'{operation}: action before the call', times, when)

        def make(is_async: bool) -> Callable[..., Any]:
            if is_async:
                async def async_handler(params: Dict[str, Any], **kwargs: Any) -> None:
                    body = _decode_body(params.get('body'))
                    if fault.take(body):
                        await _run_action(action, body)

                return async_handler

            def handler(params: Dict[str, Any], **kwargs: Any) -> None:
                body = _decode_body(params.get('body'))
                if fault.take(body):
                    action(body)

            return handler

        return self._register_before_call(operation, make, fault)

    def steal_lock(self, table: Any, partition_key: Any, sort_key: str = '-', *, operation: str = 'UpdateItem',
                   owner_name: str = 'another-owner', times: Optional[int] = 1) -> Fault:
        """Just before the next ``operation`` call (by default a heartbeat's ``UpdateItem``),
        another owner takes the lock over: its row in ``table`` (a :class:`LockTable`) gets a
        new version and owner, written past these hooks. The heartbeat then finds the lock
        stolen (``LOCK_STOLEN``)."""
        def steal(params: Dict[str, Any]) -> None:
            table.steal_row(partition_key, sort_key, owner_name=owner_name)

        return self.before_call(operation, steal, times=times)

    def add_latency(self, operation: str, seconds: float, times: Optional[int] = None, *,
                    after_sending: bool = False) -> Fault:
        """Each attempt waits ``seconds`` (real time) before it is sent; with
        ``after_sending=True``, after it was sent and answered: the request has been applied and
        its answer arrives late (a call cancelled meanwhile is one whose write landed)."""
        where = 'after sending' if after_sending else 'before sending'
        fault = Fault(f'{operation}: {seconds}s latency {where}', times)

        def make(is_async: bool) -> Callable[..., Any]:
            if is_async:
                async def async_handler(**kwargs: Any) -> None:
                    if fault.take({}):
                        await asyncio.sleep(seconds)

                return async_handler

            def handler(**kwargs: Any) -> None:
                if fault.take({}):
                    time.sleep(seconds)

            return handler

        return self._register(_event('needs-retry' if after_sending else 'before-send', operation), make, fault)

    def clear(self) -> None:
        """Remove every fault of this injector."""
        for hook in self._hooks:
            _detach(self._target, hook)
        self._hooks.clear()

    def __enter__(self) -> 'FaultInjector':
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.clear()
