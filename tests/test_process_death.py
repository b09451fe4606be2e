"""A lock holder that dies or is paused: others take over, and the paused holder finds out.

The holder is a child process (``python -m _torture.worker hold``) with its own lock client;
the test process is the other contender. Signals go to that child's PID only.

* SIGKILL while holding: the heartbeats stop, the row stays, and a waiter takes the lock over
  by the clock-skew-safe rule (the version unchanged for one lease on the waiter's own
  monotonic clock). The acquire is given ``retry_timeout = lease + 2 * retry_period +
  margin`` and must succeed within it: the first read starts the watch, one lease later the
  takeover write goes out. The time it took is printed (``pytest -s``) for the docs.
* SIGSTOP past the lease, takeover, SIGCONT: the paused client learns of the theft through
  ``LOCK_STOLEN``, its strict release raises ``LOCK_STOLEN`` whether it still believes it holds
  the lock or already knows it lost it, and neither touches the new holder's row.
"""
from __future__ import annotations

import os
import pathlib
import signal
import time
import uuid
from typing import Any, Dict, Iterator, List

import pytest

from _torture.runner import WorkerProcess
from _torture.support import scan_table, seconds
from helpers import CallbackRecorder, wait_until
from python_dynamodb_lock.python_dynamodb_lock import DynamoDBLock, DynamoDBLockClient, DynamoDBLockError

pytestmark = [
    pytest.mark.local,
    pytest.mark.skipif(not hasattr(signal, 'SIGSTOP'), reason='needs POSIX signals'),
]

LEASE = 2.0
HEARTBEAT = 0.25
SAFE_PERIOD = 1.0
RETRY_PERIOD = 0.2
MARGIN = 1.0
TAKEOVER_TIMEOUT = LEASE + 2 * RETRY_PERIOD + MARGIN


@pytest.fixture
def start_holder(dynamodb_local: Any, local_engine: Any, tmp_path: pathlib.Path) -> Iterator[Any]:
    """Start holder processes on the test's table; each is killed (by its PID) at the end."""
    holders: List[WorkerProcess] = []

    def start(**extra: Any) -> WorkerProcess:
        params: Dict[str, Any] = {
            'endpoint_url': dynamodb_local.endpoint_url,
            'lock_table': local_engine.table_name,
            'key': 'job',
            'lease': LEASE,
            'heartbeat': HEARTBEAT,
            'safe_period': SAFE_PERIOD,
            'pause_gap': 1.0,
            'owner_name': f'holder-{uuid.uuid4().hex[:6]}',
            **extra,
        }
        holder = WorkerProcess('hold', params, tmp_path / f'holder-{len(holders)}.stderr')
        holders.append(holder)
        return holder

    try:
        yield start
    finally:
        for holder in holders:
            if holder.process.poll() is None:
                try:
                    os.kill(holder.pid, signal.SIGCONT)
                except ProcessLookupError:
                    pass
            holder.close()


@pytest.fixture
def contender(local_engine: Any) -> Iterator[DynamoDBLockClient]:
    client = DynamoDBLockClient(
        local_engine.resource,
        table_name=local_engine.table_name,
        owner_name=f'contender-{uuid.uuid4().hex[:6]}',
        heartbeat_period=seconds(HEARTBEAT),
        safe_period=seconds(SAFE_PERIOD),
        lease_duration=seconds(LEASE),
    )
    try:
        yield client
    finally:
        client.close()


def row_of(local_engine: Any, key: str = 'job') -> Dict[str, Any]:
    rows = [row for row in scan_table(local_engine.client, local_engine.table_name) if row['lock_key'] == key]
    assert len(rows) == 1, rows
    return rows[0]


def assert_row_is_held_by(local_engine: Any, lock: DynamoDBLock, owner: str) -> None:
    """The row belongs to ``owner`` and carries ``lock``'s version, once no renewal is in flight.

    The holder renews every HEARTBEAT: between reading the row and reading the lock object, a
    renewal may have landed on one side and not yet on the other, so compare until they agree.
    A lock object that really lost its row never agrees, and fails here.
    """
    wait_until(lambda: row_of(local_engine)['record_version_number'] == lock.record_version_number,
               timeout=LEASE, message=lambda: f'row {row_of(local_engine)}, lock {lock.record_version_number}')
    assert row_of(local_engine)['owner_name'] == owner


def test_killed_holder_is_taken_over_within_lease(
    start_holder: Any, contender: DynamoDBLockClient, local_engine: Any,
) -> None:
    holder = start_holder()
    acquired = holder.wait_for('acquired', timeout=60)
    # While the holder lives, its heartbeats keep the lock: a waiter times out.
    wait_until(lambda: row_of(local_engine)['record_version_number'] != acquired['version'], timeout=LEASE)
    with pytest.raises(DynamoDBLockError) as timed_out:
        contender.acquire_lock('job', retry_period=seconds(RETRY_PERIOD), retry_timeout=seconds(1.5 * LEASE))
    assert timed_out.value.code == DynamoDBLockError.ACQUIRE_TIMEOUT
    assert row_of(local_engine)['owner_name'] == acquired['owner']

    os.kill(holder.pid, signal.SIGKILL)
    holder.process.wait(timeout=30)
    killed_at = time.monotonic()
    lock = contender.acquire_lock('job', retry_period=seconds(RETRY_PERIOD), retry_timeout=seconds(TAKEOVER_TIMEOUT))
    took = time.monotonic() - killed_at
    print(f'\ntakeover after SIGKILL: {took:.2f}s (lease {LEASE}s, retry period {RETRY_PERIOD}s)')

    assert_row_is_held_by(local_engine, lock, contender.owner_name)
    assert lock.status == DynamoDBLock.LOCKED
    assert lock.took_over_from is not None and lock.took_over_from.owner_name == acquired['owner']
    assert lock.fencing_token > lock.took_over_from.fencing_token
    lock.release(best_effort=False)
    # The key is free: its only row is kept marked released, with the last fencing token.
    row = row_of(local_engine)
    assert 'released_at' in row and row['lease_duration'] == 0 and row['fencing_token'] == lock.fencing_token, row
    assert local_engine.read_held_row('job') is None


def pause_past_lease_and_take_over(holder: WorkerProcess, contender: DynamoDBLockClient,
                                   callbacks: CallbackRecorder) -> DynamoDBLock:
    """SIGSTOP the holder, take its lock over, and return the new lock; the holder stays stopped."""
    os.kill(holder.pid, signal.SIGSTOP)
    try:
        return contender.acquire_lock('job', retry_period=seconds(RETRY_PERIOD),
                                      retry_timeout=seconds(TAKEOVER_TIMEOUT), app_callback=callbacks)
    except BaseException:
        os.kill(holder.pid, signal.SIGCONT)
        raise


def test_paused_holder_is_told_its_lock_was_stolen(
    start_holder: Any, contender: DynamoDBLockClient, local_engine: Any,
) -> None:
    """SIGSTOP past the lease, takeover, SIGCONT: LOCK_STOLEN, and the new row is left alone."""
    holder = start_holder(release_after_stolen=True)
    acquired = holder.wait_for('acquired', timeout=60)
    callbacks = CallbackRecorder()
    new_lock = pause_past_lease_and_take_over(holder, contender, callbacks)
    assert new_lock.record_version_number != acquired['version']
    os.kill(holder.pid, signal.SIGCONT)

    resumed = holder.wait_for('resumed', timeout=30)
    assert resumed['gap'] >= LEASE
    seen = holder.wait_for('stolen_seen', timeout=4 * LEASE)
    assert seen['seen'] is True
    stolen = [event for event in resumed['skipped'] + seen['skipped']
              if event['event'] == 'callback' and event['code'] == DynamoDBLockError.LOCK_STOLEN]
    assert len(stolen) == 1 and stolen[0]['status'] == DynamoDBLock.INVALID
    # Once the client knows, a strict release says so (LOCK_STOLEN, naming the new holder) and
    # deletes nothing.
    failed = holder.wait_for('release_failed', timeout=30)
    assert failed['status_before'] == DynamoDBLock.INVALID
    assert failed['code'] == DynamoDBLockError.LOCK_STOLEN and contender.owner_name in failed['message']

    holder.send('exit')
    done = holder.wait_for('done', timeout=30)
    assert done['library_errors'] == [] and done['thread_failures'] == []
    assert done['heartbeat_threads'] == {'DynamoDBLockClient-heartbeat-sender': 1,
                                         'DynamoDBLockClient-heartbeat-checker': 1}
    assert_row_is_held_by(local_engine, new_lock, contender.owner_name)
    # The new holder kept its lock throughout.
    assert new_lock.status == DynamoDBLock.LOCKED and callbacks.codes == []


def test_paused_holder_strict_release_raises_lock_stolen(
    start_holder: Any, contender: DynamoDBLockClient, local_engine: Any,
) -> None:
    """The paused holder releases before any renewal has told it: LOCK_STOLEN, new row intact.

    Its renewals are cut off before the pause (as if its network to DynamoDB were down), so
    after SIGCONT nothing but the release itself can find out about the takeover.
    """
    holder = start_holder(release_on_resume=True)
    acquired = holder.wait_for('acquired', timeout=60)
    holder.send('block_renewals')
    holder.wait_for('renewals_blocked', timeout=30)
    callbacks = CallbackRecorder()
    new_lock = pause_past_lease_and_take_over(holder, contender, callbacks)
    assert new_lock.record_version_number != acquired['version']
    os.kill(holder.pid, signal.SIGCONT)

    failed = holder.wait_for('release_failed', timeout=30)
    assert failed['code'] == DynamoDBLockError.LOCK_STOLEN, failed
    assert failed['status_before'] in (DynamoDBLock.LOCKED, DynamoDBLock.IN_DANGER)
    assert failed['status'] == DynamoDBLock.INVALID
    holder.wait_for('resumed', timeout=30)
    holder.send('exit')
    done = holder.wait_for('done', timeout=30)
    assert done['library_errors'] == [] and done['thread_failures'] == []

    assert_row_is_held_by(local_engine, new_lock, contender.owner_name)
    assert new_lock.status == DynamoDBLock.LOCKED and callbacks.codes == []

