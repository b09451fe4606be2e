"""Breaking DynamoDB calls the ways the service and networks fail: :class:`FaultInjector` and the
:class:`Fault` each of its methods arms, through botocore event hooks (see :mod:`._hooks`)."""
from __future__ import annotations

import asyncio
import dataclasses
import inspect
import threading
import time
import uuid
from typing import Any, Callable, Dict, List, Optional, Tuple

from botocore.awsrequest import AWSResponse
from botocore.exceptions import ReadTimeoutError

from .._model.schema import PartitionKey
from ._hooks import NOWHERE, Hook, attach, canned_response, decode_body, detach, hook_event, operation_of

__all__ = ['Fault', 'FaultInjector']


async def _run_action(action: Callable[..., Any], *args: object) -> Any:
    """An action from a hook of an aiobotocore client: a coroutine function is awaited on the
    loop; anything else runs in a worker thread (in a copy of the caller's context), so that it
    may block, or call back into the loop, without stalling the loop."""
    if inspect.iscoroutinefunction(action):
        return await action(*args)
    result = await asyncio.to_thread(action, *args)
    if inspect.isawaitable(result):
        result = await result
    return result


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

    def __init__(self, target: object) -> None:
        self._target = target
        self._hooks: List[Hook] = []
        #: Every fault armed so far.
        self.faults: List[Fault] = []

    def _register(self, event_name: str, make: Callable[[bool], Callable[..., Any]], fault: Fault,
                  last: bool = False) -> Fault:
        self._hooks.append(attach(self._target, event_name, make, last))
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

            def filtered(event_name: str, **kwargs: object) -> Any:
                if operation not in ('*', None) and operation_of(event_name) != operation:
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
            def handler(params: Dict[str, Any], **kwargs: object) -> Optional[Tuple[AWSResponse, Dict[str, Any]]]:
                request = decode_body(params.get('body'))
                if not fault.take(request):
                    return None
                http = canned_response(params.get('url', NOWHERE), status, code, message, is_async)
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
            def handler(request: Any, **kwargs: object) -> Optional[AWSResponse]:
                if not fault.take(decode_body(request.body)):
                    return None
                request.url = NOWHERE
                return canned_response(NOWHERE, status, code, message, is_async)

            return handler

        return self._register(hook_event('before-send', operation), make, fault)

    def raise_in_attempts(self, operation: str, exception: Callable[[], BaseException],
                          times: Optional[int] = 1,
                          when: Optional[Callable[[Dict[str, Any]], bool]] = None) -> Fault:
        """Single attempts raise ``exception()`` before being sent. botocore retries connection
        errors (``EndpointConnectionError``) within its attempts; other exceptions end the call."""
        fault = Fault(f'{operation}: attempts raise before sending', times, when)

        def make(is_async: bool) -> Callable[..., Any]:
            def handler(request: Any, **kwargs: object) -> None:
                if fault.take(decode_body(request.body)):
                    raise exception()

            return handler

        return self._register(hook_event('before-send', operation), make, fault)

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
                def lost(response: Any, caught_exception: object, request_dict: Dict[str, Any]) -> bool:
                    if caught_exception is not None or response is None or response[0].status_code >= 300:
                        return False
                    return fault.take(decode_body(request_dict.get('body')))

                if is_async:
                    async def async_handler(response: object, attempts: int, caught_exception: object,
                                            request_dict: Dict[str, Any], **kwargs: object) -> Optional[int]:
                        if not lost(response, caught_exception, request_dict):
                            return None
                        if between is not None:
                            await _run_action(between)
                        return 0   # retry at once

                    return async_handler

                def handler(response: object, attempts: int, caught_exception: object,
                            request_dict: Dict[str, Any], **kwargs: object) -> Optional[int]:
                    if not lost(response, caught_exception, request_dict):
                        return None
                    if between is not None:
                        between()
                    return 0   # retry at once

                return handler

            return self._register(hook_event('needs-retry', operation), make_retry, fault)

        # after-call does not see the request: a before-call hook leaves its decoded body in the
        # call's context (the same dict for both events) for ``when``.
        slot = f'python_dynamodb_lock.testing.body.{uuid.uuid4().hex}'

        def make_keeping(is_async: bool) -> Callable[..., Any]:
            def keep(params: Dict[str, Any], context: Optional[Dict[str, Any]] = None, **kwargs: object) -> None:
                if context is not None and fault.when is not None:
                    context[slot] = decode_body(params.get('body'))

            return keep

        def make_raising(is_async: bool) -> Callable[..., Any]:
            def handler(http_response: Any, context: Optional[Dict[str, Any]] = None, **kwargs: Any) -> None:
                body = (context or {}).get(slot, {})
                if http_response.status_code < 300 and fault.take(body):
                    raise ReadTimeoutError(endpoint_url='injected-lost-answer')

            return handler

        self._hooks.append(attach(self._target, hook_event('before-call', operation), make_keeping))
        return self._register(hook_event('after-call', operation), make_raising, fault)

    def before_call(self, operation: str, action: Callable[[Dict[str, Any]], Any], times: Optional[int] = 1,
                    when: Optional[Callable[[Dict[str, Any]], bool]] = None) -> Fault:
        """Run ``action(params)`` just before the call is sent (once per API call, with the
        decoded request body): to let another client win a race, change the row, close the
        client..."""
        fault = Fault(f'{operation}: action before the call', times, when)

        def make(is_async: bool) -> Callable[..., Any]:
            if is_async:
                async def async_handler(params: Dict[str, Any], **kwargs: object) -> None:
                    body = decode_body(params.get('body'))
                    if fault.take(body):
                        await _run_action(action, body)

                return async_handler

            def handler(params: Dict[str, Any], **kwargs: object) -> None:
                body = decode_body(params.get('body'))
                if fault.take(body):
                    action(body)

            return handler

        return self._register_before_call(operation, make, fault)

    def steal_lock(self, table: Any, partition_key: PartitionKey, sort_key: str = '-', *, operation: str = 'UpdateItem',
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
                async def async_handler(**kwargs: object) -> None:
                    if fault.take({}):
                        await asyncio.sleep(seconds)

                return async_handler

            def handler(**kwargs: object) -> None:
                if fault.take({}):
                    time.sleep(seconds)

            return handler

        return self._register(hook_event('needs-retry' if after_sending else 'before-send', operation), make, fault)

    def clear(self) -> None:
        """Remove every fault of this injector."""
        for hook in self._hooks:
            detach(self._target, hook)
        self._hooks.clear()

    def __enter__(self) -> 'FaultInjector':
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.clear()
