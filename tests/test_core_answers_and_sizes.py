"""Two pure rules with no engine: how each statement of a batched heartbeat is judged
(``judge_batch``: applied, refused with the row in the way, failed and whether it may have been
applied), and how big DynamoDB counts a value (``size_of``: the guarded write is refused before
anything is sent when DynamoDB would refuse it for its size)."""
from __future__ import annotations

from decimal import Decimal
from typing import Any, Dict, List

import pytest
from boto3.dynamodb.types import Binary
from botocore.exceptions import ClientError

from python_dynamodb_lock._core.answers import Applied, Failed, Refused, judge_answer, judge_batch
from python_dynamodb_lock._core.guard import MAX_TRANSACTION_BYTES, check_actions, size_of
from python_dynamodb_lock import Reason
from python_dynamodb_lock._model.schema import Schema

SCHEMA = Schema('locks', 'lock_key', 'sort_key', 'expiry_time')


def response(*statements: Any, retries: int = 0) -> Dict[str, Any]:
    return {'Responses': [{'Error': error} if error else {} for error in statements],
            'ResponseMetadata': {'HTTPStatusCode': 200, 'RetryAttempts': retries, 'RequestId': 'r'}}


def test_a_batch_answer_of_the_wrong_length_is_a_server_error_for_every_statement() -> None:
    answers = judge_batch(response(None), 2)
    assert len(answers) == 2
    for answer in answers:
        assert isinstance(answer, Failed) and answer.maybe_applied and answer.reason == Reason.UNREACHABLE
        assert isinstance(answer.error, ClientError)
        assert answer.error.operation_name == 'BatchExecuteStatement'
        assert answer.error.response['Error'] == {'Code': 'UnexpectedResponse', 'Message': '1 answers to 2 statements'}
        assert answer.error.response['ResponseMetadata']['RequestId'] == 'r'
        assert answer.error.response['ResponseMetadata']['HTTPStatusCode'] == 500     # read as a server error
    assert [type(answer) for answer in judge_batch({}, 1)] == [Failed]       # no Responses at all


def test_each_statement_of_a_batch_is_judged_in_order() -> None:
    row = {'record_version_number': 'v', 'owner_name': 'thief'}
    answers = judge_batch(response(None, {'Code': 'ConditionalCheckFailed', 'Item': row},
                                   {'Code': 'ConditionalCheckFailed'},
                                   {'Code': 'InternalServerError', 'Message': 'try again'},
                                   {'Code': 'ValidationError', 'Message': 'bad'}, {'Message': 'no code'}), 6)
    applied, refused, refused_without_row, server, invalid, unknown = answers
    assert applied == Applied({})
    assert refused == Refused(row) and refused.item is not row      # a copy of the row in the way
    assert refused_without_row == Refused(None)
    assert isinstance(server, Failed) and server.maybe_applied and server.code == 'InternalServerError'
    assert server.error.response['Error']['Message'] == 'try again'
    assert server.error.response['ResponseMetadata']['HTTPStatusCode'] == 500
    assert server.error.response['ResponseMetadata']['RequestId'] == 'r'
    assert isinstance(invalid, Failed) and not invalid.maybe_applied and invalid.code == 'ValidationError'
    assert invalid.error.response['ResponseMetadata']['HTTPStatusCode'] == 400
    assert isinstance(unknown, Failed) and unknown.code == '' and not unknown.maybe_applied
    assert not any(answer.retryable_statement for answer in (server, invalid, unknown))


def test_after_botocore_retried_the_call_any_statement_may_have_applied_and_a_refusal_says_so() -> None:
    refused, throttled = judge_batch(response({'Code': 'ConditionalCheckFailed', 'Item': {'a': 1}},
                                              {'Code': 'ThrottlingError'}, retries=2), 2)
    assert refused == Refused({'a': 1}, retried=True)
    assert isinstance(throttled, Failed) and throttled.maybe_applied and not throttled.retryable_statement
    first_try = judge_batch(response({'Code': 'ThrottlingError'}), 1)[0]
    assert first_try.retryable_statement and not first_try.maybe_applied
    assert judge_answer('batch_execute_statement', {'Statements': [{}, {}]}, response(None, None)) == [Applied({})] * 2
    assert judge_answer('update_item', {}, {'Attributes': {}}) == Applied({'Attributes': {}})


@pytest.mark.parametrize('value, size', [
    ('', 0), ('abc', 3), ('héllo', 6), ('\U0001F512', 4), ('\ud800', 3),
    (b'', 0), (b'abc', 3), (bytearray(b'ab'), 2), (Binary(b'abcd'), 4),
    (True, 1), (False, 1), (None, 1),
    (0, 2), (7, 2), (12, 2), (123, 3), (12345, 4), (-1, 2), (10 ** 37, 20),
    (Decimal('1.5'), 3), (Decimal('123.456'), 5), (1.25, 3), (float('inf'), 5), (float('nan'), 5),
    ({}, 3), ({'a': 'bc'}, 7), ({'ab': {'c': 1}}, 3 + 2 + (3 + 1 + 2 + 1) + 1), ({1: 'x'}, 3 + 1 + 1 + 1),
    ([], 3), (['a', 1], 3 + 2 + 3), (('ab',), 6), ({'abc'}, 7), (frozenset({b'x'}), 5),
    (object(), 64),
])
def test_a_values_size_is_counted_as_dynamodb_counts_it(value: Any, size: int) -> None:
    """Strings and binaries by their bytes, numbers about a byte per two digits plus one, maps
    and lists 3 bytes plus a byte per element (and the names), anything unknown generously."""
    assert size_of(value) == size


def guarded(size: int) -> List[Dict[str, Any]]:
    return [{'Put': {'TableName': 'orders', 'Item': {'id': 'o-1', 'blob': 'x' * size}}}]


def test_a_guarded_write_over_dynamodbs_transaction_size_is_refused_before_anything_is_sent() -> None:
    assert check_actions(SCHEMA, 'k', '-', guarded(MAX_TRANSACTION_BYTES - 200)) == guarded(MAX_TRANSACTION_BYTES - 200)
    with pytest.raises(ValueError, match=f'at most {MAX_TRANSACTION_BYTES} bytes per transaction'):
        check_actions(SCHEMA, 'k', '-', guarded(MAX_TRANSACTION_BYTES))
    two = guarded(MAX_TRANSACTION_BYTES // 2) * 2
    with pytest.raises(ValueError, match='the guarded write is about'):
        check_actions(SCHEMA, 'k', '-', two)       # the sizes of all the actions add up



@pytest.mark.parametrize('size, stored', [(400 * 1024 - 1, True), (400 * 1024, True), (400 * 1024 + 1, False)])
def test_an_item_of_exactly_400_kb_is_written_and_one_byte_more_is_refused(monkeypatch: Any, size: int,
                                                                             stored: bool) -> None:
    """DynamoDB stores an item of up to and including 400 KB (names and values): a release
    with attributes, an update of the attributes and a handover to a waiter whose row comes out
    at exactly that size go ahead; one byte more is refused before anything is sent (a handover
    then frees the row instead)."""
    from types import SimpleNamespace

    from python_dynamodb_lock._core import item_size
    monkeypatch.setattr(item_size, 'size_of', lambda row: size)
    lock = SimpleNamespace(partition_key='k', sort_key='-', owner_name='me', lease_duration=10.0,
                           record_version_number='v', expiry_time=0, additional_attributes={},
                           unique_identifier='k|-', _state=None)
    assert item_size.handover_fits(SCHEMA, {'lock_key': 'k'}, {'a': 'b'}) is stored
    for check in (lambda: item_size.check_release_size(SCHEMA, lock, {'a': 'b'}),
                  lambda: item_size.check_update_size(SCHEMA, lock, {'a': 'b'}, ())):
        if stored:
            check()
        else:
            with pytest.raises(ValueError, match=f'about {size} bytes.*at most 409600 bytes.*nothing was written'):
                check()
