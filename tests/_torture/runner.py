"""The parent side of the mutual-exclusion torture: start the workers, collect and check results.

:func:`run_torture` creates a lock table and a counter table on DynamoDB Local, starts
``processes`` workers in ``contend`` mode (see :mod:`_torture.worker`), lets them go at the
same moment, waits for them, and returns a :class:`TortureResult`. The checks live on the
result (:meth:`TortureResult.violations` and friends), so a test states its requirements in
plain asserts.

Sizes come from the environment so that CI runs a few minutes and a soak runs for hours:

* ``PDL_STRESS_SCALE``: multiplies the default size of every stress test of the suite (the
  tortures here, the semaphore torture of test_recipes.py): default 1, CI-sized (each torture
  takes under a minute on two cores); 10 runs about ten times as long, 0.2 is a quick check
  (the semaphore torture never shrinks below its default);
* ``PDL_TORTURE_ACQUISITIONS``: total successful acquisitions per torture run (replaces the
  scaled default);
* ``PDL_SOAK=1``: 100 000 acquisitions unless ``PDL_TORTURE_ACQUISITIONS`` says otherwise;
* ``PDL_TORTURE_PROCESSES`` / ``PDL_TORTURE_THREADS``: workers and threads per worker.
"""
from __future__ import annotations

import bisect
import dataclasses
import datetime
import json
import os
import pathlib
import queue
import random
import signal
import subprocess
import threading
import time
import uuid
from typing import Any, Dict, Iterable, List, Mapping, Optional, Set, Tuple

from _torture.faults import FaultRates
from _torture.support import close_pipes, scan_table
from _torture.verdict import torture_losses
from _torture.worker import child_env, worker_command
from python_dynamodb_lock.python_dynamodb_lock import DynamoDBLockClient, DynamoDBLockError

__all__ = ['TortureConfig', 'TortureResult', 'WorkerProcess', 'env_int', 'run_torture', 'stress_size',
           'torture_size']

SOAK_ACQUISITIONS = 100_000


def env_int(name: str, default: int) -> int:
    value = os.environ.get(name, '').strip()
    return int(value) if value else default


def stress_size(default: int) -> int:
    """``default`` times ``PDL_STRESS_SCALE`` (a positive number, default 1), at least 1."""
    value = os.environ.get('PDL_STRESS_SCALE', '').strip()
    scale = float(value) if value else 1.0
    if not scale > 0:
        raise ValueError(f'PDL_STRESS_SCALE must be a positive number, not {value!r}')
    return max(1, round(default * scale))


def torture_size(default: int) -> int:
    """Acquisitions for one torture run: ``PDL_TORTURE_ACQUISITIONS``, else a soak, else
    ``default`` scaled by ``PDL_STRESS_SCALE``."""
    soak = os.environ.get('PDL_SOAK', '').strip().lower() in ('1', 'true', 'yes')
    return env_int('PDL_TORTURE_ACQUISITIONS', SOAK_ACQUISITIONS if soak else stress_size(default))


def summed(counts: Iterable[Mapping[str, int]]) -> Dict[str, int]:
    """Counts by name, added up."""
    total: Dict[str, int] = {}
    for mapping in counts:
        for name, count in mapping.items():
            total[name] = total.get(name, 0) + count
    return total


@dataclasses.dataclass
class TortureConfig:
    acquisitions: int
    processes: int = 3
    threads: int = 4
    clients: int = 2                       # lock clients per process (threads share them)
    keys: Tuple[str, ...] = ('alpha', 'beta', 'gamma', 'delta')
    heartbeat: float = 0.25
    safe_period: float = 2.0
    lease: float = 5.0
    try_probability: float = 0.3
    retry_period_range: Tuple[float, float] = (0.03, 0.1)
    acquire_timeout: float = 10.0
    short_hold_range: Tuple[float, float] = (0.0, 0.01)
    long_hold_probability: float = 0.02
    long_hold_range: Tuple[float, float] = (0.3, 0.8)    # several heartbeats while held
    faults: Optional[FaultRates] = None
    # botocore attempts per call for the lock clients of a process, cycled (None: the default, 4)
    total_attempts: Optional[Tuple[Optional[int], ...]] = None
    # heartbeat_batch_size of the lock clients of a process, cycled: 1 sends UpdateItem, more
    # sends BatchExecuteStatement, so a mixed fleet renews both ways at once
    heartbeat_batch_sizes: Tuple[int, ...] = (1, 4)
    # the kind of each lock client of a process, cycled (shifted by the worker's id, so that
    # every kind meets every batch size and attempt count): a mixed fleet of threaded clients
    # and asyncio clients, whose workers are tasks on an event loop of the process
    client_kinds: Tuple[str, ...] = ('threaded', 'asyncio')
    # the share of holds whose write goes through the lock (lock.update_item or
    # lock.transact_write_items) to the key's guarded counter item, instead of a plain put
    guarded_probability: float = 0.0
    seed: int = 1
    # mixed holds (see Contender.mixed_hold): weights of 'exclusive', 'shared', 'set', 'ordered';
    # None: the plain torture's single acquisitions
    hold_mix: Optional[Dict[str, float]] = None
    set_size_range: Tuple[int, int] = (1, 10)
    session: bool = False                  # lock clients with session=True
    expiry_period: Optional[float] = None  # of the lock clients (a session lock row's lease)
    # signals: the worker SIGKILLed once it recorded signal_after_holds holds, the worker
    # SIGSTOPped then (for pause_seconds) and SIGCONTinued
    kill_worker: Optional[int] = None
    pause_worker: Optional[int] = None
    signal_after_holds: int = 30           # holds of a victim before it is asked to announce one
    pause_seconds: float = 8.0
    # published clients (versions, e.g. '0.9.1') contending in the same table, one process each
    published: Tuple[str, ...] = ()

    def time_limit(self) -> float:
        """A safety net against a hang, far above any expected run time (never a pass criterion)."""
        return 600.0 + self.acquisitions / 5.0


@dataclasses.dataclass
class Hold:
    key: str
    owner: str
    start: float
    end: float
    version_at_acquire: str
    version_before_release: str
    status_before_release: str
    release_outcome: str
    final_status: str
    committed: bool
    hold_seconds: float
    kind: str = 'threaded'        # of the lock client that held it
    fencing_token: Optional[int] = None
    guarded: bool = False         # its write went through the lock, to the key's guarded counter
    hold_id: str = ''             # a guarded hold's id, added to the guarded counter's set
    write_error: str = ''         # why a guarded write raised (a DynamoDBLockError code, ...)
    mode: str = 'exclusive'       # exclusive, shared, set (acquire_locks), ordered, published
    took_over_from: Optional[List[Any]] = None   # [owner, fencing token] of the holder it took over from
    last_renewed: Optional[float] = None   # lock.last_updated_time once released (a lost lock's last renewal)
    released_at: Optional[float] = None    # when its release returned

    @property
    def lost(self) -> bool:
        """The lock was taken from this holder during the hold (it was paused past its lease):
        its recorded interval outlasts its tenure, and its write must have been refused."""
        return 'LOCK_STOLEN' in (self.release_outcome, self.write_error) or 'INVALID' in (
            self.status_before_release, self.final_status)


@dataclasses.dataclass
class GuardedCounter:
    """A key's guarded counter item at the end: ``value`` (read-modify-written under the lock),
    ``applied`` (+1 per applied write) and ``holds`` (the ids of the holds whose write applied)."""

    value: int = 0
    applied: int = 0
    holds: Set[str] = dataclasses.field(default_factory=set)


@dataclasses.dataclass
class TortureResult:
    config: TortureConfig
    workers: List[Dict[str, Any]]
    holds: List[Hold]
    counters: Dict[str, int]
    rows_left: List[Dict[str, Any]]      # rows that record a held lock
    wall_seconds: float
    reclaimed: Dict[str, str] = dataclasses.field(default_factory=dict)
    released_rows: List[Dict[str, Any]] = dataclasses.field(default_factory=list)   # kept, marked released
    guarded_counters: Dict[str, GuardedCounter] = dataclasses.field(default_factory=dict)
    signals: Dict[str, Any] = dataclasses.field(default_factory=dict)    # what Signals did

    # -- the checks -------------------------------------------------------------------------

    def holds_by_key(self) -> List[List[Hold]]:
        """The holds of each key, in order of their start."""
        by_key: Dict[str, List[Hold]] = {}
        for hold in self.holds:
            by_key.setdefault(hold.key, []).append(hold)
        return [sorted(holds, key=lambda hold: hold.start) for holds in by_key.values()]

    def overlaps(self, excuse_lost: bool = False) -> List[Tuple[Hold, Hold]]:
        """Pairs of holds of one key whose recorded intervals intersect: exclusion violations.

        Shared holds may overlap each other, never an exclusive one. With ``excuse_lost``, holds
        that lost their lock during the hold are left out (see :meth:`lost_holds`)."""
        found = []
        for all_holds in self.holds_by_key():
            kept = [hold for hold in all_holds if not (excuse_lost and self.excused(hold))]
            holds = [hold for hold in kept if hold.mode != 'shared']
            starts = [hold.start for hold in holds]
            for reader in (hold for hold in kept if hold.mode == 'shared'):
                for writer in holds[max(0, bisect.bisect_left(starts, reader.start) - 1):
                                    bisect.bisect_left(starts, reader.end)]:
                    if writer.start < reader.end and reader.start < writer.end:
                        found.append((writer, reader))
            if not holds:
                continue
            latest = holds[0]
            for hold in holds[1:]:
                if hold.start < latest.end:
                    found.append((latest, hold))
                if hold.end > latest.end:
                    latest = hold
        return found

    def committed_by_key(self) -> Dict[str, int]:
        """Committed plain (unguarded) holds per key: what each plain counter must read."""
        counts: Dict[str, int] = {key: 0 for key in self.config.keys}
        for hold in self.holds:
            if hold.committed and not hold.guarded and hold.mode != 'published':
                counts[hold.key] += 1
        return counts

    def guarded_problems(self, unknown_prefix: str = '\0') -> List[str]:
        """Lost, double, phantom or overlapping guarded writes; a write refused as LOCK_STOLEN
        that was applied anyway. Ids starting with ``unknown_prefix`` (a worker killed while its
        write was in flight) may be applied without a recorded hold."""
        problems = []
        for key in self.config.keys:
            counter = self.guarded_counters.get(key, GuardedCounter())
            holds = {hold.hold_id: hold for hold in self.holds if hold.guarded and hold.key == key}
            lost = sorted(hold_id for hold_id, hold in holds.items() if hold.committed and hold_id not in counter.holds)
            phantom = sorted(hold_id for hold_id in counter.holds - set(holds)
                             if not hold_id.startswith(unknown_prefix))
            refused_but_applied = sorted(hold_id for hold_id, hold in holds.items()
                                         if hold.write_error == 'LOCK_STOLEN' and hold_id in counter.holds)
            if lost:
                problems.append(f'{key}: {len(lost)} guarded writes reported committed are missing, e.g. {lost[:3]}')
            if counter.applied != len(counter.holds):
                problems.append(f'{key}: guarded writes applied {counter.applied} times for '
                                f'{len(counter.holds)} holds (double increments)')
            if counter.value != counter.applied:
                problems.append(f'{key}: guarded counter reads {counter.value} after {counter.applied} increments '
                                '(lost updates: guarded holds overlapped)')
            if phantom:
                problems.append(f'{key}: guarded writes of unknown holds applied: {phantom[:3]}')
            if refused_but_applied:
                problems.append(f'{key}: guarded writes refused as LOCK_STOLEN were applied: {refused_but_applied[:3]}')
        return problems

    def unknown_guarded_outcomes(self) -> Dict[str, int]:
        """Guarded writes that raised, by whether they were in fact applied (an UNKNOWN outcome
        may have been)."""
        counts = {'applied': 0, 'not_applied': 0}
        for hold in self.holds:
            if hold.guarded and not hold.committed:
                applied = hold.hold_id in self.guarded_counters.get(hold.key, GuardedCounter()).holds
                counts['applied' if applied else 'not_applied'] += 1
        return counts

    def tokens_out_of_order(self, excuse_lost: bool = False) -> List[Tuple[Hold, Hold]]:
        """Successive holds of a key (by start) whose fencing tokens do not grow (shared and
        published holds have no token of their own; with ``excuse_lost``, holds that lost their
        lock are left out: a paused holder's recorded start may follow its taker's)."""
        found = []
        for all_holds in self.holds_by_key():
            holds = [hold for hold in all_holds
                     if hold.mode not in ('shared', 'published') and not (excuse_lost and self.excused(hold))]
            for earlier, later in zip(holds, holds[1:]):
                if earlier.fencing_token is None or later.fencing_token is None \
                        or later.fencing_token <= earlier.fencing_token:
                    found.append((earlier, later))
        return found

    def stolen_callbacks(self) -> List[List[Any]]:
        return [call for worker in self.workers for call in worker['callbacks'] if call[0] == 'LOCK_STOLEN']

    def lost_lock_problems(self) -> List[str]:
        """A lock lost while its holder's lease ran, or a loss its holder was not told of (see
        :mod:`_torture.verdict`): a loaded machine may starve heartbeats past the lease, and a
        takeover then is legitimate, but only then, and always reported."""
        return torture_losses(self.holds, self.workers, self.config.lease)

    def counter_problems(self) -> List[str]:
        """Plain counters that differ from their committed holds. A hold that lost its lock to a
        takeover (legitimately, see :meth:`lost_lock_problems`) and then wrote its unguarded
        read-modify-write may undo the increments of the holds it overlapped, at most one each."""
        committed = self.committed_by_key()
        if self.counters.keys() != committed.keys():
            return [f'counters {self.counters} != committed holds {committed}']
        problems = []
        for key, value in self.counters.items():
            may_lose = sum(1 for pair in self.overlaps() if pair[0].key == key and (pair[0].lost or pair[1].lost))
            if not 0 <= committed[key] - value <= may_lose:
                problems.append(f'counter {key} reads {value} for {committed[key]} committed holds '
                                f'({may_lose} overlaps of holds reported lost)')
        return problems

    def holds_by_kind(self) -> Dict[str, int]:
        """How many holds each kind of lock client had."""
        counts: Dict[str, int] = {}
        for hold in self.holds:
            counts[hold.kind] = counts.get(hold.kind, 0) + 1
        return counts

    def total(self, field: str) -> int:
        return sum(int(worker.get(field, 0)) for worker in self.workers)

    def outcome_counts(self) -> Dict[str, int]:
        counts = summed(worker['outcomes'] for worker in self.workers)
        for hold in self.holds:
            counts[f'release_{hold.release_outcome}'] = counts.get(f'release_{hold.release_outcome}', 0) + 1
        return counts

    def call_counts(self) -> Dict[str, int]:
        """DynamoDB API calls of the lock clients, per operation (each call once, not per attempt)."""
        return summed(worker.get('calls', {}) for worker in self.workers)

    def fault_counts(self) -> Dict[str, int]:
        return summed(kinds for worker in self.workers for kinds in worker['faults'].values())

    def faults_by_client_kind(self) -> Dict[str, int]:
        """How many faults the lock clients of each kind met."""
        return summed(worker.get('faults_by_client_kind', {}) for worker in self.workers)

    def dead_heartbeat_threads(self) -> List[str]:
        """Workers whose senders or checkers (threads, or the asyncio clients' tasks) were not all
        alive before close, or alive after."""
        problems = []
        for worker in self.workers:
            before, after = worker['heartbeat_threads_before_close'], worker['heartbeat_threads_after_close']
            for name, count in before.items():
                if count != worker['clients']:
                    problems.append(f'worker {worker["worker_id"]}: {count} {name} threads alive before close, '
                                    f'expected {worker["clients"]}')
            for name, count in after.items():
                if count:
                    problems.append(f'worker {worker["worker_id"]}: {count} {name} threads alive after close')
        return problems

    def acquisitions_per_second(self) -> float:
        elapsed = max(worker['elapsed'] for worker in self.workers)
        return len(self.holds) / elapsed if elapsed > 0 else 0.0

    def problems(self) -> List[str]:
        """Everything that breaks the guarantees, with or without faults; empty when all is well.

        Overlapping holds of a key (but of a hold reported lost), a counter that differs from the
        number of committed holds (a lost update, but what a hold reported lost may undo), a lock
        lost while its holder's lease ran or a loss not reported (:meth:`lost_lock_problems`),
        a heartbeat thread dead before ``close()`` or alive after it, an ERROR logged by the
        library, a thread killed by an exception, a failure of the counter table itself, or a
        row left behind that could not be taken over.
        """
        problems = []
        overlaps = self.overlaps(excuse_lost=True)
        if overlaps:
            problems.append(f'{len(overlaps)} overlapping holds, e.g. {overlaps[:2]}')
        problems.extend(self.counter_problems())
        problems.extend(self.guarded_problems())
        out_of_order = self.tokens_out_of_order(excuse_lost=True)
        if out_of_order:
            problems.append(f'{len(out_of_order)} holds whose fencing token did not grow, e.g. {out_of_order[:2]}')
        not_released = [row for row in self.released_rows if row.get('lease_duration') != 0
                        or 'acquisition_id' in row]
        if not_released:
            problems.append(f'rows marked released that still look held: {not_released[:3]}')
        problems.extend(self.lost_lock_problems()[:5])
        return problems + self.process_problems(('library_errors', 'thread_failures', 'errors'))

    def process_problems(self, fields: Tuple[str, ...]) -> List[str]:
        """Heartbeat threads dead too early or alive too late, what the workers reported in
        ``fields``, and rows left that nobody could take over."""
        problems = self.dead_heartbeat_threads()
        for worker in self.workers:
            for field in fields:
                if worker.get(field):
                    problems.append(f'worker {worker["worker_id"]} {field}: {worker[field][:3]}')
        unreclaimed = {key: outcome for key, outcome in self.reclaimed.items() if outcome != 'reclaimed'}
        if unreclaimed:
            problems.append(f'rows left behind that could not be taken over: {unreclaimed}')
        return problems

    def excused(self, hold: Hold) -> bool:
        """Whether a hold may outlast its tenure: it lost its lock to a takeover, as the library
        reported (a heartbeat's LOCK_STOLEN, or the strict release's: a paused holder whose lock
        was taken over, and released again by the taker, finds the row gone when it resumes, and
        its release raises LOCK_STOLEN with reason ROW_GONE). Its writes are still checked:
        refused, or applied before the takeover (exact counters)."""
        return hold.lost

    def lost_holds(self) -> List[Hold]:
        return [hold for hold in self.holds if hold.lost]

    def worker_prefix(self, worker_id: Optional[int]) -> str:
        """The start of the owner names and hold ids of a worker (none matches for None)."""
        return '\0' if worker_id is None else f'w{worker_id}-'

    def mixed_problems(self) -> List[str]:
        """What breaks the guarantees in a run of mixed holds with a killed and a paused worker:
        overlapping exclusive holds of a key, an exclusive hold overlapping a shared one (holds
        that lost their lock to a takeover are left out: the paused worker's, and any of a
        worker starved past its lease by a loaded machine, counted in :meth:`mixed_summary`;
        their refused writes must not have been applied), guarded counters that are not exact,
        a partial set, tokens that do not grow, a library ERROR, a dead thread, a row left that
        nobody could take over."""
        problems = []
        overlaps = self.overlaps(excuse_lost=True)
        if overlaps:
            problems.append(f'{len(overlaps)} overlapping holds, e.g. {overlaps[:6]}')
        problems.extend(self.guarded_problems(self.worker_prefix(self.config.kill_worker)))
        out_of_order = self.tokens_out_of_order(excuse_lost=True)
        if out_of_order:
            problems.append(f'{len(out_of_order)} holds whose fencing token did not grow, e.g. {out_of_order[:2]}')
        return problems + self.process_problems(('library_errors', 'thread_failures', 'errors', 'partial_sets'))

    def check_mixed_run(self, name: str) -> str:
        """Print the figures of a run of mixed holds (``pytest -s``) and return them as JSON, after
        asserting what every such run requires: no :meth:`mixed_problems`, both signals sent while
        their workers held locks, every key the killed worker held taken over, and holds of the
        paused worker lost to takeovers."""
        summary = json.dumps(self.mixed_summary(), sort_keys=True)
        print(f'\n{name}: {summary}')
        assert self.mixed_problems() == [], summary
        assert set(self.signals) == {'killed', 'paused'}, summary
        assert self.killed_keys_not_taken_over() == [], summary
        paused = f'torture-{self.worker_prefix(self.config.pause_worker)}'
        assert any(hold.owner.startswith(paused) for hold in self.lost_holds()), summary
        return summary

    def killed_keys_not_taken_over(self) -> List[str]:
        """Keys the killed worker was holding when it died that no other worker held after its death
        and that the reclaimer at the end did not take over either."""
        killed = self.signals.get('killed')
        if not killed:
            return []
        prefix = f'torture-{self.worker_prefix(killed["worker"])}'
        taken = {hold.key for hold in self.holds if hold.start > killed['at'] and not hold.owner.startswith(prefix)}
        return [key for key in killed['holding'] if key not in taken and self.reclaimed.get(key) != 'reclaimed']

    def mixed_summary(self) -> Dict[str, Any]:
        """The figures of a run of mixed holds."""
        paused = f'torture-{self.worker_prefix(self.config.pause_worker)}'
        modes: Dict[str, int] = {}
        for hold in self.holds:
            modes[hold.mode] = modes.get(hold.mode, 0) + 1
        outcomes = self.outcome_counts()
        return {
            'key_holds_by_mode': modes,
            'key_holds_per_s': round(self.acquisitions_per_second(), 1),
            'elapsed_s': round(max(worker['elapsed'] for worker in self.workers), 1),
            'processes': self.config.processes, 'threads_per_process': self.config.threads,
            'keys': len(self.config.keys), 'session': self.config.session,
            'overlaps': len(self.overlaps(excuse_lost=True)),
            'holds_excused_from_overlaps': sum(1 for hold in self.holds if self.excused(hold)),
            'lost_holds_of_paused_worker': len([hold for hold in self.lost_holds() if hold.owner.startswith(paused)]),
            'lost_holds_of_running_workers': len([hold for hold in self.lost_holds()
                                                  if not hold.owner.startswith(paused)]),
            'acquire_timeouts': outcomes.get('acquire_ACQUIRE_TIMEOUT', 0),
            'guarded_refused': {code: count for code, count in outcomes.items() if code.startswith('guarded_')},
            'guarded_committed': sum(1 for hold in self.holds if hold.guarded and hold.committed),
            'guarded_counters_total': sum(counter.applied for counter in self.guarded_counters.values()),
            'takeovers': self.total('takeovers'),
            'stolen_callbacks': len(self.stolen_callbacks()),
            'signals': {name: {field: round(value, 1) if isinstance(value, float) else value
                               for field, value in event.items()} for name, event in self.signals.items()},
            'published': {worker['published']: worker['outcomes']
                          for worker in self.workers if worker.get('published')},
            'rows_reclaimed': sum(1 for outcome in self.reclaimed.values() if outcome == 'reclaimed'),
        }

    def summary(self) -> Dict[str, Any]:
        """The figures worth printing (and quoting in docs/guarantees.rst)."""
        return {
            'acquisitions': len(self.holds),
            'committed': sum(1 for hold in self.holds if hold.committed),
            'processes': self.config.processes,
            'threads_per_process': self.config.threads,
            'lock_clients_per_process': self.config.clients,
            'holds_by_kind': self.holds_by_kind(),
            'keys': len(self.config.keys),
            'elapsed_s': round(max(worker['elapsed'] for worker in self.workers), 1),
            'acquisitions_per_s': round(self.acquisitions_per_second(), 1),
            'overlaps': len(self.overlaps()),
            'counters': self.counters,
            'lock_stolen_callbacks': len(self.stolen_callbacks()),
            'holds_lost_to_takeovers': len(self.lost_holds()),
            'in_danger_warnings': self.total('in_danger_warnings'),
            'takeovers': self.total('takeovers'),
            'heartbeat_failures': self.total('heartbeat_failures'),
            'library_errors': self.total('library_error_count'),
            'outcomes': self.outcome_counts(),
            'faults': self.fault_counts(),
            'faults_by_client_kind': self.faults_by_client_kind(),
            'calls': self.call_counts(),
            'rows_left': len(self.rows_left),
            'rows_released': len(self.released_rows),
            'guarded_holds': sum(1 for hold in self.holds if hold.guarded),
            'guarded_committed': sum(1 for hold in self.holds if hold.guarded and hold.committed),
            'guarded_unknown_outcomes': self.unknown_guarded_outcomes(),
            'guarded_counters': {key: [counter.value, counter.applied, len(counter.holds)]
                                 for key, counter in self.guarded_counters.items()},
            'rows_reclaimed': sum(1 for outcome in self.reclaimed.values() if outcome == 'reclaimed'),
            'longest_hold_s': round(max((hold.end - hold.start for hold in self.holds), default=0.0), 3),
        }


def _create_counter_table(client: Any, table_name: str) -> None:
    client.create_table(
        TableName=table_name,
        KeySchema=[{'AttributeName': 'counter_key', 'KeyType': 'HASH'}],
        AttributeDefinitions=[{'AttributeName': 'counter_key', 'AttributeType': 'S'}],
        BillingMode='PAY_PER_REQUEST',
    )
    client.get_waiter('table_exists').wait(TableName=table_name)


class WorkerProcess:
    """A worker child process (``python -m _torture.worker MODE``) and its stream of events.

    The parameters are sent as the first line of its standard input; a background thread
    reads its JSON-line events into a queue. Stop it with :meth:`kill` or :meth:`close`, which
    act on this child's PID only.
    """

    def __init__(self, mode: str, params: Dict[str, Any], stderr_path: pathlib.Path) -> None:
        self._stderr = open(stderr_path, 'wb')   # noqa: SIM115
        self.stderr_path = stderr_path
        self.process = subprocess.Popen(
            worker_command(mode), env=child_env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=self._stderr, text=True,
        )
        self.pid = self.process.pid
        self.events: 'queue.Queue[Optional[Dict[str, Any]]]' = queue.Queue()
        self._reader = threading.Thread(target=self._read, name=f'worker-{self.pid}-events', daemon=True)
        self._reader.start()
        self.send(json.dumps(params))

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            line = line.strip()
            if line.startswith('{'):
                self.events.put(json.loads(line))
        self.events.put(None)   # end of output

    def send(self, line: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line + '\n')
        self.process.stdin.flush()

    def next_event(self, timeout: float) -> Dict[str, Any]:
        try:
            event = self.events.get(timeout=timeout)
        except queue.Empty:
            self.dump_stacks()
            raise TimeoutError(f'worker {self.pid} said nothing for {timeout}s; '
                               f'stderr: {self.stderr_tail()}') from None
        if event is None:
            self.events.put(None)
            raise RuntimeError(f'worker {self.pid} exited (code {self.process.wait()}); '
                               f'stderr: {self.stderr_tail()}')
        return event

    def wait_for(self, name: str, timeout: float) -> Dict[str, Any]:
        """Skip events until one called ``name`` (the skipped ones are returned in ``skipped``)."""
        deadline = time.monotonic() + timeout
        skipped: List[Dict[str, Any]] = []
        while True:
            try:
                event = self.next_event(max(0.0, deadline - time.monotonic()))
            except (TimeoutError, RuntimeError) as error:
                raise type(error)(f'waiting for {name!r}: {error}; events meanwhile: {skipped}') from None
            if event['event'] == name:
                event['skipped'] = skipped
                return event
            skipped.append(event)

    def dump_stacks(self) -> None:
        """Ask a live worker to write every thread's stack to its standard error (SIGUSR1)."""
        if hasattr(signal, 'SIGUSR1') and self.process.poll() is None:
            try:
                os.kill(self.pid, signal.SIGUSR1)
                time.sleep(0.5)
            except ProcessLookupError:
                pass

    def stderr_tail(self, chars: int = 3000) -> str:
        try:
            return self.stderr_path.read_text(encoding='utf-8', errors='replace')[-chars:]
        except OSError:
            return ''

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()

    def close(self) -> None:
        self.kill()
        close_pipes(self.process, self._stderr)


def run_torture(engine: Any, workdir: pathlib.Path, config: TortureConfig) -> TortureResult:
    """Run one torture on ``engine`` (an EmbeddedEngine running DynamoDB Local)."""
    client = engine.client()
    suffix = uuid.uuid4().hex[:8]
    lock_table, counter_table = f'torture-locks-{suffix}', f'torture-counters-{suffix}'
    DynamoDBLockClient.create_dynamodb_table(client, table_name=lock_table, billing_mode='PAY_PER_REQUEST')
    _create_counter_table(client, counter_table)
    share, extra = divmod(config.acquisitions, config.processes)
    workers_started: List[Tuple[WorkerProcess, pathlib.Path]] = []
    started = time.monotonic()
    try:
        for worker_id in range(config.processes):
            result_path = workdir / f'worker-{worker_id}.json'
            params = {
                'worker_id': worker_id,
                'endpoint_url': engine.endpoint_url,
                'lock_table': lock_table,
                'counter_table': counter_table,
                'keys': list(config.keys),
                'threads': config.threads,
                'clients': config.clients,
                'acquisitions': share + (1 if worker_id < extra else 0),
                'heartbeat': config.heartbeat,
                'safe_period': config.safe_period,
                'lease': config.lease,
                'try_probability': config.try_probability,
                'retry_period_range': list(config.retry_period_range),
                'acquire_timeout': config.acquire_timeout,
                'short_hold_range': list(config.short_hold_range),
                'long_hold_probability': config.long_hold_probability,
                'long_hold_range': list(config.long_hold_range),
                'faults': config.faults.to_json() if config.faults else None,
                'total_attempts': list(config.total_attempts) if config.total_attempts else None,
                'heartbeat_batch_sizes': list(config.heartbeat_batch_sizes),
                'client_kinds': list(config.client_kinds),
                'guarded_probability': config.guarded_probability,
                'hold_mix': config.hold_mix,
                'set_size_range': list(config.set_size_range),
                'session': config.session,
                'expiry_period': config.expiry_period,
                'holds_path': str(workdir / f'worker-{worker_id}.holds'),
                'seed': config.seed * 100 + worker_id,
                'time_limit': config.time_limit(),
                'result_path': str(result_path),
                'log_path': str(workdir / f'worker-{worker_id}.log'),
            }
            worker = WorkerProcess('contend', params, workdir / f'worker-{worker_id}.stderr')
            workers_started.append((worker, result_path))
        for worker, _ in workers_started:
            worker.wait_for('ready', timeout=120)
        for worker, _ in workers_started:
            worker.send('go')
        signals = Signals(config, [worker for worker, _ in workers_started], workdir)
        published = PublishedFleet(config, engine.endpoint_url, lock_table)
        try:
            for worker_id, (worker, _) in enumerate(workers_started):
                if worker_id in (config.kill_worker, config.pause_worker):
                    signals.finish()    # the signals thread reads these workers' events until then
                if worker_id != config.kill_worker:
                    worker.wait_for('done', timeout=config.time_limit() + 120)
                    worker.process.wait(timeout=60)
        finally:
            signals.finish()
            published.stop()
    finally:
        for worker, _ in workers_started:
            worker.close()
    wall_seconds = time.monotonic() - started
    workers = [json.loads(path.read_text(encoding='utf-8')) if worker_id != config.kill_worker
               else killed_worker(worker_id, workdir) for worker_id, (_, path) in enumerate(workers_started)]
    workers.extend(published.workers())
    holds = [Hold(*raw) for worker in workers for raw in worker['holds']]
    counters = {key: 0 for key in config.keys}
    guarded: Dict[str, GuardedCounter] = {}
    for item in scan_table(client, counter_table):
        if item['counter_key'].startswith('guarded#'):
            guarded[item['counter_key'][len('guarded#'):]] = GuardedCounter(
                int(item['value']), int(item['applied']), set(item.get('holds') or ()))
        else:
            counters[item['counter_key']] = int(item['value'])
    rows = scan_table(client, lock_table)
    rows_left = [row for row in rows if 'released_at' not in row and not str(row['lock_key']).startswith(SESSION_ROWS)]
    released_rows = [row for row in rows if 'released_at' in row]
    reclaimed = reclaim(engine, lock_table, rows_left, config) if rows_left else {}
    for table in (lock_table, counter_table):
        client.delete_table(TableName=table)
    client.close()
    return TortureResult(config, workers, holds, counters, rows_left, wall_seconds, reclaimed, released_rows,
                         guarded, signals.sent)


SESSION_ROWS = 'python_dynamodb_lock/session/'


def streamed_holds(workdir: pathlib.Path, worker_id: int) -> List[List[Any]]:
    path = workdir / f'worker-{worker_id}.holds'
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding='utf-8').splitlines() if line.endswith(']')]


def killed_worker(worker_id: int, workdir: pathlib.Path) -> Dict[str, Any]:
    """What is known of a worker SIGKILLed mid-run: the holds it recorded before it died."""
    return {'worker_id': worker_id, 'killed': True, 'elapsed': 0.0, 'holds': streamed_holds(workdir, worker_id),
            'callbacks': [], 'outcomes': {}, 'errors': [], 'library_errors': [], 'thread_failures': [],
            'heartbeat_threads_before_close': {}, 'heartbeat_threads_after_close': {}, 'clients': 0, 'faults': {},
            'calls': {}, 'partial_sets': []}


class Signals:
    """SIGKILL ``config.kill_worker``, then SIGSTOP ``config.pause_worker`` (for ``pause_seconds``,
    then SIGCONT), each at once when it announces (event ``holding``, asked for once it recorded
    ``signal_after_holds`` holds) that it is inside a hold; ``sent`` records what was done when."""

    def __init__(self, config: TortureConfig, workers: List[WorkerProcess], workdir: pathlib.Path) -> None:
        self.config, self.workers, self.workdir = config, workers, workdir
        self.sent: Dict[str, Any] = {}
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self.run, name='torture-signals', daemon=True)
        if config.kill_worker is not None or config.pause_worker is not None:
            self.thread.start()

    def wait_for_holding(self, worker_id: int) -> Optional[Dict[str, Any]]:
        """Once the worker recorded ``signal_after_holds`` holds, ask it to announce its next exclusive
        or set hold; its ``holding`` event, or None if it said ``done`` first (put back for the runner)."""
        worker = self.workers[worker_id]
        while len(streamed_holds(self.workdir, worker_id)) < self.config.signal_after_holds:
            if worker.process.poll() is not None:
                return None
            time.sleep(0.2)
        try:
            worker.send('announce')
        except OSError:
            return None
        while not self.stopping.is_set():
            try:   # not next_event(): its timeout asks the worker for stack traces
                event = worker.events.get(timeout=1.0)
            except queue.Empty:
                continue
            if event is None:
                worker.events.put(None)
                return None
            if event['event'] == 'holding':
                return event
            if event['event'] == 'done':
                worker.events.put(event)
                return None
        return None

    def run(self) -> None:
        config = self.config
        if config.kill_worker is not None:
            holding = self.wait_for_holding(config.kill_worker)
            if holding is not None:
                self.workers[config.kill_worker].process.kill()
                self.sent['killed'] = {'worker': config.kill_worker, 'at': time.monotonic(), 'holding': holding['keys']}
        if config.pause_worker is not None:
            holding = self.wait_for_holding(config.pause_worker)
            if holding is not None:
                pid = self.workers[config.pause_worker].pid
                os.kill(pid, signal.SIGSTOP)
                stopped = time.monotonic()
                time.sleep(config.pause_seconds)
                os.kill(pid, signal.SIGCONT)
                self.sent['paused'] = {'worker': config.pause_worker, 'from': stopped, 'to': time.monotonic(),
                                       'holding': holding['keys']}

    def finish(self) -> None:
        """Wait until the signals were sent (a paused worker is always continued)."""
        while self.thread.is_alive():
            self.thread.join(1.0)


class PublishedFleet:
    """Published clients (``tests/_published_worker.py``, one process per version) contending for
    random keys of the torture until stopped; each hold is recorded as an exclusive ``published``
    hold, from the answer ``acquired`` to just before ``release`` is sent (inside its real tenure)."""

    def __init__(self, config: TortureConfig, endpoint: str, table: str) -> None:
        from test_interop import Published

        self.config = config
        self.stopping = threading.Event()
        self.clients = [Published(version, endpoint, table, heartbeat=config.heartbeat, safe=config.safe_period,
                                  lease=config.lease, expiry=config.expiry_period or 3600.0)
                        for version in config.published]
        self.holds: List[List[List[Any]]] = [[] for _ in self.clients]
        self.outcomes: List[Dict[str, int]] = [{} for _ in self.clients]
        self.threads = [threading.Thread(target=self.contend, args=(index,), name=f'published-{index}', daemon=True)
                        for index in range(len(self.clients))]
        for thread in self.threads:
            thread.start()

    def contend(self, index: int) -> None:
        client, rng = self.clients[index], random.Random(self.config.seed * 31 + index)
        owner = f'published-{self.config.published[index]}'
        while not self.stopping.is_set():
            key = rng.choice(self.config.keys)
            answer = client.acquire(key, timeout=1.0, period=0.2)
            outcome = answer.get('code', answer['event'])
            self.outcomes[index][outcome] = self.outcomes[index].get(outcome, 0) + 1
            if answer['event'] != 'acquired':
                continue
            start = time.monotonic()
            self.stopping.wait(rng.uniform(0.0, 0.05))
            end = time.monotonic()
            client.send(cmd='release')
            self.holds[index].append([key, owner, start, end, answer['version'], answer['version'], 'LOCKED',
                                      'released', 'RELEASED', False, 0.0, 'published', None, False, '', '',
                                      'published'])

    def stop(self) -> None:
        self.stopping.set()
        for thread in self.threads:
            thread.join(30)
        for client in self.clients:
            client.close()

    def workers(self) -> List[Dict[str, Any]]:
        return [{**killed_worker(-1 - index, pathlib.Path('/nonexistent')), 'killed': False, 'published': version,
                 'holds': self.holds[index], 'outcomes': self.outcomes[index]}
                for index, version in enumerate(self.config.published)]


def reclaim(engine: Any, lock_table: str, rows: List[Dict[str, Any]], config: TortureConfig) -> Dict[str, str]:
    """Show that every row left behind has expired: a fresh client takes each one over.

    All workers have exited, so nobody renews these rows; each must be taken over within its
    lease plus two retry periods (the waiter's first read, then a lease of no change). Returns
    ``{key: 'reclaimed' | error}``.
    """
    retry_period = 0.2
    lock_client = DynamoDBLockClient(
        engine.resource(), table_name=lock_table, owner_name='torture-reclaimer',
        heartbeat_period=datetime.timedelta(seconds=config.heartbeat),
        safe_period=datetime.timedelta(seconds=config.safe_period),
        lease_duration=datetime.timedelta(seconds=config.lease), session=config.session,
        **({'expiry_period': datetime.timedelta(seconds=config.expiry_period)} if config.expiry_period else {}),
    )
    outcome: Dict[str, str] = {}

    def take(key: str, sort_key: str) -> None:
        try:
            lock = lock_client.acquire_lock(
                key, sort_key, retry_period=datetime.timedelta(seconds=retry_period),
                retry_timeout=datetime.timedelta(seconds=2 * config.lease + 2 * retry_period + 5.0),
            )
            lock.release(best_effort=False)
            outcome[key] = 'reclaimed'
        except DynamoDBLockError as error:
            outcome[key] = str(error)

    threads = [threading.Thread(target=take, args=(row['lock_key'], row['sort_key'])) for row in rows]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        lock_client.close()
    return outcome
