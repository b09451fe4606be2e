"""What the recipes share: their logger, timings, argument checks and small helpers."""
from __future__ import annotations

import datetime
import logging
from typing import Any, Callable, Optional, Union

from .._model.errors import DynamoDBLockError
from .._model.validation import require_duration
from .seams import ClientSettings

#: The recipes' logger (its name is the public module's, which applications configure).
logger = logging.getLogger('python_dynamodb_lock.recipes')

#: A duration: a :class:`datetime.timedelta`, or a number of seconds.
Duration = Union[datetime.timedelta, float, int]

# A wait "forever" is made of acquisitions of this length, one after the other (the lock
# machinery wants a finite ``retry_timeout``). A holder that dies just before the end of one
# is taken over at most one lease later than it would have been.
CHUNK = 24 * 3600.0
# The sort key the published package uses on a table without sort keys.
NO_SORT_KEY = '-'
# The statuses of a lock that is still held.
HELD = ('LOCKED', 'IN_DANGER')


def timeout_seconds(timeout: Optional[Duration]) -> Optional[float]:
    """A ``timeout`` given as a timedelta or a number of seconds: its seconds (None stays None)."""
    if timeout is None:
        return None
    return require_duration('timeout', timeout, allow_zero=True, seconds_too=True, bounded=False)


def retry_period_of(client: ClientSettings, retry_period: Optional[datetime.timedelta]) -> float:
    if retry_period is None:
        return float(client.heartbeat_period)
    # Positive (zero would poll without a pause) and at most 3650 days, like the client's periods.
    return require_duration('retry_period', retry_period)


def call_safely(what: str, function: Optional[Callable[..., Any]], *args: object) -> None:
    """Run an application callback; what it raises is logged, never propagated."""
    if function is None:
        return
    try:
        function(*args)
    except Exception:
        logger.exception('%s raised', what)


def ended(error: BaseException) -> bool:
    """An acquisition that ran out of time or was stopped: not a failure."""
    return isinstance(error, DynamoDBLockError) and error.code in (DynamoDBLockError.ACQUIRE_TIMEOUT,
                                                                    DynamoDBLockError.ACQUIRE_CANCELLED)
