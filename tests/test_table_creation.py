"""DynamoDBLockClient.create_dynamodb_table: schema, TTL, billing modes, existing tables."""
from __future__ import annotations

import uuid
from typing import Any, Iterator, List

import pytest

from helpers import LockClients
from python_dynamodb_lock.python_dynamodb_lock import DynamoDBLockClient, DynamoDBLockError


@pytest.fixture
def new_tables(engine: Any) -> Iterator[List[str]]:
    """Names for tables a test creates; deleted afterwards."""
    names: List[str] = []
    yield names
    for name in names:
        try:
            engine.client.delete_table(TableName=name)
        except Exception:
            pass


def fresh_name(names: List[str]) -> str:
    name = f'created-{uuid.uuid4().hex[:12]}'
    names.append(name)
    return name


def key_schema(description: dict) -> dict:
    return {key['KeyType']: key['AttributeName'] for key in description['KeySchema']}


def attribute_types(description: dict) -> dict:
    return {item['AttributeName']: item['AttributeType'] for item in description['AttributeDefinitions']}


def test_creates_the_table_with_string_keys_and_ttl(engine: Any, new_tables: List[str]) -> None:
    name = fresh_name(new_tables)
    description = DynamoDBLockClient.create_dynamodb_table(engine.client, table_name=name)
    assert description['TableName'] == name
    assert description['TableStatus'] == 'ACTIVE'
    assert key_schema(description) == {'HASH': 'lock_key', 'RANGE': 'sort_key'}
    assert attribute_types(description) == {'lock_key': 'S', 'sort_key': 'S'}
    throughput = description['ProvisionedThroughput']
    assert (throughput['ReadCapacityUnits'], throughput['WriteCapacityUnits']) == (5, 5)
    ttl = engine.client.describe_time_to_live(TableName=name)['TimeToLiveDescription']
    assert ttl['TimeToLiveStatus'] in ('ENABLED', 'ENABLING')
    assert ttl['AttributeName'] == 'expiry_time'


def test_custom_names_and_capacities(engine: Any, new_tables: List[str]) -> None:
    name = fresh_name(new_tables)
    description = DynamoDBLockClient.create_dynamodb_table(
        engine.client, name, 'resource', 'part', 'expires_at', 7, 3)
    assert key_schema(description) == {'HASH': 'resource', 'RANGE': 'part'}
    throughput = description['ProvisionedThroughput']
    assert (throughput['ReadCapacityUnits'], throughput['WriteCapacityUnits']) == (7, 3)
    ttl = engine.client.describe_time_to_live(TableName=name)['TimeToLiveDescription']
    assert ttl['AttributeName'] == 'expires_at'


def test_pay_per_request(engine: Any, new_tables: List[str]) -> None:
    name = fresh_name(new_tables)
    DynamoDBLockClient.create_dynamodb_table(engine.client, table_name=name, billing_mode='PAY_PER_REQUEST')
    description = engine.client.describe_table(TableName=name)['Table']
    assert description.get('BillingModeSummary', {}).get('BillingMode') == 'PAY_PER_REQUEST'
    ttl = engine.client.describe_time_to_live(TableName=name)['TimeToLiveDescription']
    assert ttl['AttributeName'] == 'expiry_time'


def test_a_created_table_works_for_locks(engine: Any, new_tables: List[str]) -> None:
    name = fresh_name(new_tables)
    DynamoDBLockClient.create_dynamodb_table(engine.client, table_name=name)
    factory = LockClients(engine)
    try:
        client = factory.make(table_name=name)
        lock = client.acquire_lock('on-new-table')
        lock.release(best_effort=False)
    finally:
        factory.close_all()


def test_existing_table_is_an_error(engine: Any) -> None:
    with pytest.raises(DynamoDBLockError) as raised:
        DynamoDBLockClient.create_dynamodb_table(engine.client, table_name=engine.table_name)
    assert raised.value.code == DynamoDBLockError.UNKNOWN
    assert engine.table_name in raised.value.message
    assert 'exist' in raised.value.message


def test_existing_table_with_the_right_schema_is_fine_with_exist_ok(engine: Any) -> None:
    description = DynamoDBLockClient.create_dynamodb_table(engine.client, table_name=engine.table_name,
                                                           exist_ok=True)
    assert description['TableName'] == engine.table_name
    assert key_schema(description) == {'HASH': 'lock_key', 'RANGE': 'sort_key'}


def test_exist_ok_turns_ttl_on_for_a_table_made_without_it(engine: Any, new_tables: List[str]) -> None:
    name = fresh_name(new_tables)
    engine.client.create_table(
        TableName=name, BillingMode='PAY_PER_REQUEST',
        KeySchema=[{'AttributeName': 'lock_key', 'KeyType': 'HASH'}, {'AttributeName': 'sort_key', 'KeyType': 'RANGE'}],
        AttributeDefinitions=[{'AttributeName': 'lock_key', 'AttributeType': 'S'},
                              {'AttributeName': 'sort_key', 'AttributeType': 'S'}])
    engine.client.get_waiter('table_exists').wait(TableName=name)
    DynamoDBLockClient.create_dynamodb_table(engine.client, table_name=name, exist_ok=True)
    ttl = engine.client.describe_time_to_live(TableName=name)['TimeToLiveDescription']
    assert ttl['TimeToLiveStatus'] in ('ENABLED', 'ENABLING')
    assert ttl['AttributeName'] == 'expiry_time'


@pytest.mark.parametrize('schema', ['hash-only', 'other-names', 'number-keys'])
def test_existing_table_with_another_schema_is_a_clear_error(engine: Any, new_tables: List[str],
                                                              schema: str) -> None:
    name = fresh_name(new_tables)
    if schema == 'hash-only':
        keys = [{'AttributeName': 'lock_key', 'KeyType': 'HASH'}]
        definitions = [{'AttributeName': 'lock_key', 'AttributeType': 'S'}]
    elif schema == 'other-names':
        keys = [{'AttributeName': 'id', 'KeyType': 'HASH'}, {'AttributeName': 'sort_key', 'KeyType': 'RANGE'}]
        definitions = [{'AttributeName': 'id', 'AttributeType': 'S'},
                       {'AttributeName': 'sort_key', 'AttributeType': 'S'}]
    else:
        keys = [{'AttributeName': 'lock_key', 'KeyType': 'HASH'}, {'AttributeName': 'sort_key', 'KeyType': 'RANGE'}]
        definitions = [{'AttributeName': 'lock_key', 'AttributeType': 'N'},
                       {'AttributeName': 'sort_key', 'AttributeType': 'S'}]
    engine.client.create_table(TableName=name, KeySchema=keys, AttributeDefinitions=definitions,
                               BillingMode='PAY_PER_REQUEST')
    engine.client.get_waiter('table_exists').wait(TableName=name)
    for exist_ok in (True, False):
        with pytest.raises(DynamoDBLockError) as raised:
            DynamoDBLockClient.create_dynamodb_table(engine.client, table_name=name, exist_ok=exist_ok)
        message = raised.value.message
        assert name in message
        assert 'lock_key' in message and 'sort_key' in message


@pytest.mark.parametrize('arguments, error', [
    (dict(billing_mode='ON_DEMAND'), ValueError),
    (dict(read_capacity=0), ValueError),
    (dict(write_capacity=-1), ValueError),
    (dict(table_name=''), ValueError),
    (dict(partition_key_name=''), ValueError),
    (dict(ttl_attribute_name=None), TypeError),
])
def test_bad_arguments_create_nothing(engine: Any, new_tables: List[str], arguments: dict, error: type) -> None:
    arguments.setdefault('table_name', fresh_name(new_tables))
    before = set(engine.client.list_tables()['TableNames'])
    with pytest.raises(error):
        DynamoDBLockClient.create_dynamodb_table(engine.client, **arguments)
    assert set(engine.client.list_tables()['TableNames']) == before
