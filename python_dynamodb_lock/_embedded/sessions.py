"""boto3 pieces for local engines: dummy credentials, and the settings of every client made for them."""
from __future__ import annotations

from typing import Any, Optional

import boto3
import botocore.config

__all__ = [
    'DUMMY_ACCESS_KEY_ID',
    'DUMMY_REGION',
    'DUMMY_SECRET_ACCESS_KEY',
    'LOCAL_CLIENT_ATTEMPTS',
    'default_client_config',
    'dummy_boto3_session',
    'merged_client_config',
]

DUMMY_REGION = 'us-east-1'
DUMMY_ACCESS_KEY_ID = 'testing'
DUMMY_SECRET_ACCESS_KEY = 'testing'


def dummy_boto3_session() -> boto3.session.Session:
    """A boto3 session with dummy credentials and region us-east-1, for local engines only."""
    return boto3.session.Session(
        aws_access_key_id=DUMMY_ACCESS_KEY_ID,
        aws_secret_access_key=DUMMY_SECRET_ACCESS_KEY,
        region_name=DUMMY_REGION,
    )


#: Attempts of each call of the clients made for local engines, whatever botocore's default
#: retry mode (its legacy mode makes 10, and waits between them).
LOCAL_CLIENT_ATTEMPTS = 3


def default_client_config() -> botocore.config.Config:
    """The botocore configuration used for local engines, and by every boto3 or aiobotocore
    client the testing helpers make: retries set explicitly (standard mode,
    :data:`LOCAL_CLIENT_ATTEMPTS` attempts in all), so that an unreachable endpoint fails within
    seconds whatever botocore's default retry mode is; a 1 s connect timeout (a local engine
    accepts at once or not at all) and a 10 s read timeout (its slowest call, on a busy machine,
    answers within seconds). One attempt's connect + read timeout stays below the default 20 s
    safe period, so lock clients made on these clients do not warn about it."""
    return botocore.config.Config(
        retries={'mode': 'standard', 'total_max_attempts': LOCAL_CLIENT_ATTEMPTS},
        connect_timeout=1,
        read_timeout=10,
        max_pool_connections=32,
    )


def merged_client_config(config: Optional[botocore.config.Config] = None) -> botocore.config.Config:
    """:func:`default_client_config` with ``config``'s settings over it. A ``retries`` setting
    of ``config`` without a ``mode`` keeps the standard mode (botocore would otherwise fall back
    to its default mode for the whole ``retries`` setting)."""
    defaults = default_client_config()
    if config is None:
        return defaults
    retries = getattr(config, 'retries', None)
    if isinstance(retries, dict) and 'mode' not in retries:
        with_mode: Any = {'mode': 'standard', **retries}
        config = config.merge(botocore.config.Config(retries=with_mode))
    return defaults.merge(config)
