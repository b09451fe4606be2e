"""The tortures' verdict on lost locks (:mod:`_torture.verdict`) has teeth, and lets a loaded
machine pass.

A loaded machine may starve a holder's heartbeats past its lease: another client then takes the
lock over, as it must, and the holder is told ``LOCK_STOLEN``. The tortures used to assert that
no ``LOCK_STOLEN`` was reported at all, and failed on such a machine (issue 27, finding 8). They
now assert what the library promises: no steal while the holder's lease ran (as the holder's own
records time it), every loss reported, no overlap except of holds reported lost. These tests
show that this verdict fails on a steal within the lease, on a loss nobody was told of and on an
unexcused overlap, and passes a takeover after a lease spent without renewal, which the old
assertion failed: on synthetic histories, and on DynamoDB Local with both clients, on a
``ManualClock`` (nothing is timed).
"""
from __future__ import annotations

import datetime
from typing import Any, List

import pytest

from _torture.verdict import Claim, History, LossReport, Takeover, Tenure, verdict
from helpers import CallbackRecorder, LockClients
from python_dynamodb_lock.python_dynamodb_lock import DynamoDBLockError
from python_dynamodb_lock.testing import LockTable

seconds = datetime.timedelta
LEASE = 10.0
KEY = 'job|-'


def stolen_at(reported: float, renewed: float = 0.0) -> LossReport:
    """The holder 'first' (lease 10 s, last renewal sent at ``renewed``) told at ``reported``."""
    return LossReport(KEY, 'first', renewed, LEASE, reported)


def holds(lost: bool = True) -> List[Tenure]:
    """'first' held from 0 (token 1) and never let go; 'second' took it (token 2) at 10.5."""
    return [Tenure(KEY, 'first', 1, 0.0, lost=lost), Tenure(KEY, 'second', 2, 10.5, 11.0)]


def test_a_takeover_after_the_lease_was_spent_without_renewal_and_reported_passes() -> None:
    """The history of issue 27's failure: heartbeats starved for 12.8 s, a takeover after the
    lease, the holder told late. Legitimate: the verdict passes (the old one did not)."""
    claims = [Claim(KEY, 'first', 10.2)]
    assert verdict([stolen_at(12.8)], claims, holds(), [Takeover(KEY, 'first', 1, 10.4)]) == []
    # Exactly at the end of the lease is after it (a waiter's clock starts later than the holder's).
    assert verdict([stolen_at(10.0)], [Claim(KEY, 'first', 10.0)], holds(), []) == []


def test_a_lock_stolen_while_its_lease_ran_fails_the_verdict() -> None:
    """Stolen 3 s after its last renewal (lease 10 s): told at once, or late because its
    heartbeats were starved too; a takeover claimed later, of another key or holder, or after
    the holder was told does not excuse it."""
    early = [Claim(KEY, 'first', 3.0)]
    assert verdict([stolen_at(4.0)], early, holds(), []) != []
    assert verdict([stolen_at(12.8)], early, holds(), []) != []
    assert verdict([stolen_at(4.0)], [], holds(), []) != []                        # no takeover at all
    assert verdict([stolen_at(12.8)], [Claim('other|-', 'first', 11.0)], holds(), []) != []
    assert verdict([stolen_at(12.8)], [Claim(KEY, 'second', 11.0)], holds(), []) != []
    assert verdict([stolen_at(12.8)], [Claim(KEY, 'first', 13.0)], holds(), []) != []
    # Renewed at 5: its lease ran until 15, whatever a waiter claimed at 10.2.
    assert verdict([stolen_at(15.5, renewed=5.0)], [Claim(KEY, 'first', 10.2)], holds(), []) != []


def test_a_loss_nobody_was_told_of_fails_the_verdict() -> None:
    """A takeover landed while 'first' held the lock, and nothing told 'first'."""
    taken = [Takeover(KEY, 'first', 1, 10.4)]
    assert verdict([], [Claim(KEY, 'first', 10.2)], holds(lost=False), taken) != []
    # After the hold ended, or of another hold of that owner (another token): nothing to tell.
    ended = [Tenure(KEY, 'first', 1, 0.0, 9.0), Tenure(KEY, 'second', 2, 10.5, 11.0)]
    assert verdict([], [], ended, taken) == []
    assert verdict([], [], holds(lost=False)[1:] + [Tenure(KEY, 'first', 7, 0.0, 9.0)], taken) == []


def test_an_overlap_passes_only_when_the_first_hold_was_reported_lost() -> None:
    assert verdict([stolen_at(12.8)], [Claim(KEY, 'first', 10.2)], holds(lost=True), []) == []
    assert verdict([], [], holds(lost=False), []) != []
    one_after_another = [Tenure(KEY, 'first', 1, 0.0, 1.0), Tenure(KEY, 'second', 2, 1.0, 2.0)]
    assert verdict([], [], one_after_another, []) == []


# -- the same on DynamoDB Local, through the recorder the tortures use ---------------------------

@pytest.mark.local
def test_a_real_takeover_after_a_lease_without_renewal_passes_and_a_forged_steal_fails(
        local_engine: LockTable, local_clients: LockClients) -> None:
    """A holder renews nothing for its whole lease; a waiter trying once per (fake) second takes
    the lock over; the holder's next heartbeat tells it LOCK_STOLEN. The old verdict ("no
    LOCK_STOLEN") fails this history, the new one passes it. Then a thief frees the lock with
    ``force_release_lock`` 1 s after the holder's renewal and acquires it: the holder is told
    LOCK_STOLEN while its lease ran, and the verdict fails."""
    clock = local_clients.clock
    history = History(clock.monotonic)

    def client(owner: str) -> Any:
        return local_clients.make(owner_name=owner, metrics=history.metrics(owner),
                                  lease_duration=seconds(seconds=LEASE), heartbeat_period=seconds(seconds=2),
                                  safe_period=seconds(seconds=6))

    holder, waiter, thief = client('holder'), client('waiter'), client('thief')
    told = CallbackRecorder(action=history.on_callback)
    lock = holder.acquire_lock('job', app_callback=told)
    history.acquired(lock)
    tenure = history.enter(lock)
    for _ in range(int(LEASE) + 2):
        taken = waiter.try_acquire_lock('job')
        if taken is not None:
            break
        clock.advance(1)
    assert taken is not None and taken.took_over_from.owner_name == 'holder'
    history.acquired(taken)
    history.leave(history.enter(taken))
    holder.send_heartbeats()
    history.leave(tenure)
    assert lock.release() is False
    history.released(tenure)
    assert history.lost() == 1 and history.reports[0].how == 'callback'
    assert DynamoDBLockError.LOCK_STOLEN in told.codes      # the old verdict fails this legitimate history
    assert history.problems() == []                         # the new one passes it
    assert history.reports[0].at - history.reports[0].last_renewed >= LEASE   # told once its lease was spent

    assert taken.release() is True
    lock = holder.acquire_lock('job', app_callback=told)
    tenure = history.enter(lock)
    clock.advance(1)
    assert thief.force_release_lock(thief.get_lock('job'))
    history.acquired(thief.acquire_lock('job', retry_timeout=seconds(0)))
    holder.send_heartbeats()
    history.leave(tenure)
    assert lock.status == 'INVALID' and history.lost() == 2
    problems = history.problems()
    assert len(problems) == 1 and problems[0].startswith('LOCK_STOLEN while the lease ran'), problems
    assert [report.how for report in history.reports] == ['callback', 'callback']


def test_the_multi_process_tortures_judge_lost_locks_the_same_way() -> None:
    """TortureResult (test_torture.py, test_faults.py) on synthetic records: a holder starved past
    its lease and taken over, told by its strict release, passes, and its unguarded write may
    undo the taker's increment; taken over 3 s after its renewal, or not told, or an overlap of
    holds not lost, or a lost update without a lost hold, fails."""
    from _torture.runner import Hold, TortureConfig, TortureResult

    config = TortureConfig(acquisitions=2, keys=('k',), lease=LEASE)

    def result(victim_outcome: str, claimed_at: float, counter: int) -> TortureResult:
        victim = Hold('k', 'first', 0.0, 12.0, 'v1', 'v1', 'LOCKED', victim_outcome, 'INVALID', True, 12.0,
                      'threaded', 1, last_renewed=0.0, released_at=12.5)
        if victim_outcome == 'released':
            victim.final_status = 'RELEASED'
        taker = Hold('k', 'second', 10.5, 11.0, 'v2', 'v2', 'LOCKED', 'released', 'RELEASED', True, 0.5,
                     'threaded', 2, took_over_from=['first', 1], last_renewed=10.4, released_at=11.1)
        workers = [{'callbacks': [], 'claims': [['k', 'first', claimed_at]]}]
        return TortureResult(config, workers, [victim, taker], {'k': counter}, [], 0.0)

    legit = result('LOCK_STOLEN', 10.2, 1)
    assert legit.lost_lock_problems() == [] and legit.overlaps(excuse_lost=True) == []
    assert legit.counter_problems() == []              # the victim's late write undid the taker's increment
    assert result('LOCK_STOLEN', 10.2, 2).counter_problems() == []
    assert result('LOCK_STOLEN', 10.2, 3).counter_problems() != []     # more than was committed
    assert result('LOCK_STOLEN', 3.0, 2).lost_lock_problems() != []   # stolen while its lease ran
    untold = result('released', 10.2, 2)
    assert untold.lost_lock_problems() != []                            # a loss nobody was told of
    assert untold.overlaps(excuse_lost=True) != []
    assert result('released', 10.2, 1).counter_problems() != []         # a lost update, no lost hold


def test_the_history_keeps_the_rows_a_client_said_it_could_not_free() -> None:
    """The cancellation torture excuses a row left held only where its client said it could not
    free it (then a fresh client must take it over after its lease); other events do not count."""
    from python_dynamodb_lock import LockEvent

    history = History()
    hook = history.metrics('first')
    for name, key in [('release_failed_forgotten', 'a|-'), ('orphan_cleanup_failed', 'b|-'),
                      ('orphan_unverified', 'c|-'), ('released', 'd|-'), ('release_failed', 'e|-')]:
        hook(LockEvent(name, key, None, {}))
    assert history.abandoned == {'a|-', 'b|-', 'c|-'}
