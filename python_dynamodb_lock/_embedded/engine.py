"""The handle of a running embedded engine (:class:`EmbeddedEngine`), the errors of starting one,
and the one logger of the engine launcher (every module of this package logs on it)."""
from __future__ import annotations

import atexit
import logging
import os
import pathlib
import threading
from typing import TYPE_CHECKING, Any, Callable, Optional

import boto3
import botocore.config

from .sessions import dummy_boto3_session, merged_client_config

if TYPE_CHECKING:
    from types import TracebackType

__all__ = [
    'LOGGER_NAME',
    'LOOPBACK_HOST',
    'STOP_GRACE_SECONDS',
    'EmbeddedEngine',
    'EmbeddedEngineError',
    'EngineNotInstalledError',
    'logger',
    'read_tail',
]

#: The engine launcher's logger (the command line's ``-v`` shows its lines).
LOGGER_NAME = 'python_dynamodb_lock._embedded'
logger = logging.getLogger(LOGGER_NAME)

LOOPBACK_HOST = '127.0.0.1'
STOP_GRACE_SECONDS = 5.0
_LOG_TAIL_CHARS = 4000


class EmbeddedEngineError(RuntimeError):
    """An embedded engine could not be started (or misbehaved); the message says why."""


class EngineNotInstalledError(EmbeddedEngineError):
    """The engine, or what it needs to run (Java, moto's server), is not installed.

    The message says how to install it. Test fixtures turn this into a skip (or, on CI, a failure).
    """


class EmbeddedEngine:
    """A running local DynamoDB endpoint, stopped by :meth:`stop` or by leaving a ``with`` block.

    Attributes:
        name: ``'dynamodb-local'`` or ``'moto'`` (the values :func:`start_embedded_engine` accepts).
        endpoint_url: ``http://127.0.0.1:<port>``.
        host, port: where it listens. ``host`` is ``'0.0.0.0'`` only when DynamoDB Local had to be
            started without the loopback launcher (no ``javac`` found; a WARNING is logged).
        pid: the Java process id for DynamoDB Local; None for the in-process moto server.
        log_path: DynamoDB Local's stdout/stderr (removed by :meth:`stop`); None for moto.
        is_atomic: True: both engines apply each conditional write atomically.
    """

    def __init__(
        self,
        name: str,
        host: str,
        port: int,
        stop_engine: Callable[[], None],
        *,
        pid: Optional[int] = None,
        log_path: Optional[pathlib.Path] = None,
        is_running: Optional[Callable[[], bool]] = None,
    ) -> None:
        self.name = name
        self.host = host
        self.port = port
        self.endpoint_url = f'http://{LOOPBACK_HOST}:{port}'
        self.pid = pid
        self.log_path = log_path
        self.is_atomic = True
        self._stop_engine = stop_engine
        self._is_running = is_running
        self._stopped = False
        self._state_lock = threading.Lock()
        self._session_lock = threading.Lock()
        self._boto3_session: Optional[boto3.session.Session] = None
        atexit.register(self.stop)

    def __repr__(self) -> str:
        state = 'running' if self.running else 'stopped'
        return f'<EmbeddedEngine {self.name} {self.endpoint_url} pid={self.pid} {state}>'

    def __enter__(self) -> EmbeddedEngine:
        return self

    def __exit__(
        self,
        exc_type: Optional[type[BaseException]],
        exc: Optional[BaseException],
        traceback: Optional[TracebackType],
    ) -> None:
        self.stop()

    @property
    def running(self) -> bool:
        """True until :meth:`stop` is called, or until the engine's process died on its own."""
        if self._stopped:
            return False
        return self._is_running() if self._is_running is not None else True

    def stop(self) -> None:
        """Stop the engine and free its port. Safe to call more than once.

        DynamoDB Local is sent SIGTERM, then killed if it has not exited within a few seconds.
        """
        with self._state_lock:
            if self._stopped:
                return
            self._stopped = True
        atexit.unregister(self.stop)
        logger.info('Stopping %s at %s', self.name, self.endpoint_url)
        self._stop_engine()

    def log_tail(self, max_chars: int = _LOG_TAIL_CHARS) -> str:
        """The last ``max_chars`` characters of the engine's log ('' when there is none)."""
        return read_tail(self.log_path, max_chars)

    def client(self, config: Optional[botocore.config.Config] = None) -> Any:
        """A low-level boto3 DynamoDB client for this engine (dummy credentials, us-east-1).

        ``config`` is merged over :func:`default_client_config` (three attempts in botocore's
        standard retry mode, short timeouts; see :func:`merged_client_config`). Each call
        returns a new client, so event hooks registered on one do not affect the others.
        """
        return self._create('client', config)

    def resource(self, config: Optional[botocore.config.Config] = None) -> Any:
        """A boto3 DynamoDB service resource for this engine; see :meth:`client`."""
        return self._create('resource', config)

    def _create(self, kind: str, config: Optional[botocore.config.Config]) -> Any:
        merged = merged_client_config(config)
        # One boto3 session per engine keeps the parsed service model, so a new client costs
        # milliseconds instead of a tenth of a second. Sessions are not thread-safe: hence the lock.
        with self._session_lock:
            if self._boto3_session is None:
                self._boto3_session = dummy_boto3_session()
            factory = getattr(self._boto3_session, kind)
            return factory('dynamodb', endpoint_url=self.endpoint_url, config=merged)


def read_tail(path: Optional[pathlib.Path], max_chars: int) -> str:
    if path is None:
        return ''
    try:
        with open(path, 'rb') as log:
            log.seek(0, os.SEEK_END)
            size = log.tell()
            log.seek(max(0, size - max_chars))
            return log.read().decode('utf-8', errors='replace')
    except OSError:
        return ''
