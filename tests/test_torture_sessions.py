"""Torture of client sessions with a killed and a paused process and published clients (issue 21).

Several worker processes, each with a threaded and an asyncio lock client built with
``session=True``, hold many locks at once: every thread or task takes a pocket of 5-12 of sixty
keys with single acquires in sorted order (so a process holds up to about 50 locks), writes each
key's counter through its lock (a guarded write), then releases them. One process is SIGKILLed
mid-run: its locks must be taken over by the others' session-aware waiters after the session
lease (and whatever is left at the end by a fresh session client). Another is SIGSTOPped past its
session lease and continued: its locks are taken over meanwhile, its guarded writes after the
resume are refused, and no two holds overlap. Published 0.9.1 clients contend for the same keys in
the same table: a hold of theirs never overlaps a session hold (they never take a lock whose
session lives, as the lock rows' versions change within their long lease).

Required: :meth:`_torture.runner.TortureResult.mixed_problems` (as in test_torture_sets.py).
Size: ``PDL_TORTURE_SESSIONS_ACQUISITIONS`` (default 150 pockets times ``PDL_STRESS_SCALE``).
"""
from __future__ import annotations

import pathlib
import signal
from typing import Any

import pytest

from _torture.runner import TortureConfig, env_int, run_torture, stress_size

pytestmark = [
    pytest.mark.local, pytest.mark.slow,
    pytest.mark.skipif(not hasattr(signal, 'SIGSTOP'), reason='needs POSIX signals'),
]

KEYS = tuple(f'shard-{index:02d}' for index in range(60))


def test_sessions_holding_many_locks_with_a_killed_and_a_paused_process_and_published_clients(
        dynamodb_local: Any, tmp_path: pathlib.Path) -> None:
    config = TortureConfig(
        acquisitions=env_int('PDL_TORTURE_SESSIONS_ACQUISITIONS', stress_size(150)),
        processes=env_int('PDL_TORTURE_PROCESSES', 4),
        threads=env_int('PDL_TORTURE_THREADS', 4),
        keys=KEYS,
        hold_mix={'ordered': 1.0},
        set_size_range=(5, 12),
        session=True,
        lease=5.0,
        safe_period=2.5,
        expiry_period=30.0,            # a lock row's lease, refreshed every 10 s
        try_probability=0.0,
        acquire_timeout=15.0,
        short_hold_range=(0.2, 0.6),
        long_hold_probability=0.1,
        long_hold_range=(1.0, 2.0),
        kill_worker=1,
        pause_worker=2,
        signal_after_holds=8,
        pause_seconds=9.0,
        published=('0.9.1',),
        seed=env_int('PDL_TORTURE_SEED', 21),
    )
    result = run_torture(dynamodb_local, tmp_path, config)
    summary = result.check_mixed_run('sessions torture')
    # Many locks at once under one session.
    assert max(len([h for h in result.holds if h.hold_id == hold.hold_id]) for hold in result.holds) >= 5, summary
    # The paused process lost locks to takeovers, and its writes under them were refused.
    paused = f'torture-w{config.pause_worker}-'
    assert any(hold.write_error == 'LOCK_STOLEN' for hold in result.lost_holds() if hold.owner.startswith(paused)), \
        summary
    # The published clients ran in the same table.
    assert any(worker.get('published') for worker in result.workers), summary
