"""The protocols of several keys (``acquire_first`` for ``acquire_first_lock``, ``free_all`` for
the release of a set) driven against moto in-process on a manual clock, as in
test_core_shared_steps.py: the first key that can be had is taken and no other, a dead holder's
key is won after its lease, a set is freed in one transaction or not at all."""
from __future__ import annotations

from typing import Any, List

import pytest
from botocore.exceptions import ClientError

from python_dynamodb_lock._core.acquire import TimedOut
from python_dynamodb_lock._core.write import Written
from python_dynamodb_lock._core.answers import Applied, Failed, judge_error
from python_dynamodb_lock._core.events import Kind
from python_dynamodb_lock._core.first import FirstWritten, NoneFree, acquire_first
from python_dynamodb_lock._core.guard import UNANSWERED_ATTEMPTS
from python_dynamodb_lock._core.multi import free_all
from python_dynamodb_lock._core.state import LockState
from test_core_protocol import FakeClock
from test_core_shared_steps import EXPIRY, LEASE, LOST, Engine, attempt, run, table  # noqa: F401 (table: fixture)


@pytest.fixture
def engine(table: Any) -> Engine:      # noqa: F811 (the fixture of the shared module's table)
    for key in ('a', 'b', 'c'):
        table.delete_row(key)
    return Engine(table)


def exclusive(engine: Engine, keys: List[str], owner: str = 'me', **options: Any) -> List[Any]:
    return [attempt(engine, key, owner, shared=False, **options) for key in keys]


def hold(engine: Engine, clock: FakeClock, key: str, owner: str = 'holder') -> Written:
    from python_dynamodb_lock._core.acquire import acquire
    result = run(acquire(attempt(engine, key, owner, shared=False, attributes={'purpose': 'p'}), clock,
                         lambda: False), engine, clock).result
    assert isinstance(result, Written)
    return result


def test_the_first_key_that_can_be_had_is_taken_and_no_other(engine: Engine) -> None:
    clock = FakeClock()
    hold(engine, clock, 'a')
    engine.sent.clear()
    won = run(acquire_first(exclusive(engine, ['a', 'b', 'c']), clock, lambda: False), engine, clock)
    assert isinstance(won.result, FirstWritten) and won.result.index == 1
    assert engine.row('b')['record_version_number'] == won.result.written.item['record_version_number']
    assert engine.row('a')['owner_name'] == 'holder' and engine.row('c') is None
    # a's write (refused: its row came back), b's write; c was never tried.
    assert [request.params['Key']['lock_key'] for request in engine.sent] == ['a', 'b']


def test_every_key_held_is_none_free_with_what_blocked_each(engine: Engine) -> None:
    clock = FakeClock()
    hold(engine, clock, 'a', 'holder-a')
    hold(engine, clock, 'b', 'holder-b')
    started = clock.now
    none = run(acquire_first(exclusive(engine, ['a', 'b'], retry_timeout=12.0), clock, lambda: False), engine, clock)
    assert isinstance(none.result, NoneFree)
    assert [timed.blocking['owner_name'] for timed in none.result.timed_out] == ['holder-a', 'holder-b']
    assert all(isinstance(timed, TimedOut) for timed in none.result.timed_out)
    assert 12.0 <= clock.now - started < 12.0 + 5.0     # each key waited its own retry_timeout
    assert none.events.count(Kind.ACQUIRE_TIMED_OUT) == 2


def test_a_dead_holders_key_is_won_after_its_lease_while_a_live_one_keeps_its_key(engine: Engine) -> None:
    clock = FakeClock()
    hold(engine, clock, 'a', 'live')
    hold(engine, clock, 'b', 'dead')
    renewals = [0]

    def the_live_holder_renews() -> None:      # a new version of a's row at every poll
        renewals[0] += 1
        engine.store.client.update_item(
            TableName=engine.schema.table_name, Key={'lock_key': 'a', 'sort_key': '-'},
            UpdateExpression='SET record_version_number = :v', ExpressionAttributeValues={':v': f'v{renewals[0]}'})
    started = clock.now
    won = run(acquire_first(exclusive(engine, ['a', 'b']), clock, lambda: False), engine, clock,
              on_sleep=the_live_holder_renews)
    assert isinstance(won.result, FirstWritten) and won.result.index == 1
    assert won.result.written.replaced['owner_name'] == 'dead'
    assert LEASE <= clock.now - started <= LEASE + 5.0
    assert engine.row('a')['owner_name'] == 'live' and engine.row('b')['owner_name'] == 'me'
    assert 'purpose' not in engine.row('b')


def test_keys_poll_in_turn_each_on_its_own_period(engine: Engine) -> None:
    clock = FakeClock()
    hold(engine, clock, 'a')
    hold(engine, clock, 'b')
    engine.sent.clear()
    attempts = [attempt(engine, 'a', 'me', shared=False, retry_timeout=10.0),
                attempt(engine, 'b', 'me', shared=False, retry_timeout=10.0)]
    polls: List[Any] = []
    run(acquire_first(attempts, clock, lambda: False), engine, clock,
        on_sleep=lambda: polls.append(clock.now))
    reads = [request.params['Key']['lock_key'] for request in engine.sent if request.operation == 'get_item']
    assert reads == ['a', 'b', 'a', 'b']     # every 5 s, a then b, for 10 s
    assert len(polls) == 2


def held_lock(written: Written, key: str) -> Any:
    class Lock:
        partition_key = key
        sort_key = '-'
        additional_attributes = {'purpose': 'p'}
        _state = LockState(written.item['record_version_number'], 0, 0.0, LEASE)
    return Lock()


def test_a_set_is_freed_in_one_transaction(engine: Engine) -> None:
    clock = FakeClock()
    locks = [held_lock(hold(engine, clock, key), key) for key in ('a', 'b')]
    engine.sent.clear()
    answer = run(free_all(engine.schema, locks, clock, EXPIRY, True), engine, clock).result
    assert isinstance(answer, Applied) and engine.operations() == ['transact_write_items']
    for key in ('a', 'b'):
        row = engine.row(key)
        assert row['released_at'] == int(clock.time()) and row['expiry_time'] == int(clock.time() + EXPIRY)
        assert 'purpose' not in row
    assert not any(lock._state.release_maybe_applied for lock in locks)


def test_a_set_freed_by_a_client_keeping_no_released_rows_is_deleted(engine: Engine) -> None:
    clock = FakeClock()
    locks = [held_lock(hold(engine, clock, key), key) for key in ('a', 'b')]
    answer = run(free_all(engine.schema, locks, clock, EXPIRY, False), engine, clock).result
    assert isinstance(answer, Applied) and engine.row('a') is None and engine.row('b') is None


def test_a_set_with_a_key_lost_meanwhile_frees_nothing(engine: Engine) -> None:
    clock = FakeClock()
    locks = [held_lock(hold(engine, clock, key), key) for key in ('a', 'b')]
    locks[1]._state = LockState('not-the-rows', 0, 0.0, LEASE)
    engine.sent.clear()
    answer = run(free_all(engine.schema, locks, clock, EXPIRY, True), engine, clock).result
    assert isinstance(answer, Failed) and answer.code == 'TransactionCanceledException'
    assert len(engine.sent) == 1                         # a refusal is not sent again
    assert 'released_at' not in engine.row('a')          # the caller releases the keys one by one


def cancelled(code: str) -> Any:
    return judge_error(ClientError({'Error': {'Code': 'TransactionCanceledException', 'Message': 'scripted'},
                                    'CancellationReasons': [{'Code': code}, {'Code': 'None'}],  # type: ignore
                                    'ResponseMetadata': {'HTTPStatusCode': 400, 'RetryAttempts': 0}},
                                   'TransactWriteItems'))


def tokens(engine: Engine) -> List[str]:
    return [request.params['ClientRequestToken'] for request in engine.sent]


def test_a_conflicting_free_is_sent_again_with_a_new_token(engine: Engine) -> None:
    clock = FakeClock()
    locks = [held_lock(hold(engine, clock, key), key) for key in ('a', 'b')]
    engine.sent.clear()
    engine.faults = [lambda store, request: cancelled('TransactionConflict'),
                     lambda store, request: judge_error(_error('TransactionInProgressException'))]
    answer = run(free_all(engine.schema, locks, clock, EXPIRY, True), engine, clock).result
    assert isinstance(answer, Applied) and len(set(tokens(engine))) == 3
    assert 'released_at' in engine.row('a') and 'released_at' in engine.row('b')


def _error(code: str, status: int = 400) -> ClientError:
    return ClientError({'Error': {'Code': code, 'Message': 'scripted'},
                        'ResponseMetadata': {'HTTPStatusCode': status, 'RetryAttempts': 0}}, 'TransactWriteItems')


def test_a_lost_answer_is_asked_again_with_the_same_token_and_marks_the_release_maybe_applied(
        engine: Engine) -> None:
    clock = FakeClock()
    locks = [held_lock(hold(engine, clock, key), key) for key in ('a', 'b')]
    engine.sent.clear()
    engine.faults = [lambda store, request: LOST]
    answer = run(free_all(engine.schema, locks, clock, EXPIRY, True), engine, clock).result
    assert isinstance(answer, Applied) and len(tokens(engine)) == 2 and len(set(tokens(engine))) == 1
    assert all(lock._state.release_maybe_applied for lock in locks)
    third = [held_lock(hold(engine, clock, 'c'), 'c')]
    engine.sent.clear()
    engine.faults = [lambda store, request: LOST] * UNANSWERED_ATTEMPTS
    again = run(free_all(engine.schema, third, clock, EXPIRY, True), engine, clock).result
    assert isinstance(again, Failed) and again.maybe_applied and len(engine.sent) == UNANSWERED_ATTEMPTS
    assert len(set(tokens(engine))) == 1


def test_a_free_that_keeps_conflicting_gives_up_with_the_last_answer(engine: Engine) -> None:
    clock = FakeClock()
    locks = [held_lock(hold(engine, clock, 'a'), 'a')]
    engine.sent.clear()
    engine.faults = [lambda store, request: cancelled('TransactionConflict')] * 100
    answer = run(free_all(engine.schema, locks, clock, EXPIRY, True), engine, clock).result
    assert isinstance(answer, Failed) and len(engine.sent) == 8 and 'released_at' not in engine.row('a')
    refused = [lambda store, request: judge_error(_error('ValidationException'))]
    engine.faults, engine.sent = refused, []
    answer = run(free_all(engine.schema, locks, clock, EXPIRY, True), engine, clock).result
    assert isinstance(answer, Failed) and len(engine.sent) == 1


def test_an_interrupted_free_marks_every_release_maybe_applied(engine: Engine) -> None:
    clock = FakeClock()
    locks = [held_lock(hold(engine, clock, key), key) for key in ('a', 'b')]
    result = run(free_all(engine.schema, locks, clock, EXPIRY, True), engine, clock, interrupt_call=0)
    assert isinstance(result.error, KeyboardInterrupt)
    assert all(lock._state.release_maybe_applied for lock in locks)

