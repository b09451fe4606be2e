"""The simulation's public face (``python_dynamodb_lock.testing``: ``simulate``, ``shrink``,
``Workload``, ``FaultPlan``, ``SimulationFailure``, ``SimulationResult``, ``Reproducer``,
``SimulatedCaller``): a user's own code run under it, the documented example
(``examples/simulate_own_code.py``, shown on docs/testing.rst), and the shrinker's refusals.
"""
from __future__ import annotations

import importlib.util
import pathlib
import types
from typing import Generator, List, Optional

import pytest

import python_dynamodb_lock.testing as testing
from python_dynamodb_lock import DynamoDBLockError
from python_dynamodb_lock.testing import (FaultPlan, SimulatedCaller, SimulationFailure, SimulationResult, Workload,
                                          shrink, simulate)
from test_simulation import quiet_library  # noqa: F401 - autouse: the simulated clients log every event

EXAMPLE = pathlib.Path(__file__).resolve().parent.parent / 'examples' / 'simulate_own_code.py'
Steps = Generator[object, Optional[object], None]



def load_example() -> types.ModuleType:
    spec = importlib.util.spec_from_file_location('example_simulate_own_code', EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_simulation_is_public_in_testing() -> None:
    for name in ('simulate', 'shrink', 'Workload', 'FaultPlan', 'SimulationFailure', 'SimulationResult', 'Reproducer',
                 'SimulatedCaller'):
        assert name in testing.__all__, name
        assert getattr(testing, name).__doc__, name
    result = simulate(3)
    assert isinstance(result, SimulationResult) and result.seed == 3 and result.acquisitions > 0


def test_a_users_script_runs_on_every_client_with_real_locks() -> None:
    """Each simulated client runs the script; ``acquire_lock`` hands back the real lock object
    (with its fencing token), ``try_acquire_lock`` a lock or None, and ``caller.shared`` is one
    dict per run, fresh for the next."""
    def script(caller: SimulatedCaller) -> Steps:
        seen = caller.shared.setdefault('seen', [])
        lock = yield caller.acquire_lock('job', retry_timeout=60.0)
        seen.append((caller.name, lock.fencing_token))
        yield caller.sleep(1.0)
        other = yield caller.try_acquire_lock('other')
        if other is not None:
            yield caller.release_lock(other)
        assert (yield caller.release_lock(lock)) in (True, False)

    runs: List[list] = []

    def recording(caller: SimulatedCaller) -> Steps:
        if not caller.shared:
            runs.append(caller.shared.setdefault('seen', []))
        yield from script(caller)

    quiet = FaultPlan(lost_answer=0.0, throttle=0.0, server_error=0.0, pause=0.0, lost_request=0.0, late_request=0.0,
                      late_answer=0.0, die=0.0, close=0.0)
    result = simulate(5, Workload(clients=3), quiet, script=recording)
    simulate(6, Workload(clients=3), quiet, script=recording)
    assert len(runs) == 2
    assert sorted(name for name, _ in runs[0]) == ['c1', 'c2', 'c3']
    tokens = [token for _, token in runs[0]]
    assert tokens == sorted(tokens) and len(set(tokens)) == 3     # handed over in turn, each a larger token
    assert any("script: acquire_lock('job', 'lock')" in line for line in result.trace)


def test_what_a_script_raises_fails_the_run_with_its_seed_and_replays() -> None:
    def script(caller: SimulatedCaller) -> Steps:
        lock = yield caller.acquire_lock('k', retry_timeout=60.0)
        assert caller.name != 'c2', 'c2 must not get the lock'
        yield caller.release_lock(lock)

    with pytest.raises(SimulationFailure) as failed:
        simulate(11, script=script)
    assert failed.value.seed == 11
    assert failed.value.problem.startswith('AssertionError: c2 must not get the lock')
    assert 'simulation seed 11 failed' in str(failed.value)
    with pytest.raises(SimulationFailure) as again:
        simulate(11, script=script)
    assert again.value.trace == failed.value.trace


def test_an_acquisition_that_gives_up_raises_at_the_yield() -> None:
    """A ``DynamoDBLockError`` the client would raise is raised in the script, where it can catch it."""
    caught: List[str] = []

    def script(caller: SimulatedCaller) -> Steps:
        lock = yield caller.acquire_lock('k', retry_timeout=60.0)
        if caller.name == 'c1':
            yield caller.sleep(30.0)     # holds it, heartbeating, while the others give up
        else:
            yield caller.release_lock(lock)
            return
        yield caller.release_lock(lock)

    def impatient(caller: SimulatedCaller) -> Steps:
        if caller.name == 'c1':
            yield from script(caller)
            return
        yield caller.sleep(1.0)
        try:
            yield caller.acquire_lock('k', retry_timeout=3.0)
        except DynamoDBLockError as error:
            caught.append(error.code)

    quiet = FaultPlan(lost_answer=0.0, throttle=0.0, server_error=0.0, pause=0.0, lost_request=0.0, late_request=0.0,
                      late_answer=0.0, die=0.0, close=0.0)
    simulate(1, Workload(clients=2), quiet, script=impatient)
    assert caught == [DynamoDBLockError.ACQUIRE_TIMEOUT]


def test_a_script_must_yield_the_callers_commands() -> None:
    def script(caller: SimulatedCaller) -> Steps:
        yield 'acquire k'

    with pytest.raises(SimulationFailure, match='TypeError: a simulation script yields what its SimulatedCaller'):
        simulate(1, script=script)
    with pytest.raises(TypeError, match='script must be a generator function'):
        simulate(1, script='not a script')  # type: ignore[arg-type]


def test_the_documented_example_finds_the_lost_update_and_shrinks_it() -> None:
    """docs/testing.rst's example: with fencing checked by the store, no seed loses an update;
    without, the simulator finds a seed that does, and shrinks it to a smaller run that loses
    one too."""
    example = load_example()
    assert example.first_failure(range(150), fenced=True) is None
    failure = example.first_failure(range(200), fenced=False)
    assert failure is not None, 'no seed found the lost update'
    assert failure.problem.startswith('AssertionError: an update was lost')
    smallest = shrink(failure.seed, failure.workload, failure.plan, script=example.interest_script(fenced=False))
    assert smallest.failure.problem.startswith('AssertionError: an update was lost')
    assert smallest.workload.clients < failure.workload.clients or smallest.plan != failure.plan
    assert smallest.workload.operations == failure.workload.operations     # the script's runs ignore it
    with pytest.raises(SimulationFailure) as replayed:
        simulate(smallest.seed, smallest.workload, smallest.plan, script=example.interest_script(fenced=False))
    assert replayed.value.trace == smallest.failure.trace


def test_shrink_refuses_a_run_that_does_not_fail() -> None:
    with pytest.raises(ValueError, match='does not fail: nothing to shrink'):
        shrink(3)
    with pytest.raises(ValueError, match='seeds and budget must be at least 1'):
        shrink(3, seeds=0)
