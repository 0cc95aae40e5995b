"""The runner (:mod:`compactctl.app.runner`): ``run_files`` with a process pool keeps the input
order and takes the largest file first within a window; a stage reading a pipe imports what it
will need while the pipe is still empty (``warm_while_waiting``), imports nothing otherwise,
and writes the same bytes."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from compactctl import cli
from compactctl.app import runner
from compactctl.app.config import Settings
from compactctl.app.report import Report
from tests.helpers import ROOT, SAMPLES


def _stamp(path: str) -> dict[str, Any]:
    """A worker (module level, so the pool can pickle it): when and where it ran."""
    t = time.monotonic_ns()
    time.sleep(0.01)  # both workers are busy before either takes a second file
    return {"path": path, "started": t, "size": os.path.getsize(path)}


def _pooled(paths: list[str], worker: Any) -> list[dict[str, Any]]:
    """``worker`` over ``paths`` through ``run_files`` on a 2-process pool, in order."""
    scope = runner.RunScope(jobs=2, quiet=True)
    settings = Settings({}, "inspect", environ={})
    return list(runner.run_files(paths, worker, scope=scope, settings=settings,
                                 report=Report(), desc="test"))  # fmt: skip


def _pool_share(path: str) -> dict[str, Any]:
    """A worker (module level, so the pool can pickle it): the cores share it was given."""
    from compactctl import tokens

    return {"path": path, "workers": tokens._POOL_WORKERS}


def test_pool_workers_are_told_how_many_share_the_cores(tmp_path: Path) -> None:
    """``--jobs 2``: each pool process runs ``tokens.share_cores(2)`` first, so that its
    token counting takes its share of the cores (``count_threads``), not two threads each."""
    paths = []
    for i in range(4):
        (tmp_path / f"f{i}.jsonl").write_bytes(b"x")
        paths.append(str(tmp_path / f"f{i}.jsonl"))
    results = _pooled(paths, _pool_share)
    assert [r["workers"] for r in results] == [2, 2, 2, 2]
    assert _pool_share(paths[0])["workers"] == 1  # this process is not in a pool


def test_results_in_input_order_and_each_window_largest_first(tmp_path: Path) -> None:
    # 150 files over 3 windows of 64; sizes shuffled by a fixed permutation
    sizes = [(i * 37) % 150 + 1 for i in range(150)]
    paths = []
    for i, size in enumerate(sizes):
        p = tmp_path / f"f{i:03d}.jsonl"
        p.write_bytes(b"x" * size)
        paths.append(str(p))
    results = _pooled(paths, _stamp)
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

    sample = SAMPLES / "small-s1.canonical.jsonl"
    for args in (["inspect", "--json"], ["rules", "--json", "--dry-run", "--no-store"]):
        r = CliRunner().invoke(cli.app, [*args, "--jobs", "0", str(sample)])
        assert r.exit_code == 2 and r.stdout == "", args
        assert "--jobs must be at least 1" in r.stderr


PROBE = """
import sys, compactctl.cli, compactctl.app.runner as runner
before = set(sys.modules)
runner.warm_while_waiting(sys.argv[1:2], ("compactctl.layers.text_rules",))
sys.stdout.write(str("compactctl.layers.text_rules" in set(sys.modules) - before))
"""


def _probe(stdin: int | None, path: str = "-") -> str:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, path],
        stdin=stdin,
        capture_output=True,
        env=env,
        check=True,
        timeout=60,
    )
    return proc.stdout.decode()


def test_warm_imports_only_while_a_pipe_is_empty(tmp_path: Path) -> None:
    # an empty pipe whose writer is still open: the stage would wait, so it imports now
    r, w = os.pipe()
    try:
        assert _probe(r) == "True"
    finally:
        os.close(r)
        os.close(w)
    # data already waiting in the pipe: nothing to hide the import behind
    r, w = os.pipe()
    os.write(w, b"{}\n")
    os.close(w)
    try:
        assert _probe(r) == "False"
    finally:
        os.close(r)
    # a file on stdin, or stdin not among the paths
    f = tmp_path / "s.jsonl"
    f.write_bytes(b"{}\n")
    with open(f, "rb") as fh:
        assert _probe(fh.fileno()) == "False"
    r, w = os.pipe()
    try:
        assert _probe(r, str(f)) == "False"
    finally:
        os.close(r)
        os.close(w)


def test_a_stage_that_warmed_up_writes_the_same_bytes(tmp_path: Path) -> None:
    sample = sorted(SAMPLES.glob("*.canonical.jsonl"))[0].read_bytes()
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "COMPACTCTL_DB": str(tmp_path / "db.sqlite"),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
    }
    argv = [sys.executable, "-m", "compactctl", "rules", "--estimate", "-q", "-"]
    direct = subprocess.run(argv, input=sample, capture_output=True, env=env, check=True)
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
    time.sleep(0.3)  # the stage is waiting on an empty pipe: it warms up
    piped, _ = proc.communicate(sample, timeout=60)
    assert proc.returncode == 0

    def strip_time(data: bytes) -> list[bytes]:
        return [line.split(b'"timestamp"')[0] for line in data.splitlines()]

    assert strip_time(piped) == strip_time(direct.stdout)
    assert piped.startswith(sample)


def test_tiktoken_is_warmed_only_for_exact_counts() -> None:
    """On an empty pipe: ``"estimate"`` imports no tiktoken; ``None`` (the session's
    encoding, exact) imports it."""
    code = (
        "import sys, compactctl.cli, compactctl.app.runner as runner\n"
        "enc = None if sys.argv[1] == 'None' else sys.argv[1]\n"
        "runner.warm_while_waiting(['-'], ('compactctl.formats',), enc)\n"
        "sys.stdout.write(str('tiktoken' in sys.modules))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    got = {}
    for enc in ("estimate", "None"):
        r, w = os.pipe()
        try:
            proc = subprocess.run(
                [sys.executable, "-c", code, enc],
                stdin=r,
                capture_output=True,
                env=env,
                check=True,
                timeout=60,
            )
        finally:
            os.close(r)
            os.close(w)
        got[enc] = proc.stdout.decode()
    assert got == {"estimate": "False", "None": "True"}
