"""Support code for the torture, fault, process-death and bad-input tests.

* :mod:`_torture.faults`: botocore event hooks that inject throttling, server errors, latency,
  lost responses and outages into one boto3 client, at random or to a script.
* :mod:`_torture.worker`: the program the tests start in child processes (``python -m
  _torture.worker``): contend for locks, or hold one until killed or paused.
* :mod:`_torture.analysis`: checks on what the workers recorded (overlapping holds, counters).

The package lives in ``tests/`` (not in the library) and is imported with ``tests/`` on
``sys.path``, as pytest arranges for test modules and :func:`_torture.worker.child_env` for
children.
"""
