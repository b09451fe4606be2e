"""Recipe implementations: leader election, the semaphore and its permits, their operations, the two handlers.
May import _core.stepper, _model (errors, schema, validation), _common (locks, clock); never a client (aio, ...).

The public faces are :mod:`python_dynamodb_lock.recipes` (``LeaderElection``, ``Semaphore``,
``Permit``, ``LossReason``) and :mod:`python_dynamodb_lock.aio` (``AsyncLeaderElection``,
``AsyncSemaphore``, ``AsyncPermit``: defined here, and offered by this package to ``aio``).
Each recipe's decisions are written once, as generators of operations (:mod:`.operations`), in
:mod:`.election` and :mod:`.semaphore`; :mod:`.handlers` performs the operations with one
client's public API (``Threads`` blocks, ``Tasks`` awaits), stepping the recipe with
:func:`python_dynamodb_lock._core.stepper.advance`.
"""
from .election import AsyncLeaderElection
from .permit import AsyncPermit
from .semaphore import AsyncSemaphore

__all__ = ['AsyncLeaderElection', 'AsyncPermit', 'AsyncSemaphore']
