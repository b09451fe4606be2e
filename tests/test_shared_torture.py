"""A small shared-lock torture on DynamoDB Local: threads of two threaded clients and tasks of
an asyncio client take one key at random, shared or exclusive, hold it briefly and release it.
In-process counters, changed only while a lock is held, check exclusion at every entry: an
exclusive hold never overlaps another hold (shared or exclusive); shared holds do overlap.
"""
from __future__ import annotations

import asyncio
import random
import threading
import time
from datetime import timedelta
from typing import Any, Dict, List

import pytest

from python_dynamodb_lock.python_dynamodb_lock import DynamoDBLockClient

seconds = timedelta
PERIODS = {'heartbeat_period': seconds(seconds=0.25), 'safe_period': seconds(seconds=1.5),
           'lease_duration': seconds(seconds=3)}
THREADS, TASKS, ROUNDS = 3, 3, 12


class Tally:
    """Who holds the key now, checked at every entry (a plain mutex: entries and exits only)."""

    def __init__(self) -> None:
        self.guard = threading.Lock()
        self.readers = self.writers = 0
        self.most_readers = 0
        self.holds = {'shared': 0, 'exclusive': 0}
        self.violations: List[str] = []
        self.tokens: List[int] = []

    def enter(self, shared: bool, lock: Any) -> None:
        with self.guard:
            if self.writers or (not shared and self.readers):
                self.violations.append(f'{"shared" if shared else "exclusive"} entry with {self.readers} readers '
                                       f'and {self.writers} writers')
            if shared:
                self.readers += 1
                self.most_readers = max(self.most_readers, self.readers)
            else:
                self.writers += 1
                self.tokens.append(lock.fencing_token)

    def leave(self, shared: bool) -> None:
        with self.guard:
            if shared:
                self.readers -= 1
            else:
                self.writers -= 1
            self.holds['shared' if shared else 'exclusive'] += 1


@pytest.mark.slow
@pytest.mark.threaded_only
def test_no_exclusive_hold_overlaps_any_other_hold(local_engine: Any) -> None:
    tally = Tally()
    chosen: Dict[str, int] = {'shared': 0, 'exclusive': 0}
    failures: List[BaseException] = []
    randomness = random.Random(20)
    plans = [[randomness.random() < 0.7 for _ in range(ROUNDS)] for _ in range(2 * THREADS + TASKS)]
    for plan in plans:
        for shared in plan:
            chosen['shared' if shared else 'exclusive'] += 1

    def threaded_worker(client: DynamoDBLockClient, plan: List[bool]) -> None:
        try:
            for shared in plan:
                lock = client.acquire_lock('hot', shared=shared, retry_period=seconds(seconds=0.05),
                                           retry_timeout=seconds(seconds=120))
                tally.enter(shared, lock)
                time.sleep(0.01)
                tally.leave(shared)
                lock.release(best_effort=False)
        except BaseException as exc:   # noqa: B036 - reported below
            failures.append(exc)

    async def tasks(plans: List[List[bool]]) -> None:
        async with local_engine.async_lock_client(owner_name='tasks', **PERIODS) as client:
            async def worker(plan: List[bool]) -> None:
                for shared in plan:
                    lock = await client.acquire_lock('hot', shared=shared, retry_period=seconds(seconds=0.05),
                                                     retry_timeout=seconds(seconds=120))
                    tally.enter(shared, lock)
                    await asyncio.sleep(0.01)
                    tally.leave(shared)
                    await lock.release(best_effort=False)
            await asyncio.gather(*(worker(plan) for plan in plans))

    def task_thread() -> None:
        try:
            asyncio.run(tasks(plans[2 * THREADS:]))
        except BaseException as exc:   # noqa: B036 - reported below
            failures.append(exc)

    clients = [local_engine.lock_client(owner_name=f'threads-{index}', **PERIODS) for index in range(2)]
    workers = [threading.Thread(target=threaded_worker, args=(clients[index % 2], plans[index]))
               for index in range(2 * THREADS)]
    workers.append(threading.Thread(target=task_thread))
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(600)
    for client in clients:
        client.close()
    assert not any(worker.is_alive() for worker in workers)
    assert failures == []
    assert tally.violations == []
    assert tally.holds == chosen                     # every acquisition held and released once
    assert tally.tokens == sorted(tally.tokens) and len(set(tally.tokens)) == len(tally.tokens)
    print(f'shared torture: {tally.holds}, at most {tally.most_readers} readers at once')
    row = local_engine.read_item('hot')
    assert row.get('released_at') is not None and 'shared_holders' not in row
