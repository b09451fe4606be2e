"""The asyncio client's executor: sends requests on an aiobotocore DynamoDB client.

aiobotocore's client speaks DynamoDB's typed JSON; the requests are built with Python values
(as boto3's resource layer takes them). This executor converts both ways with the same
machinery boto3's resource layer uses (:class:`boto3.dynamodb.transform.ParameterTransformer`
over the operation's model), so the two clients send byte-for-byte the same requests.
"""
from __future__ import annotations

import copy
from typing import Any, Dict, List, Union

from boto3.dynamodb.transform import ParameterTransformer
from boto3.dynamodb.types import TypeDeserializer, TypeSerializer
from botocore.exceptions import BotoCoreError, ClientError

from ._core.answers import Answer, Applied, judge_batch, judge_error
from ._requests import Request

__all__ = ['AsyncStore']

_transformer = ParameterTransformer()
_serializer = TypeSerializer()
_deserializer = TypeDeserializer()


class AsyncStore:
    """Sends requests on one aiobotocore DynamoDB client."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self._models: Dict[str, Any] = {}

    def _model(self, operation: str) -> Any:
        model = self._models.get(operation)
        if model is None:
            api_name = self.client.meta.method_to_api_mapping[operation]
            model = self._models[operation] = self.client.meta.service_model.operation_model(api_name)
        return model

    def to_wire(self, request: Request) -> Dict[str, Any]:
        """The request's arguments with every attribute value in DynamoDB's typed JSON."""
        params = copy.deepcopy(request.params)   # the transformer converts in place
        _transformer.transform(params, self._model(request.operation).input_shape, _serializer.serialize,
                               'AttributeValue')
        return params

    def from_wire(self, operation: str, response: Dict[str, Any]) -> Dict[str, Any]:
        output_shape = self._model(operation).output_shape
        if output_shape is not None:
            _transformer.transform(response, output_shape, _deserializer.deserialize, 'AttributeValue')
        return response

    async def send(self, request: Request) -> Union[Answer, List[Answer]]:
        """Like :meth:`python_dynamodb_lock._store.Store.send`."""
        params = self.to_wire(request)
        try:
            response = await getattr(self.client, request.operation)(**params)
        except (ClientError, BotoCoreError) as exc:
            return judge_error(exc)
        response = self.from_wire(request.operation, response)
        if request.operation == 'batch_execute_statement':
            return judge_batch(response, len(request.params['Statements']))
        return Applied(response)
