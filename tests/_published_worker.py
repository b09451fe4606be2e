"""Runs a *published* python_dynamodb_lock (0.9.1 or the 0.9.3 fork) in its own process.

Started by tests/test_interop.py with PYTHONPATH naming only the published package's folder, so
``python_dynamodb_lock`` here is the published one. Commands, one JSON object per line on stdin;
one JSON event per line on stdout:

* ``{"cmd": "acquire", "key": K, "retry_period": s, "retry_timeout": s}`` -> ``acquired``
  (version, seconds) or ``acquire_failed`` (code)
* ``{"cmd": "release"}`` -> ``released`` (the lock acquired last)
* ``{"cmd": "exit"}``
"""
from __future__ import annotations

import datetime
import json
import sys
import time

import boto3

from python_dynamodb_lock.python_dynamodb_lock import DynamoDBLockClient, DynamoDBLockError


def emit(event: str, **fields: object) -> None:
    print(json.dumps({'event': event, **fields}), flush=True)


def main() -> None:
    config = json.loads(sys.argv[1])
    resource = boto3.session.Session(aws_access_key_id='testing', aws_secret_access_key='testing',
                                     region_name='us-east-1').resource('dynamodb', endpoint_url=config['endpoint'])
    seconds = datetime.timedelta
    client = DynamoDBLockClient(
        resource, table_name=config['table'], owner_name=config['owner'],
        heartbeat_period=seconds(seconds=config['heartbeat']), safe_period=seconds(seconds=config['safe']),
        lease_duration=seconds(seconds=config['lease']), expiry_period=seconds(seconds=config['expiry']))
    emit('ready', module=DynamoDBLockClient.__module__, file=sys.modules[DynamoDBLockClient.__module__].__file__)
    lock = None
    for line in sys.stdin:
        command = json.loads(line)
        if command['cmd'] == 'acquire':
            started = time.monotonic()
            try:
                lock = client.acquire_lock(command['key'], retry_period=seconds(seconds=command['retry_period']),
                                           retry_timeout=seconds(seconds=command['retry_timeout']))
            except DynamoDBLockError as error:
                emit('acquire_failed', code=error.code, seconds=time.monotonic() - started)
            else:
                emit('acquired', version=lock.record_version_number, seconds=time.monotonic() - started)
        elif command['cmd'] == 'release':
            lock.release(best_effort=False)
            emit('released')
        elif command['cmd'] == 'exit':
            break
    client.close()
    emit('done')


if __name__ == '__main__':
    main()
