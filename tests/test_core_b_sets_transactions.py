"""``acquire_all`` (``acquire_locks`` / ``try_acquire_locks``: several keys in one transaction)
driven against moto in-process on a manual clock, as test_core_sets_steps.py drives ``free_all``.

What a caller of ``acquire_locks`` relies on: every key is written in one transaction or none is;
the fencing tokens handed back are the ones the rows carry; a key held by a live holder makes
the set wait (the refusal is the poll: no reads) and, once ``retry_timeout`` is spent, reports who
was in the way and leaves nothing written; a dead holder's key is taken over within the set
after its lease, also across ``try_acquire_locks`` calls; an answer that may have been lost is
asked again with the same client request token, and whatever of an interrupted or unknown
transaction landed is freed; the events a metrics hook reads carry the set's name and fields.
(moto applies a transaction sent again with the same token a second time, where DynamoDB
answers as if it had; the faults below answer as DynamoDB would.)
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional

import pytest
from botocore.exceptions import ClientError

from python_dynamodb_lock._core.acquire import Observations, acquire
from python_dynamodb_lock._core.answers import Applied, judge_error
from python_dynamodb_lock._core.events import Kind
from python_dynamodb_lock._core.guard import GUARD_ATTEMPTS, UNANSWERED_ATTEMPTS
from python_dynamodb_lock._core.multi import AllWritten, NotAll, acquire_all, set_name
from python_dynamodb_lock._core.write import Written
from python_dynamodb_lock import DynamoDBLockError, Reason
from test_core_protocol import FakeClock
from test_core_shared_steps import LEASE, LOST, Engine, attempt, run, table  # noqa: F401 (table: fixture)

KEYS = ('a', 'b', 'c', 'd', 'e')


@pytest.fixture
def engine(table: Any) -> Engine:      # noqa: F811 (the fixture of the shared module's table)
    for key in KEYS:
        table.delete_row(key)
    return Engine(table)


def exclusive(engine: Engine, keys: Any, owner: str = 'me', **options: Any) -> List[Any]:
    return [attempt(engine, key, owner, shared=False, **options) for key in keys]


def hold(engine: Engine, clock: FakeClock, key: str, owner: str = 'holder') -> Written:
    result = run(acquire(attempt(engine, key, owner, shared=False), clock, lambda: False), engine, clock).result
    assert isinstance(result, Written)
    return result


def events_of(result: Any, kind: Kind) -> List[Any]:
    return [event for event in result.emitted if event.kind == kind]


def error(code: str, status: int = 400, operation: str = 'TransactWriteItems') -> Any:
    return judge_error(ClientError({'Error': {'Code': code, 'Message': 'scripted'},
                                    'ResponseMetadata': {'HTTPStatusCode': status, 'RetryAttempts': 0}}, operation))


def cancelled(*codes: str) -> Any:
    return judge_error(ClientError({'Error': {'Code': 'TransactionCanceledException', 'Message': 'scripted'},
                                    'CancellationReasons': [{'Code': code} for code in codes],  # type: ignore
                                    'ResponseMetadata': {'HTTPStatusCode': 400, 'RetryAttempts': 0}},
                                   'TransactWriteItems'))


def sent_then(answer: Any) -> Any:
    """A fault that sends the request (it lands) and answers ``answer`` instead of DynamoDB's."""
    def fault(store: Any, request: Any) -> Any:
        store.send(request)
        return answer
    return fault


def passed(store: Any, request: Any) -> Any:
    return store.send(request)


def tokens(engine: Engine) -> List[str]:
    return [request.params['ClientRequestToken'] for request in engine.sent
            if request.operation == 'transact_write_items']


def freed(row: Optional[Dict[str, Any]]) -> bool:
    return row is None or 'released_at' in row


# --- one transaction, all or nothing ------------------------------------------------------------

def test_a_free_set_is_written_in_one_transaction_with_the_tokens_its_rows_carry(engine: Engine) -> None:
    clock = FakeClock()
    done = run(acquire_all(exclusive(engine, ['a', 'b']), clock, lambda: False), engine, clock)
    assert isinstance(done.result, AllWritten)
    assert engine.operations() == ['transact_write_items', 'transact_get_items']
    (transaction,) = [request for request in engine.sent if request.operation == 'transact_write_items']
    assert [action['Update']['Key']['lock_key'] for action in transaction.params['TransactItems']] == ['a', 'b']
    for key, written in zip('ab', done.result.written):
        row = engine.row(key)
        assert row['owner_name'] == 'me'
        assert written.item['record_version_number'] == row['record_version_number']
        assert written.item['fencing_token'] == row['fencing_token']
        assert written.replaced is None and written.waited == 0 and written.attempt_started == 1000.0
    (attempted,) = events_of(done, Kind.ACQUIRE_ATTEMPT)
    assert attempted.key == '{a|-, b|-}'
    assert dict(attempted.fields) == {'outcome': 'applied', 'takeover': False, 'duration': 0.0}


def test_a_set_with_a_live_holder_waits_writes_nothing_and_names_the_holder(engine: Engine) -> None:
    clock = FakeClock()
    hold(engine, clock, 'b', 'holder-b')
    renewals = [0]

    def the_holder_renews() -> None:        # a new version of b's row at every poll
        renewals[0] += 1
        engine.store.client.update_item(
            TableName=engine.schema.table_name, Key={'lock_key': 'b', 'sort_key': '-'},
            UpdateExpression='SET record_version_number = :v', ExpressionAttributeValues={':v': f'v{renewals[0]}'})
    engine.sent.clear()
    started = clock.now
    done = run(acquire_all(exclusive(engine, ['a', 'b'], retry_timeout=12.0), clock, lambda: False), engine, clock,
               on_sleep=the_holder_renews)
    assert isinstance(done.result, NotAll)
    assert done.result.blocking[0] is None and done.result.blocking[1]['owner_name'] == 'holder-b'
    assert engine.row('a') is None and engine.row('b')['owner_name'] == 'holder-b'
    assert set(engine.operations()) == {'transact_write_items'}        # the refusal is the poll: no reads
    assert clock.now - started == 12.0
    waits = events_of(done, Kind.WAITING)
    assert [event.key for event in waits] == ['{a|-, b|-}'] * len(waits)
    assert [dict(event.fields) for event in waits] == [{'owner': 'holder-b', 'retry_in': 5.0},
                                                       {'owner': 'holder-b', 'retry_in': 5.0},
                                                       {'owner': 'holder-b', 'retry_in': 2.0}]   # cut to what is left
    (timed_out,) = events_of(done, Kind.ACQUIRE_TIMED_OUT)
    assert timed_out.key == '{a|-, b|-}' and dict(timed_out.fields) == {'owner': 'holder-b', 'duration': 12.0}
    attempts = events_of(done, Kind.ACQUIRE_ATTEMPT)
    assert len(attempts) == len(tokens(engine)) == 4          # at 0, 5, 10 and 12 s
    assert all(event['outcome'] == 'failed' and event['takeover'] is False for event in attempts)


def test_a_dead_holders_key_is_taken_over_within_the_set_after_its_lease(engine: Engine) -> None:
    clock = FakeClock()
    dead = hold(engine, clock, 'b', 'dead')
    started = clock.now
    done = run(acquire_all(exclusive(engine, ['a', 'b']), clock, lambda: False), engine, clock)
    assert isinstance(done.result, AllWritten)
    waited = clock.now - started
    assert LEASE <= waited <= LEASE + 5.0
    first, second = done.result.written
    assert first.replaced is None and second.replaced['owner_name'] == 'dead'
    assert first.waited == second.waited == waited
    assert first.attempt_started == second.attempt_started == clock.now
    assert second.item['fencing_token'] > dead.item['fencing_token']
    assert engine.row('a')['owner_name'] == engine.row('b')['owner_name'] == 'me'
    (taking_over,) = events_of(done, Kind.TAKING_OVER)
    assert taking_over.key == 'b|-' and taking_over['owner'] == 'dead'
    last = events_of(done, Kind.ACQUIRE_ATTEMPT)[-1]
    assert last['outcome'] == 'applied' and last['takeover'] is True


def test_try_acquire_locks_repeated_takes_a_dead_holders_key_over_once_its_version_stayed_for_a_lease(
        engine: Engine) -> None:
    clock = FakeClock()
    hold(engine, clock, 'b', 'dead')
    memory = Observations()
    once = run(acquire_all(exclusive(engine, ['a', 'b'], retry_timeout=0.0), clock, lambda: False, memory),
               engine, clock)
    assert isinstance(once.result, NotAll) and once.result.blocking[1]['owner_name'] == 'dead'
    clock.now += LEASE
    forgetful = run(acquire_all(exclusive(engine, ['a', 'b'], retry_timeout=0.0), clock, lambda: False),
                    engine, clock)
    assert isinstance(forgetful.result, NotAll)      # a new memory first sees the version now
    again = run(acquire_all(exclusive(engine, ['a', 'b'], retry_timeout=0.0), clock, lambda: False, memory),
                engine, clock)
    assert isinstance(again.result, AllWritten) and again.result.written[1].replaced['owner_name'] == 'dead'
    assert len(memory) == 0          # the keys are ours now: what was seen there is over


def test_a_set_given_no_time_makes_its_attempts_and_reports_the_holder(engine: Engine) -> None:
    clock = FakeClock()
    hold(engine, clock, 'a', 'holder-a')
    engine.sent.clear()
    done = run(acquire_all(exclusive(engine, ['a', 'b'], retry_timeout=0.0), clock, lambda: False), engine, clock)
    assert isinstance(done.result, NotAll)
    assert done.result.blocking[0]['owner_name'] == 'holder-a' and done.result.blocking[1] is None
    assert len(tokens(engine)) == 1 and clock.now == 1000.0 and engine.row('b') is None
    (timed_out,) = events_of(done, Kind.ACQUIRE_TIMED_OUT)
    assert dict(timed_out.fields) == {'owner': 'holder-a', 'duration': 0.0}


def test_a_holder_gone_from_a_polled_key_is_seen_free_by_the_next_refusal(engine: Engine) -> None:
    """A key written as a poll ("where free") whose condition held is free, though another key
    of the set refused: the set then waits for that other key only, and reports it alone."""
    clock = FakeClock()
    hold(engine, clock, 'b', 'holder-b')
    moved = []

    def b_leaves_and_x_takes_a() -> None:
        if not moved:
            moved.append(True)
            engine.store.client.delete_item(TableName=engine.schema.table_name, Key={'lock_key': 'b', 'sort_key': '-'})
            hold(engine, clock, 'a', 'holder-a')
    done = run(acquire_all(exclusive(engine, ['a', 'b'], retry_timeout=7.0), clock, lambda: False), engine, clock,
               on_sleep=b_leaves_and_x_takes_a)
    assert isinstance(done.result, NotAll)
    assert done.result.blocking[0]['owner_name'] == 'holder-a' and done.result.blocking[1] is None
    assert [event['owner'] for event in events_of(done, Kind.WAITING)] == ['holder-b', 'holder-a']


def test_a_refusal_returned_without_the_row_is_read(engine: Engine) -> None:
    """An engine that ignores ReturnValuesOnConditionCheckFailure: the key refused where it was
    believed free is read, and its holder reported."""
    clock = FakeClock()
    hold(engine, clock, 'b', 'holder-b')
    engine.sent.clear()

    def refused_without_rows(store: Any, request: Any) -> Any:
        answer = store.send(request)
        for reason in answer.error.response['CancellationReasons']:
            reason.pop('Item', None)
        return answer
    engine.faults = [refused_without_rows]
    done = run(acquire_all(exclusive(engine, ['a', 'b'], retry_timeout=0.0), clock, lambda: False), engine, clock)
    assert engine.operations() == ['transact_write_items', 'get_item']
    assert engine.sent[1].params['Key'] == {'lock_key': 'b', 'sort_key': '-'}
    assert isinstance(done.result, NotAll) and done.result.blocking[1]['owner_name'] == 'holder-b'


# --- conflicts, lost answers and the read back ----------------------------------------------------

def test_a_conflicting_transaction_is_a_new_one_sent_again_soon_even_with_no_time_to_wait(engine: Engine) -> None:
    clock = FakeClock()
    engine.faults = [lambda store, request: cancelled('None', 'TransactionConflict')] * 2
    done = run(acquire_all(exclusive(engine, ['a', 'b'], retry_timeout=0.0), clock, lambda: False), engine, clock)
    assert isinstance(done.result, AllWritten)
    assert len(tokens(engine)) == 3 and len(set(tokens(engine))) == 3
    assert clock.now - 1000.0 == pytest.approx(0.025 + 0.05)        # backoff, not retry_period
    assert not events_of(done, Kind.WAITING)


def test_a_set_that_keeps_conflicting_gives_up_without_writing(engine: Engine) -> None:
    clock = FakeClock()
    engine.faults = [lambda store, request: cancelled('None', 'TransactionConflict')] * 100
    done = run(acquire_all(exclusive(engine, ['a', 'b'], retry_timeout=0.0), clock, lambda: False), engine, clock)
    assert isinstance(done.result, NotAll) and done.result.blocking == (None, None)
    assert len(tokens(engine)) == GUARD_ATTEMPTS + 1 and engine.row('a') is None


def test_a_lost_answer_is_asked_again_with_the_same_token_and_the_rows_read_back(engine: Engine) -> None:
    clock = FakeClock()
    engine.faults = [sent_then(LOST), lambda store, request: Applied({})]     # DynamoDB: idempotent
    done = run(acquire_all(exclusive(engine, ['a', 'b']), clock, lambda: False), engine, clock)
    assert isinstance(done.result, AllWritten)
    assert len(tokens(engine)) == 2 and len(set(tokens(engine))) == 1
    assert [written.item['fencing_token'] for written in done.result.written] == \
        [engine.row(key)['fencing_token'] for key in 'ab']
    assert clock.now - 1000.0 == pytest.approx(0.025)
    (attempted,) = events_of(done, Kind.ACQUIRE_ATTEMPT)
    assert attempted['outcome'] == 'applied'


def test_a_transaction_in_progress_is_asked_again_with_the_same_token(engine: Engine) -> None:
    clock = FakeClock()
    engine.faults = [lambda store, request: error('TransactionInProgressException'), passed]
    done = run(acquire_all(exclusive(engine, ['a', 'b']), clock, lambda: False), engine, clock)
    assert isinstance(done.result, AllWritten) and len(set(tokens(engine))) == 1 and len(tokens(engine)) == 2


def test_a_transaction_refused_as_invalid_is_an_error_naming_the_set_and_sent_once(engine: Engine) -> None:
    clock = FakeClock()
    engine.faults = [lambda store, request: error('ValidationException')]
    done = run(acquire_all(exclusive(engine, KEYS), clock, lambda: False), engine, clock)
    assert isinstance(done.error, DynamoDBLockError) and done.error.code == DynamoDBLockError.UNKNOWN
    assert done.error.message.startswith('Could not acquire {a|-, b|-, c|- and 2 more}: ')
    assert 'ValidationException' in str(done.error)
    assert done.error.__cause__ is not None and done.error.reason == Reason.VALIDATION
    assert len(engine.sent) == 1 and engine.row('a') is None
    (attempted,) = events_of(done, Kind.ACQUIRE_ATTEMPT)
    assert attempted.key == '{a|-, b|-, c|- and 2 more}' and attempted['outcome'] == 'failed'


def test_a_cancellation_whose_reasons_do_not_match_the_keys_is_an_error(engine: Engine) -> None:
    clock = FakeClock()
    engine.faults = [lambda store, request: cancelled('TransactionConflict')]     # one reason for two keys
    done = run(acquire_all(exclusive(engine, ['a', 'b']), clock, lambda: False), engine, clock)
    assert isinstance(done.error, DynamoDBLockError) and done.error.code == DynamoDBLockError.UNKNOWN
    assert done.error.message.startswith('Could not acquire {a|-, b|-}: ') and len(engine.sent) == 1
    engine.faults, engine.sent = [lambda store, request: cancelled('ValidationError', 'None')], []
    done = run(acquire_all(exclusive(engine, ['a', 'b']), clock, lambda: False), engine, clock)
    assert isinstance(done.error, DynamoDBLockError) and len(engine.sent) == 1     # neither refused nor conflicting


def test_an_answer_lost_every_time_is_settled_by_reading_the_rows(engine: Engine) -> None:
    clock = FakeClock()
    engine.faults = [sent_then(LOST), lambda store, request: LOST, lambda store, request: LOST]
    done = run(acquire_all(exclusive(engine, ['a', 'b']), clock, lambda: False), engine, clock)
    assert isinstance(done.result, AllWritten)        # it had landed: the read back shows our versions
    assert len(set(tokens(engine))) == 1 and len(tokens(engine)) == UNANSWERED_ATTEMPTS
    assert clock.now - 1000.0 == pytest.approx(0.025 + 0.05)
    assert [written.item['fencing_token'] for written in done.result.written] == \
        [engine.row(key)['fencing_token'] for key in 'ab']


def test_an_unknown_outcome_with_rows_unreadable_frees_what_landed_and_fails_naming_the_set(engine: Engine) -> None:
    clock = FakeClock()
    unreadable = lambda store, request: error('ValidationException', operation='TransactGetItems')  # noqa: E731
    engine.faults = [sent_then(LOST), lambda store, request: LOST, lambda store, request: LOST, unreadable]
    done = run(acquire_all(exclusive(engine, ['a', 'b']), clock, lambda: False), engine, clock)
    assert isinstance(done.error, DynamoDBLockError) and done.error.code == DynamoDBLockError.UNKNOWN
    assert done.error.message.startswith('Could not acquire {a|-, b|-}: ')
    assert done.error.reason == LOST.reason and done.error.__cause__ is LOST.error
    assert freed(engine.row('a')) and freed(engine.row('b'))
    assert engine.operations()[3:] == ['transact_get_items', 'get_item', 'update_item', 'get_item', 'update_item']


def test_a_committed_set_whose_rows_cannot_be_read_back_is_held_with_its_tokens_unknown(engine: Engine) -> None:
    clock = FakeClock()
    for unreadable in [lambda store, request: error('ValidationException', operation='TransactGetItems'),
                       lambda store, request: Applied({'Responses': [{}]})]:       # fewer rows than keys
        for key in KEYS:
            engine.store.client.delete_item(TableName=engine.schema.table_name, Key={'lock_key': key, 'sort_key': '-'})
        engine.faults, engine.sent = [passed, unreadable], []
        done = run(acquire_all(exclusive(engine, ['a', 'b']), clock, lambda: False), engine, clock)
        assert isinstance(done.result, AllWritten)
        assert [written.item['record_version_number'] for written in done.result.written] == \
            [engine.row(key)['record_version_number'] for key in 'ab']
        assert all('fencing_token' not in written.item for written in done.result.written)
        assert engine.operations() == ['transact_write_items', 'transact_get_items']


@pytest.mark.parametrize('busy', ['conflict', 'in-progress', 'throttled'])
def test_a_read_back_that_is_busy_is_asked_again(engine: Engine, busy: str) -> None:
    clock = FakeClock()
    answer = {'conflict': cancelled('TransactionConflict', 'None'),
              'in-progress': error('TransactionInProgressException', operation='TransactGetItems'),
              'throttled': error('ThrottlingException', operation='TransactGetItems')}[busy]
    engine.faults = [passed, lambda store, request: answer]
    done = run(acquire_all(exclusive(engine, ['a', 'b']), clock, lambda: False), engine, clock)
    assert isinstance(done.result, AllWritten)
    assert engine.operations() == ['transact_write_items', 'transact_get_items', 'transact_get_items']
    assert [written.item['fencing_token'] for written in done.result.written] == \
        [engine.row(key)['fencing_token'] for key in 'ab']
    assert clock.now - 1000.0 == pytest.approx(0.025)


def test_a_read_back_that_stays_busy_is_given_up_and_the_set_held_without_tokens(engine: Engine) -> None:
    clock = FakeClock()
    busy = lambda store, request: cancelled('TransactionConflict', 'None')  # noqa: E731
    engine.faults = [passed] + [busy] * GUARD_ATTEMPTS
    done = run(acquire_all(exclusive(engine, ['a', 'b']), clock, lambda: False), engine, clock)
    assert isinstance(done.result, AllWritten)
    assert all('fencing_token' not in written.item for written in done.result.written)
    assert engine.operations().count('transact_get_items') == GUARD_ATTEMPTS


# --- interrupted: whatever landed is freed -----------------------------------------------------------

def test_a_set_interrupted_after_its_transaction_landed_frees_every_key(engine: Engine) -> None:
    clock = FakeClock()
    done = run(acquire_all(exclusive(engine, ['a', 'b']), clock, lambda: False), engine, clock, interrupt_call=0)
    assert isinstance(done.error, KeyboardInterrupt) and done.settled == 1
    assert freed(engine.row('a')) and freed(engine.row('b'))
    assert engine.operations() == ['transact_write_items', 'update_item', 'update_item']   # known: no reads


def test_a_set_interrupted_while_reading_back_frees_every_key(engine: Engine) -> None:
    clock = FakeClock()
    done = run(acquire_all(exclusive(engine, ['a', 'b']), clock, lambda: False), engine, clock, interrupt_call=1)
    assert isinstance(done.error, KeyboardInterrupt) and done.settled == 1
    assert freed(engine.row('a')) and freed(engine.row('b'))
    assert engine.operations() == ['transact_write_items', 'transact_get_items', 'update_item', 'update_item']


def test_a_set_interrupted_after_an_unknown_outcome_frees_what_landed(engine: Engine) -> None:
    clock = FakeClock()
    engine.faults = [sent_then(LOST), lambda store, request: LOST, lambda store, request: LOST]
    done = run(acquire_all(exclusive(engine, ['a', 'b']), clock, lambda: False), engine, clock, interrupt_call=3)
    assert isinstance(done.error, KeyboardInterrupt) and done.settled == 1
    assert freed(engine.row('a')) and freed(engine.row('b'))
    assert engine.operations()[4:] == ['get_item', 'update_item', 'get_item', 'update_item']   # read first


def test_a_refused_set_interrupted_leaves_the_holders_row_alone(engine: Engine) -> None:
    clock = FakeClock()
    held = hold(engine, clock, 'b', 'holder-b')
    engine.sent.clear()
    done = run(acquire_all(exclusive(engine, ['a', 'b']), clock, lambda: False), engine, clock, interrupt_call=0)
    assert isinstance(done.error, KeyboardInterrupt) and done.settled == 1
    assert engine.operations() == ['transact_write_items']       # cancelled: nothing of ours landed
    assert engine.row('b')['record_version_number'] == held.item['record_version_number'] and engine.row('a') is None


def test_a_set_interrupted_before_its_answer_watches_the_keys_for_a_late_landing(engine: Engine) -> None:
    clock = FakeClock()
    started = clock.now
    done = run(acquire_all(exclusive(engine, ['a', 'b']), clock, lambda: False), engine, clock, interrupt_call=0,
               unsent=True)
    assert isinstance(done.error, KeyboardInterrupt) and engine.row('a') is None and engine.row('b') is None
    assert set(engine.operations()) == {'get_item'}
    assert {request.params['Key']['lock_key'] for request in engine.sent} == {'a', 'b'}
    assert clock.now - started >= LEASE       # each key watched for one lease
    assert len(engine.held_back) == 1          # the transaction itself was never answered


def test_a_set_interrupted_while_waiting_writes_nothing_more(engine: Engine) -> None:
    clock = FakeClock()
    hold(engine, clock, 'b', 'holder-b')
    closed = []
    done = run(acquire_all(exclusive(engine, ['a', 'b']), clock, lambda: bool(closed)), engine, clock,
               on_sleep=lambda: closed.append(True))
    assert isinstance(done.error, DynamoDBLockError) and done.error.code == DynamoDBLockError.CLIENT_SHUTDOWN
    assert engine.row('a') is None


# --- how a set is named ----------------------------------------------------------------------------

def test_a_set_is_named_by_its_first_three_keys_and_how_many_more() -> None:
    class Key:
        def __init__(self, name: str) -> None:
            self.unique_identifier = name
    assert set_name([Key('a')]) == '{a}'
    assert set_name([Key(name) for name in 'abc']) == '{a, b, c}'
    assert set_name([Key(name) for name in 'abcd']) == '{a, b, c and 1 more}'
    assert set_name([Key(name) for name in 'abcdefg']) == '{a, b, c and 4 more}'


# --- free_all: the set's release in one transaction -------------------------------------------------------

def held_lock(written: Written, key: str) -> Any:
    from python_dynamodb_lock._core.state import LockState

    class Lock:
        partition_key = key
        sort_key = '-'
        additional_attributes: Dict[str, Any] = {}
        _state = LockState(written.item['record_version_number'], 0, 0.0, LEASE)
    return Lock()


def test_a_freed_set_gives_every_row_a_new_version_and_every_call_its_own_token(engine: Engine) -> None:
    from python_dynamodb_lock._core.multi import free_all
    clock = FakeClock()
    tokens_sent = []
    for _ in range(2):
        locks = [held_lock(hold(engine, clock, key, 'me'), key) for key in ('a', 'b')]
        before = [engine.row(key)['record_version_number'] for key in 'ab']
        engine.sent.clear()
        assert isinstance(run(free_all(engine.schema, locks, clock, 3600.0, True), engine, clock).result, Applied)
        after = [engine.row(key)['record_version_number'] for key in 'ab']
        assert len(set(before + after)) == 4          # a new version per row: its watchers see it change
        tokens_sent += tokens(engine)
    assert len(set(tokens_sent)) == 2


@pytest.mark.parametrize('reasons, sends', [
    (('TransactionConflict', 'TransactionConflict'), 2),     # every key conflicted: sent again
    (('ConditionalCheckFailed', 'TransactionConflict'), 1),  # a key was lost: final, whatever else conflicted
    (('ValidationError', 'None'), 1),                        # neither: final
])
def test_a_cancelled_free_is_sent_again_only_when_it_conflicted_and_nothing_refused(
        engine: Engine, reasons: Any, sends: int) -> None:
    from python_dynamodb_lock._core.multi import free_all
    clock = FakeClock()
    locks = [held_lock(hold(engine, clock, key, 'me'), key) for key in ('a', 'b')]
    engine.sent.clear()
    engine.faults = [lambda store, request: cancelled(*reasons)]
    run(free_all(engine.schema, locks, clock, 3600.0, True), engine, clock)
    assert len(engine.sent) == sends


def test_a_conflict_after_a_lost_answer_keeps_the_token(engine: Engine) -> None:
    from python_dynamodb_lock._core.multi import free_all
    clock = FakeClock()
    locks = [held_lock(hold(engine, clock, key, 'me'), key) for key in ('a', 'b')]
    engine.sent.clear()
    engine.faults = [lambda store, request: LOST, lambda store, request: cancelled('TransactionConflict', 'None')]
    answer = run(free_all(engine.schema, locks, clock, 3600.0, True), engine, clock).result
    assert isinstance(answer, Applied) and len(tokens(engine)) == 3 and len(set(tokens(engine))) == 1


# --- acquire_first: which key is taken, and when each key polls ------------------------------------------

class Deadline:
    """Fail a test whose protocol loops without end (yielding nothing): after ``seconds`` of this
    process's CPU time (not wall time: a busy machine does not trip it), SIGPROF raises."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def __enter__(self) -> None:
        import signal

        def expired(signum: int, frame: Any) -> None:
            raise TimeoutError('the protocol did not end: a loop without end')
        self.previous = signal.signal(signal.SIGPROF, expired)
        signal.setitimer(signal.ITIMER_PROF, self.seconds)

    def __exit__(self, *exc: Any) -> None:
        import signal
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGPROF, self.previous)


def first_of(engine: Engine, clock: FakeClock, attempts: List[Any], memory: Any = None, woken_at: int = -1,
             call_seconds: float = 0.0, waking: Any = None) -> Any:
    """Drive acquire_first: each call takes ``call_seconds`` of the clock; the sleep numbered
    ``woken_at`` is answered True (woken early, after ``waking()``). The result, and the keys
    read, with when."""
    from python_dynamodb_lock._core.effects import Call, Emit, Sleep
    from python_dynamodb_lock._core.first import acquire_first
    protocol = acquire_first(attempts, clock, lambda: False, memory)
    reads: List[Any] = []
    value: Any = None
    sleeps = 0
    with Deadline(20.0):
        while True:
            try:
                effect = protocol.send(value)
            except StopIteration as done:
                return done.value, reads
            value = None
            if isinstance(effect, Call):
                if effect.request.operation == 'get_item':
                    reads.append((effect.request.params['Key']['lock_key'], clock.now))
                value = engine.send(effect.request)
                clock.now += call_seconds
            elif isinstance(effect, Sleep):
                assert effect.seconds > 0
                value = sleeps == woken_at
                sleeps += 1
                if value and waking is not None:
                    waking()
                if not value:
                    clock.now += effect.seconds
                assert sleeps < 1000, 'a wait that never ends'
            else:
                assert isinstance(effect, Emit), effect


def renewing(engine: Engine, keys: Any) -> Any:
    """A holder renewing each of ``keys`` at every call (a live holder): a new version each time."""
    count = [0]
    send = engine.send

    def send_and_renew(request: Any) -> Any:
        answer = send(request)
        count[0] += 1
        for key in keys:
            engine.store.client.update_item(
                TableName=engine.schema.table_name, Key={'lock_key': key, 'sort_key': '-'},
                UpdateExpression='SET record_version_number = :v', ExpressionAttributeValues={':v': f'v{count[0]}'})
        return answer
    engine.send = send_and_renew      # type: ignore[method-assign]


def test_each_key_polls_only_when_its_own_wait_is_over_though_calls_take_time(engine: Engine) -> None:
    from python_dynamodb_lock._core.first import NoneFree
    clock = FakeClock()
    hold(engine, clock, 'a', 'holder-a')
    hold(engine, clock, 'b', 'holder-b')
    renewing(engine, 'ab')
    result, reads = first_of(engine, clock, exclusive(engine, ['a', 'b'], retry_timeout=30.0), call_seconds=1.0)
    assert isinstance(result, NoneFree)
    for key in 'ab':
        times = [at for read, at in reads if read == key]
        assert len(times) >= 4
        assert all(later - earlier >= 5.0 for earlier, later in zip(times, times[1:]))


def test_woken_early_every_key_polls_at_once_the_one_due_first_first_and_wins(engine: Engine) -> None:
    from python_dynamodb_lock._core.first import FirstWritten
    clock = FakeClock()
    hold(engine, clock, 'a', 'holder-a')
    hold(engine, clock, 'b', 'holder-b')
    import dataclasses
    attempts = [dataclasses.replace(attempt(engine, 'a', 'me', shared=False), retry_period=10.0),  # every 10 s,
                attempt(engine, 'b', 'me', shared=False)]          # b every 5 s: b's wait ends first

    def both_holders_leave() -> None:
        for key in 'ab':
            engine.store.client.delete_item(TableName=engine.schema.table_name,
                                            Key={'lock_key': key, 'sort_key': '-'})
    started = clock.now
    result, reads = first_of(engine, clock, attempts, woken_at=0, waking=both_holders_leave)
    assert isinstance(result, FirstWritten) and result.index == 1 and clock.now == started
    assert [key for key, _ in reads] == ['b']          # b looked first, was free, and won
    assert engine.row('a') is None and engine.row('b')['owner_name'] == 'me'


def test_acquire_first_lock_with_no_time_repeated_takes_a_dead_holders_key_over(engine: Engine) -> None:
    from python_dynamodb_lock._core.first import FirstWritten, NoneFree
    clock = FakeClock()
    hold(engine, clock, 'a', 'dead')
    memory = Observations()
    once, _ = first_of(engine, clock, exclusive(engine, ['a'], retry_timeout=0.0), memory)
    assert isinstance(once, NoneFree)
    clock.now += LEASE
    again, _ = first_of(engine, clock, exclusive(engine, ['a'], retry_timeout=0.0), memory)
    assert isinstance(again, FirstWritten) and again.written.replaced['owner_name'] == 'dead'


def test_an_interruption_of_a_keys_write_in_flight_is_settled_by_that_key(engine: Engine) -> None:
    from python_dynamodb_lock._core.first import acquire_first
    clock = FakeClock()
    held = hold(engine, clock, 'a', 'holder-a')
    engine.sent.clear()
    done = run(acquire_first(exclusive(engine, ['a', 'b']), clock, lambda: False), engine, clock, interrupt_call=1)
    assert isinstance(done.error, KeyboardInterrupt) and done.settled == 1
    assert freed(engine.row('b'))                       # b's write landed: b's undo freed it
    assert engine.row('a')['record_version_number'] == held.item['record_version_number']


def test_a_refusal_without_the_row_whose_read_fails_says_which_key_it_read(engine: Engine) -> None:
    from test_core_protocol import SERVER_ERROR
    clock = FakeClock()
    hold(engine, clock, 'b', 'holder-b')

    def refused_without_rows(store: Any, request: Any) -> Any:
        answer = store.send(request)
        for reason in answer.error.response['CancellationReasons']:
            reason.pop('Item', None)
        return answer
    engine.faults = [refused_without_rows, lambda store, request: SERVER_ERROR]
    done = run(acquire_all(exclusive(engine, ['a', 'b'], retry_timeout=0.0), clock, lambda: False), engine, clock)
    assert isinstance(done.error, DynamoDBLockError) and done.error.code == DynamoDBLockError.UNKNOWN
    assert done.error.message.startswith("Could not read lock 'b'/'-' in table ")


def test_a_set_waits_to_the_end_of_its_retry_timeout_however_little_is_left(engine: Engine) -> None:
    clock = FakeClock()
    hold(engine, clock, 'b', 'holder-b')
    done = run(acquire_all(exclusive(engine, ['a', 'b'], retry_timeout=10.5), clock, lambda: False), engine, clock,
               on_sleep=lambda: engine.store.client.update_item(
                   TableName=engine.schema.table_name, Key={'lock_key': 'b', 'sort_key': '-'},
                   UpdateExpression='SET record_version_number = :v', ExpressionAttributeValues={':v': str(clock.now)}))
    assert isinstance(done.result, NotAll)
    assert [event['retry_in'] for event in events_of(done, Kind.WAITING)] == [5.0, 5.0, 0.5]
    assert events_of(done, Kind.ACQUIRE_TIMED_OUT)[0]['duration'] == 10.5


def test_a_set_does_not_watch_the_session_of_a_key_held_under_one(engine: Engine) -> None:
    """A transaction of several keys has no room to end a session: a key held under a client
    session is waited for as any other (its row's own lease), its session row never read."""
    clock = FakeClock()
    held = attempt(engine, 'b', 'holder', shared=False, attributes={'lock_session': 'python_dynamodb_lock/session/x/1'})
    assert isinstance(run(acquire(held, clock, lambda: False), engine, clock).result, Written)
    engine.sent.clear()
    done = run(acquire_all(exclusive(engine, ['a', 'b'], retry_timeout=10.0, sessions=True), clock, lambda: False),
               engine, clock)
    assert isinstance(done.result, NotAll) and set(engine.operations()) == {'transact_write_items'}


# --- a refusal by a holder gone when its row is read; conflicts after a refusal ------------------

def flapping_holder(engine: Engine, clock: FakeClock) -> Any:
    """A fault: a holder takes key ``a`` just before the transaction (refused, the row not
    returned, as an engine that ignores ALL_OLD answers) and leaves just after it; a read passes."""
    def fault(store: Any, request: Any) -> Any:
        from python_dynamodb_lock._wire.requests import Request
        if request.operation != 'transact_write_items':
            return store.send(request)
        store.send(Request('put_item', {'TableName': engine.schema.table_name, 'Item': {
            'lock_key': 'a', 'sort_key': '-', 'owner_name': 'flapper', 'record_version_number': str(len(engine.sent)),
            'lease_duration': 30, 'expiry_time': int(clock.time() + 3600)}}))
        answer = store.send(request)
        for reason in answer.error.response['CancellationReasons']:
            reason.pop('Item', None)
        store.client.delete_item(TableName=engine.schema.table_name, Key={'lock_key': 'a', 'sort_key': '-'})
        return answer
    return fault


def test_a_set_refused_by_a_holder_gone_when_read_is_sent_again_at_once_three_times_then_waits(
        engine: Engine) -> None:
    clock = FakeClock()
    engine.faults = [flapping_holder(engine, clock)] * 40
    done = run(acquire_all(exclusive(engine, ['a', 'b'], retry_timeout=5.0), clock, lambda: False), engine, clock)
    assert isinstance(done.result, NotAll) and engine.row('a') is None and engine.row('b') is None
    # Each round: the refused transaction, the read of the key it found free, three times more at
    # once; then the retry period; a second round the same; then the time is up.
    assert engine.operations() == ['transact_write_items', 'get_item'] * 8
    assert [event['retry_in'] for event in events_of(done, Kind.WAITING)] == [5.0] and clock.now == 1005.0


def test_a_set_refused_then_conflicting_has_its_whole_conflict_budget(engine: Engine) -> None:
    clock = FakeClock()
    conflict = lambda store, request: cancelled('None', 'TransactionConflict')  # noqa: E731
    engine.faults = [flapping_holder(engine, clock), passed] + [conflict] * GUARD_ATTEMPTS + [passed]
    done = run(acquire_all(exclusive(engine, ['a', 'b'], retry_timeout=0.0), clock, lambda: False), engine, clock)
    assert isinstance(done.result, AllWritten)
    assert len(tokens(engine)) == GUARD_ATTEMPTS + 2
    assert engine.row('a')['owner_name'] == engine.row('b')['owner_name'] == 'me'


def test_a_set_that_took_a_dead_holder_over_still_says_so_when_its_rows_cannot_be_read_back(
        engine: Engine) -> None:
    clock = FakeClock()
    hold(engine, clock, 'b', 'dead')
    memory = Observations()
    once = run(acquire_all(exclusive(engine, ['a', 'b'], retry_timeout=0.0), clock, lambda: False, memory),
               engine, clock)
    assert isinstance(once.result, NotAll)
    clock.now += LEASE
    def read_back_fails(store: Any, request: Any) -> Any:
        if request.operation == 'transact_get_items':
            return error('ValidationException', operation='TransactGetItems')
        return store.send(request)
    engine.faults = [read_back_fails] * 10
    again = run(acquire_all(exclusive(engine, ['a', 'b'], retry_timeout=0.0), clock, lambda: False, memory),
                engine, clock)
    assert isinstance(again.result, AllWritten)
    first, second = again.result.written
    assert first.replaced is None and second.replaced['owner_name'] == 'dead'
    assert 'fencing_token' not in second.item and engine.row('b')['owner_name'] == 'me'


def test_a_set_with_under_a_second_to_wait_still_marks_a_key_held_by_readers(engine: Engine) -> None:
    """Only a set given no time at all (try_acquire_locks) leaves readers unmarked."""
    clock = FakeClock()
    assert isinstance(run(acquire(attempt(engine, 'a', 'reader'), clock, lambda: False), engine, clock).result,
                      Written)
    markers: List[Any] = []
    done = run(acquire_all(exclusive(engine, ['a', 'b'], retry_timeout=0.5), clock, lambda: False), engine, clock,
               on_sleep=lambda: markers.append(engine.row('a').get('writer_waiting')))
    assert isinstance(done.result, NotAll) and done.result.blocking[0]['owner_name'] == 'reader'
    assert markers and markers[0]['owner'] == 'me'
    assert 'writer_waiting' not in engine.row('a')          # taken off when the set gave up


def test_a_polled_key_that_conflicted_is_still_held_by_the_holder_seen_there(engine: Engine) -> None:
    """Only a polled key's "free" condition that held (no reason) says its holder has gone; one
    that conflicted with another transaction says nothing: the set still reports that holder."""
    clock = FakeClock()
    hold(engine, clock, 'a', 'holder-a')
    hold(engine, clock, 'b', 'holder-b')

    def a_conflicts(store: Any, request: Any) -> Any:
        answer = store.send(request)
        answer.error.response['CancellationReasons'][0] = {'Code': 'TransactionConflict'}
        return answer
    engine.faults = [passed, a_conflicts]
    done = run(acquire_all(exclusive(engine, ['a', 'b'], retry_timeout=5.0), clock, lambda: False), engine, clock)
    assert isinstance(done.result, NotAll) and len(tokens(engine)) == 2
    assert [row['owner_name'] for row in done.result.blocking] == ['holder-a', 'holder-b']
    (timed_out,) = events_of(done, Kind.ACQUIRE_TIMED_OUT)
    assert timed_out['owner'] == 'holder-a'
