"""Measure one figure for exactly one implementation of ``python_dynamodb_lock``.

This script is started by ``run_benchmarks.py`` in a subprocess whose ``PYTHONPATH`` names exactly
one implementation (this project, or a published release installed with ``pip install --target``).
Both implementations use the import package name ``python_dynamodb_lock``, so they are never imported
side by side: each worker process sees one of them only.

Usage::

    python bench_worker.py FIGURE --endpoint URL --table NAME [--params JSON]

The worker prints one JSON object on the last line of its standard output; everything else (logging,
warnings) goes to standard error. Figures:

``calls``
    DynamoDB calls and latency of an uncontended acquire + release, counted with a botocore
    ``after-call`` hook (one event per API call, whatever the retries); then the CPU time of an
    acquire + release with every call answered at once by a hook (no engine).
``calls_async``
    ``calls`` for ``AsyncDynamoDBLockClient`` (this project only) on one event loop, through an
    aiobotocore client; calls are counted for the measuring task only.
``close``
    Duration of ``close()`` for a client with the default heartbeat period that holds one lock.
``takeover``
    Time from the SIGKILL of a lock holder (a child process) until a waiting client owns the lock.
``handoff``
    Threads of one client contending for one key: time from a ``release_lock`` call to the next
    holder's ``acquire_lock`` returning, and the DynamoDB calls sent in between (the release's
    own write included).
``handoff_async``
    ``handoff`` for tasks of one ``AsyncDynamoDBLockClient`` on one event loop.
``capacity``
    How many locks one client keeps alive when every DynamoDB call takes a fixed latency. A
    ``before-send`` hook sleeps and answers every call itself, so no engine is involved. The
    ``client_kwargs`` parameter passes extra keyword arguments to the client (for this project,
    ``heartbeat_batch_size``); heartbeats are counted whether they are sent one per UpdateItem call or
    as ``UPDATE`` statements of a PartiQL BatchExecuteStatement call.
``capacity_async``
    ``capacity`` for ``AsyncDynamoDBLockClient`` on one event loop: the hook is a coroutine that
    waits with ``await asyncio.sleep`` and answers with an aiobotocore ``AioAWSResponse``.
``contended``
    Several processes acquiring and releasing a few keys in a loop (spawns ``contend-proc`` children).
``guarded``
    A guarded single-item write (``lock.put_item``) against the same item written with a plain
    PutItem and with a plain TransactWriteItems, on the engine: latency, calls, and the capacity
    units DynamoDB reports (``ReturnConsumedCapacity='TOTAL'``); and the acquire + release
    around them.
``ceiling``
    No lock client: threads calling ``update_item`` as fast as one boto3 client allows when every
    call takes a fixed latency; the ceiling that ``capacity`` runs into.

The worker never asserts anything about timings: it only reports what it measured.
"""
from __future__ import annotations

import argparse
import asyncio
import collections
import contextvars
import datetime
import functools
import json
import logging
import os
import random
import re
import signal
import statistics
import subprocess
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

import boto3
import botocore.config
from botocore.awsrequest import AWSPreparedRequest, AWSResponse

from python_dynamodb_lock.python_dynamodb_lock import DynamoDBLockClient, DynamoDBLockError

logger = logging.getLogger('bench_worker')

JsonDict = Dict[str, Any]


# --------------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------------

def make_resource(endpoint_url: str) -> Any:
    """A boto3 DynamoDB resource with dummy credentials and default configuration."""
    return boto3.resource(
        'dynamodb',
        endpoint_url=endpoint_url,
        region_name='us-east-1',
        aws_access_key_id='benchmark',
        aws_secret_access_key='benchmark',
    )


def percentile(values: List[float], fraction: float) -> Optional[float]:
    """The ``fraction`` quantile of ``values`` (nearest rank); None for an empty list."""
    if not values:
        return None
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, int(round(fraction * (len(ordered) - 1)))))
    return ordered[index]


def summarise(values: List[float], scale: float = 1.0) -> JsonDict:
    """Count, p50, p99, mean and max of ``values`` multiplied by ``scale`` (None when empty)."""
    def scaled(value: Optional[float]) -> Optional[float]:
        return None if value is None else value * scale

    return {
        'n': len(values),
        'p50': scaled(percentile(values, 0.50)),
        'p99': scaled(percentile(values, 0.99)),
        'mean': scaled(statistics.fmean(values)) if values else None,
        'max': scaled(max(values)) if values else None,
    }


class CallCounter:
    """Counts DynamoDB API calls per operation and per outcome through botocore hooks.

    ``after-call`` fires once per API call (whatever botocore's retries did underneath), for
    successes and for error responses alike; ``after-call-error`` fires when no response came
    back at all. Outcomes are ``ok``, the error code (``ConditionalCheckFailedException``, ...)
    or ``exception``; with ``at_send``, calls are counted when sent instead (``before-call``,
    outcome ``sent``). With ``thread_ident`` set, only calls made by that thread are counted, so
    that background heartbeats do not pollute a per-operation count; ``only`` (a function of no
    arguments, called in the caller's context) filters the same way for what a thread ident
    cannot tell apart: asyncio tasks on one loop (:func:`measured_here`). Works for
    boto3 clients and for aiobotocore clients alike (aiobotocore emits the same events).
    """

    def __init__(self, client: Any, thread_ident: Optional[int] = None,
                 only: Optional[Callable[[], bool]] = None, at_send: bool = False) -> None:
        self.counts: collections.Counter[str] = collections.Counter()
        self.outcomes: collections.Counter[str] = collections.Counter()
        self._thread_ident = thread_ident
        self._only = only
        self._guard = threading.Lock()
        if at_send:
            # Count each call when it is sent (``before-call``, once per API call too), so that a
            # window between two instants holds the calls sent in it, not those answered in it.
            client.meta.events.register('before-call.dynamodb.*', self._on_send)
            return
        client.meta.events.register('after-call.dynamodb.*', self._on_response)
        client.meta.events.register('after-call-error.dynamodb.*', self._on_exception)

    def _on_send(self, event_name: str, **_: Any) -> None:
        if self._counted():
            self._record(event_name, 'sent')

    def _counted(self) -> bool:
        if self._thread_ident is not None and threading.get_ident() != self._thread_ident:
            return False
        return self._only is None or self._only()

    def _record(self, event_name: str, outcome: str) -> None:
        operation = event_name.rsplit('.', 1)[-1]
        with self._guard:
            self.counts[operation] += 1
            self.outcomes[f'{operation}:{outcome}'] += 1

    def _on_response(self, event_name: str, http_response: Any = None, parsed: Any = None,
                     **_: Any) -> None:
        if not self._counted():
            return
        status = getattr(http_response, 'status_code', 200)
        outcome = 'ok'
        if status >= 300:
            outcome = str((parsed or {}).get('Error', {}).get('Code', status))
        self._record(event_name, outcome)

    def _on_exception(self, event_name: str, **_: Any) -> None:
        if self._counted():
            self._record(event_name, 'exception')

    def snapshot(self) -> collections.Counter[str]:
        with self._guard:
            return collections.Counter(self.counts)

    def outcome_snapshot(self) -> collections.Counter[str]:
        with self._guard:
            return collections.Counter(self.outcomes)


#: True in the tasks whose DynamoDB calls an asyncio figure counts, and in every task they create
#: (a task starts with a copy of its creator's context): ``AsyncDynamoDBLockClient.release_lock``
#: runs the release as a task of its own, whose calls are the release's. The client's heartbeat
#: tasks are created before the flag is set, so their calls are not counted.
_MEASURED: contextvars.ContextVar[bool] = contextvars.ContextVar('bench_measured', default=False)


def measured_here() -> bool:
    return _MEASURED.get()


class _CannedBody:
    """The minimum of a urllib3 response that botocore's ``AWSResponse`` reads: ``stream()``."""

    def __init__(self, body: bytes) -> None:
        self._body = body

    def stream(self, **_: Any) -> Iterator[bytes]:
        yield self._body


class _AsyncCannedBody:
    """The minimum of an aiohttp response that aiobotocore's ``AioAWSResponse`` reads: an
    awaitable ``read()``."""

    def __init__(self, body: bytes) -> None:
        self._body = body

    async def read(self) -> bytes:
        return self._body


_SET_CLAUSE = re.compile(r'\bSET\b(.*?)(?=\b(?:REMOVE|ADD|DELETE)\b|$)', re.IGNORECASE | re.DOTALL)
_INCREMENT = re.compile(r'if_not_exists\s*\(\s*[^,]+,\s*(:\w+)\s*\)\s*\+\s*(:\w+)$')


def _top_level_split(text: str) -> List[str]:
    """``text`` split at the commas that are not inside parentheses."""
    parts, depth, start = [], 0, 0
    for index, char in enumerate(text):
        if char == '(':
            depth += 1
        elif char == ')':
            depth -= 1
        elif char == ',' and depth == 0:
            parts.append(text[start:index])
            start = index + 1
    parts.append(text[start:])
    return [part.strip() for part in parts if part.strip()]


def updated_attributes(params: JsonDict) -> JsonDict:
    """What DynamoDB returns as ``Attributes`` for an ``UpdateItem`` with ``ReturnValues``
    ``UPDATED_NEW``: the new value of every attribute the ``SET`` clause assigns.

    Understands the assignments lock clients send (``#name = :value`` and the fencing token's
    ``#name = if_not_exists(#name, :floor) + :one``, which on a row without a token is
    ``floor + one``); other assignments are left out.
    """
    match = _SET_CLAUSE.search(params.get('UpdateExpression') or '')
    if not match:
        return {}
    names: Dict[str, str] = params.get('ExpressionAttributeNames') or {}
    values: Dict[str, Any] = params.get('ExpressionAttributeValues') or {}
    attributes: JsonDict = {}
    for assignment in _top_level_split(match.group(1)):
        left, _, right = assignment.partition('=')
        name = names.get(left.strip(), left.strip())
        right = right.strip()
        if right in values:
            attributes[name] = values[right]
            continue
        increment = _INCREMENT.match(right)
        if increment and increment.group(1) in values and increment.group(2) in values:
            total = int(values[increment.group(1)]['N']) + int(values[increment.group(2)]['N'])
            attributes[name] = {'N': str(total)}
    return attributes


def update_item_answer(params: JsonDict) -> JsonDict:
    """The answer to an ``UpdateItem`` (typed JSON) that succeeds: :func:`updated_attributes`
    when it asks for values back (``UPDATED_NEW`` or ``ALL_NEW``), else nothing."""
    if params.get('ReturnValues') in ('UPDATED_NEW', 'ALL_NEW'):
        return {'Attributes': updated_attributes(params)}
    return {}


class CannedDynamoDB:
    """A ``before-send`` hook that answers every DynamoDB call itself after a fixed latency.

    Each answer is a well-formed success, shaped like DynamoDB's: ``{}`` for GetItem (no item),
    PutItem and DeleteItem (no old item), TransactWriteItems, and UpdateItem without
    ``ReturnValues``; an UpdateItem with ``ReturnValues='UPDATED_NEW'`` (how this project
    acquires, so that the fencing token comes back) gets the attributes its ``SET`` clause
    writes (:func:`updated_attributes`), as DynamoDB would return them; a BatchExecuteStatement
    call gets one success entry (``{"TableName": ...}``, no ``Error``) per statement, in order.

    For a boto3 client (``asynchronous=False``) the hook sleeps ``latency`` seconds first with
    ``time.sleep``, releasing the GIL as a real network wait would. For an aiobotocore client
    (``asynchronous=True``) the hook is a coroutine (aiobotocore awaits it) that waits with
    ``await asyncio.sleep(latency)``, so the event loop goes on with other work meanwhile, as it
    would during a real network wait, and it answers with an ``AioAWSResponse``.

    Counts answered calls per operation (``counts``), the statements inside BatchExecuteStatement
    calls by their first word (``statements``: ``UPDATE``, ...), and heartbeats: renewals sent as
    UpdateItem calls (those without ``ReturnValues``, which an acquisition of this project sets,
    and not marking the row ``released_at``, as a release of this project does) plus ``UPDATE``
    statements inside BatchExecuteStatement calls.
    """

    _HEADERS = {'x-amzn-RequestId': 'benchmark', 'Content-Type': 'application/x-amz-json-1.0'}
    _TABLE_IN_STATEMENT = re.compile(r'\b(?:UPDATE|FROM|INTO)\s+"((?:[^"]|"")+)"', re.IGNORECASE)

    def __init__(self, client: Any, latency: float, table_name: str = 'benchmark',
                 asynchronous: bool = False) -> None:
        self.latency = latency
        self.table_name = table_name
        self.counts: collections.Counter[str] = collections.Counter()
        self.statements: collections.Counter[str] = collections.Counter()
        self.heartbeats = 0
        self._guard = threading.Lock()
        client.meta.events.register('before-send.dynamodb.*',
                                    self._answer_async if asynchronous else self._answer)

    def _answer(self, request: AWSPreparedRequest, event_name: str, **_: Any) -> AWSResponse:
        if self.latency > 0:
            time.sleep(self.latency)
        return AWSResponse(request.url, 200, dict(self._HEADERS), _CannedBody(self._respond(request, event_name)))

    async def _answer_async(self, request: AWSPreparedRequest, event_name: str, **_: Any) -> Any:
        from aiobotocore.awsrequest import AioAWSResponse

        if self.latency > 0:
            await asyncio.sleep(self.latency)
        return AioAWSResponse(request.url, 200, dict(self._HEADERS),
                              _AsyncCannedBody(self._respond(request, event_name)))

    def _respond(self, request: AWSPreparedRequest, event_name: str) -> bytes:
        """The body of the answer to ``request``; counts it."""
        operation = event_name.rsplit('.', 1)[-1]
        body = b'{}'
        verbs: List[str] = []
        renewal = False
        if operation == 'BatchExecuteStatement':
            statements = self._request_json(request).get('Statements') or []
            verbs = [self._verb(statement.get('Statement', '')) for statement in statements]
            body = json.dumps({'Responses': [
                {'TableName': self._table_of(statement.get('Statement', ''))} for statement in statements
            ]}).encode()
        elif operation == 'UpdateItem':
            params = self._request_json(request)
            answer = update_item_answer(params)
            if answer:
                body = json.dumps(answer).encode()
            else:
                # Not an acquisition (those ask for the new values back) nor this project's
                # release (it marks the row released): a renewal.
                renewal = ':released_at' not in (params.get('ExpressionAttributeValues') or {})
        with self._guard:
            self.counts[operation] += 1
            self.statements.update(verbs)
            self.heartbeats += 1 if renewal else verbs.count('UPDATE')
        return body

    @staticmethod
    def _request_json(request: AWSPreparedRequest) -> JsonDict:
        body = request.body
        if hasattr(body, 'read'):  # a file-like body (not what botocore sends for JSON protocols)
            position = body.tell()
            text = body.read()
            body.seek(position)
            body = text
        if isinstance(body, (bytes, bytearray)):
            body = body.decode('utf-8')
        return json.loads(body) if body else {}

    @staticmethod
    def _verb(statement: str) -> str:
        words = statement.split(None, 1)
        return words[0].upper() if words else ''

    def _table_of(self, statement: str) -> str:
        match = self._TABLE_IN_STATEMENT.search(statement)
        return match.group(1).replace('""', '"') if match else self.table_name

    def count(self, operation: str) -> int:
        with self._guard:
            return self.counts[operation]

    def snapshot(self) -> tuple:
        """``(heartbeats, calls per operation)`` at this moment, consistent with each other."""
        with self._guard:
            return self.heartbeats, collections.Counter(self.counts)


def seconds(value: float) -> datetime.timedelta:
    return datetime.timedelta(seconds=value)


def unique_prefix(figure: str) -> str:
    return f'bench-{figure}-{uuid.uuid4().hex[:8]}'


# --------------------------------------------------------------------------------------------------
# figures
# --------------------------------------------------------------------------------------------------

class _PairSamples:
    """Latencies and DynamoDB calls of acquire + release pairs, as ``calls`` and ``calls_async``
    report them."""

    def __init__(self) -> None:
        self.acquire: List[float] = []
        self.release: List[float] = []
        self.pair: List[float] = []
        self.acquire_calls: collections.Counter[str] = collections.Counter()
        self.release_calls: collections.Counter[str] = collections.Counter()

    def add(self, started: float, acquired: float, released: float, before_acquire: collections.Counter,
            after_acquire: collections.Counter, after_release: collections.Counter) -> None:
        self.acquire.append(acquired - started)
        self.release.append(released - acquired)
        self.pair.append(released - started)
        self.acquire_calls.update(after_acquire - before_acquire)
        self.release_calls.update(after_release - after_acquire)

    def result(self, cpu_acquire: float, cpu_release: float) -> JsonDict:
        iterations = len(self.pair)
        acquire_calls, release_calls = self.acquire_calls, self.release_calls
        return {
            'iterations': iterations,
            'cpu_ms_per_acquire': cpu_acquire * 1000.0,
            'cpu_ms_per_release': cpu_release * 1000.0,
            'cpu_ms_per_acquire_release': (cpu_acquire + cpu_release) * 1000.0,
            'calls_per_acquire': sum(acquire_calls.values()) / iterations,
            'calls_per_release': sum(release_calls.values()) / iterations,
            'calls_per_acquire_release': (sum(acquire_calls.values()) + sum(release_calls.values())) / iterations,
            'acquire_operations': {op: n / iterations for op, n in sorted(acquire_calls.items())},
            'release_operations': {op: n / iterations for op, n in sorted(release_calls.items())},
            'acquire_ms': summarise(self.acquire, 1000.0),
            'release_ms': summarise(self.release, 1000.0),
            'acquire_release_ms': summarise(self.pair, 1000.0),
            'samples_ms': {
                'acquire': [value * 1000.0 for value in self.acquire],
                'release': [value * 1000.0 for value in self.release],
                'acquire_release': [value * 1000.0 for value in self.pair],
            },
        }


def figure_calls(endpoint: str, table: str, params: JsonDict) -> JsonDict:
    """Uncontended acquire + release on one key, ``iterations`` times (after ``warmup`` rounds)."""
    iterations = int(params.get('iterations', 300))
    warmup = int(params.get('warmup', 20))
    resource = make_resource(endpoint)
    counter = CallCounter(resource.meta.client, thread_ident=threading.get_ident())
    client = DynamoDBLockClient(resource, table_name=table)
    key = unique_prefix('calls')
    samples = _PairSamples()
    try:
        for round_number in range(warmup + iterations):
            before_acquire = counter.snapshot()
            started = time.perf_counter()
            lock = client.acquire_lock(key)
            acquired = time.perf_counter()
            after_acquire = counter.snapshot()
            client.release_lock(lock, best_effort=False)
            released = time.perf_counter()
            after_release = counter.snapshot()
            if round_number >= warmup:
                samples.add(started, acquired, released, before_acquire, after_acquire, after_release)
    finally:
        client.close()
    return samples.result(*_client_cpu_per_acquire_release(table, int(params.get('cpu_iterations', 1000))))


def _client_cpu_per_acquire_release(table: str, iterations: int) -> tuple:
    """CPU seconds this process spends per acquire and per release, with no engine and no wait.

    Every call is answered at once by :class:`CannedDynamoDB`, so what is measured is the client's
    own work plus botocore's (building, signing and parsing each call).
    """
    result = _threaded_cpu(table, iterations, {})
    return result['acquire'], result['release']


def _threaded_cpu(table: str, iterations: int, params: JsonDict) -> JsonDict:
    """:func:`_client_cpu_per_acquire_release`, and with ``params['split']`` or
    ``params['profile']`` the further passes of :func:`figure_cpu` on the same client."""
    dynamodb, calls = _cpu_transport(str(params.get('client', 'resource')))
    CannedDynamoDB(calls, 0.0)
    client = DynamoDBLockClient(dynamodb, table_name=table)
    key = unique_prefix('cpu')
    # Not closed: the published client's close() waits up to a heartbeat period; the worker
    # process ends with os._exit.
    _warm_up(client, key, min(100, iterations))
    acquire, release = _cpu_cycles(client, key, iterations)
    result: JsonDict = {'acquire': acquire, 'release': release}
    if params.get('split'):
        timer = _ApiCallTimer(calls)
        result['total'] = sum(_cpu_cycles(client, key, iterations)) * iterations
        result['api_seconds'], result['api_calls'] = timer.seconds, timer.calls
    if params.get('profile'):
        import cProfile

        profiler = cProfile.Profile()
        profiler.runcall(_cpu_cycles, client, key, iterations)
        result['profile'] = _profile_text(profiler, int(params['profile']))
    return result


def _cpu_transport(kind: str) -> Tuple[Any, Any]:
    """``(what the lock client is given, the boto3 client its calls go through)`` for the ``cpu``
    figure's ``client`` parameter: ``resource`` (a boto3 resource, as the published client takes),
    ``low-level`` (``boto3.client('dynamodb')``, which this project also takes), or
    ``low-level-unvalidated`` (the same with ``Config(parameter_validation=False)``), or
    ``no-botocore`` (:class:`_NoBotocoreClient`: this project's own work alone)."""
    if kind == 'resource':
        resource = make_resource('http://127.0.0.1:9')
        return resource, resource.meta.client
    if kind == 'no-botocore':
        no_botocore = _NoBotocoreClient()
        return no_botocore, no_botocore.real
    if kind not in ('low-level', 'low-level-unvalidated'):
        raise ValueError(f'unknown client kind {kind!r}')
    config = botocore.config.Config(parameter_validation=kind == 'low-level')
    client = boto3.client('dynamodb', endpoint_url='http://127.0.0.1:9', region_name='us-east-1',
                          aws_access_key_id='benchmark', aws_secret_access_key='benchmark', config=config)
    return client, client


class _NoBotocoreClient:
    """Stands in for a low-level DynamoDB client and answers the calls of an uncontended
    acquire + release itself, as :class:`CannedDynamoDB` does, without botocore: a cycle on it
    costs this project's own work alone (typing the values included, as for any low-level
    client). ``meta`` is a real client's: the operation models and the event emitter that the
    lock client consults, from ``real``, a client no call goes through."""

    def __init__(self) -> None:
        real = boto3.client('dynamodb', endpoint_url='http://127.0.0.1:9', region_name='us-east-1',
                            aws_access_key_id='benchmark', aws_secret_access_key='benchmark')
        self.real = real
        self.meta = real.meta

    def update_item(self, **params: Any) -> JsonDict:
        return update_item_answer(params)

    def put_item(self, **params: Any) -> JsonDict:
        return {}

    def delete_item(self, **params: Any) -> JsonDict:
        return {}

    def get_item(self, **params: Any) -> JsonDict:
        return {}


def _warm_up(client: Any, key: str, cycles: int) -> None:
    for _ in range(cycles):
        client.release_lock(client.acquire_lock(key))


def _cpu_cycles(client: Any, key: str, iterations: int) -> tuple:
    """``(acquire, release)``: CPU seconds per uncontended acquire and release by ``client``
    (threaded)."""
    acquire_cpu = release_cpu = 0.0
    for _ in range(iterations):
        started = time.process_time()
        lock = client.acquire_lock(key)
        acquired = time.process_time()
        client.release_lock(lock)
        acquire_cpu += acquired - started
        release_cpu += time.process_time() - acquired
    return acquire_cpu / iterations, release_cpu / iterations


class _ApiCallTimer:
    """Adds up the CPU time spent inside one botocore (or aiobotocore) client's
    ``_make_api_call``: building, validating, signing, sending (here: answered by a hook) and
    parsing each call, with boto3's resource-layer conversions; what a lock client spends
    outside it is its own work (and botocore's thin method wrapper around it)."""

    def __init__(self, client: Any, asynchronous: bool = False) -> None:
        self.seconds = 0.0
        self.calls = 0
        original = client._make_api_call
        if asynchronous:
            async def timed_async(*args: Any, **kwargs: Any) -> Any:
                started = time.process_time()
                try:
                    return await original(*args, **kwargs)
                finally:
                    self._add(started)
            client._make_api_call = timed_async
        else:
            def timed(*args: Any, **kwargs: Any) -> Any:
                started = time.process_time()
                try:
                    return original(*args, **kwargs)
                finally:
                    self._add(started)
            client._make_api_call = timed

    def _add(self, started: float) -> None:
        self.seconds += time.process_time() - started
        self.calls += 1


def _cpu_result(measured: JsonDict, cycles: int) -> JsonDict:
    """What ``cpu`` and ``cpu_async`` report, from :func:`_threaded_cpu` (or its asyncio twin)."""
    acquire, release, total = measured['acquire'], measured['release'], measured['total']
    result: JsonDict = {
        'cpu_ms_per_acquire': acquire * 1000.0,
        'cpu_ms_per_release': release * 1000.0,
        'cpu_ms_per_acquire_release': (acquire + release) * 1000.0,
        # The second pass (timed per API call): how the CPU of one cycle splits.
        'split_cpu_ms_per_acquire_release': total / cycles * 1000.0,
        'split_cpu_ms_in_api_calls': measured['api_seconds'] / cycles * 1000.0,
        'split_cpu_ms_outside_api_calls': (total - measured['api_seconds']) / cycles * 1000.0,
        'calls_per_acquire_release': measured['api_calls'] / cycles,
    }
    if measured.get('profile') is not None:
        result['profile'] = measured['profile']
    return result


def _profile_text(profiler: Any, top: int) -> str:
    """A finished cProfile, sorted by cumulative and then by own time, ``top`` rows each."""
    import io
    import pstats

    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out)
    stats.sort_stats('cumulative').print_stats(top)
    stats.sort_stats('tottime').print_stats(top)
    return out.getvalue()


def figure_cpu(endpoint: str, table: str, params: JsonDict) -> JsonDict:
    """No engine: client CPU per uncontended acquire + release, every call answered at once by
    :class:`CannedDynamoDB` (the CPU part of ``calls`` on its own, so that trials are cheap to
    repeat); then a second pass that also times every ``_make_api_call``, to tell the client's
    own CPU from botocore's; with ``profile`` (a number of rows), a cProfile of a third pass."""
    iterations = int(params.get('iterations', 1000))
    return _cpu_result(_threaded_cpu(table, iterations, {**params, 'split': True}), iterations)


def figure_cycles(endpoint: str, table: str, params: JsonDict) -> JsonDict:
    """The cycles of ``cpu`` alone (a warm-up of ``min(100, iterations)``, then ``iterations``
    uncontended acquire + release, every call answered at once), with no second pass: what
    ``instructions_per_cycle.py`` runs under callgrind, which does the counting."""
    iterations = int(params.get('iterations', 100))
    _threaded_cpu(table, iterations, {'client': params.get('client', 'resource')})
    return {'iterations': iterations}


def figure_cycles_async(endpoint: str, table: str, params: JsonDict) -> JsonDict:
    """:func:`figure_cycles` for ``AsyncDynamoDBLockClient``."""
    iterations = int(params.get('iterations', 100))
    asyncio.run(_asyncio_cpu(table, iterations, {}))
    return {'iterations': iterations}


def async_dynamodb_client(endpoint_url: str) -> Any:
    """An aiobotocore DynamoDB client (an async context manager) with dummy credentials and
    default configuration, as :func:`make_resource` makes the boto3 one."""
    from aiobotocore.session import get_session

    return get_session().create_client(
        'dynamodb',
        endpoint_url=endpoint_url,
        region_name='us-east-1',
        aws_access_key_id='benchmark',
        aws_secret_access_key='benchmark',
    )


def figure_calls_async(endpoint: str, table: str, params: JsonDict) -> JsonDict:
    """``calls`` for ``AsyncDynamoDBLockClient`` (this project only), on one event loop.

    The same loop as ``calls`` (``await client.acquire_lock(key)``, ``await
    client.release_lock(lock)``), with the calls counted for the measuring task and the release
    tasks it starts only (the client's heartbeat tasks run on the same loop and thread); then the CPU time per acquire
    and release with every call answered at once by an async ``before-send`` hook.
    """
    return asyncio.run(_calls_async(endpoint, table, params))


async def _calls_async(endpoint: str, table: str, params: JsonDict) -> JsonDict:
    from python_dynamodb_lock.aio import AsyncDynamoDBLockClient

    iterations = int(params.get('iterations', 300))
    warmup = int(params.get('warmup', 20))
    key = unique_prefix('calls-async')
    samples = _PairSamples()
    async with async_dynamodb_client(endpoint) as dynamodb:
        counter = CallCounter(dynamodb, only=measured_here)
        client = AsyncDynamoDBLockClient(dynamodb, table_name=table)
        _MEASURED.set(True)     # after the client started its heartbeat tasks
        try:
            for round_number in range(warmup + iterations):
                before_acquire = counter.snapshot()
                started = time.perf_counter()
                lock = await client.acquire_lock(key)
                acquired = time.perf_counter()
                after_acquire = counter.snapshot()
                await client.release_lock(lock, best_effort=False)
                released = time.perf_counter()
                after_release = counter.snapshot()
                if round_number >= warmup:
                    samples.add(started, acquired, released, before_acquire, after_acquire, after_release)
        finally:
            await client.close()
    cpu = await _async_client_cpu_per_acquire_release(table, int(params.get('cpu_iterations', 1000)))
    return samples.result(*cpu)


async def _async_client_cpu_per_acquire_release(table: str, iterations: int) -> tuple:
    """``_client_cpu_per_acquire_release`` for the asyncio client (async canned answers)."""
    result = await _asyncio_cpu(table, iterations, {})
    return result['acquire'], result['release']


async def _asyncio_cpu(table: str, iterations: int, params: JsonDict) -> JsonDict:
    """:func:`_threaded_cpu` for ``AsyncDynamoDBLockClient``."""
    from python_dynamodb_lock.aio import AsyncDynamoDBLockClient

    async with async_dynamodb_client('http://127.0.0.1:9') as dynamodb:
        CannedDynamoDB(dynamodb, 0.0, asynchronous=True)
        client = AsyncDynamoDBLockClient(dynamodb, table_name=table)
        key = unique_prefix('cpu-async')
        try:
            await _warm_up_async(client, key, min(100, iterations))
            acquire, release = await _cpu_cycles_async(client, key, iterations)
            result: JsonDict = {'acquire': acquire, 'release': release}
            if params.get('split'):
                timer = _ApiCallTimer(dynamodb, asynchronous=True)
                result['total'] = sum(await _cpu_cycles_async(client, key, iterations)) * iterations
                result['api_seconds'], result['api_calls'] = timer.seconds, timer.calls
            if params.get('profile'):
                import cProfile

                profiler = cProfile.Profile()    # of this thread: the loop's, where every task runs
                profiler.enable()
                await _cpu_cycles_async(client, key, iterations)
                profiler.disable()
                result['profile'] = _profile_text(profiler, int(params['profile']))
        finally:
            await client.close()
    return result


async def _warm_up_async(client: Any, key: str, cycles: int) -> None:
    for _ in range(cycles):
        await client.release_lock(await client.acquire_lock(key))


async def _cpu_cycles_async(client: Any, key: str, iterations: int) -> tuple:
    """:func:`_cpu_cycles` for an ``AsyncDynamoDBLockClient``."""
    acquire_cpu = release_cpu = 0.0
    for _ in range(iterations):
        started = time.process_time()
        lock = await client.acquire_lock(key)
        acquired = time.process_time()
        await client.release_lock(lock)
        acquire_cpu += acquired - started
        release_cpu += time.process_time() - acquired
    return acquire_cpu / iterations, release_cpu / iterations


def figure_cpu_async(endpoint: str, table: str, params: JsonDict) -> JsonDict:
    """``cpu`` for ``AsyncDynamoDBLockClient`` (this project only), on one event loop, every
    call answered at once by an async ``before-send`` hook."""
    iterations = int(params.get('iterations', 1000))
    return _cpu_result(asyncio.run(_asyncio_cpu(table, iterations, {**params, 'split': True})), iterations)


def figure_close(endpoint: str, table: str, params: JsonDict) -> JsonDict:
    """``close()`` duration of a default-configured client holding one lock.

    Samples close the client at offsets spread evenly over one heartbeat period after creation,
    since a client that sleeps a whole period between heartbeats closes faster or slower depending
    on where in that sleep ``close()`` arrives.
    """
    samples = int(params.get('samples', 4))
    period = DynamoDBLockClient._DEFAULT_HEARTBEAT_PERIOD.total_seconds()
    resource = make_resource(endpoint)
    durations: List[float] = []
    for index in range(samples):
        offset = (index + 0.5) / samples * period
        client = DynamoDBLockClient(resource, table_name=table)
        created = time.monotonic()
        client.acquire_lock(unique_prefix('close'))
        time.sleep(max(0.0, created + offset - time.monotonic()))
        started = time.perf_counter()
        client.close()
        durations.append(time.perf_counter() - started)
    return {
        'heartbeat_period_s': period,
        'samples': samples,
        'close_ms': summarise(durations, 1000.0),
        'close_ms_all': [d * 1000.0 for d in durations],
    }


def _spawn_holder(endpoint: str, table: str, key: str, lease: float, heartbeat: float) -> subprocess.Popen:
    """Start a child process (same implementation) that acquires ``key`` and heartbeats until killed."""
    command = [
        sys.executable, os.path.abspath(__file__), 'hold', '--endpoint', endpoint, '--table', table,
        '--params', json.dumps({'key': key, 'lease_s': lease, 'heartbeat_s': heartbeat}),
    ]
    # The holder's standard input stays open as long as this process lives: it exits on EOF, so it
    # cannot outlive a worker that was itself killed (by the driver's timeout, say).
    holder = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None
    line = holder.stdout.readline()
    if line.strip() != 'HELD':
        holder.kill()
        holder.wait()
        raise RuntimeError(f'holder process did not acquire the lock: {line!r}')
    return holder


def figure_hold(endpoint: str, table: str, params: JsonDict) -> JsonDict:
    """Child of ``takeover``: acquire a lock, say HELD, heartbeat until killed (or orphaned)."""
    lease = float(params['lease_s'])
    heartbeat = float(params['heartbeat_s'])
    client = DynamoDBLockClient(
        make_resource(endpoint), table_name=table,
        lease_duration=seconds(lease), heartbeat_period=seconds(heartbeat),
        safe_period=seconds(lease * 2 / 3),
    )
    client.acquire_lock(params['key'], retry_timeout=seconds(60))
    print('HELD', flush=True)
    sys.stdin.read()  # until the parent goes away; normally SIGKILL comes first
    os._exit(0)


def figure_takeover(endpoint: str, table: str, params: JsonDict) -> JsonDict:
    """Time from SIGKILL of a lock holder to a waiting client owning the lock.

    The holder stores ``lease_s`` as its lease and heartbeats every ``lease_s / 4``. The waiter
    polls every ``retry_period_s``; it starts waiting ``observe_s`` before the kill, so it has seen
    the holder alive. A waiter that has not taken over ``cap_s`` after the kill gives up.
    """
    lease = float(params.get('lease_s', 2.0))
    retry_period = float(params.get('retry_period_s', 0.5))
    cap = float(params.get('cap_s', 15.0))
    samples = int(params.get('samples', 3))
    observe = float(params.get('observe_s', 1.0))
    resource = make_resource(endpoint)
    waiter = DynamoDBLockClient(resource, table_name=table, heartbeat_period=seconds(retry_period),
                                lease_duration=seconds(lease))
    results: List[Optional[float]] = []
    try:
        for _ in range(samples):
            key = unique_prefix('takeover')
            holder = _spawn_holder(endpoint, table, key, lease, lease / 4)
            outcome: JsonDict = {}

            def wait_for_lock(key: str = key, outcome: JsonDict = outcome) -> None:
                try:
                    waiter.acquire_lock(key, retry_period=seconds(retry_period),
                                        retry_timeout=seconds(observe + cap))
                    outcome['acquired_at'] = time.monotonic()
                except DynamoDBLockError as error:
                    outcome['error'] = error.code

            try:
                thread = threading.Thread(target=wait_for_lock, daemon=True)
                thread.start()
                time.sleep(observe)
                if 'acquired_at' in outcome:
                    raise RuntimeError('the waiter took the lock while its holder was alive')
                killed_at = time.monotonic()
                holder.send_signal(signal.SIGKILL)
                holder.wait()
            finally:
                if holder.poll() is None:
                    holder.kill()
                    holder.wait()
            thread.join(observe + cap + 5 * retry_period + 10)
            if 'acquired_at' in outcome:
                results.append(outcome['acquired_at'] - killed_at)
            else:
                results.append(None)
                logger.info('no takeover within %.1f s (%s)', cap, outcome.get('error'))
                break  # a client that cannot take over will not do better the next time
    finally:
        waiter.close()
    taken = [r for r in results if r is not None]
    return {
        'lease_s': lease,
        'retry_period_s': retry_period,
        'cap_s': cap,
        'samples': len(results),
        'took_over': len(taken),
        'takeover_s_all': results,
        'takeover_s': summarise(taken),
        'target_s': lease + retry_period,
    }


class _HandoffLog:
    """What happens between a contender's ``release_lock`` call and the next holder's
    ``acquire_lock`` returning: the time, and the DynamoDB calls made meanwhile.

    ``contender_calls`` counts the calls the contending threads (or tasks) send in that window
    (counted when sent, ``at_send``): the release's own write, and any polls, reads and writes
    of the waiters, including a first attempt of the thread that released before, if it sends
    one before the lock changed hands. ``all_calls`` counts every call sent by the process,
    so that background calls in the window (heartbeats) show separately. The caller serialises
    :meth:`releasing` and :meth:`acquired` (one holder at a time does either).
    """

    def __init__(self, contender_calls: CallCounter, all_calls: CallCounter) -> None:
        self._contender_calls = contender_calls
        self._all_calls = all_calls
        self._last_release: Optional[tuple] = None
        self.latencies: List[float] = []
        self.calls: List[int] = []
        self.background_calls: List[int] = []
        self.operations: collections.Counter[str] = collections.Counter()

    def releasing(self) -> None:
        """Called by the holder just before it calls ``release_lock``."""
        self._last_release = (time.perf_counter(), self._contender_calls.snapshot(), self._all_calls.snapshot())

    def acquired(self) -> None:
        """Called by the next holder as soon as its ``acquire_lock`` returned."""
        now = time.perf_counter()
        contender_after, all_after = self._contender_calls.snapshot(), self._all_calls.snapshot()
        if self._last_release is None:
            return
        released_at, contender_before, all_before = self._last_release
        self._last_release = None
        made = contender_after - contender_before
        self.latencies.append(now - released_at)
        self.calls.append(sum(made.values()))
        self.background_calls.append(sum((all_after - all_before).values()) - sum(made.values()))
        self.operations.update(made)

    def result(self) -> JsonDict:
        handoffs = len(self.latencies)
        return {
            'handoffs': handoffs,
            'handoff_ms': summarise(self.latencies, 1000.0),
            # DynamoDB calls sent from the release_lock call until the next holder had the lock,
            # counting the release's own write: 1 when the release hands the lock over itself.
            'calls_between': summarise([float(n) for n in self.calls]),
            'calls_between_histogram': {str(n): count for n, count in sorted(collections.Counter(self.calls).items())},
            'operations_between': {op: n / handoffs for op, n in sorted(self.operations.items())} if handoffs else {},
            'background_calls_between': sum(self.background_calls),
        }


def figure_handoff(endpoint: str, table: str, params: JsonDict) -> JsonDict:
    """Threads of one default-configured client contending for one key.

    Each thread acquires (blocking, default retry_period), holds ``hold_ms``, notes the time and
    the call counts and releases; then waits until another thread has taken the lock before
    competing again, so that every measured interval is a real handoff between two threads.
    Measured per handoff: the time from the ``release_lock`` call to the next holder's
    ``acquire_lock`` returning, and the DynamoDB calls the contending threads made in between
    (the release's own write included).
    """
    threads = int(params.get('threads', 3))
    duration = float(params.get('duration_s', 30.0))
    max_handoffs = int(params.get('max_handoffs', 200))
    hold = float(params.get('hold_ms', 10.0)) / 1000.0
    resource = make_resource(endpoint)
    contenders: set = set()
    handoffs = _HandoffLog(
        CallCounter(resource.meta.client, only=lambda: threading.get_ident() in contenders, at_send=True),
        CallCounter(resource.meta.client, at_send=True))
    client = DynamoDBLockClient(resource, table_name=table)
    key = unique_prefix('handoff')
    state = threading.Condition()
    generation = [0]
    stop = threading.Event()
    errors: List[str] = []
    deadline = time.monotonic() + duration

    def contend() -> None:
        with state:
            contenders.add(threading.get_ident())
        while not stop.is_set():
            try:
                lock = client.acquire_lock(key, retry_timeout=seconds(duration + 60))
            except DynamoDBLockError as error:
                errors.append(error.code)
                return
            with state:
                handoffs.acquired()
                generation[0] += 1
                my_generation = generation[0]
                if len(handoffs.latencies) >= max_handoffs or time.monotonic() >= deadline:
                    stop.set()
                state.notify_all()
            time.sleep(hold)
            with state:
                handoffs.releasing()
            client.release_lock(lock)
            with state:
                while generation[0] == my_generation and not stop.is_set():
                    state.wait(0.2)

    workers = [threading.Thread(target=contend, daemon=True) for _ in range(threads)]
    started = time.monotonic()
    for worker in workers:
        worker.start()
    while not stop.wait(0.2):
        if time.monotonic() > deadline + 30:
            break
    stop.set()
    with state:
        state.notify_all()
        result = handoffs.result()
    return {
        'threads': threads,
        'retry_period_s': DynamoDBLockClient._DEFAULT_HEARTBEAT_PERIOD.total_seconds(),
        'elapsed_s': time.monotonic() - started,
        'errors': errors,
        **result,
    }


def figure_handoff_async(endpoint: str, table: str, params: JsonDict) -> JsonDict:
    """``handoff`` for ``AsyncDynamoDBLockClient`` (this project only): ``threads`` tasks of one
    client on one event loop contend for one key, each holding it ``hold_ms``
    (``await asyncio.sleep``) and competing again only after another task got it."""
    return asyncio.run(_handoff_async(endpoint, table, params))


async def _handoff_async(endpoint: str, table: str, params: JsonDict) -> JsonDict:
    from python_dynamodb_lock.aio import AsyncDynamoDBLockClient

    tasks_count = int(params.get('threads', 3))
    duration = float(params.get('duration_s', 30.0))
    max_handoffs = int(params.get('max_handoffs', 200))
    hold = float(params.get('hold_ms', 10.0)) / 1000.0
    key = unique_prefix('handoff-async')
    errors: List[str] = []
    async with async_dynamodb_client(endpoint) as dynamodb:
        handoffs = _HandoffLog(CallCounter(dynamodb, only=measured_here, at_send=True),
                               CallCounter(dynamodb, at_send=True))
        client = AsyncDynamoDBLockClient(dynamodb, table_name=table)
        changed = asyncio.Condition()
        generation = [0]
        stop = asyncio.Event()
        deadline = time.monotonic() + duration

        async def contend() -> None:
            _MEASURED.set(True)     # this task's calls, and those of the releases it starts
            while not stop.is_set():
                try:
                    lock = await client.acquire_lock(key, retry_timeout=seconds(duration + 60))
                except DynamoDBLockError as error:
                    errors.append(error.code)
                    return
                handoffs.acquired()
                generation[0] += 1
                my_generation = generation[0]
                if len(handoffs.latencies) >= max_handoffs or time.monotonic() >= deadline:
                    stop.set()
                async with changed:
                    changed.notify_all()
                await asyncio.sleep(hold)
                handoffs.releasing()
                await client.release_lock(lock)
                async with changed:
                    while generation[0] == my_generation and not stop.is_set():
                        try:
                            await asyncio.wait_for(changed.wait(), 0.2)
                        except asyncio.TimeoutError:
                            pass

        started = time.monotonic()
        workers = [asyncio.create_task(contend()) for _ in range(tasks_count)]
        try:
            await asyncio.wait_for(stop.wait(), duration + 30)
        except asyncio.TimeoutError:
            pass
        stop.set()
        elapsed = time.monotonic() - started
        result = handoffs.result()
        for worker in workers:
            worker.cancel()
        await asyncio.gather(*workers, return_exceptions=True)
        await client.close()
    return {
        'threads': tasks_count,
        'retry_period_s': DynamoDBLockClient._DEFAULT_HEARTBEAT_PERIOD.total_seconds(),
        'elapsed_s': elapsed,
        'errors': errors,
        **result,
    }


def figure_capacity(endpoint: str, table: str, params: JsonDict) -> JsonDict:
    """Whether one client keeps ``locks`` locks alive at ``latency_ms`` per call.

    The client has the default configuration plus ``client_kwargs`` (a JSON object of keyword
    arguments for ``DynamoDBLockClient``, e.g. ``{"heartbeat_batch_size": 25}``; empty by default,
    and only meaningful for an implementation that has those arguments). Every DynamoDB call is
    answered by a ``before-send`` hook after ``latency_ms`` (no engine). After acquiring all locks
    and ``warmup_periods`` heartbeat periods, the worker measures for ``measure_periods`` periods:
    the heartbeat rate achieved (renewals sent as UpdateItem calls plus ``UPDATE`` statements
    inside BatchExecuteStatement calls, per second), the DynamoDB calls per second, the CPU time
    per heartbeat, and during the last period the largest age of any lock's last successful write
    (``last_updated_time``). Callbacks LOCK_IN_DANGER / LOCK_STOLEN are counted throughout.
    """
    locks_wanted = int(params['locks'])
    latency = float(params.get('latency_ms', 10.0)) / 1000.0
    warmup_periods = float(params.get('warmup_periods', 1.0))
    measure_periods = float(params.get('measure_periods', 3.0))
    acquire_threads = int(params.get('acquire_threads', 32))
    client_kwargs: JsonDict = dict(params.get('client_kwargs') or {})
    # The resource keeps botocore's default configuration (10 pooled connections), as an
    # application's would: a client may size its heartbeat concurrency from it.
    resource = make_resource('http://127.0.0.1:9')
    canned = CannedDynamoDB(resource.meta.client, latency, table_name=table)
    callbacks = _CallbackCounter()
    client = DynamoDBLockClient(resource, table_name=table, **client_kwargs)
    period = DynamoDBLockClient._DEFAULT_HEARTBEAT_PERIOD.total_seconds()
    prefix = unique_prefix('capacity')
    acquire_started = time.monotonic()
    with ThreadPoolExecutor(max_workers=acquire_threads) as pool:
        locks = list(pool.map(
            lambda index: client.acquire_lock(f'{prefix}-{index}', app_callback=callbacks),
            range(locks_wanted),
        ))
    acquire_seconds = time.monotonic() - acquire_started
    acquire_calls = dict(canned.counts)
    time.sleep(warmup_periods * period)

    window = _CapacityWindow(canned, period, measure_periods)
    while window.sample(locks):
        time.sleep(window.pause())
    return window.result(locks_wanted, latency, client_kwargs, acquire_seconds, acquire_calls, callbacks)


class _CallbackCounter:
    """An ``app_callback`` that counts the codes it is called with (from any thread)."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self.codes: collections.Counter[str] = collections.Counter()

    def __call__(self, code: str, lock: Any) -> None:
        with self._guard:
            self.codes[code] += 1

    def snapshot(self) -> Dict[str, int]:
        with self._guard:
            return dict(self.codes)


class _CapacityWindow:
    """The measuring part of ``capacity``: ``measure_periods`` heartbeat periods during which the
    heartbeats, calls and CPU time are counted, and in whose last period the age of the oldest
    lock's last confirmed write is sampled every 0.25 s (the caller sleeps :meth:`pause` between
    calls to :meth:`sample`, with ``time.sleep`` or ``await asyncio.sleep``)."""

    def __init__(self, canned: CannedDynamoDB, period: float, measure_periods: float) -> None:
        self.canned = canned
        self.period = period
        self.heartbeats_before, self.calls_before = canned.snapshot()
        self.statements_before = collections.Counter(canned.statements)
        self.cpu_before = time.process_time()
        self.started = time.monotonic()
        self.end = self.started + measure_periods * period
        self.staleness_from = self.end - period
        self.worst_staleness = 0.0
        self.worst_lag = 0.0
        self._expected_wake: Optional[float] = None

    def sample(self, locks: List[Any]) -> bool:
        """Take a sample; False once the window is over."""
        now = time.monotonic()
        if self._expected_wake is not None:
            self.worst_lag = max(self.worst_lag, now - self._expected_wake)
        if now >= self.end:
            return False
        if now >= self.staleness_from:
            oldest = min(lock.last_updated_time for lock in locks)
            self.worst_staleness = max(self.worst_staleness, time.monotonic() - oldest)
        return True

    def pause(self) -> float:
        seconds_ = min(0.25, max(0.0, self.end - time.monotonic()))
        self._expected_wake = time.monotonic() + seconds_
        return seconds_

    def result(self, locks_wanted: int, latency: float, client_kwargs: JsonDict, acquire_seconds: float,
               acquire_calls: Dict[str, int], callbacks: _CallbackCounter) -> JsonDict:
        measured = time.monotonic() - self.started
        cpu = time.process_time() - self.cpu_before
        heartbeats_after, calls_after = self.canned.snapshot()
        heartbeats = heartbeats_after - self.heartbeats_before
        operations = calls_after - self.calls_before
        statements = collections.Counter(self.canned.statements) - self.statements_before
        calls = sum(operations.values())
        batches = operations.get('BatchExecuteStatement', 0)
        required_rate = locks_wanted / self.period
        achieved_rate = heartbeats / measured
        seen_callbacks = callbacks.snapshot()
        kept_alive = (
            achieved_rate >= 0.95 * required_rate
            and self.worst_staleness <= 1.5 * self.period
            and not seen_callbacks
        )
        return {
            'locks': locks_wanted,
            'latency_ms': latency * 1000.0,
            'heartbeat_period_s': self.period,
            'client_kwargs': client_kwargs,
            'acquire_s': acquire_seconds,
            'acquire_calls': acquire_calls,
            'measured_s': measured,
            'heartbeats': heartbeats,
            'calls': calls,
            'operations': dict(operations),
            'batch_statements': dict(statements),
            'statements_per_batch': (sum(statements.values()) / batches) if batches else None,
            'required_heartbeats_per_s': required_rate,
            'achieved_heartbeats_per_s': achieved_rate,
            'calls_per_s': calls / measured,
            'worst_staleness_s': self.worst_staleness,
            # How late the sampler woke from its 0.25 s sleeps at worst: for the asyncio client,
            # how long the event loop was kept from other work.
            'worst_sampler_lag_s': self.worst_lag,
            'cpu_s': cpu,
            'cpu_ms_per_heartbeat': (cpu / heartbeats * 1000.0) if heartbeats else None,
            'cpu_ms_per_call': (cpu / calls * 1000.0) if calls else None,
            'callbacks': seen_callbacks,
            'kept_alive': kept_alive,
        }


def figure_capacity_async(endpoint: str, table: str, params: JsonDict) -> JsonDict:
    """``capacity`` for ``AsyncDynamoDBLockClient`` on one event loop (this project only).

    The same measurement, with an aiobotocore client (default configuration: 10 pooled
    connections) whose ``before-send`` hook is a coroutine: it waits ``latency_ms`` with ``await
    asyncio.sleep`` and answers with an ``AioAWSResponse``, so waiting for DynamoDB never blocks
    the loop. The locks are acquired by ``acquire_threads`` tasks; the sampler runs as a task on
    the same loop and also records how late it woke (``worst_sampler_lag_s``).
    """
    return asyncio.run(_capacity_async(table, params))


async def _capacity_async(table: str, params: JsonDict) -> JsonDict:
    from python_dynamodb_lock.aio import AsyncDynamoDBLockClient

    locks_wanted = int(params['locks'])
    latency = float(params.get('latency_ms', 10.0)) / 1000.0
    warmup_periods = float(params.get('warmup_periods', 1.0))
    measure_periods = float(params.get('measure_periods', 3.0))
    acquirers = int(params.get('acquire_threads', 32))
    client_kwargs: JsonDict = dict(params.get('client_kwargs') or {})
    period = DynamoDBLockClient._DEFAULT_HEARTBEAT_PERIOD.total_seconds()
    prefix = unique_prefix('capacity-async')
    callbacks = _CallbackCounter()
    async with async_dynamodb_client('http://127.0.0.1:9') as dynamodb:
        canned = CannedDynamoDB(dynamodb, latency, table_name=table, asynchronous=True)
        client = AsyncDynamoDBLockClient(dynamodb, table_name=table, **client_kwargs)
        try:
            locks: List[Any] = [None] * locks_wanted
            indices = iter(range(locks_wanted))

            async def acquire_some() -> None:
                for index in indices:
                    locks[index] = await client.acquire_lock(f'{prefix}-{index}', app_callback=callbacks)

            acquire_started = time.monotonic()
            await asyncio.gather(*(acquire_some() for _ in range(acquirers)))
            acquire_seconds = time.monotonic() - acquire_started
            acquire_calls = dict(canned.counts)
            await asyncio.sleep(warmup_periods * period)

            window = _CapacityWindow(canned, period, measure_periods)
            while window.sample(locks):
                await asyncio.sleep(window.pause())
            return window.result(locks_wanted, latency, client_kwargs, acquire_seconds, acquire_calls, callbacks)
        finally:
            await client.close()


def figure_ceiling(endpoint: str, table: str, params: JsonDict) -> JsonDict:
    """The most heartbeat-like calls one process can make through one boto3 client.

    ``threads`` threads call ``update_item`` (the shape of a heartbeat, through the resource's
    client) in a loop for ``duration_s``, every call answered by the ``before-send`` hook after
    ``latency_ms``, as in ``capacity``. No lock client is involved: this is the ceiling any
    client built on boto3 meets in one CPython process on this machine.
    """
    threads = int(params.get('threads', 20))
    latency = float(params.get('latency_ms', 10.0)) / 1000.0
    duration = float(params.get('duration_s', 5.0))
    resource = make_resource('http://127.0.0.1:9')
    canned = CannedDynamoDB(resource.meta.client, latency)
    client = resource.meta.client
    stop = threading.Event()

    def call_in_a_loop(index: int) -> None:
        version = str(uuid.uuid4())
        while not stop.is_set():
            new_version = str(uuid.uuid4())
            client.update_item(
                TableName=table, Key={'lock_key': f'ceiling-{index}', 'sort_key': '-'},
                UpdateExpression='SET #version = :new_version, #expiry = :expiry',
                ConditionExpression='#version = :old_version',
                ExpressionAttributeNames={'#version': 'record_version_number', '#expiry': 'expiry_time'},
                ExpressionAttributeValues={':new_version': new_version, ':old_version': version,
                                           ':expiry': int(time.time()) + 3600},
            )
            version = new_version

    workers = [threading.Thread(target=call_in_a_loop, args=(index,), daemon=True) for index in range(threads)]
    for worker in workers:
        worker.start()
    time.sleep(1.0)
    calls_before = canned.count('UpdateItem')
    cpu_before = time.process_time()
    started = time.monotonic()
    time.sleep(duration)
    elapsed = time.monotonic() - started
    cpu = time.process_time() - cpu_before
    calls = canned.count('UpdateItem') - calls_before
    stop.set()
    return {
        'threads': threads,
        'latency_ms': latency * 1000.0,
        'calls_per_s': calls / elapsed,
        'cpu_ms_per_call': cpu / calls * 1000.0 if calls else None,
        'cpu_share': cpu / elapsed,
    }


class _ConsumedCapacity:
    """Asks DynamoDB for the capacity each call consumed and adds it up, per table.

    A ``provide-client-params`` hook adds ``ReturnConsumedCapacity='TOTAL'`` to the calls of
    the operations in ``ask`` that do not ask already (the lock client's own calls, which have
    no such option), and an ``after-call`` hook adds the ``CapacityUnits`` of each answer (one
    entry, or one per table for a transaction) to ``units[table]``; only calls made by the
    thread ``thread_ident`` count. The answer keeps ``ConsumedCapacity``; the lock client
    ignores it.
    """

    ASK = ('UpdateItem', 'PutItem', 'DeleteItem', 'GetItem', 'TransactWriteItems')

    def __init__(self, client: Any, thread_ident: int) -> None:
        self._thread_ident = thread_ident
        self.units: collections.Counter[str] = collections.Counter()
        for operation in self.ASK:
            client.meta.events.register(f'provide-client-params.dynamodb.{operation}', self._ask)
        client.meta.events.register('after-call.dynamodb.*', self._add)

    def _ask(self, params: JsonDict, **_: Any) -> None:
        if threading.get_ident() == self._thread_ident:
            params.setdefault('ReturnConsumedCapacity', 'TOTAL')

    def _add(self, parsed: Any = None, **_: Any) -> None:
        if threading.get_ident() != self._thread_ident:
            return
        consumed = (parsed or {}).get('ConsumedCapacity')
        for entry in consumed if isinstance(consumed, list) else [consumed] if consumed else []:
            self.units[str(entry.get('TableName'))] += float(entry.get('CapacityUnits', 0.0))

    def snapshot(self) -> collections.Counter[str]:
        return collections.Counter(self.units)


def _ensure_table(client: Any, name: str) -> None:
    """Create an on-demand table with a string HASH key ``pk``, unless it exists."""
    if name in client.list_tables().get('TableNames', []):
        return
    client.create_table(
        TableName=name,
        KeySchema=[{'AttributeName': 'pk', 'KeyType': 'HASH'}],
        AttributeDefinitions=[{'AttributeName': 'pk', 'AttributeType': 'S'}],
        BillingMode='PAY_PER_REQUEST',
    )
    client.get_waiter('table_exists').wait(TableName=name)


# DynamoDB's published rule for transactions: every item in a TransactWriteItems call costs two
# write units per KB (rounded up), one to prepare and one to commit it, a ConditionCheck
# included; a plain write of an item up to 1 KB costs one write unit.
PUBLISHED_RULE_WCU = {'guarded': 2.0 * 2, 'put_item': 1.0, 'transact_write_items': 2.0 * 1}


class _Tally:
    """Latencies, calls per operation and capacity units per table of one kind of operation."""

    def __init__(self) -> None:
        self.seconds: List[float] = []
        self.operations: collections.Counter[str] = collections.Counter()
        self.units: collections.Counter[str] = collections.Counter()

    def add(self, seconds_: float, operations: collections.Counter, units: collections.Counter) -> None:
        self.seconds.append(seconds_)
        self.operations.update(operations)
        self.units.update(units)

    def result(self) -> JsonDict:
        n = len(self.seconds)
        return {
            'ms': summarise(self.seconds, 1000.0),
            'calls': sum(self.operations.values()) / n,
            'operations': {op: count / n for op, count in sorted(self.operations.items())},
            'consumed_units': sum(self.units.values()) / n,
            'consumed_units_by_table': {table: units / n for table, units in sorted(self.units.items())},
        }


def figure_guarded(endpoint: str, table: str, params: JsonDict) -> JsonDict:
    """A guarded single-item write against the same write made plainly (this project only).

    For ``iterations`` rounds (after ``warmup``), a default client acquires one free key, then
    writes one small item (``item_bytes`` of payload, in the table ``data_table``, created if
    missing) three ways, in an order that rotates every round: ``lock.put_item(TableName=...,
    Item=...)`` (the guarded write: one TransactWriteItems with the lock's ConditionCheck), a
    plain ``put_item`` and a plain ``transact_write_items`` holding just that Put; then it
    releases. Each write passes ``ReturnConsumedCapacity='TOTAL'``. Per commit kind, and for the
    acquire and the release: latency, DynamoDB calls per operation (counted for the measuring
    thread only), and the capacity units DynamoDB reports (for the lock client's own calls a
    hook asks for them).
    """
    iterations = int(params.get('iterations', 200))
    warmup = int(params.get('warmup', 30))
    item_bytes = int(params.get('item_bytes', 200))
    data_table = str(params.get('data_table', f'{table}Data'))
    resource = make_resource(endpoint)
    low_level = resource.meta.client
    _ensure_table(low_level, data_table)
    me = threading.get_ident()
    counter = CallCounter(low_level, thread_ident=me)
    capacity = _ConsumedCapacity(low_level, me)
    client = DynamoDBLockClient(resource, table_name=table)
    key = unique_prefix('guarded')
    item = {'pk': f'{key}-item', 'payload': 'x' * item_bytes}

    def guarded(lock: Any) -> Any:
        return lock.put_item(TableName=data_table, Item=item, ReturnConsumedCapacity='TOTAL')

    def put_item(lock: Any) -> Any:
        return low_level.put_item(TableName=data_table, Item=item, ReturnConsumedCapacity='TOTAL')

    def transact_write_items(lock: Any) -> Any:
        return low_level.transact_write_items(TransactItems=[{'Put': {'TableName': data_table, 'Item': item}}],
                                              ReturnConsumedCapacity='TOTAL')

    def measured(tally: _Tally, counted: bool, action: Callable[[], Any]) -> Any:
        calls_before, units_before = counter.snapshot(), capacity.snapshot()
        started = time.perf_counter()
        outcome = action()
        elapsed = time.perf_counter() - started
        if counted:
            tally.add(elapsed, counter.snapshot() - calls_before, capacity.snapshot() - units_before)
        return outcome

    commits: List[tuple] = [('guarded', guarded), ('put_item', put_item),
                            ('transact_write_items', transact_write_items)]
    tallies = {name: _Tally() for name, _ in commits}
    acquires, releases = _Tally(), _Tally()
    try:
        for round_number in range(warmup + iterations):
            counted = round_number >= warmup
            lock = measured(acquires, counted, functools.partial(client.acquire_lock, key))
            turn = round_number % len(commits)
            for name, commit in commits[turn:] + commits[:turn]:
                measured(tallies[name], counted, functools.partial(commit, lock))
            measured(releases, counted, functools.partial(client.release_lock, lock, best_effort=False))
    finally:
        client.close()
    results = {name: {**tally.result(), 'published_rule_wcu': PUBLISHED_RULE_WCU[name]}
               for name, tally in tallies.items()}
    acquire, release = acquires.result(), releases.result()
    return {
        'iterations': iterations,
        'item_bytes': item_bytes,
        'data_table': data_table,
        'commits': results,
        'acquire': acquire,
        'release': release,
        'calls_per_acquire_release': acquire['calls'] + release['calls'],
        'consumed_units_per_acquire_release': acquire['consumed_units'] + release['consumed_units'],
    }


def figure_contend_proc(endpoint: str, table: str, params: JsonDict) -> JsonDict:
    """Child of ``contended``: acquire/release random keys of a few until ``end_at`` (wall clock).

    Optional: ``retry_timeout_s`` (each acquire's timeout; else until ``end_at``) and
    ``client_kwargs`` (extra keyword arguments of the client, e.g. ``keep_released_rows``).
    """
    keys = list(params['keys'])
    start_at = float(params['start_at'])
    end_at = float(params['end_at'])
    retry_period = float(params.get('retry_period_s', 0.1))
    hold = float(params.get('hold_ms', 5.0)) / 1000.0
    resource = make_resource(endpoint)
    counter = CallCounter(resource.meta.client, thread_ident=threading.get_ident())
    client = DynamoDBLockClient(resource, table_name=table, **params.get('client_kwargs', {}))
    retry_timeout = params.get('retry_timeout_s')
    rng = random.Random(os.getpid())
    latencies: List[float] = []
    intervals: List[List[Any]] = []
    errors: collections.Counter[str] = collections.Counter()
    time.sleep(max(0.0, start_at - time.time()))
    while time.time() < end_at:
        key = rng.choice(keys)
        started = time.perf_counter()
        try:
            lock = client.acquire_lock(key, retry_period=seconds(retry_period),
                                       retry_timeout=seconds(max(1.0, end_at - time.time()) if retry_timeout is None
                                                             else float(retry_timeout)))
        except DynamoDBLockError as error:
            errors[error.code] += 1
            continue
        held_from = time.time()
        latencies.append(time.perf_counter() - started)
        time.sleep(hold)
        held_until = time.time()
        client.release_lock(lock, best_effort=True)
        intervals.append([key, held_from, held_until])
    calls = counter.snapshot()
    outcomes = counter.outcome_snapshot()
    client.close()
    return {
        'acquisitions': len(latencies),
        'latencies': latencies,
        'intervals': intervals,
        'calls': dict(calls),
        'outcomes': dict(outcomes),
        'errors': dict(errors),
    }


def figure_contended(endpoint: str, table: str, params: JsonDict) -> JsonDict:
    """``processes`` processes, one thread each, acquiring random keys out of ``keys`` in a loop."""
    processes = int(params.get('processes', 4))
    key_count = int(params.get('keys', 2))
    duration = float(params.get('duration_s', 15.0))
    retry_period = float(params.get('retry_period_s', 0.1))
    hold_ms = float(params.get('hold_ms', 5.0))
    prefix = unique_prefix('contended')
    start_at = time.time() + float(params.get('startup_s', 3.0))
    child_params = {
        'keys': [f'{prefix}-{index}' for index in range(key_count)],
        'start_at': start_at, 'end_at': start_at + duration,
        'retry_period_s': retry_period, 'hold_ms': hold_ms,
    }
    command = [sys.executable, os.path.abspath(__file__), 'contend-proc', '--endpoint', endpoint,
               '--table', table, '--params', json.dumps(child_params)]
    children = [subprocess.Popen(command, stdout=subprocess.PIPE, text=True) for _ in range(processes)]
    reports: List[JsonDict] = []
    try:
        for child in children:
            output, _ = child.communicate(timeout=duration + 120)
            if child.returncode != 0:
                raise RuntimeError(f'contend-proc exited with {child.returncode}')
            reports.append(json.loads(output.strip().splitlines()[-1]))
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
                child.wait()
    latencies = [value for report in reports for value in report['latencies']]
    acquisitions = sum(report['acquisitions'] for report in reports)
    calls: collections.Counter[str] = collections.Counter()
    outcomes: collections.Counter[str] = collections.Counter()
    errors: collections.Counter[str] = collections.Counter()
    for report in reports:
        calls.update(report['calls'])
        outcomes.update(report['outcomes'])
        errors.update(report['errors'])
    overlaps = 0
    by_key: Dict[str, List[List[Any]]] = collections.defaultdict(list)
    for report in reports:
        for key, held_from, held_until in report['intervals']:
            by_key[key].append([held_from, held_until])
    for spans in by_key.values():
        spans.sort()
        for earlier, later in zip(spans, spans[1:]):
            if later[0] < earlier[1]:
                overlaps += 1
    return {
        'processes': processes,
        'keys': key_count,
        'duration_s': duration,
        'retry_period_s': retry_period,
        'hold_ms': hold_ms,
        'acquisitions': acquisitions,
        'acquisitions_per_s': acquisitions / duration,
        'per_process': [report['acquisitions'] for report in reports],
        'acquire_ms': summarise(latencies, 1000.0),
        'acquire_ms_samples': [value * 1000.0 for value in latencies],
        'calls_per_acquisition': (sum(calls.values()) / acquisitions) if acquisitions else None,
        'operations': dict(calls),
        'outcomes': dict(outcomes),
        'errors': dict(errors),
        'overlapping_holds': overlaps,
    }


FIGURES: Dict[str, Callable[[str, str, JsonDict], JsonDict]] = {
    'calls': figure_calls,
    'calls_async': figure_calls_async,
    'close': figure_close,
    'takeover': figure_takeover,
    'hold': figure_hold,
    'handoff': figure_handoff,
    'handoff_async': figure_handoff_async,
    'capacity': figure_capacity,
    'capacity_async': figure_capacity_async,
    'cpu': figure_cpu,
    'cpu_async': figure_cpu_async,
    'cycles': figure_cycles,
    'cycles_async': figure_cycles_async,
    'contended': figure_contended,
    'guarded': figure_guarded,
    'ceiling': figure_ceiling,
    'contend-proc': figure_contend_proc,
}


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('figure', choices=sorted(FIGURES))
    parser.add_argument('--endpoint', required=True, help='DynamoDB endpoint URL')
    parser.add_argument('--table', required=True, help='lock table name')
    parser.add_argument('--params', default='{}', help='JSON object of figure parameters')
    arguments = parser.parse_args(argv)
    logging.basicConfig(level=os.environ.get('BENCH_LOG_LEVEL', 'WARNING'), stream=sys.stderr,
                        format='%(asctime)s %(process)d %(threadName)s %(name)s %(levelname)s %(message)s')
    import python_dynamodb_lock

    result = FIGURES[arguments.figure](arguments.endpoint, arguments.table, json.loads(arguments.params))
    result['implementation_path'] = os.path.dirname(os.path.abspath(python_dynamodb_lock.__file__))
    sys.stdout.write(json.dumps(result) + '\n')
    sys.stdout.flush()
    sys.stderr.flush()
    # Background heartbeat threads of the client (and, for the published package, threads that sleep
    # a whole heartbeat period) must not hold the process up once the figure is printed.
    os._exit(0)


if __name__ == '__main__':
    main()
