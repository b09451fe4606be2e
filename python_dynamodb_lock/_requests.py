"""What to send to DynamoDB, kept apart from the code that sends it.

Each builder returns a :class:`Request`: the low-level client method to call and its keyword
arguments, with values as Python values (boto3's resource layer converts them; the asyncio
executor serialises them itself). Every attribute name goes through
``ExpressionAttributeNames`` (or is a quoted identifier in PartiQL), and every conditional
write asks for the item in the way (``ReturnValuesOnConditionCheckFailure='ALL_OLD'``) instead
of spending a read on it. Nothing here does I/O.
"""
from __future__ import annotations

from typing import Any, Dict, NamedTuple, Optional, Sequence

from ._schema import COL_RECORD_VERSION_NUMBER, Item, Schema

__all__ = [
    'MAX_BATCH_STATEMENTS',
    'MAX_CONDITION_VERSIONS',
    'Renewal',
    'Request',
    'delete_if_version',
    'get',
    'put_if_absent',
    'put_if_version',
    'renew',
    'renew_many',
    'scan',
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


class Renewal(NamedTuple):
    """One heartbeat: write ``new_version`` and ``new_expiry_time`` if the row carries one of
    ``expected_versions``."""

    partition_key: str
    sort_key: str
    expected_versions: Sequence[str]
    new_version: str
    new_expiry_time: int


def _version_condition(versions: Sequence[str]) -> tuple[str, Dict[str, Any]]:
    """A condition that the row carries one of ``versions``, and its values."""
    if not 0 < len(versions) <= 100:
        raise ValueError(f'a version condition names 1 to 100 versions, got {len(versions)}')
    placeholders = [f':expected_version_{index}' for index in range(len(versions))]
    values: Dict[str, Any] = dict(zip(placeholders, versions))
    if len(placeholders) == 1:
        return f'#version = {placeholders[0]}', values
    return f'#version IN ({", ".join(placeholders)})', values


def _conditional(schema: Schema, operation: str, **params: Any) -> Request:
    return Request(operation, {'TableName': schema.table_name, 'ReturnValuesOnConditionCheckFailure': 'ALL_OLD',
                               **params})


def put_if_absent(schema: Schema, item: Item) -> Request:
    """Create the lock row; refused when a row with that key exists."""
    return _conditional(
        schema, 'put_item',
        Item=dict(item),
        ConditionExpression='attribute_not_exists(#partition_key)',
        ExpressionAttributeNames={'#partition_key': schema.partition_key_name},
    )


def put_if_version(schema: Schema, item: Item, expected_version: str) -> Request:
    """Overwrite the lock row; refused unless it still carries ``expected_version``."""
    condition, values = _version_condition([expected_version])
    return _conditional(
        schema, 'put_item',
        Item=dict(item),
        ConditionExpression=condition,
        ExpressionAttributeNames={'#version': COL_RECORD_VERSION_NUMBER},
        ExpressionAttributeValues=values,
    )


def renew(schema: Schema, renewal: Renewal) -> Request:
    """Write a new version and TTL; refused unless the row carries an expected version."""
    condition, values = _version_condition(renewal.expected_versions)
    values[':new_version'] = renewal.new_version
    values[':new_expiry_time'] = renewal.new_expiry_time
    return _conditional(
        schema, 'update_item',
        Key=schema.key(renewal.partition_key, renewal.sort_key),
        UpdateExpression='SET #version = :new_version, #expiry_time = :new_expiry_time',
        ConditionExpression=condition,
        ExpressionAttributeNames={'#version': COL_RECORD_VERSION_NUMBER, '#expiry_time': schema.ttl_attribute_name},
        ExpressionAttributeValues=values,
    )


def _quoted(identifier: str) -> str:
    """A PartiQL quoted identifier (a double quote inside is doubled)."""
    return '"' + identifier.replace('"', '""') + '"'


def renew_many(schema: Schema, renewals: Sequence[Renewal]) -> Request:
    """Up to 25 renewals in one PartiQL ``BatchExecuteStatement`` call, each conditional on its own."""
    if not 0 < len(renewals) <= MAX_BATCH_STATEMENTS:
        raise ValueError(f'a batch holds 1 to {MAX_BATCH_STATEMENTS} renewals, got {len(renewals)}')
    statements = []
    for renewal in renewals:
        version_slots = ', '.join('?' for _ in renewal.expected_versions)
        statements.append({
            'Statement': (
                f'UPDATE {_quoted(schema.table_name)}'
                f' SET {_quoted(COL_RECORD_VERSION_NUMBER)} = ?'
                f' SET {_quoted(schema.ttl_attribute_name)} = ?'
                f' WHERE {_quoted(schema.partition_key_name)} = ? AND {_quoted(schema.sort_key_name)} = ?'
                f' AND {_quoted(COL_RECORD_VERSION_NUMBER)} IN [{version_slots}]'
            ),
            'Parameters': [
                renewal.new_version, renewal.new_expiry_time,
                renewal.partition_key, renewal.sort_key, *renewal.expected_versions,
            ],
            'ReturnValuesOnConditionCheckFailure': 'ALL_OLD',
        })
    return Request('batch_execute_statement', {'Statements': statements})


def delete_if_version(schema: Schema, partition_key: str, sort_key: str, expected_versions: Sequence[str]) -> Request:
    """Delete the lock row; refused unless it carries one of ``expected_versions``."""
    condition, values = _version_condition(expected_versions)
    return _conditional(
        schema, 'delete_item',
        Key=schema.key(partition_key, sort_key),
        ConditionExpression=condition,
        ExpressionAttributeNames={'#version': COL_RECORD_VERSION_NUMBER},
        ExpressionAttributeValues=values,
    )


def get(schema: Schema, partition_key: str, sort_key: str) -> Request:
    """A strongly consistent read of one row."""
    return Request('get_item', {'TableName': schema.table_name, 'Key': schema.key(partition_key, sort_key),
                                'ConsistentRead': True})


def scan(schema: Schema, exclusive_start_key: Optional[Item] = None) -> Request:
    """One page of a strongly consistent scan of the whole table."""
    params: Dict[str, Any] = {'TableName': schema.table_name, 'ConsistentRead': True}
    if exclusive_start_key:
        params['ExclusiveStartKey'] = exclusive_start_key
    return Request('scan', params)
