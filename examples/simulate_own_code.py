"""Your own code's use of locks, under the deterministic simulation.

``add_interest`` is the application's code: it reads a balance, works for a while, and writes
the new balance, under a lock. Written against a store that checks fencing tokens
(``FencedStore``: a read or a write with a token older than one it has seen is refused), the
read-modify-write never loses an update, whatever the schedule: clients paused past their
lease, lost answers, throttling. ``fenced=False`` shows why the check is there: the simulator
finds a schedule where a paused holder's late write overwrites its successor's, names its
seed, and shrinks it to a smaller run. ``python examples/simulate_own_code.py`` shows both.
"""
from __future__ import annotations

from typing import Generator, List, Optional

from python_dynamodb_lock import DynamoDBLockError
from python_dynamodb_lock.testing import SimulatedCaller, SimulationFailure, Workload, shrink, simulate
from python_dynamodb_lock.testing._simulation import UserScript


class StaleToken(Exception):
    """The store refused a request made under a lock since taken over."""


class FencedStore:
    """The application's store: one balance, and the largest fencing token it has seen."""

    def __init__(self, fenced: bool = True) -> None:
        self.balance = 100
        self.newest_token = 0
        self.fenced = fenced
        self.written: List[int] = []     # every balance written, in order

    def read(self, token: int) -> int:
        self._check(token)
        return self.balance

    def write(self, token: int, balance: int) -> None:
        self._check(token)
        self.balance = balance
        self.written.append(balance)

    def _check(self, token: int) -> None:
        if self.fenced and token < self.newest_token:
            raise StaleToken(f'token {token} is older than {self.newest_token}')
        self.newest_token = max(self.newest_token, token)


def add_interest(caller: SimulatedCaller, store: FencedStore,
                 times: int) -> Generator[object, Optional[object], None]:
    """The application's code: ``times`` times, add 1 to the balance under the lock. Where it
    would call ``client.acquire_lock(...)``, it yields ``caller.acquire_lock(...)``."""
    for _ in range(times):
        try:
            lock = yield caller.acquire_lock('account-42', retry_timeout=30.0)
        except DynamoDBLockError:
            continue        # gave up waiting (the simulation throttles and loses answers)
        try:
            balance = store.read(lock.fencing_token)
            yield caller.sleep(caller.rng.uniform(0.0, 3.0))        # the work takes a while
            store.write(lock.fencing_token, balance + 1)
        except StaleToken:
            pass            # the lock was taken over meanwhile: this update is refused, not lost
        yield caller.release_lock(lock)


def interest_script(fenced: bool = True) -> UserScript:
    """What each simulated client runs: ``add_interest`` three times over the run's one store
    (``caller.shared``: fresh for every run, shared by its clients); then the check that no
    update was lost: each balance written is one more than the one before."""
    def script(caller: SimulatedCaller) -> Generator[object, Optional[object], None]:
        store = caller.shared.setdefault('store', FencedStore(fenced))
        yield from add_interest(caller, store, times=3)
        balances = [100] + store.written
        lost = [(a, b) for a, b in zip(balances, balances[1:]) if b != a + 1]
        assert not lost, f'an update was lost: the balance went from {lost[0][0]} to {lost[0][1]}'
    return script


def first_failure(seeds: range, fenced: bool) -> Optional[SimulationFailure]:
    """The first of ``seeds`` whose run loses an update (None: none does)."""
    for seed in seeds:
        try:
            simulate(seed, Workload(clients=3), script=interest_script(fenced))
        except SimulationFailure as failure:
            return failure
    return None


if __name__ == '__main__':
    assert first_failure(range(200), fenced=True) is None
    failure = first_failure(range(200), fenced=False)
    assert failure is not None
    print(f'seed {failure.seed}: {failure.problem}')
    print(shrink(failure.seed, failure.workload, failure.plan, script=interest_script(fenced=False)))
