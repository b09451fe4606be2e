"""Network chaos between a lock client and DynamoDB Local: partitions, lost answers, resets.

The client under test ("A") reaches the engine only through a :class:`ChaosProxy`; another
client ("B"), when a scenario needs one, talks to the engine directly. A's boto3 client gives
up quickly (connect 0.2 s, read 0.3 s, 2 attempts, no backoff sleep), so one call takes at
most ``2 x (0.2 + 0.3) = 1.0 s`` and usually ``2 x 0.3`` (connecting to the proxy never
blocks): under ``safe_period - heartbeat_period``, as docs/usage.rst ("Timeouts and retries")
recommends. Real clocks, kept short: heartbeat 0.2 s, safe period 1.2 s, lease 2.4 s (a little
longer than the smallest workable values, so that a loaded two-core machine does not raise
false alarms).

Scenarios, each asserting exact outcomes through the public API:

a. a partition shorter than the safe period: no callback; the lock stays LOCKED, the row ours;
b. a partition longer than the safe period: LOCK_IN_DANGER first; LOCK_STOLEN only after B
   really took the lock over (never before), once the partition heals;
c. answers dropped while writes land: no LOCK_STOLEN; LOCKED again after healing, the row
   carrying A's version;
d. a strict release after each: it succeeds while A holds the lock, and raises LOCK_STOLEN
   when B took it over;
e. connection resets during acquire and release: acquired with the row ours, or a
   DynamoDBLockError with no held row of A's left behind (a landed write is freed again: the
   row is kept marked released, as every release keeps it); a failed release can be retried.
"""
from __future__ import annotations

import dataclasses
import threading
import time
import uuid
from datetime import timedelta
from typing import Any, Iterator, List, Optional, Tuple

import botocore.config
import pytest

from chaos_proxy import ChaosProxy
from conftest import dynamodb_local_table
from helpers import no_retry_backoff, wait_until
from python_dynamodb_lock.python_dynamodb_lock import DynamoDBLock, DynamoDBLockClient, DynamoDBLockError
from python_dynamodb_lock.testing import EmbeddedEngine, LockTable, dummy_boto3_session

HEARTBEAT = 0.2
SAFE = 1.2
LEASE = 2.4
CONNECT_TIMEOUT = 0.2
READ_TIMEOUT = 0.3
ATTEMPTS = 2
WAIT = 15.0      # real seconds any wait below allows before the test counts as stuck

PROXIED_CONFIG = botocore.config.Config(
    connect_timeout=CONNECT_TIMEOUT, read_timeout=READ_TIMEOUT,
    retries={'mode': 'standard', 'total_max_attempts': ATTEMPTS}, max_pool_connections=10,
)


class Callbacks:
    """An app_callback recording (code, monotonic time) of each call."""

    def __init__(self) -> None:
        self._calls: List[Tuple[str, float]] = []
        self._guard = threading.Lock()

    def __call__(self, code: str, lock: Any) -> None:
        with self._guard:
            self._calls.append((code, time.monotonic()))

    @property
    def codes(self) -> List[str]:
        with self._guard:
            return [code for code, _ in self._calls]

    def time_of(self, code: str) -> float:
        with self._guard:
            return next(at for called, at in self._calls if called == code)

    def wait_for(self, code: str) -> float:
        wait_until(lambda: code in self.codes, WAIT, lambda: f'no {code}; callbacks so far: {self.codes}')
        return self.time_of(code)


def proxied_resource(proxy: ChaosProxy) -> Any:
    return dummy_boto3_session().resource('dynamodb', endpoint_url=proxy.endpoint_url, config=PROXIED_CONFIG)


def lock_client(resource: Any, table: str, owner: str, *, heartbeat: float = HEARTBEAT, safe: float = SAFE,
                lease: float = LEASE) -> DynamoDBLockClient:
    return DynamoDBLockClient(resource, table_name=table, owner_name=owner,
                              heartbeat_period=timedelta(seconds=heartbeat), safe_period=timedelta(seconds=safe),
                              lease_duration=timedelta(seconds=lease))


def row_version(engine: LockTable, key: str) -> Optional[str]:
    row = engine.read_item(key)
    return None if row is None else row['record_version_number']


def assert_released(engine: LockTable, lock: DynamoDBLock) -> None:
    """The lock's key is free: its row is kept only marked released (``released_at``, lease 0),
    with the lock's fencing token, so the next holder's token is larger."""
    row = engine.read_item(lock.partition_key)
    assert row is not None and 'released_at' in row and row['lease_duration'] == 0, row
    assert row['fencing_token'] == lock.fencing_token, (row, lock.fencing_token)
    assert engine.read_held_row(lock.partition_key) is None


def wait_until_row_is(engine: LockTable, lock: DynamoDBLock) -> None:
    """Until the row carries the lock's current version (both move at every heartbeat)."""
    wait_until(lambda: row_version(engine, lock.partition_key) == lock.record_version_number, WAIT,
               lambda: f'row {row_version(engine, lock.partition_key)} != lock {lock.record_version_number}')


def wait_for_renewals(lock: DynamoDBLock, count: int) -> None:
    """Until the lock object has been renewed ``count`` more times (successful heartbeats)."""
    seen = [lock.record_version_number]

    def renewed() -> bool:
        if lock.record_version_number != seen[-1]:
            seen.append(lock.record_version_number)
        return len(seen) > count

    wait_until(renewed, WAIT, lambda: f'{len(seen) - 1} of {count} renewals; status {lock.status}')


@dataclasses.dataclass
class Setup:
    engine: LockTable
    proxy: ChaosProxy
    a: DynamoDBLockClient


@pytest.fixture
def setup(local_engine: LockTable, monkeypatch: pytest.MonkeyPatch) -> Iterator[Setup]:
    """A proxy to the test's DynamoDB Local, and client A behind it; B-clients are made by tests."""
    no_retry_backoff(monkeypatch)
    with ChaosProxy(local_engine_port(local_engine)) as proxy:
        a = lock_client(proxied_resource(proxy), local_engine.table_name, 'client-a')
        try:
            yield Setup(local_engine, proxy, a)
        finally:
            proxy.heal()
            a.close()


def local_engine_port(engine: LockTable) -> int:
    assert engine.endpoint_url is not None
    return int(engine.endpoint_url.rsplit(':', 1)[1])


# --------------------------------------------------------------------------------------------
# The harness itself
# --------------------------------------------------------------------------------------------

def test_the_proxy_does_what_each_mode_says(setup: Setup) -> None:
    """Without these, the scenarios below would prove nothing."""
    one_attempt = botocore.config.Config(connect_timeout=CONNECT_TIMEOUT, read_timeout=READ_TIMEOUT,
                                         retries={'mode': 'standard', 'total_max_attempts': 1})
    client = dummy_boto3_session().client('dynamodb', endpoint_url=setup.proxy.endpoint_url, config=one_attempt)
    table, engine = setup.engine.table_name, setup.engine

    def put(value: str) -> str:
        try:
            client.put_item(TableName=table, Item={'lock_key': {'S': 'probe'}, 'sort_key': {'S': '-'},
                                                   'v': {'S': value}})
            return 'answered'
        except Exception as error:   # what the client saw, by name
            return type(error).__name__

    def stored() -> Optional[str]:
        row = engine.read_item('probe')
        return None if row is None else row['v']

    assert (put('passed'), stored()) == ('answered', 'passed')
    setup.proxy.blackhole()
    assert (put('partitioned'), stored()) == ('ReadTimeoutError', 'passed')
    setup.proxy.drop_answers()
    assert (put('unanswered'), stored()) == ('ReadTimeoutError', 'unanswered')
    setup.proxy.reset_connections()
    assert (put('refused'), stored()) == ('ConnectionClosedError', 'unanswered')
    setup.proxy.heal()
    setup.proxy.reset_next_answers(1)
    assert (put('landed'), stored()) == ('ConnectionClosedError', 'landed')
    setup.proxy.add_latency(0.05)
    assert (put('late'), stored()) == ('answered', 'late')
    setup.proxy.heal()
    assert setup.proxy.stats.resets == 2 and setup.proxy.stats.answers_dropped >= 1


# --------------------------------------------------------------------------------------------
# a. A partition shorter than the safe period
# --------------------------------------------------------------------------------------------

@pytest.mark.slow
def test_a_partition_shorter_than_the_safe_period_goes_unnoticed(setup: Setup) -> None:
    callbacks = Callbacks()
    lock = setup.a.acquire_lock('a', app_callback=callbacks)
    wait_for_renewals(lock, 2)
    # Shorter than the read timeout, so one retry gets through: the longest a renewal can then
    # be late is the partition plus one read timeout plus one heartbeat period (0.75 s < 1.2 s).
    partition = 0.25
    started = time.monotonic()
    setup.proxy.blackhole()
    time.sleep(partition)
    setup.proxy.heal()
    wait_for_renewals(lock, 2)
    # Any LOCK_IN_DANGER would have been flagged within a safe period of the partition.
    time.sleep(max(0.0, started + SAFE + 2 * HEARTBEAT - time.monotonic()))
    assert callbacks.codes == []
    assert lock.status == DynamoDBLock.LOCKED
    wait_until_row_is(setup.engine, lock)
    assert setup.engine.read_item('a')['owner_name'] == 'client-a'
    # d. A strict release of a lock we still hold succeeds.
    lock.release(best_effort=False)
    assert lock.status == DynamoDBLock.RELEASED
    assert_released(setup.engine, lock)
    assert callbacks.codes == []


# --------------------------------------------------------------------------------------------
# b. A partition longer than the safe period, and another client taking the lock over
# --------------------------------------------------------------------------------------------

@dataclasses.dataclass
class TakeoverStory:
    """What happened in scenario (b); examined by the tests below."""

    engine: LockTable
    lock: DynamoDBLock
    callbacks: Callbacks
    codes_when_taken_over: List[str]
    taken_over_at: float
    thief_lock: DynamoDBLock


@pytest.fixture(scope='module')
def takeover_story(dynamodb_local: EmbeddedEngine) -> Iterator[TakeoverStory]:
    """Run scenario (b) once: A is partitioned away; B takes the lock over; the partition heals."""
    table_name = f'locks-chaos-takeover-{uuid.uuid4().hex[:8]}'
    with pytest.MonkeyPatch.context() as monkeypatch, dynamodb_local_table(dynamodb_local, table_name) as engine, \
            ChaosProxy(dynamodb_local.port) as proxy:
        no_retry_backoff(monkeypatch)
        a = lock_client(proxied_resource(proxy), table_name, 'client-a')
        b = lock_client(engine.resource, table_name, 'client-b')
        try:
            callbacks = Callbacks()
            lock = a.acquire_lock('b', app_callback=callbacks)
            wait_for_renewals(lock, 2)
            proxy.blackhole()
            callbacks.wait_for(DynamoDBLockError.LOCK_IN_DANGER)
            thief_lock = b.acquire_lock('b', retry_period=timedelta(seconds=0.1),
                                        retry_timeout=timedelta(seconds=LEASE * 4))
            taken_over_at = time.monotonic()
            codes_when_taken_over = callbacks.codes
            proxy.heal()
            callbacks.wait_for(DynamoDBLockError.LOCK_STOLEN)
            yield TakeoverStory(engine, lock, callbacks, codes_when_taken_over, taken_over_at, thief_lock)
        finally:
            proxy.heal()
            a.close()
            b.close()


@pytest.mark.slow
def test_b_a_long_partition_is_in_danger_first_and_stolen_only_after_the_takeover(
        takeover_story: TakeoverStory) -> None:
    story = takeover_story
    # Only LOCK_IN_DANGER while partitioned, even once B held the lock: A could not know yet.
    assert story.codes_when_taken_over == [DynamoDBLockError.LOCK_IN_DANGER]
    # LOCK_STOLEN once healed, after B's takeover, and nothing else.
    assert story.callbacks.codes == [DynamoDBLockError.LOCK_IN_DANGER, DynamoDBLockError.LOCK_STOLEN]
    assert story.callbacks.time_of(DynamoDBLockError.LOCK_STOLEN) > story.taken_over_at
    assert story.lock.status == DynamoDBLock.INVALID
    # B's row is B's, untouched by A's late heartbeats.
    row = story.engine.read_item('b')
    assert row is not None and row['owner_name'] == 'client-b'
    assert story.thief_lock.status == DynamoDBLock.LOCKED


@pytest.mark.slow
def test_d_a_strict_release_after_the_takeover_raises_lock_stolen(takeover_story: TakeoverStory) -> None:
    story = takeover_story
    with pytest.raises(DynamoDBLockError) as refused:
        story.lock.release(best_effort=False)
    assert refused.value.code == DynamoDBLockError.LOCK_STOLEN
    row = story.engine.read_item('b')
    assert row is not None and row['owner_name'] == 'client-b'


# --------------------------------------------------------------------------------------------
# c. Answers dropped while the writes land
# --------------------------------------------------------------------------------------------

@pytest.mark.slow
def test_c_lost_answers_are_not_taken_for_a_theft(setup: Setup) -> None:
    callbacks = Callbacks()
    lock = setup.a.acquire_lock('c', app_callback=callbacks)
    wait_for_renewals(lock, 2)
    wait_until_row_is(setup.engine, lock)
    confirmed = lock.record_version_number
    dropped_before = setup.proxy.stats.answers_dropped
    setup.proxy.drop_answers()
    landed = {confirmed}
    # Renewals land while no answer comes back: the row moves on without the lock object.
    wait_until(lambda: (landed.add(row_version(setup.engine, 'c')) or True)
               and len(landed) >= 3 and setup.proxy.stats.answers_dropped - dropped_before >= 4,
               WAIT, lambda: f'{len(landed) - 1} unconfirmed renewals landed')
    assert lock.record_version_number == confirmed       # A never heard of them
    setup.proxy.heal()
    wait_until(lambda: lock.status == DynamoDBLock.LOCKED and lock.record_version_number not in landed, WAIT,
               lambda: f'status {lock.status}')
    wait_until_row_is(setup.engine, lock)
    assert setup.engine.read_item('c')['owner_name'] == 'client-a'
    assert DynamoDBLockError.LOCK_STOLEN not in callbacks.codes
    # d. A strict release succeeds: the lock is ours.
    lock.release(best_effort=False)
    assert_released(setup.engine, lock)
    assert DynamoDBLockError.LOCK_STOLEN not in callbacks.codes


@pytest.mark.slow
def test_latency_below_the_read_timeout_changes_nothing(setup: Setup) -> None:
    callbacks = Callbacks()
    lock = setup.a.acquire_lock('latency', app_callback=callbacks)
    setup.proxy.add_latency(READ_TIMEOUT / 3)
    wait_for_renewals(lock, 4)
    setup.proxy.heal()
    assert callbacks.codes == [] and lock.status == DynamoDBLock.LOCKED
    lock.release(best_effort=False)
    assert_released(setup.engine, lock)


# --------------------------------------------------------------------------------------------
# e. Connection resets during acquire and release
# --------------------------------------------------------------------------------------------

RESETS = [pytest.param(how, count, id=f'{how}-{count}')
          for how in ('before-forwarding', 'after-the-write') for count in range(1, 7)]


def arm(proxy: ChaosProxy, how: str, count: int) -> None:
    if how == 'before-forwarding':
        proxy.reset_next_requests(count)     # the request never reaches DynamoDB
    else:
        proxy.reset_next_answers(count)      # the request is applied; its answer becomes an RST


@pytest.fixture
def quiet_a(setup: Setup) -> Iterator[DynamoDBLockClient]:
    """Client A with heartbeats far apart, so that the armed resets hit only the call under test."""
    client = lock_client(proxied_resource(setup.proxy), setup.engine.table_name, 'client-a-quiet',
                         heartbeat=30.0, safe=60.0, lease=120.0)
    yield client
    client.close()


@pytest.mark.parametrize('how, count', RESETS)
def test_e_resets_during_acquire_leave_an_exact_outcome(setup: Setup, quiet_a: DynamoDBLockClient, how: str,
                                                        count: int) -> None:
    callbacks = Callbacks()
    arm(setup.proxy, how, count)
    try:
        lock: Optional[DynamoDBLock] = quiet_a.acquire_lock('e', retry_timeout=timedelta(0), app_callback=callbacks)
    except DynamoDBLockError as error:
        assert error.code == DynamoDBLockError.UNKNOWN
        lock = None
    setup.proxy.heal()
    row = setup.engine.read_item('e')
    if lock is None:
        # No held row left behind: none at all if no write landed, else one the client freed
        # again (marked released, holding no lock).
        assert row is None or ('released_at' in row and row['lease_duration'] == 0), f'a row was left behind: {row}'
        assert setup.engine.read_held_row('e') is None
        if how == 'before-forwarding':
            assert row is None, f'nothing reached DynamoDB, yet: {row}'
    else:
        assert lock.status == DynamoDBLock.LOCKED
        assert row is not None and row['record_version_number'] == lock.record_version_number
        assert row['owner_name'] == 'client-a-quiet' and row['fencing_token'] == lock.fencing_token
        lock.release(best_effort=False)
        assert_released(setup.engine, lock)
    assert callbacks.codes == []


@pytest.mark.parametrize('how, count', RESETS)
def test_e_resets_during_release_leave_an_exact_outcome(setup: Setup, quiet_a: DynamoDBLockClient, how: str,
                                                        count: int) -> None:
    callbacks = Callbacks()
    lock = quiet_a.acquire_lock('e', app_callback=callbacks)
    arm(setup.proxy, how, count)
    try:
        lock.release(best_effort=False)
        released = True
    except DynamoDBLockError as error:
        assert error.code == DynamoDBLockError.UNKNOWN
        released = False
    setup.proxy.heal()
    if released:
        assert lock.status == DynamoDBLock.RELEASED
    else:
        # "UNKNOWN ... the lock is still held and kept alive, so the release can be retried"
        assert lock.status in (DynamoDBLock.LOCKED, DynamoDBLock.IN_DANGER)
        lock.release(best_effort=False)
        assert lock.status == DynamoDBLock.RELEASED
    assert_released(setup.engine, lock)
    assert callbacks.codes == []


def test_e_the_resets_were_really_spent(setup: Setup, quiet_a: DynamoDBLockClient) -> None:
    """Guards the two tests above: an armed reset is really met by the acquire, then the release."""
    setup.proxy.reset_next_answers(1)
    lock = quiet_a.acquire_lock('spent', retry_timeout=timedelta(0))
    assert setup.proxy.pending_resets == 0 and setup.proxy.stats.resets == 1
    setup.proxy.reset_next_requests(1)
    lock.release(best_effort=False)
    assert setup.proxy.pending_resets == 0 and setup.proxy.stats.resets == 2
    assert_released(setup.engine, lock)
