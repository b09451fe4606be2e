"""Failures explained in the command's terms: one line saying what went wrong and what to do
(``dynamodb-lock: error: ...``), instead of a traceback."""
from __future__ import annotations

import argparse
from typing import Dict, Iterator, List, Optional

from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectTimeoutError,
    EndpointConnectionError,
    NoCredentialsError,
    NoRegionError,
    PartialCredentialsError,
    ProfileNotFound,
    ReadTimeoutError,
)

from .._common.tables import KEY_TYPE_NAMES, describe_key_schema
from .._common.tables import _key_schema as key_schema_of
from ..python_dynamodb_lock import DynamoDBLockClient, DynamoDBLockError
from .checks import partition_key_type_of, sort_key_name_of
from .connection import make_resource, table_name_of
from .console import PROG, CliError


def layout_options(names: Dict[str, str], types: Dict[str, str]) -> Optional[List[str]]:
    """The options that describe a table's key (``names``: its HASH and RANGE attributes,
    ``types``: their types, as ``DescribeTable`` gives them), or None when it cannot hold locks
    (no string, number or binary HASH key; a RANGE key that is not a string)."""
    hash_name, range_name = names.get('HASH'), names.get('RANGE')
    if hash_name is None or types.get(hash_name) not in KEY_TYPE_NAMES or (
            range_name is not None and types.get(range_name) != 'S'):
        return None
    options = []
    if hash_name != DynamoDBLockClient._DEFAULT_PARTITION_KEY_NAME:
        options += ['--partition-key-name', hash_name]
    if types[hash_name] != 'S':
        options += ['--partition-key-type', types[hash_name]]
    if range_name is None:
        options.append('--no-sort-key')
    elif range_name != DynamoDBLockClient._DEFAULT_SORT_KEY_NAME:
        options += ['--sort-key-name', range_name]
    return options


def explain_layout_mismatch(args: argparse.Namespace) -> str:
    """What to say when the table's key is not the one the options describe: the table's key
    and the options that describe it (the table is described for that, once), in the command's
    terms rather than the library's Python arguments."""
    table = table_name_of(args)
    sort_key_name = sort_key_name_of(args)
    expected = describe_key_schema(args.partition_key_name, partition_key_type_of(args), sort_key_name,
                                   None if sort_key_name is None else 'S')
    generic = (f'table {table!r} does not have the key this command was told ({expected}): describe its key with '
               '--no-sort-key, --partition-key-type N|B, --partition-key-name or --sort-key-name')
    try:
        description = make_resource(args).meta.client.describe_table(TableName=table)['Table']
    except (BotoCoreError, ClientError, CliError, KeyError):
        return generic
    names, types = key_schema_of(description)
    found = describe_key_schema(names.get('HASH'), types.get(names.get('HASH', '')), names.get('RANGE'),
                                types.get(names.get('RANGE', '')))
    options = layout_options(names, types)
    if options is None:
        return f'table {table!r} cannot hold locks: it has {found}'
    return (f'table {table!r} has {found}, not the key this command was told ({expected}): repeat with '
            + (' '.join(options) if options else 'the default key options (no --no-sort-key, '
               '--partition-key-type, --partition-key-name or --sort-key-name)'))


def _exception_chain(exc: BaseException) -> Iterator[BaseException]:
    seen = set()
    current: Optional[BaseException] = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def explain_failure(exc: BaseException, args: argparse.Namespace) -> Optional[str]:
    """A one-line explanation of an expected failure, or None if ``exc`` is not one."""
    table = table_name_of(args)
    for cause in _exception_chain(exc):
        if isinstance(cause, NoCredentialsError):
            return ('no AWS credentials found: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, '
                    'pass --profile, or configure ~/.aws/credentials '
                    '(DynamoDB Local accepts any non-empty values)')
        if isinstance(cause, PartialCredentialsError):
            return f'incomplete AWS credentials: {cause}'
        if isinstance(cause, NoRegionError):
            return 'no AWS region configured: pass --region or set AWS_DEFAULT_REGION'
        if isinstance(cause, ProfileNotFound):
            return f'{cause} (check --profile / AWS_PROFILE and ~/.aws/config)'
        if isinstance(cause, (EndpointConnectionError, ConnectTimeoutError)):
            return f'cannot reach DynamoDB: {cause}'
        if isinstance(cause, ReadTimeoutError):
            return f'cannot reach DynamoDB: no answer in time ({cause})'
        if isinstance(cause, ClientError):
            error = cause.response.get('Error', {})
            code = error.get('Code', 'Unknown')
            if code == 'ResourceNotFoundException':
                return (f'table {table!r} not found (create it with: '
                        f'{PROG} create-table --table {table})')
            if not isinstance(exc, DynamoDBLockError):  # else its own message says more
                return f'DynamoDB refused the request: {code}: {error.get("Message", cause)}'
    if isinstance(exc, DynamoDBLockError):
        return f'{exc.code}: {exc.message}'
    if isinstance(exc, BotoCoreError):
        return str(exc)
    return None
