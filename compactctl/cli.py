"""The commands: parse, call the library, report, exit (with :mod:`compactctl.cli_shell`, the
only modules importing typer).

Every command shares the shell of docs/design.md section 4: PATHS (files, folders, ``-``),
``-o``, ``--dry-run``, ``--check``, ``--json``, ``--config``, ``--jobs``, ``-q``/``-v``. Those
options are declared once, as the fields of :class:`Shell`; a command names the ones it takes
(:func:`command`). Defaults live in the options dataclasses (:mod:`compactctl.layers.options`),
which ``--help`` quotes; values are resolved flag > environment > config file > default by
:func:`compactctl.app.options.resolve`. stdout carries data only; messages, progress and the
summary line go to stderr.
"""

import dataclasses
import functools
import os
from typing import Annotated, Any

import typer

from compactctl.cli_shell import (
    RUN,
    TRANSFORM,
    DryRunOpt,
    FormatOpt,
    JsonOpt,
    OptionalPaths,
    Paths,
    Shell,
    app,
    command,
    err,
    fail_usage,
    finish,
    run_app,
    settings_for,
    stdin_paths,
    transform,
)
from compactctl.layers.options import (
    SECTIONS_MAX_CHARS,
    TASK_STATE_MAX_CHARS,
    CompactOptions,
    DedupOptions,
    MicroParams,
    TiersOptions,
)

__all__ = ["app", "main"]
"""``app`` (the Typer application, declared in :mod:`compactctl.cli_shell` and its commands
registered here) and ``main`` (the console script)."""

# --- commands ------------------------------------------------------------------------------


@command(
    "inspect",
    (
        "compactctl inspect session.jsonl",
        "compactctl inspect --json ~/.claude/projects/ | jq '.totals'",
        "compactctl inspect --effective session.jsonl > context.jsonl",
        "compactctl inspect --store --runs --days 7 ~/sessions/",
        "cat session.jsonl | compactctl inspect --estimate -",
    ),
    shared=("fmt", "encoding", "estimate", "context_window", "json_out", *RUN),
)
def inspect_cmd(
    paths: OptionalPaths = None,
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
    runs: Annotated[
        bool, typer.Option("--runs", help="With --store: list the runs, newest first.")
    ] = False,
    effective: Annotated[
        bool,
        typer.Option("--effective", help="Print the effective context as canonical JSONL."),
    ] = False,
    tier: Annotated[
        str | None, typer.Option("--tier", help="Summary tier to replay: L0, L1 or L2.")
    ] = None,
    top: Annotated[int, typer.Option("--top", help="How many largest tool outputs to list.")] = 10,
    check: Annotated[
        bool, typer.Option("--check", help="Exit 1 if any file has validation findings.")
    ] = False,
    *,
    sh: Shell,
) -> None:
    """Count events, roles, tools, bytes and tokens; list findings with line numbers.

    Writes nothing. The table (or --json) goes to stdout.
    """
    from compactctl.app.inspect import InspectOptions, inspect_path
    from compactctl.app.options import resolve
    from compactctl.app.runner import run_effective, run_inspect

    settings = settings_for(sh.config, "inspect")
    if store or db is not None or runs:
        from compactctl.app.report import print_store_report

        where = settings.get("db", db, None, str)
        raise typer.Exit(print_store_report(where, days, sh.json_out, paths or [], runs=runs))
    paths = stdin_paths(paths, "inspect", ", or --store")
    if tier is not None and tier not in {"L0", "L1", "L2"}:
        fail_usage(f"--tier must be L0, L1 or L2, not {tier!r}")
    flags = dict(encoding=sh.encoding_flag, context_window=sh.context_window, top=top,
                 fmt=sh.fmt, tier=tier)  # fmt: skip
    opts = resolve(InspectOptions, flags, settings)  # checked with --effective too
    scope = sh.scope()
    if effective:
        raise typer.Exit(run_effective(paths, tier=tier, fmt=sh.fmt, scope=scope).return_code)
    worker = functools.partial(inspect_path, options=opts)
    page = sh.report_page()
    report = run_inspect(paths, worker, settings=settings, scope=scope, check=check)
    finish(report, "with findings", sh.quiet, rest="clean", page=page)


def main() -> None:
    """Console-script entry point: every command runs through :func:`run_app`."""
    run_app()


@command(
    "compact",
    (
        "compactctl compact --force session.jsonl",
        "compactctl compact ~/sessions/ --jobs 2",
        "compactctl compact --force --materialize -o ctx.jsonl session.jsonl",
        "compactctl compact --model openai/gpt-4o-mini --force session.jsonl",
        "compactctl compact --check ~/sessions/",
        "compactctl compact -q --older-than 2h --exclude 'archive/' -o compacted/ ~/sessions/",
        "cat s.jsonl | compactctl compact --force - > out.jsonl",
        "compactctl compact --force --as native ~/.claude/projects/-src-app/SESSION.jsonl",
        "compactctl compact --layers all session.jsonl   # rules, dedup, micro, summary, tiers",
    ),
    shared=(*TRANSFORM, "tier", "estimate", "context_window", "layers"),
)
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
        int | None,
        typer.Option(
            "--keep-recent",
            help=f"Messages kept verbatim (default {CompactOptions.keep_recent}).",
        ),
    ] = None,
    keep_recent_tokens: Annotated[
        int | None,
        typer.Option(
            "--keep-recent-tokens",
            help="The kept tail's budget in tokens (default "
            f"{CompactOptions.keep_recent_tokens}); a larger kept output is micro-compacted.",
        ),
    ] = None,
    max_summary_chars: Annotated[
        int | None,
        typer.Option(
            "--max-summary-chars",
            help=f"Summary budget in chars (default {SECTIONS_MAX_CHARS} sections, "
            f"{TASK_STATE_MAX_CHARS} task-state).",
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
        typer.Option(
            "--micro-trigger",
            help=f"Micro runs past this share of the window ({CompactOptions.micro_trigger:g}).",
        ),
    ] = None,
    summary_trigger: Annotated[
        float | None,
        typer.Option(
            "--summary-trigger",
            help="Summarize past this share of max input tokens "
            f"({CompactOptions.summary_trigger:g}).",
        ),
    ] = None,
    input_token_threshold: Annotated[
        int | None,
        typer.Option("--input-token-threshold", help="Also summarize past this many tokens."),
    ] = None,
    min_saving: Annotated[
        float | None,
        typer.Option(
            "--min-saving",
            help=f"Append nothing if the saving is below this ({CompactOptions.min_saving:g}).",
        ),
    ] = None,
    keep_turns: Annotated[
        int | None,
        typer.Option(
            "--keep-turns",
            help=f"Micro: previous turns left intact (default {MicroParams.keep_turns}).",
        ),
    ] = None,
    preserve: Annotated[
        list[str] | None,
        typer.Option(
            "--preserve",
            help="Micro: a tool whose outputs are never elided (repeatable; config key preserve).",
        ),
    ] = None,
    timeout: Annotated[
        float | None,
        typer.Option(
            "--timeout", help=f"Model request timeout, seconds ({CompactOptions.timeout:g})."
        ),
    ] = None,
    num_retries: Annotated[
        int | None,
        typer.Option(
            "--num-retries", help=f"Model retries with backoff ({CompactOptions.num_retries})."
        ),
    ] = None,
    events: Annotated[
        bool,
        typer.Option(
            "--events", help="Print compact_start/compact_done/compact_error JSON lines on stderr."
        ),
    ] = False,
    *,
    sh: Shell,
) -> None:
    """Micro-compact old tool outputs, then summarize when a trigger fires (or --force).

    Appends a CompactEvent (mode micro) and a SummaryEvent in place; a second identical run
    appends nothing. The offline extractive summarizer is the default. With --as native, a
    Claude Code or Codex session is left as it is and the compacted context is written as a
    new session of that agent, which it resumes (the report says how).
    """
    from compactctl.app.jobs import compact_path
    from compactctl.app.options import data_on_stdout, resolve
    from compactctl.app.runner import FORMATS_MODULE, REPLAY_MODULES

    s = settings_for(sh.config, "compact")
    out = sh.output_options(s, paths, sh.tier, native=True)
    micro = resolve(
        MicroParams, {"keep_turns": keep_turns, "preserve": tuple(preserve or ()) or None}, s
    )
    flags = dict(force=force, reactive=reactive, micro_only=micro_only,
                 micro_enabled=False if no_micro else None, micro=micro,
                 micro_trigger=micro_trigger, summary_trigger=summary_trigger,
                 input_token_threshold=input_token_threshold, strategy=strategy,
                 keep_recent=keep_recent, keep_recent_tokens=keep_recent_tokens,
                 format=summary_format,
                 max_summary_chars=max_summary_chars, model=model, instructions=instructions,
                 redact=False if no_redact else None, min_saving=min_saving,
                 context_window=sh.context_window, encoding=sh.encoding_flag, timeout=timeout,
                 num_retries=num_retries, emit_events=events)  # fmt: skip
    opts = resolve(CompactOptions, flags, s)
    if events and sh.json_out and data_on_stdout(out, paths):
        fail_usage("--events and --json would share stderr (stdout carries the transcript)")
    worker = functools.partial(compact_path, options=opts, out=out)
    if sh.layers is not None:  # one pass: compactctl.layers.onepass
        from compactctl.app.jobs import layers_path
        from compactctl.app.options import onepass_options

        steps = onepass_options(sh.layers, opts, s, by_rule=sh.json_out or not sh.quiet)
        worker = functools.partial(layers_path, options=steps, out=out)
    transform("compact", paths, worker, s, sh, out,
               warm=(FORMATS_MODULE, *REPLAY_MODULES), warm_encoding=opts.encoding)  # fmt: skip


@command(
    "rules",
    (
        "compactctl rules session.jsonl",
        "compactctl rules --list",
        "compactctl rules --only ansi --only whitespace logs/",
        "compactctl rules - < s.jsonl | compactctl dedup - | compactctl compact - > out.jsonl",
    ),
    shared=(*TRANSFORM, "estimate"),
)
def rules_cmd(
    paths: OptionalPaths = None,
    list_rules: Annotated[
        bool, typer.Option("--list", help="List the rules with a one-line description.")
    ] = False,
    only: Annotated[
        list[str] | None, typer.Option("--only", help="Apply only this rule (repeatable).")
    ] = None,
    skip: Annotated[
        list[str] | None, typer.Option("--skip", help="Never apply this rule (repeatable).")
    ] = None,
    *,
    sh: Shell,
) -> None:
    """Layer 1: deterministic text rules (whitespace, emoji, tables, ANSI, ...) per message.

    Rules are chosen per message: CJK text enables CJK punctuation, a table enables table
    compression, code disables bullet merging; fenced and inline code are never altered;
    tool outputs that are file contents or code get only ANSI and whitespace cleanup.
    """
    from compactctl.app.report import print_list
    from compactctl.layers.text_rules import RULES

    if list_rules:
        rows = [{"name": r.name, "version": r.version, "description": r.description,
                 "safeForCode": r.safe_for_code} for r in RULES.values()]  # fmt: skip
        print_list(
            sh.json_out, rows, {"rule": "name", "version": "version", "description": "description"}
        )
        raise typer.Exit(0)
    paths = stdin_paths(paths, "rules")
    from compactctl.app.jobs import rules_path
    from compactctl.app.options import resolve
    from compactctl.app.runner import FORMATS_MODULE
    from compactctl.layers.options import RulesOptions

    s = settings_for(sh.config, "rules")
    out = sh.output_options(s, paths, None)
    # the per-rule savings (by_rule) cost a pass per rule; only the report shows them
    flags = dict(only=tuple(only) if only else None, skip=tuple(skip or ()),
                 by_rule=sh.json_out or not sh.quiet)  # fmt: skip
    opts = resolve(RulesOptions, flags, s)
    try:
        opts.chosen()
    except KeyError as exc:
        fail_usage(str(exc.args[0]) + " (see compactctl rules --list)")
    enc = s.get("encoding", sh.encoding_flag, None, str)
    worker = functools.partial(rules_path, options=opts, out=out, encoding=enc)
    transform("rules", paths, worker, s, sh, out, warm=(FORMATS_MODULE,), warm_encoding=enc)


@command(
    "dedup",
    (
        "compactctl dedup session.jsonl",
        "compactctl dedup --threshold 0.8 --scope tool ~/sessions/",
        "compactctl rules - < s.jsonl | compactctl dedup - | compactctl compact - > out.jsonl",
    ),
    shared=(*TRANSFORM, "estimate"),
)
def dedup_cmd(
    paths: Paths,
    threshold: Annotated[
        float | None,
        typer.Option(
            "--threshold",
            help=f"Jaccard similarity of word 3-grams (default {DedupOptions.threshold}).",
        ),
    ] = None,
    scope: Annotated[
        str | None,
        typer.Option("--scope", help=f"tool, assistant or all (default {DedupOptions.scope})."),
    ] = None,
    min_chars: Annotated[
        int | None,
        typer.Option(
            "--min-chars",
            help=f"Ignore shorter messages, in chars (default {DedupOptions.min_chars}).",
        ),
    ] = None,
    *,
    sh: Shell,
) -> None:
    """Layer 2: near-duplicate tool outputs and assistant texts (newer copy kept).

    An older duplicate tool output becomes a pointer to the newer one; an older duplicate
    assistant text is dropped; user, system and pinned messages are never touched.
    """
    from compactctl.app.jobs import dedup_path
    from compactctl.app.options import resolve
    from compactctl.app.runner import FORMATS_MODULE, REPLAY_MODULES

    s = settings_for(sh.config, "dedup")
    out = sh.output_options(s, paths, None)
    flags = {"threshold": threshold, "scope": scope, "min_chars": min_chars}
    opts = resolve(DedupOptions, flags, s)
    enc = s.get("encoding", sh.encoding_flag, None, str)
    worker = functools.partial(dedup_path, options=opts, out=out, encoding=enc)
    # not numpy, which similarity imports only above about 128 KB of candidate text:
    # only what every run needs is imported ahead (CPU spent anyway, just earlier)
    warm = (FORMATS_MODULE, *REPLAY_MODULES[:2], "compactctl.layers.similarity")
    transform("dedup", paths, worker, s, sh, out, warm=warm, warm_encoding=enc)


@command(
    "convert",
    (
        "compactctl convert ~/.claude/projects/-home-me-app/SESSION.jsonl -o session.jsonl",
        "compactctl convert rollout.jsonl | compactctl compact --force - > out.jsonl",
        "compactctl convert --jobs 2 -o canonical/ ~/.codex/sessions/",
        "compactctl convert --check sessions/    # exit 1 if any file is not canonical",
        "compactctl convert --list-formats",
    ),
    shared=RUN[:-1],
)
def convert_cmd(
    paths: OptionalPaths = None,
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
    *,
    sh: Shell,
) -> None:
    """Write the canonical compactctl JSONL form of any transcript compactctl reads.

    The source is never changed. Ids, timestamps and line numbers (sourceLine) are kept so
    a message can be found back in the original. Many files need -o DIR/ (one output
    per input) and run in parallel (--jobs).
    """
    from compactctl.app.report import print_list
    from compactctl.formats import FORMATS

    if list_formats:
        rows = [{"name": f.name, "description": f.description} for f in FORMATS.values()]
        print_list(json_out, rows, {"format": "name", "description": "description"})
        raise typer.Exit(0)
    paths = stdin_paths(paths, "convert")
    from compactctl.app.jobs import convert_path
    from compactctl.app.report import convert_line

    s = settings_for(sh.config, "convert")
    to_dir = output is not None and (output.endswith(("/", os.sep)) or os.path.isdir(output))
    sh = dataclasses.replace(sh, output=output, fmt=fmt, dry_run=dry_run, check=check,
                             json_out=json_out, no_store=True)  # fmt: skip
    several = len(sh.inputs(s, paths).files) > 1
    # --dry-run reports what the real run would do, so it refuses what that run refuses;
    # --check only asks whether any input is foreign (a CI gate) and needs no output
    if several and not (check or to_dir):
        fail_usage(
            f"convert writes one transcript per output, and {output or 'stdout'} would "
            "receive several; give a folder (-o DIR/) to write one file per input"
        )
    out = sh.output_options(s, paths, None)
    line = functools.partial(
        convert_line, dry_run=dry_run, check=check, gate=check and several and not to_dir
    )
    transform("convert", paths, functools.partial(convert_path, out=out), s, sh, out, line=line)


@command(
    "tiers",
    (
        "compactctl compact --force s.jsonl && compactctl tiers s.jsonl",
        "compactctl tiers --tier L1 ~/sessions/",
        "compactctl tiers --tier L0 --materialize -o ctx.jsonl s.jsonl",
    ),
    shared=(*TRANSFORM, "context_window"),
)
def tiers_cmd(
    paths: Paths,
    tier: Annotated[
        str,
        typer.Option("--tier", help="auto (a tier only when the context needs it), L0, L1, L2."),
    ] = TiersOptions.tier,
    model: Annotated[
        str | None,
        typer.Option("--model", help="Let this litellm model rewrite L1 and L0 (validated)."),
    ] = None,
    *,
    sh: Shell,
) -> None:
    """Layer 4: L0/L1/L2 summaries (about 200/1000/3000 tokens) from the newest summary.

    Recorded on a new SummaryEvent that supersedes the previous one; replay swaps in a
    tier only when the whole summary is over 10% of the room left in the window (or with
    --tier). Running it twice appends nothing. Tiers are also saved in the SQLite store.
    """
    from compactctl.app.jobs import tiers_path
    from compactctl.app.options import resolve

    if tier not in {"auto", "L0", "L1", "L2"}:
        fail_usage(f"--tier must be auto, L0, L1 or L2, not {tier!r}")
    s = settings_for(sh.config, "tiers")
    out = sh.output_options(s, paths, None if tier == "auto" else tier)
    enc = s.get("encoding", sh.encoding, None, str)
    window = s.get("context_window", sh.context_window, None, int)
    opts = resolve(TiersOptions, {"tier": tier, "model": model}, s)
    worker = functools.partial(
        tiers_path,
        out=out,
        tier=opts.tier,
        encoding=enc,
        context_window=window,
        model=opts.model,
        redact=opts.redact,
    )
    transform("tiers", paths, worker, s, sh, out)


@command(
    "undo",
    (
        "compactctl undo session.jsonl                 # take back the newest compaction run",
        "compactctl undo --event 7d0c2f3e-... session.jsonl",
        "compactctl undo --dry-run --json session.jsonl",
    ),
    shared=(*TRANSFORM, "estimate"),
)
def undo_cmd(
    paths: Paths,
    event: Annotated[
        str | None,
        typer.Option("--event", metavar="ID", help="Take back this compact or summary event."),
    ] = None,
    *,
    sh: Shell,
) -> None:
    """Take back the newest compaction run (or --event ID) by appending a revert event.

    Replay then skips the compact and summary events it names: the effective context is
    the one before them. Nothing in the file changes; running it twice takes back one run
    once. A later compact compacts again.
    """
    from compactctl.app.jobs import undo_path
    from compactctl.layers.options import UndoOptions

    s = settings_for(sh.config, "undo")
    if event is not None and len(sh.inputs(s, paths).files) > 1:
        fail_usage("--event names an event of one transcript; give one file")
    out = sh.output_options(s, paths, None)
    enc = s.get("encoding", sh.encoding_flag, None, str)
    worker = functools.partial(undo_path, options=UndoOptions(event=event), out=out, encoding=enc)
    transform("undo", paths, worker, s, sh, out)


_AGAINST_HELP = (
    "Take the original messages from ORIGINAL (a file, - once, or the folder -o DIR/ read, "
    "each PATH paired as -o DIR/ named it): for a file written with -o --materialize."
)
_MIN_RETENTION_HELP = "Exit 1 if a file keeps less than X (0-1) of its probes: a CI gate."
_MIN_HELP = "Exit 1 if a file keeps less than X of the probes of KIND (repeatable; error=1)."
_COMPARE_HELP = (
    "Also plan compact --force with these settings, in memory, and show tokens left vs "
    "retention (repeatable; KEY=VALUE,... or default)."
)
_JUDGE_HELP = "A litellm model grades answers to probe questions 0-5 (8 calls per file)."


@command(
    "eval",
    (
        "compactctl eval session.jsonl",
        "compactctl eval --json ~/sessions/ | jq '.totals.probes.retention'",
        "compactctl eval --min-retention 0.9 --min error=1 sessions/",
        "compactctl eval --against s.jsonl ctx.jsonl   # ctx: -o --materialize",
        "compactctl eval --compare default s.jsonl",
        "compactctl eval --compare strategy=full_replace,budget=4000 s.jsonl",
        "compactctl eval --judge openai/gpt-4o-mini s.jsonl",
        "cat s.jsonl | compactctl eval --estimate -",
    ),
    shared=("fmt", "encoding", "estimate", "context_window", "json_out", *RUN),
)
def eval_cmd(
    paths: Paths,
    against: Annotated[
        str | None, typer.Option("--against", metavar="ORIGINAL", help=_AGAINST_HELP)
    ] = None,
    min_retention: Annotated[
        float | None, typer.Option("--min-retention", metavar="X", help=_MIN_RETENTION_HELP)
    ] = None,
    minimum: Annotated[
        list[str] | None, typer.Option("--min", metavar="KIND=X", help=_MIN_HELP)
    ] = None,
    compare: Annotated[
        list[str] | None, typer.Option("--compare", metavar="CONFIG", help=_COMPARE_HELP)
    ] = None,
    judge: Annotated[str | None, typer.Option("--judge", metavar="MODEL", help=_JUDGE_HELP)] = None,
    answer_model: Annotated[
        str | None, typer.Option("--answer-model", help="With --judge: the model that answers.")
    ] = None,
    no_redact: Annotated[
        bool, typer.Option("--no-redact", help="With --judge: do not redact what is sent.")
    ] = False,
    *,
    sh: Shell,
) -> None:
    """Measure what a compaction kept: probes from the original messages in the effective context.

    Probes: file paths, commands, error lines, identifiers, user constraints, decisions,
    pending tasks, the first and latest request, each with its line. Writes nothing. The
    table (or --json) goes to stdout; exit 1 when a file is below a --min gate.
    """
    from compactctl.app.options import resolve
    from compactctl.evaluate import job

    s = settings_for(sh.config, "eval")
    minimums = job.check_gates(min_retention, minimum or [])
    configs: tuple[Any, ...] = ()
    if compare:
        from compactctl.evaluate.compare import parse_configs

        configs = parse_configs(compare)
    judged = None
    if judge is not None:
        from compactctl.evaluate.judge import JudgeOptions

        judged = JudgeOptions(judge, answer_model=answer_model, redact=not no_redact)
    flags = dict(encoding=sh.encoding_flag, context_window=sh.context_window, fmt=sh.fmt,
                 against=against, min_retention=min_retention, minimums=minimums,
                 roots=job.check_against(against, sh.inputs(s, paths)) if against else None,
                 judge=judged, compare=configs)  # fmt: skip
    opts = resolve(job.EvalOptions, flags, s)
    page = sh.report_page()
    report = job.run_eval(paths, functools.partial(job.eval_path, options=opts), settings=s,
                      scope=sh.scope(paths))  # fmt: skip
    gated = min_retention is not None or bool(minimum)
    finish(report, "below the minimum", sh.quiet or not gated, rest="passed", page=page)


@command(
    "serve",
    (
        "compactctl serve --root ~/sessions",
        "compactctl serve --root ~/.claude/projects --port 8080",
        "COMPACTCTL_TOKEN=s3cret compactctl serve --root /srv/sessions --host 0.0.0.0",
        'curl --json \'{"cwd": "/work/app"}\' localhost:8080/api/sessions/ID/compact',
    ),
    shared=("config", "db", "no_store"),
)
def serve_cmd(
    root: Annotated[
        str, typer.Option("--root", metavar="DIR", help="The folder the sessions are under.")
    ],
    host: Annotated[
        str,
        typer.Option(
            "--host", help="Address to listen on (another than 127.0.0.1 needs a token)."
        ),  # fmt: skip
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="Port (0: a free one, printed).")] = 8080,
    token: Annotated[
        str | None,
        typer.Option(
            "--token",
            envvar="COMPACTCTL_TOKEN",
            help="Bearer token the /api routes need (also COMPACTCTL_TOKEN).",
        ),
    ] = None,
    *,
    sh: Shell,
) -> None:
    """Compact on request over HTTP, as Coding Code's context service offers it.

    Routes: POST /api/sessions/{id}/compact (body {cwd?, force?, model?, strategy?}), GET
    /api/sessions/{id} (inspect), GET /api/sessions, GET /healthz; OpenAPI docs at /docs.
    Needs the serve extra: pip install 'compactctl[serve]'.
    """
    import importlib.util

    missing = [m for m in ("fastapi", "uvicorn") if importlib.util.find_spec(m) is None]
    if missing:
        fail_usage(f"serve needs {' and '.join(missing)}: pip install 'compactctl[serve]'")
    from compactctl.app.serve import ServeConfig, serve

    config = ServeConfig(
        root, token=token or None, config=sh.config, db="" if sh.no_store else sh.db
    )
    serve(config, host, port, announce=err)
