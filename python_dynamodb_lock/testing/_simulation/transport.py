"""The simulated wire: a request goes to the :class:`~.simulated.SimulatedTable`, and comes back
as the answer value the transports give (:mod:`python_dynamodb_lock._core.answers`), or as the
fault the scheduler chose for it: throttled before it arrives, or applied with its answer lost.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Union

from botocore.exceptions import ClientError, ReadTimeoutError

from ..._core.answers import Answer, judge_answer, judge_error
from ..._requests import Request
from ..._wire import Wire
from .errors import metadata
from .simulated import SimulatedTable

__all__ = ['LOST', 'THROTTLED', 'WRITES', 'SimulatedTransport']

THROTTLED = 'throttled'
LOST = 'lost'
#: The operations that change the table: only their answers are worth losing.
WRITES = frozenset({'put_item', 'update_item', 'delete_item', 'transact_write_items', 'batch_execute_statement',
                    'execute_statement'})

class _Meta:
    """What :class:`Wire` reads of a client's ``meta``: DynamoDB's service model, loaded once
    from botocore's data files (no client is made, no configuration read), when a request
    without a fast path first needs it."""

    _model: Any = None

    @property
    def service_model(self) -> Any:
        if _Meta._model is None:
            from botocore.loaders import Loader
            from botocore.model import ServiceModel
            _Meta._model = ServiceModel(Loader().load_service_model('dynamodb', 'service-2'), 'dynamodb')
        return _Meta._model

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
        params = self.wire.to_typed(operation, request.params)
        self.sent += 1
        try:
            response = self.table.handle(operation, params)
        except ClientError as exc:
            if fault == LOST:
                return judge_error(ReadTimeoutError(endpoint_url='https://dynamodb.simulated'))
            return judge_error(exc)
        if fault == LOST:
            return judge_error(ReadTimeoutError(endpoint_url='https://dynamodb.simulated'))
        response = self.wire.answer_to_python(operation, response)
        return judge_answer(operation, request.params, response)
