"""The package's size limits, as a ratchet: no module over 500 lines, no class over 400, no
function over 80 (docs/design.rst, "Structure").

Whatever is over a limit today is listed in :data:`KNOWN_OVER` with its size: it may not grow, and
once it is back within the limit its entry must go (the test says so), so the list only shrinks.
"""
from __future__ import annotations

import ast
import pathlib
from typing import Dict, Iterator, Tuple

PACKAGE = pathlib.Path(__file__).resolve().parent.parent / 'python_dynamodb_lock'

LIMITS = {'module': 500, 'class': 400, 'function': 80}

# (kind, dotted name) -> lines today. Shrink it; never add to it.
KNOWN_OVER: Dict[Tuple[str, str], int] = {
    ('module', 'python_dynamodb_lock._requests'): 572,
}


def _definitions(node: ast.AST, prefix: str) -> Iterator[Tuple[str, str, int]]:
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            name = f'{prefix}.{child.name}'
            kind = 'class' if isinstance(child, ast.ClassDef) else 'function'
            yield kind, name, (child.end_lineno or child.lineno) - child.lineno + 1
            yield from _definitions(child, name)
        else:
            yield from _definitions(child, prefix)


def measure() -> Dict[Tuple[str, str], int]:
    """Every module, class and function of the package with its length in lines."""
    sizes: Dict[Tuple[str, str], int] = {}
    for path in sorted(PACKAGE.rglob('*.py')):
        parts = path.relative_to(PACKAGE.parent).with_suffix('').parts
        module = '.'.join(parts[:-1] if parts[-1] == '__init__' else parts)
        source = path.read_text(encoding='utf-8')
        sizes[('module', module)] = len(source.splitlines())
        for kind, name, length in _definitions(ast.parse(source), module):
            sizes[(kind, name)] = length
    return sizes


def test_nothing_new_is_over_a_limit_and_nothing_listed_grew() -> None:
    sizes = measure()
    over = {key: length for key, length in sizes.items() if length > LIMITS[key[0]]}
    new = {f'{kind} {name}: {length} lines (limit {LIMITS[kind]})'
           for (kind, name), length in over.items() if (kind, name) not in KNOWN_OVER}
    grew = {f'{kind} {name}: {length} lines, listed at {KNOWN_OVER[(kind, name)]}'
            for (kind, name), length in over.items()
            if (kind, name) in KNOWN_OVER and length > KNOWN_OVER[(kind, name)]}
    assert not new, f'over the limit: {sorted(new)}'
    assert not grew, f'listed as over the limit, and grown: {sorted(grew)}'


def test_the_list_of_known_oversize_shrinks_with_the_code() -> None:
    over = {key for key, length in measure().items() if length > LIMITS[key[0]]}
    stale = sorted(f'{kind} {name}' for kind, name in set(KNOWN_OVER) - over)
    assert not stale, f'within the limit now (or gone): remove from KNOWN_OVER: {stale}'


def test_the_measure_sees_nested_functions_and_methods() -> None:
    tree = ast.parse('class A:\n    def f(self):\n        def g():\n            pass\n        return g\n')
    found = {(kind, name): length for kind, name, length in _definitions(tree, 'm')}
    assert found == {('class', 'm.A'): 5, ('function', 'm.A.f'): 4, ('function', 'm.A.f.g'): 2}
