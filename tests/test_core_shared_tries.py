"""Repeated tries (``try_acquire_lock``, ``try_acquire_locks``: no time to wait) facing a key
left behind by a shared holder that died: the client's memory of what it saw (``Observations``)
carries across tries for shared entries as it does for an exclusive holder's version, so a later
try takes the key over once the dead reader's entry stood unchanged for its lease.

Protocol steps against moto (the engine of tests/test_core_shared_steps.py).
"""
from __future__ import annotations

import uuid


from python_dynamodb_lock._core.answers import Applied
from python_dynamodb_lock._core.acquire import Observations, TimedOut, acquire
from python_dynamodb_lock._core.events import Kind
from python_dynamodb_lock._core.multi import AllWritten, NotAll, acquire_all
from python_dynamodb_lock._core.write import Written
from python_dynamodb_lock._wire.shared_requests import renew_entry
from test_core_protocol import FakeClock
import test_core_release_paths
from test_core_shared_steps import LEASE, Engine, attempt, run, take




#: The moto table, keys 'k' and 'other' emptied before each test.
table, engine = test_core_release_paths.table, test_core_release_paths.engine

def _a_dead_reader(engine: Engine, clock: FakeClock) -> None:
    """A reader takes 'k' and dies: its entry is never renewed."""
    assert isinstance(take(engine, clock, 'k', 'dead-reader').result, Written)


def test_repeated_single_key_tries_take_over_a_dead_readers_entry_after_its_lease(engine: Engine) -> None:
    clock = FakeClock()
    _a_dead_reader(engine, clock)
    memory = Observations()     # the client's, kept across its calls
    outcomes = []
    for _ in range(4):
        tried = run(acquire(attempt(engine, 'k', 'writer', shared=False, retry_timeout=0.0), clock, lambda: False,
                            memory), engine, clock)
        outcomes.append(tried)
        if isinstance(tried.result, Written):
            break
        clock.now += LEASE / 2
    assert all(isinstance(tried.result, TimedOut) for tried in outcomes[:-1])
    taken = outcomes[-1]
    assert isinstance(taken.result, Written) and Kind.TAKING_OVER in taken.events
    assert len(outcomes) == 3       # seen at 0, at LEASE/2, taken at LEASE: its lease passed unchanged
    row = engine.row('k')
    assert row['owner_name'] == 'writer' and 'shared_holders' not in row


def test_repeated_set_tries_take_over_a_dead_readers_entry_after_its_lease(engine: Engine) -> None:
    clock = FakeClock()
    _a_dead_reader(engine, clock)
    memory = Observations()
    outcomes = []
    for _ in range(4):
        attempts = [attempt(engine, key, 'writer', shared=False, retry_timeout=0.0) for key in ('k', 'other')]
        tried = run(acquire_all(attempts, clock, lambda: False, memory), engine, clock)
        outcomes.append(tried)
        if isinstance(tried.result, AllWritten):
            break
        clock.now += LEASE / 2
    assert all(isinstance(tried.result, NotAll) for tried in outcomes[:-1])
    assert isinstance(outcomes[-1].result, AllWritten) and len(outcomes) == 3
    assert engine.row('k')['owner_name'] == 'writer' and engine.row('other')['owner_name'] == 'writer'


def test_a_reader_that_renews_between_tries_is_never_taken_over(engine: Engine) -> None:
    """The memory is of versions: a live reader renews its entry (a new version), and every try
    starts its watch of that entry again."""
    clock = FakeClock()
    _a_dead_reader(engine, clock)
    memory = Observations()
    for _ in range(6):
        tried = run(acquire(attempt(engine, 'k', 'writer', shared=False, retry_timeout=0.0), clock, lambda: False,
                            memory), engine, clock)
        assert isinstance(tried.result, TimedOut)
        (holder_id,) = engine.row('k')['shared_holders']
        _renew(engine, holder_id)
        clock.now += LEASE / 2


def _renew(engine: Engine, holder_id: str) -> None:
    row = engine.row('k')
    version = row['shared_holders'][holder_id]['version']
    assert isinstance(engine.store.send(renew_entry(engine.schema, 'k', '-', holder_id, [version], str(uuid.uuid4()),
                                  str(uuid.uuid4()), int(row['expiry_time']))), Applied)
