"""Renewing held locks: the heartbeat and danger-check rounds (background or
``send_heartbeats`` / ``check_locks``), ``lock.extend()``, ``lock.update_attributes()`` and the
guarded writes (``lock.transact_write_items`` and the multi-lock's). The decisions are the
core's (:mod:`.._core.heartbeat`, :mod:`.._core.session`, :mod:`.._core.guard`).
"""
from __future__ import annotations

from typing import Any, Callable, ContextManager, Dict, List, Mapping, Optional, Sequence, Set, Tuple, TypeVar, Union

from .._common.config import check_attribute_update
from .._core.effects import Drop, Hold, Protocol
from .._core.events import Kind
from .._core.guard import check_actions, guarded_write
from .._core.heartbeat import check_round, extend, heartbeat_round, renew_batch, renew_one, update_attributes
from .._core.item_size import check_update_size
from .._core.session import due_for_refresh, extend_session, session_round
from .._common.locks import state_of
from .._wire.typed_json import Wire
from .context import ClientState, Held
from .shared import shared_refusal

__all__ = ['Renewing']

T = TypeVar('T')

#: The options of a guarded write besides its actions and its token.
_GUARD_OPTIONS = frozenset({'ReturnConsumedCapacity', 'ReturnItemCollectionMetrics'})


class Renewing:
    """Renewals of one client's locks (see the module docstring); ``guard`` makes the mutex of
    the set of heartbeats in flight."""

    def __init__(self, state: ClientState[Any], guard: Callable[[], ContextManager[Any]]) -> None:
        self._state = state
        self._in_flight: Set[Any] = set()
        self._in_flight_guard = guard()

    # -- the rounds ------------------------------------------------------------------------

    def heartbeat_round(self) -> Protocol[None]:
        state = self._state
        locks = state.registry.held()
        if state.session is not None:   # one session write; lock rows only when their slow refresh is due
            yield from session_round(state.session_settings, state.session, locks, state.clock)
            locks = due_for_refresh(state.session_settings, state.registry.held(), state.clock.monotonic())
        yield from heartbeat_round(state.heartbeat_settings, locks, state.batching, state.clock,
                                   state.shutdown.is_set)

    def checker_round(self) -> Protocol[None]:
        state = self._state
        return check_round(state.heartbeat_settings, state.registry.held(), state.clock)

    def renewing(self, locks: Sequence[Held]) -> Protocol[None]:
        """Renew a group of locks: in one batch when batching, else one by one.

        A lock whose mutex is busy (a release of it is under way) is not waited for while the
        others' are held: it gets a heartbeat of its own afterwards. A lock no longer held by
        this client is skipped.
        """
        state = self._state
        one_by_one: List[Held] = list(locks)
        if state.batching.enabled:
            free = []
            for lock in locks:
                if (yield Hold(lock, wait=False)):
                    free.append(lock)
            one_by_one = [lock for lock in locks if lock not in free or lock.shared]
            try:
                owned = [lock for lock in free if state.owns(lock) and not lock.shared]   # shared: one by one
                one_by_one += yield from renew_batch(state.heartbeat_settings, owned, state.batching, state.clock)
            finally:
                for lock in free:
                    yield Drop(lock)
        for lock in one_by_one:
            yield Hold(lock)
            try:
                if state.owns(lock):
                    yield from renew_one(state.heartbeat_settings, lock, state.clock)
            finally:
                yield Drop(lock)

    def groups(self, locks: Optional[Any], lock_type: type) -> List[List[Held]]:
        """``send_heartbeats``' locks (all held ones by default), checked, in the groups that
        are renewed together."""
        state = self._state
        state.check_process()
        chosen = state.registry.held() if locks is None else list(locks)
        for lock in chosen:
            if not isinstance(lock, lock_type):
                raise TypeError(f'send_heartbeats takes {lock_type.__name__} objects, not {type(lock).__name__}')
        size = state.batching.batch_size if state.batching.enabled else 1
        return [chosen[start:start + size] for start in range(0, len(chosen), size)]

    # -- heartbeats in flight --------------------------------------------------------------

    @property
    def in_flight(self) -> int:
        """How many held locks have a renewal on the wire right now."""
        with self._in_flight_guard:
            return len(self._in_flight)

    def take_due(self, locks: Sequence[Held]) -> List[Held]:
        """The locks of a group whose previous heartbeat is no longer in flight, now marked in
        flight; the others are reported and skipped."""
        with self._in_flight_guard:
            due = [lock for lock in locks if lock not in self._in_flight]
            self._in_flight.update(due)
        for lock in locks:
            if lock not in due:
                self._state.emit(Kind.HEARTBEAT_IN_FLIGHT, lock)
        return due

    def done_with(self, locks: Sequence[Held], failure: Optional[BaseException] = None) -> None:
        """Heartbeats of ``locks`` have ended (``failure``: with an unexpected exception)."""
        if failure is not None:
            self._state.emit(Kind.HEARTBEAT_TASK_FAILED, keys=', '.join(lock.unique_identifier for lock in locks),
                             exception=failure)
        with self._in_flight_guard:
            self._in_flight.difference_update(locks)

    # -- one lock, on demand ---------------------------------------------------------------

    def extending(self, lock: Held) -> Protocol[None]:
        """``lock.extend()`` (the driver holds the lock's mutex)."""
        state = self._state
        state.check_process()
        self._check_renewable(lock)
        if state.session is not None and state_of(lock).session_id == state.session.id:   # renew the session
            return extend_session(state.session_settings, state.session, state.registry.held(), lock, state.clock)
        return extend(state.heartbeat_settings, lock, state.clock)

    def _check_renewable(self, lock: Held) -> None:
        state = self._state
        if lock.lock_client is not state.client or (state_of(lock).held and not state.owns(lock)):
            raise state.not_owned(lock)

    def updating(self, lock: Held, values: object, remove: object) -> Protocol[None]:
        """``lock.update_attributes``: the arguments checked now (before anything is sent), and
        the protocol that writes them with a heartbeat of the lock, under its mutex (a heartbeat
        of it under way finishes first; its version is then the one the condition names)."""
        state = self._state
        state.check_process()
        update = check_attribute_update(state.schema, values, remove)
        if lock.shared:
            raise shared_refusal(lock, 'it carries no additional attributes')
        if lock.lock_existing_item:
            raise ValueError(f'{lock.unique_identifier} is a lock on an existing item: it carries no additional '
                             "attributes (the item's own are the application's; update the item yourself)")
        self._check_renewable(lock)
        check_update_size(state.schema, lock, dict(update[0]), update[1])
        return _holding(lock, update_attributes(state.heartbeat_settings, lock, state.clock, update))

    def guarded(self, lock: Union[Held, Tuple[Held, ...]], items: object, typed: bool, options: Mapping[str, Any],
                client_token: Optional[str], wire: Wire) -> Protocol[Dict[str, Any]]:
        """Check a guarded write before anything is sent (``lock``: a lock, or a tuple of a
        multi-lock's locks), and the protocol that sends it."""
        state = self._state
        state.check_process()
        locks = lock if isinstance(lock, tuple) else (lock,)
        for each in locks:
            if each.lock_client is not state.client:
                raise state.not_owned(each)
            if each.shared:
                raise shared_refusal(each, 'guarded writes need an exclusive one')
        if typed:
            items = wire.to_python('transact_write_items', {'TransactItems': items})['TransactItems']
        actions = check_actions(state.schema, locks[0].partition_key, locks[0].sort_key, items,
                                [(each.partition_key, each.sort_key) for each in locks[1:]],
                                any(each.lock_existing_item for each in locks))
        unknown = sorted(set(options) - _GUARD_OPTIONS)
        if unknown:
            raise TypeError(f'transact_write_items takes TransactItems, ClientRequestToken, ReturnConsumedCapacity '
                            f'and ReturnItemCollectionMetrics; not {", ".join(unknown)}')
        if client_token is not None and not isinstance(client_token, str):
            raise TypeError(f'ClientRequestToken must be a str, not {type(client_token).__name__}')
        return guarded_write(state.schema, lock, actions, options, client_token)


def _holding(lock: Held, protocol: Protocol[T]) -> Protocol[T]:
    """Run ``protocol`` holding ``lock``'s mutex."""
    yield Hold(lock)
    try:
        return (yield from protocol)
    finally:
        yield Drop(lock)


