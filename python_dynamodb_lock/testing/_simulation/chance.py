"""The simulation's only source of chance: :class:`SplitMix64`, a tiny deterministic generator.

Written here rather than taken from :mod:`random` (which the ``simulation-is-deterministic``
contract keeps out): its stream is fixed by this code alone, so that one seed gives the same
schedule, byte for byte, on every Python version (``random.Random``'s seeding of non-integers
and its derived methods have changed between versions).
"""
from __future__ import annotations

from typing import Sequence, TypeVar

__all__ = ['SplitMix64']

T = TypeVar('T')
_MASK = (1 << 64) - 1


class SplitMix64:
    """Steele, Lea and Flood's SplitMix64: 64-bit outputs from a 64-bit seed."""

    def __init__(self, seed: int) -> None:
        self._state = seed & _MASK

    def next(self) -> int:
        self._state = (self._state + 0x9E3779B97F4A7C15) & _MASK
        z = self._state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
        return z ^ (z >> 31)

    def below(self, bound: int) -> int:
        """An integer in ``[0, bound)`` (``bound`` >= 1)."""
        return self.next() % bound

    def unit(self) -> float:
        """A float in ``[0, 1)`` (53 bits)."""
        return (self.next() >> 11) / float(1 << 53)

    def uniform(self, low: float, high: float) -> float:
        return low + (high - low) * self.unit()

    def chance(self, probability: float) -> bool:
        return probability > 0 and self.unit() < probability

    def choice(self, items: Sequence[T]) -> T:
        return items[self.below(len(items))]

    def fork(self) -> 'SplitMix64':
        """An independent generator seeded from this one (a client's own stream)."""
        return SplitMix64(self.next())
