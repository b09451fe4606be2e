"""The threaded client on a low-level boto3 client (``DynamoDBLockClient(boto3.client('dynamodb'))``).

Given a low-level client, the lock client converts values to DynamoDB's typed JSON itself (as
the asyncio client does) instead of leaving it to boto3's resource layer. These tests prove
that this is invisible to the application and to other clients: the same rows, the same data
and types, every feature working, the calls carried by the application's client (its hooks see
them), exclusion against clients built on a resource (on DynamoDB Local), and a resource's own
``meta.client`` recognised, so that nothing is converted twice. Threaded client only: the
asyncio client always takes a low-level (aiobotocore) client.
"""
from __future__ import annotations

import datetime
import uuid
from decimal import Decimal
from typing import Any, Dict, Iterator

import boto3
import pytest
from botocore.stub import Stubber
from helpers import CallRecorder, LockClients

from python_dynamodb_lock.python_dynamodb_lock import DynamoDBLock, DynamoDBLockClient, DynamoDBLockError
from python_dynamodb_lock.testing import LockTable

pytestmark = pytest.mark.threaded_only
seconds = datetime.timedelta

#: Additional attributes of every DynamoDB type the resource layer takes.
DATA: Dict[str, Any] = {
    'text': 'héllo', 'count': 7, 'ratio': Decimal('0.125'), 'big': 10 ** 30, 'flag': True, 'nothing': None,
    'blob': b'\x00\xff', 'names': {'a', 'b'}, 'numbers': {1, 2}, 'nested': {'list': [1, 'two', {'x': False}]},
}


@pytest.fixture
def data_table(engine: LockTable) -> Iterator[str]:
    name = f'{engine.table_name}-data-{uuid.uuid4().hex[:6]}'
    engine.client.create_table(
        TableName=name, KeySchema=[{'AttributeName': 'id', 'KeyType': 'HASH'}],
        AttributeDefinitions=[{'AttributeName': 'id', 'AttributeType': 'S'}], BillingMode='PAY_PER_REQUEST')
    try:
        engine.client.get_waiter('table_exists').wait(TableName=name)
        yield name
    finally:
        engine.client.delete_table(TableName=name)


def as_stored(engine: LockTable, key: str) -> Dict[str, Any]:
    """The row's DynamoDB types, and its application data exactly as typed."""
    item = engine.read_typed_item(key)
    assert item is not None
    return {name: (value if name in DATA else next(iter(value))) for name, value in item.items()}


def test_a_low_level_client_writes_the_rows_and_data_a_resource_writes(engine: LockTable,
                                                                       clients: LockClients) -> None:
    through_resource = clients.make(engine.resource)
    through_client = clients.make(engine.new_client())
    through_resource.acquire_lock('by-resource', additional_attributes=DATA).release()
    through_client.acquire_lock('by-client', additional_attributes=DATA).release()
    assert as_stored(engine, 'by-client') == as_stored(engine, 'by-resource')
    held = through_client.acquire_lock('held', additional_attributes=DATA)
    assert held.additional_attributes == DATA
    seen = through_resource.get_lock('held')
    assert seen.additional_attributes == DATA and seen.record_version_number == held.record_version_number
    assert engine.read_item('held')['fencing_token'] == held.fencing_token
    # and the other way round: what the resource's client wrote reads the same through the low-level one
    theirs = through_resource.acquire_lock('theirs', additional_attributes=DATA)
    assert through_client.get_lock('theirs').additional_attributes == DATA
    assert {lock.partition_key for lock in through_client.list_locks()} == {'held', 'theirs'}
    assert [lock.partition_key for lock in through_client.list_locks(partition_key='theirs')] == ['theirs']
    theirs.release()
    held.release()


def test_the_calls_go_through_the_applications_client_and_its_hooks(engine: LockTable, clients: LockClients) -> None:
    low_level = engine.new_client()
    client = clients.make(low_level)
    with CallRecorder(low_level) as on_client, CallRecorder(engine.resource) as on_resource:
        lock = client.acquire_lock('hooks')
        client.send_heartbeats()
        lock.release()
    assert on_client.operations() == ['UpdateItem'] * 3     # acquire, heartbeat, release
    assert on_resource.calls == []
    assert on_client.calls[0].params['Key'][engine.partition_key_name] == {'S': 'hooks'}


def test_every_feature_runs_on_a_low_level_client(engine: LockTable, clients: LockClients, data_table: str) -> None:
    client = clients.make(engine.new_client(), owner_name='low')
    other = clients.make(engine.resource, owner_name='other')
    lock = client.acquire_lock('job', additional_attributes={'progress': 0, 'stage': 'start'})
    version = lock.record_version_number
    client.send_heartbeats()
    assert lock.record_version_number != version and lock.status == DynamoDBLock.LOCKED
    lock.update_attributes({'progress': Decimal('0.5')}, remove=['stage'])
    assert engine.read_item('job')['progress'] == Decimal('0.5') and 'stage' not in engine.read_item('job')
    # guarded writes, Python values and typed
    lock.put_item(TableName=data_table, Item={'id': 'x', 'n': 1, 'tags': {'a'}})
    lock.transact_write_items([{'Update': {'TableName': data_table, 'Key': {'id': {'S': 'x'}},
                                           'UpdateExpression': 'SET n = n + :one',
                                           'ExpressionAttributeValues': {':one': {'N': '1'}}}}], typed=True)
    stored = engine.client.get_item(TableName=data_table, Key={'id': {'S': 'x'}}, ConsistentRead=True)['Item']
    assert stored['n'] == {'N': '2'} and stored['tags'] == {'SS': ['a']}
    # a holder seen through the refusal's answer: the row the failed condition returned
    assert other.try_acquire_lock('job') is None
    with pytest.raises(DynamoDBLockError) as refused:
        other.acquire_lock('job', retry_timeout=seconds(0))
    assert refused.value.code == DynamoDBLockError.ACQUIRE_TIMEOUT
    # data left for the next holder
    assert lock.release(attributes={'handed': 'over', 'at': 3}) is True
    following = other.acquire_lock('job')
    assert following.additional_attributes['handed'] == 'over' and following.additional_attributes['at'] == 3
    assert following.fencing_token > lock.fencing_token
    following.release()
    # several keys at once, and a shared lock
    keys = client.acquire_locks(['a', 'b', 'c'])
    assert {row.partition_key for row in other.list_locks()} == {'a', 'b', 'c'}
    keys.release()
    reader = client.acquire_lock('doc', shared=True)
    also = other.acquire_lock('doc', shared=True)
    assert other.try_acquire_lock('doc') is None                 # a writer waits for the readers
    reader.release()
    also.release()
    assert other.try_acquire_lock('doc') is not None


def test_a_low_level_and_a_resource_client_exclude_each_other(local_engine: LockTable,
                                                              local_clients: LockClients) -> None:
    low = local_clients.make(local_engine.new_client(), owner_name='low')
    high = local_clients.make(local_engine.resource, owner_name='high')
    tokens = []
    for holder, waiter in [(low, high), (high, low), (low, high)]:
        lock = holder.acquire_lock('shared-key')
        tokens.append(lock.fencing_token)
        assert waiter.try_acquire_lock('shared-key') is None
        assert waiter.get_lock('shared-key').owner_name == holder.owner_name
        lock.release()
    assert tokens == sorted(tokens) and len(set(tokens)) == 3


def test_a_resources_own_client_is_recognised_and_not_converted_twice(engine: LockTable,
                                                                       clients: LockClients) -> None:
    client = clients.make(engine.resource.meta.client)
    client.acquire_lock('own', additional_attributes=DATA).release()
    clients.make(engine.resource).acquire_lock('reference', additional_attributes=DATA).release()
    assert as_stored(engine, 'own') == as_stored(engine, 'reference')


def test_for_table_reads_the_layout_through_a_low_level_client(engine: LockTable) -> None:
    client = DynamoDBLockClient.for_table(engine.new_client(), engine.table_name, background_heartbeats=False)
    try:
        assert client.table_layout.partition_key_name == engine.partition_key_name
        client.acquire_lock('laid-out').release()
    finally:
        client.close()


def test_what_is_not_a_dynamodb_client_or_resource_is_refused_before_any_call() -> None:
    s3 = boto3.client('s3', region_name='us-east-1', aws_access_key_id='x', aws_secret_access_key='y')
    with CallRecorder(s3) as calls:
        for wrong in (object(), 'dynamodb', s3):
            with pytest.raises(TypeError, match='boto3.client\\("dynamodb"\\)'):
                DynamoDBLockClient(wrong, background_heartbeats=False)
    assert calls.calls == []


def test_an_asyncio_client_is_pointed_to_the_asyncio_lock_client() -> None:
    aiobotocore_session = pytest.importorskip('aiobotocore.session')
    client = aiobotocore_session.get_session().create_client(
        'dynamodb', region_name='us-east-1', aws_access_key_id='x', aws_secret_access_key='y')

    async def refused() -> None:
        async with client as dynamodb:
            with pytest.raises(TypeError, match='AsyncDynamoDBLockClient'):
                DynamoDBLockClient(dynamodb, background_heartbeats=False)

    import asyncio
    asyncio.run(refused())


def test_telling_the_kinds_apart_leaves_a_stubber_alone() -> None:
    """Whether a client converts values is asked with an event that botocore's Stubber does not
    listen to: a stubbed client with nothing queued builds a lock client, and the stub then
    answers the first lock call."""
    dynamodb = boto3.client('dynamodb', region_name='us-east-1', aws_access_key_id='x', aws_secret_access_key='y')
    with Stubber(dynamodb) as stubber:
        client = DynamoDBLockClient(dynamodb, background_heartbeats=False)
        stubber.add_response('update_item', {'Attributes': {
            'lock_key': {'S': 'stubbed'}, 'sort_key': {'S': '-'}, 'fencing_token': {'N': '41'},
            'owner_name': {'S': 'me'}, 'record_version_number': {'S': 'v'}, 'lease_duration': {'N': '30'}}})
        lock = client.acquire_lock('stubbed')
        assert lock.fencing_token == 41
        stubber.assert_no_pending_responses()
        client.close()


def test_an_application_handler_that_fails_on_the_probe_does_not_confuse_it(engine: LockTable,
                                                                            clients: LockClients) -> None:
    """An application's handler of the service-wide event, unprepared for the throwaway request,
    fails on it: the kind of client is still told right (boto3's conversion ran first on a
    resource's client), and the lock client works."""
    def strict_handler(params: Dict[str, Any], **_: Any) -> None:
        if params.get('TableName') == 'probe':
            raise RuntimeError('unexpected table')

    resource = engine.new_resource()
    low_level = engine.new_client()
    for client in (resource.meta.client, low_level):
        client.meta.events.register('before-parameter-build.dynamodb', strict_handler)
    clients.make(resource.meta.client).acquire_lock('via-resource-client', additional_attributes=DATA).release()
    clients.make(low_level).acquire_lock('via-low-level', additional_attributes=DATA).release()
    assert as_stored(engine, 'via-resource-client') == as_stored(engine, 'via-low-level')
