"""Acquiring k keys: ``acquire_locks`` (one transaction) against k single ``acquire_lock`` calls
in a fixed order, on DynamoDB Local, for k = 1, 5, 25, 100.

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
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from run_benchmarks import TABLE_NAME, Engine, create_lock_table, log, warm_up_engine  # noqa: E402

SIZES = (1, 5, 25, 100)


def parse_arguments(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--cycles', type=int, default=50, help='acquisitions per way and k (default 50)')
    parser.add_argument('--sizes', default=','.join(map(str, SIZES)), help='values of k (default 1,5,25,100)')
    parser.add_argument('--endpoint', help='a running DynamoDB endpoint (default: start DynamoDB Local)')
    parser.add_argument('--warm-up', type=float, default=5.0, help='seconds of engine warm-up (default 5)')
    parser.add_argument('--output', type=Path, help='write the figures as JSON here')
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


def measure(way: str, k: int, cycles: int, client: Any, counter: CallCounter) -> Dict[str, Any]:
    keys = [f'bench-{k}-{index}' for index in range(k)]

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


def main(argv: Optional[Sequence[str]] = None) -> int:
    arguments = parse_arguments(argv)
    import boto3

    from python_dynamodb_lock import DynamoDBLockClient

    engine = Engine(arguments.endpoint)
    rows: List[Dict[str, Any]] = []
    try:
        low_level = engine.client()
        create_lock_table(low_level, TABLE_NAME)
        log(f'warming the engine up for {arguments.warm_up}s')
        warm_up_engine(low_level, TABLE_NAME, arguments.warm_up)
        resource = boto3.resource('dynamodb', endpoint_url=engine.endpoint_url, region_name='us-east-1',
                                  aws_access_key_id='benchmark', aws_secret_access_key='benchmark')
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
    finally:
        engine.stop()
    print(f'\n{"way":<18} {"k":>4} {"calls/acquire":>14} {"calls/release":>14} {"p50 ms":>9} {"p99 ms":>9}')
    for row in rows:
        print(f'{row["way"]:<18} {row["k"]:>4} {row["calls_per_acquire"]:>14.1f} {row["calls_per_release"]:>14.1f} '
              f'{row["p50_ms"]:>9.2f} {row["p99_ms"]:>9.2f}')
    if arguments.output is not None:
        arguments.output.write_text(json.dumps({'engine': engine.name, 'rows': rows}, indent=2))
    return 0


if __name__ == '__main__':
    sys.exit(main())
