"""One acquire call, checked once: :class:`AcquireCall` is what ``acquire_lock``,
``try_acquire_lock``, ``acquire_first_lock``, ``acquire_locks`` and ``try_acquire_locks`` were
asked (for one key), every argument checked before anything is written; the core's
``AcquireAttempt`` is made of it (:meth:`AcquireCall.attempt`), where each option is used.
"""
from __future__ import annotations

import dataclasses
import datetime
from typing import Any, Callable, Mapping, Optional

from .._model import validation
from .._common.config import check_additional_attributes, check_key, lock_lease
from .._model.validation import require_bool
from .._common.locks import unique_identifier_of
from .._model.schema import Item, PartitionKey
from .._core.write import AcquireAttempt
from .context import ClientState
from .sessions import session_template
from .shared import check_shared_call

__all__ = ['AcquireCall', 'acquire_call']


@dataclasses.dataclass(frozen=True)
class AcquireCall:
    """One acquisition of one key, as asked for (see the module docstring)."""

    partition_key: PartitionKey
    sort_key: str
    unique_identifier: str
    item_template: Item           # the lock item to write, without version, TTL and acquisition id
    retry_period: float
    retry_timeout: float
    app_callback: Optional[Callable[..., Any]]
    raise_context_exception: bool
    timeout_is_error: bool = True        # False: a timeout answers None (the try_ entry points)
    reentrant: bool = False              # the holder's own lock is returned with one more hold
    shared: bool = False                 # a shared (read) lock (docs/shared_locks.rst)
    keep_row: bool = True                # the lock's row is kept (marked released) at release
    lock_existing_item: bool = False     # the lock is added to the item at the key (UpdateItem)
    only_if_exists: bool = False         # ... only if that item exists

    def attempt(self, state: ClientState[Any]) -> AcquireAttempt:
        """The core's description of this acquisition, by the client of ``state``."""
        settings = state.settings
        template = self.item_template if state.session is None else session_template(state, self.item_template)
        return AcquireAttempt(state.schema, self.partition_key, self.sort_key, self.unique_identifier, template,
                              self.retry_period, self.retry_timeout, settings.expiry_period, settings.lease_duration,
                              self.keep_row, settings.max_clock_skew, self.shared,
                              join_beside=state.join_guesses.joined.get(self.unique_identifier, False),
                              lock_existing_item=self.lock_existing_item, only_if_exists=self.only_if_exists,
                              sessions=state.session is not None)


def acquire_call(state: ClientState[Any], partition_key: PartitionKey, sort_key: str,
                 retry_period: Optional[datetime.timedelta], retry_timeout: Optional[datetime.timedelta],
                 additional_attributes: Optional[Mapping[str, Any]], app_callback: Optional[Callable[..., Any]],
                 raise_context_exception: bool, timeout_is_error: bool = True, *, reentrant: bool = False,
                 shared: bool = False, lease_duration: Optional[datetime.timedelta] = None,
                 lock_existing_item: bool = False, only_if_exists: bool = False,
                 keep_row: Optional[bool] = None) -> AcquireCall:
    """Check one acquisition's arguments for the client of ``state`` (before anything is
    written). ``lease_duration`` (None: the client's) is the lock's own lease, checked as the
    client's."""
    state.check_process()
    settings = state.settings
    schema = settings.schema
    check_key(schema, partition_key, sort_key)
    lease = lock_lease(settings, lease_duration)
    existing = require_bool('lock_existing_item', lock_existing_item)
    only = require_bool('only_if_exists', only_if_exists)
    if only and not existing:
        raise ValueError('only_if_exists=True needs lock_existing_item=True: a lock of its own always creates '
                         'its row')
    if existing and additional_attributes:
        raise ValueError('a lock on an existing item (lock_existing_item=True) takes no additional_attributes: '
                         "they would mix with the item's own attributes; keep the data in the item itself")
    keep = settings.keep_released_rows if keep_row is None else require_bool('keep_row', keep_row)
    retry_period_s = (settings.heartbeat_period if retry_period is None
                      else validation.require_duration('retry_period', retry_period, allow_zero=True))
    retry_timeout_s = (lease + settings.heartbeat_period if retry_timeout is None
                       else validation.require_duration('retry_timeout', retry_timeout, allow_zero=True))
    validation.require_callable('app_callback', app_callback)
    extra = check_additional_attributes(schema, additional_attributes)
    item = schema.lock_item(partition_key, sort_key, settings.owner_name, lease, '', 0, extra)
    if existing:
        del item[schema.ttl_attribute_name]   # never on an existing item: its TTL would delete it
    require_bool('reentrant', reentrant)
    if require_bool('shared', shared):
        check_shared_call(extra, existing, state.session is not None)
    return AcquireCall(partition_key, sort_key, unique_identifier_of(partition_key, sort_key), item, retry_period_s,
                       retry_timeout_s, app_callback, raise_context_exception, timeout_is_error, reentrant, shared,
                       keep, existing, only)

