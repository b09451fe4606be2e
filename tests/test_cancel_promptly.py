"""Cancelling an acquisition answers at once, and only events that can be watched are accepted.

* The threaded client's ``cancel=`` event, set while the acquiring write is on the wire (it has
  landed; its answer is held back), ends the call with ``ACQUIRE_CANCELLED`` while that answer
  is still held: the caller does not wait for the undo (which needs the answer) nor for the
  half second a Ctrl-C leaves it; the undo goes on in the background, and once
  ``wait_settled()`` returns the row is free: another client takes it with one attempt, and
  nobody is told ``LOCK_STOLEN``. For every entry point that takes ``cancel=``.
* The asyncio client's equivalent, cancelling the task, ends the task while the undo's own
  calls are still held back: the undo is a task of its own.
* A ``cancel`` (or ``wake``) event of the wrong kind, an ``asyncio.Event`` given to the
  threaded client say, is refused with ``TypeError`` before anything is written; the thread
  that watches a ``cancel`` event never dies silently.

On DynamoDB Local; the answers are held with botocore event hooks.
"""
from __future__ import annotations

import asyncio
import datetime
import logging
import threading
from typing import Any, Callable, Dict, List, Tuple

import pytest

from helpers import BackgroundCall, CallbackRecorder, CallRecorder, FaultInjector, HoldAnswer
from test_interruptions import Gate
from test_aio import REAL_TIMEOUT, eventually, run
from python_dynamodb_lock.python_dynamodb_lock import DynamoDBLockClient, DynamoDBLockError
from python_dynamodb_lock.testing import LockTable, is_acquire

pytestmark = pytest.mark.local

seconds = datetime.timedelta
Key = Tuple[str, str]


def _acquire_lock(client: Any, cancel: Any, callback: Any) -> Any:
    return client.acquire_lock('solo', cancel=cancel, app_callback=callback)


def _acquire_shared(client: Any, cancel: Any, callback: Any) -> Any:
    return client.acquire_lock('reading', shared=True, cancel=cancel, app_callback=callback)


def _acquire_first_lock(client: Any, cancel: Any, callback: Any) -> Any:
    return client.acquire_first_lock('pool', ['slot-0', 'slot-1'], cancel=cancel, app_callback=callback)


def _acquire_locks(client: Any, cancel: Any, callback: Any) -> Any:
    return client.acquire_locks(['set-1', 'set-2'], cancel=cancel, app_callback=callback)


#: Each threaded entry point that takes ``cancel=``: how to call it, the call whose answer is
#: held, and the keys its write lands on.
ENTRY_POINTS: Dict[str, Tuple[Callable[[Any, Any, Any], Any], str, List[Key]]] = {
    'acquire_lock': (_acquire_lock, 'UpdateItem', [('solo', '-')]),
    'acquire_lock-shared': (_acquire_shared, 'UpdateItem', [('reading', '-')]),
    'acquire_first_lock': (_acquire_first_lock, 'UpdateItem', [('pool', 'slot-0')]),
    'acquire_locks': (_acquire_locks, 'TransactWriteItems', [('set-1', '-'), ('set-2', '-')]),
}


def _only_acquires(operation: str) -> Any:
    return is_acquire if operation == 'UpdateItem' else None


@pytest.mark.parametrize('entry_point', list(ENTRY_POINTS))
def test_cancel_answers_while_the_acquiring_write_is_unanswered(local_engine: LockTable, entry_point: str,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """The event is set once the write has landed and its answer is held back; the call ends
    with ``ACQUIRE_CANCELLED`` before that answer is let go, even with the time a Ctrl-C'd
    caller gives its undo made an hour long (a cancellation is not a Ctrl-C: it answers at
    once). Then the undo frees what landed, and another client gets it at once."""
    call, operation, keys = ENTRY_POINTS[entry_point]
    callbacks = CallbackRecorder()
    client = local_engine.lock_client(heartbeat_period=seconds(milliseconds=200),
                                      safe_period=seconds(seconds=2), lease_duration=seconds(seconds=3))
    monkeypatch.setattr(client._driver, 'settle_grace', 3600.0)  # private: the driver's grace after Ctrl-C
    cancel = threading.Event()
    with HoldAnswer(local_engine.resource, operation, when=_only_acquires(operation)) as held:
        acquiring = BackgroundCall(call, client, cancel, callbacks)
        assert held.holding.wait(REAL_TIMEOUT)                  # the write landed; its answer is held
        for partition_key, sort_key in keys:
            assert local_engine.read_item(partition_key, sort_key) is not None
        cancel.set()
        error = acquiring.error()                               # ... and still held: the caller is back
        assert isinstance(error, DynamoDBLockError), error
        assert error.code == DynamoDBLockError.ACQUIRE_CANCELLED
        held.let_go()
        assert client.wait_settled(REAL_TIMEOUT)
    assert client.held_locks() == []
    other = local_engine.lock_client(background_heartbeats=False)
    if entry_point == 'acquire_locks':
        taken = [other.acquire_locks([key for key, _ in keys], retry_timeout=seconds(0))]
    else:
        taken = [other.acquire_lock(partition_key, sort_key, retry_timeout=seconds(0))
                 for partition_key, sort_key in keys]
    assert all(lock is not None for lock in taken)              # free: taken with one attempt
    assert client.held_locks() == []
    client.close()
    assert [call.code for call in callbacks.calls] == []        # no LOCK_STOLEN, no LOCK_IN_DANGER


def test_a_cancelled_task_ends_while_the_undo_is_still_waiting_for_dynamodb(local_engine: LockTable) -> None:
    """The asyncio equivalent of ``cancel=``: the task is cancelled while the acquiring write's
    answer is held back, and the undo's read of the row is held back too. The task ends with
    ``CancelledError`` while that read is still held: the undo runs in a task of its own, which
    ``wait_settled()`` waits for; the row is freed."""
    async def main() -> None:
        async with local_engine.async_lock_client(background_heartbeats=False) as client:
            with FaultInjector(local_engine.resource) as faults:
                late = faults.add_latency('UpdateItem', 3600, times=1, after_sending=True)
                task = asyncio.ensure_future(client.acquire_lock('task-cancelled'))
                await eventually(lambda: late.hits == 1, 'the answer to be held back')
                undo_read = asyncio.Event()
                let_go = threading.Event()

                def hold_read(params: Dict[str, Any]) -> None:     # run in a worker thread
                    undo_read.set()
                    let_go.wait(REAL_TIMEOUT)

                faults.before_call('GetItem', hold_read)
                task.cancel()
                await eventually(lambda: undo_read.is_set(), "the undo's read to be held back")
                done, _ = await asyncio.wait({task}, timeout=REAL_TIMEOUT / 4)
                ended = task in done
                let_go.set()
                assert ended, 'the cancelled task waited for its undo'
                assert task.cancelled()
                assert await client.wait_settled(REAL_TIMEOUT)
            assert client.held_locks() == []
            row = local_engine.read_item('task-cancelled')
            assert row is not None and row.get('released_at') is not None   # landed, then freed

    run(main())


def test_wait_settled_waits_for_the_watch_an_undo_starts_meanwhile(local_engine: LockTable) -> None:
    """``wait_settled()`` called while an undo is still under way: the undo finds no row (the
    cancelled write never went out) and starts watching for a late landing, for one lease;
    ``wait_settled()`` waits for that watch too, and says True only once nothing is left."""
    async def main() -> None:
        async with local_engine.async_lock_client(background_heartbeats=False, lease_duration=seconds(seconds=2),
                                                  heartbeat_period=seconds(milliseconds=500),
                                                  safe_period=seconds(seconds=1)) as client:
            with FaultInjector(local_engine.resource) as faults:
                write, read = Gate(), Gate()
                try:
                    faults.before_call('UpdateItem', write, when=is_acquire)
                    task = asyncio.ensure_future(client.acquire_lock('watched'))
                    await asyncio.wait_for(write.holding.wait(), REAL_TIMEOUT / 4)
                    faults.before_call('GetItem', read)
                    task.cancel()
                    await asyncio.wait({task}, timeout=REAL_TIMEOUT / 4)
                    assert task.cancelled()
                    await asyncio.wait_for(read.holding.wait(), REAL_TIMEOUT / 4)   # the undo looks at the row
                    waiting = asyncio.ensure_future(client.wait_settled(REAL_TIMEOUT / 2))
                    for _ in range(3):
                        await asyncio.sleep(0)          # it is waiting for the undo now
                    assert not waiting.done()
                    read.open()                         # no row: the undo starts its watch, and ends
                    assert await waiting
                    assert await client.wait_settled(0)
                finally:
                    write.open()
                    read.open()
            assert local_engine.read_item('watched') is None

    run(main())


# --- the kind of event ----------------------------------------------------------------------------

@pytest.mark.parametrize('entry_point', ['acquire_lock', 'acquire_first_lock', 'acquire_locks'])
def test_an_asyncio_event_as_cancel_is_refused_before_anything_is_written(local_engine: LockTable,
                                                                           entry_point: str) -> None:
    call, _, keys = ENTRY_POINTS[entry_point]
    client = local_engine.lock_client(background_heartbeats=False)
    with CallRecorder(local_engine.resource) as calls:
        with pytest.raises(TypeError, match=r'threading\.Event.*not asyncio\.Event'):
            call(client, asyncio.Event(), None)
    assert calls.calls == []
    for partition_key, sort_key in keys:
        assert local_engine.read_item(partition_key, sort_key) is None
    client.close()


class _WaitWithoutTimeout:
    """An event whose ``wait`` takes no timeout."""

    def is_set(self) -> bool:
        return False

    def wait(self) -> bool:
        return True


@pytest.mark.parametrize('bad', [True, 'event', _WaitWithoutTimeout()], ids=['bool', 'str', 'wait-without-timeout'])
def test_other_objects_that_cannot_be_watched_are_refused(local_engine: LockTable, bad: Any) -> None:
    client = local_engine.lock_client(background_heartbeats=False)
    with pytest.raises(TypeError, match=r'cancel must be a threading\.Event'):
        client.acquire_lock('never-written', cancel=bad)
    assert local_engine.read_item('never-written') is None
    client.close()


def test_an_object_with_the_interface_of_threading_event_is_accepted(local_engine: LockTable) -> None:
    class Flag:
        """An event of the application's own, with ``threading.Event``'s interface."""

        def __init__(self) -> None:
            self._event = threading.Event()

        def is_set(self) -> bool:
            return self._event.is_set()

        def wait(self, timeout: Any = None) -> bool:
            return self._event.wait(timeout)

    client = local_engine.lock_client(background_heartbeats=False)
    lock = client.acquire_lock('duck', cancel=Flag())
    lock.release()
    client.close()


def test_the_wrong_kind_of_wake_event_is_refused(local_engine: LockTable) -> None:
    client = local_engine.lock_client(background_heartbeats=False)
    with pytest.raises(TypeError, match=r'wake must be a threading\.Event.*not asyncio\.Event'):
        client.acquire_first_lock('pool', ['slot-0'], wake=asyncio.Event())
    assert local_engine.read_item('pool', 'slot-0') is None
    client.close()

    async def main() -> None:
        async with local_engine.async_lock_client(background_heartbeats=False) as async_client:
            with pytest.raises(TypeError, match=r'wake must be an asyncio\.Event.*not threading\.Event'):
                await async_client.acquire_first_lock('pool', ['slot-0'], wake=threading.Event())
        assert local_engine.read_item('pool', 'slot-0') is None

    run(main())


def test_a_cancel_event_that_fails_is_logged_not_a_silent_thread_death(local_engine: LockTable,
                                                                        caplog: pytest.LogCaptureFixture,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """An application's event whose ``wait`` raises: the thread that watches it logs the error
    (it does not die through ``threading.excepthook``), and the acquisition goes on."""
    deaths: List[str] = []
    monkeypatch.setattr(threading, 'excepthook', lambda args: deaths.append(f'{args.thread.name}: {args.exc_value!r}'))
    watching = threading.Event()

    class Broken:
        def is_set(self) -> bool:
            return False

        def wait(self, timeout: Any = None) -> bool:
            watching.set()
            raise RuntimeError('this event is broken')

    local_engine.put_lock_row('held-elsewhere', owner_name='someone-else')
    client = local_engine.lock_client(background_heartbeats=False)
    with caplog.at_level(logging.ERROR, logger='python_dynamodb_lock'):
        with pytest.raises(DynamoDBLockError) as raised:
            client.acquire_lock('held-elsewhere', cancel=Broken(), retry_period=seconds(milliseconds=50),
                                retry_timeout=seconds(milliseconds=300))
    assert raised.value.code == DynamoDBLockError.ACQUIRE_TIMEOUT
    assert watching.is_set()
    assert deaths == []
    assert any('this event is broken' in (record.exc_text or '') or
               (record.exc_info and 'this event is broken' in str(record.exc_info[1]))
               for record in caplog.records), [record.getMessage() for record in caplog.records]
    client.close()


def test_the_threaded_client_is_the_one_with_cancel() -> None:
    """(The asyncio client cancels with task cancellation: it has no ``cancel`` argument.)"""
    import inspect

    from python_dynamodb_lock.aio import AsyncDynamoDBLockClient

    for name in ('acquire_lock', 'acquire_first_lock', 'acquire_locks'):
        assert 'cancel' in inspect.signature(getattr(DynamoDBLockClient, name)).parameters
        assert 'cancel' not in inspect.signature(getattr(AsyncDynamoDBLockClient, name)).parameters
