"""The shell every command shares, declared once: the Typer app, the shared options (the
fields of :class:`Shell`), the command decorator (:func:`command`), and how a run ends
(messages on stderr, the exit code).

A command in :mod:`compactctl.cli` names the :class:`Shell` fields it takes; defaults live
in the options dataclasses (:mod:`compactctl.layers.options`), which ``--help`` quotes;
values are resolved flag > environment > config file > default by
:func:`compactctl.app.options.resolve`. stdout carries data only.
"""

import dataclasses
import functools
import inspect
import os
import stat
import sys
import typing
import warnings
from collections.abc import Callable
from typing import Annotated, Any

import typer

from compactctl import __version__
from compactctl.app.config import Settings, load_config
from compactctl.app.report import Report
from compactctl.app.terminal import say
from compactctl.errors import EXIT_USAGE, CompactError, CompactWarning, Stopped, UsageError
from compactctl.io.files import TORN_WAIT
from compactctl.io.locking import DEFAULT_LOCK_TIMEOUT

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
    add_completion=True,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        sys.stdout.write(f"compactctl {__version__}\n")
        raise typer.Exit(0)


@app.callback()
def main_callback(
    version: Annotated[
        bool,
        typer.Option(
            "--version", "-V", callback=_version, is_eager=True, help="Print the version."
        ),
    ] = False,
) -> None:
    """Compact the session transcripts of LLM agents."""


PATHS_HELP = "Transcript files, folders (searched for *.jsonl, *.jsonl.gz), or - for stdin."


Paths = Annotated[
    list[str], typer.Argument(metavar="PATHS...", help=PATHS_HELP, show_default=False)
]

OptionalPaths = Annotated[
    list[str] | None, typer.Argument(metavar="PATHS...", help=PATHS_HELP, show_default=False)
]
"""PATHS of a command that also runs without them (``rules --list``, ``inspect --store``)."""


JsonOpt = Annotated[bool, typer.Option("--json", help="Print a machine report (JSON).")]


FormatOpt = Annotated[
    str | None,
    typer.Option(
        "--format",
        help="Input format (default: detected): canonical, claude-code, claude-stream, "
        "codex-rollout, codex-exec, openai-chat, anthropic-messages, gemini-cli, qwen-code, "
        "cursor-agent, copilot-cli, droid, kimi-cli, opencode, aider, openhands, swe-agent.",
    ),
]


DryRunOpt = Annotated[
    bool, typer.Option("--dry-run", help="Report what would happen; write nothing.")
]


def _at_least_one(flag: str, value: int | None) -> int | None:
    """``value`` when it is ``None`` or 1 or more, else the usage error (exit 2)."""
    if value is not None and value < 1:
        raise typer.BadParameter(f"{value} is not 1 or more", param_hint=f"'{flag}'")
    return value


WindowOpt = Annotated[
    int | None,
    typer.Option(
        "--context-window",
        callback=lambda v: _at_least_one("--context-window", v),
        help="Context window in tokens (overrides the log).",
    ),
]


_SINCE = (
    "Only files modified at or after WHEN: a date (2026-01-31), a date and time "
    "(2026-01-31T08:30, local unless Z or +HH:MM), or a duration ago (7d)."
)
_UNTIL = "Only files modified before WHEN (as --since; the file's mtime)."
_OLDER = "Only files not modified for DURATION (30m, 2h, 1d): leaves live sessions alone."
_GLOB = (
    "Only files matching this gitignore-style pattern, relative to the folder given (repeatable)."
)
_EXCLUDE = "Leave out files matching this gitignore-style pattern (repeatable; archive/, *.gz)."


@dataclasses.dataclass(frozen=True)
class Shell:
    """The options several commands share, each declared once: a field is an option (its
    ``Annotated`` type is the Typer declaration) and its default is the option's.

    A command registered by :func:`command` takes the fields it names, in this order, after
    its own options, and receives them as one ``Shell`` (the others keep their defaults).
    """

    output: Annotated[
        str | None,
        typer.Option(
            "--output",
            "-o",
            help="Write the result here (a file, - for stdout, or DIR/: the input tree "
            "mirrored, up-to-date outputs left as they are) instead of appending in place. "
            "Needed for foreign formats.",
        ),
    ] = None
    materialize: Annotated[
        bool,
        typer.Option(
            "--materialize", help="Write the effective context (the reduced transcript) instead."
        ),
    ] = False
    as_format: Annotated[
        str,
        typer.Option(
            "--as",
            help="With --materialize: canonical or openai (Chat Completions). compact "
            "also takes native: a new session its agent resumes.",
        ),
    ] = "canonical"
    tier: Annotated[
        str | None, typer.Option("--tier", help="With --materialize: summary tier L0/L1/L2.")
    ] = None
    fmt: FormatOpt = None
    encoding: Annotated[
        str | None, typer.Option("--encoding", help="tiktoken encoding (default: by the model).")
    ] = None
    estimate: Annotated[
        bool, typer.Option("--estimate", help="Count tokens with the chars-based estimate.")
    ] = False
    context_window: WindowOpt = None
    dry_run: DryRunOpt = False
    check: Annotated[
        bool, typer.Option("--check", help="Write nothing; exit 1 if any input would change.")
    ] = False
    json_out: JsonOpt = False
    db: Annotated[
        str | None,
        typer.Option("--db", help="SQLite store (default: $COMPACTCTL_DB or the XDG state dir)."),
    ] = None
    no_store: Annotated[bool, typer.Option("--no-store", help="Do not use the SQLite store.")] = (
        False
    )
    lock_timeout: Annotated[
        float | None,
        typer.Option(
            "--lock-timeout",
            help=f"Seconds to wait for a transcript's lock (default {DEFAULT_LOCK_TIMEOUT:g}).",
        ),
    ] = None
    torn_wait: Annotated[
        float | None,
        typer.Option(
            "--torn-wait",
            help="Seconds a last line without a newline must be unchanged before it counts "
            f"as torn by a crashed writer (default {TORN_WAIT:g}; 0: now). Younger, it may be "
            "an agent's line still being written: waited for, up to --lock-timeout.",
        ),
    ] = None
    config: Annotated[
        str | None,
        typer.Option(
            "--config", help="TOML config file (default: ~/.config/compactctl/config.toml)."
        ),
    ] = None
    jobs: Annotated[
        int | None,
        typer.Option(
            "--jobs", "-j", help="Files processed in parallel (default: number of cores)."
        ),
    ] = None
    dask: Annotated[
        str | None,
        typer.Option(
            "--dask",
            metavar="ADDRESS",
            help="Run the files on a Dask cluster (tcp://host:8786, or local); needs the "
            "dask extra.",
        ),
    ] = None
    documents: Annotated[
        bool,
        typer.Option(
            "--documents",
            help="In folders, also take the .json, .traj and Aider .md transcripts a reader "
            "recognises (never other JSON).",
        ),
    ] = False
    layers: Annotated[
        str | None,
        typer.Option(
            "--layers",
            metavar="LIST",
            help="Run these layers in one pass over one read of each file and append their "
            "events as one batch: rules,dedup,micro,summary,tiers (in that order) or all.",
        ),
    ] = None
    since: Annotated[str | None, typer.Option("--since", metavar="WHEN", help=_SINCE)] = None
    until: Annotated[str | None, typer.Option("--until", metavar="WHEN", help=_UNTIL)] = None
    older_than: Annotated[
        str | None, typer.Option("--older-than", metavar="DURATION", help=_OLDER)
    ] = None
    glob: Annotated[list[str] | None, typer.Option("--glob", metavar="PATTERN", help=_GLOB)] = None
    exclude: Annotated[
        list[str] | None, typer.Option("--exclude", metavar="PATTERN", help=_EXCLUDE)
    ] = None
    report: Annotated[
        str | None,
        typer.Option(
            "--report",
            metavar="PATH",
            help="Also write a report for people: .md (a job summary, a PR comment; e.g. "
            "$GITHUB_STEP_SUMMARY) or .html (a page with a chart), by the extension.",
        ),
    ] = None
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Only errors on stderr.")] = False
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="More detail on stderr.")] = False
    _walks: dict[tuple[str, ...], Any] = dataclasses.field(
        default_factory=dict, init=False, repr=False, compare=False
    )
    """PATHS as :meth:`inputs` walked them (not an option): one walk per command, shared by
    its checks and its run; a :func:`dataclasses.replace` copy walks afresh."""

    def report_page(self) -> str | None:
        """``--report PATH``, checked before any file is read or written
        (:func:`~compactctl.app.report_render.check_page`), so its exit 2 means nothing
        was done.

        Raises:
            UsageError: its extension is not one :mod:`compactctl.app.report_render` writes,
                or it cannot be written there (no such folder, a folder, not writable).
        """
        if self.report is None:
            return None
        from compactctl.app.report_render import check_page

        check_page(self.report)
        return self.report

    @property
    def encoding_flag(self) -> str | None:
        """``--estimate`` as the encoding ``"estimate"``, else ``--encoding``."""
        return "estimate" if self.estimate else self.encoding

    def scope(self, paths: list[str] | None = None) -> Any:
        """The run's :class:`~compactctl.app.runner.RunScope`: ``--jobs``, ``--dask``,
        ``--documents``, ``-q``, ``-v``, ``--json``, the filters, and rows kept for
        ``--report``; with ``paths``, the walk :meth:`inputs` made of them (if it did),
        which the run takes instead of walking again.

        Raises:
            UsageError: a filter value that does not parse.
        """
        from compactctl.app.runner import RunScope
        from compactctl.io.filters import FileFilter, parse_duration, parse_when

        filters = FileFilter(
            since=None if self.since is None else parse_when(self.since, "--since"),
            until=None if self.until is None else parse_when(self.until, "--until"),
            older_than=None if self.older_than is None else parse_duration(self.older_than),
            globs=tuple(self.glob or ()),
            excludes=tuple(self.exclude or ()),
        )
        return RunScope(jobs=self.jobs, dask=self.dask, documents=self.documents or None,
                        quiet=self.quiet, verbose=self.verbose, json_out=self.json_out,
                        filters=filters, keep_rows=self.report is not None,
                        found=None if paths is None else self._walks.get(tuple(paths)))  # fmt: skip

    def inputs(self, s: Settings, paths: list[str]) -> Any:
        """The transcripts the run takes from ``paths`` (a :class:`~compactctl.io.files.Walk`),
        walked once for the command (:func:`compactctl.app.options.walk_inputs`: with
        ``--documents`` or its setting in ``s``, the filters, never into ``-o DIR/``): the
        one-input checks (``convert`` to stdout, ``undo --event``, ``-o FILE``) and the run
        (:meth:`scope`) take the same walk.

        Raises:
            UsageError: a filter value that does not parse; a time filter with a URL.
        """
        from compactctl.app.options import walk_inputs

        key = tuple(paths)
        if key not in self._walks:
            flags = dict(output=self.output, documents=self.documents or None,
                         filters=self.scope().filters)  # fmt: skip
            self._walks[key] = walk_inputs(s, paths, flags)
        return self._walks[key]

    def output_options(
        self, s: Settings, paths: list[str], tier: str | None, *, native: bool = False
    ) -> Any:
        """The run's :class:`~compactctl.app.jobs.OutputOptions` (``tier``: the command's;
        ``native``: the command takes ``--as native``), checked against PATHS
        (:func:`compactctl.app.options.output_options`; with ``-o``, against
        :meth:`inputs`). ``--report`` is checked first (:meth:`report_page`): a page that
        cannot be written stops the run before ``-o DIR/`` is created.

        Raises:
            UsageError: as :func:`compactctl.app.options.output_options` and
                :meth:`report_page`.
        """
        from compactctl.app.options import output_options

        self.report_page()
        flags = dict(output=self.output, materialize=self.materialize, as_format=self.as_format,
                     dry_run=self.dry_run, check=self.check, lock_timeout=self.lock_timeout,
                     torn_wait=self.torn_wait, tier=tier, fmt=self.fmt,
                     documents=self.documents or None, filters=self.scope().filters,
                     db="" if self.no_store else self.db, native_ok=native)  # fmt: skip
        found = None if self.output is None else self.inputs(s, paths)
        return output_options(s, paths, flags, found)


FILTERS = ("since", "until", "older_than", "glob", "exclude")
"""The :class:`Shell` fields that choose files (:class:`~compactctl.io.filters.FileFilter`)."""

RUN = ("config", "jobs", "dask", "documents", *FILTERS, "report", "quiet", "verbose")
"""The :class:`Shell` fields every command takes (convert all but ``verbose``)."""


TRANSFORM = ("output", "materialize", "as_format", "fmt", "encoding", "dry_run", "check",
             "json_out", "db", "no_store", "lock_timeout", "torn_wait", *RUN)  # fmt: skip
"""The shell of every transcript-changing command; each adds the few more it takes."""


def command(
    name: str, examples: tuple[str, ...], shared: tuple[str, ...] = ()
) -> Callable[..., Any]:
    """Register ``f`` as the command ``name``, with the :class:`Shell` fields ``shared``.

    ``f`` declares its own options and, when ``shared`` is not empty, a last parameter
    ``sh: Shell``. The command ends quietly with 141 when the reader closes stdout (``|
    head``), and a :class:`~compactctl.errors.UsageError` from resolving options or from
    the run's checks becomes ``compactctl: error: ...`` and exit code 2. A
    :class:`~compactctl.errors.CompactWarning` raised while it runs is printed once as
    ``compactctl: warning: ...`` (in ``--jobs`` workers too, which inherit the hook).
    """
    hints = typing.get_type_hints(Shell, include_extras=True)
    fields = [f for f in dataclasses.fields(Shell) if f.name in shared]
    extra = [
        inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=f.default,
                          annotation=hints[f.name])
        for f in fields
    ]  # fmt: skip

    def register(f: Callable[..., None]) -> Callable[..., None]:
        own = [p for p in inspect.signature(f).parameters.values() if p.name != "sh"]
        # PATHS the command needs may be left out when stdin is piped (read as -)
        needs = [p.name for p in own if p.name == "paths" and p.default is p.empty]
        own = [p.replace(default=None) if p.name in needs else p for p in own]

        @functools.wraps(f)
        def run(**kwargs: Any) -> None:
            if needs:
                kwargs["paths"] = stdin_paths(kwargs["paths"], name)
            if fields:
                kwargs["sh"] = Shell(**{x.name: kwargs.pop(x.name) for x in fields})
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("default", CompactWarning)
                    warnings.showwarning = functools.partial(show_warning, said=set())
                    f(**kwargs)
            except BrokenPipeError:
                quiet_stdout()
                raise typer.Exit(EXIT_PIPE) from None
            except UsageError as exc:
                fail_usage(str(exc))

        run.__signature__ = inspect.Signature([*own, *extra])  # type: ignore[attr-defined]
        app.command(name, epilog="Examples:\n\n" + "\n\n".join(f"  {e}" for e in examples))(run)
        return run

    return register


def run_app() -> None:
    """Run the command line and exit with its code.

    Click's own errors (a bad option) are printed as compactctl's (:func:`click_error`); a
    library error that escapes a command (a bad setting found late) becomes its message and
    exit code, never a traceback; a closed stdout (``| head``) ends the run quietly with 141,
    the code of a process killed by SIGPIPE, as other filters do.
    """
    try:
        code = app(standalone_mode=False)
    except typer.TyperException as exc:  # Click's, in compactctl's style
        code = click_error(exc)
    except typer.Abort:
        err("Aborted!")
        code = 1
    except CompactError as exc:
        if os.environ.get("COMPACTCTL_DEBUG"):
            raise
        err(f"compactctl: error: {exc}")
        code = exc.exit_code
    except BrokenPipeError:
        quiet_stdout()
        code = EXIT_PIPE
    except Stopped as exc:  # SIGTERM (Ctrl-C: typer exits 130 itself)
        code = _stopped(exc)
    sys.exit(code if isinstance(code, int) else 0)


def _stopped(exc: Stopped) -> int:
    """A run stopped by SIGTERM (:class:`~compactctl.errors.Stopped`): what it means for the
    files, on stderr; the exit code, 128 + the signal's number."""
    err(
        "compactctl: stopped by SIGTERM: the files reported above are done; a file in "
        "progress was left as it was or with all of its new records, never part of one; "
        "run the command again to finish the rest"
    )
    return exc.exit_code


def stdin_paths(paths: list[str] | None, name: str, also: str = "") -> list[str]:
    """PATHS as given, else ``["-"]`` when standard input is piped or redirected from a file
    (``cat f | compactctl inspect``); with neither (a terminal, ``/dev/null``, no stdin), the
    usage error ``missing PATHS`` (exit 2; ``also``: what else the command takes instead)."""
    if paths:
        return paths
    try:
        mode = os.fstat(sys.stdin.fileno()).st_mode
    except (AttributeError, OSError, ValueError):  # no usable stdin
        mode = 0
    if stat.S_ISFIFO(mode) or stat.S_ISREG(mode):
        return ["-"]
    fail_usage(
        f"missing PATHS (files, folders, or - for stdin){also}; see compactctl {name} --help"
    )
    raise AssertionError  # unreachable: fail_usage exits


def click_error(exc: Exception) -> int:
    """Print an error Click found in the command line (an unknown option or command, a
    missing or invalid value) as compactctl prints its own: ``compactctl: error: MESSAGE;
    see compactctl CMD --help``; returns its exit code (2). ``compactctl`` alone still prints
    the help."""
    ctx = getattr(exc, "ctx", None)
    code = int(getattr(exc, "exit_code", EXIT_USAGE))
    if type(exc).__name__ == "NoArgsIsHelpError":  # the message is the help text
        err(str(getattr(exc, "format_message", lambda: exc)()))
        return code
    text = str(getattr(exc, "format_message", lambda: exc)()).rstrip(".")
    hint = ""
    if ctx is not None:
        where = "compactctl" if ctx.parent is None else f"compactctl {ctx.info_name}"
        hint = f"; see {where} --help"
    err(f"compactctl: error: {text[:1].lower()}{text[1:]}{hint}")
    return code


def err(message: str) -> None:
    """One line on stderr (above the progress bar when one is shown)."""
    say(message)


_show_default = warnings.showwarning


def show_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: Any = None,
    line: str | None = None,
    *,
    said: set[str] | None = None,
) -> None:
    """``warnings.showwarning`` while a command runs: a :class:`CompactWarning` as
    ``compactctl: warning: MESSAGE`` on stderr (one with a ``once`` key already in ``said``,
    the keys said in this run, is not said again), any other warning as Python prints it."""
    if issubclass(category, CompactWarning):
        once = getattr(message, "once", None)
        if once is not None and said is not None:
            if once in said:
                return
            said.add(once)
        from compactctl.app.report import message as report_message

        report_message(f"compactctl: warning: {message}")
    else:
        _show_default(message, category, filename, lineno, file, line)


def fail_usage(message: str) -> None:
    err(f"compactctl: error: {message}")
    raise typer.Exit(EXIT_USAGE)


def settings_for(config: str | None, command: str) -> Settings:
    from compactctl.app.config import unknown_keys

    try:
        table, used = load_config(config)
    except CompactError as exc:
        fail_usage(str(exc))
        raise  # unreachable
    for key in unknown_keys(table):
        err(
            f"compactctl: warning: {used}: unknown config key {key} (ignored; keys are the "
            "long option names with _, see --help)"
        )
    return Settings(table, command, source=used)


def transform(command: str, paths: list[str], worker: Callable[[str], dict[str, Any]],
               s: Settings, sh: Shell, out: Any, **kwargs: Any) -> None:  # fmt: skip
    """Run a transcript-changing command over PATHS, print its summary, exit with its code."""
    from compactctl.app.report import SUMMARY_VERBS
    from compactctl.app.runner import run_transform

    page = sh.report_page()
    report = run_transform(paths, worker, command=command, settings=s, out=out,
                           scope=sh.scope(paths), **kwargs)  # fmt: skip
    verb = SUMMARY_VERBS[command]
    finish(report, f"would be {verb}" if out.dry_run or out.check else verb, sh.quiet,
           page=page)  # fmt: skip


def finish(
    report: Report, verb: str, quiet: bool, rest: str = "unchanged", page: str | None = None
) -> None:
    """End a run over PATHS: write the ``--report`` ``page`` (if any), print the closing
    line on stderr (unless ``quiet``, a single file, or the ``--json`` document is on
    stderr), exit with the report's code."""
    if page is not None:
        from compactctl.app.report_render import write_page

        write_page(page, report, verb, rest)
    on_stderr = report.doc is not None and report.doc.to_stderr
    if (
        not quiet
        and not on_stderr
        and (report.processed + len(report.failures) + len(report.skips)) > 1
    ):
        err(report.summary(verb, rest))
    raise typer.Exit(report.return_code)


def quiet_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush cannot fail again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
