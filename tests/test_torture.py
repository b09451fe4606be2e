"""Mutual-exclusion torture on DynamoDB Local: several processes, threads and clients, few keys.

Each worker process (:mod:`_torture.worker`, started with ``subprocess``) runs several workers
over two lock clients of its own, one threaded (its workers are threads) and one asyncio (its
workers are tasks on an event loop of the process): a mixed fleet. All of them contend for
four keys. Inside every hold a
thread does a non-atomic read-modify-write of a per-key counter in a second table (consistent
read, pause, unconditional put) and records its tenure as an interval of ``time.monotonic()``,
a clock every process on the machine shares. Most holds are short; a few last several
heartbeat periods, so renewals happen while the lock is in use.

What must hold at the end (:class:`_torture.runner.TortureResult`):

* every counter equals the number of holds of its key that committed: no update was lost;
* no two recorded intervals of one key overlap;
* no lock was taken over while its holder's lease ran, and every lock taken over was reported
  lost to its holder (``LOCK_STOLEN``; see :mod:`_torture.verdict`). A loaded machine may starve
  a holder's heartbeats past its lease: the takeover is then legitimate, and the holds reported
  lost are left out of the overlap check (an unguarded write of theirs may undo the increments
  of the holds they overlapped, at most one each);
* every lock was released (every row left is marked released, none records a held lock),
  every release of a lock not lost was clean;
* the fencing tokens of successive holds of a key grow (but of holds reported lost);
* the heartbeat sender and checker threads (or tasks) of every client were alive until
  ``close()`` and gone after it; the library logged no ERROR and no thread or task died with an
  exception;
* both kinds of lock client held locks.

These checks are :meth:`_torture.runner.TortureResult.problems`; the figures of each run are
printed (``pytest -s``) as one JSON line.

The same torture with faults injected is in ``test_faults.py``. :func:`test_guarded_write_torture_with_faults`
runs it with guarded writes: most holds increment their key's counter only through the lock
(``lock.update_item`` / ``lock.transact_write_items``), under injected faults, lost answers
and transaction conflicts included. Size: ``PDL_TORTURE_ACQUISITIONS``
(default 3000 and 800, times ``PDL_STRESS_SCALE``), or ``PDL_SOAK=1`` for 100 000;
``PDL_TORTURE_PROCESSES`` / ``PDL_TORTURE_THREADS``.
"""
from __future__ import annotations

import json
import pathlib
from typing import Any

import pytest

from _torture.faults import FaultRates
from _torture.runner import TortureConfig, TortureResult, env_int, run_torture, torture_size

pytestmark = [pytest.mark.local, pytest.mark.slow]

DEFAULT_ACQUISITIONS = 3000
DEFAULT_GUARDED_ACQUISITIONS = 800


def report(result: TortureResult, name: str) -> str:
    """Print the figures (shown with ``pytest -s`` or on failure) and return them as JSON."""
    text = json.dumps(result.summary(), sort_keys=True)
    print(f'\n{name}: {text}')
    return text


def test_mutual_exclusion_torture(dynamodb_local: Any, tmp_path: pathlib.Path) -> None:
    config = TortureConfig(
        acquisitions=torture_size(DEFAULT_ACQUISITIONS),
        processes=env_int('PDL_TORTURE_PROCESSES', 3),
        threads=env_int('PDL_TORTURE_THREADS', 4),
    )
    result = run_torture(dynamodb_local, tmp_path, config)
    summary = report(result, 'torture')
    assert result.problems() == [], summary
    # Without faults: every hold committed and was released cleanly, and nothing was left over.
    assert len(result.holds) == config.acquisitions
    # A mixed fleet: the threaded and the asyncio clients both held locks, and contended with each other.
    by_kind = result.holds_by_kind()
    assert set(by_kind) == {'threaded', 'asyncio'} and min(by_kind.values()) > config.acquisitions // 10, summary
    assert all(hold.committed for hold in result.holds)
    # No lock was taken over while its lease ran, and every loss was reported (in problems()).
    assert {hold.release_outcome for hold in result.holds if not hold.lost} == {'released'}, summary
    assert result.rows_left == [] and result.released_rows, summary   # only rows marked released are left
    assert {row['lock_key'] for row in result.released_rows} <= set(config.keys)
    # Contention really happened: waits, busy try-acquires, and several clients on every key.
    outcomes = result.outcome_counts()
    assert outcomes.get('try_busy', 0) > 0
    for key in config.keys:
        assert len({hold.owner for hold in result.holds if hold.key == key}) > 1
    # Some holds outlived several heartbeat periods, so renewals ran while locks were held,
    # both ways: single UpdateItem calls and BatchExecuteStatement groups (heartbeat_batch_size).
    assert any(hold.end - hold.start > 2 * config.heartbeat for hold in result.holds)
    calls = result.call_counts()
    assert calls.get('UpdateItem', 0) > 0 and calls.get('BatchExecuteStatement', 0) > 0, calls


# Faults of the guarded-write torture. TransactionConflict is never raised by DynamoDB Local: it
# is injected by a botocore before-send hook (``transaction_conflict``, on the first attempt of a
# TransactWriteItems only, as DynamoDB answers a retry of a committed transaction from its
# idempotency record), with the other faults on every call of the lock clients.
GUARDED_FAULTS = FaultRates(
    throttle=0.02,
    server_error=0.03,
    applied_server_error=0.03,
    lost_response=0.05,
    connection_error=0.01,
    latency=0.02,
    latency_range=(0.05, 0.3),
    transaction_conflict=0.15,
)


def test_guarded_write_torture_with_faults(dynamodb_local: Any, tmp_path: pathlib.Path) -> None:
    """Workers that increment a shared counter only through guarded writes while holding the lock.

    Most holds read their key's guarded counter, wait, and write value + 1 through
    ``lock.update_item`` or ``lock.transact_write_items`` (the same update adds 1 to
    ``applied`` and the hold's id to a set), with faults on every call of the lock clients:
    throttling, 5xx, 5xx after the write was applied, answers lost after the write landed
    (botocore or the library resends with the same ClientRequestToken), connection errors, and
    injected TransactionConflict cancellations (retried as new transactions). One lock client
    of each process gets a single attempt per call, so faults reach the library directly.
    Required: no lost increment (every write reported committed is in the counter), no double
    one (``applied`` equals the number of holds whose write applied), no overlap (the
    read-modify-written value equals ``applied``), and everything the plain torture requires.
    """
    config = TortureConfig(
        acquisitions=torture_size(DEFAULT_GUARDED_ACQUISITIONS),
        processes=env_int('PDL_TORTURE_PROCESSES', 3),
        threads=env_int('PDL_TORTURE_THREADS', 4),
        faults=GUARDED_FAULTS,
        total_attempts=(1, 3),
        guarded_probability=0.8,
        long_hold_probability=0.05,
        seed=env_int('PDL_TORTURE_SEED', 3),
    )
    result = run_torture(dynamodb_local, tmp_path, config)
    summary = report(result, 'guarded-write torture with faults')
    assert result.problems() == [], summary
    assert len(result.holds) == config.acquisitions, summary
    assert result.guarded_problems() == [] and result.overlaps() == [], summary
    guarded = [hold for hold in result.holds if hold.guarded]
    assert {hold.kind for hold in guarded} == {'threaded', 'asyncio'}, summary
    assert len(guarded) > config.acquisitions // 2 and any(not hold.guarded for hold in result.holds), summary
    # Exact accounting: every applied write is one committed hold, or one whose outcome the
    # library reported as unknown (UNKNOWN) and that had in fact landed.
    applied = sum(counter.applied for counter in result.guarded_counters.values())
    committed = sum(1 for hold in guarded if hold.committed)
    assert committed > 0 and applied == committed + result.unknown_guarded_outcomes()['applied'], summary
    # No lock was lost but to a takeover after its lease, reported (problems()); the writes of
    # the holds that lost their lock were refused (guarded_problems()).
    assert all(hold.write_error in ('', 'UNKNOWN') or hold.lost for hold in guarded), summary
    # The faults really reached the guarded writes, the injected conflicts included.
    transaction_faults: dict = {}
    for worker in result.workers:
        for kind, count in worker['faults'].get('TransactWriteItems', {}).items():
            transaction_faults[kind] = transaction_faults.get(kind, 0) + count
    for kind in ('transaction_conflict', 'lost_response', 'applied_server_error', 'server_error'):
        assert transaction_faults.get(kind, 0) > 0, (kind, summary)
    assert result.call_counts().get('TransactWriteItems', 0) >= len(guarded), summary
    assert result.rows_left == [] or all(outcome == 'reclaimed' for outcome in result.reclaimed.values()), summary


def test_the_guarded_checks_catch_lost_double_and_overlapping_writes() -> None:
    """Guards the test above: the checks are not vacuous (synthetic results, no engine)."""
    from _torture.runner import GuardedCounter, Hold

    config = TortureConfig(acquisitions=4, keys=('k',))

    def hold(hold_id: str, start: float, committed: bool, write_error: str = '', token: int = 0) -> Hold:
        return Hold('k', 'o', start, start + 1, 'v', 'v', 'LOCKED', 'released', 'RELEASED', committed, 0.0,
                    'threaded', token or int(start) + 1, True, hold_id, write_error)

    def problems(holds: list, counter: GuardedCounter) -> list:
        return TortureResult(config, [], holds, {'k': 0}, [], 0.0, guarded_counters={'k': counter}).guarded_problems()

    holds = [hold('a', 0, True), hold('b', 2, True), hold('c', 4, False, 'UNKNOWN')]
    assert problems(holds, GuardedCounter(3, 3, {'a', 'b', 'c'})) == []      # c's unknown write had landed
    assert problems(holds, GuardedCounter(2, 2, {'a', 'c'})) != []           # b's committed write is lost
    assert problems(holds, GuardedCounter(4, 4, {'a', 'b', 'c'})) != []      # one write applied twice
    assert problems(holds, GuardedCounter(2, 3, {'a', 'b', 'c'})) != []      # overlapping read-modify-writes
    refused = [hold('a', 0, True), hold('b', 2, False, 'LOCK_STOLEN')]
    assert problems(refused, GuardedCounter(2, 2, {'a', 'b'})) != []         # a refused write was applied
    assert problems(holds, GuardedCounter(4, 4, {'a', 'b', 'c', 'x'})) != []  # a write of no hold
    tokens = TortureResult(config, [], [hold('a', 0, True, token=5), hold('b', 2, True, token=5)], {'k': 0}, [], 0.0)
    assert tokens.tokens_out_of_order() != []
