"""The lock item: attribute names, and conversions between items and lock fields.

Every reserved attribute name is written here once. Items are dicts of Python values as boto3's
resource layer uses them (``str``, ``Decimal``, ``int``, ...); nothing here does I/O.
"""
from __future__ import annotations

import dataclasses
import functools
import math
from decimal import Decimal
from typing import Any, Dict, FrozenSet, Mapping, NamedTuple, Optional, Union

from boto3.dynamodb.types import Binary

__all__ = [
    'COL_ACQUISITION_ID',
    'COL_FENCING_TOKEN',
    'COL_LEASE_DURATION',
    'COL_LEASE_EXPIRY',
    'COL_LOCK_SESSION',
    'COL_OWNER_NAME',
    'COL_RECORD_VERSION_NUMBER',
    'COL_RELEASED_AT',
    'COL_SHARED_HOLDERS',
    'COL_WRITER_WAITING',
    'OWN_ATTRIBUTES',
    'Item',
    'NO_SORT_KEY',
    'PartitionKey',
    'SESSION_PREFIX',
    'Schema',
]

Item = Dict[str, Any]

#: A partition key as the clients take it: ``str`` (a string key, the published layout), ``int`` or
#: ``Decimal`` (a number key), ``bytes`` (a binary key).
PartitionKey = Union[str, int, Decimal, bytes]

# The published attribute names (DynamoDBLockClient._COL_* keep them too).
COL_OWNER_NAME = 'owner_name'
COL_LEASE_DURATION = 'lease_duration'
COL_RECORD_VERSION_NUMBER = 'record_version_number'

#: The sort key locks have on a table without a sort key (the published default sort key).
NO_SORT_KEY = '-'

# Added by this package (published clients ignore them, and drop them when they overwrite a row):
#: An integer that grows with every acquisition of the key; unchanged by heartbeats.
COL_FENCING_TOKEN = 'fencing_token'
#: Names one acquisition (a uuid4 string); unchanged by heartbeats; removed on release.
COL_ACQUISITION_ID = 'acquisition_id'
#: When the holder's lease runs out on the holder's own wall clock (epoch seconds), rewritten at
#: every renewal; read only by waiters that declare a maximum clock skew (``max_clock_skew``).
COL_LEASE_EXPIRY = 'lease_expiry'
#: Set (epoch seconds) on a released row that is kept so that the fencing token survives the
#: release; such a row is free. Its lease is 0, so published clients take it over too.
COL_RELEASED_AT = 'released_at'
#: On a lock row held under a client session (``session=True``): the partition key of that
#: session's row, whose renewals keep the lock alive (see docs/sessions.rst).
COL_LOCK_SESSION = 'lock_session'
#: The partition keys of session rows start with this (then the owner name, '/', a uuid).
SESSION_PREFIX = 'python_dynamodb_lock/session/'

# Shared (read) locks (docs/shared_locks.rst). A row with shared holders keeps the published
# attributes of a held lock: ``owner_name`` (the holder that wrote last), ``record_version_number``
# (new at every shared acquire, renewal and release, so published clients never see it unchanged
# while a shared holder lives) and ``lease_duration`` (at least every shared holder's lease). It
# has no ``acquisition_id`` and no ``lease_expiry``; its ``fencing_token`` is the last exclusive
# acquisition's.
#: A map {holder id: {'owner': str, 'version': str, 'lease': number}}, one entry per shared holder;
#: each holder renews its own entry's version. Present only while the row is shared.
COL_SHARED_HOLDERS = 'shared_holders'
#: An exclusive acquirer waiting for shared holders to leave: {'id', 'owner', 'version', 'lease'};
#: new shared acquirers refuse while it lives (its version changes at every poll of the waiter).
COL_WRITER_WAITING = 'writer_waiting'
#: The fields of one shared entry and of the writer-waiting marker.
SHARED_OWNER, SHARED_VERSION, SHARED_LEASE, WRITER_ID = 'owner', 'version', 'lease', 'id'

#: Every name this package writes for itself; additional attributes may not use them. Each is a
#: plain identifier and no DynamoDB reserved word, so expressions may name it directly.
OWN_ATTRIBUTES = frozenset({COL_OWNER_NAME, COL_LEASE_DURATION, COL_RECORD_VERSION_NUMBER, COL_FENCING_TOKEN,
                            COL_ACQUISITION_ID, COL_RELEASED_AT, COL_LEASE_EXPIRY, COL_SHARED_HOLDERS,
                            COL_WRITER_WAITING, COL_LOCK_SESSION})


def binary_bytes(value: Any) -> bytes:
    """The bytes of a ``boto3.dynamodb.types.Binary`` (how boto3 reads binary values back)."""
    return bytes(getattr(value, 'value', value))


def lease_expiry(wall_now: float, lease_duration: float) -> Decimal:
    """The value of ``lease_expiry`` for a write made at ``wall_now``: rounded up to the
    millisecond, never before the end of the lease the holder counts itself."""
    return Decimal(math.ceil((wall_now + lease_duration) * 1000)) / 1000


class TableLayout(NamedTuple):
    """The shape of a client's lock table (``client.table_layout``): what the constructor was
    given or :meth:`for_table` read from the table."""

    table_name: str
    partition_key_name: str
    partition_key_type: str   #: 'S', 'N' or 'B'
    sort_key_name: Optional[str]   #: None: the table's key is the partition key alone
    ttl_attribute_name: str


@dataclasses.dataclass(frozen=True)
class Schema:
    """Where the lock attributes live in one table, and how items map to lock fields."""

    table_name: str
    partition_key_name: str
    sort_key_name: Optional[str]      # None: a table with a partition key only
    ttl_attribute_name: str
    partition_key_type: str = 'S'     # the table's HASH key type: S, N or B

    @functools.cached_property
    def reserved_names(self) -> FrozenSet[str]:
        """Attribute names the lock writes itself; ``additional_attributes`` may not use them."""
        keys = {self.partition_key_name, self.ttl_attribute_name}
        if self.sort_key_name is not None:
            keys.add(self.sort_key_name)
        return frozenset(keys) | OWN_ATTRIBUTES

    @functools.cached_property
    def key_names(self) -> FrozenSet[str]:
        return frozenset(name for name in (self.partition_key_name, self.sort_key_name) if name is not None)

    @property
    def layout(self) -> TableLayout:
        return TableLayout(self.table_name, self.partition_key_name, self.partition_key_type, self.sort_key_name,
                           self.ttl_attribute_name)

    def key(self, partition_key: PartitionKey, sort_key: str) -> Item:
        if self.sort_key_name is None:
            return {self.partition_key_name: partition_key}
        return {self.partition_key_name: partition_key, self.sort_key_name: sort_key}

    def lock_item(self, partition_key: PartitionKey, sort_key: str, owner_name: str, lease_duration: float,
                  record_version_number: str, expiry_time: int,
                  additional_attributes: Optional[Mapping[str, Any]] = None) -> Item:
        """The whole item of a lock as the published package writes it; the lock's own
        attributes win over additional ones."""
        item: Item = dict(additional_attributes or {})
        item.update(self.key(partition_key, sort_key))
        item.update({
            COL_OWNER_NAME: owner_name,
            COL_LEASE_DURATION: Decimal(repr(float(lease_duration))),
            COL_RECORD_VERSION_NUMBER: record_version_number,
            self.ttl_attribute_name: int(expiry_time),
        })
        return item

    def lock_fields(self, item: Mapping[str, Any], default_lease: float) -> Dict[str, Any]:
        """The constructor arguments of ``BaseDynamoDBLock`` for an item read from the table."""
        partition_key = item[self.partition_key_name]
        if isinstance(partition_key, Binary):    # boto3 reads a binary key back as Binary
            partition_key = binary_bytes(partition_key)
        reserved = self.reserved_names
        return {
            'partition_key': partition_key,
            'sort_key': item[self.sort_key_name] if self.sort_key_name is not None else NO_SORT_KEY,
            'owner_name': item.get(COL_OWNER_NAME, ''),
            'lease_duration': self.lease_of(item, default_lease),
            'record_version_number': item.get(COL_RECORD_VERSION_NUMBER, ''),
            'expiry_time': int(self.expiry_of(item) or 0),
            'additional_attributes': {name: value for name, value in item.items() if name not in reserved},
            'fencing_token': self.fencing_token_of(item),
        }

    def is_lock_row(self, item: Mapping[str, Any]) -> bool:
        """Whether a row of the table is a held lock: not a released row, and not a row that
        other programs keep in the table."""
        return (COL_RECORD_VERSION_NUMBER in item and self.partition_key_name in item
                and (self.sort_key_name is None or self.sort_key_name in item) and not self.is_released(item)
                and not self.is_session_row(item))

    def is_session_row(self, item: Mapping[str, Any]) -> bool:
        """Whether a row is a client session's row (its partition key is under ``SESSION_PREFIX``)."""
        key = item.get(self.partition_key_name)
        return isinstance(key, str) and key.startswith(SESSION_PREFIX)

    @staticmethod
    def session_of(item: Optional[Mapping[str, Any]]) -> Optional[str]:
        """The session a lock row is held under (its session row's partition key), or None."""
        value = item.get(COL_LOCK_SESSION) if item else None
        return value if isinstance(value, str) and value else None

    @staticmethod
    def is_released(item: Optional[Mapping[str, Any]]) -> bool:
        """A released row kept for its fencing token: the key is free."""
        return bool(item) and COL_RELEASED_AT in item  # type: ignore[operator]

    @staticmethod
    def holds_no_lock(item: Optional[Mapping[str, Any]]) -> bool:
        """No row, a released row, or a row without lock attributes (an item whose lock was
        removed): nobody holds the key there."""
        return not item or COL_RELEASED_AT in item or item.get(COL_RECORD_VERSION_NUMBER) is None

    @staticmethod
    def fencing_token_of(item: Optional[Mapping[str, Any]]) -> Optional[int]:
        """The row's fencing token, or None (a row written by a published 0.9.x client)."""
        value = item.get(COL_FENCING_TOKEN) if item else None
        try:
            return None if value is None else int(value)
        except (TypeError, ValueError, ArithmeticError):
            return None

    @staticmethod
    def acquisition_of(item: Optional[Mapping[str, Any]]) -> Optional[str]:
        value = item.get(COL_ACQUISITION_ID) if item else None
        return None if value is None else str(value)

    def extra_names(self, item: Optional[Mapping[str, Any]]) -> FrozenSet[str]:
        """The additional attributes a row carries (what a write replacing it must remove)."""
        return frozenset(item or ()) - self.reserved_names

    @staticmethod
    def version_of(item: Optional[Mapping[str, Any]]) -> Optional[str]:
        if not item:
            return None
        version = item.get(COL_RECORD_VERSION_NUMBER)
        return None if version is None else str(version)

    @staticmethod
    def owner_of(item: Optional[Mapping[str, Any]]) -> str:
        """Who holds a row, for messages: 'nobody' when there is none."""
        if not item:
            return 'nobody'
        return str(item.get(COL_OWNER_NAME, 'an unknown owner'))

    @staticmethod
    def lease_of(item: Mapping[str, Any], default: float) -> float:
        """The lease stored in a row, in seconds; ``default`` when it is missing or unreadable."""
        try:
            return float(item.get(COL_LEASE_DURATION, default))
        except (TypeError, ValueError, ArithmeticError):
            return default

    @staticmethod
    def lease_expiry_of(item: Mapping[str, Any]) -> Optional[float]:
        value = item.get(COL_LEASE_EXPIRY)
        try:
            return None if value is None else float(value)
        except (TypeError, ValueError, ArithmeticError):
            return None

    def expiry_of(self, item: Mapping[str, Any]) -> Optional[float]:
        """The TTL epoch stored in a row, or None when it is missing or unreadable."""
        value = item.get(self.ttl_attribute_name)
        try:
            return None if value is None else float(value)
        except (TypeError, ValueError, ArithmeticError):
            return None
