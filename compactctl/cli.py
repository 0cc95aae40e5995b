"""The command line: parse, call the library, report, exit. The only module importing typer.

Every command shares the shell of DESIGN.md section 4: PATHS (files, folders, ``-``),
``-o``, ``--dry-run``, ``--check``, ``--json``, ``--config``, ``--jobs``, ``-q``/``-v``. stdout
carries data only; messages, progress and the summary line go to stderr.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from typing import Annotated, Any

import orjson
import typer

from . import __version__
from .config import Settings, load_config
from .errors import EXIT_USAGE, CompactError
from .files import STDIN, discover
from .report import Report

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


def _err(message: str) -> None:
    sys.stderr.write(message.rstrip("\n") + "\n")


def _fail_usage(message: str) -> None:
    _err(f"compactctl: error: {message}")
    raise typer.Exit(EXIT_USAGE)


def _settings(config: str | None, command: str) -> Settings:
    try:
        table, _ = load_config(config)
    except CompactError as exc:
        _fail_usage(str(exc))
        raise  # unreachable
    return Settings(table, command)


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
) -> Iterator[dict[str, Any]]:
    """Run ``worker`` on every file; yield each result; record failures on the report.

    Each file runs in its own ``try`` (STYLE.md habit 6). With more than one file and
    ``jobs > 1``, files run in a process pool; results come back in input order.
    """
    files, errors = discover(paths)
    for e in errors:
        report.failed(e.path or "?", e)
        _err(f"compactctl: {e}")
    n = _jobs(settings, jobs, len(files))
    bar = _progress(len(files), quiet, desc)
    debug = bool(os.environ.get("COMPACTCTL_DEBUG"))

    def outcomes() -> Iterator[tuple[str, dict[str, Any] | CompactError]]:
        if n > 1 and STDIN not in files:
            with ProcessPoolExecutor(max_workers=n) as pool:
                futures = [(f, pool.submit(_guarded, worker, f, debug)) for f in files]
                for f, fut in futures:
                    yield f, fut.result()
        else:
            for f in files:
                yield f, _guarded(worker, f, debug)

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
    worker: Callable[[str], dict[str, Any]], path: str, debug: bool
) -> dict[str, Any] | CompactError:
    try:
        return worker(path)
    except CompactError as exc:
        if exc.path is None:
            exc.path = path
        return exc
    except Exception as exc:  # one bad file never stops the others
        if debug:
            raise
        from .errors import InputError

        return InputError(
            f"unexpected {type(exc).__name__}: {exc} (set COMPACTCTL_DEBUG=1 for a traceback)",
            path=path,
        )


def _dump_json(doc: Any) -> None:
    sys.stdout.buffer.write(orjson.dumps(doc, option=orjson.OPT_INDENT_2) + b"\n")
    sys.stdout.flush()


def _finish(report: Report, verb: str, quiet: bool) -> None:
    if not quiet and (len(report.results) + len(report.failures)) > 1:
        _err(report.summary(verb))
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
def inspect_cmd(
    paths: Paths,
    json_out: JsonOpt = False,
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
    from .commands import InspectOptions, effective_lines, inspect_path
    from .files import write_output

    settings = _settings(config, "inspect")
    if tier is not None and tier not in {"L0", "L1", "L2"}:
        _fail_usage(f"--tier must be L0, L1 or L2, not {tier!r}")
    opts = InspectOptions(
        encoding="estimate" if estimate else settings.get("encoding", encoding, None, str),
        context_window=settings.get("context_window", context_window, None, int),
        top=top,
    )
    report = Report(check=check)
    if effective:
        files, errors = discover(paths)
        for e in errors:
            report.failed(e.path or "?", e)
            _err(f"compactctl: {e}")
        for f in files:
            try:
                write_output(STDIN, effective_lines(f, tier=tier))
                report.done({"path": f})
            except CompactError as exc:
                report.failed(f, exc)
                _err(f"compactctl: {exc}")
        raise typer.Exit(report.return_code)

    results = []
    for result in run_files(
        paths,
        functools.partial(inspect_path, options=opts),
        jobs=jobs,
        settings=settings,
        report=report,
        quiet=quiet,
        desc="inspect",
    ):
        serious = [f for f in result["findings"] if f["kind"] not in {"blank", "bom"}]
        report.done(result, changed=bool(serious))
        results.append(result)
        if not json_out:
            from .render import inspect_table

            sys.stdout.write(inspect_table(result, verbose=verbose))
            sys.stdout.flush()
    if json_out:
        from .commands import inspect_totals

        _dump_json({"files": results, "totals": inspect_totals(results, report)})
    _finish(report, "with findings", quiet)


def main() -> None:
    """Console-script entry point."""
    app()
