"""Time sources for the lock client.

Everything in the client that depends on time asks a clock object, so that tests can drive
time by hand and shutdown can interrupt any wait at once.
"""
from __future__ import annotations

import threading
import time
from typing import Protocol

__all__ = ['Clock', 'SystemClock']


class Clock(Protocol):
    """What the lock client needs from a time source."""

    def monotonic(self) -> float:
        """Seconds on a clock that never goes backwards; only differences are meaningful."""

    def time(self) -> float:
        """Wall-clock seconds since the epoch (used only for the TTL attribute)."""

    def sleep(self, seconds: float, wake: threading.Event) -> bool:
        """Wait ``seconds``, or less if ``wake`` is set; return True when woken early."""


class SystemClock:
    """The real clock: :func:`time.monotonic`, :func:`time.time` and :meth:`threading.Event.wait`."""

    def monotonic(self) -> float:
        return time.monotonic()

    def time(self) -> float:
        return time.time()

    def sleep(self, seconds: float, wake: threading.Event) -> bool:
        if seconds <= 0:
            return wake.is_set()
        return wake.wait(seconds)
