"""Shared (read) locks' paths not covered by test_core_shared_steps.py, driven against moto
in-process on a manual clock the same way: a reader that meets a released row still carrying a
live writer's marker waits for that writer without writing again, and joins once the marker is
dead; the events of a reader's join carry what a metrics hook reads.
"""
from __future__ import annotations

import dataclasses
from decimal import Decimal
from typing import Any, List

import pytest

from python_dynamodb_lock._core.acquire import TimedOut, acquire
from python_dynamodb_lock._core.answers import Applied, Failed, Refused
from python_dynamodb_lock._core.shared_ops import _LEAVE_ATTEMPTS, leave_write, renewal_request
from python_dynamodb_lock._wire.renewals import Renewal
from python_dynamodb_lock._wire.shared_requests import entry
from python_dynamodb_lock import DynamoDBLockError, Reason
from python_dynamodb_lock._core.events import Kind
from python_dynamodb_lock._core.write import Written
from test_core_protocol import THROTTLED, FakeClock
from test_core_shared_steps import (EXPIRY, LEASE, LOST, Engine, attempt, holders, run,  # noqa: F401 (table)
                                  table, take)


@pytest.fixture
def engine(table: Any) -> Engine:      # noqa: F811 (the fixture of the shared module's table)
    table.delete_row('k')
    return Engine(table)


def events_of(result: Any, kind: Kind) -> List[Any]:
    return [event for event in result.emitted if event.kind == kind]


def released_row_with_a_writers_marker(engine: Engine, version: str = 'm-1') -> None:
    """The row the last reader left (released) while a writer waits: its marker stays."""
    engine.store.client.put_item(TableName=engine.schema.table_name, Item={
        'lock_key': 'k', 'sort_key': '-', 'owner_name': 'reader', 'record_version_number': 'row-1',
        'released_at': 1, 'lease_duration': Decimal('30'),
        'writer_waiting': {'id': 'w-1', 'owner': 'writer', 'version': version, 'lease': Decimal(repr(LEASE))}})


def joins(engine: Engine) -> int:
    return engine.operations().count('update_item')


def test_a_reader_meeting_a_released_row_with_a_live_writers_marker_waits_without_writing_again(
        engine: Engine) -> None:
    clock = FakeClock()
    released_row_with_a_writers_marker(engine)
    renewals = [0]

    def the_writer_renews_its_marker() -> None:
        renewals[0] += 1
        engine.store.client.update_item(
            TableName=engine.schema.table_name, Key={'lock_key': 'k', 'sort_key': '-'},
            UpdateExpression='SET writer_waiting.version = :v',
            ExpressionAttributeValues={':v': f'm-{renewals[0] + 1}'})
    waited = run(acquire(attempt(engine, 'k', 'reader-2', retry_timeout=12.0), clock, lambda: False), engine, clock,
                 on_sleep=the_writer_renews_its_marker)
    assert isinstance(waited.result, TimedOut)
    assert joins(engine) == 1              # the first guess; then the marker is watched by reading the row
    assert waited.result.blocking is None  # a released row holds no lock: nobody is reported holding it
    assert holders(engine.row('k')) == {} and engine.row('k')['writer_waiting']['owner'] == 'writer'
    assert [event['owner'] for event in events_of(waited, Kind.WAITING)] == ['reader'] * 3


def test_a_reader_joins_a_released_row_once_the_writers_marker_stayed_for_its_lease(engine: Engine) -> None:
    clock = FakeClock()
    released_row_with_a_writers_marker(engine)
    started = clock.now
    joined = run(acquire(attempt(engine, 'k', 'reader-2'), clock, lambda: False), engine, clock)
    assert isinstance(joined.result, Written) and joined.result.shared
    assert LEASE <= clock.now - started <= LEASE + 5.0
    row = engine.row('k')
    assert 'writer_waiting' not in row and 'released_at' not in row      # the dead marker is removed
    assert list(holders(row)) == ['reader-2']
    last = events_of(joined, Kind.ACQUIRE_ATTEMPT)[-1]
    assert last.key == 'k|-' and dict(last.fields) == {'outcome': 'applied', 'takeover': False, 'duration': 0.0}


# --- what a reader's heartbeat and release leave on the row ----------------------------------------------

@dataclasses.dataclass
class State:
    acquisition_id: str


@dataclasses.dataclass
class HeldLock:
    _state: Any
    shared: bool = True


def test_every_heartbeat_of_a_reader_gives_the_row_a_new_version_and_the_ttl_it_carries(engine: Engine) -> None:
    """The row's version is what published clients and exclusive waiters watch: it must change
    at every heartbeat of every reader, to a new value each time."""
    clock = FakeClock()
    one = take(engine, clock, 'k', 'reader').result.item
    lock = HeldLock(State(one['acquisition_id']))
    versions = [engine.row('k')['record_version_number']]
    entry_version = one['record_version_number']
    for beat in range(2):
        expiry = int(clock.time() + EXPIRY) + beat
        renewal = Renewal('k', '-', [entry_version], f'v-{beat}', expiry)
        assert isinstance(engine.store.send(renewal_request(engine.schema, lock, renewal)), Applied)
        row = engine.row('k')
        assert holders(row) == {'reader': f'v-{beat}'} and row['expiry_time'] == expiry
        versions.append(row['record_version_number'])
        entry_version = f'v-{beat}'
    assert all(isinstance(version, str) for version in versions) and len(set(versions)) == 3


def test_every_release_of_a_reader_gives_the_row_a_new_version(engine: Engine) -> None:
    clock = FakeClock()
    readers = [take(engine, clock, 'k', f'reader-{index}').result.item for index in range(3)]
    versions = [engine.row('k')['record_version_number']]
    for item in readers:
        answer = run(leave_write(engine.schema, 'k', '-', item['acquisition_id'], [item['record_version_number']],
                                 clock, EXPIRY, True), engine, clock).result
        assert isinstance(answer, Applied)
        versions.append(engine.row('k')['record_version_number'])
    assert all(isinstance(version, str) for version in versions) and len(set(versions)) == 4
    assert engine.row('k')['released_at'] == int(clock.time())


def test_a_leave_that_meets_a_reader_joining_meanwhile_leaves_beside_it(engine: Engine) -> None:
    """Guessed "others are there" and refused (alone), then guessed "last" and refused because a
    reader joined meanwhile: the third guess, beside that reader, goes through."""
    clock = FakeClock()
    one = take(engine, clock, 'k', 'reader-1').result.item
    joined: List[Any] = []

    def a_reader_joins_then(store: Any, request: Any) -> Any:
        joined.append(take(engine, clock, 'k', 'reader-2').result.item)
        return store.send(request)
    engine.sent.clear()
    engine.faults = [lambda store, request: store.send(request), a_reader_joins_then]
    answer = run(leave_write(engine.schema, 'k', '-', one['acquisition_id'], [one['record_version_number']],
                             clock, EXPIRY, True), engine, clock).result
    assert isinstance(answer, Applied)
    assert holders(engine.row('k')) == {'reader-2': joined[0]['record_version_number']}
    assert 'released_at' not in engine.row('k')


def test_a_leave_that_never_settles_is_an_unknown_error_saying_so(engine: Engine) -> None:
    clock = FakeClock()
    one = take(engine, clock, 'k', 'reader').result.item
    crowded = {**engine.row('k')}
    crowded['shared_holders'] = {**crowded['shared_holders'], 'x': entry('x', 'vx', 10)}
    engine.faults = [lambda store, request: Refused(crowded)] * _LEAVE_ATTEMPTS
    answer = run(leave_write(engine.schema, 'k', '-', one['acquisition_id'], [one['record_version_number']],
                             clock, EXPIRY, True), engine, clock).result
    assert isinstance(answer, Failed) and answer.reason == Reason.OTHER
    assert isinstance(answer.error, DynamoDBLockError) and answer.error.code == DynamoDBLockError.UNKNOWN
    assert answer.error.message == f'other shared holders joined or left {_LEAVE_ATTEMPTS} times while this one left'


# --- an interrupted join: the entry that landed is taken out, whenever it lands ---------------------------

def test_a_join_interrupted_after_it_landed_is_taken_out_without_a_read(engine: Engine) -> None:
    clock = FakeClock()
    interrupted = run(acquire(attempt(engine, 'k', 'reader'), clock, lambda: False), engine, clock, interrupt_call=0)
    assert isinstance(interrupted.error, KeyboardInterrupt)
    assert holders(engine.row('k')) == {}
    assert engine.operations()[1:] == ['update_item', 'update_item']     # guessed "others", then "last"
    assert Kind.ORPHAN_UNVERIFIED not in interrupted.events


def test_a_join_interrupted_before_its_answer_is_watched_and_taken_out_when_it_lands(engine: Engine) -> None:
    clock = FakeClock()
    reads: List[Any] = []

    def it_lands_after_the_first_look() -> None:
        reads.append(True)
        if len(reads) == 2:
            engine.store.send(engine.held_back[0])
    interrupted = run(acquire(attempt(engine, 'k', 'reader'), clock, lambda: False), engine, clock, interrupt_call=0,
                      unsent=True, on_sleep=it_lands_after_the_first_look)
    assert isinstance(interrupted.error, KeyboardInterrupt)
    assert holders(engine.row('k')) == {}            # landed late, and taken out
    operations = engine.operations()
    assert operations[:2] == ['get_item', 'get_item']    # (the join was held back) a look per gap
    assert operations[-1] == 'update_item' and operations.count('update_item') >= 2
    assert Kind.ORPHAN_UNVERIFIED not in interrupted.events


def test_a_join_interrupted_before_its_answer_that_never_lands_is_only_read(engine: Engine) -> None:
    clock = FakeClock()
    started = clock.now
    interrupted = run(acquire(attempt(engine, 'k', 'reader'), clock, lambda: False), engine, clock, interrupt_call=0,
                      unsent=True)
    assert isinstance(interrupted.error, KeyboardInterrupt) and engine.row('k') is None
    assert set(engine.operations()[1:]) == {'get_item'} and clock.now - started >= LEASE
    assert all(request.params['Key'] == {'lock_key': 'k', 'sort_key': '-'} for request in engine.sent)


def test_a_look_that_fails_keeps_watching_the_interrupted_join(engine: Engine) -> None:
    clock = FakeClock()
    engine.faults = [lambda store, request: LOST]         # the first look at the row (the join is held back)

    def it_lands() -> None:
        if holders(engine.row('k')) == {} and engine.held_back and engine.operations() == ['get_item']:
            engine.store.send(engine.held_back[0])
    interrupted = run(acquire(attempt(engine, 'k', 'reader'), clock, lambda: False), engine, clock, interrupt_call=0,
                      unsent=True, on_sleep=it_lands)
    assert isinstance(interrupted.error, KeyboardInterrupt)
    assert engine.operations()[:2] == ['get_item', 'get_item'] and 'update_item' in engine.operations()
    assert holders(engine.row('k')) == {}


def test_a_join_that_landed_whose_removal_fails_is_tried_again(engine: Engine) -> None:
    clock = FakeClock()
    engine.faults = [lambda store, request: store.send(request), lambda store, request: THROTTLED]
    interrupted = run(acquire(attempt(engine, 'k', 'reader'), clock, lambda: False), engine, clock, interrupt_call=0)
    assert isinstance(interrupted.error, KeyboardInterrupt)
    assert holders(engine.row('k')) == {} and Kind.ORPHAN_UNVERIFIED not in interrupted.events
    assert engine.operations()[:2] == ['update_item', 'update_item']     # the join; its removal, throttled
    assert engine.operations()[2] == 'update_item'                      # tried again: no read needed


def test_a_join_that_landed_whose_entry_someone_removed_meanwhile_is_left_alone(engine: Engine) -> None:
    clock = FakeClock()
    original_send = engine.send

    def send(request: Any) -> Any:
        answer = original_send(request)
        if len(engine.sent) == 1:      # the join landed; a writer then takes the row over
            engine.store.client.put_item(TableName=engine.schema.table_name, Item={
                'lock_key': 'k', 'sort_key': '-', 'owner_name': 'writer', 'record_version_number': 'w-1'})
        return answer
    engine.send = send      # type: ignore[method-assign]
    interrupted = run(acquire(attempt(engine, 'k', 'reader'), clock, lambda: False), engine, clock, interrupt_call=0)
    assert isinstance(interrupted.error, KeyboardInterrupt)
    assert engine.row('k')['owner_name'] == 'writer'
    assert engine.operations() == ['update_item', 'update_item']      # one removal, refused: nothing more
    assert Kind.ORPHAN_UNVERIFIED not in interrupted.events


# --- takeovers: the events, and the dead readers removed ----------------------------------------------------

def test_a_reader_trusting_clocks_takes_over_a_crashed_writer_at_first_sight_and_says_so(engine: Engine) -> None:
    clock = FakeClock()
    crashed = take(engine, clock, 'k', 'writer', shared=False).result.item
    clock.now += 10.0           # its lease_expiry (30 s after it wrote) is not past yet...
    patient = take(engine, clock, 'k', 'reader', retry_timeout=0.0, max_clock_skew=1.0)
    assert isinstance(patient.result, TimedOut)
    clock.now += 22.0           # ...now it is, by more than the skew: taken at first sight
    joined = take(engine, clock, 'k', 'reader', retry_timeout=0.0, max_clock_skew=1.0)
    assert isinstance(joined.result, Written) and joined.result.replaced['owner_name'] == 'writer'
    (taking_over,) = events_of(joined, Kind.TAKING_OVER)
    assert taking_over.key == 'k|-' and dict(taking_over.fields) == {
        'owner': 'writer', 'version': crashed['record_version_number'], 'unchanged_for': 0.0, 'duration': 0.0}
    assert events_of(joined, Kind.ACQUIRE_ATTEMPT)[-1]['takeover'] is True


def test_a_writer_takes_over_dead_readers_and_says_how_long_they_were_quiet(engine: Engine) -> None:
    clock = FakeClock()
    take(engine, clock, 'k', 'reader')
    started = clock.now
    taken = take(engine, clock, 'k', 'writer', shared=False)
    assert isinstance(taken.result, Written) and LEASE <= clock.now - started <= LEASE + 5.0
    (taking_over,) = events_of(taken, Kind.TAKING_OVER)
    row_version = taken.result.replaced['record_version_number']
    assert taking_over.key == 'k|-' and taking_over['owner'] == 'reader' and taking_over['version'] == row_version
    assert taking_over['unchanged_for'] == taking_over['duration'] >= LEASE


def renew(engine: Engine, item: Any, version: str) -> None:
    """A reader's heartbeat: its entry gets ``version``."""
    renewal = Renewal('k', '-', [item['record_version_number']], version, 1_700_009_999)
    answer = engine.store.send(renewal_request(engine.schema, HeldLock(State(item['acquisition_id'])), renewal))
    assert isinstance(answer, Applied)
    item['record_version_number'] = version


def test_a_reader_kept_out_past_a_lease_removes_the_dead_readers_entries_and_no_live_ones(engine: Engine) -> None:
    from python_dynamodb_lock._wire.shared_requests import mark_writer, unmark_writer
    clock = FakeClock()
    take(engine, clock, 'k', 'dead')
    live = take(engine, clock, 'k', 'live').result.item
    assert isinstance(engine.store.send(mark_writer(engine.schema, 'k', '-', 'w', 'writer', 'm0', LEASE, None)),
                      Applied)
    polls = [0]

    def the_live_reader_and_the_writer_renew_then_the_writer_gives_up() -> None:
        polls[0] += 1
        renew(engine, live, f'live-{polls[0]}')
        if clock.now < 1000.0 + LEASE + 5.0:
            engine.store.send(mark_writer(engine.schema, 'k', '-', 'w', 'writer', f'm{polls[0]}', LEASE, None))
        else:
            engine.store.send(unmark_writer(engine.schema, 'k', '-', 'w'))
    joined = run(acquire(attempt(engine, 'k', 'new'), clock, lambda: False), engine, clock,
                 on_sleep=the_live_reader_and_the_writer_renew_then_the_writer_gives_up)
    assert isinstance(joined.result, Written) and joined.result.beside_others
    assert set(holders(engine.row('k'))) == {'live', 'new'}       # the dead one's entry went with the join


def test_a_writers_marker_is_refreshed_with_a_new_version_at_every_poll(engine: Engine) -> None:
    clock = FakeClock()
    reader = take(engine, clock, 'k', 'reader').result.item
    markers: List[str] = []
    beats = [0]

    def the_reader_renews_and_the_marker_is_noted() -> None:
        beats[0] += 1
        renew(engine, reader, f'r-{beats[0]}')
        markers.append(engine.row('k')['writer_waiting']['version'])
    waited = run(acquire(attempt(engine, 'k', 'writer', shared=False, retry_timeout=2 * LEASE), clock,
                         lambda: False), engine, clock, on_sleep=the_reader_renews_and_the_marker_is_noted)
    assert isinstance(waited.result, TimedOut)
    assert len(markers) >= 2 * LEASE / 5.0 - 1 and len(set(markers)) == len(markers)     # a new version each poll
    assert 'writer_waiting' not in engine.row('k')          # taken off when it gave up


def test_a_writers_marker_removes_dead_readers_but_not_one_that_renewed_meanwhile(engine: Engine) -> None:
    from python_dynamodb_lock._wire.shared_requests import mark_writer
    clock = FakeClock()
    dead = take(engine, clock, 'k', 'dead').result.item
    renewed = take(engine, clock, 'k', 'renewed').result.item
    watched = {dead['acquisition_id']: dead['record_version_number'],
               renewed['acquisition_id']: renewed['record_version_number']}
    renew(engine, renewed, 'renewed-2')         # it renewed since the writer watched it
    refused = engine.store.send(mark_writer(engine.schema, 'k', '-', 'w', 'writer', 'm1', LEASE, None, watched))
    assert isinstance(refused, Refused) and set(holders(engine.row('k'))) == {'dead', 'renewed'}
    del watched[renewed['acquisition_id']]
    marked = engine.store.send(mark_writer(engine.schema, 'k', '-', 'w', 'writer', 'm1', LEASE, None, watched))
    assert isinstance(marked, Applied) and set(holders(engine.row('k'))) == {'renewed'}
    again = engine.store.send(mark_writer(engine.schema, 'k', '-', 'w', 'writer', 'm2', LEASE, None))
    assert isinstance(again, Applied) and engine.row('k')['writer_waiting']['version'] == 'm2'   # its own: refreshed
    other = engine.store.send(mark_writer(engine.schema, 'k', '-', 'w2', 'other', 'x', LEASE, None))
    assert isinstance(other, Refused)


def test_every_join_gives_the_row_a_new_version(engine: Engine) -> None:
    clock = FakeClock()
    versions = []
    for index in range(3):
        take(engine, clock, 'k', f'reader-{index}')
        versions.append(engine.row('k')['record_version_number'])
    assert len(set(versions)) == 3


def test_a_join_interrupted_whose_retry_met_its_own_entry_is_taken_out(engine: Engine) -> None:
    clock = FakeClock()

    def lands_then_refused(store: Any, request: Any) -> Any:
        store.send(request)
        return store.send(request)        # botocore's retry meets our own entry: refused, with the row
    engine.faults = [lands_then_refused]
    interrupted = run(acquire(attempt(engine, 'k', 'reader'), clock, lambda: False), engine, clock, interrupt_call=0)
    assert isinstance(interrupted.error, KeyboardInterrupt)
    assert holders(engine.row('k')) == {}


# --- a reader's fencing token: the last exclusive holder's, whichever way its join was answered ---------------

def released_by_a_writer(engine: Engine, clock: FakeClock) -> Any:
    """A key an exclusive holder held and released: its row keeps the holder's fencing token."""
    from python_dynamodb_lock._wire.lock_writes import release_row
    item = take(engine, clock, 'k', 'writer', shared=False).result.item
    answer = engine.store.send(release_row(engine.schema, 'k', '-', [item['record_version_number']], 'rel-1',
                                           int(clock.time() + EXPIRY), int(clock.time()), {}))
    assert isinstance(answer, Applied) and engine.row('k')['fencing_token'] == item['fencing_token']
    return item['fencing_token']


def test_a_reader_gets_the_last_exclusive_holders_token_and_none_on_a_key_never_held_so(engine: Engine) -> None:
    clock = FakeClock()
    fresh = take(engine, clock, 'k', 'reader').result
    assert isinstance(fresh, Written) and 'fencing_token' not in fresh.item
    engine.store.client.delete_item(TableName=engine.schema.table_name, Key={'lock_key': 'k', 'sort_key': '-'})
    token = released_by_a_writer(engine, clock)
    joined = take(engine, clock, 'k', 'reader').result
    assert isinstance(joined, Written) and joined.item['fencing_token'] == token


def test_a_reader_whose_retry_met_its_own_entry_holds_it_with_the_token(engine: Engine) -> None:
    clock = FakeClock()
    token = released_by_a_writer(engine, clock)

    def lands_then_refused(store: Any, request: Any) -> Any:
        store.send(request)
        return store.send(request)
    engine.faults = [lands_then_refused]
    joined = take(engine, clock, 'k', 'reader').result
    assert isinstance(joined, Written) and joined.item['fencing_token'] == token
    assert list(engine.row('k')['shared_holders']) == [joined.item['acquisition_id']]     # one entry: ours


def test_a_reader_whose_answer_was_lost_reads_its_entry_and_holds_it_with_the_token(engine: Engine) -> None:
    clock = FakeClock()
    token = released_by_a_writer(engine, clock)
    engine.sent.clear()

    def lands_unanswered(store: Any, request: Any) -> Any:
        store.send(request)
        return LOST
    engine.faults = [lands_unanswered]
    joined = take(engine, clock, 'k', 'reader').result
    assert isinstance(joined, Written) and joined.item['fencing_token'] == token
    assert engine.operations() == ['update_item', 'get_item']


def test_a_refused_join_judges_the_row_it_returned_without_reading(engine: Engine) -> None:
    clock = FakeClock()
    take(engine, clock, 'k', 'writer', shared=False)
    engine.sent.clear()
    waited = take(engine, clock, 'k', 'reader', retry_timeout=0.0)
    assert isinstance(waited.result, TimedOut) and waited.result.blocking['owner_name'] == 'writer'
    assert engine.operations() == ['update_item']


def test_a_join_refused_without_the_row_reads_it_and_a_failed_read_says_what_it_read(engine: Engine) -> None:
    from test_core_protocol import SERVER_ERROR
    clock = FakeClock()
    take(engine, clock, 'k', 'writer', shared=False)
    engine.sent.clear()
    engine.faults = [lambda store, request: Refused(None)]
    waited = take(engine, clock, 'k', 'reader', retry_timeout=0.0)
    assert isinstance(waited.result, TimedOut) and waited.result.blocking['owner_name'] == 'writer'
    assert engine.sent[1].params['Key'] == {'lock_key': 'k', 'sort_key': '-'}
    engine.faults = [lambda store, request: Refused(None), lambda store, request: SERVER_ERROR]
    failed = take(engine, clock, 'k', 'reader', retry_timeout=0.0)
    assert isinstance(failed.error, DynamoDBLockError)
    assert failed.error.message.startswith("Could not read lock 'k'/'-' in table ")


def test_a_waiting_writer_clears_a_dead_readers_entry_with_its_marker_and_leaves_the_live_one(
        engine: Engine) -> None:
    clock = FakeClock()
    take(engine, clock, 'k', 'dead')
    live = take(engine, clock, 'k', 'live').result.item
    beats = [0]

    def the_live_reader_renews() -> None:
        beats[0] += 1
        renew(engine, live, f'live-{beats[0]}')
    waited = run(acquire(attempt(engine, 'k', 'writer', shared=False, retry_timeout=LEASE + 10.0), clock,
                         lambda: False), engine, clock, on_sleep=the_live_reader_renews)
    assert isinstance(waited.result, TimedOut) and waited.result.blocking['owner_name'] == 'live'
    assert set(holders(engine.row('k'))) == {'live'}      # the dead reader's entry went with a marker write
