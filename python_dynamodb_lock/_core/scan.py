"""Operator reads and writes: listing locks page by page, and force-releasing one."""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from .._errors import DynamoDBLockError
from .._requests import Request, delete_if_version, scan
from .._schema import Schema
from .answers import Answer, Applied, Failed, Refused
from .effects import Call, Protocol
from .messages import explain

__all__ = ['force_release', 'next_page']


def next_page(schema: Schema, answer: Answer) -> Tuple[List[Dict[str, Any]], Optional[Request]]:
    """The rows of one scan page, and the request for the next page (None after the last).

    :raises DynamoDBLockError: ``UNKNOWN`` when the scan failed.
    """
    if not isinstance(answer, Applied):
        assert isinstance(answer, Failed), answer
        raise DynamoDBLockError(DynamoDBLockError.UNKNOWN, explain(schema, answer.error),
                                reason=answer.reason) from answer.error
    rows = [dict(item) for item in answer.response.get('Items', [])]
    last_key = answer.response.get('LastEvaluatedKey')
    return rows, (scan(schema, last_key) if last_key else None)


def force_release(schema: Schema, lock: Any) -> Protocol[bool]:
    """Delete a lock's row only if it still carries ``lock.record_version_number``.

    :returns: True when deleted, False when the row had changed or was gone.
    :raises DynamoDBLockError: ``UNKNOWN`` when the delete fails.
    """
    answer = yield Call(delete_if_version(schema, lock.partition_key, lock.sort_key, [lock.record_version_number]))
    if isinstance(answer, Applied):
        return True
    if isinstance(answer, Refused):
        return False
    raise DynamoDBLockError(DynamoDBLockError.UNKNOWN, explain(schema, answer.error),
                            reason=answer.reason) from answer.error
