"""Acquiring k keys: ``acquire_locks`` (one transaction) against k single ``acquire_lock`` calls
in a fixed order, on DynamoDB Local, for k = 1, 5, 25, 100; and, side by side in the same run,
the published 0.9.1 package's k single ``acquire_lock`` calls (it has no way to take several
keys at once), in a process of its own.

Usage (from the repository root)::

    python benchmarks/multi_keys.py                 # 50 cycles per figure
    python benchmarks/multi_keys.py --cycles 5      # a smoke run
    python benchmarks/multi_keys.py --endpoint http://127.0.0.1:8000

Each cycle acquires the k keys (uncontended) and releases them; only the acquisition is timed.
Printed per way and k: DynamoDB calls per acquisition and per release (counted by a botocore
hook), and the acquisition's p50 and p99 in milliseconds. The engine is started and warmed up
as ``run_benchmarks.py`` does. Nothing is asserted: the figures are only printed (and written as
JSON with ``--output``). What a transaction costs on DynamoDB itself (two write units per item)
is on the "Several keys at once" page of the documentation.
"""
from __future__ import annotations

import argparse
import datetime
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))
if '--published-worker' in sys.argv:    # this process measures the published package found there
    sys.path.insert(0, sys.argv[sys.argv.index('--published-worker') + 1])

from run_benchmarks import (IMPLEMENTATIONS, TABLE_NAME, Engine, create_lock_table, install_published, log,  # noqa: E402
                            warm_up_engine)

SIZES = (1, 5, 25, 100)


def parse_arguments(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--cycles', type=int, default=50, help='acquisitions per way and k (default 50)')
    parser.add_argument('--sizes', default=','.join(map(str, SIZES)), help='values of k (default 1,5,25,100)')
    parser.add_argument('--endpoint', help='a running DynamoDB endpoint (default: start DynamoDB Local)')
    parser.add_argument('--warm-up', type=float, default=5.0, help='seconds of engine warm-up (default 5)')
    parser.add_argument('--output', type=Path, help='write the figures as JSON here')
    parser.add_argument('--no-published', action='store_true', help='leave the published 0.9.1 package out')
    parser.add_argument('--published-worker', help=argparse.SUPPRESS)   # internal: measure the package there
    return parser.parse_args(argv)


def percentile(values: Sequence[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(fraction * (len(ordered) - 1))))]


class CallCounter:
    """Counts the DynamoDB calls made on a boto3 client (a ``before-call`` hook)."""

    def __init__(self, client: Any) -> None:
        self.count = 0
        client.meta.events.register('before-call.dynamodb', self._seen)

    def _seen(self, **kwargs: Any) -> None:
        self.count += 1


def measure(way: str, k: int, cycles: int, client: Any, counter: CallCounter,
            prefix: str = 'bench') -> Dict[str, Any]:
    keys = [f'{prefix}-{k}-{index}' for index in range(k)]

    def acquire_each() -> Callable[[], None]:
        locks = [client.acquire_lock(key, retry_timeout=datetime.timedelta(0)) for key in keys]

        def release() -> None:
            for lock in locks:
                lock.release(best_effort=False)

        return release

    def acquire_all() -> Callable[[], None]:
        multi = client.acquire_locks(keys, retry_timeout=datetime.timedelta(0))
        return lambda: multi.release(best_effort=False)

    acquire = acquire_all if way == 'acquire_locks' else acquire_each
    latencies: List[float] = []
    acquire_calls = release_calls = 0
    for _ in range(cycles):
        before = counter.count
        started = time.perf_counter()
        release = acquire()
        latencies.append((time.perf_counter() - started) * 1000.0)
        middle = counter.count
        release()
        acquire_calls += middle - before
        release_calls += counter.count - middle
    return {'way': way, 'k': k, 'cycles': cycles, 'calls_per_acquire': acquire_calls / cycles,
            'calls_per_release': release_calls / cycles, 'p50_ms': statistics.median(latencies),
            'p99_ms': percentile(latencies, 0.99)}


def make_resource(endpoint_url: str) -> Any:
    import boto3

    return boto3.resource('dynamodb', endpoint_url=endpoint_url, region_name='us-east-1',
                          aws_access_key_id='benchmark', aws_secret_access_key='benchmark')


def published_worker(arguments: argparse.Namespace) -> int:
    """In a process of its own: the published package's k single acquires, as JSON rows."""
    from python_dynamodb_lock.python_dynamodb_lock import DynamoDBLockClient as PublishedClient

    resource = make_resource(str(arguments.endpoint))
    counter = CallCounter(resource.meta.client)
    client = PublishedClient(resource, table_name=TABLE_NAME, owner_name='multi-keys-benchmark-0.9.1')
    rows = []
    try:
        for k in (int(size) for size in arguments.sizes.split(',')):
            # Keys of its own: the published client takes a kept released row for a held lock.
            row = measure('acquire_lock x k', k, arguments.cycles, client, counter, prefix='published')
            row['way'] = '0.9.1 acquire_lock x k'
            rows.append(row)
    finally:
        client.close()
    print(json.dumps(rows))
    return 0


def measure_published(arguments: argparse.Namespace, endpoint_url: str) -> List[Dict[str, Any]]:
    implementation = IMPLEMENTATIONS['0.9.1']
    install_published(implementation)
    log(f'published 0.9.1: acquire_lock x k, {arguments.cycles} cycles per k')
    done = subprocess.run([sys.executable, str(Path(__file__).resolve()), '--published-worker',
                           str(implementation.path), '--endpoint', endpoint_url, '--cycles', str(arguments.cycles),
                           '--sizes', arguments.sizes], check=True, capture_output=True, text=True)
    rows: List[Dict[str, Any]] = json.loads(done.stdout.strip().splitlines()[-1])
    return rows


def main(argv: Optional[Sequence[str]] = None) -> int:
    arguments = parse_arguments(argv)
    if arguments.published_worker:
        return published_worker(arguments)
    from python_dynamodb_lock import DynamoDBLockClient

    engine = Engine(arguments.endpoint)
    rows: List[Dict[str, Any]] = []
    try:
        low_level = engine.client()
        create_lock_table(low_level, TABLE_NAME)
        log(f'warming the engine up for {arguments.warm_up}s')
        warm_up_engine(low_level, TABLE_NAME, arguments.warm_up)
        resource = make_resource(engine.endpoint_url)
        counter = CallCounter(resource.meta.client)
        client = DynamoDBLockClient(resource, table_name=TABLE_NAME, owner_name='multi-keys-benchmark',
                                    background_heartbeats=False)
        try:
            for k in (int(size) for size in arguments.sizes.split(',')):
                for way in ('acquire_locks', 'acquire_lock x k'):
                    log(f'{way}, k={k}, {arguments.cycles} cycles')
                    rows.append(measure(way, k, arguments.cycles, client, counter))
        finally:
            client.close()
        if not arguments.no_published:
            rows.extend(measure_published(arguments, engine.endpoint_url))
    finally:
        engine.stop()
    print(f'\n{"way":<24} {"k":>4} {"calls/acquire":>14} {"calls/release":>14} {"p50 ms":>9} {"p99 ms":>9}')
    for row in rows:
        print(f'{row["way"]:<24} {row["k"]:>4} {row["calls_per_acquire"]:>14.1f} {row["calls_per_release"]:>14.1f} '
              f'{row["p50_ms"]:>9.2f} {row["p99_ms"]:>9.2f}')
    if arguments.output is not None:
        arguments.output.write_text(json.dumps({'engine': engine.name, 'rows': rows}, indent=2))
    return 0


if __name__ == '__main__':
    sys.exit(main())
