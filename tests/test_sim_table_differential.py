"""The simulated table against DynamoDB Local: the same requests, the same answers.

Each test records the low-level requests lock clients of one kind (threaded, asyncio) send
while they run a scenario on DynamoDB Local (``CallRecorder`` on the table's resource: every
call once, as sent, typed), or takes hand-written edge requests; then replays the sequence, one
request at a time, against a :class:`SimulatedTable` and against a fresh table on DynamoDB
Local, and requires the same outcome for every request.

Normalisations (each is a difference the model may not have; nothing else is forgiven):

* ``ResponseMetadata``: request ids and HTTP headers are dropped; the HTTP status and the
  retry count are compared.
* ``ConsumedCapacity``: dropped (DynamoDB Local returns it even unasked, on some calls; the
  model does not compute capacity).
* numbers are compared in canonical form: DynamoDB Local keeps the scale of arithmetic
  results and of numbers inside maps (``'20.0'``, ``'1e2'``) where DynamoDB (and the model)
  store ``'20'`` and ``'100'``.
* a scan's items are compared as a set (sorted): DynamoDB reads a table in hash order, the
  model in key order. Scans with ``Limit`` are replayed only on one-partition data.
* error messages: compared for ``ConditionalCheckFailedException`` and
  ``TransactionCanceledException`` (a cancellation reason's message without its final period:
  DynamoDB Local ends some with one); only the code for other errors (ValidationException
  texts are DynamoDB Local's own wording).
* a transaction cancelled by the model with a ``ValidationError`` reason (as DynamoDB
  cancels it) counts as DynamoDB Local's ValidationException for the call (see
  :func:`_as_dynamodb_local`).
* the table name (in requests, PartiQL statements and answers) and ``ClientRequestToken``\\ s
  are rewritten for the replay table (tokens are account-wide on DynamoDB Local).
"""
from __future__ import annotations

import datetime
import json
import uuid
from decimal import Decimal
from typing import Any, Callable, Dict, List, Tuple

import pytest
from botocore.exceptions import ClientError
from helpers import is_asyncio
from sim_requests import BATCH_STEPS, CONDITION_STEPS, EDGE, TRANSACTION_STEPS, UPDATE_STEPS, RandomRequests, Step

from python_dynamodb_lock import DynamoDBLockError
from python_dynamodb_lock.testing import CallRecorder, LockTable, SystemClock, lock_table
from python_dynamodb_lock.testing._simulation import OPERATIONS, SimulatedTable, format_number

pytestmark = pytest.mark.local

Outcome = Tuple[Any, ...]
_METHOD = {api: method for method, api in OPERATIONS.items()}
_SHORT = datetime.timedelta(seconds=0.2)


# -- normalisation ----------------------------------------------------------------------------

def _numbers(value: Any) -> Any:
    """Every ``{'N': ...}`` (and number set) in canonical form."""
    if isinstance(value, dict):
        if set(value) == {'N'} and isinstance(value['N'], str):
            return {'N': format_number(Decimal(value['N']))}
        if set(value) == {'NS'}:
            return {'NS': sorted(format_number(Decimal(item)) for item in value['NS'])}
        if set(value) in ({'SS'}, {'BS'}):
            return {next(iter(value)): sorted(next(iter(value.values())))}
        return {name: _numbers(item) for name, item in value.items()}
    if isinstance(value, list):
        return [_numbers(item) for item in value]
    return value


def _sorted_items(items: List[Any]) -> List[Any]:
    return sorted(items, key=lambda item: json.dumps(item, sort_keys=True))


def normalise_answer(method: str, answer: Dict[str, Any]) -> Outcome:
    answer = dict(answer)
    meta = answer.pop('ResponseMetadata', {})
    answer.pop('ConsumedCapacity', None)
    answer = _numbers(answer)
    if method == 'scan' and 'Items' in answer:
        answer['Items'] = _sorted_items(answer['Items'])
    return ('ok', meta.get('HTTPStatusCode'), meta.get('RetryAttempts'), json.dumps(answer, sort_keys=True))


def normalise_error(error: ClientError) -> Outcome:
    response = dict(error.response)
    meta = response.pop('ResponseMetadata', {})
    code = response.get('Error', {}).get('Code')
    message = response.get('Error', {}).get('Message')
    extra = _numbers({name: value for name, value in response.items() if name in ('Item', 'CancellationReasons')})
    for reason in extra.get('CancellationReasons', []):
        if 'Message' in reason:
            reason['Message'] = reason['Message'].rstrip('.')
    if code not in ('ConditionalCheckFailedException', 'TransactionCanceledException'):
        message = None
    return ('error', meta.get('HTTPStatusCode'), code, message, json.dumps(extra, sort_keys=True))


# -- replay -----------------------------------------------------------------------------------

def retarget(value: Any, old: str, new: str, token_space: uuid.UUID) -> Any:
    """``value`` (a request) for the table ``new`` instead of ``old``, with its own tokens."""
    if isinstance(value, dict):
        result = {}
        for name, item in value.items():
            if name == 'TableName' and item == old:
                item = new
            elif name == 'Statement' and isinstance(item, str):
                item = item.replace(f'"{old}"', f'"{new}"')
            elif name == 'ClientRequestToken':
                item = str(uuid.uuid5(token_space, item))
            result[name] = retarget(item, old, new, token_space)
        return result
    if isinstance(value, (list, tuple)):
        return type(value)(retarget(item, old, new, token_space) for item in value)
    return value


def outcomes(steps: List[Step], send: Callable[[str, Dict[str, Any]], Dict[str, Any]]) -> List[Outcome]:
    found = []
    for method, params in steps:
        try:
            found.append(normalise_answer(method, send(method, json.loads(json.dumps(params)))))
        except ClientError as error:
            found.append(normalise_error(error))
    return found


def _as_dynamodb_local(outcome: Outcome) -> Outcome:
    """A transaction one of whose updates cannot be applied (a missing path, arithmetic on a
    string) is cancelled by DynamoDB with reason ``ValidationError`` (TransactWriteItems' API
    reference), and by the model; DynamoDB Local refuses the call with a ValidationException.
    Either way nothing is written."""
    if outcome[0] == 'error' and outcome[2] == 'TransactionCanceledException' and '"ValidationError"' in outcome[4]:
        return ('error', 400, 'ValidationException', None, '{}')
    return outcome


def assert_same_answers(engine: Any, steps: List[Step], recorded_table: str, layout: Dict[str, Any]) -> SimulatedTable:
    """Replay ``steps`` (recorded on ``recorded_table``) on a fresh DynamoDB Local table of
    ``layout`` and on the model; every outcome must match. Returns the model."""
    assert steps, 'nothing was recorded'
    with lock_table(engine, **layout) as fresh:
        replayed = retarget(steps, recorded_table, fresh.table_name, uuid.uuid4())
        sort_key = (fresh.sort_key_name, 'S') if fresh.sort_key_name is not None else None
        model = SimulatedTable(fresh.table_name, (fresh.partition_key_name, fresh.partition_key_type), sort_key)
        on_model = [_as_dynamodb_local(outcome) for outcome in outcomes(replayed, model.handle)]
        on_engine = outcomes(replayed, lambda method, params: getattr(fresh.client, method)(**params))
    for index, ((method, params), expected, got) in enumerate(zip(replayed, on_engine, on_model)):
        assert got == expected, (f'request {index} ({method}) answered differently:\n  request: {params}\n'
                                 f'  DynamoDB Local: {expected}\n  model:          {got}')
    return model


def recorded(recorder: CallRecorder) -> List[Step]:
    return [(_METHOD[call.operation], call.params) for call in recorder.calls if call.operation in _METHOD]


# -- scenarios the lock clients run ------------------------------------------------------------

def _multi(client: Any, keys: List[Any], trying: bool) -> Any:
    name = 'try_acquire_locks' if trying else 'acquire_locks'
    if is_asyncio(client):
        method = getattr(client.async_client, name)
        multi = client._call(lambda: method(keys) if trying else method(keys, retry_timeout=_SHORT))
        return multi and _AsyncMulti(multi, client)
    return client.try_acquire_locks(keys) if trying else client.acquire_locks(keys, retry_timeout=_SHORT)


def _first(client: Any) -> Any:
    if is_asyncio(client):
        return client._proxy(client._call(lambda: client.async_client.acquire_first_lock('pool', ['a', 'b'])))
    return client.acquire_first_lock('pool', ['a', 'b'])


class _AsyncMulti:
    def __init__(self, multi: Any, facade: Any) -> None:
        self.multi, self.facade = multi, facade

    def release(self) -> Any:
        return self.facade._call(lambda: self.multi.release())

    def transact_write_items(self, items: Any) -> Any:
        return self.facade._call(lambda: self.multi.transact_write_items(items))


def scenario_basic(make: Callable[..., Any], table: LockTable) -> None:
    client = make(owner_name='alpha')
    lock = client.acquire_lock('job', additional_attributes={'note': 'first', 'count': 3})
    client.send_heartbeats()
    lock.update_attributes({'note': 'second'}, remove=['count'])
    lock.extend()
    assert client.get_lock('job') is not None
    assert [found.partition_key for found in client.list_locks()] == ['job']
    lock.release(attributes={'left': 'for you'})
    again = client.acquire_lock('job', sort_key='-')
    other = make(owner_name='beta')
    assert other.try_acquire_lock('job') is None
    again.release()
    row = make(owner_name='gamma', keep_released_rows=False).acquire_lock('gone')
    row.release()


def scenario_shared(make: Callable[..., Any], table: LockTable) -> None:
    readers = [make(owner_name=f'reader{index}') for index in range(2)]
    locks = [reader.acquire_lock('doc', shared=True) for reader in readers]
    for reader in readers:
        reader.send_heartbeats()
    writer = make(owner_name='writer')
    assert writer.try_acquire_lock('doc') is None
    for lock in locks:
        lock.release()
    writer.acquire_lock('doc').release()
    solo = make(owner_name='solo', keep_released_rows=False)
    solo.acquire_lock('doc2', shared=True).release()


def scenario_sessions(make: Callable[..., Any], table: LockTable) -> None:
    client = make(owner_name='sessioned', session=True, hand_driven=False)
    locks = [client.acquire_lock(f'key{index}') for index in range(2)]
    multi = _multi(client, ['m1', 'm2'], trying=False)
    multi.release()
    for lock in locks:
        lock.release()
    client.close()


def scenario_heartbeat_batches(make: Callable[..., Any], table: LockTable) -> None:
    client = make(owner_name='batcher', heartbeat_batch_size=5)
    locks = [client.acquire_lock(f'key{index}') for index in range(3)]
    client.send_heartbeats()
    thief = make(owner_name='thief')
    thief.force_release_lock(thief.get_lock('key1'))
    client.send_heartbeats()     # the batch: two renewals land, one is refused
    for lock in locks:
        lock.release(best_effort=True)


def scenario_several_keys_and_guarded_writes(make: Callable[..., Any], table: LockTable) -> None:
    client = make(owner_name='many')
    multi = _multi(client, ['k1', 'k2', 'k3'], trying=False)
    other = make(owner_name='other')
    assert _multi(other, ['k3', 'k4'], trying=True) is None
    multi.transact_write_items([{'Put': {'TableName': table.table_name,
                                         'Item': {table.partition_key_name: 'data', **_sort(table), 'v': 1}}}])
    multi.release()
    lock = client.acquire_lock('guard')
    lock.put_item(TableName=table.table_name, Item={table.partition_key_name: 'data2', **_sort(table), 'v': 2})
    lock.update_item(TableName=table.table_name, Key={table.partition_key_name: 'data2', **_sort(table)},
                     UpdateExpression='SET v = v + :one', ExpressionAttributeValues={':one': 1})
    with pytest.raises(ClientError):
        lock.update_item(TableName=table.table_name, Key={table.partition_key_name: 'data2', **_sort(table)},
                         UpdateExpression='SET v = :zero', ConditionExpression='v = :zero',
                         ExpressionAttributeValues={':zero': 0}, ReturnValuesOnConditionCheckFailure='ALL_OLD')
    lock.delete_item(TableName=table.table_name, Key={table.partition_key_name: 'data2', **_sort(table)})
    first, second = _first(client), _first(client)
    assert {first.sort_key, second.sort_key} == {'a', 'b'}
    first.release()
    second.release()
    lock.release()


def scenario_existing_item(make: Callable[..., Any], table: LockTable) -> None:
    table.resource.meta.client.put_item(TableName=table.table_name,   # recorded: on the resource
                                        Item={table.partition_key_name: 'record', **_sort(table), 'payload': 'kept'})
    client = make(owner_name='itemlocker')
    lock = client.acquire_lock('record', lock_existing_item=True, only_if_exists=True)
    client.send_heartbeats()
    lock.release()
    with pytest.raises(DynamoDBLockError):
        client.try_acquire_lock('absent', lock_existing_item=True, only_if_exists=True)


def scenario_takeover(make: Callable[..., Any], table: LockTable) -> None:
    """Locks whose holder stopped renewing (a short lease) taken over: an exclusive row, and a
    shared row whose dead holder a writer removes."""
    short = {'heartbeat_period': datetime.timedelta(seconds=0.1), 'safe_period': datetime.timedelta(seconds=0.5),
             'lease_duration': datetime.timedelta(seconds=1)}
    dead = make(owner_name='dead', **short)
    dead.acquire_lock('abandoned', additional_attributes={'left': 'behind'})
    dead.acquire_lock('reading', shared=True)
    waiter = make(owner_name='waiter', **short)
    wait = {'retry_period': datetime.timedelta(seconds=0.2), 'retry_timeout': datetime.timedelta(seconds=15)}
    taken = waiter.acquire_lock('abandoned', **wait)
    written = waiter.acquire_lock('reading', **wait)
    taken.release()
    written.release()


def scenario_options(make: Callable[..., Any], table: LockTable) -> None:
    """Per-acquisition options: reentrant, a lease of its own, keep_row=False, a release that fails."""
    client = make(owner_name='options')
    outer = client.acquire_lock('again', reentrant=True)
    inner = client.acquire_lock('again', reentrant=True)
    inner.release()
    outer.release()
    own_lease = client.acquire_lock('own-lease', lease_duration=datetime.timedelta(seconds=60))
    client.send_heartbeats()
    own_lease.release()
    client.acquire_lock('norow', keep_row=False).release()
    lost = client.acquire_lock('lost')
    thief = make(owner_name='thief')
    thief.force_release_lock(thief.get_lock('lost'))
    assert lost.release(best_effort=True) is False


def _sort(table: LockTable) -> Dict[str, Any]:
    return {} if table.sort_key_name is None else {table.sort_key_name: '-'}


#: What each scenario must have sent (so that a scenario that stops early cannot pass unnoticed).
SENT = {
    'basic': {'update_item', 'get_item', 'scan', 'delete_item'},
    'shared': {'update_item', 'delete_item'},
    'sessions': {'put_item', 'transact_write_items', 'update_item'},
    'heartbeat_batches': {'batch_execute_statement', 'update_item'},
    'several_keys_and_guarded_writes': {'transact_write_items', 'transact_get_items', 'update_item'},
    'existing_item': {'put_item', 'update_item'},
    'takeover': {'update_item', 'get_item'},
    'options': {'update_item', 'delete_item', 'get_item'},
}

SCENARIOS = {
    'basic': scenario_basic,
    'shared': scenario_shared,
    'sessions': scenario_sessions,
    'heartbeat_batches': scenario_heartbeat_batches,
    'several_keys_and_guarded_writes': scenario_several_keys_and_guarded_writes,
    'existing_item': scenario_existing_item,
    'takeover': scenario_takeover,
    'options': scenario_options,
}


@pytest.mark.parametrize('scenario', sorted(SCENARIOS))
def test_lock_clients_requests_answered_alike(scenario: str, local_engine: LockTable, local_clients: Any,
                                              dynamodb_local: Any) -> None:
    def make(**kwargs: Any) -> Any:
        kwargs.setdefault('clock', SystemClock())
        return local_clients.make(**kwargs)

    with CallRecorder(local_engine.resource) as recorder:
        SCENARIOS[scenario](make, local_engine)
        for client in local_clients.clients:
            client.close()
    steps = recorded(recorder)
    assert SENT[scenario] <= {method for method, _ in steps}
    assert_same_answers(dynamodb_local, steps, local_engine.table_name, {})


@pytest.mark.parametrize('kind', ['threaded', 'asyncio'])
def test_custom_key_names_answered_alike(dynamodb_local: Any, kind: str) -> None:
    """A table whose keys are named by the application (a number partition key, no sort key)."""
    from helpers import LockClients

    layout = {'partition_key_name': 'resource', 'sort_key_name': None, 'ttl_attribute_name': 'ttl',
              'partition_key_type': 'N'}
    with lock_table(dynamodb_local, **layout) as table:
        factory = LockClients(table, kind=kind)
        try:
            with CallRecorder(table.resource) as recorder:
                client = factory.make(clock=SystemClock(), owner_name='custom', **layout)
                lock = client.acquire_lock(7, additional_attributes={'note': 'n'})
                client.send_heartbeats()
                assert client.try_acquire_lock(7) is None
                assert [found.partition_key for found in client.list_locks(7)] == [7]
                lock.release()
                client.acquire_lock(8, keep_row=False).release()
        finally:
            factory.close_all()
        steps = recorded(recorder)
        assert {'update_item', 'query', 'delete_item'} <= {method for method, _ in steps}
        assert_same_answers(dynamodb_local, steps, table.table_name, layout)


# -- hand-written edge requests, seeded random sequences (tests/sim_requests.py) ------------------

@pytest.mark.parametrize('steps', [CONDITION_STEPS, UPDATE_STEPS, TRANSACTION_STEPS, BATCH_STEPS],
                         ids=['conditions', 'updates', 'transactions', 'batches'])
def test_edge_requests_answered_alike(steps: List[Step], dynamodb_local: Any) -> None:
    assert_same_answers(dynamodb_local, steps, EDGE, {})


@pytest.mark.parametrize('seed', [1, 2, 3])
def test_random_sequences_answered_alike(seed: int, dynamodb_local: Any) -> None:
    generator = RandomRequests(seed)
    steps = [generator.step() for _ in range(150)]
    model = assert_same_answers(dynamodb_local, steps, EDGE, {})
    assert len(model) > 0
