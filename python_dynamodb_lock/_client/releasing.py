"""Releasing: ``release_lock`` (one hold of a reentrant lock, or the release itself, handing the
lock to this client's longest waiter for the key in the same write), the release an interruption
cut short, and the first steps of ``close()``. The verdicts are the core's
(:mod:`.._core.release`); here they are applied to the lock objects and the registry.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Optional, Sequence, Tuple

from .._common.config import check_release_attributes
from .._common.locks import holds_of, state_of
from .._model.validation import require_bool
from .._core.effects import Drop, Hold, Protocol, Settle
from .._core.events import Kind
from .._core.item_size import check_release_size, handover_fits
from .._core.release import ReleaseVerdict, free_handed, precheck_release, release, release_again, release_verdict
from .._core.state import Status
from .._common.observe import logger
from .._common.registry import WaiterState
from .._model.schema import Schema
from .context import ClientState, Held
from .shared import shared_refusal

__all__ = ['Releasing']


class Releasing:
    """Releases of one client's locks (see the module docstring)."""

    def __init__(self, state: ClientState[Any]) -> None:
        self._state = state

    def attributes(self, lock: Held, attributes: object, keep_row: Optional[bool]) -> Optional[Mapping[str, Any]]:
        """``release_lock(attributes=..., keep_row=...)`` checked before anything is written: the
        attributes to write (None: none), which only a release that keeps the row can write."""
        if attributes is None and keep_row is None:
            return None      # the common release: nothing to check
        if keep_row is not None:
            require_bool('keep_row', keep_row)
        schema = self._state.schema
        checked = check_release_attributes(schema, attributes, lock.keep_row if keep_row is None else keep_row)
        check_release_size(schema, lock, checked)
        return checked or None

    def releasing(self, lock: Held, best_effort: bool, attributes: Optional[Mapping[str, Any]] = None,
                  keep_row: Optional[bool] = None) -> Protocol[bool]:
        """``release_lock``: one hold of a reentrant lock, or the release itself under the
        lock's mutex (a heartbeat of it under way finishes first). True when this call
        released the lock (see :attr:`ReleaseVerdict.released`), or one of its holds.
        ``attributes`` and ``keep_row`` (None: the lock's) as :meth:`attributes` checked them."""
        yield Hold(lock)
        try:
            if attributes and lock.shared:
                raise shared_refusal(lock, 'a release of it writes no attributes')
            if attributes and lock.lock_existing_item:
                raise ValueError(f'{lock.unique_identifier} is a lock on an existing item: its release writes no '
                                 'attributes (write them to the item yourself)')
            if attributes and holds_of(lock) > 1:
                raise ValueError(f'attributes are written when the last hold of {lock.unique_identifier} is released; '
                                 f'{holds_of(lock)} holds remain (it was acquired reentrantly)')
            keep = lock.keep_row if keep_row is None else keep_row
            if holds_of(lock) > 1:
                return self._release_nested(lock, best_effort)
            return (yield from self.flow(lock, best_effort, attributes, keep))
        finally:
            yield Drop(lock)

    def _release_nested(self, lock: Held, best_effort: bool) -> bool:
        """Release one hold of a lock acquired more than once (reentrantly), not the last:
        nothing is written and the answer is whether the lock is still held; a strict release of
        a lost lock still raises."""
        lock._holds -= 1
        if not best_effort and state_of(lock).status == Status.INVALID:
            state = self._state
            verdict = precheck_release(state_of(lock), state.owns(lock), best_effort, lock.unique_identifier,
                                       state.owner_name)
            if verdict is not None and verdict.error is not None:
                raise state.public_error(verdict.error)
        held: bool = state_of(lock).held
        return held

    def flow(self, lock: Held, best_effort: bool, attributes: Optional[Mapping[str, Any]] = None,
             keep_row: Optional[bool] = None) -> Protocol[bool]:
        """Release ``lock`` (the driver holds its mutex): judge first whether a write is needed,
        hand the lock to this client's longest waiter for the key in the same write if there is
        one, and apply the verdict to the lock (raising its error, if any).

        Interrupted (cancelled, Ctrl-C, ``cancel``) before the verdict: the lock is forgotten at
        once, as a best-effort release would (nobody renews it, so no heartbeat can report a
        theft that is only our own release landing), a claimed waiter goes on waiting, and the
        release is finished apart from the caller until the row no longer carries our versions.
        """
        state = self._state
        verdict = precheck_release(state_of(lock), state.owns(lock), best_effort, lock.unique_identifier,
                                   state.owner_name)
        if lock.lock_client is state.client:
            state.observations.forget(lock.unique_identifier)
        if verdict is None:
            registry = state.registry
            successor = None if lock.shared else registry.claim_successor(lock.unique_identifier)
            if successor is not None and (successor.attempt.lock_existing_item != lock.lock_existing_item or not
                                          handover_fits(state.schema, successor.attempt.item_template, attributes)):
                # A lock on an existing item and a plain one write different rows (and a row too
                # large for DynamoDB cannot be written): no handover.
                registry.hand_over(lock.unique_identifier, successor, None)
                successor = None
            versions = state_of(lock).our_versions()
            try:
                verdict = yield from self._release_protocol(lock, best_effort, successor, attributes, keep_row)
            except BaseException:
                if successor is not None:
                    registry.hand_over(lock.unique_identifier, successor, None)
                yield self.cut_short([(lock, versions)], attributes, keep_row)
                raise
        self.apply(lock, verdict, verdict.handed_over)
        return verdict.released

    def _release_protocol(self, lock: Held, best_effort: bool, successor: Optional[WaiterState],
                          attributes: Optional[Mapping[str, Any]] = None,
                          keep_row: Optional[bool] = None) -> Protocol[ReleaseVerdict]:
        """Release ``lock`` (handing it to ``successor``, a claimed waiter, if any): the verdict."""
        state = self._state
        clock = state.clock
        started = clock.monotonic()
        result = yield from release(state.release_settings, lock, clock,
                                    successor.attempt if successor is not None else None, attributes, keep_row)
        if successor is not None and not state.registry.hand_over(lock.unique_identifier, successor, result.handed) \
                and result.handed is not None:
            yield Settle(free_handed(state.release_settings, (lock.partition_key, lock.sort_key), result.handed,
                                     clock, attributes, lock.unique_identifier))
        verdict = release_verdict(result, best_effort, state.schema, lock.unique_identifier)
        return dataclasses.replace(verdict, handed_over=result.handed is not None,
                                   duration=clock.monotonic() - started)

    def apply(self, lock: Held, verdict: ReleaseVerdict, handed_over: bool = False) -> None:
        """Apply a release verdict to ``lock``; raise its error, if any. A lock handed over to a
        waiter wakes nobody else (they would only find it held)."""
        state = self._state
        if verdict.final_status is not None:
            state_of(lock).forget(verdict.final_status, verdict.loss)
            state.unregister(lock, wake=not handed_over)
        row = verdict.loss.row if verdict.loss else None
        state.emit(verdict.event, lock, status=state_of(lock).status, owner=Schema.owner_of(row),
                   error=verdict.error.message if verdict.error else verdict.detail, lease=lock.lease_duration,
                   duration=verdict.duration, handed_over=verdict.handed_over)
        if verdict.error is not None:
            raise state.public_error(verdict.error)

    def cut_short(self, locks: Sequence[Tuple[Held, Sequence[str]]],
                  attributes: Optional[Mapping[str, Any]] = None, keep_row: Optional[bool] = None) -> Settle:
        """Releases an interruption cut short: each lock is forgotten at once (nobody renews it),
        and the returned ``Settle`` finishes its release apart from the caller, until its row no
        longer carries its ``versions``."""
        state = self._state
        for lock, _ in locks:
            state_of(lock).forget(Status.RELEASED)
            state.unregister(lock)
            state.emit(Kind.RELEASE_INTERRUPTED, lock)

        def releasing_again() -> Protocol[None]:
            for lock, versions in locks:
                yield from release_again(state.release_settings, lock, versions, state.clock, lock.lease_duration,
                                         attributes, keep_row)

        return Settle(releasing_again())

    # -- close ---------------------------------------------------------------------------

    def begin_close(self) -> bool:
        """The first call of ``close()``: stop everything waiting. False on later calls."""
        state = self._state
        if state.closed:
            return False
        state.closed = True
        logger.info('Closing lock client %s', state.owner_name)
        state.shutdown.set()
        for waiter in state.registry.all_waiters():
            waiter.set()
        return True
