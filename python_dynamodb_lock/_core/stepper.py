"""The one protocol stepper: send a value into a protocol (or throw an exception in) and run it
up to the next effect it yields, or to its end.

Both drivers (threads, tasks) step their protocols with :func:`advance`; so may any other code
that runs a protocol (the recipes, table administration). Effects that need no I/O (events,
registry updates, giving back a mutex) can be handled on the way with ``local``: a mapping from
an effect's type to the function that performs it (its result is sent back in at once).
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Generator, Mapping, Optional, Union

__all__ = ['Done', 'advance']


@dataclasses.dataclass(frozen=True)
class Done:
    """A protocol has finished with ``value``."""

    value: Any


def advance(protocol: Generator[Any, Any, Any], value: Any, thrown: Optional[BaseException] = None,
            local: Optional[Mapping[type, Callable[[Any], Any]]] = None) -> Union[Done, Any]:
    """Send ``value`` (or throw ``thrown``) into ``protocol``: :class:`Done` with its result when
    it returns, else the next effect it yields that ``local`` does not perform. What the
    protocol raises propagates."""
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
