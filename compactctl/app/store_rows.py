"""The rows a run writes to the store (:mod:`compactctl.app.store`), and the SQL that
writes them inside the caller's transaction.

A run's rows travel together as a :class:`RunRecord` (history, compaction state, tiers):
written in one transaction, or kept as JSON in ``pending_runs`` while the run appends to its
transcript (docs/design.md section 6). Text is stored with lone surrogates replaced
(:func:`clean`): SQLite stores UTF-8, which cannot hold them. Standard library only.
"""

from __future__ import annotations

import dataclasses
import json
import re
import sqlite3
from dataclasses import dataclass, field
from typing import Final

__all__ = [
    "FILE_OUTCOMES",
    "OUTCOMES",
    "FileRow",
    "HistoryRow",
    "RunLog",
    "RunRecord",
    "SuccessRow",
    "TiersRow",
    "clean",
    "finish_pending",
    "tier_texts",
    "write_history",
    "write_run_log",
    "write_run",
    "write_success",
    "write_tiers",
]

#: The values of ``compaction_history.outcome``.
OUTCOMES: Final = ("applied", "noop", "failed")

#: The values of ``run_files.outcome``: a file's ``outcome`` in the ``--json`` report
#: (docs/report.schema.json) of a command that writes.
FILE_OUTCOMES: Final = ("changed", "unchanged", "failed", "skipped")


@dataclass(frozen=True, kw_only=True)
class FileRow:
    """One file of a run, as recorded in ``run_files``.

    Attributes:
        path: the input, absolute (``-`` for stdin; a URL as given).
        output: where the result went, absolute (the input itself when appended in place,
            ``-`` for stdout), or ``None`` when nothing was written.
        session_key: the session's key (``sessionKey`` of the report), when it was read.
        outcome: one of :data:`FILE_OUTCOMES`.
        tokens_before, tokens_after, tokens_saved: the report's counts, in tokens
            (``None``: the command does not measure it).
        error_code: the error's ``code`` (docs/report.schema.json) of a failed file.
        message: the error of a failed file, or the reason of a skipped one.

    Raises:
        ValueError: ``outcome`` is not one of :data:`FILE_OUTCOMES` (a programming error).
    """

    path: str
    output: str | None = None
    session_key: str | None = None
    outcome: str
    tokens_before: int | None = None
    tokens_after: int | None = None
    tokens_saved: int | None = None
    error_code: str | None = None
    message: str | None = None

    def __post_init__(self) -> None:
        if self.outcome not in FILE_OUTCOMES:
            raise ValueError(f"outcome must be one of {FILE_OUTCOMES}, not {self.outcome!r}")


@dataclass(frozen=True, kw_only=True)
class RunLog:
    """One run of a command that writes, and every file it was given (``runs`` and
    ``run_files``). Times are unix seconds (UTC); ``cwd`` is absolute."""

    command: str
    cwd: str
    started_at: float
    finished_at: float
    exit_code: int
    files: list[FileRow] = field(default_factory=list)


@dataclass(frozen=True, kw_only=True)
class HistoryRow:
    """One compaction run, as recorded in ``compaction_history``.

    Attributes:
        session_key: the session's stable key (its ``sessionId``, else its path).
        path: the transcript's path.
        command: the subcommand (``rules``, ``dedup``, ``compact``, ``tiers``, ...).
        messages_removed: messages the run removed or replaced from the effective context.
        dedup_groups: groups of near-duplicates found (0 for other commands).
        rules_applied: names of the rules that changed something (stored as a JSON list).
        tokens_before: prompt estimate before the run, in tokens.
        tokens_after: prompt estimate after the run, in tokens.
        duration_ms: wall time of the run, in milliseconds.
        outcome: ``"applied"``, ``"noop"`` (nothing to do) or ``"failed"``.
        error: the error message when the run failed.
        created_at: when the run ended, unix seconds (UTC).

    Raises:
        ValueError: ``outcome`` is not one of :data:`OUTCOMES` (a programming error).
    """

    session_key: str
    path: str
    command: str
    messages_removed: int = 0
    dedup_groups: int = 0
    rules_applied: list[str] = field(default_factory=list)
    tokens_before: int = 0
    tokens_after: int = 0
    duration_ms: int = 0
    outcome: str = "applied"
    error: str | None = None
    created_at: float

    def __post_init__(self) -> None:
        if self.outcome not in OUTCOMES:
            raise ValueError(f"outcome must be one of {OUTCOMES}, not {self.outcome!r}")


@dataclass(frozen=True, kw_only=True)
class SuccessRow:
    """A successful compaction of a session (``compaction_state``: failures reset,
    ``total_compactions`` + 1); the arguments of :meth:`Store.record_success`."""

    session_key: str
    path: str
    last_message_index: int
    at: float


@dataclass(frozen=True, kw_only=True)
class TiersRow:
    """A session's L0/L1/L2 summaries (``tiered_summaries``); the arguments of
    :meth:`Store.save_tiers` (``at``: its ``now``)."""

    session_key: str
    path: str
    summary_uuid: str | None
    tiers: dict[str, str]
    messages_before: int
    messages_summarized: int
    tokens_before: int
    tokens_after: int
    at: float


@dataclass(frozen=True, kw_only=True)
class RunRecord:
    """Everything one run writes to the store, written in one transaction
    (:meth:`Store.record`, or :meth:`Store.begin_run` then :meth:`Store.finish_run` around an
    append). Each part is optional.

    >>> r = RunRecord(success=SuccessRow(session_key="k", path="p", last_message_index=3, at=1.0))
    >>> RunRecord.from_json(r.to_json()) == r
    True
    """

    history: HistoryRow | None = None
    success: SuccessRow | None = None
    tiers: TiersRow | None = None

    def to_json(self) -> str:
        """The record as JSON text (``pending_runs.record``)."""
        return json.dumps(dataclasses.asdict(self))

    @classmethod
    def from_json(cls, text: str) -> RunRecord:
        """The record :meth:`to_json` wrote."""
        data = json.loads(text)
        parts = {"history": HistoryRow, "success": SuccessRow, "tiers": TiersRow}
        return cls(**{k: parts[k](**v) if v else None for k, v in data.items()})


_SURROGATE = re.compile("[\ud800-\udfff]")


def clean(text: str) -> str:
    """``text`` with lone surrogates (from ``\\udXXX`` escapes in a transcript; SQLite
    cannot store them) replaced by U+FFFD.

    >>> clean("a" + chr(0xD800) + "b") == "a\ufffdb"
    True
    """
    return _SURROGATE.sub("\ufffd", text)


def tier_texts(tiers: dict[str, str]) -> dict[str, str]:
    """``tiers`` with upper-case keys; raises ValueError when L0, L1 or L2 is missing."""
    norm = {k.upper(): v for k, v in tiers.items()}
    missing = [k for k in ("L0", "L1", "L2") if k not in norm]
    if missing:
        raise ValueError(f"tiers lacks {', '.join(missing)}")
    return norm


def write_history(row: HistoryRow, c: sqlite3.Connection) -> int:
    cur = c.execute(
        "INSERT INTO compaction_history (session_key, path, command, messages_removed, "
        "dedup_groups, rules_applied, tokens_before, tokens_after, duration_ms, "
        "outcome, error, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            clean(row.session_key),
            clean(row.path),
            row.command,
            row.messages_removed,
            row.dedup_groups,
            json.dumps(list(row.rules_applied)),
            row.tokens_before,
            row.tokens_after,
            row.duration_ms,
            row.outcome,
            None if row.error is None else clean(row.error),
            row.created_at,
        ),
    )
    return int(cur.lastrowid or 0)


def write_success(row: SuccessRow, c: sqlite3.Connection) -> None:
    c.execute(
        "INSERT INTO compaction_state (session_key, path, last_message_index, "
        "last_compaction_at, total_compactions, consecutive_failures) "
        "VALUES (?, ?, ?, ?, 1, 0) "
        "ON CONFLICT (session_key) DO UPDATE SET path = excluded.path, "
        "last_message_index = excluded.last_message_index, "
        "last_compaction_at = excluded.last_compaction_at, "
        "total_compactions = total_compactions + 1, consecutive_failures = 0",
        (clean(row.session_key), clean(row.path), row.last_message_index, row.at),
    )


def write_tiers(row: TiersRow, c: sqlite3.Connection) -> None:
    norm = tier_texts(row.tiers)
    ratio = row.tokens_after / row.tokens_before if row.tokens_before else 1.0
    c.execute(
        "INSERT INTO tiered_summaries (session_key, path, summary_uuid, l0, l1, l2, "
        "messages_before, messages_summarized, tokens_before, tokens_after, "
        "compression_ratio, created_at, updated_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
        "ON CONFLICT (session_key) DO UPDATE SET path = excluded.path, "
        "summary_uuid = excluded.summary_uuid, l0 = excluded.l0, l1 = excluded.l1, "
        "l2 = excluded.l2, messages_before = excluded.messages_before, "
        "messages_summarized = excluded.messages_summarized, "
        "tokens_before = excluded.tokens_before, tokens_after = excluded.tokens_after, "
        "compression_ratio = excluded.compression_ratio, "
        "updated_at = excluded.updated_at",
        (
            clean(row.session_key),
            clean(row.path),
            row.summary_uuid,
            clean(norm["L0"]),
            clean(norm["L1"]),
            clean(norm["L2"]),
            row.messages_before,
            row.messages_summarized,
            row.tokens_before,
            row.tokens_after,
            ratio,
            row.at,
            row.at,
        ),
    )


def write_run(run: RunRecord, c: sqlite3.Connection) -> None:
    if run.history is not None:
        write_history(run.history, c)
    if run.success is not None:
        write_success(run.success, c)
    if run.tiers is not None:
        write_tiers(run.tiers, c)


def write_run_log(run: RunLog, c: sqlite3.Connection) -> int:
    """Inside a write transaction: the run's row and its files' rows; the run's id."""
    cur = c.execute(
        "INSERT INTO runs (command, cwd, started_at, finished_at, exit_code) "
        "VALUES (?, ?, ?, ?, ?)",
        (run.command, clean(run.cwd), run.started_at, run.finished_at, run.exit_code),
    )
    run_id = int(cur.lastrowid or 0)
    c.executemany(
        "INSERT INTO run_files (run_id, command, path, output, session_key, outcome, "
        "tokens_before, tokens_after, tokens_saved, error_code, message, created_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [
            (run_id, run.command, clean(f.path), None if f.output is None else clean(f.output),
             None if f.session_key is None else clean(f.session_key), f.outcome,
             f.tokens_before, f.tokens_after, f.tokens_saved, f.error_code,
             None if f.message is None else clean(f.message), run.finished_at)
            for f in run.files
        ],
    )  # fmt: skip
    return run_id


def finish_pending(pending_id: int, c: sqlite3.Connection) -> bool:
    """Inside a write transaction: remove the pending run and write its rows; ``False`` if
    it was gone already (so no row is ever written twice)."""
    row = c.execute("SELECT record FROM pending_runs WHERE id = ?", (pending_id,)).fetchone()
    if row is None:
        return False
    c.execute("DELETE FROM pending_runs WHERE id = ?", (pending_id,))
    write_run(RunRecord.from_json(row[0]), c)
    return True
