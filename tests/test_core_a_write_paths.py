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

import dataclasses
from decimal import Decimal
from types import SimpleNamespace
from typing import Any, Dict, List, Optional

import pytest

from python_dynamodb_lock._core.acquire import TimedOut, acquire
from python_dynamodb_lock._core.answers import Applied, Refused, judge_error
from python_dynamodb_lock._core.effects import Call, Sleep
from python_dynamodb_lock._core.events import Kind
from python_dynamodb_lock._core.write import Blocked, Written, write_lock
from python_dynamodb_lock._model.errors import DynamoDBLockError
from python_dynamodb_lock._model.schema import lease_expiry
from helpers import assigned_values
from test_core_protocol import LOST_ANSWER, THROTTLED, FakeClock, client_error, drive, row, scripted
from test_core_protocol import attempt as scripted_attempt
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
    assert {event.key for event in done.emitted if event.kind is Kind.WAITING} == {'k|-'}
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
    assert done.error.message == (f"Could not acquire lock 'k'/'-' in table {engine.schema.table_name!r}: there is "
                                  'no item at that key (only_if_exists=True); nothing was written')
    assert engine.row('k') is None                 # the condition itself refused it: no row was created
    put(engine, title='an item of the application')
    held = take(engine, clock, 'k', 'me', shared=False, lock_existing_item=True, only_if_exists=True)
    assert isinstance(held.result, Written)
    row = engine.row('k')
    assert row['title'] == 'an item of the application' and row['owner_name'] == 'me'


# --------------------------------------------------------------------------------------------
# One write, scripted (``write_lock``): a takeover that also ends the dead holder's session is a
# transaction, which returns no values; a refusal without the row in the way. What is read
# after them decides the token handed back and the row reported in the way.
# --------------------------------------------------------------------------------------------

DEAD = {**row('v-dead', 'dead'), 'fencing_token': 5, 'session_id': 's1'}
CANCELLED = judge_error(client_error('TransactionCanceledException', 400, operation='TransactWriteItems'))


def write_once(*answers: Any, blocking: Optional[Dict[str, Any]] = DEAD, watch: Any = None,
               existing_item: bool = False) -> Any:
    session = watch if watch is not None else SimpleNamespace(session_id='s1', expired_version='sv-watched')
    an_attempt = dataclasses.replace(scripted_attempt(), lock_existing_item=existing_item)
    return drive(write_lock(an_attempt, FakeClock(), blocking, session if blocking is not None else None),
                 scripted(*answers))


class Landing:
    """Answers the transaction with ``answer`` and then the read with the lock row it wrote
    (its first action), with the fencing token ``token``."""

    def __init__(self, answer: Any, token: int) -> None:
        self.answer, self.token, self.sent = answer, token, None

    def transaction(self, request: Any) -> Any:
        self.sent = request
        return self.answer

    def read(self, request: Any) -> Any:
        lock_update = self.sent.params['TransactItems'][0]['Update']
        return Applied({'Item': {**lock_update['Key'], **assigned_values(lock_update), 'fencing_token': self.token}})


def test_a_session_takeover_ends_the_session_watched_and_reads_back_the_token_it_got() -> None:
    landing = Landing(Applied({}), 6)
    done = write_once(landing.transaction, landing.read)
    transaction, read = done.calls
    assert transaction.operation == 'transact_write_items'
    session_end = transaction.params['TransactItems'][1]['Update']
    assert session_end['Key'] == {'lock_key': 's1', 'sort_key': '-'}
    assert session_end['ExpressionAttributeValues'][':watched'] == 'sv-watched'
    assert read.operation == 'get_item' and read.params['Key'] == {'lock_key': 'k', 'sort_key': '-'}
    assert isinstance(done.result, Written) and done.result.item['fencing_token'] == 6
    assert done.result.replaced == DEAD


def test_each_session_end_writes_a_version_nobody_watched() -> None:
    versions = []
    for _ in range(2):
        done = write_once(Applied({}), Applied({}))
        versions.append(done.calls[0].params['TransactItems'][1]['Update']['ExpressionAttributeValues'][':new_version'])
    assert versions[0] != versions[1] and 'sv-watched' not in versions


def test_a_session_takeover_whose_row_was_taken_since_hands_back_no_token_of_the_next_holders() -> None:
    done = write_once(Applied({}), Applied({'Item': {**row('v-next', 'next'), 'fencing_token': 9}}))
    assert isinstance(done.result, Written) and 'fencing_token' not in done.result.item
    assert done.result.item['owner_name'] == 'me'


def test_a_cancelled_session_takeover_reports_the_row_in_the_way() -> None:
    holder = {**row('v-renewed', 'dead'), 'fencing_token': 5}
    done = write_once(CANCELLED, Applied({'Item': holder}))
    assert [request.operation for request in done.calls] == ['transact_write_items', 'get_item']
    assert done.calls[1].params['Key'] == {'lock_key': 'k', 'sort_key': '-'}
    assert isinstance(done.result, Blocked) and done.result.row == holder


def test_a_cancelled_session_takeover_that_finds_its_own_row_was_retried_and_landed() -> None:
    landing = Landing(CANCELLED, 6)
    done = write_once(landing.transaction, landing.read)
    assert isinstance(done.result, Written) and done.result.item['fencing_token'] == 6


def test_a_cancelled_session_takeover_of_a_lock_on_an_item_reads_a_released_lock_as_in_the_way() -> None:
    released = {**row('v-released', 'dead'), 'released_at': 1_700_000_000, 'lease_duration': 0}
    done = write_once(CANCELLED, Applied({'Item': released}), existing_item=True)
    assert isinstance(done.result, Blocked) and done.result.row == released   # taken over, its TTL removed


def test_a_session_takeover_whose_read_back_fails_names_the_read_and_the_lock() -> None:
    done = write_once(Applied({}), THROTTLED)
    assert isinstance(done.error, DynamoDBLockError) and done.error.code == DynamoDBLockError.UNKNOWN
    assert done.error.message.startswith("Could not read lock 'k'/'-' in table 'locks': ")
    assert done.error.__cause__ is THROTTLED.error


def test_a_refusal_without_the_row_reads_the_row_in_the_way() -> None:
    holder = row('v-holder', 'holder')
    done = write_once(Refused(None), Applied({'Item': holder}), blocking=None)
    write, read = done.calls
    assert write.operation == 'update_item' and read.operation == 'get_item'
    assert read.params['Key'] == {'lock_key': 'k', 'sort_key': '-'} and read.params['ConsistentRead'] is True
    assert isinstance(done.result, Blocked) and done.result.row == holder


def test_a_refusal_without_the_row_whose_read_fails_names_the_read_and_the_lock() -> None:
    done = write_once(Refused(None), THROTTLED, blocking=None)
    assert done.error.code == DynamoDBLockError.UNKNOWN and done.error.reason == THROTTLED.reason
    assert done.error.message.startswith("Could not read lock 'k'/'-' in table 'locks': ")


def test_a_lock_on_an_item_refused_by_a_released_lock_takes_that_row_over() -> None:
    released = {**row('v-released', 'old'), 'released_at': 1_700_000_000, 'lease_duration': 0}
    answered = write_once(Refused(released), blocking=None, existing_item=True)
    assert isinstance(answered.result, Blocked) and answered.result.row == released
    read_back = write_once(Refused(None), Applied({'Item': released}), blocking=None, existing_item=True)
    assert isinstance(read_back.result, Blocked) and read_back.result.row == released


def test_a_write_refused_by_a_holder_gone_when_read_is_sent_again_at_once_three_times() -> None:
    """Refused, then the row read is free (the holder left meanwhile): written again at once, up
    to three times, before the call with no time to wait gives up."""
    done = drive(acquire(scripted_attempt(retry_timeout=0.0), FakeClock(), lambda: False),
                 scripted(*[Refused(None), Applied({})] * 10))     # (more than enough)
    assert isinstance(done.result, TimedOut) and done.result.blocking is None
    assert [request.operation for request in done.calls] == ['update_item', 'get_item'] * 4
    assert done.sleeps == []


def test_a_wait_of_under_a_second_is_still_waited_and_the_row_read_again() -> None:
    holder = row('v-holder', 'holder')
    clock = FakeClock()
    done = drive(acquire(scripted_attempt(retry_timeout=0.5), clock, lambda: False),
                 scripted(Refused(holder), Applied({'Item': holder})), clock=clock)
    assert isinstance(done.result, TimedOut) and done.result.blocking['owner_name'] == 'holder'
    assert done.sleeps == [0.5] and [request.operation for request in done.calls] == ['update_item', 'get_item']


def refused_by_holders_that_leave(limit: int = 40) -> Any:
    """Every write refused without the row, every read finding the key free (the holder left)."""
    calls = [0]

    def answer(request: Any) -> Any:
        calls[0] += 1
        assert calls[0] <= limit, 'writes that never end'
        return Refused(None) if request.operation == 'update_item' else Applied({})
    return answer


def test_after_a_wait_the_three_immediate_re_writes_are_allowed_again() -> None:
    clock = FakeClock()
    done = drive(acquire(scripted_attempt(retry_timeout=5.0), clock, lambda: False), refused_by_holders_that_leave(),
                 clock=clock)
    assert isinstance(done.result, TimedOut) and done.sleeps == [5.0]
    round_ = ['update_item', 'get_item'] * 4
    assert [request.operation for request in done.calls] == round_ + ['get_item'] + round_


def test_a_read_after_a_wait_that_fails_names_the_read_and_the_lock() -> None:
    holder = row('v-holder', 'holder')
    clock = FakeClock()
    done = drive(acquire(scripted_attempt(retry_timeout=60.0), clock, lambda: False),
                 scripted(Refused(holder), THROTTLED), clock=clock)
    assert isinstance(done.error, DynamoDBLockError) and done.error.code == DynamoDBLockError.UNKNOWN
    assert done.error.message.startswith("Could not read lock 'k'/'-' in table 'locks': ")
    assert done.sleeps == [5.0]


def test_a_lock_handed_over_by_a_release_of_this_client_says_how_long_it_waited() -> None:
    clock = FakeClock()
    handed = Written({'record_version_number': 'v-handed', 'fencing_token': 8}, 1000.0)
    protocol = acquire(scripted_attempt(retry_timeout=60.0), clock, lambda: False)
    effect, value = protocol.send(None), None
    try:
        while True:
            if isinstance(effect, Call):
                value = Refused(row('v-holder', 'holder'))
            elif isinstance(effect, Sleep):
                clock.now += 2.5          # the release of this client hands the lock over 2.5 s in
                value = handed
            else:
                value = None
            effect = protocol.send(value)
    except StopIteration as done:
        result = done.value
    assert result.item == handed.item and result.waited == 2.5
