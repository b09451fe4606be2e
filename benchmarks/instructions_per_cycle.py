"""Instructions per uncontended acquire + release, side by side, counted by valgrind: a figure
that the machine's load does not move.

CPU seconds on a shared machine vary by a quarter from one run to the next
(``cpu_per_cycle.py`` alternates its trials to compare within a round). Counting instructions
instead (valgrind's callgrind, which runs the code on a simulated CPU) gives the same number for
the same code and inputs whatever else the machine does: the way to tell a change of a few per
cent from noise. Instructions are not time (a cache miss or a slow instruction counts one), so
this complements ``cpu_per_cycle.py``; it does not replace it.

Each entrant is ``bench_worker.py cycles`` (or ``cycles_async``) in a subprocess whose
``PYTHONPATH`` names exactly one implementation, every DynamoDB call answered at once by a
botocore hook, run twice under callgrind: with ``--iterations`` cycles and with twice as many.
The difference, divided by ``--iterations``, is the count of one cycle, with the interpreter's
start, the imports and the warm-up taken out. Nothing is asserted: the figures are only printed
(and written with ``--output``). Needs ``valgrind`` on ``PATH``; about a minute per entrant.

Usage::

    python benchmarks/instructions_per_cycle.py                  # ours, ours asyncio, 0.9.1, 0.9.3
    python benchmarks/instructions_per_cycle.py --low-level      # ours on boto3.client('dynamodb') too
    python benchmarks/instructions_per_cycle.py --build before=/tmp/before --no-async
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cpu_per_cycle import REFERENCE, add_entrant_arguments, entrants, text_table  # noqa: E402
from run_benchmarks import HERE, TABLE_NAME, WORKER, Implementation, JsonDict, log  # noqa: E402

#: The worker figure that runs only the cycles, for each figure of ``cpu_per_cycle.py``.
CYCLE_FIGURES = {'cpu': 'cycles', 'cpu_async': 'cycles_async'}
_TOTAL = re.compile(r'I\s+refs:\s+([\d,]+)')


def parse_arguments(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    add_entrant_arguments(parser)
    parser.add_argument('--iterations', type=int, default=100,
                        help='cycles of the shorter of the two runs (default 100)')
    parser.add_argument('--output', type=Path, default=None, help='write the counts to this JSON file')
    return parser.parse_args(argv)


def instructions(implementation: Implementation, figure: str, params: JsonDict) -> int:
    """Instructions callgrind counted in one run of the worker (the whole process)."""
    environment = dict(os.environ, PYTHONPATH=str(implementation.path))
    environment.pop('PYTHONSTARTUP', None)
    command = ['valgrind', '--tool=callgrind', '--callgrind-out-file=/dev/null', sys.executable, str(WORKER),
               figure, '--endpoint', 'http://127.0.0.1:9', '--table', TABLE_NAME, '--params', json.dumps(params)]
    completed = subprocess.run(command, env=environment, capture_output=True, text=True, timeout=1800,
                               cwd=str(HERE))
    match = _TOTAL.search(completed.stderr)
    if completed.returncode != 0 or match is None:
        tail = '\n'.join(completed.stderr.strip().splitlines()[-15:])
        raise RuntimeError(f'{figure}/{implementation.label}: exit {completed.returncode}\n{tail}')
    return int(match.group(1).replace(',', ''))


def count(arguments: argparse.Namespace) -> Dict[str, JsonDict]:
    counts: Dict[str, JsonDict] = {}
    for label, figure, implementation, extra in entrants(arguments):
        cycle_figure = CYCLE_FIGURES[figure]
        log(f'{label}: {arguments.iterations} and {2 * arguments.iterations} cycles under callgrind')
        short = instructions(implementation, cycle_figure, {'iterations': arguments.iterations, **extra})
        long = instructions(implementation, cycle_figure, {'iterations': 2 * arguments.iterations, **extra})
        counts[label] = {'instructions_per_cycle': (long - short) / arguments.iterations,
                         'short_run': short, 'long_run': long}
    return counts


def report(counts: Dict[str, JsonDict]) -> str:
    header = ('implementation', 'instructions per cycle (millions)', f'vs {REFERENCE}', 'vs threaded')
    reference = counts.get(REFERENCE, {}).get('instructions_per_cycle')
    rows: List[Tuple[str, ...]] = []
    for label, figures in counts.items():
        per_cycle = figures['instructions_per_cycle']
        threaded = label.rsplit(' ', 1)[0] if label.endswith(' asyncio') else None
        threaded_count = counts.get(threaded, {}).get('instructions_per_cycle') if threaded else None
        rows.append((label, f'{per_cycle / 1e6:.3f}',
                     f'{per_cycle / reference:.3f}x' if reference and label != REFERENCE else '',
                     f'{per_cycle / threaded_count:.3f}x' if threaded_count else ''))
    return text_table(header, rows)


def main(argv: Optional[Sequence[str]] = None) -> int:
    arguments = parse_arguments(argv)
    if shutil.which('valgrind') is None:
        raise SystemExit('valgrind is not on PATH (Debian: apt-get install valgrind)')
    counts = count(arguments)
    table = report(counts)
    if arguments.output is not None:
        arguments.output.write_text(json.dumps(counts, indent=2) + '\n', encoding='utf-8')
    print(f'\n{table}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
