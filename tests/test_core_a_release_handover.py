"""A release that hands the lock over (python_dynamodb_lock/_core/release.py), against moto
in-process on a manual clock or with scripted answers: a release with a waiter of this client
writes the waiter's row in one write, with the next fencing token and the release's attributes
(not over an application's item's own), is undone when interrupted, and still hands the row when
its answer was a retry meeting its own row or was lost and read back; a row handed to a waiter
that had left is freed, keeping what the release left. (Helpers: test_core_release_paths.py.)
"""
from __future__ import annotations

import uuid
from typing import Any, List

import pytest

from python_dynamodb_lock._core.answers import Applied, Refused
from python_dynamodb_lock._core.release import ReleaseOutcome, ReleaseSettings, free_handed, release
from python_dynamodb_lock._core.write import AcquireAttempt, Written
from test_core_protocol import LOST_ANSWER, FakeClock, drive, scripted
from test_core_release_paths import _SCHEMA, Lock, _put, _row, _state, held, settings
from test_core_requests_shapes import fresh_request_shapes  # noqa: F401 - autouse: shapes built afresh
import test_core_shared_steps
from test_core_shared_steps import EXPIRY, LEASE, Engine, attempt, run, take


# The moto table of the module and the engine on it, made as test_core_shared_steps makes them (one
# table a module: creating one takes longer than a test).
table, engine = test_core_shared_steps.table, test_core_shared_steps.engine


@pytest.fixture(autouse=True)
def _schema(engine: Engine) -> None:
    _SCHEMA[:] = [engine.schema]


# -- a row handed to a waiter that had left ------------------------------------------------------

def test_a_handed_row_nobody_took_is_freed_keeping_the_releases_attributes(engine: Engine) -> None:
    clock = FakeClock()
    item = take(engine, clock, 'k', 'waiter', shared=False, attributes={'mine': 1}).result.item
    row = engine.row('k')
    handed = Written({**row, 'result': 'ok'}, clock.monotonic())
    clock.now += 4
    run(free_handed(settings(), ('k', '-'), handed, clock, {'result': 'ok'}), engine, clock)
    freed = engine.row('k')
    assert freed['released_at'] == int(clock.time()) and freed['expiry_time'] == int(clock.time() + EXPIRY)
    assert freed['record_version_number'] != item['record_version_number'] and 'mine' not in freed
    assert freed['lease_duration'] == 0 and freed['result'] == 'ok'
    assert str(uuid.UUID(freed['record_version_number'])) == freed['record_version_number']   # a fresh version


def test_a_handed_row_of_a_lock_on_an_item_loses_only_the_lock(engine: Engine) -> None:
    clock = FakeClock()
    engine.store.send(_put(engine, {'lock_key': 'k', 'sort_key': '-', 'owner_name': 'w', 'lease_duration': 30,
                                    'record_version_number': 'v1', 'title': 'mine'}))
    handed = Written({'lock_key': 'k', 'sort_key': '-', 'owner_name': 'w', 'record_version_number': 'v1',
                      'title': 'mine', 'lease_duration': 30}, 0.0)
    run(free_handed(settings(), ('k', '-'), handed, clock, {'result': 'ok'}), engine, clock)
    assert engine.row('k') == {'lock_key': 'k', 'sort_key': '-', 'title': 'mine'}     # the item's, untouched
    engine.store.send(_put(engine, {'lock_key': 'k', 'sort_key': '-', 'owner_name': 'w', 'lease_duration': 30,
                                    'record_version_number': 'v2'}))
    own = Written({'lock_key': 'k', 'sort_key': '-', 'owner_name': 'w', 'record_version_number': 'v2',
                   'lease_duration': 30}, 0.0, own_row=True)
    run(free_handed(settings(keep=False), ('k', '-'), own, clock, None), engine, clock)
    assert engine.row('k') is None      # a row that held nothing but the lock: freed as a plain one


# -- a release that hands the lock to a waiter of this client -------------------------------------

def test_a_release_hands_the_lock_to_a_waiter_in_one_write_with_the_next_token(engine: Engine) -> None:
    clock = FakeClock()
    item = take(engine, clock, 'k', 'me', shared=False, attributes={'purpose': 'p'}).result.item
    token = engine.row('k')['fencing_token']
    lock = held(item, clock, additional_attributes={'purpose': 'p'})
    waiter = attempt(engine, 'k', 'waiter', shared=False, attributes={'mine': 'm'})
    clock.now += 2
    result = run(release(settings(), lock, clock, successor=waiter, attributes={'result': 'r'}), engine,
                 clock).result
    assert result.outcome is ReleaseOutcome.RELEASED and len(engine.sent) == 2     # one write each way
    row = engine.row('k')
    assert row['owner_name'] == 'waiter' and row['fencing_token'] == token + 1
    assert row['mine'] == 'm' and row['result'] == 'r' and 'purpose' not in row and 'released_at' not in row
    handed = result.handed
    assert handed.item['record_version_number'] == row['record_version_number'] != item['record_version_number']
    assert handed.item['fencing_token'] == token + 1 and handed.item['result'] == 'r'
    assert handed.attempt_started == clock.monotonic() and handed.own_row is False
    assert row['expiry_time'] == int(clock.time() + EXPIRY)


def test_a_handover_interrupted_in_flight_frees_the_row_it_wrote_for_the_waiter(engine: Engine) -> None:
    clock = FakeClock()
    item = take(engine, clock, 'k', 'me', shared=False).result.item
    lock = held(item, clock)
    waiter = attempt(engine, 'k', 'waiter', shared=False)
    done = run(release(settings(), lock, clock, successor=waiter), engine, clock, interrupt_call=0)
    assert isinstance(done.error, KeyboardInterrupt) and done.settled == 1
    row = engine.row('k')
    assert 'released_at' in row and row['lease_duration'] == 0    # nobody's row is left blocking the key
    assert lock._state.release_maybe_applied


@pytest.mark.parametrize('on_item, own_row', [(False, False), (True, False), (True, True)])
def test_a_handed_row_keeps_what_the_release_left_unless_it_is_an_applications_item(on_item: bool,
                                                                                    own_row: bool) -> None:
    clock = FakeClock()
    schema = _SCHEMA[0]
    template = schema.lock_item('k', '-', 'waiter', LEASE, '', 0, {})
    for name in ('record_version_number', 'expiry_time'):
        template.pop(name)
    successor = AcquireAttempt(schema, 'k', '-', 'k|-', template, 5.0, 10.0, EXPIRY, LEASE,
                               lock_existing_item=on_item)
    lock = Lock(_state(clock), lock_existing_item=on_item)
    lock._state.own_row = own_row
    answer = Applied({'Attributes': {'lock_key': 'k', 'sort_key': '-', 'title': 'the items', 'fencing_token': 6}})
    done = drive(release(ReleaseSettings(schema, EXPIRY), lock, clock, successor=successor), scripted(answer),
                 clock=clock)
    handed = done.result.handed
    assert handed.item['fencing_token'] == 6 and handed.item['owner_name'] == 'waiter'
    assert ('title' in handed.item) is (not on_item)      # the item's own attributes stay the application's
    assert handed.own_row is (on_item and own_row)


def _written_version(request: Any) -> str:
    """The version a handover's write gives the row (the successor's new version)."""
    import re
    expression = request.params['UpdateExpression']
    placeholder = re.search(r'record_version_number = (:a\d+)', expression).group(1)
    return str(request.params['ExpressionAttributeValues'][placeholder])


@pytest.mark.parametrize('how', ['retry-met-our-row', 'lost-answer-then-read'])
def test_a_handover_whose_answer_did_not_say_so_still_hands_the_row_with_its_token(how: str) -> None:
    clock = FakeClock()
    schema = _SCHEMA[0]
    template = schema.lock_item('k', '-', 'waiter', LEASE, '', 0, {})
    for name in ('record_version_number', 'expiry_time'):
        template.pop(name)
    successor = AcquireAttempt(schema, 'k', '-', 'k|-', template, 5.0, 10.0, EXPIRY, LEASE)
    versions: List[str] = []

    def write(request: Any) -> Any:
        versions.append(_written_version(request))
        if how == 'retry-met-our-row':
            return Refused(_row(versions[0], 'waiter', fencing_token=8), retried=True)
        return LOST_ANSWER

    answers = [write] + ([lambda request: Applied({'Item': _row(versions[0], 'waiter', fencing_token=8)})]
                         if how == 'lost-answer-then-read' else [])
    done = drive(release(ReleaseSettings(schema, EXPIRY), Lock(_state(clock)), clock, successor=successor),
                 scripted(*answers), clock=clock)
    assert done.result.outcome is ReleaseOutcome.RELEASED
    assert done.result.handed is not None and done.result.handed.item['fencing_token'] == 8
    assert done.result.handed.item['record_version_number'] == versions[0]
