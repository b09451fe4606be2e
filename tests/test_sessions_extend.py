"""``lock.extend()`` of a lock under a session beside the heartbeat's session renewal whose answer
is late (simulation sim29a, ``Workload(extend_in_session=True)``, seed 7), on DynamoDB Local.

The heartbeat's renewal lands and its answer is held back; ``extend()`` sends its own renewal,
conditioned on the version before, and is refused by the heartbeat's landed write. That row is
the client's own: no lock is lost, ``extend()`` returns, and the session is renewed from it.
The answer is held with a botocore hook of the boto3 resource (``HoldAnswer``): the threaded
client only; the decision is the protocol core's, shared by both clients, and
tests/test_core_session_overlap.py steps it for both orders of landing.
"""
from __future__ import annotations

import datetime
from typing import Any

import pytest

from helpers import BackgroundCall, HoldAnswer, LockClients, is_asyncio, step
from python_dynamodb_lock.python_dynamodb_lock import DynamoDBLock
from python_dynamodb_lock.testing import REAL_TIMEOUT, CallRecorder

PERIOD = 10
SESSION_PREFIX = 'python_dynamodb_lock/session/'


def _seconds(value: float) -> datetime.timedelta:
    return datetime.timedelta(seconds=value)


def _session_key(body: Any) -> bool:
    return str((body.get('Key') or {}).get('lock_key', {}).get('S', '')).startswith(SESSION_PREFIX)


def test_extend_beside_a_session_renewal_whose_answer_is_late_loses_nothing(local_engine: Any,
                                                                            local_clients: LockClients) -> None:
    holder = local_clients.make(hand_driven=False, session=True, owner_name='extender',
                                heartbeat_period=_seconds(PERIOD), lease_duration=_seconds(30),
                                safe_period=_seconds(15), expiry_period=_seconds(60))
    if is_asyncio(holder):
        pytest.skip('the answer is held with a hook of the boto3 resource (threaded client)')
    lock, other = holder.acquire_lock('extended'), holder.acquire_lock('beside')
    clock = local_clients.clock
    with CallRecorder(local_engine.resource) as calls, \
            HoldAnswer(local_engine.resource, 'UpdateItem', when=_session_key) as held:
        heartbeat = BackgroundCall(step, clock, PERIOD, holder)     # the heartbeat renews the session
        assert held.holding.wait(REAL_TIMEOUT), 'the session renewal was not sent'
        lock.extend()            # refused by the heartbeat's landed write: a row of ours, no theft
        held.let_go()
        heartbeat.result()
    assert lock.status == DynamoDBLock.LOCKED and other.status == DynamoDBLock.LOCKED
    session_writes = [call for call in calls.writes() if _session_key(call.params)]
    assert len(session_writes) >= 3      # the heartbeat's, the extend's refused one, the extend's again
    step(clock, PERIOD, holder)          # the next renewals go on from the extend's version
    assert lock.status == DynamoDBLock.LOCKED and other.status == DynamoDBLock.LOCKED
    assert lock.release() is True and other.release() is True
