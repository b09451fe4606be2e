"""Shared (read) locks: how a row with shared holders is read and judged. Pure: no I/O.

A row is *shared* while it carries the ``shared_holders`` map (and is not released). Every entry
of the map is one shared holder; the ``writer_waiting`` marker is an exclusive acquirer waiting
for them to leave. Liveness is judged exactly as for exclusive holders: an entry (or the marker)
is presumed dead once its ``version`` has stayed the same for its own ``lease``, timed by the
observer on its own monotonic clock since it first saw that version (:class:`SharedWatch`). No
two hosts' clocks are compared. See docs/shared_locks.rst.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Dict, List, Mapping, NamedTuple, Optional, Tuple

from .._model.schema import COL_SHARED_HOLDERS, COL_WRITER_WAITING, SHARED_LEASE, SHARED_OWNER, SHARED_VERSION, Schema
from .._model.schema import WRITER_ID
from .state import FirstSeen

__all__ = ['MAX_SHARED_HOLDERS', 'Marker', 'SharedHolder', 'SharedJudgement', 'SharedWatch', 'describe_holders',
           'entry_of', 'entry_view',
           'holders_of', 'is_shared', 'marker_of']

#: The most shared holders one key may have at once; one more waits as if the key were held.
#: An entry weighs about 130 bytes (30-character owner names), so the row stays far below
#: DynamoDB's 400 KB item limit (which would allow about 3,000).
MAX_SHARED_HOLDERS = 1000


class SharedHolder(NamedTuple):
    """One shared holder of a key, as its entry in the row says (``BaseDynamoDBLock.shared_holders``)."""

    holder_id: str          #: the holder's acquisition id (the entry's key in the map)
    owner_name: str
    record_version_number: str   #: the entry's version: it changes at each of the holder's renewals
    lease_duration: float


class Marker(NamedTuple):
    """The writer-waiting marker: an exclusive acquirer waiting for the shared holders to leave."""

    waiter_id: str
    owner_name: str
    version: str
    lease_duration: float


def _lease(value: Any, default: float) -> float:
    try:
        return float(value)
    except (TypeError, ValueError, ArithmeticError):
        return default


def is_shared(row: Optional[Mapping[str, Any]]) -> bool:
    """Whether ``row`` is held by shared holders (a row with the map that is not released)."""
    return bool(row) and isinstance(row.get(COL_SHARED_HOLDERS), Mapping) and not Schema.is_released(row)  # type: ignore[union-attr]


def holders_of(row: Optional[Mapping[str, Any]], default_lease: float = 0.0) -> Tuple[SharedHolder, ...]:
    """The shared holders a row names, sorted by holder id (none for a row that is not shared)."""
    if not is_shared(row):
        return ()
    assert row is not None
    holders = []
    for holder_id, entry in sorted(dict(row[COL_SHARED_HOLDERS]).items()):
        if isinstance(entry, Mapping):
            holders.append(SharedHolder(str(holder_id), str(entry.get(SHARED_OWNER, '')),
                                        str(entry.get(SHARED_VERSION, '')),
                                        _lease(entry.get(SHARED_LEASE), default_lease)))
    return tuple(holders)


def describe_holders(row: Optional[Mapping[str, Any]], owner_name: str) -> Optional[str]:
    """Who holds a shared row, for messages (None for a row that is not shared): every holder's
    owner, and, when some of them are ``owner_name`` (this client), that an exclusive acquisition
    waits for those too."""
    holders = holders_of(row)
    if not holders:
        return None
    counts: Dict[str, int] = {}
    for holder in holders:
        counts[holder.owner_name] = counts.get(holder.owner_name, 0) + 1
    owners = ', '.join(f'{owner} ({count} times)' if count > 1 else owner for owner, count in sorted(counts.items()))
    text = f'{len(holders)} shared holder{"s" if len(holders) > 1 else ""}: {owners}'
    ours = counts.get(owner_name, 0)
    if ours:
        text += (f'; {ours} of them this client ({owner_name}): an exclusive acquisition waits for every shared '
                 'holder, this client\'s own too (a shared lock is not upgraded: release it first)')
    return text


def entry_of(row: Optional[Mapping[str, Any]], holder_id: str) -> Optional[SharedHolder]:
    """The entry of ``holder_id`` in a shared row, or None."""
    for holder in holders_of(row):
        if holder.holder_id == holder_id:
            return holder
    return None


def marker_of(row: Optional[Mapping[str, Any]], default_lease: float = 0.0) -> Optional[Marker]:
    """The writer-waiting marker a row carries (a released row may keep one), or None."""
    marker = row.get(COL_WRITER_WAITING) if row else None
    if not isinstance(marker, Mapping):
        return None
    return Marker(str(marker.get(WRITER_ID, '')), str(marker.get(SHARED_OWNER, '')),
                  str(marker.get(SHARED_VERSION, '')), _lease(marker.get(SHARED_LEASE), default_lease))


def entry_view(row: Optional[Dict[str, Any]], holder_id: str) -> Optional[Dict[str, Any]]:
    """The row as a shared holder's own protocol judges it: the row with the version of its
    entry as ``record_version_number`` (so that the exclusive lock's rules for "is this still
    ours?" apply unchanged), or the row itself when it has no entry of ``holder_id`` (then the
    row's version is never one of ours: the entry was removed, the lock lost)."""
    entry = entry_of(row, holder_id)
    if row is None or entry is None:
        return row
    return {**row, 'record_version_number': entry.record_version_number}


@dataclasses.dataclass(frozen=True)
class SharedJudgement:
    """What an observer makes of a row, now: the shared holders presumed dead ({id: version}),
    whether some live, and the marker (dead: its version unchanged for its lease)."""

    dead: Dict[str, str]
    live: Tuple[SharedHolder, ...]
    marker: Optional[Marker]
    marker_dead: bool
    dead_for: float = 0.0     # how long the most recently changed dead entry has been unchanged

    @property
    def marker_live(self) -> bool:
        return self.marker is not None and not self.marker_dead


class SharedWatch:
    """An observer's memory of the entry versions (and marker versions) it has seen, and since
    when (on its own monotonic clock): what tells a dead shared holder from a live one.

    Given ``memory`` (the client's :class:`~python_dynamodb_lock._core.acquire.Observations`,
    kept across calls) and the lock's ``key``, what it sees is kept there, as an exclusive
    holder's version is: a later call (``try_acquire_lock``, ``try_acquire_locks``, another
    ``acquire_lock``) goes on from what an earlier one saw, so a dead reader's entry left
    unchanged for its lease is taken over by a later try, however short each try is. Without
    it, the memory lasts as long as the watch (one call)."""

    def __init__(self, memory: Optional[FirstSeen] = None, key: str = '') -> None:
        self._seen: Dict[str, Tuple[str, float]] = {}
        self._memory = memory
        self._key = key
        self.guessed = False    # a shared acquisition's first write was a guess (see AcquireAttempt.join_beside)

    def unchanged_for(self, name: str, version: str, now: float) -> float:
        """How long ``name`` (an entry, the marker, the row) has carried ``version``, as seen."""
        if self._memory is not None:
            return now - self._memory.first_seen(f'shared|{self._key}|{name}', version, now)
        seen = self._seen.get(name)
        if seen is None or seen[0] != version:
            self._seen[name] = (version, now)
            return 0.0
        return now - seen[1]

    def judge(self, row: Optional[Mapping[str, Any]], now: float, default_lease: float,
              own_marker: Optional[str] = None) -> SharedJudgement:
        """Judge ``row`` as seen now; ``own_marker`` is the observer's own waiter id (its
        marker is never dead to itself)."""
        dead: Dict[str, str] = {}
        live = []
        quiet: List[float] = []
        for holder in holders_of(row, default_lease):
            unchanged_for = self.unchanged_for('h:' + holder.holder_id, holder.record_version_number, now)
            if unchanged_for >= holder.lease_duration:
                dead[holder.holder_id] = holder.record_version_number
                quiet.append(unchanged_for)
            else:
                live.append(holder)
        marker = marker_of(row, default_lease)
        marker_dead = False
        if marker is not None and marker.waiter_id != own_marker:
            marker_dead = self.unchanged_for('w:' + marker.waiter_id, marker.version, now) >= marker.lease_duration
        return SharedJudgement(dead, tuple(live), marker, marker_dead, min(quiet, default=0.0))

