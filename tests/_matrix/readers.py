"""The reader-stream cell: shared holders keep arriving (one a fake second on every key, each
holding two seconds, so that some reader always holds every key) in front of a writer.

A waiting writer (``acquire_lock``, ``acquire_locks``) is not starved: it gets the keys while
the readers still arrive (docs/shared_locks.rst, "No starved writer"), and no reader holds
with it. ``acquire_first_lock`` is the documented exception (it sets no writer marker): it
gets a key once the stream stops. A try (``try_acquire_lock``, ``try_acquire_locks``) gets
nothing while readers hold, leaves nothing that keeps readers out, and gets the keys once the
readers have gone.
"""
from __future__ import annotations

from typing import Any, List, Tuple

from _matrix.cells import Cell, once
from _matrix.checks import assert_rows_held
from _matrix.entries import ACQUIRE_FIRST_LOCK, acquire, waits
from helpers import BackgroundCall, step
from python_dynamodb_lock.python_dynamodb_lock import DynamoDBLockError

#: Fake seconds each reader holds its keys; seconds the stream goes on; the writer's timeout.
HOLD = 2
STREAM = 30
WRITER_TIMEOUT = 25
#: When the stream stops for ``acquire_first_lock`` (which may be overtaken by readers).
FIRST_LOCK_STREAM = 8


class Readers:
    """One client whose threads join every key shared, one reader a second."""

    def __init__(self, cell: Cell) -> None:
        self.cell = cell
        self.client = cell.make('readers')
        self.active: List[Tuple[Any, float]] = []

    def join(self) -> int:
        """A new reader on every key; how many keys it joined."""
        joined = 0
        for partition_key, sort_key in self.cell.keys:
            lock = self.client.try_acquire_lock(partition_key, sort_key, shared=True)
            if lock is not None:
                self.active.append((lock, self.cell.clock.monotonic()))
                joined += 1
        return joined

    def leave(self, everyone: bool = False) -> None:
        """The readers that have held for ``HOLD`` seconds (or all) release."""
        now = self.cell.clock.monotonic()
        for lock, since in list(self.active):
            if everyone or now - since >= HOLD:
                assert lock.release(best_effort=False) is True
                self.active.remove((lock, since))


def reader_stream(cell: Cell) -> None:
    readers = Readers(cell)
    writer = cell.make('writer')
    assert readers.join() == len(cell.keys)
    if not waits(cell.entry):
        _tries_in_front_of_readers(cell, readers, writer)
        return
    stream = FIRST_LOCK_STREAM if cell.entry == ACQUIRE_FIRST_LOCK else STREAM
    pending = BackgroundCall(acquire, writer, cell.entry, retry_period=1, retry_timeout=WRITER_TIMEOUT,
                             name=f'matrix-writer-{cell.entry}')
    step(cell.clock, 0, writer, threads=[pending.thread])
    for second in range(STREAM + 2 * HOLD):
        if pending.done:
            break
        if second < stream:
            readers.join()
        readers.leave()
        step(cell.clock, 1, writer, threads=[pending.thread])
    try:
        held = pending.result()
    except DynamoDBLockError as error:
        raise AssertionError(f'{cell.entry} was starved by a stream of readers: {error}') from error
    assert held is not None
    assert not readers.active, f'readers held {held.keys} together with the writer: {readers.active}'
    assert_rows_held(cell.engine, held)
    for partition_key, sort_key in held.keys:
        assert readers.client.try_acquire_lock(partition_key, sort_key, shared=True) is None, 'a reader joined a writer'
    held.release()


def _tries_in_front_of_readers(cell: Cell, readers: Readers, writer: Any) -> None:
    for _ in range(2 * HOLD):
        assert once(cell, writer) is None, f'{cell.entry} took keys held shared'
        cell.clock.advance(1)
        readers.leave()
        assert readers.join() == len(cell.keys), f'readers were kept out after a failed {cell.entry}'
    readers.leave(everyone=True)
    held = once(cell, writer)
    assert held is not None, f'{cell.entry} did not take the keys once the readers had gone'
    assert_rows_held(cell.engine, held)
    held.release()
