"""Recording the DynamoDB calls of a client (:class:`CallRecorder`), each as a :class:`RecordedCall`."""
from __future__ import annotations

import dataclasses
import threading
from typing import Any, Dict, List, Optional

from boto3.dynamodb.types import TypeDeserializer

from .._common.clock import Clock
from ._actions import lock_action, readable_expression
from ._hooks import attach, decode_body, detach, operation_of, task_name

__all__ = ['WRITE_OPERATIONS', 'CallRecorder', 'RecordedCall']

#: The DynamoDB operations that write.
WRITE_OPERATIONS = frozenset({'PutItem', 'UpdateItem', 'DeleteItem', 'BatchWriteItem', 'TransactWriteItems',
                              'BatchExecuteStatement', 'ExecuteStatement', 'ExecuteTransaction'})


@dataclasses.dataclass
class RecordedCall:
    """One DynamoDB API call as sent.

    :ivar operation: the API name (``'PutItem'``, ``'UpdateItem'``, ...).
    :ivar params: the request body, decoded: typed DynamoDB JSON (``{'S': 'x'}``).
    :ivar thread: the name of the thread that made the call.
    :ivar clock_time: the recorder's clock's ``monotonic()`` at the call, if it has a clock.
    :ivar task: the name of the asyncio task that made the call (None outside a task).
    """

    operation: str
    params: Dict[str, Any]
    thread: str
    clock_time: Optional[float]
    task: Optional[str] = None

    @property
    def is_write(self) -> bool:
        """Whether the operation writes (one of :data:`WRITE_OPERATIONS`)."""
        return self.operation in WRITE_OPERATIONS

    @property
    def action(self) -> Optional[str]:
        """What the call does to a lock: ``'acquire'``, ``'heartbeat'``, ``'release'`` or None
        (see :func:`lock_action`)."""
        return lock_action(self.params)

    def expression(self, field: str = 'UpdateExpression') -> str:
        """An expression of the call with its attribute names put in (:func:`readable_expression`)."""
        return readable_expression(self.params, field)

    def expression_values(self) -> Dict[str, Any]:
        """``ExpressionAttributeValues`` as Python values."""
        deserializer = TypeDeserializer()
        return {name: deserializer.deserialize(value)
                for name, value in self.params.get('ExpressionAttributeValues', {}).items()}

    def item(self) -> Dict[str, Any]:
        """The ``Item`` of a PutItem as Python values."""
        deserializer = TypeDeserializer()
        return {name: deserializer.deserialize(value) for name, value in self.params.get('Item', {}).items()}


class CallRecorder:
    """Records every DynamoDB API call of one client (each call once, not each HTTP attempt).

    ``target`` is a boto3 client or resource (boto3 resources share nothing: the recorder sees
    the calls made through that one), or an aiobotocore client. Attached to a boto3 object, it
    also records the calls of every aiobotocore client linked to it (:func:`link_clients`).
    ``clock`` (optional, e.g. a :class:`ManualClock`) stamps each call with its
    ``monotonic()``. Use it as a context manager, or call :meth:`stop`::

        with CallRecorder(table.resource) as calls:
            lock = client.acquire_lock('job')
        assert calls.operations() == ['UpdateItem'] and calls.calls[0].action == 'acquire'
    """

    def __init__(self, target: object, clock: Optional[Clock] = None) -> None:
        self._target = target
        self._clock = clock
        self._guard = threading.Lock()
        self._calls: List[RecordedCall] = []
        self._hook = attach(target, 'before-call.dynamodb', lambda is_async: self._record)

    def _record(self, params: Dict[str, Any], event_name: str, **kwargs: object) -> None:
        call = RecordedCall(
            operation=operation_of(event_name),
            params=decode_body(params.get('body')),
            thread=threading.current_thread().name,
            clock_time=self._clock.monotonic() if self._clock is not None else None,
            task=task_name(),
        )
        with self._guard:
            self._calls.append(call)

    @property
    def calls(self) -> List[RecordedCall]:
        """The calls so far, oldest first (a copy)."""
        with self._guard:
            return list(self._calls)

    def operations(self) -> List[str]:
        """The operation of each call, in order."""
        return [call.operation for call in self.calls]

    def count(self, operation: Optional[str] = None) -> int:
        """How many calls (of ``operation``, or of any)."""
        return sum(1 for call in self.calls if operation is None or call.operation == operation)

    def of(self, operation: str) -> List[RecordedCall]:
        """The calls of one operation."""
        return [call for call in self.calls if call.operation == operation]

    def writes(self) -> List[RecordedCall]:
        """The calls that write."""
        return [call for call in self.calls if call.is_write]

    def clear(self) -> None:
        """Forget the calls recorded so far."""
        with self._guard:
            self._calls.clear()

    def stop(self) -> None:
        """Stop recording (what was recorded stays)."""
        detach(self._target, self._hook)

    def __enter__(self) -> 'CallRecorder':
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


