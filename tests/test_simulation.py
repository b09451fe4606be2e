"""The simulation driver (issue 29, first slice): simulated lock clients - the real
orchestration, stepped by one seeded scheduler in one thread over a simulated clock and the
simulated table - under lost answers, throttling and paused clients, with the invariants
checked after every step (``python_dynamodb_lock.testing._simulation``).

``PDL_SIMULATION_SCHEDULES`` sets how many seeds the CI-sized run explores (default 500).
"""
from __future__ import annotations

import logging
import os
import time
from typing import Iterator

import pytest

import python_dynamodb_lock._core.acquire as core_acquire
from python_dynamodb_lock.testing._simulation import (EPOCH, SimulatedClock, SimulationFailure, SplitMix64, World,
                                                     simulate)

SCHEDULES = int(os.environ.get('PDL_SIMULATION_SCHEDULES', '500'))


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


def test_many_seeded_schedules_of_three_clients_keep_every_invariant() -> None:
    """The CI-sized run: every seed's schedule keeps the invariants, and the faults and
    takeovers it is meant to explore do happen."""
    started = time.process_time()
    totals = {'steps': 0, 'acquisitions': 0, 'takeovers': 0, 'losses': 0, 'lost_answers': 0, 'throttled': 0,
              'pauses': 0}
    held = 0.0
    for seed in range(SCHEDULES):
        result = simulate(seed)
        for name in totals:
            totals[name] += getattr(result, name)
        held += result.held_seconds
    cpu = max(time.process_time() - started, 1e-9)
    print(f'\n{SCHEDULES} schedules in {cpu:.1f} CPU s: {SCHEDULES / cpu:.0f} schedules and '
          f'{held / 3600 / cpu:.2f} simulated lock-hours per CPU second; {totals}')
    assert totals['acquisitions'] > SCHEDULES
    for name in ('takeovers', 'losses', 'lost_answers', 'throttled', 'pauses'):
        assert totals[name] > 0, name


def test_the_same_seed_gives_the_same_trace_byte_for_byte() -> None:
    first, second = simulate(7), simulate(7)
    assert first.steps > 100
    assert '\n'.join(first.trace).encode() == '\n'.join(second.trace).encode()
    assert '\n'.join(simulate(8).trace) != '\n'.join(first.trace)


def test_it_finds_a_takeover_of_a_live_holder_and_names_the_seed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Proof that it bites: with the acquire protocol taking over any holder at first sight
    (``is_abandoned`` always true), some seed of the CI-sized run finds two holders, and its
    seed replays the same failure."""
    monkeypatch.setattr(core_acquire, 'is_abandoned', lambda *args, **kwargs: True)
    failure = None
    for seed in range(SCHEDULES):
        try:
            simulate(seed)
        except SimulationFailure as found:
            failure = found
            break
    assert failure is not None, 'the simulator did not find a takeover of a live holder'
    message = str(failure)
    assert f'simulation seed {failure.seed} failed' in message
    assert 'trace:' in message and 'taking_over' in message
    print(message[:2000])
    with pytest.raises(SimulationFailure) as replayed:
        simulate(failure.seed)
    assert replayed.value.problem == failure.problem
    assert replayed.value.trace == failure.trace
