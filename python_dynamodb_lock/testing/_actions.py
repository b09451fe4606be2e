"""What a lock client's request does (acquire, heartbeat, release), read from its decoded body: the
``when`` filters of :class:`FaultInjector` and :attr:`RecordedCall.action`."""
from __future__ import annotations

import re
from typing import Any, Dict, Optional

__all__ = ['is_acquire', 'is_heartbeat', 'is_release', 'lock_action', 'readable_expression']


def lock_action(params: Dict[str, Any]) -> Optional[str]:
    """What a lock client's request does, from its decoded body (what ``when`` filters and
    :attr:`RecordedCall.params` get): ``'acquire'``, ``'heartbeat'``, ``'release'``, or None
    for anything else (reads, the application's own writes).

    Acquiring, renewing and releasing are all ``UpdateItem`` calls (a release keeps the row,
    marked ``released_at``; a client with ``keep_released_rows=False`` releases with a
    conditional ``DeleteItem``); batched heartbeats are ``BatchExecuteStatement`` calls.
    """
    values = params.get('ExpressionAttributeValues') or {}
    if ':released_at' in values:
        return 'release'
    if ':token_floor' in values:
        return 'acquire'
    if ':row_version' in values or ':entry_version_0' in values:   # shared (read) locks
        if ':entry' in values or ':holders' in values:
            return 'acquire'
        return 'heartbeat' if ':new_version' in values else 'release'
    statements = params.get('Statements') or []
    if ':new_lease_expiry' in values or (statements and all(
            '"record_version_number" IN [' in statement.get('Statement', '') for statement in statements)):
        return 'heartbeat'
    if 'UpdateExpression' not in params and 'Item' not in params and ':expected_version_0' in values \
            and 'Key' in params:
        return 'release'   # a conditional DeleteItem
    return None


_PLACEHOLDER = re.compile(r'#\w+')


def readable_expression(params: Dict[str, Any], field: str = 'UpdateExpression') -> str:
    """``params[field]`` (``'UpdateExpression'``, ``'ConditionExpression'``, ...) with every
    ``#placeholder`` replaced by the attribute name it stands for: what the expression does,
    whether a name went through ``ExpressionAttributeNames`` (the names an application chooses:
    keys, TTL attribute, additional attributes) or is written directly (the lock's own
    attributes, such as ``record_version_number``). ``''`` when the request has no such field."""
    names = params.get('ExpressionAttributeNames') or {}
    return _PLACEHOLDER.sub(lambda match: str(names.get(match.group(0), match.group(0))), params.get(field) or '')


def is_acquire(params: Dict[str, Any]) -> bool:
    """A ``when`` filter: the request acquires a lock (first write, takeover or hand-over)."""
    return lock_action(params) == 'acquire'


def is_heartbeat(params: Dict[str, Any]) -> bool:
    """A ``when`` filter: the request renews locks (``UpdateItem``, or a batch)."""
    return lock_action(params) == 'heartbeat'


def is_release(params: Dict[str, Any]) -> bool:
    """A ``when`` filter: the request releases a lock (or force-releases one)."""
    return lock_action(params) == 'release'

