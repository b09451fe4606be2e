"""What happened, as values: protocols emit events, observers turn them into log lines,
callbacks and metrics.

An :class:`Event` names its :class:`Kind`, the lock's ``key`` (its unique identifier), the lock
object where there is one, and the values its log line and metrics need.
"""
from __future__ import annotations

import dataclasses
import enum
from typing import Any, Mapping

__all__ = ['Event', 'Kind']


class Kind(enum.Enum):
    # acquiring
    ACQUIRED = 'acquired'
    ACQUIRE_ATTEMPT = 'acquire_attempt'
    ACQUIRE_TIMED_OUT = 'acquire_timed_out'
    TAKING_OVER = 'taking_over'
    UNFENCED_HOLDER = 'unfenced_holder'
    NOT_A_LOCK = 'not_a_lock'
    WAITING = 'waiting'
    ORPHAN_CLEANUP_FAILED = 'orphan_cleanup_failed'
    ORPHAN_UNVERIFIED = 'orphan_unverified'
    REPLACED_RELEASED = 'replaced_released'
    REPLACED_LOST = 'replaced_lost'
    # releasing
    RELEASED = 'released'
    RELEASE_ROW_GONE = 'release_row_gone'
    RELEASE_MET_NEXT_HOLDER = 'release_met_next_holder'
    RELEASE_STOLEN = 'release_stolen'
    RELEASE_FAILED_FORGOTTEN = 'release_failed_forgotten'
    RELEASE_FAILED = 'release_failed'
    RELEASE_SKIPPED = 'release_skipped'
    RELEASE_NOT_OWNED = 'release_not_owned'
    RELEASE_INTERRUPTED = 'release_interrupted'
    # heartbeats
    RENEWED = 'renewed'
    RENEWAL_LANDED_UNANSWERED = 'renewal_landed_unanswered'
    RENEWAL_ADOPTED_EARLIER = 'renewal_adopted_earlier'
    RECOVERED = 'recovered'
    RENEWAL_FAILED = 'renewal_failed'
    STOLEN = 'stolen'
    RELEASED_BY_LOST_ANSWER = 'released_by_lost_answer'
    SETTLE_FAILED = 'settle_failed'
    IN_DANGER = 'in_danger'
    ROUND_OVERRUN = 'round_overrun'
    HEARTBEATS_BEHIND = 'heartbeats_behind'
    HEARTBEAT_IN_FLIGHT = 'heartbeat_in_flight'
    BATCHING_UNAVAILABLE = 'batching_unavailable'
    HEARTBEAT_TASK_FAILED = 'heartbeat_task_failed'
    LOOP_STARTED = 'loop_started'
    LOOP_STOPPED = 'loop_stopped'
    LOOP_ROUND_FAILED = 'loop_round_failed'
    # client sessions
    SESSION_STARTED = 'session_started'
    SESSION_RENEWED = 'session_renewed'
    SESSION_RENEWAL_FAILED = 'session_renewal_failed'
    SESSION_LOST = 'session_lost'
    SESSION_ENDED = 'session_ended'
    # guarded writes
    GUARD_RETRY = 'guard_retry'
    # operator
    FORCE_RELEASED = 'force_released'


@dataclasses.dataclass(frozen=True)
class Event:
    kind: Kind
    key: str = ''
    lock: Any = None
    fields: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    def __getitem__(self, name: str) -> Any:
        return self.fields[name]
