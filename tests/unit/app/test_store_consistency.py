"""The transcript and the store stay consistent (issue 14, point 3).

- a store write that fails after the append says "appended N bytes to FILE; store not updated:
  REASON" (exit 3; 75 when the database stayed locked), and the next run records the missing
  rows from the transcript (history, state, tiers), once;
- a store that cannot record the run before the append stops it before anything is written;
- a database SQLite cannot read, or one truncated to 0 bytes, is moved aside with a warning
  naming the copy kept, and a new one is created.
"""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from compactctl.app.jobs import OutputOptions, compact_path, rules_path, tiers_path
from compactctl.app.store import EMPTY_DB_GRACE_S, Store
from compactctl.cli import app
from compactctl.errors import CompactWarning, LockTimeout, StoreNotUpdated, WriteError
from compactctl.layers.options import CompactOptions, RulesOptions
from tests.helpers import SAMPLES

SAMPLE = (SAMPLES / "small-s1.canonical.jsonl").read_bytes()
KEY = "s1-quillpad-pagination"


def _out(db: Path) -> OutputOptions:
    return OutputOptions(db=str(db), torn_wait=300.0)


def _failing(monkeypatch: pytest.MonkeyPatch, error: Exception) -> None:
    """The store write after the append fails with ``error``."""

    def finish_run(self: Store, pending_id: int) -> bool:
        raise error

    monkeypatch.setattr(Store, "finish_run", finish_run)


def _rows(db: Path, table: str) -> int:
    conn = sqlite3.connect(db)
    try:
        return int(conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])
    finally:
        conn.close()


def _session_key(path: Path) -> str:
    """The session's key in the store: its session key and its absolute path."""
    from compactctl.app.store import store_key
    from compactctl.session import Session

    return store_key(Session.open(str(path)).meta.key, str(path))


def test_a_store_failing_after_the_append_says_so_and_the_next_run_records_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path, db = tmp_path / "s.jsonl", tmp_path / "db.sqlite"
    path.write_bytes(SAMPLE)
    with monkeypatch.context() as m:
        _failing(m, WriteError("database write failed: disk I/O error", path=str(db)))
        with pytest.raises(StoreNotUpdated) as info:
            rules_path(str(path), RulesOptions(), _out(db))
    grown = path.stat().st_size - len(SAMPLE)
    assert grown > 0
    assert info.value.exit_code == 3
    assert info.value.message == (
        f"appended {grown} bytes to {path}; store not updated: database write failed: disk "
        "I/O error. The next run records it from the transcript"
    )
    assert _rows(db, "compaction_history") == 0
    assert _rows(db, "pending_runs") == 1

    with pytest.warns(CompactWarning, match="1 earlier run appended to the transcript but not"):
        again = rules_path(str(path), RulesOptions(), _out(db))
    assert again["changed"] is False and path.stat().st_size == len(SAMPLE) + grown
    with Store.open(db) as store:
        (row,) = store.history()
        assert (row.command, row.path, row.outcome) == ("rules", str(path), "applied")
        assert row.session_key == _session_key(path) and row.rules_applied
    assert _rows(db, "pending_runs") == 0
    rules_path(str(path), RulesOptions(), _out(db))  # a third run records nothing more
    assert _rows(db, "compaction_history") == 1


def test_a_locked_store_after_the_append_is_exit_75(tmp_path, monkeypatch) -> None:
    path, db = tmp_path / "s.jsonl", tmp_path / "db.sqlite"
    path.write_bytes(SAMPLE)
    _failing(monkeypatch, LockTimeout("database still locked after 8 attempts", path=str(db)))
    with pytest.raises(StoreNotUpdated, match="store not updated: database still locked") as info:
        rules_path(str(path), RulesOptions(), _out(db))
    assert info.value.exit_code == 75


def test_compact_state_and_tiers_are_reconciled(tmp_path, monkeypatch) -> None:
    path, db = tmp_path / "s.jsonl", tmp_path / "db.sqlite"
    path.write_bytes(SAMPLE)
    key = _session_key(path)
    opts = CompactOptions(force=True, encoding="estimate")
    with monkeypatch.context() as m:
        _failing(m, WriteError("database write failed: database or disk is full"))
        with pytest.raises(StoreNotUpdated, match="database or disk is full"):
            compact_path(str(path), opts, _out(db))
        with Store.open(db) as store:
            assert store.get_state(key) is None
        # the next run (tiers) records the compact run first, then its own write fails
        with (
            pytest.warns(CompactWarning, match="1 earlier run appended"),
            pytest.raises(StoreNotUpdated),
        ):
            tiers_path(str(path), _out(db), encoding="estimate")
    with Store.open(db) as store:
        state = store.get_state(key)
        assert state is not None and state["totalCompactions"] == 1
        assert state["consecutiveFailures"] == 0
        assert store.get_tiers(key) is None
    with pytest.warns(CompactWarning, match="1 earlier run appended"):
        rules_path(str(path), RulesOptions(), _out(db), encoding="estimate")
    with Store.open(db) as store:
        tiers = store.get_tiers(key)
        assert tiers is not None and set(tiers["tiers"]) == {"L0", "L1", "L2"}
        assert [r.command for r in store.history()] == ["compact", "tiers", "rules"]
        assert store.get_state(key)["totalCompactions"] == 1  # type: ignore[index]


def test_a_store_that_cannot_record_before_the_append_writes_nothing(tmp_path, monkeypatch) -> None:
    path, db = tmp_path / "s.jsonl", tmp_path / "db.sqlite"
    path.write_bytes(SAMPLE)

    def begin_run(self: Store, run: object, uuids: object, now: float) -> int:
        raise WriteError("database write failed: attempt to write a readonly database")

    monkeypatch.setattr(Store, "begin_run", begin_run)
    with pytest.raises(WriteError, match="readonly database"):
        rules_path(str(path), RulesOptions(), _out(db))
    assert path.read_bytes() == SAMPLE


def test_a_failed_append_leaves_no_pending_run(tmp_path, monkeypatch) -> None:
    path, db = tmp_path / "s.jsonl", tmp_path / "db.sqlite"
    path.write_bytes(SAMPLE + b'{"type":"message","uuid":"x","role":"user","content":"mid')
    out = OutputOptions(db=str(db), torn_wait=300.0, lock_timeout=0.2)
    with pytest.raises(LockTimeout):  # the last line is being written: exit 75, nothing written
        rules_path(str(path), RulesOptions(), out)
    assert _rows(db, "pending_runs") == 0


def test_a_pending_run_of_a_process_that_died_is_dropped_after_an_hour(tmp_path) -> None:
    from compactctl.app.store import HistoryRow, RunRecord

    db = tmp_path / "db.sqlite"
    row = HistoryRow(session_key="k", path="p", command="rules", created_at=0.0)
    with Store.open(db) as store:
        store.begin_run(RunRecord(history=row), ["never-written"], now=1000.0)
        assert store.reconcile("k", set(), now=1000.0 + 60) == 0
        assert _rows(db, "pending_runs") == 1  # young: its append may be under way
        assert store.reconcile("k", set(), now=1000.0 + 3601) == 0
        assert _rows(db, "pending_runs") == 0
        assert store.history() == []


def test_the_cli_message_and_exit_code(tmp_path, monkeypatch) -> None:
    path, db = tmp_path / "s.jsonl", tmp_path / "db.sqlite"
    path.write_bytes(SAMPLE)
    _failing(monkeypatch, WriteError("database write failed: disk I/O error", path=str(db)))
    r = CliRunner().invoke(app, ["rules", "--db", str(db), "--jobs", "1", str(path)])
    grown = path.stat().st_size - len(SAMPLE)
    assert r.exit_code == 3, r.output
    assert (
        f"compactctl: {path}: appended {grown} bytes to {path}; store not updated: database "
        "write failed: disk I/O error. The next run records it from the transcript"
    ) in r.stderr


# --- a damaged database ----------------------------------------------------------------------


def _kept(db: Path) -> list[Path]:
    return sorted(p for p in db.parent.iterdir() if p.name.startswith(f"{db.name}.damaged-"))


def test_a_database_sqlite_cannot_read_is_moved_aside(tmp_path: Path) -> None:
    db = tmp_path / "db.sqlite"
    junk = b"SQLite format 3\x00" + os.urandom(4000)
    db.write_bytes(junk)
    with pytest.warns(CompactWarning) as caught, Store.open(db) as store:
        assert store.history() == []
    (kept,) = _kept(db)
    assert kept.read_bytes() == junk
    (w,) = [str(x.message) for x in caught]
    assert w.startswith(f"{db}: not a usable SQLite database (")
    assert w.endswith(f"; moved it to {kept} and started a new database")


def test_a_database_truncated_to_0_bytes_is_moved_aside(tmp_path: Path) -> None:
    path, db = tmp_path / "s.jsonl", tmp_path / "db.sqlite"
    path.write_bytes(SAMPLE)
    rules_path(str(path), RulesOptions(), _out(db))
    assert _rows(db, "compaction_history") == 1
    for p in tmp_path.glob("db.sqlite*"):
        os.truncate(p, 0)
    then = time.time() - EMPTY_DB_GRACE_S - 1
    os.utime(db, (then, then))
    r = CliRunner().invoke(app, ["inspect", "--store", "--db", str(db)])
    assert r.exit_code == 0, r.output
    (kept,) = _kept(db)
    assert (
        f"compactctl: warning: {db}: the database file is empty (0 bytes: truncated?); moved "
        f"it to {kept} and started a new database"
    ) in r.stderr


def test_an_empty_database_another_connection_holds_is_left_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new database another process holds in a transaction (still 0 bytes, older than
    the grace) is not moved aside from under it: the open waits, then gives up (exit 75's
    LockTimeout), and the file stays where it is, held (review11: it was moved aside)."""
    import sqlite3

    from compactctl.app import store as store_module
    from compactctl.errors import LockTimeout

    db = tmp_path / "db.sqlite"
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    then = time.time() - EMPTY_DB_GRACE_S - 1
    os.utime(db, (then, then))
    assert db.stat().st_size == 0
    monkeypatch.setattr(store_module, "BUSY_TIMEOUT_MS", 10)
    monkeypatch.setattr(store_module, "RETRY_ATTEMPTS", 2)
    with pytest.raises(LockTimeout, match="database locked while setting"):
        Store.open(db)
    with pytest.raises(LockTimeout):
        Store.open(db)  # the second try (the run log's) sees the same
    assert _kept(db) == [] and db.exists()
    holder.execute("ROLLBACK")
    holder.close()
    with pytest.warns(CompactWarning, match="the database file is empty"):
        Store.open(db).close()  # no one holds it now: empty and old, so truncated
    assert len(_kept(db)) == 1


def test_a_database_just_created_empty_is_left_alone(tmp_path: Path) -> None:
    db = tmp_path / "db.sqlite"
    db.write_bytes(b"")  # sqlite3.connect creates it empty, its header comes a moment later
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", CompactWarning)
        Store.open(db).close()
    assert _kept(db) == []
