"""Every file and module the pages name still exists.

README and the pages name files (``tests/test_iam.py``, ``_recipes/seams.py``,
``_shared_requests.py``) and modules (``python_dynamodb_lock._recipes``); when code moves, the
pages must follow. docs/design.rst, the Changes and History pages and HISTORY.rst describe the
past, where a module that is gone may be named, and are not checked.
"""
from __future__ import annotations

import importlib
import pathlib
import re
from typing import List, Tuple

PROJECT_DIR = pathlib.Path(__file__).resolve().parent.parent
PACKAGE_DIR = PROJECT_DIR / 'python_dynamodb_lock'
ABOUT_THE_PAST = {'design.rst', 'changes.rst', 'history.rst'}

_FILE = re.compile(r'``([A-Za-z0-9_./-]+\.(?:py|rst|toml|ini|java))``')
_DOTTED = r'(python_dynamodb_lock(?:\.[A-Za-z_][A-Za-z0-9_]*)+)'
_MODULE = re.compile(rf'``{_DOTTED}``|:(?:mod|class|func|meth|attr):`~?{_DOTTED}`|'
                     rf'^\.\. (?:automodule|autoclass|autofunction):: {_DOTTED}', re.MULTILINE)


def pages() -> List[pathlib.Path]:
    return [PROJECT_DIR / 'README.rst',
            *(path for path in sorted((PROJECT_DIR / 'docs').glob('*.rst')) if path.name not in ABOUT_THE_PAST)]


def named_files() -> List[Tuple[str, str]]:
    return [(path.name, name) for path in pages() for name in _FILE.findall(' '.join(path.read_text().split()))]


def file_exists(name: str) -> bool:
    """A path from the repository's root, from docs/, or within the package (at any depth: the
    pages name a module by its file name, ``_shared_requests.py``, or its folder and file)."""
    if (PROJECT_DIR / name).exists() or (PROJECT_DIR / 'docs' / name).exists():
        return True
    return any(str(found.relative_to(PACKAGE_DIR)).endswith(name)
               for found in PACKAGE_DIR.rglob(pathlib.Path(name).name))


def resolves(dotted: str) -> bool:
    """A module, or an attribute of the longest module prefix that imports."""
    parts = dotted.split('.')
    for cut in range(len(parts), 0, -1):
        try:
            target = importlib.import_module('.'.join(parts[:cut]))
        except ImportError:
            continue
        for attribute in parts[cut:]:
            if not hasattr(target, attribute):
                return False
            target = getattr(target, attribute)
        return True
    return False


def test_the_files_the_pages_name_exist() -> None:
    named = named_files()
    assert ('shared_locks.rst', '_wire/shared_requests.py') in named and ('iam.rst', 'tests/test_iam.py') in named
    missing = sorted({(page, name) for page, name in named if not file_exists(name)})
    assert not missing, f'pages name files that are gone: {missing}'


def test_the_modules_the_pages_name_exist() -> None:
    named = {(path.name, ''.join(match)) for path in pages() for match in _MODULE.findall(path.read_text())}
    assert ('recipes.rst', 'python_dynamodb_lock._recipes') in named
    missing = sorted((page, dotted) for page, dotted in named if not resolves(dotted))
    assert not missing, f'pages name modules or names that are gone: {missing}'


def test_a_file_that_is_gone_is_found_missing() -> None:
    assert not file_exists('_threaded.py') and not file_exists('_aio_runner.py') and not file_exists('_cli.py')
    assert not resolves('python_dynamodb_lock._store') and resolves('python_dynamodb_lock._core.events.Kind')
