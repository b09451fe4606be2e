"""Client sessions (``session=True``, docs/sessions.rst): the session row written before an
acquisition writes, and ended at ``close()``; its renewal is part of the heartbeat round
(:mod:`.renewing`). The decisions are in :mod:`python_dynamodb_lock._core.session`.
"""
from __future__ import annotations

import dataclasses
from decimal import Decimal
from typing import Any, List, Sequence

from .._core.effects import Protocol
from .._core.session import end_session, ensure_session
from .._core.write import AcquireAttempt
from .._model.schema import COL_LEASE_DURATION, COL_LOCK_SESSION, Item
from .context import ClientState

__all__ = ['Sessions', 'session_template']


def session_template(state: ClientState[Any], item_template: Item) -> Item:
    """A lock row under the client's session: it names the session, with the long row lease."""
    if state.session is None:
        return item_template
    return {**item_template, COL_LOCK_SESSION: state.session.id,
            COL_LEASE_DURATION: Decimal(repr(state.session_settings.row_lease))}


class Sessions:
    """The session of one client (nothing to do for a client without one)."""

    def __init__(self, state: ClientState[Any]) -> None:
        self._state = state

    def starting(self, attempts: Sequence[AcquireAttempt]) -> Protocol[List[AcquireAttempt]]:
        """Before an acquisition of a client with ``session=True`` writes: its session row; the
        attempts, naming that session (a session lost since they were made is replaced)."""
        state = self._state
        if state.session is None:
            return list(attempts)
        session_id = yield from ensure_session(state.session_settings, state.session, state.clock)
        return [attempt if attempt.item_template.get(COL_LOCK_SESSION) == session_id else dataclasses.replace(
            attempt, item_template={**attempt.item_template, COL_LOCK_SESSION: session_id}) for attempt in attempts]

    def ending(self) -> Protocol[None]:
        """At ``close()``, after the locks it releases: end the session if no lock is left under it."""
        state = self._state
        if state.session is not None and not state.forked():
            yield from end_session(state.session_settings, state.session, state.registry.held())
