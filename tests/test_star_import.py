"""``from python_dynamodb_lock.python_dynamodb_lock import *`` gives what the published module's did.

The published module has no ``__all__``, so its star import gave every name it imported or
defined: its classes, and ``datetime``, ``time``, ``logger``, ``logging``, ``ClientError``,
``Decimal``, ``ThreadPoolExecutor``, ``uuid``, ``socket``, ``threading`` and ``quote``. Code
written against it uses them: the published package's own integration app does the star
import and then ``datetime.timedelta(...)``. The names are compared with the published releases
themselves (installed as tests/test_interop.py installs them; skipped where they cannot be,
except on CI).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any, Dict

import pytest

from test_interop import PUBLISHED, published_folder

MODULE = 'python_dynamodb_lock.python_dynamodb_lock'

# Describes each name of a star import of MODULE by what it is, printed as JSON: run in this
# process's interpreter with the package to compare first on the path.
DESCRIBE = f'''
import json, logging, types
namespace = {{}}
exec('from {MODULE} import *', namespace)
def describe(value):
    if isinstance(value, types.ModuleType):
        return 'module ' + value.__name__
    if isinstance(value, logging.Logger):
        return 'logger ' + value.name
    return 'object ' + value.__module__ + '.' + value.__qualname__
print(json.dumps({{name: describe(value) for name, value in namespace.items() if name != '__builtins__'}}))
'''


def star_import_of(path: str) -> Dict[str, str]:
    env = {**os.environ, 'PYTHONPATH': path}
    result = subprocess.run([sys.executable, '-c', DESCRIBE], capture_output=True, text=True, env=env, timeout=120,
                            cwd=path)
    assert result.returncode == 0, result.stderr
    described: Dict[str, str] = json.loads(result.stdout)
    return described


def ours() -> Dict[str, str]:
    import python_dynamodb_lock

    return star_import_of(os.path.dirname(os.path.dirname(python_dynamodb_lock.__file__)))


@pytest.mark.parametrize('version', sorted(PUBLISHED))
def test_the_star_import_gives_every_name_the_published_one_gave(version: str) -> None:
    published = star_import_of(str(published_folder(version)))
    assert ours() == published


def test_the_published_integration_apps_import_works() -> None:
    namespace: Dict[str, Any] = {}
    exec(f'from {MODULE} import *\n'
         'timeout = datetime.timedelta(seconds=5)\n'
         'started = time.monotonic()\n'
         'owner = socket.gethostname() + uuid.uuid4().hex\n', namespace)
    assert namespace['timeout'].total_seconds() == 5
    assert namespace['logger'].name == MODULE
    assert namespace['ClientError'].__module__ == 'botocore.exceptions'

