"""Proof that the simulator's wider invariants bite (issue 29): each test puts one defect back
into the protocol (a patched core or orchestration, undone after the test) and requires a seed
of the CI-sized run to break an invariant - the one the defect is about - naming the seed, which
replays the same failure. The known defects the default run tolerates are shown the same way.

``PDL_SIMULATION_SCHEDULES`` (default 400) bounds the seeds searched, as for the CI-sized run.
"""
from __future__ import annotations

import os
from typing import Any, List, Optional, Sequence

import pytest

import python_dynamodb_lock._client.several_keys as several_keys
import python_dynamodb_lock._core.guard as core_guard
import python_dynamodb_lock._core.heartbeat as core_heartbeat
import python_dynamodb_lock._core.release as core_release
import python_dynamodb_lock._core.shared_ops as shared_ops
from python_dynamodb_lock._core.effects import Protocol
from python_dynamodb_lock._core.events import Kind
from python_dynamodb_lock._core.release import ReleaseOutcome, ReleaseVerdict
from python_dynamodb_lock._core.state import Status
from python_dynamodb_lock._wire.requests import Request
from python_dynamodb_lock.testing._simulation import SimulationFailure, Workload, simulate
from test_simulation import quiet_library  # noqa: F401 - autouse: the simulated clients log every event

SCHEDULES = int(os.environ.get('PDL_SIMULATION_SCHEDULES', '400'))



def _first_failure(workload: Workload = Workload(), known: Sequence[int] = ()) -> SimulationFailure:
    """The first seed of the CI-sized run (after the ``known`` ones: seeds a long run found)
    that fails, checked to replay the same failure."""
    for seed in [*known, *range(SCHEDULES)]:
        try:
            simulate(seed, workload)
        except SimulationFailure as found:
            with pytest.raises(SimulationFailure) as replayed:
                simulate(seed, workload)
            assert replayed.value.problem == found.problem
            assert replayed.value.trace == found.trace
            assert f'simulation seed {seed} failed' in str(found)
            print(f'found by seed {seed}: {found.problem}')
            return found
    raise AssertionError(f'no seed of {SCHEDULES} found the defect')


# -- the defects ---------------------------------------------------------------------------


class _NoSessionStart:
    """A client's sessions, as the several-keys path would see them if it never started one."""

    def __init__(self, sessions: Any) -> None:
        self._sessions = sessions

    def starting(self, attempts: List[Any]) -> Protocol[List[Any]]:
        return list(attempts)
        yield   # a protocol that writes nothing


def test_several_keys_without_the_session_row(monkeypatch: pytest.MonkeyPatch) -> None:
    """acquire_locks / try_acquire_locks of a client with a session, the session start skipped
    (the round-4 defect): rows name a session whose row was never written."""
    original = several_keys.SeveralKeys.__init__

    def init(self: Any, state: Any, sessions: Any, *args: Any) -> None:
        original(self, state, _NoSessionStart(sessions), *args)

    monkeypatch.setattr(several_keys.SeveralKeys, '__init__', init)
    failure = _first_failure()
    assert 'session row is not in the table' in failure.problem


def test_try_acquire_locks_without_takeover_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    """A refused set records nothing in the client's memory of holders' versions: repeated
    try_acquire_locks never takes over a dead holder's keys (liveness)."""
    original = several_keys.acquire_all

    def forgetful(attempts: Any, clock: Any, is_closed: Any, observations: Any = None) -> Any:
        return original(attempts, clock, is_closed, None)

    monkeypatch.setattr(several_keys, 'acquire_all', forgetful)
    failure = _first_failure()
    assert failure.problem.startswith('liveness:')


def test_an_exclusive_writer_that_ignores_shared_holders(monkeypatch: pytest.MonkeyPatch) -> None:
    """An exclusive acquisition presumes every shared holder dead at first sight."""
    def may_write(self: Any, clock: Any, row: Any, refresh: bool = True) -> Protocol[bool]:
        return True
        yield   # writes nothing

    monkeypatch.setattr(shared_ops.WriterWait, 'may_write', may_write)
    failure = _first_failure()
    assert 'an exclusive holder beside a shared one' in failure.problem


def test_a_guarded_write_without_its_condition(monkeypatch: pytest.MonkeyPatch) -> None:
    """A guarded write sent with a lock condition that always holds."""
    def unguarded(operation: str, params: Any) -> Request:
        if operation == 'transact_write_items':
            params = dict(params, TransactItems=[
                {'ConditionCheck': dict(action['ConditionCheck'],
                                        ConditionExpression='#acquisition = :acquisition OR attribute_exists('
                                                            '#acquisition) OR attribute_not_exists(#acquisition)')}
                if 'ConditionCheck' in action else action for action in params['TransactItems']])
        return Request(operation, params)

    monkeypatch.setattr(core_guard, 'Request', unguarded)
    failure = _first_failure()
    assert failure.problem.startswith('a guarded write of')


def test_a_set_handed_over_in_part(monkeypatch: pytest.MonkeyPatch) -> None:
    """acquire_locks hands its caller the first key's lock only (the others stay held)."""
    original = several_keys.SeveralKeys.acquiring

    def acquiring(self: Any, *args: Any) -> Protocol[Optional[List[Any]]]:
        locks = yield from original(self, *args)
        return None if locks is None else locks[:1]

    monkeypatch.setattr(several_keys.SeveralKeys, 'acquiring', acquiring)
    failure = _first_failure()
    assert 'was handed part of the set' in failure.problem


def test_a_theft_that_nobody_reports(monkeypatch: pytest.MonkeyPatch) -> None:
    """A heartbeat that finds its lock taken over drops the news, and a release that finds it
    taken over says "released": the holder is never told."""
    original_verdict, original_events = core_release.release_verdict, core_heartbeat.settle_events

    def verdict(result: Any, *args: Any) -> ReleaseVerdict:
        if result.outcome is ReleaseOutcome.STOLEN:
            return ReleaseVerdict(Status.RELEASED, Kind.RELEASED, released=True)
        return original_verdict(result, *args)

    def events(*args: Any) -> List[Any]:
        return [event for event in original_events(*args) if event.kind is not Kind.STOLEN]

    monkeypatch.setattr(core_release, 'release_verdict', verdict)
    monkeypatch.setattr(core_heartbeat, 'settle_events', events)
    failure = _first_failure()
    assert 'was never told' in failure.problem
