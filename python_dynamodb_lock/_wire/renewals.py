"""The renewals of a held lock (:mod:`.requests` holds what every request shares): one conditional
``UpdateItem`` (which may also set or remove additional attributes), or up to 25 in one PartiQL
``BatchExecuteStatement``. Nothing here does I/O.
"""
from __future__ import annotations

import functools
from typing import Any, Dict, NamedTuple, Optional, Sequence, Tuple

from .._model.schema import (
    COL_LEASE_EXPIRY,
    COL_RECORD_VERSION_NUMBER,
    PartitionKey,
    Schema,
)
from .requests import (MAX_BATCH_STATEMENTS, SHAPES, Request, conditional, data_assignments, data_values,
                       version_condition)

__all__ = [
    'Renewal',
    'renew',
    'renew_many',
]


class Renewal(NamedTuple):
    """One heartbeat: write ``new_version``, ``new_expiry_time`` and ``new_lease_expiry`` if the
    row carries one of ``expected_versions``; ``new_expiry_time`` None (a lock on an existing
    item): the TTL attribute is not written."""

    partition_key: PartitionKey
    sort_key: str
    expected_versions: Sequence[str]
    new_version: str
    new_expiry_time: Optional[int]
    new_lease_expiry: Any = None    # a Decimal: the lease's end on the renewer's wall clock
    #: ``lock.update_attributes``: additional attributes set, and names removed, by this renewal
    #: (a single ``UpdateItem``; batches never carry them).
    set_attributes: Tuple[Tuple[str, Any], ...] = ()
    remove_attributes: Tuple[str, ...] = ()


@functools.lru_cache(maxsize=SHAPES)
def _renew_names(schema: Schema, with_ttl: bool = True) -> Dict[str, str]:
    names = {'#version': COL_RECORD_VERSION_NUMBER, '#lease_expiry': COL_LEASE_EXPIRY}
    if with_ttl:
        names['#expiry_time'] = schema.ttl_attribute_name
    return names


@functools.lru_cache(maxsize=SHAPES)
def _renew_shape(schema: Schema, written: Tuple[str, ...], removed: Tuple[str, ...],
                 with_ttl: bool = True) -> Tuple[str, Dict[str, str]]:
    names = dict(_renew_names(schema, with_ttl))
    assignments = ['#version = :new_version', *(['#expiry_time = :new_expiry_time'] if with_ttl else []),
                   '#lease_expiry = :new_lease_expiry', *data_assignments(names, written)]
    expression = 'SET ' + ', '.join(assignments)
    if removed:
        for index, name in enumerate(removed):
            names[f'#x{index}'] = name
        expression += ' REMOVE ' + ', '.join(f'#x{index}' for index in range(len(removed)))
    return expression, names


def renew(schema: Schema, renewal: Renewal) -> Request:
    """Write a new version and TTL (none for a lock on an existing item, and the additional
    attributes a ``lock.update_attributes`` sets or removes); refused unless the row carries an
    expected version."""
    condition, values = version_condition(renewal.expected_versions)
    values[':new_version'] = renewal.new_version
    values[':new_lease_expiry'] = renewal.new_lease_expiry
    with_ttl = renewal.new_expiry_time is not None
    if with_ttl:
        values[':new_expiry_time'] = renewal.new_expiry_time
    data_values(values, renewal.set_attributes)
    expression, names = _renew_shape(schema, tuple(name for name, _ in renewal.set_attributes),
                                     tuple(renewal.remove_attributes), with_ttl)
    return conditional(
        schema, 'update_item',
        Key=schema.key(renewal.partition_key, renewal.sort_key),
        UpdateExpression=expression,
        ConditionExpression=condition,
        ExpressionAttributeNames=dict(names),
        ExpressionAttributeValues=values,
    )


def _quoted(identifier: str) -> str:
    """A PartiQL quoted identifier (a double quote inside is doubled)."""
    return '"' + identifier.replace('"', '""') + '"'


@functools.lru_cache(maxsize=SHAPES)
def _renew_statement(schema: Schema, versions: int, with_ttl: bool = True) -> str:
    key_condition = ' AND '.join(f'{_quoted(name)} = ?' for name in schema.key(0, '-'))
    ttl = f' SET {_quoted(schema.ttl_attribute_name)} = ?' if with_ttl else ''
    return (f'UPDATE {_quoted(schema.table_name)}'
            f' SET {_quoted(COL_RECORD_VERSION_NUMBER)} = ?'
            f'{ttl}'
            f' SET {_quoted(COL_LEASE_EXPIRY)} = ?'
            f' WHERE {key_condition}'
            f' AND {_quoted(COL_RECORD_VERSION_NUMBER)} IN [{", ".join("?" * versions)}]')


def renew_many(schema: Schema, renewals: Sequence[Renewal]) -> Request:
    """Up to 25 renewals in one PartiQL ``BatchExecuteStatement`` call, each conditional on its own."""
    if not 0 < len(renewals) <= MAX_BATCH_STATEMENTS:
        raise ValueError(f'a batch holds 1 to {MAX_BATCH_STATEMENTS} renewals, got {len(renewals)}')
    statements = []
    for renewal in renewals:
        if renewal.set_attributes or renewal.remove_attributes:
            raise ValueError('a renewal that updates attributes is sent on its own (renew), not in a batch')
        with_ttl = renewal.new_expiry_time is not None
        ttl = [renewal.new_expiry_time] if with_ttl else []
        statements.append({
            'Statement': _renew_statement(schema, len(renewal.expected_versions), with_ttl),
            'Parameters': [
                renewal.new_version, *ttl, renewal.new_lease_expiry,
                *schema.key(renewal.partition_key, renewal.sort_key).values(), *renewal.expected_versions,
            ],
            'ReturnValuesOnConditionCheckFailure': 'ALL_OLD',
        })
    return Request('batch_execute_statement', {'Statements': statements})
