"""The invariants a user relies on, checked from another lock client and by reading the table
directly (never only in the process that holds).

Each check raises AssertionError naming what broke.
"""
from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterator, List, Optional, Sequence, Tuple, Type, Union

import pytest

from _matrix.entries import Held, run_on_loop
from helpers import CallRecorder, is_asyncio
from python_dynamodb_lock.testing import LockTable

Key = Tuple[str, str]


def try_all(client: Any, keys: Sequence[Key]) -> Optional[Any]:
    """``client.try_acquire_locks(keys)`` on either client: the multi-lock, or None."""
    wanted = [tuple(key) for key in keys]
    if is_asyncio(client):
        return run_on_loop(client, lambda: client.async_client.try_acquire_locks(wanted))
    return client.try_acquire_locks(wanted)


def release_all(client: Any, multi: Any) -> None:
    if is_asyncio(client):
        async def release() -> None:
            await multi.release(best_effort=False)

        run_on_loop(client, release)
        return
    multi.release(best_effort=False)


def assert_exclusive(checker: Any, keys: Sequence[Key], what: str = 'held') -> None:
    """No second exclusive holder: another client's ``try_acquire_lock`` on each key returns
    None, and so does its ``try_acquire_locks`` on all of them."""
    for partition_key, sort_key in keys:
        taken = checker.try_acquire_lock(partition_key, sort_key)
        assert taken is None, (f'two holders at once: {checker.owner_name} took {partition_key}|{sort_key} '
                               f'while it was {what}')
    taken_all = try_all(checker, keys)
    assert taken_all is None, f'two holders at once: {checker.owner_name} took {list(keys)} while they were {what}'


def assert_free(checker: Any, keys: Sequence[Key], what: str = '') -> None:
    """Nothing is held: another client takes every key at once (and gives them back)."""
    taken = try_all(checker, keys)
    assert taken is not None, f'{list(keys)} still held {what}'.rstrip()
    release_all(checker, taken)


def assert_rows_held(engine: LockTable, held: Held) -> List[Any]:
    """Each lock's row exists and records it (its version, or its shared entry); the rows."""
    rows = []
    for lock in held.locks:
        row = engine.read_held_row(lock.partition_key, lock.sort_key)
        assert row is not None, f'{lock.unique_identifier} is held but its row is gone or released'
        if lock.shared:
            assert str(lock.holder_id) in row.get('shared_holders', {}), f'{lock.unique_identifier}: no entry of it'
        else:
            assert row['record_version_number'] == lock.record_version_number, (
                f'{lock.unique_identifier}: the row carries another version than its holder\'s')
        rows.append(row)
    return rows


def assert_session_rows(engine: LockTable, held: Held) -> None:
    """Under ``session=True``: each lock row names a session, and that session row exists."""
    for lock, row in zip(held.locks, assert_rows_held(engine, held)):
        session_id = row.get('lock_session')
        assert session_id, f'{lock.unique_identifier} is held under session=True but its row names no session'
        session_row = engine.read_item(session_id, '-')
        assert session_row is not None, (f'{lock.unique_identifier} names session {session_id}, '
                                         'whose row does not exist: any waiter may take the lock at once')


@contextlib.contextmanager
def nothing_written(engine: LockTable, resource: Any, keys: Sequence[Key]) -> Iterator[CallRecorder]:
    """Around a call that must write nothing: no write recorded on ``resource`` (the calling
    client's own; the asyncio client's calls are linked to it), and no row at any key."""
    with CallRecorder(resource) as calls:
        yield calls
    assert calls.writes() == [], f'written before the refusal: {[call.operation for call in calls.writes()]}'
    for partition_key, sort_key in keys:
        assert engine.read_item(partition_key, sort_key) is None, f'{partition_key}|{sort_key} was written'


def assert_refused(engine: LockTable, resource: Any, keys: Sequence[Key], call: Callable[[], Any],
                   error: Union[Type[BaseException], Tuple[Type[BaseException], ...]], names: str) -> None:
    """``call()`` raises ``error`` naming ``names``, before anything is written."""
    with nothing_written(engine, resource, keys):
        with pytest.raises(error) as raised:
            call()
    assert names in str(raised.value), f'the refusal does not name {names!r}: {raised.value}'
