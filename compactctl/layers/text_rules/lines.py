"""Line rules and the line helpers of every rule: ``whitespace``, ``dup_lines``, ``decorative``.

Lines are split on ``\\n`` only (never U+2028 and friends, docs/style.md pitfalls); a rule
that changes nothing returns its input object. Source: MoonHub's compactor, the Layer 1
table ("折叠空白", "行去重", "删除装饰线").
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from itertools import repeat

__all__ = [
    "DECORATIVE_RE",
    "DUP_LINE_MIN_CHARS",
    "HEADING_RE",
    "collapse_whitespace",
    "join_lines",
    "remove_decorative_lines",
    "remove_dup_lines",
    "split_lines",
]

#: ``dup_lines`` only removes lines with at least this many characters (stripped).
DUP_LINE_MIN_CHARS = 10


def split_lines(text: str) -> tuple[list[str], bool]:
    """Split on ``\\n`` only (never U+2028 and friends); say whether a final newline followed."""
    lines = text.split("\n")
    if text.endswith("\n"):
        lines.pop()  # the empty string after the final newline (no copy of text[:-1])
        return lines, True
    return lines, False


def join_lines(lines: list[str], trailing_newline: bool) -> str:
    """The inverse of :func:`split_lines`: ``lines`` joined with ``\\n``, and a final newline
    when ``trailing_newline`` (no lines: ``""``)."""
    if not lines:
        return ""
    return "\n".join(lines) + ("\n" if trailing_newline else "")


#: An ATX heading line (``re.match``): up to three spaces, one to six ``#``, then a blank
#: or the end; group 1 is the ``#`` run.
HEADING_RE = re.compile(r" {0,3}(#{1,6})(?:[ \t]|$)")
_FENCE_LIKE_RE = re.compile(r"[ \t]*(?:>[ \t]*)*(?:`{3,}|~{3,})")
_WORD_RE = re.compile(r"\w")


_TRAILING_BLANKS = " \t\f\v\u00a0\u3000\r"
_BLANKS_BUT_CR = " \t\f\v\u00a0\u3000"
_TRAILING_BLANK_ENDS = tuple(_BLANKS_BUT_CR) + tuple(f"{c}\r" for c in _TRAILING_BLANKS)
# Where collapse_whitespace has work, found at the newlines (the search skips from one newline
# to the next): a line ending with a blank other than ``\r`` before its ``\n``, or with a blank
# before a final ``\r`` (a lone ``\r`` ending a line, as in CRLF, is kept); or two lines in a
# row that are empty or only ``\r`` (the second one followed by ``\n``, or a last ``\r`` line).
# The same at the start of the text, and for a last line without ``\n``, are looked for apart.
_WHITESPACE_WORK_RE = re.compile(
    f"\n(?:(?<=[{_BLANKS_BUT_CR}]\n)|(?<=[{_TRAILING_BLANKS}]\r\n)|\r?+\n(?:\r?+\n|\r\\Z))"
)
_WHITESPACE_WORK_AT_START_RE = re.compile("\r?+\n(?:\r?+\n|\r\\Z)")


def collapse_whitespace(text: str) -> str:
    r"""Remove trailing blanks from every line and collapse runs of blank lines to one.

    Trailing spaces, tabs, form feeds, vertical tabs, no-break spaces and ideographic spaces
    (U+3000) are removed; a ``\r\n`` line ending is kept as it is. A blank line is one that is
    empty once its trailing blanks are gone; two or more in a row become one. Leading
    indentation is never touched. Lines are split on ``\n`` only. Safe for code. Source:
    MoonHub's compactor, Layer 1 table ("折叠空白").

    >>> collapse_whitespace('a  \n\n\n\nb\t\n')
    'a\n\nb\n'
    """
    # Most texts have nothing to do: no line ends with a blank (a CRLF ending aside) and no two
    # empty lines follow each other.
    if (
        _WHITESPACE_WORK_RE.search(text) is None
        and not text.endswith(_TRAILING_BLANK_ENDS)
        and _WHITESPACE_WORK_AT_START_RE.match(text) is None
    ):
        return text
    if "\r" not in text:
        return _collapse_without_cr(text)
    lines, trailing = split_lines(text)
    stripped = list(map(str.rstrip, lines, repeat(_TRAILING_BLANKS)))
    # a CRLF line ending stays a CRLF line ending (text without "\r" returned above)
    stripped = [
        new + "\r" if new is not line and "\r" in line[len(new) :] else new
        for new, line in zip(stripped, lines, strict=True)
    ]
    blank = ("", "\r")
    # a line stays unless it and the one before it (as stripped) are both blank
    out = [
        new
        for new, before in zip(stripped, [None, *stripped], strict=False)
        if new not in blank or before not in blank
    ]
    if out == lines:
        return text
    return join_lines(out, trailing)


# A newline ending a line that ends with a blank (no ``\r`` in the text).
_BLANK_BEFORE_NEWLINE_RE = re.compile(f"\n(?<=[{_BLANKS_BUT_CR}]\n)")
_EMPTY_LINES_RE = re.compile("\n\n\n+")


def _collapse_without_cr(text: str) -> str:
    """:func:`collapse_whitespace` of a text without ``\\r``, that has work: the lines that
    end with a blank are found at their newlines and stripped, the rest is copied; then each
    run of empty lines becomes one. The same result as the line loop, without a Python step
    per line (most lines have nothing to do)."""
    parts: list[str] = []
    position = 0  # where the text not yet copied starts (0, or a newline)
    for match in _BLANK_BEFORE_NEWLINE_RE.finditer(text):
        newline = match.start()
        start = text.rfind("\n", position, newline) + 1  # (0 for the first line)
        parts.append(text[position:start])
        parts.append(text[start:newline].rstrip(_BLANKS_BUT_CR))
        position = newline
    trailing = text.endswith("\n")
    if not trailing and text.endswith(_TRAILING_BLANK_ENDS):  # the last line, without newline
        start = text.rfind("\n", position) + 1
        parts.append(text[position:start])
        parts.append(text[start:].rstrip(_BLANKS_BUT_CR))
        position = len(text)
    parts.append(text[position:])
    # Every line newline-terminated, so an empty line is a newline after a newline (or at the
    # start): keep the first of each run.
    ended = "".join(parts) + ("" if trailing else "\n")
    if ended.startswith("\n\n"):
        ended = "\n" + ended.lstrip("\n")
    ended = _EMPTY_LINES_RE.sub("\n\n", ended)
    result = ended if trailing else ended[:-1]
    return text if result == text else result


def _is_dup_candidate(key: str) -> bool:
    """Whether a line (trailing blanks removed) may be dropped as a duplicate."""
    body = key.lstrip()
    return (
        len(body) >= DUP_LINE_MIN_CHARS
        and _WORD_RE.search(body) is not None
        and not body.startswith("|")
        and HEADING_RE.match(key) is None
        and _FENCE_LIKE_RE.match(key) is None
    )


def remove_dup_lines(text: str) -> str:
    r"""Remove lines that repeat an earlier line exactly, wherever it was; keep the first.

    Lines are compared without their trailing blanks. Only non-trivial lines are removed: at
    least :data:`DUP_LINE_MIN_CHARS` (10) characters once stripped, with at least one letter or
    digit, and not a heading, a table row (starts with ``|``) or a fence line. Short lines such
    as ``}``, ``end``, ``Done.``, ``---`` or a repeated label legitimately recur and carry
    structure, so they stay; blank lines are never removed. Source:
    MoonHub's compactor, Layer 1 table ("行去重").

    >>> remove_dup_lines('Running the tests\n}\nok\nRunning the tests\n}\n')
    'Running the tests\n}\nok\n}\n'
    """
    if "\n" not in text:
        return text  # one line cannot repeat
    lines, trailing = split_lines(text)
    keys = list(map(str.rstrip, lines))
    if len(set(keys)) == len(keys):
        return text
    seen: set[str] = set()
    kept: list[str] = []
    for line, key in zip(lines, keys, strict=True):
        if key in seen and _is_dup_candidate(key):
            continue
        seen.add(key)
        kept.append(line)
    if len(kept) == len(lines):
        return text
    return join_lines(kept, trailing)


# At least three of - * = _ ~ with blanks around and between: written with possessive repeats
# (a blank given back cannot be a mark, nor a mark a line end), which the regex engine runs much
# faster than a repeated group.
_DECORATIVE = r"[ \t]*+[-*=_~][ \t]*+[-*=_~][ \t]*+[-*=_~][-*=_~ \t]*+\r?"
#: A decorative line (``re.fullmatch``): three or more of ``- * = _ ~``, blanks allowed.
DECORATIVE_RE = re.compile(_DECORATIVE)
# A whole line that DECORATIVE_RE matches, at the start of the text or after a newline.
_DECORATIVE_START_RE = re.compile(rf"{_DECORATIVE}(?=\n|\Z)")
_DECORATIVE_AFTER_NEWLINE_RE = re.compile(rf"\n{_DECORATIVE}(?=\n|\Z)")
_FRONT_MATTER_LINE_RE = re.compile(
    r"(?:[ \t]*#.*|[\w\"'][^:]*:(?:[ \t].*)?|[ \t]*-(?:[ \t].*)?|[ \t]+\S.*|[ \t]*)\r?"
)
_FRONT_MATTER_KEY_RE = re.compile(r"[\w\"'][^:]*:(?:[ \t].*)?\r?")


def _front_matter_end(lines: Sequence[str]) -> int:
    """Index of the line closing a YAML front matter block at the top, or -1."""
    if not lines or lines[0].rstrip() != "---":
        return -1
    has_key = False
    for i in range(1, len(lines)):
        line = lines[i]
        if line.rstrip() in ("---", "..."):
            return i if has_key else -1
        if _FRONT_MATTER_LINE_RE.fullmatch(line) is None:
            return -1
        has_key = has_key or _FRONT_MATTER_KEY_RE.fullmatch(line) is not None
    return -1


def remove_decorative_lines(text: str) -> str:
    r"""Remove lines made only of ``-``, ``*``, ``=``, ``_`` or ``~`` (three or more, blanks
    between allowed): horizontal rules, banners and setext underlines.

    Table separator rows contain ``|`` or ``:`` and are never touched. YAML front matter is kept
    only when it can be identified: the text starts with a ``---`` line, a ``---`` or ``...``
    line closes it, every line between looks like YAML (``key: value``, ``- item``, indented
    continuation, comment, blank) and at least one is a ``key:`` line. Any other ``---`` line is
    decorative, so an unidentified front matter loses its delimiters and keeps its content. A
    setext heading keeps its text and loses its underline. Inside :func:`apply_rules` a line of
    three or more tildes is a fence opener and is protected instead. Source:
    MoonHub's compactor, Layer 1 table ("删除装饰线").

    >>> remove_decorative_lines('Title\n=====\ntext\n- - -\n| a |\n|---|\n')
    'Title\ntext\n| a |\n|---|\n'
    """
    if (
        _DECORATIVE_START_RE.match(text) is None
        and _DECORATIVE_AFTER_NEWLINE_RE.search(text) is None
    ):
        return text  # no decorative line at all
    lines, trailing = split_lines(text)
    front_matter_end = _front_matter_end(lines)
    kept = [
        line
        for i, line in enumerate(lines)
        if i <= front_matter_end or DECORATIVE_RE.fullmatch(line) is None
    ]
    if len(kept) == len(lines):
        return text
    return join_lines(kept, trailing)
