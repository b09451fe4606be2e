"""The one protocol stepper (``_core/stepper.py``): what both drivers step their protocols with."""
from __future__ import annotations

from typing import Any, Generator, List

import pytest

from python_dynamodb_lock._core.effects import Emit, Sleep
from python_dynamodb_lock._core.stepper import Done, advance


def protocol(seen: List[Any]) -> Generator[Any, Any, str]:
    seen.append((yield Emit('first')))     # type: ignore[arg-type]  # any event will do here
    seen.append((yield Sleep(1.0)))
    return 'finished'


def test_advance_runs_to_the_next_effect_and_to_the_end() -> None:
    seen: List[Any] = []
    steps = protocol(seen)
    assert advance(steps, None) == Emit('first')          # type: ignore[arg-type]
    assert advance(steps, 'emitted') == Sleep(1.0)
    assert advance(steps, True) == Done('finished')
    assert seen == ['emitted', True]


def test_advance_performs_local_effects_on_the_way() -> None:
    """An effect ``local`` names is performed at once and its result sent back in; the next
    effect that needs the driver is returned."""
    seen: List[Any] = []
    performed: List[Any] = []

    def emit(effect: Emit) -> str:
        performed.append(effect)
        return 'done here'

    steps = protocol(seen)
    assert advance(steps, None, None, {Emit: emit}) == Sleep(1.0)
    assert performed == [Emit('first')]                   # type: ignore[arg-type]
    assert seen == ['done here']


def test_advance_throws_into_the_protocol() -> None:
    """An exception thrown in is raised where the protocol waits; what it raises propagates."""
    steps = protocol([])
    advance(steps, None)
    with pytest.raises(KeyError):
        advance(steps, None, KeyError('thrown'))
    assert steps.gi_frame is None
