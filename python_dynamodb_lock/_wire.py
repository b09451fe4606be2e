"""Between Python values and DynamoDB's typed JSON, by an operation's model.

The same machinery boto3's resource layer uses (:class:`boto3.dynamodb.transform.ParameterTransformer`
over the operation's input or output shape), so requests sent through an aiobotocore client,
or items given in typed JSON, match what the resource layer would send byte for byte. Numbers
are read exactly (boto3 traps 38 digits and more: boto/boto3#2500).
"""
from __future__ import annotations

import copy
from decimal import Decimal
from typing import Any, Dict

from boto3.dynamodb.transform import ParameterTransformer
from boto3.dynamodb.types import TypeDeserializer, TypeSerializer

__all__ = ['Wire']

_transformer = ParameterTransformer()
_serializer = TypeSerializer()


class _ExactDeserializer(TypeDeserializer):
    def _deserialize_n(self, value: str) -> Decimal:
        return Decimal(value)


_deserializer = _ExactDeserializer()


class Wire:
    """Converts the arguments and answers of one low-level client's DynamoDB operations."""

    def __init__(self, client: Any) -> None:
        self._meta = client.meta
        self._models: Dict[str, Any] = {}

    def _model(self, operation: str) -> Any:
        model = self._models.get(operation)
        if model is None:
            api_name = self._meta.method_to_api_mapping[operation]
            model = self._models[operation] = self._meta.service_model.operation_model(api_name)
        return model

    def to_typed(self, operation: str, params: Dict[str, Any]) -> Dict[str, Any]:
        """A copy of ``params`` with every attribute value in typed JSON."""
        params = copy.deepcopy(params)
        _transformer.transform(params, self._model(operation).input_shape, _serializer.serialize, 'AttributeValue')
        return params

    def to_python(self, operation: str, params: Dict[str, Any]) -> Dict[str, Any]:
        """A copy of an operation's typed arguments with every attribute value as a Python value."""
        params = copy.deepcopy(params)
        _transformer.transform(params, self._model(operation).input_shape, _deserializer.deserialize,
                               'AttributeValue')
        return params

    def answer_to_python(self, operation: str, response: Dict[str, Any]) -> Dict[str, Any]:
        """An operation's typed answer with every attribute value as a Python value (in place)."""
        output_shape = self._model(operation).output_shape
        if output_shape is not None:
            _transformer.transform(response, output_shape, _deserializer.deserialize, 'AttributeValue')
        return response
