"""Packaging: install hints in the docs and messages.

Until a release of this project is on PyPI, the name ``python_dynamodb_lock`` there installs the
published 0.9.1, which has no demo and no CLI, so no hint may tell users to
``pip install python_dynamodb_lock[...]`` from PyPI; hints say ``pip install '.[demo]'`` (from a
checkout) or name a git URL instead.
"""
from __future__ import annotations

import pathlib
import re
from typing import Iterator

import pytest

import python_dynamodb_lock

TESTS_DIR = pathlib.Path(__file__).resolve().parent
PROJECT_DIR = TESTS_DIR.parent

# `pip install` followed (after options and quotes, possibly across a line break or a split
# string literal) by this project's name, bare or with extras. Not flagged: a git URL
# (`name @ git+...`), a pinned or bounded version (`python-dynamodb-lock==0.9.1`, which the
# benchmarks install on purpose), and other distributions (`python-dynamodb-lock-whatnick`).
PYPI_INSTALL_HINT = re.compile(
    r"""pip3?\s+install\s+(?:-\S+\s+)*['"\s]*python[-_.]dynamodb[-_.]lock(?:\[[^\]]*\])?"""
    r"""(?![\w[-]|\.\w|\s*@|\s*[=<>!~])""",
    re.IGNORECASE,
)


def hint_files() -> Iterator[pathlib.Path]:
    """README, HISTORY, the docs, the benchmarks' README and the package under test."""
    for name in ('README.rst', 'HISTORY.rst', 'benchmarks/README.md'):
        if (PROJECT_DIR / name).is_file():
            yield PROJECT_DIR / name
    docs = PROJECT_DIR / 'docs'
    if docs.is_dir():
        yield from sorted(path for path in docs.rglob('*') if path.suffix in ('.rst', '.py', '.txt'))
    package_dir = pathlib.Path(python_dynamodb_lock.__file__).resolve().parent
    yield from sorted(path for path in package_dir.rglob('*')
                      if path.is_file() and '__pycache__' not in path.parts
                      and path.suffix in ('.py', '.rst', '.txt', '.java'))


@pytest.mark.parametrize('text', [
    "python -m pip install 'python_dynamodb_lock[demo]'",
    'pip install python_dynamodb_lock[demo]',
    'pip install python-dynamodb-lock',
    'pip3 install -U "Python_DynamoDB_Lock[test,demo]"',
    "pip install 'python_dynamodb_lock'.",
    "'server; needs pip install '\n        '\"python_dynamodb_lock[demo]\")'",
])
def test_pypi_install_hint_pattern_catches(text: str) -> None:
    assert PYPI_INSTALL_HINT.search(text)


@pytest.mark.parametrize('text', [
    "python -m pip install '.[demo]'",
    "pip install 'python_dynamodb_lock[demo] @ git+https://example.invalid/x.git'",
    'pip install --no-deps --target out python-dynamodb-lock==0.9.1',
    'pip uninstall python-dynamodb-lock-whatnick',
    'pip install python-dynamodb-lock-whatnick',
    "pip install 'moto>=5' flask flask-cors",
    'the python_dynamodb_lock package',
])
def test_pypi_install_hint_pattern_lets_through(text: str) -> None:
    assert not PYPI_INSTALL_HINT.search(text)


def test_no_hint_installs_this_project_from_pypi() -> None:
    files = list(hint_files())
    assert any(path.name == 'README.rst' for path in files)
    assert any(path.name == '_embedded.py' for path in files)
    offenders = []
    for path in files:
        text = path.read_text(encoding='utf-8')
        for match in PYPI_INSTALL_HINT.finditer(text):
            line = text.count('\n', 0, match.start()) + 1
            offenders.append(f'{path}:{line}: {match.group(0)!r}')
    assert offenders == [], (
        'Until this version is on PyPI, `pip install python_dynamodb_lock...` installs the published '
        "0.9.1; say `pip install '.[demo]'` (from a checkout) instead:\n" + '\n'.join(offenders))
