"""The Guarantees page names tests that exist: each ``tests/FILE.py::NAME`` it cites is a test
function (or coroutine function) defined at the top level of that file."""
from __future__ import annotations

import ast
import pathlib
import re
from typing import Set

ROOT = pathlib.Path(__file__).resolve().parent.parent
PAGE = ROOT / 'docs' / 'guarantees.rst'
CITATION = re.compile(r'``(tests/[\w/]+\.py)::(\w+)``')


def defined_tests(path: pathlib.Path) -> Set[str]:
    tree = ast.parse(path.read_text(encoding='utf-8'))
    return {node.name for node in tree.body
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith('test_')}


def test_the_page_cites_tests() -> None:
    assert len(CITATION.findall(PAGE.read_text(encoding='utf-8'))) >= 20


def test_every_cited_test_exists() -> None:
    missing = []
    for file_name, test_name in CITATION.findall(PAGE.read_text(encoding='utf-8')):
        path = ROOT / file_name
        if not path.is_file() or test_name not in defined_tests(path):
            missing.append(f'{file_name}::{test_name}')
    assert missing == []
