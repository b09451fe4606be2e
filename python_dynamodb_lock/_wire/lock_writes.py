"""The writes of a lock row (:mod:`.requests` holds what every request shares): acquiring it where
it is free or taking it over, and freeing it (a released row kept for its fencing token, a
conditional delete, or a lock on an existing item removed from the item). Nothing here does I/O.
"""
from __future__ import annotations

import functools
from typing import Any, Dict, Iterable, Mapping, NamedTuple, Optional, Sequence, Tuple

from .._model.schema import (
    COL_ACQUISITION_ID,
    COL_FENCING_TOKEN,
    COL_LEASE_DURATION,
    COL_LEASE_EXPIRY,
    COL_OWNER_NAME,
    COL_LOCK_SESSION,
    COL_RECORD_VERSION_NUMBER,
    COL_RELEASED_AT,
    COL_SHARED_HOLDERS,
    COL_WRITER_WAITING,
    Item,
    PartitionKey,
    Schema,
)
from .requests import (SHAPES, Request, conditional, data_assignments, data_values,
                       delete_if_version, version_condition)

__all__ = [
    'acquire_free',
    'acquire_over',
    'free_row',
    'release_item_lock',
    'release_row',
]


class _UpdateShape(NamedTuple):
    expression: str
    names: Dict[str, str]             # copied before use: requests never share a mutable map
    placeholders: Tuple[str, ...]     # the value placeholder of each attribute written, in order


@functools.lru_cache(maxsize=SHAPES)
def _lock_update_shape(schema: Schema, written: Tuple[str, ...], removed: Tuple[str, ...],
                       condition_names: Tuple[Tuple[str, str], ...]) -> _UpdateShape:
    names: Dict[str, str] = {'#fencing_token': COL_FENCING_TOKEN, '#released_at': COL_RELEASED_AT,
                             '#shared_holders': COL_SHARED_HOLDERS, '#writer_waiting': COL_WRITER_WAITING}
    assignments = ['#fencing_token = if_not_exists(#fencing_token, :token_floor) + :one']
    for index, name in enumerate(written):
        names[f'#a{index}'] = name
        assignments.append(f'#a{index} = :a{index}')
    removals = ['#released_at', '#shared_holders', '#writer_waiting']   # an exclusive row has no shared state
    for index, name in enumerate(removed):
        names[f'#r{index}'] = name
        removals.append(f'#r{index}')
    names.update(condition_names)
    return _UpdateShape('SET ' + ', '.join(assignments) + ' REMOVE ' + ', '.join(removals), names,
                        tuple(f':a{index}' for index in range(len(written))))


def _lock_update(schema: Schema, item: Item, token_floor: int, remove: Iterable[str],
                 condition_names: Tuple[Tuple[str, str], ...]) -> Dict[str, Any]:
    """An UpdateItem that writes ``item`` (keys aside), takes the next fencing token, and
    removes the released mark and the names in ``remove``; the new fencing token comes back in
    the answer. ``condition_names`` are the attribute names its condition uses.

    The token is ``if_not_exists(fencing_token, floor) + 1``: one more than the row's (so it
    survives releases and takeovers, which keep the row), or the floor (a value derived from
    the writer's clock) when the row or its token is gone.
    """
    keys = schema.key_names
    written = tuple(sorted(name for name in item if name not in keys))
    # A lock row held under a session names it; a write that does not name one removes the name.
    removed = tuple(sorted((set(remove) | {COL_LOCK_SESSION}) - set(item) - keys - {COL_RELEASED_AT}))
    shape = _lock_update_shape(schema, written, removed, condition_names)
    values: Dict[str, Any] = {':token_floor': token_floor, ':one': 1}
    for placeholder, name in zip(shape.placeholders, written):
        values[placeholder] = item[name]
    return {
        'Key': schema.key(item[schema.partition_key_name],
                          item[schema.sort_key_name] if schema.sort_key_name is not None else ''),
        'UpdateExpression': shape.expression,
        'ExpressionAttributeNames': dict(shape.names),
        'ExpressionAttributeValues': values,
        # The whole row: attributes a release left on it for the next holder come back too.
        'ReturnValues': 'ALL_NEW',
    }


def acquire_free(schema: Schema, item: Item, token_floor: int, existing_item: bool = False,
                 only_if_exists: bool = False) -> Request:
    """Write a lock row where there is none, or where the row is a released one (kept for its
    fencing token); refused when a held lock is there.

    ``existing_item``: add the lock to the item at the key, whatever other attributes it has,
    if it carries no lock (no ``record_version_number``); a released row is then taken over
    instead (see ``_core.acquire``). ``only_if_exists``: and only if the item exists. The answer
    then returns the item as it was (``ALL_OLD``): none when the write created it (the lock's
    release then frees the row as a plain lock's does); the new fencing token follows from it.
    """
    if not existing_item:
        params = _lock_update(schema, item, token_floor, (), (('#partition_key', schema.partition_key_name),))
        params['ConditionExpression'] = 'attribute_not_exists(#partition_key) OR attribute_exists(#released_at)'
        return conditional(schema, 'update_item', **params)
    names: Tuple[Tuple[str, str], ...] = (('#version', COL_RECORD_VERSION_NUMBER),)
    condition = 'attribute_not_exists(#version)'
    if only_if_exists:
        names += (('#partition_key', schema.partition_key_name),)
        condition = 'attribute_exists(#partition_key) AND attribute_not_exists(#version)'
    params = _lock_update(schema, item, token_floor, (), names)
    params['ConditionExpression'] = condition
    params['ReturnValues'] = 'ALL_OLD'
    return conditional(schema, 'update_item', **params)


def acquire_over(schema: Schema, item: Item, expected_versions: Sequence[str], token_floor: int,
                 remove: Iterable[str] = ()) -> Request:
    """Take a lock row over (an abandoned one, or our own to hand it to a waiter of this
    client); refused unless it carries one of ``expected_versions``. ``remove`` names the
    attributes of the row being replaced that the new item does not set."""
    params = _lock_update(schema, item, token_floor, remove, (('#version', COL_RECORD_VERSION_NUMBER),))
    condition, values = version_condition(expected_versions)
    params['ConditionExpression'] = condition
    params['ExpressionAttributeValues'].update(values)
    return conditional(schema, 'update_item', **params)


@functools.lru_cache(maxsize=SHAPES)
def _release_shape(schema: Schema, removed: Tuple[str, ...],
                   written: Tuple[str, ...] = ()) -> Tuple[str, Dict[str, str]]:
    names = {'#version': COL_RECORD_VERSION_NUMBER, '#lease': COL_LEASE_DURATION,
             '#expiry_time': schema.ttl_attribute_name, '#released_at': COL_RELEASED_AT,
             '#acquisition': COL_ACQUISITION_ID, '#lease_expiry': COL_LEASE_EXPIRY,
             '#shared_holders': COL_SHARED_HOLDERS, '#lock_session': COL_LOCK_SESSION}
    assignments = ['#version = :new_version', '#lease = :zero', '#expiry_time = :expiry_time',
                   '#released_at = :released_at', *data_assignments(names, written)]
    # a force-released shared row too; a row written under a session
    removals = ['#acquisition', '#lease_expiry', '#shared_holders', '#lock_session']
    for index, name in enumerate(removed):
        names[f'#r{index}'] = name
        removals.append(f'#r{index}')
    return 'SET ' + ', '.join(assignments) + ' REMOVE ' + ', '.join(removals), names


def release_row(schema: Schema, partition_key: PartitionKey, sort_key: str, expected_versions: Sequence[str],
                new_version: str, expiry_time: int, released_at: int, remove: Iterable[str] = (),
                attributes: Optional[Mapping[str, Any]] = None) -> Request:
    """Mark the lock row released, keeping its fencing token; refused unless it carries one of
    ``expected_versions``.

    The row keeps every attribute the published package reads, with a lease of 0 and a new
    version, so that published clients take it over after one poll; it loses its acquisition id
    and the lock's additional attributes (``remove``), and DynamoDB's TTL deletes it after
    ``expiry_time``. ``attributes`` (``release_lock(attributes=...)``) are written onto it, for
    the next holder to read.
    """
    values: Dict[str, Any] = {':new_version': new_version, ':zero': 0, ':expiry_time': expiry_time,
                              ':released_at': released_at}
    written = tuple(sorted((attributes or {}).items()))
    data_values(values, written)
    removed = tuple(sorted(set(remove) - schema.reserved_names - set(attributes or ()))) if remove else ()
    expression, names = _release_shape(schema, removed, tuple(name for name, _ in written))
    return _update_if_version(schema, partition_key, sort_key, expected_versions, expression, names, values)


def _update_if_version(schema: Schema, partition_key: PartitionKey, sort_key: str, expected_versions: Sequence[str],
                       expression: str, names: Dict[str, str], values: Dict[str, Any]) -> Request:
    """An UpdateItem of the lock row refused unless it carries one of ``expected_versions``."""
    condition, version_values = version_condition(expected_versions)
    return conditional(
        schema, 'update_item',
        Key=schema.key(partition_key, sort_key),
        UpdateExpression=expression,
        ConditionExpression=condition,
        ExpressionAttributeNames=dict(names),
        ExpressionAttributeValues={**version_values, **values},
    )


#: The attributes a lock on an existing item removes from it at release (with its additional
#: attributes; the fencing token too unless the row is kept): never the item's own.
_ITEM_LOCK_NAMES = (COL_OWNER_NAME, COL_LEASE_DURATION, COL_RECORD_VERSION_NUMBER, COL_ACQUISITION_ID,
                    COL_LEASE_EXPIRY, COL_RELEASED_AT, COL_LOCK_SESSION)


@functools.lru_cache(maxsize=SHAPES)
def _release_item_shape(removed: Tuple[str, ...]) -> Tuple[str, Dict[str, str]]:
    names = {'#version': COL_RECORD_VERSION_NUMBER}
    removals = []
    for index, name in enumerate(removed):
        if name == COL_RECORD_VERSION_NUMBER:
            removals.append('#version')
            continue
        names[f'#r{index}'] = name
        removals.append(f'#r{index}')
    return 'REMOVE ' + ', '.join(removals), names


def release_item_lock(schema: Schema, partition_key: PartitionKey, sort_key: str, expected_versions: Sequence[str],
                      remove: Iterable[str], keep_token: bool) -> Request:
    """Free a lock on an existing item: REMOVE the lock's attributes (``remove`` names its
    additional ones; the fencing token stays when ``keep_token``), never the item's other
    attributes, never the item; refused unless it carries one of ``expected_versions``."""
    removed = set(_ITEM_LOCK_NAMES) | (set(remove) - schema.reserved_names)
    if not keep_token:
        removed.add(COL_FENCING_TOKEN)
    expression, names = _release_item_shape(tuple(sorted(removed)))
    return _update_if_version(schema, partition_key, sort_key, expected_versions, expression, names, {})


def free_row(schema: Schema, partition_key: PartitionKey, sort_key: str, expected_versions: Sequence[str],
             new_version: str, expiry_time: int, released_at: int, remove: Iterable[str], keep_released_rows: bool,
             attributes: Optional[Mapping[str, Any]] = None, existing_item: bool = False) -> Request:
    """The write that frees a lock row: :func:`release_row` (keeping the fencing token, and
    writing ``attributes``), or a plain conditional delete when the row is not kept
    (``attributes`` are then refused before any write: see ``_common.config.check_release_attributes``);
    for a lock on an existing item (``existing_item``), :func:`release_item_lock`, which never
    deletes and writes no attributes."""
    if existing_item:
        if attributes:
            raise ValueError('attributes cannot be written by the release of a lock on an existing item')
        return release_item_lock(schema, partition_key, sort_key, expected_versions, remove, keep_released_rows)
    if keep_released_rows:
        return release_row(schema, partition_key, sort_key, expected_versions, new_version, expiry_time,
                           released_at, remove, attributes)
    if attributes:
        raise ValueError('attributes cannot be written by a release that deletes the row')
    return delete_if_version(schema, partition_key, sort_key, expected_versions)
