"""Print the score of the last mutmut run (``tox -e mutation``): killed / total, and the
mutants not killed, file by file. Run from the repository root, after ``mutmut run``.

The score counts every mutant checked: one that no test reached ("no tests"), and one that timed
out, count as not killed; mutants not checked yet (an interrupted run) are counted apart. A mutant
that ``mypy --strict`` rejects ("caught by type check": ``tox -e type`` is part of every CI run, so
such a change can never land) counts as caught, and is shown apart from those a test killed. Exit
status 0; with ``--min PERCENT``, 1 below that score.
"""
from __future__ import annotations

import argparse
import collections
import json
import pathlib
import sys

from mutmut.stats import status_by_exit_code     # what mutmut calls each exit code of a mutant's run


CAUGHT = ('killed', 'caught by type check')


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--min', type=float, default=0.0, help='fail below this score (percent)')
    arguments = parser.parse_args()
    counts: 'collections.Counter[str]' = collections.Counter()
    not_killed: 'collections.defaultdict[str, list[str]]' = collections.defaultdict(list)
    for meta in sorted(pathlib.Path('mutants').rglob('*.py.meta')):
        for name, code in json.loads(meta.read_text())['exit_code_by_key'].items():
            kind = status_by_exit_code[code]
            if code is None:
                counts[kind] += 1
                continue
            counts['total'] += 1
            counts[kind] += 1
            if kind in CAUGHT:
                continue
            not_killed[str(meta)[len('mutants/'):-len('.meta')]].append(f'{name} ({kind})')
    total = counts['total']
    caught = sum(counts[kind] for kind in CAUGHT)
    score = 100.0 * caught / total if total else 0.0
    others = ', '.join(f'{kind} {count}' for kind, count in sorted(counts.items()) if kind != 'total')
    print(f"mutation score: {caught} caught / {total} = {score:.1f} %  ({others})")
    for path, names in sorted(not_killed.items()):
        print(f'{path}: {len(names)} not killed')
        for name in names:
            print(f'    {name}')
    return 1 if score < arguments.min else 0


if __name__ == '__main__':
    sys.exit(main())
