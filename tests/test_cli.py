"""The ``dynamodb-lock`` command line, run in-process with ``main([...])`` against DynamoDB Local.

Every command is pointed at the session's DynamoDB Local with ``--endpoint-url``; credentials
come from the environment (dummy values), as they would for a user. Lock rows are either
written directly (the row a crashed holder leaves behind) or held by a real lock client.
"""
from __future__ import annotations

import dataclasses
import io
import json
import os
import socket
import subprocess
import sys
import time
import uuid
from datetime import timedelta
from decimal import Decimal
from typing import Any, Callable, Dict, Iterator, List, Optional

import pytest

from python_dynamodb_lock import __version__
from python_dynamodb_lock.__main__ import main
from python_dynamodb_lock._cli.checks import check_endpoint_url
from python_dynamodb_lock._cli.render import format_seconds, lock_record, until_expiry_text
from python_dynamodb_lock.python_dynamodb_lock import BaseDynamoDBLock, DynamoDBLockClient

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COMMANDS = ('create-table', 'list', 'show', 'release', 'demo')


@dataclasses.dataclass
class CliResult:
    code: int
    out: str
    err: str


class FakeTerminal(io.StringIO):
    """A stdin that claims to be a terminal; ``on_read`` runs just before each answer is read."""

    def __init__(self, answer: str, on_read: Optional[Callable[[], None]] = None) -> None:
        super().__init__(answer)
        self.on_read = on_read
        self.reads = 0

    def isatty(self) -> bool:
        return True

    def readline(self, *args: Any) -> str:  # type: ignore[override]
        self.reads += 1
        if self.on_read is not None:
            self.on_read()
        return super().readline(*args)


class NotATerminal(io.StringIO):
    def isatty(self) -> bool:
        return False


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        aws_env: None) -> Callable[..., CliResult]:
    """Run ``main(argv)`` in-process; ``stdin`` (default: not a terminal) is what it reads."""

    def run(*argv: str, stdin: Optional[io.StringIO] = None) -> CliResult:
        monkeypatch.setattr(sys, 'stdin', stdin if stdin is not None else NotATerminal(''))
        capsys.readouterr()
        code = main(list(argv))
        captured = capsys.readouterr()
        return CliResult(code, captured.out, captured.err)

    return run


@pytest.fixture
def on_table(local_engine: Any, cli: Callable[..., CliResult]) -> Callable[..., CliResult]:
    """``cli`` with the connection options of the test's lock table on DynamoDB Local."""

    def run(*argv: str, stdin: Optional[io.StringIO] = None) -> CliResult:
        return cli('--endpoint-url', local_engine.endpoint_url, '--region', 'us-east-1',
                   '--table', local_engine.table_name, *argv, stdin=stdin)

    return run


@pytest.fixture
def holders(local_engine: Any) -> Iterator[Callable[..., DynamoDBLockClient]]:
    """Make lock clients on the test's table (no heartbeat within a test unless asked)."""
    made: List[DynamoDBLockClient] = []

    def make(owner_name: str = 'holder-a', heartbeat_period: float = 30.0,
             lease_duration: float = 120.0) -> DynamoDBLockClient:
        client = DynamoDBLockClient(
            local_engine.resource, table_name=local_engine.table_name, owner_name=owner_name,
            heartbeat_period=timedelta(seconds=heartbeat_period),
            safe_period=timedelta(seconds=lease_duration * 0.75),
            lease_duration=timedelta(seconds=lease_duration))
        made.append(client)
        return client

    yield make
    for client in made:
        client.close()


@pytest.fixture
def new_table_names(local_engine: Any) -> Iterator[List[str]]:
    """Names for tables a test creates itself; each is deleted afterwards."""
    names: List[str] = []
    yield names
    for name in names:
        try:
            local_engine.client.delete_table(TableName=name)
        except local_engine.client.exceptions.ResourceNotFoundException:
            pass


def new_table_name(names: List[str]) -> str:
    name = f'cli-{uuid.uuid4().hex[:12]}'
    names.append(name)
    return name


def put_dead_lock(engine: Any, key: str, sort_key: str = '-', owner: str = 'crashed-host',
                  version: Optional[str] = None, lease: str = '30', expiry_in: int = 3000,
                  **extra: Any) -> str:
    """Write the row a crashed holder leaves behind; returns its record version."""
    version = version or str(uuid.uuid4())
    engine.resource.Table(engine.table_name).put_item(Item={
        'lock_key': key, 'sort_key': sort_key, 'owner_name': owner, 'lease_duration': Decimal(lease),
        'record_version_number': version, 'expiry_time': int(time.time()) + expiry_in, **extra,
    })
    return version


def read_row(engine: Any, key: str, sort_key: str = '-') -> Optional[Dict[str, Any]]:
    return engine.resource.Table(engine.table_name).get_item(
        Key={'lock_key': key, 'sort_key': sort_key}, ConsistentRead=True).get('Item')


def assert_force_released(engine: Any, key: str, sort_key: str = '-', version: Optional[str] = None) -> None:
    """The lock is free: its row is kept, marked released (lease 0, a new version), holding no lock."""
    row = read_row(engine, key, sort_key)
    assert row is not None and 'released_at' in row and row['lease_duration'] == 0, row
    assert engine.read_held_row(key, sort_key) is None
    if version is not None:
        assert row['record_version_number'] != version


def assert_no_traceback(result: CliResult) -> None:
    assert 'Traceback' not in result.err and 'Traceback' not in result.out


# --------------------------------------------------------------------------------------------
# Entry points and usage errors
# --------------------------------------------------------------------------------------------

def test_python_m_help_lists_every_command() -> None:
    completed = subprocess.run([sys.executable, '-m', 'python_dynamodb_lock', '--help'], cwd=REPO_ROOT,
                               capture_output=True, text=True, timeout=120, check=False)
    assert completed.returncode == 0, completed.stderr
    for command in COMMANDS:
        assert command in completed.stdout
    for option in ('--table', '--endpoint-url', '--region', '--profile', '--partition-key-name',
                   '--sort-key-name', '--ttl-attribute-name'):
        assert option in completed.stdout


def test_python_m_usage_error_exits_2_without_traceback() -> None:
    completed = subprocess.run([sys.executable, '-m', 'python_dynamodb_lock', 'no-such-command'],
                               cwd=REPO_ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert completed.returncode == 2
    assert 'invalid choice' in completed.stderr
    assert 'Traceback' not in completed.stderr


@pytest.mark.parametrize('argv', [
    [],
    ['frobnicate'],
    ['show'],
    ['create-table', '--read-capacity', '0'],
    ['create-table', '--billing-mode', 'FREE'],
    ['list', '--expiry-period', 'soon'],
    ['demo', '--workers', '1'],
    ['demo', '--duration', '-3'],
], ids=['no-command', 'unknown-command', 'show-without-key', 'zero-capacity', 'bad-billing-mode',
        'bad-expiry-period', 'demo-one-worker', 'demo-negative-duration'])
def test_usage_errors_exit_2(cli: Callable[..., CliResult], argv: List[str]) -> None:
    result = cli(*argv)
    assert result.code == 2
    assert result.err.startswith('dynamodb-lock: error:')
    assert_no_traceback(result)


MALFORMED_ENDPOINTS = [
    pytest.param('notaurl', 'no scheme', id='no-scheme'),
    pytest.param('127.0.0.1:8000', 'no scheme', id='host-port-without-scheme'),
    pytest.param('', 'empty', id='empty'),
    pytest.param('   ', 'empty', id='blank'),
    pytest.param('ftp://127.0.0.1:8000', "scheme is 'ftp'", id='ftp-scheme'),
    pytest.param('localhost://8000', "scheme is 'localhost'", id='host-as-scheme'),
    pytest.param('http://127.0.0.1:99999', "port '99999'", id='port-too-large'),
    pytest.param('http://127.0.0.1:0', "port '0'", id='port-zero'),
    pytest.param('http://127.0.0.1:abc', "port 'abc'", id='port-not-a-number'),
    pytest.param('http://127.0.0.1:-1', "port '-1'", id='port-negative'),
    pytest.param('http://', 'no host', id='no-host'),
    pytest.param('http:///tables', 'no host', id='path-without-host'),
    pytest.param('http://[::1', 'cannot be parsed', id='unclosed-ipv6'),
    pytest.param('http://dynamodb_local:8000', "host 'dynamodb_local'", id='underscore-host'),
    pytest.param('http://user:secret@127.0.0.1:8000', 'user information', id='credentials'),
    pytest.param('http://127.0.0.1:8000/?region=x', 'query', id='query'),
    pytest.param('http://127.0.0.1:8000 ', "contains ' '", id='trailing-space'),
    pytest.param('http://127.0.0.1\n:8000', "contains '\\n'", id='newline'),
]


@pytest.mark.parametrize('url, reason', MALFORMED_ENDPOINTS)
@pytest.mark.parametrize('command', [['list'], ['show', 'k'], ['release', 'k', '--force', '--yes'],
                                     ['create-table'], ['demo']], ids=lambda argv: argv[0])
def test_a_malformed_endpoint_url_is_a_one_line_usage_error_before_any_call(
        cli: Callable[..., CliResult], monkeypatch: pytest.MonkeyPatch, url: str, reason: str,
        command: List[str]) -> None:
    import boto3.session

    def no_session(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError('a boto3 session was made for a malformed endpoint URL')

    monkeypatch.setattr(boto3.session, 'Session', no_session)
    result = cli('--endpoint-url', url, '--region', 'us-east-1', *command)
    assert result.code == 2, result
    assert result.err.startswith(f'dynamodb-lock: error: invalid endpoint URL {url!r} (--endpoint-url): ')
    assert reason in result.err, result.err
    assert result.err.count('\n') == 1 and result.out == ''
    assert_no_traceback(result)


@pytest.mark.parametrize('url, reason', [
    pytest.param('notaurl', 'Invalid endpoint', id='no-scheme'),
    pytest.param('ftp://127.0.0.1:8000', "scheme is 'ftp'", id='ftp-scheme'),
    pytest.param('http://127.0.0.1:99999', "port '99999'", id='port-too-large'),
])
def test_a_malformed_endpoint_url_from_the_environment_is_a_usage_error(
        cli: Callable[..., CliResult], monkeypatch: pytest.MonkeyPatch, url: str, reason: str) -> None:
    monkeypatch.setenv('AWS_ENDPOINT_URL_DYNAMODB', url)
    result = cli('--region', 'us-east-1', 'list')
    assert result.code == 2, result
    assert result.err.startswith('dynamodb-lock: error: invalid endpoint URL ')
    assert 'from the AWS environment or configuration' in result.err and reason in result.err
    assert result.err.count('\n') == 1
    assert_no_traceback(result)


def test_python_m_with_a_malformed_endpoint_url_prints_one_line() -> None:
    """The command of issue 11 (it used to print a botocore traceback)."""
    completed = subprocess.run(
        [sys.executable, '-m', 'python_dynamodb_lock', '--endpoint-url', 'notaurl', 'list'], cwd=REPO_ROOT,
        capture_output=True, text=True, timeout=120, check=False,
        env={**os.environ, 'AWS_ACCESS_KEY_ID': 'x', 'AWS_SECRET_ACCESS_KEY': 'x', 'AWS_DEFAULT_REGION': 'us-east-1'})
    assert completed.returncode == 2
    assert completed.stderr == ("dynamodb-lock: error: invalid endpoint URL 'notaurl' (--endpoint-url): it has "
                                'no scheme: write it as http://HOST[:PORT] or https://HOST[:PORT]\n')
    assert completed.stdout == ''


@pytest.mark.parametrize('url', [
    'http://127.0.0.1:8000',
    'http://localhost:8000/',
    'https://dynamodb.eu-west-1.amazonaws.com',
    'HTTPS://DYNAMODB.EU-WEST-1.AMAZONAWS.COM.',
    'http://[::1]:8000',
    'http://dynamodb-local:8000/some/path',
    'http://127.0.0.1:65535',
])
def test_well_formed_endpoint_urls_are_accepted_and_botocore_agrees(url: str) -> None:
    assert check_endpoint_url(url) == url
    import boto3.session
    client = boto3.session.Session(aws_access_key_id='x', aws_secret_access_key='x',
                                   region_name='us-east-1').client('dynamodb', endpoint_url=url)
    assert client.meta.endpoint_url.lower().rstrip('/') == url.lower().rstrip('/')


@pytest.mark.parametrize('argv', [['--version'], ['--version', 'list'], ['--table', 'T', '--version']])
def test_version(cli: Callable[..., CliResult], argv: List[str]) -> None:
    result = cli(*argv)
    assert result.code == 0
    assert result.out == f'dynamodb-lock {__version__}\n'
    assert result.err == ''


def test_version_goes_to_the_given_stdout() -> None:
    from python_dynamodb_lock._cli import run

    out, err = io.StringIO(), io.StringIO()
    assert run(['--version'], stdout=out, stderr=err) == 0
    assert out.getvalue() == f'dynamodb-lock {__version__}\n' and err.getvalue() == ''


@pytest.mark.parametrize('argv, words', [
    pytest.param(['show', ''], 'KEY must not be empty', id='empty-key'),
    pytest.param(['show', 'k' * 2049], 'KEY is 2049 bytes', id='key-too-long'),
    pytest.param(['show', 'k', 's' * 1025], 'SORT_KEY is 1025 bytes', id='sort-key-too-long'),
    pytest.param(['release', '', '--force', '--yes'], 'KEY must not be empty', id='release-empty-key'),
    pytest.param(['show', 'bad-\udcff-byte'], 'KEY contains a lone surrogate', id='undecodable-argv-byte'),
    pytest.param(['--partition-key-name', '', 'list'], '--partition-key-name must not be empty', id='empty-name'),
    pytest.param(['list', '--sort-key-name', 'n' * 256], '--sort-key-name must be at most 255 bytes',
                 id='name-too-long'),
    pytest.param(['--partition-key-name', 'owner_name', 'list'], "lock's own attributes", id='name-of-lock-attribute'),
    pytest.param(['--sort-key-name', 'lock_key', 'list'], 'must differ', id='equal-key-names'),
    pytest.param(['create-table', '--ttl-attribute-name', 'lock_key'], 'must differ', id='ttl-on-the-key'),
])
def test_names_and_keys_the_library_refuses_are_usage_errors_before_any_call(
        cli: Callable[..., CliResult], monkeypatch: pytest.MonkeyPatch, argv: List[str], words: str) -> None:
    import boto3.session

    def no_session(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError('a boto3 session was made for arguments that cannot work')

    monkeypatch.setattr(boto3.session, 'Session', no_session)
    result = cli('--region', 'us-east-1', *argv)
    assert result.code == 2, result
    assert result.err.startswith('dynamodb-lock: error: ') and words in result.err, result.err
    assert result.err.count('\n') == 1
    assert_no_traceback(result)


def test_help_of_a_command_exits_0(cli: Callable[..., CliResult]) -> None:
    result = cli('release', '--help')
    assert result.code == 0
    assert '--force' in result.out and '--version' in result.out and '--yes' in result.out


def test_connection_options_work_before_and_after_the_command(
        local_engine: Any, cli: Callable[..., CliResult]) -> None:
    put_dead_lock(local_engine, 'placed')
    connection = ['--endpoint-url', local_engine.endpoint_url, '--region', 'us-east-1',
                  '--table', local_engine.table_name]
    before = cli(*connection, 'show', 'placed')
    after = cli('show', 'placed', *connection)
    assert before.code == after.code == 0
    assert 'crashed-host' in before.out and 'crashed-host' in after.out


# --------------------------------------------------------------------------------------------
# create-table
# --------------------------------------------------------------------------------------------

def test_create_table_on_demand_with_ttl(local_engine: Any, cli: Callable[..., CliResult],
                                         new_table_names: List[str]) -> None:
    name = new_table_name(new_table_names)
    result = cli('--endpoint-url', local_engine.endpoint_url, '--region', 'us-east-1',
                 'create-table', '--table', name, '--billing-mode', 'PAY_PER_REQUEST')
    assert result.code == 0, result.err
    assert 'Created table' in result.out
    table = local_engine.client.describe_table(TableName=name)['Table']
    assert table['BillingModeSummary']['BillingMode'] == 'PAY_PER_REQUEST'
    assert {k['KeyType']: k['AttributeName'] for k in table['KeySchema']} == {
        'HASH': 'lock_key', 'RANGE': 'sort_key'}
    ttl = local_engine.client.describe_time_to_live(TableName=name)['TimeToLiveDescription']
    assert ttl['TimeToLiveStatus'] in ('ENABLED', 'ENABLING')
    assert ttl['AttributeName'] == 'expiry_time'


def test_create_table_provisioned_with_custom_names(local_engine: Any, cli: Callable[..., CliResult],
                                                    new_table_names: List[str]) -> None:
    name = new_table_name(new_table_names)
    result = cli('--endpoint-url', local_engine.endpoint_url, '--region', 'us-east-1', '--table', name,
                 '--partition-key-name', 'pk', '--sort-key-name', 'sk', '--ttl-attribute-name', 'ttl',
                 'create-table', '--read-capacity', '7', '--write-capacity', '3')
    assert result.code == 0, result.err
    table = local_engine.client.describe_table(TableName=name)['Table']
    assert table['ProvisionedThroughput']['ReadCapacityUnits'] == 7
    assert table['ProvisionedThroughput']['WriteCapacityUnits'] == 3
    assert {k['KeyType']: k['AttributeName'] for k in table['KeySchema']} == {'HASH': 'pk', 'RANGE': 'sk'}
    ttl = local_engine.client.describe_time_to_live(TableName=name)['TimeToLiveDescription']
    assert ttl['AttributeName'] == 'ttl'


def test_create_table_existing_needs_exist_ok(on_table: Callable[..., CliResult]) -> None:
    refused = on_table('create-table')
    assert refused.code == 1
    assert 'already exists' in refused.err and '--exist-ok' in refused.err
    accepted = on_table('create-table', '--exist-ok')
    assert accepted.code == 0, accepted.err
    assert 'already exists' in accepted.out


def test_create_table_exist_ok_rejects_another_key_schema(on_table: Callable[..., CliResult]) -> None:
    result = on_table('--partition-key-name', 'other_key', 'create-table', '--exist-ok')
    assert result.code == 1
    assert 'other_key' in result.err
    assert_no_traceback(result)


def test_create_table_capacities_are_refused_with_on_demand(
        local_engine: Any, cli: Callable[..., CliResult], new_table_names: List[str]) -> None:
    name = new_table_name(new_table_names)
    result = cli('--endpoint-url', local_engine.endpoint_url, '--region', 'us-east-1', '--table', name,
                 'create-table', '--billing-mode', 'PAY_PER_REQUEST', '--read-capacity', '5')
    assert result.code == 2
    assert name not in local_engine.client.list_tables()['TableNames']


# --------------------------------------------------------------------------------------------
# list
# --------------------------------------------------------------------------------------------

def test_list_empty_table(on_table: Callable[..., CliResult], local_engine: Any) -> None:
    result = on_table('list')
    assert result.code == 0
    assert f'No locks in table {local_engine.table_name!r}' in result.out
    as_json = on_table('list', '--json')
    assert as_json.code == 0 and json.loads(as_json.out) == []


def test_list_shows_held_and_abandoned_locks(on_table: Callable[..., CliResult], local_engine: Any,
                                             holders: Callable[..., DynamoDBLockClient]) -> None:
    held = holders('live-holder').acquire_lock('orders', 'eu', additional_attributes={'job': 'nightly'})
    dead_version = put_dead_lock(local_engine, 'reports', owner='crashed-host', lease='2.5')
    local_engine.resource.Table(local_engine.table_name).put_item(
        Item={'lock_key': 'not-a-lock', 'sort_key': '-', 'count': 3})

    table = on_table('list')
    assert table.code == 0, table.err
    lines = table.out.splitlines()
    assert lines[0].split() == ['PARTITION', 'KEY', 'SORT', 'KEY', 'OWNER', 'LEASE', 'TTL', 'EXPIRES', 'IN',
                                'RECORD', 'VERSION']
    orders = next(line for line in lines if line.startswith('orders'))
    assert 'live-holder' in orders and held.record_version_number in orders and '2m00s' in orders
    reports = next(line for line in lines if line.startswith('reports'))
    assert 'crashed-host' in reports and dead_version in reports and '2.5s' in reports
    assert 'not-a-lock' not in table.out
    assert '2 lock(s)' in lines[-1]

    records = {r['partition_key']: r for r in json.loads(on_table('list', '--json').out)}
    assert set(records) == {'orders', 'reports'}
    assert records['orders']['owner_name'] == 'live-holder'
    assert records['orders']['record_version_number'] == held.record_version_number
    assert records['orders']['lease_duration'] == 120
    assert records['orders']['additional_attributes'] == {'job': 'nightly'}
    assert 0 < records['orders']['seconds_until_expiry'] <= 3600
    assert records['reports']['lease_duration'] == 2.5
    assert 'estimated_seconds_since_last_write' not in records['orders']


def test_expired_rows_are_shown_as_expired() -> None:
    # DynamoDB Local deletes expired rows within seconds, so this is checked on the formatting.
    lock = BaseDynamoDBLock('k', '-', 'owner', 30.0, 'v1', 1_000, {})
    record = lock_record(lock, now=1_042.0, expiry_period=3600)
    assert record['seconds_until_expiry'] == -42
    assert record['estimated_seconds_since_last_write'] == 3642
    assert until_expiry_text(record['seconds_until_expiry']) == 'expired 42s ago'
    assert record['expiry_time_utc'] == '1970-01-01T00:16:40Z'


def test_list_estimates_last_write_only_when_told_the_expiry_period(
        on_table: Callable[..., CliResult], holders: Callable[..., DynamoDBLockClient]) -> None:
    holders().acquire_lock('fresh')
    record, = json.loads(on_table('list', '--json', '--expiry-period', '3600').out)
    # Written moments ago with the default one-hour expiry period: the estimate is near zero
    # (expiry_time is whole seconds, hence the one-second allowance).
    assert -1 <= record['estimated_seconds_since_last_write'] < 60
    table = on_table('list', '--expiry-period', '3600')
    assert 'LAST WRITE (EST.)' in table.out


def test_list_with_custom_attribute_names(local_engine: Any, cli: Callable[..., CliResult],
                                          new_table_names: List[str]) -> None:
    name = new_table_name(new_table_names)
    DynamoDBLockClient.create_dynamodb_table(local_engine.client, table_name=name, partition_key_name='pk',
                                             sort_key_name='sk', ttl_attribute_name='ttl')
    holder = DynamoDBLockClient(local_engine.resource, table_name=name, partition_key_name='pk',
                                sort_key_name='sk', ttl_attribute_name='ttl', owner_name='custom-holder')
    try:
        holder.acquire_lock('custom')
        result = cli('--endpoint-url', local_engine.endpoint_url, '--region', 'us-east-1', '--table', name,
                     '--partition-key-name', 'pk', '--sort-key-name', 'sk', '--ttl-attribute-name', 'ttl',
                     'list', '--json')
    finally:
        holder.close()
    assert result.code == 0, result.err
    record, = json.loads(result.out)
    assert (record['partition_key'], record['owner_name']) == ('custom', 'custom-holder')
    assert record['seconds_until_expiry'] > 0


@pytest.mark.parametrize('seconds, text', [
    (0.5, '0.5s'), (2.5, '2.5s'), (30.0, '30s'), (59.6, '1m00s'), (3599, '59m59s'), (3600, '1h00m'),
    (200_000, '2d07h'), (-5, '-5s'),
])
def test_format_seconds(seconds: float, text: str) -> None:
    assert format_seconds(seconds) == text


# --------------------------------------------------------------------------------------------
# show
# --------------------------------------------------------------------------------------------

def test_show_a_lock(on_table: Callable[..., CliResult], holders: Callable[..., DynamoDBLockClient]) -> None:
    lock = holders('shown-holder').acquire_lock('job', 'part-2', additional_attributes={'n': Decimal(5)})
    text = on_table('show', 'job', 'part-2')
    assert text.code == 0, text.err
    assert 'shown-holder' in text.out and lock.record_version_number in text.out
    assert '"n": 5' in text.out
    record = json.loads(on_table('show', 'job', 'part-2', '--json').out)
    assert record['record_version_number'] == lock.record_version_number
    assert (record['partition_key'], record['sort_key']) == ('job', 'part-2')


def test_show_and_list_give_the_attributes_a_holder_updated_last(
        on_table: Callable[..., CliResult], holders: Callable[..., DynamoDBLockClient]) -> None:
    lock = holders('reporter').acquire_lock('job', 'part-3', additional_attributes={'progress': 0, 'stage': 'a'},
                                            lease_duration=timedelta(seconds=90))
    lock.update_attributes({'progress': 40}, remove=['stage'])
    record = json.loads(on_table('show', 'job', 'part-3', '--json').out)
    assert record['additional_attributes'] == {'progress': 40}
    assert record['record_version_number'] == lock.record_version_number
    assert record['lease_duration'] == 90
    assert '"progress": 40' in on_table('show', 'job', 'part-3').out
    (listed,) = [each for each in json.loads(on_table('list', '--json').out) if each['sort_key'] == 'part-3']
    assert listed['additional_attributes'] == {'progress': 40}


def test_show_default_sort_key_and_missing_lock(on_table: Callable[..., CliResult], local_engine: Any) -> None:
    put_dead_lock(local_engine, 'job')
    assert on_table('show', 'job').code == 0
    missing = on_table('show', 'job', 'other-sort-key')
    assert missing.code == 1
    assert "no lock 'job' / 'other-sort-key'" in missing.err
    assert_no_traceback(missing)


@pytest.mark.parametrize('argv', [['show', 'counter'], ['release', 'counter', '--force', '--yes']],
                         ids=['show', 'release'])
def test_a_row_that_is_not_a_lock_is_left_alone(on_table: Callable[..., CliResult], local_engine: Any,
                                                argv: List[str]) -> None:
    local_engine.resource.Table(local_engine.table_name).put_item(
        Item={'lock_key': 'counter', 'sort_key': '-', 'count': 3})
    result = on_table(*argv)
    assert result.code == 1
    assert 'not a lock' in result.err
    assert read_row(local_engine, 'counter') == {'lock_key': 'counter', 'sort_key': '-', 'count': 3}


# --------------------------------------------------------------------------------------------
# release
# --------------------------------------------------------------------------------------------

def test_release_without_force_refuses_and_explains(on_table: Callable[..., CliResult],
                                                    local_engine: Any) -> None:
    version = put_dead_lock(local_engine, 'stuck')
    result = on_table('release', 'stuck', '--yes')
    assert result.code == 2
    assert '--force' in result.err and 'still hold' in result.err
    assert read_row(local_engine, 'stuck')['record_version_number'] == version


def test_release_force_yes_releases_the_row(on_table: Callable[..., CliResult], local_engine: Any) -> None:
    version = put_dead_lock(local_engine, 'stuck', 'part')
    result = on_table('release', 'stuck', 'part', '--force', '--yes')
    assert result.code == 0, result.err
    assert version in result.out and 'Released' in result.out
    assert_force_released(local_engine, 'stuck', 'part', version)
    # The row kept marked released is no lock to the other commands.
    shown = on_table('show', 'stuck', 'part')
    assert shown.code == 1 and "no lock 'stuck' / 'part'" in shown.err
    listed = on_table('list')
    assert listed.code == 0 and 'No locks in table' in listed.out and 'stuck' not in listed.out
    again = on_table('release', 'stuck', 'part', '--force', '--yes')
    assert again.code == 1 and 'no lock' in again.err


def test_release_needs_yes_when_stdin_is_not_a_terminal(on_table: Callable[..., CliResult],
                                                        local_engine: Any) -> None:
    version = put_dead_lock(local_engine, 'stuck')
    result = on_table('release', 'stuck', '--force', stdin=NotATerminal('y\n'))
    assert result.code == 2
    assert '--yes' in result.err and 'not a terminal' in result.err
    assert read_row(local_engine, 'stuck')['record_version_number'] == version


@pytest.mark.parametrize('answer', ['n\n', '\n', ''], ids=['no', 'empty', 'eof'])
def test_release_declined_keeps_the_row(on_table: Callable[..., CliResult], local_engine: Any,
                                        answer: str) -> None:
    version = put_dead_lock(local_engine, 'stuck')
    terminal = FakeTerminal(answer)
    result = on_table('release', 'stuck', '--force', stdin=terminal)
    assert terminal.reads == 1
    assert result.code == 1
    assert version in result.out  # the lock was shown before the question
    assert '[y/N]' in result.err and 'nothing was changed' in result.err
    assert read_row(local_engine, 'stuck')['record_version_number'] == version


def test_release_confirmed_on_the_terminal(on_table: Callable[..., CliResult], local_engine: Any) -> None:
    put_dead_lock(local_engine, 'stuck')
    result = on_table('release', 'stuck', '--force', stdin=FakeTerminal('yes\n'))
    assert result.code == 0, result.err
    assert_force_released(local_engine, 'stuck')


def test_release_missing_lock_is_an_error(on_table: Callable[..., CliResult]) -> None:
    result = on_table('release', 'never-locked', '--force', '--yes')
    assert result.code == 1
    assert 'no lock' in result.err
    assert_no_traceback(result)


def test_release_with_the_current_version(on_table: Callable[..., CliResult], local_engine: Any) -> None:
    version = put_dead_lock(local_engine, 'stuck')
    result = on_table('release', 'stuck', '--force', '--yes', '--version', version)
    assert result.code == 0, result.err
    assert_force_released(local_engine, 'stuck', version=version)


def test_release_version_refuses_a_lock_reacquired_meanwhile(
        on_table: Callable[..., CliResult], local_engine: Any,
        holders: Callable[..., DynamoDBLockClient]) -> None:
    holder = holders()
    first = holder.acquire_lock('job')
    shown = json.loads(on_table('show', 'job', '--json').out)['record_version_number']
    assert shown == first.record_version_number
    holder.release_lock(first, best_effort=False)
    second = holder.acquire_lock('job')

    result = on_table('release', 'job', '--force', '--yes', '--version', shown)
    assert result.code == 1
    assert 'changed meanwhile' in result.err and second.record_version_number in result.err
    assert read_row(local_engine, 'job')['record_version_number'] == second.record_version_number


def test_release_version_refuses_a_lock_that_heartbeated_meanwhile(
        on_table: Callable[..., CliResult], local_engine: Any,
        holders: Callable[..., DynamoDBLockClient]) -> None:
    holder = holders(heartbeat_period=0.2, lease_duration=2.0)
    lock = holder.acquire_lock('job')
    shown = json.loads(on_table('show', 'job', '--json').out)['record_version_number']
    give_up = time.monotonic() + 30
    while read_row(local_engine, 'job')['record_version_number'] == shown:  # wait for a heartbeat
        assert time.monotonic() < give_up, 'the holder never heartbeated'
        time.sleep(0.05)

    result = on_table('release', 'job', '--force', '--yes', '--version', shown)
    assert result.code == 1
    assert 'changed meanwhile' in result.err
    row = read_row(local_engine, 'job')
    assert row is not None and row['owner_name'] == 'holder-a'
    assert lock.status == lock.LOCKED


def test_release_never_touches_a_lock_that_changed_while_asking(
        on_table: Callable[..., CliResult], local_engine: Any,
        holders: Callable[..., DynamoDBLockClient]) -> None:
    holder = holders()
    locks = [holder.acquire_lock('job')]

    def reacquire_while_the_operator_reads() -> None:
        holder.release_lock(locks[0], best_effort=False)
        locks.append(holder.acquire_lock('job'))

    shown_version = locks[0].record_version_number
    result = on_table('release', 'job', '--force',
                      stdin=FakeTerminal('y\n', on_read=reacquire_while_the_operator_reads))
    assert shown_version in result.out
    assert result.code == 1
    assert 'changed meanwhile' in result.err and 'nothing was changed' in result.err
    assert read_row(local_engine, 'job')['record_version_number'] == locks[1].record_version_number


# --------------------------------------------------------------------------------------------
# Expected failures: one line on stderr, exit 1, no traceback
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize('argv', [['list'], ['show', 'k'], ['release', 'k', '--force', '--yes']],
                         ids=['list', 'show', 'release'])
def test_missing_table(local_engine: Any, cli: Callable[..., CliResult], argv: List[str]) -> None:
    result = cli('--endpoint-url', local_engine.endpoint_url, '--region', 'us-east-1',
                 '--table', 'no-such-table', *argv)
    assert result.code == 1
    assert "table 'no-such-table' not found" in result.err
    assert 'create-table --table no-such-table' in result.err
    assert_no_traceback(result)


def test_missing_credentials(local_engine: Any, cli: Callable[..., CliResult],
                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv('AWS_ACCESS_KEY_ID')
    monkeypatch.delenv('AWS_SECRET_ACCESS_KEY')
    result = cli('--endpoint-url', local_engine.endpoint_url, '--region', 'us-east-1',
                 '--table', local_engine.table_name, 'list')
    assert result.code == 1
    assert 'no AWS credentials' in result.err
    assert_no_traceback(result)


def test_missing_region(local_engine: Any, cli: Callable[..., CliResult]) -> None:
    result = cli('--endpoint-url', local_engine.endpoint_url, '--table', local_engine.table_name, 'list')
    assert result.code == 1
    assert 'no AWS region' in result.err and '--region' in result.err
    assert_no_traceback(result)


def test_region_from_the_environment_is_used(local_engine: Any, cli: Callable[..., CliResult],
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv('AWS_DEFAULT_REGION', 'us-east-1')
    result = cli('--endpoint-url', local_engine.endpoint_url, '--table', local_engine.table_name, 'list')
    assert result.code == 0, result.err


def test_unknown_profile(cli: Callable[..., CliResult]) -> None:
    result = cli('--profile', 'no-such-profile', '--region', 'us-east-1', 'list')
    assert result.code == 1
    assert 'no-such-profile' in result.err
    assert_no_traceback(result)


def test_unreachable_endpoint(cli: Callable[..., CliResult], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv('AWS_MAX_ATTEMPTS', '1')  # a standard variable, honoured: no retry back-off
    with socket.socket() as placeholder:  # a port that nothing listens on
        placeholder.bind(('127.0.0.1', 0))
        port = placeholder.getsockname()[1]
    result = cli('--endpoint-url', f'http://127.0.0.1:{port}', '--region', 'us-east-1', 'list')
    assert result.code == 1
    assert 'cannot reach DynamoDB' in result.err and str(port) in result.err
    assert_no_traceback(result)


def test_library_log_only_with_verbose(on_table: Callable[..., CliResult], local_engine: Any) -> None:
    put_dead_lock(local_engine, 'quiet')
    quiet = on_table('release', 'quiet', '--force', '--yes')
    assert quiet.code == 0 and quiet.err == ''
    put_dead_lock(local_engine, 'loud')
    loud = on_table('-v', 'release', 'loud', '--force', '--yes')
    assert loud.code == 0
    assert 'Force-released' in loud.err  # the library's own log line, shown with -v


# --------------------------------------------------------------------------------------------
# list --partition-key, create-table --tag and --allow-global-table
# --------------------------------------------------------------------------------------------

@pytest.fixture
def session_hooks(monkeypatch: pytest.MonkeyPatch) -> List[Any]:
    """Botocore hooks, ``(event name, handler)``, registered on every boto3 session the command
    makes (and so on its clients): the test appends them."""
    import boto3.session

    hooks: List[Any] = []
    original = boto3.session.Session

    class HookedSession(original):  # type: ignore[misc, valid-type]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            for event_name, handler in hooks:
                self.events.register(event_name, handler)

    monkeypatch.setattr(boto3.session, 'Session', HookedSession)
    return hooks


def test_list_one_partition_key(on_table: Callable[..., CliResult], local_engine: Any,
                                holders: Callable[..., DynamoDBLockClient], session_hooks: List[Any]) -> None:
    holder = holders('live-holder')
    for sort_key in ('eu', 'us'):
        holder.acquire_lock('orders', sort_key)
    holder.acquire_lock('orders-archive', 'eu')
    put_dead_lock(local_engine, 'reports')
    operations: List[str] = []
    session_hooks.append(('before-call.dynamodb', lambda model, **kwargs: operations.append(model.name)))

    records = json.loads(on_table('list', '--partition-key', 'orders', '--json').out)
    assert [(record['partition_key'], record['sort_key']) for record in records] == [('orders', 'eu'),
                                                                                     ('orders', 'us')]
    assert operations == ['Query']
    table = on_table('list', '--partition-key', 'orders')
    assert table.code == 0, table.err
    assert f"2 lock(s) in table {local_engine.table_name!r} under partition key 'orders'." in table.out
    assert 'orders-archive' not in table.out and 'reports' not in table.out
    empty = on_table('list', '--partition-key', 'nobody')
    assert empty.code == 0 and "No locks in table" in empty.out and "under partition key 'nobody'" in empty.out
    assert set(operations) == {'Query'}


@pytest.mark.parametrize('argv, words', [
    (['list', '--partition-key', ''], '--partition-key is empty'),
    (['--partition-key-type', 'N', 'list', '--partition-key', 'abc'], "--partition-key 'abc' is not a number"),
    (['--partition-key-type', 'B', 'list', '--partition-key', 'not base64!'], "--partition-key 'not base64!' is not "
                                                                                'base64'),
], ids=['empty', 'not-a-number', 'not-base64'])
def test_list_refuses_a_bad_partition_key_before_any_call(cli: Callable[..., CliResult], argv: List[str],
                                                          words: str, session_hooks: List[Any]) -> None:
    operations: List[str] = []
    session_hooks.append(('before-call.dynamodb', lambda model, **kwargs: operations.append(model.name)))
    result = cli('--endpoint-url', 'http://127.0.0.1:9', '--region', 'us-east-1', *argv)
    assert result.code == 2, result
    assert words in result.err
    assert operations == []
    assert_no_traceback(result)


def test_create_table_with_tags(local_engine: Any, cli: Callable[..., CliResult], new_table_names: List[str],
                                session_hooks: List[Any]) -> None:
    """DynamoDB Local accepts tags but cannot list them (no ListTagsOfResource): the CreateTable
    request the command sends is what is checked."""
    sent: List[Dict[str, Any]] = []
    session_hooks.append(('provide-client-params.dynamodb.CreateTable', lambda params, **kwargs: sent.append(params)))
    name = new_table_name(new_table_names)
    result = cli('--endpoint-url', local_engine.endpoint_url, '--region', 'us-east-1', 'create-table', '--table', name,
                 '--tag', 'team=billing', '--tag', 'env=', '--tag', 'formula=a=b')
    assert result.code == 0, result.err
    assert '3 tag(s)' in result.out
    assert sent[0]['Tags'] == [{'Key': 'team', 'Value': 'billing'}, {'Key': 'env', 'Value': ''},
                               {'Key': 'formula', 'Value': 'a=b'}]


@pytest.mark.parametrize('tags, words', [
    (['team'], "argument --tag: expected KEY=VALUE, got 'team'"),
    (['=x'], '--tag: a tag key may not be empty'),
    (['aws:x=y'], '--tag: the tag key \'aws:x\' starts with "aws:"'),
    (['a=1', 'a=2'], "--tag: the tag key 'a' is given twice"),
    (['k=' + 'v' * 257], '--tag: the value of tag \'k\' has 257 characters'),
], ids=['no-equals', 'empty-key', 'aws-prefix', 'repeated', 'long-value'])
def test_create_table_refuses_bad_tags_before_any_call(local_engine: Any, cli: Callable[..., CliResult],
                                                       new_table_names: List[str], session_hooks: List[Any],
                                                       tags: List[str], words: str) -> None:
    operations: List[str] = []
    session_hooks.append(('before-call.dynamodb', lambda model, **kwargs: operations.append(model.name)))
    name = new_table_name(new_table_names)
    options = [part for tag in tags for part in ('--tag', tag)]
    result = cli('--endpoint-url', local_engine.endpoint_url, '--region', 'us-east-1', 'create-table', '--table', name,
                 *options)
    assert result.code == 2, result
    assert words in result.err
    assert operations == []
    assert name not in local_engine.client.list_tables()['TableNames']
    assert_no_traceback(result)


def test_create_table_exist_ok_refuses_a_global_table_unless_allowed(on_table: Callable[..., CliResult],
                                                                     session_hooks: List[Any]) -> None:
    """DynamoDB Local has no global tables: a hook adds replicas to the DescribeTable answer."""
    def add_replicas(parsed: Dict[str, Any], **kwargs: Any) -> None:
        if 'Table' in parsed:
            parsed['Table']['Replicas'] = [{'RegionName': 'eu-west-1'}]

    session_hooks.append(('after-call.dynamodb.DescribeTable', add_replicas))
    refused = on_table('create-table', '--exist-ok')
    assert refused.code == 1
    assert 'global table (replicas in eu-west-1)' in refused.err and 'pass --allow-global-table' in refused.err
    assert 'allow_global_table=True' not in refused.err
    assert_no_traceback(refused)
    accepted = on_table('create-table', '--exist-ok', '--allow-global-table')
    assert accepted.code == 0, accepted.err
    assert 'already exists' in accepted.out
