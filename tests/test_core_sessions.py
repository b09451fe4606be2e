"""The rules of client sessions (``_core/session.py``), with scripted answers and no engine:
what a session renewal's answer does to the locks under it, what a waiter concludes from the
session row, and what the requests write. docs/sessions.rst describes them; the behaviour on
DynamoDB Local is in test_sessions.py.
"""
from __future__ import annotations

from typing import Any, Optional

from test_core_protocol import LOST_ANSWER, SERVER_ERROR, FakeClock, client_error, drive, scripted

from helpers import readable_expression
from python_dynamodb_lock._core.acquire import Observations
from python_dynamodb_lock._core.answers import Applied, Refused, judge_error
from python_dynamodb_lock._core.events import Kind
from python_dynamodb_lock._core.session import (Session, SessionSettings, due_for_refresh, ensure_session,
                                                session_round, watch_session)
from python_dynamodb_lock._core.state import LockState, RenewalVerdict, Status, how_lost
from python_dynamodb_lock._model.errors import Reason
from python_dynamodb_lock._wire.lock_writes import acquire_free, release_row
from python_dynamodb_lock._model.schema import Schema

SCHEMA = Schema('locks', 'lock_key', 'sort_key', 'expiry_time')
SETTINGS = SessionSettings(SCHEMA, 'me', lease=30.0, row_lease=3600.0, expiry_period=3600.0)


class FakeLock:
    def __init__(self, name: str, session: Optional[Session], clock: FakeClock) -> None:
        self.unique_identifier = f'{name}|-'
        self._state = LockState('v-' + name, 0, clock.monotonic(), 3600.0)
        self._state.acquired(clock.monotonic(), 1, 'a-' + name)
        if session is not None:
            assert session.confirmed_at is not None
            self._state.bind_session(session.id, 30.0, session.confirmed_at)


def started_session(clock: FakeClock) -> Session:
    session = Session('me')
    run = drive(ensure_session(SETTINGS, session, clock), scripted(Applied({})))
    assert run.error is None and session.expected() and Kind.SESSION_STARTED in run.events
    return session


def session_row(session_id: str, version: str, released: bool = False) -> Any:
    row = {'lock_key': session_id, 'sort_key': '-', 'owner_name': 'me', 'record_version_number': version,
           'lease_duration': '30.0'}
    if released:
        row['released_at'] = '1'
    return row


def test_a_confirmed_session_renewal_confirms_every_lock_under_it() -> None:
    clock = FakeClock()
    session = started_session(clock)
    locks = [FakeLock(f'k{index}', session, clock) for index in range(3)]
    clock.now += 20
    for lock in locks:
        assert lock._state.mark_in_danger(clock.now, 15.0) is not None
    run = drive(session_round(SETTINGS, session, locks, clock), scripted(Applied({})))
    assert len(run.calls) == 1 and run.calls[0].operation == 'update_item'      # one write for all
    assert all(lock._state.status == Status.LOCKED for lock in locks)
    assert all(lock._state.lease_remaining(clock.now) == 30.0 for lock in locks)
    assert run.events.count(Kind.RECOVERED) == 3


def test_a_refused_session_renewal_loses_every_lock_under_it_and_starts_afresh() -> None:
    clock = FakeClock()
    session = started_session(clock)
    old_id = session.id
    locks = [FakeLock(f'k{index}', session, clock) for index in range(3)]
    unrelated = FakeLock('plain', None, clock)
    ended = session_row(old_id, 'taken', released=True)
    refused = judge_error(client_error('ConditionalCheckFailedException', 400, item=ended))
    run = drive(session_round(SETTINGS, session, [*locks, unrelated], clock), scripted(refused))
    assert all(lock._state.status == Status.INVALID for lock in locks)
    assert {lock._state.loss.reason for lock in locks if lock._state.loss} == {Reason.SESSION_LOST}
    assert run.unregistered == locks and run.events.count(Kind.STOLEN) == 3 and Kind.SESSION_LOST in run.events
    assert unrelated._state.status == Status.LOCKED
    assert session.id != old_id and not session.expected()     # the next acquisition writes a new row


def test_a_refused_renewal_that_meets_our_own_lost_renewal_keeps_the_locks() -> None:
    clock = FakeClock()
    session = started_session(clock)
    lock = FakeLock('k', session, clock)
    first = drive(session_round(SETTINGS, session, [lock], clock), scripted(LOST_ANSWER))
    assert Kind.SESSION_RENEWAL_FAILED in first.events
    landed = first.calls[0].params['ExpressionAttributeValues'][':new_version']
    refused = Refused(session_row(session.id, landed))
    run = drive(session_round(SETTINGS, session, [lock], clock), scripted(refused, Applied()))
    assert lock._state.status == Status.LOCKED and run.unregistered == []
    again = run.calls[1].params['ExpressionAttributeValues']     # sent again, from the version found
    assert [value for name, value in again.items() if name.startswith(':expected')] == [landed]
    assert session.expected() == [again[':new_version']]


def test_a_failed_session_renewal_changes_nothing() -> None:
    clock = FakeClock()
    session = started_session(clock)
    lock = FakeLock('k', session, clock)
    run = drive(session_round(SETTINGS, session, [lock], clock), scripted(SERVER_ERROR))
    assert lock._state.status == Status.LOCKED and run.unregistered == []
    assert Kind.SESSION_RENEWAL_FAILED in run.events


def test_a_session_row_already_there_is_adopted_unless_ended() -> None:
    clock = FakeClock()
    session = Session('me')
    ours = Refused(session_row(session.id, 'landed-earlier'))
    assert drive(ensure_session(SETTINGS, session, clock), scripted(ours)).error is None
    assert session.expected() == ['landed-earlier']
    again = Session('me')
    run = drive(ensure_session(SETTINGS, again, clock), scripted(Refused(session_row(again.id, 'x', released=True))))
    assert run.error is not None and not again.expected()


def test_a_waiter_takes_over_once_the_session_version_stayed_for_its_lease() -> None:
    clock = FakeClock()
    seen = Observations()
    session_id = 'python_dynamodb_lock/session/holder/1'
    alive = scripted(*[Applied({'Item': session_row(session_id, 'v1')})] * 3)
    assert drive(watch_session(SCHEMA, session_id, seen, clock, 30.0), alive).result.expired_version is None
    clock.now += 29.9
    assert drive(watch_session(SCHEMA, session_id, seen, clock, 30.0), alive).result.expired_version is None
    clock.now += 0.1
    assert drive(watch_session(SCHEMA, session_id, seen, clock, 30.0), alive).result.expired_version == 'v1'
    renewed = scripted(Applied({'Item': session_row(session_id, 'v2')}))
    assert drive(watch_session(SCHEMA, session_id, seen, clock, 30.0), renewed).result.expired_version is None


def test_a_session_gone_or_ended_frees_its_locks_at_once() -> None:
    clock = FakeClock()
    for answer in (Applied({}), Applied({'Item': session_row('s', 'v', released=True)})):
        watch = drive(watch_session(SCHEMA, 's', Observations(), clock, 30.0), scripted(answer)).result
        assert watch.over


def test_lock_rows_get_their_slow_refresh_every_third_of_the_row_lease() -> None:
    clock = FakeClock()
    session = started_session(clock)
    under, plain = FakeLock('under', session, clock), FakeLock('plain', None, clock)
    assert due_for_refresh(SETTINGS, [under, plain], clock.now + 1199) == [plain]
    assert due_for_refresh(SETTINGS, [under, plain], clock.now + 1200) == [under, plain]


def test_writes_that_name_no_session_remove_the_name() -> None:
    item = SCHEMA.lock_item('k', '-', 'me', 30.0, 'v', 0)
    acquiring = acquire_free(SCHEMA, item, 1).params
    assert 'lock_session' in readable_expression(acquiring).split(' REMOVE ')[1]
    releasing = release_row(SCHEMA, 'k', '-', ['v'], 'w', 0, 0).params
    assert 'lock_session' in readable_expression(releasing).split(' REMOVE ')[1]
    named = readable_expression(acquire_free(SCHEMA, {**item, 'lock_session': 's'}, 1).params)
    assert named.count('lock_session') == 1 and 'lock_session = :' in named      # written, not removed


# --------------------------------------------------------------------------------------------
# LockState (_core/state.py): what a holder knows of its lease and row
# --------------------------------------------------------------------------------------------

def _held(now: float = 1000.0, confirmed_ago: float = 5.0, lease: float = 30.0) -> LockState:
    state = LockState('v-current', 1_700_003_600, now - confirmed_ago, lease)
    state.status = Status.LOCKED
    return state


def test_a_lock_no_longer_held_has_no_lease_left() -> None:
    state = _held()
    assert state.lease_remaining(1000.0) == 25.0
    state.forget(Status.RELEASED)
    assert state.lease_remaining(1000.0) == 0.0


def test_the_lease_runs_strictly_less_than_its_duration_after_the_last_confirmed_write() -> None:
    state = _held(confirmed_ago=0.0)
    assert state.lease_running(1029.9) and not state.lease_running(1030.0)


def test_a_session_renewal_confirmed_after_the_lock_ended_changes_nothing() -> None:
    state = _held()
    state.forget(Status.RELEASED)
    assert state.session_confirmed(1000.0) is False
    assert state.status == Status.RELEASED and state.last_confirmed == 995.0


def test_a_row_refresh_in_flight_is_not_planned_again_in_the_next_period() -> None:
    state = _held(confirmed_ago=0.0)          # the row was confirmed at 1000
    assert not state.plan_row_refresh(1059.0, 60.0)
    assert state.plan_row_refresh(1060.0, 60.0)       # due: planned from 1060
    assert state.row_refresh_planned == 1060.0
    # its answer not settled yet: 70 s after the row's last confirmation, but planned 10 s ago
    assert not state.plan_row_refresh(1070.0, 60.0)
    assert not state.plan_row_refresh(1119.0, 60.0)
    assert state.plan_row_refresh(1120.0, 60.0)       # a period after it was planned: planned again


def test_a_guard_refused_after_our_release_that_may_have_landed_is_a_release_not_a_loss() -> None:
    stolen = {'lock_key': 'k', 'sort_key': '-', 'owner_name': 'thief', 'record_version_number': 'v-thief'}
    # our release may have landed: a row holding no lock, or any row found within our lease, is ours released
    state = _held(confirmed_ago=5.0)
    state.note_release_maybe_applied()
    assert state.settle_guard_refused(None, 1000.0) == Status.RELEASED and state.loss is None
    state = _held(confirmed_ago=5.0)
    state.note_release_maybe_applied()
    assert state.settle_guard_refused(stolen, 1000.0) == Status.RELEASED
    # past our lease, a foreign row is a takeover, named in the loss
    state = _held(confirmed_ago=40.0)
    state.note_release_maybe_applied()
    assert state.settle_guard_refused(stolen, 1000.0) == Status.INVALID
    assert state.loss is not None and state.loss.reason == Reason.TAKEN_OVER and state.loss.row == stolen
    # with no release of ours in flight, even a row holding no lock is a loss
    state = _held(confirmed_ago=40.0)
    state.note_release_maybe_applied()
    assert state.settle_guard_refused(None, 1000.0) == Status.RELEASED


def test_acquiring_again_a_key_still_held_tells_a_landed_release_from_a_lost_lock() -> None:
    state = _held()
    state.note_release_maybe_applied()
    assert state.replaced_by_new_acquisition() == Status.RELEASED and state.loss is None
    state = _held()
    state.remember_unconfirmed('v-maybe')
    assert state.replaced_by_new_acquisition() == Status.INVALID
    assert state.loss is not None and (state.loss.reason, state.loss.row) == (Reason.ROW_GONE, None)
    assert state.unconfirmed == []
    assert state.replaced_by_new_acquisition() is None        # no longer held: nothing changes


def test_a_lock_turns_in_danger_only_past_its_safe_period() -> None:
    state = _held(confirmed_ago=0.0)
    assert state.status_at(1020.0, 20.0) == Status.LOCKED
    assert state.status_at(1020.5, 20.0) == Status.IN_DANGER


def test_a_renewal_carries_the_new_ttl_and_lease_end_and_accepts_an_unconfirmed_version() -> None:
    state = _held()
    state.remember_unconfirmed('v-maybe')
    renewal = state.next_renewal('v-new', 1_700_007_200, 'k', '-', 1_700_000_030)
    assert renewal is not None
    assert (renewal.new_version, renewal.new_expiry_time, renewal.new_lease_expiry) == ('v-new', 1_700_007_200,
                                                                                         1_700_000_030)
    assert list(renewal.expected_versions) == ['v-current', 'v-maybe']


def test_a_row_refresh_that_failed_is_due_again_and_one_for_a_lock_no_longer_held_says_so() -> None:
    state = _held(confirmed_ago=0.0)
    assert state.plan_row_refresh(1060.0, 60.0)
    renewal = state.next_renewal('v-new', 1_700_007_200, 'k', '-')
    assert renewal is not None
    state.settle_renewal(renewal, SERVER_ERROR, 1060.0, 1061.0)
    assert state.plan_row_refresh(1061.0, 60.0)            # not confirmed: planned again at once
    state.forget(Status.RELEASED)
    assert state.settle_renewal(renewal, Applied(), 1062.0, 1062.0).verdict == RenewalVerdict.NOT_HELD
    assert state.status == Status.RELEASED


def test_how_a_lock_was_lost_is_told_in_words() -> None:
    assert str(how_lost(None)).startswith('its row was deleted by someone else (a force release, a TTL expiry')
    released = {'lock_key': 'k', 'sort_key': '-', 'record_version_number': 'v', 'released_at': 1}
    assert str(how_lost(released)).startswith("force-released by someone else (an operator's force_release_lock")
    assert str(how_lost(released)).endswith('--force`): its row was marked released')
    item = {'lock_key': 'k', 'sort_key': '-', 'data': 'x'}
    assert how_lost(item) == 'force-released by someone else: the lock attributes of its item were removed'
    assert how_lost({'lock_key': 'k', 'sort_key': '-', 'record_version_number': 'v-thief', 'owner_name': 't'}) is None
