"""No documented example swallows an exception raised while it holds a lock.

The published ``acquire_lock`` keeps its published default, ``raise_context_exception=False``:
its ``with`` form *suppresses* an exception raised in the block (and logs it), and the code after
the block carries on as if nothing had happened. Readers copy examples; so every ``with`` /
``async with`` example of README.rst, of the pages in docs/ and of the example files the pages
include either propagates or says, in a comment on its ``with`` line (or the line above), why it
does not.

* A threaded ``with`` over ``acquire_lock`` / ``try_acquire_lock`` (or over a lock one of them
  returned earlier in the same example) must pass ``raise_context_exception=True``, or carry a
  comment naming ``raise_context_exception``, or saying that the exception is suppressed or
  swallowed.
* The entry points without a published counterpart (``acquire_locks``, ``try_acquire_locks``,
  ``acquire_first_lock``, and every entry point of the asyncio client) propagate by default;
  their examples only need the comment when they pass ``raise_context_exception=False``.
  ``test_entry_points_without_a_published_counterpart_propagate_by_default`` checks that
  premise against the code.
"""
from __future__ import annotations

import ast
import inspect
import pathlib
import re
import textwrap
from typing import Dict, Iterator, List, NamedTuple, Optional, Tuple

import pytest

PROJECT_DIR = pathlib.Path(__file__).resolve().parent.parent
DOCS_DIR = PROJECT_DIR / 'docs'

#: The threaded entry points whose default (published, or kept like the published one) suppresses.
SUPPRESSING_BY_DEFAULT = {'acquire_lock', 'try_acquire_lock'}
#: Every lock entry point whose result can be a ``with`` statement's context manager.
ENTRY_POINTS = SUPPRESSING_BY_DEFAULT | {'acquire_locks', 'try_acquire_locks', 'acquire_first_lock'}
EXPLAINS = re.compile(r'raise_context_exception|suppress|swallow', re.IGNORECASE)
WITH_LINE = re.compile(r'^\s*(?:>>>\s*|\.\.\.\s*)?(?:async\s+)?with\s.*acquire', re.MULTILINE)
CODE_DIRECTIVE = re.compile(r'^\s*\.\. (?:code-block|code|sourcecode|testcode|doctest)::(.*)$')


class Example(NamedTuple):
    where: str      # file and line of the block
    source: str     # the block as Python source


def documented_files() -> List[pathlib.Path]:
    """README, every page, and the example files a page includes (``literalinclude``)."""
    pages = sorted(DOCS_DIR.glob('*.rst'))
    included = set()
    for page in pages:
        for target in re.findall(r'^\s*\.\. literalinclude:: (\S+)', page.read_text(encoding='utf-8'), re.MULTILINE):
            path = (DOCS_DIR / target).resolve()
            if path.suffix == '.py':
                included.add(path)
    return [PROJECT_DIR / 'README.rst', *pages, *sorted(included)]


def rst_blocks(text: str) -> Iterator[Tuple[int, str]]:
    """(line number, dedented text) of each literal block and code directive of a page."""
    lines = text.splitlines()
    index = 0
    while index < len(lines):
        line = lines[index]
        directive = CODE_DIRECTIVE.match(line)
        if not (directive or (line.rstrip().endswith('::') and not line.lstrip().startswith('.. '))):
            index += 1
            continue
        indent = len(line) - len(line.lstrip())
        index += 1
        start = index
        body: List[str] = []
        while index < len(lines) and (not lines[index].strip()
                                      or len(lines[index]) - len(lines[index].lstrip()) > indent):
            body.append(lines[index])
            index += 1
        block = textwrap.dedent('\n'.join(body))
        block = '\n'.join(row for row in block.splitlines() if not re.match(r'^:[\w-]+:', row))   # options
        if block.strip():
            yield start + 1, block.strip('\n') + '\n'


def as_python(block: str) -> Optional[str]:
    """The block as Python (doctest prompts removed), or None when it is not Python."""
    if re.search(r'^\s*>>> ', block, re.MULTILINE):
        block = '\n'.join(re.sub(r'^(>>> |\.\.\. |\.\.\.$|>>>$)', '', row) for row in block.splitlines()
                          if re.match(r'^(>>>|\.\.\.)( |$)', row))
    try:
        ast.parse(block)
    except SyntaxError:
        return None
    return block


def examples() -> Iterator[Example]:
    for path in documented_files():
        text = path.read_text(encoding='utf-8')
        name = path.relative_to(PROJECT_DIR)
        if path.suffix == '.py':
            yield Example(f'{name}:1', text)
            continue
        for line, block in rst_blocks(text):
            source = as_python(block)
            if source is not None:
                yield Example(f'{name}:{line}', source)


def unparsable_with_examples() -> List[str]:
    """Blocks that look like a ``with`` over a lock but are not Python: they would go unchecked."""
    found = []
    for path in documented_files():
        if path.suffix != '.rst':
            continue
        for line, block in rst_blocks(path.read_text(encoding='utf-8')):
            if as_python(block) is None and WITH_LINE.search(block) and not block.lstrip().startswith('$'):
                found.append(f'{path.relative_to(PROJECT_DIR)}:{line}')
    return found


def _call(node: Optional[ast.AST]) -> Optional[ast.Call]:
    if isinstance(node, ast.Await):
        node = node.value
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ENTRY_POINTS:
        return node
    return None


def _assigned_calls(tree: ast.AST) -> Dict[str, ast.Call]:
    """``name = client.acquire_lock(...)`` (or ``await ...``) in the example, by name."""
    calls = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            call = _call(node.value)
            if call is not None:
                calls[node.targets[0].id] = call
    return calls


def _propagates(call: ast.Call, in_async_with: bool) -> bool:
    for keyword in call.keywords:
        if keyword.arg == 'raise_context_exception':
            return isinstance(keyword.value, ast.Constant) and keyword.value.value is True
    assert isinstance(call.func, ast.Attribute)
    if in_async_with or isinstance(call.func.value, ast.Await):
        return True
    return call.func.attr not in SUPPRESSING_BY_DEFAULT


def swallowing_withs(example: Example) -> List[str]:
    """The ``with`` statements of an example that suppress an exception without saying why."""
    tree = ast.parse(example.source)
    lines = example.source.splitlines()
    assigned = _assigned_calls(tree)
    async_locks = {name for name, call in assigned.items() if _awaited(tree, call)}
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, (ast.With, ast.AsyncWith)):
            continue
        for item in node.items:
            expr = item.context_expr
            call = _call(expr)
            name = expr.id if isinstance(expr, ast.Name) else None
            if call is None and name in assigned:
                call = assigned[name]
            if call is None:
                continue
            is_async = isinstance(node, ast.AsyncWith) or name in async_locks
            if _propagates(call, is_async):
                continue
            header = lines[max(node.lineno - 2, 0):node.body[0].lineno - 1]
            if any('#' in row and EXPLAINS.search(row.split('#', 1)[1]) for row in header):
                continue
            found.append(f'{example.where} (+{node.lineno - 1}): {lines[node.lineno - 1].strip()}')
    return found


def _awaited(tree: ast.AST, call: ast.Call) -> bool:
    return any(isinstance(node, ast.Await) and node.value is call for node in ast.walk(tree))


# --------------------------------------------------------------------------------------------


def test_the_examples_are_found() -> None:
    found = list(examples())
    where = {example.where.split(':')[0] for example in found}
    assert {'README.rst', 'docs/multi_keys.rst', 'docs/shared_locks.rst', 'docs/index.rst',
            'docs/asyncio.rst', 'examples/test_quickstart.py'} <= where, where
    withs = sum(len([node for node in ast.walk(ast.parse(example.source))
                     if isinstance(node, (ast.With, ast.AsyncWith))]) for example in found)
    assert withs >= 20, withs


def test_no_lock_example_escapes_the_check() -> None:
    assert unparsable_with_examples() == []


def test_no_documented_with_example_swallows_exceptions() -> None:
    found = [line for example in examples() for line in swallowing_withs(example)]
    assert found == [], (
        'These `with` examples suppress an exception raised in their block (the published '
        "default of acquire_lock): pass raise_context_exception=True, or say why in a comment "
        'on the `with` line:\n' + '\n'.join(found))


@pytest.mark.parametrize('source, flagged', [
    ("with lock_client.acquire_lock('k'):\n    ...\n", True),
    ("with lock_client.try_acquire_lock('k') as lock:\n    ...\n", True),
    ("with lock_client.acquire_lock('k', raise_context_exception=True):\n    ...\n", False),
    ("with lock_client.acquire_lock('k'):   # suppressed: the published default\n    ...\n", False),
    ("# raise_context_exception=False on purpose\nwith lock_client.acquire_lock('k'):\n    ...\n", False),
    ("lock = lock_client.acquire_lock('k')\nwith lock:\n    ...\n", True),
    ("lock = lock_client.acquire_lock('k', raise_context_exception=True)\nwith lock:\n    ...\n", False),
    ("with lock_client.acquire_locks(['a', 'b']) as both:\n    ...\n", False),
    ("with lock_client.acquire_locks(['a'], raise_context_exception=False):\n    ...\n", True),
    ("with lock_client.acquire_first_lock('pool', ['a', 'b']):\n    ...\n", False),
    ("async def f():\n    async with client.acquire_lock('k'):\n        ...\n", False),
    ("async def f():\n    lock = await client.acquire_lock('k')\n    async with lock:\n        ...\n", False),
    ("async def f():\n    async with client.acquire_lock('k', raise_context_exception=False):\n        ...\n", True),
    ("with open('f') as f:\n    ...\n", False),
])
def test_the_check_flags_what_swallows(source: str, flagged: bool) -> None:
    assert bool(swallowing_withs(Example('sample', source))) is flagged


def test_doctest_blocks_are_read_without_their_prompts() -> None:
    block = ">>> with lock_client.acquire_lock('k'):\n...     pass\n"
    source = as_python(block)
    assert source is not None and swallowing_withs(Example('sample', source))


def test_entry_points_without_a_published_counterpart_propagate_by_default() -> None:
    """The premise of the rule above, checked against the code."""
    from python_dynamodb_lock.aio import AsyncDynamoDBLockClient
    from python_dynamodb_lock.python_dynamodb_lock import DynamoDBLockClient

    def default(function: object) -> object:
        return inspect.signature(function).parameters['raise_context_exception'].default   # type: ignore[arg-type]

    assert default(DynamoDBLockClient.acquire_lock) is False     # published, kept
    propagating = {
        'DynamoDBLockClient.acquire_locks': DynamoDBLockClient.acquire_locks,
        'DynamoDBLockClient.try_acquire_locks': DynamoDBLockClient.try_acquire_locks,
        'DynamoDBLockClient.acquire_first_lock': DynamoDBLockClient.acquire_first_lock,
        'AsyncDynamoDBLockClient.acquire_lock': AsyncDynamoDBLockClient.acquire_lock,
        'AsyncDynamoDBLockClient.try_acquire_lock': AsyncDynamoDBLockClient.try_acquire_lock,
        'AsyncDynamoDBLockClient.acquire_locks': AsyncDynamoDBLockClient.acquire_locks,
        'AsyncDynamoDBLockClient.try_acquire_locks': AsyncDynamoDBLockClient.try_acquire_locks,
        'AsyncDynamoDBLockClient.acquire_first_lock': AsyncDynamoDBLockClient.acquire_first_lock,
    }
    suppressing = sorted(name for name, function in propagating.items() if default(function) is not True)
    assert suppressing == []
