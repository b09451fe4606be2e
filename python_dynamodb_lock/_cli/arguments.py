"""The types of the options' values: text in, a value out, or one line naming what is accepted.

argparse puts the option in front of the message (``argument --lease: must be ...``).
"""
from __future__ import annotations

import argparse
import datetime
from typing import Callable, Tuple

from .._model import validation

#: How a command module adds its subparser: ``add_command(name, help, description)`` returns
#: the subparser, which already has the connection and table options.
AddCommand = Callable[[str, str, str], argparse.ArgumentParser]

#: The longest duration an option takes, in seconds: the library's limit on every duration
#: (3650 days), so that no option is refused later in the library's terms.
MAX_SECONDS = validation.MAX_DURATION.total_seconds()
_MAX_SECONDS_TEXT = f'{MAX_SECONDS:.0f} seconds (3650 days)'

#: ``--expiry-period`` of ``list`` and ``show``.
EXPIRY_PERIOD_HELP = (
    'the expiry_period (seconds) the lock holders use, if you know it (the library default '
    'is 3600). The table stores only expiry_time = last write + expiry_period, so with this '
    'value the time since the last acquire/heartbeat can be estimated (to about 1 s, plus '
    'clock skew between the holder and this machine). Without it no age is shown.')


def tag(text: str) -> Tuple[str, str]:
    """``--tag KEY=VALUE``: the key (before the first ``=``) and the value (may be empty)."""
    key, equals, value = text.partition('=')
    if not equals:
        raise argparse.ArgumentTypeError(f'expected KEY=VALUE, got {text!r}')
    return key, value


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f'not an integer: {text!r}') from None
    if value < 1:
        raise argparse.ArgumentTypeError(f'must be at least 1, got {value}')
    return value


def seconds(text: str, minimum: float, inclusive: bool) -> float:
    """``text`` as a number of seconds from ``minimum`` (the option's own floor) to the
    library's longest duration, which the library's one duration check decides."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f'not a number: {text!r}') from None
    if not (value >= minimum if inclusive else value > minimum):   # NaN too
        if minimum:
            wanted = f'at least {minimum:g}'
        else:
            wanted = 'zero or more' if inclusive else 'a positive number'
        raise argparse.ArgumentTypeError(f'must be {wanted}, got {text}')
    try:
        validation.require_duration('SECONDS', datetime.timedelta(seconds=value), allow_zero=True)
    except (OverflowError, ValueError):   # OverflowError: too long for a timedelta (inf, 1e300)
        raise argparse.ArgumentTypeError(f'must be at most {_MAX_SECONDS_TEXT}, got {text}') from None
    return value


def positive_seconds(text: str) -> float:
    return seconds(text, 0.0, inclusive=False)


def non_negative_seconds(text: str) -> float:
    return seconds(text, 0.0, inclusive=True)
