"""The entry point of ``dynamodb-lock``: parse, check, run the command, turn every expected
failure into one line on stderr and its exit code."""
from __future__ import annotations

import errno
import os
import sys
from typing import Optional, Sequence, TextIO

from botocore.exceptions import BotoCoreError, ClientError

from .._model.errors import Reason
from ..python_dynamodb_lock import DynamoDBLockError
from .checks import check_arguments, check_endpoint_url, endpoint_error
from .console import EXIT_BROKEN_PIPE, EXIT_FAILURE, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, PROG, CliError, Console
from .console import library_logging, logger
from .failures import explain_failure, explain_layout_mismatch
from .parser import VersionRequested, build_parser, parse_arguments, version_text


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
                raise endpoint_error(args.endpoint_url, '--endpoint-url', str(reason)) from None
        check_arguments(args)
    except CliError as error:
        console.err(f'{PROG}: error: {error.message}')
        return error.exit_code
    except VersionRequested:
        console.out(version_text())
        return EXIT_OK
    except SystemExit as exit_request:  # --help
        sys.stdout.flush()   # where argparse printed it: a closed stdout is reported like any other
        code = exit_request.code
        return code if isinstance(code, int) else (EXIT_OK if code is None else EXIT_USAGE)
    try:
        with library_logging(args.verbose, console.stderr):
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
