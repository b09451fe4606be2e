"""Deterministic simulation: a model of the lock table, and the first slice of the simulation driver.
May import: the standard library, botocore, python_dynamodb_lock's core and orchestration (_core, _client, the pure
``_drivers.steps``); no threads, asyncio, clock, chance or I/O of its own (.importlinter checks both halves).

The simulation's public face is in :mod:`python_dynamodb_lock.testing` (``simulate``, ``shrink``,
``Workload``, ``FaultPlan``, ``SimulationFailure``, ``SimulationResult``, ``Reproducer``,
``SimulatedCaller``); the rest here is private.

:class:`SimulatedTable` answers the low-level requests this library sends
(typed attribute values, as a boto3 low-level client takes them) with the answers and the
``ClientError`` exceptions botocore gives; ``tests/test_sim_table_differential.py`` replays
recorded request sequences against it and against DynamoDB Local and requires the same answers.

:func:`simulate` (``run.py``) runs several simulated lock clients - the real orchestration, stepped
by one seeded scheduler (``scheduler.py``) in one thread, over simulated clocks (``clock.py``) and
the simulated table, with faults chosen by the seed (``faults.py``) - and checks the invariants
(``invariants.py``) after every step; a failure raises :class:`SimulationFailure` naming the seed,
with the trace; :func:`shrink` (``shrink.py``) reduces a failing run to a smaller one that fails the
same way; a user's own code runs in place of the built-in callers through ``user.py``.
"""
from .chance import SplitMix64
from .clients import Workload
from .clock import EPOCH, SimulatedClock, World
from .faults import FaultPlan
from .invariants import Checker, Violation
from .run import SimulationFailure, SimulationResult, simulate
from .shrink import Reproducer, problem_kind, shrink
from .simulated import SimulatedTable
from .user import SimulatedCaller, UserScript
from .table import OPERATIONS, KeyAttribute
from .values import format_number

__all__ = ['EPOCH', 'OPERATIONS', 'Checker', 'FaultPlan', 'KeyAttribute', 'Reproducer', 'SimulatedCaller',
           'SimulatedClock', 'SimulatedTable', 'SimulationFailure', 'SimulationResult', 'SplitMix64', 'UserScript',
           'Violation', 'World', 'Workload', 'format_number', 'problem_kind', 'shrink', 'simulate']
