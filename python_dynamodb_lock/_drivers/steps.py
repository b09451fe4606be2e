"""What both drivers share: :class:`Host`, what a driver needs of the client it runs protocols
for, :class:`Steps`, what it keeps while it runs one protocol, and :func:`hand_off`, how long a
caller waits for the settling work it hands off (the simulation driver makes the same decision).
"""
from __future__ import annotations

import concurrent.futures
import dataclasses
import threading
from typing import Any, Callable, List, Mapping, Optional, Protocol, Sequence

from .._common.clock import Clock
from .._core.effects import Protocol as CoreProtocol
from .._model.errors import DynamoDBLockError, is_cancellation
from .._common.registry import WaiterState

__all__ = ['CANCEL_GRACE', 'HandOff', 'Host', 'SETTLE_GRACE', 'Steps', 'hand_off', 'woken']

#: Seconds a cancelled caller (a cancelled task, a threaded ``cancel`` event set) waits, in all,
#: for the undo of what it left in flight; the rest goes on in the background.
CANCEL_GRACE = 0.03
#: The same after another interruption (Ctrl-C, ``KeyboardInterrupt`` in the event loop).
SETTLE_GRACE = 0.5


class Host(Protocol):
    """What a driver needs of the client it runs protocols for (the orchestration gives it)."""

    clock: Clock
    owner_name: str
    #: The effects that need no I/O (events, registry updates), by type: performed on the way.
    local: Mapping[type, Callable[[Any], Any]]

    def public_error(self, error: DynamoDBLockError) -> DynamoDBLockError: ...

    def take_due(self, locks: Sequence[Any]) -> List[Any]: ...

    def done_with(self, locks: Sequence[Any], failure: Optional[BaseException] = None) -> None: ...

    def renewals(self, locks: Sequence[Any]) -> CoreProtocol[None]: ...

    def heartbeat_round(self) -> CoreProtocol[None]: ...

    def checker_round(self) -> CoreProtocol[None]: ...


class Steps:
    """What a driver keeps while it runs one protocol.

    ``wake`` cuts the protocol's sleeps short; ``cancel`` (the threaded client's
    ``acquire_lock(cancel=...)``) ends it; ``thrown`` is the last exception thrown into it;
    ``inflight`` the call an interruption left on the wire (a future or task whose answer will
    still arrive), handed to the protocol that settles it; ``pending`` is that call, for a
    settling protocol; ``settle_by`` when an interrupted caller stops waiting for its undo.
    """

    __slots__ = ('wake', 'cancel', 'thrown', 'inflight', 'pending', 'kick', 'settle_by')

    def __init__(self, wake: Any, cancel: Optional[threading.Event] = None,
                 pending: Optional[concurrent.futures.Future[Any]] = None) -> None:
        self.wake = wake
        self.cancel = cancel
        self.thrown: Optional[BaseException] = None
        self.inflight: Any = None
        self.pending = pending
        self.kick: Any = None
        self.settle_by: Optional[float] = None

    @property
    def interrupted(self) -> bool:
        """Whether the caller is being interrupted (Ctrl-C, cancellation), so that settling
        work must not keep it waiting."""
        thrown = self.thrown
        return thrown is not None and (not isinstance(thrown, Exception) or is_cancellation(thrown))

    def settle_timeout(self, now: float, grace: float) -> Optional[float]:
        """How long the caller waits for undo work it hands off (``Settle``): until it is done
        (None), unless the caller is being interrupted; then for what is left of ``grace``
        seconds from its first undo, all of its undo work together, the rest going on in the
        background."""
        if not self.interrupted:
            return None
        if self.settle_by is None:
            self.settle_by = now + grace
        return max(0.0, self.settle_by - now)


def woken(wake: Any, was_woken: bool, shutdown: object) -> Any:
    """What a ``Sleep`` on ``wake`` answers: False when its time ran out; for a waiter woken
    early, the row a release handed over to it or True (see ``WaiterState.take_wake``). The
    ``wake`` event of ``acquire_first_lock`` is used up (cleared), so the next wait is real."""
    if not was_woken:
        return False
    if isinstance(wake, WaiterState):
        return wake.take_wake()
    if wake is not shutdown:
        wake.clear()
    return True


@dataclasses.dataclass(frozen=True)
class HandOff:
    """How a caller waits for the settling work it hands off (``Settle``), which runs apart
    from it (a task, a thread) whatever happens to the caller: not at all (``waits`` False: a
    follow-up); until it is done (``timeout`` None; an asyncio caller shielded from its
    cancellation); or at most ``timeout`` seconds, the rest going on in the background."""

    waits: bool
    timeout: Optional[float] = None


def hand_off(follow_up: bool, steps: Steps, now: float, cancelled: bool,
             cancel_grace: float = CANCEL_GRACE, settle_grace: float = SETTLE_GRACE) -> HandOff:
    """Both drivers' decision for a ``Settle`` a protocol yields (pure). ``cancelled``: the
    exception last thrown into the protocol (``steps.thrown``) is the caller's cancellation (a
    cancelled task, the ``cancel`` event): it waits for what is left of ``cancel_grace`` from
    its first undo; a caller interrupted otherwise (Ctrl-C) for what is left of
    ``settle_grace``; any other caller until the work is done."""
    if follow_up:
        return HandOff(False)
    return HandOff(True, steps.settle_timeout(now, cancel_grace if cancelled else settle_grace))
