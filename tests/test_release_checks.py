"""Issue 27, findings 6 and 7c-d: what a release leaves behind.

* ``release(attributes=...)`` and ``lock.update_attributes`` that would make the row larger than
  DynamoDB's 400 KB item limit are refused with ValueError before anything is written (a
  best-effort release used to fail on the wire, return False and leave the row held for its
  lease);
* a lock on an existing item (``lock_existing_item=True``) that found no item at its key created
  the row: its release leaves the key as a plain lock's release does, so that later plain locks
  are not blocked and ``get_lock`` shows no holder.

Both clients; moto and DynamoDB Local (``engine``) where only the requests matter, DynamoDB
Local where another client's acquisition is the claim.
"""
from __future__ import annotations

import datetime
import logging
import pytest
from helpers import BackgroundCall, CallRecorder, LockClients, settle

from python_dynamodb_lock import DynamoDBLockError
from python_dynamodb_lock._core.messages import explain
from python_dynamodb_lock._model.schema import Schema
from python_dynamodb_lock.python_dynamodb_lock import DynamoDBLock
from python_dynamodb_lock.testing import LockTable

seconds = datetime.timedelta
TOO_LARGE = 'x' * (420 * 1024)
#: Large, but a row with it (the lock's own attributes too) stays within 400 KB (and within
#: moto's stricter 405,000 bytes).
LARGE_BUT_FITS = 'x' * 395_000


# --------------------------------------------------------------------------------------------
# 6: release(attributes=...) over 400 KB
# --------------------------------------------------------------------------------------------

def test_an_oversized_release_is_refused_before_any_write_and_the_lock_stays_held(engine: LockTable,
                                                                                  clients: LockClients) -> None:
    holder = clients.make(owner_name='holder')
    other = clients.make(owner_name='other')
    lock = holder.acquire_lock('big-result')
    with CallRecorder(engine.resource) as calls:
        for release in (lambda: lock.release(attributes={'result': TOO_LARGE}),
                        lambda: holder.release_lock(lock, attributes={'result': TOO_LARGE}),
                        lambda: lock.release(best_effort=False, attributes={'result': TOO_LARGE})):
            with pytest.raises(ValueError, match='400 KB') as refused:
                release()
            assert 'release attributes' in str(refused.value) and 'nothing was written' in str(refused.value)
    assert calls.count() == 0
    assert lock.status == DynamoDBLock.LOCKED and engine.read_held_row('big-result') is not None
    assert other.try_acquire_lock('big-result') is None                 # still held: nobody else takes it
    assert lock.release(attributes={'result': 'small'}) is True          # a later release works
    taken = other.try_acquire_lock('big-result')                        # and the key is free after it
    assert taken is not None and taken.additional_attributes == {'result': 'small'}


def test_a_large_release_that_fits_is_written(local_engine: LockTable, local_clients: LockClients) -> None:
    """The check counts the row as it will be (moto counts the attributes set before those
    removed, and would refuse this: DynamoDB Local)."""
    client = local_clients.make()
    lock = client.acquire_lock('large-result', additional_attributes={'scratch': LARGE_BUT_FITS})
    assert lock.release(attributes={'result': LARGE_BUT_FITS}) is True  # the scratch data is removed
    row = local_engine.read_item('large-result')
    assert row is not None and 'released_at' in row and row['result'] == LARGE_BUT_FITS and 'scratch' not in row


def test_a_handover_too_large_for_one_row_frees_the_row_instead(local_engine: LockTable,
                                                                local_clients: LockClients) -> None:
    """Release attributes that fit alone, with a waiter of the same client whose own attributes
    would not fit beside them: the release frees the row (no handover) instead of failing."""
    client = local_clients.make()
    lock = client.acquire_lock('queue')
    waiting = BackgroundCall(client.acquire_lock, 'queue', retry_timeout=seconds(seconds=5),
                             additional_attributes={'mine': LARGE_BUT_FITS}, name='waiter')
    settle(local_clients.clock, threads=[waiting.thread])
    assert lock.release(attributes={'left': LARGE_BUT_FITS}) is True
    assert lock.status == DynamoDBLock.RELEASED
    row = local_engine.read_item('queue')
    assert row is not None and 'released_at' in row and row['left'] == LARGE_BUT_FITS
    # The waiter tries again on its own; the row with both would exceed DynamoDB's limit.
    with pytest.raises(DynamoDBLockError, match='400 KB'):
        waiting.result()


# --------------------------------------------------------------------------------------------
# 7c: update_attributes over 400 KB on a plain lock
# --------------------------------------------------------------------------------------------

def test_an_oversized_update_is_refused_before_any_write(engine: LockTable, clients: LockClients,
                                                         caplog: pytest.LogCaptureFixture) -> None:
    client = clients.make()
    lock = client.acquire_lock('big-update', additional_attributes={'kept': LARGE_BUT_FITS})
    version = lock.record_version_number
    with CallRecorder(engine.resource) as calls, caplog.at_level(logging.DEBUG, logger='python_dynamodb_lock'):
        with pytest.raises(ValueError, match='400 KB') as refused:
            lock.update_attributes({'more': 'x' * 20_000})
    assert 'existing item' not in str(refused.value) and 'update_attributes' in str(refused.value)
    assert calls.count() == 0
    # nothing failed on the wire, so nothing is logged as a failed heartbeat
    assert not [record for record in caplog.records if record.levelno >= logging.WARNING], caplog.text
    assert lock.status == DynamoDBLock.LOCKED and lock.record_version_number == version
    assert lock.additional_attributes == {'kept': LARGE_BUT_FITS}
    lock.update_attributes(remove=['kept'])                              # removing makes room
    lock.update_attributes({'more': 'x' * 20_000})
    assert engine.read_item('big-update')['more'] == 'x' * 20_000


def test_the_item_size_message_describes_a_plain_lock_too() -> None:
    from botocore.exceptions import ClientError

    error = ClientError({'Error': {'Code': 'ValidationException',
                                   'Message': 'Item size to update has exceeded the maximum allowed size'}},
                        'UpdateItem')
    message = explain(Schema('locks', 'lock_key', 'sort_key', 'expiry_time'), error)
    assert '400 KB' in message and 'additional attributes' in message
    assert 'a lock on an existing item adds' not in message


# --------------------------------------------------------------------------------------------
# 7d: lock_existing_item=True on a missing key
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize('keep_row', [True, False])
def test_a_lock_that_created_its_item_leaves_no_ghost(local_engine: LockTable, local_clients: LockClients,
                                                      keep_row: bool) -> None:
    first = local_clients.make(owner_name='first')
    second = local_clients.make(owner_name='second')
    lock = first.acquire_lock('made-by-lock', lock_existing_item=True, keep_row=keep_row)
    assert lock.lock_existing_item
    first_token = lock.fencing_token
    assert lock.release() is True
    assert second.get_lock('made-by-lock') is None                      # no holder, no empty owner
    row = local_engine.read_item('made-by-lock')
    if keep_row:                                                        # a plain lock's released row
        assert row is not None and 'released_at' in row and 'expiry_time' in row
    else:
        assert row is None
    taken = second.acquire_lock('made-by-lock', retry_timeout=seconds(0))   # at once
    assert taken.owner_name == 'second'
    if keep_row:
        assert taken.fencing_token is not None and first_token is not None and taken.fencing_token > first_token
    taken.release()
    again = first.acquire_lock('made-by-lock', lock_existing_item=True, retry_timeout=seconds(0))
    again.release()
    assert second.get_lock('made-by-lock') is None
    assert second.acquire_lock('made-by-lock', retry_timeout=seconds(0)).owner_name == 'second'


def test_a_created_row_handed_to_a_waiter_is_still_freed_as_a_plain_lock(local_engine: LockTable,
                                                                         local_clients: LockClients) -> None:
    client = local_clients.make(owner_name='first')
    other = local_clients.make(owner_name='other')
    lock = client.acquire_lock('handed-row', lock_existing_item=True)
    waiting = BackgroundCall(client.acquire_lock, 'handed-row', lock_existing_item=True,
                             retry_timeout=seconds(seconds=60), name='waiter')
    settle(local_clients.clock, threads=[waiting.thread])
    lock.release()
    handed = waiting.result()
    assert handed.lock_existing_item and handed.fencing_token == lock.fencing_token + 1
    handed.release()
    assert other.get_lock('handed-row') is None
    assert other.acquire_lock('handed-row', retry_timeout=seconds(0)).owner_name == 'other'


def test_a_lock_on_an_item_that_exists_still_leaves_the_item(local_engine: LockTable,
                                                             local_clients: LockClients) -> None:
    """The other side of the rule: an application's item, even one with nothing but its key,
    keeps existing (no TTL, no released mark) after the lock's release."""
    client = local_clients.make()
    table = local_engine.resource.Table(local_engine.table_name)
    table.put_item(Item={'lock_key': 'app-item', 'sort_key': '-', 'payload': 'data'})
    table.put_item(Item={'lock_key': 'key-only', 'sort_key': '-'})
    for key in ('app-item', 'key-only'):
        lock = client.acquire_lock(key, lock_existing_item=True)
        assert lock.release() is True
        row = local_engine.read_item(key)
        assert row is not None and 'released_at' not in row and 'expiry_time' not in row
        assert 'record_version_number' not in row
    assert local_engine.read_item('app-item')['payload'] == 'data'


def test_only_if_exists_is_unchanged(local_engine: LockTable, local_clients: LockClients) -> None:
    client = local_clients.make()
    with pytest.raises(DynamoDBLockError) as raised:
        client.acquire_lock('nothing-here', lock_existing_item=True, only_if_exists=True, retry_timeout=seconds(0))
    assert raised.value.code == DynamoDBLockError.ITEM_NOT_FOUND
    assert local_engine.read_item('nothing-here') is None
