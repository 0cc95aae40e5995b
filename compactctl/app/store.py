"""The one SQLite database: tiered summaries, compaction state (the breaker), run history.

Location (:func:`resolve_db_path`): ``--db PATH``, else ``$COMPACTCTL_DB``, else
``<user state dir>/compactctl/compactctl.db`` (``platformdirs``: on Linux
``$XDG_STATE_HOME/compactctl/compactctl.db``). The parent folder is created on open.

Concurrency: the database runs in WAL mode with a 5 s ``busy_timeout``; every write is one
``BEGIN IMMEDIATE`` transaction, retried with exponential backoff while SQLite answers
"database is locked/busy", so several processes (``--jobs``, cron, a CI matrix) may write
at once. Reads take a snapshot (``BEGIN``) and never block writers.

Consistency with the transcripts: the transcript is the source of truth. A run that appends
to a transcript first records what it will write to the store as a *pending run* (with the
uuids of the events it appends), appends, then completes the pending run (its rows written
and the pending row removed in one transaction). If the store cannot be written after the
append, the pending run stays, and the next run on that session completes it once it finds
those events in the transcript (:meth:`Store.reconcile`): nothing the transcript holds is
missing from the history for long, and nothing is recorded that the transcript does not hold.

A database SQLite cannot read (not a database, malformed) or an empty file where a database
was (truncated to 0 bytes) is moved aside to ``<name>.damaged-<UTC time>`` with a warning
naming that copy, and a new database is created (:meth:`Store.open`).

Schema: numbered, append-only migrations (:data:`MIGRATIONS`, like simonw/llm's named
migrations): each runs in its own transaction, sets ``PRAGMA user_version`` to its number and
records its name and time in the ``migrations`` table. Never edit a released migration: add
the next one.

Times: every time column holds **unix seconds (UTC) as REAL**; the API takes and returns
seconds as ``float``. Only :meth:`Store.report` formats times, as RFC 3339 UTC text.
Token counts are tokens (tiktoken), durations are milliseconds.

The rows a run writes (:class:`HistoryRow`, :class:`RunRecord`, ...) and their SQL live in
:mod:`compactctl.app.store_rows`; this module re-exports the row classes.

The tables adapt MoonHub's compactor (its ``compactor.db``): ``tiered_summaries`` (one
row per session, upserted), ``compaction_state`` (incremental index and failure tracking)
and ``compaction_history`` (one row per run, for ``inspect --db``).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import random
import sqlite3
import time
import warnings
from collections.abc import Callable, Container, Sequence
from functools import partial
from pathlib import Path
from types import TracebackType
from typing import Any, Final, TypeVar

from compactctl.app.store_rows import (
    FILE_OUTCOMES,
    OUTCOMES,
    FileRow,
    HistoryRow,
    RunLog,
    RunRecord,
    SuccessRow,
    TiersRow,
    clean,
    finish_pending,
    tier_texts,
    write_history,
    write_run,
    write_run_log,
    write_success,
    write_tiers,
)
from compactctl.errors import CompactWarning, InputError, LockTimeout, UsageError, WriteError
from compactctl.io.remote import is_url

__all__ = [
    "BREAKER_FAILURES",
    "BREAKER_SECONDS",
    "FILE_OUTCOMES",
    "MIGRATIONS",
    "OUTCOMES",
    "SCHEMA_VERSION",
    "FileRow",
    "HistoryRow",
    "PENDING_TTL_S",
    "RunLog",
    "RunRecord",
    "Store",
    "SuccessRow",
    "TiersRow",
    "absolute",
    "migrate",
    "resolve_db_path",
    "store_key",
]

T = TypeVar("T")

#: Consecutive failures after which a session gets no summarization attempt (Coding Code's
#: context service: "连续 3 次失败后停止 24 小时 TTL 后重置", stop after 3 consecutive
#: failures, reset after 24 h).
BREAKER_FAILURES: Final = 3
#: Seconds the breaker stays open after the last failure; after that the count starts over.
BREAKER_SECONDS: Final = 86_400

#: Seconds after which a pending run whose events are not in its transcript is dropped: its
#: process died before the append (a pending run whose append is still under way is younger).
PENDING_TTL_S: Final = 3_600

#: Seconds an empty database file must be old before it counts as truncated (``sqlite3``
#: creates the file empty and writes its header a moment later).
EMPTY_DB_GRACE_S: Final = 2.0

#: ``(version, name, SQL)``, applied in order. Append only.
MIGRATIONS: list[tuple[int, str, str]] = [
    (
        1,
        "initial",
        """
        CREATE TABLE tiered_summaries (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            session_key TEXT NOT NULL UNIQUE,
            path TEXT NOT NULL,
            summary_uuid TEXT,
            l0 TEXT NOT NULL,
            l1 TEXT NOT NULL,
            l2 TEXT NOT NULL,
            messages_before INTEGER NOT NULL,
            messages_summarized INTEGER NOT NULL,
            tokens_before INTEGER NOT NULL,
            tokens_after INTEGER NOT NULL,
            compression_ratio REAL NOT NULL,
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL
        );
        CREATE TABLE compaction_state (
            session_key TEXT PRIMARY KEY,
            path TEXT NOT NULL,
            last_message_index INTEGER,
            last_compaction_at REAL,
            total_compactions INTEGER NOT NULL DEFAULT 0,
            consecutive_failures INTEGER NOT NULL DEFAULT 0,
            last_failure_at REAL
        );
        CREATE TABLE compaction_history (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            session_key TEXT NOT NULL,
            path TEXT NOT NULL,
            command TEXT NOT NULL,
            messages_removed INTEGER NOT NULL DEFAULT 0,
            dedup_groups INTEGER NOT NULL DEFAULT 0,
            rules_applied TEXT NOT NULL DEFAULT '[]',
            tokens_before INTEGER NOT NULL DEFAULT 0,
            tokens_after INTEGER NOT NULL DEFAULT 0,
            duration_ms INTEGER NOT NULL DEFAULT 0,
            created_at REAL NOT NULL
        );
        CREATE INDEX idx_history_session ON compaction_history(session_key);
        """,
    ),
    (
        2,
        "history_outcome_error",
        """
        ALTER TABLE compaction_history ADD COLUMN outcome TEXT NOT NULL DEFAULT 'applied'
            CHECK (outcome IN ('applied', 'noop', 'failed'));
        ALTER TABLE compaction_history ADD COLUMN error TEXT;
        CREATE INDEX idx_history_created_at ON compaction_history(created_at);
        """,
    ),
    (
        3,
        "pending_runs",
        """
        CREATE TABLE pending_runs (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            session_key TEXT NOT NULL,
            path TEXT NOT NULL,
            uuids TEXT NOT NULL,
            record TEXT NOT NULL,
            created_at REAL NOT NULL
        );
        CREATE INDEX idx_pending_session ON pending_runs(session_key);
        """,
    ),
    (
        4,
        "run_log",
        # every run of a command that writes, and every file it was given, whatever became
        # of it; the compaction_history rows of earlier versions are copied in as files of
        # no run (run_id NULL; their output unknown, counted as in place, as before)
        """
        CREATE TABLE runs (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            command TEXT NOT NULL,
            cwd TEXT NOT NULL,
            started_at REAL NOT NULL,
            finished_at REAL NOT NULL,
            exit_code INTEGER NOT NULL
        );
        CREATE TABLE run_files (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            run_id INTEGER REFERENCES runs(id),
            command TEXT NOT NULL,
            path TEXT NOT NULL,
            output TEXT,
            session_key TEXT,
            outcome TEXT NOT NULL
                CHECK (outcome IN ('changed', 'unchanged', 'failed', 'skipped')),
            tokens_before INTEGER,
            tokens_after INTEGER,
            tokens_saved INTEGER,
            error_code TEXT,
            message TEXT,
            created_at REAL NOT NULL
        );
        CREATE INDEX idx_run_files_run ON run_files(run_id);
        CREATE INDEX idx_run_files_path ON run_files(path, output);
        CREATE INDEX idx_run_files_created_at ON run_files(created_at);
        INSERT INTO run_files (run_id, command, path, output, session_key, outcome,
            tokens_before, tokens_after, tokens_saved, message, created_at)
        SELECT NULL, command, path, NULL, session_key,
            CASE outcome WHEN 'applied' THEN 'changed' WHEN 'noop' THEN 'unchanged'
                ELSE 'failed' END,
            tokens_before, tokens_after,
            CASE WHEN outcome = 'applied' THEN tokens_before - tokens_after ELSE 0 END,
            error, created_at
        FROM compaction_history ORDER BY id;
        """,
    ),
]

#: The version a fully migrated database has.
SCHEMA_VERSION: Final = MIGRATIONS[-1][0]

_MIGRATIONS_TABLE = """
CREATE TABLE IF NOT EXISTS migrations (
    version INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    applied_at REAL NOT NULL
)
"""


def resolve_db_path(flag: str | None) -> Path:
    """Where the database lives: ``--db``, else ``$COMPACTCTL_DB``, else the state dir.

    Args:
        flag: the ``--db`` value, or ``None`` when not given.

    Returns:
        The path (``~`` expanded; the file and its folder need not exist yet).

    Raises:
        UsageError: ``--db`` was given as an empty string.
    """
    if flag is not None:
        if not flag.strip():
            raise UsageError("--db needs a file path; drop it to use the default database")
        return Path(flag).expanduser()
    env = os.environ.get("COMPACTCTL_DB")
    if env:
        return Path(env).expanduser()
    import platformdirs

    return Path(platformdirs.user_state_dir("compactctl")) / "compactctl.db"


# -- transactions: SQLite's own busy wait, then retries with backoff ----------------------

#: Milliseconds SQLite itself waits for a lock before answering "database is locked".
BUSY_TIMEOUT_MS: Final = 5_000
#: Attempts of one transaction on "locked/busy" (each after SQLite's own busy wait).
RETRY_ATTEMPTS: Final = 8
#: First backoff between attempts, in seconds; doubles each time, capped, with jitter.
RETRY_BACKOFF_S: Final = 0.05
RETRY_BACKOFF_MAX_S: Final = 2.0


def _is_busy(exc: sqlite3.OperationalError) -> bool:
    """True for SQLITE_BUSY / SQLITE_LOCKED (another connection holds the lock)."""
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None and code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
        return True
    text = str(exc).lower()
    return "locked" in text or "busy" in text


def _transaction(
    conn: sqlite3.Connection,
    body: Callable[[sqlite3.Connection], T],
    *,
    db: str,
    write: bool = True,
) -> T:
    """Run ``body`` in one transaction, retrying it while the database is locked or busy.

    ``conn`` must be in autocommit mode (``isolation_level=None``). A write transaction
    starts with ``BEGIN IMMEDIATE`` so the write lock is taken up front (no deadlock between
    two readers that both want to write); a read takes a snapshot with ``BEGIN``. Any error
    rolls the transaction back.

    Raises:
        LockTimeout: still locked after :data:`RETRY_ATTEMPTS` attempts.
        sqlite3.Error: any other SQLite error (callers map it to a ``CompactError``).
    """
    delay = RETRY_BACKOFF_S
    for attempt in range(1, RETRY_ATTEMPTS + 1):
        try:
            conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            try:
                result = body(conn)
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            return result
        except sqlite3.OperationalError as exc:
            if not _is_busy(exc):
                raise
            if attempt == RETRY_ATTEMPTS:
                raise LockTimeout(
                    f"database still locked after {RETRY_ATTEMPTS} attempts; retry later",
                    path=db,
                ) from None
            time.sleep(delay * (0.5 + random.random()))
            delay = min(delay * 2, RETRY_BACKOFF_MAX_S)
    raise AssertionError("unreachable")  # pragma: no cover


def _statements(sql: str) -> list[str]:
    """Split a migration script into complete statements (``;`` inside strings is safe)."""
    out: list[str] = []
    buf = ""
    for line in sql.splitlines(keepends=True):
        buf += line
        if sqlite3.complete_statement(buf):
            out.append(buf.strip())
            buf = ""
    if buf.strip():
        out.append(buf.strip())
    return out


def _user_version(conn: sqlite3.Connection) -> int:
    row = conn.execute("PRAGMA user_version").fetchone()
    return int(row[0])


def migrate(
    conn: sqlite3.Connection,
    target: int | None = None,
    *,
    migrations: Sequence[tuple[int, str, str]] = MIGRATIONS,
    db: str = "",
    now: float | None = None,
) -> int:
    """Apply the pending migrations up to ``target`` (default: all), each in a transaction.

    Safe when several processes open a new database at once: the version is re-read inside
    each write transaction, so a migration already applied by another process is skipped.

    Args:
        conn: a connection in autocommit mode (``isolation_level=None``).
        target: the version to stop at (tests build old databases with it).
        migrations: the list to apply (:data:`MIGRATIONS`).
        db: the database path, for error messages.
        now: the time recorded in ``migrations.applied_at``, unix seconds (default: now).

    Returns:
        The schema version after migrating.

    Raises:
        UsageError: the database is newer than this compactctl (a later version wrote it).
        LockTimeout: another process held the database too long.
        sqlite3.Error: a migration failed (it was rolled back; the version is unchanged).
    """
    latest = migrations[-1][0] if migrations else 0
    current = _user_version(conn)
    if current > latest:
        raise UsageError(
            f"database schema version {current} is newer than this compactctl supports "
            f"({latest}); upgrade compactctl or use another --db",
            path=db or None,
        )
    stop = latest if target is None else target
    for version, name, sql in migrations:
        if version <= current or version > stop:
            continue

        applied_at = time.time() if now is None else now
        _transaction(conn, partial(_apply_migration, version, name, sql, applied_at), db=db)
        current = version
    return _user_version(conn)


def _apply_migration(
    version: int, name: str, sql: str, applied_at: float, c: sqlite3.Connection
) -> None:
    """One migration, inside the caller's write transaction; skipped if already applied."""
    if _user_version(c) >= version:
        return
    c.execute(_MIGRATIONS_TABLE)
    for statement in _statements(sql):
        c.execute(statement)
    c.execute(
        "INSERT INTO migrations (version, name, applied_at) VALUES (?, ?, ?)",
        (version, name, applied_at),
    )
    c.execute(f"PRAGMA user_version = {int(version)}")


def _rfc3339(seconds: float | None) -> str | None:
    if seconds is None:
        return None
    t = dt.datetime.fromtimestamp(seconds, dt.UTC)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"


def _session_row(c: sqlite3.Connection, sql: str, session_key: str) -> Any:
    """The row ``sql`` (a ``SELECT`` with one ``session_key = ?`` parameter) finds for one
    session, or ``None``."""
    return c.execute(sql, (session_key,)).fetchone()


_FAILURES_SQL: Final = (
    "SELECT consecutive_failures, last_failure_at FROM compaction_state WHERE session_key = ?"
)
"""A session's breaker row: ``(consecutive failures, last failure in unix seconds)``."""

_STATE_SQL: Final = (
    "SELECT session_key, path, last_message_index, last_compaction_at, total_compactions, "
    "consecutive_failures, last_failure_at FROM compaction_state WHERE session_key = ?"
)
"""A session's ``compaction_state`` row, its columns in the order of :data:`_STATE_KEYS`."""
_STATE_KEYS: Final = (
    "sessionKey",
    "path",
    "lastMessageIndex",
    "lastCompactionAt",
    "totalCompactions",
    "consecutiveFailures",
    "lastFailureAt",
)
"""The keys of :meth:`Store.get_state`'s dict, one per column of :data:`_STATE_SQL`."""

_TIERS_SQL: Final = (
    "SELECT session_key, path, summary_uuid, l0, l1, l2, messages_before, messages_summarized, "
    "tokens_before, tokens_after, compression_ratio, created_at, updated_at "
    "FROM tiered_summaries WHERE session_key = ?"
)
"""A session's ``tiered_summaries`` row, as :meth:`Store.get_tiers` reads it."""


def absolute(path: str) -> str:
    """``path`` as the store keeps it: absolute (symbolic links kept), ``-`` and URLs
    (``s3://...``) as given.

    >>> absolute("-"), absolute("s3://b/k.jsonl"), absolute("/a/../b.jsonl")
    ('-', 's3://b/k.jsonl', '/b.jsonl')
    """
    if path == "-" or is_url(path):
        return path
    return os.path.abspath(path)


def store_key(session_key: str, path: str) -> str:
    """The key of a session in the store: its session key and its absolute path, so that
    two files sharing a ``sessionId`` (a copy, a fork) keep their own state, history,
    tiers and failure breaker. Standard input has no path: its session key alone.

    >>> store_key("abc", "/s/a.jsonl"), store_key("abc", "-")
    ('abc@/s/a.jsonl', 'abc')
    """
    where = absolute(path)
    return session_key if where == "-" or where == session_key else f"{session_key}@{where}"


def _under(columns: Sequence[str], paths: Sequence[str]) -> tuple[str, list[Any]]:
    """An SQL condition (and its parameters): one of ``columns`` is one of ``paths``
    (absolute) or inside one of them, a folder; ``("1", [])`` when there are none."""
    if not paths:
        return "1", []
    terms: list[str] = []
    params: list[Any] = []
    for column in columns:
        for p in paths:
            terms.append(f"({column} = ? OR substr({column}, 1, ?) = ?)")
            prefix = p.rstrip("/") + "/"
            params += [p, len(prefix), prefix]
    return "(" + " OR ".join(terms) + ")", params


_COUNTED: Final = (
    "f.outcome = 'changed' AND (f.output IS NULL OR f.output = f.path OR f.path = '-' "
    "OR f.id = (SELECT MAX(g.id) FROM run_files g WHERE g.path = f.path "
    "AND g.output = f.output AND g.outcome = 'changed' AND g.created_at >= ? "
    "AND g.created_at <= ?))"
)
"""The files whose ``tokens_saved`` count toward the savings (parameters: the window's start
and end): every change appended in place (each saves on top of the one before), and of the
runs that wrote the same input to the same output (``-o``), only the newest: a re-run
rewrites that output, it saves nothing more. Stdin has no identity: each run counts."""


def _utc_midnight(seconds: float) -> float:
    day = dt.datetime.fromtimestamp(seconds, dt.UTC).date()
    return dt.datetime(day.year, day.month, day.day, tzinfo=dt.UTC).timestamp()


class Store:
    """An open compactctl database. Use :meth:`open`, as a context manager::

        with Store.open(resolve_db_path(None)) as store:
            if not store.breaker_open(key, time.time()):
                ...

    Every method raises only ``CompactError`` subclasses: :class:`~compactctl.errors.LockTimeout`
    (exit 75) when the database stays locked, :class:`~compactctl.errors.WriteError` when a
    write fails (rolled back, nothing partial), :class:`~compactctl.errors.InputError` when a
    read fails.
    """

    def __init__(self, conn: sqlite3.Connection, path: Path) -> None:
        """Wrap an open, migrated connection; use :meth:`open` instead."""
        self._conn = conn
        self.path = path

    # -- opening and closing ------------------------------------------------------------

    @classmethod
    def open(cls, path: str | os.PathLike[str]) -> Store:
        """Open (creating the file and its parent folder) and migrate the database.

        Args:
            path: the database file, usually from :func:`resolve_db_path`.

        A file SQLite cannot read as a database ("file is not a database", "malformed"),
        or an empty file older than :data:`EMPTY_DB_GRACE_S` (a database truncated to 0
        bytes), is moved aside to ``<name>.damaged-<UTC time>`` (its ``-wal``/``-shm`` too)
        with a :class:`~compactctl.errors.CompactWarning` naming the copy, and a new
        database is created in its place.

        Returns:
            An open store at :data:`SCHEMA_VERSION`; close it (or use ``with``).

        Raises:
            UsageError: the path is a folder, its folder cannot be created, the database
                cannot be opened (even after moving a damaged one aside), or it was written
                by a newer compactctl.
            LockTimeout: another process held the database too long while migrating.
        """
        p = Path(path)
        where = str(p)
        if p.is_dir():
            raise UsageError("--db path is a folder; give a file path", path=where)
        try:
            p.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UsageError(
                f"cannot create the database folder: {exc.strerror or exc}; fix --db or "
                "$COMPACTCTL_DB",
                path=where,
            ) from None
        try:
            st = p.stat()
        except OSError:
            st = None
        if (
            st is not None
            and st.st_size == 0
            and time.time() - st.st_mtime > EMPTY_DB_GRACE_S
            and not _in_use(p)
        ):
            _move_aside(p, "the database file is empty (0 bytes: truncated?)")
        for attempt in (1, 2):
            conn: sqlite3.Connection | None = None
            try:
                conn = sqlite3.connect(p, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)
                conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
                conn.execute("PRAGMA foreign_keys = ON")
                _retry_pragma(conn, "PRAGMA journal_mode = WAL", where)
                conn.execute("PRAGMA synchronous = NORMAL")
                migrate(conn, db=where)
                return cls(conn, p)
            except sqlite3.Error as exc:
                if conn is not None:
                    conn.close()
                if attempt == 1 and _damaged(exc):
                    _move_aside(p, f"not a usable SQLite database ({exc})")
                    continue
                raise UsageError(
                    f"cannot open the database ({exc}); fix --db or $COMPACTCTL_DB, or move "
                    "the file aside to start a new one",
                    path=where,
                ) from None
            except BaseException:
                if conn is not None:
                    conn.close()
                raise
        raise AssertionError("unreachable")  # pragma: no cover

    def close(self) -> None:
        """Close the connection (idempotent)."""
        self._conn.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    @property
    def schema_version(self) -> int:
        """``PRAGMA user_version``: the number of the last migration applied."""
        return self._read(_user_version)

    # -- plumbing -----------------------------------------------------------------------

    def _write(self, body: Callable[[sqlite3.Connection], T]) -> T:
        try:
            return _transaction(self._conn, body, db=str(self.path))
        except sqlite3.Error as exc:
            raise WriteError(f"database write failed: {exc}", path=str(self.path)) from None

    def _session_row(self, sql: str, session_key: str) -> Any:
        """The row ``sql`` finds for one session (:func:`_session_row`), or ``None``.

        Raises:
            InputError, LockTimeout: the database could not be read.
        """
        return self._read(partial(_session_row, sql=sql, session_key=session_key))

    def _read(self, body: Callable[[sqlite3.Connection], T]) -> T:
        try:
            return _transaction(self._conn, body, db=str(self.path), write=False)
        except sqlite3.Error as exc:
            raise InputError(f"database read failed: {exc}", path=str(self.path)) from None

    # -- compaction state and the breaker -------------------------------------------------

    def breaker_open(self, session_key: str, now: float) -> bool:
        """Whether summarization of this session is paused after repeated failures.

        Open when the session has at least :data:`BREAKER_FAILURES` consecutive failures and
        the last one is less than :data:`BREAKER_SECONDS` (24 h) old; after that the count is
        considered reset.

        Args:
            session_key: the session's stable key.
            now: the current time, unix seconds.

        Raises:
            InputError, LockTimeout: the database could not be read.
        """

        row = self._session_row(_FAILURES_SQL, session_key)
        if row is None or row[1] is None:
            return False
        return bool(row[0] >= BREAKER_FAILURES and now - row[1] < BREAKER_SECONDS)

    def record_failure(self, session_key: str, path: str, now: float) -> int:
        """Count one failed summarization of the session.

        A failure more than :data:`BREAKER_SECONDS` after the previous one starts the count
        again at 1 (the 24 h TTL).

        Args:
            session_key: the session's stable key.
            path: the transcript's path (kept for reports).
            now: the time of the failure, unix seconds.

        Returns:
            The number of consecutive failures, this one included.

        Raises:
            WriteError, LockTimeout: the database could not be written.
        """

        def body(c: sqlite3.Connection) -> int:
            row = _session_row(c, _FAILURES_SQL, session_key)
            if row is None:
                count = 1
                c.execute(
                    "INSERT INTO compaction_state (session_key, path, consecutive_failures, "
                    "last_failure_at) VALUES (?, ?, ?, ?)",
                    (session_key, path, count, now),
                )
                return count
            expired = row[1] is None or now - row[1] >= BREAKER_SECONDS
            count = 1 if expired else int(row[0]) + 1
            c.execute(
                "UPDATE compaction_state SET path = ?, consecutive_failures = ?, "
                "last_failure_at = ? WHERE session_key = ?",
                (path, count, now, session_key),
            )
            return count

        return self._write(body)

    def record_success(
        self, session_key: str, path: str, last_message_index: int, now: float
    ) -> None:
        """Record a successful compaction: failures reset, ``total_compactions`` + 1.

        Args:
            session_key: the session's stable key.
            path: the transcript's path.
            last_message_index: index of the last message the compaction covered (the
                incremental start point of the next run).
            now: the time of the compaction, unix seconds.

        Raises:
            WriteError, LockTimeout: the database could not be written.
        """

        row = SuccessRow(
            session_key=session_key, path=path, last_message_index=last_message_index, at=now
        )
        self._write(partial(write_success, row))

    def get_state(self, session_key: str) -> dict[str, Any] | None:
        """The session's ``compaction_state`` row, or ``None``.

        Returns:
            ``{"sessionKey", "path", "lastMessageIndex", "lastCompactionAt" (unix s or None),
            "totalCompactions", "consecutiveFailures", "lastFailureAt" (unix s or None)}``.

        Raises:
            InputError, LockTimeout: the database could not be read.
        """

        row = self._session_row(_STATE_SQL, session_key)
        return None if row is None else dict(zip(_STATE_KEYS, row, strict=True))

    # -- history --------------------------------------------------------------------------

    def add_history(self, row: HistoryRow) -> int:
        """Append one run to ``compaction_history``.

        Returns:
            The new row's id.

        Raises:
            WriteError, LockTimeout: the database could not be written.
        """

        return self._write(partial(write_history, row))

    def history(self, session_key: str | None = None, limit: int | None = None) -> list[HistoryRow]:
        """Recorded runs, oldest first (of one session, or of all).

        Args:
            session_key: only this session's runs, or ``None`` for all.
            limit: at most this many of the newest runs, or ``None`` for all.

        Raises:
            InputError, LockTimeout: the database could not be read.
        """
        where = "WHERE session_key = ?" if session_key is not None else ""
        params: list[Any] = [session_key] if session_key is not None else []
        lim = ""
        if limit is not None:
            lim = "LIMIT ?"
            params.append(limit)
        sql = (
            "SELECT * FROM (SELECT id, session_key, path, command, messages_removed, "
            "dedup_groups, rules_applied, tokens_before, tokens_after, duration_ms, outcome, "
            f"error, created_at FROM compaction_history {where} ORDER BY id DESC {lim}) "
            "ORDER BY id"
        )

        def body(c: sqlite3.Connection) -> list[HistoryRow]:
            return [
                HistoryRow(
                    session_key=r[1],
                    path=r[2],
                    command=r[3],
                    messages_removed=r[4],
                    dedup_groups=r[5],
                    rules_applied=list(json.loads(r[6])),
                    tokens_before=r[7],
                    tokens_after=r[8],
                    duration_ms=r[9],
                    outcome=r[10],
                    error=r[11],
                    created_at=r[12],
                )
                for r in c.execute(sql, params)
            ]

        return self._read(body)

    # -- tiers ----------------------------------------------------------------------------

    def save_tiers(
        self,
        session_key: str,
        path: str,
        summary_uuid: str | None,
        tiers: dict[str, str],
        messages_before: int,
        messages_summarized: int,
        tokens_before: int,
        tokens_after: int,
        now: float,
    ) -> None:
        """Insert or replace the session's L0/L1/L2 summaries (one row per session).

        Args:
            session_key: the session's stable key.
            path: the transcript's path.
            summary_uuid: uuid of the SummaryEvent the tiers were computed from.
            tiers: ``{"L0": ..., "L1": ..., "L2": ...}`` (keys in either case).
            messages_before: messages in the effective context before summarization.
            messages_summarized: messages the summary replaced.
            tokens_before: tokens of the summarized messages.
            tokens_after: tokens of the summary (L2).
            now: unix seconds; ``created_at`` keeps the first save, ``updated_at`` moves.

        ``compression_ratio`` is stored as ``tokens_after / tokens_before`` (the fraction
        kept; 1.0 when ``tokens_before`` is 0).

        Raises:
            ValueError: a tier is missing from ``tiers`` (a programming error).
            WriteError, LockTimeout: the database could not be written.
        """
        row = TiersRow(
            session_key=session_key,
            path=path,
            summary_uuid=summary_uuid,
            tiers=tier_texts(tiers),
            messages_before=messages_before,
            messages_summarized=messages_summarized,
            tokens_before=tokens_before,
            tokens_after=tokens_after,
            at=now,
        )
        self._write(partial(write_tiers, row))

    def get_tiers(self, session_key: str) -> dict[str, Any] | None:
        """The session's stored tiers, or ``None``.

        Returns:
            ``{"sessionKey", "path", "summaryUuid", "tiers": {"L0", "L1", "L2"},
            "messagesBefore", "messagesSummarized", "tokensBefore", "tokensAfter",
            "compressionRatio", "createdAt", "updatedAt"}`` (times in unix seconds).

        Raises:
            InputError, LockTimeout: the database could not be read.
        """

        r = self._session_row(_TIERS_SQL, session_key)
        if r is None:
            return None
        return {
            "sessionKey": r[0],
            "path": r[1],
            "summaryUuid": r[2],
            "tiers": {"L0": r[3], "L1": r[4], "L2": r[5]},
            "messagesBefore": r[6],
            "messagesSummarized": r[7],
            "tokensBefore": r[8],
            "tokensAfter": r[9],
            "compressionRatio": r[10],
            "createdAt": r[11],
            "updatedAt": r[12],
        }

    # -- runs, and consistency with the transcripts ---------------------------------------

    def record(self, run: RunRecord) -> None:
        """Write a run's rows (history, state, tiers) in one transaction.

        Raises:
            WriteError, LockTimeout: the database could not be written (nothing was).
        """
        self._write(partial(write_run, run))

    def begin_run(self, run: RunRecord, uuids: Sequence[str], now: float) -> int:
        """Record a run about to append the events ``uuids`` to its transcript, as pending.

        Returns:
            The pending run's id, for :meth:`finish_run` or :meth:`cancel_run`.

        Raises:
            ValueError: ``run`` has no history row (a programming error).
            WriteError, LockTimeout: the database could not be written.
        """
        if run.history is None:
            raise ValueError("a pending run needs its history row")
        head = run.history

        def body(c: sqlite3.Connection) -> int:
            cur = c.execute(
                "INSERT INTO pending_runs (session_key, path, uuids, record, created_at) "
                "VALUES (?, ?, ?, ?, ?)",
                (
                    clean(head.session_key),
                    clean(head.path),
                    json.dumps(list(uuids)),
                    run.to_json(),
                    now,
                ),
            )
            return int(cur.lastrowid or 0)

        return self._write(body)

    def finish_run(self, pending_id: int) -> bool:
        """Write a pending run's rows and remove it, in one transaction (its events are in
        the transcript).

        Returns:
            ``False`` when the run was no longer pending (another process reconciled it).

        Raises:
            WriteError, LockTimeout: the database could not be written (the run stays
                pending, and :meth:`reconcile` completes it later).
        """
        return self._write(partial(finish_pending, pending_id))

    def cancel_run(self, pending_id: int) -> None:
        """Forget a pending run whose append did not happen (or appended nothing).

        Raises:
            WriteError, LockTimeout: the database could not be written.
        """
        self._write(lambda c: c.execute("DELETE FROM pending_runs WHERE id = ?", (pending_id,)))

    def reconcile(self, session_key: str, present: Container[str], now: float) -> int:
        """Complete the session's pending runs whose events are all in its transcript
        (``present``: the uuids of the transcript's events), and drop those older than
        :data:`PENDING_TTL_S` whose events are not: one transaction.

        Returns:
            The number of runs completed (each was appended, but the store write after the
            append had failed).

        Raises:
            WriteError, LockTimeout: the database could not be written.
        """

        def body(c: sqlite3.Connection) -> int:
            done = 0
            rows = c.execute(
                "SELECT id, uuids, created_at FROM pending_runs WHERE session_key = ? ORDER BY id",
                (clean(session_key),),
            ).fetchall()
            for pending_id, uuids, created_at in rows:
                if all(u in present for u in json.loads(uuids)):
                    done += int(finish_pending(pending_id, c))
                elif now - created_at > PENDING_TTL_S:
                    c.execute("DELETE FROM pending_runs WHERE id = ?", (pending_id,))
            return done

        return self._write(body)

    # -- the run log --------------------------------------------------------------------

    def log_run(self, run: RunLog) -> int:
        """Record a run and every file it was given (any outcome), in one transaction.

        Returns:
            The run's id.

        Raises:
            WriteError, LockTimeout: the database could not be written (nothing was).
        """
        return self._write(partial(write_run_log, run))

    def runs(self, now: float, days: int = 30, paths: Sequence[str] = ()) -> list[dict[str, Any]]:
        """The runs of the last ``days`` UTC days (newest first), each with its files'
        outcomes counted; with ``paths`` (absolute), only runs that had one of them (or a
        file inside one of those folders).

        Returns:
            ``[{"id", "command", "cwd", "startedAt", "finishedAt" (RFC 3339), "exitCode",
            "files", "changed", "unchanged", "failed", "skipped", "tokensSaved" (of this
            run's changed files, re-runs included)}]``.

        Raises:
            UsageError: ``days`` is less than 1.
            InputError, LockTimeout: the database could not be read.
        """
        start = self._start(now, days)
        where, params = _under(("x.path", "x.output"), paths)
        sql = (
            "SELECT r.id, r.command, r.cwd, r.started_at, r.finished_at, r.exit_code, "
            "COUNT(f.id), "
            + ", ".join(f"COALESCE(SUM(f.outcome = '{o}'), 0)" for o in FILE_OUTCOMES)
            + ", COALESCE(SUM(CASE WHEN f.outcome = 'changed' THEN f.tokens_saved END), 0) "
            "FROM runs r LEFT JOIN run_files f ON f.run_id = r.id "
            "WHERE r.started_at >= ? AND r.started_at <= ? AND EXISTS (SELECT 1 FROM "
            f"run_files x WHERE x.run_id = r.id AND {where}) "
            "GROUP BY r.id ORDER BY r.id DESC"
        )
        keys = ("id", "command", "cwd", "startedAt", "finishedAt", "exitCode", "files",
                "changed", "unchanged", "failed", "skipped", "tokensSaved")  # fmt: skip

        def body(c: sqlite3.Connection) -> list[dict[str, Any]]:
            rows = [dict(zip(keys, r, strict=True))
                    for r in c.execute(sql, [start, now, *params])]  # fmt: skip
            for r in rows:
                r["startedAt"] = _rfc3339(r["startedAt"])
                r["finishedAt"] = _rfc3339(r["finishedAt"])
            return rows

        return self._read(body)

    @staticmethod
    def _start(now: float, days: int) -> float:
        if days < 1:
            raise UsageError(f"--days must be at least 1, not {days}")
        return _utc_midnight(now) - (days - 1) * 86_400

    # -- the cross-session report -----------------------------------------------------------

    def report(self, now: float, days: int = 30, paths: Sequence[str] = ()) -> dict[str, Any]:
        """The cross-session report of ``inspect --store``, from one consistent snapshot.

        The window is the last ``days`` UTC calendar days, today included, up to ``now``.
        Savings are counted once per output (:data:`_COUNTED`): a ``-o`` re-run of the same
        input adds nothing.

        Args:
            now: the current time, unix seconds.
            days: the window, in days (at least 1).
            paths: only these files (absolute; as input or output), or the files inside
                these folders.

        Returns:
            ``{"db": path, "schemaVersion": the database's, "sessions": distinct session
            keys (all time; with ``paths``, of those files), "compactionsPerDay": [{"day":
            "YYYY-MM-DD", "runs", "files", "changed", "failed", "skipped", "tokensSaved"}]
            (days with runs only, oldest first), "tokensSaved": the window's total,
            "sessionsInBreaker": [{"sessionKey", "path", "failures", "lastFailureAt" (RFC
            3339)}] (newest failure first), "byCommand": {command: runs in the window}}``,
            and ``"paths"`` when given.

        Raises:
            UsageError: ``days`` is less than 1.
            InputError, LockTimeout: the database could not be read.
        """
        start = self._start(now, days)
        where, params = _under(("f.path", "f.output"), paths)
        window = [start, now, *params]
        in_window = f"f.created_at >= ? AND f.created_at <= ? AND {where}"
        run = "COALESCE(f.run_id, -f.id)"  # a copied history row: a run of its own

        def body(c: sqlite3.Connection) -> dict[str, Any]:
            if paths:
                sessions = c.execute(
                    "SELECT COUNT(DISTINCT COALESCE(f.session_key, f.path)) FROM run_files f "
                    f"WHERE {where}",
                    params,
                ).fetchone()[0]
            else:
                sessions = c.execute(
                    "SELECT COUNT(*) FROM (SELECT session_key FROM compaction_history "
                    "UNION SELECT session_key FROM compaction_state "
                    "UNION SELECT session_key FROM tiered_summaries)"
                ).fetchone()[0]
            per_day = [
                {"day": d, "runs": runs, "files": files, "changed": changed, "failed": failed,
                 "skipped": skipped, "tokensSaved": saved}
                for d, runs, files, changed, failed, skipped, saved in c.execute(
                    "SELECT date(f.created_at, 'unixepoch') AS day, "
                    f"COUNT(DISTINCT {run}), COUNT(*), SUM(f.outcome = 'changed'), "
                    "SUM(f.outcome = 'failed'), SUM(f.outcome = 'skipped'), "
                    f"COALESCE(SUM(CASE WHEN {_COUNTED} THEN f.tokens_saved END), 0) "
                    f"FROM run_files f WHERE {in_window} GROUP BY day ORDER BY day",
                    [start, now, *window],
                )
            ]  # fmt: skip
            by_command = dict(
                c.execute(
                    f"SELECT f.command, COUNT(DISTINCT {run}) FROM run_files f "
                    f"WHERE {in_window} GROUP BY f.command ORDER BY f.command",
                    window,
                ).fetchall()
            )
            state_where, state_params = _under(("path",), paths)
            breaker = [
                {
                    "sessionKey": key,
                    "path": path,
                    "failures": failures,
                    "lastFailureAt": _rfc3339(last),
                }
                for key, path, failures, last in c.execute(
                    "SELECT session_key, path, consecutive_failures, last_failure_at "
                    "FROM compaction_state WHERE consecutive_failures >= ? "
                    "AND last_failure_at IS NOT NULL AND ? - last_failure_at < ? "
                    f"AND {state_where} "
                    "ORDER BY last_failure_at DESC, session_key",
                    (BREAKER_FAILURES, now, BREAKER_SECONDS, *state_params),
                )
            ]
            doc = {
                "db": str(self.path),
                "schemaVersion": _user_version(c),
                "sessions": sessions,
                "compactionsPerDay": per_day,
                "tokensSaved": sum(d["tokensSaved"] for d in per_day),
                "sessionsInBreaker": breaker,
                "byCommand": by_command,
            }
            if paths:
                doc["paths"] = list(paths)
            return doc

        return self._read(body)


def _damaged(exc: sqlite3.Error) -> bool:
    """True for "file is not a database" (``SQLITE_NOTADB``) and "database disk image is
    malformed" (``SQLITE_CORRUPT``): the file cannot be read as a database at all."""
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in (sqlite3.SQLITE_NOTADB, sqlite3.SQLITE_CORRUPT)
    text = str(exc).lower()
    return "not a database" in text or "malformed" in text


def _in_use(p: Path) -> bool:
    """Whether another connection holds a lock on the database ``p`` now (SQLite's own
    locks, taken with ``BEGIN IMMEDIATE`` and no busy wait, then rolled back: nothing is
    written). An empty database file another process has just created and holds in a
    transaction is new, not truncated: it is never moved aside (a run that waited for
    it and gave up, exit 75, used to move it from under its holder)."""
    try:
        conn = sqlite3.connect(p, timeout=0, isolation_level=None)
    except sqlite3.Error:
        return False
    try:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("ROLLBACK")
        return False
    except sqlite3.OperationalError as exc:
        return _is_busy(exc)
    finally:
        conn.close()


def _move_aside(p: Path, why: str) -> None:
    """Rename a damaged database (and its ``-wal``/``-shm`` files) to
    ``<name>.damaged-<UTC time>`` and warn, naming the copy kept. Another process that moved
    it first wins (no error)."""
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    kept = p.with_name(f"{p.name}.damaged-{stamp}")
    if kept.exists():
        kept = p.with_name(f"{p.name}.damaged-{stamp}-{os.getpid()}")
    try:
        os.rename(p, kept)
    except FileNotFoundError:
        return  # moved aside by another process a moment ago
    for suffix in ("-wal", "-shm"):
        with contextlib.suppress(FileNotFoundError):
            os.rename(f"{p}{suffix}", f"{kept}{suffix}")
    warnings.warn(
        CompactWarning(f"{p}: {why}; moved it to {kept} and started a new database"),
        stacklevel=3,
    )


def _retry_pragma(conn: sqlite3.Connection, pragma: str, db: str) -> None:
    """Run a pragma that takes a lock (``journal_mode``) with the busy retry loop."""
    delay = RETRY_BACKOFF_S
    for attempt in range(1, RETRY_ATTEMPTS + 1):
        try:
            conn.execute(pragma).fetchall()
            return
        except sqlite3.OperationalError as exc:
            if not _is_busy(exc):
                raise
            if attempt == RETRY_ATTEMPTS:
                raise LockTimeout(f"database locked while setting {pragma!r}", path=db) from None
            time.sleep(delay * (0.5 + random.random()))
            delay = min(delay * 2, RETRY_BACKOFF_MAX_S)
