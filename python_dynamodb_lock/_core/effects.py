"""What a protocol asks its driver to do: the only way protocols touch the outside world.

A protocol is a generator. It yields effects and receives their results:

* ``yield Call(request)`` -> the :mod:`~python_dynamodb_lock._core.answers` value of the call
  (for ``batch_execute_statement``: a list of answers, one per statement, or one
  :class:`~python_dynamodb_lock._core.answers.Failed` for the whole call);
* ``yield Sleep(seconds)`` -> True when the wait was cut short (a release in this client for an
  acquire, shutdown for background rounds), False when the time passed;
* ``yield Emit(event)`` -> None; the driver hands the event to its observer (logs, callbacks,
  metrics);
* ``yield Submit(locks)`` -> how many of ``locks`` were skipped because their previous
  heartbeat is still in flight; the driver starts their renewal in the background;
* ``yield Unregister(lock)`` -> None; the lock is no longer held: it leaves the registry.

It returns its result with ``return``, and raises :class:`DynamoDBLockError` for failures the
caller must see.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Generator, Tuple, TypeVar

from .._requests import Request
from .events import Event

__all__ = ['Call', 'Effect', 'Emit', 'Protocol', 'Sleep', 'Submit', 'Unregister']


@dataclasses.dataclass(frozen=True)
class Call:
    request: Request


@dataclasses.dataclass(frozen=True)
class Sleep:
    seconds: float


@dataclasses.dataclass(frozen=True)
class Emit:
    event: Event


@dataclasses.dataclass(frozen=True)
class Submit:
    locks: Tuple[Any, ...]


@dataclasses.dataclass(frozen=True)
class Unregister:
    """Drop ``lock`` from the client's registry of held locks and wake its waiters (no I/O:
    the shared client code handles it)."""

    lock: Any


Effect = Any   # Call | Sleep | Emit | Submit
T = TypeVar('T')
Protocol = Generator[Effect, Any, T]
