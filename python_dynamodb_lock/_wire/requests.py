"""What to send to DynamoDB, kept apart from the code that sends it: the request every builder
returns, what the builders share, and the reads, deletes and transactions.

Each builder returns a :class:`Request`: the low-level client method to call and its keyword
arguments, with values as Python values (boto3's resource layer converts them; the asyncio
executor serialises them itself). Every name an application chooses (the table's keys, the TTL
attribute, additional attributes, shared holders' ids) goes through ``ExpressionAttributeNames``
(or is a quoted identifier in PartiQL); this package's own attribute names
(:data:`.._model.schema.OWN_ATTRIBUTES`: fixed identifiers, none a reserved word) are written directly
into the expressions of the conditional writes, which makes each call lighter for botocore
(see :func:`direct_names`). Every conditional write asks for the item in the way
(``ReturnValuesOnConditionCheckFailure='ALL_OLD'``) instead of spending a read on it. Nothing
here does I/O.

The builders by concern, beside this module: a lock row's acquisitions and releases
(:mod:`.lock_writes`), its renewals (:mod:`.renewals`), client sessions' rows (:mod:`.sessions`)
and shared locks (:mod:`.shared_requests`).
"""
from __future__ import annotations

import functools
import re
from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Tuple

from .._model.schema import (
    COL_RECORD_VERSION_NUMBER,
    OWN_ATTRIBUTES,
    Item,
    PartitionKey,
    Schema,
)

__all__ = [
    'MAX_BATCH_STATEMENTS',
    'MAX_CONDITION_VERSIONS',
    'Request',
    'SHAPES',
    'conditional',
    'data_assignments',
    'data_values',
    'delete_if_version',
    'direct_names',
    'following_page',
    'get',
    'get_many',
    'query',
    'scan',
    'transact',
    'version_condition',
]

#: The most statements DynamoDB takes in one BatchExecuteStatement call.
MAX_BATCH_STATEMENTS = 25
#: How many versions one condition names (DynamoDB allows up to 100 operands in IN).
MAX_CONDITION_VERSIONS = 21


class Request(NamedTuple):
    """One call: ``operation`` is the low-level client's method name, ``params`` its arguments."""

    operation: str
    params: Dict[str, Any]

    @property
    def is_write(self) -> bool:
        return self.operation in ('put_item', 'update_item', 'delete_item', 'batch_execute_statement',
                                  'transact_write_items')


# The constant parts of each request (expression strings, attribute-name maps, placeholders)
# depend only on the schema and on the request's shape, so they are built once per shape.
SHAPES = 512


@functools.lru_cache(maxsize=128)
def _version_placeholders(count: int) -> Tuple[str, Tuple[str, ...]]:
    """The condition that the row carries one of ``count`` versions, and its value placeholders."""
    if not 0 < count <= 100:
        raise ValueError(f'a version condition names 1 to 100 versions, got {count}')
    placeholders = tuple(f':expected_version_{index}' for index in range(count))
    if count == 1:
        return f'#version = {placeholders[0]}', placeholders
    return f'#version IN ({", ".join(placeholders)})', placeholders


def version_condition(versions: Sequence[str]) -> Tuple[str, Dict[str, Any]]:
    """A condition that the row carries one of ``versions``, and its values."""
    condition, placeholders = _version_placeholders(len(versions))
    return condition, dict(zip(placeholders, versions))


_NAME_TOKEN = re.compile(r'#\w+')


@functools.lru_cache(maxsize=SHAPES)
def _direct_shape(update: Optional[str], condition: Optional[str], names: Tuple[Tuple[str, str], ...]
                  ) -> Tuple[Optional[str], Optional[str], Tuple[Tuple[str, str], ...]]:
    direct = {token: name for token, name in names if name in OWN_ATTRIBUTES}
    if not direct:
        return update, condition, names

    def name_of(match: 're.Match[str]') -> str:
        return direct.get(match.group(0), match.group(0))

    return (None if update is None else _NAME_TOKEN.sub(name_of, update),
            None if condition is None else _NAME_TOKEN.sub(name_of, condition),
            tuple((token, name) for token, name in names if token not in direct))


def direct_names(params: Dict[str, Any]) -> Dict[str, Any]:
    """``params`` (a write's arguments, changed in place and returned) with this package's own
    attribute names written directly into ``UpdateExpression`` and ``ConditionExpression``
    instead of through ``ExpressionAttributeNames``; the map keeps the other names, and goes
    when none is left (DynamoDB refuses an empty one).

    The same request either way, for DynamoDB; for botocore (and boto3's resource layer) every
    entry of the map is one more string to validate, copy, walk and serialise on each call: a
    lock's acquisition names up to twelve attributes.
    """
    names = params.get('ExpressionAttributeNames')
    if not names:
        return params
    update, condition, kept = _direct_shape(params.get('UpdateExpression'), params.get('ConditionExpression'),
                                            tuple(names.items()))
    if update is not None:
        params['UpdateExpression'] = update
    if condition is not None:
        params['ConditionExpression'] = condition
    if kept:
        params['ExpressionAttributeNames'] = dict(kept)
    else:
        del params['ExpressionAttributeNames']
    return params


def conditional(schema: Schema, operation: str, **params: Any) -> Request:
    """A conditional write that returns the row in its way when refused (own names written directly)."""
    return Request(operation, direct_names({'TableName': schema.table_name,
                                            'ReturnValuesOnConditionCheckFailure': 'ALL_OLD', **params}))


def data_assignments(names: Dict[str, str], written: Sequence[str]) -> List[str]:
    """``#d<i> = :d<i>`` for the additional attributes a write sets (names added to ``names``)."""
    assignments = []
    for index, name in enumerate(written):
        names[f'#d{index}'] = name
        assignments.append(f'#d{index} = :d{index}')
    return assignments


def data_values(values: Dict[str, Any], attributes: Sequence[Tuple[str, Any]]) -> None:
    for index, (_, value) in enumerate(attributes):
        values[f':d{index}'] = value


def delete_if_version(schema: Schema, partition_key: PartitionKey, sort_key: str,
                      expected_versions: Sequence[str]) -> Request:
    """Delete the lock row; refused unless it carries one of ``expected_versions``."""
    condition, values = version_condition(expected_versions)
    return conditional(
        schema, 'delete_item',
        Key=schema.key(partition_key, sort_key),
        ConditionExpression=condition,
        ExpressionAttributeNames={'#version': COL_RECORD_VERSION_NUMBER},
        ExpressionAttributeValues=values,
    )


def get(schema: Schema, partition_key: PartitionKey, sort_key: str) -> Request:
    """A strongly consistent read of one row."""
    return Request('get_item', {'TableName': schema.table_name, 'Key': schema.key(partition_key, sort_key),
                                'ConsistentRead': True})


def get_many(schema: Schema, keys: Sequence[Tuple[Any, str]]) -> Request:
    """One serializable read of up to 100 rows (``TransactGetItems``): the answer's
    ``Responses`` hold them in the order of ``keys``."""
    return Request('transact_get_items', {'TransactItems': [
        {'Get': {'TableName': schema.table_name, 'Key': schema.key(partition_key, sort_key)}}
        for partition_key, sort_key in keys]})


def transact(actions: Sequence[Dict[str, Any]], client_request_token: str) -> Request:
    """One ``TransactWriteItems`` call: every action applied, or none; the token makes a
    repeated call idempotent for 10 minutes (an answer lost on the way is asked again safely)."""
    return Request('transact_write_items', {'TransactItems': list(actions),
                                            'ClientRequestToken': client_request_token})


def scan(schema: Schema, exclusive_start_key: Optional[Item] = None) -> Request:
    """One page of a strongly consistent scan of the whole table."""
    params: Dict[str, Any] = {'TableName': schema.table_name, 'ConsistentRead': True}
    if exclusive_start_key:
        params['ExclusiveStartKey'] = exclusive_start_key
    return Request('scan', params)


def query(schema: Schema, partition_key: PartitionKey, exclusive_start_key: Optional[Item] = None) -> Request:
    """One page of a strongly consistent query of the rows under one partition key (every
    sort key of it; on a table without a sort key, the one row of that key)."""
    params: Dict[str, Any] = {
        'TableName': schema.table_name,
        'KeyConditionExpression': '#partition_key = :partition_key',
        'ExpressionAttributeNames': {'#partition_key': schema.partition_key_name},
        'ExpressionAttributeValues': {':partition_key': partition_key},
        'ConsistentRead': True,
    }
    if exclusive_start_key:
        params['ExclusiveStartKey'] = exclusive_start_key
    return Request('query', params)


def following_page(request: Request, last_evaluated_key: Optional[Item]) -> Optional[Request]:
    """The request for the page after the one ``request`` read (a scan or a query), whose
    answer ended at ``last_evaluated_key``; None after the last page."""
    if not last_evaluated_key:
        return None
    return Request(request.operation, {**request.params, 'ExclusiveStartKey': last_evaluated_key})
