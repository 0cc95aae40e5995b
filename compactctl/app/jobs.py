"""Per-file jobs of the commands that change transcripts: what ``cli.py`` runs for each path.

Each job opens one :class:`~compactctl.session.Session` (the file is read once), runs a
layer over it (:mod:`compactctl.layers`), writes where :class:`OutputOptions` says (append
in place through the session, a ``-o`` file, stdout, or nothing for ``--dry-run`` /
``--check``), records the run in the store, and returns a JSON-ready result dict (or raises
a :class:`~compactctl.errors.CompactError`). Jobs are top-level functions so that ``--jobs``
can run them in a process pool (:mod:`compactctl.app.runner`).

Output modes: docs/design.md section 4.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any

from compactctl.errors import InputError, UsageError
from compactctl.io.export import materialized_lines
from compactctl.io.files import STDIN, TORN_WAIT, write_output
from compactctl.io.jsonl import dump_events
from compactctl.io.locking import DEFAULT_LOCK_TIMEOUT
from compactctl.model import Event
from compactctl.replay import replay
from compactctl.session import Session

__all__ = [
    "OutputOptions",
    "compact_path",
    "convert_path",
    "dedup_path",
    "layer_path",
    "output_name",
    "record_run",
    "rules_path",
    "tiers_path",
    "write_plan",
]


@dataclass(frozen=True)
class OutputOptions:
    """Where a command that changes a transcript writes (docs/design.md section 4).

    Attributes:
        output: ``-o`` target (a path or ``-``); ``None``: append in place (a file) or
            stream to stdout (stdin input).
        output_dir: ``-o DIR/``: each input is written to ``DIR/`` + :func:`output_name`.
        materialize: write the effective context instead of the log.
        as_format: ``canonical`` or ``openai`` (Chat Completions messages), materialize only.
        dry_run: report only.
        check: report only; the CLI exits 1 if anything would change.
        lock_timeout: seconds to wait for the transcript's lock (and a mid-line writer).
        torn_wait: seconds a last line without ``\\n`` must stay unchanged to be torn.
        tier: summary tier used by ``--materialize``.
        fmt: the source format (``None``: detect).
        db: the store path (``None``: ``COMPACTCTL_DB`` or the XDG state folder); ``""``
            disables the store.
    """

    output: str | None = None
    output_dir: str | None = None
    materialize: bool = False
    as_format: str = "canonical"
    dry_run: bool = False
    check: bool = False
    lock_timeout: float = DEFAULT_LOCK_TIMEOUT
    torn_wait: float = TORN_WAIT
    tier: str | None = None
    fmt: str | None = None
    db: str | None = None

    @property
    def writes(self) -> bool:
        """Whether anything is written (not ``--dry-run`` nor ``--check``)."""
        return not (self.dry_run or self.check)

    def in_place(self, path: str) -> bool:
        """Whether ``path`` itself is appended to (no ``-o``, a file, not materialized)."""
        return (
            self.output is None
            and self.output_dir is None
            and path != STDIN
            and not self.materialize
        )


def output_name(path: str) -> str:
    """The file name an input gets under ``-o DIR/``: its own name, ``.gz`` dropped, always
    ending in ``.jsonl`` (``-`` is ``stdin.jsonl``).

    >>> output_name("/a/rollout-1.jsonl.gz"), output_name("t.traj"), output_name("-")
    ('rollout-1.jsonl', 't.jsonl', 'stdin.jsonl')
    """
    if path == STDIN:
        return "stdin.jsonl"
    name = os.path.basename(path)
    if name.endswith(".gz"):
        name = name[:-3]
    if not name.endswith(".jsonl"):
        name = os.path.splitext(name)[0] + ".jsonl"
    return name


def convert_path(path: str, out: OutputOptions) -> dict[str, Any]:
    """``convert`` on one transcript: its canonical JSONL, written where ``out`` says.

    The target is ``out.output`` (a file, or ``-``/``None`` for stdout) or, with ``-o DIR/``,
    ``DIR/`` + :func:`output_name`. The source is never changed. With ``out.dry_run`` or
    ``out.check`` nothing is written.

    Returns:
        ``{"path", "format", "events", "output", "changed"}``: the detected (or given)
        format, the number of canonical events, the target (``-`` for stdout), and whether
        the canonical form differs from the source (``False`` for a canonical source, whose
        lines are written back unchanged).

    Raises:
        InputError: unreadable file or unknown format. WriteError: the target cannot be
        written.
    """
    session = Session.open(path, out.fmt, preload=False)
    target = out.output or STDIN
    if out.output_dir is not None:
        target = os.path.join(out.output_dir, output_name(path))
    if out.writes:
        write_output(target, dump_events(session.events))
    return {
        "path": path,
        "format": session.format,
        "events": len(session.events),
        "output": target,
        "changed": session.format != "canonical",
    }


def open_session(
    path: str, out: OutputOptions, *, encoding: str | None, context_window: int | None = None
) -> Session:
    """Open the session a job changes, refusing what cannot be changed in place.

    A foreign-format or gzip transcript is never appended to: it needs ``-o`` (refused
    before any planning, with ``--dry-run`` / ``--check`` too; a gzip file before it is
    read).

    Raises:
        InputError: a foreign or gzip file to be changed in place (exit 3: the other files
            of a run are still processed), or a read failure.
    """
    in_place = out.in_place(path)
    session = Session.open(
        path,
        out.fmt,
        encoding=encoding,
        context_window=context_window,
        refuse_compressed=in_place and out.writes,
    )
    fmt = session.format
    if in_place and fmt != "canonical":
        raise InputError(
            f"is {'an' if fmt[0] in 'aeio' else 'a'} {fmt} transcript; compactctl never "
            "appends to another agent's file (nothing was written). Pass -o FILE, -o DIR/ "
            "(many files) or -o - to write canonical JSONL with the result",
            path=path,
        )
    return session


def write_plan(
    session: Session, new: list[Event], report: Mapping[str, Any], out: OutputOptions
) -> dict[str, Any]:
    """Write a session's planned events as ``out`` says, and the job's result.

    - a file, no ``-o``: the new events are appended in place (:meth:`Session.append`);
    - ``-`` (stdin), no ``-o``: the input events (raw bytes) then the new ones, to stdout;
    - ``-o TARGET``: the same stream written to TARGET (atomically; ``-`` is stdout);
    - ``--materialize``: the effective context (canonical, or ``--as openai``) instead;
    - ``--dry-run`` / ``--check``: nothing is written.

    Returns:
        ``report`` plus ``path``, ``format``, ``changed``, ``appended``, ``skipped``,
        ``written`` (where the output went) and ``tornLine``.

    Raises:
        UsageError: ``-o`` naming the input itself. WriteError, LockTimeout: from writing.
    """
    path = session.path
    if out.output_dir is not None:
        out = replace(out, output=os.path.join(out.output_dir, output_name(path)))
    result: dict[str, Any] = {
        **report,
        "path": path,
        "format": session.format,
        "changed": bool(new),
        "appended": 0,
        "skipped": 0,
        "written": None,
        "tornLine": False,
    }
    if not out.writes:
        return result
    target = out.output
    if target is not None and target != STDIN and path != STDIN and _same_file(path, target):
        raise UsageError(
            "-o names the input itself; write to another file (compactctl never rewrites a "
            "transcript), or omit -o to append to a canonical transcript in place",
            path=path,
        )
    if out.materialize:
        view = replay(session.events + new, tier=out.tier)
        result["written"] = target or STDIN
        write_output(target or STDIN, materialized_lines(view, out.as_format))
        return result
    if target is not None or path == STDIN:
        dest = target or STDIN
        write_output(dest, dump_events(session.events + new))
        result["written"] = dest
        result["appended"] = len(new)
        return result
    if new:
        done = session.append(new, lock_timeout=out.lock_timeout, torn_wait=out.torn_wait)
        result.update(
            appended=done.written, skipped=done.skipped, written=path, tornLine=done.torn_line
        )
        result["changed"] = done.written > 0
    return result


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


# --- the store ------------------------------------------------------------------------------


@contextlib.contextmanager
def _store(out: OutputOptions) -> Iterator[Any]:
    """The SQLite store of a job that writes, or ``None`` (dry run, check, ``--no-store``)."""
    if not out.writes or out.db == "":
        yield None
        return
    from compactctl.app.store import Store, resolve_db_path

    store = Store.open(resolve_db_path(out.db))
    try:
        yield store
    finally:
        store.close()


def record_run(
    store: Any, result: Mapping[str, Any], command: str, *, rules: list[str] | None = None
) -> None:
    """Write the history row of a run that changed a transcript (every command that changes
    a transcript writes one; nothing for a run that changed nothing)."""
    if store is None or not result.get("changed"):
        return
    from compactctl.app.store import HistoryRow

    summary = result.get("summary")
    store.add_history(
        HistoryRow(
            session_key=str(result.get("sessionKey") or result["path"]),
            path=str(result["path"]),
            command=command,
            messages_removed=int(summary.get("replaces", 0)) if isinstance(summary, dict) else 0,
            dedup_groups=int(result.get("groups", 0) or 0),
            rules_applied=list(rules or []),
            tokens_before=int(result.get("tokensBefore", 0) or 0),
            tokens_after=int(result.get("promptEstimate", result.get("tokensAfter", 0)) or 0),
            duration_ms=int(result.get("durationMs", 0) or 0),
            outcome="applied",
            error=None,
            created_at=time.time(),
        )
    )


# --- the jobs -------------------------------------------------------------------------------


def compact_path(path: str, options: Any, out: OutputOptions) -> dict[str, Any]:
    """``compact`` on one transcript: plan (micro, summary), write, record in the store.

    Args:
        path: a transcript or ``-``.
        options: :class:`compactctl.layers.summary.CompactOptions`.
        out: where to write.

    Raises:
        SummarizerError: summarization failed (counted toward the 24-hour breaker); nothing
            was written.
        UsageError, InputError, WriteError, LockTimeout: as :func:`open_session` and
            :func:`write_plan`.
    """
    from compactctl.layers.summary import CompactLayer

    with _store(out) as store:

        def breaker(key: str) -> bool:
            return bool(store is not None and store.breaker_open(key, time.time()))

        offline = None
        if not out.writes and options.model not in (None, "extractive"):
            # a dry run never calls (nor pays) a model: the built-in summarizer stands in,
            # so the report shows what would be replaced and about what it saves
            from compactctl.summarize.extractive import ExtractiveSummarizer

            offline = ExtractiveSummarizer()
        session = open_session(
            path, out, encoding=options.encoding, context_window=options.context_window
        )
        layer = CompactLayer(summarizer=offline, breaker_open=breaker)
        plan = layer.plan(session, options)
        if offline is not None:
            plan.report.model_not_called = options.model
        if layer.failed is not None:
            if store is not None:
                count = store.record_failure(plan.report.session_key, path, time.time())
                layer.failed.message += f" (consecutive failures: {count})"
            raise layer.failed
        result = write_plan(session, plan.events, plan.report.to_json(), out)
        if store is not None and result["changed"] and result.get("summary"):
            store.record_success(result["sessionKey"], path, result["messages"], time.time())
        record_run(store, result, "compact")
        return result


def layer_path(
    command: str, path: str, options: Any, out: OutputOptions, encoding: str | None = None
) -> dict[str, Any]:
    """``rules`` or ``dedup`` (``command``) on one transcript: the layer's report plus the
    session key, the tokenizer and the planning time in milliseconds (``durationMs``).

    Args:
        command: ``rules`` or ``dedup``.
        options: :class:`~compactctl.layers.options.RulesOptions` or ``DedupOptions``.
        encoding: the ``--encoding`` override (``estimate``: chars-based counts).

    Raises:
        UsageError, InputError, WriteError, LockTimeout: as :func:`open_session` and
            :func:`write_plan`.
    """
    if command == "rules":
        from compactctl.layers.rules import RulesLayer as Layer
    else:
        from compactctl.layers.dedup import DedupLayer as Layer  # type: ignore[assignment]
    with _store(out) as store:
        session = open_session(path, out, encoding=encoding)
        started = time.monotonic()
        planned = Layer().plan(session, options)
        report = planned.report.to_json()
        report["sessionKey"] = session.meta.key
        report["tokenizer"] = session.counter.encoding_name
        report["durationMs"] = int((time.monotonic() - started) * 1000)
        result = write_plan(session, planned.events, report, out)
        rules = sorted(result.get("rules", {})) if command == "rules" else None
        record_run(store, result, command, rules=rules)
        return result


def rules_path(path: str, options: Any, out: OutputOptions, encoding: str | None = None) -> Any:
    """``rules`` on one transcript: :func:`layer_path` with ``RulesOptions``."""
    return layer_path("rules", path, options, out, encoding)


def dedup_path(path: str, options: Any, out: OutputOptions, encoding: str | None = None) -> Any:
    """``dedup`` on one transcript: :func:`layer_path` with ``DedupOptions``."""
    return layer_path("dedup", path, options, out, encoding)


def tiers_path(
    path: str,
    out: OutputOptions,
    *,
    tier: str = "auto",
    encoding: str | None = None,
    context_window: int | None = None,
    model: str | None = None,
) -> dict[str, Any]:
    """``tiers`` on one transcript: a superseding SummaryEvent with L0/L1/L2, stored in SQLite.

    Raises:
        SummaryFormatError: a model rewrite was invalid (nothing appended).
        UsageError, InputError, WriteError, LockTimeout: as :func:`write_plan`.
    """
    from compactctl.layers.tiers import TiersLayer, TiersOptions

    with _store(out) as store:
        session = open_session(path, out, encoding=encoding, context_window=context_window)
        plan = TiersLayer().plan(session, TiersOptions(tier=tier, model=model))
        report = plan.report
        result = write_plan(session, plan.events, report.to_json(), out)
        if store is not None and result["changed"] and report.tier_texts:
            store.save_tiers(
                report.session_key,
                path,
                report.summary,
                report.tier_texts,
                report.messages,
                int(report.replaces or 0),
                int(report.tokens_before or 0),
                int(report.prompt_estimate or 0),
                time.time(),
            )
        record_run(store, result, "tiers")
        return result
