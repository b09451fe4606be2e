"""The simulation driver (issue 29, first slice): simulated lock clients - the real
orchestration, stepped by one seeded scheduler in one thread over a simulated clock and the
simulated table - under lost answers, throttling and paused clients, with the invariants
checked after every step (``python_dynamodb_lock.testing.simulate``).

``PDL_SIMULATION_SCHEDULES`` sets how many seeds the CI-sized run explores (default 2,000, in
chunks of 100 that pytest-xdist spreads over the cores); a long run is that one setting away.
"""
from __future__ import annotations

import hashlib
import logging
import os
import pathlib
import subprocess
import sys
import time
import types
from typing import Any, Callable, Iterator

import pytest

import python_dynamodb_lock._core.acquire as core_acquire
import python_dynamodb_lock._core.write as core_write
from python_dynamodb_lock._core.events import Event, Kind
from python_dynamodb_lock._core.state import LockState
from python_dynamodb_lock.testing import SimulationFailure, Workload, shrink, simulate
from python_dynamodb_lock.testing._simulation import EPOCH, Checker, SimulatedClock, SplitMix64, Violation, World
from python_dynamodb_lock.testing._simulation.shrink import problem_kind

SCHEDULES = int(os.environ.get('PDL_SIMULATION_SCHEDULES', '2000'))


@pytest.fixture(autouse=True)
def quiet_library() -> Iterator[None]:
    """The simulated clients log every event; thousands of runs need not format them."""
    logger = logging.getLogger('python_dynamodb_lock')
    level = logger.level
    logger.setLevel(logging.CRITICAL + 1)
    yield
    logger.setLevel(level)


def test_the_generator_is_splitmix64() -> None:
    """The stream is this code's alone (the same on every Python): SplitMix64's reference values."""
    rng = SplitMix64(0)
    assert [rng.next() for _ in range(3)] == [0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4, 0x06C45D188009454F]
    assert all(0 <= SplitMix64(seed).below(3) < 3 for seed in range(100))


def test_a_client_clock_runs_at_its_rate_with_its_offset() -> None:
    world = World()
    clock = SimulatedClock(world, rate=1.001, origin=50.0, offset=-0.25)
    world.advance_to(10.0)
    assert clock.monotonic() == pytest.approx(60.01)
    assert clock.time() == pytest.approx(EPOCH + 9.75)
    assert clock.to_global(clock.monotonic()) == pytest.approx(10.0)
    world.advance_to(5.0)   # time never goes back
    assert world.now == 10.0


class _Client:
    """What the checker reads of a simulated client."""

    def __init__(self, name: str, world: World, rate: float = 1.0) -> None:
        self.name = name
        self.clock = SimulatedClock(world, rate, origin=100.0)
        self.settings = types.SimpleNamespace(safe_period=4.0)


class _Lock:
    """What the checker reads of a held lock: held since ``since`` (global seconds)."""

    def __init__(self, client: _Client, key: str, token: int, since: float, lease: float = 6.0) -> None:
        self.unique_identifier = key
        self.owner_name = client.name
        self.fencing_token = token
        self._state = LockState('v', 0, client.clock.origin + since * client.clock.rate, lease)
        self._state.acquired(self._state.last_confirmed, token, 'a')


def test_the_checker_refuses_two_believed_holders_and_a_superseded_token() -> None:
    world = World()
    one, two = _Client('c1', world), _Client('c2', world)
    checker = Checker(world, 1.0)
    first = checker.acquired(one, _Lock(one, 'k', 5, 0.0))
    world.advance_to(1.0)
    checker.acquired(two, _Lock(two, 'k', 6, 1.0))
    with pytest.raises(Violation, match='two exclusive holders of k'):
        checker.check()
    world.advance_to(5.0)    # past c1's safe period (4 s): it no longer believes, c2 (since 1.0) does
    checker.check()
    checker.leaving(first)
    with pytest.raises(Violation, match='handed out twice'):
        checker.acquired(one, _Lock(one, 'k', 6, 5.0))


def test_the_checker_refuses_a_loss_reported_while_the_lease_ran() -> None:
    world = World()
    holder, taker = _Client('c1', world), _Client('c2', world)
    checker = Checker(world, 1.0)
    lock = _Lock(holder, 'k', 5, 0.0, lease=6.0)
    world.advance_to(5.0)
    checker.event(taker, Event(Kind.TAKING_OVER, 'k', None, {'owner': 'c1'}), world.now)   # before the lease ran out
    world.advance_to(7.0)
    with pytest.raises(Violation, match='while its lease ran'):
        checker.event(holder, Event(Kind.STOLEN, 'k', lock, {}), world.now)
    checker.event(taker, Event(Kind.TAKING_OVER, 'k', None, {'owner': 'c1'}), world.now)   # at 7.0 >= 0 + 6
    checker.event(holder, Event(Kind.STOLEN, 'k', lock, {}), world.now)


CHUNK = 100


@pytest.mark.parametrize('first', range(0, SCHEDULES, CHUNK))
def test_many_seeded_schedules_of_three_clients_keep_every_invariant(first: int) -> None:
    """The CI-sized run, in chunks of 100 seeds (which xdist can spread): every seed's schedule
    keeps the invariants, and the faults and takeovers it is meant to explore do happen, some of
    them with a published-style client beside ours."""
    seeds = range(first, min(first + CHUNK, SCHEDULES))
    started = time.process_time()
    totals = {'steps': 0, 'acquisitions': 0, 'takeovers': 0, 'losses': 0, 'lost_answers': 0, 'throttled': 0,
              'server_errors': 0, 'pauses': 0}
    held = 0.0
    published = 0
    for seed in seeds:
        result = simulate(seed)
        for name in totals:
            totals[name] += getattr(result, name)
        held += result.held_seconds
        published += result.published is not None
    cpu = max(time.process_time() - started, 1e-9)
    print(f'\nseeds {seeds.start}-{seeds.stop - 1} in {cpu:.1f} CPU s: {len(seeds) / cpu:.0f} schedules and '
          f'{held / 3600 / cpu:.2f} simulated lock-hours per CPU second; {published} with a published-style '
          f'client; {totals}')
    assert totals['acquisitions'] > len(seeds)
    for name in ('takeovers', 'lost_answers', 'throttled', 'server_errors', 'pauses'):
        assert totals[name] > 0, name
    assert 0 < published < len(seeds)


def test_the_same_seed_gives_the_same_trace_byte_for_byte() -> None:
    first, second = simulate(7), simulate(7)
    assert first.steps > 100
    assert '\n'.join(first.trace).encode() == '\n'.join(second.trace).encode()
    assert '\n'.join(simulate(8).trace) != '\n'.join(first.trace)


def _take_over_at_first_sight(monkeypatch: pytest.MonkeyPatch) -> None:
    """The acquire protocol presumes every holder dead (ignores the holder's lease)."""
    monkeypatch.setattr(core_acquire, 'is_abandoned', lambda *args, **kwargs: True)


def _skip_the_condition(monkeypatch: pytest.MonkeyPatch) -> None:
    """The acquire protocol's write is sent with a condition that always holds."""
    original = core_write.write_request

    def unconditional(*args: Any, **kwargs: Any) -> Any:
        item, request = original(*args, **kwargs)
        params = dict(request.params)
        params['ConditionExpression'] = (f'({params["ConditionExpression"]}) OR attribute_exists(lock_key) '
                                         'OR attribute_not_exists(lock_key)')
        return item, request._replace(params=params)

    monkeypatch.setattr(core_write, 'write_request', unconditional)


@pytest.mark.parametrize('defect', [_take_over_at_first_sight, _skip_the_condition])
def test_it_finds_a_reintroduced_defect_names_the_seed_and_shrinks_it(
        monkeypatch: pytest.MonkeyPatch, defect: Callable[[pytest.MonkeyPatch], None]) -> None:
    """Proof that it bites: with a defect put back into the core, some seed of the CI-sized run
    breaks an invariant; the failure names the seed and prints the trace, and the seed replays
    the same failure. The shrinker reduces it to a smaller reproducer - a smaller workload or
    fault plan, a shorter trace - that still fails with the same problem, and replays."""
    defect(monkeypatch)
    failure = None
    for seed in range(SCHEDULES):
        try:
            simulate(seed)
        except SimulationFailure as found:
            failure = found
            break
    assert failure is not None, f'the simulator did not find the defect {defect.__name__}'
    message = str(failure)
    assert f'simulation seed {failure.seed} failed' in message
    assert 'trace:' in message and 'c1/caller' in message
    print(f'{defect.__name__}: found by seed {failure.seed}: {failure.problem}')
    with pytest.raises(SimulationFailure) as replayed:
        simulate(failure.seed)
    assert replayed.value.problem == failure.problem
    assert replayed.value.trace == failure.trace

    smallest = shrink(failure.seed, failure.workload, failure.plan)
    print(smallest.replay, f'{len(failure.trace)} -> {len(smallest.failure.trace)} trace lines')
    assert problem_kind(smallest.failure.problem) == problem_kind(failure.problem)
    assert len(smallest.failure.trace) < len(failure.trace)
    default = Workload()
    assert (smallest.workload.clients, smallest.workload.operations, smallest.workload.keys) <= (
        default.clients, default.operations, default.keys)
    assert smallest.workload != default or smallest.plan != failure.plan
    with pytest.raises(SimulationFailure) as again:
        simulate(smallest.seed, smallest.workload, smallest.plan)
    assert again.value.trace == smallest.failure.trace
    assert f'replay: {smallest.replay}' in str(smallest)


def test_a_trace_is_the_same_in_another_process() -> None:
    """No hash order or object address leaks into a run: another interpreter, with another
    hash seed, gives the same trace."""
    digest = hashlib.sha256('\n'.join(simulate(7).trace).encode()).hexdigest()
    code = ('import hashlib, logging; logging.getLogger("python_dynamodb_lock").setLevel(100); '
            'from python_dynamodb_lock.testing._simulation import simulate; '
            'print(hashlib.sha256("\\n".join(simulate(7).trace).encode()).hexdigest())')
    other = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, check=True,
                           env={**os.environ, 'PYTHONHASHSEED': '12345'}, cwd=str(pathlib.Path(__file__).parent.parent))
    assert other.stdout.strip() == digest
