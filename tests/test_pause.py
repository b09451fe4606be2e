"""A holder paused past its lease (a real SIGSTOP), on DynamoDB Local.

* Its first read of ``lock.status`` after resuming is not ``LOCKED`` (it used to be, in 10 of 10
  runs, until the checker thread ran), and ``lease_remaining()`` is negative.
* Its guarded writes after resuming are refused with LOCK_STOLEN while the holder that took the
  lock over writes through the guard too: no overlapping writes, no lost update.
"""
from __future__ import annotations

import json
import os
import pathlib
import signal
import subprocess
import sys
import time
from datetime import timedelta
from typing import Any, Dict, Iterator, List

import pytest

from python_dynamodb_lock.python_dynamodb_lock import DynamoDBLock, DynamoDBLockClient

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not hasattr(signal, 'SIGSTOP'), reason='needs SIGSTOP')]
ROOT = pathlib.Path(__file__).resolve().parent.parent
LEASE = 2.0
seconds = timedelta


class Holder:
    def __init__(self, config: Dict[str, Any]) -> None:
        self.process = subprocess.Popen([sys.executable, str(ROOT / 'tests' / '_pause_holder.py'), json.dumps(config)],
                                        stdout=subprocess.PIPE, text=True, cwd=str(ROOT),
                                        env={**os.environ, 'PYTHONPATH': str(ROOT)})
        self.events: List[Dict[str, Any]] = []

    def next_event(self, timeout: float = 60) -> Dict[str, Any]:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        assert line, f'the holder exited with {self.process.wait(timeout)}; events so far: {self.events}'
        event: Dict[str, Any] = json.loads(line)
        self.events.append(event)
        return event

    def wait_for(self, name: str) -> Dict[str, Any]:
        while True:
            event = self.next_event()
            if event['event'] == name:
                return event

    def pause(self) -> None:
        os.kill(self.process.pid, signal.SIGSTOP)

    def resume(self) -> None:
        os.kill(self.process.pid, signal.SIGCONT)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.resume()
            self.process.kill()
        self.process.wait(30)


@pytest.fixture
def data_table(local_engine: Any) -> Iterator[str]:
    name = f'{local_engine.table_name}-data'
    local_engine.client.create_table(TableName=name, KeySchema=[{'AttributeName': 'id', 'KeyType': 'HASH'}],
                                     AttributeDefinitions=[{'AttributeName': 'id', 'AttributeType': 'S'}],
                                     BillingMode='PAY_PER_REQUEST')
    yield name
    local_engine.client.delete_table(TableName=name)


@pytest.fixture
def successor(local_engine: Any) -> Iterator[DynamoDBLockClient]:
    client = DynamoDBLockClient(local_engine.resource, table_name=local_engine.table_name, owner_name='successor',
                                heartbeat_period=seconds(seconds=0.25), safe_period=seconds(seconds=1),
                                lease_duration=seconds(seconds=LEASE))
    yield client
    client.close()


def take_over(client: DynamoDBLockClient, key: str) -> DynamoDBLock:
    """Acquire the key the paused holder still claims (after its lease, at the latest)."""
    return client.acquire_lock(key, retry_period=seconds(seconds=0.1), retry_timeout=seconds(seconds=4 * LEASE))


def test_the_first_status_read_after_a_pause_past_the_lease_is_not_locked(local_engine: Any) -> None:
    holder = Holder({'endpoint': local_engine.endpoint_url, 'table': local_engine.table_name, 'key': 'paused',
                     'mode': 'status', 'pause_gap': 1.0})
    try:
        holder.wait_for('acquired')
        time.sleep(0.5)
        holder.pause()
        time.sleep(3.0)                          # longer than the 2 s lease
        holder.resume()
        resumed = holder.wait_for('resumed')
    finally:
        holder.stop()
    assert resumed['gap'] >= 2.5
    assert resumed['status'] != DynamoDBLock.LOCKED and resumed['status'] == DynamoDBLock.IN_DANGER
    assert resumed['lease_remaining'] < 0


def test_a_paused_holders_guarded_writes_are_refused_and_nothing_overlaps(
        local_engine: Any, data_table: str, successor: DynamoDBLockClient) -> None:
    holder = Holder({'endpoint': local_engine.endpoint_url, 'table': local_engine.table_name, 'key': 'guarded',
                     'data_table': data_table, 'mode': 'guarded', 'pause_gap': 1.0})
    try:
        first = holder.wait_for('acquired')
        holder.wait_for('committed')
        holder.wait_for('committed')
        holder.pause()
        lock = take_over(successor, 'guarded')              # waits out the paused holder's lease
        assert lock.fencing_token > first['token']
        for _ in range(5):
            lock.update_item(
                TableName=data_table, Key={'id': 'counter'},
                UpdateExpression='SET n = if_not_exists(n, :zero) + :one, '
                                 'writers = list_append(if_not_exists(writers, :empty), :me)',
                ExpressionAttributeValues={':zero': 0, ':one': 1, ':empty': [], ':me': [lock.fencing_token]})
        holder.resume()
        refused = holder.wait_for('refused')
        holder.wait_for('done')
    finally:
        holder.stop()
    assert refused['paused'] is True and refused['code'] == 'LOCK_STOLEN' and refused['holder'] == 'successor'
    assert not any(event['event'] == 'committed' and event['paused'] for event in holder.events)
    item = local_engine.client.get_item(TableName=data_table, Key={'id': {'S': 'counter'}},
                                        ConsistentRead=True)['Item']
    writers = [int(entry['N']) for entry in item['writers']['L']]
    holder_commits = sum(1 for event in holder.events if event['event'] == 'committed')
    assert int(item['n']['N']) == len(writers) == holder_commits + 5         # no lost update
    assert writers == sorted(writers)        # no write of the old holder after the new one's
    assert set(writers) == {first['token'], lock.fencing_token}
    lock.release(best_effort=False)
