"""The one protocol stepper (``_core/stepper.py``): what the lock protocols, table
administration and the recipes are all stepped by."""
from __future__ import annotations

from typing import Any, Generator, List

import pytest

from python_dynamodb_lock._core.stepper import Done, advance


def protocol(seen: List[Any]) -> Generator[str, Any, str]:
    seen.append((yield 'first'))
    try:
        yield 'second'
    except KeyError as error:
        seen.append(error)
        seen.append((yield 'after the error'))
    return 'result'


def test_effects_in_order_then_done_with_the_result() -> None:
    seen: List[Any] = []
    steps = protocol(seen)
    assert advance(steps, None) == 'first'
    assert advance(steps, 1) == 'second'
    assert advance(steps, 2) == Done('result')
    assert seen == [1]


def test_an_exception_is_thrown_in_for_the_protocol_to_judge() -> None:
    seen: List[Any] = []
    steps = protocol(seen)
    advance(steps, None)
    advance(steps, 1)
    error = KeyError('lost')
    assert advance(steps, 'ignored', error) == 'after the error'
    assert advance(steps, 3) == Done('result')
    assert seen == [1, error, 3]


def test_what_the_protocol_raises_propagates() -> None:
    steps = protocol([])
    advance(steps, None)
    with pytest.raises(ValueError, match='not judged'):
        advance(steps, None, ValueError('not judged'))


def test_a_protocol_that_returns_at_once_is_done() -> None:
    def immediate() -> Generator[str, Any, int]:
        return 7
        yield 'never'   # pragma: no cover - makes this a generator

    assert advance(immediate(), None) == Done(7)


def test_local_effects_are_performed_on_the_way() -> None:
    """An effect ``local`` names is performed at once and its result sent back in; the next
    effect the caller must perform is returned (how the drivers handle events and registry
    updates)."""
    seen: List[Any] = []
    performed: List[Any] = []

    def perform(effect: str) -> str:
        performed.append(effect)
        return 'performed'

    steps = protocol(seen)
    assert advance(steps, None, None, {str: perform}) == Done('result')
    assert performed == ['first', 'second']
    assert seen == ['performed']


def test_an_effect_local_does_not_name_is_returned() -> None:
    seen: List[Any] = []
    assert advance(protocol(seen), None, None, {int: lambda effect: None}) == 'first'
    assert seen == []
