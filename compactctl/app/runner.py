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

import os
import stat
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from compactctl.app.config import Settings
from compactctl.app.report import JsonReport, Report, capturing, message, report_line
from compactctl.errors import CompactError, UsageError
from compactctl.io.files import STDIN, discover

if TYPE_CHECKING:
    from compactctl.app.jobs import OutputOptions

__all__ = [
    "TRIM_MIN_BYTES",
    "discover_files",
    "run_effective",
    "run_files",
    "run_inspect",
    "run_transform",
    "warm_while_waiting",
]

Worker = Callable[[str], dict[str, Any]]
"""A per-file job: a path (or ``-``) to its JSON-ready result; raises ``CompactError``."""


def _err(message: str) -> None:
    sys.stderr.write(message.rstrip("\n") + "\n")


def discover_files(paths: list[str], report: Report, documents: bool = False) -> list[str]:
    """Expand PATHS; a missing path is a failure on the report, an empty folder a warning.
    ``documents`` (``--documents``): folders also yield the JSON documents and Aider
    histories a reader recognises (:func:`compactctl.io.files.discover`)."""
    from compactctl.io.files import NoTranscripts

    files, errors = discover(paths, documents=documents)
    for e in errors:
        if isinstance(e, NoTranscripts):
            message(f"compactctl: warning: {e}")
        else:
            _failed(report, e.path or "?", e)
    return files


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


def _progress(total: int, quiet: bool, desc: str) -> Any:
    if quiet or total < 2 or not sys.stderr.isatty():
        return None
    from tqdm import tqdm

    return tqdm(total=total, file=sys.stderr, desc=desc, unit="file", leave=False)


def run_files(
    paths: list[str],
    worker: Worker,
    *,
    jobs: int | None,
    settings: Settings,
    report: Report,
    quiet: bool,
    desc: str,
    trim: bool = True,
    dask: str | None = None,
    documents: bool | None = None,
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

    Raises:
        UsageError: ``--jobs`` (or the ``jobs`` setting) is below 1; raised after PATHS are
            expanded, before any file is processed.
    """
    documents = settings.get("documents", documents, False, bool)
    files = discover_files(paths, report, documents)
    n = _jobs(settings, jobs, len(files))
    address = settings.get("dask", dask, None, str) or None
    bar = _progress(len(files), quiet, desc)
    debug = bool(os.environ.get("COMPACTCTL_DEBUG"))

    def outcomes() -> Iterator[tuple[str, dict[str, Any] | CompactError]]:
        if address is not None and STDIN not in files:
            import functools

            from compactctl.app.cluster import cluster_outcomes

            task = functools.partial(_guarded, worker, debug=debug, trim=trim)
            yield from cluster_outcomes(files, task, address)
        elif n > 1 and STDIN not in files:
            from concurrent.futures import Future, ProcessPoolExecutor

            window = max(64, 4 * n)
            with ProcessPoolExecutor(max_workers=n) as pool:

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

    for path, outcome in outcomes():
        if bar is not None:
            bar.update(1)
        if isinstance(outcome, CompactError):
            _failed(report, path, outcome)
        else:
            yield outcome
    if bar is not None:
        bar.close()


def _guarded(
    worker: Worker, path: str, debug: bool, trim: bool = False
) -> dict[str, Any] | CompactError:
    """``worker(path)``, or the error it raised (an unexpected one as an InputError, unless
    ``debug``); a closed stdout stops the whole run."""
    try:
        return worker(path)
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
    jobs: int | None,
    json_out: bool,
    quiet: bool,
    line: Callable[[dict[str, Any]], str] | None = None,
    warm: Sequence[str] = (),
    warm_encoding: str | None = None,
    dask: str | None = None,
    documents: bool | None = None,
    keep_rows: bool = False,
) -> Report:
    """Run a transcript-changing command over PATHS and report each file as it finishes.

    Each file's line (:func:`~compactctl.app.report.report_line` of ``command``, or
    ``line``) goes to stderr unless ``quiet``; with ``json_out`` its entry of the JSON
    document goes to stdout, or to stderr when ``out`` writes the transcript there
    (:func:`~compactctl.app.options.data_on_stdout`). No result is kept, so memory stays
    flat however many files there are (``keep_rows``: but a slim row per file for the
    ``--report`` page). ``warm``, ``warm_encoding``: modules to import while a piped stdin
    is still empty, and the command's encoding (:func:`warm_while_waiting`).

    Returns:
        The run's report (its summary line and exit code are the caller's).

    Raises:
        UsageError: as :func:`run_files`.
    """
    from compactctl.app.options import data_on_stdout

    warm_while_waiting(paths, warm, warm_encoding)
    import time

    started = time.time()
    logged = out.writes and out.db != "" and command != "convert"
    doc = JsonReport(to_stderr=data_on_stdout(out, paths), command=command) if json_out else None
    report = Report(check=out.check, doc=doc, keep_rows=keep_rows or logged, command=command)
    with capturing(doc):
        for result in run_files(
            paths, worker, jobs=jobs, settings=settings, report=report, quiet=quiet,
            desc=command, dask=dask, documents=documents,
        ):  # fmt: skip
            report.done(result, changed=result["changed"])
            if doc is None and not quiet:
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
    paths: list[str],
    worker: Worker,
    *,
    settings: Settings,
    jobs: int | None,
    check: bool,
    json_out: bool,
    quiet: bool,
    verbose: bool,
    dask: str | None = None,
    documents: bool | None = None,
    keep_rows: bool = False,
) -> Report:
    """Run ``inspect`` over PATHS: each file's table on stdout as it finishes (all findings
    with ``verbose``), or the ``--json`` document with the run's totals.

    A file counts as changed (for ``--check``) when it has a finding other than a blank
    line or a byte order mark.

    Raises:
        UsageError: as :func:`run_files`.
    """
    from compactctl.app.inspect import InspectTotals

    doc = JsonReport(command="inspect") if json_out else None
    report = Report(check=check, doc=doc, keep_rows=keep_rows, outcome_ok="ok",
                    command="inspect")  # fmt: skip
    totals = InspectTotals()
    for result in run_files(
        paths, worker, jobs=jobs, settings=settings, report=report, quiet=quiet,
        desc="inspect", trim=False, dask=dask, documents=documents,
    ):  # fmt: skip
        serious = [f for f in result["findings"] if f["kind"] not in {"blank", "bom"}]
        totals.add(result)
        report.done(result, changed=bool(serious), tokens=totals.file_tokens(result))
        if doc is None:
            from compactctl.app.render import inspect_table

            sys.stdout.write(inspect_table(result, verbose=verbose))
            sys.stdout.flush()
    if doc is not None:
        doc.close(totals.as_dict(report))
    return report


def run_effective(paths: list[str], *, tier: str | None, fmt: str | None) -> Report:
    """``inspect --effective``: the effective context of each file (summary ``tier``, source
    format ``fmt``) as canonical JSON lines on stdout, one file after the other."""
    from compactctl.app.inspect import effective_lines
    from compactctl.io.files import write_output

    report = Report()
    for f in discover_files(paths, report):
        try:
            write_output(STDIN, effective_lines(f, tier=tier, fmt=fmt))
            report.done({"path": f})
        except CompactError as exc:
            _failed(report, f, exc)
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
