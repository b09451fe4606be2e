"""The threaded client's executor: the one place that sends requests to DynamoDB.

:class:`ThreadTransport` runs a :class:`~python_dynamodb_lock._wire.requests.Request` on a boto3 client, which
is safe to share between threads (a resource is not):

- the low-level client of the application's DynamoDB resource (``resource.meta.client``), which
  still converts between Python values and DynamoDB's typed JSON (boto3's resource layer) and
  carries the application's event hooks;
- or a low-level client the application gave (``boto3.client('dynamodb')``), which speaks typed
  JSON: :class:`~python_dynamodb_lock._wire.typed_json.Wire` converts both ways, as for the asyncio client,
  and each call skips the resource layer's copy and walks of the request.

Every outcome comes back as an answer value (:mod:`python_dynamodb_lock._core.answers`); only
an exception that is not botocore's (a bug, an interrupt) propagates.
"""
from __future__ import annotations

import decimal
from typing import List, Union

from botocore.exceptions import BotoCoreError, ClientError

from .._core.answers import Answer, judge_answer, judge_error
from .._wire.requests import Request
from .._wire.typed_json import Wire

__all__ = ['ThreadTransport']


class ThreadTransport:
    """Sends requests on one thread-safe boto3 client; ``typed``: the client takes and gives
    typed JSON (no resource layer on it)."""

    def __init__(self, client: object, typed: bool = False) -> None:
        self.client = client
        self.typed = typed
        self.wire = Wire(client)

    def send(self, request: Request) -> Union[Answer, List[Answer]]:
        """The answer to one request; for ``batch_execute_statement`` a list of answers, one per
        statement, or one :class:`Failed` for the whole call."""
        operation = request.operation
        params = self.wire.to_typed(operation, request.params) if self.typed else request.params
        try:
            response = getattr(self.client, operation)(**params)
        except (ClientError, BotoCoreError) as exc:
            return judge_error(exc)
        except decimal.DecimalException as exc:   # boto3 could not read a number in the answer
            return judge_error(exc)
        if self.typed:
            response = self.wire.answer_to_python(operation, response)   # numbers read exactly
        return judge_answer(operation, request.params, response)

