"""A deterministic in-memory model of the lock table, the base of the coming simulation driver.
May import: the standard library, botocore's ClientError, and python_dynamodb_lock._schema; no threads, asyncio or I/O.

Not public API yet. :class:`SimulatedTable` answers the low-level requests this library sends
(typed attribute values, as a boto3 low-level client takes them) with the answers and the
``ClientError`` exceptions botocore gives; ``tests/test_sim_table_differential.py`` replays
recorded request sequences against it and against DynamoDB Local and requires the same answers.
"""
from .simulated import SimulatedTable
from .table import OPERATIONS, KeyAttribute
from .values import format_number

__all__ = ['OPERATIONS', 'KeyAttribute', 'SimulatedTable', 'format_number']
