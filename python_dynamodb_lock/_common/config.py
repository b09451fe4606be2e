"""Validated settings: everything a client is told at construction and per acquisition,
checked before anything is written, with a clear ``TypeError``/``ValueError`` naming the
argument. Unsafe but workable settings produce warnings (returned, for the client to log); a
boto3 client with long timeouts is mentioned once, at INFO (see :func:`client_timeout_warning`).
"""
from __future__ import annotations

import dataclasses
import math
from decimal import Decimal
import socket
import uuid
from typing import Any, Dict, Iterable, List, Mapping, Optional, Set, Tuple

from boto3.dynamodb.types import Binary

from .._model import validation
from .observe import logger
from .._wire.requests import MAX_BATCH_STATEMENTS
from .._model.schema import NO_SORT_KEY, SESSION_PREFIX, Schema, binary_bytes

__all__ = ['MIN_HEARTBEAT_PERIOD', 'Settings', 'check_attribute_update',
           'check_lock_arguments', 'check_release_attributes', 'client_timeout_warning', 'lock_lease', 'make_settings',
           'published_attributes']

#: The shortest ``heartbeat_period`` accepted, in seconds. A renewal is a DynamoDB call: one
#: takes a few milliseconds at best, and every period renews every held lock, so a shorter
#: period cannot be kept; it only spins (a period of a microsecond made hundreds of calls and
#: tens of thousands of WARNING lines a second). Every documented setting is far above it.
MIN_HEARTBEAT_PERIOD = 0.01


@dataclasses.dataclass(frozen=True)
class Settings:
    """A client's validated configuration; periods in seconds."""

    schema: Schema
    owner_name: str
    heartbeat_period: float
    safe_period: float
    lease_duration: float
    expiry_period: float
    heartbeat_tps: float
    heartbeat_workers: int
    heartbeat_batch_size: int
    warnings: Tuple[str, ...] = ()
    keep_released_rows: bool = True
    max_clock_skew: Optional[float] = None
    #: Per-lock leases already checked by :func:`lock_lease` (its warning is given once per value).
    warned_leases: Set[float] = dataclasses.field(default_factory=set, compare=False, repr=False)
    session: bool = False


def make_settings(
    *,
    low_level_client: object,
    table_name: str,
    partition_key_name: object,
    sort_key_name: object,
    ttl_attribute_name: object,
    owner_name: Optional[str],
    heartbeat_period: object,
    safe_period: object,
    lease_duration: object,
    expiry_period: object,
    heartbeat_tps: float,
    heartbeat_workers: object,
    heartbeat_batch_size: int,
    keep_released_rows: object = True,
    max_clock_skew: object = None,
    partition_key_type: object = 'S',
    session: bool = False,
) -> Settings:
    """Check the constructor's arguments; raise for impossible ones, collect warnings for risky ones."""
    schema = _check_layout(table_name, partition_key_name, sort_key_name, ttl_attribute_name, partition_key_type)
    if owner_name is None:
        owner_name = socket.getfqdn() + uuid.uuid4().hex
    validation.require_text('owner_name', owner_name)
    heartbeat = validation.require_duration('heartbeat_period', heartbeat_period)
    if heartbeat < MIN_HEARTBEAT_PERIOD:
        raise ValueError(
            f'heartbeat_period must be at least {MIN_HEARTBEAT_PERIOD * 1000:.0f} milliseconds, got '
            f'{heartbeat_period!r}: each heartbeat is a DynamoDB call that takes milliseconds, so a shorter '
            'period cannot be kept and only floods DynamoDB and the log (a tenth of the lease is plenty)'
        )
    safe = validation.require_duration('safe_period', safe_period)
    lease = validation.require_duration('lease_duration', lease_duration)
    expiry = validation.require_duration('expiry_period', expiry_period)
    heartbeat_workers = _check_pacing(low_level_client, heartbeat_tps, heartbeat_workers, heartbeat_batch_size)
    skew = None if max_clock_skew is None else validation.require_duration('max_clock_skew', max_clock_skew,
                                                                            allow_zero=True)
    if not isinstance(keep_released_rows, bool):
        raise TypeError(f'keep_released_rows must be a bool, not {type(keep_released_rows).__name__}')
    _check_session(session, partition_key_type, owner_name)
    warnings = _period_warnings(heartbeat, safe, lease, expiry)
    timeout_note = client_timeout_warning(low_level_client, safe)
    if timeout_note:   # said once per client, after every check passed
        logger.info('%s', timeout_note)
    return Settings(schema, owner_name, heartbeat, safe, lease, expiry, float(heartbeat_tps), heartbeat_workers,
                    heartbeat_batch_size, tuple(warnings), keep_released_rows, skew, session=session)


def _check_layout(table_name: str, partition_key_name: object, sort_key_name: object, ttl_attribute_name: object,
                  partition_key_type: object) -> Schema:
    """The table's name, key names and types and TTL attribute, checked: the client's schema."""
    validation.require_text('table_name', table_name)
    attribute_names = {
        'partition_key_name': validation.require_attribute_name('partition_key_name', partition_key_name),
        'ttl_attribute_name': validation.require_attribute_name('ttl_attribute_name', ttl_attribute_name),
    }
    if sort_key_name is not None:        # None: a table with a partition key only
        attribute_names['sort_key_name'] = validation.require_attribute_name('sort_key_name', sort_key_name)
    if partition_key_type not in KEY_TYPES:
        raise ValueError(f"partition_key_type must be one of {', '.join(KEY_TYPES)} (DynamoDB's key types), "
                         f'got {partition_key_type!r}')
    lock_attributes = Schema('-', '-', None, '-').reserved_names - {'-'}
    for argument, value in attribute_names.items():
        if value in lock_attributes:
            raise ValueError(f'{argument}={value!r} collides with the lock attribute of that name')
    if len(set(attribute_names.values())) != len(attribute_names):
        raise ValueError(f'partition, sort and TTL attribute names must differ: {attribute_names}')
    return Schema(table_name, attribute_names['partition_key_name'], attribute_names.get('sort_key_name'),
                  attribute_names['ttl_attribute_name'], partition_key_type)


def _check_pacing(low_level_client: object, heartbeat_tps: object, heartbeat_workers: object,
                  heartbeat_batch_size: object) -> int:
    """Check how heartbeats are paced and sent; the number of heartbeat workers (None: the
    boto3 client's connection pool size, or 10)."""
    if isinstance(heartbeat_tps, bool) or not isinstance(heartbeat_tps, (int, float)):
        raise TypeError(f'heartbeat_tps must be a number, not {type(heartbeat_tps).__name__}')
    if heartbeat_tps != -1 and not heartbeat_tps > 0:
        raise ValueError(f'heartbeat_tps must be -1 (adaptive) or positive, got {heartbeat_tps!r}')
    if heartbeat_tps != -1 and not math.isfinite(heartbeat_tps):
        raise ValueError(f'heartbeat_tps must be a finite number, got {heartbeat_tps!r}')
    if heartbeat_tps != -1 and 1.0 / heartbeat_tps > validation.MAX_DURATION.total_seconds():
        raise ValueError(f'heartbeat_tps={heartbeat_tps!r} is less than one heartbeat per '
                         f'{validation.MAX_DURATION.days} days')
    if heartbeat_workers is None:
        pool_size = getattr(_client_config(low_level_client), 'max_pool_connections', None)
        heartbeat_workers = pool_size if isinstance(pool_size, int) and pool_size > 0 else 10
    if isinstance(heartbeat_workers, bool) or not isinstance(heartbeat_workers, int) or heartbeat_workers < 1:
        raise ValueError(f'heartbeat_workers must be a positive int, got {heartbeat_workers!r}')
    if (isinstance(heartbeat_batch_size, bool) or not isinstance(heartbeat_batch_size, int)
            or not 1 <= heartbeat_batch_size <= MAX_BATCH_STATEMENTS):
        raise ValueError(
            f'heartbeat_batch_size must be an int from 1 to {MAX_BATCH_STATEMENTS}, got {heartbeat_batch_size!r}'
        )
    return heartbeat_workers


def check_lock_arguments(schema: Schema, partition_key: object, sort_key: object,
                         additional_attributes: object) -> None:
    """``check_lock_arguments`` of both clients: a key and additional attributes, as an acquisition checks them."""
    check_key(schema, partition_key, sort_key)
    check_additional_attributes(schema, additional_attributes)


def published_attributes(settings: Settings, **given: object) -> Dict[str, object]:
    """The private attributes of the published (0.9.1) client, for code that reads them: its
    names, and its periods in seconds (``_heartbeat_period_s`` ...) from ``settings``; ``given``
    (the constructor's arguments as given) each as ``_<name>``."""
    schema = settings.schema
    published: Dict[str, object] = {'_owner_name': settings.owner_name, '_table_name': schema.table_name,
                 '_partition_key_name': schema.partition_key_name, '_sort_key_name': schema.sort_key_name,
                 '_ttl_attribute_name': schema.ttl_attribute_name, '_heartbeat_period_s': settings.heartbeat_period,
                 '_safe_period_s': settings.safe_period, '_lease_duration_s': settings.lease_duration,
                 '_expiry_period_s': settings.expiry_period}
    published.update((f'_{name}', value) for name, value in given.items())
    return published


def _check_session(session: object, partition_key_type: object, owner_name: str) -> None:
    """``session=True`` needs a string partition key (session rows live under a string prefix)
    and an owner name short enough to fit in a partition key after that prefix."""
    validation.require_bool('session', session)
    if not session:
        return
    if partition_key_type != 'S':
        raise ValueError(f'session=True needs a table with a string partition key (its session row is keyed '
                         f"{SESSION_PREFIX!r} + owner name); this table's partition key type is "
                         f'{partition_key_type!r}')
    if len((SESSION_PREFIX + owner_name + '/' + 32 * '0').encode()) > validation.MAX_PARTITION_KEY_BYTES:
        raise ValueError('session=True needs an owner_name short enough for the session row key '
                         f'({SESSION_PREFIX!r} + owner_name + a 33-character suffix, at most '
                         f'{validation.MAX_PARTITION_KEY_BYTES} bytes)')


def _period_warnings(heartbeat: float, safe: float, lease: float, expiry: float) -> List[str]:
    if heartbeat >= lease:
        raise ValueError(
            f'heartbeat_period ({heartbeat}s) must be shorter than lease_duration ({lease}s): '
            'otherwise other clients take the lock over between heartbeats'
        )
    if expiry < lease:
        raise ValueError(
            f'expiry_period ({expiry}s) must not be shorter than lease_duration ({lease}s): '
            'the row would expire, and be taken over, while the lock is still held'
        )
    warnings = []
    if heartbeat > lease / 3:
        warnings.append(
            f'heartbeat_period ({heartbeat}s) is not well below lease_duration ({lease}s): one or two slow '
            'heartbeats can let another client take the lock over; a third of the lease or less is recommended'
        )
    if safe >= lease:
        warnings.append(
            f'safe_period ({safe}s) is not shorter than lease_duration ({lease}s): LOCK_IN_DANGER would '
            'come after other clients may already have taken the lock over'
        )
    elif safe <= heartbeat:
        warnings.append(
            f'safe_period ({safe}s) is not longer than heartbeat_period ({heartbeat}s): healthy locks will '
            'be reported IN_DANGER between heartbeats'
        )
    return warnings


def _client_config(low_level_client: object) -> Any:
    return getattr(getattr(low_level_client, 'meta', None), 'config', None)


def client_timeout_warning(low_level_client: object, safe_period: float) -> Optional[str]:
    """A note when one attempt of a call may hang longer than the safe period.

    A heartbeat stuck in a call cannot be sent again until botocore gives up on it; with
    botocore's defaults (60 s to connect, 60 s to read) that is minutes, long past the default
    30 s lease. See Usage, "Timeouts and retries".

    It is logged once per client at INFO, not WARNING: botocore's defaults are what the
    published usage, ``DynamoDBLockClient(boto3.resource('dynamodb'))``, gets, and locks work
    with them; only the recovery from a stuck call is slow.
    """
    config = _client_config(low_level_client)
    connect = getattr(config, 'connect_timeout', None)
    read = getattr(config, 'read_timeout', None)
    if not isinstance(connect, (int, float)) or not isinstance(read, (int, float)):
        return None
    if connect + read <= safe_period:
        return None
    return (f'the boto3 client can wait {connect}s to connect and {read}s for an answer in one attempt, '
            f'longer than safe_period ({safe_period}s): a heartbeat stuck on a silent connection is not retried '
            'before the lock is reported in danger. To recover from one in time, give the boto3 client a '
            'botocore Config with connect_timeout + read_timeout well below safe_period, for example '
            "Config(connect_timeout=1, read_timeout=2, retries={'mode': 'standard', 'total_max_attempts': 3}) "
            'for the default periods (see "Timeouts and retries" in the docs)')


def lock_lease(settings: Settings, lease_duration: object) -> float:
    """A lock's own ``lease_duration`` in seconds (None: the client's), checked as the
    constructor checks the client's: a positive ``timedelta`` longer than ``heartbeat_period``
    and not longer than ``expiry_period``; one not well above the heartbeat period is logged
    as the constructor logs it, once per client for each value."""
    if lease_duration is None:
        return settings.lease_duration
    lease = validation.require_duration('lease_duration', lease_duration)
    warnings = _period_warnings(settings.heartbeat_period, lease, lease, settings.expiry_period)
    if lease not in settings.warned_leases:
        settings.warned_leases.add(lease)
        for warning in warnings:
            if warning.startswith('heartbeat_period'):   # safe_period is the lock's own: see lock_safe_period
                logger.warning('%s', warning)
    return lease


def check_attribute_update(schema: Schema, values: object, remove: object) -> Tuple[Tuple[Tuple[str, Any], ...],
                                                                              Tuple[str, ...]]:
    """Check the arguments of ``lock.update_attributes``: the attributes to set (sorted
    name-value pairs) and the names to remove (sorted)."""
    written = check_additional_attributes(schema, values, 'values')
    remove = () if remove is None else remove
    if isinstance(remove, (str, bytes)) or not isinstance(remove, Iterable):
        raise TypeError(f'remove must be a list, tuple or set of attribute names, not {type(remove).__name__}')
    removed = set()
    for name in remove:
        validation.require_attribute_name('remove', name)
        if name in schema.reserved_names:
            raise ValueError(f"remove may not name {name!r}: it is one of the lock's own attributes "
                             f'{sorted(schema.reserved_names)}')
        removed.add(name)
    both = sorted(removed & set(written))
    if both:
        raise ValueError(f'{", ".join(map(repr, both))} is both set (values) and removed (remove): say which')
    if not written and not removed:
        raise ValueError('update_attributes needs values to set or names to remove (both were empty)')
    return tuple(sorted(written.items())), tuple(sorted(removed))


def check_release_attributes(schema: Schema, attributes: object, keeps_row: bool) -> Mapping[str, Any]:
    """Check ``release_lock(attributes=...)``: attributes written onto the row as it is released,
    which only a release that keeps the row can do."""
    checked = check_additional_attributes(schema, attributes, 'attributes')
    if checked and not keeps_row:
        raise ValueError('release attributes= are written onto the released row, but this release deletes the '
                         'row (keep_released_rows=False, or keep_row=False): keep the row, or leave attributes out')
    return checked


#: DynamoDB's types of key attributes: string, number, binary.
KEY_TYPES = ('S', 'N', 'B')


def check_key(schema: Schema, partition_key: object, sort_key: object) -> None:
    """A key of the table's shape: a partition key of its type; a sort key string, or the
    default ``'-'`` on a table without a sort key."""
    if schema.partition_key_type == 'S':
        if isinstance(partition_key, (int, Decimal, bytes, bytearray, Binary)) and not isinstance(partition_key, bool):
            raise TypeError(f'partition_key must be a str, not {type(partition_key).__name__}: the client was made '
                            f'for a string partition key in table {schema.table_name!r} (partition_key_type='
                            "'N' or 'B' declares a number or binary key; DynamoDBLockClient.for_table reads it "
                            'from the table)')
        validation.require_key('partition_key', partition_key, validation.MAX_PARTITION_KEY_BYTES)
    elif schema.partition_key_type == 'N':
        if isinstance(partition_key, bool) or not isinstance(partition_key, (int, Decimal)):
            raise TypeError(f'partition_key must be an int or a Decimal: table {schema.table_name!r} has a number '
                            f'partition key; got {type(partition_key).__name__}')
        validation.require_storable('partition_key', partition_key)
    else:
        if isinstance(partition_key, Binary):
            partition_key = binary_bytes(partition_key)
        if not isinstance(partition_key, (bytes, bytearray)):
            raise TypeError(f'partition_key must be bytes: table {schema.table_name!r} has a binary partition key; '
                            f'got {type(partition_key).__name__}')
        if not 0 < len(partition_key) <= validation.MAX_PARTITION_KEY_BYTES:
            raise ValueError(f'partition_key must be 1 to {validation.MAX_PARTITION_KEY_BYTES} bytes, '
                             f'got {len(partition_key)}')
    validation.require_key('sort_key', sort_key, validation.MAX_SORT_KEY_BYTES)
    if schema.sort_key_name is None and sort_key != NO_SORT_KEY:
        raise ValueError(f'table {schema.table_name!r} has no sort key: leave sort_key as {NO_SORT_KEY!r}, '
                         f'got {sort_key!r}')


def check_additional_attributes(schema: Schema, additional_attributes: object,
                                argument: str = 'additional_attributes') -> Mapping[str, Any]:
    if additional_attributes is None:
        return {}
    if not isinstance(additional_attributes, Mapping):
        raise TypeError(f'{argument} must be a dict, not {type(additional_attributes).__name__}')
    reserved = schema.reserved_names
    for name, value in additional_attributes.items():
        validation.require_attribute_name(f'{argument} key', name)
        if name in reserved:
            raise ValueError(
                f"{argument} may not set {name!r}: it is one of the lock's own "
                f'attributes {sorted(reserved)}'
            )
        validation.require_storable(f'{argument}[{name!r}]', value)
    return dict(additional_attributes)
