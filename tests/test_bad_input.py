"""Every bad input the lock client can meet, on DynamoDB Local: a clear error, and no harm done.

One table drives the test: each case is an action and what it must produce, either an
exception (type, ``DynamoDBLockError`` code, and words the message must contain) or a
WARNING logged by the library. Around every case the test scans the lock table, and the
other tables involved, and lists the tables: nothing may change, because bad arguments are
refused before anything is written and DynamoDB refuses what the client cannot check itself
(a missing table, a table with another key schema, an oversized item).

Covered: wrong types and empty values for every argument, keys of more bytes than DynamoDB
allows, additional attributes that would overwrite the lock's own attributes or cannot be
stored, attribute names that collide, non-positive and inconsistent periods (errors) and
unsafe but workable ones (warnings), a missing table, tables with another key schema, a lock
of another client, plain lock descriptions where a held lock is needed, a closed client.
A callback that raises, and a callback executor that refuses work, are logged and change
nothing else (separate tests below, as they involve the background threads).
"""
from __future__ import annotations

import concurrent.futures
import dataclasses
import datetime
import logging
import re
import uuid
from decimal import Decimal
from typing import Any, Callable, Dict, Iterator, List, Optional, Type

import boto3
import pytest

from _torture.support import scan_table
from helpers import ASYNCIO, THREADED, CallbackRecorder, LockClients, background_threads, wait_until
from python_dynamodb_lock.aio import AsyncDynamoDBLockClient
from python_dynamodb_lock.python_dynamodb_lock import (
    BaseDynamoDBLock,
    DynamoDBLock,
    DynamoDBLockClient,
    DynamoDBLockError,
)
from python_dynamodb_lock.testing import SystemClock

pytestmark = pytest.mark.local

td = datetime.timedelta
HEARTBEAT = td(seconds=0.2)
SAFE_PERIOD = td(seconds=1)
LEASE = td(seconds=3)


class Context:
    """What a case can use: the engine, a lock table with one (static) row of someone else's
    lock, a table with the wrong key schema, and a factory of lock clients of the test's kind."""

    def __init__(self, engine: Any, table: Any, client_kind: str) -> None:
        self.engine = engine
        self.table = table
        self.kind = client_kind
        self.factory = LockClients(kind=client_kind)
        self.table_name = table.table_name
        self.reader = table.client
        self.clients: List[DynamoDBLockClient] = []
        self.wrong_schema_table = f'{table.table_name}-wrong'
        self.reader.create_table(
            TableName=self.wrong_schema_table,
            KeySchema=[{'AttributeName': 'id', 'KeyType': 'HASH'}],
            AttributeDefinitions=[{'AttributeName': 'id', 'AttributeType': 'S'}],
            BillingMode='PAY_PER_REQUEST',
        )
        self.reader.get_waiter('table_exists').wait(TableName=self.wrong_schema_table)
        self.reader.put_item(TableName=self.wrong_schema_table, Item={'id': {'S': 'existing'}})
        self.number_sort_key_table = f'{table.table_name}-numsort'
        self.reader.create_table(
            TableName=self.number_sort_key_table,
            KeySchema=[{'AttributeName': 'lock_key', 'KeyType': 'HASH'},
                       {'AttributeName': 'sort_key', 'KeyType': 'RANGE'}],
            AttributeDefinitions=[{'AttributeName': 'lock_key', 'AttributeType': 'S'},
                                  {'AttributeName': 'sort_key', 'AttributeType': 'N'}],
            BillingMode='PAY_PER_REQUEST',
        )
        self.reader.get_waiter('table_exists').wait(TableName=self.number_sort_key_table)
        # Someone else's lock, written directly so that nothing renews it during the case.
        self.reader.put_item(TableName=self.table_name, Item={
            'lock_key': {'S': 'held'}, 'sort_key': {'S': '-'}, 'owner_name': {'S': 'someone-else'},
            'lease_duration': {'N': '3.0'}, 'record_version_number': {'S': str(uuid.uuid4())},
            'expiry_time': {'N': '4102444800'},
        })

    def client(self, **overrides: Any) -> DynamoDBLockClient:
        """A lock client of the test's kind on the lock table (``overrides`` replace any
        constructor argument), with background heartbeats, the real clock and, unless given, the
        default callback executor."""
        arguments: Dict[str, Any] = {
            'table_name': self.table_name,
            'heartbeat_period': HEARTBEAT,
            'safe_period': SAFE_PERIOD,
            'lease_duration': LEASE,
            'app_callback_executor': None,
            'clock': SystemClock(),
        }
        arguments.update(overrides)
        resource = arguments.pop('dynamodb_resource', self.engine.resource())
        client: DynamoDBLockClient = self.factory.make(resource, hand_driven=False, **arguments)
        self.clients.append(client)
        return client

    def held_lock(self, key: str = 'mine') -> DynamoDBLock:
        """A lock held by a client whose heartbeats will not run during the case (long periods)."""
        owner = self.client(heartbeat_period=td(seconds=300), safe_period=td(seconds=400),
                            lease_duration=td(seconds=900))
        return owner.acquire_lock(key)

    def create_table(self, **arguments: Any) -> Any:
        """``create_dynamodb_table`` of the test's kind: on a boto3 client, or (asyncio) on an
        aiobotocore client."""
        if self.kind == THREADED:
            return DynamoDBLockClient.create_dynamodb_table(self.reader, **arguments)

        async def create() -> Any:
            async with self.table.new_async_client() as dynamodb:
                return await AsyncDynamoDBLockClient.create_dynamodb_table(dynamodb, **arguments)

        return self.factory.runner.run(create())

    def live_senders(self) -> int:
        """How many of the clients' heartbeat senders (threads or tasks) are alive."""
        return sum(1 for client in self.clients
                   if any(worker.is_alive() and 'sender' in worker.name for worker in background_threads(client)))

    def snapshot(self) -> Dict[str, Any]:
        return {
            'tables': sorted(self.reader.list_tables()['TableNames']),
            self.table_name: scan_table(self.reader, self.table_name),
            self.wrong_schema_table: scan_table(self.reader, self.wrong_schema_table),
            self.number_sort_key_table: scan_table(self.reader, self.number_sort_key_table),
        }

    def close(self) -> None:
        self.factory.close_all()
        for table in (self.wrong_schema_table, self.number_sort_key_table):
            self.reader.delete_table(TableName=table)


@dataclasses.dataclass
class Case:
    """One bad input: ``action(context)`` must raise ``error`` (with ``code``), or log a warning.

    ``words``: a regular expression the error message (or the warning) must match, so that
    the user is told what is wrong; ``async_words`` replaces it for the asyncio client where
    that client's argument differs (it takes an aiobotocore client, not a boto3 resource).
    ``prepare`` runs before the snapshot (to set up state the action needs, e.g. a lock held by
    another client).
    """

    id: str
    action: Callable[[Context, Any], Any]
    error: Optional[Type[BaseException]] = None
    code: Optional[str] = None
    words: str = ''
    warning: bool = False
    prepare: Callable[[Context], Any] = lambda context: None
    async_words: Optional[str] = None

    def words_for(self, kind: str) -> str:
        return self.async_words if kind == ASYNCIO and self.async_words is not None else self.words


def constructor(**overrides: Any) -> Callable[[Context, Any], Any]:
    return lambda context, _: context.client(**overrides)


def acquire(*args: Any, **kwargs: Any) -> Callable[[Context, Any], Any]:
    kwargs.setdefault('retry_timeout', td(0))
    return lambda context, _: context.client().acquire_lock(*args, **kwargs)


def try_acquire(*args: Any, **kwargs: Any) -> Callable[[Context, Any], Any]:
    return lambda context, _: context.client().try_acquire_lock(*args, **kwargs)


def on_table(table: str, operation: str) -> Callable[[Context, Any], Any]:
    """Run an operation of a client configured for a table that is missing or has another schema."""

    def run(context: Context, _: Any) -> Any:
        name = {'missing': f'{context.table_name}-missing', 'wrong': context.wrong_schema_table,
                'numsort': context.number_sort_key_table}[table]
        client = context.client(table_name=name)
        if operation == 'acquire':
            return client.acquire_lock('job', retry_timeout=td(0))
        if operation == 'try_acquire':
            return client.try_acquire_lock('job')
        if operation == 'get_lock':
            return client.get_lock('job')
        return list(client.list_locks())

    return run


def closed_client_call(operation: str) -> Callable[[Context, Any], Any]:
    def run(context: Context, _: Any) -> Any:
        client = context.client()
        client.close()
        if operation == 'acquire':
            return client.acquire_lock('job', retry_timeout=td(seconds=1))
        return client.try_acquire_lock('job')

    return run


TWO_BYTE = '\u00e9'   # one character, two bytes in UTF-8

CASES = [
    # -- the constructor ----------------------------------------------------------------
    Case('resource-none', constructor(dynamodb_resource=None), TypeError, words='dynamodb_resource',
         async_words='dynamodb_client must be an aiobotocore'),
    # (a low-level DynamoDB client is taken by the threaded client: tests/test_low_level_client.py)
    Case('resource-is-another-services-client',
         lambda context, _: context.client(dynamodb_resource=boto3.client(
             's3', region_name='us-east-1', aws_access_key_id='x', aws_secret_access_key='y')),
         TypeError, words=r'boto3\.resource\("dynamodb"\)', async_words='dynamodb_client must be an aiobotocore'),
    Case('resource-is-a-string', constructor(dynamodb_resource='dynamodb'), TypeError, words='resource',
         async_words='dynamodb_client must be an aiobotocore'),
    Case('table-name-empty', constructor(table_name=''), ValueError, words='table_name'),
    Case('table-name-not-str', constructor(table_name=42), TypeError, words='table_name'),
    Case('partition-key-name-empty', constructor(partition_key_name=''), ValueError, words='partition_key_name'),
    Case('partition-key-name-too-long', constructor(partition_key_name='k' * 256), ValueError, words='255'),
    Case('partition-key-name-reserved', constructor(partition_key_name='owner_name'), ValueError, words='collides'),
    Case('sort-key-name-reserved', constructor(sort_key_name='record_version_number'), ValueError,
         words='collides'),
    Case('ttl-name-reserved', constructor(ttl_attribute_name='lease_duration'), ValueError, words='collides'),
    Case('key-names-equal', constructor(partition_key_name='k', sort_key_name='k'), ValueError, words='differ'),
    Case('ttl-name-equals-sort-key-name', constructor(ttl_attribute_name='sort_key'), ValueError, words='differ'),
    Case('owner-name-empty', constructor(owner_name=''), ValueError, words='owner_name'),
    Case('owner-name-not-str', constructor(owner_name=7), TypeError, words='owner_name'),
    Case('heartbeat-period-int', constructor(heartbeat_period=5), TypeError, words='timedelta'),
    Case('heartbeat-period-zero', constructor(heartbeat_period=td(0)), ValueError, words='heartbeat_period'),
    Case('heartbeat-period-negative', constructor(heartbeat_period=td(seconds=-1)), ValueError,
         words='heartbeat_period'),
    Case('safe-period-zero', constructor(safe_period=td(0)), ValueError, words='safe_period'),
    Case('lease-zero', constructor(lease_duration=td(0)), ValueError, words='lease_duration'),
    Case('lease-float', constructor(lease_duration=3.0), TypeError, words='timedelta'),
    Case('expiry-zero', constructor(expiry_period=td(0)), ValueError, words='expiry_period'),
    Case('heartbeat-not-shorter-than-lease', constructor(heartbeat_period=LEASE), ValueError,
         words='shorter than lease_duration'),
    Case('expiry-shorter-than-lease', constructor(expiry_period=td(seconds=2)), ValueError,
         words='expiry_period'),
    Case('heartbeat-tps-zero', constructor(heartbeat_tps=0), ValueError, words='heartbeat_tps'),
    Case('heartbeat-tps-negative', constructor(heartbeat_tps=-5), ValueError, words='heartbeat_tps'),
    Case('heartbeat-tps-str', constructor(heartbeat_tps='fast'), TypeError, words='heartbeat_tps'),
    Case('heartbeat-tps-bool', constructor(heartbeat_tps=True), TypeError, words='heartbeat_tps'),
    Case('callback-executor-not-executor', constructor(app_callback_executor=object()), TypeError,
         words='Executor'),
    # -- unsafe but workable periods: a warning, and a working client ----------------------
    Case('safe-period-not-shorter-than-lease', constructor(safe_period=LEASE), warning=True,
         words='safe_period .* not shorter than lease_duration'),
    Case('safe-period-not-longer-than-heartbeat', constructor(safe_period=HEARTBEAT), warning=True,
         words='safe_period .* not longer than heartbeat_period'),
    Case('heartbeat-above-a-third-of-lease', constructor(heartbeat_period=td(seconds=1.5)), warning=True,
         words='heartbeat_period .* not well below lease_duration'),
    # -- acquire_lock / try_acquire_lock -------------------------------------------------
    Case('key-none', acquire(None), TypeError, words='partition_key'),
    Case('key-int', acquire(42), TypeError, words='partition_key'),
    Case('key-bytes', acquire(b'job'), TypeError, words='partition_key'),
    Case('key-empty', acquire(''), ValueError, words='partition_key'),
    Case('key-over-2048-bytes', acquire(TWO_BYTE * 1025), ValueError, words='2048'),
    Case('sort-key-empty', acquire('job', ''), ValueError, words='sort_key'),
    Case('sort-key-none', acquire('job', None), TypeError, words='sort_key'),
    Case('sort-key-over-1024-bytes', acquire('job', TWO_BYTE * 513), ValueError, words='1024'),
    Case('try-key-empty', try_acquire(''), ValueError, words='partition_key'),
    Case('try-sort-key-over-1024-bytes', try_acquire('job', 'x' * 1025), ValueError, words='1024'),
    Case('retry-period-negative', acquire('job', retry_period=td(seconds=-1)), ValueError, words='retry_period'),
    Case('retry-period-number', acquire('job', retry_period=0.5), TypeError, words='retry_period'),
    Case('retry-timeout-negative', acquire('job', retry_timeout=td(seconds=-1)), ValueError,
         words='retry_timeout'),
    Case('retry-timeout-number', acquire('job', retry_timeout=10), TypeError, words='retry_timeout'),
    Case('attributes-list', acquire('job', additional_attributes=[('a', 1)]), TypeError,
         words='additional_attributes'),
    Case('attributes-owner-name', acquire('job', additional_attributes={'owner_name': 'me'}), ValueError,
         words='owner_name'),
    Case('attributes-record-version', acquire('job', additional_attributes={'record_version_number': 'x'}),
         ValueError, words='record_version_number'),
    Case('attributes-lease', acquire('job', additional_attributes={'lease_duration': Decimal(1)}), ValueError,
         words='lease_duration'),
    Case('attributes-partition-key', acquire('job', additional_attributes={'lock_key': 'other'}), ValueError,
         words='lock_key'),
    Case('attributes-sort-key', acquire('job', additional_attributes={'sort_key': 'other'}), ValueError,
         words='sort_key'),
    Case('attributes-ttl', acquire('job', additional_attributes={'expiry_time': 1}), ValueError,
         words='expiry_time'),
    Case('attributes-float', acquire('job', additional_attributes={'ratio': 0.5}), TypeError, words='[Ff]loat'),
    Case('attributes-object', acquire('job', additional_attributes={'thing': object()}), TypeError,
         words='additional_attributes'),
    Case('attributes-empty-name', acquire('job', additional_attributes={'': 'x'}), ValueError,
         words='additional_attributes'),
    Case('attributes-name-not-str', acquire('job', additional_attributes={1: 'x'}), TypeError,
         words='additional_attributes'),
    Case('attributes-over-400-kb', acquire('job', additional_attributes={'blob': 'x' * 410_000}),
         DynamoDBLockError, code='UNKNOWN', words='size'),
    Case('callback-not-callable', acquire('job', app_callback='print'), TypeError, words='app_callback'),
    Case('try-callback-not-callable', try_acquire('job', app_callback=42), TypeError, words='app_callback'),
    # -- release, force release, get -----------------------------------------------------
    Case('release-none', lambda context, _: context.client().release_lock(None), TypeError, words='DynamoDBLock'),
    Case('release-a-description',
         lambda context, _: context.client().release_lock(context.client().get_lock('held')), TypeError,
         words='DynamoDBLock'),
    Case('release-another-clients-lock-strictly',
         lambda context, lock: context.client().release_lock(lock, best_effort=False),
         DynamoDBLockError, code='LOCK_NOT_OWNED', words='not held by this client', prepare=Context.held_lock),
    Case('release-another-clients-lock-best-effort',
         lambda context, lock: context.client().release_lock(lock), warning=True,
         words='acquired through another lock client', prepare=Context.held_lock),
    Case('force-release-a-key', lambda context, _: context.client().force_release_lock('held'), TypeError,
         words='BaseDynamoDBLock'),
    Case('get-lock-key-empty', lambda context, _: context.client().get_lock(''), ValueError,
         words='partition_key'),
    # -- the table -----------------------------------------------------------------------
    Case('missing-table-acquire', on_table('missing', 'acquire'), DynamoDBLockError, code='UNKNOWN',
         words=r'does not exist: create it with DynamoDBLockClient\.create_dynamodb_table'),
    Case('missing-table-try-acquire', on_table('missing', 'try_acquire'), DynamoDBLockError, code='UNKNOWN',
         words='does not exist'),
    Case('missing-table-get-lock', on_table('missing', 'get_lock'), DynamoDBLockError, code='UNKNOWN',
         words='does not exist'),
    Case('missing-table-list-locks', on_table('missing', 'list_locks'), DynamoDBLockError, code='UNKNOWN',
         words='does not exist'),
    Case('wrong-key-schema-acquire', on_table('wrong', 'acquire'), DynamoDBLockError, code='UNKNOWN',
         words='expected key schema'),
    Case('wrong-key-schema-get-lock', on_table('wrong', 'get_lock'), DynamoDBLockError, code='UNKNOWN',
         words='expected key schema'),
    Case('number-sort-key-acquire', on_table('numsort', 'acquire'), DynamoDBLockError, code='UNKNOWN',
         words='expected key schema'),
    Case('create-table-over-wrong-schema',
         lambda context, _: context.create_table(
             table_name=context.wrong_schema_table, exist_ok=True),
         DynamoDBLockError, code='UNKNOWN', words='already exists with key schema'),
    Case('create-table-that-exists',
         lambda context, _: context.create_table(table_name=context.table_name),
         DynamoDBLockError, code='UNKNOWN', words='exist_ok'),
    Case('create-table-bad-billing-mode',
         lambda context, _: context.create_table(
             table_name=f'{context.table_name}-new', billing_mode='FREE'),
         ValueError, words='billing_mode'),
    Case('create-table-zero-capacity',
         lambda context, _: context.create_table(
             table_name=f'{context.table_name}-new', read_capacity=0),
         ValueError, words='read_capacity'),
    # -- a closed client -----------------------------------------------------------------
    Case('closed-client-acquire', closed_client_call('acquire'), DynamoDBLockError, code='CLIENT_SHUTDOWN',
         words='closed'),
    Case('closed-client-try-acquire', closed_client_call('try_acquire'), DynamoDBLockError,
         code='CLIENT_SHUTDOWN', words='closed'),
]


@pytest.fixture
def context(dynamodb_local: Any, local_engine: Any, client_kind: str) -> Iterator[Context]:
    context = Context(dynamodb_local, local_engine, client_kind)
    try:
        yield context
    finally:
        context.close()


def test_the_cases_have_distinct_names() -> None:
    assert len({case.id for case in CASES}) == len(CASES)


@pytest.mark.parametrize('case', CASES, ids=[case.id for case in CASES])
def test_bad_input_is_refused_and_changes_nothing(
    case: Case, context: Context, caplog: pytest.LogCaptureFixture,
) -> None:
    prepared = case.prepare(context)
    before = context.snapshot()
    caplog.set_level(logging.WARNING, logger='python_dynamodb_lock')
    if case.warning:
        case.action(context, prepared)
        warnings = [record.getMessage() for record in caplog.records if record.levelno == logging.WARNING]
        assert any(re.search(case.words_for(context.kind), message) for message in warnings), warnings
    else:
        assert case.error is not None
        with pytest.raises(case.error) as raised:
            case.action(context, prepared)
        if case.code is not None:
            assert raised.value.code == case.code
        assert re.search(case.words_for(context.kind), str(raised.value)), str(raised.value)
    assert context.snapshot() == before
    assert not [record for record in caplog.records if record.levelno >= logging.ERROR]


def held_keys(context: Context) -> List[str]:
    """The keys of the rows that hold a lock (a released row, kept for its token, holds none)."""
    return sorted(row['lock_key'] for row in scan_table(context.reader, context.table_name)
                  if 'released_at' not in row)


def test_boundary_keys_are_accepted(context: Context) -> None:
    """The limits are DynamoDB's: keys of exactly 2048 and 1024 UTF-8 bytes work."""
    client = context.client()
    lock = client.acquire_lock(TWO_BYTE * 1024, TWO_BYTE * 512, retry_timeout=td(0))
    assert client.get_lock(TWO_BYTE * 1024, TWO_BYTE * 512).record_version_number == lock.record_version_number
    lock.release(best_effort=False)
    assert held_keys(context) == ['held']
    kept = [row for row in scan_table(context.reader, context.table_name) if row['lock_key'] != 'held']
    assert [(row['lock_key'], row['fencing_token']) for row in kept] == [(TWO_BYTE * 1024, lock.fencing_token)]


def remove_the_row(context: Context, holder: DynamoDBLockClient, key: str) -> None:
    """An operator force-releases the holder's lock. The holder renews every HEARTBEAT, and a
    renewal between the operator's read and its delete makes the delete refuse (as it must):
    the operator reads and tries again, as a person would."""
    operator = context.client()
    wait_until(lambda: operator.force_release_lock(holder.get_lock(key)), timeout=LEASE.total_seconds())


def test_a_raising_callback_is_logged_and_changes_nothing_else(
    context: Context, caplog: pytest.LogCaptureFixture,
) -> None:
    """A callback that raises: the error is logged with its traceback; the threads live on."""
    client = context.client()
    callbacks = CallbackRecorder(raise_on=[DynamoDBLockError.LOCK_STOLEN])
    lock = client.acquire_lock('job', app_callback=callbacks)
    # An operator removes the row and another process takes the lock: the next heartbeat sees it.
    remove_the_row(context, client, 'job')
    thief = context.client(heartbeat_period=td(seconds=300), safe_period=td(seconds=400),
                           lease_duration=td(seconds=900))
    thief_lock = thief.acquire_lock('job', retry_timeout=td(0))
    wait_until(lambda: DynamoDBLockError.LOCK_STOLEN in callbacks.codes, timeout=LEASE.total_seconds())
    wait_until(lambda: any('raised' in record.getMessage() and record.exc_info
                           for record in caplog.records if record.levelno >= logging.ERROR), timeout=2.0)
    assert lock.status == DynamoDBLock.INVALID
    assert context.live_senders() >= 2
    # The client still works, and the thief's row was left alone.
    other = client.acquire_lock('other', retry_timeout=td(0))
    other.release(best_effort=False)
    assert client.get_lock('job').record_version_number == thief_lock.record_version_number


def test_a_closed_client_still_releases_and_closes_twice(context: Context) -> None:
    """After close(): acquiring fails (table above), releasing works, a second close is a no-op."""
    client = context.client()
    lock = client.acquire_lock('job', retry_timeout=td(0))
    client.close()
    client.close()
    lock.release(best_effort=False)
    assert lock.status == DynamoDBLock.RELEASED
    assert held_keys(context) == ['held']
    assert isinstance(context.client().get_lock('held'), BaseDynamoDBLock)


def test_a_callback_executor_that_refuses_work_is_logged(
    context: Context, caplog: pytest.LogCaptureFixture,
) -> None:
    """An app_callback_executor shut down by the application: the refusal is logged, nothing dies."""
    executor = concurrent.futures.ThreadPoolExecutor(max_workers=1)
    executor.shutdown()
    client = context.client(app_callback_executor=executor)
    callbacks = CallbackRecorder()
    lock = client.acquire_lock('job', app_callback=callbacks)
    remove_the_row(context, client, 'job')
    wait_until(lambda: lock.status == DynamoDBLock.INVALID, timeout=LEASE.total_seconds())
    wait_until(lambda: any('submit' in record.getMessage() for record in caplog.records
                           if record.levelno >= logging.ERROR), timeout=2.0)
    assert callbacks.codes == []
    assert context.live_senders() >= 1
    client.acquire_lock('other', retry_timeout=td(0)).release(best_effort=False)
