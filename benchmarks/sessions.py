"""What holding locks costs: write units per hour and client CPU to hold 1, 100 and 10,000 locks
with today's heartbeats, with ``heartbeat_batch_size=25``, and with client sessions
(``session=True``), measured on DynamoDB Local (docs/sessions.rst shows a run).

How it measures. Each client runs on a clock of this script's (:class:`DrivenClock`): time moves
only when the script says, so an hour of renewals takes as long as its writes do. Each period the
script moves the clock one ``heartbeat_period`` on and runs the client's own heartbeat round
(``Renewing.heartbeat_round``, what the background sender runs: for sessions the session renewal, then
the lock rows whose slow refresh is due), and waits until every renewal it started is answered.
Every write is counted (a botocore hook on the client's resource), and asks DynamoDB for its
consumed capacity (``ReturnConsumedCapacity='TOTAL'``, added by a hook), so both the writes and
the write capacity units are summed. DynamoDB Local reports the units of single-item writes and
transactions, not those of ``BatchExecuteStatement``: a batch's items are counted one unit each
(every lock item is under 1 KB), and the result says how many units were counted that way. Client CPU is the process's
CPU time (``time.process_time``, every thread) spent in those rounds.

Extrapolation. Today's heartbeats (and batches) write every held lock every period, so their
hour is ``--periods`` measured periods scaled to 3600 s / ``heartbeat_period``. Sessions write
unevenly (a session row every period, each lock row every third of its row lease), so a whole
hour of periods is run for them (``--session-hour``, default on), or the same scaling is used
when it is off. The acquisitions before the first period are not counted.

Run from the repository root (DynamoDB Local installed as for the tests)::

    python benchmarks/sessions.py --output benchmarks/results/sessions.json   # 1, 100, 10,000 locks
    python benchmarks/sessions.py --locks 1,100 --periods 3
"""
from __future__ import annotations

import argparse
import datetime
import json
import sys
import threading
import time
from typing import Any, Dict, List, Optional

sys.path.insert(0, '.')

from python_dynamodb_lock import DynamoDBLockClient  # noqa: E402
from python_dynamodb_lock.testing import lock_table, start_engine  # noqa: E402

HEARTBEAT_PERIOD = 5.0      # the published default
LEASE = 30.0                # the published default
ROW_LEASE = 3600.0          # expiry_period (the published default): the lease of lock rows under a session
WRITES = ('PutItem', 'UpdateItem', 'DeleteItem', 'BatchExecuteStatement', 'TransactWriteItems')


class DrivenClock:
    """Time that moves when the script moves it; sleeps last until woken (the background
    threads of the client sleep until it is closed: the script runs the rounds itself)."""

    def __init__(self) -> None:
        self._now = 1000.0
        self._wall = time.time()

    def monotonic(self) -> float:
        return self._now

    def time(self) -> float:
        return self._wall + self._now

    def sleep(self, seconds: float, wake: threading.Event) -> bool:
        return wake.wait()

    def advance(self, seconds: float) -> None:
        self._now += seconds


class Meter:
    """Counts the writes of one boto3 resource's client and sums their consumed capacity."""

    def __init__(self, resource: Any) -> None:
        self.writes = 0
        self.units = 0.0
        self.statements = 0
        self.estimated = 0      # units counted from the writes, not reported by the engine
        self._guard = threading.Lock()
        events = resource.meta.client.meta.events
        events.register('before-parameter-build.dynamodb', self._ask)
        events.register('after-call.dynamodb', self._count)

    def _ask(self, params: Dict[str, Any], model: Any, **kwargs: Any) -> None:
        if model.name in WRITES:
            params.setdefault('ReturnConsumedCapacity', 'TOTAL')

    def _count(self, parsed: Dict[str, Any], model: Any, **kwargs: Any) -> None:
        if model.name not in WRITES:
            return
        consumed = parsed.get('ConsumedCapacity')
        entries = consumed if isinstance(consumed, list) else [consumed] if consumed else []
        statements = len(parsed.get('Responses', ())) or 1
        with self._guard:
            self.writes += 1
            self.statements += statements
            if entries:
                self.units += sum(float(entry.get('CapacityUnits', 0) or 0) for entry in entries)
            else:   # DynamoDB Local reports none for BatchExecuteStatement: 1 unit per item written (< 1 KB)
                self.units += statements
                self.estimated += statements

    def reset(self) -> None:
        with self._guard:
            self.writes, self.units, self.statements, self.estimated = 0, 0.0, 0, 0


def _round(client: Any, clock: DrivenClock) -> None:
    """One heartbeat period, as the background sender runs it, with its renewals answered."""
    clock.advance(HEARTBEAT_PERIOD)
    woken = threading.Event()
    woken.set()     # the round's closing wait for the next period returns at once
    client._driver.run(client._calls.orchestration.renewing.heartbeat_round(), wake=woken)
    while client.heartbeats_in_flight:
        time.sleep(0.001)


def measure(table: Any, mode: str, count: int, periods: int, session_hour: bool) -> Dict[str, Any]:
    clock = DrivenClock()
    resource = table.resource
    meter = Meter(resource)
    options: Dict[str, Any] = {'heartbeat_batch_size': 25} if mode == 'batched' else {}
    if mode == 'sessions':
        options['session'] = True
    client = DynamoDBLockClient(
        resource, table_name=table.table_name, clock=clock, heartbeat_tps=1e9, heartbeat_workers=8,
        heartbeat_period=datetime.timedelta(seconds=HEARTBEAT_PERIOD),
        lease_duration=datetime.timedelta(seconds=LEASE),
        expiry_period=datetime.timedelta(seconds=ROW_LEASE), **options)
    try:
        for index in range(count):
            client.acquire_lock(f'{mode}-{count}-{index}')
        meter.reset()
        hour_periods = round(3600 / HEARTBEAT_PERIOD)
        run = hour_periods if mode == 'sessions' and session_hour else periods
        cpu = time.process_time()
        started = time.monotonic()
        for _ in range(run):
            _round(client, clock)
        cpu = time.process_time() - cpu
        elapsed = time.monotonic() - started
        held = len(client.held_locks())
        scale = hour_periods / run
        return {'mode': mode, 'locks': count, 'periods_measured': run, 'held_at_end': held,
                'writes_per_hour': round(meter.statements * scale), 'calls_per_hour': round(meter.writes * scale),
                'write_units_per_hour': round(meter.units * scale, 1),
                'units_not_reported_per_hour': round(meter.estimated * scale), 'cpu_s_per_hour': round(cpu * scale, 2),
                'elapsed_s': round(elapsed, 1)}
    finally:
        client.close(release_locks=True)


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--locks', default='1,100,10000', help='comma-separated lock counts')
    parser.add_argument('--modes', default='heartbeats,batched,sessions')
    parser.add_argument('--periods', type=int, default=3, help='periods measured for today\'s heartbeats')
    parser.add_argument('--no-session-hour', action='store_true', help='measure sessions for --periods only')
    parser.add_argument('--output', default=None, help='write the results as JSON here')
    arguments = parser.parse_args(argv)
    results = []
    with start_engine('dynamodb-local') as engine:
        for count in [int(value) for value in arguments.locks.split(',')]:
            for mode in arguments.modes.split(','):
                with lock_table(engine) as table:
                    result = measure(table, mode, count, arguments.periods, not arguments.no_session_hour)
                results.append(result)
                print(json.dumps(result), flush=True)
    print()
    print(f'{"locks":>7} {"mode":<11} {"writes/hour":>12} {"WCU/hour":>12} {"calls/hour":>11} {"CPU s/hour":>11}'
          f' {"vs heartbeats":>14}')
    for result in results:
        base = next((other for other in results if other['locks'] == result['locks']
                     and other['mode'] == 'heartbeats'), None)
        ratio = (f'{100 * result["write_units_per_hour"] / base["write_units_per_hour"]:.2f} %'
                 if base and base['write_units_per_hour'] else '')
        print(f'{result["locks"]:>7} {result["mode"]:<11} {result["writes_per_hour"]:>12,} '
              f'{result["write_units_per_hour"]:>12,.0f} {result["calls_per_hour"]:>11,} '
              f'{result["cpu_s_per_hour"]:>11,.2f} {ratio:>14}')
    if arguments.output:
        with open(arguments.output, 'w') as handle:
            json.dump(results, handle, indent=2)
        with open(arguments.output.rsplit('.', 1)[0] + '_table.rst', 'w') as handle:
            handle.write(render(results))
    return 0


def render(results: List[Dict[str, Any]]) -> str:
    """The results as an RST table (docs/sessions.rst includes it)."""
    rows = [('locks', 'renewals', 'write units / hour', 'calls / hour', 'client CPU s / hour', 'vs today')]
    names = {'heartbeats': 'today', 'batched': 'batch of 25', 'sessions': 'session'}
    for result in results:
        base = next((other for other in results if other['locks'] == result['locks']
                     and other['mode'] == 'heartbeats'), None)
        ratio = (f'{100 * result["write_units_per_hour"] / base["write_units_per_hour"]:.2f} %'
                 if base and base['write_units_per_hour'] else '')
        rows.append((f'{result["locks"]:,}', names.get(result['mode'], result['mode']),
                     f'{result["write_units_per_hour"]:,.0f}', f'{result["calls_per_hour"]:,}',
                     f'{result["cpu_s_per_hour"]:,.1f}', ratio))
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
    rule = '  '.join('=' * width for width in widths)
    lines = [rule, '  '.join(cell.ljust(width) for cell, width in zip(rows[0], widths)).rstrip(), rule]
    lines += ['  '.join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in rows[1:]]
    return '\n'.join([*lines, rule, ''])


if __name__ == '__main__':
    sys.exit(main())
