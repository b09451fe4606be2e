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
* no ``LOCK_STOLEN`` callback was reported and no lock was taken over;
* every lock was released (the lock table is empty), every release was clean;
* the heartbeat sender and checker threads (or tasks) of every client were alive until
  ``close()`` and gone after it; the library logged no ERROR and no thread or task died with an
  exception;
* both kinds of lock client held locks.

These checks are :meth:`_torture.runner.TortureResult.problems`; the figures of each run are
printed (``pytest -s``) as one JSON line.

The same torture with faults injected is in ``test_faults.py``. Size: ``PDL_TORTURE_ACQUISITIONS``
(default 3000), or ``PDL_SOAK=1`` for 100 000; ``PDL_TORTURE_PROCESSES`` / ``PDL_TORTURE_THREADS``.
"""
from __future__ import annotations

import json
import pathlib
from typing import Any

import pytest

from _torture.runner import TortureConfig, TortureResult, env_int, run_torture, torture_size

pytestmark = [pytest.mark.local, pytest.mark.slow]

DEFAULT_ACQUISITIONS = 3000


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
    assert {hold.release_outcome for hold in result.holds} == {'released'}
    assert result.stolen_callbacks() == []
    assert result.total('takeovers') == 0
    assert result.rows_left == []
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
