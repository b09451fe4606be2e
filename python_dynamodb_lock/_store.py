"""The threaded client's executor: the one place that sends requests to DynamoDB.

:class:`Store` runs a :class:`~python_dynamodb_lock._requests.Request` on the low-level client
of the application's boto3 DynamoDB resource (``resource.meta.client``): unlike the resource
itself, a client is safe to share between threads, and the resource's client still converts
between Python values and DynamoDB's typed JSON and carries the application's event hooks.
Every outcome comes back as an answer value (:mod:`python_dynamodb_lock._core.answers`); only
an exception that is not botocore's (a bug, an interrupt) propagates.
"""
from __future__ import annotations

import decimal
from typing import Any, Iterator, List, Union

from botocore.exceptions import BotoCoreError, ClientError

from ._core.answers import Answer, Applied, judge_batch, judge_error, single
from ._requests import Request
from ._wire import Wire

__all__ = ['Store']


class Store:
    """Sends requests on one thread-safe boto3 client."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.wire = Wire(client)

    def send(self, request: Request) -> Union[Answer, List[Answer]]:
        """The answer to one request; for ``batch_execute_statement`` a list of answers, one per
        statement, or one :class:`Failed` for the whole call."""
        try:
            response = getattr(self.client, request.operation)(**request.params)
        except (ClientError, BotoCoreError) as exc:
            return judge_error(exc)
        except decimal.DecimalException as exc:   # boto3 could not read a number in the answer
            return judge_error(exc)
        if request.operation == 'batch_execute_statement':
            return judge_batch(response, len(request.params['Statements']))
        return Applied(response)

    def pages(self, first: Request) -> Iterator[Answer]:
        """The answers to a paginated request (``scan``), page by page, until one fails."""
        params = dict(first.params)
        while True:
            answer = single(self.send(Request(first.operation, params)))
            yield answer
            if not isinstance(answer, Applied) or not answer.response.get('LastEvaluatedKey'):
                return
            params['ExclusiveStartKey'] = answer.response['LastEvaluatedKey']

