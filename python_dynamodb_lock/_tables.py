"""Creating the lock table: what to ask for, and how an existing table is judged.

:func:`table_request` and :func:`judge_existing_table` are pure; :func:`create_table_sync`
runs them on a boto3 client (the asyncio client has its own runner).
"""
from __future__ import annotations

from typing import Any, Dict, Mapping

from botocore.exceptions import BotoCoreError, ClientError

from . import _validation as validation
from ._core.answers import error_code, reason_of
from ._errors import DynamoDBLockError, Reason
from ._observe import logger

__all__ = ['create_table_sync', 'judge_existing_table', 'needs_ttl_update', 'require_low_level_client',
           'table_request']


def table_request(table_name: Any, partition_key_name: Any, sort_key_name: Any, ttl_attribute_name: Any,
                  read_capacity: Any, write_capacity: Any, billing_mode: Any) -> Dict[str, Any]:
    """The ``CreateTable`` arguments for a lock table; raises TypeError/ValueError for bad ones."""
    validation.require_text('table_name', table_name)
    for argument, value in (('partition_key_name', partition_key_name), ('sort_key_name', sort_key_name),
                            ('ttl_attribute_name', ttl_attribute_name)):
        validation.require_attribute_name(argument, value)
    if billing_mode not in ('PROVISIONED', 'PAY_PER_REQUEST'):
        raise ValueError(f"billing_mode must be 'PROVISIONED' or 'PAY_PER_REQUEST', got {billing_mode!r}")
    params: Dict[str, Any] = {
        'TableName': table_name,
        'KeySchema': [
            {'AttributeName': partition_key_name, 'KeyType': 'HASH'},
            {'AttributeName': sort_key_name, 'KeyType': 'RANGE'},
        ],
        'AttributeDefinitions': [
            {'AttributeName': partition_key_name, 'AttributeType': 'S'},
            {'AttributeName': sort_key_name, 'AttributeType': 'S'},
        ],
        'BillingMode': billing_mode,
    }
    if billing_mode == 'PROVISIONED':
        for argument, value in (('read_capacity', read_capacity), ('write_capacity', write_capacity)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f'{argument} must be a positive int, got {value!r}')
        params['ProvisionedThroughput'] = {'ReadCapacityUnits': read_capacity, 'WriteCapacityUnits': write_capacity}
    return params


def judge_existing_table(description: Mapping[str, Any], params: Mapping[str, Any], exist_ok: bool) -> None:
    """Accept an existing table with the requested key schema when ``exist_ok``; raise otherwise."""
    table_name = params['TableName']
    key_schema = {key['KeyType']: key['AttributeName'] for key in description.get('KeySchema', [])}
    types = {definition['AttributeName']: definition['AttributeType']
             for definition in description.get('AttributeDefinitions', [])}
    expected = {key['KeyType']: key['AttributeName'] for key in params['KeySchema']}
    expected_types = {definition['AttributeName']: definition['AttributeType']
                      for definition in params['AttributeDefinitions']}
    if key_schema != expected or any(types.get(name) != kind for name, kind in expected_types.items()):
        raise DynamoDBLockError(
            DynamoDBLockError.UNKNOWN,
            f'Table {table_name!r} already exists with key schema {key_schema} '
            f'(types {types}); a lock table needs a string HASH key {expected.get("HASH")!r} and '
            f'a string RANGE key {expected.get("RANGE")!r}',
            reason=Reason.WRONG_KEY_SCHEMA,
        )
    if not exist_ok:
        raise DynamoDBLockError(
            DynamoDBLockError.UNKNOWN,
            f'Table {table_name!r} already exists (pass exist_ok=True to accept it)',
            reason=Reason.TABLE_EXISTS,
        )
    logger.info('Lock table %s already exists with the right key schema', table_name)


def needs_ttl_update(ttl_description: Mapping[str, Any], ttl_attribute_name: str) -> bool:
    return (ttl_description.get('TimeToLiveStatus') not in ('ENABLED', 'ENABLING')
            or ttl_description.get('AttributeName') != ttl_attribute_name)


def creation_failed(table_name: str, exc: BaseException) -> DynamoDBLockError:
    return DynamoDBLockError(DynamoDBLockError.UNKNOWN, f'Could not create the lock table {table_name!r}: {exc}',
                             reason=reason_of(exc))


def require_low_level_client(dynamodb_client: Any, kind: str = 'boto3.client("dynamodb")') -> None:
    """Refuse, before any call, what is not a low-level DynamoDB client (a resource, say)."""
    if getattr(getattr(dynamodb_client, 'meta', None), 'client', None) is not None:
        raise TypeError(f'create_dynamodb_table takes a low-level client ({kind}), not a resource; '
                        'pass resource.meta.client')
    missing = [name for name in ('create_table', 'describe_table', 'describe_time_to_live', 'get_waiter')
               if not callable(getattr(dynamodb_client, name, None))]
    if missing:
        raise TypeError(f'create_dynamodb_table takes a low-level DynamoDB client ({kind}), '
                        f'not {type(dynamodb_client).__name__}')


def create_table_sync(dynamodb_client: Any, table_name: Any, partition_key_name: Any, sort_key_name: Any,
                      ttl_attribute_name: Any, read_capacity: Any, write_capacity: Any, billing_mode: Any,
                      exist_ok: bool) -> Dict[str, Any]:
    require_low_level_client(dynamodb_client)
    params = table_request(table_name, partition_key_name, sort_key_name, ttl_attribute_name, read_capacity,
                           write_capacity, billing_mode)
    try:
        try:
            dynamodb_client.create_table(**params)
            logger.info('Creating lock table %s', table_name)
        except ClientError as exc:
            if error_code(exc) != 'ResourceInUseException':
                raise
            judge_existing_table(dynamodb_client.describe_table(TableName=table_name)['Table'], params, exist_ok)
        dynamodb_client.get_waiter('table_exists').wait(TableName=table_name)
        ttl = dynamodb_client.describe_time_to_live(TableName=table_name).get('TimeToLiveDescription', {})
        if needs_ttl_update(ttl, ttl_attribute_name):
            dynamodb_client.update_time_to_live(
                TableName=table_name,
                TimeToLiveSpecification={'Enabled': True, 'AttributeName': ttl_attribute_name},
            )
            dynamodb_client.get_waiter('table_exists').wait(TableName=table_name)
        description: Dict[str, Any] = dynamodb_client.describe_table(TableName=table_name)['Table']
        return description
    except (ClientError, BotoCoreError) as exc:
        raise creation_failed(table_name, exc) from exc
