"""The invariants a simulation checks about where it goes, rather than at every step:

* **liveness**: once every live client's caller has done its work, a caller's
  ``try_acquire_locks`` of every key, repeated every heartbeat period, gets them within
  :attr:`Liveness.bound` (a key held by a client that died, or left held by a request that
  landed late, is taken over once its lease is spent: this client has seen its version
  unchanged that long, over its calls - well before the row's TTL would free it); within
  :attr:`Liveness.session_bound` where a row is held under a session (its row lease is long)
  or shared;
* once the system settles (every live task done): **no orphan** - no row is held that no caller
  was handed (a row left by a release that failed is a handed one's; a row a late request
  wrote, or one its client reported it could not verify or free, is excused: it is taken over
  after its lease, which the liveness probe checks); **every loss reported** -
  a hold whose key's row got a larger token while it was open was told (``LOCK_STOLEN``, a
  release found stolen, a replaced lock lost), unless its client died.

And the table the workload needs: :func:`prepare_table` writes the application's items that
``lock_existing_item`` locks.
"""
from __future__ import annotations

from typing import AbstractSet, Any, Dict, List, Optional, Sequence

from ..._common.locks import HeldLock
from .clock import World
from .invariants import Checker, Violation, state_of
from .transport import SimulatedTransport

__all__ = ['EXISTING_KEYS', 'Liveness', 'prepare_table', 'settled']

#: The application's items (``lock_key|sort_key``) the workload locks with ``lock_existing_item``.
EXISTING_KEYS = ('e0|lock', 'e1|lock')


def prepare_table(transport: SimulatedTransport, checker: Checker) -> None:
    """Write the application's items, and tell the checker to watch them."""
    for key in EXISTING_KEYS:
        partition, sort = key.split('|')
        transport.table.handle('put_item', {'TableName': 'locks', 'Item': {
            'lock_key': {'S': partition}, 'sort_key': {'S': sort}, 'payload': {'S': f'the application data of {key}'}}})
    checker.existing = EXISTING_KEYS


class Liveness:
    """When the callers are done with their work, and how long a probe may wait (global seconds)."""

    def __init__(self, world: World, bound: float, session_bound: float) -> None:
        self.world = world
        self.bound = bound                    # for keys held without a session
        self.session_bound = session_bound    # for keys held under a session (or shared)
        self.working: Dict[str, int] = {}     # the callers still at work, by client
        self.quiet_since: Optional[float] = None

    def working_on(self, name: str) -> None:
        """One more caller of ``name`` (an asyncio client may have two) is at work."""
        self.working[name] = self.working.get(name, 0) + 1

    def done(self, name: str) -> None:
        """A caller of ``name`` finished its work."""
        left = self.working.pop(name, 0) - 1
        if left > 0:
            self.working[name] = left
        if not self.working and self.quiet_since is None:
            self.quiet_since = self.world.now

    def gone(self, name: str) -> None:
        """The client ``name`` died: none of its callers works any more."""
        self.working.pop(name, None)
        self.done(name)

    def waiting(self, client: object, started: float, keys: List[str], bound: float) -> None:
        """``client``'s probe, started at ``started``, did not get ``keys`` yet (within ``bound``)."""
        if self.quiet_since is None:
            return
        since = max(started, self.quiet_since)
        if self.world.now - since > bound:
            name = getattr(client, 'name', client)
            raise Violation(f'liveness: {name} has not acquired {keys} for {self.world.now - since:.6f}s since '
                            f'every caller was done (bound {bound:.1f}s)')


def settled(checker: Checker, clients: Sequence[Any], free_to_stay: AbstractSet[str] = frozenset()) -> None:
    """The checks once every live task is done (see the module docstring); ``free_to_stay``: the
    keys whose rows may stay held (``interruptions.SettlingChecker.settled`` says which)."""
    dead = {client.name for client in clients if getattr(client, 'dead', False)}
    for tenure in checker.closed:
        if tenure.superseded and not getattr(tenure.client, 'dead', False) and not tenure.forced \
                and id(tenure.lock) not in checker.reported:
            raise Violation(f'{tenure.client.name} lost {tenure.key} (token {tenure.token}, held from '
                            f'{tenure.start:.6f} to {tenure.end:.6f}: the row got a larger token meanwhile) and '
                            'was never told')
    handed = {(tenure.key, tenure.lock.owner_name, tenure.token) for tenure in checker.closed}
    versions = {version for tenure in checker.closed for version in _versions(tenure.lock)}
    for item in checker.transport.table.items():
        partition = item['lock_key']['S']
        key = f"{partition}|{item['sort_key']['S']}"
        owner = item.get('owner_name', {}).get('S')
        if partition == 'data' or partition.startswith('python_dynamodb_lock/session/') or owner is None \
                or 'released_at' in item or owner in dead:
            continue
        if 'shared_holders' in item:
            if item['shared_holders'].get('M'):
                raise Violation(f'orphan: the row of {key} is held shared once the system settled: {item}')
            continue
        if 'fencing_token' not in item or key in free_to_stay:
            continue
        token = int(item['fencing_token']['N'])
        version = item.get('record_version_number', {}).get('S')
        if token in checker.handed.get(key, ()) or (key, owner, token) in handed or version in versions \
                or (key, owner) in checker.excused:
            continue
        raise Violation(f'orphan: the row of {key} is held by {owner} with token {token} once the system settled, '
                        'and no caller was handed it')


def _versions(lock: Any) -> Sequence[str]:
    """The record version numbers a lock of ours wrote (none for a published-style lock)."""
    return list(state_of(lock).our_versions()) if isinstance(lock, HeldLock) else []
