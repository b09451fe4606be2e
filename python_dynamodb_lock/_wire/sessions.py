"""The requests of a client session's row (docs/sessions.rst; :mod:`.requests` holds what every
request shares): its start, renewal and end, and the takeover of a lock held under a lost
session. Nothing here does I/O.
"""
from __future__ import annotations

from typing import Sequence

from .._model.schema import (
    COL_LEASE_DURATION,
    COL_RECORD_VERSION_NUMBER,
    COL_RELEASED_AT,
    Schema,
)
from .requests import Request, conditional, delete_if_version, version_condition

__all__ = [
    'session_end',
    'session_renew',
    'session_start',
    'take_over_in_session',
]


def session_start(schema: Schema, session_id: str, owner_name: str, lease_duration: float, version: str,
                  expiry_time: int) -> Request:
    """Write a new session row; refused when a row with that key exists."""
    item = schema.lock_item(session_id, '-', owner_name, lease_duration, version, expiry_time)
    return conditional(schema, 'put_item', Item=item, ConditionExpression='attribute_not_exists(#partition_key)',
                       ExpressionAttributeNames={'#partition_key': schema.partition_key_name})


def session_renew(schema: Schema, session_id: str, expected_versions: Sequence[str], new_version: str,
                  expiry_time: int) -> Request:
    """Renew a session row: a new version and TTL; refused unless it carries an expected version
    (a session marked ended by a waiter that took one of its locks carries another)."""
    condition, values = version_condition(expected_versions)
    values[':new_version'] = new_version
    values[':new_expiry_time'] = expiry_time
    return conditional(
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
