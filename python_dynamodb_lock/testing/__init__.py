"""Helpers for testing code that uses python_dynamodb_lock, with either lock client.

Everything here is for tests; nothing talks to AWS. See the documentation page "Testing code
that uses locks" for examples. The pieces:

* :class:`ManualClock`: time that moves only when the test says so (``clock=ManualClock()``
  for either client), so leases, retries and heartbeats run in milliseconds.
* :class:`FaultInjector`: throttling, 5xx, latency, lost answers, a stolen lock and arbitrary
  actions before a call, through botocore hooks on a boto3 or aiobotocore client.
* :class:`CallRecorder`: which DynamoDB calls a client made, with their requests.
* :class:`CallbackRecorder`: an ``app_callback`` that records what it is told.
* :func:`start_engine`, :func:`lock_table`, :func:`moto_lock_table` and :class:`LockTable`: a
  local DynamoDB (Amazon DynamoDB Local, or a serialised moto server) or moto in-process, and
  a lock table on it with lock clients of both kinds.
* :class:`SystemClock` (the real clock, to wrap or pass explicitly) and :class:`Clock` (what
  a ``clock=`` argument must provide); ``REAL_TIMEOUT``, the real seconds (20) the helpers wait for a thread or task.
* :func:`dummy_boto3_session`, :func:`default_client_config` and :func:`unique_table_name`:
  boto3 pieces for local engines, for tests that make their own clients or tables.
* :func:`simulate` and :func:`shrink` (with :class:`Workload`, :class:`FaultPlan`,
  :class:`SimulationResult`, :class:`SimulationFailure`, :class:`Reproducer` and
  :class:`SimulatedCaller`): the deterministic simulation - several simulated lock clients (the
  real protocol) run by one seeded scheduler over simulated clocks, a simulated table and
  faults, with the invariants checked after every step; a failure replays from its seed, shrinks
  to a short schedule, and a user's own code can run under it.
* a pytest plugin (:mod:`python_dynamodb_lock.testing.pytest_plugin`), active when the
  ``testing`` extra is installed, with fixtures named ``dynamodb_lock_*``.
"""
from .._common.clock import Clock, SystemClock
from .._embedded import EmbeddedEngine, EngineNotInstalledError, default_client_config, dummy_boto3_session
from ._callbacks import CallbackCall, CallbackRecorder
from ._clock import REAL_TIMEOUT, ManualClock, wait_until
from ._actions import is_acquire, is_heartbeat, is_release, lock_action, readable_expression
from ._engines import LockTable, lock_table, moto_lock_table, start_engine, unique_table_name
from ._faults import Fault, FaultInjector
from ._hooks import link_clients
from ._recorder import CallRecorder, RecordedCall
from ._simulation import (FaultPlan, Reproducer, SimulatedCaller, SimulationFailure, SimulationResult, Workload, shrink,
                          simulate)

__all__ = [
    'REAL_TIMEOUT',
    'CallRecorder',
    'CallbackCall',
    'CallbackRecorder',
    'Clock',
    'EmbeddedEngine',
    'EngineNotInstalledError',
    'Fault',
    'FaultInjector',
    'FaultPlan',
    'LockTable',
    'ManualClock',
    'RecordedCall',
    'Reproducer',
    'SimulatedCaller',
    'SimulationFailure',
    'SimulationResult',
    'SystemClock',
    'Workload',
    'default_client_config',
    'dummy_boto3_session',
    'is_acquire',
    'is_heartbeat',
    'is_release',
    'link_clients',
    'lock_action',
    'lock_table',
    'moto_lock_table',
    'readable_expression',
    'shrink',
    'simulate',
    'start_engine',
    'unique_table_name',
    'wait_until',
]
