"""``dynamodb-lock release``: force-release one lock, only if it still carries the version that was read."""
from __future__ import annotations

import argparse
from typing import TextIO

from ...python_dynamodb_lock import DynamoDBLockClient
from ..arguments import AddCommand
from ..connection import get_lock_or_fail, make_lock_client, make_resource, table_name_of
from ..console import EXIT_OK, EXIT_USAGE, PROG, CliError, Console, logger
from ..render import describe_lock_lines, lock_record, wall_clock


def register(add_command: AddCommand) -> None:
    """Add the ``release`` subparser."""
    release = add_command(
        'release', 'force-release a lock (requires --force)',
        'Release a lock on behalf of its holder, e.g. one left by a crashed process that you '
        'do not want to wait out. The row is read and shown, and then marked released (kept '
        'for its fencing token; DynamoDB\'s TTL deletes it later) only if it still carries the '
        'record version that was read (or the one given with --version): a lock that changed '
        'meanwhile -- its holder is alive and heartbeated, or someone else took it -- is never '
        'touched. A live holder is not told; it learns at its next heartbeat that the lock was '
        'stolen.')
    release.add_argument('key', metavar='KEY', help='partition key of the lock')
    release.add_argument('sort_key', metavar='SORT_KEY', nargs='?',
                         default=DynamoDBLockClient._DEFAULT_SORT_KEY_VALUE,
                         help='sort key of the lock (default: %(default)s)')
    release.add_argument('--force', action='store_true',
                         help='required: confirms that you mean to release a lock you do not hold')
    release.add_argument('--yes', '-y', action='store_true',
                         help='do not ask for confirmation (needed when stdin is not a terminal)')
    release.add_argument('--version', dest='expected_version', metavar='RVN', default=None,
                         help='release only if the lock still carries this record_version_number '
                              '(as seen earlier with show/list)')
    release.set_defaults(handler=cmd_release)


def _confirm(console: Console, question: str) -> bool:
    """Ask on stderr, read one line from stdin; only 'y'/'yes' confirm (EOF declines)."""
    console.stderr.write(question)
    console.stderr.flush()
    answer = console.stdin.readline()
    if not answer:
        console.err('')
    return answer.strip().lower() in ('y', 'yes')


def _stdin_is_terminal(stream: TextIO) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


def cmd_release(args: argparse.Namespace, console: Console) -> int:
    """Force-release one lock, conditioned on the version that was read (or --version)."""
    if not args.force:
        raise CliError(
            'release frees a lock that another process may still hold: that holder is not '
            'told, and keeps working as if it held the lock until its next heartbeat fails. '
            'If you are sure the holder is gone (or must be overruled), repeat with --force. '
            'Only the version you are shown is released, never a lock that changed meanwhile.',
            EXIT_USAGE)
    if not args.yes and not _stdin_is_terminal(console.stdin):
        raise CliError('stdin is not a terminal, so confirmation cannot be asked: '
                       'repeat with --yes to release without asking', EXIT_USAGE)
    table = table_name_of(args)
    lock_client = make_lock_client(args, make_resource(args))
    try:
        lock = get_lock_or_fail(args, lock_client)
        if args.expected_version is not None and lock.record_version_number != args.expected_version:
            raise CliError(
                f'lock {args.key!r} / {args.sort_key!r} changed meanwhile: it now carries '
                f'version {lock.record_version_number} (owner {lock.owner_name}), not '
                f'{args.expected_version}; nothing was changed')
        for line in describe_lock_lines(lock_record(lock, wall_clock()), table):
            console.out(line)
        if not args.yes and not _confirm(
                console, f'Release this lock (only if it still carries version '
                         f'{lock.record_version_number})? [y/N] '):
            raise CliError('not confirmed; nothing was changed')
        if not lock_client.force_release_lock(lock):
            raise CliError(
                f'lock {args.key!r} / {args.sort_key!r} changed meanwhile (its holder '
                'heartbeated, it was re-acquired, or it was released) and no longer carries '
                f'version {lock.record_version_number}; nothing was changed. '
                f'Run "{PROG} show" to see its current state.')
    finally:
        lock_client.close()
    logger.info('force-released %s / %s version %s in %s', args.key, args.sort_key,
                lock.record_version_number, table)
    console.out(f'Released lock {args.key!r} / {args.sort_key!r} '
                f'(version {lock.record_version_number}, owner {lock.owner_name}).')
    return EXIT_OK
