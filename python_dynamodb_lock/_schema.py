"""The lock item: attribute names, and conversions between items and lock fields.

Every reserved attribute name is written here once. Items are dicts of Python values as boto3's
resource layer uses them (``str``, ``Decimal``, ``int``, ...); nothing here does I/O.
"""
from __future__ import annotations

import dataclasses
from decimal import Decimal
from typing import Any, Dict, FrozenSet, Mapping, Optional

__all__ = [
    'COL_LEASE_DURATION',
    'COL_OWNER_NAME',
    'COL_RECORD_VERSION_NUMBER',
    'Item',
    'Schema',
]

Item = Dict[str, Any]

# The published attribute names (DynamoDBLockClient._COL_* keep them too).
COL_OWNER_NAME = 'owner_name'
COL_LEASE_DURATION = 'lease_duration'
COL_RECORD_VERSION_NUMBER = 'record_version_number'


@dataclasses.dataclass(frozen=True)
class Schema:
    """Where the lock attributes live in one table, and how items map to lock fields."""

    table_name: str
    partition_key_name: str
    sort_key_name: str
    ttl_attribute_name: str

    @property
    def reserved_names(self) -> FrozenSet[str]:
        """Attribute names the lock writes itself; ``additional_attributes`` may not use them."""
        return frozenset({
            self.partition_key_name, self.sort_key_name, self.ttl_attribute_name,
            COL_OWNER_NAME, COL_LEASE_DURATION, COL_RECORD_VERSION_NUMBER,
        })

    def key(self, partition_key: str, sort_key: str) -> Item:
        return {self.partition_key_name: partition_key, self.sort_key_name: sort_key}

    def lock_item(self, partition_key: str, sort_key: str, owner_name: str, lease_duration: float,
                  record_version_number: str, expiry_time: int,
                  additional_attributes: Optional[Mapping[str, Any]] = None) -> Item:
        """The whole item of a lock; the lock's own attributes win over additional ones."""
        item: Item = dict(additional_attributes or {})
        item.update({
            self.partition_key_name: partition_key,
            self.sort_key_name: sort_key,
            COL_OWNER_NAME: owner_name,
            COL_LEASE_DURATION: Decimal(repr(float(lease_duration))),
            COL_RECORD_VERSION_NUMBER: record_version_number,
            self.ttl_attribute_name: int(expiry_time),
        })
        return item

    def lock_fields(self, item: Mapping[str, Any], default_lease: float) -> Dict[str, Any]:
        """The constructor arguments of ``BaseDynamoDBLock`` for an item read from the table."""
        return {
            'partition_key': item[self.partition_key_name],
            'sort_key': item[self.sort_key_name],
            'owner_name': item.get(COL_OWNER_NAME, ''),
            'lease_duration': self.lease_of(item, default_lease),
            'record_version_number': item.get(COL_RECORD_VERSION_NUMBER, ''),
            'expiry_time': int(self.expiry_of(item) or 0),
            'additional_attributes': {name: value for name, value in item.items()
                                      if name not in self.reserved_names},
        }

    def is_lock_row(self, item: Mapping[str, Any]) -> bool:
        """Whether a row of the table is a lock (other programs may keep other rows there)."""
        return COL_RECORD_VERSION_NUMBER in item and self.partition_key_name in item and self.sort_key_name in item

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

    def expiry_of(self, item: Mapping[str, Any]) -> Optional[float]:
        """The TTL epoch stored in a row, or None when it is missing or unreadable."""
        value = item.get(self.ttl_attribute_name)
        try:
            return None if value is None else float(value)
        except (TypeError, ValueError, ArithmeticError):
            return None
