"""The scripted callers of the simulated clients: what each client's application does, chosen by
the seed - every acquire entry point (``acquire_lock``, ``try_acquire_lock``,
``acquire_first_lock``, ``acquire_locks``, ``try_acquire_locks``) with the features it takes
(shared, per-lock lease, keep_row, existing items; a client made with ``session=True``), and
while holding: ``extend``, ``update_attributes``, a guarded write, a read (``get_lock``); the
release, with attributes or not; now and then an operator's ``force_release_lock``; at the end
a liveness probe (``try_acquire_locks`` of every key, repeated until it gets them, within a
bound); then ``close()`` (unless another thread closed the client first: a fault).

Each call goes down to the orchestration exactly as the public face's does (``_calls.py``).
"""
from __future__ import annotations

import datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Dict, Generator, List, Mapping, Optional, Tuple, Union

from ..._client.call import acquire_call
from ..._core.effects import Drop, Hold, Protocol
from ..._model.errors import DynamoDBLockError
from ..._common.locks import HeldLock
from .chance import SplitMix64
from .scheduler import Idle, Outcome, Run, Script

if TYPE_CHECKING:
    from .clients import SimulatedClient, Workload

__all__ = ['DATA_KEY', 'EXISTING_KEY', 'caller']

#: The partition key of the items the guarded writes write (sort key: the lock's key).
DATA_KEY = 'data'
#: The partition key of the application's items locked with ``lock_existing_item=True``.
EXISTING_KEY = 'e'
_SECONDS = datetime.timedelta
#: A part of a caller's script that ends with the locks it got.
Getting = Generator[Any, Outcome, List[HeldLock]]


def raise_unexpected(outcome: Outcome) -> Optional[DynamoDBLockError]:
    """A protocol's error the caller expects (a DynamoDBLockError), or raise what it is not."""
    if outcome.error is None:
        return None
    if not isinstance(outcome.error, DynamoDBLockError):
        raise outcome.error
    return outcome.error


def _under_mutex(lock: HeldLock, protocol: Protocol[Any]) -> Protocol[Any]:
    """What the thread client does around ``lock.extend()``: the protocol under the lock's mutex."""
    yield Hold(lock)
    try:
        return (yield from protocol)
    finally:
        yield Drop(lock)


def caller(client: 'SimulatedClient', rng: SplitMix64, workload: 'Workload') -> Script:
    """One client's caller (see the module docstring)."""
    holder = object()    # the thread of this caller, for reentrancy
    host = client.orchestration
    for _ in range(workload.operations):
        if host.state.closed:      # closed by another thread: what is left would be refused
            break
        if rng.chance(workload.force_share):
            yield from _force_release(client, rng, workload)
        if rng.chance(workload.set_share):
            locks = yield from _acquire_set(client, rng, workload, holder)
        elif rng.chance(workload.first_share):
            locks = yield from _acquire_first(client, rng, workload, holder)
        else:
            locks = yield from _acquire_one(client, rng, workload, holder)
        if locks:
            yield from _hold(client, rng, workload, locks)
        yield Idle(rng.uniform(0.0, workload.think))
    if workload.probe and not host.state.closed:
        yield from _probe(client, rng, workload, holder)
    else:
        client.checker.liveness.done(client.name)
    host.releasing.begin_close()
    raise_unexpected((yield Run(host.sessions.ending())))


def _keys(rng: SplitMix64, workload: 'Workload', count: int) -> List[str]:
    """``count`` distinct keys of the ``workload.keys`` keys, in an order chosen by the seed."""
    keys = [f'k{index}' for index in range(workload.keys)]
    chosen = []
    for _ in range(min(count, len(keys))):
        chosen.append(keys.pop(rng.below(len(keys))))
    return chosen


def _acquire_one(client: 'SimulatedClient', rng: SplitMix64, workload: 'Workload',
                 holder: object) -> Getting:
    """``acquire_lock`` or ``try_acquire_lock`` of one key: shared, on an existing item, with its
    own lease, or keeping no row, as the seed says."""
    host = client.orchestration
    trying = rng.chance(workload.try_share)
    options: Dict[str, Any] = {}
    key, sort_key = _keys(rng, workload, 1)[0], 'lock'
    if rng.chance(workload.existing_share):
        key = f'{EXISTING_KEY}{rng.below(2)}'
        options.update(lock_existing_item=True, only_if_exists=rng.chance(0.5))
    elif not client.session and rng.chance(workload.shared_share):
        options['shared'] = True
    if rng.chance(workload.lease_share):
        options['lease_duration'] = _SECONDS(seconds=workload.lease_duration * (0.75 if rng.chance(0.5) else 1.5))
    if not options.get('lock_existing_item') and rng.chance(workload.keep_row_share):
        options['keep_row'] = False
    call = acquire_call(host.state, key, sort_key, None, _SECONDS(0) if trying else None, None, None, False,
                        not trying, **options)
    held, waiter = host.acquiring.queue(call, holder, client.new_waiter)
    assert held is None and waiter is not None
    outcome = yield Run(host.acquiring.acquisition(waiter, holder, call), waiter)
    raise_unexpected(outcome)
    return [outcome.value] if outcome.value is not None else []


def _acquire_first(client: 'SimulatedClient', rng: SplitMix64, workload: 'Workload', holder: object) -> Getting:
    """``acquire_first_lock`` of two sort keys."""
    host = client.orchestration
    key = _keys(rng, workload, 1)[0]
    attempts = host.acquiring.first_attempts(key, ['lock', 'spare'], None, None, None, None)
    outcome = yield Run(host.acquiring.first(attempts, holder, None, True))   # wake: the shutdown
    raise_unexpected(outcome)
    return [outcome.value] if outcome.value is not None else []


def _acquire_set(client: 'SimulatedClient', rng: SplitMix64, workload: 'Workload', holder: object,
                 trying: Optional[bool] = None, keys: Optional[List[str]] = None,
                 timeout: Optional[datetime.timedelta] = None) -> Getting:
    """``acquire_locks`` (for ``timeout``, None: the default) or ``try_acquire_locks`` of two
    keys (or ``keys``); the checker is told what was asked and what was handed."""
    host = client.orchestration
    trying = rng.chance(workload.try_share) if trying is None else trying
    keys = _keys(rng, workload, 2) if keys is None else keys
    attempts = host.several.attempts([(key, 'lock') for key in keys], None, _SECONDS(0) if trying else timeout,
                                     None, None)
    outcome = yield Run(host.several.acquiring(attempts, holder, not trying, _no_callback, True))
    raise_unexpected(outcome)
    locks: List[HeldLock] = list(outcome.value or [])
    client.checker.set_outcome(client, [attempt.unique_identifier for attempt in attempts], locks)
    return locks


def _no_callback(code: str, lock: HeldLock) -> None:
    """The multi-lock's member callback (nothing to do: the checker hears the events)."""


def _hold(client: 'SimulatedClient', rng: SplitMix64, workload: 'Workload', locks: List[HeldLock]) -> Script:
    """Hold ``locks`` a while, now and then extending one, updating its attributes, writing
    through it or reading its row; then release them."""
    host = client.orchestration
    tenures = [client.checker.acquired(client, lock) for lock in locks]
    exclusive = [lock for lock in locks if not lock.shared]
    steps = 1 + rng.below(3)
    for _ in range(steps):
        yield Idle(rng.uniform(0.0, workload.hold / steps))
        if not exclusive or not rng.chance(workload.extra_share):
            continue
        lock = exclusive[rng.below(len(exclusive))]
        action = rng.below(4)
        if action == 0 and (workload.extend_in_session or not client.session):
            protocol: Protocol[Any] = _under_mutex(lock, host.renewing.extending(lock))
        elif action == 1 and not lock.lock_existing_item:
            protocol = host.renewing.updating(lock, {'note': Decimal(rng.below(100))}, ())
        elif action == 2:
            protocol = _guarded_write(client, lock if len(locks) == 1 else tuple(locks))
        else:
            protocol = host.listing.reading(lock.partition_key, lock.sort_key)
        raise_unexpected((yield Run(protocol)))
    for tenure in tenures:
        client.checker.leaving(tenure)
    if len(locks) > 1:
        raise_unexpected((yield Run(host.several.releasing(locks, True))))   # type: ignore[arg-type]
        return
    lock = locks[0]
    attributes: Optional[Mapping[str, Any]] = None
    keep_row: Optional[bool] = None
    if not lock.shared and not lock.lock_existing_item and rng.chance(workload.extra_share):
        attributes, keep_row = {'left_by': client.name}, True
    attributes = host.releasing.attributes(lock, attributes, keep_row)
    raise_unexpected((yield Run(host.releasing.releasing(lock, True, attributes, keep_row))))


def _guarded_write(client: 'SimulatedClient', lock: Union[HeldLock, Tuple[HeldLock, ...]]) -> Protocol[Any]:
    """``lock.transact_write_items``: the data item of each key the lock (or set) holds, naming
    the writer and the lock's fencing token."""
    locks: Tuple[HeldLock, ...] = lock if isinstance(lock, tuple) else (lock,)
    client.writes += 1     # each landing changes the item, so that the checker sees every one
    items = [{'Put': {'TableName': 'locks', 'Item': {
        'lock_key': DATA_KEY, 'sort_key': each.unique_identifier, 'writer': client.name,
        'token': Decimal(each.fencing_token if each.fencing_token is not None else -1),
        'write': Decimal(client.writes)}}} for each in locks]
    return client.orchestration.renewing.guarded(lock, items, False, {}, None, client.transport.wire)


def _force_release(client: 'SimulatedClient', rng: SplitMix64, workload: 'Workload') -> Script:
    """An operator's ``get_lock`` then ``force_release_lock`` of a key (its holder is told by
    the checker that its hold was ended by force)."""
    listing = client.orchestration.listing
    outcome = yield Run(listing.reading(_keys(rng, workload, 1)[0], 'lock'))
    if raise_unexpected(outcome) is None and outcome.value is not None:
        found = outcome.value
        client.checker.forcing(found.unique_identifier, found.record_version_number, found.owner_name)
        raise_unexpected((yield Run(listing.force_releasing(found))))


def _probe(client: 'SimulatedClient', rng: SplitMix64, workload: 'Workload', holder: object) -> Script:
    """Liveness: ``try_acquire_locks`` of every key, again every heartbeat period, must get them
    within the bound the checker gives (a key held by a client that died is taken over after
    its lease: this client has seen its version unchanged that long)."""
    keys = [f'k{index}' for index in range(workload.keys)]
    started = client.scheduler.world.now
    bound = 0.0
    client.checker.liveness.done(client.name)
    while not client.orchestration.state.closed:    # (another thread may close the client meanwhile)
        # try_acquire_locks keeps no memory of shared holders across calls (each call's watch of
        # them starts over), so it never takes over a shared entry left behind: a key held shared
        # is probed with acquire_locks, which watches the entries for as long as the bound.
        liveness = client.checker.liveness
        shared, in_session = _held_how(client, keys)
        # (once a key was held under a session or shared, the probe has the longer bound)
        bound = max(bound, liveness.session_bound if shared or in_session else liveness.bound)
        locks = yield from _acquire_set(client, rng, workload, holder, trying=not shared, keys=keys,
                                        timeout=_SECONDS(seconds=bound))
        if locks:
            tenures = [client.checker.acquired(client, lock) for lock in locks]
            yield Idle(rng.uniform(0.0, workload.heartbeat_period))
            for tenure in tenures:
                client.checker.leaving(tenure)
            raise_unexpected((yield Run(client.orchestration.several.releasing(locks, True))))  # type: ignore[arg-type]
            return
        liveness.waiting(client, started, keys, bound)
        yield Idle(workload.heartbeat_period)


def _held_how(client: 'SimulatedClient', keys: List[str]) -> Tuple[bool, bool]:
    """Whether a row of ``keys`` has shared holders now, and whether one is held under a
    session (read from the simulated table)."""
    wanted = {(key, 'lock') for key in keys}
    rows = [item for item in client.transport.table.items() if (item['lock_key']['S'], item['sort_key']['S']) in wanted]
    return (any(item.get('shared_holders', {}).get('M') for item in rows),
            any('lock_session' in item and 'released_at' not in item for item in rows))
