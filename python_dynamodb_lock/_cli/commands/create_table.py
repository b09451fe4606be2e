"""``dynamodb-lock create-table``: create the lock table with TTL enabled, or accept an existing one."""
from __future__ import annotations

import argparse
from typing import Any, Mapping, Optional

from botocore.exceptions import ClientError

from ..._common.tables import check_global_table, check_tags
from ...python_dynamodb_lock import DynamoDBLockClient, DynamoDBLockError
from ..arguments import AddCommand, positive_int, tag
from ..checks import partition_key_type_of, sort_key_name_of
from ..connection import make_resource, table_name_of
from ..console import EXIT_OK, EXIT_USAGE, CliError, Console


def register(add_command: AddCommand) -> None:
    """Add the ``create-table`` subparser."""
    create = add_command(
        'create-table', 'create the lock table (TTL enabled)',
        'Create the lock table with a string partition key and a string sort key (or with '
        '--partition-key-type and --no-sort-key, another layout), wait until it '
        'is ACTIVE and enable TTL on the TTL attribute, so rows of dead holders are removed by '
        'DynamoDB eventually.')
    create.add_argument('--billing-mode', choices=('PROVISIONED', 'PAY_PER_REQUEST'),
                        default='PROVISIONED', help='(default: %(default)s)')
    create.add_argument('--read-capacity', type=positive_int, metavar='N', default=None,
                        help='provisioned read capacity units (PROVISIONED only; default: '
                             f'{DynamoDBLockClient._DEFAULT_READ_CAPACITY})')
    create.add_argument('--write-capacity', type=positive_int, metavar='N', default=None,
                        help='provisioned write capacity units (PROVISIONED only; default: '
                             f'{DynamoDBLockClient._DEFAULT_WRITE_CAPACITY})')
    create.add_argument('--exist-ok', action='store_true',
                        help='succeed if the table already exists with the same key schema')
    create.add_argument('--tag', dest='tags', action='append', type=tag, metavar='KEY=VALUE', default=None,
                        help='tag the new table (repeat for more tags, at most 50; the key is what comes before '
                             'the first "="); an existing table accepted with --exist-ok keeps its tags')
    create.add_argument('--allow-global-table', action='store_true',
                        help='with --exist-ok, accept an existing global table (replicas in other regions): '
                             'locks are then exclusive only among clients of one region')
    create.set_defaults(handler=cmd_create_table)


def cmd_create_table(args: argparse.Namespace, console: Console) -> int:
    """Create the table (TTL on); with --exist-ok an existing table of the same schema is fine."""
    pay_per_request = args.billing_mode == 'PAY_PER_REQUEST'
    if pay_per_request and (args.read_capacity is not None or args.write_capacity is not None):
        raise CliError('--read-capacity/--write-capacity apply only to '
                       '--billing-mode PROVISIONED', EXIT_USAGE)
    try:
        tags = check_tags([{'Key': key, 'Value': value} for key, value in args.tags or ()], '--tag')
    except (TypeError, ValueError) as error:
        raise CliError(str(error), EXIT_USAGE) from None
    table = table_name_of(args)
    client = make_resource(args).meta.client
    existing = _existing_table(client, table)
    existed = existing is not None
    if existing is not None:
        if not args.exist_ok:
            raise CliError(f'table {table!r} already exists (pass --exist-ok to accept an existing '
                           'table with the same key schema)')
        try:
            check_global_table(existing, args.allow_global_table, 'pass --allow-global-table')
        except DynamoDBLockError as error:
            raise CliError(error.message) from None
    read_capacity = args.read_capacity or DynamoDBLockClient._DEFAULT_READ_CAPACITY
    write_capacity = args.write_capacity or DynamoDBLockClient._DEFAULT_WRITE_CAPACITY
    description = DynamoDBLockClient.create_dynamodb_table(
        client,
        table_name=table,
        partition_key_name=args.partition_key_name,
        sort_key_name=sort_key_name_of(args),
        ttl_attribute_name=args.ttl_attribute_name,
        read_capacity=read_capacity,
        write_capacity=write_capacity,
        billing_mode=args.billing_mode,
        exist_ok=args.exist_ok,
        partition_key_type=partition_key_type_of(args),
        tags=tags,
        allow_global_table=args.allow_global_table,
    )
    status = (description or {}).get('TableStatus', 'ACTIVE')
    if existed:
        console.out(f'Table {table!r} already exists with the expected key schema '
                    f'(status {status}).')
    else:
        capacity = ('on-demand (PAY_PER_REQUEST)' if pay_per_request
                    else f'PROVISIONED, {read_capacity} RCU / {write_capacity} WCU')
        sort_key_name = sort_key_name_of(args)
        sort_key = 'no sort key' if sort_key_name is None else f'sort key {sort_key_name!r} (S)'
        console.out(f'Created table {table!r} (status {status}): partition key '
                    f'{args.partition_key_name!r} ({partition_key_type_of(args)}), {sort_key}, '
                    f'{capacity}' + (f', {len(tags)} tag(s).' if tags else '.'))
    ttl = client.describe_time_to_live(TableName=table).get('TimeToLiveDescription', {})
    ttl_status = ttl.get('TimeToLiveStatus', 'DISABLED')
    ttl_attribute = ttl.get('AttributeName')
    if ttl_status in ('ENABLED', 'ENABLING') and ttl_attribute == args.ttl_attribute_name:
        console.out(f'TTL: {ttl_status} on {ttl_attribute!r}.')
        return EXIT_OK
    raise CliError(f'TTL on table {table!r} is {ttl_status}'
                   + (f' on {ttl_attribute!r}' if ttl_attribute else '')
                   + f', not enabled on {args.ttl_attribute_name!r}: rows left by dead holders '
                     'will not be cleaned up by DynamoDB')


def _existing_table(client: Any, table: str) -> Optional[Mapping[str, Any]]:
    """The description of ``table``, or None when there is no such table."""
    try:
        description: Mapping[str, Any] = client.describe_table(TableName=table)['Table']
    except ClientError as error:
        if error.response.get('Error', {}).get('Code') == 'ResourceNotFoundException':
            return None
        raise
    return description
