"""Two renewals of one client's session in flight at once: the heartbeat's and ``lock.extend()``'s
(simulation sim29a, ``Workload(extend_in_session=True)``, seed 7). Whichever lands first, the
other's refusal shows a version of ours: no loss, the refused one is sent again from that
version, and a late answer never takes the session's version back. Protocol steps, answers
scripted, the two protocols interleaved by hand."""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from test_core_protocol import FakeClock
from test_core_sessions import SETTINGS, FakeLock, session_row, started_session
from python_dynamodb_lock._core.answers import Applied, Refused
from python_dynamodb_lock._core.effects import Call, Emit, Unregister
from python_dynamodb_lock._core.events import Kind
from python_dynamodb_lock._core.session import extend_session, session_round
from python_dynamodb_lock._core.state import Status


class Stepped:
    """One protocol, stepped by hand: each ``answer`` runs it to its next call (or its end)."""

    def __init__(self, protocol: Any) -> None:
        self.protocol = protocol
        self.events: List[Kind] = []
        self.unregistered: List[Any] = []
        self.done = False
        self.error: Optional[BaseException] = None
        self.call: Optional[Call] = None
        self.answer(None)

    def answer(self, value: Any) -> None:
        while True:
            try:
                effect = self.protocol.send(value)
            except StopIteration:
                self.done, self.call = True, None
                return
            except Exception as error:      # noqa: BLE001 - what extend raises is the test's subject
                self.done, self.error, self.call = True, error, None
                return
            value = None
            if isinstance(effect, Call):
                self.call = effect
                return
            if isinstance(effect, Emit):
                self.events.append(effect.event.kind)
            elif isinstance(effect, Unregister):
                self.unregistered.append(effect.lock)
            else:
                raise AssertionError(f'unexpected effect {effect!r}')

    def values(self) -> Dict[str, Any]:
        assert self.call is not None
        return dict(self.call.request.params['ExpressionAttributeValues'])

    def writes(self) -> Tuple[List[str], str]:
        values = self.values()
        return [value for name, value in values.items() if name.startswith(':expected')], values[':new_version']


def test_an_extend_beside_a_heartbeat_that_lands_first_is_sent_again_and_loses_nothing() -> None:
    clock = FakeClock()
    session = started_session(clock)
    lock = FakeLock('k', session, clock)
    (v0,) = session.expected()
    heartbeat = Stepped(session_round(SETTINGS, session, [lock], clock))
    expected, v1 = heartbeat.writes()
    assert expected == [v0]                          # in flight: its answer is late
    clock.now += 1
    extend = Stepped(extend_session(SETTINGS, session, [lock], lock, clock))
    expected, v2 = extend.writes()
    assert expected == [v0]
    extend.answer(Refused(session_row(session.id, v1)))      # the heartbeat's write landed first
    assert not extend.done and extend.writes()[0] == [v1]    # sent again, from the heartbeat's version
    v3 = extend.writes()[1]
    extend.answer(Applied({}))
    assert extend.done and extend.error is None, extend.error
    assert Kind.SESSION_LOST not in extend.events and Kind.STOLEN not in extend.events and not extend.unregistered
    assert lock._state.status == Status.LOCKED
    heartbeat.answer(Applied({}))                    # the late answer of the first write
    assert heartbeat.done and heartbeat.error is None and not heartbeat.unregistered
    assert session.expected() == [v3]                # not taken back to the heartbeat's version
    following = Stepped(session_round(SETTINGS, session, [lock], clock))
    assert following.writes()[0] == [v3]
    following.answer(Applied({}))
    assert lock._state.status == Status.LOCKED


def test_a_heartbeat_refused_by_an_extend_that_landed_first_loses_nothing() -> None:
    clock = FakeClock()
    session = started_session(clock)
    lock = FakeLock('k', session, clock)
    heartbeat = Stepped(session_round(SETTINGS, session, [lock], clock))
    extend = Stepped(extend_session(SETTINGS, session, [lock], lock, clock))
    v2 = extend.writes()[1]
    # The extend's write lands; the heartbeat's refusal comes back first, then the extend's answer.
    heartbeat.answer(Refused(session_row(session.id, v2)))
    assert not heartbeat.done and heartbeat.writes()[0] == [v2]
    extend.answer(Applied({}))
    assert extend.done and extend.error is None
    v3 = heartbeat.writes()[1]
    heartbeat.answer(Applied({}))
    assert heartbeat.done and not heartbeat.unregistered and Kind.SESSION_LOST not in heartbeat.events
    assert lock._state.status == Status.LOCKED and session.expected() == [v3]


def test_a_refusal_by_a_version_that_is_not_ours_still_loses_the_session() -> None:
    clock = FakeClock()
    session = started_session(clock)
    lock = FakeLock('k', session, clock)
    heartbeat = Stepped(session_round(SETTINGS, session, [lock], clock))
    extend = Stepped(extend_session(SETTINGS, session, [lock], lock, clock))
    extend.answer(Refused(session_row(session.id, 'a-waiter-ended-it', released=True)))
    assert extend.done and extend.error is not None
    assert lock._state.status == Status.INVALID and Kind.SESSION_LOST in extend.events
    heartbeat.answer(Refused(session_row('other', 'a-waiter-ended-it', released=True)))
    assert heartbeat.done
