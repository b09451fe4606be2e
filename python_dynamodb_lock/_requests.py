"""What to send to DynamoDB, kept apart from the code that sends it.

Each builder returns a :class:`Request`: the low-level client method to call and its keyword
arguments, with values as Python values (boto3's resource layer converts them; the asyncio
executor serialises them itself). Every attribute name goes through
``ExpressionAttributeNames`` (or is a quoted identifier in PartiQL), and every conditional
write asks for the item in the way (``ReturnValuesOnConditionCheckFailure='ALL_OLD'``) instead
of spending a read on it. Nothing here does I/O.
"""
from __future__ import annotations

import functools
from typing import Any, Dict, Iterable, NamedTuple, Optional, Sequence, Tuple

from ._schema import (
    COL_ACQUISITION_ID,
    COL_FENCING_TOKEN,
    COL_LEASE_DURATION,
    COL_LEASE_EXPIRY,
    COL_LOCK_SESSION,
    COL_RECORD_VERSION_NUMBER,
    COL_RELEASED_AT,
    Item,
    Schema,
)

__all__ = [
    'MAX_BATCH_STATEMENTS',
    'acquire_free',
    'acquire_over',
    'MAX_CONDITION_VERSIONS',
    'Renewal',
    'Request',
    'delete_if_version',
    'free_row',
    'following_page',
    'get',
    'query',
    'release_row',
    'renew',
    'renew_many',
    'scan',
    'session_end',
    'session_renew',
    'session_start',
    'take_over_in_session',
]

#: The most statements DynamoDB takes in one BatchExecuteStatement call.
MAX_BATCH_STATEMENTS = 25
#: How many versions one condition names (DynamoDB allows up to 100 operands in IN).
MAX_CONDITION_VERSIONS = 21


class Request(NamedTuple):
    """One call: ``operation`` is the low-level client's method name, ``params`` its arguments."""

    operation: str
    params: Dict[str, Any]

    @property
    def is_write(self) -> bool:
        return self.operation in ('put_item', 'update_item', 'delete_item', 'batch_execute_statement',
                                  'transact_write_items')


class Renewal(NamedTuple):
    """One heartbeat: write ``new_version``, ``new_expiry_time`` and ``new_lease_expiry`` if the
    row carries one of ``expected_versions``."""

    partition_key: Any
    sort_key: str
    expected_versions: Sequence[str]
    new_version: str
    new_expiry_time: int
    new_lease_expiry: Any = None    # a Decimal: the lease's end on the renewer's wall clock


# The constant parts of each request (expression strings, attribute-name maps, placeholders)
# depend only on the schema and on the request's shape, so they are built once per shape.
_SHAPES = 512


@functools.lru_cache(maxsize=128)
def _version_placeholders(count: int) -> Tuple[str, Tuple[str, ...]]:
    """The condition that the row carries one of ``count`` versions, and its value placeholders."""
    if not 0 < count <= 100:
        raise ValueError(f'a version condition names 1 to 100 versions, got {count}')
    placeholders = tuple(f':expected_version_{index}' for index in range(count))
    if count == 1:
        return f'#version = {placeholders[0]}', placeholders
    return f'#version IN ({", ".join(placeholders)})', placeholders


def _version_condition(versions: Sequence[str]) -> Tuple[str, Dict[str, Any]]:
    """A condition that the row carries one of ``versions``, and its values."""
    condition, placeholders = _version_placeholders(len(versions))
    return condition, dict(zip(placeholders, versions))


def _conditional(schema: Schema, operation: str, **params: Any) -> Request:
    return Request(operation, {'TableName': schema.table_name, 'ReturnValuesOnConditionCheckFailure': 'ALL_OLD',
                               **params})


class _UpdateShape(NamedTuple):
    expression: str
    names: Dict[str, str]             # copied before use: requests never share a mutable map
    placeholders: Tuple[str, ...]     # the value placeholder of each attribute written, in order


@functools.lru_cache(maxsize=_SHAPES)
def _lock_update_shape(schema: Schema, written: Tuple[str, ...], removed: Tuple[str, ...],
                       condition_names: Tuple[Tuple[str, str], ...]) -> _UpdateShape:
    names: Dict[str, str] = {'#fencing_token': COL_FENCING_TOKEN, '#released_at': COL_RELEASED_AT}
    assignments = ['#fencing_token = if_not_exists(#fencing_token, :token_floor) + :one']
    for index, name in enumerate(written):
        names[f'#a{index}'] = name
        assignments.append(f'#a{index} = :a{index}')
    removals = ['#released_at']
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
        'ReturnValues': 'UPDATED_NEW',
    }


def acquire_free(schema: Schema, item: Item, token_floor: int) -> Request:
    """Write a lock row where there is none, or where the row is a released one (kept for its
    fencing token); refused when a held lock is there."""
    params = _lock_update(schema, item, token_floor, (), (('#partition_key', schema.partition_key_name),))
    params['ConditionExpression'] = 'attribute_not_exists(#partition_key) OR attribute_exists(#released_at)'
    return _conditional(schema, 'update_item', **params)


def acquire_over(schema: Schema, item: Item, expected_versions: Sequence[str], token_floor: int,
                 remove: Iterable[str] = ()) -> Request:
    """Take a lock row over (an abandoned one, or our own to hand it to a waiter of this
    client); refused unless it carries one of ``expected_versions``. ``remove`` names the
    attributes of the row being replaced that the new item does not set."""
    params = _lock_update(schema, item, token_floor, remove, (('#version', COL_RECORD_VERSION_NUMBER),))
    condition, values = _version_condition(expected_versions)
    params['ConditionExpression'] = condition
    params['ExpressionAttributeValues'].update(values)
    return _conditional(schema, 'update_item', **params)


@functools.lru_cache(maxsize=_SHAPES)
def _release_shape(schema: Schema, removed: Tuple[str, ...]) -> Tuple[str, Dict[str, str]]:
    names = {'#version': COL_RECORD_VERSION_NUMBER, '#lease': COL_LEASE_DURATION,
             '#expiry_time': schema.ttl_attribute_name, '#released_at': COL_RELEASED_AT,
             '#acquisition': COL_ACQUISITION_ID, '#lease_expiry': COL_LEASE_EXPIRY, '#lock_session': COL_LOCK_SESSION}
    removals = ['#acquisition', '#lease_expiry', '#lock_session']
    for index, name in enumerate(removed):
        names[f'#r{index}'] = name
        removals.append(f'#r{index}')
    return ('SET #version = :new_version, #lease = :zero, #expiry_time = :expiry_time, '
            '#released_at = :released_at REMOVE ' + ', '.join(removals)), names


def release_row(schema: Schema, partition_key: Any, sort_key: str, expected_versions: Sequence[str],
                new_version: str, expiry_time: int, released_at: int, remove: Iterable[str] = ()) -> Request:
    """Mark the lock row released, keeping its fencing token; refused unless it carries one of
    ``expected_versions``.

    The row keeps every attribute the published package reads, with a lease of 0 and a new
    version, so that published clients take it over after one poll; it loses its acquisition id
    and the lock's additional attributes (``remove``), and DynamoDB's TTL deletes it after
    ``expiry_time``.
    """
    condition, values = _version_condition(expected_versions)
    values[':new_version'] = new_version
    values[':zero'] = 0
    values[':expiry_time'] = expiry_time
    values[':released_at'] = released_at
    expression, names = _release_shape(schema, tuple(sorted(set(remove) - schema.reserved_names)) if remove else ())
    return _conditional(
        schema, 'update_item',
        Key=schema.key(partition_key, sort_key),
        UpdateExpression=expression,
        ConditionExpression=condition,
        ExpressionAttributeNames=dict(names),
        ExpressionAttributeValues=values,
    )


def free_row(schema: Schema, partition_key: Any, sort_key: str, expected_versions: Sequence[str], new_version: str,
             expiry_time: int, released_at: int, remove: Iterable[str], keep_released_rows: bool) -> Request:
    """The write that frees a lock row: :func:`release_row` (keeping the fencing token), or a
    plain conditional delete when the client was told not to keep released rows."""
    if keep_released_rows:
        return release_row(schema, partition_key, sort_key, expected_versions, new_version, expiry_time,
                           released_at, remove)
    return delete_if_version(schema, partition_key, sort_key, expected_versions)


@functools.lru_cache(maxsize=_SHAPES)
def _renew_names(schema: Schema) -> Dict[str, str]:
    return {'#version': COL_RECORD_VERSION_NUMBER, '#expiry_time': schema.ttl_attribute_name,
            '#lease_expiry': COL_LEASE_EXPIRY}


def renew(schema: Schema, renewal: Renewal) -> Request:
    """Write a new version and TTL; refused unless the row carries an expected version."""
    condition, values = _version_condition(renewal.expected_versions)
    values[':new_version'] = renewal.new_version
    values[':new_expiry_time'] = renewal.new_expiry_time
    values[':new_lease_expiry'] = renewal.new_lease_expiry
    return _conditional(
        schema, 'update_item',
        Key=schema.key(renewal.partition_key, renewal.sort_key),
        UpdateExpression=('SET #version = :new_version, #expiry_time = :new_expiry_time, '
                          '#lease_expiry = :new_lease_expiry'),
        ConditionExpression=condition,
        ExpressionAttributeNames=dict(_renew_names(schema)),
        ExpressionAttributeValues=values,
    )


def _quoted(identifier: str) -> str:
    """A PartiQL quoted identifier (a double quote inside is doubled)."""
    return '"' + identifier.replace('"', '""') + '"'


@functools.lru_cache(maxsize=_SHAPES)
def _renew_statement(schema: Schema, versions: int) -> str:
    key_condition = ' AND '.join(f'{_quoted(name)} = ?' for name in schema.key(0, '-'))
    return (f'UPDATE {_quoted(schema.table_name)}'
            f' SET {_quoted(COL_RECORD_VERSION_NUMBER)} = ?'
            f' SET {_quoted(schema.ttl_attribute_name)} = ?'
            f' SET {_quoted(COL_LEASE_EXPIRY)} = ?'
            f' WHERE {key_condition}'
            f' AND {_quoted(COL_RECORD_VERSION_NUMBER)} IN [{", ".join("?" * versions)}]')


def renew_many(schema: Schema, renewals: Sequence[Renewal]) -> Request:
    """Up to 25 renewals in one PartiQL ``BatchExecuteStatement`` call, each conditional on its own."""
    if not 0 < len(renewals) <= MAX_BATCH_STATEMENTS:
        raise ValueError(f'a batch holds 1 to {MAX_BATCH_STATEMENTS} renewals, got {len(renewals)}')
    statements = []
    for renewal in renewals:
        statements.append({
            'Statement': _renew_statement(schema, len(renewal.expected_versions)),
            'Parameters': [
                renewal.new_version, renewal.new_expiry_time, renewal.new_lease_expiry,
                *schema.key(renewal.partition_key, renewal.sort_key).values(), *renewal.expected_versions,
            ],
            'ReturnValuesOnConditionCheckFailure': 'ALL_OLD',
        })
    return Request('batch_execute_statement', {'Statements': statements})


def delete_if_version(schema: Schema, partition_key: Any, sort_key: str, expected_versions: Sequence[str]) -> Request:
    """Delete the lock row; refused unless it carries one of ``expected_versions``."""
    condition, values = _version_condition(expected_versions)
    return _conditional(
        schema, 'delete_item',
        Key=schema.key(partition_key, sort_key),
        ConditionExpression=condition,
        ExpressionAttributeNames={'#version': COL_RECORD_VERSION_NUMBER},
        ExpressionAttributeValues=values,
    )


def get(schema: Schema, partition_key: Any, sort_key: str) -> Request:
    """A strongly consistent read of one row."""
    return Request('get_item', {'TableName': schema.table_name, 'Key': schema.key(partition_key, sort_key),
                                'ConsistentRead': True})


def scan(schema: Schema, exclusive_start_key: Optional[Item] = None) -> Request:
    """One page of a strongly consistent scan of the whole table."""
    params: Dict[str, Any] = {'TableName': schema.table_name, 'ConsistentRead': True}
    if exclusive_start_key:
        params['ExclusiveStartKey'] = exclusive_start_key
    return Request('scan', params)


def query(schema: Schema, partition_key: Any, exclusive_start_key: Optional[Item] = None) -> Request:
    """One page of a strongly consistent query of the rows under one partition key (every
    sort key of it; on a table without a sort key, the one row of that key)."""
    params: Dict[str, Any] = {
        'TableName': schema.table_name,
        'KeyConditionExpression': '#partition_key = :partition_key',
        'ExpressionAttributeNames': {'#partition_key': schema.partition_key_name},
        'ExpressionAttributeValues': {':partition_key': partition_key},
        'ConsistentRead': True,
    }
    if exclusive_start_key:
        params['ExclusiveStartKey'] = exclusive_start_key
    return Request('query', params)


def following_page(request: Request, last_evaluated_key: Optional[Item]) -> Optional[Request]:
    """The request for the page after the one ``request`` read (a scan or a query), whose
    answer ended at ``last_evaluated_key``; None after the last page."""
    if not last_evaluated_key:
        return None
    return Request(request.operation, {**request.params, 'ExclusiveStartKey': last_evaluated_key})


# -- client sessions (docs/sessions.rst) -------------------------------------------------------

def session_start(schema: Schema, session_id: str, owner_name: str, lease_duration: Any, version: str,
                  expiry_time: int) -> Request:
    """Write a new session row; refused when a row with that key exists."""
    item = schema.lock_item(session_id, '-', owner_name, lease_duration, version, expiry_time)
    return _conditional(schema, 'put_item', Item=item, ConditionExpression='attribute_not_exists(#partition_key)',
                        ExpressionAttributeNames={'#partition_key': schema.partition_key_name})


def session_renew(schema: Schema, session_id: str, expected_versions: Sequence[str], new_version: str,
                  expiry_time: int) -> Request:
    """Renew a session row: a new version and TTL; refused unless it carries an expected version
    (a session marked ended by a waiter that took one of its locks carries another)."""
    condition, values = _version_condition(expected_versions)
    values[':new_version'] = new_version
    values[':new_expiry_time'] = expiry_time
    return _conditional(
        schema, 'update_item',
        Key=schema.key(session_id, '-'),
        UpdateExpression='SET #version = :new_version, #expiry_time = :new_expiry_time',
        ConditionExpression=condition,
        ExpressionAttributeNames={'#version': COL_RECORD_VERSION_NUMBER, '#expiry_time': schema.ttl_attribute_name},
        ExpressionAttributeValues=values,
    )


def session_end(schema: Schema, session_id: str, expected_versions: Sequence[str]) -> Request:
    """Delete a session row (the client closed, holding no lock under it)."""
    return delete_if_version(schema, session_id, '-', expected_versions)


def take_over_in_session(schema: Schema, lock_write: Request, session_id: str, session_version: str,
                         new_session_version: str, ended_at: int) -> Request:
    """One ``TransactWriteItems``: ``lock_write`` (an :func:`acquire_over`, conditioned as it
    is), and the session row marked ended (``released_at``, a new version, a lease of 0),
    conditioned on the version the waiter watched. Nothing is written unless both hold."""
    lock_update = {name: value for name, value in lock_write.params.items() if name != 'ReturnValues'}
    session_update = {
        'TableName': schema.table_name,
        'Key': schema.key(session_id, '-'),
        'UpdateExpression': 'SET #version = :new_version, #released_at = :ended_at, #lease = :zero',
        'ConditionExpression': '#version = :watched',
        'ExpressionAttributeNames': {'#version': COL_RECORD_VERSION_NUMBER, '#released_at': COL_RELEASED_AT,
                                     '#lease': COL_LEASE_DURATION},
        'ExpressionAttributeValues': {':new_version': new_session_version, ':ended_at': ended_at, ':zero': 0,
                                      ':watched': session_version},
        'ReturnValuesOnConditionCheckFailure': 'ALL_OLD',
    }
    return Request('transact_write_items', {'TransactItems': [{'Update': lock_update}, {'Update': session_update}]})
