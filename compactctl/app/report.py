"""What a run tells its user: the report, each file's line, the ``--json`` document.

One :class:`Report` per run (docs/style.md habit 5, after black's ``Report``): commands
record every file's outcome; ``cli.py`` prints :meth:`Report.summary` on stderr and exits
with :attr:`Report.return_code`. :func:`report_line` is the one line a transcript-changing
command prints per file on stderr; :class:`JsonReport` writes the ``--json`` document as the
results arrive; :func:`dump_json` prints one JSON value (``--list --json``, ``inspect
--store --json``).
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson

from compactctl.errors import EXIT_CHECK, EXIT_INPUT, EXIT_LOCKED, EXIT_OK, EXIT_USAGE, CompactError
from compactctl.io.files import STDIN

__all__ = [
    "SCHEMA_VERSION",
    "SUMMARY_VERBS",
    "TOKEN_KEYS",
    "WOULD_SAVE",
    "JsonReport",
    "Report",
    "convert_line",
    "dump_json",
    "capturing",
    "error_entry",
    "message",
    "nothing_landed",
    "print_list",
    "print_store_report",
    "report_line",
    "up_to_date_line",
]


SCHEMA_VERSION = 1
"""The version of the ``--json`` report schema (``docs/report.schema.json``): the
``schemaVersion`` of every report document. Raise it when a key changes meaning or goes."""

TOKEN_KEYS = ("tokensBefore", "tokensAfter", "tokensSaved")
"""The token counts a file's entry may carry, summed in ``totals`` (docs/design.md section 4):
the prompt estimate of the effective context before and after, and their difference. They
count what the run landed: a file it wrote nothing to saved 0 (:func:`nothing_landed`)."""

WOULD_SAVE = "tokensWouldSave"
"""``--dry-run``/``--check`` of a command that writes: the ``tokensSaved`` the run would have
landed, in each entry that counts tokens and summed in ``totals`` (its ``tokensSaved`` is 0:
nothing was written)."""


def nothing_landed(entry: dict[str, Any], *, stays: Literal["before", "after"]) -> None:
    """Make a file's entry (changed in place) count what a run that wrote nothing to it
    landed: no saving. ``tokensSaved`` becomes 0 (``charsSavedRatio`` 0.0), and before and
    after the same: the plan's ``before`` when the file ``stays`` as it was (``--dry-run``,
    ``--check``), its ``after`` when the file or output holds the plan's result already
    (written by an earlier run: an up-to-date ``-o DIR/`` output; or by another run at
    once). Each ``byLayer`` row and ``byRole`` entry (rules' breakdown) likewise.

    >>> e = {"tokensBefore": 9, "tokensAfter": 5, "tokensSaved": 4}
    >>> nothing_landed(e, stays="before"); e
    {'tokensBefore': 9, 'tokensAfter': 9, 'tokensSaved': 0}
    """
    kept, gone = ("Before", "After") if stays == "before" else ("After", "Before")
    rows = (entry, *(entry.get("byLayer") or ()), *(entry.get("byRole") or {}).values())
    for row in rows:
        for unit in ("tokens", "chars"):
            if isinstance(row.get(unit + kept), int) and unit + gone in row:
                row[unit + gone] = row[unit + kept]
        for saved, none in (("tokensSaved", 0), ("charsSavedRatio", 0.0)):
            if saved in row:
                row[saved] = none


def error_entry(error: CompactError) -> dict[str, Any]:
    """The ``error`` of a failed file's entry: ``{"code", "exitCode", "message", "line"?}``.

    ``code`` names the kind of error (the exception class without ``Error``, camelCase), the
    exit code is the one the run ends with for it, ``line`` the 1-based input line when known.

    >>> from compactctl.errors import InputError
    >>> error_entry(InputError("bad JSON", line=3))
    {'code': 'input', 'exitCode': 3, 'message': 'bad JSON', 'line': 3}
    """
    name = type(error).__name__.removesuffix("Error") or "compact"
    entry: dict[str, Any] = {
        "code": name[:1].lower() + name[1:],
        "exitCode": error.exit_code,
        "message": error.message,
    }
    if error.line is not None:
        entry["line"] = error.line
    return entry


@dataclass
class Report:
    """Outcomes of one run over many files.

    Attributes:
        check: ``--check`` mode: files that would change make the exit code 1.
        processed: files processed.
        failures: ``(path, error)`` for each file that could not be processed.
        changed: files that were (or, with --check/--dry-run, would be) changed.
        skips: ``(path, reason)`` for each input left alone on purpose (not a failure): met
            in a folder, it cannot be changed in place (another agent's format, gzip).
        up_to_date: files whose ``-o`` output held the bytes already (not rewritten).
        left_out: files found but left out by the filters (``--since``, ``--glob``, ...).
        tokens: the sums of :data:`TOKEN_KEYS` over the files that reported them (a key no
            file reported stays out: ``totals`` gives ``None`` for it).
        doc: the ``--json`` document each outcome is written to as it is recorded.
        rows: with ``keep_rows``, one slim row per file (``path``, ``outcome``, the token
            counts, ``written``, ``sessionKey``, a failure's ``error`` and ``code``, a skip's
            ``reason``; eval's retention, gates and first lost probes:
            :func:`~compactctl.app.report_eval.eval_row`) for the ``--report`` page and the
            store's run log; memory is a few dozen bytes per file (eval: under 5 KB).
        outcome_ok: the ``outcome`` of a processed file that a read-only command
            (``inspect``, ``eval``) reports: ``"ok"``; ``None``: ``changed``/``unchanged``.
        command: the command the run is of (the ``--report`` page's title).
        writes: the run writes (not ``--dry-run`` nor ``--check``); when it does not, an
            entry's saving is reported as :data:`WOULD_SAVE`, its ``tokensSaved`` 0.
        would_save: the :data:`WOULD_SAVE` of the entries summed, in tokens (``None``: no
            entry had one; ``totals`` then leaves the key out).
    """

    check: bool = False
    processed: int = 0
    failures: list[tuple[str, CompactError]] = field(default_factory=list)
    changed: int = 0
    skips: list[tuple[str, str]] = field(default_factory=list)
    up_to_date: int = 0
    left_out: int = 0
    tokens: dict[str, int] = field(default_factory=dict)
    doc: JsonReport | None = None
    keep_rows: bool = False
    rows: list[dict[str, Any]] = field(default_factory=list)
    outcome_ok: str | None = None
    command: str = ""
    writes: bool = True
    would_save: int | None = None

    def done(
        self,
        result: dict[str, Any],
        *,
        changed: bool = False,
        tokens: dict[str, int] | None = None,
    ) -> None:
        """Record a processed file and whether it changed (or would change).

        ``result`` gets its ``outcome`` (``changed``, ``unchanged``, or :attr:`outcome_ok`)
        and its token counts (:data:`TOKEN_KEYS`, or ``tokens`` when given) are summed;
        ``result`` is written to :attr:`doc`. A result with ``upToDate``
        (an ``-o DIR/`` output that held these bytes already) is ``unchanged`` and counts
        as up to date too.

        A transcript-changing command's result that wrote nothing (``written`` ``None``)
        counts no saving (:func:`nothing_landed`, on the entry of the document and of the
        totals: ``result`` itself keeps the plan's counts for the file's line on stderr);
        with ``--dry-run``/``--check`` the plan's saving is its :data:`WOULD_SAVE`."""
        self.processed += 1
        self.changed += int(changed)
        self.up_to_date += int(bool(result.get("upToDate")))
        outcome = self.outcome_ok or ("changed" if changed else "unchanged")
        result["outcome"] = outcome
        if tokens is None and self.outcome_ok is None and "written" in result:
            result = self._landed(result)
        if tokens is None:
            tokens = {k: result[k] for k in TOKEN_KEYS if isinstance(result.get(k), int)}
        for key, value in tokens.items():
            self.tokens[key] = self.tokens.get(key, 0) + value
        if self.keep_rows:
            row: dict[str, Any] = {"path": result.get("path", "?"), "outcome": outcome, **tokens}
            # the run's output: written now, or (up to date) already there
            written = result.get("written") or result.get("output")
            for key, given in (("written", written), ("sessionKey", result.get("sessionKey"))):
                if given is not None:
                    row[key] = given
            if self.command == "eval" and isinstance(result.get("probes"), dict):
                from compactctl.app.report_eval import eval_row

                row["eval"] = eval_row(result, below=changed)  # changed: below a gate
            self.rows.append(row)
        if self.doc is not None:
            head = {"path": result["path"]} if "path" in result else {}
            self.doc.add({**head, "outcome": outcome, **result})

    def _landed(self, result: dict[str, Any]) -> dict[str, Any]:
        """``result``, or a copy of it that counts what landed when it wrote nothing."""
        if result.get("written") is not None or "tokensSaved" not in result:
            return result
        entry = dict(result)
        if "byLayer" in entry:
            entry["byLayer"] = [dict(row) for row in entry["byLayer"]]
        if "byRole" in entry:
            entry["byRole"] = {role: dict(row) for role, row in entry["byRole"].items()}
        if not self.writes:
            would = entry["tokensSaved"]
            entry[WOULD_SAVE] = would
            self.would_save = (self.would_save or 0) + (would if isinstance(would, int) else 0)
        nothing_landed(entry, stays="after" if entry.get("upToDate") else "before")
        return entry

    def failed(self, path: str, error: CompactError) -> None:
        """Record a file that could not be processed; the run goes on. Its entry is
        ``{"path", "outcome": "failed", "error": {...}}`` (:func:`error_entry`)."""
        self.failures.append((path, error))
        if self.keep_rows:
            code = error_entry(error)["code"]
            self.rows.append({"path": path, "outcome": "failed", "error": error.message,
                              "code": code})  # fmt: skip
        if self.doc is not None:
            self.doc.add({"path": path, "outcome": "failed", "error": error_entry(error)})

    def skipped(self, path: str, reason: str) -> None:
        """Record an input left alone on purpose (not a failure): its entry is
        ``{"path", "outcome": "skipped", "reason"}``."""
        self.skips.append((path, reason))
        if self.keep_rows:
            self.rows.append({"path": path, "outcome": "skipped", "reason": reason})
        if self.doc is not None:
            self.doc.add({"path": path, "outcome": "skipped", "reason": reason})

    @property
    def return_code(self) -> int:
        """The exit code (docs/design.md section 4): 75 if a lock was held too long (retry), else
        3 if an input could not be processed, else 2 if only usage/config errors occurred
        (e.g. a missing API key), else 1 if ``--check`` found work, else 0."""
        if self.failures:
            codes = {e.exit_code for _, e in self.failures}
            for code in (EXIT_LOCKED, EXIT_INPUT, EXIT_USAGE):
                if code in codes:
                    return code
            return EXIT_INPUT
        if self.check and self.changed:
            return EXIT_CHECK
        return EXIT_OK

    def totals(self) -> dict[str, Any]:
        """The ``totals`` every ``--json`` document starts with: files by outcome (the
        entries' ``outcome`` values, so ``changed + unchanged + failed + skipped == files``;
        ``upToDate``: how many of the ``unchanged`` were up-to-date ``-o DIR/`` outputs;
        ``leftOut``, the files the filters left out, named or found in a folder, is not
        among ``files``), the
        token counts summed over files (``None`` when no file of the run measures that
        count, e.g. ``tokensBefore`` of ``rules``), :data:`WOULD_SAVE` when the run wrote
        nothing on purpose (``--dry-run``, ``--check``), and the failed files' errors.

        >>> Report(processed=2, changed=1, tokens={"tokensSaved": 5}).totals()["tokensSaved"]
        5
        >>> sorted(Report().totals())  # doctest: +NORMALIZE_WHITESPACE
        ['changed', 'errors', 'failed', 'files', 'leftOut', 'skipped', 'tokensAfter',
         'tokensBefore', 'tokensSaved', 'unchanged', 'upToDate']
        """
        would = {WOULD_SAVE: self.would_save} if self.would_save is not None else {}
        return {
            "files": self.processed + len(self.failures) + len(self.skips),
            "changed": self.changed,
            "unchanged": self.processed - self.changed,
            "upToDate": self.up_to_date,
            "failed": len(self.failures),
            "skipped": len(self.skips),
            "leftOut": self.left_out,
            **{k: self.tokens.get(k) for k in TOKEN_KEYS},
            **would,
            "errors": [{"path": p, **error_entry(e)} for p, e in self.failures],
        }

    def summary(self, verb: str, rest: str = "unchanged") -> str:
        """One closing line, e.g. ``2 files compacted, 1 unchanged, 1 skipped, 1 failed.``

        >>> r = Report(); r.done({}, changed=True); r.done({}); r.summary("compacted")
        '1 file compacted, 1 unchanged.'
        """
        n = self.processed
        parts = [f"{self.changed} file{'s' if self.changed != 1 else ''} {verb}"]
        if n - self.changed - self.up_to_date:
            parts.append(f"{n - self.changed - self.up_to_date} {rest}")
        if self.up_to_date:
            parts.append(f"{self.up_to_date} up to date (nothing written)")
        if self.skips:
            parts.append(f"{len(self.skips)} skipped")
        if self.left_out:
            parts.append(f"{self.left_out} left out by the filters")
        if self.failures:
            parts.append(f"{len(self.failures)} failed")
        return ", ".join(parts) + "."


SUMMARY_VERBS = {
    "compact": "compacted",
    "rules": "changed by rules",
    "dedup": "deduplicated",
    "tiers": "tiered",
    "convert": "converted",
    "undo": "reverted",
}
"""The verb of each transcript-changing command's closing line (``2 files compacted``)."""


def dump_json(doc: Any, *, to_stderr: bool = False) -> None:
    """Print one JSON value, indented by 2, on stdout (or stderr)."""
    stream = sys.stderr if to_stderr else sys.stdout
    stream.flush()
    stream.buffer.write(orjson.dumps(doc, option=orjson.OPT_INDENT_2) + b"\n")
    stream.flush()


def print_list(json_out: bool, rows: list[dict[str, Any]], columns: dict[str, str]) -> None:
    """Print the rows of a ``--list`` (rules, formats) as a table of ``columns`` (header ->
    key of a row) on stdout, or all of them as JSON."""
    if json_out:
        dump_json(rows)
    else:
        from compactctl.app.render import table

        cells = [[r[k] for k in columns.values()] for r in rows]
        sys.stdout.write(table(list(columns), cells, indent=""))


def print_store_report(
    db: str | None, days: int, json_out: bool, paths: list[str] | None = None, *, runs: bool = False
) -> int:
    """``inspect --store [--runs] [PATHS]``: print the cross-session report of the store at
    ``db`` (``None``: ``$COMPACTCTL_DB`` or the XDG state folder) over ``days`` days, or
    with ``runs`` its list of runs; with ``paths``, only those files (or the files inside
    those folders, made absolute as the store keeps them). Returns the exit code.

    A store that cannot be opened or read is reported on stderr (``compactctl: <error>``)
    and its error's exit code returned.

    Raises:
        UsageError: there is no store at the path yet.
    """
    import time

    from compactctl.app.store import Store, absolute, resolve_db_path
    from compactctl.errors import UsageError

    where = [absolute(p) for p in paths or []]
    try:
        path = resolve_db_path(db)
        doc: Any = None
        if path.exists():
            with Store.open(path) as st:
                now = time.time()
                if runs:
                    doc = {"db": str(path), "runs": st.runs(now, days=days, paths=where)}
                else:
                    doc = st.report(now, days=days, paths=where)
    except CompactError as exc:
        sys.stderr.write(f"compactctl: {exc}".rstrip("\n") + "\n")
        return exc.exit_code
    if doc is None:
        raise UsageError(
            f"{path}: no store yet (it is created by the first compact, rules, "
            "dedup or tiers run); pass --db PATH to read another one"
        )
    if json_out:
        dump_json(doc)
    else:
        from compactctl.app.render import runs_table, store_table

        sys.stdout.write(runs_table(doc) if runs else store_table(doc))
    return EXIT_OK


class JsonReport:
    """The ``--json`` document ``{"schemaVersion", "command", "files": [...], "totals": {...}}``
    (docs/report.schema.json), written as results arrive, so a run over any number of files
    holds one result at a time.

    The bytes equal ``orjson.dumps(doc, option=OPT_INDENT_2)`` of the whole document. It
    goes to stdout, or to stderr when stdout carries the transcript (stdin input, ``-o -``,
    ``--materialize`` without ``-o``), so the data stays parseable. On stderr, the run's
    messages cannot go beside it: failures are only in the document (their entries), and
    warnings are collected (:data:`CAPTURE`) into its ``warnings`` list, so ``2>report.json``
    holds one JSON document. Nothing is written before the first result (or the end), so a
    run that stops on a usage error leaves no half document.
    """

    def __init__(self, *, to_stderr: bool = False, command: str = "") -> None:
        self.stream = sys.stderr if to_stderr else sys.stdout
        self.to_stderr = to_stderr
        self.command = command
        self.count = 0
        self.started = False
        self.warnings: list[str] = []
        self.pid = os.getpid()

    def _start(self) -> None:
        if not self.started:
            self.started = True
            self.stream.flush()
            head = b'{\n  "schemaVersion": %d,\n  "command": %s,\n  "files": ['
            self.stream.buffer.write(head % (SCHEMA_VERSION, orjson.dumps(self.command)))

    def add(self, result: dict[str, Any]) -> None:
        """Write one file's result (input order is the caller's)."""
        self._start()
        body = orjson.dumps(result, option=orjson.OPT_INDENT_2).replace(b"\n", b"\n    ")
        self.stream.buffer.write((b",\n    " if self.count else b"\n    ") + body)
        self.count += 1

    def close(self, totals: dict[str, Any]) -> None:
        """Write ``totals`` (and the captured ``warnings``, if any) and end the document."""
        self._start()
        body = orjson.dumps(totals, option=orjson.OPT_INDENT_2).replace(b"\n", b"\n  ")
        end = b"\n  ]" if self.count else b"]"
        self.stream.buffer.write(end + b',\n  "totals": ' + body)
        if self.warnings:
            listed = orjson.dumps(self.warnings, option=orjson.OPT_INDENT_2)
            self.stream.buffer.write(b',\n  "warnings": ' + listed.replace(b"\n", b"\n  "))
        self.stream.buffer.write(b"\n}\n")
        self.stream.flush()


CAPTURE: JsonReport | None = None
"""The ``--json`` document on stderr of the running command, if any (:func:`capturing`):
messages that would go to stderr (warnings) are collected into it instead (:func:`message`)."""


@contextlib.contextmanager
def capturing(doc: JsonReport | None) -> Iterator[None]:
    """While the block runs, :func:`message` adds warnings to ``doc`` when it is on stderr."""
    global CAPTURE
    before = CAPTURE
    if doc is not None and doc.to_stderr:
        CAPTURE = doc
    try:
        yield
    finally:
        CAPTURE = before


def message(text: str) -> None:
    """Print a message about the run on stderr, or, while a ``--json`` document is on stderr
    (:data:`CAPTURE`), add it to the document's ``warnings`` (a failure's message is already
    its entry's ``error``, so only warnings come here). A ``--jobs`` worker process cannot
    reach the document: its warnings go to stderr (the stdin input that puts the document
    there is read in the main process)."""
    if CAPTURE is not None and CAPTURE.pid == os.getpid():
        CAPTURE.warnings.append(text.removeprefix("compactctl: warning: ").rstrip("\n"))
        return
    from compactctl.app.terminal import say

    say(text)  # above the progress bar, its label colored on a terminal


# --- the line each transcript-changing command prints per file --------------------------------


def report_line(command: str, r: dict[str, Any]) -> str:
    """The stderr line of one file's result of ``command`` (compact, rules, dedup, tiers).

    >>> report_line("dedup", {"path": "s.jsonl", "changed": False, "candidates": 4})
    's.jsonl: unchanged: no duplicates among 4 candidates'

    Raises:
        KeyError: ``command`` has no line of its own (convert's depends on its flags).
    """
    return _LINES[command](r)


def up_to_date_line(r: dict[str, Any]) -> str:
    """The stderr line of a file whose ``-o`` output held these bytes already.

    >>> up_to_date_line({"path": "in/a.jsonl", "output": "out/a.jsonl"})
    'in/a.jsonl: up to date: out/a.jsonl holds this output already (not rewritten)'
    """
    return f"{r['path']}: up to date: {r['output']} holds this output already (not rewritten)"


def _verb(r: dict[str, Any], done: str, would: str) -> str:
    """The verb of a report line: what happened, where it went, or what would happen. With
    ``--materialize`` the output is the effective context: its events were applied to it,
    never appended."""
    written = r.get("written")
    materialized = bool(r.get("materialized"))
    if materialized and done == "appended":
        done, would = "applied", "would apply"
    if written is None:
        return would
    if written != r["path"]:
        dest = "stdout" if written == STDIN else written
        source = "" if r["path"] == STDIN else "source unchanged; "
        where = f"{_materialized(r)} written to" if materialized else "written to"
        return f"({source}{where} {dest}) {done}"
    return done


def _materialized(r: dict[str, Any]) -> str:
    """What ``--materialize`` wrote, with its size when known.

    >>> _materialized({"tokensWritten": 2282}), _materialized({})
    ('effective context of 2282 tokens', 'effective context')
    """
    size = r.get("tokensWritten")
    return "effective context" + (f" of {size} tokens" if size else "")


def _unchanged(r: dict[str, Any], why: str) -> str:
    """The line of a file no event was appended to; with ``-o``, where its copy went.

    >>> _unchanged({"path": "a.jsonl", "written": "out.jsonl"}, "nothing to do")
    'a.jsonl: unchanged (written to out.jsonl with no new events): nothing to do'

    A run whose planned events another run had appended first says so, not ``why``:

    >>> _unchanged({"path": "a.jsonl", "written": None, "appended": 0, "alreadyPresent": 1,
    ...     "reason": "another run appended the 1 planned event first"}, "no duplicates")
    'a.jsonl: unchanged: another run appended the 1 planned event first'
    """
    if r.get("alreadyPresent") and not r.get("appended") and r.get("reason"):
        why = r["reason"]  # another run appended the planned events first
    written = r.get("written")
    if written is None or written == r["path"]:
        return f"{r['path']}: unchanged: {why}"
    dest = "stdout" if written == STDIN else written
    if r.get("materialized"):
        return f"{r['path']}: unchanged ({_materialized(r)} written to {dest}): {why}"
    return f"{r['path']}: unchanged (written to {dest} with no new events): {why}"


def _compact_line(r: dict[str, Any]) -> str:
    resume = r.get("resume")
    if resume:
        return _resume_line(r, resume)
    if "byLayer" in r:
        return _layers_line(r)
    if not r["changed"]:
        return _unchanged(r, r.get("reason") or "nothing to do")
    parts = []
    if r.get("micro"):
        parts.append(f"micro compaction of {r['micro']['targets']} tool outputs")
    if r.get("summary"):
        s = r["summary"]
        parts.append(f"summary of {s['replaces']} events ({s['model']}, {s['triggerMode']})")
    est = " (estimate)" if r.get("tokenizer") == "estimate" else ""
    return (
        f"{r['path']}: {_verb(r, 'appended', 'would append')} {' + '.join(parts)}; prompt "
        f"estimate {r['tokensBefore']} -> {r['tokensAfter']} tokens{est} (-{r['tokensSaved']})"
    )


def _layers_line(r: dict[str, Any]) -> str:
    """``compact --layers``: each layer's saving, then the prompt estimate of the pass.

    >>> print(_layers_line({"path": "s", "changed": True, "written": "s",
    ...     "tokensBefore": 9, "tokensAfter": 5, "tokensSaved": 4, "byLayer": [
    ...     {"layer": "rules", "events": 0, "tokensSaved": 0, "report": {}},
    ...     {"layer": "summary", "events": 1, "tokensSaved": 4, "report": {}},
    ...    {"layer": "tiers", "events": 1, "tokensSaved": 0, "report": {}}]}))  # doctest:+ELLIPSIS
    s: appended rules unchanged, summary -4 tokens, tiers (no saving); prompt estimate 9 -> 5 ...
    """
    if not r["changed"]:
        why = "; ".join(
            f"{row['layer']}: {row['report'].get('reason') or 'nothing to do'}"
            for row in r["byLayer"]
        )
        return _unchanged(r, why or "no layer")
    parts = [
        f"{row['layer']} unchanged"
        if not row["events"]
        else f"{row['layer']} -{row['tokensSaved']} tokens"
        if row["tokensSaved"]
        else f"{row['layer']} (no saving)"  # tiers kept while the whole summary is shown
        for row in r["byLayer"]
    ]
    est = " (estimate)" if r.get("tokenizer") == "estimate" else ""
    return (
        f"{r['path']}: {_verb(r, 'appended', 'would append')} {', '.join(parts)}; "
        f"prompt estimate {r['tokensBefore']} -> {r['tokensAfter']} tokens{est} "
        f"(-{r['tokensSaved']})"
    )


def _resume_line(r: dict[str, Any], resume: dict[str, Any]) -> str:
    """``compact --as native``: where the new session is and the command that resumes it.

    >>> print(_resume_line({"path": "a.jsonl", "changed": True, "written": "/p/b.jsonl",
    ...     "nativeMessages": 5}, {"path": "/p/b.jsonl", "format": "claude-code",
    ...     "command": "claude --resume b", "cwd": "/src"}))
    a.jsonl: (source unchanged) wrote a new claude-code session of 5 messages: /p/b.jsonl
      resume it: cd /src && claude --resume b
    """
    what = f"a new {resume['format']} session of {r.get('nativeMessages', 0)} messages"
    if r.get("written") is None:
        what = f"would write {what}"
    elif r["changed"]:
        what = f"wrote {what}"
    else:
        what = f"{what} was already written (the file there begins with these lines: left as it is)"
    where = f"cd {resume['cwd']} && " if resume.get("cwd") else ""
    return (
        f"{r['path']}: (source unchanged) {what}: {resume['path']}\n"
        f"  resume it: {where}{resume['command']}"
    )


def _rules_line(r: dict[str, Any]) -> str:
    if not r["changed"]:
        return _unchanged(r, "no rule changes any message")
    top = sorted(r["byRule"].items(), key=lambda kv: -kv[1]["charsSaved"])[:4]
    detail = ", ".join(f"{k} -{v['charsSaved']} chars" for k, v in top)
    verb = _verb(r, "rules applied to", "would rewrite")
    return f"{r['path']}: {verb} {r['targets']} messages, -{r['tokensSaved']} tokens ({detail})"


def _dedup_line(r: dict[str, Any]) -> str:
    if not r["changed"]:
        return _unchanged(r, f"no duplicates among {r['candidates']} candidates")
    what = f"{r['pairs']} duplicates in {r['groups']} groups ({r['exact']} exact, {r['near']} near)"
    return f"{r['path']}: {_verb(r, 'marked', 'would mark')} {what}, -{r['tokensSaved']} tokens"


def _tiers_line(r: dict[str, Any]) -> str:
    if not r["changed"]:
        return _unchanged(r, r.get("reason") or "nothing to do")
    sizes = ", ".join(f"{k} {v}" for k, v in sorted(r["tiers"].items()))
    shown = r["selectedTier"] or "the whole summary (the context does not need a tier)"
    if r.get("reselected"):  # the tiers were there: only what replay shows changed
        what = f"{shown} (the tiers as they were: {sizes} tokens, {r['tokenizer']})"
        return f"{r['path']}: {_verb(r, 'replay now shows', 'replay would show')} {what}"
    what = f"tiers ({sizes} tokens, {r['tokenizer']}); replay shows {shown}"
    return f"{r['path']}: {_verb(r, 'added', 'would add')} {what}"


def _undo_line(r: dict[str, Any]) -> str:
    """The stderr line of one file's result of ``undo``.

    >>> _undo_line({"path": "s.jsonl", "changed": True, "written": "s.jsonl",
    ...     "reverted": [{"type": "summary", "uuid": "u1", "mode": None}], "revert": "r1",
    ...     "tokensBefore": 900, "tokensAfter": 5000, "tokenizer": "estimate"})
    's.jsonl: took back summary u1 (revert r1); prompt estimate 900 -> 5000 tokens (estimate)'
    """
    if not r["changed"]:
        return _unchanged(r, r.get("reason") or "nothing to undo")
    what = " + ".join(
        f"{e['type']}{' ' + e['mode'] if e.get('mode') else ''} {e['uuid']}" for e in r["reverted"]
    )
    est = " (estimate)" if r.get("tokenizer") == "estimate" else ""
    return (
        f"{r['path']}: {_verb(r, 'took back', 'would take back')} {what} (revert {r['revert']}); "
        f"prompt estimate {r['tokensBefore']} -> {r['tokensAfter']} tokens{est}"
    )


_LINES: dict[str, Callable[[dict[str, Any]], str]] = {
    "compact": _compact_line,
    "rules": _rules_line,
    "dedup": _dedup_line,
    "tiers": _tiers_line,
    "undo": _undo_line,
}


def convert_line(r: dict[str, Any], *, dry_run: bool, check: bool, gate: bool) -> str:
    """The stderr line of one file's result of ``convert``.

    ``gate``: ``--check`` over several inputs without ``-o DIR/`` (a CI gate that writes
    nothing): the line says whether the file would be converted.

    >>> convert_line({"path": "a.jsonl", "output": "-", "format": "claude-code", "events": 3},
    ...              dry_run=True, check=False, gate=False)
    'a.jsonl: claude-code -> canonical, 3 events (would write stdout)'
    """
    to = "stdout" if r["output"] == STDIN else r["output"]
    if gate:
        to = "already canonical" if r["format"] == "canonical" else "would convert"
    elif dry_run or check:
        to = f"would write {to}"
    return f"{r['path']}: {r['format']} -> canonical, {r['events']} events ({to})"
