"""A published 0.9.1-style client beside ours in one simulated run
(``python_dynamodb_lock/testing/_simulation/published.py``): they keep excluding each other, in
both directions, and the checker does watch the published client's holds.
"""
from __future__ import annotations

from typing import Iterator

import pytest

from python_dynamodb_lock.testing import SimulatedCaller, SimulationFailure, Workload, simulate
from python_dynamodb_lock.testing._simulation import published as published_model
from test_simulation import quiet_library  # noqa: F401 - autouse: the simulated clients log every event

ALWAYS = Workload(published_share=1.0)



def test_published_and_our_clients_exclude_each_other_both_ways() -> None:
    """Over these seeds (one client of three published-style in every run) every invariant
    holds, and both directions happen: the published client takes a key over from ours (after
    the lease, on the version it saw), and ours meet a published holder (an unfenced row)."""
    published_takeovers = met_published = 0
    for seed in range(120):
        result = simulate(seed, ALWAYS)
        assert result.published is not None and result.published.startswith('p')
        mine = f' {result.published}/caller '
        published_takeovers += sum(1 for line in result.trace if mine in line and 'event taking_over' in line)
        met_published += sum(1 for line in result.trace if 'event unfenced_holder' in line)
    assert published_takeovers > 0 and met_published > 0


def test_the_share_of_runs_with_a_published_client_is_the_workloads() -> None:
    assert all(simulate(seed, Workload(published_share=0.0)).published is None for seed in range(20))
    assert any(simulate(seed).published is not None for seed in range(20))


def test_a_users_script_runs_on_our_clients_only() -> None:
    names = []

    def script(caller: SimulatedCaller) -> Iterator[object]:
        names.append(caller.name)
        yield caller.sleep(1.0)

    simulate(1, ALWAYS, script=script)
    assert sorted(names) == ['c1', 'c2', 'c3']


def test_the_checker_watches_the_published_clients_holds(monkeypatch: pytest.MonkeyPatch) -> None:
    """Proof that the mixed runs bite: a published client that ignores the holder's lease (takes
    over the moment it sees a row) is caught holding a key beside one of ours."""
    monkeypatch.setattr(published_model.PublishedClient, '_abandoned', staticmethod(lambda item, seen_for: True))
    for seed in range(200):
        try:
            simulate(seed, ALWAYS)
        except SimulationFailure as failure:
            assert 'two exclusive holders' in failure.problem, failure.problem
            assert 'p' in failure.problem.split('clocks:')[1]
            return
    pytest.fail('no seed caught the impatient published client')
