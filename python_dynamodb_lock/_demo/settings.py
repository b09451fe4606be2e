"""What the demo runs with: its settings, its names (table, keys, counters, workers) and the error
that says it could not run."""
from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional

from ..python_dynamodb_lock import DynamoDBLockClient

__all__ = [
    'COUNTER_ATTRIBUTE',
    'COUNTER_SORT_KEY',
    'DEMO_TABLE_NAME',
    'READY_TIMEOUT_SECONDS',
    'VICTIM_INDEX',
    'DemoError',
    'DemoSettings',
    'counter_key',
    'worker_name',
]

#: The demo's table when it runs against ``--endpoint-url`` without ``--table``: kept apart
#: from the library's default table so the demo never writes into a table applications use.
DEMO_TABLE_NAME = 'DynamoDBLockDemo'
#: The worker that is SIGKILLed midway while it holds a lock.
VICTIM_INDEX = 0
#: Sort key of the counter items (and of the locks: the default).
COUNTER_SORT_KEY = DynamoDBLockClient._DEFAULT_SORT_KEY_VALUE
#: The attribute of a counter item that holds its value.
COUNTER_ATTRIBUTE = 'count'

#: Seconds the workers get to start; a worker waits twice as long for the go, and the victim
#: sleeps this long while it waits to be killed.
READY_TIMEOUT_SECONDS = 90.0


class DemoError(Exception):
    """The demo could not run (no engine installed, workers did not start, ...)."""


@dataclass(frozen=True)
class DemoSettings:
    """Everything the demo needs; timing derives from ``lease_duration``.

    With the default 2 s lease: heartbeat every 0.5 s, safe period 1.5 s, retry every 0.2 s,
    waits of at most 5 s per acquire attempt.
    """

    workers: int = 4
    keys: int = 2
    duration: float = 12.0
    lease_duration: float = 2.0
    engine: str = 'auto'
    endpoint_url: Optional[str] = None
    region_name: Optional[str] = None
    profile_name: Optional[str] = None
    table_name: str = DEMO_TABLE_NAME
    partition_key_name: str = DynamoDBLockClient._DEFAULT_PARTITION_KEY_NAME
    sort_key_name: str = DynamoDBLockClient._DEFAULT_SORT_KEY_NAME
    ttl_attribute_name: str = DynamoDBLockClient._DEFAULT_TTL_ATTRIBUTE_NAME
    quiet: bool = False

    @property
    def heartbeat_period(self) -> float:
        return self.lease_duration / 4

    @property
    def safe_period(self) -> float:
        return self.lease_duration * 0.75

    @property
    def retry_period(self) -> float:
        return min(0.2, self.lease_duration / 10)

    @property
    def retry_timeout(self) -> float:
        """Long enough to wait out a dead holder's lease, plus margin."""
        return self.lease_duration * 2 + 1.0

    @property
    def key_names(self) -> List[str]:
        return [f'key-{index}' for index in range(self.keys)]

    def validate(self) -> None:
        """Raises ValueError for settings the demo cannot run with."""
        if self.workers < 2:
            raise ValueError('the demo needs at least 2 workers (one of them is killed midway)')
        if self.keys < 1:
            raise ValueError('the demo needs at least 1 key')
        if not self.duration > 0:
            raise ValueError('--duration must be positive')
        if not 0.2 <= self.lease_duration <= 60:
            raise ValueError('--lease must be between 0.2 and 60 seconds')
        if self.engine not in ('auto', 'dynamodb-local', 'moto'):
            raise ValueError(f'unknown engine {self.engine!r}')


def counter_key(lock_key: str) -> str:
    """Partition key of the counter item that the holders of ``lock_key`` increment."""
    return f'demo-counter#{lock_key}'


def worker_name(index: int) -> str:
    return f'worker-{index}'

