"""The one protocol stepper: send a value (or throw an exception) into a generator protocol and
get its next effect, or :class:`Done` with its result. Pure: no I/O, no waits.

Every generator the package steps goes through :func:`advance`: the lock protocols (the two
drivers, ``_drivers/``), table administration (``_common/tables.py``) and the recipes (``_recipes/``).
What an effect *is* (a :mod:`~python_dynamodb_lock._core.effects` value, an ``AdminCall``, a
recipe's operation) is the caller's business; the stepper only tells a yielded effect from a
finished protocol. A driver may hand it ``local``: the effects that need no I/O (events,
registry updates, giving back a mutex), by type, performed on the way.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Generator, Generic, Mapping, Optional, TypeVar, Union

__all__ = ['Done', 'advance']

E = TypeVar('E')
R = TypeVar('R')


@dataclasses.dataclass(frozen=True)
class Done(Generic[R]):
    """A protocol has finished with ``value``."""

    value: R


def advance(protocol: Generator[E, Any, R], value: object, thrown: Optional[BaseException] = None,
            local: Optional[Mapping[type, Callable[[Any], Any]]] = None) -> Union[E, Done[R]]:
    """Send ``value`` into ``protocol`` (or, when ``thrown`` is given, throw it in): the effect it
    yields next, or :class:`Done` with what it returned. What it raises propagates. An effect
    whose type ``local`` names is performed by its function there and then, and its result sent
    back in: the effect returned is the next one ``local`` does not name."""
    while True:
        try:
            if thrown is not None:
                effect, thrown = protocol.throw(thrown), None
            else:
                effect = protocol.send(value)
        except StopIteration as finished:
            return Done(finished.value)
        if local is None:
            return effect
        perform = local.get(type(effect))
        if perform is None:
            return effect
        value = perform(effect)
