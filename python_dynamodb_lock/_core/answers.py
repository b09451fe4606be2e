"""DynamoDB's answers as values, and the rules that classify an error.

Both executors (the threaded and the asyncio one) turn every outcome of a call into one of
these values, with :func:`judge_error` for errors, so the protocol never sees an exception
from botocore and the rules for "was it applied?" are written once:

* :class:`Applied` -- the call succeeded; ``response`` is what DynamoDB returned (Python values).
* :class:`Refused` -- a condition failed; ``item`` is the row that was in the way (None: no
  row). ``retried`` is True when botocore made more than one attempt: an earlier attempt of this
  very write may have been applied, its answer lost, and ``item`` written after it.
* :class:`Failed` -- any other failure. ``maybe_applied`` says whether DynamoDB may have applied
  the write all the same (a lost answer); ``reason`` is a :class:`~python_dynamodb_lock.Reason`.
"""
from __future__ import annotations

import dataclasses
import decimal
from typing import Any, Dict, List, Mapping, Optional, Union, cast

from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectionError as BotoConnectionError,
    ParamValidationError,
)

from .._model.errors import Reason
from .._wire.typed_json import python_item

__all__ = [
    'Answer',
    'Applied',
    'Failed',
    'Refused',
    'judge_answer',
    'judge_batch',
    'judge_error',
    'single',
    'statement_retryable',
]

CONDITION_FAILED = 'ConditionalCheckFailedException'

_THROTTLING = frozenset({
    'ProvisionedThroughputExceededException', 'ThrottlingException', 'RequestLimitExceeded',
    'ThrottlingError', 'ProvisionedThroughputExceeded', 'TooManyRequestsException',
})
_ACCESS = frozenset({'AccessDeniedException', 'UnrecognizedClientException', 'MissingAuthenticationTokenException',
                     'InvalidSignatureException', 'ExpiredTokenException'})
# Per-statement error codes of BatchExecuteStatement after which the statement may have been
# applied all the same; every other code means DynamoDB did not apply it.
_STATEMENT_OUTCOME_UNKNOWN = frozenset({'InternalServerError'})
# A statement refused for throughput inside a successful batch is not retried by botocore.
_RETRYABLE_STATEMENT_ERRORS = frozenset({'ThrottlingError', 'ProvisionedThroughputExceeded', 'RequestLimitExceeded',
                                         'TransactionConflict'})



@dataclasses.dataclass(frozen=True)
class Applied:
    response: Mapping[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class Refused:
    item: Optional[Dict[str, Any]]
    retried: bool = False


@dataclasses.dataclass(frozen=True)
class Failed:
    error: BaseException
    maybe_applied: bool
    reason: str
    code: str = ''

    @property
    def retryable_statement(self) -> bool:
        """A statement refused for throughput inside a successful batch, and surely not applied."""
        return (not self.maybe_applied and isinstance(self.error, ClientError)
                and self.error.operation_name == 'BatchExecuteStatement'
                and self.code in _RETRYABLE_STATEMENT_ERRORS)


Answer = Union[Applied, Refused, Failed]


def single(answer: Union[Answer, List[Answer]]) -> Answer:
    """The answer to a request that is not a batch (a list here is a programming error)."""
    if isinstance(answer, list):
        raise TypeError('one answer expected, got the answers of a batch')
    return answer


def statement_retryable(answer: Answer) -> bool:
    return isinstance(answer, Failed) and answer.retryable_statement


def error_code(exc: BaseException) -> str:
    """The DynamoDB error code of a ``ClientError``, or '' for anything else."""
    if isinstance(exc, ClientError):
        return str(exc.response.get('Error', {}).get('Code', ''))
    return ''


def maybe_applied(exc: BaseException) -> bool:
    """True when a failed write may nevertheless have been applied by DynamoDB.

    botocore retries a failed attempt, and the exception it finally raises describes only the
    last attempt: a throttled or refused retry can follow an earlier attempt that was applied
    and whose answer was lost (read timeout, connection closed mid-response, HTTP 5xx). So the
    outcome is known only for an error answered on the first attempt with a 4xx (validation,
    missing table, throttling without retries) or raised before sending.
    """
    if isinstance(exc, ClientError):
        metadata = exc.response.get('ResponseMetadata', {})
        status = int(metadata.get('HTTPStatusCode') or 0)
        return status >= 500 or int(metadata.get('RetryAttempts') or 0) > 0
    if isinstance(exc, ParamValidationError):
        return False
    return isinstance(exc, BotoCoreError)


def reason_of(exc: BaseException) -> str:
    code = error_code(exc)
    if isinstance(exc, ClientError):
        status = int(exc.response.get('ResponseMetadata', {}).get('HTTPStatusCode') or 0)
        if code == 'ResourceNotFoundException':
            return Reason.TABLE_NOT_FOUND
        if code in _THROTTLING:
            return Reason.THROTTLED
        if code in _ACCESS:
            return Reason.ACCESS_DENIED
        if code == 'ValidationException':
            return Reason.WRONG_KEY_SCHEMA if 'key' in str(exc).lower() else Reason.VALIDATION
        if status >= 500:
            return Reason.UNREACHABLE
        return Reason.OTHER
    if isinstance(exc, (BotoConnectionError, BotoCoreError)) and not isinstance(exc, ParamValidationError):
        return Reason.UNREACHABLE
    if isinstance(exc, decimal.DecimalException):
        return Reason.VALIDATION
    return Reason.OTHER


def judge_error(exc: BaseException) -> Union[Refused, Failed]:
    """Classify an exception raised by a DynamoDB call (botocore's, from either executor)."""
    code = error_code(exc)
    if code == CONDITION_FAILED and isinstance(exc, ClientError):
        attempts_before = int(exc.response.get('ResponseMetadata', {}).get('RetryAttempts') or 0)
        item = cast(Optional[Mapping[str, Any]], exc.response.get('Item'))
        return Refused(deserialize(item), retried=attempts_before > 0)
    return Failed(exc, maybe_applied(exc), reason_of(exc), code)


def deserialize(item: Optional[Mapping[str, Any]]) -> Optional[Dict[str, Any]]:
    """Typed DynamoDB JSON to Python values (botocore leaves error responses typed)."""
    if not item:
        return None
    return python_item(item)


def judge_answer(operation: str, params: Mapping[str, Any], response: Dict[str, Any]) -> Union[Answer, List[Answer]]:
    """The answer to a call that raised nothing (``response`` in Python values): for
    ``batch_execute_statement`` one answer per statement, else :class:`Applied`."""
    if operation == 'batch_execute_statement':
        return judge_batch(response, len(params['Statements']))
    return Applied(response)


def judge_batch(response: Mapping[str, Any], count: int) -> List[Answer]:
    """One answer per statement of a successful ``BatchExecuteStatement`` call, in order.

    ``response`` holds Python values (the failed statements' ``Item`` included). An answer of
    the wrong length is treated as a server error for every statement.
    """
    metadata = dict(response.get('ResponseMetadata') or {})
    retried = int(metadata.get('RetryAttempts') or 0) > 0
    answers = response.get('Responses') or []
    if len(answers) != count:
        error = ClientError(
            cast(Any, {'Error': {'Code': 'UnexpectedResponse',
                                 'Message': f'{len(answers)} answers to {count} statements'},
                       'ResponseMetadata': {**metadata, 'HTTPStatusCode': 500}}),
            'BatchExecuteStatement',
        )
        return [judge_error(error)] * count
    return [_statement_answer(answer.get('Error'), metadata, retried) for answer in answers]


def _statement_answer(error: Optional[Mapping[str, Any]], metadata: Mapping[str, Any], retried: bool) -> Answer:
    if not error:
        return Applied({})
    code = str(error.get('Code', ''))
    if code == 'ConditionalCheckFailed':
        item = error.get('Item')
        return Refused(dict(item) if item else None, retried=retried)
    status = 500 if code in _STATEMENT_OUTCOME_UNKNOWN else 400
    failure = ClientError(
        cast(Any, {'Error': {'Code': code, 'Message': str(error.get('Message', ''))},
                   'ResponseMetadata': {**metadata, 'HTTPStatusCode': status}}),
        'BatchExecuteStatement',
    )
    return judge_error(failure)
