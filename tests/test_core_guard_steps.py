"""Guarded writes (python_dynamodb_lock/_core/guard.py: ``guarded_write``) driven against moto
in-process on a manual clock, as in test_core_shared_steps.py: the application's write goes
through only while the lock's row still names this acquisition; a lost lock is reported with
who holds the key now and nothing is written; a lock not held sends nothing; conflicts are sent
again with a new token, a lost answer with the same one."""
from __future__ import annotations

from typing import Any, Dict, List

import pytest
from botocore.exceptions import ClientError

from python_dynamodb_lock._core.acquire import acquire
from python_dynamodb_lock._core.write import Written
from python_dynamodb_lock._core.answers import judge_error
from python_dynamodb_lock._core.events import Kind
from python_dynamodb_lock._core.guard import GUARD_ATTEMPTS, UNANSWERED_ATTEMPTS, guarded_write
from python_dynamodb_lock._core.state import LockState, Status
from python_dynamodb_lock import DynamoDBLockError, Reason
from test_core_protocol import FakeClock
from test_core_shared_steps import LEASE, LOST, Engine, attempt, run, table  # noqa: F401 (table: fixture)


@pytest.fixture
def engine(table: Any) -> Engine:      # noqa: F811 (the fixture of the shared module's table)
    for key in ('k', 'other', 'data'):
        table.delete_row(key)
    return Engine(table)


class Lock:
    sort_key = '-'
    lock_existing_item = False

    def __init__(self, written: Written, key: str, clock: FakeClock) -> None:
        self.partition_key = key
        self.unique_identifier = f'{key}|-'
        self._clock = clock
        self._state = LockState(written.item['record_version_number'], 0, clock.now, LEASE)
        self._state.acquired(clock.now, 1, written.item['acquisition_id'])


def hold(engine: Engine, clock: FakeClock, key: str = 'k') -> Lock:
    written = run(acquire(attempt(engine, key, 'me', shared=False), clock, lambda: False), engine, clock).result
    assert isinstance(written, Written)
    return Lock(written, key, clock)


def put(engine: Engine, value: str) -> List[Dict[str, Any]]:
    return [{'Put': {'TableName': engine.schema.table_name,
                     'Item': {'lock_key': 'data', 'sort_key': '-', 'value': value}}}]


def steal(engine: Engine, key: str = 'k') -> None:
    engine.store.client.update_item(TableName=engine.schema.table_name, Key={'lock_key': key, 'sort_key': '-'},
                                    UpdateExpression='SET acquisition_id = :a, owner_name = :o',
                                    ExpressionAttributeValues={':a': 'theirs', ':o': 'thief'})


def test_a_guarded_write_goes_through_while_the_lock_is_held(engine: Engine) -> None:
    clock = FakeClock()
    lock = hold(engine, clock)
    engine.sent.clear()
    answer = run(guarded_write(engine.schema, lock, put(engine, 'x'), {'ReturnConsumedCapacity': 'TOTAL'}), engine,
                 clock).result
    assert isinstance(answer, dict) and engine.row('data')['value'] == 'x'
    (request,) = engine.sent
    assert request.params['ReturnConsumedCapacity'] == 'TOTAL' and len(request.params['TransactItems']) == 2


def test_a_guarded_write_under_several_locks_checks_each(engine: Engine) -> None:
    clock = FakeClock()
    locks = [hold(engine, clock), hold(engine, clock, 'other')]
    run(guarded_write(engine.schema, locks, put(engine, 'both'), {}), engine, clock)
    assert engine.row('data')['value'] == 'both'
    steal(engine, 'other')
    failed = run(guarded_write(engine.schema, locks, put(engine, 'late'), {}), engine, clock)
    assert isinstance(failed.error, DynamoDBLockError) and failed.error.code == DynamoDBLockError.LOCK_STOLEN
    assert engine.row('data')['value'] == 'both'
    assert locks[0]._state.status == Status.LOCKED and locks[1]._state.status == Status.INVALID


def test_a_lost_lock_writes_nothing_and_names_who_holds_the_key(engine: Engine) -> None:
    clock = FakeClock()
    lock = hold(engine, clock)
    steal(engine)
    failed = run(guarded_write(engine.schema, lock, put(engine, 'x'), {}), engine, clock)
    assert isinstance(failed.error, DynamoDBLockError) and failed.error.code == DynamoDBLockError.LOCK_STOLEN
    assert str(failed.error).endswith(' - k|- is held by thief now, so nothing was written')
    assert failed.error.holder['owner_name'] == 'thief' and failed.error.reason == Reason.TAKEN_OVER
    assert engine.row('data') is None and lock._state.status == Status.INVALID
    assert failed.unregistered == [lock] and failed.events == [Kind.STOLEN]
    again = run(guarded_write(engine.schema, lock, put(engine, 'x'), {}), engine, clock)
    assert again.error.code == DynamoDBLockError.LOCK_STOLEN and 'so nothing was sent' in str(again.error)


def test_a_lock_released_by_our_own_release_reported_as_failed_is_not_owned(engine: Engine) -> None:
    clock = FakeClock()
    lock = hold(engine, clock)
    lock._state.note_release_maybe_applied()
    engine.store.client.delete_item(TableName=engine.schema.table_name, Key={'lock_key': 'k', 'sort_key': '-'})
    failed = run(guarded_write(engine.schema, lock, put(engine, 'x'), {}), engine, clock)
    assert failed.error.code == DynamoDBLockError.LOCK_NOT_OWNED and 'was released' in str(failed.error)
    assert lock._state.status == Status.RELEASED and failed.events == [Kind.RELEASED_BY_LOST_ANSWER]
    assert failed.unregistered == [lock] and engine.row('data') is None


def test_a_lock_not_held_sends_nothing(engine: Engine) -> None:
    clock = FakeClock()
    lock = hold(engine, clock)
    lock._state.forget(Status.RELEASED)
    engine.sent.clear()
    failed = run(guarded_write(engine.schema, lock, put(engine, 'x'), {}), engine, clock)
    assert failed.error.code == DynamoDBLockError.LOCK_NOT_OWNED and engine.sent == []
    assert str(failed.error).endswith(f' - k|- is not held ({Status.RELEASED}): nothing was written')


def test_an_applications_own_condition_that_refuses_is_its_error(engine: Engine) -> None:
    clock = FakeClock()
    lock = hold(engine, clock)
    refused = [{'Put': {**put(engine, 'x')[0]['Put'], 'ConditionExpression': 'attribute_exists(lock_key)'}}]
    with pytest.raises(ClientError, match='TransactionCanceledException'):
        run(guarded_write(engine.schema, lock, refused, {}), engine, clock)
    assert engine.row('data') is None and lock._state.status == Status.LOCKED


def cancelled(*codes: str) -> Any:
    return judge_error(ClientError({'Error': {'Code': 'TransactionCanceledException', 'Message': 'scripted'},
                                    'CancellationReasons': [{'Code': code} for code in codes],  # type: ignore
                                    'ResponseMetadata': {'HTTPStatusCode': 400, 'RetryAttempts': 0}},
                                   'TransactWriteItems'))


def tokens(engine: Engine) -> List[str]:
    return [request.params['ClientRequestToken'] for request in engine.sent]


def test_conflicts_are_sent_again_with_a_new_token_and_lost_answers_with_the_same(engine: Engine) -> None:
    clock = FakeClock()
    lock = hold(engine, clock)
    engine.sent.clear()
    engine.faults = [lambda store, request: cancelled('None', 'TransactionConflict'),
                     lambda store, request: LOST]
    result = run(guarded_write(engine.schema, lock, put(engine, 'x'), {}), engine, clock)
    assert result.error is None and engine.row('data')['value'] == 'x'
    first, second, third = tokens(engine)
    assert first != second == third
    assert result.events == [Kind.GUARD_RETRY, Kind.GUARD_RETRY]


def test_a_given_token_is_used(engine: Engine) -> None:
    clock = FakeClock()
    lock = hold(engine, clock)
    engine.sent.clear()
    run(guarded_write(engine.schema, lock, put(engine, 'x'), {}, client_token='mine'), engine, clock)
    assert tokens(engine) == ['mine']


def test_an_outcome_that_stays_unknown_says_so_with_the_token(engine: Engine) -> None:
    clock = FakeClock()
    lock = hold(engine, clock)
    engine.sent.clear()
    engine.faults = [lambda store, request: LOST] * UNANSWERED_ATTEMPTS
    failed = run(guarded_write(engine.schema, lock, put(engine, 'x'), {}), engine, clock)
    assert failed.error.code == DynamoDBLockError.UNKNOWN and len(engine.sent) == UNANSWERED_ATTEMPTS
    assert f'ClientRequestToken={tokens(engine)[0]!r}' in str(failed.error) and len(set(tokens(engine))) == 1
    assert failed.error.reason == Reason.UNREACHABLE


def test_a_write_that_keeps_conflicting_gives_up_and_other_failures_at_once(engine: Engine) -> None:
    clock = FakeClock()
    lock = hold(engine, clock)
    engine.sent.clear()
    engine.faults = [lambda store, request: cancelled('None', 'TransactionConflict')] * GUARD_ATTEMPTS
    failed = run(guarded_write(engine.schema, lock, put(engine, 'x'), {}), engine, clock)
    assert len(engine.sent) == GUARD_ATTEMPTS and f'({GUARD_ATTEMPTS} attempts)' in str(failed.error)
    engine.sent.clear()
    engine.faults = [lambda store, request: cancelled('ValidationError', 'None')]
    failed = run(guarded_write(engine.schema, lock, put(engine, 'x'), {}), engine, clock)
    assert len(engine.sent) == 1 and 'the transaction was cancelled' in str(failed.error)
    engine.sent.clear()
    from test_core_protocol import THROTTLED
    engine.faults = [lambda store, request: THROTTLED]
    failed = run(guarded_write(engine.schema, lock, put(engine, 'x'), {}), engine, clock)
    assert len(engine.sent) == 1 and failed.error.reason == Reason.THROTTLED
    assert f'Guarded write under {lock.unique_identifier} failed: ' in str(failed.error)
    assert engine.row('data') is None
