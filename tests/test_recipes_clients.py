"""The recipes on both clients, through public seams only.

* ``acquire_first_lock`` (both clients): the first free key in the order given, one lock held,
  ``ACQUIRE_TIMEOUT`` when every key is held, bad input refused before any call;
* ``Semaphore`` and ``python_dynamodb_lock.aio.AsyncSemaphore`` behave the same: at most N
  permits, one per slot, tokens growing per slot, a waiter woken by a release through the same
  object without polling, a crashed holder's slot taken over after its lease;
* ``LeaderElection`` and ``AsyncLeaderElection`` behave the same: the term is the lock's
  fencing token, ``current_leader`` names the candidate, a resignation reports
  ``on_lost(term, RESIGNED)`` and lets the next candidate in with a larger term;
* neither recipe module touches a private member of a client or a lock (an ``ast`` scan).

Every test runs once per client kind (``client_kind``) on moto and on DynamoDB Local; the
asyncio recipes run on the event loop of the asyncio clients (``clients.runner``).
"""
from __future__ import annotations

import ast
import asyncio
import concurrent.futures
import datetime
import pathlib
import threading
from typing import Any, Callable, List, Optional, Tuple

import pytest

from helpers import ASYNCIO, CallRecorder, LockClients, wait_until
from python_dynamodb_lock import LeaderElection, Semaphore
from python_dynamodb_lock.aio import AsyncLeaderElection, AsyncSemaphore
from python_dynamodb_lock.python_dynamodb_lock import DynamoDBLockError
from python_dynamodb_lock.recipes import LossReason

seconds = datetime.timedelta
PACKAGE = pathlib.Path(__file__).resolve().parent.parent / 'python_dynamodb_lock'


class Kind:
    """The recipes and calls of the test's client kind, run to their end from the test thread."""

    def __init__(self, clients: LockClients) -> None:
        self.clients = clients
        self.is_asyncio = clients.kind == ASYNCIO

    def lock_client(self, client: Any) -> Any:
        """The real lock client behind what ``clients.make()`` returned."""
        return client.async_client if self.is_asyncio else client

    def semaphore(self, client: Any, name: str, limit: int, **kwargs: Any) -> Any:
        make = AsyncSemaphore if self.is_asyncio else Semaphore
        return self.made(make, self.lock_client(client), name, limit, **kwargs)

    def election(self, client: Any, name: str, **kwargs: Any) -> Any:
        make = AsyncLeaderElection if self.is_asyncio else LeaderElection
        return self.made(make, self.lock_client(client), name, **kwargs)

    def made(self, make: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """A recipe object, made as an application makes it: the asyncio ones inside a coroutine
        on the client's loop (on Python 3.9 an asyncio.Event made elsewhere binds another loop)."""
        if not self.is_asyncio:
            return make(*args, **kwargs)

        async def making() -> Any:
            return make(*args, **kwargs)

        return self.clients.runner.run(making())

    def call(self, result: Any) -> Any:
        """The result of a call: awaited on the loop for the asyncio kind."""
        if not self.is_asyncio:
            return result

        async def awaiting() -> Any:
            return await result

        return self.clients.runner.run(awaiting())

    def background(self, function: Callable[..., Any], *args: Any) -> 'concurrent.futures.Future[Any]':
        """Start ``function(*args)`` (a thread, or a task on the loop) and return its future."""
        if self.is_asyncio:
            async def awaiting() -> Any:
                return await function(*args)

            return self.clients.runner.submit(awaiting())
        executor = concurrent.futures.ThreadPoolExecutor(1)
        try:
            return executor.submit(function, *args)
        finally:
            executor.shutdown(wait=False)

    def event(self) -> Any:
        """An event of the kind's (``threading.Event``, or an ``asyncio.Event`` of the loop)."""
        if not self.is_asyncio:
            return threading.Event()

        async def make() -> asyncio.Event:
            return asyncio.Event()

        return self.clients.runner.run(make())

    def set(self, event: Any) -> None:
        if self.is_asyncio:
            self.clients.runner.loop.call_soon_threadsafe(event.set)
        else:
            event.set()

    def start(self, election: Any) -> None:
        if not self.is_asyncio:
            election.start()
            return

        async def start() -> None:
            election.start()

        self.clients.runner.run(start())


@pytest.fixture
def kind(clients: LockClients) -> Kind:
    return Kind(clients)


# --------------------------------------------------------------------------------------------
# acquire_first_lock
# --------------------------------------------------------------------------------------------

def test_acquire_first_lock_takes_the_first_free_key_in_order(engine: Any, clients: LockClients, kind: Kind) -> None:
    other = kind.lock_client(clients.make(owner_name='other'))
    kind.call(other.acquire_lock('pool', 'a'))
    client = kind.lock_client(clients.make(owner_name='me'))
    with CallRecorder(engine.resource) as calls:
        lock = kind.call(client.acquire_first_lock('pool', ['a', 'b', 'c'], retry_timeout=seconds(0)))
    assert lock.sort_key == 'b' and lock.owner_name == 'me'
    assert isinstance(lock.fencing_token, int)
    assert engine.read_held_row('pool', 'b')['owner_name'] == 'me'
    assert engine.read_held_row('pool', 'c') is None              # only one lock is ever taken
    assert len(calls.calls) >= 2                                   # 'a' refused, then 'b' written
    assert [lock] == [held for held in client.held_locks() if held.sort_key in ('a', 'b', 'c')]
    kind.call(client.acquire_lock('pool', 'c'))
    with pytest.raises(DynamoDBLockError) as timed_out:
        kind.call(client.acquire_first_lock('pool', ['a', 'b', 'c'], retry_timeout=seconds(0)))
    assert timed_out.value.code == DynamoDBLockError.ACQUIRE_TIMEOUT
    assert timed_out.value.holder is not None and timed_out.value.holder.owner_name in ('me', 'other')
    kind.call(client.release_lock(lock))
    assert engine.read_held_row('pool', 'b') is None


@pytest.mark.parametrize('sort_keys, error', [
    ('slot-0', TypeError),                 # a str is not a list of keys
    ([], ValueError),
    (['a', 'a'], ValueError),
    (['a', 5], TypeError),
    ([f'k{n}' for n in range(1001)], ValueError),
])
def test_acquire_first_lock_refuses_bad_sort_keys_before_any_call(engine: Any, clients: LockClients, kind: Kind,
                                                                   sort_keys: Any, error: type) -> None:
    client = kind.lock_client(clients.make())
    with CallRecorder(engine.resource) as calls:
        with pytest.raises(error):
            kind.call(client.acquire_first_lock('pool', sort_keys))
        with pytest.raises(ValueError, match='retry_timeout'):
            kind.call(client.acquire_first_lock('pool', ['a'], retry_timeout=seconds(-1)))
    assert calls.calls == []


def test_a_recipe_refuses_the_other_kind_of_client_before_any_call(engine: Any, clients: LockClients,
                                                                   kind: Kind) -> None:
    """The threaded recipes take the threaded client, the asyncio twins the asyncio client: the
    other kind (whose calls are coroutines, or block) is refused, naming the client wanted."""
    client = kind.lock_client(clients.make())
    if kind.is_asyncio:
        semaphore, election, wanted = Semaphore, LeaderElection, 'DynamoDBLockClient'
    else:
        semaphore, election, wanted = AsyncSemaphore, AsyncLeaderElection, 'AsyncDynamoDBLockClient'
    with CallRecorder(engine.resource) as calls:
        with pytest.raises(TypeError, match=f'lock_client must be a {wanted}, not {type(client).__name__}'):
            semaphore(client, 'pool', 2)
        with pytest.raises(TypeError, match=f'lock_client must be a {wanted}, not {type(client).__name__}'):
            election(client, 'leader')
    assert calls.calls == []


# --------------------------------------------------------------------------------------------
# Semaphore / AsyncSemaphore
# --------------------------------------------------------------------------------------------

def test_a_semaphore_hands_out_at_most_limit_permits_on_both_clients(engine: Any, clients: LockClients,
                                                                      kind: Kind) -> None:
    semaphore = kind.semaphore(clients.make(), 'pool', 2)
    first, second = kind.call(semaphore.try_acquire()), kind.call(semaphore.try_acquire())
    assert {first.slot, second.slot} == {0, 1}
    for permit in (first, second):
        row = engine.read_held_row('pool', permit.sort_key)
        assert row is not None and row['semaphore_limit'] == 2 and row['fencing_token'] == permit.fencing_token
        assert permit.held
    assert kind.call(semaphore.try_acquire()) is None
    with pytest.raises(DynamoDBLockError) as timed_out:
        kind.call(semaphore.acquire(timeout=0))
    assert timed_out.value.code == DynamoDBLockError.ACQUIRE_TIMEOUT
    assert sorted(row.sort_key for row in kind.call(semaphore.holders())) == ['slot-0', 'slot-1']
    old_token = first.fencing_token
    kind.call(first.release())
    assert not first.held
    again = kind.call(semaphore.try_acquire())
    assert again.slot == first.slot and again.fencing_token > old_token


def test_a_waiter_is_woken_by_a_release_through_the_same_semaphore(engine: Any, clients: LockClients,
                                                                    kind: Kind) -> None:
    clock = clients.clock
    semaphore = kind.semaphore(clients.make(), 'pool', 1, retry_period=seconds(hours=1))
    permit = kind.call(semaphore.acquire(timeout=0))
    waiter = kind.background(semaphore.acquire)
    wait_until(lambda: any(length == 3600 for _, length in list(clock.sleeps)))   # it polls once an hour
    now = clock.monotonic()
    kind.call(permit.release())
    got = waiter.result(timeout=30)
    assert got.slot == 0 and got.held and clock.monotonic() == now   # no time passed: no poll was due
    kind.call(got.release())


def test_a_crashed_holders_slot_is_taken_over_after_its_lease_on_both_clients(engine: Any, clients: LockClients,
                                                                             kind: Kind) -> None:
    clock = clients.clock
    dead = kind.semaphore(clients.make(owner_name='crashed'), 'pool', 1)    # hand-driven: never renews
    old = kind.call(dead.acquire(timeout=0))
    semaphore = kind.semaphore(clients.make(), 'pool', 1, retry_period=seconds(seconds=1))
    started = clock.monotonic()
    with clock.auto_advance_in_current_thread():
        permit = kind.call(semaphore.acquire())
    assert 30 <= clock.monotonic() - started <= 30 + 2                      # the lease, plus at most two polls
    assert permit.took_over_from is not None and permit.took_over_from.owner_name == 'crashed'
    assert permit.fencing_token > old.fencing_token


# --------------------------------------------------------------------------------------------
# LeaderElection / AsyncLeaderElection
# --------------------------------------------------------------------------------------------

def test_an_election_elects_one_leader_and_a_resignation_lets_the_next_in(engine: Any, clients: LockClients,
                                                                          kind: Kind) -> None:
    clock = clients.clock
    lost: List[Tuple[Optional[int], str]] = []
    first = kind.election(clients.make(), 'leader', candidate_id='first',
                          on_lost=lambda term, reason: lost.append((term, reason)))
    second = kind.election(clients.make(), 'leader', candidate_id='second', retry_period=seconds(seconds=1))
    try:
        kind.start(first)
        assert kind.call(first.wait_for_leadership(30)) is True
        term = first.term
        assert term is not None and term == first.lock.fencing_token
        leader = kind.call(first.current_leader())
        assert leader.additional_attributes['candidate_id'] == 'first'
        kind.start(second)
        assert kind.call(second.wait_for_leadership(0)) is False
        wait_until(lambda: any(length == 1 for _, length in list(clock.sleeps)))   # the second one polls each second
        kind.call(first.resign())
        assert lost == [(term, LossReason.RESIGNED)] and not first.is_leader
        wait_until(lambda: engine.read_held_row('leader') is None)        # released after on_lost
        clock.advance(1)                                                    # the second one's next poll
        wait_until(lambda: second.is_leader)
        assert second.term is not None and second.term > term
        assert kind.call(second.current_leader()).additional_attributes['candidate_id'] == 'second'
    finally:
        kind.call(first.close())
        kind.call(second.close())
    assert not second.is_leader and not second.campaigning


# --------------------------------------------------------------------------------------------
# Public seams only
# --------------------------------------------------------------------------------------------

def private_reads(path: pathlib.Path) -> List[str]:
    """Attribute reads ``x._name`` (not dunder) on anything but ``self`` in a module."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Attribute) and node.attr.startswith('_') and not node.attr.startswith('__'):
            if not (isinstance(node.value, ast.Name) and node.value.id == 'self'):
                found.append(f'{path.name}:{node.lineno}: {ast.unparse(node)}')
            elif node.attr in PRIVATE_CLIENT_MEMBERS:
                found.append(f'{path.name}:{node.lineno}: {ast.unparse(node)} (a client member)')
    return found


#: Names of private members the recipes once reached through the client; ``self._x`` may not
#: use them either (a recipe's own attribute of that name would be confusing).
PRIVATE_CLIENT_MEMBERS = {'_advance', '_perform', '_attempt', '_adopt', '_install', '_new_lock', '_shutdown',
                          '_check_process', '_settings', '_schema', '_run', '_registry', '_store'}


@pytest.mark.parametrize('module', ['recipes.py'] + sorted(f'_recipes/{path.name}'
                                                          for path in (PACKAGE / '_recipes').glob('*.py')))
def test_the_recipes_touch_no_private_member_of_a_client_or_lock(module: str) -> None:
    path = PACKAGE / module
    assert path.exists()
    assert private_reads(path) == []


def test_the_scan_finds_a_private_read(tmp_path: pathlib.Path) -> None:
    """The scan above can fail: it finds the reads a recipe must not make."""
    sample = tmp_path / 'sample.py'
    sample.write_text('def f(self, client):\n    client._settings\n    self._client._schema\n    self._run\n'
                      '    self._guard\n    lock.__class__\n')
    assert len(private_reads(sample)) == 3


# --------------------------------------------------------------------------------------------
# acquire_first_lock: waking and giving up
# --------------------------------------------------------------------------------------------

def test_a_wake_polls_at_once_and_does_not_restart_the_watch_of_a_dead_holder(
        engine: Any, clients: LockClients, kind: Kind) -> None:
    """Setting ``wake`` makes a waiting call look again at once; the watch of a dead holder's
    version goes on across wakes, so its keys are still taken over after one lease."""
    clock = clients.clock
    dead = kind.lock_client(clients.make(owner_name='crashed'))      # hand-driven: never renews
    for key in ('a', 'b'):
        kind.call(dead.acquire_lock('pool', key))
    client = kind.lock_client(clients.make())
    wake = kind.event()
    waiter = kind.background(lambda: client.acquire_first_lock('pool', ['a', 'b'], seconds(seconds=1),
                                                               seconds(minutes=5), wake=wake))

    def polled_since(count: int) -> bool:
        return waiter.done() or len(clock.sleeps) > count

    started = clock.monotonic()
    try:
        wait_until(lambda: polled_since(0))                  # waiting: both keys held
        with CallRecorder(engine.resource) as calls:
            for turn in range(200):
                if waiter.done():
                    break
                count = len(clock.sleeps)
                if turn % 2:
                    kind.set(wake)            # look again now: one read per key, no time passes
                else:
                    clock.advance(1)          # the next poll is due
                wait_until(lambda count=count: polled_since(count))     # type: ignore[misc]
    finally:
        if not waiter.done():
            clock.advance(3600)               # a failed test must not leave the call waiting
    lock = waiter.result(timeout=30)
    assert lock.took_over_from is not None and lock.took_over_from.owner_name == 'crashed'
    assert 30 <= clock.monotonic() - started <= 32            # one lease, wakes or not
    assert calls.operations().count('GetItem') >= 2 * 50      # the wakes polled too (about 30 each)


def test_giving_up_a_waiting_acquire_first_lock_leaves_nothing_held(engine: Any, clients: LockClients,
                                                                     kind: Kind) -> None:
    """``cancel`` (threaded) or cancelling the task (asyncio) ends the wait; nothing is held."""
    clock = clients.clock
    other = kind.lock_client(clients.make(owner_name='other'))
    kind.call(other.acquire_lock('pool', 'a'))
    client = kind.lock_client(clients.make())

    def waiting() -> bool:
        return any(length == 3600 for _, length in list(clock.sleeps))

    if kind.is_asyncio:
        async def cancelled_while_waiting() -> bool:
            task = asyncio.ensure_future(client.acquire_first_lock('pool', ['a'], seconds(hours=1), seconds(hours=2)))
            while not waiting():
                await asyncio.sleep(0.01)
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                return True
            return False

        assert kind.call(cancelled_while_waiting()) is True
    else:
        cancel = threading.Event()
        waiter = kind.background(lambda: client.acquire_first_lock('pool', ['a'], seconds(hours=1), seconds(hours=2),
                                                                   cancel=cancel))
        wait_until(waiting)
        cancel.set()
        with pytest.raises(DynamoDBLockError) as cancelled:
            waiter.result(timeout=30)
        assert cancelled.value.code == DynamoDBLockError.ACQUIRE_CANCELLED
    assert client.held_locks() == []
    assert engine.read_held_row('pool', 'a')['owner_name'] == 'other'
