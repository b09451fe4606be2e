"""Simulated lock clients: the orchestration of a real client (``Orchestration`` over a
``ClientState`` made by ``make_state``, as ``DynamoDBLockClient.__init__`` makes them), served by
the simulation's scheduler instead of the thread driver, with a simulated clock, a simulated
transport and lock objects whose mutex is a :class:`~.primitives.SimulatedMutex`; and the
scripted workload of one client's caller.
"""
from __future__ import annotations

import contextlib
import dataclasses
import datetime
from typing import Any, Optional

from ..._client.call import acquire_call
from ..._client.context import check_construction, make_state
from ..._client.orchestration import Orchestration
from ..._core.state import null_guard
from ..._model.errors import DynamoDBLockError
from ..._common.locks import HeldLock
from .chance import SplitMix64
from .clock import SimulatedClock
from .invariants import Checker
from .primitives import SimulatedEvent, SimulatedMutex, SimulatedWaiter
from .scheduler import Idle, Outcome, Run, Scheduler, Script
from .transport import SimulatedTransport

__all__ = ['SimulatedClient', 'SimulatedLock', 'Workload', 'caller']


@dataclasses.dataclass(frozen=True)
class Workload:
    """What each client's caller does, and the clients' settings (seconds)."""

    clients: int = 3
    keys: int = 2
    operations: int = 4          # acquisitions per caller
    try_share: float = 0.3       # the share of them made with try_acquire_lock (one attempt)
    first_share: float = 0.2     # of the others, the share made with acquire_first_lock (of 2 sort keys)
    hold: float = 4.0            # a hold lasts up to this long
    think: float = 2.0           # a caller rests up to this long between two acquisitions
    heartbeat_period: float = 1.0
    safe_period: float = 4.0
    lease_duration: float = 6.0
    max_clock_skew: float = 1.0
    max_rate_drift: float = 0.001   # a client's monotonic clock runs at 1 +- this
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

    def __init__(self, name: str, scheduler: Scheduler, transport: SimulatedTransport, clock: SimulatedClock,
                 checker: Checker, workload: Workload) -> None:
        self.name = name
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
            expiry_period=seconds(seconds=workload.lease_duration * 10), heartbeat_tps=-1, heartbeat_workers=None,
            heartbeat_batch_size=1, keep_released_rows=True, max_clock_skew=seconds(seconds=workload.max_clock_skew))
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

    def start(self, rng: SplitMix64, workload: Workload) -> None:
        """Start the background heartbeat sender and checker, and the caller."""
        from ..._core.heartbeat import background_loop
        host = self.orchestration
        period = self.settings.heartbeat_period
        for label, make_round in (('heartbeat', host.heartbeat_round), ('checker', host.checker_round)):
            loop = background_loop(f'heartbeat {label}', self.name, make_round, self.shutdown.is_set, period)
            self.scheduler.spawn_protocol(self, f'{self.name}/{label}', loop)
        self.scheduler.spawn(self, f'{self.name}/caller', caller(self, rng, workload))

    def close(self) -> None:
        self.orchestration.releasing.begin_close()


def _raise_unexpected(outcome: Outcome) -> Optional[DynamoDBLockError]:
    """A protocol's error the caller expects (a DynamoDBLockError), or raise what it is not."""
    if outcome.error is None:
        return None
    if not isinstance(outcome.error, DynamoDBLockError):
        raise outcome.error
    return outcome.error


def caller(client: SimulatedClient, rng: SplitMix64, workload: Workload) -> Script:
    """One client's caller: ``operations`` times, acquire a key (``acquire_lock``;
    ``try_acquire_lock`` for ``try_share`` of them; ``acquire_first_lock`` of two sort keys for
    ``first_share`` of the others), hold it a while, release it; then close the client."""
    host = client.orchestration
    state = host.state
    holder = object()    # the thread of this caller, for reentrancy
    for _ in range(workload.operations):
        key = f'k{rng.below(workload.keys)}'
        trying = rng.chance(workload.try_share)
        if not trying and rng.chance(workload.first_share):
            attempts = host.acquiring.first_attempts(key, ['lock', 'spare'], None, None, None, None)
            outcome = yield Run(host.acquiring.first(attempts, holder, None, True))   # wake: the shutdown
        else:
            call = acquire_call(state, key, 'lock', None, datetime.timedelta(0) if trying else None, None, None,
                                False, not trying)
            held, waiter = host.acquiring.queue(call, holder, client.new_waiter)
            assert held is None and waiter is not None
            outcome = yield Run(host.acquiring.acquisition(waiter, holder, call), waiter)
        _raise_unexpected(outcome)
        if outcome.error is None and outcome.value is not None:
            lock = outcome.value
            tenure = client.checker.acquired(client, lock)
            yield Idle(rng.uniform(0.0, workload.hold))
            client.checker.leaving(tenure)
            _raise_unexpected((yield Run(host.releasing.releasing(lock, True))))
        yield Idle(rng.uniform(0.0, workload.think))
    client.close()

