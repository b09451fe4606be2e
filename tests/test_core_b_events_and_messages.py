"""Messages a user reads about shared holders (python_dynamodb_lock/_core/shared.py:
``describe_holders``, used by the errors and the CLI when a shared row is in the way): who holds
the row, how many times each owner, and, when this client is one of them, why its exclusive
acquisition waits for itself.
"""
from __future__ import annotations

from decimal import Decimal
from typing import Any, Dict

from python_dynamodb_lock._core.shared import describe_holders


def shared_row(*owners: str) -> Dict[str, Any]:
    entries = {f'h{index}': {'owner': owner, 'version': f'v{index}', 'lease': Decimal('30')}
               for index, owner in enumerate(owners)}
    return {'lock_key': 'k', 'sort_key': '-', 'record_version_number': 'r', 'shared_holders': entries}


def test_a_row_that_is_not_shared_is_not_described() -> None:
    assert describe_holders(None, 'me') is None
    assert describe_holders({'lock_key': 'k', 'owner_name': 'writer'}, 'me') is None
    assert describe_holders({**shared_row('a'), 'released_at': 1}, 'me') is None


def test_one_holder_is_named() -> None:
    assert describe_holders(shared_row('alice'), 'me') == '1 shared holder: alice'


def test_several_holders_are_named_once_each_with_how_many_times_in_order() -> None:
    assert describe_holders(shared_row('bob', 'alice', 'bob', 'carol', 'bob'), 'me') == \
        '5 shared holders: alice, bob (3 times), carol'
    assert describe_holders(shared_row('bob', 'alice'), 'me') == '2 shared holders: alice, bob'


def test_a_client_that_is_one_of_the_holders_is_told_it_waits_for_itself() -> None:
    assert describe_holders(shared_row('me', 'alice', 'me'), 'me') == (
        "3 shared holders: alice, me (2 times); 2 of them this client (me): an exclusive acquisition waits for "
        "every shared holder, this client's own too (a shared lock is not upgraded: release it first)")
    assert describe_holders(shared_row('me'), 'me') == (
        "1 shared holder: me; 1 of them this client (me): an exclusive acquisition waits for every shared holder, "
        "this client's own too (a shared lock is not upgraded: release it first)")
