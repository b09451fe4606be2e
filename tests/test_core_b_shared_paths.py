"""Shared (read) locks' paths not covered by test_core_shared_steps.py, driven against moto
in-process on a manual clock the same way: a reader that meets a released row still carrying a
live writer's marker waits for that writer without writing again, and joins once the marker is
dead; the events of a reader's join carry what a metrics hook reads.
"""
from __future__ import annotations

from decimal import Decimal
from typing import Any, List

import pytest

from python_dynamodb_lock._core.acquire import TimedOut, acquire
from python_dynamodb_lock._core.events import Kind
from python_dynamodb_lock._core.write import Written
from test_core_protocol import FakeClock
from test_core_shared_steps import LEASE, Engine, attempt, holders, run, table  # noqa: F401 (table: fixture)


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
