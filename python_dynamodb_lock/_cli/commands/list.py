"""``dynamodb-lock list``: every lock row of the table, or of one partition key, as a table or JSON."""
from __future__ import annotations

import argparse
import json

from ..arguments import EXPIRY_PERIOD_HELP, AddCommand, non_negative_seconds
from ..connection import make_lock_client, make_resource, table_name_of
from ..console import EXIT_OK, Console
from ..render import as_number, format_seconds, lock_record, render_table, until_expiry_text, wall_clock


def register(add_command: AddCommand) -> None:
    """Add the ``list`` subparser."""
    listing = add_command(
        'list', 'list the locks in the table',
        'List every lock row in the table (a full scan), or with --partition-key only the locks under '
        'that partition key (a query, paginated like the scan). The table does not record when a lock '
        'was acquired or last heartbeated; what it stores is the holder\'s lease_duration and '
        'a TTL expiry_time = last write + the holder\'s expiry_period. So LEASE is the stored '
        'lease, and TTL EXPIRES IN is expiry_time minus now on this machine\'s clock ("expired ... '
        'ago": past its TTL, waiting for DynamoDB\'s TTL deletion). A live holder rewrites '
        'RECORD VERSION at every heartbeat; a version unchanged for longer than LEASE means '
        'the holder is presumed dead and any waiter may take the lock over.')
    listing.add_argument('--json', action='store_true', help='print a JSON array instead of a table')
    listing.add_argument('--partition-key', metavar='KEY', default=None,
                         help='list only the locks under this partition key (every sort key of it), with a '
                              'query instead of a scan; typed as KEY is (--partition-key-type)')
    listing.add_argument('--expiry-period', type=non_negative_seconds, metavar='SECONDS',
                         default=None, help=EXPIRY_PERIOD_HELP)
    listing.set_defaults(handler=cmd_list)


def cmd_list(args: argparse.Namespace, console: Console) -> int:
    """Print every lock row of the table (or of one partition key), sorted by key."""
    table = table_name_of(args)
    lock_client = make_lock_client(args, make_resource(args))
    try:
        locks = list(lock_client.list_locks(getattr(args, 'listed_key', None)))
    finally:
        lock_client.close()
    now = wall_clock()
    records = sorted((lock_record(lock, now, args.expiry_period) for lock in locks),
                     key=lambda r: (str(r['partition_key']), str(r['sort_key'])))
    if args.json:
        console.out(json.dumps(records, indent=2, sort_keys=True))
        return EXIT_OK
    where = f'table {table!r}' + ('' if args.partition_key is None else f' under partition key {args.partition_key!r}')
    if not records:
        console.out(f'No locks in {where}.')
        return EXIT_OK
    headers = ['PARTITION KEY', 'SORT KEY', 'OWNER', 'LEASE', 'TTL EXPIRES IN', 'RECORD VERSION']
    if args.expiry_period is not None:
        headers.append('LAST WRITE (EST.)')
    shared = any(record.get('shared_holders') for record in records)
    if shared:
        headers.append('SHARED HOLDERS')
    rows = []
    for record in records:
        lease = as_number(record['lease_duration'])
        row = [
            str(record['partition_key']),
            str(record['sort_key']),
            str(record['owner_name']),
            format_seconds(lease) if lease is not None else str(record['lease_duration']),
            until_expiry_text(record['seconds_until_expiry']),
            str(record['record_version_number']),
        ]
        if args.expiry_period is not None:
            age = record['estimated_seconds_since_last_write']
            row.append('unknown' if age is None else f'~{format_seconds(age)} ago')
        if shared:
            row.append(str(len(record.get('shared_holders') or [])) if record.get('shared_holders') else '-')
        rows.append(row)
    for line in render_table(headers, rows):
        console.out(line)
    console.out(f'{len(records)} lock(s) in {where}.')
    return EXIT_OK
