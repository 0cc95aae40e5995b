"""``inspect`` per file: what ``cli.py`` calls for each path, and the run's totals.

:func:`inspect_path` reads one transcript and returns the per-file object of ``inspect
--json``; canonical JSON lines take the fast path (:mod:`compactctl.app.inspect_fast`), other
formats are imported and inspected as events (:mod:`compactctl.app.inspector`), and both
feed the same accumulator. :func:`effective_lines` is ``inspect --effective``;
:class:`InspectTotals` sums the results into ``totals``. :func:`inspect_path` is top-level
so that ``--jobs`` can run it in a process pool.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from compactctl.app.inspect_fast import inspect_lines
from compactctl.app.inspector import inspect_events
from compactctl.app.report import Report
from compactctl.formats.reader import check_format, load, read_input, to_canonical_events
from compactctl.io.files import READ_ERRORS, open_input, read_error
from compactctl.io.jsonl import dump_events
from compactctl.replay import replay
from compactctl.tokens import TokenCounter

__all__ = ["InspectOptions", "InspectTotals", "effective_lines", "inspect_path"]


@dataclass(frozen=True)
class InspectOptions:
    """Options of ``inspect``.

    Attributes:
        encoding: tiktoken encoding name, ``"estimate"``, or ``None`` (by the session model).
        context_window: context window override, in tokens.
        top: number of largest tool outputs listed.
        fmt: source format, or ``None`` to detect.
        tier: summary tier for the effective context (``None``: the selected one).
    """

    encoding: str | None = None
    context_window: int | None = None
    top: int = 10
    fmt: str | None = None
    tier: str | None = None


def inspect_path(path: str, options: InspectOptions) -> dict[str, Any]:
    """Inspect one transcript; the per-file object of ``inspect --json``.

    Canonical JSON lines are counted as they are read, with no Event per line
    (:func:`compactctl.app.inspect_fast.inspect_lines`; replay runs only when the log has
    compact or summary events); other formats are imported
    (:func:`compactctl.formats.reader.load`) and their events inspected
    (:func:`compactctl.app.inspector.inspect_events`). Both feed the same
    :class:`~compactctl.app.inspector.InspectAccumulator`, so they give the same result.

    Raises:
        InputError: the file cannot be read, or its format is unknown.
        UsageError: ``options.fmt`` is not a known format.
        ValueError, UsageError: the tiktoken encoding is not available offline, or unknown.
    """
    counter = TokenCounter(options.encoding) if options.encoding else None
    fmt = options.fmt
    check_format(fmt)
    if fmt not in (None, "canonical"):
        fmt, events = load(path, fmt, warn=False)  # bad lines are findings here
    else:  # JSON lines counted as they are read (inspect_fast)
        # detection runs for a forced canonical too: lines it does not call canonical go to
        # the reader, which refuses a file that --format canonical reads nothing from
        count = functools.partial(
            inspect_lines,
            path=path,
            counter=counter,
            context_window=options.context_window,
            top=options.top,
            tier=options.tier,
        )
        with open_input(path) as stream:
            try:
                doc, got = read_input(stream, fmt, count)
            except READ_ERRORS as exc:
                raise read_error(exc, path) from None
        if isinstance(got, dict):
            return got
        fmt, events = to_canonical_events(path, fmt, doc, got, warn=False)
    return inspect_events(
        events,
        path=path,
        fmt=fmt,
        counter=counter,
        context_window=options.context_window,
        top=options.top,
        tier=options.tier,
    )


def effective_lines(
    path: str, *, tier: str | None = None, fmt: str | None = None
) -> Iterator[bytes]:
    """The effective context of a transcript as canonical JSONL lines (messages only).

    Raises:
        InputError, UsageError: as :func:`~compactctl.formats.reader.load`.
    """
    _, events = load(path, fmt)
    return dump_events(replay(events, tier=tier))


class InspectTotals:
    """``totals`` of ``inspect --json``, summed as each file's result arrives (no result is
    kept, so a run over any number of files holds one at a time)."""

    def __init__(self) -> None:
        self.files = 0
        self.sums = dict.fromkeys(("events", "messages", "tokens", "effectiveTokens"), 0)
        self.findings = 0

    def add(self, result: dict[str, Any]) -> None:
        """Count one :func:`inspect_path` result."""
        self.files += 1
        self.sums["events"] += sum(result["events"].values())
        for key in ("messages", "tokens", "effectiveTokens"):
            self.sums[key] += result[key]
        self.findings += len(result["findings"])

    @staticmethod
    def file_tokens(result: dict[str, Any]) -> dict[str, int]:
        """A file's token counts in the shared report vocabulary: ``tokensBefore`` = every
        message (``tokens``), ``tokensAfter`` = the effective context (``effectiveTokens``),
        ``tokensSaved`` their difference (what the file's compactions saved)."""
        before, after = int(result["tokens"]), int(result["effectiveTokens"])
        return {"tokensBefore": before, "tokensAfter": after, "tokensSaved": before - after}

    def as_dict(self, report: Report) -> dict[str, Any]:
        """The shared totals (:meth:`Report.totals`: files by outcome, ``tokensBefore``,
        ``tokensAfter``, ``tokensSaved``, ``errors``) and ``{"events", "messages", "tokens",
        "effectiveTokens", "findings"}`` summed over the files."""
        return {**report.totals(), **self.sums, "findings": self.findings}
