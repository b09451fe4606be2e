"""Requests for the differential test of the simulated table (``test_sim_table_differential.py``):
hand-written edge requests, and a seeded generator of random ones. All name the table ``EDGE``
(rewritten for each replay) and use the default lock table layout (``lock_key``, ``sort_key``).
"""
from __future__ import annotations

import random
from typing import Any, Dict, List, Tuple

Step = Tuple[str, Dict[str, Any]]

# -- hand-written edge requests ----------------------------------------------------------------

EDGE = 'EDGE'     # the table name in the hand-written requests (rewritten for each replay)


def _key(partition: str, sort: str = '-') -> Dict[str, Any]:
    return {'lock_key': {'S': partition}, 'sort_key': {'S': sort}}


def _update(partition: str, expression: str, values: Any = None, names: Any = None, **more: Any) -> Step:
    params: Dict[str, Any] = {'TableName': EDGE, 'Key': _key(partition), 'UpdateExpression': expression, **more}
    if values:
        params['ExpressionAttributeValues'] = values
    if names:
        params['ExpressionAttributeNames'] = names
    return ('update_item', params)


def _check(partition: str, condition: str, values: Any = None, names: Any = None) -> Step:
    """An update that succeeds exactly when ``condition`` holds on the row (the answer says which)."""
    return _update(partition, 'SET probe = :probe', {':probe': {'N': '1'}, **(values or {})}, names,
                   ConditionExpression=condition, ReturnValuesOnConditionCheckFailure='ALL_OLD')


N = {'N': '5'}
ROW = {**_key('row'), 'n': {'N': '1.50'}, 's': {'S': 'héllo'}, 'ss': {'SS': ['x', 'y']}, 'ns': {'NS': ['1', '2.0']},
       'l': {'L': [{'S': 'x'}, {'N': '2'}]}, 'm': {'M': {'deep': {'M': {'v': {'S': 'x'}}}, 'k': {'N': '1e2'}}},
       'b': {'BOOL': True}, 'z': {'NULL': True}, 'version': {'S': 'v1'}}

CONDITION_STEPS: List[Step] = [
    ('put_item', {'TableName': EDGE, 'Item': ROW}),
    _check('row', 'n = :v', {':v': {'N': '1.5'}}),
    _check('row', 'n <> :v', {':v': {'S': '1.5'}}),
    _check('row', 'n < :v', {':v': {'S': 'str'}}),                 # a type mismatch: false, no error
    _check('row', 'NOT n < :v', {':v': {'S': 'str'}}),
    _check('row', 'absent <> :v', {':v': {'N': '1'}}),
    _check('row', 'NOT absent = :v', {':v': {'N': '1'}}),
    _check('row', 's > :v AND s <= :w', {':v': {'S': 'h'}, ':w': {'S': 'i'}}),
    _check('row', 'n BETWEEN :a AND :b', {':a': {'N': '1'}, ':b': {'N': '2'}}),
    _check('row', 'n BETWEEN :a AND :b', {':a': {'N': '3'}, ':b': {'N': '2'}}),   # bounds reversed: refused
    _check('row', 'version IN (:a, :b)', {':a': {'S': 'v0'}, ':b': {'S': 'v1'}}),
    _check('row', 'version IN (:a)', {':a': {'S': 'v0'}}),
    _check('row', 'size(s) = :v', {':v': {'N': '5'}}),
    _check('row', 'size(ss) = :v AND size(l) = :v AND size(m) = :v', {':v': {'N': '2'}}),
    _check('row', 'size(n) = :v', {':v': {'N': '1'}}),
    _check('row', 'contains(s, :v) AND contains(ss, :w) AND contains(l, :w)', {':v': {'S': 'll'}, ':w': {'S': 'x'}}),
    _check('row', 'contains(ns, :v)', {':v': {'N': '2'}}),
    _check('row', 'begins_with(s, :v)', {':v': {'S': 'hé'}}),
    _check('row', 'begins_with(s, :v)', {':v': {'S': 'x'}}),
    _check('row', 'attribute_type(ss, :v) AND attribute_type(z, :w)', {':v': {'S': 'SS'}, ':w': {'S': 'NULL'}}),
    _check('row', 'attribute_type(ss, :v)', {':v': {'S': 'QQ'}}),
    _check('row', 'attribute_exists(m.deep.v) AND attribute_not_exists(m.deep.w)'),
    _check('row', 'm.#i.v = :v AND m.k = :k', {':v': {'S': 'x'}, ':k': {'N': '100'}}, {'#i': 'deep'}),
    _check('row', 'l[1] = :v AND attribute_not_exists(l[5])', {':v': {'N': '2'}}),
    _check('row', '(attribute_not_exists(n) OR n >= :v) AND NOT (b = :f)', {':v': {'N': '1'}, ':f': {'BOOL': False}}),
    _check('row', 'ss = :v AND ns = :w', {':v': {'SS': ['y', 'x']}, ':w': {'NS': ['2', '1']}}),
    _check('row', '#n = :v', {':v': {'N': '1.5'}}, {'#n': 'n', '#unused': 'x'}),          # an unused name
    _check('row', 'n = :v', {':v': {'N': '1.5'}, ':unused': {'N': '1'}}),                  # an unused value
    _check('row', 'n = :undefined'),
    _check('row', '#undefined = :v', {':v': {'N': '1'}}),
    _check('row', 'n = = :v', {':v': {'N': '1'}}),
    _check('missing', 'attribute_not_exists(lock_key) OR attribute_exists(released_at)'),
    _check('missing', 'attribute_exists(lock_key)'),
    ('get_item', {'TableName': EDGE, 'Key': _key('row'), 'ConsistentRead': True}),
    ('get_item', {'TableName': EDGE, 'Key': _key('missing'), 'ConsistentRead': True}),
]

UPDATE_STEPS: List[Step] = [
    _update('u', 'SET t = if_not_exists(t, :floor) + :one', {':floor': {'N': '10'}, ':one': {'N': '1'}},
            ReturnValues='ALL_NEW'),
    _update('u', 'SET t = if_not_exists(t, :floor) + :one', {':floor': {'N': '10'}, ':one': {'N': '1'}},
            ReturnValues='UPDATED_OLD'),
    _update('u', 'SET d = t - :x, e = :x + :y', {':x': {'N': '1.25'}, ':y': {'N': '1E+2'}}, ReturnValues='UPDATED_NEW'),
    _update('u', 'SET m = :m', {':m': {'M': {'a': {'M': {'v': {'S': '1'}}}, 'b': {'N': '2'}}}}),
    _update('u', 'SET m.a.v = :v, m.#c = :v REMOVE m.b, d', {':v': {'S': 'new'}}, {'#c': 'c'}, ReturnValues='ALL_NEW'),
    _update('u', 'REMOVE m.absent, absent', ReturnValues='ALL_OLD'),
    _update('u', 'ADD t :two, tags :tags, fresh :two', {':two': {'N': '2'}, ':tags': {'SS': ['a', 'b']}},
            ReturnValues='UPDATED_NEW'),
    _update('u', 'DELETE tags :tags', {':tags': {'SS': ['a']}}, ReturnValues='ALL_NEW'),
    _update('u', 'SET lst = list_append(if_not_exists(lst, :empty), :more)', {':empty': {'L': []},
            ':more': {'L': [{'S': 'x'}]}}, ReturnValues='UPDATED_NEW'),
    _update('u', 'SET nowhere.x = :v', {':v': {'N': '1'}}),               # the parent is missing
    _update('u', 'REMOVE nowhere.x'),
    _update('u', 'SET q = absent + :v', {':v': {'N': '1'}}),              # arithmetic on a missing attribute
    _update('u', 'SET q = e + :v', {':v': {'S': 'x'}}),                   # arithmetic on a string
    _update('u', 'SET m.a = :v REMOVE m', {':v': {'N': '1'}}),            # overlapping paths
    _update('u', 'SET a = :v SET b = :v', {':v': {'N': '1'}}),            # a clause twice
    _update('u', 'SET lock_key = :v', {':v': {'S': 'x'}}),                # a key attribute
    _update('fresh', 'REMOVE x', ReturnValues='ALL_NEW'),                 # an update creates the item
    _update('fresh2', 'SET x = :v', {':v': {'S': 'y'}}, ReturnValues='ALL_OLD'),
    ('delete_item', {'TableName': EDGE, 'Key': _key('fresh'), 'ReturnValues': 'ALL_OLD'}),
    ('delete_item', {'TableName': EDGE, 'Key': _key('fresh'), 'ReturnValues': 'ALL_OLD'}),
    ('delete_item', {'TableName': EDGE, 'Key': _key('u'), 'ConditionExpression': 'attribute_not_exists(t)',
                     'ReturnValuesOnConditionCheckFailure': 'ALL_OLD'}),
    ('put_item', {'TableName': EDGE, 'Item': _key('fresh2'), 'ReturnValues': 'ALL_OLD'}),
    ('put_item', {'TableName': EDGE, 'Item': {'lock_key': {'S': 'nosort'}}}),                    # a key part missing
    ('get_item', {'TableName': EDGE, 'Key': {'lock_key': {'N': '1'}, 'sort_key': {'S': '-'}}}),  # a wrong key type
    ('get_item', {'TableName': EDGE, 'Key': _key('')}),
    ('get_item', {'TableName': 'no-such-table', 'Key': _key('u')}),
    ('get_item', {'TableName': EDGE, 'Key': _key('u'), 'ConsistentRead': True}),
    # The 400 KB item limit, clear of the rounding of the size rules.
    ('put_item', {'TableName': EDGE, 'Item': {**_key('big'), 'text': {'S': 'x' * 300_000}}}),
    ('put_item', {'TableName': EDGE, 'Item': {**_key('huge'), 'text': {'S': 'x' * 420_000}}}),
    _update('big', 'SET more = :text', {':text': {'S': 'y' * 120_000}}),
    _update('big', 'SET more = :text', {':text': {'S': 'y' * 50_000}}),
    ('get_item', {'TableName': EDGE, 'Key': _key('huge')}),
]


def _action(kind: str, partition: str, **body: Any) -> Dict[str, Any]:
    target = {'Item': {**_key(partition), **body.pop('extra', {})}} if kind == 'Put' else {'Key': _key(partition)}
    return {kind: {'TableName': EDGE, **target, **body}}


TRANSACTION_STEPS: List[Step] = [
    ('put_item', {'TableName': EDGE, 'Item': {**_key('held'), 'version': {'S': 'v1'}, 'n': {'N': '1'}}}),
    ('transact_write_items', {'TransactItems': [
        _action('ConditionCheck', 'held', ConditionExpression='version = :v', ExpressionAttributeValues={
            ':v': {'S': 'v0'}}, ReturnValuesOnConditionCheckFailure='ALL_OLD'),
        _action('Put', 'new', extra={'x': {'S': 'y'}}),
        _action('Update', 'absent', UpdateExpression='SET a = :v', ConditionExpression='attribute_exists(lock_key)',
                ExpressionAttributeValues={':v': {'N': '1'}}, ReturnValuesOnConditionCheckFailure='ALL_OLD'),
        _action('Delete', 'held2', ConditionExpression='attribute_not_exists(lock_key)')]}),
    ('get_item', {'TableName': EDGE, 'Key': _key('new'), 'ConsistentRead': True}),       # nothing was written
    ('transact_write_items', {'ClientRequestToken': 'token-1', 'TransactItems': [
        _action('ConditionCheck', 'held', ConditionExpression='version = :v', ExpressionAttributeValues={
            ':v': {'S': 'v1'}}),
        _action('Put', 'new', extra={'x': {'S': 'y'}}),
        _action('Update', 'counter', UpdateExpression='SET c = if_not_exists(c, :zero) + :one',
                ExpressionAttributeValues={':zero': {'N': '0'}, ':one': {'N': '1'}}),
        _action('Delete', 'nothing')]}),
    ('transact_write_items', {'ClientRequestToken': 'token-1', 'TransactItems': [      # the same again: not reapplied
        _action('ConditionCheck', 'held', ConditionExpression='version = :v', ExpressionAttributeValues={
            ':v': {'S': 'v1'}}),
        _action('Put', 'new', extra={'x': {'S': 'y'}}),
        _action('Update', 'counter', UpdateExpression='SET c = if_not_exists(c, :zero) + :one',
                ExpressionAttributeValues={':zero': {'N': '0'}, ':one': {'N': '1'}}),
        _action('Delete', 'nothing')]}),
    ('transact_write_items', {'ClientRequestToken': 'token-1', 'TransactItems': [_action('Delete', 'new')]}),
    # One item twice: refused (DynamoDB Local refuses it only when the ConditionCheck comes first; given a
    # Delete first, it applies both in turn: see test_sim_table.py for the model's answer, DynamoDB's).
    ('transact_write_items', {'TransactItems': [_action('ConditionCheck', 'new', ConditionExpression=(
        'attribute_exists(lock_key)')), _action('Delete', 'new')]}),
    ('transact_write_items', {'TransactItems': [_action('Delete', 'new', TableName='no-such-table')]}),
    ('transact_get_items', {'TransactItems': [{'Get': {'TableName': EDGE, 'Key': _key(name)}}
                                              for name in ('counter', 'new', 'absent', 'held')]}),
]


def _statement(partition: str, versions: List[str], sets: Tuple[str, ...] = ('version', 'lease')) -> Dict[str, Any]:
    assignments = ''.join(f' SET "{name}" = ?' for name in sets)
    condition = f' AND "version" IN [{", ".join("?" * len(versions))}]' if versions else ''
    return {'Statement': f'UPDATE "{EDGE}"{assignments} WHERE "lock_key" = ? AND "sort_key" = ?{condition}',
            'Parameters': [{'S': f'new-{name}'} for name in sets] + list(_key(partition).values())
            + [{'S': version} for version in versions], 'ReturnValuesOnConditionCheckFailure': 'ALL_OLD'}


BATCH_STEPS: List[Step] = [
    *(('put_item', {'TableName': EDGE, 'Item': {**_key(name), 'version': {'S': 'v1'}}}) for name in 'abcd'),
    ('batch_execute_statement', {'Statements': [
        _statement('a', ['v0', 'v1']), _statement('b', ['v0']), _statement('missing', ['v1']),
        {**_statement('c', ['v9']), 'ReturnValuesOnConditionCheckFailure': 'NONE'},
        {'Statement': f'DELETE FROM "{EDGE}" WHERE "lock_key" = ? AND "sort_key" = ?',
         'Parameters': list(_key('d').values())},
        {'Statement': f'DELETE FROM "{EDGE}" WHERE "lock_key" = ? AND "sort_key" = ?',
         'Parameters': list(_key('never').values())},
        {'Statement': 'UPDATE "no-such-table" SET "version" = ? WHERE "lock_key" = ? AND "sort_key" = ?',
         'Parameters': [{'S': 'x'}, *_key('a').values()]},
    ]}),
    ('batch_execute_statement', {'Statements': [_statement('a', ['new-version']), _statement('a', ['v1'])]}),
    ('query', {'TableName': EDGE, 'KeyConditionExpression': '#p = :p', 'ExpressionAttributeNames': {'#p': 'lock_key'},
               'ExpressionAttributeValues': {':p': {'S': 'a'}}, 'ConsistentRead': True}),
    *(('put_item', {'TableName': EDGE, 'Item': _key('paged', sort)}) for sort in ('1', '2', '3', '10')),
    ('query', {'TableName': EDGE, 'KeyConditionExpression': 'lock_key = :p', 'Limit': 2,
               'ExpressionAttributeValues': {':p': {'S': 'paged'}}}),
    ('query', {'TableName': EDGE, 'KeyConditionExpression': 'lock_key = :p', 'Limit': 2,
               'ExpressionAttributeValues': {':p': {'S': 'paged'}}, 'ExclusiveStartKey': _key('paged', '2')}),
    ('query', {'TableName': EDGE, 'KeyConditionExpression': 'lock_key = :p', 'Limit': 3, 'ScanIndexForward': False,
               'ExpressionAttributeValues': {':p': {'S': 'paged'}}, 'ExclusiveStartKey': _key('paged', '3')}),
    ('query', {'TableName': EDGE, 'KeyConditionExpression': 'lock_key = :p',
               'ExpressionAttributeValues': {':p': {'S': 'nothing'}}}),
    ('scan', {'TableName': EDGE, 'ConsistentRead': True}),
]



# -- seeded random sequences -----------------------------------------------------------------------

_CONDITIONS = ['attribute_exists(v)', 'attribute_not_exists(lock_key)', 'v = :x', 'v IN (:x, :y)', 'n < :k',
               'size(v) = :one', 'NOT v = :x', 'n BETWEEN :one AND :k', '(v = :x OR n > :k) AND attribute_exists(n)',
               'v <> :y', 'begins_with(v, :x)', 'contains(tags, :x)', 'm.f = :x']
_UPDATES = ['SET v = :x', 'SET n = if_not_exists(n, :k) + :one', 'REMOVE v', 'ADD n :one', 'SET n = n - :one',
            'SET m = :map', 'SET m.f = :y', 'ADD tags :tags', 'DELETE tags :tags', 'SET v = :y REMOVE n, m.f']


class RandomRequests:
    """Requests drawn by a seeded generator over a few keys and attributes (the same seed, the same requests)."""

    def __init__(self, seed: int) -> None:
        self.random = random.Random(seed)

    def values(self, *expressions: str) -> Dict[str, Any]:
        text = ' '.join(expressions)
        pick = self.random.choice
        every = {':x': {'S': pick('abc')}, ':y': {'S': pick(['a', 'bb', 'ccc'])}, ':k': {'N': str(pick([2, 3, 7]))},
                 ':one': {'N': '1'}, ':map': {'M': {'f': {'S': pick('ab')}}}, ':tags': {'SS': [pick('abc')]}}
        return {name: value for name, value in every.items() if name in text}

    def key(self) -> Dict[str, Any]:
        return _key(self.random.choice('pqr'), self.random.choice(['-', 's']))

    def condition(self, params: Dict[str, Any]) -> None:
        if self.random.random() < 0.6:
            params['ConditionExpression'] = self.random.choice(_CONDITIONS)
            if self.random.random() < 0.7:
                params['ReturnValuesOnConditionCheckFailure'] = 'ALL_OLD'

    def write(self, kind: str) -> Dict[str, Any]:
        params: Dict[str, Any] = {'TableName': EDGE}
        if kind == 'put_item':
            params['Item'] = {**self.key(), 'v': {'S': self.random.choice('abc')},
                              'n': {'N': str(self.random.randint(0, 9))}}
        else:
            params['Key'] = self.key()
        if kind == 'update_item':
            params['UpdateExpression'] = self.random.choice(_UPDATES)
        self.condition(params)
        values = self.values(params.get('UpdateExpression', ''), params.get('ConditionExpression', ''))
        if values:
            params['ExpressionAttributeValues'] = values
        return params

    def step(self) -> Step:
        kind = self.random.choice(['put_item', 'update_item', 'update_item', 'delete_item', 'get_item',
                                   'transact_write_items', 'batch_execute_statement', 'query', 'scan'])
        if kind in ('put_item', 'update_item', 'delete_item'):
            params = self.write(kind)
            choices = {'put_item': ['NONE', 'ALL_OLD'], 'delete_item': ['NONE', 'ALL_OLD'],
                       'update_item': ['NONE', 'ALL_OLD', 'ALL_NEW', 'UPDATED_OLD', 'UPDATED_NEW']}[kind]
            params['ReturnValues'] = self.random.choice(choices)
            return kind, params
        if kind == 'get_item':
            return kind, {'TableName': EDGE, 'Key': self.key(), 'ConsistentRead': True}
        if kind == 'query':
            return kind, {'TableName': EDGE, 'KeyConditionExpression': 'lock_key = :p', 'ConsistentRead': True,
                          'ExpressionAttributeValues': {':p': {'S': self.random.choice('pqr')}}}
        if kind == 'scan':
            return kind, {'TableName': EDGE, 'ConsistentRead': True}
        if kind == 'batch_execute_statement':
            return kind, {'Statements': [
                {'Statement': f'UPDATE "{EDGE}" SET "v" = ? WHERE "lock_key" = ? AND "sort_key" = ? AND "v" IN [?, ?]',
                 'Parameters': [{'S': self.random.choice('abc')}, {'S': partition}, {'S': '-'},
                                {'S': self.random.choice('abc')}, {'S': self.random.choice('abc')}],
                 'ReturnValuesOnConditionCheckFailure': self.random.choice(['NONE', 'ALL_OLD'])}
                for partition in self.random.sample('pqr', self.random.randint(1, 3))]}
        return kind, {'TransactItems': self.transaction()}

    def transaction(self) -> List[Dict[str, Any]]:
        actions = []
        for partition in self.random.sample('pqr', self.random.randint(1, 3)):
            kind = self.random.choice(['Put', 'Update', 'Delete', 'ConditionCheck'])
            params = self.write({'Put': 'put_item', 'Update': 'update_item'}.get(kind, 'delete_item'))
            params.pop('Key', None)
            if kind == 'Put':
                params['Item'].update(_key(partition))
            else:
                params['Key'] = _key(partition)
            if kind == 'ConditionCheck' and 'ConditionExpression' not in params:
                params['ConditionExpression'] = 'attribute_exists(v)'
            actions.append({kind: params})
        return actions
