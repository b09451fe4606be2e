"""The asyncio client sends what boto3's resource layer would send, and reads answers the same way.

The threaded client's requests go through boto3's resource layer, which types every attribute
value with ``TypeSerializer`` wherever the operation's input shape has one. The asyncio client's
executor types the lock's own requests by a shorter way (``_wire.typed_json.Wire.to_typed``): these tests
hold it to the resource layer's result, value type by value type, for every request the lock
sends, and its reading of answers to boto3's deserializer (numbers read exactly).
"""
from __future__ import annotations

import copy
import decimal
import re
from decimal import Decimal
from typing import Any, Callable, Dict, List

import boto3
import pytest
from boto3.dynamodb.transform import ParameterTransformer
from boto3.dynamodb.types import Binary, TypeDeserializer, TypeSerializer

import python_dynamodb_lock._wire.lock_writes as lock_writes
import python_dynamodb_lock._wire.renewals as renewals
import python_dynamodb_lock._wire.requests as requests
from python_dynamodb_lock._core.answers import Refused, judge_error
from python_dynamodb_lock._model.schema import Schema
from python_dynamodb_lock._wire.typed_json import Wire
from python_dynamodb_lock.testing import readable_expression

SCHEMAS = [
    Schema('locks', 'lock_key', 'sort_key', 'expiry_time'),
    Schema('numbered', 'id', None, 'ttl', 'N'),
    Schema('binary', 'blob', 'sort_key', 'expiry_time', 'B'),
]
KEYS: Dict[str, Any] = {'S': 'job-1', 'N': 7, 'B': b'\x00\x01'}
# Every type boto3 accepts as an attribute value (additional attributes can be anything).
EXTRA: Dict[str, Any] = {
    'text': 'x', 'empty': '', 'small': 3, 'negative': -12, 'large': 10 ** 37 + 1, 'exact': Decimal('1.10'),
    'flag': True, 'nothing': None, 'raw': b'\xff', 'wrapped': Binary(b'\x01'), 'names': {'a', 'b'},
    'numbers': {1, Decimal('2.5')}, 'blobs': {b'a'}, 'list': [1, 'two', [None]], 'map': {'k': {'n': 1}},
}


def client() -> Any:
    return boto3.client('dynamodb', region_name='us-east-1', aws_access_key_id='x', aws_secret_access_key='x')


def resource_layer(dynamodb: Any, operation: str, params: Dict[str, Any]) -> Dict[str, Any]:
    """What boto3's resource layer sends for ``params``: every AttributeValue of the input shape
    typed with TypeSerializer, on a copy."""
    model = dynamodb.meta.service_model.operation_model(dynamodb.meta.method_to_api_mapping[operation])
    typed = copy.deepcopy(params)
    ParameterTransformer().transform(typed, model.input_shape, TypeSerializer().serialize, 'AttributeValue')
    return typed


def unordered_sets(value: Any) -> Any:
    """``value`` with the members of every typed set (SS, NS, BS) sorted: DynamoDB sets have no
    order, and a Python set's iteration order may differ between a set and its copy."""
    if isinstance(value, dict):
        if len(value) == 1 and next(iter(value)) in ('SS', 'NS', 'BS'):
            kind, members = next(iter(value.items()))
            return {kind: sorted(members)}
        return {key: unordered_sets(item) for key, item in value.items()}
    if isinstance(value, list):
        return [unordered_sets(item) for item in value]
    return value


def lock_requests(schema: Schema) -> List[requests.Request]:
    key = KEYS[schema.partition_key_type]
    item = schema.lock_item(key, 's', 'me', 30.0, 'v1', 1_800_000_000, EXTRA)
    item.update(acquisition_id='v1', lease_expiry=Decimal('1700000000.123'))
    renewal = renewals.Renewal(key, 's', ['v1', 'v2'], 'v3', 1_800_000_005, Decimal('1700000030.5'))
    return [
        lock_writes.acquire_free(schema, item, 1_700_000_000_000_000),
        lock_writes.acquire_over(schema, item, ['v0', 'v00'], 5, {'old', 'released_at'}),
        lock_writes.release_row(schema, key, 's', ['v1'], 'v2', 1_800_000_000, 1_700_000_000, set(EXTRA)),
        lock_writes.free_row(schema, key, 's', ['v1'], 'v2', 1, 2, (), keep_released_rows=False),
        renewals.renew(schema, renewal),
        renewals.renew_many(schema, [renewal, renewal]),
        requests.get(schema, key, 's'),
        requests.scan(schema, {'lock_key': 'a', 'sort_key': 'b'}),
        # a whole item, as a put carries it (the fast path types Item maps too)
        requests.Request('put_item', {'TableName': schema.table_name, 'Item': item,
                                      'ConditionExpression': 'attribute_not_exists(#k)',
                                      'ExpressionAttributeNames': {'#k': schema.partition_key_name}}),
    ]


@pytest.mark.parametrize('schema', SCHEMAS, ids=lambda schema: schema.table_name)
def test_every_lock_request_is_typed_as_the_resource_layer_types_it(schema: Schema) -> None:
    dynamodb = client()
    wire = Wire(dynamodb)
    for request in lock_requests(schema):
        original = copy.deepcopy(request.params)
        assert unordered_sets(wire.to_typed(request.operation, request.params)) == unordered_sets(
            resource_layer(dynamodb, request.operation, request.params))
        assert request.params == original      # the request itself is left as it was


@pytest.mark.parametrize('value', [1.5, 10 ** 38, Decimal('NaN'), object()],
                         ids=['float', 'too-large', 'nan', 'an-object'])   # stable ids: xdist workers compare them
def test_a_value_boto3_refuses_is_refused_the_same_way(value: Any) -> None:
    dynamodb = client()
    wire = Wire(dynamodb)
    params = requests.get(SCHEMAS[0], 'k', 's').params
    params['Key']['sort_key'] = value

    def raised(convert: Callable[[], Any]) -> type:
        with pytest.raises((TypeError, decimal.DecimalException)) as caught:
            convert()
        return caught.type

    assert raised(lambda: wire.to_typed('get_item', params)) is raised(
        lambda: resource_layer(dynamodb, 'get_item', params))


def typed_item() -> Dict[str, Any]:
    item = dict(TypeSerializer().serialize(EXTRA)['M'])
    item['precise'] = {'N': '12345678901234567890123456789012345678901234.5'}   # more than boto3 reads
    return item


def exact(value: Dict[str, Any]) -> Any:
    """boto3's TypeDeserializer, reading numbers exactly (as the lock clients do)."""
    class Exact(TypeDeserializer):
        def _deserialize_n(self, number: str) -> Decimal:
            return Decimal(number)
    return Exact().deserialize(value)


@pytest.mark.parametrize('operation,member', [('update_item', 'Attributes'), ('get_item', 'Item'),
                                              ('delete_item', 'Attributes'), ('put_item', 'Attributes')])
def test_answers_are_read_as_boto3_reads_them_with_exact_numbers(operation: str, member: str) -> None:
    answer = Wire(client()).answer_to_python(operation, {member: typed_item(), 'ResponseMetadata': {}})
    assert answer[member] == {name: exact(value) for name, value in typed_item().items()}
    assert answer[member]['precise'] == Decimal('12345678901234567890123456789012345678901234.5')
    assert isinstance(answer[member]['wrapped'], Binary)


def test_the_row_returned_with_a_refused_write_is_read_the_same_way() -> None:
    from botocore.exceptions import ClientError

    error = ClientError({'Error': {'Code': 'ConditionalCheckFailedException', 'Message': 'refused'},  # type: ignore
                         'Item': typed_item(), 'ResponseMetadata': {'HTTPStatusCode': 400}}, 'UpdateItem')
    refused = judge_error(error)
    assert isinstance(refused, Refused)
    assert refused.item == {name: exact(value) for name, value in typed_item().items()}


# -- names: the lock's own written directly, every name an application chooses through a placeholder --

RESERVED_WORDS_SCHEMA = Schema('reserved', 'name', 'data', 'ttl')   # DynamoDB reserved words, all three
_PLACEHOLDER = re.compile(r'#\w+')
_IDENTIFIER = re.compile(r'(?<![#:\w.])[A-Za-z_]\w*')
_KEYWORDS = {'SET', 'REMOVE', 'AND', 'OR', 'IN', 'if_not_exists', 'attribute_exists', 'attribute_not_exists',
             'size'}


@pytest.mark.parametrize('schema', [*SCHEMAS, RESERVED_WORDS_SCHEMA], ids=lambda schema: schema.table_name)
def test_only_the_locks_own_names_are_written_directly_and_every_placeholder_is_used(schema: Schema) -> None:
    """The lock's own attribute names (fixed identifiers, none a reserved word) are written into
    the expressions, which spares botocore a map entry each; the keys, the TTL attribute and
    additional attributes, which an application names (``name``, ``data`` and ``ttl`` are
    reserved words), always go through ``ExpressionAttributeNames``; DynamoDB refuses a
    placeholder no expression uses."""
    own = schema.reserved_names - {schema.partition_key_name, schema.sort_key_name, schema.ttl_attribute_name}
    for request in lock_requests(schema):
        params = request.params
        text = ' '.join(params.get(field, '') for field in ('UpdateExpression', 'ConditionExpression'))
        if not text.strip():
            continue
        assert set(_IDENTIFIER.findall(_PLACEHOLDER.sub(' ', text))) - _KEYWORDS <= own, text
        names = params.get('ExpressionAttributeNames', {})
        assert set(_PLACEHOLDER.findall(text)) == set(names), text
        assert not set(names.values()) & own


def test_writing_names_directly_leaves_every_expression_meaning_the_same() -> None:
    params = {'UpdateExpression': 'SET #a = :a, #b = :b, #ab = :c REMOVE #r',
              'ConditionExpression': 'attribute_exists(#a) AND #b.#b = :b',
              'ExpressionAttributeNames': {'#a': 'owner_name', '#b': 'status', '#ab': 'lease_duration',
                                           '#r': 'released_at'}}
    before = {field: readable_expression(params, field) for field in ('UpdateExpression', 'ConditionExpression')}
    after = requests.direct_names(copy.deepcopy(params))
    assert after['UpdateExpression'] == 'SET owner_name = :a, #b = :b, lease_duration = :c REMOVE released_at'
    assert after['ConditionExpression'] == 'attribute_exists(owner_name) AND #b.#b = :b'
    assert after['ExpressionAttributeNames'] == {'#b': 'status'}
    assert {field: readable_expression(after, field) for field in before} == before
    own_only = requests.direct_names({'ConditionExpression': '#v = :v',
                                      'ExpressionAttributeNames': {'#v': 'record_version_number'}})
    assert own_only == {'ConditionExpression': 'record_version_number = :v'}   # no empty map: DynamoDB refuses one
