"""The library's one exception type, and the machine-readable reasons it can carry.

:class:`DynamoDBLockError` keeps the published constructor, codes and ``str()``; ``reason``
and ``holder`` are additive, so code written for 0.9.1 that looks only at ``code`` keeps
working while new code need not parse messages.
"""
from __future__ import annotations

from typing import Any, Optional

__all__ = ['DynamoDBLockError', 'Reason', 'cancelled_error', 'is_cancellation']


class Reason:
    """Why an operation failed or a lock is in trouble: the values of ``DynamoDBLockError.reason``
    and of ``DynamoDBLock.loss_reason``.

    Lock trouble:

    * ``TAKEN_OVER`` -- the row now belongs to another owner (``holder`` says who).
    * ``ROW_GONE`` -- the row disappeared (TTL expiry, a force release, or a delete by another
      program) while this client believed it held the lock.
    * ``UNREACHABLE`` -- DynamoDB could not be reached or did not answer (timeouts, refused
      connections, 5xx after retries).
    * ``THROTTLED`` -- DynamoDB refused for throughput (provisioned capacity, request limits).
    * ``SESSION_LOST`` -- the client session the lock was held under was found ended (taken
      over by a waiter after it went unrenewed for its lease, or deleted): see docs/sessions.rst.

    Set-up and request problems (kept under the published code ``UNKNOWN``):

    * ``TABLE_NOT_FOUND``, ``WRONG_KEY_SCHEMA``, ``TABLE_EXISTS``, ``ACCESS_DENIED``,
      ``VALIDATION`` (DynamoDB rejected the request), ``FORKED`` (the client was used in a
      process forked from the one that created it), ``OTHER``.
    """

    TAKEN_OVER = 'TAKEN_OVER'
    ROW_GONE = 'ROW_GONE'
    UNREACHABLE = 'UNREACHABLE'
    THROTTLED = 'THROTTLED'
    SESSION_LOST = 'SESSION_LOST'
    TABLE_NOT_FOUND = 'TABLE_NOT_FOUND'
    WRONG_KEY_SCHEMA = 'WRONG_KEY_SCHEMA'
    TABLE_EXISTS = 'TABLE_EXISTS'
    ACCESS_DENIED = 'ACCESS_DENIED'
    VALIDATION = 'VALIDATION'
    FORKED = 'FORKED'
    OTHER = 'OTHER'


class DynamoDBLockError(Exception):
    """Raised by the lock client; ``code`` says what went wrong, ``message`` explains.

    ``code`` is one of the class constants below (the published codes). Two attributes were
    added for code that must act on the failure without parsing ``message``:

    * ``reason`` -- a :class:`Reason` value, or None where the code says it all
      (``CLIENT_SHUTDOWN``, ``ACQUIRE_TIMEOUT``, ``ACQUIRE_CANCELLED``, ``LOCK_NOT_OWNED``,
      ``GLOBAL_TABLE``, ``ITEM_NOT_FOUND``);
    * ``holder`` -- for ``LOCK_STOLEN`` and ``ACQUIRE_TIMEOUT``, the lock found in the way
      (a :class:`BaseDynamoDBLock`, with ``owner_name`` and ``fencing_token``), when known.

    The original exception, where there is one, is chained as ``__cause__``.
    """

    CLIENT_SHUTDOWN = 'CLIENT_SHUTDOWN'
    ACQUIRE_TIMEOUT = 'ACQUIRE_TIMEOUT'
    LOCK_NOT_OWNED = 'LOCK_NOT_OWNED'
    LOCK_STOLEN = 'LOCK_STOLEN'
    LOCK_IN_DANGER = 'LOCK_IN_DANGER'
    UNKNOWN = 'UNKNOWN'
    #: Not published: the threaded ``acquire_lock(cancel=event)`` ended because ``event`` was set.
    ACQUIRE_CANCELLED = 'ACQUIRE_CANCELLED'
    #: Not published: ``for_table`` or ``create_dynamodb_table(exist_ok=True)`` found a global
    #: table (replicated to other regions) and was not given ``allow_global_table=True``.
    GLOBAL_TABLE = 'GLOBAL_TABLE'
    #: Not published: ``acquire_lock(lock_existing_item=True, only_if_exists=True)`` found no item
    #: at the key (nothing was written).
    ITEM_NOT_FOUND = 'ITEM_NOT_FOUND'

    def __init__(self, code: str = 'UNKNOWN', message: str = 'Unknown error', *,
                 reason: Optional[str] = None, holder: Optional[Any] = None) -> None:
        super().__init__(code, message)
        self.code = code
        self.message = message
        self.reason = reason
        self.holder = holder

    def __str__(self) -> str:
        return f'{self.__class__.__name__}: {self.code} - {self.message}'

    def __reduce__(self) -> Any:
        return _rebuild_error, (self.__class__, self.code, self.message, self.reason, self.holder)


def cancelled_error() -> DynamoDBLockError:
    """``ACQUIRE_CANCELLED``: an acquisition ended by its cancel event (the threaded client's
    ``cancel=``, a recipe's resignation) before anything was held."""
    return DynamoDBLockError(DynamoDBLockError.ACQUIRE_CANCELLED,
                             'The acquisition was cancelled (its cancel event was set); nothing is held')


def _rebuild_error(cls: type, code: str, message: str, reason: Optional[str], holder: object) -> DynamoDBLockError:
    error: DynamoDBLockError = cls(code, message, reason=reason, holder=holder)
    return error


def is_cancellation(error: BaseException) -> bool:
    """Whether ``error`` is the threaded client's ``ACQUIRE_CANCELLED`` (its ``cancel`` event)."""
    return isinstance(error, DynamoDBLockError) and error.code == DynamoDBLockError.ACQUIRE_CANCELLED

