"""Words for failures: how a key and a DynamoDB failure are described to people."""
from __future__ import annotations

import decimal

from .._model.schema import PartitionKey, Schema
from .answers import error_code

__all__ = ['describe_key', 'explain']


def describe_key(schema: Schema, partition_key: PartitionKey, sort_key: str) -> str:
    return f'lock {partition_key!r}/{sort_key!r} in table {schema.table_name!r}'


def explain(schema: Schema, exc: BaseException) -> str:
    """A message for a DynamoDB failure, with the fix for the common mistakes."""
    code = error_code(exc)
    table = schema.table_name
    if isinstance(exc, decimal.DecimalException):
        return ('the row holds a number that boto3 cannot read back (38 digits or more; '
                f'boto/boto3#2500): {exc!r}')
    if code == 'ResourceNotFoundException':
        return (
            f'table {table!r} does not exist: create it with '
            'DynamoDBLockClient.create_dynamodb_table(boto3.client("dynamodb"), '
            f'table_name={table!r}) or `dynamodb-lock create-table --table {table}` ({exc})'
        )
    if code == 'ValidationException' and 'item size' in str(exc).lower():
        return ("the item would exceed DynamoDB's 400 KB item size limit: the lock's own attributes (about 250 "
                'bytes, more with a long owner_name) and the data on the row (additional attributes, attributes '
                "written at release, or, for a lock on an existing item, the item's own attributes) must fit in "
                f'it together ({exc})')
    if code == 'ValidationException' and 'key' in str(exc).lower():
        kind = {'S': 'string', 'N': 'number', 'B': 'binary'}.get(schema.partition_key_type, schema.partition_key_type)
        sort_key = (f'string RANGE key {schema.sort_key_name!r}' if schema.sort_key_name is not None
                    else 'no RANGE key')
        return (
            f'table {table!r} does not have the expected key schema ({kind} HASH key '
            f'{schema.partition_key_name!r}, {sort_key}; DynamoDBLockClient.for_table reads the table\'s '
            f'key schema): {exc}'
        )
    return str(exc)
