"""Packaging: install hints in the docs and messages, and the built sdist and wheel.

* The install-hint tests always run. Until a release of this project is on PyPI, the name
  ``python_dynamodb_lock`` there installs the published 0.9.1, which has no demo and no CLI, so
  no hint may tell users to ``pip install python_dynamodb_lock[...]`` from PyPI; hints say
  ``pip install '.[demo]'`` (from a checkout) or name a git URL instead.
* The distribution tests run under ``tox -e package`` (``tests/check_package.py``), which builds
  the sdist and the wheel into ``$PDL_DIST_DIR`` and points ``$PDL_SOURCE_DIR`` at the checkout
  they were built from. Elsewhere they are skipped.
"""
from __future__ import annotations

import configparser
import importlib.util
import os
import pathlib
import re
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from typing import Iterator, Optional

import pytest

import python_dynamodb_lock

TESTS_DIR = pathlib.Path(__file__).resolve().parent
PROJECT_DIR = TESTS_DIR.parent
PACKAGE = 'python_dynamodb_lock'
LAUNCHER_DATA = f'{PACKAGE}/_launcher/PythonDynamoDBLockLoopbackLauncher.java'

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
    assert any(path.name == 'find.py' and path.parent.name == '_embedded' for path in files)
    offenders = []
    for path in files:
        text = path.read_text(encoding='utf-8')
        for match in PYPI_INSTALL_HINT.finditer(text):
            line = text.count('\n', 0, match.start()) + 1
            offenders.append(f'{path}:{line}: {match.group(0)!r}')
    assert offenders == [], (
        'Until this version is on PyPI, `pip install python_dynamodb_lock...` installs the published '
        "0.9.1; say `pip install '.[demo]'` (from a checkout) instead:\n" + '\n'.join(offenders))


def readme_commands() -> list[str]:
    """The one-line commands in README.rst's literal blocks, in order."""
    readme = (PROJECT_DIR / 'README.rst').read_text(encoding='utf-8')
    return re.findall(r'::\n\n    (python -m pip install [^\n]+)\n', readme)


def test_readme_starts_with_the_demo_and_the_test_command() -> None:
    assert readme_commands()[:2] == [
        "python -m pip install '.[demo]' && python -m python_dynamodb_lock demo",
        'python -m pip install tox && tox run-parallel',
    ]


def test_ci_runs_the_readme_test_command() -> None:
    ci_script = PROJECT_DIR / '.ci' / 'run'
    if not ci_script.is_file():
        pytest.skip('no .ci/run here (an unpacked sdist)')
    test_command = readme_commands()[1]
    assert test_command in ci_script.read_text(encoding='utf-8').splitlines()


# --------------------------------------------------------------------------------------------
# The built distributions (tox -e package)
# --------------------------------------------------------------------------------------------

DIST_DIR = os.environ.get('PDL_DIST_DIR')
SOURCE_DIR = os.environ.get('PDL_SOURCE_DIR')
needs_dists = pytest.mark.skipif(not DIST_DIR, reason='run by tox -e package, which builds the dists')

# Files the sdist holds besides the checkout's own: written by setuptools when it builds.
SDIST_GENERATED = re.compile(r'^(PKG-INFO|setup\.cfg|[^/]+\.egg-info/.+)$')
# Checkout files that stay out of the sdist: CI plumbing and git's own files.
SDIST_LEFT_OUT = re.compile(r'^(\.ci/.*|\.git.*)$')
CACHE_PARTS = {'__pycache__', '.pytest_cache', '.ruff_cache', '.tox', '_build', '_work'}


def only_file(pattern: str) -> pathlib.Path:
    found = sorted(pathlib.Path(DIST_DIR or '.').glob(pattern))
    assert len(found) == 1, f'{pattern} in {DIST_DIR}: {found}'
    return found[0]


def wheel_names() -> set[str]:
    with zipfile.ZipFile(only_file('*.whl')) as wheel:
        return set(wheel.namelist())


def sdist_names() -> set[str]:
    with tarfile.open(only_file('*.tar.gz')) as sdist:
        names = {member.name for member in sdist.getmembers() if member.isfile()}
    prefixes = {name.split('/', 1)[0] for name in names}
    assert len(prefixes) == 1, prefixes
    return {name.split('/', 1)[1] for name in names}


def source_package_files(source_dir: pathlib.Path) -> set[str]:
    """Every file of the package in the checkout: those git tracks, or else all but caches."""
    tracked = tracked_files(source_dir)
    if tracked is not None:
        return {name for name in tracked if name.startswith(f'{PACKAGE}/')}
    return {path.relative_to(source_dir).as_posix()
            for path in (source_dir / PACKAGE).rglob('*')
            if path.is_file() and not CACHE_PARTS & set(path.parts) and path.suffix not in ('.pyc', '.pyo')}


def tracked_files(source_dir: pathlib.Path) -> Optional[set[str]]:
    """The files git tracks in the checkout, or None when it is not a git checkout."""
    try:
        listing = subprocess.run(['git', 'ls-files', '-z'], cwd=source_dir, capture_output=True,
                                 check=True, timeout=60).stdout.decode()
    except (OSError, subprocess.CalledProcessError, subprocess.TimeoutExpired):
        return None
    return {name for name in listing.split('\0') if name and (source_dir / name).is_file()}


@needs_dists
def test_wheel_holds_exactly_the_package() -> None:
    names = wheel_names()
    metadata = {name for name in names if name.split('/', 1)[0].endswith('.dist-info')}
    assert {name.rsplit('/', 1)[-1] for name in metadata} >= {'METADATA', 'WHEEL', 'RECORD',
                                                             'entry_points.txt'}
    package_files = names - metadata
    assert {f'{PACKAGE}/__init__.py', f'{PACKAGE}/python_dynamodb_lock.py', f'{PACKAGE}/py.typed',
            LAUNCHER_DATA} <= package_files
    assert all(name.startswith(f'{PACKAGE}/') for name in package_files), sorted(package_files)
    assert not [name for name in package_files
                if CACHE_PARTS & set(name.split('/')) or name.endswith(('.pyc', '.pyo'))]
    if SOURCE_DIR:
        assert package_files == source_package_files(pathlib.Path(SOURCE_DIR))


@needs_dists
def test_wheel_has_no_tests_or_benchmarks() -> None:
    assert not [name for name in wheel_names()
                if name.split('/', 1)[0] in ('tests', 'benchmarks', 'docs')
                or '/tests/' in name or 'conftest' in name]


@needs_dists
def test_sdist_holds_what_the_tests_and_docs_need() -> None:
    names = sdist_names()
    needed = {
        'setup.py', 'pyproject.toml', 'MANIFEST.in', 'tox.ini', 'ruff.toml', 'README.rst',
        'HISTORY.rst', 'LICENSE', 'PKG-INFO', LAUNCHER_DATA, f'{PACKAGE}/py.typed',
        'tests/conftest.py', 'tests/helpers.py', 'tests/_torture/__init__.py',
        'tests/_torture/worker.py', 'tests/test_packaging.py', 'docs/conf.py', 'docs/index.rst',
        'benchmarks/results/results_table.rst',
    }
    assert needed <= names, sorted(needed - names)
    assert not [name for name in names
                if CACHE_PARTS & set(name.split('/')) or name.endswith(('.pyc', '.pyo'))
                or name.startswith(('.dynamodb-local/', 'dist/', 'build/'))]


@needs_dists
def test_sdist_is_the_checkout() -> None:
    """Exactly the files git tracks (less .ci/ and git's own), plus what setuptools writes."""
    if not SOURCE_DIR:
        pytest.skip('no $PDL_SOURCE_DIR: the checkout the dists were built from is unknown')
    tracked = tracked_files(pathlib.Path(SOURCE_DIR))
    if tracked is None:
        pytest.skip(f'{SOURCE_DIR} is not a git checkout')
    expected = {name for name in tracked if not SDIST_LEFT_OUT.match(name)}
    shipped = {name for name in sdist_names() if not SDIST_GENERATED.match(name)}
    missing = sorted(expected - shipped)
    assert not missing, f'tracked by git but not in the sdist (MANIFEST.in): {missing}'
    extra = sorted(shipped - expected)
    assert not extra, f'in the sdist but not tracked by git: {extra}'


@needs_dists
def test_the_package_under_test_is_the_installed_wheel() -> None:
    """In the package env, the sdist's tests import the wheel, not a source tree."""
    location = pathlib.Path(python_dynamodb_lock.__file__).resolve().parent
    site_packages = pathlib.Path(sysconfig.get_paths()['purelib']).resolve()
    assert location == site_packages / PACKAGE, (location, sys.prefix)
    assert (location / '_launcher' / 'PythonDynamoDBLockLoopbackLauncher.java').is_file()


def test_every_subpackage_is_a_regular_package_that_setuptools_finds() -> None:
    # A folder of modules without __init__.py is a namespace package: it imports from a checkout,
    # but find_packages() leaves it out of the wheel and zipimport cannot load it.
    source = pathlib.Path(python_dynamodb_lock.__file__).parent
    folders = {path.parent for path in source.rglob('*.py') if '__pycache__' not in path.parts}
    assert source / '_core' in folders
    missing = sorted(str(folder.relative_to(source)) for folder in folders
                     if not (folder / '__init__.py').is_file())
    assert missing == []


# --------------------------------------------------------------------------------------------
# tox's default envlist (README's test command): the full suite on the Python that runs tox
# --------------------------------------------------------------------------------------------

def tox_ini() -> configparser.ConfigParser:
    parser = configparser.ConfigParser(interpolation=None)
    parser.read(PROJECT_DIR / 'tox.ini', encoding='utf-8')
    return parser


def test_tox_runs_the_full_suite_on_its_own_python_and_never_skips_a_missing_one() -> None:
    """A plain `tox` must not pass by skipping: its test env defaults to `py` (the Python running
    tox), and a Python it cannot find fails the run."""
    ini = tox_ini()
    envlist = [name.strip() for name in ini['tox']['envlist'].split(',')]
    assert envlist[0] == '{env:PDL_TOX_TEST_ENVS:py}', envlist
    assert ini['tox']['skip_missing_interpreters'].strip() == 'false'
    commands = ini['testenv']['commands']
    full_suite = [line.strip() for line in commands.splitlines() if line.strip().startswith('!unit:')]
    assert full_suite == ['!unit: python -m pytest -n {env:PDL_TEST_WORKERS:auto} {posargs}'], commands
    assert 'PDL_REQUIRE_ENGINES = 1' in ini['testenv']['set_env']


def test_ci_pins_the_oldest_and_newest_pythons_it_makes_visible() -> None:
    ci_script = PROJECT_DIR / '.ci' / 'run'
    if not ci_script.is_file():
        pytest.skip('no .ci/run here (an unpacked sdist)')
    text = ci_script.read_text(encoding='utf-8')
    pinned = re.search(r'^export PDL_TOX_TEST_ENVS=(\S+)$', text, re.M)
    visible = re.search(r'^REQUIRED_PYTHONS=\(([^)]*)\)$', text, re.M)
    assert pinned and visible, 'no PDL_TOX_TEST_ENVS export or REQUIRED_PYTHONS in .ci/run'
    envs = pinned.group(1).split(',')
    assert envs == ['py313', 'py39-unit']
    made_visible = {'py' + version.replace('.', '') for version in visible.group(1).split()}
    assert {env.split('-')[0] for env in envs} == made_visible


def test_tox_without_the_pinned_pythons_runs_the_full_suite_on_the_running_python(tmp_path: pathlib.Path) -> None:
    """As on a machine with one Python: PATH holds no python3.13 or python3.9."""
    if importlib.util.find_spec('tox') is None:
        pytest.skip('tox is not installed in this environment')
    bare_bin = tmp_path / 'bin'
    bare_bin.mkdir()
    env = {name: value for name, value in os.environ.items()
           if not name.startswith(('PDL_', 'TOX', 'PYENV', 'VIRTUAL_ENV'))}
    env['PATH'] = str(bare_bin)
    tox = [sys.executable, '-m', 'tox', '-c', str(PROJECT_DIR / 'tox.ini'), '--workdir', str(tmp_path / 'tox')]
    listed = subprocess.run([*tox, '-l'], env=env, capture_output=True, text=True, timeout=120, check=True)
    assert listed.stdout.split() == ['py', 'lint', 'type', 'docs', 'demo', 'package'], listed.stdout
    shown = subprocess.run([*tox, 'config', '-e', 'py', '-k', 'base_python', 'commands', 'set_env'],
                           env=env, capture_output=True, text=True, timeout=120, check=True).stdout
    assert f'base_python = {sys.executable}\n' in shown, shown
    assert 'commands = python -m pytest -n auto\n' in shown, shown
    assert 'PDL_REQUIRE_ENGINES=1' in shown, shown
