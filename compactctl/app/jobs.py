"""Per-file jobs of the commands that change transcripts: what ``cli.py`` runs for each path.

Each job opens one :class:`~compactctl.session.Session` (the file is read once), runs a
layer over it (:mod:`compactctl.layers`), writes where :class:`OutputOptions` says (append
in place through the session, a ``-o`` file, stdout, or nothing for ``--dry-run`` /
``--check``), records the run in the store, and returns a JSON-ready result dict (or raises
a :class:`~compactctl.errors.CompactError`). Jobs are top-level functions so that ``--jobs``
can run them in a process pool (:mod:`compactctl.app.runner`).

Two rules keep the transcript and the store true (docs/design.md section 6):

- a transcript that changed between the read and the append (rotated, rewritten:
  :class:`~compactctl.errors.FileChanged`) is read and planned once more, and written only if
  it holds still this time (:func:`replanned`);
- an append is recorded in the store as a pending run first and completed after it
  (:func:`write_recorded`); a store that fails after the append gives
  :class:`~compactctl.errors.StoreNotUpdated` ("appended N bytes to FILE; store not updated:
  REASON"), and the next run completes the record from the transcript
  (:func:`reconcile_store`).

Output modes: docs/design.md section 4.
"""

from __future__ import annotations

import contextlib
import os
import time
import warnings
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from compactctl.app import provenance
from compactctl.errors import (
    CompactError,
    CompactWarning,
    FileChanged,
    LockTimeout,
    NotAppendable,
    StoreNotUpdated,
    UsageError,
)
from compactctl.io.export import framed, materialized_lines
from compactctl.io.files import STDIN, TORN_WAIT, is_stream, same_file, write_unless_same
from compactctl.io.jsonl import dump_events
from compactctl.io.locking import DEFAULT_LOCK_TIMEOUT
from compactctl.io.native import AS_NATIVE, RESUMABLE, native_format
from compactctl.io.remote import is_url
from compactctl.layers.undo import plan_live
from compactctl.model import BadLine, Event, acyclic
from compactctl.replay import replay
from compactctl.session import Session
from compactctl.tokens import prompt_tokens

if TYPE_CHECKING:
    from compactctl.app.store import RunRecord

__all__ = [
    "OutputOptions",
    "compact_path",
    "convert_path",
    "dedup_path",
    "fresh",
    "layer_path",
    "layers_path",
    "mirrored_name",
    "output_name",
    "output_target",
    "reconcile_store",
    "record_run",
    "replanned",
    "rules_path",
    "run_record",
    "tiers_path",
    "undo_path",
    "write_plan",
    "write_recorded",
    "write_resumable",
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
        torn_wait: seconds a last line without ``\\n`` must stay unchanged to be torn by a
            crashed writer (:data:`~compactctl.io.files.TORN_WAIT`, 5 minutes; ``0``: now).
        tier: summary tier used by ``--materialize``.
        fmt: the source format (``None``: detect).
        db: the store path (``None``: ``COMPACTCTL_DB`` or the XDG state folder); ``""``
            disables the store.
        roots: the folders among PATHS: under ``-o DIR/`` a file found in one keeps its
            path relative to it (:func:`mirrored_name`).
        fingerprint: what decides a ``-o`` output besides its input
            (:func:`compactctl.app.provenance.fingerprint`), set by the job: its output
            records it (:func:`fresh`).
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
    roots: tuple[str, ...] = ()
    fingerprint: str | None = None

    @property
    def writes(self) -> bool:
        """Whether anything is written (not ``--dry-run`` nor ``--check``)."""
        return not (self.dry_run or self.check)

    def in_place(self, path: str) -> bool:
        """Whether ``path`` itself is appended to (no ``-o``, a regular file, not
        materialized; a stream such as a FIFO or ``/dev/stdin`` is never appended to)."""
        return (
            self.output is None
            and self.output_dir is None
            and not self.materialize
            and not is_stream(path)
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


def mirrored_name(path: str, roots: tuple[str, ...] = ()) -> str:
    """Where an input goes under ``-o DIR/``, relative to DIR: its path relative to the first
    of ``roots`` (the folders among PATHS) that holds it, else its own name, with the name
    made by :func:`output_name` (issue 19: ``a/s.jsonl`` and ``b/s.jsonl`` of one folder no
    longer clash; the tree is mirrored).

    >>> mirrored_name("in/a/s.jsonl.gz", ("in",)), mirrored_name("x/t.traj", ("in",))
    ('a/s.jsonl', 't.jsonl')
    """
    if path != STDIN:
        for root in roots:
            rel = os.path.relpath(path, root)
            if rel != os.curdir and not rel.startswith(os.pardir + os.sep):
                return os.path.join(os.path.dirname(rel), output_name(path))
    return output_name(path)


def output_target(path: str, out: OutputOptions) -> str | None:
    """The ``-o`` target of ``path`` (``-o DIR/``: DIR joined with :func:`mirrored_name`;
    its folder is created when the run writes), or ``None`` without ``-o``."""
    if out.output_dir is None:
        return out.output
    target = os.path.join(out.output_dir, mirrored_name(path, out.roots))
    parent = os.path.dirname(target)
    if out.writes and parent and not is_url(target):
        os.makedirs(parent, exist_ok=True)
    return target


def fresh(
    command: str, options: Any, path: str, out: OutputOptions
) -> tuple[OutputOptions, dict[str, Any] | None]:
    """``out`` with the fingerprint of ``command`` and ``options`` (``-o DIR/`` only: the
    nightly run over a tree), and the recorded result of ``path`` when its output is up to
    date (nothing to plan nor write: :mod:`compactctl.app.provenance`), else ``None``.

    Raises:
        OutputChanged: the output no longer holds what compactctl wrote there
            (:func:`~compactctl.app.provenance.refuse_changed`); refused before planning,
            so no model is called for it. OutputNotOurs: a file is at the output's path
            that compactctl did not write (no record of it); refused likewise.
    """
    if out.output_dir is None:
        return out, None
    folder = out.output_dir
    fp = provenance.fingerprint(command, options, out)
    out = replace(out, fingerprint=fp)
    target = output_target(path, out)
    with provenance.writing(path, target, folder if out.writes else None, out.lock_timeout):
        # under the folder's lock: another run's output is read with its record
        hit = provenance.recorded_result(path, target, folder, fp)
        if hit is None:
            provenance.refuse_changed(path, target, folder)
    return out, hit


def convert_path(path: str, out: OutputOptions) -> dict[str, Any]:
    """``convert`` on one transcript: its canonical JSONL, written where ``out`` says.

    The target is ``out.output`` (a file, or ``-``/``None`` for stdout) or, with ``-o DIR/``,
    ``DIR/`` + :func:`mirrored_name`. The source is never changed; a target holding the
    same bytes already is not rewritten (the conversion is deterministic, so that is all
    "up to date" needs here). With ``out.dry_run`` or
    ``out.check`` nothing is written. Under ``-o DIR/`` the output's record is written as
    for the other commands (:mod:`compactctl.app.provenance`), and an output that no longer
    holds what compactctl wrote there is refused.

    Returns:
        ``{"path", "format", "events", "output", "changed"}``: the detected (or given)
        format, the number of canonical events written, the target (``-`` for stdout), and whether
        the canonical form differs from the source (``False`` for a canonical source, whose
        lines are written back unchanged), plus ``"upToDate": True`` when the target held
        these bytes already (not rewritten: :func:`~compactctl.io.files.write_unless_same`).

    Raises:
        InputError: unreadable file or unknown format. WriteError: the target cannot be
        written. OutputChanged, OutputNotOurs: as :func:`fresh`.
    """
    session = Session.open(path, out.fmt, preload=False)
    target = output_target(path, out) or STDIN
    folder = out.output_dir
    events = written_events(session)
    same = False
    with provenance.writing(path, target, folder if out.writes else None, out.lock_timeout):
        if folder is not None:
            provenance.refuse_changed(path, target, folder)
        if out.writes:
            same = write_unless_same(target, dump_events(events)) is None
        result: dict[str, Any] = {
            "path": path,
            "format": session.format,
            "events": len(events),
            "output": target,
            "changed": session.format != "canonical" and not same,
        }
        if same:
            result["upToDate"] = True
        if folder is not None and out.writes and not same:  # a later run tells its bytes apart
            fp = provenance.fingerprint("convert", None, out)
            provenance.record(path, target, folder, fp, session.identity, result)
    return result


def written_events(session: Session) -> list[Event]:
    """The events of a session that its canonical form written elsewhere (``convert``,
    ``compact -o``) holds: all of a canonical file's (its lines are kept as they are,
    docs/design.md section 6); a foreign file's without the lines that hold no event
    (malformed, torn: :class:`~compactctl.model.BadLine`), which its reader reported and
    skipped: their bytes are not canonical JSON lines, and every line written is valid JSON
    (docs/design.md section 6; they used to be written after the conversation, a torn one
    given a newline)."""
    if session.format == "canonical":
        return session.events
    return [e for e in session.events if not isinstance(e, BadLine)]


def open_session(
    path: str, out: OutputOptions, *, encoding: str | None, context_window: int | None = None
) -> Session:
    """Open the session a job changes, refusing what cannot be changed in place.

    A foreign-format or gzip transcript is never appended to: it needs ``-o`` (refused
    before any planning, with ``--dry-run`` too; a gzip file before it is read). ``--check``
    judges it on its canonical form instead (issue 19: a CI gate tells "needs work", exit 1,
    from "cannot be read", exit 3): whether compacting what it converts to would append.

    Raises:
        NotAppendable: a foreign or gzip file to be changed in place (exit 3 when named; a
            folder run skips it: :func:`compactctl.app.runner.run_files`).
        InputError: a read failure.
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
    if in_place and fmt != "canonical" and not out.check:
        resume = (
            f"; or, with compact, --as native to write a new {fmt} session the agent resumes"
            if fmt in RESUMABLE
            else ""
        )
        raise NotAppendable(
            f"is {'an' if fmt[0] in 'aeio' else 'a'} {fmt} transcript; compactctl never "
            "appends to another agent's file (nothing was written). Pass -o FILE, -o DIR/ "
            f"(many files) or -o - to write canonical JSONL with the result{resume}",
            path=path,
            kind=fmt,
        )
    return session


def write_plan(
    session: Session, new: list[Event], report: Mapping[str, Any], out: OutputOptions
) -> dict[str, Any]:
    """Write a session's planned events as ``out`` says, and the job's result.

    - a file, no ``-o``: the new events are appended in place (:meth:`Session.append`);
    - ``-`` (stdin) or another stream (a FIFO, ``/dev/stdin``: ``is_stream``), no ``-o``:
      the input events (raw bytes) then the new ones, to stdout;
    - ``-o TARGET``: the same stream written to TARGET (atomically; ``-`` is stdout); a
      target that holds these bytes already is not rewritten (``upToDate``, ``changed``
      false: a second identical run writes nothing);
    - ``--materialize``: the effective context (canonical, or ``--as openai``) instead;
    - ``--dry-run`` / ``--check``: nothing is written.

    Returns:
        ``report`` plus ``path``, ``format``, ``changed``, ``appended`` (events written),
        ``alreadyPresent`` (planned events the file already held: not written again),
        ``written`` (where the output went) and ``tornLine``; ``upToDate`` and ``output``
        when the ``-o`` target held these bytes already.

    Raises:
        UsageError: ``-o`` naming the input itself. OutputChanged: an ``-o DIR/`` output
            that no longer holds what compactctl wrote there (never overwritten).
            OutputNotOurs: a file at an ``-o DIR/`` output's path that compactctl did not
            write (never overwritten).
            WriteError, LockTimeout, FileChanged: from writing.
    """
    return _write(session, new, report, out)[0]


def _write(
    session: Session, new: list[Event], report: Mapping[str, Any], out: OutputOptions
) -> tuple[dict[str, Any], int]:
    """:func:`write_plan`, and the number of bytes written (appended, or the output's)."""
    path = session.path
    if out.output_dir is not None:
        out = replace(out, output=output_target(path, out))
    result: dict[str, Any] = {
        **report,
        "path": path,
        "format": session.format,
        "changed": bool(new),
        "appended": 0,
        "alreadyPresent": 0,
        "written": None,
        "tornLine": False,
    }
    if out.materialize:
        result["materialized"] = True
    if not out.writes:
        return result, 0
    target = out.output
    stream = is_stream(path)
    if target is not None and target != STDIN and not stream and same_file(path, target):
        raise UsageError(
            "-o names the input itself; write to another file (compactctl never rewrites a "
            "transcript), or omit -o to append to a canonical transcript in place",
            path=path,
        )
    if out.materialize or target is not None or stream:
        dest = target or STDIN
        if out.materialize:
            view = replay(session.events + new, tier=out.tier)
            transcript = None if stream else path
            # what lands: the summary framed for the agent (its analysis block left out)
            result["tokensWritten"] = prompt_tokens(framed(view, transcript), session.counter)
            lines = materialized_lines(
                view, out.as_format, transcript, session=session.session_event
            )
        else:
            lines = dump_events(written_events(session) + new)
            result["appended"] = len(new)
        with provenance.writing(path, dest, out.output_dir, out.lock_timeout):
            if out.output_dir is not None:  # checked again: it may have grown while planning
                provenance.refuse_changed(path, dest, out.output_dir)
            size = write_unless_same(dest, lines)
            if size is None:  # the target holds these bytes already: not rewritten
                result.update(written=None, appended=0, changed=False, upToDate=True, output=dest)
            else:
                result["written"] = dest
            if out.fingerprint is not None and out.output_dir is not None:
                provenance.record(
                    path, dest, out.output_dir, out.fingerprint, session.identity, result
                )
        return result, size or 0
    if not new:
        return result, 0
    done = session.append(new, lock_timeout=out.lock_timeout, torn_wait=out.torn_wait)
    result.update(appended=done.written, alreadyPresent=done.skipped, tornLine=done.torn_line)
    result["changed"] = done.written > 0
    if done.written:
        result["written"] = path
    else:
        _nothing_landed(result)
    return result, done.bytes_written


def _nothing_landed(result: dict[str, Any]) -> None:
    """Make ``result`` (a job's result, changed in place) say what a run whose append wrote
    no event landed: nothing. Every planned event was in the file already (``alreadyPresent``),
    appended by another run between this run's read and its append (two runs at once on one
    file, or a file and a symlink to it in one folder run): that run saved the tokens, not
    this one, so ``written`` stays ``None``, ``tokensBefore`` becomes ``tokensAfter`` (the
    file's effective context now holds those events: the plan's after), ``tokensSaved`` and
    ``charsBefore`` likewise (0 saved, ``charsSavedRatio`` 0, per ``byLayer`` row too),
    and ``reason`` says why.
    The run's totals then count one file's saving once (review of unattended use, defect 7).
    """
    from compactctl.app.report import nothing_landed

    nothing_landed(result, stays="after")
    n = result["alreadyPresent"]
    result["reason"] = (
        f"another run appended the {n} planned event{'s' if n != 1 else ''} first "
        "(nothing written by this run)"
    )


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


def run_record(
    result: Mapping[str, Any],
    command: str,
    *,
    rules: list[str] | None = None,
    success: int | None = None,
    tiers: Any = None,
) -> RunRecord:
    """What a run that changes a transcript writes to the store: its history row, and the
    compaction state (``success``: the index of the last message a summary covered) or the
    tiers (``tiers``: the :class:`~compactctl.layers.tiers.TiersLayer` report) when given.

    ``result`` is the job's result (or its planned report plus ``path``).
    """
    from compactctl.app.store import (
        HistoryRow,
        RunRecord,
        SuccessRow,
        TiersRow,
        absolute,
        store_key,
    )

    now = time.time()
    path = absolute(str(result["path"]))
    key = store_key(str(result.get("sessionKey") or path), path)
    summary = result.get("summary")
    history = HistoryRow(
        session_key=key,
        path=path,
        command=command,
        messages_removed=int(summary.get("replaces", 0)) if isinstance(summary, dict) else 0,
        dedup_groups=int(result.get("groups", 0) or 0),
        rules_applied=list(rules or []),
        tokens_before=int(result.get("tokensBefore", 0) or 0),
        tokens_after=int(result.get("tokensAfter", 0) or 0),
        duration_ms=int(result.get("durationMs", 0) or 0),
        outcome="applied",
        error=None,
        created_at=now,
    )
    done = None
    if success is not None:
        done = SuccessRow(session_key=key, path=path, last_message_index=success, at=now)
    tier_row = None
    if tiers is not None:
        tier_row = TiersRow(
            session_key=store_key(tiers.session_key, path),
            path=path,
            summary_uuid=tiers.summary,
            tiers=dict(tiers.tier_texts),
            messages_before=tiers.messages,
            messages_summarized=int(tiers.replaces or 0),
            tokens_before=int(tiers.tokens_before or 0),
            tokens_after=int(tiers.tokens_after or 0),
            at=now,
        )
    return RunRecord(history=history, success=done, tiers=tier_row)


def record_run(
    store: Any, result: Mapping[str, Any], command: str, *, rules: list[str] | None = None
) -> None:
    """Write the history row of a run that changed a transcript (every command that changes
    a transcript writes one; nothing for a run that changed nothing)."""
    if store is None or not result.get("changed"):
        return
    store.record(run_record(result, command, rules=rules))


def reconcile_store(store: Any, session: Session, out: OutputOptions) -> int:
    """Complete, from the transcript, the runs whose append landed but whose store write
    failed (:meth:`~compactctl.app.store.Store.reconcile`); a warning says how many.

    Only for a job that appends to ``session`` in place with a store. Returns the count.

    Raises:
        WriteError, LockTimeout: the store could not be written.
    """
    if store is None or not out.writes or not out.in_place(session.path):
        return 0
    present = {e.uuid for e in session.events if e.uuid is not None}
    from compactctl.app.store import store_key

    n = int(store.reconcile(store_key(session.meta.key, session.path), present, time.time()))
    if n:
        warnings.warn(
            CompactWarning(
                f"{session.path}: {n} earlier run{'s' if n != 1 else ''} appended to the "
                "transcript but not recorded in the store (its write had failed); recorded now"
            ),
            stacklevel=2,
        )
    return n


def write_recorded(
    session: Session,
    new: list[Event],
    report: Mapping[str, Any],
    out: OutputOptions,
    store: Any,
    record: Callable[[Mapping[str, Any]], RunRecord | None],
) -> dict[str, Any]:
    """:func:`write_plan`, then the store: ``record(result)`` is what a run that changed the
    transcript writes there (``None``: nothing).

    An append in place is recorded as a pending run before it and completed after it, so
    the store can be reconciled from the transcript if the write after the append fails
    (module docstring). Any other write (``-o``, stdout) is recorded after it.

    Raises:
        StoreNotUpdated: the output was written but the store was not ("appended N bytes to
            FILE; store not updated: REASON"; exit 75 if the database stayed locked, else 3).
        WriteError, LockTimeout, FileChanged, UsageError: as :func:`write_plan`; a store
            that cannot record the pending run fails before anything is written.
    """
    planned = record({**report, "path": session.path, "changed": True}) if new else None
    if store is None or planned is None or not out.writes:
        return write_plan(session, new, report, out)
    if not out.in_place(session.path):
        result, size = _write(session, new, report, out)
        if result["changed"]:
            _store_write(lambda: store.record(planned), result, size)
        return result
    uuids = [e.uuid for e in new if e.uuid is not None]
    pending = store.begin_run(planned, uuids, time.time())
    try:
        result, size = _write(session, new, report, out)
    except BaseException:
        with contextlib.suppress(Exception):
            store.cancel_run(pending)
        raise
    if result["changed"]:
        _store_write(lambda: store.finish_run(pending), result, size)
    else:
        with contextlib.suppress(Exception):  # a stale pending run is dropped later
            store.cancel_run(pending)
    return result


def _store_write(write: Callable[[], Any], result: Mapping[str, Any], size: int) -> None:
    """Run a store write after the transcript (or output) was written.

    Raises:
        StoreNotUpdated: the write failed, whatever the error.
    """
    try:
        write()
    except Exception as exc:
        reason = exc.message if isinstance(exc, CompactError) else f"{type(exc).__name__}: {exc}"
        where = result["written"]
        verb = "appended" if where == result["path"] else "wrote"
        dest = "stdout" if where == STDIN else where
        raise StoreNotUpdated(
            f"{verb} {size} bytes to {dest}; store not updated: {reason}. The next run "
            "records it from the transcript"
            if verb == "appended"
            else f"{verb} {size} bytes to {dest}; store not updated: {reason}",
            exit_code=LockTimeout.exit_code if isinstance(exc, LockTimeout) else 3,
        ) from None


def replanned(path: str, attempt: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """``attempt()`` (open, plan, write), once more if the transcript changed between its
    read and its append (:class:`~compactctl.errors.FileChanged` with ``replan``): the new
    content is read and planned again. A second change is the error (exit 75, nothing
    written by either attempt).

    The cyclic garbage collector is paused meanwhile (:func:`~compactctl.model.acyclic`):
    a job holds one session's events (no reference cycle) while it reads, plans and writes,
    so each collection of the oldest generation walked them all again for nothing (two or
    three of them, 0.1-0.17 s of main-thread CPU in ``compact --force --layers all`` on
    the 32 MB Claude Code bench session, which leaves a few hundred objects in cycles).
    Every job that changes transcripts runs here, the one pass included.
    """
    with acyclic():
        return _replanned(path, attempt)


def _replanned(path: str, attempt: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    try:
        return attempt()
    except FileChanged as exc:
        if not exc.replan:
            raise
        first = exc.message
    try:
        return attempt()
    except FileChanged as exc:
        exc.message = (
            f"{exc.message}, and it had changed before as well ({first}); nothing was "
            "written. Retry when it holds still"
        )
        raise


# --- the jobs -------------------------------------------------------------------------------


def _compact_layer(options: Any, out: OutputOptions, store: Any, path: str) -> Any:
    """The :class:`~compactctl.layers.summary.CompactLayer` of a job: the store's 24-hour
    breaker, and on a dry run (``--dry-run``, ``--check``) the extractive summarizer in
    place of a model, which is never called (nor paid) then."""
    from compactctl.layers.summary import CompactLayer

    def breaker(key: str) -> bool:
        from compactctl.app.store import store_key

        return bool(store is not None and store.breaker_open(store_key(key, path), time.time()))

    offline = None
    if not out.writes and options.model not in (None, "extractive"):
        # the report shows what would be replaced and about what it saves
        from compactctl.summarize.extractive import ExtractiveSummarizer

        offline = ExtractiveSummarizer()
    return CompactLayer(summarizer=offline, breaker_open=breaker)


def _compact_session(path: str, options: Any, out: OutputOptions) -> tuple[Session, str | None]:
    """The session a compaction job plans on, and the agent format of ``--as native``
    (``None``: written as ``out`` says).

    Raises:
        UsageError: ``--as native`` on standard input. InputError: as :func:`open_session`.
    """
    native = out.as_format in AS_NATIVE
    if native and is_stream(path):
        raise UsageError(
            f"--as {out.as_format} writes a new session beside the original, and "
            "standard input has no place: give the session file",
            path=path,
        )
    session = (
        Session.open(path, out.fmt, encoding=options.encoding,
                     context_window=options.context_window)
        if native
        else open_session(
            path, out, encoding=options.encoding, context_window=options.context_window
        )
    )  # fmt: skip
    return session, native_format(out.as_format, session.format, path) if native else None


def _raise_failed(layer: Any, store: Any, key: str, path: str) -> None:
    """Raise the summarizer's error of ``layer`` (a CompactLayer), if any, counted toward the
    24-hour breaker in the store.

    Raises:
        SummarizerError: summarization failed; nothing is written.
    """
    if layer.failed is None:
        return
    if store is not None:
        from compactctl.app.store import absolute, store_key

        count = store.record_failure(store_key(key, path), absolute(path), time.time())
        layer.failed.message += f" (consecutive failures: {count})"
    raise layer.failed


def compact_path(path: str, options: Any, out: OutputOptions) -> dict[str, Any]:
    """``compact`` on one transcript: plan (micro, summary), write, record in the store.

    Args:
        path: a transcript or ``-``.
        options: :class:`compactctl.layers.summary.CompactOptions`.
        out: where to write.

    Raises:
        SummarizerError: summarization failed (counted toward the 24-hour breaker); nothing
            was written.
        UsageError, InputError, WriteError, LockTimeout, FileChanged, StoreNotUpdated: as
            :func:`open_session` and :func:`write_recorded`.
    """
    out, hit = fresh("compact", options, path, out)
    if hit is not None:
        return hit
    with _store(out) as store:

        def attempt() -> dict[str, Any]:
            session, resumable = _compact_session(path, options, out)
            reconcile_store(store, session, out)
            layer = _compact_layer(options, out, store, path)
            plan = plan_live(lambda s: layer.plan(s, options), session)
            if layer.summarizer is not None:
                plan.report.model_not_called = options.model
            _raise_failed(layer, store, plan.report.session_key, path)

            def record(result: Mapping[str, Any]) -> RunRecord:
                messages = result["messages"] if result.get("summary") else None
                return run_record(result, "compact", success=messages)

            report = plan.report.to_json()
            if resumable is not None:
                return write_resumable(session, resumable, plan.events, report, out, store)
            return write_recorded(session, plan.events, report, out, store, record)

        return replanned(path, attempt)


def layers_path(path: str, options: Any, out: OutputOptions) -> dict[str, Any]:
    """``compact --layers``: the layers named, in one pass over one session
    (:func:`compactctl.layers.onepass.plan_onepass`: one parse, one token count), their
    events appended as one batch and recorded in the store as one run.

    Args:
        path: a transcript or ``-``.
        options: :class:`compactctl.layers.onepass.OnePassOptions`.
        out: where to write (``--as native`` too).

    Returns:
        ``{"sessionKey", "messages", "layers", "tokensBefore", "tokensAfter", "tokensSaved",
        "tokenizer", "contextWindow", "byLayer": [row, ...],
        "durationMs"}`` (each row :meth:`~compactctl.layers.onepass.LayerRow.to_json`), plus
        what :func:`write_plan` adds.

    Raises:
        SummarizerError: summarization failed (counted toward the 24-hour breaker); nothing
            was written, the layers before it included.
        UsageError, InputError, WriteError, LockTimeout, FileChanged, StoreNotUpdated: as
            :func:`compact_path`.
    """
    from compactctl.layers.onepass import plan_onepass
    from compactctl.tokens import warm_counting

    out, hit = fresh("compact --layers", options, path, out)
    if hit is not None:
        return hit
    with _store(out) as store:

        def attempt() -> dict[str, Any]:
            # a large file's texts are counted by a child process while it is read
            with warm_counting(path, options.compact.encoding):
                session, resumable = _compact_session(path, options.compact, out)
                reconcile_store(store, session, out)
                layer = _compact_layer(options.compact, out, store, path)
                plan = plan_onepass(session, options, compact_layer=layer)
            _raise_failed(layer, store, session.meta.key, path)
            compacted = plan.reports.get("summary") or plan.reports.get("micro")
            rows = [row.to_json() for row in plan.rows]
            if compacted is not None and layer.summarizer is not None:
                for row in rows:  # the compact layer's report: a dry run called no model
                    if row["layer"] in {"micro", "summary"}:
                        row["report"]["modelNotCalled"] = options.compact.model
            report = {
                "sessionKey": session.meta.key,
                "messages": session.messages,
                "layers": list(options.layers),
                "tokensBefore": plan.tokens_before,
                "tokensAfter": plan.tokens_after,
                "tokensSaved": plan.tokens_before - plan.tokens_after,
                "tokenizer": session.counter.encoding_name,
                "contextWindow": session.meta.context_window,
                "byLayer": rows,
                "durationMs": plan.duration_ms,
            }

            def record(result: Mapping[str, Any]) -> RunRecord:
                rules = plan.reports.get("rules")
                dedup = plan.reports.get("dedup")
                summary = compacted.to_json().get("summary") if compacted else None
                tiers = plan.reports.get("tiers")
                return run_record(
                    {
                        **result,
                        "groups": dedup.groups if dedup else 0,  # type: ignore[attr-defined]
                        "summary": summary,
                    },
                    "compact",
                    rules=sorted(rules.rules) if rules and rules.targets_count else None,  # type: ignore[attr-defined]
                    success=session.messages if summary else None,
                    tiers=tiers if tiers is not None and tiers.tier_texts else None,  # type: ignore[attr-defined]
                )

            if resumable is not None:
                return write_resumable(session, resumable, plan.events, report, out, store)
            return write_recorded(session, plan.events, report, out, store, record)

        return replanned(path, attempt)


def write_resumable(
    session: Session,
    fmt: str,
    new: list[Event],
    report: Mapping[str, Any],
    out: OutputOptions,
    store: Any,
) -> dict[str, Any]:
    """``compact --as native``: the effective context after the planned events, written as
    a new session in the agent's own format beside the original (:mod:`compactctl.io.native`);
    the original is never written, nor are the planned events appended to it.

    Returns:
        ``report`` plus ``path``, ``format``, ``changed`` (a new session file was written),
        ``written`` (its path, ``None`` when nothing was written), ``appended`` (its records),
        ``skipped``, ``tornLine`` and ``resume`` (``{"sessionId", "path", "command", "cwd",
        "format"}``, ``None`` when the plan changes nothing: no new session then).

    Raises:
        WriteError: the new session cannot be written (or another file has its name).
        InputError: the original lacks the fields the agent needs (its session id).
    """
    from compactctl.io.native import native_session, write_native

    result: dict[str, Any] = {
        **report,
        "path": session.path,
        "format": session.format,
        "changed": False,
        "appended": 0,
        "alreadyPresent": 0,
        "written": None,
        "tornLine": False,
        "resume": None,
    }
    if not new:
        return result
    view = replay(session.events + new)
    native = native_session(
        session.path, fmt, view, model=session.meta.model, pre_tokens=report.get("tokensBefore")
    )
    result["resume"] = native.resume()
    result["nativeMessages"] = native.messages
    result["nativeDropped"] = native.dropped
    if not out.writes:
        result["changed"] = not os.path.exists(native.path)  # --check: 1 if it would write
        return result
    wrote = write_native(native)
    result.update(written=native.path, changed=wrote, appended=len(native.lines) if wrote else 0)
    if wrote and store is not None:
        planned = run_record(result, "compact")
        _store_write(lambda: store.record(planned), result, sum(map(len, native.lines)))
    return result


def layer_path(
    command: str, path: str, options: Any, out: OutputOptions, encoding: str | None = None
) -> dict[str, Any]:
    """``rules``, ``dedup`` or ``undo`` (``command``) on one transcript: the layer's report
    plus the session key, the tokenizer and the planning time in milliseconds (``durationMs``).

    Args:
        command: ``rules``, ``dedup`` or ``undo``.
        options: :class:`~compactctl.layers.options.RulesOptions`, ``DedupOptions`` or
            ``UndoOptions``.
        encoding: the ``--encoding`` override (``estimate``: chars-based counts).

    Raises:
        UsageError, InputError, WriteError, LockTimeout, FileChanged, StoreNotUpdated: as
            :func:`open_session` and :func:`write_recorded`.
    """
    if command == "rules":
        from compactctl.layers.rules import RulesLayer as Layer
    elif command == "undo":  # plans over the whole log: it reads the reverts
        from compactctl.layers.undo import UndoLayer as Layer  # type: ignore[assignment]
    else:
        from compactctl.layers.dedup import DedupLayer as Layer  # type: ignore[assignment]
    out, hit = fresh(command, (options, encoding), path, out)
    if hit is not None:
        return hit
    with _store(out) as store:

        def attempt() -> dict[str, Any]:
            session = open_session(path, out, encoding=encoding)
            reconcile_store(store, session, out)
            started = time.monotonic()
            layer = Layer()
            planned = (
                layer.plan(session, options)
                if command == "undo"
                else plan_live(lambda s: layer.plan(s, options), session)
            )
            report = planned.report.to_json()
            report["sessionKey"] = session.meta.key
            report["tokenizer"] = session.counter.encoding_name
            report["durationMs"] = int((time.monotonic() - started) * 1000)

            def record(result: Mapping[str, Any]) -> RunRecord:
                rules = sorted(result.get("rules", {})) if command == "rules" else None
                return run_record(result, command, rules=rules)

            return write_recorded(session, planned.events, report, out, store, record)

        return replanned(path, attempt)


def rules_path(path: str, options: Any, out: OutputOptions, encoding: str | None = None) -> Any:
    """``rules`` on one transcript: :func:`layer_path` with ``RulesOptions``."""
    return layer_path("rules", path, options, out, encoding)


def dedup_path(path: str, options: Any, out: OutputOptions, encoding: str | None = None) -> Any:
    """``dedup`` on one transcript: :func:`layer_path` with ``DedupOptions``."""
    return layer_path("dedup", path, options, out, encoding)


def undo_path(path: str, options: Any, out: OutputOptions, encoding: str | None = None) -> Any:
    """``undo`` on one transcript: :func:`layer_path` with ``UndoOptions`` (a RevertEvent,
    :mod:`compactctl.layers.undo`)."""
    return layer_path("undo", path, options, out, encoding)


def tiers_path(
    path: str,
    out: OutputOptions,
    *,
    tier: str = "auto",
    encoding: str | None = None,
    context_window: int | None = None,
    model: str | None = None,
    redact: bool = True,
) -> dict[str, Any]:
    """``tiers`` on one transcript: a superseding SummaryEvent with L0/L1/L2, stored in SQLite.

    Raises:
        SummaryFormatError: a model rewrite was invalid (nothing appended).
        UsageError, InputError, WriteError, LockTimeout, FileChanged, StoreNotUpdated: as
            :func:`write_recorded`.
    """
    from compactctl.layers.tiers import TiersLayer, TiersOptions

    out, hit = fresh("tiers", (tier, encoding, context_window, model, redact), path, out)
    if hit is not None:
        return hit
    with _store(out) as store:

        def attempt() -> dict[str, Any]:
            session = open_session(path, out, encoding=encoding, context_window=context_window)
            reconcile_store(store, session, out)
            opts = TiersOptions(tier=tier, model=model, redact=redact)
            plan = plan_live(lambda s: TiersLayer().plan(s, opts), session)
            report = plan.report

            def record(result: Mapping[str, Any]) -> RunRecord:
                return run_record(result, "tiers", tiers=report if report.tier_texts else None)

            return write_recorded(session, plan.events, report.to_json(), out, store, record)

        return replanned(path, attempt)
