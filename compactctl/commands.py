"""Per-file entry points of the commands: what ``cli.py`` calls for each path.

Each function takes a path (``-`` for stdin) and plain options, does the whole job for that
file through the library, and returns a JSON-ready result dict (or raises a
:class:`~compactctl.errors.CompactError`). They are top-level functions so that ``--jobs``
can run them in a process pool.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from .files import read
from .inspector import inspect_events
from .jsonl import dump_events
from .model import Event
from .replay import replay
from .report import Report
from .tokens import TokenCounter

__all__ = ["InspectOptions", "effective_lines", "inspect_path", "inspect_totals", "load"]


def load(path: str, fmt: str | None = None) -> tuple[str, list[Event]]:
    """Read a whole session into memory: ``(format name, events)``.

    Args:
        path: a file or ``-``.
        fmt: ``"canonical"`` or ``None`` (detect).

    Raises:
        InputError: the file cannot be read.
    """
    return "canonical", list(read(path))


@dataclass(frozen=True)
class InspectOptions:
    """Options of ``inspect``.

    Attributes:
        encoding: tiktoken encoding name, ``"estimate"``, or ``None`` (by the session model).
        context_window: context window override, in tokens.
        top: number of largest tool outputs listed.
        fmt: source format, or ``None`` to detect.
    """

    encoding: str | None = None
    context_window: int | None = None
    top: int = 10
    fmt: str | None = None


def inspect_path(path: str, options: InspectOptions) -> dict[str, Any]:
    """Inspect one transcript; the per-file object of ``inspect --json``.

    Raises:
        InputError: the file cannot be read.
        ValueError: the tiktoken encoding is not available offline.
    """
    fmt, events = load(path, options.fmt)
    counter = TokenCounter(options.encoding) if options.encoding else None
    return inspect_events(
        events,
        path=path,
        fmt=fmt,
        counter=counter,
        context_window=options.context_window,
        top=options.top,
    )


def effective_lines(
    path: str, *, tier: str | None = None, fmt: str | None = None
) -> Iterator[bytes]:
    """The effective context of a transcript as canonical JSONL lines (messages only)."""
    _, events = load(path, fmt)
    return dump_events(replay(events, tier=tier))


def inspect_totals(results: list[dict[str, Any]], report: Report) -> dict[str, Any]:
    """Totals over the per-file inspect results (``totals`` of ``inspect --json``)."""
    return {
        "files": len(results),
        "failed": len(report.failures),
        "events": sum(sum(r["events"].values()) for r in results),
        "messages": sum(r["messages"] for r in results),
        "tokens": sum(r["tokens"] for r in results),
        "effectiveTokens": sum(r["effectiveTokens"] for r in results),
        "findings": sum(len(r["findings"]) for r in results),
        "errors": [{"path": p, "message": e.message} for p, e in report.failures],
    }
