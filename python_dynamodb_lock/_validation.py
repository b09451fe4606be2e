"""Argument checks, run before anything is written to DynamoDB.

Each check raises ``TypeError`` for a value of the wrong type and ``ValueError`` for a value
of the right type that cannot work, with a message naming the argument.
"""
from __future__ import annotations

import datetime
from typing import Any, Optional

__all__ = [
    'MAX_PARTITION_KEY_BYTES',
    'MAX_SORT_KEY_BYTES',
    'require_attribute_name',
    'require_callable',
    'require_duration',
    'require_key',
    'require_text',
]

#: DynamoDB's limits on the UTF-8 size of key attribute values.
MAX_PARTITION_KEY_BYTES = 2048
MAX_SORT_KEY_BYTES = 1024


def require_text(name: str, value: Any) -> str:
    """A non-empty ``str``."""
    if not isinstance(value, str):
        raise TypeError(f'{name} must be a str, not {type(value).__name__}')
    if not value:
        raise ValueError(f'{name} must not be empty')
    return value


def require_attribute_name(name: str, value: Any) -> str:
    """A DynamoDB attribute name: a non-empty ``str`` of at most 255 UTF-8 bytes."""
    require_text(name, value)
    if len(value.encode('utf-8')) > 255:
        raise ValueError(f'{name} must be at most 255 bytes in UTF-8, got {len(value.encode("utf-8"))}')
    return value


def require_key(name: str, value: Any, max_bytes: int) -> str:
    """A key attribute value: a non-empty ``str`` of at most ``max_bytes`` UTF-8 bytes."""
    require_text(name, value)
    size = len(value.encode('utf-8', errors='surrogatepass'))
    if size > max_bytes:
        raise ValueError(f'{name} is {size} bytes in UTF-8; DynamoDB allows at most {max_bytes}')
    return value


def require_duration(name: str, value: Any, *, allow_zero: bool = False) -> float:
    """A ``datetime.timedelta`` that is positive (or zero when allowed); returns its seconds."""
    if not isinstance(value, datetime.timedelta):
        raise TypeError(f'{name} must be a datetime.timedelta, not {type(value).__name__}')
    seconds = value.total_seconds()
    if seconds < 0 or (seconds == 0 and not allow_zero):
        qualifier = 'zero or positive' if allow_zero else 'positive'
        raise ValueError(f'{name} must be {qualifier}, got {value!r}')
    return seconds


def require_callable(name: str, value: Optional[Any]) -> Optional[Any]:
    """None or a callable."""
    if value is not None and not callable(value):
        raise TypeError(f'{name} must be callable or None, not {type(value).__name__}')
    return value
