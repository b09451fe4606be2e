"""``dynamodb-lock demo``: worker processes contend for a few locks, one is killed midway.

What it shows, on an embedded engine (or any endpoint given with ``--endpoint-url``):

* mutual exclusion: each worker, while holding the lock of a key, increments a counter item of
  that key with a deliberately non-atomic read-then-write. If two workers ever held the same
  lock at once, increments would be lost and the counter would fall short. Every worker also
  reports the wall-clock interval of each hold; the parent checks that the holds of a key never
  overlap (all workers run on this machine, so they share one clock);
* crash recovery: midway the parent SIGKILLs one worker while it holds a lock (the worker
  says so through its pipe to the parent and then just sleeps, heartbeats still running, until it is
  killed). The lock row stays; once its record version has not changed for the lease
  duration another worker takes it over;
* a verdict: acquisitions, counters against increments, overlaps, takeover time. The command
  exits with 1 when any check fails.

The workers are started with the ``spawn`` method, so nothing of the parent (engine threads,
boto3 sessions) is inherited; they talk to the engine over HTTP like any other client.
"""
from __future__ import annotations

import logging
import math
import multiprocessing
import os
import random
import signal
import socket
import threading
import time
import traceback
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import timedelta
from multiprocessing import connection as mp_connection
from typing import Any, Callable, Dict, Iterable, List, NamedTuple, Optional, Set, TextIO, Tuple, cast

import boto3
from botocore.config import Config

from .python_dynamodb_lock import DynamoDBLock, DynamoDBLockClient, DynamoDBLockError

logger = logging.getLogger(__name__)

#: The demo's table when it runs against ``--endpoint-url`` without ``--table``: kept apart
#: from the library's default table so the demo never writes into a table applications use.
DEMO_TABLE_NAME = 'DynamoDBLockDemo'
#: The worker that is SIGKILLed midway while it holds a lock.
VICTIM_INDEX = 0
#: Sort key of the counter items (and of the locks: the default).
COUNTER_SORT_KEY = DynamoDBLockClient._DEFAULT_SORT_KEY_VALUE
#: The attribute of a counter item that holds its value.
COUNTER_ATTRIBUTE = 'count'

_READY_TIMEOUT_SECONDS = 90.0
_STATUS_INTERVAL_SECONDS = 1.0
_KILL_FRACTION = 0.35  # of the duration: when the victim is asked to report its next hold


class DemoError(Exception):
    """The demo could not run (no engine installed, workers did not start, ...)."""


@dataclass(frozen=True)
class DemoSettings:
    """Everything the demo needs; timing derives from ``lease_duration``.

    With the default 2 s lease: heartbeat every 0.5 s, safe period 1.5 s, retry every 0.2 s,
    waits of at most 5 s per acquire attempt.
    """

    workers: int = 4
    keys: int = 2
    duration: float = 12.0
    lease_duration: float = 2.0
    engine: str = 'auto'
    endpoint_url: Optional[str] = None
    region_name: Optional[str] = None
    profile_name: Optional[str] = None
    table_name: str = DEMO_TABLE_NAME
    partition_key_name: str = DynamoDBLockClient._DEFAULT_PARTITION_KEY_NAME
    sort_key_name: str = DynamoDBLockClient._DEFAULT_SORT_KEY_NAME
    ttl_attribute_name: str = DynamoDBLockClient._DEFAULT_TTL_ATTRIBUTE_NAME
    quiet: bool = False

    @property
    def heartbeat_period(self) -> float:
        return self.lease_duration / 4

    @property
    def safe_period(self) -> float:
        return self.lease_duration * 0.75

    @property
    def retry_period(self) -> float:
        return min(0.2, self.lease_duration / 10)

    @property
    def retry_timeout(self) -> float:
        """Long enough to wait out a dead holder's lease, plus margin."""
        return self.lease_duration * 2 + 1.0

    @property
    def key_names(self) -> List[str]:
        return [f'key-{index}' for index in range(self.keys)]

    def validate(self) -> None:
        """Raises ValueError for settings the demo cannot run with."""
        if self.workers < 2:
            raise ValueError('the demo needs at least 2 workers (one of them is killed midway)')
        if self.keys < 1:
            raise ValueError('the demo needs at least 1 key')
        if not self.duration > 0:
            raise ValueError('--duration must be positive')
        if not 0.2 <= self.lease_duration <= 60:
            raise ValueError('--lease must be between 0.2 and 60 seconds')
        if self.engine not in ('auto', 'dynamodb-local', 'moto'):
            raise ValueError(f'unknown engine {self.engine!r}')


def counter_key(lock_key: str) -> str:
    """Partition key of the counter item that the holders of ``lock_key`` increment."""
    return f'demo-counter#{lock_key}'


def worker_name(index: int) -> str:
    return f'worker-{index}'


@dataclass(frozen=True)
class Connection:
    """How a process reaches the engine (picklable, so spawned workers get it as an argument)."""

    endpoint_url: Optional[str]
    region_name: Optional[str]
    profile_name: Optional[str]
    dummy_credentials: bool
    safe_period: float

    def resource(self) -> Any:
        """A DynamoDB service resource (see :func:`client_config`); dummy credentials for
        embedded engines only."""
        if self.dummy_credentials:
            from ._embedded import dummy_boto3_session

            session = dummy_boto3_session()
        else:
            session = boto3.session.Session(profile_name=self.profile_name, region_name=self.region_name)
        return session.resource('dynamodb', endpoint_url=self.endpoint_url, config=client_config(self.safe_period))


#: Attempts of each call of the demo's clients, whatever botocore's default retry mode.
CLIENT_MAX_ATTEMPTS = 3


def client_config(safe_period: float) -> Config:
    """The botocore settings of the demo's boto3 clients.

    Retries are explicit (standard mode, :data:`CLIENT_MAX_ATTEMPTS` attempts), so an
    unreachable endpoint fails within seconds even where botocore defaults to its legacy mode
    (10 attempts). One attempt's connect + read timeout fits in the lock clients'
    ``safe_period``: a stuck heartbeat is given up and retried before its lock is in danger,
    which is what the lock client checks (and warns about) when it is created.
    """
    connect = _down_to_ms(min(1.0, safe_period / 3))
    read = _down_to_ms(min(10.0, safe_period - connect))
    return Config(retries={'mode': 'standard', 'total_max_attempts': CLIENT_MAX_ATTEMPTS},
                  connect_timeout=connect, read_timeout=read, max_pool_connections=16)


def _down_to_ms(seconds: float) -> float:
    return math.floor(seconds * 1000) / 1000


class Message(NamedTuple):
    """What a worker tells the parent. ``at`` is the worker's wall clock (``time.time()``)."""

    kind: str  # ready, acquired, holding_for_kill, released, lost, release_failed, timeout, crashed, done
    worker: int
    key: str
    at: float
    data: Any = None


class Channels(NamedTuple):
    """Shared multiprocessing objects between the parent and the workers.

    Each worker reports through its own one-way pipe rather than a shared queue: a worker that
    is SIGKILLed can then only break its own pipe, never a lock that the others write under.
    """

    start: Any  # Event: go
    start_time: Any  # Value('d'): wall time of the start, set before ``start``
    kill_requested: Any  # Event: the victim reports its next hold and then waits to be killed
    takeover_key: Any  # Value('i'): index of the killed holder's key while it awaits a takeover, else -1
    takeover_done: Any  # Event: the killed holder's lock was taken over; workers may stop at the deadline
    stop: Any  # Event: abort


# --------------------------------------------------------------------------------------------
# Worker process
# --------------------------------------------------------------------------------------------

def _worker_main(index: int, settings: DemoSettings, connection: Connection, channels: Channels,
                 reports: Any) -> None:
    """Body of one worker process: acquire, increment, release, until the duration is over.

    ``reports`` is the sending end of this worker's pipe to the parent.
    """
    logging.basicConfig(level=logging.ERROR if settings.quiet else logging.WARNING,
                        format=f'  [{worker_name(index)} log] %(levelname)s %(name)s: %(message)s')
    post = reports.send
    lock_client: Optional[DynamoDBLockClient] = None
    try:
        resource = connection.resource()
        table = resource.Table(settings.table_name)
        lock_client = DynamoDBLockClient(
            resource,
            table_name=settings.table_name,
            partition_key_name=settings.partition_key_name,
            sort_key_name=settings.sort_key_name,
            ttl_attribute_name=settings.ttl_attribute_name,
            owner_name=f'{worker_name(index)}@{socket.gethostname()}:{os.getpid()}',
            heartbeat_period=timedelta(seconds=settings.heartbeat_period),
            safe_period=timedelta(seconds=settings.safe_period),
            lease_duration=timedelta(seconds=settings.lease_duration),
        )
        post(Message('ready', index, '', time.time(), os.getpid()))
        if channels.start.wait(_READY_TIMEOUT_SECONDS * 2):
            _contend(index, settings, channels, lock_client, table, post)
    except KeyboardInterrupt:
        pass
    except Exception:  # reported to the parent, which fails the verdict
        post(Message('crashed', index, '', time.time(), traceback.format_exc()))
    finally:
        if lock_client is not None:
            lock_client.close(release_locks=True)
        try:
            post(Message('done', index, '', time.time()))
        except OSError:  # the parent has gone
            pass
        reports.close()


def _contend(index: int, settings: DemoSettings, channels: Channels,
             lock_client: DynamoDBLockClient, table: Any, post: Callable[[Message], None]) -> None:
    keys = settings.key_names
    deadline = channels.start_time.value + settings.duration
    rng = random.Random(os.getpid() * 1_000_003 + index)
    is_victim = index == VICTIM_INDEX
    while not channels.stop.is_set():
        past_deadline = time.time() >= deadline
        # Past the deadline the workers go on until the killed holder's lock has been taken
        # over (trying only that key); the victim goes on until it is killed.
        if past_deadline and not is_victim and channels.takeover_done.is_set():
            return
        takeover_key = channels.takeover_key.value
        key = keys[takeover_key] if past_deadline and takeover_key >= 0 else rng.choice(keys)
        try:
            lock = lock_client.acquire_lock(
                key,
                retry_period=timedelta(seconds=settings.retry_period),
                retry_timeout=timedelta(seconds=settings.retry_timeout),
            )
        except DynamoDBLockError as error:
            if error.code != DynamoDBLockError.ACQUIRE_TIMEOUT:
                raise
            post(Message('timeout', index, key, time.time()))
            continue
        acquired_at = time.time()
        post(Message('acquired', index, key, acquired_at, lock.record_version_number))
        if is_victim and channels.kill_requested.is_set():
            post(Message('holding_for_kill', index, key, acquired_at, lock.record_version_number))
            # Sleep without touching any shared object: the SIGKILL must not catch this process
            # inside a multiprocessing lock (an Event's or a Value's) that the others still need.
            # The heartbeat threads go on renewing the lock until the kill.
            time.sleep(_READY_TIMEOUT_SECONDS)
            return
        _increment_counter(index, key, settings, table, lock, rng, acquired_at, post)
        time.sleep(rng.uniform(0.0, 0.05))


def _increment_counter(index: int, key: str, settings: DemoSettings, table: Any, lock: DynamoDBLock,
                       rng: random.Random, acquired_at: float, post: Callable[[Message], None]) -> None:
    """The critical section: a non-atomic read-then-write of the key's counter item."""
    item_key = {settings.partition_key_name: counter_key(key), settings.sort_key_name: COUNTER_SORT_KEY}
    item = table.get_item(Key=item_key, ConsistentRead=True).get('Item', {})
    value = int(item.get(COUNTER_ATTRIBUTE, 0))
    time.sleep(rng.uniform(0.02, 0.1))  # widen the window in which an intruder would be caught
    if lock.status != DynamoDBLock.LOCKED:  # lost meanwhile (e.g. starved): do not write
        post(Message('lost', index, key, time.time(), lock.status))
        lock.release()
        return
    table.put_item(Item={
        **item_key,
        COUNTER_ATTRIBUTE: value + 1,
        settings.ttl_attribute_name: int(time.time()) + 3600,
    })
    finished_at = time.time()
    try:
        lock.release(best_effort=False)
    except DynamoDBLockError as error:
        post(Message('release_failed', index, key, time.time(), error.code))
    post(Message('released', index, key, finished_at, (acquired_at, value + 1)))


# --------------------------------------------------------------------------------------------
# Verdict
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Hold:
    """A wall-clock interval during which ``worker`` certainly held the lock of ``key``."""

    worker: int
    key: str
    start: float
    end: float
    killed: bool = False


def find_overlaps(holds: Iterable[Hold]) -> List[Tuple[Hold, Hold]]:
    """Pairs of holds of the same key whose intervals intersect (each pair found once per later hold).

    Each reported interval lies inside the real hold (taken after acquire returned and before
    release was called), so any intersection is a real violation of mutual exclusion.
    """
    by_key: Dict[str, List[Hold]] = defaultdict(list)
    for hold in holds:
        by_key[hold.key].append(hold)
    overlaps: List[Tuple[Hold, Hold]] = []
    for key_holds in by_key.values():
        key_holds.sort(key=lambda hold: (hold.start, hold.end))
        longest: Optional[Hold] = None
        for hold in key_holds:
            if longest is not None and hold.start < longest.end:
                overlaps.append((longest, hold))
            if longest is None or hold.end > longest.end:
                longest = hold
    return overlaps


@dataclass
class Takeover:
    victim_key: str
    killed_at: float
    taker: Optional[int] = None
    taken_at: Optional[float] = None

    @property
    def seconds(self) -> Optional[float]:
        return None if self.taken_at is None else self.taken_at - self.killed_at


@dataclass
class DemoReport:
    """The outcome; :attr:`passed` is the verdict."""

    settings: DemoSettings
    engine_name: str
    acquisitions: int = 0
    increments: Dict[str, int] = field(default_factory=dict)
    counters: Dict[str, int] = field(default_factory=dict)
    holds: List[Hold] = field(default_factory=list)
    overlaps: List[Tuple[Hold, Hold]] = field(default_factory=list)
    takeover: Optional[Takeover] = None
    timeouts: int = 0
    lost_locks: int = 0
    failed_releases: int = 0
    problems: List[str] = field(default_factory=list)
    start_time: float = 0.0  # wall time at which the workers were told to go

    @property
    def counter_mismatches(self) -> Dict[str, Tuple[int, int]]:
        keys = set(self.increments) | set(self.counters)
        return {key: (self.counters.get(key, 0), self.increments.get(key, 0)) for key in sorted(keys)
                if self.counters.get(key, 0) != self.increments.get(key, 0)}

    @property
    def passed(self) -> bool:
        return (not self.overlaps and not self.counter_mismatches and not self.problems
                and self.takeover is not None and self.takeover.taken_at is not None)

    def verdict_lines(self) -> List[str]:
        """The verdict as printed: one fact per line, then PASS or FAIL."""
        settings = self.settings

        def line(label: str, text: str) -> str:
            return f'  {label + ":":<20}{text}'

        finished = sum(self.increments.values())
        lines = ['Verdict', line('acquisitions', (
            f'{self.acquisitions} by {settings.workers} workers ({finished} finished critical '
            'sections' + (', 1 cut short by the kill)' if self.takeover else ')')))]
        for key in settings.key_names:
            counter, increments = self.counters.get(key, 0), self.increments.get(key, 0)
            verdict = ('ok' if counter == increments
                       else 'LOST UPDATES' if counter < increments else 'MISMATCH')
            lines.append(line(f'counter {key}', f'{counter}, critical sections that incremented '
                                                f'it: {increments}  {verdict}'))
        lines.append(line('overlapping holds', str(len(self.overlaps))))
        for first, second in self.overlaps[:5]:
            lines.append(f'    {first.key}: {worker_name(first.worker)} held it until '
                         f'{first.end - self.start_time:.3f} s, {worker_name(second.worker)} from '
                         f'{second.start - self.start_time:.3f} s')
        takeover = self.takeover
        if takeover is None:
            lines.append(line('crash takeover', 'none: no worker was killed'))
        elif takeover.taken_at is None:
            lines.append(line('crash takeover', f'NONE: nobody took {takeover.victim_key} over after '
                                                f'{worker_name(VICTIM_INDEX)} was killed'))
        else:
            lines.append(line('crash takeover', (
                f'{worker_name(VICTIM_INDEX)} was SIGKILLed holding {takeover.victim_key}; '
                f'{worker_name(takeover.taker or 0)} took it over {takeover.seconds:.2f} s later '
                f'(lease {settings.lease_duration:g} s, heartbeat {settings.heartbeat_period:g} s)')))
        lines.append(line('acquire timeouts', f'{self.timeouts} (waits over {settings.retry_timeout:g} s;'
                                              ' the worker tried again: not an error)'))
        if self.lost_locks or self.failed_releases:
            lines.append(line('locks lost', f'{self.lost_locks} noticed before writing (write '
                                            f'skipped), {self.failed_releases} at release'))
        for problem in self.problems:
            lines.append(line('problem', problem))
        if self.passed:
            lines.append('PASS: no two holders of a key overlapped, no increment was lost, '
                         "and the dead holder's lock was taken over after its lease.")
        else:
            lines.append('FAIL: see above.')
        return lines


# --------------------------------------------------------------------------------------------
# Parent
# --------------------------------------------------------------------------------------------

class _Printer:
    def __init__(self, out: TextIO, quiet: bool) -> None:
        self._out = out
        self._quiet = quiet

    def progress(self, text: str) -> None:
        if not self._quiet:
            self.always(text)

    def always(self, text: str) -> None:
        self._out.write(text + '\n')
        self._out.flush()


def run_demo(settings: DemoSettings, out: TextIO) -> DemoReport:
    """Run the demo, printing progress and the verdict to ``out``; returns the report.

    Raises:
        ValueError: invalid settings.
        DemoError: no embedded engine could be started, or the workers did not start.
        DynamoDBLockError, botocore errors: the table could not be created or used.
    """
    settings.validate()
    printer = _Printer(out, settings.quiet)
    engine = None
    restore_sigterm = _interrupt_on_sigterm()
    try:
        if settings.endpoint_url is None:
            engine = _start_engine(settings, printer)
            connection = Connection(engine.endpoint_url, None, None, dummy_credentials=True,
                                    safe_period=settings.safe_period)
            engine_name = engine.name
        else:
            connection = Connection(settings.endpoint_url, settings.region_name, settings.profile_name,
                                    dummy_credentials=False, safe_period=settings.safe_period)
            engine_name = settings.endpoint_url
            printer.progress(f'Using the DynamoDB endpoint {settings.endpoint_url}')
        resource = connection.resource()
        _prepare_table(settings, resource, printer)
        report = DemoReport(settings=settings, engine_name=engine_name)
        _run_workers(settings, connection, report, printer)
        report.counters = _read_counters(settings, resource)
        report.overlaps = find_overlaps(report.holds)
        _delete_counters(settings, resource)
        printer.always('')
        for line in report.verdict_lines():
            printer.always(line)
        return report
    finally:
        if engine is not None:
            engine.stop()
        restore_sigterm()


def _interrupt_on_sigterm() -> Callable[[], None]:
    """Turn SIGTERM into KeyboardInterrupt while the demo runs, so its cleanup (stopping the
    workers and the engine) runs on ``kill`` as on Ctrl-C. Returns the function that undoes it."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, 'SIGTERM'):
        return lambda: None

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt(f'signal {signum}')

    previous = signal.signal(signal.SIGTERM, interrupt)

    def restore() -> None:
        signal.signal(signal.SIGTERM, previous)
    return restore


def _start_engine(settings: DemoSettings, printer: _Printer) -> Any:
    from . import _embedded

    printer.progress(f'Starting an embedded DynamoDB engine ({settings.engine}) on 127.0.0.1 ...')
    started = time.monotonic()
    try:
        engine = _embedded.start_embedded_engine(settings.engine)
    except _embedded.EmbeddedEngineError as error:
        if settings.engine != 'auto':   # asked for by name: say what it needs, suggest no other engine
            raise DemoError(f'the engine asked for with --engine {settings.engine} could not be started: '
                            f'{error}\nInstall it as said above, or leave --engine out to use whichever '
                            'engine is installed, or pass --endpoint-url to use a running DynamoDB') from error
        raise DemoError(f"no embedded engine could be started: {error}\nInstall moto's server "
                        "(pip install '.[demo]' in a checkout of python_dynamodb_lock, or "
                        "pip install 'moto>=5' flask flask-cors), or pass --endpoint-url to use "
                        'a running DynamoDB') from error
    label = {'dynamodb-local': 'Amazon DynamoDB Local', 'moto': 'moto server (requests serialised)'}
    printer.progress(f'{label.get(engine.name, engine.name)} is up at {engine.endpoint_url} '
                     f'({time.monotonic() - started:.1f} s)')
    return engine


def _prepare_table(settings: DemoSettings, resource: Any, printer: _Printer) -> None:
    DynamoDBLockClient.create_dynamodb_table(
        resource.meta.client,
        table_name=settings.table_name,
        partition_key_name=settings.partition_key_name,
        sort_key_name=settings.sort_key_name,
        ttl_attribute_name=settings.ttl_attribute_name,
        billing_mode='PAY_PER_REQUEST',
        exist_ok=True,
    )
    table = resource.Table(settings.table_name)
    for key in settings.key_names:
        table.put_item(Item={
            settings.partition_key_name: counter_key(key),
            settings.sort_key_name: COUNTER_SORT_KEY,
            COUNTER_ATTRIBUTE: 0,
            settings.ttl_attribute_name: int(time.time()) + 3600,
        })
    printer.progress(f'Table {settings.table_name!r} is ready; counters '
                     + ', '.join(counter_key(key) for key in settings.key_names) + ' set to 0')


def _read_counters(settings: DemoSettings, resource: Any) -> Dict[str, int]:
    table = resource.Table(settings.table_name)
    counters = {}
    for key in settings.key_names:
        item = table.get_item(Key={settings.partition_key_name: counter_key(key),
                                   settings.sort_key_name: COUNTER_SORT_KEY},
                              ConsistentRead=True).get('Item', {})
        counters[key] = int(item.get(COUNTER_ATTRIBUTE, 0))
    return counters


def _delete_counters(settings: DemoSettings, resource: Any) -> None:
    table = resource.Table(settings.table_name)
    for key in settings.key_names:
        table.delete_item(Key={settings.partition_key_name: counter_key(key),
                               settings.sort_key_name: COUNTER_SORT_KEY})


class _Run:
    """The parent's bookkeeping while the workers run."""

    def __init__(self, settings: DemoSettings, report: DemoReport, printer: _Printer,
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


def _run_workers(settings: DemoSettings, connection: Connection, report: DemoReport,
                 printer: _Printer) -> None:
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
            process = context.Process(target=_worker_main,
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
    deadline = time.monotonic() + _READY_TIMEOUT_SECONDS
    while len(run.ready) < len(run.processes):
        if time.monotonic() >= deadline:
            raise DemoError(f'only {len(run.ready)} of {len(run.processes)} workers started within '
                            f'{_READY_TIMEOUT_SECONDS:.0f} s')
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
