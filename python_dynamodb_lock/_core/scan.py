"""Operator reads and writes: listing locks page by page (a scan, or a query of one partition
key), and force-releasing one."""
from __future__ import annotations

import uuid
from typing import Any, Dict, List, Optional, Tuple, Union

from .._model.errors import DynamoDBLockError
from .._wire.lock_writes import free_row
from .._wire.requests import Request, following_page
from .._model.schema import Schema
from .answers import Answer, Applied, Failed, Refused, single
from .release import ReleaseSettings
from .effects import Call, Protocol
from .messages import explain
from .state import LockRow, TimeSource

__all__ = ['force_release', 'next_page']


def next_page(schema: Schema, request: Request,
              answer: Union[Answer, List[Answer]]) -> Tuple[List[Dict[str, Any]], Optional[Request]]:
    """The rows of the page ``request`` (a scan or a query) read, and the request for the next
    page (None after the last).

    :raises DynamoDBLockError: ``UNKNOWN`` when the read failed.
    """
    answer = single(answer)
    if not isinstance(answer, Applied):
        assert isinstance(answer, Failed), answer
        raise DynamoDBLockError(DynamoDBLockError.UNKNOWN, explain(schema, answer.error),
                                reason=answer.reason) from answer.error
    rows = [dict(item) for item in answer.response.get('Items', [])]
    last_key = answer.response.get('LastEvaluatedKey')
    return rows, following_page(request, last_key)


def force_release(settings: ReleaseSettings, lock: LockRow, clock: TimeSource) -> Protocol[bool]:
    """Free a lock's row only if it still carries ``lock.record_version_number`` (marked released,
    keeping its fencing token, unless the client keeps no released rows).

    :returns: True when freed, False when the row had changed or was gone.
    :raises DynamoDBLockError: ``UNKNOWN`` when the write fails.
    """
    schema = settings.schema
    # A lock on an existing item writes no TTL (expiry_time reads 0): only the lock's own attributes
    # are removed (what reads as its additional attributes there are the item's).
    on_item = not lock.expiry_time
    answer = yield Call(free_row(schema, lock.partition_key, lock.sort_key, [lock.record_version_number],
                                 str(uuid.uuid4()), int(clock.time() + settings.expiry_period), int(clock.time()),
                                 () if on_item else lock.additional_attributes, settings.keep_released_rows,
                                 existing_item=on_item))
    if isinstance(answer, Applied):
        return True
    if isinstance(answer, Refused):
        return False
    raise DynamoDBLockError(DynamoDBLockError.UNKNOWN, explain(schema, answer.error),
                            reason=answer.reason) from answer.error
