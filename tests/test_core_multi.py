"""``acquire_all`` (``acquire_locks``) with no engine: scripted answers to its transactions.

The rules of one transaction for several keys: a refusal is the poll (the rows in the way come
with it, no reads), a holder presumed dead is taken over within the set after its version stayed
the same for its lease, conflicts are sent again even with no time to wait, an engine that
returns no row with a refusal is read, and a lost answer is asked again with the same token.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional

from botocore.exceptions import ClientError

from helpers import assigned_values
from python_dynamodb_lock._core.acquire import AcquireAttempt
from python_dynamodb_lock._core.answers import Applied, judge_error
from python_dynamodb_lock._core.events import Kind
from python_dynamodb_lock._core.guard import GUARD_ATTEMPTS, UNANSWERED_ATTEMPTS
from python_dynamodb_lock._core.multi import AllWritten, NotAll, acquire_all
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
