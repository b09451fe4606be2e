"""One worker process of the demo: acquire a random key, increment its counter non-atomically,
release, and tell the parent each step through its own pipe."""
from __future__ import annotations

import logging
import os
import random
import socket
import time
import traceback
from datetime import timedelta
from typing import Any, Callable, NamedTuple, Optional

from ..python_dynamodb_lock import DynamoDBLock, DynamoDBLockClient, DynamoDBLockError
from .engine import Connection
from .settings import (
    COUNTER_ATTRIBUTE,
    COUNTER_SORT_KEY,
    READY_TIMEOUT_SECONDS,
    VICTIM_INDEX,
    DemoSettings,
    counter_key,
    worker_name,
)

__all__ = ['Channels', 'Message', 'worker_main']


class Message(NamedTuple):
    """What a worker tells the parent. ``at`` is the worker's wall clock (``time.time()``)."""

    kind: str  # ready, acquired, holding_for_kill, released, lost, release_failed, timeout, crashed, done
    worker: int
    key: str
    at: float
    data: Any = None


class Channels(NamedTuple):
    """Shared multiprocessing objects between the parent and the workers.

    Each worker reports through its own one-way pipe rather than a shared queue: a worker that
    is SIGKILLed can then only break its own pipe, never a lock that the others write under.
    """

    start: Any  # Event: go
    start_time: Any  # Value('d'): wall time of the start, set before ``start``
    kill_requested: Any  # Event: the victim reports its next hold and then waits to be killed
    takeover_key: Any  # Value('i'): index of the killed holder's key while it awaits a takeover, else -1
    takeover_done: Any  # Event: the killed holder's lock was taken over; workers may stop at the deadline
    stop: Any  # Event: abort


def worker_main(index: int, settings: DemoSettings, connection: Connection, channels: Channels,
                 reports: Any) -> None:
    """Body of one worker process: acquire, increment, release, until the duration is over.

    ``reports`` is the sending end of this worker's pipe to the parent.
    """
    logging.basicConfig(level=logging.ERROR if settings.quiet else logging.WARNING,
                        format=f'  [{worker_name(index)} log] %(levelname)s %(name)s: %(message)s')
    post = reports.send
    lock_client: Optional[DynamoDBLockClient] = None
    try:
        resource = connection.resource()
        table = resource.Table(settings.table_name)
        lock_client = DynamoDBLockClient(
            resource,
            table_name=settings.table_name,
            partition_key_name=settings.partition_key_name,
            sort_key_name=settings.sort_key_name,
            ttl_attribute_name=settings.ttl_attribute_name,
            owner_name=f'{worker_name(index)}@{socket.gethostname()}:{os.getpid()}',
            heartbeat_period=timedelta(seconds=settings.heartbeat_period),
            safe_period=timedelta(seconds=settings.safe_period),
            lease_duration=timedelta(seconds=settings.lease_duration),
        )
        post(Message('ready', index, '', time.time(), os.getpid()))
        if channels.start.wait(READY_TIMEOUT_SECONDS * 2):
            _contend(index, settings, channels, lock_client, table, post)
    except KeyboardInterrupt:
        pass
    except Exception:  # reported to the parent, which fails the verdict
        post(Message('crashed', index, '', time.time(), traceback.format_exc()))
    finally:
        if lock_client is not None:
            lock_client.close(release_locks=True)
        try:
            post(Message('done', index, '', time.time()))
        except OSError:  # the parent has gone
            pass
        reports.close()


def _contend(index: int, settings: DemoSettings, channels: Channels,
             lock_client: DynamoDBLockClient, table: Any, post: Callable[[Message], None]) -> None:
    keys = settings.key_names
    deadline = channels.start_time.value + settings.duration
    rng = random.Random(os.getpid() * 1_000_003 + index)
    is_victim = index == VICTIM_INDEX
    while not channels.stop.is_set():
        past_deadline = time.time() >= deadline
        # Past the deadline the workers go on until the killed holder's lock has been taken
        # over (trying only that key); the victim goes on until it is killed.
        if past_deadline and not is_victim and channels.takeover_done.is_set():
            return
        takeover_key = channels.takeover_key.value
        key = keys[takeover_key] if past_deadline and takeover_key >= 0 else rng.choice(keys)
        try:
            lock = lock_client.acquire_lock(
                key,
                retry_period=timedelta(seconds=settings.retry_period),
                retry_timeout=timedelta(seconds=settings.retry_timeout),
            )
        except DynamoDBLockError as error:
            if error.code != DynamoDBLockError.ACQUIRE_TIMEOUT:
                raise
            post(Message('timeout', index, key, time.time()))
            continue
        acquired_at = time.time()
        post(Message('acquired', index, key, acquired_at, lock.record_version_number))
        if is_victim and channels.kill_requested.is_set():
            post(Message('holding_for_kill', index, key, acquired_at, lock.record_version_number))
            # Sleep without touching any shared object: the SIGKILL must not catch this process
            # inside a multiprocessing lock (an Event's or a Value's) that the others still need.
            # The heartbeat threads go on renewing the lock until the kill.
            time.sleep(READY_TIMEOUT_SECONDS)
            return
        _increment_counter(index, key, settings, table, lock, rng, acquired_at, post)
        time.sleep(rng.uniform(0.0, 0.05))


def _increment_counter(index: int, key: str, settings: DemoSettings, table: Any, lock: DynamoDBLock,
                       rng: random.Random, acquired_at: float, post: Callable[[Message], None]) -> None:
    """The critical section: a non-atomic read-then-write of the key's counter item."""
    item_key = {settings.partition_key_name: counter_key(key), settings.sort_key_name: COUNTER_SORT_KEY}
    item = table.get_item(Key=item_key, ConsistentRead=True).get('Item', {})
    value = int(item.get(COUNTER_ATTRIBUTE, 0))
    time.sleep(rng.uniform(0.02, 0.1))  # widen the window in which an intruder would be caught
    if lock.status != DynamoDBLock.LOCKED:  # lost meanwhile (e.g. starved): do not write
        post(Message('lost', index, key, time.time(), lock.status))
        lock.release()
        return
    table.put_item(Item={
        **item_key,
        COUNTER_ATTRIBUTE: value + 1,
        settings.ttl_attribute_name: int(time.time()) + 3600,
    })
    finished_at = time.time()
    try:
        lock.release(best_effort=False)
    except DynamoDBLockError as error:
        post(Message('release_failed', index, key, time.time(), error.code))
    post(Message('released', index, key, finished_at, (acquired_at, value + 1)))

