"""Batched heartbeats (``renew_batch``) with no engine: scripted answers to one
``BatchExecuteStatement`` call per group of locks.

Each lock is settled by its own statement's answer, as a single heartbeat would be; a statement
throttled inside a successful batch is sent again after 50 and 100 ms, then counted as a failed
heartbeat; DynamoDB refusing the operation itself switches batching off for good (said once) and
hands the locks back to be renewed one by one; an interrupted call leaves every renewal
remembered as possibly landed, so that the next heartbeat does not take it for a theft.
"""
from __future__ import annotations

from typing import Any, List

import pytest

from python_dynamodb_lock._core.answers import Applied, Failed, Refused, judge_batch
from python_dynamodb_lock._core.events import Kind
from python_dynamodb_lock._core.heartbeat import (
    BATCH_RETRY_BASE_DELAY,
    BATCH_STATEMENT_ATTEMPTS,
    Batching,
    HeartbeatSettings,
    renew_batch,
)
from python_dynamodb_lock._core.state import Status
from test_core_protocol import SCHEMA, SERVER_ERROR, FakeClock, FakeLock, client_error, drive, held_state, row

SETTINGS = HeartbeatSettings(SCHEMA, 5.0, 20.0, 3600.0, -1, 25)


def locks(count: int) -> List[FakeLock]:
    return [FakeLock(held_state(), partition_key=f'k{index}', unique_identifier=f'k{index}|-')
            for index in range(count)]


def statements(request: Any) -> List[Any]:
    assert request.operation == 'batch_execute_statement'
    return request.params['Statements']


def batch(*errors: Any) -> Any:
    """The answers to one batch call whose statements answered ``errors`` (None: applied)."""
    return judge_batch({'Responses': [{'Error': error} if error else {} for error in errors],
                        'ResponseMetadata': {'HTTPStatusCode': 200, 'RetryAttempts': 0}}, len(errors))


THROTTLED = {'Code': 'ThrottlingError'}


def test_one_call_renews_every_lock_each_by_its_own_statement() -> None:
    held = locks(3)
    clock = FakeClock()
    thief = row('v-thief', 'thief')
    run = drive(renew_batch(SETTINGS, held, Batching(25), clock),
                lambda request: batch(None, {'Code': 'ConditionalCheckFailed', 'Item': thief}, None), clock=clock)
    assert run.result == [] and len(run.calls) == 1 and len(statements(run.calls[0])) == 3
    sent = [statement['Parameters'] for statement in statements(run.calls[0])]
    assert [held[0]._state.version, held[2]._state.version] == [sent[0][0], sent[2][0]]   # the new versions
    assert held[0]._state.status == Status.LOCKED and held[2]._state.status == Status.LOCKED
    assert held[1]._state.status == Status.INVALID and run.unregistered == [held[1]]
    assert run.events.count(Kind.RENEWED) == 2 and run.events.count(Kind.STOLEN) == 1


def test_a_lock_no_longer_held_is_not_in_the_batch() -> None:
    held = locks(2)
    held[0]._state.forget(Status.RELEASED)
    run = drive(renew_batch(SETTINGS, held, Batching(25), FakeClock()), lambda request: batch(None))
    assert len(statements(run.calls[0])) == 1
    assert 'k1' in run.calls[0].params['Statements'][0]['Parameters']
    nothing = drive(renew_batch(SETTINGS, held[:1], Batching(25), FakeClock()), lambda request: batch(None))
    assert nothing.calls == [] and nothing.result == []


def test_a_throttled_statement_is_sent_again_after_50_then_100_ms_then_counted_as_failed() -> None:
    held = locks(2)
    clock = FakeClock()
    answers = [batch(None, THROTTLED), batch(THROTTLED), batch(THROTTLED)]
    run = drive(renew_batch(SETTINGS, held, Batching(25), clock), lambda request: answers.pop(0), clock=clock)
    assert [len(statements(call)) for call in run.calls] == [2, 1, 1] == [2] + [1] * (BATCH_STATEMENT_ATTEMPTS - 1)
    assert run.sleeps == [BATCH_RETRY_BASE_DELAY, BATCH_RETRY_BASE_DELAY * 2] == [0.05, 0.1]
    assert statements(run.calls[1]) == statements(run.calls[2]) == statements(run.calls[0])[1:]
    assert run.events.count(Kind.RENEWED) == 1 and run.events.count(Kind.RENEWAL_FAILED) == 1
    assert held[1]._state.version == 'v-current' and held[1]._state.status == Status.LOCKED


def test_a_statement_throttled_once_is_renewed_by_its_second_attempt() -> None:
    held = locks(1)
    answers = [batch(THROTTLED), batch(None)]
    run = drive(renew_batch(SETTINGS, held, Batching(25), FakeClock()), lambda request: answers.pop(0))
    assert len(run.calls) == 2 and run.sleeps == [0.05] and run.events.count(Kind.RENEWED) == 1
    assert held[0]._state.version == statements(run.calls[1])[0]['Parameters'][0]


def test_closing_stops_the_retries_and_settles_the_throttled_statements() -> None:
    held = locks(1)
    run = drive(renew_batch(SETTINGS, held, Batching(25), FakeClock()), lambda request: batch(THROTTLED), woken=True)
    assert len(run.calls) == 1 and run.sleeps == [0.05] and run.events == [Kind.RENEWAL_FAILED]


@pytest.mark.parametrize('code', ['AccessDeniedException', 'UnknownOperationException'])
def test_batching_refused_by_dynamodb_is_switched_off_once_and_the_locks_handed_back(code: str) -> None:
    from python_dynamodb_lock._core.answers import judge_error
    held = locks(2)
    batching = Batching(25)
    refused = judge_error(client_error(code, 400, operation='BatchExecuteStatement'))
    run = drive(renew_batch(SETTINGS, held, batching, FakeClock()), lambda request: refused)
    assert run.result == held and not batching.enabled and len(run.calls) == 1
    assert run.events == [Kind.BATCHING_UNAVAILABLE]
    again = drive(renew_batch(SETTINGS, held, batching, FakeClock()), lambda request: refused)
    assert again.result == held and again.events == []       # said once
    assert all(lock._state.version == 'v-current' and not lock._state.unconfirmed for lock in held)


def test_batching_refused_after_a_retry_remembers_each_renewal_as_possibly_landed() -> None:
    from python_dynamodb_lock._core.answers import judge_error
    held = locks(2)
    refused = judge_error(client_error('AccessDeniedException', 400, retries=1, operation='BatchExecuteStatement'))
    assert isinstance(refused, Failed) and refused.maybe_applied
    run = drive(renew_batch(SETTINGS, held, Batching(25), FakeClock()), lambda request: refused)
    assert run.result == held and run.events.count(Kind.RENEWAL_FAILED) == 2
    sent = [statement['Parameters'][0] for statement in statements(run.calls[0])]
    assert [lock._state.unconfirmed for lock in held] == [[sent[0]], [sent[1]]]


def test_a_failed_call_fails_every_renewal_of_the_batch() -> None:
    held = locks(2)
    run = drive(renew_batch(SETTINGS, held, Batching(25), FakeClock()), lambda request: SERVER_ERROR)
    assert run.result == [] and len(run.calls) == 1 and run.events.count(Kind.RENEWAL_FAILED) == 2
    sent = [statement['Parameters'][0] for statement in statements(run.calls[0])]
    assert [lock._state.unconfirmed for lock in held] == [[sent[0]], [sent[1]]]   # a 5xx may have applied


def test_a_batch_interrupted_in_flight_remembers_every_renewal_as_possibly_landed() -> None:
    held = locks(2)
    protocol = renew_batch(SETTINGS, held, Batching(25), FakeClock())
    call = next(protocol)
    with pytest.raises(KeyboardInterrupt):
        protocol.throw(KeyboardInterrupt())
    sent = [statement['Parameters'][0] for statement in statements(call.request)]
    assert [lock._state.unconfirmed for lock in held] == [[sent[0]], [sent[1]]]
    # The next heartbeat, refused by a row carrying the interrupted renewal's version, keeps the lock.
    answer = batch({'Code': 'ConditionalCheckFailed', 'Item': row(sent[0], 'me')})
    drive(renew_batch(SETTINGS, held[:1], Batching(25), FakeClock()), lambda request: answer)
    assert held[0]._state.status == Status.LOCKED and held[0]._state.version == sent[0]


def test_a_lock_whose_settling_fails_is_reported_and_the_rest_of_the_batch_is_settled() -> None:
    held = locks(2)

    def broken(*args: Any) -> Any:
        raise RuntimeError('broken lock state')
    held[0]._state.settle_renewal = broken       # type: ignore[method-assign]
    run = drive(renew_batch(SETTINGS, held, Batching(25), FakeClock()), lambda request: batch(None, None))
    assert run.events == [Kind.SETTLE_FAILED, Kind.RENEWED]
    sent = statements(run.calls[0])[0]['Parameters'][0]
    assert held[0]._state.unconfirmed == [sent]        # it may have landed: not taken for a theft later
    assert held[1]._state.version == statements(run.calls[0])[1]['Parameters'][0]


def test_refused_renewals_in_a_batch_are_judged_like_single_ones() -> None:
    held = locks(1)
    run = drive(renew_batch(SETTINGS, held, Batching(25), FakeClock()),
                lambda request: [Refused(None)])
    assert run.events == [Kind.STOLEN] and held[0]._state.status == Status.INVALID
    applied = drive(renew_batch(SETTINGS, locks(1), Batching(25), FakeClock()), lambda request: [Applied()])
    assert applied.events == [Kind.RENEWED]
