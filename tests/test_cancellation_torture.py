"""Cancellation torture: many asyncio tasks, cancelled at random points, on DynamoDB Local.

Two asyncio lock clients share one table. Hundreds of tasks take random keys of ten; each
acquires under a random ``asyncio.wait_for`` timeout (or is cancelled by another task at a
random moment), holds the lock for a random time doing guarded writes, and releases it, any of
which may be cut short. Once every task has ended and the clients' undo work has settled, the
run must show:

* no orphan row: every lock row is free (released, or gone), but a row its client said it
  could not free (a loaded machine may time a release out), which a fresh client then takes over
  after its lease;
* no lock kept or renewed that no caller holds: both clients hold nothing;
* no ``LOCK_STOLEN`` while the holder's lease ran, and every loss reported: a loaded machine
  may starve a holder's heartbeats past its lease, and the lock is then taken over, as it must
  be; but only after the lease was spent, and the holder is told (see :mod:`_torture.verdict`);
* no overlap: two tasks never held one key at once, unless the first was told it lost the lock;
* nothing unretrieved: the loop reported no exception that nobody retrieved.

With ``delayed`` answers, every write's answer arrives late (it landed; a botocore hook holds
the answer back), so cancellations often hit a write that landed and whose answer is not in:
the undo must find and free those rows. The size scales with ``PDL_STRESS_SCALE``.
"""
from __future__ import annotations

import asyncio
import contextlib
import datetime
import os
import random
import threading
import time
from typing import Any, AsyncIterator, Dict, List

import pytest

from _torture.verdict import History, Tenure
from chaos_proxy import ChaosProxy
from helpers import ASYNCIO, CallbackRecorder, FaultInjector
from python_dynamodb_lock.aio import AsyncDynamoDBLockClient
from python_dynamodb_lock.python_dynamodb_lock import DynamoDBLockError
from python_dynamodb_lock.testing import LockTable

pytestmark = [pytest.mark.local, pytest.mark.slow]

seconds = datetime.timedelta
KEYS = [f'key-{n}' for n in range(10)]
SCALE = float(os.environ.get('PDL_STRESS_SCALE', '1'))
TASKS = max(40, int(200 * SCALE))
ROUNDS = 3


@pytest.fixture
def client_kind() -> str:
    return ASYNCIO


class Ledger:
    """Who held which key when, as the tasks themselves saw it, and what the clients reported
    (:class:`_torture.verdict.History`)."""

    def __init__(self) -> None:
        self.history = History()
        self.acquired = 0
        self.cut_short = 0

    def enter(self, lock: Any) -> Tenure:
        self.history.acquired(lock)
        self.acquired += 1
        return self.history.enter(lock)

    def settings(self, owner: str) -> Dict[str, Any]:
        """The lock clients' settings: a short lease, and a metrics hook feeding the history."""
        return dict(owner_name=owner, lease_duration=seconds(seconds=10), heartbeat_period=seconds(seconds=1),
                    safe_period=seconds(seconds=5), metrics=self.history.metrics(owner))

    def check(self, data: LockTable) -> None:
        """What the run must show at its end (see the module's docstring), once every client
        settled and closed."""
        problems = self.history.problems()
        held_rows = [row for row in (data.read_item(key) for key in KEYS)
                     if row is not None and row.get('released_at') is None]
        print(f'\n{self.acquired} holds, {self.cut_short} calls cut short, '
              f'{self.history.lost()} locks lost to takeovers after their lease, '
              f'{len(held_rows)} rows left that their client could not free')
        assert problems == [], problems
        # A row is left held only where its client said it could not free it (on a loaded
        # machine, a release or an undo may time out): then nobody renews it, and a fresh client
        # takes it over after its lease.
        unexplained = [row for row in held_rows if f"{row['lock_key']}|{row['sort_key']}" not in self.history.abandoned]
        assert unexplained == [], f'orphan rows: {unexplained}'
        if held_rows:
            reclaimer = data.lock_client(owner_name='reclaimer', lease_duration=seconds(seconds=10))
            try:
                for row in held_rows:
                    reclaimer.acquire_lock(row['lock_key'], row['sort_key'], retry_period=seconds(seconds=0.2),
                                           retry_timeout=seconds(seconds=25)).release()
            finally:
                reclaimer.close()


async def one_task(number: int, clients: List[Any], ledger: Ledger, data: LockTable, rng: random.Random,
                   callbacks: CallbackRecorder) -> None:
    for _ in range(ROUNDS):
        client = rng.choice(clients)
        key = rng.choice(KEYS)
        try:
            lock = await asyncio.wait_for(client.acquire_lock(key, retry_timeout=seconds(seconds=2),
                                                              app_callback=callbacks),
                                          rng.choice([0.002, 0.02, 0.1, 0.5, 5.0, 5.0, 5.0]))
        except (asyncio.TimeoutError, asyncio.CancelledError):
            ledger.cut_short += 1
            continue
        except DynamoDBLockError as error:
            assert error.code == DynamoDBLockError.ACQUIRE_TIMEOUT, error
            continue
        # Only the caller that got the lock is in the ledger; it leaves it before its release
        # starts (a release may be cut short, and the key then is free for others).
        tenure = ledger.enter(lock)
        try:
            if rng.random() < 0.5:
                await asyncio.wait_for(lock.update_item(
                    TableName=data.table_name, Key={'lock_key': f'counter-{key}', 'sort_key': '-'},
                    UpdateExpression='ADD #n :one', ExpressionAttributeNames={'#n': 'n'},
                    ExpressionAttributeValues={':one': 1}), rng.choice([0.005, 1.0]))
            await asyncio.sleep(rng.random() * 0.02)
        except (asyncio.TimeoutError, asyncio.CancelledError):
            ledger.cut_short += 1
        finally:
            ledger.history.leave(tenure)
        try:
            await asyncio.wait_for(lock.release(), rng.choice([0.001, 0.01, 1.0]))
        except (asyncio.TimeoutError, asyncio.CancelledError):
            ledger.cut_short += 1
        finally:
            ledger.history.released(tenure)


async def canceller(tasks: List['asyncio.Task[None]'], rng: random.Random) -> None:
    """Cancel random tasks at random moments, from outside."""
    while any(not task.done() for task in tasks):
        await asyncio.sleep(rng.random() * 0.01)
        task = rng.choice(tasks)
        if not task.done() and rng.random() < 0.2:
            task.cancel()


@contextlib.asynccontextmanager
async def proxied_client(table: LockTable, proxy: ChaosProxy, **settings: Any) -> AsyncIterator[Any]:
    """An asyncio lock client whose requests go through ``proxy``."""
    from aiobotocore.session import get_session
    from botocore.config import Config

    config = Config(connect_timeout=2, read_timeout=5, retries={'mode': 'standard', 'max_attempts': 2})
    async with get_session().create_client(
            'dynamodb', endpoint_url=proxy.endpoint_url, region_name='us-east-1', aws_access_key_id='x',
            aws_secret_access_key='x', config=config) as dynamodb:
        client = AsyncDynamoDBLockClient(dynamodb, table_name=table.table_name, **settings)
        try:
            yield client
        finally:
            await client.close()


@pytest.mark.parametrize('answers', ['prompt', 'delayed', 'proxy'],
                         ids=['prompt-answers', 'delayed-answers', 'requests-delayed-by-a-proxy'])
def test_random_cancellations_leave_nothing_held(local_engine: LockTable, answers: str) -> None:
    """``delayed``: every write lands and its answer is held back by a botocore hook. ``proxy``:
    every request waits on the wire (a TCP proxy forwards it 10 ms late), so a cancelled write
    often lands after its undo has looked: the undo's watch must find it."""
    data = local_engine
    rng = random.Random(17 + len(answers))
    unretrieved: List[Dict[str, Any]] = []
    ledger = Ledger()
    callbacks = CallbackRecorder(action=ledger.history.on_callback)
    assert local_engine.endpoint_url is not None

    async def main() -> Ledger:
        asyncio.get_running_loop().set_exception_handler(lambda loop, context: unretrieved.append(context))
        with FaultInjector(local_engine.resource) as faults, \
                ChaosProxy(int(local_engine.endpoint_url.rsplit(':', 1)[1])) as proxy:
            if answers == 'delayed':
                faults.add_latency('UpdateItem', 0.01, times=None, after_sending=True)
            if answers == 'proxy':
                proxy.add_latency(0.01)
                clients_of = [proxied_client(data, proxy, **ledger.settings(name)) for name in ('first', 'second')]
            else:
                clients_of = [local_engine.async_lock_client(**ledger.settings(name)) for name in ('first', 'second')]
            async with clients_of[0] as first, clients_of[1] as second:
                clients = [first, second]
                tasks = [asyncio.ensure_future(one_task(n, clients, ledger, data, rng, callbacks))
                         for n in range(TASKS)]
                cancelling = asyncio.ensure_future(canceller(tasks, rng))
                await asyncio.gather(*tasks, return_exceptions=True)
                await cancelling
                for client in clients:
                    assert await client.wait_settled(60)
                    assert client.held_locks() == [], f'{client} still holds {client.held_locks()}'
        return ledger

    ledger = asyncio.run(main())
    ledger.check(data)
    assert unretrieved == []
    # The run exercised both paths (how many of each depends on the machine's load; the
    # invariants above are what the test is about).
    assert ledger.acquired >= 5 and ledger.cut_short >= 5, (ledger.acquired, ledger.cut_short)


class _Interrupt:
    """botocore hooks that raise ``KeyboardInterrupt`` in a caller thread (never in the client's
    own threads: a real Ctrl-C reaches the main thread only), at random, before a request is sent
    or after its write landed (the answer is then lost, as when Ctrl-C cuts a socket read)."""

    def __init__(self, rng: random.Random, rate: float) -> None:
        self.rng = rng
        self.rate = rate
        self.raised = 0
        self.guard = threading.Lock()

    def _maybe(self) -> None:
        if not threading.current_thread().name.startswith('caller-'):
            return
        with self.guard:
            hit = self.rng.random() < self.rate
            self.raised += hit
        if hit:
            raise KeyboardInterrupt

    def before(self, **kwargs: Any) -> None:
        self._maybe()

    def after(self, **kwargs: Any) -> None:
        self._maybe()


@pytest.mark.threaded_only
def test_random_cancel_events_and_ctrl_c_leave_nothing_held(local_engine: LockTable) -> None:
    """The threaded twin: caller threads acquire with ``cancel=`` events that another thread sets
    at random, or without one while ``KeyboardInterrupt`` is injected into their calls (before
    sending, or after the write landed); they hold, write under the lock and release, any of
    which may be cut short. Afterwards: nothing held, no orphan row, no ``LOCK_STOLEN`` while the
    holder's lease ran and every loss reported, no overlap (see the module's docstring)."""
    data = local_engine
    rng = random.Random(1717)
    ledger = Ledger()
    callbacks = CallbackRecorder(action=ledger.history.on_callback)
    ledger_guard = threading.Lock()
    interrupt = _Interrupt(random.Random(99), rate=0.08)
    clients = [local_engine.lock_client(**ledger.settings(name)) for name in ('first', 'second')]
    events = local_engine.resource.meta.client.meta.events
    events.register('before-call.dynamodb.*', interrupt.before)
    events.register('after-call.dynamodb.*', interrupt.after)
    cancels: List[threading.Event] = []
    cancels_guard = threading.Lock()
    threads_count = max(16, int(40 * SCALE))

    def caller(number: int) -> None:
        local = random.Random(number)
        for _ in range(ROUNDS):
            client = local.choice(clients)
            key = local.choice(KEYS)
            cancel = threading.Event() if local.random() < 0.5 else None
            if cancel is not None:
                with cancels_guard:
                    cancels.append(cancel)
            try:
                lock = client.acquire_lock(key, retry_timeout=seconds(seconds=2), app_callback=callbacks,
                                           cancel=cancel)
            except KeyboardInterrupt:
                with ledger_guard:
                    ledger.cut_short += 1
                continue
            except DynamoDBLockError as error:
                assert error.code in (DynamoDBLockError.ACQUIRE_TIMEOUT, DynamoDBLockError.ACQUIRE_CANCELLED), error
                with ledger_guard:
                    ledger.cut_short += error.code == DynamoDBLockError.ACQUIRE_CANCELLED
                continue
            with ledger_guard:
                tenure = ledger.enter(lock)
            try:
                if local.random() < 0.5:
                    lock.update_item(
                        TableName=data.table_name, Key={'lock_key': f'counter-{key}', 'sort_key': '-'},
                        UpdateExpression='ADD #n :one', ExpressionAttributeNames={'#n': 'n'},
                        ExpressionAttributeValues={':one': 1})
                time.sleep(local.random() * 0.02)
            except KeyboardInterrupt:
                pass
            finally:
                ledger.history.leave(tenure)
            for _attempt in range(3):     # a release cut short by Ctrl-C is finished in the background
                try:
                    lock.release()
                    break
                except KeyboardInterrupt:
                    with ledger_guard:
                        ledger.cut_short += 1
            ledger.history.released(tenure)

    def canceller(done: threading.Event) -> None:
        while not done.is_set():
            time.sleep(rng.random() * 0.02)
            with cancels_guard:
                pending = [event for event in cancels if not event.is_set()]
            if pending and rng.random() < 0.3:
                rng.choice(pending).set()

    done = threading.Event()
    cancelling = threading.Thread(target=canceller, args=(done,), daemon=True)
    cancelling.start()
    threads = [threading.Thread(target=caller, args=(n,), name=f'caller-{n}') for n in range(threads_count)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(300)
            assert not thread.is_alive()
    finally:
        done.set()
        events.unregister('before-call.dynamodb.*', interrupt.before)
        events.unregister('after-call.dynamodb.*', interrupt.after)
    for client in clients:
        assert client.wait_settled(60)
        assert client.held_locks() == [], f'{client} still holds {client.held_locks()}'
    for client in clients:
        client.close()
    ledger.check(data)
    assert interrupt.raised > 0 and ledger.acquired > 0 and ledger.cut_short > 0, (
        interrupt.raised, ledger.acquired, ledger.cut_short)
