"""Running a command over many files: discovery, the process pool, one ``try`` per file.

:func:`run_files` runs a per-file job (:mod:`compactctl.app.jobs`, ``inspect_path``) on every
transcript PATHS name, in a process pool with ``--jobs``, and yields each result in input
order; a file that fails is recorded on the :class:`~compactctl.app.report.Report` and the
run goes on (docs/style.md habit 6). :func:`run_transform` and :func:`run_inspect` are the
whole run of a command: each file's report (a line, a table, or its JSON entry) as it
finishes, then the report. :func:`warm_while_waiting` imports what a pipe stage needs while
its input is still on the way.

Messages about the run (a missing path, a failed file) go to stderr; results go to the
caller.
"""

from __future__ import annotations

import contextlib
import os
import stat
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from compactctl.app.config import Settings
from compactctl.app.report import (
    JsonReport,
    Report,
    capturing,
    message,
    report_line,
    up_to_date_line,
)
from compactctl.app.terminal import progress, say, show
from compactctl.errors import CompactError, NotAppendable, NotATranscript, UsageError
from compactctl.io.files import STDIN, Found, Walk, walk
from compactctl.io.filters import FileFilter
from compactctl.io.remote import is_url

if TYPE_CHECKING:
    from compactctl.app.jobs import OutputOptions

__all__ = [
    "RunScope",
    "TRIM_MIN_BYTES",
    "discover_files",
    "run_effective",
    "run_files",
    "run_inspect",
    "run_transform",
    "skip_reason",
    "warm_while_waiting",
]

Worker = Callable[[str], dict[str, Any]]
"""A per-file job: a path (or ``-``) to its JSON-ready result; raises ``CompactError``."""


def _err(message: str) -> None:
    say(message)  # above the progress bar, when one is shown


@dataclass(frozen=True)
class RunScope:
    """Which files a run takes and how it runs them: the parameters every command over
    PATHS shares (issue 13: one value passed through instead of one argument each).

    Attributes:
        jobs: ``--jobs`` (``None``: the ``jobs`` setting, else the number of cores).
        dask: ``--dask ADDRESS`` (``None``: the ``dask`` setting, else the local pool).
        documents: ``--documents`` (``None``: the ``documents`` setting, else off).
        quiet: ``-q``: only errors on stderr.
        verbose: ``-v``: more detail (inspect, eval).
        json_out: ``--json``: the report as one JSON document.
        filters: ``--since``, ``--until``, ``--older-than``, ``--glob``, ``--exclude``
            (:class:`~compactctl.io.filters.FileFilter`).
        skip: folders never searched for inputs (a ``-o DIR/`` inside the input tree).
        keep_rows: keep a slim row per file (``--report PATH``: the page is written from
            them after the run).
        found: PATHS as walked already for this run, with these filters, ``skip`` and
            ``documents`` (:func:`compactctl.app.options.walk_inputs`, made for a one-input
            check): the run takes its files instead of walking again; ``None``: the run
            walks PATHS.
    """

    jobs: int | None = None
    dask: str | None = None
    documents: bool | None = None
    quiet: bool = False
    verbose: bool = False
    json_out: bool = False
    filters: FileFilter = field(default_factory=FileFilter)
    skip: tuple[str, ...] = ()
    keep_rows: bool = False
    found: Walk | None = None


def discover_files(
    paths: list[str], report: Report, documents: bool = False, scope: RunScope | None = None
) -> list[Found]:
    """Expand PATHS (:func:`compactctl.io.files.walk`); a missing path is a failure on the
    report, an empty folder (or one the filters empty) a warning, so is a ``-o DIR/`` met
    inside a folder of PATHS (never searched) that holds transcripts with no record of
    being its outputs (:func:`compactctl.app.provenance.sidecar`), a file the walk left
    alone (a second path to one file, a link out of a folder) a skip with its reason, a
    file named on the command line that the filters left out a warning naming the filter
    (unless ``-q``; counted in ``totals.leftOut`` as a folder's are). ``documents``
    (``--documents``): folders also yield the JSON documents and Aider histories a reader
    recognises; ``scope``: its filters and the folders to skip, or the walk it holds
    (:attr:`RunScope.found`).

    Raises:
        UsageError: a time filter with a URL among PATHS.
    """
    from compactctl.io.files import NoTranscripts

    scope = scope or RunScope()
    found = scope.found
    if found is None:
        found = walk(paths, documents=documents, filters=scope.filters, skip=scope.skip)
    for e in found.errors:
        if isinstance(e, NoTranscripts):
            message(f"compactctl: warning: {e}")
        else:
            _failed(report, e.path or "?", e)
    for folder, held in found.unsearched:  # a -o DIR/ inside a folder of PATHS
        from compactctl.app.provenance import sidecar

        named = {os.path.realpath(f.path) for f in found.files if f.root is None}
        others = [  # neither outputs nor named in PATHS
            f
            for f in held
            if not os.path.isfile(sidecar(f, folder)) and os.path.realpath(f) not in named
        ]
        if others:
            which = others[0] if len(others) == 1 else f"{others[0]} and {len(others) - 1} more"
            message(
                f"compactctl: warning: {folder}: not searched for inputs, being the -o folder "
                f"(a run never reads its outputs back): {len(others)} transcript"
                f"{'s' if len(others) > 1 else ''} there that compactctl did not write "
                f"({which}) left out; to process {'them' if len(others) > 1 else 'it'}, name "
                f"{'them' if len(others) > 1 else 'it'} in PATHS or write to an -o folder "
                "outside the input tree"
            )
    for path, reason in found.skipped:  # a second path to one file, a link out of a folder
        report.skipped(path, reason)
        if not scope.quiet and (report.doc is None or not report.doc.to_stderr):
            _err(f"{path}: skipped: {reason}")
    report.left_out += found.left_out
    for path, why in found.named_left_out:  # asked for by name: never left out in silence
        if not scope.quiet:
            message(f"compactctl: warning: {path}: left out by the filters ({why}); nothing "
                    "was done with it")  # fmt: skip
    return found.files


def _failed(report: Report, path: str, error: CompactError) -> None:
    """Record a failed file; say so on stderr unless the ``--json`` document is there (the
    failure is its entry then, never loose text in the same stream)."""
    report.failed(path, error)
    if report.doc is None or not report.doc.to_stderr:
        _err(f"compactctl: {error}")


def _jobs(settings: Settings, flag: int | None, nfiles: int) -> int:
    """Processes to use: ``--jobs`` (or ``jobs``; default the number of cores), at most one
    per file.

    Raises:
        UsageError: fewer than 1.
    """
    jobs = settings.get("jobs", flag, os.cpu_count() or 1, int)
    if jobs < 1:
        raise UsageError("--jobs must be at least 1")
    return min(jobs, max(nfiles, 1))


def run_files(
    paths: list[str],
    worker: Worker,
    *,
    scope: RunScope,
    settings: Settings,
    report: Report,
    desc: str,
    trim: bool = True,
    command: str | None = None,
) -> Iterator[dict[str, Any]]:
    """Run ``worker`` on every file; yield each result; record failures on the report.

    Each file runs in its own ``try`` (docs/style.md habit 6). With more than one file and
    ``jobs > 1``, files run in a process pool, a window of ``max(64, 4 * jobs)`` files at a
    time (the next window is queued while this one is collected), largest file first within
    a window; results come back in input order. The window is wide so that one large file
    does not leave the other workers idle, and fixed so that the parent's memory does not
    grow with the number of files (at most two windows of results are held). With ``dask``
    (``--dask ADDRESS``, or the ``dask`` setting), the same per-file jobs run on a Dask
    cluster instead (:func:`compactctl.app.cluster.cluster_outcomes`; ``-`` still runs
    here). ``trim``: give
    the heap back after each session of at least :data:`TRIM_MIN_BYTES` (for workers that
    hold a session's events; ``inspect`` does not). A progress bar goes to stderr when it is
    a terminal and there are several files (``desc`` names it).

    A file met in a folder that cannot be changed in place (another agent's format, gzip:
    :class:`~compactctl.errors.NotAppendable`) is skipped, not failed (issue 19: a nightly
    run over a mixed folder exits 0): :meth:`Report.skipped`, a notice on stderr naming it
    and how to process it (``command``'s options), and the entry ``{"path", "outcome":
    "skipped", "reason"}`` is yielded for the ``--json`` document. Named on the command
    line, it stays a failure (exit 3).

    Raises:
        UsageError: ``--jobs`` (or the ``jobs`` setting) is below 1; raised after PATHS are
            expanded, before any file is processed.
    """
    documents = settings.get("documents", scope.documents, False, bool)
    found = discover_files(paths, report, documents, scope)
    files = [f.path for f in found]
    walked = {f.path: f.root for f in found if f.root is not None}
    n = _jobs(settings, scope.jobs, len(files))
    address = settings.get("dask", scope.dask, None, str) or None
    bar = progress(len(files), scope.quiet, desc)
    debug = bool(os.environ.get("COMPACTCTL_DEBUG"))

    def outcomes() -> Iterator[tuple[str, dict[str, Any] | CompactError]]:
        if address is not None and STDIN not in files:
            import functools

            from compactctl.app.cluster import cluster_outcomes

            task = functools.partial(_guarded, worker, debug=debug, trim=trim)
            yield from cluster_outcomes(files, task, address)
        elif n > 1 and STDIN not in files:
            from concurrent.futures import Future

            from compactctl.app.pool import worker_pool

            window = max(64, 4 * n)
            with worker_pool(n) as pool:

                def submit(chunk: list[str]) -> list[tuple[str, Future[Any]]]:
                    # largest first within the window, so that a large file late in it does
                    # not leave the other workers idle at the end (LPT scheduling)
                    order = sorted(range(len(chunk)), key=lambda i: -_size(chunk[i]))
                    futures: dict[int, Future[Any]] = {}
                    for i in order:
                        futures[i] = pool.submit(_guarded, worker, chunk[i], debug, trim)
                    return [(f, futures[i]) for i, f in enumerate(chunk)]

                chunks = (files[i : i + window] for i in range(0, len(files), window))
                current = submit(next(chunks))
                for chunk in chunks:
                    ahead = submit(chunk)  # queued before this window is collected: no idle
                    for f, fut in current:
                        yield f, fut.result()
                    current = ahead
                for f, fut in current:
                    yield f, fut.result()
        else:
            for f in files:
                yield f, _guarded(worker, f, debug, trim and len(files) > 1)

    from compactctl.app.pool import stop_on_sigterm

    with stop_on_sigterm():
        yield from _reported(outcomes(), report, scope, bar, walked, command)


def _reported(
    outcomes: Iterator[tuple[str, dict[str, Any] | CompactError]],
    report: Report,
    scope: RunScope,
    bar: Any,
    walked: dict[str, str],
    command: str | None,
) -> Iterator[dict[str, Any]]:
    """:func:`run_files`' outcomes as it yields them: a skipped or failed file recorded on
    the report (and said on stderr), a result yielded. ``walked``: the files found in a
    folder, and that folder; a file among them that is not a transcript
    (:class:`~compactctl.errors.NotATranscript`) fails with how to leave it out
    (:func:`exclude_hint`)."""
    for path, outcome in outcomes:
        if bar is not None:
            bar.update(1)
        if isinstance(outcome, NotAppendable) and path in walked:
            # recorded on the report (its --json entry and run-log row), said on stderr
            reason = skip_reason(outcome, command)
            report.skipped(path, reason)
            if not scope.quiet and (report.doc is None or not report.doc.to_stderr):
                _err(f"{path}: skipped: {reason}")
        elif isinstance(outcome, CompactError):
            if isinstance(outcome, NotATranscript) and path in walked:
                outcome.message += exclude_hint(path, walked[path])
            _failed(report, path, outcome)
        else:
            yield outcome
    if bar is not None:
        bar.close()


def exclude_hint(path: str, root: str) -> str:
    """What to add to the refusal of a file found in the folder ``root`` that is not a
    transcript: how to leave it out of the folder run, with the file as the example
    (``--exclude``, a pattern relative to ``root``, anchored with ``/``). Its exit code
    stays 3: a file no reader takes may be a transcript compactctl misreads, and a nightly
    run must not skip it in silence (a fresh-user trial: one stray ``.jsonl`` failed every
    night with only ``--format`` offered).

    >>> exclude_hint("tree/notes/todo.jsonl", "tree")
    '. Found in the folder tree: if it is not a transcript, leave it out with --exclude /notes/todo.jsonl'
    """  # noqa: E501
    import shlex

    rel = "/" + os.path.relpath(path, root).replace(os.sep, "/")
    return (
        f". Found in the folder {root}: if it is not a transcript, leave it out with "
        f"--exclude {shlex.quote(rel)}"
    )


def skip_reason(error: NotAppendable, command: str | None) -> str:
    """Why a file met in a folder was skipped, and how to process it.

    >>> from compactctl.errors import NotAppendable
    >>> print(skip_reason(NotAppendable("", kind="codex-rollout"), "compact"))
    a codex-rollout transcript, never appended to; to process it: -o DIR/ (canonical JSONL) or --as native (a new codex-rollout session)
    """  # noqa: E501
    from compactctl.io.native import RESUMABLE

    kind = error.kind
    what = f"{'gzip-compressed' if kind == 'gzip' else kind} transcript"
    how = "-o DIR/ (canonical JSONL)"
    if command == "compact" and kind in RESUMABLE:
        how += f" or --as native (a new {kind} session)"
    return f"{'an' if what[:1] in 'aeio' else 'a'} {what}, never appended to; to process it: {how}"


def _guarded(
    worker: Worker, path: str, debug: bool, trim: bool = False
) -> dict[str, Any] | CompactError:
    """``worker(path)``, or the error it raised (an unexpected one as an InputError, unless
    ``debug``); a closed stdout stops the whole run.

    The warnings (:class:`~compactctl.errors.CompactWarning`) raised while the file is
    processed are its result's ``warnings`` (``list[str]``, in the order said; the key only
    when there is one), in this process, a ``--jobs`` worker or a Dask one: a ``--json``
    reader learns per file what stderr says once per run and process (the assumed context
    window, lines skipped, an empty stdin). They are still shown as before
    (:func:`compactctl.cli_shell.show_warning`)."""
    said: list[str] = []
    try:
        with _file_warnings(said):
            result = worker(path)
        if said:
            result["warnings"] = said
        return result
    except CompactError as exc:
        if exc.path is None:
            exc.path = path
        return exc
    except BrokenPipeError:
        raise  # the reader went away: stop the whole run (main exits 141)
    except Exception as exc:  # one bad file never stops the others
        if debug:
            raise
        from compactctl.errors import InputError

        return InputError(
            f"unexpected {type(exc).__name__}: {exc} (set COMPACTCTL_DEBUG=1 for a traceback)",
            path=path,
        )
    finally:
        if trim and _size(path) >= TRIM_MIN_BYTES:
            _release_memory()


@contextlib.contextmanager
def _file_warnings(said: list[str]) -> Iterator[None]:
    """While the block runs, add the text of each :class:`~compactctl.errors.CompactWarning`
    shown to ``said``, then show it as the ``warnings.showwarning`` in place does."""
    import warnings

    from compactctl.errors import CompactWarning

    shown = warnings.showwarning

    def show(
        message: Warning | str,
        category: type[Warning],
        filename: str,
        lineno: int,
        file: Any = None,
        line: str | None = None,
    ) -> None:
        if issubclass(category, CompactWarning) and str(message) not in said:
            said.append(str(message))
        shown(message, category, filename, lineno, file, line)

    warnings.showwarning = show
    try:
        yield
    finally:
        warnings.showwarning = shown


TRIM_MIN_BYTES = 4 * 2**20
"""Sessions of at least this many bytes (4 MiB) give their heap back after they are done.

After a small session the freed heap is small too, and trimming it only makes the next
session fault its pages in again: measured on the 200 MB bench corpus (109 sessions, 19 of
them 4 MiB or more), ``inspect --estimate --jobs 1`` took 0.27-0.40 s of system time with a
trim after every file, 0.33 s with one after the 19, and 0.07-0.11 s with none (peak RSS
48 and 50 MB), which is why ``inspect``, holding no events, does not trim at all."""


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def _release_memory() -> None:
    """Give the freed heap of the last session back to the OS (glibc ``malloc_trim``).

    Between sessions of a many-file run the heap a large session freed stays mapped, and
    the next session's objects land around what is still in use: measured on two bench
    sessions (10 and 11 MB), peak RSS 67 MB without this call and 58 MB with it, the same
    as the larger session alone. A no-op where glibc is not the C library.
    """
    global _MALLOC_TRIM
    if _MALLOC_TRIM is None:
        try:
            import ctypes

            _MALLOC_TRIM = ctypes.CDLL("libc.so.6").malloc_trim
        except (OSError, AttributeError):
            _MALLOC_TRIM = False
    if _MALLOC_TRIM:
        _MALLOC_TRIM(0)


_MALLOC_TRIM: Any = None


def run_transform(
    paths: list[str],
    worker: Worker,
    *,
    command: str,
    settings: Settings,
    out: OutputOptions,
    scope: RunScope,
    line: Callable[[dict[str, Any]], str] | None = None,
    warm: Sequence[str] = (),
    warm_encoding: str | None = None,
) -> Report:
    """Run a transcript-changing command over PATHS and report each file as it finishes.

    Each file's line (:func:`~compactctl.app.report.report_line` of ``command``, or
    ``line``) goes to stderr unless ``scope.quiet``; with ``scope.json_out`` its entry of the
    JSON document goes to stdout, or to stderr when ``out`` writes the transcript there
    (:func:`~compactctl.app.options.data_on_stdout`). No result is kept, so memory stays
    flat however many files there are (``scope.keep_rows``: but a slim row per file for the
    ``--report`` page). ``warm``, ``warm_encoding``: modules to import while a piped stdin
    is still empty, and the command's encoding (:func:`warm_while_waiting`). A ``-o DIR/``
    is never searched for inputs (``scope.skip`` gets it).

    Returns:
        The run's report (its summary line and exit code are the caller's).

    Raises:
        UsageError: as :func:`run_files`.
    """
    from compactctl.app.options import data_on_stdout

    if out.output_dir is not None and not is_url(out.output_dir):
        scope = replace(scope, skip=(*scope.skip, out.output_dir))
    warm_while_waiting(paths, warm, warm_encoding)
    import time

    started = time.time()
    logged = out.writes and out.db != "" and command != "convert"
    to_stderr = data_on_stdout(out, paths)
    doc = JsonReport(to_stderr=to_stderr, command=command) if scope.json_out else None
    report = Report(check=out.check, doc=doc, keep_rows=scope.keep_rows or logged, command=command,
                    writes=out.writes)  # fmt: skip
    with capturing(doc):
        for result in run_files(
            paths, worker, scope=scope, settings=settings, report=report, desc=command,
            command=command,
        ):  # fmt: skip
            report.done(result, changed=result["changed"])
            if doc is None and not scope.quiet:
                if result.get("upToDate"):
                    text = up_to_date_line(result)
                else:
                    text = line(result) if line is not None else report_line(command, result)
                if result.get("tornLine"):
                    text += " (its torn last line is kept; the new events start on a new line)"
                _err(text)
        if logged:
            log_run(report, out.db, started)
    if doc is not None:
        doc.close(report.totals())
    return report


def log_run(report: Report, db: str | None, started: float) -> None:
    """Record the run and every file it was given, whatever its outcome (the store's run
    log, :meth:`~compactctl.app.store.Store.log_run`; paths absolute). The transcripts are
    written already: a store that cannot be written is a warning, not a failure of the
    run (the per-file history rows were written, or reported, by each job)."""
    import time

    from compactctl.app.store import FileRow, RunLog, Store, absolute, resolve_db_path

    files = []
    for row in report.rows:
        written = row.get("written")
        files.append(FileRow(
            path=absolute(str(row["path"])),
            output=None if written is None else absolute(str(written)),
            session_key=row.get("sessionKey"),
            outcome=row["outcome"],
            tokens_before=row.get("tokensBefore"),
            tokens_after=row.get("tokensAfter"),
            tokens_saved=row.get("tokensSaved"),
            error_code=row.get("code"),
            message=row.get("error") or row.get("reason"),
        ))  # fmt: skip
    run = RunLog(command=report.command, cwd=os.getcwd(), started_at=started,
                 finished_at=time.time(), exit_code=report.return_code, files=files)  # fmt: skip
    try:
        with Store.open(resolve_db_path(db)) as store:
            store.log_run(run)
    except CompactError as exc:
        message(f"compactctl: warning: run log not written to the store: {exc}")


def run_inspect(
    paths: list[str], worker: Worker, *, settings: Settings, scope: RunScope, check: bool
) -> Report:
    """Run ``inspect`` over PATHS: each file's table on stdout as it finishes (all findings
    with ``scope.verbose``), or the ``--json`` document with the run's totals.

    A file counts as changed (for ``--check``) when it has a finding other than a blank
    line or a byte order mark.

    Raises:
        UsageError: as :func:`run_files`.
    """
    from compactctl.app.inspect import InspectTotals

    doc = JsonReport(command="inspect") if scope.json_out else None
    report = Report(check=check, doc=doc, keep_rows=scope.keep_rows, outcome_ok="ok",
                    command="inspect")  # fmt: skip
    totals = InspectTotals()
    for result in run_files(
        paths, worker, scope=scope, settings=settings, report=report, desc="inspect", trim=False
    ):
        serious = [f for f in result["findings"] if f["kind"] not in {"blank", "bom"}]
        totals.add(result)
        report.done(result, changed=bool(serious), tokens=totals.file_tokens(result))
        if doc is None:
            from compactctl.app.render import inspect_table

            show(inspect_table(result, verbose=scope.verbose))
    if doc is not None:
        doc.close(totals.as_dict(report))
    return report


def run_effective(
    paths: list[str], *, tier: str | None, fmt: str | None, scope: RunScope | None = None
) -> Report:
    """``inspect --effective``: the effective context of each file (summary ``tier``, source
    format ``fmt``) as canonical JSON lines on stdout, one file after the other (``scope``:
    its filters)."""
    from compactctl.app.inspect import effective_lines
    from compactctl.io.files import write_output

    report = Report()
    for f in discover_files(paths, report, scope=scope):
        try:
            write_output(STDIN, effective_lines(f.path, tier=tier, fmt=fmt))
            report.done({"path": f.path})
        except CompactError as exc:
            _failed(report, f.path, exc)
    return report


def warm_while_waiting(
    paths: list[str], modules: Sequence[str], encoding: str | None = "estimate"
) -> None:
    """Import ``modules`` (and, unless ``encoding`` is ``"estimate"``, tiktoken, and the
    encoding itself when named) now if the input is a pipe with nothing to read yet.

    In ``rules - | dedup - | compact -`` every stage starts at once, and a later stage
    waits for the whole output of the one before it. The modules a stage needs only once its
    input has arrived (format detection, the rules replayed from a rules event, tiktoken) are
    then imported during that wait instead of after it: off the pipe's critical path. So is
    the tiktoken encoding when ``--encoding`` names it (by default it follows the session's
    model, known only from the input). Callers pass only what the command goes on to import
    anyway, so the CPU is spent earlier, not added (numpy, needed by dedup only for large
    sessions, is not warmed). Nothing is done when the input is a file, a terminal, or a
    pipe with data already waiting.
    """
    if STDIN not in paths or not modules:
        return
    try:
        if not stat.S_ISFIFO(os.fstat(sys.stdin.fileno()).st_mode):
            return
        import select

        ready, _, _ = select.select([sys.stdin], [], [], 0)
    except (AttributeError, OSError, ValueError):  # no usable stdin (closed, or replaced)
        return
    if ready:
        return
    import contextlib
    import importlib

    for name in modules:
        # optional: a command that needs a missing module reports it when it gets there
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
    if encoding == "estimate":
        return
    with contextlib.suppress(ImportError):
        importlib.import_module("tiktoken")  # counts are exact: tiktoken is needed
    if encoding is not None:
        from compactctl.tokens import ensure_offline_encodings, load_encoding

        ensure_offline_encodings()
        with contextlib.suppress(Exception):  # unknown or offline: the count reports it
            load_encoding(encoding)


FORMATS_MODULE = "compactctl.formats"
"""Format detection, needed for every input (warmed by every transforming command)."""

REPLAY_MODULES = (
    "compactctl.layers.rules",
    "compactctl.layers.text_rules",
    "compactctl.layers.dedup",
)
"""The reducers a later layer needs to replay the earlier layers' events."""
