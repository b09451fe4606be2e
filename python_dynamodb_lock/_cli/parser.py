"""The ``dynamodb-lock`` argument parser, built from the commands' own subparsers.

Commands (see ``dynamodb-lock --help`` and docs/cli.rst), one module each in ``commands/``:

* ``create-table``  create the lock table (TTL enabled), optionally tolerating an existing one;
* ``list``          every lock row in the table, as a readable table or JSON;
* ``show``          one lock row;
* ``release``       force-release one lock, only if its row still carries the version that was read;
* ``run``           run a command while holding a lock (the supervisor: ``supervisor.py``);
* ``demo``          run contending worker processes on an embedded engine (see ``_demo``).

Usage errors are one line, like every other error (no usage block); ``--version`` prints the
version.
"""
from __future__ import annotations

import argparse
from typing import List, NoReturn, Optional, Sequence
import sys

from .._version import __version__
from . import supervisor
from .commands import COMMANDS, demo
from .connection import add_connection_options
from .console import EXIT_BROKEN_PIPE, EXIT_FAILURE, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, PROG, CliError

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
        """As argparse's, with unknown arguments pointing at the help of the command they were given to.

        An unknown option before the command (``--tabel t list``, or ``--endpoint URL list``,
        since options before the command take no abbreviations) is named as such, not reported
        as its value being an invalid command."""
        argv = list(sys.argv[1:] if args is None else args)
        try:
            parsed, extras = self.parse_known_args(argv, namespace)
        except CliError as error:
            commands = next((action.choices for action in self._actions
                             if isinstance(action, argparse._SubParsersAction)), None) or {}
            for index, token in enumerate(argv):
                if token in commands or token == '--':
                    break
                if token.startswith('-') and token.split('=', 1)[0] not in self._option_string_actions:
                    value = argv[index + 1:index + 2]
                    shown = ' '.join([token, *(value if value and not value[0].startswith('-') else [])])
                    raise CliError(f'unrecognized arguments: {shown} (see: {self.prog} --help)', EXIT_USAGE) from error
            raise
        if extras:
            command = getattr(parsed, 'command', None)
            where = f'{self.prog} {command}' if command else self.prog
            raise CliError(f'unrecognized arguments: {" ".join(extras)} (see: {where} --help)', EXIT_USAGE)
        return parsed


class VersionRequested(Exception):
    """``--version`` was given: ``run`` prints the version on its own stdout and returns 0."""


class _VersionAction(argparse.Action):
    """Like argparse's ``version`` action, but printing through ``run``'s console."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS,
                 default: object = argparse.SUPPRESS, help: Optional[str] = None) -> None:
        super().__init__(option_strings=option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: object, option_string: Optional[str] = None) -> None:
        raise VersionRequested()


def version_text() -> str:
    """What ``--version`` prints: ``dynamodb-lock <version>``."""
    return f'{PROG} {__version__}'



#: The exit codes, as the top-level --help lists them (docs/cli.rst has the same table).
EXIT_CODES_HELP = (
    f'Exit codes: {EXIT_OK} success; {EXIT_FAILURE} operational failure (not found, changed meanwhile, '
    f'missing table, no credentials, endpoint unreachable); {EXIT_USAGE} usage error; '
    f'{supervisor.EXIT_NOT_ACQUIRED} run: lock held by someone else for all of --wait; '
    f'{supervisor.EXIT_LOCK_LOST} run: lock lost while the command ran; '
    f'{supervisor.EXIT_CANNOT_EXECUTE} run: command cannot be executed; '
    f'{supervisor.EXIT_COMMAND_NOT_FOUND} run: command not found; '
    f'{EXIT_INTERRUPTED} interrupted; {EXIT_BROKEN_PIPE} standard output closed early (| head). '
    'Otherwise run exits with the exit code of its command (128+N when signal N killed it, or stopped '
    'run while it waited for the lock).')


def build_parser() -> argparse.ArgumentParser:
    """The complete ``dynamodb-lock`` argument parser: the top-level options, then each command's
    subparser, which its module adds (``register``) with the connection and table options."""
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
    add_connection_options(parser, on_subcommand=False, demo_table_name=demo.DEMO_TABLE_NAME)
    commands = parser.add_subparsers(dest='command', metavar='COMMAND', parser_class=_ArgumentParser)
    commands.required = True

    def add_command(name: str, help_text: str, description: str) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=help_text, description=description)
        add_connection_options(sub, on_subcommand=True, demo_table_name=demo.DEMO_TABLE_NAME)
        return sub

    for command in COMMANDS:
        command.register(add_command)
    return parser


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
