"""``dynamodb-lock show``: one lock row, read with a consistent read."""
from __future__ import annotations

import argparse
import json

from ...python_dynamodb_lock import DynamoDBLockClient
from ..arguments import EXPIRY_PERIOD_HELP, AddCommand, non_negative_seconds
from ..connection import get_lock_or_fail, make_lock_client, make_resource, table_name_of
from ..console import EXIT_OK, Console
from ..render import describe_lock_lines, lock_record, wall_clock


def register(add_command: AddCommand) -> None:
    """Add the ``show`` subparser."""
    show = add_command('show', 'show one lock',
                       'Show one lock row, read with a consistent read.')
    show.add_argument('key', metavar='KEY', help='partition key of the lock')
    show.add_argument('sort_key', metavar='SORT_KEY', nargs='?',
                      default=DynamoDBLockClient._DEFAULT_SORT_KEY_VALUE,
                      help='sort key of the lock (default: %(default)s)')
    show.add_argument('--json', action='store_true', help='print a JSON object')
    show.add_argument('--expiry-period', type=non_negative_seconds, metavar='SECONDS',
                      default=None, help=EXPIRY_PERIOD_HELP)
    show.set_defaults(handler=cmd_show)


def cmd_show(args: argparse.Namespace, console: Console) -> int:
    """Print one lock row; exit 1 when there is none."""
    lock_client = make_lock_client(args, make_resource(args))
    try:
        lock = get_lock_or_fail(args, lock_client)
    finally:
        lock_client.close()
    record = lock_record(lock, wall_clock(), args.expiry_period)
    if args.json:
        console.out(json.dumps(record, indent=2, sort_keys=True))
    else:
        for line in describe_lock_lines(record, table_name_of(args)):
            console.out(line)
    return EXIT_OK
