"""The simulated table: :class:`SimulatedTable`, what the simulation driver talks to."""
from __future__ import annotations

from typing import Any, Dict, Mapping

from ..._model import schema as _schema
from .errors import Invalid, client_error, metadata
from .operations import HANDLERS
from .table import BY_API_NAME, OPERATIONS, TableState

__all__ = ['SimulatedTable']


class SimulatedTable(TableState):
    """One DynamoDB table in memory, answering the requests this library sends.

    ``partition_key`` and ``sort_key`` are ``(name, type)`` pairs (:class:`~.table.KeyAttribute`);
    ``page_size`` (optional) ends a page of ``scan``/``query`` after that many items, as
    DynamoDB ends one at 1 MB; ``clock`` (optional, seconds) lets ``ClientRequestToken``\\ s
    expire after 10 minutes as DynamoDB's do (without it they never expire).
    """

    @classmethod
    def from_schema(cls, schema: _schema.Schema, **options: Any) -> 'SimulatedTable':
        """The lock table a client with ``schema`` uses (its table name, key names and types)."""
        sort_key = (schema.sort_key_name, 'S') if schema.sort_key_name is not None else None
        return cls(schema.table_name, (schema.partition_key_name, schema.partition_key_type), sort_key, **options)

    # -- requests ------------------------------------------------------------------------------
    def handle(self, operation: str, params: Mapping[str, Any]) -> Dict[str, Any]:
        """The answer to one request, or the ``ClientError`` DynamoDB would give (raised)."""
        method = BY_API_NAME.get(operation, operation)
        if method not in OPERATIONS:
            raise NotImplementedError(f'the simulated table does not model {operation}; it takes '
                                      f'{", ".join(sorted(OPERATIONS))}')
        self._requests += 1
        request_id = f'SIMULATED-{self._requests:08d}'
        try:
            answer = HANDLERS[method](self, dict(params), request_id)
        except Invalid as invalid:
            raise client_error(OPERATIONS[method], invalid.code, invalid.message, request_id) from None
        answer['ResponseMetadata'] = metadata(request_id, 200)
        return answer
