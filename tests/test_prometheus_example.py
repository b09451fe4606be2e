"""``examples/prometheus_metrics.py``: the LockEvents of real lock operations, as the samples
Prometheus would scrape from a prometheus_client registry.

Both clients, on moto and on DynamoDB Local: an acquire and release, a takeover of an abandoned
lock, a timeout, heartbeats (one failed), danger and recovery, a stolen lock, a force release.
"""
from __future__ import annotations

import datetime
import importlib.util
import sys
from pathlib import Path
from typing import Any, Dict, Optional

import pytest
from helpers import FaultInjector, LockClients

from python_dynamodb_lock.python_dynamodb_lock import DynamoDBLockError
from python_dynamodb_lock.testing import LockTable

prometheus_client = pytest.importorskip('prometheus_client')

EXAMPLE = Path(__file__).resolve().parent.parent / 'examples' / 'prometheus_metrics.py'
seconds = datetime.timedelta


def load_example() -> Any:
    spec = importlib.util.spec_from_file_location('prometheus_metrics_example', EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


example = load_example()


class Scrape:
    """The samples of one registry."""

    def __init__(self, registry: Any) -> None:
        self.registry = registry

    def value(self, name: str, **labels: str) -> float:
        value: Optional[float] = self.registry.get_sample_value(name, labels)
        return 0.0 if value is None else value

    def count(self, histogram: str) -> float:
        return self.value(f'{histogram}_count')

    def total(self, histogram: str) -> float:
        return self.value(f'{histogram}_sum')


@pytest.fixture
def scrape() -> Scrape:
    return Scrape(prometheus_client.CollectorRegistry())


@pytest.fixture
def metrics(scrape: Scrape) -> Any:
    return example.PrometheusLockMetrics(scrape.registry)


def test_acquire_takeover_and_release(engine: LockTable, clients: LockClients, scrape: Scrape, metrics: Any) -> None:
    clock = clients.clock
    client = clients.make(metrics=metrics)
    client.acquire_lock('plain').release()
    assert scrape.value('dynamodb_lock_acquisitions_total', takeover='false') == 1
    assert scrape.value('dynamodb_lock_acquire_attempts_total', outcome='applied', takeover='false') == 1
    assert scrape.value('dynamodb_lock_releases_total', outcome='released') == 1
    assert scrape.count('dynamodb_lock_acquire_wait_seconds') == 1
    assert scrape.total('dynamodb_lock_acquire_wait_seconds') == 0.0
    assert scrape.count('dynamodb_lock_release_seconds') == 1

    engine.put_lock_row('abandoned', lease_duration=10, owner_name='dead-process')
    with clock.auto_advance_in_current_thread():
        lock = client.acquire_lock('abandoned', retry_period=seconds(seconds=3), retry_timeout=seconds(seconds=60))
    assert lock.took_over_from.owner_name == 'dead-process'
    assert scrape.value('dynamodb_lock_acquisitions_total', takeover='true') == 1
    assert scrape.value('dynamodb_lock_acquire_attempts_total', outcome='refused', takeover='false') == 1
    assert scrape.value('dynamodb_lock_acquire_attempts_total', outcome='applied', takeover='true') == 1
    assert scrape.count('dynamodb_lock_acquire_wait_seconds') == 2
    assert scrape.total('dynamodb_lock_acquire_wait_seconds') == 12.0      # fake seconds waited
    assert scrape.value('dynamodb_lock_acquire_wait_seconds_bucket', le='10.0') == 1
    assert scrape.value('dynamodb_lock_acquire_wait_seconds_bucket', le='30.0') == 2
    lock.release()
    assert scrape.value('dynamodb_lock_releases_total', outcome='released') == 2

    engine.put_lock_row('busy', owner_name='alive')
    with clock.auto_advance_in_current_thread(), pytest.raises(DynamoDBLockError):
        client.acquire_lock('busy', retry_period=seconds(seconds=1), retry_timeout=seconds(seconds=2))
    assert scrape.value('dynamodb_lock_acquire_timeouts_total') == 1


def test_heartbeats_danger_and_loss(engine: LockTable, clients: LockClients, scrape: Scrape, metrics: Any) -> None:
    clock = clients.clock
    client = clients.make(metrics=metrics)
    lock = client.acquire_lock('kept')
    client.send_heartbeats()
    assert scrape.value('dynamodb_lock_renewals_total', outcome='renewed', reason='') == 1
    assert scrape.count('dynamodb_lock_renewal_seconds') == 1
    with FaultInjector(engine.resource) as faults:
        faults.fail_calls('UpdateItem', code='InternalServerError', status=500, times=None)
        client.send_heartbeats()
        clock.advance(25)
        client.check_locks()
    assert scrape.value('dynamodb_lock_renewals_total', outcome='failed', reason='UNREACHABLE') == 1
    assert scrape.value('dynamodb_lock_in_danger_total') == 1
    client.send_heartbeats()
    assert scrape.value('dynamodb_lock_recovered_total') == 1
    assert scrape.value('dynamodb_lock_renewals_total', outcome='renewed', reason='') == 2

    engine.steal_row('kept', owner_name='the-thief')
    client.send_heartbeats()
    assert scrape.value('dynamodb_lock_lost_total', reason='TAKEN_OVER') == 1
    lock.release()                                        # lost already: nothing is counted
    assert scrape.value('dynamodb_lock_releases_total', outcome='released') == 0

    other = client.acquire_lock('other')
    engine.steal_row('other', owner_name='the-thief')
    other.release()                                       # the release finds it taken over
    assert scrape.value('dynamodb_lock_releases_total', outcome='stolen') == 1
    assert scrape.value('dynamodb_lock_lost_total', reason='TAKEN_OVER') == 2


def test_force_release_and_the_exposition(engine: LockTable, clients: LockClients, scrape: Scrape,
                                          metrics: Any) -> None:
    holder = clients.make(owner_name='holder')
    operator = clients.make(owner_name='operator', metrics=metrics)
    holder.acquire_lock('stuck')
    assert operator.force_release_lock(operator.get_lock('stuck'))
    assert scrape.value('dynamodb_lock_force_releases_total') == 1
    text = prometheus_client.generate_latest(scrape.registry).decode()
    for name in ('dynamodb_lock_acquire_attempts_total', 'dynamodb_lock_acquisitions_total',
                 'dynamodb_lock_acquire_wait_seconds_bucket', 'dynamodb_lock_renewals_total',
                 'dynamodb_lock_lost_total', 'dynamodb_lock_releases_total', 'dynamodb_lock_force_releases_total 1.0'):
        assert name in text, name


def test_one_instance_serves_several_clients_and_a_custom_namespace(engine: LockTable, clients: LockClients,
                                                                    scrape: Scrape) -> None:
    metrics = example.PrometheusLockMetrics(scrape.registry, namespace='jobs_lock')
    first = clients.make(metrics=metrics)
    second = clients.make(metrics=metrics)
    first.acquire_lock('a').release()
    second.acquire_lock('b').release()
    assert scrape.value('jobs_lock_acquisitions_total', takeover='false') == 2


def test_the_example_runs_as_a_script() -> None:
    pytest.importorskip('moto')
    output = example.demo()
    samples: Dict[str, str] = dict(line.rsplit(' ', 1) for line in output.splitlines()
                                   if line and not line.startswith('#'))
    assert samples['dynamodb_lock_acquisitions_total{takeover="false"}'] == '1.0'
    assert samples['dynamodb_lock_renewals_total{outcome="renewed",reason=""}'] == '1.0'
    assert samples['dynamodb_lock_releases_total{outcome="released"}'] == '1.0'
