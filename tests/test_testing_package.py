"""python_dynamodb_lock.testing itself: each helper does what it says, for both kinds of client.

The fault injection and call counting that the rest of the suite (and users' suites) build on
must do exactly what they claim, or the tests built on them prove nothing. The fault and
recorder tests run on a low-level boto3 client (moto in-process and DynamoDB Local) and on an
aiobotocore client (the moto server and DynamoDB Local). The last tests run a user's test file
through pytest with only the plugin's fixtures.
"""
from __future__ import annotations

import asyncio
import contextvars
import datetime
import pathlib
import textwrap
import threading
import uuid
from typing import Any, Callable, Dict, Iterator, List, Optional

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError, ReadTimeoutError

from aio_facade import EventLoopThread
from helpers import THREADED, LockClients, no_retry_backoff, wait_until
from python_dynamodb_lock._embedded import DYNAMODB_LOCAL_INSTALL_HINT
from python_dynamodb_lock.python_dynamodb_lock import DynamoDBLock, DynamoDBLockError
from python_dynamodb_lock.testing import (
    CallbackRecorder,
    CallRecorder,
    EngineNotInstalledError,
    FaultInjector,
    LockTable,
    ManualClock,
    is_acquire,
    is_heartbeat,
    is_release,
    link_clients,
    lock_action,
    lock_table,
    moto_lock_table,
    start_engine,
)
from python_dynamodb_lock.testing import _faults

seconds = datetime.timedelta


class Dynamo:
    """Blocking DynamoDB calls (typed JSON) on one low-level client: boto3, or aiobotocore run
    on an event loop thread. ``target`` is what hooks attach to."""

    def __init__(self, target: Any, runner: Optional[EventLoopThread] = None) -> None:
        self.target = target
        self.runner = runner
        self.meta = target.meta

    def __getattr__(self, operation: str) -> Callable[..., Any]:
        method = getattr(self.target, operation)
        runner = self.runner
        if runner is None:
            return method
        return lambda **params: runner.run(method(**params))


@pytest.fixture
def dynamodb(engine: LockTable, client_kind: str) -> Iterator[Dynamo]:
    """A fresh low-level client of the test's kind on the engine, hooks of its own."""
    if client_kind == THREADED:
        yield Dynamo(engine.new_client())
        return
    runner = EventLoopThread()
    context = engine.new_async_client()
    try:
        yield Dynamo(runner.run(context.__aenter__()), runner)
    finally:
        runner.run(context.__aexit__(None, None, None))
        runner.close()


def conditional_put(dynamodb: Dynamo, table_name: str, key: str, value: str) -> None:
    """A put that fails if the row exists: a second execution of the same request would show."""
    dynamodb.put_item(TableName=table_name,
                      Item={'lock_key': {'S': key}, 'sort_key': {'S': '-'}, 'value': {'S': value}},
                      ConditionExpression='attribute_not_exists(lock_key)',
                      ReturnValuesOnConditionCheckFailure='ALL_OLD')


def get(dynamodb: Dynamo, table_name: str, key: str = 'x') -> Dict[str, Any]:
    response: Dict[str, Any] = dynamodb.get_item(
        TableName=table_name, Key={'lock_key': {'S': key}, 'sort_key': {'S': '-'}}, ConsistentRead=True)
    return response


# --- FaultInjector ----------------------------------------------------------------------------------

def test_fail_calls_fails_the_whole_call_without_sending_it(engine: LockTable, dynamodb: Dynamo) -> None:
    with FaultInjector(dynamodb.target) as faults, CallRecorder(dynamodb.target) as calls:
        fault = faults.fail_calls('PutItem', code='ProvisionedThroughputExceededException')
        attempts = faults.add_latency('PutItem', 0)          # counts HTTP attempts
        with pytest.raises(ClientError) as raised:
            conditional_put(dynamodb, engine.table_name, 'k1', 'v')
        assert raised.value.response['Error']['Code'] == 'ProvisionedThroughputExceededException'
        assert (fault.hits, attempts.hits, calls.count('PutItem')) == (1, 0, 1)
        assert engine.read_item('k1') is None
        conditional_put(dynamodb, engine.table_name, 'k1', 'v')     # times=1: the next call goes through
    assert engine.read_item('k1')['value'] == 'v'


def test_fail_calls_500_looks_like_a_server_error(engine: LockTable, dynamodb: Dynamo) -> None:
    with FaultInjector(dynamodb.target) as faults:
        faults.fail_calls('GetItem', code='InternalServerError', status=500)
        with pytest.raises(ClientError) as raised:
            get(dynamodb, engine.table_name)
    assert raised.value.response['ResponseMetadata']['HTTPStatusCode'] == 500
    assert raised.value.response['Error']['Code'] == 'InternalServerError'


def test_fail_attempts_lets_botocore_retry_and_never_executes_the_failed_attempt(
        engine: LockTable, dynamodb: Dynamo, monkeypatch: pytest.MonkeyPatch) -> None:
    no_retry_backoff(monkeypatch)
    with FaultInjector(dynamodb.target) as faults, CallRecorder(dynamodb.target) as calls:
        fault = faults.fail_attempts('PutItem', code='ProvisionedThroughputExceededException', times=1)
        conditional_put(dynamodb, engine.table_name, 'k2', 'v')   # the retry would fail if attempt 1 ran
    assert fault.hits == 1
    assert calls.count('PutItem') == 1
    assert engine.read_item('k2')['value'] == 'v'


def test_fail_attempts_every_time_exhausts_the_retries(engine: LockTable, dynamodb: Dynamo,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    no_retry_backoff(monkeypatch)
    with FaultInjector(dynamodb.target) as faults:
        fault = faults.fail_attempts('PutItem', code='InternalServerError', status=500, times=None)
        with pytest.raises(ClientError):
            conditional_put(dynamodb, engine.table_name, 'k3', 'v')
    assert fault.hits == dynamodb.meta.config.retries['total_max_attempts']
    assert engine.read_item('k3') is None


def test_raise_in_attempts_is_retried_for_connection_errors(engine: LockTable, dynamodb: Dynamo,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    no_retry_backoff(monkeypatch)
    with FaultInjector(dynamodb.target) as faults:
        fault = faults.raise_in_attempts('PutItem', lambda: EndpointConnectionError(endpoint_url='injected'))
        conditional_put(dynamodb, engine.table_name, 'k4', 'v')
    assert fault.hits == 1
    assert engine.read_item('k4')['value'] == 'v'


def test_lost_answer_with_retry_meets_its_own_write(engine: LockTable, dynamodb: Dynamo) -> None:
    seen_between: List[Optional[Dict[str, Any]]] = []
    with FaultInjector(dynamodb.target) as faults:
        fault = faults.lose_answers('PutItem', retry=True, between=lambda: seen_between.append(engine.read_item('k5')))
        with pytest.raises(ClientError) as raised:
            conditional_put(dynamodb, engine.table_name, 'k5', 'mine')
    assert fault.hits == 1
    assert raised.value.response['Error']['Code'] == 'ConditionalCheckFailedException'
    assert raised.value.response['Item']['value'] == {'S': 'mine'}     # ALL_OLD arrives raw
    assert [row['value'] for row in seen_between if row] == ['mine']   # between(): after the write, before the retry
    assert engine.read_item('k5')['value'] == 'mine'


def test_lost_answer_without_retry_raises_after_the_write(engine: LockTable, dynamodb: Dynamo) -> None:
    with FaultInjector(dynamodb.target) as faults:
        faults.lose_answers('PutItem', retry=False)
        with pytest.raises(ReadTimeoutError):
            conditional_put(dynamodb, engine.table_name, 'k6', 'landed')
    assert engine.read_item('k6')['value'] == 'landed'


def test_lost_answer_without_retry_honours_its_filter(engine: LockTable, dynamodb: Dynamo) -> None:
    """``when`` sees the request although the answer is lost after the call (after-call)."""
    with FaultInjector(dynamodb.target) as faults:
        fault = faults.lose_answers('PutItem', retry=False, times=None,
                                    when=lambda params: params['Item']['lock_key']['S'] == 'k6b')
        conditional_put(dynamodb, engine.table_name, 'k6a', 'answered')
        with pytest.raises(ReadTimeoutError):
            conditional_put(dynamodb, engine.table_name, 'k6b', 'landed')
    assert fault.hits == 1
    assert engine.read_item('k6a')['value'] == 'answered' and engine.read_item('k6b')['value'] == 'landed'


def test_lost_answer_only_fires_on_success(engine: LockTable, dynamodb: Dynamo) -> None:
    conditional_put(dynamodb, engine.table_name, 'k7', 'first')
    with FaultInjector(dynamodb.target) as faults:
        fault = faults.lose_answers('PutItem', retry=True)
        with pytest.raises(ClientError):
            conditional_put(dynamodb, engine.table_name, 'k7', 'second')   # refused: no answer to lose
        assert fault.hits == 0


def test_before_call_runs_the_action_once_with_the_request(engine: LockTable, dynamodb: Dynamo) -> None:
    seen: list = []
    with FaultInjector(dynamodb.target) as faults:
        faults.before_call('PutItem', seen.append)
        conditional_put(dynamodb, engine.table_name, 'k8', 'v')
        conditional_put(dynamodb, engine.table_name, 'k9', 'v')
    assert len(seen) == 1
    assert seen[0]['Item']['lock_key'] == {'S': 'k8'}


def test_before_call_with_a_filter(engine: LockTable, dynamodb: Dynamo) -> None:
    seen: list = []
    with FaultInjector(dynamodb.target) as faults:
        fault = faults.before_call('PutItem', seen.append, times=None,
                                   when=lambda params: params['Item']['lock_key']['S'].endswith('b'))
        for key in ('ka', 'kb', 'kc', 'kdb'):
            conditional_put(dynamodb, engine.table_name, key, 'v')
    assert fault.hits == 2
    assert [params['Item']['lock_key']['S'] for params in seen] == ['kb', 'kdb']


def test_latency_before_sending_delays_the_write(engine: LockTable, dynamodb: Dynamo,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """While the latency runs, the write has not reached the engine (observed from inside the
    wait, which is replaced by a look at the table: no timing)."""
    row_during_wait = _observe_latency(engine, dynamodb, monkeypatch, after_sending=False, key='slow-before')
    assert row_during_wait is None
    assert engine.read_item('slow-before')['value'] == 'v'


def test_latency_after_sending_delays_the_answer_of_an_applied_write(engine: LockTable, dynamodb: Dynamo,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    row_during_wait = _observe_latency(engine, dynamodb, monkeypatch, after_sending=True, key='slow-after')
    assert row_during_wait is not None and row_during_wait['value'] == 'v'


def _observe_latency(engine: LockTable, dynamodb: Dynamo, monkeypatch: pytest.MonkeyPatch, after_sending: bool,
                     key: str) -> Optional[Dict[str, Any]]:
    """Put with a latency fault whose wait reads the row instead of sleeping; returns that row."""
    seen: List[Optional[Dict[str, Any]]] = []

    class LookInstead:
        @staticmethod
        def sleep(seconds: float) -> None:
            seen.append(engine.read_item(key))

    async def look_instead(seconds: float) -> None:
        seen.append(await asyncio.to_thread(engine.read_item, key))

    monkeypatch.setattr(_faults, 'time', LookInstead)
    monkeypatch.setattr(_faults.asyncio, 'sleep', look_instead)
    try:
        with FaultInjector(dynamodb.target) as faults:
            fault = faults.add_latency('PutItem', 3600, times=1, after_sending=after_sending)
            conditional_put(dynamodb, engine.table_name, key, 'v')
    finally:
        monkeypatch.undo()
    assert fault.hits == 1 and len(seen) == 1
    return seen[0]


def test_clear_removes_every_fault(engine: LockTable, dynamodb: Dynamo) -> None:
    faults = FaultInjector(dynamodb.target)
    faults.fail_calls('*', times=None)
    faults.lose_answers('PutItem', retry=False, times=None)
    faults.clear()
    conditional_put(dynamodb, engine.table_name, 'k10', 'v')
    assert engine.read_item('k10') is not None


def test_steal_lock_takes_the_row_just_before_the_heartbeat(engine: LockTable, clients: LockClients) -> None:
    client = clients.make()
    callback = CallbackRecorder()
    lock = client.acquire_lock('stolen-by-fault', app_callback=callback)
    with FaultInjector(engine.resource) as faults:
        fault = faults.steal_lock(engine, 'stolen-by-fault', owner_name='usurper')
        client.send_heartbeats([lock])
    assert fault.hits == 1
    assert lock.status == DynamoDBLock.INVALID
    assert callback.codes == [DynamoDBLockError.LOCK_STOLEN]
    assert engine.read_item('stolen-by-fault')['owner_name'] == 'usurper'


def test_faults_aimed_at_what_a_lock_write_does(engine: LockTable, clients: LockClients) -> None:
    """Acquire, heartbeat and release are all UpdateItem calls: ``when=is_acquire`` (and
    ``is_heartbeat``, ``is_release``) tell them apart, for either kind of client."""
    client = clients.make()
    with FaultInjector(engine.resource) as faults, CallRecorder(engine.resource) as calls:
        refused_release = faults.fail_calls('UpdateItem', when=is_release)
        refused_heartbeat = faults.fail_calls('UpdateItem', when=is_heartbeat)
        lock = client.acquire_lock('aimed')                  # no acquire is refused
        assert lock.status == DynamoDBLock.LOCKED
        version = lock.record_version_number
        client.send_heartbeats([lock])                       # refused once: the version stays
        assert lock.record_version_number == version and lock.status == DynamoDBLock.LOCKED
        with pytest.raises(DynamoDBLockError) as unknown:
            lock.release(best_effort=False)                  # refused once: still held
        assert unknown.value.code == DynamoDBLockError.UNKNOWN and lock.status == DynamoDBLock.LOCKED
        client.send_heartbeats([lock])
        assert lock.record_version_number != version
        lock.release(best_effort=False)
        refused_acquire = faults.fail_calls('UpdateItem', when=is_acquire)
        with pytest.raises(DynamoDBLockError):
            client.acquire_lock('aimed', retry_timeout=seconds(0))
    assert (refused_acquire.hits, refused_heartbeat.hits, refused_release.hits) == (1, 1, 1)
    assert [call.action for call in calls.calls if call.operation == 'UpdateItem'] == [
        'acquire', 'heartbeat', 'release', 'heartbeat', 'release', 'acquire']
    assert engine.read_held_row('aimed') is None


def test_lock_action_names_each_write_of_a_lock_client(engine: LockTable, clients: LockClients) -> None:
    client = clients.make(keep_released_rows=False)
    other = clients.make()
    with CallRecorder(engine.resource) as calls:
        lock = client.acquire_lock('named')
        client.send_heartbeats([lock])
        lock.release(best_effort=False)                      # a DeleteItem: released rows not kept
        kept = other.acquire_lock('named')
        kept.release(best_effort=False)                      # an UpdateItem marking it released
        other.get_lock('named')
    assert [(call.operation, call.action) for call in calls.calls] == [
        ('UpdateItem', 'acquire'), ('UpdateItem', 'heartbeat'), ('DeleteItem', 'release'),
        ('UpdateItem', 'acquire'), ('UpdateItem', 'release'), ('GetItem', None)]
    assert lock_action({'TableName': 't', 'Item': {'id': {'S': 'x'}}}) is None   # the application's own put


# --- CallRecorder ----------------------------------------------------------------------------------

def test_call_recorder_sees_the_request_body(engine: LockTable, dynamodb: Dynamo) -> None:
    clock = ManualClock(start_monotonic=50.0)
    with CallRecorder(dynamodb.target, clock) as calls:
        get(dynamodb, engine.table_name)
        conditional_put(dynamodb, engine.table_name, 'recorded', 'v')
    assert calls.operations() == ['GetItem', 'PutItem']
    assert calls.calls[0].params['ConsistentRead'] is True
    assert calls.calls[0].params['Key'] == {'lock_key': {'S': 'x'}, 'sort_key': {'S': '-'}}
    assert calls.calls[0].clock_time == 50.0
    assert [call.operation for call in calls.writes()] == ['PutItem']
    assert calls.of('PutItem')[0].item() == {'lock_key': 'recorded', 'sort_key': '-', 'value': 'v'}
    assert (calls.calls[0].task is None) == (dynamodb.runner is None)
    calls.clear()
    assert calls.count() == 0


def test_call_recorder_stops(engine: LockTable, dynamodb: Dynamo) -> None:
    calls = CallRecorder(dynamodb.target)
    get(dynamodb, engine.table_name)
    calls.stop()
    get(dynamodb, engine.table_name)
    assert calls.count('GetItem') == 1


# --- links between a boto3 resource and aiobotocore clients --------------------------------------

def test_hooks_on_a_resource_reach_linked_aiobotocore_clients_made_before_or_after(moto_server: Any) -> None:
    runner = EventLoopThread()
    with lock_table(moto_server) as engine:
        resource = engine.new_resource()
        first_context, second_context = engine.new_async_client(), engine.new_async_client()
        key = {'lock_key': {'S': 'x'}, 'sort_key': {'S': '-'}}
        try:
            first = runner.run(first_context.__aenter__())
            link_clients(resource, first)
            with FaultInjector(resource) as faults, CallRecorder(resource) as calls:
                fault = faults.fail_calls('GetItem', times=None)
                second = runner.run(second_context.__aenter__())
                link_clients(resource, second)                        # linked after the hooks
                for client in (first, second):
                    with pytest.raises(ClientError):
                        runner.run(client.get_item(TableName=engine.table_name, Key=key))
                assert fault.hits == 2 and calls.count('GetItem') == 2
            for client in (first, second):                            # cleared: gone from both
                runner.run(client.get_item(TableName=engine.table_name, Key=key))
            assert fault.hits == 2
            with pytest.raises(TypeError):
                link_clients(resource, engine.new_client())
        finally:
            runner.run(first_context.__aexit__(None, None, None))
            runner.run(second_context.__aexit__(None, None, None))
            runner.close()


# --- ManualClock -----------------------------------------------------------------------------------

def test_manual_clock_moves_only_when_told() -> None:
    clock = ManualClock(start_monotonic=100.0, start_time=5000.0)
    assert (clock.monotonic(), clock.time()) == (100.0, 5000.0)
    for _ in range(10):
        clock.advance(0.1)
    assert clock.monotonic() == 101.0              # exact: microseconds, not float sums
    clock.shift_wall_clock(-60)
    assert (clock.monotonic(), clock.time()) == (101.0, 4941.0)
    with pytest.raises(ValueError):
        clock.advance(-1)


def test_manual_clock_sleepers_wake_at_their_deadline() -> None:
    clock = ManualClock()
    results: list = []
    sleeper = threading.Thread(target=lambda: results.append(clock.sleep(5, threading.Event())))
    sleeper.start()
    clock.wait_until_idle([sleeper])
    clock.advance(4.9)
    clock.wait_until_idle([sleeper])               # still asleep: its deadline is ahead
    assert results == []
    clock.advance(0.1)
    sleeper.join(10)
    assert results == [False]


def test_manual_clock_wake_event_interrupts_a_sleep() -> None:
    clock = ManualClock()
    wake = threading.Event()
    results: list = []
    sleeper = threading.Thread(target=lambda: results.append(clock.sleep(3600, wake)))
    sleeper.start()
    clock.wait_until_idle([sleeper])
    wake.set()
    sleeper.join(10)
    assert results == [True]
    assert clock.sleep(10, wake) is True           # already set: returns at once


def test_manual_clock_modes() -> None:
    clock = ManualClock(start_monotonic=0.0)
    with clock.auto_advance_in_current_thread():
        assert clock.sleep(7.5, threading.Event()) is False
    assert clock.monotonic() == 7.5
    with clock.sleeps_return_at_once_in_current_thread():
        assert clock.sleep(100, threading.Event()) is False
    assert clock.monotonic() == 7.5
    assert clock.sleeps_of(threading.current_thread().name) == [7.5, 100]


def test_manual_clock_modes_are_per_thread() -> None:
    clock = ManualClock(start_monotonic=0.0)
    results: list = []
    with clock.auto_advance_in_current_thread():
        other = threading.Thread(target=lambda: results.append(clock.sleep(5, threading.Event())), name='other')
        other.start()
        clock.wait_until_idle([other])             # blocks on the clock: the mode stayed with the caller
        assert clock.sleep(5, threading.Event()) is False
    other.join(10)
    assert results == [False] and clock.monotonic() == 5.0


def test_async_sleepers_wake_at_their_deadline_and_are_idle_until_then() -> None:
    clock = ManualClock(start_monotonic=0.0)
    runner = EventLoopThread()
    try:
        wake_holder: List[asyncio.Event] = []

        async def sleeper() -> bool:
            wake_holder.append(asyncio.Event())
            return await clock.sleep_async(5, wake_holder[0])

        async def start() -> 'asyncio.Task[bool]':
            return asyncio.get_running_loop().create_task(sleeper(), name='async-sleeper')

        task = runner.run(start())
        clock.wait_until_idle([task])
        clock.advance(4.9)
        clock.wait_until_idle([task])               # still asleep
        assert not task.done()
        clock.advance(0.1)
        wait_until(task.done)
        assert task.result() is False
        assert clock.sleeps_of('async-sleeper') == [5]
    finally:
        runner.close()


def test_async_sleep_is_interrupted_by_its_wake_event() -> None:
    clock = ManualClock()

    async def main() -> None:
        wake = asyncio.Event()
        task = asyncio.get_running_loop().create_task(clock.sleep_async(3600, wake))
        while not clock.is_idle(task):
            await asyncio.sleep(0.001)
        wake.set()
        assert await task is True
        assert await clock.sleep_async(10, wake) is True          # already set
        assert await clock.sleep_async(0, asyncio.Event()) is False

    asyncio.run(main())


def test_modes_follow_the_caller_into_coroutines_submitted_to_a_loop() -> None:
    """The mode lives in a ContextVar: run_coroutine_threadsafe runs the coroutine in a copy of
    the submitting thread's context; tasks made elsewhere keep the default."""
    clock = ManualClock(start_monotonic=0.0)
    runner = EventLoopThread()
    try:
        async def sleep_once(seconds: float) -> bool:
            return await clock.sleep_async(seconds, asyncio.Event())

        with clock.auto_advance_in_current_thread():
            assert asyncio.run_coroutine_threadsafe(sleep_once(30), runner.loop).result(10) is False
        assert clock.monotonic() == 30.0
        with clock.sleeps_return_at_once_in_current_thread():
            assert runner.run(sleep_once(100)) is False
        assert clock.monotonic() == 30.0
        # Without a mode, a task submitted from a fresh context waits for advance().
        background = runner.submit(sleep_once(10), context=contextvars.Context())
        wait_until(lambda: clock.sleeper_count() > 0)
        assert not background.done()
        clock.advance(10)
        assert background.result(10) is False
    finally:
        runner.close()


def test_a_thread_blocked_on_a_task_is_idle_when_the_task_sleeps() -> None:
    clock = ManualClock()
    runner = EventLoopThread()
    try:
        async def work_for(caller: threading.Thread) -> bool:
            with clock.acting_for(caller):
                return await clock.sleep_async(5, asyncio.Event())

        def blocked() -> None:
            runner.run(work_for(threading.current_thread()))

        caller = threading.Thread(target=blocked, name='blocked-caller')
        caller.start()
        clock.wait_until_idle([caller])           # idle through its task
        clock.advance(5)
        caller.join(10)
        assert not caller.is_alive()
    finally:
        runner.close()


def test_wait_until_gives_up_with_a_message() -> None:
    with pytest.raises(AssertionError, match='never'):
        wait_until(lambda: False, timeout=0.01, message=lambda: 'never')


# --- CallbackRecorder ----------------------------------------------------------------------------

def test_callback_recorder_records_raises_and_acts() -> None:
    acted: list = []
    recorder = CallbackRecorder(raise_on=[DynamoDBLockError.LOCK_STOLEN], action=lambda code, lock: acted.append(code))
    recorder(DynamoDBLockError.LOCK_IN_DANGER, 'lock-a')
    assert recorder.called.is_set()
    with pytest.raises(RuntimeError):
        recorder(DynamoDBLockError.LOCK_STOLEN, 'lock-b')
    assert recorder.codes == [DynamoDBLockError.LOCK_IN_DANGER, DynamoDBLockError.LOCK_STOLEN]
    assert [call.lock for call in recorder.calls] == ['lock-a', 'lock-b']
    assert recorder.calls[0].thread == threading.current_thread().name and recorder.calls[0].task is None
    assert acted == recorder.codes


# --- engines and tables ------------------------------------------------------------------------------

def test_lock_table_on_the_moto_server_and_its_row_helpers(moto_server: Any) -> None:
    with lock_table(moto_server, partition_key_name='pk', sort_key_name='sk') as table:
        assert table.name == 'moto-server' and table.is_atomic and table.endpoint_url == moto_server.endpoint_url
        written = table.put_lock_row('row', owner_name='other', lease_duration=2.5)
        assert table.read_item('row') == written
        assert table.read_typed_item('row')['pk'] == {'S': 'row'}
        version = table.steal_row('row', owner_name='thief')
        assert (table.read_item('row')['owner_name'], table.read_item('row')['record_version_number']) == \
            ('thief', version)
        table.delete_row('row')
        assert table.read_item('row') is None
        client = table.lock_client(partition_key_name='pk', sort_key_name='sk', background_heartbeats=False)
        lock = client.acquire_lock('mine')
        assert table.read_item('mine')['record_version_number'] == lock.record_version_number
        name = table.table_name
    # private: what close() sets first; needs a steppable runner
    assert client.closed                                      # closed with the table
    assert name not in moto_server.client().list_tables()['TableNames']


def test_lock_table_async_lock_client_is_linked_and_closed(moto_server: Any) -> None:
    with lock_table(moto_server) as table:
        async def main() -> Any:
            with FaultInjector(table.resource) as faults:
                fault = faults.fail_calls('UpdateItem', when=is_acquire)
                async with table.async_lock_client(background_heartbeats=False) as client:
                    with pytest.raises(DynamoDBLockError):
                        await client.acquire_lock('throttled')
                    lock = await client.acquire_lock('fine')
                    assert lock.status == DynamoDBLock.LOCKED
            assert fault.hits == 1
            return client

        client = asyncio.run(main())
        assert client.closed


def test_a_lock_table_at_an_endpoint_url(moto_server: Any) -> None:
    with lock_table(moto_server.endpoint_url, f'locks-url-{uuid.uuid4().hex[:8]}') as table:
        assert table.name == 'endpoint'
        table.put_lock_row('x')
        assert table.read_item('x')['owner_name'] == 'someone-else'


def test_moto_lock_table_is_in_process_and_not_atomic() -> None:
    with moto_lock_table() as table:
        assert (table.name, table.endpoint_url, table.is_atomic) == ('moto', None, False)
        lock = table.lock_client(background_heartbeats=False).acquire_lock('in-process')
        assert table.read_item('in-process')['record_version_number'] == lock.record_version_number
        with pytest.raises(RuntimeError, match='aiobotocore'):
            table.new_async_client()


def test_start_engine_moto() -> None:
    with start_engine('moto') as engine:
        assert engine.name == 'moto' and engine.running
        assert engine.client().list_tables()['TableNames'] is not None
    assert not engine.running
    with pytest.raises(ValueError):
        start_engine('dynamo')


# --- the pytest plugin ---------------------------------------------------------------------------------

USER_TESTS = '''
    import asyncio
    import datetime

    import pytest

    from python_dynamodb_lock.python_dynamodb_lock import DynamoDBLockError
    from python_dynamodb_lock.testing import CallbackRecorder, FaultInjector, is_acquire


    @pytest.fixture
    def engine():
        return "the user's own fixture: no clash with the plugin's"


    def test_a_stolen_lock_is_reported(dynamodb_lock_table, engine):
        calls = CallbackRecorder()
        client = dynamodb_lock_table.lock_client(background_heartbeats=False)
        client.acquire_lock('job', app_callback=calls)
        dynamodb_lock_table.steal_row('job')
        client.send_heartbeats()
        assert calls.called.wait(10)
        assert calls.codes == [DynamoDBLockError.LOCK_STOLEN]


    def test_the_client_fixture_holds_and_releases(dynamodb_lock_client, dynamodb_lock_table):
        with dynamodb_lock_client.acquire_lock('x') as lock:
            assert dynamodb_lock_table.read_held_row('x')['owner_name'] == lock.owner_name
        assert dynamodb_lock_table.read_held_row('x') is None
        assert 'released_at' in dynamodb_lock_table.read_item('x')   # kept, for its fencing token


    def test_throttling_is_an_error(dynamodb_lock_client, dynamodb_lock_table):
        with FaultInjector(dynamodb_lock_table.resource) as faults:
            faults.fail_calls('UpdateItem', when=is_acquire)
            with pytest.raises(DynamoDBLockError):
                dynamodb_lock_client.acquire_lock('throttled')


    def test_the_asyncio_client(dynamodb_lock_async_client, dynamodb_lock_clock):
        async def main():
            async with dynamodb_lock_async_client(clock=dynamodb_lock_clock) as client:
                async with client.acquire_lock('a') as lock:
                    assert lock.status == 'LOCKED'
            return lock.status

        assert asyncio.run(main()) == 'RELEASED'


    def test_moto_in_process(dynamodb_lock_moto_table):
        client = dynamodb_lock_moto_table.lock_client(background_heartbeats=False)
        client.acquire_lock('m', retry_timeout=datetime.timedelta(0))
        assert not dynamodb_lock_moto_table.is_atomic
'''


@pytest.mark.parametrize('engine_name', [
    pytest.param('moto', id='moto'),
    pytest.param('dynamodb-local', id='dynamodb-local', marks=pytest.mark.local),
])
def test_a_users_tests_run_on_the_plugins_fixtures_alone(pytester: pytest.Pytester, engine_name: str,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    if engine_name == 'dynamodb-local':
        from conftest import require_dynamodb_local

        # The user's run starts elsewhere, with the package installed: tell it where the engine is.
        monkeypatch.setenv('DYNAMODB_LOCAL_DIR', str(require_dynamodb_local()))
    pytester.makepyfile(test_user=textwrap.dedent(USER_TESTS))
    pytester.makeini(f'[pytest]\ndynamodb_lock_engine = {engine_name}\n')
    result = pytester.runpytest_subprocess('-p', 'no:cacheprovider', '-p', 'no:asyncio', timeout=300)
    result.assert_outcomes(passed=5)


TWO_LOCK_TESTS = '''
    def test_one(dynamodb_lock_client):
        with dynamodb_lock_client.acquire_lock('a'):
            pass


    def test_two(dynamodb_lock_table):
        assert dynamodb_lock_table.read_item('a') is None
'''


@pytest.mark.parametrize('how', ['ini', 'command line'])
def test_an_engine_asked_for_by_name_that_cannot_start_fails_the_run(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, how: str) -> None:
    """Asking for DynamoDB Local where it is not installed is an error with the install hint, not
    a run that skips every lock test and passes."""
    monkeypatch.setenv('DYNAMODB_LOCAL_DIR', str(pytester.path / 'no-dynamodb-local-here'))
    pytester.makepyfile(test_user=textwrap.dedent(TWO_LOCK_TESTS))
    if how == 'ini':
        pytester.makeini('[pytest]\ndynamodb_lock_engine = dynamodb-local\n')
        options: List[str] = []
    else:
        pytester.makeini('[pytest]\ndynamodb_lock_engine = auto\n')   # the command line wins
        options = ['--dynamodb-lock-engine', 'dynamodb-local']
    result = pytester.runpytest_subprocess('-p', 'no:cacheprovider', '-p', 'no:asyncio', *options, timeout=300)
    result.assert_outcomes(errors=2)
    assert result.ret != 0
    output = result.stdout.str()
    assert 'dynamodb_lock_engine = dynamodb-local was asked for, and it cannot be started' in output
    assert 'npm install --prefix .dynamodb-local' in output and '$DYNAMODB_LOCAL_DIR' in output


def test_auto_falls_back_to_the_moto_server_when_dynamodb_local_is_missing(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv('DYNAMODB_LOCAL_DIR', str(pytester.path / 'no-dynamodb-local-here'))
    pytester.makepyfile(test_user=textwrap.dedent(TWO_LOCK_TESTS + '''

    def test_on_moto(dynamodb_lock_engine):
        assert dynamodb_lock_engine.name == 'moto'
    '''))
    result = pytester.runpytest_subprocess('-p', 'no:cacheprovider', '-p', 'no:asyncio',
                                           '--dynamodb-lock-engine', 'auto', timeout=300)
    result.assert_outcomes(passed=3)


def test_the_plugin_is_silent_without_the_testing_extra(pytester: pytest.Pytester,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Without moto (hidden here from the child interpreter), the plugin defines no fixture."""
    blocker = pytester.mkdir('hide_moto')
    (pathlib.Path(blocker) / 'sitecustomize.py').write_text(textwrap.dedent('''
        import sys

        class HideMoto:
            def find_spec(self, name, path=None, target=None):
                if name == 'moto' or name.startswith('moto.'):
                    raise ModuleNotFoundError(name)
                return None

        sys.meta_path.insert(0, HideMoto())
    '''))
    monkeypatch.setenv('PYTHONPATH', str(blocker))
    pytester.makepyfile(test_user='def test_uses_it(dynamodb_lock_table):\n    pass\n')
    result = pytester.runpytest_subprocess('-p', 'no:cacheprovider', '-p', 'no:asyncio', timeout=300)
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*fixture 'dynamodb_lock_table' not found*"])


def test_start_engine_names_what_is_missing(monkeypatch: pytest.MonkeyPatch, tmp_path: pathlib.Path) -> None:
    monkeypatch.setenv('DYNAMODB_LOCAL_DIR', str(tmp_path / 'missing'))
    with pytest.raises(EngineNotInstalledError, match='DynamoDB Local') as missing:
        start_engine('dynamodb-local')
    assert DYNAMODB_LOCAL_INSTALL_HINT in str(missing.value)   # an explicit request never falls back
