"""Two defects the simulation of the asyncio protocol found (tests/test_simulation_asyncio.py),
driven here against moto in-process on a manual clock: an acquiring write whose answer was
lost, interrupted while the read that checks it is in flight, and a release handing the lock
to a waiter whose answer was lost and whose check failed or was interrupted, left a row that
nobody was handed, blocking the key for a lease (python_dynamodb_lock/_core/write.py,
release.py). Now the row is freed apart from the caller."""
from __future__ import annotations

from typing import Any, Iterator

import pytest

from python_dynamodb_lock._core.acquire import acquire
from python_dynamodb_lock._core.events import Kind
from python_dynamodb_lock._core.release import ReleaseOutcome, free_handed, release
from test_core_protocol import FakeClock
from test_core_release_paths import _SCHEMA, held, settings
from test_core_requests_shapes import fresh_request_shapes  # noqa: F401 - autouse: shapes built afresh
from test_core_shared_steps import LOST, Engine, attempt, run, take
from python_dynamodb_lock.testing import moto_lock_table


@pytest.fixture(scope='module')
def table() -> Iterator[Any]:
    with moto_lock_table() as made:
        yield made


@pytest.fixture
def engine(table: Any) -> Engine:
    table.delete_row('k')
    engine = Engine(table)
    _SCHEMA[:] = [engine.schema]
    return engine


def lands_unanswered(store: Any, request: Any) -> Any:
    store.send(request)
    return LOST


def test_an_acquire_interrupted_while_checking_a_lost_answer_frees_the_row_it_wrote(engine: Engine) -> None:
    clock = FakeClock()
    engine.faults = [lands_unanswered]
    protocol = acquire(attempt(engine, 'k', 'me', shared=False), clock, lambda: False)
    result = run(protocol, engine, clock, interrupt_call=1)        # the read that checks the lost answer
    assert isinstance(result.error, KeyboardInterrupt) and result.settled == 1
    assert 'released_at' in engine.row('k')                         # nobody's row is left blocking the key


@pytest.mark.parametrize('check', ['fails', 'interrupted'])
def test_a_handover_whose_answer_was_lost_and_not_checked_frees_the_row_it_wrote_for_the_waiter(
        engine: Engine, check: str) -> None:
    clock = FakeClock()
    lock = held(take(engine, clock, 'k', 'me', shared=False).result.item, clock)
    waiter = attempt(engine, 'k', 'waiter', shared=False)
    engine.faults = [lands_unanswered] + ([lambda store, request: LOST] if check == 'fails' else [])
    done = run(release(settings(), lock, clock, successor=waiter), engine, clock,
               interrupt_call=1 if check == 'interrupted' else None)
    if check == 'fails':
        assert done.result.outcome == ReleaseOutcome.FAILED and done.result.handed is None
    else:
        assert isinstance(done.error, KeyboardInterrupt)
    assert done.settled == 1
    row = engine.row('k')
    assert row['owner_name'] == 'waiter' and 'released_at' in row    # handed to nobody: freed


def test_a_handed_row_that_could_not_be_freed_is_reported(engine: Engine) -> None:
    """Found by the simulation too: the free of a row handed to a waiter that gave up failed
    (throttled), and the row was left without a word."""
    clock = FakeClock()
    handed = take(engine, clock, 'k', 'waiter', shared=False).result
    engine.faults = [lambda store, request: LOST]
    done = run(free_handed(settings(), ('k', '-'), handed, clock, unique_identifier='k|-'), engine, clock)
    assert done.events == [Kind.ORPHAN_CLEANUP_FAILED] and done.emitted[0].key == 'k|-'
    assert 'released_at' not in engine.row('k')
