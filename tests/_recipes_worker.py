"""A candidate or semaphore user in its own process, for tests/test_recipes.py (DynamoDB Local).

``python tests/_recipes_worker.py CONFIG_JSON`` with the repository root on ``PYTHONPATH``.
It talks to the test in JSON lines on standard output, each with an ``event`` and ``t``
(``time.monotonic()``, one clock for every process of the machine); logging goes to standard
error. It reads commands (``quit``) from standard input.

Modes (``config['mode']``):

``elect``
    A :class:`LeaderElection` candidate. Emits ``elected`` and ``lost`` from its callbacks, and
    watches its own ``election.term`` every 10 ms: ``leading`` when it first reads a term,
    ``tenure`` (term, first and last moment it
    read itself leader, the reads bracketed by ``before``/``after`` times) whenever a stretch of
    leadership it observed ends, and ``resumed`` (with the term of its first read) on the first
    tick after a gap longer than ``pause_gap`` (it was paused). ``quit`` closes the election.
``semaphore``
    ``threads`` threads share one lock client and one :class:`Semaphore`; each takes
    ``acquisitions`` permits in turn, holds each for a random time, and records the interval
    (from just after ``acquire`` returned to just before ``release``), its slot and fencing
    token. Results go to ``result_path``; then ``done``.
``hold``
    Take one permit and keep it (heartbeats running) until killed: emits ``holding``.
"""
from __future__ import annotations

import json
import logging
import random
import sys
import threading
import time
import traceback
from datetime import timedelta
from typing import Any, Dict, List, Optional, Tuple

from python_dynamodb_lock._embedded import default_client_config, dummy_boto3_session
from python_dynamodb_lock.python_dynamodb_lock import DynamoDBLockClient, DynamoDBLockError
from python_dynamodb_lock.recipes import LeaderElection, Semaphore

_output_guard = threading.Lock()


def emit(event: str, **fields: Any) -> None:
    line = json.dumps({'event': event, 't': time.monotonic(), **fields})
    with _output_guard:
        sys.stdout.write(line + '\n')
        sys.stdout.flush()


def make_client(config: Dict[str, Any]) -> DynamoDBLockClient:
    resource = dummy_boto3_session().resource('dynamodb', endpoint_url=config['endpoint'],
                                              config=default_client_config())
    return DynamoDBLockClient(resource, table_name=config['table'], owner_name=config['owner'],
                              heartbeat_period=timedelta(seconds=config['heartbeat']),
                              safe_period=timedelta(seconds=config['safe_period']),
                              lease_duration=timedelta(seconds=config['lease']))


def wait_for_quit() -> threading.Event:
    quit_event = threading.Event()

    def read() -> None:
        for line in sys.stdin:
            if line.strip() == 'quit':
                break
        quit_event.set()

    threading.Thread(target=read, name='commands', daemon=True).start()
    return quit_event


def elect(config: Dict[str, Any]) -> None:
    client = make_client(config)
    election = LeaderElection(
        client, config['name'], candidate_id=config['owner'],
        on_elected=lambda term: emit('elected', term=term),
        on_lost=lambda term, reason: emit('lost', term=term, reason=reason),
        retry_period=timedelta(seconds=config['retry_period']))
    quit_event = wait_for_quit()
    election.start()
    emit('started')
    current: Optional[int] = None
    first: Tuple[float, float] = (0.0, 0.0)
    last: Tuple[float, float] = (0.0, 0.0)
    previous_tick = time.monotonic()

    def end_tenure() -> None:
        emit('tenure', term=current, first_before=first[0], first_after=first[1], last_before=last[0],
             last_after=last[1])

    while not quit_event.is_set():
        before = time.monotonic()
        term = election.term          # None unless it leads, as of this read
        after = time.monotonic()
        gap, previous_tick = before - previous_tick, before
        if gap > config['pause_gap']:
            emit('resumed', gap=gap, term=term)
        if term != current:
            if current is not None:
                end_tenure()
            current = term
            if term is not None:
                first = (before, after)
                emit('leading', term=term)
        if term is not None:
            last = (before, after)
        time.sleep(0.01)
    if current is not None:
        end_tenure()
    election.close()
    client.close()
    emit('closed')


def use_semaphore(config: Dict[str, Any]) -> None:
    client = make_client(config)
    semaphore = Semaphore(client, config['name'], config['limit'],
                          retry_period=timedelta(seconds=config['retry_period']))
    holds: List[Dict[str, Any]] = []
    errors: List[str] = []
    guard = threading.Lock()
    go = threading.Barrier(config['threads'])

    def work(index: int) -> None:
        rng = random.Random(config['seed'] * 1000 + index)
        try:
            go.wait()
            for _ in range(config['acquisitions']):
                permit = semaphore.acquire(timeout=config['acquire_timeout'])
                start = time.monotonic()
                low, high = config['long_hold'] if rng.random() < config['long_hold_probability'] \
                    else config['short_hold']
                time.sleep(rng.uniform(low, high))
                status = permit.lock.status
                end = time.monotonic()
                outcome = 'released'
                try:
                    permit.release(best_effort=False)
                except DynamoDBLockError as error:
                    outcome = error.code
                with guard:
                    holds.append({'start': start, 'end': end, 'slot': permit.slot, 'token': permit.fencing_token,
                                  'owner': config['owner'], 'thread': index, 'status_before_release': status,
                                  'release': outcome, 'took_over': permit.took_over_from is not None})
        except Exception:
            with guard:
                errors.append(traceback.format_exc())

    threads = [threading.Thread(target=work, args=(index,), name=f'worker-{index}')
               for index in range(config['threads'])]
    emit('ready')
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    client.close()
    with open(config['result_path'], 'w', encoding='utf-8') as result:
        json.dump({'holds': holds, 'errors': errors}, result)
    emit('done', holds=len(holds), errors=len(errors))


def hold(config: Dict[str, Any]) -> None:
    client = make_client(config)
    semaphore = Semaphore(client, config['name'], config['limit'],
                          retry_period=timedelta(seconds=config['retry_period']))
    permit = semaphore.acquire(timeout=config['acquire_timeout'])
    emit('holding', slot=permit.slot, token=permit.fencing_token)
    wait_for_quit().wait()


def main() -> None:
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr,
                        format='%(asctime)s %(process)d %(threadName)s %(levelname)s %(name)s %(message)s')
    config = json.loads(sys.argv[1])
    {'elect': elect, 'semaphore': use_semaphore, 'hold': hold}[config['mode']](config)


if __name__ == '__main__':
    main()
