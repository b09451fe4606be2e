"""python_dynamodb_lock: distributed locks on Amazon DynamoDB.

The classes live in :mod:`python_dynamodb_lock.python_dynamodb_lock` (the import path of the
published package) and are re-exported here.
"""
from ._version import __version__
from ._errors import Reason
from ._observe import LockEvent
from .python_dynamodb_lock import BaseDynamoDBLock, DynamoDBLock, DynamoDBLockClient, DynamoDBLockError

__all__ = ['BaseDynamoDBLock', 'DynamoDBLock', 'DynamoDBLockClient', 'DynamoDBLockError', 'LockEvent', 'Reason',
           '__version__']
