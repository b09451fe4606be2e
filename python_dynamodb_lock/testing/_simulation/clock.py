"""Simulated time: :class:`World`, the one global simulated time, and :class:`SimulatedClock`,
a client's view of it (the :class:`~python_dynamodb_lock._common.clock.Clock` protocol): its monotonic
clock runs at its own rate from its own origin, its wall clock is off by its own offset.
"""
from __future__ import annotations

from typing import Any

__all__ = ['EPOCH', 'SimulatedClock', 'World']

#: The wall-clock time (seconds since 1970) at which every simulation starts.
EPOCH = 1_800_000_000.0


class World:
    """The global simulated time, in seconds from the start of the run; only the scheduler
    moves it (forward)."""

    def __init__(self) -> None:
        self.now = 0.0

    def advance_to(self, when: float) -> None:
        if when > self.now:
            self.now = when


class SimulatedClock:
    """One client's clock (see the module docstring): ``rate`` is how many of its monotonic
    seconds pass per global second; ``origin`` its monotonic reading at global time 0;
    ``offset`` how far its wall clock is ahead of the true one (within ``max_clock_skew``)."""

    def __init__(self, world: World, rate: float = 1.0, origin: float = 1000.0, offset: float = 0.0) -> None:
        self.world = world
        self.rate = rate
        self.origin = origin
        self.offset = offset

    def monotonic(self) -> float:
        return self.origin + self.world.now * self.rate

    def time(self) -> float:
        return EPOCH + self.world.now + self.offset

    def to_global(self, monotonic: float) -> float:
        """The global time at which this clock read ``monotonic``."""
        return (monotonic - self.origin) / self.rate

    def global_seconds(self, seconds: float) -> float:
        """How many global seconds ``seconds`` of this clock last."""
        return seconds / self.rate

    def sleep(self, seconds: float, wake: Any) -> bool:
        raise RuntimeError('a simulated clock does not sleep: the simulation driver performs Sleep effects')

    async def sleep_async(self, seconds: float, wake: Any) -> bool:
        raise RuntimeError('a simulated clock does not sleep: the simulation driver performs Sleep effects')
