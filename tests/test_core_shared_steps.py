"""The shared-lock steps of the protocol (python_dynamodb_lock/_core/shared_ops.py) and their
requests (_wire/shared_requests.py), driven against moto in-process on a manual clock.

A protocol yields its requests; here each one is sent, single-threaded, to a moto table, so the
conditions and updates the requests carry are checked by what they do to the row (moto evaluates
them as DynamoDB does), and the steps by what they decide: readers share a key, a live writer's
marker keeps new readers out, a writer takes a key over once every reader in its way is dead and
takes its marker off when it gives up, a holder's release leaves the others' entries, a lost or
interrupted join leaves nothing held. Mutual exclusion under concurrency is tested on DynamoDB
Local (test_shared_locks.py); nothing here runs two actors at once.
"""
from __future__ import annotations

import dataclasses
from decimal import Decimal
from typing import Any, Callable, Dict, Iterator, List, Optional

import pytest
from botocore.exceptions import ReadTimeoutError

from python_dynamodb_lock._core.acquire import TimedOut, acquire
from python_dynamodb_lock._core.write import AcquireAttempt, Written
from python_dynamodb_lock._core.answers import Applied, Failed, Refused, judge_error
from python_dynamodb_lock._core.effects import Call, Emit, Pending, Settle, Sleep, Unregister
from python_dynamodb_lock._core.events import Kind
from python_dynamodb_lock._core.shared_ops import _LEAVE_ATTEMPTS, entry_answer, leave_write, renewal_request
from python_dynamodb_lock import DynamoDBLockError
from python_dynamodb_lock._wire.renewals import Renewal
from python_dynamodb_lock._model.schema import Schema
from python_dynamodb_lock._wire.shared_requests import entry, mark_writer
from python_dynamodb_lock._drivers.thread_transport import ThreadTransport as Store
from python_dynamodb_lock.testing import moto_lock_table
from test_core_protocol import FakeClock

LEASE = 30.0
EXPIRY = 3600.0
LOST = judge_error(ReadTimeoutError(endpoint_url='http://x'))


class Engine:
    """A moto table the protocols' requests are sent to; ``faults`` answer the next calls
    instead (a fault gets the store and the request: it may send it, then lie about it)."""

    def __init__(self, table: Any) -> None:
        self.schema = Schema(table.table_name, 'lock_key', 'sort_key', 'expiry_time')
        self.store = Store(table.resource.meta.client)
        self.sent: List[Any] = []
        self.faults: List[Callable[[Store, Any], Any]] = []
        self.held_back: List[Any] = []     # requests interrupted before they were sent (run's unsent)

    def send(self, request: Any) -> Any:
        self.sent.append(request)
        if self.faults:
            return self.faults.pop(0)(self.store, request)
        return self.store.send(request)

    def row(self, key: str) -> Optional[Dict[str, Any]]:
        answer = self.store.send(get_request(self.schema, key))
        assert isinstance(answer, Applied)
        return answer.response.get('Item')

    def operations(self) -> List[str]:
        return [request.operation for request in self.sent]


def get_request(schema: Schema, key: str) -> Any:
    from python_dynamodb_lock._wire.requests import get
    return get(schema, key, '-')


@pytest.fixture(scope='module')
def table() -> Iterator[Any]:
    with moto_lock_table() as made:
        yield made


@pytest.fixture
def engine(table: Any) -> Engine:
    table.delete_row('k')        # (one table for the module: creating one takes longer than a test)
    return Engine(table)


@dataclasses.dataclass
class Run:
    result: Any = None
    error: Optional[BaseException] = None
    events: List[Kind] = dataclasses.field(default_factory=list)
    settled: int = 0
    unregistered: List[Any] = dataclasses.field(default_factory=list)
    emitted: List[Any] = dataclasses.field(default_factory=list)     # the events themselves, fields and all


def run(protocol: Any, engine: Engine, clock: FakeClock, interrupt_call: Optional[int] = None,
        on_sleep: Optional[Callable[[], None]] = None, unsent: bool = False,
        closing: Callable[[], bool] = lambda: False) -> Run:
    """Drive ``protocol`` against ``engine``; sleeps advance ``clock`` (``on_sleep`` runs after
    each, in ``Settle`` protocols too); ``Settle`` protocols run at once. With ``interrupt_call``
    (a call's index), that call is sent, its answer kept from the caller, and a KeyboardInterrupt
    thrown in instead (its undo gets the answer as ``Pending``); with ``unsent``, that call is
    not sent at all and its undo gets None (an answer that can never be known). ``closing()`` is
    what a ``Sleep`` of a ``Settle`` protocol answers (True: the client is closing)."""
    result = Run()
    value: Any = None
    calls = 0
    pending: Any = None
    throw: Optional[BaseException] = None
    while True:
        try:
            effect = protocol.throw(throw) if throw is not None else protocol.send(value)
        except StopIteration as done:
            result.result = done.value
            return result
        except (DynamoDBLockError, KeyboardInterrupt) as error:
            result.error = error
            return result
        throw, value = None, None
        if isinstance(effect, Call):
            if calls == interrupt_call:
                pending = engine.held_back.append(effect.request) if unsent else engine.send(effect.request)
                throw = KeyboardInterrupt()
            else:
                value = engine.send(effect.request)
            calls += 1
        elif isinstance(effect, Emit):
            result.events.append(effect.event.kind)
            result.emitted.append(effect.event)
        elif isinstance(effect, Sleep):
            _tick(clock, effect.seconds)
            if on_sleep is not None:
                on_sleep()
            value = False
        elif isinstance(effect, Settle):
            result.settled += 1
            settle(effect.protocol, engine, clock, pending, on_sleep, result.events, result.emitted, closing)
        elif isinstance(effect, Unregister):
            result.unregistered.append(effect.lock)
        else:
            raise AssertionError(f'unexpected effect {effect!r}')


_MOST_SLEEPS = 10_000     # no protocol here sleeps this often: more is a wait that never ends


def _tick(clock: FakeClock, seconds: float) -> None:
    clock.now += seconds
    clock.sleeps += 1
    assert clock.sleeps <= _MOST_SLEEPS, 'a wait that never ends'


def settle(protocol: Any, engine: Engine, clock: FakeClock, pending: Any,
           on_sleep: Optional[Callable[[], None]] = None, events: Optional[List[Kind]] = None,
           emitted: Optional[List[Any]] = None, closing: Callable[[], bool] = lambda: False) -> None:
    value: Any = None
    while True:
        try:
            effect = protocol.send(value)
        except StopIteration:
            return
        value = None
        if isinstance(effect, Pending):
            value = pending
        elif isinstance(effect, Call):
            value = engine.send(effect.request)
        elif isinstance(effect, Sleep):
            _tick(clock, effect.seconds)
            if on_sleep is not None:
                on_sleep()
            value = closing()
        elif isinstance(effect, Settle):
            settle(effect.protocol, engine, clock, pending, on_sleep, events, emitted, closing)
        elif isinstance(effect, Emit):
            if events is not None:
                events.append(effect.event.kind)
            if emitted is not None:
                emitted.append(effect.event)
        else:
            raise AssertionError(f'unexpected effect {effect!r}')


def attempt(engine: Engine, key: str, owner: str, shared: bool = True, lease: float = LEASE,
            retry_timeout: float = 100.0, **options: Any) -> AcquireAttempt:
    template = engine.schema.lock_item(key, '-', owner, lease, '', 0, options.pop('attributes', {}))
    for name in ('record_version_number', 'expiry_time'):
        template.pop(name)
    return AcquireAttempt(engine.schema, key, '-', f'{key}|-', template, 5.0, retry_timeout, EXPIRY, LEASE,
                          shared=shared, **options)


def take(engine: Engine, clock: FakeClock, key: str, owner: str, shared: bool = True, **options: Any) -> Run:
    return run(acquire(attempt(engine, key, owner, shared, **options), clock, lambda: False), engine, clock)


def holders(row: Optional[Dict[str, Any]]) -> Dict[str, str]:
    """{owner: entry version} of a row's shared holders."""
    return {value['owner']: value['version'] for value in ((row or {}).get('shared_holders') or {}).values()}


def test_readers_share_a_free_key_each_with_its_own_entry(engine: Engine) -> None:
    clock = FakeClock()
    first = take(engine, clock, 'k', 'reader-1')
    second = take(engine, clock, 'k', 'reader-2')
    assert isinstance(first.result, Written) and isinstance(second.result, Written)
    assert first.result.shared and second.result.shared
    assert not first.result.beside_others and second.result.beside_others
    assert first.result.replaced is None and second.result.replaced is None
    row = engine.row('k')
    assert holders(row) == {'reader-1': first.result.item['record_version_number'],
                            'reader-2': second.result.item['record_version_number']}
    # Each holder knows its entry by its acquisition id; the row's TTL is past the expiry period.
    assert set(row['shared_holders']) == {first.result.item['acquisition_id'], second.result.item['acquisition_id']}
    assert first.result.item['acquisition_id'] != first.result.item['record_version_number']
    assert row['expiry_time'] == int(clock.time() + EXPIRY) == second.result.item['expiry_time']
    assert row['lease_duration'] == Decimal('30.0') and row['owner_name'] == 'reader-2'
    assert Kind.ACQUIRE_ATTEMPT in first.events and Kind.TAKING_OVER not in first.events + second.events


def test_a_reader_with_a_longer_lease_raises_the_rows_a_shorter_one_keeps_it(engine: Engine) -> None:
    clock = FakeClock()
    take(engine, clock, 'k', 'reader-1', lease=10.0)
    take(engine, clock, 'k', 'reader-2', lease=40.0)
    assert engine.row('k')['lease_duration'] == Decimal('40.0')
    take(engine, clock, 'k', 'reader-3', lease=20.0)
    row = engine.row('k')
    assert row['lease_duration'] == Decimal('40.0') and len(holders(row)) == 3
    assert row['shared_holders'][next(iter(row['shared_holders']))]['lease'] in (Decimal('10.0'), Decimal('40.0'),
                                                                                 Decimal('20.0'))


def test_a_reader_waits_for_a_live_exclusive_holder_and_takes_it_over_after_its_lease(engine: Engine) -> None:
    clock = FakeClock()
    held = take(engine, clock, 'k', 'writer', shared=False, attributes={'purpose': 'x'})
    assert isinstance(held.result, Written)
    waited = take(engine, clock, 'k', 'reader', retry_timeout=20.0)
    assert isinstance(waited.result, TimedOut) and waited.result.blocking['owner_name'] == 'writer'
    assert Kind.TAKING_OVER not in waited.events and holders(engine.row('k')) == {}
    started = clock.now
    taken = take(engine, clock, 'k', 'reader', retry_timeout=100.0)
    assert isinstance(taken.result, Written) and taken.result.shared
    assert clock.now - started >= LEASE          # a whole lease, timed by the reader itself
    assert taken.result.replaced['owner_name'] == 'writer' and Kind.TAKING_OVER in taken.events
    row = engine.row('k')
    assert holders(row) == {'reader': taken.result.item['record_version_number']}
    assert 'purpose' not in row and 'acquisition_id' not in row    # the old holder's attributes went


def test_readers_take_a_released_key_and_leave_the_last_one_releases_it(engine: Engine) -> None:
    clock = FakeClock()
    first, second = take(engine, clock, 'k', 'reader-1'), take(engine, clock, 'k', 'reader-2')
    one = first.result.item
    version_before = engine.row('k')['record_version_number']
    answer = run(leave_write(engine.schema, 'k', '-', one['acquisition_id'], [one['record_version_number']],
                             clock, EXPIRY, True), engine, clock).result
    assert isinstance(answer, Applied)
    row = engine.row('k')
    assert holders(row) == {'reader-2': second.result.item['record_version_number']}
    assert row['record_version_number'] != version_before     # others see the row change
    two = second.result.item
    before = len(engine.sent)
    answer = run(leave_write(engine.schema, 'k', '-', two['acquisition_id'], [two['record_version_number']],
                             clock, EXPIRY, True), engine, clock).result
    assert isinstance(answer, Applied) and len(engine.sent) - before == 2    # guessed "others", then "last"
    row = engine.row('k')
    assert 'shared_holders' not in row and row['released_at'] == int(clock.time())
    assert row['lease_duration'] == 0 and row['expiry_time'] == int(clock.time() + EXPIRY)
    third = take(engine, clock, 'k', 'reader-3')       # a released row is free
    assert isinstance(third.result, Written) and not third.result.beside_others
    assert 'released_at' not in engine.row('k')


def test_a_last_reader_of_a_client_keeping_no_released_rows_deletes_the_row(engine: Engine) -> None:
    clock = FakeClock()
    one = take(engine, clock, 'k', 'reader').result.item
    answer = run(leave_write(engine.schema, 'k', '-', one['acquisition_id'], [one['record_version_number']],
                             clock, EXPIRY, False), engine, clock).result
    assert isinstance(answer, Applied) and engine.row('k') is None


def test_a_leave_with_a_version_not_the_entrys_is_refused_and_leaves_the_entry(engine: Engine) -> None:
    clock = FakeClock()
    one = take(engine, clock, 'k', 'reader').result.item
    answer = run(leave_write(engine.schema, 'k', '-', one['acquisition_id'], ['another'], clock, EXPIRY, True),
                 engine, clock).result
    assert isinstance(answer, Refused) and holders(engine.row('k')) == {'reader': one['record_version_number']}
    assert len(engine.sent) == 2      # one join, one leave: a refusal naming another version is final
    gone = run(leave_write(engine.schema, 'nothing', '-', 'me', ['v'], clock, EXPIRY, True), engine, clock).result
    assert isinstance(gone, Refused)


def test_a_leave_that_keeps_guessing_wrong_gives_up_with_an_error(engine: Engine) -> None:
    clock = FakeClock()
    one = take(engine, clock, 'k', 'reader').result.item
    # Every answer says the holder is the last one, then that others are there: never settled.
    others = {**engine.row('k')}
    crowded = {**others, 'shared_holders': {**others['shared_holders'], 'x': entry('x', 'vx', 10)}}
    answers = [Refused(crowded), Refused(others)] * _LEAVE_ATTEMPTS
    engine.faults = [lambda store, request, answer=answer: answer for answer in answers]
    answer = run(leave_write(engine.schema, 'k', '-', one['acquisition_id'], [one['record_version_number']],
                             clock, EXPIRY, True), engine, clock).result
    assert isinstance(answer, Failed) and not answer.maybe_applied
    assert f'{_LEAVE_ATTEMPTS} times' in str(answer.error)
    assert len(engine.sent) == 1 + _LEAVE_ATTEMPTS


def test_a_live_writer_marker_keeps_new_readers_out_until_its_lease_passed_unchanged(engine: Engine) -> None:
    clock = FakeClock()
    take(engine, clock, 'k', 'reader-1')
    marker = engine.store.send(mark_writer(engine.schema, 'k', '-', 'w', 'writer', 'm1', 10.0, None))
    assert isinstance(marker, Applied)
    kept_out = take(engine, clock, 'k', 'reader-2', retry_timeout=9.0)
    assert isinstance(kept_out.result, TimedOut) and len(holders(engine.row('k'))) == 1
    assert [request.operation for request in engine.sent[-2:]] == ['get_item', 'get_item']   # no join tried
    joined = take(engine, clock, 'k', 'reader-2', retry_timeout=30.0)
    assert isinstance(joined.result, Written)
    row = engine.row('k')
    assert 'writer_waiting' not in row and len(holders(row)) == 2    # the dead marker was removed


def test_a_join_removes_the_readers_presumed_dead_and_keeps_the_live_ones(engine: Engine) -> None:
    clock = FakeClock()
    take(engine, clock, 'k', 'dead')
    row = engine.row('k')
    watcher = attempt(engine, 'k', 'late', retry_timeout=LEASE + 5)
    result = run(acquire(watcher, clock, lambda: False), engine, clock)
    assert isinstance(result.result, Written)
    # It joined at once (beside the reader), and the reader was still live then.
    assert set(holders(engine.row('k'))) == {'dead', 'late'} and row is not None
    clock.now += LEASE / 2
    second = take(engine, clock, 'k', 'another')
    assert set(holders(engine.row('k'))) == {'dead', 'late', 'another'} and isinstance(second.result, Written)


def test_a_guess_that_others_hold_the_key_is_corrected_by_the_refusal(engine: Engine) -> None:
    clock = FakeClock()
    guessed = take(engine, clock, 'k', 'reader', join_beside=True)
    assert isinstance(guessed.result, Written) and not guessed.result.beside_others
    # The guess (refused: no row), a read of what is there (nothing), the join of a free key.
    assert engine.operations() == ['update_item', 'get_item', 'update_item']
    assert holders(engine.row('k')) == {'reader': guessed.result.item['record_version_number']}
    engine.sent.clear()
    beside = take(engine, clock, 'k', 'reader-2', join_beside=True)
    assert beside.result.beside_others and engine.operations() == ['update_item']


def test_a_writer_marks_a_shared_key_then_takes_it_once_every_reader_is_dead(engine: Engine) -> None:
    clock = FakeClock()
    reader = take(engine, clock, 'k', 'reader').result
    marks: List[Any] = []
    keep_out = attempt(engine, 'k', 'reader-2', retry_timeout=0.0)

    def a_reader_tries() -> None:
        row = engine.row('k')
        marks.append((row or {}).get('writer_waiting'))
        if len(marks) == 1:
            late = run(acquire(keep_out, FakeClock(clock.now), lambda: False), engine, clock)
            assert isinstance(late.result, TimedOut)      # the marker keeps it out

    writer = run(acquire(attempt(engine, 'k', 'writer', shared=False), clock, lambda: False), engine, clock,
                 on_sleep=a_reader_tries)
    assert isinstance(writer.result, Written) and not writer.result.shared
    assert marks[0]['owner'] == 'writer' and marks[0]['lease'] == Decimal('30.0')
    assert Kind.TAKING_OVER in writer.events and writer.result.replaced['shared_holders']
    row = engine.row('k')
    assert row['owner_name'] == 'writer' and 'shared_holders' not in row and 'writer_waiting' not in row
    assert row['record_version_number'] == writer.result.item['record_version_number']
    assert reader.item['acquisition_id'] not in str(row)


def test_a_writer_that_gives_up_takes_its_marker_off(engine: Engine) -> None:
    clock = FakeClock()
    take(engine, clock, 'k', 'reader')
    gave_up = run(acquire(attempt(engine, 'k', 'writer', shared=False, retry_timeout=10.0), clock, lambda: False),
                  engine, clock)
    assert isinstance(gave_up.result, TimedOut)
    assert 'writer_waiting' not in engine.row('k') and engine.sent[-1].operation == 'update_item'
    joined = take(engine, clock, 'k', 'reader-2', retry_timeout=0.0)     # readers join again at once
    assert isinstance(joined.result, Written)


def test_a_writer_interrupted_while_waiting_takes_its_marker_off(engine: Engine) -> None:
    clock = FakeClock()
    take(engine, clock, 'k', 'reader')
    closed = [False]

    def close() -> None:
        closed[0] = True
    interrupted = run(acquire(attempt(engine, 'k', 'writer', shared=False), clock, lambda: closed[0]), engine, clock,
                      on_sleep=close)
    assert isinstance(interrupted.error, DynamoDBLockError) and interrupted.settled == 1
    assert 'writer_waiting' not in engine.row('k')


def test_a_writer_waits_behind_another_live_writer_and_replaces_its_marker_once_dead(engine: Engine) -> None:
    clock = FakeClock()
    take(engine, clock, 'k', 'reader', lease=1000.0)
    assert isinstance(engine.store.send(mark_writer(engine.schema, 'k', '-', 'first', 'first-writer', 'm1', 10.0,
                                                    None)), Applied)
    engine.sent.clear()
    behind = run(acquire(attempt(engine, 'k', 'writer', shared=False, retry_timeout=9.0), clock, lambda: False),
                 engine, clock)
    assert isinstance(behind.result, TimedOut)
    assert engine.row('k')['writer_waiting']['owner'] == 'first-writer'
    # Its one write (refused: the readers' row came back), then reads: it never touched the marker.
    assert engine.operations() == ['update_item', 'get_item', 'get_item']
    seen: List[Any] = []
    replaced = run(acquire(attempt(engine, 'k', 'writer', shared=False, retry_timeout=20.0), clock, lambda: False),
                   engine, clock, on_sleep=lambda: seen.append(engine.row('k').get('writer_waiting')))
    assert isinstance(replaced.result, TimedOut)
    assert any(marker is not None and marker['owner'] == 'writer' for marker in seen)


def test_a_writer_marker_is_not_set_by_an_acquisition_that_sets_none(engine: Engine) -> None:
    clock = FakeClock()
    take(engine, clock, 'k', 'reader')
    result = run(acquire(attempt(engine, 'k', 'first', shared=False, retry_timeout=10.0, writer_marker=False),
                         clock, lambda: False), engine, clock)
    assert isinstance(result.result, TimedOut) and set(engine.operations()) == {'update_item', 'get_item'}
    assert engine.operations().count('update_item') == 2      # the reader's join, the refused write


def test_a_join_whose_answer_is_lost_but_landed_holds_the_key(engine: Engine) -> None:
    clock = FakeClock()

    def lands_unanswered(store: Store, request: Any) -> Any:
        store.send(request)
        return LOST
    engine.faults = [lands_unanswered]
    held = take(engine, clock, 'k', 'reader')
    assert isinstance(held.result, Written) and held.result.shared
    assert engine.operations() == ['update_item', 'get_item']
    assert holders(engine.row('k')) == {'reader': held.result.item['record_version_number']}


def test_a_lost_join_that_cannot_be_checked_is_taken_out_and_reported(engine: Engine) -> None:
    clock = FakeClock()

    def lands_unanswered(store: Store, request: Any) -> Any:
        store.send(request)
        return LOST
    engine.faults = [lands_unanswered, lambda store, request: LOST]
    failed = take(engine, clock, 'k', 'reader')
    assert isinstance(failed.error, DynamoDBLockError) and failed.error.code == DynamoDBLockError.UNKNOWN
    assert holders(engine.row('k')) == {}       # the entry that landed was taken out
    assert engine.operations() == ['update_item', 'get_item', 'update_item', 'update_item']


def test_a_join_refused_for_good_is_an_error_and_holds_nothing(engine: Engine) -> None:
    clock = FakeClock()
    throttled = judge_error(_client_error('ValidationException'))
    engine.faults = [lambda store, request: throttled]
    failed = take(engine, clock, 'k', 'reader')
    assert isinstance(failed.error, DynamoDBLockError) and engine.operations() == ['update_item']
    assert engine.row('k') is None


def _client_error(code: str) -> Any:
    from botocore.exceptions import ClientError
    return ClientError({'Error': {'Code': code, 'Message': 'scripted'},
                        'ResponseMetadata': {'HTTPStatusCode': 400, 'RetryAttempts': 0}}, 'UpdateItem')


def test_an_engine_that_returns_no_row_with_a_refusal_is_read(engine: Engine) -> None:
    clock = FakeClock()
    take(engine, clock, 'k', 'writer', shared=False)
    engine.sent.clear()
    engine.faults = [lambda store, request: Refused(None)]
    waited = take(engine, clock, 'k', 'reader', retry_timeout=0.0)
    assert isinstance(waited.result, TimedOut) and waited.result.blocking['owner_name'] == 'writer'
    assert engine.operations()[:2] == ['update_item', 'get_item']


def test_a_join_interrupted_in_flight_that_landed_is_taken_out(engine: Engine) -> None:
    clock = FakeClock()
    interrupted = run(acquire(attempt(engine, 'k', 'reader'), clock, lambda: False), engine, clock, interrupt_call=0)
    assert isinstance(interrupted.error, KeyboardInterrupt) and interrupted.settled == 1
    assert holders(engine.row('k')) == {}


def test_a_refused_join_interrupted_in_flight_leaves_the_others_alone(engine: Engine) -> None:
    clock = FakeClock()
    take(engine, clock, 'k', 'writer', shared=False)
    engine.sent.clear()
    interrupted = run(acquire(attempt(engine, 'k', 'reader', retry_timeout=0.0), clock, lambda: False), engine,
                      clock, interrupt_call=0)
    assert isinstance(interrupted.error, KeyboardInterrupt)
    assert engine.row('k')['owner_name'] == 'writer' and engine.operations() == ['update_item']


@dataclasses.dataclass
class HeldLock:
    _state: Any
    shared: bool = True


@dataclasses.dataclass
class State:
    acquisition_id: str


def test_a_readers_heartbeat_renews_its_entry_and_the_row_version_and_judges_its_own_entry(engine: Engine) -> None:
    clock = FakeClock()
    one = take(engine, clock, 'k', 'reader').result.item
    lock = HeldLock(State(one['acquisition_id']))
    renewal = Renewal('k', '-', [one['record_version_number']], 'v-new', int(clock.time() + EXPIRY))
    before = engine.row('k')['record_version_number']
    assert isinstance(engine.store.send(renewal_request(engine.schema, lock, renewal)), Applied)
    row = engine.row('k')
    assert holders(row) == {'reader': 'v-new'} and row['record_version_number'] != before
    again = engine.store.send(renewal_request(engine.schema, lock, renewal))     # the old version: refused
    assert isinstance(again, Refused)
    judged = entry_answer(lock, again)
    assert isinstance(judged, Refused) and judged.item['record_version_number'] == 'v-new'
    exclusive = entry_answer(HeldLock(lock._state, shared=False), again)
    assert exclusive is again
