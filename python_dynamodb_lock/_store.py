"""The one place that talks to DynamoDB.

:class:`LockTable` turns lock operations into single conditional calls on the client of the
application's boto3 DynamoDB resource (``resource.meta.client``): unlike the resource itself,
a client is safe to share between threads, and the resource's client still converts between
Python values and DynamoDB's typed JSON, and carries the application's event hooks. Every
attribute name goes through ``ExpressionAttributeNames``, and a failed condition returns the
item that was in the way (``ReturnValuesOnConditionCheckFailure='ALL_OLD'``) instead of
costing an extra read.
"""
from __future__ import annotations

from typing import Any, Dict, Iterator, Mapping, Optional, Sequence

from boto3.dynamodb.types import TypeDeserializer, TypeSerializer
from botocore.exceptions import BotoCoreError, ClientError, ParamValidationError

__all__ = [
    'COL_OWNER_NAME',
    'COL_LEASE_DURATION',
    'COL_RECORD_VERSION_NUMBER',
    'ConditionFailed',
    'LockTable',
    'error_code',
    'outcome_unknown',
]

COL_OWNER_NAME = 'owner_name'
COL_LEASE_DURATION = 'lease_duration'
COL_RECORD_VERSION_NUMBER = 'record_version_number'

Item = Dict[str, Any]

_CONDITION_FAILED = 'ConditionalCheckFailedException'


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
