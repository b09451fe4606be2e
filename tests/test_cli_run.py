"""``dynamodb-lock run KEY -- COMMAND``, end to end: real ``python -m python_dynamodb_lock``
processes running real commands, on DynamoDB Local.

The commands are small Python programs (``sys.executable -c ...``) that report what they see
through files in the test's temporary folder: their environment, that they started, that they
got a signal. Lock rows are read and stolen directly (``LockTable.read_item``, ``steal_row``).
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from datetime import timedelta
from pathlib import Path
from typing import Any, Dict, List, Optional

import pytest

from python_dynamodb_lock._cli.supervisor import EXIT_COMMAND_NOT_FOUND, EXIT_LOCK_LOST, EXIT_NOT_ACQUIRED

REPO_ROOT = Path(__file__).resolve().parent.parent

pytestmark = [pytest.mark.skipif(not hasattr(os, 'killpg'), reason='POSIX only'), pytest.mark.usefixtures('aws_env')]


def wait_for(predicate: Any, timeout: float = 30.0, what: str = 'condition') -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f'gave up waiting for {what}')
        time.sleep(0.02)


def catches(pid: int, signum: int) -> bool:
    """Whether process ``pid`` has installed a handler for ``signum`` (Linux: ``SigCgt`` in
    /proc; elsewhere assume so after the caller's own wait)."""
    try:
        with open(f'/proc/{pid}/status') as status:
            caught = next(line for line in status if line.startswith('SigCgt:'))
    except (OSError, StopIteration):
        return True
    return bool(int(caught.split()[1], 16) >> (signum - 1) & 1)


def python_command(source: str) -> List[str]:
    return [sys.executable, '-c', textwrap.dedent(source)]


class Runner:
    """Starts ``dynamodb-lock run`` processes on one table."""

    def __init__(self, engine: Any) -> None:
        self.engine = engine
        self.processes: List[subprocess.Popen[str]] = []

    def argv(self, key: str, command: List[str], *options: str) -> List[str]:
        return [sys.executable, '-m', 'python_dynamodb_lock', '--endpoint-url', self.engine.endpoint_url,
                '--region', 'us-east-1', '--table', self.engine.table_name, 'run', key, *options, '--', *command]

    def start(self, key: str, command: List[str], *options: str) -> 'subprocess.Popen[str]':
        env = dict(os.environ)
        env['PYTHONPATH'] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get('PYTHONPATH', '')]))
        process = subprocess.Popen(self.argv(key, command, *options), env=env, cwd=str(REPO_ROOT),
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.processes.append(process)
        return process

    def run(self, key: str, command: List[str], *options: str, timeout: float = 60.0) -> 'Finished':
        process = self.start(key, command, *options)
        return finish(process, timeout)

    def close(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.kill()
                process.wait()
            for stream in (process.stdout, process.stderr):
                if stream is not None:
                    stream.close()


class Finished:
    def __init__(self, code: int, out: str, err: str) -> None:
        self.code, self.out, self.err = code, out, err

    def __repr__(self) -> str:
        return f'<exit {self.code}: out={self.out!r} err={self.err!r}>'


def finish(process: 'subprocess.Popen[str]', timeout: float = 60.0) -> Finished:
    out, err = process.communicate(timeout=timeout)
    return Finished(process.returncode, out, err)


@pytest.fixture
def runner(local_engine: Any) -> Any:
    made = Runner(local_engine)
    yield made
    made.close()


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie (not yet reaped by its parent) counts as gone.
    try:
        with open(f'/proc/{pid}/stat') as stat:
            return stat.read().split(')')[-1].split()[0] != 'Z'
    except OSError:
        return True


def read_row(engine: Any, key: str) -> Optional[Dict[str, Any]]:
    return engine.read_item(key)


# --------------------------------------------------------------------------------------------
# The command runs with the lock held
# --------------------------------------------------------------------------------------------

def test_the_exit_code_of_the_command_is_passed_through(runner: Runner, local_engine: Any) -> None:
    finished = runner.run('job', python_command('import sys; sys.exit(7)'), '--lease', '10')
    assert finished.code == 7, finished
    assert finished.err == ''
    assert local_engine.read_held_row('job') is None     # released


def test_success_and_output_pass_through(runner: Runner, local_engine: Any) -> None:
    finished = runner.run('job', python_command('print("hello from the command")'), '--lease', '10')
    assert finished.code == 0, finished
    assert finished.out == 'hello from the command\n'


def test_the_command_sees_the_fencing_token_and_the_key_and_holds_the_lock(runner: Runner, local_engine: Any,
                                                                          tmp_path: Path) -> None:
    report = tmp_path / 'env.txt'
    command = python_command(f'''
        import os, time
        names = ['DYNAMODB_LOCK_FENCING_TOKEN', 'DYNAMODB_LOCK_KEY', 'DYNAMODB_LOCK_SORT_KEY',
                 'DYNAMODB_LOCK_TABLE', 'DYNAMODB_LOCK_OWNER']
        with open({str(report)!r} + '.tmp', 'w') as out:
            out.write('\\n'.join(os.environ.get(name, '<unset>') for name in names))
        os.rename({str(report)!r} + '.tmp', {str(report)!r})
        time.sleep(1.5)
    ''')
    process = runner.start('job', command, '--lease', '10', '--owner-name', 'cron-host-1')
    wait_for(report.exists, what='the command to write its environment')
    row = local_engine.read_held_row('job')
    assert row is not None and row['owner_name'] == 'cron-host-1'   # held while the command runs
    finished = finish(process)
    assert finished.code == 0, finished
    token, key, sort_key, table, owner = report.read_text().split('\n')
    assert int(token) == int(row['fencing_token'])
    assert (key, sort_key, table, owner) == ('job', '-', local_engine.table_name, 'cron-host-1')
    assert local_engine.read_held_row('job') is None


def test_the_lock_is_renewed_while_a_long_command_runs(runner: Runner, local_engine: Any, tmp_path: Path) -> None:
    """A command that runs for two leases keeps the lock: another acquirer, trying for one and a
    half leases, never gets it."""
    started = tmp_path / 'started'
    process = runner.start('long', python_command(f'''
        import time
        open({str(started)!r}, 'w').close()
        time.sleep(8)
    '''), '--lease', '4')
    wait_for(started.exists, what='the command to start')
    other = local_engine.lock_client(owner_name='other', heartbeat_period=timedelta(seconds=0.5),
                                     lease_duration=timedelta(seconds=4), safe_period=timedelta(seconds=2))
    with pytest.raises(Exception) as refused:
        other.acquire_lock('long', retry_period=timedelta(seconds=0.2), retry_timeout=timedelta(seconds=6))
    assert 'ACQUIRE_TIMEOUT' in str(refused.value)
    finished = finish(process)
    assert finished.code == 0, finished


# --------------------------------------------------------------------------------------------
# The rest of the command's process group (like flock: held while any of it lives)
# --------------------------------------------------------------------------------------------

def start_with_background_job(runner: Runner, key: str, tmp_path: Path, job: str, exit_code: int,
                              *options: str) -> 'tuple[subprocess.Popen[str], int, int]':
    """``run KEY -- sh -c 'JOB & exit N'``: the run, the shell's pid and the background job's
    pid, once the shell has exited (the job is then all that is left of the group)."""
    pids = tmp_path / f'{key}.pids'
    script = f'{job} & echo "$$ $!" > {pids}.tmp; mv {pids}.tmp {pids}; exit {exit_code}'
    process = runner.start(key, ['/bin/sh', '-c', script], *options)
    wait_for(pids.exists, what='the shell to start its background job')
    shell, job_pid = (int(pid) for pid in pids.read_text().split())
    wait_for(lambda: not pid_alive(shell), what='the shell to exit')
    return process, shell, job_pid


def test_the_lock_is_held_until_a_background_job_of_the_command_ends(runner: Runner, local_engine: Any,
                                                                     tmp_path: Path) -> None:
    """``run job -- sh -c 'sleep 3 & exit 0'``: the shell exits at once, ``sleep 3`` goes on in
    its process group, and the lock stays held until it ends (as flock's would)."""
    process, _, job = start_with_background_job(runner, 'job', tmp_path, 'sleep 3', 0, '--lease', '10')
    assert pid_alive(job)
    assert local_engine.read_held_row('job') is not None, 'released while the background job runs'
    assert process.poll() is None
    finished = finish(process)
    assert finished.code == 0, finished
    assert finished.err == ''              # nothing was stopped: the job ended on its own
    assert not pid_alive(job)
    assert local_engine.read_held_row('job') is None


def test_a_background_job_beyond_grace_is_terminated_and_reported(runner: Runner, local_engine: Any,
                                                                  tmp_path: Path) -> None:
    process, _, job = start_with_background_job(runner, 'straggler', tmp_path, 'sleep 60', 5,
                                                '--lease', '10', '--grace', '1')
    assert local_engine.read_held_row('straggler') is not None     # held during the grace period
    finished = finish(process, timeout=30)
    assert finished.code == 5, finished                           # the command's own exit code
    assert not pid_alive(job)
    assert finished.err == ("dynamodb-lock: warning: the command exited (exit code 5), but 1 process of its "
                            "process group still ran 1s later (--grace): sent SIGTERM, and it exited; releasing "
                            "lock 'straggler'\n")
    assert local_engine.read_held_row('straggler') is None


def test_a_background_job_ignoring_sigterm_is_killed_after_kill_after(runner: Runner, local_engine: Any,
                                                                      tmp_path: Path) -> None:
    process, _, job = start_with_background_job(runner, 'stubborn-job', tmp_path, '(trap "" TERM; exec sleep 60)',
                                                0, '--lease', '10', '--grace', '0.5', '--kill-after', '0.5')
    finished = finish(process, timeout=30)
    assert finished.code == 0, finished
    assert not pid_alive(job)
    assert 'sent SIGTERM, then SIGKILL after 0.5s (--kill-after)' in finished.err, finished
    assert local_engine.read_held_row('stubborn-job') is None


def test_a_lock_lost_while_a_background_job_runs_stops_it(runner: Runner, local_engine: Any,
                                                          tmp_path: Path) -> None:
    process, _, job = start_with_background_job(runner, 'lost-job', tmp_path, 'sleep 60', 0, '--lease', '3')
    local_engine.steal_row('lost-job')
    finished = finish(process, timeout=30)
    assert finished.code == EXIT_LOCK_LOST, finished
    assert 'the command had exited; sent SIGTERM, then SIGKILL, to the rest of its process group' in finished.err
    assert not pid_alive(job)


def test_a_signal_after_the_command_exited_reaches_its_background_job(runner: Runner, local_engine: Any,
                                                                     tmp_path: Path) -> None:
    process, _, job = start_with_background_job(runner, 'signalled-job', tmp_path, 'sleep 60', 0, '--lease', '10')
    process.send_signal(signal.SIGTERM)
    finished = finish(process, timeout=30)
    assert finished.code == 0, finished    # the command's; its background job ended on the forwarded signal
    assert finished.err == ''
    assert not pid_alive(job)
    assert local_engine.read_held_row('signalled-job') is None


# --------------------------------------------------------------------------------------------
# Waiting for the lock
# --------------------------------------------------------------------------------------------

def test_a_held_lock_is_not_acquired_without_waiting(runner: Runner, local_engine: Any, tmp_path: Path) -> None:
    holder = local_engine.lock_client(owner_name='the-holder')
    lock = holder.acquire_lock('busy')
    marker = tmp_path / 'ran'
    finished = runner.run('busy', python_command(f'open({str(marker)!r}, "w").close()'), '--wait', '0.5')
    assert finished.code == EXIT_NOT_ACQUIRED, finished
    assert not marker.exists()
    assert finished.err.count('\n') == 1 and 'the-holder' in finished.err and "'busy'" in finished.err
    assert 'Traceback' not in finished.err
    lock.release()


def test_the_command_waits_for_the_lock_and_runs_once_it_is_released(runner: Runner, local_engine: Any,
                                                                     tmp_path: Path) -> None:
    holder = local_engine.lock_client(owner_name='the-holder')
    lock = holder.acquire_lock('queue')
    log = tmp_path / 'log'
    process = runner.start('queue', python_command(f'''
        with open({str(log)!r}, 'a') as out:
            out.write('command ran\\n')
    '''), '--wait', '30', '--lease', '10')
    time.sleep(1.5)
    assert process.poll() is None and not log.exists()    # still waiting
    with open(log, 'a') as out:
        out.write('holder released\n')
    lock.release()
    finished = finish(process)
    assert finished.code == 0, finished
    assert log.read_text() == 'holder released\ncommand ran\n'


def test_two_runs_of_one_key_never_overlap(runner: Runner, local_engine: Any, tmp_path: Path) -> None:
    log = tmp_path / 'log'
    command = python_command(f'''
        import os, time
        with open({str(log)!r}, 'a') as out:
            out.write('start ' + os.environ['DYNAMODB_LOCK_FENCING_TOKEN'] + '\\n')
        time.sleep(0.8)
        with open({str(log)!r}, 'a') as out:
            out.write('end\\n')
    ''')
    processes = [runner.start('shared', command, '--wait', '30', '--lease', '10') for _ in range(3)]
    results = [finish(process) for process in processes]
    assert [result.code for result in results] == [0, 0, 0], results
    lines = log.read_text().split('\n')[:-1]
    assert [line.split()[0] for line in lines] == ['start', 'end'] * 3
    tokens = [int(line.split()[1]) for line in lines if line.startswith('start')]
    assert tokens == sorted(tokens) and len(set(tokens)) == 3


# --------------------------------------------------------------------------------------------
# Losing the lock
# --------------------------------------------------------------------------------------------

def test_a_stolen_lock_terminates_the_command(runner: Runner, local_engine: Any, tmp_path: Path) -> None:
    started, terminated = tmp_path / 'started', tmp_path / 'terminated'
    process = runner.start('victim', python_command(f'''
        import os, signal, sys, time
        def on_term(signum, frame):
            open({str(terminated)!r}, 'w').close()
            sys.exit(0)
        signal.signal(signal.SIGTERM, on_term)
        with open({str(started)!r}, 'w') as out:
            out.write(str(os.getpid()))
        time.sleep(60)
    '''), '--lease', '3', '--kill-after', '1')
    wait_for(started.exists, what='the command to start')
    wait_for(lambda: started.read_text() != '', what='the pid')
    child = int(started.read_text())
    local_engine.steal_row('victim', owner_name='the-thief')
    finished = finish(process, timeout=30)
    assert finished.code == EXIT_LOCK_LOST, finished
    assert terminated.exists()
    assert not pid_alive(child)
    assert finished.err.count('\n') == 1, finished.err
    assert 'lost lock' in finished.err and 'the-thief' in finished.err and 'SIGTERM' in finished.err
    assert 'SIGKILL' not in finished.err
    assert local_engine.read_item('victim')['owner_name'] == 'the-thief'   # the thief's row is left alone


def test_a_command_ignoring_sigterm_is_killed_after_kill_after(runner: Runner, local_engine: Any,
                                                                     tmp_path: Path) -> None:
    started = tmp_path / 'started'
    process = runner.start('stubborn', python_command(f'''
        import os, signal, time
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        with open({str(started)!r}, 'w') as out:
            out.write(str(os.getpid()))
        time.sleep(60)
    '''), '--lease', '1.5', '--kill-after', '1')
    wait_for(lambda: started.exists() and started.read_text() != '', what='the command to start')
    child = int(started.read_text())
    local_engine.steal_row('stubborn')
    stolen_at = time.monotonic()
    finished = finish(process, timeout=30)
    took = time.monotonic() - stolen_at
    assert finished.code == EXIT_LOCK_LOST, finished
    assert not pid_alive(child)
    assert 'then SIGKILL after 1s (--kill-after)' in finished.err
    assert 'exit code was 137' in finished.err
    assert 1.0 <= took < 10


def test_the_whole_process_group_of_the_command_is_terminated(runner: Runner, local_engine: Any,
                                                              tmp_path: Path) -> None:
    """A shell pipeline is stopped as a whole: its grandchildren too."""
    pids = tmp_path / 'pids'
    grandchild = (f'{sys.executable} -c "import os, time; '
                  f'open(\'{pids}\', \'a\').write(str(os.getpid()) + chr(10)); time.sleep(60)"')
    process = runner.start('pipeline', ['/bin/sh', '-c', f'{grandchild} & {grandchild} & wait'], '--lease', '1.5',
                           '--kill-after', '1')
    wait_for(lambda: pids.exists() and len(pids.read_text().split()) == 2, what='both grandchildren')
    children = [int(pid) for pid in pids.read_text().split()]
    local_engine.steal_row('pipeline')
    finished = finish(process, timeout=30)
    assert finished.code == EXIT_LOCK_LOST, finished
    wait_for(lambda: not any(pid_alive(pid) for pid in children), timeout=5, what='the grandchildren to end')


def test_a_lock_that_cannot_be_renewed_terminates_the_command(runner: Runner, local_engine: Any,
                                                              tmp_path: Path) -> None:
    """Renewals that fail for the safe period (here: the table is gone) end the command, before
    another process could take the lock over."""
    started, terminated = tmp_path / 'started', tmp_path / 'terminated'
    process = runner.start('doomed', python_command(f'''
        import signal, sys, time
        def on_term(signum, frame):
            open({str(terminated)!r}, 'w').close()
            sys.exit(3)
        signal.signal(signal.SIGTERM, on_term)
        open({str(started)!r}, 'w').close()
        time.sleep(60)
    '''), '--lease', '2', '--kill-after', '0.5')
    wait_for(started.exists, what='the command to start')
    local_engine.client.delete_table(TableName=local_engine.table_name)
    deleted_at = time.monotonic()
    finished = finish(process, timeout=30)
    assert finished.code == EXIT_LOCK_LOST, finished
    assert terminated.exists()
    assert 'LOCK_IN_DANGER' in finished.err and 'exit code was 3' in finished.err
    assert time.monotonic() - deleted_at < 2 + 5     # within about the lease


# --------------------------------------------------------------------------------------------
# Signals, and a command that cannot run
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize('signum', [signal.SIGTERM, signal.SIGINT])
def test_signals_are_forwarded_and_the_lock_released(runner: Runner, local_engine: Any, tmp_path: Path,
                                                     signum: int) -> None:
    started, got = tmp_path / 'started', tmp_path / 'got'
    process = runner.start('forward', python_command(f'''
        import signal, sys, time
        def on_signal(signum, frame):
            open({str(got)!r}, 'w').write(str(signum))
            sys.exit(5)
        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)
        open({str(started)!r}, 'w').close()
        time.sleep(60)
    '''), '--lease', '10')
    wait_for(started.exists, what='the command to start')
    assert local_engine.read_held_row('forward') is not None
    process.send_signal(signum)
    finished = finish(process)
    assert finished.code == 5, finished
    assert got.read_text() == str(int(signum))
    assert local_engine.read_held_row('forward') is None


def test_a_signal_that_kills_the_command_gives_128_plus_its_number(runner: Runner, local_engine: Any,
                                                                   tmp_path: Path) -> None:
    started = tmp_path / 'started'
    process = runner.start('killed', python_command(f'''
        import time
        open({str(started)!r}, 'w').close()
        time.sleep(60)
    '''), '--lease', '10')
    wait_for(started.exists, what='the command to start')
    process.send_signal(signal.SIGTERM)
    finished = finish(process)
    assert finished.code == 128 + signal.SIGTERM, finished
    assert local_engine.read_held_row('killed') is None


def test_a_signal_while_waiting_stops_waiting(runner: Runner, local_engine: Any, tmp_path: Path) -> None:
    holder = local_engine.lock_client(owner_name='the-holder')
    holder.acquire_lock('contended')
    marker = tmp_path / 'ran'
    process = runner.start('contended', python_command(f'open({str(marker)!r}, "w").close()'), '--wait', '60')
    time.sleep(2)
    # A loaded machine may still be importing boto3 after two seconds: signal the waiting CLI.
    wait_for(lambda: catches(process.pid, signal.SIGTERM), what='the CLI to handle SIGTERM')
    process.send_signal(signal.SIGTERM)
    finished = finish(process, timeout=20)
    assert finished.code == 128 + signal.SIGTERM, finished
    assert not marker.exists()
    assert local_engine.read_item('contended')['owner_name'] == 'the-holder'


def test_a_command_that_does_not_exist(runner: Runner, local_engine: Any) -> None:
    finished = runner.run('missing', ['/no/such/program-xyz'])
    assert finished.code == EXIT_COMMAND_NOT_FOUND, finished
    assert 'command not found' in finished.err and 'Traceback' not in finished.err
    assert local_engine.read_held_row('missing') is None


@pytest.mark.parametrize('argv, words', [
    (['run', 'k'], 'needs a command after "--"'),
    (['run', 'k', '--wait', '-1', '--', 'true'], '--wait'),
    (['run', 'k', 'true'], 'unrecognized arguments'),
])
def test_usage_errors(argv: List[str], words: str, capsys: pytest.CaptureFixture[str]) -> None:
    from python_dynamodb_lock.__main__ import main

    code = main(['--endpoint-url', 'http://127.0.0.1:9', '--region', 'us-east-1', *argv])
    assert code == 2
    assert words in capsys.readouterr().err


def test_options_after_the_separator_belong_to_the_command(runner: Runner, local_engine: Any) -> None:
    finished = runner.run('args', python_command('import sys; print(sys.argv[1:])') + ['--wait', '--', 'x'],
                          '--lease', '10')
    assert finished.code == 0, finished
    assert finished.out == "['--wait', '--', 'x']\n"


def test_run_on_a_number_key_of_a_hash_only_table(local_engine: Any, tmp_path: Path) -> None:
    from python_dynamodb_lock.testing import lock_table

    report = tmp_path / 'env'
    with lock_table(local_engine.endpoint_url, sort_key_name=None, partition_key_type='N') as table:
        finished = Runner(table).run(
            '42', python_command(f'import os; open({str(report)!r}, "w").write(os.environ["DYNAMODB_LOCK_KEY"])'),
            '--no-sort-key', '--partition-key-type', 'N', '--lease', '10')
        assert finished.code == 0, finished
        assert report.read_text() == '42'
        row = table.read_item(42)
        assert row is not None and 'released_at' in row


def test_a_missing_table_is_one_line_and_exit_code_1(local_engine: Any, tmp_path: Path) -> None:
    marker = tmp_path / 'ran'
    runner = Runner(local_engine)
    argv = runner.argv('k', python_command(f'open({str(marker)!r}, "w").close()'))
    argv[argv.index(local_engine.table_name)] = 'no-such-table'
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    completed = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
    assert completed.returncode == 1, completed
    assert "table 'no-such-table' not found" in completed.stderr
    assert completed.stderr.count('\n') == 1 and 'Traceback' not in completed.stderr
    assert not marker.exists()
