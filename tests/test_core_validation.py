"""Constructor checks (corrections 4 and 12): settings that cannot work are refused before any
thread (or, for the asyncio client, task) starts; settings that work but are unsafe are logged
as warnings. Every test runs with both kinds of client."""
from __future__ import annotations

import asyncio
import datetime
import logging
import threading
from typing import Any, Dict, Iterator

import botocore.config
import pytest

from helpers import THREADED, LockClients, is_asyncio
from python_dynamodb_lock.python_dynamodb_lock import DynamoDBLockClient
from python_dynamodb_lock.testing import SystemClock, default_client_config, dummy_boto3_session

MODULE = 'python_dynamodb_lock.python_dynamodb_lock'
seconds = datetime.timedelta


@pytest.fixture(scope='module')
def offline_resource() -> Any:
    """A boto3 resource pointing at a closed local port: construction makes no calls."""
    return dummy_boto3_session().resource('dynamodb', endpoint_url='http://127.0.0.1:9',
                                          config=default_client_config())


@pytest.fixture
def lock_clients(client_kind: str) -> Iterator[LockClients]:
    factory = LockClients(kind=client_kind)
    yield factory
    factory.close_all()


@pytest.fixture
def make(offline_resource: Any, lock_clients: LockClients) -> Any:
    """Makes clients of the test's kind as an application would: background heartbeats, the
    real clock, the default callback executor."""
    def factory(resource: Any = offline_resource, **kwargs: Any) -> DynamoDBLockClient:
        kwargs.setdefault('clock', SystemClock())
        kwargs.setdefault('app_callback_executor', None)
        return lock_clients.make(resource, hand_driven=False, **kwargs)

    return factory


def background_workers(lock_clients: LockClients) -> int:
    """The threaded clients' heartbeat threads, or the asyncio clients' heartbeat tasks."""
    if lock_clients.kind == THREADED:
        return sum(1 for thread in threading.enumerate() if thread.name.startswith('DynamoDBLockClient-heartbeat-'))

    async def count() -> int:
        return sum(1 for task in asyncio.all_tasks()
                   if task.get_name().startswith('AsyncDynamoDBLockClient-heartbeat-') and not task.done())

    counted: int = lock_clients.runner.run(count())
    return counted


BAD_SETTINGS = [
    pytest.param(dict(heartbeat_tps=0), ValueError, id='tps-zero'),
    pytest.param(dict(heartbeat_tps=-2), ValueError, id='tps-negative'),
    pytest.param(dict(heartbeat_tps=float('nan')), ValueError, id='tps-nan'),
    pytest.param(dict(heartbeat_tps='10'), TypeError, id='tps-str'),
    pytest.param(dict(heartbeat_tps=True), TypeError, id='tps-bool'),
    pytest.param(dict(heartbeat_period=seconds(0)), ValueError, id='heartbeat-zero'),
    pytest.param(dict(heartbeat_period=seconds(seconds=-5)), ValueError, id='heartbeat-negative'),
    pytest.param(dict(heartbeat_period=5), TypeError, id='heartbeat-int'),
    pytest.param(dict(safe_period=seconds(seconds=-1)), ValueError, id='safe-negative'),
    pytest.param(dict(safe_period=20.0), TypeError, id='safe-float'),
    pytest.param(dict(lease_duration=seconds(0)), ValueError, id='lease-zero'),
    pytest.param(dict(lease_duration='30s'), TypeError, id='lease-str'),
    pytest.param(dict(expiry_period=seconds(seconds=-1)), ValueError, id='expiry-negative'),
    pytest.param(dict(expiry_period=3600), TypeError, id='expiry-int'),
    pytest.param(dict(heartbeat_period=seconds(seconds=30), lease_duration=seconds(seconds=30)), ValueError,
                 id='heartbeat-equals-lease'),
    pytest.param(dict(heartbeat_period=seconds(seconds=40), safe_period=seconds(seconds=50),
                      lease_duration=seconds(seconds=30)), ValueError, id='heartbeat-longer-than-lease'),
    pytest.param(dict(expiry_period=seconds(seconds=29)), ValueError, id='expiry-shorter-than-lease'),
    pytest.param(dict(table_name=''), ValueError, id='table-name-empty'),
    pytest.param(dict(table_name=None), TypeError, id='table-name-none'),
    pytest.param(dict(partition_key_name=''), ValueError, id='partition-key-name-empty'),
    pytest.param(dict(sort_key_name='lock_key'), ValueError, id='key-names-equal'),
    pytest.param(dict(ttl_attribute_name='owner_name'), ValueError, id='ttl-name-is-a-lock-attribute'),
    # The attributes fencing added are the lock's own too: a key or the TTL may not take their names.
    pytest.param(dict(ttl_attribute_name='fencing_token'), ValueError, id='ttl-name-is-the-fencing-token'),
    pytest.param(dict(partition_key_name='released_at'), ValueError, id='partition-key-name-is-released-at'),
    pytest.param(dict(sort_key_name='acquisition_id'), ValueError, id='sort-key-name-is-the-acquisition-id'),
    pytest.param(dict(ttl_attribute_name='lease_expiry'), ValueError, id='ttl-name-is-the-lease-expiry'),
    pytest.param(dict(owner_name=''), ValueError, id='owner-empty'),
    pytest.param(dict(owner_name=42), TypeError, id='owner-int'),
    pytest.param(dict(app_callback_executor=object()), TypeError, id='executor-without-submit'),
]


@pytest.mark.parametrize('settings, error', BAD_SETTINGS)
def test_settings_that_cannot_work_are_refused_before_threads_start(make: Any, lock_clients: LockClients,
                                                                   settings: Dict[str, Any], error: type) -> None:
    before = background_workers(lock_clients)
    with pytest.raises(error):
        make(**settings)
    assert background_workers(lock_clients) == before


def test_a_resource_is_required(make: Any) -> None:
    with pytest.raises(TypeError):
        make(None)
    with pytest.raises(TypeError):
        make('dynamodb')


@pytest.mark.parametrize('settings, warns', [
    pytest.param(dict(heartbeat_period=seconds(seconds=15), safe_period=seconds(seconds=20)), 'heartbeat_period',
                 id='heartbeat-over-a-third-of-lease'),
    pytest.param(dict(safe_period=seconds(seconds=30)), 'safe_period', id='safe-equals-lease'),
    pytest.param(dict(safe_period=seconds(seconds=45)), 'safe_period', id='safe-longer-than-lease'),
])
def test_unsafe_settings_are_logged_as_warnings(make: Any, caplog: pytest.LogCaptureFixture,
                                                settings: Dict[str, Any], warns: str) -> None:
    caplog.set_level(logging.DEBUG, logger=MODULE)
    make(**settings)
    warnings = [record.getMessage() for record in caplog.records if record.levelno == logging.WARNING]
    assert any(warns in message for message in warnings), warnings


def test_the_defaults_log_no_warning(make: Any, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger=MODULE)
    make()
    make(heartbeat_tps=50)
    assert [record for record in caplog.records if record.levelno >= logging.WARNING] == []


@pytest.mark.parametrize('connect, read, safe, mentioned', [
    (60, 60, 20, True),        # botocore's defaults: one stuck attempt outlasts the safe period
    (2, 15, 20, False),
    (5, 15, 20, False),        # exactly the safe period: fine
    (5, 16, 20, True),
    (1, 3, 2, True),
])
def test_a_client_whose_timeouts_outlast_the_safe_period_is_told_once_at_info(
        make: Any, caplog: pytest.LogCaptureFixture, connect: float, read: float, safe: float,
        mentioned: bool) -> None:
    """Not a WARNING: botocore's defaults are what the published usage gets, and locks work
    with them (issue 18); the line says how to recover from a stuck call in time."""
    caplog.set_level(logging.DEBUG, logger=MODULE)
    config = botocore.config.Config(connect_timeout=connect, read_timeout=read)
    resource = dummy_boto3_session().resource('dynamodb', endpoint_url='http://127.0.0.1:9', config=config)
    client = make(resource, safe_period=seconds(seconds=safe), heartbeat_period=seconds(seconds=1),
                  lease_duration=seconds(seconds=max(30, 2 * safe)))
    client.close()
    notes = [record for record in caplog.records
             if 'read_timeout' in record.getMessage() and f'{float(safe)}' in record.getMessage()]
    assert [record.levelno for record in notes] == ([logging.INFO] if mentioned else []), notes


def test_fractional_periods_are_accepted(make: Any) -> None:
    client = make(heartbeat_period=seconds(seconds=0.03), safe_period=seconds(seconds=0.06),
                  lease_duration=seconds(seconds=0.1))
    assert client.lease_duration == 0.1
    if not is_asyncio(client):
        assert client._lease_duration_s == 0.1      # the threaded client's published private attribute

