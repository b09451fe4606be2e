"""Heartbeats and the heartbeat checker: renewals, stolen locks, DynamoDB errors, IN_DANGER and
back, lost answers, callbacks, pacing, and background threads that never die.

The first half drives a hand-driven client (its background threads idle) by calling one
heartbeat or one checker round at a time. The second half runs the real background threads on
a ManualClock, advancing fake time one second at a time and letting every thread settle.
"""
from __future__ import annotations

import datetime
import logging
import threading
import uuid
from typing import Any, List

import pytest
from botocore.exceptions import ClientError

from helpers import (
    CallbackRecorder,
    CallRecorder,
    FaultInjector,
    LockClients,
    RecordingExecutor,
    background_threads,
    callback_thread_prefix,
    current_actor_name,
    is_registered,
    run_checker_round,
    step,
)
from python_dynamodb_lock.python_dynamodb_lock import DynamoDBLock, DynamoDBLockError

MODULE = 'python_dynamodb_lock.python_dynamodb_lock'
seconds = datetime.timedelta
STOLEN = DynamoDBLockError.LOCK_STOLEN
IN_DANGER = DynamoDBLockError.LOCK_IN_DANGER


# --- one heartbeat at a time ------------------------------------------------------------------

def test_heartbeat_renews_version_and_ttl_with_one_conditional_update(engine: Any, clients: LockClients) -> None:
    clock = clients.clock
    client = clients.make(expiry_period=seconds(minutes=10))
    lock = client.acquire_lock('renewed')
    old_version = lock.record_version_number
    clock.advance(4)
    with CallRecorder(engine.resource) as calls:
        client.send_heartbeats([lock])
    assert calls.operations() == ['UpdateItem']
    assert old_version in calls.calls[0].expression_values().values()
    assert lock.status == DynamoDBLock.LOCKED
    assert lock.record_version_number != old_version
    assert uuid.UUID(lock.record_version_number).version == 4
    assert lock.expiry_time == int(clock.time() + 600)
    assert lock.last_updated_time == clock.monotonic()
    row = engine.read_item('renewed')
    assert row['record_version_number'] == lock.record_version_number
    assert row['expiry_time'] == lock.expiry_time
    assert row['owner_name'] == client.owner_name


def test_heartbeat_of_a_stolen_lock(engine: Any, clients: LockClients, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger=MODULE)
    client = clients.make()
    callback = CallbackRecorder()
    lock = client.acquire_lock('taken', app_callback=callback)
    thief_version = engine.steal_row('taken')
    client.send_heartbeats([lock])
    assert lock.status == DynamoDBLock.INVALID
    assert not is_registered(client, lock)
    assert [(call.code, call.lock) for call in callback.calls] == [(STOLEN, lock)]
    assert engine.read_item('taken')['record_version_number'] == thief_version
    assert any(record.levelno == logging.WARNING and 'taken' in record.getMessage() for record in caplog.records)
    with CallRecorder(engine.resource) as calls:
        client.send_heartbeats([lock])          # a forgotten lock is not heartbeated again
    assert calls.calls == []
    assert callback.codes == [STOLEN]


def test_heartbeat_of_a_lock_whose_row_was_deleted_reports_it_stolen(engine: Any, clients: LockClients) -> None:
    client = clients.make()
    callback = CallbackRecorder()
    lock = client.acquire_lock('deleted-under-us', app_callback=callback)
    engine.client.delete_item(TableName=engine.table_name,
                              Key={'lock_key': {'S': 'deleted-under-us'}, 'sort_key': {'S': '-'}})
    client.send_heartbeats([lock])
    assert lock.status == DynamoDBLock.INVALID
    assert callback.codes == [STOLEN]
    assert engine.read_item('deleted-under-us') is None     # the update did not recreate the row


def test_dynamodb_error_keeps_the_lock_then_in_danger_then_locked_again(
        engine: Any, clients: LockClients, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger=MODULE)
    clock = clients.clock
    client = clients.make(heartbeat_period=seconds(seconds=5), safe_period=seconds(seconds=20),
                          lease_duration=seconds(seconds=30))
    callback = CallbackRecorder()
    lock = client.acquire_lock('shaky', app_callback=callback)
    version = lock.record_version_number
    with FaultInjector(engine.resource) as faults:
        faults.fail_calls('UpdateItem', code='ProvisionedThroughputExceededException', times=None)
        for _ in range(4):
            clock.advance(5)
            client.send_heartbeats([lock])
            run_checker_round(client, clock)
            assert lock.status == DynamoDBLock.LOCKED        # 20 s without renewal: not yet
        assert lock.record_version_number == version
        assert is_registered(client, lock)
        assert any(record.levelno == logging.WARNING and 'shaky' in record.getMessage()
                   for record in caplog.records)
        clock.advance(5)
        client.send_heartbeats([lock])
        run_checker_round(client, clock)
        assert lock.status == DynamoDBLock.IN_DANGER           # 25 s > safe period
        assert callback.codes == [IN_DANGER]
        clock.advance(5)
        client.send_heartbeats([lock])                          # IN_DANGER locks are still renewed...
        run_checker_round(client, clock)
        assert callback.codes == [IN_DANGER]                  # ...and reported only once
    client.send_heartbeats([lock])                              # the first success
    assert lock.status == DynamoDBLock.LOCKED
    assert lock.record_version_number != version
    assert engine.read_item('shaky')['record_version_number'] == lock.record_version_number
    run_checker_round(client, clock)
    assert lock.status == DynamoDBLock.LOCKED
    assert callback.codes == [IN_DANGER]


def test_each_danger_episode_is_reported(engine: Any, clients: LockClients) -> None:
    clock = clients.clock
    client = clients.make()
    callback = CallbackRecorder()
    lock = client.acquire_lock('two-episodes', app_callback=callback)
    for _ in range(2):
        clock.advance(21)
        run_checker_round(client, clock)
        assert lock.status == DynamoDBLock.IN_DANGER
        client.send_heartbeats([lock])
        assert lock.status == DynamoDBLock.LOCKED
    assert callback.codes == [IN_DANGER, IN_DANGER]


def test_heartbeat_on_a_deleted_table_keeps_the_lock_and_warns(engine: Any, clients: LockClients,
                                                               caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger=MODULE)
    client = clients.make()
    lock = client.acquire_lock('table-gone')
    engine.client.delete_table(TableName=engine.table_name)
    client.send_heartbeats([lock])
    assert lock.status == DynamoDBLock.LOCKED
    assert any(record.levelno == logging.WARNING and engine.table_name in record.getMessage()
               for record in caplog.records)


def test_in_danger_lock_that_was_stolen_becomes_invalid(engine: Any, clients: LockClients) -> None:
    clock = clients.clock
    client = clients.make()
    callback = CallbackRecorder()
    lock = client.acquire_lock('danger-then-stolen', app_callback=callback)
    clock.advance(21)
    run_checker_round(client, clock)
    assert lock.status == DynamoDBLock.IN_DANGER
    engine.steal_row('danger-then-stolen')
    client.send_heartbeats([lock])
    assert lock.status == DynamoDBLock.INVALID
    assert callback.codes == [IN_DANGER, STOLEN]
    assert not is_registered(client, lock)


def test_checker_flags_only_locks_past_the_safe_period(engine: Any, clients: LockClients) -> None:
    clock = clients.clock
    client = clients.make(safe_period=seconds(seconds=20))
    callback = CallbackRecorder()
    old = client.acquire_lock('old', app_callback=callback)
    clock.advance(15)
    fresh = client.acquire_lock('fresh', app_callback=callback)
    clock.advance(6)
    run_checker_round(client, clock)
    assert (old.status, fresh.status) == (DynamoDBLock.IN_DANGER, DynamoDBLock.LOCKED)
    assert [(call.code, call.lock) for call in callback.calls] == [(IN_DANGER, old)]


@pytest.mark.parametrize('retry', [True, False], ids=['botocore-retries', 'timeout-raised'])
def test_lost_heartbeat_answer_is_not_a_stolen_lock(engine: Any, clients: LockClients, retry: bool) -> None:
    client = clients.make()
    callback = CallbackRecorder()
    lock = client.acquire_lock('lost-answer', app_callback=callback)
    with FaultInjector(engine.resource) as faults:
        lost = faults.lose_answers('UpdateItem', retry=retry)
        client.send_heartbeats([lock])
    assert lost.hits == 1
    assert lock.status == DynamoDBLock.LOCKED
    assert callback.calls == []
    client.send_heartbeats([lock])                      # the next one goes through as well
    assert lock.status == DynamoDBLock.LOCKED
    assert callback.calls == []
    assert engine.read_item('lost-answer')['record_version_number'] == lock.record_version_number


def test_several_lost_answers_in_a_row_then_success(engine: Any, clients: LockClients) -> None:
    client = clients.make()
    callback = CallbackRecorder()
    lock = client.acquire_lock('many-lost', app_callback=callback)
    with FaultInjector(engine.resource) as faults:
        faults.lose_answers('UpdateItem', retry=False, times=3)
        for _ in range(3):
            client.send_heartbeats([lock])
    client.send_heartbeats([lock])
    assert lock.status == DynamoDBLock.LOCKED and callback.calls == []
    assert engine.read_item('many-lost')['record_version_number'] == lock.record_version_number


def lost_then_many_unknown_outcomes(engine: Any, client: Any, lock: Any, failures: int = 25) -> str:
    """One renewal lands unconfirmed, then many fail with 500s that may or may not have landed
    (they did not): the row's version is older than the recent unconfirmed ones."""
    with FaultInjector(engine.resource) as faults:
        faults.lose_answers('UpdateItem', retry=False)
        client.send_heartbeats([lock])
    landed = engine.read_item(lock.partition_key)['record_version_number']
    with FaultInjector(engine.resource) as faults:
        faults.fail_calls('UpdateItem', code='InternalServerError', status=500, times=failures)
        for _ in range(failures):
            client.send_heartbeats([lock])
    assert engine.read_item(lock.partition_key)['record_version_number'] == landed
    return landed


def test_an_old_unconfirmed_renewal_in_the_row_is_recognised_as_ours(engine: Any, clients: LockClients) -> None:
    client = clients.make()
    callback = CallbackRecorder()
    lock = client.acquire_lock('old-unconfirmed', app_callback=callback)
    lost_then_many_unknown_outcomes(engine, client, lock)
    client.send_heartbeats([lock])
    client.send_heartbeats([lock])
    assert lock.status == DynamoDBLock.LOCKED
    assert callback.calls == []
    assert engine.read_item('old-unconfirmed')['record_version_number'] == lock.record_version_number


def test_theft_after_a_lost_answer_is_still_detected(engine: Any, clients: LockClients) -> None:
    client = clients.make()
    callback = CallbackRecorder()
    lock = client.acquire_lock('lost-then-stolen', app_callback=callback)
    with FaultInjector(engine.resource) as faults:
        faults.lose_answers('UpdateItem', retry=False)
        client.send_heartbeats([lock])
    engine.steal_row('lost-then-stolen')
    client.send_heartbeats([lock])
    assert lock.status == DynamoDBLock.INVALID
    assert callback.codes == [STOLEN]


def test_unexpected_error_in_a_heartbeat_is_logged_and_the_lock_kept(
        engine: Any, clients: LockClients, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger=MODULE)
    clock = clients.clock
    client = clients.make(hand_driven=False)
    lock = client.acquire_lock('weird-error')
    with FaultInjector(engine.resource) as faults:
        fault = faults.raise_in_attempts('UpdateItem', lambda: RuntimeError('not a DynamoDB error'))
        step(clock, 5, client)             # the heartbeat pool meets it: it must not die of it
    assert fault.hits == 1
    assert lock.status == DynamoDBLock.LOCKED and is_registered(client, lock)
    assert any(record.exc_info and isinstance(record.exc_info[1], RuntimeError) for record in caplog.records)
    assert all(thread.is_alive() for thread in background_threads(client))


def test_heartbeat_of_a_released_lock_makes_no_call(engine: Any, clients: LockClients) -> None:
    client = clients.make()
    lock = client.acquire_lock('released')
    lock.release()
    with CallRecorder(engine.resource) as calls:
        client.send_heartbeats([lock])
    assert calls.calls == []


# --- callbacks (correction 7) -----------------------------------------------------------------

def test_no_callback_means_nothing_is_submitted(engine: Any, clients: LockClients) -> None:
    clock = clients.clock
    executor = RecordingExecutor()
    client = clients.make(app_callback_executor=executor)
    danger = client.acquire_lock('no-callback-danger')
    stolen = client.acquire_lock('no-callback-stolen')
    clock.advance(21)
    run_checker_round(client, clock)
    engine.steal_row('no-callback-stolen')
    client.send_heartbeats([stolen])
    assert (danger.status, stolen.status) == (DynamoDBLock.IN_DANGER, DynamoDBLock.INVALID)
    assert executor.submission_count == 0


def test_callbacks_run_on_the_executor_not_on_the_heartbeat_thread(engine: Any, clients: LockClients) -> None:
    executor = RecordingExecutor(inline=False)
    client = clients.make(app_callback_executor=executor)
    callback = CallbackRecorder()
    lock = client.acquire_lock('deferred', app_callback=callback)
    engine.steal_row('deferred')
    client.send_heartbeats([lock])
    assert executor.submission_count == 1
    assert callback.calls == []                 # not run by the heartbeat itself
    assert executor.run_pending() == 1
    assert callback.codes == [STOLEN]


def test_callbacks_run_on_the_default_executor_threads(engine: Any, clients: LockClients) -> None:
    client = clients.make(app_callback_executor=None)
    callback = CallbackRecorder()
    lock = client.acquire_lock('default-executor', app_callback=callback)
    engine.steal_row('default-executor')
    client.send_heartbeats([lock])
    assert callback.called.wait(10)
    assert callback.calls[0].thread != threading.current_thread().name
    assert callback.calls[0].thread.startswith(callback_thread_prefix(client))


def test_a_raising_callback_is_logged_and_later_callbacks_still_run(
        engine: Any, clients: LockClients, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger=MODULE)
    clock = clients.clock
    client = clients.make()
    callback = CallbackRecorder(raise_on=[STOLEN, IN_DANGER])
    first = client.acquire_lock('raising-1', app_callback=callback)
    second = client.acquire_lock('raising-2', app_callback=callback)
    engine.steal_row('raising-1')
    client.send_heartbeats([first])
    clock.advance(21)
    run_checker_round(client, clock)
    assert [(call.code, call.lock) for call in callback.calls] == [(STOLEN, first), (IN_DANGER, second)]
    failures = [record for record in caplog.records
                if record.exc_info and isinstance(record.exc_info[1], RuntimeError)]
    assert len(failures) == 2
    assert second.status == DynamoDBLock.IN_DANGER
    client.send_heartbeats([second])
    assert second.status == DynamoDBLock.LOCKED


def test_a_failing_executor_does_not_break_the_heartbeat(engine: Any, clients: LockClients) -> None:
    executor = RecordingExecutor()
    client = clients.make(app_callback_executor=executor)
    executor.shutdown()                          # submit now raises RuntimeError
    callback = CallbackRecorder()
    lock = client.acquire_lock('no-executor', app_callback=callback)
    engine.steal_row('no-executor')
    client.send_heartbeats([lock])
    assert lock.status == DynamoDBLock.INVALID
    assert callback.calls == []


# --- the real background threads on a manual clock ----------------------------------------------

def update_times(calls: CallRecorder) -> List[float]:
    return [call.clock_time for call in calls.of('UpdateItem')]


def test_sender_renews_each_lock_once_per_period(engine: Any, clients: LockClients) -> None:
    clock = clients.clock
    client = clients.make(hand_driven=False, heartbeat_period=seconds(seconds=5))
    start = clock.monotonic()
    lock = client.acquire_lock('periodic')
    with CallRecorder(engine.resource, clock) as calls:
        step(clock, 20, client)
    assert [time - start for time in update_times(calls)] == [5, 10, 15, 20]
    assert engine.read_item('periodic')['record_version_number'] == lock.record_version_number
    lock.release()
    with CallRecorder(engine.resource, clock) as calls:
        step(clock, 10, client)
    assert calls.calls == []                     # released locks are not renewed


def test_adaptive_pacing_spreads_a_round_over_the_period(engine: Any, clients: LockClients) -> None:
    clock = clients.clock
    client = clients.make(hand_driven=False, heartbeat_period=seconds(seconds=8), heartbeat_tps=-1)
    start = clock.monotonic()
    for index in range(4):
        client.acquire_lock(f'paced-{index}')
    with CallRecorder(engine.resource, clock) as calls:
        step(clock, 15, client)
    assert [time - start for time in update_times(calls)] == [8, 10, 12, 14]


def test_explicit_tps_caps_heartbeats_per_second(engine: Any, clients: LockClients) -> None:
    clock = clients.clock
    client = clients.make(hand_driven=False, heartbeat_period=seconds(seconds=8), heartbeat_tps=0.5)
    start = clock.monotonic()
    for index in range(3):
        client.acquire_lock(f'capped-{index}')
    with CallRecorder(engine.resource, clock) as calls:
        step(clock, 16, client)
    assert [time - start for time in update_times(calls)] == [8, 10, 12, 16]


def test_in_danger_via_the_threads_keeps_being_renewed_and_recovers(engine: Any, clients: LockClients) -> None:
    clock = clients.clock
    client = clients.make(hand_driven=False, heartbeat_period=seconds(seconds=5),
                          safe_period=seconds(seconds=20), lease_duration=seconds(seconds=30))
    callback = CallbackRecorder()
    lock = client.acquire_lock('recovers', app_callback=callback)
    with FaultInjector(engine.resource) as faults:
        failing = faults.fail_calls('UpdateItem', code='InternalServerError', status=500, times=None)
        step(clock, 20, client)
        assert lock.status == DynamoDBLock.LOCKED
        step(clock, 4, client)                   # +24: past the safe period, as read now...
        assert lock.status == DynamoDBLock.IN_DANGER
        assert callback.codes == []              # ...though the checker has not run yet
        step(clock, 1, client)                   # checker at +25 s: 25 > 20
        assert lock.status == DynamoDBLock.IN_DANGER
        assert callback.codes == [IN_DANGER]
        step(clock, 10, client)                  # renewals go on while IN_DANGER (+30, +35)
        assert failing.hits == 7
        assert lock.status == DynamoDBLock.IN_DANGER
    step(clock, 5, client)                       # +40: the first renewal that works
    assert lock.status == DynamoDBLock.LOCKED
    step(clock, 30, client)
    assert lock.status == DynamoDBLock.LOCKED
    assert callback.codes == [IN_DANGER]
    assert engine.read_item('recovers')['record_version_number'] == lock.record_version_number


def test_stolen_via_the_threads(engine: Any, clients: LockClients) -> None:
    clock = clients.clock
    client = clients.make(hand_driven=False)
    callback = CallbackRecorder()
    lock = client.acquire_lock('stolen-live', app_callback=callback)
    engine.steal_row('stolen-live')
    step(clock, 5, client)
    assert lock.status == DynamoDBLock.INVALID
    assert callback.codes == [STOLEN]
    step(clock, 30, client)
    assert callback.codes == [STOLEN]
    assert engine.read_item('stolen-live')['owner_name'] == 'thief'


@pytest.mark.parametrize('failure', ['runtime-error', 'client-error'])
def test_threads_survive_errors_and_later_rounds_still_run(
        engine: Any, clients: LockClients, monkeypatch: pytest.MonkeyPatch, failure: str) -> None:
    clock = clients.clock
    client = clients.make(hand_driven=False)
    lock = client.acquire_lock('survivor')
    if failure == 'runtime-error':
        error: Exception = RuntimeError('store blew up')
    else:
        error = ClientError({'Error': {'Code': 'InternalServerError', 'Message': 'x'},
                             'ResponseMetadata': {'HTTPStatusCode': 500}}, 'UpdateItem')
    with FaultInjector(engine.resource) as faults:
        fault = faults.raise_in_attempts('UpdateItem', lambda: error, times=None)
        step(clock, 15, client)
    assert fault.hits >= 3      # every round tried again (botocore may retry a 500 within a round)
    assert all(thread.is_alive() for thread in background_threads(client))
    step(clock, 5, client)
    assert lock.status == DynamoDBLock.LOCKED
    assert engine.read_item('survivor')['record_version_number'] == lock.record_version_number


def test_loops_survive_an_error_in_a_round(engine: Any, clients: LockClients, monkeypatch: pytest.MonkeyPatch,
                                           caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger=MODULE)
    clock = clients.clock
    client = clients.make(hand_driven=False)
    lock = client.acquire_lock('round-error')
    failures: list = []
    real_monotonic = clock.monotonic
    loop_names = {thread.name for thread in background_threads(client)}

    def fails_once_per_loop() -> float:
        name = current_actor_name()      # the loop's thread, or the asyncio client's task
        if name in loop_names and name not in failures:
            failures.append(name)
            raise RuntimeError('clock trouble')
        return real_monotonic()

    monkeypatch.setattr(clock, 'monotonic', fails_once_per_loop)   # the next round of each loop fails
    with CallRecorder(engine.resource, clock) as calls:
        step(clock, 15, client)
    assert sorted(failures) == sorted(thread.name for thread in background_threads(client))
    assert all(thread.is_alive() for thread in background_threads(client))
    assert calls.count('UpdateItem') >= 1         # later rounds ran
    assert lock.status == DynamoDBLock.LOCKED
    assert sum(1 for record in caplog.records
               if record.exc_info and isinstance(record.exc_info[1], RuntimeError)) == 2
