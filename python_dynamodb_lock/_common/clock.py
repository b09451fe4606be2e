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
        # Not asyncio.wait_for: before Python 3.12 it swallows a cancellation that arrives as the
        # event is set, and a cancelled acquisition would then go on and adopt a lock that its
        # caller, gone, never receives. asyncio.wait always lets the cancellation through.
        woken = asyncio.ensure_future(wake.wait())
        try:
            await asyncio.wait({woken}, timeout=min(seconds, threading.TIMEOUT_MAX))
        finally:
            woken.cancel()
        return wake.is_set()
