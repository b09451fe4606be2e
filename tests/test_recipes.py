"""The recipes: leader election and the counting semaphore (python_dynamodb_lock.recipes).

Semantics on moto and DynamoDB Local, with a ManualClock and hand-driven lock clients (no
background threads: time, renewals and failures happen when the test says so):

* a leader's term is its lock's fencing token, and grows with every election;
* a leader whose renewals fail steps down (``on_lost`` before its lock is released) when its
  safe period ends, before anyone else can be elected; a leader whose lock was taken reports
  ``STOLEN``; a candidate takes over the lock of a leader that stopped renewing after a lease;
* no exception stops an election's thread; callbacks' exceptions are logged; ``close()`` ends
  every wait at once;
* a semaphore of N hands out at most N permits, one per slot, each with its slot's fencing
  token; a crashed holder's slot is taken over after its lease; N is checked before any call.

Concurrency claims, on DynamoDB Local only, with real processes (``tests/_recipes_worker.py``):

* candidates in separate processes: the leader is SIGKILLed, another is elected within
  ``lease + 2 * retry_period`` (plus a margin for a loaded machine) with a larger term;
* the leader is SIGSTOPped past its lease, another is elected; when the paused one resumes,
  its first read of its term is None, it reports the loss, and no two stretches of leadership
  observed by any candidate overlap or share a term;
* a semaphore torture: several processes of several threads, plus a holder SIGKILLed while
  holding a permit; the recorded holding intervals never exceed N at any moment, no slot is
  held twice at once, tokens grow per slot, and the dead holder's slot is taken over.
"""
from __future__ import annotations

import datetime
import json
import logging
import os
import pathlib
import signal
import subprocess
import sys
import threading
import time
from typing import Any, Dict, Iterator, List, Optional, Tuple

import pytest

from _torture.runner import stress_size
from _torture.support import close_pipes
from helpers import (
    REAL_TIMEOUT,
    BackgroundCall,
    CallRecorder,
    FaultInjector,
    LockClients,
    ManualClock,
    offline_resource,
    step,
    wait_until,
)
from python_dynamodb_lock import LeaderElection, Permit, Semaphore
from python_dynamodb_lock.python_dynamodb_lock import DynamoDBLock, DynamoDBLockClient, DynamoDBLockError
from python_dynamodb_lock.recipes import LossReason

pytestmark = [pytest.mark.threaded_only]

ROOT = pathlib.Path(__file__).resolve().parent.parent
RECIPES = 'python_dynamodb_lock.recipes'
seconds = datetime.timedelta


def election_threads(*elections: LeaderElection) -> List[threading.Thread]:
    return [election.worker for election in elections if election.worker is not None]


def become_leader(election: LeaderElection) -> None:
    """Wait for leadership (``wait_for_leadership()``, no timeout), giving up after REAL_TIMEOUT real seconds."""
    assert BackgroundCall(election.wait_for_leadership, name='wait-for-leadership').result(REAL_TIMEOUT) is True
    assert election.is_leader


def in_clock_sleep(thread: Optional[threading.Thread]) -> bool:
    """Whether ``thread`` is waiting in a clock's ``sleep`` right now."""
    frame = sys._current_frames().get(thread.ident) if thread is not None and thread.ident is not None else None
    while frame is not None:
        if frame.f_code.co_name == 'sleep' and frame.f_code.co_filename.endswith('_common/clock.py'):
            return True
        frame = frame.f_back
    return False


def idle(clock: ManualClock, *elections: LeaderElection) -> None:
    """Wait (real time) until the elections' threads sleep on the clock (or have ended)."""
    clock.wait_until_idle(election_threads(*elections))


class Recorder:
    """on_elected / on_lost callbacks that record what they are told, on which thread, and
    (for on_lost) whatever ``also()`` returns at that moment."""

    def __init__(self, also: Any = None) -> None:
        self.calls: List[Tuple[Any, ...]] = []
        self.threads: List[str] = []
        self._also = also

    def elected(self, term: Optional[int]) -> None:
        self.threads.append(threading.current_thread().name)
        self.calls.append(('elected', term))

    def lost(self, term: Optional[int], reason: str) -> None:
        self.threads.append(threading.current_thread().name)
        extra = self._also() if self._also is not None else ()
        self.calls.append(('lost', term, reason, *extra))


@pytest.fixture
def elections() -> Iterator[List[LeaderElection]]:
    """Elections made by a test (append them): closed at its end."""
    made: List[LeaderElection] = []
    yield made
    for election in made:
        election.close()


def elected_leader(client: Any, elections: List[LeaderElection], retry_period: float
                   ) -> Tuple[LeaderElection, Recorder, Any, int]:
    """A started election on the key ``'leader'`` that has won: it, its callbacks' recorder, its
    lock and its term."""
    recorder = Recorder()
    election = LeaderElection(client, 'leader', on_elected=recorder.elected, on_lost=recorder.lost,
                              retry_period=seconds(seconds=retry_period))
    elections.append(election)
    election.start()
    become_leader(election)
    lock, term = election.lock, election.term
    assert lock is not None and term is not None
    return election, recorder, lock, term


# --------------------------------------------------------------------------------------------
# Arguments, checked before anything is written
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize('limit, error', [
    (0, ValueError), (-1, ValueError), (1001, ValueError), (True, TypeError), (1.5, TypeError), ('2', TypeError),
    (None, TypeError),
])
def test_a_bad_semaphore_limit_is_refused_before_any_call(limit: Any, error: type) -> None:
    resource = offline_resource()
    client = DynamoDBLockClient(resource, background_heartbeats=False)
    try:
        with CallRecorder(resource) as calls:
            with pytest.raises(error, match='limit'):
                Semaphore(client, 'pool', limit)
            with pytest.raises(error, match='limit'):
                Semaphore(object(), 'pool', limit)      # type: ignore[arg-type]  # the limit is checked first
        assert calls.calls == []
    finally:
        client.close()


def test_other_bad_arguments_are_refused_before_any_call() -> None:
    resource = offline_resource()
    client = DynamoDBLockClient(resource, background_heartbeats=False)
    try:
        with CallRecorder(resource) as calls:
            with pytest.raises(TypeError, match='DynamoDBLockClient'):
                Semaphore(object(), 'pool', 2)          # type: ignore[arg-type]
            with pytest.raises(TypeError, match='DynamoDBLockClient'):
                LeaderElection(object(), 'leader')      # type: ignore[arg-type]
            with pytest.raises(ValueError):
                Semaphore(client, '', 2)
            with pytest.raises(ValueError, match='semaphore_limit'):
                Semaphore(client, 'pool', 2, additional_attributes={'semaphore_limit': 3})
            with pytest.raises(ValueError, match='retry_period'):
                Semaphore(client, 'pool', 2, retry_period=seconds(0))
            with pytest.raises(TypeError, match='on_lost'):
                LeaderElection(client, 'leader', on_lost='not callable')  # type: ignore[arg-type]
            with pytest.raises(ValueError, match='candidate_id'):
                LeaderElection(client, 'leader', additional_attributes={'candidate_id': 'me'})
            with pytest.raises(TypeError, match='candidate_id'):
                LeaderElection(client, 'leader', candidate_id='')
            semaphore = Semaphore(client, 'pool', 2)
            with pytest.raises(ValueError, match='timeout'):
                semaphore.acquire(timeout=-1)
            with pytest.raises(TypeError, match='timeout'):
                semaphore.acquire(timeout='soon')       # type: ignore[arg-type]
            election = LeaderElection(client, 'leader')
            with pytest.raises(ValueError, match='timeout'):
                election.wait_for_leadership(float('nan'))
            election.close()
            with pytest.raises(RuntimeError, match='closed'):
                election.start()
        assert calls.calls == []
    finally:
        client.close()


def test_an_election_needs_a_safe_period_shorter_than_the_lease() -> None:
    client = DynamoDBLockClient(offline_resource(), background_heartbeats=False, safe_period=seconds(seconds=30),
                                lease_duration=seconds(seconds=30))
    try:
        with pytest.raises(ValueError, match='safe_period'):
            LeaderElection(client, 'leader')
    finally:
        client.close()


def test_a_semaphore_needs_a_table_with_a_sort_key() -> None:
    client = DynamoDBLockClient(offline_resource(), background_heartbeats=False, sort_key_name=None)  # type: ignore[arg-type]
    try:
        with pytest.raises(ValueError, match='sort key'):
            Semaphore(client, 'pool', 2)
    finally:
        client.close()


# --------------------------------------------------------------------------------------------
# Leader election: semantics (moto and DynamoDB Local, ManualClock, hand-driven clients)
# --------------------------------------------------------------------------------------------

def test_the_leader_has_its_lock_and_its_term_is_the_fencing_token(
        engine: Any, clients: LockClients, elections: List[LeaderElection]) -> None:
    client = clients.make()
    recorder = Recorder(also=lambda: (engine.read_held_row('leader') is not None,))
    election = LeaderElection(client, 'leader', candidate_id='alice', on_elected=recorder.elected,
                              on_lost=recorder.lost)
    elections.append(election)
    assert not election.is_leader and election.term is None and election.lock is None
    election.start()
    become_leader(election)
    lock = election.lock
    assert isinstance(lock, DynamoDBLock) and lock.status == DynamoDBLock.LOCKED
    term = election.term
    assert isinstance(term, int) and term == lock.fencing_token
    row = engine.read_held_row('leader')
    assert row is not None and row['fencing_token'] == term and row['candidate_id'] == 'alice'
    leader = election.current_leader()
    assert leader is not None and leader.fencing_token == term
    assert leader.additional_attributes['candidate_id'] == 'alice'
    election.resign()
    assert not election.is_leader and election.term is None and not election.campaigning
    # on_lost ran before the release: the row was still held while the application stopped
    assert recorder.calls == [('elected', term), ('lost', term, LossReason.RESIGNED, True)]
    assert recorder.threads[0].startswith('LeaderElection')     # on_elected: on the election's thread
    assert engine.read_held_row('leader') is None
    assert lock.status == DynamoDBLock.RELEASED
    election.start()                              # campaign again: a new term
    become_leader(election)
    assert election.term is not None and election.term > term
    assert recorder.calls[-1] == ('elected', election.term)


def test_one_leader_among_candidates_and_the_next_one_has_a_larger_term(
        engine: Any, clients: LockClients, elections: List[LeaderElection]) -> None:
    clock = clients.clock
    first = LeaderElection(clients.make(), 'leader', candidate_id='first')
    second = LeaderElection(clients.make(), 'leader', candidate_id='second', retry_period=seconds(seconds=1))
    elections.extend([first, second])
    first.start()
    become_leader(first)
    second.start()
    idle(clock, first, second)
    assert not second.is_leader
    assert not second.wait_for_leadership(timeout=0)
    step(clock, 10, threads=election_threads(first, second))
    assert first.is_leader and not second.is_leader       # no heartbeat is needed: no time lease ran out
    old_term = first.term
    assert old_term is not None
    first.close()
    assert not first.is_leader
    step(clock, 1, threads=election_threads(second))      # the second polls once: the lock is free
    assert second.wait_for_leadership(timeout=0)
    assert second.term is not None and second.term > old_term
    leader = second.current_leader()
    assert leader is not None and leader.additional_attributes['candidate_id'] == 'second'


def test_a_leader_whose_renewals_fail_steps_down_before_anyone_else_can_be_elected(
        engine: Any, clients: LockClients, elections: List[LeaderElection], caplog: pytest.LogCaptureFixture) -> None:
    """Lease 30 s, safe period 20 s. The leader's client can no longer reach DynamoDB (its lock
    is never renewed and its release fails): at +20 s, and not before, it stops leading and
    reports IN_DANGER with 10 s of lease left; the other candidate takes over at +30 s."""
    caplog.set_level(logging.WARNING, logger=RECIPES)
    clock = clients.clock
    leader_resource = engine.new_resource()
    leader_client = clients.make(leader_resource)
    captured: Dict[str, Any] = {}

    def when_lost() -> Tuple[Any, ...]:
        lock = captured['lock']
        return clock.monotonic() - captured['elected_at'], lock.lease_remaining(), other.is_leader

    recorder = Recorder(also=when_lost)
    leader = LeaderElection(leader_client, 'leader', on_elected=recorder.elected, on_lost=recorder.lost,
                            retry_period=seconds(seconds=5))
    other = LeaderElection(clients.make(), 'leader', retry_period=seconds(seconds=1))
    elections.extend([leader, other])
    leader.start()
    become_leader(leader)
    captured['lock'], captured['elected_at'] = leader.lock, clock.monotonic()
    term = leader.term
    other.start()
    idle(clock, leader, other)
    threads = election_threads(leader, other)
    with FaultInjector(leader_resource) as faults:
        faults.fail_calls('*', code='InternalServerError', status=500, times=None)
        step(clock, 19, threads=threads)
        assert leader.is_leader and not other.is_leader
        clock.advance(1)                                   # +20 s: the safe period is over
        assert not leader.is_leader and leader.term is None and leader.lock is None   # at once, as read
        wait_until(lambda: len(recorder.calls) == 2)
        assert recorder.calls == [('elected', term), ('lost', term, LossReason.IN_DANGER, 20.0, 10.0, False)]
        for _ in range(9):                                 # +21 ... +29 s: nobody leads
            step(clock, 1, threads=threads)
            assert not leader.is_leader and not other.is_leader
        step(clock, 1, threads=threads)                    # +30 s: the lease has run out
        assert other.is_leader and other.term is not None and term is not None and other.term > term
        assert not leader.is_leader
    # the failing calls (release, then campaigning) were logged, and the loop went on
    assert [record for record in caplog.records if record.name == RECIPES and 'failed' in record.getMessage()]
    assert leader.worker is not None and leader.worker.is_alive()


def test_a_leader_whose_lock_was_taken_reports_it_stolen_and_campaigns_again(
        engine: Any, clients: LockClients, elections: List[LeaderElection]) -> None:
    clock = clients.clock
    client = clients.make()
    election, recorder, lock, term = elected_leader(client, elections, 1)
    engine.steal_row('leader')
    client.send_heartbeats()                      # finds the row taken: LOCK_STOLEN wakes the election
    wait_until(lambda: len(recorder.calls) == 2)
    assert recorder.calls == [('elected', term), ('lost', term, LossReason.STOLEN)]
    assert lock.loss_reason == 'TAKEN_OVER'
    row = engine.read_held_row('leader')
    assert row is not None and row['owner_name'] == 'thief'        # a stolen lock is not released
    idle(clock, election)
    step(clock, 30, threads=election_threads(election))   # the thief never renews: taken over after its lease
    assert election.is_leader
    assert election.term is not None and election.term > term
    assert recorder.calls[-1] == ('elected', election.term)


def test_a_lock_released_behind_the_elections_back_ends_leadership(
        engine: Any, clients: LockClients, elections: List[LeaderElection]) -> None:
    client = clients.make()
    election, recorder, lock, term = elected_leader(client, elections, 1)
    idle(clients.clock, election)
    lock.release()                                # the application should have resigned instead
    assert not election.is_leader and election.term is None
    step(clients.clock, 1, threads=election_threads(election))   # noticed within a retry period...
    assert recorder.calls[:2] == [('elected', term), ('lost', term, LossReason.RELEASED)]
    assert election.is_leader                     # ...and the election, still campaigning, won again
    assert election.term is not None and term is not None and election.term > term
    assert recorder.calls[2:] == [('elected', election.term)]


def test_callback_exceptions_are_logged_and_the_election_goes_on(
        engine: Any, clients: LockClients, elections: List[LeaderElection], caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.ERROR, logger=RECIPES)

    def boom(*args: Any) -> None:
        raise RuntimeError('callback failed')

    election = LeaderElection(clients.make(), 'leader', on_elected=boom, on_lost=boom)
    elections.append(election)
    election.start()
    become_leader(election)
    election.resign()
    assert engine.read_held_row('leader') is None               # released all the same
    election.start()
    become_leader(election)
    messages = [record.getMessage() for record in caplog.records if record.levelno == logging.ERROR]
    assert sum('on_elected' in message for message in messages) == 2
    assert sum('on_lost' in message for message in messages) == 1
    assert all(record.exc_info for record in caplog.records if record.levelno == logging.ERROR)


def test_errors_while_campaigning_are_logged_and_the_campaign_goes_on(
        engine: Any, clients: LockClients, elections: List[LeaderElection], caplog: pytest.LogCaptureFixture,
        monkeypatch: pytest.MonkeyPatch) -> None:
    caplog.set_level(logging.WARNING, logger=RECIPES)
    clock = clients.clock
    resource = engine.new_resource()
    election = LeaderElection(clients.make(resource), 'leader', retry_period=seconds(seconds=2))
    elections.append(election)
    failures = {'bug': 1}
    real_campaign = election._campaign

    def buggy_campaign() -> Any:      # a fault hook: a bug in the campaign's own code
        if failures['bug']:
            failures['bug'] -= 1
            raise KeyError('a bug')
        return (yield from real_campaign())

    monkeypatch.setattr(election, '_campaign', buggy_campaign)
    with FaultInjector(resource) as faults:
        failing = faults.fail_calls('*', code='InternalServerError', status=500, times=None)
        election.start()
        idle(clock, election)
        step(clock, 6, threads=election_threads(election))
        assert failing.hits >= 2
        assert not election.is_leader
    step(clock, 2, threads=election_threads(election))
    assert election.is_leader
    messages = [record.getMessage() for record in caplog.records if record.name == RECIPES]
    assert any('unexpected error' in message for message in messages)
    assert sum('failed' in message for message in messages) >= 2


def test_wait_for_leadership_times_out_on_the_clock_and_ends_on_close(
        engine: Any, clients: LockClients, elections: List[LeaderElection]) -> None:
    clock = clients.clock
    holder = LeaderElection(clients.make(), 'leader')
    waiting = LeaderElection(clients.make(), 'leader', retry_period=seconds(seconds=1))
    elections.extend([holder, waiting])
    holder.start()
    become_leader(holder)
    waiting.start()
    timed = BackgroundCall(waiting.wait_for_leadership, seconds(seconds=5), name='timed-wait')
    clock.wait_until_idle(election_threads(waiting) + [timed.thread])
    step(clock, 5, threads=election_threads(waiting) + [timed.thread])
    assert timed.result() is False
    forever = BackgroundCall(waiting.wait_for_leadership, name='forever-wait')
    time.sleep(0.05)
    assert not forever.done
    waiting.close()
    assert forever.result() is False


def test_close_ends_a_long_wait_at_once_and_releases_the_lock(engine: Any) -> None:
    """Real clock, a retry period of an hour: close() does not wait for it."""
    leader_client = DynamoDBLockClient(engine.resource, table_name=engine.table_name, background_heartbeats=False)
    waiter_client = DynamoDBLockClient(engine.resource, table_name=engine.table_name, background_heartbeats=False)
    try:
        with LeaderElection(leader_client, 'leader') as leader:
            assert leader.wait_for_leadership(timeout=REAL_TIMEOUT)
            waiter = LeaderElection(waiter_client, 'leader', retry_period=seconds(hours=1))
            waiter.start()
            wait_until(lambda: in_clock_sleep(waiter.worker))      # its hour-long wait
            BackgroundCall(waiter.close).result(timeout=REAL_TIMEOUT)
            assert waiter.worker is not None and not waiter.worker.is_alive()
        assert leader.worker is not None and not leader.worker.is_alive()
        assert engine.read_held_row('leader') is None
    finally:
        leader_client.close()
        waiter_client.close()


# --------------------------------------------------------------------------------------------
# Semaphore: semantics (moto and DynamoDB Local)
# --------------------------------------------------------------------------------------------

def test_a_semaphore_hands_out_at_most_limit_permits_one_per_slot(engine: Any, clients: LockClients) -> None:
    client = clients.make()
    semaphore = Semaphore(client, 'pool', 2)
    first, second = semaphore.try_acquire(), semaphore.try_acquire()
    assert isinstance(first, Permit) and isinstance(second, Permit)
    assert {first.slot, second.slot} == {0, 1}
    assert {first.sort_key, second.sort_key} == {'slot-0', 'slot-1'}
    for permit in (first, second):
        row = engine.read_held_row('pool', permit.sort_key)
        assert row is not None and row['semaphore_limit'] == 2
        assert isinstance(permit.fencing_token, int) and row['fencing_token'] == permit.fencing_token
        assert permit.held and permit.took_over_from is None
    assert semaphore.try_acquire() is None
    with pytest.raises(DynamoDBLockError) as timed_out:
        semaphore.acquire(timeout=0)
    assert timed_out.value.code == DynamoDBLockError.ACQUIRE_TIMEOUT
    assert sorted(held.sort_key for held in semaphore.holders()) == ['slot-0', 'slot-1']
    old_token = first.fencing_token
    assert old_token is not None
    first.release()
    assert not first.held
    again = semaphore.try_acquire()
    assert again is not None and again.slot == first.slot
    assert again.fencing_token is not None and again.fencing_token > old_token   # per slot, tokens grow


def test_permits_are_context_managers_and_exceptions_propagate(engine: Any, clients: LockClients) -> None:
    semaphore = Semaphore(clients.make(), 'pool', 1)
    with pytest.raises(KeyError):
        with semaphore.acquire(timeout=0) as permit:
            assert engine.read_held_row('pool', permit.sort_key) is not None
            raise KeyError('the block failed')
    assert not permit.held and engine.read_held_row('pool', 'slot-0') is None
    with semaphore as entered:
        assert entered.held and semaphore.try_acquire() is None
    assert not entered.held
    with pytest.raises(TypeError):
        Semaphore(clients.make(), 'pool', 1).release(entered)     # not a permit of that semaphore


def test_a_waiter_gets_the_permit_a_holder_of_the_same_semaphore_releases_without_polling(
        engine: Any, clients: LockClients) -> None:
    clock = clients.clock
    semaphore = Semaphore(clients.make(), 'pool', 1, retry_period=seconds(hours=1))
    permit = semaphore.acquire(timeout=0)
    waiter = BackgroundCall(semaphore.acquire, name='semaphore-waiter')
    clock.wait_until_idle([waiter.thread])             # it waits, polling once an hour
    permit.release()
    got = waiter.result()                              # no time passed
    assert isinstance(got, Permit) and got.slot == 0 and got.held


def test_acquire_times_out_on_the_clock(engine: Any, clients: LockClients) -> None:
    clock = clients.clock
    semaphore = Semaphore(clients.make(), 'pool', 1, retry_period=seconds(seconds=1))
    assert semaphore.try_acquire() is not None
    waiter = BackgroundCall(semaphore.acquire, seconds(seconds=3), name='semaphore-waiter')
    clock.wait_until_idle([waiter.thread])
    step(clock, 3, threads=[waiter.thread])
    error = waiter.error()
    assert isinstance(error, DynamoDBLockError) and error.code == DynamoDBLockError.ACQUIRE_TIMEOUT


def test_a_crashed_holders_slot_is_taken_over_after_its_lease(engine: Any, clients: LockClients) -> None:
    clock = clients.clock
    crashed = clients.make(owner_name='crashed')           # hand-driven: it never renews, as if dead
    dead = Semaphore(crashed, 'pool', 2)
    tokens = {permit.slot: permit.fencing_token for permit in (dead.acquire(timeout=0), dead.acquire(timeout=0))}
    semaphore = Semaphore(clients.make(), 'pool', 2, retry_period=seconds(seconds=1))
    started = clock.monotonic()
    with clock.auto_advance_in_current_thread():
        permit = semaphore.acquire()
    waited = clock.monotonic() - started
    assert 30 <= waited <= 30 + 2 * 1                     # the lease (30 s), plus at most two polls
    assert permit.took_over_from is not None and permit.took_over_from.owner_name == 'crashed'
    old = tokens[permit.slot]
    assert old is not None and permit.fencing_token is not None and permit.fencing_token > old


def test_holders_that_disagree_on_the_limit_are_warned_about(engine: Any, clients: LockClients,
                                                               caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger=RECIPES)
    small = Semaphore(clients.make(), 'pool', 1)
    large = Semaphore(clients.make(), 'pool', 2)
    assert small.try_acquire() is not None                 # slot-0, limit 1
    assert large.try_acquire() is not None                 # slot-1 (it may have met slot-0 first)
    for _ in range(64):      # each full attempt reports the row of a random busy slot: slot-0 says limit 1
        assert large.try_acquire() is None
    warnings = [record.getMessage() for record in caplog.records if record.name == RECIPES]
    assert len(warnings) == 1 and 'limit 2' in warnings[0] and 'limit 1' in warnings[0]
    assert small.try_acquire() is None                     # the small one does not see slot-1 at all...
    assert len(small.holders()) == 1                       # ...so up to 2 hold at once: the largest limit


def test_a_strict_release_of_a_lost_permit_raises_lock_stolen(engine: Any, clients: LockClients) -> None:
    client = clients.make()
    permit = Semaphore(client, 'pool', 1).acquire(timeout=0)
    engine.steal_row('pool', 'slot-0')
    client.send_heartbeats()
    assert not permit.held
    with pytest.raises(DynamoDBLockError) as stolen:
        permit.release(best_effort=False)
    assert stolen.value.code == DynamoDBLockError.LOCK_STOLEN


def test_a_lapse_of_the_safe_period_ends_the_term_even_if_a_renewal_then_succeeds(
        engine: Any, clients: LockClients, elections: List[LeaderElection]) -> None:
    clock = clients.clock
    client = clients.make()
    election, recorder, lock, term = elected_leader(client, elections, 5)
    idle(clock, election)
    clock.advance(20)                 # no renewal for the safe period: a pause, say
    assert not election.is_leader
    client.send_heartbeats([lock])     # the renewal works (if the election has not released it yet)...
    assert not election.is_leader or (election.term is not None and election.term > term)   # ...too late
    wait_until(lambda: len(recorder.calls) == 3)
    assert recorder.calls[:2] == [('elected', term), ('lost', term, LossReason.IN_DANGER)]
    new_term = recorder.calls[2][1]
    assert recorder.calls[2][0] == 'elected' and new_term is not None and new_term > term   # a new term
    assert election.term == new_term


# --------------------------------------------------------------------------------------------
# Concurrency, on DynamoDB Local, with real processes
# --------------------------------------------------------------------------------------------

LEASE = 2.0
HEARTBEAT = 0.25
SAFE_PERIOD = 1.0
RETRY = 0.2
# Time a loaded machine (two cores, DynamoDB Local's JVM, several Python processes) may add to
# a takeover, beyond lease + 2 * retry_period.
MARGIN = 2.0
needs_signals = pytest.mark.skipif(not hasattr(signal, 'SIGSTOP'), reason='needs POSIX signals')


class Events:
    """JSON-line events of several worker processes, as ``(worker index, event)``, kept in order."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self.history: List[Tuple[int, Dict[str, Any]]] = []

    def put(self, index: int, event: Dict[str, Any]) -> None:
        with self._cond:
            self.history.append((index, event))
            self._cond.notify_all()

    def wait_for(self, predicate: Any, timeout: float, what: str) -> Tuple[int, Dict[str, Any]]:
        """The first event (already received, or to come) for which ``predicate(index, event)``."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for index, event in self.history:
                    if predicate(index, event):
                        return index, event
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise AssertionError(f'no {what} within {timeout}s; events: {self.history}')
                self._cond.wait(remaining)

    def of(self, name: str, index: Optional[int] = None) -> List[Dict[str, Any]]:
        with self._cond:
            return [event for i, event in self.history if event['event'] == name and index in (None, i)]


class Worker:
    """One ``tests/_recipes_worker.py`` process; signals go to its PID only."""

    def __init__(self, index: int, config: Dict[str, Any], events: Events, stderr_path: pathlib.Path) -> None:
        self.index = index
        self._stderr = open(stderr_path, 'wb')   # noqa: SIM115
        self.stderr_path = stderr_path
        self.process = subprocess.Popen(
            [sys.executable, str(ROOT / 'tests' / '_recipes_worker.py'), json.dumps(config)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr, text=True, cwd=str(ROOT),
            env={**os.environ, 'PYTHONPATH': str(ROOT), 'PYTHONUNBUFFERED': '1'})
        self._events = events
        threading.Thread(target=self._read, name=f'worker-{index}-events', daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            if line.startswith('{'):
                self._events.put(self.index, json.loads(line))
        self._events.put(self.index, {'event': 'exited', 't': time.monotonic()})

    def signal(self, number: int) -> None:
        os.kill(self.process.pid, number)

    def quit(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write('quit\n')
        self.process.stdin.flush()

    def stderr(self) -> str:
        return self.stderr_path.read_text(encoding='utf-8', errors='replace')[-3000:]

    def close(self) -> None:
        if self.process.poll() is None:
            try:
                os.kill(self.process.pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
            self.process.kill()
        self.process.wait(30)
        close_pipes(self.process, self._stderr)


class Workers:
    def __init__(self, engine: Any, tmp_path: pathlib.Path) -> None:
        self.engine = engine
        self.tmp_path = tmp_path
        self.events = Events()
        self.started: List[Worker] = []

    def start(self, mode: str, **config: Any) -> Worker:
        index = len(self.started)
        full = {'mode': mode, 'endpoint': self.engine.endpoint_url, 'table': self.engine.table_name,
                'owner': f'{mode}-{index}', 'lease': LEASE, 'heartbeat': HEARTBEAT, 'safe_period': SAFE_PERIOD,
                'retry_period': RETRY, 'pause_gap': 1.0, **config}
        worker = Worker(index, full, self.events, self.tmp_path / f'worker-{index}.stderr')
        self.started.append(worker)
        return worker

    def quit_all(self, timeout: float = 60) -> None:
        """Ask every live worker to quit, and wait until they have exited."""
        for worker in self.started:
            if worker.process.poll() is None:
                worker.quit()
        for worker in self.started:
            try:
                worker.process.wait(timeout)
            except subprocess.TimeoutExpired:
                raise AssertionError(f'worker {worker.index} did not quit; stderr: {worker.stderr()}') from None
            self.events.wait_for(lambda i, e, w=worker: i == w.index and e['event'] == 'exited', timeout,
                                 f'the end of the output of worker {worker.index}')


@pytest.fixture
def workers(local_engine: Any, tmp_path: pathlib.Path) -> Iterator[Workers]:
    made = Workers(local_engine, tmp_path)
    try:
        yield made
    finally:
        for worker in made.started:
            worker.close()


def check_leadership(events: Events) -> List[Tuple[float, float, int, int]]:
    """No term elected twice; the stretches of leadership the candidates observed (each read of
    ``election.term`` bracketed by the clock) never overlap, and their terms grow with time.
    Returns the stretches as (start, end, term, worker)."""
    elected = [event['term'] for event in events.of('elected')]
    assert len(elected) == len(set(elected)), f'a term was elected twice: {elected}'
    stretches = sorted((event['first_before'], event['last_after'], event['term'], index)
                       for index, event in events.history if event['event'] == 'tenure')
    assert len({term for _, _, term, _ in stretches}) == len(stretches), f'a term observed twice: {stretches}'
    for earlier, later in zip(stretches, stretches[1:]):
        assert earlier[1] < later[0], f'two leaders at once: {earlier} and {later}'
        assert earlier[2] < later[2], f'terms out of order: {earlier} and {later}'
    return stretches


@needs_signals
@pytest.mark.slow
def test_a_killed_leader_is_replaced_within_lease_and_retry_period_with_a_larger_term(workers: Workers) -> None:
    candidates = [workers.start('elect', name='leader') for _ in range(3)]
    for candidate in candidates:
        workers.events.wait_for(lambda i, e, c=candidate: i == c.index and e['event'] == 'started', 60,
                                f'start of candidate {candidate.index}')
    leader_index, first = workers.events.wait_for(lambda i, e: e['event'] == 'elected', 60, 'a first leader')
    killed_at = time.monotonic()
    candidates[leader_index].signal(signal.SIGKILL)
    bound = LEASE + 2 * RETRY
    index, second = workers.events.wait_for(lambda i, e: e['event'] == 'elected' and i != leader_index,
                                            bound + MARGIN + 30, 'a new leader')
    took = second['t'] - killed_at
    print(f'new leader {took:.2f}s after SIGKILL (lease {LEASE}s, retry period {RETRY}s)')
    assert took <= bound + MARGIN, f'new leader after {took:.2f}s'
    assert second['term'] > first['term']
    workers.events.wait_for(lambda i, e: e['event'] == 'leading' and e['term'] == second['term'], 60,
                            'the new leader reading its term')
    workers.quit_all()
    stretches = check_leadership(workers.events)
    assert [term for _, _, term, _ in stretches][-1] == second['term']
    for event in workers.events.of('lost'):
        if event['term'] != second['term']:     # the closing leader aside: on a loaded machine the
            # first leader may have missed its renewals before the kill: a real loss, reported as one
            assert event['term'] < second['term'] and event['reason'] in (LossReason.STOLEN, LossReason.IN_DANGER)


@needs_signals
@pytest.mark.slow
def test_a_leader_paused_past_its_lease_reports_the_loss_when_resumed(workers: Workers) -> None:
    candidates = [workers.start('elect', name='leader') for _ in range(3)]
    leader_index, first = workers.events.wait_for(lambda i, e: e['event'] == 'elected', 60, 'a first leader')
    workers.events.wait_for(lambda i, e: i == leader_index and e['event'] == 'leading', 60,
                            'the leader reading its term')
    paused = candidates[leader_index]
    paused.signal(signal.SIGSTOP)
    index, second = workers.events.wait_for(lambda i, e: e['event'] == 'elected' and i != leader_index, 60,
                                            'a new leader while the first is paused')
    assert second['term'] > first['term']
    paused.signal(signal.SIGCONT)
    _, resumed = workers.events.wait_for(lambda i, e: i == leader_index and e['event'] == 'resumed', 60,
                                         'the paused leader noticing its pause')
    assert resumed['gap'] > LEASE
    assert resumed['term'] is None                 # its first read after the pause: not leader
    _, lost = workers.events.wait_for(lambda i, e: i == leader_index and e['event'] == 'lost', 60,
                                      'the paused leader reporting the loss')
    assert lost['term'] == first['term']
    assert lost['reason'] in (LossReason.STOLEN, LossReason.IN_DANGER)
    workers.quit_all()
    stretches = check_leadership(workers.events)
    mine = [stretch for stretch in stretches if stretch[2] == first['term']]
    assert len(mine) == 1 and mine[0][3] == leader_index
    assert mine[0][1] < resumed['t']               # it never read itself leader after the pause


@needs_signals
@pytest.mark.slow
def test_semaphore_torture_never_more_than_limit_holders(workers: Workers, local_engine: Any,
                                                         tmp_path: pathlib.Path) -> None:
    """Three processes of three threads share a semaphore of 2 while a holder of one permit is
    SIGKILLed at the start: at no moment more than 2 holders; its slot is taken over. Each
    thread takes 8 permits in turn, times ``PDL_STRESS_SCALE`` when that is above 1 (with fewer,
    the users can finish on the live slot before the dead holder's lease ends)."""
    limit = 2
    per_thread = max(8, stress_size(8))
    doomed = workers.start('hold', name='pool', limit=limit, acquire_timeout=60)
    _, holding = workers.events.wait_for(lambda i, e: i == doomed.index and e['event'] == 'holding', 60,
                                         'the doomed holder')
    users = [workers.start('semaphore', name='pool', limit=limit, threads=3, acquisitions=per_thread, seed=seed,
                           acquire_timeout=60, short_hold=[0.0, 0.02], long_hold=[0.3, 0.6],
                           long_hold_probability=0.1, result_path=str(tmp_path / f'holds-{seed}.json'))
             for seed in range(3)]
    for user in users:
        workers.events.wait_for(lambda i, e, u=user: i == u.index and e['event'] == 'ready', 60,
                                f'user {user.index} ready')
    killed_at = time.monotonic()
    doomed.signal(signal.SIGKILL)
    for user in users:
        workers.events.wait_for(lambda i, e, u=user: i == u.index and e['event'] in ('done', 'exited'), 600,
                                f'user {user.index} done')
        assert user.process.wait(60) == 0, user.stderr()
    holds: List[Dict[str, Any]] = []
    for seed in range(3):
        result = json.loads((tmp_path / f'holds-{seed}.json').read_text(encoding='utf-8'))
        assert result['errors'] == []
        holds.extend(result['holds'])
    assert len(holds) == 3 * 3 * per_thread
    assert all(hold['release'] == 'released' and hold['status_before_release'] == 'LOCKED' for hold in holds)
    assert {hold['slot'] for hold in holds} <= set(range(limit))
    # The dead holder held its slot from before the kill until somebody took the slot over.
    after_kill = sorted((hold for hold in holds if hold['slot'] == holding['slot'] and hold['start'] > killed_at),
                        key=lambda hold: hold['start'])
    assert after_kill and after_kill[0]['took_over'], 'the dead holder\'s slot was not taken over'
    assert after_kill[0]['token'] > holding['token']
    intervals = [(hold['start'], hold['end'], hold['slot'], hold['token']) for hold in holds]
    intervals.append((holding['t'], after_kill[0]['start'], holding['slot'], holding['token']))
    points = sorted([(start, 1) for start, _, _, _ in intervals] + [(end, -1) for _, end, _, _ in intervals])
    at_once, most = 0, 0
    for _, change in points:
        at_once += change
        most = max(most, at_once)
    assert most <= limit, f'{most} holders at once'
    assert most == limit                           # the torture did contend
    for slot in range(limit):
        mine = sorted((interval for interval in intervals if interval[2] == slot), key=lambda interval: interval[0])
        for earlier, later in zip(mine, mine[1:]):
            assert earlier[1] <= later[0], f'slot {slot} held twice at once: {earlier}, {later}'
            assert earlier[3] < later[3], f'slot {slot}: tokens out of order: {earlier}, {later}'
    for slot in range(limit):
        assert local_engine.read_held_row('pool', f'slot-{slot}') is None
