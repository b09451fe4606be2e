"""``dynamodb-lock demo``: end to end on DynamoDB Local and on the embedded moto server, and its verdict.

The end-to-end runs use small settings; they check the exit code and the verdict's numbers
(counters equal to increments, no overlapping holds, a takeover after the kill), which the
test recomputes from the printed lines rather than trusting the PASS line alone.
"""
from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys
import uuid
from typing import Any, Dict, Iterator, List

import pytest

from conftest import require_dynamodb_local, skip_or_fail
from python_dynamodb_lock import _demo
from python_dynamodb_lock.__main__ import main
from python_dynamodb_lock._embedded import DYNAMODB_LOCAL_INSTALL_HINT
from python_dynamodb_lock._demo import DemoReport, DemoSettings, Hold, Takeover, find_overlaps

COUNTER_LINE = re.compile(r'^\s+counter (\S+):\s+(\d+), critical sections that incremented it: (\d+)',
                          re.MULTILINE)
OVERLAP_LINE = re.compile(r'^\s+overlapping holds:\s+(\d+)$', re.MULTILINE)
ACQUISITIONS_LINE = re.compile(r'^\s+acquisitions:\s+(\d+) by (\d+) workers', re.MULTILINE)
TAKEOVER_LINE = re.compile(r'took it over (\d+\.\d+) s later')
LOST_LINE = re.compile(r'^\s+locks lost:\s+(\d+) noticed before writing', re.MULTILINE)


@pytest.fixture
def demo_table(dynamodb_local: Any) -> Iterator[str]:
    name = f'demo-{uuid.uuid4().hex[:12]}'
    yield name
    client = dynamodb_local.client()
    try:
        client.delete_table(TableName=name)
    except client.exceptions.ResourceNotFoundException:
        pass


def parse_verdict(output: str) -> Dict[str, Any]:
    counters = {key: (int(counter), int(increments))
                for key, counter, increments in COUNTER_LINE.findall(output)}
    overlaps = OVERLAP_LINE.search(output)
    acquisitions = ACQUISITIONS_LINE.search(output)
    takeover = TAKEOVER_LINE.search(output)
    lost = LOST_LINE.search(output)
    assert overlaps and acquisitions, output
    return {
        'counters': counters,
        'overlaps': int(overlaps.group(1)),
        'acquisitions': int(acquisitions.group(1)),
        'takeover_seconds': float(takeover.group(1)) if takeover else None,
        # A worker starved past its lease (a busy machine) notices the loss and skips its write.
        'lost_before_writing': int(lost.group(1)) if lost else 0,
    }


def assert_sound_verdict(output: str, keys: int) -> None:
    verdict = parse_verdict(output)
    assert verdict['overlaps'] == 0, output
    assert len(verdict['counters']) == keys, output
    for key, (counter, increments) in verdict['counters'].items():
        assert counter == increments, f'{key}: {output}'
    finished = sum(increments for _, increments in verdict['counters'].values())
    assert finished > 0, output
    # Every acquisition finished its critical section except the one cut short by the kill and
    # those whose loss the worker noticed before writing (reported; the write was skipped).
    assert verdict['acquisitions'] == finished + 1 + verdict['lost_before_writing'], output
    assert verdict['takeover_seconds'] is not None, output
    assert 'PASS' in output


def test_demo_against_dynamodb_local(dynamodb_local: Any, demo_table: str, aws_env: None,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    code = main(['--endpoint-url', dynamodb_local.endpoint_url, '--region', 'us-east-1', '--table', demo_table,
                 'demo', '--duration', '6', '--workers', '3', '--keys', '2'])
    output = capsys.readouterr().out
    assert code == 0, output
    assert_sound_verdict(output, keys=2)
    assert 'killing it with SIGKILL' in output and 'took over' in output  # progress was shown
    # The demo removes its counter items; the workers released every lock they held: what is
    # left is one row per lock key, kept marked released (for its fencing token), holding no lock.
    table = dynamodb_local.resource().Table(demo_table)
    items = table.scan(ConsistentRead=True)['Items']
    assert items and all('released_at' in item and item['lease_duration'] == 0 for item in items), items
    assert sorted(item['lock_key'] for item in items) == sorted(set(parse_verdict(output)['counters'])), items


def test_demo_on_the_embedded_moto_server(aws_env: None, capsys: pytest.CaptureFixture[str]) -> None:
    try:
        import moto.moto_server.werkzeug_app  # noqa: F401
    except ImportError:
        message = "moto's server is not installed: pip install 'moto[dynamodb,server]>=5'"
        if os.environ.get('CI', '').strip().lower() in ('true', '1', 'yes'):
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    code = main(['demo', '--engine', 'moto', '--duration', '5', '--workers', '2', '--keys', '1', '--quiet'])
    output = capsys.readouterr().out
    assert code == 0, output
    assert_sound_verdict(output, keys=1)
    assert 'killing it' not in output  # --quiet: the verdict only


PROJECT_DIR = pathlib.Path(__file__).resolve().parent.parent


def run_demo_command(*options: str) -> subprocess.CompletedProcess[str]:
    """``python -m python_dynamodb_lock demo`` as README runs it, from the checkout, with this
    checkout's package first on the path; its workers log to the same stderr."""
    env = {**os.environ, 'PYTHONPATH': os.pathsep.join(filter(None, [str(PROJECT_DIR), os.environ.get('PYTHONPATH')]))}
    return subprocess.run([sys.executable, '-m', 'python_dynamodb_lock', '-v', 'demo', *options],
                          cwd=PROJECT_DIR, env=env, capture_output=True, text=True, timeout=300, check=False)


def require_moto_server() -> None:
    try:
        import moto.moto_server.werkzeug_app  # noqa: F401
    except ImportError:
        skip_or_fail("moto's server is not installed: pip install 'moto[dynamodb,server]>=5'")


@pytest.mark.parametrize('engine', ['moto', pytest.param('dynamodb-local', marks=pytest.mark.local)])
def test_the_demo_command_logs_no_warning(engine: str, aws_env: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """README's first command prints no WARNING: the demo's own clients fit its 1.5 s safe
    period. ``-v`` shows the parent's log from INFO up; the workers log WARNING and above."""
    if engine == 'moto':
        require_moto_server()
    else:
        monkeypatch.setenv('DYNAMODB_LOCAL_DIR', str(require_dynamodb_local()))
    result = run_demo_command('--engine', engine, '--duration', '4', '--workers', '3', '--keys', '2')
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert 'PASS' in result.stdout and 'python_dynamodb_lock._embedded: ' in result.stderr, output  # -v took
    assert 'WARNING' not in output and 'ERROR' not in output, output


def test_the_demo_clients_fit_the_safe_period() -> None:
    for lease in (0.2, 2.0, 60.0):
        settings = DemoSettings(lease_duration=lease)
        config = _demo.client_config(settings.safe_period)
        assert config.connect_timeout + config.read_timeout <= settings.safe_period
        assert config.connect_timeout > 0 and config.read_timeout > 0
    connection = _demo.Connection('http://127.0.0.1:9', None, None, dummy_credentials=True, safe_period=1.5)
    client = connection.resource().meta.client
    assert (client.meta.config.connect_timeout, client.meta.config.read_timeout) == (0.5, 1.0)


def test_the_demo_fails_with_the_install_hint_of_an_engine_asked_for_by_name(
        tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv('DYNAMODB_LOCAL_DIR', str(tmp_path / 'missing'))
    assert main(['demo', '--engine', 'dynamodb-local']) == 1
    err = capsys.readouterr().err
    assert 'the engine asked for with --engine dynamodb-local could not be started' in err
    assert DYNAMODB_LOCAL_INSTALL_HINT in err
    assert "Install moto's server" not in err and 'Traceback' not in err


# --------------------------------------------------------------------------------------------
# The verdict itself
# --------------------------------------------------------------------------------------------

def test_find_overlaps_catches_intersecting_holds_of_one_key() -> None:
    holds = [Hold(1, 'a', 10.0, 11.0), Hold(2, 'a', 10.5, 12.0), Hold(3, 'b', 10.2, 10.8)]
    overlaps = find_overlaps(holds)
    assert [(first.worker, second.worker) for first, second in overlaps] == [(1, 2)]


def test_find_overlaps_catches_a_hold_inside_a_long_one() -> None:
    holds = [Hold(1, 'a', 0.0, 10.0), Hold(2, 'a', 1.0, 2.0), Hold(3, 'a', 3.0, 4.0), Hold(4, 'a', 11.0, 12.0)]
    assert [(first.worker, second.worker) for first, second in find_overlaps(holds)] == [(1, 2), (1, 3)]


def test_find_overlaps_accepts_back_to_back_holds() -> None:
    holds = [Hold(2, 'a', 11.0, 12.0), Hold(1, 'a', 10.0, 11.0), Hold(1, 'b', 10.0, 11.0)]
    assert find_overlaps(holds) == []


def _report(counters: Dict[str, int], increments: Dict[str, int], holds: List[Hold]) -> DemoReport:
    report = DemoReport(settings=DemoSettings(keys=len(counters)), engine_name='test',
                        acquisitions=sum(increments.values()) + 1, counters=counters, increments=increments,
                        holds=holds, takeover=Takeover('key-0', killed_at=5.0, taker=1, taken_at=7.2))
    report.overlaps = find_overlaps(holds)
    return report


def test_verdict_fails_on_lost_updates() -> None:
    report = _report({'key-0': 4, 'key-1': 3}, {'key-0': 5, 'key-1': 3}, [])
    assert not report.passed
    lines = '\n'.join(report.verdict_lines())
    assert 'LOST UPDATES' in lines and lines.endswith('FAIL: see above.')


def test_verdict_fails_on_overlap_and_without_takeover() -> None:
    overlapping = _report({'key-0': 2}, {'key-0': 2}, [Hold(1, 'key-0', 0, 2), Hold(2, 'key-0', 1, 3)])
    assert not overlapping.passed
    assert 'overlapping holds:  1' in '\n'.join(overlapping.verdict_lines())
    no_takeover = _report({'key-0': 2}, {'key-0': 2}, [])
    no_takeover.takeover = Takeover('key-0', killed_at=5.0)
    assert not no_takeover.passed
    clean = _report({'key-0': 2}, {'key-0': 2}, [Hold(1, 'key-0', 0, 1), Hold(2, 'key-0', 1.5, 3)])
    assert clean.passed


def test_demo_exit_code_is_1_when_the_verdict_fails(monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    failing = _report({'key-0': 1}, {'key-0': 2}, [])
    monkeypatch.setattr(_demo, 'run_demo', lambda settings, out: failing)
    assert main(['demo', '--keys', '1']) == 1


def test_demo_reports_a_missing_engine_without_traceback(monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    from python_dynamodb_lock import _embedded

    def no_engine(prefer: str = 'auto') -> Any:
        raise _embedded.EngineNotInstalledError('No local DynamoDB engine is available.')

    monkeypatch.setattr(_embedded, 'start_embedded_engine', no_engine)
    assert main(['demo']) == 1
    err = capsys.readouterr().err
    assert 'No local DynamoDB engine' in err and '--endpoint-url' in err and 'Traceback' not in err
