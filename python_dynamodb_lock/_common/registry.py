"""The locks a client holds, and who in the same client waits for which key.

Identity-checked: forgetting a lock removes only that very object, so a stale lock object
(already released or lost, whose key was locked again) can never make the client forget the
lock that replaced it. A plain mutex makes each operation atomic; it is never held while
anything else happens.
"""
from __future__ import annotations

import threading
from typing import Any, Dict, Generic, List, Optional, TypeVar

from .._core.write import AcquireAttempt, Written

__all__ = ['Registry', 'WaiterState']

L = TypeVar('L')


class WaiterState:
    """What the registry keeps about one acquisition waiting in this client (mixed into the
    driver's event type, ``threading.Event`` or ``asyncio.Event``).

    ``attempt`` is the waiter's acquisition (what a release hands over to it); ``handed`` the
    lock row a release wrote for it; ``claimed`` while a release is writing that row; ``gone``
    once the waiter stopped waiting (timed out, cancelled, closed).
    """

    def init_waiter(self, attempt: AcquireAttempt) -> None:
        self.attempt = attempt
        self.handed: Any = None
        self.claimed = False
        self.gone = False

    def take_wake(self) -> Any:
        """The waiter was woken: the row handed over to it, else True (a release or ``close()``
        in this client). The wake is used up, so that the waiter's next wait is a real one."""
        self.clear()  # type: ignore[attr-defined]  # first: a handover after this sets it again
        return self.handed or True


class Registry(Generic[L]):
    """Held locks by unique identifier, and the waiters of each key in arrival order.

    A waiter is any object with ``set()`` (a ``threading.Event`` or an ``asyncio.Event``).
    """

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._locks: Dict[str, L] = {}
        self._waiters: Dict[str, List[Any]] = {}

    def held(self) -> List[L]:
        with self._guard:
            return list(self._locks.values())

    def get(self, unique_identifier: str) -> Optional[L]:
        with self._guard:
            return self._locks.get(unique_identifier)

    def holds(self, lock: L, unique_identifier: str) -> bool:
        with self._guard:
            return self._locks.get(unique_identifier) is lock

    def register(self, lock: L, unique_identifier: str) -> Optional[L]:
        """Record ``lock`` as the held lock of its key; returns the object it replaced, if any."""
        with self._guard:
            previous = self._locks.get(unique_identifier)
            self._locks[unique_identifier] = lock
        return previous if previous is not lock else None

    def forget(self, lock: L, unique_identifier: str) -> bool:
        """Drop ``lock`` if it is the held lock of its key; True when it was."""
        with self._guard:
            if self._locks.get(unique_identifier) is lock:
                del self._locks[unique_identifier]
                return True
            return False

    def clear(self) -> List[L]:
        """Forget every lock (for a forked child, whose parent's locks are not its own)."""
        with self._guard:
            locks = list(self._locks.values())
            self._locks.clear()
            self._waiters.clear()
            return locks

    def add_waiter(self, unique_identifier: str, waiter: WaiterState) -> None:
        with self._guard:
            self._waiters.setdefault(unique_identifier, []).append(waiter)

    def _drop_waiter(self, unique_identifier: str, waiter: WaiterState) -> None:
        """Take ``waiter`` off its key's queue (the caller holds the guard)."""
        waiters = self._waiters.get(unique_identifier, [])
        if waiter in waiters:
            waiters.remove(waiter)
        if not waiters:
            self._waiters.pop(unique_identifier, None)

    def claim_successor(self, unique_identifier: str) -> Optional[Any]:
        """The waiter that has waited longest for this key, now claimed: a release is about to
        hand the lock over to it. None when nobody waits here."""
        with self._guard:
            for waiter in self._waiters.get(unique_identifier, ()):
                if getattr(waiter.attempt, 'shared', False):
                    continue    # a shared acquirer joins by itself; a hand-over writes an exclusive row
                if not waiter.claimed and not waiter.gone and waiter.handed is None:
                    waiter.claimed = True
                    return waiter
        return None

    def hand_over(self, unique_identifier: str, waiter: Any, written: Optional[Written]) -> bool:
        """Give ``waiter`` the row a release wrote for it (``written``; None: the handover did
        not happen) and wake it. False when it had stopped waiting: then the row is nobody's."""
        with self._guard:
            waiter.claimed = False
            if written is None or waiter.gone:
                return False
            waiter.handed = written
            waiters = self._waiters.get(unique_identifier, [])
            if waiter in waiters:
                waiters.remove(waiter)
        waiter.set()
        return True

    def leave(self, unique_identifier: str, waiter: WaiterState) -> Any:
        """``waiter`` stops waiting: the row handed over to it meanwhile, if any (it must take
        it), else None (a handover still under way will find it gone)."""
        with self._guard:
            self._drop_waiter(unique_identifier, waiter)
            if waiter.handed is None:
                waiter.gone = True
            return waiter.handed

    def wake_longest_waiting(self, unique_identifier: str) -> None:
        """Wake the waiter that has waited longest for this key in this client.

        Only one: waking them all would have all but one spend a failed conditional put. The
        others keep polling, and are woken in turn by later releases.
        """
        with self._guard:
            waiters = self._waiters.get(unique_identifier)
            longest_waiting = waiters[0] if waiters else None
        if longest_waiting is not None:
            longest_waiting.set()

    def all_waiters(self) -> List[Any]:
        with self._guard:
            return [waiter for waiters in self._waiters.values() for waiter in waiters]
