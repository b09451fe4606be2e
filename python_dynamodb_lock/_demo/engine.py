"""The demo's engine and table: the embedded engine it starts, how each process reaches it
(:class:`Connection`, :func:`client_config`), and the counter items it sets, reads and deletes."""
from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, Dict, Optional

import boto3
from botocore.config import Config

from ..python_dynamodb_lock import DynamoDBLockClient
from .output import Printer
from .settings import COUNTER_ATTRIBUTE, COUNTER_SORT_KEY, DemoError, DemoSettings, counter_key

__all__ = [
    'CLIENT_MAX_ATTEMPTS',
    'Connection',
    'client_config',
    'delete_counters',
    'prepare_table',
    'read_counters',
    'start_engine',
]


@dataclass(frozen=True)
class Connection:
    """How a process reaches the engine (picklable, so spawned workers get it as an argument)."""

    endpoint_url: Optional[str]
    region_name: Optional[str]
    profile_name: Optional[str]
    dummy_credentials: bool
    safe_period: float

    def resource(self) -> Any:
        """A DynamoDB service resource (see :func:`client_config`); dummy credentials for
        embedded engines only."""
        if self.dummy_credentials:
            from .._embedded import dummy_boto3_session

            session = dummy_boto3_session()
        else:
            session = boto3.session.Session(profile_name=self.profile_name, region_name=self.region_name)
        return session.resource('dynamodb', endpoint_url=self.endpoint_url, config=client_config(self.safe_period))


#: Attempts of each call of the demo's clients, whatever botocore's default retry mode.
CLIENT_MAX_ATTEMPTS = 3


def client_config(safe_period: float) -> Config:
    """The botocore settings of the demo's boto3 clients.

    Retries are explicit (standard mode, :data:`CLIENT_MAX_ATTEMPTS` attempts), so an
    unreachable endpoint fails within seconds even where botocore defaults to its legacy mode
    (10 attempts). One attempt's connect + read timeout fits in the lock clients'
    ``safe_period``: a stuck heartbeat is given up and retried before its lock is in danger,
    which is what the lock client checks (and warns about) when it is created.
    """
    connect = _down_to_ms(min(1.0, safe_period / 3))
    read = _down_to_ms(min(10.0, safe_period - connect))
    return Config(retries={'mode': 'standard', 'total_max_attempts': CLIENT_MAX_ATTEMPTS},
                  connect_timeout=connect, read_timeout=read, max_pool_connections=16)


def _down_to_ms(seconds: float) -> float:
    return math.floor(seconds * 1000) / 1000


def start_engine(settings: DemoSettings, printer: Printer) -> Any:
    from .. import _embedded

    printer.progress(f'Starting an embedded DynamoDB engine ({settings.engine}) on 127.0.0.1 ...')
    started = time.monotonic()
    try:
        engine = _embedded.start_embedded_engine(settings.engine)
    except _embedded.EmbeddedEngineError as error:
        if settings.engine != 'auto':   # asked for by name: say what it needs, suggest no other engine
            raise DemoError(f'the engine asked for with --engine {settings.engine} could not be started: '
                            f'{error}\nInstall it as said above, or leave --engine out to use whichever '
                            'engine is installed, or pass --endpoint-url to use a running DynamoDB') from error
        raise DemoError(f"no embedded engine could be started: {error}\nInstall moto's server "
                        "(pip install '.[demo]' in a checkout of python_dynamodb_lock, or "
                        "pip install 'moto>=5' flask flask-cors), or pass --endpoint-url to use "
                        'a running DynamoDB') from error
    label = {'dynamodb-local': 'Amazon DynamoDB Local', 'moto': 'moto server (requests serialised)'}
    printer.progress(f'{label.get(engine.name, engine.name)} is up at {engine.endpoint_url} '
                     f'({time.monotonic() - started:.1f} s)')
    return engine


def prepare_table(settings: DemoSettings, resource: Any, printer: Printer) -> None:
    DynamoDBLockClient.create_dynamodb_table(
        resource.meta.client,
        table_name=settings.table_name,
        partition_key_name=settings.partition_key_name,
        sort_key_name=settings.sort_key_name,
        ttl_attribute_name=settings.ttl_attribute_name,
        billing_mode='PAY_PER_REQUEST',
        exist_ok=True,
    )
    table = resource.Table(settings.table_name)
    for key in settings.key_names:
        table.put_item(Item={
            settings.partition_key_name: counter_key(key),
            settings.sort_key_name: COUNTER_SORT_KEY,
            COUNTER_ATTRIBUTE: 0,
            settings.ttl_attribute_name: int(time.time()) + 3600,
        })
    printer.progress(f'Table {settings.table_name!r} is ready; counters '
                     + ', '.join(counter_key(key) for key in settings.key_names) + ' set to 0')


def read_counters(settings: DemoSettings, resource: Any) -> Dict[str, int]:
    table = resource.Table(settings.table_name)
    counters = {}
    for key in settings.key_names:
        item = table.get_item(Key={settings.partition_key_name: counter_key(key),
                                   settings.sort_key_name: COUNTER_SORT_KEY},
                              ConsistentRead=True).get('Item', {})
        counters[key] = int(item.get(COUNTER_ATTRIBUTE, 0))
    return counters


def delete_counters(settings: DemoSettings, resource: Any) -> None:
    table = resource.Table(settings.table_name)
    for key in settings.key_names:
        table.delete_item(Key={settings.partition_key_name: counter_key(key),
                               settings.sort_key_name: COUNTER_SORT_KEY})

