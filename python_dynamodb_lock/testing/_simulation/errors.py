"""The errors of the simulated table, shaped as botocore raises DynamoDB's (``ClientError``)."""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional

from botocore.exceptions import ClientError

__all__ = [
    'CONDITION_FAILED_MESSAGE',
    'Invalid',
    'client_error',
    'condition_failed',
    'metadata',
    'transaction_canceled',
    'validation',
]

CONDITION_FAILED_MESSAGE = 'The conditional request failed'


class Invalid(Exception):
    """A request DynamoDB refuses with ``code`` (a ValidationException unless said): raised
    inside the model, turned into a ``ClientError`` of the operation by the table."""

    def __init__(self, message: str, code: str = 'ValidationException') -> None:
        super().__init__(message)
        self.message = message
        self.code = code


def validation(message: str) -> Invalid:
    return Invalid(message)


def metadata(request_id: str, status: int) -> Dict[str, Any]:
    """``ResponseMetadata`` as botocore gives it (first attempt, no HTTP headers kept)."""
    return {'RequestId': request_id, 'HTTPStatusCode': status, 'HTTPHeaders': {}, 'RetryAttempts': 0}


def client_error(operation_name: str, code: str, message: str, request_id: str,
                 extra: Optional[Mapping[str, Any]] = None) -> ClientError:
    """A ``ClientError`` of an API operation (``'UpdateItem'``), status 400, with ``extra``
    top-level fields of the parsed error (``Item``, ``CancellationReasons``)."""
    response: Dict[str, Any] = {'Error': {'Message': message, 'Code': code},
                                'ResponseMetadata': metadata(request_id, 400)}
    if extra:
        response.update(extra)
    return ClientError(response, operation_name)  # type: ignore[arg-type]


def condition_failed(operation_name: str, request_id: str, item: Optional[Mapping[str, Any]]) -> ClientError:
    """ConditionalCheckFailedException; ``item`` the row in the way when the request asked for it."""
    extra = {'Item': dict(item)} if item else None
    return client_error(operation_name, 'ConditionalCheckFailedException', CONDITION_FAILED_MESSAGE, request_id,
                        extra)


def transaction_canceled(request_id: str, reasons: List[Dict[str, Any]]) -> ClientError:
    """TransactionCanceledException with one reason per action, in order."""
    codes = ', '.join(str(reason['Code']) for reason in reasons)
    message = f'Transaction cancelled, please refer cancellation reasons for specific reasons [{codes}]'
    return client_error('TransactWriteItems', 'TransactionCanceledException', message, request_id,
                        {'Message': message, 'CancellationReasons': reasons})
