"""Client CPU per uncontended acquire + release, side by side, with no engine: a quick check.

Each trial is ``bench_worker.py cpu`` (or ``cpu_async``) in a subprocess whose ``PYTHONPATH``
names exactly one implementation, as ``run_benchmarks.py`` runs its figures: every DynamoDB call
is answered at once by a botocore hook, so what is measured is the client's own work plus
botocore's on each call. Trials alternate between the implementations (every other round in
reverse order), and the ratios are taken within a round, so that a machine whose load changes
during the run (a shared one) affects them all alike.

Usage::

    python benchmarks/cpu_per_cycle.py                       # ours, ours asyncio, 0.9.1, 0.9.3
    python benchmarks/cpu_per_cycle.py --trials 7 --iterations 2000
    python benchmarks/cpu_per_cycle.py --build before=/tmp/before   # another checkout of this project
    python benchmarks/cpu_per_cycle.py --profile 30          # also print a cProfile of ours
    python benchmarks/cpu_per_cycle.py --low-level           # ours on boto3.client('dynamodb') too

``--build LABEL=PATH`` adds a checkout of this project (the folder holding its
``python_dynamodb_lock`` package, e.g. made with ``git worktree add`` or ``git archive``), measured
like this one, threaded and asyncio: the way to compare a change with the code before it in one
run. Each row also gives how the CPU of a cycle splits between botocore's ``_make_api_call``
(building, validating, signing, sending and parsing each call, with boto3's resource-layer
conversions) and everything outside it (the lock client's own work), from a second pass of
each trial. ``--low-level`` adds this checkout's threaded client given a low-level client
(``boto3.client('dynamodb')``, no resource layer), and the same with botocore's parameter
validation turned off (``Config(parameter_validation=False)``): two choices an application can
make, shown for what they cost; and the same client with every call answered by a stand-in for
the low-level client, without botocore: this project's own work per cycle. Nothing is
asserted: the figures are only printed (and written with ``--output``).
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parent))

from run_benchmarks import (  # noqa: E402
    IMPLEMENTATIONS,
    Implementation,
    JsonDict,
    WorkerFailed,
    install_published,
    log,
    run_worker,
)

#: The reference every ratio is taken against.
REFERENCE = '0.9.1'


def add_entrant_arguments(parser: argparse.ArgumentParser) -> None:
    """The options that choose the clients measured (what :func:`entrants` reads)."""
    parser.add_argument('--implementations', default='ours,0.9.1,0.9.3',
                        help='comma-separated subset of: ' + ', '.join(IMPLEMENTATIONS))
    parser.add_argument('--build', action='append', default=[], metavar='LABEL=PATH',
                        help='another checkout of this project to measure like this one (repeatable)')
    parser.add_argument('--no-async', dest='asynchronous', action='store_false',
                        help='leave the asyncio client out')
    parser.add_argument('--low-level', action='store_true',
                        help="also measure this checkout's threaded client on a low-level boto3 client, with "
                             "and without botocore's parameter validation, and with no botocore at all")


def parse_arguments(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    add_entrant_arguments(parser)
    parser.add_argument('--trials', type=int, default=5, help='rounds of trials (default 5)')
    parser.add_argument('--iterations', type=int, default=1000,
                        help='acquire + release cycles per trial (default 1000)')
    parser.add_argument('--profile', type=int, default=0, metavar='ROWS',
                        help='print a cProfile (ROWS rows) of one more pass of this project\'s clients')
    parser.add_argument('--output', type=Path, default=None, help='write every trial to this JSON file')
    return parser.parse_args(argv)


def entrants(arguments: argparse.Namespace) -> List[Tuple[str, str, Implementation, JsonDict]]:
    """``(label, worker figure, implementation, worker parameters)`` for every client measured."""
    ours_like: List[Implementation] = []
    published: List[Implementation] = []
    for label in (item.strip() for item in arguments.implementations.split(',') if item.strip()):
        if label not in IMPLEMENTATIONS:
            raise SystemExit(f'unknown implementation {label} (choose from {", ".join(IMPLEMENTATIONS)})')
        implementation = IMPLEMENTATIONS[label]
        install_published(implementation)
        if not implementation.available():
            log(f'skipping {label}: not installed')
            continue
        (ours_like if implementation.pip_requirement is None else published).append(implementation)
    for build in arguments.build:
        label, separator, path = build.partition('=')
        implementation = Implementation(label, Path(path).expanduser().resolve())
        if not separator or not implementation.available():
            raise SystemExit(f'--build {build}: expected LABEL=PATH, PATH holding python_dynamodb_lock/')
        ours_like.append(implementation)
    chosen: List[Tuple[str, str, Implementation, JsonDict]] = []
    for implementation in ours_like:
        chosen.append((implementation.label, 'cpu', implementation, {}))
        if arguments.asynchronous:
            chosen.append((f'{implementation.label} asyncio', 'cpu_async', implementation, {}))
        if arguments.low_level and implementation.label == 'ours':
            chosen.append(('ours low-level', 'cpu', implementation, {'client': 'low-level'}))
            chosen.append(('ours low-level unvalidated', 'cpu', implementation,
                           {'client': 'low-level-unvalidated'}))
            chosen.append(('ours, no botocore', 'cpu', implementation, {'client': 'no-botocore'}))
    chosen.extend((implementation.label, 'cpu', implementation, {}) for implementation in published)
    return chosen


def measure(arguments: argparse.Namespace) -> Dict[str, List[JsonDict]]:
    chosen = entrants(arguments)
    trials: Dict[str, List[JsonDict]] = {label: [] for label, _, _, _ in chosen}
    for round_number in range(arguments.trials):
        ordered = chosen if round_number % 2 == 0 else list(reversed(chosen))
        for label, figure, implementation, extra in ordered:
            params: JsonDict = {'iterations': arguments.iterations, **extra}
            if arguments.profile and round_number == 0 and implementation.pip_requirement is None:
                params['profile'] = arguments.profile
            log(f'{label} (round {round_number + 1}/{arguments.trials})')
            try:
                result = run_worker(implementation, figure, 'http://127.0.0.1:9', params, timeout=600)
            except WorkerFailed as error:
                log(f'FAILED {error}')
                continue
            result['round'] = round_number
            if 'profile' in result:
                print(f'\n==== cProfile of {label} ====\n{result.pop("profile")}')
            trials[label].append(result)
    return trials


def _ratios(trials: Dict[str, List[JsonDict]], label: str, reference: str) -> List[float]:
    """``label``'s CPU over ``reference``'s, round by round (rounds where both were measured)."""
    by_round = {trial['round']: trial['cpu_ms_per_acquire_release'] for trial in trials.get(reference, [])}
    return [trial['cpu_ms_per_acquire_release'] / by_round[trial['round']]
            for trial in trials[label] if trial['round'] in by_round]


def report(trials: Dict[str, List[JsonDict]]) -> str:
    header = ('implementation', 'CPU ms per cycle: median (min-max)', 'in botocore', 'outside',
              'calls', 'vs 0.9.1 (median of rounds)', 'vs threaded')
    rows: List[Tuple[str, ...]] = []
    for label, results in trials.items():
        if not results:
            rows.append((label, 'failed', '', '', '', '', ''))
            continue
        cpu = [trial['cpu_ms_per_acquire_release'] for trial in results]
        inside = statistics.median(trial['split_cpu_ms_in_api_calls'] for trial in results)
        outside = statistics.median(trial['split_cpu_ms_outside_api_calls'] for trial in results)
        versus = _ratios(trials, label, REFERENCE) if label != REFERENCE else []
        threaded = label.rsplit(' ', 1)[0] if label.endswith(' asyncio') else None
        threaded_ratios = _ratios(trials, label, threaded) if threaded in trials else []
        rows.append((label, f'{statistics.median(cpu):.3f} ({min(cpu):.3f}-{max(cpu):.3f})', f'{inside:.3f}',
                     f'{outside:.3f}', f'{results[0]["calls_per_acquire_release"]:g}',
                     f'{statistics.median(versus):.2f}x' if versus else '',
                     f'{statistics.median(threaded_ratios):.2f}x' if threaded_ratios else ''))
    return text_table(header, rows)


def text_table(header: Tuple[str, ...], rows: Sequence[Tuple[str, ...]]) -> str:
    """``rows`` under ``header``, in columns as wide as their widest cell."""
    widths = [max(len(row[index]) for row in [header, *rows]) for index in range(len(header))]
    lines = [' | '.join(cell.ljust(width) for cell, width in zip(row, widths)) for row in [header, *rows]]
    lines.insert(1, '-+-'.join('-' * width for width in widths))
    return '\n'.join(lines)


def main(argv: Optional[Sequence[str]] = None) -> int:
    arguments = parse_arguments(argv)
    trials = measure(arguments)
    print()
    print(report(trials))
    if arguments.output is not None:
        arguments.output.write_text(json.dumps({'iterations': arguments.iterations, 'trials': trials}, indent=2)
                                    + '\n', encoding='utf-8')
    return 0


if __name__ == '__main__':
    sys.exit(main())
