"""Checks of what the command line was given, before any call: the endpoint URL, the key and
attribute names, keys typed as the table's (``--partition-key-type``), options left empty.

Each refusal is a usage error naming the option, not the lock client's Python argument.
"""
from __future__ import annotations

import argparse
import base64
import binascii
import decimal
import ipaddress
import re
import urllib.parse
from typing import Any, Optional

from .._model import validation
from ..python_dynamodb_lock import DynamoDBLockClient
from .console import EXIT_USAGE, CliError

# A host name as botocore accepts it: dot-separated labels of letters, digits and hyphens.
_HOST_LABEL = re.compile(r'(?!-)[A-Za-z0-9-]{1,63}(?<!-)')


def check_endpoint_url(url: str) -> str:
    """Return ``url`` if it is a usable DynamoDB endpoint URL, else raise ValueError saying why.

    Usable means ``http://`` or ``https://``, a host (a DNS name, an IPv4 address or an IPv6
    address in brackets), an optional port from 1 to 65535 and an optional path; no spaces or
    control characters, user information, query or fragment. This is what botocore and urllib3
    can connect to; several of the rest (a bad port, another scheme) they refuse only when the
    first request is sent, with a traceback.
    """
    if not isinstance(url, str) or not url.strip():
        raise ValueError('it is empty')
    for character in url:
        if character.isspace() or not character.isprintable():
            raise ValueError(f'it contains {character!r}: spaces and control characters are not allowed')
    if '://' not in url:
        raise ValueError('it has no scheme: write it as http://HOST[:PORT] or https://HOST[:PORT]')
    try:
        parts = urllib.parse.urlsplit(url)
        host = parts.hostname
    except ValueError as error:
        raise ValueError(f'it cannot be parsed as a URL ({error})') from None
    if parts.scheme.lower() not in ('http', 'https'):
        raise ValueError(f'its scheme is {parts.scheme!r}: only http and https are supported')
    if '@' in parts.netloc:
        raise ValueError('it contains user information (user@host): credentials belong in the AWS '
                         'configuration, not in the URL')
    if parts.query or parts.fragment or url.endswith(('?', '#')):
        raise ValueError('it has a query or a fragment (?... or #...), which an endpoint cannot have')
    if not host:
        raise ValueError('it has no host')
    after_host = parts.netloc.rpartition(']')[2]
    port_text = after_host.rpartition(':')[2] if ':' in after_host else None
    try:
        port = parts.port
    except ValueError:
        port = -1
    if port_text is not None and not (port_text.isascii() and port_text.isdigit()):
        port = -1   # Python reads '+80' or '٨٠' as a port; urllib3, which sends the requests, does not
    if port is not None and not 1 <= port <= 65535:
        raise ValueError(f'its port {parts.netloc.rpartition(":")[2]!r} is not a number from 1 to 65535')
    if parts.netloc.startswith('['):
        try:
            ipaddress.IPv6Address(urllib.parse.unquote(host))
        except ValueError:
            raise ValueError(f'{host!r} in brackets is not an IPv6 address') from None
        return url
    name = host[:-1] if host.endswith('.') else host
    if len(name) > 253 or not all(_HOST_LABEL.fullmatch(label) for label in name.split('.')):
        raise ValueError(f'its host {host!r} is not a valid host name: use letters, digits, hyphens and '
                         'dots only (the ASCII form of an international name), or an IP address')
    return url


def endpoint_error(url: str, source: str, reason: str) -> CliError:
    """The usage error for a malformed endpoint URL (``source``: where it came from)."""
    return CliError(f'invalid endpoint URL {url!r} ({source}): {reason}', EXIT_USAGE)


def sort_key_name_of(args: argparse.Namespace) -> Optional[str]:
    """The sort key attribute of the command's table: None with ``--no-sort-key`` (or
    ``--sort-key-name ''``), a table whose key is the partition key alone."""
    if getattr(args, 'no_sort_key', False) or args.sort_key_name == '':
        return None
    name: str = args.sort_key_name
    return name


def partition_key_type_of(args: argparse.Namespace) -> str:
    kind: str = getattr(args, 'partition_key_type', None) or 'S'
    return kind


def lock_key_of(args: argparse.Namespace) -> Any:
    """The command's KEY as the lock client takes it (see :func:`partition_key_of`)."""
    return partition_key_of(args.key, partition_key_type_of(args), 'KEY')


def partition_key_of(text: str, kind: str, name: str) -> Any:
    """A partition key given as ``text`` (``name``: KEY, or the option that gave it), as the
    lock client takes it: the text itself for a string partition key, a ``Decimal`` for a number
    key (``--partition-key-type N``), the bytes that the text encodes in base64 for a binary key
    (``--partition-key-type B``).

    :raises ValueError: naming ``name``, for text that is not a key of that type.
    """
    if kind == 'S':
        return validation.require_key(name, text, validation.MAX_PARTITION_KEY_BYTES)
    if kind == 'N':
        try:
            number = decimal.Decimal(text.strip())
        except (decimal.InvalidOperation, ValueError):
            raise ValueError(f'{name} {text!r} is not a number (--partition-key-type N)') from None
        if not number.is_finite():
            raise ValueError(f'{name} {text!r} is not a finite number (--partition-key-type N)')
        validation.require_storable(name, number)
        return number
    try:
        value = base64.b64decode(text.strip(), validate=True)
    except (binascii.Error, ValueError):
        raise ValueError(f'{name} {text!r} is not base64 (--partition-key-type B takes the key\'s bytes in '
                         'base64)') from None
    if not 0 < len(value) <= validation.MAX_PARTITION_KEY_BYTES:
        raise ValueError(f'{name} must encode 1 to {validation.MAX_PARTITION_KEY_BYTES} bytes, got {len(value)}')
    return value


#: Options whose empty value would quietly mean something else (an unset shell variable,
#: ``--table "$LOCK_TABLE"``): the default table, the default region or profile, any version.
#: What each would mean instead, for the message.
_NOT_EMPTY = {
    'table': ('--table', f'the default table {DynamoDBLockClient._DEFAULT_TABLE_NAME}'),
    'region': ('--region', 'the region of the AWS environment or configuration'),
    'profile': ('--profile', 'the default profile'),
    'expected_version': ('--version', 'no version check'),
    'owner_name': ('--owner-name', 'the default owner name'),
    'partition_key': ('--partition-key', 'every lock of the table'),
}


def check_not_empty(args: argparse.Namespace) -> None:
    """Refuse an empty (or blank) value of an option whose absence means a default: an unset
    variable in ``--table "$LOCK_TABLE"`` must not make the command act on the default table."""
    for dest, (option, instead) in _NOT_EMPTY.items():
        value = getattr(args, dest, None)
        if value is not None and not value.strip():
            raise CliError(f'{option} is empty ({value!r}; an unset shell variable?): give a value, or leave '
                           f'the option out for {instead}', EXIT_USAGE)


def check_arguments(args: argparse.Namespace) -> None:
    """Refuse, as a usage error naming the option, names and keys the library would refuse.

    Runs before any call. The lock client checks the same things, with messages naming its
    Python arguments; here the messages name the options of the command.
    """
    check_not_empty(args)
    sort_key_name = sort_key_name_of(args)
    names = {
        '--partition-key-name': args.partition_key_name,
        '--sort-key-name': sort_key_name,
        '--ttl-attribute-name': args.ttl_attribute_name,
    }
    if sort_key_name is None:
        del names['--sort-key-name']
    lock_attributes = (DynamoDBLockClient._COL_OWNER_NAME, DynamoDBLockClient._COL_LEASE_DURATION,
                       DynamoDBLockClient._COL_RECORD_VERSION_NUMBER)
    try:
        for option, value in names.items():
            validation.require_attribute_name(option, value)
            if value in lock_attributes:
                raise ValueError(f'{option} {value!r} is the name of one of the lock\'s own attributes '
                                 f'({", ".join(lock_attributes)})')
        if len(set(names.values())) != len(names):
            raise ValueError(', '.join(names) + ' must differ, got '
                             + ', '.join(f'{option} {value!r}' for option, value in names.items()))
        if getattr(args, 'partition_key', None) is not None:
            args.listed_key = partition_key_of(args.partition_key, partition_key_type_of(args), '--partition-key')
        if getattr(args, 'key', None) is not None:
            args.lock_key = lock_key_of(args)
            validation.require_key('SORT_KEY', args.sort_key, validation.MAX_SORT_KEY_BYTES)
            if sort_key_name is None and args.sort_key != DynamoDBLockClient._DEFAULT_SORT_KEY_VALUE:
                raise ValueError(f'the table has no sort key (--no-sort-key): leave SORT_KEY out, got '
                                 f'{args.sort_key!r}')
    except (TypeError, ValueError) as error:
        raise CliError(str(error), EXIT_USAGE) from None
