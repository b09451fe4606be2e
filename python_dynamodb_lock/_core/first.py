"""Acquiring the first free of several locks: the acquire protocol of each key, interleaved.

Each key runs :func:`~python_dynamodb_lock._core.acquire.acquire` with its own rules (free rows,
released rows, lost answers, the takeover of a holder presumed dead). This protocol steps them
in the order given: each key is tried up to its first wait before the next one is tried, and the
waits of all of them are merged into one ``Sleep``, after which every key whose wait is over is
stepped again. The first key written wins; the others are then only waiting (never in flight)
and are simply closed.

Every effect of a key's protocol but its ``Sleep`` passes through to the driver unchanged (calls,
events, and the ``Settle`` / ``Pending`` of an interrupted write), and an exception the driver
throws in (cancellation, Ctrl-C) is thrown into the key whose effect was interrupted, so that its
undo runs exactly as for a single acquisition.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Dict, List, Optional, Sequence, Union

from .acquire import Observations, TimedOut, acquire
from .write import AcquireAttempt, Written
from .effects import Protocol, Sleep
from .state import TimeSource

__all__ = ['FirstWritten', 'NoneFree', 'acquire_first']


@dataclasses.dataclass(frozen=True)
class FirstWritten:
    """The key at ``index`` (in the order given) was written first."""

    index: int
    written: Written


@dataclasses.dataclass(frozen=True)
class NoneFree:
    """Every key's ``retry_timeout`` was spent; ``timed_out`` says what blocked each key."""

    timed_out: List[TimedOut]


def acquire_first(attempts: Sequence[AcquireAttempt], clock: TimeSource, is_closed: Callable[[], bool],
                  observations: Optional[Observations] = None) -> Protocol[Union[FirstWritten, NoneFree]]:
    """Acquire the first of ``attempts`` that can be had (``observations``: the client's memory
    of the holders' versions, as for :func:`~python_dynamodb_lock._core.acquire.acquire`).

    A ``Sleep`` answered True (woken early) makes every waiting key poll at once.

    :raises DynamoDBLockError: as :func:`~python_dynamodb_lock._core.acquire.acquire`.
    """
    live: Dict[int, Protocol[Union[Written, TimedOut]]] = {}
    due_at: Dict[int, float] = {}
    timed_out: Dict[int, TimedOut] = {}

    def step(index: int, value: object) -> Protocol[Optional[FirstWritten]]:
        """Run one key's protocol up to its next wait (None) or its end (the win, if written)."""
        protocol = live[index]
        thrown: Optional[BaseException] = None
        while True:
            try:
                effect = protocol.throw(thrown) if thrown is not None else protocol.send(value)
            except StopIteration as finished:
                del live[index]
                if isinstance(finished.value, Written):
                    return FirstWritten(index, finished.value)
                timed_out[index] = finished.value
                return None
            if isinstance(effect, Sleep):
                due_at[index] = clock.monotonic() + effect.seconds
                return None
            thrown = None
            try:
                value = yield effect
            except GeneratorExit:
                raise
            except BaseException as error:     # interrupted: the key's own protocol settles it
                thrown = error

    try:
        for index, attempt in enumerate(attempts):
            live[index] = acquire(attempt, clock, is_closed, observations)
            won = yield from step(index, None)
            if won is not None:
                return won
        while due_at:
            now = clock.monotonic()
            earliest = min(due_at.values())
            woken: Any = False
            if earliest > now:
                woken = yield Sleep(earliest - now)
            now = clock.monotonic()
            for index in sorted(due_at, key=lambda key: (due_at[key], key)):
                if woken or due_at[index] <= now:
                    del due_at[index]
                    won = yield from step(index, False)    # False: the wait is over, look again
                    if won is not None:
                        return won
        return NoneFree([timed_out[index] for index in sorted(timed_out)])
    finally:
        for protocol in live.values():     # only waiting ones: nothing of theirs is in flight
            protocol.close()
