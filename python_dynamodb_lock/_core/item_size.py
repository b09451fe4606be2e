"""DynamoDB's item size limit, checked before a lock's row is written with data of the
application's (``release_lock(attributes=...)``, ``lock.update_attributes``), so that a row that
cannot be stored is refused with a clear ValueError instead of failing on the wire (where a
best-effort release would leave the lock held for its lease).
"""
from __future__ import annotations

from decimal import Decimal
from typing import Any, Iterable, Mapping, Optional

from .._model.schema import (COL_ACQUISITION_ID, COL_FENCING_TOKEN, COL_LEASE_EXPIRY, COL_LOCK_SESSION,
                       COL_RECORD_VERSION_NUMBER, COL_RELEASED_AT, Schema)
from .guard import size_of
from .state import LockView

__all__ = ['MAX_ITEM_BYTES', 'check_release_size', 'check_update_size', 'handover_fits', 'lock_row_size']

#: DynamoDB's limit on the size of one item (names and values): 400 KB.
MAX_ITEM_BYTES = 400 * 1024

# Stand-ins as large as the lock's bookkeeping values get: a fencing token (a wall clock in
# microseconds and more), a lease's end, a released-at time, an acquisition id (a UUID).
_TOKEN = Decimal(10 ** 20)
_LEASE_EXPIRY = Decimal('99999999999.999999')
_RELEASED_AT = 10 ** 11
_ACQUISITION_ID = 'x' * 36


def lock_row_size(schema: Schema, lock: LockView, additional: Optional[Mapping[str, Any]]) -> int:
    """An upper estimate of the size of ``lock``'s row carrying ``additional`` as its
    additional attributes: its key, the lock's own attributes (those of a held row and of a
    released one) and ``additional``."""
    row = schema.lock_item(lock.partition_key, lock.sort_key, lock.owner_name, lock.lease_duration,
                           str(lock.record_version_number), int(lock.expiry_time or 0), additional)
    row.update({COL_FENCING_TOKEN: _TOKEN, COL_ACQUISITION_ID: _ACQUISITION_ID, COL_LEASE_EXPIRY: _LEASE_EXPIRY,
                COL_RELEASED_AT: _RELEASED_AT})
    session = getattr(lock._state, 'session_id', None)   # a lock made by hand has no state
    if session is not None:
        row[COL_LOCK_SESSION] = session
    return size_of(row)


def _refuse(size: int, what: str) -> None:
    if size > MAX_ITEM_BYTES:
        raise ValueError(f'{what} would make an item of about {size} bytes, the lock\'s own attributes included; '
                         f"DynamoDB stores at most {MAX_ITEM_BYTES} bytes (400 KB) per item: make the data smaller "
                         '(keep large values elsewhere, in S3 say, and store a reference); nothing was written')


def check_release_size(schema: Schema, lock: LockView, attributes: Optional[Mapping[str, Any]]) -> None:
    """``release_lock(attributes=...)``: the released row keeps the lock's own attributes and
    gets ``attributes`` (the lock's other additional attributes are removed).

    :raises ValueError: when that row would exceed DynamoDB's item size limit.
    """
    if attributes:
        _refuse(lock_row_size(schema, lock, attributes),
                f'release attributes= on {lock.unique_identifier}')


def check_update_size(schema: Schema, lock: LockView, values: Mapping[str, Any], remove: Iterable[str]) -> None:
    """``lock.update_attributes``: the row keeps the lock's additional attributes, less those
    removed, with ``values`` set.

    :raises ValueError: when that row would exceed DynamoDB's item size limit.
    """
    attributes = {name: value for name, value in lock.additional_attributes.items() if name not in set(remove)}
    attributes.update(values)
    _refuse(lock_row_size(schema, lock, attributes), f'update_attributes on {lock.unique_identifier}')


def handover_fits(schema: Schema, template: Mapping[str, Any], attributes: Optional[Mapping[str, Any]]) -> bool:
    """Whether a release that hands the lock to a waiter of this client (one write of the
    waiter's row, from its acquisition's item ``template``, with the release's ``attributes``)
    writes an item DynamoDB can store; when not, the release frees the row and the waiter
    tries again on its own."""
    row = {**(attributes or {}), **template, COL_FENCING_TOKEN: _TOKEN, COL_ACQUISITION_ID: _ACQUISITION_ID,
           COL_LEASE_EXPIRY: _LEASE_EXPIRY, COL_RECORD_VERSION_NUMBER: _ACQUISITION_ID,
           schema.ttl_attribute_name: _RELEASED_AT}
    return size_of(row) <= MAX_ITEM_BYTES
