"""README.rst's Python examples run as written, against a local engine, and log no WARNING.

Every literal block of README that is Python (it compiles) is run in a child interpreter, each
block in a namespace of its own, the way README tells a reader to run them without AWS:

* the blocks written for AWS (``boto3.resource('dynamodb')``) run unchanged, with the environment
  pointing boto3 at a local engine (``AWS_ENDPOINT_URL_DYNAMODB``, a region and dummy
  credentials), which is what README says for them;
* the block that starts its own engine (``start_engine()``) runs as it is;
* fragments that use ``lock_client`` without making it run after README's own start-up lines
  (those of the first example, up to ``lock_client = DynamoDBLockClient(...)``), and the
  client is closed afterwards; the block that creates the table runs first, with README's
  imports, as README says to create the table once, at deploy time.

Every log record at WARNING or above, from any logger, is reported back and fails the test,
as does an exception. README's links are checked too: a relative link breaks on a package index.
"""
from __future__ import annotations

import json
import os
import pathlib
import re
import subprocess
import sys
import textwrap
from typing import Any, Dict, Iterator, List

import pytest

from python_dynamodb_lock.testing import EmbeddedEngine

PROJECT_DIR = pathlib.Path(__file__).resolve().parent.parent
README = PROJECT_DIR / 'README.rst'
DEFAULT_TABLE = 'DynamoDBLockTable'
#: The text of the library's warning about boto3's default timeouts (botocore waits a minute to
#: connect and a minute to read); the library's part of issue 18 removes it for those defaults.


def literal_blocks(text: str) -> List[str]:
    """The literal blocks of a reStructuredText document (after a paragraph ending in ``::``)."""
    blocks: List[str] = []
    lines = text.splitlines()
    index = 0
    while index < len(lines):
        if lines[index].rstrip().endswith('::'):
            index += 1
            body: List[str] = []
            while index < len(lines) and (not lines[index].strip() or lines[index].startswith((' ', '\t'))):
                body.append(lines[index])
                index += 1
            block = textwrap.dedent('\n'.join(body)).strip('\n')
            if block:
                blocks.append(block + '\n')
        else:
            index += 1
    return blocks


def is_python(block: str) -> bool:
    try:
        compile(block, 'README.rst', 'exec')
    except SyntaxError:
        return False
    return True


def python_blocks() -> List[str]:
    return [block for block in literal_blocks(README.read_text(encoding='utf-8')) if is_python(block)]


def start_up_lines(first_example: str) -> str:
    """README's start-up code: the first example up to the line that makes ``lock_client``."""
    lines = first_example.splitlines()
    end = next(number for number, line in enumerate(lines) if line.startswith('lock_client = '))
    return '\n'.join(lines[:end + 1]) + '\n'


def import_lines(first_example: str) -> str:
    return ''.join(line + '\n' for line in first_example.splitlines() if line.startswith(('import ', 'from ')))


def makes(name: str, block: str) -> bool:
    return re.search(rf'^{name}\s*=', block, re.MULTILINE) is not None


def runnable_programs(blocks: List[str]) -> List[Dict[str, str]]:
    """What the child runs for each block, in order: the table first, then README's order."""
    first = blocks[0]
    programs = []
    for block in blocks:
        if block.startswith(('import ', 'from ')):
            programs.append({'block': block, 'before': '', 'after': ''})
        elif 'lock_client' in block and not makes('lock_client', block):
            programs.append({'block': block, 'before': start_up_lines(first),
                             'after': 'lock_client.close(release_locks=True)\n'})
        else:
            programs.append({'block': block, 'before': import_lines(first), 'after': ''})
    creates_table = [program for program in programs if 'create_dynamodb_table(boto3.' in program['block']]
    return creates_table + [program for program in programs if program not in creates_table]


CHILD = r'''
import json
import logging
import sys
import traceback


class Collect(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.lines = []

    def emit(self, record):
        self.lines.append(f'{record.levelname} {record.name}: {record.getMessage()}')


programs = json.load(open(sys.argv[1]))
results = []
for program in programs:
    collect = Collect()
    logging.getLogger().addHandler(collect)
    error = None
    try:
        namespace = {'__name__': '__readme__'}
        exec(compile(program['before'] + program['block'] + program['after'], 'README.rst', 'exec'), namespace)
    except BaseException:
        error = traceback.format_exc()
    finally:
        logging.getLogger().removeHandler(collect)
    results.append({'block': program['block'], 'error': error, 'warnings': collect.lines})
print(json.dumps(results))
'''


@pytest.fixture(params=['moto_server', pytest.param('dynamodb_local', marks=pytest.mark.local)])
def readme_engine(request: pytest.FixtureRequest) -> Iterator[EmbeddedEngine]:
    """A local engine without README's default table (it is deleted afterwards)."""
    engine: EmbeddedEngine = request.getfixturevalue(request.param)
    client = engine.client()

    def drop_default_table() -> None:
        try:
            client.delete_table(TableName=DEFAULT_TABLE)
        except client.exceptions.ResourceNotFoundException:
            pass

    drop_default_table()
    try:
        yield engine
    finally:
        drop_default_table()
        client.close()


def run_readme(engine: EmbeddedEngine, tmp_path: pathlib.Path) -> List[Dict[str, Any]]:
    programs_file = tmp_path / 'programs.json'
    programs_file.write_text(json.dumps(runnable_programs(python_blocks())))
    env = {name: value for name, value in os.environ.items() if not name.startswith('AWS_')}
    env.update({
        # README: "run unchanged against a local engine when the environment points boto3 at it"
        'AWS_ENDPOINT_URL_DYNAMODB': engine.endpoint_url,
        'AWS_DEFAULT_REGION': 'us-east-1',
        'AWS_ACCESS_KEY_ID': 'testing',
        'AWS_SECRET_ACCESS_KEY': 'testing',
        'AWS_CONFIG_FILE': str(tmp_path / 'no-aws-config'),
        'AWS_SHARED_CREDENTIALS_FILE': str(tmp_path / 'no-aws-credentials'),
        'AWS_EC2_METADATA_DISABLED': 'true',
        'PYTHONPATH': os.pathsep.join(filter(None, [str(PROJECT_DIR), os.environ.get('PYTHONPATH')])),
    })
    result = subprocess.run([sys.executable, '-c', CHILD, str(programs_file)], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stderr
    results: List[Dict[str, Any]] = json.loads(result.stdout.splitlines()[-1])
    return results


def test_readme_has_the_python_examples_this_test_runs() -> None:
    blocks = python_blocks()
    assert len(blocks) >= 5, blocks
    assert "boto3.resource('dynamodb')" in blocks[0] and 'lock_client.close()' in blocks[0]
    assert any('start_engine()' in block for block in blocks)
    assert any('create_dynamodb_table(boto3.client' in block for block in blocks)
    assert not any(block.lstrip().startswith('python -m') for block in blocks)   # shell lines are not Python


def test_readme_examples_run_and_log_no_warning(readme_engine: EmbeddedEngine, tmp_path: pathlib.Path) -> None:
    results = run_readme(readme_engine, tmp_path)
    assert len(results) == len(python_blocks())
    failures = [f"{result['block']}\n{result['error']}" for result in results if result['error']]
    assert not failures, '\n\n'.join(failures)
    warned = [(result['block'], result['warnings']) for result in results if result['warnings']]
    assert not warned, warned


def test_readme_local_engine_example_sets_explicit_retries_and_short_timeouts() -> None:
    example = next(block for block in python_blocks() if 'start_engine()' in block)
    config = re.search(r'config=(Config\(.*?\n\s*\)),\n', example, re.DOTALL)
    assert config is not None, example
    from botocore.config import Config

    made = eval(config.group(1), {'Config': Config})   # README's own expression
    assert made.retries['mode'] == 'standard' and made.retries['total_max_attempts'] <= 3
    assert made.connect_timeout + made.read_timeout <= 20   # within the default safe period


def test_readme_links_are_absolute() -> None:
    """A relative link (``docs/safety.rst``) works on a code host and breaks on a package index."""
    text = README.read_text(encoding='utf-8')
    targets = re.findall(r'`[^`<]*<([^>]+)>`_', text) + re.findall(r'^\.\. _[^:]+:\s*(\S+)', text, re.MULTILINE)
    relative = [target for target in targets if not re.match(r'https?://', target)]
    assert not relative, relative
