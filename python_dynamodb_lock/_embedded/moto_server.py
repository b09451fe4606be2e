"""moto's DynamoDB emulation behind an HTTP server in a thread of this process, serving one request
at a time so that each conditional write is atomic."""
from __future__ import annotations

import threading
from typing import Any, Callable, Optional

from .engine import (
    LOOPBACK_HOST,
    STOP_GRACE_SECONDS,
    EmbeddedEngine,
    EmbeddedEngineError,
    EngineNotInstalledError,
    logger,
)
from .find import MOTO_INSTALL_HINT

__all__ = ['start_moto_server']


class _SerialisedWSGIApp:
    """Runs every request of a WSGI app under one lock, body included.

    moto reads, checks and writes an item without a lock, so two concurrent conditional puts can
    both succeed. With one request at a time each conditional write is atomic, as on DynamoDB.
    """

    def __init__(self, app: Callable[..., Any]) -> None:
        self._app = app
        self._lock = threading.Lock()

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        with self._lock:
            result = self._app(environ, start_response)
            try:
                return list(result)
            finally:
                close = getattr(result, 'close', None)
                if close is not None:
                    close()


def start_moto_server(port: Optional[int] = None) -> EmbeddedEngine:
    """Start moto's DynamoDB emulation as an HTTP server on 127.0.0.1, in a daemon thread.

    Requests are served one at a time, so conditional writes are atomic. The backend is moto's
    global state in this process: a ``moto.mock_aws()`` started here meanwhile resets it.

    Args:
        port: the port to listen on; default a free one chosen by the OS.

    Raises:
        EngineNotInstalledError: moto or what its server imports (flask, flask-cors, werkzeug)
            is not installed.
        EmbeddedEngineError: the port could not be bound.
    """
    try:
        from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
        from werkzeug.serving import WSGIRequestHandler, make_server
    except ImportError as error:
        raise EngineNotInstalledError(f'moto server is not available ({error}). {MOTO_INSTALL_HINT}') from error

    class QuietRequestHandler(WSGIRequestHandler):
        def log_request(self, code: object = '-', size: object = '-') -> None:
            logger.debug('moto server: %s %s -> %s', self.command, self.path, code)

    app = _SerialisedWSGIApp(DomainDispatcherApplication(create_backend_app))
    try:
        server = make_server(LOOPBACK_HOST, port or 0, app, threaded=True,
                             request_handler=QuietRequestHandler)
    except OSError as error:
        raise EmbeddedEngineError(f'moto server could not listen on {LOOPBACK_HOST}:{port}: {error}') from error
    bound_port = int(server.server_address[1])
    thread = threading.Thread(target=server.serve_forever, kwargs={'poll_interval': 0.2},
                              name=f'moto-server-{bound_port}', daemon=True)
    thread.start()

    def stop_server() -> None:
        server.shutdown()
        server.server_close()
        thread.join(STOP_GRACE_SECONDS)
        if thread.is_alive():
            logger.warning('moto server thread on port %d did not finish', bound_port)

    engine = EmbeddedEngine('moto', LOOPBACK_HOST, bound_port, stop_server,
                            is_running=thread.is_alive)
    logger.info('moto server (serialised) is ready at %s', engine.endpoint_url)
    return engine

