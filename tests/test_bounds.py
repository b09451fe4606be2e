"""Values at and beyond the limits: durations too long to wait, and attribute values DynamoDB
cannot store (or boto3 cannot read back).

* Durations (issue 11, part 1): any duration beyond ``MAX_DURATION`` (3650 days) is refused
  with a ValueError naming the argument and the limit, by the constructor, ``acquire_lock``
  and ``try_acquire_lock``, before any DynamoDB call and before any thread starts; one of
  exactly ``MAX_DURATION`` works, and the background loops never ask for a wait longer than
  ``threading.TIMEOUT_MAX`` (beyond it ``Event.wait`` raises ``OverflowError`` and the loop
  dies). ``clamp_wait`` makes any number a wait that a lock can do.
* Attribute values (part 2): ``require_storable`` against a table of good and bad values,
  directly (no I/O); on DynamoDB Local, the good values really round-trip through boto3 and a
  sample of the bad ones really fails there.
"""
from __future__ import annotations

import datetime
import math
import socket
import threading
import time
import uuid
from decimal import Decimal
from typing import Any, Dict, Iterator, List, Tuple, Type

import pytest
from boto3.dynamodb.types import Binary

from conftest import moto_table
from helpers import CallRecorder, offline_resource
from python_dynamodb_lock._model.validation import (
    MAX_DURATION,
    MAX_NUMBER_MAGNITUDE,
    MIN_NUMBER_MAGNITUDE,
    clamp_wait,
    require_duration,
    require_storable,
)
from python_dynamodb_lock.python_dynamodb_lock import DynamoDBLockClient
from python_dynamodb_lock.testing import LockTable, SystemClock

td = datetime.timedelta
TOO_LONG = [
    pytest.param(td(days=106752), id='beyond-TIMEOUT_MAX'),   # the value of the issue: loops died
    pytest.param(MAX_DURATION + td(microseconds=1), id='just-beyond-MAX_DURATION'),
    pytest.param(td.max, id='timedelta.max'),
]
DURATION_ARGUMENTS = ['heartbeat_period', 'safe_period', 'lease_duration', 'expiry_period']


def lock_client_threads() -> List[threading.Thread]:
    return [thread for thread in threading.enumerate()
            if thread.name.startswith('DynamoDBLockClient-heartbeat') and thread.is_alive()]


@pytest.fixture
def moto_engine(request: pytest.FixtureRequest) -> Iterator[LockTable]:
    with moto_table(f'locks-bounds-{uuid.uuid4().hex[:8]}') as table:
        yield table


@pytest.fixture
def moto_client(moto_engine: LockTable) -> Iterator[DynamoDBLockClient]:
    client = DynamoDBLockClient(moto_engine.resource, table_name=moto_engine.table_name)
    yield client
    client.close()


def table_rows(engine: LockTable) -> List[Any]:
    return engine.client.scan(TableName=engine.table_name, ConsistentRead=True)['Items']


# --------------------------------------------------------------------------------------------
# Durations
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize('too_long', TOO_LONG)
@pytest.mark.parametrize('argument', DURATION_ARGUMENTS)
def test_the_constructor_refuses_a_duration_beyond_the_maximum(argument: str, too_long: td) -> None:
    resource = offline_resource()
    threads_before = lock_client_threads()
    with CallRecorder(resource) as calls:
        with pytest.raises(ValueError) as refused:
            DynamoDBLockClient(resource, **{argument: too_long})
    message = str(refused.value)
    assert argument in message and '3650 days' in message, message
    assert calls.count() == 0
    assert lock_client_threads() == threads_before


@pytest.mark.parametrize('too_long', TOO_LONG)
@pytest.mark.parametrize('argument', ['retry_period', 'retry_timeout'])
def test_acquire_refuses_a_duration_beyond_the_maximum_before_any_call(
        moto_engine: LockTable, moto_client: DynamoDBLockClient, argument: str, too_long: td) -> None:
    with CallRecorder(moto_engine.resource) as calls:
        with pytest.raises(ValueError) as refused:
            moto_client.acquire_lock('bounded', **{argument: too_long})
    assert argument in str(refused.value) and '3650 days' in str(refused.value)
    assert calls.count() == 0
    assert table_rows(moto_engine) == []


def test_try_acquire_refuses_attributes_it_cannot_store_before_any_call(
        moto_engine: LockTable, moto_client: DynamoDBLockClient) -> None:
    """try_acquire_lock takes no durations; its one bad-input path shares acquire's checks."""
    with CallRecorder(moto_engine.resource) as calls:
        with pytest.raises(TypeError):
            moto_client.try_acquire_lock('bounded', additional_attributes={'ratio': 0.5})
    assert calls.count() == 0
    assert table_rows(moto_engine) == []


def test_require_duration_accepts_exactly_the_maximum() -> None:
    assert require_duration('retry_timeout', MAX_DURATION) == MAX_DURATION.total_seconds()
    assert MAX_DURATION.total_seconds() < threading.TIMEOUT_MAX


class RecordingSystemClock(SystemClock):
    """The real clock, noting every wait asked of it (thread name, seconds)."""

    def __init__(self) -> None:
        self.waits: List[Tuple[str, float]] = []
        self._guard = threading.Lock()
        self.both_loops_waited = threading.Event()

    def sleep(self, seconds: float, wake: threading.Event) -> bool:
        with self._guard:
            self.waits.append((threading.current_thread().name, seconds))
            names = {name for name, _ in self.waits}
            if {'DynamoDBLockClient-heartbeat-sender', 'DynamoDBLockClient-heartbeat-checker'} <= names:
                self.both_loops_waited.set()
        return super().sleep(seconds, wake)


def test_durations_of_exactly_the_maximum_work(moto_engine: LockTable) -> None:
    """Every duration at its longest: the client starts, acquires and releases, and its loops
    only ever ask for waits that ``Event.wait`` can do, so they stay alive until close."""
    clock = RecordingSystemClock()
    client = DynamoDBLockClient(
        moto_engine.resource, table_name=moto_engine.table_name,
        heartbeat_period=MAX_DURATION - td(days=2), safe_period=MAX_DURATION - td(days=1),
        lease_duration=MAX_DURATION, expiry_period=MAX_DURATION, clock=clock)
    try:
        lock = client.acquire_lock('longest', retry_period=MAX_DURATION, retry_timeout=MAX_DURATION)
        assert clock.both_loops_waited.wait(10), clock.waits
        assert all(seconds <= threading.TIMEOUT_MAX for _, seconds in clock.waits), clock.waits
        assert len(client.background_threads) == 2 and all(t.is_alive() for t in client.background_threads)
        lock.release(best_effort=False)
        assert len(table_rows(moto_engine)) == 1         # the row is kept, marked released
        assert moto_engine.read_held_row('longest') is None
        kept = moto_engine.read_item('longest')
        assert kept['fencing_token'] == lock.fencing_token
        assert kept['expiry_time'] >= time.time() + MAX_DURATION.total_seconds() - 60   # TTL: expiry_period ahead
    finally:
        client.close()
    assert client.background_threads and not any(t.is_alive() for t in client.background_threads)


@pytest.mark.parametrize('seconds, expected', [
    (0, 0.0),
    (1.5, 1.5),
    (-3, 0.0),
    (-math.inf, 0.0),
    (threading.TIMEOUT_MAX, threading.TIMEOUT_MAX),
    (threading.TIMEOUT_MAX * 2, threading.TIMEOUT_MAX),
    (math.inf, threading.TIMEOUT_MAX),
    (math.nan, threading.TIMEOUT_MAX),
    (10 ** 400, threading.TIMEOUT_MAX),     # too large for a float
    (-10 ** 400, 0.0),
    (td(days=106752).total_seconds(), threading.TIMEOUT_MAX),
])
def test_clamp_wait(seconds: float, expected: float) -> None:
    assert clamp_wait(seconds) == expected
    # The point of it: a lock (like Event.wait) accepts the wait; the raw value may not be.
    guard = threading.Lock()
    assert guard.acquire(timeout=clamp_wait(seconds))
    guard.release()


def test_clamp_wait_is_needed_for_the_values_it_caps() -> None:
    """Guards the test above: unclamped, these waits raise (so the test above can fail)."""
    guard = threading.Lock()
    for seconds in (threading.TIMEOUT_MAX * 2, math.inf, math.nan):
        with pytest.raises((OverflowError, ValueError)):
            guard.acquire(timeout=seconds)


@pytest.mark.parametrize('not_a_number', ['5', None, td(seconds=1), True])
def test_clamp_wait_refuses_what_is_not_a_number(not_a_number: Any) -> None:
    with pytest.raises(TypeError):
        clamp_wait(not_a_number)


# --------------------------------------------------------------------------------------------
# Attribute values
# --------------------------------------------------------------------------------------------

def nested_maps(wraps: int, leaf: Any = 'leaf') -> Any:
    """``leaf`` inside ``wraps`` maps: the innermost map stands at level ``wraps``."""
    value = leaf
    for _ in range(wraps):
        value = {'a': value}
    return value


def nested_lists(wraps: int, leaf: Any = 1) -> Any:
    value = leaf
    for _ in range(wraps):
        value = [value]
    return value


def recursive_list() -> List[Any]:
    loop: List[Any] = []
    loop.append(loop)
    return loop


GOOD_VALUES = [
    pytest.param('text', id='str'),
    pytest.param('', id='empty-str'),
    pytest.param('caf\u00e9 \U0001F512 a\x00b', id='unicode-and-nul'),
    pytest.param(b'\x00\xff', id='bytes'),
    pytest.param(b'', id='empty-bytes'),
    pytest.param(bytearray(b'abc'), id='bytearray'),
    pytest.param(Binary(b'xyz'), id='Binary'),
    pytest.param(True, id='bool'),
    pytest.param(None, id='None'),
    pytest.param(0, id='zero'),
    pytest.param(-17, id='negative-int'),
    pytest.param(10 ** 37, id='int-10**37'),
    pytest.param(-(10 ** 38 - 1), id='int-38-nines'),
    pytest.param(Decimal('3.14159'), id='Decimal'),
    pytest.param(Decimal('-0'), id='negative-zero'),
    pytest.param(Decimal('123.4500'), id='trailing-zeros-within-38'),
    pytest.param(Decimal('9.9999999999999999999999999999999999999E+37'), id='largest-readable-magnitude'),
    pytest.param(MIN_NUMBER_MAGNITUDE, id='smallest-magnitude'),
    pytest.param(-MIN_NUMBER_MAGNITUDE, id='smallest-negative-magnitude'),
    pytest.param(Decimal('1.2345678901234567890123456789012345678E-100'), id='38-digits-tiny'),
    pytest.param({'a', 'b', ''}, id='string-set-with-empty-string'),
    pytest.param(frozenset({1, Decimal('2.5')}), id='number-frozenset'),
    pytest.param({b'', Binary(b'x')}, id='binary-set'),
    pytest.param([], id='empty-list'),
    pytest.param({}, id='empty-map'),
    pytest.param((1, 'two', None), id='tuple'),
    pytest.param({'job': {'steps': [1, {'ok': True}], 'tags': {'x'}}}, id='nested'),
    pytest.param(nested_maps(31), id='31-nested-maps'),
    pytest.param(nested_lists(31), id='31-nested-lists'),
    pytest.param(nested_maps(31, {'set'}), id='set-at-level-32'),
]


@pytest.mark.parametrize('value', GOOD_VALUES)
def test_storable_values_pass(value: Any) -> None:
    require_storable("additional_attributes['a']", value)


NAME = "additional_attributes['a']"
BAD_VALUES = [
    # (value, exception, the path the message names, words the message contains)
    pytest.param(1.5, TypeError, NAME, 'Decimal', id='float'),
    pytest.param(float('nan'), TypeError, NAME, 'Decimal', id='float-nan'),
    pytest.param(object(), TypeError, NAME, 'object', id='object'),
    pytest.param(range(3), TypeError, NAME, 'range', id='range'),
    pytest.param(memoryview(b'x'), TypeError, NAME, 'memoryview', id='memoryview'),
    pytest.param([1, [2, {'b': 0.5}]], TypeError, NAME + "[1][1]['b']", 'float', id='nested-float'),
    pytest.param({'m': {1: 'x'}}, TypeError, NAME + "['m']", 'key', id='non-str-map-key'),
    pytest.param({'m': {'': 'x'}}, ValueError, NAME + "['m']", 'empty key', id='empty-map-key'),
    pytest.param({True}, TypeError, NAME, 'bool', id='bool-set'),
    pytest.param({1.5}, TypeError, NAME, 'Decimal', id='float-set'),
    pytest.param({(1, 2)}, TypeError, NAME, 'tuple', id='tuple-in-set'),
    pytest.param(10 ** 38 + 1, ValueError, NAME, '39 significant digits', id='int-39-digits'),
    pytest.param(Decimal('1.00000000000000000000000000000000000001'), ValueError, NAME, '39 significant digits',
                 id='decimal-39-digits'),
    pytest.param(10 ** 38, ValueError, NAME, 'boto3 cannot read back', id='int-10**38'),
    pytest.param(Decimal('1E+38'), ValueError, NAME, 'boto3 cannot read back', id='decimal-1E+38'),
    pytest.param(MAX_NUMBER_MAGNITUDE, ValueError, NAME, 'boto3 cannot read back', id='largest-magnitude'),
    pytest.param(Decimal('123.45000000000000000000000000000000000000'), ValueError, NAME, "Decimal('123.45')",
                 id='too-many-trailing-zeros'),
    pytest.param(Decimal('0E-200'), ValueError, NAME, "Decimal('0')", id='zero-tiny-exponent'),
    pytest.param(Decimal('1E+126'), ValueError, NAME, 'range', id='too-large'),
    pytest.param(-Decimal('1E+126'), ValueError, NAME, 'range', id='too-large-negative'),
    pytest.param(Decimal('1E-131'), ValueError, NAME, 'range', id='too-small'),
    pytest.param(10 ** 5000, ValueError, NAME, 'range', id='huge-int'),
    pytest.param(Decimal('NaN'), ValueError, NAME, 'NaN', id='nan'),
    pytest.param(Decimal('sNaN'), ValueError, NAME, 'NaN', id='signalling-nan'),
    pytest.param(Decimal('-Infinity'), ValueError, NAME, 'Infinity', id='minus-infinity'),
    pytest.param({'s': [{Decimal('Infinity')}]}, ValueError, NAME + "['s'][0]", 'Infinity', id='infinity-in-set'),
    pytest.param(set(), ValueError, NAME, 'empty set', id='empty-set'),
    pytest.param(frozenset(), ValueError, NAME, 'empty set', id='empty-frozenset'),
    pytest.param({1, 'a'}, ValueError, NAME, 'mixes number and string', id='mixed-set'),
    pytest.param({b'a', 'a'}, ValueError, NAME, 'mixes binary and string', id='mixed-binary-string-set'),
    pytest.param('\ud800', ValueError, NAME, 'lone surrogate', id='lone-surrogate'),
    pytest.param({'k\udfff': 1}, ValueError, NAME + "['k\\udfff']", 'lone surrogate', id='surrogate-key'),
    pytest.param({'x\udc80', 'y'}, ValueError, NAME, 'lone surrogate', id='surrogate-in-set'),
    pytest.param(nested_maps(32), ValueError, NAME + "['a']" * 31, 'level 32', id='32-nested-maps'),
    pytest.param(nested_lists(32), ValueError, NAME + '[0]' * 31, 'level 32', id='32-nested-lists'),
    pytest.param(nested_maps(31, {}), ValueError, NAME + "['a']" * 31, 'level 32', id='empty-map-at-level-32'),
    pytest.param(recursive_list(), ValueError, NAME + '[0]', 'contains itself', id='recursive'),
]


@pytest.mark.parametrize('value, error, path, words', BAD_VALUES)
def test_unstorable_values_are_refused_naming_the_attribute(value: Any, error: Type[Exception], path: str,
                                                            words: str) -> None:
    with pytest.raises(error) as refused:
        require_storable(NAME, value)
    assert type(refused.value) is error
    message = str(refused.value)
    assert path in message, message
    assert words in message, message


def test_a_shared_subvalue_is_walked_once_per_level() -> None:
    """A list holding the same list twice, 30 times over: 2**30 paths, checked in an instant."""
    value: Any = [Decimal(1)]
    for _ in range(30):
        value = [value, value]
    require_storable(NAME, value)
    with pytest.raises(TypeError):
        require_storable(NAME, value + [0.5])


def test_require_storable_does_no_io(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_sockets(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError('require_storable opened a socket')

    monkeypatch.setattr(socket, 'socket', no_sockets)
    monkeypatch.setattr(socket, 'create_connection', no_sockets)
    require_storable(NAME, {'job': [1, Decimal('2.5'), {'s'}]})
    with pytest.raises(ValueError):
        require_storable(NAME, Decimal('1E+38'))


def test_good_values_round_trip_on_dynamodb_local(local_engine: LockTable) -> None:
    """What require_storable passes, DynamoDB stores and boto3 reads back unchanged."""
    table = local_engine.resource.Table(local_engine.table_name)
    item = {'lock_key': 'round-trip', 'sort_key': '-'}
    for index, param in enumerate(GOOD_VALUES):
        item[f'v{index}'] = param.values[0]
    table.put_item(Item=item)
    stored = table.get_item(Key={'lock_key': 'round-trip', 'sort_key': '-'}, ConsistentRead=True)['Item']
    for index, param in enumerate(GOOD_VALUES):
        expected = param.values[0]
        if isinstance(expected, tuple):
            expected = list(expected)     # boto3 writes tuples as lists
        if isinstance(expected, (bytes, bytearray)):
            expected = Binary(bytes(expected))
        assert stored[f'v{index}'] == expected, param.id


@pytest.mark.parametrize('value', [
    pytest.param(Decimal('1E+38'), id='unreadable-number'),
    pytest.param(nested_maps(31, {}), id='empty-map-at-level-32'),
    pytest.param(nested_maps(32), id='32-nested-maps'),
    pytest.param(Decimal('1E-131'), id='too-small'),
    pytest.param({'m': {'': 1}}, id='empty-map-key'),
    pytest.param(10 ** 38 + 1, id='39-digits'),
])
def test_refused_values_really_fail_on_dynamodb_local(local_engine: LockTable, value: Any) -> None:
    """Guards the table above: these values fail for real, on the write or on the read back."""
    with pytest.raises(ValueError):
        require_storable(NAME, value)
    table = local_engine.resource.Table(local_engine.table_name)
    key = {'lock_key': 'refused', 'sort_key': '-'}
    with pytest.raises(Exception):   # botocore ClientError, or a decimal signal raised by boto3
        table.put_item(Item={**key, 'v': value})
        table.get_item(Key=key, ConsistentRead=True)


@pytest.mark.parametrize('argument', ['partition_key_name', 'sort_key_name', 'ttl_attribute_name'])
def test_an_attribute_name_with_a_lone_surrogate_gets_a_clear_error(argument: str) -> None:
    with pytest.raises(ValueError) as refused:
        DynamoDBLockClient(offline_resource(), **{argument: 'name\ud800'})
    assert type(refused.value) is ValueError     # not a bare UnicodeEncodeError
    assert argument in str(refused.value) and 'lone surrogate' in str(refused.value)


@pytest.mark.parametrize('key, argument', [
    pytest.param({'partition_key': 'lock-\ud800'}, 'partition_key', id='partition-key'),
    pytest.param({'partition_key': 'lock', 'sort_key': '\udcff'}, 'sort_key', id='sort-key'),
])
def test_a_key_with_a_lone_surrogate_is_refused_before_any_call(
        moto_engine: LockTable, moto_client: DynamoDBLockClient, key: Dict[str, str], argument: str) -> None:
    """Such a key cannot be encoded in UTF-8, nor quoted into the lock's unique_identifier."""
    with CallRecorder(moto_engine.resource) as calls:
        for attempt in (moto_client.acquire_lock, moto_client.try_acquire_lock, moto_client.get_lock):
            with pytest.raises(ValueError) as refused:
                attempt(**key)
            assert type(refused.value) is ValueError     # not a bare UnicodeEncodeError
            assert argument in str(refused.value) and 'lone surrogate' in str(refused.value)
    assert calls.count() == 0
    assert table_rows(moto_engine) == []
