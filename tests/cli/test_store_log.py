"""The store as a run log, end to end: every run and file (absolute paths, failures too),
``-o`` re-runs not counted twice, ``inspect --store PATHS`` and ``--runs``."""

from __future__ import annotations

import shutil
from pathlib import Path

import orjson

from tests.helpers import SAMPLES, run_cli

S1 = SAMPLES / "small-s1.canonical.jsonl"


def test_run_log_counts_each_output_once(tmp_path: Path) -> None:
    (tmp_path / "in").mkdir()
    shutil.copy(S1, tmp_path / "in" / "a.jsonl")
    shutil.copy(SAMPLES / "small-s1.claude-code.jsonl", tmp_path / "in" / "claude.jsonl")
    env = {"COMPACTCTL_DB": str(tmp_path / "state.db")}

    def cli(*args: str, code: int = 0) -> bytes:
        r = run_cli(*args, cwd=tmp_path, env=env)
        assert r.returncode == code, r.stderr.decode()
        return r.stdout

    # night 1 and night 2: the same inputs to the same outputs; then one run in place,
    # over the input and a path that does not exist
    for _ in range(2):
        cli("compact", "--force", "--estimate", "-o", "out/", "in/a.jsonl")
    cli("compact", "--force", "--estimate", "in/a.jsonl", "in/claude.jsonl", "gone.jsonl", code=3)
    saved = 7320 - 2274  # small-s1 --estimate, before and after (tests/cli/test_report_pages)
    doc = orjson.loads(cli("inspect", "--store", "--json"))
    assert doc["tokensSaved"] == 2 * saved  # out/a.jsonl once, in/a.jsonl in place once
    (day,) = doc["compactionsPerDay"]
    # night 2's output was up to date: nothing written, not a change
    assert (day["runs"], day["files"], day["changed"], day["failed"]) == (3, 5, 2, 2)
    runs = orjson.loads(cli("inspect", "--store", "--runs", "--json"))["runs"]
    assert [(r["files"], r["changed"], r["failed"], r["exitCode"]) for r in runs] == [
        (3, 1, 2, 3), (1, 0, 0, 0), (1, 1, 0, 0)
    ]  # fmt: skip
    assert {r["cwd"] for r in runs} == {str(tmp_path)}
    # PATHS: only the output folder's runs, or the input (as input or output)
    only_out = orjson.loads(cli("inspect", "--store", "--json", "out"))
    assert only_out["tokensSaved"] == saved and only_out["paths"] == [str(tmp_path / "out")]
    assert [r["id"] for r in orjson.loads(cli("inspect", "--store", "--runs", "--json", "out"))[
        "runs"]] == [2, 1]  # fmt: skip
    missing = orjson.loads(cli("inspect", "--store", "--json", "gone.jsonl"))
    assert missing["compactionsPerDay"][0]["failed"] == 1
    text = cli("inspect", "--store", "--runs").decode()
    assert text.splitlines()[0].split() == [
        "run", "started", "command", "files", "changed", "unchanged", "failed", "skipped",
        "tokens", "saved", "exit",
    ]  # fmt: skip
    # the rows hold absolute paths, whatever was typed
    import sqlite3

    conn = sqlite3.connect(tmp_path / "state.db")
    rows = conn.execute("SELECT path, output, outcome, error_code FROM run_files").fetchall()
    conn.close()
    a, out = str(tmp_path / "in" / "a.jsonl"), str(tmp_path / "out" / "a.jsonl")
    assert rows == [
        (a, out, "changed", None),
        (a, out, "unchanged", None),  # up to date: nothing written
        (str(tmp_path / "gone.jsonl"), None, "failed", "input"),
        (a, a, "changed", None),
        # named on the command line, another agent's format is refused (a folder skips it)
        (str(tmp_path / "in" / "claude.jsonl"), None, "failed", "notAppendable"),
    ]


def test_dry_run_and_no_store_log_nothing(tmp_path: Path) -> None:
    shutil.copy(S1, tmp_path / "a.jsonl")
    db = tmp_path / "state.db"
    for extra in (("--dry-run",), ("--check",), ("--no-store",)):
        r = run_cli("compact", "--force", "--estimate", "--db", str(db), *extra, "a.jsonl",
                    cwd=tmp_path)  # fmt: skip
        assert r.returncode in (0, 1), r.stderr.decode()
    assert not db.exists()
