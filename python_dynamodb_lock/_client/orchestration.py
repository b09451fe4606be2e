"""One client's orchestration: its state and its feature parts, made together, and what a
driver needs of them (the :class:`~python_dynamodb_lock._drivers.steps.Host` it serves).
"""
from __future__ import annotations

from typing import Any, Callable, ContextManager, Generic, Mapping

from .._core.effects import Emit, Unregister
from .acquiring import Acquiring
from .context import ClientState, L
from .listing import Listing
from .releasing import Releasing
from .renewing import Renewing
from .sessions import Sessions
from .several_keys import SeveralKeys

__all__ = ['Orchestration']


class Orchestration(Generic[L]):
    """The parts of one client's orchestration (see the module docstring); ``guard`` makes the
    mutexes of what its threads share."""

    def __init__(self, state: ClientState[L], guard: Callable[[], ContextManager[Any]]) -> None:
        self.state = state
        self.sessions = Sessions(state)
        self.releasing = Releasing(state)
        self.acquiring: Acquiring[L] = Acquiring(state, self.sessions, self.releasing)
        self.several: SeveralKeys[L] = SeveralKeys(state, self.sessions, self.acquiring, self.releasing)
        self.renewing = Renewing(state, guard)
        self.listing = Listing(state)
        # What a driver needs (its Host).
        self.clock = state.clock
        self.owner_name = state.owner_name
        observer = state.observer
        self.local: Mapping[type, Callable[[Any], Any]] = {
            Emit: lambda effect: observer.emit(effect.event),
            Unregister: lambda effect: state.unregister(effect.lock),
        }
        self.public_error = state.public_error
        self.take_due = self.renewing.take_due
        self.done_with = self.renewing.done_with
        self.renewals = self.renewing.renewing
        self.heartbeat_round = self.renewing.heartbeat_round
        self.checker_round = self.renewing.checker_round
