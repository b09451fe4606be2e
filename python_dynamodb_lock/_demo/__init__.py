"""The demo (``dynamodb-lock demo``): worker processes contend for a few locks, one is killed midway.
May import the lock clients (python_dynamodb_lock.python_dynamodb_lock) and the engine launcher (_embedded).

What it shows, on an embedded engine (or any endpoint given with ``--endpoint-url``):

* mutual exclusion: each worker, while holding the lock of a key, increments a counter item of
  that key with a deliberately non-atomic read-then-write. If two workers ever held the same
  lock at once, increments would be lost and the counter would fall short. Every worker also
  reports the wall-clock interval of each hold; the parent checks that the holds of a key never
  overlap (all workers run on this machine, so they share one clock);
* crash recovery: midway the parent SIGKILLs one worker while it holds a lock (the worker
  says so through its pipe to the parent and then just sleeps, heartbeats still running, until it is
  killed). The lock row stays; once its record version has not changed for the lease
  duration another worker takes it over;
* a verdict: acquisitions, counters against increments, overlaps, takeover time. The command
  exits with 1 when any check fails.

The workers are started with the ``spawn`` method, so nothing of the parent (engine threads,
boto3 sessions) is inherited; they talk to the engine over HTTP like any other client.

Modules: :mod:`.settings` (settings, names, :class:`DemoError`), :mod:`.engine` (the engine, the
connection, the counter items), :mod:`.worker` (one worker process), :mod:`.parent` (starting,
killing and following the workers), :mod:`.verdict` (the report and its verdict), :mod:`.output`
(what is printed) and :mod:`.script` (:func:`run_demo`, from start to verdict).
"""
from .engine import CLIENT_MAX_ATTEMPTS, Connection, client_config
from .script import run_demo
from .settings import COUNTER_ATTRIBUTE, COUNTER_SORT_KEY, DEMO_TABLE_NAME, VICTIM_INDEX, DemoError, DemoSettings
from .verdict import DemoReport, Hold, Takeover, find_overlaps

__all__ = [
    'CLIENT_MAX_ATTEMPTS',
    'COUNTER_ATTRIBUTE',
    'COUNTER_SORT_KEY',
    'DEMO_TABLE_NAME',
    'VICTIM_INDEX',
    'Connection',
    'DemoError',
    'DemoReport',
    'DemoSettings',
    'Hold',
    'Takeover',
    'client_config',
    'find_overlaps',
    'run_demo',
]
