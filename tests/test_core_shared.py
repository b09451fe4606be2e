"""The pure judgement of shared rows (python_dynamodb_lock/_core/shared.py) and the requests of
shared locks: no engine."""
from __future__ import annotations

from decimal import Decimal
from typing import Any, Dict

import pytest

from helpers import attribute_names_in, readable_expression
from python_dynamodb_lock._core.shared import SharedWatch, entry_of, entry_view, holders_of, is_shared, marker_of
from python_dynamodb_lock._model.schema import Schema
from python_dynamodb_lock._wire.shared_requests import JoinMode, entry, join, leave, mark_writer, renew_entry

SCHEMA = Schema('locks', 'lock_key', 'sort_key', 'expiry_time')


def shared_row(**holders: str) -> Dict[str, Any]:
    return {'lock_key': 'k', 'sort_key': '-', 'owner_name': 'x', 'record_version_number': 'row-1',
            'lease_duration': Decimal(10),
            'shared_holders': {holder: entry('owner-' + holder, version, 10) for holder, version in holders.items()}}


def test_a_row_is_shared_while_it_has_the_map_and_is_not_released() -> None:
    row = shared_row(a='v1')
    assert is_shared(row)
    assert not is_shared({**row, 'released_at': 1})
    assert not is_shared({'record_version_number': 'v'}) and not is_shared(None)
    assert holders_of(row)[0].owner_name == 'owner-a' and holders_of(row)[0].lease_duration == 10
    assert holders_of({**row, 'released_at': 1}) == ()


def test_a_holder_sees_the_row_through_its_entry() -> None:
    row = shared_row(a='v1', b='v2')
    assert entry_view(row, 'a')['record_version_number'] == 'v1'
    assert entry_view(row, 'gone') is row            # no entry: the row's own version, never ours
    assert entry_view(None, 'a') is None
    assert entry_of(row, 'b').record_version_number == 'v2'


def test_an_entry_is_dead_once_its_version_stayed_the_same_for_its_lease_on_the_observers_clock() -> None:
    watch = SharedWatch()
    judged = watch.judge(shared_row(a='v1', b='v1'), now=100.0, default_lease=30)
    assert judged.dead == {} and len(judged.live) == 2
    judged = watch.judge(shared_row(a='v1', b='v2'), now=109.9, default_lease=30)   # b renewed
    assert judged.dead == {}
    judged = watch.judge(shared_row(a='v1', b='v2'), now=110.0, default_lease=30)
    assert judged.dead == {'a': 'v1'} and [holder.holder_id for holder in judged.live] == ['b']
    judged = watch.judge(shared_row(a='v3', b='v2'), now=200.0, default_lease=30)    # a came back
    assert judged.dead == {'b': 'v2'}


def test_a_writer_marker_is_dead_after_its_lease_but_never_to_its_own_writer() -> None:
    row = {**shared_row(a='v1'), 'writer_waiting': {'id': 'w', 'owner': 'writer', 'version': 'm1', 'lease': 5}}
    assert marker_of(row).owner_name == 'writer'
    watch = SharedWatch()
    assert watch.judge(row, 0.0, 30).marker_live
    assert watch.judge(row, 5.0, 30).marker_dead
    own = SharedWatch()
    own.judge(row, 0.0, 30, own_marker='w')
    assert own.judge(row, 50.0, 30, own_marker='w').marker_live
    assert marker_of({**row, 'released_at': 1}) is not None       # a released row keeps it


@pytest.mark.parametrize('mode', [JoinMode.FREE, JoinMode.OVER, JoinMode.SHARED])
def test_every_name_and_value_of_a_join_is_used_and_a_writer_marker_blocks_it(mode: str) -> None:
    request = join(SCHEMA, 'k', '-', 'me', entry('me', 'v', 10), 'row-2', 99, mode, expected_version='row-1',
                   dead_holders={'old': 'v0'} if mode == JoinMode.SHARED else None, remove=['extra'])
    params = request.params
    text = params['UpdateExpression'] + ' ' + params['ConditionExpression']
    assert all(name in text for name in params['ExpressionAttributeNames'])
    assert all(value in text for value in params['ExpressionAttributeValues'])
    condition = readable_expression(params, 'ConditionExpression')
    assert 'attribute_not_exists(writer_waiting)' in condition
    assert params['ReturnValues'] == 'ALL_NEW'
    if mode == JoinMode.SHARED:
        assert 'size(shared_holders) < :max_holders' in condition
        assert 'shared_holders.old' in readable_expression(params)


def test_renewals_leaves_and_markers_are_conditioned_on_the_entry_or_the_marker() -> None:
    renewal = renew_entry(SCHEMA, 'k', '-', 'me', ['v1', 'v2'], 'v3', 'row-3', 99).params
    assert readable_expression(renewal, 'ConditionExpression') == (
        'shared_holders.me.version IN (:entry_version_0, :entry_version_1) AND attribute_not_exists(released_at)')
    assert 'record_version_number = :row_version' in readable_expression(renewal)
    beside = leave(SCHEMA, 'k', '-', 'me', ['v1'], 'row-4', False, 99, 1, True).params
    assert 'size(shared_holders) > :one' in readable_expression(beside, 'ConditionExpression')
    assert 'REMOVE shared_holders.me' in readable_expression(beside)
    last = leave(SCHEMA, 'k', '-', 'me', ['v1'], 'row-4', True, 99, 1, True).params
    assert 'size(shared_holders) = :one' in readable_expression(last, 'ConditionExpression')
    assert 'released_at' in attribute_names_in(last)
    deleted = leave(SCHEMA, 'k', '-', 'me', ['v1'], 'row-4', True, 99, 1, False)
    assert deleted.operation == 'delete_item' and 'UpdateExpression' not in deleted.params
    # A holder's id (any string) and the entry's fields go through ExpressionAttributeNames.
    assert set(deleted.params['ExpressionAttributeNames']) == {'#me', '#v'}
    marker = mark_writer(SCHEMA, 'k', '-', 'w', 'writer', 'm2', 10, 'm1', {'old': 'v0'}).params
    assert 'writer_waiting.id = :waiter OR writer_waiting.version = :dead_marker' \
        in readable_expression(marker, 'ConditionExpression')
