"""What every command talks through: its streams, its expected failures, its exit codes and its log.

Exit codes (the ``EXIT_*`` here and in :mod:`.supervisor`; the top-level ``--help`` lists them all):
0 success, 1 operational failure (lock not found, lock changed meanwhile, missing table, no
credentials, endpoint unreachable, ...), 2 usage error (bad arguments, a malformed endpoint URL,
``release`` without ``--force``, no terminal to confirm on), 75/76/126/127 and the command's own
code for ``run``, 130 interrupted, 141 standard output closed early (``| head``).

Expected failures are reported as one ``dynamodb-lock: error: ...`` line on stderr, never as a
traceback.
"""
from __future__ import annotations

import contextlib
import logging
import signal
from dataclasses import dataclass
from typing import Iterator, TextIO

PROG = 'dynamodb-lock'

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
#: Standard output was closed before everything was written (``dynamodb-lock list | head``):
#: what a shell reports for a program killed by SIGPIPE.
EXIT_BROKEN_PIPE = 128 + int(getattr(signal, 'SIGPIPE', 13))

#: The logger users configure for everything the package logs (the clients log under its child
#: ``python_dynamodb_lock.python_dynamodb_lock``, :data:`python_dynamodb_lock._common.observe.LOGGER_NAME`).
PACKAGE_LOGGER_NAME = 'python_dynamodb_lock'
#: The command line's own records (a force-release, a failure's traceback at DEBUG).
LOGGER_NAME = f'{PACKAGE_LOGGER_NAME}._cli'
logger = logging.getLogger(LOGGER_NAME)


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


@contextlib.contextmanager
def library_logging(verbosity: int, stream: TextIO) -> Iterator[None]:
    """Route the package's log records to ``stream`` for the duration of one command.

    Quiet by default (errors only: the command reports what happened itself); ``-v`` shows
    INFO, ``-vv`` DEBUG. The logger is restored afterwards, so ``run`` can be called in-process.
    """
    package_logger = logging.getLogger(PACKAGE_LOGGER_NAME)
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
