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
* ``yield Hold(lock)`` / ``yield Drop(lock)`` -> True / None: take / give back the mutex that
  serialises the calls about one held lock (``thread_lock`` or the asyncio lock's mutex);
  ``Hold(lock, wait=False)`` takes it only if it is free now, and says whether it did;
* ``yield Settle(protocol)`` -> None: finish ``protocol`` whatever happens to the caller. It is
  the undo or follow-up of something an interruption cut short, and must not be cut short in
  turn: the driver runs it apart from the caller (a task, a thread), waits for it while the
  caller is willing, and lets it run on in the background after a second interruption;
  ``Settle(protocol, follow_up=True)``: nobody waits for it at all (a watch for a late answer);
* ``yield Pending()`` -> inside a settling protocol: the answer of the call whose interruption
  it settles, once that answer arrives (the driver kept waiting for it), or None when the call
  itself was cut short and its answer can never be known.

It returns its result with ``return``, and raises :class:`DynamoDBLockError` for failures the
caller must see.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Generator, Tuple, TypeVar, Union

from .._wire.requests import Request
from .events import Event
from .state import LockView

__all__ = ['Call', 'Drop', 'Effect', 'Emit', 'Hold', 'Pending', 'Protocol', 'Settle', 'Sleep', 'Submit', 'Unregister']


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
    locks: Tuple[LockView, ...]


@dataclasses.dataclass(frozen=True)
class Unregister:
    """Drop ``lock`` from the client's registry of held locks and wake its waiters (no I/O:
    the shared client code handles it)."""

    lock: LockView


@dataclasses.dataclass(frozen=True)
class Hold:
    lock: Any   # the driver's own lock class: it knows where the mutex is
    wait: bool = True   # False: take the mutex only if it is free now; the result says whether


@dataclasses.dataclass(frozen=True)
class Drop:
    lock: Any   # as Hold's


@dataclasses.dataclass(frozen=True)
class Settle:
    protocol: 'Protocol[None]'
    follow_up: bool = False   # True: nobody waits for it (it watches for late answers)


@dataclasses.dataclass(frozen=True)
class Pending:
    """Ask for the answer of the interrupted call being settled (see the module docstring)."""


#: What a protocol may yield: one of the effects above, nothing else.
Effect = Union[Call, Sleep, Emit, Submit, Unregister, Hold, Drop, Settle, Pending]
T = TypeVar('T')
# What is sent back depends on the effect (see the module docstring): an Answer, a bool, None.
Protocol = Generator[Effect, Any, T]
