"""``list_locks(partition_key=...)``: the locks under one partition key, read with a consistent,
paginated Query instead of a scan of the whole table (Java's ``getLocksByPartitionKey``), on
both clients and on DynamoDB Local.

Pages are made small with a botocore hook that adds ``Limit`` to each Query (DynamoDB's own
page size is 1 MB, which a handful of lock rows never fills), so that a dozen rows take
several pages and the client has to follow ``LastEvaluatedKey``.
"""
from __future__ import annotations

import contextlib
import uuid
from typing import Any, Dict, Iterator, List

import pytest

from helpers import CallRecorder, FaultInjector, LockClients, is_asyncio
from python_dynamodb_lock.python_dynamodb_lock import BaseDynamoDBLock, DynamoDBLockError
from python_dynamodb_lock.testing import LockTable, lock_table, unique_table_name


@contextlib.contextmanager
def small_pages(engine: LockTable, client: Any, limit: int) -> Iterator[None]:
    """Every Query and Scan ``client`` sends asks for at most ``limit`` rows per page."""
    def add_limit(params: Dict[str, Any], **kwargs: Any) -> None:
        params['Limit'] = limit

    emitters = [engine.resource.meta.client.meta.events]
    if is_asyncio(client):
        emitters.append(client.dynamodb.meta.events)   # the aiobotocore client the asyncio client sends on
    unique_id = f'small-pages-{uuid.uuid4().hex}'
    for events in emitters:
        for operation in ('Query', 'Scan'):
            events.register(f'before-parameter-build.dynamodb.{operation}', add_limit,
                            unique_id=f'{unique_id}-{operation}')
    try:
        yield
    finally:
        for events in emitters:
            for operation in ('Query', 'Scan'):
                events.unregister(f'before-parameter-build.dynamodb.{operation}', unique_id=f'{unique_id}-{operation}')


def test_the_locks_of_one_partition_key_are_queried_page_by_page(local_engine: LockTable,
                                                                 local_clients: LockClients) -> None:
    client = local_clients.make()
    held = {f'step-{index:02d}': client.acquire_lock('job', f'step-{index:02d}') for index in range(7)}
    crashed = {f'dead-{index}': local_engine.put_lock_row('job', f'dead-{index}', owner_name='crashed')
               for index in range(3)}
    local_engine.client.put_item(TableName=local_engine.table_name,      # a row of the application's
                                 Item={'lock_key': {'S': 'job'}, 'sort_key': {'S': 'note'}, 'text': {'S': 'hi'}})
    client.acquire_lock('job', 'released').release(best_effort=False)     # a released row, kept
    client.acquire_lock('job-2', 'step-00')                                # other partition keys
    local_engine.put_lock_row('other', 'step-00')

    with small_pages(local_engine, client, 3), CallRecorder(local_engine.resource) as calls:
        listed: List[BaseDynamoDBLock] = list(client.list_locks('job'))
        listed_by_keyword = list(client.list_locks(partition_key='job'))

    assert sorted(lock.sort_key for lock in listed) == sorted([*held, *crashed])
    assert [lock.unique_identifier for lock in listed_by_keyword] == [lock.unique_identifier for lock in listed]
    assert all(type(lock) is BaseDynamoDBLock and lock.partition_key == 'job' for lock in listed)
    found = {lock.sort_key: lock for lock in listed}
    for sort_key, lock in held.items():
        assert found[sort_key].record_version_number == lock.record_version_number
        assert found[sort_key].owner_name == client.owner_name
        assert found[sort_key].fencing_token == lock.fencing_token
    for sort_key, row in crashed.items():
        assert found[sort_key].owner_name == 'crashed'
        assert found[sort_key].record_version_number == row['record_version_number']

    # 12 rows under 'job', 3 per page: every page was asked for, each after the last one's key.
    queries = calls.of('Query')
    assert calls.operations() == ['Query'] * len(queries)
    first_listing = queries[:len(queries) // 2]
    assert len(first_listing) >= 4
    for index, query in enumerate(first_listing):
        assert query.params['KeyConditionExpression'] == '#partition_key = :partition_key'
        assert query.params['ExpressionAttributeNames'] == {'#partition_key': 'lock_key'}
        assert query.params['ExpressionAttributeValues'] == {':partition_key': {'S': 'job'}}
        assert query.params['ConsistentRead'] is True and query.params['Limit'] == 3
        assert ('ExclusiveStartKey' in query.params) == (index > 0)


def test_without_a_partition_key_the_whole_table_is_scanned(local_engine: LockTable,
                                                            local_clients: LockClients) -> None:
    client = local_clients.make()
    for key in ('a', 'b', 'c', 'd'):
        client.acquire_lock(key)
    with small_pages(local_engine, client, 2), CallRecorder(local_engine.resource) as calls:
        keys = sorted(lock.partition_key for lock in client.list_locks())
    assert keys == ['a', 'b', 'c', 'd']
    assert set(calls.operations()) == {'Scan'} and calls.count('Scan') >= 2


@pytest.mark.local
def test_on_a_table_without_sort_key_the_query_finds_the_one_lock_of_the_key(dynamodb_local: Any,
                                                                            client_kind: str) -> None:
    with lock_table(dynamodb_local, unique_table_name('hash-only-query'), sort_key_name=None,
                    partition_key_type='N') as table:
        clients = LockClients(table, kind=client_kind)
        try:
            client = clients.make(sort_key_name=None, partition_key_type='N')
            lock = client.acquire_lock(7)
            client.acquire_lock(8)
            client.acquire_lock(9).release(best_effort=False)     # a released row is no lock
            with CallRecorder(table.resource) as calls:
                found = list(client.list_locks(7))
                assert list(client.list_locks(9)) == []
                assert list(client.list_locks(10)) == []
            assert [(held.partition_key, held.sort_key) for held in found] == [(7, '-')]
            assert found[0].record_version_number == lock.record_version_number
            assert calls.operations() == ['Query'] * 3
        finally:
            clients.close_all()


@pytest.mark.parametrize('partition_key, error', [
    (5, TypeError), (b'job', TypeError), (None, None), ('', ValueError), ('x' * 2049, ValueError),
], ids=['number-on-a-string-table', 'bytes-on-a-string-table', 'none-means-scan', 'empty', 'too-long'])
def test_a_bad_partition_key_is_refused_before_any_call(engine: LockTable, clients: LockClients,
                                                        partition_key: Any, error: Any) -> None:
    client = clients.make()
    with CallRecorder(engine.resource) as calls:
        if error is None:
            assert list(client.list_locks(partition_key)) == []
        else:
            with pytest.raises(error, match='partition_key'):
                list(client.list_locks(partition_key))
    assert calls.operations() == (['Scan'] if error is None else [])


def test_a_failed_query_is_a_lock_error(engine: LockTable, clients: LockClients) -> None:
    client = clients.make()
    with FaultInjector(engine.resource) as faults:
        faults.fail_calls('Query', code='InternalServerError', status=500)
        with pytest.raises(DynamoDBLockError) as raised:
            list(client.list_locks('job'))
    assert raised.value.code == DynamoDBLockError.UNKNOWN
