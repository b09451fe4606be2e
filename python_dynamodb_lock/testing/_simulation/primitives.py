"""What the simulated tasks wait on: :class:`SimulatedEvent` (a flag whose ``set`` wakes the
tasks sleeping on it), :class:`SimulatedWaiter` (an acquisition's place in its client's queue)
and :class:`SimulatedMutex` (a held lock's mutex, reentrant like the threaded lock's RLock,
taken and given back cooperatively by the scheduler's tasks).
"""
from __future__ import annotations

from typing import Any, Callable, List, Optional

from ..._common.registry import WaiterState

__all__ = ['SimulatedEvent', 'SimulatedMutex', 'SimulatedWaiter']


class SimulatedEvent:
    """A ``threading.Event`` for simulated tasks: ``set`` makes the tasks sleeping on it ready
    (``on_set`` is the scheduler's hook, called with the event)."""

    def __init__(self, on_set: Optional[Callable[['SimulatedEvent'], None]] = None) -> None:
        self._flag = False
        self.on_set = on_set

    def is_set(self) -> bool:
        return self._flag

    def set(self) -> None:
        self._flag = True
        if self.on_set is not None:
            self.on_set(self)

    def clear(self) -> None:
        self._flag = False


class SimulatedWaiter(WaiterState, SimulatedEvent):
    """An acquisition waiting in its client (the threaded driver's ``Waiter``, simulated)."""

    def __init__(self, attempt: Any, on_set: Optional[Callable[[SimulatedEvent], None]] = None) -> None:
        SimulatedEvent.__init__(self, on_set)
        self.init_waiter(attempt)


class SimulatedMutex:
    """A reentrant mutex owned by a simulated task; the tasks waiting for it queue in order."""

    def __init__(self) -> None:
        self.owner: Any = None
        self.count = 0
        self.waiting: List[Any] = []

    def try_take(self, task: Any) -> bool:
        if self.owner is None or self.owner is task:
            self.owner = task
            self.count += 1
            return True
        return False

    def give_back(self, task: Any) -> Any:
        """Release one hold of ``task``; the task now owning it (to wake), if one was waiting."""
        if self.owner is not task:
            raise RuntimeError(f'{task} gives back a mutex it does not hold (held by {self.owner})')
        self.count -= 1
        if self.count:
            return None
        self.owner = None
        if self.waiting:
            nxt = self.waiting.pop(0)
            self.owner, self.count = nxt, 1
            return nxt
        return None
