"""Update expressions: ``SET`` (``if_not_exists``, ``list_append``, ``+``/``-``), ``REMOVE``,
``ADD`` and ``DELETE``, parsed once per request and applied to a copy of an item.

Every value is computed from the item as it was before the update, as DynamoDB does. Paths
into lists (``a[0]``) are refused with ``NotImplementedError``: this library never writes them.
"""
from __future__ import annotations

from decimal import Decimal
from typing import Any, Dict, List, Mapping, NamedTuple, Optional, Tuple

from . import values as v
from .errors import validation
from .expressions import Operand, Parser, Path, operand_value, resolve

__all__ = ['Action', 'Term', 'Update', 'apply_update', 'check_paths', 'parse_update', 'project']

Item = Dict[str, Any]
_FIELD = 'UpdateExpression'
_INVALID_PATH = 'The document path provided in the update expression is invalid for update'


class Term(NamedTuple):
    """A value of a SET action: ``kind`` 'operand' (``args[0]`` an Operand), 'if_not_exists'
    (a Path and a Term), 'list_append' (two Terms), '+' or '-' (two Terms)."""

    kind: str
    args: Tuple[Any, ...]


class Action(NamedTuple):
    clause: str               # 'SET', 'REMOVE', 'ADD', 'DELETE'
    path: Path
    value: Any                # a Term (SET), an Operand (ADD, DELETE), None (REMOVE)


class Update(NamedTuple):
    actions: Tuple[Action, ...]

    @property
    def paths(self) -> List[Path]:
        return [action.path for action in self.actions]


def _term(parser: Parser) -> Term:
    token = parser.peek()
    if token.kind == 'word' and parser.peek(1).text == '(' and token.text in ('if_not_exists', 'list_append'):
        parser.next()
        parser.expect('(')
        if token.text == 'if_not_exists':
            path = parser.path()
            parser.expect(',')
            fallback = _term(parser)
            parser.expect(')')
            return Term('if_not_exists', (path, fallback))
        first = _term(parser)
        parser.expect(',')
        second = _term(parser)
        parser.expect(')')
        return Term('list_append', (first, second))
    operand = parser.operand()
    if operand.kind == 'size':
        parser.refuse_function('size', 'an update')
    return Term('operand', (operand,))


def _set_value(parser: Parser) -> Term:
    first = _term(parser)
    if parser.peek().text in ('+', '-'):
        operator = parser.next().text
        return Term(operator, (first, _term(parser)))
    return first


def _path_for_update(parser: Parser) -> Path:
    path = parser.path()
    if any(isinstance(element, int) for element in path.elements):
        raise NotImplementedError(f'the simulated table does not update list elements ({path}); '
                                  'this library never does')
    return path


def _clause(parser: Parser, clause: str) -> List[Action]:
    actions: List[Action] = []
    while True:
        path = _path_for_update(parser)
        if clause == 'SET':
            parser.expect('=')
            actions.append(Action(clause, path, _set_value(parser)))
        elif clause == 'REMOVE':
            actions.append(Action(clause, path, None))
        else:
            value = parser.operand()
            if value.kind != 'value':
                raise validation(f'Invalid {_FIELD}: Syntax error; {clause} takes a value placeholder')
            actions.append(Action(clause, path, value))
        if parser.peek().text != ',':
            return actions
        parser.next()


def parse_update(parser: Parser, key_names: Tuple[str, ...]) -> Update:
    """The actions of an update expression; ValidationException for a clause given twice,
    overlapping paths, or a path that writes a key attribute."""
    actions: List[Action] = []
    seen: List[str] = []
    while parser.peek().kind != 'end':
        token = parser.next()
        clause = token.text.upper()
        if token.kind != 'word' or clause not in ('SET', 'REMOVE', 'ADD', 'DELETE'):
            raise parser.syntax_error(token)
        if clause in seen:
            raise validation(f'Invalid {_FIELD}: The "{clause}" section can only be used once in an update '
                             'expression;')
        seen.append(clause)
        actions.extend(_clause(parser, clause))
    if not actions:
        raise validation(f'Invalid {_FIELD}: The expression can not be empty;')
    check_paths([action.path for action in actions], key_names)
    return Update(tuple(actions))


def check_paths(paths: List[Path], key_names: Tuple[str, ...]) -> None:
    for index, path in enumerate(paths):
        if path.elements[0] in key_names:
            raise validation('One or more parameter values were invalid: Cannot update attribute '
                             f'{path.elements[0]}. This attribute is part of the key')
        for other in paths[index + 1:]:
            shorter = min(len(path.elements), len(other.elements))
            if path.elements[:shorter] == other.elements[:shorter]:
                raise validation(f'Invalid {_FIELD}: Two document paths overlap with each other; must remove or '
                                 f'rewrite one of these paths; path one: {path}, path two: {other}')


# -- applying ----------------------------------------------------------------------------------

def _number(value: Optional[Item], operator: str) -> Decimal:
    if value is None:
        raise validation('The provided expression refers to an attribute that does not exist in the item')
    if v.type_of(value) != 'N':
        raise validation(f'Invalid {_FIELD}: Incorrect operand type for operator or function; operator or '
                         f'function: {operator}, operand type: {v.type_of(value)}')
    return v.number(value['N'])


def _evaluate(item: Mapping[str, Any], term: Term) -> Item:
    if term.kind == 'operand':
        operand: Operand = term.args[0]
        found = operand_value(item, operand)
        if found is None:
            raise validation('The provided expression refers to an attribute that does not exist in the item')
        return found
    if term.kind == 'if_not_exists':
        existing = resolve(item, term.args[0])
        return existing if existing is not None else _evaluate(item, term.args[1])
    left, right = _evaluate(item, term.args[0]), _evaluate(item, term.args[1])
    if term.kind == 'list_append':
        for side in (left, right):
            if v.type_of(side) != 'L':
                raise validation(f'Invalid {_FIELD}: Incorrect operand type for operator or function; operator or '
                                 f'function: list_append, operand type: {v.type_of(side)}')
        return {'L': [*left['L'], *right['L']]}
    a, b = _number(left, term.kind), _number(right, term.kind)
    return v.number_value(a + b if term.kind == '+' else a - b)


def _parent(item: Item, path: Path, create: bool) -> Optional[Dict[str, Any]]:
    """The map holding the last element of ``path``; None (REMOVE) or a ValidationException
    (SET, ADD) when there is none."""
    current: Dict[str, Any] = item
    for element in path.elements[:-1]:
        child = current.get(str(element))
        if child is None or v.type_of(child) != 'M':
            if create or current is item:
                raise validation(_INVALID_PATH)
            return None
        current = child['M']
    return current


def _add(existing: Optional[Item], value: Item, clause: str) -> Optional[Item]:
    kind = v.type_of(value)
    if clause == 'ADD' and kind == 'N':
        if existing is None:
            return v.number_value(v.number(value['N']))
        return v.number_value(_number(existing, 'ADD') + v.number(value['N']))
    if kind not in ('SS', 'NS', 'BS') or (existing is not None and v.type_of(existing) != kind):
        raise validation(f'Invalid {_FIELD}: Incorrect operand type for operator or function; operator: {clause}, '
                         f'operand type: {kind}')
    members = list(existing[kind]) if existing is not None else []
    for member in value[kind]:
        present = [item for item in members if v.equal({kind: item}, {kind: member})]
        if clause == 'ADD' and not present:
            members.append(member)
        elif clause == 'DELETE':
            members = [item for item in members if item not in present]
    return {kind: members} if members else None


def apply_update(update: Update, old: Optional[Item], key: Item) -> Item:
    """The item after ``update`` (``old`` None: a new item made of ``key``); ``old`` is unchanged."""
    before: Item = old if old is not None else dict(key)
    computed = [(_evaluate(before, action.value) if action.clause == 'SET' else None) for action in update.actions]
    after = v.copy_item(before)
    for action, value in zip(update.actions, computed):
        parent = _parent(after, action.path, create=action.clause != 'REMOVE')
        if parent is None:
            continue
        name = str(action.path.elements[-1])
        if action.clause == 'SET':
            parent[name] = v.canonical(value or {})
        elif action.clause == 'REMOVE':
            parent.pop(name, None)
        else:
            result = _add(parent.get(name), dict(action.value.target), action.clause)
            if result is None:
                parent.pop(name, None)
            else:
                parent[name] = result
    return after


def project(item: Mapping[str, Any], paths: List[Path]) -> Item:
    """The parts of ``item`` at ``paths`` (``UPDATED_OLD``/``UPDATED_NEW``), nested as in the item."""
    result: Item = {}
    for path in paths:
        found = resolve(item, path)
        if found is None:
            continue
        target = result
        for element in path.elements[:-1]:
            target = target.setdefault(str(element), {'M': {}})['M']
        target[str(path.elements[-1])] = found
    return result
