"""``dynamodb-lock run``: run a command while holding a lock, and stop it when the lock is lost.

:func:`run_locked` acquires the lock (waiting up to a given time), starts the command in a
process group of its own with the lock's fencing token in its environment, keeps the lock
alive (the lock client's heartbeats) for as long as the command runs, and releases it when the
command and every other process of its process group have exited - like ``flock``, whose lock
lives as long as any process holding its file descriptor - but for at most a grace period after
the command itself exited; processes of the group still running then get ``SIGTERM``, then
``SIGKILL``. When the lock is lost while the command runs - taken over, its row deleted, or
not renewed for the safe period (after which another process may take it over once the lease
has run out) - the command's process group gets ``SIGTERM``, then ``SIGKILL`` after a kill
delay. ``SIGINT``, ``SIGTERM`` and ``SIGHUP`` received meanwhile are forwarded to the group.

Processes that leave the group (``setsid``, ``setpgid``, a daemon's double fork) are not tracked.

POSIX only (process groups and signals).
"""
from __future__ import annotations

import dataclasses
import datetime
import os
import signal
import subprocess
import sys
import threading
import time
from types import FrameType
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence

from .._core.state import Status
from .._model.errors import DynamoDBLockError, Reason
from .._common.locks import HeldLock
from ..python_dynamodb_lock import DynamoDBLock, DynamoDBLockClient

__all__ = [
    'EXIT_CANNOT_EXECUTE',
    'EXIT_COMMAND_NOT_FOUND',
    'EXIT_LOCK_LOST',
    'EXIT_NOT_ACQUIRED',
    'RunSettings',
    'run_locked',
]

#: The lock was held by someone else for all of ``--wait`` (EX_TEMPFAIL: try again later).
EXIT_NOT_ACQUIRED = 75
#: The lock was lost while the command ran; the command was terminated.
EXIT_LOCK_LOST = 76
#: The command could not be executed (permission denied, not an executable), as in a shell.
EXIT_CANNOT_EXECUTE = 126
#: The command was not found, as in a shell.
EXIT_COMMAND_NOT_FOUND = 127

#: Signals forwarded to the command's process group.
FORWARDED_SIGNALS = tuple(getattr(signal, name) for name in ('SIGINT', 'SIGTERM', 'SIGHUP') if hasattr(signal, name))

#: Environment variables given to the command.
ENV_FENCING_TOKEN = 'DYNAMODB_LOCK_FENCING_TOKEN'
ENV_KEY = 'DYNAMODB_LOCK_KEY'
ENV_SORT_KEY = 'DYNAMODB_LOCK_SORT_KEY'
ENV_TABLE = 'DYNAMODB_LOCK_TABLE'
ENV_OWNER = 'DYNAMODB_LOCK_OWNER'

_POLL_SECONDS = 0.05
#: How often the process group is looked at once the command has exited (a scan of /proc on Linux).
_GROUP_POLL_SECONDS = 0.1
#: How long the group is waited for after SIGKILL before the lock is released anyway (a process
#: in uninterruptible sleep dies only when its system call returns).
_AFTER_KILL_SECONDS = 2.0


@dataclasses.dataclass(frozen=True)
class RunSettings:
    """What ``run`` was asked to do."""

    key: Any                 # as the lock client takes it (str, Decimal or bytes)
    key_text: str            # as it was given on the command line (for messages and the environment)
    sort_key: str
    table_name: str
    command: Sequence[str]
    wait: float              # seconds to wait for the lock (0: one attempt)
    grace: float             # seconds the rest of the process group may run after the command exited
    kill_after: float        # seconds between SIGTERM and SIGKILL
    retry_period: float      # seconds between two looks at a lock held by someone else
    lease: float             # the client's lease_duration, in seconds (for the loss message)
    safe_period: float       # the client's safe_period, in seconds (for the loss message)


class _Trouble:
    """What the lock's callback reported (it runs on the client's callback thread)."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.code: Optional[str] = None

    def callback(self, code: str, lock: HeldLock) -> None:
        if self.code is None:
            self.code = code
        self.event.set()


class _Signals:
    """Signal handlers for the time of one run. The handlers never raise and take no lock:
    before the command starts they only note the signal (the main thread then stops the
    acquisition); while the command runs they forward it to the command's process group."""

    def __init__(self) -> None:
        self.child: Optional[subprocess.Popen[bytes]] = None
        self.pending: List[int] = []
        self._previous: Dict[int, Any] = {}

    def install(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return   # only the main thread can handle signals (run called from elsewhere, in tests)
        for signum in FORWARDED_SIGNALS:
            self._previous[signum] = signal.signal(signum, self._handle)

    def restore(self) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous.clear()

    def _handle(self, signum: int, frame: Optional[FrameType]) -> None:
        child = self.child
        if child is None:
            self.pending.append(signum)
        else:   # also after the command exited: the rest of its group may still run
            _signal_group(child, signum)

    def started(self, child: subprocess.Popen[bytes]) -> None:
        """The command runs: forward what arrived while it was being started, and what comes."""
        self.child = child
        while self.pending:
            _signal_group(child, self.pending.pop(0))


def _signal_group(child: subprocess.Popen[bytes], signum: int) -> bool:
    """Send ``signum`` to the command's process group (its pid: it leads a session of its own)."""
    try:
        os.killpg(child.pid, signum)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def _reap_group(pgid: int) -> None:
    """Reap the processes of the group that became this process's children: orphans of the
    command are re-parented to ``run`` when it is PID 1 (a container's entry point) or a
    subreaper, and would otherwise stay zombies that count as members."""
    while True:
        try:
            pid, _ = os.waitpid(-pgid, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _proc_group_members(pgid: int) -> Optional[int]:
    """How many processes of group ``pgid`` are alive (zombies excluded), from /proc; None
    where /proc does not tell (not Linux)."""
    if not sys.platform.startswith('linux'):
        return None
    try:
        names = os.listdir('/proc')
    except OSError:
        return None
    count = 0
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f'/proc/{name}/stat', 'rb') as stat:
                data = stat.read()
        except OSError:
            continue   # it has just exited
        fields = data[data.rfind(b')') + 2:].split()   # after "pid (comm) ": state, ppid, pgrp, ...
        if len(fields) > 2 and fields[0] != b'Z' and fields[2] == str(pgid).encode():
            count += 1
    return count


def group_members(pgid: int) -> int:
    """How many processes of the exited command's group still run (0: none). Without /proc,
    1 stands for "some" (``killpg(pgid, 0)`` succeeds while any member, zombie or not, exists)."""
    _reap_group(pgid)
    members = _proc_group_members(pgid)
    if members is not None:
        return members
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return 0
    except PermissionError:
        return 1   # a member this process may not signal (another user's) still exists
    return 1


def _exit_code_of(returncode: int) -> int:
    """The command's exit status as a shell gives it: 128 + N when signal N killed it."""
    return 128 - returncode if returncode < 0 else returncode


def _loss_text(lock: HeldLock, trouble: _Trouble, lease: float, safe_period: float) -> str:
    if lock.status == Status.INVALID or trouble.code == DynamoDBLockError.LOCK_STOLEN:
        if lock.loss_reason == Reason.ROW_GONE:
            return ('LOCK_STOLEN: its row was released behind its back or deleted '
                    '(a force release, such as dynamodb-lock release --force?)')
        holder = lock.lost_to
        return f'LOCK_STOLEN: taken over by {holder.owner_name if holder is not None else "another owner"}'
    return (f'LOCK_IN_DANGER: not renewed for {safe_period:g}s; another process may take it over once '
            f'its {lease:g}s lease has run out')


def _wait_for(child: subprocess.Popen[bytes], seconds: float) -> bool:
    """Wait up to ``seconds`` for the command to exit; whether it has."""
    try:
        child.wait(timeout=max(seconds, 0.0))
    except subprocess.TimeoutExpired:
        return False
    return True


def _terminate(child: subprocess.Popen[bytes], kill_after: float) -> bool:
    """SIGTERM to the command's process group, SIGKILL after ``kill_after`` if it is still running;
    then SIGKILL to what is left of the group (nothing of the command may run without the
    lock). Returns whether SIGKILL was needed for the command itself."""
    _signal_group(child, signal.SIGTERM)
    deadline = time.monotonic() + kill_after
    killed = False
    if not _wait_for(child, kill_after):
        _signal_group(child, signal.SIGKILL)
        killed = True
        child.wait()
    else:   # the rest of the group has what is left of kill_after to exit
        _wait_for_group(child, deadline - time.monotonic(), lambda: False)
    _signal_group(child, signal.SIGKILL)   # stragglers of the group
    return killed


def run_locked(lock_client: DynamoDBLockClient, settings: RunSettings, err: Callable[[str], None],
               environ: Optional[Mapping[str, str]] = None, warn: Optional[Callable[[str], None]] = None) -> int:
    """Acquire, run the command, release; the exit code (see the ``EXIT_*`` constants).

    :param err: prints one line on stderr (a failure of this run, not of the command).
    :param warn: prints one line on stderr about something done that the user should know
        (processes of the group killed after the grace period); default ``err``.
    """
    trouble = _Trouble()
    signals = _Signals()
    signals.install()
    try:
        acquired = _acquire(lock_client, settings, trouble, signals)
        if isinstance(acquired, DynamoDBLockError):
            holder = acquired.holder.owner_name if acquired.holder is not None else 'another owner'
            err(f'lock {settings.key_text!r} is held by {holder}: not acquired within {settings.wait:g}s')
            return EXIT_NOT_ACQUIRED
        lock = acquired
        if signals.pending:                   # told to stop before the command started
            lock.release(best_effort=True)
            return 128 + signals.pending[0]
        env = dict(os.environ if environ is None else environ)
        env.update({
            ENV_FENCING_TOKEN: '' if lock.fencing_token is None else str(lock.fencing_token),
            ENV_KEY: settings.key_text,
            ENV_SORT_KEY: settings.sort_key,
            ENV_TABLE: settings.table_name,
            ENV_OWNER: lock_client.owner_name,
        })
        try:
            child = subprocess.Popen(list(settings.command), env=env, start_new_session=True)
        except OSError as error:
            lock.release(best_effort=True)
            not_found = isinstance(error, FileNotFoundError)
            err(f'{"command not found" if not_found else "cannot execute"}: {settings.command[0]!r} '
                f'({error.strerror or error}); released the lock')
            return EXIT_COMMAND_NOT_FOUND if not_found else EXIT_CANNOT_EXECUTE
        signals.started(child)
        return _supervise(lock, child, trouble, settings, err, warn or err)
    except _Stopped as stopped:
        return 128 + stopped.signum
    finally:
        signals.restore()


class _Stopped(Exception):
    """A signal arrived while the lock was being waited for: the acquisition was stopped."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _acquire(lock_client: DynamoDBLockClient, settings: RunSettings, trouble: _Trouble, signals: _Signals) -> Any:
    """The lock, or the ACQUIRE_TIMEOUT error. The acquisition runs in a thread of its own, so
    that a signal can stop it from the main thread: the client is closed, which ends the wait
    (and releases a lock acquired at that very moment).

    :raises _Stopped: a forwarded signal arrived meanwhile.
    :raises DynamoDBLockError: the acquisition failed for another reason than the time.
    """
    outcome: Dict[str, Any] = {}

    def acquire() -> None:
        try:
            outcome['lock'] = lock_client.acquire_lock(
                settings.key, settings.sort_key,
                retry_period=datetime.timedelta(seconds=settings.retry_period),
                retry_timeout=datetime.timedelta(seconds=settings.wait),
                app_callback=trouble.callback)
        except BaseException as error:   # handed to the main thread
            outcome['error'] = error

    worker = threading.Thread(target=acquire, name='dynamodb-lock-run-acquire', daemon=True)
    worker.start()
    closed = False
    while worker.is_alive():
        worker.join(_POLL_SECONDS)
        if signals.pending and not closed:
            lock_client.close()
            closed = True
    if signals.pending:
        if 'lock' in outcome:
            outcome['lock'].release(best_effort=True)
        raise _Stopped(signals.pending[0])
    error = outcome.get('error')
    if isinstance(error, DynamoDBLockError) and error.code == DynamoDBLockError.ACQUIRE_TIMEOUT:
        return error
    if error is not None:
        raise error
    return outcome['lock']


def _in_trouble(lock: HeldLock, trouble: _Trouble) -> bool:
    # lock.status reads IN_DANGER as soon as the safe period has passed without a renewal,
    # even before the client's checker (and the callback) has noticed.
    return trouble.event.is_set() or lock.status in (Status.IN_DANGER, Status.INVALID)


def _wait_for_group(child: subprocess.Popen[bytes], seconds: float, stop: Callable[[], bool]) -> int:
    """Wait up to ``seconds`` for the exited command's process group to be empty, or until
    ``stop()``; the number of its processes still running (see :func:`group_members`)."""
    deadline = time.monotonic() + seconds
    while True:
        members = group_members(child.pid)
        if not members or stop() or time.monotonic() >= deadline:
            return members
        time.sleep(min(_GROUP_POLL_SECONDS, max(deadline - time.monotonic(), 0.0)))


def _end_stragglers(child: subprocess.Popen[bytes], members: int, settings: RunSettings,
                    warn: Callable[[str], None]) -> None:
    """The command exited ``settings.grace`` seconds ago and ``members`` processes of its group
    still run: SIGTERM, then SIGKILL after ``settings.kill_after``; say so."""
    code = _exit_code_of(child.returncode)
    _signal_group(child, signal.SIGTERM)
    if _wait_for_group(child, settings.kill_after, lambda: False):
        _signal_group(child, signal.SIGKILL)
        _wait_for_group(child, _AFTER_KILL_SECONDS, lambda: False)
        done = f'sent SIGTERM, then SIGKILL after {settings.kill_after:g}s (--kill-after)'
    else:
        done = f'sent SIGTERM, and {"it" if members == 1 else "they"} exited'
    some = ('processes' if _proc_group_members(child.pid) is None   # no count without /proc
            else f'{members} process{"" if members == 1 else "es"}')
    warn(f'the command exited (exit code {code}), but {some} of its process group still ran '
         f'{settings.grace:g}s later (--grace): {done}; releasing lock {settings.key_text!r}')


def _supervise(lock: DynamoDBLock, child: subprocess.Popen[bytes], trouble: _Trouble, settings: RunSettings,
               err: Callable[[str], None], warn: Callable[[str], None]) -> int:
    """Wait for the command and then the rest of its process group (for at most the grace
    period), while watching the lock; release; the exit code."""
    lost = False
    while not _wait_for(child, _POLL_SECONDS):
        if _in_trouble(lock, trouble):
            lost = True
            break
    if not lost:
        members = _wait_for_group(child, settings.grace, lambda: _in_trouble(lock, trouble))
        if members and _in_trouble(lock, trouble):
            lost = True
        elif members:
            _end_stragglers(child, members, settings, warn)
    if not lost:
        code = _exit_code_of(child.returncode)
        try:
            lock.release(best_effort=False)
        except DynamoDBLockError as error:
            if error.code == DynamoDBLockError.LOCK_STOLEN:
                holder = error.holder.owner_name if error.holder is not None else 'nobody'
                err(f'lock {settings.key_text!r} was lost before the command ended (now held by {holder}): '
                    f'the command (exit code {code}) may have run without it')
                return EXIT_LOCK_LOST
            err(f'could not release lock {settings.key_text!r} ({error.message}); it is taken over by others '
                'after its lease')
        return code
    started = time.monotonic()
    already_exited = child.returncode is not None
    killed = _terminate(child, settings.kill_after)
    why = _loss_text(lock, trouble, settings.lease, settings.safe_period)
    lock.release(best_effort=True)
    if already_exited:
        stopped = 'the command had exited; sent SIGTERM, then SIGKILL, to the rest of its process group'
    elif killed:
        stopped = f'sent SIGTERM, then SIGKILL after {settings.kill_after:g}s (--kill-after)'
    else:
        stopped = f'sent SIGTERM; it exited after {time.monotonic() - started:.1f}s'
    err(f'lost lock {settings.key_text!r} in table {settings.table_name!r} while the command ran ({why}): '
        f'{stopped} (its exit code was {_exit_code_of(child.returncode)})')
    return EXIT_LOCK_LOST
