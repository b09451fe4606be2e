"""FaultInjector.lose_answers filters on the request body in both of its modes."""
from __future__ import annotations

from typing import Any, Dict, List

import pytest
from botocore.exceptions import ReadTimeoutError

from python_dynamodb_lock.testing import FaultInjector, moto_lock_table


@pytest.mark.parametrize('retry', [True, False])
def test_lose_answers_when_sees_the_request_body(retry: bool) -> None:
    seen: List[Dict[str, Any]] = []

    def only_key_b(body: Dict[str, Any]) -> bool:
        seen.append(body)
        return body.get('Key', {}).get('lock_key') == {'S': 'b'}

    with moto_lock_table() as table, FaultInjector(table.client) as faults:
        fault = faults.lose_answers('UpdateItem', times=1, retry=retry, when=only_key_b)
        for key in ('a', 'b'):
            update = dict(TableName=table.table_name, Key={'lock_key': {'S': key}, 'sort_key': {'S': '-'}},
                          UpdateExpression='SET n = :one', ExpressionAttributeValues={':one': {'N': '1'}})
            if key == 'b' and not retry:
                with pytest.raises(ReadTimeoutError):
                    table.client.update_item(**update)
            else:
                table.client.update_item(**update)
        assert fault.hits == 1
        assert [body['Key']['lock_key']['S'] for body in seen][:2] == ['a', 'b']
        assert table.read_item('b') is not None   # the write landed; only its answer was lost
