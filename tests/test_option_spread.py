"""One option, few places (issue 28, "One of each"): an acquire option of ``acquire_lock`` is
named in at most :data:`LIMIT` modules of the library: the two public faces, the typed call
description (``_client/call.py``) and the place that uses it. A new module that names one
fails here; route the value through the call description instead (``AcquireCall`` ->
``AcquireAttempt``), or list the module below with the reason it must name the option.

What counts as naming an option: with :mod:`ast`, a parameter, a keyword argument, a name, a
field or an attribute read with the option's name (not a method call such as ``task.cancel()``,
not comments or strings). The options: the parameters of ``DynamoDBLockClient.acquire_lock``
but the key (``partition_key``, ``sort_key``) and those that are also published attributes of
the lock it returns (``additional_attributes``, ``lease_duration``, ``app_callback``,
``raise_context_exception``, ``shared``, ``keep_row``, ``lock_existing_item``): those travel
with the lock and are read wherever the lock is. The library: the package but its tooling
(``_cli``, ``_demo``, ``_embedded``, the recipes and the testing kit), which calls
``acquire_lock`` as any application does.
"""
from __future__ import annotations

import ast
import inspect
import pathlib
from typing import Dict, Iterator, Set, Tuple

from python_dynamodb_lock import HeldLock
from python_dynamodb_lock.python_dynamodb_lock import DynamoDBLockClient

PACKAGE = pathlib.Path(__file__).resolve().parent.parent / 'python_dynamodb_lock'
LIMIT = 4
TOOLING = ('_cli/', '_demo/', '_embedded/', '_recipes/', 'recipes.py', 'testing/')

_WAIT = ('the several-keys entry points (acquire_first_lock, acquire_locks, try_acquire_locks) still take it as a '
         'loose argument through _handles/calls.py and _client (first_attempts, SeveralKeys.attempts) to acquire_call; '
         'the core reads it from AcquireAttempt in each wait loop (_core/acquire.py, _core/multi.py) and '
         '_core/write.py declares it. Next step: the faces build the AcquireCall for every entry point')

#: (option, module) -> why that module names it beyond the four places.
EXCEPTIONS: Dict[Tuple[str, str], str] = {
    ('only_if_exists', '_wire/lock_writes.py'): ('the request builder writes its condition (attribute_exists) from it; '
                                         '_core/write.py, which judges the answer, is the other half of the use'),
    **{(option, module): _WAIT for option in ('retry_period', 'retry_timeout')
       for module in ('_handles/calls.py', '_client/acquiring.py', '_client/several_keys.py', '_core/acquire.py',
                      '_core/multi.py')},
}


def options() -> Set[str]:
    """The acquire options the limit is about (see the module docstring)."""
    given = set(inspect.signature(DynamoDBLockClient.acquire_lock).parameters) - {'self', 'partition_key', 'sort_key'}
    travels_with_the_lock = set(inspect.signature(HeldLock.__init__).parameters) | set(dir(HeldLock))
    return given - travels_with_the_lock


def names(source: str) -> Iterator[str]:
    """Every name ``source`` gives a parameter, a keyword, a variable, a field or an attribute read."""
    tree = ast.parse(source)
    called = {id(node.func) for node in ast.walk(tree) if isinstance(node, ast.Call)}
    for node in ast.walk(tree):
        if isinstance(node, ast.arg):
            yield node.arg
        elif isinstance(node, ast.keyword) and node.arg is not None:
            yield node.arg
        elif isinstance(node, ast.Name):
            yield node.id
        elif isinstance(node, ast.Attribute) and id(node) not in called:
            yield node.attr


def spread() -> Dict[str, Set[str]]:
    """option -> the library modules naming it."""
    wanted = options()
    found: Dict[str, Set[str]] = {option: set() for option in wanted}
    for path in sorted(PACKAGE.rglob('*.py')):
        module = path.relative_to(PACKAGE).as_posix()
        if module.startswith(TOOLING):
            continue
        for name in set(names(path.read_text(encoding='utf-8'))) & wanted:
            found[name].add(module)
    return found


def test_the_options_measured_are_the_acquire_only_ones() -> None:
    assert options() == {'cancel', 'only_if_exists', 'reentrant', 'retry_period', 'retry_timeout'}


def test_an_acquire_option_is_named_in_at_most_four_library_modules() -> None:
    over = {option: sorted(modules - {module for (named, module) in EXCEPTIONS if named == option})
            for option, modules in spread().items()}
    assert all(len(modules) <= LIMIT for modules in over.values()), (
        f'acquire options named in more than {LIMIT} modules (route them through _client/call.py): '
        f'{ {option: modules for option, modules in over.items() if len(modules) > LIMIT} }')


def test_every_listed_exception_still_names_its_option() -> None:
    found = spread()
    stale = sorted(f'{module}: {option}' for option, module in EXCEPTIONS if module not in found[option])
    assert not stale, f'listed exceptions that no longer name the option (remove them): {stale}'


def test_the_measure_sees_parameters_keywords_and_fields_but_not_method_calls() -> None:
    source = ('def f(a, *, retry_period=1):\n    g(cancel=True)\n    x.reentrant\n    task.cancel()\n'
              '    only_if_exists: bool = False\n    # retry_timeout\n')
    assert {'retry_period', 'cancel', 'reentrant', 'only_if_exists'} <= set(names(source))
    assert 'retry_timeout' not in set(names(source))
