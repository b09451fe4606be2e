"""The child-process side of the torture and process-death tests.

Run as ``python -m _torture.worker MODE`` with ``tests/`` and the repository root on
``PYTHONPATH`` (:func:`child_env`); the parameters arrive as one JSON line on standard input.
The worker talks to its parent in JSON lines on standard output, one object per line, each
with an ``event`` key; everything else (logging) goes to standard error or a log file.

Modes:

``contend``
    Several lock clients, several workers, a few keys. Each worker acquires a random key
    (``acquire_lock`` or ``try_acquire_lock``), and while holding it does a deliberately
    non-atomic read-modify-write of a counter item in a second table (consistent read, pause,
    unconditional put), then releases it strictly. A lock client is threaded
    (``DynamoDBLockClient``, its workers are threads) or asyncio (``AsyncDynamoDBLockClient`` on
    an event loop in a thread of the process, its workers are tasks with an aiobotocore counter
    client), as ``client_kinds`` says: the fleet is mixed. Every hold is recorded as an interval of
    ``time.monotonic()`` (one clock for every process on the machine), from just after the
    acquire returned to just before the release was called, so the real tenure of the lock
    contains the recorded interval. Optional random faults on the lock clients' calls
    (:class:`_torture.faults.FaultRates`). Results go to ``params['result_path']``.

    With ``guarded_probability``, that share of the holds writes instead through the lock
    (:meth:`DynamoDBLock.update_item` or ``transact_write_items``, on the lock client's own
    boto3 or aiobotocore client, so faults reach those writes too): a read-modify-write of the
    key's guarded counter item (``guarded#KEY``), whose one guarded update sets the value read
    plus one, adds 1 to ``applied`` and adds the hold's id to the string set ``holds``. The
    runner then tells a lost increment (a hold told "committed" whose id is missing), a double
    one (``applied`` above the number of ids) and an overlap (``value`` below ``applied``)
    apart.
``hold``
    Acquire one lock and keep it (heartbeats running) until killed, paused or told to stop;
    report callbacks as they come, and detect being paused (a gap in its own monotonic
    clock). See :func:`run_hold` for the commands it takes on standard input.
"""
from __future__ import annotations

import asyncio
import collections
import faulthandler
import inspect
import json
import logging
import os
import pathlib
import random
import signal
import sys
import threading
import time
import traceback
from typing import Any, Dict, Generator, List, Optional, Tuple

TESTS_DIR = pathlib.Path(__file__).resolve().parent.parent
REPO_ROOT = TESTS_DIR.parent

if __name__ == '__main__':   # started as a child: make the library and _torture importable
    for path in (str(TESTS_DIR), str(REPO_ROOT)):
        if path not in sys.path:
            sys.path.insert(0, path)

from botocore.config import Config  # noqa: E402

from _torture.faults import FaultInjector, FaultRates  # noqa: E402
from _torture.support import LIBRARY_LOGGER, heartbeat_threads, seconds  # noqa: E402
from python_dynamodb_lock._embedded import DUMMY_ACCESS_KEY_ID, DUMMY_REGION, DUMMY_SECRET_ACCESS_KEY  # noqa: E402
from python_dynamodb_lock.python_dynamodb_lock import (  # noqa: E402
    DynamoDBLock,
    DynamoDBLockClient,
    DynamoDBLockError,
)
from python_dynamodb_lock.testing import default_client_config, dummy_boto3_session  # noqa: E402

__all__ = ['child_env', 'worker_command']

logger = logging.getLogger('torture_worker')


def child_env(extra: Optional[Dict[str, str]] = None) -> Dict[str, str]:
    """The environment for a worker: ``tests/`` and the repository root first on PYTHONPATH."""
    env = dict(os.environ)
    paths = [str(TESTS_DIR), str(REPO_ROOT)]
    if env.get('PYTHONPATH'):
        paths.append(env['PYTHONPATH'])
    env['PYTHONPATH'] = os.pathsep.join(paths)
    env['PYTHONUNBUFFERED'] = '1'
    env.update(extra or {})
    return env


def worker_command(mode: str) -> List[str]:
    return [sys.executable, '-m', '_torture.worker', mode]


def emit(event: str, **fields: Any) -> None:
    """One JSON line to the parent."""
    sys.stdout.write(json.dumps({'event': event, **fields}) + '\n')
    sys.stdout.flush()


class LibraryLogMonitor(logging.Handler):
    """Counts the library's log records by message template; keeps WARNING+ text."""

    #: INFO messages worth keeping in the log file (rare, and telling after a failure).
    INFO_KEPT = ('Taking over', 'Lock %s was released by the earlier', 'The delete of %s met',
                 'Heartbeat of %s found an earlier')

    def __init__(self, log_file: Optional[str]) -> None:
        super().__init__(logging.INFO)
        self.by_template: collections.Counter = collections.Counter()
        self.errors: List[str] = []
        self.warnings_kept: List[str] = []
        self._file = open(log_file, 'a', encoding='utf-8') if log_file else None   # noqa: SIM115
        self._formatter = logging.Formatter('%(asctime)s %(process)d %(threadName)s %(levelname)s %(message)s')

    def emit(self, record: logging.LogRecord) -> None:
        self.by_template[str(record.msg)] += 1
        if record.levelno < logging.WARNING and not str(record.msg).startswith(self.INFO_KEPT):
            return
        text = self._formatter.format(record)
        if record.levelno >= logging.ERROR:
            self.errors.append(text)
        elif record.levelno >= logging.WARNING and len(self.warnings_kept) < 50:
            self.warnings_kept.append(text)
        if self._file is not None:
            self._file.write(text + '\n')
            self._file.flush()

    def count(self, template_start: str) -> int:
        return sum(n for template, n in self.by_template.items() if template.startswith(template_start))


def install_monitors(log_file: Optional[str]) -> tuple:
    monitor = LibraryLogMonitor(log_file)
    library_logger = logging.getLogger(LIBRARY_LOGGER)
    library_logger.setLevel(logging.INFO)
    library_logger.addHandler(monitor)
    library_logger.propagate = False
    logger.addHandler(monitor)
    logger.propagate = False
    thread_failures: List[str] = []

    def excepthook(args: threading.ExceptHookArgs) -> None:
        thread_failures.append(''.join(traceback.format_exception(args.exc_type, args.exc_value, args.exc_traceback)))

    threading.excepthook = excepthook
    return monitor, thread_failures


def client_config(total_attempts: Optional[int] = None) -> Config:
    """The engines' botocore settings (optionally fewer attempts per call)."""
    config = default_client_config()
    if total_attempts is not None:
        config = config.merge(Config(retries={'mode': 'standard', 'total_max_attempts': total_attempts}))
    return config


def make_resource(session: Any, endpoint_url: str, total_attempts: Optional[int] = None) -> Any:
    """A DynamoDB resource with the engines' botocore settings (optionally fewer attempts per call)."""
    return session.resource('dynamodb', endpoint_url=endpoint_url, config=client_config(total_attempts))


THREADED = 'threaded'
ASYNCIO = 'asyncio'


class AsyncSide:
    """The asyncio lock clients of a process: an event loop in a thread, its aiobotocore clients."""

    def __init__(self, endpoint_url: str, failures: List[str]) -> None:
        from aiobotocore.session import get_session

        self.endpoint_url = endpoint_url
        self.session = get_session()
        self.loop = asyncio.new_event_loop()
        self.loop.set_exception_handler(
            lambda loop, context: failures.append(f'asyncio: {context.get("message")} {context.get("exception")!r}'))
        self.thread = threading.Thread(target=self.loop.run_forever, name='asyncio-lock-clients', daemon=True)
        self.thread.start()
        self._contexts: List[Any] = []

    def run(self, coroutine: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result()

    async def dynamodb_client(self, total_attempts: Optional[int] = None) -> Any:
        context = self.session.create_client(
            'dynamodb', endpoint_url=self.endpoint_url, region_name=DUMMY_REGION,
            aws_access_key_id=DUMMY_ACCESS_KEY_ID, aws_secret_access_key=DUMMY_SECRET_ACCESS_KEY,
            config=client_config(total_attempts))
        client = await context.__aenter__()
        self._contexts.append(context)
        return client

    def close(self) -> None:
        async def close_clients() -> None:
            for context in self._contexts:
                await context.__aexit__(None, None, None)

        self.run(close_clients())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(30)


# -- contend ----------------------------------------------------------------------------------

class Contender:
    """One process's share of the mutual-exclusion torture."""

    def __init__(self, params: Dict[str, Any]) -> None:
        from python_dynamodb_lock.aio import AsyncDynamoDBLockClient

        self.params = params
        self.worker_id = params['worker_id']
        self.monitor, self.thread_failures = install_monitors(params.get('log_path'))
        session = dummy_boto3_session()
        endpoint_url = params['endpoint_url']
        self.counter_client = session.client('dynamodb', endpoint_url=endpoint_url, config=default_client_config())
        self.injectors: List[FaultInjector] = []
        self.lock_clients: List[Any] = []
        self.owner_names = [f'torture-w{self.worker_id}-c{index}-{os.getpid()}' for index in range(params['clients'])]
        kinds = params.get('client_kinds') or [THREADED]
        # Cycled with the worker's id, so that the kinds meet every batch size and attempt count.
        self.kinds = [kinds[(self.worker_id + index) % len(kinds)] for index in range(params['clients'])]
        self.async_side = AsyncSide(endpoint_url, self.thread_failures) if ASYNCIO in self.kinds else None
        self.async_counter_client: Any = None
        for index in range(params['clients']):
            attempts = params.get('total_attempts') or [None]
            batch_sizes = params.get('heartbeat_batch_sizes') or [1]
            total_attempts = attempts[index % len(attempts)]
            settings = dict(
                table_name=params['lock_table'],
                owner_name=self.owner_names[index],
                heartbeat_period=seconds(params['heartbeat']),
                safe_period=seconds(params['safe_period']),
                lease_duration=seconds(params['lease']),
                heartbeat_batch_size=batch_sizes[index % len(batch_sizes)],
                metrics=self.note_claim,
            )
            if params.get('session'):
                settings['session'] = True
            if params.get('expiry_period'):
                settings['expiry_period'] = seconds(params['expiry_period'])
            if self.kinds[index] == THREADED:
                dynamodb: Any = make_resource(session, endpoint_url, total_attempts)
            else:
                assert self.async_side is not None
                dynamodb = self.async_side.run(self.async_side.dynamodb_client(total_attempts))
            low_level = getattr(dynamodb.meta, 'client', dynamodb)
            low_level.meta.events.register('before-call.dynamodb', self._count_call)
            if params.get('faults'):
                self.injectors.append(FaultInjector(
                    FaultRates.from_json(params['faults']),
                    seed=params['seed'] * 1000 + index,
                ).install(dynamodb))
            if self.kinds[index] == THREADED:
                self.lock_clients.append(DynamoDBLockClient(dynamodb, **settings))
            else:
                async def create(client: Any = dynamodb, arguments: Dict[str, Any] = settings) -> Any:
                    return AsyncDynamoDBLockClient(client, **arguments)

                assert self.async_side is not None
                self.lock_clients.append(self.async_side.run(create()))
        if self.async_side is not None:
            self.async_counter_client = self.async_side.run(self.async_side.dynamodb_client())
        self.remaining = params['acquisitions']
        self.calls: collections.Counter = collections.Counter()
        self.calls_guard = threading.Lock()
        self.remaining_guard = threading.Lock()
        self.holds: List[List[Any]] = []
        self.callbacks: List[List[Any]] = []
        self.claims: List[List[Any]] = []    # [key, owner of the row, when]: takeovers about to be written
        self.outcomes: collections.Counter = collections.Counter()
        self.outcomes_guard = threading.Lock()
        self.hold_count = 0
        self.errors: List[str] = []
        self.deadline = time.monotonic() + params['time_limit']
        holds_path = params.get('holds_path')
        self.stream = open(holds_path, 'a', encoding='utf-8') if holds_path else None   # noqa: SIM115
        self.partial_sets: List[str] = []
        self.announce_requested = False   # the parent's 'announce': tell it of the next exclusive or set hold

    def _count_call(self, event_name: str = '', **_: Any) -> None:
        with self.calls_guard:
            self.calls[event_name.rsplit('.', 1)[-1]] += 1

    def take_ticket(self) -> bool:
        with self.remaining_guard:
            if self.remaining <= 0:
                return False
            self.remaining -= 1
            return True

    def return_ticket(self) -> None:
        with self.remaining_guard:
            self.remaining += 1

    def count(self, outcome: str) -> None:
        with self.outcomes_guard:
            self.outcomes[outcome] += 1

    def on_callback(self, code: str, lock: Any) -> None:
        """Records a callback of a lock, or of each lock of a multi-lock (called once for the set),
        with when the lock's last confirmed write was sent and its lease (see _torture.verdict)."""
        for each in getattr(lock, 'locks', (lock,)):
            self.callbacks.append([code, each.partition_key, each.owner_name, each.record_version_number,
                                   time.monotonic(), each.status, each.last_updated_time, each.lease_duration])

    def note_claim(self, event: Any) -> None:
        """The lock clients' metrics hook: records each takeover a client is about to write (its
        key without the sort key: the torture's keys have the default one)."""
        if event.name == 'taking_over':
            self.claims.append([event.key.rpartition('|')[0], event.attributes.get('owner'), time.monotonic()])

    def run_thread(self, index: int) -> None:
        params = self.params
        rng = random.Random(params['seed'] * 7919 + index)
        client = self.lock_clients[index % len(self.lock_clients)]
        owner = self.owner_names[index % len(self.lock_clients)]
        while time.monotonic() < self.deadline and self.take_ticket():
            if params.get('hold_mix'):
                drive_sync(self.mixed_hold(client, owner, rng, THREADED), self.counter_client, self.params)
                continue
            key = rng.choice(params['keys'])
            method, arguments = self.next_acquisition(rng)
            try:
                lock = getattr(client, method)(key, **arguments)
            except DynamoDBLockError as error:
                self.acquire_failed(key, error)
                continue
            if lock is None:
                self.try_busy()
                time.sleep(rng.uniform(0, 0.01))
                continue
            self.hold(lock, key, owner, rng)

    def next_acquisition(self, rng: random.Random) -> Tuple[str, Dict[str, Any]]:
        """The lock client's method for the next acquisition, and its keyword arguments."""
        if rng.random() < self.params['try_probability']:
            return 'try_acquire_lock', {'app_callback': self.on_callback}
        return 'acquire_lock', {'retry_period': seconds(rng.uniform(*self.params['retry_period_range'])),
                                'retry_timeout': seconds(self.params['acquire_timeout']),
                                'app_callback': self.on_callback}

    def acquire_failed(self, key: str, error: DynamoDBLockError) -> None:
        self.count(f'acquire_{error.code}')
        logger.warning('Acquire of %s failed: %s', key, error)
        self.return_ticket()

    def try_busy(self) -> None:
        self.count('try_busy')
        self.return_ticket()

    def new_hold_id(self) -> str:
        with self.outcomes_guard:
            self.hold_count += 1
            return f'w{self.worker_id}-{os.getpid()}-{self.hold_count}'

    def guarded_update(self, key: str, value: int, hold_id: str, owner: str, version: str,
                       as_transaction: bool) -> Tuple[str, Dict[str, Any]]:
        """The write of a guarded hold: (the lock's method to call, its arguments)."""
        update = {
            'TableName': self.params['counter_table'],
            'Key': {'counter_key': f'guarded#{key}'},
            'UpdateExpression': 'SET #value = :next, #owner = :owner, #version = :version ADD #applied :one, '
                                '#holds :me',
            'ExpressionAttributeNames': {'#value': 'value', '#owner': 'last_owner', '#version': 'last_version',
                                         '#applied': 'applied', '#holds': 'holds'},
            'ExpressionAttributeValues': {':next': value + 1, ':owner': owner, ':version': version, ':one': 1,
                                          ':me': {hold_id}},
        }
        if as_transaction:
            return 'transact_write_items', {'TransactItems': [{'Update': update}]}
        return 'update_item', update

    def record_guarded_error(self, error: BaseException) -> str:
        if isinstance(error, DynamoDBLockError):
            self.count(f'guarded_{error.code}')
            return error.code
        self.count(f'guarded_{type(error).__name__}')
        return type(error).__name__

    def hold_seconds(self, rng: random.Random) -> float:
        """How long the next hold lasts: mostly short, sometimes long (past the lease)."""
        if rng.random() < self.params['long_hold_probability']:
            return rng.uniform(*self.params['long_hold_range'])
        return rng.uniform(*self.params['short_hold_range'])

    def counter_item(self, key: str, value: int, owner: str, version: str) -> Dict[str, Any]:
        """The plain critical section's write: the counter, one more than read."""
        return {'counter_key': {'S': key}, 'value': {'N': str(value + 1)}, 'last_owner': {'S': owner},
                'last_version': {'S': version}}

    def record_hold(self, lock: Any, key: str, owner: str, start: float, end: float, version_at_acquire: str,
                    before_release: Tuple[str, str], outcome: str, committed: bool, hold_seconds: float,
                    kind: str, *guarded: Any, mode: str = 'exclusive') -> None:
        """One row of ``holds`` (the runner's checks read it by position); with ``holds_path``, also
        appended to that file at once, so that the holds of a worker killed later are known."""
        status_before_release, version_before_release = before_release
        taken = getattr(lock, 'took_over_from', None)
        row = [key, owner, start, end, version_at_acquire, version_before_release, status_before_release, outcome,
               lock.status, committed, round(hold_seconds, 4), kind, lock.fencing_token,
               *(guarded or (False, '', '')), mode, taken and [taken.owner_name, taken.fencing_token],
               lock.last_updated_time, time.monotonic()]
        self.holds.append(row)
        if self.stream is not None:
            with self.outcomes_guard:
                self.stream.write(json.dumps(row) + '\n')
                self.stream.flush()

    def hold(self, lock: DynamoDBLock, key: str, owner: str, rng: random.Random) -> None:
        params = self.params
        start = time.monotonic()
        version_at_acquire = lock.record_version_number
        hold_seconds = self.hold_seconds(rng)
        if rng.random() < params.get('guarded_probability', 0.0):
            self.hold_guarded(lock, key, owner, rng, start, hold_seconds)
            return
        committed = False
        try:
            # The critical section: a read-modify-write that only mutual exclusion keeps correct.
            response = self.counter_client.get_item(
                TableName=params['counter_table'], Key={'counter_key': {'S': key}}, ConsistentRead=True,
            )
            value = int(response['Item']['value']['N']) if 'Item' in response else 0
            time.sleep(hold_seconds)
            self.counter_client.put_item(TableName=params['counter_table'],
                                         Item=self.counter_item(key, value, owner, version_at_acquire))
            committed = True
        except Exception as error:   # the engine itself failed: recorded, not counted
            self.errors.append(f'critical section on {key}: {error!r}')
        end, before_release = time.monotonic(), (lock.status, lock.record_version_number)
        outcome = self.release(lock)
        self.record_hold(lock, key, owner, start, end, version_at_acquire, before_release, outcome, committed,
                         hold_seconds, THREADED)

    def hold_guarded(self, lock: DynamoDBLock, key: str, owner: str, rng: random.Random, start: float,
                     hold_seconds: float) -> None:
        """A hold whose write goes through the lock (see the module's docstring)."""
        version_at_acquire = lock.record_version_number
        hold_id = self.new_hold_id()
        committed, write_error = False, ''
        try:
            response = self.counter_client.get_item(
                TableName=self.params['counter_table'], Key={'counter_key': {'S': f'guarded#{key}'}},
                ConsistentRead=True)
            value = int(response['Item']['value']['N']) if 'Item' in response else 0
            time.sleep(hold_seconds)
            method, arguments = self.guarded_update(key, value, hold_id, owner, version_at_acquire,
                                                    as_transaction=rng.random() < 0.5)
            getattr(lock, method)(**arguments)
            committed = True
        except Exception as error:   # LOCK_STOLEN, UNKNOWN (outcome unknown): recorded, checked by the runner
            write_error = self.record_guarded_error(error)
        end, before_release = time.monotonic(), (lock.status, lock.record_version_number)
        outcome = self.release(lock)
        self.record_hold(lock, key, owner, start, end, version_at_acquire, before_release, outcome, committed,
                         hold_seconds, THREADED, True, hold_id, write_error)

    # -- mixed holds (hold_mix): sets of keys, shared locks, ordered single acquires --------

    def mixed_hold(self, client: Any, owner: str, rng: random.Random, kind: str) -> Steps:
        """One hold of a kind drawn from ``hold_mix``, as steps that :func:`drive_sync` (threaded
        client) or :func:`drive_async` (asyncio client) carry out: ``exclusive`` (one key),
        ``shared`` (one key, ``shared=True``: reads its guarded counter, writes nothing), ``set``
        (``acquire_locks`` of 1-10 keys in random order, one guarded transaction over all of
        them) or ``ordered`` (single acquires of a sorted sample, each written through its lock).
        Exclusive writes always go through the locks, so a holder paused past its lease is refused."""
        params = self.params
        mix = params['hold_mix']
        mode = rng.choices(list(mix), weights=list(mix.values()))[0]
        size = rng.randint(*params['set_size_range'])
        arguments = {'retry_period': seconds(rng.uniform(*params['retry_period_range'])),
                     'retry_timeout': seconds(params['acquire_timeout']), 'app_callback': self.on_callback}
        keys = [rng.choice(params['keys'])] if mode in ('exclusive', 'shared') else rng.sample(params['keys'], size)
        if mode == 'ordered':
            keys.sort()
        locks: List[Any] = []
        multi: Any = None
        for key in keys if mode != 'set' else []:
            try:
                locks.append((yield 'call', client.acquire_lock, (key,), {**arguments, 'shared': mode == 'shared'}))
            except DynamoDBLockError as error:
                self.acquire_failed(key, error)
                for lock in locks:   # an ordered pocket given up: its holds are recorded, unwritten
                    start = time.monotonic()
                    outcome = yield from self.release_steps(lock)
                    self.record_hold(lock, lock.partition_key, owner, start, time.monotonic(),
                                     lock.record_version_number, (lock.status, lock.record_version_number),
                                     outcome, False, 0.0, kind, True, self.new_hold_id(), 'given_up', mode=mode)
                return
        if mode == 'set':
            try:
                multi = yield 'call', client.acquire_locks, (keys,), arguments
            except DynamoDBLockError as error:
                self.acquire_failed(' '.join(keys), error)
                return
            locks = list(multi.locks)
            self.check_set(keys, multi)
        start = time.monotonic()
        versions = [lock.record_version_number for lock in locks]
        hold_seconds = self.hold_seconds(rng)
        hold_id = self.new_hold_id()
        with self.outcomes_guard:
            announce = self.announce_requested and mode != 'shared'
            self.announce_requested = self.announce_requested and not announce
        if announce:   # the parent signals this process now, while it holds these keys
            hold_seconds = max(hold_seconds, 1.0)
            emit('holding', keys=keys, hold_id=hold_id)
        committed, errors = [False] * len(locks), [''] * len(locks)
        try:
            values = []
            for key in keys:
                values.append((yield 'get', key))
            yield 'sleep', hold_seconds
        except Exception as error:   # the engine itself failed: recorded, not counted
            self.errors.append(f'critical section on {keys}: {error!r}')
            mode_writes: List[Tuple[Any, Dict[str, Any]]] = []
        else:
            mode_writes = self.mixed_writes(mode, multi, locks, values, hold_id, owner, versions)
        for index, (target, write) in enumerate(mode_writes):
            try:
                yield 'call', target, (), write
                committed[index:len(locks) if mode == 'set' else index + 1] = \
                    [True] * (len(locks) - index if mode == 'set' else 1)
            except Exception as error:   # LOCK_STOLEN, UNKNOWN: recorded, checked by the runner
                code = self.record_guarded_error(error)
                errors[index:len(locks) if mode == 'set' else index + 1] = \
                    [code] * (len(locks) - index if mode == 'set' else 1)
        end = time.monotonic()
        before_release = [(lock.status, lock.record_version_number) for lock in locks]
        outcomes = []
        for target in [multi] if mode == 'set' else locks:
            outcomes.append((yield from self.release_steps(target)))
        for index, lock in enumerate(locks):
            guarded = () if mode == 'shared' else (True, hold_id, errors[index])
            self.record_hold(lock, lock.partition_key, owner, start, end, versions[index], before_release[index],
                             outcomes[0 if mode == 'set' else index], committed[index], hold_seconds, kind,
                             *guarded, mode=mode)

    def mixed_writes(self, mode: str, multi: Any, locks: List[Any], values: List[int], hold_id: str, owner: str,
                     versions: List[str]) -> List[Tuple[Any, Dict[str, Any]]]:
        """The guarded writes of a mixed hold: (the bound method, its arguments); none for a reader,
        one transaction over every key for a set, one write per lock otherwise."""
        if mode == 'shared':
            return []
        updates = [self.guarded_update(lock.partition_key, value, hold_id, owner, version, as_transaction=True)[1]
                   for lock, value, version in zip(locks, values, versions)]
        if mode == 'set':
            return [(multi.transact_write_items,
                     {'TransactItems': [item for update in updates for item in update['TransactItems']]})]
        return [(lock.transact_write_items, update) for lock, update in zip(locks, updates)]

    def check_set(self, keys: List[str], multi: Any) -> None:
        """A returned set holds every key asked for, each held by this acquisition (``LOCKED``, or
        ``IN_DANGER`` when a loaded machine made the acquisition slower than ``safe_period``), with
        a token."""
        locks, held = multi.locks, (DynamoDBLock.LOCKED, DynamoDBLock.IN_DANGER)
        if [lock.partition_key for lock in locks] != keys or multi.status not in held \
                or any(lock.status not in held or lock.fencing_token is None for lock in locks):
            self.partial_sets.append(f'asked {keys}, got {[(lock.partition_key, lock.status) for lock in locks]}')

    def release_steps(self, target: Any) -> Steps:
        """:meth:`release` as steps, for a lock or a multi-lock of either kind of client."""
        for _ in range(3):
            try:
                yield 'call', target.release, (), {'best_effort': False}
                return self.released(target)
            except DynamoDBLockError as error:
                final = self.release_failed(target, error)
                if final is not None:
                    return final
                yield 'sleep', 0.05
        yield 'call', target.release, (), {'best_effort': True}
        return 'abandoned'

    def release(self, lock: DynamoDBLock) -> str:
        """Strict release, retried on UNKNOWN; falls back to best effort (the row then expires)."""
        for _ in range(3):
            try:
                lock.release(best_effort=False)
                return self.released(lock)
            except DynamoDBLockError as error:
                final = self.release_failed(lock, error)
                if final is not None:
                    return final
                time.sleep(0.05)
        lock.release(best_effort=True)
        return 'abandoned'

    @staticmethod
    def released(lock: Any) -> str:
        """The outcome of a strict release that returned."""
        return 'released' if lock.status == DynamoDBLock.RELEASED else f'noop_{lock.status}'

    def release_failed(self, lock: Any, error: DynamoDBLockError) -> Optional[str]:
        """The outcome of a strict release that raised; None for UNKNOWN (to be tried again)."""
        if error.code != DynamoDBLockError.UNKNOWN:
            logger.warning('Strict release of %s raised %s', lock.unique_identifier, error)
            return error.code
        self.count('release_UNKNOWN')
        return None

    # -- the asyncio workers ------------------------------------------------------------

    async def run_task(self, index: int) -> None:
        """What :meth:`run_thread` does, as a task using an asyncio lock client."""
        params = self.params
        rng = random.Random(params['seed'] * 7919 + index)
        client = self.lock_clients[index % len(self.lock_clients)]
        owner = self.owner_names[index % len(self.lock_clients)]
        while time.monotonic() < self.deadline and self.take_ticket():
            if params.get('hold_mix'):
                await drive_async(self.mixed_hold(client, owner, rng, ASYNCIO), self.async_counter_client,
                                  self.params)
                continue
            key = rng.choice(params['keys'])
            method, arguments = self.next_acquisition(rng)
            try:
                lock = await getattr(client, method)(key, **arguments)
            except DynamoDBLockError as error:
                self.acquire_failed(key, error)
                continue
            if lock is None:
                self.try_busy()
                await asyncio.sleep(rng.uniform(0, 0.01))
                continue
            await self.hold_async(lock, key, owner, rng)

    async def hold_async(self, lock: Any, key: str, owner: str, rng: random.Random) -> None:
        params = self.params
        start = time.monotonic()
        version_at_acquire = lock.record_version_number
        hold_seconds = self.hold_seconds(rng)
        if rng.random() < params.get('guarded_probability', 0.0):
            await self.hold_guarded_async(lock, key, owner, rng, start, hold_seconds)
            return
        committed = False
        counter = self.async_counter_client
        try:
            response = await counter.get_item(
                TableName=params['counter_table'], Key={'counter_key': {'S': key}}, ConsistentRead=True,
            )
            value = int(response['Item']['value']['N']) if 'Item' in response else 0
            await asyncio.sleep(hold_seconds)
            await counter.put_item(TableName=params['counter_table'],
                                   Item=self.counter_item(key, value, owner, version_at_acquire))
            committed = True
        except Exception as error:   # the engine itself failed: recorded, not counted
            self.errors.append(f'critical section on {key}: {error!r}')
        end, before_release = time.monotonic(), (lock.status, lock.record_version_number)
        outcome = await self.release_async(lock)
        self.record_hold(lock, key, owner, start, end, version_at_acquire, before_release, outcome, committed,
                         hold_seconds, ASYNCIO)

    async def hold_guarded_async(self, lock: Any, key: str, owner: str, rng: random.Random, start: float,
                                 hold_seconds: float) -> None:
        """:meth:`hold_guarded`, with the asyncio lock's coroutines."""
        version_at_acquire = lock.record_version_number
        hold_id = self.new_hold_id()
        committed, write_error = False, ''
        try:
            response = await self.async_counter_client.get_item(
                TableName=self.params['counter_table'], Key={'counter_key': {'S': f'guarded#{key}'}},
                ConsistentRead=True)
            value = int(response['Item']['value']['N']) if 'Item' in response else 0
            await asyncio.sleep(hold_seconds)
            method, arguments = self.guarded_update(key, value, hold_id, owner, version_at_acquire,
                                                    as_transaction=rng.random() < 0.5)
            await getattr(lock, method)(**arguments)
            committed = True
        except Exception as error:   # LOCK_STOLEN, UNKNOWN (outcome unknown): recorded, checked by the runner
            write_error = self.record_guarded_error(error)
        end, before_release = time.monotonic(), (lock.status, lock.record_version_number)
        outcome = await self.release_async(lock)
        self.record_hold(lock, key, owner, start, end, version_at_acquire, before_release, outcome, committed,
                         hold_seconds, ASYNCIO, True, hold_id, write_error)

    async def release_async(self, lock: Any) -> str:
        for _ in range(3):
            try:
                await lock.release(best_effort=False)
                return self.released(lock)
            except DynamoDBLockError as error:
                final = self.release_failed(lock, error)
                if final is not None:
                    return final
                await asyncio.sleep(0.05)
        await lock.release(best_effort=True)
        return 'abandoned'

    async def run_tasks(self, indexes: List[int]) -> None:
        results = await asyncio.gather(*(self.run_task(index) for index in indexes), return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException):
                self.thread_failures.append(f'asyncio worker: {result!r}')

    def background_alive(self) -> Dict[str, int]:
        """Live heartbeat senders and checkers: the threaded clients' threads and the asyncio
        clients' tasks."""
        alive = heartbeat_threads()
        counts = {'heartbeat-sender': alive['DynamoDBLockClient-heartbeat-sender'],
                  'heartbeat-checker': alive['DynamoDBLockClient-heartbeat-checker']}
        for client, kind in zip(self.lock_clients, self.kinds):
            if kind == ASYNCIO:
                for task in client.background_tasks:
                    if not task.done():
                        counts['heartbeat-' + task.get_name().rsplit('-', 1)[-1]] += 1
        return counts

    def run(self) -> Dict[str, Any]:
        by_kind: Dict[str, List[int]] = {THREADED: [], ASYNCIO: []}
        for index in range(self.params['threads']):
            by_kind[self.kinds[index % len(self.lock_clients)]].append(index)
        threads = [threading.Thread(target=self.run_thread, args=(index,), name=f'contender-{index}')
                   for index in by_kind[THREADED]]
        started = time.monotonic()
        tasks = None
        if by_kind[ASYNCIO]:
            assert self.async_side is not None
            tasks = asyncio.run_coroutine_threadsafe(self.run_tasks(by_kind[ASYNCIO]), self.async_side.loop)
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if tasks is not None:
            tasks.result()
        elapsed = time.monotonic() - started
        alive_before_close = self.background_alive()
        if self.stream is not None:
            self.stream.close()
        for injector in self.injectors:
            injector.pause_random()
        for client, kind in zip(self.lock_clients, self.kinds):
            if kind == THREADED:
                client.close()
            else:
                assert self.async_side is not None
                self.async_side.run(client.close())
        alive_after_close = self.background_alive()
        if self.async_side is not None:
            self.async_side.close()
        faults: Dict[str, Dict[str, int]] = collections.defaultdict(dict)
        faults_by_client_kind: Dict[str, int] = {}
        for injector, client_kind in zip(self.injectors, self.kinds):
            for operation, kinds in injector.summary()['faults'].items():
                for kind, count in kinds.items():
                    faults[operation][kind] = faults[operation].get(kind, 0) + count
                    faults_by_client_kind[client_kind] = faults_by_client_kind.get(client_kind, 0) + count
            injector.close()
        return {
            'worker_id': self.worker_id,
            'pid': os.getpid(),
            'elapsed': elapsed,
            'holds': self.holds,
            'callbacks': self.callbacks,
            'claims': self.claims,
            'outcomes': dict(self.outcomes),
            'errors': self.errors[:50],
            'error_count': len(self.errors),
            'clients': len(self.lock_clients),
            'client_kinds': self.kinds,
            'heartbeat_threads_before_close': alive_before_close,
            'heartbeat_threads_after_close': alive_after_close,
            'library_errors': self.monitor.errors[:20],
            'library_error_count': len(self.monitor.errors),
            'library_warnings': self.monitor.warnings_kept,
            'takeovers': self.monitor.count('Taking over'),
            'stolen_warnings': self.monitor.count('Lock %s was stolen'),
            'in_danger_warnings': self.monitor.count('Lock %s is in danger'),
            'heartbeat_failures': self.monitor.count('Heartbeat of %s failed'),
            'thread_failures': self.thread_failures,
            'faults': dict(faults),
            'faults_by_client_kind': faults_by_client_kind,
            'calls': dict(self.calls),
            'remaining': self.remaining,
            'partial_sets': self.partial_sets,
        }


Steps = Generator[Any, Any, Any]


def counter_value(response: Dict[str, Any]) -> int:
    return int(response['Item']['value']['N']) if 'Item' in response else 0


def guarded_counter_key(key: str) -> Dict[str, Any]:
    return {'counter_key': {'S': f'guarded#{key}'}}


def next_step(steps: Steps, reply: Any, failure: Optional[BaseException]) -> Tuple[bool, Any]:
    """(False, the next step) or (True, the steps' result), sending a reply or throwing a failure."""
    try:
        return False, steps.throw(failure) if failure is not None else steps.send(reply)
    except StopIteration as stop:
        return True, stop.value


def counter_read(params: Dict[str, Any], key: str) -> Dict[str, Any]:
    return {'TableName': params['counter_table'], 'Key': guarded_counter_key(key), 'ConsistentRead': True}


def drive_sync(steps: Steps, counter: Any, params: Dict[str, Any]) -> Any:
    """Carry out the steps of :meth:`Contender.mixed_hold` with blocking calls."""
    reply, failure = None, None
    while True:
        finished, step = next_step(steps, reply, failure)
        if finished:
            return step
        reply, failure = None, None
        try:
            if step[0] == 'call':
                reply = step[1](*step[2], **step[3])
            elif step[0] == 'sleep':
                time.sleep(step[1])
            else:
                reply = counter_value(counter.get_item(**counter_read(params, step[1])))
        except Exception as error:   # handed to the steps, which decide
            failure = error


async def drive_async(steps: Steps, counter: Any, params: Dict[str, Any]) -> Any:
    """:func:`drive_sync` on the event loop (an asyncio lock client, the aiobotocore counter client)."""
    reply, failure = None, None
    while True:
        finished, step = next_step(steps, reply, failure)
        if finished:
            return step
        reply, failure = None, None
        try:
            if step[0] == 'call':
                reply = step[1](*step[2], **step[3])
                reply = await reply if inspect.isawaitable(reply) else reply
            elif step[0] == 'sleep':
                await asyncio.sleep(step[1])
            else:
                reply = counter_value(await counter.get_item(**counter_read(params, step[1])))
        except Exception as error:   # handed to the steps, which decide
            failure = error


def run_contend(params: Dict[str, Any]) -> None:
    contender = Contender(params)
    emit('ready', pid=os.getpid())
    line = sys.stdin.readline()
    if line.strip() != 'go':
        emit('aborted', reason=f'expected "go", got {line!r}')
        return

    def read_commands() -> None:
        for command in sys.stdin:
            if command.strip() == 'announce':
                with contender.outcomes_guard:
                    contender.announce_requested = True

    threading.Thread(target=read_commands, name='commands', daemon=True).start()
    result = contender.run()
    pathlib.Path(params['result_path']).write_text(json.dumps(result), encoding='utf-8')
    emit('done', holds=len(result['holds']), elapsed=result['elapsed'])


# -- hold -------------------------------------------------------------------------------------

def run_hold(params: Dict[str, Any]) -> None:
    """Hold one lock until killed, paused or told to stop.

    Events: ``acquired`` (version, owner), ``callback`` (code, status, version), ``resumed``
    (the gap, when the process notices it was paused for longer than ``pause_gap``),
    ``released`` / ``release_failed`` (code, whether the call raised), ``done``.

    Commands (one per line on standard input): ``block_renewals`` (every later heartbeat fails
    to reach DynamoDB, as if the network to it were cut; other calls still work),
    ``release_strict``, ``release_best_effort``, ``exit``.

    With ``release_on_resume`` the main thread calls a strict release as soon as it notices
    the pause, before doing anything else; with ``release_after_stolen`` it first waits for
    the LOCK_STOLEN callback.
    """
    monitor, thread_failures = install_monitors(params.get('log_path'))
    session = dummy_boto3_session()
    resource = make_resource(session, params['endpoint_url'])
    injector = FaultInjector().install(resource)
    client = DynamoDBLockClient(
        resource,
        table_name=params['lock_table'],
        owner_name=params.get('owner_name', f'holder-{os.getpid()}'),
        heartbeat_period=seconds(params['heartbeat']),
        safe_period=seconds(params['safe_period']),
        lease_duration=seconds(params['lease']),
    )
    stolen = threading.Event()

    def on_callback(code: str, lock: DynamoDBLock) -> None:
        emit('callback', code=code, status=lock.status, version=lock.record_version_number)
        if code == DynamoDBLockError.LOCK_STOLEN:
            stolen.set()

    lock = client.acquire_lock(params['key'], app_callback=on_callback, retry_timeout=seconds(params['lease'] * 3))

    def release(strict: bool) -> None:
        status_before = lock.status
        try:
            lock.release(best_effort=not strict)
        except DynamoDBLockError as error:
            emit('release_failed', code=error.code, status_before=status_before, status=lock.status,
                 message=error.message)
        else:
            emit('released', status_before=status_before, status=lock.status)

    commands: 'collections.deque[str]' = collections.deque()

    def read_commands() -> None:
        for line in sys.stdin:
            commands.append(line.strip())
        commands.append('exit')

    threading.Thread(target=read_commands, name='commands', daemon=True).start()
    pause_gap = params.get('pause_gap', 1.0)
    last_tick = time.monotonic()   # before 'acquired': a pause right after it must be noticed
    emit('acquired', version=lock.record_version_number, owner=lock.owner_name, pid=os.getpid())
    while True:
        time.sleep(0.01)
        now = time.monotonic()
        gap, last_tick = now - last_tick, now
        if gap > pause_gap:
            if params.get('release_on_resume'):
                release(strict=True)
            emit('resumed', gap=round(gap, 3))
            if params.get('release_after_stolen'):
                emit('stolen_seen', seen=stolen.wait(params['lease'] * 3))
                release(strict=True)
        if not commands:
            continue
        command = commands.popleft()
        if command == 'block_renewals':
            injector.start_outage('connection_error', operations=['heartbeat', 'BatchExecuteStatement'])
            emit('renewals_blocked')
        elif command == 'release_strict':
            release(strict=True)
        elif command == 'release_best_effort':
            release(strict=False)
        elif command == 'exit':
            break
    alive = heartbeat_threads()
    client.close()
    emit('done', heartbeat_threads=alive, library_errors=monitor.errors, thread_failures=thread_failures,
         status=lock.status)


def main(argv: List[str]) -> int:
    if hasattr(signal, 'SIGUSR1'):   # the parent asks for stack traces when the worker seems stuck
        faulthandler.register(signal.SIGUSR1, all_threads=True)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr,
                        format='%(asctime)s %(process)d %(threadName)s %(levelname)s %(name)s %(message)s')
    mode = argv[1] if len(argv) > 1 else ''
    params = json.loads(sys.stdin.readline())
    if mode == 'contend':
        run_contend(params)
    elif mode == 'hold':
        run_hold(params)
    else:
        print(f'unknown mode {mode!r}; expected contend or hold', file=sys.stderr)
        return 2
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
