"""Argument checks, run before anything is written to DynamoDB.

Each check raises ``TypeError`` for a value of the wrong type and ``ValueError`` for a value
of the right type that cannot work, with a message naming the argument.
"""
from __future__ import annotations

import datetime
import math
import threading
from typing import Any, Optional

__all__ = [
    'MAX_DURATION',
    'MAX_PARTITION_KEY_BYTES',
    'MAX_SORT_KEY_BYTES',
    'clamp_wait',
    'require_attribute_name',
    'require_callable',
    'require_duration',
    'require_key',
    'require_text',
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

def require_text(name: str, value: Any) -> str:
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


def require_attribute_name(name: str, value: Any) -> str:
    """A DynamoDB attribute name: a non-empty ``str`` of at most 255 UTF-8 bytes."""
    require_text(name, value)
    size = _utf8_size(name, value)
    if size > 255:
        raise ValueError(f'{name} must be at most 255 bytes in UTF-8, got {size}')
    return value


def require_key(name: str, value: Any, max_bytes: int) -> str:
    """A key attribute value: a non-empty ``str`` of at most ``max_bytes`` UTF-8 bytes."""
    require_text(name, value)
    size = len(value.encode('utf-8', errors='surrogatepass'))
    if size > max_bytes:
        raise ValueError(f'{name} is {size} bytes in UTF-8; DynamoDB allows at most {max_bytes}')
    return value


def require_duration(name: str, value: Any, *, allow_zero: bool = False) -> float:
    """A ``datetime.timedelta`` that is positive (or zero when allowed) and at most
    :data:`MAX_DURATION`; returns its seconds."""
    if not isinstance(value, datetime.timedelta):
        raise TypeError(f'{name} must be a datetime.timedelta, not {type(value).__name__}')
    seconds = value.total_seconds()
    if seconds < 0 or (seconds == 0 and not allow_zero):
        qualifier = 'zero or positive' if allow_zero else 'positive'
        raise ValueError(f'{name} must be {qualifier}, got {value!r}')
    if value > MAX_DURATION:
        raise ValueError(f'{name} must be at most {_MAX_DURATION_TEXT}, {MAX_DURATION!r}; got {value!r}')
    return seconds


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

