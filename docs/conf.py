"""Sphinx configuration for the python_dynamodb_lock documentation.

Build with::

    python -m sphinx -W --keep-going -b html docs docs/_build/html

The version is read from ``python_dynamodb_lock/_version.py`` as text, so
building the documentation does not import the package just to learn its
version. Autodoc (``api.rst``) does import the package, which is why the
repository root is put on ``sys.path``: the build works from a plain checkout
as long as boto3 is installed.
"""
from __future__ import annotations

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
    'sphinx.ext.napoleon',
]

language = 'en'
root_doc = 'index'
source_suffix = {'.rst': 'restructuredtext'}
exclude_patterns = ['_build', 'Thumbs.db', '.DS_Store']
pygments_style = 'sphinx'

# -- Autodoc / napoleon -------------------------------------------------------

autodoc_member_order = 'bysource'
autodoc_default_options = {
    'show-inheritance': True,
}
autodoc_typehints = 'signature'
napoleon_google_docstring = True
napoleon_numpy_docstring = True
napoleon_use_rtype = True

# -- HTML output --------------------------------------------------------------

html_theme = 'alabaster'
html_title = f'python_dynamodb_lock {release}'
html_theme_options = {
    'description': 'Distributed locks on Amazon DynamoDB',
    'fixed_sidebar': True,
}
