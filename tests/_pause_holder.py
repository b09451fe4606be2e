"""A lock holder in its own process, for tests that pause it with SIGSTOP (tests/test_pause.py).

argv[1] is a JSON config: endpoint, table, data_table, key, mode, and optionally ``session``
(a client session, docs/sessions.rst), ``expiry`` (seconds) and ``more_keys`` (more locks to hold).
It acquires the lock (lease 2 s, safe period 1 s, heartbeats every 0.25 s), prints
``{"event": "acquired", ...}`` and then:

* mode ``status``: watches the monotonic clock; on the first tick after a gap longer than
  ``pause_gap`` (it was paused), reads ``lock.status`` and ``lock.lease_remaining()`` at once
  and prints them (``resumed``), then exits;
* mode ``guarded``: appends its fencing token to the data item through guarded writes, one
  every 50 ms, printing each outcome (``committed`` / ``refused`` with the error's code) until
  a write is refused after a pause, then exits;
* mode ``hold``: holds its locks until it is killed.
"""
from __future__ import annotations

import json
import sys
import time
from datetime import timedelta

from python_dynamodb_lock.python_dynamodb_lock import DynamoDBLockClient, DynamoDBLockError
from python_dynamodb_lock.testing import default_client_config, dummy_boto3_session


def emit(event: str, **fields: object) -> None:
    print(json.dumps({'event': event, **fields}), flush=True)


def main() -> None:
    config = json.loads(sys.argv[1])
    resource = dummy_boto3_session().resource('dynamodb', endpoint_url=config['endpoint'],
                                              config=default_client_config())
    client = DynamoDBLockClient(resource, table_name=config['table'], owner_name='paused-holder',
                                heartbeat_period=timedelta(seconds=0.25), safe_period=timedelta(seconds=1),
                                lease_duration=timedelta(seconds=2),
                                expiry_period=timedelta(seconds=config.get('expiry', 3600)),
                                session=config.get('session', False))
    lock = client.acquire_lock(config['key'])
    others = [client.acquire_lock(key) for key in config.get('more_keys', ())]
    emit('acquired', token=lock.fencing_token, version=lock.record_version_number, more=len(others))
    last = time.monotonic()
    paused = False
    while True:
        time.sleep(0.05 if config['mode'] == 'guarded' else 0.01)
        now = time.monotonic()
        gap, last = now - last, now
        if gap > config.get('pause_gap', 1.0):
            paused = True
            if config['mode'] == 'status':
                status, remaining = lock.status, lock.lease_remaining()   # the first reads after resuming
                emit('resumed', gap=gap, status=status, lease_remaining=remaining)
                break
        if config['mode'] == 'guarded':
            try:
                lock.update_item(
                    TableName=config['data_table'], Key={'id': 'counter'},
                    UpdateExpression='SET n = if_not_exists(n, :zero) + :one, '
                                     'writers = list_append(if_not_exists(writers, :empty), :me)',
                    ExpressionAttributeValues={':zero': 0, ':one': 1, ':empty': [], ':me': [lock.fencing_token]})
                emit('committed', paused=paused)
            except DynamoDBLockError as error:
                emit('refused', code=error.code, paused=paused,
                     holder=getattr(error.holder, 'owner_name', None))
                if paused:
                    break
    client.close()
    emit('done')


if __name__ == '__main__':
    main()
