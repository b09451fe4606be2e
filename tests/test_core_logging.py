"""Log levels (correction 14): heartbeats and polls at DEBUG, lifecycle at INFO, trouble at WARNING."""
from __future__ import annotations

import datetime
import logging
import uuid
from typing import Any, Callable, Set

import pytest

from helpers import CallbackRecorder, FaultInjector, LockClients, ManualClock, run_checker_round
from python_dynamodb_lock.python_dynamodb_lock import DynamoDBLockError

MODULE = 'python_dynamodb_lock.python_dynamodb_lock'
seconds = datetime.timedelta


def levels_during(caplog: pytest.LogCaptureFixture, action: Callable[[], Any]) -> Set[int]:
    """The levels of the module logger's records emitted while ``action`` runs."""
    caplog.set_level(logging.DEBUG, logger=MODULE)
    caplog.clear()
    action()
    return {record.levelno for record in caplog.records if record.name == MODULE}


def test_start_acquire_release_close_are_info(engine: Any, clients: LockClients,
                                              caplog: pytest.LogCaptureFixture) -> None:
    holder: dict = {}
    assert levels_during(caplog, lambda: holder.setdefault('client', clients.make(hand_driven=False))) \
        >= {logging.INFO}
    client = holder['client']
    for action in (lambda: holder.setdefault('lock', client.acquire_lock('logged')),
                   lambda: holder['lock'].release(),
                   client.close):
        levels = levels_during(caplog, action)
        assert logging.INFO in levels
        assert max(levels) == logging.INFO


def test_successful_heartbeat_is_debug_only(engine: Any, clients: LockClients,
                                            caplog: pytest.LogCaptureFixture) -> None:
    client = clients.make()
    lock = client.acquire_lock('quiet-heartbeat')
    assert levels_during(caplog, lambda: client.send_heartbeats([lock])) == {logging.DEBUG}


def test_waiting_polls_are_debug_only(engine: Any, clients: LockClients, caplog: pytest.LogCaptureFixture) -> None:
    clock: ManualClock = clients.clock
    client = clients.make()
    engine.put_lock_row('polled', lease_duration=300)
    lock = client.acquire_lock('other')     # keep INFO from the first acquire out of the measurement
    lock.release()

    def wait_in_vain() -> None:
        with clock.auto_advance_in_current_thread(), pytest.raises(DynamoDBLockError):
            client.acquire_lock('polled', retry_period=seconds(seconds=5), retry_timeout=seconds(seconds=20))

    assert levels_during(caplog, wait_in_vain) <= {logging.DEBUG}


def test_waiting_for_a_holder_that_writes_no_fencing_token_warns_once(
        engine: Any, clients: LockClients, caplog: pytest.LogCaptureFixture) -> None:
    """A row written as the published package writes it (no fencing token): fencing cannot
    protect this key, which is trouble worth a WARNING - one, not one per poll."""
    clock: ManualClock = clients.clock
    client = clients.make()
    engine.put_lock_row('unfenced', lease_duration=300, fencing_token=None)
    lock = client.acquire_lock('other')     # keep INFO from the first acquire out of the measurement
    lock.release()

    def wait_in_vain() -> None:
        with clock.auto_advance_in_current_thread(), pytest.raises(DynamoDBLockError):
            client.acquire_lock('unfenced', retry_period=seconds(seconds=5), retry_timeout=seconds(seconds=20))

    assert levels_during(caplog, wait_in_vain) == {logging.DEBUG, logging.WARNING}
    warnings = [record.getMessage() for record in caplog.records if record.levelno == logging.WARNING]
    assert len(warnings) == 2 and 'writes no fencing token' in warnings[0] and 'someone-else' in warnings[0]
    assert warnings[1].startswith('Clients of the published 0.9.x package')   # the upgrade advice, once per client


def test_stolen_is_a_warning(engine: Any, clients: LockClients, caplog: pytest.LogCaptureFixture) -> None:
    client = clients.make()
    lock = client.acquire_lock('stolen-log', app_callback=CallbackRecorder())
    engine.client.update_item(
        TableName=engine.table_name, Key={'lock_key': {'S': 'stolen-log'}, 'sort_key': {'S': '-'}},
        UpdateExpression='SET record_version_number = :v', ExpressionAttributeValues={':v': {'S': str(uuid.uuid4())}})
    assert max(levels_during(caplog, lambda: client.send_heartbeats([lock]))) == logging.WARNING


def test_in_danger_is_a_warning(engine: Any, clients: LockClients, caplog: pytest.LogCaptureFixture) -> None:
    clock = clients.clock
    client = clients.make()
    client.acquire_lock('danger-log', app_callback=CallbackRecorder())
    clock.advance(21)
    assert max(levels_during(caplog, lambda: run_checker_round(client, clock))) == logging.WARNING


def test_failed_heartbeat_is_a_warning(engine: Any, clients: LockClients, caplog: pytest.LogCaptureFixture) -> None:
    client = clients.make()
    lock = client.acquire_lock('failed-heartbeat-log')
    with FaultInjector(engine.resource) as faults:
        faults.fail_calls('UpdateItem')
        assert max(levels_during(caplog, lambda: client.send_heartbeats([lock]))) == logging.WARNING
