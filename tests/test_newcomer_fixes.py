"""What a new user met where the pages and the code disagreed (issue 30): import paths the pages
use, the command line's one-line errors and ``--json`` fields, the words of two messages, and
what the multi-lock's ``release()`` returns.
"""
from __future__ import annotations

import datetime
import logging
import pathlib
import re
import subprocess
import sys
from typing import Any, List

import pytest

from python_dynamodb_lock._core.shared import SharedHolder
from python_dynamodb_lock.python_dynamodb_lock import BaseDynamoDBLock, DynamoDBLockError
from python_dynamodb_lock.testing import LockTable, SystemClock
from test_multi_keys import acquire_locks

REPO_ROOT = pathlib.Path(__file__).resolve().parent.parent
DOCS = REPO_ROOT / 'docs'
seconds = datetime.timedelta
LOGGER = 'python_dynamodb_lock.python_dynamodb_lock'


# --- import paths ----------------------------------------------------------------------------

def test_reason_is_importable_where_the_pages_import_the_error() -> None:
    from python_dynamodb_lock import Reason
    from python_dynamodb_lock.python_dynamodb_lock import Reason as published_path

    assert published_path is Reason
    namespace: dict = {}
    exec('from python_dynamodb_lock.python_dynamodb_lock import *', namespace)
    assert 'Reason' not in namespace     # the star import gives what the published module's gave


def test_max_shared_holders_is_importable_where_the_page_says() -> None:
    import python_dynamodb_lock
    from python_dynamodb_lock._core import shared

    assert python_dynamodb_lock.MAX_SHARED_HOLDERS == shared.MAX_SHARED_HOLDERS == 1000
    assert 'MAX_SHARED_HOLDERS' in python_dynamodb_lock.__all__
    page = (DOCS / 'shared_locks.rst').read_text()
    assert '``python_dynamodb_lock.MAX_SHARED_HOLDERS``' in page


def test_errors_page_lists_every_code_and_reason() -> None:
    from python_dynamodb_lock import Reason

    page = (DOCS / 'errors.rst').read_text()
    table = page[page.index('code                   meaning'):page.index('``code`` keeps the published codes')]
    listed = set(re.findall(r'^``([A-Z_]+)``', table, re.MULTILINE))
    codes = {value for name, value in vars(DynamoDBLockError).items() if name.isupper() and isinstance(value, str)}
    assert listed == codes
    reasons = {value for name, value in vars(Reason).items() if name.isupper()}
    paragraph = page[page.index('``error.reason``'):page.index('Act on ``reason``')]
    assert reasons <= set(re.findall(r'``([A-Z_]+)``', paragraph))
    assert 'from python_dynamodb_lock.python_dynamodb_lock import\nDynamoDBLockError, Reason' in paragraph


# --- the command line ---------------------------------------------------------------------------

ARGUMENT_ERRORS = [
    (['run', 'nightly-report', '--lease', '1e9', '--', 'true'],
     'dynamodb-lock: error: argument --lease: must be at most 315360000 seconds (3650 days), got 1e9'),
    (['run', 'k', '--wait', 'soon', '--', 'true'], "dynamodb-lock: error: argument --wait: not a number: 'soon'"),
    (['run', 'k', 'true'], 'dynamodb-lock: error: unrecognized arguments: true (see: dynamodb-lock run --help)'),
    (['list', '--bogus'], 'dynamodb-lock: error: unrecognized arguments: --bogus (see: dynamodb-lock list --help)'),
    (['--table', 't', 'list', '--region-typo', 'x'],
     'dynamodb-lock: error: unrecognized arguments: --region-typo x (see: dynamodb-lock list --help)'),
    # An unknown option before the command, with a value: named as such, not its value as an
    # invalid command (options before the command take no abbreviations).
    (['--tabel', 't', 'list'], 'dynamodb-lock: error: unrecognized arguments: --tabel t (see: dynamodb-lock --help)'),
    (['--endpoint', 'http://127.0.0.1:9', 'show', 'k'],
     'dynamodb-lock: error: unrecognized arguments: --endpoint http://127.0.0.1:9 (see: dynamodb-lock --help)'),
    (['show'], 'dynamodb-lock: error: the following arguments are required: KEY (see: dynamodb-lock show --help)'),
    ([], 'dynamodb-lock: error: the following arguments are required: COMMAND (see: dynamodb-lock --help)'),
    (['frobnicate'], "dynamodb-lock: error: argument COMMAND: invalid choice: 'frobnicate'"),
    (['create-table', '--billing-mode', 'FREE'], "dynamodb-lock: error: argument --billing-mode: invalid choice"),
    (['list', '--expiry-period', 'soon'], 'dynamodb-lock: error: argument --expiry-period: '),
]


@pytest.mark.parametrize('argv, line', ARGUMENT_ERRORS,
                         ids=[' '.join(argv) or 'nothing' for argv, _ in ARGUMENT_ERRORS])
def test_argument_errors_are_one_line(argv: List[str], line: str, capsys: pytest.CaptureFixture[str],
                                      aws_env: None) -> None:
    from python_dynamodb_lock.__main__ import main

    capsys.readouterr()
    assert main(['--region', 'us-east-1', *argv]) == 2
    captured = capsys.readouterr()
    assert captured.out == ''
    assert captured.err.count('\n') == 1 and captured.err.startswith(line), captured.err
    assert 'usage:' not in captured.err


def test_the_documented_lease_error_is_all_that_python_m_prints() -> None:
    """cli.rst's example, as a new user runs it."""
    page = (DOCS / 'cli.rst').read_text()
    example = page[page.index('$ dynamodb-lock run nightly-report --lease 1e9'):]
    promised = example.splitlines()[1].strip()
    completed = subprocess.run([sys.executable, '-m', 'python_dynamodb_lock', '--region', 'us-east-1', 'run',
                                'nightly-report', '--lease', '1e9', '--', './make-report.sh'],
                               cwd=REPO_ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert completed.returncode == 2
    assert completed.stderr.splitlines() == [promised]


def test_the_json_fields_the_page_lists_are_the_fields_given() -> None:
    from python_dynamodb_lock._cli.render import lock_record

    lock = BaseDynamoDBLock('k', '-', 'reader-1', 30.0, 'v1', 2_000_000_000, {}, fencing_token=7)
    lock.shared_holders = (SharedHolder('h1', 'reader-1', 'v1', 30.0),)
    record = lock_record(lock, now=1_999_999_000.0, expiry_period=3600.0)
    page = (DOCS / 'cli.rst').read_text()
    paragraph = page[page.index('``--json``\n    Print a JSON array'):]
    paragraph = paragraph[:paragraph.index('\n\n')]
    listed = set(re.findall(r'``([a-z_]+)``', paragraph))
    given = set(record) | set(record['shared_holders'][0])
    assert listed == given


# --- the words of two messages --------------------------------------------------------------

@pytest.mark.parametrize('keep_rows, words', [
    (True, 'was lost: force-released by someone else'),
    (False, 'was lost: its row was deleted by someone else'),
], ids=['row-kept', 'row-deleted'])
def test_a_force_released_holder_says_so(engine: LockTable, clients: Any, caplog: pytest.LogCaptureFixture,
                                         keep_rows: bool, words: str) -> None:
    holder = clients.make(owner_name='holder', keep_released_rows=keep_rows)
    operator = clients.make(owner_name='operator', keep_released_rows=keep_rows)
    lock = holder.acquire_lock('forced')
    assert operator.force_release_lock(operator.get_lock('forced'))
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        holder.send_heartbeats()
    assert lock.status == 'INVALID' and lock.loss_reason == 'ROW_GONE'
    lines = [record.getMessage() for record in caplog.records if 'forced|-' in record.getMessage()]
    assert any(f'Lock forced|- {words}' in line for line in lines), lines
    assert not any('stolen by nobody' in line for line in lines), lines


def test_an_exclusive_wait_on_shared_holders_names_them_all(local_engine: LockTable, local_clients: Any) -> None:
    ours = local_clients.make(owner_name='reader-ours')
    theirs = local_clients.make(owner_name='reader-theirs')
    theirs.acquire_lock('read-mostly', shared=True)
    ours.acquire_lock('read-mostly', shared=True)
    theirs.acquire_lock('read-mostly', shared=True)     # the last shared writer of the row
    with pytest.raises(DynamoDBLockError) as timed_out:
        ours.acquire_lock('read-mostly', retry_timeout=seconds(0))
    message = timed_out.value.message
    assert timed_out.value.code == DynamoDBLockError.ACQUIRE_TIMEOUT
    assert 'held by 3 shared holders: reader-ours, reader-theirs (2 times)' in message, message
    assert '1 of them this client (reader-ours)' in message and 'release it first' in message


# --- the multi-lock's release() -----------------------------------------------------------------

def test_a_multi_locks_release_says_whether_it_released_every_key(local_engine: LockTable,
                                                                   local_clients: Any) -> None:
    client = local_clients.make(owner_name='sets', clock=SystemClock())
    multi = acquire_locks(client, ['r1', 'r2'], retry_timeout=seconds(0))
    assert multi.release() is True
    assert multi.release() is False                 # nothing left to release
    other = acquire_locks(client, ['r3', 'r4'], retry_timeout=seconds(0))
    local_engine.steal_row('r4')                    # one key lost meanwhile
    assert other.release(best_effort=True) is False
    assert local_engine.read_held_row('r3') is None
