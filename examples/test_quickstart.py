"""The test of the documentation's Quick start (docs/quickstart.rst, step 4).

It needs the ``testing`` extra (``python -m pip install '.[testing]'``), whose pytest plugin
gives the ``dynamodb_lock_*`` fixtures. Run it with ``python -m pytest examples/test_quickstart.py``.
"""
# -- the job and its test
from python_dynamodb_lock.python_dynamodb_lock import DynamoDBLockClient


def run_nightly_report(lock_client: DynamoDBLockClient) -> str:
    """Run the report unless another worker is running it."""
    lock = lock_client.try_acquire_lock('nightly-report', raise_context_exception=True)
    if lock is None:
        return 'skipped: another worker has it'
    with lock:
        return 'done'


def test_the_report_runs_on_one_worker_at_a_time(dynamodb_lock_table, dynamodb_lock_client):
    other_worker = dynamodb_lock_table.lock_client()
    held = other_worker.acquire_lock('nightly-report')

    assert run_nightly_report(dynamodb_lock_client) == 'skipped: another worker has it'

    held.release()
    assert run_nightly_report(dynamodb_lock_client) == 'done'
