"""What people and metrics hooks read: the words of a DynamoDB failure (``_core/messages.py``),
the rules that classify DynamoDB's answers (``_core/answers.py``), the operator's reads and
force release (``_core/scan.py``), the item size check (``_core/item_size.py``), and the names
of the events a ``metrics=`` hook receives (``_core/events.py``; docs/usage.rst "Metrics").
"""
from __future__ import annotations

import dataclasses
import decimal
import pathlib
import re
import uuid
from typing import Any, Dict, Optional

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError, ParamValidationError, ReadTimeoutError

from python_dynamodb_lock._core.answers import (
    Applied,
    Failed,
    Refused,
    error_code,
    judge_answer,
    judge_error,
    maybe_applied,
    reason_of,
    single,
    statement_retryable,
)
from python_dynamodb_lock._core.effects import Hold, Settle
from python_dynamodb_lock._core.events import Event, Kind
from python_dynamodb_lock._core.item_size import (
    MAX_ITEM_BYTES,
    check_release_size,
    check_update_size,
    handover_fits,
    lock_row_size,
)
from python_dynamodb_lock._core.messages import describe_key, explain
from python_dynamodb_lock._core.release import ReleaseSettings
from python_dynamodb_lock._core.scan import force_release, next_page
from python_dynamodb_lock._wire.requests import query, scan
from python_dynamodb_lock._model.errors import DynamoDBLockError, Reason
from python_dynamodb_lock._model.schema import Schema
from test_core_protocol import FakeClock, drive, scripted
import test_core_shared_steps
from test_core_shared_steps import EXPIRY, Engine, run

SCHEMA = Schema('locks', 'lock_key', 'sort_key', 'expiry_time')
DOCS = pathlib.Path(__file__).resolve().parent.parent / 'docs'


def client_error(code: str, message: str = 'scripted', status: int = 400, retries: int = 0,
                 operation: str = 'UpdateItem', item: Optional[Dict[str, Any]] = None) -> ClientError:
    response: Dict[str, Any] = {'Error': {'Code': code, 'Message': message},
                                'ResponseMetadata': {'HTTPStatusCode': status, 'RetryAttempts': retries}}
    if item is not None:
        response['Item'] = item
    return ClientError(response, operation)


# -- the words of a failure --------------------------------------------------------------------------

def test_a_missing_table_is_explained_with_the_two_ways_to_create_it() -> None:
    error = client_error('ResourceNotFoundException', 'Requested resource not found')
    assert explain(SCHEMA, error) == (
        "table 'locks' does not exist: create it with "
        "DynamoDBLockClient.create_dynamodb_table(boto3.client(\"dynamodb\"), table_name='locks') "
        f'or `dynamodb-lock create-table --table locks` ({error})')


@pytest.mark.parametrize('message', ['Item size has exceeded the maximum allowed size',
                                     'ITEM SIZE to update has exceeded the maximum allowed size'])
def test_an_item_over_400_kb_is_explained_with_what_counts_towards_the_limit(message: str) -> None:
    error = client_error('ValidationException', message)
    explained = explain(SCHEMA, error)
    assert explained == (
        "the item would exceed DynamoDB's 400 KB item size limit: the lock's own attributes (about 250 bytes, "
        'more with a long owner_name) and the data on the row (additional attributes, attributes written at '
        "release, or, for a lock on an existing item, the item's own attributes) must fit in it together "
        f'({error})')


@pytest.mark.parametrize('schema, expected', [
    (SCHEMA, "(string HASH key 'lock_key', string RANGE key 'sort_key'"),
    (Schema('locks', 'id', None, 'ttl', 'N'), "(number HASH key 'id', no RANGE key"),
    (Schema('locks', 'id', 'sk', 'ttl', 'B'), "(binary HASH key 'id', string RANGE key 'sk'"),
])
def test_a_wrong_key_schema_is_explained_with_the_schema_expected(schema: Schema, expected: str) -> None:
    error = client_error('ValidationException', 'The provided KEY element does not match the schema')
    explained = explain(schema, error)
    assert explained == (f"table 'locks' does not have the expected key schema {expected}; "
                         "DynamoDBLockClient.for_table reads the table's key schema): " + str(error))


def test_a_number_boto3_cannot_read_and_other_failures_are_explained() -> None:
    overflow = decimal.Inexact()
    assert explain(SCHEMA, overflow) == ('the row holds a number that boto3 cannot read back (38 digits or more; '
                                         f'boto/boto3#2500): {overflow!r}')
    other = client_error('ValidationException', 'One or more parameter values were invalid')
    assert explain(SCHEMA, other) == str(other)
    assert explain(SCHEMA, client_error('InternalServerError', 'x', 500)) == str(client_error('InternalServerError',
                                                                                              'x', 500))
    assert explain(SCHEMA, RuntimeError('plain')) == 'plain'


def test_a_key_is_described_with_its_table() -> None:
    assert describe_key(SCHEMA, 'k', '-') == "lock 'k'/'-' in table 'locks'"


# -- classifying errors and answers -------------------------------------------------------------

def test_a_statement_throttled_inside_a_successful_batch_is_the_only_retryable_one() -> None:
    def statement(code: str, status: int = 400, operation: str = 'BatchExecuteStatement') -> Any:
        return judge_error(client_error(code, status=status, operation=operation))

    for code in ('ThrottlingError', 'ProvisionedThroughputExceeded', 'RequestLimitExceeded', 'TransactionConflict'):
        assert statement_retryable(statement(code)), code
    assert not statement_retryable(statement('ThrottlingError', status=500))        # may have been applied
    assert not statement_retryable(statement('ThrottlingError', operation='UpdateItem'))
    assert not statement_retryable(statement('ValidationError'))
    assert not statement_retryable(Failed(RuntimeError('x'), False, Reason.OTHER, 'ThrottlingError'))
    assert not statement_retryable(Applied()) and not statement_retryable(Refused(None))


@pytest.mark.parametrize('error, applied', [
    (client_error('ValidationException'), False),
    (client_error('ProvisionedThroughputExceededException', retries=2), True),
    (client_error('InternalServerError', status=500), True),
    (client_error('InternalServerError', status=499), False),
    (ClientError({'Error': {'Code': 'X'}}, 'UpdateItem'), False),           # no metadata at all
    (ParamValidationError(report='bad'), False),
    (ReadTimeoutError(endpoint_url='http://x'), True),
    (RuntimeError('not botocore'), False),
])
def test_whether_a_failed_write_may_have_been_applied(error: BaseException, applied: bool) -> None:
    assert maybe_applied(error) is applied
    assert judge_error(error).maybe_applied is applied


@pytest.mark.parametrize('error, reason', [
    (client_error('ResourceNotFoundException'), Reason.TABLE_NOT_FOUND),
    (client_error('ThrottlingException'), Reason.THROTTLED),
    (client_error('TooManyRequestsException'), Reason.THROTTLED),
    (client_error('ExpiredTokenException'), Reason.ACCESS_DENIED),
    (client_error('ValidationException', 'The provided key element does not match'), Reason.WRONG_KEY_SCHEMA),
    (client_error('ValidationException', 'bad value'), Reason.VALIDATION),
    (client_error('InternalServerError', status=500), Reason.UNREACHABLE),
    (client_error('Whatever', status=499), Reason.OTHER),
    (EndpointConnectionError(endpoint_url='http://x'), Reason.UNREACHABLE),
    (ParamValidationError(report='bad'), Reason.OTHER),
    (decimal.Inexact(), Reason.VALIDATION),
    (RuntimeError('x'), Reason.OTHER),
])
def test_the_reason_of_each_failure(error: BaseException, reason: str) -> None:
    assert reason_of(error) == reason


def test_error_codes_and_refusals() -> None:
    assert error_code(RuntimeError('x')) == '' and error_code(ClientError({}, 'GetItem')) == ''
    assert error_code(client_error('Throttled')) == 'Throttled'
    refused = judge_error(client_error('ConditionalCheckFailedException', retries=1,
                                       item={'owner_name': {'S': 'x'}}))
    assert refused == Refused({'owner_name': 'x'}, retried=True)
    assert judge_error(client_error('ConditionalCheckFailedException')) == Refused(None, retried=False)
    failed = judge_error(client_error('ValidationException', 'v'))
    assert isinstance(failed, Failed) and failed.code == 'ValidationException'


def test_a_call_that_is_not_a_batch_has_one_answer() -> None:
    assert judge_answer('update_item', {}, {'Attributes': {'a': 1}}) == Applied({'Attributes': {'a': 1}})
    with pytest.raises(TypeError, match='^one answer expected, got the answers of a batch$'):
        single([Applied()])
    assert single(Applied()) == Applied()


def test_a_failed_statement_without_a_message_is_reported_without_a_made_up_one() -> None:
    response = {'Responses': [{'Error': {'Code': 'ValidationError'}}], 'ResponseMetadata': {'HTTPStatusCode': 200}}
    (failed,) = judge_answer('batch_execute_statement', {'Statements': [{}]}, response)
    assert isinstance(failed, Failed) and failed.code == 'ValidationError' and not failed.maybe_applied
    assert failed.error.response['Error'] == {'Code': 'ValidationError', 'Message': ''}
    assert explain(SCHEMA, failed.error).endswith('operation: ')


def test_a_refused_statement_of_a_batch_is_retried_only_when_botocore_retried_the_call() -> None:
    response = {'Responses': [{'Error': {'Code': 'ConditionalCheckFailed', 'Item': {'owner_name': 'x'}}},
                              {'Error': {'Code': 'ConditionalCheckFailed'}}],
                'ResponseMetadata': {'HTTPStatusCode': 200, 'RetryAttempts': 1}}
    first, second = judge_answer('batch_execute_statement', {'Statements': [{}, {}]}, response)
    assert first == Refused({'owner_name': 'x'}, retried=True) and second == Refused(None, retried=True)


# -- the operator's pages and force release ---------------------------------------------------------

def test_a_page_gives_its_rows_and_the_request_for_the_next_one() -> None:
    request = query(SCHEMA, 'k')
    rows, following = next_page(SCHEMA, request, Applied({'Items': [{'lock_key': 'k', 'sort_key': 'a'}],
                                                          'LastEvaluatedKey': {'lock_key': 'k', 'sort_key': 'a'}}))
    assert rows == [{'lock_key': 'k', 'sort_key': 'a'}]
    assert following is not None and following.params['ExclusiveStartKey'] == {'lock_key': 'k', 'sort_key': 'a'}
    assert following.operation == 'query'
    last_rows, none = next_page(SCHEMA, scan(SCHEMA), Applied({}))
    assert last_rows == [] and none is None


def test_a_page_that_failed_raises_unknown_with_the_explanation_and_the_cause() -> None:
    error = client_error('ResourceNotFoundException')
    with pytest.raises(DynamoDBLockError) as raised:
        next_page(SCHEMA, scan(SCHEMA), judge_error(error))
    assert raised.value.code == DynamoDBLockError.UNKNOWN and raised.value.reason == Reason.TABLE_NOT_FOUND
    assert raised.value.message == explain(SCHEMA, error) and raised.value.__cause__ is error
    with pytest.raises(TypeError):
        next_page(SCHEMA, scan(SCHEMA), [Applied()])


@dataclasses.dataclass
class SeenLock:
    """What ``get_lock`` gave the operator."""

    record_version_number: str
    expiry_time: int = 1
    partition_key: str = 'k'
    sort_key: str = '-'
    additional_attributes: Dict[str, Any] = dataclasses.field(default_factory=dict)


# The moto table of the module and the engine on it, made as test_core_shared_steps makes them (one
# table a module: creating one takes longer than a test).
table, engine = test_core_shared_steps.table, test_core_shared_steps.engine


def put(engine: Engine, **item: Any) -> None:
    from python_dynamodb_lock._wire.requests import Request
    engine.store.send(Request('put_item', {'TableName': engine.schema.table_name,
                                           'Item': {'lock_key': 'k', 'sort_key': '-', **item}}))


def test_force_release_frees_only_the_version_seen_keeping_the_token(engine: Engine) -> None:
    clock = FakeClock()
    put(engine, owner_name='o', record_version_number='v1', lease_duration=30, fencing_token=5, purpose='p',
        expiry_time=10)
    settings = ReleaseSettings(engine.schema, EXPIRY)
    assert run(force_release(settings, SeenLock('v0'), clock), engine, clock).result is False
    assert engine.row('k')['record_version_number'] == 'v1'
    seen = SeenLock('v1', 10, additional_attributes={'purpose': 'p'})
    assert run(force_release(settings, seen, clock), engine, clock).result is True
    row = engine.row('k')
    assert row['fencing_token'] == 5 and row['lease_duration'] == 0 and 'purpose' not in row
    assert row['released_at'] == int(clock.time()) and row['expiry_time'] == int(clock.time() + EXPIRY)
    assert row['record_version_number'] != 'v1'
    assert str(uuid.UUID(row['record_version_number'])) == row['record_version_number']     # a fresh version


def test_force_release_of_a_lock_on_an_item_removes_only_the_lock(engine: Engine) -> None:
    clock = FakeClock()
    put(engine, owner_name='o', record_version_number='v1', lease_duration=30, title='mine')
    seen = SeenLock('v1', 0, additional_attributes={'title': 'mine'})      # the item's own, read as the lock's
    assert run(force_release(ReleaseSettings(engine.schema, EXPIRY), seen, clock), engine, clock).result is True
    assert engine.row('k') == {'lock_key': 'k', 'sort_key': '-', 'title': 'mine'}


def test_force_release_deletes_when_rows_are_not_kept_and_a_failure_raises(engine: Engine) -> None:
    clock = FakeClock()
    put(engine, owner_name='o', record_version_number='v1', lease_duration=30, expiry_time=10)
    assert run(force_release(ReleaseSettings(engine.schema, EXPIRY, False), SeenLock('v1', 10), clock),
               engine, clock).result is True
    assert engine.row('k') is None
    error = client_error('InternalServerError', status=500)
    failed = drive(force_release(ReleaseSettings(SCHEMA, EXPIRY), SeenLock('v1'), clock),
                   scripted(judge_error(error)))
    assert failed.error.code == DynamoDBLockError.UNKNOWN and failed.error.reason == Reason.UNREACHABLE
    assert failed.error.message == str(error) and failed.error.__cause__ is error


# -- the item size check ------------------------------------------------------------------------

@dataclasses.dataclass
class SizedLock:
    partition_key: str = 'k'
    sort_key: str = '-'
    owner_name: str = 'me'
    lease_duration: float = 30.0
    record_version_number: str = 'v' * 36
    expiry_time: int = 1_700_000_000
    unique_identifier: str = 'k|-'
    additional_attributes: Dict[str, Any] = dataclasses.field(default_factory=dict)
    _state: Any = None


def test_a_release_whose_row_would_pass_400_kb_is_refused_saying_so() -> None:
    lock = SizedLock(additional_attributes={'big': 'x' * 300_000})     # removed by the release: not counted
    check_release_size(SCHEMA, lock, {'note': 'x' * 300_000})
    check_release_size(SCHEMA, lock, None)
    check_release_size(SCHEMA, lock, {})
    with pytest.raises(ValueError) as raised:
        check_release_size(SCHEMA, lock, {'note': 'x' * MAX_ITEM_BYTES})
    size = lock_row_size(SCHEMA, lock, {'note': 'x' * MAX_ITEM_BYTES})
    assert str(raised.value) == (
        f"release attributes= on k|- would make an item of about {size} bytes, the lock's own attributes "
        f'included; DynamoDB stores at most {MAX_ITEM_BYTES} bytes (400 KB) per item: make the data smaller '
        '(keep large values elsewhere, in S3 say, and store a reference); nothing was written')


def test_the_size_limit_is_400_kb_counted_with_the_locks_own_attributes() -> None:
    lock = SizedLock()
    base = lock_row_size(SCHEMA, lock, {'n': ''})
    fits = MAX_ITEM_BYTES - base
    check_release_size(SCHEMA, lock, {'n': 'x' * fits})                 # exactly the limit
    with pytest.raises(ValueError):
        check_release_size(SCHEMA, lock, {'n': 'x' * (fits + 1)})
    assert MAX_ITEM_BYTES == 409_600


def test_the_key_the_version_and_the_ttl_count_byte_for_byte() -> None:
    base = lock_row_size(SCHEMA, SizedLock(), None)
    assert lock_row_size(SCHEMA, SizedLock(partition_key='k' * 1001), None) == base + 1000
    assert lock_row_size(SCHEMA, SizedLock(record_version_number='v' * 136), None) == base + 100
    assert lock_row_size(SCHEMA, SizedLock(expiry_time=0), None) < base       # a lock on an item: no TTL value


def test_a_row_under_a_session_counts_the_session_name() -> None:
    @dataclasses.dataclass
    class State:
        session_id: Optional[str]

    plain = lock_row_size(SCHEMA, SizedLock(), None)
    session = 'python_dynamodb_lock/session/me/' + 'x' * 32
    assert lock_row_size(SCHEMA, SizedLock(_state=State(session)), None) >= plain + len('lock_session') + len(session)
    assert lock_row_size(SCHEMA, SizedLock(_state=State(None)), None) == plain


def test_an_update_counts_the_attributes_kept_and_set_but_not_those_removed() -> None:
    lock = SizedLock(additional_attributes={'old': 'x' * 300_000, 'kept': 'y' * 100_000})
    check_update_size(SCHEMA, lock, {'new': 'z' * 250_000}, ['old'])
    with pytest.raises(ValueError, match='^update_attributes on k|- would make an item'):
        check_update_size(SCHEMA, lock, {'new': 'z' * 250_000}, [])
    check_update_size(SCHEMA, lock, {'kept': 'z' * 350_000}, ['old'])     # replaced, not added


def test_a_handover_fits_when_the_waiters_row_with_the_releases_attributes_fits() -> None:
    template = SCHEMA.lock_item('k', '-', 'waiter', 30, '', 0, {'mine': 'm' * 100})
    assert handover_fits(SCHEMA, template, None) and handover_fits(SCHEMA, template, {'r': 'x' * 300_000})
    assert not handover_fits(SCHEMA, template, {'r': 'x' * MAX_ITEM_BYTES})


# -- the events a metrics hook receives ---------------------------------------------------------

def test_every_event_name_is_its_kind_in_lower_case() -> None:
    """The names are published (docs/usage.rst "Metrics", ``LockEvent.name``): a renamed event
    breaks every dashboard built on it."""
    for kind in Kind:
        assert kind.value == kind.name.lower()
    assert len({kind.value for kind in Kind}) == len(Kind)


def test_every_event_name_the_metrics_table_documents_exists() -> None:
    if not (DOCS / 'usage.rst').exists():      # mutmut's copy of the project has no docs
        pytest.skip('no docs/ here')
    text = (DOCS / 'usage.rst').read_text()
    table = text[text.index('``acquire_attempt``'):text.index('(and a few rarer ones')]
    documented = set(re.findall(r'^``([a-z_]+)``', table, re.MULTILINE))
    assert {'acquired', 'renewed', 'stolen', 'force_released'} <= documented
    assert documented <= {kind.value for kind in Kind}
    for rarer in ('heartbeats_behind', 'guard_retry'):
        assert Kind(rarer).value == rarer


def test_an_event_reads_its_fields_by_name_and_defaults_to_a_client_wide_one() -> None:
    event = Event(Kind.RENEWED, 'k|-', None, {'version': 'v'})
    assert event['version'] == 'v'
    with pytest.raises(KeyError):
        event['missing']
    bare = Event(Kind.LOOP_STARTED)
    assert bare.key == '' and bare.lock is None and bare.fields == {}
    assert Event(Kind.LOOP_STARTED).fields is not Event(Kind.LOOP_STOPPED).fields


def test_hold_waits_and_settle_is_waited_for_unless_told_otherwise() -> None:
    assert Hold('lock').wait is True and Settle(None).follow_up is False
