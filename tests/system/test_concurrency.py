"""Concurrency (docs/design.md section 6): an agent writing, other compactctl runs, locks.

- An agent-like writer (tests/agent_writer.py: large lines, lines written in several
  ``write()`` calls, no lock) appends while compactctl runs several times on the same file:
  no line is interleaved, glued or lost; the writer's lines are all there, intact and in
  order; our records are whole lines.
- Two compactctl processes on the same file at once: one waits for the lock, the other's
  events are not appended twice.
- A lock held too long: exit code 75 and a clear message; nothing written.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from tests.helpers import SAMPLES
from tests.system.agent_writer import record

HERE = Path(__file__).resolve().parent
SMALL = (SAMPLES / "small-s1.canonical.jsonl").read_bytes()
pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="uses /proc and flock")


def _cli(*args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "compactctl", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def _finish(proc: subprocess.Popen[bytes]) -> tuple[int, bytes, bytes]:
    out, err = proc.communicate(timeout=300)
    return proc.returncode, out, err


def test_agent_writing_while_compactctl_runs(tmp_path: Path) -> None:
    path = tmp_path / "live.jsonl"
    path.write_bytes(SMALL)
    stop = tmp_path / "stop"
    seed = 7
    writer = subprocess.Popen(
        [sys.executable, str(HERE / "agent_writer.py"), str(path), str(seed), str(stop)],
        stdout=subprocess.PIPE,
    )
    reports = []
    try:
        time.sleep(0.3)  # the writer is under way (its first large line is written in pieces)
        for args in (
            ["compact", "--force"],
            ["rules"],
            ["compact", "--force"],
            ["dedup"],
            ["compact", "--force", "--summary-format", "task-state"],
            ["rules"],
        ):
            code, out, err = _finish(_cli(*args, "--no-store", "--json", str(path)))
            assert code == 0, err.decode()
            assert b"Traceback" not in err
            reports.append(orjson.loads(out)["files"][0])
    finally:
        stop.touch()
        written = int(writer.communicate(timeout=60)[0])
    assert writer.returncode == 0
    data = path.read_bytes()
    assert data.startswith(SMALL)  # nothing already in the file changed
    assert data.endswith(b"\n")
    lines = data.split(b"\n")[:-1]
    records = []
    for number, line in enumerate(lines, 1):
        try:
            obj = orjson.loads(line)
        except orjson.JSONDecodeError:  # an interleaved or glued line
            pytest.fail(f"line {number} does not parse: {line[:120]!r}...{line[-60:]!r}")
        assert isinstance(obj, dict), number
        records.append((line, obj))
    ours = [(line, r) for line, r in records if r.get("type") in {"compact", "summary"}]
    agents = [line for line, r in records if str(r.get("uuid", "")).startswith("w-")]
    # the writer's lines: all present, byte for byte, in order
    assert written > 100
    assert agents == [record(seed, i)[:-1] for i in range(written)]
    assert sum(len(line) for line in agents) > 3_000_000  # the large lines went through
    # our records: whole lines, each event once, as many as the runs reported appending
    uuids = [r["uuid"] for _, r in ours]
    assert len(uuids) == len(set(uuids))
    assert len(ours) == sum(r["appended"] for r in reports) > 0
    assert not any(r["tornLine"] for r in reports)
    assert len(records) == SMALL.count(b"\n") + written + len(ours)


def _append_fds(pid: int, path: Path) -> int:
    """How many descriptors ``pid`` has open on ``path`` with ``O_APPEND`` (the append path)."""
    count = 0
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return 0
    for fd in fds:
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") != str(path):
                continue
            flags = Path(f"/proc/{pid}/fdinfo/{fd}").read_text().split("flags:")[1].split()[0]
        except (OSError, IndexError):
            continue
        if int(flags, 8) & os.O_APPEND:
            count += 1
    return count


@pytest.mark.parametrize("command", [["compact", "--force"], ["rules"]])
def test_two_runs_at_once_append_each_event_once(tmp_path: Path, command: list[str]) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(SMALL)
    # hold the lock until both runs have planned and are waiting to append: both then
    # hold the same plan, and the lock alone decides
    fd = os.open(path, os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX)
    procs = [_cli(*command, "--no-store", "--json", str(path)) for _ in range(2)]
    try:
        deadline = time.monotonic() + 120
        while not all(_append_fds(p.pid, path) for p in procs):
            assert all(p.poll() is None for p in procs), "a run ended without waiting"
            assert time.monotonic() < deadline
            time.sleep(0.01)
        time.sleep(0.2)  # both are polling for the lock now
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
    results = [_finish(p) for p in procs]
    assert [code for code, _, _ in results] == [0, 0], [err for _, _, err in results]
    docs = [orjson.loads(out) for _, out, _ in results]
    reports = [doc["files"][0] for doc in docs]
    appended = sorted((r["appended"], r["alreadyPresent"]) for r in reports)
    n = appended[1][0]
    assert n >= 1 and appended == [(0, n), (n, 0)]  # one wrote, the other waited and skipped
    # success only for what landed: the run that lost saved nothing and wrote nothing
    (won, won_doc), (lost, lost_doc) = sorted(
        zip(reports, docs, strict=True), key=lambda rd: -rd[0]["appended"]
    )
    assert won["written"] == str(path) and won["outcome"] == "changed"
    assert won["tokensSaved"] > 0 and won_doc["totals"]["tokensSaved"] == won["tokensSaved"]
    assert lost["written"] is None and lost["outcome"] == "unchanged"
    assert lost["tokensSaved"] == 0 and lost_doc["totals"]["tokensSaved"] == 0
    assert lost["reason"] == (
        f"another run appended the {n} planned event{'s' if n != 1 else ''} first "
        "(nothing written by this run)"
    )
    if "tokensBefore" in won:  # compact: the file's context now is the winner's after
        assert lost["tokensBefore"] == lost["tokensAfter"] == won["tokensAfter"]
    data = path.read_bytes()
    assert data.startswith(SMALL)
    new = [orjson.loads(x) for x in data[len(SMALL) :].splitlines()]
    assert len(new) == n
    assert len({r["uuid"] for r in new}) == n


_HOLDER = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
fcntl.flock(fd, fcntl.LOCK_EX)
print("locked", flush=True)
sys.stdin.read()
"""


def test_lock_held_too_long_gives_exit_75(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(SMALL)
    other = tmp_path / "other.jsonl"
    other.write_bytes(SMALL)
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == b"locked\n"
        started = time.monotonic()
        code, _, err = _finish(
            _cli("compact", "--force", "--no-store", "--lock-timeout", "0.5", str(path))
        )
        assert code == 75
        message = err.decode()
        assert f"{path}: another process has held the lock for 0.5s" in message
        assert "nothing was written" in message and "--lock-timeout" in message
        assert "Traceback" not in message
        assert path.read_bytes() == SMALL
        # with another, unlocked file in the same run: that one is done, the exit is 75
        code, out, err = _finish(
            _cli(
                "rules", "--no-store", "--json", "--jobs", "1", "--lock-timeout", "0.5",
                str(path), str(other),
            )
        )  # fmt: skip
        assert code == 75, err.decode()
        doc = orjson.loads(out)
        locked, done = doc["files"]  # in input order, the locked one failed
        assert (locked["path"], locked["outcome"]) == (str(path), "failed")
        assert (locked["error"]["code"], locked["error"]["exitCode"]) == ("lockTimeout", 75)
        assert (done["path"], done["outcome"], done["appended"]) == (str(other), "changed", 1)
        assert [e["path"] for e in doc["totals"]["errors"]] == [str(path)]
        assert path.read_bytes() == SMALL
        assert time.monotonic() - started < 60
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(10)


def _tree(tmp_path: Path, n: int = 3) -> Path:
    tree = tmp_path / "tree"
    for i in range(n):
        (tree / f"p{i}").mkdir(parents=True)
        (tree / f"p{i}" / "s.jsonl").write_bytes(SMALL)
    return tree


def test_two_runs_into_one_output_folder_leave_each_output_with_its_own_record(
    tmp_path: Path,
) -> None:
    """Two ``compact -o out/`` runs at once over the same tree (two cron jobs, a retry
    beside a slow run), over 8 sessions, three times: each output must be left with the
    record of the run that wrote it, so the next run finds everything up to date. Before
    the ``-o`` folder's write lock (compactctl.app.provenance.writing), one run's record
    could land after the other's output (the summaries carry the time of the run, so their
    bytes differ), and the next run refused that output, "changed since compactctl wrote
    it", every night after (a fresh-user trial: 2 pairs of 10)."""
    tree = _tree(tmp_path, 8)
    for attempt in range(3):
        out = tmp_path / f"out{attempt}"
        runs = [_cli("compact", "--force", "-q", "-o", f"{out}/", str(tree)) for _ in range(2)]
        for proc in runs:
            code, _, err = _finish(proc)
            assert code == 0, err.decode()
        code, _, err = _finish(_cli("compact", "--force", "-o", f"{out}/", str(tree)))
        assert (code, err.decode().splitlines()[-1]) == (
            0, "0 files compacted, 8 up to date (nothing written)."
        ), (attempt, err.decode())  # fmt: skip


def test_an_output_folder_held_by_another_run_is_waited_for(tmp_path: Path) -> None:
    """The ``-o`` folder's write lock is honoured: while another process holds it, a run
    waits ``--lock-timeout`` seconds, then exits 75 having written no output."""
    tree = _tree(tmp_path, 1)
    out = tmp_path / "out"
    (out / ".compactctl").mkdir(parents=True)
    fd = os.open(out / ".compactctl" / ".lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        code, _, err = _finish(
            _cli("compact", "--force", "--lock-timeout", "1", "-o", f"{out}/", str(tree))
        )
    finally:
        os.close(fd)
    assert code == 75, err.decode()
    assert "another process has held the lock for 1s; nothing was written" in err.decode()
    assert not (out / "p0" / "s.jsonl").exists()
