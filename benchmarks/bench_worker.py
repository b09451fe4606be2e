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
``close``
    Duration of ``close()`` for a client with the default heartbeat period that holds one lock.
``takeover``
    Time from the SIGKILL of a lock holder (a child process) until a waiting client owns the lock.
``handoff``
    Threads of one client contending for one key: time from a ``release_lock`` call to the next
    holder's ``acquire_lock`` returning.
``capacity``
    How many locks one client keeps alive when every DynamoDB call takes a fixed latency. A
    ``before-send`` hook sleeps and answers every call itself, so no engine is involved. The
    ``client_kwargs`` parameter passes extra keyword arguments to the client (for this project,
    ``heartbeat_batch_size``); heartbeats are counted whether they are sent one per UpdateItem call or
    as ``UPDATE`` statements of a PartiQL BatchExecuteStatement call.
``contended``
    Several processes acquiring and releasing a few keys in a loop (spawns ``contend-proc`` children).
``ceiling``
    No lock client: threads calling ``update_item`` as fast as one boto3 client allows when every
    call takes a fixed latency; the ceiling that ``capacity`` runs into.

The worker never asserts anything about timings: it only reports what it measured.
"""
from __future__ import annotations

import argparse
import collections
import datetime
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
from typing import Any, Callable, Dict, Iterator, List, Optional

import boto3
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
    or ``exception``. With ``thread_ident`` set, only calls made by that thread are counted, so
    that background heartbeats do not pollute a per-operation count.
    """

    def __init__(self, client: Any, thread_ident: Optional[int] = None) -> None:
        self.counts: collections.Counter[str] = collections.Counter()
        self.outcomes: collections.Counter[str] = collections.Counter()
        self._thread_ident = thread_ident
        self._guard = threading.Lock()
        client.meta.events.register('after-call.dynamodb.*', self._on_response)
        client.meta.events.register('after-call-error.dynamodb.*', self._on_exception)

    def _counted(self) -> bool:
        return self._thread_ident is None or threading.get_ident() == self._thread_ident

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


class _CannedBody:
    """The minimum of a urllib3 response that botocore's ``AWSResponse`` reads: ``stream()``."""

    def __init__(self, body: bytes) -> None:
        self._body = body

    def stream(self, **_: Any) -> Iterator[bytes]:
        yield self._body


class CannedDynamoDB:
    """A ``before-send`` hook that answers every DynamoDB call itself after a fixed latency.

    Each answer is a well-formed success: ``{}`` is a valid response for GetItem (no item),
    PutItem (no old item), UpdateItem and DeleteItem; a BatchExecuteStatement call gets one
    success entry (``{"TableName": ...}``, no ``Error``) per statement, in order. The hook sleeps
    ``latency`` seconds first, releasing the GIL as a real network wait would.

    Counts answered calls per operation (``counts``), the statements inside BatchExecuteStatement
    calls by their first word (``statements``: ``UPDATE``, ...), and heartbeats: UpdateItem calls
    plus ``UPDATE`` statements inside BatchExecuteStatement calls.
    """

    _HEADERS = {'x-amzn-RequestId': 'benchmark', 'Content-Type': 'application/x-amz-json-1.0'}
    _TABLE_IN_STATEMENT = re.compile(r'\b(?:UPDATE|FROM|INTO)\s+"((?:[^"]|"")+)"', re.IGNORECASE)

    def __init__(self, client: Any, latency: float, table_name: str = 'benchmark') -> None:
        self.latency = latency
        self.table_name = table_name
        self.counts: collections.Counter[str] = collections.Counter()
        self.statements: collections.Counter[str] = collections.Counter()
        self.heartbeats = 0
        self._guard = threading.Lock()
        client.meta.events.register('before-send.dynamodb.*', self._answer)

    def _answer(self, request: AWSPreparedRequest, event_name: str, **_: Any) -> AWSResponse:
        if self.latency > 0:
            time.sleep(self.latency)
        operation = event_name.rsplit('.', 1)[-1]
        body = b'{}'
        verbs: List[str] = []
        if operation == 'BatchExecuteStatement':
            statements = self._request_json(request).get('Statements') or []
            verbs = [self._verb(statement.get('Statement', '')) for statement in statements]
            body = json.dumps({'Responses': [
                {'TableName': self._table_of(statement.get('Statement', ''))} for statement in statements
            ]}).encode()
        with self._guard:
            self.counts[operation] += 1
            self.statements.update(verbs)
            if operation == 'UpdateItem':
                self.heartbeats += 1
            else:
                self.heartbeats += verbs.count('UPDATE')
        return AWSResponse(request.url, 200, dict(self._HEADERS), _CannedBody(body))

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

def figure_calls(endpoint: str, table: str, params: JsonDict) -> JsonDict:
    """Uncontended acquire + release on one key, ``iterations`` times (after ``warmup`` rounds)."""
    iterations = int(params.get('iterations', 300))
    warmup = int(params.get('warmup', 20))
    resource = make_resource(endpoint)
    counter = CallCounter(resource.meta.client, thread_ident=threading.get_ident())
    client = DynamoDBLockClient(resource, table_name=table)
    key = unique_prefix('calls')
    acquire_times: List[float] = []
    release_times: List[float] = []
    pair_times: List[float] = []
    acquire_calls: collections.Counter[str] = collections.Counter()
    release_calls: collections.Counter[str] = collections.Counter()
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
            if round_number < warmup:
                continue
            acquire_times.append(acquired - started)
            release_times.append(released - acquired)
            pair_times.append(released - started)
            acquire_calls.update(after_acquire - before_acquire)
            release_calls.update(after_release - after_acquire)
    finally:
        client.close()
    cpu_acquire, cpu_release = _client_cpu_per_acquire_release(table, int(params.get('cpu_iterations', 1000)))
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
        'acquire_ms': summarise(acquire_times, 1000.0),
        'release_ms': summarise(release_times, 1000.0),
        'acquire_release_ms': summarise(pair_times, 1000.0),
        'samples_ms': {
            'acquire': [value * 1000.0 for value in acquire_times],
            'release': [value * 1000.0 for value in release_times],
            'acquire_release': [value * 1000.0 for value in pair_times],
        },
    }


def _client_cpu_per_acquire_release(table: str, iterations: int) -> tuple:
    """CPU seconds this process spends per acquire and per release, with no engine and no wait.

    Every call is answered at once by :class:`CannedDynamoDB`, so what is measured is the client's
    own work plus botocore's (building, signing and parsing each call).
    """
    resource = make_resource('http://127.0.0.1:9')
    CannedDynamoDB(resource.meta.client, 0.0)
    client = DynamoDBLockClient(resource, table_name=table)
    key = unique_prefix('cpu')
    for _ in range(min(100, iterations)):
        client.release_lock(client.acquire_lock(key))
    acquire_cpu = release_cpu = 0.0
    for _ in range(iterations):
        started = time.process_time()
        lock = client.acquire_lock(key)
        acquired = time.process_time()
        client.release_lock(lock)
        acquire_cpu += acquired - started
        release_cpu += time.process_time() - acquired
    return acquire_cpu / iterations, release_cpu / iterations


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


def figure_handoff(endpoint: str, table: str, params: JsonDict) -> JsonDict:
    """Threads of one default-configured client contending for one key.

    Each thread acquires (blocking, default retry_period), holds ``hold_ms``, notes the time and
    releases; then waits until another thread has taken the lock before competing again, so that
    every measured interval is a real handoff between two threads.
    """
    threads = int(params.get('threads', 3))
    duration = float(params.get('duration_s', 30.0))
    max_handoffs = int(params.get('max_handoffs', 200))
    hold = float(params.get('hold_ms', 10.0)) / 1000.0
    resource = make_resource(endpoint)
    client = DynamoDBLockClient(resource, table_name=table)
    key = unique_prefix('handoff')
    state = threading.Condition()
    latencies: List[float] = []
    generation = [0]
    last_release: List[Optional[float]] = [None]
    stop = threading.Event()
    errors: List[str] = []
    deadline = time.monotonic() + duration

    def contend() -> None:
        while not stop.is_set():
            try:
                lock = client.acquire_lock(key, retry_timeout=seconds(duration + 60))
            except DynamoDBLockError as error:
                errors.append(error.code)
                return
            acquired = time.monotonic()
            with state:
                if last_release[0] is not None:
                    latencies.append(acquired - last_release[0])
                generation[0] += 1
                my_generation = generation[0]
                if len(latencies) >= max_handoffs or acquired >= deadline:
                    stop.set()
                state.notify_all()
            time.sleep(hold)
            with state:
                last_release[0] = time.monotonic()
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
    elapsed = time.monotonic() - started
    return {
        'threads': threads,
        'retry_period_s': DynamoDBLockClient._DEFAULT_HEARTBEAT_PERIOD.total_seconds(),
        'elapsed_s': elapsed,
        'handoffs': len(latencies),
        'errors': errors,
        'handoff_ms': summarise(latencies, 1000.0),
    }


def figure_capacity(endpoint: str, table: str, params: JsonDict) -> JsonDict:
    """Whether one client keeps ``locks`` locks alive at ``latency_ms`` per call.

    The client has the default configuration plus ``client_kwargs`` (a JSON object of keyword
    arguments for ``DynamoDBLockClient``, e.g. ``{"heartbeat_batch_size": 25}``; empty by default,
    and only meaningful for an implementation that has those arguments). Every DynamoDB call is
    answered by a ``before-send`` hook after ``latency_ms`` (no engine). After acquiring all locks
    and ``warmup_periods`` heartbeat periods, the worker measures for ``measure_periods`` periods:
    the heartbeat rate achieved (UpdateItem calls plus ``UPDATE`` statements inside
    BatchExecuteStatement calls, per second), the DynamoDB calls per second, the CPU time per
    heartbeat, and during the last period the largest age of any lock's last successful write
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
    callbacks: collections.Counter[str] = collections.Counter()
    callback_guard = threading.Lock()

    def on_callback(code: str, lock: Any) -> None:
        with callback_guard:
            callbacks[code] += 1

    client = DynamoDBLockClient(resource, table_name=table, **client_kwargs)
    period = DynamoDBLockClient._DEFAULT_HEARTBEAT_PERIOD.total_seconds()
    prefix = unique_prefix('capacity')
    acquire_started = time.monotonic()
    with ThreadPoolExecutor(max_workers=acquire_threads) as pool:
        locks = list(pool.map(
            lambda index: client.acquire_lock(f'{prefix}-{index}', app_callback=on_callback),
            range(locks_wanted),
        ))
    acquire_seconds = time.monotonic() - acquire_started
    acquire_calls = dict(canned.counts)
    time.sleep(warmup_periods * period)

    heartbeats_before, calls_before = canned.snapshot()
    statements_before = collections.Counter(canned.statements)
    cpu_before = time.process_time()
    measure_started = time.monotonic()
    measure_end = measure_started + measure_periods * period
    staleness_from = measure_end - period
    worst_staleness = 0.0
    while True:
        now = time.monotonic()
        if now >= measure_end:
            break
        if now >= staleness_from:
            oldest = min(lock.last_updated_time for lock in locks)
            worst_staleness = max(worst_staleness, time.monotonic() - oldest)
        time.sleep(min(0.25, measure_end - now))
    measured = time.monotonic() - measure_started
    cpu = time.process_time() - cpu_before
    heartbeats_after, calls_after = canned.snapshot()
    heartbeats = heartbeats_after - heartbeats_before
    operations = calls_after - calls_before
    statements = collections.Counter(canned.statements) - statements_before
    calls = sum(operations.values())
    batches = operations.get('BatchExecuteStatement', 0)
    required_rate = locks_wanted / period
    achieved_rate = heartbeats / measured
    with callback_guard:
        seen_callbacks = dict(callbacks)
    kept_alive = (
        achieved_rate >= 0.95 * required_rate
        and worst_staleness <= 1.5 * period
        and not seen_callbacks
    )
    return {
        'locks': locks_wanted,
        'latency_ms': latency * 1000.0,
        'heartbeat_period_s': period,
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
        'worst_staleness_s': worst_staleness,
        'cpu_s': cpu,
        'cpu_ms_per_heartbeat': (cpu / heartbeats * 1000.0) if heartbeats else None,
        'cpu_ms_per_call': (cpu / calls * 1000.0) if calls else None,
        'callbacks': seen_callbacks,
        'kept_alive': kept_alive,
    }


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


def figure_contend_proc(endpoint: str, table: str, params: JsonDict) -> JsonDict:
    """Child of ``contended``: acquire/release random keys of a few until ``end_at`` (wall clock)."""
    keys = list(params['keys'])
    start_at = float(params['start_at'])
    end_at = float(params['end_at'])
    retry_period = float(params.get('retry_period_s', 0.1))
    hold = float(params.get('hold_ms', 5.0)) / 1000.0
    resource = make_resource(endpoint)
    counter = CallCounter(resource.meta.client, thread_ident=threading.get_ident())
    client = DynamoDBLockClient(resource, table_name=table)
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
                                       retry_timeout=seconds(max(1.0, end_at - time.time())))
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
    'close': figure_close,
    'takeover': figure_takeover,
    'hold': figure_hold,
    'handoff': figure_handoff,
    'capacity': figure_capacity,
    'contended': figure_contended,
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
