"""A table shared with the published package: 0.9.1 and the 0.9.3 fork, run for real.

Each published release is installed (``pip install --no-deps --target``, from PyPI, cached under
``.published/``) and run in its own process against DynamoDB Local, holding and waiting for the
same keys as this package's clients. Checked in both directions: a held lock excludes the other
package; a released lock (this package keeps the row, marked released, for its fencing token)
is taken by the other; an abandoned lock is taken over; and a lock written by a published
client, which carries no fencing token, is detected. A lock on an existing item
(``lock_existing_item=True``) and a published lock exclude each other too, and the item's own
attributes survive.
"""
from __future__ import annotations

import contextlib
import json
import logging
import os
import pathlib
import shutil
import subprocess
import sys
import threading
import time
from datetime import timedelta
from typing import Any, Dict, Iterator

import pytest

from conftest import skip_or_fail
from python_dynamodb_lock.python_dynamodb_lock import DynamoDBLockClient

ROOT = pathlib.Path(__file__).resolve().parent.parent
PUBLISHED = {
    '0.9.1': 'python-dynamodb-lock==0.9.1',
    '0.9.3': 'python-dynamodb-lock-whatnick==0.9.3',
}
MODULE = 'python_dynamodb_lock.python_dynamodb_lock'
HEARTBEAT, SAFE, LEASE, EXPIRY = 0.25, 1.0, 2.0, 4.0
seconds = timedelta


def published_folder(version: str) -> pathlib.Path:
    """The published release ``version``, installed once under ``.published/`` (pip --target).

    Several pytest processes (xdist workers, or two runs in one checkout) may ask at once: the
    check and the install happen under an exclusive lock on ``.published/.lock``, so one of them
    installs and the others wait for it and find the copy complete.
    """
    folder = ROOT / '.published' / version
    with installing_lock(ROOT / '.published' / '.lock'):
        if not (folder / 'python_dynamodb_lock' / 'python_dynamodb_lock.py').exists():
            shutil.rmtree(folder, ignore_errors=True)     # a half-installed copy: pip would not replace it
            result = subprocess.run([sys.executable, '-m', 'pip', 'install', '--quiet', '--disable-pip-version-check',
                                     '--no-deps', '--target', str(folder), PUBLISHED[version]],
                                    capture_output=True, text=True, timeout=300)
            if result.returncode != 0:
                skip_or_fail(f'could not install {PUBLISHED[version]}: {result.stderr[-500:]}')
    return folder


@contextlib.contextmanager
def installing_lock(path: pathlib.Path) -> Iterator[None]:
    """An exclusive lock between processes on ``path`` (flock); no lock where there is no fcntl
    (Windows): there, let one process install the copies first (for example a run of this file alone)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, 'a') as handle:
        try:
            import fcntl
        except ImportError:
            yield
            return
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


class Published:
    """A published client in its own process, driven line by line."""

    def __init__(self, version: str, endpoint: str, table: str, **settings: float) -> None:
        """``settings``: seconds other than the module's for ``heartbeat``, ``safe``, ``lease``, ``expiry``."""
        config = {'endpoint': endpoint, 'table': table, 'owner': f'published-{version}', 'heartbeat': HEARTBEAT,
                  'safe': SAFE, 'lease': LEASE, 'expiry': EXPIRY, **settings}
        env = {**os.environ, 'PYTHONPATH': str(published_folder(version))}
        self.process = subprocess.Popen(
            [sys.executable, str(ROOT / 'tests' / '_published_worker.py'), json.dumps(config)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env, cwd=str(ROOT / 'tests'))
        ready = self.next_event()
        assert ready['event'] == 'ready' and str(published_folder(version)) in ready['file'], ready

    def next_event(self) -> Dict[str, Any]:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        assert line, f'the published client exited (code {self.process.poll()})'
        event: Dict[str, Any] = json.loads(line)
        return event

    def send(self, **command: Any) -> Dict[str, Any]:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(command) + '\n')
        self.process.stdin.flush()
        return self.next_event() if command['cmd'] != 'exit' else {}

    def acquire(self, key: str, timeout: float, period: float = 0.25) -> Dict[str, Any]:
        return self.send(cmd='acquire', key=key, retry_period=period, retry_timeout=timeout)

    def close(self) -> None:
        if self.process.poll() is None:
            self.send(cmd='exit')
            self.process.wait(30)


@pytest.fixture(params=sorted(PUBLISHED))
def published(request: pytest.FixtureRequest, local_engine: Any) -> Iterator[Published]:
    client = Published(request.param, local_engine.endpoint_url, local_engine.table_name)
    yield client
    client.close()


@pytest.fixture
def ours(local_engine: Any) -> Iterator[DynamoDBLockClient]:
    client = DynamoDBLockClient(local_engine.resource, table_name=local_engine.table_name, owner_name='ours',
                                heartbeat_period=seconds(seconds=HEARTBEAT), safe_period=seconds(seconds=SAFE),
                                lease_duration=seconds(seconds=LEASE), expiry_period=seconds(seconds=EXPIRY))
    yield client
    client.close()


def test_a_lock_held_by_this_package_excludes_the_published_one(local_engine: Any, published: Published,
                                                                  ours: DynamoDBLockClient) -> None:
    lock = ours.acquire_lock('shared')
    refused = published.acquire('shared', timeout=2 * LEASE)     # our heartbeats keep it alive
    assert refused['event'] == 'acquire_failed' and refused['code'] == 'ACQUIRE_TIMEOUT'
    # Still our row (a heartbeat may land between any two reads, so its version is not compared).
    assert local_engine.read_item('shared')['owner_name'] == ours.owner_name
    lock.release(best_effort=False)


def test_a_lock_held_by_the_published_package_excludes_this_one(published: Published,
                                                                  ours: DynamoDBLockClient) -> None:
    assert published.acquire('shared', timeout=1)['event'] == 'acquired'
    assert ours.try_acquire_lock('shared') is None
    with pytest.raises(Exception) as raised:
        ours.acquire_lock('shared', retry_period=seconds(seconds=0.25), retry_timeout=seconds(seconds=2 * LEASE))
    assert getattr(raised.value, 'code', None) == 'ACQUIRE_TIMEOUT'
    assert published.send(cmd='release')['event'] == 'released'
    # A published release deletes the row: this package acquires at once, from the clock floor.
    lock = ours.acquire_lock('shared', retry_timeout=seconds(0))
    assert lock.fencing_token is not None


def test_a_row_this_package_released_is_taken_by_the_published_package(local_engine: Any, published: Published,
                                                                        ours: DynamoDBLockClient) -> None:
    lock = ours.acquire_lock('shared')
    lock.release(best_effort=False)
    kept = local_engine.read_item('shared')
    assert kept is not None and 'released_at' in kept and kept['lease_duration'] == 0
    # 0.9.1 takes a lease of 0 over after one poll; 0.9.3 once the row's TTL epoch has passed.
    taken = published.acquire('shared', timeout=EXPIRY + 3)
    assert taken['event'] == 'acquired', taken
    row = local_engine.read_item('shared')
    assert row['owner_name'].startswith('published-') and 'fencing_token' not in row


def test_an_abandoned_published_lock_is_taken_over_and_the_missing_token_is_reported(
        local_engine: Any, published: Published, ours: DynamoDBLockClient, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=MODULE)
    assert published.acquire('shared', timeout=1)['event'] == 'acquired'
    published.process.kill()                       # the published holder dies holding the lock
    published.process.wait(10)
    lock = ours.acquire_lock('shared', retry_period=seconds(seconds=0.25), retry_timeout=seconds(seconds=3 * LEASE))
    assert lock.took_over_from is not None and lock.took_over_from.owner_name.startswith('published-')
    assert lock.took_over_from.fencing_token is None
    assert any('writes no fencing token' in record.getMessage() for record in caplog.records)
    row = local_engine.read_item('shared')
    assert row['record_version_number'] == lock.record_version_number and row['fencing_token'] == lock.fencing_token


def test_tokens_keep_growing_across_releases_and_takeovers_among_this_packages_clients(
        local_engine: Any, ours: DynamoDBLockClient) -> None:
    other = DynamoDBLockClient(local_engine.resource, table_name=local_engine.table_name, owner_name='other')
    try:
        tokens = []
        for client in (ours, other, ours, other):
            lock = client.acquire_lock('tokens', retry_timeout=seconds(0))
            tokens.append(lock.fencing_token)
            lock.release(best_effort=False)
        assert tokens == sorted(tokens) and len(set(tokens)) == len(tokens)
        assert all(later == earlier + 1 for earlier, later in zip(tokens, tokens[1:]))
    finally:
        other.close()


def test_the_published_worker_runs_the_published_code(published: Published) -> None:
    """Guards the other tests: the process imported the published package, not this one."""
    started = time.monotonic()
    assert published.acquire('probe', timeout=0)['event'] == 'acquired'
    assert time.monotonic() - started < 30


def test_a_lock_kept_alive_only_by_update_attributes_excludes_the_published_one(
        local_engine: Any, published: Published) -> None:
    """``lock.update_attributes`` is a heartbeat to the published package too: it watches the
    version, which every update changes. The holder sends no other heartbeat here."""
    holder = DynamoDBLockClient(local_engine.resource, table_name=local_engine.table_name, owner_name='reporter',
                                heartbeat_period=seconds(seconds=HEARTBEAT), safe_period=seconds(seconds=SAFE),
                                lease_duration=seconds(seconds=LEASE), expiry_period=seconds(seconds=EXPIRY),
                                background_heartbeats=False)
    try:
        lock = holder.acquire_lock('progress', additional_attributes={'done': 0})
        answer: Dict[str, Any] = {}
        waiting = threading.Thread(target=lambda: answer.update(published.acquire('progress', timeout=3 * LEASE)))
        waiting.start()
        updates = 0
        while waiting.is_alive():
            updates += 1
            lock.update_attributes({'done': updates})
            waiting.join(HEARTBEAT)
        assert answer['event'] == 'acquire_failed' and answer['code'] == 'ACQUIRE_TIMEOUT', answer
        row = local_engine.read_item('progress')
        assert row['owner_name'] == 'reporter' and row['done'] == updates
        assert row['record_version_number'] == lock.record_version_number
        lock.release(best_effort=False, attributes={'result': 'ok'})
        taken = published.acquire('progress', timeout=EXPIRY + 3)     # a released row: taken as before
        assert taken['event'] == 'acquired', taken
    finally:
        holder.close()


def test_the_published_package_waits_out_a_per_lock_lease(local_engine: Any, published: Published) -> None:
    """A lock acquired with a lease of its own stores it in the row, where published waiters read
    it: a silent holder of a 3-lease lock is not taken over after the client's lease."""
    holder = DynamoDBLockClient(local_engine.resource, table_name=local_engine.table_name, owner_name='long-lease',
                                heartbeat_period=seconds(seconds=HEARTBEAT), safe_period=seconds(seconds=SAFE),
                                lease_duration=seconds(seconds=LEASE), expiry_period=seconds(seconds=4 * LEASE),
                                background_heartbeats=False)      # never renewed
    try:
        lock = holder.acquire_lock('long', lease_duration=seconds(seconds=3 * LEASE))
        assert local_engine.read_item('long')['lease_duration'] == 3 * LEASE
        refused = published.acquire('long', timeout=2 * LEASE)     # past the client's lease, within the lock's
        assert refused['event'] == 'acquire_failed' and refused['code'] == 'ACQUIRE_TIMEOUT', refused
        assert local_engine.read_item('long')['record_version_number'] == lock.record_version_number
    finally:
        holder.close()


# -- locks on existing items (lock_existing_item=True) ---------------------------------------

APP_ITEM = {'status': 'PAID', 'data': 'order 42', 'total': 1250}


def put_app_item(local_engine: Any, key: str) -> Dict[str, Any]:
    local_engine.resource.Table(local_engine.table_name).put_item(Item={'lock_key': key, 'sort_key': '-', **APP_ITEM})
    typed: Dict[str, Any] = local_engine.read_typed_item(key)
    return typed


def test_a_lock_on_an_existing_item_excludes_the_published_one_and_the_item_survives(
        local_engine: Any, published: Published, ours: DynamoDBLockClient) -> None:
    before = put_app_item(local_engine, 'item')
    lock = ours.acquire_lock('item', lock_existing_item=True)
    refused = published.acquire('item', timeout=2 * LEASE)     # our heartbeats keep it alive
    # The published client cannot read a lock row without a TTL attribute: it fails at once with
    # UNKNOWN (its KeyError) instead of waiting; it never gets the lock nor writes the item.
    assert refused['event'] == 'acquire_failed' and refused['code'] == 'UNKNOWN', refused
    row = local_engine.read_typed_item('item')
    assert row['record_version_number'] == {'S': lock.record_version_number}
    assert {name: row[name] for name in before} == before
    lock.release(best_effort=False)
    after = local_engine.read_typed_item('item')
    assert {name: value for name, value in after.items() if name != 'fencing_token'} == before


def test_a_lock_held_by_the_published_package_excludes_a_lock_on_the_item(
        published: Published, ours: DynamoDBLockClient) -> None:
    assert published.acquire('item', timeout=1)['event'] == 'acquired'
    assert ours.try_acquire_lock('item', lock_existing_item=True) is None
    with pytest.raises(Exception) as raised:
        ours.acquire_lock('item', lock_existing_item=True, retry_period=seconds(seconds=0.25),
                          retry_timeout=seconds(seconds=2 * LEASE))
    assert getattr(raised.value, 'code', None) == 'ACQUIRE_TIMEOUT'
    assert published.send(cmd='release')['event'] == 'released'
    lock = ours.acquire_lock('item', lock_existing_item=True, retry_timeout=seconds(0))
    assert lock.fencing_token is not None
