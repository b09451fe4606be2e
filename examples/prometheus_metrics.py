"""Lock metrics for Prometheus: a ``metrics=`` hook that turns the lock client's LockEvents into
``prometheus_client`` counters and histograms.

    pip install prometheus_client

    from prometheus_client import start_http_server
    from prometheus_metrics import PrometheusLockMetrics

    lock_client = DynamoDBLockClient(dynamodb_resource, metrics=PrometheusLockMetrics())
    start_http_server(9100)      # http://localhost:9100/metrics

One instance may serve several lock clients (threaded and asyncio alike): prometheus_client's
metrics are thread-safe, and the hook does nothing but count, so it is as quick as a hook must
be (it runs on the thread where the event happens). No label names the lock's key: keys are
unbounded, and a label per key would grow the time series without end.

Run it: ``python examples/prometheus_metrics.py`` acquires, renews and releases a lock on moto
(``pip install 'moto[dynamodb]'``) and prints what Prometheus would scrape.
"""
from __future__ import annotations

from typing import Any, Optional

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Histogram

from python_dynamodb_lock import LockEvent

#: Buckets for calls to DynamoDB (milliseconds to seconds) and for waits (up to minutes).
CALL_BUCKETS = (0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
WAIT_BUCKETS = (0.01, 0.1, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0)


class PrometheusLockMetrics:
    """A metrics hook: ``DynamoDBLockClient(..., metrics=PrometheusLockMetrics())``.

    :param registry: where the metrics are registered (default: prometheus_client's global one).
    :param namespace: the prefix of every metric name.
    """

    def __init__(self, registry: Optional[CollectorRegistry] = REGISTRY, namespace: str = 'dynamodb_lock') -> None:
        def counter(name: str, documentation: str, labels: Any = ()) -> Counter:
            return Counter(name, documentation, labels, namespace=namespace, registry=registry)

        def histogram(name: str, documentation: str, buckets: Any) -> Histogram:
            return Histogram(name, documentation, namespace=namespace, registry=registry, buckets=buckets)

        self.acquire_attempts = counter(
            'acquire_attempts', 'Conditional writes that tried to acquire a lock, by outcome '
            '(applied, refused: someone holds it, failed) and whether they took over an abandoned lock',
            ['outcome', 'takeover'])
        self.acquire_attempt_seconds = histogram(
            'acquire_attempt_seconds', 'Latency of the conditional writes that try to acquire', CALL_BUCKETS)
        self.acquisitions = counter(
            'acquisitions', 'Locks acquired, by whether they were taken over from a holder presumed dead',
            ['takeover'])
        self.acquire_wait_seconds = histogram(
            'acquire_wait_seconds', 'Time from the call to acquire_lock until the lock was held', WAIT_BUCKETS)
        self.acquire_timeouts = counter(
            'acquire_timeouts', 'acquire_lock calls that gave up (ACQUIRE_TIMEOUT) or try_acquire_lock '
            'calls that found the lock held')
        self.renewals = counter(
            'renewals', 'Heartbeats, by outcome (renewed, failed) and the reason of a failure', ['outcome', 'reason'])
        self.renewal_seconds = histogram('renewal_seconds', 'Latency of the heartbeats that renewed a lock',
                                         CALL_BUCKETS)
        self.in_danger = counter(
            'in_danger', 'Locks not renewed for the safe period (LOCK_IN_DANGER)')
        self.recovered = counter('recovered', 'Locks in danger that a later heartbeat renewed')
        self.lost = counter(
            'lost', 'Locks lost while held, by reason (TAKEN_OVER, ROW_GONE)', ['reason'])
        self.releases = counter(
            'releases', 'Releases, by outcome (released, handed_over: to a waiter of the same client, '
            'stolen: the lock had been taken over, failed)', ['outcome'])
        self.release_seconds = histogram('release_seconds', 'Latency of the releases', CALL_BUCKETS)
        self.force_releases = counter('force_releases', 'Locks of others deleted with force_release_lock')

    def __call__(self, event: LockEvent) -> None:
        """Count one event (the lock client calls this; it never raises into the client)."""
        name, attributes, duration = event.name, event.attributes, event.duration
        if name == 'acquire_attempt':
            self.acquire_attempts.labels(attributes.get('outcome', ''),
                                         _flag(attributes.get('takeover'))).inc()
            self._observe(self.acquire_attempt_seconds, duration)
        elif name == 'acquired':
            self.acquisitions.labels(_flag(attributes.get('takeover'))).inc()
            self._observe(self.acquire_wait_seconds, duration)
        elif name == 'acquire_timed_out':
            self.acquire_timeouts.inc()
        elif name == 'renewed':
            self.renewals.labels('renewed', '').inc()
            self._observe(self.renewal_seconds, duration)
        elif name == 'renewal_failed':
            self.renewals.labels('failed', str(attributes.get('reason') or 'OTHER')).inc()
        elif name == 'in_danger':
            self.in_danger.inc()
        elif name == 'recovered':
            self.recovered.inc()
        elif name in ('stolen', 'replaced_lost'):
            self.lost.labels(str(attributes.get('reason') or 'ROW_GONE')).inc()
        elif name == 'released':
            self.releases.labels('handed_over' if attributes.get('handed_over') else 'released').inc()
            self._observe(self.release_seconds, duration)
        elif name == 'release_stolen':
            self.releases.labels('stolen').inc()
            self.lost.labels('TAKEN_OVER').inc()
        elif name in ('release_failed', 'release_failed_forgotten'):
            self.releases.labels('failed').inc()
        elif name == 'force_released':
            self.force_releases.inc()

    @staticmethod
    def _observe(histogram: Histogram, duration: Optional[float]) -> None:
        if duration is not None:
            histogram.observe(duration)


def _flag(value: Any) -> str:
    return 'true' if value else 'false'


def demo() -> str:
    """Acquire, renew and release a lock on moto; what Prometheus would scrape."""
    import boto3
    from botocore.config import Config
    from moto import mock_aws
    from prometheus_client import generate_latest

    from python_dynamodb_lock.python_dynamodb_lock import DynamoDBLockClient

    registry = CollectorRegistry()
    with mock_aws():
        client = boto3.client('dynamodb', region_name='us-east-1')
        DynamoDBLockClient.create_dynamodb_table(client, billing_mode='PAY_PER_REQUEST')
        resource = boto3.resource('dynamodb', region_name='us-east-1',
                                  config=Config(connect_timeout=1, read_timeout=2,
                                                retries={'mode': 'standard', 'total_max_attempts': 3}))
        with DynamoDBLockClient(resource, metrics=PrometheusLockMetrics(registry),
                                background_heartbeats=False) as lock_client:
            with lock_client.acquire_lock('nightly-report', raise_context_exception=True) as lock:
                lock.extend()
    return generate_latest(registry).decode()


if __name__ == '__main__':
    print(demo())
