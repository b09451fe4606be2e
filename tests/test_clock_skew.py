"""``max_clock_skew=``: faster takeover of a crashed holder, from the end of the lease its
holder wrote (``lease_expiry``), for applications that trust their hosts' wall clocks to agree
to within the declared skew.

Off by default (a waiter watches the version for a whole lease). With it, a waiter takes a lock
over at first sight once ``lease_expiry + max_clock_skew`` has passed on its own wall clock; a
live holder whose clock is off by up to the declared skew is never taken over, and a holder
that stops renewing is taken over no earlier than its own lease (on its monotonic clock) ends.

Each client has its own ManualClock where clocks must differ; the test moves them together.
"""
from __future__ import annotations

import datetime
import time
from typing import Any, List

import pytest
from helpers import BackgroundCall, FaultInjector, LockClients, ManualClock, offline_resource

from python_dynamodb_lock.python_dynamodb_lock import DynamoDBLock, DynamoDBLockClient, DynamoDBLockError
from python_dynamodb_lock.testing import LockTable

seconds = datetime.timedelta

LEASE = 10.0
SKEW = 2.0


def make_clock(wall_offset: float, like: ManualClock) -> ManualClock:
    """A clock at the same monotonic time as ``like``, its wall clock off by ``wall_offset``."""
    clock = ManualClock(start_monotonic=like.monotonic(), start_time=like.time())
    clock.shift_wall_clock(wall_offset)
    return clock


def advance(clocks: List[ManualClock], by: float) -> None:
    for clock in clocks:
        clock.advance(by)


def client_on(clients: LockClients, clock: ManualClock, owner: str, skew: Any = None) -> Any:
    return clients.make(clock=clock, owner_name=owner, lease_duration=seconds(seconds=LEASE),
                        heartbeat_period=seconds(seconds=2), safe_period=seconds(seconds=6),
                        max_clock_skew=None if skew is None else seconds(seconds=skew))


def test_off_by_default_a_dead_holders_lock_is_watched_for_a_whole_lease(engine: LockTable,
                                                                         clients: LockClients) -> None:
    clock = clients.clock
    crashed = client_on(clients, clock, 'crashed')
    crashed.acquire_lock('job')                   # and never renews it again
    advance([clock], LEASE + 60)
    waiter = client_on(clients, clock, 'waiter')
    assert waiter.try_acquire_lock('job') is None  # first sight: not abandoned yet
    with clock.auto_advance_in_current_thread():
        started = clock.monotonic()
        lock = waiter.acquire_lock('job', retry_period=seconds(seconds=1), retry_timeout=seconds(seconds=60))
    assert clock.monotonic() - started >= LEASE    # watched for a whole lease
    assert lock.took_over_from.owner_name == 'crashed'


def test_with_a_skew_a_dead_holders_lock_is_taken_at_first_sight(engine: LockTable, clients: LockClients) -> None:
    clock = clients.clock
    crashed = client_on(clients, clock, 'crashed')
    dead = crashed.acquire_lock('job')
    waiter = client_on(clients, clock, 'waiter', skew=SKEW)
    advance([clock], LEASE + SKEW - 0.01)
    assert waiter.try_acquire_lock('job') is None  # lease_expiry + skew not passed yet
    advance([clock], 0.02)
    lock = waiter.try_acquire_lock('job')          # one attempt, no watching
    assert lock is not None
    assert lock.took_over_from is not None
    assert lock.took_over_from.owner_name == 'crashed'
    assert lock.took_over_from.record_version_number == dead.record_version_number
    assert lock.took_over_from.fencing_token == dead.fencing_token
    assert lock.fencing_token == dead.fencing_token + 1
    assert dead.lease_remaining() < 0             # the dead holder's own lease had ended
    assert engine.read_item('job')['owner_name'] == 'waiter'


@pytest.mark.parametrize('holder_offset, waiter_offset', [(-SKEW, 0.0), (0.0, SKEW), (SKEW, 0.0), (0.0, -SKEW)],
                         ids=['holder-behind', 'waiter-ahead', 'holder-ahead', 'waiter-behind'])
def test_a_live_holder_with_a_skewed_clock_within_the_declared_skew_is_excluded(
        engine: LockTable, clients: LockClients, holder_offset: float, waiter_offset: float) -> None:
    holder_clock = make_clock(holder_offset, like=clients.clock)
    waiter_clock = make_clock(waiter_offset, like=clients.clock)
    clocks = [holder_clock, waiter_clock]
    holder = client_on(clients, holder_clock, 'holder')
    waiter = client_on(clients, waiter_clock, 'waiter', skew=SKEW)
    lock = holder.acquire_lock('job')
    for _ in range(30):                           # 60 s: six leases, renewed every 2 s
        advance(clocks, 2)
        holder.send_heartbeats()
        assert waiter.try_acquire_lock('job') is None
    assert lock.status == DynamoDBLock.LOCKED

    # The holder stops renewing (it crashed): taken over at first sight, but never before the
    # holder's own lease, counted from its last renewal on its monotonic clock, has ended.
    taken = None
    for _ in range(int((LEASE + 3 * SKEW) / 0.1)):
        advance(clocks, 0.1)
        taken = waiter.try_acquire_lock('job')
        if taken is not None:
            break
        assert lock.lease_remaining() > -2 * SKEW - 0.5   # taken over within lease + 2 skews at the latest
    assert taken is not None
    assert lock.lease_remaining() <= 0
    assert taken.took_over_from.owner_name == 'holder'


def test_a_row_without_lease_expiry_is_watched_for_a_whole_lease(engine: LockTable, clients: LockClients) -> None:
    """Rows of published 0.9.x clients (and of other programs) have no lease_expiry."""
    engine.put_lock_row('published', owner_name='published-client', lease_duration=LEASE, fencing_token=None)
    clock = clients.clock
    waiter = client_on(clients, clock, 'waiter', skew=SKEW)
    advance([clock], 3600 * 0.5)
    assert waiter.try_acquire_lock('published') is None
    with clock.auto_advance_in_current_thread():
        lock = waiter.acquire_lock('published', retry_period=seconds(seconds=1), retry_timeout=seconds(seconds=60))
    assert lock.took_over_from.owner_name == 'published-client'


def test_the_ttl_of_a_row_also_counts_with_the_skew(engine: LockTable, clients: LockClients) -> None:
    # The waiter's wall clock runs a day ahead of the real one: DynamoDB Local deletes rows whose
    # TTL has passed in real time, at moments of its own, and these rows must stay until read.
    clock = make_clock(86400, like=clients.clock)
    waiter = client_on(clients, clock, 'waiter', skew=SKEW)
    engine.put_lock_row('recent', expiry_time=int(clock.time()) - 1, fencing_token=3)
    assert waiter.try_acquire_lock('recent') is None           # expired less than the skew ago
    engine.put_lock_row('old', expiry_time=int(clock.time()) - 3, fencing_token=3)
    assert waiter.try_acquire_lock('old') is not None


def test_the_lease_written_is_never_shorter_than_the_one_the_holder_counts(engine: LockTable,
                                                                          clients: LockClients) -> None:
    """A renewal retried after conflicts (a guarded write of the lock was in progress) lands
    later than it was made: the holder counts its lease from when it made it, as the
    lease_expiry it wrote does, not from the attempt that landed."""
    clock = clients.clock
    holder = client_on(clients, clock, 'holder')
    lock = holder.acquire_lock('job')
    row = engine.read_item('job')
    assert lock.lease_remaining() <= float(row['lease_expiry']) - clock.time()
    advance([clock], 1.2345)
    with FaultInjector(engine.resource) as faults:
        faults.fail_calls('UpdateItem', code='TransactionConflictException', times=2)
        with clock.auto_advance_in_current_thread():    # the retries sleep 50 and 100 ms
            holder.send_heartbeats()
    row = engine.read_item('job')
    assert row['record_version_number'] == lock.record_version_number   # the third attempt landed
    written = float(row['lease_expiry']) - clock.time()
    assert lock.lease_remaining() <= written
    assert written - lock.lease_remaining() < 0.002    # to the millisecond, rounded up


@pytest.mark.parametrize('value, error', [(seconds(seconds=-1), ValueError), (2, TypeError), (2.0, TypeError)])
def test_bad_skews_are_refused(value: Any, error: type) -> None:
    with pytest.raises(error, match='max_clock_skew'):
        DynamoDBLockClient(offline_resource(), max_clock_skew=value, background_heartbeats=False)


def test_a_zero_skew_is_allowed(engine: LockTable, clients: LockClients) -> None:
    clock = clients.clock
    client_on(clients, clock, 'crashed').acquire_lock('job')
    waiter = client_on(clients, clock, 'waiter', skew=0)
    advance([clock], LEASE + 0.01)
    assert waiter.try_acquire_lock('job') is not None


def test_a_live_holder_on_dynamodb_local_is_never_taken_over(local_engine: LockTable) -> None:
    """Real time and background heartbeats: a waiter with a skew watches for three leases and
    never gets the lock; once the holder is closed without releasing, the waiter takes it over
    at first sight after lease + skew, without watching it for a lease."""
    timing = dict(lease_duration=seconds(seconds=1.5), heartbeat_period=seconds(seconds=0.25),
                  safe_period=seconds(seconds=1))
    holder = local_engine.lock_client(owner_name='holder', **timing)
    waiter = local_engine.lock_client(owner_name='waiter', max_clock_skew=seconds(seconds=0.5), **timing)
    lock = holder.acquire_lock('live')
    attempt = BackgroundCall(waiter.acquire_lock, 'live', retry_period=seconds(seconds=0.1),
                             retry_timeout=seconds(seconds=4.5))
    error = attempt.error(timeout=30)
    assert isinstance(error, DynamoDBLockError) and error.code == DynamoDBLockError.ACQUIRE_TIMEOUT
    assert lock.status == DynamoDBLock.LOCKED
    holder.close()                                 # heartbeats stop; the row stays
    # A renewal sent just before close() may still land: read until the row stops changing.
    row = local_engine.read_item('live')
    while True:
        time.sleep(0.5)
        again = local_engine.read_item('live')
        if again == row:
            break
        row = again
    expiry = float(row['lease_expiry'])
    while time.time() < expiry + 0.5 + 0.05:
        time.sleep(0.05)
    taken = waiter.try_acquire_lock('live')
    assert taken is not None and taken.took_over_from.owner_name == 'holder'
    taken.release()
