"""Several keys at once, all or nothing: ``acquire_locks`` / ``try_acquire_locks`` and the multi-lock.

Every test runs on DynamoDB Local (exclusion claims count only there), once per client: the
asyncio client through the blocking facade of ``aio_facade`` (its calls run as tasks on an event
loop thread), with :class:`BlockingMulti` standing for the asyncio multi-lock. DynamoDB Local
never cancels a transaction for a ``TransactionConflict``: that answer is injected with a botocore
hook (``FaultInjector.fail_calls(..., details=...)``).
"""
from __future__ import annotations

import asyncio
import datetime
import random
import threading
import time
from collections import Counter
from typing import Any, Dict, List, Optional, Sequence

import pytest

from helpers import BackgroundCall, CallbackRecorder, FaultInjector, HoldBack, is_asyncio
from python_dynamodb_lock.python_dynamodb_lock import DynamoDBLockError
from python_dynamodb_lock.testing import REAL_TIMEOUT, CallRecorder, LockTable, SystemClock
from test_aio import eventually, run
from test_interop import EXPIRY, LEASE, Published, published  # noqa: F401  (a fixture)

seconds = datetime.timedelta
FAST = dict(heartbeat_period=seconds(seconds=0.25), safe_period=seconds(seconds=1),
            lease_duration=seconds(seconds=2), expiry_period=seconds(seconds=60))


class BlockingMulti:
    """An :class:`~python_dynamodb_lock.aio.AsyncDynamoDBMultiLock` behind the threaded
    multi-lock's interface (each coroutine run on the facade's loop)."""

    def __init__(self, multi: Any, facade: Any) -> None:
        self._multi = multi
        self._facade = facade

    def __getattr__(self, name: str) -> Any:
        return getattr(self._multi, name)

    def release(self, best_effort: bool = True) -> bool:
        released: bool = self._facade._call(lambda: self._multi.release(best_effort))
        return released

    def transact_write_items(self, items: Any, **options: Any) -> Dict[str, Any]:
        answer: Dict[str, Any] = self._facade._call(lambda: self._multi.transact_write_items(items, **options))
        return answer

    def __enter__(self) -> 'BlockingMulti':
        return self

    def __exit__(self, *exc_info: Any) -> bool:
        suppress: bool = self._facade._call(lambda: self._multi.__aexit__(*exc_info))
        return suppress


def acquire_locks(client: Any, keys: Sequence[Any], **kwargs: Any) -> Any:
    if is_asyncio(client):
        return BlockingMulti(client._call(lambda: client.async_client.acquire_locks(keys, **kwargs)), client)
    return client.acquire_locks(keys, **kwargs)


def try_acquire_locks(client: Any, keys: Sequence[Any], **kwargs: Any) -> Any:
    if is_asyncio(client):
        multi = client._call(lambda: client.async_client.try_acquire_locks(keys, **kwargs))
        return None if multi is None else BlockingMulti(multi, client)
    return client.try_acquire_locks(keys, **kwargs)


def make(local_clients: Any, owner: str, **kwargs: Any) -> Any:
    """A client on the real clock (waits here are real, and short)."""
    return local_clients.make(owner_name=owner, clock=SystemClock(), **{**FAST, **kwargs})


def held_by(table: LockTable, key: str) -> Optional[str]:
    row = table.read_item(key)
    return None if row is None or row.get('released_at') is not None else str(row['owner_name'])


# --- all or nothing ------------------------------------------------------------------------

def test_one_key_held_elsewhere_means_nothing_is_written_on_the_others(local_engine: LockTable,
                                                                      local_clients: Any) -> None:
    ours, theirs = make(local_clients, 'ours'), make(local_clients, 'theirs')
    blocker = theirs.acquire_lock('k3')
    keys = ['k1', 'k2', 'k3', 'k4', 'k5']
    with CallRecorder(local_engine.resource) as calls:
        assert try_acquire_locks(ours, keys) is None
    assert calls.count('TransactWriteItems') == 1 and calls.count('GetItem') == 0   # the refusal named the holder
    assert [held_by(local_engine, key) for key in keys] == [None, None, 'theirs', None, None]
    with pytest.raises(DynamoDBLockError) as timed_out:
        acquire_locks(ours, keys, retry_period=seconds(seconds=0.05), retry_timeout=seconds(seconds=0.2))
    assert timed_out.value.code == DynamoDBLockError.ACQUIRE_TIMEOUT
    assert 'k3|-' in str(timed_out.value) and 'theirs' in str(timed_out.value)
    assert timed_out.value.holder is not None and timed_out.value.holder.owner_name == 'theirs'
    assert [held_by(local_engine, key) for key in keys] == [None, None, 'theirs', None, None]
    assert ours.held_locks() == []

    blocker.release()
    multi = acquire_locks(ours, keys, retry_timeout=seconds(0))
    assert [lock.sort_key for lock in multi.locks] == ['-'] * 5
    assert [lock.partition_key for lock in multi.locks] == keys
    assert [held_by(local_engine, key) for key in keys] == ['ours'] * 5
    # Each key has its own fencing token, the one in its row; k3's is past the blocker's.
    for lock in multi.locks:
        assert lock.fencing_token == local_engine.read_item(lock.partition_key)['fencing_token']
    assert multi.locks[2].fencing_token > blocker.fencing_token
    assert multi.status == 'LOCKED' and multi.actions_left == 95
    assert theirs.try_acquire_lock('k2') is None
    with CallRecorder(local_engine.resource) as calls:
        multi.release(best_effort=False)
    assert calls.count('TransactWriteItems') == 1 and len(calls.calls) == 1      # all keys freed in one call
    assert [held_by(local_engine, key) for key in keys] == [None] * 5
    assert multi.status == 'RELEASED' and ours.held_locks() == []


def test_bad_keys_are_refused_before_anything_is_written(local_engine: LockTable, local_clients: Any) -> None:
    ours = make(local_clients, 'ours')
    cases: List[Any] = [
        ([f'key-{index}' for index in range(101)], ValueError, 'from 1 to 100'),
        ([], ValueError, 'from 1 to 100'),
        (['a', 'b', 'a'], ValueError, 'more than once'),
        ([('a', 'x'), ('a', 'x')], ValueError, 'more than once'),
        ('abc', TypeError, 'list or tuple'),
        (['a', ('b', 'x', 'y')], ValueError, 'tuple of 3'),
        (['a', 5], TypeError, ''),
    ]
    with CallRecorder(local_engine.resource) as calls:
        for keys, error, words in cases:
            with pytest.raises(error, match=words or None):
                acquire_locks(ours, keys)
            with pytest.raises(error, match=words or None):
                try_acquire_locks(ours, keys)
    assert calls.calls == []
    assert local_engine.read_item('key-0') is None and local_engine.read_item('a') is None
    # 100 keys is the limit, not more: one transaction takes them all.
    hundred = [f'key-{index}' for index in range(100)]
    with CallRecorder(local_engine.resource) as calls:
        multi = acquire_locks(ours, hundred, retry_timeout=seconds(0))
    assert calls.count('TransactWriteItems') == 1
    for lock in (multi.locks[0], multi.locks[57], multi.locks[99]):
        assert lock.fencing_token is not None
        assert lock.fencing_token == local_engine.read_item(lock.partition_key)['fencing_token']
    assert multi.actions_left == 0
    multi.release()
    assert held_by(local_engine, 'key-99') is None


def test_a_client_that_keeps_no_released_rows_deletes_the_set(local_engine: LockTable, local_clients: Any) -> None:
    ours = make(local_clients, 'ours', keep_released_rows=False)
    multi = acquire_locks(ours, ['d1', 'd2'])
    with CallRecorder(local_engine.resource) as calls:
        multi.release(best_effort=False)
    assert calls.count('TransactWriteItems') == 1
    assert local_engine.read_item('d1') is None and local_engine.read_item('d2') is None


# --- no deadlock, no partial set: a small torture -------------------------------------------

def test_overlapping_sets_in_any_order_never_deadlock_nor_hold_part_of_a_set(local_engine: LockTable,
                                                                           local_clients: Any) -> None:
    """Threads (or tasks, behind the facade) of three clients lock random overlapping sets of 1
    to 10 keys out of 12, each in a random order: a shared counter per key proves that no two
    holders ever overlap, every key of a returned set is held, and no acquisition times out (a
    deadlock would)."""
    pool = [f'res-{index}' for index in range(12)]
    # Nobody dies here: a lease far beyond any scheduling delay of a busy machine, so that the
    # status of a set just acquired reads LOCKED and no key is taken over from a live holder.
    clients = [make(local_clients, f'client-{index}', lease_duration=seconds(seconds=60),
                    safe_period=seconds(seconds=30)) for index in range(3)]
    holders: Counter[str] = Counter()
    guard = threading.Lock()
    overlaps: List[str] = []
    failures: List[BaseException] = []
    acquired = Counter[str]()

    def worker(client: Any, seed: int) -> None:
        rng = random.Random(seed)
        try:
            for _ in range(8):
                keys = rng.sample(pool, rng.randint(1, 10))
                multi = acquire_locks(client, keys, retry_period=seconds(seconds=0.02),
                                      retry_timeout=seconds(seconds=60))
                with guard:
                    for key in keys:
                        holders[key] += 1
                        if holders[key] > 1:
                            overlaps.append(key)
                    acquired[client.owner_name] += 1
                assert [lock.partition_key for lock in multi.locks] == keys
                assert all(lock.status == 'LOCKED' for lock in multi.locks)
                time.sleep(rng.uniform(0.0, 0.01))      # hold the set a little, so that sets overlap in time
                with guard:
                    for key in keys:
                        holders[key] -= 1
                multi.release(best_effort=False)
        except BaseException as error:   # noqa: B036  (reported below, whatever it is)
            failures.append(error)

    threads = [threading.Thread(target=worker, args=(clients[index % 3], index)) for index in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(REAL_TIMEOUT * 4)
    assert not any(thread.is_alive() for thread in threads), 'an acquisition never ended'
    assert failures == [] and overlaps == []
    assert sum(acquired.values()) == 6 * 8
    assert all(holders[key] == 0 for key in pool)
    assert [held_by(local_engine, key) for key in pool] == [None] * len(pool)


# --- takeover of a dead holder within a set ---------------------------------------------------

def test_a_dead_holder_of_one_key_is_taken_over_within_the_set(local_engine: LockTable, local_clients: Any) -> None:
    dead = make(local_clients, 'dead')        # hand-driven: it never renews, as if it had died
    orphan = dead.acquire_lock('b')
    ours = make(local_clients, 'ours')
    with CallRecorder(local_engine.resource) as calls:
        multi = acquire_locks(ours, ['a', 'b', 'c'], retry_period=seconds(seconds=0.2),
                              retry_timeout=seconds(seconds=30))
    assert calls.count('GetItem') == 0      # the holder was watched through the refusals alone
    taken = multi.locks[1]
    assert taken.took_over_from is not None and taken.took_over_from.owner_name == 'dead'
    assert taken.took_over_from.record_version_number == orphan.record_version_number
    assert taken.fencing_token > orphan.fencing_token
    assert multi.locks[0].took_over_from is None
    assert [held_by(local_engine, key) for key in 'abc'] == ['ours'] * 3
    multi.release()


# --- losing a key loses the set; guarded writes check every key -------------------------------

def test_guarded_writes_check_every_key_and_a_lost_key_loses_the_set(local_engine: LockTable,
                                                                   local_clients: Any) -> None:
    told = CallbackRecorder()
    ours = make(local_clients, 'ours')
    thief = make(local_clients, 'thief')
    multi = acquire_locks(ours, ['x', 'y', 'z'], app_callback=told)
    table = local_engine.table_name

    def put(name: str) -> Dict[str, Any]:
        return {'Put': {'TableName': table, 'Item': {'lock_key': f'data-{name}', 'sort_key': '-'}}}

    multi.transact_write_items([put('one')])
    assert local_engine.read_item('data-one') is not None
    assert multi.actions_left == 97
    with pytest.raises(ValueError, match='at most 97 actions'):
        multi.transact_write_items([put(f'many-{index}') for index in range(98)])
    with pytest.raises(ValueError, match='lock row itself'):
        multi.transact_write_items([{'Put': {'TableName': table, 'Item': {'lock_key': 'y', 'sort_key': '-'}}}])
    assert local_engine.read_item('data-many-0') is None

    # Another client frees 'y' (an operator) and takes it: the set is lost, told once.
    described = thief.get_lock('y')
    assert thief.force_release_lock(described)
    thief.acquire_lock('y', retry_timeout=seconds(0))
    with pytest.raises(DynamoDBLockError) as stolen:
        multi.transact_write_items([put('two')])
    assert stolen.value.code == DynamoDBLockError.LOCK_STOLEN and stolen.value.holder.owner_name == 'thief'
    assert local_engine.read_item('data-two') is None
    assert multi.status == 'INVALID'
    ours.send_heartbeats()      # the other keys renew; 'y' is no longer held
    assert told.called.wait(REAL_TIMEOUT)
    assert told.codes == ['LOCK_STOLEN']
    assert told.calls[0].lock is (multi._multi if is_asyncio(ours) else multi)
    with pytest.raises(DynamoDBLockError) as strict:
        multi.release(best_effort=False)
    assert strict.value.code == DynamoDBLockError.LOCK_STOLEN
    assert [held_by(local_engine, key) for key in 'xyz'] == [None, 'thief', None]   # the others were freed
    assert ours.held_locks() == []


def test_heartbeats_renew_every_key_of_the_set(local_engine: LockTable, local_clients: Any) -> None:
    ours = make(local_clients, 'ours', heartbeat_batch_size=25)
    multi = acquire_locks(ours, [('p', 's1'), ('p', 's2'), 'q'])
    before = [lock.record_version_number for lock in multi.locks]
    assert sorted(lock.unique_identifier for lock in ours.held_locks()) == ['p|s1', 'p|s2', 'q|-']
    with CallRecorder(local_engine.resource) as calls:
        ours.send_heartbeats()
    assert calls.count('BatchExecuteStatement') == 1       # batched with the client's other locks
    after = [local_engine.read_item(lock.partition_key, lock.sort_key)['record_version_number']
             for lock in multi.locks]
    assert after == [lock.record_version_number for lock in multi.locks] and set(after).isdisjoint(before)
    with multi:
        pass
    assert multi.status == 'RELEASED'


# --- transaction conflicts (injected: DynamoDB Local never raises them) -----------------------

def test_transaction_conflicts_are_sent_again(local_engine: LockTable, local_clients: Any) -> None:
    ours = make(local_clients, 'ours')

    def conflict(params: Dict[str, Any]) -> Dict[str, Any]:
        items = params['TransactItems']
        return {'CancellationReasons': [{'Code': 'None'}] * (len(items) - 1) + [{'Code': 'TransactionConflict'}]}

    with FaultInjector(local_engine.resource) as faults:
        # DynamoDB Local never cancels a transaction for a conflict: the answer is injected.
        injected = faults.fail_calls('TransactWriteItems', 'TransactionCanceledException', details=conflict, times=2)
        multi = try_acquire_locks(ours, ['c1', 'c2', 'c3'])     # one attempt, yet conflicts are retried
        assert multi is not None and injected.hits == 2
        faults.fail_calls('TransactWriteItems', 'TransactionCanceledException', details=conflict, times=1)
        multi.release(best_effort=False)                        # the release transaction too
    assert [held_by(local_engine, key) for key in ('c1', 'c2', 'c3')] == [None] * 3


def test_a_lost_answer_is_asked_again_with_the_same_token(local_engine: LockTable, local_clients: Any) -> None:
    """The acquiring transaction commits but its answer is lost (a read timeout after it landed):
    it is sent again with the same ClientRequestToken, which DynamoDB answers as committed,
    instead of being refused by its own rows."""
    ours = make(local_clients, 'ours')
    with FaultInjector(local_engine.resource) as faults, CallRecorder(local_engine.resource) as calls:
        lost = faults.lose_answers('TransactWriteItems', retry=False)
        multi = acquire_locks(ours, ['l1', 'l2'], retry_timeout=seconds(0))
    assert lost.hits == 1
    sent = calls.of('TransactWriteItems')
    assert len(sent) == 2 and sent[0].params['ClientRequestToken'] == sent[1].params['ClientRequestToken']
    for lock in multi.locks:
        row = local_engine.read_item(lock.partition_key)
        assert row['record_version_number'] == lock.record_version_number
        assert row['fencing_token'] == lock.fencing_token
    multi.release(best_effort=False)


# --- interrupted while the transaction is in flight --------------------------------------------

@pytest.mark.threaded_only
def test_cancel_while_the_transaction_is_held_back_frees_every_key_once_it_lands(local_engine: LockTable) -> None:
    client = local_engine.lock_client(background_heartbeats=False)
    cancel = threading.Event()

    hold_back = HoldBack()

    with FaultInjector(local_engine.resource) as faults:
        faults.before_call('TransactWriteItems', hold_back)
        call = BackgroundCall(client.acquire_locks, ['i1', 'i2', 'i3'], cancel=cancel)
        assert hold_back.sending.wait(REAL_TIMEOUT)
        cancel.set()
        error = call.error()            # the caller returns while the transaction is still held back
        hold_back.let_go()
        assert client.wait_settled(REAL_TIMEOUT)
    assert isinstance(error, DynamoDBLockError) and error.code == DynamoDBLockError.ACQUIRE_CANCELLED
    for key in ('i1', 'i2', 'i3'):
        landed = local_engine.read_item(key)
        assert landed is not None and landed.get('released_at') is not None    # landed, then freed
    assert client.held_locks() == []
    client.close()


@pytest.mark.threaded_only
def test_a_cancelled_task_leaves_no_key_held(local_engine: LockTable) -> None:
    """The asyncio client's task is cancelled while the transaction's answer is held back after
    it landed: every key is freed."""
    async def main() -> None:
        async with local_engine.async_lock_client(background_heartbeats=False) as client:
            with FaultInjector(local_engine.resource) as faults:
                late = faults.add_latency('TransactWriteItems', 3600, times=1, after_sending=True)
                task = asyncio.ensure_future(client.acquire_locks(['t1', 't2']))
                await eventually(lambda: late.hits == 1, 'the answer to be held back')
                assert local_engine.read_item('t1') is not None       # it landed
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task
                assert await client.wait_settled(REAL_TIMEOUT)
            assert client.held_locks() == []
            for key in ('t1', 't2'):
                row = local_engine.read_item(key)
                assert row is None or row.get('released_at') is not None, f'{key} is still held: {row}'
            async with client.acquire_locks(['t1', 't2'], retry_timeout=seconds(0)) as multi:
                assert all(lock.status == 'LOCKED' for lock in multi.locks)
            assert multi.status == 'RELEASED'

    run(main())


# --- published 0.9.x clients exclude and are excluded key by key ------------------------------

@pytest.mark.threaded_only
def test_published_clients_exclude_and_are_excluded_key_by_key(local_engine: LockTable,
                                                               published: Published) -> None:  # noqa: F811
    ours = local_engine.lock_client(owner_name='ours', **{**FAST, 'expiry_period': seconds(seconds=EXPIRY)})
    try:
        assert published.acquire('m2', timeout=1)['event'] == 'acquired'
        assert ours.try_acquire_locks(['m1', 'm2', 'm3']) is None
        assert local_engine.read_item('m1') is None and local_engine.read_item('m3') is None
        assert published.send(cmd='release')['event'] == 'released'
        multi = ours.acquire_locks(['m1', 'm2', 'm3'], retry_timeout=seconds(0))
        refused = published.acquire('m3', timeout=2 * LEASE)        # our heartbeats keep it alive
        assert refused['event'] == 'acquire_failed' and refused['code'] == 'ACQUIRE_TIMEOUT'
        multi.release(best_effort=False)
        # 0.9.1 takes a released row (a lease of 0) after one poll; 0.9.3 once its TTL epoch passed.
        taken = published.acquire('m3', timeout=EXPIRY + 3)
        assert taken['event'] == 'acquired', taken
    finally:
        ours.close()

