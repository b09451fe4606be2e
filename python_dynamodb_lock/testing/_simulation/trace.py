"""How a simulation's trace names effects and values: short, readable, and the same from one
run to the next (no record version numbers, object ids or addresses, which change)."""
from __future__ import annotations

import re
from typing import Any, Mapping

from ..._core.answers import Applied, Failed, Refused
from ..._core.effects import Call, Drop, Hold, Pending, Settle, Sleep, Submit, Unregister

__all__ = ['describe_effect', 'describe_value', 'request_keys']

# A session row's key ends with a random part: the trace names the session by its owner.
_SESSION_ROW = re.compile(r'python_dynamodb_lock/session/([^/,]+)/[0-9a-f]+')


def request_keys(params: Mapping[str, Any]) -> str:
    """The keys a request is about, as ``partition/sort`` (every string key value, in order)."""
    keys = []
    for name in ('Key', 'Item'):
        item = params.get(name)
        if isinstance(item, Mapping):
            keys.append('/'.join(str(value) for value in item.values() if isinstance(value, (str, int)))
                        if name == 'Key' else _item_key(item))
    for action in params.get('TransactItems') or ():
        for body in action.values():
            keys.append(request_keys(body))
    if 'Statements' in params:
        keys.append(f'{len(params["Statements"])} statements')
    return _SESSION_ROW.sub(r'session/\1', ', '.join(key for key in keys if key))


def _item_key(item: Mapping[str, Any]) -> str:
    for pk_name in ('lock_key', 'pk', 'key'):
        if pk_name in item:
            return str(item[pk_name]) + ('/' + str(item['sort_key']) if 'sort_key' in item else '')
    return '?'


def describe_effect(effect: Any) -> str:
    if isinstance(effect, Call):
        return f'call {effect.request.operation} {request_keys(effect.request.params)}'
    if isinstance(effect, Sleep):
        return f'sleep {effect.seconds:.6f}'
    if isinstance(effect, Hold):
        return f'hold {effect.lock.unique_identifier}{"" if effect.wait else " (if free)"}'
    if isinstance(effect, Drop):
        return f'drop {effect.lock.unique_identifier}'
    if isinstance(effect, Submit):
        return f'submit {", ".join(lock.unique_identifier for lock in effect.locks)}'
    if isinstance(effect, Unregister):
        return f'unregister {effect.lock.unique_identifier}'
    if isinstance(effect, Settle):
        return 'settle (follow-up)' if effect.follow_up else 'settle'
    if isinstance(effect, Pending):
        return 'pending'
    return type(effect).__name__


def describe_value(value: Any) -> str:
    if isinstance(value, list):
        return '[' + ', '.join(describe_value(each) for each in value) + ']'
    if isinstance(value, Applied):
        return 'Applied'
    if isinstance(value, Refused):
        return f'Refused(retried={value.retried}, row={"yes" if value.item else "none"})'
    if isinstance(value, Failed):
        return f'Failed({value.reason}, maybe_applied={value.maybe_applied})'
    if isinstance(value, BaseException):
        code = getattr(value, 'code', '')
        return f'{type(value).__name__}({code})' if code else type(value).__name__
    if value is None or isinstance(value, (bool, int, float, str)):
        return repr(value)
    unique = getattr(value, 'unique_identifier', None)
    if unique is not None:
        return f'{type(value).__name__}({unique}, token={getattr(value, "fencing_token", None)})'
    return type(value).__name__
