"""The simulation's wider workload and invariants (issue 29): the seeds of a run explore every
acquire entry point and feature and every fault, the new invariants refuse what they are about
(checked on hand-made situations), and a run with all of it is replayed byte for byte.
"""
from __future__ import annotations

import collections
import types
from typing import Any, Dict, List

import pytest

import python_dynamodb_lock.testing._simulation.run as run
from python_dynamodb_lock.testing._simulation import Checker, Violation, World, Workload, simulate
from python_dynamodb_lock.testing._simulation.interruptions import SettlingChecker
from python_dynamodb_lock.testing._simulation.settling import Liveness
from test_simulation import quiet_library  # noqa: F401 - autouse: the simulated clients log every event

SEEDS = 60
#: The wide workload runs in the threaded-protocol clients (the asyncio-protocol and
#: published-style ones keep their own callers, without the wide workload's faults).
THREADED = Workload(asyncio_share=0.0, published_share=0.0)



def _explore(monkeypatch: pytest.MonkeyPatch) -> Dict[str, int]:
    """How often each entry point, feature and fault shows in ``SEEDS`` runs (from the holds
    the checker saw, and the trace)."""
    checkers: List[Checker] = []

    class Recording(SettlingChecker):
        def __init__(self, *args: Any) -> None:
            super().__init__(*args)
            checkers.append(self)

    monkeypatch.setattr(run, 'SettlingChecker', Recording)
    seen: Dict[str, int] = collections.Counter()
    for seed in range(SEEDS):
        result = simulate(seed, THREADED)
        trace = '\n'.join(result.trace)
        checker = checkers[-1]
        locks = [tenure.lock for tenure in checker.closed]
        clients = {tenure.client.name: tenure.client for tenure in checker.closed}
        marks = {
            'acquire_locks / try_acquire_locks': 'event acquire_attempt {',
            'acquire_first_lock': 'k0|spare', 'guarded write': 'call transact_write_items data/',
            'force release': 'event force_released', 'get_lock': 'returned BaseDynamoDBLock',
            'session row': 'call put_item session/', 'lost answer': '(lost)', 'lost request': '(lost request)',
            'late request': 'the request lands', 'late answer': 'its answer arrives late', 'pause': 'paused for',
            'client dies': 'dies', 'close() by another thread': 'closed by another thread',
            'throttled': '(throttled)', 'server error': '(server error',
            'takeover': 'event taking_over', 'release with attributes': 'left_by', 'renewals': 'event renewed',
        }
        for name, mark in marks.items():
            seen[name] += mark in trace or (name == 'release with attributes' and any(
                'left_by' in item for item in checker.transport.table.items()))
        seen['shared'] += any(lock.shared for lock in locks)
        seen['existing item'] += any(lock.lock_existing_item for lock in locks)
        seen['own lease'] += any(lock._state.lease_duration not in (6.0, 60.0) for lock in locks)
        seen['keep_row=False'] += any(not lock.keep_row for lock in locks)
        seen['held under a session'] += any(client.session for client in clients.values())
        seen['a client that trusts no clock'] += any(client.settings.max_clock_skew is None
                                                      for client in clients.values())
    return seen


def test_the_seeds_explore_every_entry_point_feature_and_fault(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _explore(monkeypatch)
    print(dict(seen))
    missing = [name for name, count in seen.items() if count == 0]
    assert not missing, f'never explored in {SEEDS} seeds: {missing}'


def test_a_run_with_every_feature_replays_byte_for_byte() -> None:
    first, second = simulate(3, THREADED), simulate(3, THREADED)
    text = '\n'.join(first.trace)
    assert 'event acquire_attempt {' in text and 'session/' in text
    assert text.encode() == '\n'.join(second.trace).encode()


# -- the new invariants on hand-made situations ---------------------------------------------


class _State:
    def __init__(self, versions: List[str], lease: float = 6.0) -> None:
        self.versions = versions
        self.lease_duration = lease
        self.safe_period = 4.0
        self.release_maybe_applied = False

    def our_versions(self) -> List[str]:
        return self.versions

    def status_at(self, now: float, safe: float) -> str:
        from python_dynamodb_lock._core.state import Status
        return Status.LOCKED


class _Lock:
    def __init__(self, owner: str, key: str, token: Any, shared: bool = False, version: str = 'v') -> None:
        self.unique_identifier = key
        self.owner_name = owner
        self.fencing_token = token
        self.shared = shared
        self._state = _State([version])


class _Table:
    def __init__(self) -> None:
        self.rows: List[Dict[str, Any]] = []

    def items(self) -> List[Dict[str, Any]]:
        return self.rows


def _client(name: str, session: bool = False) -> Any:
    return types.SimpleNamespace(name=name, dead=False, session=session, clock=types.SimpleNamespace(
        monotonic=lambda: 0.0), settings=types.SimpleNamespace(safe_period=4.0))


def _checker() -> Checker:
    transport = types.SimpleNamespace(table=_Table(), sent=0)
    return Checker(World(), 1.0, transport)


def _row(key: str, **attributes: Any) -> Dict[str, Any]:
    partition, sort = key.split('|', 1)
    row = {'lock_key': {'S': partition}, 'sort_key': {'S': sort}}
    for name, value in attributes.items():
        row[name] = {'N': str(value)} if isinstance(value, int) else {'S': value}
    return row


def test_the_checker_refuses_an_exclusive_holder_beside_a_shared_one() -> None:
    checker = _checker()
    checker.acquired(_client('c1'), _Lock('c1', 'k|lock', None, shared=True))
    checker.acquired(_client('c2'), _Lock('c2', 'k|lock', None, shared=True))
    checker.check()      # two readers: fine
    checker.acquired(_client('c3'), _Lock('c3', 'k|lock', 5))
    with pytest.raises(Violation, match='an exclusive holder beside a shared one'):
        checker.check()


def test_the_checker_refuses_part_of_a_set() -> None:
    checker = _checker()
    with pytest.raises(Violation, match='handed part of the set'):
        checker.set_outcome(_client('c1'), ['a|lock', 'b|lock'], [_Lock('c1', 'a|lock', 1)])
    checker.set_outcome(_client('c1'), ['a|lock', 'b|lock'], [])   # none: fine


def test_the_checker_refuses_a_session_hold_without_its_session_row() -> None:
    checker = _checker()
    client = _client('c1', session=True)
    checker.acquired(client, _Lock('c1', 'k|lock', 1, version='v1'))
    checker.transport.table.rows[:] = [_row('k|lock', owner_name='c1', record_version_number='v1', fencing_token=1,
                                            lock_session='s/c1/1')]
    checker.transport.sent += 1
    with pytest.raises(Violation, match='session row is not in the table'):
        checker.check()
    checker.transport.table.rows.append(_row('s/c1/1|-', owner_name='c1'))
    checker.transport.sent += 1
    checker.check()


def test_the_checker_refuses_a_guarded_write_by_a_holder_that_lost_its_lock() -> None:
    checker = _checker()
    rows = checker.transport.table.rows
    rows[:] = [_row('k|lock', owner_name='c2', fencing_token=8), _row('data|k|lock', writer='c2', token=8, write=1)]
    checker.transport.sent += 1
    checker.check()
    rows[1] = _row('data|k|lock', writer='c1', token=7, write=3)
    checker.transport.sent += 1
    with pytest.raises(Violation, match='a guarded write of c1 with token 7 landed'):
        checker.check()


def test_liveness_counts_from_when_every_caller_was_done() -> None:
    world = World()
    liveness = Liveness(world, 10.0, 100.0)
    liveness.working_on('c1')
    liveness.working_on('c2')
    liveness.done('c1')
    world.advance_to(50.0)
    liveness.waiting(_client('c1'), 0.0, ['k0'], 10.0)   # c2 still works: no bound yet
    liveness.done('c2')
    world.advance_to(59.0)
    liveness.waiting(_client('c1'), 0.0, ['k0'], 10.0)
    world.advance_to(61.0)
    with pytest.raises(Violation, match='liveness: c1 has not acquired'):
        liveness.waiting(_client('c1'), 0.0, ['k0'], 10.0)
