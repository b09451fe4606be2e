"""Shared (read) locks: throughput with one writer and N readers on one key.

Run from the repository root, with DynamoDB Local installed as for the tests::

    python benchmarks/shared_locks.py                      # N = 1, 4, 16; 15 s each
    python benchmarks/shared_locks.py --readers 4 --duration 5

Every reader is a thread with a lock client of its own that, until the end of the run, acquires
the key shared (``retry_period`` as given), holds it for ``--hold-ms`` and releases it. One
writer thread, with a client of its own, acquires the key exclusively, holds it as long, releases
it and pauses for ``--writer-pause-ms``. A waiting writer sets its writer-waiting marker, so new
readers stop joining until it had its turn (docs/shared_locks.rst). Printed per N: reader and
writer acquisitions per second, and the writer's wait (from the call to the lock) at p50 and p99.

It is a benchmark: the figures depend on the machine and its load; nothing asserts them.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
import uuid
from datetime import timedelta
from typing import Any, Dict, List, Sequence

from run_benchmarks import REPO_ROOT, Engine, create_lock_table, log

sys.path.insert(0, str(REPO_ROOT))

from python_dynamodb_lock.python_dynamodb_lock import DynamoDBLockClient  # noqa: E402


def percentile(values: Sequence[float], fraction: float) -> float:
    if not values:
        return float('nan')
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def run(engine: Engine, table: str, readers: int, arguments: argparse.Namespace) -> Dict[str, Any]:
    import boto3

    resource = boto3.resource('dynamodb', endpoint_url=engine.endpoint_url, region_name='us-east-1',
                              aws_access_key_id='benchmark', aws_secret_access_key='benchmark')
    periods = {'heartbeat_period': timedelta(seconds=1), 'safe_period': timedelta(seconds=4),
               'lease_duration': timedelta(seconds=6)}
    key = f'shared-{uuid.uuid4().hex[:8]}'
    retry = timedelta(seconds=arguments.retry_period)
    hold = arguments.hold_ms / 1000
    stop = threading.Event()
    counts = {'reader': 0, 'writer': 0}
    waits: List[float] = []
    errors: List[BaseException] = []
    guard = threading.Lock()
    clients = [DynamoDBLockClient(resource, table_name=table, owner_name=f'reader-{index}', **periods)
               for index in range(readers)]
    writer_client = DynamoDBLockClient(resource, table_name=table, owner_name='writer', **periods)

    def reader(client: DynamoDBLockClient) -> None:
        try:
            while not stop.is_set():
                lock = client.acquire_lock(key, shared=True, retry_period=retry, retry_timeout=timedelta(minutes=5))
                time.sleep(hold)
                lock.release(best_effort=False)
                with guard:
                    counts['reader'] += 1
        except BaseException as exc:  # noqa: BLE001 - reported
            errors.append(exc)

    def writer() -> None:
        try:
            while not stop.is_set():
                started = time.monotonic()
                lock = writer_client.acquire_lock(key, retry_period=retry, retry_timeout=timedelta(minutes=5))
                waits.append(time.monotonic() - started)
                time.sleep(hold)
                lock.release(best_effort=False)
                with guard:
                    counts['writer'] += 1
                time.sleep(arguments.writer_pause_ms / 1000)
        except BaseException as exc:  # noqa: BLE001 - reported
            errors.append(exc)

    threads = [threading.Thread(target=reader, args=(client,)) for client in clients]
    threads.append(threading.Thread(target=writer))
    started = time.monotonic()
    for thread in threads:
        thread.start()
    time.sleep(arguments.duration)
    stop.set()
    for thread in threads:
        thread.join()
    elapsed = time.monotonic() - started
    for client in [*clients, writer_client]:
        client.close()
    return {'readers': readers, 'reader_per_s': counts['reader'] / elapsed, 'writer_per_s': counts['writer'] / elapsed,
            'writer_wait_p50': percentile(waits, 0.5), 'writer_wait_p99': percentile(waits, 0.99),
            'writer_waits': len(waits), 'errors': [repr(error) for error in errors]}


def main(argv: Sequence[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--readers', type=int, action='append', help='N (repeatable; default 1, 4, 16)')
    parser.add_argument('--duration', type=float, default=15.0, help='seconds per N')
    parser.add_argument('--hold-ms', type=float, default=5.0)
    parser.add_argument('--writer-pause-ms', type=float, default=50.0)
    parser.add_argument('--retry-period', type=float, default=0.05, help='seconds between polls of a waiter')
    parser.add_argument('--endpoint', help='a running DynamoDB endpoint instead of starting DynamoDB Local')
    arguments = parser.parse_args(list(argv) or None)
    engine = Engine(arguments.endpoint)
    table = f'shared-locks-{uuid.uuid4().hex[:8]}'
    results: List[Dict[str, Any]] = []
    try:
        create_lock_table(engine.client(), table)
        for readers in arguments.readers or [1, 4, 16]:
            log(f'1 writer, {readers} readers, {arguments.duration:g} s')
            results.append(run(engine, table, readers, arguments))
    finally:
        engine.stop()
    settings = (f'hold {arguments.hold_ms:g} ms, writer pause {arguments.writer_pause_ms:g} ms, retry_period '
                f'{arguments.retry_period:g} s, {arguments.duration:g} s per N')
    print(f'{settings}; {os.cpu_count()} cores, load average {getattr(os, "getloadavg", lambda: None)()}')
    print(f'{"readers":>7}  {"reader acq/s":>12}  {"writer acq/s":>12}  {"writer wait p50":>15}  '
          f'{"p99":>8}  errors')
    for result in results:
        print(f'{result["readers"]:>7}  {result["reader_per_s"]:>12.1f}  {result["writer_per_s"]:>12.1f}  '
              f'{result["writer_wait_p50"] * 1000:>13.1f}ms  {result["writer_wait_p99"] * 1000:>6.1f}ms  '
              f'{len(result["errors"])}')
    if any(result['errors'] for result in results):
        print('errors:', statistics.mode([error for result in results for error in result['errors']]))


if __name__ == '__main__':
    main(sys.argv[1:])
