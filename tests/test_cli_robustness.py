"""The ``dynamodb-lock`` command line where an operator's day goes wrong: an empty option from an
unset shell variable, a reader that closes the pipe early (``| head``), absurd durations, a table
of another key layout, an endpoint that refuses or never answers. Each gets one clear line and
the documented exit code, never a traceback, a hang, or an action on something unintended.

The unreachable-endpoint tests run the real program in subprocesses with botocore's default
retry mode set to ``legacy`` (10 attempts, the default of the botocore that ``.[asyncio]`` can
pull in) and only a generous timeout: they prove that no command hangs for tens of seconds.
"""
from __future__ import annotations

import contextlib
import io
import os
import re
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Set, Tuple

import pytest

from python_dynamodb_lock import __version__
from python_dynamodb_lock._cli import arguments, connection, console, parser, run, supervisor

REPO_ROOT = Path(__file__).resolve().parent.parent
CLI_DOC = REPO_ROOT / 'docs' / 'cli.rst'
ENDPOINT = ('--endpoint-url', 'http://127.0.0.1:9', '--region', 'us-east-1')

pytestmark = pytest.mark.usefixtures('aws_env')

Result = Tuple[int, str, str]


def run_cli(*argv: str) -> Result:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out):   # argparse prints --help there
        code = run(list(argv), stdin=io.StringIO(''), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def subprocess_env() -> Dict[str, str]:
    env = dict(os.environ)
    env['PYTHONPATH'] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get('PYTHONPATH', '')]))
    return env


def assert_one_line(err: str) -> None:
    assert 'Traceback' not in err, err
    assert err.count('\n') == 1, err


# --------------------------------------------------------------------------------------------
# Empty values (an unset variable) are refused, not read as "the default"
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize('command', [
    ['list'], ['show', 'k'], ['release', 'k', '--force', '--yes'], ['create-table'], ['run', 'k', '--', 'true'],
    ['demo'],
], ids=lambda argv: argv[0])
@pytest.mark.parametrize('option', ['--table', '--region', '--profile'])
@pytest.mark.parametrize('value', ['', '  '], ids=['empty', 'blank'])
def test_an_empty_name_is_a_usage_error_not_the_default(command: List[str], option: str, value: str) -> None:
    """``release --force --yes --table "$LOCK_TABLE"`` with the variable unset must not release
    a lock of the default table (nor of the default region's or profile's)."""
    code, out, err = run_cli('--endpoint-url', 'http://127.0.0.1:9', *command[:1], option, value, *command[1:])
    assert code == console.EXIT_USAGE, err
    assert f'{option} is empty' in err and 'unset shell variable' in err
    assert out == ''
    assert_one_line(err)


@pytest.mark.parametrize('argv, option', [
    (['release', 'k', '--force', '--yes', '--version', ''], '--version'),
    (['run', 'k', '--owner-name', '', '--', 'true'], '--owner-name'),
])
def test_other_empty_values_are_usage_errors(argv: List[str], option: str) -> None:
    code, _, err = run_cli(*ENDPOINT, *argv)
    assert code == console.EXIT_USAGE and f'{option} is empty' in err, err


# --------------------------------------------------------------------------------------------
# A reader that goes away (| head)
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize('argv, codes', [
    (['list'], {141}), (['list', '--json'], {141}), (['show', 'busy'], {141}), (['show', 'busy', '--json'], {141}),
    (['--help'], {0, 141}), (['run', '--help'], {0, 141}),   # argparse itself ignores a failed write of the help
], ids=lambda value: ' '.join(value) if isinstance(value, list) else '')
def test_a_closed_stdout_is_a_quiet_exit(local_engine: Any, argv: List[str], codes: Set[int]) -> None:
    """``dynamodb-lock show K | head -1``: the reader has gone before the output is written. The
    command stops quietly with 141 (as SIGPIPE stops other programs), without a traceback or
    Python's "Exception ignored ... BrokenPipeError" at exit."""
    local_engine.resource.Table(local_engine.table_name).put_item(Item={
        'lock_key': 'busy', 'sort_key': '-', 'owner_name': 'someone', 'lease_duration': 30,
        'record_version_number': 'v1', 'expiry_time': 4102444800})
    read_end, write_end = os.pipe()
    os.close(read_end)              # the reader is gone before anything is written
    try:
        completed = subprocess.run(
            [sys.executable, '-m', 'python_dynamodb_lock', '--endpoint-url', local_engine.endpoint_url,
             '--region', 'us-east-1', '--table', local_engine.table_name, *argv],
            stdout=write_end, stderr=subprocess.PIPE, text=True, env=subprocess_env(), timeout=60)
    finally:
        os.close(write_end)
    assert completed.returncode in codes, completed.stderr
    assert completed.stderr == ''


def test_a_reader_that_stops_early_is_a_quiet_exit(local_engine: Any) -> None:
    """The same through a real ``| head -1``, on a listing longer than one line."""
    table = local_engine.resource.Table(local_engine.table_name)
    for index in range(50):
        table.put_item(Item={'lock_key': f'job-{index:03d}', 'sort_key': '-', 'owner_name': 'x' * 200,
                             'lease_duration': 30, 'record_version_number': f'v{index}',
                             'expiry_time': 4102444800})
    script = (f'{sys.executable} -m python_dynamodb_lock --endpoint-url {local_engine.endpoint_url} --region '
              f'us-east-1 --table {local_engine.table_name} list --json | head -c 1 >/dev/null; '
              'echo "exit=${PIPESTATUS[0]}" >&2')
    completed = subprocess.run(['bash', '-c', script], capture_output=True, text=True, env=subprocess_env(),
                               timeout=60)
    assert 'Traceback' not in completed.stderr and 'BrokenPipe' not in completed.stderr, completed.stderr
    # 0 when the output fitted in the pipe before head went away; 141 when it did not.
    assert re.fullmatch(r'exit=(0|141)\n', completed.stderr), completed.stderr


# --------------------------------------------------------------------------------------------
# Help, exit codes and version, against the code and docs/cli.rst
# --------------------------------------------------------------------------------------------

def exit_codes() -> Dict[str, int]:
    """Every ``EXIT_*`` constant of the command line and of ``run``."""
    return {f'{module.__name__}.{name}': value for module in (console, supervisor)
            for name, value in vars(module).items() if name.startswith('EXIT_') and isinstance(value, int)}


def test_the_broken_pipe_code_is_what_a_shell_reports_for_sigpipe() -> None:
    assert console.EXIT_BROKEN_PIPE == 141


def test_the_exit_codes_are_the_known_ones() -> None:
    """A new exit code must be added to the help and the docs (the tests below), and here."""
    assert sorted(set(exit_codes().values())) == [0, 1, 2, 75, 76, 126, 127, 130, 141]


def test_the_top_level_help_lists_every_exit_code() -> None:
    code, out, _ = run_cli('--help')
    assert code == 0
    epilog = ' '.join(out[out.index('Exit codes:'):].split())
    for name, value in exit_codes().items():
        assert re.search(rf'(?<![\d+]){value} ', epilog), f'{name} = {value} is not in the help: {epilog}'
    assert "exit code of its command" in epilog


def test_the_docs_list_every_exit_code() -> None:
    text = CLI_DOC.read_text()
    table = text[text.index('Exit codes and errors'):]
    table = table[:table.index('\n\n', table.index('==== ====', table.index('code meaning')) + 10)]
    documented = {int(code) for code in re.findall(r'^(\d+) ', table, re.MULTILINE)}
    assert documented == set(exit_codes().values())


def test_run_help_shows_the_command_after_the_separator() -> None:
    code, out, _ = run_cli('run', '--help')
    assert code == 0
    usage = out[:out.index('\n\n')]
    assert usage.startswith('usage: dynamodb-lock run')
    assert usage.rstrip().endswith('KEY -- COMMAND [ARGS...]'), usage
    for option in ('--grace', '--kill-after'):
        assert option in out


def test_the_docs_show_the_version_the_package_reports() -> None:
    lines = CLI_DOC.read_text().splitlines()
    index = next(i for i, line in enumerate(lines) if line.strip() == '$ dynamodb-lock --version')
    code, out, _ = run_cli('--version')
    assert code == 0 and out.strip() == f'dynamodb-lock {__version__}'
    assert lines[index + 1].strip() == out.strip()


# --------------------------------------------------------------------------------------------
# Absurd durations, in the CLI's own terms
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize('argv, option', [
    (['run', 'k', '--lease', '1e9', '--', 'true'], '--lease'),
    (['run', 'k', '--lease', 'inf', '--', 'true'], '--lease'),
    (['run', 'k', '--lease', '0.001', '--', 'true'], '--lease'),
    (['run', 'k', '--wait', '1e300', '--', 'true'], '--wait'),
    (['run', 'k', '--grace', '1e12', '--', 'true'], '--grace'),
    (['run', 'k', '--kill-after', 'nan', '--', 'true'], '--kill-after'),
    (['list', '--expiry-period', '1e400'], '--expiry-period'),
    (['demo', '--duration', '1e10'], '--duration'),
], ids=lambda value: value if isinstance(value, str) else ' '.join(value[1:4]))
def test_absurd_durations_are_refused_naming_the_option(argv: List[str], option: str) -> None:
    code, _, err = run_cli(*ENDPOINT, *argv)
    assert code == console.EXIT_USAGE, err
    first = err.splitlines()[0]
    assert first.startswith(f'dynamodb-lock: error: argument {option}'), err
    for python_word in ('safe_period', 'heartbeat_period', 'lease_duration', 'timedelta', 'Traceback'):
        assert python_word not in err


def test_the_longest_accepted_lease_is_accepted_by_the_library() -> None:
    """The bound is the library's: what the option accepts, the lock client does not refuse."""
    args = parser.build_parser().parse_args([*ENDPOINT, 'run', 'k', '--lease', str(arguments.MAX_SECONDS)])
    assert args.lease_duration == arguments.MAX_SECONDS
    import python_dynamodb_lock._model.validation as _validation
    assert arguments.MAX_SECONDS == _validation.MAX_DURATION.total_seconds()


# --------------------------------------------------------------------------------------------
# A table of another key layout: the options to pass, not a Python API
# --------------------------------------------------------------------------------------------

@pytest.fixture
def other_tables(local_engine: Any) -> Iterator[Callable[..., Any]]:
    from python_dynamodb_lock.testing import lock_table

    opened: List[Any] = []

    def make(**layout: Any) -> Any:
        context = lock_table(local_engine.endpoint_url, **layout)
        opened.append(context)
        return context.__enter__()

    yield make
    for context in reversed(opened):
        context.__exit__(None, None, None)


@pytest.mark.parametrize('layout, key, advice', [
    ({'sort_key_name': None}, 'k', ['--no-sort-key']),
    ({'partition_key_type': 'N'}, '42', ['--partition-key-type', 'N']),
    ({'sort_key_name': None, 'partition_key_type': 'B'}, 'AP8=', ['--partition-key-type', 'B', '--no-sort-key']),
], ids=['no sort key', 'number key', 'binary key, no sort key'])
@pytest.mark.parametrize('command', [['show'], ['release', '--force', '--yes'], ['run', '--', 'true']],
                         ids=lambda argv: argv[0])
def test_a_layout_mismatch_names_the_options_that_fit(other_tables: Callable[..., Any], layout: Dict[str, Any],
                                                      key: str, advice: List[str], command: List[str]) -> None:
    table = other_tables(**layout)
    where = ['--endpoint-url', table.endpoint_url, '--region', 'us-east-1', '--table', table.table_name]
    argv = [*where, command[0], key, *command[1:]]
    code, _, err = run_cli(*argv)
    assert code == 1, err
    assert_one_line(err)
    assert 'repeat with ' + ' '.join(advice) in err, err
    for python_api in ('for_table', 'DynamoDBLockClient', 'sort_key_name=', 'partition_key_type='):
        assert python_api not in err
    # The advice works: with those options the command reaches the table's rows.
    code, _, err = run_cli(*where, *advice, *argv[len(where):])
    assert code == (0 if command[0] == 'run' else 1), err
    assert 'repeat with' not in err


# --------------------------------------------------------------------------------------------
# Unreachable endpoints: every command gives up within seconds
# --------------------------------------------------------------------------------------------

#: Runs the command line as if botocore's default retry mode were legacy (10 attempts).
LEGACY_DEFAULT = '''
import sys
import botocore.configprovider as provider
provider.BOTOCORE_DEFAUT_SESSION_VARIABLES['retry_mode'] = ('retry_mode', 'AWS_RETRY_MODE', 'legacy', None)
from python_dynamodb_lock.__main__ import main
sys.exit(main())
'''

COMMANDS = [['list'], ['show', 'k'], ['create-table'], ['release', 'k', '--force', '--yes'],
            ['run', 'k', '--', 'true']]


def refused_port() -> int:
    with socket.socket() as placeholder:   # bound, then closed: nothing listens there
        placeholder.bind(('127.0.0.1', 0))
        port: int = placeholder.getsockname()[1]
    return port


@pytest.fixture
def black_hole() -> Iterator[int]:
    """A port that accepts connections (the kernel's backlog) and never answers."""
    with socket.socket() as listener:
        listener.bind(('127.0.0.1', 0))
        listener.listen(64)
        yield listener.getsockname()[1]


def run_all(port: int) -> List[Tuple[List[str], Optional[subprocess.CompletedProcess[str]]]]:
    """Every command against ``port`` at once (they mostly wait); None for one that did not end
    within 20 s."""
    started = []
    for command in COMMANDS:
        process = subprocess.Popen(
            [sys.executable, '-c', LEGACY_DEFAULT, '--endpoint-url', f'http://127.0.0.1:{port}',
             '--region', 'us-east-1', *command],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=subprocess_env())
        started.append((command, process))
    results: List[Tuple[List[str], Optional[subprocess.CompletedProcess[str]]]] = []
    for command, process in started:
        try:
            out, err = process.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate()
            results.append((command, None))
        else:
            results.append((command, subprocess.CompletedProcess(process.args, process.returncode, out, err)))
    return results


def assert_gave_up(results: List[Tuple[List[str], Optional[subprocess.CompletedProcess[str]]]], port: int,
                   words: str) -> None:
    hung = [command[0] for command, completed in results if completed is None]
    assert not hung, f'still trying after 20 s: {hung}'
    for command, completed in results:
        assert completed is not None
        assert completed.returncode == 1, (command, completed.stderr)
        assert completed.stderr.startswith(f'dynamodb-lock: error: cannot reach DynamoDB: {words}'), \
            (command, completed.stderr)
        assert str(port) in completed.stderr
        assert completed.stderr.count('\n') == 1 and 'Traceback' not in completed.stderr


def test_a_refused_port_fails_every_command_quickly() -> None:
    port = refused_port()
    assert_gave_up(run_all(port), port, 'Could not connect')


@pytest.mark.slow
def test_an_endpoint_that_never_answers_fails_every_command_quickly(black_hole: int) -> None:
    assert_gave_up(run_all(black_hole), black_hole, 'no answer in time')


def test_every_command_gets_short_timeouts_and_few_retries() -> None:
    args = parser.build_parser().parse_args([*ENDPOINT, 'list'])
    config = connection.make_resource(args).meta.client.meta.config
    assert config.connect_timeout <= 5 and config.read_timeout <= 5
    assert config.retries == {'mode': 'standard', 'total_max_attempts': 2}


@pytest.mark.parametrize('variable, value, retries', [
    ('AWS_MAX_ATTEMPTS', '5', {'total_max_attempts': 5}),
    ('AWS_RETRY_MODE', 'adaptive', {'mode': 'adaptive'}),
])
def test_retries_the_user_configured_are_kept(monkeypatch: pytest.MonkeyPatch, variable: str, value: str,
                                              retries: Dict[str, Any]) -> None:
    monkeypatch.setenv(variable, value)
    args = parser.build_parser().parse_args([*ENDPOINT, 'list'])
    config = connection.make_resource(args).meta.client.meta.config
    assert retries.items() <= config.retries.items()
    assert config.read_timeout <= 5     # the timeouts are the command's all the same


def test_retries_configured_in_the_profile_are_kept(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    config_file = tmp_path / 'config'
    config_file.write_text('[default]\nmax_attempts = 4\n')
    monkeypatch.setenv('AWS_CONFIG_FILE', str(config_file))
    args = parser.build_parser().parse_args([*ENDPOINT, 'list'])
    assert connection.make_resource(args).meta.client.meta.config.retries['total_max_attempts'] == 4
