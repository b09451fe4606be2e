"""Amazon DynamoDB Local in memory on 127.0.0.1: the Java process, its launch on a free port, its
readiness and its stop."""
from __future__ import annotations

import os
import pathlib
import shutil
import socket
import subprocess
import tempfile
import time
from typing import Optional, Union

import botocore.config
import botocore.exceptions

from .engine import (
    LOOPBACK_HOST,
    STOP_GRACE_SECONDS,
    EmbeddedEngine,
    EmbeddedEngineError,
    EngineNotInstalledError,
    logger,
    read_tail,
)
from .find import (
    DYNAMODB_LOCAL_INSTALL_HINT,
    JAR_NAME,
    NATIVE_LIB_DIR_NAME,
    find_dynamodb_local,
    find_java,
    is_lib_dir,
    not_found_message,
)
from .launcher import LAUNCHER_CLASS, loopback_launcher_classes

__all__ = ['start_dynamodb_local']

_READY_POLL_SECONDS = 0.1


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
            raise EngineNotInstalledError(not_found_message())
        lib_path = found
    else:
        lib_path = pathlib.Path(lib_dir).expanduser().resolve()
        if not is_lib_dir(lib_path):
            raise EngineNotInstalledError(
                f'{lib_path} does not hold {JAR_NAME} and {NATIVE_LIB_DIR_NAME}/. '
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
    launcher_dir = loopback_launcher_classes(java, work_dir / 'launcher')
    jar = lib_dir / JAR_NAME
    command = [str(java), f'-Djava.library.path={lib_dir / NATIVE_LIB_DIR_NAME}']
    if launcher_dir is not None:
        host = LOOPBACK_HOST
        command += [f'-Dddblocal.host={host}', '-Dddblocal.exitOnStdinEof=true',
                    '-cp', os.pathsep.join([str(jar), str(launcher_dir)]), LAUNCHER_CLASS]
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
            if ready_marker is None or ready_marker in read_tail(engine.log_path, 1 << 20):
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
            process.wait(STOP_GRACE_SECONDS)
        except subprocess.TimeoutExpired:
            logger.warning('%s (pid %d) ignored SIGTERM for %g s; killing it', what, process.pid,
                           STOP_GRACE_SECONDS)
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

