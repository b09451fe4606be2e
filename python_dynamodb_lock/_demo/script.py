"""The demo from start to verdict (:func:`run_demo`): engine, table, workers, counters, verdict."""
from __future__ import annotations

import signal
import threading
from typing import Callable, TextIO

from .engine import Connection, delete_counters, prepare_table, read_counters, start_engine
from .output import Printer
from .parent import run_workers
from .settings import DemoSettings
from .verdict import DemoReport, find_overlaps

__all__ = ['run_demo']


def run_demo(settings: DemoSettings, out: TextIO) -> DemoReport:
    """Run the demo, printing progress and the verdict to ``out``; returns the report.

    Raises:
        ValueError: invalid settings.
        DemoError: no embedded engine could be started, or the workers did not start.
        DynamoDBLockError, botocore errors: the table could not be created or used.
    """
    settings.validate()
    printer = Printer(out, settings.quiet)
    engine = None
    restore_sigterm = _interrupt_on_sigterm()
    try:
        if settings.endpoint_url is None:
            engine = start_engine(settings, printer)
            connection = Connection(engine.endpoint_url, None, None, dummy_credentials=True,
                                    safe_period=settings.safe_period)
            engine_name = engine.name
        else:
            connection = Connection(settings.endpoint_url, settings.region_name, settings.profile_name,
                                    dummy_credentials=False, safe_period=settings.safe_period)
            engine_name = settings.endpoint_url
            printer.progress(f'Using the DynamoDB endpoint {settings.endpoint_url}')
        resource = connection.resource()
        prepare_table(settings, resource, printer)
        report = DemoReport(settings=settings, engine_name=engine_name)
        run_workers(settings, connection, report, printer)
        report.counters = read_counters(settings, resource)
        report.overlaps = find_overlaps(report.holds)
        delete_counters(settings, resource)
        printer.always('')
        for line in report.verdict_lines():
            printer.always(line)
        return report
    finally:
        if engine is not None:
            engine.stop()
        restore_sigterm()


def _interrupt_on_sigterm() -> Callable[[], None]:
    """Turn SIGTERM into KeyboardInterrupt while the demo runs, so its cleanup (stopping the
    workers and the engine) runs on ``kill`` as on Ctrl-C. Returns the function that undoes it."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, 'SIGTERM'):
        return lambda: None

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(f'signal {signum}')

    previous = signal.signal(signal.SIGTERM, interrupt)

    def restore() -> None:
        signal.signal(signal.SIGTERM, previous)
    return restore

