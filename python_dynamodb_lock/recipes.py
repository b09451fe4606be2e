"""Leader election and a counting semaphore, built on the lock client's public API.

Both recipes are thin layers over the ordinary lock machinery, so they inherit its behaviour
and its guarantees: leases renewed in the background, takeover of a crashed holder's lock only
after its version has stayed unchanged for a whole lease on the waiter's own monotonic clock,
fencing tokens, guarded writes, ``LOCK_STOLEN`` and ``LOCK_IN_DANGER``.

* :class:`LeaderElection` -- one lock per election; whoever holds it is the leader, and the
  lock's fencing token is the leader's *term*.
* :class:`Semaphore` -- N locks per semaphore (the sort keys ``slot-0`` to ``slot-<N-1>``
  under the semaphore's name); whoever holds one of them holds a :class:`Permit`.

These take the threaded client, :class:`~python_dynamodb_lock.python_dynamodb_lock.DynamoDBLockClient`;
their asyncio twins, :class:`python_dynamodb_lock.aio.AsyncLeaderElection` and
:class:`python_dynamodb_lock.aio.AsyncSemaphore`, take the asyncio client and behave the same.

How they are built (and how to build your own): the decisions of each recipe are written once,
as generators that yield *operations* (acquire the first free of several keys, acquire one key,
release, read a row, wait on the client's clock) and receive their results; a small handler
performs the operations with one client's public API (:class:`Threads` blocks in the calling
thread, the asyncio handler awaits). Only public members of the clients are used: ``acquire_lock``,
``acquire_first_lock``, ``release_lock``, ``get_lock``, ``check_lock_arguments``, ``clock``
and the read-only settings. The implementations live in the private package
``python_dynamodb_lock._recipes``; this module is their threaded face. See the "Recipes" page of
the documentation for worked examples and failure modes.
"""
from __future__ import annotations

import threading
from types import TracebackType
from typing import Any, Callable, List, Optional, Type

from ._common.locks import BaseDynamoDBLock
from ._recipes.common import Duration
from ._recipes.election import ElectionLogic, LossReason
from ._recipes.handlers import Threads
from ._recipes.permit import PermitBase
from ._recipes.seams import RecipeClient
from ._recipes.semaphore import SemaphoreLogic
from .python_dynamodb_lock import DynamoDBLock, DynamoDBLockClient

# Offered here as before the implementations moved: the operations and the handler, to build your
# own recipe (see the "Recipes" page), and the limit and attributes the recipes write.
from ._recipes.election import CANDIDATE_ATTRIBUTE as CANDIDATE_ATTRIBUTE
from ._recipes.election import OnElected as OnElected
from ._recipes.election import OnLost as OnLost
from ._recipes.handlers import Handler as Handler
from ._recipes.operations import AcquireFirst as AcquireFirst
from ._recipes.operations import GetLock as GetLock
from ._recipes.operations import Join as Join
from ._recipes.operations import Recipe as Recipe
from ._recipes.operations import Release as Release
from ._recipes.operations import Wait as Wait
from ._recipes.semaphore import LIMIT_ATTRIBUTE as LIMIT_ATTRIBUTE
from ._recipes.semaphore import MAX_SEMAPHORE_LIMIT as MAX_SEMAPHORE_LIMIT

__all__ = ['LeaderElection', 'LossReason', 'Permit', 'Semaphore']

AppCallback = Callable[[str, DynamoDBLock], Any]

# The threaded client fits what the recipes ask of a client (checked by mypy, nothing at run time).
_FITS: Type[RecipeClient] = DynamoDBLockClient


class LeaderElection(ElectionLogic[DynamoDBLock]):
    """Campaign for leadership of ``name`` among every candidate that uses the same table.

    The leader is whoever holds the lock ``(name, sort_key)``. A background thread (one per
    election, started by :meth:`start` or by entering the ``with`` block) acquires it, waiting
    and taking over the lock of a leader that died exactly as ``acquire_lock`` does, watches
    it while it is held, and campaigns again after leadership is lost. Every wait of that
    thread is on the lock client's clock and ends at once when the election is resigned or
    closed. Nothing it meets stops it: a failed call or any other exception is logged and the
    campaign goes on after ``retry_period``.

    **Terms.** ``term`` is the lock's fencing token: every election of a leader gets a term
    larger than every earlier term of this election (across releases, takeovers and crashes;
    see the Safety and fencing page for the one caveat, a row deleted by TTL after a long
    time without any leader). Pass it to the resources the leader writes to, so that they can
    refuse a deposed leader's late writes; or write through ``election.lock``'s guarded writes.

    **Losing leadership is reported before anybody else can win.** Leadership ends when no
    renewal of the lock has been confirmed for the client's ``safe_period``, which must be
    shorter than its ``lease_duration``; this election refuses a client configured otherwise.
    The argument:

    1. Another candidate can only take the lock over after it has seen the lock row carry the
       same version for a whole ``lease_duration``, timed on its own monotonic clock from a
       read made *after* that version was written. Every renewal of ours writes a new version,
       and we time our side from *before* we sent it (``last confirmed``). So no one else can
       win before ``last confirmed + lease_duration`` on our clock (clock *rates* agree; no
       wall clocks are compared).
    2. ``is_leader`` is computed when it is read: it is True only while the lock is held and
       ``last confirmed + safe_period`` is still ahead. It turns False at that moment even if
       this process was paused, and even before the background thread has run; and it stays
       False for that term (a renewal that succeeds later does not revive it: the election
       steps down, and a new election gives a new term). The first read after a pause past
       the safe period is False.
    3. The background thread never sleeps past ``last confirmed + safe_period`` (it wakes then,
       every ``retry_period``, and on a ``LOCK_STOLEN`` / ``LOCK_IN_DANGER`` callback), re-checks,
       and steps down: it calls ``on_lost(term, reason)`` and only *then* releases the lock. The application
       thus has ``lease_duration - safe_period`` to stop acting as leader before another
       candidate can possibly be elected (on DynamoDB being unreachable, the release fails and
       the others wait out the lease; when DynamoDB works, the release lets them in at once,
       after ``on_lost`` returned).
    4. A resumed leader that finds its lock taken (``STOLEN``) was already not leader by (2).

    What it cannot cover: a process paused *while* it acts on a leadership it checked before
    the pause (use the term as a fencing token, or guarded writes, for that), an operator's
    ``force_release_lock``, and candidates whose clients set ``max_clock_skew`` larger than
    the real skew between hosts.

    After stepping down, the election campaigns again (a new term, if it wins again), except
    after :meth:`resign` or :meth:`close`.

    :param lock_client: the :class:`~python_dynamodb_lock.python_dynamodb_lock.DynamoDBLockClient`
        to hold the lock with. Its ``heartbeat_period``, ``safe_period`` and ``lease_duration``
        are the election's timings; ``safe_period`` must be shorter than ``lease_duration``.
    :param name: the election's name: the partition key of its lock.
    :param sort_key: the lock's sort key (default ``'-'``, as for ``acquire_lock``).
    :param candidate_id: stored in the lock row (attribute ``candidate_id``) while this
        candidate leads, so that others can see who leads (:meth:`current_leader`). Default:
        the client's ``owner_name``.
    :param on_elected: ``on_elected(term)``, called on the election's thread when this candidate
        has become leader.
    :param on_lost: ``on_lost(term, reason)``, called on the election's thread when leadership
        has ended, before the lock is released; ``reason`` is a :class:`LossReason` value.
        Keep it short: the lock is released (and another candidate elected) only after it
        returns, unless DynamoDB is unreachable, when the others may win once the lease runs out.
    :param retry_period: how often a candidate polls the lock while someone else leads, and
        pauses after an error (default: the client's ``heartbeat_period``). A new leader is
        elected within about ``lease_duration + 2 * retry_period`` of the last renewal of a
        leader that died, and within ``retry_period`` of a resignation.
    :param additional_attributes: more attributes for the lock row while this candidate leads.
    :raises TypeError, ValueError: for bad arguments, before anything is written.
    """

    _handler: 'Threads'
    _handler_class = Threads

    def current_leader(self) -> Optional[BaseDynamoDBLock]:
        """The election's lock row as it is in the table now (a consistent read): its
        ``owner_name``, ``fencing_token`` (the term) and ``additional_attributes['candidate_id']``;
        None when nobody leads. A leader that died still shows until its lock is taken over.

        :raises DynamoDBLockError: ``UNKNOWN`` when the read fails.
        """
        return self._handler.run(self._current_leader())

    def wait_for_leadership(self, timeout: Optional[Duration] = None) -> bool:
        """Wait until this candidate leads (and ``on_elected`` has returned).

        :param timeout: a ``datetime.timedelta`` or seconds, on the lock client's clock;
            None waits for as long as it takes.
        :returns: True when it leads; False when the timeout passed first, or the election
            was closed.
        """
        return self._handler.run(self._waiting_for_leadership(timeout))

    def start(self) -> 'LeaderElection':
        """Start (or, after :meth:`resign`, resume) campaigning; returns at once.

        :raises RuntimeError: after :meth:`close`.
        """
        self._starting()
        return self

    def resign(self) -> None:
        """Stop campaigning, and step down if leading: ``on_lost(term, RESIGNED)``, then the lock
        is released (best effort), so that another candidate is elected within its
        ``retry_period``. :meth:`start` campaigns again."""
        self._handler.run(self._resigning())

    def close(self) -> None:
        """Resign for good and stop the election's thread; safe to call twice, and from a
        callback. Returns once the thread has stopped (unless called on it); a call to
        DynamoDB in flight is not interrupted. The lock client is not closed."""
        self._handler.run(self._closing())

    def __enter__(self) -> 'LeaderElection':
        return self.start()

    def __exit__(self, exc_type: Optional[Type[BaseException]], exc_value: Optional[BaseException],
                 traceback: Optional[TracebackType]) -> None:
        self.close()


class Permit(PermitBase):
    """One of a :class:`Semaphore`'s N permits, held by this process: the lock of one slot.

    A context manager that releases it when the block ends (an exception in the block
    propagates). The slot is renewed in the background like any lock; ``lock`` gives its
    guarded writes, and ``fencing_token`` its token.
    """

    semaphore: 'Semaphore'
    lock: DynamoDBLock

    def release(self, best_effort: bool = True) -> None:
        """Give the permit back: see :meth:`Semaphore.release`."""
        self.semaphore.release(self, best_effort)

    def __enter__(self) -> 'Permit':
        return self

    def __exit__(self, exc_type: Optional[Type[BaseException]], exc_value: Optional[BaseException],
                 traceback: Optional[TracebackType]) -> None:
        self.release(best_effort=True)


class Semaphore(SemaphoreLogic):
    """At most ``limit`` holders of ``name`` at a time, across every process using the table.

    The semaphore is ``limit`` locks: ``(name, 'slot-0')`` to ``(name, 'slot-<limit-1>')``.
    A permit is one of them, acquired with the lock client's own machinery, so a permit is
    renewed in the background, reported ``LOCK_STOLEN`` / ``LOCK_IN_DANGER`` to its
    ``app_callback``, and the slot of a holder that crashed is taken over once its version has
    stayed unchanged for a lease. Exclusion per slot is the lock's exclusion; N slots make at
    most N holders.

    Why slots rather than one counter item: a counter cannot tell a crashed holder from a slow
    one, so its count leaks; slots are leases, renewed and reclaimed like locks, and each permit
    gets a fencing token and guarded writes. The price is that an acquisition looks at slots
    one by one: taking a free slot costs one conditional write per busy slot tried before it
    (the order starts at a random slot, to spread holders), and a waiter polls each slot with a
    consistent read every ``retry_period``. That suits small limits; ``limit`` may not exceed
    1000. There is no queue: waiters are not served in arrival order.

    **All holders must agree on the limit.** A semaphore with a smaller limit only looks at
    its own slots, so with mixed limits the bound is the largest limit in use, and holders with
    the smaller limit get fewer permits. Each permit's row records its semaphore's limit
    (attribute ``semaphore_limit``); an acquisition that finds every slot busy looks at the row in
    the way of the first slot it tried (a random one), and a semaphore that meets a row with another
    limit so logs a WARNING once per limit seen. Changing the limit therefore needs all holders to move to the
    new value; during a rolling change the larger limit applies.

    :param lock_client: the :class:`~python_dynamodb_lock.python_dynamodb_lock.DynamoDBLockClient`
        holding the permits.
    :param name: the partition key of the slots.
    :param limit: N, a positive int (at most 1000); checked before anything is written.
    :param retry_period: how often a waiting acquisition polls the slots (default: the client's
        ``heartbeat_period``). A permit released through this same object wakes the waiters
        of this object at once.
    :param additional_attributes: more attributes for the slot rows this semaphore writes.
    :raises TypeError, ValueError: for bad arguments, before anything is written; a table
        without a sort key cannot hold a semaphore.
    """

    _permit = Permit
    _handler: 'Threads'
    _handler_class = Threads

    def try_acquire(self, app_callback: Optional[AppCallback] = None) -> Optional[Permit]:
        """A permit if one is free right now (or held by a holder whose TTL has passed); never
        waits. None when every slot is held.

        :raises DynamoDBLockError: ``UNKNOWN`` when DynamoDB fails, ``CLIENT_SHUTDOWN`` after
            the client was closed.
        """
        permit: Optional[Permit] = self._handler.run(self._acquiring(0.0, app_callback))
        return permit

    def acquire(self, timeout: Optional[Duration] = None, app_callback: Optional[AppCallback] = None) -> Permit:
        """Wait for a permit.

        :param timeout: a ``datetime.timedelta`` or seconds, on the lock client's clock;
            None (the default) waits for as long as it takes, 0 tries once.
        :param app_callback: ``app_callback(code, lock)`` for the permit's lock, as for
            ``acquire_lock`` (``LOCK_STOLEN``, ``LOCK_IN_DANGER``).
        :raises DynamoDBLockError: ``ACQUIRE_TIMEOUT`` when no permit came within ``timeout``;
            ``UNKNOWN`` when DynamoDB fails; ``CLIENT_SHUTDOWN`` after the client was closed
            (a waiting acquisition notices within a ``retry_period``).
        """
        permit: Permit = self._handler.run(self._acquiring_or_raise(timeout, app_callback))
        return permit

    def release(self, permit: Permit, best_effort: bool = True) -> None:
        """Give a permit back: its slot's lock is released (see ``release_lock``:
        ``best_effort=False`` raises when the slot was lost), and waiters of this object poll at once."""
        self._handler.run(self._releasing(permit, best_effort))

    def holders(self) -> List[BaseDynamoDBLock]:
        """The slots held right now, as their rows (one consistent read per slot). A holder
        that died shows until its slot is taken over."""
        holders: List[BaseDynamoDBLock] = self._handler.run(self._listing())
        return holders

    def __enter__(self) -> Permit:
        return self._enter(threading.current_thread(), self.acquire())  # type: ignore[no-any-return]

    def __exit__(self, exc_type: Optional[Type[BaseException]], exc_value: Optional[BaseException],
                 traceback: Optional[TracebackType]) -> None:
        self._exit(threading.current_thread()).release(best_effort=True)
