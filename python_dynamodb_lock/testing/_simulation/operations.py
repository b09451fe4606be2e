"""The operations of the simulated table other than the single-item writes: reads, pages of
``query``/``scan``, and the two transactions (``TransactWriteItems`` all or nothing)."""
from __future__ import annotations

import json
import re
from typing import Any, Callable, Dict, List, Mapping, Optional

from . import values as v
from .errors import CONDITION_FAILED_MESSAGE, Invalid, client_error, transaction_canceled, validation
from .partiql import batch_execute_statement
from .table import OPERATIONS, TableState, StoredKey, Write, refuse_unknown

__all__ = ['HANDLERS']

Item = Dict[str, Any]
_READ = frozenset({'TableName', 'ReturnConsumedCapacity', 'ConsistentRead', 'ExclusiveStartKey', 'Limit'})
_QUERY = _READ | {'KeyConditionExpression', 'ExpressionAttributeNames', 'ExpressionAttributeValues',
                  'ScanIndexForward'}
_KEY_CONDITION = re.compile(r'^\s*(#\w+|[A-Za-z_]\w*)\s*=\s*(:\w+)\s*$')
_TOKEN_LIFETIME = 600.0
_TRANSACTION_KINDS = {'Put': 'put_item', 'Update': 'update_item', 'Delete': 'delete_item',
                      'ConditionCheck': 'condition_check'}
_ACTION_PARAMETERS = frozenset({'TableName', 'Key', 'Item', 'UpdateExpression', 'ConditionExpression',
                                'ExpressionAttributeNames', 'ExpressionAttributeValues',
                                'ReturnValuesOnConditionCheckFailure'})


def _get_item(table: TableState, params: Dict[str, Any], request_id: str) -> Dict[str, Any]:
    refuse_unknown('get_item', params, frozenset({'TableName', 'Key', 'ConsistentRead', 'ReturnConsumedCapacity'}))
    table.check_table(params.get('TableName'))
    item = table.get(table.stored_key(params.get('Key') or {}))
    return {'Item': item} if item is not None else {}


def _page(table: TableState, keys: List[StoredKey], params: Mapping[str, Any]) -> Dict[str, Any]:
    """One page of ``keys`` (in the order read) after ``ExclusiveStartKey``."""
    limit = params.get('Limit')
    if limit is not None and (not isinstance(limit, int) or limit < 1):
        raise validation(f"1 validation error detected: Value '{limit}' at 'limit' failed to satisfy constraint: "
                         'Member must have value greater than or equal to 1')
    start = params.get('ExclusiveStartKey')
    if start is not None:
        start_key = table.stored_key(start)
        start_order = table.order(start_key)
        forward = params.get('ScanIndexForward', True)
        keys = [key for key in keys if (table.order(key) > start_order) == forward and key != start_key]
    bound = min(limit or len(keys), table.page_size or len(keys))
    page = keys[:bound]
    answer: Dict[str, Any] = {'Items': [table.get(key) for key in page], 'Count': len(page),
                              'ScannedCount': len(page)}
    if page and (len(page) == limit or len(keys) > len(page)):
        answer['LastEvaluatedKey'] = table.key_item(page[-1])
    return answer


def _scan(table: TableState, params: Dict[str, Any], request_id: str) -> Dict[str, Any]:
    """A scan reads in key order (DynamoDB's order is its hash order: compare scans as sets)."""
    refuse_unknown('scan', params, _READ)
    table.check_table(params.get('TableName'))
    return _page(table, table.ordered_keys(), params)


def _query(table: TableState, params: Dict[str, Any], request_id: str) -> Dict[str, Any]:
    """A query of one partition key (``name = :value``, the shape this library sends), in sort key order."""
    refuse_unknown('query', params, _QUERY)
    table.check_table(params.get('TableName'))
    expression = str(params.get('KeyConditionExpression') or '')
    match = _KEY_CONDITION.match(expression)
    if match is None:
        raise NotImplementedError(f'the simulated table models a KeyConditionExpression "<partition key> = :value" '
                                  f'only, got {expression!r}')
    names = params.get('ExpressionAttributeNames') or {}
    values = params.get('ExpressionAttributeValues') or {}
    name_token, value_token = match.groups()
    if set(names) - {name_token} or set(values) - {value_token}:
        raise validation('Value provided in ExpressionAttributeNames or ExpressionAttributeValues unused in '
                         'expressions')
    name = names.get(name_token) if name_token.startswith('#') else name_token
    if name is None or value_token not in values:
        raise validation(f'Invalid KeyConditionExpression: An expression attribute name or value used in expression '
                         f'is not defined: {name_token if name is None else value_token}')
    partition = table.keys[0]
    if name != partition.name:
        raise validation('Query condition missed key schema element: ' + partition.name)
    wanted = v.canonical(values[value_token])
    if v.type_of(wanted) != partition.type:
        raise validation('One or more parameter values were invalid: Condition parameter type does not match schema '
                         'type')
    keys = [key for key in table.ordered_keys() if key[0] == (partition.type, wanted[partition.type])]
    if not params.get('ScanIndexForward', True):
        keys.reverse()
    return _page(table, keys, params)


def _transact_get_items(table: TableState, params: Dict[str, Any], request_id: str) -> Dict[str, Any]:
    refuse_unknown('transact_get_items', params, frozenset({'TransactItems', 'ReturnConsumedCapacity'}))
    actions = params.get('TransactItems') or []
    _check_count(actions)
    keys = []
    for action in actions:
        if set(action) != {'Get'}:
            raise NotImplementedError(f'the simulated table models TransactGetItems of Get actions only, got {action}')
        get = action['Get']
        refuse_unknown('TransactGetItems Get', get, frozenset({'TableName', 'Key'}))
        table.check_table(get.get('TableName'))
        keys.append(table.stored_key(get.get('Key') or {}))
    _check_distinct(keys)
    responses = []
    for key in keys:
        item = table.get(key)
        responses.append({'Item': item} if item is not None else {})
    return {'Responses': responses}


def _check_count(actions: Any) -> None:
    if not isinstance(actions, list) or not 1 <= len(actions) <= 100:
        count = len(actions) if isinstance(actions, list) else 0
        raise validation(f"1 validation error detected: Value at 'transactItems' failed to satisfy constraint: Member "
                         f'must have length less than or equal to 100 and greater than or equal to 1 (got {count})')


def _check_distinct(keys: List[StoredKey]) -> None:
    if len(set(keys)) != len(keys):
        raise validation('Transaction request cannot include multiple operations on one item')


def _parse_actions(table: TableState, actions: List[Any]) -> List[Write]:
    writes = []
    for action in actions:
        kinds = [kind for kind in action if kind in _TRANSACTION_KINDS]
        if len(kinds) != 1 or len(action) != 1:
            raise validation('TransactItems can only contain one of Check, Put, Update or Delete')
        body = action[kinds[0]]
        refuse_unknown(f'TransactWriteItems {kinds[0]}', body, _ACTION_PARAMETERS)
        table.check_table(body.get('TableName'))
        on_failure = body.get('ReturnValuesOnConditionCheckFailure', 'NONE')
        if on_failure not in ('NONE', 'ALL_OLD'):
            raise validation(f'ReturnValuesOnConditionCheckFailure set to invalid value: {on_failure}')
        writes.append(table.parse_write(_TRANSACTION_KINDS[kinds[0]], body))
    _check_distinct([write.key for write in writes])
    return writes


def _token_seen(table: TableState, token: Optional[str], params: Mapping[str, Any], request_id: str) -> bool:
    """Whether a transaction with this ``ClientRequestToken`` already succeeded (it is then not
    applied again); IdempotentParameterMismatchException when it carried other actions."""
    if token is None:
        return False
    now = table.clock() if table.clock is not None else 0.0
    for seen, (_, first_use) in list(table.tokens.items()):
        if table.clock is not None and now - first_use > _TOKEN_LIFETIME:
            del table.tokens[seen]
    known = table.tokens.get(token)
    if known is None:
        return False
    if known[0] != _fingerprint(params):
        raise client_error('TransactWriteItems', 'IdempotentParameterMismatchException', '', request_id,
                           {'Message': ''})
    return True


def _fingerprint(params: Mapping[str, Any]) -> str:
    return json.dumps(params.get('TransactItems'), sort_keys=True, default=repr)


def _transact_write_items(table: TableState, params: Dict[str, Any], request_id: str) -> Dict[str, Any]:
    refuse_unknown('transact_write_items', params, frozenset({'TransactItems', 'ClientRequestToken',
                                                              'ReturnConsumedCapacity', 'ReturnItemCollectionMetrics'}))
    actions = params.get('TransactItems')
    _check_count(actions)
    token = params.get('ClientRequestToken')
    if _token_seen(table, token, params, request_id):
        return {}
    writes = _parse_actions(table, actions)  # type: ignore[arg-type]
    reasons: List[Dict[str, Any]] = []
    results: List[Optional[Item]] = []
    for write in writes:
        holds, old = table.holds(write)
        if not holds:
            reason: Dict[str, Any] = {'Code': 'ConditionalCheckFailed', 'Message': CONDITION_FAILED_MESSAGE}
            if old and write.params.get('ReturnValuesOnConditionCheckFailure') == 'ALL_OLD':
                reason['Item'] = old
            reasons.append(reason)
            results.append(None)
            continue
        try:
            results.append(table.result_of(write, old))
            reasons.append({'Code': 'None'})
        except Invalid as invalid:
            reasons.append({'Code': 'ValidationError', 'Message': invalid.message})
            results.append(None)
    if any(reason['Code'] != 'None' for reason in reasons):
        raise transaction_canceled(request_id, reasons)
    for write, result in zip(writes, results):
        if write.update is not None or write.new_item is not None or write.delete:
            table.store(write.key, result)
    if token is not None:
        table.tokens[token] = (_fingerprint(params), table.clock() if table.clock is not None else 0.0)
    return {}


def _single_write(method: str) -> Callable[[TableState, Dict[str, Any], str], Dict[str, Any]]:
    def handler(table: TableState, params: Dict[str, Any], request_id: str) -> Dict[str, Any]:
        return table.single_write(method, params, request_id)
    return handler


HANDLERS: Dict[str, Callable[[TableState, Dict[str, Any], str], Dict[str, Any]]] = {
    'put_item': _single_write('put_item'),
    'update_item': _single_write('update_item'),
    'delete_item': _single_write('delete_item'),
    'get_item': _get_item,
    'query': _query,
    'scan': _scan,
    'transact_get_items': _transact_get_items,
    'transact_write_items': _transact_write_items,
    'batch_execute_statement': batch_execute_statement,
}
assert set(HANDLERS) == set(OPERATIONS)
