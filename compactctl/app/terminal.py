"""Messages on stderr: one line at a time, around the progress bar, colored on a terminal only.

Every message compactctl prints about a run (a file's line, a warning, an error) goes through
:func:`say`, so that while the progress bar of a many-file run is shown (:func:`progress`,
tqdm on stderr, only on a terminal: docs/style.md habit 7) the line is written above the bar
(``tqdm.write``) instead of into it, where the bar's next redraw would overwrite its start.

Color: the ``error:`` and ``warning:`` labels of the messages :func:`say` writes
(:func:`label`) are red and yellow only when
stderr is a terminal, ``NO_COLOR`` is unset or empty (the no-color.org convention) and
``TERM`` is not ``dumb``; anything else gets plain text, so logs and pipes never hold
escape codes.
"""

from __future__ import annotations

import os
import sys
from typing import Any

__all__ = ["color_on", "label", "progress", "say", "show"]

_BAR: Any = None
"""The progress bar shown now (one per run), or ``None``."""

_COLORS = {"error": "1;31", "warning": "33"}
"""SGR codes of the labels: bold red, yellow."""


def color_on() -> bool:
    """Whether stderr gets color: a terminal, ``NO_COLOR`` unset or empty, ``TERM`` not dumb."""
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):  # replaced or closed
        return False


def label(kind: str) -> str:
    """``kind + ":"`` (``error:``, ``warning:``), in its color when :func:`color_on`.

    >>> label("note")  # a kind without a color
    'note:'
    """
    text = f"{kind}:"
    code = _COLORS.get(kind)
    if code is None or not color_on():
        return text
    return f"\x1b[{code}m{text}\x1b[0m"


def say(message: str) -> None:
    """Write ``message`` as one line on stderr, above the progress bar when one is shown; a
    leading ``compactctl: error:`` or ``compactctl: warning:`` has its label colored
    (:func:`label`)."""
    line = message.rstrip("\n")
    for kind in _COLORS:
        if line.startswith(f"compactctl: {kind}:"):
            line = f"compactctl: {label(kind)}{line[len(kind) + 13 :]}"
            break
    if _BAR is not None:
        from tqdm import tqdm

        tqdm.write(line, file=sys.stderr)
        return
    sys.stderr.write(line + "\n")


def show(text: str) -> None:
    """Write data (``inspect``'s tables) on stdout, flushed; with the bar cleared meanwhile
    when one is shown (stdout and stderr are often the same terminal)."""
    if _BAR is None:
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    from tqdm import tqdm

    with tqdm.external_write_mode(file=sys.stdout):
        sys.stdout.write(text)
        sys.stdout.flush()


def progress(total: int, quiet: bool, desc: str) -> Any:
    """A progress bar of ``total`` files on stderr (``desc`` names it), or ``None``: only
    with several files, not ``quiet``, and only on a terminal. Until it is closed,
    :func:`say` writes above it."""
    if quiet or total < 2 or not sys.stderr.isatty():
        return None
    from tqdm import tqdm

    global _BAR
    bar = tqdm(total=total, file=sys.stderr, desc=desc, unit="file", leave=False)
    _BAR = bar
    close = bar.close

    def closed() -> None:
        global _BAR
        _BAR = None
        close()

    bar.close = closed
    return bar
