"""A store that really fails after the append (issue 14, point 3), through the command line.

tests/unit/app/test_store_consistency.py replaces ``Store.finish_run`` with a function that
raises. Here nothing of the store is replaced: the database and its ``-wal`` are made
immutable (``chattr +i``: the kernel then refuses every write, even through the descriptors
SQLite already holds) in the moment after the transcript was appended, in a real
``compactctl`` process. Not the ``-shm``, which SQLite maps: a write to that mapping would be
SIGBUS, a crash rather than a failing store. The only hook is that moment: it is
microseconds long, so no outside process can hit it reliably; the child wraps
``Session.append`` to run ``chattr`` right after it returns.

Then: exit 3, ``appended N bytes to FILE; store not updated: REASON`` with N the bytes the
file grew, no history row; the attribute removed, the next run (another process) appends
nothing, warns, and records the missing history row from the transcript; a third records
nothing more. Skipped, with the reason, where ``chattr +i`` is impossible (no
``CAP_LINUX_IMMUTABLE``, or a file system without the attribute).
"""

from __future__ import annotations

import os
import re
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import SAMPLES, run_cli

SAMPLE = (SAMPLES / "small-s1.canonical.jsonl").read_bytes()

CHILD = """\
import subprocess, sys
from compactctl.session import Session

db = sys.argv.pop(1)
original = Session.append

def append(self, events, **kw):
    done = original(self, events, **kw)
    for suffix in ("", "-wal"):
        subprocess.run(["chattr", "+i", db + suffix], capture_output=True)
    return done

Session.append = append
sys.argv[0] = "compactctl"
from compactctl.cli import main
main()
"""


def _chattr(path: Path, flag: str) -> bool:
    exe = shutil.which("chattr")
    if exe is None or not path.exists():
        return False
    return subprocess.run([exe, flag, str(path)], capture_output=True).returncode == 0


@pytest.fixture
def immutable_possible(tmp_path: Path) -> None:
    probe = tmp_path / "probe"
    probe.write_bytes(b"x")
    if not _chattr(probe, "+i"):
        pytest.skip("chattr +i is not possible here (no chattr, no CAP_LINUX_IMMUTABLE, or a "
                    "file system without the attribute)")  # fmt: skip
    try:
        with pytest.raises(PermissionError):
            probe.write_bytes(b"y")
    finally:
        _chattr(probe, "-i")


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "store.db"
    yield path
    for suffix in ("", "-wal", "-shm"):
        _chattr(Path(f"{path}{suffix}"), "-i")


def _history(db: Path) -> list[tuple[str, str, str]]:
    conn = sqlite3.connect(db)
    try:
        rows = conn.execute("SELECT command, path, outcome FROM compaction_history").fetchall()
        return [tuple(r) for r in rows]
    finally:
        conn.close()


@pytest.mark.usefixtures("immutable_possible")
@pytest.mark.parametrize("command", [["rules"], ["compact", "--force"]])
def test_a_database_made_immutable_after_the_append(
    tmp_path: Path, db: Path, command: list[str]
) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(SAMPLE)
    r = subprocess.run(
        [sys.executable, "-c", CHILD, str(db), *command, "--db", str(db), str(path)],
        capture_output=True,
        timeout=300,
    )
    err = r.stderr.decode()
    grown = path.stat().st_size - len(SAMPLE)
    assert grown > 0 and path.read_bytes().startswith(SAMPLE)
    assert r.returncode == 3, err
    found = re.search(
        rf"compactctl: {re.escape(str(path))}: appended (\d+) bytes to {re.escape(str(path))}; "
        r"store not updated: (.+)\. The next run records it from the transcript",
        err,
    )
    assert found is not None, err
    assert int(found[1]) == grown
    assert "database" in found[2] or "readonly" in found[2] or "I/O" in found[2], found[2]
    for suffix in ("", "-wal", "-shm"):
        _chattr(Path(f"{db}{suffix}"), "-i")
    assert _history(db) == []  # the run's row never landed

    appended = path.read_bytes()
    again = run_cli(*command, "--db", str(db), str(path))
    assert again.returncode == 0, again.stderr
    assert path.read_bytes() == appended  # the events are there: nothing appended again
    assert b"1 earlier run appended to the transcript but not" in again.stderr
    name = command[0]
    assert _history(db)[0] == (name, str(path), "applied")

    rows = len(_history(db))
    third = run_cli(*command, "--db", str(db), str(path))
    assert third.returncode == 0, third.stderr
    assert b"earlier run" not in third.stderr
    assert len(_history(db)) == rows
    assert os.path.getsize(path) == len(appended)
