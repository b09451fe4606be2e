"""pytest fixtures for testing code that uses python_dynamodb_lock.

pytest loads this plugin by itself (through the ``pytest11`` entry point) once the package is
installed with its ``testing`` extra (``pip install '.[testing]'`` from a checkout); without
moto and the moto server's dependencies it defines nothing. Every fixture is named
``dynamodb_lock_*``, so none clashes with yours:

``dynamodb_lock_engine`` (session)
    A local DynamoDB endpoint started once for the session (:func:`start_engine`): Amazon
    DynamoDB Local when it is installed, else the serialised moto server. The ini option
    ``dynamodb_lock_engine`` (``auto``, ``dynamodb-local`` or ``moto``), or the command-line
    option ``--dynamodb-lock-engine`` (which wins), chooses. With ``auto`` (the default), the
    tests that need it are skipped when no engine can be started; an engine asked for by name
    that cannot be started is an error of every test that needs it, with the install hint,
    never a skip.
``dynamodb_lock_table``
    A fresh lock table on that engine (a :class:`LockTable`), deleted after the test.
``dynamodb_lock_client``
    A threaded ``DynamoDBLockClient`` on that table, closed after the test.
``dynamodb_lock_async_client``
    Makes asyncio lock clients on that table: ``async with dynamodb_lock_async_client() as
    client:`` inside your event loop (any keyword goes to the client), closed when the block
    ends. (An event loop belongs to one test, so the fixture gives the maker, not a client.)
``dynamodb_lock_moto_table``
    A fresh lock table in moto's in-process mock, for fast tests of logic (not of mutual
    exclusion between threads, and not for the asyncio client).
``dynamodb_lock_clock``
    A fresh :class:`ManualClock`.
"""
from __future__ import annotations

import importlib.util
from typing import Any, Callable, Iterator, List

import pytest

__all__: List[str] = []

#: What the ``testing`` extra installs besides pytest: without it, this plugin stays silent.
REQUIRED_MODULES = ('moto', 'flask', 'flask_cors')
#: The values of the ``dynamodb_lock_engine`` option.
ENGINE_CHOICES = ('auto', 'dynamodb-local', 'moto')


def _installed(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


ACTIVE = all(_installed(name) for name in REQUIRED_MODULES)

if ACTIVE:
    __all__ = ['dynamodb_lock_async_client', 'dynamodb_lock_client', 'dynamodb_lock_clock', 'dynamodb_lock_engine',
               'dynamodb_lock_moto_table', 'dynamodb_lock_table']

    def pytest_addoption(parser: pytest.Parser) -> None:
        help_text = ('the engine of the dynamodb_lock_engine fixture: auto (DynamoDB Local when installed, else '
                     'the moto server; tests skip when neither is), dynamodb-local or moto (tests fail when it '
                     'cannot be started)')
        parser.addini('dynamodb_lock_engine', help_text, default='auto')
        parser.getgroup('python_dynamodb_lock').addoption(
            '--dynamodb-lock-engine', dest='dynamodb_lock_engine', choices=ENGINE_CHOICES, default=None,
            help=help_text + '; overrides the ini option')

    def requested_engine(config: pytest.Config) -> str:
        """The engine the run asks for: ``--dynamodb-lock-engine``, else the ini option, else auto."""
        chosen = config.getoption('dynamodb_lock_engine', default=None) or config.getini('dynamodb_lock_engine')
        return str(chosen or 'auto').strip()

    @pytest.fixture(scope='session')
    def dynamodb_lock_engine(pytestconfig: pytest.Config) -> Iterator[Any]:
        """A local DynamoDB endpoint for the session (see the module documentation)."""
        from . import EngineNotInstalledError, start_engine

        requested = requested_engine(pytestconfig)
        try:
            engine = start_engine(requested)
        except EngineNotInstalledError as missing:
            if requested != 'auto':   # asked for by name: a skip would let the run pass untested
                pytest.fail(f'dynamodb_lock_engine = {requested} was asked for, and it cannot be started: '
                            f'{missing}', pytrace=False)
            pytest.skip(str(missing))
        with engine:
            yield engine

    @pytest.fixture
    def dynamodb_lock_table(dynamodb_lock_engine: Any, request: pytest.FixtureRequest) -> Iterator[Any]:
        """A fresh lock table on ``dynamodb_lock_engine``, deleted after the test."""
        from ._engines import lock_table, unique_table_name

        with lock_table(dynamodb_lock_engine, unique_table_name(request.node.name)) as table:
            yield table

    @pytest.fixture
    def dynamodb_lock_client(dynamodb_lock_table: Any) -> Any:
        """A threaded lock client on ``dynamodb_lock_table``, closed after the test."""
        return dynamodb_lock_table.lock_client()

    @pytest.fixture
    def dynamodb_lock_async_client(dynamodb_lock_table: Any) -> Callable[..., Any]:
        """``dynamodb_lock_table.async_lock_client``: ``async with dynamodb_lock_async_client(**kwargs)
        as client:`` gives an asyncio lock client on the table, closed at the end of the block."""
        maker: Callable[..., Any] = dynamodb_lock_table.async_lock_client
        return maker

    @pytest.fixture
    def dynamodb_lock_moto_table(request: pytest.FixtureRequest) -> Iterator[Any]:
        """A fresh lock table in moto's in-process mock (``mock_aws``)."""
        from ._engines import moto_lock_table, unique_table_name

        with moto_lock_table(unique_table_name(request.node.name)) as table:
            yield table

    @pytest.fixture
    def dynamodb_lock_clock() -> Any:
        """A fresh :class:`~python_dynamodb_lock.testing.ManualClock`."""
        from . import ManualClock

        return ManualClock()
