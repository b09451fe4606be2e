"""An acquisition whose write landed but whose answer was lost reads the row to learn whether it
holds the lock; interrupted during that read (a cancelled task, Ctrl-C), it leaves no row that
nobody was handed (found by the simulation of the asyncio protocol, tests/test_simulation_asyncio.py;
the core's steps in tests/test_core_interrupted_checks.py). On DynamoDB Local, both clients.
"""
from __future__ import annotations

import asyncio

import pytest

from helpers import ASYNCIO, FaultInjector, ManualClock
from test_aio import REAL_TIMEOUT, run
from test_interruptions import assert_free, cancel_on_call
from python_dynamodb_lock.testing import LockTable


@pytest.fixture
def client_kind() -> str:
    return ASYNCIO


def test_a_task_cancelled_while_checking_a_lost_answer_leaves_no_row(local_engine: LockTable) -> None:
    async def main() -> None:
        async with local_engine.async_lock_client(clock=ManualClock(), background_heartbeats=False) as client:
            with FaultInjector(local_engine.resource) as faults:
                lost = faults.lose_answers('UpdateItem', retry=False)     # it lands; ReadTimeoutError
                task = asyncio.ensure_future(client.acquire_lock('checked'))
                cut = faults.before_call('GetItem', cancel_on_call(lambda: task))
                with pytest.raises(asyncio.CancelledError):
                    await task
                assert await client.wait_settled(REAL_TIMEOUT)
                assert lost.hits == 1 and cut.hits == 1
            assert client.held_locks() == []
            assert_free(local_engine, 'checked')

    run(main())


@pytest.mark.threaded_only
def test_ctrl_c_while_checking_a_lost_answer_leaves_no_row(local_engine: LockTable) -> None:
    client = local_engine.lock_client(clock=ManualClock(), background_heartbeats=False)
    with FaultInjector(local_engine.resource) as faults:
        lost = faults.lose_answers('UpdateItem', retry=False)
        interrupt = faults.raise_in_attempts('GetItem', KeyboardInterrupt)
        with pytest.raises(KeyboardInterrupt):
            client.acquire_lock('checked-threaded')
        assert client.wait_settled(REAL_TIMEOUT)
        assert lost.hits == 1 and interrupt.hits == 1
    assert client.held_locks() == []
    assert_free(local_engine, 'checked-threaded')
