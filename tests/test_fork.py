"""A client inherited through fork refuses to work in the child, and never touches the parent's
locks (issue: a child used to acquire, be told it held the lock, and never renew it).

On DynamoDB Local, with a real os.fork() and with multiprocessing's fork start method.
"""
from __future__ import annotations

import json
import multiprocessing
import os
import warnings
from datetime import timedelta
from typing import Any, Dict, Iterator

import pytest

from helpers import wait_until
from python_dynamodb_lock.python_dynamodb_lock import DynamoDBLock, DynamoDBLockClient, DynamoDBLockError
from python_dynamodb_lock.testing import default_client_config, dummy_boto3_session

pytestmark = pytest.mark.skipif(not hasattr(os, 'fork'), reason='needs os.fork')
seconds = timedelta
_inherited: Dict[str, Any] = {}


@pytest.fixture
def parent_client(local_engine: Any) -> Iterator[DynamoDBLockClient]:
    client = DynamoDBLockClient(local_engine.resource, table_name=local_engine.table_name, owner_name='parent',
                                heartbeat_period=seconds(seconds=0.2), safe_period=seconds(seconds=1),
                                lease_duration=seconds(seconds=2))
    yield client
    client.close()


def what_the_child_sees(client: DynamoDBLockClient, held: DynamoDBLock, endpoint: str, table: str) -> Dict[str, Any]:
    """Run in the forked child: every operation of the inherited client, then a client of its own."""
    seen: Dict[str, Any] = {}
    for name, operation in [
        ('acquire', lambda: client.acquire_lock('child-key', retry_timeout=seconds(0))),
        ('try_acquire', lambda: client.try_acquire_lock('child-key')),
        ('release', lambda: held.release(best_effort=False)),
        ('release_best_effort', lambda: held.release()),
        ('get', lambda: client.get_lock(held.partition_key)),
        ('heartbeat', lambda: client.send_heartbeats()),
    ]:
        try:
            operation()
            seen[name] = 'worked'
        except DynamoDBLockError as error:
            seen[name] = [error.code, error.reason, 'after forking' in error.message]
    client.close(release_locks=True)       # must release nothing of the parent's
    resource = dummy_boto3_session().resource('dynamodb', endpoint_url=endpoint, config=default_client_config())
    own = DynamoDBLockClient(resource, table_name=table, owner_name='child')
    lock = own.acquire_lock('child-own-key', retry_timeout=seconds(0))
    seen['own_client'] = lock.status
    lock.release(best_effort=False)
    own.close()
    return seen


REFUSED = [DynamoDBLockError.UNKNOWN, 'FORKED', True]


def assert_refused_everywhere(seen: Dict[str, Any]) -> None:
    for name in ('acquire', 'try_acquire', 'release', 'release_best_effort', 'get', 'heartbeat'):
        assert seen[name] == REFUSED, (name, seen)
    assert seen['own_client'] == DynamoDBLock.LOCKED


def assert_parent_unharmed(engine: Any, client: DynamoDBLockClient, held: DynamoDBLock) -> None:
    assert engine.read_item('child-key') is None
    versions = {held.record_version_number}
    wait_until(lambda: versions.add(held.record_version_number) or len(versions) >= 3,
               message=lambda: 'the parent stopped renewing its lock')
    assert held.status == DynamoDBLock.LOCKED
    assert engine.read_item(held.partition_key)['record_version_number'] == held.record_version_number


def test_os_fork(local_engine: Any, parent_client: DynamoDBLockClient) -> None:
    held = parent_client.acquire_lock('parent-key')
    reader, writer = os.pipe()
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', DeprecationWarning)   # "multi-threaded process forked": that is the point
        pid = os.fork()
    if pid == 0:                                               # the child
        code = 0
        try:
            seen = what_the_child_sees(parent_client, held, local_engine.endpoint_url, local_engine.table_name)
            os.write(writer, json.dumps(seen).encode())
        except BaseException as error:                         # reported to the parent
            os.write(writer, json.dumps({'child_error': repr(error)}).encode())
            code = 1
        finally:
            os._exit(code)
    os.close(writer)
    with os.fdopen(reader) as pipe:
        seen = json.loads(pipe.read())
    _, status = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(status) == 0, seen
    assert_refused_everywhere(seen)
    assert_parent_unharmed(local_engine, parent_client, held)


def _child_task(endpoint: str, table: str) -> Dict[str, Any]:
    return what_the_child_sees(_inherited['client'], _inherited['lock'], endpoint, table)


def test_multiprocessing_fork(local_engine: Any, parent_client: DynamoDBLockClient) -> None:
    held = parent_client.acquire_lock('parent-key')
    _inherited.update(client=parent_client, lock=held)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter('ignore', DeprecationWarning)
            with multiprocessing.get_context('fork').Pool(1) as pool:
                seen = pool.apply(_child_task, (local_engine.endpoint_url, local_engine.table_name))
    finally:
        _inherited.clear()
    assert_refused_everywhere(seen)
    assert_parent_unharmed(local_engine, parent_client, held)
