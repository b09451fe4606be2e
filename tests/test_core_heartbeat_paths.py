"""Heartbeats, path by path (python_dynamodb_lock/_core/heartbeat.py), with scripted answers or
against moto in-process on a manual clock.

What a user relies on: ``lock.extend()`` returns once the row carries the new version and
otherwise raises the error a caller can act on (``LOCK_STOLEN`` naming the holder now,
``LOCK_NOT_OWNED`` after a release, ``UNKNOWN`` with DynamoDB's failure as its cause and the
advice to retry within the lease); ``update_attributes`` changes the lock's attributes only once
the write is known to have landed; a renewal refused by a transaction in progress is sent again
after 50 and 100 ms; the paced round spreads heartbeats over the period and says when it overran
or skipped locks; the background loop survives a failing round; the checker flags a lock not
confirmed for its safe period. The events' fields are what a metrics hook reads. (Rounds,
the loop, the checker and batches: test_core_a_heartbeat_rounds.py.)
"""
from __future__ import annotations

import dataclasses
from decimal import Decimal
from typing import Any, Callable, Dict, List, Optional

import pytest

from python_dynamodb_lock._core.answers import Applied, Failed, Refused
from python_dynamodb_lock._core.effects import Call, Emit, Sleep, Submit, Unregister
from python_dynamodb_lock._core.events import Event, Kind
from python_dynamodb_lock._core.heartbeat import (
    HeartbeatSettings,
    check_locks,
    extend,
    not_extended,
    renew_one,
    send_renewal,
    update_attributes,
)
from python_dynamodb_lock._core.state import LockState, Loss, Status
from python_dynamodb_lock._wire.requests import get
from python_dynamodb_lock._model.errors import DynamoDBLockError, Reason
from python_dynamodb_lock._model.schema import Schema
from test_core_requests_shapes import fresh_request_shapes  # noqa: F401 - autouse: shapes built afresh
from test_core_protocol import LOST_ANSWER, SCHEMA, THROTTLED, FakeClock, client_error, row
import test_core_shared_steps
from test_core_shared_steps import Engine, take

LEASE = 30.0
SETTINGS = HeartbeatSettings(SCHEMA, 5.0, 20.0, 3600.0, -1, 1)
CONFLICT = Failed(client_error('TransactionConflictException', 400), False, Reason.OTHER,
                  'TransactionConflictException')


@dataclasses.dataclass
class Lock:
    _state: LockState
    partition_key: str = 'k'
    sort_key: str = '-'
    unique_identifier: str = 'k|-'
    additional_attributes: Dict[str, Any] = dataclasses.field(default_factory=dict)
    shared: bool = False
    lock_existing_item: bool = False


def held(version: str = 'v1', clock: Optional[FakeClock] = None, **options: Any) -> Lock:
    clock = clock or FakeClock()
    state = LockState(version, 0, clock.monotonic(), LEASE)
    state.acquired(clock.monotonic(), 1, 'acq')
    return Lock(state, **options)


@dataclasses.dataclass
class Driven:
    calls: List[Any] = dataclasses.field(default_factory=list)
    events: List[Event] = dataclasses.field(default_factory=list)
    sleeps: List[float] = dataclasses.field(default_factory=list)
    submitted: List[Any] = dataclasses.field(default_factory=list)
    unregistered: List[Any] = dataclasses.field(default_factory=list)
    result: Any = None
    error: Optional[BaseException] = None

    def kinds(self) -> List[Kind]:
        return [event.kind for event in self.events]

    def event(self, kind: Kind) -> Event:
        (found,) = [event for event in self.events if event.kind is kind]
        return found


def drive(protocol: Any, answer: Callable[[Any], Any] = lambda request: Applied(), clock: Optional[FakeClock] = None,
          woken: Callable[[], bool] = lambda: False, skipped: int = 0, step: float = 0.0) -> Driven:
    """Run ``protocol``: calls answered by ``answer``, sleeps advance ``clock``, each Submit
    answers ``skipped`` and takes ``step`` seconds of the clock."""
    driven = Driven()
    value: Any = None
    while True:
        try:
            effect = protocol.send(value)
        except StopIteration as done:
            driven.result = done.value
            return driven
        except DynamoDBLockError as error:
            driven.error = error
            return driven
        value = None
        if isinstance(effect, Call):
            driven.calls.append(effect.request)
            value = answer(effect.request)
        elif isinstance(effect, Emit):
            driven.events.append(effect.event)
        elif isinstance(effect, Sleep):
            driven.sleeps.append(effect.seconds)
            if clock is not None:
                clock.now += effect.seconds
            value = woken()
        elif isinstance(effect, Submit):
            driven.submitted.append(effect.locks)
            if clock is not None:
                clock.now += step
            value = skipped
        elif isinstance(effect, Unregister):
            driven.unregistered.append(effect.lock)
        else:
            raise AssertionError(f'unexpected effect {effect!r}')


def answers(*scripted: Any) -> Callable[[Any], Any]:
    queue = list(scripted)
    return lambda request: queue.pop(0)


# -- extend() against a table ----------------------------------------------------------------------

# The moto table of the module and the engine on it, made as test_core_shared_steps makes them (one
# table a module: creating one takes longer than a test).
table, engine = test_core_shared_steps.table, test_core_shared_steps.engine


def table_settings(engine: Engine) -> HeartbeatSettings:
    return HeartbeatSettings(engine.schema, 5.0, 20.0, 3600.0, -1, 1)


def test_extend_renews_the_row_and_the_lease_is_counted_from_before_the_write(engine: Engine) -> None:
    clock = FakeClock()
    item = take(engine, clock, 'k', 'me', shared=False).result.item
    lock = held(item['record_version_number'], clock)
    clock.now += 10
    driven = drive(extend(table_settings(engine), lock, clock), engine.send, clock)
    assert driven.error is None
    row_now = engine.row('k')
    assert row_now['record_version_number'] == lock._state.version != item['record_version_number']
    assert row_now['expiry_time'] == int(clock.time() + 3600.0)
    assert lock._state.last_confirmed == clock.monotonic()
    renewed = driven.event(Kind.RENEWED)
    assert renewed.key == 'k|-' and renewed.lock is lock and renewed['version'] == lock._state.version
    assert renewed['duration'] == 0


def test_extend_of_a_lock_taken_over_raises_lock_stolen_naming_the_holder_now(engine: Engine) -> None:
    clock = FakeClock()
    item = take(engine, clock, 'k', 'me', shared=False).result.item
    lock = held(item['record_version_number'], clock)
    clock.now += LEASE + 1
    take(engine, clock, 'k', 'thief', shared=False, retry_timeout=2 * LEASE)
    driven = drive(extend(table_settings(engine), lock, clock), engine.send, clock)
    error = driven.error
    assert isinstance(error, DynamoDBLockError) and error.code == DynamoDBLockError.LOCK_STOLEN
    assert error.message == f'k|- was lost ({Reason.TAKEN_OVER}): held by thief now'
    assert error.reason == Reason.TAKEN_OVER and error.holder['owner_name'] == 'thief'
    assert lock._state.status == Status.INVALID and driven.unregistered == [lock]
    stolen = driven.event(Kind.STOLEN)
    assert stolen['owner'] == 'thief' and stolen['reason'] == Reason.TAKEN_OVER and stolen.lock is lock


def test_extend_of_a_row_gone_raises_lock_stolen_saying_so(engine: Engine) -> None:
    lock = held('v1')
    driven = drive(extend(table_settings(engine), lock, FakeClock()), engine.send)
    error = driven.error
    assert isinstance(error, DynamoDBLockError) and error.code == DynamoDBLockError.LOCK_STOLEN
    assert error.reason == Reason.ROW_GONE and error.holder is None
    stolen = driven.event(Kind.STOLEN)
    assert stolen.fields == {'owner': Schema.owner_of(None), 'reason': Reason.ROW_GONE,
                             'how': 'its row was deleted by someone else (a force release, a TTL expiry or '
                                    'another program)'}


def test_extend_of_a_released_lock_raises_not_owned_and_sends_nothing() -> None:
    lock = held()
    lock._state.forget(Status.RELEASED)
    driven = drive(extend(SETTINGS, lock, FakeClock()))
    assert driven.calls == [] and driven.error.code == DynamoDBLockError.LOCK_NOT_OWNED
    assert driven.error.message == f'k|- is not held ({Status.RELEASED}): nothing to renew'


def test_extend_that_dynamodb_failed_raises_unknown_with_the_cause_and_keeps_the_lock() -> None:
    lock = held()
    driven = drive(extend(SETTINGS, lock, FakeClock()), answers(THROTTLED))
    error = driven.error
    assert error.code == DynamoDBLockError.UNKNOWN and error.reason == Reason.THROTTLED
    assert error.__cause__ is THROTTLED.error
    assert error.message.startswith('Could not renew k|-: ')
    assert error.message.endswith('; the lock may still be held until its lease runs out')
    assert lock._state.status == Status.LOCKED
    failed = driven.event(Kind.RENEWAL_FAILED)
    assert failed.lock is lock and failed.key == 'k|-'
    assert failed['reason'] == Reason.THROTTLED and failed['duration'] == 0 and 'scripted' in failed['error']


def test_extend_refused_by_an_earlier_renewal_of_ours_adopts_it_and_returns() -> None:
    lock = held()
    lock._state.remember_unconfirmed('u1')
    driven = drive(extend(SETTINGS, lock, FakeClock()), answers(Refused(row('u1', 'me'))))
    assert driven.error is None and lock._state.version == 'u1'
    assert driven.kinds() == [Kind.RENEWAL_ADOPTED_EARLIER]
    assert driven.events[0].key == 'k|-' and driven.events[0].lock is lock


def test_extend_whose_answer_was_lost_but_landed_returns() -> None:
    lock = held()
    driven = drive(extend(SETTINGS, lock, FakeClock()),
                   lambda request: Refused(row(request.params['ExpressionAttributeValues'][':new_version'], 'me')))
    assert driven.error is None
    assert driven.kinds() == [Kind.RENEWAL_LANDED_UNANSWERED, Kind.RENEWED]
    assert all(event.key == 'k|-' and event.lock is lock for event in driven.events)


# -- update_attributes ----------------------------------------------------------------------------

def test_update_attributes_changes_the_locks_attributes_once_the_write_landed() -> None:
    lock = held(additional_attributes={'stage': 1, 'kept': 'k'})
    update = ((('progress', 40),), ('stage',))
    driven = drive(update_attributes(SETTINGS, lock, FakeClock(), update))
    assert driven.error is None and lock.additional_attributes == {'kept': 'k', 'progress': 40}
    values = driven.calls[0].params['ExpressionAttributeValues']
    assert values[':d0'] == 40


def test_update_attributes_that_failed_keeps_the_old_attributes_and_says_what_failed() -> None:
    lock = held(additional_attributes={'stage': 1})
    driven = drive(update_attributes(SETTINGS, lock, FakeClock(), ((('stage', 2),), ())), answers(THROTTLED))
    assert lock.additional_attributes == {'stage': 1}
    assert driven.error.message.startswith('Could not update the attributes of k|-: ')


def test_update_attributes_refused_by_earlier_renewals_each_time_gives_up_after_three_sends() -> None:
    lock = held(additional_attributes={'stage': 1})
    sent: List[int] = []

    def refusals(request: Any) -> Any:     # each time, a renewal of ours sent meanwhile landed unanswered
        sent.append(1)
        lock._state.remember_unconfirmed(f'u{len(sent)}')
        return Refused(row(f'u{len(sent)}', 'me'))

    driven = drive(update_attributes(SETTINGS, lock, FakeClock(), ((('stage', 2),), ())), refusals)
    assert len(driven.calls) == 3 and lock.additional_attributes == {'stage': 1}
    assert driven.error.code == DynamoDBLockError.UNKNOWN
    assert driven.error.message == ('Could not update the attributes of k|-: earlier renewals of it kept '
                                    'landing unanswered; the lock is still held: try again')


def test_update_attributes_refused_once_by_an_earlier_renewal_is_sent_again_and_lands() -> None:
    lock = held(additional_attributes={'stage': 1})
    lock._state.remember_unconfirmed('u1')
    driven = drive(update_attributes(SETTINGS, lock, FakeClock(), ((('stage', 2),), ())),
                   answers(Refused(row('u1', 'me')), Applied()))
    assert len(driven.calls) == 2 and driven.error is None and lock.additional_attributes == {'stage': 2}
    second = driven.calls[1].params['ExpressionAttributeValues']
    assert [value for name, value in second.items() if name.startswith(':expected')] == ['u1']


def test_not_extended_words() -> None:
    lock = held()
    lock._state.forget(Status.INVALID, Loss(Reason.TAKEN_OVER, row('v9', 'other')))
    error = not_extended(SCHEMA, lock, None, 'update the attributes of')
    assert error.code == DynamoDBLockError.LOCK_STOLEN and error.holder['owner_name'] == 'other'
    assert error.message == f'k|- was lost ({Reason.TAKEN_OVER}): held by other now'
    failed = not_extended(SCHEMA, held(), THROTTLED)        # a session's renewal asked for (extend under a session)
    assert failed.message.startswith('Could not renew k|-: ') and failed.code == DynamoDBLockError.UNKNOWN
    lock._state.loss = None
    unknown = not_extended(SCHEMA, lock, None)
    assert unknown.code == DynamoDBLockError.LOCK_STOLEN and unknown.reason == Reason.ROW_GONE


# -- a renewal refused by a transaction in progress --------------------------------------------------

def send(*scripted: Any, woken: bool = False) -> Driven:
    clock = FakeClock()
    request = get(SCHEMA, 'k', '-')
    return drive(send_renewal(request, clock, lambda: None), answers(*scripted), clock, woken=lambda: woken)


def test_a_renewal_met_by_a_transaction_is_sent_again_after_50_then_100_ms() -> None:
    driven = send(CONFLICT, CONFLICT, Applied())
    assert len(driven.calls) == 3 and driven.sleeps == [0.05, 0.1]
    answer, started = driven.result
    assert isinstance(answer, Applied) and started == FakeClock().now + 0.15    # the last attempt's start


def test_a_renewal_met_by_transactions_three_times_is_a_failure() -> None:
    driven = send(CONFLICT, CONFLICT, CONFLICT, Applied())
    assert len(driven.calls) == 3 and driven.result[0] is CONFLICT
    assert driven.sleeps == [0.05, 0.1]       # no wait after the last attempt


def test_a_conflict_that_may_have_landed_and_other_failures_are_not_sent_again() -> None:
    maybe = Failed(CONFLICT.error, True, Reason.OTHER, 'TransactionConflictException')
    for failure in (maybe, THROTTLED, LOST_ANSWER):
        driven = send(failure, Applied())
        assert len(driven.calls) == 1 and driven.sleeps == [] and driven.result[0] is failure


def test_closing_stops_the_conflict_retries() -> None:
    driven = send(CONFLICT, Applied(), woken=True)
    assert len(driven.calls) == 1 and driven.result[0] is CONFLICT


def test_an_interrupted_renewal_is_remembered_as_possibly_landed() -> None:
    lock = held()
    protocol = renew_one(SETTINGS, lock, FakeClock())
    call = protocol.send(None)
    sent = call.request.params['ExpressionAttributeValues'][':new_version']
    with pytest.raises(KeyboardInterrupt):
        protocol.throw(KeyboardInterrupt())
    assert lock._state.is_unconfirmed(sent)


def test_a_stolen_event_says_how_the_row_changed_hands() -> None:
    lock = held()
    released_then_taken = row('v9', 'thief')
    driven = drive(renew_one(SETTINGS, lock, FakeClock()), answers(Refused(released_then_taken)))
    stolen = driven.event(Kind.STOLEN)
    assert stolen.fields == {'owner': 'thief', 'reason': Reason.TAKEN_OVER}     # taken over: no "how"
    assert driven.unregistered == [lock]
    forced = held()
    released = drive(renew_one(SETTINGS, forced, FakeClock()), answers(Refused(row('v9', 'me') | {'released_at': 1})))
    assert released.event(Kind.STOLEN).fields == {
        'owner': 'nobody', 'reason': Reason.ROW_GONE,
        'how': ("force-released by someone else (an operator's force_release_lock or `dynamodb-lock release "
                '--force`): its row was marked released')}


def test_renewal_events_carry_the_version_and_the_latency() -> None:
    clock = FakeClock()
    lock = held(clock=clock)

    def slow(request: Any) -> Any:
        clock.now += 0.75
        return Applied()

    driven = drive(renew_one(SETTINGS, lock, clock), slow)
    renewed = driven.event(Kind.RENEWED)
    assert renewed.fields == {'version': lock._state.version, 'duration': 0.75}
    assert renewed.key == 'k|-'


def test_a_renewal_of_a_lock_on_an_item_writes_no_ttl() -> None:
    lock = held()
    lock.lock_existing_item = True
    driven = drive(renew_one(SETTINGS, lock, FakeClock()))
    assert ':new_expiry_time' not in driven.calls[0].params['ExpressionAttributeValues']
    plain = drive(renew_one(SETTINGS, held(), FakeClock()))
    values = plain.calls[0].params['ExpressionAttributeValues']
    assert values[':new_expiry_time'] == int(FakeClock().time() + 3600.0)
    assert values[':new_lease_expiry'] == Decimal(str(FakeClock().time() + LEASE)).quantize(
        values[':new_lease_expiry'])


# -- a shared holder's heartbeat ----------------------------------------------------------------

def test_a_readers_heartbeat_renews_its_own_entry_and_a_lost_entry_is_stolen(engine: Engine) -> None:
    from test_core_shared_steps import holders
    clock = FakeClock()
    first = take(engine, clock, 'k', 'reader-1').result.item
    second = take(engine, clock, 'k', 'reader-2').result.item
    state = LockState(first['record_version_number'], 0, clock.monotonic(), LEASE)
    state.acquired(clock.monotonic(), None, first['acquisition_id'])
    reader = Lock(state, shared=True)
    row_version = engine.row('k')['record_version_number']
    driven = drive(renew_one(table_settings(engine), reader, clock), engine.send, clock)
    assert driven.result.verdict.value == 'renewed'
    row_now = engine.row('k')
    assert holders(row_now) == {'reader-1': state.version, 'reader-2': second['record_version_number']}
    assert state.version != first['record_version_number'] and row_now['record_version_number'] != row_version

    def retried_into_itself(store: Any, request: Any) -> Any:     # landed; botocore's retry met it
        store.send(request)
        return Refused(engine.row('k'), retried=True)

    engine.faults = [retried_into_itself]
    landed = drive(renew_one(table_settings(engine), reader, clock), engine.send, clock)
    assert landed.result.verdict.value == 'landed-unanswered' and state.status == Status.LOCKED
    assert holders(engine.row('k'))['reader-1'] == state.version
    state.version = 'not-the-entrys'       # as if its entry had been taken over meanwhile
    lost = drive(renew_one(table_settings(engine), reader, clock), engine.send, clock)
    assert lost.result.verdict.value == 'stolen' and state.status == Status.INVALID
    assert lost.unregistered == [reader]


def test_a_renewal_retried_after_a_conflict_counts_the_lease_from_before_the_first_attempt() -> None:
    clock = FakeClock()
    lock = held(clock=clock)
    clock.now += 2.0
    prepared = clock.monotonic()
    driven = drive(renew_one(SETTINGS, lock, clock), answers(CONFLICT, Applied()), clock)
    assert driven.sleeps == [0.05] and lock._state.last_confirmed == prepared
    assert driven.event(Kind.RENEWED)['duration'] == 0.0      # the latency of the attempt that landed


def test_a_lock_in_danger_renewed_again_is_said_to_have_recovered() -> None:
    clock = FakeClock()
    lock = held(clock=clock)
    clock.now += 25.0
    drive(check_locks(SETTINGS, [lock], clock))
    assert lock._state.status == Status.IN_DANGER
    driven = drive(renew_one(SETTINGS, lock, clock))
    assert driven.kinds() == [Kind.RECOVERED, Kind.RENEWED] and lock._state.status == Status.LOCKED
    assert all(event.key == 'k|-' and event.lock is lock for event in driven.events)


def test_a_renewal_meeting_the_next_holder_after_our_lost_release_says_the_release_landed() -> None:
    lock = held()
    lock._state.note_release_maybe_applied()
    driven = drive(renew_one(SETTINGS, lock, FakeClock()), answers(Refused(row('v-next', 'next'))))
    (event,) = driven.events
    assert event.kind is Kind.RELEASED_BY_LOST_ANSWER and event.key == 'k|-' and event.lock is lock
    assert driven.unregistered == [lock] and lock._state.status == Status.RELEASED


def test_update_attributes_sets_and_removes_them_on_the_row(engine: Engine) -> None:
    clock = FakeClock()
    item = take(engine, clock, 'k', 'me', shared=False, attributes={'stage': 1, 'kept': 'k'}).result.item
    lock = held(item['record_version_number'], clock, additional_attributes={'stage': 1, 'kept': 'k'})
    driven = drive(update_attributes(table_settings(engine), lock, clock, ((('progress', 40),), ('stage',))),
                   engine.send, clock)
    assert driven.error is None
    row_now = engine.row('k')
    assert row_now['progress'] == 40 and 'stage' not in row_now and row_now['kept'] == 'k'
    assert row_now['record_version_number'] == lock._state.version
