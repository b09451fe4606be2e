"""Interruptions are part of every protocol: what an interrupted call leaves in DynamoDB, and
that it is settled.

Each test interrupts a caller at one point of acquire, hand-over or release (a task's
cancellation, a second cancellation, ``acquire_lock(cancel=...)``, Ctrl-C) and then checks the
table and the client: no row left that nobody was handed, no lock kept or renewed that no caller
holds, no false ``LOCK_STOLEN``. The undo runs apart from the caller; ``wait_settled()`` waits
for it. Faults come from botocore event hooks (``FaultInjector``) and, for a request held on the
wire, from the TCP proxy of ``chaos_proxy``; exclusion claims run on DynamoDB Local.
"""
from __future__ import annotations

import asyncio
import datetime
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from typing import Any, Dict, List

import pytest

from chaos_proxy import ChaosProxy
from helpers import ASYNCIO, CallbackRecorder, FaultInjector, HoldBack, ManualClock
from test_aio import REAL_TIMEOUT, eventually, run
from python_dynamodb_lock.aio import AsyncDynamoDBLockClient
from python_dynamodb_lock.python_dynamodb_lock import DynamoDBLock, DynamoDBLockError
from python_dynamodb_lock.testing import LockTable, is_acquire, is_release

seconds = datetime.timedelta


@pytest.fixture
def client_kind() -> str:
    return ASYNCIO


def assert_free(table: LockTable, key: str) -> None:
    """Nobody holds ``key``: no row, or a row kept only as released."""
    row = table.read_item(key)
    assert row is None or row.get('released_at') is not None, f'{key} is still held: {row}'


class Gate:
    """A before-call action that holds the first matching call until :meth:`open` (the
    request is not sent meanwhile), and records that it is holding one."""

    def __init__(self) -> None:
        self.holding = asyncio.Event()
        self._open = asyncio.Event()

    async def __call__(self, params: Dict[str, Any]) -> None:
        self.holding.set()
        await self._open.wait()

    def open(self) -> None:
        self._open.set()


def cancel_on_call(task_of: Any) -> Any:
    """A before-call action that cancels the task ``task_of()`` while its call is being sent."""
    async def action(params: Dict[str, Any]) -> None:
        task_of().cancel()
        await asyncio.sleep(0)
    return action


# --- asyncio: the four defects of issue 17 -------------------------------------------------------

def test_an_acquire_cancelled_while_settling_the_lock_it_replaced_holds_nothing(local_engine: LockTable) -> None:
    """The new acquisition waits for the mutex of the older lock object of the same key (a
    release of it is under way) and is cancelled there: the caller got nothing, so the new lock
    is not kept or renewed, its row is freed, and the old lock object ends released or lost."""
    async def main() -> None:
        async with local_engine.async_lock_client(clock=ManualClock(), background_heartbeats=False) as client:
            old = await client.acquire_lock('replaced')
            assert await client.force_release_lock(await client.get_lock('replaced'))   # the row is freed
            with FaultInjector(local_engine.resource) as faults:
                gate = Gate()
                faults.before_call('UpdateItem', gate, when=is_release)
                releasing = asyncio.ensure_future(old.release())     # holds old's mutex, its write held back
                await gate.holding.wait()
                acquiring = asyncio.ensure_future(client.acquire_lock('replaced'))
                await eventually(lambda: any(lock is not old for lock in client.held_locks()),
                                 'the new lock to wait for the old one')
                acquiring.cancel()
                await asyncio.sleep(0.05)
                gate.open()
                with pytest.raises(asyncio.CancelledError):
                    await acquiring
                await releasing
                assert await client.wait_settled(REAL_TIMEOUT)
            assert client.held_locks() == []
            assert old.status in (DynamoDBLock.RELEASED, DynamoDBLock.INVALID)
            assert_free(local_engine, 'replaced')

    run(main())


def test_a_second_cancel_does_not_stop_the_undo_of_an_acquiring_write(local_engine: LockTable) -> None:
    """Cancelled while its acquiring write is in flight (it landed; the answer is late), then
    cancelled again while the undo is being sent: the undo still frees the row."""
    async def main() -> None:
        async with local_engine.async_lock_client(clock=ManualClock(), background_heartbeats=False) as client:
            with FaultInjector(local_engine.resource) as faults:
                late = faults.add_latency('UpdateItem', 3600, times=1, after_sending=True)
                task = asyncio.ensure_future(client.acquire_lock('cancelled-twice'))
                await eventually(lambda: late.hits == 1, 'the answer to be held back')
                assert local_engine.read_item('cancelled-twice') is not None     # it landed
                again_on_read = faults.before_call('GetItem', cancel_on_call(lambda: task))
                again_on_free = faults.before_call('UpdateItem', cancel_on_call(lambda: task), when=is_release)
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task
                assert await client.wait_settled(REAL_TIMEOUT)
                assert again_on_read.hits + again_on_free.hits >= 1       # the second cancel happened
            assert client.held_locks() == []
            assert_free(local_engine, 'cancelled-twice')

    run(main())


def test_an_acquiring_write_that_lands_after_its_undo_is_freed(local_engine: LockTable) -> None:
    """The acquiring write is held on the wire (by a proxy) when the task is cancelled; the undo
    reaches DynamoDB first and finds nothing; the write lands afterwards. The undo watches the row
    for a lease and frees the late landing: no row is left that nobody was handed."""
    from aiobotocore.session import get_session
    from botocore.config import Config

    assert local_engine.endpoint_url is not None
    port = int(local_engine.endpoint_url.rsplit(':', 1)[1])

    async def main() -> None:
        with ChaosProxy(port) as proxy:
            config = Config(connect_timeout=2, read_timeout=5, retries={'mode': 'standard', 'max_attempts': 2})
            async with get_session().create_client(
                    'dynamodb', endpoint_url=proxy.endpoint_url, region_name='us-east-1', aws_access_key_id='x',
                    aws_secret_access_key='x', config=config) as dynamodb:
                client = AsyncDynamoDBLockClient(
                    dynamodb, table_name=local_engine.table_name, lease_duration=seconds(seconds=3),
                    heartbeat_period=seconds(seconds=1), safe_period=seconds(seconds=2),
                    background_heartbeats=False)
                try:
                    proxy.add_latency(1.0)                   # the next request waits a second on the wire
                    task = asyncio.ensure_future(client.acquire_lock('late-landing'))
                    await eventually(lambda: proxy.stats.requests_forwarded == 1, 'the write to be on the wire')
                    proxy.add_latency(0.0)                   # what follows (the undo) goes straight through
                    task.cancel()
                    with pytest.raises(asyncio.CancelledError):
                        await task
                    assert local_engine.read_item('late-landing') is None      # not landed yet
                    assert await client.wait_settled(REAL_TIMEOUT)
                    landed = local_engine.read_item('late-landing')
                    assert landed is not None                                # it did land, later
                    assert landed.get('released_at') is not None             # and was freed
                    assert client.held_locks() == []
                finally:
                    await client.close()

    run(main())


def test_a_release_cancelled_while_freeing_a_row_handed_to_a_waiter_that_gave_up(local_engine: LockTable) -> None:
    """A release hands the lock to a waiter of the same client, which gives up while the hand-over
    write is in flight; the release then frees the handed row and is cancelled doing so. The lock
    is released (not kept, not renewed) and no heartbeat reports it stolen."""
    async def main() -> None:
        callbacks = CallbackRecorder()
        clock = ManualClock()
        async with local_engine.async_lock_client(clock=clock, background_heartbeats=False) as client:
            held = await client.acquire_lock('handed', app_callback=callbacks)
            waiting = asyncio.ensure_future(client.acquire_lock('handed', retry_timeout=seconds(hours=1)))
            await eventually(lambda: clock.is_idle(waiting), 'the waiter to wait for its turn')
            with FaultInjector(local_engine.resource) as faults:
                gate = Gate()
                faults.before_call('UpdateItem', gate, when=is_acquire)           # the hand-over write
                releasing = asyncio.ensure_future(held.release())
                await gate.holding.wait()
                waiting.cancel()                                                   # the waiter gives up
                with pytest.raises(asyncio.CancelledError):
                    await waiting
                cut = faults.before_call('UpdateItem', cancel_on_call(lambda: releasing), when=is_release)
                gate.open()
                with pytest.raises(asyncio.CancelledError):
                    await releasing
                assert await client.wait_settled(REAL_TIMEOUT)
                assert cut.hits == 1
            assert held.status == DynamoDBLock.RELEASED
            assert client.held_locks() == []
            await client.send_heartbeats([held])
            client.check_locks()
            await asyncio.sleep(0.05)
            assert DynamoDBLockError.LOCK_STOLEN not in callbacks.codes
            assert_free(local_engine, 'handed')

    run(main())


def test_a_caller_cancelled_while_awaiting_its_release_gets_no_result_and_the_release_still_completes(
        local_engine: LockTable) -> None:
    """The release runs as a task of its own: the awaiting caller, cancelled while the release
    write is held back, gets ``CancelledError`` (no True/False); the release then lands, and a
    later release of the lock finds nothing to free (False)."""
    async def main() -> None:
        async with local_engine.async_lock_client(clock=ManualClock(), background_heartbeats=False) as client:
            lock = await client.acquire_lock('released-anyway')
            with FaultInjector(local_engine.resource) as faults:
                gate = Gate()
                faults.before_call('UpdateItem', gate, when=is_release)

                async def release_it() -> bool:
                    released: bool = await lock.release()
                    return released

                caller = asyncio.ensure_future(release_it())
                await gate.holding.wait()
                caller.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await caller
                assert local_engine.read_held_row('released-anyway') is not None     # still on its way
                gate.open()
                assert await client.wait_settled(REAL_TIMEOUT)
            assert lock.status == DynamoDBLock.RELEASED
            assert_free(local_engine, 'released-anyway')
            assert await lock.release() is False

    run(main())


# --- threaded: cancel= and Ctrl-C -------------------------------------------------------------------

@pytest.mark.threaded_only
def test_setting_cancel_ends_a_wait_for_a_held_lock(local_engine: LockTable) -> None:
    local_engine.put_lock_row('held-elsewhere', owner_name='someone-else')
    client = local_engine.lock_client(clock=ManualClock(), background_heartbeats=False)
    cancel = threading.Event()
    outcome: List[BaseException] = []

    def acquire() -> None:
        try:
            client.acquire_lock('held-elsewhere', retry_timeout=seconds(hours=1), cancel=cancel)
        except BaseException as exc:   # noqa: B036 - recorded for the test thread
            outcome.append(exc)

    thread = threading.Thread(target=acquire)
    thread.start()
    time.sleep(0.2)
    cancel.set()
    thread.join(REAL_TIMEOUT)
    assert not thread.is_alive()
    assert isinstance(outcome[0], DynamoDBLockError) and outcome[0].code == DynamoDBLockError.ACQUIRE_CANCELLED
    assert client.held_locks() == []
    assert local_engine.read_item('held-elsewhere')['owner_name'] == 'someone-else'


@pytest.mark.threaded_only
def test_an_event_already_set_writes_nothing(local_engine: LockTable) -> None:
    client = local_engine.lock_client(background_heartbeats=False)
    cancel = threading.Event()
    cancel.set()
    with pytest.raises(DynamoDBLockError) as raised:
        client.acquire_lock('never-written', cancel=cancel)
    assert raised.value.code == DynamoDBLockError.ACQUIRE_CANCELLED
    assert local_engine.read_item('never-written') is None
    with pytest.raises(TypeError):
        client.acquire_lock('never-written', cancel=True)   # type: ignore[arg-type]


@pytest.mark.threaded_only
def test_cancelling_an_acquiring_write_in_flight_frees_it_once_it_lands(local_engine: LockTable) -> None:
    """``cancel`` is set while the acquiring write is held back: the caller returns at once with
    ``ACQUIRE_CANCELLED``; the write goes out later and lands; the undo, which waits for its
    answer, frees the row."""
    client = local_engine.lock_client(background_heartbeats=False)
    cancel = threading.Event()

    hold_back = HoldBack()

    with FaultInjector(local_engine.resource) as faults:
        faults.before_call('UpdateItem', hold_back, when=is_acquire)
        outcome: List[BaseException] = []

        def acquire() -> None:
            try:
                client.acquire_lock('in-flight', cancel=cancel)
            except BaseException as exc:   # noqa: B036
                outcome.append(exc)

        thread = threading.Thread(target=acquire)
        thread.start()
        assert hold_back.sending.wait(REAL_TIMEOUT)
        cancel.set()
        thread.join(REAL_TIMEOUT)
        assert not thread.is_alive()                   # it returned while the write was still held back
        assert local_engine.read_item('in-flight') is None
        hold_back.let_go()
        assert client.wait_settled(REAL_TIMEOUT)
    assert isinstance(outcome[0], DynamoDBLockError) and outcome[0].code == DynamoDBLockError.ACQUIRE_CANCELLED
    landed = local_engine.read_item('in-flight')
    assert landed is not None and landed.get('released_at') is not None    # landed, then freed
    assert client.held_locks() == []


# --- acquire_first_lock: the same settling, for a write to one of several keys ------------------

def test_first_lock_cancelled_while_its_write_is_in_flight_leaves_no_row(local_engine: LockTable) -> None:
    """``acquire_first_lock`` is cancelled while its write to the first key has landed but its
    answer is held back: the caller gets nothing, and the landed row is freed."""
    async def main() -> None:
        async with local_engine.async_lock_client(clock=ManualClock(), background_heartbeats=False) as client:
            with FaultInjector(local_engine.resource) as faults:
                late = faults.add_latency('UpdateItem', 3600, times=1, after_sending=True)
                task = asyncio.ensure_future(client.acquire_first_lock('pool', ['slot-0', 'slot-1']))
                await eventually(lambda: late.hits == 1, 'the answer to be held back')
                assert local_engine.read_item('pool', 'slot-0') is not None       # it landed
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task
                assert await client.wait_settled(REAL_TIMEOUT)
            assert client.held_locks() == []
            for slot in ('slot-0', 'slot-1'):
                row = local_engine.read_item('pool', slot)
                assert row is None or row.get('released_at') is not None, f'{slot} is still held: {row}'

    run(main())


@pytest.mark.threaded_only
def test_first_lock_cancel_set_while_its_write_is_held_back_frees_it_once_it_lands(local_engine: LockTable) -> None:
    """``acquire_first_lock(cancel=...)``: the event is set while the write to the first key is
    held back; the caller returns with ``ACQUIRE_CANCELLED``, and the write, which lands later,
    is freed."""
    client = local_engine.lock_client(background_heartbeats=False)
    cancel = threading.Event()

    hold_back = HoldBack()

    outcome: List[BaseException] = []

    def acquire() -> None:
        try:
            client.acquire_first_lock('pool', ['slot-0', 'slot-1'], cancel=cancel)
        except BaseException as exc:   # noqa: B036
            outcome.append(exc)

    with FaultInjector(local_engine.resource) as faults:
        faults.before_call('UpdateItem', hold_back, when=is_acquire)
        thread = threading.Thread(target=acquire)
        thread.start()
        assert hold_back.sending.wait(REAL_TIMEOUT)
        cancel.set()
        thread.join(REAL_TIMEOUT)
        assert not thread.is_alive()
        hold_back.let_go()
        assert client.wait_settled(REAL_TIMEOUT)
    assert isinstance(outcome[0], DynamoDBLockError) and outcome[0].code == DynamoDBLockError.ACQUIRE_CANCELLED
    landed = local_engine.read_item('pool', 'slot-0')
    assert landed is not None and landed.get('released_at') is not None    # landed, then freed
    assert local_engine.read_item('pool', 'slot-1') is None
    assert client.held_locks() == []
    client.close()


_CTRL_C_CHILD = textwrap.dedent('''
    import datetime, signal, socket, sys, time
    # Ctrl-C raises KeyboardInterrupt here even when this test runs under a shell job that
    # ignores SIGINT (a child inherits the ignored disposition, and Python then keeps it)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    import boto3
    from botocore.config import Config
    from python_dynamodb_lock.python_dynamodb_lock import DynamoDBLockClient

    hole = socket.socket()
    hole.bind(('127.0.0.1', 0))
    hole.listen(16)                       # accepts connections, never answers
    resource = boto3.resource(
        'dynamodb', endpoint_url=f'http://127.0.0.1:{hole.getsockname()[1]}', region_name='us-east-1',
        aws_access_key_id='x', aws_secret_access_key='x',
        config=Config(connect_timeout=5, read_timeout=60, retries={'mode': 'standard', 'max_attempts': 3}))
    client = DynamoDBLockClient(resource, background_heartbeats=False)
    print('acquiring', flush=True)
    started = time.monotonic()
    try:
        client.acquire_lock('silent')
    except KeyboardInterrupt:
        print(f'interrupted after {time.monotonic() - started:.2f}', flush=True)
        sys.exit(130)
''')


@pytest.mark.threaded_only
def test_ctrl_c_during_an_acquire_against_a_silent_endpoint_is_prompt(tmp_path: Any) -> None:
    """The endpoint accepts connections and never answers (each attempt would wait 60 s, three
    attempts); Ctrl-C reaches the caller at once, without waiting for the undo or the retries."""
    script = tmp_path / 'ctrl_c.py'
    script.write_text(_CTRL_C_CHILD)
    child = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, env={**os.environ, 'PYTHONUNBUFFERED': '1'})
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == 'acquiring'
        time.sleep(0.5)                          # the acquiring write is on the wire, unanswered
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=20)  # far below one attempt's 60 s read timeout
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == 130, err
    waited = float(out.split('interrupted after ')[1])
    assert waited < 10.0, out               # a silent endpoint would hold it for minutes
    assert 'Traceback' not in err, err



def test_a_sleep_cancelled_as_its_event_is_set_is_still_cancelled() -> None:
    """The system clock's asyncio sleep never swallows a cancellation, even one that arrives in
    the same loop step as the event that ends the sleep (``asyncio.wait_for`` before Python 3.12
    returns instead; a cancelled acquisition then adopted a lock handed over to it, and its
    caller, gone, never received it: a lock held and renewed with no holder)."""
    from python_dynamodb_lock.testing import SystemClock

    async def main() -> None:
        wake = asyncio.Event()
        sleeping = asyncio.ensure_future(SystemClock().sleep_async(3600, wake))
        await asyncio.sleep(0.01)
        wake.set()                  # the sleep's wait() finishes in the next step ...
        sleeping.cancel()           # ... and the cancellation arrives before it runs
        with pytest.raises(asyncio.CancelledError):
            await sleeping

    run(main())
