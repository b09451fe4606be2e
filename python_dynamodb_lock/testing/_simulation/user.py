"""A user's own code under the simulation: a *script* (a generator function) that takes a
:class:`SimulatedCaller` - one simulated lock client's acquire and release calls, and its clock
- and yields what they return, instead of calling a real client and blocking.

Every simulated client runs the script in place of the built-in caller (``clients.caller``);
``lock = yield caller.acquire_lock('k')`` runs the real acquisition of the real orchestration
under the seeded scheduler and sends back the lock (or raises the ``DynamoDBLockError`` the
client would raise, at the ``yield``); ``yield caller.sleep(2.0)`` lets simulated time pass
(the script's own work). The invariants are checked all along, and whatever the script raises
(an ``AssertionError`` of its own included) fails the run with the seed and the trace.

The seam is this small on purpose: one thread's blocking calls become yields, nothing else
changes; the lock objects handed back are the real ones (``fencing_token``,
``record_version_number``, ``status``, ...).
"""
from __future__ import annotations

import datetime
from typing import TYPE_CHECKING, Any, Callable, Dict, Generator, Mapping, Optional, Union

from ..._client.call import acquire_call
from ..._model.errors import DynamoDBLockError
from .chance import SplitMix64
from .scheduler import Idle, Outcome, Run, Script

if TYPE_CHECKING:
    from .clients import SimulatedClient, SimulatedLock
    from .invariants import Tenure

__all__ = ['Command', 'SimulatedCaller', 'UserScript', 'user_caller']

#: What a user's script yields; it is sent back what the call returns.
Returned = Union['SimulatedLock', bool, None]


class Command:
    """One call of a :class:`SimulatedCaller`, to be yielded by the script."""

    def __init__(self, describe: str, perform: Callable[[], Generator[Union[Run, Idle], Outcome, Returned]]) -> None:
        self.describe = describe
        self.perform = perform

    def __repr__(self) -> str:
        return f'Command({self.describe})'


#: A user's script: called once per simulated client, with that client's caller.
UserScript = Callable[['SimulatedCaller'], Generator[Command, Returned, None]]


class SimulatedCaller:
    """One simulated client's calls, for a user's script: yield what they return (see the module
    docstring). ``name`` is the client's owner name (``c1``, ``c2``, ...); ``rng`` its own
    seeded generator (``below(n)``, ``uniform(a, b)``, ``chance(p)``, ``choice(items)``), the
    only chance a script may use if its runs are to replay; ``shared`` a dict the callers of one
    run share, fresh for every run (the application's state: a store, counters)."""

    def __init__(self, client: 'SimulatedClient', rng: SplitMix64, shared: Dict[str, Any]) -> None:
        self.name = client.name
        self.rng = rng
        self.shared = shared
        self._client = client
        self._thread = object()   # the thread of this caller, for reentrancy
        self._tenures: Dict[int, 'Tenure'] = {}

    def time(self) -> float:
        """This client's wall clock (simulated, with its own skew), in seconds since the epoch."""
        return self._client.clock.time()

    def acquire_lock(self, partition_key: str, sort_key: str = 'lock',
                     retry_timeout: Optional[float] = None,
                     additional_attributes: Optional[Mapping[str, object]] = None) -> Command:
        """``acquire_lock``: the lock, or a ``DynamoDBLockError`` raised at the yield
        (``retry_timeout`` in seconds; None: the client's default)."""
        timeout = None if retry_timeout is None else datetime.timedelta(seconds=retry_timeout)
        return Command(f'acquire_lock({partition_key!r}, {sort_key!r})',
                       lambda: self._acquire(partition_key, sort_key, timeout, additional_attributes, True))

    def try_acquire_lock(self, partition_key: str, sort_key: str = 'lock') -> Command:
        """``try_acquire_lock``: one attempt; the lock, or None when it is held."""
        return Command(f'try_acquire_lock({partition_key!r}, {sort_key!r})',
                       lambda: self._acquire(partition_key, sort_key, datetime.timedelta(0), None, False))

    def release_lock(self, lock: 'SimulatedLock', best_effort: bool = True) -> Command:
        """``release_lock`` (best effort by default, as the published client's)."""
        return Command(f'release_lock({lock.unique_identifier})', lambda: self._release(lock, best_effort))

    def sleep(self, seconds: float) -> Command:
        """Let ``seconds`` of this client's clock pass (the script's own work)."""
        def idle() -> Generator[Union[Run, Idle], Outcome, Returned]:
            yield Idle(seconds)
            return None
        return Command(f'sleep({seconds})', idle)

    def _acquire(self, partition_key: str, sort_key: str, timeout: Optional[datetime.timedelta],
                 attributes: Optional[Mapping[str, object]],
                 timeout_is_error: bool) -> Generator[Union[Run, Idle], Outcome, Returned]:
        client = self._client
        host = client.orchestration
        call = acquire_call(host.state, partition_key, sort_key, None, timeout, attributes, None, False,
                            timeout_is_error)
        held, waiter = host.acquiring.queue(call, self._thread, client.new_waiter)
        if held is not None or waiter is None:
            raise AssertionError('a simulated caller never re-enters a lock')
        outcome = yield Run(host.acquiring.acquisition(waiter, self._thread, call), waiter)
        if outcome.error is not None:
            raise outcome.error
        lock = outcome.value
        if lock is not None:
            self._tenures[id(lock)] = client.checker.acquired(client, lock)
        return lock   # type: ignore[no-any-return]  # the protocol's value: the lock or None

    def _release(self, lock: 'SimulatedLock', best_effort: bool) -> Generator[Union[Run, Idle], Outcome, Returned]:
        tenure = self._tenures.pop(id(lock), None)
        if tenure is not None:
            self._client.checker.leaving(tenure)
        outcome = yield Run(self._client.orchestration.releasing.releasing(lock, best_effort))
        if outcome.error is not None:
            raise outcome.error
        return bool(outcome.value)


def user_caller(client: 'SimulatedClient', rng: SplitMix64, script: UserScript, shared: Dict[str, Any]) -> Script:
    """The scheduler's script for one client running a user's ``script``: each command it
    yields is performed, and what it returns (or raises) handed back; then the client closes."""
    caller = SimulatedCaller(client, rng, shared)
    steps = script(caller)
    answer: Returned = None
    error: Optional[DynamoDBLockError] = None
    while True:
        try:
            command = steps.send(answer) if error is None else steps.throw(error)
        except StopIteration:
            break
        answer, error = None, None
        if not isinstance(command, Command):
            raise TypeError(f'a simulation script yields what its SimulatedCaller returns (acquire_lock, '
                            f'try_acquire_lock, release_lock, sleep), not {command!r}')
        client.scheduler.note(f'script: {command.describe}')
        try:
            answer = yield from command.perform()
        except DynamoDBLockError as raised:
            error = raised
    client.close()
