"""The package's import graph, counting every import: at module level, inside functions and
under ``TYPE_CHECKING`` (import-linter's contracts in ``.importlinter``, run by ``tox -e lint``,
keep the layers apart; this keeps the graph free of cycles, which a deferred import only hides).

No cycle is known (:data:`KNOWN_CYCLES`, empty since the layout of issue "One way down": the
clients are composed, the recipes live in ``_recipes/``). A new cycle fails; a cycle listed here
fails once it is gone, so that the list is shortened with it.
"""
from __future__ import annotations

import ast
import pathlib
from typing import Dict, FrozenSet, List, Set

PACKAGE = pathlib.Path(__file__).resolve().parent.parent / 'python_dynamodb_lock'
NAME = 'python_dynamodb_lock'

KNOWN_CYCLES: Set[FrozenSet[str]] = set()


def modules(package: pathlib.Path = PACKAGE) -> Dict[str, pathlib.Path]:
    found = {}
    for path in package.rglob('*.py'):
        parts = (NAME,) + path.relative_to(package).with_suffix('').parts
        name = '.'.join(parts[:-1] if parts[-1] == '__init__' else parts)
        found[name] = path
    return found


def import_graph(found: Dict[str, pathlib.Path]) -> Dict[str, Set[str]]:
    """module -> the package's modules it imports, wherever the import statement stands."""
    graph: Dict[str, Set[str]] = {name: set() for name in found}
    for name, path in found.items():
        package = name if path.name == '__init__.py' else name.rsplit('.', 1)[0]
        for node in ast.walk(ast.parse(path.read_text(encoding='utf-8'))):
            targets: List[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ''
                if node.level:
                    parts = package.split('.')[:len(package.split('.')) - node.level + 1]
                    base = '.'.join(parts + ([node.module] if node.module else []))
                submodules = [f'{base}.{alias.name}' for alias in node.names if f'{base}.{alias.name}' in found]
                targets = submodules if len(submodules) == len(node.names) else [base, *submodules]
            for target in targets:
                while target not in found and '.' in target:
                    target = target.rsplit('.', 1)[0]
                if target in found and target != name:
                    graph[name].add(target)
    return graph


def cycles(graph: Dict[str, Set[str]]) -> Set[FrozenSet[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    on_stack: Set[str] = set()
    found: Set[FrozenSet[str]] = set()

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                found.add(frozenset(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_import_cycle_but_the_known_one() -> None:
    found = cycles(import_graph(modules()))
    new = [sorted(cycle) for cycle in found - KNOWN_CYCLES]
    assert not new, f'import cycles (counting imports in functions and under TYPE_CHECKING): {new}'
    gone = [sorted(cycle) for cycle in KNOWN_CYCLES - found]
    assert not gone, f'a known cycle is gone or changed: update KNOWN_CYCLES: {gone}'


def test_the_scan_sees_imports_in_functions_and_under_type_checking(tmp_path: pathlib.Path) -> None:
    package = tmp_path / NAME
    (package / 'sub').mkdir(parents=True)
    (package / '__init__.py').write_text('')
    (package / 'sub' / '__init__.py').write_text('')
    (package / 'a.py').write_text('from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .sub import b\n')
    (package / 'sub' / 'b.py').write_text('def f():\n    from ..a import f\n')
    (package / 'c.py').write_text('from . import a\n')
    found = cycles(import_graph(modules(package)))
    assert found == {frozenset({f'{NAME}.a', f'{NAME}.sub.b'})}
