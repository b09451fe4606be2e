"""Faults between the lock client and DynamoDB: throttling, 5xx, latency, lost answers, outages.

Every fault is injected on the client side by a botocore ``before-send`` hook
(:class:`_torture.faults.FaultInjector`) on the lock client's own boto3 resource; the test
reads the table through a separate, hook-free client. DynamoDB Local applies the writes, so
conditional writes are atomic as on AWS.

What a user relies on, and what each test proves:

* A lost answer is not a lost lock. When a write was applied but its answer never arrived,
  botocore retries it, and the retry fails its condition against the client's own write. The
  client must recognise its own write: an acquire succeeds, a release releases, a heartbeat
  renews; no ``LOCK_STOLEN`` is reported. This must hold whatever the final error of the
  retries is (a throttled or refused last attempt says nothing about the first).
* An outage of DynamoDB shorter than the lease shows up as ``LOCK_IN_DANGER`` and never as
  ``LOCK_STOLEN``; nobody else gets the lock meanwhile, and the lock is ``LOCKED`` again after.
* Throttling and slow calls are retried or waited out without losing the lock.

The randomised version of all this, with several processes, is in ``test_torture.py``.
"""
from __future__ import annotations

import json
import logging
import pathlib
import threading
import time
import uuid
from typing import Any, Callable, Iterator, List, Optional

import pytest
from botocore.config import Config

from _torture.faults import FAULT_KINDS, FaultInjector, FaultRates
from _torture.runner import TortureConfig, env_int, run_torture, torture_size
from _torture.support import scan_table, seconds
from helpers import CallbackRecorder, LockClients, background_threads, wait_until
from python_dynamodb_lock.python_dynamodb_lock import DynamoDBLock, DynamoDBLockClient, DynamoDBLockError
from python_dynamodb_lock.testing import SystemClock

pytestmark = pytest.mark.local

DEFAULT_FAULT_TORTURE_ACQUISITIONS = 1500
HEARTBEAT = 0.2
SAFE_PERIOD = 1.5
LEASE = 4.0

LOST_THEN_FAILED = [
    pytest.param('throttle', id='then-throttled'),
    pytest.param('server_error', id='then-500'),
    pytest.param('connection_error', id='then-connection-error'),
]


def retries(total_attempts: int) -> Config:
    """botocore configuration with ``total_attempts`` attempts per call (standard mode)."""
    return Config(retries={'mode': 'standard', 'total_max_attempts': total_attempts})


class Harness:
    """Lock clients of the test's kind on one table, each on its own boto3 resource (the asyncio
    client on an aiobotocore client linked to it), and a hook-free reader."""

    def __init__(self, dynamodb_local: Any, local_engine: Any, client_kind: str) -> None:
        self.engine = dynamodb_local
        self.table = local_engine
        self.factory = LockClients(kind=client_kind)
        self.clients: List[DynamoDBLockClient] = []

    def lock_client(
        self,
        injector: Optional[FaultInjector] = None,
        total_attempts: int = 2,
        heartbeat: float = HEARTBEAT,
        safe_period: float = SAFE_PERIOD,
        lease: float = LEASE,
        background_heartbeats: bool = True,
    ) -> DynamoDBLockClient:
        """A lock client; ``background_heartbeats=False`` for a waiter whose lock must keep the
        version it was acquired with while the test compares it with the table."""
        resource = self.engine.resource(retries(total_attempts))
        if injector is not None:
            injector.install(resource)
        client = self.factory.make(
            resource,
            hand_driven=False,
            clock=SystemClock(),
            app_callback_executor=None,
            table_name=self.table.table_name,
            owner_name=f'fault-test-{len(self.clients)}-{uuid.uuid4().hex[:6]}',
            heartbeat_period=seconds(heartbeat),
            safe_period=seconds(safe_period),
            lease_duration=seconds(lease),
            background_heartbeats=background_heartbeats,
        )
        self.clients.append(client)
        return client

    def live_senders(self) -> int:
        """How many of the clients' heartbeat senders (threads or tasks) are alive."""
        return sum(1 for client in self.clients
                   if any(worker.is_alive() and 'sender' in worker.name for worker in background_threads(client)))

    def rows(self) -> List[dict]:
        return scan_table(self.table.client, self.table.table_name)

    def held_rows(self) -> List[dict]:
        """The rows that record a held lock (a released row is kept, marked ``released_at``)."""
        return [row for row in self.rows() if 'released_at' not in row]

    def assert_released(self, lock: DynamoDBLock) -> None:
        """The lock's key is free, its row kept only as a released one with the lock's token."""
        rows = [row for row in self.rows() if row['lock_key'] == lock.partition_key]
        assert len(rows) == 1 and 'released_at' in rows[0], rows
        assert rows[0]['lease_duration'] == 0 and 'acquisition_id' not in rows[0], rows
        assert rows[0]['fencing_token'] == lock.fencing_token, (rows, lock.fencing_token)
        assert self.held_rows() == []

    def row_version(self, key: str) -> Optional[str]:
        rows = [row for row in self.rows() if row['lock_key'] == key]
        return rows[0]['record_version_number'] if rows else None

    def close(self) -> None:
        self.factory.close_all()


@pytest.fixture
def harness(dynamodb_local: Any, local_engine: Any, client_kind: str) -> Iterator[Harness]:
    harness = Harness(dynamodb_local, local_engine, client_kind)
    try:
        yield harness
    finally:
        harness.close()


@pytest.fixture
def library_log(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    """The library's log records, INFO and above."""
    caplog.set_level(logging.INFO, logger='python_dynamodb_lock')
    return caplog


def logged(caplog: pytest.LogCaptureFixture, min_level: int = logging.DEBUG) -> List[str]:
    return [record.getMessage() for record in caplog.records if record.levelno >= min_level]


def heartbeats_after(injector: FaultInjector, count: int) -> Callable[[], bool]:
    """A predicate: ``count`` more heartbeat attempts (UpdateItems renewing the lease) than now
    have been made."""
    start = injector.action_attempts['heartbeat']
    return lambda: injector.action_attempts['heartbeat'] >= start + count


def assert_holds(harness: Harness, lock: DynamoDBLock, callbacks: CallbackRecorder) -> None:
    """The lock is (back to) LOCKED, the table row carries its version, and nothing said it was stolen.

    A slow or retried renewal may leave the lock IN_DANGER for a moment: that is allowed, as
    long as the next renewal brings it back.
    """
    wait_until(lambda: lock.status == DynamoDBLock.LOCKED
               and harness.row_version(lock.partition_key) == lock.record_version_number, timeout=LEASE,
               message=lambda: f'status {lock.status}, row {harness.row_version(lock.partition_key)}, '
                               f'lock {lock.record_version_number}')
    assert DynamoDBLockError.LOCK_STOLEN not in callbacks.codes


# -- lost answers -------------------------------------------------------------------------

# Held: IN_DANGER too, when a loaded machine kept the acquisition's confirmation from landing
# within the safe period. What these tests prove is that the lock is ours (the row's version),
# not how fast the machine ran.
HELD = (DynamoDBLock.LOCKED, DynamoDBLock.IN_DANGER)

def test_lost_acquire_answer_still_acquires(harness: Harness) -> None:
    injector = FaultInjector()
    client = harness.lock_client(injector)
    injector.script('acquire', ['lost_response'])
    lock = client.acquire_lock('job', retry_timeout=seconds(0))
    assert injector.action_counts['acquire']['lost_response'] == 1
    assert lock.status in HELD
    before = lock.record_version_number     # a renewal may land between the two reads below
    assert harness.row_version('job') in (before, lock.record_version_number)
    lock.release(best_effort=False)
    harness.assert_released(lock)


@pytest.mark.parametrize('final_fault', LOST_THEN_FAILED)
def test_lost_acquire_answer_then_failed_retry_still_acquires(harness: Harness, final_fault: str) -> None:
    """The acquiring write landed; the retry failed for another reason. The lock is ours, not an orphan."""
    injector = FaultInjector()
    client = harness.lock_client(injector, total_attempts=2)
    injector.script('acquire', ['lost_response', final_fault])
    lock = client.acquire_lock('job', retry_timeout=seconds(0))
    assert lock.status in HELD
    before = lock.record_version_number     # a renewal may land between the two reads below
    assert harness.row_version('job') in (before, lock.record_version_number)
    lock.release(best_effort=False)
    harness.assert_released(lock)


def test_lost_takeover_answer_still_takes_over(harness: Harness) -> None:
    """Taking over an abandoned lock is a conditional write too; losing its answer is harmless."""
    dead = harness.lock_client()
    abandoned = dead.acquire_lock('job')
    dead.close()   # heartbeats stop, the row stays: an abandoned lock
    injector = FaultInjector()
    waiter = harness.lock_client(injector, lease=LEASE)
    injector.script('acquire', [None, 'lost_response'])   # the first write meets the row; the takeover's answer is lost
    lock = waiter.acquire_lock('job', retry_period=seconds(0.2), retry_timeout=seconds(LEASE + 2.0))
    assert injector.action_counts['acquire']['lost_response'] == 1
    assert lock.record_version_number != abandoned.record_version_number
    assert harness.row_version('job') == lock.record_version_number
    assert lock.owner_name == waiter.owner_name


def test_lost_heartbeat_answer_is_not_a_stolen_lock(harness: Harness) -> None:
    injector = FaultInjector()
    client = harness.lock_client(injector)
    callbacks = CallbackRecorder()
    lock = client.acquire_lock('job', app_callback=callbacks)
    injector.script('heartbeat', ['lost_response'])
    wait_until(heartbeats_after(injector, 4), timeout=LEASE)
    assert injector.action_counts['heartbeat']['lost_response'] == 1
    assert_holds(harness, lock, callbacks)
    lock.release(best_effort=False)
    harness.assert_released(lock)


@pytest.mark.parametrize('final_fault', LOST_THEN_FAILED)
def test_lost_heartbeat_answer_then_failed_retry_is_not_a_stolen_lock(
    harness: Harness, final_fault: str, library_log: pytest.LogCaptureFixture,
) -> None:
    """The renewal landed, its answer was lost, and botocore's retry then failed differently.

    The final error describes the last attempt only; the client must still count the renewal
    as possibly applied, and recognise its own version at the next heartbeat.
    """
    injector = FaultInjector()
    client = harness.lock_client(injector, total_attempts=2)
    callbacks = CallbackRecorder()
    lock = client.acquire_lock('job', app_callback=callbacks)
    injector.script('heartbeat', ['lost_response', final_fault])
    wait_until(lambda: injector.pending_script('heartbeat') == 0, timeout=LEASE)
    wait_until(heartbeats_after(injector, 3), timeout=LEASE)
    assert_holds(harness, lock, callbacks)
    assert not any('was stolen' in message for message in logged(library_log))
    lock.release(best_effort=False)
    harness.assert_released(lock)


def test_lost_release_answer_releases(harness: Harness) -> None:
    injector = FaultInjector()
    client = harness.lock_client(injector)
    lock = client.acquire_lock('job')
    injector.script('release', ['lost_response'])
    lock.release(best_effort=False)
    assert injector.action_counts['release']['lost_response'] == 1
    assert lock.status == DynamoDBLock.RELEASED
    harness.assert_released(lock)


@pytest.mark.parametrize('best_effort', [False, True], ids=['strict', 'best-effort'])
def test_lost_release_answer_then_next_holder_is_not_a_theft(
    harness: Harness, best_effort: bool, library_log: pytest.LogCaptureFixture,
) -> None:
    """The release landed, its answer was lost, and the next holder got in before the retry.

    botocore's retry then meets the next holder's row. That is not a theft: this client's
    lease was running, so nobody could have taken the lock over; the first attempt released
    it. The release must succeed (no LOCK_STOLEN raised or logged) and leave the new row alone.
    """
    injector = FaultInjector(FaultRates(latency_range=(1.0, 1.0)))
    holder = harness.lock_client(injector, total_attempts=2)
    waiter = harness.lock_client(background_heartbeats=False)   # its version stays what it acquired
    lock = holder.acquire_lock('job')
    acquired: List[DynamoDBLock] = []
    waiting = threading.Thread(target=lambda: acquired.append(
        waiter.acquire_lock('job', retry_period=seconds(0.05), retry_timeout=seconds(LEASE))))
    waiting.start()
    injector.script('release', ['lost_response', 'latency'])   # the retry goes out 1 s later
    try:
        lock.release(best_effort=best_effort)
    finally:
        waiting.join()
    assert injector.pending_script('release') == 0
    assert acquired and harness.row_version('job') == acquired[0].record_version_number
    assert acquired[0].fencing_token == lock.fencing_token + 1      # the released row kept the token
    assert lock.status == DynamoDBLock.RELEASED
    assert not any('stolen' in message.lower() for message in logged(library_log, logging.WARNING))


@pytest.mark.parametrize('final_fault', LOST_THEN_FAILED)
def test_lost_release_answer_then_failed_retry_releases(harness: Harness, final_fault: str) -> None:
    """The release landed and the retry failed: the lock is released, not reported stolen later."""
    injector = FaultInjector()
    client = harness.lock_client(injector, total_attempts=2)
    callbacks = CallbackRecorder()
    lock = client.acquire_lock('job', app_callback=callbacks)
    injector.script('release', ['lost_response', final_fault])
    lock.release(best_effort=False)
    assert lock.status == DynamoDBLock.RELEASED
    harness.assert_released(lock)
    # Give the heartbeat thread several periods to (wrongly) report the missing row as a theft.
    time.sleep(3 * HEARTBEAT)
    assert callbacks.codes == []


def test_unconfirmed_release_is_not_reported_stolen_later(harness: Harness) -> None:
    """The release landed, its answer was lost, and the check read failed too: UNKNOWN.

    As documented, the strict release raises UNKNOWN and the lock is kept alive for a retry.
    The row is in fact released, by this client's own release: the next heartbeat must not
    call that a theft, and the retried release must not fail.
    """
    injector = FaultInjector()
    client = harness.lock_client(injector, total_attempts=1)
    callbacks = CallbackRecorder()
    lock = client.acquire_lock('job', app_callback=callbacks)
    injector.script('release', ['lost_response'])
    injector.script('GetItem', ['connection_error'])
    with pytest.raises(DynamoDBLockError) as unknown:
        lock.release(best_effort=False)
    assert unknown.value.code == DynamoDBLockError.UNKNOWN
    harness.assert_released(lock)
    # The next heartbeat meets the missing row and settles the lock's fate.
    wait_until(lambda: lock.status not in (DynamoDBLock.LOCKED, DynamoDBLock.IN_DANGER), timeout=LEASE)
    time.sleep(HEARTBEAT)   # let the callback executor deliver anything the heartbeat dispatched
    assert DynamoDBLockError.LOCK_STOLEN not in callbacks.codes
    lock.release(best_effort=False)
    assert lock.status == DynamoDBLock.RELEASED
    harness.assert_released(lock)


def test_unconfirmed_release_then_reacquire_by_the_same_client_is_not_stolen(harness: Harness) -> None:
    """As above, but the same client acquires the key again before any heartbeat runs.

    Its write finds the key free (the earlier release had landed) and replaces the old lock
    object in the client's registry; the old lock was released, not stolen.
    """
    injector = FaultInjector()
    client = harness.lock_client(injector, total_attempts=1, heartbeat=1.0)
    callbacks = CallbackRecorder()
    old_lock = client.acquire_lock('job', app_callback=callbacks)
    injector.script('release', ['lost_response'])
    injector.script('GetItem', ['connection_error'])
    with pytest.raises(DynamoDBLockError) as unknown:
        old_lock.release(best_effort=False)
    assert unknown.value.code == DynamoDBLockError.UNKNOWN
    new_lock = client.acquire_lock('job', retry_timeout=seconds(0))
    time.sleep(HEARTBEAT)   # let the callback executor deliver anything that was dispatched
    assert DynamoDBLockError.LOCK_STOLEN not in callbacks.codes
    old_lock.release(best_effort=False)
    assert old_lock.status == DynamoDBLock.RELEASED
    assert new_lock.status in HELD
    assert harness.row_version('job') == new_lock.record_version_number


def test_applied_write_answered_with_500_is_recognised(harness: Harness) -> None:
    """A 500 after the write was applied, on acquire, heartbeat and release alike."""
    injector = FaultInjector()
    client = harness.lock_client(injector, total_attempts=2)
    callbacks = CallbackRecorder()
    injector.script('acquire', ['applied_server_error'])
    lock = client.acquire_lock('job', app_callback=callbacks, retry_timeout=seconds(0))
    injector.script('heartbeat', ['applied_server_error', 'applied_server_error'])
    wait_until(heartbeats_after(injector, 4), timeout=LEASE)
    assert_holds(harness, lock, callbacks)
    injector.script('release', ['applied_server_error'])
    lock.release(best_effort=False)
    assert lock.status == DynamoDBLock.RELEASED
    harness.assert_released(lock)


def test_slow_answer_to_an_acquire_still_warns_before_the_lease_ends(harness: Harness) -> None:
    """The acquiring write lands at once but its answer arrives 4 s later; then renewals fail.

    Other clients time the lease from when they first saw the row, which is almost when the
    write landed. The holder must time its safe period from the same moment (the start of the
    write), or its LOCK_IN_DANGER warning comes after another client has already taken the lock
    over. Required: the warning arrives before the takeover.

    The answer comes 4 s after the write plus botocore's retry backoff (up to 1 s); the lease of
    5.5 s leaves the warning (at the answer, plus a checker round) at least 0.45 s before the
    takeover, and a warning timed from the answer (at least 6 s) always after it.
    """
    lease, safe_period, answer_delay = 5.5, 2.0, 4.0
    injector = FaultInjector(FaultRates(latency_range=(answer_delay, answer_delay)))
    holder = harness.lock_client(injector, total_attempts=2, safe_period=safe_period, lease=lease)
    waiter = harness.lock_client(lease=lease, safe_period=safe_period, background_heartbeats=False)
    events: List[str] = []
    warned = threading.Event()

    def on_trouble(code: str, lock: DynamoDBLock) -> None:
        events.append(code)
        warned.set()

    injector.start_outage('connection_error', operations=['heartbeat'])   # no renewal ever lands
    injector.script('acquire', ['lost_response', 'latency'])
    acquiring = threading.Thread(target=lambda: holder.acquire_lock('job', app_callback=on_trouble))
    acquiring.start()
    try:
        wait_until(lambda: harness.row_version('job') is not None, timeout=answer_delay)
        taken = waiter.acquire_lock('job', retry_period=seconds(0.1), retry_timeout=seconds(2 * lease))
        events.append('taken over')
    finally:
        acquiring.join()
    assert harness.row_version('job') == taken.record_version_number
    wait_until(warned.is_set, timeout=lease)
    assert events[0] == DynamoDBLockError.LOCK_IN_DANGER, events


# -- throttling and latency -----------------------------------------------------------------

def test_throttled_calls_are_retried(harness: Harness) -> None:
    injector = FaultInjector()
    client = harness.lock_client(injector, total_attempts=3)
    callbacks = CallbackRecorder()
    injector.script('acquire', ['throttle', 'throttle'])
    lock = client.acquire_lock('job', app_callback=callbacks, retry_timeout=seconds(0))
    injector.script('heartbeat', ['throttle'])
    injector.script('release', ['throttle'])
    wait_until(heartbeats_after(injector, 3), timeout=LEASE)
    assert_holds(harness, lock, callbacks)
    lock.release(best_effort=False)
    harness.assert_released(lock)
    assert injector.total('throttle') == 4


def test_slow_heartbeat_longer_than_its_period_keeps_the_lock(harness: Harness) -> None:
    """A renewal that takes 5 heartbeat periods: later rounds skip it, nothing is lost."""
    injector = FaultInjector(FaultRates(latency_range=(5 * HEARTBEAT, 5 * HEARTBEAT)))
    client = harness.lock_client(injector)
    callbacks = CallbackRecorder()
    lock = client.acquire_lock('job', app_callback=callbacks)
    injector.script('heartbeat', ['latency'])
    wait_until(heartbeats_after(injector, 3), timeout=LEASE)
    assert injector.action_counts['heartbeat']['latency'] == 1
    assert_holds(harness, lock, callbacks)


# -- outages ------------------------------------------------------------------------------

@pytest.mark.parametrize('kind', ['server_error', 'connection_error'])
def test_outage_shorter_than_lease_is_in_danger_never_stolen(harness: Harness, kind: str) -> None:
    """DynamoDB unreachable for longer than safe_period but shorter than the lease.

    The holder is told LOCK_IN_DANGER, never LOCK_STOLEN; another client cannot take the lock
    during the outage; once DynamoDB answers again the lock is renewed and LOCKED.
    """
    outage = SAFE_PERIOD + 1.0
    assert SAFE_PERIOD < outage < LEASE - 1.0
    injector = FaultInjector()
    holder = harness.lock_client(injector, total_attempts=2)
    other = harness.lock_client()
    callbacks = CallbackRecorder()
    lock = holder.acquire_lock('job', app_callback=callbacks)
    version_before = lock.record_version_number

    injector.start_outage(kind)
    outage_end = time.monotonic() + outage
    other_attempts = 0
    while time.monotonic() < outage_end:
        assert other.try_acquire_lock('job') is None
        other_attempts += 1
        time.sleep(0.1)
    wait_until(lambda: DynamoDBLockError.LOCK_IN_DANGER in callbacks.codes, timeout=1.0)
    assert lock.status == DynamoDBLock.IN_DANGER
    injector.end_outage()

    wait_until(lambda: lock.status == DynamoDBLock.LOCKED, timeout=LEASE - outage)
    assert other.try_acquire_lock('job') is None
    assert injector.total(kind) >= 2
    assert other_attempts > 0
    assert lock.record_version_number != version_before
    assert set(callbacks.codes) == {DynamoDBLockError.LOCK_IN_DANGER}
    assert harness.row_version('job') == lock.record_version_number
    assert harness.live_senders() >= 2
    lock.release(best_effort=False)
    harness.assert_released(lock)


def test_outage_longer_than_lease_warns_first_then_reports_the_theft(harness: Harness) -> None:
    """The holder is cut off from DynamoDB for longer than its lease while another client waits.

    The other client takes the lock over after one lease. The holder must have been warned
    (LOCK_IN_DANGER) before that, and be told LOCK_STOLEN once DynamoDB answers again; the new
    holder's row is left alone.
    """
    lease, safe_period = 3.0, 1.0
    injector = FaultInjector()
    holder = harness.lock_client(injector, total_attempts=1, safe_period=safe_period, lease=lease)
    waiter = harness.lock_client(lease=lease, safe_period=safe_period, background_heartbeats=False)
    events: List[str] = []
    stolen = threading.Event()

    def on_trouble(code: str, lock: DynamoDBLock) -> None:
        events.append(code)
        if code == DynamoDBLockError.LOCK_STOLEN:
            stolen.set()

    lock = holder.acquire_lock('job', app_callback=on_trouble)
    injector.start_outage('connection_error')
    try:
        taken = waiter.acquire_lock('job', retry_period=seconds(0.1), retry_timeout=seconds(2 * lease))
        events.append('taken over')
    finally:
        injector.end_outage()
    wait_until(stolen.is_set, timeout=lease)
    assert events == [DynamoDBLockError.LOCK_IN_DANGER, 'taken over', DynamoDBLockError.LOCK_STOLEN]
    assert lock.status == DynamoDBLock.INVALID
    with pytest.raises(DynamoDBLockError) as raised:   # a strict release says the lock was lost...
        lock.release(best_effort=False)
    assert raised.value.code == DynamoDBLockError.LOCK_STOLEN
    assert raised.value.holder.record_version_number == taken.record_version_number
    assert harness.row_version('job') == taken.record_version_number   # ...and leaves the new row alone


def test_outage_after_an_applied_renewal_is_not_stolen(harness: Harness) -> None:
    """A renewal lands but is answered with a 500, then the outage goes on for many heartbeats.

    However many renewals fail after it, the client must still recognise the version that
    landed when DynamoDB answers again.
    """
    heartbeat, lease = 0.05, 6.0
    failed_renewals = 50
    injector = FaultInjector()
    holder = harness.lock_client(injector, total_attempts=1, heartbeat=heartbeat, safe_period=1.0, lease=lease)
    callbacks = CallbackRecorder()
    lock = holder.acquire_lock('job', app_callback=callbacks)
    injector.script('heartbeat', ['applied_server_error'] + ['server_error'] * failed_renewals)
    wait_until(lambda: injector.pending_script('heartbeat') == 0, timeout=lease - 1.0)
    wait_until(lambda: lock.status == DynamoDBLock.LOCKED
                      and harness.row_version('job') == lock.record_version_number, timeout=3.0)
    assert DynamoDBLockError.LOCK_STOLEN not in callbacks.codes
    assert len(injector.applied_writes) == 1


# -- the torture, with faults ---------------------------------------------------------------

TORTURE_FAULTS = FaultRates(
    throttle=0.02,
    server_error=0.01,
    applied_server_error=0.01,
    lost_response=0.03,
    connection_error=0.01,
    latency=0.03,
    latency_range=(0.05, 0.5),
)


@pytest.mark.slow
def test_mutual_exclusion_torture_with_faults(dynamodb_local: Any, tmp_path: pathlib.Path) -> None:
    """The multi-process torture of test_torture.py (a mixed fleet of threaded and asyncio lock
    clients), with random faults on every lock client.

    About one call attempt in ten meets a fault. One lock client of each process gets a single
    attempt per call, so faults reach the library directly; the other gets three, so the
    ambiguity of botocore's retries (an earlier attempt applied, a later one refused) is
    exercised too. Acquisitions fail (and the worker tries again), releases fail and are
    retried or abandoned, heartbeats fail; one hold in ten lasts several heartbeats. Whatever happens, the
    guarantees hold: no overlap, no lost update, no LOCK_STOLEN while the holder's lease ran (a
    takeover after it, when a loaded machine starved the heartbeats, is reported), no dead thread, and
    every row left behind has expired (a fresh client takes it over within its lease).
    """
    config = TortureConfig(
        acquisitions=torture_size(DEFAULT_FAULT_TORTURE_ACQUISITIONS),
        processes=env_int('PDL_TORTURE_PROCESSES', 3),
        threads=env_int('PDL_TORTURE_THREADS', 4),
        faults=TORTURE_FAULTS,
        total_attempts=(1, 3),
        long_hold_probability=0.1,
        seed=env_int('PDL_TORTURE_SEED', 2),
    )
    result = run_torture(dynamodb_local, tmp_path, config)
    summary = json.dumps(result.summary(), sort_keys=True)
    print(f'\ntorture with faults: {summary}')
    assert result.problems() == [], summary
    assert len(result.holds) == config.acquisitions, summary
    # A mixed fleet: threaded and asyncio lock clients both held locks, both under faults.
    assert set(result.holds_by_kind()) == {'threaded', 'asyncio'}, summary
    assert all(result.faults_by_client_kind().get(kind, 0) > 0 for kind in ('threaded', 'asyncio')), summary
    # A genuine theft needs renewals to fail for a whole lease (not with these fault rates, but a
    # loaded machine may starve them): problems() asserts none came sooner, and each was reported.
    # Every kind of fault was injected, and some reached the library after botocore's retries.
    assert set(result.fault_counts()) == set(FAULT_KINDS), summary
    assert result.total('heartbeat_failures') > 0, summary
    calls = result.call_counts()
    assert calls.get('UpdateItem', 0) > 0 and calls.get('BatchExecuteStatement', 0) > 0, summary
