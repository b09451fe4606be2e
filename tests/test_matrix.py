"""The combination matrix (issue 27): every acquire entry point (``acquire_lock``,
``try_acquire_lock``, ``acquire_first_lock``, ``acquire_locks``, ``try_acquire_locks``) x both
clients (threaded, asyncio) x each feature, on DynamoDB Local.

Features: ``session=True``; ``shared=True`` (and under a session); an existing item; a per-lock
``lease_duration``; ``keep_row``; ``release(attributes=...)``; a dead holder taken over by
repeated one-attempt calls, under a session, and by a waiting call; a stream of readers in front
of a writer; cancellation before, while waiting (on an exclusive holder, on shared ones), while
the write is in flight, and with a
``cancel`` of the wrong type. A feature an entry point does not accept is a cell asserting the
refusal. The scenarios and their invariants are in ``tests/_matrix`` (one function per feature;
the invariants are checked from another client and by reading the table).

Every cell runs on a fresh table, with hand-driven clients on one ManualClock: leases are fake
seconds (a few), so a cell takes well under a second of real time, except the write held in
flight (its answer comes a few real seconds late).
"""
from __future__ import annotations

import dataclasses
import inspect
from typing import Any, Callable, Dict, Iterator, List, Tuple

import pytest

from _matrix import cells, interrupts, readers
from _matrix.entries import ACCEPTS, ENTRY_POINTS, OPTIONS, accepts, waits
from helpers import ASYNCIO, THREADED, LockClients
from python_dynamodb_lock._client.call import AcquireCall
from python_dynamodb_lock._client.sessions import Sessions
from python_dynamodb_lock.aio import AsyncDynamoDBLockClient
from python_dynamodb_lock.python_dynamodb_lock import DynamoDBLockClient
from python_dynamodb_lock.testing import LockTable

Check = Callable[[cells.Cell], None]


def _every(entry: str, kind: str) -> bool:
    return True


#: feature -> (its check, which (entry point, client kind) it is a cell of).
FEATURES: Dict[str, Tuple[Check, Callable[[str, str], bool]]] = {
    'exclusive': (cells.exclusive, _every),
    'session': (cells.session, _every),
    'shared': (cells.shared, _every),
    'session+shared': (cells.session_shared, lambda entry, kind: accepts(entry, kind, 'shared')),
    'existing_item': (cells.existing_item, _every),
    'lease': (cells.lease, _every),
    'keep_row': (cells.keep_row, _every),
    'release_attributes': (cells.release_attributes, _every),
    'dead_holder_tries': (cells.dead_holder_tries, _every),
    'dead_session_holder': (cells.dead_session_holder, _every),
    'dead_holder_waiting': (cells.dead_holder_waiting, lambda entry, kind: waits(entry)),
    'reader_stream': (readers.reader_stream, _every),
    'cancel_before': (interrupts.cancel_before, _every),
    'cancel_waiting': (interrupts.cancel_waiting, lambda entry, kind: waits(entry)),
    'cancel_waiting_on_readers': (interrupts.cancel_waiting_on_readers, lambda entry, kind: waits(entry)),
    'cancel_in_flight': (interrupts.cancel_in_flight,
                         lambda entry, kind: kind == ASYNCIO or accepts(entry, kind, 'cancel')),
    'cancel_wrong_type': (interrupts.cancel_wrong_type,
                          lambda entry, kind: kind == ASYNCIO or accepts(entry, kind, 'cancel')),
}

CELLS: List[Tuple[str, str, str]] = [(kind, entry, feature) for kind in (THREADED, ASYNCIO) for entry in ENTRY_POINTS
                                     for feature, (_, applies) in FEATURES.items() if applies(entry, kind)]


@pytest.fixture
def matrix_clients(request: pytest.FixtureRequest, local_engine: LockTable) -> Iterator[LockClients]:
    """Lock clients of the cell's kind on its table (the kind is the cell's, not ``client_kind``)."""
    kind = request.param
    if kind == ASYNCIO:
        pytest.importorskip('aiobotocore')
    factory = LockClients(local_engine, kind=kind)
    try:
        yield factory
    finally:
        factory.close_all()


@pytest.mark.parametrize(('matrix_clients', 'entry', 'feature'), CELLS, indirect=['matrix_clients'],
                         ids=[f'{kind}-{entry}-{feature}' for kind, entry, feature in CELLS])
def test_cell(local_engine: LockTable, matrix_clients: LockClients, entry: str, feature: str) -> None:
    check, _ = FEATURES[feature]
    check(cells.Cell(local_engine, matrix_clients, entry))


def test_the_table_of_accepted_options_is_the_signatures() -> None:
    """:data:`_matrix.entries.ACCEPTS` says what each signature takes (a changed signature
    changes the matrix's cells, knowingly)."""
    for (entry, kind), accepted in ACCEPTS.items():
        client_class: Any = DynamoDBLockClient if kind == THREADED else AsyncDynamoDBLockClient
        parameters = set(inspect.signature(getattr(client_class, entry)).parameters)
        assert {option for option in OPTIONS if option in parameters} == set(accepted), (entry, kind)


# --- the matrix bites: a feature removed from one entry point turns its cell red ----------

def _no_session_start(self: Any, attempts: Any) -> Any:
    """``Sessions.starting`` without the session row: the attempts as they are."""
    return list(attempts)
    yield   # a generator, as the protocol step it replaces


_real_attempt = AcquireCall.attempt


def _no_writer_marker(self: Any, *args: Any) -> Any:
    """``AcquireCall.attempt`` with the writer-waiting marker turned off."""
    return dataclasses.replace(_real_attempt(self, *args), writer_marker=False)


@pytest.mark.parametrize('matrix_clients', [THREADED, ASYNCIO], indirect=True)
def test_the_session_cell_fails_when_acquire_lock_skips_the_session_start(
        local_engine: LockTable, matrix_clients: LockClients, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without its session row, ``acquire_lock`` under ``session=True`` fails its cell."""
    monkeypatch.setattr(Sessions, 'starting', _no_session_start)
    with pytest.raises(AssertionError) as failed:
        cells.session(cells.Cell(local_engine, matrix_clients, 'acquire_lock'))
    assert 'two holders at once' in str(failed.value) or 'does not exist' in str(failed.value)


@pytest.mark.parametrize('matrix_clients', [THREADED, ASYNCIO], indirect=True)
def test_the_reader_stream_cell_fails_when_acquire_lock_sets_no_writer_marker(
        local_engine: LockTable, matrix_clients: LockClients, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without its writer-waiting marker, ``acquire_lock`` is starved by readers: its cell fails."""
    monkeypatch.setattr(AcquireCall, 'attempt', _no_writer_marker)
    with pytest.raises(AssertionError, match='starved by a stream of readers'):
        readers.reader_stream(cells.Cell(local_engine, matrix_clients, 'acquire_lock'))
