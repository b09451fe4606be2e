"""The requests of shared (read) locks, kept apart from the code that sends them (as
:mod:`.requests`). Every one is a single conditional ``UpdateItem`` (or ``DeleteItem``) that
asks for the row in the way (``ALL_OLD``) when refused. See docs/shared_locks.rst for the row.
"""
from __future__ import annotations

import re
from decimal import Decimal
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence

from .requests import Request, direct_names
from .._model.schema import (
    COL_ACQUISITION_ID,
    COL_LEASE_DURATION,
    COL_LEASE_EXPIRY,
    COL_OWNER_NAME,
    COL_RECORD_VERSION_NUMBER,
    COL_RELEASED_AT,
    COL_SHARED_HOLDERS,
    COL_WRITER_WAITING,
    SHARED_LEASE,
    SHARED_OWNER,
    SHARED_VERSION,
    WRITER_ID,
    PartitionKey,
    Schema,
)

__all__ = ['JoinMode', 'join', 'leave', 'mark_writer', 'renew_entry', 'unmark_writer']


class JoinMode:
    FREE = 'free'       # no row, or a released one
    OVER = 'over'       # an abandoned exclusive row: conditioned on its version
    SHARED = 'shared'   # a row with shared holders: add an entry


def lease_number(seconds: float) -> Decimal:
    return Decimal(repr(float(seconds)))


def entry(owner: str, version: str, lease: float) -> Dict[str, Any]:
    return {SHARED_OWNER: owner, SHARED_VERSION: version, SHARED_LEASE: lease_number(lease)}


class _Expression:
    """An update being built: SET and REMOVE parts, condition terms, names and values."""

    def __init__(self, schema: Schema) -> None:
        self.schema = schema
        self.sets: List[str] = []
        self.removes: List[str] = []
        self.conditions: List[str] = []
        self.names: Dict[str, str] = {'#version': COL_RECORD_VERSION_NUMBER, '#shared': COL_SHARED_HOLDERS,
                                      '#v': SHARED_VERSION}
        self.values: Dict[str, Any] = {}

    def name(self, placeholder: str, name: str) -> str:
        self.names[placeholder] = name
        return placeholder

    def value(self, placeholder: str, value: Any) -> str:
        self.values[placeholder] = value
        return placeholder

    def entry_in(self, holder_id: str, versions: Sequence[str]) -> None:
        """The condition that the entry of ``holder_id`` carries one of ``versions``."""
        self.name('#me', holder_id)
        placeholders = [self.value(f':entry_version_{index}', version) for index, version in enumerate(versions)]
        self.conditions.append(f'#shared.#me.#v IN ({", ".join(placeholders)})')

    def remove_dead(self, dead_holders: Optional[Mapping[str, str]]) -> None:
        """Remove the entries of ``dead_holders`` ({holder id: the version watched unchanged
        for its lease}), each conditioned on still carrying that version."""
        for index, (dead_id, version) in enumerate(sorted((dead_holders or {}).items())):
            self.removes.append(f'#shared.{self.name(f"#dead{index}", dead_id)}')
            self.conditions.append(f'#shared.#dead{index}.#v = {self.value(f":dead{index}", version)}')

    def marker_absent_or(self, alternative: Optional[str]) -> None:
        self.name('#writer', COL_WRITER_WAITING)
        if alternative is None:
            self.conditions.append('attribute_not_exists(#writer)')
        else:
            self.conditions.append(f'(attribute_not_exists(#writer) OR {alternative})')

    def request(self, partition_key: PartitionKey, sort_key: str, return_values: str = 'NONE',
                operation: str = 'update_item') -> Request:
        """The request; names and values the expressions do not use are left out (DynamoDB
        refuses unused ones)."""
        expression = ''
        if self.sets:
            expression += 'SET ' + ', '.join(self.sets)
        if self.removes:
            expression += ' REMOVE ' + ', '.join(self.removes)
        condition = ' AND '.join(self.conditions)
        params: Dict[str, Any] = {
            'TableName': self.schema.table_name, 'Key': self.schema.key(partition_key, sort_key),
            'ConditionExpression': condition, 'ReturnValuesOnConditionCheckFailure': 'ALL_OLD',
        }
        used = condition
        if operation == 'update_item':
            params['UpdateExpression'] = expression.strip()
            used += ' ' + expression
        tokens = set(re.findall(r'[#:]\w+', used))
        params['ExpressionAttributeNames'] = {key: value for key, value in self.names.items() if key in tokens}
        values = {key: value for key, value in self.values.items() if key in tokens}
        if values:
            params['ExpressionAttributeValues'] = values
        if return_values != 'NONE':
            params['ReturnValues'] = return_values
        return Request(operation, direct_names(params))


def join(schema: Schema, partition_key: PartitionKey, sort_key: str, holder_id: str, holder_entry: Mapping[str, Any],
         row_version: str, expiry_time: int, mode: str, *, expected_version: Optional[str] = None,
         raise_lease: bool = True, dead_marker: Optional[str] = None, max_holders: int = 1000,
         dead_holders: Optional[Mapping[str, str]] = None, remove: Iterable[str] = ()) -> Request:
    """A shared acquisition: add ``holder_entry`` to the row, with a new row version.

    ``FREE``: where there is no row or a released one; ``OVER``: over an abandoned exclusive row
    (conditioned on its ``expected_version``; ``remove`` names its additional attributes);
    ``SHARED``: beside the shared holders there (fewer than ``max_holders``). The row's lease is
    raised to the entry's (``raise_lease``, conditioned on it being no longer), else kept
    (conditioned on it being at least the entry's). Refused while a writer-waiting marker is
    there, unless it carries ``dead_marker`` (a version watched unchanged for its lease): then it
    is removed, as are the entries of ``dead_holders`` ({holder id: the version watched unchanged
    for its lease}, each conditioned on it). The answer holds the whole new row (its fencing token).
    """
    update = _Expression(schema)
    owner = str(holder_entry[SHARED_OWNER])
    lease = holder_entry[SHARED_LEASE]
    update.sets += [f'{update.name("#owner", COL_OWNER_NAME)} = {update.value(":owner", owner)}',
                    f'#version = {update.value(":row_version", row_version)}',
                    f'{update.name("#ttl", schema.ttl_attribute_name)} = {update.value(":ttl", expiry_time)}']
    update.value(':lease', lease)
    update.name('#lease', COL_LEASE_DURATION)
    update.name('#me', holder_id)
    if mode == JoinMode.SHARED:
        update.sets.append(f'#shared.#me = {update.value(":entry", dict(holder_entry))}')
        update.conditions += ['attribute_exists(#shared)',
                              f'attribute_not_exists({update.name("#released_at", COL_RELEASED_AT)})',
                              f'size(#shared) < {update.value(":max_holders", max_holders)}']
        update.remove_dead(dead_holders)
        if raise_lease:
            update.sets.append('#lease = :lease')
            update.conditions.append('(attribute_not_exists(#lease) OR #lease <= :lease)')
        else:
            update.conditions.append('#lease >= :lease')
    else:
        update.sets += ['#lease = :lease', f'#shared = {update.value(":holders", {holder_id: dict(holder_entry)})}']
        update.removes += [update.name('#released_at', COL_RELEASED_AT),
                           update.name('#acquisition', COL_ACQUISITION_ID),
                           update.name('#lease_expiry', COL_LEASE_EXPIRY)]
        for index, name in enumerate(sorted(set(remove) - schema.reserved_names)):
            update.removes.append(update.name(f'#r{index}', name))
        if mode == JoinMode.FREE:
            update.conditions.append(
                f'(attribute_not_exists({update.name("#pk", schema.partition_key_name)}) '
                'OR attribute_exists(#released_at))')
        else:
            assert expected_version is not None, 'a join over a row names its version'
            update.conditions.append(f'#version = {update.value(":expected", expected_version)}')
    if dead_marker is None:
        update.marker_absent_or(None)
    else:
        update.marker_absent_or(f'#writer.#v = {update.value(":dead_marker", dead_marker)}')
        update.removes.append('#writer')
    return update.request(partition_key, sort_key, 'ALL_NEW')


def renew_entry(schema: Schema, partition_key: PartitionKey, sort_key: str, holder_id: str,
                expected_versions: Sequence[str], new_version: str, row_version: str, expiry_time: int) -> Request:
    """A shared holder's heartbeat: a new version of its entry, and of the row (so that
    published clients see it change); refused unless its entry carries an expected version."""
    update = _Expression(schema)
    update.entry_in(holder_id, expected_versions)
    update.conditions.append(f'attribute_not_exists({update.name("#released_at", COL_RELEASED_AT)})')
    update.sets += [f'#shared.#me.#v = {update.value(":new_version", new_version)}',
                    f'#version = {update.value(":row_version", row_version)}',
                    f'{update.name("#ttl", schema.ttl_attribute_name)} = {update.value(":ttl", expiry_time)}']
    return update.request(partition_key, sort_key)


def leave(schema: Schema, partition_key: PartitionKey, sort_key: str, holder_id: str, expected_versions: Sequence[str],
          row_version: str, last: bool, expiry_time: int, released_at: int, keep_released_rows: bool) -> Request:
    """A shared holder's release: remove its entry (conditioned on its versions).

    Not ``last``: conditioned on other entries being there; the row gets a new version. ``last``:
    conditioned on the entry being the only one; the row is freed as an exclusive release frees
    it (marked released, lease 0, keeping its fencing token and a writer-waiting marker), or
    deleted when the client keeps no released rows.
    """
    update = _Expression(schema)
    update.entry_in(holder_id, expected_versions)
    one = update.value(':one', 1)
    if not last:
        update.conditions.append(f'size(#shared) > {one}')
        update.sets.append(f'#version = {update.value(":row_version", row_version)}')
        update.removes.append('#shared.#me')
        return update.request(partition_key, sort_key)
    update.conditions.append(f'size(#shared) = {one}')
    if not keep_released_rows:
        return update.request(partition_key, sort_key, operation='delete_item')
    update.sets += [f'#version = {update.value(":row_version", row_version)}',
                    f'{update.name("#lease", COL_LEASE_DURATION)} = {update.value(":zero", 0)}',
                    f'{update.name("#ttl", schema.ttl_attribute_name)} = {update.value(":ttl", expiry_time)}',
                    f'{update.name("#released_at", COL_RELEASED_AT)} = {update.value(":released_at", released_at)}']
    update.removes += ['#shared', update.name('#acquisition', COL_ACQUISITION_ID),
                       update.name('#lease_expiry', COL_LEASE_EXPIRY)]
    return update.request(partition_key, sort_key)


def mark_writer(schema: Schema, partition_key: PartitionKey, sort_key: str, waiter_id: str, owner: str, version: str,
                lease: float, dead_marker: Optional[str], dead_holders: Optional[Mapping[str, str]] = None) -> Request:
    """Set (or refresh) the writer-waiting marker of an exclusive acquirer on a shared row:
    refused unless there is no marker, or it is the waiter's own, or it carries ``dead_marker``.
    The entries of ``dead_holders`` are removed in the same write (see :func:`join`)."""
    update = _Expression(schema)
    update.remove_dead(dead_holders)
    update.name('#writer', COL_WRITER_WAITING)
    update.sets.append('#writer = ' + update.value(':marker', {WRITER_ID: waiter_id, SHARED_OWNER: owner,
                                                              SHARED_VERSION: version,
                                                              SHARED_LEASE: lease_number(lease)}))
    update.conditions += ['attribute_exists(#shared)',
                          f'attribute_not_exists({update.name("#released_at", COL_RELEASED_AT)})']
    mine = f'#writer.{update.name("#id", WRITER_ID)} = {update.value(":waiter", waiter_id)}'
    if dead_marker is not None:
        mine = f'{mine} OR #writer.#v = {update.value(":dead_marker", dead_marker)}'
    update.marker_absent_or(mine)
    return update.request(partition_key, sort_key)


def unmark_writer(schema: Schema, partition_key: PartitionKey, sort_key: str, waiter_id: str) -> Request:
    """Remove the writer-waiting marker of an exclusive acquirer that stopped waiting."""
    update = _Expression(schema)
    update.names = {'#writer': COL_WRITER_WAITING, '#id': WRITER_ID}
    update.removes.append('#writer')
    update.conditions.append(f'#writer.#id = {update.value(":waiter", waiter_id)}')
    return update.request(partition_key, sort_key)
