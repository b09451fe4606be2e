"""The faults a simulation injects, chosen by the seed at effect boundaries (first slice):

* a write that lands but whose answer is lost (the caller gets botocore's
  ``ReadTimeoutError``, which the core judges "maybe applied");
* throttling (``ProvisionedThroughputExceededException`` on the first attempt: not applied);
* an HTTP 500 (``InternalServerError``), the request applied or not (the seed says which);
* a client paused past its lease (a GC pause: none of its tasks is scheduled for a while).
"""
from __future__ import annotations

import dataclasses
from typing import Any, Optional

from .transport import LOST, SERVER_ERROR, SERVER_ERROR_APPLIED, THROTTLED, WRITES

__all__ = ['FaultPlan', 'Faults']


@dataclasses.dataclass(frozen=True)
class FaultPlan:
    """How often each fault strikes: per call (``lost_answer``, ``throttle``, ``server_error``), per step
    (``pause``); a pause lasts from ``pause_min`` to ``pause_max`` global seconds."""

    lost_answer: float = 0.03
    throttle: float = 0.03
    server_error: float = 0.02
    pause: float = 0.002
    pause_min: float = 2.0
    pause_max: float = 12.0
    cancel: float = 0.01         # per step: an asyncio client's task is cancelled (interruptions.py)
    cancel_again: float = 0.3    # a cancelled task is cancelled again at its next suspension point
    cancel_at_yield: float = 0.05   # per suspension point of an asyncio task: cancelled while it waits there


class Faults:
    """Draws the faults of one run from the scheduler's generator (see the module docstring)."""

    def __init__(self, plan: FaultPlan) -> None:
        self.plan = plan
        self.lost = 0
        self.throttled = 0
        self.server_errors = 0
        self.pauses = 0

    def for_call(self, scheduler: Any, task: Any, request: Any) -> Optional[str]:
        rng = scheduler.rng
        if request.operation in WRITES and rng.chance(self.plan.lost_answer):
            self.lost += 1
            return LOST
        if rng.chance(self.plan.throttle):
            self.throttled += 1
            return THROTTLED
        if rng.chance(self.plan.server_error):
            self.server_errors += 1
            return SERVER_ERROR_APPLIED if rng.chance(0.5) else SERVER_ERROR
        return None

    def at_boundary(self, scheduler: Any, task: Any) -> bool:
        """Maybe pause the client of the task about to run: True when it was (the task then
        does not run yet)."""
        rng = scheduler.rng
        if rng.chance(self.plan.pause):
            client = task.client
            seconds = rng.uniform(self.plan.pause_min, self.plan.pause_max)
            client.paused_until = scheduler.world.now + seconds
            self.pauses += 1
            scheduler.note(f'fault: {client.name} paused for {seconds:.6f}s')
            return True
        return False
