"""Typed attribute values (``{'S': ...}``, ``{'N': ...}``, ...) as DynamoDB compares and stores them.

Numbers are exact (``Decimal``) and stored in DynamoDB's canonical form (``'1.50'`` and
``'1.5E+0'`` are both ``'1.5'``); comparing values of different types is false, never an error.
"""
from __future__ import annotations

import decimal
from decimal import Decimal
from typing import Any, Dict, List, Mapping, Optional, Tuple

from .errors import validation

__all__ = [
    'MAX_ITEM_SIZE',
    'TYPES',
    'check_item_size',
    'item_size',
    'Value',
    'canonical',
    'check_value',
    'compare',
    'copy_item',
    'copy_value',
    'equal',
    'number',
    'number_value',
    'size_of',
    'type_of',
]

Value = Dict[str, Any]

#: The attribute types, as ``attribute_type`` names them.
TYPES = ('S', 'N', 'B', 'SS', 'NS', 'BS', 'M', 'L', 'NULL', 'BOOL')
_SCALAR_ORDERED = ('S', 'N', 'B')
_CONTEXT = decimal.Context(prec=38, traps=[decimal.Inexact, decimal.InvalidOperation, decimal.Overflow])


def number(text: Any) -> Decimal:
    """The value of an ``N`` string; a ValidationException when it is not a number DynamoDB takes."""
    if not isinstance(text, str):
        raise validation('The parameter cannot be converted to a numeric value')
    try:
        value = Decimal(text.strip())
    except decimal.InvalidOperation:
        raise validation(f'The parameter cannot be converted to a numeric value: {text}') from None
    if not value.is_finite():
        raise validation(f'The parameter cannot be converted to a numeric value: {text}')
    return value


def format_number(value: Decimal) -> str:
    """DynamoDB's canonical text of a number: no exponent, no trailing zeros, no negative zero."""
    if value.is_zero():
        return '0'
    normal = value.normalize(_CONTEXT)
    text = format(normal, 'f')
    if len(normal.as_tuple().digits) > 38:
        raise validation('Number overflow. Attempting to store a number with magnitude larger than supported range')
    return text


def number_value(value: Decimal) -> Value:
    return {'N': format_number(value)}


_TYPE_SET = frozenset(TYPES)
_FLAT = frozenset({'S', 'N', 'B', 'BOOL', 'NULL'})   # a copy of the mapping is a deep copy


def type_of(value: Mapping[str, Any]) -> str:
    if len(value) == 1:
        for kind in value:
            if kind in _TYPE_SET:
                return kind     # the common case, without the checks' cost (the model calls this very often)
    if len(value) != 1:
        raise validation('Supplied AttributeValue has more than one datatypes set, must contain exactly one of '
                         'the supported datatypes')
    kind = next(iter(value))
    if kind not in TYPES:
        raise validation(f'Supplied AttributeValue is empty, must contain exactly one of the supported datatypes: '
                         f'{kind}')
    return str(kind)


def copy_value(value: Mapping[str, Any]) -> Value:
    """A deep copy of a typed value (faster than ``copy.deepcopy``: the model copies on every read)."""
    if len(value) == 1:
        for kind, content in value.items():
            if kind in _FLAT:
                return {kind: content}
    kind = type_of(value)
    content = value[kind]
    if kind == 'M':
        return {'M': {name: copy_value(item) for name, item in content.items()}}
    if kind == 'L':
        return {'L': [copy_value(item) for item in content]}
    if kind in ('SS', 'NS', 'BS'):
        return {kind: list(content)}
    return {kind: content}


def copy_item(item: Mapping[str, Any]) -> Dict[str, Any]:
    return {name: copy_value(value) for name, value in item.items()}


def check_value(value: Any) -> None:
    """A ValidationException for a value DynamoDB refuses (several types, an unknown type, a bad number)."""
    if not isinstance(value, dict):
        raise validation('Supplied AttributeValue is not a map')
    kind = type_of(value)
    content = value[kind]
    if kind == 'N':
        number(content)
    elif kind in ('SS', 'NS', 'BS'):
        if not content:
            raise validation('One or more parameter values were invalid: An number set  may not be empty')
        if kind == 'NS':
            numbers = [number(item) for item in content]
            if len(set(numbers)) != len(numbers):
                raise validation('Input collection contains duplicates')
        elif len(set(content)) != len(content):
            raise validation('Input collection contains duplicates')
    elif kind == 'M':
        for item in content.values():
            check_value(item)
    elif kind == 'L':
        for item in content:
            check_value(item)


def canonical(value: Mapping[str, Any]) -> Value:
    """A copy of ``value`` with every number in canonical form (what DynamoDB stores)."""
    kind = type_of(value)
    content = value[kind]
    if kind == 'N':
        return {'N': format_number(number(content))}
    if kind == 'NS':
        return {'NS': [format_number(number(item)) for item in content]}
    if kind in ('SS', 'BS'):
        return {kind: list(content)}
    if kind == 'M':
        return {'M': {name: canonical(item) for name, item in content.items()}}
    if kind == 'L':
        return {'L': [canonical(item) for item in content]}
    return {kind: content}


def _set_members(kind: str, content: List[Any]) -> frozenset:  # type: ignore[type-arg]
    if kind == 'NS':
        return frozenset(number(item) for item in content)
    return frozenset(content)


def equal(left: Optional[Mapping[str, Any]], right: Optional[Mapping[str, Any]]) -> bool:
    """``=``: the same type and the same value (numbers by value, sets in any order)."""
    if left is None or right is None:
        return False
    kind = type_of(left)
    if kind != type_of(right):
        return False
    a, b = left[kind], right[kind]
    if kind == 'N':
        return number(a) == number(b)
    if kind in ('SS', 'NS', 'BS'):
        return _set_members(kind, a) == _set_members(kind, b)
    if kind == 'M':
        return a.keys() == b.keys() and all(equal(a[name], b[name]) for name in a)
    if kind == 'L':
        return len(a) == len(b) and all(equal(x, y) for x, y in zip(a, b))
    return bool(a == b)


def ordering_key(value: Mapping[str, Any]) -> Tuple[str, Any]:
    """How DynamoDB orders a scalar value: numbers by value, strings and binaries by their bytes."""
    kind = type_of(value)
    content = value[kind]
    if kind == 'N':
        return kind, number(content)
    if kind == 'S':
        return kind, str(content).encode('utf-8')
    if kind == 'B':
        return kind, bytes(content)
    raise validation(f'An operand of type {kind} cannot be ordered')


def compare(left: Optional[Mapping[str, Any]], right: Optional[Mapping[str, Any]]) -> Optional[int]:
    """-1, 0 or 1 for two values of one ordered type (S, N, B); None otherwise (the
    comparison is then false)."""
    if left is None or right is None:
        return None
    if type_of(left) != type_of(right) or type_of(left) not in _SCALAR_ORDERED:
        return None
    a, b = ordering_key(left)[1], ordering_key(right)[1]
    return int(a > b) - int(a < b)


def size_of(value: Optional[Mapping[str, Any]]) -> Optional[int]:
    """``size()``: characters of a string, bytes of a binary, members of a set, list or map;
    None for a number, a boolean, a null or a missing attribute (the comparison is then false)."""
    if value is None:
        return None
    kind = type_of(value)
    if kind in ('S', 'B', 'SS', 'NS', 'BS', 'M', 'L'):
        return len(value[kind])
    return None


#: DynamoDB's largest item: 400 KB, attribute names included.
MAX_ITEM_SIZE = 400 * 1024


def value_size(value: Mapping[str, Any]) -> int:
    """The bytes a value counts for, by DynamoDB's published rules (numbers: one byte per two
    significant digits, plus one; lists and maps: 3 bytes, plus one per element)."""
    kind = type_of(value)
    content = value[kind]
    if kind == 'S':
        return len(str(content).encode('utf-8'))
    if kind == 'B':
        return len(bytes(content))
    if kind == 'N':
        digits = len(number(content).normalize(_CONTEXT).as_tuple().digits)
        return (digits + 1) // 2 + 1
    if kind in ('SS', 'NS', 'BS'):
        return sum(value_size({kind[0]: item}) for item in content)
    if kind == 'M':
        return 3 + sum(len(name.encode('utf-8')) + value_size(item) + 1 for name, item in content.items())
    if kind == 'L':
        return 3 + sum(value_size(item) + 1 for item in content)
    return 1


def item_size(item: Mapping[str, Any]) -> int:
    return sum(len(name.encode('utf-8')) + value_size(value) for name, value in item.items())


def check_item_size(item: Mapping[str, Any], update: bool = False) -> None:
    """A ValidationException for an item over 400 KB."""
    if item_size(item) > MAX_ITEM_SIZE:
        raise validation('Item size to update has exceeded the maximum allowed size' if update
                         else 'Item size has exceeded the maximum allowed size')
