"""Print the score of the last mutmut run (``tox -e mutation``): killed / total, and the
mutants not killed, file by file. Run from the repository root, after ``mutmut run``.

The score counts every mutant checked: one that no test reached ("no tests"), and one that timed
out, count as not killed; mutants not checked yet (an interrupted run) are counted apart. Exit
status 0; with ``--min PERCENT``, 1 below that score.
"""
from __future__ import annotations

import argparse
import collections
import json
import pathlib
import sys

from mutmut.stats import status_by_exit_code     # what mutmut calls each exit code of a mutant's run


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
            if kind == 'killed':
                continue
            not_killed[str(meta)[len('mutants/'):-len('.meta')]].append(f'{name} ({kind})')
    total = counts['total']
    score = 100.0 * counts['killed'] / total if total else 0.0
    others = ', '.join(f'{kind} {count}' for kind, count in sorted(counts.items()) if kind not in ('total', 'killed'))
    print(f"mutation score: {counts['killed']} killed / {total} = {score:.1f} %  ({others})")
    for path, names in sorted(not_killed.items()):
        print(f'{path}: {len(names)} not killed')
        for name in names:
            print(f'    {name}')
    return 1 if score < arguments.min else 0


if __name__ == '__main__':
    sys.exit(main())
