"""The errors a user reads and the events a metrics hook reads, of guarded writes
(python_dynamodb_lock/_core/guard.py) and client sessions (_core/session.py).

A guarded write that cannot be sent is refused before anything is sent, with a message that says
what is wrong and what is accepted; one that is sent carries the lock check as its last action;
the errors of a lost lock, a released lock, a failed or unknown transaction read as documented.
A session's events name the session and carry the fields docs/metrics.rst lists. Driven against
moto in-process on a manual clock where DynamoDB's answers matter (as test_core_guard_steps.py
and test_core_session_steps.py), as plain function calls otherwise.
"""
from __future__ import annotations

from typing import Any, Dict, List

import pytest
from botocore.exceptions import ClientError

from python_dynamodb_lock._core.answers import Failed, judge_error
from python_dynamodb_lock._core.events import Kind
from python_dynamodb_lock._core.guard import (GUARD_ATTEMPTS, MAX_TRANSACTION_BYTES, check_actions, guarded_write,
                                              reasons_of, single_action, size_of)
from python_dynamodb_lock._core.messages import explain
from python_dynamodb_lock._core.session import (
    Session,
    SessionSettings,
    end_session,
    ensure_session,
    session_round,
    watch_session,
)
from python_dynamodb_lock._core.state import LockState, Status
from python_dynamodb_lock._model.schema import Schema
from python_dynamodb_lock import DynamoDBLockError, Reason
from test_core_guard_steps import hold, put, steal
from test_core_protocol import FakeClock
from test_core_shared_steps import EXPIRY, LEASE, LOST, Engine, run, table  # noqa: F401 (table: fixture)

SCHEMA = Schema('locks', 'lock_key', 'sort_key', 'expiry_time')


@pytest.fixture
def engine(table: Any) -> Engine:      # noqa: F811 (the fixture of the shared module's table)
    for key in ('k', 'other', 'data'):
        table.delete_row(key)
    return Engine(table)


def events_of(result: Any, kind: Kind) -> List[Any]:
    return [event for event in result.emitted if event.kind == kind]


# --- check_actions: refused before anything is sent, saying what is accepted ----------------------

def refusal(actions: Any, **options: Any) -> str:
    with pytest.raises((TypeError, ValueError)) as refused:
        check_actions(SCHEMA, 'k', '-', actions, **options)
    return str(refused.value)


def data_put(**extra: Any) -> Dict[str, Any]:
    return {'Put': {'TableName': 'data', 'Item': {'id': 'x'}, **extra}}


@pytest.mark.parametrize('actions, message', [
    ('Put', 'TransactItems must be a list of actions, not str'),
    (b'Put', 'TransactItems must be a list of actions, not bytes'),
    ({'Put': {}}, 'TransactItems must be a list of actions, not dict'),
    (7, 'TransactItems must be a list of actions, not int'),
    ([], 'TransactItems must hold at least one action'),
    ([data_put(), 'Put'],
     "TransactItems[1] must be a dict with one key of ['Put', 'Update', 'Delete', 'ConditionCheck'], got 'Put'"),
    ([{'Put': {}, 'Update': {}}], "TransactItems[0] must be a dict with one key of ['Put', 'Update', 'Delete', "
                                  "'ConditionCheck'], got {'Put': {}, 'Update': {}}"),
    ([{'Upsert': {}}], "TransactItems[0] must be a dict with one key of ['Put', 'Update', 'Delete', "
                       "'ConditionCheck'], got {'Upsert': {}}"),
    ([{'Update': {'Key': {'id': 'x'}}}], "TransactItems[0]['Update'] must be a dict with a TableName"),
    ([{'Update': 'data'}], "TransactItems[0]['Update'] must be a dict with a TableName"),
    ([{'Delete': {'TableName': 7, 'Key': {'id': 'x'}}}], "TransactItems[0]['Delete'] must be a dict with a TableName"),
    ([{'Delete': {'TableName': 'data', 'Key': {'id': 'x'}, 'ReturnValues': 'ALL_OLD'}}],
     "TransactItems[0]['Delete']: transactions return no values (ReturnValues)"),
    ([{'Put': {'TableName': 'data', 'Key': {'id': 'x'}}}], "TransactItems[0]['Put'] must have an Item"),
    ([{'Update': {'TableName': 'data', 'Item': {'id': 'x'}}}], "TransactItems[0]['Update'] must have a Key"),
    ([{'ConditionCheck': {'TableName': 'data'}}], "TransactItems[0]['ConditionCheck'] must have a Key"),
    ([data_put(), {'Update': {'TableName': 'locks', 'Key': {'lock_key': 'k', 'sort_key': '-'}}}],
     'TransactItems[1] writes the lock row itself, which the guard checks; keep data on the lock in '
     'additional_attributes, or in another item'),
    ([{'Put': {'TableName': 'locks', 'Item': {'lock_key': 'k', 'sort_key': '-', 'data': 1}}}],
     'TransactItems[0] writes the lock row itself, which the guard checks; keep data on the lock in '
     'additional_attributes, or in another item'),
    ([data_put()] * 100, 'a guarded write holds at most 99 actions (DynamoDB allows 100 per transaction and the lock '
                         'check is one), got 100'),
])
def test_a_guarded_write_that_cannot_be_sent_is_refused_saying_why(actions: Any, message: str) -> None:
    assert refusal(actions) == message


def test_the_checks_of_a_multi_lock_count_and_each_of_its_rows_is_protected() -> None:
    more = [('k2', '-'), ('k3', 's')]
    assert refusal([data_put()] * 98, more_keys=more) == (
        'a guarded write holds at most 97 actions (DynamoDB allows 100 per transaction and the checks of its 3 locks '
        'take 3), got 98')
    assert len(check_actions(SCHEMA, 'k', '-', [data_put()] * 97, more_keys=more)) == 97
    assert len(check_actions(SCHEMA, 'k', '-', [data_put()] * 99)) == 99
    on_k3 = [{'Delete': {'TableName': 'locks', 'Key': {'lock_key': 'k3', 'sort_key': 's'}}}]
    assert 'writes the lock row itself' in refusal(on_k3, more_keys=more)
    # The same key in another table, or another row of the lock table, is not a lock row.
    for fine in ([{'Delete': {'TableName': 'data', 'Key': {'lock_key': 'k3', 'sort_key': 's'}}}],
                 [{'Delete': {'TableName': 'locks', 'Key': {'lock_key': 'k3', 'sort_key': '-'}}}]):
        assert check_actions(SCHEMA, 'k', '-', fine, more_keys=more) == fine


def test_a_write_of_the_item_a_lock_is_on_is_refused_with_what_to_do_instead() -> None:
    on_the_item = [{'Update': {'TableName': 'locks', 'Key': {'lock_key': 'k', 'sort_key': '-'}}}]
    assert refusal(on_the_item, existing_item=True) == (
        'TransactItems[0] writes the item this lock is on (lock_existing_item=True), which the guard checks in the '
        'same transaction, and DynamoDB refuses a transaction that touches one item twice; nothing was written. '
        "Update that item with your own UpdateItem conditioned on 'fencing_token = <lock.fencing_token> AND "
        "attribute_exists(record_version_number)' (see \"Locking an existing item\" in the docs)")


def test_a_guarded_write_over_4_mb_is_refused_with_its_size() -> None:
    big = [{'Put': {'TableName': 'data', 'Item': {'id': 'x', 'blob': b'x' * (4 * 1024 * 1024)}}}]
    message = refusal(big)
    assert message.startswith('the guarded write is about ') and message.endswith(
        ' bytes; DynamoDB takes at most 4194304 bytes per transaction')
    assert int(message.split()[5]) > 4 * 1024 * 1024



def test_a_guarded_write_of_exactly_4_mb_is_sent_and_one_byte_more_is_refused_with_its_size() -> None:
    def write(length: int) -> List[Dict[str, Any]]:
        return [{'Put': {'TableName': 'data', 'Item': {'id': 'x', 'blob': 'x' * length}}}]
    exactly = MAX_TRANSACTION_BYTES - size_of(write(0)[0]['Put'])
    assert size_of(write(exactly)[0]['Put']) == MAX_TRANSACTION_BYTES
    assert check_actions(SCHEMA, 'k', '-', write(exactly)) == write(exactly)
    assert refusal(write(exactly + 1)) == (f'the guarded write is about {MAX_TRANSACTION_BYTES + 1} bytes; DynamoDB '
                                           f'takes at most {MAX_TRANSACTION_BYTES} bytes per transaction')

def test_the_checked_actions_are_copies_the_caller_may_change() -> None:
    actions = [data_put()]
    checked = check_actions(SCHEMA, 'k', '-', actions)
    assert checked == actions and checked[0] is not actions[0]


def test_a_single_call_with_an_argument_a_transaction_cannot_carry_names_what_it_takes() -> None:
    with pytest.raises(TypeError) as refused:
        single_action('Put', {'TableName': 'data', 'Item': {}, 'ReturnValues': 'ALL_OLD', 'Expected': {}})
    assert str(refused.value) == (
        'a guarded put takes TableName, Item, ConditionExpression, ExpressionAttributeNames, '
        'ExpressionAttributeValues, ReturnValuesOnConditionCheckFailure, ReturnConsumedCapacity, '
        'ReturnItemCollectionMetrics; not Expected, ReturnValues')
    actions, options = single_action('Delete', {'TableName': 'data', 'Key': {'id': 'x'},
                                                'ReturnItemCollectionMetrics': 'SIZE'})
    assert actions == [{'Delete': {'TableName': 'data', 'Key': {'id': 'x'}}}]
    assert options == {'ReturnItemCollectionMetrics': 'SIZE'}


def test_reasons_are_read_only_from_a_cancellation_that_has_them() -> None:
    assert reasons_of(ValueError('no response')) == []
    error = ClientError({'Error': {'Code': 'TransactionCanceledException', 'Message': 'x'},
                         'CancellationReasons': [{'Code': 'None'}, 'junk']}, 'TransactWriteItems')  # type: ignore
    assert reasons_of(error) == [{'Code': 'None'}]


# --- guarded_write: what is sent, the errors and the events -------------------------------------------

def test_the_lock_check_is_the_last_action_and_names_this_acquisition(engine: Engine) -> None:
    clock = FakeClock()
    lock = hold(engine, clock)
    engine.sent.clear()
    run(guarded_write(engine.schema, lock, put(engine, 'x'), {}), engine, clock)
    (request,) = engine.sent
    assert request.params['TransactItems'][-1] == {'ConditionCheck': {
        'TableName': engine.schema.table_name,
        'Key': {'lock_key': 'k', 'sort_key': '-'},
        'ConditionExpression': '#acquisition = :acquisition',
        'ExpressionAttributeNames': {'#acquisition': 'acquisition_id'},
        'ExpressionAttributeValues': {':acquisition': lock._state.acquisition_id},
        'ReturnValuesOnConditionCheckFailure': 'ALL_OLD'}}
    assert request.params['TransactItems'][0] == put(engine, 'x')[0]


def test_a_stolen_lock_is_reported_to_the_hook_with_its_new_holder(engine: Engine) -> None:
    clock = FakeClock()
    lock = hold(engine, clock)
    steal(engine)
    failed = run(guarded_write(engine.schema, lock, put(engine, 'x'), {}), engine, clock)
    (stolen,) = events_of(failed, Kind.STOLEN)
    assert stolen.key == 'k|-' and stolen.lock is lock
    assert dict(stolen.fields) == {'owner': 'thief', 'reason': Reason.TAKEN_OVER}
    assert lock._state.loss.reason == Reason.TAKEN_OVER and lock._state.loss.row['owner_name'] == 'thief'


def test_a_lock_whose_row_was_deleted_says_so_in_the_error_and_the_event(engine: Engine) -> None:
    clock = FakeClock()
    lock = hold(engine, clock)
    engine.store.client.delete_item(TableName=engine.schema.table_name, Key={'lock_key': 'k', 'sort_key': '-'})
    failed = run(guarded_write(engine.schema, lock, put(engine, 'x'), {}), engine, clock)
    assert failed.error.code == DynamoDBLockError.LOCK_STOLEN and failed.error.reason == Reason.ROW_GONE
    assert failed.error.message == 'k|- is no longer held (its row was released or removed), so nothing was written'
    assert failed.error.holder is None and failed.unregistered == [lock]
    (stolen,) = events_of(failed, Kind.STOLEN)
    assert dict(stolen.fields) == {
        'owner': 'nobody', 'reason': Reason.ROW_GONE,
        'how': 'its row was deleted by someone else (a force release, a TTL expiry or another program)'}
    again = run(guarded_write(engine.schema, lock, put(engine, 'x'), {}), engine, clock)
    assert again.error.message == 'k|- is no longer held (its row was released or removed), so nothing was sent'
    assert again.error.reason == Reason.ROW_GONE and again.emitted == []


def test_a_lock_marked_invalid_without_a_loss_is_reported_gone(engine: Engine) -> None:
    clock = FakeClock()
    lock = hold(engine, clock)
    lock._state.status = Status.INVALID
    engine.sent.clear()
    failed = run(guarded_write(engine.schema, lock, put(engine, 'x'), {}), engine, clock)
    assert failed.error.code == DynamoDBLockError.LOCK_STOLEN and failed.error.reason == Reason.ROW_GONE
    assert failed.error.message.endswith('so nothing was sent') and engine.sent == []


def test_a_lock_released_by_our_lost_release_is_reported_with_its_key(engine: Engine) -> None:
    clock = FakeClock()
    lock = hold(engine, clock)
    lock._state.note_release_maybe_applied()
    steal(engine)           # within the lease: our release went through, and a new holder came
    failed = run(guarded_write(engine.schema, lock, put(engine, 'x'), {}), engine, clock)
    assert failed.error.code == DynamoDBLockError.LOCK_NOT_OWNED
    assert failed.error.message == ('k|- was released (by a release reported as failed that went through), so '
                                    'nothing was written')
    (released,) = failed.emitted
    assert released.kind == Kind.RELEASED_BY_LOST_ANSWER and released.key == 'k|-' and released.lock is lock


def test_a_second_lock_already_lost_is_not_reported_again(engine: Engine) -> None:
    clock = FakeClock()
    locks = [hold(engine, clock), hold(engine, clock, 'other')]
    steal(engine, 'k')
    steal(engine, 'other')
    failed = run(guarded_write(engine.schema, locks, put(engine, 'x'), {}), engine, clock)
    assert failed.error.code == DynamoDBLockError.LOCK_STOLEN
    assert failed.error.message.startswith('k|- is held by thief')
    assert failed.unregistered == [locks[0]] and len(events_of(failed, Kind.STOLEN)) == 1
    assert locks[1]._state.status == Status.LOCKED        # the first loss is raised at once


def cancelled(*codes: str) -> Any:
    return judge_error(ClientError({'Error': {'Code': 'TransactionCanceledException', 'Message': 'scripted'},
                                    'CancellationReasons': [{'Code': code} for code in codes],  # type: ignore
                                    'ResponseMetadata': {'HTTPStatusCode': 400, 'RetryAttempts': 0}},
                                   'TransactWriteItems'))


def error(code: str, status: int = 400) -> Any:
    return judge_error(ClientError({'Error': {'Code': code, 'Message': 'scripted'},
                                    'ResponseMetadata': {'HTTPStatusCode': status, 'RetryAttempts': 0}},
                                   'TransactWriteItems'))


def test_each_retry_of_a_guarded_write_is_an_event_with_its_code_and_attempt(engine: Engine) -> None:
    clock = FakeClock()
    lock = hold(engine, clock)
    engine.faults = [lambda store, request: cancelled('None', 'ThrottlingError'),
                     lambda store, request: error('TransactionConflictException'),
                     lambda store, request: LOST]
    done = run(guarded_write(engine.schema, lock, put(engine, 'x'), {}), engine, clock)
    assert done.error is None and engine.row('data')['value'] == 'x'
    retries = events_of(done, Kind.GUARD_RETRY)
    assert [event.key for event in retries] == ['k|-'] * 3 and all(event.lock is lock for event in retries)
    assert [dict(event.fields) for event in retries] == [
        {'code': 'TransactionCanceledException', 'attempt': 1},
        {'code': 'TransactionConflictException', 'attempt': 2},
        {'code': LOST.code, 'attempt': 3}]
    assert clock.now - 1000.0 == pytest.approx(0.025 + 0.05 + 0.1)


def test_the_errors_of_a_failed_guarded_write_say_what_happened(engine: Engine) -> None:
    clock = FakeClock()
    lock = hold(engine, clock)
    prefix = 'Guarded write under k|- failed: '
    cases = [
        ([lambda store, request: cancelled('None', 'ItemCollectionSizeLimitExceeded')],
         'the transaction was cancelled'),
        ([lambda store, request: error('ValidationException')], 'nothing was written'),
        ([lambda store, request: cancelled('None', 'TransactionConflict')] * GUARD_ATTEMPTS,
         f'it kept conflicting with other writes ({GUARD_ATTEMPTS} attempts); nothing was written'),
    ]
    for faults, what in cases:
        engine.faults, engine.sent = list(faults), []
        failed = run(guarded_write(engine.schema, lock, put(engine, 'x'), {}), engine, clock)
        assert isinstance(failed.error, DynamoDBLockError) and failed.error.code == DynamoDBLockError.UNKNOWN
        last = faults[-1](None, None)
        assert failed.error.message == f'{prefix}{explain(engine.schema, last.error)}; {what}'
        assert failed.error.reason == last.reason and isinstance(failed.error.__cause__, ClientError)
    engine.faults, engine.sent = [lambda store, request: LOST] * 3, []
    failed = run(guarded_write(engine.schema, lock, put(engine, 'x'), {}, client_token='t-1'), engine, clock)
    assert failed.error.message == (f'{prefix}{explain(engine.schema, LOST.error)}; the outcome is unknown (it may '
                                    "have been applied; sending it again with ClientRequestToken='t-1' within 10 "
                                    'minutes is safe)')
    assert engine.row('data') is None


def test_conflicts_after_an_unanswered_attempt_keep_its_token(engine: Engine) -> None:
    clock = FakeClock()
    lock = hold(engine, clock)
    engine.sent.clear()
    engine.faults = [lambda store, request: LOST, lambda store, request: cancelled('None', 'TransactionConflict')]
    run(guarded_write(engine.schema, lock, put(engine, 'x'), {}), engine, clock)
    assert len({request.params['ClientRequestToken'] for request in engine.sent}) == 1 and len(engine.sent) == 3


# --- sessions: the events and errors -------------------------------------------------------------------

def settings(engine: Engine) -> SessionSettings:
    return SessionSettings(engine.schema, 'holder', lease=LEASE, row_lease=3600.0, expiry_period=EXPIRY)


def started(engine: Engine, clock: FakeClock) -> Any:
    session = Session('holder')
    result = run(ensure_session(settings(engine), session, clock), engine, clock)
    return session, result


class SessionLock:
    def __init__(self, session: Session, key: str = 'k') -> None:
        self.unique_identifier = f'{key}|-'
        self.partition_key, self.sort_key = key, '-'
        self._state = LockState('v1', 0, 0.0, LEASE)
        self._state.acquired(0.0, 1, 'v1')
        self._state.bind_session(session.id, LEASE, 0.0)


def test_a_started_session_is_an_event_naming_the_owner_and_the_session(engine: Engine) -> None:
    session, result = started(engine, FakeClock())
    (event,) = result.emitted
    assert event.kind == Kind.SESSION_STARTED and event.key == '' and event.lock is None
    assert dict(event.fields) == {'owner': 'holder', 'session': session.id}


def test_a_session_that_cannot_start_says_why(engine: Engine) -> None:
    clock = FakeClock()
    session = Session('holder')
    engine.faults = [lambda store, request: LOST]
    failed = run(ensure_session(settings(engine), session, clock), engine, clock)
    assert failed.error.message == (f'Could not start the lock client session {session.id}: '
                                    f'{explain(engine.schema, LOST.error)}')
    assert failed.error.__cause__ is LOST.error and failed.emitted == []


def test_a_renewal_is_an_event_with_the_new_version_and_recovers_the_locks_in_danger(engine: Engine) -> None:
    clock = FakeClock()
    session, _ = started(engine, clock)
    lock = SessionLock(session)
    lock._state.status = Status.IN_DANGER
    done = run(session_round(settings(engine), session, [lock], clock), engine, clock)
    renewed, recovered = done.emitted
    assert renewed.kind == Kind.SESSION_RENEWED and renewed.key == ''
    assert dict(renewed.fields) == {'session': session.id, 'version': engine.row(session.id)['record_version_number']}
    assert recovered.kind == Kind.RECOVERED and recovered.key == 'k|-' and recovered.lock is lock


def test_a_failed_renewal_is_an_event_with_the_error(engine: Engine) -> None:
    clock = FakeClock()
    session, _ = started(engine, clock)
    engine.faults = [lambda store, request: error('ValidationException')]
    done = run(session_round(settings(engine), session, [], clock), engine, clock)
    assert isinstance(done.result, Failed) and not session.unconfirmed        # not applied: nothing to remember
    (failed,) = done.emitted
    assert failed.kind == Kind.SESSION_RENEWAL_FAILED
    assert dict(failed.fields) == {'session': session.id, 'error': explain(engine.schema, done.result.error)}


@pytest.mark.parametrize('ended_by, owner', [('a waiter', 'a waiter that ended it'),
                                             ('nobody', 'nobody (its row is gone)')])
def test_a_lost_session_is_an_event_with_who_ended_it_and_each_lock_a_stolen_event(
        engine: Engine, ended_by: str, owner: str) -> None:
    clock = FakeClock()
    session, _ = started(engine, clock)
    old_id = session.id
    locks = [SessionLock(session), SessionLock(session, 'other'), SessionLock(session, 'third')]
    locks[1]._state.forget(Status.RELEASED)
    if ended_by == 'a waiter':
        engine.store.client.update_item(TableName=engine.schema.table_name, Key={'lock_key': old_id, 'sort_key': '-'},
                                        UpdateExpression='SET record_version_number = :v, released_at = :one',
                                        ExpressionAttributeValues={':v': 'ended', ':one': 1})
    else:
        engine.store.client.delete_item(TableName=engine.schema.table_name, Key={'lock_key': old_id, 'sort_key': '-'})
    done = run(session_round(settings(engine), session, locks, clock), engine, clock)
    lost, *stolen = done.emitted
    assert lost.kind == Kind.SESSION_LOST and dict(lost.fields) == {'session': old_id, 'owner': owner, 'count': 3}
    assert [(event.kind, event.key, event.lock) for event in stolen] == [
        (Kind.STOLEN, 'k|-', locks[0]), (Kind.STOLEN, 'third|-', locks[2])]
    assert all(dict(event.fields) == {'owner': f'{owner} (session lost)', 'reason': Reason.SESSION_LOST}
               for event in stolen)
    assert done.unregistered == [locks[0], locks[2]]
    assert locks[0]._state.loss.reason == Reason.SESSION_LOST and locks[0]._state.loss.row is None


def test_an_ended_session_is_an_event_naming_it_and_a_failed_end_one_with_the_error(engine: Engine) -> None:
    clock = FakeClock()
    session, _ = started(engine, clock)
    old_id = session.id
    ended = run(end_session(settings(engine), session, []), engine, clock)
    assert [(event.kind, dict(event.fields)) for event in ended.emitted] == [(Kind.SESSION_ENDED, {'session': old_id})]
    session, _ = started(engine, clock)
    old_id = session.id
    engine.faults = [lambda store, request: LOST]
    failed = run(end_session(settings(engine), session, []), engine, clock)
    assert [(event.kind, dict(event.fields)) for event in failed.emitted] == [
        (Kind.SESSION_RENEWAL_FAILED, {'session': old_id, 'error': explain(engine.schema, LOST.error)})]
    assert session.id != old_id             # given up on: the next acquisition starts a new session


def test_a_waiter_that_cannot_read_the_session_says_which(engine: Engine) -> None:
    clock = FakeClock()
    engine.faults = [lambda store, request: error('ValidationException')]
    failed = run(watch_session(engine.schema, 's-1', None, clock, LEASE), engine, clock)
    assert failed.error.message == (f'Could not read the session s-1 of the lock in the way: '
                                    f'{explain(engine.schema, failed.error.__cause__)}')
    assert failed.error.reason == Reason.VALIDATION



# --- LockState: a session lock's row refresh ------------------------------------------------------------

def test_a_session_locks_row_refresh_confirmed_is_planned_again_a_period_after_it_was_sent() -> None:
    """Under a session the row is refreshed every third of its lease: a confirmed refresh moves
    the start of the next period to when it was sent, and confirms the row only (the lock's
    safety follows the session's renewals)."""
    from python_dynamodb_lock._core.answers import Applied
    from python_dynamodb_lock._core.state import RenewalVerdict
    state = LockState('v-current', 1_700_003_600, 1000.0, 3600.0)
    state.acquired(1000.0, 1, 'a-1')
    state.bind_session('s-1', LEASE, 1000.0)
    assert state.plan_row_refresh(2200.0, 1200.0)
    renewal = state.next_renewal('v-new', 1_700_007_200, 'k', '-')
    assert renewal is not None
    result = state.settle_renewal(renewal, Applied(), 2200.0, 2201.0)
    assert result.verdict == RenewalVerdict.RENEWED and result.recovered is False
    assert state.version == 'v-new' and state.last_confirmed == 1000.0       # the session's, not the row's
    assert not state.plan_row_refresh(3399.0, 1200.0)
    assert state.plan_row_refresh(3400.0, 1200.0)


def test_a_session_recognises_its_last_20_renewals_whose_answers_were_lost() -> None:
    session = Session('holder')
    session.started(session.id, 'v-start', 0.0)
    for index in range(25):
        session.remember(f'v{index}')
    assert session.unconfirmed == [f'v{index}' for index in range(5, 25)]
    assert session.expected() == ['v-start', *[f'v{index}' for index in range(6, 25)]]
    assert not session.adopt(session.id, 'v4')         # forgotten: a row carrying it is not ours
    assert session.adopt(session.id, 'v5') and session.version == 'v5' and session.unconfirmed == []


def test_extend_under_a_session_that_dynamodb_fails_says_why_and_that_the_lock_may_still_be_held(
        engine: Engine) -> None:
    from python_dynamodb_lock._core.session import extend_session
    clock = FakeClock()
    session, _ = started(engine, clock)
    lock = SessionLock(session)
    engine.faults = [lambda store, request: error('ValidationException')]
    failed = run(extend_session(settings(engine), session, [lock], lock, clock), engine, clock)
    assert failed.error.code == DynamoDBLockError.UNKNOWN and failed.error.reason == Reason.VALIDATION
    assert failed.error.message == (f'Could not renew k|-: {explain(engine.schema, failed.error.__cause__)}; the lock '
                                    'may still be held until its lease runs out')


def test_a_session_lost_once_is_not_lost_again_by_a_second_round_that_saw_it_end() -> None:
    session = Session('holder')
    old_id = session.id
    assert session.lose(old_id) is True and session.id != old_id
    new_id = session.id
    assert session.lose(old_id) is False and session.id == new_id


def test_a_lost_lock_written_to_again_names_its_holder_and_each_write_has_its_own_token(engine: Engine) -> None:
    clock = FakeClock()
    lock = hold(engine, clock)
    engine.sent.clear()
    run(guarded_write(engine.schema, lock, put(engine, 'x'), {}), engine, clock)
    run(guarded_write(engine.schema, lock, put(engine, 'y'), {}), engine, clock)
    assert len({request.params['ClientRequestToken'] for request in engine.sent}) == 2
    steal(engine)
    run(guarded_write(engine.schema, lock, put(engine, 'z'), {}), engine, clock)
    again = run(guarded_write(engine.schema, lock, put(engine, 'z'), {}), engine, clock)
    assert again.error.message == 'k|- is held by thief now, so nothing was sent'
    assert again.error.holder['owner_name'] == 'thief' and again.error.reason == Reason.TAKEN_OVER


def test_cancellation_reasons_that_do_not_match_the_actions_never_mark_the_lock_lost(engine: Engine) -> None:
    clock = FakeClock()
    lock = hold(engine, clock)
    engine.faults = [lambda store, request: cancelled('None', 'ConditionalCheckFailed', 'None')]    # 3 for 2
    with pytest.raises(ClientError):
        run(guarded_write(engine.schema, lock, put(engine, 'x'), {}), engine, clock)
    assert lock._state.status == Status.LOCKED


def test_a_session_started_twice_keeps_the_first_version_and_the_earliest_send(engine: Engine) -> None:
    session = Session('holder')
    session.started(session.id, 'v-1', 10.0)
    session.started(session.id, 'v-2', 5.0)
    assert session.version == 'v-1' and session.confirmed_at == 5.0
    session.started(session.id, 'v-3', 20.0)
    assert session.confirmed_at == 5.0
    session.started('another-id', 'v-4', 1.0)
    assert session.confirmed_at == 5.0 and session.version == 'v-1'


def test_a_session_row_ended_before_we_adopted_it_is_an_error_saying_so(engine: Engine) -> None:
    from python_dynamodb_lock._core.answers import Refused
    clock = FakeClock()
    session = Session('holder')
    engine.faults = [lambda store, request: Refused({'lock_key': session.id, 'sort_key': '-',
                                                     'record_version_number': 'v', 'released_at': 1})]
    failed = run(ensure_session(settings(engine), session, clock), engine, clock)
    assert failed.error.message == f'Could not start the lock client session {session.id}: its row was ended meanwhile'
    assert failed.error.reason == Reason.OTHER


def test_a_session_renewal_met_by_its_own_retry_is_a_renewal(engine: Engine) -> None:
    clock = FakeClock()
    session, _ = started(engine, clock)
    lock = SessionLock(session)

    def lands_then_refused(store: Any, request: Any) -> Any:
        store.send(request)
        return store.send(request)       # botocore's retry meets our own new version
    engine.faults = [lands_then_refused]
    done = run(session_round(settings(engine), session, [lock], clock), engine, clock)
    assert [event.kind for event in done.emitted] == [Kind.SESSION_RENEWED]
    assert session.version == engine.row(session.id)['record_version_number'] and lock._state.held


def test_a_session_renewal_interrupted_after_it_landed_does_not_lose_the_session_next_time(engine: Engine) -> None:
    clock = FakeClock()
    session, _ = started(engine, clock)
    lock = SessionLock(session)
    interrupted = run(session_round(settings(engine), session, [lock], clock), engine, clock, interrupt_call=0)
    assert isinstance(interrupted.error, KeyboardInterrupt)
    assert session.unconfirmed == [engine.row(session.id)['record_version_number']]
    done = run(session_round(settings(engine), session, [lock], clock), engine, clock)
    assert [event.kind for event in done.emitted] == [Kind.SESSION_RENEWED] and lock._state.held


def test_a_waiter_watching_two_sessions_in_turn_times_each_on_its_own(engine: Engine) -> None:
    from python_dynamodb_lock._core.acquire import Observations
    clock = FakeClock()
    first, _ = started(engine, clock)
    second, _ = started(engine, clock)
    seen = Observations()
    for _ in range(7):
        for session in (first, second):
            watch = run(watch_session(engine.schema, session.id, seen, clock, LEASE), engine, clock).result
            assert watch.expired_version is None
        clock.now += LEASE / 7.5
    clock.now += LEASE
    for session in (first, second):
        watch = run(watch_session(engine.schema, session.id, seen, clock, LEASE), engine, clock).result
        assert watch.expired_version == session.version
