"""Shared (read) locks, as the orchestration sees them, in one place: where the registry keeps a
shared hold, the per-key guess of whether a shared acquisition will join other holders, what a
shared acquisition may not be asked, and what a shared lock refuses (docs/shared_locks.rst).

The protocol is in ``_core/shared.py`` and ``_core/shared_ops.py``, the requests in
``_wire/shared_requests.py``. May import the core and the leaf helpers; no other feature module.
"""
from __future__ import annotations

from typing import Any, Dict, Mapping, Optional

from .._common.locks import HeldLock, state_of

__all__ = ['JoinGuesses', 'check_shared_call', 'shared_refusal', 'slot']

#: How many keys the guesses of shared acquisitions are kept for (then they start over).
MAX_JOIN_GUESSES = 10_000


def slot(lock: HeldLock) -> str:
    """Where the registry keeps a held lock: its key, or for a shared lock its key and its
    holder id (a client may hold several shared locks on one key)."""
    if lock.shared:
        return f'{lock.unique_identifier}\x00{state_of(lock).acquisition_id}'
    return str(lock.unique_identifier)


class JoinGuesses:
    """Keys whose last shared acquisition here joined other holders: the next one guesses the
    same with its first write (one write instead of two on a key that stays shared).
    ``joined`` is read as a mapping on every acquisition (``joined.get(key, False)``)."""

    def __init__(self) -> None:
        self.joined: Dict[str, bool] = {}

    def remember(self, unique_identifier: str, beside_others: bool) -> None:
        """What a shared acquisition of the key found (bounded: the guesses start over)."""
        if len(self.joined) >= MAX_JOIN_GUESSES:
            self.joined.clear()
        self.joined[unique_identifier] = beside_others


def check_shared_call(extra: Optional[Mapping[str, Any]], existing: bool, sessions: bool) -> None:
    """Refuse what a shared acquisition may not be asked (before anything is written)."""
    if extra:
        raise ValueError('a shared lock takes no additional_attributes (the row belongs to all its holders)')
    if existing:
        raise ValueError('a shared lock cannot be on an existing item (lock_existing_item=True)')
    if sessions:
        raise ValueError('a shared lock is not held under a client session (session=True): use a client '
                         'without one for shared locks')


def shared_refusal(lock: HeldLock, why: str) -> ValueError:
    """What a shared lock answers to a call meant for an exclusive one (``why``: what it lacks)."""
    return ValueError(f'{lock.unique_identifier} is a shared lock: {why}')
