"""Reads of private attributes across modules inside the package, listed in one place.

A module may read its own classes' private attributes; reading another module's (``lock._state``
or ``getattr(lock, '_own_row')`` in the core) couples the two behind the
owner's back. Each such read that remains is listed in :data:`PRIVATE_READS` with how many times
the module makes it and why it stays; a new one fails here (give the owner a small method or
property instead), and so does a listed one that grew, or that is gone (remove its entry).

What the scan sees: with :mod:`ast`, every ``<expr>._name`` read (``ast.Load``) where ``<expr>``
is not the name ``self`` or ``cls``, and every ``getattr``/``hasattr`` with a constant
``'_name'``, where ``_name`` (not a dunder) is defined in a class of another module of the
package: a method, a class attribute, or a ``self._name = ...`` in a method.

What it does not catch: writes (``lock._holds -= 1`` is a store), reads of a name that no class
of another module defines (module-level privates, such as an imported ``_helper``), reads
through a name other than ``self``/``cls`` of the module's own class (counted as cross-module
when another module's class also defines the name: ``lock._state`` in a module whose own class
has a ``self._state`` is still counted), dynamic names (``getattr(x, name)``), and ``vars()`` /
``__dict__`` access. The published 0.9.1 class attributes (``_DEFAULT_*``, ``_COL_*``,
REFERENCE_API) are public by contract and not counted.
"""
from __future__ import annotations

import ast
import collections
import pathlib
from typing import Counter, Dict, Iterator, Set, Tuple

PACKAGE = pathlib.Path(__file__).resolve().parent.parent / 'python_dynamodb_lock'

_LOCK_STATE = ("the lock's protocol state (LockState), which the core's functions take: the orchestration reaches "
               'it through _locks.state_of, which the core may not import (its LockView protocol names _state)')
_CORE_FROZEN = ("the core's LockView protocol names it: the core may not import _common.locks.state_of, and a "
                'public property would add a call per read on the hot path (tests/test_call_budget.py)')

_SIMULATED = ("the simulation checks each lock's protocol state after every step and runs the lock's "
              'mutex cooperatively (SimulatedLock replaces HeldLock._mutex): the seam the next step of the '
              'simulation driver needs is a driver-supplied mutex and a package-level view of LockState')

#: (module, attribute) -> (reads today, why it stays). Shrink it; add to it only with a reason.
PRIVATE_READS: Dict[Tuple[str, str], Tuple[int, str]] = {
    ('testing/_simulation/invariants.py', '_state'): (1, _SIMULATED),
    ('testing/_simulation/scheduler.py', '_mutex'): (2, _SIMULATED),
    ('testing/_simulation/tasks_protocol.py', '_mutex'): (2, _SIMULATED),
    ('_core/guard.py', '_clock'): (1, f"the lock's clock; {_CORE_FROZEN}"),
    ('_core/guard.py', '_state'): (2, f'{_LOCK_STATE}; {_CORE_FROZEN}'),
    ('_core/heartbeat.py', '_state'): (8, f'{_LOCK_STATE}; {_CORE_FROZEN}'),
    ('_core/item_size.py', '_state'): (1, f'{_LOCK_STATE}; {_CORE_FROZEN}'),
    ('_core/multi.py', '_state'): (3, f'{_LOCK_STATE}; {_CORE_FROZEN}'),
    ('_core/release.py', '_state'): (4, f'{_LOCK_STATE}; {_CORE_FROZEN}'),
    ('_core/session.py', '_state'): (9, f'{_LOCK_STATE}; {_CORE_FROZEN}'),
    ('_core/shared_ops.py', '_state'): (2, f'{_LOCK_STATE}; {_CORE_FROZEN}'),
}


def _private(name: str) -> bool:
    return name.startswith('_') and not name.endswith('__') and not name.startswith(('_DEFAULT_', '_COL_'))


def _class_members(tree: ast.AST) -> Iterator[str]:
    """The private names a module's classes define (methods, class attributes, ``self._x = ...``)."""
    for cls in ast.walk(tree):
        if not isinstance(cls, ast.ClassDef):
            continue
        for statement in cls.body:
            if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)) and _private(statement.name):
                yield statement.name
            targets = (statement.targets if isinstance(statement, ast.Assign)
                       else [statement.target] if isinstance(statement, ast.AnnAssign) else [])
            yield from (target.id for target in targets if isinstance(target, ast.Name) and _private(target.id))
        for node in ast.walk(cls):
            if (isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) and _private(node.attr)
                    and isinstance(node.value, ast.Name) and node.value.id in ('self', 'cls')):
                yield node.attr


def _reads(tree: ast.AST) -> Iterator[str]:
    """The private names a module reads on something other than ``self``/``cls``."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load) and _private(node.attr):
            if not (isinstance(node.value, ast.Name) and node.value.id in ('self', 'cls')):
                yield node.attr
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ('getattr', 'hasattr')
              and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant)
              and isinstance(node.args[1].value, str) and _private(node.args[1].value)):
            yield node.args[1].value


def scan() -> Counter[Tuple[str, str]]:
    """(module, name) -> reads, for every read of another module's class's private name."""
    trees = {path.relative_to(PACKAGE).as_posix(): ast.parse(path.read_text(encoding='utf-8'))
             for path in sorted(PACKAGE.rglob('*.py'))}
    owners: Dict[str, Set[str]] = collections.defaultdict(set)
    for module, tree in trees.items():
        for name in _class_members(tree):
            owners[name].add(module)
    found: Counter[Tuple[str, str]] = collections.Counter()
    for module, tree in trees.items():
        for name in _reads(tree):
            if owners.get(name, set()) - {module}:
                found[(module, name)] += 1
    return found


def test_every_cross_module_private_read_is_listed_with_a_reason() -> None:
    found = scan()
    unlisted = sorted(f'{module}: .{name} ({count}x)' for (module, name), count in found.items()
                      if (module, name) not in PRIVATE_READS)
    grew = sorted(f'{module}: .{name} {count}x, listed at {PRIVATE_READS[(module, name)][0]}'
                  for (module, name), count in found.items()
                  if (module, name) in PRIVATE_READS and count > PRIVATE_READS[(module, name)][0])
    assert not unlisted, f'reads of another module\'s private attribute: give the owner a method instead: {unlisted}'
    assert not grew, f'listed private reads that grew: {grew}'


def test_the_list_shrinks_with_the_code() -> None:
    found = scan()
    stale = sorted(f'{module}: .{name} (now {found.get((module, name), 0)}x)'
                   for (module, name), (count, _) in PRIVATE_READS.items() if found.get((module, name), 0) < count)
    assert not stale, f'fewer reads than listed: lower or remove the entries: {stale}'


def test_the_scan_sees_attribute_reads_and_getattr_but_not_self() -> None:
    owner = ast.parse('class A:\n    def __init__(self):\n        self._x = 1\n    def _m(self):\n        pass\n')
    reader = ast.parse('def f(a, self):\n    self._x\n    a._x\n    getattr(a, "_m")\n    a._y\n    a.__len__\n')
    assert sorted(_class_members(owner)) == ['_m', '_x']
    assert sorted(_reads(reader)) == ['_m', '_x', '_y']
