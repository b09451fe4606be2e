"""Argument checks, run before anything is written to DynamoDB.

Each check raises ``TypeError`` for a value of the wrong type and ``ValueError`` for a value
of the right type that cannot work, with a message naming the argument. None of them does
any I/O.
"""
from __future__ import annotations

import asyncio
import collections.abc
import datetime
import inspect
import math
import threading
from decimal import Decimal
from typing import AbstractSet, Any, Callable, Optional, Set, Tuple, Union

from boto3.dynamodb.types import Binary, TypeDeserializer, TypeSerializer

__all__ = [
    'MAX_DURATION',
    'MAX_NESTING_LEVELS',
    'MAX_NUMBER_DIGITS',
    'MAX_NUMBER_MAGNITUDE',
    'MAX_PARTITION_KEY_BYTES',
    'MAX_SORT_KEY_BYTES',
    'MIN_NUMBER_MAGNITUDE',
    'clamp_wait',
    'require_asyncio_event',
    'require_attribute_name',
    'require_bool',
    'require_callable',
    'require_duration',
    'require_key',
    'require_storable',
    'require_text',
    'require_thread_event',
]

#: DynamoDB's limits on the UTF-8 size of key attribute values.
MAX_PARTITION_KEY_BYTES = 2048
MAX_SORT_KEY_BYTES = 1024

#: The longest duration any argument may have (periods, lease, expiry, retry period and
#: timeout): 3650 days, about ten years.
#:
#: Why a limit at all: every duration ends up as a thread wait (``Event.wait``), and a wait
#: longer than :data:`threading.TIMEOUT_MAX` raises ``OverflowError`` instead of waiting. A
#: background loop that meets such a value dies, and a call raises a bare ``OverflowError``.
#: ``TIMEOUT_MAX`` is about 292 years on 64-bit Linux and macOS; one
#: ``timedelta(days=106752)`` is already beyond it. Ten years is far inside that, leaves room for
#: sums of durations (the default ``retry_timeout`` is ``lease_duration + heartbeat_period``)
#: and for the TTL epoch ``now + expiry_period``, and is still longer than any lease, heartbeat
#: or wait that makes sense for a lock: ``retry_timeout=MAX_DURATION`` already means "wait
#: for as long as it takes". The limit is the same on every platform, so a configuration
#: valid on one machine is valid on all; where ``TIMEOUT_MAX`` is smaller (Windows: about 49.7
#: days) :func:`clamp_wait` caps each single wait, which then ends early and is re-checked.
MAX_DURATION = datetime.timedelta(days=3650)
_MAX_DURATION_TEXT = '3650 days (about 10 years)'
_MAX_SECONDS = MAX_DURATION.total_seconds()

#: DynamoDB's limits on numbers: at most 38 significant digits, and a magnitude of zero or
#: from 1E-130 to 9.9999999999999999999999999999999999999E+125 (either sign).
MAX_NUMBER_DIGITS = 38
MIN_NUMBER_MAGNITUDE = Decimal('1E-130')
MAX_NUMBER_MAGNITUDE = Decimal('9.9999999999999999999999999999999999999E+125')

#: DynamoDB nests values at most 32 levels deep, counting a top-level attribute as level 1:
#: so a map or list may stand at levels 1 to 31 only (its elements are one level deeper).
MAX_NESTING_LEVELS = 32


def require_text(name: str, value: object) -> str:
    """A non-empty ``str``."""
    if not isinstance(value, str):
        raise TypeError(f'{name} must be a str, not {type(value).__name__}')
    if not value:
        raise ValueError(f'{name} must not be empty')
    return value


def _utf8_size(name: str, value: str) -> int:
    """The UTF-8 size of ``value``; ValueError naming ``name`` when it is not valid Unicode."""
    try:
        return len(value.encode('utf-8'))
    except UnicodeEncodeError as error:
        raise ValueError(
            f'{name} contains a lone surrogate {value[error.start]!r} at index {error.start}: it is not '
            'valid Unicode and cannot be encoded in UTF-8, the encoding DynamoDB stores strings in'
        ) from None


def require_attribute_name(name: str, value: object) -> str:
    """A DynamoDB attribute name: a non-empty ``str`` of at most 255 UTF-8 bytes."""
    text = require_text(name, value)
    size = _utf8_size(name, text)
    if size > 255:
        raise ValueError(f'{name} must be at most 255 bytes in UTF-8, got {size}')
    return text


def require_key(name: str, value: object, max_bytes: int) -> str:
    """A key attribute value: a non-empty ``str`` of at most ``max_bytes`` UTF-8 bytes."""
    text = require_text(name, value)
    size = _utf8_size(name, text)   # a lone surrogate can be neither stored nor quoted in unique_identifier
    if size > max_bytes:
        raise ValueError(f'{name} is {size} bytes in UTF-8; DynamoDB allows at most {max_bytes}')
    return text


def require_duration(name: str, value: object, *, allow_zero: bool = False, seconds_too: bool = False,
                     bounded: bool = True) -> float:
    """A duration: a ``datetime.timedelta`` (or, with ``seconds_too``, a number of seconds) that
    is positive (or zero when allowed) and, when ``bounded``, at most :data:`MAX_DURATION`;
    returns its seconds."""
    if isinstance(value, datetime.timedelta):
        seconds = value.total_seconds()
    elif seconds_too and isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = float(value)
    else:
        kinds = 'a datetime.timedelta or a number of seconds' if seconds_too else 'a datetime.timedelta'
        raise TypeError(f'{name} must be {kinds}, not {type(value).__name__}')
    if math.isnan(seconds) or seconds < 0 or (seconds == 0 and not allow_zero):
        qualifier = 'zero or positive' if allow_zero else 'positive'
        raise ValueError(f'{name} must be {qualifier}, got {value!r}')
    if bounded and seconds > _MAX_SECONDS:
        raise ValueError(f'{name} must be at most {_MAX_DURATION_TEXT}, {MAX_DURATION!r}; got {value!r}')
    return seconds


def require_bool(name: str, value: object) -> bool:
    """A ``bool`` (not merely truthy: ``1`` or ``'yes'`` are refused)."""
    if not isinstance(value, bool):
        raise TypeError(f'{name} must be a bool, not {type(value).__name__}')
    return value


def clamp_wait(seconds: float) -> float:
    """``seconds`` made safe to pass to ``threading.Event.wait`` (or ``time.sleep``).

    Returns a float from 0 to :data:`threading.TIMEOUT_MAX`: longer waits (``inf`` included)
    are capped at ``TIMEOUT_MAX``, where ``Event.wait`` would raise ``OverflowError``; negative
    ones become 0. NaN, which ``Event.wait`` treats as no wait at all (a loop sleeping it would
    spin), is capped like an endless wait. A capped wait ends early; callers re-check their
    deadline after every wait, as the client's loops do.
    """
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
        raise TypeError(f'a wait must be a number of seconds, not {type(seconds).__name__}')
    try:
        value = float(seconds)
    except OverflowError:   # an int too large for a float
        value = math.inf if seconds > 0 else -math.inf
    if math.isnan(value) or value >= threading.TIMEOUT_MAX:
        return float(threading.TIMEOUT_MAX)
    return value if value > 0 else 0.0


def require_callable(name: str, value: Optional[Any]) -> Optional[Any]:
    """None or a callable."""
    if value is not None and not callable(value):
        raise TypeError(f'{name} must be callable or None, not {type(value).__name__}')
    return value


def require_thread_event(name: str, value: Optional[Any]) -> Optional[Any]:
    """None, or an event a thread can wait on: a ``threading.Event``, or any object with its
    ``is_set()`` and a blocking ``wait(timeout)``. An ``asyncio.Event`` (whose ``wait`` is a
    coroutine taking no timeout) is refused: a thread waiting on it would fail at once."""
    if value is None or isinstance(value, threading.Event):
        return value
    wait, is_set = getattr(value, 'wait', None), getattr(value, 'is_set', None)
    if callable(wait) and callable(is_set) and not inspect.iscoroutinefunction(wait) and _takes_timeout(wait):
        return value
    hint = ''
    if name == 'cancel' and inspect.iscoroutinefunction(wait):
        hint = '; the asyncio client is cancelled by cancelling its task'
    raise TypeError(f'{name} must be a threading.Event (or an object with its is_set() and a blocking '
                    f'wait(timeout)), not {_kind_of(value)}{hint}')


def require_asyncio_event(name: str, value: Optional[Any]) -> Optional[Any]:
    """None, or an event the asyncio client can await: an ``asyncio.Event``, or any object with
    its ``is_set()`` and a coroutine function ``wait()``."""
    if value is None or isinstance(value, asyncio.Event):
        return value
    if callable(getattr(value, 'is_set', None)) and inspect.iscoroutinefunction(getattr(value, 'wait', None)):
        return value
    raise TypeError(f'{name} must be an asyncio.Event (or an object with its is_set() and a coroutine '
                    f'function wait()), not {_kind_of(value)}')


def _kind_of(value: object) -> str:
    for module in (asyncio, threading):
        if isinstance(value, module.Event):
            return f'{module.__name__}.Event'
    return type(value).__name__


def _takes_timeout(wait: Callable[..., object]) -> bool:
    """Whether ``wait(timeout)`` can be called (True when its signature cannot be read)."""
    try:
        inspect.signature(wait).bind(0.0)
    except TypeError:
        return False
    except ValueError:
        return True
    return True


# --------------------------------------------------------------------------------------------
# Values of attributes
# --------------------------------------------------------------------------------------------

_SERIALIZER = TypeSerializer()
_DESERIALIZER = TypeDeserializer()
_TYPES_HINT = 'str, int, Decimal, bytes, bytearray, Binary, bool or None, or a list, tuple, dict or set of those'


def require_storable(name: str, value: object) -> None:
    """Check that DynamoDB can store ``value`` as an attribute, and boto3 can read it back.

    The value is walked the way boto3's ``TypeSerializer`` converts it: None, bool, int and
    ``Decimal``, str, bytes / bytearray / ``Binary``, sets of numbers, of strings or of binary
    values, mappings with string keys, and lists and tuples. Nothing is sent anywhere.

    :param name: how the caller names the value, e.g. ``"additional_attributes['job']"``;
        errors about nested values extend it, e.g. ``additional_attributes['job'][0]['id']``.
    :raises TypeError: for a type DynamoDB cannot store (``float``: use ``Decimal``; any other
        object), a map key that is not a ``str``, a set of booleans or of unsupported values.
    :raises ValueError: for NaN or infinite numbers; numbers of more than 38 significant
        digits or a magnitude outside 1E-130 .. 9.9999999999999999999999999999999999999E+125;
        numbers boto3 refuses to send as written (more than 38 digits counting trailing zeros,
        like ``10**38``) or cannot read back (a magnitude of 1E+38 or more, which DynamoDB
        returns as 39 digits or more: boto/boto3#2500); empty sets; sets mixing strings,
        numbers and binary values; empty map keys; strings with lone surrogates (not valid
        UTF-8); maps or lists nested deeper than DynamoDB's 32 levels.
    """
    _check_value(name, value, 1, set(), set())


def _check_value(path: str, value: Any, level: int, ancestors: Set[int], checked: Set[Tuple[int, int]]) -> None:
    """Check one value standing at nesting ``level`` (a top-level attribute is level 1)."""
    if value is None or isinstance(value, bool):
        return
    if isinstance(value, float):
        raise TypeError(f'{path} is a float ({value!r}), which DynamoDB cannot store exactly: '
                        'use a decimal.Decimal instead, e.g. Decimal(str(x)), or an int')
    if isinstance(value, (int, Decimal)):
        _check_number(path, value)
        return
    if isinstance(value, str):
        _utf8_size(path, value)
        return
    if isinstance(value, (bytes, bytearray, Binary)):
        return
    if isinstance(value, collections.abc.Set):
        _check_set(path, value)
        return
    is_map = isinstance(value, collections.abc.Mapping)
    if not is_map and not isinstance(value, (list, tuple)):
        raise TypeError(f'{path} has type {type(value).__name__}, which DynamoDB cannot store: use {_TYPES_HINT}')
    if id(value) in ancestors:
        raise ValueError(f'{path} contains itself: DynamoDB cannot store a recursive structure')
    kind = 'map' if is_map else 'list'
    if level >= MAX_NESTING_LEVELS:
        raise ValueError(
            f'{path} is a {kind} at nesting level {level}: DynamoDB allows {MAX_NESTING_LEVELS} levels, '
            f'counting the attribute itself as level 1, so maps and lists may stand at levels 1 to '
            f'{MAX_NESTING_LEVELS - 1} only'
        )
    if (id(value), level) in checked:   # the same object met again at the same depth: already fine
        return
    ancestors.add(id(value))
    try:
        if is_map:
            for key, item in value.items():
                if not isinstance(key, str):
                    raise TypeError(f'{path} has a key of type {type(key).__name__} ({_describe(key)}): '
                                    'the keys of a DynamoDB map must be str')
                if not key:
                    raise ValueError(f'{path} has an empty key: DynamoDB map keys must not be empty')
                item_path = f'{path}[{_short_repr(key)}]'
                _utf8_size(f'the key {item_path}', key)
                _check_value(item_path, item, level + 1, ancestors, checked)
        else:
            for index, item in enumerate(value):
                _check_value(f'{path}[{index}]', item, level + 1, ancestors, checked)
    finally:
        ancestors.discard(id(value))
    checked.add((id(value), level))


def _check_set(path: str, value: AbstractSet[object]) -> None:
    """A DynamoDB set: non-empty, and all strings, all numbers or all binary values."""
    if not value:
        raise ValueError(f'{path} is an empty set, which DynamoDB cannot store: leave the attribute '
                         'out, or use an empty list')
    kinds = set()
    for element in value:
        where = f'an element of {path}'
        if isinstance(element, bool):
            raise TypeError(f'{path} contains the bool {element!r}: DynamoDB has no set of booleans '
                            f'(boto3 would store it as the number {int(element)}); use a list')
        if isinstance(element, float):
            raise TypeError(f'{where} is a float ({element!r}), which DynamoDB cannot store exactly: '
                            'use a decimal.Decimal instead, e.g. Decimal(str(x)), or an int')
        if isinstance(element, (int, Decimal)):
            kinds.add('number')
            _check_number(where, element)
        elif isinstance(element, str):
            kinds.add('string')
            _utf8_size(where, element)
        elif isinstance(element, (bytes, bytearray, Binary)):
            kinds.add('binary')
        else:
            raise TypeError(f'{where} has type {type(element).__name__}: DynamoDB sets hold only strings, '
                            'numbers (int, Decimal) or binary values (bytes, Binary)')
    if len(kinds) > 1:
        raise ValueError(f'{path} mixes {" and ".join(sorted(kinds))} elements: a DynamoDB set holds '
                         'only strings, only numbers or only binary values; use a list for mixed values')


def _check_number(path: str, value: Union[int, Decimal]) -> None:
    """An int or Decimal that DynamoDB stores exactly and that boto3 sends and reads back."""
    number = value if isinstance(value, Decimal) else Decimal(int(value))
    if not number.is_finite():
        raise ValueError(f'{path} is {number}: DynamoDB cannot store NaN or Infinity')
    sign, digits, exponent = number.as_tuple()
    coefficient = ''.join(map(str, digits))
    significant = coefficient.rstrip('0')   # DynamoDB trims leading and trailing zeros
    if len(significant) > MAX_NUMBER_DIGITS:
        raise ValueError(f'{path} = {_describe(value)} has {len(significant)} significant digits; DynamoDB '
                         f'numbers hold at most {MAX_NUMBER_DIGITS} (store it as a string to keep them all)')
    if significant and not MIN_NUMBER_MAGNITUDE <= number.copy_abs() <= MAX_NUMBER_MAGNITUDE:
        raise ValueError(f'{path} = {_describe(value)} is outside the range of DynamoDB numbers: zero, or a '
                         f'magnitude from {MIN_NUMBER_MAGNITUDE} to {MAX_NUMBER_MAGNITUDE}')
    if significant:   # the same number without trailing zeros, as DynamoDB keeps it
        trimmed = Decimal((sign, tuple(int(d) for d in significant),
                           int(exponent) + len(coefficient) - len(significant)))
    else:
        trimmed = Decimal(0)
    # DynamoDB returns numbers in plain notation (1E+38 comes back as a 1 and 38 zeros): check
    # that boto3 can read that back, or every read of the item would fail.
    rendered = format(trimmed, 'f')
    try:
        _DESERIALIZER.deserialize({'N': rendered})
    except ArithmeticError:
        written_out = sum(character.isdigit() for character in rendered)
        raise ValueError(
            f'{path} = {_describe(value)} is a valid DynamoDB number, but DynamoDB returns it written out '
            f'in {written_out} digits, and boto3 cannot read back more than {MAX_NUMBER_DIGITS} '
            '(boto/boto3#2500): every read of the item would fail; keep its magnitude below 1E+38, '
            'or store it as a string'
        ) from None
    try:
        _SERIALIZER.serialize(value)
    except (ArithmeticError, TypeError) as error:
        why = (f'has {len(coefficient)} digits as written, trailing zeros included, and boto3 sends at most '
               f'{MAX_NUMBER_DIGITS}' if len(coefficient) > MAX_NUMBER_DIGITS
               else f'has an exponent boto3 cannot send ({type(error).__name__})')
        raise ValueError(f"{path} = {_describe(value)} {why}: write it as Decimal('{trimmed}')") from None


def _short_repr(text: str, limit: int = 60) -> str:
    shown = repr(text)
    return shown if len(shown) <= limit else repr(text[:limit]) + '...'


def _describe(value: object) -> str:
    """A short repr of a value for an error message (huge ints have no repr in Python 3.11+)."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 200:
        return f'an int of {len(Decimal(value).as_tuple().digits)} digits'
    if isinstance(value, Decimal) and len(value.as_tuple().digits) > 60:
        return f'a Decimal of {len(value.as_tuple().digits)} digits (exponent {value.as_tuple().exponent})'
    return _short_repr(value) if isinstance(value, str) else repr(value)
