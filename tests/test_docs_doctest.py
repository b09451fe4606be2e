"""The documentation's examples run: ``sphinx-build -b doctest`` over docs/.

The pages' ``>>>`` blocks and ``.. testcode::`` blocks run against moto's in-process DynamoDB
(see ``doctest_global_setup`` in docs/conf.py). ``tox -e docs`` runs the same build, so CI runs
the doctests whatever this test does; here they run too wherever Sphinx is installed (the
``docs`` extra) next to moto, and the test is skipped, saying why, where either is missing.
"""
from __future__ import annotations

import importlib.util
import pathlib
import shutil
import subprocess
import sys

import pytest

PROJECT_DIR = pathlib.Path(__file__).resolve().parent.parent
DOCS_DIR = PROJECT_DIR / 'docs'

missing = [name for name in ('sphinx', 'moto') if importlib.util.find_spec(name) is None]
pytestmark = pytest.mark.skipif(
    bool(missing) or not (DOCS_DIR / 'conf.py').is_file(),
    reason=(f'needs {" and ".join(missing)} (the docs and testing extras); tox -e docs runs the doctests'
            if missing else 'no docs/ here'))


def sphinx_doctest(output: pathlib.Path, source: pathlib.Path = DOCS_DIR) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, '-m', 'sphinx', '-W', '--keep-going', '-q', '-b', 'doctest', str(source), str(output)],
        cwd=str(PROJECT_DIR), capture_output=True, text=True, timeout=600)


def test_the_examples_of_the_documentation_run(tmp_path: pathlib.Path) -> None:
    result = sphinx_doctest(tmp_path / 'doctest')
    report = (tmp_path / 'doctest' / 'output.txt')
    summary = report.read_text(encoding='utf-8') if report.is_file() else ''
    assert result.returncode == 0, f'{result.stdout}\n{result.stderr}\n{summary}'
    # Pages with examples that run: each shows up in the report, with no failure.
    for page in ('quickstart', 'usage', 'settings', 'lambda'):
        assert f'Document: {page}\n' in summary, summary
    assert ' 0 failures in tests' in summary, summary


def test_a_wrong_example_fails_the_build(tmp_path: pathlib.Path) -> None:
    """The build does fail on a wrong example: a copy of the docs with one output changed."""
    # docs/conf.py reads the version and imports the package from the folder above docs/, and
    # pages include files from there: link everything else of the checkout beside the copy.
    for entry in PROJECT_DIR.iterdir():
        if entry.name != 'docs' and not entry.name.startswith('.'):
            (tmp_path / entry.name).symlink_to(entry)
    copy = tmp_path / 'docs'
    shutil.copytree(DOCS_DIR, copy, ignore=shutil.ignore_patterns('_build'))
    usage = copy / 'usage.rst'
    text = usage.read_text(encoding='utf-8')
    right = "    {'host': 'worker-7', 'started_by': 'cron'}\n"
    assert text.count(right) == 1
    usage.write_text(text.replace(right, "    {'host': 'worker-8', 'started_by': 'cron'}\n"), encoding='utf-8')
    result = sphinx_doctest(tmp_path / 'doctest', copy)
    assert result.returncode != 0
    assert '1 failure in tests' in (tmp_path / 'doctest' / 'output.txt').read_text(encoding='utf-8')
