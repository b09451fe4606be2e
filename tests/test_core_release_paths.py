"""Releasing, path by path (python_dynamodb_lock/_core/release.py), driven against moto
in-process on a manual clock (the drivers of test_core_shared_steps.py), or with scripted
answers where a failure must be staged.

What a user relies on: a shared holder's release takes only its own entry off the row (the last
one frees the row, kept or deleted as the client keeps released rows), a reader whose entry was
taken over is told who holds the key; an exclusive release leaves a row published clients can
take (lease 0, a new version, the TTL and ``released_at`` of now, the lock's data gone and the
release's attributes written), ``keep_row`` overrides the client's setting both ways; a release
finished in the background retries at growing intervals for one lease and makes one last try
when the client closes. (A release that hands the lock over: test_core_a_release_handover.py.)
"""
from __future__ import annotations

import dataclasses
import uuid
from typing import Any, Dict, Iterator, List, Optional

import pytest

from python_dynamodb_lock._core.answers import Applied, Refused
from python_dynamodb_lock._core.release import (
    ReleaseOutcome,
    ReleaseSettings,
    on_item,
    release,
    precheck_release,
    release_again,
    release_verdict,
)
from python_dynamodb_lock._core.state import LockState, Status
from python_dynamodb_lock._model.errors import DynamoDBLockError, Reason
from python_dynamodb_lock.testing import moto_lock_table
from test_core_requests_shapes import fresh_request_shapes  # noqa: F401 - autouse: shapes built afresh
from test_core_protocol import LOST_ANSWER, SERVER_ERROR, THROTTLED, FakeClock, drive, scripted
from test_core_shared_steps import EXPIRY, LEASE, Engine, holders, run, take

@pytest.fixture(scope='module')
def table() -> Iterator[Any]:
    with moto_lock_table() as made:
        yield made


@pytest.fixture
def engine(table: Any) -> Engine:
    for key in ('k', 'other'):
        table.delete_row(key)
    return Engine(table)


@dataclasses.dataclass
class Lock:
    """What the release protocols read of a lock object."""

    _state: LockState
    shared: bool = False
    partition_key: str = 'k'
    sort_key: str = '-'
    unique_identifier: str = 'k|-'
    additional_attributes: Dict[str, Any] = dataclasses.field(default_factory=dict)
    lock_existing_item: bool = False


def held(item: Dict[str, Any], clock: FakeClock, shared: bool = False, **options: Any) -> Lock:
    """The lock object of an acquisition whose row (or shared entry) is ``item``."""
    state = LockState(item['record_version_number'], 0, clock.monotonic(), LEASE)
    state.acquired(clock.monotonic(), None, item['acquisition_id'])
    return Lock(state, shared, **options)


def settings(keep: bool = True) -> ReleaseSettings:
    return ReleaseSettings(_SCHEMA[0], EXPIRY, keep)


_SCHEMA: List[Any] = []


@pytest.fixture(autouse=True)
def _schema(engine: Engine) -> None:
    _SCHEMA[:] = [engine.schema]


# -- a shared holder's release ---------------------------------------------------------------------

def test_a_readers_release_takes_only_its_own_entry_and_the_last_one_frees_the_row(engine: Engine) -> None:
    clock = FakeClock()
    first = take(engine, clock, 'k', 'reader-1').result.item
    second = take(engine, clock, 'k', 'reader-2').result.item
    one = held(first, clock, shared=True)
    result = run(release(settings(), one, clock), engine, clock).result
    assert result.outcome is ReleaseOutcome.RELEASED and result.handed is None
    assert holders(engine.row('k')) == {'reader-2': second['record_version_number']}
    clock.now += 1
    two = held(second, clock, shared=True)
    assert run(release(settings(), two, clock), engine, clock).result.outcome is ReleaseOutcome.RELEASED
    row = engine.row('k')
    assert 'shared_holders' not in row and row['released_at'] == int(clock.time())
    assert row['lease_duration'] == 0 and row['expiry_time'] == int(clock.time() + EXPIRY)


def test_the_last_reader_of_a_client_keeping_no_released_rows_deletes_the_row(engine: Engine) -> None:
    clock = FakeClock()
    only = held(take(engine, clock, 'k', 'reader').result.item, clock, shared=True)
    assert run(release(settings(keep=False), only, clock), engine, clock).result.outcome is ReleaseOutcome.RELEASED
    assert engine.row('k') is None


def test_a_reader_whose_entry_was_taken_over_is_told_who_holds_the_key(engine: Engine) -> None:
    clock = FakeClock()
    reader = held(take(engine, clock, 'k', 'reader').result.item, clock, shared=True)
    clock.now += LEASE + 1     # the reader stopped renewing: a writer takes its entry over
    taken = take(engine, clock, 'k', 'writer', shared=False, retry_timeout=2 * LEASE)
    assert engine.row('k')['owner_name'] == 'writer', taken
    result = run(release(settings(), reader, clock), engine, clock).result
    assert result.outcome is ReleaseOutcome.STOLEN and result.row['owner_name'] == 'writer'
    verdict = release_verdict(result, False, engine.schema, 'k|-')
    skipped = precheck_release(reader._state, True, False, 'k|-', 'reader')
    assert skipped is None          # still held, as far as the reader knew
    assert verdict.final_status == Status.INVALID and verdict.error.code == DynamoDBLockError.LOCK_STOLEN
    assert verdict.error.message == 'k|- was taken over by writer before it was released; their row was left alone'
    assert verdict.error.holder['owner_name'] == 'writer' and verdict.error.reason == Reason.TAKEN_OVER
    assert engine.row('k')['owner_name'] == 'writer'     # their row was left alone


def test_a_readers_release_finished_in_the_background_takes_its_entry_off(engine: Engine) -> None:
    clock = FakeClock()
    first = take(engine, clock, 'k', 'reader-1').result.item
    second = take(engine, clock, 'k', 'reader-2').result.item
    one = held(first, clock, shared=True)
    run(release_again(settings(), one, [first['record_version_number']], clock, LEASE), engine, clock)
    assert holders(engine.row('k')) == {'reader-2': second['record_version_number']}


# -- an exclusive release ------------------------------------------------------------------------

def test_a_release_leaves_a_released_row_with_the_releases_attributes_and_without_the_locks_data(
        engine: Engine) -> None:
    clock = FakeClock()
    item = take(engine, clock, 'k', 'me', shared=False, attributes={'purpose': 'p'}).result.item
    token = engine.row('k')['fencing_token']
    clock.now += 2.5
    lock = held(item, clock, additional_attributes={'purpose': 'p'})
    result = run(release(settings(), lock, clock, attributes={'result': 'done'}), engine, clock).result
    assert result.outcome is ReleaseOutcome.RELEASED
    row = engine.row('k')
    assert row['owner_name'] == 'me' and row['fencing_token'] == token        # kept for the next holder
    assert row['lease_duration'] == 0 and row['released_at'] == int(clock.time())
    assert row['expiry_time'] == int(clock.time() + EXPIRY)
    assert row['record_version_number'] not in (item['record_version_number'], '', 'None')
    assert row['result'] == 'done' and 'purpose' not in row and 'acquisition_id' not in row


@pytest.mark.parametrize('client_keeps, keep_row, kept', [
    (True, None, True), (False, None, False), (True, False, False), (False, True, True),
])
def test_keep_row_overrides_the_clients_setting_both_ways(engine: Engine, client_keeps: bool,
                                                          keep_row: Optional[bool], kept: bool) -> None:
    clock = FakeClock()
    lock = held(take(engine, clock, 'k', 'me', shared=False).result.item, clock)
    result = run(release(settings(client_keeps), lock, clock, keep_row=keep_row), engine, clock).result
    assert result.outcome is ReleaseOutcome.RELEASED
    assert (engine.row('k') is not None) is kept


def test_a_release_refused_by_an_old_renewal_of_ours_is_sent_again_with_that_version(engine: Engine) -> None:
    clock = FakeClock()
    item = take(engine, clock, 'k', 'me', shared=False).result.item
    lock = held(item, clock)
    for index in range(25):      # renewals whose answers were lost; only the newest 20 are named
        lock._state.remember_unconfirmed(f'u{index}')
    engine.store.send(_renew_to(engine, item['record_version_number'], 'u2'))
    engine.sent.clear()
    result = run(release(settings(), lock, clock), engine, clock).result
    assert result.outcome is ReleaseOutcome.RELEASED and len(engine.sent) == 2
    assert engine.row('k')['released_at'] == int(clock.time())


def _renew_to(engine: Engine, old: str, new: str) -> Any:
    from python_dynamodb_lock._wire.renewals import Renewal, renew
    return renew(engine.schema, Renewal('k', '-', [old], new, 1))


def test_a_readers_release_that_landed_and_whose_retry_was_refused_is_a_release(engine: Engine) -> None:
    """botocore sent the leave again after it landed: the refusal (the other reader's row, no
    entry of ours) comes from our own first send, not from someone who took our entry."""
    clock = FakeClock()
    first = take(engine, clock, 'k', 'reader-1').result.item
    take(engine, clock, 'k', 'reader-2')

    def landed_then_refused_on_retry(store: Any, request: Any) -> Any:
        assert isinstance(store.send(request), Applied)
        return Refused(engine.row('k'), retried=True)
    engine.faults = [landed_then_refused_on_retry]
    result = run(release(settings(), held(first, clock, shared=True), clock), engine, clock).result
    assert result.outcome is ReleaseOutcome.MET_NEXT_HOLDER
    assert release_verdict(result, False, engine.schema, 'k|-').error is None
    assert set(holders(engine.row('k'))) == {'reader-2'}


def test_a_release_meeting_the_next_holder_after_a_lost_answer_within_the_lease_freed_it(engine: Engine) -> None:
    clock = FakeClock()
    lock = held(take(engine, clock, 'k', 'me', shared=False).result.item, clock)
    lock._state.note_release_maybe_applied()        # an earlier attempt's answer was lost
    engine.store.send(_renew_to(engine, lock._state.version, 'v-next'))
    result = run(release(settings(), lock, clock), engine, clock).result
    assert result.outcome is ReleaseOutcome.MET_NEXT_HOLDER
    assert result.row['record_version_number'] == 'v-next'      # the row met, for the log
    clock.now += LEASE          # past our lease, the same row is a theft
    assert run(release(settings(), lock, clock), engine, clock).result.outcome is ReleaseOutcome.STOLEN


# -- answers staged ------------------------------------------------------------------------------

def scripted_release(*answers: Any, state: Optional[LockState] = None, clock: Optional[FakeClock] = None) -> Any:
    clock = clock or FakeClock()
    state = state or _state(clock)
    lock = Lock(state, additional_attributes={'purpose': 'x'})
    return drive(release(ReleaseSettings(_SCHEMA[0], EXPIRY), lock, clock), scripted(*answers), clock=clock)


def _state(clock: FakeClock, confirmed_ago: float = 1.0) -> LockState:
    state = LockState('v-current', 1, clock.monotonic() - confirmed_ago, LEASE)
    state.acquired(clock.monotonic() - confirmed_ago, None, 'acq')
    return state


def _row(version: str, owner: str = 'someone', **extra: Any) -> Dict[str, Any]:
    return {'lock_key': 'k', 'sort_key': '-', 'owner_name': owner, 'record_version_number': version,
            'lease_duration': LEASE, 'expiry_time': 1, **extra}


def test_a_refusal_by_an_unconfirmed_renewal_of_ours_is_sent_once_more_naming_only_it() -> None:
    clock = FakeClock()
    state = _state(clock)
    state.remember_unconfirmed('u1')
    done = scripted_release(Refused(_row('u1', 'me')), Applied(), state=state, clock=clock)
    first, second = done.calls
    assert first.params['ExpressionAttributeValues'][':expected_version_1'] == 'u1'
    values = second.params['ExpressionAttributeValues']
    assert [value for name, value in values.items() if name.startswith(':expected')] == ['u1']
    assert done.result.outcome is ReleaseOutcome.RELEASED


def test_a_refusal_by_a_foreign_row_is_not_sent_again() -> None:
    done = scripted_release(Refused(_row('v-thief', 'thief')))
    assert len(done.calls) == 1 and done.result.outcome is ReleaseOutcome.STOLEN
    assert done.result.row['owner_name'] == 'thief'


def test_a_write_that_surely_failed_is_a_failure_without_a_read() -> None:
    done = scripted_release(THROTTLED)
    assert done.result.outcome is ReleaseOutcome.FAILED and done.result.failed is THROTTLED
    assert [call.operation for call in done.calls] == ['update_item']


@pytest.mark.parametrize('read, outcome, failed', [
    pytest.param(lambda ours: Applied({'Item': _row(ours, 'me', released_at=1)}), ReleaseOutcome.RELEASED, None,
                 id='our-released-row'),
    pytest.param(lambda ours: Applied({'Item': _row('v-current', 'me')}), ReleaseOutcome.FAILED, LOST_ANSWER,
                 id='our-held-row-still-there'),
    pytest.param(lambda ours: Applied({'Item': _row('u1', 'me')}), ReleaseOutcome.FAILED, LOST_ANSWER,
                 id='our-unconfirmed-row-still-there'),
    pytest.param(lambda ours: Applied({'Item': _row('v-next', 'next')}), ReleaseOutcome.RELEASED, None,
                 id='next-holder-within-lease'),
    pytest.param(lambda ours: Applied({'Item': {}}), ReleaseOutcome.RELEASED, None, id='empty-item'),
    pytest.param(lambda ours: Applied({'Item': _row('v-op', 'op', released_at=1)}), ReleaseOutcome.RELEASED, None,
                 id='released-by-another'),
    pytest.param(lambda ours: SERVER_ERROR, ReleaseOutcome.FAILED, SERVER_ERROR, id='read-failed'),
])
def test_a_lost_answer_is_judged_by_a_consistent_read(read: Any, outcome: ReleaseOutcome, failed: Any) -> None:
    clock = FakeClock()
    state = _state(clock)
    state.remember_unconfirmed('u1')
    ours: List[str] = []

    def write(request: Any) -> Any:
        ours.append(request.params['ExpressionAttributeValues'][':new_version'])
        return LOST_ANSWER

    done = scripted_release(write, lambda request: read(ours[0]), state=state, clock=clock)
    assert done.result.outcome is outcome and done.result.failed is failed
    assert [call.operation for call in done.calls] == ['update_item', 'get_item']
    assert done.calls[1].params['ConsistentRead'] is True and done.calls[1].params['Key'] == {
        'lock_key': 'k', 'sort_key': '-'}
    assert state.release_maybe_applied       # a later heartbeat must not take the row found for a theft


def test_a_read_that_fails_reports_the_reads_failure_and_a_lost_write_reports_its_own() -> None:
    clock = FakeClock()
    failed_read = scripted_release(LOST_ANSWER, SERVER_ERROR, clock=clock)
    assert failed_read.result.failed is SERVER_ERROR
    still_ours = scripted_release(LOST_ANSWER, Applied({'Item': _row('v-current', 'me')}), clock=FakeClock())
    assert still_ours.result.failed is LOST_ANSWER


def test_a_foreign_row_read_after_a_lost_answer_past_the_lease_is_stolen_with_that_row() -> None:
    clock = FakeClock()
    state = _state(clock, confirmed_ago=LEASE + 1)
    done = scripted_release(LOST_ANSWER, Applied({'Item': _row('v-thief', 'thief')}), state=state, clock=clock)
    assert done.result.outcome is ReleaseOutcome.STOLEN and done.result.row['owner_name'] == 'thief'


# -- finishing a release in the background ---------------------------------------------------------

def background(answers: List[Any], lease: float, closing: bool = False, **options: Any) -> Any:
    clock = FakeClock()
    lock = Lock(_state(clock), **options)
    return drive(release_again(ReleaseSettings(_SCHEMA[0], EXPIRY), lock, ['v1', 'u1'], clock, lease),
                 scripted(*answers), woken=closing, clock=clock)


def test_a_background_release_retries_at_growing_intervals_until_an_answer_comes() -> None:
    done = background([SERVER_ERROR, THROTTLED, SERVER_ERROR, Refused(None)], 100.0)
    assert done.sleeps == [0.25, 0.5, 1.0] and len(done.calls) == 4


def test_a_background_release_waits_at_most_five_seconds_between_tries_and_stops_after_one_lease() -> None:
    done = background([SERVER_ERROR] * 100, 30.0)
    assert done.sleeps[:7] == [0.25, 0.5, 1.0, 2.0, 4.0, 5.0, 5.0]
    assert sum(done.sleeps) == pytest.approx(30.0)
    assert done.sleeps[-1] == pytest.approx(30.0 - sum(done.sleeps[:-1]))      # its last try at the lease's end
    assert len(done.calls) == len(done.sleeps) + 1


def test_a_background_release_uses_the_last_moment_of_the_lease_however_short() -> None:
    done = background([SERVER_ERROR] * 100, 28.5)       # 0.25 + 0.5 + 1 + 2 + 4 + 5 * 4 = 27.75: 0.75 s left
    assert done.sleeps[-2:] == [5.0, pytest.approx(0.75)] and sum(done.sleeps) == pytest.approx(28.5)


def test_a_background_release_makes_one_last_try_when_the_client_closes() -> None:
    done = background([SERVER_ERROR] * 10, 30.0, closing=True)
    assert done.sleeps == [0.25] and len(done.calls) == 2


def test_a_background_release_is_the_same_conditional_free_as_the_first_attempt(engine: Engine) -> None:
    clock = FakeClock()
    item = take(engine, clock, 'k', 'me', shared=False, attributes={'purpose': 'p'}).result.item
    lock = held(item, clock, additional_attributes={'purpose': 'p'})
    clock.now += 3
    run(release_again(settings(), lock, ['other', item['record_version_number']], clock, LEASE,
                      attributes={'result': 'r'}), engine, clock)
    row = engine.row('k')
    assert row['released_at'] == int(clock.time()) and row['expiry_time'] == int(clock.time() + EXPIRY)
    assert row['result'] == 'r' and 'purpose' not in row and row['lease_duration'] == 0
    assert row['record_version_number'] != item['record_version_number']
    assert str(uuid.UUID(row['record_version_number'])) == row['record_version_number']     # a fresh version


@pytest.mark.parametrize('client_keeps, keep_row, kept', [(True, False, False), (False, True, True),
                                                          (False, None, False)])
def test_a_background_release_follows_keep_row(engine: Engine, client_keeps: bool, keep_row: Optional[bool],
                                               kept: bool) -> None:
    clock = FakeClock()
    item = take(engine, clock, 'k', 'me', shared=False).result.item
    run(release_again(settings(client_keeps), held(item, clock), [item['record_version_number']], clock, LEASE,
                      keep_row=keep_row), engine, clock)
    assert (engine.row('k') is not None) is kept


def test_a_background_release_of_a_lock_on_an_item_removes_only_the_lock(engine: Engine) -> None:
    clock = FakeClock()
    engine.store.send(_put(engine, {'lock_key': 'k', 'sort_key': '-', 'owner_name': 'me',
                                    'record_version_number': 'v1', 'title': 'mine', 'lease_duration': 30}))
    lock = Lock(_state(clock), lock_existing_item=True)
    run(release_again(settings(), lock, ['v1'], clock, LEASE), engine, clock)
    assert engine.row('k') == {'lock_key': 'k', 'sort_key': '-', 'title': 'mine'}


def _put(engine: Engine, item: Dict[str, Any]) -> Any:
    from python_dynamodb_lock._wire.requests import Request
    return Request('put_item', {'TableName': engine.schema.table_name, 'Item': item})


def test_which_releases_remove_only_the_locks_attributes() -> None:
    state = LockState('v', 0, 0.0, LEASE)
    assert on_item(Lock(state, lock_existing_item=True)) is True
    own = LockState('v', 0, 0.0, LEASE)
    own.own_row = True
    assert on_item(Lock(own, lock_existing_item=True)) is False     # no item there: a plain row
    assert on_item(Lock(state)) is False


def test_a_readers_entry_carrying_an_old_renewal_of_its_own_is_released_not_taken_for_a_theft(
        engine: Engine) -> None:
    from python_dynamodb_lock._core.shared_ops import renewal_request
    from python_dynamodb_lock._wire.renewals import Renewal
    clock = FakeClock()
    first = take(engine, clock, 'k', 'reader-1').result.item
    take(engine, clock, 'k', 'reader-2')
    reader = held(first, clock, shared=True)
    for index in range(25):      # renewals whose answers were lost: the release names the newest 20
        reader._state.remember_unconfirmed(f'u{index}')
    renewal = Renewal('k', '-', [first['record_version_number']], 'u2', int(clock.time() + EXPIRY))
    assert isinstance(engine.store.send(renewal_request(engine.schema, reader, renewal)), Applied)   # it landed
    result = run(release(settings(), reader, clock), engine, clock).result
    assert result.outcome is ReleaseOutcome.RELEASED
    assert set(holders(engine.row('k'))) == {'reader-2'}


def test_a_release_of_a_lost_lock_says_who_took_it_and_keeps_the_loss() -> None:
    from python_dynamodb_lock._core.state import Loss
    state = _state(FakeClock())
    loss = Loss(Reason.TAKEN_OVER, _row('v9', 'thief'))
    state.forget(Status.INVALID, loss)
    verdict = precheck_release(state, True, False, 'k|-', 'me')
    assert verdict.loss is loss and verdict.final_status is None and verdict.event.value == 'release_skipped'
    assert verdict.error.message == 'k|- was taken over by thief before it was released; their row was left alone'
    assert verdict.error.holder['owner_name'] == 'thief'
    other = precheck_release(_state(FakeClock()), False, False, 'k|-', 'me')
    assert other.error.code == DynamoDBLockError.LOCK_NOT_OWNED
    assert other.error.message == 'k|- is not held by this client (me)'


def test_what_a_release_tells_the_caller_word_for_word() -> None:
    from python_dynamodb_lock._core.messages import explain
    from python_dynamodb_lock._core.release import ReleaseResult
    schema = _SCHEMA[0]
    gone = release_verdict(ReleaseResult(ReleaseOutcome.ROW_GONE), False, schema, 'k|-')
    assert gone.loss.reason == Reason.ROW_GONE and gone.loss.row is None and gone.error.reason == Reason.ROW_GONE
    assert gone.error.message == ('k|- was lost before it was released: its row was gone (expired or '
                                  'force-released)')
    thief = _row('v9', 'thief')
    stolen = release_verdict(ReleaseResult(ReleaseOutcome.STOLEN, thief), True, schema, 'k|-')
    assert stolen.error is None and stolen.loss.row == thief and stolen.loss.reason == Reason.TAKEN_OVER
    forgotten = release_verdict(ReleaseResult(ReleaseOutcome.FAILED, failed=SERVER_ERROR), True, schema, 'k|-')
    assert forgotten.detail == explain(schema, SERVER_ERROR.error) != ''
    strict = release_verdict(ReleaseResult(ReleaseOutcome.FAILED, failed=THROTTLED), False, schema, 'k|-')
    assert strict.error.message == (f'Could not release k|-: {explain(schema, THROTTLED.error)}; '
                                    'the lock is still held and kept alive')
    assert strict.error.reason == Reason.THROTTLED and strict.error.__cause__ is THROTTLED.error
    assert strict.final_status is None and strict.event.value == 'release_failed'


# -- a free row found after a lost answer: the fencing token tells whether another held it ------

def _token_state(clock: FakeClock, confirmed_ago: float) -> LockState:
    state = LockState('v-current', 1, clock.monotonic() - confirmed_ago, LEASE)
    state.acquired(clock.monotonic() - confirmed_ago, 7, 'acq')
    return state


@pytest.mark.parametrize('answers', [
    pytest.param([LOST_ANSWER, Applied({'Item': _row('v-next-release', 'next', released_at=1, fencing_token=8)})],
                 id='read-after-a-lost-answer'),
    pytest.param([Refused(_row('v-next-release', 'next', released_at=1, fencing_token=8), retried=True)],
                 id='refusal-of-a-retried-write'),
])
def test_a_row_released_by_the_next_holder_past_our_lease_is_reported_as_a_loss(answers: List[Any]) -> None:
    """sim29a seed 316: the release's write may have landed; the row is found released by a
    holder with a larger fencing token, after our lease ran out. The key was held by another in
    between (perhaps before our write landed): the release must not say "released"."""
    clock = FakeClock()
    state = _token_state(clock, confirmed_ago=LEASE + 1)
    state.note_release_maybe_applied()
    done = scripted_release(*answers, state=state, clock=clock)
    assert done.result.outcome is ReleaseOutcome.STOLEN
    verdict = release_verdict(done.result, False, _SCHEMA[0], 'k')
    assert verdict.final_status == Status.INVALID and not verdict.released
    assert verdict.error is not None and verdict.error.code == DynamoDBLockError.LOCK_STOLEN
    assert verdict.loss is not None and verdict.loss.reason is Reason.TAKEN_OVER
    assert release_verdict(done.result, True, _SCHEMA[0], 'k').error is None     # best effort: told nothing


@pytest.mark.parametrize('token, confirmed_ago', [
    pytest.param(8, 1.0, id='larger-token-within-our-lease'),      # our release landed first, the next came after
    pytest.param(7, LEASE + 1, id='our-token-past-our-lease'),     # our own release (or a force release of ours)
    pytest.param(None, LEASE + 1, id='no-token'),                  # a published client's row tells nothing
])
def test_a_free_row_that_shows_no_other_holder_after_us_is_released(token: Optional[int],
                                                                    confirmed_ago: float) -> None:
    clock = FakeClock()
    state = _token_state(clock, confirmed_ago)
    extra = {} if token is None else {'fencing_token': token}
    done = scripted_release(LOST_ANSWER, Applied({'Item': _row('v-x', 'x', released_at=1, **extra)}),
                            state=state, clock=clock)
    assert done.result.outcome is ReleaseOutcome.RELEASED
