"""The loopback launcher of DynamoDB Local: its Java source (package data), compiled once with the
``javac`` next to ``java`` and cached."""
from __future__ import annotations

import functools
import hashlib
import importlib.resources
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import threading
from typing import TYPE_CHECKING, Optional

from .engine import LOOPBACK_HOST, logger

if TYPE_CHECKING:
    if sys.version_info >= (3, 11):
        from importlib.resources.abc import Traversable
    else:
        from importlib.abc import Traversable

__all__ = ['LAUNCHER_CLASS', 'launcher_source', 'loopback_launcher_classes']

# A tiny Java entry point that starts DynamoDB Local exactly as its own main() does, but binds
# the HTTP listener to one address: DynamoDB Local has no option for that and listens on every
# interface. It only uses reflection, so it compiles against the JDK alone. Its source ships as
# package data (python_dynamodb_lock/_launcher/) and is read with importlib.resources, so it is
# found in a wheel, an egg or a zip as well as in a source checkout.
LAUNCHER_CLASS = 'PythonDynamoDBLockLoopbackLauncher'
_LAUNCHER_RESOURCE = ('_launcher', f'{LAUNCHER_CLASS}.java')


def _launcher_source_file() -> Traversable:
    """The loopback launcher's Java source, found with :func:`importlib.resources.files`."""
    resource = importlib.resources.files('python_dynamodb_lock')
    for part in _LAUNCHER_RESOURCE:
        resource = resource.joinpath(part)
    return resource


@functools.lru_cache(maxsize=1)
def launcher_source() -> str:
    return _launcher_source_file().read_text(encoding='utf-8')


_launcher_lock = threading.Lock()


def loopback_launcher_classes(java: pathlib.Path, scratch_dir: pathlib.Path) -> Optional[pathlib.Path]:
    """The folder holding the compiled loopback launcher, or None when it cannot be built.

    The class is compiled once with the ``javac`` that sits next to ``java`` and cached in the
    user's cache folder (``$XDG_CACHE_HOME`` or ``~/.cache``, then ``python_dynamodb_lock``);
    when that folder is not writable it is compiled into ``scratch_dir`` for this run only.
    Without ``javac`` (a JRE only) DynamoDB Local is started directly and listens on every
    interface; a WARNING says so.
    """
    real_java = java.resolve()
    javac = real_java.with_name('javac.exe' if real_java.suffix == '.exe' else 'javac')
    if not javac.is_file():
        logger.warning(
            'No javac next to %s: DynamoDB Local will listen on all interfaces, not only on %s. '
            'Install a JDK (not only a JRE) to restrict it to loopback.', real_java, LOOPBACK_HOST,
        )
        return None
    try:
        source = launcher_source()
    except OSError as error:
        logger.warning(
            'The DynamoDB Local loopback launcher source is missing from this installation (%s): '
            'DynamoDB Local will listen on all interfaces, not only on %s.', error, LOOPBACK_HOST,
        )
        return None
    digest = hashlib.sha256(f'{source}\0{real_java}'.encode()).hexdigest()[:16]
    cache_root = pathlib.Path(os.environ.get('XDG_CACHE_HOME') or pathlib.Path.home() / '.cache')
    target = cache_root / 'python_dynamodb_lock' / f'loopback-launcher-{digest}'
    if (target / f'{LAUNCHER_CLASS}.class').is_file():
        return target
    with _launcher_lock:
        if (target / f'{LAUNCHER_CLASS}.class').is_file():
            return target
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            build_dir = pathlib.Path(tempfile.mkdtemp(prefix='build-', dir=target.parent))
        except OSError as error:
            logger.info('Cache folder %s is not writable (%s); compiling into %s',
                        target.parent, error, scratch_dir)
            scratch_dir.mkdir(parents=True, exist_ok=True)
            build_dir = target = scratch_dir
        if not _compile_launcher(javac, build_dir, source):
            shutil.rmtree(build_dir, ignore_errors=True)
            return None
        if build_dir != target:
            try:
                os.replace(build_dir, target)
            except OSError:  # another process won the race; its copy is identical
                shutil.rmtree(build_dir, ignore_errors=True)
        return target


def _compile_launcher(javac: pathlib.Path, build_dir: pathlib.Path, launcher_source: str) -> bool:
    source = build_dir / f'{LAUNCHER_CLASS}.java'
    source.write_text(launcher_source, encoding='utf-8')
    try:
        result = subprocess.run(
            [str(javac), '-nowarn', '-d', str(build_dir), str(source)],
            stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120, check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        logger.warning('Could not compile the DynamoDB Local loopback launcher (%s); '
                       'DynamoDB Local will listen on all interfaces', error)
        return False
    if result.returncode != 0:
        logger.warning('javac failed on the DynamoDB Local loopback launcher; DynamoDB Local will '
                       'listen on all interfaces:\n%s', (result.stdout + result.stderr)[-2000:])
        return False
    source.unlink()
    logger.info('Compiled the DynamoDB Local loopback launcher into %s', build_dir)
    return True
