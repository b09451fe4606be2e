"""One acquiring write and the wait loop around it (``_core/write.py``, ``_core/acquire.py``),
driven against moto in-process on a manual clock (the drivers of test_core_shared_steps.py).

What a user and a metrics hook rely on: the row a new acquisition writes (a fresh version that
is also its acquisition id, the TTL and the lease's end counted from the writer's clock, no TTL
on an existing item, the first fencing token from the writer's wall clock in microseconds and
one more on each later acquisition), the ``acquire_attempt`` event of every write (its outcome,
whether it took a holder over, its latency), a closed client writing nothing even after a wait,
and a wait that ends at the deadline.
"""
from __future__ import annotations

from decimal import Decimal
from typing import Any, List

import pytest

from python_dynamodb_lock._core.acquire import TimedOut, acquire
from python_dynamodb_lock._core.answers import Applied
from python_dynamodb_lock._core.events import Kind
from python_dynamodb_lock._core.write import Written
from python_dynamodb_lock._model.errors import DynamoDBLockError
from python_dynamodb_lock._model.schema import lease_expiry
from test_core_protocol import LOST_ANSWER, THROTTLED, FakeClock
import test_core_shared_steps
from test_core_shared_steps import EXPIRY, LEASE, Engine, attempt, run, take


# The moto table of the module and the engine on it, made as test_core_shared_steps makes them (one
# table a module: creating one takes longer than a test).
table, engine = test_core_shared_steps.table, test_core_shared_steps.engine


def attempts_of(done: Any) -> List[Any]:
    return [event for event in done.emitted if event.kind is Kind.ACQUIRE_ATTEMPT]


def test_a_new_acquisition_writes_a_fresh_version_its_ttl_and_its_lease_end(engine: Engine) -> None:
    clock = FakeClock()
    first = take(engine, clock, 'k', 'me', shared=False).result
    row = engine.row('k')
    version = row['record_version_number']
    assert isinstance(first, Written) and first.item['record_version_number'] == version
    assert row['acquisition_id'] == version and len(version) == 36
    assert row['expiry_time'] == int(clock.time() + EXPIRY)
    assert row['lease_expiry'] == lease_expiry(clock.time(), LEASE)
    assert row['fencing_token'] == int(clock.time() * 1_000_000) + 1 == first.item['fencing_token']
    assert row['owner_name'] == 'me' and row['lease_duration'] == LEASE


def test_each_later_acquisition_takes_the_next_token_and_a_new_version(engine: Engine) -> None:
    clock = FakeClock()
    take(engine, clock, 'k', 'me', shared=False)
    before = engine.row('k')
    clock.now += LEASE + 1      # dead: taken over
    later = take(engine, clock, 'k', 'next', shared=False, retry_timeout=3 * LEASE).result
    row = engine.row('k')
    assert row['owner_name'] == 'next' and row['fencing_token'] == before['fencing_token'] + 1
    assert later.item['fencing_token'] == row['fencing_token']
    assert row['record_version_number'] != before['record_version_number']
    assert later.replaced['owner_name'] == 'me'


def test_a_lock_with_its_own_lease_writes_the_end_of_that_lease(engine: Engine) -> None:
    clock = FakeClock()
    take(engine, clock, 'k', 'me', shared=False, lease=7.5)
    assert engine.row('k')['lease_expiry'] == lease_expiry(clock.time(), 7.5)


def test_every_write_says_its_outcome_whether_it_took_over_and_how_long_it_took(engine: Engine) -> None:
    clock = FakeClock()
    first = take(engine, clock, 'k', 'me', shared=False)
    (applied,) = attempts_of(first)
    assert applied.key == 'k|-' and applied.fields == {'outcome': 'applied', 'takeover': False, 'duration': 0.0}
    held = take(engine, clock, 'k', 'other', shared=False, retry_timeout=0.0)
    assert isinstance(held.result, TimedOut)
    assert [event['outcome'] for event in attempts_of(held)] == ['refused']
    assert attempts_of(held)[0]['takeover'] is False
    clock.now += LEASE + 1
    taken = take(engine, clock, 'k', 'other', shared=False, retry_timeout=3 * LEASE)
    assert [(event['outcome'], event['takeover']) for event in attempts_of(taken)][-1] == ('applied', True)


def test_a_writes_latency_is_measured_from_before_it_was_sent(engine: Engine) -> None:
    clock = FakeClock()

    def slow(store: Any, request: Any) -> Any:
        clock.now += 0.5
        return store.send(request)

    engine.faults = [slow]
    (write,) = attempts_of(take(engine, clock, 'k', 'me', shared=False))
    assert write['duration'] == 0.5 and write['outcome'] == 'applied'


def test_a_failed_write_says_failed(engine: Engine) -> None:
    clock = FakeClock()
    engine.faults = [lambda store, request: THROTTLED]
    done = take(engine, clock, 'k', 'me', shared=False)
    assert isinstance(done.error, DynamoDBLockError) and done.error.code == DynamoDBLockError.UNKNOWN
    assert [event['outcome'] for event in attempts_of(done)] == ['failed']
    assert done.error.message.startswith("Could not acquire lock 'k'/'-' in table ")
    assert engine.row('k') is None


def test_a_lost_answer_to_a_write_that_landed_is_an_acquisition(engine: Engine) -> None:
    clock = FakeClock()

    def lands_unanswered(store: Any, request: Any) -> Any:
        assert isinstance(store.send(request), Applied)
        return LOST_ANSWER

    engine.faults = [lands_unanswered]
    done = take(engine, clock, 'k', 'me', shared=False)
    assert isinstance(done.result, Written)
    assert done.result.item['record_version_number'] == engine.row('k')['record_version_number']


def test_a_client_closed_while_waiting_writes_nothing_more(engine: Engine) -> None:
    clock = FakeClock()
    take(engine, clock, 'k', 'holder', shared=False)
    closed = [False]

    def close() -> None:
        closed[0] = True

    sent_before = len(engine.sent)
    done = run(acquire(attempt(engine, 'k', 'me', shared=False, retry_timeout=100.0), clock, lambda: closed[0]),
               engine, clock, on_sleep=close)
    assert done.error.code == DynamoDBLockError.CLIENT_SHUTDOWN
    assert done.error.message == 'The lock client has been closed'
    assert [request.operation for request in engine.sent[sent_before:]] == ['update_item']   # no read after


def test_a_wait_ends_at_its_deadline_with_the_holder_named(engine: Engine) -> None:
    clock = FakeClock()
    take(engine, clock, 'k', 'holder', shared=False)
    start = clock.monotonic()
    done = run(acquire(attempt(engine, 'k', 'me', shared=False, retry_timeout=12.0), clock, lambda: False),
               engine, clock)
    assert isinstance(done.result, TimedOut) and done.result.blocking['owner_name'] == 'holder'
    assert clock.monotonic() - start == pytest.approx(12.0)
    waits = [event['retry_in'] for event in done.emitted if event.kind is Kind.WAITING]
    assert waits == [5.0, 5.0, 2.0]
    (timed_out,) = [event for event in done.emitted if event.kind is Kind.ACQUIRE_TIMED_OUT]
    assert timed_out.fields == {'owner': 'holder', 'duration': pytest.approx(12.0)}


def test_a_lease_end_is_a_decimal_the_table_stores_exactly() -> None:
    assert isinstance(lease_expiry(1.5, 2.0), Decimal)


def put(engine: Engine, **item: Any) -> None:
    from python_dynamodb_lock._wire.requests import Request
    engine.store.send(Request('put_item', {'TableName': engine.schema.table_name,
                                           'Item': {'lock_key': 'k', 'sort_key': '-', **item}}))


def test_a_holder_writing_no_fencing_token_is_warned_about_once_and_taken_over_after_its_lease(
        engine: Engine) -> None:
    clock = FakeClock()
    put(engine, owner_name='published', record_version_number='v-old', lease_duration=Decimal(20),
        expiry_time=int(clock.time() + EXPIRY))
    done = run(acquire(attempt(engine, 'k', 'me', shared=False, retry_timeout=60.0), clock, lambda: False),
               engine, clock)
    warnings = [event for event in done.emitted if event.kind is Kind.UNFENCED_HOLDER]
    assert len(warnings) == 1 and warnings[0].fields == {'owner': 'published'} and warnings[0].key == 'k|-'
    (taking,) = [event for event in done.emitted if event.kind is Kind.TAKING_OVER]
    assert taking['owner'] == 'published' and taking['version'] == 'v-old'
    assert taking['unchanged_for'] == taking['duration'] >= 20.0
    assert isinstance(done.result, Written) and engine.row('k')['owner_name'] == 'me'


def test_a_fenced_holder_raises_no_warning(engine: Engine) -> None:
    clock = FakeClock()
    take(engine, clock, 'k', 'holder', shared=False)
    done = run(acquire(attempt(engine, 'k', 'me', shared=False, retry_timeout=6.0), clock, lambda: False),
               engine, clock)
    assert Kind.UNFENCED_HOLDER not in done.events and Kind.NOT_A_LOCK not in done.events


def test_an_applications_item_in_the_way_of_a_plain_lock_is_said_once_and_never_written_over(
        engine: Engine) -> None:
    clock = FakeClock()
    put(engine, title='an item of the application')
    done = run(acquire(attempt(engine, 'k', 'me', shared=False, retry_timeout=2 * LEASE), clock, lambda: False),
               engine, clock)
    assert isinstance(done.result, TimedOut)
    (said,) = [event for event in done.emitted if event.kind is Kind.NOT_A_LOCK]
    assert said.key == 'k|-' and said.fields == {'owner': 'an unknown owner'}
    assert engine.row('k') == {'lock_key': 'k', 'sort_key': '-', 'title': 'an item of the application'}


def test_only_if_exists_writes_nothing_where_there_is_no_item_and_locks_the_item_that_is_there(
        engine: Engine) -> None:
    clock = FakeClock()
    done = take(engine, clock, 'k', 'me', shared=False, lock_existing_item=True, only_if_exists=True)
    assert isinstance(done.error, DynamoDBLockError) and done.error.code == DynamoDBLockError.ITEM_NOT_FOUND
    assert engine.row('k') is None                 # the condition itself refused it: no row was created
    put(engine, title='an item of the application')
    held = take(engine, clock, 'k', 'me', shared=False, lock_existing_item=True, only_if_exists=True)
    assert isinstance(held.result, Written)
    row = engine.row('k')
    assert row['title'] == 'an item of the application' and row['owner_name'] == 'me'
