"""The protocol core with no engine: every kind of answer DynamoDB can give, in every state.

These tables are the specification of the rules for judging DynamoDB's answers (refused, lost,
retried, a foreign row, our own unconfirmed write). The protocols are generators that yield the
requests to send and receive the answers; here the answers are scripted, so each rule is checked
in isolation, in microseconds, without a table. Both clients run exactly this code.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Dict, List, Optional, Sequence

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError, ParamValidationError, ReadTimeoutError

from helpers import assigned_values, attribute_names_in, readable_expression
from python_dynamodb_lock._core.acquire import Observations, TimedOut, acquire
from python_dynamodb_lock._core.write import AcquireAttempt, Written, is_abandoned
from python_dynamodb_lock._core.answers import Applied, Failed, Refused, judge_error
from python_dynamodb_lock._core.effects import Call, Emit, Sleep, Unregister
from python_dynamodb_lock._core.events import Kind
from python_dynamodb_lock._core.guard import check_actions, guarded_write, single_action
from python_dynamodb_lock._core.heartbeat import HeartbeatSettings, renew_one
from python_dynamodb_lock._core.release import (
    ReleaseOutcome,
    ReleaseResult,
    ReleaseSettings,
    precheck_release,
    release,
    release_verdict,
)
from python_dynamodb_lock._core.state import LockState, RenewalVerdict, Status
from python_dynamodb_lock._model.errors import DynamoDBLockError, Reason
from python_dynamodb_lock._wire.renewals import Renewal
from python_dynamodb_lock._model.schema import Schema

SCHEMA = Schema('locks', 'lock_key', 'sort_key', 'expiry_time')
LEASE = 30.0


class FakeClock:
    def __init__(self, now: float = 1000.0, wall: float = 1_700_000_000.0) -> None:
        self.now = now
        self.wall_offset = wall - now
        self.sleeps = 0      # how many sleeps a driver advanced it by (see test_core_shared_steps._tick)

    def monotonic(self) -> float:
        return self.now

    def time(self) -> float:
        return self.now + self.wall_offset


def client_error(code: str, status: int, retries: int = 0, item: Optional[Dict[str, Any]] = None,
                 operation: str = 'UpdateItem') -> ClientError:
    response: Dict[str, Any] = {'Error': {'Code': code, 'Message': 'scripted'},
                                'ResponseMetadata': {'HTTPStatusCode': status, 'RetryAttempts': retries}}
    if item is not None:
        response['Item'] = {name: {'S': value} for name, value in item.items()}
    return ClientError(response, operation)


def row(version: str, owner: str = 'someone') -> Dict[str, Any]:
    return {'lock_key': 'k', 'sort_key': '-', 'owner_name': owner, 'record_version_number': version,
            'lease_duration': LEASE, 'expiry_time': 1_700_003_600}


# Answers, by name: what DynamoDB (or the network) can do to one conditional write.
THROTTLED = Failed(client_error('ProvisionedThroughputExceededException', 400), False, Reason.THROTTLED)
THROTTLED_AFTER_RETRIES = judge_error(client_error('ProvisionedThroughputExceededException', 400, retries=3))
SERVER_ERROR = judge_error(client_error('InternalServerError', 500))
LOST_ANSWER = judge_error(ReadTimeoutError(endpoint_url='http://x'))
UNREACHABLE = judge_error(EndpointConnectionError(endpoint_url='http://x'))


@dataclasses.dataclass
class Run:
    """The effects a protocol produced and its result (or the exception it raised)."""

    calls: List[Any]
    events: List[Kind]
    sleeps: List[float]
    unregistered: List[Any]
    result: Any = None
    error: Optional[BaseException] = None


def drive(protocol: Any, answer: Callable[[Any], Any], woken: bool = False, clock: Optional[FakeClock] = None,
          sleep_advances: bool = True) -> Run:
    """Run ``protocol``, answering each Call with ``answer(request)``; sleeps advance ``clock``."""
    run = Run([], [], [], [])
    value: Any = None
    while True:
        try:
            effect = protocol.send(value)
        except StopIteration as done:
            run.result = done.value
            return run
        except DynamoDBLockError as error:
            run.error = error
            return run
        value = None
        if isinstance(effect, Call):
            run.calls.append(effect.request)
            value = answer(effect.request)
        elif isinstance(effect, Emit):
            run.events.append(effect.event.kind)
        elif isinstance(effect, Sleep):
            run.sleeps.append(effect.seconds)
            if clock is not None and sleep_advances:
                clock.now += effect.seconds
            value = woken
        elif isinstance(effect, Unregister):
            run.unregistered.append(effect.lock)
        else:
            raise AssertionError(f'unexpected effect {effect!r}')


def without_attempts(events: List[Kind]) -> List[Kind]:
    """The events but the per-attempt ones (for metrics, logged at DEBUG)."""
    return [event for event in events if event is not Kind.ACQUIRE_ATTEMPT]


def scripted(*answers: Any) -> Callable[[Any], Any]:
    """Answer calls in order; an answer may be a function of the request."""
    queue = list(answers)

    def answer(request: Any) -> Any:
        assert queue, f'an unexpected call: {request.operation}'
        next_answer = queue.pop(0)
        return next_answer(request) if callable(next_answer) else next_answer

    return answer


# --------------------------------------------------------------------------------------------
# Classifying errors
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize('error, kind, maybe_applied, reason', [
    pytest.param(client_error('ConditionalCheckFailedException', 400, item=row('v1')), Refused, None, None,
                 id='condition-failed'),
    pytest.param(client_error('ProvisionedThroughputExceededException', 400), Failed, False, Reason.THROTTLED,
                 id='throttled-first-attempt'),
    pytest.param(client_error('ProvisionedThroughputExceededException', 400, retries=2), Failed, True,
                 Reason.THROTTLED, id='throttled-after-retries'),
    pytest.param(client_error('InternalServerError', 500), Failed, True, Reason.UNREACHABLE, id='5xx'),
    pytest.param(client_error('ResourceNotFoundException', 400), Failed, False, Reason.TABLE_NOT_FOUND,
                 id='no-table'),
    pytest.param(client_error('ValidationException', 400), Failed, False, Reason.VALIDATION, id='validation'),
    pytest.param(client_error('AccessDeniedException', 400), Failed, False, Reason.ACCESS_DENIED, id='denied'),
    pytest.param(ReadTimeoutError(endpoint_url='x'), Failed, True, Reason.UNREACHABLE, id='read-timeout'),
    pytest.param(EndpointConnectionError(endpoint_url='x'), Failed, True, Reason.UNREACHABLE, id='refused-conn'),
    pytest.param(ParamValidationError(report='bad'), Failed, False, Reason.OTHER, id='never-sent'),
])
def test_errors_are_classified(error: BaseException, kind: type, maybe_applied: Optional[bool],
                               reason: Optional[str]) -> None:
    answer = judge_error(error)
    assert type(answer) is kind
    if isinstance(answer, Failed):
        assert (answer.maybe_applied, answer.reason) == (maybe_applied, reason)
        assert answer.error is error
    else:
        assert answer.item == row('v1') and not answer.retried


def test_a_condition_failure_after_retries_is_marked_retried() -> None:
    answer = judge_error(client_error('ConditionalCheckFailedException', 400, retries=1, item=row('v2')))
    assert isinstance(answer, Refused) and answer.retried and answer.item == row('v2')


# --------------------------------------------------------------------------------------------
# Renewals: every answer in every held state
# --------------------------------------------------------------------------------------------

def held_state(status: str = Status.LOCKED, unconfirmed: Sequence[str] = (), release_maybe_applied: bool = False,
               confirmed_ago: float = 5.0, now: float = 1000.0) -> LockState:
    state = LockState('v-current', 1_700_003_600, now - confirmed_ago, LEASE)
    state.status = status
    for version in unconfirmed:
        state.remember_unconfirmed(version)
    if release_maybe_applied:
        state.note_release_maybe_applied()
    return state


RENEWAL = Renewal('k', '-', ['v-current'], 'v-new', 1_700_007_200)


@pytest.mark.parametrize('status', [Status.LOCKED, Status.IN_DANGER])
@pytest.mark.parametrize('answer, unconfirmed, release_maybe, confirmed_ago, verdict, final_status, loss', [
    pytest.param(Applied(), (), False, 5, RenewalVerdict.RENEWED, Status.LOCKED, None, id='applied'),
    pytest.param(Refused(row('v-new')), (), False, 5, RenewalVerdict.LANDED_UNANSWERED, Status.LOCKED, None,
                 id='refused-by-our-own-new-version'),
    pytest.param(Refused(row('v-old-unconfirmed')), ('v-old-unconfirmed',), False, 5,
                 RenewalVerdict.ADOPTED_EARLIER, None, None, id='refused-by-an-earlier-unconfirmed-renewal'),
    pytest.param(Refused(row('v-thief', 'thief')), (), False, 5, RenewalVerdict.STOLEN, Status.INVALID,
                 Reason.TAKEN_OVER, id='refused-by-a-foreign-row'),
    pytest.param(Refused(None), (), False, 5, RenewalVerdict.STOLEN, Status.INVALID, Reason.ROW_GONE,
                 id='row-gone'),
    pytest.param(Refused(row('v-next', 'next')), (), True, 5, RenewalVerdict.RELEASED_EARLIER, Status.RELEASED,
                 None, id='foreign-row-after-our-unanswered-release-within-lease'),
    pytest.param(Refused(None), (), True, 40, RenewalVerdict.RELEASED_EARLIER, Status.RELEASED, None,
                 id='row-gone-after-our-unanswered-release'),
    pytest.param(Refused(row('v-thief', 'thief')), (), True, 40, RenewalVerdict.STOLEN, Status.INVALID,
                 Reason.TAKEN_OVER, id='foreign-row-after-our-unanswered-release-past-lease'),
    pytest.param(THROTTLED, (), False, 5, RenewalVerdict.FAILED, None, None, id='throttled'),
    pytest.param(THROTTLED_AFTER_RETRIES, (), False, 5, RenewalVerdict.FAILED, None, None, id='retried'),
    pytest.param(SERVER_ERROR, (), False, 5, RenewalVerdict.FAILED, None, None, id='5xx'),
    pytest.param(LOST_ANSWER, (), False, 5, RenewalVerdict.FAILED, None, None, id='lost-answer'),
])
def test_renewal_answers(status: str, answer: Any, unconfirmed: Sequence[str], release_maybe: bool,
                         confirmed_ago: float, verdict: RenewalVerdict, final_status: Optional[str],
                         loss: Optional[str]) -> None:
    now = 1000.0
    state = held_state(status, unconfirmed, release_maybe, confirmed_ago, now)
    result = state.settle_renewal(RENEWAL, answer, attempt_started=now - 0.01, now=now)
    assert result.verdict is verdict
    assert state.status == (final_status or status)
    if verdict in (RenewalVerdict.RENEWED, RenewalVerdict.LANDED_UNANSWERED):
        assert (state.version, state.expiry_time, state.last_confirmed) == ('v-new', 1_700_007_200, now - 0.01)
        assert result.recovered == (status == Status.IN_DANGER)
        assert state.unconfirmed == []
    elif verdict is RenewalVerdict.ADOPTED_EARLIER:
        assert state.version == 'v-old-unconfirmed' and state.unconfirmed == []
        assert state.last_confirmed == now - confirmed_ago   # adopting is not a confirmation
    elif verdict is RenewalVerdict.FAILED:
        assert state.version == 'v-current' and state.last_confirmed == now - confirmed_ago
        # A write that may have landed unanswered is remembered, so it is never taken for a theft.
        assert state.unconfirmed == (['v-new'] if answer.maybe_applied else [])
    assert (state.loss.reason if state.loss else None) == loss


def test_a_renewal_is_conditioned_on_every_version_that_may_be_ours() -> None:
    state = held_state(unconfirmed=[f'u{index}' for index in range(30)])
    renewal = state.next_renewal('v-new', 1, 'k', '-')
    assert renewal is not None
    assert renewal.expected_versions[0] == 'v-current'
    assert renewal.expected_versions[1:] == [f'u{index}' for index in range(10, 30)]   # the newest 20
    assert state.is_ours('u0') and not state.is_ours('someone-else')


@pytest.mark.parametrize('status', [Status.PENDING, Status.RELEASED, Status.INVALID])
def test_a_lock_not_held_is_not_renewed(status: str) -> None:
    assert held_state(status).next_renewal('v-new', 1, 'k', '-') is None


@pytest.mark.parametrize('status, confirmed_ago, flagged', [
    (Status.LOCKED, 20.0, False), (Status.LOCKED, 20.5, True), (Status.IN_DANGER, 50, False),
    (Status.RELEASED, 50, False), (Status.INVALID, 50, False),
])
def test_danger_check(status: str, confirmed_ago: float, flagged: bool) -> None:
    state = held_state(status, confirmed_ago=confirmed_ago)
    assert (state.mark_in_danger(1000.0, 20.0) is not None) == flagged
    assert state.status == (Status.IN_DANGER if flagged else status)


@pytest.mark.parametrize('confirmed_ago, expected', [(0, Status.LOCKED), (19.9, Status.LOCKED),
                                                     (20.1, Status.IN_DANGER), (31, Status.IN_DANGER)])
def test_status_read_now_accounts_for_the_time_since_the_last_confirmed_renewal(confirmed_ago: float,
                                                                               expected: str) -> None:
    state = held_state(confirmed_ago=confirmed_ago)
    assert state.status_at(1000.0, safe_period=20.0) == expected
    assert state.status == Status.LOCKED                       # reading changes nothing
    assert state.lease_remaining(1000.0) == pytest.approx(LEASE - confirmed_ago)


# --------------------------------------------------------------------------------------------
# Releases
# --------------------------------------------------------------------------------------------

@dataclasses.dataclass
class FakeLock:
    """What the protocols read of a lock object."""

    _state: LockState
    partition_key: str = 'k'
    sort_key: str = '-'
    unique_identifier: str = 'k|-'
    additional_attributes: Dict[str, Any] = dataclasses.field(default_factory=lambda: {'purpose': 'x'})
    _clock: Any = dataclasses.field(default_factory=FakeClock)
    lock_existing_item: bool = False


RELEASE_SETTINGS = ReleaseSettings(SCHEMA, 3600.0)


def run_release(*answers: Any, state: Optional[LockState] = None, clock: Optional[FakeClock] = None,
                settings: ReleaseSettings = RELEASE_SETTINGS) -> Run:
    state = state if state is not None else held_state()
    clock = clock or FakeClock()
    return drive(release(settings, FakeLock(state), clock), scripted(*answers), clock=clock)


def own_release_of(request: Any) -> Dict[str, Any]:
    """The released row our own release wrote (for answers that echo it back)."""
    return dict(row(request.params['ExpressionAttributeValues'][':new_version']), released_at=1)


FREE = 'update_item'        # releasing keeps the row, marked released, for its fencing token


@pytest.mark.parametrize('answers, outcome, operations', [
    pytest.param([Applied()], ReleaseOutcome.RELEASED, [FREE], id='applied'),
    pytest.param([lambda request: Refused(own_release_of(request), retried=True)], ReleaseOutcome.RELEASED, [FREE],
                 id='refused-by-our-own-released-row'),
    pytest.param([Refused(None)], ReleaseOutcome.ROW_GONE, [FREE], id='row-gone'),
    pytest.param([Refused(dict(row('v-op'), released_at=1))], ReleaseOutcome.ROW_GONE, [FREE],
                 id='released-by-someone-else'),
    pytest.param([Refused(row('v-thief'))], ReleaseOutcome.STOLEN, [FREE], id='foreign-row'),
    pytest.param([Refused(row('v-next'), retried=True)], ReleaseOutcome.MET_NEXT_HOLDER, [FREE],
                 id='retried-met-the-next-holder-within-lease'),
    pytest.param([THROTTLED], ReleaseOutcome.FAILED, [FREE], id='throttled-no-read'),
    pytest.param([SERVER_ERROR, Applied({'Item': row('v-current')})], ReleaseOutcome.FAILED,
                 [FREE, 'get_item'], id='5xx-and-our-row-is-still-there'),
    pytest.param([LOST_ANSWER, Applied({})], ReleaseOutcome.RELEASED, [FREE, 'get_item'],
                 id='lost-answer-and-the-row-is-gone'),
    pytest.param([LOST_ANSWER, Applied({'Item': dict(row('v-x'), released_at=1)})], ReleaseOutcome.RELEASED,
                 [FREE, 'get_item'], id='lost-answer-and-the-row-is-released'),
    pytest.param([LOST_ANSWER, Applied({'Item': row('v-next')})], ReleaseOutcome.RELEASED,
                 [FREE, 'get_item'], id='lost-answer-and-a-next-holder-within-lease'),
    pytest.param([LOST_ANSWER, UNREACHABLE], ReleaseOutcome.FAILED, [FREE, 'get_item'],
                 id='lost-answer-and-the-read-fails'),
])
def test_release_answers(answers: List[Any], outcome: ReleaseOutcome, operations: List[str]) -> None:
    run = run_release(*answers)
    assert run.result.outcome is outcome
    assert [request.operation for request in run.calls] == operations


def expected_versions(request: Any) -> List[str]:
    values = request.params['ExpressionAttributeValues']
    return [value for name, value in values.items() if name.startswith(':expected_version_')]


@pytest.mark.parametrize('answer, released_before, released', [
    pytest.param(Refused(None), False, False, id='gone-at-the-first-attempt'),
    pytest.param(Refused(None, retried=True), False, True, id='gone-after-a-retry-of-our-own-delete'),
    pytest.param(Refused(dict(row('v-op'), released_at=1)), True, True, id='gone-after-our-release-that-failed'),
])
def test_a_row_found_gone_was_freed_by_this_release_only_when_an_earlier_attempt_of_it_explains_it(
        answer: Any, released_before: bool, released: bool) -> None:
    state = held_state()
    if released_before:
        state.note_release_maybe_applied()
    run = run_release(answer, state=state)
    assert run.result.outcome is ReleaseOutcome.ROW_GONE
    assert release_verdict(run.result, True, SCHEMA, 'k|-').released is released


def test_release_names_every_version_that_may_be_ours_and_retries_an_older_one() -> None:
    state = held_state(unconfirmed=[f'u{index}' for index in range(25)])
    run = run_release(Refused(row('u2')), Applied(), state=state)
    first, second = run.calls
    assert set(expected_versions(first)) == {'v-current', *[f'u{i}' for i in range(5, 25)]}
    assert expected_versions(second) == ['u2']
    assert run.result.outcome is ReleaseOutcome.RELEASED


def test_a_release_keeps_the_row_with_its_token_and_a_published_client_can_take_it() -> None:
    run = run_release(Applied())
    (write,) = run.calls
    expression = readable_expression(write.params)
    values = write.params['ExpressionAttributeValues']
    assert 'fencing_token' not in attribute_names_in(write.params)      # kept as it is
    assert values[':zero'] == 0                              # lease 0: published clients take it after a poll
    assert {'released_at', 'acquisition_id', 'purpose'} <= attribute_names_in(write.params)
    assert 'REMOVE' in expression and expression.split('REMOVE ')[1].split(',')[0] == 'acquisition_id'


def test_a_client_that_keeps_no_released_rows_deletes_them() -> None:
    run = run_release(Applied(), settings=ReleaseSettings(SCHEMA, 3600.0, keep_released_rows=False))
    assert [request.operation for request in run.calls] == ['delete_item']


def test_a_foreign_row_after_a_lost_release_answer_past_the_lease_is_a_theft() -> None:
    clock = FakeClock()
    state = held_state(confirmed_ago=40, now=clock.now)
    run = run_release(LOST_ANSWER, Applied({'Item': row('v-thief')}), state=state, clock=clock)
    assert run.result.outcome is ReleaseOutcome.STOLEN
    assert state.release_maybe_applied       # a later heartbeat must not report it as stolen


@pytest.mark.parametrize('outcome, best_effort, final_status, code, released', [
    (ReleaseOutcome.RELEASED, True, Status.RELEASED, None, True),
    (ReleaseOutcome.RELEASED, False, Status.RELEASED, None, True),
    (ReleaseOutcome.ROW_GONE, True, Status.RELEASED, None, False),        # expired or force-released
    (ReleaseOutcome.ROW_GONE, False, Status.INVALID, DynamoDBLockError.LOCK_STOLEN, False),  # strict: said
    (ReleaseOutcome.MET_NEXT_HOLDER, False, Status.RELEASED, None, True),  # an earlier attempt of ours freed it
    (ReleaseOutcome.STOLEN, True, Status.INVALID, None, False),
    (ReleaseOutcome.STOLEN, False, Status.INVALID, DynamoDBLockError.LOCK_STOLEN, False),
    (ReleaseOutcome.FAILED, True, Status.RELEASED, None, False),          # forgotten; taken over after its lease
    (ReleaseOutcome.FAILED, False, None, DynamoDBLockError.UNKNOWN, False),  # still held, so it can be retried
])
def test_what_a_release_tells_the_caller(outcome: ReleaseOutcome, best_effort: bool, final_status: Optional[str],
                                         code: Optional[str], released: bool) -> None:
    result = ReleaseResult(outcome, row('v-thief', 'thief') if outcome is ReleaseOutcome.STOLEN else None,
                           SERVER_ERROR if outcome is ReleaseOutcome.FAILED else None)
    verdict = release_verdict(result, best_effort, SCHEMA, 'k|-')
    assert verdict.final_status == final_status
    assert (verdict.error.code if verdict.error else None) == code
    assert verdict.released is released
    if code == DynamoDBLockError.LOCK_STOLEN and outcome is ReleaseOutcome.STOLEN:
        assert 'thief' in verdict.error.message and verdict.error.reason == Reason.TAKEN_OVER
    if code == DynamoDBLockError.LOCK_STOLEN and outcome is ReleaseOutcome.ROW_GONE:
        assert 'row was gone' in verdict.error.message and verdict.error.reason == Reason.ROW_GONE


@pytest.mark.parametrize('status, owned, best_effort, goes_ahead, code', [
    (Status.LOCKED, True, True, True, None),
    (Status.IN_DANGER, True, False, True, None),
    (Status.RELEASED, True, False, False, None),                          # releasing twice: a no-op
    (Status.PENDING, True, False, False, None),
    (Status.INVALID, True, True, False, None),                            # lost: best effort is silent
    (Status.INVALID, True, False, False, DynamoDBLockError.LOCK_STOLEN),  # lost: strict says so
    (Status.LOCKED, False, True, False, None),
    (Status.LOCKED, False, False, False, DynamoDBLockError.LOCK_NOT_OWNED),
])
def test_release_precheck(status: str, owned: bool, best_effort: bool, goes_ahead: bool,
                          code: Optional[str]) -> None:
    state = held_state(status)
    verdict = precheck_release(state, owned, best_effort, 'k|-', 'me')
    assert (verdict is None) == goes_ahead
    assert (verdict.error.code if verdict is not None and verdict.error else None) == code


# --------------------------------------------------------------------------------------------
# Acquiring
# --------------------------------------------------------------------------------------------

def attempt(retry_timeout: float = 0.0, retry_period: float = 5.0,
            max_clock_skew: Optional[float] = None) -> AcquireAttempt:
    template = SCHEMA.lock_item('k', '-', 'me', LEASE, '', 0)
    return AcquireAttempt(SCHEMA, 'k', '-', 'k|-', template, retry_period, retry_timeout, 3600.0, LEASE,
                          max_clock_skew=max_clock_skew)


def own_row_of(request: Any) -> Dict[str, Any]:
    """The row an acquiring write would have written (for answers that echo it back)."""
    values = request.params['ExpressionAttributeValues']
    written = assigned_values(request.params)
    written['fencing_token'] = values[':token_floor'] + 1
    return {**request.params['Key'], **written}


WRITE = 'update_item'       # acquiring is an UpdateItem: it carries the fencing token forward


def run_acquire(*answers: Any, retry_timeout: float = 0.0, clock: Optional[FakeClock] = None,
                closed: bool = False) -> Run:
    clock = clock or FakeClock()
    return drive(acquire(attempt(retry_timeout), clock, lambda: closed), scripted(*answers), clock=clock)


def test_an_uncontended_acquire_is_one_conditional_write_that_returns_the_token() -> None:
    run = run_acquire(Applied({'Attributes': {'fencing_token': 42}}))
    assert isinstance(run.result, Written) and run.result.item['fencing_token'] == 42
    (write,) = run.calls
    assert write.operation == WRITE
    assert readable_expression(write.params, 'ConditionExpression') == ('attribute_not_exists(lock_key) OR '
                                                                     'attribute_exists(released_at)')
    assert 'if_not_exists(fencing_token, :token_floor) + :one' in write.params['UpdateExpression']
    assert write.params['ReturnValuesOnConditionCheckFailure'] == 'ALL_OLD'
    assert write.params['ReturnValues'] == 'ALL_NEW'   # the whole row: attributes a release left come back
    written = own_row_of(write)
    assert written['acquisition_id'] == written['record_version_number']


def test_the_token_floor_is_the_writers_clock_in_microseconds() -> None:
    clock = FakeClock(wall=1_700_000_000.5)
    run = run_acquire(Applied(), clock=clock)
    assert run.calls[0].params['ExpressionAttributeValues'][':token_floor'] == 1_700_000_000_500_000


def test_a_write_refused_by_its_own_row_was_ours() -> None:
    run = run_acquire(lambda request: Refused(own_row_of(request), retried=True))
    assert isinstance(run.result, Written) and len(run.calls) == 1
    assert run.result.item['fencing_token'] == run.calls[0].params['ExpressionAttributeValues'][':token_floor'] + 1


def test_a_held_lock_with_no_time_to_wait_times_out_naming_the_holder() -> None:
    run = run_acquire(Refused(row('v-holder', 'holder')), Applied({'Item': row('v-holder', 'holder')}))
    assert isinstance(run.result, TimedOut) and run.result.blocking['owner_name'] == 'holder'


def test_an_engine_that_ignores_all_old_is_read_instead() -> None:
    run = run_acquire(Refused(None), Applied({'Item': row('v-holder')}))
    assert [request.operation for request in run.calls][:2] == [WRITE, 'get_item']


@pytest.mark.parametrize('failure', [THROTTLED, judge_error(client_error('ResourceNotFoundException', 400))])
def test_a_write_that_surely_failed_is_unknown_without_a_read(failure: Failed) -> None:
    run = run_acquire(failure)
    assert isinstance(run.error, DynamoDBLockError) and run.error.code == DynamoDBLockError.UNKNOWN
    assert run.error.__cause__ is failure.error and run.error.reason == failure.reason
    assert len(run.calls) == 1


def test_a_write_whose_answer_was_lost_and_landed_is_acquired() -> None:
    landed: Dict[str, Any] = {}

    def lose(request: Any) -> Any:
        landed.update(own_row_of(request))
        return LOST_ANSWER

    run = run_acquire(lose, lambda request: Applied({'Item': dict(landed)}))
    assert isinstance(run.result, Written) and run.result.item['fencing_token'] == landed['fencing_token']
    assert [request.operation for request in run.calls] == [WRITE, 'get_item']


def test_a_write_whose_answer_was_lost_and_did_not_land_is_unknown() -> None:
    run = run_acquire(LOST_ANSWER, Applied({}))
    assert run.error.code == DynamoDBLockError.UNKNOWN and without_attempts(run.events) == []


def test_an_unreachable_engine_fails_once_without_a_cleanup_warning() -> None:
    run = run_acquire(UNREACHABLE, UNREACHABLE, UNREACHABLE)
    assert run.error.code == DynamoDBLockError.UNKNOWN and run.error.reason == Reason.UNREACHABLE
    assert without_attempts(run.events) == [Kind.ORPHAN_UNVERIFIED]      # an INFO line, not a warning
    assert [request.operation for request in run.calls] == [WRITE, 'get_item', FREE]


@pytest.mark.parametrize('cleanup, events', [(Applied(), []), (Refused(None), []),
                                             (THROTTLED, [Kind.ORPHAN_CLEANUP_FAILED])])
def test_when_the_check_read_fails_a_write_that_may_have_landed_is_freed(cleanup: Any,
                                                                          events: List[Kind]) -> None:
    run = run_acquire(LOST_ANSWER, SERVER_ERROR, cleanup)
    assert run.error.code == DynamoDBLockError.UNKNOWN
    write, _, free = run.calls
    assert free.operation == FREE
    assert expected_versions(free) == [own_row_of(write)['record_version_number']]
    assert without_attempts(run.events) == events


def test_takeover_after_the_holders_version_stays_the_same_for_its_lease() -> None:
    clock = FakeClock()
    holder = row('v-dead', 'dead')
    answers = [Refused(holder)] + [Applied({'Item': holder})] * 7 + [Applied()]
    run = run_acquire(*answers, retry_timeout=60.0, clock=clock)
    assert isinstance(run.result, Written) and run.result.replaced == holder
    takeover = run.calls[-1]
    assert expected_versions(takeover) == ['v-dead']
    assert Kind.TAKING_OVER in run.events
    assert run.sleeps == [5.0] * 6                          # 30 s of an unchanged version, polled every 5 s


def test_a_holder_that_renews_is_never_taken_over() -> None:
    clock = FakeClock()
    versions = iter(range(100))
    run = drive(acquire(attempt(retry_timeout=100.0), clock, lambda: False),
                lambda request: (Refused(row(f'v{next(versions)}')) if request.operation == WRITE
                                 else Applied({'Item': row(f'v{next(versions)}')})), clock=clock)
    assert isinstance(run.result, TimedOut)
    assert [request.operation for request in run.calls].count(WRITE) == 1


def test_a_release_in_this_client_goes_straight_to_the_write() -> None:
    run = drive(acquire(attempt(retry_timeout=60.0), FakeClock(), lambda: False),
                scripted(Refused(row('v-holder')), Applied()), woken=True, clock=FakeClock())
    assert isinstance(run.result, Written)
    assert [request.operation for request in run.calls] == [WRITE, WRITE]


def test_a_closed_client_acquires_nothing() -> None:
    run = run_acquire(closed=True)
    assert run.error.code == DynamoDBLockError.CLIENT_SHUTDOWN and run.calls == []


@pytest.mark.parametrize('unchanged_for, lease, expiry_offset, abandoned', [
    (29.9, 30, 3600, False), (30.0, 30, 3600, True), (0, 30, -1, True),     # TTL passed: at once
    (5.0, 2.5, 3600, True),                                                 # the row's own lease counts
])
def test_is_abandoned(unchanged_for: float, lease: float, expiry_offset: float, abandoned: bool) -> None:
    wall_now = 1_700_000_000.0
    the_row = dict(row('v'), lease_duration=lease, expiry_time=wall_now + expiry_offset)
    assert is_abandoned(SCHEMA, the_row, unchanged_for, wall_now, LEASE) == abandoned


# --------------------------------------------------------------------------------------------
# Guarded writes
# --------------------------------------------------------------------------------------------

DATA_PUT = {'Put': {'TableName': 'data', 'Item': {'id': 'x', 'n': 1}}}


def guarded_lock(status: str = Status.LOCKED) -> FakeLock:
    state = held_state(status)
    state.acquisition_id = 'acq-1'
    state.fencing_token = 7
    return FakeLock(state)


def cancelled(*codes: str, lock_row: Optional[Dict[str, Any]] = None) -> Failed:
    reasons: List[Dict[str, Any]] = [{'Code': code} for code in codes]
    if lock_row is not None:
        reasons[-1]['Item'] = {name: {'S': str(value)} for name, value in lock_row.items()}
    error = ClientError({'Error': {'Code': 'TransactionCanceledException', 'Message': 'scripted'},
                         'CancellationReasons': reasons,
                         'ResponseMetadata': {'HTTPStatusCode': 400, 'RetryAttempts': 0}}, 'TransactWriteItems')
    answer = judge_error(error)
    assert isinstance(answer, Failed)
    return answer


def run_guard(*answers: Any, lock: Optional[FakeLock] = None, token: Optional[str] = None) -> Run:
    lock = lock or guarded_lock()
    return drive(guarded_write(SCHEMA, lock, [dict(DATA_PUT)], {}, token), scripted(*answers), clock=FakeClock())


def tokens(run: Run) -> List[str]:
    return [request.params['ClientRequestToken'] for request in run.calls]


def test_a_guarded_write_is_one_transaction_with_the_lock_check_last() -> None:
    run = run_guard(Applied({'ok': True}))
    assert run.result == {'ok': True}
    (call,) = run.calls
    assert call.operation == 'transact_write_items'
    data, check = call.params['TransactItems']
    assert data == DATA_PUT
    assert check['ConditionCheck']['Key'] == {'lock_key': 'k', 'sort_key': '-'}
    assert check['ConditionCheck']['ExpressionAttributeValues'] == {':acquisition': 'acq-1'}
    assert check['ConditionCheck']['ReturnValuesOnConditionCheckFailure'] == 'ALL_OLD'
    assert tokens(run)[0]


@pytest.mark.parametrize('lock_row, reason', [(row('v-thief', 'thief'), Reason.TAKEN_OVER),
                                              (dict(row('v-op'), released_at=1), Reason.ROW_GONE)])
def test_a_guarded_write_of_a_lost_lock_writes_nothing_and_names_the_holder(lock_row: Dict[str, Any],
                                                                              reason: str) -> None:
    lock = guarded_lock()
    run = run_guard(cancelled('None', 'ConditionalCheckFailed', lock_row=lock_row), lock=lock)
    assert run.error.code == DynamoDBLockError.LOCK_STOLEN and run.error.reason == reason
    assert len(run.calls) == 1
    assert lock._state.status == Status.INVALID and run.unregistered == [lock]
    assert Kind.STOLEN in run.events
    if reason == Reason.TAKEN_OVER:
        assert run.error.holder['owner_name'] == 'thief' and 'thief' in run.error.message


def test_the_applications_own_condition_failure_is_its_own_error() -> None:
    lock = guarded_lock()
    answer = cancelled('ConditionalCheckFailed', 'None')
    with pytest.raises(ClientError) as raised:
        drive_raising(guarded_write(SCHEMA, lock, [dict(DATA_PUT)], {}, None), answer)
    assert raised.value is answer.error
    assert lock._state.status == Status.LOCKED


def drive_raising(protocol: Any, answer: Any) -> None:
    """Drive a protocol whose first call gets ``answer``, letting any exception through."""
    effect = protocol.send(None)
    assert isinstance(effect, Call)
    protocol.send(answer)


@pytest.mark.parametrize('reason_code', ['TransactionConflict', 'ThrottlingError'])
def test_conflicts_and_throttling_are_retried_as_new_transactions_never_as_a_lost_lock(reason_code: str) -> None:
    lock = guarded_lock()
    run = run_guard(cancelled('None', reason_code), cancelled(reason_code, 'None'), Applied({}), lock=lock)
    assert run.error is None and run.result == {}
    assert len(set(tokens(run))) == 3          # nothing was applied: each attempt is a new transaction
    assert run.sleeps == [0.025, 0.05]
    assert lock._state.status == Status.LOCKED and Kind.STOLEN not in run.events


def test_endless_conflicts_end_in_unknown_not_in_a_lost_lock() -> None:
    lock = guarded_lock()
    run = run_guard(*[cancelled('TransactionConflict', 'None')] * 8, lock=lock)
    assert run.error.code == DynamoDBLockError.UNKNOWN and 'conflicting' in run.error.message
    assert lock._state.status == Status.LOCKED


def test_a_lost_answer_is_sent_again_with_the_same_client_request_token() -> None:
    run = run_guard(LOST_ANSWER, SERVER_ERROR, Applied({}), token='my-token')
    assert run.result == {} and tokens(run) == ['my-token'] * 3


def test_an_answer_lost_three_times_is_unknown_and_says_the_token_is_safe_to_reuse() -> None:
    run = run_guard(LOST_ANSWER, LOST_ANSWER, LOST_ANSWER)
    assert run.error.code == DynamoDBLockError.UNKNOWN
    assert tokens(run)[0] in run.error.message and len(set(tokens(run))) == 1


@pytest.mark.parametrize('status, code', [(Status.RELEASED, DynamoDBLockError.LOCK_NOT_OWNED),
                                          (Status.PENDING, DynamoDBLockError.LOCK_NOT_OWNED),
                                          (Status.INVALID, DynamoDBLockError.LOCK_STOLEN)])
def test_a_lock_known_not_held_writes_nothing(status: str, code: str) -> None:
    run = run_guard(lock=guarded_lock(status))
    assert run.error.code == code and run.calls == []


@pytest.mark.parametrize('actions, error, words', [
    ([], ValueError, 'at least one'),
    ('Put', TypeError, 'list of actions'),
    ([{'Put': {'TableName': 'data', 'Item': {'id': 'x'}}}] * 100, ValueError, 'at most 99'),
    ([{'Put': {'TableName': 'data'}}], TypeError, 'Item'),
    ([{'Upsert': {'TableName': 'data', 'Key': {}}}], TypeError, 'one key of'),
    ([{'Update': {'Key': {'id': 'x'}}}], TypeError, 'TableName'),
    ([{'Delete': {'TableName': 'data', 'Key': {'id': 'x'}, 'ReturnValues': 'ALL_OLD'}}], ValueError, 'ReturnValues'),
    ([{'Update': {'TableName': 'locks', 'Key': {'lock_key': 'k', 'sort_key': '-'}, 'UpdateExpression': 'SET a = :a'}}],
     ValueError, 'lock row itself'),
    ([{'Put': {'TableName': 'data', 'Item': {'id': 'x', 'blob': b'x' * (4 * 1024 * 1024)}}}], ValueError, '4194304'),
])
def test_guarded_writes_are_checked_before_anything_is_sent(actions: Any, error: type, words: str) -> None:
    with pytest.raises(error, match=words):
        check_actions(SCHEMA, 'k', '-', actions)


def test_other_rows_of_the_lock_table_may_be_written() -> None:
    actions = check_actions(SCHEMA, 'k', '-', [{'Put': {'TableName': 'locks',
                                                         'Item': {'lock_key': 'k', 'sort_key': 'data'}}}])
    assert len(actions) == 1


def test_a_single_put_update_or_delete_becomes_one_action() -> None:
    actions, options = single_action('Update', {'TableName': 'data', 'Key': {'id': 'x'},
                                                'UpdateExpression': 'SET n = :n',
                                                'ExpressionAttributeValues': {':n': 2},
                                                'ReturnConsumedCapacity': 'TOTAL'})
    assert actions == [{'Update': {'TableName': 'data', 'Key': {'id': 'x'}, 'UpdateExpression': 'SET n = :n',
                                   'ExpressionAttributeValues': {':n': 2}}}]
    assert options == {'ReturnConsumedCapacity': 'TOTAL'}
    with pytest.raises(TypeError, match='ReturnValues'):
        single_action('Put', {'TableName': 'data', 'Item': {}, 'ReturnValues': 'ALL_OLD'})


def test_a_heartbeat_refused_by_a_transaction_in_progress_is_sent_again() -> None:
    conflict = judge_error(client_error('TransactionConflictException', 400))
    lock = FakeLock(held_state())
    settings = HeartbeatSettings(SCHEMA, 5.0, 20.0, 3600.0, -1, 1)
    run = drive(renew_one(settings, lock, FakeClock()), scripted(conflict, Applied()), clock=FakeClock())
    assert run.result.verdict is RenewalVerdict.RENEWED and len(run.calls) == 2 and run.sleeps == [0.05]


# --------------------------------------------------------------------------------------------
# What a client has seen, kept across its acquisitions
# --------------------------------------------------------------------------------------------

def test_a_version_seen_again_keeps_the_time_it_was_first_seen_and_a_new_one_starts_over() -> None:
    seen = Observations()
    assert seen.first_seen('k|-', 'v1', 10.0) == 10.0
    assert seen.first_seen('k|-', 'v1', 25.0) == 10.0
    assert seen.first_seen('k|-', 'v2', 30.0) == 30.0      # the holder renewed: watched afresh
    assert seen.first_seen('k|-', 'v1', 31.0) == 31.0      # only the latest version counts
    assert seen.first_seen('other|-', 'v1', 32.0) == 32.0  # per key
    seen.forget('k|-')
    assert seen.first_seen('k|-', 'v1', 40.0) == 40.0
    assert len(seen) == 2


def test_the_memory_is_bounded_and_forgets_the_least_recently_seen_key_first() -> None:
    seen = Observations(capacity=3)
    for index, key in enumerate(['a', 'b', 'c']):
        seen.first_seen(key, 'v', float(index))
    seen.first_seen('a', 'v', 5.0)                         # 'a' seen again: now the most recent
    seen.first_seen('d', 'v', 6.0)                         # over capacity: 'b' goes
    assert len(seen) == 3
    assert seen.first_seen('a', 'v', 7.0) == 0.0
    assert seen.first_seen('b', 'v', 8.0) == 8.0           # forgotten: watched afresh (later, never sooner)


def test_the_default_bound_is_the_documented_one() -> None:
    seen = Observations()
    for index in range(1500):
        seen.first_seen(f'key-{index}', 'v', float(index))
    assert len(seen) == 1000


def one_try(clock: FakeClock, seen: Optional[Observations], holder: Callable[[], Dict[str, Any]],
            max_clock_skew: Optional[float] = None) -> Run:
    """One ``try_acquire_lock`` (retry_timeout 0) against the row ``holder()`` returns; a takeover
    write conditioned on the row's version is applied."""
    def answer(request: Any) -> Any:
        current = holder()
        if request.operation == WRITE and current['record_version_number'] in expected_versions(request):
            return Applied()
        return Refused(current) if request.operation == WRITE else Applied({'Item': current})

    return drive(acquire(attempt(0.0, max_clock_skew=max_clock_skew), clock, lambda: False, seen), answer,
                 clock=clock)


def tries_until_taken(clock: FakeClock, seen: Optional[Observations], holder: Callable[[], Dict[str, Any]],
                      tries: int, max_clock_skew: Optional[float] = None) -> Optional[int]:
    """Try once per second, up to ``tries`` times: the number of the try that took the lock over."""
    for number in range(1, tries + 1):
        run = one_try(clock, seen, holder, max_clock_skew)
        if isinstance(run.result, Written):
            return number
        assert isinstance(run.result, TimedOut) and run.sleeps == []
        clock.now += 1.0
    return None


@pytest.mark.parametrize('max_clock_skew', [None, 1.0])
def test_one_try_per_second_takes_a_dead_holder_over_once_its_version_stayed_the_same_for_its_lease(
        max_clock_skew: Optional[float]) -> None:
    clock = FakeClock()
    dead = dict(row('v-dead', 'dead'), lease_expiry=clock.time() + LEASE)
    seen = Observations()
    taken_at = tries_until_taken(clock, seen, lambda: dead, int(LEASE) + 5, max_clock_skew)
    assert taken_at is not None and taken_at <= LEASE + 2
    assert taken_at == LEASE + 1          # seen first at try 1, unchanged for the lease at try 31
    assert len(seen) == 0                 # acquired: the key is forgotten


def test_without_the_memory_each_try_starts_afresh_and_never_takes_over() -> None:
    clock = FakeClock()
    dead = row('v-dead', 'dead')          # its TTL is an hour away
    assert tries_until_taken(clock, None, lambda: dead, int(LEASE) * 3) is None


@pytest.mark.parametrize('max_clock_skew', [None, 1.0])
def test_a_holder_that_renews_between_tries_is_never_taken_over(max_clock_skew: Optional[float]) -> None:
    clock = FakeClock()
    renewals = iter(range(1000))

    def live() -> Dict[str, Any]:         # a new version, and a lease_expiry ahead, at every look
        return dict(row(f'v{next(renewals)}', 'live'), lease_expiry=clock.time() + LEASE)

    assert tries_until_taken(clock, Observations(), live, int(LEASE) * 4, max_clock_skew) is None


def test_a_holder_renewing_slower_than_the_tries_is_watched_from_its_latest_version() -> None:
    clock = FakeClock()
    versions = {'current': 'v0'}
    seen = Observations()
    holder = lambda: row(versions['current'], 'slow')   # noqa: E731
    assert tries_until_taken(clock, seen, holder, 20) is None     # 20 s of v0
    versions['current'] = 'v1'                                    # it renewed, then died
    taken_at = tries_until_taken(clock, seen, holder, int(LEASE) + 5)
    assert taken_at == LEASE + 1                                  # a whole lease from the first sight of v1


def test_a_waiting_acquire_goes_on_watching_from_what_an_earlier_try_saw() -> None:
    clock = FakeClock()
    dead = row('v-dead', 'dead')
    seen = Observations()
    assert tries_until_taken(clock, seen, lambda: dead, 20) is None     # tries at 0..19 s
    answers = [Refused(dead)] + [Applied({'Item': dead})] * 2 + [Applied()]
    run = drive(acquire(attempt(retry_timeout=60.0), clock, lambda: False, seen), scripted(*answers), clock=clock)
    assert isinstance(run.result, Written) and run.result.replaced == dead
    assert run.sleeps == [5.0, 5.0]                  # 20 + 10 s: the lease, counted from the first try
