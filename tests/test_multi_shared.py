"""``acquire_locks`` facing shared holders (docs/shared_locks.rst, "No starved writer"), on
DynamoDB Local, for both clients.

A set that finds a key held shared sets the writer-waiting marker on it, as ``acquire_lock``
does, so that a stream of new readers cannot keep it out; it takes its markers off when it
times out or is interrupted, and its own write removes them when it gets the set. A shared row
of this package is never reported as held by a published (unfenced) client.
"""
from __future__ import annotations

import asyncio
import logging
import threading
from datetime import timedelta
from typing import Any, List

import pytest

from helpers import BackgroundCall, LockClients, step
from python_dynamodb_lock.python_dynamodb_lock import DynamoDBLockError
from python_dynamodb_lock.testing import REAL_TIMEOUT, LockTable, SystemClock, wait_until
from test_aio import run
from test_multi_keys import acquire_locks

seconds = timedelta
# Hand-driven clients (no heartbeats): leases far longer than any hold, so that no reader is
# ever presumed dead in the stream.
LONG = {'heartbeat_period': seconds(seconds=1), 'safe_period': seconds(seconds=5),
        'lease_duration': seconds(seconds=10)}
# Hand-driven on the test's ManualClock: a lease is a few steps.
PERIODS = {'heartbeat_period': seconds(seconds=1), 'safe_period': seconds(seconds=2),
           'lease_duration': seconds(seconds=3)}
READERS = 4
HOLD_AT_MOST = 1.0     # a reader of the stream leaves once a later reader joined, or after this long


class ReaderStream:
    """Threads taking one key shared in a loop. Each reader stays until a later reader has
    joined (at most ``HOLD_AT_MOST`` seconds), so while new readers keep joining the key is
    never free: a writer gets it only if new readers are held back."""

    def __init__(self, clients: List[Any], key: str) -> None:
        self.key = key
        self.joins = 0
        self.holding = self.most_holding = 0
        self.failures: List[BaseException] = []
        self.stop = threading.Event()
        self._changed = threading.Condition()
        self.threads = [threading.Thread(target=self._read, args=(client,), name=f'reader-{index}', daemon=True)
                        for index, client in enumerate(clients)]
        for thread in self.threads:
            thread.start()

    def _read(self, client: Any) -> None:
        try:
            while not self.stop.is_set():
                lock = client.acquire_lock(self.key, shared=True, retry_period=seconds(seconds=0.02),
                                           retry_timeout=seconds(seconds=REAL_TIMEOUT))
                with self._changed:
                    self.joins += 1
                    self.holding += 1
                    self.most_holding = max(self.most_holding, self.holding)
                    mine = self.joins
                    self._changed.notify_all()
                    self._changed.wait_for(lambda mine=mine: self.joins > mine or self.stop.is_set(), HOLD_AT_MOST)
                    self.holding -= 1
                lock.release(best_effort=False)
        except BaseException as exc:   # noqa: B036 - reported by finish()
            self.failures.append(exc)

    def wait_for_joins(self, count: int) -> None:
        with self._changed:
            assert self._changed.wait_for(lambda: self.joins >= count, REAL_TIMEOUT), f'{count} joins'

    def finish(self) -> None:
        self.stop.set()
        with self._changed:
            self._changed.notify_all()
        for thread in self.threads:
            thread.join(REAL_TIMEOUT)
        assert not any(thread.is_alive() for thread in self.threads)
        assert self.failures == []


def test_a_stream_of_shared_readers_does_not_starve_a_set(local_engine: LockTable, local_clients: LockClients) -> None:
    readers = [local_clients.make(owner_name=f'reader-{index}', clock=SystemClock(), **LONG)
               for index in range(READERS // 2)]
    writer = local_clients.make(owner_name='writer', clock=SystemClock(), **LONG)
    stream = ReaderStream(readers * 2, 'hot')       # two threads per client
    try:
        stream.wait_for_joins(2 * READERS)          # the stream runs
        multi = acquire_locks(writer, ['hot', 'cold'], retry_period=seconds(seconds=0.05),
                              retry_timeout=seconds(seconds=30))
        assert multi.status == 'LOCKED'
        row = local_engine.read_item('hot')
        assert row['owner_name'] == 'writer' and 'shared_holders' not in row and 'writer_waiting' not in row
        multi.release(best_effort=False)
        joined = stream.joins
        stream.wait_for_joins(joined + READERS)      # readers join again
    finally:
        stream.finish()
    assert stream.most_holding >= 2                  # the readers did overlap
    assert 'writer_waiting' not in local_engine.read_item('hot')


def test_a_set_waiting_for_shared_holders_keeps_new_readers_out_until_it_times_out(
        local_engine: LockTable, local_clients: LockClients) -> None:
    clock = local_clients.clock
    first, late, writer = (local_clients.make(owner_name=name, **PERIODS) for name in ('first', 'late', 'writer'))
    first.acquire_lock('key', shared=True, retry_timeout=seconds(0))
    waiter = BackgroundCall(acquire_locks, writer, ['key', 'other'], retry_period=seconds(seconds=1),
                            retry_timeout=seconds(seconds=3))
    step(clock, 1, writer, threads=[waiter.thread])
    assert local_engine.read_item('key')['writer_waiting']['owner'] == 'writer'
    assert late.try_acquire_lock('key', shared=True) is None          # a writer waits: no new reader joins
    for _ in range(2):
        first.send_heartbeats()                                        # the holder lives
        step(clock, 1, writer, threads=[waiter.thread])
    error = waiter.error()
    assert isinstance(error, DynamoDBLockError) and error.code == DynamoDBLockError.ACQUIRE_TIMEOUT
    assert 'writer_waiting' not in local_engine.read_item('key')      # taken off
    assert late.try_acquire_lock('key', shared=True) is not None      # readers join again at once
    assert local_engine.read_item('other') is None


def test_try_acquire_locks_sets_no_marker(local_engine: LockTable, local_clients: LockClients) -> None:
    from test_multi_keys import try_acquire_locks
    first, writer = (local_clients.make(owner_name=name, **PERIODS) for name in ('first', 'writer'))
    first.acquire_lock('key', shared=True, retry_timeout=seconds(0))
    assert try_acquire_locks(writer, ['key', 'other']) is None
    assert 'writer_waiting' not in local_engine.read_item('key')
    assert first.try_acquire_lock('key', shared=True) is not None


@pytest.mark.threaded_only
def test_a_set_cancelled_while_it_waits_for_shared_holders_takes_its_marker_off(local_engine: LockTable) -> None:
    reader = local_engine.lock_client(owner_name='reader', background_heartbeats=False)
    writer = local_engine.lock_client(owner_name='writer', background_heartbeats=False)
    reader.acquire_lock('hot', shared=True)
    cancel = threading.Event()
    call = BackgroundCall(writer.acquire_locks, ['hot', 'cold'], retry_period=seconds(seconds=0.05),
                          retry_timeout=seconds(minutes=5), cancel=cancel)
    wait_until(lambda: 'writer_waiting' in local_engine.read_item('hot'), message=lambda: 'no marker was set')
    assert reader.try_acquire_lock('hot', shared=True) is None
    cancel.set()
    error = call.error()
    assert isinstance(error, DynamoDBLockError) and error.code == DynamoDBLockError.ACQUIRE_CANCELLED
    assert writer.wait_settled(REAL_TIMEOUT)
    assert 'writer_waiting' not in local_engine.read_item('hot')
    assert reader.try_acquire_lock('hot', shared=True) is not None     # readers join again at once
    assert writer.held_locks() == []


@pytest.mark.threaded_only
def test_a_cancelled_set_task_waiting_for_shared_holders_takes_its_marker_off(local_engine: LockTable) -> None:
    async def main() -> None:
        async with local_engine.async_lock_client(owner_name='reader', background_heartbeats=False) as reader, \
                local_engine.async_lock_client(owner_name='writer', background_heartbeats=False) as writer:
            await reader.acquire_lock('hot', shared=True)
            task = asyncio.ensure_future(writer.acquire_locks(['hot', 'cold'], retry_period=seconds(seconds=0.05),
                                                              retry_timeout=seconds(minutes=5)))
            deadline = asyncio.get_running_loop().time() + REAL_TIMEOUT
            while 'writer_waiting' not in await asyncio.to_thread(local_engine.read_item, 'hot'):
                assert asyncio.get_running_loop().time() < deadline, 'no marker was set'
                assert not task.done()
            assert await reader.try_acquire_lock('hot', shared=True) is None
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert await writer.wait_settled(REAL_TIMEOUT)
            row = await asyncio.to_thread(local_engine.read_item, 'hot')
            assert 'writer_waiting' not in row
            assert await reader.try_acquire_lock('hot', shared=True) is not None
            assert writer.held_locks() == []

    run(main())


def test_a_set_meeting_a_shared_row_of_ours_reports_no_unfenced_holder(
        local_engine: LockTable, local_clients: LockClients, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger='python_dynamodb_lock')
    reader, writer = (local_clients.make(owner_name=name, clock=SystemClock(), **LONG) for name in ('reader', 'writer'))
    reader.acquire_lock('key', shared=True, retry_timeout=seconds(0))     # never held exclusively: no token
    with pytest.raises(DynamoDBLockError) as timed_out:
        acquire_locks(writer, ['key', 'other'], retry_period=seconds(seconds=0.05), retry_timeout=seconds(seconds=0.3))
    assert timed_out.value.code == DynamoDBLockError.ACQUIRE_TIMEOUT
    messages = [record.getMessage() for record in caplog.records]
    assert any('Gave up acquiring' in message for message in messages), messages    # it did wait and look
    assert not [message for message in messages if 'fencing token' in message or '0.9.x' in message]
