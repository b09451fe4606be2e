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
"""
from __future__ import annotations

import dataclasses
from typing import Any, Dict, List, Optional, Set, Tuple

from ..._core.events import Event, Kind
from ..._core.state import Status

__all__ = ['Checker', 'Tenure', 'Violation']

_LOSSES = frozenset({Kind.STOLEN, Kind.REPLACED_LOST, Kind.RELEASE_STOLEN})


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

    def believed(self) -> bool:
        state = self.lock._state
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

    def acquired(self, client: Any, lock: Any) -> Tenure:
        key = lock.unique_identifier
        token = lock.fencing_token
        handed = self.handed.setdefault(key, set())
        if token is not None:
            if token in handed:
                raise Violation(f'fencing token {token} of {key} handed out twice (now to {client.name})')
            handed.add(token)
            self.tokens[key] = max(token, self.tokens.get(key, token))
        tenure = Tenure(client, lock, key, token, self.world.now)
        self.open.setdefault(key, []).append(tenure)
        self.acquisitions += 1
        return tenure

    def leaving(self, tenure: Tenure) -> None:
        tenure.end = self.world.now
        self.held_seconds += tenure.end - tenure.start
        self.open[tenure.key].remove(tenure)

    def event(self, client: Any, event: Event, now: float) -> None:
        if event.kind is Kind.TAKING_OVER:
            self.claims.append((event.key, str(event.fields.get('owner')), now))
            self.takeovers += 1
        elif event.kind in _LOSSES and event.lock is not None:
            self.losses += 1
            self._check_loss(client, event, now)

    def _check_loss(self, client: Any, event: Event, now: float) -> None:
        lock = event.lock
        state = lock._state
        last_renewed = client.clock.to_global(state.last_confirmed)
        spent = last_renewed + state.lease_duration / self.max_rate
        owner = lock.owner_name
        if not any(key == event.key and claimed == owner and spent - 1e-9 <= at <= now
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
            if len(believed) > 1:
                holders = ', '.join(f'{tenure.client.name} (token {tenure.token}, since {tenure.start:.6f})'
                                    for tenure in believed)
                raise Violation(f'two exclusive holders of {key} at {self.world.now:.6f}, both LOCKED on their own '
                                f'clocks: {holders}')
            for tenure in believed:
                if tenure.token is not None and tenure.token != self.tokens[key]:
                    raise Violation(f'{tenure.client.name} believes it holds {key} (LOCKED on its clock) with token '
                                    f'{tenure.token}, superseded by token {self.tokens[key]}')

    def _check_rows(self) -> None:
        for item in self.transport.table.items():
            token = item.get('fencing_token')
            if token is None:
                continue
            key = f"{item['lock_key']['S']}|{item['sort_key']['S']}"
            value = int(token['N'])
            last = self.row_tokens.get(key)
            if last is not None and value < last:
                raise Violation(f'the fencing token of the row of {key} went down from {last} to {value}')
            self.row_tokens[key] = value
