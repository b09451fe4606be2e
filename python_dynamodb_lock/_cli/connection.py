"""The connection and table options every command takes, and what they make: a boto3 session,
a DynamoDB resource with short timeouts and few retries, a lock client bound to the table.

Connection settings come from the options, else from the standard AWS environment variables
and configuration files, which boto3 reads by itself.
"""
from __future__ import annotations

import argparse
import os
from typing import Any, Dict, Optional

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError

from ..python_dynamodb_lock import BaseDynamoDBLock, DynamoDBLockClient
from .checks import check_endpoint_url, endpoint_error, partition_key_type_of, sort_key_name_of
from .console import EXIT_USAGE, CliError

#: Every command's botocore settings, so that an unreachable or silent endpoint fails within
#: seconds whatever botocore's default retry mode (legacy mode makes 10 attempts). The retries
#: give way to ones the user configured (AWS_MAX_ATTEMPTS, AWS_RETRY_MODE, max_attempts or
#: retry_mode in the profile); ``run`` uses its own timeouts, derived from its lease.
CONNECT_TIMEOUT_SECONDS = 2.0
_READ_TIMEOUT_SECONDS = 3.0
_MAX_ATTEMPTS = 2


def add_connection_options(parser: argparse.ArgumentParser, *, on_subcommand: bool, demo_table_name: str) -> None:
    """The AWS and table options, accepted both before and after the command name
    (``demo_table_name``: the demo's default table, which ``--table`` names in its help).

    On a subcommand their defaults are suppressed, so a value given before the command name is
    not overwritten by the subcommand's default.
    """
    def default(value: object) -> Any:
        return argparse.SUPPRESS if on_subcommand else value

    group = parser.add_argument_group(
        'connection and table',
        'Unset options fall back to the standard AWS environment variables '
        '(AWS_PROFILE, AWS_REGION / AWS_DEFAULT_REGION, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, '
        'AWS_SESSION_TOKEN, AWS_ENDPOINT_URL_DYNAMODB, ...) and ~/.aws/config, read by boto3.')
    group.add_argument(
        '--table', metavar='NAME', default=default(None),
        help=f'lock table name (default: {DynamoDBLockClient._DEFAULT_TABLE_NAME}; '
             f'for demo against --endpoint-url: {demo_table_name})')
    group.add_argument('--endpoint-url', metavar='URL', default=default(None),
                       help='DynamoDB endpoint, e.g. http://127.0.0.1:8000 for DynamoDB Local')
    group.add_argument('--region', metavar='REGION', default=default(None),
                       help='AWS region (default: from the AWS environment/configuration)')
    group.add_argument('--profile', metavar='PROFILE', default=default(None),
                       help='named profile of ~/.aws/config (default: AWS_PROFILE or "default")')
    group.add_argument('--partition-key-name', metavar='ATTR',
                       default=default(DynamoDBLockClient._DEFAULT_PARTITION_KEY_NAME),
                       help='partition (hash) key attribute '
                            f'(default: {DynamoDBLockClient._DEFAULT_PARTITION_KEY_NAME})')
    group.add_argument('--sort-key-name', metavar='ATTR',
                       default=default(DynamoDBLockClient._DEFAULT_SORT_KEY_NAME),
                       help='sort (range) key attribute '
                            f'(default: {DynamoDBLockClient._DEFAULT_SORT_KEY_NAME})')
    group.add_argument('--no-sort-key', action='store_true', default=default(False),
                       help="the table's key is the partition key alone (no sort key); the same as "
                            "--sort-key-name ''")
    group.add_argument('--partition-key-type', choices=('S', 'N', 'B'), default=default('S'),
                       help='type of the partition key: S string (default), N number, B binary '
                            '(KEY is then given in base64)')
    group.add_argument('--ttl-attribute-name', metavar='ATTR',
                       default=default(DynamoDBLockClient._DEFAULT_TTL_ATTRIBUTE_NAME),
                       help='TTL attribute holding the expiry epoch '
                            f'(default: {DynamoDBLockClient._DEFAULT_TTL_ATTRIBUTE_NAME})')
    group.add_argument('-v', '--verbose', action='count', default=default(0),
                       help='log library activity to stderr (-v INFO, -vv DEBUG)')


def table_name_of(args: argparse.Namespace) -> str:
    """The table the command works on: ``--table``, else the library default."""
    return args.table or DynamoDBLockClient._DEFAULT_TABLE_NAME


def make_session(args: argparse.Namespace) -> boto3.session.Session:
    """A boto3 session from --profile/--region; anything unset is left to boto3's own lookup.

    Raises ``ProfileNotFound`` for an unknown profile.
    """
    return boto3.session.Session(profile_name=args.profile, region_name=args.region)


def _retries_configured(session: boto3.session.Session) -> bool:
    """Whether the user chose botocore's retries (AWS_MAX_ATTEMPTS, AWS_RETRY_MODE, or
    max_attempts / retry_mode in the profile): the command then leaves them alone."""
    if os.environ.get('AWS_MAX_ATTEMPTS') or os.environ.get('AWS_RETRY_MODE'):
        return True
    try:
        profile = session._session.get_scoped_config()
    except BotoCoreError:   # an unknown profile: reported when the resource is made
        return False
    return bool(profile.get('max_attempts') or profile.get('retry_mode'))


def command_config(session: boto3.session.Session, connect_timeout: float = CONNECT_TIMEOUT_SECONDS,
                   read_timeout: float = _READ_TIMEOUT_SECONDS, force_retries: bool = False) -> Config:
    """The botocore Config of a command: short timeouts, and at most ``_MAX_ATTEMPTS`` attempts
    in botocore's standard retry mode unless the user configured retries (``force_retries``:
    even then)."""
    settings: Dict[str, Any] = {'connect_timeout': connect_timeout, 'read_timeout': read_timeout}
    if force_retries or not _retries_configured(session):
        settings['retries'] = {'mode': 'standard', 'total_max_attempts': _MAX_ATTEMPTS}
    return Config(**settings)


def make_resource(args: argparse.Namespace, config: Optional[Config] = None) -> Any:
    """A DynamoDB service resource for the command's connection options, with ``config`` or
    else :func:`command_config`'s timeouts and retries.

    Raises ``NoRegionError`` when no region is configured anywhere, and a usage error when the
    endpoint URL that boto3 found in the environment or the AWS configuration (no
    ``--endpoint-url`` given) is malformed. Nothing is sent yet.
    """
    session = make_session(args)
    try:
        resource = session.resource('dynamodb', endpoint_url=args.endpoint_url,
                                    config=config or command_config(session))
    except ValueError as error:   # botocore: "Invalid endpoint: ..." from AWS_ENDPOINT_URL* or a profile
        raise CliError(f'invalid endpoint URL from the AWS environment or configuration: {error}',
                       EXIT_USAGE) from None
    if args.endpoint_url is None:
        resolved = resource.meta.client.meta.endpoint_url
        try:
            check_endpoint_url(resolved)
        except ValueError as error:
            raise endpoint_error(resolved, 'from the AWS environment or configuration', str(error)) from None
    return resource


def make_lock_client(args: argparse.Namespace, resource: Any, **settings: Any) -> DynamoDBLockClient:
    """A lock client bound to the command's table, attribute names and key types; ``settings``
    are more constructor arguments (``run`` gives its lease and owner).

    The constructor makes no call, so the arguments it refuses are usage errors.
    """
    try:
        return DynamoDBLockClient(
            resource,
            table_name=table_name_of(args),
            partition_key_name=args.partition_key_name,
            sort_key_name=sort_key_name_of(args),
            ttl_attribute_name=args.ttl_attribute_name,
            partition_key_type=partition_key_type_of(args),
            **settings,
        )
    except (TypeError, ValueError) as error:
        raise CliError(str(error), EXIT_USAGE) from None


def get_lock_or_fail(args: argparse.Namespace, lock_client: DynamoDBLockClient) -> BaseDynamoDBLock:
    """The lock KEY / SORT_KEY of the command, read with a consistent read; a failure when there is none."""
    lock = lock_client.get_lock(args.lock_key, args.sort_key)
    if lock is None:
        raise CliError(f'no lock {args.key!r} / {args.sort_key!r} in table {table_name_of(args)!r}')
    if not lock.record_version_number:
        raise CliError(f'the row {args.key!r} / {args.sort_key!r} in table {table_name_of(args)!r} is '
                       'not a lock (it has no record_version_number)')
    return lock

