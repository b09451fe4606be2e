"""What the library says, and how often (issue 18).

* WARNING and ERROR lines are rate-limited per client: at most one line of a kind per
  ``RATE_LIMIT_PERIOD`` of the client's clock, the next one counting those left out; metrics
  and callbacks still get every event.
* The published usage, ``DynamoDBLockClient(boto3.resource('dynamodb'))`` with botocore's
  default timeouts, logs no WARNING: the long timeouts are mentioned once, at INFO, with the fix.
* A heartbeat period too short to be kept is refused before anything starts.
* A thread that waits for a lock its own client holds is told so, and how to re-enter it.
* A waiter that meets a published 0.9.x client's lock recommends ``keep_released_rows=False``
  for the rolling upgrade once per client, not once per acquisition.
"""
from __future__ import annotations

import datetime
import logging
from typing import Any, List

import boto3
import pytest

from helpers import FaultInjector, LockClients, ManualClock
from python_dynamodb_lock._common.config import MIN_HEARTBEAT_PERIOD
from python_dynamodb_lock._core.events import Event, Kind
from python_dynamodb_lock._common.observe import RATE_LIMIT_PERIOD, LockEvent, Observer
from python_dynamodb_lock.python_dynamodb_lock import DynamoDBLockClient, DynamoDBLockError

MODULE = 'python_dynamodb_lock.python_dynamodb_lock'
seconds = datetime.timedelta


def records(caplog: pytest.LogCaptureFixture, level: int = logging.WARNING) -> List[logging.LogRecord]:
    return [record for record in caplog.records if record.name == MODULE and record.levelno == level]


# --- rate limit ---------------------------------------------------------------------------------

class Recorded:
    def __init__(self) -> None:
        self.events: List[LockEvent] = []

    def __call__(self, event: LockEvent) -> None:
        self.events.append(event)


def failure(key: str) -> Event:
    return Event(Kind.RENEWAL_FAILED, key, None, {'error': 'throttled'})


def test_one_line_per_kind_per_period_then_the_count_of_those_left_out(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger=MODULE)
    clock = ManualClock()
    metrics = Recorded()
    observer = Observer(lambda callback, lock, code: None, metrics, clock)
    for index in range(1000):
        observer.emit(failure(f'k{index}'))
        observer.emit(Event(Kind.RENEWED, f'k{index}', None, {'version': 'v'}))   # DEBUG: never limited
    lines = records(caplog)
    assert [record.getMessage() for record in lines] == ['Heartbeat of k0 failed, will retry next period: throttled']
    assert len(records(caplog, logging.DEBUG)) == 1000
    assert len(metrics.events) == 2000                        # metrics hear every event

    clock.advance(RATE_LIMIT_PERIOD - 0.001)
    observer.emit(failure('still-inside'))
    assert len(records(caplog)) == 1
    observer.emit(Event(Kind.IN_DANGER, 'k1', None, {'unconfirmed_for': 21.0, 'safe_period': 20.0}))
    assert len(records(caplog)) == 2                          # another kind has its own limit

    clock.advance(0.001)
    observer.emit(failure('after'))
    last = records(caplog)[-1]
    assert last.getMessage() == ('Heartbeat of after failed, will retry next period: throttled '
                                 f'(1000 more like this in the last {RATE_LIMIT_PERIOD:.1f}s not logged)')
    assert last.lock_event == 'renewal_failed' and last.lock_key == 'after'   # type: ignore[attr-defined]
    clock.advance(RATE_LIMIT_PERIOD)
    observer.emit(failure('quiet'))                           # nothing left out since: no count
    assert records(caplog)[-1].getMessage() == 'Heartbeat of quiet failed, will retry next period: throttled'


def test_each_lost_lock_is_logged_whatever_the_limit(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger=MODULE)
    observer = Observer(lambda callback, lock, code: None, None, ManualClock())
    for key in ('a', 'b', 'c'):
        observer.emit(Event(Kind.STOLEN, key, None, {'owner': 'thief'}))
    assert [record.getMessage() for record in records(caplog)] == [
        f'Lock {key} was stolen by thief' for key in ('a', 'b', 'c')]


def test_a_raising_metrics_hook_is_logged_once_per_period(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger=MODULE)
    clock = ManualClock()

    def broken(event: LockEvent) -> None:
        raise RuntimeError('hook bug')

    observer = Observer(lambda callback, lock, code: None, broken, clock)
    for _ in range(50):
        observer.emit(Event(Kind.RENEWED, 'k', None, {'version': 'v'}))
    clock.advance(RATE_LIMIT_PERIOD)
    observer.emit(Event(Kind.RENEWED, 'k', None, {'version': 'v'}))
    errors = records(caplog, logging.ERROR)
    assert [record.getMessage() for record in errors] == [
        'The metrics hook raised on renewed k',
        f'The metrics hook raised on renewed k (49 more like this in the last {RATE_LIMIT_PERIOD:.1f}s not logged)']
    assert all(record.exc_info is not None for record in errors)


def test_a_clients_failing_heartbeats_are_rate_limited_on_its_clock(
        engine: Any, clients: LockClients, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger=MODULE)
    clock: ManualClock = clients.clock
    metrics = Recorded()
    client = clients.make(metrics=metrics, heartbeat_period=seconds(seconds=1), safe_period=seconds(seconds=100),
                          lease_duration=seconds(seconds=300))
    lock = client.acquire_lock('throttled')
    with FaultInjector(engine.resource) as faults:
        faults.fail_calls('UpdateItem', times=None)
        for _ in range(30):
            client.send_heartbeats([lock])
        clock.advance(RATE_LIMIT_PERIOD)
        client.send_heartbeats([lock])
    failed = [record.getMessage() for record in records(caplog) if record.lock_event == 'renewal_failed']  # type: ignore[attr-defined]
    assert len(failed) == 2, failed
    assert failed[1].endswith(f'(29 more like this in the last {RATE_LIMIT_PERIOD:.1f}s not logged)')
    assert sum(event.name == 'renewal_failed' for event in metrics.events) == 31


@pytest.fixture
def moto_table(dynamodb_lock_moto_table: Any) -> Any:
    """A lock table in moto's in-process mock."""
    return dynamodb_lock_moto_table


# --- boto3's default timeouts -------------------------------------------------------------------

def test_the_published_usage_with_botocores_defaults_logs_no_warning(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger='python_dynamodb_lock')
    resource = boto3.resource('dynamodb', region_name='us-east-1', endpoint_url='http://127.0.0.1:9',
                              aws_access_key_id='testing', aws_secret_access_key='testing')
    assert resource.meta.client.meta.config.connect_timeout == 60    # botocore's default, as published usage gets
    client = DynamoDBLockClient(resource, clock=ManualClock())
    client.close()
    assert [record.getMessage() for record in caplog.records if record.levelno >= logging.WARNING] == []
    notes = [record.getMessage() for record in caplog.records if 'can wait' in record.getMessage()]
    assert len(notes) == 1, notes
    assert notes[0].startswith('the boto3 client can wait 60s to connect and 60s for an answer in one attempt, '
                               'longer than safe_period (20.0s)')
    assert 'Config(connect_timeout=1, read_timeout=2' in notes[0]          # the fix
    assert [record.levelno for record in caplog.records if 'can wait' in record.getMessage()] == [logging.INFO]


def test_short_timeouts_are_not_mentioned(moto_table: Any, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger='python_dynamodb_lock')
    client = DynamoDBLockClient(moto_table.resource, table_name=moto_table.table_name, clock=ManualClock())
    client.close()
    assert not [record for record in caplog.records if 'can wait' in record.getMessage()]


# --- absurd heartbeat periods -------------------------------------------------------------------

@pytest.mark.parametrize('period', [seconds(microseconds=1), seconds(milliseconds=9.999)])
def test_a_heartbeat_period_too_short_to_keep_is_refused(moto_table: Any, period: datetime.timedelta) -> None:
    with pytest.raises(ValueError, match=r'heartbeat_period must be at least 10 milliseconds, got .*'
                                         r'each heartbeat is a DynamoDB call that takes milliseconds'):
        DynamoDBLockClient(moto_table.resource, table_name=moto_table.table_name, heartbeat_period=period,
                           clock=ManualClock())


def test_the_shortest_accepted_heartbeat_period(moto_table: Any) -> None:
    client = DynamoDBLockClient(moto_table.resource, table_name=moto_table.table_name,
                                heartbeat_period=seconds(seconds=MIN_HEARTBEAT_PERIOD),
                                safe_period=seconds(seconds=0.05), lease_duration=seconds(seconds=0.1),
                                clock=ManualClock(), background_heartbeats=False)
    client.close()


# --- waiting for a lock of one's own -----------------------------------------------------------

def test_waiting_for_a_lock_this_client_holds_says_so(engine: Any, clients: LockClients) -> None:
    client = clients.make(owner_name='me')
    held = client.acquire_lock('mine')
    with pytest.raises(DynamoDBLockError) as timed_out:
        client.acquire_lock('mine', retry_timeout=seconds(0))
    assert timed_out.value.code == DynamoDBLockError.ACQUIRE_TIMEOUT
    assert 'held by this client (pass reentrant=True' in timed_out.value.message
    assert 'owner_name me' in timed_out.value.message
    assert timed_out.value.holder is not None and timed_out.value.holder.owner_name == 'me'

    other = clients.make(owner_name='other')
    with pytest.raises(DynamoDBLockError) as elsewhere:
        other.acquire_lock('mine', retry_timeout=seconds(0))
    assert elsewhere.value.message.endswith('held by me')
    held.release()


def test_a_lock_this_client_no_longer_holds_is_not_called_its_own(engine: Any, clients: LockClients) -> None:
    """The same owner name in another process (or a row left by an earlier run): the row names
    this owner, but this client holds nothing for the key."""
    client = clients.make(owner_name='shared-name')
    engine.put_lock_row('left-over', owner_name='shared-name', lease_duration=300)
    with pytest.raises(DynamoDBLockError) as timed_out:
        client.acquire_lock('left-over', retry_timeout=seconds(0))
    assert timed_out.value.message.endswith('held by shared-name')


# --- mixed fleets -------------------------------------------------------------------------------

ADVICE = 'Clients of the published 0.9.x package share keys with this client'


@pytest.mark.parametrize('keep_released_rows', [True, False])
def test_the_rolling_upgrade_advice_is_logged_once_per_client(
        engine: Any, clients: LockClients, caplog: pytest.LogCaptureFixture, keep_released_rows: bool) -> None:
    caplog.set_level(logging.DEBUG, logger=MODULE)
    engine.put_lock_row('old-1', owner_name='published-0.9.1', lease_duration=300, fencing_token=None)
    engine.put_lock_row('old-2', owner_name='published-0.9.1', lease_duration=300, fencing_token=None)
    client = clients.make(keep_released_rows=keep_released_rows)
    for key in ('old-1', 'old-2', 'old-1'):
        with pytest.raises(DynamoDBLockError):
            client.acquire_lock(key, retry_timeout=seconds(0))
    advice = [record.getMessage() for record in records(caplog) if record.getMessage().startswith(ADVICE)]
    if not keep_released_rows:       # the setting the advice recommends is already there
        assert advice == []
        return
    assert advice == [
        f"{ADVICE} (published-0.9.1 holds old-1|-): during a rolling upgrade they are starved by this package's "
        'waiters, which take a released row at once, unless keep_released_rows=False is set. Set '
        'keep_released_rows=False on every client of this package until every client is upgraded '
        '(logged once per client)']
    clients.make()
    with pytest.raises(DynamoDBLockError):
        clients.clients[-1].acquire_lock('old-2', retry_timeout=seconds(0))
    assert sum(record.getMessage().startswith(ADVICE) for record in records(caplog)) == 2   # once per client
