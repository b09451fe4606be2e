"""Creating the lock table: what to ask for, and how an existing table is judged.

:func:`table_request` and :func:`judge_existing_table` are pure; :func:`creating_table` and
:func:`describing_table` are the steps of ``create_dynamodb_table`` and ``for_table``, written
once as generators of :class:`AdminCall`; :func:`run_admin` runs them on a boto3 client and
:func:`run_admin_async` on an aiobotocore one.
"""
from __future__ import annotations

import inspect
from typing import Any, Dict, Generator, List, Mapping, NamedTuple, Optional, Tuple

from botocore.exceptions import BotoCoreError, ClientError

from .._model import validation
from .._core.answers import error_code, reason_of
from .._core.stepper import Done, advance
from .._model.errors import DynamoDBLockError, Reason
from .observe import logger
from .._model.schema import Schema

#: The TTL attribute of the published layout.
DEFAULT_TTL_ATTRIBUTE_NAME = 'expiry_time'

__all__ = ['AdminCall', 'check_global_table', 'check_tags', 'create_was_retried', 'creating_table', 'describe_failed',
           'describe_key_schema', 'describing_table', 'for_table_arguments', 'judge_existing_table',
           'judge_retried_create',
           'lock_table_shape', 'needs_ttl_update', 'require_low_level_client', 'run_admin', 'run_admin_async',
           'table_request']


#: DynamoDB's key attribute types, as the lock table's partition key may have them.
KEY_TYPE_NAMES = {'S': 'string', 'N': 'number', 'B': 'binary'}

#: AWS's limits on a table's tags: how many, and the longest key and value (in characters).
MAX_TAGS = 50
MAX_TAG_KEY_LENGTH = 128
MAX_TAG_VALUE_LENGTH = 256


def check_tags(tags: object, argument: str = 'tags') -> List[Dict[str, str]]:
    """``tags`` (None, a mapping of key to value, or a list of ``{'Key': ..., 'Value': ...}``)
    as ``CreateTable``'s ``Tags``, checked against AWS's limits before any call.

    :param argument: how messages name the tags (``'--tag'`` for the command line).
    :raises TypeError, ValueError: naming ``argument``: a key that is empty, longer than 128
        characters, repeated or starting with ``aws:`` (reserved by AWS); a value that is not a
        string or is longer than 256 characters; more than 50 tags. The characters allowed
        are DynamoDB's to check (it refuses the whole ``CreateTable``, which then creates nothing).
    """
    if tags is None:
        return []
    if isinstance(tags, Mapping):
        pairs = list(tags.items())
    elif isinstance(tags, (list, tuple)):
        pairs = []
        for tag in tags:
            if not isinstance(tag, Mapping) or set(tag) != {'Key', 'Value'}:
                raise TypeError(f"{argument} must be a mapping of key to value or a list of {{'Key': ..., "
                                f"'Value': ...}} mappings, got the element {tag!r}")
            pairs.append((tag['Key'], tag['Value']))
    else:
        raise TypeError(f"{argument} must be a mapping of key to value or a list of {{'Key': ..., 'Value': ...}} "
                        f'mappings, not {type(tags).__name__}')
    if len(pairs) > MAX_TAGS:
        raise ValueError(f'{argument}: a table takes at most {MAX_TAGS} tags, got {len(pairs)}')
    seen = set()
    checked = []
    for key, value in pairs:
        if not isinstance(key, str) or not isinstance(value, str):
            raise TypeError(f'{argument}: tag keys and values are str, got {key!r}: {value!r}')
        if not key:
            raise ValueError(f'{argument}: a tag key may not be empty (value {value!r})')
        if len(key) > MAX_TAG_KEY_LENGTH:
            raise ValueError(f'{argument}: the tag key {key[:20]!r}... has {len(key)} characters, more than AWS\'s '
                             f'limit of {MAX_TAG_KEY_LENGTH}')
        if len(value) > MAX_TAG_VALUE_LENGTH:
            raise ValueError(f'{argument}: the value of tag {key!r} has {len(value)} characters, more than AWS\'s '
                             f'limit of {MAX_TAG_VALUE_LENGTH}')
        if key.lower().startswith('aws:'):
            raise ValueError(f'{argument}: the tag key {key!r} starts with "aws:", a prefix AWS keeps for itself')
        if key in seen:
            raise ValueError(f'{argument}: the tag key {key!r} is given twice')
        seen.add(key)
        checked.append({'Key': key, 'Value': value})
    return checked


def check_global_table(description: Mapping[str, Any], allow_global_table: bool,
                       how_to_allow: str = 'pass allow_global_table=True') -> None:
    """Refuse a global table (one whose ``DescribeTable`` lists ``Replicas``) unless the user
    opted in with ``allow_global_table``.

    :raises DynamoDBLockError: ``GLOBAL_TABLE``, saying why: a lock's conditional writes are
        serialised only within one region.
    """
    replicas = description.get('Replicas') or []
    if not replicas or allow_global_table:
        return
    regions = ', '.join(sorted(str(replica.get('RegionName', '?')) for replica in replicas))
    raise DynamoDBLockError(
        DynamoDBLockError.GLOBAL_TABLE,
        f'Table {description.get("TableName", "?")!r} is a global table (replicas in {regions}): a lock\'s '
        'conditional writes are serialised only within one region, so clients in two regions can both be '
        f'granted the same lock within the replication delay. Keep every client of a key in one region and '
        f'{how_to_allow} to use it anyway',
    )


def table_request(table_name: object, partition_key_name: object, sort_key_name: object, ttl_attribute_name: object,
                  read_capacity: object, write_capacity: object, billing_mode: object,
                  partition_key_type: object = 'S', tags: object = None) -> Dict[str, Any]:
    """The ``CreateTable`` arguments for a lock table; raises TypeError/ValueError for bad ones.

    ``sort_key_name=None`` asks for a table whose key is the partition key alone;
    ``partition_key_type`` is the partition key's type (``'S'``, ``'N'`` or ``'B'``). The sort
    key, when there is one, is always a string. ``tags``: see :func:`check_tags`.
    """
    validation.require_text('table_name', table_name)
    names = [('partition_key_name', partition_key_name), ('ttl_attribute_name', ttl_attribute_name)]
    if sort_key_name is not None:
        names.insert(1, ('sort_key_name', sort_key_name))
    for argument, value in names:
        validation.require_attribute_name(argument, value)
    if len({value for _, value in names}) != len(names):
        raise ValueError('partition_key_name, sort_key_name and ttl_attribute_name must differ, got '
                         + ', '.join(f'{argument}={value!r}' for argument, value in names))
    if partition_key_type not in KEY_TYPE_NAMES:
        raise ValueError(f"partition_key_type must be one of {', '.join(KEY_TYPE_NAMES)} (DynamoDB's key types), "
                         f'got {partition_key_type!r}')
    if billing_mode not in ('PROVISIONED', 'PAY_PER_REQUEST'):
        raise ValueError(f"billing_mode must be 'PROVISIONED' or 'PAY_PER_REQUEST', got {billing_mode!r}")
    key_schema = [{'AttributeName': partition_key_name, 'KeyType': 'HASH'}]
    definitions = [{'AttributeName': partition_key_name, 'AttributeType': partition_key_type}]
    if sort_key_name is not None:
        key_schema.append({'AttributeName': sort_key_name, 'KeyType': 'RANGE'})
        definitions.append({'AttributeName': sort_key_name, 'AttributeType': 'S'})
    params: Dict[str, Any] = {
        'TableName': table_name,
        'KeySchema': key_schema,
        'AttributeDefinitions': definitions,
        'BillingMode': billing_mode,
    }
    if billing_mode == 'PROVISIONED':
        for argument, value in (('read_capacity', read_capacity), ('write_capacity', write_capacity)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f'{argument} must be a positive int, got {value!r}')
        params['ProvisionedThroughput'] = {'ReadCapacityUnits': read_capacity, 'WriteCapacityUnits': write_capacity}
    checked_tags = check_tags(tags)
    if checked_tags:
        params['Tags'] = checked_tags
    return params


def describe_key_schema(hash_name: Optional[str], hash_type: Optional[str], range_name: Optional[str],
                        range_type: Optional[str] = 'S') -> str:
    """A key schema in words: "a string HASH key 'lock_key' and a string RANGE key 'sort_key'"."""
    def typed(kind: Optional[str]) -> str:
        return KEY_TYPE_NAMES.get(kind or '', f'{kind}-typed' if kind else 'untyped')

    text = f'a {typed(hash_type)} HASH key {hash_name!r}'
    return text + (f' and a {typed(range_type)} RANGE key {range_name!r}' if range_name is not None
                   else ' and no RANGE key')


def _key_schema(description: Mapping[str, Any]) -> Tuple[Dict[str, str], Dict[str, str]]:
    """``({'HASH': name, 'RANGE': name}, {name: type})`` of a table description or request."""
    key_schema = {key['KeyType']: key['AttributeName'] for key in description.get('KeySchema', [])}
    types = {definition['AttributeName']: definition['AttributeType']
             for definition in description.get('AttributeDefinitions', [])}
    return key_schema, types


def _key_schema_mismatch(description: Mapping[str, Any], params: Mapping[str, Any]) -> Optional[Tuple[str, str]]:
    """``(found, wanted)`` in words when the table's key schema is not the one asked for; else None."""
    key_schema, types = _key_schema(description)
    expected, expected_types = _key_schema(params)
    if key_schema == expected and all(types.get(name) == kind for name, kind in expected_types.items()):
        return None
    found = describe_key_schema(key_schema.get('HASH'), types.get(key_schema.get('HASH', '')),
                                key_schema.get('RANGE'), types.get(key_schema.get('RANGE', '')))
    wanted = describe_key_schema(expected.get('HASH'), expected_types.get(expected.get('HASH', '')),
                                 expected.get('RANGE'))
    return found, wanted


def judge_existing_table(description: Mapping[str, Any], params: Mapping[str, Any], exist_ok: bool) -> None:
    """Accept an existing table with the requested key schema when ``exist_ok``; raise otherwise."""
    table_name = params['TableName']
    mismatch = _key_schema_mismatch(description, params)
    if mismatch is not None:
        found, wanted = mismatch
        raise DynamoDBLockError(
            DynamoDBLockError.UNKNOWN,
            f'Table {table_name!r} already exists with key schema {found}; the lock table asked for needs {wanted}',
            reason=Reason.WRONG_KEY_SCHEMA,
        )
    if not exist_ok:
        raise DynamoDBLockError(
            DynamoDBLockError.UNKNOWN,
            f'Table {table_name!r} already exists (pass exist_ok=True to accept it)',
            reason=Reason.TABLE_EXISTS,
        )
    logger.info('Lock table %s already exists with the right key schema', table_name)


def create_was_retried(error: BaseException) -> bool:
    """Whether botocore sent the ``CreateTable`` that ended in ``error`` more than once (its
    ``RetryAttempts``): an earlier attempt of the same call may then have created the table,
    its answer lost (a read timeout), and the ``ResourceInUseException`` be about our own table."""
    response = getattr(error, 'response', None) or {}
    return bool((response.get('ResponseMetadata') or {}).get('RetryAttempts'))


def judge_retried_create(description: Mapping[str, Any], ttl_description: Mapping[str, Any],
                         params: Mapping[str, Any], ttl_attribute_name: str,
                         tags: Optional[List[Mapping[str, str]]] = None) -> None:
    """A retried ``CreateTable`` met an existing table: accept it when it is what was asked (keys,
    billing, capacities, no TTL on another attribute, no replicas, no tag other than asked: ``tags``
    are the table's, None when unread; some asked for but not shown yet is a tag read's lag), as an
    earlier attempt of this very call would have made it; raise otherwise.

    :raises DynamoDBLockError: ``UNKNOWN``, reason ``WRONG_KEY_SCHEMA`` (the keys differ) or
        ``TABLE_EXISTS`` (anything else differs), naming every difference.
    """
    differences: List[str] = []
    mismatch = _key_schema_mismatch(description, params)
    if mismatch is not None:
        differences.append(f'its key schema is {mismatch[0]}, not {mismatch[1]}')
    billing = (description.get('BillingModeSummary') or {}).get('BillingMode') or 'PROVISIONED'
    if billing != params['BillingMode']:
        differences.append(f'its billing mode is {billing}, not {params["BillingMode"]}')
    elif billing == 'PROVISIONED':
        found = description.get('ProvisionedThroughput') or {}
        for name, asked in params['ProvisionedThroughput'].items():
            if found.get(name) != asked:
                differences.append(f'its {name} is {found.get(name)}, not {asked}')
    ttl_on = ttl_description.get('AttributeName')
    if ttl_description.get('TimeToLiveStatus') in ('ENABLED', 'ENABLING') and ttl_on != ttl_attribute_name:
        differences.append(f'its time-to-live is on {ttl_on!r}, not {ttl_attribute_name!r}')
    if description.get('Replicas'):
        differences.append('it has replicas in other regions (a global table)')
    found_tags, asked = ({tag['Key']: tag['Value'] for tag in given} for given in (tags or [], params.get('Tags', [])))
    lagging = tags is not None and found_tags != asked and found_tags.items() <= asked.items()
    if tags is not None and found_tags != asked and not lagging:
        differences.append(f'its tags are {found_tags or "none"}, not {asked or "none"}')
    if differences:
        raise DynamoDBLockError(DynamoDBLockError.UNKNOWN, f'Table {params["TableName"]!r} already exists and is not '
                                f'the table asked for: {"; ".join(differences)} (CreateTable was sent again after an '
                                'answer was lost, so an earlier attempt of this call could have created it, but this '
                                'table differs; pass exist_ok=True to accept an existing table)',
                                reason=Reason.WRONG_KEY_SCHEMA if mismatch is not None else Reason.TABLE_EXISTS)
    if lagging:     # ListTagsOfResource is eventually consistent: a new table's tags can show late
        logger.warning('Lock table %s: tags %s are not shown yet (tag reads lag behind a new table); accepted as '
                       'the table asked for', params['TableName'], sorted(set(asked) - set(found_tags)))
    logger.info('Lock table %s was made by an earlier attempt of this CreateTable (answer lost)', params['TableName'])


def lock_table_shape(description: Mapping[str, Any], ttl_description: Optional[Mapping[str, Any]],
                     ttl_attribute_name: Optional[str] = None) -> Dict[str, Any]:
    """The lock client arguments that fit an existing table, from ``DescribeTable`` (and
    ``DescribeTimeToLive``): ``partition_key_name``, ``sort_key_name`` (None: no sort key),
    ``partition_key_type`` and ``ttl_attribute_name``.

    The TTL attribute is ``ttl_attribute_name`` when given, else the one the table's TTL is
    enabled on, else the default (``expiry_time``); a difference is logged as a warning.

    :raises DynamoDBLockError: ``UNKNOWN`` with reason ``WRONG_KEY_SCHEMA`` when the table's
        keys cannot hold locks: a sort key that is not a string, a key named like one of the
        lock's own attributes, or a TTL attribute that is a key.
    """
    table_name = description.get('TableName', '?')
    key_schema, types = _key_schema(description)
    hash_name, range_name = key_schema.get('HASH'), key_schema.get('RANGE')
    hash_type = types.get(hash_name or '')
    found = describe_key_schema(hash_name, hash_type, range_name, types.get(range_name or ''))

    def refuse(why: str) -> DynamoDBLockError:
        return DynamoDBLockError(DynamoDBLockError.UNKNOWN,
                                 f'Table {table_name!r} cannot hold locks: it has {found}; {why}',
                                 reason=Reason.WRONG_KEY_SCHEMA)

    if hash_name is None or hash_type not in KEY_TYPE_NAMES:
        raise refuse('a lock table needs a string, number or binary HASH key')
    if range_name is not None and types.get(range_name) != 'S':
        raise refuse('the sort key of a lock is a string, so a lock table has a string RANGE key or none')
    own = Schema('-', '-', None, '-').reserved_names - {'-'}
    for name in (hash_name, range_name):
        if name in own:
            raise refuse(f'{name!r} is the name of one of the lock\'s own attributes ({", ".join(sorted(own))})')
    enabled = dict(ttl_description or {}).get('TimeToLiveStatus') in ('ENABLED', 'ENABLING')
    table_ttl = dict(ttl_description or {}).get('AttributeName') if enabled else None
    chosen = ttl_attribute_name or table_ttl or DEFAULT_TTL_ATTRIBUTE_NAME
    if table_ttl is None:
        logger.warning('Table %s has no time-to-live enabled: rows left by crashed holders are not deleted by '
                       'DynamoDB (enable it on %r)', table_name, chosen)
    elif chosen != table_ttl:
        logger.warning('Table %s has time-to-live on %r, but the lock client writes its expiry to %r: DynamoDB '
                       'will not delete the rows left by crashed holders', table_name, table_ttl, chosen)
    if chosen in (hash_name, range_name):
        raise refuse(f'its TTL attribute {chosen!r} is a key attribute')
    return {'partition_key_name': hash_name, 'sort_key_name': range_name, 'partition_key_type': hash_type,
            'ttl_attribute_name': chosen}


def for_table_arguments(table_name: str, description: Mapping[str, Any], ttl_description: Optional[Mapping[str, Any]],
                        ttl_error: Optional[BaseException], kwargs: Dict[str, Any]) -> Dict[str, Any]:
    """The constructor arguments of a client made by ``for_table``, from what the table's
    ``DescribeTable`` and ``DescribeTimeToLive`` answered (``ttl_error``: the latter failed, and
    the given or default TTL attribute is used) and the caller's other ``kwargs``."""
    if ttl_error is not None:
        logger.warning('Could not read the time-to-live setting of table %s (%s); using %r', table_name, ttl_error,
                       kwargs.get('ttl_attribute_name') or DEFAULT_TTL_ATTRIBUTE_NAME)
    others = dict(kwargs)
    shape = lock_table_shape(description, ttl_description, others.pop('ttl_attribute_name', None))
    return {'table_name': table_name, **shape, **others}


def describe_failed(table_name: str, exc: BaseException) -> DynamoDBLockError:
    """The error of a ``for_table`` whose ``DescribeTable`` failed."""
    code = error_code(exc)
    if code == 'ResourceNotFoundException':
        message = (f'table {table_name!r} does not exist (create it with DynamoDBLockClient.create_dynamodb_table '
                   f'or `dynamodb-lock create-table --table {table_name}`)')
    else:
        message = f'could not read the description of table {table_name!r} (it needs dynamodb:DescribeTable): {exc}'
    return DynamoDBLockError(DynamoDBLockError.UNKNOWN, message, reason=reason_of(exc))


def needs_ttl_update(ttl_description: Mapping[str, Any], ttl_attribute_name: str) -> bool:
    return (ttl_description.get('TimeToLiveStatus') not in ('ENABLED', 'ENABLING')
            or ttl_description.get('AttributeName') != ttl_attribute_name)


def creation_failed(table_name: str, exc: BaseException) -> DynamoDBLockError:
    return DynamoDBLockError(DynamoDBLockError.UNKNOWN, f'Could not create the lock table {table_name!r}: {exc}',
                             reason=reason_of(exc))


def lock_transport_of(dynamodb: Any) -> Tuple[Any, bool]:
    """The boto3 client a threaded lock client sends its calls on, given a DynamoDB resource
    or a low-level DynamoDB client, and whether that client takes typed JSON (True: a plain
    ``boto3.client('dynamodb')``; False: a resource's client, whose resource layer converts
    Python values itself). ``TypeError`` for anything else, before any call."""
    if getattr(getattr(dynamodb, 'meta', None), 'client', None) is not None:
        return dynamodb.meta.client, False
    service_model = getattr(getattr(dynamodb, 'meta', None), 'service_model', None)
    is_dynamodb = getattr(service_model, 'service_name', None) == 'dynamodb'
    if not is_dynamodb or not callable(getattr(dynamodb, 'update_item', None)):
        raise TypeError('dynamodb_resource must be a boto3 DynamoDB resource (boto3.resource("dynamodb")) '
                        f'or a low-level DynamoDB client (boto3.client("dynamodb")), not {type(dynamodb).__name__}')
    if _is_asyncio_client(dynamodb):
        raise TypeError('this is an asyncio (aiobotocore) client: use python_dynamodb_lock.aio.AsyncDynamoDBLockClient')
    return dynamodb, not _converts_python_values(dynamodb)


def _is_asyncio_client(client: Any) -> bool:
    return inspect.iscoroutinefunction(client.update_item) or any(
        kind.__module__.startswith('aiobotocore.') for kind in type(client).__mro__)


def _converts_python_values(client: Any) -> bool:
    """Whether boto3's resource layer sits on ``client`` (it is some resource's ``meta.client``).

    Asked by emitting, with a throwaway GetItem request, the service-wide event that the layer's
    conversion listens to: it types the request's key in place. (Handlers registered per
    operation, such as botocore's Stubber, are not called.)"""
    key: Dict[str, Any] = {'probe': 'probe'}
    model = client.meta.service_model.operation_model('GetItem')
    try:
        client.meta.events.emit('before-parameter-build.dynamodb', params={'TableName': 'probe', 'Key': key},
                                model=model, context={})
    except Exception:   # noqa: BLE001 - an application's handler that did not expect the probe
        logger.debug('an event handler of the DynamoDB client failed on the probe request', exc_info=True)
    return not isinstance(key['probe'], str)


def require_low_level_client(dynamodb_client: object, kind: str = 'boto3.client("dynamodb")') -> None:
    """Refuse, before any call, what is not a low-level DynamoDB client (a resource, say)."""
    if getattr(getattr(dynamodb_client, 'meta', None), 'client', None) is not None:
        raise TypeError(f'create_dynamodb_table takes a low-level client ({kind}), not a resource; '
                        'pass resource.meta.client')
    missing = [name for name in ('create_table', 'describe_table', 'describe_time_to_live', 'get_waiter')
               if not callable(getattr(dynamodb_client, name, None))]
    if missing:
        raise TypeError(f'create_dynamodb_table takes a low-level DynamoDB client ({kind}), '
                        f'not {type(dynamodb_client).__name__}')


class AdminCall(NamedTuple):
    """One call of table administration: a client method (or ``wait:<waiter>``) and its
    arguments. The steps below yield them; each client's runner makes the call and sends the
    response back, or throws what it raised (the steps decide what an error means)."""

    method: str
    params: Dict[str, Any]


AdminSteps = Generator[AdminCall, Any, Any]


def creating_table(table_name: str, partition_key_name: object, sort_key_name: object, ttl_attribute_name: str,
                   read_capacity: object, write_capacity: object, billing_mode: object, exist_ok: bool,
                   partition_key_type: object = 'S', tags: object = None,
                   allow_global_table: bool = False) -> AdminSteps:
    """Create the lock table (or accept an existing one that fits, with ``exist_ok``; a global
    one only with ``allow_global_table``), wait until it is ACTIVE, turn TTL on, and return its
    description. A ``CreateTable`` that botocore retried after a lost answer and that then finds
    the table existing succeeds when the table is the one asked for (:func:`judge_retried_create`).
    Arguments are checked first (TypeError, ValueError); DynamoDB's failures become
    :func:`creation_failed` errors."""
    params = table_request(table_name, partition_key_name, sort_key_name, ttl_attribute_name, read_capacity,
                           write_capacity, billing_mode, partition_key_type, tags)
    validation.require_bool('allow_global_table', allow_global_table)
    named = {'TableName': table_name}
    try:
        try:
            yield AdminCall('create_table', params)
            logger.info('Creating lock table %s', table_name)
        except ClientError as exc:
            if error_code(exc) != 'ResourceInUseException':
                raise
            existing = (yield AdminCall('describe_table', named))['Table']
            if create_was_retried(exc) and not exist_ok:
                # Maybe our own table, made by the attempt whose answer was lost: it must be as asked.
                ttl = (yield AdminCall('describe_time_to_live', named)).get('TimeToLiveDescription', {})
                yield AdminCall('wait:table_exists', named)     # its tags are read once it is ACTIVE
                found: Optional[List[Any]] = []
                listing: Dict[str, Any] = {'ResourceArn': existing.get('TableArn', '')}
                try:
                    while listing:     # ListTagsOfResource answers in pages
                        page = yield AdminCall('list_tags_of_resource', listing)
                        found = [*(found or []), *page.get('Tags', [])]
                        listing = {**listing, 'NextToken': page['NextToken']} if page.get('NextToken') else {}
                except (ClientError, BotoCoreError) as unread:
                    found = None
                    logger.info('Could not read the tags of table %s (%s; it needs dynamodb:ListTagsOfResource): '
                                'accepted as the retried create\'s table, its tags not compared', table_name, unread)
                judge_retried_create(existing, ttl, params, ttl_attribute_name, found)
            else:
                judge_existing_table(existing, params, exist_ok)
                check_global_table(existing, allow_global_table)
        yield AdminCall('wait:table_exists', named)
        ttl = (yield AdminCall('describe_time_to_live', named)).get('TimeToLiveDescription', {})
        if needs_ttl_update(ttl, ttl_attribute_name):
            yield AdminCall('update_time_to_live', {**named, 'TimeToLiveSpecification': {
                'Enabled': True, 'AttributeName': ttl_attribute_name}})
            yield AdminCall('wait:table_exists', named)
        return dict((yield AdminCall('describe_table', named))['Table'])
    except (ClientError, BotoCoreError) as exc:
        raise creation_failed(table_name, exc) from exc


def describing_table(table_name: str, kwargs: Dict[str, Any], allow_global_table: bool = False) -> AdminSteps:
    """``for_table``: read the table's key schema and TTL setting, and return the constructor's
    arguments for it (see :func:`for_table_arguments`); a global table is refused unless
    ``allow_global_table`` (see :func:`check_global_table`)."""
    validation.require_bool('allow_global_table', allow_global_table)
    named = {'TableName': table_name}
    try:
        description = (yield AdminCall('describe_table', named))['Table']
    except (ClientError, BotoCoreError) as exc:
        raise describe_failed(table_name, exc) from exc
    check_global_table(description, allow_global_table)
    ttl, ttl_error = None, None
    try:
        ttl = (yield AdminCall('describe_time_to_live', named)).get('TimeToLiveDescription', {})
    except (ClientError, BotoCoreError) as exc:
        ttl_error = exc
    return for_table_arguments(table_name, description, ttl, ttl_error, kwargs)


def _bound(client: Any, call: AdminCall) -> Any:
    if call.method.startswith('wait:'):
        return client.get_waiter(call.method[len('wait:'):]).wait
    return getattr(client, call.method)


def run_admin(client: object, steps: AdminSteps) -> Any:
    """Run administration steps on a boto3 client."""
    step = advance(steps, None)
    while not isinstance(step, Done):
        try:
            result, thrown = _bound(client, step)(**step.params), None
        except Exception as exc:   # thrown into the steps, which judge it
            result, thrown = None, exc
        step = advance(steps, result, thrown)
    return step.value


async def run_admin_async(client: object, steps: AdminSteps) -> Any:
    """Run administration steps on an aiobotocore client."""
    step = advance(steps, None)
    while not isinstance(step, Done):
        try:
            result, thrown = await _bound(client, step)(**step.params), None
        except Exception as exc:   # thrown into the steps, which judge it
            result, thrown = None, exc
        step = advance(steps, result, thrown)
    return step.value
