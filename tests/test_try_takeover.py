"""One ``try_acquire_lock`` per call takes a dead holder over (issue 19), on DynamoDB Local, with
both clients.

A client remembers, across its calls, the version of the row it found in the way at each key
and when it first saw it (on its clock). A dead holder's version stays the same, so one try per
(fake) second from the same client object takes the lock over once the version has stayed the
same for the lease stored in the row: within lease + 2 tries, never sooner than the lease. A live
holder renews, so its version changes between tries and it is never taken over. Rows written
by the published 0.9.1 / 0.9.3 packages are taken over the same way, only once their holder is
dead. Time is the shared ManualClock of the test's clients; nothing is timed.
"""
from __future__ import annotations

import datetime
from typing import Any, Iterator, Optional

import pytest

from helpers import LockClients, step
from python_dynamodb_lock.python_dynamodb_lock import DynamoDBLock
from python_dynamodb_lock.testing import LockTable, wait_until
from test_interop import PUBLISHED, Published
from test_multi_keys import try_acquire_locks

seconds = datetime.timedelta
LEASE = 10          # the holders' lease; the trying clients keep the default lease (30 s)
SHORT = {'lease_duration': seconds(seconds=LEASE), 'heartbeat_period': seconds(seconds=2),
         'safe_period': seconds(seconds=6)}


def tries_until_taken(clients: LockClients, trier: Any, key: str, most: int) -> Optional[Any]:
    """``trier.try_acquire_lock(key)`` once per fake second, up to ``most`` tries: (how many tries
    it took, the lock), or None when every try found the lock held."""
    for number in range(1, most + 1):
        lock = trier.try_acquire_lock(key)
        if lock is not None:
            return number, lock
        clients.clock.advance(1)
    return None


@pytest.mark.parametrize('max_clock_skew', [None, seconds(seconds=1)], ids=['no-skew', 'skew'])
def test_a_dead_holder_is_taken_over_by_one_try_per_second_within_its_lease_and_two_tries(
        local_engine: LockTable, local_clients: LockClients, max_clock_skew: Optional[datetime.timedelta]) -> None:
    holder = local_clients.make(local_engine.new_resource(), owner_name='holder', **SHORT)
    dead = holder.acquire_lock('job')
    holder.close()                                   # no release, no more heartbeats: its row is left
    trier = local_clients.make(owner_name='trier', max_clock_skew=max_clock_skew)
    taken = tries_until_taken(local_clients, trier, 'job', LEASE + 2)
    assert taken is not None, f'not taken over within {LEASE + 2} tries'
    number, lock = taken
    assert number == LEASE + 1                       # the row's lease (not the trier's) after the first sight
    assert lock.took_over_from is not None and lock.took_over_from.owner_name == 'holder'
    assert lock.fencing_token == dead.fencing_token + 1
    assert local_engine.read_held_row('job')['record_version_number'] == lock.record_version_number
    assert dead.release() is False                   # expired and taken: not released by this call
    assert lock.release() is True


def test_a_live_holder_is_never_taken_over_by_repeated_tries(local_engine: LockTable,
                                                             local_clients: LockClients) -> None:
    holder = local_clients.make(local_engine.new_resource(), hand_driven=False, owner_name='holder', **SHORT)
    held = holder.acquire_lock('busy')
    trier = local_clients.make(owner_name='trier')
    for _ in range(4 * LEASE):
        assert trier.try_acquire_lock('busy') is None
        step(local_clients.clock, 1, holder)         # its heartbeat thread (or task) renews every 2 s
    assert held.status == DynamoDBLock.LOCKED
    assert local_engine.read_held_row('busy')['record_version_number'] == held.record_version_number
    assert held.release() is True


def test_a_waiting_acquire_goes_on_from_what_earlier_tries_of_its_client_saw(local_engine: LockTable,
                                                                            local_clients: LockClients) -> None:
    holder = local_clients.make(local_engine.new_resource(), owner_name='holder', **SHORT)
    holder.acquire_lock('job')
    holder.close()
    trier = local_clients.make(owner_name='trier')
    assert tries_until_taken(local_clients, trier, 'job', LEASE - 2) is None     # LEASE - 3 s seen unchanged
    started = local_clients.clock.monotonic()
    with local_clients.clock.auto_advance_in_current_thread():
        lock = trier.acquire_lock('job', retry_period=seconds(seconds=1), retry_timeout=seconds(seconds=LEASE))
    assert lock.took_over_from.owner_name == 'holder'
    assert local_engine.read_held_row('job')['record_version_number'] == lock.record_version_number
    assert local_clients.clock.monotonic() - started <= 4      # the rest of the lease, not a whole one


def test_the_memory_belongs_to_the_client_object_a_new_client_per_try_starts_afresh(
        local_engine: LockTable, local_clients: LockClients) -> None:
    holder = local_clients.make(local_engine.new_resource(), owner_name='holder', **SHORT)
    holder.acquire_lock('job')
    holder.close()
    for _ in range(2 * LEASE):                       # as a cron job or Lambda making its client per run
        fresh = local_clients.make(owner_name='fresh')
        assert fresh.try_acquire_lock('job') is None
        fresh.close()
        local_clients.clock.advance(1)
    assert local_engine.read_held_row('job')['owner_name'] == 'holder'


# --- rows of the published package ------------------------------------------------------

#: The published holder's TTL epoch: far beyond the test, so that only the watch takes it over.
PUBLISHED_EXPIRY = 3600.0
PUBLISHED_LEASE = 2.0


@pytest.fixture(params=sorted(PUBLISHED))
def published(request: pytest.FixtureRequest, local_engine: LockTable) -> Iterator[Published]:
    client = Published(request.param, local_engine.endpoint_url, local_engine.table_name,
                       lease=PUBLISHED_LEASE, expiry=PUBLISHED_EXPIRY)
    yield client
    client.close()


def test_a_dead_published_holder_is_taken_over_by_one_try_per_second(published: Published,
                                                                     local_engine: LockTable,
                                                                     local_clients: LockClients) -> None:
    assert published.acquire('shared', timeout=1)['event'] == 'acquired'
    published.process.kill()                         # the published holder dies holding the lock
    published.process.wait(10)
    row = local_engine.read_item('shared')
    assert 'fencing_token' not in row and 'lease_expiry' not in row      # the published layout
    trier = local_clients.make(owner_name='trier')
    taken = tries_until_taken(local_clients, trier, 'shared', int(PUBLISHED_LEASE) + 2)
    assert taken is not None and taken[0] == PUBLISHED_LEASE + 1
    lock = taken[1]
    assert lock.took_over_from.owner_name.startswith('published-')
    assert lock.took_over_from.record_version_number == row['record_version_number']


def test_a_live_published_holder_is_never_taken_over_by_repeated_tries(published: Published,
                                                                       local_engine: LockTable,
                                                                       local_clients: LockClients) -> None:
    assert published.acquire('shared', timeout=1)['event'] == 'acquired'
    trier = local_clients.make(owner_name='trier')
    version = local_engine.read_item('shared')['record_version_number']
    for _ in range(int(4 * PUBLISHED_LEASE)):
        assert trier.try_acquire_lock('shared') is None
        # The published holder renews on real time (every 0.25 s): one renewal per fake second.
        wait_until(lambda seen=version: local_engine.read_item('shared')['record_version_number'] != seen,
                   message=lambda: 'the published holder stopped renewing')
        version = local_engine.read_item('shared')['record_version_number']
        local_clients.clock.advance(1)
    assert local_engine.read_item('shared')['owner_name'].startswith('published-')
    assert published.send(cmd='release')['event'] == 'released'


def test_repeated_try_acquire_locks_take_a_dead_holder_over_as_repeated_single_tries_do(
        local_engine: LockTable, local_clients: LockClients) -> None:
    """Issue 27, finding 2: a one-attempt ``try_acquire_locks`` records what it saw in the
    client's memory, so one try per second takes a dead holder of one key of the set over
    within the holder's lease and two tries, never sooner."""
    from test_multi_keys import try_acquire_locks
    holder = local_clients.make(local_engine.new_resource(), owner_name='holder', **SHORT)
    dead = holder.acquire_lock('set-b')
    holder.close()
    trier = local_clients.make(owner_name='trier')
    multi, number = None, 0
    while multi is None and number < LEASE + 2:
        number += 1
        multi = try_acquire_locks(trier, ['set-a', 'set-b'])
        if multi is None:
            assert local_engine.read_held_row('set-b')['owner_name'] == 'holder'
            assert local_engine.read_item('set-a') is None or local_engine.read_item('set-a').get('released_at')
            local_clients.clock.advance(1)
    assert multi is not None, f'not taken over within {LEASE + 2} tries'
    assert number == LEASE + 1                       # the row's lease after the first sight, as try_acquire_lock
    taken = multi.locks[1]
    assert taken.took_over_from is not None and taken.took_over_from.owner_name == 'holder'
    assert taken.fencing_token == dead.fencing_token + 1
    assert local_engine.read_held_row('set-b')['record_version_number'] == taken.record_version_number
    multi.release()


def test_repeated_try_acquire_locks_never_take_a_live_holder_over(local_engine: LockTable,
                                                                  local_clients: LockClients) -> None:
    from test_multi_keys import try_acquire_locks
    holder = local_clients.make(local_engine.new_resource(), hand_driven=False, owner_name='holder', **SHORT)
    held = holder.acquire_lock('live-b')
    trier = local_clients.make(owner_name='trier')
    for _ in range(3 * LEASE):
        assert try_acquire_locks(trier, ['live-a', 'live-b']) is None
        step(local_clients.clock, 1, holder)
    assert held.status == DynamoDBLock.LOCKED
    assert local_engine.read_held_row('live-b')['record_version_number'] == held.record_version_number
    assert held.release() is True


@pytest.mark.parametrize('as_a_set', [False, True], ids=['try_acquire_lock', 'try_acquire_locks'])
def test_a_dead_readers_entry_is_taken_over_by_one_try_per_second_after_its_lease(
        local_engine: LockTable, local_clients: LockClients, as_a_set: bool) -> None:
    """A shared holder that died leaves its entry: repeated tries of one client object go on
    from what its earlier tries saw, as for an exclusive holder, and take the key over once the
    entry stood unchanged for its lease (simulation sim29a: they used to start over each call)."""
    reader = local_clients.make(local_engine.new_resource(), owner_name='reader', **SHORT)
    dead = reader.acquire_lock('job', shared=True)
    reader.close()                                   # no release, no more heartbeats: its entry is left
    trier = local_clients.make(owner_name='trier')
    taken, tries = None, 0
    while taken is None and tries < LEASE + 2:
        if tries:
            local_clients.clock.advance(1)
        tries += 1
        taken = try_acquire_locks(trier, ['job', 'other']) if as_a_set else trier.try_acquire_lock('job')
    assert taken is not None, f'not taken over within {LEASE + 2} tries'
    assert tries == LEASE + 1                        # the entry's lease after the first sight, never sooner
    row = local_engine.read_held_row('job')
    assert row['owner_name'] == 'trier' and 'shared_holders' not in row
    assert dead.release() is False                   # its entry was removed: not released by this call
    assert taken.release() is True
