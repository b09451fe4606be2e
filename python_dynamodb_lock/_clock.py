"""Time sources for the lock clients.

Everything in a client that depends on time asks a clock object, so that tests can drive time
by hand and shutdown can interrupt any wait at once. The threaded client waits with
:meth:`Clock.sleep` on a ``threading.Event``; the asyncio client with :meth:`Clock.sleep_async`
on an ``asyncio.Event``.
"""
from __future__ import annotations

import asyncio
import threading
import time
from typing import Protocol

__all__ = ['Clock', 'SystemClock']


class Clock(Protocol):
    """What the lock clients need from a time source."""

    def monotonic(self) -> float:
        """Seconds on a clock that never goes backwards; only differences are meaningful."""

    def time(self) -> float:
        """Wall-clock seconds since the epoch (used only for the TTL attribute)."""

    def sleep(self, seconds: float, wake: threading.Event) -> bool:
        """Wait ``seconds``, or less if ``wake`` is set; return True when woken early."""

    async def sleep_async(self, seconds: float, wake: asyncio.Event) -> bool:
        """Like :meth:`sleep`, in a coroutine."""


class SystemClock:
    """The real clock: :func:`time.monotonic`, :func:`time.time` and event waits."""

    def monotonic(self) -> float:
        return time.monotonic()

    def time(self) -> float:
        return time.time()

    def sleep(self, seconds: float, wake: threading.Event) -> bool:
        if not seconds > 0:   # also NaN
            return wake.is_set()
        # Event.wait overflows beyond TIMEOUT_MAX; a longer wait is as good as forever.
        return wake.wait(min(seconds, threading.TIMEOUT_MAX))

    async def sleep_async(self, seconds: float, wake: asyncio.Event) -> bool:
        if not seconds > 0 or wake.is_set():
            return wake.is_set()
        try:
            await asyncio.wait_for(wake.wait(), min(seconds, threading.TIMEOUT_MAX))
        except asyncio.TimeoutError:
            return False
        return True
