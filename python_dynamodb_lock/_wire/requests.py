"""What to send to DynamoDB, kept apart from the code that sends it.

Each builder returns a :class:`Request`: the low-level client method to call and its keyword
arguments, with values as Python values (boto3's resource layer converts them; the asyncio
executor serialises them itself). Every name an application chooses (the table's keys, the TTL
attribute, additional attributes, shared holders' ids) goes through ``ExpressionAttributeNames``
(or is a quoted identifier in PartiQL); this package's own attribute names
(:data:`.._model.schema.OWN_ATTRIBUTES`: fixed identifiers, none a reserved word) are written directly
into the expressions of the conditional writes, which makes each call lighter for botocore
(see :func:`direct_names`). Every conditional write asks for the item in the way
(``ReturnValuesOnConditionCheckFailure='ALL_OLD'``) instead of spending a read on it. Nothing
here does I/O.
"""
from __future__ import annotations

import functools
import re
from typing import Any, Dict, Iterable, List, Mapping, NamedTuple, Optional, Sequence, Tuple

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
    OWN_ATTRIBUTES,
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
    'direct_names',
    'free_row',
    'following_page',
    'get',
    'get_many',
    'query',
    'release_item_lock',
    'release_row',
    'renew',
    'renew_many',
    'scan',
    'transact',
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
    row carries one of ``expected_versions``; ``new_expiry_time`` None (a lock on an existing
    item): the TTL attribute is not written."""

    partition_key: Any
    sort_key: str
    expected_versions: Sequence[str]
    new_version: str
    new_expiry_time: Optional[int]
    new_lease_expiry: Any = None    # a Decimal: the lease's end on the renewer's wall clock
    #: ``lock.update_attributes``: additional attributes set, and names removed, by this renewal
    #: (a single ``UpdateItem``; batches never carry them).
    set_attributes: Tuple[Tuple[str, Any], ...] = ()
    remove_attributes: Tuple[str, ...] = ()


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


_NAME_TOKEN = re.compile(r'#\w+')


@functools.lru_cache(maxsize=_SHAPES)
def _direct_shape(update: Optional[str], condition: Optional[str], names: Tuple[Tuple[str, str], ...]
                  ) -> Tuple[Optional[str], Optional[str], Tuple[Tuple[str, str], ...]]:
    direct = {token: name for token, name in names if name in OWN_ATTRIBUTES}
    if not direct:
        return update, condition, names

    def name_of(match: 're.Match[str]') -> str:
        return direct.get(match.group(0), match.group(0))

    return (None if update is None else _NAME_TOKEN.sub(name_of, update),
            None if condition is None else _NAME_TOKEN.sub(name_of, condition),
            tuple((token, name) for token, name in names if token not in direct))


def direct_names(params: Dict[str, Any]) -> Dict[str, Any]:
    """``params`` (a write's arguments, changed in place and returned) with this package's own
    attribute names written directly into ``UpdateExpression`` and ``ConditionExpression``
    instead of through ``ExpressionAttributeNames``; the map keeps the other names, and goes
    when none is left (DynamoDB refuses an empty one).

    The same request either way, for DynamoDB; for botocore (and boto3's resource layer) every
    entry of the map is one more string to validate, copy, walk and serialise on each call: a
    lock's acquisition names up to twelve attributes.
    """
    names = params.get('ExpressionAttributeNames')
    if not names:
        return params
    update, condition, kept = _direct_shape(params.get('UpdateExpression'), params.get('ConditionExpression'),
                                            tuple(names.items()))
    if update is not None:
        params['UpdateExpression'] = update
    if condition is not None:
        params['ConditionExpression'] = condition
    if kept:
        params['ExpressionAttributeNames'] = dict(kept)
    else:
        del params['ExpressionAttributeNames']
    return params


def _conditional(schema: Schema, operation: str, **params: Any) -> Request:
    return Request(operation, direct_names({'TableName': schema.table_name,
                                            'ReturnValuesOnConditionCheckFailure': 'ALL_OLD', **params}))


class _UpdateShape(NamedTuple):
    expression: str
    names: Dict[str, str]             # copied before use: requests never share a mutable map
    placeholders: Tuple[str, ...]     # the value placeholder of each attribute written, in order


@functools.lru_cache(maxsize=_SHAPES)
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
        return _conditional(schema, 'update_item', **params)
    names: Tuple[Tuple[str, str], ...] = (('#version', COL_RECORD_VERSION_NUMBER),)
    condition = 'attribute_not_exists(#version)'
    if only_if_exists:
        names += (('#partition_key', schema.partition_key_name),)
        condition = 'attribute_exists(#partition_key) AND attribute_not_exists(#version)'
    params = _lock_update(schema, item, token_floor, (), names)
    params['ConditionExpression'] = condition
    params['ReturnValues'] = 'ALL_OLD'
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
def _release_shape(schema: Schema, removed: Tuple[str, ...],
                   written: Tuple[str, ...] = ()) -> Tuple[str, Dict[str, str]]:
    names = {'#version': COL_RECORD_VERSION_NUMBER, '#lease': COL_LEASE_DURATION,
             '#expiry_time': schema.ttl_attribute_name, '#released_at': COL_RELEASED_AT,
             '#acquisition': COL_ACQUISITION_ID, '#lease_expiry': COL_LEASE_EXPIRY,
             '#shared_holders': COL_SHARED_HOLDERS, '#lock_session': COL_LOCK_SESSION}
    assignments = ['#version = :new_version', '#lease = :zero', '#expiry_time = :expiry_time',
                   '#released_at = :released_at', *_data_assignments(names, written)]
    # a force-released shared row too; a row written under a session
    removals = ['#acquisition', '#lease_expiry', '#shared_holders', '#lock_session']
    for index, name in enumerate(removed):
        names[f'#r{index}'] = name
        removals.append(f'#r{index}')
    return 'SET ' + ', '.join(assignments) + ' REMOVE ' + ', '.join(removals), names


def _data_assignments(names: Dict[str, str], written: Sequence[str]) -> List[str]:
    """``#d<i> = :d<i>`` for the additional attributes a write sets (names added to ``names``)."""
    assignments = []
    for index, name in enumerate(written):
        names[f'#d{index}'] = name
        assignments.append(f'#d{index} = :d{index}')
    return assignments


def _data_values(values: Dict[str, Any], attributes: Sequence[Tuple[str, Any]]) -> None:
    for index, (_, value) in enumerate(attributes):
        values[f':d{index}'] = value


def release_row(schema: Schema, partition_key: Any, sort_key: str, expected_versions: Sequence[str],
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
    _data_values(values, written)
    removed = tuple(sorted(set(remove) - schema.reserved_names - set(attributes or ()))) if remove else ()
    expression, names = _release_shape(schema, removed, tuple(name for name, _ in written))
    return _update_if_version(schema, partition_key, sort_key, expected_versions, expression, names, values)


def _update_if_version(schema: Schema, partition_key: Any, sort_key: str, expected_versions: Sequence[str],
                       expression: str, names: Dict[str, str], values: Dict[str, Any]) -> Request:
    """An UpdateItem of the lock row refused unless it carries one of ``expected_versions``."""
    condition, version_values = _version_condition(expected_versions)
    return _conditional(
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


@functools.lru_cache(maxsize=_SHAPES)
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


def release_item_lock(schema: Schema, partition_key: Any, sort_key: str, expected_versions: Sequence[str],
                      remove: Iterable[str], keep_token: bool) -> Request:
    """Free a lock on an existing item: REMOVE the lock's attributes (``remove`` names its
    additional ones; the fencing token stays when ``keep_token``), never the item's other
    attributes, never the item; refused unless it carries one of ``expected_versions``."""
    removed = set(_ITEM_LOCK_NAMES) | (set(remove) - schema.reserved_names)
    if not keep_token:
        removed.add(COL_FENCING_TOKEN)
    expression, names = _release_item_shape(tuple(sorted(removed)))
    return _update_if_version(schema, partition_key, sort_key, expected_versions, expression, names, {})


def free_row(schema: Schema, partition_key: Any, sort_key: str, expected_versions: Sequence[str], new_version: str,
             expiry_time: int, released_at: int, remove: Iterable[str], keep_released_rows: bool,
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


@functools.lru_cache(maxsize=_SHAPES)
def _renew_names(schema: Schema, with_ttl: bool = True) -> Dict[str, str]:
    names = {'#version': COL_RECORD_VERSION_NUMBER, '#lease_expiry': COL_LEASE_EXPIRY}
    if with_ttl:
        names['#expiry_time'] = schema.ttl_attribute_name
    return names


@functools.lru_cache(maxsize=_SHAPES)
def _renew_shape(schema: Schema, written: Tuple[str, ...], removed: Tuple[str, ...],
                 with_ttl: bool = True) -> Tuple[str, Dict[str, str]]:
    names = dict(_renew_names(schema, with_ttl))
    assignments = ['#version = :new_version', *(['#expiry_time = :new_expiry_time'] if with_ttl else []),
                   '#lease_expiry = :new_lease_expiry', *_data_assignments(names, written)]
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
    condition, values = _version_condition(renewal.expected_versions)
    values[':new_version'] = renewal.new_version
    values[':new_lease_expiry'] = renewal.new_lease_expiry
    with_ttl = renewal.new_expiry_time is not None
    if with_ttl:
        values[':new_expiry_time'] = renewal.new_expiry_time
    _data_values(values, renewal.set_attributes)
    expression, names = _renew_shape(schema, tuple(name for name, _ in renewal.set_attributes),
                                     tuple(renewal.remove_attributes), with_ttl)
    return _conditional(
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


@functools.lru_cache(maxsize=_SHAPES)
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


def get_many(schema: Schema, keys: Sequence[Tuple[Any, str]]) -> Request:
    """One serializable read of up to 100 rows (``TransactGetItems``): the answer's
    ``Responses`` hold them in the order of ``keys``."""
    return Request('transact_get_items', {'TransactItems': [
        {'Get': {'TableName': schema.table_name, 'Key': schema.key(partition_key, sort_key)}}
        for partition_key, sort_key in keys]})


def transact(actions: Sequence[Dict[str, Any]], client_request_token: str) -> Request:
    """One ``TransactWriteItems`` call: every action applied, or none; the token makes a
    repeated call idempotent for 10 minutes (an answer lost on the way is asked again safely)."""
    return Request('transact_write_items', {'TransactItems': list(actions),
                                            'ClientRequestToken': client_request_token})


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
