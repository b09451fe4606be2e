"""Fencing a store outside DynamoDB: a sqlite3 table that refuses stale lock holders.

A lease lock cannot stop a holder that paused past its lease from writing after another
process took the lock over. A fencing token can, if the store checks it: every acquisition
gets a larger token (``lock.fencing_token``), the store remembers the largest token that wrote
to each resource, and refuses a write that carries a smaller one. One conditional ``UPDATE``
does both the check and the write, atomically.

Run it: ``python examples/fencing_sqlite.py`` (it starts nothing: a table on your default
AWS account is not needed; see ``demo()`` for the two holders).
"""
from __future__ import annotations

import sqlite3
from typing import Optional


class FencedStore:
    """Documents in a sqlite3 database, each written only by a holder whose fencing token is at
    least the largest token that wrote it before."""

    def __init__(self, path: str) -> None:
        self.connection = sqlite3.connect(path, isolation_level=None)   # autocommit: one statement, one transaction
        self.connection.execute(
            'CREATE TABLE IF NOT EXISTS documents ('
            ' name TEXT PRIMARY KEY, body TEXT NOT NULL, fence INTEGER NOT NULL)')

    def write(self, name: str, body: str, fencing_token: int) -> bool:
        """Write ``body`` if ``fencing_token`` is not older than the last writer's.

        :returns: False when the write was refused: a newer lock holder has written since.
        """
        self.connection.execute('INSERT OR IGNORE INTO documents (name, body, fence) VALUES (?, ?, ?)',
                                (name, '', fencing_token))
        cursor = self.connection.execute(
            'UPDATE documents SET body = :body, fence = :token WHERE name = :name AND fence <= :token',
            {'name': name, 'body': body, 'token': fencing_token})
        return cursor.rowcount == 1

    def read(self, name: str) -> Optional[str]:
        row = self.connection.execute('SELECT body FROM documents WHERE name = ?', (name,)).fetchone()
        return None if row is None else str(row[0])


def demo(lock_client: object, store: FencedStore) -> None:   # pragma: no cover - illustration
    """Two holders of the same lock, the first paused past its lease (see the Safety page)."""
    first = lock_client.acquire_lock('report')                      # type: ignore[attr-defined]
    # ... the first holder pauses here for longer than its lease; another process takes over:
    second = lock_client.acquire_lock('report')                     # type: ignore[attr-defined]
    assert store.write('report', 'from the second holder', second.fencing_token)
    # The first holder wakes up and writes: refused, because its token is older.
    assert not store.write('report', 'from the first holder', first.fencing_token)
