"""Interruptions in the simulation: the cancellations the seed deals the asyncio clients' tasks
(:class:`Interruptions`, wrapped around the run's other faults), and the invariants that judge
what an interruption leaves once the system settles (:class:`SettlingChecker`):

* **nothing held that no caller was handed**: once every task has ended, no row of the table is
  held with a fencing token no caller was handed, unless its client said it could not free it
  (``ORPHAN_UNVERIFIED``, ``ORPHAN_CLEANUP_FAILED``, or a failed release of a lock its caller
  was not handed: the give-up is one best-effort release), or the write landed after its client
  began to close (the undo's watch then ends after one last look: docs/interruptions.rst); and
  no client still registers a lock no caller was handed;
* **no lock renewed that no caller holds**: a lock whose acquisition ended without handing it to
  its caller is not renewed once its give-up had time to finish (two leases);
* and the invariants of :class:`~.invariants.Checker` (no false ``LOCK_STOLEN`` among them),
  checked after every step as before.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Set, Tuple

from ..._core.effects import Emit
from ..._core.events import Event, Kind
from ..._common.locks import HeldLock, holder_of
from ..._wire.requests import Request
from .chance import SplitMix64
from .clients import SimulatedClient
from .faults import Faults
from .invariants import Checker, Tenure, Violation
from .clock import World
from .scheduler import Scheduler, Task
from .settling import settled
from .transport import SimulatedTransport
from .tasks_protocol import AsyncioClient, AsyncioSemantics

__all__ = ['Interruptions', 'SettlingChecker']

_RENEWALS = frozenset({Kind.RENEWED, Kind.RENEWAL_LANDED_UNANSWERED, Kind.RENEWAL_ADOPTED_EARLIER, Kind.RECOVERED})
_ORPHANS = frozenset({Kind.ORPHAN_UNVERIFIED, Kind.ORPHAN_CLEANUP_FAILED})
_FAILED_RELEASES = frozenset({Kind.RELEASE_FAILED, Kind.RELEASE_FAILED_FORGOTTEN})


class Interruptions:
    """The run's faults (``faults``: calls and pauses, as before), and the cancellation of an
    application task of an asyncio client: at every step with chance ``cancel``, one of them,
    chosen by the seed; at each suspension point of an application task, with chance
    ``cancel_at_yield``, while it waits there (a call on the wire, a mutex...); a cancelled
    task is cancelled again at its next suspension point with chance ``cancel_again``
    (``asyncio.wait_for`` and task groups cancel twice)."""

    def __init__(self, faults: Faults, cancel: float, cancel_again: float, cancel_at_yield: float) -> None:
        self.faults = faults
        self.cancel = cancel
        self.cancel_again = cancel_again
        self.cancel_at_yield = cancel_at_yield
        self.semantics: Optional[AsyncioSemantics] = None
        self.clients: List[AsyncioClient] = []

    def attach(self, scheduler: Scheduler, world: World) -> None:
        """Serve ``scheduler``'s asyncio clients (their effects, their cancellations)."""
        self.semantics = AsyncioSemantics(scheduler, world, self.cancel_again, self.cancel_at_yield)

    def enlist(self, client: AsyncioClient) -> None:
        """``client`` is one of the asyncio clients."""
        assert self.semantics is not None
        client.semantics = self.semantics
        self.clients.append(client)

    def for_call(self, scheduler: Scheduler, task: Task, request: Request) -> Optional[str]:
        fault: Optional[str] = self.faults.for_call(scheduler, task, request)
        return fault

    def latency(self, rng: SplitMix64, latency: float) -> float:
        """How long the answer of the call just sent takes to arrive (the inner faults decide)."""
        return float(self.faults.latency(rng, latency))

    def landed_after_close(self) -> List[str]:
        """The keys of the writes that landed after their client began to close."""
        return [] if self.semantics is None else [key for _, key in self.semantics.landed_after_close]

    def at_boundary(self, scheduler: Scheduler, task: Task) -> bool:
        semantics = self.semantics
        if semantics is None or not self.clients:
            return bool(self.faults.at_boundary(scheduler, task))
        while semantics.soon:
            semantics.cancel(semantics.soon.pop(0))
        if task.client is semantics.network:
            return False     # the wire is never paused
        if self.cancel and scheduler.rng.chance(self.cancel):
            tasks = [each for each in scheduler.tasks if isinstance(each.client, AsyncioClient)
                     and each.protocol is not None and '/caller' in each.name]
            if tasks:
                semantics.cancel(tasks[scheduler.rng.below(len(tasks))])
        return bool(self.faults.at_boundary(scheduler, task))


class SettlingChecker(Checker):
    """:class:`~.invariants.Checker`, and what an interruption may leave (see the module docstring)."""

    def __init__(self, world: World, max_rate: float, transport: Optional[SimulatedTransport] = None) -> None:
        super().__init__(world, max_rate, transport)
        self._handed: Dict[int, Any] = {}        # the lock objects handed to callers, by id
        self._adopted: List[Any] = []            # acquired, not yet handed or refused
        self._refused: Dict[int, Tuple[Any, float]] = {}
        self._orphans: Set[str] = set()

    def acquired(self, client: SimulatedClient, lock: HeldLock) -> Tenure:
        tenure = super().acquired(client, lock)
        self._handed[id(lock)] = lock
        return tenure

    def not_handed(self, client: SimulatedClient, holder: object) -> None:
        """An acquisition of ``holder`` ended without handing it a lock: what it adopted is refused."""
        kept = []
        for lock in self._adopted:
            if holder_of(lock) is holder and id(lock) not in self._handed:
                self._refused[id(lock)] = (lock, self.world.now)
            elif id(lock) not in self._handed:
                kept.append(lock)
        self._adopted = kept

    def watch(self, client: SimulatedClient) -> None:
        """See the events ``client``'s orchestration reports itself (``ClientState.emit``, not a
        protocol's ``Emit`` effect, which the scheduler records and hands to :meth:`event`):
        record them in the trace and hand them to :meth:`event` too (once: an ``Emit`` effect
        passes here flagged); and note acquisitions and failed releases."""
        host = client.orchestration
        observer = host.state.observer
        report = observer.emit
        scheduler = client.scheduler
        performing = [False]    # an Emit effect is being performed (the scheduler recorded it)

        def emit(event: Event) -> None:
            if event.kind is Kind.ACQUIRED and event.lock is not None:
                self._adopted.append(event.lock)
            elif event.kind in _FAILED_RELEASES and event.lock is not None and id(event.lock) not in self._handed:
                self._orphans.add(event.key)     # the client said it could not free the row
            if not performing[0]:
                scheduler.note(f'event {event.kind.value} {event.key}')
                client.observe(event, scheduler.world.now)
            report(event)
        observer.emit = emit  # type: ignore[method-assign]  # the run's observer also tells the checker
        local_emit = host.local[Emit]

        def emit_effect(effect: Emit) -> Any:
            performing[0] = True
            try:
                return local_emit(effect)
            finally:
                performing[0] = False
        host.local = {**host.local, Emit: emit_effect}

    def event(self, client: SimulatedClient, event: Event, now: float) -> None:
        super().event(client, event, now)
        kind = event.kind
        if kind in _RENEWALS and event.lock is not None:
            refused = self._refused.get(id(event.lock))
            if refused is not None and now - refused[1] > 2 * refused[0].lease_duration:
                raise Violation(f'{client.name} renewed {event.key} at {now:.6f}, a lock its caller was never handed '
                                f'(the acquisition ended at {refused[1]:.6f} without it)')
        elif kind in _ORPHANS:
            self._orphans.add(event.key)     # the client said it could not free the row

    def settled(self, clients: Sequence[Any], excused: Sequence[str] = ()) -> None:
        """Once every task has ended: no lock registered, no row held, that no caller was handed
        (but at the keys ``excused``, where a write landed after its client began to close, and
        where a client said it could not free the row), and every loss reported
        (:func:`~.settling.settled`)."""
        for client in clients:
            if getattr(client, 'dead', False):
                continue     # what it held is taken over after its lease (the liveness probe checks)
            for lock in client.orchestration.state.registry.held():
                if id(lock) not in self._handed:
                    raise Violation(f'{client.name} still keeps {lock.unique_identifier} (token {lock.fencing_token}) '
                                    'once everything settled, a lock no caller was handed')
        settled(self, clients, set(excused) | self._orphans)
