"""Client sessions' protocols (python_dynamodb_lock/_core/session.py) and their requests, driven
against moto in-process on a manual clock, as in test_core_shared_steps.py: the session row is
written once and adopted when our own lost write put it there; a renewal confirms every lock
under it; a session ended by a waiter loses every lock under it at once; a failed renewal that
landed is not taken for a loss; a waiter takes a lock over, and ends its session, in one
transaction once the session's version stayed the same for its lease; close() deletes the row
only when no lock is held under it."""
from __future__ import annotations

from typing import Any, List

import pytest

from python_dynamodb_lock._core.acquire import Observations, acquire
from python_dynamodb_lock._core.write import Written
from python_dynamodb_lock._core.answers import Failed
from python_dynamodb_lock._core.events import Kind
from python_dynamodb_lock._core.session import (
    Session,
    SessionSettings,
    end_session,
    ensure_session,
    extend_session,
    session_round,
    watch_session,
)
from python_dynamodb_lock._core.state import LockState, Status
from python_dynamodb_lock import DynamoDBLockError, Reason
from python_dynamodb_lock._wire.sessions import session_end, session_start
from test_core_protocol import FakeClock
from test_core_shared_steps import EXPIRY, LEASE, LOST, Engine, attempt, run, table  # noqa: F401 (table: fixture)


@pytest.fixture
def engine(table: Any) -> Engine:      # noqa: F811 (the fixture of the shared module's table)
    table.delete_row('k')
    return Engine(table)


def settings(engine: Engine) -> SessionSettings:
    return SessionSettings(engine.schema, 'holder', lease=LEASE, row_lease=3600.0, expiry_period=EXPIRY)


def started(engine: Engine, clock: FakeClock) -> Session:
    session = Session('holder')
    result = run(ensure_session(settings(engine), session, clock), engine, clock)
    assert result.result == session.id and result.error is None
    return session


class Lock:
    lock_existing_item = False

    def __init__(self, session: Session, key: str = 'k') -> None:
        self.unique_identifier = f'{key}|-'
        self.partition_key, self.sort_key = key, '-'
        self._state = LockState('v1', 0, 0.0, LEASE)
        self._state.acquired(0.0, 1, 'v1')
        self._state.bind_session(session.id, LEASE, 0.0)


def session_row(engine: Engine, session: Session) -> Any:
    return engine.row(session.id)


def test_the_session_row_is_written_once_with_the_clients_owner_and_lease(engine: Engine) -> None:
    clock = FakeClock()
    session = started(engine, clock)
    assert session.id.startswith('python_dynamodb_lock/session/holder/')
    row = session_row(engine, session)
    assert row['owner_name'] == 'holder' and row['lease_duration'] == LEASE and row['sort_key'] == '-'
    assert row['record_version_number'] == session.version and row['expiry_time'] == int(clock.time() + EXPIRY)
    assert session.confirmed_at == clock.now
    engine.sent.clear()
    assert run(ensure_session(settings(engine), session, clock), engine, clock).result == session.id
    assert engine.sent == []          # written already: nothing sent


def test_a_session_row_our_lost_write_put_there_is_adopted(engine: Engine) -> None:
    clock = FakeClock()
    session = Session('holder')

    def lands_then_refused(store: Any, request: Any) -> Any:
        store.send(request)
        return store.send(request)       # botocore's retry meets our own row: refused, with it
    engine.faults = [lands_then_refused]
    result = run(ensure_session(settings(engine), session, clock), engine, clock)
    assert result.result == session.id and Kind.SESSION_STARTED in result.events
    assert session.version == session_row(engine, session)['record_version_number']


def test_a_session_that_cannot_be_started_is_an_error_naming_it(engine: Engine) -> None:
    clock = FakeClock()
    session = Session('holder')
    engine.faults = [lambda store, request: LOST]
    failed = run(ensure_session(settings(engine), session, clock), engine, clock)
    assert isinstance(failed.error, DynamoDBLockError) and failed.error.code == DynamoDBLockError.UNKNOWN
    assert f'Could not start the lock client session {session.id}: ' in str(failed.error)
    assert failed.error.reason == Reason.UNREACHABLE and session.version is None
    # A row of that id already ended (by a waiter) is not adopted.
    engine.store.send(session_start(engine.schema, session.id, 'holder', LEASE, 'v0', 1))
    engine.store.client.update_item(TableName=engine.schema.table_name, Key={'lock_key': session.id, 'sort_key': '-'},
                                    UpdateExpression='SET released_at = :one', ExpressionAttributeValues={':one': 1})
    ended = run(ensure_session(settings(engine), session, clock), engine, clock)
    assert 'its row was ended meanwhile' in str(ended.error) and ended.error.reason == Reason.OTHER


def test_a_renewal_confirms_every_lock_under_the_session(engine: Engine) -> None:
    clock = FakeClock()
    session = started(engine, clock)
    first_version = session.version
    under, other = Lock(session), Lock(Session('another'), 'other')
    under._state.status = other._state.status = Status.IN_DANGER
    clock.now += 10.0
    result = run(session_round(settings(engine), session, [under, other], clock), engine, clock)
    assert result.result is None
    row = session_row(engine, session)
    assert row['record_version_number'] == session.version != first_version
    assert row['expiry_time'] == int(clock.time() + EXPIRY) and session.confirmed_at == clock.now
    assert under._state.status == Status.LOCKED and under._state.last_confirmed == clock.now
    assert other._state.status == Status.IN_DANGER
    assert result.events == [Kind.SESSION_RENEWED, Kind.RECOVERED]


def test_no_renewal_is_sent_before_the_session_is_started(engine: Engine) -> None:
    clock = FakeClock()
    result = run(session_round(settings(engine), Session('holder'), [], clock), engine, clock)
    assert result.result is None and engine.sent == []


@pytest.mark.parametrize('ended_by', ['a waiter', 'nobody'])
def test_a_session_ended_by_a_waiter_or_gone_loses_every_lock_under_it_at_once(engine: Engine, ended_by: str) -> None:
    clock = FakeClock()
    session = started(engine, clock)
    old_id = session.id
    locks = [Lock(session), Lock(session, 'other')]
    locks[1]._state.forget(Status.RELEASED)        # released already: not lost again
    if ended_by == 'a waiter':
        engine.store.client.update_item(TableName=engine.schema.table_name, Key={'lock_key': old_id, 'sort_key': '-'},
                                        UpdateExpression='SET record_version_number = :v, released_at = :one',
                                        ExpressionAttributeValues={':v': 'ended', ':one': 1})
    else:
        engine.store.send(session_end(engine.schema, old_id, [session.version]))
    result = run(session_round(settings(engine), session, locks, clock), engine, clock)
    assert locks[0]._state.status == Status.INVALID and locks[0]._state.loss.reason == Reason.SESSION_LOST
    assert locks[1]._state.status == Status.RELEASED
    assert result.events == [Kind.SESSION_LOST, Kind.STOLEN] and result.unregistered == [locks[0]]
    assert session.id != old_id and session.version is None        # the next acquisition starts afresh
    assert session.id.startswith('python_dynamodb_lock/session/holder/')


def test_a_failed_renewal_changes_nothing_and_one_that_landed_is_not_taken_for_a_loss(engine: Engine) -> None:
    clock = FakeClock()
    session = started(engine, clock)
    lock = Lock(session)

    def lands_unanswered(store: Any, request: Any) -> Any:
        store.send(request)
        return LOST
    engine.faults = [lands_unanswered]
    failed = run(session_round(settings(engine), session, [lock], clock), engine, clock)
    assert isinstance(failed.result, Failed) and failed.events == [Kind.SESSION_RENEWAL_FAILED]
    assert lock._state.status == Status.LOCKED and session.unconfirmed
    landed = session_row(engine, session)['record_version_number']
    assert session.unconfirmed[-1] == landed
    # The next renewal expects the confirmed version or the one that may have landed: it goes through.
    again = run(session_round(settings(engine), session, [lock], clock), engine, clock)
    assert again.result is None and lock._state.status == Status.LOCKED and again.events == [Kind.SESSION_RENEWED]
    assert session.version == session_row(engine, session)['record_version_number'] != landed
    assert session.unconfirmed == []


def test_extend_renews_the_session_now_and_raises_when_the_lock_was_not_renewed(engine: Engine) -> None:
    clock = FakeClock()
    session = started(engine, clock)
    lock = Lock(session)
    before = session.version
    run(extend_session(settings(engine), session, [lock], lock, clock), engine, clock)
    assert session.version != before
    engine.faults = [lambda store, request: LOST]
    failed = run(extend_session(settings(engine), session, [lock], lock, clock), engine, clock)
    assert isinstance(failed.error, DynamoDBLockError)
    lock._state.forget(Status.RELEASED)
    gone = run(extend_session(settings(engine), session, [lock], lock, clock), engine, clock)
    assert isinstance(gone.error, DynamoDBLockError)


def test_close_deletes_the_session_row_only_when_no_lock_is_held_under_it(engine: Engine) -> None:
    clock = FakeClock()
    session = started(engine, clock)
    lock = Lock(session)
    kept = run(end_session(settings(engine), session, [lock]), engine, clock)
    assert kept.events == [] and session_row(engine, session) is not None
    lock._state.forget(Status.RELEASED)
    old_id = session.id
    ended = run(end_session(settings(engine), session, [lock]), engine, clock)
    assert ended.events == [Kind.SESSION_ENDED] and engine.row(old_id) is None
    assert session.id != old_id
    engine.sent.clear()
    assert run(end_session(settings(engine), session, []), engine, clock).events == [] and engine.sent == []


def test_a_failed_end_of_the_session_is_reported(engine: Engine) -> None:
    clock = FakeClock()
    session = started(engine, clock)
    engine.faults = [lambda store, request: LOST]
    ended = run(end_session(settings(engine), session, []), engine, clock)
    assert ended.events == [Kind.SESSION_RENEWAL_FAILED]


def test_a_waiter_judges_a_session_live_expired_or_over(engine: Engine) -> None:
    clock = FakeClock()
    session = started(engine, clock)
    seen = Observations()
    watch = run(watch_session(engine.schema, session.id, seen, clock, LEASE), engine, clock).result
    assert watch.session_id == session.id and not watch.over and watch.expired_version is None
    clock.now += LEASE - 0.1
    assert run(watch_session(engine.schema, session.id, seen, clock, LEASE), engine, clock).result.expired_version \
        is None
    clock.now += 0.1
    expired = run(watch_session(engine.schema, session.id, seen, clock, LEASE), engine, clock).result
    assert expired.expired_version == session.version and not expired.over
    gone = run(watch_session(engine.schema, 'python_dynamodb_lock/session/x/1', seen, clock, LEASE), engine, clock)
    assert gone.result.over
    engine.faults = [lambda store, request: LOST]
    failed = run(watch_session(engine.schema, session.id, seen, clock, LEASE), engine, clock)
    assert isinstance(failed.error, DynamoDBLockError) and failed.error.reason == Reason.UNREACHABLE
    assert f'Could not read the session {session.id} of the lock in the way: ' in str(failed.error)


def test_a_waiter_takes_a_lock_over_and_ends_its_session_in_one_transaction(engine: Engine) -> None:
    clock = FakeClock()
    session = started(engine, clock)
    held = run(acquire(attempt(engine, 'k', 'holder', shared=False, lease=3600.0,
                               attributes={'lock_session': session.id}), clock, lambda: False), engine, clock).result
    assert isinstance(held, Written)
    watched = session.version
    engine.sent.clear()
    started_at = clock.now
    taken = run(acquire(attempt(engine, 'k', 'waiter', shared=False, sessions=True), clock, lambda: False),
                engine, clock)
    assert isinstance(taken.result, Written) and taken.result.replaced['owner_name'] == 'holder'
    assert LEASE <= clock.now - started_at < LEASE + 5.0        # the session lease, not the lock row's hour
    assert 'transact_write_items' in engine.operations()
    (taking_over,) = [event for event in taken.emitted if event.kind is Kind.TAKING_OVER]
    assert taking_over.key == 'k|-' and taking_over.fields == {
        'owner': 'holder', 'version': held.item['record_version_number'], 'session': session.id,
        'unchanged_for': clock.now - started_at, 'duration': clock.now - started_at}
    row = engine.row('k')
    assert taken.result.item['fencing_token'] == row['fencing_token'] == held.item['fencing_token'] + 1
    assert row['owner_name'] == 'waiter' and 'lock_session' not in row
    ended = session_row(engine, session)
    assert ended['released_at'] == int(clock.time()) and ended['lease_duration'] == 0
    assert ended['record_version_number'] not in (watched, None)       # a new version: watchers see the change
    # The holder's next renewal finds its session ended: it loses every lock under it.
    lock = Lock(session)
    lost = run(session_round(settings(engine), session, [lock], clock), engine, clock)
    assert lost.events[0] == Kind.SESSION_LOST and lock._state.status == Status.INVALID


def test_a_session_renewed_meanwhile_keeps_its_lock(engine: Engine) -> None:
    clock = FakeClock()
    session = started(engine, clock)
    run(acquire(attempt(engine, 'k', 'holder', shared=False, lease=3600.0, attributes={'lock_session': session.id}),
                clock, lambda: False), engine, clock)
    renewals: List[Any] = []

    def the_holder_renews() -> None:
        renewals.append(run(session_round(settings(engine), session, [], clock), engine, clock).events)
    waited = run(acquire(attempt(engine, 'k', 'waiter', shared=False, sessions=True, retry_timeout=2 * LEASE), clock,
                         lambda: False), engine, clock, on_sleep=the_holder_renews)
    assert waited.result.blocking['owner_name'] == 'holder' and Kind.TAKING_OVER not in waited.events
    assert len(renewals) >= 2 * LEASE / 5.0 - 1
    assert all(events == [Kind.SESSION_RENEWED] for events in renewals)
