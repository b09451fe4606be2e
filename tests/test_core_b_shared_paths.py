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
from python_dynamodb_lock._requests import Renewal
from python_dynamodb_lock._shared_requests import entry
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
