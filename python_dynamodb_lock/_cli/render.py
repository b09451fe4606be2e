"""How a lock is shown: the JSON record of a stored lock, its readable lines, a table of rows,
and compact durations."""
from __future__ import annotations

import base64
import datetime
import decimal
import json
import time
from typing import Any, Dict, List, Optional, Sequence

from ..python_dynamodb_lock import BaseDynamoDBLock


def wall_clock() -> float:
    """This machine's clock, against which a lock's TTL expiry is shown."""
    return time.time()


def format_seconds(seconds: float) -> str:
    """Compact duration: '0.5s', '42s', '59m58s', '3h05m', '2d04h' (sign kept)."""
    sign = '-' if seconds < 0 else ''
    value = abs(seconds)
    if value < 10 and value != int(value):
        return f'{sign}{value:.1f}s'
    whole = int(round(value))
    if whole < 60:
        return f'{sign}{whole}s'
    minutes, secs = divmod(whole, 60)
    if minutes < 60:
        return f'{sign}{minutes}m{secs:02d}s'
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f'{sign}{hours}h{minutes:02d}m'
    days, hours = divmod(hours, 24)
    return f'{sign}{days}d{hours:02d}h'


def until_expiry_text(seconds_until_expiry: Optional[float]) -> str:
    if seconds_until_expiry is None:
        return 'unknown'
    if seconds_until_expiry < 0:
        return f'expired {format_seconds(-seconds_until_expiry)} ago'
    return format_seconds(seconds_until_expiry)


def _utc_iso(epoch: Optional[float]) -> Optional[str]:
    if epoch is None:
        return None
    try:
        moment = datetime.datetime.fromtimestamp(float(epoch), tz=datetime.timezone.utc)
    except (OverflowError, OSError, ValueError):
        return None
    return moment.strftime('%Y-%m-%dT%H:%M:%SZ')


def to_jsonable(value: object) -> Any:
    """DynamoDB values (Decimal, set, Binary, bytes) as plain JSON values."""
    if isinstance(value, decimal.Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted((to_jsonable(v) for v in value), key=repr)
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(bytes(value)).decode('ascii')
    inner = getattr(value, 'value', None)  # boto3.dynamodb.types.Binary
    if isinstance(inner, (bytes, bytearray)):
        return base64.b64encode(bytes(inner)).decode('ascii')
    return value


def as_number(value: Any) -> Optional[float]:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def lock_record(lock: BaseDynamoDBLock, now: float,
                expiry_period: Optional[float] = None) -> Dict[str, Any]:
    """What is known about a stored lock, as a JSON-ready dict.

    ``seconds_until_expiry`` is the stored TTL epoch minus ``now`` (this machine's clock).
    ``estimated_seconds_since_last_write`` is present only when the holders' ``expiry_period``
    is supplied, since the table does not store when it was last written.
    """
    expiry_time = as_number(lock.expiry_time)
    until_expiry = None if expiry_time is None else round(expiry_time - now, 3)
    record: Dict[str, Any] = {
        'partition_key': to_jsonable(lock.partition_key),
        'sort_key': lock.sort_key,
        'owner_name': lock.owner_name,
        'lease_duration': to_jsonable(lock.lease_duration),
        'record_version_number': lock.record_version_number,
        'expiry_time': to_jsonable(lock.expiry_time),
        'expiry_time_utc': _utc_iso(expiry_time),
        'seconds_until_expiry': until_expiry,
        'additional_attributes': to_jsonable(lock.additional_attributes or {}),
        'fencing_token': lock.fencing_token,
    }
    if lock.shared_holders:     # a shared (read) lock: who holds it
        record['shared_holders'] = [
            {'holder_id': holder.holder_id, 'owner_name': holder.owner_name,
             'record_version_number': holder.record_version_number,
             'lease_duration': to_jsonable(holder.lease_duration)} for holder in lock.shared_holders]
    if expiry_period is not None:
        # expiry_time is stored in whole seconds, so the estimate is good to a second at best.
        record['estimated_seconds_since_last_write'] = (
            None if until_expiry is None else round(expiry_period - until_expiry))
    return record


def render_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> List[str]:
    widths = [len(h) for h in headers]
    for row in rows:
        for index, cell in enumerate(row):
            widths[index] = max(widths[index], len(cell))
    lines = []
    for row in [list(headers), *rows]:
        lines.append('  '.join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip())
    return lines


def describe_lock_lines(record: Dict[str, Any], table: str) -> List[str]:
    until = record['seconds_until_expiry']
    lease = as_number(record['lease_duration'])
    lines = [
        f'Lock in table {table!r}:',
        f'  partition key:     {record["partition_key"]}',
        f'  sort key:          {record["sort_key"]}',
        f'  owner:             {record["owner_name"]}',
        f'  record version:    {record["record_version_number"]}',
        f'  lease duration:    '
        f'{format_seconds(lease) if lease is not None else record["lease_duration"]}'
        ' (a waiter takes over once this version stays unchanged that long)',
        f'  TTL expiry:        {record["expiry_time_utc"] or record["expiry_time"]} '
        f'({until_expiry_text(until)}; DynamoDB deletes the row some time after)',
    ]
    if 'estimated_seconds_since_last_write' in record:
        age = record['estimated_seconds_since_last_write']
        lines.append(f'  last write (est.): '
                     f'{"unknown" if age is None else format_seconds(age) + " ago"}'
                     ' (from TTL expiry and the given --expiry-period)')
    if record.get('fencing_token') is not None:
        lines.append(f'  fencing token:     {record["fencing_token"]}')
    holders = record.get('shared_holders') or []
    if holders:
        lines.append(f'  shared holders:    {len(holders)} (each renews its own entry; see "Shared locks")')
        for holder in holders:
            lines.append(f'    {holder["owner_name"]}: entry version {holder["record_version_number"]}, '
                         f'lease {format_seconds(as_number(holder["lease_duration"]) or 0)}')
    if record['additional_attributes']:
        lines.append('  additional attributes: '
                     + json.dumps(record['additional_attributes'], sort_keys=True))
    return lines
