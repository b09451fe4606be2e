"""DynamoDB engines for the test suite.

Fixtures:

* ``dynamodb_local`` (session): one Amazon DynamoDB Local, found with
  :func:`python_dynamodb_lock._embedded.find_dynamodb_local` (never installed from here), shared
  by the whole run and stopped at its end.
* ``engine``: an :class:`EngineTable` with a fresh lock table, once on moto in-process
  (``mock_aws``, id ``moto``) and once on DynamoDB Local (id ``local``, marked ``local``).
* ``local_engine``: the same on DynamoDB Local only, for tests that need atomic conditional
  writes (moto in-process is not atomic under threads). Tests using it are marked ``local``.

A missing engine skips the tests that need it, except when ``CI`` is set (``CI=true``): there
it fails them, so a broken CI set-up cannot pass by skipping.

Environment: ``DYNAMODB_LOCAL_DIR`` (where DynamoDB Local is), ``JAVA_HOME``, ``CI``.
Select with markers, for example ``-m 'not local'`` to run without Java.
"""
from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import pathlib
import re
import uuid
from typing import Any, Iterator, NoReturn, Optional

import pytest
from botocore.exceptions import ClientError

from python_dynamodb_lock._embedded import (
    DYNAMODB_LOCAL_INSTALL_HINT,
    EmbeddedEngine,
    EngineNotInstalledError,
    default_client_config,
    dummy_boto3_session,
    find_dynamodb_local,
    start_dynamodb_local,
)
from python_dynamodb_lock.python_dynamodb_lock import DynamoDBLockClient

logger = logging.getLogger(__name__)

MOTO = 'moto'
DYNAMODB_LOCAL = 'dynamodb_local'


@dataclasses.dataclass(frozen=True)
class EngineTable:
    """One engine with a lock table made for the current test.

    Attributes:
        name: ``'moto'`` (in-process ``mock_aws``) or ``'local'`` (DynamoDB Local).
        resource: a boto3 DynamoDB service resource, for ``DynamoDBLockClient``.
        client: a separate low-level boto3 client, for direct reads and writes.
        table_name: the table, unique to the test, created by
            ``DynamoDBLockClient.create_dynamodb_table`` with the default key names and TTL on.
        endpoint_url: DynamoDB Local's URL; None for moto in-process.
        is_atomic: whether concurrent conditional writes exclude each other (False for moto
            in-process: never base a mutual-exclusion claim on it).
    """

    name: str
    resource: Any
    client: Any
    table_name: str
    endpoint_url: Optional[str]
    is_atomic: bool


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line('markers', 'local: needs Amazon DynamoDB Local (Java 17+); '
                                       "deselect with -m 'not local'")
    config.addinivalue_line('markers', 'slow: takes seconds rather than milliseconds; '
                                       "deselect with -m 'not slow'")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test that uses DynamoDB Local directly as ``local``."""
    for item in items:
        if {'local_engine', 'dynamodb_local'} & set(getattr(item, 'fixturenames', ())):
            item.add_marker(pytest.mark.local)


def pytest_report_header(config: pytest.Config) -> str:
    lib_dir = find_dynamodb_local()
    where = str(lib_dir) if lib_dir is not None else 'not found (tests marked local will skip)'
    return f'DynamoDB Local: {where}; CI={os.environ.get("CI", "")!r}'


# --- missing engines: skip locally, fail on CI ----------------------------------------------

def running_on_ci() -> bool:
    """True when ``$CI`` is ``true``/``1``/``yes`` (any case), as CI services set it."""
    return os.environ.get('CI', '').strip().lower() in ('true', '1', 'yes')


def skip_or_fail(reason: str) -> NoReturn:
    """Skip the current test because an engine is missing; on CI, fail it instead."""
    if running_on_ci():
        pytest.fail(f'{reason}\n(CI is set, so a missing engine is a failure, not a skip.)',
                    pytrace=False)
    pytest.skip(reason)


def require_dynamodb_local() -> pathlib.Path:
    """DynamoDB Local's lib folder, or :func:`skip_or_fail` saying how to install it."""
    lib_dir = find_dynamodb_local()
    if lib_dir is None:
        skip_or_fail(f'DynamoDB Local is not installed. {DYNAMODB_LOCAL_INSTALL_HINT}')
    return lib_dir


# --- tables --------------------------------------------------------------------------------

def unique_table_name(request: pytest.FixtureRequest) -> str:
    """A valid table name made of the test's name and a random suffix."""
    test_name = re.sub(r'[^A-Za-z0-9_.-]+', '-', request.node.name).strip('-')[:120]
    return f'locks-{test_name}-{uuid.uuid4().hex[:8]}'


_moto_boto3_session = None


@contextlib.contextmanager
def moto_table(table_name: str) -> Iterator[EngineTable]:
    """A lock table in moto's in-process mock (``mock_aws``), gone when the block ends."""
    global _moto_boto3_session
    try:
        from moto import mock_aws
    except ImportError:
        skip_or_fail("moto is not installed: pip install 'moto[dynamodb,server]>=5'")
    with mock_aws():
        if _moto_boto3_session is None:  # created after moto is imported, so moto can patch it
            _moto_boto3_session = dummy_boto3_session()
        client = _moto_boto3_session.client('dynamodb', config=default_client_config())
        resource = _moto_boto3_session.resource('dynamodb', config=default_client_config())
        DynamoDBLockClient.create_dynamodb_table(client, table_name=table_name)
        yield EngineTable(name='moto', resource=resource, client=client, table_name=table_name,
                          endpoint_url=None, is_atomic=False)


@contextlib.contextmanager
def dynamodb_local_table(engine: EmbeddedEngine, table_name: str) -> Iterator[EngineTable]:
    """A lock table on a running DynamoDB Local, deleted when the block ends."""
    client = engine.client()
    resource = engine.resource()
    DynamoDBLockClient.create_dynamodb_table(client, table_name=table_name)
    try:
        yield EngineTable(name='local', resource=resource, client=client, table_name=table_name,
                          endpoint_url=engine.endpoint_url, is_atomic=True)
    finally:
        try:
            client.delete_table(TableName=table_name)
        except ClientError as error:
            if error.response.get('Error', {}).get('Code') != 'ResourceNotFoundException':
                logger.warning('Could not delete table %s on DynamoDB Local: %s', table_name, error)
        client.close()
        resource.meta.client.close()


def _engine_table(request: pytest.FixtureRequest, kind: str) -> Iterator[EngineTable]:
    table_name = unique_table_name(request)
    if kind == MOTO:
        with moto_table(table_name) as table:
            yield table
    elif kind == DYNAMODB_LOCAL:
        engine: EmbeddedEngine = request.getfixturevalue('dynamodb_local')
        with dynamodb_local_table(engine, table_name) as table:
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


@pytest.fixture(params=[
    pytest.param(MOTO, id='moto'),
    pytest.param(DYNAMODB_LOCAL, id='local', marks=pytest.mark.local),
])
def engine(request: pytest.FixtureRequest) -> Iterator[EngineTable]:
    """A fresh lock table, on moto in-process and on DynamoDB Local (one test run each)."""
    yield from _engine_table(request, request.param)


@pytest.fixture
def local_engine(request: pytest.FixtureRequest) -> Iterator[EngineTable]:
    """A fresh lock table on DynamoDB Local only: for concurrency and exclusion tests."""
    yield from _engine_table(request, DYNAMODB_LOCAL)


@pytest.fixture
def clients(engine: EngineTable) -> Iterator[Any]:
    """Makes lock clients on the test's table (sharing one ManualClock) and closes them all."""
    from helpers import LockClients

    factory = LockClients(engine)
    yield factory
    factory.close_all()


@pytest.fixture
def local_clients(local_engine: EngineTable) -> Iterator[Any]:
    """Like ``clients``, on DynamoDB Local only."""
    from helpers import LockClients

    factory = LockClients(local_engine)
    yield factory
    factory.close_all()


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
