"""The simulation's asyncio clients (``testing/_simulation/tasks_protocol.py``, ``interruptions.py``):
tasks cancelled at any suspension point (a call on the wire, a sleep, a wait for a mutex, for
settling work or for a release), cancelled twice, clients closed while calls are in flight,
requests that land after their undo looked; and the invariants judging what that leaves once
everything settled (no row held and no lock kept that no caller was handed, no lock renewed
that its caller was never handed, no false ``LOCK_STOLEN``).

Proof that it bites: the four asyncio cancellation defects of round 3 (issue 17; their
regression tests on DynamoDB Local are in tests/test_interruptions.py), put back one at a time
by a patch of the core or of the simulated driver as the code stood before each fix, are found
within the CI-sized run, and the seed printed replays the failure.
``PDL_SIMULATION_SCHEDULES`` sets how many seeds a search may take (default 400).
"""
from __future__ import annotations

import os
import re
from typing import Any, Callable, Dict, List

import pytest

import python_dynamodb_lock._client.acquiring as client_acquiring
import python_dynamodb_lock._client.releasing as client_releasing
import python_dynamodb_lock._core.write as core_write
import python_dynamodb_lock.testing._simulation.tasks_protocol as tasks_protocol
from python_dynamodb_lock._core.effects import Call, Drop, Hold
from python_dynamodb_lock._model.errors import DynamoDBLockError
from python_dynamodb_lock.testing._simulation import SimulationFailure, Workload, simulate
from test_simulation import quiet_library  # noqa: F401 - autouse: the simulated clients log every event

SCHEDULES = int(os.environ.get('PDL_SIMULATION_SCHEDULES', '400'))
#: Every client of the asyncio protocol.
TASKS_ONLY = Workload(asyncio_share=1.0)



def _count(trace: List[str], patterns: Dict[str, str]) -> Dict[str, int]:
    return {name: sum(1 for line in trace if re.search(pattern, line)) for name, pattern in patterns.items()}


def test_asyncio_clients_are_interrupted_at_every_kind_of_suspension_point_and_the_invariants_hold() -> None:
    totals: Dict[str, int] = {}
    patterns = {'cancelled': r'fault: \S+ cancelled$', 'cancelled again': 'cancelled again',
                'on the wire': 'its answer reaches nobody', 'never sent': 'never sent',
                'before sending': 'delivered before sending', 'handing off': 'delivered handing off',
                'awaiting a release': 'delivered awaiting', 'closed early': r'close\(\) of',
                'client shut down': 'CLIENT_SHUTDOWN', 'settled apart': r'/settle#\d+ +call',
                'threaded clients': r' c\d/caller +hold', 'asyncio clients': r' net/c\d/'}
    for seed in range(min(SCHEDULES, 200)):
        for name, count in _count(simulate(seed).trace, patterns).items():
            totals[name] = totals.get(name, 0) + count
    print(f'\n{totals}')
    assert all(count > 0 for count in totals.values()), totals


def test_a_run_of_asyncio_clients_only_keeps_the_invariants() -> None:
    for seed in range(SCHEDULES // 4):
        simulate(seed, TASKS_ONLY)


def test_an_asyncio_run_replays_byte_for_byte() -> None:
    first, second = simulate(11, TASKS_ONLY), simulate(11, TASKS_ONLY)
    assert 'cancelled' in '\n'.join(first.trace)
    assert '\n'.join(first.trace).encode() == '\n'.join(second.trace).encode()


def test_threaded_runs_draw_no_asyncio_fault() -> None:
    """A workload without asyncio clients runs as the first slice did: no cancellation drawn."""
    trace = simulate(5, Workload(asyncio_share=0.0)).trace
    assert not any('cancelled' in line or line.split()[1].startswith('net/') for line in trace)


# --- the four defects of round 3, put back one at a time ---------------------------------------

#: The defects are of this package's asyncio protocol: their runs have no published-style client
#: (the default workload makes one in a quarter of the runs; here its seed draw is left out too).
OURS_ONLY = Workload(published_share=0.0)

def _keeps_a_lock_cancelled_while_settling_the_one_it_replaced(monkeypatch: pytest.MonkeyPatch) -> None:
    """Defect 1: an acquisition cancelled while it waits for the mutex of the older lock object
    it replaced (a release of it under way) returns nothing, but keeps and renews the new lock
    (before 71d688b: ``async with previous._mutex`` with no give-up; a closed client's lock
    released)."""
    def installing_all(self: Any, adopted: Any) -> Any:
        for _, previous in adopted:
            if previous is not None:
                yield Hold(previous)
                self._settle_replaced(previous)
                yield Drop(previous)
        if self._state.shutdown.is_set():
            for lock, _ in adopted:
                yield from self._releasing.releasing(lock, True)
            raise DynamoDBLockError(DynamoDBLockError.CLIENT_SHUTDOWN, 'The lock client has been closed')
        return [lock for lock, _ in adopted]
    monkeypatch.setattr(client_acquiring.Acquiring, 'installing_all', installing_all)


def _undoes_an_interrupted_write_in_the_caller(monkeypatch: pytest.MonkeyPatch) -> None:
    """Defect 2: the undo of an acquiring write cut short runs in the interrupted caller (one
    conditional free, as on d18a671), so that a second cancellation stops it."""
    settle = core_write.Settle

    def inline(protocol: Any, follow_up: bool = False) -> Any:
        if getattr(protocol, '__name__', '') != 'undo_write':
            return settle(protocol, follow_up)
        arguments = protocol.gi_frame.f_locals
        protocol.close()
        return Call(core_write._free_own_row(arguments['attempt'], arguments['clock'], arguments['version']))
    monkeypatch.setattr(core_write, 'Settle', inline)


def _never_watches_for_a_late_landing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Defect 3: the undo of a write whose answer can never be known looks once and never
    watches: a write still on the wire that lands after that look is left (before 9f6185f)."""
    def free_once(attempt: Any, clock: Any, free: Callable[[bool], Any], known: bool) -> Any:
        yield from free(known)
    monkeypatch.setattr(core_write, '_free_and_watch', free_once)


def _frees_a_handed_row_in_the_cancelled_release(monkeypatch: pytest.MonkeyPatch) -> None:
    """Defect 4: a release that handed the lock to a waiter of its client that gave up frees
    that row in the releasing caller, so that cancelling the release leaves it (before
    9f6185f; the release was then awaited in the caller, not yet a task of its own, b6a459c)."""
    settle = client_releasing.Settle

    def inline(protocol: Any, follow_up: bool = False) -> Any:
        if getattr(protocol, '__name__', '') != 'free_handed':
            return settle(protocol, follow_up)
        call = next(protocol)
        protocol.close()
        return call
    monkeypatch.setattr(client_releasing, 'Settle', inline)
    monkeypatch.setattr(tasks_protocol, 'RELEASE_AS_TASK', False)


@pytest.mark.parametrize('defect', [_keeps_a_lock_cancelled_while_settling_the_one_it_replaced,
                                    _undoes_an_interrupted_write_in_the_caller,
                                    _never_watches_for_a_late_landing,
                                    _frees_a_handed_row_in_the_cancelled_release])
def test_it_finds_a_reintroduced_asyncio_cancellation_defect_and_names_the_seed(
        monkeypatch: pytest.MonkeyPatch, defect: Callable[[pytest.MonkeyPatch], None]) -> None:
    defect(monkeypatch)
    failure = None
    for seed in range(SCHEDULES):
        try:
            simulate(seed, OURS_ONLY)
        except SimulationFailure as found:
            failure = found
            break
    assert failure is not None, f'the simulator did not find {defect.__name__} in {SCHEDULES} seeds'
    assert f'simulation seed {failure.seed} failed' in str(failure)
    print(f'\n{defect.__name__}: found by seed {failure.seed}: {failure.problem}')
    with pytest.raises(SimulationFailure) as replayed:
        simulate(failure.seed, OURS_ONLY)
    assert replayed.value.problem == failure.problem and replayed.value.trace == failure.trace
