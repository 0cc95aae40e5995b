"""Bullet rules: ``similar_bullets`` and ``short_bullets`` merge items of one list.

A bullet is a single-line unordered item (``-``, ``*``, ``+``); items of one list have the
same indentation and marker. Source: MoonHub's compactor, the Layer 1 table ("合并相似项目
符号", bigram similarity; "合并短项目符号").
"""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Callable
from dataclasses import dataclass

from compactctl.layers.text_rules.lines import DECORATIVE_RE
from compactctl.layers.text_rules.protect import PLACEHOLDER_RE, inline_code_spans
from compactctl.text import CJK_LETTERS

__all__ = [
    "SHORT_BULLET_MAX_CHARS",
    "SHORT_BULLET_MIN_RUN",
    "SIMILAR_BULLETS_THRESHOLD",
    "merge_short_bullets",
    "merge_similar_bullets",
]

#: ``short_bullets``: a bullet is short when its text has at most this many characters.
SHORT_BULLET_MAX_CHARS = 30
#: ``short_bullets``: the shortest run of short bullets that is merged.
SHORT_BULLET_MIN_RUN = 3
#: ``similar_bullets``: default word-bigram Jaccard similarity at which two bullets merge.
SIMILAR_BULLETS_THRESHOLD = 0.8

# A bullet line: blanks (group 1: the indentation), a marker (group 2), at least one blank, then
# text that starts with a non-blank (group 3) to the end of the line. Found in the whole text: at
# its start, or after a newline (two regexes rather than one with ``^`` and re.M, so that the
# search can skip from newline to newline). Group 1 starts where the line starts; a match ends
# where the line ends. The possessive repeats give back nothing a match could use (the marker
# and ``\S`` are no blank, ``[^\n]*+`` stops at the line end).
_BULLET_LINE_AT_START_RE = re.compile(r"([ \t]*+)([-*+])[ \t]++(\S[^\n]*+)")
_BULLET_LINE_RE = re.compile(r"\n([ \t]*+)([-*+])[ \t]++(\S[^\n]*+)")

# A word: one CJK letter, or a run of other word characters.
_TOKEN_RE = re.compile(f"[{CJK_LETTERS}]|[^\\W{CJK_LETTERS}]+")


@dataclass(frozen=True, slots=True)
class _Bullet:
    """One single-line unordered list item, and where its line is in the text."""

    line: str
    peer_key: tuple[str, str]  # (indentation, marker): items of the same list level
    text: str
    has_body: bool  # followed by a child item or an indented continuation line
    start: int  # offset of the line's first character in the text
    end: int  # offset just after its last character (its newline, or the end of the text)


def _indent_width(line: str) -> int:
    return len(line[: len(line) - len(line.lstrip(" \t"))].expandtabs(4))


def _scan_bullets(text: str) -> list[_Bullet]:
    """Every bullet of ``text`` (lines split on ``\\n``), in order: a bullet line
    (:data:`_BULLET_LINE_RE`) that is not decorative (``- - -`` is a rule, not an item).

    The regexes find the bullet lines in the whole text, so the other lines cost no Python
    step. The last text scanned and its bullets are kept: ``short_bullets`` and
    ``similar_bullets`` run one after the other, and the second usually gets the text the
    first returned unchanged.
    """
    last_text, last_bullets = _last_scan[0]
    if last_text is text:
        return last_bullets
    bullets: list[_Bullet] = []
    size = len(text)
    first = _BULLET_LINE_AT_START_RE.match(text)
    matches = _BULLET_LINE_RE.finditer(text)
    for match in itertools.chain((first,) if first is not None else (), matches):
        start, end = match.start(1), match.end()
        line = text[start:end]
        indent, marker = match.group(1), match.group(2)
        # A decorative line has only marks after its blanks: "+" is none, and neither is a
        # first character of the item's text outside -*=_~ (most items are words).
        if (
            marker != "+"
            and text[match.start(3)] in _DECORATIVE_MARKS
            and DECORATIVE_RE.fullmatch(line) is not None
        ):
            continue
        has_body = False
        if end + 1 < size:  # a next line with at least one character
            next_end = text.find("\n", end + 1)
            next_line = text[end + 1 : next_end if next_end >= 0 else size]
            has_body = next_line.strip() != "" and _indent_width(next_line) > len(
                indent.expandtabs(4)
            )
        bullets.append(
            _Bullet(line, (indent, marker), match.group(3).rstrip(), has_body, start, end)
        )
    _last_scan[0] = (text, bullets)
    return bullets


_DECORATIVE_MARKS = "-*=_~"
# The last text _scan_bullets scanned and its bullets (one entry, replaced as a whole).
_last_scan: list[tuple[str, list[_Bullet]]] = [("", [])]


def _code_tokens(text: str) -> frozenset[str]:
    """Inline code spans and code placeholders in one bullet's text."""
    found: set[str] = set()
    if "`" in text:  # no inline span without a backtick
        found.update(text[start:end] for start, end in inline_code_spans(text, 0, len(text)))
    if not text.isascii():  # no placeholder without a private-use character
        found.update(match.group() for match in PLACEHOLDER_RE.finditer(text))
    return frozenset(found)


def _grams(text: str) -> frozenset[tuple[str, ...]]:
    """Word bigrams (CJK characters count as words); unigrams for a one-word text."""
    tokens = _TOKEN_RE.findall(text.lower())
    if len(tokens) < 2:
        return frozenset((token,) for token in tokens)
    return frozenset(zip(tokens, tokens[1:], strict=False))


@dataclass(slots=True)
class _Candidate:
    bullet: _Bullet
    grams: frozenset[tuple[str, ...]]
    codes: frozenset[str]


def _candidate(bullet: _Bullet) -> _Candidate:
    return _Candidate(bullet, *_compared(bullet.text))


@functools.lru_cache(maxsize=4096)
def _compared(text: str) -> tuple[frozenset[tuple[str, ...]], frozenset[str]]:
    """What two bullets' texts are compared by: word bigrams and code tokens (kept for the
    texts seen last: the rule chain repeats, and each step of a traced chain runs the rule
    again, on the same items)."""
    return _grams(text), _code_tokens(text)


def _similar(a: _Candidate, b: _Candidate, threshold: float) -> bool:
    if not a.grams and not b.grams:
        return a.bullet.text == b.bullet.text
    union = len(a.grams | b.grams)
    return len(a.grams & b.grams) / union >= threshold


def _merge_pair(older: _Candidate, newer: _Candidate) -> _Candidate | None:
    """The bullet to keep (longer; newer on a tie), or None if it would lose code."""
    kept, dropped = (
        (newer, older) if len(newer.bullet.text) >= len(older.bullet.text) else (older, newer)
    )
    return kept if dropped.codes <= kept.codes else None


def _merge_runs(
    text: str, max_chars: int | None, merge: Callable[[list[_Bullet]], list[str]]
) -> str:
    """``text`` with each run of bullets of one list replaced by ``merge(run)``: the
    consecutive bullets with the same indentation and marker, without a body and (with
    ``max_chars``) with at most that many characters of text. ``text`` itself when nothing
    was merged.

    ``merge`` returns the run's own lines, or fewer lines: only the runs it shortens are
    written again; the rest of the text is copied as it is.
    """
    parts: list[str] = []
    position = 0  # where the text not yet copied starts
    run: list[_Bullet] = []
    for bullet in _scan_bullets(text):
        if bullet.has_body or (max_chars is not None and len(bullet.text) > max_chars):
            continue  # (not in a run: it ends the run before it, as any other line does)
        if run and (run[-1].end + 1 != bullet.start or run[-1].peer_key != bullet.peer_key):
            position = _merge_run(text, run, merge, parts, position)
            run = []
        run.append(bullet)
    if run:
        position = _merge_run(text, run, merge, parts, position)
    if not parts:  # nothing merged
        return text
    parts.append(text[position:])
    return "".join(parts)


def _merge_run(
    text: str,
    run: list[_Bullet],
    merge: Callable[[list[_Bullet]], list[str]],
    parts: list[str],
    position: int,
) -> int:
    """Append to ``parts`` the text from ``position`` to the end of ``run`` with the run
    merged, if ``merge`` shortens it; return where the text not yet copied starts."""
    if len(run) < 2:
        return position  # (a single bullet is never merged)
    merged = merge(run)
    if len(merged) == len(run):
        return position
    parts.append(text[position : run[0].start])
    parts.append("\n".join(merged))
    return run[-1].end


def _merge_similar_run(run: list[_Bullet], threshold: float) -> list[str]:
    """The lines of one run after merging adjacent similar bullets (a stack: each new item
    merges into the one before it while they are similar)."""
    kept: list[_Candidate] = []
    for bullet in run:
        current = _candidate(bullet)
        while kept and _similar(kept[-1], current, threshold):
            merged = _merge_pair(kept[-1], current)
            if merged is None:
                break
            kept.pop()
            current = merged
        kept.append(current)
    return [candidate.bullet.line for candidate in kept]


def _merge_short_run(run: list[_Bullet]) -> list[str]:
    """One line for a run of at least :data:`SHORT_BULLET_MIN_RUN` short bullets; else the
    run as it is."""
    if len(run) < SHORT_BULLET_MIN_RUN:
        return [bullet.line for bullet in run]
    indent, marker = run[0].peer_key
    return [f"{indent}{marker} " + "; ".join(bullet.text for bullet in run)]


def merge_similar_bullets(text: str, threshold: float = SIMILAR_BULLETS_THRESHOLD) -> str:
    r"""Merge adjacent similar bullets, keeping the longer one (the newer one on a tie).

    Bullets are single-line unordered items (``-``, ``*``, ``+``) of the same list: same
    indentation and marker, on consecutive lines. Similarity is the Jaccard index of their word
    bigrams (lower-cased; each CJK character is a word; a one-word item uses its word). Merging
    repeats until no two adjacent items in the output are similar, comparing neighbours only
    (linear in the number of items). An item with a child item or an indented continuation
    line, an ordered item (``1.``) and any other line are left alone and separate runs. Two
    items are not merged if the dropped one has inline code the kept one lacks.

    :param threshold: similarity in (0, 1] at which two items merge (default 0.8).
    :raises ValueError: if ``threshold`` is not in (0, 1].

    Source: MoonHub's compactor, Layer 1 table ("合并相似项目符号", bigram similarity).

    >>> merge_similar_bullets('- run the unit tests for the parser\n'
    ...                       '- run the unit tests for the parser module\n- other')
    '- run the unit tests for the parser module\n- other'
    """
    if not 0.0 < threshold <= 1.0:
        raise ValueError(f"threshold must be in (0, 1], got {threshold!r}")
    return _merge_runs(text, None, functools.partial(_merge_similar_run, threshold=threshold))


def merge_short_bullets(text: str) -> str:
    r"""Merge each run of three or more short adjacent bullets into one, joined with ``; ``.

    A short bullet is a single-line unordered item (``-``, ``*``, ``+``) whose text has at most
    :data:`SHORT_BULLET_MAX_CHARS` (30) characters; a run is made of consecutive items with the
    same indentation and marker, without children or indented continuation lines. Ordered
    items are left alone (their numbers matter). The merged item keeps the first item's
    indentation and marker. Source: MoonHub's compactor, Layer 1 table
    ("合并短项目符号").

    >>> merge_short_bullets('Files:\n- a.py\n- b.py\n- c.py\n- a much longer bullet that stays\n')
    'Files:\n- a.py; b.py; c.py\n- a much longer bullet that stays\n'
    """
    return _merge_runs(text, SHORT_BULLET_MAX_CHARS, _merge_short_run)
