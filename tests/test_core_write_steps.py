"""One conditional write, its undo and the wait loop around it (_core/write.py, _core/acquire.py), driven against moto
in-process on a manual clock as in test_core_undo_steps.py: what an error names, which row a
lost answer may claim, and how the background watch of an interrupted write ends (its last look
at the end of the lease, a closing client, an undo that failed and is retried, the report of a
watch that could never read the row)."""
from __future__ import annotations

from typing import Any, List

import pytest

from python_dynamodb_lock import DynamoDBLockError
from python_dynamodb_lock._core.acquire import TimedOut, acquire
from python_dynamodb_lock._core.answers import Applied, Refused
from python_dynamodb_lock._core.effects import Call, Pending, Settle, Sleep
from python_dynamodb_lock._core.events import Kind
from python_dynamodb_lock._core.messages import describe_key, explain
from python_dynamodb_lock._core.write import (Blocked, Written, free_if_landed, free_landed, is_abandoned, is_free,
                                              read_row, undo_write)
from python_dynamodb_lock._wire.requests import Request
from python_dynamodb_lock._model.schema import Schema
from test_core_protocol import SERVER_ERROR, THROTTLED, FakeClock
from test_core_shared_steps import LEASE, LOST, Engine, attempt, run, settle, table  # noqa: F401 (table: fixture)


@pytest.fixture
def engine(table: Any) -> Engine:      # noqa: F811 (the fixture of the shared module's table)
    table.delete_row('k')
    return Engine(table)


def put_item(engine: Engine, item: Any) -> Request:
    return Request('put_item', {'TableName': engine.schema.table_name, 'Item': item})


def acquiring(engine: Engine, clock: FakeClock, owner: str = 'me', **options: Any) -> Any:
    return acquire(attempt(engine, 'k', owner, shared=False, **options), clock, lambda: False)


def test_a_failed_write_names_the_key_and_the_cause(engine: Engine) -> None:
    clock = FakeClock()
    engine.faults = [lambda store, request: SERVER_ERROR]
    failed = run(acquiring(engine, clock), engine, clock)
    assert isinstance(failed.error, DynamoDBLockError)
    message = str(failed.error)
    assert f'Could not acquire {describe_key(engine.schema, "k", "-")}: ' in message
    assert 'InternalServerError' in message and failed.error.__cause__ is SERVER_ERROR.error


def test_a_lost_answer_that_did_not_land_does_not_claim_the_holders_row(engine: Engine) -> None:
    clock = FakeClock()
    held = run(acquiring(engine, clock, 'holder'), engine, clock).result
    assert isinstance(held, Written)
    engine.sent.clear()
    engine.faults = [lambda store, request: SERVER_ERROR]     # our write never reached the table
    failed = run(acquiring(engine, clock), engine, clock)
    assert isinstance(failed.error, DynamoDBLockError) and failed.result is None
    assert engine.operations() == ['update_item', 'get_item']
    assert engine.row('k')['record_version_number'] == held.item['record_version_number']
    assert engine.row('k')['owner_name'] == 'holder'


def test_a_watch_that_could_never_read_the_row_reports_the_lock_and_its_lease(engine: Engine) -> None:
    clock = FakeClock()
    engine.faults = [lambda store, request: LOST] * 100
    result = run(acquiring(engine, clock), engine, clock, interrupt_call=0, unsent=True)
    assert isinstance(result.error, KeyboardInterrupt)
    [event] = [event for event in result.emitted if event.kind is Kind.ORPHAN_UNVERIFIED]
    assert event.key == 'k|-'
    assert dict(event.fields) == {'what': describe_key(engine.schema, 'k', '-'),
                                  'error': 'the interrupted write could not be checked', 'lease': LEASE}


def test_a_write_landing_late_is_freed_by_the_last_look_at_the_end_of_the_lease(engine: Engine) -> None:
    clock = FakeClock()
    lease = 28.25      # the last gap is 0.5 s: the last look is taken however short the rest is
    started = clock.now
    looks: List[float] = []

    def lands_just_before_the_end() -> None:
        looks.append(clock.now - started)
        if clock.now - started > 28.0 and engine.held_back:
            engine.store.send(engine.held_back.pop())
    result = run(acquiring(engine, clock, lease=lease), engine, clock, interrupt_call=0, unsent=True,
                 on_sleep=lands_just_before_the_end)
    assert isinstance(result.error, KeyboardInterrupt)
    assert looks[-1] == pytest.approx(lease)
    assert 'released_at' in engine.row('k')      # freed, not left held for a lease


def test_a_closing_client_takes_one_last_look_then_stops_watching(engine: Engine) -> None:
    clock = FakeClock()
    started = clock.now
    result = run(acquiring(engine, clock), engine, clock, interrupt_call=0, unsent=True, closing=lambda: True)
    assert isinstance(result.error, KeyboardInterrupt)
    assert engine.operations() == ['get_item', 'get_item']     # the undo's read, the watch's last look
    assert clock.now - started == pytest.approx(0.25)


def test_a_landed_write_whose_undo_fails_is_freed_by_the_watch_without_reading_first(engine: Engine) -> None:
    clock = FakeClock()
    engine.faults = [lambda store, request: store.send(request)] + [lambda store, request: THROTTLED] * 2
    result = run(acquiring(engine, clock), engine, clock, interrupt_call=0)
    assert isinstance(result.error, KeyboardInterrupt)
    # the write, the undo (throttled), the watch's retries (throttled, then applied): the write
    # surely landed, so no read is needed to know the row is ours
    assert engine.operations() == ['update_item'] * 4
    assert 'released_at' in engine.row('k')


def _landed_by_us(engine: Engine, clock: FakeClock) -> Written:
    held = run(acquiring(engine, clock), engine, clock).result
    assert isinstance(held, Written)
    engine.sent.clear()
    return held


@pytest.mark.parametrize('known', [True, False])
def test_free_landed_frees_our_row(engine: Engine, known: bool) -> None:
    clock = FakeClock()
    held = _landed_by_us(engine, clock)
    settle(free_landed(attempt(engine, 'k', 'me', shared=False), clock, held.item['record_version_number'], known),
           engine, clock, None)
    assert 'released_at' in engine.row('k')
    assert engine.operations() == (['update_item'] if known else ['get_item', 'update_item'])


def test_free_landed_leaves_a_row_that_is_not_ours_and_watches_it_for_a_lease(engine: Engine) -> None:
    clock = FakeClock()
    held = run(acquiring(engine, clock, 'holder'), engine, clock).result
    engine.sent.clear()
    started = clock.now
    settle(free_landed(attempt(engine, 'k', 'me', shared=False), clock, 'not-the-holders', False),
           engine, clock, None)
    assert engine.row('k')['record_version_number'] == held.item['record_version_number']
    assert set(engine.operations()) == {'get_item'} and clock.now - started == pytest.approx(LEASE)


def test_an_unanswered_write_whose_cleanup_fails_reports_the_lock_the_cause_and_its_lease(engine: Engine) -> None:
    clock = FakeClock()

    def lands_unanswered(store: Any, request: Any) -> Any:
        store.send(request)
        return LOST
    engine.faults = [lands_unanswered, lambda store, request: LOST, lambda store, request: THROTTLED]
    failed = run(acquiring(engine, clock), engine, clock)
    assert isinstance(failed.error, DynamoDBLockError)
    [event] = [event for event in failed.emitted if event.kind is Kind.ORPHAN_CLEANUP_FAILED]
    assert event.key == 'k|-'
    assert dict(event.fields) == {'what': describe_key(engine.schema, 'k', '-'),
                                  'error': explain(engine.schema, THROTTLED.error), 'lease': LEASE}


def test_the_watch_of_an_interrupted_write_ends_after_one_lease_with_growing_gaps(engine: Engine) -> None:
    clock = FakeClock()
    gaps: List[float] = []
    last = [clock.now]

    def bounded() -> None:
        gaps.append(clock.now - last[0])
        last[0] = clock.now
        assert len(gaps) <= 20, 'the watch does not end'
    result = run(acquiring(engine, clock), engine, clock, interrupt_call=0, unsent=True, on_sleep=bounded)
    assert isinstance(result.error, KeyboardInterrupt)
    assert gaps == pytest.approx([0.25, 0.5, 1.0, 2.0, 4.0, 5.0, 5.0, 5.0, 5.0, 2.25])


def test_a_write_met_by_its_own_retry_is_freed(engine: Engine) -> None:
    """botocore retried the write after it landed: the refusal carries our own row."""
    clock = FakeClock()

    def landed_then_refused(store: Any, request: Any) -> Any:
        store.send(request)
        return Refused(engine.row('k'))
    engine.faults = [landed_then_refused]
    result = run(acquiring(engine, clock), engine, clock, interrupt_call=0)
    assert isinstance(result.error, KeyboardInterrupt)
    assert 'released_at' in engine.row('k') and engine.operations() == ['update_item', 'update_item']


def test_a_landed_write_whose_row_was_taken_meanwhile_is_not_watched(engine: Engine) -> None:
    clock = FakeClock()
    engine.faults = [lambda store, request: store.send(request), lambda store, request: Refused(None)]
    result = run(acquiring(engine, clock), engine, clock, interrupt_call=0)
    assert isinstance(result.error, KeyboardInterrupt)
    assert engine.operations() == ['update_item', 'update_item']     # no watch: the row is not ours


def test_a_write_of_unknown_outcome_whose_free_fails_is_freed_by_the_watch(engine: Engine) -> None:
    clock = FakeClock()
    engine.faults = [lambda store, request: store.send(request) and None,     # landed; the answer never came
                     lambda store, request: store.send(request),              # the undo's read: ours
                     lambda store, request: THROTTLED]                        # its free: throttled
    result = run(acquiring(engine, clock), engine, clock, interrupt_call=0)
    assert isinstance(result.error, KeyboardInterrupt)
    assert engine.operations() == ['update_item', 'get_item', 'update_item', 'get_item', 'update_item']
    assert 'released_at' in engine.row('k')


def test_the_watch_runs_as_a_follow_up_nobody_waits_for(engine: Engine) -> None:
    clock = FakeClock()
    protocol = undo_write(attempt(engine, 'k', 'me', shared=False), clock, 'v-ours')
    assert isinstance(protocol.send(None), Pending)
    assert isinstance(protocol.send(None), Call)           # the answer can never be known: read the row
    effect = protocol.send(Applied({}))                     # no row (yet)
    assert isinstance(effect, Settle) and effect.follow_up is True


def test_two_undone_writes_leave_two_different_versions(engine: Engine) -> None:
    clock = FakeClock()
    versions = []
    for _ in range(2):
        run(acquiring(engine, clock), engine, clock, interrupt_call=0)
        row = engine.row('k')
        assert 'released_at' in row
        versions.append(row['record_version_number'])
    assert versions[0] != versions[1] and 'None' not in versions   # a watcher sees each write as a change


def test_free_if_landed_reads_before_it_writes(engine: Engine) -> None:
    clock = FakeClock()
    held = run(acquiring(engine, clock, 'holder'), engine, clock).result
    engine.sent.clear()
    result = run(free_if_landed(attempt(engine, 'k', 'me', shared=False), clock, 'v-ours'), engine, clock)
    assert result.result is None and engine.operations() == ['get_item']
    assert engine.row('k')['record_version_number'] == held.item['record_version_number']


def test_a_ttl_past_by_less_than_the_clock_skew_is_not_a_dead_holder() -> None:
    schema = Schema('locks', 'lock_key', 'sort_key', 'expiry_time')
    now = 1_700_000_000.0
    row = {'record_version_number': 'v', 'lease_duration': 30.0, 'expiry_time': int(now) - 5}
    assert not is_abandoned(schema, row, 0.0, now, 30.0, max_clock_skew=10.0)
    assert is_abandoned(schema, row, 0.0, now, 30.0, max_clock_skew=1.0)


def test_a_row_without_a_readable_lease_is_judged_by_the_default_lease() -> None:
    schema = Schema('locks', 'lock_key', 'sort_key', 'expiry_time')
    row = {'record_version_number': 'v'}
    assert not is_abandoned(schema, row, 19.0, 0.0, 20.0)
    assert is_abandoned(schema, row, 20.0, 0.0, 20.0)


def test_a_lock_on_an_item_taking_over_a_dead_holder_keeps_the_items_own_ttl(engine: Engine) -> None:
    clock = FakeClock()
    item_ttl = int(clock.time()) + 86_400
    item = {'lock_key': 'k', 'sort_key': '-', 'expiry_time': item_ttl, 'data': 'x'}
    assert isinstance(engine.store.send(put_item(engine, item)), Applied)
    held = run(acquiring(engine, clock, 'holder', lock_existing_item=True), engine, clock).result
    assert isinstance(held, Written)
    taken = run(acquiring(engine, clock, lock_existing_item=True), engine, clock).result    # the holder died
    assert isinstance(taken, Written) and taken.replaced is not None
    row = engine.row('k')
    assert row['owner_name'] == 'me' and row['expiry_time'] == item_ttl and row['data'] == 'x'


@pytest.mark.parametrize('lease_expiry, skew, abandoned', [
    pytest.param(1_699_999_995, 10.0, False, id='past-by-less-than-the-skew'),
    pytest.param(1_699_999_990, 10.0, False, id='past-by-exactly-the-skew'),
    pytest.param(1_699_999_995, 1.0, True, id='past-by-more-than-the-skew'),
    pytest.param(None, 1.0, False, id='no-lease-expiry'),
])
def test_a_lease_end_past_by_more_than_the_clock_skew_is_a_dead_holder_at_first_sight(
        lease_expiry: Any, skew: float, abandoned: bool) -> None:
    schema = Schema('locks', 'lock_key', 'sort_key', 'expiry_time')
    row = {'record_version_number': 'v', 'lease_duration': 30.0, 'expiry_time': 1_700_003_600}
    if lease_expiry is not None:
        row['lease_expiry'] = lease_expiry
    assert is_abandoned(schema, row, 0.0, 1_700_000_000.0, 30.0, max_clock_skew=skew) is abandoned


def test_a_ttl_reaching_now_exactly_has_not_passed() -> None:
    schema = Schema('locks', 'lock_key', 'sort_key', 'expiry_time')
    row = {'record_version_number': 'v', 'lease_duration': 30.0, 'expiry_time': 1_700_000_000}
    assert not is_abandoned(schema, row, 0.0, 1_700_000_000.0, 30.0)
    assert is_abandoned(schema, row, 0.0, 1_700_000_000.5, 30.0)


def test_an_applications_item_blocks_a_plain_lock_but_is_free_to_a_lock_on_it() -> None:
    item = {'lock_key': 'k', 'sort_key': '-', 'data': 'x'}
    assert not is_free(item) and Blocked(item).row == item
    assert is_free(item, existing_item=True) and Blocked(item, existing_item=True).row is None


def test_a_lock_on_an_item_over_a_released_lock_row_holds_its_own_row(engine: Engine) -> None:
    clock = FakeClock()
    released = {'lock_key': 'k', 'sort_key': '-', 'record_version_number': 'v0', 'owner_name': 'before',
                'lease_duration': 30, 'released_at': int(clock.time()) - 10,
                'expiry_time': int(clock.time()) + 3600}
    assert isinstance(engine.store.send(put_item(engine, released)), Applied)
    taken = run(acquiring(engine, clock, lock_existing_item=True), engine, clock).result
    assert isinstance(taken, Written) and taken.own_row is True
    assert 'expiry_time' not in engine.row('k')      # the TTL of the release is removed: the row is held


def test_a_lock_on_an_item_keeps_none_of_the_items_attributes_as_its_own(engine: Engine) -> None:
    clock = FakeClock()
    item = {'lock_key': 'k', 'sort_key': '-', 'data': 'x', 'fencing_token': 41}
    assert isinstance(engine.store.send(put_item(engine, item)), Applied)
    held = run(acquiring(engine, clock, lock_existing_item=True), engine, clock).result
    assert isinstance(held, Written) and held.own_row is False
    assert 'data' not in held.item and held.item['fencing_token'] == 42
    assert engine.row('k')['data'] == 'x'


def test_a_plain_lock_takes_the_attributes_a_release_left_but_not_its_bookkeeping(engine: Engine) -> None:
    clock = FakeClock()
    released = {'lock_key': 'k', 'sort_key': '-', 'record_version_number': 'v0', 'owner_name': 'before',
                'lease_duration': 30, 'released_at': int(clock.time()) - 10, 'fencing_token': 7,
                'expiry_time': int(clock.time()) + 3600, 'note': 'for the next holder'}
    assert isinstance(engine.store.send(put_item(engine, released)), Applied)
    held = run(acquiring(engine, clock), engine, clock).result
    assert isinstance(held, Written)
    assert held.item['note'] == 'for the next holder' and held.item['fencing_token'] == 8
    assert 'released_at' not in held.item and held.item['owner_name'] == 'me'


def _read_error(verb: Any = ...) -> DynamoDBLockError:
    schema = Schema('locks', 'lock_key', 'sort_key', 'expiry_time')
    protocol = read_row(schema, 'k', '-') if verb is ... else read_row(schema, 'k', '-', verb)
    assert isinstance(protocol.send(None), Call)
    with pytest.raises(DynamoDBLockError) as raised:
        protocol.send(THROTTLED)
    return raised.value


def test_a_failed_read_names_the_lock_and_the_cause() -> None:
    schema = Schema('locks', 'lock_key', 'sort_key', 'expiry_time')
    error = _read_error()
    assert error.code == DynamoDBLockError.UNKNOWN and error.reason == THROTTLED.reason
    assert error.message == f'Could not read {describe_key(schema, "k", "-")}: {explain(schema, THROTTLED.error)}'
    assert error.__cause__ is THROTTLED.error
    assert _read_error('release').message.startswith("Could not release lock 'k'/'-' in table 'locks': ")
    assert _read_error(None).message == explain(schema, THROTTLED.error)


def test_a_lock_on_an_item_whose_answer_was_lost_leaves_the_item_the_applications(engine: Engine) -> None:
    clock = FakeClock()
    item = {'lock_key': 'k', 'sort_key': '-', 'data': 'x'}
    assert isinstance(engine.store.send(put_item(engine, item)), Applied)

    def lands_unanswered(store: Any, request: Any) -> Any:
        store.send(request)
        return LOST
    engine.faults = [lands_unanswered]
    held = run(acquiring(engine, clock, lock_existing_item=True), engine, clock).result
    assert isinstance(held, Written)
    assert held.own_row is False         # its release takes the lock off and leaves the item
    assert 'data' not in held.item and engine.row('k')['data'] == 'x'


def test_a_plain_lock_facing_an_applications_item_says_it_is_not_a_lock_and_never_replaces_it(engine: Engine) -> None:
    clock = FakeClock()
    item = {'lock_key': 'k', 'sort_key': '-', 'data': 'x'}
    assert isinstance(engine.store.send(put_item(engine, item)), Applied)
    waited = run(acquiring(engine, clock, retry_timeout=3 * LEASE), engine, clock)
    assert isinstance(waited.result, TimedOut) and waited.result.blocking == item
    assert Kind.NOT_A_LOCK in waited.events and Kind.UNFENCED_HOLDER not in waited.events
    assert Kind.TAKING_OVER not in waited.events and engine.row('k') == item
    assert engine.operations().count('update_item') == 1      # the first write only: never one over the item


def test_a_row_without_a_readable_lease_is_taken_over_after_the_default_lease(engine: Engine) -> None:
    clock = FakeClock()
    old = {'lock_key': 'k', 'sort_key': '-', 'record_version_number': 'v-old', 'owner_name': 'old',
           'fencing_token': 3}
    assert isinstance(engine.store.send(put_item(engine, old)), Applied)
    started = clock.now
    taken = run(acquiring(engine, clock), engine, clock)
    assert isinstance(taken.result, Written) and taken.result.replaced['owner_name'] == 'old'
    assert clock.now - started == pytest.approx(LEASE)     # the attempt's default lease (LEASE)


def test_with_a_clock_skew_bound_a_holder_past_its_lease_end_is_taken_at_first_sight(engine: Engine) -> None:
    clock = FakeClock()
    crashed = {'lock_key': 'k', 'sort_key': '-', 'record_version_number': 'v-old', 'owner_name': 'old',
               'fencing_token': 3, 'lease_duration': 30, 'lease_expiry': int(clock.time()) - 100,
               'expiry_time': int(clock.time()) + 3600}
    assert isinstance(engine.store.send(put_item(engine, crashed)), Applied)
    started = clock.now
    taken = run(acquiring(engine, clock, max_clock_skew=5.0), engine, clock)
    assert isinstance(taken.result, Written) and clock.now == started     # no lease of watching
    [event] = [event for event in taken.emitted if event.kind is Kind.TAKING_OVER]
    assert event.key == 'k|-'
    assert dict(event.fields) == {'owner': 'old', 'version': 'v-old', 'unchanged_for': 0.0, 'duration': 0.0}


def test_a_waiter_reports_each_wait_and_its_time_out_naming_the_holder(engine: Engine) -> None:
    clock = FakeClock()
    run(acquiring(engine, clock, 'holder', lease=3600.0), engine, clock)
    engine.sent.clear()
    started = clock.now
    waited = run(acquiring(engine, clock, retry_timeout=12.0), engine, clock)      # retry period: 5 s
    assert isinstance(waited.result, TimedOut) and waited.result.blocking['owner_name'] == 'holder'
    waits = [event for event in waited.emitted if event.kind is Kind.WAITING]
    assert [dict(event.fields) for event in waits] == [{'owner': 'holder', 'retry_in': 5.0},
                                                       {'owner': 'holder', 'retry_in': 5.0},
                                                       {'owner': 'holder', 'retry_in': 2.0}]
    [timed_out] = [event for event in waited.emitted if event.kind is Kind.ACQUIRE_TIMED_OUT]
    assert timed_out.key == 'k|-' and dict(timed_out.fields) == {'owner': 'holder', 'duration': 12.0}
    assert clock.now - started == 12.0
    assert engine.operations() == ['update_item', 'get_item', 'get_item', 'get_item']


def test_a_takeover_reports_how_long_the_acquisition_waited(engine: Engine) -> None:
    clock = FakeClock()
    run(acquiring(engine, clock, 'holder'), engine, clock)
    taken = run(acquiring(engine, clock), engine, clock).result
    assert isinstance(taken, Written) and taken.waited == LEASE


def test_a_release_by_this_client_lets_its_waiter_write_at_once_without_a_read(engine: Engine) -> None:
    clock = FakeClock()
    run(acquiring(engine, clock, 'holder'), engine, clock)
    engine.sent.clear()
    protocol = acquiring(engine, clock)
    effect = protocol.send(None)
    assert isinstance(effect, Call)
    answer = engine.send(effect.request)                 # refused: the holder is there
    effect = protocol.send(answer)
    while not isinstance(effect, Sleep):
        effect = protocol.send(None)
    engine.store.send(Request('delete_item', {'TableName': engine.schema.table_name,
                                              'Key': {'lock_key': 'k', 'sort_key': '-'}}))   # released here
    effect = protocol.send(True)
    while not isinstance(effect, Call):
        effect = protocol.send(None)
    assert effect.request.operation == 'update_item'     # the write at once, not a read
    with pytest.raises(StopIteration) as done:
        effect = protocol.send(engine.send(effect.request))
        while True:
            effect = protocol.send(None)
    assert isinstance(done.value.value, Written) and engine.row('k')['owner_name'] == 'me'
