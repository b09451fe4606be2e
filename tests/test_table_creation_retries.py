"""``create_dynamodb_table`` whose ``CreateTable`` answer is lost: botocore retries the create that
landed and meets ``ResourceInUseException``; the call succeeds when the table is the one asked for,
and fails clearly when it is not. Both clients, on moto and DynamoDB Local.
"""
from __future__ import annotations

import asyncio
import uuid
from typing import Any, Callable, Dict, Iterator, List, Optional

import pytest

from helpers import ASYNCIO
from python_dynamodb_lock import Reason
from python_dynamodb_lock.aio import AsyncDynamoDBLockClient
from python_dynamodb_lock.python_dynamodb_lock import DynamoDBLockClient, DynamoDBLockError
from python_dynamodb_lock.testing import FaultInjector, LockTable


@pytest.fixture
def new_table(engine: LockTable, client_kind: str) -> Iterator[str]:
    """A name for the table the test creates; deleted afterwards."""
    name = f'retried-{uuid.uuid4().hex[:12]}'
    yield name
    try:
        engine.client.delete_table(TableName=name)
    except Exception:   # noqa: BLE001 - not created, or already gone
        pass


def create(engine: LockTable, client_kind: str, name: str, between: Optional[Callable[[], Any]] = None,
           **arguments: Any) -> Dict[str, Any]:
    """``create_dynamodb_table`` of the test's client kind, on a client of its own whose first
    ``CreateTable`` answer is lost (botocore retries at once; ``between`` runs before the retry).
    ``between`` works through ``engine.client``, which has no fault."""
    if client_kind == ASYNCIO:
        async def main() -> Dict[str, Any]:
            async with engine.new_async_client() as dynamodb:
                with FaultInjector(dynamodb) as faults:
                    lost = faults.lose_answers('CreateTable', between=between)
                    try:
                        description: Dict[str, Any] = await AsyncDynamoDBLockClient.create_dynamodb_table(
                            dynamodb, table_name=name, **arguments)
                    finally:
                        assert lost.hits == 1
                    return description

        return asyncio.run(main())
    client = engine.new_client()
    with FaultInjector(client) as faults:
        lost = faults.lose_answers('CreateTable', between=between)
        try:
            return DynamoDBLockClient.create_dynamodb_table(client, table_name=name, **arguments)
        finally:
            assert lost.hits == 1


def key_schema(description: Dict[str, Any]) -> Dict[str, str]:
    return {key['KeyType']: key['AttributeName'] for key in description['KeySchema']}


@pytest.mark.parametrize('billing', ['PROVISIONED', 'PAY_PER_REQUEST'])
def test_a_create_whose_answer_was_lost_succeeds(engine: LockTable, client_kind: str, new_table: str,
                                                 billing: str) -> None:
    description = create(engine, client_kind, new_table, billing_mode=billing)
    assert description['TableName'] == new_table and description['TableStatus'] == 'ACTIVE'
    assert key_schema(description) == {'HASH': 'lock_key', 'RANGE': 'sort_key'}
    ttl = engine.client.describe_time_to_live(TableName=new_table)['TimeToLiveDescription']
    assert ttl['TimeToLiveStatus'] in ('ENABLED', 'ENABLING') and ttl['AttributeName'] == 'expiry_time'
    # The table works for locks.
    lock_client = engine.lock_client(table_name=new_table, background_heartbeats=False)
    try:
        lock = lock_client.acquire_lock('on-the-new-table')
        assert lock.release(best_effort=False) is True
    finally:
        lock_client.close()


def _other_ttl(engine: LockTable, name: str) -> Callable[[], None]:
    def between() -> None:
        engine.client.update_time_to_live(TableName=name, TimeToLiveSpecification={
            'Enabled': True, 'AttributeName': 'another_ttl'})

    return between


def _other_keys(engine: LockTable, name: str) -> Callable[[], None]:
    def between() -> None:
        engine.client.delete_table(TableName=name)
        engine.client.get_waiter('table_not_exists').wait(TableName=name, WaiterConfig={'Delay': 1})
        engine.client.create_table(
            TableName=name, KeySchema=[{'AttributeName': 'id', 'KeyType': 'HASH'}],
            AttributeDefinitions=[{'AttributeName': 'id', 'AttributeType': 'S'}], BillingMode='PAY_PER_REQUEST')

    return between


@pytest.mark.parametrize('change, reason, words', [
    (_other_ttl, Reason.TABLE_EXISTS, ["time-to-live is on 'another_ttl', not 'expiry_time'"]),
    (_other_keys, Reason.WRONG_KEY_SCHEMA, ["HASH key 'id' and no RANGE key", 'billing mode is PAY_PER_REQUEST']),
], ids=['other-ttl', 'other-keys'])
def test_a_retried_create_that_meets_another_table_fails_clearly(engine: LockTable, client_kind: str,
                                                                 new_table: str, change: Any, reason: str,
                                                                 words: List[str]) -> None:
    """Between the lost answer and the retry, the table became another one: not ours, refused."""
    with pytest.raises(DynamoDBLockError) as refused:
        create(engine, client_kind, new_table, between=change(engine, new_table))
    assert refused.value.code == DynamoDBLockError.UNKNOWN and refused.value.reason == reason
    assert 'is not the table asked for' in refused.value.message and 'exist_ok=True' in refused.value.message
    for word in words:
        assert word in refused.value.message, refused.value.message


def test_a_table_that_existed_before_is_still_refused_without_exist_ok(engine: LockTable,
                                                                       client_kind: str) -> None:
    """No retry, no benefit of the doubt: an existing table is TABLE_EXISTS, as before."""
    with pytest.raises(DynamoDBLockError) as refused:
        if client_kind == ASYNCIO:
            async def main() -> None:
                async with engine.new_async_client() as dynamodb:
                    await AsyncDynamoDBLockClient.create_dynamodb_table(dynamodb, table_name=engine.table_name)

            asyncio.run(main())
        else:
            DynamoDBLockClient.create_dynamodb_table(engine.client, table_name=engine.table_name)
    assert refused.value.reason == Reason.TABLE_EXISTS and 'pass exist_ok=True' in refused.value.message
