"""Parsed expressions, cached per expression text: a client sends the same few expressions again
and again, with new values each time.

An expression is parsed once into a *template* whose value placeholders are left as
:class:`Slot` markers (its name placeholders are resolved: the cache key holds the names); each
request then fills the slots with its own values. Only a parse that succeeds is cached; a parse
that needs a value's content (``attribute_type``'s type name) or fails is done the plain way,
every time, so every answer and every error stays exactly what the uncached parser gives.
"""
from __future__ import annotations

from typing import Callable, Dict, List, Mapping, FrozenSet, Hashable, NamedTuple, Optional, TypeVar, Union

from .expressions import Parser, Placeholders

__all__ = ['Slot', 'parse_cached']

T = TypeVar('T')
_LIMIT = 4096


class Slot(NamedTuple):
    """Where a value placeholder's value goes (``token``: ``:name``)."""

    token: str


class _Template(NamedTuple):
    tree: object
    fill: Optional[Filler]
    used_names: FrozenSet[str]
    used_values: FrozenSet[str]


class _SlotPlaceholders(Placeholders):
    """Placeholders that hand out a :class:`Slot` for each value placeholder."""

    def value(self, token: str, field: str) -> Dict[str, object]:
        super().value(token, field)    # the same refusal for an undefined placeholder
        return Slot(token)  # type: ignore[return-value]  # filled in by _fill before anyone reads it


_CACHE: Dict[Hashable, Optional[_Template]] = {}


Filler = Callable[[Mapping[str, Mapping[str, object]]], object]


def _filler(node: object) -> Optional[Filler]:
    """A function that builds ``node`` with its slots filled from the values, made once per
    template (None: ``node`` holds no slot and is shared as it is)."""
    if isinstance(node, Slot):
        token = node.token
        return lambda values: dict(values[token])
    if not isinstance(node, tuple):
        return None
    parts = [_filler(each) for each in node]
    if all(part is None for part in parts):
        return None
    plan = tuple(zip(node, parts))
    make: Callable[[List[object]], object] = getattr(type(node), '_make', tuple)   # a NamedTuple's, or tuple

    def fill(values: Mapping[str, Mapping[str, object]]) -> object:
        return make([each if part is None else part(values) for each, part in plan])
    return fill


def _key(text: str, field: str, placeholders: Placeholders, extra: Hashable) -> Optional[Hashable]:
    try:
        key = (text, field, tuple(sorted(placeholders.names.items())), tuple(sorted(placeholders.values)), extra)
        hash(key)
    except TypeError:
        return None    # an unhashable or unsortable name or value key: parse the plain way
    return key


def parse_cached(text: str, field: str, placeholders: Placeholders, parse: Callable[[Parser], T],
                 extra: Hashable = None) -> T:
    """``parse(Parser(text, field, placeholders))``, from a cached template when there is one
    (``extra``: whatever else ``parse`` depends on)."""
    key = _key(text, field, placeholders, extra) if isinstance(text, str) else None
    template = _CACHE.get(key) if key is not None else None
    if template is None and key is not None and key not in _CACHE:
        template = _template(text, field, placeholders, parse)
        if len(_CACHE) >= _LIMIT:
            _CACHE.clear()
        _CACHE[key] = template
    if template is None:
        return parse(Parser(text, field, placeholders))
    placeholders.used_names.update(template.used_names)
    placeholders.used_values.update(template.used_values)
    if template.fill is None:
        return template.tree  # type: ignore[return-value]  # what parse made
    return template.fill(placeholders.values)  # type: ignore[return-value]  # what parse made, filled


def _template(text: str, field: str, placeholders: Placeholders,
              parse: Callable[[Parser], T]) -> Optional[_Template]:
    marker = _SlotPlaceholders.__new__(_SlotPlaceholders)
    marker.names, marker.values = placeholders.names, placeholders.values
    marker.used_names, marker.used_values = set(), set()
    try:
        tree: Union[T, object] = parse(Parser(text, field, marker))
    except Exception:   # noqa: BLE001 - not cached: the plain parse gives the error (or needs the values)
        return None
    return _Template(tree, _filler(tree), frozenset(marker.used_names), frozenset(marker.used_values))
