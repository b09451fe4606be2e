"""The asyncio client's executor: sends requests on an aiobotocore DynamoDB client.

aiobotocore's client speaks DynamoDB's typed JSON; the requests are built with Python values
(as boto3's resource layer takes them). :class:`~python_dynamodb_lock._wire.typed_json.Wire` converts both
ways with boto3's own machinery, so the two clients send the same requests.
"""
from __future__ import annotations

from typing import List, Union

from botocore.exceptions import BotoCoreError, ClientError

from .._core.answers import Answer, judge_answer, judge_error
from .._wire.requests import Request
from .._wire.typed_json import Wire

__all__ = ['TaskTransport']


class TaskTransport:
    """Sends requests on one aiobotocore DynamoDB client."""

    def __init__(self, client: object) -> None:
        self.client = client
        self.wire = Wire(client)

    async def send(self, request: Request) -> Union[Answer, List[Answer]]:
        """Like :meth:`python_dynamodb_lock._drivers.thread_transport.ThreadTransport.send`."""
        params = self.wire.to_typed(request.operation, request.params)
        try:
            response = await getattr(self.client, request.operation)(**params)
        except (ClientError, BotoCoreError) as exc:
            return judge_error(exc)
        response = self.wire.answer_to_python(request.operation, response)
        return judge_answer(request.operation, request.params, response)
