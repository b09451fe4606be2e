"""The parent's side of the demo: start the worker processes, kill one midway while it holds a
lock, follow what the workers report and narrate it, until every worker is gone."""
from __future__ import annotations

import multiprocessing
import time
from multiprocessing import connection as mp_connection
from typing import Any, Dict, List, Optional, Set, cast

from .engine import Connection
from .output import Printer
from .settings import READY_TIMEOUT_SECONDS, VICTIM_INDEX, DemoError, DemoSettings, worker_name
from .verdict import DemoReport, Hold, Takeover
from .worker import Channels, Message, worker_main

__all__ = ['run_workers']

_STATUS_INTERVAL_SECONDS = 1.0
_KILL_FRACTION = 0.35  # of the duration: when the victim is asked to report its next hold


class _Run:
    """The parent's bookkeeping while the workers run."""

    def __init__(self, settings: DemoSettings, report: DemoReport, printer: Printer,
                 processes: List[Any], readers: List[Any], channels: Channels) -> None:
        self.settings = settings
        self.report = report
        self.printer = printer
        self.processes = processes
        self.channels = channels
        self.open_readers: Dict[Any, int] = {reader: index for index, reader in enumerate(readers)}
        self.start_time = time.time()
        self.ready: Set[int] = set()
        self.done: Set[int] = set()
        self.killed: Set[int] = set()
        self.holders: Dict[str, Optional[int]] = {key: None for key in settings.key_names}
        self.increments: Dict[str, int] = {key: 0 for key in settings.key_names}
        self.report.increments = self.increments

    def elapsed(self, at: Optional[float] = None) -> str:
        return f'[{(time.time() if at is None else at) - self.start_time:6.2f}s]'

    def receive(self, timeout: float) -> None:
        """Handle what the workers sent within ``timeout``; notice workers that exited."""
        for ready in mp_connection.wait(list(self.open_readers), timeout=timeout):
            reader = cast(mp_connection.Connection, ready)
            index = self.open_readers[reader]
            try:
                message = reader.recv()
            except (EOFError, OSError):  # the worker exited (or was killed): its pipe is closed
                del self.open_readers[reader]
                reader.close()
                self._exited(index)
                continue
            self.handle(cast(Message, message))

    def _exited(self, index: int) -> None:
        if index in self.done or index in self.killed:
            return
        process = self.processes[index]
        process.join(5)
        self.report.problems.append(
            f'{worker_name(index)} exited unexpectedly (exit code {process.exitcode})')

    def handle(self, message: Message) -> None:
        report, key, who = self.report, message.key, worker_name(message.worker)
        if message.kind == 'ready':
            self.ready.add(message.worker)
        elif message.kind == 'acquired':
            report.acquisitions += 1
            self.holders[key] = message.worker
            takeover = report.takeover
            if (takeover is not None and takeover.taken_at is None and key == takeover.victim_key
                    and message.at >= takeover.killed_at):
                takeover.taker, takeover.taken_at = message.worker, message.at
                self.channels.takeover_key.value = -1
                self.channels.takeover_done.set()
                self.printer.progress(
                    f'{self.elapsed(message.at)} {who} took over {key}, {takeover.seconds:.2f} s after '
                    f'{worker_name(VICTIM_INDEX)} was killed: the record version had stayed unchanged '
                    f'for the {self.settings.lease_duration:g} s lease')
        elif message.kind == 'holding_for_kill':
            self._kill_victim(message)
        elif message.kind == 'released':
            acquired_at, _ = message.data
            report.holds.append(Hold(message.worker, key, acquired_at, message.at))
            self.increments[key] += 1
            if self.holders.get(key) == message.worker:
                self.holders[key] = None
        elif message.kind == 'lost':
            report.lost_locks += 1
            if self.holders.get(key) == message.worker:
                self.holders[key] = None
            self.printer.progress(f'{self.elapsed(message.at)} {who} lost {key} before writing '
                                  f'(status {message.data}); it skipped the write')
        elif message.kind == 'release_failed':
            report.failed_releases += 1
            self.printer.progress(f'{self.elapsed(message.at)} {who} could not release {key}: '
                                  f'{message.data}')
        elif message.kind == 'timeout':
            report.timeouts += 1
        elif message.kind == 'crashed':
            report.problems.append(f'{who} failed: {str(message.data).strip().splitlines()[-1]}')
            self.printer.always(f'{who} failed:\n{message.data}')
        elif message.kind == 'done':
            self.done.add(message.worker)

    def _kill_victim(self, message: Message) -> None:
        process = self.processes[message.worker]
        self.printer.progress(f'{self.elapsed(message.at)} {worker_name(message.worker)} holds '
                              f'{message.key} and keeps heartbeating; killing it with SIGKILL now')
        self.killed.add(message.worker)
        process.kill()  # SIGKILL on POSIX: no release, no more heartbeats
        process.join(10)
        killed_at = time.time()
        self.report.holds.append(Hold(message.worker, message.key, message.at, killed_at, killed=True))
        self.report.takeover = Takeover(victim_key=message.key, killed_at=killed_at)
        self.channels.takeover_key.value = self.settings.key_names.index(message.key)
        self.printer.progress(
            f'{self.elapsed(killed_at)} killed {worker_name(message.worker)} (pid {process.pid}); '
            f'its lock on {message.key} stays in the table until a waiter has seen its version '
            f'unchanged for the {self.settings.lease_duration:g} s lease')

    def status_line(self) -> str:
        takeover = self.report.takeover
        parts = []
        for key in self.settings.key_names:
            holder = self.holders[key]
            text = 'free' if holder is None else worker_name(holder)
            if takeover is not None and takeover.taken_at is None and key == takeover.victim_key:
                text = f'{worker_name(VICTIM_INDEX)} (dead)'
            parts.append(f'{key}: {text:<16}')
        return f'{self.elapsed()} ' + ' '.join(parts) + f' acquisitions: {self.report.acquisitions}'


def run_workers(settings: DemoSettings, connection: Connection, report: DemoReport,
                 printer: Printer) -> None:
    context = multiprocessing.get_context('spawn')
    channels = Channels(
        start=context.Event(),
        start_time=context.Value('d', 0.0, lock=False),
        kill_requested=context.Event(),
        takeover_key=context.Value('i', -1, lock=False),
        takeover_done=context.Event(),
        stop=context.Event(),
    )
    processes, readers = [], []
    printer.progress(
        f'Starting {settings.workers} worker processes for {settings.keys} key(s): lease '
        f'{settings.lease_duration:g} s, heartbeat {settings.heartbeat_period:g} s, retry every '
        f'{settings.retry_period:g} s')
    try:
        for index in range(settings.workers):
            reader, writer = context.Pipe(duplex=False)
            process = context.Process(target=worker_main,
                                      args=(index, settings, connection, channels, writer),
                                      name=f'dynamodb-lock-demo-{worker_name(index)}', daemon=True)
            process.start()
            writer.close()  # the worker holds the only writing end: its exit closes the pipe
            processes.append(process)
            readers.append(reader)
        run = _Run(settings, report, printer, processes, readers, channels)
        _wait_until_ready(run)
        _supervise(run)
    finally:
        channels.stop.set()
        for process in processes:
            process.join(timeout=5 if process.is_alive() else 0.1)
        for process in processes:
            if process.is_alive():
                process.kill()
                process.join(5)
        for reader in readers:
            reader.close()
    if report.takeover is None:
        report.problems.append(f'{worker_name(VICTIM_INDEX)} never reported a hold, so nobody was killed')


def _wait_until_ready(run: _Run) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_SECONDS
    while len(run.ready) < len(run.processes):
        if time.monotonic() >= deadline:
            raise DemoError(f'only {len(run.ready)} of {len(run.processes)} workers started within '
                            f'{READY_TIMEOUT_SECONDS:.0f} s')
        run.receive(timeout=0.2)
        if run.report.problems:
            raise DemoError('a worker could not start: ' + '; '.join(run.report.problems))


def _supervise(run: _Run) -> None:
    """Start the workers, request the kill midway, print progress, until every worker is gone."""
    settings, channels = run.settings, run.channels
    run.start_time = run.report.start_time = time.time()
    channels.start_time.value = run.start_time
    channels.start.set()
    kill_at = run.start_time + settings.duration * _KILL_FRACTION
    give_up_at = run.start_time + settings.duration + settings.retry_timeout * 3 + 20
    run.printer.progress(
        f'{run.elapsed()} go: each worker repeatedly locks a random key and increments its counter '
        f'(read, pause, write); {worker_name(VICTIM_INDEX)} will be killed at about '
        f'{settings.duration * _KILL_FRACTION:.1f} s while it holds a lock')
    next_status = run.start_time + _STATUS_INTERVAL_SECONDS
    while run.open_readers:
        now = time.time()
        if not channels.kill_requested.is_set() and now >= kill_at:
            channels.kill_requested.set()
        if now >= give_up_at:
            run.report.problems.append(
                f'workers still running {give_up_at - run.start_time:.0f} s after the start; stopped')
            return
        if now >= next_status:
            run.printer.progress(run.status_line())
            next_status += _STATUS_INTERVAL_SECONDS
        run.receive(timeout=min(0.1, max(0.0, next_status - now)))
