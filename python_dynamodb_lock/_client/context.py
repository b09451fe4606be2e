"""What the parts of the orchestration share: one client's settings, clock, schema, registry,
observer, owner name, closed flag and the bookkeeping that is neither a lock's nor a call's.

:class:`ClientState` is made once per client by :func:`make_state`; each feature module holds
it. Its helpers (``emit``, ``owns``, ``describe_row`` ...) are the small vocabulary they share.
"""
from __future__ import annotations

import os
from typing import Any, Callable, ContextManager, Generic, List, Mapping, Optional, Protocol, Sequence, TypeVar

from .._common.clock import Clock, SystemClock
from .._common.config import Settings, make_settings
from .._core.acquire import Observations
from .._core.events import Event, Kind
from .._core.heartbeat import Batching, HeartbeatSettings
from .._core.release import ReleaseSettings
from .._core.session import Session, SessionSettings
from .._core.shared import holders_of
from .._model.errors import DynamoDBLockError, Reason
from .._common.locks import BaseDynamoDBLock, HeldLock
from .._common.observe import MetricsHook, Observer, logger
from .._common.registry import Registry
from .._model.schema import Schema
from .shared import JoinGuesses, slot

__all__ = ['ClientState', 'Flag', 'Held', 'L', 'check_construction', 'make_state']


class Flag(Protocol):
    """The client's shutdown event, as the orchestration sees it (``threading.Event`` or
    ``asyncio.Event``)."""

    def is_set(self) -> bool: ...

    def set(self) -> None: ...


#: A lock held by this process, as the orchestration sees it (``DynamoDBLock`` or
#: ``AsyncDynamoDBLock``: what both share).
Held = HeldLock
L = TypeVar('L', bound=HeldLock)


def check_construction(low_level_client: object, app_callback_executor: object, metrics: object,
                       background_heartbeats: object, **setting_arguments: Any) -> Settings:
    """Check every constructor argument (before anything starts): the client's settings."""
    settings = make_settings(low_level_client=low_level_client, **setting_arguments)
    if app_callback_executor is not None and not callable(getattr(app_callback_executor, 'submit', None)):
        raise TypeError('app_callback_executor must be a concurrent.futures.Executor (or None)')
    if metrics is not None and not callable(metrics):
        raise TypeError(f'metrics must be a callable (it gets a LockEvent), not {type(metrics).__name__}')
    if not isinstance(background_heartbeats, bool):
        raise TypeError(f'background_heartbeats must be a bool, not {type(background_heartbeats).__name__}')
    if settings.session and not background_heartbeats:
        raise ValueError('session=True needs background_heartbeats=True: the session is renewed in the background')
    for warning in settings.warnings:
        logger.warning('%s', warning)
    return settings


class ClientState(Generic[L]):
    """One client's shared state (see the module docstring). ``client`` is the public face
    (a lock is this client's when its ``lock_client`` is it); ``new_lock`` makes its lock
    objects; ``shutdown`` is set by ``close()``; ``guard`` makes the mutexes of what the
    threads (or tasks) of a client share (a ``threading.Lock``)."""

    def __init__(self, settings: Settings, clock: Clock, observer: Observer, client: object,
                 new_lock: Callable[..., L], shutdown: Flag, guard: Callable[[], ContextManager[Any]]) -> None:
        self.settings = settings
        self.schema: Schema = settings.schema
        self.clock = clock
        self.observer = observer
        self.client = client
        self.new_lock = new_lock
        self.shutdown = shutdown
        self.owner_name = settings.owner_name
        self.closed = False
        self.pid = os.getpid()
        self.registry: Registry[L] = Registry()
        self.batching = Batching(settings.heartbeat_batch_size)
        self.release_settings = ReleaseSettings(settings.schema, settings.expiry_period, settings.keep_released_rows)
        self.heartbeat_settings = HeartbeatSettings(
            settings.schema, settings.heartbeat_period, settings.safe_period, settings.expiry_period,
            settings.heartbeat_tps, settings.heartbeat_batch_size)
        # The holders' versions seen by this client's acquisitions, kept across calls.
        self.observations = Observations(guard=guard())   # the threads of a client share it
        # Whether a shared acquisition of a key will join other holders (shared.py).
        self.join_guesses = JoinGuesses()
        self.session = Session(settings.owner_name, guard()) if settings.session else None
        self.session_settings = SessionSettings(settings.schema, settings.owner_name, settings.lease_duration,
                                                settings.expiry_period, settings.expiry_period)

    def check_process(self) -> None:
        """Refuse to work in a process forked from the one that made the client.

        A forked child has none of the client's background threads, and shares the parent's
        connection pool and held locks: it could neither keep a lock alive nor tell its locks
        from the parent's. The client must be created after forking.
        """
        if os.getpid() != self.pid:
            raise DynamoDBLockError(
                DynamoDBLockError.UNKNOWN,
                f'This lock client was created in process {self.pid} and cannot be used in process '
                f'{os.getpid()}, a fork of it: create the boto3 resource and the lock client after '
                'forking (for example in a gunicorn post_fork hook or a Celery worker_process_init signal)',
                reason=Reason.FORKED,
            )

    def forked(self) -> bool:
        """Whether this client is being used in a process forked from the one that made it."""
        return os.getpid() != self.pid

    def emit(self, kind: Kind, lock: Optional[object] = None, key: str = '', **fields: object) -> None:
        self.observer.emit(Event(kind, key or getattr(lock, 'unique_identifier', ''), lock, fields))

    def owns(self, lock: L) -> bool:
        return lock.lock_client is self.client and self.registry.holds(lock, slot(lock))

    def unregister(self, lock: L, wake: bool = True) -> None:
        self.registry.forget(lock, slot(lock))
        if wake:
            self.registry.wake_longest_waiting(lock.unique_identifier)

    def not_owned(self, lock: BaseDynamoDBLock) -> DynamoDBLockError:
        return DynamoDBLockError(DynamoDBLockError.LOCK_NOT_OWNED, f'{lock.unique_identifier} is not held by '
                                 f'this client ({self.owner_name})')

    def describe_row(self, row: Optional[Mapping[str, Any]]) -> Any:
        """A ``BaseDynamoDBLock`` for a row (None for no row, or a released one); the lock
        attributes a row lacks (one written by another program) read as empty."""
        if not row or Schema.is_released(row):
            return None
        described = BaseDynamoDBLock(**self.schema.lock_fields(row, self.settings.lease_duration))
        described.shared_holders = holders_of(row, self.settings.lease_duration)
        return described

    def public_error(self, error: DynamoDBLockError) -> DynamoDBLockError:
        """The error with ``holder`` as a ``BaseDynamoDBLock`` instead of a raw row."""
        if isinstance(error.holder, dict):
            error.holder = self.describe_row(error.holder)
        return error

    def rows_to_locks(self, items: Sequence[Mapping[str, Any]]) -> List[Any]:
        return [self.describe_row(item) for item in items if self.schema.is_lock_row(item)]


def make_state(settings: Settings, clock: Optional[Clock], dispatch: Callable[..., None],
               metrics: Optional[MetricsHook],
               client: object, new_lock: Callable[..., L], shutdown: Flag,
               guard: Callable[[], ContextManager[Any]]) -> ClientState[L]:
    """The state of a client whose arguments :func:`check_construction` checked."""
    observer = Observer(dispatch, metrics, clock, settings.keep_released_rows)
    return ClientState(settings, clock if clock is not None else SystemClock(), observer, client, new_lock,
                       shutdown, guard)

