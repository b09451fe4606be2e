"""Client sessions (``session=True``): one row renewed every heartbeat period keeps all the
client's locks alive (see docs/sessions.rst).

The holder's side: :class:`Session` (the row's id, the version last written, when it was last
confirmed), :func:`ensure_session` (write the row before the first lock names it),
:func:`session_round` (renew it; confirm every lock under it, or lose them all at once),
:func:`due_for_refresh` (which lock rows get their slow refresh), :func:`end_session`.

The waiter's side: :func:`watch_session` (is the session of the row in the way alive, over, or
unchanged for its lease?). The takeover itself is a write of ``_core/acquire.py``.
"""
from __future__ import annotations

import contextlib
import dataclasses
import uuid
from typing import Any, ContextManager, Dict, List, Mapping, Optional, Sequence, Tuple

from .._model.errors import DynamoDBLockError, Reason
from .._wire.requests import get
from .._wire.sessions import session_end, session_renew, session_start
from .._model.schema import COL_RECORD_VERSION_NUMBER, NO_SORT_KEY, SESSION_PREFIX, Item, Schema
from .answers import Answer, Applied, Failed, Refused
from .effects import Call, Emit, Protocol, Unregister
from .events import Event, Kind
from .heartbeat import not_extended, send_renewal
from .messages import explain
from .state import FirstSeen, LockView, Loss, Status, TimeSource

__all__ = ['SESSION_REFRESHES', 'Session', 'SessionSettings', 'SessionWatch', 'due_for_refresh', 'end_session',
           'ensure_session', 'extend_session', 'session_id_for', 'session_round', 'watch_session']

#: A lock row under a session is refreshed this many times per row lease (its stored lease).
SESSION_REFRESHES = 3
# Versions of renewals whose answer was lost, remembered to recognise our own row.
_MAX_UNCONFIRMED = 20


@dataclasses.dataclass(frozen=True)
class SessionSettings:
    schema: Schema
    owner_name: str
    lease: float        # the session lease: the client's lease_duration
    row_lease: float    # the lease stored in lock rows held under the session
    expiry_period: float


def session_id_for(owner_name: str) -> str:
    """A new session's row key: the prefix, the owner name and a random part."""
    return f'{SESSION_PREFIX}{owner_name}/{uuid.uuid4().hex}'


class Session:
    """The holder's view of its session. Its fields change only under its guard."""

    def __init__(self, owner_name: str, guard: Optional[ContextManager[Any]] = None) -> None:
        self._owner_name = owner_name
        self._guard: ContextManager[Any] = guard if guard is not None else contextlib.nullcontext()
        self.id = session_id_for(owner_name)
        self.version: Optional[str] = None           # None: the row is not written (yet)
        self.unconfirmed: List[str] = []
        self.confirmed_at: Optional[float] = None    # monotonic send time of the last confirmed write
        # Renewals sent and not answered yet ({version: their place in the order sent}), and the
        # place of the latest confirmed one: a late answer never takes the version back.
        self._in_flight: Dict[str, int] = {}
        self._sent = 0
        self._confirmed = 0

    def started(self, session_id: str, version: str, sent_at: float) -> None:
        with self._guard:
            if session_id != self.id:
                return
            if self.version is None:
                self.version = version
            self.confirmed_at = sent_at if self.confirmed_at is None else min(self.confirmed_at, sent_at)

    def expected(self) -> List[str]:
        with self._guard:
            return [] if self.version is None else [self.version, *self.unconfirmed[-(_MAX_UNCONFIRMED - 1):]]

    def sending(self, version: str) -> int:
        """A renewal writing ``version`` is about to be sent: its place in the order sent."""
        with self._guard:
            self._sent += 1
            self._in_flight[version] = self._sent
            return self._sent

    def answered(self, version: str) -> None:
        """The renewal that wrote ``version`` was answered (or cut short)."""
        with self._guard:
            self._in_flight.pop(version, None)

    def renewed(self, session_id: str, version: str, sent_at: float, sent: Optional[int] = None) -> None:
        """A renewal (``sent``: its place in the order sent) was confirmed. Of two renewals that
        both landed, the later sent landed later (each names only versions written before it
        was sent), so the answer of an earlier one, arriving late, keeps the version."""
        with self._guard:
            if session_id != self.id:
                return
            self.confirmed_at = max(self.confirmed_at or sent_at, sent_at)
            if sent is not None and sent < self._confirmed:
                return
            self.version, self.unconfirmed = version, []
            self._confirmed = max(self._confirmed, sent or 0)

    def remember(self, version: str) -> None:
        with self._guard:
            self.unconfirmed = [*self.unconfirmed[-(_MAX_UNCONFIRMED - 1):], version]

    def adopt(self, session_id: str, version: str) -> bool:
        """The row carries a version of ours: the one last confirmed, a renewal whose answer was
        lost, or one still in flight (another renewal of this client, sent beside this one, that
        landed first): take its version (True). False when it is none of ours."""
        with self._guard:
            if session_id != self.id:
                return False
            if version == self.version:
                return True
            if version in self._in_flight:
                self._confirmed = max(self._confirmed, self._in_flight[version])
            elif version not in self.unconfirmed:
                return False
            self.version, self.unconfirmed = version, []
            return True

    def lose(self, session_id: str) -> bool:
        """The session was found ended: start afresh (a new id) at the next acquisition. False
        when that already happened."""
        with self._guard:
            if session_id != self.id:
                return False
            self.id = session_id_for(self._owner_name)
            self.version, self.unconfirmed, self.confirmed_at = None, [], None
            return True


def ensure_session(settings: SessionSettings, session: Session, clock: TimeSource) -> Protocol[str]:
    """Write the session row if it is not written yet; the session's id.

    The id is new for every session, so a row already there is our own write (one whose answer
    was lost, or a concurrent acquisition's): its version is adopted, counted from the first
    attempt (a waiter may have watched it since then), unless it is marked ended.

    :raises DynamoDBLockError: ``UNKNOWN`` when the row cannot be written.
    """
    session_id = session.id
    if session.expected():
        return session_id
    schema = settings.schema
    sent_at = clock.monotonic()
    version = str(uuid.uuid4())
    answer = yield Call(session_start(schema, session_id, settings.owner_name, settings.lease, version,
                                      int(clock.time() + settings.expiry_period)))
    row: Optional[Mapping[str, Any]] = None
    if isinstance(answer, Applied):
        row = {COL_RECORD_VERSION_NUMBER: version}
    elif isinstance(answer, Refused):
        row = answer.item
    if row is None or Schema.is_released(row) or Schema.version_of(row) is None:
        error = answer.error if isinstance(answer, Failed) else None
        raise DynamoDBLockError(
            DynamoDBLockError.UNKNOWN,
            f'Could not start the lock client session {session_id}: '
            f'{explain(schema, error) if error is not None else "its row was ended meanwhile"}',
            reason=answer.reason if isinstance(answer, Failed) else Reason.OTHER) from error
    session.started(session_id, str(Schema.version_of(row)), sent_at)
    yield Emit(Event(Kind.SESSION_STARTED, fields={'owner': settings.owner_name, 'session': session_id}))
    return session_id


def session_round(settings: SessionSettings, session: Session, locks: Sequence[Any],
                  clock: TimeSource) -> Protocol[Optional[Failed]]:
    """Renew the session (one write). Confirmed: every lock held under it is confirmed too.
    Refused (the row ended, deleted, or written by a waiter): every lock under it is lost at
    once (``LOCK_STOLEN``, reason ``SESSION_LOST``). Failed (returned): nothing changes; the
    checker flags the locks IN_DANGER once no renewal was confirmed for the safe period.

    A refusal by a row that carries a version of ours (another renewal of this client sent
    beside this one - a heartbeat beside ``lock.extend()`` - that landed first, or one whose
    answer was lost) is no loss: the renewal is sent again, conditioned on that version, so
    that the session is renewed from now (up to ``_OUR_REFUSALS`` times; then the row is left
    as our last renewal wrote it)."""
    session_id = session.id
    for _ in range(_OUR_REFUSALS):
        expected = session.expected()
        if not expected or session.id != session_id:
            return None     # no session row yet (no lock acquired since the last session was lost)
        answer, new_version, sent, sent_at = yield from _send(settings, session, session_id, expected, clock)
        under = [lock for lock in locks if lock._state.session_id == session_id]
        landed = isinstance(answer, Refused) and Schema.version_of(answer.item) == new_version   # botocore's retry
        if isinstance(answer, Applied) or landed:
            session.renewed(session_id, new_version, sent_at, sent)
            yield Emit(Event(Kind.SESSION_RENEWED, fields={'session': session_id, 'version': new_version}))
            for lock in under:
                if lock._state.session_confirmed(sent_at):
                    yield Emit(Event(Kind.RECOVERED, lock.unique_identifier, lock))
            return None
        if isinstance(answer, Failed):
            if answer.maybe_applied:
                session.remember(new_version)
            yield Emit(Event(Kind.SESSION_RENEWAL_FAILED, fields={'session': session_id,
                                                                 'error': explain(settings.schema, answer.error)}))
            return answer
        assert isinstance(answer, Refused)
        if Schema.is_released(answer.item) or not session.adopt(session_id, str(Schema.version_of(answer.item))):
            yield from _lose(session, session_id, under, answer.item)
            return None
    return None     # renewals of ours kept landing first: the session is alive, renewed by them


#: How many times a session renewal refused by a row of ours (a renewal of ours that landed
#: first) is sent again.
_OUR_REFUSALS = 3


def _send(settings: SessionSettings, session: Session, session_id: str, expected: List[str],
          clock: TimeSource) -> Protocol[Tuple[Answer, str, int, float]]:
    """Send one session renewal, noted in flight until it is answered: (the answer, the version
    it writes, its place in the order sent, when it was sent)."""
    new_version = str(uuid.uuid4())
    sent_at = clock.monotonic()
    sent = session.sending(new_version)
    request = session_renew(settings.schema, session_id, expected, new_version,
                            int(clock.time() + settings.expiry_period))
    try:
        answer, _ = yield from send_renewal(request, clock, lambda: session.remember(new_version))
    finally:
        session.answered(new_version)
    return answer, new_version, sent, sent_at


def extend_session(settings: SessionSettings, session: Session, locks: Sequence[Any], lock: LockView,
                   clock: TimeSource) -> Protocol[None]:
    """``lock.extend()`` of a lock held under the session: renew the session now (every lock
    under it with it), and raise as ``extend`` does when ``lock`` was not renewed."""
    failure = yield from session_round(settings, session, locks, clock)
    if lock._state.held and failure is None:
        return
    raise not_extended(settings.schema, lock, failure)


def _lose(session: Session, session_id: str, locks: Sequence[Any], row: Optional[Item]) -> Protocol[None]:
    if not session.lose(session_id):
        return
    owner = 'a waiter that ended it' if row else 'nobody (its row is gone)'
    yield Emit(Event(Kind.SESSION_LOST, fields={'session': session_id, 'owner': owner, 'count': len(locks)}))
    for lock in locks:
        if not lock._state.held:
            continue
        lock._state.forget(Status.INVALID, Loss(Reason.SESSION_LOST, None))
        yield Unregister(lock)
        yield Emit(Event(Kind.STOLEN, lock.unique_identifier, lock, {
            'owner': f'{owner} (session lost)', 'reason': Reason.SESSION_LOST}))


def due_for_refresh(settings: SessionSettings, locks: Sequence[Any], now: float) -> List[Any]:
    """The held locks whose row is renewed this period: every lock not held under a session,
    and those under one whose row was last refreshed a ``SESSION_REFRESHES``-th of its row
    lease ago (or earlier), and not already planned since (a refresh of the previous period
    still in flight: see :meth:`LockState.plan_row_refresh`, which marks those returned as
    planned)."""
    every = settings.row_lease / SESSION_REFRESHES
    return [lock for lock in locks
            if lock._state.session_id is None or lock._state.plan_row_refresh(now, every)]


def end_session(settings: SessionSettings, session: Session, locks: Sequence[Any]) -> Protocol[None]:
    """At ``close()``: delete the session row when no lock is held under it any more (best
    effort). A client that leaves locks behind leaves its session too: it is not renewed, and
    waiters take those locks over after the session lease."""
    session_id = session.id
    expected = session.expected()
    if not expected or any(lock._state.session_id == session_id and lock._state.held for lock in locks):
        return
    answer = yield Call(session_end(settings.schema, session_id, expected))
    session.lose(session_id)
    if isinstance(answer, Failed):
        yield Emit(Event(Kind.SESSION_RENEWAL_FAILED, fields={'session': session_id,
                                                             'error': explain(settings.schema, answer.error)}))
        return
    yield Emit(Event(Kind.SESSION_ENDED, fields={'session': session_id}))


@dataclasses.dataclass(frozen=True)
class SessionWatch:
    """What a waiter concludes about the session of the row in its way: ``over`` (ended or
    gone: take the lock with a plain conditional write), or ``expired_version`` (unchanged for
    its lease: take the lock in one transaction that also ends the session); neither: wait."""

    session_id: str
    over: bool = False
    expired_version: Optional[str] = None


def watch_session(schema: Schema, session_id: str, observations: FirstSeen, clock: TimeSource,
                  default_lease: float) -> Protocol[SessionWatch]:
    """Read the session row (consistently) and judge it, timing its version on this client's
    clock from when it was first seen (``observations``, the client's memory, under the key
    ``session|<id>``).

    :raises DynamoDBLockError: ``UNKNOWN`` when the read fails.
    """
    answer = yield Call(get(schema, session_id, NO_SORT_KEY))
    if not isinstance(answer, Applied):
        assert isinstance(answer, Failed), answer
        raise DynamoDBLockError(DynamoDBLockError.UNKNOWN, f'Could not read the session {session_id} of the lock in '
                                f'the way: {explain(schema, answer.error)}', reason=answer.reason) from answer.error
    row = answer.response.get('Item')
    if not row or Schema.is_released(row):
        return SessionWatch(session_id, over=True)
    version = Schema.version_of(row)
    now = clock.monotonic()
    since = observations.first_seen('session|' + session_id, version, now)
    if version is not None and now - since >= schema.lease_of(row, default_lease):
        return SessionWatch(session_id, expired_version=version)
    return SessionWatch(session_id)
