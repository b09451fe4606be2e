"""Guarded writes: the application's writes commit only while its lock is still held.

The writes go out in ONE ``TransactWriteItems`` call together with a ``ConditionCheck`` that
the lock row still carries this acquisition's id. Heartbeats change the row's version every
period but never its acquisition id, so the check does not race them; a takeover, a release or
a force release changes or removes the id, so after any of them nothing is written.

How the answers are judged:

* our check refused: the lock is gone; nothing was written; LOCK_STOLEN naming the holder
  found instead (the transaction returns the row: ``ReturnValuesOnConditionCheckFailure``);
* ``TransactionConflict`` (the lock row or an item was being written by another request, a
  heartbeat for instance) or throttling: nothing was written; sent again, with a new client
  request token, within a bound; never reported as a lost lock;
* an answer that may have been lost (5xx, timeouts): sent again with the SAME client request
  token, which DynamoDB makes idempotent for 10 minutes, so a transaction that did commit is
  not applied twice;
* the application's own condition refused: its ``TransactionCanceledException`` is raised as
  boto3 raises it (our check is the last action, so the indices of ``CancellationReasons``
  match the application's items).
"""
from __future__ import annotations

import math
import uuid
from decimal import Decimal
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from .._wire.requests import Request
from .._model.errors import DynamoDBLockError
from .._model.schema import COL_ACQUISITION_ID, PartitionKey, Schema
from .answers import Applied, Failed, deserialize
from .effects import Call, Emit, Protocol, Sleep, Unregister
from .events import Event, Kind
from .messages import explain
from .state import LockView, Status, how_lost, loss_from_row

__all__ = ['GUARD_ATTEMPTS', 'MAX_ACTIONS', 'MAX_TRANSACTION_BYTES', 'RETRYABLE_ERRORS', 'RETRYABLE_REASONS',
           'UNANSWERED_ATTEMPTS', 'backoff', 'check_actions', 'guarded_write', 'reasons_of', 'single_action',
           'size_of', 'transaction_action']

#: DynamoDB's limits on one TransactWriteItems call: 100 actions (ours included), 4 MB.
MAX_ACTIONS = 100
MAX_TRANSACTION_BYTES = 4 * 1024 * 1024
#: Attempts for a transaction cancelled by conflicts or throttling, 25 ms apart doubling.
GUARD_ATTEMPTS = 8
_BACKOFF_BASE = 0.025
_BACKOFF_CAP = 1.0
#: Attempts, with one client request token, for a transaction whose answer may be lost.
UNANSWERED_ATTEMPTS = 3

_ACTION_KINDS = ('Put', 'Update', 'Delete', 'ConditionCheck')
RETRYABLE_REASONS = frozenset({'TransactionConflict', 'ThrottlingError', 'ProvisionedThroughputExceeded',
                                'RequestLimitExceeded'})
RETRYABLE_ERRORS = frozenset({'TransactionInProgressException', 'TransactionConflictException'})


# What a single put/update/delete call may carry into its transaction action; the rest of
# boto3's arguments for that call are transaction options or not allowed in transactions.
_ACTION_FIELDS = {
    'Put': ('TableName', 'Item', 'ConditionExpression', 'ExpressionAttributeNames', 'ExpressionAttributeValues',
            'ReturnValuesOnConditionCheckFailure'),
    'Update': ('TableName', 'Key', 'UpdateExpression', 'ConditionExpression', 'ExpressionAttributeNames',
               'ExpressionAttributeValues', 'ReturnValuesOnConditionCheckFailure'),
    'Delete': ('TableName', 'Key', 'ConditionExpression', 'ExpressionAttributeNames', 'ExpressionAttributeValues',
               'ReturnValuesOnConditionCheckFailure'),
}
_TRANSACTION_OPTIONS = ('ReturnConsumedCapacity', 'ReturnItemCollectionMetrics')


def backoff(attempt: int) -> float:
    """Seconds to wait before sending a transaction again after ``attempt`` (0-based) conflicted."""
    return float(min(_BACKOFF_CAP, _BACKOFF_BASE * 2 ** attempt))


def transaction_action(request: Request) -> Dict[str, Any]:
    """One of the lock's own conditional writes (:mod:`~python_dynamodb_lock._wire.requests`) as a
    ``TransactWriteItems`` action (what a transaction cannot carry, ``ReturnValues``, is dropped)."""
    kind = {'put_item': 'Put', 'update_item': 'Update', 'delete_item': 'Delete'}[request.operation]
    return {kind: {name: value for name, value in request.params.items() if name in _ACTION_FIELDS[kind]}}


def single_action(kind: str, params: Mapping[str, Any]) -> Tuple[List[Dict[str, Any]], Dict[str, Any]]:
    """The transaction action and options for one ``put_item``/``update_item``/``delete_item``
    call given with boto3's arguments: ``([action], options)``.

    :raises TypeError: for an argument such a call cannot carry into a transaction
        (``ReturnValues``, the legacy ``Expected``/``ConditionalOperator``, ...).
    """
    fields = _ACTION_FIELDS[kind]
    unknown = sorted(set(params) - set(fields) - set(_TRANSACTION_OPTIONS))
    if unknown:
        raise TypeError(f'a guarded {kind.lower()} takes {", ".join(fields + _TRANSACTION_OPTIONS)}; '
                        f'not {", ".join(unknown)}')
    action = {kind: {name: value for name, value in params.items() if name in fields}}
    options = {name: value for name, value in params.items() if name in _TRANSACTION_OPTIONS}
    return [action], options


def check_actions(schema: Schema, partition_key: PartitionKey, sort_key: str, actions: object,
                  more_keys: Sequence[Tuple[Any, str]] = (), existing_item: bool = False) -> List[Dict[str, Any]]:
    """Check the application's actions before anything is sent (``TransactItems`` as the boto3
    client takes them, values as Python values).

    :param more_keys: the other lock keys checked in the same transaction (a multi-lock's).
    :raises TypeError, ValueError: an action that is not one of Put/Update/Delete/ConditionCheck
        with a ``TableName``, an action on a lock row itself, more actions than fit beside the
        guard's own checks (one per lock, 100 in all), an estimated size over 4 MB, or
        ``ReturnValues`` (transactions return no values).
    """
    if isinstance(actions, (str, bytes, Mapping)) or not isinstance(actions, Sequence):
        raise TypeError(f'TransactItems must be a list of actions, not {type(actions).__name__}')
    if not actions:
        raise ValueError('TransactItems must hold at least one action')
    checks = 1 + len(more_keys)
    if len(actions) > MAX_ACTIONS - checks:
        what = 'the lock check is one' if checks == 1 else f'the checks of its {checks} locks take {checks}'
        raise ValueError(f'a guarded write holds at most {MAX_ACTIONS - checks} actions (DynamoDB allows '
                         f'{MAX_ACTIONS} per transaction and {what}), got {len(actions)}')
    lock_keys = [schema.key(key, sort) for key, sort in ((partition_key, sort_key), *more_keys)]
    size = 0
    for index, action in enumerate(actions):
        if not isinstance(action, Mapping) or len(action) != 1 or next(iter(action)) not in _ACTION_KINDS:
            raise TypeError(f'TransactItems[{index}] must be a dict with one key of {list(_ACTION_KINDS)}, '
                            f'got {action!r:.200}')
        kind, body = next(iter(action.items()))
        if not isinstance(body, Mapping) or not isinstance(body.get('TableName'), str):
            raise TypeError(f'TransactItems[{index}][{kind!r}] must be a dict with a TableName')
        if 'ReturnValues' in body:
            raise ValueError(f'TransactItems[{index}][{kind!r}]: transactions return no values (ReturnValues)')
        target = body.get('Item') if kind == 'Put' else body.get('Key')
        if not isinstance(target, Mapping):
            raise TypeError(f"TransactItems[{index}][{kind!r}] must have {'an Item' if kind == 'Put' else 'a Key'}")
        if body['TableName'] == schema.table_name and any(
                all(target.get(name) == value for name, value in lock_key.items()) for lock_key in lock_keys):
            if existing_item:
                raise ValueError(
                    f'TransactItems[{index}] writes the item this lock is on (lock_existing_item=True), which the '
                    'guard checks in the same transaction, and DynamoDB refuses a transaction that touches one item '
                    'twice; nothing was written. Update that item with your own UpdateItem conditioned on '
                    "'fencing_token = <lock.fencing_token> AND attribute_exists(record_version_number)' (see "
                    '"Locking an existing item" in the docs)')
            raise ValueError(f'TransactItems[{index}] writes the lock row itself, which the guard checks; keep data '
                             'on the lock in additional_attributes, or in another item')
        size += size_of(body)
    if size > MAX_TRANSACTION_BYTES:
        raise ValueError(f'the guarded write is about {size} bytes; DynamoDB takes at most {MAX_TRANSACTION_BYTES} '
                         'bytes per transaction')
    return [dict(action) for action in actions]


def guarded_write(schema: Schema, lock: Any,   # a LockView, or a tuple of a multi-lock's
                  actions: List[Dict[str, Any]], options: Mapping[str, Any],
                  client_token: Optional[str] = None) -> Protocol[Dict[str, Any]]:
    """Send ``actions`` (checked by :func:`check_actions`) with the lock check, in one
    transaction; the answer of ``TransactWriteItems``. ``lock`` may be a tuple of locks (a
    multi-lock's): each one's acquisition is checked in the same transaction.

    :raises DynamoDBLockError: ``LOCK_STOLEN`` when the lock (any of them) is no longer held
        (nothing is written; ``holder`` names who holds the key now), ``LOCK_NOT_OWNED`` when
        this lock was released, ``UNKNOWN`` when DynamoDB fails otherwise (with ``reason``; for
        an outcome that stays unknown the message says so, and the transaction may have been
        applied).
    :raises botocore.exceptions.ClientError: the ``TransactionCanceledException`` of an
        application condition that refused.
    """
    locks = tuple(lock) if isinstance(lock, (list, tuple)) else (lock,)
    checks = []
    for each in locks:
        state = each._state
        status = state.status
        if status == Status.INVALID:
            loss = state.loss or loss_from_row(None)
            raise _stolen(each, loss.row, loss.reason, 'so nothing was sent')
        if status not in Status.HELD or state.acquisition_id is None:
            raise DynamoDBLockError(DynamoDBLockError.LOCK_NOT_OWNED,
                                    f'{each.unique_identifier} is not held ({status}): nothing was written')
        checks.append({'ConditionCheck': {
            'TableName': schema.table_name,
            'Key': schema.key(each.partition_key, each.sort_key),
            'ConditionExpression': '#acquisition = :acquisition',
            'ExpressionAttributeNames': {'#acquisition': COL_ACQUISITION_ID},
            'ExpressionAttributeValues': {':acquisition': state.acquisition_id},
            'ReturnValuesOnConditionCheckFailure': 'ALL_OLD',
        }})
    lock = locks[0]
    token = client_token or str(uuid.uuid4())
    unanswered = 0
    for attempt in range(GUARD_ATTEMPTS):
        params = {**options, 'TransactItems': [*actions, *checks], 'ClientRequestToken': token}
        answer = yield Call(Request('transact_write_items', params))
        if isinstance(answer, Applied):
            return dict(answer.response)
        assert isinstance(answer, Failed), answer
        if answer.code == 'TransactionCanceledException':
            reasons = reasons_of(answer.error)
            lock_reasons = reasons[len(actions):] if len(reasons) == len(actions) + len(checks) else []
            for each, lock_reason in zip(locks, lock_reasons):
                if lock_reason.get('Code') == 'ConditionalCheckFailed':
                    yield from _lost(each, deserialize(lock_reason.get('Item')))
            if any(reason.get('Code') == 'ConditionalCheckFailed' for reason in reasons):
                raise answer.error              # the application's own condition refused
            if not any(reason.get('Code') in RETRYABLE_REASONS for reason in reasons):
                raise _failed(schema, lock, answer, 'the transaction was cancelled')
            if not unanswered:
                # Nothing was applied: the next attempt is a new transaction. After an attempt
                # that may have been applied the token stays, so that DynamoDB's idempotency
                # can never let that attempt and a later one both commit.
                token = str(uuid.uuid4())
        elif answer.maybe_applied or answer.code in RETRYABLE_ERRORS:
            unanswered += answer.maybe_applied
            if unanswered >= UNANSWERED_ATTEMPTS:
                raise _failed(schema, lock, answer, 'the outcome is unknown (it may have been applied; sending it '
                              f'again with ClientRequestToken={token!r} within 10 minutes is safe)')
            # Same token: if an earlier attempt committed, DynamoDB answers as if this one did.
        else:
            raise _failed(schema, lock, answer, 'nothing was written')
        yield Emit(Event(Kind.GUARD_RETRY, lock.unique_identifier, lock, {'code': answer.code, 'attempt': attempt + 1}))
        yield Sleep(backoff(attempt))
    raise _failed(schema, lock, answer, f'it kept conflicting with other writes ({GUARD_ATTEMPTS} attempts); '
                  'nothing was written')


def _lost(lock: LockView, row: Optional[Dict[str, Any]]) -> Protocol[None]:
    """Our check refused: record the loss on the lock (as a heartbeat would) and raise."""
    final = lock._state.settle_guard_refused(row, lock._clock.monotonic())
    if final is not None:
        yield Unregister(lock)
    if final == Status.RELEASED:
        yield Emit(Event(Kind.RELEASED_BY_LOST_ANSWER, lock.unique_identifier, lock))
        raise DynamoDBLockError(DynamoDBLockError.LOCK_NOT_OWNED, f'{lock.unique_identifier} was released (by a '
                                'release reported as failed that went through), so nothing was written')
    loss = loss_from_row(row)
    if final == Status.INVALID:
        fields = {'owner': Schema.owner_of(loss.row), 'reason': loss.reason}
        how = how_lost(row)
        yield Emit(Event(Kind.STOLEN, lock.unique_identifier, lock, {**fields, 'how': how} if how else fields))
    raise _stolen(lock, loss.row, loss.reason, 'so nothing was written')


def _stolen(lock: LockView, row: Optional[Dict[str, Any]], reason: str, what: str) -> DynamoDBLockError:
    if row is None:
        message = f'{lock.unique_identifier} is no longer held (its row was released or removed), {what}'
    else:
        message = f'{lock.unique_identifier} is held by {Schema.owner_of(row)} now, {what}'
    return DynamoDBLockError(DynamoDBLockError.LOCK_STOLEN, message, reason=reason, holder=row)


def _failed(schema: Schema, lock: LockView, answer: Failed, what: str) -> DynamoDBLockError:
    error = DynamoDBLockError(
        DynamoDBLockError.UNKNOWN,
        f'Guarded write under {lock.unique_identifier} failed: {explain(schema, answer.error)}; {what}',
        reason=answer.reason,
    )
    error.__cause__ = answer.error
    return error


def reasons_of(error: BaseException) -> List[Dict[str, Any]]:
    response = getattr(error, 'response', {}) or {}
    reasons = response.get('CancellationReasons') or []
    return [dict(reason) for reason in reasons if isinstance(reason, Mapping)]


def size_of(value: object) -> int:
    """An upper estimate of a value's size as DynamoDB counts it (names and values, in bytes)."""
    if isinstance(value, str):
        return len(value.encode('utf-8', errors='surrogatepass'))
    if isinstance(value, (bytes, bytearray)):
        return len(value)
    if isinstance(value, bool) or value is None:
        return 1
    if isinstance(value, (int, Decimal, float)):
        digits = len(str(value)) if not (isinstance(value, float) and not math.isfinite(value)) else 8
        return 1 + (digits + 1) // 2
    if isinstance(value, Mapping):
        return 3 + sum(size_of(str(name)) + size_of(item) + 1 for name, item in value.items())
    if isinstance(value, (list, tuple, set, frozenset)):
        return 3 + sum(size_of(item) + 1 for item in value)
    value_bytes = getattr(value, 'value', None)    # boto3 Binary
    return len(value_bytes) if isinstance(value_bytes, (bytes, bytearray)) else 64
