"""Values at and beyond the limits: durations too long to wait.

* Durations (issue 11, part 1): any duration beyond ``MAX_DURATION`` (3650 days) is refused
  with a ValueError naming the argument and the limit, by the constructor, ``acquire_lock``
  and ``try_acquire_lock``, before any DynamoDB call and before any thread starts; one of
  exactly ``MAX_DURATION`` works, and the background loops never ask for a wait longer than
  ``threading.TIMEOUT_MAX`` (beyond it ``Event.wait`` raises ``OverflowError`` and the loop
  dies). ``clamp_wait`` makes any number a wait that a lock can do.
"""
from __future__ import annotations

import datetime
import math
import threading
import uuid
from typing import Any, Iterator, List, Tuple

import pytest

from conftest import EngineTable, moto_table
from helpers import CallRecorder, offline_resource
from python_dynamodb_lock._clock import SystemClock
from python_dynamodb_lock._validation import (
    MAX_DURATION,
    clamp_wait,
    require_duration,
)
from python_dynamodb_lock.python_dynamodb_lock import DynamoDBLockClient

td = datetime.timedelta
TOO_LONG = [
    pytest.param(td(days=106752), id='beyond-TIMEOUT_MAX'),   # the value of the issue: loops died
    pytest.param(MAX_DURATION + td(microseconds=1), id='just-beyond-MAX_DURATION'),
    pytest.param(td.max, id='timedelta.max'),
]
DURATION_ARGUMENTS = ['heartbeat_period', 'safe_period', 'lease_duration', 'expiry_period']


def lock_client_threads() -> List[threading.Thread]:
    return [thread for thread in threading.enumerate()
            if thread.name.startswith('DynamoDBLockClient-heartbeat') and thread.is_alive()]


@pytest.fixture
def moto_engine(request: pytest.FixtureRequest) -> Iterator[EngineTable]:
    with moto_table(f'locks-bounds-{uuid.uuid4().hex[:8]}') as table:
        yield table


@pytest.fixture
def moto_client(moto_engine: EngineTable) -> Iterator[DynamoDBLockClient]:
    client = DynamoDBLockClient(moto_engine.resource, table_name=moto_engine.table_name)
    yield client
    client.close()


def table_rows(engine: EngineTable) -> List[Any]:
    return engine.client.scan(TableName=engine.table_name, ConsistentRead=True)['Items']


# --------------------------------------------------------------------------------------------
# Durations
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize('too_long', TOO_LONG)
@pytest.mark.parametrize('argument', DURATION_ARGUMENTS)
def test_the_constructor_refuses_a_duration_beyond_the_maximum(argument: str, too_long: td) -> None:
    resource = offline_resource()
    threads_before = lock_client_threads()
    with CallRecorder(resource) as calls:
        with pytest.raises(ValueError) as refused:
            DynamoDBLockClient(resource, **{argument: too_long})
    message = str(refused.value)
    assert argument in message and '3650 days' in message, message
    assert calls.count() == 0
    assert lock_client_threads() == threads_before


@pytest.mark.parametrize('too_long', TOO_LONG)
@pytest.mark.parametrize('argument', ['retry_period', 'retry_timeout'])
def test_acquire_refuses_a_duration_beyond_the_maximum_before_any_call(
        moto_engine: EngineTable, moto_client: DynamoDBLockClient, argument: str, too_long: td) -> None:
    with CallRecorder(moto_engine.resource) as calls:
        with pytest.raises(ValueError) as refused:
            moto_client.acquire_lock('bounded', **{argument: too_long})
    assert argument in str(refused.value) and '3650 days' in str(refused.value)
    assert calls.count() == 0
    assert table_rows(moto_engine) == []


def test_try_acquire_refuses_attributes_it_cannot_store_before_any_call(
        moto_engine: EngineTable, moto_client: DynamoDBLockClient) -> None:
    """try_acquire_lock takes no durations; its one bad-input path shares acquire's checks."""
    with CallRecorder(moto_engine.resource) as calls:
        with pytest.raises(TypeError):
            moto_client.try_acquire_lock('bounded', additional_attributes={'ratio': 0.5})
    assert calls.count() == 0
    assert table_rows(moto_engine) == []


def test_require_duration_accepts_exactly_the_maximum() -> None:
    assert require_duration('retry_timeout', MAX_DURATION) == MAX_DURATION.total_seconds()
    assert MAX_DURATION.total_seconds() < threading.TIMEOUT_MAX


class RecordingSystemClock(SystemClock):
    """The real clock, noting every wait asked of it (thread name, seconds)."""

    def __init__(self) -> None:
        self.waits: List[Tuple[str, float]] = []
        self._guard = threading.Lock()
        self.both_loops_waited = threading.Event()

    def sleep(self, seconds: float, wake: threading.Event) -> bool:
        with self._guard:
            self.waits.append((threading.current_thread().name, seconds))
            names = {name for name, _ in self.waits}
            if {'DynamoDBLockClient-heartbeat-sender', 'DynamoDBLockClient-heartbeat-checker'} <= names:
                self.both_loops_waited.set()
        return super().sleep(seconds, wake)


def test_durations_of_exactly_the_maximum_work(moto_engine: EngineTable) -> None:
    """Every duration at its longest: the client starts, acquires and releases, and its loops
    only ever ask for waits that ``Event.wait`` can do, so they stay alive until close."""
    clock = RecordingSystemClock()
    client = DynamoDBLockClient(
        moto_engine.resource, table_name=moto_engine.table_name,
        heartbeat_period=MAX_DURATION - td(days=2), safe_period=MAX_DURATION - td(days=1),
        lease_duration=MAX_DURATION, expiry_period=MAX_DURATION, clock=clock)
    try:
        lock = client.acquire_lock('longest', retry_period=MAX_DURATION, retry_timeout=MAX_DURATION)
        assert clock.both_loops_waited.wait(10), clock.waits
        assert all(seconds <= threading.TIMEOUT_MAX for _, seconds in clock.waits), clock.waits
        assert client._heartbeat_sender.is_alive() and client._heartbeat_checker.is_alive()
        lock.release(best_effort=False)
        assert table_rows(moto_engine) == []
    finally:
        client.close()
    assert not client._heartbeat_sender.is_alive() and not client._heartbeat_checker.is_alive()


@pytest.mark.parametrize('seconds, expected', [
    (0, 0.0),
    (1.5, 1.5),
    (-3, 0.0),
    (-math.inf, 0.0),
    (threading.TIMEOUT_MAX, threading.TIMEOUT_MAX),
    (threading.TIMEOUT_MAX * 2, threading.TIMEOUT_MAX),
    (math.inf, threading.TIMEOUT_MAX),
    (math.nan, threading.TIMEOUT_MAX),
    (10 ** 400, threading.TIMEOUT_MAX),     # too large for a float
    (-10 ** 400, 0.0),
    (td(days=106752).total_seconds(), threading.TIMEOUT_MAX),
])
def test_clamp_wait(seconds: float, expected: float) -> None:
    assert clamp_wait(seconds) == expected
    # The point of it: a lock (like Event.wait) accepts the wait; the raw value may not be.
    guard = threading.Lock()
    assert guard.acquire(timeout=clamp_wait(seconds))
    guard.release()


def test_clamp_wait_is_needed_for_the_values_it_caps() -> None:
    """Guards the test above: unclamped, these waits raise (so the test above can fail)."""
    guard = threading.Lock()
    for seconds in (threading.TIMEOUT_MAX * 2, math.inf, math.nan):
        with pytest.raises((OverflowError, ValueError)):
            guard.acquire(timeout=seconds)


@pytest.mark.parametrize('not_a_number', ['5', None, td(seconds=1), True])
def test_clamp_wait_refuses_what_is_not_a_number(not_a_number: Any) -> None:
    with pytest.raises(TypeError):
        clamp_wait(not_a_number)
