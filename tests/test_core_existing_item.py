"""The pure parts of locks on existing items, with no engine: the requests (which attributes a
lock on an item writes and removes, every name the application chose through
ExpressionAttributeNames), the judgement
of a row without lock attributes, and the acquire protocol's ``only_if_exists`` answer.
The behaviour on DynamoDB Local is in test_existing_item.py."""
from __future__ import annotations

import dataclasses
import re
from typing import Any, Dict

import pytest

from helpers import attribute_names_in
from python_dynamodb_lock._core.acquire import acquire
from python_dynamodb_lock._core.write import AcquireAttempt, Written, free_if_landed, is_free
from python_dynamodb_lock._core.answers import Applied, Refused
from python_dynamodb_lock._core.release import ReleaseOutcome, ReleaseSettings, free_handed, release, release_again
from python_dynamodb_lock._core.state import LockState
from python_dynamodb_lock._wire.lock_writes import acquire_free, free_row, release_item_lock
from python_dynamodb_lock._wire.renewals import Renewal, renew, renew_many
from python_dynamodb_lock.python_dynamodb_lock import DynamoDBLockError
from test_core_protocol import LEASE, SCHEMA, FakeClock, FakeLock, drive, scripted

APP_ROW = {'lock_key': 'k', 'sort_key': '-', 'status': 'PAID', 'data': 'x'}
LOCK_ROW = {**APP_ROW, 'owner_name': 'o', 'record_version_number': 'v1', 'lease_duration': 30}
RELEASED_ROW = {**LOCK_ROW, 'released_at': 1, 'expiry_time': 1}


def names_of(params: Dict[str, Any], text: str) -> set[str]:
    """The attribute names ``text`` (a part of one of ``params``' expressions) names."""
    return attribute_names_in({'ExpressionAttributeNames': params.get('ExpressionAttributeNames'), 'text': text},
                              'text')


def assert_only_placeholders(params: Dict[str, Any]) -> None:
    """Every name an application chooses (the keys, the TTL attribute, an item's own attributes)
    goes through ExpressionAttributeNames (reserved words are safe); only this package's own
    names are written directly, and every placeholder is used."""
    texts = params.get('UpdateExpression', '') + ' ' + params.get('ConditionExpression', '')
    chosen = {SCHEMA.partition_key_name, SCHEMA.sort_key_name, SCHEMA.ttl_attribute_name}
    own = SCHEMA.reserved_names - chosen
    assert attribute_names_in({'text': texts}, 'text') <= own     # bare names only
    assert set(re.findall(r'#\w+', texts)) == set(params.get('ExpressionAttributeNames', {}))


@pytest.mark.parametrize('row, existing, free', [
    (None, False, True), (APP_ROW, False, False), (LOCK_ROW, False, False), (RELEASED_ROW, False, True),
    (None, True, True), (APP_ROW, True, True), (LOCK_ROW, True, False), (RELEASED_ROW, True, False),
    ({**APP_ROW, 'fencing_token': 7}, True, True),
])
def test_which_rows_are_free(row: Any, existing: bool, free: bool) -> None:
    """Without the opt-in an item without lock attributes is held by an unknown owner; with it
    it is free, and a released row is taken over (to remove its TTL) rather than written as free."""
    assert is_free(row, existing) is free


def test_the_acquire_on_an_item_adds_only_lock_attributes_and_no_ttl() -> None:
    item = {'lock_key': 'k', 'sort_key': '-', 'owner_name': 'o', 'lease_duration': 30,
            'record_version_number': 'v', 'acquisition_id': 'v', 'lease_expiry': 1}
    request = acquire_free(SCHEMA, item, 5, existing_item=True)
    params = request.params
    assert request.operation == 'update_item' and 'Item' not in params
    assert params['ConditionExpression'] == 'attribute_not_exists(record_version_number)'
    assignments = params['UpdateExpression'].split(' REMOVE ')[0]
    written = names_of(params, assignments)
    assert written == {'owner_name', 'lease_duration', 'record_version_number', 'acquisition_id', 'lease_expiry',
                       'fencing_token'}
    assert_only_placeholders(params)
    only = acquire_free(SCHEMA, item, 5, existing_item=True, only_if_exists=True).params
    assert only['ConditionExpression'] == \
        'attribute_exists(#partition_key) AND attribute_not_exists(record_version_number)'
    assert only['ExpressionAttributeNames']['#partition_key'] == 'lock_key'


@pytest.mark.parametrize('keep_token', [True, False])
def test_the_release_of_a_lock_on_an_item_removes_only_lock_attributes(keep_token: bool) -> None:
    request = release_item_lock(SCHEMA, 'k', '-', ['v1', 'v2'], {'status', 'owner_name', 'expiry_time'}, keep_token)
    params = request.params
    assert request.operation == 'update_item' and params['UpdateExpression'].startswith('REMOVE ')
    assert 'SET' not in params['UpdateExpression']
    removed = names_of(params, params['UpdateExpression'])
    lock_names = {'owner_name', 'lease_duration', 'record_version_number', 'acquisition_id', 'lease_expiry',
                  'released_at', 'lock_session'}
    # The lock's additional attribute ('status' here) goes; the TTL attribute is never touched.
    assert removed == lock_names | {'status'} | (set() if keep_token else {'fencing_token'})
    assert params['ExpressionAttributeValues'] == {':expected_version_0': 'v1', ':expected_version_1': 'v2'}
    assert_only_placeholders(params)
    assert free_row(SCHEMA, 'k', '-', ['v1', 'v2'], 'new', 1, 1, {'status', 'owner_name', 'expiry_time'},
                    keep_token, existing_item=True) == request


def test_renewals_without_a_ttl_do_not_write_it() -> None:
    with_ttl = Renewal('k', '-', ['v1'], 'v2', 123, 456)
    without = Renewal('k', '-', ['v1'], 'v2', None, 456)
    assert 'expiry_time' in attribute_names_in(renew(SCHEMA, with_ttl).params)
    params = renew(SCHEMA, without).params
    assert 'expiry_time' not in attribute_names_in(params)
    assert ':new_expiry_time' not in params['ExpressionAttributeValues']
    assert_only_placeholders(params)
    statements = renew_many(SCHEMA, [with_ttl, without]).params['Statements']
    assert '"expiry_time"' in statements[0]['Statement'] and '"expiry_time"' not in statements[1]['Statement']
    assert statements[0]['Parameters'] == ['v2', 123, 456, 'k', '-', 'v1']
    assert statements[1]['Parameters'] == ['v2', 456, 'k', '-', 'v1']
    for statement in statements:
        assert statement['Statement'].count('?') == len(statement['Parameters'])


def item_attempt(only_if_exists: bool) -> AcquireAttempt:
    template = {'lock_key': 'k', 'sort_key': '-', 'owner_name': 'me', 'lease_duration': LEASE}
    return AcquireAttempt(SCHEMA, 'k', '-', 'k|-', template, 5.0, 0.0, 3600.0, LEASE,
                          lock_existing_item=True, only_if_exists=only_if_exists)


def test_only_if_exists_on_a_missing_item_is_item_not_found_after_one_write_and_one_read() -> None:
    run = drive(acquire(item_attempt(True), FakeClock(), lambda: False),
                scripted(Refused(None), Applied({})), clock=FakeClock())
    assert [request.operation for request in run.calls] == ['update_item', 'get_item']
    assert isinstance(run.error, DynamoDBLockError) and run.error.code == DynamoDBLockError.ITEM_NOT_FOUND


def test_only_if_exists_meets_an_item_created_meanwhile_and_writes_again() -> None:
    """The read after the refusal finds an item without a lock: it is free, so the next write goes."""
    run = drive(acquire(item_attempt(True), FakeClock(), lambda: False),
                scripted(Refused(None), Applied({'Item': APP_ROW}),
                         Applied({'Attributes': {**APP_ROW, 'fencing_token': 2}})),   # the item as it was
                clock=FakeClock())
    assert run.calls[-1].params['ReturnValues'] == 'ALL_OLD'
    assert run.error is None and run.result.item['fencing_token'] == 3     # one more than the item's
    assert SCHEMA.ttl_attribute_name not in run.result.item
    assert not run.result.own_row                                          # the application's item


def test_a_lock_that_finds_no_item_creates_its_own_row() -> None:
    """Without only_if_exists, a missing item is created: the answer (the item as it was) is
    empty, the token is the floor's next, and the lock's release frees the row as a plain lock's
    does (issue 27, 7d)."""
    clock = FakeClock()
    run = drive(acquire(item_attempt(False), clock, lambda: False), scripted(Applied({})), clock=clock)
    floor = run.calls[0].params['ExpressionAttributeValues'][':token_floor']
    assert run.error is None and run.result.own_row and run.result.item['fencing_token'] == floor + 1


def test_a_released_row_is_taken_over_with_its_ttl_removed() -> None:
    """At once, whatever lease and TTL the released row carries."""
    run = drive(acquire(item_attempt(False), FakeClock(), lambda: False),
                scripted(Refused(dict(RELEASED_ROW)), Applied({'Attributes': {'fencing_token': 2}})),
                clock=FakeClock())
    takeover = run.calls[-1].params
    assert takeover['ConditionExpression'] == 'record_version_number = :expected_version_0'
    removed = takeover['UpdateExpression'].split(' REMOVE ')[1]
    # (and the shared-lock and session attributes every exclusive write without them removes:
    # reserved names, never the item's)
    assert names_of(takeover, removed) == {
        'released_at', 'expiry_time', 'shared_holders', 'writer_waiting', 'lock_session'}
    assert 'status' not in attribute_names_in(takeover)   # the item's own stay



# -- every way a lock on an item is freed removes only the lock's attributes, never the item --

def removed_names(request: Any) -> set[str]:
    params = request.params
    assert request.operation == 'update_item' and params['UpdateExpression'].startswith('REMOVE ')
    return attribute_names_in(params)


@pytest.mark.parametrize('keep', [True, False])
def test_an_interrupted_acquire_on_an_item_is_undone_by_removing_the_lock(keep: bool) -> None:
    attempt = dataclasses.replace(item_attempt(False), keep_released_rows=keep)
    run = drive(free_if_landed(attempt, FakeClock(), 'v-ours', assume_landed=True), scripted(Applied()))
    assert run.result is True and len(run.calls) == 1
    assert ('fencing_token' in removed_names(run.calls[0])) is not keep
    assert 'expiry_time' not in attribute_names_in(run.calls[0].params)


@dataclasses.dataclass
class ItemLock(FakeLock):
    """What the release protocol reads of a lock on an item (which has no additional attributes)."""

    additional_attributes: Dict[str, Any] = dataclasses.field(default_factory=dict)
    lock_existing_item: bool = True


@pytest.mark.parametrize('keep_row', [None, True, False])
def test_the_release_of_a_lock_on_an_item_never_deletes(keep_row: Any) -> None:
    settings = ReleaseSettings(SCHEMA, 3600.0, keep_released_rows=False)    # a client that deletes its rows
    lock = ItemLock(LockState('v1', 0, 1000.0, LEASE))
    run = drive(release(settings, lock, FakeClock(), None, keep_row=keep_row), scripted(Applied()))
    assert run.result.outcome is ReleaseOutcome.RELEASED
    kept = keep_row is True
    assert ('fencing_token' in removed_names(run.calls[0])) is not kept
    again = drive(release_again(settings, lock, ['v1'], FakeClock(), LEASE, keep_row=keep_row), scripted(Applied()))
    assert removed_names(again.calls[0]) == removed_names(run.calls[0])


def test_a_row_handed_to_a_waiter_that_left_is_freed_by_removing_the_lock() -> None:
    item = {'lock_key': 'k', 'sort_key': '-', 'owner_name': 'me', 'record_version_number': 'v2', 'status': 'x'}
    run = drive(free_handed(ReleaseSettings(SCHEMA, 3600.0), ('k', '-'), Written(item, 0.0), FakeClock()),
                scripted(Applied()))
    assert 'record_version_number' in removed_names(run.calls[0])
    assert 'status' not in removed_names(run.calls[0]) and 'fencing_token' not in removed_names(run.calls[0])


def test_a_release_meeting_a_row_without_a_lock_counts_it_gone() -> None:
    lock = ItemLock(LockState('v1', 0, 1000.0, LEASE))
    run = drive(release(ReleaseSettings(SCHEMA, 3600.0), lock, FakeClock()), scripted(Refused(dict(APP_ROW))))
    assert run.result.outcome is ReleaseOutcome.ROW_GONE


@pytest.mark.parametrize('existing, calls', [(False, 2), (True, 1)], ids=['plain', 'on-an-item'])
def test_a_past_ttl_on_an_item_is_the_applications_not_a_dead_holder(existing: bool, calls: int) -> None:
    """A plain waiter takes a row whose TTL epoch has passed at once; a waiter for an item does
    not (the TTL attribute there is the application's): it waits for the version to stand still."""
    clock = FakeClock()
    held = {**LOCK_ROW, 'expiry_time': int(clock.time()) - 60}     # a live holder, an old TTL
    attempt = dataclasses.replace(item_attempt(False), lock_existing_item=existing)
    run = drive(acquire(attempt, clock, lambda: False),
                scripted(Refused(dict(held)), Applied({'Attributes': {'fencing_token': 2}})), clock=clock)
    assert len(run.calls) == calls
