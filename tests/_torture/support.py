"""Small helpers shared by the torture workers and tests (the in-process test helpers are in
``tests/helpers.py``)."""
from __future__ import annotations

import datetime
import threading
from typing import IO, Any, Dict, List

from boto3.dynamodb.types import TypeDeserializer

__all__ = [
    'LIBRARY_LOGGER',
    'close_pipes',
    'heartbeat_threads',
    'scan_table',
    'seconds',
]

LIBRARY_LOGGER = 'python_dynamodb_lock'
_deserializer = TypeDeserializer()


def close_pipes(process: Any, stderr: IO[bytes]) -> None:
    """Close an ended worker process's stdin and stdout pipes and the file its stderr went to."""
    for stream in (process.stdin, process.stdout):
        if stream is not None:
            try:
                stream.close()
            except OSError:
                pass
    stderr.close()


def seconds(value: float) -> datetime.timedelta:
    return datetime.timedelta(seconds=value)


def scan_table(client: Any, table_name: str) -> List[Dict[str, Any]]:
    """Every item of a table, as Python values, sorted by their repr (for before/after comparisons)."""
    items: List[Dict[str, Any]] = []
    for page in client.get_paginator('scan').paginate(TableName=table_name, ConsistentRead=True):
        for raw in page.get('Items', []):
            items.append({name: _deserializer.deserialize(value) for name, value in raw.items()})
    return sorted(items, key=repr)


def heartbeat_threads() -> Dict[str, int]:
    """How many live lock-client sender and checker threads this process has, by thread name."""
    counts = {'DynamoDBLockClient-heartbeat-sender': 0, 'DynamoDBLockClient-heartbeat-checker': 0}
    for thread in threading.enumerate():
        if thread.name in counts and thread.is_alive():
            counts[thread.name] += 1
    return counts
