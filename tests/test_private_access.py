"""The test suite reaches the library through public seams; each private access left is named and justified.

A test that reads a client's private attribute or imports a private module breaks when the
internals move, and proves less than it seems (what it checks is not what a user can see). So
the suite's private accesses are counted here with an ``ast`` scan of ``tests/``, and each one
that remains is listed in :data:`ALLOWED` with the reason why no public seam serves. A new
private access fails :func:`test_no_unlisted_private_access` until it is either replaced by a
public seam or added to the list with its reason.

What counts (the same scan prints the inventory, and the allow-list entries that can shrink:
``python tests/test_private_access.py``):

* ``import``: an import of a private module of the package (``python_dynamodb_lock._x``,
  ``python_dynamodb_lock.testing._y``, ``from python_dynamodb_lock import _x``); counted once
  per import statement, keyed by the module.
* ``attr``: ``obj._name`` (read or write, or ``getattr``/``setattr``/``monkeypatch.setattr`` of a
  ``'_name'`` string) where ``_name`` is a private name the package defines (an attribute,
  method, class or module-level name with one leading underscore) and ``obj`` is not ``self``
  or ``cls`` nor a plain variable holding one of the file's own helper objects (see
  :func:`scan_source`). Dunder names are
  public protocol and do not count; names only the suite or other libraries define do not count.

The allow-list is keyed by file, kind and name with a count, not by line, so that it survives
edits elsewhere in a file.
"""
from __future__ import annotations

import ast
import collections
import pathlib
import sys
from typing import Dict, Iterator, List, NamedTuple, Set, Tuple

TESTS = pathlib.Path(__file__).resolve().parent
PACKAGE = TESTS.parent / 'python_dynamodb_lock'
PACKAGE_NAME = 'python_dynamodb_lock'

#: Attribute roots that are other libraries (their private names can coincide with ours).
FOREIGN_ROOTS = frozenset({'os', 'sys', 'botocore', 'aiobotocore', 'boto3', 'asyncio', 'threading'})


class Access(NamedTuple):
    kind: str      # 'import' or 'attr'
    name: str      # the module, or the attribute name
    line: int
    text: str      # the receiver expression or the statement, for the inventory


def _is_private(segment: str) -> bool:
    return segment.startswith('_') and not segment.startswith('__')


def library_private_names(package: pathlib.Path = PACKAGE) -> Set[str]:
    """Every private name the package defines: attributes, methods, classes, functions, module names."""
    names: Set[str] = set()
    for path in package.rglob('*.py'):
        names.add(path.stem)
        for node in ast.walk(ast.parse(path.read_text(encoding='utf-8'))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                names.add(node.attr)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                names.add(node.target.id)
    return {name for name in names if _is_private(name)}


def _private_module(module: str) -> bool:
    parts = module.split('.')
    return parts[0] == PACKAGE_NAME and any(_is_private(part) for part in parts[1:])


def _root(node: ast.expr) -> str:
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
        node = node.value if not isinstance(node, ast.Call) else node.func
    return node.id if isinstance(node, ast.Name) else ''


def own_private_names(tree: ast.AST) -> Set[str]:
    """The private members the file's own classes define (methods, ``self._x`` assignments,
    class-level names, ``object.__setattr__(self, '_x', ...)``)."""
    names: Set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            for member in node.body:
                if isinstance(member, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    names.add(member.name)
                elif isinstance(member, ast.AnnAssign) and isinstance(member.target, ast.Name):
                    names.add(member.target.id)
                elif isinstance(member, ast.Assign):
                    names.update(target.id for target in member.targets if isinstance(target, ast.Name))
        elif (isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store)
              and isinstance(node.value, ast.Name) and node.value.id == 'self'):
            names.add(node.attr)
        elif (isinstance(node, ast.Call) and ast.unparse(node.func) == 'object.__setattr__' and len(node.args) >= 2
              and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str)):
            names.add(node.args[1].value)
    return {name for name in names if _is_private(name)}


def scan_source(source: str, file_name: str, private_names: Set[str]) -> List[Access]:
    """The private accesses of one test file (see the module docstring for what counts).

    A private name that one of the file's own classes defines, read on a plain variable
    (``proxy._mode`` in the file that defines the proxy), is that helper's own business and
    does not count; read through an attribute of ``self`` (``self._client._clock``) it does.
    """
    found: List[Access] = []
    tree = ast.parse(source)
    own = own_private_names(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if _private_module(alias.name):
                    found.append(Access('import', alias.name, node.lineno, f'import {alias.name}'))
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if _private_module(node.module):
                found.append(Access('import', node.module, node.lineno, f'from {node.module} import ...'))
            elif node.module.split('.')[0] == PACKAGE_NAME:
                for alias in node.names:
                    if _is_private(alias.name):
                        module = f'{node.module}.{alias.name}'
                        found.append(Access('import', module, node.lineno, f'from {node.module} import {alias.name}'))
        elif isinstance(node, ast.Attribute) and _is_private(node.attr) and node.attr in private_names:
            receiver = ast.unparse(node.value)
            if receiver in ('self', 'cls') or (node.attr in own and isinstance(node.value, ast.Name)):
                continue
            if _root(node.value) in FOREIGN_ROOTS:
                continue
            found.append(Access('attr', node.attr, node.lineno, f'{receiver}.{node.attr}'))
        elif isinstance(node, ast.Call) and len(node.args) >= 2:
            function = ast.unparse(node.func)
            name = node.args[1]
            if (function in ('getattr', 'setattr', 'hasattr', 'monkeypatch.setattr', 'monkeypatch.delattr')
                    and isinstance(name, ast.Constant) and isinstance(name.value, str)
                    and _is_private(name.value) and name.value in private_names):
                found.append(Access('attr', name.value, node.lineno, f'{function}({ast.unparse(node.args[0])}, ...)'))
    return sorted(found, key=lambda access: access.line)


def scan_suite(tests: pathlib.Path = TESTS) -> Dict[str, List[Access]]:
    """The private accesses of every Python file under ``tests/``, by path relative to it."""
    private_names = library_private_names()
    result: Dict[str, List[Access]] = {}
    for path in sorted(tests.rglob('*.py')):
        relative = path.relative_to(tests).as_posix()
        accesses = scan_source(path.read_text(encoding='utf-8'), relative, private_names)
        if accesses:
            result[relative] = accesses
    return result


def counts(accesses: List[Access]) -> Dict[Tuple[str, str], int]:
    return dict(collections.Counter((access.kind, access.name) for access in accesses))


# Why each remaining private access is there.
WHY_CORE = 'unit test of the pure protocol core and its request/answer layer, by design: no client to go through'
WHY_WIRE = ('unit test of the asyncio typing layer (_wire.typed_json) against boto3\'s resource layer, for every '
            'request the lock sends: no client to go through')
WHY_GRACE = ('a cancelled caller must answer whatever the grace a Ctrl-C leaves the undo: made an hour long, a '
             'caller still held by it fails the test at once, whatever the load (an ordering, not a timing)')
WHY_COMPAT = 'the published 0.9.1 client has this attribute: the drop-in compatibility test checks it'
WHY_COMPAT_USE = 'the published 0.9.1 client has this attribute (kept for drop-in compatibility)'
WHY_STORE = "replaces the asyncio client's request store to prove that bad input makes no call at all"
WHY_SHUTDOWN = ('sets what close() sets first, to meet a heartbeat round in the middle of a close: no public call '
                'stops a client half-way')
WHY_FACADE = 'the asyncio facade mirrors the threaded client for the shared tests, private members included'
WHY_STATE = 'the renewal bookkeeping (unconfirmed versions) and a bug injected into it: no public view by design'
WHY_EXTEND = ('extending through a client that does not own the lock: no public path leads there (lock.extend() '
              'uses its own client)')
WHY_SETTINGS = "the threaded client's published private attribute (_lease_duration_s), kept for code that reads it"
WHY_DEFAULT = 'a published class attribute (REFERENCE_API: _DEFAULT_LEASE_DURATION)'
WHY_CLI = ('the CLI in process (_cli.run with given streams, its parser, limits and exit codes); the public seam'
           ' is the python -m process, too slow for this many cases')
WHY_EMBEDDED = 'tests the engine launcher module (_embedded) itself'
WHY_DEMO = 'tests the demo module (_demo) itself'
WHY_ENGINES = ("the suite's engine fixtures find and start DynamoDB Local and the moto server, and name their "
               'install hints')
WHY_INSTALL = 'the DynamoDB Local version the package pins (the installer script reads it)'
WHY_AIO_CREDS = 'aiobotocore clients made by hand need the dummy credentials of the local engines'
WHY_AIO_SESSION = 'one shared aiobotocore session, as the testing package makes its clients'
WHY_RAWFAULTS = ('raw botocore hook plumbing of the testing package, for faults FaultInjector does not offer (delayed '
                 'raw bodies)')
WHY_TESTING_SELF = "tests the testing package's internals (its fault latency, the install hint it raises)"
WHY_OBSERVER = 'unit test of the event observer (rate limits, message rendering) and of the events it takes'
WHY_VALIDATION = 'the input limits (MAX_DURATION...) and their checks, tested at their bounds'
WHY_IDENT = 'unit test of unique_identifier_of for number keys'
WHY_METRICS_PATCH = 'counts LockEvent instances by patching the class the observer makes'
WHY_RECIPES = ("the recipes' threads (recipes.py and this file are being rewritten on public seams by the recipes "
               'helper)')
WHY_RECIPES_IMPORT = ('owned by the recipes helper for now: default_client_config and dummy_boto3_session are '
                      'public in python_dynamodb_lock.testing')
WHY_SIMULATION = ('unit and differential tests of the simulated table (testing._simulation, private until the '
                  'simulation driver is public), fed with the requests the library builds and judged as it judges')
WHY_SIMULATION_BITES = ('the proof that the simulation driver bites reintroduces a defect into the core (a takeover '
                        'of a live holder, a write without its condition); no public switch breaks the protocol, '
                        'by design')
WHY_SIMULATION_CHECKER = ("the simulation's invariants shown to bite on synthetic histories: the core's events and "
                          "a lock's state are what the checker reads")
WHY_CORE_ANSWERS = 'unit test of the batch answer judge (judge_batch) of the core'
WHY_MATRIX_BITES = ('the proof that the combination matrix bites takes one feature out of the orchestration; no '
                    'public switch turns a feature off, by design')
WHY_STORE_STEPS = ('the protocol steps sent, one by one, to moto in-process through the transport the clients use '
                   '(unit tests of the core against an engine, without a client)')
WHY_LOCKOBJ = "the published 0.9.1 client's item conversion methods, which applications call"

#: The allow-list: file -> {(kind, name): (count, why no public seam serves)}.
WHY_SEND = ('the demo builds its clients inside; counting every request they send needs botocore\'s and '
            'aiobotocore\'s Endpoint._send (a before-send hook would need each client, which the test never sees)')
ALLOWED: Dict[str, Dict[Tuple[str, str], Tuple[int, str]]] = {
    '_recipes_worker.py': {
        ('import', 'python_dynamodb_lock._embedded'): (1, WHY_RECIPES_IMPORT),
    },
    '_torture/faults.py': {
        ('import', 'python_dynamodb_lock.testing._hooks'): (1, WHY_RAWFAULTS),
    },
    '_torture/worker.py': {
        ('import', 'python_dynamodb_lock._embedded'): (1, WHY_AIO_CREDS),
    },
    'aio_facade.py': {
        ('attr', '_shutdown'): (1, WHY_FACADE),
        ('import', 'python_dynamodb_lock._embedded'): (1, WHY_AIO_CREDS),
        ('import', 'python_dynamodb_lock.testing._engines'): (1, WHY_AIO_SESSION),
    },
    'conftest.py': {
        ('import', 'python_dynamodb_lock._embedded'): (1, WHY_ENGINES),
    },
    'helpers.py': {
        ('attr', '_dynamodb_resource'): (1, WHY_COMPAT_USE),
    },
    'install_dynamodb_local.py': {
        ('import', 'python_dynamodb_lock._embedded'): (2, WHY_INSTALL),
    },
    'test_bounds.py': {
        ('import', 'python_dynamodb_lock._model.validation'): (1, WHY_VALIDATION),
    },
    'test_cli.py': {
        ('import', 'python_dynamodb_lock._cli'): (1, WHY_CLI),
        ('import', 'python_dynamodb_lock._cli.checks'): (1, WHY_CLI),
        ('import', 'python_dynamodb_lock._cli.render'): (1, WHY_CLI),
    },
    'test_cli_robustness.py': {
        ('import', 'python_dynamodb_lock._cli'): (1, WHY_CLI),
        ('import', 'python_dynamodb_lock._model.validation'): (1, WHY_CLI),
    },
    'test_cli_run.py': {
        ('import', 'python_dynamodb_lock._cli.supervisor'): (1, WHY_CLI),
    },
    'test_cancel_promptly.py': {
        ('attr', '_driver'): (1, WHY_GRACE),
    },
    'test_close.py': {
        ('attr', '_app_callback_executor'): (1, WHY_COMPAT),
    },
    'test_compat.py': {
        ('attr', '_app_callback_executor'): (1, WHY_COMPAT),
        ('attr', '_owner_name'): (5, WHY_COMPAT),
        ('attr', '_partition_key_name'): (1, WHY_COMPAT),
        ('attr', '_sort_key_name'): (1, WHY_COMPAT),
        ('attr', '_table_name'): (1, WHY_COMPAT),
        ('attr', '_ttl_attribute_name'): (1, WHY_COMPAT),
    },
    'test_wire.py': {
        ('import', 'python_dynamodb_lock._core.answers'): (1, WHY_WIRE),
        ('import', 'python_dynamodb_lock._wire.lock_writes'): (1, WHY_WIRE),
        ('import', 'python_dynamodb_lock._wire.renewals'): (1, WHY_WIRE),
        ('import', 'python_dynamodb_lock._wire.requests'): (1, WHY_WIRE),
        ('import', 'python_dynamodb_lock._model.schema'): (1, WHY_WIRE),
        ('import', 'python_dynamodb_lock._wire.typed_json'): (1, WHY_WIRE),
    },
    'test_core_existing_item.py': {
        ('import', 'python_dynamodb_lock._core.write'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._core.acquire'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._core.answers'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._core.release'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._core.state'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._wire.lock_writes'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._wire.renewals'): (1, WHY_CORE),
    },
    'test_core_protocol.py': {
        ('import', 'python_dynamodb_lock._core.write'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._core.acquire'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._core.answers'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._core.effects'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._core.events'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._core.guard'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._core.heartbeat'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._core.release'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._core.state'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._model.errors'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._wire.renewals'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._model.schema'): (1, WHY_CORE),
    },
    'test_core_multi.py': {
        ('import', 'python_dynamodb_lock._core.write'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._core.acquire'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._core.answers'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._core.events'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._core.guard'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._core.multi'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._core.effects'): (1, WHY_CORE),
    },
    'test_core_session_refresh.py': {
        ('import', 'python_dynamodb_lock._core.answers'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._core.effects'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._core.heartbeat'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._core.session'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._core.state'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._model.schema'): (1, WHY_CORE),
    },
    '_matrix/cells.py': {
        ('attr', '_dynamodb_resource'): (2, WHY_COMPAT_USE),
    },
    '_matrix/interrupts.py': {
        ('attr', '_dynamodb_resource'): (2, WHY_COMPAT_USE),
    },
    '_matrix/entries.py': {
        ('attr', '_clock'): (1, WHY_FACADE),
    },
    'test_matrix.py': {
        ('import', 'python_dynamodb_lock._client.call'): (1, WHY_MATRIX_BITES),
        ('import', 'python_dynamodb_lock._client.sessions'): (1, WHY_MATRIX_BITES),
    },
    'test_release_checks.py': {
        ('import', 'python_dynamodb_lock._core.messages'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._model.schema'): (1, WHY_CORE),
    },
    'test_newcomer_fixes.py': {
        ('import', 'python_dynamodb_lock._cli.render'): (1, WHY_CLI),
        ('import', 'python_dynamodb_lock._core'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._core.shared'): (1, WHY_CORE),
    },
    'test_sim_table.py': {
        ('import', 'python_dynamodb_lock._core.answers'): (1, WHY_SIMULATION),
        ('import', 'python_dynamodb_lock._wire.lock_writes'): (1, WHY_SIMULATION),
        ('import', 'python_dynamodb_lock._wire.renewals'): (1, WHY_SIMULATION),
        ('import', 'python_dynamodb_lock._wire.requests'): (1, WHY_SIMULATION),
        ('import', 'python_dynamodb_lock._model.schema'): (1, WHY_SIMULATION),
        ('import', 'python_dynamodb_lock._wire.shared_requests'): (1, WHY_SIMULATION),
        ('import', 'python_dynamodb_lock._wire.typed_json'): (1, WHY_SIMULATION),
        ('import', 'python_dynamodb_lock.testing._simulation'): (1, WHY_SIMULATION),
        ('import', 'python_dynamodb_lock.testing._simulation.expressions'): (1, WHY_SIMULATION),
    },
    'test_simulation.py': {
        ('import', 'python_dynamodb_lock._core.acquire'): (1, WHY_SIMULATION_BITES),
        ('import', 'python_dynamodb_lock._core.write'): (1, WHY_SIMULATION_BITES),
        ('import', 'python_dynamodb_lock._core.events'): (1, WHY_SIMULATION_CHECKER),
        ('import', 'python_dynamodb_lock._core.state'): (1, WHY_SIMULATION_CHECKER),
        ('import', 'python_dynamodb_lock.testing._simulation'): (1, WHY_SIMULATION),
        ('import', 'python_dynamodb_lock.testing._simulation.shrink'): (1, WHY_SIMULATION),
    },
    'test_simulation_published.py': {
        ('attr', '_abandoned'): (1, WHY_SIMULATION_BITES),
        ('import', 'python_dynamodb_lock.testing._simulation'): (1, WHY_SIMULATION),
    },
    'test_simulation_traces.py': {
        ('import', 'python_dynamodb_lock.testing._simulation.errors'): (1, WHY_SIMULATION),
        ('import', 'python_dynamodb_lock.testing._simulation.expressions'): (1, WHY_SIMULATION),
        ('import', 'python_dynamodb_lock.testing._simulation.templates'): (1, WHY_SIMULATION),
        ('import', 'python_dynamodb_lock.testing._simulation.updates'): (1, WHY_SIMULATION),
    },
    'test_sim_table_differential.py': {
        ('import', 'python_dynamodb_lock.testing._simulation'): (1, WHY_SIMULATION),
    },
    'test_simulation_asyncio.py': {
        ('attr', '_free_and_watch'): (1, WHY_SIMULATION_BITES),
        ('attr', '_free_own_row'): (1, WHY_SIMULATION_BITES),
        ('import', 'python_dynamodb_lock._client.acquiring'): (1, WHY_SIMULATION_BITES),
        ('import', 'python_dynamodb_lock._client.releasing'): (1, WHY_SIMULATION_BITES),
        ('import', 'python_dynamodb_lock._core.effects'): (1, WHY_SIMULATION_BITES),
        ('import', 'python_dynamodb_lock._core.write'): (1, WHY_SIMULATION_BITES),
        ('import', 'python_dynamodb_lock._model.errors'): (1, WHY_SIMULATION_BITES),
        ('import', 'python_dynamodb_lock.testing._simulation'): (1, WHY_SIMULATION),
        ('import', 'python_dynamodb_lock.testing._simulation.tasks_protocol'): (1, WHY_SIMULATION_BITES),
    },
    'test_core_interrupted_checks.py': {
        ('import', 'python_dynamodb_lock._core.acquire'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._core.events'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._core.release'): (1, WHY_CORE),
    },
    'test_simulation_bites.py': {
        ('import', 'python_dynamodb_lock._client.several_keys'): (1, WHY_SIMULATION_BITES),
        ('import', 'python_dynamodb_lock._core.effects'): (1, WHY_SIMULATION_BITES),
        ('import', 'python_dynamodb_lock._core.events'): (1, WHY_SIMULATION_BITES),
        ('import', 'python_dynamodb_lock._core.guard'): (1, WHY_SIMULATION_BITES),
        ('import', 'python_dynamodb_lock._core.heartbeat'): (1, WHY_SIMULATION_BITES),
        ('import', 'python_dynamodb_lock._core.release'): (2, WHY_SIMULATION_BITES),
        ('import', 'python_dynamodb_lock._core.shared_ops'): (1, WHY_SIMULATION_BITES),
        ('import', 'python_dynamodb_lock._core.state'): (1, WHY_SIMULATION_BITES),
        ('import', 'python_dynamodb_lock._wire.requests'): (1, WHY_SIMULATION_BITES),
        ('import', 'python_dynamodb_lock.testing._simulation'): (1, WHY_SIMULATION),
    },
    'test_simulation_workload.py': {
        ('import', 'python_dynamodb_lock._core.state'): (1, WHY_SIMULATION_CHECKER),
        ('import', 'python_dynamodb_lock.testing._simulation'): (1, WHY_SIMULATION),
        ('import', 'python_dynamodb_lock.testing._simulation.interruptions'): (1, WHY_SIMULATION_CHECKER),
        ('import', 'python_dynamodb_lock.testing._simulation.run'): (1, WHY_SIMULATION_CHECKER),
        ('import', 'python_dynamodb_lock.testing._simulation.settling'): (1, WHY_SIMULATION_CHECKER),
    },
    'test_core_answers_and_sizes.py': {
        ('import', 'python_dynamodb_lock._core.answers'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._core'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._core.guard'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._model.schema'): (1, WHY_CORE),
    },
    'test_core_guard_steps.py': {
        ('attr', '_state'): (2, WHY_STATE),
        ('import', 'python_dynamodb_lock._core.acquire'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._core.answers'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._core.events'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._core.guard'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._core.state'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._core.write'): (1, WHY_CORE),
    },
    'test_core_renew_batch.py': {
        ('attr', '_state'): (20, WHY_STATE),
        ('import', 'python_dynamodb_lock._core.answers'): (3, WHY_CORE),
        ('import', 'python_dynamodb_lock._core.events'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._core.heartbeat'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._core.state'): (1, WHY_CORE),
    },
    'test_core_session_steps.py': {
        ('attr', '_state'): (4, WHY_STATE),
        ('import', 'python_dynamodb_lock._core.acquire'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._core.answers'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._core.events'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._core.session'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._core.state'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._core.write'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._wire.sessions'): (1, WHY_CORE),
    },
    'test_core_sets_steps.py': {
        ('attr', '_state'): (1, WHY_STATE),
        ('import', 'python_dynamodb_lock._core.acquire'): (2, WHY_CORE),
        ('import', 'python_dynamodb_lock._core.answers'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._core.events'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._core.first'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._core.guard'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._core.multi'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._core.state'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._core.write'): (1, WHY_CORE),
    },
    'test_core_shared_steps.py': {
        ('import', 'python_dynamodb_lock._core.acquire'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._core.answers'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._core.effects'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._core.events'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._core.shared_ops'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._core.write'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._wire.renewals'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._wire.requests'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._model.schema'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._wire.shared_requests'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._drivers.thread_transport'): (1, WHY_STORE_STEPS),
    },
    'test_core_a_heartbeat_rounds.py': {
        ('attr', '_state'): (5, WHY_STATE),
        ('import', 'python_dynamodb_lock._core.answers'): (4, WHY_CORE),
        ('import', 'python_dynamodb_lock._core.effects'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._core.events'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._core.heartbeat'): (5, WHY_CORE),
        ('import', 'python_dynamodb_lock._core.state'): (1, WHY_CORE),
    },
    'test_core_a_release_handover.py': {
        ('attr', '_state'): (2, WHY_STATE),
        ('import', 'python_dynamodb_lock._core.answers'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._core.release'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._core.write'): (1, WHY_CORE),
    },
    'test_core_a_write_paths.py': {
        ('import', 'python_dynamodb_lock._core.effects'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._core.acquire'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._core.answers'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._core.events'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._core.write'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._model.errors'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._wire.requests'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._model.schema'): (1, WHY_CORE),
    },
    'test_core_heartbeat_paths.py': {
        ('attr', '_existing_item'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._core.answers'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._core.effects'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._core.events'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._core.heartbeat'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._core.state'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._model.errors'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._wire.requests'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._model.schema'): (1, WHY_CORE),
    },
    'test_core_messages_and_events.py': {
        ('import', 'python_dynamodb_lock._core.answers'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._core.effects'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._core.events'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._core.item_size'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._core.messages'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._core.release'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._core.scan'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._model.errors'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._wire.requests'): (2, WHY_CORE),
        ('import', 'python_dynamodb_lock._model.schema'): (1, WHY_CORE),
    },
    'test_core_release_paths.py': {
        ('import', 'python_dynamodb_lock._core.answers'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._core.messages'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._core.release'): (2, WHY_CORE),
        ('import', 'python_dynamodb_lock._core.shared_ops'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._core.state'): (2, WHY_CORE),
        ('import', 'python_dynamodb_lock._model.errors'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._wire.renewals'): (2, WHY_CORE),
        ('import', 'python_dynamodb_lock._wire.requests'): (1, WHY_CORE),
    },
    'test_core_b_events_and_messages.py': {
        ('import', 'python_dynamodb_lock._core.shared'): (1, WHY_CORE),
    },
    'test_core_b_guard_and_session.py': {
        ('attr', '_state'): (4, WHY_STATE),
        ('import', 'python_dynamodb_lock._core.acquire'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._core.answers'): (3, WHY_CORE),
        ('import', 'python_dynamodb_lock._core.events'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._core.guard'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._core.messages'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._core.session'): (2, WHY_CORE),
        ('import', 'python_dynamodb_lock._core.state'): (2, WHY_CORE),
        ('import', 'python_dynamodb_lock._model.schema'): (1, WHY_CORE),
    },
    'test_core_b_sets_transactions.py': {
        ('import', 'python_dynamodb_lock._wire.requests'): (1, WHY_WIRE),
        ('import', 'python_dynamodb_lock._core.acquire'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._core.answers'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._core.effects'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._core.events'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._core.first'): (5, WHY_CORE),
        ('import', 'python_dynamodb_lock._core.guard'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._core.multi'): (4, WHY_CORE),
        ('import', 'python_dynamodb_lock._core.state'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._core.write'): (1, WHY_CORE),
    },
    'test_core_b_shared_paths.py': {
        ('import', 'python_dynamodb_lock._core.acquire'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._core.answers'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._core.events'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._core.shared_ops'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._core.write'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._wire.lock_writes'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._wire.renewals'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._wire.shared_requests'): (3, WHY_CORE),
    },
    'test_core_requests_shapes.py': {
        ('import', 'python_dynamodb_lock._core.answers'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._wire.lock_writes'): (3, WHY_CORE),
        ('import', 'python_dynamodb_lock._wire.renewals'): (2, WHY_CORE),
        ('import', 'python_dynamodb_lock._wire.requests'): (2, WHY_CORE),
        ('import', 'python_dynamodb_lock._wire.sessions'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._model.schema'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._drivers.thread_transport'): (1, WHY_STORE_STEPS),
    },
    'test_core_write_steps.py': {
        ('import', 'python_dynamodb_lock._core.acquire'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._core.answers'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._core.effects'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._core.events'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._core.messages'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._core.write'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._wire.requests'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._model.schema'): (1, WHY_CORE),
    },
    'test_core_undo_steps.py': {
        ('import', 'python_dynamodb_lock._core.acquire'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._core.answers'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._core.events'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._core.write'): (1, WHY_CORE),
    },
    'test_core_stepper.py': {
        ('import', 'python_dynamodb_lock._core.stepper'): (1, WHY_CORE),
    },
    'test_core_shared.py': {
        ('import', 'python_dynamodb_lock._core.shared'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._model.schema'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._wire.shared_requests'): (1, WHY_CORE),
    },
    'test_core_lock_data.py': {
        ('import', 'python_dynamodb_lock._core.write'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._common.config'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._core.acquire'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._core.answers'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._core.heartbeat'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._core.release'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._core.state'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._wire.lock_writes'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._wire.renewals'): (1, WHY_CORE),
    },
    'test_core_session_overlap.py': {
        ('attr', '_state'): (4, WHY_STATE),
        ('import', 'python_dynamodb_lock._core.answers'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._core.effects'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._core.events'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._core.session'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._core.state'): (1, WHY_CORE),
    },
    'test_core_shared_tries.py': {
        ('import', 'python_dynamodb_lock._core.acquire'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._core.answers'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._core.events'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._core.multi'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._core.write'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._wire.shared_requests'): (1, WHY_CORE),
    },
    'test_core_sessions.py': {
        ('import', 'python_dynamodb_lock._core.acquire'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._core.answers'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._core.events'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._core.session'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._core.state'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._model.errors'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._wire.lock_writes'): (1, WHY_CORE),
        ('import', 'python_dynamodb_lock._model.schema'): (1, WHY_CORE),
    },
    'test_core_validation.py': {
        ('attr', '_lease_duration_s'): (1, WHY_SETTINGS),
    },
    'test_demo.py': {
        ('import', 'python_dynamodb_lock._demo'): (2, WHY_DEMO),
        ('import', 'python_dynamodb_lock._embedded'): (2, WHY_ENGINES),
    },
    'test_embedded.py': {
        ('attr', '_send'): (2, WHY_SEND),
        ('import', 'python_dynamodb_lock._demo'): (1, WHY_DEMO),
        ('import', 'python_dynamodb_lock._embedded'): (2, WHY_EMBEDDED),
    },
    'test_extend.py': {
        ('attr', '_calls'): (1, WHY_EXTEND),
    },
    'test_fencing.py': {
        ('attr', '_DEFAULT_LEASE_DURATION'): (1, WHY_DEFAULT),
    },
    'test_heartbeat_batch.py': {
        ('attr', '_shutdown'): (1, WHY_SHUTDOWN),
        ('attr', '_state'): (5, WHY_STATE),
        ('import', 'python_dynamodb_lock._core.answers'): (1, WHY_CORE_ANSWERS),
    },
    'test_lock_objects.py': {
        ('attr', '_get_item_from_lock'): (3, WHY_LOCKOBJ),
        ('attr', '_get_lock_from_item'): (2, WHY_LOCKOBJ),
    },
    'test_messages.py': {
        ('import', 'python_dynamodb_lock._common.config'): (1, WHY_OBSERVER),
        ('import', 'python_dynamodb_lock._core.events'): (1, WHY_OBSERVER),
        ('import', 'python_dynamodb_lock._common.observe'): (1, WHY_OBSERVER),
    },
    'test_metrics.py': {
        ('import', 'python_dynamodb_lock._common.observe'): (1, WHY_METRICS_PATCH),
    },
    'test_properties.py': {
        ('import', 'python_dynamodb_lock._cli'): (1, WHY_CLI),
        ('import', 'python_dynamodb_lock._model.validation'): (1, WHY_CLI),
    },
    'test_recipes.py': {
        ('attr', '_campaign'): (2, WHY_RECIPES),
    },
    'test_table_layouts.py': {
        ('attr', '_store'): (1, WHY_STORE),
        ('import', 'python_dynamodb_lock._common.locks'): (1, WHY_IDENT),
    },
    'test_testing_package.py': {
        ('import', 'python_dynamodb_lock._embedded'): (1, WHY_TESTING_SELF),
        ('import', 'python_dynamodb_lock.testing._faults'): (1, WHY_TESTING_SELF),
    },
}


def unlisted(found: Dict[str, List[Access]]) -> Iterator[str]:
    for file_name, accesses in found.items():
        allowed = ALLOWED.get(file_name, {})
        for (kind, name), count in sorted(counts(accesses).items()):
            limit = allowed.get((kind, name), (0, ''))[0]
            if count > limit:
                lines = ', '.join(f'{access.line}: {access.text}' for access in accesses
                                  if (access.kind, access.name) == (kind, name))
                yield f'tests/{file_name}: {kind} {name} x{count} (allowed {limit}) at {lines}'


def stale(found: Dict[str, List[Access]]) -> Iterator[str]:
    """Allow-list entries above what the suite now does (a private access was replaced): not a
    failure, so that removing one never breaks a merge, but the inventory lists them to delete."""
    for file_name, allowed in ALLOWED.items():
        now = counts(found.get(file_name, []))
        for (kind, name), (count, _) in sorted(allowed.items()):
            if now.get((kind, name), 0) < count:
                yield f'tests/{file_name}: {kind} {name} allowed {count}, now {now.get((kind, name), 0)}'


def test_no_unlisted_private_access() -> None:
    """Every private access of the suite is in ALLOWED, no more often than listed."""
    problems = list(unlisted(scan_suite()))
    assert not problems, ('private access without a listed reason (use a public seam, or add it to ALLOWED in '
                          'tests/test_private_access.py with why none serves):\n' + '\n'.join(problems))


def test_allowed_entries_have_reasons() -> None:
    """Each allow-list entry says why it is needed."""
    missing = [f'{file_name}: {key}' for file_name, entries in ALLOWED.items()
               for key, (count, reason) in entries.items() if count < 1 or len(reason.strip()) < 10]
    assert not missing, missing


def test_scan_finds_what_it_should() -> None:
    """The scan itself: private imports and library private attributes count, the rest does not."""
    source = '\n'.join([
        'import python_dynamodb_lock._embedded as embedded',
        'from python_dynamodb_lock import _cli, DynamoDBLockClient',
        'from python_dynamodb_lock.testing._faults import canned_response',
        'from python_dynamodb_lock.testing import ManualClock',
        'from python_dynamodb_lock.__main__ import main',
        'client._owner_name',
        'self._owner_name',
        'client.__class__',
        'os._exit(0)',
        'helper._not_a_library_name_xyz',
        "getattr(client, '_owner_name')",
        'lock._state = None',
    ])
    found = scan_source(source, 'example.py', {'_owner_name', '_state', '_exit'})
    assert [(access.kind, access.name) for access in found] == [
        ('import', 'python_dynamodb_lock._embedded'),
        ('import', 'python_dynamodb_lock._cli'),
        ('import', 'python_dynamodb_lock.testing._faults'),
        ('attr', '_owner_name'),
        ('attr', '_owner_name'),
        ('attr', '_state'),
    ]


def inventory(found: Dict[str, List[Access]]) -> str:
    lines = []
    total_imports = sum(1 for accesses in found.values() for access in accesses if access.kind == 'import')
    total_attrs = sum(1 for accesses in found.values() for access in accesses if access.kind == 'attr')
    import_files = sum(1 for accesses in found.values() if any(access.kind == 'import' for access in accesses))
    attr_files = sum(1 for accesses in found.values() if any(access.kind == 'attr' for access in accesses))
    lines.append(f'private attribute accesses: {total_attrs} in {attr_files} files; '
                 f'private module imports: {total_imports} in {import_files} files')
    for file_name, accesses in found.items():
        lines.append(f'tests/{file_name}: {len(accesses)}')
        for (kind, name), count in sorted(counts(accesses).items()):
            where = ', '.join(str(access.line) for access in accesses if (access.kind, access.name) == (kind, name))
            lines.append(f'    {kind:6} {name} x{count} (lines {where})')
    return '\n'.join(lines)


if __name__ == '__main__':
    suite = scan_suite()
    sys.stdout.write(inventory(suite) + '\n')
    for line in stale(suite):
        sys.stdout.write(f'stale allow-list entry: {line}\n')
