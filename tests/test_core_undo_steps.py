"""What an exclusive acquisition leaves when its write is interrupted or unanswered
(python_dynamodb_lock/_core/acquire.py: ``undo_write``, ``free_if_landed``, the watch for a late
landing, ``_settle_unanswered_write``), driven against moto in-process on a manual clock, as in
test_core_shared_steps.py: a write of ours that landed is freed, a refused one leaves the
holder alone, one whose answer can never be known is watched for one lease and freed if it
lands late, and a lost answer is settled by one read."""
from __future__ import annotations

from typing import Any, List

import pytest

from python_dynamodb_lock._core.acquire import acquire
from python_dynamodb_lock._core.write import Written
from python_dynamodb_lock._core.events import Kind
from python_dynamodb_lock import DynamoDBLockError
from test_core_protocol import SERVER_ERROR, THROTTLED, UNREACHABLE, FakeClock
from test_core_shared_steps import EXPIRY, LEASE, LOST, Engine, attempt, run, table  # noqa: F401 (table: fixture)


@pytest.fixture
def engine(table: Any) -> Engine:      # noqa: F811 (the fixture of the shared module's table)
    table.delete_row('k')
    return Engine(table)


def acquiring(engine: Engine, clock: FakeClock, owner: str = 'me', **options: Any) -> Any:
    return acquire(attempt(engine, 'k', owner, shared=False, attributes={'purpose': 'p'}, **options), clock,
                   lambda: False)


def test_an_interrupted_write_that_landed_is_freed_at_once(engine: Engine) -> None:
    clock = FakeClock()
    result = run(acquiring(engine, clock), engine, clock, interrupt_call=0)
    assert isinstance(result.error, KeyboardInterrupt) and result.settled == 1
    row = engine.row('k')
    assert row['released_at'] == int(clock.time()) and row['expiry_time'] == int(clock.time() + EXPIRY)
    assert 'purpose' not in row
    assert engine.operations() == ['update_item', 'update_item']      # the write, its undo: no read, no watch


def test_an_interrupted_write_by_a_client_keeping_no_released_rows_deletes_its_row(engine: Engine) -> None:
    clock = FakeClock()
    run(acquiring(engine, clock, keep_released_rows=False), engine, clock, interrupt_call=0)
    assert engine.row('k') is None


def test_an_interrupted_write_that_was_refused_leaves_the_holder_alone(engine: Engine) -> None:
    clock = FakeClock()
    held = run(acquiring(engine, clock, 'holder'), engine, clock).result
    assert isinstance(held, Written)
    engine.sent.clear()
    result = run(acquiring(engine, clock), engine, clock, interrupt_call=0)
    assert isinstance(result.error, KeyboardInterrupt)
    assert engine.row('k')['record_version_number'] == held.item['record_version_number']
    assert len(engine.sent) == 1


def test_an_interrupted_write_refused_before_it_was_applied_is_not_undone(engine: Engine) -> None:
    clock = FakeClock()
    from python_dynamodb_lock._core.answers import judge_error
    from test_core_protocol import client_error
    invalid = judge_error(client_error('ValidationException', 400))
    engine.faults = [lambda store, request: invalid]
    result = run(acquiring(engine, clock), engine, clock, interrupt_call=0)
    assert isinstance(result.error, KeyboardInterrupt) and len(engine.sent) == 1


def test_a_write_whose_answer_can_never_be_known_is_watched_for_a_lease_and_freed_if_it_lands_late(
        engine: Engine) -> None:
    clock = FakeClock()
    protocol = acquiring(engine, clock)
    reads: List[float] = []
    started = clock.now

    def lands_late() -> None:
        reads.append(clock.now - started)
        if len(reads) == 3:      # the write arrives now, after the caller gave up on it
            engine.store.send(engine.held_back[0])
    result = run(protocol, engine, clock, interrupt_call=0, unsent=True, on_sleep=lands_late)
    assert isinstance(result.error, KeyboardInterrupt)
    assert 'released_at' in engine.row('k')        # freed by the watch
    assert reads == [0.25, 0.75, 1.75]             # the first look after 0.25 s, then twice as late
    assert Kind.ORPHAN_UNVERIFIED not in result.events


def test_a_write_that_never_lands_is_watched_for_one_lease_then_left(engine: Engine) -> None:
    clock = FakeClock()
    started = clock.now
    result = run(acquiring(engine, clock), engine, clock, interrupt_call=0, unsent=True)
    assert isinstance(result.error, KeyboardInterrupt)
    assert engine.row('k') is None
    gaps = [0.25, 0.5, 1.0, 2.0, 4.0, 5.0, 5.0, 5.0, 5.0, 2.25]     # up to 5 s apart, for one lease
    assert engine.operations() == ['get_item'] * (1 + len(gaps))
    assert clock.now - started == pytest.approx(LEASE) and sum(gaps) == pytest.approx(LEASE)
    assert Kind.ORPHAN_UNVERIFIED not in result.events


def test_a_watch_that_could_never_read_the_row_says_so(engine: Engine) -> None:
    clock = FakeClock()
    engine.faults = [lambda store, request: LOST] * 100
    result = run(acquiring(engine, clock), engine, clock, interrupt_call=0, unsent=True)
    assert isinstance(result.error, KeyboardInterrupt)
    assert result.events.count(Kind.ORPHAN_UNVERIFIED) == 1


def test_a_lost_answer_to_a_write_that_landed_is_settled_by_one_read(engine: Engine) -> None:
    clock = FakeClock()

    def lands_unanswered(store: Any, request: Any) -> Any:
        store.send(request)
        return LOST
    engine.faults = [lands_unanswered]
    held = run(acquiring(engine, clock), engine, clock)
    assert isinstance(held.result, Written)
    assert engine.operations() == ['update_item', 'get_item']
    assert engine.row('k')['record_version_number'] == held.result.item['record_version_number']


def test_a_lost_answer_to_a_write_that_did_not_land_is_an_error(engine: Engine) -> None:
    clock = FakeClock()
    engine.faults = [lambda store, request: SERVER_ERROR]
    failed = run(acquiring(engine, clock), engine, clock)
    assert isinstance(failed.error, DynamoDBLockError) and failed.error.code == DynamoDBLockError.UNKNOWN
    assert engine.operations() == ['update_item', 'get_item'] and engine.row('k') is None
    assert 'Could not acquire' in str(failed.error)


@pytest.mark.parametrize('cleanup, event', [(None, None), (UNREACHABLE, Kind.ORPHAN_UNVERIFIED),
                                            (THROTTLED, Kind.ORPHAN_CLEANUP_FAILED)])
def test_when_the_read_fails_too_our_row_is_freed_blind_or_the_orphan_reported(engine: Engine, cleanup: Any,
                                                                              event: Any) -> None:
    clock = FakeClock()

    def lands_unanswered(store: Any, request: Any) -> Any:
        store.send(request)
        return LOST
    engine.faults = [lands_unanswered, lambda store, request: LOST]
    if cleanup is not None:
        engine.faults.append(lambda store, request: cleanup)
    failed = run(acquiring(engine, clock), engine, clock)
    assert isinstance(failed.error, DynamoDBLockError)
    assert engine.operations() == ['update_item', 'get_item', 'update_item']
    if cleanup is None:
        assert 'released_at' in engine.row('k') and not any(kind.name.startswith('ORPHAN') for kind in failed.events)
    else:
        assert 'released_at' not in engine.row('k') and failed.events.count(event) == 1
