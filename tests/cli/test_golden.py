"""The command line gives byte for byte the recorded golden results (``tests/cli/cases``).

Each case file is one test: its case (``golden.CASES``, same name) runs against the code on
the import path (an inherited ``PYTHONPATH`` first, then this repository; see
``golden.base_env``) and its normalised result must equal the file. Re-record with
``python tests/cli/golden.py --write --source <reference checkout>``.

Every case is a few ``python -m compactctl`` subprocesses, mostly waiting on process start-up,
so the cases selected for the run are started together on a small thread pool
(:func:`golden_runs`, ``COMPACTCTL_GOLDEN_JOBS`` workers, default 4) as soon as the first
golden test needs them; each test then waits for its own case only and compares it, so every
case still passes or fails on its own.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tests.cli import golden

CASE_NAMES = sorted(p.stem for p in golden.CASES_DIR.glob("*.json"))
BY_NAME = {c.name: c for c in golden.CASES}
JOBS = int(os.environ.get("COMPACTCTL_GOLDEN_JOBS", "4"))
"""Cases run at once (threads, each waiting on its case's subprocesses)."""

pytestmark = pytest.mark.slow


def test_case_files_match_the_table() -> None:
    """Every case of the table has a recorded file and every file a case."""
    assert sorted(BY_NAME) == CASE_NAMES


def _run(case: golden.Case, cache: Path) -> dict[str, Any]:
    """The case file content of one run of ``case``, against the code on the import path."""
    return golden.record(case, golden.run_case(case, sys.executable, None, cache_dir=cache))


@pytest.fixture(scope="session")
def golden_runs(
    request: pytest.FixtureRequest, _shared_cache: Path
) -> Iterator[dict[str, Future[dict[str, Any]]]]:
    """The runs of the golden cases selected in this session, started at once on a thread
    pool in the order the tests will ask for them: ``{case name: future of its result}``.

    Under pytest-xdist a worker collects every test but runs only those sent to it, so this
    file must run on one worker: ``--dist loadfile``, as ``make test`` runs it (with
    ``--dist load`` every worker would run every case)."""
    selected = [
        item.callspec.params["name"]
        for item in request.session.items
        if getattr(item, "originalname", None) == "test_golden"
        and item.path == Path(__file__)
        and hasattr(item, "callspec")
    ]
    with ThreadPoolExecutor(max_workers=max(JOBS, 1), thread_name_prefix="golden") as pool:
        runs = {
            name: pool.submit(_run, BY_NAME[name], _shared_cache)
            for name in selected
            if name in BY_NAME
        }
        yield runs
        for run in runs.values():
            run.cancel()  # (an interrupted session does not wait for the rest)


@pytest.mark.parametrize("name", CASE_NAMES)
def test_golden(
    name: str, golden_runs: dict[str, Future[dict[str, Any]]], _shared_cache: Path
) -> None:
    """The case's result equals its recorded file (same args, inputs, outputs, exit code)."""
    if name not in BY_NAME:
        pytest.fail(f"{name}.json has no case in golden.CASES (stale file?)")
    expected = golden.load(name)
    run = golden_runs.get(name)
    actual = run.result() if run is not None else _run(BY_NAME[name], _shared_cache)
    assert not golden.broken(actual), "an input file changed other than by an append"
    if actual != expected:
        pytest.fail(f"golden case {name} differs:\n{golden.diff(expected, actual, name)}", False)
