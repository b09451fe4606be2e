"""Sphinx configuration for the python_dynamodb_lock documentation.

Build with::

    python -m sphinx -W --keep-going -b html docs docs/_build/html

and run the examples of the pages (``sphinx.ext.doctest``; they need moto, which the
``testing`` extra installs) with::

    python -m sphinx -W --keep-going -b doctest docs docs/_build/doctest

The version is read from ``python_dynamodb_lock/_version.py`` as text, so
building the documentation does not import the package just to learn its
version. Autodoc (``api.rst``) does import the package, which is why the
repository root is put on ``sys.path``: the HTML build works from a plain
checkout with only the ``docs`` extra installed (Sphinx; boto3 comes with the
package). ``tests/test_docs_build.py`` checks that in a fresh virtual
environment.
"""
from __future__ import annotations

import doctest
import pathlib
import re
import sys

DOCS_DIR = pathlib.Path(__file__).resolve().parent
REPO_ROOT = DOCS_DIR.parent
VERSION_FILE = REPO_ROOT / 'python_dynamodb_lock' / '_version.py'

sys.path.insert(0, str(REPO_ROOT))


def read_version(version_file: pathlib.Path = VERSION_FILE) -> str:
    """Return the ``__version__`` string assigned in ``version_file``.

    Raises:
        RuntimeError: the file has no ``__version__ = '...'`` line.
    """
    text = version_file.read_text(encoding='utf-8')
    match = re.search(r"""^__version__\s*=\s*['"]([^'"]+)['"]""", text, re.MULTILINE)
    if match is None:
        raise RuntimeError(f'no __version__ assignment found in {version_file}')
    return match.group(1)


# -- Project information ------------------------------------------------------

project = 'python_dynamodb_lock'
author = 'python_dynamodb_lock contributors'
copyright = 'python_dynamodb_lock contributors, Apache License 2.0'
release = read_version()
version = '.'.join(release.split('.')[:2])

# -- General configuration ----------------------------------------------------

# No sphinx.ext.intersphinx: the documentation must build without network access.
extensions = [
    'sphinx.ext.autodoc',
    'sphinx.ext.doctest',
    'sphinx.ext.napoleon',
]

language = 'en'
root_doc = 'index'
source_suffix = {'.rst': 'restructuredtext'}
exclude_patterns = ['_build', 'Thumbs.db', '.DS_Store']
pygments_style = 'sphinx'

# -- Autodoc / napoleon -------------------------------------------------------

# The HTML build needs only the ``docs`` extra (Sphinx) and boto3: every module that autodoc
# imports is importable with those, except the pytest plugin (testing.rst shows its module
# docstring, and it imports pytest, which the ``testing`` extra installs). pytest is mocked for
# that import alone; nothing of pytest's is documented. The doctest builder runs the examples and
# so needs the ``testing`` extra (moto) as well, as tox's ``docs`` env installs it.
autodoc_mock_imports = ['pytest']
autodoc_member_order = 'bysource'
autodoc_default_options = {
    'show-inheritance': True,
}
autodoc_typehints = 'signature'
napoleon_google_docstring = True
napoleon_numpy_docstring = True
napoleon_use_rtype = True

# -- Doctest ------------------------------------------------------------------

# Sphinx's default flags, less IGNORE_EXCEPTION_DETAIL: an example's exception message is checked.
doctest_default_flags = doctest.ELLIPSIS | doctest.DONT_ACCEPT_TRUE_FOR_1

# The examples that run (``>>>`` blocks, ``.. testcode::``) do so against moto's in-process
# DynamoDB: a page starts it in its hidden ``.. testsetup::`` with ``start_moto()`` (which also
# creates the default lock table) and stops it in ``.. testcleanup::`` with ``stop_moto()``.
# Nothing reaches AWS: moto intercepts every call, and the region and credentials are dummies.
doctest_global_setup = """
import logging as _logging
import os as _os
import sys as _sys

_MOTO_ENVIRONMENT = {'AWS_DEFAULT_REGION': 'us-east-1', 'AWS_ACCESS_KEY_ID': 'testing',
                     'AWS_SECRET_ACCESS_KEY': 'testing'}


def start_moto():
    import boto3
    from moto import mock_aws
    from python_dynamodb_lock.python_dynamodb_lock import DynamoDBLockClient

    saved = {name: _os.environ.get(name) for name in _MOTO_ENVIRONMENT}
    _os.environ.update(_MOTO_ENVIRONMENT)
    mock = mock_aws()
    mock.start()
    mock.saved_environment = saved
    DynamoDBLockClient.create_dynamodb_table(boto3.client('dynamodb'))
    # The library's log stays out of the examples' output unless a page asks for it.
    _logging.getLogger('python_dynamodb_lock').addHandler(_logging.NullHandler())
    return mock


def stop_moto(mock):
    mock.stop()
    for name, value in mock.saved_environment.items():
        if value is None:
            _os.environ.pop(name, None)
        else:
            _os.environ[name] = value


class _PrintWarnings(_logging.Handler):
    # Prints the library's warnings where doctest sees them (sys.stdout at the time of the call).
    def emit(self, record):
        print(f'{record.levelname}: {record.getMessage()}', file=_sys.stdout)


def show_warnings():
    handler = _PrintWarnings(_logging.WARNING)
    _logging.getLogger('python_dynamodb_lock').addHandler(handler)
    return handler
"""

# -- HTML output --------------------------------------------------------------

html_theme = 'alabaster'
html_title = f'python_dynamodb_lock {release}'
html_theme_options = {
    'description': 'Distributed locks on Amazon DynamoDB',
    'fixed_sidebar': True,
}
