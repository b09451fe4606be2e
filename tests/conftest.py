"""DynamoDB engines and lock clients for the test suite.

The engines and tables come from :mod:`python_dynamodb_lock.testing`; what is added here is
how this suite runs them (one engine per session, and a missing engine fails on CI) and the
two kinds of lock client.

Fixtures:

* ``dynamodb_local`` (session): one Amazon DynamoDB Local, found with
  :func:`python_dynamodb_lock._embedded.find_dynamodb_local` (never installed from here), shared
  by the whole run and stopped at its end.
* ``moto_server`` (session): the serialised moto server (``_embedded.start_moto_server``), the
  "moto" engine of the asyncio client (moto in-process does not serve aiobotocore).
* ``client_kind``: ``'threaded'`` or ``'asyncio'``. Every test that depends on it (through
  ``clients``, ``local_clients``, a fixture of its module, or as an argument) runs once with
  each kind, unless it is marked ``threaded_only``; ``engine`` and ``local_engine`` read it
  without depending on it, and see ``'threaded'`` in the other tests.
* ``engine``: a :class:`~python_dynamodb_lock.testing.LockTable` with a fresh lock table, once
  on moto (id ``moto``) and once on DynamoDB Local (id ``local``, marked ``local``). "moto" is
  moto in-process (``mock_aws``) for the threaded kind and the serialised moto server for the
  asyncio kind; either way ``engine.client`` and ``engine.resource`` reach the same data.
* ``local_engine``: the same on DynamoDB Local only, for tests that need atomic conditional
  writes (moto in-process is not atomic under threads). Tests using it are marked ``local``.
* ``clients`` / ``local_clients``: a :class:`helpers.LockClients` of the test's kind on that table.

A missing engine skips the tests that need it, except when ``CI`` is set (``CI=true``) or
``PDL_REQUIRE_ENGINES`` is (tox's full-suite envs set it): there it fails them, so a broken
set-up cannot pass by skipping.

Parallel runs (pytest-xdist, ``-n auto``, as tox runs the full suite; one worker per core, see
``pytest_xdist_auto_num_workers``): every worker is its own
process, so the session fixtures above start one DynamoDB Local and one moto server per worker,
each on a free port, and every table has a unique name; nothing is shared between workers. The
workers take the tests marked ``slow`` first, so that a long test does not start last and keep
one worker busy while the others are idle.

Environment: ``DYNAMODB_LOCAL_DIR`` (where DynamoDB Local is), ``JAVA_HOME``, ``CI``,
``PDL_REQUIRE_ENGINES``; the stress tests' sizes are in ``tests/_torture/runner.py``.
Select with markers, for example ``-m 'not local'`` to run without Java, or with ``-k``:
``-k asyncio`` runs the asyncio half of the behavioural tests.
"""
from __future__ import annotations

import contextlib
import os
import pathlib
from typing import Any, Iterator, NoReturn, Optional

import pytest

from python_dynamodb_lock._embedded import (
    DYNAMODB_LOCAL_INSTALL_HINT,
    MOTO_INSTALL_HINT,
    EmbeddedEngine,
    EngineNotInstalledError,
    find_dynamodb_local,
    start_dynamodb_local,
    start_moto_server,
)
from python_dynamodb_lock.testing import LockTable, lock_table, moto_lock_table, unique_table_name

pytest_plugins = ('pytester',)

MOTO = 'moto'
DYNAMODB_LOCAL = 'dynamodb_local'
THREADED = 'threaded'
ASYNCIO = 'asyncio'

def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line('markers', 'local: needs Amazon DynamoDB Local (Java 17+); '
                                       "deselect with -m 'not local'")
    config.addinivalue_line('markers', 'slow: takes seconds rather than milliseconds; '
                                       "deselect with -m 'not slow'")
    config.addinivalue_line('markers', 'threaded_only: about the threaded client itself (its threads, its '
                                       'thread_lock, its constructor); runs once, not once per client kind')


#: Workers per core for ``-n auto``. Two per core finish the suite sooner (most tests wait), but
#: with tox running its envs side by side that puts eight test processes and four DynamoDB
#: Locals on two cores, and the tests with sub-second timeouts (the chaos proxy's probes) then
#: fail now and then: one per core.
WORKERS_PER_CORE = 1


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto``: ``WORKERS_PER_CORE`` workers per core; ``PDL_TEST_WORKERS`` in tox.ini sets
    an exact number instead."""
    return WORKERS_PER_CORE * (os.cpu_count() or 1)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Run every test that depends on ``client_kind`` (through ``clients``, ``local_clients``, a
    fixture of its module, or as an argument) once per kind of client, unless it is marked
    ``threaded_only``."""
    if 'client_kind' not in metafunc.fixturenames:
        return
    if metafunc.definition.get_closest_marker('threaded_only') is not None:
        return
    metafunc.parametrize('client_kind', [THREADED, ASYNCIO], ids=[THREADED, ASYNCIO])


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test that uses DynamoDB Local directly as ``local``; in an xdist worker, put
    the tests marked ``slow`` first (every worker collects, and so sorts, the same way)."""
    for item in items:
        if {'local_engine', 'dynamodb_local'} & set(getattr(item, 'fixturenames', ())):
            item.add_marker(pytest.mark.local)
    if os.environ.get('PYTEST_XDIST_WORKER'):
        items.sort(key=lambda item: item.get_closest_marker('slow') is None)   # stable: False first


def pytest_report_header(config: pytest.Config) -> str:
    lib_dir = find_dynamodb_local()
    where = (str(lib_dir) if lib_dir is not None
             else 'not found (tests marked local will skip, or fail with CI or PDL_REQUIRE_ENGINES set)')
    return (f'DynamoDB Local: {where}; CI={os.environ.get("CI", "")!r}; '
            f'PDL_REQUIRE_ENGINES={os.environ.get("PDL_REQUIRE_ENGINES", "")!r}')


# --- missing engines: skip locally, fail on CI and in tox's full suite ----------------------

def running_on_ci() -> bool:
    """True when ``$CI`` is ``true``/``1``/``yes`` (any case), as CI services set it."""
    return _set('CI')


def _set(name: str) -> bool:
    return os.environ.get(name, '').strip().lower() in ('true', '1', 'yes')


def engines_required_by() -> Optional[str]:
    """``'CI'`` on CI, else ``'PDL_REQUIRE_ENGINES'`` when that is ``true``/``1``/``yes`` (tox's
    full-suite envs), else None: then a missing engine skips."""
    if running_on_ci():
        return 'CI'
    return 'PDL_REQUIRE_ENGINES' if _set('PDL_REQUIRE_ENGINES') else None


def skip_or_fail(reason: str) -> NoReturn:
    """Skip the current test because an engine is missing; on CI, or with
    ``PDL_REQUIRE_ENGINES`` set (tox's full-suite envs), fail it instead."""
    required_by = engines_required_by()
    if required_by is not None:
        pytest.fail(f'{reason}\n({required_by} is set, so a missing engine is a failure, not a skip.)',
                    pytrace=False)
    pytest.skip(reason)


def require_dynamodb_local() -> pathlib.Path:
    """DynamoDB Local's lib folder, or :func:`skip_or_fail` saying how to install it."""
    lib_dir = find_dynamodb_local()
    if lib_dir is None:
        skip_or_fail(f'DynamoDB Local is not installed. {DYNAMODB_LOCAL_INSTALL_HINT}')
    return lib_dir


# --- tables --------------------------------------------------------------------------------

def table_name_for(request: pytest.FixtureRequest) -> str:
    """A valid table name made of the test's name and a random suffix."""
    return unique_table_name(request.node.name)


@contextlib.contextmanager
def moto_table(table_name: str) -> Iterator[LockTable]:
    """A lock table in moto's in-process mock (``mock_aws``), gone when the block ends."""
    try:
        import moto  # noqa: F401
    except ImportError:
        skip_or_fail(f'moto is not installed. {MOTO_INSTALL_HINT}')
    with moto_lock_table(table_name) as table:
        yield table


@contextlib.contextmanager
def dynamodb_local_table(engine: EmbeddedEngine, table_name: str) -> Iterator[LockTable]:
    """A lock table on a running engine (DynamoDB Local or the moto server), deleted when the block ends."""
    with lock_table(engine, table_name) as table:
        yield table


def _engine_table(request: pytest.FixtureRequest, kind: str, client_kind: str) -> Iterator[LockTable]:
    table_name = table_name_for(request)
    if kind == MOTO and client_kind == ASYNCIO:
        server: EmbeddedEngine = request.getfixturevalue('moto_server')
        with lock_table(server, table_name) as table:
            yield table
    elif kind == MOTO:
        with moto_table(table_name) as table:
            yield table
    elif kind == DYNAMODB_LOCAL:
        engine: EmbeddedEngine = request.getfixturevalue('dynamodb_local')
        with lock_table(engine, table_name) as table:
            yield table
    else:
        raise ValueError(f'unknown engine kind {kind!r}')


# --- fixtures ------------------------------------------------------------------------------

@pytest.fixture(scope='session')
def dynamodb_local() -> Iterator[EmbeddedEngine]:
    """DynamoDB Local, started once for the session on 127.0.0.1 (in memory, shared DB)."""
    lib_dir = require_dynamodb_local()
    try:
        engine = start_dynamodb_local(lib_dir)
    except EngineNotInstalledError as missing:  # Java is missing
        skip_or_fail(str(missing))
    with engine:
        yield engine


@pytest.fixture(scope='session')
def moto_server() -> Iterator[EmbeddedEngine]:
    """The serialised moto server, started once for the session on 127.0.0.1."""
    try:
        engine = start_moto_server()
    except EngineNotInstalledError as missing:
        skip_or_fail(str(missing))
    with engine:
        yield engine


@pytest.fixture
def client_kind() -> str:
    """The kind of lock client (parametrized by :func:`pytest_generate_tests`)."""
    return THREADED


@pytest.fixture(params=[
    pytest.param(MOTO, id='moto'),
    pytest.param(DYNAMODB_LOCAL, id='local', marks=pytest.mark.local),
])
def engine(request: pytest.FixtureRequest) -> Iterator[LockTable]:
    """A fresh lock table, on moto and on DynamoDB Local (one test run each); "moto" is the moto
    server when the test's client kind is asyncio."""
    yield from _engine_table(request, request.param, request.getfixturevalue('client_kind'))


@pytest.fixture
def local_engine(request: pytest.FixtureRequest) -> Iterator[LockTable]:
    """A fresh lock table on DynamoDB Local only: for concurrency and exclusion tests."""
    yield from _engine_table(request, DYNAMODB_LOCAL, request.getfixturevalue('client_kind'))


def _lock_clients(engine: LockTable, client_kind: str) -> Iterator[Any]:
    from helpers import LockClients

    if client_kind == ASYNCIO:
        try:
            import aiobotocore  # noqa: F401
        except ImportError:
            skip_or_fail("aiobotocore is not installed: pip install '.[asyncio]'")
    factory = LockClients(engine, kind=client_kind)
    try:
        yield factory
    finally:
        factory.close_all()


@pytest.fixture
def clients(engine: LockTable, client_kind: str) -> Iterator[Any]:
    """Makes lock clients of the test's kind on its table (sharing one ManualClock), and closes them."""
    yield from _lock_clients(engine, client_kind)


@pytest.fixture
def local_clients(local_engine: LockTable, client_kind: str) -> Iterator[Any]:
    """Like ``clients``, on DynamoDB Local only."""
    yield from _lock_clients(local_engine, client_kind)


@pytest.fixture
def aws_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    """Dummy credentials from the environment (inherited by subprocesses), and no AWS
    configuration of the machine."""
    for name in list(os.environ):
        if name.startswith('AWS_'):
            monkeypatch.delenv(name)
    monkeypatch.setenv('AWS_ACCESS_KEY_ID', 'testing')
    monkeypatch.setenv('AWS_SECRET_ACCESS_KEY', 'testing')
    monkeypatch.setenv('AWS_CONFIG_FILE', str(tmp_path / 'no-aws-config'))
    monkeypatch.setenv('AWS_SHARED_CREDENTIALS_FILE', str(tmp_path / 'no-aws-credentials'))
    monkeypatch.setenv('AWS_EC2_METADATA_DISABLED', 'true')
