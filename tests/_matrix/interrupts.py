"""The cancellation cells: before the first write, while waiting, while the acquiring write is
in flight, and a cancel of the wrong type.

The threaded client is cancelled with ``cancel=threading.Event()`` (on the entry points that
take it; the others refuse it); the asyncio client by cancelling the acquisition's task (every
entry point), and refuses ``cancel=``. After a cancellation and ``wait_settled``, nothing is
held: another client takes every key at once.
"""
from __future__ import annotations

import asyncio
import datetime
import threading
import time
from typing import Any, Callable

from _matrix.cells import CANCEL_ANSWER_BOUND, LATE_ANSWER, Cell
from _matrix.checks import assert_free, nothing_written
from _matrix.entries import ACQUIRE_LOCKS, TRY_ACQUIRE_LOCKS, Pending, acquire, is_cancellation, wait_settled
from helpers import REAL_TIMEOUT, THREADED, FaultInjector, step, wait_until


def cancel_before(cell: Cell) -> None:
    """Cancelled before it starts: ``ACQUIRE_CANCELLED`` (threaded, an event already set) or
    the task's cancellation (asyncio), and nothing written; the threaded entry points without
    ``cancel=`` refuse it."""
    client, checker = cell.make('canceller'), cell.make('checker')
    if cell.kind == THREADED and not cell.accepts('cancel'):
        cell.refused(client, 'cancel', cancel=threading.Event())
        return
    with nothing_written(cell.engine, client._dynamodb_resource, cell.keys):
        if cell.kind == THREADED:
            already = threading.Event()
            already.set()
            error = _raised(lambda: acquire(client, cell.entry, cancel=already))
        else:
            error = _raised(lambda: acquire(client, cell.entry, cancel_at_once=True))
        assert is_cancellation(error), f'not cancelled: {error!r}'
    assert_free(checker, cell.keys, 'after a cancelled acquisition')


def _raised(call: Callable[[], Any]) -> BaseException:
    try:
        call()
    except BaseException as error:   # noqa: B036 - the task's CancelledError too
        return error
    raise AssertionError('the cancelled acquisition returned a lock')


_NO_WAIT = datetime.timedelta(0)


def cancel_while_waiting(cell: Cell, waiter: Any) -> None:
    """Start the entry point on ``waiter``, let it poll twice, cancel it: it answers cancelled
    and what it left settles."""
    pending = Pending(waiter, cell.entry, retry_period=1, retry_timeout=3600)
    step(cell.clock, 2, waiter, threads=[pending.thread])        # two polls: it is waiting
    assert not pending.call.done, f'the waiting acquisition returned: {pending.call.error()!r}'
    pending.cancel()
    error = pending.call.error()
    assert is_cancellation(error), f'not cancelled: {error!r}'
    assert wait_settled(waiter, REAL_TIMEOUT), 'the cancelled acquisition did not settle'


def cancel_waiting(cell: Cell) -> None:
    """Cancelled while it waits for keys another client holds: it answers cancelled, leaves the
    holder's rows alone, and once the holder releases, another client takes every key at once."""
    blocker, waiter, checker = cell.make('blocker'), cell.make('waiter'), cell.make('checker')
    blocks = [blocker.acquire_lock(partition_key, sort_key, retry_timeout=_NO_WAIT)
              for partition_key, sort_key in cell.keys]
    cancel_while_waiting(cell, waiter)
    for lock in blocks:
        row = cell.engine.read_held_row(lock.partition_key, lock.sort_key)
        assert row is not None and row['record_version_number'] == lock.record_version_number
        assert lock.release(best_effort=False) is True
    assert_free(checker, cell.keys, 'after a cancelled wait')


def cancel_waiting_on_readers(cell: Cell) -> None:
    """Cancelled while it waits for shared holders (having set its writer marker, where it sets
    one): it answers cancelled, new readers join every key at once (no marker left to keep
    them out), and once the readers leave, another client takes every key at once."""
    readers, waiter, checker = cell.make('readers'), cell.make('waiter'), cell.make('checker')
    shared = [readers.try_acquire_lock(partition_key, sort_key, shared=True) for partition_key, sort_key in cell.keys]
    assert all(lock is not None for lock in shared)
    cancel_while_waiting(cell, waiter)
    for partition_key, sort_key in cell.keys:
        joined = readers.try_acquire_lock(partition_key, sort_key, shared=True)
        assert joined is not None, f'readers were kept out of {partition_key}|{sort_key} after a cancelled writer'
        shared.append(joined)
    for lock in shared:
        assert lock is not None and lock.release(best_effort=False) is True
    assert_free(checker, cell.keys, 'after a cancelled wait on readers')


def cancel_in_flight(cell: Cell) -> None:
    """Cancelled once its acquiring write has landed and while its answer is late: it answers
    cancelled within ``CANCEL_ANSWER_BOUND`` (generous), and after ``wait_settled`` what
    landed is freed: another client takes every key at once."""
    waiter, checker = cell.make('waiter'), cell.make('checker')
    operation = 'TransactWriteItems' if cell.entry in (ACQUIRE_LOCKS, TRY_ACQUIRE_LOCKS) else 'UpdateItem'
    with FaultInjector(waiter._dynamodb_resource) as faults:
        late = faults.add_latency(operation, LATE_ANSWER, times=1, after_sending=True)
        pending = Pending(waiter, cell.entry, retry_period=1, retry_timeout=3600)
        wait_until(lambda: late.hits == 1 or pending.call.done, REAL_TIMEOUT,
                   lambda: 'the acquiring write was not sent')
        assert not pending.call.done, f'returned before its write was answered: {pending.call.error()!r}'
        landed = [cell.engine.read_held_row(partition_key, sort_key) for partition_key, sort_key in cell.keys]
        assert any(row is not None for row in landed), 'the acquiring write did not land'
        cancelled_at = time.monotonic()
        pending.cancel()
        pending.thread.join(REAL_TIMEOUT)
        answered_after = time.monotonic() - cancelled_at
        error = pending.call.error()
        assert is_cancellation(error), f'not cancelled: {error!r}'
        assert answered_after < CANCEL_ANSWER_BOUND, (
            f'cancelled while its write was in flight, it answered after {answered_after:.2f}s')
        assert wait_settled(waiter, REAL_TIMEOUT), 'the cancelled acquisition did not settle'
    assert_free(checker, cell.keys, 'after an acquisition cancelled while its write was in flight')


def cancel_wrong_type(cell: Cell) -> None:
    """A ``cancel`` the client cannot wait on is refused before anything is written: an
    ``asyncio.Event`` on the threaded client, any ``cancel=`` on the asyncio one."""
    client = cell.make('canceller')
    if cell.kind == THREADED:
        cell.refused(client, 'threading.Event', cancel=asyncio.Event())
    else:
        cell.refused(client, 'cancel', cancel=threading.Event())

