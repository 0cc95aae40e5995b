"""Layer 1 speed-ups never change a result: each fast path agrees with the plain code it skips.

Each ``_reference_*`` below is the straightforward form (no literal prefilter, no shortcut) of
a function in :mod:`compactctl.layers.text_rules`, with the regexes as first written; the
property tests compare the two, through the public functions, on generated texts full of the
characters that the prefilters look for (backticks, fences, escapes, ``\\r``, pipes, ``#``,
bullets, emoji, CJK, private-use characters, every kind of blank).

A few checks still reach a private name, on purpose: a prefilter that must be exact (it finds
work exactly when the plain loop changes something: a false positive changes no result, only
the time, so no public function shows it), the bullet parser, and the code sample's chunking
(its limits are monkeypatched to reach every chunk boundary with small texts).
"""

from __future__ import annotations

import functools
import itertools
import math
import re
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compactctl import text as shared_text
from compactctl.io.jsonl import read_bytes
from compactctl.layers import text_rules as rules_text
from compactctl.layers.rules import RulesOptions, plan_rules
from compactctl.layers.text_rules import (
    MAX_PASSES,
    RULES,
    Rule,
    apply_rules,
    apply_rules_stepwise,
    looks_like_code,
    select_rules,
    strip_ansi,
)
from compactctl.layers.text_rules import bullets as tr_bullets
from compactctl.layers.text_rules import cjk as tr_cjk
from compactctl.layers.text_rules import emoji as tr_emoji
from compactctl.layers.text_rules import lines as tr_lines
from compactctl.layers.text_rules import markdown as tr_markdown
from compactctl.layers.text_rules import protect as tr_protect
from compactctl.layers.text_rules import selection as tr_selection
from compactctl.layers.text_rules.markdown import table_header
from compactctl.model import Message, event_from_dict
from tests.helpers import SAMPLES, fixture_strings

ALL = list(RULES.values())

# ---------------------------------------------------------------------------------------------
# References: the plain forms
# ---------------------------------------------------------------------------------------------


_REFERENCE_FENCE_OPEN_RE = re.compile(r"^[ \t]*(?:>[ \t]*)*(?:(`{3,})[^`\n]*|(~{3,})[^\n]*)$", re.M)
_REFERENCE_FENCE_CLOSE_RE = re.compile(r"^[ \t]*(?:>[ \t]*)*(`{3,}|~{3,})[ \t\r]*$", re.M)


def _reference_fenced_blocks(text: str) -> list[tuple[int, int]]:
    """The fence search as first written: multi-line regexes searched from each position."""
    blocks: list[tuple[int, int]] = []
    position = 0
    while True:
        opener = _REFERENCE_FENCE_OPEN_RE.search(text, position)
        if opener is None:
            return blocks
        fence = opener.group(1) or opener.group(2)
        end = -1
        for closer in _REFERENCE_FENCE_CLOSE_RE.finditer(text, opener.end() + 1):
            candidate = closer.group(1)
            if candidate[0] == fence[0] and len(candidate) >= len(fence):
                end = closer.end()
                break
        if end < 0:
            end = len(text) - 1 if text.endswith("\n") and len(text) > opener.end() else len(text)
            blocks.append((opener.start(), end))
            return blocks
        blocks.append((opener.start(), end))
        position = end


_REFERENCE_BACKTICK_RUN_RE = re.compile(r"`+")


def _reference_pair_runs(runs: Sequence[tuple[int, int]], spans: list[tuple[int, int]]) -> None:
    """Pair the backtick runs of one line: a run is closed by the next run as long as it."""
    k = 0
    while k < len(runs):
        size = runs[k][1] - runs[k][0]
        partner = next(
            (j for j in range(k + 1, len(runs)) if runs[j][1] - runs[j][0] == size), None
        )
        if partner is None:
            k += 1
        else:
            spans.append((runs[k][0], runs[partner][1]))
            k = partner + 1


def _reference_inline_code_spans(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """Inline spans as first written: every backtick run, lines told apart by a find."""
    spans: list[tuple[int, int]] = []
    line: list[tuple[int, int]] = []
    previous_end = start
    for match in _REFERENCE_BACKTICK_RUN_RE.finditer(text, start, end):
        if line and text.find("\n", previous_end, match.start()) >= 0:
            _reference_pair_runs(line, spans)
            line = []
        line.append(match.span())
        previous_end = match.end()
    _reference_pair_runs(line, spans)
    return spans


def _reference_spans(text: str) -> list[tuple[int, int, bool]]:
    spans: list[tuple[int, int, bool]] = []
    position = 0
    for start, end in _reference_fenced_blocks(text):
        spans.extend((s, e, False) for s, e in _reference_inline_code_spans(text, position, start))
        spans.append((start, end, True))
        position = end
    spans.extend((s, e, False) for s, e in _reference_inline_code_spans(text, position, len(text)))
    return spans


def _reference_sentinel(text: str) -> str:
    """The first private-use character (BMP, then planes 15 and 16) not in ``text``."""
    candidates = itertools.chain(
        range(0xE000, 0xF900), range(0xF0000, 0xFFFFE), range(0x100000, 0x10FFFE)
    )
    return next(chr(code) for code in candidates if chr(code) not in text)


def _reference_mask(text: str) -> tuple[str, list[str], str]:
    sentinel = _reference_sentinel(text)
    originals: list[str] = []
    inline_ids: dict[str, int] = {}
    parts: list[str] = []
    position = 0
    for start, end, is_block in _reference_spans(text):
        original = text[start:end]
        if is_block:
            index = len(originals)
            originals.append(original)
        else:
            index = inline_ids.setdefault(original, len(originals))
            if index == len(originals):
                originals.append(original)
        parts.append(text[position:start])
        parts.append(f"{sentinel}{index:07d}{sentinel}")
        position = end
    parts.append(text[position:])
    return "".join(parts), originals, sentinel


def _reference_pieces(
    masked: str, originals: Sequence[str], sentinel: str
) -> list[tuple[bool, str]]:
    pieces: list[tuple[bool, str]] = []
    position = 0
    for match in tr_protect.PLACEHOLDER_RE.finditer(masked):
        index = int(match.group(2))
        if match.group(1) != sentinel or index >= len(originals):
            continue
        pieces.append((False, masked[position : match.start()]))
        pieces.append((True, originals[index]))
        position = match.end()
    pieces.append((False, masked[position:]))
    return [piece for piece in pieces if piece[1] or piece[0]]


def _reference_apply_rules(text: str, rules: Sequence[Rule]) -> str:
    """apply_rules as first written: mask, repeat the chain, unmask, check."""
    if not rules or not text:
        return text
    masked, originals, sentinel = _reference_mask(text)
    current = masked
    for _ in range(MAX_PASSES):
        new = current
        for rule in rules:
            new = rule.fn(new)
        if new == current:
            break
        current = new
    if current == masked:
        return text
    result = "".join(piece for _, piece in _reference_pieces(current, originals, sentinel))
    if sentinel in result:
        return text
    if _reference_pieces(*_reference_mask(result)) != _reference_pieces(
        current, originals, sentinel
    ):
        return text
    return result


_REFERENCE_ERASE_LINE_RE = re.compile(r"(?:\x1b\[|\x9b)[0-2]?K")
# The ANSI regex with its alternatives in their first (unfactored) form.
_REFERENCE_ANSI_RE = re.compile(
    r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]"
    r"|(?:\x1b\]|\x9d)[^\x07\x1b\x9c\n]*(?:\x07|\x1b\\|\x9c)?"
    r"|\x1b[PX^_][^\x1b\x9c\n]*(?:\x1b\\|\x9c)?"
    r"|\x1b[ -/]*[0-~]"
    r"|[\x1b\x9b\x9c\x9d]"
)


def _reference_strip_ansi(text: str) -> str:
    if not any(char in text for char in "\x1b\x9b\x9c\x9d\r"):
        return text
    if "\r" in text:
        text = text.replace("\r\n", "\n")
        lines = []
        for line in text.split("\n"):
            shown = ""
            for segment in line.split("\r"):
                visible = _REFERENCE_ANSI_RE.sub("", segment)
                if _REFERENCE_ERASE_LINE_RE.search(segment):
                    shown = visible
                elif visible:
                    shown = visible + shown[len(visible) :]
            lines.append(shown if "\r" in line else line)
        text = "\n".join(lines)
    return _REFERENCE_ANSI_RE.sub("", text)


# looks_like_code's per-line tests, each regex run on one line.
_REFERENCE_NUMBERED_LINE_RE = re.compile(r"[ \t]*\d+(?:\t|→|:[ \t]|\|)")
_REFERENCE_DIFF_HUNK_RE = re.compile(r"@@ -\d+(?:,\d+)? \+\d+(?:,\d+)? @@")
_REFERENCE_CODE_LINE_RE = re.compile(
    r"^[ \t]*(?:def |class |import |from [\w.]+ import |return\b|elif\b|else\s*[:{]|try\s*[:{]"
    r"|except\b|finally\s*[:{]|catch\s*\(|function\b|const |let |var |fn |pub |package |impl\b"
    r"|#include|#define|public |private |protected |static |async |await |@\w+|//|/\*|\*/"
    r"|[}\])]+[,;]?\s*$|\"[^\"\n]+\"\s*:"
    r"|[\w.]+(?:\[[^\]\n]*\])?\s*(?:[-+*/%|&^]|//|\*\*|<<|>>)?=(?!=)\s*\S"
    r"|[\w.]+\(.*\)[;,]?\s*$)"
    r"|[{;]\s*$"
)


def _reference_looks_like_code(text: str) -> bool:
    lines = [match.group() for match in re.finditer(r"[^\n]+", text) if match.group().strip()]
    lines = lines[:500]
    if not lines:
        return False
    if lines[0].lstrip().startswith("#!"):
        return True
    if any(line.startswith("@@") and _REFERENCE_DIFF_HUNK_RE.match(line) for line in lines):
        return True
    n = len(lines)
    numbered = sum(1 for line in lines if _REFERENCE_NUMBERED_LINE_RE.match(line))
    if n >= 2 and numbered >= 0.6 * n:
        return True
    code = sum(1 for line in lines if _REFERENCE_CODE_LINE_RE.search(line))
    indented = sum(1 for line in lines if line.startswith(("    ", "\t")))
    return code >= 0.35 * n or (code >= 0.15 * n and indented >= 0.3 * n)


def _reference_collapse_whitespace(text: str) -> str:
    """collapse_whitespace as first written: every line stripped, one at a time."""
    lines, trailing = tr_lines.split_lines(text)
    out: list[str] = []
    previous_blank = False
    for line in lines:
        stripped = line.rstrip(" \t\f\v\u00a0\u3000\r")
        if len(stripped) < len(line) and "\r" in line[len(stripped) :]:
            stripped += "\r"
        blank = stripped in ("", "\r")
        if not (blank and previous_blank):
            out.append(stripped)
        previous_blank = blank
    if out == lines:
        return text
    return tr_lines.join_lines(out, trailing)


# The decorative line as first written (a repeated group).
_REFERENCE_DECORATIVE_RE = re.compile(r"[ \t]*(?:[-*=_~][ \t]*){3,}\r?")
_REFERENCE_BULLET_RE = re.compile(r"([ \t]*)([-*+])[ \t]+(\S.*)")


def _reference_indent_width(line: str) -> int:
    return len(line[: len(line) - len(line.lstrip(" \t"))].expandtabs(4))


def _reference_bullet(
    line: str, next_line: str | None
) -> tuple[str, tuple[str, str], str, bool] | None:
    """One line parsed alone: ``(line, (indentation, marker), text, has_body)`` or None."""
    match = _REFERENCE_BULLET_RE.fullmatch(line)
    if match is None or tr_lines.DECORATIVE_RE.fullmatch(line) is not None:
        return None
    has_body = (
        next_line is not None
        and next_line.strip() != ""
        and _reference_indent_width(next_line) > _reference_indent_width(line)
    )
    return line, (match.group(1), match.group(2)), match.group(3).rstrip(), has_body


def _reference_bullets(text: str) -> list[tuple[int, tuple[str, tuple[str, str], str, bool]]]:
    """``(line index, parsed)`` of each bullet line, every line parsed alone."""
    lines = tr_lines.split_lines(text)[0]
    parsed = [
        (i, _reference_bullet(line, lines[i + 1] if i + 1 < len(lines) else None))
        for i, line in enumerate(lines)
    ]
    return [(i, bullet) for i, bullet in parsed if bullet is not None]


def _reference_merge_runs(text: str, max_chars: int | None, merge: Any) -> str:
    """The bullet rules as first written: every line parsed, the text joined again."""
    lines, trailing = tr_lines.split_lines(text)
    out: list[str] = []
    run: list[Any] = []
    for i, line in enumerate(lines):
        parsed = _reference_bullet(line, lines[i + 1] if i + 1 < len(lines) else None)
        if (
            parsed is not None
            and not parsed[3]
            and (max_chars is None or len(parsed[2]) <= max_chars)
        ):
            bullet = tr_bullets._Bullet(*parsed, start=-1, end=-1)
            if run and run[-1].peer_key != bullet.peer_key:
                out.extend(merge(run))
                run = []
            run.append(bullet)
            continue
        if run:
            out.extend(merge(run))
            run = []
        out.append(line)
    if run:
        out.extend(merge(run))
    if len(out) == len(lines):
        return text
    return tr_lines.join_lines(out, trailing)


def _assert_bullet_rules_agree(text: str) -> None:
    """The bullet scan finds what the per-line parse finds, and both rules give what the line
    loop gives."""
    lines = tr_lines.split_lines(text)[0]
    line_at = {0: 0} | {m.end(): i for i, m in enumerate(re.finditer("\n", text), 1)}
    scanned = tr_bullets._scan_bullets(text)
    assert [
        (line_at[b.start], (b.line, b.peer_key, b.text, b.has_body)) for b in scanned
    ] == _reference_bullets(text)
    for b in scanned:
        assert text[b.start : b.end] == b.line == lines[line_at[b.start]]
    assert rules_text.merge_short_bullets(text) == _reference_merge_runs(
        text, tr_bullets.SHORT_BULLET_MAX_CHARS, tr_bullets._merge_short_run
    )
    for threshold in (tr_bullets.SIMILAR_BULLETS_THRESHOLD, 0.3):
        assert rules_text.merge_similar_bullets(text, threshold) == _reference_merge_runs(
            text, None, functools.partial(tr_bullets._merge_similar_run, threshold=threshold)
        )


def _reference_code_tokens(text: str) -> frozenset[str]:
    found = {text[start:end] for start, end in _reference_inline_code_spans(text, 0, len(text))}
    found.update(match.group() for match in tr_protect.PLACEHOLDER_RE.finditer(text))
    return frozenset(found)


def _reference_sample_lines(text: str) -> list[str]:
    """The first 500 non-blank lines, from the whole text split at once."""
    return [line for line in text.split("\n") if line.strip()][:500]


def _reference_code_lines(lines: Sequence[str]) -> int:
    return sum(1 for line in lines if _REFERENCE_CODE_LINE_RE.search(line))


def _reference_select(
    text: str, is_code: bool = False, only: Sequence[str] | None = None, skip: Sequence[str] = ()
) -> list[str]:
    chosen = [rule for rule in ALL if (only is None or rule.name in only) and rule.name not in skip]
    if is_code:
        return [rule.name for rule in chosen if rule.safe_for_code]
    dropped: set[str] = set()
    if tr_cjk.CJK_RE.search(text) is None:
        dropped.add("cjk_punct")
    lines = text.split("\n")
    if not any(table_header(lines, i) for i in range(len(lines))):
        dropped.add("tables")
    if _REFERENCE_FENCE_OPEN_RE.search(text) is not None:
        dropped.update(("similar_bullets", "short_bullets"))
    return [rule.name for rule in chosen if rule.name not in dropped]


_PROSE = "plain words here"
"""A line that is no kind of code line: not a code start or end, not numbered, not indented."""


def _assert_counts_agree(text: str) -> None:
    """``looks_like_code`` agrees with the reference on ``text`` followed by ``k`` prose lines,
    for each ``k`` around which one of the reference's ratios (code lines 35% and 15%, indented
    30%, numbered 60%) crosses its threshold, and for many more: so the fast path counts each
    kind of line of ``text`` exactly as the per-line regexes do (a count off by one flips the
    answer at one of these ``k``)."""
    lines = _reference_sample_lines(text)
    n = len(lines)
    if n == 0:
        assert looks_like_code(text) is _reference_looks_like_code(text) is False
        return
    code = _reference_code_lines(lines)
    indented = sum(1 for line in lines if line.startswith(("    ", "\t")))
    numbered = sum(1 for line in lines if _REFERENCE_NUMBERED_LINE_RE.match(line))
    ks = {0, 3 * n + 3}
    for count, ratio in ((code, 0.35), (code, 0.15), (indented, 0.3), (numbered, 0.6)):
        edge = math.floor(count / ratio) - n  # count >= ratio * (n + k) up to about here
        ks.update(range(edge - 1, edge + 3))
    for k in sorted(k for k in ks if 0 <= k <= 500 - n):
        padded = text + f"\n{_PROSE}" * k
        assert looks_like_code(padded) == _reference_looks_like_code(padded), (text, k)


def _reference_steps(text: str, rules: Sequence[Rule]) -> list[str]:
    """The text after each rule, applying them one at a time (the report's byRule)."""
    steps = []
    for rule in rules:
        text = apply_rules(text, [rule])
        steps.append(text)
    return steps


# ---------------------------------------------------------------------------------------------
# Generated texts with the trigger characters
# ---------------------------------------------------------------------------------------------

TRIGGERS = [
    "`", "``", "```", "````", "~~~", "~~", "~", "```py", "> ```", "   ```", "`x`", "``a`b``",
    "\x1b", "\x1b[", "\x1b[31m", "\x1b[0m", "\x1b[K", "\x1b[2K", "\x1b]0;title\x07", "\x1b]8;;u",
    "\x1b\\", "\x1bP", "\x1b_", "\x1b(B", "\x1b7", "\x9b", "\x9b1K", "\x9c", "\x9d", "\x07",
    "\r", "\r\n", "\n", "\n\n", " ", "  ", "\t", "\xa0", "\u3000", "\x85", "\u2028", "\x1c",
    "|", "| a | b |", "|---|---|", "---", "***", "===", "___", "- - -", "- ", "* ", "+ ", "  - ",
    "# ", "## ", "#", "#!", "@@ -1 +1 @@", "{", "}", ";", "x = 1", "def f():", "f(x)", "\"k\": 1",
    "1\t", "12→", "3: ", "    ", "✅", "🚀", "⚠️", "1️⃣", "\u200d", "\ufe0f", "你好", "，", "。",
    "word", "the unit tests", "\ue000", "\ue0000000000\ue000", "\ue0010000000\ue001",
    "\ue001", "0000001", "é",
]  # fmt: skip
TEXTS = st.one_of(
    st.lists(st.sampled_from(TRIGGERS), max_size=40).map("".join),
    st.lists(st.lists(st.sampled_from(TRIGGERS), max_size=6).map("".join), max_size=20).map(
        "\n".join
    ),
    st.text(max_size=120),
)
# The brief's alphabet for collapse_whitespace: every blank it strips, line ends of each kind.
BLANKS = st.text(
    alphabet=st.sampled_from([" ", "\t", "\f", "\v", "\u00a0", "\u3000", "\r", "\n", "a"]),
    max_size=40,
)
# The same without ``\r`` (collapse_whitespace's path for such texts).
BLANKS_WITHOUT_CR = st.text(
    alphabet=st.sampled_from([" ", "\t", "\f", "\v", "\u00a0", "\u3000", "\n", "a"]),
    max_size=40,
)
SETTINGS = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(text=TEXTS)
def test_span_prefilters_agree_with_the_full_search(text: str) -> None:
    assert tr_protect.protected_spans(text) == [(s, e) for s, e, _ in _reference_spans(text)]
    masked = tr_protect.mask(text)  # (a fenced block and an inline span mask differently)
    assert masked == _reference_mask(text)
    assert tr_protect.masked_pieces(*masked) == _reference_pieces(*masked)


@SETTINGS
@given(text=TEXTS)
def test_apply_rules_agrees_with_its_first_form(text: str) -> None:
    for rules in (ALL, select_rules(text), select_rules(text, is_code=True), [RULES["ansi"]]):
        assert apply_rules(text, rules) == _reference_apply_rules(text, rules)


@SETTINGS
@given(text=TEXTS)
def test_stepwise_matches_one_rule_at_a_time(text: str) -> None:
    for rules in (ALL, select_rules(text)):
        result, steps = apply_rules_stepwise(text, rules)
        assert result == apply_rules(text, rules)
        assert steps == _reference_steps(text, rules)


@SETTINGS
@given(text=TEXTS)
def test_factored_ansi_regex_matches_the_same_spans(text: str) -> None:
    assert [m.span() for m in shared_text.ANSI_RE.finditer(text)] == [
        m.span() for m in _REFERENCE_ANSI_RE.finditer(text)
    ]
    assert strip_ansi(text) == _reference_strip_ansi(text)


@SETTINGS
@given(text=TEXTS)
def test_looks_like_code_agrees_with_the_per_line_regex(text: str) -> None:
    assert looks_like_code(text) == _reference_looks_like_code(text)
    for line in text.split("\n"):  # each line is judged as the per-line regexes judge it
        _assert_counts_agree(line)
        _assert_counts_agree(f"{line}\n{line}")  # (a number prefix counts from two lines)


@SETTINGS
@given(text=TEXTS)
def test_code_lines_are_counted_in_one_pass(text: str) -> None:
    lines = _reference_sample_lines(text)
    assert tr_selection._code_sample(text) == "".join("\n" + line for line in lines)
    _assert_counts_agree(text)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=TEXTS, chunk=st.integers(min_value=0, max_value=12), limit=st.integers(1, 6))
def test_code_sample_in_small_chunks(text: str, chunk: int, limit: int) -> None:
    # Chunks of a few characters and a sample of a few lines: every boundary case is reached.
    saved = tr_selection._CODE_SAMPLE_LINES, tr_selection._SAMPLE_CHUNK_CHARS
    saved_head = tr_selection._SAMPLE_HEAD_RE
    try:
        tr_selection._CODE_SAMPLE_LINES, tr_selection._SAMPLE_CHUNK_CHARS = limit, chunk
        tr_selection._SAMPLE_HEAD_RE = re.compile(f"(?:\\n[^\\n]*+){{{limit}}}")
        expected = [line for line in text.split("\n") if line.strip()][:limit]
        assert tr_selection._code_sample(text) == "".join("\n" + line for line in expected)
    finally:
        tr_selection._CODE_SAMPLE_LINES, tr_selection._SAMPLE_CHUNK_CHARS = saved
        tr_selection._SAMPLE_HEAD_RE = saved_head


@SETTINGS
@given(text=TEXTS)
def test_selection_prefilters_agree(text: str) -> None:
    assert [rule.name for rule in select_rules(text)] == _reference_select(text)
    for only, skip in ((["emoji", "tables", "short_bullets"], ["tables"]), (None, ["ansi"])):
        for is_code in (False, True):
            assert [
                rule.name for rule in select_rules(text, is_code=is_code, only=only, skip=skip)
            ] == _reference_select(text, is_code, only, skip)
            assert [
                rule.name
                for rule in select_rules(
                    text, is_code=is_code, only=None if only is None else set(only), skip=skip
                )
            ] == _reference_select(text, is_code, only, skip)


@SETTINGS
@given(text=TEXTS)
def test_rule_prefilters_agree_with_their_line_tests(text: str) -> None:
    lines = tr_lines.split_lines(text)[0]
    _assert_bullet_rules_agree(text)
    for line in lines:
        assert bool(tr_lines.DECORATIVE_RE.fullmatch(line)) == bool(
            _REFERENCE_DECORATIVE_RE.fullmatch(line)
        ), repr(line)
    decorative = (
        tr_lines._DECORATIVE_START_RE.match(text) is not None
        or tr_lines._DECORATIVE_AFTER_NEWLINE_RE.search(text) is not None
    )
    assert decorative == any(_REFERENCE_DECORATIVE_RE.fullmatch(line) for line in lines)
    heading = (
        tr_markdown._HEADING_START_RE.match(text) is not None
        or tr_markdown._HEADING_AFTER_NEWLINE_RE.search(text) is not None
    )
    assert heading == any(tr_lines.HEADING_RE.match(line) for line in lines)
    if text.isascii():  # strip_emoji returns early: no emoji can start
        assert tr_emoji._EMOJI_CANDIDATE_RE.search(text) is None
    for line in lines:
        assert tr_bullets._code_tokens(line) == _reference_code_tokens(line)


# Lists: items of several levels and markers, short and long, similar and not, with bodies,
# decorative lines, code, blank and other lines between.
BULLET_LINES = [
    "- a", "- a b", "- run the unit tests", "- run the unit tests now", "* b", "+ c", "  - d",
    "\t- e", "    * f", "- - -", "* * *", "-", "- ", "-\t", "-x", "+ + +", "- `x` y", "- `y` y",
    "  continued", "    deeper", "", " ", "\r", "- a\r", "- a  ", "1. one", "text", "# h",
    "- \ue0000000000\ue000 z", "- 你好 世界", "- " + "w" * 31, "- ~ ~ ~", "- *x*", "\xa0- n",
]  # fmt: skip
BULLET_TEXTS = st.lists(st.sampled_from(BULLET_LINES), max_size=14).flatmap(
    lambda lines: st.sampled_from(["\n".join(lines), "\n".join(lines) + "\n"])
)


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=st.one_of(BULLET_TEXTS, TEXTS))
def test_bullet_scan_agrees_with_the_line_loop(text: str) -> None:
    _assert_bullet_rules_agree(text)


TABLE_LINES = [
    "| a | b |", "|---|---|", "|:--|--:|", "| x |", "|-|", "-|-", "---|---", "a | b", "|---|\r",
    "  |--|--|  ", "\t| - |", "| --- | - |", "\\| a | b |", "| a \\| b |", "|", "-", "---",
    ":-:", "|:-:|:-:|:-:|", "| 1 | 2 | 3 |", "", " ", "text", "- item", "|---|---|\xa0",
]  # fmt: skip
TABLE_TEXTS = st.lists(st.sampled_from(TABLE_LINES), max_size=8).map("\n".join)


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=st.one_of(TABLE_TEXTS, TEXTS))
def test_table_search_agrees_with_every_line_tried(text: str) -> None:
    lines = text.split("\n")
    expected = any("|" in line and table_header(lines, i) for i, line in enumerate(lines))
    assert tr_selection._has_table(text) == expected


#: Separator rows (alignment colons, blanks around the cells, outer pipes left out, a last
#: ``\r``) and lines that are not one, each with whether it is a separator row.
SEPARATOR_ROWS = [
    ("|---|---|", True), ("|:--|--:|", True), ("| :-: | --- |", True), ("---|---", True),
    ("--- | ---", True), (":--|:-:", True), ("|---|", True), ("  |--|--|  ", True),
    ("\t| - |\t", True), ("|---|---|\r", True), ("| --- |  \r", True), ("-|-", True),
    ("|-", True), ("-|", True), (":---:|:---:|", True), ("|---|---|---", True),
    ("---", True), (":-:", True),  # a separator row, but one without a pipe starts no table
    ("| a | b |", False), ("|---|-x-|", False), ("|- -|---|", False), ("|---||---|", False),
    ("|:|---|", False), ("|===|===|", False), ("| --- \\| --- |", False),
    ("|---|---|\xa0", False), ("|---|\r|", False), ("", False), ("|", False),
    ("- item", False), ("|::--|", False), ("|--::|", False), ("||---|", False),
]  # fmt: skip


@pytest.mark.parametrize(("line", "separator"), SEPARATOR_ROWS)
def test_table_header_and_the_table_search_agree_on_separator_rows(
    line: str, separator: bool
) -> None:
    """markdown's table_header and selection's table search share one separator pattern
    (markdown.TABLE_SEPARATOR): a header row with as many cells as ``line`` starts a table
    for both, or for neither."""
    assert (tr_markdown._TABLE_SEPARATOR_RE.fullmatch(line) is not None) == separator
    assert (tr_selection._SEPARATOR_LINE_RE.fullmatch("\n" + line) is not None) == separator
    cells = len(tr_markdown._row_cells(line))
    head = "| " + " | ".join(["h"] * cells) + " |"
    table = separator and "|" in line
    assert (table_header([head, line], 0) is not None) == table
    assert tr_selection._has_table(f"{head}\n{line}") == table
    assert tr_selection._has_table(f"text\n{head}\n{line}\n| 1 |") == table


#: The separator pattern without its possessive repeats: the backtracking regex it stands for.
BACKTRACKING_SEPARATOR = re.compile(re.sub(r"(?<=[*+?])\+", "", tr_markdown.TABLE_SEPARATOR))


def test_the_backtracking_separator_is_the_pattern_without_possessive_repeats() -> None:
    assert "+" not in BACKTRACKING_SEPARATOR.pattern.replace("-+", "")
    assert BACKTRACKING_SEPARATOR.pattern.count("-+") == 2


@settings(max_examples=2000, deadline=None)
@given(st.lists(st.sampled_from([" ", "\t", "|", ":", "-", "--", "\r", "x", "\n"]), max_size=14))
def test_the_possessive_separator_matches_what_backtracking_would(pieces: list[str]) -> None:
    """Giving back a possessive repeat could never make a match: the shared pattern matches
    exactly the lines its backtracking form matches, alone and after a newline."""
    line = "".join(pieces)
    expected = BACKTRACKING_SEPARATOR.fullmatch(line) is not None
    assert (tr_markdown._TABLE_SEPARATOR_RE.fullmatch(line) is not None) == expected
    found = {m.span() for m in tr_selection._SEPARATOR_LINE_RE.finditer("\n" + line)}
    slow = re.compile(r"\n" + BACKTRACKING_SEPARATOR.pattern + r"(?=\n|\Z)")
    assert found == {m.span() for m in slow.finditer("\n" + line)}


def _fixture_texts() -> list[str]:
    """Every string value in the JSON and JSONL files of fixtures/, each once, sorted."""
    return sorted(set(fixture_strings()))


def test_bullet_rules_agree_with_the_line_loop_on_every_fixture_text() -> None:
    texts = _fixture_texts()
    assert len(texts) > 1000
    listed = [text for text in texts if tr_bullets._scan_bullets(text)]
    assert len(listed) > 50  # the fixtures do hold lists
    for text in texts:
        _assert_bullet_rules_agree(text)
        _assert_bullet_rules_agree(tr_protect.mask(text)[0])  # as apply_rules gives it


def test_collapse_whitespace_agrees_with_the_line_loop_on_every_fixture_text() -> None:
    changed = 0
    for text in _fixture_texts():
        for form in (text, text.replace("\r", "")):  # (without \r: the path that skips lines)
            expected = _reference_collapse_whitespace(form)
            assert rules_text.collapse_whitespace(form) == expected, form
            changed += expected != form
    assert changed > 50


def test_table_search_agrees_with_every_line_tried_on_every_fixture_text() -> None:
    tables = 0
    for text in _fixture_texts():
        lines = text.split("\n")
        expected = any("|" in line and table_header(lines, i) for i, line in enumerate(lines))
        assert tr_selection._has_table(text) == expected, text
        tables += expected
    assert tables >= 5  # the fixtures do hold tables


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=st.one_of(BLANKS, BLANKS_WITHOUT_CR, TEXTS))
def test_collapse_whitespace_agrees_with_the_line_loop(text: str) -> None:
    expected = _reference_collapse_whitespace(text)
    assert rules_text.collapse_whitespace(text) == expected
    # The prefilter is exact: it finds work exactly when the loop changes something.
    work = (
        tr_lines._WHITESPACE_WORK_RE.search(text) is not None
        or text.endswith(tr_lines._TRAILING_BLANK_ENDS)
        or tr_lines._WHITESPACE_WORK_AT_START_RE.match(text) is not None
    )
    assert work == (expected != text), repr(text)


@SETTINGS
@given(text=TEXTS)
def test_fence_lines_and_inline_spans_agree_with_the_search(text: str) -> None:
    blocks = [(start, end) for start, end, is_block in _reference_spans(text) if is_block]
    assert blocks == _reference_fenced_blocks(text)
    assert tr_protect.protected_spans(text) == [(s, e) for s, e, _ in _reference_spans(text)]
    assert tr_protect.has_fence_opener(text) == (_REFERENCE_FENCE_OPEN_RE.search(text) is not None)
    for start in range(len(text) + 1):  # every region start, as between fenced blocks
        assert tr_protect.inline_code_spans(text, start, len(text)) == (
            _reference_inline_code_spans(text, start, len(text))
        )
        assert tr_protect.inline_code_spans(text, 0, start) == (
            _reference_inline_code_spans(text, 0, start)
        )


_REFERENCE_UNESCAPED_PIPE_RE = re.compile(r"(?<!\\)\|")


@SETTINGS
@given(text=st.one_of(TEXTS, st.text(alphabet="`|\\ a\n", max_size=30)))
def test_literal_first_regexes_find_the_same(text: str) -> None:
    # the backtick runs (a literal-first regex) make the same inline spans
    assert tr_protect.inline_code_spans(text, 0, len(text)) == _reference_inline_code_spans(
        text, 0, len(text)
    )
    assert [m.span() for m in tr_markdown._UNESCAPED_PIPE_RE.finditer(text)] == [
        m.span() for m in _REFERENCE_UNESCAPED_PIPE_RE.finditer(text)
    ]
    assert tr_markdown._UNESCAPED_PIPE_RE.split(text) == _REFERENCE_UNESCAPED_PIPE_RE.split(text)


@pytest.mark.parametrize(
    "lines",
    [499, 500, 501, 1000, 1001, 2500],
)
def test_code_sample_is_the_first_500_non_blank_lines(lines: int) -> None:
    text = "\n".join("" if i % 3 == 0 else ("x = 1" if i % 5 else "words") for i in range(lines))
    expected = [line for line in text.split("\n") if line.strip()][:500]
    assert tr_selection._code_sample(text) == "".join("\n" + line for line in expected)
    assert looks_like_code(text) == _reference_looks_like_code(text)


def test_code_sample_of_a_huge_text_reads_only_its_head() -> None:
    line = "word " * 30
    text = "\n".join([line] * 20_000)  # 3 MB, far more than 500 lines
    assert tr_selection._code_sample(text) == ("\n" + line) * 500
    assert looks_like_code(text) is False


def test_fast_paths_agree_on_the_sample_sessions() -> None:
    texts = {
        event.text
        for path in SAMPLES.glob("*.canonical.jsonl")
        for event in read_bytes(path.read_bytes())
        if isinstance(event, Message) and event.text
    }
    assert len(texts) > 50
    for text in sorted(texts):
        assert looks_like_code(text) == _reference_looks_like_code(text)
        assert [rule.name for rule in select_rules(text)] == _reference_select(text)
        assert strip_ansi(text) == _reference_strip_ansi(text)
        for rules in (select_rules(text), select_rules(text, is_code=True)):
            result, steps = apply_rules_stepwise(text, rules)
            assert result == _reference_apply_rules(text, rules)
            assert steps == _reference_steps(text, rules)


def test_by_rule_report_counts_each_rule_once_in_order() -> None:
    text = "Done ✅  \n\n\n\n| a | b |\n|---|---|\n| 1 | 2 |\n---\n"
    log = [event_from_dict({"type": "message", "uuid": "a1", "role": "assistant", "content": text})]
    event, report = plan_rules(log, RulesOptions(), timestamp="2025-01-01T00:00:00Z")
    assert event is not None
    # 46 chars, 12 estimated tokens; one rule at a time in canonical order:
    # emoji: "✅ " goes (44 chars, 11 tokens); decorative: "---\n" (40, 10); tables: the 29
    # chars of the table become "a: 1; b: 2" (21, 6); whitespace: two trailing blanks and two
    # of the three blank lines (17, 5).
    assert report["byRule"] == {
        "decorative": {"messages": 1, "charsSaved": 4, "tokensSaved": 1},
        "emoji": {"messages": 1, "charsSaved": 2, "tokensSaved": 1},
        "tables": {"messages": 1, "charsSaved": 19, "tokensSaved": 4},
        "whitespace": {"messages": 1, "charsSaved": 4, "tokensSaved": 1},
    }
    assert apply_rules(text, ALL) == "Done\n\na: 1; b: 2\n"
