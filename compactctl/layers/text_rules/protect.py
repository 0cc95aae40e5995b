"""Protected spans: fenced code blocks and inline code, masked while the rules run.

Fenced code blocks (a line of three or more backticks or tildes, any indentation, optional
``>`` quote markers, an info string; closed by a fence line of the same character at least
as long; an unterminated fence runs to the end of the text) and inline code spans (a
backtick run closed by a run of the same length on the same line, as in CommonMark) are
replaced by placeholders (:func:`mask`) and put back byte for byte
(:func:`masked_pieces`). A placeholder is ``S`` + seven ASCII digits + ``S``, where ``S``
is a private-use character that does not occur in the text and that no rule changes.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator, Sequence

__all__ = [
    "PLACEHOLDER_RE",
    "Masked",
    "has_fence_opener",
    "inline_code_spans",
    "mask",
    "masked_pieces",
    "may_have_fence",
    "protected_spans",
]

_FENCE_OPEN_RE = re.compile(r"^[ \t]*(?:>[ \t]*)*(?:(`{3,})[^`\n]*|(~{3,})[^\n]*)$", re.M)
_FENCE_CLOSE_RE = re.compile(r"^[ \t]*(?:>[ \t]*)*(`{3,}|~{3,})[ \t\r]*$", re.M)
# "``*" rather than "`+": a regex that starts with a literal is searched for by skipping to that
# character; one that starts with a repeat is tried at every position (about 8x slower).
_BACKTICK_RUN_RE = re.compile(r"``*")
_PRIVATE_USE = "\ue000-\uf8ff\U000f0000-\U000ffffd\U00100000-\U0010fffd"
#: A placeholder of :func:`mask`: a private-use sentinel, seven digits (group 2), the same
#: sentinel again.
PLACEHOLDER_RE = re.compile(f"([{_PRIVATE_USE}])([0-9]{{7}})\\1")


def _fence_line_starts(text: str, position: int) -> Iterator[int]:
    """The start of each line at or after ``position`` that contains three backticks or ``~~~``.

    Only these lines can open or close a fenced block, so testing :data:`_FENCE_OPEN_RE` and
    :data:`_FENCE_CLOSE_RE` at their starts finds what a search from ``position`` would (a
    multi-line ``^`` regex tries every character; ``str.find`` skips to the next fence).
    """
    ticks = text.find("```", position)
    tildes = text.find("~~~", position)
    while ticks >= 0 or tildes >= 0:
        found = ticks if tildes < 0 or 0 <= ticks < tildes else tildes
        start = text.rfind("\n", 0, found) + 1
        if start >= position:
            yield start
        end = text.find("\n", found)
        if end < 0:
            return
        if 0 <= ticks < end:
            ticks = text.find("```", end)
        if 0 <= tildes < end:
            tildes = text.find("~~~", end)


def may_have_fence(text: str) -> bool:
    """Whether ``text`` contains three backticks or three tildes (a one-character test first:
    it is several times faster than a three-character one, and most texts have neither)."""
    return ("`" in text and "```" in text) or ("~" in text and "~~~" in text)


def has_fence_opener(text: str) -> bool:
    """Whether ``_FENCE_OPEN_RE.search(text)`` finds a fence opener line."""
    return any(_FENCE_OPEN_RE.match(text, start) for start in _fence_line_starts(text, 0))


def _fenced_blocks(text: str) -> list[tuple[int, int]]:
    """``(start, end)`` of each fenced block: opener line start to closer line end (no ``\\n``).

    The first line that opens a fence opens a block; the block ends with the next line that
    closes it (same character, at least as long), and the next block is looked for after it.
    """
    blocks: list[tuple[int, int]] = []
    lines = _fence_line_starts(text, 0)  # one pass: openers and closers come in text order
    for line_start in lines:
        opener = _FENCE_OPEN_RE.match(text, line_start)
        if opener is None:
            continue
        fence = opener.group(1) or opener.group(2)
        end = -1
        for closer_start in lines:  # the lines after the opener
            closer = _FENCE_CLOSE_RE.match(text, closer_start)
            if closer is None:
                continue
            candidate = closer.group(1)
            if candidate[0] == fence[0] and len(candidate) >= len(fence):
                end = closer.end()
                break
        if end < 0:  # unterminated: protects to the end (a final newline stays outside)
            end = len(text) - 1 if text.endswith("\n") and len(text) > opener.end() else len(text)
            blocks.append((opener.start(), end))
            return blocks
        blocks.append((opener.start(), end))
    return blocks


def inline_code_spans(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """Inline code spans in ``text[start:end]``: CommonMark pairing, never across a newline.

    A backtick run opens a span closed by the next run of the same length on the same line;
    a run without one is literal. Linear in the length of the region.
    """
    spans: list[tuple[int, int]] = []
    runs = [match.span() for match in _BACKTICK_RUN_RE.finditer(text, start, end)]
    count = len(runs)
    i = 0
    while i < count - 1:  # a single run left cannot pair
        line_end = text.find("\n", runs[i][1], end)
        j = i + 1  # runs[i:j] are the runs of one line
        if line_end < 0:
            j = count
        else:
            while j < count and runs[j][0] < line_end:
                j += 1
        if j - i == 2:  # the usual line: two runs, a span if they are as long
            (first_start, first_end), (second_start, second_end) = runs[i], runs[i + 1]
            if first_end - first_start == second_end - second_start:
                spans.append((first_start, second_end))
        elif j - i > 2:
            _pair_runs(runs[i:j], spans)
        i = j
    return spans


def _pair_runs(runs: Sequence[tuple[int, int]], spans: list[tuple[int, int]]) -> None:
    """Pair the backtick runs of one line into spans (appended to ``spans``)."""
    following = [-1] * len(runs)  # index of the next run of the same length, or -1
    last_seen: dict[int, int] = {}
    for k in range(len(runs) - 1, -1, -1):
        size = runs[k][1] - runs[k][0]
        following[k] = last_seen.get(size, -1)
        last_seen[size] = k
    k = 0
    while k < len(runs):
        partner = following[k]
        if partner < 0:
            k += 1
        else:
            spans.append((runs[k][0], runs[partner][1]))
            k = partner + 1


def _spans(text: str) -> list[tuple[int, int, bool]]:
    """Protected spans in order as ``(start, end, is_fenced_block)``."""
    # Literal prefilters (most texts have no backtick at all): a fence line needs ``` or ~~~,
    # an inline span needs a backtick.
    if "`" not in text:
        if "~" not in text or "~~~" not in text:
            return []
        return [(start, end, True) for start, end in _fenced_blocks(text)]
    if not may_have_fence(text):
        return [(start, end, False) for start, end in inline_code_spans(text, 0, len(text))]
    spans: list[tuple[int, int, bool]] = []
    position = 0
    for start, end in _fenced_blocks(text):
        spans.extend((s, e, False) for s, e in inline_code_spans(text, position, start))
        spans.append((start, end, True))
        position = end
    spans.extend((s, e, False) for s, e in inline_code_spans(text, position, len(text)))
    return spans


def protected_spans(text: str) -> list[tuple[int, int]]:
    """Character offsets ``(start, end)`` of the fenced blocks and inline code spans in text.

    Sorted and disjoint; a fenced block runs from the start of its opening fence line to the
    end of its closing fence line (without the newline), or to the end of the text when it is
    never closed. Inline code is looked for only outside fenced blocks, one line at a time.

    >>> protected_spans('use `x`\\n```\\ncode\\n```\\n')
    [(4, 7), (8, 20)]
    """
    return [(start, end) for start, end, _ in _spans(text)]


_PRIVATE_USE_CANDIDATES = (
    range(0xE000, 0xF900),
    range(0xF0000, 0xFFFFE),
    range(0x100000, 0x10FFFE),
)


def _pick_sentinel(text: str) -> str:
    for candidates in _PRIVATE_USE_CANDIDATES:
        for code in candidates:
            if chr(code) not in text:
                return chr(code)
    raise ValueError("text uses every private-use character; no placeholder is free")


Masked = tuple[str, list[str], str]
"""What :func:`mask` returns for a text: ``(masked, originals, sentinel)``."""


def mask(text: str) -> Masked:
    """Replace protected spans by placeholders: ``(masked, originals, sentinel)``.

    Each fenced block gets its own placeholder (so no rule sees two blocks as duplicates);
    inline spans with equal text share one (so duplicate lines stay duplicates).
    """
    sentinel = _pick_sentinel(text)
    spans = _spans(text)
    if not spans:
        return text, [], sentinel
    originals: list[str] = []
    inline_ids: dict[str, int] = {}
    parts: list[str] = []
    position = 0
    for start, end, is_block in spans:
        original = text[start:end]
        if is_block:
            index = len(originals)
            originals.append(original)
        else:
            index = inline_ids.setdefault(original, len(originals))
            if index == len(originals):
                originals.append(original)
        if index >= 10_000_000:
            raise ValueError("more than 10 million protected spans in one text")
        parts.append(text[position:start])
        parts.append(f"{sentinel}{index:07d}{sentinel}")
        position = end
    parts.append(text[position:])
    return "".join(parts), originals, sentinel


@functools.lru_cache(maxsize=16)
def _placeholder_re(sentinel: str) -> re.Pattern[str]:
    """The placeholders written with ``sentinel``, the index as group 1."""
    return re.compile(f"{re.escape(sentinel)}([0-9]{{7}}){re.escape(sentinel)}")


def masked_pieces(masked: str, originals: Sequence[str], sentinel: str) -> list[tuple[bool, str]]:
    """The masked text as ``(is_protected, text)`` pieces, placeholders resolved."""
    if not originals:  # no placeholder can resolve
        return [(False, masked)] if masked else []
    pieces: list[tuple[bool, str]] = []
    position = 0
    # Only placeholders written with this sentinel count: searching for them alone finds the
    # same ones as PLACEHOLDER_RE would (one made with another private-use character can
    # neither contain nor start inside them), and the search skips from sentinel to sentinel.
    for match in _placeholder_re(sentinel).finditer(masked):
        index = int(match.group(1))
        if index >= len(originals):
            continue
        pieces.append((False, masked[position : match.start()]))
        pieces.append((True, originals[index]))
        position = match.end()
    pieces.append((False, masked[position:]))
    return [piece for piece in pieces if piece[1] or piece[0]]
