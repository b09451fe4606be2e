"""Errors the library diagnoses keep the published code and carry a machine-readable reason
(``DynamoDBLockError.reason``), end to end through the public API of both clients, so that an
application never has to parse a message. The table-driven core tests judge single answers;
these check that each reason reaches the caller of acquire, release, get, list and create.

Throttling, access denial and a refused connection are not something a local engine does: they
are injected with botocore hooks (FaultInjector) or an endpoint nobody listens on.
"""
from __future__ import annotations

import datetime
import socket
from typing import Any

import pytest
from botocore.config import Config

from helpers import FaultInjector, LockClients
from python_dynamodb_lock import Reason
from python_dynamodb_lock.python_dynamodb_lock import DynamoDBLockClient, DynamoDBLockError
from python_dynamodb_lock.testing import default_client_config, dummy_boto3_session

zero = datetime.timedelta(0)


def test_a_missing_table_is_table_not_found(engine: Any, clients: LockClients) -> None:
    client = clients.make(table_name=f'{engine.table_name}-missing')
    with pytest.raises(DynamoDBLockError) as raised:
        client.acquire_lock('k', retry_timeout=zero)
    assert (raised.value.code, raised.value.reason) == (DynamoDBLockError.UNKNOWN, Reason.TABLE_NOT_FOUND)
    assert f'{engine.table_name}-missing' in raised.value.message
    with pytest.raises(DynamoDBLockError) as raised:
        client.get_lock('k')
    assert raised.value.reason == Reason.TABLE_NOT_FOUND
    with pytest.raises(DynamoDBLockError) as raised:
        list(client.list_locks())
    assert raised.value.reason == Reason.TABLE_NOT_FOUND


def test_creating_an_existing_table_is_table_exists(engine: Any) -> None:
    with pytest.raises(DynamoDBLockError) as raised:
        DynamoDBLockClient.create_dynamodb_table(engine.client, table_name=engine.table_name)
    assert (raised.value.code, raised.value.reason) == (DynamoDBLockError.UNKNOWN, Reason.TABLE_EXISTS)


def test_a_table_with_other_keys_is_wrong_key_schema(engine: Any, clients: LockClients) -> None:
    other = f'{engine.table_name}-other-keys'
    engine.client.create_table(TableName=other, KeySchema=[{'AttributeName': 'id', 'KeyType': 'HASH'}],
                               AttributeDefinitions=[{'AttributeName': 'id', 'AttributeType': 'S'}],
                               BillingMode='PAY_PER_REQUEST')
    with pytest.raises(DynamoDBLockError) as raised:
        DynamoDBLockClient.create_dynamodb_table(engine.client, table_name=other, exist_ok=True)
    assert (raised.value.code, raised.value.reason) == (DynamoDBLockError.UNKNOWN, Reason.WRONG_KEY_SCHEMA)
    client = clients.make(table_name=other)
    with pytest.raises(DynamoDBLockError) as raised:
        client.acquire_lock('k', retry_timeout=zero)
    assert raised.value.code == DynamoDBLockError.UNKNOWN
    assert raised.value.reason in (Reason.WRONG_KEY_SCHEMA, Reason.VALIDATION)
    assert engine.client.scan(TableName=other)['Count'] == 0


@pytest.mark.parametrize('code, reason', [
    ('ProvisionedThroughputExceededException', Reason.THROTTLED),
    ('ThrottlingException', Reason.THROTTLED),
    ('AccessDeniedException', Reason.ACCESS_DENIED),
])
def test_refusals_of_the_acquiring_write_carry_their_reason(engine: Any, clients: LockClients,
                                                            code: str, reason: str) -> None:
    client = clients.make()
    with FaultInjector(engine.resource) as faults:
        faults.fail_calls('UpdateItem', code=code, times=None)
        with pytest.raises(DynamoDBLockError) as raised:
            client.acquire_lock('refused', retry_timeout=zero)
    assert (raised.value.code, raised.value.reason) == (DynamoDBLockError.UNKNOWN, reason)
    assert engine.read_item('refused') is None


def test_a_strict_release_that_dynamodb_refuses_carries_the_reason(engine: Any, clients: LockClients) -> None:
    client = clients.make()
    lock = client.acquire_lock('held')
    with FaultInjector(engine.resource) as faults:
        faults.fail_calls('UpdateItem', code='AccessDeniedException', times=None)
        faults.fail_calls('DeleteItem', code='AccessDeniedException', times=None)
        with pytest.raises(DynamoDBLockError) as raised:
            client.release_lock(lock, best_effort=False)
    assert (raised.value.code, raised.value.reason) == (DynamoDBLockError.UNKNOWN, Reason.ACCESS_DENIED)
    assert engine.read_held_row('held') is not None   # not released, and not reported as released


def test_5xx_after_retries_is_unreachable(engine: Any, clients: LockClients) -> None:
    client = clients.make()
    with FaultInjector(engine.resource) as faults:
        faults.fail_calls('UpdateItem', code='InternalServerError', status=500, times=None)
        with pytest.raises(DynamoDBLockError) as raised:
            client.acquire_lock('unanswered', retry_timeout=zero)
    assert (raised.value.code, raised.value.reason) == (DynamoDBLockError.UNKNOWN, Reason.UNREACHABLE)


def test_a_refused_connection_is_unreachable_without_a_cleanup_warning(
        caplog: pytest.LogCaptureFixture) -> None:
    with socket.socket() as probe:           # a port nobody listens on
        probe.bind(('127.0.0.1', 0))
        port = probe.getsockname()[1]
    session = dummy_boto3_session()
    resource = session.resource('dynamodb', endpoint_url=f'http://127.0.0.1:{port}',
                                config=default_client_config().merge(Config(
                                    retries={'max_attempts': 1, 'mode': 'standard'}, connect_timeout=1,
                                    read_timeout=1)))
    client = DynamoDBLockClient(resource, background_heartbeats=False)
    try:
        with caplog.at_level('WARNING', logger='python_dynamodb_lock'):
            with pytest.raises(DynamoDBLockError) as raised:
                client.acquire_lock('k', retry_timeout=zero)
    finally:
        client.close()
    assert (raised.value.code, raised.value.reason) == (DynamoDBLockError.UNKNOWN, Reason.UNREACHABLE)
    assert not [record for record in caplog.records if 'clean' in record.getMessage().lower()]
