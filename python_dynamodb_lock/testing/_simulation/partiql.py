"""``BatchExecuteStatement``: the PartiQL statements the heartbeat batch sends, and no others.

The shapes: ``UPDATE "<table>" SET "<name>" = ? [SET "<name>" = ? ...] WHERE "<key>" = ?
[AND "<key>" = ?] [AND "<name>" IN [?, ...] | AND "<name>" = ?]`` and ``DELETE FROM "<table>"
WHERE <the same>``. Any other statement raises ``NotImplementedError`` naming what it met.
Each statement is answered on its own, as DynamoDB does: an UPDATE of a missing item, or a
failed condition, is ``ConditionalCheckFailed`` (with the item when asked: ``ALL_OLD``).
"""
from __future__ import annotations

import functools
import re
from typing import Any, Dict, List, NamedTuple, Optional, Tuple

from . import values as v
from .errors import CONDITION_FAILED_MESSAGE, Invalid, validation
from .expressions import Condition, Operand, Path, evaluate
from .table import TableState, StoredKey, refuse_unknown
from .updates import Action, Term, Update, apply_update, check_paths

__all__ = ['Statement', 'batch_execute_statement', 'parse_statement']

MAX_STATEMENTS = 25
_TOKEN = re.compile(r'\s*(?:"((?:[^"]|"")*)"|(\?)|(\[|\]|,|=)|([A-Za-z]+))')


class Statement(NamedTuple):
    """A parsed statement: ``assignments`` the names SET (in order; empty for a DELETE), ``key``
    the key names of the WHERE clause, ``condition`` the last name conditioned and its count
    of values (1: ``= ?``; -n: ``IN`` a list of n)."""

    table_name: str
    assignments: Tuple[str, ...]
    key: Tuple[str, ...]
    condition: Optional[Tuple[str, int]]


def _tokens(statement: str) -> List[Tuple[str, str]]:
    """('quoted', name), ('?', '?'), ('op', text), ('word', WORD) tokens."""
    found = []
    position = 0
    statement = statement.strip()
    while position < len(statement):
        match = _TOKEN.match(statement, position)
        if match is None:
            raise NotImplementedError(f'the simulated table does not model this PartiQL statement (at '
                                      f'{statement[position:position + 20]!r}): {statement!r}')
        quoted, parameter, op, word = match.groups()
        if quoted is not None:
            found.append(('quoted', quoted.replace('""', '"')))
        elif parameter is not None:
            found.append(('?', '?'))
        elif op is not None:
            found.append(('op', op))
        else:
            found.append(('word', word.upper()))
        position = match.end()
    return found


class _Reader:
    def __init__(self, statement: str) -> None:
        self.statement = statement
        self.tokens = _tokens(statement)
        self.position = 0

    def refuse(self) -> NotImplementedError:
        met = self.tokens[self.position][1] if self.position < len(self.tokens) else '<end>'
        return NotImplementedError(f'the simulated table does not model this PartiQL statement (met {met!r}): '
                                   f'{self.statement!r}')

    def take(self, kind: str, text: Optional[str] = None) -> str:
        if self.position >= len(self.tokens):
            raise self.refuse()
        found_kind, found_text = self.tokens[self.position]
        if found_kind != kind or (text is not None and found_text != text):
            raise self.refuse()
        self.position += 1
        return found_text

    def at(self, kind: str, text: Optional[str] = None) -> bool:
        if self.position >= len(self.tokens):
            return False
        found_kind, found_text = self.tokens[self.position]
        return found_kind == kind and (text is None or found_text == text)

    def comparison(self) -> Tuple[str, int]:
        """``"name" = ?`` (one value) or ``"name" IN [?, ...]`` (their count)."""
        name = self.take('quoted')
        if self.at('op', '='):
            self.take('op', '=')
            self.take('?')
            return name, 1
        self.take('word', 'IN')
        self.take('op', '[')
        count = 1
        self.take('?')
        while self.at('op', ','):
            self.take('op', ',')
            self.take('?')
            count += 1
        self.take('op', ']')
        return name, -count     # negative: an IN list


@functools.lru_cache(maxsize=256)
def parse_statement(statement: str, key_names: Tuple[str, ...]) -> Statement:
    reader = _Reader(statement)
    assignments: List[str] = []
    if reader.at('word', 'UPDATE'):
        reader.take('word')
        table_name = reader.take('quoted')
        while reader.at('word', 'SET'):
            reader.take('word', 'SET')
            assignments.append(reader.take('quoted'))
            reader.take('op', '=')
            reader.take('?')
        if not assignments:
            raise reader.refuse()
    else:
        reader.take('word', 'DELETE')
        reader.take('word', 'FROM')
        table_name = reader.take('quoted')
    reader.take('word', 'WHERE')
    comparisons = [reader.comparison()]
    while reader.at('word', 'AND'):
        reader.take('word', 'AND')
        comparisons.append(reader.comparison())
    if reader.position != len(reader.tokens):
        raise reader.refuse()
    key = tuple(name for name, count in comparisons[:len(key_names)] if count == 1)
    if key != key_names:
        raise NotImplementedError(f'the simulated table models PartiQL statements whose WHERE clause starts with the '
                                  f'whole key ({", ".join(key_names)}) compared with =, got {statement!r}')
    rest = comparisons[len(key_names):]
    if len(rest) > 1:
        raise NotImplementedError(f'the simulated table models at most one condition after the key: {statement!r}')
    return Statement(table_name, tuple(assignments), key, rest[0] if rest else None)


def _condition(statement: Statement, parameters: List[Any]) -> Optional[Condition]:
    if statement.condition is None:
        return None
    name, count = statement.condition
    target = Operand('path', Path((name,)))
    options = tuple(Operand('value', value) for value in parameters)
    if count == 1:
        return Condition('compare', '=', (target, options[0]))
    return Condition('in', 'IN', (target, *options))


def _run(table: TableState, body: Dict[str, Any], keys: List[StoredKey]) -> Dict[str, Any]:
    """One statement's answer ({'TableName': ...} or {'Error': {...}}); ``keys`` collects the keys touched."""
    refuse_unknown('BatchExecuteStatement statement', body,
                   frozenset({'Statement', 'Parameters', 'ConsistentRead', 'ReturnValuesOnConditionCheckFailure'}))
    statement = parse_statement(str(body.get('Statement', '')), table.key_names)
    parameters = list(body.get('Parameters') or [])
    if statement.table_name != table.table_name:
        return {'Error': {'Code': 'ResourceNotFound', 'Message': 'Cannot do operations on a non-existent table'}}
    if len(parameters) != len(statement.assignments) + len(statement.key) + abs((statement.condition or ('', 0))[1]):
        raise validation('Number of parameters in request and statement don\'t match.')
    for parameter in parameters:
        v.check_value(parameter)
    assigned = parameters[:len(statement.assignments)]
    key_values = parameters[len(statement.assignments):len(statement.assignments) + len(statement.key)]
    key = table.stored_key(dict(zip(statement.key, key_values)))
    keys.append(key)
    old = table.get(key)
    condition = _condition(statement, parameters[len(statement.assignments) + len(statement.key):])
    holds = (old is not None or not statement.assignments) and (condition is None or evaluate(old or {}, condition))
    if not holds:
        error: Dict[str, Any] = {'Code': 'ConditionalCheckFailed', 'Message': CONDITION_FAILED_MESSAGE}
        if old is not None and body.get('ReturnValuesOnConditionCheckFailure') == 'ALL_OLD':
            error['Item'] = old
        return {'Error': error, 'TableName': table.table_name}
    if statement.assignments:
        actions = tuple(Action('SET', Path((name,)), Term('operand', (Operand('value', value),)))
                        for name, value in zip(statement.assignments, assigned))
        check_paths([action.path for action in actions], table.key_names)
        table.store(key, apply_update(Update(actions), old, table.key_item(key)))
    else:
        table.store(key, None)
    return {'TableName': table.table_name}


def batch_execute_statement(table: TableState, params: Dict[str, Any], request_id: str) -> Dict[str, Any]:
    refuse_unknown('batch_execute_statement', params, frozenset({'Statements', 'ReturnConsumedCapacity'}))
    statements = params.get('Statements')
    if not isinstance(statements, list) or not 1 <= len(statements) <= MAX_STATEMENTS:
        raise validation("1 validation error detected: Value at 'statements' failed to satisfy constraint: Member "
                         f'must have length less than or equal to {MAX_STATEMENTS}')
    # DynamoDB refuses the whole batch when two statements name one item: check before applying any.
    keys: List[StoredKey] = []
    for body in statements:
        parsed = parse_statement(str(body.get('Statement', '')), table.key_names)
        if parsed.table_name == table.table_name:
            first = len(parsed.assignments)
            key_values = list(body.get('Parameters') or [])[first:first + len(parsed.key)]
            try:
                keys.append(table.stored_key(dict(zip(parsed.key, key_values))))
            except Invalid:
                pass
    if len(set(keys)) != len(keys):
        raise validation('Provided list of item keys contains duplicates')
    touched: List[StoredKey] = []
    return {'Responses': [_run(table, body, touched) for body in statements]}
