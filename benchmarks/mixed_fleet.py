"""A mixed fleet: published clients and this package's clients contending for the same keys.

During a rolling upgrade, clients of a published release (0.9.1, or the 0.9.3 fork) and clients
of this package share one table. This measures how the acquisitions are shared out between the
two kinds, with ``keep_released_rows`` True (the default: a release keeps the row, marked
released, for its fencing token) and False (a release deletes the row, as the published
releases do). Run from the repository root, with DynamoDB Local installed as for the tests::

    python benchmarks/mixed_fleet.py                   # 40 s per setting, 3 + 3 clients, 3 keys
    python benchmarks/mixed_fleet.py --duration 10     # shorter
    python benchmarks/mixed_fleet.py --published 0.9.3

Each client is a process (``bench_worker.py contend-proc``, whose ``PYTHONPATH`` names exactly
one implementation) that, until the end of the run, picks one of the keys at random, acquires
it (``retry_period`` and ``retry_timeout`` as given), holds it for ``--hold-ms`` and releases
it. Printed per kind of client and per setting: acquisitions, acquire timeouts, other errors,
and the number of overlapping holds of one key (which must be 0: mutual exclusion across the
two implementations). The published release is installed as ``run_benchmarks.py`` installs it
(``pip install --no-deps --target benchmarks/results/_work/published-<version>``).

It is a benchmark: the figures depend on the machine and its load; nothing asserts them.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any, Dict, List, Sequence, Tuple

from run_benchmarks import HERE, IMPLEMENTATIONS, WORKER, Engine, Implementation, create_lock_table, \
    install_published, log

JsonDict = Dict[str, Any]


def start_client(implementation: Implementation, endpoint: str, table: str, params: JsonDict) -> subprocess.Popen:
    """One contending client: ``bench_worker.py contend-proc`` seeing only ``implementation``."""
    environment = {**os.environ, 'PYTHONPATH': str(implementation.path)}
    environment.pop('PYTHONSTARTUP', None)
    # The clients' own log (every wait on a published holder's row is a WARNING) is left out.
    environment.setdefault('BENCH_LOG_LEVEL', 'ERROR')
    command = [sys.executable, str(WORKER), 'contend-proc', '--endpoint', endpoint, '--table', table,
               '--params', json.dumps(params)]
    return subprocess.Popen(command, env=environment, stdout=subprocess.PIPE, text=True, cwd=str(HERE))


def collect(label: str, implementation: Implementation, process: subprocess.Popen, timeout: float) -> JsonDict:
    output, _ = process.communicate(timeout=timeout)
    lines = output.strip().splitlines()
    if process.returncode != 0 or not lines:
        raise RuntimeError(f'{label} client exited with {process.returncode}')
    report: JsonDict = json.loads(lines[-1])
    imported = Path(report['implementation_path']).resolve()
    if imported != implementation.package_dir().resolve():
        raise RuntimeError(f'{label} client imported {imported}, not {implementation.package_dir()}')
    return report


def overlapping_holds(reports: Sequence[JsonDict]) -> int:
    """Holds of one key that overlap in time (wall clock of one machine), whoever held them."""
    by_key: Dict[str, List[Tuple[float, float]]] = collections.defaultdict(list)
    for report in reports:
        for key, held_from, held_until in report['intervals']:
            by_key[key].append((held_from, held_until))
    overlaps = 0
    for spans in by_key.values():
        spans.sort()
        overlaps += sum(later[0] < earlier[1] for earlier, later in zip(spans, spans[1:]))
    return overlaps


def run_setting(engine: Engine, published: Implementation, keep_released_rows: bool,
                arguments: argparse.Namespace) -> JsonDict:
    """One run of ``arguments.clients`` clients of each kind for ``arguments.duration`` seconds."""
    table = f'MixedFleet-{uuid.uuid4().hex[:8]}'
    create_lock_table(engine.client(), table)
    start_at = time.time() + 3.0 + 0.5 * arguments.clients     # every process started and connected
    common = {'keys': [f'mixed-{index}' for index in range(arguments.keys)], 'start_at': start_at,
              'end_at': start_at + arguments.duration, 'retry_period_s': arguments.retry_period,
              'retry_timeout_s': arguments.retry_timeout, 'hold_ms': arguments.hold_ms}
    ours = IMPLEMENTATIONS['ours']
    kinds = [(published.label, published, common),
             ('ours', ours, {**common, 'client_kwargs': {'keep_released_rows': keep_released_rows}})]
    started = [(label, implementation, start_client(implementation, engine.endpoint_url, table, params))
               for label, implementation, params in kinds for _ in range(arguments.clients)]
    reports: Dict[str, List[JsonDict]] = collections.defaultdict(list)
    try:
        for label, implementation, process in started:
            reports[label].append(collect(label, implementation, process,
                                          timeout=start_at - time.time() + arguments.duration + 120))
    finally:
        for _, _, process in started:
            if process.poll() is None:
                process.kill()
                process.wait()
    by_kind = {}
    for label, kind_reports in reports.items():
        errors: collections.Counter[str] = collections.Counter()
        for report in kind_reports:
            errors.update(report['errors'])
        by_kind[label] = {
            'acquisitions': sum(report['acquisitions'] for report in kind_reports),
            'per_client': [report['acquisitions'] for report in kind_reports],
            'timeouts': errors.pop('ACQUIRE_TIMEOUT', 0),
            'other_errors': dict(errors),
        }
    return {'keep_released_rows': keep_released_rows, 'kinds': by_kind,
            'overlapping_holds': overlapping_holds([report for kind in reports.values() for report in kind])}


def render(results: Sequence[JsonDict], published: str) -> str:
    header = ['keep_released_rows', 'client', 'acquisitions (per client)', 'timeouts', 'other errors',
              'overlapping holds']
    rows = [header]
    for result in results:
        for label in (published, 'ours'):
            kind = result['kinds'][label]
            rows.append([str(result['keep_released_rows']), 'this package' if label == 'ours' else f'published {label}',
                         f'{kind["acquisitions"]} ({", ".join(map(str, kind["per_client"]))})', str(kind['timeouts']),
                         ', '.join(f'{code} {count}' for code, count in kind['other_errors'].items()) or '0',
                         str(result['overlapping_holds'])])
    widths = [max(len(row[column]) for row in rows) for column in range(len(header))]
    return '\n'.join('  '.join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in rows)


def main(argv: Sequence[str] = ()) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--duration', type=float, default=40.0, help='seconds per setting (default 40)')
    parser.add_argument('--clients', type=int, default=3, help='clients (processes) of each kind (default 3)')
    parser.add_argument('--keys', type=int, default=3, help='keys contended for (default 3)')
    parser.add_argument('--hold-ms', type=float, default=50.0, help='how long each acquisition is held')
    parser.add_argument('--retry-period', type=float, default=0.1, help='retry_period of every acquire, seconds')
    parser.add_argument('--retry-timeout', type=float, default=5.0, help='retry_timeout of every acquire, seconds')
    parser.add_argument('--published', choices=['0.9.1', '0.9.3'], default='0.9.1')
    parser.add_argument('--endpoint', help='a running DynamoDB endpoint instead of starting DynamoDB Local')
    parser.add_argument('--json', type=Path, help='also write the results to this file')
    arguments = parser.parse_args(list(argv) or None)
    published = IMPLEMENTATIONS[arguments.published]
    install_published(published)
    engine = Engine(arguments.endpoint)
    try:
        results = []
        for keep in (True, False):
            log(f'{arguments.clients} + {arguments.clients} clients, {arguments.keys} keys, '
                f'{arguments.duration:g} s, keep_released_rows={keep}')
            results.append(run_setting(engine, published, keep, arguments))
    finally:
        engine.stop()
    load = os.getloadavg() if hasattr(os, 'getloadavg') else None
    print(f'{arguments.clients} clients of each kind, {arguments.keys} keys, {arguments.duration:g} s per setting, '
          f'hold {arguments.hold_ms:g} ms, retry_period {arguments.retry_period:g} s, retry_timeout '
          f'{arguments.retry_timeout:g} s, {os.cpu_count()} cores, load average {load}')
    print(render(results, published.label))
    if arguments.json is not None:
        arguments.json.write_text(json.dumps({'settings': {**vars(arguments), 'json': str(arguments.json)},
                                              'results': results}, indent=2, default=str) + '\n')


if __name__ == '__main__':
    main(sys.argv[1:])
