"""Client-side fault injection for DynamoDB calls, with botocore event hooks.

None of the local engines ever throttles, fails or loses an answer, so faults are made on the
client side, in a ``before-send.dynamodb`` hook: botocore calls it for every HTTP attempt
(retries included) with the signed request, and either sends the request itself (the hook
returns None) or uses the response the hook returns. A hook that raises an HTTP-level
exception makes botocore treat the attempt as failed in transit and retry it like a real one.

Faults (the names used in scripts and statistics):

``throttle``
    A 400 ``ProvisionedThroughputExceededException``; nothing is written.
``server_error``
    A 500 ``InternalServerError``; nothing is written.
``applied_server_error``
    The request is applied, then a 500 is returned: the caller cannot tell whether it landed.
``lost_response``
    The request is applied, then the answer is lost (``ReadTimeoutError``): botocore retries,
    and a conditional write then meets its own earlier write as a failed condition.
``connection_error``
    The connection cannot be made (``EndpointConnectionError``); nothing is written.
``latency``
    The request waits ``latency`` seconds, then goes through normally.
``transaction_conflict``
    For ``TransactWriteItems`` only (guarded writes): a 400 ``TransactionCanceledException``
    whose cancellation reason on the last item (the lock check) is ``TransactionConflict``, as
    DynamoDB answers while another write (a heartbeat of the lock) touches an item of the
    transaction; nothing is written. DynamoDB Local never raises it, so it is injected. It is
    injected only on the first attempt carrying a ``ClientRequestToken``: a later attempt with
    the same token may be a retry of a transaction that already committed, which DynamoDB
    answers from its idempotency record (success), never with a conflict.

Scripts, outages and counts name either an API operation (``'UpdateItem'``) or, for the
writes of the lock table, what the write does (:data:`LOCK_ACTIONS`): ``acquire``,
``heartbeat`` and ``release`` are all ``UpdateItem`` calls in this protocol (a release keeps
the row, marked ``released_at``), told apart by their expression values. A script or outage
for an action takes precedence over one for its operation.

"Applied" requests are sent, exactly as signed, through a separate HTTP session that has no
hooks, to the same endpoint.

The injector works on boto3 clients and on aiobotocore clients (the asyncio lock client's): on
an aiobotocore client the hook is a coroutine, latency is ``asyncio.sleep`` and an applied
request is sent from a worker thread, so the event loop goes on meanwhile. Installed on a boto3
resource, it also reaches the aiobotocore clients linked to it
(:func:`python_dynamodb_lock.testing.link_clients`).
"""
from __future__ import annotations

import asyncio
import collections
import json
import random
import threading
import time
from typing import Any, Callable, Deque, Dict, Iterable, List, Optional, Sequence, Tuple

from botocore.awsrequest import AWSPreparedRequest, AWSResponse
from botocore.exceptions import EndpointConnectionError, ReadTimeoutError
from botocore.httpsession import URLLib3Session

from python_dynamodb_lock.testing._hooks import AsyncRawBody, RawBody, attach, canned_response

__all__ = [
    'FAULT_KINDS',
    'GUARDED_FAULT_KINDS',
    'LOCK_ACTIONS',
    'WRITE_OPERATIONS',
    'FaultInjector',
    'FaultRates',
]

FAULT_KINDS = (
    'throttle', 'server_error', 'applied_server_error', 'lost_response', 'connection_error', 'latency',
)
#: The faults of a torture with guarded writes: those above and, on TransactWriteItems only,
#: ``transaction_conflict``.
GUARDED_FAULT_KINDS = FAULT_KINDS + ('transaction_conflict',)
WRITE_OPERATIONS = frozenset({'PutItem', 'UpdateItem', 'DeleteItem', 'BatchExecuteStatement', 'TransactWriteItems'})
#: What a lock-table write does, as scripts, outages and ``action_counts`` name it.
LOCK_ACTIONS = ('acquire', 'heartbeat', 'release')


def lock_action(operation: str, body: Any) -> Optional[str]:
    """What a request does to a lock row: ``'acquire'`` (an UpdateItem taking the next fencing
    token), ``'release'`` (an UpdateItem marking the row released, or a DeleteItem conditioned
    on the version), ``'heartbeat'`` (an UpdateItem writing a new lease end); None otherwise
    (reads, batched heartbeats, the application's own writes)."""
    if isinstance(body, str):
        body = body.encode('utf-8')
    if not isinstance(body, (bytes, bytearray)):
        return None
    if operation == 'UpdateItem':
        if b'":released_at"' in body:
            return 'release'
        if b'":token_floor"' in body:
            return 'acquire'
        if b'":new_lease_expiry"' in body:
            return 'heartbeat'
    if operation == 'DeleteItem' and b'"#version"' in body:
        return 'release'
    return None


def canned_error(url: str, status: int, error_type: str, message: str, is_async: bool = False) -> AWSResponse:
    """An error answer in DynamoDB's JSON protocol, as botocore (or aiobotocore) would have received it."""
    return canned_response(url, status, error_type, message, is_async)


class FaultRates:
    """Per-attempt probabilities of each fault, for :meth:`FaultInjector.random`.

    ``latency`` is the probability of a delay; the delay is uniform in ``latency_range``.
    Faults that apply a request (``applied_server_error``, ``lost_response``) are used on
    writes only; on reads they become the plain form (``server_error`` / a timeout that was
    never sent).
    """

    def __init__(
        self,
        throttle: float = 0.0,
        server_error: float = 0.0,
        applied_server_error: float = 0.0,
        lost_response: float = 0.0,
        connection_error: float = 0.0,
        latency: float = 0.0,
        latency_range: Sequence[float] = (0.05, 0.3),
        transaction_conflict: float = 0.0,
    ) -> None:
        self.by_kind: Dict[str, float] = {
            'throttle': throttle,
            'server_error': server_error,
            'applied_server_error': applied_server_error,
            'lost_response': lost_response,
            'connection_error': connection_error,
            'latency': latency,
        }
        #: Per first attempt of a guarded write (TransactWriteItems), drawn before the others.
        self.transaction_conflict = transaction_conflict
        if sum(self.by_kind.values()) > 1.0 or not 0.0 <= transaction_conflict <= 1.0:
            raise ValueError(f'fault probabilities add up to more than 1: {self.by_kind}')
        self.latency_range = (float(latency_range[0]), float(latency_range[1]))

    def to_json(self) -> Dict[str, Any]:
        return {**self.by_kind, 'latency_range': list(self.latency_range),
                'transaction_conflict': self.transaction_conflict}

    @classmethod
    def from_json(cls, data: Dict[str, Any]) -> 'FaultRates':
        return cls(**data)


class FaultInjector:
    """Injects faults into every DynamoDB call of the boto3 clients it is installed on.

    Faults come from, in this order: an outage (:meth:`start_outage`: every attempt fails),
    a script (:meth:`script`: the next attempts of an operation get the listed faults), and
    random rates (:class:`FaultRates`). ``counts`` holds how many faults of each kind were
    injected, per operation; ``attempts`` how many HTTP attempts each operation made.
    Thread-safe.

    :param enabled_operations: operations that random faults may hit (default: all).
    """

    def __init__(
        self,
        rates: Optional[FaultRates] = None,
        *,
        seed: Optional[int] = None,
        enabled_operations: Optional[Iterable[str]] = None,
    ) -> None:
        self.rates = rates or FaultRates()
        self.enabled_operations = frozenset(enabled_operations) if enabled_operations is not None else None
        self._random = random.Random(seed)
        self._guard = threading.Lock()
        self._scripts: Dict[str, Deque[str]] = collections.defaultdict(collections.deque)
        self._outage_kind: Optional[str] = None
        self._outage_operations: Optional[frozenset] = None
        self._random_enabled = True
        self._http = URLLib3Session(timeout=30)
        self.counts: Dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
        self.attempts: collections.Counter = collections.Counter()
        #: Faults and attempts of the lock-table writes, by :data:`LOCK_ACTIONS` name (each also
        #: counted under its operation in ``counts`` and ``attempts``).
        self.action_counts: Dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
        self.action_attempts: collections.Counter = collections.Counter()
        self.latency_seconds = 0.0
        self.applied_writes: List[Dict[str, Any]] = []
        self._tokens_seen: set = set()   # ClientRequestTokens of guarded writes already attempted

    # -- control --------------------------------------------------------------------------

    def install(self, client_or_resource: Any) -> 'FaultInjector':
        """Hook into a boto3 DynamoDB client or resource (and the aiobotocore clients linked to
        it), or into an aiobotocore client."""
        attach(client_or_resource, 'before-send.dynamodb',
               lambda is_async: self._before_send_async if is_async else self._before_send)
        return self

    def script(self, operation: str, faults: Sequence[Optional[str]]) -> None:
        """Give the next ``len(faults)`` attempts of ``operation`` (an API operation, or one of
        :data:`LOCK_ACTIONS`) these faults (``None``: none)."""
        for fault in faults:
            if fault is not None and fault not in FAULT_KINDS:
                raise ValueError(f'unknown fault {fault!r}')
        with self._guard:
            self._scripts[operation].extend(faults)

    def pending_script(self, operation: str) -> int:
        with self._guard:
            return len(self._scripts[operation])

    def start_outage(self, kind: str = 'server_error', operations: Optional[Iterable[str]] = None) -> None:
        """Fail every attempt (of ``operations``: API operations or :data:`LOCK_ACTIONS`; default
        all) with ``kind`` until :meth:`end_outage`."""
        if kind not in ('server_error', 'connection_error', 'throttle'):
            raise ValueError(f'an outage is server_error, connection_error or throttle, not {kind!r}')
        with self._guard:
            self._outage_kind = kind
            self._outage_operations = frozenset(operations) if operations is not None else None

    def end_outage(self) -> None:
        with self._guard:
            self._outage_kind = None
            self._outage_operations = None

    def pause_random(self, paused: bool = True) -> None:
        """Stop (or restart) random faults; scripts and outages still apply."""
        with self._guard:
            self._random_enabled = not paused

    def total(self, kind: str) -> int:
        with self._guard:
            return sum(counter[kind] for counter in self.counts.values())

    def summary(self) -> Dict[str, Any]:
        """Counts as plain JSON: ``{'faults': {op: {kind: n}}, 'attempts': {op: n}, ...}``."""
        with self._guard:
            return {
                'faults': {op: dict(counter) for op, counter in self.counts.items()},
                'attempts': dict(self.attempts),
                'action_faults': {action: dict(counter) for action, counter in self.action_counts.items()},
                'latency_seconds': round(self.latency_seconds, 3),
            }

    # -- the hook ---------------------------------------------------------------------------

    def _choose(self, operation: str, action: Optional[str], body: Any = None) -> Optional[str]:
        with self._guard:
            self.attempts[operation] += 1
            if action is not None:
                self.action_attempts[action] += 1
            if self._outage_kind is not None and (
                    self._outage_operations is None or operation in self._outage_operations
                    or action in self._outage_operations):
                return self._outage_kind
            for name in (action, operation):
                script = self._scripts.get(name) if name is not None else None
                if script:
                    return script.popleft()
            if not self._random_enabled:
                return None
            if operation == 'TransactWriteItems' and self.rates.transaction_conflict:
                token = _client_token(body)
                first_attempt = token is not None and token not in self._tokens_seen
                self._tokens_seen.add(token)
                if first_attempt and self._random.random() < self.rates.transaction_conflict:
                    return 'transaction_conflict'
            if self.enabled_operations is not None and operation not in self.enabled_operations:
                return None
            draw = self._random.random()
            for kind, probability in self.rates.by_kind.items():
                if draw < probability:
                    return kind
                draw -= probability
            return None

    def _fault_for(self, event_name: str, body: Any) -> Tuple[str, Optional[str]]:
        """The operation of a ``before-send`` event and the fault for this attempt (counted)."""
        operation = event_name.rsplit('.', 1)[-1]
        action = lock_action(operation, body)
        fault = self._choose(operation, action, body)
        if fault is None:
            return operation, None
        if operation not in WRITE_OPERATIONS and fault == 'applied_server_error':
            fault = 'server_error'
        with self._guard:
            self.counts[operation][fault] += 1
            if action is not None:
                self.action_counts[action][fault] += 1
        return operation, fault

    def _latency(self) -> float:
        with self._guard:
            low, high = self.rates.latency_range
            delay = self._random.uniform(low, high)
            self.latency_seconds += delay
        return delay

    @staticmethod
    def _refusal(fault: str, url: str, is_async: bool, body: Any = None) -> Optional[AWSResponse]:
        """The answer for a fault that sends nothing (raises for a connection error)."""
        if fault == 'transaction_conflict':
            return _transaction_conflict(url, body, is_async)
        if fault == 'throttle':
            return canned_error(url, 400, 'ProvisionedThroughputExceededException',
                                'Injected fault: throughput exceeded', is_async)
        if fault == 'server_error':
            return canned_error(url, 500, 'InternalServerError', 'Injected fault: internal server error', is_async)
        if fault == 'connection_error':
            raise EndpointConnectionError(endpoint_url=url)
        return None

    def _after_applying(self, fault: str, url: str, is_async: bool) -> AWSResponse:
        """The request reached DynamoDB, but its answer does not reach the caller."""
        if fault == 'applied_server_error':
            return canned_error(url, 500, 'InternalServerError', 'Injected fault: failed after applying', is_async)
        raise ReadTimeoutError(endpoint_url=url)

    def _before_send(self, request: AWSPreparedRequest, event_name: str = '', **_: Any) -> Optional[AWSResponse]:
        operation, fault = self._fault_for(event_name, request.body)
        if fault is None:
            return None
        if fault == 'latency':
            time.sleep(self._latency())
            return None
        refusal = self._refusal(fault, request.url, False, request.body)
        if refusal is not None:
            return refusal
        if operation in WRITE_OPERATIONS:
            self._apply(operation, request)
        return self._after_applying(fault, request.url, False)

    async def _before_send_async(self, request: AWSPreparedRequest, event_name: str = '',
                                 **_: Any) -> Optional[AWSResponse]:
        operation, fault = self._fault_for(event_name, request.body)
        if fault is None:
            return None
        if fault == 'latency':
            await asyncio.sleep(self._latency())
            return None
        refusal = self._refusal(fault, request.url, True, request.body)
        if refusal is not None:
            return refusal
        if operation in WRITE_OPERATIONS:
            await asyncio.to_thread(self._apply, operation, request)
        return self._after_applying(fault, request.url, True)

    def _apply(self, operation: str, request: AWSPreparedRequest) -> None:
        """Send ``request`` as it is, without hooks, and record what DynamoDB answered."""
        response = self._http.send(request)
        body = response.content
        with self._guard:
            self.applied_writes.append({'operation': operation, 'status': response.status_code,
                                        'body': body[:300].decode('utf-8', 'replace')})

    def close(self) -> None:
        self._http.close()


def _decoded(body: Any) -> Dict[str, Any]:
    if isinstance(body, (bytes, bytearray)):
        body = body.decode('utf-8')
    try:
        decoded = json.loads(body) if body else {}
    except ValueError:
        return {}
    return decoded if isinstance(decoded, dict) else {}


def _client_token(body: Any) -> Optional[str]:
    token = _decoded(body).get('ClientRequestToken')
    return token if isinstance(token, str) else None


def _transaction_conflict(url: str, body: Any, is_async: bool) -> AWSResponse:
    """DynamoDB's answer to a transaction cancelled by a conflict on its last item (the lock check)."""
    count = max(1, len(_decoded(body).get('TransactItems') or []))
    reasons = [{'Code': 'None'}] * (count - 1) + [
        {'Code': 'TransactionConflict', 'Message': 'Transaction is ongoing for the item'}]
    payload = json.dumps({
        '__type': 'com.amazonaws.dynamodb.v20120810#TransactionCanceledException',
        'message': 'Transaction cancelled, please refer cancellation reasons for specific reasons '
                   f'[{", ".join(reason["Code"] for reason in reasons)}] (injected)',
        'CancellationReasons': reasons,
    }).encode()
    headers = {'Content-Type': 'application/x-amz-json-1.0', 'Content-Length': str(len(payload)),
               'x-amzn-RequestId': 'fault-injection'}
    if is_async:
        from aiobotocore.awsrequest import AioAWSResponse

        return AioAWSResponse(url, 400, headers, AsyncRawBody(payload))
    return AWSResponse(url, 400, headers, RawBody(payload))


def counting_hook(counter: collections.Counter) -> Callable[..., None]:
    """A ``before-send`` hook that counts HTTP attempts per operation (no fault)."""

    def hook(event_name: str = '', **_: Any) -> None:
        counter[event_name.rsplit('.', 1)[-1]] += 1

    return hook
