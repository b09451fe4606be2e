"""Between Python values and DynamoDB's typed JSON, by an operation's model.

The same machinery boto3's resource layer uses (:class:`boto3.dynamodb.transform.ParameterTransformer`
over the operation's input or output shape), so requests sent through an aiobotocore client,
or items given in typed JSON, match what the resource layer would send byte for byte. Numbers
are read exactly (boto3 traps 38 digits and more: boto/boto3#2500).

The lock's own requests (single-item reads and writes, whose attribute values sit only in
``Key``, ``Item`` and ``ExpressionAttributeValues``) and their answers take a shorter way to
the same JSON: no deep copy and no walk over the operation's shape, and strings and small
integers typed directly (anything else still goes through boto3's serializer).
"""
from __future__ import annotations

import copy
from decimal import Decimal
from typing import Any, Dict, Mapping, cast

from boto3.dynamodb.transform import ParameterTransformer
from boto3.dynamodb.types import TypeDeserializer, TypeSerializer

__all__ = ['Wire']

_transformer = ParameterTransformer()
_serializer = TypeSerializer()


class _ExactDeserializer(TypeDeserializer):
    def _deserialize_n(self, value: str) -> Decimal:
        return Decimal(value)


_deserializer = _ExactDeserializer()

# Single-item operations, and the parameters of theirs that the fast path knows: attribute values
# only in the maps of _VALUE_MAPS, every other parameter free of them.
_SINGLE_ITEM = frozenset({'get_item', 'put_item', 'update_item', 'delete_item'})
_VALUE_MAPS = ('Key', 'Item', 'ExpressionAttributeValues')
_KNOWN_PARAMETERS = frozenset({
    'TableName', 'Key', 'Item', 'ExpressionAttributeValues', 'ExpressionAttributeNames', 'UpdateExpression',
    'ConditionExpression', 'ProjectionExpression', 'ConsistentRead', 'ReturnValues',
    'ReturnValuesOnConditionCheckFailure', 'ReturnConsumedCapacity',
})
# The answers' attribute maps (ItemCollectionMetrics, only returned on request, takes the long way).
_ANSWER_MAPS = ('Item', 'Attributes')
_LARGEST_EXACT_INT = 10 ** 38 - 1    # boto3 types larger numbers as errors (38 digits at most)


def typed_value(value: Any) -> Dict[str, Any]:
    """One attribute value in typed JSON, as boto3's ``TypeSerializer`` types it."""
    kind = type(value)
    if kind is str:
        return {'S': value}
    if kind is int and -_LARGEST_EXACT_INT <= value <= _LARGEST_EXACT_INT:
        return {'N': str(value)}
    return cast(Dict[str, Any], _serializer.serialize(value))


def python_value(value: Mapping[str, Any]) -> Any:
    """One typed attribute value as a Python value (numbers as exact ``Decimal``)."""
    if len(value) == 1:
        if 'S' in value:
            return value['S']
        if 'N' in value:
            return Decimal(value['N'])
    return _deserializer.deserialize(cast(Any, value))


def python_item(item: Mapping[str, Any]) -> Dict[str, Any]:
    """A typed item (or key) as Python values."""
    return {name: python_value(value) for name, value in item.items()}


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
        if operation in _SINGLE_ITEM and params.keys() <= _KNOWN_PARAMETERS:
            typed = dict(params)
            for name in _VALUE_MAPS:
                values = typed.get(name)
                if values is not None:
                    typed[name] = {key: typed_value(value) for key, value in values.items()}
            return typed
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
        if operation in _SINGLE_ITEM and 'ItemCollectionMetrics' not in response:
            for name in _ANSWER_MAPS:
                item = response.get(name)
                if item is not None:
                    response[name] = python_item(item)
            return response
        output_shape = self._model(operation).output_shape
        if output_shape is not None:
            _transformer.transform(response, output_shape, _deserializer.deserialize, 'AttributeValue')
        return response
