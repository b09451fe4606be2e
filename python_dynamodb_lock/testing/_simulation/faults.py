"""The faults a simulation injects, chosen by the seed at effect boundaries (first slice):

* a write that lands but whose answer is lost (the caller gets botocore's
  ``ReadTimeoutError``, which the core judges "maybe applied");
* throttling (``ProvisionedThroughputExceededException`` on the first attempt: not applied);
* an HTTP 500 (``InternalServerError``), the request applied or not (the seed says which);
* a client paused past its lease (a GC pause: none of its tasks is scheduled for a while);
* a request that never arrives (the caller gets the read timeout; nothing was applied);
* a request that arrives late: the caller gets the read timeout at once, and the request lands
  later (up to ``late_max`` seconds), when the caller may have judged, undone or retried it;
* an answer that arrives late (applied now, answered up to ``late_max`` seconds later: after
  the answers of requests sent after it);
* a client that dies: none of its tasks runs again (its rows are taken over after their lease);
* ``close()`` called by another thread while the client's tasks are anywhere (the threaded
  protocol's interruption by close: waits end, acquisitions under way give up what they wrote).
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Dict, Optional

from ..._core.effects import Emit
from ..._wire.requests import Request
from .chance import SplitMix64
from .scheduler import Idle, Script
from .transport import LOST, LOST_REQUEST, SERVER_ERROR, SERVER_ERROR_APPLIED, THROTTLED, WRITES, SimulatedTransport

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
    lost_request: float = 0.01
    late_request: float = 0.01
    late_answer: float = 0.02
    late_max: float = 3.0
    die: float = 0.0004           # per step, until ``max_deaths`` clients died
    max_deaths: int = 1
    close: float = 0.0004         # per step: another thread closes the client (close() at any yield)
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
        self.lost_requests = 0
        self.late = 0
        self.deaths = 0
        self.closes = 0
        self.on_death: Optional[Callable[[Any], None]] = None
        #: Told the rows (``lock_key|sort_key`` and owner) a late request wrote when it landed.
        self.on_landing: Optional[Callable[[str, Optional[str]], None]] = None
        self._late_answer = False

    def for_call(self, scheduler: Any, task: Any, request: Any) -> Optional[str]:
        rng = scheduler.rng
        plan = self.plan
        self._late_answer = False
        if request.operation in WRITES and rng.chance(plan.lost_answer):
            self.lost += 1
            return LOST
        if not _widened(task.client):    # the faults below: threaded-protocol clients only
            return self._common(rng)
        if rng.chance(plan.lost_request):
            self.lost_requests += 1
            return LOST_REQUEST
        if request.operation in WRITES and rng.chance(plan.late_request):
            self.late += 1
            delay = rng.uniform(0.0, plan.late_max)
            transport = task.client.transport
            scheduler.spawn(_NETWORK, f'net/late#{self.late}', _deliver(transport, request, delay, self.on_landing))
            scheduler.note(f'fault: the request lands {delay:.6f}s later')
            return LOST_REQUEST
        if rng.chance(plan.late_answer):
            self._late_answer = True
            scheduler.note('fault: its answer arrives late')
        return self._common(rng)

    def _common(self, rng: SplitMix64) -> Optional[str]:
        """Throttling and HTTP 500s, dealt to every client."""
        if rng.chance(self.plan.throttle):
            self.throttled += 1
            return THROTTLED
        if rng.chance(self.plan.server_error):
            self.server_errors += 1
            return SERVER_ERROR_APPLIED if rng.chance(0.5) else SERVER_ERROR
        return None

    def latency(self, rng: SplitMix64, latency: float) -> float:
        """How long the answer of the call just sent takes to arrive."""
        if self._late_answer:
            self._late_answer = False
            self.late += 1
            return float(rng.uniform(latency, self.plan.late_max))
        return float(rng.uniform(0.0, latency))

    def at_boundary(self, scheduler: Any, task: Any) -> bool:
        """Maybe pause the client of the task about to run: True when it was (the task then
        does not run yet)."""
        rng = scheduler.rng
        client = task.client
        if _widened(client) and self.deaths < self.plan.max_deaths and rng.chance(self.plan.die):
            self.deaths += 1
            client.dead = True
            client.paused_until = float('inf')
            scheduler.note(f'fault: {client.name} dies')
            if self.on_death is not None:
                self.on_death(client)
            return True
        if _widened(client) and rng.chance(self.plan.close) and not client.orchestration.state.closed:
            scheduler.note(f'fault: {client.name} closed by another thread')
            client.orchestration.releasing.begin_close()
            self.closes += 1
        if client is not _NETWORK and rng.chance(self.plan.pause):
            seconds = rng.uniform(self.plan.pause_min, self.plan.pause_max)
            client.paused_until = scheduler.world.now + seconds
            self.pauses += 1
            scheduler.note(f'fault: {client.name} paused for {seconds:.6f}s')
            return True
        return False


def _widened(client: Any) -> bool:
    """Whether ``client`` gets the faults sim29a added (lost and late requests, late answers,
    death, close() by another thread): the threaded-protocol clients (``SimulatedClient.widened``);
    the asyncio-protocol and published-style ones do not yet (docs/testing.rst, "Not yet simulated")."""
    return bool(getattr(client, 'widened', False))


class _Network:
    """The pseudo-client of the requests in flight on the network (never paused, never dies)."""

    name = 'net'
    paused_until = 0.0
    dead = False

    class clock:   # noqa: N801 - the seconds of the network are the global ones
        @staticmethod
        def global_seconds(seconds: float) -> float:
            return seconds

    class orchestration:   # noqa: N801 - what the scheduler reads of a client's orchestration
        local: Dict[type, Callable[[Any], Any]] = {Emit: lambda effect: None}


_NETWORK = _Network()


def _deliver(transport: SimulatedTransport, request: Request, delay: float,
             landed: Optional[Callable[[str, Optional[str]], None]]) -> Script:
    """A late request: it lands ``delay`` seconds from now (its answer is lost); ``landed`` is
    told each row it changed."""
    yield Idle(delay)
    before = _rows(transport)
    transport.send(request)
    for key, row in _rows(transport).items():
        if landed is not None and before.get(key) != row:
            landed(key, row.get('owner_name', {}).get('S'))


def _rows(transport: SimulatedTransport) -> Dict[str, Any]:
    return {f"{item['lock_key']['S']}|{item['sort_key']['S']}": item for item in transport.table.items()}
