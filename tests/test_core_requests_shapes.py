"""The request builders (python_dynamodb_lock/_wire/: requests, lock_writes, renewals, sessions) judged
by what their requests do to a table: each request is sent to moto in-process, and the rows it reads or
leaves are checked.

The operator reads (``list_locks_by_partition_key``'s query, ``scan``'s pages), the reads a
protocol relies on (a consistent ``get``, ``get_many`` in key order), a session row's renewal,
end and takeover, and the writes that free a row (a lock on an existing item keeps the item's
own attributes). A few builders refuse bad input before anything is sent: that is checked too.
"""
from __future__ import annotations

from decimal import Decimal
from typing import Any, Dict, Iterator, List

import pytest

import python_dynamodb_lock._wire.lock_writes as _lock_writes
import python_dynamodb_lock._wire.renewals as _renewals
import python_dynamodb_lock._wire.requests as _requests
from python_dynamodb_lock._core.answers import Applied, Refused
from python_dynamodb_lock._wire.lock_writes import acquire_over, free_row, release_item_lock
from python_dynamodb_lock._wire.renewals import Renewal, renew, renew_many
from python_dynamodb_lock._wire.requests import Request, delete_if_version, following_page, get, get_many, query, scan
from python_dynamodb_lock._wire.sessions import session_end, session_renew, session_start, take_over_in_session
from python_dynamodb_lock._model.schema import Schema
from python_dynamodb_lock._drivers.thread_transport import ThreadTransport
from python_dynamodb_lock.testing import moto_lock_table


def clear_request_shapes() -> None:
    """Forget the request shapes the builders cached (``functools.lru_cache``), so that each
    request is built afresh: under mutmut, a shape cached by an earlier test (in the process its
    workers fork from) would hide a mutant of the helpers that build it (``_quoted``,
    ``data_assignments``)."""
    for module in (_requests, _lock_writes, _renewals):
        for value in vars(module).values():
            if hasattr(value, 'cache_clear'):
                value.cache_clear()


@pytest.fixture(autouse=True)
def fresh_request_shapes() -> None:
    clear_request_shapes()


@pytest.fixture(scope='module')
def table() -> Iterator[Any]:
    with moto_lock_table() as made:
        yield made


class Table:
    def __init__(self, made: Any) -> None:
        self.schema = Schema(made.table_name, 'lock_key', 'sort_key', 'expiry_time')
        self.store = ThreadTransport(made.resource.meta.client)
        self.made = made

    def send(self, request: Request) -> Any:
        return self.store.send(request)

    def put(self, key: str, sort_key: str = '-', **values: Any) -> Dict[str, Any]:
        item = {'lock_key': key, 'sort_key': sort_key, **values}
        self.made.resource.Table(self.made.table_name).put_item(Item=item)
        return item

    def row(self, key: str, sort_key: str = '-') -> Any:
        answer = self.send(get(self.schema, key, sort_key))
        assert isinstance(answer, Applied)
        return answer.response.get('Item')


@pytest.fixture
def db(table: Any) -> Iterator[Table]:
    made = Table(table)
    yield made
    for item in made.made.resource.Table(table.table_name).scan()['Items']:
        made.made.resource.Table(table.table_name).delete_item(
            Key={'lock_key': item['lock_key'], 'sort_key': item['sort_key']})


def keys_of(answer: Any) -> List[Any]:
    assert isinstance(answer, Applied), answer
    return sorted((item['lock_key'], item['sort_key']) for item in answer.response.get('Items', []))


# -- reads -------------------------------------------------------------------------------------

def test_a_query_lists_every_sort_key_of_one_partition_key_and_nothing_else(db: Table) -> None:
    for sort_key in ('a', 'b', 'c'):
        db.put('k', sort_key, owner_name='x')
    db.put('other', 'a', owner_name='x')
    db.put('k2', 'a', owner_name='x')
    request = query(db.schema, 'k')
    assert request.operation == 'query' and request.params['ConsistentRead'] is True
    assert 'ExclusiveStartKey' not in request.params
    assert keys_of(db.send(request)) == [('k', 'a'), ('k', 'b'), ('k', 'c')]
    after_a = query(db.schema, 'k', {'lock_key': 'k', 'sort_key': 'a'})
    assert keys_of(db.send(after_a)) == [('k', 'b'), ('k', 'c')]
    assert keys_of(db.send(query(db.schema, 'k', {}))) == [('k', 'a'), ('k', 'b'), ('k', 'c')]


def test_a_query_names_a_partition_key_that_is_a_reserved_word_through_the_names_map(db: Table) -> None:
    schema = Schema('t', 'name', 'sort_key', 'ttl')     # NAME is reserved in DynamoDB's expressions
    request = query(schema, 'k')
    assert request.params['TableName'] == 't'
    assert request.params['ExpressionAttributeNames'] == {'#partition_key': 'name'}
    assert request.params['KeyConditionExpression'] == '#partition_key = :partition_key'
    assert request.params['ExpressionAttributeValues'] == {':partition_key': 'k'}


def test_pages_follow_each_other_until_the_last_and_the_first_request_is_left_unchanged(db: Table) -> None:
    for sort_key in ('a', 'b', 'c'):
        db.put('k', sort_key)
    first = query(db.schema, 'k')
    limited = Request(first.operation, {**first.params, 'Limit': 2})
    answer = db.send(limited)
    assert keys_of(answer) == [('k', 'a'), ('k', 'b')]
    following = following_page(limited, answer.response['LastEvaluatedKey'])
    assert following is not None and following.operation == 'query'
    assert 'ExclusiveStartKey' not in limited.params
    assert keys_of(db.send(following)) == [('k', 'c')]
    assert following_page(limited, None) is None and following_page(limited, {}) is None


def test_a_scan_is_consistent_and_resumes_after_the_key_given(db: Table) -> None:
    db.put('a')
    db.put('b')
    request = scan(db.schema)
    assert request.operation == 'scan' and request.params == {'TableName': db.schema.table_name,
                                                               'ConsistentRead': True}
    assert keys_of(db.send(request)) == [('a', '-'), ('b', '-')]
    rest = db.send(scan(db.schema, {'lock_key': 'a', 'sort_key': '-'}))
    assert keys_of(rest) == [('b', '-')] or keys_of(rest) == []     # scan order is the table's hash order
    assert 'ExclusiveStartKey' not in scan(db.schema, {}).params


def test_a_get_is_consistent_and_get_many_answers_in_the_order_of_the_keys(db: Table) -> None:
    db.put('a', owner_name='first')
    db.put('b', owner_name='second')
    request = get(db.schema, 'a', '-')
    assert request.params == {'TableName': db.schema.table_name, 'Key': {'lock_key': 'a', 'sort_key': '-'},
                              'ConsistentRead': True}
    answer = db.send(get_many(db.schema, [('b', '-'), ('missing', '-'), ('a', '-')]))
    assert isinstance(answer, Applied)
    owners = [(response.get('Item') or {}).get('owner_name') for response in answer.response['Responses']]
    assert owners == ['second', None, 'first']


# -- client sessions ---------------------------------------------------------------------------

def test_a_session_row_is_started_once_renewed_on_its_version_and_ended_on_it(db: Table) -> None:
    start = session_start(db.schema, 's', 'me', 30, 'v1', 1000)
    assert isinstance(db.send(start), Applied)
    assert db.row('s') == {'lock_key': 's', 'sort_key': '-', 'owner_name': 'me', 'lease_duration': 30,
                           'record_version_number': 'v1', 'expiry_time': 1000}
    again = db.send(session_start(db.schema, 's', 'other', 30, 'v9', 1))
    assert isinstance(again, Refused) and again.item['owner_name'] == 'me'     # never written over
    refused = db.send(session_renew(db.schema, 's', ['v0'], 'v2', 2000))
    assert isinstance(refused, Refused) and refused.item['record_version_number'] == 'v1'
    assert isinstance(db.send(session_renew(db.schema, 's', ['v0', 'v1'], 'v2', 2000)), Applied)
    row = db.row('s')
    assert row['record_version_number'] == 'v2' and row['expiry_time'] == 2000
    assert isinstance(db.send(session_end(db.schema, 's', ['v1'])), Refused)
    assert db.row('s') is not None
    assert isinstance(db.send(session_end(db.schema, 's', ['v2'])), Applied)
    assert db.row('s') is None


def test_a_takeover_in_a_session_writes_the_lock_and_ends_the_session_or_nothing(db: Table) -> None:
    db.put('s', owner_name='holder', lease_duration=30, record_version_number='sv', expiry_time=1000)
    db.put('k', owner_name='holder', lease_duration=30, record_version_number='lv', expiry_time=1000,
           lock_session='s')
    item = db.schema.lock_item('k', '-', 'waiter', 30, 'new', 2000)
    lock_write = acquire_over(db.schema, item, ['lv'], 5)
    moved = take_over_in_session(db.schema, lock_write, 's', 'sv-moved', 'sv2', 1234)
    assert moved.operation == 'transact_write_items'
    for action in moved.params['TransactItems']:        # every conditional write asks for the item in the way
        assert action['Update']['ReturnValuesOnConditionCheckFailure'] == 'ALL_OLD'
    assert not isinstance(db.send(moved), Applied)
    assert db.row('k')['owner_name'] == 'holder' and db.row('s')['record_version_number'] == 'sv'
    assert isinstance(db.send(take_over_in_session(db.schema, lock_write, 's', 'sv', 'sv2', 1234)), Applied)
    lock, session = db.row('k'), db.row('s')
    assert lock['owner_name'] == 'waiter' and lock['record_version_number'] == 'new' and 'lock_session' not in lock
    assert session['record_version_number'] == 'sv2' and session['released_at'] == 1234
    assert session['lease_duration'] == 0 and session['owner_name'] == 'holder'


# -- freeing rows ------------------------------------------------------------------------------

def test_a_conditional_delete_deletes_only_a_row_carrying_a_version_named(db: Table) -> None:
    db.put('k', record_version_number='v1')
    refused = db.send(delete_if_version(db.schema, 'k', '-', ['v0', 'v2']))
    assert isinstance(refused, Refused) and refused.item['record_version_number'] == 'v1'
    assert isinstance(db.send(delete_if_version(db.schema, 'k', '-', ['v0', 'v1'])), Applied)
    assert db.row('k') is None


@pytest.mark.parametrize('keep_token', [True, False])
def test_freeing_a_lock_on_an_existing_item_removes_only_the_locks_attributes(db: Table, keep_token: bool) -> None:
    db.put('k', owner_name='me', lease_duration=30, record_version_number='v1', acquisition_id='a',
           lease_expiry=Decimal('5.5'), released_at=1, lock_session='s', fencing_token=7, purpose='p',
           title='the items own', expiry_time=999)
    request = free_row(db.schema, 'k', '-', ['v1'], 'ignored', 1, 1, ['purpose'], keep_token, existing_item=True)
    assert request == release_item_lock(db.schema, 'k', '-', ['v1'], ['purpose'], keep_token)
    assert isinstance(db.send(request), Applied)
    expected = {'lock_key': 'k', 'sort_key': '-', 'title': 'the items own', 'expiry_time': 999}
    assert db.row('k') == ({**expected, 'fencing_token': 7} if keep_token else expected)


def test_freeing_a_lock_on_an_existing_item_needs_one_of_its_versions(db: Table) -> None:
    db.put('k', owner_name='me', record_version_number='v1', title='t')
    answer = db.send(release_item_lock(db.schema, 'k', '-', ['v0'], (), True))
    assert isinstance(answer, Refused) and db.row('k')['owner_name'] == 'me'


def test_a_release_that_may_not_write_attributes_refuses_them_before_anything_is_sent() -> None:
    schema = Schema('t', 'lock_key', 'sort_key', 'expiry_time')
    with pytest.raises(ValueError, match='^attributes cannot be written by the release of a lock on an existing item$'):
        free_row(schema, 'k', '-', ['v'], 'n', 1, 1, (), True, {'a': 1}, existing_item=True)
    with pytest.raises(ValueError, match='^attributes cannot be written by a release that deletes the row$'):
        free_row(schema, 'k', '-', ['v'], 'n', 1, 1, (), False, {'a': 1})
    assert free_row(schema, 'k', '-', ['v'], 'n', 1, 1, (), False).operation == 'delete_item'
    assert free_row(schema, 'k', '-', ['v'], 'n', 1, 1, (), False, {}).operation == 'delete_item'


# -- renewals ----------------------------------------------------------------------------------

def test_a_renewal_without_a_ttl_leaves_the_items_ttl_and_one_with_attributes_sets_and_removes_them(
        db: Table) -> None:
    db.put('k', record_version_number='v1', expiry_time=999, old='x', kept='y')
    plain = Renewal('k', '-', ['v1'], 'v2', None, Decimal('10.5'))
    assert isinstance(db.send(renew(db.schema, plain)), Applied)
    row = db.row('k')
    assert row['expiry_time'] == 999 and row['record_version_number'] == 'v2'
    assert row['lease_expiry'] == Decimal('10.5')
    update = Renewal('k', '-', ['v2'], 'v3', 2000, Decimal('11'), (('new', 'n'), ('other', 2)), ('old',))
    assert isinstance(db.send(renew(db.schema, update)), Applied)
    row = db.row('k')
    assert row['expiry_time'] == 2000 and row['new'] == 'n' and row['other'] == 2
    assert 'old' not in row and row['kept'] == 'y'


def test_a_version_condition_names_one_to_a_hundred_versions() -> None:
    schema = Schema('t', 'lock_key', 'sort_key', 'expiry_time')
    one = delete_if_version(schema, 'k', '-', ['v'])
    assert one.params['ConditionExpression'] == 'record_version_number = :expected_version_0'
    many = delete_if_version(schema, 'k', '-', [f'v{index}' for index in range(100)])
    assert many.params['ConditionExpression'].startswith(
        'record_version_number IN (:expected_version_0, :expected_version_1')
    assert many.params['ExpressionAttributeValues'][':expected_version_99'] == 'v99'
    for count in (0, 101):
        with pytest.raises(ValueError, match=f'1 to 100 versions, got {count}'):
            delete_if_version(schema, 'k', '-', [f'v{index}' for index in range(count)])


def test_a_batch_of_renewals_holds_one_to_25_and_no_attribute_update() -> None:
    schema = Schema('t', 'lock_key', 'sort_key', 'expiry_time')
    renewal = Renewal('k', '-', ['v1'], 'v2', 100, Decimal(1))
    assert len(renew_many(schema, [renewal] * 25).params['Statements']) == 25
    for count in (0, 26):
        with pytest.raises(ValueError, match=f'1 to 25 renewals, got {count}'):
            renew_many(schema, [renewal] * count)
    for change in ({'set_attributes': (('a', 1),)}, {'remove_attributes': ('a',)}):
        with pytest.raises(ValueError, match=r'^a renewal that updates attributes is sent on its own \(renew\), '
                                             r'not in a batch$'):
            renew_many(schema, [renewal._replace(**change)])


def test_which_requests_are_writes() -> None:
    writes = {'put_item', 'update_item', 'delete_item', 'batch_execute_statement', 'transact_write_items'}
    for operation in writes | {'get_item', 'query', 'scan', 'transact_get_items'}:
        assert Request(operation, {}).is_write is (operation in writes)


def test_a_batched_renewal_is_one_partiql_update_per_lock_conditioned_on_its_versions() -> None:
    """The statement DynamoDB Local runs in test_heartbeat_batch.py (moto's PartiQL parser takes
    one SET clause only, so the text is checked here): every name quoted, a quote doubled."""
    schema = Schema('my"table', 'lock key', 'sort_key', 'ttl')
    with_ttl = Renewal('k', 's', ['v0', 'v1'], 'v2', 100, Decimal('7.5'))
    no_ttl = Renewal('j', 's', ['v9'], 'v3', None, Decimal('8'))
    first, second = renew_many(schema, [with_ttl, no_ttl]).params['Statements']
    assert first == {
        'Statement': ('UPDATE "my""table" SET "record_version_number" = ? SET "ttl" = ? SET "lease_expiry" = ? '
                      'WHERE "lock key" = ? AND "sort_key" = ? AND "record_version_number" IN [?, ?]'),
        'Parameters': ['v2', 100, Decimal('7.5'), 'k', 's', 'v0', 'v1'],
        'ReturnValuesOnConditionCheckFailure': 'ALL_OLD',
    }
    assert second['Statement'] == ('UPDATE "my""table" SET "record_version_number" = ? SET "lease_expiry" = ? '
                                   'WHERE "lock key" = ? AND "sort_key" = ? AND "record_version_number" IN [?]')
    assert second['Parameters'] == ['v3', Decimal('8'), 'j', 's', 'v9']
    no_sort_key = renew_many(Schema('t', 'id', None, 'ttl'), [no_ttl]).params['Statements'][0]
    assert 'WHERE "id" = ? AND "record_version_number" IN [?]' in no_sort_key['Statement']
    assert no_sort_key['Parameters'] == ['v3', Decimal('8'), 'j', 'v9']


def test_a_plain_acquisition_writes_only_where_there_is_no_row_or_a_released_one(db: Table) -> None:
    from python_dynamodb_lock._wire.lock_writes import acquire_free
    db.put('k', title='an item of the application')
    item = db.schema.lock_item('k', '-', 'me', 30, 'v1', 2000)
    refused = db.send(acquire_free(db.schema, item, 5))
    assert isinstance(refused, Refused) and refused.item == {'lock_key': 'k', 'sort_key': '-',
                                                             'title': 'an item of the application'}
    db.put('k', owner_name='old', record_version_number='v0', released_at=1, fencing_token=9)
    assert isinstance(db.send(acquire_free(db.schema, item, 5)), Applied)
    row = db.row('k')
    assert row['owner_name'] == 'me' and row['fencing_token'] == 10 and 'released_at' not in row
