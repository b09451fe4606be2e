"""Heartbeats in rounds and batches (python_dynamodb_lock/_core/heartbeat.py), with scripted
answers on a manual clock: the paced round spreads heartbeats over the period (or at
``heartbeat_tps``), in groups of the batch size, and says when it overran or skipped locks; the
background loop survives a failing round; the checker flags a lock not confirmed for its safe
period; a batch reports why batching is unavailable and which lock could not be settled, and
counts each lease from before the call. The events' fields are what a metrics hook reads.
(Helpers: test_core_heartbeat_paths.py.)
"""
from __future__ import annotations

from typing import Any, Callable, List

import pytest

from python_dynamodb_lock._core.effects import Sleep
from python_dynamodb_lock._core.events import Kind
from python_dynamodb_lock._core.heartbeat import (
    Batching,
    HeartbeatSettings,
    background_loop,
    check_locks,
    check_round,
    heartbeat_round,
)
from python_dynamodb_lock._core.state import Status
from test_core_heartbeat_paths import SETTINGS, Driven, answers, drive, held
from test_core_protocol import SCHEMA, FakeClock, client_error


# -- the paced round, the loop, the checker ----------------------------------------------------------

def round_of(count: int, tps: float = -1, batch: int = 1, step: float = 0.0, skipped: int = 0,
             closed: Callable[[], bool] = lambda: False, period: float = 5.0) -> Driven:
    clock = FakeClock()
    settings = HeartbeatSettings(SCHEMA, period, 20.0, 3600.0, tps, batch)
    locks = [held() for _ in range(count)]
    driven = drive(heartbeat_round(settings, locks, Batching(batch), clock, closed), clock=clock, step=step,
                   skipped=skipped)
    driven.result = (locks, clock)
    return driven


def test_a_round_spreads_the_heartbeats_over_the_period_then_waits_out_the_rest() -> None:
    driven = round_of(4)
    assert [len(group) for group in driven.submitted] == [1, 1, 1, 1]
    assert driven.sleeps == [1.25, 1.25, 1.25, 1.25]
    locks, clock = driven.result
    assert [group[0] for group in driven.submitted] == locks and driven.events == []


def test_a_round_paced_by_heartbeat_tps_sends_that_many_per_second() -> None:
    driven = round_of(3, tps=2.0)
    assert driven.sleeps == [0.5, 0.5, 4.0]


def test_a_round_sends_groups_of_the_batch_size_and_at_most_25() -> None:
    assert [len(group) for group in round_of(5, batch=2).submitted] == [2, 2, 1]
    assert [len(group) for group in round_of(30, batch=30).submitted] == [25, 5]
    disabled = Batching(10)
    disabled.enabled = False
    clock = FakeClock()
    settings = HeartbeatSettings(SCHEMA, 5.0, 20.0, 3600.0, -1, 10)
    one_by_one = drive(heartbeat_round(settings, [held() for _ in range(3)], disabled, clock, lambda: False),
                       clock=clock)
    assert [len(group) for group in one_by_one.submitted] == [1, 1, 1]


def test_a_round_that_overran_its_period_and_skipped_locks_says_so() -> None:
    driven = round_of(2, tps=1.0, step=3.0, skipped=1, period=4.0)
    overrun = driven.event(Kind.ROUND_OVERRUN)
    assert overrun.fields == {'count': 2, 'heartbeat_tps': 1.0, 'overrun': pytest.approx(2.0)}
    behind = driven.event(Kind.HEARTBEATS_BEHIND)
    assert behind.fields == {'skipped': 2, 'count': 2}


def test_a_round_that_just_fits_its_period_says_nothing() -> None:
    driven = round_of(2, tps=1.0, step=1.0, period=2.0)
    assert driven.events == [] and driven.sleeps == [pytest.approx(0.0)]


def test_a_round_stops_when_the_client_closes() -> None:
    assert round_of(3, closed=lambda: True).submitted == []
    clock = FakeClock()
    settings = HeartbeatSettings(SCHEMA, 5.0, 20.0, 3600.0, 1.0, 1)
    woken = drive(heartbeat_round(settings, [held(), held()], Batching(1), clock, lambda: False), clock=clock,
                  woken=lambda: True)
    assert len(woken.submitted) == 1 and woken.sleeps == [1.0]


def test_a_round_without_locks_waits_one_period() -> None:
    assert round_of(0).sleeps == [5.0]


def test_a_round_sends_a_burst_rather_than_waits_less_than_a_millisecond() -> None:
    driven = round_of(3, tps=2000.0)
    assert len(driven.submitted) == 3 and driven.sleeps == [pytest.approx(5.0)]


def test_the_background_loop_reports_a_failing_round_and_goes_on() -> None:
    rounds: List[int] = []
    closed = [False]

    def make_round() -> Any:
        rounds.append(1)
        if len(rounds) == 1:
            raise RuntimeError('boom')
        closed[0] = True
        yield Sleep(1.0)

    driven = drive(background_loop('heartbeat', 'me', make_round, lambda: closed[0], 2.5), clock=FakeClock())
    assert driven.kinds() == [Kind.LOOP_STARTED, Kind.LOOP_ROUND_FAILED, Kind.LOOP_STOPPED]
    assert driven.events[0].fields == {'owner': 'me', 'name': 'heartbeat'}
    assert driven.events[2].fields == {'owner': 'me', 'name': 'heartbeat'}
    failed = driven.events[1]
    assert failed['owner'] == 'me' and failed['name'] == 'heartbeat' and str(failed['exception']) == 'boom'
    assert driven.sleeps == [2.5, 1.0] and len(rounds) == 2


def test_the_checker_flags_a_lock_unconfirmed_for_its_safe_period_with_the_fields_metrics_read() -> None:
    clock = FakeClock()
    quiet, own = held(clock=clock), held(clock=clock, unique_identifier='own|-')
    own._state.safe_period = 8.0                 # a per-lock lease: its own safe period
    clock.now += 10.0
    driven = drive(check_round(SETTINGS, [quiet, own], clock), clock=clock)
    (flagged,) = driven.events
    assert flagged.kind is Kind.IN_DANGER and flagged.key == 'own|-' and flagged.lock is own
    assert flagged.fields == {'unconfirmed_for': 10.0, 'safe_period': 8.0, 'duration': 10.0}
    assert driven.sleeps == [5.0]
    clock.now += 10.0       # and the round waited 5 s: 25 s unconfirmed now
    later = drive(check_locks(SETTINGS, [quiet], clock))
    assert later.event(Kind.IN_DANGER).fields == {'unconfirmed_for': 25.0, 'safe_period': 20.0, 'duration': 25.0}
    assert quiet._state.status == Status.IN_DANGER


# -- batches: the fields of what they report --------------------------------------------------------

def test_batching_refused_says_which_table_which_size_and_why() -> None:
    from python_dynamodb_lock._core.answers import judge_error
    from python_dynamodb_lock._core.heartbeat import renew_batch
    refused = judge_error(client_error('AccessDeniedException', 400, operation='BatchExecuteStatement'))
    settings = HeartbeatSettings(SCHEMA, 5.0, 20.0, 3600.0, -1, 10)
    driven = drive(renew_batch(settings, [held(), held()], Batching(10), FakeClock()), answers(refused))
    unavailable = driven.event(Kind.BATCHING_UNAVAILABLE)
    assert unavailable.key == '' and unavailable.fields == {'batch_size': 10, 'table': 'locks',
                                                            'error': str(refused.error)}


def test_a_lock_whose_settling_failed_is_reported_with_the_exception() -> None:
    from python_dynamodb_lock._core.heartbeat import renew_batch
    broken_lock = held(unique_identifier='b|-')
    failure = RuntimeError('broken lock state')

    def broken(*args: Any) -> Any:
        raise failure
    broken_lock._state.settle_renewal = broken       # type: ignore[method-assign]
    ok = {'Responses': [{}], 'ResponseMetadata': {'HTTPStatusCode': 200, 'RetryAttempts': 0}}
    from python_dynamodb_lock._core.answers import judge_batch
    driven = drive(renew_batch(SETTINGS, [broken_lock], Batching(25), FakeClock()),
                   answers(judge_batch(ok, 1)))
    settle_failed = driven.event(Kind.SETTLE_FAILED)
    assert settle_failed.key == 'b|-' and settle_failed.lock is broken_lock
    assert settle_failed.fields == {'exception': failure}


def test_a_batched_renewal_counts_the_lease_from_before_the_call() -> None:
    from python_dynamodb_lock._core.answers import judge_batch
    from python_dynamodb_lock._core.heartbeat import renew_batch
    clock = FakeClock()
    lock = held(clock=clock)
    clock.now += 3.0
    start = clock.monotonic()

    def slow(request: Any) -> Any:
        clock.now += 2.0
        return judge_batch({'Responses': [{}], 'ResponseMetadata': {'HTTPStatusCode': 200}}, 1)

    driven = drive(renew_batch(SETTINGS, [lock], Batching(25), clock), slow)
    assert lock._state.last_confirmed == start
    assert driven.event(Kind.RENEWED)['duration'] == 2.0


def test_a_statement_renewed_by_its_second_attempt_counts_the_lease_from_before_the_first() -> None:
    from python_dynamodb_lock._core.answers import judge_batch
    from python_dynamodb_lock._core.heartbeat import renew_batch
    clock = FakeClock()
    lock = held(clock=clock)
    clock.now += 3.0
    prepared = clock.monotonic()
    throttled = judge_batch({'Responses': [{'Error': {'Code': 'ThrottlingError'}}],
                             'ResponseMetadata': {'HTTPStatusCode': 200}}, 1)
    applied = judge_batch({'Responses': [{}], 'ResponseMetadata': {'HTTPStatusCode': 200}}, 1)
    driven = drive(renew_batch(SETTINGS, [lock], Batching(25), clock), answers(throttled, applied), clock)
    assert len(driven.calls) == 2 and driven.sleeps == [0.05]
    assert lock._state.last_confirmed == prepared       # not the second attempt's start: the lease written then


def test_a_round_overrun_by_half_a_second_says_so_and_a_millisecond_is_not_waited_for() -> None:
    driven = round_of(2, tps=1.0, step=2.25, period=4.0)
    assert driven.event(Kind.ROUND_OVERRUN)['overrun'] == pytest.approx(0.5)
    clock = FakeClock(now=0.0)
    settings = HeartbeatSettings(SCHEMA, 5.0, 20.0, 3600.0, 1000.0, 1)      # one heartbeat a millisecond
    burst = drive(heartbeat_round(settings, [held(), held()], Batching(1), clock, lambda: False), clock=clock)
    assert len(burst.submitted) == 2 and burst.sleeps == [5.0]
