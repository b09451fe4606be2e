"""A retried ``CreateTable`` (its first answer lost, botocore sent it again and met the table)
compares the table's tags with those asked for: the same tags are accepted, other tags are
refused, naming both; when the tags cannot be read (``dynamodb:ListTagsOfResource`` denied) the
table is accepted and the log says the tags were not compared. Both clients, on moto (DynamoDB
Local does not keep tags: its ``ListTagsOfResource`` is an unknown operation).
"""
from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Any, Callable, Dict, Iterator, List, Optional

import pytest

from helpers import ASYNCIO, CallRecorder
from python_dynamodb_lock import Reason
from python_dynamodb_lock.aio import AsyncDynamoDBLockClient
from python_dynamodb_lock.python_dynamodb_lock import DynamoDBLockClient, DynamoDBLockError
from python_dynamodb_lock.testing import FaultInjector, LockTable
from test_table_tags_and_global import all_tags

MOTO = 'moto'
TAGS = {'team': 'payments', 'cost-centre': '42'}
LOGGER = 'python_dynamodb_lock.python_dynamodb_lock'


@pytest.fixture
def new_table(engine: LockTable) -> Iterator[str]:
    """A name for the table the test creates; deleted afterwards."""
    name = f'retried-tags-{uuid.uuid4().hex[:12]}'
    yield name
    try:
        engine.client.delete_table(TableName=name)
    except Exception:   # noqa: BLE001 - not created, or already gone
        pass


def create(engine: LockTable, client_kind: str, name: str, between: Optional[Callable[[], Any]] = None,
           deny_tags: Optional[str] = None, **arguments: Any) -> Dict[str, Any]:
    """``create_dynamodb_table`` of the test's client kind, on a client of its own whose first
    ``CreateTable`` answer is lost (``between`` runs, through ``engine.client``, before botocore's
    retry); ``deny_tags``: every ``ListTagsOfResource`` of that client fails with this code."""
    def arrange(faults: FaultInjector) -> Any:
        if deny_tags is not None:
            faults.fail_calls('ListTagsOfResource', code=deny_tags, times=None)
        return faults.lose_answers('CreateTable', between=between)

    if client_kind == ASYNCIO:
        async def main() -> Dict[str, Any]:
            async with engine.new_async_client() as dynamodb:
                with FaultInjector(dynamodb) as faults:
                    lost = arrange(faults)
                    try:
                        return dict(await AsyncDynamoDBLockClient.create_dynamodb_table(
                            dynamodb, table_name=name, **arguments))
                    finally:
                        assert lost.hits == 1

        return asyncio.run(main())
    client = engine.new_client()
    with FaultInjector(client) as faults:
        lost = arrange(faults)
        try:
            return DynamoDBLockClient.create_dynamodb_table(client, table_name=name, **arguments)
        finally:
            assert lost.hits == 1


def _arn(engine: LockTable, name: str) -> str:
    return str(engine.client.describe_table(TableName=name)['Table']['TableArn'])


def _retag(engine: LockTable, name: str, tags: Dict[str, str], untag: List[str]) -> Callable[[], None]:
    """Between the lost answer and the retry, someone changes the new table's tags."""
    def between() -> None:
        arn = _arn(engine, name)
        if untag:
            engine.client.untag_resource(ResourceArn=arn, TagKeys=untag)
        if tags:
            engine.client.tag_resource(ResourceArn=arn, Tags=[{'Key': k, 'Value': v} for k, v in tags.items()])

    return between


@pytest.mark.parametrize('engine', [MOTO], indirect=True)
@pytest.mark.parametrize('asked', [TAGS, None], ids=['tags', 'no-tags'])
def test_a_retried_create_whose_table_has_the_tags_asked_for_succeeds(engine: LockTable, client_kind: str,
                                                                       new_table: str,
                                                                       asked: Optional[Dict[str, str]]) -> None:
    description = create(engine, client_kind, new_table, tags=asked)
    assert description['TableStatus'] == 'ACTIVE'
    expected = sorted(({'Key': k, 'Value': v} for k, v in (asked or {}).items()), key=lambda tag: tag['Key'])
    assert all_tags(engine.client, description['TableArn']) == expected


@pytest.mark.parametrize('engine', [MOTO], indirect=True)
@pytest.mark.parametrize('asked, retag, untag, words', [
    (TAGS, {'team': 'search'}, [], "its tags are {'team': 'search', 'cost-centre': '42'}, not "
                                   "{'team': 'payments', 'cost-centre': '42'}"),
    (None, {'owner': 'someone-else'}, [], "its tags are {'owner': 'someone-else'}, not none"),
], ids=['other-value', 'unasked-tag'])
def test_a_retried_create_whose_table_has_other_tags_fails_clearly(engine: LockTable, client_kind: str,
                                                                   new_table: str, asked: Optional[Dict[str, str]],
                                                                   retag: Dict[str, str], untag: List[str],
                                                                   words: str) -> None:
    with pytest.raises(DynamoDBLockError) as refused:
        create(engine, client_kind, new_table, tags=asked, between=_retag(engine, new_table, retag, untag))
    error = refused.value
    assert error.code == DynamoDBLockError.UNKNOWN and error.reason == Reason.TABLE_EXISTS
    assert 'is not the table asked for' in error.message and 'exist_ok=True' in error.message
    assert words in error.message, error.message
    # Nothing was changed on the table that is not ours: its TTL was not turned on.
    ttl = engine.client.describe_time_to_live(TableName=new_table)['TimeToLiveDescription']
    assert ttl['TimeToLiveStatus'] == 'DISABLED'


@pytest.mark.parametrize('engine', [MOTO], indirect=True)
def test_a_retried_create_whose_tags_do_not_show_yet_is_accepted_with_a_warning(
        engine: LockTable, client_kind: str, new_table: str, caplog: pytest.LogCaptureFixture) -> None:
    """ListTagsOfResource is eventually consistent on AWS: a table that shows only some of the tags
    asked for (none other, none with another value) is taken as ours with its tags not yet
    visible, and a WARNING names the missing ones; a deploy script is not failed for the lag."""
    with caplog.at_level(logging.INFO, logger=LOGGER):
        description = create(engine, client_kind, new_table, tags=TAGS,
                             between=_retag(engine, new_table, {}, ['cost-centre']))
    assert description['TableStatus'] == 'ACTIVE'
    warnings = [record.getMessage() for record in caplog.records if record.levelno == logging.WARNING]
    assert len(warnings) == 1 and new_table in warnings[0] and "['cost-centre']" in warnings[0], warnings


@pytest.mark.parametrize('engine', [MOTO], indirect=True)
@pytest.mark.parametrize('code', ['AccessDeniedException', 'UnknownOperationException'])
def test_a_retried_create_that_cannot_read_tags_accepts_the_table_and_says_so(
        engine: LockTable, client_kind: str, new_table: str, code: str, caplog: pytest.LogCaptureFixture) -> None:
    """``ListTagsOfResource`` denied (an IAM policy without it) or unknown (DynamoDB Local): the
    table is accepted, its tags not compared, and the log says so, naming the action."""
    with caplog.at_level(logging.INFO, logger=LOGGER):
        description = create(engine, client_kind, new_table, tags=TAGS, deny_tags=code,
                             between=_retag(engine, new_table, {'team': 'search'}, []))
    assert description['TableStatus'] == 'ACTIVE'
    lines = [record.getMessage() for record in caplog.records if 'ListTagsOfResource' in record.getMessage()]
    assert len(lines) == 1 and new_table in lines[0] and 'tags not compared' in lines[0] and code in lines[0], lines


@pytest.mark.parametrize('engine', [MOTO], indirect=True)
def test_a_table_met_without_a_retry_reads_no_tags(engine: LockTable, client_kind: str) -> None:
    """Only a retried create compares tags: ``exist_ok=True`` on an existing table does not need
    ``dynamodb:ListTagsOfResource``."""
    with CallRecorder(engine.client) as calls:
        DynamoDBLockClient.create_dynamodb_table(engine.client, table_name=engine.table_name, exist_ok=True)
    assert calls.of('CreateTable') and not calls.of('ListTagsOfResource')
