"""python_dynamodb_lock: distributed locks on Amazon DynamoDB.

The classes live in :mod:`python_dynamodb_lock.python_dynamodb_lock` (the import path of the
published package) and are re-exported here, with the recipes of :mod:`python_dynamodb_lock.recipes`
(:class:`LeaderElection`, :class:`Semaphore`, :class:`LossReason`). :class:`HeldLock` is the type of
a lock held by either client (``DynamoDBLock`` and ``AsyncDynamoDBLock`` are both one).
"""
from ._version import __version__
from ._model.errors import Reason
from ._common.observe import LockEvent
from ._common.locks import HeldLock
from ._model.schema import TableLayout
from ._core.shared import MAX_SHARED_HOLDERS, SharedHolder
from .python_dynamodb_lock import BaseDynamoDBLock, DynamoDBLock, DynamoDBLockClient, DynamoDBLockError
from ._handles.multi_locks import DynamoDBMultiLock
from .recipes import LeaderElection, LossReason, Permit, Semaphore

__all__ = ['MAX_SHARED_HOLDERS', 'BaseDynamoDBLock', 'DynamoDBLock', 'DynamoDBLockClient', 'DynamoDBLockError',
           'DynamoDBMultiLock', 'HeldLock', 'LeaderElection', 'LockEvent', 'LossReason', 'Permit', 'Reason',
           'Semaphore', 'SharedHolder', 'TableLayout',
           '__version__']
