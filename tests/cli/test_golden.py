"""The command line gives byte for byte the recorded golden results (``tests/cli/cases``).

Each case file is one test: its case (``golden.CASES``, same name) runs against the code on
the import path (an inherited ``PYTHONPATH`` first, then this repository; see
``golden.base_env``) and its normalised result must equal the file. Re-record with
``python tests/cli/golden.py --write --source <reference checkout>``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.cli import golden

CASE_NAMES = sorted(p.stem for p in golden.CASES_DIR.glob("*.json"))
BY_NAME = {c.name: c for c in golden.CASES}

pytestmark = pytest.mark.slow


def test_case_files_match_the_table() -> None:
    """Every case of the table has a recorded file and every file a case."""
    assert sorted(BY_NAME) == CASE_NAMES


@pytest.mark.parametrize("name", CASE_NAMES)
def test_golden(name: str, _shared_cache: Path) -> None:
    """The case's result equals its recorded file (same args, inputs, outputs, exit code)."""
    if name not in BY_NAME:
        pytest.fail(f"{name}.json has no case in golden.CASES (stale file?)")
    expected = golden.load(name)
    case = BY_NAME[name]
    actual = golden.record(
        case, golden.run_case(case, sys.executable, None, cache_dir=_shared_cache)
    )
    assert not golden.broken(actual), "an input file changed other than by an append"
    if actual != expected:
        pytest.fail(f"golden case {name} differs:\n{golden.diff(expected, actual, name)}", False)
