"""The ``ansi`` rule: ANSI escapes removed and carriage-return redraws resolved.

Terminal output captured in tool results carries colours, cursor moves, titles and
progress bars redrawn with ``\r``. The escape grammar is :data:`compactctl.text.ANSI_RE`;
this module resolves what a terminal would show. Source: compactctl (not in MoonHub's
compactor table).
"""

from __future__ import annotations

import re

from compactctl.text import ANSI_RE, ESC_ANSI_RE

__all__ = ["strip_ansi"]

_ERASE_LINE_RE = re.compile(r"(?:\x1b\[|\x9b)[0-2]?K")


def _has_c1(text: str) -> bool:
    """Whether ``text`` contains a C1 introducer or terminator (CSI, ST, OSC)."""
    return not text.isascii() and ("\x9b" in text or "\x9c" in text or "\x9d" in text)


def _resolve_carriage_returns(line: str, escapes: bool) -> str:
    """What a terminal shows for one line containing ``\\r`` (escapes removed).

    ``escapes``: whether the line may contain an escape character (False: it has none).
    """
    shown = ""
    if not escapes or ("\x1b" not in line and not _has_c1(line)):
        # Nothing to remove, no erase-line: each segment overwrites the line from column 0, so
        # a column shows the last segment long enough to reach it. Going backwards, each
        # segment longer than what is shown so far adds its tail.
        for segment in reversed(line.split("\r")):
            if len(segment) > len(shown):
                shown += segment[len(shown) :]
        return shown
    for segment in line.split("\r"):
        visible = ANSI_RE.sub("", segment)
        if _ERASE_LINE_RE.search(segment):
            shown = visible
        elif visible:
            shown = visible + shown[len(visible) :]
    return shown


def _resolve_lines(text: str, escapes: bool) -> str:
    """``text`` with each line that contains ``\\r`` resolved (the other lines are kept as
    they are, without being split apart)."""
    parts: list[str] = []
    position = 0  # where the text not yet copied starts: 0 or a newline
    cr = text.find("\r")
    while cr >= 0:
        start = text.rfind("\n", position, cr) + 1  # 0, or after the newline at position or later
        end = text.find("\n", cr)
        if end < 0:
            end = len(text)
        parts.append(text[position:start])
        parts.append(_resolve_carriage_returns(text[start:end], escapes))
        position = end
        cr = text.find("\r", end)
    parts.append(text[position:])
    return "".join(parts)


def strip_ansi(text: str) -> str:
    r"""Remove ANSI escape sequences and resolve carriage-return redraws.

    Removes CSI sequences (colours, cursor moves, erase), OSC strings (window titles,
    hyperlinks; ended by BEL or ST, or by the end of the line), DCS/SOS/PM/APC strings,
    two-character escapes and any lone ESC, and their 8-bit C1 forms. ``\r\n`` becomes ``\n``;
    in a line with other ``\r``, each segment overwrites the line from column 0, as a terminal
    would, and an erase-line sequence (``ESC [ K``) clears what the segment does not cover.
    Columns are counted in characters (a wide CJK character counts as one). The result contains
    no ESC and no ``\r``. Source: compactctl (not in the Layer 1 table of MoonHub's compactor).

    >>> strip_ansi('\x1b[32mok\x1b[0m\r\n 10%\r 50%\r100%\r\n')
    'ok\n100%\n'
    """
    c1 = _has_c1(text)
    escapes = c1 or "\x1b" in text
    if "\r" in text:
        text = text.replace("\r\n", "\n")
        if "\r" in text:
            text = _resolve_lines(text, escapes)
    if not escapes:  # then ANSI_RE has nothing to match
        return text
    return (ANSI_RE if c1 else ESC_ANSI_RE).sub("", text)
