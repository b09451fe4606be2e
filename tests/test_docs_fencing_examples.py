"""The fencing recipes that docs/safety.rst shows (``examples/fencing_sqlite.py`` and
``examples/fencing_dynamodb.py``) do what the page says, with real fencing tokens.

The older holder's lock is force-released by an operator and the key acquired again by another
client, as after a pause past the lease: the new holder's token is larger, its write goes
through, and the first holder's write, which comes later, is refused by the store. On moto
in-process and DynamoDB Local (the ``engine`` fixture); nothing here depends on two clients
writing at the same moment.
"""
from __future__ import annotations

import contextlib
import importlib.util
import pathlib
import sqlite3
import types
from typing import Any, Iterator, Tuple

import pytest

from python_dynamodb_lock.python_dynamodb_lock import DynamoDBLock

EXAMPLES = pathlib.Path(__file__).resolve().parent.parent / 'examples'


def load_example(name: str) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(f'example_{name}', EXAMPLES / f'{name}.py')
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@contextlib.contextmanager
def data_table(engine: Any, suffix: str, key: str) -> Iterator[str]:
    """An application's table (string HASH key ``key``) beside the lock table; deleted after."""
    name = f'{engine.table_name}-{suffix}'
    engine.client.create_table(
        TableName=name, KeySchema=[{'AttributeName': key, 'KeyType': 'HASH'}],
        AttributeDefinitions=[{'AttributeName': key, 'AttributeType': 'S'}], BillingMode='PAY_PER_REQUEST')
    try:
        engine.client.get_waiter('table_exists').wait(TableName=name)
        yield name
    finally:
        engine.client.delete_table(TableName=name)


def stale_and_current_holder(engine: Any) -> Tuple[DynamoDBLock, DynamoDBLock]:
    """The first holder's lock, taken from it (force-released), and the second holder's."""
    first_client, second_client = engine.lock_client(), engine.lock_client()
    first = first_client.acquire_lock('report')
    seen = second_client.get_lock('report')
    assert seen is not None and second_client.force_release_lock(seen)
    second = second_client.acquire_lock('report', retry_timeout=None)
    assert second.fencing_token > first.fencing_token
    return first, second


def test_the_sqlite_store_refuses_the_stale_holder(engine: Any, tmp_path: pathlib.Path) -> None:
    store = load_example('fencing_sqlite').FencedStore(str(tmp_path / 'documents.db'))
    first, second = stale_and_current_holder(engine)
    assert store.write('report', 'from the second holder', second.fencing_token)
    assert not store.write('report', 'from the first holder', first.fencing_token)
    assert store.read('report') == 'from the second holder'
    # The holder writes several times under one token ("fence <= :token", not "<").
    assert store.write('report', 'again from the second holder', second.fencing_token)
    assert store.read('report') == 'again from the second holder'
    store.connection.close()


def test_the_sqlite_store_refuses_a_first_write_older_than_one_it_has_seen(tmp_path: pathlib.Path) -> None:
    store = load_example('fencing_sqlite').FencedStore(str(tmp_path / 'documents.db'))
    assert store.write('a', 'token 7', 7)
    assert not store.write('a', 'token 6', 6)
    assert store.read('a') == 'token 7' and store.read('b') is None
    with pytest.raises(sqlite3.IntegrityError):
        store.connection.execute("INSERT INTO documents (name, body, fence) VALUES ('a', '', 1)")
    store.connection.close()


def test_the_fenced_dynamodb_put_refuses_the_stale_holder(engine: Any) -> None:
    fenced_put = load_example('fencing_dynamodb').fenced_put
    with data_table(engine, 'documents', 'name') as name:
        table = engine.resource.Table(name)
        first, second = stale_and_current_holder(engine)
        assert fenced_put(table, {'name': 'report', 'body': 'from the second holder'}, second.fencing_token)
        assert not fenced_put(table, {'name': 'report', 'body': 'from the first holder'}, first.fencing_token)
        item = table.get_item(Key={'name': 'report'}, ConsistentRead=True)['Item']
        assert item['body'] == 'from the second holder' and item['fence'] == second.fencing_token


def test_only_transact_write_items_takes_typed(engine: Any) -> None:
    """safety.rst: ``typed=True`` is for ``transact_write_items``; the one-item methods refuse it."""
    with data_table(engine, 'typed', 'id') as name:
        lock = engine.lock_client().acquire_lock('typed')
        calls = [(lock.put_item, {'Item': {'id': 'alice'}}),
                 (lock.update_item, {'Key': {'id': 'alice'}, 'UpdateExpression': 'SET n = :one',
                                     'ExpressionAttributeValues': {':one': 1}}),
                 (lock.delete_item, {'Key': {'id': 'alice'}})]
        for method, arguments in calls:
            with pytest.raises(TypeError, match=r'not typed$'):
                method(TableName=name, **arguments, typed=True)
        lock.put_item(TableName=name, Item={'id': 'bob'})       # the same calls without typed are fine
        lock.transact_write_items([{'Put': {'TableName': name, 'Item': {'id': {'S': 'alice'}}}}], typed=True)
        assert engine.client.get_item(TableName=name, Key={'id': {'S': 'alice'}})['Item'] == {'id': {'S': 'alice'}}
