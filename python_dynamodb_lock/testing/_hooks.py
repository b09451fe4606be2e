"""botocore event hooks for boto3 and aiobotocore clients: registering them (on a client and on the
aiobotocore clients linked to it), reading what a hook is given, and canned error answers."""
from __future__ import annotations

import asyncio
import json
import threading
import uuid
import weakref
from typing import Any, Callable, Dict, Iterator, List, Optional, cast

from botocore.awsrequest import AWSResponse

__all__ = [
    'NOWHERE',
    'AsyncRawBody',
    'Hook',
    'RawBody',
    'attach',
    'canned_response',
    'decode_body',
    'detach',
    'hook_event',
    'is_async_client',
    'link_clients',
    'low_level_client',
    'operation_of',
    'task_name',
]

#: Where a canned per-attempt response pretends to have gone. moto's in-process stubber runs
#: after the fault's before-send hook on the same event and ignores hosts it does not know, so
#: pointing the (per-attempt, throw-away) request here keeps moto from executing it; on a real
#: endpoint nothing is sent at all because botocore uses the canned response.
NOWHERE = 'http://fault-injected.invalid/'


def low_level_client(client_or_resource: Any) -> Any:
    """The botocore client behind a boto3 resource, or the client itself."""
    meta = client_or_resource.meta
    return meta.client if hasattr(meta, 'client') else client_or_resource


def is_async_client(client: object) -> bool:
    """Whether ``client`` is an aiobotocore client (False when aiobotocore is not installed)."""
    try:
        from aiobotocore.client import AioBaseClient
    except ImportError:
        return False
    return isinstance(client, AioBaseClient)


class Hook:
    """One handler, registered on a client and on every aiobotocore client linked to it."""

    def __init__(self, event_name: str, make: Callable[[bool], Callable[..., Any]], last: bool) -> None:
        self.event_name = event_name
        self.make = make            # make(is_async) -> the handler for that kind of client
        self.last = last
        self.unique_id = f'python-dynamodb-lock-testing-{uuid.uuid4().hex}'
        self.emitters: List[Any] = []

    def register_on(self, client: Any) -> None:
        events = client.meta.events
        if any(events is emitter for emitter in self.emitters):
            return
        register = events.register_last if self.last else events.register
        register(self.event_name, self.make(is_async_client(client)), unique_id=self.unique_id)
        self.emitters.append(events)

    def remove(self) -> None:
        for events in self.emitters:
            events.unregister(self.event_name, unique_id=self.unique_id)
        self.emitters.clear()


class _Link:
    def __init__(self) -> None:
        self.async_clients: 'weakref.WeakSet[Any]' = weakref.WeakSet()
        self.hooks: List[Hook] = []


_links: 'weakref.WeakKeyDictionary[Any, _Link]' = weakref.WeakKeyDictionary()
_links_guard = threading.RLock()


def link_clients(target: object, async_client: object) -> None:
    """Make hooks attached to ``target`` reach ``async_client`` too, now and later.

    ``target`` is a boto3 client or resource; ``async_client`` an aiobotocore DynamoDB client
    that stands for it (typically: one on the same endpoint, made for an asyncio lock client).
    Every :class:`CallRecorder` and :class:`FaultInjector` attached to ``target``, before or
    after this call, then also sees and breaks the calls of ``async_client``.
    """
    if not is_async_client(async_client):
        raise TypeError(f'link_clients links an aiobotocore client, not {type(async_client).__name__}')
    client = low_level_client(target)
    with _links_guard:
        link = _links.setdefault(client, _Link())
        link.async_clients.add(async_client)
        for hook in link.hooks:
            hook.register_on(async_client)


def attach(target: object, event_name: str, make: Callable[[bool], Callable[..., Any]], last: bool = False) -> Hook:
    client = low_level_client(target)
    hook = Hook(event_name, make, last)
    with _links_guard:
        hook.register_on(client)
        if not is_async_client(client):
            link = _links.setdefault(client, _Link())
            link.hooks.append(hook)
            for async_client in list(link.async_clients):
                hook.register_on(async_client)
    return hook


def detach(target: object, hook: Hook) -> None:
    client = low_level_client(target)
    with _links_guard:
        hook.remove()
        link = _links.get(client)
        if link is not None and hook in link.hooks:
            link.hooks.remove(hook)


def operation_of(event_name: str) -> str:
    return event_name.rsplit('.', 1)[-1]


def hook_event(stage: str, operation: str) -> str:
    return f'{stage}.dynamodb' if operation in ('*', None) else f'{stage}.dynamodb.{operation}'


def decode_body(body: Any) -> Dict[str, Any]:
    if isinstance(body, (bytes, bytearray)):
        body = body.decode('utf-8')
    if not body:
        return {}
    try:
        decoded = json.loads(body)
    except ValueError:
        return {}
    return decoded if isinstance(decoded, dict) else {}


def task_name() -> Optional[str]:
    try:
        task = asyncio.current_task()
    except RuntimeError:
        return None
    return task.get_name() if task is not None else None


class RawBody:
    """The ``raw`` of a canned botocore response (read through ``stream()``)."""

    def __init__(self, body: bytes) -> None:
        self._body = body

    def stream(self, **kwargs: object) -> Iterator[bytes]:
        yield self._body


class AsyncRawBody:
    """The ``raw`` of a canned aiobotocore response: aiobotocore awaits ``raw.read()``."""

    def __init__(self, body: bytes) -> None:
        self._body = body

    async def read(self, amt: Optional[int] = None) -> bytes:
        return self._body


def _error_body(code: str, message: str) -> bytes:
    return json.dumps({'__type': f'com.amazonaws.dynamodb.v20120810#{code}', 'message': message}).encode()


def canned_response(url: str, status: int, code: str, message: str, is_async: bool = False) -> AWSResponse:
    """A DynamoDB error answer as botocore (or, with ``is_async``, aiobotocore) receives it:
    what a ``before-send`` hook returns to replace an HTTP attempt."""
    body = _error_body(code, message)
    headers = {'Content-Type': 'application/x-amz-json-1.0', 'Content-Length': str(len(body)),
               'x-amzn-RequestId': 'fault-injection'}
    if is_async:
        from aiobotocore.awsrequest import AioAWSResponse

        return AioAWSResponse(url, status, cast(Any, headers), AsyncRawBody(body))
    return AWSResponse(url, status, cast(Any, headers), RawBody(body))

