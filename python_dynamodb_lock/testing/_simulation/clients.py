"""Simulated lock clients: the orchestration of a real client (``Orchestration`` over a
``ClientState`` made by ``make_state``, as ``DynamoDBLockClient.__init__`` makes them), served by
the simulation's scheduler instead of the thread driver, with a simulated clock, a simulated
transport and lock objects whose mutex is a :class:`~.primitives.SimulatedMutex`; and the
:class:`Workload`, the settings of the callers (``callers.py``).
"""
from __future__ import annotations

import contextlib
import dataclasses
import datetime
from typing import Any, Callable

from ..._client.context import check_construction, make_state
from ..._client.orchestration import Orchestration
from ..._core.state import null_guard
from ..._common.locks import HeldLock
from .chance import SplitMix64
from .clock import SimulatedClock
from .invariants import Checker
from .primitives import SimulatedEvent, SimulatedMutex, SimulatedWaiter
from .scheduler import Scheduler, Script
from .transport import SimulatedTransport

__all__ = ['SimulatedClient', 'SimulatedLock', 'Workload']


@dataclasses.dataclass(frozen=True)
class Workload:
    """What each client's caller does, and the clients' settings (seconds)."""

    clients: int = 3
    keys: int = 2
    operations: int = 4          # acquisitions per caller
    try_share: float = 0.3       # the share of them made with a try_ entry point (one attempt)
    set_share: float = 0.25      # the share made with acquire_locks / try_acquire_locks (of 2 keys)
    first_share: float = 0.2     # of the others, the share made with acquire_first_lock (of 2 sort keys)
    shared_share: float = 0.25   # of the single-key ones of a client without a session, the shared ones
    existing_share: float = 0.1  # ... the ones on an existing item (lock_existing_item=True)
    lease_share: float = 0.2     # ... the ones with a lease of their own
    keep_row_share: float = 0.2  # ... the ones made with keep_row=False
    session_share: float = 0.34  # the share of the (threaded-protocol) clients made with session=True
    #: The share of the (threaded-protocol) clients made without ``max_clock_skew`` (trusting no
    #: wall clock: they take a dead holder's row over only after watching its version for its lease).
    untrusting_share: float = 0.5
    extra_share: float = 0.3     # the chance of an extend, update, guarded write or read at each pause of a hold
    force_share: float = 0.03    # the chance that an operation starts with an operator's force release
    #: Whether a client with a session extends its locks (off: only clients without a session
    #: do; ``extend()`` beside a late session renewal was a defect the simulation found, fixed).
    extend_in_session: bool = True
    #: Whether a release that says "released" after its write may have landed counts as telling
    #: a holder whose key was taken over meanwhile (off: it is excused, as before that defect,
    #: found by the simulation, was fixed).
    strict_loss_reports: bool = True
    probe: bool = True           # at the end, try_acquire_locks of every key until it gets them (liveness)
    hold: float = 4.0            # a hold lasts up to this long
    think: float = 2.0           # a caller rests up to this long between two acquisitions
    heartbeat_period: float = 1.0
    safe_period: float = 4.0
    lease_duration: float = 6.0
    max_clock_skew: float = 1.0
    max_rate_drift: float = 0.001   # a client's monotonic clock runs at 1 +- this
    expiry_factor: float = 10.0     # expiry_period (and a session's row lease) = lease_duration * this
    asyncio_share: float = 0.5      # the share of clients of the asyncio protocol (tasks_protocol.py)
    published_share: float = 0.25   # the share of runs where one client (the seed picks it) is published-style


def _no_guard() -> Any:
    return contextlib.nullcontext()


class SimulatedLock(HeldLock):
    """A lock held through a simulated client (the threaded ``DynamoDBLock``'s twin, with a
    simulated mutex)."""

    def __init__(self, partition_key: Any, sort_key: str, owner_name: str, lease_duration: float,
                 record_version_number: str, expiry_time: int, additional_attributes: Any, app_callback: Any,
                 lock_client: 'SimulatedClient', raise_context_exception: bool = False) -> None:
        super().__init__(partition_key, sort_key, owner_name, lease_duration, record_version_number, expiry_time,
                         additional_attributes, app_callback, lock_client, raise_context_exception,
                         clock=lock_client.clock, guard=null_guard())
        self._mutex = SimulatedMutex()


class _NoLowLevelClient:
    """Stands for the boto3 client a real lock client is given (the simulated transport sends)."""


class SimulatedClient:
    """One simulated lock client (see the module docstring)."""

    #: Whether its caller is the wide workload (``callers.caller``) and it gets sim29a's faults
    #: (lost and late requests, late answers, death, close() by another thread); the
    #: asyncio-protocol client (``tasks_protocol.AsyncioClient``) does not yet.
    widened = True

    def __init__(self, name: str, scheduler: Scheduler, transport: SimulatedTransport, clock: SimulatedClock,
                 checker: Checker, workload: Workload, session: bool = False, trusting: bool = True) -> None:
        self.name = name
        self.session = session
        self.dead = False      # a client that died: none of its tasks runs again
        self.writes = 0        # guarded writes made
        self.clock = clock
        self.transport = transport
        self.checker = checker
        self.scheduler = scheduler
        self.paused_until = 0.0
        self.shutdown = SimulatedEvent(scheduler.event_set)
        self._tasks = 0
        seconds = datetime.timedelta
        self.settings = check_construction(
            _NoLowLevelClient(), None, None, True, table_name='locks', partition_key_name='lock_key',
            sort_key_name='sort_key', ttl_attribute_name='expiry_time', owner_name=name,
            heartbeat_period=seconds(seconds=workload.heartbeat_period),
            safe_period=seconds(seconds=workload.safe_period),
            lease_duration=seconds(seconds=workload.lease_duration),
            expiry_period=seconds(seconds=workload.lease_duration * workload.expiry_factor), heartbeat_tps=-1,
            heartbeat_workers=None, heartbeat_batch_size=1, keep_released_rows=True,
            max_clock_skew=seconds(seconds=workload.max_clock_skew) if trusting else None, session=session)
        self.orchestration: Orchestration[SimulatedLock] = Orchestration(make_state(
            self.settings, clock, self._dispatch, None, self, self._new_lock, self.shutdown, _no_guard), _no_guard)

    def _new_lock(self, **fields: Any) -> SimulatedLock:
        return SimulatedLock(lock_client=self, **fields)

    def _dispatch(self, callback: Any, lock: Any, code: str) -> None:
        callback(code, lock)

    def new_waiter(self, attempt: Any) -> SimulatedWaiter:
        return SimulatedWaiter(attempt, self.scheduler.event_set)

    def task_name(self, kind: str) -> str:
        self._tasks += 1
        return f'{self.name}/{kind}#{self._tasks}'

    def observe(self, event: Any, now: float) -> None:
        self.checker.event(self, event, now)

    def start(self, rng: SplitMix64, workload: Workload,
              caller: Callable[['SimulatedClient', SplitMix64, Workload], Script]) -> None:
        """Start the background heartbeat sender and checker, and the caller (``callers.caller``)."""
        from ..._core.heartbeat import background_loop
        host = self.orchestration
        period = self.settings.heartbeat_period
        for label, make_round in (('heartbeat', host.heartbeat_round), ('checker', host.checker_round)):
            loop = background_loop(f'heartbeat {label}', self.name, make_round, self.shutdown.is_set, period)
            self.scheduler.spawn_protocol(self, f'{self.name}/{label}', loop)
        working_on(self.checker, self.name)
        self.scheduler.spawn(self, f'{self.name}/caller', caller(self, rng, workload))

    def close(self) -> None:
        self.orchestration.releasing.begin_close()


def working_on(checker: Any, name: str) -> None:
    """A caller of the client ``name`` starts its work (the run's liveness check waits for it)."""
    if getattr(checker, 'liveness', None) is not None:
        checker.liveness.working_on(name)


def done_working(checker: Any, name: str) -> None:
    """A caller of the client ``name`` finished its work."""
    if getattr(checker, 'liveness', None) is not None:
        checker.liveness.done(name)

