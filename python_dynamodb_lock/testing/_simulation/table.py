"""The simulated table's state: its items, its key schema, and the single-item writes.

:meth:`.simulated.SimulatedTable.handle` takes a low-level request (the client method's name, ``'update_item'``,
or the API's, ``'UpdateItem'``, and its keyword arguments with typed attribute values) and
returns the answer botocore would parse (``ResponseMetadata`` included), or raises the
``ClientError`` botocore would raise. Request ids are a counter: the same requests give the
same answers, byte for byte. Items stay until deleted (TTL deletes nothing here: DynamoDB
deletes expired items lazily, possibly days later).
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Mapping, NamedTuple, Optional, Tuple

from . import values as v
from .errors import Invalid, condition_failed, validation
from .expressions import Condition, Parser, Placeholders, evaluate
from .templates import parse_cached
from .updates import Update, apply_update, parse_update, project

__all__ = ['BY_API_NAME', 'KeyAttribute', 'OPERATIONS', 'TableState', 'Write']

Item = Dict[str, Any]
StoredKey = Tuple[Tuple[str, Any], ...]

# Operation names: the client method's (what Request.operation holds) and the API's.
OPERATIONS = {
    'put_item': 'PutItem', 'update_item': 'UpdateItem', 'delete_item': 'DeleteItem', 'get_item': 'GetItem',
    'query': 'Query', 'scan': 'Scan', 'transact_write_items': 'TransactWriteItems',
    'transact_get_items': 'TransactGetItems', 'batch_execute_statement': 'BatchExecuteStatement',
}
BY_API_NAME = {api: method for method, api in OPERATIONS.items()}
_COMMON = frozenset({'TableName', 'ReturnConsumedCapacity'})
_WRITE = _COMMON | {'ConditionExpression', 'ExpressionAttributeNames', 'ExpressionAttributeValues', 'ReturnValues',
                    'ReturnValuesOnConditionCheckFailure', 'ReturnItemCollectionMetrics'}
ALLOWED_PARAMETERS = {
    'put_item': _WRITE | {'Item'},
    'update_item': _WRITE | {'Key', 'UpdateExpression'},
    'delete_item': _WRITE | {'Key'},
    'get_item': _COMMON | {'Key', 'ConsistentRead'},
}
_RETURN_VALUES = {'put_item': ('NONE', 'ALL_OLD'), 'delete_item': ('NONE', 'ALL_OLD'),
                  'update_item': ('NONE', 'ALL_OLD', 'UPDATED_OLD', 'ALL_NEW', 'UPDATED_NEW')}
_NO_TABLE = 'Cannot do operations on a non-existent table'


class KeyAttribute(NamedTuple):
    """One attribute of the table's key: its name and type ('S', 'N' or 'B')."""

    name: str
    type: str = 'S'


class Write(NamedTuple):
    """A write checked and parsed, not yet applied: ``new`` None deletes the item; ``condition``
    None has no condition."""

    key: StoredKey
    key_item: Item
    condition: Optional[Condition]
    update: Optional[Update]
    new_item: Optional[Item]
    delete: bool
    params: Mapping[str, Any]


def refuse_unknown(operation: str, params: Mapping[str, Any], allowed: frozenset) -> None:  # type: ignore[type-arg]
    unknown = sorted(set(params) - allowed)
    if unknown:
        raise NotImplementedError(f'the simulated table does not model {", ".join(unknown)} in {operation}; '
                                  f'it takes {", ".join(sorted(allowed))}')


class TableState:
    """One DynamoDB table in memory: its items and keys, and the single-item writes (see
    :class:`~.simulated.SimulatedTable` for the requests).

    ``partition_key`` and ``sort_key`` are :class:`KeyAttribute` (or ``(name, type)`` pairs);
    ``page_size`` (optional) ends a page of ``scan``/``query`` after that many items, as
    DynamoDB ends one at 1 MB; ``clock`` (optional, seconds) lets ``ClientRequestToken``\\ s
    expire after 10 minutes as DynamoDB's do (without it they never expire).
    """

    def __init__(self, table_name: str, partition_key: Tuple[str, str], sort_key: Optional[Tuple[str, str]] = None,
                 *, page_size: Optional[int] = None, clock: Optional[Callable[[], float]] = None) -> None:
        keys = [KeyAttribute(*partition_key)] + ([KeyAttribute(*sort_key)] if sort_key is not None else [])
        for key in keys:
            if key.type not in ('S', 'N', 'B'):
                raise ValueError(f'a key attribute is of type S, N or B, got {key.type!r} for {key.name!r}')
        if page_size is not None and page_size < 1:
            raise ValueError(f'page_size must be a positive number of items, got {page_size!r}')
        self.table_name = table_name
        self.keys: Tuple[KeyAttribute, ...] = tuple(keys)
        self.key_names: Tuple[str, ...] = tuple(key.name for key in keys)
        self.page_size = page_size
        self.clock = clock
        self._items: Dict[StoredKey, Item] = {}
        self._requests = 0
        self.tokens: Dict[str, Tuple[Any, float]] = {}

    # -- inspection ----------------------------------------------------------------------------
    def snapshot(self) -> Dict[StoredKey, Item]:
        """A deep copy of every item (typed), by key; for invariant checks."""
        return {key: v.copy_item(self._items[key]) for key in self.ordered_keys()}

    def items(self) -> List[Item]:
        """Every item (typed, deep copies), in key order."""
        return list(self.snapshot().values())

    def __len__(self) -> int:
        return len(self._items)

    # -- keys ----------------------------------------------------------------------------------
    def check_table(self, table_name: Any) -> None:
        if table_name != self.table_name:
            raise Invalid(_NO_TABLE, 'ResourceNotFoundException')

    def stored_key(self, key: Mapping[str, Any], what: str = 'Key') -> StoredKey:
        """The item key of ``key`` (a Key, or an Item holding one); ValidationException when it is not the table's."""
        if what == 'Key' and set(key) != set(self.key_names):
            raise validation('The provided key element does not match the schema')
        parts = []
        for attribute in self.keys:
            value = key.get(attribute.name)
            if value is None:
                raise validation(f'One or more parameter values were invalid: Missing the key {attribute.name} '
                                 'in the item')
            v.check_value(value)
            if v.type_of(value) != attribute.type:
                raise validation('One or more parameter values were invalid: Type mismatch for key '
                                 f'{attribute.name} expected: {attribute.type} actual: {v.type_of(value)}')
            content = value[attribute.type]
            if content in ('', b''):
                raise validation('One or more parameter values are not valid. The AttributeValue for a key '
                                 f'attribute cannot contain an empty {"string" if attribute.type == "S" else "binary"}'
                                 f' value. Key: {attribute.name}')
            parts.append((attribute.type, v.canonical(value)[attribute.type]))
        return tuple(parts)

    def key_item(self, key: StoredKey) -> Item:
        return {attribute.name: {kind: content} for attribute, (kind, content) in zip(self.keys, key)}

    def order(self, key: StoredKey) -> Tuple[Any, ...]:
        return tuple(v.ordering_key({kind: content})[1] for kind, content in key)

    def ordered_keys(self) -> List[StoredKey]:
        return sorted(self._items, key=self.order)

    def get(self, key: StoredKey) -> Optional[Item]:
        item = self._items.get(key)
        return v.copy_item(item) if item is not None else None

    # -- writes --------------------------------------------------------------------------------
    def parse_write(self, kind: str, params: Mapping[str, Any]) -> Write:
        """Check and parse a Put, Update, Delete or ConditionCheck (``kind``: 'put_item', 'update_item',
        'delete_item', 'condition_check'); nothing is written."""
        placeholders = Placeholders(params.get('ExpressionAttributeNames'), params.get('ExpressionAttributeValues'))
        if kind == 'put_item':
            item = params.get('Item')
            if not isinstance(item, Mapping):
                raise validation('1 validation error detected: Value null at \'item\' failed to satisfy constraint')
            key = self.stored_key(item, 'Item')
            for value in item.values():
                v.check_value(value)
            written = {name: v.canonical(value) for name, value in item.items()}
            v.check_item_size(written)
            new_item: Optional[Item] = written
        else:
            key = self.stored_key(params.get('Key') or {})
            new_item = None
        update = None
        if kind == 'update_item' and params.get('UpdateExpression') is not None:
            update = parse_cached(params['UpdateExpression'], 'UpdateExpression', placeholders,
                                  lambda parser: parse_update(parser, self.key_names), self.key_names)
        elif kind == 'update_item':
            raise NotImplementedError('the simulated table models an UpdateItem with an UpdateExpression only')
        condition = None
        if params.get('ConditionExpression') is not None:
            condition = parse_cached(params['ConditionExpression'], 'ConditionExpression', placeholders,
                                     Parser.condition)
        elif kind == 'condition_check':
            raise validation('ConditionExpression is required for a ConditionCheck')
        placeholders.check_all_used()
        return Write(key, self.key_item(key), condition, update, new_item, kind == 'delete_item', params)

    def holds(self, write: Write) -> Tuple[bool, Optional[Item]]:
        """Whether the write's condition holds now, and the item there (a copy)."""
        old = self.get(write.key)
        if write.condition is None:
            return True, old
        return evaluate(old or {}, write.condition), old

    def result_of(self, write: Write, old: Optional[Item]) -> Optional[Item]:
        """The item after ``write`` (None: no item); nothing is stored."""
        if write.delete:
            return None
        if write.update is not None:
            updated = apply_update(write.update, old, write.key_item)
            v.check_item_size(updated, update=True)
            return updated
        if write.new_item is not None:
            return v.copy_item(write.new_item)
        return old    # a ConditionCheck

    def store(self, key: StoredKey, item: Optional[Item]) -> None:
        if item is None:
            self._items.pop(key, None)
        else:
            self._items[key] = item

    def single_write(self, method: str, params: Dict[str, Any], request_id: str) -> Dict[str, Any]:
        """PutItem, UpdateItem or DeleteItem."""
        refuse_unknown(method, params, ALLOWED_PARAMETERS[method])
        self.check_table(params.get('TableName'))
        return_values = params.get('ReturnValues', 'NONE')
        if return_values not in _RETURN_VALUES[method]:
            raise validation(f'Return values set to invalid value: {return_values}')
        on_failure = params.get('ReturnValuesOnConditionCheckFailure', 'NONE')
        if on_failure not in ('NONE', 'ALL_OLD'):
            raise validation(f'ReturnValuesOnConditionCheckFailure set to invalid value: {on_failure}')
        write = self.parse_write(method, params)
        holds, old = self.holds(write)
        if not holds:
            raise condition_failed(OPERATIONS[method], request_id, old if on_failure == 'ALL_OLD' else None)
        new = self.result_of(write, old)
        self.store(write.key, new)
        return _returned(return_values, old, new, write.update)


def _returned(return_values: str, old: Optional[Item], new: Optional[Item], update: Optional[Update]) -> Dict[str, Any]:
    if return_values == 'ALL_OLD':
        chosen = old
    elif return_values == 'ALL_NEW':
        chosen = new
    elif return_values == 'UPDATED_OLD':
        chosen = project(old or {}, update.paths) if update is not None else None
    elif return_values == 'UPDATED_NEW':
        chosen = project(new or {}, update.paths) if update is not None else None
    else:
        chosen = None
    return {'Attributes': v.copy_item(chosen)} if chosen else {}
