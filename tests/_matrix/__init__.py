"""The combination matrix of ``tests/test_matrix.py``: every acquire entry point x both lock
clients x each feature (issue 27).

* :mod:`_matrix.entries` -- the five entry points, which options each accepts (read from their
  signatures), and one way to call any of them on either client;
* :mod:`_matrix.checks` -- the invariants a user relies on, checked from another client and by
  reading the table;
* :mod:`_matrix.cells` -- one function per feature: the cell's scenario and its checks
  (holding, refusals, dead holders), with :mod:`_matrix.interrupts` (cancellation) and
  :mod:`_matrix.readers` (a stream of readers in front of a writer).
"""
