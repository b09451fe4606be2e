"""Shared (read) locks (docs/shared_locks.rst), on DynamoDB Local, for both clients."""
from __future__ import annotations

from datetime import timedelta
from typing import Any

from helpers import LockClients

seconds = timedelta


def test_many_shared_holders_at_once_exclude_an_exclusive_one(local_engine: Any, local_clients: LockClients) -> None:
    readers = [local_clients.make(owner_name=f'reader-{index}') for index in range(3)]
    writer = local_clients.make(owner_name='writer')
    locks = [reader.acquire_lock('key', shared=True, retry_timeout=seconds(0)) for reader in readers]
    row = local_engine.read_item('key')
    assert sorted(row['shared_holders']) == sorted(lock._state.acquisition_id for lock in locks)
    assert writer.try_acquire_lock('key') is None
    described = writer.get_lock('key')
    assert {holder.owner_name for holder in described.shared_holders} == {'reader-0', 'reader-1', 'reader-2'}
    for lock in locks:
        lock.release(best_effort=False)
    lock = writer.try_acquire_lock('key')
    assert lock is not None
