"""Either engine: :func:`start_embedded_engine` starts the one asked for, or whichever is installed."""
from __future__ import annotations

from .dynamodb_local import start_dynamodb_local
from .engine import EmbeddedEngine, EmbeddedEngineError, EngineNotInstalledError, logger
from .moto_server import start_moto_server

__all__ = ['start_embedded_engine']


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

