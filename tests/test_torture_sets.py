"""Torture of several keys at once and shared locks, with a killed and a paused process (issue 20).

Several worker processes (:mod:`_torture.worker`, ``hold_mix``), each with a threaded and an
asyncio lock client (threads and tasks), hold at random: a set of 1-10 of twelve keys
(``acquire_locks``, keys in random order), one key shared (``acquire_lock(..., shared=True)``, a
reader: it reads its key's counter and writes nothing), or one key exclusively. Every exclusive
write goes through the locks: a set writes every key's counter in one guarded transaction
(``multi.transact_write_items``), a single lock with ``lock.transact_write_items``. One process
is SIGKILLed once it recorded some holds (its holds are streamed to a file as they end); another
is SIGSTOPped for longer than the lease, then SIGCONTinued.

Required (:meth:`_torture.runner.TortureResult.mixed_problems`): no two exclusive holds of a key
overlap (a set hold is an exclusive hold of each of its keys), no exclusive hold overlaps a
shared one, the guarded counters are exact (every write reported committed is there once, none
twice, the read-modify-written value equals the number of writes), no caller got a partial set
(every returned multi-lock holds each key it asked for, locked, with a token), tokens grow, the
keys the killed process held are taken over. Holds that lost their lock to a takeover (the paused
process's, or those of a worker a loaded machine starved past its lease, counted) are left out of
the overlap check; their writes must have been refused (the counters say so), and the paused
process must have lost some. Progress: every worker that was not killed finishes its share (an acquire that times
out is counted and tried again); the run's throughput and timeouts are printed (``pytest -s``).

Size: ``PDL_TORTURE_SETS_ACQUISITIONS`` (default 400 times ``PDL_STRESS_SCALE``),
``PDL_TORTURE_PROCESSES`` / ``PDL_TORTURE_THREADS``.
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

KEYS = tuple(f'key-{index:02d}' for index in range(12))


def test_sets_shared_and_single_locks_with_a_killed_and_a_paused_process(dynamodb_local: Any,
                                                                          tmp_path: pathlib.Path) -> None:
    config = TortureConfig(
        acquisitions=env_int('PDL_TORTURE_SETS_ACQUISITIONS', stress_size(400)),
        processes=env_int('PDL_TORTURE_PROCESSES', 4),
        threads=env_int('PDL_TORTURE_THREADS', 4),
        keys=KEYS,
        hold_mix={'set': 0.4, 'shared': 0.3, 'exclusive': 0.3},
        set_size_range=(1, 10),
        try_probability=0.0,
        acquire_timeout=15.0,
        lease=5.0,
        safe_period=2.5,
        long_hold_probability=0.05,
        kill_worker=1,
        pause_worker=2,
        signal_after_holds=15,
        pause_seconds=9.0,
        seed=env_int('PDL_TORTURE_SEED', 20),
    )
    result = run_torture(dynamodb_local, tmp_path, config)
    summary = result.check_mixed_run('sets torture')
    modes = {hold.mode for hold in result.holds}
    assert modes == {'set', 'shared', 'exclusive'}, summary
    assert {hold.kind for hold in result.holds if hold.mode == 'set'} == {'threaded', 'asyncio'}, summary
    assert any(len({h.key for h in result.holds if h.hold_id == hold.hold_id and h.mode == 'set'}) > 1
               for hold in result.holds if hold.mode == 'set'), summary
    assert all(hold.committed for hold in result.holds if hold.mode in ('set', 'exclusive') and not hold.lost
               and hold.write_error == ''), summary


def test_the_mixed_checks_catch_overlaps_of_sets_and_shared_holds() -> None:
    """Guards the test above: the overlap checks are not vacuous (synthetic results, no engine)."""
    from _torture.runner import Hold, TortureResult

    config = TortureConfig(acquisitions=4, keys=('k',), pause_worker=2)

    def hold(owner: str, start: float, end: float, mode: str, release_outcome: str = 'released') -> Hold:
        return Hold('k', f'torture-{owner}-c0-1', start, end, 'v', 'v', 'LOCKED', release_outcome, 'RELEASED', True,
                    0.0, 'threaded', int(start) + 1, mode != 'shared', f'{owner}-{start}', '', mode)

    def overlaps(*holds: Hold) -> int:
        result = TortureResult(config, [], list(holds), {}, [], 0.0, signals={'paused': {'worker': 2, 'from': 10.0,
                                                                                        'to': 20.0}})
        return len(result.overlaps(excuse_lost=True))

    assert overlaps(hold('w0', 0, 2, 'shared'), hold('w1', 1, 3, 'shared')) == 0      # readers share
    assert overlaps(hold('w0', 0, 2, 'shared'), hold('w1', 1, 3, 'set')) == 1         # a set overlaps a reader
    assert overlaps(hold('w0', 0, 2, 'exclusive'), hold('w1', 1, 3, 'set')) == 1      # two writers
    assert overlaps(hold('w0', 0, 5, 'set'), hold('w1', 1, 2, 'shared'), hold('w3', 3, 4, 'shared')) == 2
    assert overlaps(hold('w0', 0, 2, 'set'), hold('w1', 2.5, 3, 'exclusive')) == 0
    # Only a hold that lost its lock as the library reported (LOCK_STOLEN) is excused: the paused
    # worker's holds across the pause too must have been told (their strict release raises).
    assert overlaps(hold('w0', 0, 2, 'set', 'LOCK_STOLEN'), hold('w1', 1, 3, 'set')) == 0
    assert overlaps(hold('w2', 9, 21, 'shared', 'LOCK_STOLEN'), hold('w1', 15, 16, 'set')) == 0
    assert overlaps(hold('w2', 9, 21, 'shared'), hold('w1', 15, 16, 'set')) == 1
    assert overlaps(hold('w2', 21, 23, 'shared'), hold('w1', 22, 24, 'set')) == 1
    assert overlaps(hold('w3', 9, 21, 'shared'), hold('w1', 15, 16, 'set')) == 1
