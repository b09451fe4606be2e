"""The CLI's ``list`` and ``show`` name the shared holders of a key (DynamoDB Local)."""
from __future__ import annotations

import json
from typing import Any, Callable

from test_cli import CliResult, cli, holders, on_table  # noqa: F401 - fixtures
from python_dynamodb_lock.python_dynamodb_lock import DynamoDBLockClient


def test_list_and_show_name_the_shared_holders(on_table: Callable[..., CliResult],  # noqa: F811
                                               holders: Callable[..., DynamoDBLockClient]) -> None:  # noqa: F811
    first = holders('reader-one').acquire_lock('report', shared=True)
    second = holders('reader-two').acquire_lock('report', shared=True)
    holders('writer').acquire_lock('orders')

    table = on_table('list')
    assert table.code == 0, table.err
    lines = table.out.splitlines()
    assert lines[0].endswith('SHARED HOLDERS')
    assert next(line for line in lines if line.startswith('report')).split()[-1] == '2'
    assert next(line for line in lines if line.startswith('orders')).split()[-1] == '-'

    text = on_table('show', 'report')
    assert text.code == 0, text.err
    assert 'shared holders:    2' in text.out
    assert f'reader-one: entry version {first.record_version_number}' in text.out
    assert f'reader-two: entry version {second.record_version_number}' in text.out
    record = json.loads(on_table('show', 'report', '--json').out)
    assert sorted(holder['owner_name'] for holder in record['shared_holders']) == ['reader-one', 'reader-two']
    assert 'shared_holders' not in json.loads(on_table('show', 'orders', '--json').out)


def test_a_shared_holders_view_on_a_described_lock(local_engine: Any,
                                                   holders: Callable[..., DynamoDBLockClient]) -> None:  # noqa: F811
    client = holders('reader')
    lock = client.acquire_lock('report', shared=True)
    described = client.get_lock('report')
    assert described is not None and len(described.shared_holders) == 1
    holder = described.shared_holders[0]
    assert (holder.owner_name, holder.record_version_number, holder.lease_duration) == (
        'reader', lock.record_version_number, 120.0)
    assert 'shared_holders=1' in str(described)
