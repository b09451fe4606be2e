"""A model of the published client (python-dynamodb-lock 0.9.1) beside ours, in the same run.

Written from the published contract (``REFERENCE_API.md``: "Taking over an abandoned lock",
"Heartbeats and callbacks", "The item in the table"), not from its code: a lock is a whole
item (key, ``owner_name``, ``lease_duration``, ``record_version_number``, the TTL) and carries
no fencing token;

* **acquire**: a consistent read; no item: a put conditioned on ``attribute_not_exists``; an
  item: remember when its ``record_version_number`` was first seen (the waiter's monotonic
  clock), and once that same version has stood for the item's own ``lease_duration``, overwrite
  it with a put conditioned on that version. A lost race is one more retry, every
  ``heartbeat_period``, until ``lease_duration + heartbeat_period``: then ``ACQUIRE_TIMEOUT``;
  any other failure: ``UNKNOWN``;
* **heartbeat**: once per ``heartbeat_period``, for every held lock, an update conditioned on
  its version writing a new version and TTL; refused: the lock is lost (``INVALID``); failed:
  retried next period (a write that landed unanswered then reads as a loss: published
  behaviour, safe);
* **release**: a delete conditioned on the lock's version, best effort.

Versions are drawn from the client's seeded generator (uuid4-shaped), so runs replay. The
checker records its holds as ours (believed while ``LOCKED`` on its own clock, within its safe
period, without a token): the runs check that published clients and ours never hold one key at
once. Its loss reports are only traced: the published client may report a loss that was its own
lost answer, which the no-``LOCK_STOLEN``-while-the-lease-ran rule holds against our clients.
"""
from __future__ import annotations

import dataclasses
import decimal
from typing import TYPE_CHECKING, Dict, Generator, List, Mapping, Optional, Union

from ..._core.answers import Applied, Failed, Refused
from ..._core.effects import Call, Effect, Emit, Sleep
from ..._core.events import Event, Kind
from ..._core.state import LockState, Status
from ..._model.errors import DynamoDBLockError
from ..._wire.requests import Request
from .chance import SplitMix64
from .clock import SimulatedClock
from .invariants import Checker
from .primitives import SimulatedEvent
from .scheduler import Idle, Outcome, Run, Scheduler, Script
from .transport import SimulatedTransport

if TYPE_CHECKING:
    from .clients import Workload

__all__ = ['PublishedClient', 'PublishedLock']

Answer = Union[Applied, Refused, Failed]
Steps = Generator[Effect, object, object]
TABLE, PARTITION, SORT = 'locks', 'lock_key', 'sort_key'


class PublishedLock:
    """A lock the published client holds (``DynamoDBLock``'s fields, and its state)."""

    def __init__(self, partition_key: str, sort_key: str, owner_name: str, state: LockState) -> None:
        self.partition_key, self.sort_key, self.owner_name = partition_key, sort_key, owner_name
        self.unique_identifier = f'{partition_key}|{sort_key}'
        self.fencing_token: Optional[int] = None
        self._state = state     # where the checker reads a lock's state, ours and these alike

    @property
    def state(self) -> LockState:
        return self._state

    def __repr__(self) -> str:
        return f'PublishedLock({self.unique_identifier})'


@dataclasses.dataclass(frozen=True)
class _Settings:
    heartbeat_period: float
    safe_period: float
    lease_duration: float
    expiry_period: float


class _Host:
    """What the scheduler asks of a client's orchestration: how its events are emitted, and
    the error a protocol raised as the caller sees it."""

    def __init__(self) -> None:
        self.local = {Emit: lambda effect: None}

    @staticmethod
    def public_error(error: DynamoDBLockError) -> DynamoDBLockError:
        return error


class PublishedClient:
    """One published-style client: a caller and a heartbeat sender, run by the scheduler."""

    def __init__(self, name: str, scheduler: Scheduler, transport: SimulatedTransport, clock: SimulatedClock,
                 checker: Checker, workload: 'Workload') -> None:
        self.name, self.scheduler, self.transport, self.clock, self.checker = name, scheduler, transport, clock, checker
        self.settings = _Settings(workload.heartbeat_period, workload.safe_period, workload.lease_duration,
                                  workload.lease_duration * 10)
        self.orchestration = _Host()
        self.paused_until = 0.0
        self.shutdown = SimulatedEvent(scheduler.event_set)
        self.held: List[PublishedLock] = []
        self._rng = SplitMix64(0)
        self._tasks = 0

    def task_name(self, kind: str) -> str:
        self._tasks += 1
        return f'{self.name}/{kind}#{self._tasks}'

    def observe(self, event: Event, now: float) -> None:
        if event.kind is Kind.TAKING_OVER:
            self.checker.event(self, event, now)

    def start(self, rng: SplitMix64, workload: 'Workload', caller: object = None) -> None:
        """Start its heartbeat sender and its own caller (``caller``, the wide workload's, is not used)."""
        self._rng = rng.fork()
        if getattr(self.checker, 'liveness', None) is not None:
            self.checker.liveness.working_on(self.name)
        self.scheduler.spawn_protocol(self, f'{self.name}/heartbeat', self._heartbeats())
        self.scheduler.spawn(self, f'{self.name}/caller', self._caller(rng, workload))

    # -- the caller ----------------------------------------------------------------------------
    def _caller(self, rng: SplitMix64, workload: 'Workload') -> Script:
        """``operations`` times: acquire a key (``acquire_lock``, the published defaults), hold
        it a while, release it; then close (without releasing, as published)."""
        for _ in range(workload.operations):
            key = f'k{rng.below(workload.keys)}'
            outcome: Outcome = yield Run(self._acquire(key, 'lock'))
            lock = outcome.value
            if outcome.error is None and isinstance(lock, PublishedLock):
                tenure = self.checker.acquired(self, lock)
                yield Idle(rng.uniform(0.0, workload.hold))
                self.checker.leaving(tenure)
                yield Run(self._release(lock))
            elif outcome.error is not None and not isinstance(outcome.error, DynamoDBLockError):
                raise outcome.error
            yield Idle(rng.uniform(0.0, workload.think))
        if getattr(self.checker, 'liveness', None) is not None:
            self.checker.liveness.done(self.name)
        self.shutdown.set()

    def _version(self) -> str:
        digits = f'{self._rng.next():016x}{self._rng.next():016x}'
        return f'{digits[:8]}-{digits[8:12]}-4{digits[13:16]}-{digits[16:20]}-{digits[20:]}'

    def _item(self, key: str, sort_key: str, version: str) -> Dict[str, object]:
        return {PARTITION: key, SORT: sort_key, 'owner_name': self.name,
                'lease_duration': decimal.Decimal(repr(self.settings.lease_duration)),
                'record_version_number': version,
                'expiry_time': int(self.clock.time() + self.settings.expiry_period)}

    def _acquire(self, key: str, sort_key: str) -> Steps:
        settings = self.settings
        deadline = self.clock.monotonic() + settings.lease_duration + settings.heartbeat_period
        seen: Optional[str] = None
        seen_at = 0.0
        while True:
            read = yield Call(Request('get_item', {'TableName': TABLE, 'Key': {PARTITION: key, SORT: sort_key},
                                                   'ConsistentRead': True}))
            if not isinstance(read, Applied):
                raise DynamoDBLockError(DynamoDBLockError.UNKNOWN, f'could not read the lock: {read!r}')
            item = read.response.get('Item')
            now = self.clock.monotonic()
            condition: Optional[Mapping[str, object]] = None
            if item is None:
                condition = {'ConditionExpression': 'attribute_not_exists(#pk)',
                             'ExpressionAttributeNames': {'#pk': PARTITION}}
            else:
                version = item.get('record_version_number')
                if version != seen:
                    seen, seen_at = version, now
                if self._abandoned(item, now - seen_at):
                    yield Emit(Event(Kind.TAKING_OVER, f'{key}|{sort_key}', None, {'owner': item.get('owner_name')}))
                    condition = {'ConditionExpression': 'record_version_number = :v',
                                 'ExpressionAttributeValues': {':v': version}}
            if condition is not None:
                lock = yield from self._put(key, sort_key, condition)
                if lock is not None:
                    return lock
            if self.clock.monotonic() >= deadline:
                raise DynamoDBLockError(DynamoDBLockError.ACQUIRE_TIMEOUT, f'could not acquire {key}|{sort_key}')
            yield Sleep(settings.heartbeat_period)

    @staticmethod
    def _abandoned(item: Mapping[str, object], seen_for: float) -> bool:
        """The published rule: the same version has stood for the item's own lease."""
        return seen_for >= float(str(item.get('lease_duration') or 0))

    def _put(self, key: str, sort_key: str, condition: Mapping[str, object]) -> Steps:
        version = self._version()
        sent = self.clock.monotonic()
        item = self._item(key, sort_key, version)
        answer = yield Call(Request('put_item', {'TableName': TABLE, 'Item': item, **condition}))
        if isinstance(answer, Refused):
            return None     # a lost race: one more retry
        if not isinstance(answer, Applied):
            raise DynamoDBLockError(DynamoDBLockError.UNKNOWN, f'could not write the lock: {answer!r}')
        state = LockState(version, int(str(item['expiry_time'])), sent, self.settings.lease_duration)
        state.acquired(sent, None, None)
        lock = PublishedLock(key, sort_key, self.name, state)
        self.held.append(lock)
        return lock

    # -- release and heartbeats ----------------------------------------------------------------
    def _release(self, lock: PublishedLock) -> Steps:
        state = lock.state
        if state.status != Status.LOCKED:
            return None
        if lock in self.held:
            self.held.remove(lock)
        answer = yield Call(Request('delete_item', {
            'TableName': TABLE, 'Key': {PARTITION: lock.partition_key, SORT: lock.sort_key},
            'ConditionExpression': 'record_version_number = :v', 'ExpressionAttributeValues': {':v': state.version}}))
        state.forget(Status.RELEASED if isinstance(answer, Applied) else Status.INVALID)
        return None     # best effort: forgotten either way

    def _heartbeats(self) -> Steps:
        while not self.shutdown.is_set():
            yield Sleep(self.settings.heartbeat_period)
            for lock in list(self.held):
                state = lock.state
                if state.status != Status.LOCKED or self.shutdown.is_set():
                    continue
                version, sent = self._version(), self.clock.monotonic()
                answer = yield Call(Request('update_item', {
                    'TableName': TABLE, 'Key': {PARTITION: lock.partition_key, SORT: lock.sort_key},
                    'UpdateExpression': 'SET record_version_number = :new, expiry_time = :ttl',
                    'ConditionExpression': 'record_version_number = :v',
                    'ExpressionAttributeValues': {':new': version, ':v': state.version,
                                                  ':ttl': int(self.clock.time() + self.settings.expiry_period)}}))
                if isinstance(answer, Applied) and state.status == Status.LOCKED:
                    state.version, state.last_confirmed = version, sent
                elif isinstance(answer, Refused) and state.status == Status.LOCKED:
                    state.forget(Status.INVALID)
                    if lock in self.held:
                        self.held.remove(lock)
                    self.scheduler.note(f'published: {lock.unique_identifier} lost (LOCK_STOLEN reported)')
        return None
