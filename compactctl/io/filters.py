"""Which discovered transcripts a run takes: the filters for cron (docs/design.md section 4).

A nightly job over a folder of sessions wants to leave alone what an agent is still writing
(``--older-than 2h``), take only a period (``--since 7d``, ``--until 2026-12-01``) and only some
files (``--glob``, ``--exclude``, gitignore-style patterns). :class:`FileFilter` holds them and
:meth:`FileFilter.keeps` judges one file; :func:`compactctl.io.files.walk` applies it where
files are discovered, so every command that takes PATHS gets the same filters.

The times are the file's modification time (``st_mtime``): the moment an agent last wrote the
session, known without reading a byte of it (the session's own last timestamp would cost a
read of every file, and a file whose events carry no timestamp would have none).
"""

from __future__ import annotations

import datetime as dt
import os
import re
import time
from dataclasses import dataclass, field
from typing import Any

from compactctl.errors import UsageError

__all__ = ["FileFilter", "parse_duration", "parse_when"]

_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 7 * 86400.0}
"""Seconds per unit of a duration: s, m (minutes), h, d, w (weeks)."""

_DURATION = re.compile(r"(\d+(?:\.\d+)?)([smhdw])")


def parse_duration(text: str, option: str = "--older-than") -> float:
    """A duration such as ``30m``, ``2h``, ``1d``, ``1w`` or ``1h30m``, in seconds.

    >>> parse_duration("1h30m"), parse_duration("2d")
    (5400.0, 172800.0)

    Raises:
        UsageError: not a number with a unit s, m, h, d or w (``option`` names the option).
    """
    s = text.strip().lower()
    parts = _DURATION.findall(s)
    if not s or "".join(n + u for n, u in parts) != s:
        raise UsageError(
            f"{option} takes a duration such as 30m, 2h, 1d or 1w (units s, m, h, d, w), "
            f"not {text!r}"
        )
    return sum(float(n) * _UNITS[u] for n, u in parts)


def parse_when(text: str, option: str, now: float | None = None) -> float:
    """A point in time as epoch seconds: a date (``2026-12-01``, midnight local time), a date
    and time (``2026-12-01T08:30``, ``2026-12-01 08:30:00``; local time unless it ends in
    ``Z`` or an offset such as ``+02:00``), or a duration back from ``now`` (``7d``: seven
    days ago; :func:`parse_duration`).

    >>> parse_when("2026-12-01T00:00Z", "--since")
    1796083200.0
    >>> parse_when("1h", "--since", now=7200.0)
    3600.0

    Raises:
        UsageError: none of these (``option`` names the option).
    """
    s = text.strip()
    if re.fullmatch(r"(?:\d+(?:\.\d+)?[smhdw])+", s.lower()):
        return (time.time() if now is None else now) - parse_duration(s, option)
    try:
        when = dt.datetime.fromisoformat(s.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise UsageError(
            f"{option} takes a date (2026-01-31), a date and time (2026-01-31T08:30, local "
            f"time unless it ends in Z or +HH:MM) or a duration back from now (7d), not {text!r}"
        ) from None
    return when.timestamp()  # a naive time is local time


@dataclass(frozen=True)
class FileFilter:
    """The filters of a run over PATHS; the default keeps every file.

    Attributes:
        since: keep files modified at or after this time (epoch seconds), ``--since``.
        until: keep files modified before this time (epoch seconds), ``--until``.
        older_than: keep files not modified for at least this many seconds (``--older-than``:
            a session an agent wrote in the last N is live, left alone), measured when the
            folder is searched.
        globs: ``--glob`` patterns (gitignore style): when any is given, keep only files one
            matches.
        excludes: ``--exclude`` patterns (gitignore style): drop the files one matches.

    A pattern is matched against the file's path relative to the folder argument it was
    found under (``a/s.jsonl`` under ``sessions/``), or against the path as typed for a file
    named on the command line; gitignore rules apply (``*.gz`` anywhere, ``/top.jsonl`` at
    the top only, ``archive/`` a folder and all under it, ``!keep.jsonl`` an exception), as
    the ``pathspec`` library implements them.
    """

    since: float | None = None
    until: float | None = None
    older_than: float | None = None
    globs: tuple[str, ...] = ()
    excludes: tuple[str, ...] = ()
    _specs: Any = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.globs or self.excludes:
            import pathspec

            def spec(lines: tuple[str, ...]) -> Any:
                return pathspec.GitIgnoreSpec.from_lines(lines) if lines else None

            object.__setattr__(self, "_specs", (spec(self.globs), spec(self.excludes)))

    @property
    def active(self) -> bool:
        """Whether any filter is set (else every file is kept, and none is stat'ed)."""
        return any(x is not None for x in (self.since, self.until, self.older_than)) or bool(
            self.globs or self.excludes
        )

    @property
    def by_time(self) -> bool:
        """Whether a filter reads the files' modification times."""
        return any(x is not None for x in (self.since, self.until, self.older_than))

    def keeps(self, path: str, relative: str, now: float | None = None) -> bool:
        """Whether the file ``path`` (``relative``: what the patterns are matched against)
        passes every filter; ``now`` (epoch seconds, default the current time) is what
        ``older_than`` counts back from. A file that cannot be stat'ed is kept (reading it
        then reports why it cannot be read)."""
        return self.left_out_by(path, relative, now) is None

    def left_out_by(self, path: str, relative: str, now: float | None = None) -> str | None:
        """Why :meth:`keeps` leaves the file ``path`` out, in a few words naming the filter
        (``--older-than 2h: it was modified 5m ago``), or ``None`` when it is kept.

        >>> FileFilter(excludes=("*.gz",)).left_out_by("x/a.jsonl.gz", "a.jsonl.gz")
        "--exclude '*.gz' matches it"
        """
        if self._specs is not None:
            rel = relative.replace(os.sep, "/").removeprefix("./")
            include, exclude = self._specs
            if include is not None and not include.match_file(rel):
                return f"no --glob matches it: {' '.join(map(repr, self.globs))}"
            if exclude is not None and exclude.match_file(rel):
                hit = [x for x in self.excludes if _spec((x,)).match_file(rel)]
                return f"--exclude {' '.join(map(repr, hit or self.excludes))} matches it"
        if not self.by_time:
            return None
        try:
            mtime = os.stat(path).st_mtime
        except OSError:
            return None
        when = _local(mtime)
        if self.since is not None and mtime < self.since:
            return f"--since {_local(self.since)}: it was modified before, at {when}"
        if self.until is not None and mtime >= self.until:
            return f"--until {_local(self.until)}: it was modified since, at {when}"
        if self.older_than is not None:
            age = (time.time() if now is None else now) - mtime
            if age < self.older_than:
                ago = _span(max(age, 0))
                return f"--older-than {_span(self.older_than)}: it was modified {ago} ago"
        return None

    def describe(self) -> str:
        """The options that set the filters, for messages: ``--older-than, --exclude``."""
        parts = []
        if self.since is not None:
            parts.append("--since")
        if self.until is not None:
            parts.append("--until")
        if self.older_than is not None:
            parts.append("--older-than")
        if self.globs:
            parts.append("--glob")
        if self.excludes:
            parts.append("--exclude")
        return ", ".join(parts)


def _spec(lines: tuple[str, ...]) -> Any:
    """A gitignore-style spec of ``lines`` (``pathspec``)."""
    import pathspec

    return pathspec.GitIgnoreSpec.from_lines(lines)


def _local(epoch: float) -> str:
    """A time for messages, local, to the minute: ``2026-12-02 14:05``."""
    return dt.datetime.fromtimestamp(epoch).strftime("%Y-%m-%d %H:%M")


def _span(seconds: float) -> str:
    """A duration for messages as the filters take it, in its two largest units (rounded
    down): ``45s``, ``12m``, ``2h``, ``1h30m``, ``1d1h``.

    >>> _span(59), _span(7200), _span(5400), _span(90061), _span(0.4)
    ('59s', '2h', '1h30m', '1d1h', '0s')
    """
    left = int(seconds)
    parts: list[str] = []
    for unit in "dhms":
        n, left = divmod(left, int(_UNITS[unit]))
        if n or parts:
            parts.append(f"{n}{unit}" if n else "")
        if len(parts) == 2:
            break
    return "".join(parts) or "0s"
