"""Fencing a DynamoDB item without a transaction: a conditional write on a stored fence.

When the protected data lives in DynamoDB, ``lock.put_item(...)`` / ``lock.transact_write_items``
(guarded writes) are the strongest choice: the write and the lock check commit together. When a
transaction is not wanted (cost, another table's capacity, a write that must also succeed for
holders of an older library), the item itself can carry the fence: every write is conditioned
on the item's fence not being newer than the writer's fencing token, and stores that token.
"""
from __future__ import annotations

from typing import Any, Mapping

from botocore.exceptions import ClientError


def fenced_put(table: Any, item: Mapping[str, Any], fencing_token: int) -> bool:
    """Put ``item`` into ``table`` (a boto3 ``Table``) unless a holder with a newer token wrote it.

    :returns: False when refused (a newer lock holder has written since).
    """
    try:
        table.put_item(
            Item={**item, 'fence': fencing_token},
            ConditionExpression='attribute_not_exists(#fence) OR #fence <= :token',
            ExpressionAttributeNames={'#fence': 'fence'},
            ExpressionAttributeValues={':token': fencing_token},
        )
    except ClientError as error:
        if error.response.get('Error', {}).get('Code') == 'ConditionalCheckFailedException':
            return False
        raise
    return True
