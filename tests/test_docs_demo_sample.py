"""docs/cli.rst's sample of the demo's output is what a real run prints.

The page shows a run of ``dynamodb-lock demo`` on DynamoDB Local. Its figures (times, counts,
ports, which worker holds which key) differ from run to run, so each line is compared by its
shape: numbers, worker names and lock holders are wildcards, the words are not. Every line of the
sample (but its ``...``) must have a line of that shape in a real run's output.
"""
from __future__ import annotations

import pathlib
import re
from typing import List

import pytest

from conftest import require_dynamodb_local

CLI_PAGE = pathlib.Path(__file__).resolve().parent.parent / 'docs' / 'cli.rst'



def shape(line: str) -> str:
    """The line with its run-dependent parts replaced by placeholders, spaces collapsed."""
    line = re.sub(r'key-\d+: (?:worker-\d+ \(dead\)|worker-\d+|free)', 'key-K: HOLDER', line)
    line = re.sub(r'worker-\d+', 'worker-W', line)
    line = re.sub(r'key-\d+', 'key-K', line)
    line = re.sub(r'\d+(?:\.\d+)?', 'N', line)
    return ' '.join(line.split())


def documented_sample() -> List[str]:
    page = CLI_PAGE.read_text(encoding='utf-8')
    start = page.index('Progress is shown as it runs:')
    block = page[page.index('.. code-block:: text', start):]
    lines = block.splitlines()[2:]
    sample = []
    for line in lines:
        if line and not line.startswith('    '):
            break
        if line.strip() and line.strip() != '...':
            sample.append(line[4:])
    return sample


def test_the_sample_is_found() -> None:
    sample = documented_sample()
    assert sample[0].startswith('Starting an embedded DynamoDB engine') and sample[-1].startswith('PASS:'), sample
    assert shape('[  5.00s] key-0: worker-3         key-1: worker-0 (dead)  acquisitions: 46') == shape(
        '[ 12.00s] key-0: free key-1: free acquisitions: 52')


@pytest.mark.local
def test_the_documented_sample_output_is_what_the_demo_prints(aws_env: None, monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    from python_dynamodb_lock.__main__ import main

    monkeypatch.setenv('DYNAMODB_LOCAL_DIR', str(require_dynamodb_local()))
    capsys.readouterr()
    code = main(['demo', '--duration', '6'])     # auto: finds DynamoDB Local
    output = capsys.readouterr().out
    assert code == 0, output
    printed = {shape(line) for line in output.splitlines()}
    missing = [line for line in documented_sample() if shape(line) not in printed]
    assert not missing, f'docs/cli.rst shows lines the demo does not print: {missing}\n--- the demo printed:\n{output}'
