"""The IAM page (docs/iam.rst) grants every action each feature's DynamoDB calls need.

Each feature runs through the public API with a CallRecorder on the table's boto3 objects (a
botocore before-call hook, so it sees the statements of a batch and the actions of a
transaction); every call is turned into the IAM actions it needs, on the table it names, and
each must be granted by the policy the page gives for that feature.
"""
from __future__ import annotations

import datetime
import json
import os
import pathlib
import re
import subprocess
import sys
from typing import Any, Dict, Iterable, List, Set, Tuple

import pytest

from helpers import CallRecorder, FaultInjector, LockClients, RecordedCall, step
from python_dynamodb_lock import Reason
from python_dynamodb_lock.python_dynamodb_lock import DynamoDBLockClient, DynamoDBLockError

PROJECT_DIR = pathlib.Path(__file__).resolve().parent.parent
IAM_PAGE = PROJECT_DIR / 'docs' / 'iam.rst'
DOC_LOCK_TABLE = 'my-locks'
DOC_APP_TABLE = 'orders'

Grant = Tuple[str, str]   # (IAM action, table name)

_TRANSACTION_ACTIONS = {'Put': 'dynamodb:PutItem', 'Update': 'dynamodb:UpdateItem',
                        'Delete': 'dynamodb:DeleteItem', 'ConditionCheck': 'dynamodb:ConditionCheckItem'}
_PARTIQL_ACTIONS = {'SELECT': 'dynamodb:PartiQLSelect', 'INSERT': 'dynamodb:PartiQLInsert',
                    'UPDATE': 'dynamodb:PartiQLUpdate', 'DELETE': 'dynamodb:PartiQLDelete'}
_PARTIQL_TABLE = re.compile(r'^\s*(?:UPDATE|DELETE\s+FROM|INSERT\s+INTO|SELECT\s.*?\sFROM)\s+"([^"]+)"',
                            re.IGNORECASE | re.DOTALL)


def documented_policies() -> Dict[str, Set[Grant]]:
    """The page's policies by name (``.. iam-policy: NAME`` before a JSON code block), as the
    (action, table) pairs they allow."""
    lines = IAM_PAGE.read_text(encoding='utf-8').splitlines()
    policies: Dict[str, Set[Grant]] = {}
    index = 0
    while index < len(lines):
        marker = re.fullmatch(r'\.\. iam-policy: (\S+)', lines[index])
        index += 1
        if not marker:
            continue
        while not lines[index].startswith('.. code-block:: json'):
            index += 1
        index += 1
        block: List[str] = []
        while index < len(lines) and (not lines[index] or lines[index].startswith('   ')):
            block.append(lines[index])
            index += 1
        document = json.loads('\n'.join(block))
        grants: Set[Grant] = set()
        for statement in document['Statement']:
            assert statement['Effect'] == 'Allow'
            actions = statement['Action'] if isinstance(statement['Action'], list) else [statement['Action']]
            resources = statement['Resource'] if isinstance(statement['Resource'], list) else [statement['Resource']]
            for resource in resources:
                table = resource.rpartition(':table/')[2]
                grants.update((action, table) for action in actions)
        policies[marker.group(1)] = grants
    return policies


def needed(calls: Iterable[RecordedCall], table_names: Dict[str, str]) -> Set[Grant]:
    """The (action, documented table name) pairs that these calls need."""
    def doc_table(name: str) -> str:
        return table_names[name]

    grants: Set[Grant] = set()
    for call in calls:
        if call.operation == 'TransactWriteItems':
            for action in call.params['TransactItems']:
                (kind, body), = action.items()
                grants.add((_TRANSACTION_ACTIONS[kind], doc_table(body['TableName'])))
        elif call.operation == 'TransactGetItems':   # IAM authorises each Get as a GetItem
            for action in call.params['TransactItems']:
                grants.add(('dynamodb:GetItem', doc_table(action['Get']['TableName'])))
        elif call.operation == 'BatchExecuteStatement':
            for statement in call.params['Statements']:
                text = statement['Statement']
                verb = text.split(None, 1)[0].upper()
                table = _PARTIQL_TABLE.match(text)
                assert table, text
                grants.add((_PARTIQL_ACTIONS[verb], doc_table(table.group(1))))
        else:   # a table's name, or its ARN (ListTagsOfResource)
            name = call.params.get('TableName') or call.params['ResourceArn'].rpartition(':table/')[2]
            grants.add((f'dynamodb:{call.operation}', doc_table(name)))
    return grants


def assert_granted(feature: str, calls: CallRecorder, table_names: Dict[str, str]) -> Set[Grant]:
    recorded = calls.calls
    assert recorded, f'{feature}: no DynamoDB call was recorded'
    need = needed(recorded, table_names)
    missing = need - documented_policies()[feature]
    assert not missing, f'docs/iam.rst: the {feature!r} policy misses {sorted(missing)}'
    return need


def test_the_page_has_a_policy_for_each_feature() -> None:
    assert set(documented_policies()) == {'locks', 'batched-heartbeats', 'shared-locks', 'several-keys', 'sessions',
                                          'operator', 'guarded-writes', 'table-creation', 'cli', 'cli-run', 'demo'}


def test_a_call_outside_a_policy_is_reported() -> None:
    # The check itself can fail: a PutItem on the lock table is in no lock policy.
    stray = RecordedCall('PutItem', {'TableName': 'real-locks'}, 'MainThread', None)
    assert needed([stray], {'real-locks': DOC_LOCK_TABLE}) - documented_policies()['locks'] == {
        ('dynamodb:PutItem', DOC_LOCK_TABLE)}


def test_locks(engine: Any, clients: LockClients) -> None:
    tables = {engine.table_name: DOC_LOCK_TABLE}
    with CallRecorder(engine.resource) as calls:
        client = clients.make()
        lock = client.acquire_lock('job')
        client.send_heartbeats()
        lock.extend()
        assert clients.make().try_acquire_lock('job') is None
        assert client.get_lock('job') is not None
        lock.release()
        deleting = clients.make(keep_released_rows=False)
        deleting.acquire_lock('other').release()
        waiter = clients.make()
        engine.put_lock_row('abandoned', lease_duration=2)
        with clients.clock.auto_advance_in_current_thread():   # waits out the lease, then takes over
            taken = waiter.acquire_lock('abandoned', retry_period=datetime.timedelta(seconds=1))
        assert taken.took_over_from is not None
        taken.release()
        client.close()
    operations = set(calls.operations())
    assert {'UpdateItem', 'GetItem', 'DeleteItem'} <= operations
    assert_granted('locks', calls, tables)


@pytest.mark.local   # PartiQL runs on DynamoDB and DynamoDB Local, not on moto
def test_batched_heartbeats(local_engine: Any, local_clients: LockClients) -> None:
    tables = {local_engine.table_name: DOC_LOCK_TABLE}
    with CallRecorder(local_engine.resource) as calls:
        client = local_clients.make(heartbeat_batch_size=25)
        locks = [client.acquire_lock(f'batch-{index}') for index in range(3)]
        client.send_heartbeats()
        for lock in locks:
            lock.release()
    assert 'BatchExecuteStatement' in calls.operations()
    locks_policy = documented_policies()['locks']
    need = assert_granted('batched-heartbeats', calls, tables)
    assert need - locks_policy == {('dynamodb:PartiQLUpdate', DOC_LOCK_TABLE)}


def test_operator(engine: Any, clients: LockClients) -> None:
    tables = {engine.table_name: DOC_LOCK_TABLE}
    holder = clients.make()
    holder.acquire_lock('stuck')
    with CallRecorder(engine.resource) as calls:
        operator = clients.make()
        listed = list(operator.list_locks())
        assert [lock.partition_key for lock in listed] == ['stuck']
        assert [lock.partition_key for lock in operator.list_locks(partition_key='stuck')] == ['stuck']
        assert operator.force_release_lock(operator.get_lock('stuck'))
        engine.put_lock_row('stuck-too')
        deleting = clients.make(keep_released_rows=False)
        assert deleting.force_release_lock(deleting.get_lock('stuck-too'))
    assert {'Scan', 'Query', 'GetItem'} <= set(calls.operations())
    assert_granted('operator', calls, tables)


def test_guarded_writes(engine: Any, clients: LockClients) -> None:
    app_table = f'{engine.table_name}-app'
    engine.client.create_table(TableName=app_table, KeySchema=[{'AttributeName': 'id', 'KeyType': 'HASH'}],
                               AttributeDefinitions=[{'AttributeName': 'id', 'AttributeType': 'S'}],
                               BillingMode='PAY_PER_REQUEST')
    tables = {engine.table_name: DOC_LOCK_TABLE, app_table: DOC_APP_TABLE}
    with CallRecorder(engine.resource) as calls:
        client = clients.make()
        lock = client.acquire_lock('orders')
        lock.put_item(TableName=app_table, Item={'id': 'o-1', 'count': 1})
        lock.update_item(TableName=app_table, Key={'id': 'o-1'}, UpdateExpression='SET #c = #c + :one',
                         ExpressionAttributeNames={'#c': 'count'}, ExpressionAttributeValues={':one': 1})
        lock.delete_item(TableName=app_table, Key={'id': 'o-1'})
        lock.release()
    need = assert_granted('guarded-writes', calls, tables)
    assert ('dynamodb:ConditionCheckItem', DOC_LOCK_TABLE) in need
    assert {('dynamodb:PutItem', DOC_APP_TABLE), ('dynamodb:UpdateItem', DOC_APP_TABLE),
            ('dynamodb:DeleteItem', DOC_APP_TABLE)} <= need


def test_table_creation(engine: Any) -> None:
    table_name = f'{engine.table_name}-new'
    with CallRecorder(engine.client) as calls:
        DynamoDBLockClient.create_dynamodb_table(engine.client, table_name=table_name)
    assert 'CreateTable' in calls.operations()
    assert_granted('table-creation', calls, {table_name: DOC_LOCK_TABLE})


@pytest.mark.parametrize('engine', ['moto'], indirect=True)     # DynamoDB Local keeps no tags
def test_a_retried_table_creation_reads_tags_only_where_the_page_says_it_may(engine: Any) -> None:
    """A ``CreateTable`` whose answer was lost, sent again, meets the table: the call reads its
    tags (``ListTagsOfResource``, optional on the page) and, refused them, still succeeds."""
    table_name = f'{engine.table_name}-retried'
    client = engine.new_client()
    with CallRecorder(client) as calls, FaultInjector(client) as faults:
        faults.fail_calls('ListTagsOfResource', code='AccessDeniedException', times=None)
        lost = faults.lose_answers('CreateTable')
        DynamoDBLockClient.create_dynamodb_table(client, table_name=table_name, tags={'team': 'locks'})
    assert lost.hits == 1
    need = needed(calls.calls, {table_name: DOC_LOCK_TABLE})
    optional = {('dynamodb:ListTagsOfResource', DOC_LOCK_TABLE)}
    assert optional <= need
    assert not need - optional - documented_policies()['table-creation']
    page = IAM_PAGE.read_text(encoding='utf-8')
    section = page[page.index('Creating the table\n---'):page.index('The command line\n---')]
    assert '``dynamodb:ListTagsOfResource`` is optional' in section


def test_the_cli_policy_covers_the_features_the_cli_uses() -> None:
    policies = documented_policies()
    assert policies['operator'] | policies['table-creation'] <= policies['cli']


# --------------------------------------------------------------------------------------------
# Shared locks, several keys at once and sessions: each policy is exactly what the feature
# asks for (nothing missing, nothing granted for nothing), and, run under an emulation of IAM
# that denies one action of the policy, the feature asks for that action and is refused with
# reason ACCESS_DENIED.
# --------------------------------------------------------------------------------------------

_OPERATIONS = ('GetItem', 'PutItem', 'UpdateItem', 'DeleteItem', 'Query', 'Scan', 'TransactWriteItems',
               'TransactGetItems', 'BatchExecuteStatement', 'CreateTable', 'DescribeTable',
               'DescribeTimeToLive', 'UpdateTimeToLive')
_SECONDS = datetime.timedelta(seconds=1)


def deny(faults: FaultInjector, action: str, table_names: Dict[str, str]) -> List[Any]:
    """Answer every call that needs ``action`` on a documented table with AccessDeniedException,
    as IAM does for a policy without it; return the faults (their ``hits`` count the denials)."""
    def needs_it(operation: str) -> Any:
        def when(request: Dict[str, Any]) -> bool:
            call = RecordedCall(operation, request, 'MainThread', None)
            try:
                return any(grant == action for grant, _ in needed([call], table_names))
            except KeyError:        # a table the policy is not about
                return False
        return when

    return [faults.fail_calls(operation, code='AccessDeniedException', times=None, when=needs_it(operation),
                              message=f'not authorized to perform: {action} (removed from the policy)')
            for operation in _OPERATIONS]


def shared_locks(engine: Any, clients: LockClients) -> None:
    readers = [clients.make(), clients.make()]
    held = [reader.acquire_lock('report', shared=True) for reader in readers]
    readers[0].send_heartbeats()
    writer = clients.make()
    assert writer.try_acquire_lock('report') is None
    with clients.clock.auto_advance_in_current_thread():    # a waiting writer: its marker, its polls
        try:
            writer.acquire_lock('report', retry_period=_SECONDS, retry_timeout=2 * _SECONDS)
        except DynamoDBLockError as error:
            if error.code != DynamoDBLockError.ACQUIRE_TIMEOUT:
                raise
    assert readers[0].get_lock('report') is not None
    for lock in held:
        lock.release()
    clients.make(keep_released_rows=False).acquire_lock('gone', shared=True).release()


def several_keys(engine: Any, clients: LockClients) -> None:
    from test_multi_keys import acquire_locks, try_acquire_locks

    client = clients.make()
    both = acquire_locks(client, ['account-17', 'account-42'])
    assert try_acquire_locks(clients.make(), ['account-42', 'account-99']) is None
    client.send_heartbeats()
    both.release(False)
    acquire_locks(clients.make(keep_released_rows=False), ['x', 'y']).release(False)


def sessions(engine: Any, clients: LockClients) -> None:
    periods = dict(heartbeat_period=5 * _SECONDS, lease_duration=30 * _SECONDS, safe_period=15 * _SECONDS,
                   expiry_period=60 * _SECONDS)
    holder = clients.make(hand_driven=False, session=True, owner_name='holder', **periods)
    lock = holder.acquire_lock('job')            # the session row's first write, then the lock
    lock.extend()                                # renews the session
    lock.release(best_effort=False)
    holder.acquire_lock('left')
    holder.close()                               # leaves 'left' under an unrenewed session
    waiter = clients.make(hand_driven=False, session=True, owner_name='waiter', **periods)
    assert waiter.try_acquire_lock('left') is None
    step(clients.clock, 30, waiter)
    taken = waiter.try_acquire_lock('left')      # the takeover transaction: the row and the session
    assert taken is not None
    taken.release(best_effort=False)
    waiter.close()                               # deletes its session row


FEATURES = {'shared-locks': shared_locks, 'several-keys': several_keys, 'sessions': sessions}


def run_feature(feature: str, engine: Any, clients: LockClients) -> Set[Grant]:
    tables = {engine.table_name: DOC_LOCK_TABLE}
    with CallRecorder(engine.resource) as calls:
        FEATURES[feature](engine, clients)
    need = assert_granted(feature, calls, tables)
    granted_for_nothing = documented_policies()[feature] - need
    assert not granted_for_nothing, f'docs/iam.rst: the {feature!r} policy grants {sorted(granted_for_nothing)} unused'
    return need


def run_denied(feature: str, action: str, engine: Any, clients: LockClients) -> None:
    with FaultInjector(engine.resource) as faults:
        denials = deny(faults, action, {engine.table_name: DOC_LOCK_TABLE})
        try:
            FEATURES[feature](engine, clients)
        except DynamoDBLockError as error:
            assert error.reason == Reason.ACCESS_DENIED, error
            assert action in str(error), error    # DynamoDB's message, which names the action, is kept
        else:
            # Refused where the library does not raise (a best-effort release, the end of a
            # session): it must have been asked, and the feature cannot have worked as documented.
            pass
    assert sum(fault.hits for fault in denials) > 0, f'{feature} never asked for {action}'


def _actions(feature: str) -> List[str]:
    return sorted(action for action, table in documented_policies()[feature] if table == DOC_LOCK_TABLE)


@pytest.mark.parametrize('feature', ['shared-locks', 'several-keys'])
def test_new_features_need_exactly_their_policy(feature: str, engine: Any, clients: LockClients) -> None:
    need = run_feature(feature, engine, clients)
    assert need == documented_policies()[feature]


@pytest.mark.local
def test_sessions_need_exactly_their_policy(local_engine: Any, local_clients: LockClients) -> None:
    need = run_feature('sessions', local_engine, local_clients)
    assert ('dynamodb:PutItem', DOC_LOCK_TABLE) in need and ('dynamodb:DeleteItem', DOC_LOCK_TABLE) in need


@pytest.mark.parametrize('feature, action', [(feature, action) for feature in ('shared-locks', 'several-keys')
                                             for action in _actions(feature)])
def test_a_policy_without_one_of_its_actions_is_refused(feature: str, action: str, engine: Any,
                                                        clients: LockClients) -> None:
    run_denied(feature, action, engine, clients)


@pytest.mark.local
@pytest.mark.parametrize('action', _actions('sessions'))
def test_a_session_policy_without_one_of_its_actions_is_refused(action: str, local_engine: Any,
                                                                local_clients: LockClients) -> None:
    run_denied('sessions', action, local_engine, local_clients)


# --------------------------------------------------------------------------------------------
# The command line: each command runs as a user runs it, in a process of its own (the demo's
# workers in processes of theirs), with a sitecustomize that records every DynamoDB call any
# boto3 session of those processes makes.
# --------------------------------------------------------------------------------------------

_RECORDING_SITECUSTOMIZE = '''
import json
import os

import boto3.session

_PATH = os.environ['PDL_IAM_CALLS']
_init = boto3.session.Session.__init__


def _record(event_name, params, **kwargs):
    body = params.get('body') or b'{}'
    if isinstance(body, bytes):
        body = body.decode('utf-8')
    with open(_PATH, 'a', encoding='utf-8') as calls:
        calls.write(json.dumps({'operation': event_name.rsplit('.', 1)[1], 'params': json.loads(body or '{}')}) + '\\n')


def _recording_init(self, *args, **kwargs):
    _init(self, *args, **kwargs)
    self.events.register('before-call.dynamodb', _record)


boto3.session.Session.__init__ = _recording_init
'''


def run_cli_recorded(engine: Any, tmp_path: pathlib.Path, *argv: str) -> List[RecordedCall]:
    """``python -m python_dynamodb_lock --endpoint-url ... ARGV`` in a child; the calls of every
    process it started."""
    site = tmp_path / 'site'
    site.mkdir(exist_ok=True)
    (site / 'sitecustomize.py').write_text(_RECORDING_SITECUSTOMIZE, encoding='utf-8')
    calls_file = tmp_path / 'calls.jsonl'
    environment = {name: value for name, value in os.environ.items() if not name.startswith('AWS_')}
    environment.update({
        'PDL_IAM_CALLS': str(calls_file), 'AWS_ACCESS_KEY_ID': 'testing', 'AWS_SECRET_ACCESS_KEY': 'testing',
        'AWS_CONFIG_FILE': str(tmp_path / 'none'), 'AWS_SHARED_CREDENTIALS_FILE': str(tmp_path / 'none'),
        'AWS_EC2_METADATA_DISABLED': 'true',
        'PYTHONPATH': os.pathsep.join(filter(None, [str(site), str(PROJECT_DIR), os.environ.get('PYTHONPATH')])),
    })
    result = subprocess.run([sys.executable, '-m', 'python_dynamodb_lock', '--endpoint-url', engine.endpoint_url,
                             '--region', 'us-east-1', *argv], env=environment, capture_output=True, text=True,
                            timeout=300, cwd=str(tmp_path), check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = calls_file.read_text(encoding='utf-8').splitlines() if calls_file.exists() else []
    return [RecordedCall(line['operation'], line['params'], 'MainThread', None) for line in map(json.loads, lines)]


def cli_grants(feature: str, calls: List[RecordedCall], table_names: Dict[str, str]) -> Set[Grant]:
    assert calls, f'{feature}: no DynamoDB call was recorded'
    need = needed(calls, table_names)
    missing = need - documented_policies()[feature]
    assert not missing, f'docs/iam.rst: the {feature!r} policy misses {sorted(missing)}'
    return need


@pytest.mark.local
def test_the_cli_policy_covers_each_admin_command(local_engine: Any, tmp_path: pathlib.Path) -> None:
    table = f'{local_engine.table_name}-cli'
    tables = {table: DOC_LOCK_TABLE}
    calls = run_cli_recorded(local_engine, tmp_path, '--table', table, 'create-table')
    local_engine.put_lock_row('stuck', table_name=table)
    for argv in (['list'], ['list', '--partition-key', 'stuck'], ['show', 'stuck'],
                 ['release', '--force', '--yes', 'stuck']):
        calls += run_cli_recorded(local_engine, tmp_path, '--table', table, *argv)
    need = cli_grants('cli', calls, tables)
    assert {op for op, _ in need} >= {'dynamodb:CreateTable', 'dynamodb:Scan', 'dynamodb:Query', 'dynamodb:GetItem',
                                      'dynamodb:UpdateItem'}


@pytest.mark.local
def test_the_cli_run_policy(local_engine: Any, tmp_path: pathlib.Path) -> None:
    tables = {local_engine.table_name: DOC_LOCK_TABLE}
    local_engine.put_lock_row('nightly', lease_duration=1)   # a dead holder: run waits, then takes over
    calls = run_cli_recorded(local_engine, tmp_path, '--table', local_engine.table_name, 'run', 'nightly',
                             '--wait', '30', '--', sys.executable, '-c', 'pass')
    need = cli_grants('cli-run', calls, tables)
    assert need == documented_policies()['cli-run']


@pytest.mark.local
@pytest.mark.slow
def test_the_demo_policy(local_engine: Any, tmp_path: pathlib.Path) -> None:
    table = f'{local_engine.table_name}-demo'
    calls = run_cli_recorded(local_engine, tmp_path, '--table', table, 'demo', '--duration', '4', '--workers', '2',
                             '--quiet')
    operations = {call.operation for call in calls}
    assert {'CreateTable', 'PutItem', 'UpdateItem', 'DeleteItem'} <= operations   # the workers' calls too
    need = cli_grants('demo', calls, {table: 'DynamoDBLockDemo'})
    assert need == documented_policies()['demo']
