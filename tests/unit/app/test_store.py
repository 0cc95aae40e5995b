"""The SQLite store: location, migrations, breaker, history, report, concurrent writers."""

from __future__ import annotations

import datetime as dt
import multiprocessing
import multiprocessing.synchronize
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from compactctl.app import store as store_mod
from compactctl.app.store import (
    BREAKER_FAILURES,
    BREAKER_SECONDS,
    MIGRATIONS,
    SCHEMA_VERSION,
    FileRow,
    HistoryRow,
    RunLog,
    Store,
    migrate,
    resolve_db_path,
)
from compactctl.errors import CompactWarning, UsageError
from tests.helpers import ROOT


def utc(text: str) -> float:
    """Unix seconds of an ISO 8601 UTC time such as ``2025-05-16T12:00:00``."""
    return dt.datetime.fromisoformat(text).replace(tzinfo=dt.UTC).timestamp()


NOW = utc("2025-05-16T12:00:00")


def columns(conn: sqlite3.Connection, table: str) -> list[str]:
    return [r[1] for r in conn.execute(f"PRAGMA table_info({table})")]


def raw(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(path, isolation_level=None)


# -- location -------------------------------------------------------------------------------


def test_db_path_flag_beats_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COMPACTCTL_DB", str(tmp_path / "env.db"))
    assert resolve_db_path(str(tmp_path / "flag.db")) == tmp_path / "flag.db"
    assert resolve_db_path(None) == tmp_path / "env.db"


def test_db_path_default_is_xdg_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COMPACTCTL_DB", raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    assert resolve_db_path(None) == tmp_path / "state" / "compactctl" / "compactctl.db"


def test_db_path_empty_flag_is_usage_error() -> None:
    with pytest.raises(UsageError):
        resolve_db_path("  ")


def test_open_creates_parent_folder(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "x.db"
    with Store.open(path) as s:
        assert s.path == path
    assert path.is_file()


def test_open_folder_is_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="folder") as info:
        Store.open(tmp_path)
    assert info.value.exit_code == 2


def test_open_not_a_database_moves_it_aside(tmp_path: Path) -> None:  # issue 14
    path = tmp_path / "notes.db"
    path.write_bytes(b"this is not sqlite, just text that is long enough " * 40)
    with pytest.warns(CompactWarning, match="not a usable SQLite database"):
        Store.open(path).close()


def test_open_parent_is_a_file_is_usage_error(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(UsageError, match="folder"):
        Store.open(tmp_path / "file" / "x.db")


def test_import_is_stdlib_only() -> None:
    code = "import sys, compactctl.app.store; print('platformdirs' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True
    )
    assert out.stdout.strip() == "False"


# -- migrations -----------------------------------------------------------------------------


def test_migrations_are_numbered_and_append_only() -> None:
    assert [m[0] for m in MIGRATIONS] == list(range(1, len(MIGRATIONS) + 1))
    assert len({m[1] for m in MIGRATIONS}) == len(MIGRATIONS)
    assert SCHEMA_VERSION == MIGRATIONS[-1][0] == 4


def test_fresh_database_migrates_to_latest(tmp_path: Path) -> None:
    path = tmp_path / "fresh.db"
    with Store.open(path) as s:
        assert s.schema_version == SCHEMA_VERSION
    conn = raw(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 4
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"tiered_summaries", "compaction_state", "compaction_history", "migrations"} <= tables
    assert columns(conn, "tiered_summaries") == [
        "id", "session_key", "path", "summary_uuid", "l0", "l1", "l2", "messages_before",
        "messages_summarized", "tokens_before", "tokens_after", "compression_ratio",
        "created_at", "updated_at",
    ]  # fmt: skip
    assert columns(conn, "compaction_state") == [
        "session_key", "path", "last_message_index", "last_compaction_at",
        "total_compactions", "consecutive_failures", "last_failure_at",
    ]  # fmt: skip
    assert columns(conn, "compaction_history") == [
        "id", "session_key", "path", "command", "messages_removed", "dedup_groups",
        "rules_applied", "tokens_before", "tokens_after", "duration_ms", "created_at",
        "outcome", "error",
    ]  # fmt: skip
    indexes = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='index'")}
    assert "idx_history_created_at" in indexes
    rows = conn.execute("SELECT version, name FROM migrations ORDER BY version").fetchall()
    assert rows == [
        (1, "initial"), (2, "history_outcome_error"), (3, "pending_runs"), (4, "run_log")
    ]  # fmt: skip
    assert columns(conn, "run_files") == [
        "id", "run_id", "command", "path", "output", "session_key", "outcome",
        "tokens_before", "tokens_after", "tokens_saved", "error_code", "message", "created_at",
    ]  # fmt: skip
    conn.close()


def test_reopening_is_a_noop(tmp_path: Path) -> None:
    path = tmp_path / "x.db"
    Store.open(path).close()
    Store.open(path).close()
    conn = raw(path)
    assert conn.execute("SELECT COUNT(*) FROM migrations").fetchone()[0] == 4
    conn.close()


@pytest.mark.parametrize("k", range(len(MIGRATIONS)))
def test_old_database_migrates_and_keeps_rows(tmp_path: Path, k: int) -> None:
    path = tmp_path / f"v{k}.db"
    conn = raw(path)
    assert migrate(conn, target=k) == k
    assert conn.execute("PRAGMA user_version").fetchone()[0] == k
    if k >= 1:  # the version-1 columns exist at every later version
        conn.execute(
            "INSERT INTO compaction_history (session_key, path, command, messages_removed, "
            "dedup_groups, rules_applied, tokens_before, tokens_after, duration_ms, created_at) "
            "VALUES ('s1', 'a.jsonl', 'rules', 3, 0, '[\"emoji\"]', 900, 600, 12, ?)",
            (NOW,),
        )
        conn.execute(
            "INSERT INTO compaction_state (session_key, path, last_message_index, "
            "last_compaction_at, total_compactions) VALUES ('s1', 'a.jsonl', 41, ?, 5)",
            (NOW,),
        )
        conn.execute(
            "INSERT INTO tiered_summaries (session_key, path, summary_uuid, l0, l1, l2, "
            "messages_before, messages_summarized, tokens_before, tokens_after, "
            "compression_ratio, created_at, updated_at) "
            "VALUES ('s1', 'a.jsonl', 'u9', 'zero', 'one', 'two', 50, 40, 8000, 2000, 0.25, ?, ?)",
            (NOW, NOW),
        )
    conn.close()

    with Store.open(path) as s:
        assert s.schema_version == SCHEMA_VERSION
        if k >= 1:
            (row,) = s.history()
            assert row == HistoryRow(
                session_key="s1",
                path="a.jsonl",
                command="rules",
                messages_removed=3,
                rules_applied=["emoji"],
                tokens_before=900,
                tokens_after=600,
                duration_ms=12,
                outcome="applied",
                error=None,
                created_at=NOW,
            )
            state = s.get_state("s1")
            assert state is not None
            assert state["lastMessageIndex"] == 41
            assert state["totalCompactions"] == 5
            assert state["consecutiveFailures"] == 0
            tiers = s.get_tiers("s1")
            assert tiers is not None
            assert tiers["tiers"] == {"L0": "zero", "L1": "one", "L2": "two"}
            # the run log starts with the history of before (a file of no run, in place)
            rows = s._conn.execute(  # noqa: SLF001 - the copied rows themselves
                "SELECT run_id, command, path, output, outcome, tokens_saved FROM run_files"
            ).fetchall()
            assert rows == [(None, "rules", "a.jsonl", None, "changed", 300)]
            assert s.report(NOW)["tokensSaved"] == 300
        else:
            assert s.history() == []


def test_failed_migration_rolls_back(tmp_path: Path) -> None:
    path = tmp_path / "bad.db"
    conn = raw(path)
    broken = [*MIGRATIONS[:1], (2, "broken", "CREATE TABLE t2 (x INTEGER);\nNOT SQL AT ALL;")]
    with pytest.raises(sqlite3.OperationalError):
        migrate(conn, migrations=broken)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 1
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert "t2" not in tables
    assert conn.execute("SELECT COUNT(*) FROM migrations").fetchone()[0] == 1
    conn.close()


def test_newer_database_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "future.db"
    conn = raw(path)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()
    with pytest.raises(UsageError, match="newer than this compactctl"):
        Store.open(path)


# -- breaker --------------------------------------------------------------------------------


def test_breaker_constants() -> None:
    assert (BREAKER_FAILURES, BREAKER_SECONDS) == (3, 86_400)


def test_breaker_opens_after_three_failures_and_closes_after_24h(tmp_path: Path) -> None:
    with Store.open(tmp_path / "x.db") as s:
        assert s.breaker_open("s", NOW) is False  # unknown session
        assert s.record_failure("s", "a.jsonl", NOW) == 1
        assert s.record_failure("s", "a.jsonl", NOW + 10) == 2
        assert s.breaker_open("s", NOW + 20) is False
        assert s.record_failure("s", "a.jsonl", NOW + 30) == 3
        assert s.breaker_open("s", NOW + 40) is True
        assert s.breaker_open("s", NOW + 30 + 86_399) is True
        assert s.breaker_open("s", NOW + 30 + 86_400 + 1) is False
        # after the TTL, the next failure starts the count again
        assert s.record_failure("s", "a.jsonl", NOW + 30 + 86_401) == 1
        assert s.breaker_open("s", NOW + 30 + 86_402) is False
        assert s.breaker_open("other", NOW) is False


def test_success_resets_the_breaker(tmp_path: Path) -> None:
    with Store.open(tmp_path / "x.db") as s:
        for i in range(3):
            s.record_failure("s", "a.jsonl", NOW + i)
        assert s.breaker_open("s", NOW + 5) is True
        s.record_success("s", "a.jsonl", 17, NOW + 6)
        assert s.breaker_open("s", NOW + 7) is False
        state = s.get_state("s")
        assert state is not None
        assert state["consecutiveFailures"] == 0
        assert state["totalCompactions"] == 1
        assert state["lastMessageIndex"] == 17
        assert state["lastCompactionAt"] == NOW + 6
        s.record_success("s", "a.jsonl", 30, NOW + 8)
        state = s.get_state("s")
        assert state is not None
        assert (state["totalCompactions"], state["lastMessageIndex"]) == (2, 30)
        assert s.record_failure("s", "a.jsonl", NOW + 9) == 1


# -- tiers ----------------------------------------------------------------------------------


def test_save_tiers_upserts(tmp_path: Path) -> None:
    with Store.open(tmp_path / "x.db") as s:
        assert s.get_tiers("s") is None
        s.save_tiers("s", "a.jsonl", "u1", {"L0": "a", "L1": "b", "L2": "c"}, 80, 60, 10_000,
                     2_500, NOW)  # fmt: skip
        s.save_tiers("s", "b.jsonl", "u2", {"l0": "A", "l1": "B", "l2": "C"}, 90, 70, 12_000,
                     1_500, NOW + 100)  # fmt: skip
        t = s.get_tiers("s")
    assert t == {
        "sessionKey": "s",
        "path": "b.jsonl",
        "summaryUuid": "u2",
        "tiers": {"L0": "A", "L1": "B", "L2": "C"},
        "messagesBefore": 90,
        "messagesSummarized": 70,
        "tokensBefore": 12_000,
        "tokensAfter": 1_500,
        "compressionRatio": 0.125,
        "createdAt": NOW,
        "updatedAt": NOW + 100,
    }


def test_save_tiers_needs_all_three(tmp_path: Path) -> None:
    with Store.open(tmp_path / "x.db") as s, pytest.raises(ValueError, match="L2"):
        s.save_tiers("s", "a.jsonl", None, {"L0": "a", "L1": "b"}, 1, 1, 1, 1, NOW)


# -- history and report -----------------------------------------------------------------------


def test_history_row_rejects_unknown_outcome() -> None:
    with pytest.raises(ValueError, match="outcome"):
        HistoryRow(session_key="s", path="p", command="rules", outcome="ok", created_at=NOW)


def _run(key: str, command: str, when: str, before: int, after: int, **kw: object) -> HistoryRow:
    return HistoryRow(
        session_key=key,
        path=f"{key}.jsonl",
        command=command,
        tokens_before=before,
        tokens_after=after,
        created_at=utc(when),
        **kw,  # type: ignore[arg-type]
    )


def test_history_and_report(tmp_path: Path) -> None:
    rows = [
        _run("old", "rules", "2025-04-01T10:00:00", 100, 50),  # outside the 30-day window
        _run("s1", "rules", "2025-05-14T10:00:00", 1000, 800, rules_applied=["emoji", "ws"]),
        _run("s1", "dedup", "2025-05-14T23:59:59", 800, 700, dedup_groups=2),
        _run("s2", "compact", "2025-05-15T00:00:00", 700, 700, outcome="failed", error="boom"),
        _run("s2", "compact", "2025-05-16T08:00:00", 5000, 1000, messages_removed=30),
        _run("s3", "rules", "2025-05-16T08:30:00", 1000, 1000, outcome="noop"),
        _run("s3", "rules", "2025-05-16T13:00:00", 900, 100),  # after `now`: not counted
    ]
    path = tmp_path / "x.db"
    with Store.open(path) as s:
        ids = [s.add_history(r) for r in rows]
        assert ids == list(range(1, 8))
        for i in range(3):
            s.record_failure("s2", "s2.jsonl", utc("2025-05-16T09:00:00") + i)
        s.record_failure("s4", "s4.jsonl", utc("2025-05-16T09:00:00"))
        s.save_tiers("s5", "s5.jsonl", "u", {"L0": "", "L1": "", "L2": ""}, 1, 1, 1, 1, NOW)

        assert s.history() == rows
        assert s.history("s1") == rows[1:3]
        assert s.history(limit=2) == rows[-2:]
        assert s.history("s1")[0].rules_applied == ["emoji", "ws"]

        # the report is the run log's: every run of a command that writes, every file
        for log in _runs():
            s.log_run(log)
        rep = s.report(NOW)
        assert rep == {
            "db": str(path),
            "schemaVersion": 4,
            "sessions": 6,  # old, s1..s5
            "compactionsPerDay": [
                {
                    "day": "2025-05-14",
                    "runs": 2,
                    "files": 2,
                    "changed": 2,
                    "failed": 0,
                    "skipped": 0,
                    "tokensSaved": 300,
                },
                {
                    "day": "2025-05-15",
                    "runs": 1,
                    "files": 2,
                    "changed": 0,
                    "failed": 1,
                    "skipped": 1,
                    "tokensSaved": 0,
                },
                # the -o re-run of the same input to the same output counts once
                {
                    "day": "2025-05-16",
                    "runs": 2,
                    "files": 2,
                    "changed": 2,
                    "failed": 0,
                    "skipped": 0,
                    "tokensSaved": 4000,
                },
            ],  # fmt: skip
            "tokensSaved": 4300,
            "sessionsInBreaker": [
                {
                    "sessionKey": "s2",
                    "path": "s2.jsonl",
                    "failures": 3,
                    "lastFailureAt": "2025-05-16T09:00:02.000Z",
                }
            ],
            "byCommand": {"compact": 3, "dedup": 1, "rules": 1},
        }

        today = s.report(NOW, days=1)
        assert [d["day"] for d in today["compactionsPerDay"]] == ["2025-05-16"]
        assert today["tokensSaved"] == 4000
        assert today["byCommand"] == {"compact": 2}

        # PATHS: the files themselves, or inside folders, as input or output
        out = s.report(NOW, paths=["/out"])
        assert (out["tokensSaved"], out["byCommand"], out["paths"]) == (
            4000, {"compact": 2}, ["/out"]
        )  # fmt: skip
        assert s.report(NOW, paths=["/w/s1.jsonl"])["tokensSaved"] == 300
        assert s.report(NOW, paths=["/w/s1"])["tokensSaved"] == 0  # a prefix is no folder

        runs = s.runs(NOW)
        assert [(r["id"], r["command"], r["exitCode"]) for r in runs] == [
            (6, "compact", 0), (5, "compact", 0), (4, "compact", 3), (3, "dedup", 0),
            (2, "rules", 0),
        ]  # fmt: skip
        assert runs[2] == {
            "id": 4, "command": "compact", "cwd": "/w",
            "startedAt": "2025-05-14T23:59:59.000Z", "finishedAt": "2025-05-15T00:00:00.000Z",
            "exitCode": 3, "files": 2, "changed": 0, "unchanged": 0, "failed": 1, "skipped": 1,
            "tokensSaved": 0,
        }  # fmt: skip
        assert runs[0]["tokensSaved"] == runs[1]["tokensSaved"] == 4000  # each run's own
        assert [r["id"] for r in s.runs(NOW, paths=["/w/s1.jsonl"])] == [3, 2]

        # a day later the breaker has expired
        assert s.report(NOW + BREAKER_SECONDS)["sessionsInBreaker"] == []
        with pytest.raises(UsageError):
            s.report(NOW, days=0)
        with pytest.raises(UsageError):
            s.runs(NOW, days=0)


def _runs() -> list[RunLog]:
    """Seven runs, one file or two each (paths absolute, as the runner records them)."""

    def run(command: str, when: str, *files: FileRow) -> RunLog:
        end = utc(when)
        return RunLog(command=command, cwd="/w", started_at=end - 1, finished_at=end,
                      exit_code=3 if any(f.outcome == "failed" for f in files) else 0,
                      files=list(files))  # fmt: skip

    def changed(path: str, saved: int, output: str | None = None, **kw: int) -> FileRow:
        return FileRow(path=path, output=output or path, session_key=path, outcome="changed",
                       tokens_saved=saved, **kw)  # fmt: skip

    return [
        run("rules", "2025-04-01T10:00:00", changed("/w/old.jsonl", 50)),  # outside 30 days
        run("rules", "2025-05-14T10:00:00", changed("/w/s1.jsonl", 200)),
        run("dedup", "2025-05-14T23:59:59",
            changed("/w/s1.jsonl", 100, tokens_before=800, tokens_after=700)),
        run("compact", "2025-05-15T00:00:00",
            FileRow(path="/w/s2.jsonl", outcome="failed", error_code="summarizer",
                    message="model x: boom"),
            FileRow(path="/w/x.jsonl.gz", outcome="skipped", message="gzip in place")),
        run("compact", "2025-05-16T08:00:00", changed("/w/s2.jsonl", 4000, "/out/s2.jsonl")),
        run("compact", "2025-05-16T08:30:00", changed("/w/s2.jsonl", 4000, "/out/s2.jsonl")),
        run("rules", "2025-05-16T13:00:00", changed("/w/s3.jsonl", 800)),  # after `now`
    ]  # fmt: skip


def test_report_of_empty_database(tmp_path: Path) -> None:
    with Store.open(tmp_path / "x.db") as s:
        rep = s.report(NOW)
    assert rep["sessions"] == 0
    assert rep["compactionsPerDay"] == []
    assert rep["tokensSaved"] == 0
    assert rep["sessionsInBreaker"] == []
    assert rep["byCommand"] == {}


# -- concurrency ----------------------------------------------------------------------------

ROWS_PER_WRITER = 200


def _writer(path: str, key: str, start: multiprocessing.synchronize.Barrier) -> None:
    with Store.open(path) as s:
        start.wait()
        for i in range(ROWS_PER_WRITER):
            s.add_history(
                HistoryRow(
                    session_key=key,
                    path=f"{key}.jsonl",
                    command="rules",
                    tokens_before=i + 1,
                    tokens_after=i,
                    created_at=NOW,
                )
            )
            if i % 50 == 0:
                s.record_failure(key, f"{key}.jsonl", NOW + i)


def test_two_processes_write_at_once(tmp_path: Path) -> None:
    path = tmp_path / "shared.db"  # both processes create and migrate it at once
    ctx = multiprocessing.get_context("fork")
    start = ctx.Barrier(2)
    procs = [ctx.Process(target=_writer, args=(str(path), k, start)) for k in ("p1", "p2")]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
    assert [p.exitcode for p in procs] == [0, 0]
    with Store.open(path) as s:
        assert s.schema_version == SCHEMA_VERSION
        assert len(s.history()) == 2 * ROWS_PER_WRITER
        assert len(s.history("p1")) == len(s.history("p2")) == ROWS_PER_WRITER
        # every row landed whole: each saved one token (tokens_before i + 1, after i)
        assert sum(r.tokens_before - r.tokens_after for r in s.history()) == 2 * ROWS_PER_WRITER
        for key in ("p1", "p2"):
            state = s.get_state(key)
            assert state is not None
            assert state["consecutiveFailures"] == 4
    conn = raw(path)
    assert conn.execute("SELECT COUNT(*) FROM migrations").fetchone()[0] == len(MIGRATIONS)
    conn.close()


def test_lock_is_retried_then_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from compactctl.errors import LockTimeout

    path = tmp_path / "x.db"
    Store.open(path).close()
    holder = raw(path)
    holder.execute("BEGIN IMMEDIATE")  # hold the write lock
    monkeypatch.setattr(store_mod, "RETRY_ATTEMPTS", 2)
    monkeypatch.setattr(store_mod, "RETRY_BACKOFF_S", 0.01)
    with Store.open(path) as s:
        s._conn.execute("PRAGMA busy_timeout = 50")
        with pytest.raises(LockTimeout) as info:
            s.record_failure("s", "a.jsonl", NOW)
        assert info.value.exit_code == 75
        holder.execute("ROLLBACK")
        assert s.record_failure("s", "a.jsonl", NOW) == 1
    holder.close()
