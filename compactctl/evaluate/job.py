"""``eval`` per file and over many files: what ``cli.py`` calls.

:func:`evaluate_session` is the library entry: probes from the original messages
(:func:`~compactctl.evaluate.probes.extract_probes`), checked against the effective context
(:class:`~compactctl.evaluate.check.Context`), tokens before and after, then the optional
judge and compare runs and the gates. :func:`eval_path` opens one transcript (a path or
``-``; any format :class:`~compactctl.session.Session` reads) and is top-level so that
``--jobs`` can run it in a process pool; :func:`run_eval` runs it over PATHS and writes the
tables or the ``--json`` document. Nothing is ever written to a transcript.

Cost, one session at a time: the file read once into events (the session's memory, as every
layer; :func:`~compactctl.evaluate.lines.open_session`), one replay, one pass of extraction
over the messages, one substring search per probe (in its source message when the effective
context still holds it; else in the context's text and its normalised copy, each built once,
on first need), and the tokens of each distinct message text counted once (the counts of the
messages replay keeps are reused for the effective context, as ``inspect`` does); the
cyclic garbage collector is paused while a file is read and checked
(:func:`~compactctl.model.acyclic`).
Measured against ``inspect`` by ``make bench`` (the ``eval`` rows; ``bench/run.py --only
eval``).
"""

from __future__ import annotations

import operator
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from compactctl.app.report import Report
from compactctl.errors import EXIT_INPUT, EXIT_LOCKED, EXIT_USAGE, InputError
from compactctl.evaluate.check import Context
from compactctl.evaluate.lines import open_session
from compactctl.evaluate.probes import extract_probes
from compactctl.evaluate.report import (
    EvalTotals,
    FileEval,
    eval_table,
    gate_failures,
)
from compactctl.io.files import STDIN
from compactctl.model import Message, acyclic
from compactctl.replay import View
from compactctl.session import Session
from compactctl.tokens import TokenCounter, message_payload, message_tokens, messages_tokens

__all__ = [
    "EvalOptions",
    "check_gates",
    "eval_path",
    "evaluate_session",
    "original_for",
    "prompt_sizes",
    "run_eval",
]


@dataclass(frozen=True)
class EvalOptions:
    """Options of ``eval`` (retentions are shares 0..1).

    Attributes:
        encoding: tiktoken encoding (``None``: by the session's model; ``"estimate"``: the
            chars-based estimate), as ``inspect --encoding`` / ``--estimate``.
        context_window: the ``--context-window`` override in tokens (for ``--compare``'s
            compactions).
        fmt: the input format (``None``: detected).
        against: ``--against ORIGINAL``: take the probes and the tokens before from this
            transcript (a file, or a folder holding one file per input by name, as ``-o
            DIR/`` wrote them), and check them against each PATH's effective context.
        min_retention: ``--min-retention``: a file below this overall retention fails the
            gate (exit 1).
        minimums: ``--min KIND=X``: per-kind gates, ``((kind, X), ...)``.
        judge: ``--judge``: a :class:`~compactctl.evaluate.judge.JudgeOptions`, or ``None``.
        compare: ``--compare`` configurations (:func:`compactctl.evaluate.compare.
            parse_configs`); empty: no comparison.
    """

    encoding: str | None = None
    context_window: int | None = None
    fmt: str | None = None
    against: str | None = None
    min_retention: float | None = None
    minimums: tuple[tuple[str, float], ...] = ()
    judge: Any = None
    compare: tuple[Any, ...] = field(default=())


def prompt_sizes(
    originals: Sequence[Message], view: View, counter: TokenCounter
) -> tuple[int, int]:
    """``(tokens before, tokens after)``: the prompt estimates, in tokens, of the original
    messages and of the effective context (:func:`compactctl.tokens.prompt_tokens`'s
    scheme: payload tokens plus a per-message overhead plus the reply priming).

    Each original message is counted once; a message of ``view`` that is one of
    ``originals`` (replay keeps unchanged messages as the same objects) reuses its count,
    so only summaries and reduced messages are counted again.
    """
    from compactctl.tokens import prompt_total

    counts = _payload_counts(originals, counter)
    before = prompt_total(sum(counts), len(counts))
    if len(view) == len(originals) and all(map(operator.is_, view, originals)):
        return before, before  # nothing replaced or reduced: the same messages
    known = {id(m): n for m, n in zip(originals, counts, strict=True)}
    fresh = [m for m in view if id(m) not in known]
    fresh_counts = messages_tokens([m.data for m in fresh], counter)
    known.update((id(m), n) for m, n in zip(fresh, fresh_counts, strict=True))
    after = sum(known[id(m)] for m in view)
    return before, prompt_total(after, len(view))


def _payload_counts(messages: Sequence[Message], counter: TokenCounter) -> list[int]:
    """The tokens of each message's :func:`~compactctl.tokens.message_payload`, in order,
    counted one message at a time as ``inspect``'s inner loop counts them: with the chars
    estimate, a plain ASCII text inline (``(chars + 3) // 4``,
    :func:`~compactctl.tokens.estimate_tokens`); with tiktoken, by
    :meth:`~compactctl.tokens.TokenCounter.count` on the calling thread (each distinct text
    encoded once; the counts of :meth:`~compactctl.tokens.TokenCounter.count_many`, without
    its threads: with ``--jobs 2`` on two cores they only add the cost of switching, +25% of
    CPU measured on 30 MB of the ``make bench`` corpus)."""
    count = counter.count
    estimate = counter.is_estimate
    out = []
    for m in messages:
        data = m.data
        text = data.get("content")
        if text.__class__ is not str:  # parts: images and documents count too
            out.append(message_tokens(data, counter))
            continue
        if data.get("toolCalls") is not None:
            text = message_payload(data)
        out.append((len(text) + 3) // 4 if estimate and text.isascii() else count(text))
    return out


def evaluate_session(
    session: Session, options: EvalOptions, original: Session | None = None
) -> FileEval:
    """Evaluate one session: what its effective context keeps of the original messages.

    Args:
        session: the transcript evaluated (its effective context is what is checked).
        options: the run's options (judge, compare, gates).
        original: where the original messages are (``--against``); ``None``: the
            session's own log, whose message events stay in place after any compaction.

    A ``--judge`` failure (a missing key, a failed model call, an answer without grades)
    does not raise: the result keeps its probe results and ``judge`` gives the error
    (:func:`~compactctl.evaluate.judge.judge_entry`).

    Raises:
        UsageError, SummarizerError: from ``--compare`` (a bad configuration, a failed
            summarizer).
        ValueError: the tiktoken encoding is unavailable offline.
    """
    source = original or session
    with acyclic():
        probes = extract_probes(source.events)
        view = session.effective()
        matches = Context(view).check(probes)
        counter = source.counter
        originals = [e for e in source.events if isinstance(e, Message)]
        before, after = prompt_sizes(originals, view, counter)
    result = FileEval(
        path=session.path,
        format=session.format,
        tokenizer=counter.encoding_name,
        tokens_before=before,
        tokens_after=after,
        probes=probes,
        matches=matches,
        against=original.path if original is not None else None,
    )
    if options.judge is not None:
        from compactctl.evaluate.judge import judge_entry

        result.judge = judge_entry(view, probes, options.judge, originals)
    if options.compare:
        from compactctl.evaluate.compare import compare_session

        result.compare = [r.to_json() for r in compare_session(session, probes, options)]
    result.below = gate_failures(result.counts, options.min_retention, dict(options.minimums))
    return result


def original_for(path: str, against: str) -> str:
    """The original of ``path`` under ``--against``: ``against`` itself when it is a file;
    in a folder, the transcript whose ``-o DIR/`` output name
    (:func:`compactctl.app.jobs.output_name`) is ``path``'s file name.

    Raises:
        InputError: no transcript in the folder has that name.
    """
    if not os.path.isdir(against):
        return against
    from compactctl.app.jobs import output_name
    from compactctl.io.files import discover

    name = os.path.basename(path) if path != STDIN else output_name(path)
    files, _ = discover([against])
    for candidate in files:
        if output_name(candidate) == name:
            return candidate
    raise InputError(f"--against {against}: no original named like {name} there", path=path)


def _refuse_effective_context(session: Session) -> None:
    """Refuse to evaluate an effective context against itself: a log whose messages include
    a summary message (``summaryOf``, as replay writes it: ``--materialize`` and ``inspect
    --effective`` outputs) holds the summary and not the messages it replaced, so its own
    messages are no original, and its retention would be 1.0 whatever the summary lost.

    Raises:
        InputError: such a file (the message says to pass ``--against``).
    """
    for e in session.events:
        if isinstance(e, Message) and isinstance(e.data.get("summaryOf"), str):
            raise InputError(
                f"an effective context, not a log: line {e.line} is a summary message "
                f"(summaryOf {e.data['summaryOf']}) and the messages it replaced are not in "
                "the file (a --materialize output?), so eval would check it against itself; "
                "pass --against ORIGINAL, the transcript it was made from, to measure what "
                "the compaction lost",
                path=session.path,
            )


def eval_path(path: str, options: EvalOptions) -> dict[str, Any]:
    """``eval`` on one transcript (or ``-``): ``{"path", "result": FileEval}``.

    Raises:
        InputError: the file (or its original) cannot be read, or its format is unknown; an
            effective context (a ``--materialize`` output) without ``--against``.
        UsageError, SummarizerError: as :func:`evaluate_session`.
    """
    with acyclic():
        session = open_session(
            path, options.fmt, encoding=options.encoding, context_window=options.context_window
        )
        original = None
        if options.against is None:
            _refuse_effective_context(session)
        else:
            original = open_session(
                original_for(path, options.against),
                None,
                encoding=options.encoding,
                context_window=options.context_window,
            )
    try:
        return {"path": path, "result": evaluate_session(session, options, original)}
    except ValueError as exc:  # an encoding unavailable offline: this file, not the run
        raise InputError(str(exc), path=path) from None


def run_eval(
    paths: list[str],
    worker: Callable[[str], dict[str, Any]],
    *,
    settings: Any,
    scope: Any,
) -> Any:
    """Run ``eval`` over PATHS: each file's table on stdout as it finishes, or the
    ``--json`` document (``{"files": [...], "totals": {...}}``) written as results arrive;
    ``scope``: the run's :class:`~compactctl.app.runner.RunScope` (``--jobs``, ``--json``,
    ``-q``, ``-v``, the filters, ...).

    A file below a gate counts as changed on the report (whose ``check`` mode makes that
    exit code 1) and is named on stderr unless ``quiet``. A file whose ``--judge`` failed
    is done (its probe results stand), its judge's error is said on stderr, and the run
    exits with that error's code (3 for a failed call, as for a file that could not be
    processed; 2 for a configuration problem) unless a failure's code outranks it
    (:class:`_EvalReport`).

    Returns:
        The run's :class:`~compactctl.app.report.Report`.

    Raises:
        UsageError: as :func:`compactctl.app.runner.run_files`.
    """
    from compactctl.app.runner import run_files

    printer = _Printer(scope.json_out, scope.verbose)
    report = _EvalReport(check=True, doc=printer.doc, outcome_ok="ok",
                         keep_rows=scope.keep_rows, command="eval")  # fmt: skip
    outcomes = run_files(paths, worker, scope=scope, settings=settings, report=report,
                         desc="eval")  # fmt: skip
    for result in (outcome["result"] for outcome in outcomes):
        entry = result.to_json()
        report.done(entry, changed=bool(result.below))
        if result.below and not scope.quiet:
            gates = "; ".join(result.below)
            sys.stderr.write(f"compactctl: {result.path}: below the minimum: {gates}\n")
        failed = (result.judge or {}).get("error")
        if failed:
            report.judge_failures.append(failed["exitCode"])
            sys.stderr.write(f"compactctl: {result.path}: judge failed (the probe results "
                             f"stand): {failed['message']}\n")  # fmt: skip
        printer.add(result)
    printer.close(report)
    return report


@dataclass
class _EvalReport(Report):
    """The run's report, with the exit codes of the files whose judge failed: done files
    (their probe results stand), but a script must see that part of the run failed."""

    judge_failures: list[int] = field(default_factory=list)

    @property
    def return_code(self) -> int:
        """:attr:`Report.return_code`, where a judge's failure ranks as a failed file's
        error of the same code would (75, then 3, then 2, above a gate's 1)."""
        code = super().return_code
        codes = {code, *self.judge_failures}
        return next((c for c in (EXIT_LOCKED, EXIT_INPUT, EXIT_USAGE) if c in codes), code)

    def summary(self, verb: str, rest: str = "unchanged") -> str:
        """:meth:`Report.summary`, then how many files' judge failed."""
        line = super().summary(verb, rest)
        n = len(self.judge_failures)
        return line[:-1] + f", {n} with the judge failed." if n else line


class _Printer:
    """Where each result goes: its table on stdout, or (``doc``) the ``--json`` document,
    whose entries the run's report writes; the totals at the end."""

    def __init__(self, json_out: bool, verbose: bool) -> None:
        from compactctl.app.report import JsonReport

        self.doc = JsonReport(command="eval") if json_out else None
        self.totals = EvalTotals()
        self.verbose = verbose

    def add(self, result: FileEval) -> None:
        if self.doc is None:
            sys.stdout.write(eval_table(result, verbose=self.verbose))
            sys.stdout.flush()
            return
        self.totals.add(result)

    def close(self, report: Any) -> None:
        if self.doc is not None:
            self.doc.close({**report.totals(), **self.totals.to_json()})


def check_gates(min_retention: float | None, minimums: Sequence[str]) -> tuple[Any, ...]:
    """``--min-retention`` and ``--min KIND=X`` checked before any file is read:
    ``((kind, X), ...)``.

    Raises:
        UsageError: a bad ``--min`` or a minimum outside 0..1.
    """
    from compactctl.evaluate.report import ProbeCounts, parse_minimum

    parsed = tuple(parse_minimum(spec) for spec in minimums)
    gate_failures(ProbeCounts(), min_retention, {})
    return parsed
