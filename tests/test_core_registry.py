"""The client's registry of held locks (correction 6): thread-safe, identity-checked, and never
leaving a lock object that lost its row believing it still holds it."""
from __future__ import annotations

import datetime
import threading
from typing import Any, Dict, List


from helpers import (
    BackgroundCall,
    CallbackRecorder,
    FaultInjector,
    LockClients,
    is_registered,
    step,
)
from python_dynamodb_lock.python_dynamodb_lock import DynamoDBLock, DynamoDBLockError
from python_dynamodb_lock.testing import is_acquire

seconds = datetime.timedelta
STOLEN = DynamoDBLockError.LOCK_STOLEN


def test_reacquiring_a_force_released_key_invalidates_the_older_lock_object(engine: Any,
                                                                         clients: LockClients) -> None:
    """The operator deleted the row of L1; the same client then acquires the key again as L2.

    L1 no longer holds anything: it must not stay LOCKED (unrenewed, unchecked) and its owner
    must hear LOCK_STOLEN, as it would if any other client had taken the key.
    """
    client = clients.make()
    callback = CallbackRecorder()
    first = client.acquire_lock('reacquired', app_callback=callback)
    assert client.force_release_lock(client.get_lock('reacquired')) is True
    second = client.acquire_lock('reacquired')
    assert is_registered(client, second) and second.status == DynamoDBLock.LOCKED
    client.send_heartbeats([first])
    assert first.status == DynamoDBLock.INVALID, 'the lock object that lost its row still claims to hold it'
    assert callback.codes == [STOLEN]
    client.send_heartbeats([second])
    assert second.status == DynamoDBLock.LOCKED
    assert engine.read_item('reacquired')['record_version_number'] == second.record_version_number
    assert second.fencing_token == first.fencing_token + 1     # the force-released row kept the count


def test_a_thread_of_the_same_client_taking_over_a_stalled_lock_tells_the_old_holder(
        engine: Any, clients: LockClients) -> None:
    """One client, two threads: the holder's renewals fail for longer than the lease, the other
    thread takes the key over. The holder is warned (IN_DANGER) and then told (LOCK_STOLEN)."""
    clock = clients.clock
    client = clients.make(hand_driven=False)
    callback = CallbackRecorder()
    first = client.acquire_lock('same-client-takeover', app_callback=callback)
    with FaultInjector(engine.resource) as faults:
        # Every renewal fails; acquiring is an UpdateItem too (it carries the fencing token
        # forward), and it goes through.
        renewals = faults.fail_calls('UpdateItem', code='InternalServerError', status=500, times=None,
                                     when=lambda params: not is_acquisition(params))
        attempt = BackgroundCall(client.acquire_lock, 'same-client-takeover', retry_period=seconds(seconds=1),
                                 retry_timeout=seconds(seconds=60), name='second-thread')
        while not attempt.done:
            step(clock, 1, client, threads=[attempt.thread])
    second = attempt.result()
    assert renewals.hits > 0
    step(clock, 10, client)
    assert second.status == DynamoDBLock.LOCKED
    assert first.status == DynamoDBLock.INVALID, 'the stalled lock object never learnt it lost the key'
    assert callback.codes == [DynamoDBLockError.LOCK_IN_DANGER, STOLEN]
    assert engine.read_item('same-client-takeover')['record_version_number'] == second.record_version_number
    assert second.fencing_token == first.fencing_token + 1


def is_acquisition(params: Dict[str, Any]) -> bool:
    """Whether a (decoded) UpdateItem acquires a lock: only acquisitions assign the fencing token."""
    return is_acquire(params)


def test_registry_under_concurrent_acquire_and_release(local_engine: Any, local_clients: LockClients) -> None:
    client = local_clients.make(hand_driven=False)
    errors: List[BaseException] = []

    def worker(index: int) -> None:
        try:
            for round_number in range(8):
                lock = client.acquire_lock(f'registry-{index}', str(round_number), retry_timeout=seconds(0))
                assert is_registered(client, lock)
                lock.release(best_effort=False)
                assert not is_registered(client, lock)
        except BaseException as exc:      # reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(index,)) for index in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == []
    assert client.held_locks() == []


def test_threads_of_one_client_take_turns_on_one_key(local_engine: Any, local_clients: LockClients) -> None:
    """Mutual exclusion between threads of one client (DynamoDB Local: atomic conditional writes).

    The fake clock never moves: each waiter is woken only by the release before it.
    """
    client = local_clients.make(hand_driven=False)
    inside = threading.Lock()
    overlaps: List[str] = []
    turns: List[str] = []
    tokens: List[int] = []

    def worker(name: str) -> None:
        for _ in range(5):
            with client.acquire_lock('one-key', retry_timeout=seconds(hours=1), raise_context_exception=True) as lock:
                if not inside.acquire(blocking=False):
                    overlaps.append(name)
                    continue
                turns.append(name)
                tokens.append(lock.fencing_token)
                inside.release()

    workers = [BackgroundCall(worker, f'worker-{index}', name=f'worker-{index}') for index in range(4)]
    for call in workers:
        call.result(timeout=120)
    assert overlaps == []
    assert len(turns) == 20
    # Each turn had a token one larger than the turn before it (hand-overs included).
    assert tokens == list(range(tokens[0], tokens[0] + 20))
    assert local_engine.read_held_row('one-key') is None                      # nobody holds it
    assert local_engine.read_item('one-key')['fencing_token'] == tokens[-1]   # kept for the token
