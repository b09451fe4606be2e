"""Drop-in compatibility with the published python_dynamodb_lock 0.9.1 / 0.9.3.

Import paths, names, signatures and defaults, constants, ``str()`` formats, and the layout of the
item in the table: what existing applications and a client of the published package rely on.
"""
from __future__ import annotations

import datetime
import inspect
import logging
import pickle
import uuid
from decimal import Decimal
from typing import Any

import pytest

import python_dynamodb_lock
from helpers import CallRecorder, LockClients
from python_dynamodb_lock.python_dynamodb_lock import (
    BaseDynamoDBLock,
    DynamoDBLock,
    DynamoDBLockClient,
    DynamoDBLockError,
)
from python_dynamodb_lock.testing import dummy_boto3_session

MODULE = 'python_dynamodb_lock.python_dynamodb_lock'


@pytest.fixture(scope='module')
def offline_resource() -> Any:
    """A boto3 resource pointing at a closed local port: for tests that make no calls."""
    return dummy_boto3_session().resource('dynamodb', endpoint_url='http://127.0.0.1:9')


# --- import paths ---------------------------------------------------------------------------

def test_star_import_from_the_module_gives_the_four_public_names() -> None:
    namespace: dict = {}
    exec(f'from {MODULE} import *', namespace)
    assert namespace['DynamoDBLockClient'] is DynamoDBLockClient
    assert namespace['BaseDynamoDBLock'] is BaseDynamoDBLock
    assert namespace['DynamoDBLock'] is DynamoDBLock
    assert namespace['DynamoDBLockError'] is DynamoDBLockError


def test_package_reexports_the_same_objects() -> None:
    assert python_dynamodb_lock.DynamoDBLockClient is DynamoDBLockClient
    assert python_dynamodb_lock.BaseDynamoDBLock is BaseDynamoDBLock
    assert python_dynamodb_lock.DynamoDBLock is DynamoDBLock
    assert python_dynamodb_lock.DynamoDBLockError is DynamoDBLockError


def test_lifecycle_logs_come_from_the_module_logger(offline_resource: Any,
                                                     caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger=MODULE)
    client = DynamoDBLockClient(offline_resource, owner_name='logger-test')
    client.close()
    names = {record.name for record in caplog.records if 'logger-test' in record.getMessage()}
    assert names == {MODULE}


# --- signatures and defaults ----------------------------------------------------------------

def _positional(function: Any) -> list:
    """(name, default) of the parameters that can be passed by position, ``self``/``cls`` excluded."""
    parameters = inspect.signature(function).parameters.values()
    return [(p.name, p.default) for p in parameters
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.name not in ('self', 'cls')]


def test_client_constructor_signature_and_defaults() -> None:
    assert _positional(DynamoDBLockClient.__init__) == [
        ('dynamodb_resource', inspect.Parameter.empty),
        ('table_name', 'DynamoDBLockTable'),
        ('partition_key_name', 'lock_key'),
        ('sort_key_name', 'sort_key'),
        ('ttl_attribute_name', 'expiry_time'),
        ('owner_name', None),
        ('heartbeat_period', datetime.timedelta(seconds=5)),
        ('safe_period', datetime.timedelta(seconds=20)),
        ('lease_duration', datetime.timedelta(seconds=30)),
        ('expiry_period', datetime.timedelta(hours=1)),
        ('heartbeat_tps', -1),
        ('app_callback_executor', None),
    ]


def test_acquire_release_close_signatures() -> None:
    assert _positional(DynamoDBLockClient.acquire_lock) == [
        ('partition_key', inspect.Parameter.empty),
        ('sort_key', '-'),
        ('retry_period', None),
        ('retry_timeout', None),
        ('additional_attributes', None),
        ('app_callback', None),
        ('raise_context_exception', False),
    ]
    assert _positional(DynamoDBLockClient.release_lock) == [
        ('lock', inspect.Parameter.empty), ('best_effort', True)]
    assert _positional(DynamoDBLockClient.close) == [('release_locks', False)]
    assert _positional(DynamoDBLock.release) == [('best_effort', True)]


def test_create_dynamodb_table_is_a_classmethod_with_the_published_parameters() -> None:
    assert isinstance(inspect.getattr_static(DynamoDBLockClient, 'create_dynamodb_table'), classmethod)
    assert _positional(DynamoDBLockClient.create_dynamodb_table) == [
        ('dynamodb_client', inspect.Parameter.empty),
        ('table_name', 'DynamoDBLockTable'),
        ('partition_key_name', 'lock_key'),
        ('sort_key_name', 'sort_key'),
        ('ttl_attribute_name', 'expiry_time'),
        ('read_capacity', 5),
        ('write_capacity', 5),
    ]


def test_client_class_attributes_hold_the_published_defaults() -> None:
    expected = {
        '_DEFAULT_TABLE_NAME': 'DynamoDBLockTable',
        '_DEFAULT_PARTITION_KEY_NAME': 'lock_key',
        '_DEFAULT_SORT_KEY_NAME': 'sort_key',
        '_DEFAULT_TTL_ATTRIBUTE_NAME': 'expiry_time',
        '_DEFAULT_HEARTBEAT_PERIOD': datetime.timedelta(seconds=5),
        '_DEFAULT_SAFE_PERIOD': datetime.timedelta(seconds=20),
        '_DEFAULT_LEASE_DURATION': datetime.timedelta(seconds=30),
        '_DEFAULT_EXPIRY_PERIOD': datetime.timedelta(hours=1),
        '_DEFAULT_HEARTBEAT_TPS': -1,
        '_DEFAULT_APP_CALLBACK_THREADPOOL_SIZE': 5,
        '_DEFAULT_READ_CAPACITY': 5,
        '_DEFAULT_WRITE_CAPACITY': 5,
        '_DEFAULT_SORT_KEY_VALUE': '-',
        '_COL_OWNER_NAME': 'owner_name',
        '_COL_LEASE_DURATION': 'lease_duration',
        '_COL_RECORD_VERSION_NUMBER': 'record_version_number',
    }
    actual = {name: getattr(DynamoDBLockClient, name) for name in expected}
    assert actual == expected


def test_default_callback_executor_has_five_workers(offline_resource: Any) -> None:
    client = DynamoDBLockClient(offline_resource)
    try:
        assert client._app_callback_executor._max_workers == 5  # private: published 0.9.1 attribute
    finally:
        client.close()


def test_default_owner_name_is_host_name_plus_random_hex(offline_resource: Any) -> None:
    import socket
    first = DynamoDBLockClient(offline_resource)
    second = DynamoDBLockClient(offline_resource)
    try:
        host = socket.getfqdn()
        for client in (first, second):
            assert client._owner_name.startswith(host)  # private: published 0.9.1 attribute
            suffix = client._owner_name[len(host):]  # private: published 0.9.1 attribute
            assert len(suffix) == 32 and int(suffix, 16) >= 0
        assert first._owner_name != second._owner_name  # private: published 0.9.1 attribute
    finally:
        first.close()
        second.close()


def test_constructor_accepts_every_argument_by_position(offline_resource: Any) -> None:
    client = DynamoDBLockClient(
        offline_resource, 'Table', 'pk', 'sk', 'ttl', 'me',
        datetime.timedelta(seconds=2), datetime.timedelta(seconds=8), datetime.timedelta(seconds=10),
        datetime.timedelta(minutes=5), 10, None,
    )
    try:
        # private: published 0.9.1 attributes
        assert (client._table_name, client._partition_key_name, client._sort_key_name,
                client._ttl_attribute_name, client._owner_name) == ('Table', 'pk', 'sk', 'ttl', 'me')
    finally:
        client.close()


def test_constructor_starts_two_daemon_threads_and_close_stops_them(offline_resource: Any) -> None:
    client = DynamoDBLockClient(offline_resource)
    threads = client.background_threads
    assert len(threads) == 2
    assert all(thread.is_alive() and thread.daemon for thread in threads)
    client.close()
    assert not any(thread.is_alive() for thread in threads)


# --- locks ----------------------------------------------------------------------------------

def test_base_lock_positional_constructor_and_attributes() -> None:
    lock = BaseDynamoDBLock('part/key one', 'sort|key', 'owner', 12, 'version-1', 1700000000.9, None)
    assert lock.partition_key == 'part/key one'
    assert lock.sort_key == 'sort|key'
    assert lock.owner_name == 'owner'
    assert lock.lease_duration == 12.0 and isinstance(lock.lease_duration, float)
    assert lock.record_version_number == 'version-1'
    assert lock.expiry_time == 1700000000 and isinstance(lock.expiry_time, int)
    assert lock.additional_attributes == {}
    assert lock.unique_identifier == 'part/key%20one|sort%7Ckey'


def test_unique_identifier_quotes_both_keys() -> None:
    import urllib.parse
    for partition_key, sort_key in [('a', '-'), ('ü € 😀', 'x y'), ('a|b', 'c|d'), ('%', '?&=')]:
        lock = BaseDynamoDBLock(partition_key, sort_key, 'o', 1, 'v', 0, {'k': 'v'})
        assert lock.unique_identifier == urllib.parse.quote(partition_key) + '|' + urllib.parse.quote(sort_key)


def test_lock_with_the_091_signature_has_no_raise_context_exception_by_default() -> None:
    recorder = _ReleaseRecorder()
    lock = DynamoDBLock('p', 's', 'owner', 30.0, 'v', 0, {'a': 1}, None, recorder)
    assert lock.raise_context_exception is False
    assert lock.status == DynamoDBLock.PENDING
    assert lock.app_callback is None
    assert lock.lock_client is recorder
    assert lock.additional_attributes == {'a': 1}


def test_lock_status_constants_equal_their_names() -> None:
    for name in ('PENDING', 'LOCKED', 'RELEASED', 'IN_DANGER', 'INVALID'):
        assert getattr(DynamoDBLock, name) == name


def test_lock_has_a_reentrant_thread_lock_and_monotonic_last_updated_time() -> None:
    lock = DynamoDBLock('p', 's', 'owner', 30.0, 'v', 0, None, None, _ReleaseRecorder(), True)
    assert lock.raise_context_exception is True
    with lock.thread_lock:
        with lock.thread_lock:   # reentrant: a second acquire in the same thread does not block
            pass
    import time
    assert abs(lock.last_updated_time - time.monotonic()) < 60


class _ReleaseRecorder:
    """A stand-in lock client that records release_lock calls."""

    def __init__(self) -> None:
        self.calls: list = []

    def release_lock(self, lock: Any, best_effort: bool = True) -> None:
        self.calls.append((lock, best_effort))


def test_lock_release_delegates_to_its_client() -> None:
    recorder = _ReleaseRecorder()
    lock = DynamoDBLock('p', 's', 'owner', 30.0, 'v', 0, None, None, recorder)
    lock.release()
    lock.release(best_effort=False)
    assert recorder.calls == [(lock, True), (lock, False)]


# --- errors ---------------------------------------------------------------------------------

def test_error_codes_are_constants_equal_to_their_names() -> None:
    for name in ('CLIENT_SHUTDOWN', 'ACQUIRE_TIMEOUT', 'LOCK_NOT_OWNED', 'LOCK_STOLEN',
                 'LOCK_IN_DANGER', 'UNKNOWN'):
        assert getattr(DynamoDBLockError, name) == name


def test_error_defaults_and_str_format() -> None:
    default = DynamoDBLockError()
    assert (default.code, default.message) == ('UNKNOWN', 'Unknown error')
    assert str(default) == 'DynamoDBLockError: UNKNOWN - Unknown error'
    error = DynamoDBLockError(DynamoDBLockError.LOCK_STOLEN, 'taken by b')
    assert str(error) == 'DynamoDBLockError: LOCK_STOLEN - taken by b'
    assert DynamoDBLockError(code='ACQUIRE_TIMEOUT', message='m').code == 'ACQUIRE_TIMEOUT'
    assert isinstance(error, Exception)


def test_error_args_repr_and_pickle_round_trip() -> None:
    error = DynamoDBLockError(DynamoDBLockError.ACQUIRE_TIMEOUT, 'gave up after 35s')
    assert error.args == ('ACQUIRE_TIMEOUT', 'gave up after 35s')
    assert 'ACQUIRE_TIMEOUT' in repr(error) and 'gave up after 35s' in repr(error)
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is DynamoDBLockError
    assert (copy.code, copy.message, copy.args) == (error.code, error.message, error.args)
    assert str(copy) == str(error)


# --- the item in the table ------------------------------------------------------------------
#
# The published attributes keep their names, DynamoDB types and meaning, so that a client of the
# published package reads our rows as locks (tests/test_interop.py runs the published 0.9.1 and
# 0.9.3 against this package on one table, in both directions). This package adds exactly
# fencing_token, acquisition_id and lease_expiry to a held lock's row, and keeps a released
# lock's row, marked released_at, for its fencing token (docs/changes.rst, docs/safety.rst).

PUBLISHED_ATTRIBUTES = {'lock_key', 'sort_key', 'owner_name', 'lease_duration', 'record_version_number',
                        'expiry_time'}
HELD_ATTRIBUTES = PUBLISHED_ATTRIBUTES | {'fencing_token', 'acquisition_id', 'lease_expiry'}
RELEASED_ATTRIBUTES = PUBLISHED_ATTRIBUTES | {'fencing_token', 'released_at'}


@pytest.mark.parametrize('lease, stored', [
    (datetime.timedelta(seconds=30), Decimal('30')),
    (datetime.timedelta(seconds=0.1), Decimal('0.1')),
    (datetime.timedelta(seconds=1.1), Decimal('1.1')),
])
def test_item_layout_on_the_wire(engine: Any, clients: LockClients, lease: datetime.timedelta,
                                 stored: Decimal) -> None:
    """The attributes and DynamoDB types a client of the published package reads, plus exactly
    the ones this package adds; and the row a release keeps."""
    client = clients.make(owner_name='owner-one', lease_duration=lease,
                          heartbeat_period=lease / 4, safe_period=lease / 2)
    key = f'layout-{uuid.uuid4().hex}'
    now = clients.clock.time()           # a ManualClock: the same at the write
    before = int(now)
    lock = client.acquire_lock(key, additional_attributes={'job': 'nightly', 'attempt': 3, 'tags': {'a', 'b'}})
    typed = engine.read_typed_item(key)
    assert typed is not None
    assert set(typed) == HELD_ATTRIBUTES | {'job', 'attempt', 'tags'}
    # The published attributes, as the published package writes them.
    assert typed['lock_key'] == {'S': key}
    assert typed['sort_key'] == {'S': '-'}
    assert typed['owner_name'] == {'S': 'owner-one'}
    assert Decimal(typed['lease_duration']['N']) == stored
    version = typed['record_version_number']['S']
    assert version == lock.record_version_number and uuid.UUID(version).version == 4
    assert int(typed['expiry_time']['N']) == before + 3600 == lock.expiry_time
    assert typed['job'] == {'S': 'nightly'}
    assert Decimal(typed['attempt']['N']) == 3
    assert sorted(typed['tags']['SS']) == ['a', 'b']
    # This package's own: the fencing token (on a new row: the writer's clock in microseconds,
    # plus one), the acquisition's id, and the lease's end on the holder's wall clock.
    assert set(typed['fencing_token']) == {'N'}
    assert int(typed['fencing_token']['N']) == lock.fencing_token == int(now * 1_000_000) + 1
    assert set(typed['acquisition_id']) == {'S'} and uuid.UUID(typed['acquisition_id']['S']).version == 4
    assert set(typed['lease_expiry']) == {'N'}
    assert abs(Decimal(typed['lease_expiry']['N']) - Decimal(repr(now)) - stored) <= Decimal('0.001')

    lock.release(best_effort=False)
    kept = engine.read_typed_item(key)
    assert kept is not None, 'a release deleted the row, and the fencing token with it'
    assert set(kept) == RELEASED_ATTRIBUTES          # acquisition id, lease end and job attributes gone
    assert kept['lock_key'] == {'S': key} and kept['sort_key'] == {'S': '-'}
    assert kept['owner_name'] == {'S': 'owner-one'}
    assert Decimal(kept['lease_duration']['N']) == 0   # published clients take it over after one poll
    released_version = kept['record_version_number']['S']
    assert released_version != version and uuid.UUID(released_version).version == 4
    assert int(kept['expiry_time']['N']) == before + 3600     # DynamoDB's TTL deletes it an expiry_period on
    assert kept['fencing_token'] == typed['fencing_token']
    assert set(kept['released_at']) == {'N'} and int(kept['released_at']['N']) == before


def test_item_layout_with_custom_attribute_names(engine: Any, client_kind: str) -> None:
    table_name = f'custom-{uuid.uuid4().hex[:8]}'
    DynamoDBLockClient.create_dynamodb_table(engine.client, table_name=table_name, partition_key_name='pk',
                                             sort_key_name='sk', ttl_attribute_name='ttl')
    factory = LockClients(engine, kind=client_kind)
    key = {'pk': {'S': 'resource'}, 'sk': {'S': 'part'}}
    try:
        client = factory.make(table_name=table_name, partition_key_name='pk', sort_key_name='sk',
                              ttl_attribute_name='ttl')
        lock = client.acquire_lock('resource', 'part')
        typed = engine.client.get_item(TableName=table_name, Key=key, ConsistentRead=True)['Item']
        assert set(typed) == {'pk', 'sk', 'owner_name', 'lease_duration', 'record_version_number', 'ttl',
                              'fencing_token', 'acquisition_id', 'lease_expiry'}
        assert 'N' in typed['ttl']
        assert int(typed['fencing_token']['N']) == lock.fencing_token
        lock.release(best_effort=False)
        kept = engine.client.get_item(TableName=table_name, Key=key, ConsistentRead=True)['Item']
        assert set(kept) == {'pk', 'sk', 'owner_name', 'lease_duration', 'record_version_number', 'ttl',
                             'fencing_token', 'released_at'}
        assert 'N' in kept['ttl'] and int(kept['fencing_token']['N']) == lock.fencing_token
    finally:
        factory.close_all()
        engine.client.delete_table(TableName=table_name)


def test_acquire_writes_with_one_conditional_update(engine: Any, clients: LockClients) -> None:
    """The published cost model: acquiring a free lock is one conditional write, refused where a
    held lock is. It is an UpdateItem (not the published PutItem), so that the row's fencing
    token is carried forward, atomically, by the same write."""
    client = clients.make()
    with CallRecorder(engine.resource) as calls:
        lock = client.acquire_lock('cost-model')
    assert calls.operations() == ['UpdateItem']
    params = calls.calls[0].params
    names = params['ExpressionAttributeNames']
    condition = params['ConditionExpression']
    assert 'attribute_not_exists' in condition
    # Free means: no row, or a row a release kept (released_at); a held lock refuses the write.
    # The table's key goes through ExpressionAttributeNames; this package's own names are
    # written directly.
    assert {names[name] for name in names if name in condition} == {'lock_key'}
    assert condition.replace('#partition_key', names['#partition_key']) \
        == 'attribute_not_exists(lock_key) OR attribute_exists(released_at)'
    assert 'fencing_token = if_not_exists(fencing_token, :token_floor) + :one' in params['UpdateExpression']
    assert params['ReturnValuesOnConditionCheckFailure'] == 'ALL_OLD'   # the holder, without a read
    other = clients.make()
    with CallRecorder(engine.resource) as calls:
        assert other.try_acquire_lock('cost-model') is None
    assert calls.operations() == ['UpdateItem']
    lock.release(best_effort=False)
    with CallRecorder(engine.resource) as calls:
        again = other.acquire_lock('cost-model')       # the kept row is free: one write, no wait
    assert calls.operations() == ['UpdateItem']
    assert again.fencing_token == lock.fencing_token + 1
