"""The simulated wire: a request goes to the :class:`~.simulated.SimulatedTable`, and comes back
as the answer value the transports give (:mod:`python_dynamodb_lock._core.answers`), or as the
fault the scheduler chose for it: throttled before it arrives, or applied with its answer lost.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Union

from botocore.exceptions import ClientError, ReadTimeoutError

from ..._core.answers import Answer, judge_answer, judge_error
from ..._wire.requests import Request
from ..._wire.typed_json import Wire
from .errors import metadata
from .simulated import SimulatedTable

__all__ = ['LOST', 'LOST_REQUEST', 'SERVER_ERROR', 'SERVER_ERROR_APPLIED', 'THROTTLED', 'WRITES', 'SimulatedTransport']

THROTTLED = 'throttled'
LOST = 'lost'
LOST_REQUEST = 'lost request'                      # never arrived (or arrives later): timed out, not applied
SERVER_ERROR = 'server error'                      # HTTP 500, the request not applied
SERVER_ERROR_APPLIED = 'server error, applied'     # HTTP 500 after DynamoDB applied it
#: The operations that change the table: only their answers are worth losing.
WRITES = frozenset({'put_item', 'update_item', 'delete_item', 'transact_write_items', 'batch_execute_statement',
                    'execute_statement'})

class _Meta:
    """What :class:`Wire` reads of a client's ``meta``: DynamoDB's service model, loaded once
    from botocore's data files (no client is made, no configuration read), when a request
    without a fast path first needs it."""

    loaded: Any = None

    @property
    def service_model(self) -> Any:
        if _Meta.loaded is None:
            from botocore.loaders import Loader
            from botocore.model import ServiceModel
            _Meta.loaded = ServiceModel(Loader().load_service_model('dynamodb', 'service-2'), 'dynamodb')
        return _Meta.loaded

    @property
    def method_to_api_mapping(self) -> Dict[str, str]:
        from botocore import xform_name
        return {xform_name(name): name for name in self.service_model.operation_names}


class _Stub:
    meta = _Meta()


def throttled(operation: str) -> ClientError:
    """What botocore raises when DynamoDB refused a request for throughput on its first
    attempt (nothing was applied)."""
    response: Any = {'Error': {'Code': 'ProvisionedThroughputExceededException',
                               'Message': 'The level of configured provisioned throughput for the table was exceeded'},
                     'ResponseMetadata': metadata('SIMULATED-THROTTLED', 400)}
    return ClientError(response, operation)


def server_error(operation: str) -> ClientError:
    """What botocore raises for DynamoDB's HTTP 500 (its retries spent): the request may or
    may not have been applied."""
    response: Any = {'Error': {'Code': 'InternalServerError', 'Message': 'Internal server error'},
                     'ResponseMetadata': metadata('SIMULATED-500', 500)}
    return ClientError(response, operation)


class SimulatedTransport:
    """Sends requests to one simulated table (typed JSON in, Python values out, as
    ``ThreadTransport`` does with a low-level client)."""

    def __init__(self, table: SimulatedTable) -> None:
        self.table = table
        self.wire = Wire(_Stub())
        self.sent = 0          # requests that reached the table

    def send(self, request: Request, fault: Optional[str] = None) -> Union[Answer, List[Answer]]:
        operation = request.operation
        if fault == THROTTLED:
            return judge_error(throttled(operation))
        if fault == SERVER_ERROR:
            return judge_error(server_error(operation))
        if fault == LOST_REQUEST:
            return judge_error(ReadTimeoutError(endpoint_url='https://dynamodb.simulated'))
        params = self.wire.to_typed(operation, request.params)
        self.sent += 1
        try:
            response = self.table.handle(operation, params)
        except ClientError as exc:
            return self._unanswered(operation, fault) or judge_error(exc)
        unanswered = self._unanswered(operation, fault)
        if unanswered is not None:
            return unanswered
        response = self.wire.answer_to_python(operation, response)
        return judge_answer(operation, request.params, response)

    @staticmethod
    def _unanswered(operation: str, fault: Optional[str]) -> Optional[Answer]:
        """The answer that replaces the table's when ``fault`` struck after the request was
        applied (None: the table's answer arrives)."""
        if fault == LOST:
            return judge_error(ReadTimeoutError(endpoint_url='https://dynamodb.simulated'))
        if fault == SERVER_ERROR_APPLIED:
            return judge_error(server_error(operation))
        return None
