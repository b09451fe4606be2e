"""Reading and administering the table: ``get_lock``, ``list_locks`` (page by page) and
``force_release_lock``. The requests and their reading are the core's (:mod:`.._core.scan`,
:mod:`.._wire.requests`).
"""
from __future__ import annotations

from typing import Any, List, Optional, Tuple, Union

from .._common.config import check_key
from .._core.answers import Answer
from .._core.effects import Protocol
from .._core.events import Kind
from .._core.scan import force_release, next_page
from .._core.write import read_row
from .._common.locks import BaseDynamoDBLock
from .._wire.requests import Request, query, scan
from .._model.schema import NO_SORT_KEY, PartitionKey
from .context import ClientState

__all__ = ['Listing']


class Listing:
    """The table as one client reads it (see the module docstring)."""

    def __init__(self, state: ClientState[Any]) -> None:
        self._state = state

    def reading(self, partition_key: PartitionKey, sort_key: str) -> Protocol[Any]:
        """``get_lock``: the key checked (before anything is sent), and the protocol that reads
        the row and describes it (None: no row, or a released one)."""
        state = self._state
        state.check_process()
        check_key(state.schema, partition_key, sort_key)
        return self._described(read_row(state.schema, partition_key, sort_key, None))

    def _described(self, reading: Protocol[Any]) -> Protocol[Any]:
        row = yield from reading
        return self._state.describe_row(row)

    def first_page(self, partition_key: Optional[PartitionKey]) -> Request:
        """The first request of ``list_locks``: a scan of the whole table, or with
        ``partition_key`` a query of the rows under that key (checked first, as a key)."""
        state = self._state
        state.check_process()
        if partition_key is None:
            return scan(state.schema)
        check_key(state.schema, partition_key, NO_SORT_KEY)
        return query(state.schema, partition_key)

    def page(self, request: Request, answer: Union[Answer, List[Answer]]) -> Tuple[List[Any], Optional[Request]]:
        """The locks of the page ``request`` read (rows that are not held locks skipped), and
        the request of the next page (None after the last)."""
        state = self._state
        rows, following = next_page(state.schema, request, answer)
        return state.rows_to_locks(rows), following

    def force_releasing(self, lock: object) -> Protocol[bool]:
        """``force_release_lock``: ``lock`` checked, and the protocol that frees its row if it
        still carries that version (an operator's release); a waiter of this client for the key
        is woken."""
        state = self._state
        state.check_process()
        if not isinstance(lock, BaseDynamoDBLock):
            raise TypeError(f'force_release_lock takes a BaseDynamoDBLock, not {type(lock).__name__}')
        return self._force_releasing(lock)

    def _force_releasing(self, lock: BaseDynamoDBLock) -> Protocol[bool]:
        state = self._state
        freed: bool = yield from force_release(state.release_settings, lock, state.clock)
        if freed:
            state.emit(Kind.FORCE_RELEASED, lock, version=lock.record_version_number, owner=lock.owner_name)
            state.registry.wake_longest_waiting(lock.unique_identifier)
        return freed
