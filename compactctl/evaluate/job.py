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
(:func:`~compactctl.model.acyclic`). Without ``--against``, one more pass looks for what
gives an effective context away (:func:`_refuse_effective_context`: a substring search of
each tool output, about 1 ms of CPU per MB measured on the ``make bench`` corpus).
Measured against ``inspect`` by ``make bench`` (the ``eval`` rows; ``bench/run.py --only
eval``).
"""

from __future__ import annotations

import functools
import operator
import os
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from compactctl.app.report import Report
from compactctl.errors import EXIT_INPUT, EXIT_LOCKED, EXIT_USAGE, InputError, UsageError
from compactctl.evaluate.check import Context
from compactctl.evaluate.lines import open_session
from compactctl.evaluate.probes import extract_probes
from compactctl.evaluate.report import (
    EvalTotals,
    FileEval,
    eval_table,
    gate_failures,
)
from compactctl.io.files import STDIN, same_file
from compactctl.model import Message, acyclic
from compactctl.replay import View
from compactctl.session import Session
from compactctl.summarize.summary_format import RESUME_PREAMBLE
from compactctl.tokens import TokenCounter, message_payload, message_tokens, messages_tokens

__all__ = [
    "EvalOptions",
    "check_against",
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
            transcript (a file, or the folder the inputs of ``-o DIR/`` came from: each
            PATH is paired with its own, :func:`original_for`), and check them against each
            PATH's effective context.
        roots: the folders among PATHS (as ``-o DIR/`` takes them: a file found in one is
            named by its path relative to it), for :func:`original_for`.
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
    roots: tuple[str, ...] = ()
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
    source = original if original is not None else session
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

        rows = compare_session(session, result, options, original)
        result.compare = [r.to_json() for r in rows]
    result.below = gate_failures(result.counts, options.min_retention, dict(options.minimums))
    return result


def original_for(path: str, against: str, roots: tuple[str, ...] = ()) -> str:
    """The original of ``path`` under ``--against``, never ``path`` itself.

    ``against`` a file (or ``-``): that file. A folder (the inputs of a ``-o DIR/`` run),
    in this order:

    1. the input the output's record names (``DIR/.compactctl/REL.json``,
       :func:`compactctl.app.provenance.find_record`), when it is in ``against``;
    2. else the transcript whose ``-o DIR/`` name relative to ``against``
       (:func:`compactctl.app.jobs.mirrored_name`: its subfolders mirrored) is ``path``'s
       own, relative to the folder of ``roots`` (PATHS) it was found in, as ``-o DIR/``
       names it: ``out/b/s.jsonl`` of ``eval --against in out`` pairs with ``in/b/s.jsonl``;
    3. else, for a file named by itself (in no folder of PATHS), the one transcript of that
       name at any depth.

    Args:
        path: a PATH of the run (a file, or ``-``).
        against: ``--against ORIGINAL``.
        roots: the folders among PATHS (:attr:`EvalOptions.roots`).

    Raises:
        InputError: ``against`` is ``path`` itself; no transcript matches; two match (both
            are named: pass ``--against`` the file).
    """
    if not os.path.isdir(against):
        if path != STDIN and against != STDIN and same_file(path, against):
            raise InputError(
                f"--against {against} is the file evaluated itself: pass the transcript it "
                "was made from",
                path=path,
            )
        return against
    from compactctl.app.jobs import mirrored_name

    if path != STDIN:
        from compactctl.app.provenance import find_record

        found = find_record(path)
        source = found[1].get("source") if found is not None else None
        if (
            isinstance(source, str)
            and os.path.isfile(source)
            and _inside(source, against)
            and not same_file(source, path)
        ):  # named from ``against``, as the other originals are
            return os.path.join(against, os.path.relpath(*map(os.path.realpath, (source, against))))
    name = mirrored_name(path, roots)
    named = _originals(against, os.path.abspath(against))
    matches = [c for c in named.get(name, ()) if path == STDIN or not same_file(c, path)]
    if not matches and all(os.path.relpath(path, r).startswith(os.pardir) for r in roots):
        matches = [
            c
            for n, found_paths in named.items()
            if os.path.basename(n) == name
            for c in found_paths
            if path == STDIN or not same_file(c, path)
        ]
    if len(matches) > 1:
        raise InputError(
            f"--against {against}: {len(matches)} transcripts there could be its original, "
            f"{matches[0]} and {matches[1]}; pass --against the original file itself",
            path=path,
        )
    if not matches:
        raise InputError(
            f"--against {against}: no original of it there (looked for a transcript that "
            f"-o DIR/ would name {name}, as its inputs are named)",
            path=path,
        )
    return matches[0]


@functools.lru_cache(maxsize=4)
def _originals(folder: str, where: str) -> dict[str, list[str]]:
    """The transcripts in ``folder`` (paths as :func:`~compactctl.io.files.discover` gives
    them) by their ``-o DIR/`` name relative to it (:func:`compactctl.app.jobs.
    mirrored_name`), each list in the order found; searched once per process and run
    (:func:`run_eval` clears it) for a run over many files. ``where``: ``folder``'s
    absolute path, so that a relative ``folder`` is searched again from another folder."""
    from compactctl.app.jobs import mirrored_name
    from compactctl.io.files import discover

    files, _ = discover([folder])
    named: dict[str, list[str]] = {}
    for f in files:
        named.setdefault(mirrored_name(f, (folder,)), []).append(f)
    return named


def _inside(path: str, folder: str) -> bool:
    """Whether ``path`` is in ``folder`` (at any depth; symbolic links resolved)."""
    real, top = os.path.realpath(path), os.path.realpath(folder)
    return os.path.commonpath([real, top]) == top


def check_against(against: str, found: Any) -> tuple[str, ...]:
    """``--against`` checked against the run's files before any is read, and the folders
    among PATHS (:attr:`EvalOptions.roots`).

    Args:
        against: ``--against ORIGINAL``.
        found: PATHS as walked for the run (a :class:`~compactctl.io.files.Walk`).

    Raises:
        UsageError: ``--against -`` (stdin is read once) with more than one file, or with
            ``-`` among PATHS.
    """
    files = [f.path for f in found.files]
    if against == STDIN and (STDIN in files or len(files) > 1):
        what = "- among PATHS too" if STDIN in files else f"{len(files)} files"
        raise UsageError(
            f"--against - reads the original from stdin, once, and this run has {what}; "
            "give one PATH that is a file, or pass --against the original's path"
        )
    return tuple(dict.fromkeys(f.root for f in found.files if f.root is not None))


_REDUCED = re.compile(
    r"^\[\.\.\. \d+ chars elided(?:, \d+(?: of \d+ matching)? lines? of them kept)? \.\.\.\]$"
    r"|^\[image: [^\]\n]*, \d+ tokens, elided\]$"
    r"|\A\[duplicate of the (?:\S+ )?(?:tool )?output in message \S+ \([^)\n]*\); "
    r"see that newer result\]\Z",
    re.MULTILINE,
)
"""Text only compactctl's layers write in place of what they reduced, which replay puts in
the effective context (never in the log, whose messages stay as written): micro
compaction's marker line (:func:`compactctl.layers.micro.elide`, both versions), its image
placeholder (:meth:`compactctl.media.ImageInfo.placeholder`), and dedup's pointer
(:func:`compactctl.layers.dedup.pointer_text`, the whole text)."""


def _reduced_text(content: Any, role: Any) -> str | None:
    """The first text of a message's ``content`` that :data:`_REDUCED` matches (a line, or
    dedup's whole pointer), or ``None``. A plain text is searched for micro compaction's
    marker only in a tool output (``role`` ``tool``: what it elides); measured, the search
    costs about 6 ms of CPU per 10 MB of tool outputs."""
    if content.__class__ is str:
        if content.startswith("[duplicate of ") or (role == "tool" and "chars elided" in content):
            hit = _REDUCED.search(content)
            return None if hit is None else hit.group(0)
        return None
    if not isinstance(content, list):
        return None
    for part in content:  # images become placeholders in any message
        text = part.get("text") if isinstance(part, dict) else None
        if isinstance(text, str) and ("elided" in text or text.startswith("[duplicate of ")):
            hit = _REDUCED.search(text)
            if hit is not None:
                return hit.group(0)
    return None


def _refuse_effective_context(session: Session) -> None:
    """Refuse to evaluate an effective context against itself. Its messages are what a
    compaction kept, not the messages it replaced or shortened, so they are no original and
    its retention would be 1.0 whatever the compaction lost. Such a file is known by:

    - a summary message (``summaryOf``, as replay writes it: ``--materialize`` and
      ``inspect --effective`` outputs), or a message framing a summary for the resuming
      agent (:func:`compactctl.summarize.summary_format.resume_text`: ``--materialize
      --as openai`` keeps no ``summaryOf``);
    - text only compactctl's layers write in place of what they reduced (:data:`_REDUCED`:
      micro compaction's ``[... N chars elided ...]`` line, its image placeholder, dedup's
      pointer), which the log's messages never hold;
    - the record of an ``-o DIR/`` output (:func:`compactctl.app.provenance.find_record`)
      saying it was written with ``--materialize`` (the record names its input).

    Raises:
        InputError: such a file (the message says what gave it away, and to pass
            ``--against``).
    """
    why = reduced = None  # a summary, else the first reduced text, names the file
    framed = RESUME_PREAMBLE + ":"
    for e in session.events:
        if not isinstance(e, Message):
            continue
        data = e.data
        if isinstance(data.get("summaryOf"), str):
            why = f"line {e.line} is a summary message (summaryOf {data['summaryOf']})"
            break
        content, role = data.get("content"), data.get("role")
        if role in ("user", "system") and e.text.startswith(framed):
            why = f"line {e.line} is a summary framed for the agent that resumes from it"
            break
        if reduced is None and (text := _reduced_text(content, role)) is not None:
            reduced = f"line {e.line} holds {text!r}, which compactctl writes in place of text"
    why = why or reduced
    original = "ORIGINAL"
    if why is None:
        from compactctl.app.provenance import find_record

        found = find_record(session.path)
        if found is None or not found[1].get("result", {}).get("materialized"):
            return
        source = found[1].get("source")
        why = f"its record {found[0]} says -o --materialize wrote it from {source}"
        original = f"ORIGINAL ({source}, if it still holds what was compacted)"
    else:
        why += " (a --materialize output, or a session compact --as native wrote?)"
    raise InputError(
        f"an effective context, not a log: {why}; what the compaction replaced or shortened "
        "is not in the file, so eval would check it against itself; pass --against "
        f"{original}, the transcript it was made from, to measure what the compaction lost",
        path=session.path,
    )


def _refuse_another_session(session: Session, original: Session, where: str) -> None:
    """Refuse ``--against`` an original of another session: when both files record a
    session id (the ``sessionId`` of their ``session`` event; a ``-o`` output, materialized
    or not, keeps its input's) and the ids differ, the probes of one session would be
    looked for in another's context, and the retention would measure nothing. A file
    without a session id (an OpenAI messages array, a bare list of messages) is taken as
    given, and so is one in an agent's format: ``compact --as native`` writes a new session
    of its own id (:mod:`compactctl.io.native`), so only canonical files are compared.

    Raises:
        InputError: both ids known and different (the message names both files and ids).
    """
    if session.format != "canonical":  # an agent's own session: a native one has a new id
        return
    ids = [
        e.data.get("sessionId") if (e := s.session_event) is not None else None
        for s in (session, original)
    ]
    if not all(isinstance(i, str) and i for i in ids) or ids[0] == ids[1]:
        return
    raise InputError(
        f"--against {where} is another session (session id {ids[1]}; {session.path} "
        f"records {ids[0]}): its probes would be looked for in another session's context, "
        f"which measures nothing; pass --against the transcript {session.path} was made "
        f"from (its session event has sessionId {ids[0]})",
        path=session.path,
    )


def eval_path(path: str, options: EvalOptions) -> dict[str, Any]:
    """``eval`` on one transcript (or ``-``): ``{"path", "result": FileEval}``.

    Raises:
        InputError: the file (or its original) cannot be read, or its format is unknown; an
            effective context (a ``--materialize`` output) without ``--against``; no single
            original (:func:`original_for`), one without messages, or one whose session id
            is not the file's (:func:`_refuse_another_session`).
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
            where = original_for(path, options.against, options.roots)
            original = open_session(
                where, None, encoding=options.encoding, context_window=options.context_window
            )
            if not any(isinstance(e, Message) for e in original.events):
                raise InputError(
                    f"--against {where}: the original has no messages, so there is nothing "
                    "to measure against (an empty file or stdin?)",
                    path=path,
                )
            _refuse_another_session(session, original, where)
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

    A file below a gate keeps the outcome ``ok`` (it was read and measured, as ``inspect``
    reports a file with findings; an average over ``ok`` entries takes every measured
    file): its entry's ``belowMin`` names the gates, it counts as changed on the report
    (whose ``check`` mode makes that exit code 1), its ``--report`` row says so, and it is
    named on stderr unless ``quiet``. A file whose ``--judge`` failed is done (its probe
    results stand), its judge's error is said on stderr, and the run exits with that
    error's code (3 for a failed call, as for a file that could not be processed; 2 for a
    configuration problem) unless a failure's code outranks it (:class:`_EvalReport`).

    Returns:
        The run's :class:`~compactctl.app.report.Report`.

    Raises:
        UsageError: as :func:`compactctl.app.runner.run_files`.
    """
    from compactctl.app.runner import run_files

    _originals.cache_clear()
    printer = _Printer(scope.json_out, scope.verbose)
    report = _EvalReport(check=True, doc=printer.doc, outcome_ok="ok",
                         keep_rows=scope.keep_rows, command="eval")  # fmt: skip
    outcomes = run_files(paths, worker, scope=scope, settings=settings, report=report,
                         desc="eval")  # fmt: skip
    for result in (outcome["result"] for outcome in outcomes):
        entry = result.to_json()
        report.done(entry, changed=bool(result.below))
        if result.below:
            gates = "; ".join(result.below)
            if report.rows:  # the --report page's row of this file (outcome ok: it was read)
                report.rows[-1]["reason"] = f"below the minimum: {gates}"
            if not scope.quiet:
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
