"""Condition expressions: parsed once per request, evaluated on an item.

The subset: comparators ``= <> < <= > >=``, ``AND``/``OR``/``NOT``, parentheses, ``IN``,
``BETWEEN``, ``attribute_exists``, ``attribute_not_exists``, ``attribute_type``,
``begins_with``, ``contains``, ``size``; ``#name`` and ``:value`` placeholders; document
paths (``a.b``, ``a[0]``). Anything else raises ``NotImplementedError`` naming it; a request
DynamoDB refuses raises :class:`~.errors.Invalid` (a ValidationException).
"""
from __future__ import annotations

import functools
import re
from typing import Any, Callable, Dict, List, Mapping, NamedTuple, Optional, Sequence, Set, Tuple, Union

from . import values as v
from .errors import Invalid, validation

__all__ = ['Condition', 'Operand', 'Parser', 'Path', 'Placeholders', 'resolve', 'tokens']

Item = Dict[str, Any]
PathElement = Union[str, int]

_TOKEN = re.compile(r'\s*(?:(?P<name>#[A-Za-z0-9_]+)|(?P<value>:[A-Za-z0-9_]+)|(?P<word>[A-Za-z_][A-Za-z0-9_]*)'
                    r'|(?P<index>\[\s*\d+\s*\])|(?P<op><>|<=|>=|[=<>(),.+\-]))')
_KEYWORDS = frozenset({'AND', 'OR', 'NOT', 'IN', 'BETWEEN', 'SET', 'REMOVE', 'ADD', 'DELETE'})
_COMPARATORS = frozenset({'=', '<>', '<', '<=', '>', '>='})
_CONDITION_FUNCTIONS = frozenset({'attribute_exists', 'attribute_not_exists', 'attribute_type', 'begins_with',
                                  'contains'})
_KNOWN_FUNCTIONS = _CONDITION_FUNCTIONS | {'size', 'if_not_exists', 'list_append'}


class Token(NamedTuple):
    kind: str      # 'name', 'value', 'word', 'index', 'op', 'end'
    text: str


@functools.lru_cache(maxsize=1024)
def tokens(text: str, field: str) -> Tuple[Token, ...]:
    """The tokens of an expression; a ValidationException naming the first character that is none
    (cached: a client sends the same few expressions again and again)."""
    found: List[Token] = []
    position = 0
    text = text.rstrip()
    while position < len(text):
        match = _TOKEN.match(text, position)
        if match is None or match.end() == position:
            raise validation(f'Invalid {field}: Syntax error; token: "{text[position:].strip()[:1]}", '
                             f'near: "{text[position:].strip()[:10]}"')
        kind = str(match.lastgroup)
        found.append(Token(kind, match.group(kind)))
        position = match.end()
    found.append(Token('end', ''))
    return tuple(found)


class Path(NamedTuple):
    elements: Tuple[PathElement, ...]

    def __str__(self) -> str:
        return '[' + ', '.join(str(element) for element in self.elements) + ']'


class Operand(NamedTuple):
    """``kind``: 'path' (``target`` a Path), 'value' (a typed value), 'size' (a Path)."""

    kind: str
    target: Any


class Condition(NamedTuple):
    """``kind``: 'and', 'or', 'not' (``args`` conditions); 'compare' (``op``, two operands);
    'between' (three operands); 'in' (operand, then options); 'function' (``op`` its name)."""

    kind: str
    op: str
    args: Tuple[Any, ...]


class Placeholders:
    """The ``ExpressionAttributeNames``/``Values`` of one request, and which of them its expressions use."""

    def __init__(self, names: Optional[Mapping[str, str]], values: Optional[Mapping[str, Any]]) -> None:
        if names is not None and not names:
            raise validation('ExpressionAttributeNames must not be empty')
        if values is not None and not values:
            raise validation('ExpressionAttributeValues must not be empty')
        self.names: Mapping[str, str] = names or {}
        self.values: Mapping[str, Any] = values or {}
        for value in self.values.values():
            v.check_value(value)
        self.used_names: Set[str] = set()
        self.used_values: Set[str] = set()

    def name(self, token: str, field: str) -> str:
        if token not in self.names:
            raise validation(f'Invalid {field}: An expression attribute name used in the document path is not '
                             f'defined; attribute name: {token}')
        self.used_names.add(token)
        return str(self.names[token])

    def value(self, token: str, field: str) -> Dict[str, Any]:
        if token not in self.values:
            raise validation(f'Invalid {field}: An expression attribute value used in expression is not defined; '
                             f'attribute value: {token}')
        self.used_values.add(token)
        return dict(self.values[token])

    def check_all_used(self) -> None:
        """DynamoDB refuses a request that defines a placeholder none of its expressions uses."""
        unused_names = sorted(set(self.names) - self.used_names)
        if unused_names:
            raise validation('Value provided in ExpressionAttributeNames unused in expressions: '
                             f'keys: {{{", ".join(unused_names)}}}')
        unused_values = sorted(set(self.values) - self.used_values)
        if unused_values:
            raise validation('Value provided in ExpressionAttributeValues unused in expressions: '
                             f'keys: {{{", ".join(unused_values)}}}')


class Parser:
    """A recursive-descent parser over the tokens of one expression (``field`` names it in errors)."""

    def __init__(self, text: str, field: str, placeholders: Placeholders) -> None:
        if not isinstance(text, str) or not text.strip():
            raise validation(f'Invalid {field}: The expression can not be empty;')
        self.field = field
        self.placeholders = placeholders
        self.tokens = tokens(text, field)
        self.position = 0

    # -- tokens ------------------------------------------------------------------------------
    def peek(self, ahead: int = 0) -> Token:
        return self.tokens[min(self.position + ahead, len(self.tokens) - 1)]

    def next(self) -> Token:
        token = self.peek()
        self.position += 1
        return token

    def is_keyword(self, word: str, ahead: int = 0) -> bool:
        token = self.peek(ahead)
        return token.kind == 'word' and token.text.upper() == word

    def expect(self, text: str) -> None:
        token = self.next()
        if token.text != text:
            raise self.syntax_error(token)

    def syntax_error(self, token: Token) -> Invalid:
        near = ' '.join(t.text for t in self.tokens[max(self.position - 2, 0):self.position + 1])
        return validation(f'Invalid {self.field}: Syntax error; token: "{token.text or "<EOF>"}", near: "{near}"')

    def finish(self) -> None:
        if self.peek().kind != 'end':
            raise self.syntax_error(self.peek())

    # -- paths and operands ------------------------------------------------------------------
    def path(self) -> Path:
        elements: List[PathElement] = [self.path_name()]
        while True:
            token = self.peek()
            if token.text == '.':
                self.next()
                elements.append(self.path_name())
            elif token.kind == 'index':
                self.next()
                elements.append(int(token.text.strip('[] ')))
            else:
                return Path(tuple(elements))

    def path_name(self) -> str:
        token = self.next()
        if token.kind == 'name':
            return self.placeholders.name(token.text, self.field)
        if token.kind == 'word' and token.text.upper() not in _KEYWORDS:
            return token.text
        raise self.syntax_error(token)

    def operand(self) -> Operand:
        token = self.peek()
        if token.kind == 'value':
            self.next()
            return Operand('value', self.placeholders.value(token.text, self.field))
        if token.kind == 'word' and self.peek(1).text == '(':
            name = token.text
            if name != 'size':
                self.refuse_function(name, 'an operand')
            self.next()
            self.expect('(')
            path = self.path()
            self.expect(')')
            return Operand('size', path)
        return Operand('path', self.path())

    def refuse_function(self, name: str, where: str) -> None:
        if name not in _KNOWN_FUNCTIONS:
            raise validation(f'Invalid {self.field}: Invalid function name; function: {name}')
        raise validation(f'Invalid {self.field}: The function is not allowed to be used this way in an '
                         f'expression; function: {name} ({where})')

    # -- conditions --------------------------------------------------------------------------
    def condition(self) -> Condition:
        """The whole expression as a condition."""
        result = self.disjunction()
        self.finish()
        return result

    def disjunction(self) -> Condition:
        parts = [self.conjunction()]
        while self.is_keyword('OR'):
            self.next()
            parts.append(self.conjunction())
        return parts[0] if len(parts) == 1 else Condition('or', 'OR', tuple(parts))

    def conjunction(self) -> Condition:
        parts = [self.negation()]
        while self.is_keyword('AND'):
            self.next()
            parts.append(self.negation())
        return parts[0] if len(parts) == 1 else Condition('and', 'AND', tuple(parts))

    def negation(self) -> Condition:
        if self.is_keyword('NOT'):
            self.next()
            return Condition('not', 'NOT', (self.negation(),))
        return self.primary()

    def primary(self) -> Condition:
        token = self.peek()
        if token.text == '(':
            self.next()
            inner = self.disjunction()
            self.expect(')')
            return inner
        if token.kind == 'word' and self.peek(1).text == '(' and token.text in _CONDITION_FUNCTIONS:
            return self.function()
        left = self.operand()
        following = self.next()
        if following.text in _COMPARATORS:
            return Condition('compare', following.text, (left, self.operand()))
        if following.kind == 'word' and following.text.upper() == 'BETWEEN':
            low = self.operand()
            if not self.is_keyword('AND'):
                raise self.syntax_error(self.peek())
            self.next()
            return Condition('between', 'BETWEEN', (left, low, self.operand()))
        if following.kind == 'word' and following.text.upper() == 'IN':
            self.expect('(')
            options = [self.operand()]
            while self.peek().text == ',':
                self.next()
                options.append(self.operand())
            self.expect(')')
            if len(options) > 100:
                raise validation(f'Invalid {self.field}: The IN operator takes at most 100 operands')
            return Condition('in', 'IN', (left, *options))
        raise self.syntax_error(following)

    def function(self) -> Condition:
        name = self.next().text
        self.expect('(')
        args: List[Operand] = [self.operand()]
        while self.peek().text == ',':
            self.next()
            args.append(self.operand())
        self.expect(')')
        arity = 1 if name in ('attribute_exists', 'attribute_not_exists') else 2
        if len(args) != arity:
            raise validation(f'Invalid {self.field}: Incorrect number of operands for operator or function; '
                             f'operator or function: {name}, number of operands: {len(args)}')
        if name != 'begins_with' and args[0].kind != 'path':
            raise validation(f'Invalid {self.field}: Operator or function requires a document path; '
                             f'operator or function: {name}')
        if name == 'attribute_type':
            kind = args[1].target if args[1].kind == 'value' else None
            if not (kind and v.type_of(kind) == 'S' and kind['S'] in v.TYPES):
                raise validation(f'Invalid {self.field}: Invalid attribute type name found; type: '
                                 f'{kind and kind.get("S")}, valid types: {{{",".join(v.TYPES)}}}')
        return Condition('function', name, tuple(args))


# -- evaluation --------------------------------------------------------------------------------

def resolve(item: Mapping[str, Any], path: Path) -> Optional[Dict[str, Any]]:
    """The value at ``path`` in ``item`` (typed), or None when there is none."""
    current: Any = {'M': item}
    for element in path.elements:
        if isinstance(element, int):
            listed = current.get('L') if isinstance(current, Mapping) else None
            if listed is None or element >= len(listed):
                return None
            current = listed[element]
        else:
            mapped = current.get('M') if isinstance(current, Mapping) else None
            if mapped is None or element not in mapped:
                return None
            current = mapped[element]
    return dict(current)


def operand_value(item: Mapping[str, Any], operand: Operand) -> Optional[Dict[str, Any]]:
    if operand.kind == 'value':
        return dict(operand.target)
    found = resolve(item, operand.target)
    if operand.kind == 'path':
        return found
    size = v.size_of(found)
    return None if size is None else {'N': str(size)}


def _compare(op: str, left: Optional[Dict[str, Any]], right: Optional[Dict[str, Any]]) -> bool:
    if op == '<>':     # a missing attribute, or another type, is not equal
        return not v.equal(left, right)
    if left is None or right is None:
        return False
    if op == '=':
        return v.equal(left, right)
    order = v.compare(left, right)
    if order is None:
        return False
    return {'<': order < 0, '<=': order <= 0, '>': order > 0, '>=': order >= 0}[op]


def _contains(container: Optional[Dict[str, Any]], member: Optional[Dict[str, Any]]) -> bool:
    if container is None or member is None:
        return False
    kind = v.type_of(container)
    content = container[kind]
    if kind == 'S':
        return v.type_of(member) == 'S' and member['S'] in content
    if kind == 'B':
        return v.type_of(member) == 'B' and bytes(member['B']) in bytes(content)
    if kind in ('SS', 'NS', 'BS'):
        return v.type_of(member) == kind[0] and any(v.equal({kind[0]: item}, member) for item in content)
    if kind == 'L':
        return any(v.equal(item, member) for item in content)
    return False


def _begins_with(target: Optional[Dict[str, Any]], prefix: Optional[Dict[str, Any]]) -> bool:
    if target is None or prefix is None or v.type_of(target) != v.type_of(prefix):
        return False
    kind = v.type_of(target)
    if kind == 'S':
        return str(target['S']).startswith(prefix['S'])
    if kind == 'B':
        return bytes(target['B']).startswith(bytes(prefix['B']))
    return False


def _function(item: Mapping[str, Any], name: str, args: Sequence[Operand]) -> bool:
    first = operand_value(item, args[0])
    if name == 'attribute_exists':
        return first is not None
    if name == 'attribute_not_exists':
        return first is None
    second = operand_value(item, args[1])
    if name == 'attribute_type':
        return first is not None and second is not None and v.type_of(first) == second['S']
    if name == 'begins_with':
        return _begins_with(first, second)
    return _contains(first, second)


def _between(value: Optional[Dict[str, Any]], low: Optional[Dict[str, Any]], high: Optional[Dict[str, Any]]) -> bool:
    if low is not None and high is not None and v.compare(low, high) == 1:
        raise validation('Invalid ConditionExpression: The BETWEEN operator requires upper bound to be greater '
                         'than or equal to lower bound')
    return _compare('>=', value, low) and _compare('<=', value, high)


_LOGIC: Dict[str, Callable[[Mapping[str, Any], Condition], bool]] = {
    'and': lambda item, c: all(evaluate(item, part) for part in c.args),
    'or': lambda item, c: any(evaluate(item, part) for part in c.args),
    'not': lambda item, c: not evaluate(item, c.args[0]),
}


def evaluate(item: Mapping[str, Any], condition: Condition) -> bool:
    """Whether ``condition`` holds on ``item`` (``{}`` for no item)."""
    logic = _LOGIC.get(condition.kind)
    if logic is not None:
        return logic(item, condition)
    if condition.kind == 'compare':
        return _compare(condition.op, *(operand_value(item, arg) for arg in condition.args))
    if condition.kind == 'between':
        return _between(*(operand_value(item, arg) for arg in condition.args))
    if condition.kind == 'in':
        value = operand_value(item, condition.args[0])
        return any(_compare('=', value, operand_value(item, option)) for option in condition.args[1:])
    return _function(item, condition.op, condition.args)
