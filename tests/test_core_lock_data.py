"""The pure parts of data on a lock and per-lock leases, without an engine: the requests
(``renew`` with attributes, ``release_row`` with attributes), the checks of the arguments, how
an acquisition reads back what a release left, the per-lock safe period, and how
``update_attributes`` judges DynamoDB's answers (scripted, as in ``test_core_protocol``)."""
from __future__ import annotations

import datetime
from decimal import Decimal
from typing import Any, Dict

import pytest
from test_core_protocol import LOST_ANSWER, SCHEMA, SERVER_ERROR, FakeClock, FakeLock, drive, held_state, row, scripted

from helpers import readable_expression
from python_dynamodb_lock import DynamoDBLockError
from python_dynamodb_lock._common.config import (check_attribute_update, check_release_attributes, lock_lease,
                                          make_settings)
from python_dynamodb_lock._core.write import Written, with_token
from python_dynamodb_lock._core.answers import Applied, Refused
from python_dynamodb_lock._core.heartbeat import HeartbeatSettings, update_attributes
from python_dynamodb_lock._core.release import ReleaseSettings, free_handed
from python_dynamodb_lock._core.state import Status, lock_safe_period
from python_dynamodb_lock._wire.lock_writes import free_row, release_row
from python_dynamodb_lock._wire.renewals import Renewal, renew, renew_many

seconds = datetime.timedelta
SETTINGS = HeartbeatSettings(SCHEMA, 5.0, 20.0, 3600.0, -1, 1)


def expression_of(params: Dict[str, Any]) -> str:
    """The update expression with attribute names put back in, to read what it does."""
    return readable_expression(params)


# -- requests -------------------------------------------------------------------------------

def test_a_renewal_with_attributes_sets_and_removes_them_by_placeholder() -> None:
    renewal = Renewal('k', '-', ['v1'], 'v2', 1_700_003_600, Decimal('1700000030'),
                      (('progress', 40), ('select', 'x')), ('stage',))
    params = renew(SCHEMA, renewal).params
    assert expression_of(params) == ('SET record_version_number = :new_version, expiry_time = :new_expiry_time, '
                                     'lease_expiry = :new_lease_expiry, progress = :d0, select = :d1 REMOVE stage')
    assert params['ExpressionAttributeValues'][':d0'] == 40 and params['ExpressionAttributeValues'][':d1'] == 'x'
    # Names only through ExpressionAttributeNames ('select' is a reserved word of DynamoDB).
    assert 'select' not in params['UpdateExpression'] and 'stage' not in params['UpdateExpression']
    assert params['ConditionExpression'] == 'record_version_number = :expected_version_0'
    plain = renew(SCHEMA, renewal._replace(set_attributes=(), remove_attributes=())).params
    assert 'REMOVE' not in plain['UpdateExpression'] and ':d0' not in plain['ExpressionAttributeValues']


def test_a_renewal_with_attributes_never_goes_in_a_batch() -> None:
    renewal = Renewal('k', '-', ['v1'], 'v2', 1, None, (('a', 1),))
    with pytest.raises(ValueError, match='on its own'):
        renew_many(SCHEMA, [renewal])


def test_a_release_with_attributes_writes_them_and_removes_the_other_attributes() -> None:
    params = release_row(SCHEMA, 'k', '-', ['v1'], 'v-released', 1_700_003_600, 1_700_000_000,
                         remove={'progress', 'scratch'}, attributes={'progress': 100, 'result': 'ok'}).params
    expression = expression_of(params)
    assert 'progress = :d0' in expression and 'result = :d1' in expression
    assert expression.endswith('REMOVE acquisition_id, lease_expiry, shared_holders, lock_session, scratch')
    assert params['ExpressionAttributeValues'][':d0'] == 100
    assert params['ExpressionAttributeValues'][':d1'] == 'ok'


def test_a_release_that_deletes_the_row_cannot_write_attributes() -> None:
    with pytest.raises(ValueError, match='deletes the row'):
        free_row(SCHEMA, 'k', '-', ['v1'], 'v2', 1, 1, (), False, {'result': 'ok'})
    assert free_row(SCHEMA, 'k', '-', ['v1'], 'v2', 1, 1, (), False).operation == 'delete_item'


def test_an_acquisition_reads_back_what_a_release_left_on_the_row() -> None:
    item = {'lock_key': 'k', 'sort_key': '-', 'owner_name': 'me', 'record_version_number': 'v', 'progress': 0}
    whole_row = {**item, 'progress': 100, 'result': 'ok', 'fencing_token': Decimal(7)}
    merged = with_token(item, whole_row)
    assert merged == {**item, 'result': 'ok', 'fencing_token': 7}          # our own value of 'progress' wins
    assert with_token(item, None) == item


def test_a_handed_over_row_nobody_took_is_freed_keeping_what_the_release_left() -> None:
    """A release handed the lock to a waiter of its client that had stopped waiting: the row is
    freed, and the attributes the release left stay on it."""
    handed = Written({**row('v-handed', 'me'), 'result': 'ok', 'mine': 2}, 1000.0)
    run = drive(free_handed(ReleaseSettings(SCHEMA, 3600.0), ('k', '-'), handed, FakeClock(), {'result': 'ok'}),
                scripted(Applied()))
    expression = expression_of(run.calls[0].params)
    assert 'result = :d0' in expression
    assert expression.endswith('REMOVE acquisition_id, lease_expiry, shared_holders, lock_session, mine')


# -- checks -----------------------------------------------------------------------------------

def test_an_attribute_update_is_checked_and_put_in_a_stable_order() -> None:
    assert check_attribute_update(SCHEMA, {'b': 1, 'a': 2}, {'d', 'c'}) == ((('a', 2), ('b', 1)), ('c', 'd'))
    assert check_attribute_update(SCHEMA, None, ['x']) == ((), ('x',))
    assert check_attribute_update(SCHEMA, {'x': 1}, None) == ((('x', 1),), ())
    with pytest.raises(ValueError, match="'a' is both set"):
        check_attribute_update(SCHEMA, {'a': 1}, ('a',))
    with pytest.raises(ValueError, match="lock's own attributes"):
        check_attribute_update(SCHEMA, None, ('lock_key',))
    with pytest.raises(TypeError, match='remove must be'):
        check_attribute_update(SCHEMA, None, 'abc')
    with pytest.raises(TypeError, match='remove must be'):
        check_attribute_update(SCHEMA, None, 5)


def test_release_attributes_need_a_kept_row() -> None:
    assert check_release_attributes(SCHEMA, None, False) == {}
    assert check_release_attributes(SCHEMA, {}, False) == {}
    assert check_release_attributes(SCHEMA, {'r': 1}, True) == {'r': 1}
    with pytest.raises(ValueError, match='deletes the row'):
        check_release_attributes(SCHEMA, {'r': 1}, False)
    with pytest.raises(ValueError, match='attributes may not set'):
        check_release_attributes(SCHEMA, {'fencing_token': 1}, True)


def test_a_lock_lease_defaults_to_the_clients_and_is_checked_as_the_clients() -> None:
    settings = make_settings(
        low_level_client=None, table_name='t', partition_key_name='lock_key', sort_key_name='sort_key',
        ttl_attribute_name='expiry_time', owner_name='me', heartbeat_period=seconds(seconds=5),
        safe_period=seconds(seconds=20), lease_duration=seconds(seconds=30), expiry_period=seconds(hours=1),
        heartbeat_tps=-1, heartbeat_workers=1, heartbeat_batch_size=1)
    assert lock_lease(settings, None) == 30.0
    assert lock_lease(settings, seconds(minutes=5)) == 300.0
    with pytest.raises(ValueError, match='must be shorter than lease_duration'):
        lock_lease(settings, seconds(seconds=5))
    with pytest.raises(ValueError, match='expiry_period'):
        lock_lease(settings, seconds(hours=2))
    with pytest.raises(TypeError):
        lock_lease(settings, 30)


# -- the per-lock safe period -----------------------------------------------------------------

@pytest.mark.parametrize('lease, safe', [(30, 20), (60, 40), (6, 4), (300, 200)])
def test_the_safe_period_is_the_clients_fraction_of_the_locks_lease(lease: float, safe: float) -> None:
    assert lock_safe_period(20.0, 30.0, lease) == pytest.approx(safe)
    assert lock_safe_period(20.0, 30.0, lease) < lease


def test_a_lock_in_danger_is_judged_by_its_own_safe_period() -> None:
    state = held_state(confirmed_ago=30.0)
    state.lease_duration, state.safe_period = 60.0, 40.0
    assert state.status_at(1000.0, state.safe_period) == Status.LOCKED
    assert state.status_at(1011.0, state.safe_period) == Status.IN_DANGER


# -- update_attributes' answers ---------------------------------------------------------------

UPDATE = ((('progress', 40),), ('stage',))


def run_update(*answers: Any, unconfirmed: Any = ()) -> Any:
    state = held_state(unconfirmed=unconfirmed)
    lock = FakeLock(state, additional_attributes={'stage': 'a', 'keep': 1})
    clock = FakeClock()
    return lock, state, drive(update_attributes(SETTINGS, lock, clock, UPDATE), scripted(*answers), clock=clock)


def test_an_applied_update_changes_the_locks_attributes_and_version() -> None:
    lock, state, run = run_update(Applied())
    assert run.error is None and len(run.calls) == 1
    assert lock.additional_attributes == {'keep': 1, 'progress': 40}
    assert state.version == run.calls[0].params['ExpressionAttributeValues'][':new_version']


def test_an_update_that_met_its_own_write_landed() -> None:
    def own_row(request: Any) -> Refused:
        return Refused(row(request.params['ExpressionAttributeValues'][':new_version'], 'me'))

    lock, state, run = run_update(own_row)
    assert run.error is None and lock.additional_attributes == {'keep': 1, 'progress': 40}


def test_an_update_refused_by_an_earlier_renewal_of_ours_is_sent_again_with_it() -> None:
    lock, state, run = run_update(Refused(row('v-earlier', 'me')), Applied(), unconfirmed=['v-earlier'])
    assert run.error is None and len(run.calls) == 2
    assert 'v-earlier' in run.calls[1].params['ExpressionAttributeValues'].values()
    assert lock.additional_attributes == {'keep': 1, 'progress': 40}


@pytest.mark.parametrize('answer', [SERVER_ERROR, LOST_ANSWER], ids=['server-error', 'lost-answer'])
def test_a_failed_update_leaves_the_attributes_alone(answer: Any) -> None:
    lock, state, run = run_update(answer)
    assert isinstance(run.error, DynamoDBLockError) and run.error.code == DynamoDBLockError.UNKNOWN
    assert lock.additional_attributes == {'stage': 'a', 'keep': 1} and state.held


def test_an_update_refused_by_a_foreign_row_loses_the_lock() -> None:
    lock, state, run = run_update(Refused(row('v-thief', 'thief')))
    assert isinstance(run.error, DynamoDBLockError) and run.error.code == DynamoDBLockError.LOCK_STOLEN
    assert state.status == Status.INVALID and run.unregistered == [lock]
    assert lock.additional_attributes == {'stage': 'a', 'keep': 1}
