"""The command line: parse, call the library, report, exit. The only module importing typer.

Every command shares the shell of DESIGN.md section 4: PATHS (files, folders, ``-``),
``-o``, ``--dry-run``, ``--check``, ``--json``, ``--config``, ``--jobs``, ``-q``/``-v``. stdout
carries data only; messages, progress and the summary line go to stderr.
"""

import functools
import os
import stat
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import Annotated, Any

import orjson
import typer

from compactctl import __version__
from compactctl.app.config import Settings, load_config
from compactctl.app.report import Report
from compactctl.errors import EXIT_USAGE, CompactError
from compactctl.io.files import STDIN, discover

EXIT_PIPE = 141
"""Exit code when stdout was closed by the reader (128 + SIGPIPE), as ``cat | head`` gives."""

app = typer.Typer(
    name="compactctl",
    help=(
        "Compact the session transcripts of LLM agents (JSONL).\n\n"
        "Appends CompactEvent and SummaryEvent records in place; replaying the log gives the "
        "reduced context an agent sends to its model. Bytes already in a file are never "
        "changed.\n\n"
        "Exit codes: 0 done or nothing to do; 1 --check found work; 2 usage or config error; "
        "3 some input could not be processed; 75 a transcript was locked too long (retry)."
    ),
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)

# --- the shared shell ---------------------------------------------------------------------

Paths = Annotated[
    list[str],
    typer.Argument(
        metavar="PATHS...",
        help="Transcript files, folders (searched for *.jsonl, *.jsonl.gz), or - for stdin.",
        show_default=False,
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print a machine report (JSON).")]
ConfigOpt = Annotated[
    str | None,
    typer.Option("--config", help="TOML config file (default: ~/.config/compactctl/config.toml)."),
]
JobsOpt = Annotated[
    int | None,
    typer.Option("--jobs", "-j", help="Files processed in parallel (default: number of cores)."),
]
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="Only errors on stderr.")]
VerboseOpt = Annotated[bool, typer.Option("--verbose", "-v", help="More detail on stderr.")]
CheckOpt = Annotated[
    bool, typer.Option("--check", help="Write nothing; exit 1 if any input would change.")
]
DryRunOpt = Annotated[
    bool, typer.Option("--dry-run", help="Report what would happen; write nothing.")
]


# --- options of the commands that change transcripts ---------------------------------------

OutputOpt = Annotated[
    str | None,
    typer.Option(
        "--output",
        "-o",
        help="Write the result here (a file, or - for stdout) instead of appending in place. "
        "Needed for foreign formats.",
    ),
]
MaterializeOpt = Annotated[
    bool,
    typer.Option(
        "--materialize", help="Write the effective context (the reduced transcript) instead."
    ),
]
AsOpt = Annotated[
    str, typer.Option("--as", help="With --materialize: canonical or openai (Chat Completions).")
]
EncodingOpt = Annotated[
    str | None, typer.Option("--encoding", help="tiktoken encoding (default: by the model).")
]
EstimateOpt = Annotated[
    bool, typer.Option("--estimate", help="Count tokens with the chars-based estimate.")
]
WindowOpt = Annotated[
    int | None,
    typer.Option("--context-window", help="Context window in tokens (overrides the log)."),
]
FormatOpt = Annotated[
    str | None,
    typer.Option(
        "--format",
        help="Input format (default: detected): canonical, claude-code, claude-stream, "
        "codex-rollout, codex-exec, openai-chat, openhands, swe-agent.",
    ),
]
DbOpt = Annotated[
    str | None,
    typer.Option("--db", help="SQLite store (default: $COMPACTCTL_DB or the XDG state dir)."),
]
NoStoreOpt = Annotated[bool, typer.Option("--no-store", help="Do not use the SQLite store.")]
LockTimeoutOpt = Annotated[
    float | None,
    typer.Option("--lock-timeout", help="Seconds to wait for a transcript's lock (default 10)."),
]


def _pipe_safe(command: Callable[..., None]) -> Callable[..., None]:
    """End a command quietly with exit code 141 when the reader closes stdout (``| head``)."""

    @functools.wraps(command)
    def run(*args: Any, **kwargs: Any) -> None:
        try:
            command(*args, **kwargs)
        except BrokenPipeError:
            _quiet_stdout()
            raise typer.Exit(EXIT_PIPE) from None

    return run


def _err(message: str) -> None:
    sys.stderr.write(message.rstrip("\n") + "\n")


def _fail_usage(message: str) -> None:
    _err(f"compactctl: error: {message}")
    raise typer.Exit(EXIT_USAGE)


def _settings(config: str | None, command: str) -> Settings:
    from compactctl.app.config import unknown_keys

    try:
        table, used = load_config(config)
    except CompactError as exc:
        _fail_usage(str(exc))
        raise  # unreachable
    for key in unknown_keys(table):
        _err(
            f"compactctl: warning: {used}: unknown config key {key} (ignored; keys are the "
            "long option names with _, see --help)"
        )
    return Settings(table, command)


def _discover(paths: list[str], report: Report) -> list[str]:
    """Expand PATHS; a missing path is a failure on the report, an empty folder a warning."""
    from compactctl.io.files import NoTranscripts

    files, errors = discover(paths)
    for e in errors:
        if isinstance(e, NoTranscripts):
            _err(f"compactctl: warning: {e}")
        else:
            report.failed(e.path or "?", e)
            _err(f"compactctl: {e}")
    return files


def _jobs(settings: Settings, flag: int | None, nfiles: int) -> int:
    jobs = settings.get("jobs", flag, os.cpu_count() or 1, int)
    if jobs < 1:
        _fail_usage("--jobs must be at least 1")
    return min(jobs, max(nfiles, 1))


def _progress(total: int, quiet: bool, desc: str) -> Any:
    if quiet or total < 2 or not sys.stderr.isatty():
        return None
    from tqdm import tqdm

    return tqdm(total=total, file=sys.stderr, desc=desc, unit="file", leave=False)


def run_files(
    paths: list[str],
    worker: Callable[[str], dict[str, Any]],
    *,
    jobs: int | None,
    settings: Settings,
    report: Report,
    quiet: bool,
    desc: str,
    trim: bool = True,
) -> Iterator[dict[str, Any]]:
    """Run ``worker`` on every file; yield each result; record failures on the report.

    Each file runs in its own ``try`` (STYLE.md habit 6). With more than one file and
    ``jobs > 1``, files run in a process pool, a window of ``max(64, 4 * jobs)`` files at a
    time (the next window is queued while this one is collected), largest file first within
    a window; results come back in input order. The window is wide so that one large file
    does not leave the other workers idle, and fixed so that the parent's memory does not
    grow with the number of files (at most two windows of results are held). ``trim``: give
    the heap back after each session of at least :data:`TRIM_MIN_BYTES` (for workers that
    hold a session's events; ``inspect`` does not).
    """
    files = _discover(paths, report)
    n = _jobs(settings, jobs, len(files))
    bar = _progress(len(files), quiet, desc)
    debug = bool(os.environ.get("COMPACTCTL_DEBUG"))

    def outcomes() -> Iterator[tuple[str, dict[str, Any] | CompactError]]:
        if n > 1 and STDIN not in files:
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
            report.failed(path, outcome)
            _err(f"compactctl: {outcome}")
        else:
            yield outcome
    if bar is not None:
        bar.close()


def _guarded(
    worker: Callable[[str], dict[str, Any]], path: str, debug: bool, trim: bool = False
) -> dict[str, Any] | CompactError:
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


def _dump_json(doc: Any, *, to_stderr: bool = False) -> None:
    stream = sys.stderr if to_stderr else sys.stdout
    stream.flush()
    stream.buffer.write(orjson.dumps(doc, option=orjson.OPT_INDENT_2) + b"\n")
    stream.flush()


def _finish(report: Report, verb: str, quiet: bool, rest: str = "unchanged") -> None:
    if not quiet and (report.processed + len(report.failures)) > 1:
        _err(report.summary(verb, rest))
    raise typer.Exit(report.return_code)


# --- commands ------------------------------------------------------------------------------


def _version(value: bool) -> None:
    if value:
        sys.stdout.write(f"compactctl {__version__}\n")
        raise typer.Exit(0)


@app.callback()
def main_callback(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Print the version."),
    ] = False,
) -> None:
    """Compact the session transcripts of LLM agents."""


@app.command(
    "inspect",
    epilog=(
        "Examples:\n\n"
        "  compactctl inspect session.jsonl\n\n"
        "  compactctl inspect --json ~/.claude/projects/ | jq '.totals'\n\n"
        "  compactctl inspect --effective session.jsonl > context.jsonl\n\n"
        "  cat session.jsonl | compactctl inspect --estimate -"
    ),
)
@_pipe_safe
def inspect_cmd(
    paths: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="PATHS...",
            help="Transcript files, folders (searched for *.jsonl, *.jsonl.gz), or - for stdin.",
            show_default=False,
        ),
    ] = None,
    json_out: JsonOpt = False,
    store: Annotated[
        bool,
        typer.Option(
            "--store",
            help="Report across sessions from the SQLite store: runs per "
            "day, tokens saved, sessions in breaker state.",
        ),
    ] = False,
    db: Annotated[
        str | None,
        typer.Option(
            "--db",
            help="The SQLite store to report on (implies --store; default "
            "$COMPACTCTL_DB or the XDG state dir).",
        ),
    ] = None,
    days: Annotated[int, typer.Option("--days", help="With --store: days to report.")] = 30,
    effective: Annotated[
        bool,
        typer.Option("--effective", help="Print the effective context as canonical JSONL."),
    ] = False,
    estimate: Annotated[
        bool,
        typer.Option("--estimate", help="Count tokens with the fast chars-based estimate."),
    ] = False,
    encoding: Annotated[
        str | None,
        typer.Option("--encoding", help="tiktoken encoding (default: by the session's model)."),
    ] = None,
    context_window: Annotated[
        int | None,
        typer.Option("--context-window", help="Context window in tokens (overrides the log)."),
    ] = None,
    tier: Annotated[
        str | None, typer.Option("--tier", help="Summary tier to replay: L0, L1 or L2.")
    ] = None,
    top: Annotated[int, typer.Option("--top", help="How many largest tool outputs to list.")] = 10,
    fmt: FormatOpt = None,
    check: Annotated[
        bool, typer.Option("--check", help="Exit 1 if any file has validation findings.")
    ] = False,
    config: ConfigOpt = None,
    jobs: JobsOpt = None,
    quiet: QuietOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Count events, roles, tools, bytes and tokens; list findings with line numbers.

    Writes nothing. The table (or --json) goes to stdout.
    """
    from compactctl.app.commands import InspectOptions, InspectTotals, effective_lines, inspect_path
    from compactctl.io.files import write_output

    settings = _settings(config, "inspect")
    if store or db is not None:
        _store_report(settings.get("db", db, None, str), days, json_out)
    if not paths:
        _fail_usage("missing PATHS (files, folders or -), or --store; see compactctl inspect -h")
    assert paths is not None
    if tier is not None and tier not in {"L0", "L1", "L2"}:
        _fail_usage(f"--tier must be L0, L1 or L2, not {tier!r}")
    opts = InspectOptions(
        encoding="estimate" if estimate else settings.get("encoding", encoding, None, str),
        context_window=settings.get("context_window", context_window, None, int),
        top=top,
        fmt=fmt,
        tier=tier,
    )
    report = Report(check=check)
    if effective:
        files = _discover(paths, report)
        for f in files:
            try:
                write_output(STDIN, effective_lines(f, tier=tier, fmt=fmt))
                report.done({"path": f})
            except CompactError as exc:
                report.failed(f, exc)
                _err(f"compactctl: {exc}")
        raise typer.Exit(report.return_code)

    doc = _JsonReport() if json_out else None
    totals = InspectTotals()
    for result in run_files(
        paths,
        functools.partial(inspect_path, options=opts),
        jobs=jobs,
        settings=settings,
        report=report,
        quiet=quiet,
        desc="inspect",
        trim=False,
    ):
        serious = [f for f in result["findings"] if f["kind"] not in {"blank", "bom"}]
        report.done(result, changed=bool(serious))
        if doc is not None:
            doc.add(result)
            totals.add(result)
        else:
            from compactctl.app.render import inspect_table

            sys.stdout.write(inspect_table(result, verbose=verbose))
            sys.stdout.flush()
    if doc is not None:
        doc.close(totals.as_dict(report))
    _finish(report, "with findings", quiet, rest="clean")


def _store_report(db: str | None, days: int, json_out: bool) -> None:
    import time

    from compactctl.app.store import Store, resolve_db_path

    try:
        path = resolve_db_path(db)
        if not path.exists():
            _fail_usage(
                f"{path}: no store yet (it is created by the first compact, rules, "
                "dedup or tiers run); pass --db PATH to read another one"
            )
        with Store.open(path) as st:
            doc = st.report(time.time(), days=days)
    except CompactError as exc:
        _err(f"compactctl: {exc}")
        raise typer.Exit(exc.exit_code) from None
    if json_out:
        _dump_json(doc)
    else:
        from compactctl.app.render import store_table

        sys.stdout.write(store_table(doc))
    raise typer.Exit(0)


def main() -> None:
    """Console-script entry point.

    A library error that escapes a command (a bad setting found late) becomes its message
    and exit code, never a traceback; a closed stdout (``| head``) ends the run quietly with
    141, the code of a process killed by SIGPIPE, as other filters do.
    """
    try:
        app()
    except CompactError as exc:
        if os.environ.get("COMPACTCTL_DEBUG"):
            raise
        _err(f"compactctl: error: {exc}")
        sys.exit(exc.exit_code)
    except BrokenPipeError:
        _quiet_stdout()
        sys.exit(EXIT_PIPE)


def _quiet_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush cannot fail again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def _output_options(
    settings: Settings,
    *,
    output: str | None,
    materialize: bool,
    as_format: str,
    dry_run: bool,
    check: bool,
    lock_timeout: float | None,
    tier: str | None,
    fmt: str | None,
    db: str | None,
    no_store: bool,
    paths: list[str],
) -> Any:
    from compactctl.app.commands import OutputOptions, output_name

    output_dir = None
    if output is not None and (os.path.isdir(output) or output.endswith(os.sep)):
        output_dir = output
        if not (dry_run or check):
            os.makedirs(output_dir, exist_ok=True)
        output = None
    if output is not None or output_dir is not None:
        files, _ = discover(paths)
        if output is not None and len(files) > 1:
            _fail_usage(
                f"-o {output} would receive {len(files)} transcripts; give a folder "
                "(-o DIR/) to write one file per input, or omit -o to append in place"
            )
        for f in files:
            if output is not None and f != STDIN and _same_path(f, output):
                _fail_usage(
                    f"-o names the input {f} itself; write to another file (compactctl never "
                    "rewrites a transcript), or omit -o to append to a canonical one in place"
                )
        if output_dir is not None:
            targets = [os.path.join(output_dir, output_name(f)) for f in files]
            clash = {t for t in targets if targets.count(t) > 1}
            if clash:
                _fail_usage(f"two inputs would both be written to {sorted(clash)[0]}")
            for f, t in zip(files, targets, strict=True):
                if f != STDIN and _same_path(f, t):
                    _fail_usage(f"-o {output_dir} would overwrite the input {f}; use another dir")
    if as_format not in {"canonical", "openai"}:
        _fail_usage(f"--as must be canonical or openai, not {as_format!r}")
    if as_format != "canonical" and not materialize:
        _fail_usage("--as applies to --materialize only")
    if tier is not None and tier not in {"L0", "L1", "L2"}:
        _fail_usage(f"--tier must be L0, L1 or L2, not {tier!r}")
    return OutputOptions(
        output=output,
        output_dir=output_dir,
        materialize=materialize,
        as_format=as_format,
        dry_run=dry_run,
        check=check,
        lock_timeout=settings.get("lock_timeout", lock_timeout, 10.0, float),
        torn_wait=settings.get("torn_wait", None, 2.0, float),
        tier=tier,
        fmt=fmt,
        db="" if no_store else settings.get("db", db, None, str),
    )


def _same_path(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


class _JsonReport:
    """The ``--json`` document ``{"files": [...], "totals": {...}}``, written as results
    arrive, so a run over any number of files holds one result at a time.

    The bytes equal ``orjson.dumps(doc, option=OPT_INDENT_2)`` of the whole document. It
    goes to stdout, or to stderr when stdout carries the transcript (stdin input, ``-o -``,
    ``--materialize`` without ``-o``), so the data stays parseable.
    """

    def __init__(self, *, to_stderr: bool = False) -> None:
        self.stream = sys.stderr if to_stderr else sys.stdout
        self.count = 0
        self.started = False  # nothing is written before the run has passed its checks

    def _start(self) -> None:
        if not self.started:
            self.started = True
            self.stream.flush()
            self.stream.buffer.write(b'{\n  "files": [')

    def add(self, result: dict[str, Any]) -> None:
        """Write one file's result (input order is the caller's)."""
        self._start()
        body = orjson.dumps(result, option=orjson.OPT_INDENT_2).replace(b"\n", b"\n    ")
        self.stream.buffer.write((b",\n    " if self.count else b"\n    ") + body)
        self.count += 1

    def close(self, totals: dict[str, Any]) -> None:
        """Write ``totals`` and end the document."""
        self._start()
        body = orjson.dumps(totals, option=orjson.OPT_INDENT_2).replace(b"\n", b"\n  ")
        end = b"\n  ]" if self.count else b"]"
        self.stream.buffer.write(end + b',\n  "totals": ' + body + b"\n}\n")
        self.stream.flush()


def _data_on_stdout(out: Any, paths: list[str]) -> bool:
    """Whether a transcript-changing run writes transcript data to stdout."""
    if out.output is not None:
        return bool(out.output == STDIN)
    return out.output_dir is None and (STDIN in paths or bool(out.materialize))


def _warm_while_waiting(
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


_FORMATS = "compactctl.formats"  # format detection, for every input
_REPLAY = ("compactctl.layers.rules", "compactctl.layers.text_rules", "compactctl.layers.dedup")
"""The reducers a later layer needs to replay the earlier layers' events."""


def _run_transform(
    paths: list[str],
    worker: Callable[[str], dict[str, Any]],
    *,
    settings: Settings,
    jobs: int | None,
    check: bool,
    json_out: bool,
    quiet: bool,
    desc: str,
    verb: str,
    line: Callable[[dict[str, Any]], str],
    dry: bool = False,
    data_on_stdout: bool = False,
    warm: Sequence[str] = (),
    warm_encoding: str | None = None,
) -> None:
    """Run a transcript-changing command over PATHS, report, and exit with the code.

    Each file's line (or, with ``--json``, its entry of the JSON document) is written as it
    finishes and no result is kept, so memory stays flat however many files there are.
    ``warm``, ``warm_encoding``: modules to import while a piped stdin is still empty, and
    the command's encoding (``"estimate"``, a name, or ``None``: the session's), which adds
    tiktoken and a named encoding (:func:`_warm_while_waiting`).
    """
    _warm_while_waiting(paths, warm, warm_encoding)
    report = Report(check=check)
    doc = _JsonReport(to_stderr=data_on_stdout) if json_out else None
    for result in run_files(
        paths, worker, jobs=jobs, settings=settings, report=report, quiet=quiet, desc=desc
    ):
        report.done(result, changed=result["changed"])
        if doc is not None:
            doc.add(result)
        elif not quiet:
            text = line(result)
            if result.get("tornLine"):
                text += " (its torn last line is kept; the new events start on a new line)"
            _err(text)
    if doc is not None:
        doc.close(
            {
                "files": report.processed,
                "changed": report.changed,
                "failed": len(report.failures),
                "errors": [{"path": p, "message": e.message} for p, e in report.failures],
            }
        )
    _finish(report, f"would be {verb}" if dry else verb, quiet)


def _verb(r: dict[str, Any], done: str, would: str) -> str:
    """The verb of a report line: what happened, where it went, or what would happen."""
    written = r.get("written")
    if written is None:
        return would
    if written != r["path"]:
        dest = "stdout" if written == STDIN else written
        source = "" if r["path"] == STDIN else "source unchanged; "
        return f"({source}written to {dest}) {done}"
    return done


def _compact_line(r: dict[str, Any]) -> str:
    est = " (estimate)" if r.get("tokenizer") == "estimate" else ""
    if not r["changed"]:
        why = r.get("reason") or "nothing to do"
        return f"{r['path']}: unchanged: {why}"
    parts = []
    if r.get("micro"):
        parts.append(f"micro compaction of {r['micro']['targets']} tool outputs")
    if r.get("summary"):
        s = r["summary"]
        parts.append(f"summary of {s['replaces']} events ({s['model']}, {s['triggerMode']})")
    verb = _verb(r, "appended", "would append")
    return (
        f"{r['path']}: {verb} {' + '.join(parts)}; prompt estimate "
        f"{r['tokensBefore']} -> {r['promptEstimate']} tokens{est} (-{r['released']})"
    )


@app.command(
    "compact",
    epilog=(
        "Examples:\n\n"
        "  compactctl compact --force session.jsonl\n\n"
        "  compactctl compact ~/sessions/ --jobs 2\n\n"
        "  compactctl compact --force --materialize -o ctx.jsonl session.jsonl\n\n"
        "  compactctl compact --model openai/gpt-4o-mini --force session.jsonl\n\n"
        "  compactctl compact --check ~/sessions/\n\n"
        "  cat s.jsonl | compactctl compact --force - > out.jsonl"
    ),
)
@_pipe_safe
def compact_cmd(
    paths: Paths,
    force: Annotated[
        bool, typer.Option("--force", help="Compact now, whatever the triggers say (manual).")
    ] = False,
    reactive: Annotated[
        bool,
        typer.Option(
            "--reactive",
            help="Your model just said the context is too long: compact "
            "now and record triggerMode reactive.",
        ),
    ] = False,
    micro_only: Annotated[
        bool, typer.Option("--micro-only", help="Run micro compaction alone (no summary).")
    ] = False,
    no_micro: Annotated[bool, typer.Option("--no-micro", help="Skip micro compaction.")] = False,
    model: Annotated[
        str | None,
        typer.Option(
            "--model",
            help="Summarizer: extractive (default, offline), a litellm "
            "model such as openai/gpt-4o-mini, or 'session' (the log's own model).",
        ),
    ] = None,
    summary_format: Annotated[
        str | None,
        typer.Option("--summary-format", help="sections (default) or task-state."),
    ] = None,
    strategy: Annotated[
        str | None, typer.Option("--strategy", help="keep_recent (default) or full_replace.")
    ] = None,
    keep_recent: Annotated[
        int | None, typer.Option("--keep-recent", help="Messages kept verbatim (default 10).")
    ] = None,
    max_summary_chars: Annotated[
        int | None,
        typer.Option(
            "--max-summary-chars",
            help="Summary budget in chars (default 12000 sections, 1200 task-state).",
        ),
    ] = None,
    instructions: Annotated[
        str | None, typer.Option("--instructions", help="Your own focus for the summary.")
    ] = None,
    no_redact: Annotated[
        bool, typer.Option("--no-redact", help="Do not redact secrets sent to the model.")
    ] = False,
    micro_trigger: Annotated[
        float | None,
        typer.Option("--micro-trigger", help="Micro runs past this share of the window (0.25)."),
    ] = None,
    summary_trigger: Annotated[
        float | None,
        typer.Option(
            "--summary-trigger", help="Summarize past this share of max input tokens (0.9)."
        ),
    ] = None,
    input_token_threshold: Annotated[
        int | None,
        typer.Option("--input-token-threshold", help="Also summarize past this many tokens."),
    ] = None,
    min_saving: Annotated[
        float | None,
        typer.Option("--min-saving", help="Append nothing if the saving is below this (0.05)."),
    ] = None,
    keep_turns: Annotated[
        int | None,
        typer.Option("--keep-turns", help="Micro: previous turns left intact (default 1)."),
    ] = None,
    preserve: Annotated[
        list[str] | None,
        typer.Option(
            "--preserve",
            help="Micro: a tool whose outputs are never elided (repeatable; config key preserve).",
        ),
    ] = None,
    timeout: Annotated[
        float | None, typer.Option("--timeout", help="Model request timeout, seconds (120).")
    ] = None,
    num_retries: Annotated[
        int | None, typer.Option("--num-retries", help="Model retries with backoff (2).")
    ] = None,
    events: Annotated[
        bool,
        typer.Option(
            "--events", help="Print compact_start/compact_done/compact_error JSON lines on stderr."
        ),
    ] = False,
    output: OutputOpt = None,
    materialize: MaterializeOpt = False,
    as_format: AsOpt = "canonical",
    tier: Annotated[
        str | None, typer.Option("--tier", help="With --materialize: summary tier L0/L1/L2.")
    ] = None,
    fmt: FormatOpt = None,
    encoding: EncodingOpt = None,
    estimate: EstimateOpt = False,
    context_window: WindowOpt = None,
    dry_run: DryRunOpt = False,
    check: CheckOpt = False,
    json_out: JsonOpt = False,
    db: DbOpt = None,
    no_store: NoStoreOpt = False,
    lock_timeout: LockTimeoutOpt = None,
    config: ConfigOpt = None,
    jobs: JobsOpt = None,
    quiet: QuietOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Micro-compact old tool outputs, then summarize when a trigger fires (or --force).

    Appends a CompactEvent (mode micro) and a SummaryEvent in place; a second identical run
    appends nothing. The offline extractive summarizer is the default.
    """
    from compactctl.app.commands import compact_path
    from compactctl.layers.micro import MicroParams
    from compactctl.layers.summary import DEFAULT_PIN_PATTERNS, CompactOptions

    s = _settings(config, "compact")
    out = _output_options(
        s,
        output=output,
        materialize=materialize,
        as_format=as_format,
        dry_run=dry_run,
        check=check,
        lock_timeout=lock_timeout,
        tier=tier,
        fmt=fmt,
        db=db,
        no_store=no_store,
        paths=paths,
    )
    pres = tuple(preserve) if preserve else tuple(s.get("preserve", None, [], list))
    try:
        opts = CompactOptions(
            force=force,
            reactive=reactive,
            micro_only=micro_only,
            micro_enabled=not no_micro,
            micro=MicroParams(
                keep_turns=s.get("keep_turns", keep_turns, 1, int), preserve=tuple(pres)
            ),
            micro_trigger=s.get("micro_trigger", micro_trigger, 0.25, float),
            summary_trigger=s.get("summary_trigger", summary_trigger, 0.9, float),
            input_token_threshold=s.get("input_token_threshold", input_token_threshold, None, int),
            strategy=s.get("strategy", strategy, "keep_recent", str),
            keep_recent=s.get("keep_recent", keep_recent, 10, int),
            format=s.get("summary_format", summary_format, "sections", str),
            max_summary_chars=s.get("max_summary_chars", max_summary_chars, None, int),
            model=s.get("model", model, None, str),
            instructions=s.get("instructions", instructions, "", str),
            pin_patterns=DEFAULT_PIN_PATTERNS + tuple(s.get("pin_patterns", None, [], list)),
            redact=not no_redact and s.get("redact", None, True, bool),
            min_saving=s.get("min_saving", min_saving, 0.05, float),
            context_window=s.get("context_window", context_window, None, int),
            encoding="estimate" if estimate else s.get("encoding", encoding, None, str),
            timeout=s.get("timeout", timeout, 120.0, float),
            num_retries=s.get("num_retries", num_retries, 2, int),
            emit_events=events,
        )
    except CompactError as exc:
        _fail_usage(str(exc))
        raise
    _run_transform(
        paths,
        functools.partial(compact_path, options=opts, out=out),
        settings=s,
        jobs=jobs,
        check=check,
        dry=dry_run or check,
        json_out=json_out,
        quiet=quiet,
        desc="compact",
        verb="compacted",
        line=_compact_line,
        data_on_stdout=_data_on_stdout(out, paths),
        warm=(_FORMATS, *_REPLAY),
        warm_encoding=opts.encoding,
    )


def _rules_line(r: dict[str, Any]) -> str:
    if not r["changed"]:
        return f"{r['path']}: unchanged: no rule changes any message"
    verb = _verb(r, "rules applied to", "would rewrite")
    top = sorted(r["byRule"].items(), key=lambda kv: -kv[1]["charsSaved"])[:4]
    detail = ", ".join(f"{k} -{v['charsSaved']} chars" for k, v in top)
    return f"{r['path']}: {verb} {r['targets']} messages, -{r['tokensSaved']} tokens ({detail})"


@app.command(
    "rules",
    epilog=(
        "Examples:\n\n"
        "  compactctl rules session.jsonl\n\n"
        "  compactctl rules --list\n\n"
        "  compactctl rules --only ansi --only whitespace logs/\n\n"
        "  compactctl rules - < s.jsonl | compactctl dedup - | compactctl compact - > out.jsonl"
    ),
)
@_pipe_safe
def rules_cmd(
    paths: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="PATHS...", help="Transcripts, folders, or - for stdin.", show_default=False
        ),
    ] = None,
    list_rules: Annotated[
        bool, typer.Option("--list", help="List the rules with a one-line description.")
    ] = False,
    only: Annotated[
        list[str] | None, typer.Option("--only", help="Apply only this rule (repeatable).")
    ] = None,
    skip: Annotated[
        list[str] | None, typer.Option("--skip", help="Never apply this rule (repeatable).")
    ] = None,
    output: OutputOpt = None,
    materialize: MaterializeOpt = False,
    as_format: AsOpt = "canonical",
    fmt: FormatOpt = None,
    encoding: EncodingOpt = None,
    estimate: EstimateOpt = False,
    dry_run: DryRunOpt = False,
    check: CheckOpt = False,
    json_out: JsonOpt = False,
    db: DbOpt = None,
    no_store: NoStoreOpt = False,
    lock_timeout: LockTimeoutOpt = None,
    config: ConfigOpt = None,
    jobs: JobsOpt = None,
    quiet: QuietOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Layer 1: deterministic text rules (whitespace, emoji, tables, ANSI, ...) per message.

    Rules are chosen per message: CJK text enables CJK punctuation, a table enables table
    compression, code disables bullet merging; fenced and inline code are never altered;
    tool outputs that are file contents or code get only ANSI and whitespace cleanup.
    """
    from compactctl.layers.text_rules import RULES

    if list_rules:
        if json_out:
            _dump_json(
                [
                    {
                        "name": r.name,
                        "version": r.version,
                        "description": r.description,
                        "safeForCode": r.safe_for_code,
                    }
                    for r in RULES.values()
                ]
            )
        else:
            from compactctl.app.render import table

            sys.stdout.write(
                table(
                    ["rule", "version", "description"],
                    [[r.name, r.version, r.description] for r in RULES.values()],
                    indent="",
                )
            )
        raise typer.Exit(0)
    if not paths:
        _fail_usage("missing PATHS (files, folders or -); see compactctl rules --help")
    assert paths is not None
    from compactctl.app.commands import rules_path
    from compactctl.layers.rules import RulesOptions

    s = _settings(config, "rules")
    out = _output_options(
        s,
        output=output,
        materialize=materialize,
        as_format=as_format,
        dry_run=dry_run,
        check=check,
        lock_timeout=lock_timeout,
        tier=None,
        fmt=fmt,
        db=db,
        no_store=no_store,
        paths=paths,
    )
    opts = RulesOptions(
        only=tuple(only) if only else None,
        skip=tuple(skip or ()),
        by_rule=json_out or not quiet,  # only the report shows it
    )
    try:
        opts.chosen()
    except KeyError as exc:
        _fail_usage(str(exc.args[0]) + " (see compactctl rules --list)")
    enc = "estimate" if estimate else s.get("encoding", encoding, None, str)
    _run_transform(
        paths,
        functools.partial(rules_path, options=opts, out=out, encoding=enc),
        settings=s,
        jobs=jobs,
        check=check,
        dry=dry_run or check,
        json_out=json_out,
        quiet=quiet,
        desc="rules",
        verb="changed by rules",
        line=_rules_line,
        data_on_stdout=_data_on_stdout(out, paths),
        warm=(_FORMATS,),
        warm_encoding=enc,
    )


def _dedup_line(r: dict[str, Any]) -> str:
    if not r["changed"]:
        return f"{r['path']}: unchanged: no duplicates among {r['candidates']} candidates"
    verb = _verb(r, "marked", "would mark")
    return (
        f"{r['path']}: {verb} {r['pairs']} duplicates in {r['groups']} groups "
        f"({r['exact']} exact, {r['near']} near), -{r['tokensSaved']} tokens"
    )


@app.command(
    "dedup",
    epilog=(
        "Examples:\n\n"
        "  compactctl dedup session.jsonl\n\n"
        "  compactctl dedup --threshold 0.8 --scope tool ~/sessions/\n\n"
        "  compactctl rules - < s.jsonl | compactctl dedup - | compactctl compact - > out.jsonl"
    ),
)
@_pipe_safe
def dedup_cmd(
    paths: Paths,
    threshold: Annotated[
        float | None,
        typer.Option("--threshold", help="Jaccard similarity of word 3-grams (default 0.6)."),
    ] = None,
    scope: Annotated[
        str | None, typer.Option("--scope", help="tool, assistant or all (default all).")
    ] = None,
    min_chars: Annotated[
        int | None,
        typer.Option("--min-chars", help="Ignore shorter messages, in chars (default 200)."),
    ] = None,
    output: OutputOpt = None,
    materialize: MaterializeOpt = False,
    as_format: AsOpt = "canonical",
    fmt: FormatOpt = None,
    encoding: EncodingOpt = None,
    estimate: EstimateOpt = False,
    dry_run: DryRunOpt = False,
    check: CheckOpt = False,
    json_out: JsonOpt = False,
    db: DbOpt = None,
    no_store: NoStoreOpt = False,
    lock_timeout: LockTimeoutOpt = None,
    config: ConfigOpt = None,
    jobs: JobsOpt = None,
    quiet: QuietOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Layer 2: near-duplicate tool outputs and assistant texts (newer copy kept).

    An older duplicate tool output becomes a pointer to the newer one; an older duplicate
    assistant text is dropped; user, system and pinned messages are never touched.
    """
    from compactctl.app.commands import dedup_path
    from compactctl.layers.dedup import DedupOptions

    s = _settings(config, "dedup")
    out = _output_options(
        s,
        output=output,
        materialize=materialize,
        as_format=as_format,
        dry_run=dry_run,
        check=check,
        lock_timeout=lock_timeout,
        tier=None,
        fmt=fmt,
        db=db,
        no_store=no_store,
        paths=paths,
    )
    try:
        opts = DedupOptions(
            threshold=s.get("threshold", threshold, 0.6, float),
            scope=s.get("scope", scope, "all", str),
            min_chars=s.get("min_chars", min_chars, 200, int),
        )
    except CompactError as exc:
        _fail_usage(str(exc))
        raise
    enc = "estimate" if estimate else s.get("encoding", encoding, None, str)
    _run_transform(
        paths,
        functools.partial(dedup_path, options=opts, out=out, encoding=enc),
        settings=s,
        jobs=jobs,
        check=check,
        dry=dry_run or check,
        json_out=json_out,
        quiet=quiet,
        desc="dedup",
        verb="deduplicated",
        line=_dedup_line,
        data_on_stdout=_data_on_stdout(out, paths),
        # not numpy, which similarity imports only above about 128 KB of candidate text:
        # only what every run needs is imported ahead (CPU spent anyway, just earlier)
        warm=(_FORMATS, *_REPLAY[:2], "compactctl.layers.similarity"),
        warm_encoding=enc,
    )


@app.command(
    "convert",
    epilog=(
        "Examples:\n\n"
        "  compactctl convert ~/.claude/projects/-home-me-app/SESSION.jsonl -o session.jsonl\n\n"
        "  compactctl convert rollout.jsonl | compactctl compact --force - > out.jsonl\n\n"
        "  compactctl convert --jobs 2 -o canonical/ ~/.codex/sessions/\n\n"
        "  compactctl convert --check sessions/    # exit 1 if any file is not canonical\n\n"
        "  compactctl convert --list-formats"
    ),
)
@_pipe_safe
def convert_cmd(
    paths: Annotated[
        list[str] | None,
        typer.Argument(metavar="PATHS...", help="Transcripts, or - for stdin.", show_default=False),
    ] = None,
    output: Annotated[
        str | None, typer.Option("--output", "-o", help="Write here (default: stdout).")
    ] = None,
    fmt: FormatOpt = None,
    list_formats: Annotated[
        bool, typer.Option("--list-formats", help="List the formats compactctl reads.")
    ] = False,
    dry_run: DryRunOpt = False,
    check: Annotated[
        bool,
        typer.Option("--check", help="Write nothing; exit 1 if any input is not canonical."),
    ] = False,
    json_out: JsonOpt = False,
    config: ConfigOpt = None,
    jobs: JobsOpt = None,
    quiet: QuietOpt = False,
) -> None:
    """Write the canonical compactctl JSONL form of any transcript compactctl reads.

    The source is never changed. Ids, timestamps and line numbers (sourceLine) are kept so
    a message can be found back in the original. Many files need -o DIR/ (one output
    per input) and run in parallel (--jobs).
    """
    from compactctl.formats import FORMATS

    if list_formats:
        if json_out:
            _dump_json([{"name": f.name, "description": f.description} for f in FORMATS.values()])
        else:
            from compactctl.app.render import table

            sys.stdout.write(
                table(
                    ["format", "description"],
                    [[f.name, f.description] for f in FORMATS.values()],
                    indent="",
                )
            )
        raise typer.Exit(0)
    if not paths:
        _fail_usage("missing PATHS; see compactctl convert --help")
    assert paths is not None
    from compactctl.app.commands import convert_path

    s = _settings(config, "convert")
    to_dir = output is not None and (output.endswith(("/", os.sep)) or os.path.isdir(output))
    several = len(discover(paths)[0]) > 1
    # --dry-run reports what the real run would do, so it refuses what that run refuses;
    # --check only asks whether any input is foreign (a CI gate) and needs no output
    if several and not (check or to_dir):
        _fail_usage(
            f"convert writes one transcript per output, and {output or 'stdout'} would "
            "receive several; give a folder (-o DIR/) to write one file per input"
        )
    out = _output_options(
        s,
        output=output,
        materialize=False,
        as_format="canonical",
        dry_run=dry_run,
        check=check,
        lock_timeout=None,
        tier=None,
        fmt=fmt,
        db="",
        no_store=True,
        paths=paths,
    )

    def line(r: dict[str, Any]) -> str:
        to = "stdout" if r["output"] == STDIN else r["output"]
        if check and several and not to_dir:
            to = "already canonical" if r["format"] == "canonical" else "would convert"
        elif dry_run or check:
            to = f"would write {to}"
        return f"{r['path']}: {r['format']} -> canonical, {r['events']} events ({to})"

    _run_transform(
        paths,
        functools.partial(convert_path, out=out),
        settings=s,
        jobs=jobs,
        check=check,
        dry=dry_run or check,
        json_out=json_out,
        quiet=quiet,
        desc="convert",
        verb="converted",
        line=line,
        data_on_stdout=_data_on_stdout(out, paths),
    )


def _tiers_line(r: dict[str, Any]) -> str:
    if not r["changed"]:
        return f"{r['path']}: unchanged: {r.get('reason') or 'nothing to do'}"
    sizes = ", ".join(f"{k} {v}" for k, v in sorted(r["tiers"].items()))
    verb = _verb(r, "added", "would add")
    return (
        f"{r['path']}: {verb} tiers ({sizes} tokens, {r['tokenizer']}); "
        f"replay shows {r['selectedTier']}"
    )


@app.command(
    "tiers",
    epilog=(
        "Examples:\n\n"
        "  compactctl compact --force s.jsonl && compactctl tiers s.jsonl\n\n"
        "  compactctl tiers --tier L1 ~/sessions/\n\n"
        "  compactctl tiers --tier L0 --materialize -o ctx.jsonl s.jsonl"
    ),
)
@_pipe_safe
def tiers_cmd(
    paths: Paths,
    tier: Annotated[
        str, typer.Option("--tier", help="auto (by history length or room left), L0, L1, L2.")
    ] = "auto",
    model: Annotated[
        str | None,
        typer.Option("--model", help="Let this litellm model rewrite L1 and L0 (validated)."),
    ] = None,
    output: OutputOpt = None,
    materialize: MaterializeOpt = False,
    as_format: AsOpt = "canonical",
    fmt: FormatOpt = None,
    encoding: EncodingOpt = None,
    context_window: WindowOpt = None,
    dry_run: DryRunOpt = False,
    check: CheckOpt = False,
    json_out: JsonOpt = False,
    db: DbOpt = None,
    no_store: NoStoreOpt = False,
    lock_timeout: LockTimeoutOpt = None,
    config: ConfigOpt = None,
    jobs: JobsOpt = None,
    quiet: QuietOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Layer 4: L0/L1/L2 summaries (about 200/1000/3000 tokens) from the newest summary.

    Recorded on a new SummaryEvent that supersedes the previous one; running it twice
    appends nothing. Tiers are also saved in the SQLite store for cron and CI.
    """
    from compactctl.app.commands import tiers_path

    if tier not in {"auto", "L0", "L1", "L2"}:
        _fail_usage(f"--tier must be auto, L0, L1 or L2, not {tier!r}")
    s = _settings(config, "tiers")
    out = _output_options(
        s,
        output=output,
        materialize=materialize,
        as_format=as_format,
        dry_run=dry_run,
        check=check,
        lock_timeout=lock_timeout,
        tier=None if tier == "auto" else tier,
        fmt=fmt,
        db=db,
        no_store=no_store,
        paths=paths,
    )
    worker = functools.partial(
        tiers_path,
        out=out,
        tier=tier,
        encoding=s.get("encoding", encoding, None, str),
        context_window=s.get("context_window", context_window, None, int),
        model=s.get("tiers_model", model, None, str),
    )
    _run_transform(
        paths,
        worker,
        settings=s,
        jobs=jobs,
        check=check,
        dry=dry_run or check,
        json_out=json_out,
        quiet=quiet,
        desc="tiers",
        verb="tiered",
        line=_tiers_line,
        data_on_stdout=_data_on_stdout(out, paths),
    )
