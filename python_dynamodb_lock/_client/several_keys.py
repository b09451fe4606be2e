"""Several keys at once, all or nothing (``acquire_locks`` / ``try_acquire_locks``) and the
release of a multi-lock: one transaction per 100 keys. The decisions are the core's
(:mod:`.._core.multi`); each key's row is adopted and installed as ``acquire_lock``'s is
(:mod:`.acquiring`), and released as ``release_lock`` releases it (:mod:`.releasing`) when a
transaction cannot free them all.
"""
from __future__ import annotations

import datetime
from typing import Any, Callable, Generic, List, Mapping, Optional, Sequence, Set, Tuple, Union

from .._core.answers import Applied
from .._core.effects import Drop, Hold, Protocol
from .._core.events import Kind
from .._core.guard import MAX_TRANSACTION_BYTES, size_of
from .._core.multi import MAX_KEYS, NotAll, acquire_all, free_all, set_name
from .._core.release import ReleaseVerdict, precheck_release
from .._core.state import Status
from .._core.write import AcquireAttempt
from .._model.errors import DynamoDBLockError
from .._common.locks import state_of
from .._model.schema import PartitionKey, Schema
from .acquiring import Acquiring
from .call import acquire_call
from .context import ClientState, Held, L
from .releasing import Releasing
from .sessions import Sessions

__all__ = ['Key', 'SeveralKeys']

#: One key of ``acquire_locks``: a partition key (sort key ``'-'``) or ``(partition_key, sort_key)``.
Key = Union[PartitionKey, Tuple[PartitionKey, str]]


class SeveralKeys(Generic[L]):
    """``acquire_locks`` and the multi-locks' release of one client."""

    def __init__(self, state: ClientState[L], sessions: Sessions, acquiring: Acquiring[L],
                 releasing: Releasing) -> None:
        self._state = state
        self._sessions = sessions
        self._acquiring = acquiring
        self._releasing = releasing

    def attempts(self, keys: Sequence[Key], retry_period: Optional[datetime.timedelta],
                 retry_timeout: Optional[datetime.timedelta],
                 additional_attributes: Optional[Mapping[str, Any]],
                 app_callback: Optional[Callable[..., Any]]) -> List[AcquireAttempt]:
        """Check the arguments of ``acquire_locks`` (before anything is written): one
        acquisition per key, each checked as ``acquire_lock`` checks its own."""
        state = self._state
        state.check_process()
        if isinstance(keys, (str, bytes, Mapping)) or not isinstance(keys, Sequence):
            raise TypeError('keys must be a list or tuple of partition keys or (partition_key, sort_key) tuples, '
                            f'not {type(keys).__name__}')
        if not 1 <= len(keys) <= MAX_KEYS:
            raise ValueError(f'keys must hold from 1 to {MAX_KEYS} keys (one TransactWriteItems call takes at most '
                             f'{MAX_KEYS} actions), got {len(keys)}; nothing was written')
        attempts: List[AcquireAttempt] = []
        seen: Set[str] = set()
        for index, key in enumerate(keys):
            if isinstance(key, tuple) and len(key) != 2:
                raise ValueError(f'keys[{index}] must be a partition key or a (partition_key, sort_key) tuple, '
                                 f'got a tuple of {len(key)}')
            partition_key, sort_key = key if isinstance(key, tuple) else (key, '-')
            call = acquire_call(state, partition_key, sort_key, retry_period, retry_timeout,
                                additional_attributes, app_callback, True)
            attempt = call.attempt(state)
            if attempt.unique_identifier in seen:
                raise ValueError(f'keys names {attempt.unique_identifier} more than once')
            seen.add(attempt.unique_identifier)
            attempts.append(attempt)
        size = size_of(attempts[0].item_template) * len(attempts)
        if size > MAX_TRANSACTION_BYTES:
            raise ValueError(f'acquiring these keys with these additional_attributes writes about {size} bytes in one '
                             f'transaction; DynamoDB takes at most {MAX_TRANSACTION_BYTES}')
        return attempts

    def acquiring(self, attempts: Sequence[AcquireAttempt], holder: object, timeout_is_error: bool,
                  member_callback: Callable[..., Any], raise_context_exception: bool) -> Protocol[Optional[List[L]]]:
        """``acquire_locks``: every key written in one transaction (:func:`acquire_all`), each
        row adopted and installed as ``acquire_lock``'s is, with ``member_callback`` (the
        multi-lock's) as its callback. None after a timeout that is not an error."""
        state = self._state
        attempts = yield from self._sessions.starting(attempts)
        outcome = yield from acquire_all(attempts, state.clock, state.shutdown.is_set, state.observations)
        if isinstance(outcome, NotAll):
            if not timeout_is_error:
                return None
            held = [(attempt, row) for attempt, row in zip(attempts, outcome.blocking) if row is not None]
            what = ', '.join(f'{attempt.unique_identifier} held by {Schema.owner_of(row)}' for attempt, row in held)
            raise DynamoDBLockError(
                DynamoDBLockError.ACQUIRE_TIMEOUT,
                f'Could not acquire all of {set_name(attempts)} within {attempts[0].retry_timeout}s: '
                f'{what or "the transaction kept conflicting"}; none of them is held',
                holder=state.describe_row(held[0][1] if held else None))
        adopted = [self._acquiring.adopt(written, member_callback, raise_context_exception, holder, attempt)
                   for attempt, written in zip(attempts, outcome.written)]
        return (yield from self._acquiring.installing_all(adopted))

    def releasing(self, locks: Sequence[L], best_effort: bool) -> Protocol[bool]:
        """A multi-lock's release: the rows of every held lock freed in one transaction per 100
        (under every lock's mutex, taken in one order); when a transaction cannot free them all
        (a key lost meanwhile, DynamoDB failing), the locks are released one by one, each judged
        on its own. Every lock is dealt with before the first error is raised. True when this
        call released every lock."""
        state = self._state
        released = True
        held: List[L] = []
        errors: List[DynamoDBLockError] = []
        pending: List[L] = []
        try:
            for lock in sorted(locks, key=lambda each: str(each.unique_identifier)):
                yield Hold(lock)
                held.append(lock)
            for lock in locks:
                verdict = precheck_release(state_of(lock), state.owns(lock), best_effort, lock.unique_identifier,
                                           state.owner_name)
                if verdict is None:
                    pending.append(lock)
                else:
                    released = self._applying(lock, verdict, errors) and released
            for start in range(0, len(pending), MAX_KEYS):
                chunk = pending[start:start + MAX_KEYS]
                started = state.clock.monotonic()
                answer = yield from free_all(state.schema, chunk, state.clock, state.settings.expiry_period,
                                             state.settings.keep_released_rows)
                for lock in chunk:
                    if isinstance(answer, Applied):
                        verdict = ReleaseVerdict(Status.RELEASED, Kind.RELEASED, released=True,
                                                 duration=state.clock.monotonic() - started)
                        released = self._applying(lock, verdict, errors) and released
                    else:
                        try:
                            released = (yield from self._releasing.flow(lock, best_effort)) and released
                        except DynamoDBLockError as error:
                            released = False
                            errors.append(error)
        except BaseException:
            left = [(lock, state_of(lock).our_versions()) for lock in pending if state_of(lock).held]
            if left:
                yield self._releasing.cut_short(left)
            raise
        finally:
            for lock in held:
                yield Drop(lock)
        if errors:
            raise errors[0]
        return released

    def _applying(self, lock: Held, verdict: ReleaseVerdict, errors: List[DynamoDBLockError]) -> bool:
        """Apply a verdict of the multi-lock's release; whether it released the lock."""
        try:
            self._releasing.apply(lock, verdict)
        except DynamoDBLockError as error:
            errors.append(error)
            return False
        return verdict.released
