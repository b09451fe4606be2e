"""Tables without a sort key, and number or binary partition keys, end to end.

Each layout is created with ``create_dynamodb_table(sort_key_name=..., partition_key_type=...)``
on moto and on DynamoDB Local, and used by both kinds of client: acquire, release, takeover of
an abandoned row, a stolen lock, ``get_lock``, ``list_locks`` and ``force_release_lock``.
``for_table`` reads each layout back; keys of the wrong type are refused before any call; a
client told the wrong layout is refused by DynamoDB without a write. The command line's
``--no-sort-key`` and ``--partition-key-type`` are run in-process on DynamoDB Local.
"""
from __future__ import annotations

import asyncio
import base64
import datetime
import json
import logging
from decimal import Decimal
from typing import Any, Dict, Iterator, List, Tuple

import pytest
from helpers import ASYNCIO, CallRecorder, FaultInjector, LockClients, offline_resource

from python_dynamodb_lock import Reason
from python_dynamodb_lock.aio import AsyncDynamoDBLockClient
from python_dynamodb_lock.python_dynamodb_lock import (
    BaseDynamoDBLock,
    DynamoDBLock,
    DynamoDBLockClient,
    DynamoDBLockError,
)
from python_dynamodb_lock.testing import LockTable, lock_table, moto_lock_table, unique_table_name

seconds = datetime.timedelta

#: layout id -> (create_dynamodb_table arguments, two keys of the layout's type)
LAYOUTS: Dict[str, Tuple[Dict[str, Any], Tuple[Any, Any]]] = {
    'string-hash-only': ({'sort_key_name': None}, ('alpha', 'beta/2')),
    'number-with-sort-key': ({'partition_key_type': 'N'}, (42, Decimal('-7.25'))),
    'number-hash-only': ({'sort_key_name': None, 'partition_key_type': 'N'}, (0, 10 ** 20)),
    'binary-hash-only': ({'sort_key_name': None, 'partition_key_type': 'B'}, (b'\x00\xff', b'key \xe2\x82\xac')),
    'binary-custom-names': ({'partition_key_type': 'B', 'partition_key_name': 'pk', 'sort_key_name': 'sk',
                             'ttl_attribute_name': 'ttl'}, (b'\x01', b'\x02' * 300)),
}


@pytest.fixture(params=list(LAYOUTS))
def layout(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(params=['moto', pytest.param('local', marks=pytest.mark.local)])
def table(request: pytest.FixtureRequest, layout: str, client_kind: str) -> Iterator[LockTable]:
    """A lock table of the test's layout, on moto (the moto server for the asyncio client) or
    on DynamoDB Local."""
    create_kwargs = LAYOUTS[layout][0]
    name = unique_table_name(request.node.name)
    if request.param == 'local':
        with lock_table(request.getfixturevalue('dynamodb_local'), name, **create_kwargs) as made:
            yield made
    elif client_kind == ASYNCIO:
        with lock_table(request.getfixturevalue('moto_server'), name, **create_kwargs) as made:
            yield made
    else:
        with moto_lock_table(name, **create_kwargs) as made:
            yield made


@pytest.fixture
def layout_clients(table: LockTable, client_kind: str) -> Iterator[LockClients]:
    factory = LockClients(table, kind=client_kind)
    try:
        yield factory
    finally:
        factory.close_all()


def make(clients: LockClients, table: LockTable, **kwargs: Any) -> Any:
    """A hand-driven client told the table's layout."""
    for name in ('partition_key_name', 'sort_key_name', 'ttl_attribute_name', 'partition_key_type'):
        kwargs.setdefault(name, getattr(table, name))
    return clients.make(**kwargs)


def keys_of(layout: str) -> Tuple[Any, Any]:
    return LAYOUTS[layout][1]


def stored_key_type(table: LockTable, key: Any) -> Dict[str, str]:
    """The attribute types of the row's key, as DynamoDB stores them."""
    typed = table.read_typed_item(key)
    assert typed is not None
    names = [table.partition_key_name] + ([table.sort_key_name] if table.sort_key_name else [])
    return {name: next(iter(typed[name])) for name in names if name in typed}


def same_key(read: Any, given: Any) -> bool:
    if isinstance(given, (bytes, bytearray)):
        return isinstance(read, bytes) and read == given
    return read == given


# --------------------------------------------------------------------------------------------
# The lock's life on every layout
# --------------------------------------------------------------------------------------------

def test_acquire_get_list_release(table: LockTable, layout_clients: LockClients, layout: str) -> None:
    first, second = keys_of(layout)
    client = make(layout_clients, table, owner_name='me')
    lock = client.acquire_lock(first, additional_attributes={'purpose': 'layout'})
    other = client.acquire_lock(second)
    assert lock.status == DynamoDBLock.LOCKED and lock.fencing_token is not None

    expected = {table.partition_key_name: table.partition_key_type}
    if table.sort_key_name is not None:
        expected[table.sort_key_name] = 'S'
    assert stored_key_type(table, first) == expected
    row = table.read_item(first)
    assert row is not None and row['owner_name'] == 'me' and row['purpose'] == 'layout'
    if table.sort_key_name is None:
        assert 'sort_key' not in row and '-' not in row.values()

    described = client.get_lock(first)
    assert isinstance(described, BaseDynamoDBLock)
    assert same_key(described.partition_key, first) and described.sort_key == '-'
    assert described.unique_identifier == lock.unique_identifier
    assert described.additional_attributes == {'purpose': 'layout'}
    assert described.fencing_token == lock.fencing_token

    listed = {held.unique_identifier: held for held in client.list_locks()}
    assert set(listed) == {lock.unique_identifier, other.unique_identifier}
    assert all(same_key(listed[held.unique_identifier].partition_key, key)
               for held, key in ((lock, first), (other, second)))

    lock.release()
    other.release()
    assert table.read_held_row(first) is None and table.read_held_row(second) is None
    assert client.get_lock(first) is None
    assert list(client.list_locks()) == []
    again = make(layout_clients, table, owner_name='next').acquire_lock(first)
    assert again.fencing_token > lock.fencing_token
    again.release()


def test_an_abandoned_lock_is_taken_over(table: LockTable, layout_clients: LockClients, layout: str) -> None:
    key = keys_of(layout)[0]
    clock = layout_clients.clock
    dead = table.put_lock_row(key, owner_name='dead-process', lease_duration=10, fencing_token=7)
    client = make(layout_clients, table)
    with clock.auto_advance_in_current_thread():
        lock = client.acquire_lock(key, retry_period=seconds(seconds=2), retry_timeout=seconds(seconds=60))
    assert lock.took_over_from is not None
    assert lock.took_over_from.owner_name == 'dead-process'
    assert lock.took_over_from.record_version_number == dead['record_version_number']
    assert same_key(lock.took_over_from.partition_key, key)
    assert lock.fencing_token == 8
    assert table.read_item(key)['owner_name'] == client.owner_name
    lock.release()


def test_a_stolen_lock_is_noticed_at_the_next_heartbeat(table: LockTable, layout_clients: LockClients,
                                                        layout: str) -> None:
    key = keys_of(layout)[0]
    client = make(layout_clients, table)
    lock = client.acquire_lock(key)
    client.send_heartbeats()
    assert lock.status == DynamoDBLock.LOCKED
    table.steal_row(key, owner_name='the-thief')
    client.send_heartbeats()
    assert lock.status == DynamoDBLock.INVALID
    assert lock.lost_to is not None and lock.lost_to.owner_name == 'the-thief'
    assert same_key(lock.lost_to.partition_key, key)
    with pytest.raises(DynamoDBLockError) as stolen:
        lock.release(best_effort=False)
    assert stolen.value.code == DynamoDBLockError.LOCK_STOLEN
    assert table.read_item(key)['owner_name'] == 'the-thief'


def test_force_release_by_an_operator(table: LockTable, layout_clients: LockClients, layout: str) -> None:
    key = keys_of(layout)[1]
    holder = make(layout_clients, table, owner_name='holder')
    operator = make(layout_clients, table, owner_name='operator')
    lock = holder.acquire_lock(key)
    seen = operator.get_lock(key)
    assert seen is not None and seen.owner_name == 'holder'
    holder.send_heartbeats()                  # the version the operator saw is gone
    assert operator.force_release_lock(seen) is False
    seen = operator.get_lock(key)
    assert operator.force_release_lock(seen) is True
    assert table.read_held_row(key) is None
    holder.send_heartbeats()
    assert lock.status == DynamoDBLock.INVALID and lock.loss_reason == Reason.ROW_GONE
    assert operator.try_acquire_lock(key) is not None


def test_a_held_lock_is_waited_for_and_a_release_hands_it_over(table: LockTable, layout_clients: LockClients,
                                                               layout: str) -> None:
    key = keys_of(layout)[0]
    clock = layout_clients.clock
    first = make(layout_clients, table, owner_name='first')
    second = make(layout_clients, table, owner_name='second')
    lock = first.acquire_lock(key)
    assert second.try_acquire_lock(key) is None
    with pytest.raises(DynamoDBLockError) as timed_out:
        with clock.auto_advance_in_current_thread():
            second.acquire_lock(key, retry_period=seconds(seconds=1), retry_timeout=seconds(seconds=3))
    assert timed_out.value.code == DynamoDBLockError.ACQUIRE_TIMEOUT
    assert timed_out.value.holder.owner_name == 'first'
    assert same_key(timed_out.value.holder.partition_key, key)
    lock.release()
    taken = second.try_acquire_lock(key)
    assert taken is not None and taken.fencing_token > lock.fencing_token


@pytest.mark.threaded_only   # the blocking facade of the asyncio client takes no reentrant=
def test_a_reentrant_acquisition_on_a_typed_key(table: LockTable, layout_clients: LockClients,
                                                layout: str) -> None:
    key = keys_of(layout)[1]
    client = make(layout_clients, table)
    outer = client.acquire_lock(key, reentrant=True)
    inner = client.acquire_lock(key, reentrant=True)
    assert inner.unique_identifier == outer.unique_identifier
    assert inner.record_version_number == outer.record_version_number
    inner.release()
    assert table.read_held_row(key) is not None
    outer.release()
    assert table.read_held_row(key) is None


# --------------------------------------------------------------------------------------------
# Keys of the wrong type: refused before any call
# --------------------------------------------------------------------------------------------

WRONG_KEYS = [
    ('S', 'sort_key', 5, TypeError, "partition_key_type='N'"),
    ('S', 'sort_key', b'bytes', TypeError, 'must be a str'),
    ('N', 'sort_key', '42', TypeError, 'number partition key'),
    ('N', 'sort_key', 4.2, TypeError, 'number partition key'),
    ('N', 'sort_key', True, TypeError, 'number partition key'),
    ('N', 'sort_key', Decimal('NaN'), ValueError, 'NaN'),
    ('N', 'sort_key', 10 ** 40, ValueError, 'digits'),
    ('B', 'sort_key', 'text', TypeError, 'binary partition key'),
    ('B', 'sort_key', b'', ValueError, '1 to 2048 bytes'),
    ('B', 'sort_key', b'x' * 2049, ValueError, '1 to 2048 bytes'),
]


@pytest.mark.parametrize('key_type, sort_key_name, key, error, words', WRONG_KEYS,
                         ids=[f'{case[0]}-{case[2]!r:.20}' for case in WRONG_KEYS])
@pytest.mark.parametrize('operation', ['acquire_lock', 'try_acquire_lock', 'get_lock'])
def test_a_key_of_the_wrong_type_is_refused_before_any_call(key_type: str, sort_key_name: str, key: Any,
                                                            error: type, words: str, operation: str) -> None:
    resource = offline_resource()
    with CallRecorder(resource) as calls:
        client = DynamoDBLockClient(resource, sort_key_name=sort_key_name, partition_key_type=key_type,
                                    background_heartbeats=False)
        with pytest.raises(error) as refused:
            getattr(client, operation)(key)
        client.close()
    assert words in str(refused.value)
    assert calls.calls == []


@pytest.mark.parametrize('operation', ['acquire_lock', 'try_acquire_lock', 'get_lock'])
def test_a_sort_key_on_a_table_without_one_is_refused_before_any_call(operation: str) -> None:
    resource = offline_resource()
    with CallRecorder(resource) as calls:
        client = DynamoDBLockClient(resource, sort_key_name=None, background_heartbeats=False)
        with pytest.raises(ValueError, match='has no sort key'):
            getattr(client, operation)('key', 'part-2')
        client.close()
    assert calls.calls == []


def test_the_asyncio_client_refuses_a_key_of_the_wrong_type_before_any_call() -> None:
    class NoCalls:
        """Stands in for an aiobotocore client: any call fails the test."""

        def __getattr__(self, name: str) -> Any:
            raise AssertionError(f'{name} was called')

    async def scenario() -> None:
        from aiobotocore.session import get_session

        async with get_session().create_client('dynamodb', region_name='us-east-1', endpoint_url='http://127.0.0.1:9',
                                               aws_access_key_id='x', aws_secret_access_key='x') as dynamodb:
            client = AsyncDynamoDBLockClient(dynamodb, partition_key_type='N', sort_key_name=None,
                                             background_heartbeats=False)
            # private: replaced to prove no call is made
            client._store = NoCalls()  # type: ignore[assignment]
            with pytest.raises(TypeError, match='number partition key'):
                await client.acquire_lock('42')
            with pytest.raises(ValueError, match='has no sort key'):
                await client.get_lock(42, 'x')
            await client.close()

    asyncio.run(scenario())


def test_bad_layouts_are_refused_by_the_constructor_and_create_table() -> None:
    resource = offline_resource()
    with pytest.raises(ValueError, match='partition_key_type'):
        DynamoDBLockClient(resource, partition_key_type='SS', background_heartbeats=False)
    with pytest.raises(ValueError, match='partition_key_type'):
        DynamoDBLockClient.create_dynamodb_table(resource.meta.client, partition_key_type='X')
    with pytest.raises(ValueError, match='must differ'):
        DynamoDBLockClient.create_dynamodb_table(resource.meta.client, sort_key_name='expiry_time')


# --------------------------------------------------------------------------------------------
# A client told another layout than the table's
# --------------------------------------------------------------------------------------------

@pytest.mark.local
def test_a_client_told_the_wrong_layout_is_refused_without_a_write(dynamodb_local: Any) -> None:
    with lock_table(dynamodb_local, partition_key_type='N', sort_key_name=None) as table:
        wrong = DynamoDBLockClient(table.resource, table_name=table.table_name, background_heartbeats=False)
        with pytest.raises(DynamoDBLockError) as refused:
            wrong.acquire_lock('42')
        assert refused.value.reason == Reason.WRONG_KEY_SCHEMA
        assert 'expected key schema' in refused.value.message and 'for_table' in refused.value.message
        assert table.client.scan(TableName=table.table_name)['Items'] == []
        wrong.close()


# --------------------------------------------------------------------------------------------
# for_table
# --------------------------------------------------------------------------------------------

def test_for_table_reads_the_layout(table: LockTable, layout: str, client_kind: str) -> None:
    if client_kind == ASYNCIO:
        pytest.skip('the asyncio for_table has its own test on DynamoDB Local')
    client = DynamoDBLockClient.for_table(table.resource, table.table_name, owner_name='found',
                                          background_heartbeats=False)
    try:
        schema = client.table_layout
        assert (schema.partition_key_name, schema.sort_key_name, schema.ttl_attribute_name,
                schema.partition_key_type) == (table.partition_key_name, table.sort_key_name,
                                               table.ttl_attribute_name, table.partition_key_type)
        key = keys_of(layout)[0]
        lock = client.acquire_lock(key)
        assert table.read_item(key)['owner_name'] == 'found'
        lock.release()
    finally:
        client.close()


@pytest.mark.local
def test_the_asyncio_for_table_reads_the_layout(dynamodb_local: Any) -> None:
    with lock_table(dynamodb_local, partition_key_type='B', sort_key_name=None, partition_key_name='id',
                    ttl_attribute_name='gone_at') as table:
        async def scenario() -> None:
            async with table.new_async_client() as dynamodb:
                client = await AsyncDynamoDBLockClient.for_table(dynamodb, table.table_name,
                                                                 background_heartbeats=False)
                schema = client.table_layout
                assert (schema.partition_key_name, schema.sort_key_name, schema.ttl_attribute_name,
                        schema.partition_key_type) == ('id', None, 'gone_at', 'B')
                lock = await client.acquire_lock(b'\x07')
                listed = [held async for held in client.list_locks()]
                assert [held.partition_key for held in listed] == [b'\x07']
                await lock.release()
                with pytest.raises(DynamoDBLockError) as missing:
                    await AsyncDynamoDBLockClient.for_table(dynamodb, 'no-such-table')
                assert missing.value.reason == Reason.TABLE_NOT_FOUND
                with pytest.raises(TypeError, match='sort_key_name'):
                    await AsyncDynamoDBLockClient.for_table(dynamodb, table.table_name, sort_key_name='x')
                await client.close()

        asyncio.run(scenario())


def create_raw_table(client: Any, name: str, keys: List[Tuple[str, str, str]]) -> None:
    """A table made without the library: ``keys`` are (name, type, HASH|RANGE)."""
    client.create_table(TableName=name, BillingMode='PAY_PER_REQUEST',
                        KeySchema=[{'AttributeName': key, 'KeyType': kind} for key, _, kind in keys],
                        AttributeDefinitions=[{'AttributeName': key, 'AttributeType': type_}
                                              for key, type_, _ in keys])
    client.get_waiter('table_exists').wait(TableName=name)


@pytest.fixture
def moto_tables() -> Iterator[Any]:
    with moto_lock_table() as existing:
        yield existing


@pytest.mark.parametrize('keys, words', [
    ([('lock_key', 'S', 'HASH'), ('sort_key', 'N', 'RANGE')], 'string RANGE key or none'),
    ([('lock_key', 'S', 'HASH'), ('sort_key', 'B', 'RANGE')], 'string RANGE key or none'),
    ([('owner_name', 'S', 'HASH')], "'owner_name' is the name of one of the lock's own attributes"),
    ([('id', 'N', 'HASH'), ('record_version_number', 'S', 'RANGE')], 'record_version_number'),
    ([('expiry_time', 'N', 'HASH')], "TTL attribute 'expiry_time' is a key attribute"),
], ids=['number-sort-key', 'binary-sort-key', 'key-named-owner_name', 'sort-key-named-version', 'key-is-ttl'])
def test_for_table_refuses_a_table_that_cannot_hold_locks(moto_tables: LockTable, keys: List[Tuple[str, str, str]],
                                                          words: str) -> None:
    name = unique_table_name('unfit')
    create_raw_table(moto_tables.client, name, keys)
    with pytest.raises(DynamoDBLockError) as refused:
        DynamoDBLockClient.for_table(moto_tables.resource, name)
    assert refused.value.code == DynamoDBLockError.UNKNOWN
    assert refused.value.reason == Reason.WRONG_KEY_SCHEMA
    assert words in refused.value.message and name in refused.value.message


def test_for_table_on_a_table_without_ttl_uses_the_default_and_warns(moto_tables: LockTable,
                                                                     caplog: pytest.LogCaptureFixture) -> None:
    name = unique_table_name('no-ttl')
    create_raw_table(moto_tables.client, name, [('job', 'N', 'HASH')])
    with caplog.at_level(logging.WARNING):
        client = DynamoDBLockClient.for_table(moto_tables.resource, name, background_heartbeats=False)
    assert client.table_layout.ttl_attribute_name == 'expiry_time'
    assert (client.table_layout.partition_key_name, client.table_layout.sort_key_name) == ('job', None)
    assert any('no time-to-live' in record.getMessage() for record in caplog.records)
    lock = client.acquire_lock(12)
    lock.release()
    client.close()


def test_for_table_with_another_ttl_attribute_warns(moto_tables: LockTable, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        client = DynamoDBLockClient.for_table(moto_tables.resource, moto_tables.table_name,
                                              ttl_attribute_name='other_ttl', background_heartbeats=False)
    assert client.table_layout.ttl_attribute_name == 'other_ttl'
    assert any("time-to-live on 'expiry_time'" in record.getMessage() for record in caplog.records)
    client.close()


@pytest.mark.parametrize('given', [None, 'other_ttl'])
def test_for_table_goes_on_when_the_ttl_setting_cannot_be_read(moto_tables: LockTable, given: Any,
                                                               caplog: pytest.LogCaptureFixture) -> None:
    """DescribeTimeToLive refused (an IAM policy without dynamodb:DescribeTimeToLive): the
    client uses the TTL attribute it was given, else the default, and says which."""
    arguments = {} if given is None else {'ttl_attribute_name': given}
    with FaultInjector(moto_tables.resource) as faults, caplog.at_level(logging.WARNING):
        refused = faults.fail_calls('DescribeTimeToLive', code='AccessDeniedException')
        client = DynamoDBLockClient.for_table(moto_tables.resource, moto_tables.table_name,
                                              background_heartbeats=False, **arguments)
    assert refused.hits == 1
    expected = given or 'expiry_time'
    assert client.table_layout.ttl_attribute_name == expected
    assert (client.table_layout.partition_key_name, client.table_layout.sort_key_name) == ('lock_key', 'sort_key')
    assert any(record.getMessage().startswith(f'Could not read the time-to-live setting of table '
                                              f'{moto_tables.table_name}') and repr(expected) in record.getMessage()
               for record in caplog.records)
    client.acquire_lock('ttl-unknown').release()
    client.close()


def test_for_table_errors(moto_tables: LockTable) -> None:
    with pytest.raises(DynamoDBLockError) as missing:
        DynamoDBLockClient.for_table(moto_tables.resource, 'no-such-table')
    assert missing.value.reason == Reason.TABLE_NOT_FOUND and 'does not exist' in missing.value.message
    with pytest.raises(TypeError, match='partition_key_name, partition_key_type'):
        DynamoDBLockClient.for_table(moto_tables.resource, moto_tables.table_name, partition_key_type='N',
                                     partition_key_name='x')
    with pytest.raises(TypeError, match='boto3 DynamoDB resource'):
        DynamoDBLockClient.for_table(object(), moto_tables.table_name)
    with pytest.raises(TypeError, match='table_name'):
        DynamoDBLockClient.for_table(moto_tables.resource, '')
    with pytest.raises(ValueError, match='heartbeat_period'):   # the constructor's own checks
        DynamoDBLockClient.for_table(moto_tables.resource, moto_tables.table_name,
                                     heartbeat_period=seconds(seconds=60))


# --------------------------------------------------------------------------------------------
# create_dynamodb_table
# --------------------------------------------------------------------------------------------

def test_create_table_with_exist_ok_compares_the_layout(moto_tables: LockTable) -> None:
    client = moto_tables.client
    name = unique_table_name('layout')
    created = DynamoDBLockClient.create_dynamodb_table(client, name, sort_key_name=None, partition_key_type='B',
                                                      billing_mode='PAY_PER_REQUEST')
    assert created['KeySchema'] == [{'AttributeName': 'lock_key', 'KeyType': 'HASH'}]
    assert created['AttributeDefinitions'] == [{'AttributeName': 'lock_key', 'AttributeType': 'B'}]
    ttl = client.describe_time_to_live(TableName=name)['TimeToLiveDescription']
    assert ttl['TimeToLiveStatus'] == 'ENABLED' and ttl['AttributeName'] == 'expiry_time'
    DynamoDBLockClient.create_dynamodb_table(client, name, sort_key_name=None, partition_key_type='B',
                                             exist_ok=True)
    for other in ({'sort_key_name': None}, {'partition_key_type': 'B'}):
        with pytest.raises(DynamoDBLockError) as refused:
            DynamoDBLockClient.create_dynamodb_table(client, name, exist_ok=True, **other)
        assert refused.value.reason == Reason.WRONG_KEY_SCHEMA
        assert 'binary HASH key' in refused.value.message and 'already exists with key schema' in refused.value.message


@pytest.mark.local
def test_the_asyncio_create_table_makes_a_hash_only_number_table(dynamodb_local: Any) -> None:
    name = unique_table_name('aio-layout')

    async def scenario() -> Dict[str, Any]:
        with lock_table(dynamodb_local) as table:
            async with table.new_async_client() as dynamodb:
                try:
                    return await AsyncDynamoDBLockClient.create_dynamodb_table(
                        dynamodb, name, sort_key_name=None, partition_key_type='N', billing_mode='PAY_PER_REQUEST')
                finally:
                    await dynamodb.delete_table(TableName=name)

    description = asyncio.run(scenario())
    assert description['KeySchema'] == [{'AttributeName': 'lock_key', 'KeyType': 'HASH'}]
    assert description['AttributeDefinitions'] == [{'AttributeName': 'lock_key', 'AttributeType': 'N'}]


# --------------------------------------------------------------------------------------------
# The command line
# --------------------------------------------------------------------------------------------

@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str], aws_env: None, dynamodb_local: Any) -> Any:
    from python_dynamodb_lock.__main__ import main

    def run(*argv: str) -> Tuple[int, str, str]:
        capsys.readouterr()
        code = main(['--endpoint-url', dynamodb_local.endpoint_url, '--region', 'us-east-1', *argv])
        captured = capsys.readouterr()
        return code, captured.out, captured.err

    return run


@pytest.mark.parametrize('options, key, schema', [
    (['--no-sort-key'], 'plain', [('lock_key', 'S')]),
    (["--sort-key-name", ''], 'plain', [('lock_key', 'S')]),
    (['--partition-key-type', 'N'], '42', [('lock_key', 'N'), ('sort_key', 'S')]),
    (['--no-sort-key', '--partition-key-type', 'B'], base64.b64encode(b'\x00\xff').decode(), [('lock_key', 'B')]),
], ids=['no-sort-key', 'empty-sort-key-name', 'number', 'binary-hash-only'])
def test_the_command_line_on_every_layout(cli: Any, dynamodb_local: Any, options: List[str], key: str,
                                          schema: List[Tuple[str, str]]) -> None:
    name = unique_table_name('cli-layout')
    with lock_table(dynamodb_local) as scratch:
        try:
            code, out, err = cli('--table', name, *options, 'create-table', '--billing-mode', 'PAY_PER_REQUEST')
            assert code == 0, err
            kinds = dict(schema)
            described = scratch.client.describe_table(TableName=name)['Table']
            assert [(k['AttributeName'], kinds[k['AttributeName']]) for k in described['KeySchema']] == schema
            assert {d['AttributeName']: d['AttributeType'] for d in described['AttributeDefinitions']} == kinds
            assert f"({kinds['lock_key']})" in out

            sort_key_name = 'sort_key' if len(schema) == 2 else None
            holder = DynamoDBLockClient.for_table(scratch.resource, name, owner_name='the-holder',
                                                  background_heartbeats=False)
            typed_key: Any = {'S': lambda: key, 'N': lambda: Decimal(key),
                              'B': lambda: base64.b64decode(key)}[kinds['lock_key']]()
            assert holder.table_layout.sort_key_name == sort_key_name
            lock = holder.acquire_lock(typed_key)

            code, out, err = cli('--table', name, *options, 'list', '--json')
            assert code == 0, err
            records = json.loads(out)
            assert [(str(record['partition_key']), record['owner_name']) for record in records] == [
                (key, 'the-holder')]
            code, out, err = cli('--table', name, *options, 'show', key)
            assert code == 0, err
            assert 'the-holder' in out and key in out
            code, out, err = cli('--table', name, *options, 'release', key, '--force', '--yes')
            assert code == 0, err
            holder.send_heartbeats()
            assert lock.status == DynamoDBLock.INVALID
            holder.close()
        finally:
            scratch.client.delete_table(TableName=name)


@pytest.mark.parametrize('argv, words', [
    (['--partition-key-type', 'N', 'show', 'abc'], 'not a number'),
    (['--partition-key-type', 'N', 'show', 'inf'], 'not a finite number'),
    (['--partition-key-type', 'B', 'show', '***'], 'not base64'),
    (['--partition-key-type', 'B', 'show', ''], 'KEY'),
    (['--no-sort-key', 'show', 'k', 'other'], 'has no sort key'),
    (['--no-sort-key', 'run', 'k', '--sort-key', 'other', '--', 'true'], 'has no sort key'),
    (['--partition-key-type', 'X', 'list'], 'invalid choice'),
    (['--no-sort-key', 'demo'], 'demo uses a table'),
], ids=['number', 'infinite', 'base64', 'empty-binary', 'sort-key', 'run-sort-key', 'type', 'demo'])
def test_command_line_usage_errors(argv: List[str], words: str, capsys: pytest.CaptureFixture[str],
                                   aws_env: None) -> None:
    from python_dynamodb_lock.__main__ import main

    code = main(['--endpoint-url', 'http://127.0.0.1:9', '--region', 'us-east-1', *argv])
    err = capsys.readouterr().err
    assert code == 2, err
    assert words in err and 'Traceback' not in err


def test_unique_identifiers_of_number_keys_match_what_dynamodb_returns() -> None:
    from python_dynamodb_lock._common.locks import unique_identifier_of

    assert unique_identifier_of(5, '-') == unique_identifier_of(Decimal('5.0'), '-') == '5|-'
    assert unique_identifier_of(500, '-') == unique_identifier_of(Decimal('5E+2'), '-') == '500|-'
    assert unique_identifier_of(Decimal('-0.50'), '-') == '-0.5|-'
    assert unique_identifier_of(b'\x00\xff', 'x') == '%00%FF|x'


@pytest.mark.local
@pytest.mark.parametrize('layout_id', ['binary-hash-only', 'number-hash-only', 'string-hash-only'])
def test_batched_heartbeats_on_every_layout(dynamodb_local: Any, layout_id: str) -> None:
    """PartiQL renewals (heartbeat_batch_size) name the table's own key attributes and types."""
    create_kwargs, keys = LAYOUTS[layout_id]
    with lock_table(dynamodb_local, **create_kwargs) as table:
        client = DynamoDBLockClient.for_table(table.resource, table.table_name, heartbeat_batch_size=10,
                                              background_heartbeats=False)
        locks = [client.acquire_lock(key) for key in keys]
        versions = [lock.record_version_number for lock in locks]
        with CallRecorder(table.resource) as calls:
            client.send_heartbeats()
        assert calls.operations() == ['BatchExecuteStatement']
        assert all(lock.status == DynamoDBLock.LOCKED for lock in locks)
        assert all(lock.record_version_number != version for lock, version in zip(locks, versions))
        table.steal_row(keys[0])
        client.send_heartbeats()
        assert [lock.status for lock in locks] == [DynamoDBLock.INVALID, DynamoDBLock.LOCKED]
        client.close()


@pytest.mark.local
def test_the_command_line_shows_fencing_tokens(cli: Any, dynamodb_local: Any) -> None:
    with lock_table(dynamodb_local) as table:
        holder = table.lock_client(owner_name='the-holder', background_heartbeats=False)
        lock = holder.acquire_lock('job')
        table.put_lock_row('published', fencing_token=None)
        code, out, err = cli('--table', table.table_name, 'list', '--json')
        assert code == 0, err
        tokens = {record['partition_key']: record['fencing_token'] for record in json.loads(out)}
        assert tokens == {'job': lock.fencing_token, 'published': None}
        code, out, err = cli('--table', table.table_name, 'show', 'job')
        assert code == 0, err
        assert f'fencing token:     {lock.fencing_token}' in out
