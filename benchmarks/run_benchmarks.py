"""Benchmark this project's lock client side by side with the published ``python_dynamodb_lock``.

Run from the repository root::

    python benchmarks/run_benchmarks.py            # full run, about 16 minutes on 2 cores
    python benchmarks/run_benchmarks.py --quick    # smoke run, about 5 minutes

What it does:

1. Installs the published releases, if missing, into ``benchmarks/results/_work/`` with
   ``pip install --no-deps --target``: ``python-dynamodb-lock==0.9.1`` and the fork
   ``python-dynamodb-lock-whatnick==0.9.3``. Both install the import package
   ``python_dynamodb_lock``, the same name as this project, so no implementation is ever imported
   into this process: each figure is measured by ``bench_worker.py`` in a subprocess whose
   ``PYTHONPATH`` names exactly one implementation.
2. Starts DynamoDB Local on 127.0.0.1 with ``python_dynamodb_lock._embedded.start_dynamodb_local()``
   (or uses ``--endpoint``), creates the lock table with the low-level ``create_table`` call, and
   warms the engine up.
3. Measures every figure for every implementation, prints a table and writes ``results.json``,
   ``results_table.rst`` (included by ``docs/performance.rst``) and ``benchmark.png`` (needs
   matplotlib: ``pip install -r benchmarks/requirements.txt``; without it the plot is skipped).
   Some figures are measured for this project only, since the published releases have no such
   thing: ``calls_async``, ``handoff_async`` and ``capacity_async_batched`` (the asyncio client,
   ``AsyncDynamoDBLockClient``; ``calls_async`` runs in the rounds of ``calls``, right after this
   project's threaded client), ``capacity_batched`` (heartbeats batched into PartiQL
   ``BatchExecuteStatement`` calls) and ``guarded`` (guarded writes against plain ones).

A full run writes to ``benchmarks/results/``; ``--quick`` writes to ``benchmarks/results/_work/quick/``
unless ``--output`` says otherwise, so a smoke run never replaces the published figures.

Nothing here asserts a timing: the targets are printed next to the figures, for a reader to judge.
"""
from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import math
import os
import platform
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parent
WORKER = HERE / 'bench_worker.py'
DEFAULT_OUTPUT = HERE / 'results'
WORK_DIR = HERE / 'results' / '_work'
TABLE_NAME = 'BenchmarkLockTable'

JsonDict = Dict[str, Any]


@dataclass(frozen=True)
class Implementation:
    """One implementation of the import package ``python_dynamodb_lock`` and where it lives."""

    label: str
    path: Path
    pip_requirement: Optional[str] = None  # None for this project (never installed)

    def package_dir(self) -> Path:
        return self.path / 'python_dynamodb_lock'

    def available(self) -> bool:
        return (self.package_dir() / 'python_dynamodb_lock.py').is_file()


# How the table and the plot name each implementation.
DISPLAY_NAMES = {'ours': 'this package', '0.9.1': 'published 0.9.1', '0.9.3': 'fork 0.9.3'}
PLOT_NAMES = {'ours': 'this package', '0.9.1': '0.9.1', '0.9.3': '0.9.3 fork'}

IMPLEMENTATIONS: Dict[str, Implementation] = {
    'ours': Implementation('ours', REPO_ROOT),
    '0.9.1': Implementation('0.9.1', WORK_DIR / 'published-0.9.1', 'python-dynamodb-lock==0.9.1'),
    '0.9.3': Implementation('0.9.3', WORK_DIR / 'published-0.9.3', 'python-dynamodb-lock-whatnick==0.9.3'),
}


@dataclass
class Settings:
    """Sizes of every figure; ``--quick`` shrinks them."""

    quick: bool
    warm_up_s: float = 20.0
    calls_rounds: int = 3
    contended_rounds: int = 3
    calls: JsonDict = field(default_factory=dict)
    close: JsonDict = field(default_factory=dict)
    takeover: JsonDict = field(default_factory=dict)
    handoff: JsonDict = field(default_factory=dict)
    capacity: JsonDict = field(default_factory=dict)
    capacity_ladder: List[int] = field(default_factory=list)
    # The second capacity figure, for this project only: the same conditions, with these extra
    # keyword arguments for the client (heartbeats batched into PartiQL BatchExecuteStatement calls).
    capacity_batched_kwargs: JsonDict = field(default_factory=lambda: {'heartbeat_batch_size': 25})
    capacity_batched_ladder: List[int] = field(default_factory=list)
    # The asyncio client on one event loop, heartbeats batched as above (capacity_batched_kwargs).
    capacity_async_batched_ladder: List[int] = field(default_factory=list)
    contended: JsonDict = field(default_factory=dict)
    guarded: JsonDict = field(default_factory=dict)

    @classmethod
    def for_run(cls, quick: bool) -> 'Settings':
        if quick:
            return cls(
                quick=True,
                warm_up_s=8.0,
                calls_rounds=2,
                contended_rounds=1,
                calls={'iterations': 60, 'warmup': 20, 'cpu_iterations': 300},
                close={'samples': 2},
                takeover={'lease_s': 2.0, 'retry_period_s': 0.5, 'cap_s': 6.0, 'samples': 1},
                handoff={'threads': 3, 'duration_s': 10.0, 'max_handoffs': 50, 'hold_ms': 10.0},
                capacity={'latency_ms': 10.0, 'warmup_periods': 1.0, 'measure_periods': 2.0},
                capacity_ladder=[250, 2000],
                capacity_batched_ladder=[500, 2500],
                capacity_async_batched_ladder=[2500, 20000],
                contended={'processes': 4, 'keys': 2, 'duration_s': 5.0, 'retry_period_s': 0.1,
                           'hold_ms': 5.0},
                guarded={'iterations': 60, 'warmup': 20, 'item_bytes': 200},
            )
        return cls(
            quick=False,
            warm_up_s=20.0,
            calls_rounds=3,
            contended_rounds=3,
            calls={'iterations': 200, 'warmup': 30, 'cpu_iterations': 1000},
            close={'samples': 4},
            takeover={'lease_s': 2.0, 'retry_period_s': 0.5, 'cap_s': 15.0, 'samples': 3},
            handoff={'threads': 3, 'duration_s': 25.0, 'max_handoffs': 200, 'hold_ms': 10.0},
            capacity={'latency_ms': 10.0, 'warmup_periods': 1.0, 'measure_periods': 3.0},
            capacity_ladder=[250, 1000, 2500, 5000, 10000],
            capacity_batched_ladder=[2500, 10000, 20000],
            capacity_async_batched_ladder=[5000, 20000, 40000],
            contended={'processes': 4, 'keys': 2, 'duration_s': 5.0, 'retry_period_s': 0.1,
                       'hold_ms': 5.0},
            guarded={'iterations': 200, 'warmup': 30, 'item_bytes': 200},
        )


# Figures measured for each implementation by default. The 0.9.3 fork differs from 0.9.1 only in
# how acquire_lock decides that a holder is dead, so it is measured where acquiring matters.
DEFAULT_PLAN: Dict[str, Sequence[str]] = {
    'calls': ('ours', '0.9.1', '0.9.3'),
    'calls_async': ('ours',),
    'close': ('ours', '0.9.1'),
    'takeover': ('ours', '0.9.1', '0.9.3'),
    'handoff': ('ours', '0.9.1'),
    'handoff_async': ('ours',),
    'capacity': ('ours', '0.9.1'),
    'capacity_batched': ('ours',),
    'capacity_async_batched': ('ours',),
    'contended': ('ours', '0.9.1', '0.9.3'),
    'guarded': ('ours',),
}

# Figures that only this project can be measured for (they use constructor arguments, the asyncio
# client or lock methods the published releases do not have); ``--every-figure-for-0.9.3`` does not
# add 0.9.3 to them.
OURS_ONLY = frozenset({'calls_async', 'handoff_async', 'capacity_batched', 'capacity_async_batched', 'guarded'})

# The worker figure that measures each figure, and the settings it takes its parameters from, where
# they are not the figure's own name.
WORKER_FIGURES = {'capacity_batched': 'capacity', 'capacity_async_batched': 'capacity_async'}
PARAMS_OF = {'calls_async': 'calls', 'handoff_async': 'handoff'}

# ``calls_async`` is measured in the rounds of ``calls`` when both are measured, so that the two
# clients of this project are compared under the same conditions.
MEASURED_WITH = {'calls_async': 'calls'}


def log(message: str) -> None:
    print(f'[{time.strftime("%H:%M:%S")}] {message}', file=sys.stderr, flush=True)


# --------------------------------------------------------------------------------------------------
# set-up
# --------------------------------------------------------------------------------------------------

def install_published(implementation: Implementation) -> None:
    """``pip install --no-deps --target`` a published release unless it is there already.

    Raises ``subprocess.CalledProcessError`` when pip fails (e.g. no access to PyPI).
    """
    if implementation.available() or implementation.pip_requirement is None:
        return
    log(f'installing {implementation.pip_requirement} into {implementation.path}')
    implementation.path.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [sys.executable, '-m', 'pip', 'install', '--quiet', '--disable-pip-version-check',
         '--no-deps', '--target', str(implementation.path), implementation.pip_requirement],
        check=True,
    )


def create_lock_table(client: Any, table_name: str) -> None:
    """Create the lock table (HASH lock_key S, RANGE sort_key S) with the low-level client."""
    existing = client.list_tables().get('TableNames', [])
    if table_name in existing:
        return
    client.create_table(
        TableName=table_name,
        KeySchema=[{'AttributeName': 'lock_key', 'KeyType': 'HASH'},
                   {'AttributeName': 'sort_key', 'KeyType': 'RANGE'}],
        AttributeDefinitions=[{'AttributeName': 'lock_key', 'AttributeType': 'S'},
                              {'AttributeName': 'sort_key', 'AttributeType': 'S'}],
        BillingMode='PAY_PER_REQUEST',
    )
    client.get_waiter('table_exists').wait(TableName=table_name)


def warm_up_engine(client: Any, table_name: str, seconds: float) -> int:
    """Exercise the engine (its JIT) with the operations the lock clients use; returns call count.

    The published clients' GetItem, PutItem, UpdateItem and DeleteItem; this project's conditional
    UpdateItem that takes a fencing token (``if_not_exists(...) + 1``) and returns the new values;
    and a TransactWriteItems with a ConditionCheck, as a guarded write sends.
    """
    deadline = time.monotonic() + seconds
    calls = 0
    key = {'lock_key': {'S': 'benchmark-warm-up'}, 'sort_key': {'S': '-'}}
    other = {'lock_key': {'S': 'benchmark-warm-up-data'}, 'sort_key': {'S': '-'}}
    while time.monotonic() < deadline:
        client.put_item(TableName=table_name, Item={**key, 'record_version_number': {'S': str(calls)}},
                        ReturnValues='ALL_OLD')
        client.get_item(TableName=table_name, Key=key, ConsistentRead=True)
        client.update_item(TableName=table_name, Key=key, UpdateExpression='SET #v = :v',
                           ConditionExpression='attribute_exists(lock_key)',
                           ExpressionAttributeNames={'#v': 'record_version_number'},
                           ExpressionAttributeValues={':v': {'S': f'{calls}-updated'}})
        client.update_item(TableName=table_name, Key=key,
                           UpdateExpression='SET #t = if_not_exists(#t, :floor) + :one, #v = :v REMOVE #r',
                           ConditionExpression='attribute_not_exists(#k) OR #v = :old',
                           ExpressionAttributeNames={'#t': 'fencing_token', '#v': 'record_version_number',
                                                     '#r': 'released_at', '#k': 'lock_key'},
                           ExpressionAttributeValues={':floor': {'N': '1'}, ':one': {'N': '1'},
                                                      ':v': {'S': f'{calls}-token'},
                                                      ':old': {'S': f'{calls}-updated'}},
                           ReturnValues='UPDATED_NEW', ReturnValuesOnConditionCheckFailure='ALL_OLD')
        client.transact_write_items(TransactItems=[
            {'Put': {'TableName': table_name, 'Item': {**other, 'payload': {'S': str(calls)}}}},
            {'ConditionCheck': {'TableName': table_name, 'Key': key, 'ConditionExpression': '#v = :v',
                                'ExpressionAttributeNames': {'#v': 'record_version_number'},
                                'ExpressionAttributeValues': {':v': {'S': f'{calls}-token'}}}},
        ])
        client.delete_item(TableName=table_name, Key=key,
                           ConditionExpression='#v = :v',
                           ExpressionAttributeNames={'#v': 'record_version_number'},
                           ExpressionAttributeValues={':v': {'S': f'{calls}-token'}})
        calls += 6
    return calls


class Engine:
    """The DynamoDB endpoint of a run: DynamoDB Local started here, or one given by URL."""

    def __init__(self, endpoint_url: Optional[str]) -> None:
        self._embedded: Any = None
        if endpoint_url is None:
            sys.path.insert(0, str(REPO_ROOT))
            from python_dynamodb_lock._embedded import start_dynamodb_local

            log('starting DynamoDB Local')
            self._embedded = start_dynamodb_local()
            endpoint_url = str(self._embedded.endpoint_url)
            self.name = str(getattr(self._embedded, 'name', 'dynamodb-local'))
        else:
            self.name = 'external endpoint'
        self.endpoint_url: str = endpoint_url

    def client(self) -> Any:
        import boto3

        return boto3.client('dynamodb', endpoint_url=self.endpoint_url, region_name='us-east-1',
                            aws_access_key_id='benchmark', aws_secret_access_key='benchmark')

    def stop(self) -> None:
        if self._embedded is not None:
            log('stopping DynamoDB Local')
            self._embedded.stop()
            self._embedded = None


# --------------------------------------------------------------------------------------------------
# running workers
# --------------------------------------------------------------------------------------------------

class WorkerFailed(RuntimeError):
    """A worker subprocess exited non-zero, timed out, or printed no JSON."""


def run_worker(implementation: Implementation, figure: str, endpoint: str, params: JsonDict,
               timeout: float) -> JsonDict:
    """Run ``bench_worker.py FIGURE`` with ``PYTHONPATH`` naming only ``implementation``.

    Returns the worker's JSON. Raises ``WorkerFailed`` with the tail of its standard error when it
    fails, or when it imported a ``python_dynamodb_lock`` from anywhere but ``implementation``.
    """
    environment = dict(os.environ)
    environment['PYTHONPATH'] = str(implementation.path)
    environment.pop('PYTHONSTARTUP', None)
    command = [sys.executable, str(WORKER), figure, '--endpoint', endpoint, '--table', TABLE_NAME,
               '--params', json.dumps(params)]
    try:
        completed = subprocess.run(command, env=environment, capture_output=True, text=True,
                                   timeout=timeout, cwd=str(HERE))
    except subprocess.TimeoutExpired as error:
        raise WorkerFailed(f'{figure}/{implementation.label}: no result within {timeout:.0f} s') from error
    lines = completed.stdout.strip().splitlines()
    if completed.returncode != 0 or not lines:
        tail = '\n'.join(completed.stderr.strip().splitlines()[-15:])
        raise WorkerFailed(f'{figure}/{implementation.label}: exit {completed.returncode}\n{tail}')
    result: JsonDict = json.loads(lines[-1])
    imported_from = Path(result.get('implementation_path', '')).resolve()
    if imported_from != implementation.package_dir().resolve():
        raise WorkerFailed(f'{figure}/{implementation.label}: imported {imported_from}, '
                           f'expected {implementation.package_dir()}')
    return result


def measure_capacity(implementation: Implementation, settings: Settings, endpoint: str,
                     ladder: Optional[Sequence[int]] = None,
                     client_kwargs: Optional[JsonDict] = None, worker_figure: str = 'capacity') -> JsonDict:
    """Try increasing lock counts; after the first failure, narrow the gap with up to two trials.

    ``ladder`` defaults to ``settings.capacity_ladder``; ``client_kwargs`` (keyword arguments for
    the client, e.g. ``heartbeat_batch_size``) defaults to none; ``worker_figure`` is ``capacity``
    (the threaded client) or ``capacity_async`` (the asyncio client, this project only).

    A failed trial tells the heartbeat rate that client sustained; ``0.95 * rate * period`` locks
    is then the most it could keep alive, and one trial there (rounded down to 50) checks it.
    Then, while the gap between the largest count kept alive and the smallest one not is over
    20 %, one more trial half-way (two refining trials at most).
    """
    trials: List[JsonDict] = []
    params: JsonDict = dict(settings.capacity)
    if client_kwargs:
        params['client_kwargs'] = dict(client_kwargs)
    described = ', '.join(f'{name}={value!r}' for name, value in (client_kwargs or {}).items())
    tag = (f'{worker_figure}/{implementation.label}' + (f' ({described})' if described else ''))

    def trial(locks: int) -> JsonDict:
        log(f'  {tag}: {locks} locks')
        result = run_worker(implementation, worker_figure, endpoint, {**params, 'locks': locks}, timeout=600)
        calls_per_s = result.get('calls_per_s')
        log(f'    kept alive: {result["kept_alive"]}, {result["achieved_heartbeats_per_s"]:.0f}'
            f'/{result["required_heartbeats_per_s"]:.0f} heartbeats/s'
            + ('' if calls_per_s is None else f' in {calls_per_s:.0f} calls/s')
            + f', worst age {result["worst_staleness_s"]:.1f} s, '
            f'{result["cpu_ms_per_heartbeat"] or 0:.2f} ms CPU/heartbeat'
            + (f', callbacks {result["callbacks"]}' if result['callbacks'] else '')
            + (f', sampler woke up to {result["worst_sampler_lag_s"] * 1000:.0f} ms late'
               if worker_figure == 'capacity_async' else ''))
        trials.append(result)
        return result

    best_pass = 0
    first_fail: Optional[JsonDict] = None
    for locks in (settings.capacity_ladder if ladder is None else ladder):
        result = trial(locks)
        if result['kept_alive']:
            best_pass = locks
        else:
            first_fail = result
            break
    smallest_fail = None if first_fail is None else first_fail['locks']
    if first_fail is not None:
        # First guess: what the failed trial's heartbeat rate could sustain; then bisect once.
        ceiling = int(0.95 * first_fail['achieved_heartbeats_per_s'] * first_fail['heartbeat_period_s'])
        guess = (ceiling // 50) * 50
        for _ in range(2):
            if not best_pass < guess < smallest_fail:
                break
            if trial(guess)['kept_alive']:
                best_pass = guess
            else:
                smallest_fail = guess
            if smallest_fail <= 1.2 * best_pass:
                break
            guess = ((best_pass + smallest_fail) // 2 // 50) * 50
    return {
        'max_locks_kept_alive': best_pass,
        'all_trials_passed': first_fail is None,
        'smallest_failure': smallest_fail,
        'client_kwargs': dict(client_kwargs or {}),
        'trials': trials,
        'cpu_ms_per_heartbeat': _cpu_per_heartbeat(trials),
    }


def measure_ceiling(implementation: Implementation, settings: Settings) -> JsonDict:
    """Bare ``update_item`` calls/s of one boto3 client under the capacity figure's conditions."""
    log('capacity: botocore ceiling (no lock client)')
    params = {'threads': 20, 'latency_ms': settings.capacity['latency_ms'], 'duration_s': 5.0}
    try:
        result = run_worker(implementation, 'ceiling', 'http://127.0.0.1:9', params, timeout=120)
    except WorkerFailed as error:
        log(f'FAILED {error}')
        return {'error': str(error)}
    result['max_locks_at_default_period'] = result['calls_per_s'] * 5.0
    log(f'    {result["calls_per_s"]:.0f} calls/s, {result["cpu_ms_per_call"]:.2f} ms CPU per call')
    return result


def _cpu_per_heartbeat(trials: List[JsonDict]) -> Optional[float]:
    """CPU per heartbeat in the first trial (the same lock count for every implementation)."""
    return trials[0]['cpu_ms_per_heartbeat'] if trials else None


FIGURE_TIMEOUTS = {'calls': 300, 'calls_async': 300, 'close': 300, 'takeover': 300, 'handoff': 300,
                   'handoff_async': 300, 'contended': 400, 'guarded': 400}


def figure_params(settings: Settings, figure: str) -> JsonDict:
    params: JsonDict = getattr(settings, PARAMS_OF.get(figure, figure))
    return params


def measure(figure: str, implementation: Implementation, settings: Settings, endpoint: str) -> JsonDict:
    if figure == 'capacity':
        return measure_capacity(implementation, settings, endpoint)
    if figure in ('capacity_batched', 'capacity_async_batched'):
        return measure_capacity(implementation, settings, endpoint, ladder=getattr(settings, f'{figure}_ladder'),
                                client_kwargs=settings.capacity_batched_kwargs, worker_figure=WORKER_FIGURES[figure])
    return run_worker(implementation, WORKER_FIGURES.get(figure, figure), endpoint, figure_params(settings, figure),
                      timeout=FIGURE_TIMEOUTS[figure])


def percentile(values: List[float], fraction: float) -> Optional[float]:
    """The ``fraction`` quantile of ``values`` (nearest rank); None for an empty list."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, int(round(fraction * (len(ordered) - 1)))))]


def summarise(values: List[float]) -> JsonDict:
    return {
        'n': len(values),
        'p50': percentile(values, 0.50),
        'p99': percentile(values, 0.99),
        'mean': sum(values) / len(values) if values else None,
        'max': max(values) if values else None,
    }


# DynamoDB's published capacity rules, for items as small as a lock's (well under 1 KB):
# a strongly consistent read of an item up to 4 KB costs 1 read unit (RCU), also when no item is
# found; a put, update or delete of an item up to 1 KB costs 1 write unit (WCU), also when its
# condition fails. This project acquires and releases with UpdateItem (1 WCU each, like the
# PutItem and DeleteItem of the published client). Operations whose cost depends on what they
# carry (TransactWriteItems: 2 WCU per item per KB; BatchExecuteStatement: per statement) are not
# counted here but named in ``not_counted``; the ``guarded`` figure asks the engine instead.
READ_UNITS = {'GetItem': 1.0}
WRITE_UNITS = {'PutItem': 1.0, 'UpdateItem': 1.0, 'DeleteItem': 1.0}


def capacity_units(operations: Dict[str, float], per: float) -> JsonDict:
    """RCU and WCU per ``per`` (e.g. per acquisition) for operation counts, by the rules above."""
    not_counted = sorted(name for name, count in operations.items()
                         if count and name not in READ_UNITS and name not in WRITE_UNITS)
    if not per:
        return {'rcu': None, 'wcu': None, 'not_counted': not_counted}
    reads = sum(READ_UNITS.get(name, 0.0) * count for name, count in operations.items())
    writes = sum(WRITE_UNITS.get(name, 0.0) * count for name, count in operations.items())
    return {'rcu': reads / per, 'wcu': writes / per, 'not_counted': not_counted}


def merge_call_rounds(rounds: List[JsonDict]) -> JsonDict:
    """Combine several ``calls`` worker results (interleaved rounds) into one."""
    total = sum(r['iterations'] for r in rounds)

    def weighted(key: str) -> Dict[str, float]:
        merged: Dict[str, float] = {}
        for r in rounds:
            for name, per_iteration in r[key].items():
                merged[name] = merged.get(name, 0.0) + per_iteration * r['iterations'] / total
        return merged

    merged = {
        'iterations': total,
        'rounds': len(rounds),
        'acquire_operations': weighted('acquire_operations'),
        'release_operations': weighted('release_operations'),
    }
    for name in ('cpu_ms_per_acquire', 'cpu_ms_per_release', 'cpu_ms_per_acquire_release'):
        merged[name] = sum(r[name] for r in rounds) / len(rounds)
    merged['calls_per_acquire'] = sum(merged['acquire_operations'].values())
    merged['calls_per_release'] = sum(merged['release_operations'].values())
    merged['calls_per_acquire_release'] = merged['calls_per_acquire'] + merged['calls_per_release']
    operations: Dict[str, float] = dict(merged['acquire_operations'])
    for name, count in merged['release_operations'].items():
        operations[name] = operations.get(name, 0.0) + count
    merged['capacity_units_per_acquire_release'] = capacity_units(operations, 1.0)
    for name in ('acquire', 'release', 'acquire_release'):
        samples = [value for r in rounds for value in r['samples_ms'][name]]
        merged[f'{name}_ms'] = summarise(samples)
    merged['round_p50_ms'] = [r['acquire_release_ms']['p50'] for r in rounds]
    merged['round_cpu_ms'] = [r['cpu_ms_per_acquire_release'] for r in rounds]
    merged['implementation_path'] = rounds[0]['implementation_path']
    return merged


def merge_contended_rounds(rounds: List[JsonDict]) -> JsonDict:
    """Combine several ``contended`` worker results (interleaved rounds) into one."""
    duration = sum(r['duration_s'] for r in rounds)
    acquisitions = sum(r['acquisitions'] for r in rounds)

    def added(key: str) -> Dict[str, int]:
        total: Dict[str, int] = {}
        for r in rounds:
            for name, count in r[key].items():
                total[name] = total.get(name, 0) + count
        return total

    operations = added('operations')
    merged = {key: rounds[0][key] for key in ('processes', 'keys', 'retry_period_s', 'hold_ms',
                                               'implementation_path')}
    merged.update({
        'rounds': len(rounds),
        'duration_s': duration,
        'acquisitions': acquisitions,
        'acquisitions_per_s': acquisitions / duration,
        'round_acquisitions_per_s': [r['acquisitions_per_s'] for r in rounds],
        'per_process': [r['per_process'] for r in rounds],
        'acquire_ms': summarise([value for r in rounds for value in r['acquire_ms_samples']]),
        'calls_per_acquisition': (sum(operations.values()) / acquisitions) if acquisitions else None,
        'operations': operations,
        'outcomes': added('outcomes'),
        'errors': added('errors'),
        'overlapping_holds': sum(r['overlapping_holds'] for r in rounds),
        'capacity_units_per_acquisition': capacity_units(operations, acquisitions),
    })
    return merged


INTERLEAVED: Dict[str, Callable[[List[JsonDict]], JsonDict]] = {
    'calls': merge_call_rounds,
    'calls_async': merge_call_rounds,
    'contended': merge_contended_rounds,
}


def measure_interleaved(entrants: Sequence[Tuple[str, Implementation]], settings: Settings,
                        endpoint: str) -> Dict[str, Dict[str, JsonDict]]:
    """Measure ``(figure, implementation)`` pairs in rounds that alternate between them, then
    merge each pair's rounds: ``{figure: {label: merged}}``.

    Figures that depend on the engine's speed are measured this way, so that a change in the
    engine (its JIT warming up) or in the machine's load hits every implementation alike. Every
    other round runs the entrants in the reverse order, so that none is always first after
    another. The number of rounds is that of the first entrant's figure (``calls_rounds``,
    ``contended_rounds``).
    """
    first_figure = entrants[0][0]
    round_count: int = getattr(settings, f'{PARAMS_OF.get(first_figure, first_figure)}_rounds')
    rounds: Dict[Tuple[str, str], List[JsonDict]] = {(figure, impl.label): [] for figure, impl in entrants}
    failures: Dict[Tuple[str, str], JsonDict] = {}
    for round_number in range(round_count):
        ordered = list(entrants) if round_number % 2 == 0 else list(reversed(entrants))
        for figure, implementation in ordered:
            entrant = (figure, implementation.label)
            if entrant in failures:
                continue
            log(f'{figure}: {implementation.label} (round {round_number + 1}/{round_count})')
            try:
                rounds[entrant].append(run_worker(
                    implementation, WORKER_FIGURES.get(figure, figure), endpoint, figure_params(settings, figure),
                    FIGURE_TIMEOUTS[figure]))
            except WorkerFailed as error:
                log(f'FAILED {error}')
                failures[entrant] = {'error': str(error)}
    merged: Dict[str, Dict[str, JsonDict]] = {}
    for (figure, label), results in rounds.items():
        if (figure, label) in failures:
            merged.setdefault(figure, {})[label] = failures[(figure, label)]
        elif results:
            merged.setdefault(figure, {})[label] = INTERLEAVED[figure](results)
    return merged


def compare_async_with_threaded(results: JsonDict) -> None:
    """Add to each ``calls_async`` entry (this project's, and any ``--build``'s) how its p50 and CPU
    compare with the threaded client's of the same build in the same run: overall, and round by
    round when both ran the same rounds."""
    for label, asynchronous in (results.get('calls_async') or {}).items():
        threaded = (results.get('calls') or {}).get(label)
        if not threaded or 'error' in threaded or 'error' in asynchronous:
            continue
        _add_ratios(asynchronous, threaded, 'threaded')


def compare_with_published(results: JsonDict) -> None:
    """Add to every ``calls`` and ``calls_async`` entry but 0.9.1's how its p50 and CPU compare
    with the published 0.9.1's in the same run (``p50_vs_091``, ``round_p50_vs_091``,
    ``cpu_vs_091``, ``round_cpu_vs_091``)."""
    published = (results.get('calls') or {}).get('0.9.1')
    if not published or 'error' in published:
        return
    for figure in ('calls', 'calls_async'):
        for label, entry in (results.get(figure) or {}).items():
            if label != '0.9.1' and 'error' not in entry:
                _add_ratios(entry, published, '091')


def _add_ratios(entry: JsonDict, reference: JsonDict, name: str) -> None:
    """``entry``'s p50 and CPU over ``reference``'s, overall and round by round."""
    entry[f'{name}_p50_ms'] = reference['acquire_release_ms']['p50']
    entry[f'p50_vs_{name}'] = entry['acquire_release_ms']['p50'] / reference['acquire_release_ms']['p50']
    entry[f'cpu_vs_{name}'] = entry['cpu_ms_per_acquire_release'] / reference['cpu_ms_per_acquire_release']
    for key in ('p50_ms', 'cpu_ms'):
        mine, theirs = entry.get(f'round_{key}') or [], reference.get(f'round_{key}') or []
        if mine and len(mine) == len(theirs):
            entry[f'round_{key.split("_")[0]}_vs_{name}'] = [a / b for a, b in zip(mine, theirs)]


# --------------------------------------------------------------------------------------------------
# reporting
# --------------------------------------------------------------------------------------------------

def _fmt(value: Optional[float], digits: int = 1) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return 'n/a'
    return f'{value:,.{digits}f}'


def _get(results: JsonDict, figure: str, label: str) -> Optional[JsonDict]:
    entry = results.get(figure, {}).get(label)
    if entry is None or 'error' in entry:
        return None
    return entry


@dataclass(frozen=True)
class Row:
    """A row of the summary table: a title, a target, and how to render one implementation."""

    title: str
    target: str
    render: Callable[[JsonDict], str]
    figure: str
    # Only these implementations can be measured for the row; the others show NOT_APPLICABLE.
    only: Optional[Sequence[str]] = None
    # Left out of the table when the results have no entry at all for its figure (a results.json
    # written before the figure existed, or a run that did not measure it).
    optional: bool = False


NOT_APPLICABLE = '\u2014'


def _calls(entry: JsonDict) -> str:
    operations = {**entry['acquire_operations']}
    for name, count in entry['release_operations'].items():
        operations[name] = operations.get(name, 0) + count
    return f'{entry["calls_per_acquire_release"]:g} ({_operations(operations)})'


def _units(units: JsonDict) -> str:
    text = f'{units["rcu"]:.2g} RCU + {units["wcu"]:.2g} WCU'
    if units.get('not_counted'):
        text += ' + ' + ', '.join(units['not_counted']) + ' (not counted)'
    return text


def _calls_units(entry: JsonDict) -> str:
    return _units(entry['capacity_units_per_acquire_release'])


def _contended_units(entry: JsonDict) -> str:
    return _units(entry['capacity_units_per_acquisition'])


def _latency(entry: JsonDict) -> str:
    figures = entry['acquire_release_ms']
    return f'{_fmt(figures["p50"])} / {_fmt(figures["p99"])}'


def _close(entry: JsonDict) -> str:
    figures = entry['close_ms']
    return f'{_fmt(figures["p50"])} / {_fmt(figures["max"])}'


def _takeover(entry: JsonDict) -> str:
    if entry['took_over'] == 0:
        return f'did not take over within {entry["cap_s"]:g} s'
    text = f'{_fmt(entry["takeover_s"]["p50"], 2)} / {_fmt(entry["takeover_s"]["max"], 2)}'
    if entry['took_over'] < entry['samples']:
        text += f' ({entry["samples"] - entry["took_over"]} of {entry["samples"]} never)'
    return text


def _operations(operations: Dict[str, float]) -> str:
    """``UpdateItem`` / ``1.5 GetItem + PutItem``: operations with their counts per occasion."""
    return ' + '.join(name if count == 1 else f'{count:.2g} {name}' for name, count in operations.items())


def _handoff(entry: JsonDict) -> str:
    figures = entry['handoff_ms']
    if not figures['n']:
        return 'no handoff'
    text = f'{_fmt(figures["p50"])} / {_fmt(figures["p99"])} (n={figures["n"]})'
    calls = entry.get('calls_between')
    if calls and calls['n']:
        # Results written before the call count existed have none.
        spread = '' if calls['max'] == calls['p50'] else f', max {calls["max"]:g}'
        plural = '' if calls['mean'] == 1 else 's'
        text += (f'; {calls["mean"]:.3g} call{plural} per handoff ({_operations(entry["operations_between"])}'
                 f'{spread})')
    return text


def _versus(entry: JsonDict, key: str, name: str, reference: str) -> str:
    """``'; p50 0.78x 0.9.1's (rounds: 0.75, 0.80)'``: a ratio stored by ``_add_ratios``."""
    ratio = entry.get(f'{key}_vs_{name}')
    if ratio is None:
        return ''
    text = f'; {key} {ratio:.2f}x {reference}'
    rounds = entry.get(f'round_{key}_vs_{name}')
    if rounds and len(rounds) > 1:
        text += ' (rounds: ' + ', '.join(f'{value:.2f}' for value in rounds) + ')'
    return text


def _latency_vs_published(entry: JsonDict) -> str:
    return _latency(entry) + _versus(entry, 'p50', '091', "0.9.1's")


def _cpu_vs_published(entry: JsonDict) -> str:
    return _fmt(entry['cpu_ms_per_acquire_release'], 2) + _versus(entry, 'cpu', '091', "0.9.1's")


def _async_latency(entry: JsonDict) -> str:
    return (_latency(entry) + _versus(entry, 'p50', 'threaded', "the threaded client's")
            + _versus(entry, 'p50', '091', "0.9.1's"))


def _async_cpu(entry: JsonDict) -> str:
    return (_fmt(entry['cpu_ms_per_acquire_release'], 2) + _versus(entry, 'cpu', 'threaded', "the threaded client's")
            + _versus(entry, 'cpu', '091', "0.9.1's"))


def _guarded_commit(name: str) -> Callable[[JsonDict], str]:
    def render_commit(entry: JsonDict) -> str:
        commit = entry['commits'][name]
        figures = commit['ms']
        return (f'{_fmt(figures["p50"])} / {_fmt(figures["p99"])} ms; {commit["calls"]:g} call '
                f'({_operations(commit["operations"])}); {commit["consumed_units"]:g} WCU reported, '
                f'{commit["published_rule_wcu"]:g} by the published rule')
    return render_commit


def _guarded_pair(entry: JsonDict) -> str:
    operations: Dict[str, float] = dict(entry['acquire']['operations'])
    for name, count in entry['release']['operations'].items():
        operations[name] = operations.get(name, 0.0) + count
    return (f'{entry["calls_per_acquire_release"]:g} ({_operations(operations)}); '
            f'{entry["consumed_units_per_acquire_release"]:g} WCU reported')


def _capacity(entry: JsonDict) -> str:
    if entry['all_trials_passed']:
        return f'>= {entry["max_locks_kept_alive"]:,}'
    return f'{entry["max_locks_kept_alive"]:,} (fails at {entry["smallest_failure"]:,})'


def _cpu(entry: JsonDict) -> str:
    return _fmt(_cpu_per_heartbeat(entry['trials']), 2)


def _capacity_trial(entry: JsonDict) -> Optional[JsonDict]:
    """The trial at the largest lock count kept alive (else the first trial)."""
    trials: List[JsonDict] = entry['trials']
    for trial in trials:
        if trial['locks'] == entry['max_locks_kept_alive'] and trial['kept_alive']:
            return trial
    return trials[0] if trials else None


def _capacity_batched(entry: JsonDict) -> str:
    text = _capacity(entry)
    trial = _capacity_trial(entry)
    if trial is not None:
        text += (f'; at {trial["locks"]:,} locks {_fmt(trial["cpu_ms_per_heartbeat"], 2)} ms CPU per heartbeat, '
                 f'{_fmt(trial.get("calls_per_s"), 0)} calls/s for '
                 f'{_fmt(trial["achieved_heartbeats_per_s"], 0)} heartbeats/s')
    return text


def _contended(entry: JsonDict) -> str:
    text = f'{_fmt(entry["acquisitions_per_s"])} ({_fmt(entry["calls_per_acquisition"], 2)} calls each)'
    if entry['overlapping_holds']:
        text += f' OVERLAPS: {entry["overlapping_holds"]}'
    return text


def table_rows(settings: Settings) -> List[Row]:
    takeover = settings.takeover
    handoff = settings.handoff
    contended = settings.contended
    capacity = settings.capacity
    ours = ('ours',)
    guarded = settings.guarded
    return [
        Row('DynamoDB calls per uncontended acquire + release', '2 (published: 3)', _calls, 'calls'),
        Row('capacity units per uncontended acquire + release', 'fewer than published', _calls_units,
            'calls'),
        Row('uncontended acquire + release, p50 / p99 (ms); p50 against 0.9.1\'s in the same rounds',
            "p50 at most 0.8x 0.9.1's", _latency_vs_published, 'calls'),
        Row('client CPU per acquire + release, no engine (ms); against 0.9.1\'s in the same rounds',
            "at most 0.75x 0.9.1's", _cpu_vs_published, 'calls'),
        Row('asyncio client (one event loop): DynamoDB calls per uncontended acquire + release', '2', _calls,
            'calls_async', only=ours, optional=True),
        Row('asyncio client: uncontended acquire + release, p50 / p99 (ms), same rounds as the threaded client',
            "p50 within 1.1x of the threaded client's", _async_latency, 'calls_async', only=ours, optional=True),
        Row('asyncio client: client CPU per acquire + release, no engine (ms)',
            "within 1.1x of the threaded client's", _async_cpu, 'calls_async', only=ours, optional=True),
        Row('close() at the default 5 s heartbeat period, p50 / max (ms)', 'under 50 ms', _close, 'close'),
        Row(f'takeover of a killed holder, lease {takeover["lease_s"]:g} s, retry_period '
            f'{takeover["retry_period_s"]:g} s, p50 / max (s)',
            f'within {takeover["lease_s"] + takeover["retry_period_s"]:g} s', _takeover, 'takeover'),
        Row(f'same-process handoff, {handoff["threads"]} threads, default retry_period, p50 / p99 (ms); '
            'DynamoDB calls from release_lock() to the next holder (the release included)',
            'p50 under 5 ms; 1 call', _handoff, 'handoff'),
        Row(f'asyncio client: same-process handoff, {handoff["threads"]} tasks, p50 / p99 (ms); calls',
            'p50 under 5 ms; 1 call', _handoff, 'handoff_async', only=ours, optional=True),
        Row(f'locks kept alive by one client, 5 s period, {capacity["latency_ms"]:g} ms per call',
            '10,000 (published: ~500)', _capacity, 'capacity'),
        Row(f'locks kept alive by one client, 5 s period, {capacity["latency_ms"]:g} ms per call, '
            f'{_kwargs_text(settings.capacity_batched_kwargs)} (PartiQL BatchExecuteStatement)',
            '10,000', _capacity_batched, 'capacity_batched', only=ours, optional=True),
        Row(f'asyncio client: locks kept alive on one event loop, 5 s period, {capacity["latency_ms"]:g} ms per '
            f'call, {_kwargs_text(settings.capacity_batched_kwargs)}',
            '20,000', _capacity_batched, 'capacity_async_batched', only=ours, optional=True),
        Row(f'CPU time per heartbeat at {settings.capacity_ladder[0]:,} locks (ms)', 'no regression', _cpu,
            'capacity'),
        Row(f'contended acquisitions/s, {contended["processes"]} processes, {contended["keys"]} keys, '
            f'retry_period {contended["retry_period_s"]:g} s', 'no regression', _contended, 'contended'),
        Row('capacity units per contended acquisition (incl. its release)', 'no regression',
            _contended_units, 'contended'),
        Row(f'guarded write of one {guarded.get("item_bytes", 200)}-byte item, lock.put_item (TransactWriteItems '
            'with the lock\'s ConditionCheck): p50 / p99; calls; write units',
            '1 call, no read; 4 WCU (2 items x 2)', _guarded_commit('guarded'), 'guarded', only=ours,
            optional=True),
        Row('the same item, plain PutItem', '1 WCU', _guarded_commit('put_item'), 'guarded', only=ours,
            optional=True),
        Row('the same item, plain TransactWriteItems (one Put)', '2 WCU', _guarded_commit('transact_write_items'),
            'guarded', only=ours, optional=True),
        Row('uncontended acquire + release around those writes: calls; write units reported by the engine',
            '2 calls, 2 WCU', _guarded_pair, 'guarded', only=ours, optional=True),
    ]


def _kwargs_text(kwargs: JsonDict) -> str:
    return ', '.join(f'{name}={value!r}' for name, value in kwargs.items())


def render_cells(results: JsonDict, settings: Settings, labels: Sequence[str],
                 builds: Sequence[str] = ()) -> List[List[str]]:
    """The table's cells; ``builds`` (other checkouts of this project) count as ``ours``."""
    cells = []
    for row in table_rows(settings):
        if row.optional and row.figure not in results:
            continue
        line = [row.title]
        for label in labels:
            entry = _get(results, row.figure, label)
            raw = results.get(row.figure, {}).get(label)
            if row.only is not None and label not in row.only and not (label in builds and 'ours' in row.only):
                line.append(NOT_APPLICABLE)
            elif entry is not None:
                line.append(row.render(entry))
            elif raw is not None:
                line.append('failed')
            elif label == '0.9.3' and _get(results, row.figure, '0.9.1') is not None:
                line.append('as 0.9.1')
            else:
                line.append('not run')
        line.append(row.target)
        cells.append(line)
    return cells


def text_table(header: List[str], cells: List[List[str]]) -> str:
    widths = [max(len(str(line[i])) for line in [header] + cells) for i in range(len(header))]
    out = [' | '.join(h.ljust(w) for h, w in zip(header, widths)),
           '-+-'.join('-' * w for w in widths)]
    out.extend(' | '.join(c.ljust(w) for c, w in zip(line, widths)) for line in cells)
    return '\n'.join(out)


def rst_table(header: List[str], cells: List[List[str]]) -> str:
    """A ``list-table`` directive (robust to long cells and to '|' inside them)."""
    def cell(text: str) -> str:
        text = text.replace('*', r'\*')
        return text if text else '..'

    lines = ['.. list-table::', '   :header-rows: 1', '   :widths: ' + ' '.join(
        ['40'] + ['20'] * (len(header) - 2) + ['20']), '']
    for row in [header] + cells:
        lines.append('   * - ' + cell(row[0]))
        lines.extend('     - ' + cell(value) for value in row[1:])
    return '\n'.join(lines) + '\n'


def _short(value: float) -> str:
    """A compact label: 4,970 / 17.0 / 2.51 / 0.53."""
    if value >= 100:
        return f'{value:,.0f}'
    if value >= 10:
        return f'{value:.1f}'
    return f'{value:.2g}' if value < 1 else f'{value:.2f}'.rstrip('0').rstrip('.')


def _minutes(seconds: float) -> str:
    minutes = max(1, round(seconds / 60))
    return f'{minutes} minute' if minutes == 1 else f'{minutes} minutes'


def _relative(path: Path) -> str:
    try:
        return path.resolve().relative_to(REPO_ROOT).as_posix()
    except ValueError:
        return str(path)


def rst_run_facts(document: JsonDict, results_json: Path) -> str:
    """One paragraph saying when, where and with what the figures were measured."""
    facts = document['environment']
    load = (f'{facts["load_average_before"][0]:.1f} before the run and '
            f'{facts["load_average_after"][0]:.1f} after it; the engine-bound figures vary with it')
    kind = 'quick (smoke) run' if document['quick'] else 'full run'
    text = (
        f'Measured on {facts["date"][:10]} in a {kind} of {_minutes(document["elapsed_s"])}: '
        f'{facts["cpu_count"]} cores, Python {facts["python"]}, boto3 {facts["boto3"]}, '
        f'{facts["engine"]} on 127.0.0.1 '
        f'(one-minute load average {load}). Raw figures: ``{_relative(results_json)}``.'
    )
    ceiling = document['results'].get('ceiling')
    if ceiling and 'error' not in ceiling:
        text += (
            f' For scale: with no lock client at all (best of two samples), {ceiling["threads"]} threads calling '
            f'``update_item`` through one boto3 client, each call answered after '
            f'{ceiling["latency_ms"]:g} ms, made {ceiling["calls_per_s"]:,.0f} calls per second at '
            f'{ceiling["cpu_ms_per_call"]:.2f} ms of CPU each: enough for at most about '
            f'{ceiling["max_locks_at_default_period"]:,.0f} locks at the default 5-second period '
            f'with one ``UpdateItem`` call per heartbeat, as the default configuration sends them.'
        )
    return text + '\n'


def write_plot(results: JsonDict, labels: Sequence[str], settings: Settings, path: Path) -> Optional[str]:
    """Write a PNG with one panel per figure; returns why it was skipped, or None when written."""
    try:
        import matplotlib

        matplotlib.use('Agg')
        import matplotlib.pyplot as plt
    except ImportError:
        return 'matplotlib is not installed (pip install -r benchmarks/requirements.txt): no plot'

    colours = {'ours': '#2a7ab0', '0.9.1': '#d08c2c', '0.9.3': '#9a9a9a'}
    batch_size = settings.capacity_batched_kwargs.get('heartbeat_batch_size')
    # Bars drawn after an implementation's own bar in one panel: (after label, figure, bar name, colour).
    asyncio_colour = '#5aa469'
    capacity_extras = [('ours', 'capacity_batched', f'batch\nsize {batch_size}', '#7fb8dc'),
                       ('ours', 'capacity_async_batched', f'asyncio,\nbatch {batch_size}', asyncio_colour)]
    calls_extras = [('ours', 'calls_async', 'asyncio', asyncio_colour)]
    handoff_extras = [('ours', 'handoff_async', 'asyncio', asyncio_colour)]
    takeover_target = settings.takeover['lease_s'] + settings.takeover['retry_period_s']
    # (figure, title, value of an entry, log scale, value drawn when there is none, target line,
    #  extra bars from other figures)
    panels: List[tuple] = [
        ('calls', 'DynamoDB calls per\nuncontended acquire + release',
         lambda e: e['calls_per_acquire_release'], False, None, 2, calls_extras),
        ('calls', 'uncontended acquire + release\np50 latency (ms)',
         lambda e: e['acquire_release_ms']['p50'], False, None, None, calls_extras),
        ('calls', 'client CPU per acquire + release\nno engine (ms)',
         lambda e: e['cpu_ms_per_acquire_release'], False, None, None, calls_extras),
        ('close', 'close() at 5 s heartbeat period\np50 (ms, log scale)',
         lambda e: e['close_ms']['p50'], True, None, 50, ()),
        ('takeover', f'takeover of a killed holder (s)\nlease {settings.takeover["lease_s"]:g} s, '
         f'retry {settings.takeover["retry_period_s"]:g} s',
         lambda e: e['takeover_s']['p50'] if e['took_over'] else None, False,
         lambda e: e['cap_s'], takeover_target, ()),
        ('handoff', 'same-process handoff\np50 (ms, log scale)',
         lambda e: e['handoff_ms']['p50'], True, None, 5, handoff_extras),
        ('handoff', 'DynamoDB calls per handoff\n(release included)',
         lambda e: (e.get('calls_between') or {}).get('mean'), False, None, 1, handoff_extras),
        ('capacity', f'locks kept alive, 5 s period,\n{settings.capacity["latency_ms"]:g} ms per call '
         '(log scale)', lambda e: e['max_locks_kept_alive'] or None, True, None, 10000, capacity_extras),
        ('capacity', f'CPU per heartbeat (ms)\nat {settings.capacity_ladder[0]:,} locks',
         lambda e: _cpu_per_heartbeat(e['trials']), False, None, None, ()),
        ('contended', 'contended acquisitions/s\n'
         f'{settings.contended["processes"]} processes, {settings.contended["keys"]} keys',
         lambda e: e['acquisitions_per_s'], False, None, None, ()),
    ]
    figure, axes = plt.subplots(3, 4, figsize=(15, 11))
    flat = list(axes.flat)
    _guarded_panels(results.get('guarded', {}).get('ours'), flat[len(panels):len(panels) + 2])
    for axis in flat[len(panels) + 2:]:
        axis.set_axis_off()
    for axis, (name, title, value_of, log_scale, cap_of, target, extras) in zip(flat, panels):
        names: List[str] = []
        bar_colours: List[str] = []
        values: List[float] = []
        hatches: List[str] = []
        notes: List[str] = []
        # (figure, label, bar name, colour) of every bar, in order
        sources = []
        for label in labels:
            sources.append((name, label, PLOT_NAMES.get(label, label), colours.get(label, '#666666')))
            sources.extend((figure_name, label, bar_name, colour)
                           for after, figure_name, bar_name, colour in extras if after == label)
        for source_figure, label, bar_name, bar_colour in sources:
            entry = _get(results, source_figure, label)
            if entry is None:
                continue
            value = value_of(entry)
            if value is None and cap_of is not None:
                value = cap_of(entry)
                hatches.append('//')
                notes.append(f'none in {value:g}')
            else:
                hatches.append('')
                note = '' if value is None else _short(value)
                if name == 'capacity' and title.startswith('locks') and entry['all_trials_passed']:
                    note = f'>= {note}\n(largest tried)'
                notes.append(note)
            names.append(bar_name)
            bar_colours.append(bar_colour)
            values.append(float(value) if value is not None else 0.0)
        axis.set_title(title, fontsize=10)
        if not names:
            axis.set_axis_off()
            axis.text(0.5, 0.5, 'not measured', ha='center', va='center', transform=axis.transAxes)
            continue
        bars = axis.bar(names, values, color=bar_colours)
        axis.tick_params(axis='x', labelsize=8)
        for bar, hatch, note in zip(bars, hatches, notes):
            bar.set_hatch(hatch)
            axis.annotate(note, (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                          ha='center', va='bottom', fontsize=8)
        if target is not None and names:
            axis.axhline(target, color='#c0392b', linestyle='--', linewidth=1)
            axis.annotate(f'target {target:,g}', (1.0, target), xycoords=('axes fraction', 'data'),
                          ha='right', va='bottom', fontsize=7, color='#c0392b')
        ceiling = results.get('ceiling') or {}
        if name == 'capacity' and title.startswith('locks') and 'max_locks_at_default_period' in ceiling:
            limit = ceiling['max_locks_at_default_period']
            axis.axhline(limit, color='#555555', linestyle=':', linewidth=1)
            axis.annotate(f'bare boto3 ceiling {limit:,.0f}\n(1 UpdateItem per heartbeat)', (1.0, limit),
                          xycoords=('axes fraction', 'data'), ha='right', va='top', fontsize=7,
                          color='#555555')
        if log_scale and any(v > 0 for v in values):
            axis.set_yscale('log')
        axis.margins(y=0.25)
    mode = 'quick run' if settings.quick else 'full run'
    figure.suptitle(f'python_dynamodb_lock: this project vs published releases (DynamoDB Local on '
                    f'loopback, {os.cpu_count()} cores, {mode})', fontsize=11)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=90)
    plt.close(figure)
    return None


def _guarded_panels(entry: Optional[JsonDict], axes: Sequence[Any]) -> None:
    """Two panels for the ``guarded`` figure: p50 latency, and write units reported by the engine
    with DynamoDB's published rule marked, of a guarded write and the same item written plainly."""
    titles = ['one-item write on the engine\np50 latency (ms)', 'write units per one-item write\n'
              '(bar: engine reports; tick: published rule)']
    if entry is None or 'error' in entry:
        for axis, title in zip(axes, titles):
            axis.set_title(title, fontsize=10)
            axis.set_axis_off()
            axis.text(0.5, 0.5, 'not measured', ha='center', va='center', transform=axis.transAxes)
        return
    kinds = [('guarded', 'lock.put_item\n(guarded)', '#2a7ab0'), ('put_item', 'PutItem', '#bbbbbb'),
             ('transact_write_items', 'TransactWriteItems', '#888888')]
    commits = entry['commits']
    names = [name for _, name, _ in kinds]
    colours = [colour for _, _, colour in kinds]
    for axis, title, values in (
            (axes[0], titles[0], [commits[kind]['ms']['p50'] for kind, _, _ in kinds]),
            (axes[1], titles[1], [commits[kind]['consumed_units'] for kind, _, _ in kinds])):
        bars = axis.bar(names, values, color=colours)
        for bar, value in zip(bars, values):
            axis.annotate(_short(value), (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                          ha='center', va='bottom', fontsize=8)
        axis.set_title(title, fontsize=10)
        axis.tick_params(axis='x', labelsize=8)
        axis.margins(y=0.25)
    rule = [commits[kind]['published_rule_wcu'] for kind, _, _ in kinds]
    axes[1].scatter(names, rule, marker='_', s=900, color='#c0392b', zorder=3)


def _file_sha1(path: Path) -> Optional[str]:
    try:
        return hashlib.sha1(path.read_bytes()).hexdigest()
    except OSError:
        return None


def environment_facts(engine: Engine, implementations: Sequence[Implementation]) -> JsonDict:
    import boto3
    import botocore

    return {
        'date': datetime.datetime.now(datetime.timezone.utc).isoformat(timespec='seconds'),
        'python': platform.python_version(),
        'platform': platform.platform(),
        'cpu_count': os.cpu_count(),
        'boto3': boto3.__version__,
        'botocore': botocore.__version__,
        'engine': engine.name,
        'implementations': {
            impl.label: {
                'path': str(impl.path),
                'pip_requirement': impl.pip_requirement,
                'core_sha1': _file_sha1(impl.package_dir() / 'python_dynamodb_lock.py'),
            } for impl in implementations
        },
    }


# --------------------------------------------------------------------------------------------------
# main
# --------------------------------------------------------------------------------------------------

def parse_arguments(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--quick', action='store_true', help='a smoke run of about 5 minutes with small sizes')
    parser.add_argument('--output', type=Path, default=None,
                        help='directory for results.json, results_table.rst and benchmark.png '
                             '(default: benchmarks/results, or benchmarks/results/_work/quick with --quick)')
    parser.add_argument('--endpoint', default=None,
                        help='use this DynamoDB endpoint instead of starting DynamoDB Local')
    parser.add_argument('--implementations', default='ours,0.9.1,0.9.3',
                        help='comma-separated subset of: ' + ', '.join(IMPLEMENTATIONS))
    parser.add_argument('--figures', default=','.join(DEFAULT_PLAN),
                        help='comma-separated subset of: ' + ', '.join(DEFAULT_PLAN))
    parser.add_argument('--rounds', type=int, default=None,
                        help='rounds of the figures measured in alternating rounds (calls with calls_async, '
                             'contended); default 3, --quick 2 and 1')
    parser.add_argument('--build', action='append', default=[], metavar='LABEL=PATH',
                        help='also measure another checkout of this project (the folder holding its '
                             'python_dynamodb_lock package), like this one: to compare a change with the code '
                             'before it in one run (repeatable)')
    parser.add_argument('--every-figure-for-0.9.3', dest='all_093', action='store_true',
                        help='also measure 0.9.3 where its code is the same as 0.9.1')
    parser.add_argument('--render-only', action='store_true',
                        help='measure nothing: rebuild the table and the plot from results.json in the output '
                             'directory')
    return parser.parse_args(argv)


def _chosen(text: str, allowed: Sequence[str], what: str) -> List[str]:
    chosen = [item.strip() for item in text.split(',') if item.strip()]
    unknown = [item for item in chosen if item not in allowed]
    if unknown:
        raise SystemExit(f'unknown {what}: {", ".join(unknown)} (choose from {", ".join(allowed)})')
    return chosen


def parse_build(text: str) -> Implementation:
    """``--build LABEL=PATH``: another checkout of this project, measured like this one."""
    label, separator, path = text.partition('=')
    build = Implementation(label.strip(), Path(path).expanduser().resolve())
    if not separator or not build.label or build.label in IMPLEMENTATIONS or not build.available():
        raise SystemExit(f'--build {text}: expected LABEL=PATH, a new label and a folder holding '
                         'python_dynamodb_lock/python_dynamodb_lock.py')
    return build


def main(argv: Optional[Sequence[str]] = None) -> int:
    arguments = parse_arguments(argv)
    settings = Settings.for_run(arguments.quick)
    if arguments.rounds is not None:
        settings.calls_rounds = settings.contended_rounds = max(1, arguments.rounds)
    output = arguments.output or (WORK_DIR / 'quick' if arguments.quick else DEFAULT_OUTPUT)
    if arguments.render_only:
        return render_only(output)
    labels = _chosen(arguments.implementations, list(IMPLEMENTATIONS), 'implementation')
    figures = _chosen(arguments.figures, list(DEFAULT_PLAN), 'figure')

    implementations: List[Implementation] = []
    for label in labels:
        implementation = IMPLEMENTATIONS[label]
        install_published(implementation)
        if not implementation.available():
            log(f'skipping {label}: no {implementation.package_dir() / "python_dynamodb_lock.py"}')
            continue
        implementations.append(implementation)
    builds = [parse_build(text) for text in arguments.build]
    implementations[1 if implementations and implementations[0].label == 'ours' else 0:0] = builds
    if not implementations:
        raise SystemExit('no implementation to measure')
    build_labels = {build.label for build in builds}

    started = time.monotonic()
    engine = Engine(arguments.endpoint)
    results: JsonDict = {}
    try:
        client = engine.client()
        create_lock_table(client, TABLE_NAME)
        load_before = os.getloadavg()
        warm_calls = warm_up_engine(client, TABLE_NAME, settings.warm_up_s)
        log(f'engine at {engine.endpoint_url} warmed up with {warm_calls} calls')
        def chosen_for(figure: str) -> List[Implementation]:
            return [impl for impl in implementations
                    if impl.label in DEFAULT_PLAN[figure]
                    or (impl.label in build_labels and 'ours' in DEFAULT_PLAN[figure])
                    or (arguments.all_093 and impl.label == '0.9.3' and figure not in OURS_ONLY)]

        for figure in figures:
            chosen = chosen_for(figure)
            if MEASURED_WITH.get(figure) in figures:
                continue   # measured in the rounds of the figure it is compared with
            if figure in INTERLEAVED:
                entrants = []
                companions = [companion for companion, host in MEASURED_WITH.items()
                              if host == figure and companion in figures]
                for impl in chosen:
                    # each build of this project's right after its own entry: ours threaded, ours
                    # asyncio, before threaded, before asyncio, 0.9.1, ...
                    entrants.append((figure, impl))
                    entrants.extend((companion, impl) for companion in companions if impl in chosen_for(companion))
                if entrants:
                    results.update(measure_interleaved(entrants, settings, engine.endpoint_url))
                continue
            ceilings: List[JsonDict] = []
            if figure == 'capacity':
                ceilings.append(measure_ceiling(implementations[0], settings))
            for implementation in chosen:
                log(f'{figure}: {implementation.label}')
                try:
                    results.setdefault(figure, {})[implementation.label] = measure(
                        figure, implementation, settings, engine.endpoint_url)
                except WorkerFailed as error:
                    log(f'FAILED {error}')
                    results.setdefault(figure, {})[implementation.label] = {'error': str(error)}
            if figure == 'capacity':
                # A ceiling is best estimated by the better of two samples (before and after).
                ceilings.append(measure_ceiling(implementations[0], settings))
                results['ceiling'] = max(ceilings, key=lambda c: c.get('calls_per_s', 0.0))
                results['ceiling']['samples_calls_per_s'] = [c.get('calls_per_s') for c in ceilings]
        compare_async_with_threaded(results)
        compare_with_published(results)
        facts = environment_facts(engine, implementations)
        facts['load_average_before'] = load_before
        facts['load_average_after'] = os.getloadavg()
    finally:
        engine.stop()

    output.mkdir(parents=True, exist_ok=True)
    document = {
        'environment': facts,
        'quick': settings.quick,
        'labels': [impl.label for impl in implementations],
        'builds': {build.label: str(build.path) for build in builds},
        'settings': {name: getattr(settings, name) for name in
                     ('warm_up_s', 'calls_rounds', 'contended_rounds', 'calls', 'close', 'takeover',
                      'handoff', 'capacity', 'capacity_ladder', 'capacity_batched_kwargs',
                      'capacity_batched_ladder', 'capacity_async_batched_ladder', 'contended', 'guarded')},
        'elapsed_s': time.monotonic() - started,
        'results': results,
    }
    (output / 'results.json').write_text(json.dumps(document, indent=2) + '\n', encoding='utf-8')
    render(document, settings, output)
    log(f'total {time.monotonic() - started:.0f} s')
    return 0


def render(document: JsonDict, settings: Settings, output: Path) -> None:
    """Print the table and write ``results_table.rst`` and ``benchmark.png`` next to results.json."""
    labels: List[str] = document.get('labels') or [
        label for label in IMPLEMENTATIONS if any(label in entries for entries in document['results'].values())]
    results: JsonDict = document['results']
    header = ['figure'] + [DISPLAY_NAMES.get(label, f'this package, {label}') for label in labels] + ['target']
    cells = render_cells(results, settings, labels, list(document.get('builds') or ()))
    print()
    print(text_table(header, cells))
    print()
    table_text = rst_run_facts(document, output / 'results.json') + '\n' + rst_table(header, cells)
    (output / 'results_table.rst').write_text(table_text, encoding='utf-8')
    skipped = write_plot(results, labels, settings, output / 'benchmark.png')
    log(f'wrote {output / "results_table.rst"}')
    log(skipped or f'wrote {output / "benchmark.png"}')


def render_only(output: Path) -> int:
    """Rebuild the table and the plot from ``output/results.json`` without measuring anything."""
    document = json.loads((output / 'results.json').read_text(encoding='utf-8'))
    settings = Settings.for_run(bool(document['quick']))
    for name, value in document['settings'].items():
        setattr(settings, name, value)
    render(document, settings, output)
    return 0


if __name__ == '__main__':
    sys.exit(main())
