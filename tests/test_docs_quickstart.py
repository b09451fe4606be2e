"""The Quick start page's test (``examples/test_quickstart.py``, shown by docs/quickstart.rst)
passes when pytest runs it as the page says, with the package's pytest plugin and its fixtures,
and fails when the code it tests is wrong. (The page's other examples are doctests, run by
``sphinx-build -b doctest``: see test_docs_doctest.py.)
"""
from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import pathlib
import subprocess
import sys
from typing import List

import pytest

from python_dynamodb_lock.testing.pytest_plugin import REQUIRED_MODULES

PROJECT_DIR = pathlib.Path(__file__).resolve().parent.parent
EXAMPLE = PROJECT_DIR / 'examples' / 'test_quickstart.py'
PAGE = PROJECT_DIR / 'docs' / 'quickstart.rst'

pytestmark = pytest.mark.skipif(
    any(importlib.util.find_spec(name) is None for name in REQUIRED_MODULES),
    reason="needs the testing extra (moto, flask, flask-cors): pip install '.[testing]'")


def plugin_options() -> List[str]:
    """``-p`` for the plugin unless pytest loads it by itself (the package is installed)."""
    entries = importlib.metadata.entry_points()
    group = entries.select(group='pytest11') if hasattr(entries, 'select') else entries.get('pytest11', [])  # 3.9
    installed = any(entry.value == 'python_dynamodb_lock.testing.pytest_plugin' for entry in group)
    return [] if installed else ['-p', 'python_dynamodb_lock.testing.pytest_plugin']


def run_pytest(path: pathlib.Path) -> subprocess.CompletedProcess:
    environment = {**os.environ, 'PYTHONPATH': os.pathsep.join(
        [str(PROJECT_DIR), *filter(None, [os.environ.get('PYTHONPATH')])])}
    # The moto server: the quickest engine to start (the page's default picks DynamoDB Local
    # where it is installed; the test is the same on either).
    return subprocess.run(
        [sys.executable, '-m', 'pytest', str(path), '-q', '-p', 'no:cacheprovider', '-o', 'dynamodb_lock_engine=moto',
         '--rootdir', str(path.parent), *plugin_options()],
        cwd=str(path.parent), env=environment, capture_output=True, text=True, timeout=300)


def test_the_page_shows_the_example() -> None:
    page = PAGE.read_text(encoding='utf-8')
    assert '.. literalinclude:: ../examples/test_quickstart.py' in page
    assert '# -- the job and its test' in EXAMPLE.read_text(encoding='utf-8')


def test_the_quick_start_test_passes() -> None:
    result = run_pytest(EXAMPLE)
    assert result.returncode == 0, result.stdout + result.stderr
    assert '1 passed' in result.stdout, result.stdout


def test_the_quick_start_test_fails_when_the_job_locks_the_wrong_key(tmp_path: pathlib.Path) -> None:
    """The fixtures really give two workers one table: a job that does not take the other
    worker's lock runs beside it, and the test says so."""
    broken = tmp_path / 'test_quickstart.py'
    text = EXAMPLE.read_text(encoding='utf-8')
    right = "lock_client.try_acquire_lock('nightly-report',"
    assert text.count(right) == 1
    broken.write_text(text.replace(right, "lock_client.try_acquire_lock('another-report',"), encoding='utf-8')
    result = run_pytest(broken)
    assert result.returncode == 1, result.stdout + result.stderr
    assert '1 failed' in result.stdout and "AssertionError: assert 'done' == " in result.stdout, \
        result.stdout
