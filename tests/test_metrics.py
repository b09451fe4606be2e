"""The ``metrics=`` hook: a :class:`LockEvent`, with timings, for every acquire attempt and
outcome, wait, takeover, renewal, danger, loss and release; and nothing at all (not one
LockEvent built) when no hook is given.

Both clients, on a ManualClock: every duration is fake time, so it is asserted exactly.
"""
from __future__ import annotations

import datetime
import logging
from typing import Any, List, Optional

import pytest
from helpers import BackgroundCall, FaultInjector, LockClients, ManualClock, settle

from python_dynamodb_lock import LockEvent, Reason
import python_dynamodb_lock._common.observe as _observe
from python_dynamodb_lock.python_dynamodb_lock import DynamoDBLock, DynamoDBLockClient, HeldLock
from python_dynamodb_lock.testing import LockTable

seconds = datetime.timedelta


class Events:
    """A metrics hook that keeps what it is given."""

    def __init__(self) -> None:
        self.events: List[LockEvent] = []

    def __call__(self, event: LockEvent) -> None:
        assert isinstance(event, LockEvent)
        self.events.append(event)

    def names(self, key: Optional[str] = None) -> List[str]:
        return [event.name for event in self.events if key is None or event.key == key]

    def named(self, name: str) -> List[LockEvent]:
        return [event for event in self.events if event.name == name]

    def one(self, name: str) -> LockEvent:
        found = self.named(name)
        assert len(found) == 1, (name, self.names())
        return found[0]

    def clear(self) -> None:
        self.events.clear()


@pytest.fixture
def events() -> Events:
    return Events()


def test_an_uncontended_acquire_and_release(engine: LockTable, clients: LockClients, events: Events) -> None:
    client = clients.make(metrics=events)
    lock = client.acquire_lock('job')
    lock.release()
    key = lock.unique_identifier
    assert events.names() == ['acquire_attempt', 'acquired', 'released']
    attempt, acquired, released = events.events
    assert all(event.key == key for event in events.events)
    assert attempt.attributes == {'outcome': 'applied', 'takeover': False}
    assert attempt.duration == 0.0                   # no fake time passed
    assert acquired.duration == 0.0
    assert acquired.attributes['takeover'] is False
    assert acquired.attributes['fencing_token'] == lock.fencing_token
    assert acquired.attributes['version'] == lock.record_version_number
    assert released.attributes['handed_over'] is False and released.duration == 0.0


def test_waiting_and_taking_over_an_abandoned_lock(engine: LockTable, clients: LockClients, events: Events) -> None:
    clock = clients.clock
    dead = engine.put_lock_row('abandoned', lease_duration=10, owner_name='dead-process')
    client = clients.make(metrics=events)
    with clock.auto_advance_in_current_thread():
        lock = client.acquire_lock('abandoned', retry_period=seconds(seconds=3), retry_timeout=seconds(seconds=60))
    names = events.names()
    assert names[0] == 'acquire_attempt' and events.events[0].attributes['outcome'] == 'refused'
    assert names[-3:] == ['taking_over', 'acquire_attempt', 'acquired']
    waits = events.named('waiting')
    assert waits and all(event.attributes['retry_in'] == 3 and event.attributes['owner'] == 'dead-process'
                         for event in waits)
    taking_over = events.one('taking_over')
    assert taking_over.attributes['owner'] == 'dead-process'
    assert taking_over.attributes['version'] == dead['record_version_number']
    assert taking_over.duration == 12                # first seen at 0; unchanged for 10 s, seen at 12
    final_attempt = events.events[-2]
    assert final_attempt.attributes == {'outcome': 'applied', 'takeover': True}
    acquired = events.events[-1]
    assert acquired.attributes['takeover'] is True and acquired.duration == 12
    assert lock.took_over_from is not None and lock.took_over_from.owner_name == 'dead-process'


def test_a_timed_out_acquire(engine: LockTable, clients: LockClients, events: Events) -> None:
    engine.put_lock_row('held', owner_name='alive')
    client = clients.make(metrics=events)
    with clients.clock.auto_advance_in_current_thread():
        with pytest.raises(Exception):
            client.acquire_lock('held', retry_period=seconds(seconds=2), retry_timeout=seconds(seconds=5))
    timed_out = events.one('acquire_timed_out')
    assert timed_out.duration == 5 and timed_out.attributes['owner'] == 'alive'
    assert events.named('acquired') == []


def test_renewals_danger_recovery_and_loss(engine: LockTable, clients: LockClients, events: Events) -> None:
    clock = clients.clock
    client = clients.make(metrics=events)
    lock = client.acquire_lock('kept')
    events.clear()

    client.send_heartbeats()
    renewed = events.one('renewed')
    assert renewed.duration == 0.0 and renewed.attributes['version'] == lock.record_version_number
    events.clear()

    with FaultInjector(engine.resource) as faults:
        faults.fail_calls('UpdateItem', times=None)     # throttled
        client.send_heartbeats()
        failed = events.one('renewal_failed')
        assert failed.attributes['reason'] == Reason.THROTTLED and failed.duration == 0.0
        clock.advance(21)
        client.check_locks()
    danger = events.one('in_danger')
    assert danger.duration == 21 and danger.attributes['safe_period'] == 20
    events.clear()

    client.send_heartbeats()
    assert events.names() == ['recovered', 'renewed']
    events.clear()

    engine.steal_row('kept', owner_name='the-thief')
    client.send_heartbeats()
    stolen = events.one('stolen')
    assert stolen.attributes == {'owner': 'the-thief', 'reason': Reason.TAKEN_OVER}
    assert lock.status == DynamoDBLock.INVALID


def test_a_release_that_meets_a_thief_and_a_force_release(engine: LockTable, clients: LockClients,
                                                          events: Events) -> None:
    operator_events = Events()
    client = clients.make(metrics=events)
    operator = clients.make(owner_name='operator', metrics=operator_events)
    lock = client.acquire_lock('one')
    engine.steal_row('one', owner_name='the-thief')
    lock.release()
    assert events.one('release_stolen').attributes['owner'] == 'the-thief'

    other = client.acquire_lock('two')
    assert operator.force_release_lock(operator.get_lock('two'))
    forced = operator_events.one('force_released')
    assert forced.key == other.unique_identifier
    assert forced.attributes == {'version': other.record_version_number, 'owner': client.owner_name}


def test_a_release_that_hands_the_lock_to_a_waiting_thread(local_engine: LockTable, events: Events) -> None:
    factory = LockClients(local_engine, ManualClock())
    try:
        clock = factory.clock
        client = factory.make(metrics=events)
        lock = client.acquire_lock('queue')
        waiter = BackgroundCall(client.acquire_lock, 'queue', retry_period=seconds(seconds=5),
                                retry_timeout=seconds(seconds=100), name='waiter')
        settle(clock, threads=[waiter.thread])
        clock.advance(2)
        settle(clock, threads=[waiter.thread])
        lock.release()
        taken = waiter.result()
        released = [event for event in events.named('released')]
        assert len(released) == 1 and released[0].attributes['handed_over'] is True
        acquired = events.named('acquired')
        assert acquired[-1].attributes['fencing_token'] == taken.fencing_token
        assert acquired[-1].duration == 2          # the waiter waited 2 fake seconds
        taken.release()
    finally:
        factory.close_all()


def test_events_carry_no_lock_objects_and_are_immutable(engine: LockTable, clients: LockClients,
                                                        events: Events) -> None:
    client = clients.make(metrics=events)
    lock = client.acquire_lock('plain')
    client.send_heartbeats()
    engine.steal_row('plain')
    client.send_heartbeats()
    lock.release()
    assert events.events
    for event in events.events:
        assert isinstance(event.name, str) and isinstance(event.key, str)
        assert event.duration is None or isinstance(event.duration, float)
        assert not any(isinstance(value, (HeldLock, DynamoDBLockClient)) for value in event.attributes.values())
        with pytest.raises(Exception):
            event.name = 'changed'  # type: ignore[misc]


def test_a_failing_hook_is_logged_and_changes_nothing(engine: LockTable, clients: LockClients,
                                                      caplog: pytest.LogCaptureFixture) -> None:
    def broken(event: LockEvent) -> None:
        raise RuntimeError('the metrics backend is down')

    client = clients.make(metrics=broken)
    with caplog.at_level(logging.ERROR):
        lock = client.acquire_lock('robust')
        client.send_heartbeats()
        lock.release()
    assert lock.status == DynamoDBLock.RELEASED
    assert engine.read_held_row('robust') is None
    assert any('The metrics hook raised' in record.getMessage() for record in caplog.records)


def test_a_hook_that_is_not_callable_is_refused(clients: LockClients, engine: LockTable) -> None:
    with pytest.raises(TypeError, match='metrics must be a callable'):
        clients.make(metrics='prometheus')


@pytest.fixture
def built(monkeypatch: pytest.MonkeyPatch) -> List[Any]:
    """Every LockEvent built from now on (the class the observer builds them with, counting)."""
    made: List[Any] = []

    class CountingLockEvent(LockEvent):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            made.append(args)
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(_observe, 'LockEvent', CountingLockEvent)
    return made


def test_without_a_hook_no_event_is_built(engine: LockTable, clients: LockClients, built: List[Any]) -> None:
    clock = clients.clock
    engine.put_lock_row('abandoned', lease_duration=5)
    client = clients.make()
    with clock.auto_advance_in_current_thread():
        lock = client.acquire_lock('abandoned', retry_period=seconds(seconds=1))
    client.send_heartbeats()
    clock.advance(25)
    client.check_locks()
    client.send_heartbeats()
    lock.release()
    assert built == []

    hooked = clients.make(metrics=lambda event: None)
    hooked.acquire_lock('other').release()
    assert len(built) == 3                  # the same counter sees a hook's events


def test_a_hook_sees_the_background_heartbeats(engine: LockTable, clients: LockClients, events: Events) -> None:
    clock = clients.clock
    client = clients.make(metrics=events, hand_driven=False, heartbeat_period=seconds(seconds=5))
    lock = client.acquire_lock('background')
    events.clear()
    for _ in range(3):
        clock.advance(5)
        settle(clock, client)
    renewals = [event for event in events.named('renewed') if event.key == lock.unique_identifier]
    assert len(renewals) >= 2
    assert lock.status == DynamoDBLock.LOCKED
    lock.release()
