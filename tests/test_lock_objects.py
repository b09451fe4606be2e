"""Lock objects: item conversion both ways, and the context-manager form of a held lock."""
from __future__ import annotations

import datetime
import logging
import uuid
from decimal import Decimal
from typing import Any, Iterator

import pytest

from helpers import CallRecorder, LockClients, is_registered
from python_dynamodb_lock.python_dynamodb_lock import BaseDynamoDBLock, DynamoDBLock, DynamoDBLockClient
from python_dynamodb_lock.testing import dummy_boto3_session

MODULE = 'python_dynamodb_lock.python_dynamodb_lock'


@pytest.fixture(scope='module')
def offline_client() -> Iterator[DynamoDBLockClient]:
    """A client that is never asked to call DynamoDB (its endpoint is a closed local port).

    The conversion helpers (``_get_item_from_lock``, ``_get_lock_from_item``) are published
    private methods of the threaded client only: their tests are ``threaded_only``."""
    resource = dummy_boto3_session().resource('dynamodb', endpoint_url='http://127.0.0.1:9')
    client = DynamoDBLockClient(resource, partition_key_name='pk', sort_key_name='sk', ttl_attribute_name='ttl')
    yield client
    client.close()


# --- item conversion ------------------------------------------------------------------------

@pytest.mark.threaded_only
@pytest.mark.parametrize('lease, stored', [(30, Decimal('30')), (0.1, Decimal('0.1')), (1.1, Decimal('1.1')),
                                           (2.5, Decimal('2.5'))])
def test_item_from_lock_has_the_exact_layout(offline_client: DynamoDBLockClient, lease: float,
                                              stored: Decimal) -> None:
    lock = BaseDynamoDBLock('p', 's', 'owner', lease, 'version', 1700000123, {'extra': 'x', 'n': Decimal(7)})
    item = offline_client._get_item_from_lock(lock)  # private: published 0.9.1 attribute
    assert item == {
        'pk': 'p', 'sk': 's', 'owner_name': 'owner', 'lease_duration': stored,
        'record_version_number': 'version', 'ttl': 1700000123, 'extra': 'x', 'n': Decimal(7),
    }
    assert isinstance(item['lease_duration'], Decimal)   # boto3 refuses floats
    assert isinstance(item['ttl'], int)


@pytest.mark.threaded_only
def test_item_from_lock_never_lets_additional_attributes_override_lock_attributes(
        offline_client: DynamoDBLockClient) -> None:
    lock = BaseDynamoDBLock('p', 's', 'owner', 30, 'version', 17, {'owner_name': 'forged', 'pk': 'other'})
    item = offline_client._get_item_from_lock(lock)  # private: published 0.9.1 attribute
    assert item['owner_name'] == 'owner' and item['pk'] == 'p'


@pytest.mark.threaded_only
def test_lock_from_item_reads_every_attribute(offline_client: DynamoDBLockClient) -> None:
    item = {'pk': 'p', 'sk': 's', 'owner_name': 'owner', 'lease_duration': Decimal('1.1'),
            'record_version_number': 'v', 'ttl': Decimal('1700000123'), 'color': 'blue', 'count': Decimal(2)}
    lock = offline_client._get_lock_from_item(item)  # private: published 0.9.1 attribute
    assert type(lock) is BaseDynamoDBLock
    assert (lock.partition_key, lock.sort_key, lock.owner_name, lock.record_version_number) == ('p', 's', 'owner', 'v')
    assert lock.lease_duration == 1.1 and isinstance(lock.lease_duration, float)
    assert lock.expiry_time == 1700000123 and isinstance(lock.expiry_time, int)
    assert lock.additional_attributes == {'color': 'blue', 'count': Decimal(2)}


@pytest.mark.threaded_only
@pytest.mark.parametrize('lease', [0.1, 1.1, 30.0, 12.345])
def test_conversion_round_trip(offline_client: DynamoDBLockClient, lease: float) -> None:
    original = BaseDynamoDBLock('p', 's', 'owner', lease, 'v', 1700000000, {'a': 'b'})
    # private: published 0.9.1 attribute
    copy = offline_client._get_lock_from_item(offline_client._get_item_from_lock(original))
    assert vars(copy) == vars(original)


def test_str_of_a_lock_names_it(offline_client: DynamoDBLockClient) -> None:
    lock = BaseDynamoDBLock('p q', 's', 'owner-x', 30, 'v', 0, None)
    assert 'p%20q|s' in str(lock) and 'owner-x' in str(lock)


# --- context manager ------------------------------------------------------------------------

def assert_released(engine: Any, lock: Any, key: str) -> None:
    """The lock's row no longer records a held lock; it is kept, marked released, with the
    lock's fencing token (so the next token is larger)."""
    assert engine.read_held_row(key) is None
    row = engine.read_item(key)
    assert row is not None and 'released_at' in row
    assert row['fencing_token'] == lock.fencing_token



def test_context_manager_returns_the_lock_and_releases_on_exit(engine: Any, clients: LockClients) -> None:
    client = clients.make()
    lock = client.acquire_lock('ctx')
    with CallRecorder(engine.resource) as calls:
        with lock as entered:
            assert entered is lock
            assert engine.read_held_row('ctx') is not None
    assert calls.operations() == ['UpdateItem']
    assert lock.record_version_number in calls.calls[0].expression_values().values()
    assert lock.status == DynamoDBLock.RELEASED
    assert_released(engine, lock, 'ctx')
    assert not is_registered(client, lock)


def test_context_manager_suppresses_exceptions_by_default_and_logs_them(
        engine: Any, clients: LockClients, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger=MODULE)
    client = clients.make()
    with client.acquire_lock('ctx-suppress') as lock:
        raise ValueError('boom inside the block')
    assert lock.status == DynamoDBLock.RELEASED
    assert_released(engine, lock, 'ctx-suppress')
    logged = [record for record in caplog.records
              if record.exc_info and isinstance(record.exc_info[1], ValueError)]
    assert len(logged) == 1
    assert logged[0].levelno >= logging.WARNING
    assert logged[0].exc_info[2] is not None   # with its traceback


def test_context_manager_propagates_when_asked(engine: Any, clients: LockClients) -> None:
    client = clients.make()
    with pytest.raises(ValueError, match='boom'):
        with client.acquire_lock('ctx-raise', raise_context_exception=True) as lock:
            raise ValueError('boom')
    assert lock.status == DynamoDBLock.RELEASED
    assert_released(engine, lock, 'ctx-raise')


@pytest.mark.parametrize('exception', [KeyboardInterrupt, SystemExit, GeneratorExit])
def test_base_exceptions_always_propagate_and_still_release(engine: Any, clients: LockClients,
                                                           exception: type) -> None:
    client = clients.make()
    with pytest.raises(exception):
        with client.acquire_lock(f'ctx-{exception.__name__}') as lock:
            raise exception()
    assert lock.status == DynamoDBLock.RELEASED
    assert_released(engine, lock, f'ctx-{exception.__name__}')


@pytest.mark.threaded_only
def test_context_manager_with_a_stand_in_client_releases_best_effort() -> None:
    """The published contract for ``__exit__``: release(best_effort=True), then suppress."""
    calls: list = []

    class StandIn:
        def release_lock(self, lock: Any, best_effort: bool = True) -> None:
            calls.append(best_effort)

    lock = DynamoDBLock('p', 's', 'o', 30.0, 'v', 0, None, None, StandIn())
    with lock:
        raise RuntimeError('suppressed')
    assert calls == [True]


def test_context_manager_exit_on_a_lock_stolen_meanwhile_does_not_raise(engine: Any, clients: LockClients) -> None:
    client = clients.make()
    with client.acquire_lock('ctx-stolen', raise_context_exception=True) as lock:
        engine.client.update_item(
            TableName=engine.table_name, Key={'lock_key': {'S': 'ctx-stolen'}, 'sort_key': {'S': '-'}},
            UpdateExpression='SET record_version_number = :v, owner_name = :o',
            ExpressionAttributeValues={':v': {'S': str(uuid.uuid4())}, ':o': {'S': 'thief'}})
    assert lock.status == DynamoDBLock.INVALID
    assert engine.read_item('ctx-stolen')['owner_name'] == 'thief'


def test_context_manager_with_fractional_lease(engine: Any, clients: LockClients) -> None:
    client = clients.make(lease_duration=datetime.timedelta(seconds=1.1),
                          heartbeat_period=datetime.timedelta(seconds=0.3),
                          safe_period=datetime.timedelta(seconds=0.6))
    with client.acquire_lock('ctx-fraction') as lock:
        assert engine.read_item('ctx-fraction')['lease_duration'] == Decimal('1.1')
    assert lock.status == DynamoDBLock.RELEASED
