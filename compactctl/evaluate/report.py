"""What ``eval`` reports: per-file results, the run's totals, the gates, the table for people.

:class:`FileEval` is one transcript's result; :meth:`FileEval.to_json` is its entry of
``eval --json``, exactly this schema (a script may rely on it)::

    {"path", "format", "tokenizer", "tokensBefore", "tokensAfter", "tokensSaved", "ratio",
     "probes": {"total", "kept", "retention",
                "byKind": {KIND: {"total", "kept"}},
                "lost": [{"kind", "text", "line"}]},
     "belowMin": [GATE, ...]}

(the issue's schema, plus ``format``, ``tokenizer`` and ``belowMin``), plus ``"against"``
(the original, after ``format``) with ``--against``, whose lines ``lost[].line`` are,
``"judge"`` with ``--judge`` and ``"compare"`` with ``--compare``, and the ``"outcome"``
the run's report adds (docs/report.schema.json): ``ok`` for every file read, below a gate
or not; ``belowMin`` lists the gates the file fails (empty: it passes, or no gate).
``byKind`` names every kind of :data:`~compactctl.evaluate.probes.KINDS`, in that order
(zero where a session has none), so a script can rely on its keys. ``ratio`` is
``tokensAfter / tokensBefore`` (the share of the prompt left; 1.0 for an empty log),
``retention`` is ``kept / total`` (1.0 when there is no probe), both rounded to 4 places;
the gates compare the unrounded shares (20000 of 20001 is below 1).

:class:`EvalTotals` sums the results into ``totals``; :func:`gate_failures` applies
``--min-retention`` and ``--min KIND=X``; :func:`eval_table` renders one result for people.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from compactctl.errors import UsageError
from compactctl.evaluate.probes import KINDS, Probe

__all__ = [
    "EvalTotals",
    "FileEval",
    "ProbeCounts",
    "eval_table",
    "gate_failures",
    "parse_minimum",
    "share",
]


def share(part: int, whole: int) -> float:
    """``part / whole`` rounded to 4 places; 1.0 when ``whole`` is 0 (nothing to lose).

    >>> share(2, 3), share(0, 0)
    (0.6667, 1.0)
    """
    return round(part / whole, 4) if whole else 1.0


@dataclass
class ProbeCounts:
    """Probes and kept probes, overall and per kind (summable over files)."""

    total: int = 0
    kept: int = 0
    by_kind: dict[str, list[int]] = field(default_factory=lambda: {k: [0, 0] for k in KINDS})

    @classmethod
    def of(cls, probes: Sequence[Probe], matches: Sequence[str | None]) -> ProbeCounts:
        """The counts of ``probes``, each kept when its match (same order) is not ``None``."""
        counts = cls()
        for probe, match in zip(probes, matches, strict=True):
            counts.add(probe.kind, match is not None)
        return counts

    def add(self, kind: str, kept: bool) -> None:
        """Count one probe of ``kind``."""
        self.total += 1
        self.kept += int(kept)
        row = self.by_kind.setdefault(kind, [0, 0])
        row[0] += 1
        row[1] += int(kept)

    def merge(self, other: ProbeCounts) -> None:
        """Add another file's counts."""
        self.total += other.total
        self.kept += other.kept
        for kind, (total, kept) in other.by_kind.items():
            row = self.by_kind.setdefault(kind, [0, 0])
            row[0] += total
            row[1] += kept

    @property
    def retention(self) -> float:
        """:func:`share` of kept probes."""
        return share(self.kept, self.total)

    def kind_retention(self, kind: str) -> float | None:
        """The retention of one kind, ``None`` when the session has no probe of it."""
        total, kept = self.by_kind.get(kind, (0, 0))
        return share(kept, total) if total else None

    def to_json(self) -> dict[str, Any]:
        """``{"total", "kept", "retention", "byKind": {KIND: {"total", "kept"}}}``."""
        return {
            "total": self.total,
            "kept": self.kept,
            "retention": self.retention,
            "byKind": {k: {"total": t, "kept": n} for k, (t, n) in self.by_kind.items()},
        }


@dataclass
class FileEval:
    """One transcript's evaluation.

    Attributes:
        path: the transcript (``-`` for stdin).
        format: the format it was read as.
        tokenizer: the encoding tokens were counted with (or ``estimate``).
        tokens_before: the prompt estimate of every original message, in tokens (what
            ``inspect`` reports as ``tokens``; with ``--against``, the original's).
        tokens_after: the prompt estimate of the effective context, in tokens (``inspect``'s
            ``effectiveTokens``).
        probes: the probes of the original messages.
        matches: for each probe, ``"exact"``, ``"normalised"`` or ``None`` (lost).
        against: the original's path with ``--against``, else ``None``.
        judge: the ``--judge`` report (:meth:`compactctl.evaluate.judge.JudgeReport.to_json`).
        compare: the ``--compare`` rows (:meth:`compactctl.evaluate.compare.Row.to_json`).
        below: the gates this file fails (:func:`gate_failures`), for messages.
    """

    path: str
    format: str
    tokenizer: str
    tokens_before: int
    tokens_after: int
    probes: list[Probe]
    matches: list[str | None]
    against: str | None = None
    judge: dict[str, Any] | None = None
    compare: list[dict[str, Any]] | None = None
    below: list[str] = field(default_factory=list)

    @property
    def counts(self) -> ProbeCounts:
        """The probe counts of this file."""
        return ProbeCounts.of(self.probes, self.matches)

    @property
    def lost(self) -> list[Probe]:
        """The probes not found in the effective context, in order."""
        return [p for p, m in zip(self.probes, self.matches, strict=True) if m is None]

    @property
    def ratio(self) -> float:
        """``tokens_after / tokens_before`` (:func:`share`)."""
        return share(self.tokens_after, self.tokens_before)

    def to_json(self) -> dict[str, Any]:
        """This file's entry of ``eval --json`` (the schema in the module docstring)."""
        probes = self.counts.to_json()
        probes["lost"] = [{"kind": p.kind, "text": _shown(p.text), "line": p.line}
                          for p in self.lost]  # fmt: skip
        doc: dict[str, Any] = {"path": self.path, "format": self.format}
        if self.against is not None:
            doc["against"] = self.against
        doc.update(
            tokenizer=self.tokenizer,
            tokensBefore=self.tokens_before,
            tokensAfter=self.tokens_after,
            tokensSaved=self.tokens_before - self.tokens_after,
            ratio=self.ratio,
            probes=probes,
            belowMin=self.below,
        )
        if self.judge is not None:
            doc["judge"] = self.judge
        if self.compare is not None:
            doc["compare"] = self.compare
        return doc


def parse_minimum(spec: str) -> tuple[str, float]:
    """``--min KIND=X`` as ``(kind, X)``.

    >>> parse_minimum("file_path=0.9")
    ('file_path', 0.9)

    Raises:
        UsageError: not ``KIND=X``, an unknown kind, or X not a number in 0..1.
    """
    kind, sep, value = spec.partition("=")
    kind = kind.strip().replace("-", "_")
    if not sep or kind not in KINDS:
        raise UsageError(f"--min takes KIND=X with KIND one of {', '.join(KINDS)}; got {spec!r}")
    return kind, _fraction(value, f"--min {spec}")


def _fraction(value: str | float, what: str) -> float:
    try:
        number = float(value)
    except ValueError:
        raise UsageError(f"{what}: {value!r} is not a number") from None
    if not 0 <= number <= 1:
        raise UsageError(f"{what}: {number:g} is not between 0 and 1")
    return number


def gate_failures(
    counts: ProbeCounts, min_retention: float | None, minimums: Mapping[str, float]
) -> list[str]:
    """The gates a file fails, as phrases (empty: it passes).

    ``min_retention`` applies to the overall retention; each ``minimums`` entry to one kind's
    retention, skipped for a kind the session has no probe of. The shares compared are
    unrounded (``kept / total``): 20000 of 20001 probes is below 1, and the phrase shows
    the share with as many places as it takes to differ from the minimum.

    >>> c = ProbeCounts(); c.add("error", False); c.add("command", True)
    >>> gate_failures(c, 0.9, {"command": 1.0, "error": 0.5, "decision": 1.0})
    ['retention 0.5 < 0.9', 'error retention 0 < 0.5']
    >>> c = ProbeCounts(total=20001, kept=20000)
    >>> gate_failures(c, 1.0, {})
    ['retention 0.99995 < 1']

    Raises:
        UsageError: a minimum outside 0..1.
    """
    out = []
    if min_retention is not None:
        _fraction(min_retention, "--min-retention")
        if counts.total and counts.kept / counts.total < min_retention:
            out.append(f"retention {_below(counts.kept, counts.total, min_retention)}")
    for kind, minimum in minimums.items():
        total, kept = counts.by_kind.get(kind, (0, 0))
        if total and kept / total < minimum:
            out.append(f"{kind} retention {_below(kept, total, minimum)}")
    return out


def _below(kept: int, total: int, minimum: float) -> str:
    """``"SHARE < MINIMUM"`` for a share below ``minimum``: :func:`share` (4 places) unless
    rounding reaches the minimum, then with more places until it does not.

    >>> _below(1, 3, 0.5), _below(20000, 20001, 1.0)
    ('0.3333 < 0.5', '0.99995 < 1')
    """
    exact = kept / total
    places = 4
    shown = round(exact, places)
    while shown >= minimum and places < 17:
        places += 1
        shown = round(exact, places)
    return f"{shown:g} < {minimum:g}" if places == 4 else f"{shown!r} < {minimum:g}"


class EvalTotals:
    """``totals`` of ``eval --json``, summed as results arrive (none is kept)."""

    def __init__(self) -> None:
        self.files = 0
        self.tokens_before = 0
        self.tokens_after = 0
        self.counts = ProbeCounts()
        self.below: list[dict[str, Any]] = []
        self.judge: dict[str, list[float]] = {}
        self.judge_failed = 0

    def add(self, result: FileEval) -> None:
        """Count one file's result."""
        self.files += 1
        self.tokens_before += result.tokens_before
        self.tokens_after += result.tokens_after
        self.counts.merge(result.counts)
        self.below.extend({"path": result.path, "gate": g} for g in result.below)
        for dim, score in ((result.judge or {}).get("scores") or {}).items():
            if score is not None:
                self.judge.setdefault(dim, []).append(score)
        self.judge_failed += result.judge is not None and "error" in result.judge

    def to_json(self) -> dict[str, Any]:
        """The eval part of the totals (after :meth:`compactctl.app.report.Report.totals`,
        which has the files by outcome, the token counts and the errors): ``{"ratio",
        "probes": {"total", "kept", "retention", "byKind"}, "belowMin": [{"path", "gate"}]}``,
        plus, after ``--judge``, ``"judge": {DIMENSION: mean}`` (the mean over the graded
        files of each file's mean score; absent when none was graded) and ``"judgeFailed"``
        (the files whose judge failed: their probe results are counted, their grades are
        not)."""
        doc: dict[str, Any] = {
            "ratio": share(self.tokens_after, self.tokens_before),
            "probes": self.counts.to_json(),
            "belowMin": self.below,
        }
        if self.judge:
            doc["judge"] = {d: round(sum(v) / len(v), 2) for d, v in self.judge.items()}
        if self.judge or self.judge_failed:
            doc["judgeFailed"] = self.judge_failed
        return doc


def eval_table(result: FileEval, *, verbose: bool = False, lost_limit: int = 20) -> str:
    """The human report of one file: tokens, retention per kind, the lost probes with their
    line (the first ``lost_limit``, all with ``verbose``), then judge and compare tables."""
    from compactctl.app.render import table

    counts = result.counts
    est = "estimate" if result.tokenizer == "estimate" else result.tokenizer
    against = f" (originals: {result.against})" if result.against else ""
    lines = [
        f"{result.path}  [{result.format}]{against}",
        f"  tokens: {result.tokens_before} -> {result.tokens_after} ({est}), "
        f"ratio {result.ratio:.2f}",
        f"  probes: {counts.kept} of {counts.total} kept, retention {counts.retention:.2f}",
        "",
        table(
            ["kind", "total", "kept", "retention"],
            [[k, t, n, share(n, t) if t else None] for k, (t, n) in counts.by_kind.items()],
        ).rstrip("\n"),
    ]
    lost = result.lost
    if lost:
        shown = lost if verbose else lost[:lost_limit]
        lines += ["", "  lost:"]
        lines += [f"    line {p.line or '-'}  {p.kind}: {_one_line(_shown(p.text))}" for p in shown]
        if len(shown) < len(lost):
            lines.append(f"    (+{len(lost) - len(shown)} more; -v lists all, --json too)")
    if result.judge is not None:
        from compactctl.evaluate.judge import judge_table

        lines += ["", judge_table(result.judge).rstrip("\n")]
    if result.compare is not None:
        from compactctl.evaluate.compare import compare_table

        lines += ["", compare_table(result.compare).rstrip("\n")]
    return "\n".join(lines) + "\n\n"


def _one_line(text: str, limit: int = 120) -> str:
    from compactctl.text import clip

    return clip(" ".join(text.split()), limit)


def _shown(text: str) -> str:
    """A probe's text as eval prints it: secrets redacted (compactctl writes no secret it
    recognises, docs/design.md; the probe itself is checked as written)."""
    from compactctl.summarize.redact import redact

    return redact(text)
