"""The ``dynamodb-lock`` command line: inspect, create and clean up a lock table.

Commands (see ``dynamodb-lock --help`` and docs/cli.rst):

* ``create-table``  create the lock table (TTL enabled), optionally tolerating an existing one;
* ``list``          every lock row in the table, as a readable table or JSON;
* ``show``          one lock row;
* ``release``       force-release one lock, only if its row still carries the version that was read;
* ``demo``          run contending worker processes on an embedded engine (see :mod:`._demo`).

Exit codes (``EXIT_*`` here and in :mod:`._supervise`; the top-level ``--help`` lists them all):
0 success, 1 operational failure (lock not found, lock changed meanwhile, missing table, no
credentials, endpoint unreachable, ...), 2 usage error (bad arguments, a malformed endpoint URL,
``release`` without ``--force``, no terminal to confirm on), 75/76/126/127 and the command's own
code for ``run``, 130 interrupted, 141 standard output closed early (``| head``).
``--version`` prints the version.

Expected failures are reported as one ``dynamodb-lock: error: ...`` line on stderr, never as a
traceback. Connection settings come from the options, else from the standard AWS environment
variables and configuration files, which boto3 reads by itself.
"""
from __future__ import annotations

import argparse
import base64
import binascii
import contextlib
import datetime
import decimal
import ipaddress
import json
import logging
import errno
import os
import re
import signal
import sys
import time
import urllib.parse
from dataclasses import dataclass
from typing import Any, Dict, Iterator, List, Mapping, NoReturn, Optional, Sequence, TextIO, Tuple

import boto3
from botocore.config import Config
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

from . import _demo, _supervise
from . import _validation as validation
from ._version import __version__
from ._errors import Reason
from ._tables import KEY_TYPE_NAMES, check_global_table, check_tags, describe_key_schema
from ._tables import _key_schema as key_schema_of
from .python_dynamodb_lock import BaseDynamoDBLock, DynamoDBLockClient, DynamoDBLockError

logger = logging.getLogger(__name__)

PROG = 'dynamodb-lock'

#: ``run --grace``: how long the rest of the command's process group may outlive it, by default.
DEFAULT_RUN_GRACE = 60.0

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
#: Standard output was closed before everything was written (``dynamodb-lock list | head``):
#: what a shell reports for a program killed by SIGPIPE.
EXIT_BROKEN_PIPE = 128 + int(getattr(signal, 'SIGPIPE', 13))

#: Every command's botocore settings, so that an unreachable or silent endpoint fails within
#: seconds whatever botocore's default retry mode (legacy mode makes 10 attempts). The retries
#: give way to ones the user configured (AWS_MAX_ATTEMPTS, AWS_RETRY_MODE, max_attempts or
#: retry_mode in the profile); ``run`` uses its own timeouts, derived from its lease.
_CONNECT_TIMEOUT_SECONDS = 2.0
_READ_TIMEOUT_SECONDS = 3.0
_MAX_ATTEMPTS = 2


class CliError(Exception):
    """An expected failure: reported as one line on stderr, then exit with ``exit_code``."""

    def __init__(self, message: str, exit_code: int = EXIT_FAILURE) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code


@dataclass
class Console:
    """The streams a command talks through (swappable for tests)."""

    stdin: TextIO
    stdout: TextIO
    stderr: TextIO

    def out(self, text: str = '') -> None:
        self.stdout.write(text + '\n')
        self.stdout.flush()

    def err(self, text: str) -> None:
        self.stderr.write(text + '\n')
        self.stderr.flush()


# --------------------------------------------------------------------------------------------
# Argument parsing
# --------------------------------------------------------------------------------------------

class _ArgumentParser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors raise instead of exiting, so ``main`` returns 2.

    A usage error is one line, like every other error of the command (no usage block): a
    message about one option's value names the option; any other (an unknown option, a missing
    argument) says where the usage is.
    """

    def error(self, message: str) -> NoReturn:
        if not message.startswith('argument '):
            message += f' (see: {self.prog} --help)'
        raise CliError(message, EXIT_USAGE)

    def parse_args(self, args: Optional[Sequence[str]] = None,  # type: ignore[override]
                   namespace: Optional[argparse.Namespace] = None) -> argparse.Namespace:
        """As argparse's, with unknown arguments pointing at the help of the command they were given to."""
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            command = getattr(parsed, 'command', None)
            where = f'{self.prog} {command}' if command else self.prog
            raise CliError(f'unrecognized arguments: {" ".join(extras)} (see: {where} --help)', EXIT_USAGE)
        return parsed


class _VersionRequested(Exception):
    """``--version`` was given: ``run`` prints the version on its own stdout and returns 0."""


class _VersionAction(argparse.Action):
    """Like argparse's ``version`` action, but printing through ``run``'s console."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS,
                 default: Any = argparse.SUPPRESS, help: Optional[str] = None) -> None:
        super().__init__(option_strings=option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: Optional[str] = None) -> None:
        raise _VersionRequested()


def version_text() -> str:
    """What ``--version`` prints: ``dynamodb-lock <version>``."""
    return f'{PROG} {__version__}'


# A host name as botocore accepts it: dot-separated labels of letters, digits and hyphens.
_HOST_LABEL = re.compile(r'(?!-)[A-Za-z0-9-]{1,63}(?<!-)')


def check_endpoint_url(url: str) -> str:
    """Return ``url`` if it is a usable DynamoDB endpoint URL, else raise ValueError saying why.

    Usable means ``http://`` or ``https://``, a host (a DNS name, an IPv4 address or an IPv6
    address in brackets), an optional port from 1 to 65535 and an optional path; no spaces or
    control characters, user information, query or fragment. This is what botocore and urllib3
    can connect to; several of the rest (a bad port, another scheme) they refuse only when the
    first request is sent, with a traceback.
    """
    if not isinstance(url, str) or not url.strip():
        raise ValueError('it is empty')
    for character in url:
        if character.isspace() or not character.isprintable():
            raise ValueError(f'it contains {character!r}: spaces and control characters are not allowed')
    if '://' not in url:
        raise ValueError('it has no scheme: write it as http://HOST[:PORT] or https://HOST[:PORT]')
    try:
        parts = urllib.parse.urlsplit(url)
        host = parts.hostname
    except ValueError as error:
        raise ValueError(f'it cannot be parsed as a URL ({error})') from None
    if parts.scheme.lower() not in ('http', 'https'):
        raise ValueError(f'its scheme is {parts.scheme!r}: only http and https are supported')
    if '@' in parts.netloc:
        raise ValueError('it contains user information (user@host): credentials belong in the AWS '
                         'configuration, not in the URL')
    if parts.query or parts.fragment or url.endswith(('?', '#')):
        raise ValueError('it has a query or a fragment (?... or #...), which an endpoint cannot have')
    if not host:
        raise ValueError('it has no host')
    after_host = parts.netloc.rpartition(']')[2]
    port_text = after_host.rpartition(':')[2] if ':' in after_host else None
    try:
        port = parts.port
    except ValueError:
        port = -1
    if port_text is not None and not (port_text.isascii() and port_text.isdigit()):
        port = -1   # Python reads '+80' or '٨٠' as a port; urllib3, which sends the requests, does not
    if port is not None and not 1 <= port <= 65535:
        raise ValueError(f'its port {parts.netloc.rpartition(":")[2]!r} is not a number from 1 to 65535')
    if parts.netloc.startswith('['):
        try:
            ipaddress.IPv6Address(urllib.parse.unquote(host))
        except ValueError:
            raise ValueError(f'{host!r} in brackets is not an IPv6 address') from None
        return url
    name = host[:-1] if host.endswith('.') else host
    if len(name) > 253 or not all(_HOST_LABEL.fullmatch(label) for label in name.split('.')):
        raise ValueError(f'its host {host!r} is not a valid host name: use letters, digits, hyphens and '
                         'dots only (the ASCII form of an international name), or an IP address')
    return url


def _endpoint_error(url: str, source: str, reason: str) -> CliError:
    return CliError(f'invalid endpoint URL {url!r} ({source}): {reason}', EXIT_USAGE)


def sort_key_name_of(args: argparse.Namespace) -> Optional[str]:
    """The sort key attribute of the command's table: None with ``--no-sort-key`` (or
    ``--sort-key-name ''``), a table whose key is the partition key alone."""
    if getattr(args, 'no_sort_key', False) or args.sort_key_name == '':
        return None
    name: str = args.sort_key_name
    return name


def partition_key_type_of(args: argparse.Namespace) -> str:
    kind: str = getattr(args, 'partition_key_type', None) or 'S'
    return kind


def lock_key_of(args: argparse.Namespace) -> Any:
    """The command's KEY as the lock client takes it (see :func:`partition_key_of`)."""
    return partition_key_of(args.key, partition_key_type_of(args), 'KEY')


def partition_key_of(text: str, kind: str, name: str) -> Any:
    """A partition key given as ``text`` (``name``: KEY, or the option that gave it), as the
    lock client takes it: the text itself for a string partition key, a ``Decimal`` for a number
    key (``--partition-key-type N``), the bytes that the text encodes in base64 for a binary key
    (``--partition-key-type B``).

    :raises ValueError: naming ``name``, for text that is not a key of that type.
    """
    if kind == 'S':
        return validation.require_key(name, text, validation.MAX_PARTITION_KEY_BYTES)
    if kind == 'N':
        try:
            number = decimal.Decimal(text.strip())
        except (decimal.InvalidOperation, ValueError):
            raise ValueError(f'{name} {text!r} is not a number (--partition-key-type N)') from None
        if not number.is_finite():
            raise ValueError(f'{name} {text!r} is not a finite number (--partition-key-type N)')
        validation.require_storable(name, number)
        return number
    try:
        value = base64.b64decode(text.strip(), validate=True)
    except (binascii.Error, ValueError):
        raise ValueError(f'{name} {text!r} is not base64 (--partition-key-type B takes the key\'s bytes in '
                         'base64)') from None
    if not 0 < len(value) <= validation.MAX_PARTITION_KEY_BYTES:
        raise ValueError(f'{name} must encode 1 to {validation.MAX_PARTITION_KEY_BYTES} bytes, got {len(value)}')
    return value


#: Options whose empty value would quietly mean something else (an unset shell variable,
#: ``--table "$LOCK_TABLE"``): the default table, the default region or profile, any version.
#: What each would mean instead, for the message.
_NOT_EMPTY = {
    'table': ('--table', f'the default table {DynamoDBLockClient._DEFAULT_TABLE_NAME}'),
    'region': ('--region', 'the region of the AWS environment or configuration'),
    'profile': ('--profile', 'the default profile'),
    'expected_version': ('--version', 'no version check'),
    'owner_name': ('--owner-name', 'the default owner name'),
    'partition_key': ('--partition-key', 'every lock of the table'),
}


def check_not_empty(args: argparse.Namespace) -> None:
    """Refuse an empty (or blank) value of an option whose absence means a default: an unset
    variable in ``--table "$LOCK_TABLE"`` must not make the command act on the default table."""
    for dest, (option, instead) in _NOT_EMPTY.items():
        value = getattr(args, dest, None)
        if value is not None and not value.strip():
            raise CliError(f'{option} is empty ({value!r}; an unset shell variable?): give a value, or leave '
                           f'the option out for {instead}', EXIT_USAGE)


def check_arguments(args: argparse.Namespace) -> None:
    """Refuse, as a usage error naming the option, names and keys the library would refuse.

    Runs before any call. The lock client checks the same things, with messages naming its
    Python arguments; here the messages name the options of the command.
    """
    check_not_empty(args)
    sort_key_name = sort_key_name_of(args)
    names = {
        '--partition-key-name': args.partition_key_name,
        '--sort-key-name': sort_key_name,
        '--ttl-attribute-name': args.ttl_attribute_name,
    }
    if sort_key_name is None:
        del names['--sort-key-name']
    lock_attributes = (DynamoDBLockClient._COL_OWNER_NAME, DynamoDBLockClient._COL_LEASE_DURATION,
                       DynamoDBLockClient._COL_RECORD_VERSION_NUMBER)
    try:
        for option, value in names.items():
            validation.require_attribute_name(option, value)
            if value in lock_attributes:
                raise ValueError(f'{option} {value!r} is the name of one of the lock\'s own attributes '
                                 f'({", ".join(lock_attributes)})')
        if len(set(names.values())) != len(names):
            raise ValueError(', '.join(names) + ' must differ, got '
                             + ', '.join(f'{option} {value!r}' for option, value in names.items()))
        if getattr(args, 'partition_key', None) is not None:
            args.listed_key = partition_key_of(args.partition_key, partition_key_type_of(args), '--partition-key')
        if getattr(args, 'key', None) is not None:
            args.lock_key = lock_key_of(args)
            validation.require_key('SORT_KEY', args.sort_key, validation.MAX_SORT_KEY_BYTES)
            if sort_key_name is None and args.sort_key != DynamoDBLockClient._DEFAULT_SORT_KEY_VALUE:
                raise ValueError(f'the table has no sort key (--no-sort-key): leave SORT_KEY out, got '
                                 f'{args.sort_key!r}')
    except (TypeError, ValueError) as error:
        raise CliError(str(error), EXIT_USAGE) from None


def _tag(text: str) -> Tuple[str, str]:
    """``--tag KEY=VALUE``: the key (before the first ``=``) and the value (may be empty)."""
    key, equals, value = text.partition('=')
    if not equals:
        raise argparse.ArgumentTypeError(f'expected KEY=VALUE, got {text!r}')
    return key, value


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f'not an integer: {text!r}') from None
    if value < 1:
        raise argparse.ArgumentTypeError(f'must be at least 1, got {value}')
    return value


#: The longest duration an option takes, in seconds: the library's limit on every duration
#: (3650 days), so that no option is refused later in the library's terms.
MAX_SECONDS = validation.MAX_DURATION.total_seconds()
_MAX_SECONDS_TEXT = f'{MAX_SECONDS:.0f} seconds (3650 days)'


def _seconds(text: str, minimum: float, inclusive: bool) -> float:
    """``text`` as a number of seconds from ``minimum`` to MAX_SECONDS; argparse names the
    option in front of the message ("argument --lease: ...")."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f'not a number: {text!r}') from None
    if not (value >= minimum if inclusive else value > minimum):
        if minimum:
            wanted = f'at least {minimum:g}'
        else:
            wanted = 'zero or more' if inclusive else 'a positive number'
        raise argparse.ArgumentTypeError(f'must be {wanted}, got {text}')
    if not value <= MAX_SECONDS:
        raise argparse.ArgumentTypeError(f'must be at most {_MAX_SECONDS_TEXT}, got {text}')
    return value


def _positive_float(text: str) -> float:
    return _seconds(text, 0.0, inclusive=False)


def _non_negative_float(text: str) -> float:
    return _seconds(text, 0.0, inclusive=True)


#: The shortest ``run --lease``: its heartbeats come every sixth of it.
MIN_RUN_LEASE_SECONDS = 1.0


def _run_lease(text: str) -> float:
    return _seconds(text, MIN_RUN_LEASE_SECONDS, inclusive=True)


def _add_connection_options(parser: argparse.ArgumentParser, *, on_subcommand: bool) -> None:
    """The AWS and table options, accepted both before and after the command name.

    On a subcommand their defaults are suppressed, so a value given before the command name is
    not overwritten by the subcommand's default.
    """
    def default(value: Any) -> Any:
        return argparse.SUPPRESS if on_subcommand else value

    group = parser.add_argument_group(
        'connection and table',
        'Unset options fall back to the standard AWS environment variables '
        '(AWS_PROFILE, AWS_REGION / AWS_DEFAULT_REGION, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, '
        'AWS_SESSION_TOKEN, AWS_ENDPOINT_URL_DYNAMODB, ...) and ~/.aws/config, read by boto3.')
    group.add_argument(
        '--table', metavar='NAME', default=default(None),
        help=f'lock table name (default: {DynamoDBLockClient._DEFAULT_TABLE_NAME}; '
             f'for demo against --endpoint-url: {_demo.DEMO_TABLE_NAME})')
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


#: The exit codes, as the top-level --help lists them (docs/cli.rst has the same table).
EXIT_CODES_HELP = (
    f'Exit codes: {EXIT_OK} success; {EXIT_FAILURE} operational failure (not found, changed meanwhile, '
    f'missing table, no credentials, endpoint unreachable); {EXIT_USAGE} usage error; '
    f'{_supervise.EXIT_NOT_ACQUIRED} run: lock held by someone else for all of --wait; '
    f'{_supervise.EXIT_LOCK_LOST} run: lock lost while the command ran; '
    f'{_supervise.EXIT_CANNOT_EXECUTE} run: command cannot be executed; '
    f'{_supervise.EXIT_COMMAND_NOT_FOUND} run: command not found; '
    f'{EXIT_INTERRUPTED} interrupted; {EXIT_BROKEN_PIPE} standard output closed early (| head). '
    'Otherwise run exits with the exit code of its command (128+N when signal N killed it, or stopped '
    'run while it waited for the lock).')


def build_parser() -> argparse.ArgumentParser:
    """The complete ``dynamodb-lock`` argument parser."""
    # No abbreviated options before the command: the top-level parser also reads the options
    # meant for the command, and would take ``list --partition-key`` for an ambiguous abbreviation
    # of its --partition-key-name/--partition-key-type. (The commands still take abbreviations.)
    parser = _ArgumentParser(
        allow_abbrev=False,
        prog=PROG,
        description='Inspect, create and clean up a python_dynamodb_lock table, '
                    'or watch the lock at work in a self-contained demo.',
        epilog=EXIT_CODES_HELP + ' Start with: dynamodb-lock demo',
    )
    parser.add_argument('--version', action=_VersionAction,
                        help=f'print "{version_text()}" and exit')
    _add_connection_options(parser, on_subcommand=False)
    commands = parser.add_subparsers(dest='command', metavar='COMMAND', parser_class=_ArgumentParser)
    commands.required = True

    def add_command(name: str, help_text: str, description: str) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=help_text, description=description)
        _add_connection_options(sub, on_subcommand=True)
        return sub

    create = add_command(
        'create-table', 'create the lock table (TTL enabled)',
        'Create the lock table with a string partition key and a string sort key (or with '
        '--partition-key-type and --no-sort-key, another layout), wait until it '
        'is ACTIVE and enable TTL on the TTL attribute, so rows of dead holders are removed by '
        'DynamoDB eventually.')
    create.add_argument('--billing-mode', choices=('PROVISIONED', 'PAY_PER_REQUEST'),
                        default='PROVISIONED', help='(default: %(default)s)')
    create.add_argument('--read-capacity', type=_positive_int, metavar='N', default=None,
                        help='provisioned read capacity units (PROVISIONED only; default: '
                             f'{DynamoDBLockClient._DEFAULT_READ_CAPACITY})')
    create.add_argument('--write-capacity', type=_positive_int, metavar='N', default=None,
                        help='provisioned write capacity units (PROVISIONED only; default: '
                             f'{DynamoDBLockClient._DEFAULT_WRITE_CAPACITY})')
    create.add_argument('--exist-ok', action='store_true',
                        help='succeed if the table already exists with the same key schema')
    create.add_argument('--tag', dest='tags', action='append', type=_tag, metavar='KEY=VALUE', default=None,
                        help='tag the new table (repeat for more tags, at most 50; the key is what comes before '
                             'the first "="); an existing table accepted with --exist-ok keeps its tags')
    create.add_argument('--allow-global-table', action='store_true',
                        help='with --exist-ok, accept an existing global table (replicas in other regions): '
                             'locks are then exclusive only among clients of one region')
    create.set_defaults(handler=cmd_create_table)

    estimate_help = (
        'the expiry_period (seconds) the lock holders use, if you know it (the library default '
        'is 3600). The table stores only expiry_time = last write + expiry_period, so with this '
        'value the time since the last acquire/heartbeat can be estimated (to about 1 s, plus '
        'clock skew between the holder and this machine). Without it no age is shown.')
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
    listing.add_argument('--expiry-period', type=_non_negative_float, metavar='SECONDS',
                         default=None, help=estimate_help)
    listing.set_defaults(handler=cmd_list)

    show = add_command('show', 'show one lock',
                       'Show one lock row, read with a consistent read.')
    show.add_argument('key', metavar='KEY', help='partition key of the lock')
    show.add_argument('sort_key', metavar='SORT_KEY', nargs='?',
                      default=DynamoDBLockClient._DEFAULT_SORT_KEY_VALUE,
                      help='sort key of the lock (default: %(default)s)')
    show.add_argument('--json', action='store_true', help='print a JSON object')
    show.add_argument('--expiry-period', type=_non_negative_float, metavar='SECONDS',
                      default=None, help=estimate_help)
    show.set_defaults(handler=cmd_show)

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
        f'and the exit code is {_supervise.EXIT_LOCK_LOST}. SIGINT, SIGTERM and SIGHUP are forwarded to '
        'the process group.')
    run_command.add_argument('key', metavar='KEY', help='partition key of the lock')
    run_command.add_argument('--sort-key', metavar='SORT_KEY', default=DynamoDBLockClient._DEFAULT_SORT_KEY_VALUE,
                             help='sort key of the lock (default: %(default)s)')
    run_command.add_argument('--wait', type=_non_negative_float, metavar='SECONDS', default=0.0,
                             help='how long to wait for a lock held by someone else (default: 0, one '
                                  f'attempt); exit code {_supervise.EXIT_NOT_ACQUIRED} when it is not '
                                  'acquired in time. A lock left by a crashed holder is taken over after '
                                  'its lease, so wait longer than the lease to recover from crashes')
    run_command.add_argument('--grace', type=_non_negative_float, metavar='SECONDS', default=DEFAULT_RUN_GRACE,
                             help='once the command has exited, how long the other processes of its process '
                                  'group (background jobs it started) may keep running, the lock still held '
                                  '(like flock, held while any of them lives); those still running then get '
                                  'SIGTERM, then SIGKILL after --kill-after, and a line on stderr says so '
                                  '(default: %(default)s)')
    run_command.add_argument('--kill-after', type=_non_negative_float, metavar='SECONDS', default=None,
                             help='seconds between SIGTERM and SIGKILL when processes are stopped (the lock '
                                  'was lost, or --grace ran out) (default: a quarter of the lease)')
    run_command.add_argument('--lease', dest='lease_duration', type=_run_lease, metavar='SECONDS',
                             default=30.0, help='lease duration: a crashed holder\'s lock is taken over '
                                                'after it; heartbeats every sixth of it (default: %(default)s; '
                                                f'at least {MIN_RUN_LEASE_SECONDS:g})')
    run_command.add_argument('--owner-name', metavar='NAME', default=None,
                             help='owner name written in the lock (default: host name and a random id)')
    run_command.set_defaults(handler=cmd_run, command_argv=None)
    # argparse cannot describe "everything after --": say it in the usage line.
    run_command.usage = run_command.format_usage().replace('usage: ', '', 1).rstrip() + ' -- COMMAND [ARGS...]'

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
    demo.add_argument('--workers', type=_positive_int, default=4, metavar='N',
                      help='worker processes (default: %(default)s; at least 2)')
    demo.add_argument('--keys', type=_positive_int, default=2, metavar='N',
                      help='lock keys contended for (default: %(default)s)')
    demo.add_argument('--duration', type=_positive_float, default=12.0, metavar='SECONDS',
                      help='how long the workers keep acquiring (default: %(default)s)')
    demo.add_argument('--lease', dest='lease_duration', type=_positive_float, default=2.0,
                      metavar='SECONDS', help='lease_duration of the workers (default: %(default)s)')
    demo.add_argument('--engine', choices=('auto', 'dynamodb-local', 'moto'), default='auto',
                      help='embedded engine when no --endpoint-url is given (default: %(default)s)')
    demo.add_argument('--quiet', '-q', action='store_true',
                      help='print only the verdict, not the progress')
    demo.set_defaults(handler=cmd_demo)
    return parser


# --------------------------------------------------------------------------------------------
# Connections and error translation
# --------------------------------------------------------------------------------------------

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


def command_config(session: boto3.session.Session, connect_timeout: float = _CONNECT_TIMEOUT_SECONDS,
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
            raise _endpoint_error(resolved, 'from the AWS environment or configuration', str(error)) from None
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


# --------------------------------------------------------------------------------------------
# Formatting
# --------------------------------------------------------------------------------------------

def format_seconds(seconds: float) -> str:
    """Compact duration: '0.5s', '42s', '59m58s', '3h05m', '2d04h' (sign kept)."""
    sign = '-' if seconds < 0 else ''
    value = abs(seconds)
    if value < 10 and value != int(value):
        return f'{sign}{value:.1f}s'
    whole = int(round(value))
    if whole < 60:
        return f'{sign}{whole}s'
    minutes, secs = divmod(whole, 60)
    if minutes < 60:
        return f'{sign}{minutes}m{secs:02d}s'
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f'{sign}{hours}h{minutes:02d}m'
    days, hours = divmod(hours, 24)
    return f'{sign}{days}d{hours:02d}h'


def _until_expiry_text(seconds_until_expiry: Optional[float]) -> str:
    if seconds_until_expiry is None:
        return 'unknown'
    if seconds_until_expiry < 0:
        return f'expired {format_seconds(-seconds_until_expiry)} ago'
    return format_seconds(seconds_until_expiry)


def _utc_iso(epoch: Optional[float]) -> Optional[str]:
    if epoch is None:
        return None
    try:
        moment = datetime.datetime.fromtimestamp(float(epoch), tz=datetime.timezone.utc)
    except (OverflowError, OSError, ValueError):
        return None
    return moment.strftime('%Y-%m-%dT%H:%M:%SZ')


def to_jsonable(value: Any) -> Any:
    """DynamoDB values (Decimal, set, Binary, bytes) as plain JSON values."""
    if isinstance(value, decimal.Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted((to_jsonable(v) for v in value), key=repr)
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(bytes(value)).decode('ascii')
    inner = getattr(value, 'value', None)  # boto3.dynamodb.types.Binary
    if isinstance(inner, (bytes, bytearray)):
        return base64.b64encode(bytes(inner)).decode('ascii')
    return value


def _number(value: Any) -> Optional[float]:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def lock_record(lock: BaseDynamoDBLock, now: float,
                expiry_period: Optional[float] = None) -> Dict[str, Any]:
    """What is known about a stored lock, as a JSON-ready dict.

    ``seconds_until_expiry`` is the stored TTL epoch minus ``now`` (this machine's clock).
    ``estimated_seconds_since_last_write`` is present only when the holders' ``expiry_period``
    is supplied, since the table does not store when it was last written.
    """
    expiry_time = _number(lock.expiry_time)
    until_expiry = None if expiry_time is None else round(expiry_time - now, 3)
    record: Dict[str, Any] = {
        'partition_key': to_jsonable(lock.partition_key),
        'sort_key': lock.sort_key,
        'owner_name': lock.owner_name,
        'lease_duration': to_jsonable(lock.lease_duration),
        'record_version_number': lock.record_version_number,
        'expiry_time': to_jsonable(lock.expiry_time),
        'expiry_time_utc': _utc_iso(expiry_time),
        'seconds_until_expiry': until_expiry,
        'additional_attributes': to_jsonable(lock.additional_attributes or {}),
        'fencing_token': lock.fencing_token,
    }
    if lock.shared_holders:     # a shared (read) lock: who holds it
        record['shared_holders'] = [
            {'holder_id': holder.holder_id, 'owner_name': holder.owner_name,
             'record_version_number': holder.record_version_number,
             'lease_duration': to_jsonable(holder.lease_duration)} for holder in lock.shared_holders]
    if expiry_period is not None:
        # expiry_time is stored in whole seconds, so the estimate is good to a second at best.
        record['estimated_seconds_since_last_write'] = (
            None if until_expiry is None else round(expiry_period - until_expiry))
    return record


def _render_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> List[str]:
    widths = [len(h) for h in headers]
    for row in rows:
        for index, cell in enumerate(row):
            widths[index] = max(widths[index], len(cell))
    lines = []
    for row in [list(headers), *rows]:
        lines.append('  '.join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip())
    return lines


def _describe_lock_lines(record: Dict[str, Any], table: str) -> List[str]:
    until = record['seconds_until_expiry']
    lease = _number(record['lease_duration'])
    lines = [
        f'Lock in table {table!r}:',
        f'  partition key:     {record["partition_key"]}',
        f'  sort key:          {record["sort_key"]}',
        f'  owner:             {record["owner_name"]}',
        f'  record version:    {record["record_version_number"]}',
        f'  lease duration:    '
        f'{format_seconds(lease) if lease is not None else record["lease_duration"]}'
        ' (a waiter takes over once this version stays unchanged that long)',
        f'  TTL expiry:        {record["expiry_time_utc"] or record["expiry_time"]} '
        f'({_until_expiry_text(until)}; DynamoDB deletes the row some time after)',
    ]
    if 'estimated_seconds_since_last_write' in record:
        age = record['estimated_seconds_since_last_write']
        lines.append(f'  last write (est.): '
                     f'{"unknown" if age is None else format_seconds(age) + " ago"}'
                     ' (from TTL expiry and the given --expiry-period)')
    if record.get('fencing_token') is not None:
        lines.append(f'  fencing token:     {record["fencing_token"]}')
    holders = record.get('shared_holders') or []
    if holders:
        lines.append(f'  shared holders:    {len(holders)} (each renews its own entry; see "Shared locks")')
        for holder in holders:
            lines.append(f'    {holder["owner_name"]}: entry version {holder["record_version_number"]}, '
                         f'lease {format_seconds(_number(holder["lease_duration"]) or 0)}')
    if record['additional_attributes']:
        lines.append('  additional attributes: '
                     + json.dumps(record['additional_attributes'], sort_keys=True))
    return lines


# --------------------------------------------------------------------------------------------
# Commands
# --------------------------------------------------------------------------------------------

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


def cmd_list(args: argparse.Namespace, console: Console) -> int:
    """Print every lock row of the table (or of one partition key), sorted by key."""
    table = table_name_of(args)
    lock_client = make_lock_client(args, make_resource(args))
    try:
        locks = list(lock_client.list_locks(getattr(args, 'listed_key', None)))
    finally:
        lock_client.close()
    now = _now()
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
        lease = _number(record['lease_duration'])
        row = [
            str(record['partition_key']),
            str(record['sort_key']),
            str(record['owner_name']),
            format_seconds(lease) if lease is not None else str(record['lease_duration']),
            _until_expiry_text(record['seconds_until_expiry']),
            str(record['record_version_number']),
        ]
        if args.expiry_period is not None:
            age = record['estimated_seconds_since_last_write']
            row.append('unknown' if age is None else f'~{format_seconds(age)} ago')
        if shared:
            row.append(str(len(record.get('shared_holders') or [])) if record.get('shared_holders') else '-')
        rows.append(row)
    for line in _render_table(headers, rows):
        console.out(line)
    console.out(f'{len(records)} lock(s) in {where}.')
    return EXIT_OK


def _get_lock_or_fail(args: argparse.Namespace, lock_client: DynamoDBLockClient) -> BaseDynamoDBLock:
    lock = lock_client.get_lock(args.lock_key, args.sort_key)
    if lock is None:
        raise CliError(f'no lock {args.key!r} / {args.sort_key!r} in table {table_name_of(args)!r}')
    if not lock.record_version_number:
        raise CliError(f'the row {args.key!r} / {args.sort_key!r} in table {table_name_of(args)!r} is '
                       'not a lock (it has no record_version_number)')
    return lock


def cmd_show(args: argparse.Namespace, console: Console) -> int:
    """Print one lock row; exit 1 when there is none."""
    lock_client = make_lock_client(args, make_resource(args))
    try:
        lock = _get_lock_or_fail(args, lock_client)
    finally:
        lock_client.close()
    record = lock_record(lock, _now(), args.expiry_period)
    if args.json:
        console.out(json.dumps(record, indent=2, sort_keys=True))
    else:
        for line in _describe_lock_lines(record, table_name_of(args)):
            console.out(line)
    return EXIT_OK


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
        lock = _get_lock_or_fail(args, lock_client)
        if args.expected_version is not None and lock.record_version_number != args.expected_version:
            raise CliError(
                f'lock {args.key!r} / {args.sort_key!r} changed meanwhile: it now carries '
                f'version {lock.record_version_number} (owner {lock.owner_name}), not '
                f'{args.expected_version}; nothing was changed')
        for line in _describe_lock_lines(lock_record(lock, _now()), table):
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
        table_name=args.table or _demo.DEMO_TABLE_NAME,
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


def cmd_run(args: argparse.Namespace, console: Console) -> int:
    """Run a command while holding the lock (see :mod:`python_dynamodb_lock._supervise`)."""
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
    timeout = max(0.25, min(_CONNECT_TIMEOUT_SECONDS, (safe_period - heartbeat) / 5))
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
        return _supervise.run_locked(lock_client, _supervise.RunSettings(
            key=args.lock_key, key_text=args.key, sort_key=args.sort_key, table_name=table_name_of(args),
            command=command, wait=args.wait, grace=args.grace, kill_after=kill_after,
            retry_period=min(1.0, heartbeat),
        ), lambda line: console.err(f'{PROG}: error: {line}'),
            warn=lambda line: console.err(f'{PROG}: warning: {line}'))
    finally:
        lock_client.close()


def _now() -> float:
    return time.time()


# --------------------------------------------------------------------------------------------
# Entry point
# --------------------------------------------------------------------------------------------

@contextlib.contextmanager
def _library_logging(verbosity: int, stream: TextIO) -> Iterator[None]:
    """Route the package's log records to ``stream`` for the duration of one command.

    Quiet by default (errors only: the command reports what happened itself); ``-v`` shows
    INFO, ``-vv`` DEBUG. The logger is restored afterwards, so ``run`` can be called in-process.
    """
    package_logger = logging.getLogger('python_dynamodb_lock')
    level = logging.ERROR if verbosity <= 0 else logging.INFO if verbosity == 1 else logging.DEBUG
    handler = logging.StreamHandler(stream)
    handler.setLevel(level)
    handler.setFormatter(logging.Formatter(f'{PROG}: %(levelname)s %(name)s: %(message)s'))
    previous_level = package_logger.level
    if verbosity > 0:
        package_logger.setLevel(level)
    package_logger.addHandler(handler)
    try:
        yield
    finally:
        package_logger.removeHandler(handler)
        package_logger.setLevel(previous_level)


def parse_arguments(parser: argparse.ArgumentParser, argv: List[str]) -> argparse.Namespace:
    """Parse ``argv``; for ``run``, everything after the first ``--`` is the command to run."""
    if '--' in argv:
        split = argv.index('--')
        if 'run' in argv[:split]:
            args = parser.parse_args(argv[:split])
            if args.command == 'run':
                args.command_argv = argv[split + 1:]
                return args
    return parser.parse_args(argv)


def run(argv: Optional[Sequence[str]] = None, *, stdin: Optional[TextIO] = None,
        stdout: Optional[TextIO] = None, stderr: Optional[TextIO] = None) -> int:
    """Parse ``argv`` (default: ``sys.argv[1:]``), run the command, return the exit code.

    Expected failures print ``dynamodb-lock: error: ...`` on stderr and return 1 (operational)
    or 2 (usage); unexpected exceptions propagate (they are bugs). An output stream closed by
    its reader (``dynamodb-lock list | head``) ends the command quietly with 141, as SIGPIPE
    ends other programs.
    """
    console = Console(stdin or sys.stdin, stdout or sys.stdout, stderr or sys.stderr)
    try:
        return _run(argv, console)
    except OSError as error:
        if not isinstance(error, BrokenPipeError) and error.errno != errno.EPIPE:
            raise
        _discard_closed_output(console.stdout, console.stderr)
        return EXIT_BROKEN_PIPE


def _discard_closed_output(*streams: TextIO) -> None:
    """Point the descriptor of each stream whose reader has gone at /dev/null, so that what
    is still buffered does not fail again (with a message) when the interpreter exits."""
    for stream in streams:
        try:
            stream.flush()
        except OSError:
            try:
                null = os.open(os.devnull, os.O_WRONLY)
                os.dup2(null, stream.fileno())
                os.close(null)
            except (OSError, ValueError, AttributeError):   # not a file (a test's StringIO)
                pass


def _run(argv: Optional[Sequence[str]], console: Console) -> int:
    parser = build_parser()
    try:
        args = parse_arguments(parser, list(sys.argv[1:] if argv is None else argv))
        if args.endpoint_url is not None:
            try:
                check_endpoint_url(args.endpoint_url)
            except ValueError as reason:
                raise _endpoint_error(args.endpoint_url, '--endpoint-url', str(reason)) from None
        check_arguments(args)
    except CliError as error:
        console.err(f'{PROG}: error: {error.message}')
        return error.exit_code
    except _VersionRequested:
        console.out(version_text())
        return EXIT_OK
    except SystemExit as exit_request:  # --help
        sys.stdout.flush()   # where argparse printed it: a closed stdout is reported like any other
        code = exit_request.code
        return code if isinstance(code, int) else (EXIT_OK if code is None else EXIT_USAGE)
    try:
        with _library_logging(args.verbose, console.stderr):
            return int(args.handler(args, console))
    except CliError as error:
        console.err(f'{PROG}: error: {error.message}')
        return error.exit_code
    except KeyboardInterrupt:
        console.err(f'{PROG}: interrupted')
        return EXIT_INTERRUPTED
    except (DynamoDBLockError, BotoCoreError, ClientError) as error:
        if getattr(error, 'reason', None) == Reason.WRONG_KEY_SCHEMA:
            explanation: Optional[str] = explain_layout_mismatch(args)
        else:
            explanation = explain_failure(error, args)
        if explanation is None:
            raise
        logger.debug('command failed', exc_info=True)
        console.err(f'{PROG}: error: {explanation}')
        return EXIT_FAILURE
