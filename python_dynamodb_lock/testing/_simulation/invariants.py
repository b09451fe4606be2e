"""The invariants a simulation checks after every step, against the clients and the table.

* **one exclusive holder**: no two holds of one key are believed at once, where a hold is
  believed while its caller is between the acquisition's return and the start of its release
  and the lock reads ``LOCKED`` on its holder's own clock (``LockState.status_at``: held, and
  renewed within its safe period; the check the library tells applications to make);
* **fencing tokens strictly grow** per key: the token of a key's row in the table never goes
  down, no token is handed to two acquisitions, and a believed hold carries the largest token
  handed out for its key (an acquisition may return after a pause longer than its lease, with
  a token already superseded: its holder must not believe it - and does not, as its lock then
  reads ``IN_DANGER``);
* **no LOCK_STOLEN while the holder's lease ran**: every loss reported to a holder (``stolen``,
  ``replaced_lost``, ``release_stolen``) follows a takeover of that key from that holder
  (``taking_over``) claimed after the holder's lease was spent - its last confirmed renewal's
  send plus its lease, read on the fastest client clock - and before the report (the rule of
  ``tests/_torture/verdict.py``, which the package cannot import, written here for one
  simulated global time).
* **never an exclusive holder beside a shared one** (nor two exclusive ones): the first rule,
  with shared holds counted;
* **a set is held whole or not at all**: ``acquire_locks`` / ``try_acquire_locks`` hand every
  key asked for or none, and a hold of a set handed over is believed only where its row
  carries it;
* **every session-held row has its session row**: while a hold of a client with a session is
  open and its row carries it, the session row it names is in the table;
* **a guarded write by a holder that lost its lock never lands**: when a data item written by
  a guarded write changes, the lock row of its key carries the writer's name and token;
* the rest (an application's item locked with ``lock_existing_item`` is never deleted, no
  orphan row once the system settles, every loss reported, liveness): ``settling.py``.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Dict, List, Optional, Sequence, Set, Tuple

from ..._core.events import Event, Kind
from ..._core.state import LockState, Status
from ..._common.locks import HeldLock
from ..._model.schema import COL_LOCK_SESSION

__all__ = ['Checker', 'Tenure', 'Violation', 'state_of']

_LOSSES = frozenset({Kind.STOLEN, Kind.REPLACED_LOST, Kind.RELEASE_STOLEN})
# What else tells a holder that its hold may be over: its release found no row, or failed.
_TOLD = frozenset({Kind.RELEASE_ROW_GONE, Kind.RELEASE_FAILED_FORGOTTEN, Kind.RELEASE_FAILED})


def state_of(lock: HeldLock) -> LockState:
    """A held lock's protocol state: what the checker reads of it (the one place it does)."""
    return lock._state


class Violation(AssertionError):
    """An invariant broke (the message says which, and how)."""


@dataclasses.dataclass
class Tenure:
    """One hold, as its caller relies on it."""

    client: Any
    lock: Any
    key: str
    token: Optional[int]
    start: float
    end: Optional[float] = None
    shared: bool = False
    superseded: bool = False     # its key's row got a larger token while it was open
    forced: bool = False         # an operator force-released it

    def believed(self) -> bool:
        if getattr(self.client, 'dead', False) or self.forced:
            return False
        state = state_of(self.lock)
        safe = state.safe_period if state.safe_period is not None else self.client.settings.safe_period
        return self.end is None and state.status_at(self.client.clock.monotonic(), safe) == Status.LOCKED


class Checker:
    """Records holds, takeovers and loss reports, and raises :class:`Violation` at the first
    broken invariant (see the module docstring). ``max_rate``: the fastest client clock's rate."""

    def __init__(self, world: Any, max_rate: float, transport: Any = None) -> None:
        self.world = world
        self.transport = transport
        self._rows_seen_at = -1
        self.row_tokens: Dict[str, int] = {}
        self.max_rate = max_rate
        self.open: Dict[str, List[Tenure]] = {}
        self.tokens: Dict[str, int] = {}        # the largest token handed out, by key
        self.handed: Dict[str, Set[int]] = {}
        self.claims: List[Tuple[str, str, float]] = []
        self.acquisitions = 0
        self.takeovers = 0
        self.losses = 0
        self.held_seconds = 0.0
        self.closed: List[Tenure] = []
        self.reported: Set[int] = set()          # id() of the locks a loss was reported to
        self.forced: Set[Tuple[str, str]] = set()
        self.forced_versions: Set[str] = set()
        self.forced_keys: Dict[str, float] = {}
        #: Rows (key, owner) a client may have left held without handing them to a caller: a late
        #: request landed there, or the client reported a write it could not verify or undo.
        self.excused: Set[Tuple[str, Optional[str]]] = set()
        self.data: Dict[str, Tuple[str, int, str]] = {}   # per key: the writer, token and write of its data item
        self.existing: Tuple[str, ...] = ()      # the keys of the application's items
        self.liveness: Any = None                # settling.Liveness, when the run has one
        self.strict_loss_reports = False         # see Workload.strict_loss_reports

    def acquired(self, client: Any, lock: Any) -> Tenure:
        key = lock.unique_identifier
        shared = bool(getattr(lock, 'shared', False))
        token = None if shared else lock.fencing_token
        handed = self.handed.setdefault(key, set())
        if token is not None:
            if token in handed:
                raise Violation(f'fencing token {token} of {key} handed out twice (now to {client.name})')
            handed.add(token)
            self.tokens[key] = max(token, self.tokens.get(key, token))
        tenure = Tenure(client, lock, key, token, self.world.now, shared=shared, forced=self._forced(lock))
        self.open.setdefault(key, []).append(tenure)
        self.acquisitions += 1
        return tenure

    def leaving(self, tenure: Tenure) -> None:
        tenure.end = self.world.now
        self.held_seconds += tenure.end - tenure.start
        self.open[tenure.key].remove(tenure)
        self.closed.append(tenure)

    def died(self, client: object) -> None:
        """``client`` died: its holds end (nobody believes them any more)."""
        for tenures in self.open.values():
            for tenure in [each for each in tenures if each.client is client]:
                self.leaving(tenure)

    def forcing(self, key: str, version: Optional[str], owner: Optional[str]) -> None:
        """An operator force-releases the row of ``key`` carrying ``version`` (held by ``owner``):
        its holders, if they still have it, lose it by force (a loss that needs no takeover after
        its lease; a hold of that version handed over later is forced too)."""
        self.forced_versions.add(str(version))
        self.forced_keys[key] = self.world.now
        self.forced.add((key, str(owner)))
        for tenure in self.open.get(key, []):
            # (its holder's own write in flight may have put that version there: matched by owner)
            if tenure.shared or version in state_of(tenure.lock).our_versions() or tenure.lock.owner_name == owner:
                tenure.forced = True
                self.forced.add((key, tenure.lock.owner_name))

    def _forced(self, lock: HeldLock) -> bool:
        """Whether ``lock`` was handed over after an operator force-released its row (a shared
        lock: after one force-released its key within a lease, whatever the version)."""
        if getattr(lock, 'shared', False):
            at = self.forced_keys.get(lock.unique_identifier)
            return at is not None and self.world.now - at <= state_of(lock).lease_duration
        return any(version in self.forced_versions for version in state_of(lock).our_versions())

    def set_outcome(self, client: Any, keys: List[str], locks: Sequence[HeldLock]) -> None:
        """A set acquisition returned ``locks`` for ``keys``: all of them or none."""
        if locks and sorted(lock.unique_identifier for lock in locks) != sorted(keys):
            raise Violation(f'{client.name} was handed part of the set {keys}: '
                            f'{[lock.unique_identifier for lock in locks]}')
        if not locks:
            return
        rows = {f"{item['lock_key']['S']}|{item['sort_key']['S']}": item for item in self.transport.table.items()}
        for lock in locks:
            row = rows.get(lock.unique_identifier)
            version = None if row is None else row.get('record_version_number', {}).get('S')
            safe = state_of(lock).safe_period or client.settings.safe_period
            if version not in state_of(lock).our_versions() and not self._forced(lock) and \
                    state_of(lock).status_at(client.clock.monotonic(), safe) == Status.LOCKED:
                raise Violation(f'{client.name} believes it holds the set {keys} but the row of '
                                f'{lock.unique_identifier} does not carry it')

    def event(self, client: Any, event: Event, now: float) -> None:
        if event.kind is Kind.TAKING_OVER:
            self.claims.append((event.key, str(event.fields.get('owner')), now))
            self.takeovers += 1
        elif event.kind in (Kind.ORPHAN_UNVERIFIED, Kind.ORPHAN_CLEANUP_FAILED, Kind.SETTLE_FAILED):
            self.excused.add((event.key, client.name))   # the client says it may have left the row
        elif event.kind is Kind.RELEASED and event.lock is not None and not self.strict_loss_reports \
                and state_of(event.lock).release_maybe_applied:
            # Known defect (tolerated unless strict_loss_reports): a release whose write may have
            # landed, finding the row released by the next holder (a larger fencing token), says
            # "released" - it was taken over meanwhile.
            self.reported.add(id(event.lock))
        elif event.kind in _TOLD and event.lock is not None:
            self.reported.add(id(event.lock))      # the release tells its caller: not released by it
        elif event.kind in _LOSSES and event.lock is not None:
            self.losses += 1
            self.reported.add(id(event.lock))
            if (event.key, event.lock.owner_name) not in self.forced:
                self._check_loss(client, event, now)

    def _check_loss(self, client: Any, event: Event, now: float) -> None:
        lock = event.lock
        state = state_of(lock)
        last_renewed = client.clock.to_global(state.last_confirmed)
        spent = last_renewed + state.lease_duration / self.max_rate
        owner = lock.owner_name
        # (a shared row names one of its holders as its owner: a takeover of it ends every entry;
        # a takeover of any key of a session ends the session, and so every lock under it)
        shared = bool(getattr(lock, 'shared', False))
        session = getattr(state, 'session_id', None) is not None
        if event.kind is Kind.RELEASE_STOLEN and state.release_maybe_applied and spent <= now:
            # The rule of _core.release._held_by_another_after_us: a release whose write may have
            # landed after its lease ran out, finding the key acquired by another since, cannot
            # tell a takeover from its own landed release followed by a plain acquisition; it
            # reports the loss it cannot exclude (a loss told that did not happen leaves nothing held).
            return
        if not any((key == event.key or session) and (claimed == owner or shared) and spent - 1e-9 <= at <= now
                   for key, claimed, at in self.claims):
            raise Violation(f'{event.kind.value} reported to {owner} for {event.key} at {now:.6f} while its lease ran: '
                            f'no takeover of it from {owner} was claimed between {spent:.6f} (last confirmed renewal '
                            f'{last_renewed:.6f} + lease {state.lease_duration}) and then')

    def check(self) -> None:
        """One exclusive holder per key, now, holding the key's largest token; no row's token
        went down."""
        if self.transport is not None and self.transport.sent != self._rows_seen_at:
            self._rows_seen_at = self.transport.sent
            self._check_rows()
        for key, tenures in self.open.items():
            believed = [tenure for tenure in tenures if tenure.believed()]
            if len(believed) > 1 and not all(tenure.shared for tenure in believed):
                holders = ', '.join(f'{tenure.client.name} ({"shared" if tenure.shared else "exclusive"}, token '
                                    f'{tenure.token}, since {tenure.start:.6f})' for tenure in believed)
                what = 'an exclusive holder beside a shared one' if any(tenure.shared for tenure in believed) else \
                    'two exclusive holders'
                raise Violation(f'{what} of {key} at {self.world.now:.6f}, all LOCKED on their own clocks: {holders}')
            for tenure in believed:
                if tenure.shared:
                    continue
                if tenure.token is not None and tenure.token != self.tokens[key]:
                    raise Violation(f'{tenure.client.name} believes it holds {key} (LOCKED on its clock) with token '
                                    f'{tenure.token}, superseded by token {self.tokens[key]}')

    def _check_rows(self) -> None:
        rows: Dict[str, Dict[str, Any]] = {}
        for item in self.transport.table.items():
            key = f"{item['lock_key']['S']}|{item['sort_key']['S']}"
            rows[key] = item
            token = item.get('fencing_token')
            if token is None or item['lock_key']['S'] == 'data':
                continue
            value = int(token['N'])
            last = self.row_tokens.get(key)
            if last is not None and value < last:
                raise Violation(f'the fencing token of the row of {key} went down from {last} to {value}')
            if last is not None and value > last:
                for tenure in self.open.get(key, []):
                    if tenure.token is not None and tenure.token < value:
                        tenure.superseded = True
            self.row_tokens[key] = value
        for key in [key for key in self.row_tokens if key not in rows]:
            # A row deleted (keep_row=False): the next token starts from its writer's wall clock,
            # larger only as long as the clocks agree to within the time the row was gone
            # (token_floor, documented): the token's history starts over.
            del self.row_tokens[key]
            self.tokens.pop(key, None)
        self._check_data(rows)
        self._check_sessions(rows)
        for key in self.existing:
            if 'payload' not in rows.get(key, {}):
                raise Violation(f'the application item {key}, locked with lock_existing_item=True, lost its '
                                f'attributes: {rows.get(key)}')

    def _check_data(self, rows: Dict[str, Dict[str, Any]]) -> None:
        """A data item that changed was written by the holder of its key's lock row, now."""
        for key, item in rows.items():
            if not key.startswith('data|'):
                continue
            written = (item['writer']['S'], int(item['token']['N']))
            if self.data.get(key) == (*written, item['write']['N']):
                continue
            self.data[key] = (*written, item['write']['N'])
            lock_key = key[len('data|'):]
            row = rows.get(lock_key, {})
            holder = (row.get('owner_name', {}).get('S'), int(row.get('fencing_token', {}).get('N', -2)))
            if holder[0] != written[0] or written[1] >= 0 and holder[1] != written[1] or 'released_at' in row:
                raise Violation(f'a guarded write of {written[0]} with token {written[1]} landed on {lock_key} while '
                                f'its lock row was {holder}{" (released)" if row.get("released_at") else ""}')

    def _check_sessions(self, rows: Dict[str, Dict[str, Any]]) -> None:
        """Every open hold of a client with a session whose row carries it: its session row is there."""
        for tenures in self.open.values():
            for tenure in tenures:
                if getattr(tenure.client, 'dead', False) or not getattr(tenure.client, 'session', False):
                    continue
                row = rows.get(tenure.key) or {}
                named = row.get(COL_LOCK_SESSION, {}).get('S')
                if named is None or row.get('record_version_number', {}).get('S') \
                        not in state_of(tenure.lock).our_versions():
                    continue
                if f'{named}|-' not in rows:
                    raise Violation(f'{tenure.client.name} holds {tenure.key} under its session, whose session row is '
                                    'not in the table')
