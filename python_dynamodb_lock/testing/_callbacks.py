"""An ``app_callback`` that records what it is told."""
from __future__ import annotations

import dataclasses
import threading
from typing import Any, Callable, List, Optional, Sequence

from .._common.locks import HeldLock
from ._hooks import task_name

__all__ = ['CallbackCall', 'CallbackRecorder']


@dataclasses.dataclass
class CallbackCall:
    """One call of a :class:`CallbackRecorder`.

    :ivar code: ``LOCK_STOLEN`` or ``LOCK_IN_DANGER``.
    :ivar lock: the lock object the client passed.
    :ivar thread: the name of the thread the callback ran on.
    :ivar task: the name of the asyncio task it ran in (None outside a task).
    """

    code: str
    lock: Any
    thread: str
    task: Optional[str] = None


class CallbackRecorder:
    """An ``app_callback`` for either lock client that records ``(code, lock, thread)``.

    :param raise_on: codes for which it raises ``RuntimeError`` after recording (the client
        must log that and go on).
    :param action: run as ``action(code, lock)`` after recording (e.g. to stop the work the
        lock protects, or to close the client).

    :attr:`called` is a :class:`threading.Event` set at the first call: callbacks run on the
    client's callback executor, so wait for it (``assert recorder.called.wait(5)``) rather than
    expecting the call to have happened when a heartbeat returns.
    """

    def __init__(self, raise_on: Sequence[str] = (), action: Optional[Callable[[str, Any], Any]] = None) -> None:
        #: Every call so far, oldest first.
        self.calls: List[CallbackCall] = []
        self.raise_on = set(raise_on)
        self.action = action
        self._guard = threading.Lock()
        #: Set at the first call.
        self.called = threading.Event()

    def __call__(self, code: str, lock: HeldLock) -> None:
        with self._guard:
            self.calls.append(CallbackCall(code, lock, threading.current_thread().name, task_name()))
        self.called.set()
        if self.action is not None:
            self.action(code, lock)
        if code in self.raise_on:
            raise RuntimeError(f'callback told to fail on {code}')

    @property
    def codes(self) -> List[str]:
        """The code of each call, in order."""
        with self._guard:
            return [call.code for call in self.calls]
