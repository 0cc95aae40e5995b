"""runner.run_files with a process pool: input order kept, largest file first within a window."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from compactctl import cli
from compactctl.app import runner
from compactctl.app.config import Settings
from compactctl.app.report import Report


def _stamp(path: str) -> dict[str, Any]:
    """A worker (module level, so the pool can pickle it): when and where it ran."""
    t = time.monotonic_ns()
    time.sleep(0.01)  # both workers are busy before either takes a second file
    return {"path": path, "started": t, "size": os.path.getsize(path)}


def test_results_in_input_order_and_each_window_largest_first(tmp_path: Path) -> None:
    # 150 files over 3 windows of 64; sizes shuffled by a fixed permutation
    sizes = [(i * 37) % 150 + 1 for i in range(150)]
    paths = []
    for i, size in enumerate(sizes):
        p = tmp_path / f"f{i:03d}.jsonl"
        p.write_bytes(b"x" * size)
        paths.append(str(p))
    report = Report()
    results = list(
        runner.run_files(
            paths,
            _stamp,
            jobs=2,
            settings=Settings({}, "inspect", environ={}),
            report=report,
            quiet=True,
            desc="test",
        )
    )
    assert [r["path"] for r in results] == paths
    by_start = sorted(results, key=lambda r: r["started"])
    # the pool starts the first window's files largest first: its two largest go first
    first_window = sorted(sizes[:64], reverse=True)
    assert sorted(r["size"] for r in by_start[:2]) == sorted(first_window[:2])
    # and every file of the first window starts before any of the third
    third = {str(p) for p in paths[128:]}
    last_of_first = max(r["started"] for r in results if r["path"] in paths[:64])
    assert all(r["started"] > last_of_first for r in results if r["path"] in third)


def test_json_is_not_started_before_the_run_passes_its_checks(tmp_path: Path) -> None:
    """A usage error found by the run (--jobs 0) leaves stdout empty, not the head of a
    JSON document (``{"files": [`` was written before the check)."""
    from typer.testing import CliRunner

    sample = Path(__file__).resolve().parent.parent / "fixtures/samples/small-s1.canonical.jsonl"
    for args in (["inspect", "--json"], ["rules", "--json", "--dry-run", "--no-store"]):
        r = CliRunner().invoke(cli.app, [*args, "--jobs", "0", str(sample)])
        assert r.exit_code == 2 and r.stdout == "", args
        assert "--jobs must be at least 1" in r.stderr
