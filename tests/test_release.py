"""release_lock: strict and best effort, locks not owned or stolen, errors, lost answers, and the
identity-checked registry (correction 6)."""
from __future__ import annotations

import datetime
import logging
from typing import Any, Dict

import pytest

from python_dynamodb_lock.testing import readable_expression
from helpers import CallRecorder, FaultInjector, LockClients, is_asyncio, is_registered
from python_dynamodb_lock.aio import AsyncDynamoDBLock
from python_dynamodb_lock.python_dynamodb_lock import DynamoDBLock, DynamoDBLockError

MODULE = 'python_dynamodb_lock.python_dynamodb_lock'
seconds0 = datetime.timedelta(0)


def delete_row(engine: Any, key: str) -> None:
    engine.client.delete_item(TableName=engine.table_name, Key={'lock_key': {'S': key}, 'sort_key': {'S': '-'}})


def is_acquire(params: Dict[str, Any]) -> bool:
    """An acquiring write: the UpdateItem that takes the lock and its next fencing token."""
    return 'fencing_token' in readable_expression(params)


def is_release(params: Dict[str, Any]) -> bool:
    """A release: the UpdateItem that marks the row released (and takes no token)."""
    return 'released_at' in readable_expression(params) and not is_acquire(params)


def assert_released(engine: Any, lock: Any, key: str, keep_released_rows: bool = True) -> None:
    """The row no longer records a held lock. Kept (the default): marked released, with the
    lock's fencing token, so that the next token is larger. Otherwise: gone."""
    assert engine.read_held_row(key) is None
    row = engine.read_item(key)
    if not keep_released_rows:
        assert row is None
        return
    assert row is not None and 'released_at' in row and row['fencing_token'] == lock.fencing_token
    assert 'acquisition_id' not in row


@pytest.mark.parametrize('keep_released_rows', [True, False], ids=['kept', 'deleted'])
@pytest.mark.parametrize('best_effort', [True, False])
def test_release_is_one_conditional_write(engine: Any, clients: LockClients, best_effort: bool,
                                          keep_released_rows: bool) -> None:
    client = clients.make(keep_released_rows=keep_released_rows)
    lock = client.acquire_lock('release-me')
    with CallRecorder(engine.resource) as calls:
        assert client.release_lock(lock, best_effort=best_effort) is True     # this call released it
    if keep_released_rows:
        assert calls.operations() == ['UpdateItem'] and is_release(calls.calls[0].params)
    else:
        assert calls.operations() == ['DeleteItem']
    assert calls.calls[0].params.get('ConditionExpression')
    assert lock.record_version_number in calls.calls[0].expression_values().values()
    assert lock.status == DynamoDBLock.RELEASED
    assert not is_registered(client, lock)
    assert_released(engine, lock, 'release-me', keep_released_rows)


def test_release_defaults_to_best_effort(engine: Any, clients: LockClients) -> None:
    client = clients.make()
    lock = client.acquire_lock('default-best-effort')
    engine.steal_row('default-best-effort')
    assert client.release_lock(lock) is False     # would raise LOCK_STOLEN if strict
    assert lock.release() is False                # and so would the lock's own method
    assert lock.status == DynamoDBLock.INVALID


@pytest.mark.parametrize('best_effort', [True, False])
def test_releasing_twice_is_a_no_op(engine: Any, clients: LockClients, best_effort: bool) -> None:
    client = clients.make()
    lock = client.acquire_lock('twice')
    assert lock.release() is True
    with CallRecorder(engine.resource) as calls:
        assert client.release_lock(lock, best_effort=best_effort) is False     # already released
    assert calls.calls == []
    assert lock.status == DynamoDBLock.RELEASED


def test_release_of_a_lock_held_by_another_client(engine: Any, clients: LockClients) -> None:
    mine = clients.make()
    theirs = clients.make(engine.new_resource())
    their_lock = theirs.acquire_lock('not-mine')
    with CallRecorder(engine.resource) as calls:
        with pytest.raises(DynamoDBLockError) as raised:
            mine.release_lock(their_lock, best_effort=False)
        assert mine.release_lock(their_lock, best_effort=True) is False      # silent: not ours
    assert raised.value.code == DynamoDBLockError.LOCK_NOT_OWNED
    assert calls.calls == []
    assert their_lock.status == DynamoDBLock.LOCKED
    assert is_registered(theirs, their_lock)
    assert engine.read_item('not-mine')['record_version_number'] == their_lock.record_version_number


def test_strict_release_of_a_stolen_lock_raises_lock_stolen_and_leaves_the_thief_alone(
        engine: Any, clients: LockClients) -> None:
    client = clients.make()
    lock = client.acquire_lock('stolen')
    thief_version = engine.steal_row('stolen')
    with CallRecorder(engine.resource) as calls:
        with pytest.raises(DynamoDBLockError) as raised:
            client.release_lock(lock, best_effort=False)
    assert raised.value.code == DynamoDBLockError.LOCK_STOLEN
    assert raised.value.holder.owner_name == 'thief'
    assert calls.operations() == ['UpdateItem'] and is_release(calls.calls[0].params)
    assert lock.status == DynamoDBLock.INVALID
    assert not is_registered(client, lock)
    row = engine.read_item('stolen')
    assert (row['owner_name'], row['record_version_number']) == ('thief', thief_version)


def test_best_effort_release_of_a_stolen_lock_is_silent(engine: Any, clients: LockClients,
                                                        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger=MODULE)
    client = clients.make()
    lock = client.acquire_lock('stolen-quietly')
    engine.steal_row('stolen-quietly')
    assert client.release_lock(lock, best_effort=True) is False
    assert lock.status == DynamoDBLock.INVALID
    assert not is_registered(client, lock)
    assert engine.read_item('stolen-quietly')['owner_name'] == 'thief'
    assert any(record.levelno == logging.WARNING for record in caplog.records)


@pytest.mark.parametrize('gone', ['deleted', 'force-released'])
@pytest.mark.parametrize('best_effort', [True, False])
def test_release_of_a_lock_whose_row_is_gone_frees_nothing_and_a_strict_one_says_it_was_lost(
        engine: Any, clients: LockClients, best_effort: bool, gone: str) -> None:
    """Nobody freed the row for this release (it expired, was force-released, or was taken over
    and released meanwhile): a best-effort release returns False; a strict one raises
    ``LOCK_STOLEN`` (reason ``ROW_GONE``), as the published package's failed condition does."""
    client = clients.make()
    lock = client.acquire_lock('vanished')
    if gone == 'deleted':
        delete_row(engine, 'vanished')          # e.g. deleted by TTL or by an operator
    else:                                       # an operator's force release: kept, marked released
        operator = clients.make(engine.new_resource())
        assert operator.force_release_lock(operator.get_lock('vanished'))
        assert engine.read_held_row('vanished') is None
        kept = engine.read_item('vanished')
    if best_effort:
        assert client.release_lock(lock, best_effort=True) is False     # gone already: not freed by this call
        assert lock.status == DynamoDBLock.RELEASED
    else:
        with pytest.raises(DynamoDBLockError) as lost:
            client.release_lock(lock, best_effort=False)
        assert lost.value.code == DynamoDBLockError.LOCK_STOLEN and lost.value.reason == 'ROW_GONE'
        assert lock.status == DynamoDBLock.INVALID and lock.loss_reason == 'ROW_GONE'
    assert not is_registered(client, lock)
    if gone == 'deleted':
        assert engine.read_item('vanished') is None
    else:
        assert engine.read_item('vanished') == kept     # the operator's released row is left as it was


def test_strict_release_error_is_unknown_and_keeps_the_lock_held(engine: Any, clients: LockClients) -> None:
    client = clients.make()
    lock = client.acquire_lock('sticky')
    with FaultInjector(engine.resource) as faults:
        throttled = faults.fail_calls('UpdateItem', code='ProvisionedThroughputExceededException', when=is_release)
        with pytest.raises(DynamoDBLockError) as raised:
            client.release_lock(lock, best_effort=False)
    assert throttled.hits == 1
    assert raised.value.code == DynamoDBLockError.UNKNOWN
    assert raised.value.__cause__ is not None
    assert lock.status == DynamoDBLock.LOCKED
    assert is_registered(client, lock)
    assert engine.read_item('sticky')['record_version_number'] == lock.record_version_number
    with CallRecorder(engine.resource) as calls:
        client.send_heartbeats([lock])          # still kept alive
    assert calls.operations() == ['UpdateItem'] and not is_release(calls.calls[0].params)
    assert not is_acquire(calls.calls[0].params)
    assert lock.status == DynamoDBLock.LOCKED
    assert engine.read_held_row('sticky')['record_version_number'] == lock.record_version_number
    assert client.release_lock(lock, best_effort=False) is True   # and the release can be retried
    assert_released(engine, lock, 'sticky')
    assert lock.status == DynamoDBLock.RELEASED


def test_best_effort_release_error_forgets_the_lock(engine: Any, clients: LockClients,
                                                    caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger=MODULE)
    client = clients.make()
    lock = client.acquire_lock('forgotten')
    with FaultInjector(engine.resource) as faults:
        failed = faults.fail_calls('UpdateItem', code='InternalServerError', status=500, when=is_release)
        faults.fail_calls('GetItem', code='InternalServerError', status=500)
        assert client.release_lock(lock, best_effort=True) is False    # the row was not freed
    assert failed.hits == 1
    assert lock.status not in (DynamoDBLock.LOCKED, DynamoDBLock.IN_DANGER)
    assert not is_registered(client, lock)
    held = engine.read_held_row('forgotten')                   # left to expire or be taken over
    assert held is not None and held['record_version_number'] == lock.record_version_number
    assert any(record.levelno == logging.WARNING for record in caplog.records)
    with CallRecorder(engine.resource) as calls:
        client.send_heartbeats([lock])
    assert calls.calls == []                                  # no longer heartbeated


@pytest.mark.parametrize('keep_released_rows', [True, False], ids=['kept', 'deleted'])
@pytest.mark.parametrize('retry', [True, False], ids=['botocore-retries', 'timeout-raised'])
def test_release_whose_answer_was_lost_is_a_successful_release(engine: Any, clients: LockClients,
                                                               retry: bool, keep_released_rows: bool) -> None:
    client = clients.make(keep_released_rows=keep_released_rows)
    lock = client.acquire_lock('lost-delete')
    with FaultInjector(engine.resource) as faults, CallRecorder(engine.resource) as calls:
        # The release is the only write of the block (``when`` needs the body, which the
        # raising variant does not see).
        lost = faults.lose_answers('UpdateItem' if keep_released_rows else 'DeleteItem', retry=retry)
        assert client.release_lock(lock, best_effort=False) is True
    assert lost.hits == 1
    assert len(calls.writes()) == 1
    assert not keep_released_rows or is_release(calls.writes()[0].params)
    assert lock.status == DynamoDBLock.RELEASED
    assert_released(engine, lock, 'lost-delete', keep_released_rows)


@pytest.mark.parametrize('keep_released_rows', [True, False], ids=['kept', 'deleted'])
def test_lost_release_answer_then_the_next_holder_is_still_a_successful_release(
        engine: Any, clients: LockClients, keep_released_rows: bool) -> None:
    """Our release landed, its answer was lost, another client acquired the free lock, and then
    botocore's retry met that client's row: the release worked, nothing was stolen."""
    client = clients.make(keep_released_rows=keep_released_rows)
    lock = client.acquire_lock('handed-on')
    next_holder = clients.make(engine.new_resource(), owner_name='next-holder')
    taken: list = []
    with FaultInjector(engine.resource) as faults:
        lost = faults.lose_answers(
            'UpdateItem' if keep_released_rows else 'DeleteItem', retry=True,
            when=is_release if keep_released_rows else None,
            between=lambda: taken.append(next_holder.acquire_lock('handed-on', retry_timeout=seconds0)))
        assert client.release_lock(lock, best_effort=False) is True     # our first attempt freed it
    assert lost.hits == 1
    assert lock.status == DynamoDBLock.RELEASED
    assert engine.read_held_row('handed-on')['record_version_number'] == taken[0].record_version_number
    if keep_released_rows:                              # the kept row carried the count on
        assert taken[0].fencing_token == lock.fencing_token + 1


def test_release_after_a_lost_heartbeat_answer(engine: Any, clients: LockClients) -> None:
    """The row carries a version whose write was never confirmed: release still frees it."""
    client = clients.make()
    lock = client.acquire_lock('unconfirmed')
    with FaultInjector(engine.resource) as faults:
        faults.lose_answers('UpdateItem', retry=False)
        client.send_heartbeats([lock])
    assert engine.read_item('unconfirmed')['record_version_number'] != lock.record_version_number
    assert client.release_lock(lock, best_effort=False) is True
    assert_released(engine, lock, 'unconfirmed')
    assert lock.status == DynamoDBLock.RELEASED


def test_release_when_the_row_holds_an_old_unconfirmed_renewal(engine: Any, clients: LockClients) -> None:
    client = clients.make()
    lock = client.acquire_lock('old-unconfirmed-release')
    with FaultInjector(engine.resource) as faults:
        faults.lose_answers('UpdateItem', retry=False)
        client.send_heartbeats([lock])
        faults.fail_calls('UpdateItem', code='InternalServerError', status=500, times=25)
        for _ in range(25):
            client.send_heartbeats([lock])
    client.release_lock(lock, best_effort=False)
    assert lock.status == DynamoDBLock.RELEASED
    assert_released(engine, lock, 'old-unconfirmed-release')


def test_release_after_close_still_releases(engine: Any, clients: LockClients) -> None:
    client = clients.make()
    lock = client.acquire_lock('after-close')
    client.close()
    assert engine.read_held_row('after-close') is not None      # close does not release by default
    assert client.release_lock(lock, best_effort=False) is True
    assert_released(engine, lock, 'after-close')


def test_release_rejects_what_is_not_a_held_lock_type(clients: LockClients) -> None:
    client = clients.make()
    with pytest.raises(TypeError):
        client.release_lock('lock-name')


# --- identity-checked registry (correction 6) ----------------------------------------------

def stale_copy(lock: DynamoDBLock) -> DynamoDBLock:
    """An object for the same key and client that claims LOCKED but is not the held lock (a lock
    object of the client's own kind)."""
    fields = (lock.partition_key, lock.sort_key, lock.owner_name, lock.lease_duration, lock.record_version_number,
              lock.expiry_time, lock.additional_attributes, None)
    client = lock.lock_client
    if is_asyncio(client):
        async def make() -> AsyncDynamoDBLock:      # on the loop: its asyncio.Lock belongs there (3.9)
            return AsyncDynamoDBLock(*fields, client.async_client)

        copy = client._proxy(client._runner.run(make()))
    else:
        copy = DynamoDBLock(*fields, client)
    copy.status = DynamoDBLock.LOCKED
    return copy


def test_an_older_lock_object_cannot_release_or_stop_a_newer_lock(engine: Any, clients: LockClients) -> None:
    client = clients.make()
    old = client.acquire_lock('reused-key')
    old.release()
    new = client.acquire_lock('reused-key')
    stale = stale_copy(new)
    with CallRecorder(engine.resource) as calls:
        assert client.release_lock(old, best_effort=False) is False     # RELEASED: a no-op
        assert client.release_lock(stale, best_effort=True) is False    # not the registered object: silent
        with pytest.raises(DynamoDBLockError) as raised:
            client.release_lock(stale, best_effort=False)
        client.send_heartbeats([old])
        client.send_heartbeats([stale])
    assert raised.value.code == DynamoDBLockError.LOCK_NOT_OWNED
    assert calls.calls == []
    assert is_registered(client, new)
    assert engine.read_item('reused-key')['record_version_number'] == new.record_version_number
    previous_version = new.record_version_number
    client.send_heartbeats([new])                                 # the new lock is still heartbeated
    assert new.status == DynamoDBLock.LOCKED
    assert new.record_version_number != previous_version
    assert engine.read_item('reused-key')['record_version_number'] == new.record_version_number


def test_a_stolen_lock_object_does_not_disturb_the_reacquired_lock(engine: Any, clients: LockClients) -> None:
    client = clients.make()
    old = client.acquire_lock('stolen-then-back')
    engine.steal_row('stolen-then-back')
    client.send_heartbeats([old])
    assert old.status == DynamoDBLock.INVALID
    delete_row(engine, 'stolen-then-back')                     # the thief releases
    new = client.acquire_lock('stolen-then-back')
    assert client.release_lock(old, best_effort=True) is False  # silent
    with pytest.raises(DynamoDBLockError) as raised:            # strict: says the lock was lost
        client.release_lock(old, best_effort=False)
    assert raised.value.code == DynamoDBLockError.LOCK_STOLEN
    assert raised.value.holder.owner_name == 'thief'
    client.send_heartbeats([old])
    assert is_registered(client, new) and new.status == DynamoDBLock.LOCKED
    assert engine.read_item('stolen-then-back')['record_version_number'] == new.record_version_number
