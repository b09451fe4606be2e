"""The test helpers themselves (tests/helpers.py), on both engines: the fault injection and call
counting that other suites build on must do exactly what they claim, or their tests prove nothing."""
from __future__ import annotations

import threading
from typing import Any

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError, ReadTimeoutError

from helpers import (
    CallRecorder,
    FaultInjector,
    ManualClock,
    no_retry_backoff,
    wait_until,
)


def conditional_put(client: Any, table_name: str, key: str, value: str) -> None:
    """A put that fails if the row exists: a second execution of the same request would show."""
    client.put_item(TableName=table_name, Item={'lock_key': key, 'sort_key': '-', 'value': value},
                    ConditionExpression='attribute_not_exists(lock_key)',
                    ReturnValuesOnConditionCheckFailure='ALL_OLD')


@pytest.fixture
def dynamodb(engine: Any) -> Any:
    """A fresh low-level client (Python values in and out), hooks of its own."""
    return engine.new_resource().meta.client


def test_fail_calls_fails_the_whole_call_without_sending_it(engine: Any, dynamodb: Any) -> None:
    with FaultInjector(dynamodb) as faults, CallRecorder(dynamodb) as calls:
        fault = faults.fail_calls('PutItem', code='ProvisionedThroughputExceededException')
        attempts = faults.add_latency('PutItem', 0)          # counts HTTP attempts
        with pytest.raises(ClientError) as raised:
            conditional_put(dynamodb, engine.table_name, 'k1', 'v')
        assert raised.value.response['Error']['Code'] == 'ProvisionedThroughputExceededException'
        assert (fault.hits, attempts.hits, calls.count('PutItem')) == (1, 0, 1)
        assert engine.read_item('k1') is None
        conditional_put(dynamodb, engine.table_name, 'k1', 'v')     # times=1: the next call goes through
    assert engine.read_item('k1')['value'] == 'v'


def test_fail_calls_500_looks_like_a_server_error(engine: Any, dynamodb: Any) -> None:
    with FaultInjector(dynamodb) as faults:
        faults.fail_calls('GetItem', code='InternalServerError', status=500)
        with pytest.raises(ClientError) as raised:
            dynamodb.get_item(TableName=engine.table_name, Key={'lock_key': 'x', 'sort_key': '-'})
    assert raised.value.response['ResponseMetadata']['HTTPStatusCode'] == 500


def test_fail_attempts_lets_botocore_retry_and_never_executes_the_failed_attempt(
        engine: Any, dynamodb: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    no_retry_backoff(monkeypatch)
    with FaultInjector(dynamodb) as faults, CallRecorder(dynamodb) as calls:
        fault = faults.fail_attempts('PutItem', code='ProvisionedThroughputExceededException', times=1)
        conditional_put(dynamodb, engine.table_name, 'k2', 'v')   # the retry would fail if attempt 1 ran
    assert fault.hits == 1
    assert calls.count('PutItem') == 1
    assert engine.read_item('k2')['value'] == 'v'


def test_fail_attempts_every_time_exhausts_the_retries(engine: Any, dynamodb: Any,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    no_retry_backoff(monkeypatch)
    with FaultInjector(dynamodb) as faults:
        fault = faults.fail_attempts('PutItem', code='InternalServerError', status=500, times=None)
        with pytest.raises(ClientError):
            conditional_put(dynamodb, engine.table_name, 'k3', 'v')
    assert fault.hits == dynamodb.meta.config.retries['total_max_attempts']
    assert engine.read_item('k3') is None


def test_raise_in_attempts_is_retried_for_connection_errors(engine: Any, dynamodb: Any,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    no_retry_backoff(monkeypatch)
    with FaultInjector(dynamodb) as faults:
        fault = faults.raise_in_attempts('PutItem', lambda: EndpointConnectionError(endpoint_url='injected'))
        conditional_put(dynamodb, engine.table_name, 'k4', 'v')
    assert fault.hits == 1
    assert engine.read_item('k4')['value'] == 'v'


def test_lost_answer_with_retry_meets_its_own_write(engine: Any, dynamodb: Any) -> None:
    with FaultInjector(dynamodb) as faults:
        fault = faults.lose_answers('PutItem', retry=True)
        with pytest.raises(ClientError) as raised:
            conditional_put(dynamodb, engine.table_name, 'k5', 'mine')
    assert fault.hits == 1
    assert raised.value.response['Error']['Code'] == 'ConditionalCheckFailedException'
    assert raised.value.response['Item']['value'] == {'S': 'mine'}     # ALL_OLD arrives raw
    assert engine.read_item('k5')['value'] == 'mine'


def test_lost_answer_without_retry_raises_after_the_write(engine: Any, dynamodb: Any) -> None:
    with FaultInjector(dynamodb) as faults:
        faults.lose_answers('PutItem', retry=False)
        with pytest.raises(ReadTimeoutError):
            conditional_put(dynamodb, engine.table_name, 'k6', 'landed')
    assert engine.read_item('k6')['value'] == 'landed'


def test_lost_answer_only_fires_on_success(engine: Any, dynamodb: Any) -> None:
    conditional_put(dynamodb, engine.table_name, 'k7', 'first')
    with FaultInjector(dynamodb) as faults:
        fault = faults.lose_answers('PutItem', retry=True)
        with pytest.raises(ClientError):
            conditional_put(dynamodb, engine.table_name, 'k7', 'second')   # refused: no answer to lose
        assert fault.hits == 0


def test_before_call_runs_the_action_once_with_the_request(engine: Any, dynamodb: Any) -> None:
    seen: list = []
    with FaultInjector(dynamodb) as faults:
        faults.before_call('PutItem', seen.append)
        conditional_put(dynamodb, engine.table_name, 'k8', 'v')
        conditional_put(dynamodb, engine.table_name, 'k9', 'v')
    assert len(seen) == 1
    assert seen[0]['Item']['lock_key'] == {'S': 'k8'}


def test_clear_removes_every_fault(engine: Any, dynamodb: Any) -> None:
    faults = FaultInjector(dynamodb)
    faults.fail_calls('*', times=None)
    faults.clear()
    conditional_put(dynamodb, engine.table_name, 'k10', 'v')
    assert engine.read_item('k10') is not None


def test_call_recorder_sees_the_request_body(engine: Any, dynamodb: Any) -> None:
    with CallRecorder(dynamodb) as calls:
        dynamodb.get_item(TableName=engine.table_name, Key={'lock_key': 'x', 'sort_key': '-'}, ConsistentRead=True)
    assert calls.operations() == ['GetItem']
    assert calls.calls[0].params['ConsistentRead'] is True
    assert calls.calls[0].params['Key'] == {'lock_key': {'S': 'x'}, 'sort_key': {'S': '-'}}


# --- ManualClock (no engine) --------------------------------------------------------------------

def test_manual_clock_moves_only_when_told() -> None:
    clock = ManualClock(start_monotonic=100.0, start_time=5000.0)
    assert (clock.monotonic(), clock.time()) == (100.0, 5000.0)
    for _ in range(10):
        clock.advance(0.1)
    assert clock.monotonic() == 101.0              # exact: microseconds, not float sums
    clock.shift_wall_clock(-60)
    assert (clock.monotonic(), clock.time()) == (101.0, 4941.0)
    with pytest.raises(ValueError):
        clock.advance(-1)


def test_manual_clock_sleepers_wake_at_their_deadline() -> None:
    clock = ManualClock()
    results: list = []
    sleeper = threading.Thread(target=lambda: results.append(clock.sleep(5, threading.Event())))
    sleeper.start()
    clock.wait_until_idle([sleeper])
    clock.advance(4.9)
    clock.wait_until_idle([sleeper])               # still asleep: its deadline is ahead
    assert results == []
    clock.advance(0.1)
    sleeper.join(10)
    assert results == [False]


def test_manual_clock_wake_event_interrupts_a_sleep() -> None:
    clock = ManualClock()
    wake = threading.Event()
    results: list = []
    sleeper = threading.Thread(target=lambda: results.append(clock.sleep(3600, wake)))
    sleeper.start()
    clock.wait_until_idle([sleeper])
    wake.set()
    sleeper.join(10)
    assert results == [True]
    assert clock.sleep(10, wake) is True           # already set: returns at once


def test_manual_clock_modes() -> None:
    clock = ManualClock(start_monotonic=0.0)
    with clock.auto_advance_in_current_thread():
        assert clock.sleep(7.5, threading.Event()) is False
    assert clock.monotonic() == 7.5
    with clock.sleeps_return_at_once_in_current_thread():
        assert clock.sleep(100, threading.Event()) is False
    assert clock.monotonic() == 7.5
    assert clock.sleeps_of(threading.current_thread().name) == [7.5, 100]


def test_wait_until_gives_up_with_a_message() -> None:
    with pytest.raises(AssertionError, match='never'):
        wait_until(lambda: False, timeout=0.01, message=lambda: 'never')
