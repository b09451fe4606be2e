"""``dynamodb-lock run``: run a command while holding a lock (the supervisor is ``_cli/supervisor.py``)."""
from __future__ import annotations

import argparse
import datetime
import os
from typing import Any, Dict

from ...python_dynamodb_lock import DynamoDBLockClient
from .. import supervisor
from ..arguments import AddCommand, non_negative_seconds, seconds
from ..connection import (CONNECT_TIMEOUT_SECONDS, command_config, make_lock_client, make_resource, make_session,
                          table_name_of)
from ..console import EXIT_USAGE, PROG, CliError, Console

#: ``run --grace``: how long the rest of the command's process group may outlive it, by default.
DEFAULT_RUN_GRACE = 60.0

#: The shortest ``run --lease``: its heartbeats come every sixth of it.
MIN_RUN_LEASE_SECONDS = 1.0


def run_lease(text: str) -> float:
    """``run --lease``: seconds, at least :data:`MIN_RUN_LEASE_SECONDS`."""
    return seconds(text, MIN_RUN_LEASE_SECONDS, inclusive=True)


def register(add_command: AddCommand) -> None:
    """Add the ``run`` subparser."""
    run_command = add_command(
        'run', 'run a command while holding a lock',
        'Acquire the lock KEY (waiting up to --wait seconds), run the command given after "--" with '
        'the lock held and renewed, release the lock when the command exits, and exit with its exit '
        'code. The command gets the lock\'s fencing token in $DYNAMODB_LOCK_FENCING_TOKEN (and '
        '$DYNAMODB_LOCK_KEY, $DYNAMODB_LOCK_SORT_KEY, $DYNAMODB_LOCK_TABLE, $DYNAMODB_LOCK_OWNER). '
        'The command runs in a process group of its own; like flock, the lock is held until every '
        'process of that group has exited, but for at most --grace seconds after the command itself '
        'exited (processes that leave the group, with setsid or a double fork, are not tracked). '
        'If the lock is lost while it runs (taken over, force-released or deleted, or not renewed for half the '
        'lease), the command\'s process group gets SIGTERM, then SIGKILL after --kill-after seconds, '
        f'and the exit code is {supervisor.EXIT_LOCK_LOST}. SIGINT, SIGTERM and SIGHUP are forwarded to '
        'the process group.')
    run_command.add_argument('key', metavar='KEY', help='partition key of the lock')
    run_command.add_argument('--sort-key', metavar='SORT_KEY', default=DynamoDBLockClient._DEFAULT_SORT_KEY_VALUE,
                             help='sort key of the lock (default: %(default)s)')
    run_command.add_argument('--wait', type=non_negative_seconds, metavar='SECONDS', default=0.0,
                             help='how long to wait for a lock held by someone else (default: 0, one '
                                  f'attempt); exit code {supervisor.EXIT_NOT_ACQUIRED} when it is not '
                                  'acquired in time. A lock left by a crashed holder is taken over after '
                                  'its lease, so wait longer than the lease to recover from crashes')
    run_command.add_argument('--grace', type=non_negative_seconds, metavar='SECONDS', default=DEFAULT_RUN_GRACE,
                             help='once the command has exited, how long the other processes of its process '
                                  'group (background jobs it started) may keep running, the lock still held '
                                  '(like flock, held while any of them lives); those still running then get '
                                  'SIGTERM, then SIGKILL after --kill-after, and a line on stderr says so '
                                  '(default: %(default)s)')
    run_command.add_argument('--kill-after', type=non_negative_seconds, metavar='SECONDS', default=None,
                             help='seconds between SIGTERM and SIGKILL when processes are stopped (the lock '
                                  'was lost, or --grace ran out) (default: a quarter of the lease)')
    run_command.add_argument('--lease', dest='lease_duration', type=run_lease, metavar='SECONDS',
                             default=30.0, help='lease duration: a crashed holder\'s lock is taken over '
                                                'after it; heartbeats every sixth of it (default: %(default)s; '
                                                f'at least {MIN_RUN_LEASE_SECONDS:g})')
    run_command.add_argument('--owner-name', metavar='NAME', default=None,
                             help='owner name written in the lock (default: host name and a random id)')
    run_command.set_defaults(handler=cmd_run, command_argv=None)
    # argparse cannot describe "everything after --": say it in the usage line.
    run_command.usage = run_command.format_usage().replace('usage: ', '', 1).rstrip() + ' -- COMMAND [ARGS...]'


def cmd_run(args: argparse.Namespace, console: Console) -> int:
    """Run a command while holding the lock (see :mod:`python_dynamodb_lock._cli.supervisor`)."""
    command = args.command_argv
    if not command:
        raise CliError('run needs a command after "--": dynamodb-lock run KEY [options] -- COMMAND [ARGS...]',
                       EXIT_USAGE)
    if not hasattr(os, 'killpg'):
        raise CliError('run needs POSIX process groups and signals; it does not run on this platform')
    lease = args.lease_duration
    heartbeat = lease / 6
    safe_period = lease / 2
    kill_after = lease / 4 if args.kill_after is None else args.kill_after
    if args.kill_after is not None and kill_after >= lease - safe_period:
        console.err(f'{PROG}: warning: --kill-after {kill_after:g} is not shorter than the {lease - safe_period:g}s '
                    'between the lock being reported in danger and another process being able to take it over; '
                    'the command may still run when the lock is gone')
    # One call must not hang longer than the safe period leaves for a renewal to be retried
    # (see "Timeouts and retries" in the documentation).
    timeout = max(0.25, min(CONNECT_TIMEOUT_SECONDS, (safe_period - heartbeat) / 5))
    config = command_config(make_session(args), timeout, timeout, force_retries=True)
    settings: Dict[str, Any] = {
        'heartbeat_period': datetime.timedelta(seconds=heartbeat),
        'safe_period': datetime.timedelta(seconds=safe_period),
        'lease_duration': datetime.timedelta(seconds=lease),
    }
    if args.owner_name is not None:
        settings['owner_name'] = args.owner_name
    lock_client = make_lock_client(args, make_resource(args, config), **settings)
    try:
        return supervisor.run_locked(lock_client, supervisor.RunSettings(
            key=args.lock_key, key_text=args.key, sort_key=args.sort_key, table_name=table_name_of(args),
            command=command, wait=args.wait, grace=args.grace, kill_after=kill_after,
            retry_period=min(1.0, heartbeat), lease=lease, safe_period=safe_period,
        ), lambda line: console.err(f'{PROG}: error: {line}'),
            warn=lambda line: console.err(f'{PROG}: warning: {line}'))
    finally:
        lock_client.close()
