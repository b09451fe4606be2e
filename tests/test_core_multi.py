"""``acquire_all`` (``acquire_locks``) with no engine: scripted answers to its transactions.

The rules of one transaction for several keys: a refusal is the poll (the rows in the way come
with it, no reads), a holder presumed dead is taken over within the set after its version stayed
the same for its lease, conflicts are sent again even with no time to wait, an engine that
returns no row with a refusal is read, and a lost answer is asked again with the same token.
"""
from __future__ import annotations

from decimal import Decimal
from typing import Any, Dict, List, Optional

import pytest
from boto3.dynamodb.types import TypeSerializer
from botocore.exceptions import ClientError

from helpers import assigned_values
from python_dynamodb_lock._core.acquire import Watch
from python_dynamodb_lock._core.write import AcquireAttempt
from python_dynamodb_lock._core.answers import Applied, judge_error
from python_dynamodb_lock._core.effects import Call, Emit, Settle, Sleep
from python_dynamodb_lock._core.events import Kind
from python_dynamodb_lock._core.guard import GUARD_ATTEMPTS, UNANSWERED_ATTEMPTS
from python_dynamodb_lock._core.multi import AllWritten, NotAll, acquire_all
from python_dynamodb_lock import DynamoDBLockError
from test_core_protocol import LEASE, LOST_ANSWER, SCHEMA, FakeClock, drive, row, scripted

KEYS = ('a', 'b')


def attempts(retry_timeout: float = 100.0, retry_period: float = 5.0) -> List[AcquireAttempt]:
    return [AcquireAttempt(SCHEMA, key, '-', f'{key}|-', SCHEMA.lock_item(key, '-', 'me', LEASE, '', 0, {}),
                           retry_period, retry_timeout, 3600.0, LEASE) for key in KEYS]


def typed(item: Dict[str, Any]) -> Dict[str, Any]:
    return {name: {'N': str(value)} if isinstance(value, (int, float)) else {'S': value}
            for name, value in item.items()}


def cancelled(*reasons: Optional[Dict[str, Any]], status: int = 400) -> Any:
    """A TransactionCanceledException; a reason is a refusing row, 'conflict', or None (no failure)."""
    listed = [{'Code': 'None'} if reason is None else {'Code': 'TransactionConflict'} if reason == 'conflict'
              else {'Code': 'ConditionalCheckFailed', **({'Item': typed(reason)} if reason else {})}
              for reason in reasons]
    return judge_error(ClientError({'Error': {'Code': 'TransactionCanceledException', 'Message': 'scripted'},
                                    'CancellationReasons': listed,      # type: ignore[typeddict-unknown-key]
                                    'ResponseMetadata': {'HTTPStatusCode': status, 'RetryAttempts': 0}},
                                   'TransactWriteItems'))


def committed_rows(transactions: List[Any]) -> Any:
    """Answers a TransactGetItems with the rows the last transaction wrote (with tokens)."""
    def answer(request: Any) -> Applied:
        actions = transactions[-1].params['TransactItems']
        return Applied({'Responses': [{'Item': {'record_version_number': assigned_values(action['Update'])
                                                ['record_version_number'],
                                                'fencing_token': 7 + index}}
                                      for index, action in enumerate(actions)]})
    return answer


def test_the_refusal_is_the_poll_and_a_dead_holder_is_taken_over_after_its_lease() -> None:
    clock = FakeClock()
    sent: List[Any] = []

    def transaction(request: Any) -> Any:
        sent.append(request)
        action = request.params['TransactItems'][1]['Update']
        if action['ConditionExpression'].startswith('record_version_number'):       # the takeover of b
            return Applied({})
        return cancelled(None, row('v1', owner='dead'))

    polls = int(LEASE // 5)       # refusals: the first one is the first sight of the holder's version
    run = drive(acquire_all(attempts(), clock, lambda: False),
                scripted(*([transaction] * (polls + 1)), committed_rows(sent)), clock=clock)
    assert isinstance(run.result, AllWritten)
    assert [call.operation for call in run.calls] == ['transact_write_items'] * (polls + 1) + ['transact_get_items']
    takeover = sent[-1].params['TransactItems'][1]['Update']
    assert takeover['ExpressionAttributeValues'][':expected_version_0'] == 'v1'
    assert 'attribute_not_exists' in sent[-1].params['TransactItems'][0]['Update']['ConditionExpression']
    assert run.result.written[1].replaced['owner_name'] == 'dead' and run.result.written[0].replaced is None
    assert [written.item['fencing_token'] for written in run.result.written] == [7, 8]
    assert Kind.TAKING_OVER in run.events
    assert sum(run.sleeps) >= LEASE


def test_conflicts_are_sent_again_even_with_no_time_to_wait_then_given_up() -> None:
    conflict = cancelled(None, 'conflict')
    run = drive(acquire_all(attempts(retry_timeout=0.0), FakeClock(), lambda: False),
                scripted(*[conflict] * (GUARD_ATTEMPTS + 1)), clock=FakeClock())
    assert isinstance(run.result, NotAll) and run.result.blocking == (None, None)
    assert len(run.calls) == GUARD_ATTEMPTS + 1 and Kind.ACQUIRE_TIMED_OUT in run.events


def test_a_refusal_without_the_row_is_read_and_the_set_waits_for_the_holder() -> None:
    held = {'Item': row('v9', owner='other')}
    run = drive(acquire_all(attempts(retry_timeout=0.0), FakeClock(), lambda: False),
                scripted(cancelled(None, {}), Applied(held)), clock=FakeClock())
    assert [call.operation for call in run.calls] == ['transact_write_items', 'get_item']
    assert isinstance(run.result, NotAll) and run.result.blocking[1]['owner_name'] == 'other'
    assert run.result.blocking[0] is None


def test_a_lost_answer_is_asked_again_with_the_same_token_then_settled_by_one_read() -> None:
    nothing = Applied({'Responses': [{}, {}]})
    run = drive(acquire_all(attempts(), FakeClock(), lambda: False),
                scripted(*[LOST_ANSWER] * UNANSWERED_ATTEMPTS, nothing), clock=FakeClock())
    tokens = {call.params['ClientRequestToken'] for call in run.calls if call.operation == 'transact_write_items'}
    assert len(tokens) == 1 and run.calls[-1].operation == 'transact_get_items'
    assert run.error is not None and run.error.code == 'UNKNOWN'


# --- shared holders in the way: the writer-waiting marker of acquire, per key ------------------

def shared_in_the_way(version: str = 'row-1') -> Dict[str, Any]:
    """A shared row of this package on a key never held exclusively (no fencing token)."""
    lease = Decimal(repr(LEASE))
    holders = {'h1': {'owner': 'reader', 'version': version, 'lease': lease}}
    return {'lock_key': 'b', 'sort_key': '-', 'owner_name': 'reader', 'record_version_number': version,
            'lease_duration': lease, 'shared_holders': holders}


def cancelled_by_readers() -> Any:
    """The set's transaction refused by the shared holders of b (the row typed, as botocore leaves it)."""
    serializer = TypeSerializer()
    typed_row = {name: serializer.serialize(value) for name, value in shared_in_the_way().items()}
    answer = cancelled(None, {'placeholder': 'x'})
    answer.error.response['CancellationReasons'][1]['Item'] = typed_row
    return answer


def next_effect(protocol: Any, value: Any, events: List[Kind]) -> Any:
    """Send ``value``; the next effect that is not an Emit (those are noted in ``events``)."""
    effect = protocol.send(value)
    while isinstance(effect, Emit):
        events.append(effect.event.kind)
        effect = protocol.send(None)
    return effect


def operation(effect: Any) -> str:
    assert isinstance(effect, Call), effect
    if effect.request.operation == 'update_item':
        return 'mark' if 'writer_waiting =' in effect.request.params['UpdateExpression'] else 'unmark'
    return str(effect.request.operation)


@pytest.mark.parametrize('interruption', ['while-waiting', 'failed-transaction'])
def test_a_set_facing_shared_holders_sets_a_marker_and_takes_it_off_apart_from_the_caller(interruption: str) -> None:
    clock, events = FakeClock(), []
    protocol = acquire_all(attempts(), clock, lambda: False)
    assert operation(next_effect(protocol, None, events)) == 'transact_write_items'
    mark = next_effect(protocol, cancelled_by_readers(), events)      # at once, as acquire marks
    assert operation(mark) == 'mark' and mark.request.params['Key'] == {'lock_key': 'b', 'sort_key': '-'}
    assert isinstance(next_effect(protocol, Applied({}), events), Sleep)     # readers still in the way
    assert operation(next_effect(protocol, False, events)) == 'mark'          # refreshed at every poll
    assert operation(next_effect(protocol, Applied({}), events)) == 'transact_write_items'
    if interruption == 'while-waiting':
        assert isinstance(next_effect(protocol, cancelled_by_readers(), events), Sleep)   # marked: not again
        settle = protocol.throw(KeyboardInterrupt())
    else:
        settle = next_effect(protocol, judge_error(ClientError(
            {'Error': {'Code': 'ValidationException', 'Message': 'scripted'}}, 'TransactWriteItems')), events)
    assert isinstance(settle, Settle)   # run by the driver apart from the caller: no second interruption stops it
    assert [operation(effect) for effect in settle.protocol] == ['unmark']
    with pytest.raises((KeyboardInterrupt, DynamoDBLockError)):
        protocol.send(None)
    assert Kind.UNFENCED_HOLDER not in events      # a shared row of ours is no published client's


def test_a_set_that_times_out_takes_its_marker_off_and_one_given_no_time_sets_none() -> None:
    calls: List[str] = []

    def answer(request: Any) -> Any:
        calls.append(operation(Call(request)))
        return cancelled_by_readers() if request.operation == 'transact_write_items' else Applied({})
    clock = FakeClock()
    run = drive(acquire_all(attempts(retry_timeout=10.0), clock, lambda: False), answer, clock=clock)
    assert isinstance(run.result, NotAll) and run.result.blocking[1]['owner_name'] == 'reader'
    assert calls[:2] == ['transact_write_items', 'mark'] and calls[-1] == 'unmark' and calls.count('unmark') == 1
    assert Kind.UNFENCED_HOLDER not in run.events
    calls.clear()
    run = drive(acquire_all(attempts(retry_timeout=0.0), FakeClock(), lambda: False), answer, clock=FakeClock())
    assert isinstance(run.result, NotAll) and calls == ['transact_write_items']


def test_only_a_row_without_token_and_without_shared_holders_is_reported_unfenced() -> None:
    for blocking, reported in [(row('v1'), True), (shared_in_the_way(), False)]:
        watch = Watch(attempts()[1])
        watch.see(blocking)
        run = drive(watch.may_write(FakeClock()), scripted())
        assert (Kind.UNFENCED_HOLDER in run.events) is reported
