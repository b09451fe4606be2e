"""``dynamodb-lock demo``: contending worker processes on an embedded engine (the demo itself: ``_demo``).

The one module of the command line that imports the demo.
"""
from __future__ import annotations

import argparse

from ... import _demo
from ..arguments import AddCommand, positive_int, positive_seconds
from ..checks import partition_key_type_of, sort_key_name_of
from ..console import EXIT_FAILURE, EXIT_OK, EXIT_USAGE, CliError, Console

#: The table the demo uses against ``--endpoint-url`` when ``--table`` is not given.
DEMO_TABLE_NAME = _demo.DEMO_TABLE_NAME


def register(add_command: AddCommand) -> None:
    """Add the ``demo`` subparser."""
    demo = add_command(
        'demo', 'run the contention + crash takeover demo',
        'Start an embedded DynamoDB-compatible engine (DynamoDB Local when installed, else moto '
        'server; needs pip install ".[demo]" in a checkout of this project), or use '
        '--endpoint-url, create the table, and run worker processes that contend for a few '
        'keys. Each increments a counter item with a non-atomic read-then-write inside its '
        'critical section. Midway one worker is SIGKILLed while it holds a lock; another takes '
        'the lock over once its lease has run out. The verdict checks that no two holds of a key '
        'overlapped and that every counter equals its number of increments; the exit code is 1 '
        'if not.')
    demo.add_argument('--workers', type=positive_int, default=4, metavar='N',
                      help='worker processes (default: %(default)s; at least 2)')
    demo.add_argument('--keys', type=positive_int, default=2, metavar='N',
                      help='lock keys contended for (default: %(default)s)')
    demo.add_argument('--duration', type=positive_seconds, default=12.0, metavar='SECONDS',
                      help='how long the workers keep acquiring (default: %(default)s)')
    demo.add_argument('--lease', dest='lease_duration', type=positive_seconds, default=2.0,
                      metavar='SECONDS', help='lease_duration of the workers (default: %(default)s)')
    demo.add_argument('--engine', choices=('auto', 'dynamodb-local', 'moto'), default='auto',
                      help='embedded engine when no --endpoint-url is given (default: %(default)s)')
    demo.add_argument('--quiet', '-q', action='store_true',
                      help='print only the verdict, not the progress')
    demo.set_defaults(handler=cmd_demo)


def cmd_demo(args: argparse.Namespace, console: Console) -> int:
    """Run the demo (see :mod:`python_dynamodb_lock._demo`)."""
    if sort_key_name_of(args) is None or partition_key_type_of(args) != 'S':
        raise CliError('the demo uses a table with a string partition key and a string sort key: '
                       '--no-sort-key and --partition-key-type do not apply to it', EXIT_USAGE)
    settings = _demo.DemoSettings(
        workers=args.workers,
        keys=args.keys,
        duration=args.duration,
        lease_duration=args.lease_duration,
        engine=args.engine,
        endpoint_url=args.endpoint_url,
        region_name=args.region,
        profile_name=args.profile,
        table_name=args.table or DEMO_TABLE_NAME,
        partition_key_name=args.partition_key_name,
        sort_key_name=args.sort_key_name,
        ttl_attribute_name=args.ttl_attribute_name,
        quiet=args.quiet,
    )
    try:
        settings.validate()
    except ValueError as error:
        raise CliError(str(error), EXIT_USAGE) from None
    try:
        report = _demo.run_demo(settings, console.stdout)
    except _demo.DemoError as error:
        raise CliError(str(error)) from None
    return EXIT_OK if report.passed else EXIT_FAILURE
