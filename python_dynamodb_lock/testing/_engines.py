"""Engines and lock tables for tests: DynamoDB Local, the serialised moto server, moto in-process.

:func:`start_engine` starts a local DynamoDB endpoint; :func:`lock_table` makes a lock table
on it for one test, and :func:`moto_lock_table` one in moto's in-process mock. Either gives a
:class:`LockTable`: the table, boto3 objects on it, lock clients of both kinds, and helpers
that read and write lock rows directly, as another process would.
"""
from __future__ import annotations

import contextlib
import logging
import re
import threading
import time
import uuid
from decimal import Decimal
from typing import Any, AsyncIterator, Callable, Dict, Iterator, List, Optional, Union

import botocore.config
from boto3.dynamodb.types import TypeDeserializer, TypeSerializer
from botocore.exceptions import ClientError

from .._embedded import (
    DUMMY_ACCESS_KEY_ID,
    DUMMY_REGION,
    DUMMY_SECRET_ACCESS_KEY,
    MOTO_INSTALL_HINT,
    EmbeddedEngine,
    EngineNotInstalledError,
    dummy_boto3_session,
    merged_client_config,
    start_embedded_engine,
)
from .._model.schema import PartitionKey
from ..python_dynamodb_lock import DynamoDBLockClient
from ._hooks import link_clients

__all__ = ['LockTable', 'lock_table', 'moto_lock_table', 'start_engine', 'unique_table_name']

logger = logging.getLogger(__name__)

#: ``LockTable.name`` of each engine.
DYNAMODB_LOCAL = 'dynamodb-local'
MOTO_SERVER = 'moto-server'
MOTO = 'moto'


def start_engine(prefer: str = 'auto') -> EmbeddedEngine:
    """Start a local DynamoDB endpoint on 127.0.0.1 for tests, and return its handle.

    ``prefer='auto'`` (the default) starts Amazon DynamoDB Local when it and Java 17+ are
    installed (found as :func:`python_dynamodb_lock._embedded.find_dynamodb_local` says:
    ``$DYNAMODB_LOCAL_DIR``, else a ``.dynamodb-local`` folder in the current directory or any
    folder above it, or in the checkout the package comes from), and otherwise moto's DynamoDB
    behind an HTTP server in this process, serving one request at a time so that conditional
    writes are atomic. ``'dynamodb-local'`` or ``'moto'`` asks for one of them, and never falls
    back to the other: when it cannot be had, :class:`EngineNotInstalledError` says how to
    install it.

    The engine's clients (``engine.client()``, ``engine.resource()``) make three attempts in
    botocore's standard retry mode, with short timeouts, so that a call to an engine that has
    gone fails within seconds.

    The handle is a context manager; leaving the block (or ``engine.stop()``) stops the engine::

        with start_engine() as engine, lock_table(engine) as table:
            ...

    :raises python_dynamodb_lock._embedded.EngineNotInstalledError: no engine is installed
        (the message says how to install one).
    :raises python_dynamodb_lock._embedded.EmbeddedEngineError: the engine did not start.
    """
    return start_embedded_engine(prefer)


def unique_table_name(hint: str = '') -> str:
    """A valid table name that no other test uses: ``locks-<hint>-<random>``."""
    cleaned = re.sub(r'[^A-Za-z0-9_.-]+', '-', hint).strip('-')[:120]
    return f'locks-{cleaned}-{uuid.uuid4().hex[:8]}' if cleaned else f'locks-{uuid.uuid4().hex[:8]}'


_async_session_guard = threading.Lock()
_async_session: Any = None


def _aiobotocore_session() -> Any:
    global _async_session
    try:
        from aiobotocore.session import get_session
    except ImportError:
        raise EngineNotInstalledError("The asyncio lock client needs aiobotocore: pip install '.[asyncio]'") from None
    with _async_session_guard:
        if _async_session is None:   # one session keeps the parsed service model: clients cost ~2 ms
            _async_session = get_session()
        return _async_session


class LockTable:
    """A lock table on one engine, with everything a test needs around it.

    Made by :func:`lock_table` or :func:`moto_lock_table` (or the ``dynamodb_lock_table`` and
    ``dynamodb_lock_moto_table`` fixtures), which delete the table afterwards.

    :ivar name: the engine: ``'dynamodb-local'``, ``'moto-server'`` (the serialised moto
        server), ``'moto'`` (moto in-process, ``mock_aws``), or ``'endpoint'`` (a URL given).
    :ivar table_name: the table, created with
        :meth:`DynamoDBLockClient.create_dynamodb_table
        <python_dynamodb_lock.python_dynamodb_lock.DynamoDBLockClient.create_dynamodb_table>`.
    :ivar resource: a boto3 DynamoDB resource on the engine, for lock clients. Attach a
        :class:`FaultInjector` or :class:`CallRecorder` to it to break or watch the calls of
        the lock clients this table makes, threaded and asyncio alike.
    :ivar client: a separate low-level boto3 client (its own hooks), for direct reads and writes.
    :ivar endpoint_url: the engine's URL; None for moto in-process.
    :ivar partition_key_name, sort_key_name, ttl_attribute_name, partition_key_type: the table's
        layout, as it was created (``sort_key_name`` None: a table without a sort key; the
        partition key's type ``'S'``, ``'N'`` or ``'B'``). The row helpers below take keys of
        that type (``int``/``Decimal``, ``bytes``).
    :ivar is_atomic: whether concurrent conditional writes exclude each other. False for moto
        in-process (it checks and writes without a lock): never base a claim about mutual
        exclusion between threads or processes on it.
    """

    def __init__(self, name: str, table_name: str, resource: Any, client: Any, endpoint_url: Optional[str],
                 is_atomic: bool, make_boto3: Callable[[str, Optional[botocore.config.Config]], Any], *,
                 partition_key_name: str = 'lock_key', sort_key_name: Optional[str] = 'sort_key',
                 ttl_attribute_name: str = 'expiry_time', partition_key_type: str = 'S') -> None:
        self.name = name
        self.table_name = table_name
        self.resource = resource
        self.client = client
        self.endpoint_url = endpoint_url
        self.is_atomic = is_atomic
        self.partition_key_name = partition_key_name
        self.sort_key_name = sort_key_name
        self.ttl_attribute_name = ttl_attribute_name
        self.partition_key_type = partition_key_type
        self._make_boto3 = make_boto3
        self._lock_clients: List[DynamoDBLockClient] = []
        self._made: List[Any] = []

    def __repr__(self) -> str:
        return f'<LockTable {self.table_name} on {self.name}{" " + self.endpoint_url if self.endpoint_url else ""}>'

    # -- clients ---------------------------------------------------------------------------

    def new_resource(self, config: Optional[botocore.config.Config] = None) -> Any:
        """Another boto3 DynamoDB resource on the engine: its own low-level client and hooks."""
        resource = self._make_boto3('resource', config)
        self._made.append(resource.meta.client)
        return resource

    def new_client(self, config: Optional[botocore.config.Config] = None) -> Any:
        """Another low-level boto3 DynamoDB client on the engine."""
        client = self._make_boto3('client', config)
        self._made.append(client)
        return client

    def new_async_client(self, config: Optional[botocore.config.Config] = None) -> Any:
        """An aiobotocore DynamoDB client on the engine, as an async context manager
        (``async with table.new_async_client() as dynamodb:``).

        :raises RuntimeError: for moto in-process, which aiobotocore cannot reach; use an
            engine (:func:`start_engine`) for the asyncio client.
        """
        if self.endpoint_url is None:
            raise RuntimeError('moto in-process (mock_aws) does not serve aiobotocore clients: test the asyncio '
                               'client on an engine from start_engine() (the dynamodb_lock_table fixture)')
        merged = merged_client_config(config)
        return _aiobotocore_session().create_client(
            'dynamodb', endpoint_url=self.endpoint_url, region_name=DUMMY_REGION,
            aws_access_key_id=DUMMY_ACCESS_KEY_ID, aws_secret_access_key=DUMMY_SECRET_ACCESS_KEY, config=merged)

    def lock_client(self, dynamodb_resource: Any = None, **kwargs: Any) -> DynamoDBLockClient:
        """A :class:`~python_dynamodb_lock.python_dynamodb_lock.DynamoDBLockClient` on this
        table (on :attr:`resource` unless another resource, or a low-level client such as
        :meth:`new_client`'s, is given), closed when the table goes away. ``kwargs`` are the
        client's arguments (``table_name`` defaults to this table)."""
        kwargs.setdefault('table_name', self.table_name)
        self._layout_defaults(kwargs)
        client = DynamoDBLockClient(dynamodb_resource if dynamodb_resource is not None else self.resource, **kwargs)
        self._lock_clients.append(client)
        return client

    @contextlib.asynccontextmanager
    async def async_lock_client(self, config: Optional[botocore.config.Config] = None,
                                **kwargs: Any) -> AsyncIterator[Any]:
        """An :class:`~python_dynamodb_lock.aio.AsyncDynamoDBLockClient` on this table, on an
        aiobotocore client of its own, both closed when the block ends::

            async with table.async_lock_client(heartbeat_period=timedelta(seconds=1)) as client:
                async with client.acquire_lock('job'):
                    ...

        Its aiobotocore client is linked to :attr:`resource` (:func:`link_clients`): faults
        and recorders attached to ``table.resource`` reach it. ``kwargs`` are the lock client's
        arguments (``table_name`` defaults to this table). Enter it inside a running event loop.
        """
        from ..aio import AsyncDynamoDBLockClient

        async with self.new_async_client(config) as dynamodb:
            link_clients(self.resource, dynamodb)
            kwargs.setdefault('table_name', self.table_name)
            self._layout_defaults(kwargs)
            client = AsyncDynamoDBLockClient(dynamodb, **kwargs)
            try:
                yield client
            finally:
                await client.close()

    def _layout_defaults(self, kwargs: Dict[str, Any]) -> None:
        """A lock client on a table without a sort key, or with a number or binary partition
        key, is told so unless the caller says otherwise."""
        if kwargs.get('table_name') != self.table_name:
            return
        if self.sort_key_name is None:
            kwargs.setdefault('sort_key_name', None)
        if self.partition_key_type != 'S':
            kwargs.setdefault('partition_key_type', self.partition_key_type)

    # -- rows ------------------------------------------------------------------------------

    def _key(self, partition_key: PartitionKey, sort_key: str) -> Dict[str, Any]:
        serializer = TypeSerializer()
        key = {self.partition_key_name: serializer.serialize(partition_key)}
        if self.sort_key_name is not None:
            key[self.sort_key_name] = {'S': sort_key}
        return key

    def put_lock_row(self, partition_key: PartitionKey, sort_key: str = '-', *, owner_name: str = 'someone-else',
                     lease_duration: object = 30, record_version_number: Optional[str] = None,
                     expiry_time: Optional[int] = None, extra: Optional[Dict[str, Any]] = None,
                     table_name: Optional[str] = None, fencing_token: Optional[int] = 1) -> Dict[str, Any]:
        """Write a lock row directly (through :attr:`client`, past any lock client's hooks), as
        another process holding the lock would have; return the item as Python values.

        The row is a lock held by ``owner_name`` for ``lease_duration`` seconds that nobody
        renews (unless the test changes its version): a lock client waiting for it takes it
        over after the lease. ``expiry_time`` (the TTL) defaults to an hour from the real time.
        ``fencing_token`` is the row's token; ``None`` writes the row as the published package
        (0.9.x) does, with no token (a client that takes it over then warns that its holder did
        not fence).
        """
        item: Dict[str, Any] = dict(extra or {})
        item.update({
            self.partition_key_name: partition_key,
            'owner_name': owner_name,
            'lease_duration': Decimal(str(lease_duration)),
            'record_version_number': record_version_number or str(uuid.uuid4()),
            self.ttl_attribute_name: int(time.time() + 3600) if expiry_time is None else int(expiry_time),
        })
        if self.sort_key_name is not None:
            item[self.sort_key_name] = sort_key
        if fencing_token is not None:
            item['fencing_token'] = fencing_token
        serializer = TypeSerializer()
        self.client.put_item(TableName=table_name or self.table_name,
                             Item={name: serializer.serialize(value) for name, value in item.items()})
        return item

    def read_typed_item(self, partition_key: PartitionKey, sort_key: str = '-',
                        table_name: Optional[str] = None) -> Optional[Dict[str, Any]]:
        """The row as stored (typed DynamoDB JSON), by a consistent read; None when absent."""
        response = self.client.get_item(TableName=table_name or self.table_name,
                                        Key=self._key(partition_key, sort_key), ConsistentRead=True)
        item: Optional[Dict[str, Any]] = response.get('Item')
        return item

    def read_item(self, partition_key: PartitionKey, sort_key: str = '-',
                  table_name: Optional[str] = None) -> Optional[Dict[str, Any]]:
        """The row as Python values, by a consistent read; None when absent."""
        typed = self.read_typed_item(partition_key, sort_key, table_name)
        if typed is None:
            return None
        deserializer = TypeDeserializer()
        return {name: deserializer.deserialize(value) for name, value in typed.items()}

    def read_held_row(self, partition_key: PartitionKey, sort_key: str = '-',
                      table_name: Optional[str] = None) -> Optional[Dict[str, Any]]:
        """The row as Python values if it records a held lock; None when there is no row or the
        row only remembers a released lock (``released_at`` set, kept for its fencing token)."""
        item = self.read_item(partition_key, sort_key, table_name)
        if item is None or 'released_at' in item:
            return None
        return item

    def steal_row(self, partition_key: PartitionKey, sort_key: str = '-', owner_name: str = 'thief') -> str:
        """Another owner takes the lock over: the row gets a new ``record_version_number`` and
        ``owner_name`` (unconditionally). Returns the new version. The holder's next heartbeat
        finds it stolen."""
        version = str(uuid.uuid4())
        self.client.update_item(
            TableName=self.table_name, Key=self._key(partition_key, sort_key),
            UpdateExpression='SET record_version_number = :v, owner_name = :o',
            ExpressionAttributeValues={':v': {'S': version}, ':o': {'S': owner_name}})
        return version

    def delete_row(self, partition_key: PartitionKey, sort_key: str = '-') -> None:
        """Delete the lock's row (as DynamoDB's TTL, or an operator, would)."""
        self.client.delete_item(TableName=self.table_name, Key=self._key(partition_key, sort_key))

    # -- the end ---------------------------------------------------------------------------

    def close(self) -> None:
        """Close the lock clients made by :meth:`lock_client` and the boto3 clients made here."""
        self._close_lock_clients()
        for client in [self.client, self.resource.meta.client, *self._made]:
            client.close()
        self._made.clear()

    def _close_lock_clients(self) -> None:
        for lock_client in self._lock_clients:
            lock_client.close()
        self._lock_clients.clear()


def _create(client: Any, table_name: str, create_kwargs: Dict[str, Any]) -> None:
    DynamoDBLockClient.create_dynamodb_table(client, table_name=table_name, **create_kwargs)


def _names(create_kwargs: Dict[str, Any]) -> Dict[str, Any]:
    return {name: create_kwargs[name] for name in ('partition_key_name', 'sort_key_name', 'ttl_attribute_name',
                                                   'partition_key_type')
            if name in create_kwargs}


@contextlib.contextmanager
def lock_table(engine: Union[EmbeddedEngine, str], table_name: Optional[str] = None,
               **create_kwargs: object) -> Iterator[LockTable]:
    """A fresh lock table on ``engine``, deleted when the block ends.

    ``engine`` is what :func:`start_engine` returned, or the URL of a DynamoDB endpoint you
    started yourself (dummy credentials, region us-east-1). ``table_name`` defaults to a unique
    name; ``create_kwargs`` go to ``create_dynamodb_table`` (``partition_key_name``,
    ``billing_mode``, ...). Lock clients made with :meth:`LockTable.lock_client` are closed
    first.
    """
    table_name = table_name or unique_table_name()
    if isinstance(engine, str):
        endpoint_url = engine
        session = dummy_boto3_session()
        session_guard = threading.Lock()

        def make_boto3(kind: str, config: Optional[botocore.config.Config]) -> Any:
            merged = merged_client_config(config)
            with session_guard:
                return getattr(session, kind)('dynamodb', endpoint_url=endpoint_url, config=merged)

        name = 'endpoint'
    else:
        endpoint_url = engine.endpoint_url

        def make_boto3(kind: str, config: Optional[botocore.config.Config]) -> Any:
            return getattr(engine, kind)(config)

        name = MOTO_SERVER if engine.name == 'moto' else engine.name
    client = make_boto3('client', None)
    resource = make_boto3('resource', None)
    table = LockTable(name, table_name, resource, client, endpoint_url, True, make_boto3, **_names(create_kwargs))
    try:
        _create(client, table_name, create_kwargs)
        yield table
    finally:
        try:
            table._close_lock_clients()
            client.delete_table(TableName=table_name)
        except ClientError as error:
            if error.response.get('Error', {}).get('Code') != 'ResourceNotFoundException':
                logger.warning('Could not delete table %s: %s', table_name, error)
        finally:
            table.close()


_moto_guard = threading.Lock()
_moto_session: Any = None


@contextlib.contextmanager
def moto_lock_table(table_name: Optional[str] = None, **create_kwargs: object) -> Iterator[LockTable]:
    """A fresh lock table in moto's in-process mock (``moto.mock_aws``), gone when the block ends.

    Fast (no server, no port) and good for tests of logic, but moto in-process is not atomic
    under concurrency (``is_atomic`` is False) and does not serve aiobotocore: mutual exclusion
    between threads or processes, and the asyncio client, need :func:`lock_table` on an engine.
    Everything of moto's in this process is reset when the block starts and ends, the serialised
    moto server's tables included: do not use both at once.

    :raises python_dynamodb_lock._embedded.EngineNotInstalledError: moto is not installed.
    """
    global _moto_session
    try:
        from moto import mock_aws
    except ImportError:
        raise EngineNotInstalledError(f'moto is not installed. {MOTO_INSTALL_HINT}') from None
    table_name = table_name or unique_table_name()
    with mock_aws():
        with _moto_guard:
            if _moto_session is None:   # made after moto is imported, so moto's hooks are in it
                _moto_session = dummy_boto3_session()
            session = _moto_session

        def make_boto3(kind: str, config: Optional[botocore.config.Config]) -> Any:
            merged = merged_client_config(config)
            with _moto_guard:
                return getattr(session, kind)('dynamodb', config=merged)

        client = make_boto3('client', None)
        resource = make_boto3('resource', None)
        table = LockTable(MOTO, table_name, resource, client, None, False, make_boto3, **_names(create_kwargs))
        try:
            _create(client, table_name, create_kwargs)
            yield table
        finally:
            table.close()
