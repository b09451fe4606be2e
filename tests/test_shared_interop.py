"""Shared (read) locks and the published package (0.9.1 and the 0.9.3 fork), run for real in
their own processes against DynamoDB Local (see test_interop.py): a published client never
takes a key while a shared holder of this package lives, and takes it once the last one left.
"""
from __future__ import annotations

from datetime import timedelta
from typing import Any

from test_interop import EXPIRY, LEASE, Published, ours, published   # noqa: F401 - fixtures
from python_dynamodb_lock.python_dynamodb_lock import DynamoDBLockClient

seconds = timedelta


def test_a_published_client_never_takes_a_key_with_a_live_shared_holder(
        local_engine: Any, published: Published, ours: DynamoDBLockClient) -> None:  # noqa: F811
    other = DynamoDBLockClient(local_engine.resource, table_name=local_engine.table_name, owner_name='other-reader',
                               heartbeat_period=timedelta(seconds=ours.heartbeat_period),
                               safe_period=timedelta(seconds=ours.safe_period),
                               lease_duration=timedelta(seconds=ours.lease_duration))
    try:
        kept = ours.acquire_lock('shared', shared=True, retry_timeout=seconds(0))
        dying = other.acquire_lock('shared', shared=True, retry_timeout=seconds(0))
        refused = published.acquire('shared', timeout=2 * LEASE)        # both renew their entries
        assert refused['event'] == 'acquire_failed' and refused['code'] == 'ACQUIRE_TIMEOUT', refused
        other.close()                         # one shared holder dies (no release): the other lives on
        assert dying.status in (dying.LOCKED, dying.IN_DANGER)
        refused = published.acquire('shared', timeout=2 * LEASE)
        assert refused['event'] == 'acquire_failed' and refused['code'] == 'ACQUIRE_TIMEOUT', refused
        assert kept.status == kept.LOCKED
        # Only a dead entry remains once the live holder leaves: the row is not freed, and the
        # published client takes it once its version stayed unchanged for the row's lease.
        kept.release(best_effort=False)
        taken = published.acquire('shared', timeout=LEASE + EXPIRY + 3)
        assert taken['event'] == 'acquired', taken
        row = local_engine.read_item('shared')
        assert row['owner_name'].startswith('published-') and 'shared_holders' not in row
    finally:
        other.close()


def test_a_key_released_by_its_last_shared_holder_is_taken_by_a_published_client(
        local_engine: Any, published: Published, ours: DynamoDBLockClient) -> None:  # noqa: F811
    lock = ours.acquire_lock('shared', shared=True, retry_timeout=seconds(0))
    lock.release(best_effort=False)
    row = local_engine.read_item('shared')
    assert row.get('released_at') is not None and row['lease_duration'] == 0
    taken = published.acquire('shared', timeout=EXPIRY + 3)
    assert taken['event'] == 'acquired', taken
    assert ours.try_acquire_lock('shared', shared=True) is None       # held by the published client
    assert published.send(cmd='release')['event'] == 'released'
    assert ours.try_acquire_lock('shared', shared=True) is not None
