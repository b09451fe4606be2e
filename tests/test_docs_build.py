"""``sphinx-build -W -b html`` works with only the ``docs`` extra installed.

A fresh virtual environment with ``pip install '.[docs]'`` has Sphinx and the package's own
dependencies (boto3), and none of the other extras' packages. Building one here would need the
package index, so the test builds in a subprocess of this environment in which importing any
package that only another extra installs fails, as it would there. A page or a docstring whose
autodoc import needs one of them (the pytest plugin imports pytest, say) then fails the build.
"""
from __future__ import annotations

import importlib.util
import pathlib
import re
import subprocess
import sys
import textwrap

import pytest

PROJECT_DIR = pathlib.Path(__file__).resolve().parent.parent
DOCS_DIR = PROJECT_DIR / 'docs'

pytestmark = pytest.mark.skipif(importlib.util.find_spec('sphinx') is None or not (DOCS_DIR / 'conf.py').is_file(),
                                reason="needs Sphinx (the docs extra: pip install '.[docs]')")


def other_extras_modules() -> list:
    """The top-level modules that the extras other than ``docs`` install, read from setup.py."""
    setup = (PROJECT_DIR / 'setup.py').read_text(encoding='utf-8')
    names = set(re.findall(r"'([A-Za-z][A-Za-z0-9_.\-]*)(?:\[[^\]]*\])?(?:[<>=!~][^']*)?'", setup))
    module_of = {'moto': 'moto', 'pytest': 'pytest', 'flask': 'flask', 'flask-cors': 'flask_cors',
                 'hypothesis': 'hypothesis', 'aiobotocore': 'aiobotocore', 'prometheus_client': 'prometheus_client',
                 'ruff': 'ruff'}
    return sorted(module for name, module in module_of.items() if name in names)


BUILD = textwrap.dedent('''
    import importlib.abc
    import sys

    BLOCKED = set(sys.argv[1].split(','))

    class Blocker(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split('.')[0] in BLOCKED:
                raise ModuleNotFoundError(f'No module named {name!r} (not installed by the docs extra)')
            return None

    sys.meta_path.insert(0, Blocker())
    for name in list(sys.modules):
        if name.split('.')[0] in BLOCKED:
            del sys.modules[name]
    from sphinx.cmd.build import main
    sys.exit(main(sys.argv[2:]))
''')


def build(output: pathlib.Path, blocked: list) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, '-c', BUILD, ','.join(blocked), '-W', '--keep-going', '-q', '-b', 'html',
         str(DOCS_DIR), str(output)],
        cwd=str(PROJECT_DIR), capture_output=True, text=True, timeout=600)


def test_the_blocked_modules_are_those_of_the_other_extras() -> None:
    assert {'moto', 'pytest', 'aiobotocore', 'flask', 'hypothesis'} <= set(other_extras_modules())


@pytest.mark.slow
def test_the_html_build_needs_only_the_docs_extra(tmp_path: pathlib.Path) -> None:
    result = build(tmp_path / 'html', other_extras_modules())
    assert result.returncode == 0, result.stdout + result.stderr
    assert (tmp_path / 'html' / 'quickstart.html').is_file()


@pytest.mark.slow
def test_the_build_fails_when_autodoc_cannot_import_a_module(tmp_path: pathlib.Path) -> None:
    """The check can fail: with boto3 blocked too, autodoc cannot import the package."""
    result = build(tmp_path / 'html', [*other_extras_modules(), 'boto3'])
    assert result.returncode != 0
    assert "No module named 'boto3'" in result.stderr
