"""Table administration: tags at creation (``create_dynamodb_table(tags=...)``, Go's ``WithTags``)
and global tables, which ``for_table`` and ``create_dynamodb_table(exist_ok=True)`` refuse
unless told ``allow_global_table=True``, on both clients.

Two things the local engines cannot show are arranged by hand, and each test says so:

* DynamoDB Local accepts ``Tags`` in ``CreateTable`` but answers ``ListTagsOfResource`` with
  ``UnknownOperationException``: there the request sent is checked (a recorder hook), and moto,
  which keeps tags, is asked for them back.
* No local engine has replicas (global tables): a botocore ``after-call`` hook adds ``Replicas``
  to the ``DescribeTable`` answer, as DynamoDB gives it for a table replicated to other regions.
"""
from __future__ import annotations

import asyncio
import contextlib
import uuid
from typing import Any, Dict, Iterator, List

import pytest

from helpers import CallRecorder, LockClients
from python_dynamodb_lock.aio import AsyncDynamoDBLockClient
from python_dynamodb_lock.python_dynamodb_lock import DynamoDBLockClient, DynamoDBLockError
from python_dynamodb_lock.testing import LockTable, lock_table, unique_table_name

REPLICAS = [{'RegionName': 'eu-west-1', 'ReplicaStatus': 'ACTIVE'},
            {'RegionName': 'us-west-2', 'ReplicaStatus': 'ACTIVE'}]


@pytest.fixture
def new_tables(engine: LockTable) -> Iterator[List[str]]:
    """Names for tables a test creates; deleted afterwards."""
    names: List[str] = []
    yield names
    for name in names:
        with contextlib.suppress(Exception):
            engine.client.delete_table(TableName=name)


def fresh_name(names: List[str]) -> str:
    name = f'tagged-{uuid.uuid4().hex[:12]}'
    names.append(name)
    return name


@contextlib.contextmanager
def replicated(*clients: Any) -> Iterator[None]:
    """``DescribeTable`` answers on these botocore or aiobotocore clients list replicas in two
    other regions (DynamoDB Local has no global tables: the answer is rewritten by a hook)."""
    def add_replicas(parsed: Dict[str, Any], **kwargs: Any) -> None:
        if 'Table' in parsed:
            parsed['Table']['Replicas'] = [dict(replica) for replica in REPLICAS]

    unique_id = f'replicas-{uuid.uuid4().hex}'
    for client in clients:
        client.meta.events.register('after-call.dynamodb.DescribeTable', add_replicas, unique_id=unique_id)
    try:
        yield
    finally:
        for client in clients:
            client.meta.events.unregister('after-call.dynamodb.DescribeTable', unique_id=unique_id)


def all_tags(client: Any, arn: str) -> List[Dict[str, str]]:
    """Every tag of a table (``ListTagsOfResource`` answers in pages), sorted by key."""
    tags: List[Dict[str, str]] = []
    params = {'ResourceArn': arn}
    while True:
        page = client.list_tags_of_resource(**params)
        tags += page['Tags']
        if not page.get('NextToken'):
            return sorted(tags, key=lambda tag: tag['Key'])
        params['NextToken'] = page['NextToken']


def assert_refused_as_global(raised: pytest.ExceptionInfo[DynamoDBLockError], table_name: str,
                             how_to_allow: str = 'allow_global_table=True') -> None:
    error = raised.value
    assert error.code == DynamoDBLockError.GLOBAL_TABLE
    assert table_name in error.message and 'eu-west-1, us-west-2' in error.message
    assert 'serialised only within one region' in error.message and how_to_allow in error.message


# --------------------------------------------------------------------------------------------
# Tags
# --------------------------------------------------------------------------------------------

def test_create_table_sends_the_tags(engine: LockTable, new_tables: List[str]) -> None:
    """On moto the tags are read back; DynamoDB Local does not keep them (no
    ListTagsOfResource), so there the CreateTable request is what is checked."""
    name = fresh_name(new_tables)
    with CallRecorder(engine.client) as calls:
        description = DynamoDBLockClient.create_dynamodb_table(
            engine.client, table_name=name, tags={'team': 'billing', 'cost-center': '', 'env': 'prod'})
    sent = [{'Key': 'team', 'Value': 'billing'}, {'Key': 'cost-center', 'Value': ''}, {'Key': 'env', 'Value': 'prod'}]
    assert calls.of('CreateTable')[0].params['Tags'] == sent
    if engine.endpoint_url is None:     # moto in-process keeps tags
        assert all_tags(engine.client, description['TableArn']) == sorted(sent, key=lambda tag: tag['Key'])


def test_tags_at_aws_limits_are_accepted(engine: LockTable, new_tables: List[str]) -> None:
    name = fresh_name(new_tables)
    tags = [{'Key': f'k{index:02d}', 'Value': 'v'} for index in range(48)]
    tags += [{'Key': 'k' * 128, 'Value': 'v' * 256}, {'Key': 'a/b:c=d+e-f.g_h 1', 'Value': ''}]
    with CallRecorder(engine.client) as calls:
        description = DynamoDBLockClient.create_dynamodb_table(engine.client, table_name=name, tags=tags)
    assert calls.of('CreateTable')[0].params['Tags'] == tags
    if engine.endpoint_url is None:
        assert all_tags(engine.client, description['TableArn']) == sorted(tags, key=lambda tag: tag['Key'])


def test_no_tags_sends_no_tags(engine: LockTable, new_tables: List[str]) -> None:
    name = fresh_name(new_tables)
    with CallRecorder(engine.client) as calls:
        DynamoDBLockClient.create_dynamodb_table(engine.client, table_name=name, tags={})
    assert 'Tags' not in calls.of('CreateTable')[0].params


@pytest.mark.parametrize('tags, error, words', [
    ({'': 'x'}, ValueError, 'may not be empty'),
    ({'k' * 129: 'v'}, ValueError, '129 characters'),
    ({'k': 'v' * 257}, ValueError, '257 characters'),
    ({f'k{index}': 'v' for index in range(51)}, ValueError, 'at most 50 tags, got 51'),
    ({'aws:owner': 'me'}, ValueError, 'aws:'),
    ({'AWS:owner': 'me'}, ValueError, 'aws:'),
    ([{'Key': 'a', 'Value': 'b'}, {'Key': 'a', 'Value': 'c'}], ValueError, "'a' is given twice"),
    ([{'Key': 'a'}], TypeError, "{'Key': ..., 'Value': ...}"),
    ([('a', 'b')], TypeError, "{'Key': ..., 'Value': ...}"),
    ('team=billing', TypeError, 'not str'),
    ({'count': 5}, TypeError, 'are str'),
    ({5: 'five'}, TypeError, 'are str'),
], ids=['empty-key', 'long-key', 'long-value', 'too-many', 'aws-prefix', 'aws-prefix-upper-case', 'repeated-key',
        'no-value', 'pairs', 'a-string', 'number-value', 'number-key'])
def test_bad_tags_are_refused_before_any_call(engine: LockTable, new_tables: List[str], tags: Any, error: type,
                                              words: str) -> None:
    name = fresh_name(new_tables)
    with CallRecorder(engine.client) as calls:
        with pytest.raises(error) as raised:
            DynamoDBLockClient.create_dynamodb_table(engine.client, table_name=name, tags=tags)
    assert 'tags' in str(raised.value) and words in str(raised.value)
    assert calls.operations() == []
    assert name not in engine.client.list_tables()['TableNames']


@pytest.mark.local
def test_the_asyncio_client_creates_a_tagged_table(dynamodb_local: Any) -> None:
    """DynamoDB Local does not keep tags: the CreateTable request is checked."""
    with lock_table(dynamodb_local, unique_table_name('aio-tags')) as table:
        name = f'{table.table_name}-tagged'

        async def main() -> None:
            async with table.new_async_client() as dynamodb:
                with CallRecorder(dynamodb) as calls:
                    description = await AsyncDynamoDBLockClient.create_dynamodb_table(
                        dynamodb, table_name=name, billing_mode='PAY_PER_REQUEST', tags={'team': 'billing'})
                    with pytest.raises(ValueError, match='at most 50'):
                        await AsyncDynamoDBLockClient.create_dynamodb_table(
                            dynamodb, table_name=f'{name}-2', tags={str(index): '' for index in range(51)})
                assert description['TableStatus'] == 'ACTIVE'
                assert calls.of('CreateTable')[0].params['Tags'] == [{'Key': 'team', 'Value': 'billing'}]
                assert calls.count('CreateTable') == 1
                await dynamodb.delete_table(TableName=name)

        asyncio.run(main())


# --------------------------------------------------------------------------------------------
# Global tables
# --------------------------------------------------------------------------------------------

@pytest.mark.local
def test_for_table_refuses_a_global_table_unless_allowed(dynamodb_local: Any) -> None:
    """Replicas are added to DescribeTable's answer by a hook: DynamoDB Local has no global tables."""
    with lock_table(dynamodb_local, unique_table_name('global')) as table:
        resource = table.resource
        with replicated(resource.meta.client):
            with CallRecorder(resource) as calls:
                with pytest.raises(DynamoDBLockError) as raised:
                    DynamoDBLockClient.for_table(resource, table.table_name, background_heartbeats=False)
            assert_refused_as_global(raised, table.table_name)
            assert calls.operations() == ['DescribeTable']        # refused at once, nothing written
            client = DynamoDBLockClient.for_table(resource, table.table_name, allow_global_table=True,
                                                  background_heartbeats=False)
        try:
            client.acquire_lock('in-one-region').release(best_effort=False)
        finally:
            client.close()
        # Without replicas (the engine's own answer) nothing is asked of the user.
        DynamoDBLockClient.for_table(resource, table.table_name, background_heartbeats=False).close()
        with pytest.raises(TypeError, match='allow_global_table must be a bool'):
            DynamoDBLockClient.for_table(resource, table.table_name, allow_global_table='yes')


@pytest.mark.local
def test_create_table_exist_ok_refuses_an_existing_global_table_unless_allowed(dynamodb_local: Any) -> None:
    """Replicas are added to DescribeTable's answer by a hook: DynamoDB Local has no global tables."""
    with lock_table(dynamodb_local, unique_table_name('global-exists')) as table:
        client = table.client
        with replicated(client):
            with CallRecorder(client) as calls:
                with pytest.raises(DynamoDBLockError) as raised:
                    DynamoDBLockClient.create_dynamodb_table(client, table_name=table.table_name, exist_ok=True)
            assert_refused_as_global(raised, table.table_name)
            assert calls.operations() == ['CreateTable', 'DescribeTable']   # no TTL update, no wait
            description = DynamoDBLockClient.create_dynamodb_table(client, table_name=table.table_name,
                                                                   exist_ok=True, allow_global_table=True)
        assert description['TableName'] == table.table_name
        with pytest.raises(TypeError, match='allow_global_table must be a bool'):
            DynamoDBLockClient.create_dynamodb_table(client, table_name='never-made', allow_global_table=1)
        assert 'never-made' not in client.list_tables()['TableNames']


@pytest.mark.local
def test_the_asyncio_client_refuses_a_global_table_unless_allowed(dynamodb_local: Any) -> None:
    """Replicas are added to DescribeTable's answer by a hook: DynamoDB Local has no global tables."""
    with lock_table(dynamodb_local, unique_table_name('aio-global')) as table:
        async def main() -> None:
            async with table.new_async_client() as dynamodb:
                with replicated(dynamodb):
                    with pytest.raises(DynamoDBLockError) as for_table:
                        await AsyncDynamoDBLockClient.for_table(dynamodb, table.table_name,
                                                                background_heartbeats=False)
                    assert_refused_as_global(for_table, table.table_name)
                    with pytest.raises(DynamoDBLockError) as create:
                        await AsyncDynamoDBLockClient.create_dynamodb_table(dynamodb, table_name=table.table_name,
                                                                            exist_ok=True)
                    assert_refused_as_global(create, table.table_name)
                    await AsyncDynamoDBLockClient.create_dynamodb_table(dynamodb, table_name=table.table_name,
                                                                        exist_ok=True, allow_global_table=True)
                    client = await AsyncDynamoDBLockClient.for_table(dynamodb, table.table_name,
                                                                     allow_global_table=True,
                                                                     background_heartbeats=False)
                try:
                    lock = await client.acquire_lock('in-one-region')
                    await lock.release()
                finally:
                    await client.close()

        asyncio.run(main())


def test_a_client_made_by_its_constructor_does_not_describe_the_table(engine: LockTable) -> None:
    """The constructor makes no call at all (so it cannot see replicas): the check is
    for_table's and create_dynamodb_table's, as documented."""
    with CallRecorder(engine.resource) as calls:
        factory = LockClients(engine)
        try:
            factory.make()
        finally:
            factory.close_all()
    assert calls.operations() == []
