"""Build the sdist and the wheel, check them, and run the sdist's tests against the wheel.

Usage (``tox -e package`` runs it, in an env with ``build`` and ``twine``)::

    python tests/check_package.py WORK_DIR

1. Builds the sdist and, from it, the wheel (``python -m build``) into ``WORK_DIR/dist``, after
   removing the checkout's ``*.egg-info``: setuptools would otherwise add every file that a stale
   ``SOURCES.txt`` lists to the sdist, hiding a MANIFEST.in that misses them.
2. ``twine check --strict`` on both.
3. Installs the wheel with its ``test`` extra into this environment.
4. Unpacks the sdist into ``WORK_DIR/sdist``, removes its ``python_dynamodb_lock/`` (so the tests
   can only import the installed wheel), collects its whole unit-level suite there (every test
   module, and so every module of the package, imports from the wheel) and runs the tests about
   packaging (``WHEEL_TESTS``, ``-m 'not local and not slow'``), with ``$PDL_DIST_DIR`` and
   ``$PDL_SOURCE_DIR`` set so that ``tests/test_packaging.py`` also checks what the wheel and the
   sdist hold; the whole unit-level suite runs in tox's py39-unit env. They run on
   pytest-xdist workers (``-n $PDL_TEST_WORKERS``, default ``auto``: one per core) when the
   ``test`` extra brought pytest-xdist, in one process otherwise.

Exits non-zero at the first step that fails.
"""
from __future__ import annotations

import importlib
import importlib.util
import os
import pathlib
import shutil
import subprocess
import sys
import tarfile
import time
from typing import Any

SOURCE_DIR = pathlib.Path(__file__).resolve().parent.parent
PACKAGE = 'python_dynamodb_lock'
UNIT_LEVEL = 'not local and not slow'
#: What runs against the installed wheel: what it holds and how it installs (the pytest plugin's
#: entry point, the published import paths and star import, the protocol core).
WHEEL_TESTS = ['tests/test_packaging.py', 'tests/test_compat.py', 'tests/test_star_import.py',
               'tests/test_testing_package.py', 'tests/test_core_protocol.py']


def run(command: list[str], **kwargs: Any) -> None:
    print(f'\n$ {" ".join(command)}', flush=True)
    started = time.monotonic()
    result = subprocess.run(command, stdin=subprocess.DEVNULL, check=False, **kwargs)
    if result.returncode != 0:
        print(f'check_package: failed with exit code {result.returncode}: {" ".join(command)}',
              file=sys.stderr)
        sys.exit(result.returncode)
    print(f'(took {time.monotonic() - started:.1f} s)', flush=True)


def parallel_options() -> list[str]:
    """``-n WORKERS`` when pytest-xdist is installed here (the ``test`` extra has it), else nothing."""
    importlib.invalidate_caches()    # pytest-xdist was installed after this process started
    if importlib.util.find_spec('xdist') is None:
        return []
    return ['-n', os.environ.get('PDL_TEST_WORKERS', '').strip() or 'auto']


def only(paths: list[pathlib.Path], what: str) -> pathlib.Path:
    if len(paths) != 1:
        sys.exit(f'check_package: expected one {what}, found {[str(path) for path in paths]}')
    return paths[0]


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    work_dir = pathlib.Path(argv[0]).resolve()
    dist_dir = work_dir / 'dist'
    unpacked_dir = work_dir / 'sdist'
    for stale in (dist_dir, unpacked_dir, *SOURCE_DIR.glob('*.egg-info')):
        shutil.rmtree(stale, ignore_errors=True)

    run([sys.executable, '-m', 'build', '--outdir', str(dist_dir), str(SOURCE_DIR)])
    sdist = only(sorted(dist_dir.glob('*.tar.gz')), 'sdist')
    wheel = only(sorted(dist_dir.glob('*.whl')), 'wheel')
    run([sys.executable, '-m', 'twine', 'check', '--strict', str(sdist), str(wheel)])
    run([sys.executable, '-m', 'pip', 'install', '--force-reinstall', '--no-deps', str(wheel)])
    run([sys.executable, '-m', 'pip', 'install', f'{wheel}[test]'])

    unpacked_dir.mkdir(parents=True)
    with tarfile.open(sdist) as archive:
        if hasattr(tarfile, 'data_filter'):
            archive.extractall(unpacked_dir, filter='data')
        else:  # Python < 3.9.17 has no extraction filters; the archive is our own
            archive.extractall(unpacked_dir)
    tree = only([path for path in unpacked_dir.iterdir() if path.is_dir()], 'folder in the sdist')
    shutil.rmtree(tree / PACKAGE)
    env = {**os.environ, 'PDL_DIST_DIR': str(dist_dir), 'PDL_SOURCE_DIR': str(SOURCE_DIR)}
    # Collecting the whole suite imports every test module, and through them every module of
    # the package, from the wheel: a module or data file the wheel lacks fails here. The tests
    # about what was packaged then run in full; the whole unit-level suite runs in the py39-unit
    # env (on an install of the sdist), so it is not repeated here.
    run([sys.executable, '-m', 'pytest', '-p', 'no:cacheprovider', '--collect-only', '-q', '-m', UNIT_LEVEL],
        cwd=tree, env=env)
    run([sys.executable, '-m', 'pytest', '-p', 'no:cacheprovider', *parallel_options(), '-m', UNIT_LEVEL,
         *WHEEL_TESTS], cwd=tree, env=env)
    print(f'\ncheck_package: {sdist.name} and {wheel.name} are complete; the sdist\'s suite imports '
          'from the wheel and its packaging tests pass against it', flush=True)
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
