"""The one place that talks to DynamoDB.

:class:`LockTable` turns lock operations into single conditional calls on the client of the
application's boto3 DynamoDB resource (``resource.meta.client``): unlike the resource itself,
a client is safe to share between threads, and the resource's client still converts between
Python values and DynamoDB's typed JSON, and carries the application's event hooks. Every
attribute name goes through ``ExpressionAttributeNames`` (or is a quoted identifier in the
PartiQL statements of batched renewals), and a failed condition returns the item that was in
the way (``ReturnValuesOnConditionCheckFailure='ALL_OLD'``) instead of costing an extra read.
"""
from __future__ import annotations

from typing import Any, Dict, Iterator, List, Mapping, NamedTuple, Optional, Sequence

from boto3.dynamodb.types import TypeDeserializer, TypeSerializer
from botocore.exceptions import BotoCoreError, ClientError, ParamValidationError

__all__ = [
    'COL_OWNER_NAME',
    'COL_LEASE_DURATION',
    'COL_RECORD_VERSION_NUMBER',
    'ConditionFailed',
    'LockTable',
    'MAX_BATCH_STATEMENTS',
    'Renewal',
    'error_code',
    'outcome_unknown',
]

COL_OWNER_NAME = 'owner_name'
COL_LEASE_DURATION = 'lease_duration'
COL_RECORD_VERSION_NUMBER = 'record_version_number'

Item = Dict[str, Any]

_CONDITION_FAILED = 'ConditionalCheckFailedException'

# The most statements DynamoDB takes in one BatchExecuteStatement call.
MAX_BATCH_STATEMENTS = 25

# Per-statement error codes of BatchExecuteStatement after which the statement may have been
# applied all the same; every other code means DynamoDB did not apply it.
_STATEMENT_OUTCOME_UNKNOWN = frozenset({'InternalServerError'})


class ConditionFailed(Exception):
    """A conditional write was refused; ``item`` is what the table held instead (None: no row).

    ``retried`` is True when botocore made more than one attempt: an earlier attempt of this
    very write may then have been applied (its answer lost), and ``item`` written after it.
    """

    def __init__(self, item: Optional[Item], retried: bool = False) -> None:
        super().__init__(item)
        self.item = item
        self.retried = retried


def error_code(exc: BaseException) -> str:
    """The DynamoDB error code of a ``ClientError``, or '' for anything else."""
    if isinstance(exc, ClientError):
        return str(exc.response.get('Error', {}).get('Code', ''))
    return ''


def outcome_unknown(exc: BaseException) -> bool:
    """True when a failed write may nevertheless have been applied by DynamoDB.

    botocore retries a failed attempt, and the exception it finally raises describes only
    the last attempt: a throttled or refused retry can follow an earlier attempt that was
    applied and whose answer was lost (read timeout, connection closed mid-response, HTTP
    5xx). So the outcome is known only for an error answered on the first attempt with a
    4xx (validation, missing table, throttling without retries) or raised before sending.
    """
    if isinstance(exc, ClientError):
        metadata = exc.response.get('ResponseMetadata', {})
        status = int(metadata.get('HTTPStatusCode') or 0)
        return status >= 500 or int(metadata.get('RetryAttempts') or 0) > 0
    if isinstance(exc, ParamValidationError):
        return False
    return isinstance(exc, BotoCoreError)


class Renewal(NamedTuple):
    """One heartbeat of :meth:`LockTable.renew_many`: the arguments of :meth:`LockTable.renew`."""

    partition_key: str
    sort_key: str
    expected_versions: Sequence[str]
    new_version: str
    new_expiry_time: int


def _quoted(identifier: str) -> str:
    """A PartiQL quoted identifier (a double quote inside is doubled)."""
    return '"' + identifier.replace('"', '""') + '"'


class LockTable:
    """Conditional reads and writes of lock items in one table."""

    def __init__(
        self,
        client: Any,
        table_name: str,
        partition_key_name: str,
        sort_key_name: str,
        ttl_attribute_name: str,
    ) -> None:
        self.client = client
        self.table_name = table_name
        self.partition_key_name = partition_key_name
        self.sort_key_name = sort_key_name
        self.ttl_attribute_name = ttl_attribute_name
        self._serializer = TypeSerializer()
        self._deserializer = TypeDeserializer()

    # -- conversions ---------------------------------------------------------------------

    def check_storable(self, item: Mapping[str, Any]) -> None:
        """Raise TypeError for values DynamoDB cannot store (``float``, ``object``, ...)."""
        for value in item.values():
            self._serializer.serialize(value)

    def _deserialize_raw(self, item: Optional[Mapping[str, Any]]) -> Optional[Item]:
        """Typed DynamoDB JSON to Python values (error responses are not converted by boto3)."""
        if not item:
            return None
        return {name: self._deserializer.deserialize(value) for name, value in item.items()}

    def _key(self, partition_key: str, sort_key: str) -> Dict[str, Any]:
        return {self.partition_key_name: partition_key, self.sort_key_name: sort_key}

    @staticmethod
    def _version_condition(versions: Sequence[str]) -> tuple[str, Dict[str, Any]]:
        """A condition that the row carries one of ``versions``, and its values."""
        placeholders = [f':expected_version_{index}' for index in range(len(versions))]
        values: Dict[str, Any] = dict(zip(placeholders, versions))
        if len(placeholders) == 1:
            return f'#version = {placeholders[0]}', values
        return f'#version IN ({", ".join(placeholders)})', values

    def _write(self, operation: str, **params: Any) -> None:
        """Run one conditional write; a refused condition raises :class:`ConditionFailed`."""
        try:
            getattr(self.client, operation)(
                TableName=self.table_name,
                ReturnValuesOnConditionCheckFailure='ALL_OLD',
                **params,
            )
        except ClientError as exc:
            if error_code(exc) != _CONDITION_FAILED:
                raise
            attempts_before = exc.response.get('ResponseMetadata', {}).get('RetryAttempts') or 0
            raise ConditionFailed(
                self._deserialize_raw(exc.response.get('Item')), retried=int(attempts_before) > 0,
            ) from exc

    # -- operations ----------------------------------------------------------------------

    def put_if_absent(self, item: Mapping[str, Any]) -> None:
        """Create the lock row; refused when a row with that key exists."""
        self._write(
            'put_item',
            Item=dict(item),
            ConditionExpression='attribute_not_exists(#partition_key)',
            ExpressionAttributeNames={'#partition_key': self.partition_key_name},
        )

    def put_if_version(self, item: Mapping[str, Any], expected_version: str) -> None:
        """Overwrite the lock row; refused unless it still carries ``expected_version``."""
        condition, values = self._version_condition([expected_version])
        self._write(
            'put_item',
            Item=dict(item),
            ConditionExpression=condition,
            ExpressionAttributeNames={'#version': COL_RECORD_VERSION_NUMBER},
            ExpressionAttributeValues=values,
        )

    def renew(
        self,
        partition_key: str,
        sort_key: str,
        expected_versions: Sequence[str],
        new_version: str,
        new_expiry_time: int,
    ) -> None:
        """Write a new version and TTL; refused unless the row carries one of ``expected_versions``."""
        condition, values = self._version_condition(expected_versions)
        values[':new_version'] = new_version
        values[':new_expiry_time'] = new_expiry_time
        self._write(
            'update_item',
            Key=self._key(partition_key, sort_key),
            UpdateExpression='SET #version = :new_version, #expiry_time = :new_expiry_time',
            ConditionExpression=condition,
            ExpressionAttributeNames={
                '#version': COL_RECORD_VERSION_NUMBER,
                '#expiry_time': self.ttl_attribute_name,
            },
            ExpressionAttributeValues=values,
        )

    def renew_many(self, renewals: Sequence[Renewal]) -> List[Optional[Exception]]:
        """Send up to 25 renewals in one PartiQL ``BatchExecuteStatement`` call.

        Each statement is conditional on its own, like :meth:`renew`, and succeeds or fails on
        its own. Returns one entry per renewal, in order: None when it was applied,
        :class:`ConditionFailed` (with the row in the way) when its condition was refused, or a
        ``ClientError`` for any other refusal, which :func:`outcome_unknown` classifies like the
        error of a single call.

        :raises ValueError: for an empty batch or one of more than 25.
        :raises ClientError, BotoCoreError: when the call as a whole fails (for instance
            ``AccessDeniedException`` without the ``dynamodb:PartiQLUpdate`` permission); then
            none, some or all of the renewals may have been applied.
        """
        if not 0 < len(renewals) <= MAX_BATCH_STATEMENTS:
            raise ValueError(f'a batch holds 1 to {MAX_BATCH_STATEMENTS} renewals, got {len(renewals)}')
        statements = []
        for renewal in renewals:
            version_slots = ', '.join('?' for _ in renewal.expected_versions)
            statements.append({
                'Statement': (
                    f'UPDATE {_quoted(self.table_name)}'
                    f' SET {_quoted(COL_RECORD_VERSION_NUMBER)} = ?'
                    f' SET {_quoted(self.ttl_attribute_name)} = ?'
                    f' WHERE {_quoted(self.partition_key_name)} = ? AND {_quoted(self.sort_key_name)} = ?'
                    f' AND {_quoted(COL_RECORD_VERSION_NUMBER)} IN [{version_slots}]'
                ),
                'Parameters': [
                    renewal.new_version, renewal.new_expiry_time,
                    renewal.partition_key, renewal.sort_key, *renewal.expected_versions,
                ],
                'ReturnValuesOnConditionCheckFailure': 'ALL_OLD',
            })
        response = self.client.batch_execute_statement(Statements=statements)
        metadata = response.get('ResponseMetadata', {})
        retried = int(metadata.get('RetryAttempts') or 0) > 0
        answers = response.get('Responses') or []
        if len(answers) != len(renewals):
            raise ClientError(
                {'Error': {'Code': 'UnexpectedResponse',
                           'Message': f'{len(answers)} answers to {len(renewals)} statements'},
                 'ResponseMetadata': {**metadata, 'HTTPStatusCode': 500}},
                'BatchExecuteStatement',
            )
        return [LockTable._statement_outcome(answer.get('Error'), metadata, retried) for answer in answers]

    @staticmethod
    def _statement_outcome(error: Optional[Mapping[str, Any]], metadata: Mapping[str, Any],
                           retried: bool) -> Optional[Exception]:
        if not error:
            return None
        code = str(error.get('Code', ''))
        if code == 'ConditionalCheckFailed':
            item = error.get('Item')   # part of a successful answer: converted by boto3
            return ConditionFailed(dict(item) if item else None, retried=retried)
        status = 500 if code in _STATEMENT_OUTCOME_UNKNOWN else 400
        return ClientError(
            {'Error': {'Code': code, 'Message': str(error.get('Message', ''))},
             'ResponseMetadata': {**metadata, 'HTTPStatusCode': status}},
            'BatchExecuteStatement',
        )

    def delete_if_version(self, partition_key: str, sort_key: str, expected_versions: Sequence[str]) -> None:
        """Delete the lock row; refused unless it carries one of ``expected_versions``."""
        condition, values = self._version_condition(expected_versions)
        self._write(
            'delete_item',
            Key=self._key(partition_key, sort_key),
            ConditionExpression=condition,
            ExpressionAttributeNames={'#version': COL_RECORD_VERSION_NUMBER},
            ExpressionAttributeValues=values,
        )

    def get(self, partition_key: str, sort_key: str) -> Optional[Item]:
        """A strongly consistent read of one row; None when there is none."""
        response = self.client.get_item(
            TableName=self.table_name,
            Key=self._key(partition_key, sort_key),
            ConsistentRead=True,
        )
        return response.get('Item') or None

    def scan(self) -> Iterator[Item]:
        """Every row of the table, page by page through boto3's paginator."""
        paginator = self.client.get_paginator('scan')
        for page in paginator.paginate(TableName=self.table_name, ConsistentRead=True):
            yield from page.get('Items', [])
