"""Heartbeats grouped into PartiQL ``BatchExecuteStatement`` calls (``heartbeat_batch_size`` > 1).

PartiQL runs on DynamoDB and DynamoDB Local, not on moto, so these tests use DynamoDB Local.
Each statement stays conditional on its own lock's version: a batch must renew the locks it
still holds, report exactly the stolen ones, and treat a statement whose outcome is unknown
like a single heartbeat whose answer was lost.
"""
from __future__ import annotations

import datetime
import logging
import threading
from typing import Any, Callable, Dict, List, Optional

import pytest

from helpers import (
    CallbackRecorder,
    CallRecorder,
    FaultInjector,
    LockClients,
    holding_lock_mutex,
    is_registered,
    offline_resource,
    rewrite_batch_answers,
    run_checker_round,
    step,
    wait_until,
)
from python_dynamodb_lock._core.answers import Applied, Failed, Refused, judge_batch
from python_dynamodb_lock.python_dynamodb_lock import DynamoDBLock, DynamoDBLockError

MODULE = 'python_dynamodb_lock.python_dynamodb_lock'
seconds = datetime.timedelta
STOLEN = DynamoDBLockError.LOCK_STOLEN
IN_DANGER = DynamoDBLockError.LOCK_IN_DANGER


def assert_held_and_current(engine: Any, locks: List[DynamoDBLock]) -> None:
    """Every lock is LOCKED and its row carries the version the lock object holds."""
    for lock in locks:
        assert lock.status == DynamoDBLock.LOCKED, lock
        assert engine.read_item(lock.partition_key)['record_version_number'] == lock.record_version_number, lock


@pytest.mark.parametrize('size', [0, 26, -1, 2.0, True, '5', None])
def test_batch_size_must_be_an_int_from_1_to_25(size: Any, client_kind: str) -> None:
    factory = LockClients(kind=client_kind)
    try:
        with pytest.raises(ValueError, match='heartbeat_batch_size'):
            factory.make(offline_resource(), heartbeat_batch_size=size)
    finally:
        factory.close_all()


def test_one_call_renews_up_to_25_locks(local_engine: Any, local_clients: LockClients) -> None:
    client = local_clients.make(heartbeat_batch_size=25)
    locks = [client.acquire_lock(f'batched-{index}') for index in range(30)]
    old_versions = [lock.record_version_number for lock in locks]
    with CallRecorder(local_engine.resource) as calls:
        client.send_heartbeats(locks[:25])
        client.send_heartbeats(locks[25:])
    assert calls.operations() == ['BatchExecuteStatement', 'BatchExecuteStatement']
    assert [len(call.params['Statements']) for call in calls.calls] == [25, 5]
    for lock, old_version in zip(locks, old_versions):
        row = local_engine.read_item(lock.partition_key)
        assert lock.status == DynamoDBLock.LOCKED
        assert lock.record_version_number != old_version
        assert row['record_version_number'] == lock.record_version_number
        assert row['expiry_time'] == lock.expiry_time
        assert row['owner_name'] == client.owner_name      # nothing else of the row changes


def test_stolen_and_vanished_locks_in_a_batch_are_reported_and_the_rest_renewed(
        local_engine: Any, local_clients: LockClients) -> None:
    client = local_clients.make(heartbeat_batch_size=10)
    callbacks = {name: CallbackRecorder() for name in ('kept-1', 'stolen', 'kept-2', 'vanished', 'kept-3')}
    locks = {name: client.acquire_lock(name, app_callback=callback) for name, callback in callbacks.items()}
    thief_version = local_engine.steal_row('stolen')
    local_engine.client.delete_item(TableName=local_engine.table_name,
                                    Key={'lock_key': {'S': 'vanished'}, 'sort_key': {'S': '-'}})
    client.send_heartbeats(list(locks.values()))

    for name in ('stolen', 'vanished'):
        assert locks[name].status == DynamoDBLock.INVALID
        assert not is_registered(client, locks[name])
        assert callbacks[name].codes == [STOLEN]
    for name in ('kept-1', 'kept-2', 'kept-3'):
        assert locks[name].status == DynamoDBLock.LOCKED
        assert callbacks[name].codes == []
        assert local_engine.read_item(name)['record_version_number'] == locks[name].record_version_number
    # The new holder's row is left alone, and nothing was recreated.
    assert local_engine.read_item('stolen')['record_version_number'] == thief_version
    assert local_engine.read_item('vanished') is None


def test_background_rounds_send_groups_and_keep_locks_alive(local_engine: Any,
                                                           local_clients: LockClients) -> None:
    clock = local_clients.clock
    client = local_clients.make(hand_driven=False, heartbeat_batch_size=4,
                                heartbeat_period=seconds(seconds=8), heartbeat_tps=-1)
    start = clock.monotonic()
    locks = [client.acquire_lock(f'round-{index}') for index in range(8)]
    with CallRecorder(local_engine.resource, clock) as calls:
        step(clock, 23, client)
    # 8 locks spread over 8 s is one per second: a group of 4 leaves every 4 s.
    assert calls.operations() == ['BatchExecuteStatement'] * 4
    assert [call.clock_time - start for call in calls.calls] == [8, 12, 16, 20]
    assert [len(call.params['Statements']) for call in calls.calls] == [4] * 4
    assert_held_and_current(local_engine, locks)


def test_a_lost_answer_to_a_batch_does_not_look_like_a_theft(local_engine: Any,
                                                              local_clients: LockClients) -> None:
    """botocore retries a batch whose answer was lost: every statement then meets its own write."""
    client = local_clients.make(heartbeat_batch_size=5)
    callback = CallbackRecorder()
    locks = [client.acquire_lock(f'lost-{index}', app_callback=callback) for index in range(3)]
    with FaultInjector(local_engine.resource) as faults:
        lost = faults.lose_answers('BatchExecuteStatement', times=1, retry=True)
        client.send_heartbeats(locks)
    assert lost.hits == 1
    assert callback.codes == []
    assert_held_and_current(local_engine, locks)


def test_a_statement_with_an_unknown_outcome_is_remembered_and_the_next_heartbeat_works(
        local_engine: Any, local_clients: LockClients, monkeypatch: pytest.MonkeyPatch) -> None:
    """An InternalServerError for one statement: it may have been applied (here it was)."""
    client = local_clients.make(heartbeat_batch_size=5)
    callback = CallbackRecorder()
    locks = [client.acquire_lock(f'unknown-{index}', app_callback=callback) for index in range(3)]
    held_version = locks[1].record_version_number

    def report_an_internal_error_for_the_second(statements: List[Dict[str, Any]], send: Any) -> Dict[str, Any]:
        response = send(statements)
        response['Responses'][1] = {'Error': {'Code': 'InternalServerError', 'Message': 'injected'}}
        return response

    rewrite_batch_answers(client, monkeypatch, report_an_internal_error_for_the_second)
    client.send_heartbeats(locks)
    landed = local_engine.read_item('unknown-1')['record_version_number']
    assert landed != held_version                       # applied, though reported as failed
    assert locks[1].record_version_number == held_version
    assert locks[1]._state.unconfirmed == [landed]  # private: renewal bookkeeping, no public view by design
    assert locks[1].status == DynamoDBLock.LOCKED
    monkeypatch.undo()
    client.send_heartbeats(locks)                 # conditioned on both versions
    assert callback.codes == []
    assert_held_and_current(local_engine, locks)


def throttle_first_statement(times: int, asked: Optional[List[int]] = None
                             ) -> Callable[[List[Dict[str, Any]], Any], Dict[str, Any]]:
    """A batch rewrite: DynamoDB refuses the first statement of the next ``times`` calls for
    throughput. ``asked`` (if given) receives the number of statements of every call."""
    remaining = [times]

    def rewrite(statements: List[Dict[str, Any]], send: Any) -> Dict[str, Any]:
        if asked is not None:
            asked.append(len(statements))
        if remaining[0] <= 0:
            return send(statements)
        remaining[0] -= 1
        response = send(statements[1:]) if len(statements) > 1 else {'Responses': []}
        response['Responses'].insert(0, {'Error': {'Code': 'ThrottlingError', 'Message': 'injected'}})
        return response

    return rewrite


def test_a_throttled_statement_is_sent_again_after_a_short_backoff(
        local_engine: Any, local_clients: LockClients, monkeypatch: pytest.MonkeyPatch) -> None:
    clock = local_clients.clock
    client = local_clients.make(heartbeat_batch_size=5)
    locks = [client.acquire_lock(f'retried-{index}') for index in range(3)]
    asked: List[int] = []
    rewrite_batch_answers(client, monkeypatch, throttle_first_statement(times=2, asked=asked))
    with clock.auto_advance_in_current_thread():
        started = clock.monotonic()
        client.send_heartbeats(locks)
    # 3 statements, then the throttled one again twice, 50 ms and 100 ms later.
    assert asked == [3, 1, 1]
    assert clock.monotonic() - started == pytest.approx(0.15)
    assert_held_and_current(local_engine, locks)
    # private: renewal bookkeeping, no public view by design
    assert all(lock._state.unconfirmed == [] for lock in locks)


def test_a_statement_throttled_every_time_is_not_applied_and_the_lock_goes_in_danger_until_renewed(
        local_engine: Any, local_clients: LockClients, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger=MODULE)
    clock = local_clients.clock
    client = local_clients.make(heartbeat_batch_size=5, safe_period=seconds(seconds=20))
    callback = CallbackRecorder()
    locks = [client.acquire_lock(f'throttled-{index}', app_callback=callback) for index in range(3)]
    held_version = locks[0].record_version_number
    rewrite_batch_answers(client, monkeypatch, throttle_first_statement(times=1_000))
    with clock.auto_advance_in_current_thread():
        for _ in range(5):                              # 25 s of refused renewals of the first lock
            clock.advance(5)
            client.send_heartbeats(locks)
    assert local_engine.read_item('throttled-0')['record_version_number'] == held_version
    # private: renewal bookkeeping, no public view by design
    assert locks[0]._state.unconfirmed == []         # a refusal: nothing to remember
    assert any('ThrottlingError' in record.getMessage() for record in caplog.records)
    run_checker_round(client, clock)
    assert locks[0].status == DynamoDBLock.IN_DANGER and callback.codes == [IN_DANGER]
    assert [lock.status for lock in locks[1:]] == [DynamoDBLock.LOCKED] * 2
    monkeypatch.undo()
    client.send_heartbeats(locks)
    assert locks[0].status == DynamoDBLock.LOCKED
    assert local_engine.read_item('throttled-0')['record_version_number'] == locks[0].record_version_number


def test_closing_stops_the_retries_of_a_batch(local_engine: Any, local_clients: LockClients,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    client = local_clients.make(heartbeat_batch_size=5)
    locks = [client.acquire_lock(f'closing-{index}') for index in range(2)]
    held_version = locks[0].record_version_number
    asked: List[int] = []
    rewrite_batch_answers(client, monkeypatch, throttle_first_statement(times=1_000, asked=asked))
    # private: what close() sets first; needs a steppable runner
    client._shutdown.set()                              # what close() sets first
    client.send_heartbeats(locks)                 # the ManualClock never moves: no sleep may block
    assert asked == [2]
    assert locks[0].record_version_number == held_version
    assert local_engine.read_item('closing-1')['record_version_number'] == locks[1].record_version_number


@pytest.mark.parametrize('code', ['AccessDeniedException', 'UnknownOperationException'])
def test_without_partiql_the_client_falls_back_to_one_update_per_lock_and_says_why(
        local_engine: Any, local_clients: LockClients, caplog: pytest.LogCaptureFixture, code: str) -> None:
    caplog.set_level(logging.WARNING, logger=MODULE)
    clock = local_clients.clock
    client = local_clients.make(hand_driven=False, heartbeat_batch_size=5)
    callback = CallbackRecorder()
    locks = [client.acquire_lock(f'denied-{index}', app_callback=callback) for index in range(3)]
    with FaultInjector(local_engine.resource) as faults, CallRecorder(local_engine.resource) as calls:
        refused = faults.fail_calls('BatchExecuteStatement', code=code, status=400, times=None)
        step(clock, 5, client)                          # the refused batch, then each lock on its own
        assert refused.hits == 1
        assert sorted(calls.operations()) == ['BatchExecuteStatement'] + ['UpdateItem'] * 3
        calls.clear()
        step(clock, 10, client)                         # later rounds do not try batching again
        assert set(calls.operations()) == {'UpdateItem'} and calls.count() >= len(locks)
    warnings = [record.getMessage() for record in caplog.records if 'dynamodb:PartiQLUpdate' in record.getMessage()]
    assert len(warnings) == 1 and 'UpdateItem' in warnings[0]
    assert callback.codes == []
    assert_held_and_current(local_engine, locks)


def test_a_lock_being_released_is_not_waited_for_by_the_batch(local_engine: Any,
                                                              local_clients: LockClients) -> None:
    """A lock whose mutex is taken (``thread_lock`` of the threaded lock, the asyncio lock's
    ``asyncio.Lock``: its release is under way) is renewed on its own later."""
    client = local_clients.make(heartbeat_batch_size=5)
    locks = [client.acquire_lock(f'busy-{index}') for index in range(3)]
    with CallRecorder(local_engine.resource) as calls:
        released = False
        with holding_lock_mutex(locks[1]):
            sender = threading.Thread(target=client.send_heartbeats, args=(locks,))
            sender.start()
            # The batch of the two free locks goes out while lock 1 is busy.
            wait_until(lambda: calls.count('BatchExecuteStatement') == 1)
            assert [len(call.params['Statements']) for call in calls.of('BatchExecuteStatement')] == [2]
            released = True
        sender.join(10)
        assert released and not sender.is_alive()
    assert calls.operations() == ['BatchExecuteStatement', 'UpdateItem']
    for lock in locks:
        assert local_engine.read_item(lock.partition_key)['record_version_number'] == lock.record_version_number


def batch_answer(error: Optional[Dict[str, Any]], retry_attempts: int = 0) -> Any:
    """The answer to one statement of a successful batch whose statement answered ``error``."""
    response = {'Responses': [{'Error': error} if error else {}],
                'ResponseMetadata': {'HTTPStatusCode': 200, 'RetryAttempts': retry_attempts}}
    (answer,) = judge_batch(response, 1)
    return answer


def test_statement_outcomes_are_classified_like_single_calls() -> None:
    assert isinstance(batch_answer(None), Applied)
    refused = batch_answer({'Code': 'ConditionalCheckFailed', 'Item': {'record_version_number': 'v'}})
    assert isinstance(refused, Refused) and refused.item == {'record_version_number': 'v'}
    assert not refused.retried
    for code in ('ThrottlingError', 'ProvisionedThroughputExceeded', 'RequestLimitExceeded',
                 'ValidationError', 'ResourceNotFound', 'TransactionConflict'):
        answer = batch_answer({'Code': code})
        assert isinstance(answer, Failed) and not answer.maybe_applied, code
    assert batch_answer({'Code': 'InternalServerError'}).maybe_applied
    # After botocore retried the whole call, an earlier attempt may have applied any statement.
    assert batch_answer({'Code': 'ThrottlingError'}, retry_attempts=1).maybe_applied
    assert batch_answer({'Code': 'ConditionalCheckFailed'}, retry_attempts=1).retried


def test_a_failure_settling_one_lock_does_not_leave_the_others_of_the_batch_unsettled(
        local_engine: Any, local_clients: LockClients, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.ERROR, logger=MODULE)
    client = local_clients.make(heartbeat_batch_size=5)
    callback = CallbackRecorder()
    locks = [client.acquire_lock(f'settle-{index}', app_callback=callback) for index in range(3)]

    def settle(*args: Any) -> None:
        raise RuntimeError('injected')

    # private: renewal bookkeeping, no public view by design
    monkeypatch.setattr(locks[0]._state, 'settle_renewal', settle)   # a bug while settling one lock
    client.send_heartbeats(locks)
    assert any(record.exc_info and isinstance(record.exc_info[1], RuntimeError) for record in caplog.records)
    for lock in locks[1:]:
        assert local_engine.read_item(lock.partition_key)['record_version_number'] == lock.record_version_number
    written = local_engine.read_item('settle-0')['record_version_number']
    assert locks[0]._state.unconfirmed == [written]  # private: renewal bookkeeping, no public view by design
    monkeypatch.undo()
    client.send_heartbeats(locks)                 # the unsettled renewal is no theft
    assert callback.codes == []
    assert all(lock.status == DynamoDBLock.LOCKED for lock in locks)
    assert local_engine.read_item('settle-0')['record_version_number'] == locks[0].record_version_number


def test_attribute_names_are_quoted_in_the_statements(local_engine: Any, local_clients: LockClients) -> None:
    ttl_name = 'expires at "ttl"'                      # a space and double quotes: both need quoting
    client = local_clients.make(heartbeat_batch_size=5, ttl_attribute_name=ttl_name)
    locks = [client.acquire_lock(f'quoted-{index}') for index in range(2)]
    old_expiry = [lock.expiry_time for lock in locks]
    local_clients.clock.advance(60)
    client.send_heartbeats(locks)
    for lock, expiry in zip(locks, old_expiry):
        row = local_engine.read_item(lock.partition_key)
        assert lock.status == DynamoDBLock.LOCKED and lock.expiry_time > expiry
        assert row[ttl_name] == lock.expiry_time
        assert row['record_version_number'] == lock.record_version_number
        assert 'expiry_time' not in row
