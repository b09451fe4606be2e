"""Issue 27, finding 7b: under a client session each lock row gets one slow refresh per wave.

The heartbeat loop of a ``session=True`` client (``Renewing.heartbeat_round`` in
``_client/renewing.py``) renews the session, picks the lock rows whose slow refresh is due
(``due_for_refresh``) and spreads their refreshes over the period (``heartbeat_round``). A
refresh sent late in a period can still be in flight when the next period starts: it used to be
found due again (its row not yet confirmed) and sent a second time once its first send was
answered.

Here the real core protocols run on a ManualClock, under a small deterministic driver that
plays the client's: each submitted refresh is answered a fixed latency after it is sent, and a
lock whose previous refresh is still in flight is skipped, as ``_take_due`` does.
"""
from __future__ import annotations

import collections
from typing import Any, Callable, Dict, List, Tuple

from python_dynamodb_lock._core.answers import Applied, Failed
from python_dynamodb_lock._core.effects import Call, Emit, Sleep, Submit, Unregister
from python_dynamodb_lock._core.heartbeat import Batching, HeartbeatSettings, heartbeat_round, renew_one
from python_dynamodb_lock._core.session import (SESSION_REFRESHES, Session, SessionSettings, due_for_refresh,
                                                ensure_session, session_round)
from python_dynamodb_lock._core.state import LockState
from python_dynamodb_lock._model.schema import Schema
from python_dynamodb_lock.testing import ManualClock

SCHEMA = Schema('locks', 'lock_key', 'sort_key', 'expiry_time')
PERIOD = 5.0
ROW_LEASE = 60.0
EVERY = ROW_LEASE / SESSION_REFRESHES      # a row's slow refresh: every 20 s
SESSION = SessionSettings(SCHEMA, 'me', lease=30.0, row_lease=ROW_LEASE, expiry_period=ROW_LEASE)
HEARTBEATS = HeartbeatSettings(SCHEMA, heartbeat_period=PERIOD, safe_period=20.0, expiry_period=ROW_LEASE,
                               heartbeat_tps=-1, batch_size=1)


class Lock:
    def __init__(self, index: int, session: Session, clock: ManualClock) -> None:
        self.partition_key, self.sort_key = f'k{index}', '-'
        self.unique_identifier = f'k{index}|-'
        self.shared = False
        self.lock_existing_item = False
        self._state = LockState(f'v{index}', 0, clock.monotonic(), ROW_LEASE)
        self._state.acquired(clock.monotonic(), 1, f'a{index}')
        assert session.confirmed_at is not None
        self._state.bind_session(session.id, 30.0, session.confirmed_at)


class Client:
    """Plays the driver of the client's heartbeat loop: refreshes answered ``latency`` seconds
    after they are sent (``answer(lock)`` says how), one in flight per lock."""

    def __init__(self, count: int, latency: float, answer: Callable[[Lock], Any] = lambda lock: Applied({})) -> None:
        self.clock = ManualClock()
        self.session = Session('me')
        starting = ensure_session(SESSION, self.session, self.clock)
        assert isinstance(starting.send(None), Call)
        self._finish(starting, Applied({}))
        self.locks = [Lock(index, self.session, self.clock) for index in range(count)]
        self.latency = latency
        self.answer = answer
        self.in_flight: List[Tuple[float, Lock, Any]] = []     # (answered at, lock, its protocol)
        self.refreshes: Dict[str, List[float]] = collections.defaultdict(list)   # lock -> sent at

    def round(self) -> Any:
        """Renewing.heartbeat_round of a client with a session."""
        yield from session_round(SESSION, self.session, self.locks, self.clock)
        locks = due_for_refresh(SESSION, self.locks, self.clock.monotonic())
        yield from heartbeat_round(HEARTBEATS, locks, Batching(1), self.clock, lambda: False)

    def run(self, seconds: float) -> None:
        end = self.clock.monotonic() + seconds
        while self.clock.monotonic() < end:
            self._drive(self.round())

    def _drive(self, protocol: Any) -> None:
        value: Any = None
        while True:
            try:
                effect = protocol.send(value)
            except StopIteration:
                return
            value = None
            if isinstance(effect, Call):       # the session's renewal
                value = Applied({})
            elif isinstance(effect, Sleep):
                self._wait(effect.seconds)
                value = False
            elif isinstance(effect, Submit):
                value = self._submit(effect.locks)
            else:
                assert isinstance(effect, (Emit, Unregister)), effect

    def _submit(self, locks: Any) -> int:
        busy = {id(lock) for _, lock, _ in self.in_flight}
        skipped = 0
        for lock in locks:
            if id(lock) in busy:
                skipped += 1                  # its previous refresh is still in flight
                continue
            protocol = renew_one(HEARTBEATS, lock, self.clock)
            effect = protocol.send(None)
            assert isinstance(effect, Call) and effect.request.operation == 'update_item'
            self.refreshes[lock.unique_identifier].append(self.clock.monotonic())
            self.in_flight.append((self.clock.monotonic() + self.latency, lock, protocol))
        return skipped

    def _wait(self, seconds: float) -> None:
        until = self.clock.monotonic() + max(seconds, 0.0)
        while True:
            self.in_flight.sort(key=lambda entry: entry[0])
            if not self.in_flight or self.in_flight[0][0] > until:
                break
            answered_at, lock, protocol = self.in_flight.pop(0)
            self.clock.advance(answered_at - self.clock.monotonic())
            self._finish(protocol, self.answer(lock))
        self.clock.advance(until - self.clock.monotonic())

    def _finish(self, protocol: Any, answer: Any) -> None:
        value = answer
        try:
            while True:
                effect = protocol.send(value)
                assert isinstance(effect, (Emit, Unregister)), effect
                value = None
        except StopIteration:
            pass


def test_a_refresh_in_flight_at_the_next_period_is_not_sent_again() -> None:
    # 50 rows due together, spread over a period (one every 0.1 s), each answered 0.3 s after it
    # is sent: the last ones are still in flight when the next period starts.
    client = Client(count=50, latency=0.3)
    client.clock.advance(EVERY)
    client.run(3 * ROW_LEASE)
    for key, sent in client.refreshes.items():
        gaps = [later - earlier for earlier, later in zip(sent, sent[1:])]
        # one refresh per wave: the next comes a third of the row lease later (give or take
        # the spread of a wave over its period), never within the same wave
        assert all(gap >= EVERY - PERIOD for gap in gaps), (key, sent)
    counts = collections.Counter(len(sent) for sent in client.refreshes.values())
    assert sorted(client.refreshes) == sorted(lock.unique_identifier for lock in client.locks)
    assert set(counts) <= {8, 9}, counts        # 180 s: a wave every 20 s (or a period later)
    assert all(lock._state.held for lock in client.locks)


def test_a_failed_refresh_is_sent_again_next_period() -> None:
    failed_once: Dict[str, bool] = {}

    def answer(lock: Lock) -> Any:
        if lock.unique_identifier == 'k3|-' and not failed_once:
            failed_once[lock.unique_identifier] = True
            return Failed(RuntimeError('DynamoDB failed'), maybe_applied=False, reason='OTHER', code='InternalError')
        return Applied({})

    client = Client(count=10, latency=0.01, answer=answer)
    client.clock.advance(EVERY)
    client.run(2 * PERIOD)
    sent = client.refreshes['k3|-']
    assert len(sent) == 2 and sent[1] - sent[0] <= PERIOD, sent      # the next period, not the next wave
    assert all(len(client.refreshes[lock.unique_identifier]) == 1 for lock in client.locks[:3])
