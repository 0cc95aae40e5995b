"""The literal prefilters of the extractive summarizer's sentence regexes: every match of
DEFER_RE, PENDING_RE, NEXT_RE and the decision patterns holds one of their words, so a text
without any of them is skipped with the same result. Each regex and its words are built
from one table (intent._table), which refuses a word that a match of its row may lack."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compactctl.summarize.extractive import intent
from compactctl.summarize.extractive.intent import (
    _DECISION_RES,
    DECISION_WORDS,
    DEFER_RE,
    DEFER_WORDS,
    EXPLICIT_DECISION_WORDS,
    NEGATIVE_WORDS,
    NEXT_RE,
    NEXT_WORDS,
    PENDING_RE,
    PENDING_WORDS,
    holds_word,
    required_literal,
)

PAIRS: list[tuple[re.Pattern[str], tuple[str, ...]]] = [
    (DEFER_RE, DEFER_WORDS),
    (PENDING_RE, PENDING_WORDS),
    (NEXT_RE, NEXT_WORDS),
    *((pattern, DECISION_WORDS) for _, pattern in _DECISION_RES),
    (_DECISION_RES[0][1], EXPLICIT_DECISION_WORDS),  # rank 3 alone: eval's decisions
]

#: Every alternative of the four regexes, written out (the word in it, and its variants).
PHRASES = [
    "not now", "later", "todo", "to-do", "follow-up", "follow up", "at some point",
    "before the release", "eventually", "不是现在", "以后再", "稍后", "之后再", "回头再",
    "left undone", "still need to", "still needs to", "need to fix it later", "not done",
    "not yet", "still open", "remaining", "pending", "open item", "haven't",
    "have not done", "have not yet started", "have not finished", "待办", "还需要", "尚未",
    "未完成", "还没做", "之后再做", "遗留", "记下", "next step", "next, i'll", "next we will",
    "next i should", "next we need", "next:", "next up:", "then i'll", "then i will", "下一步",
    "接下来", "decision", "decided", "decide", "we agreed", "决定", "决策", "instead of",
    "rather than", "because", "so that", "trade-off", "tradeoff", "而不是", "因为", "为了",
    "以免", "避免", "不引入", "改用", "i'll", "i will", "we'll", "we will", "switching to",
    "going with", "chose", "choose", "opted", "prefer", "keeping", "改成", "改为", "选择",
    "回退", "采用",
]  # fmt: skip


def test_every_alternative_is_matched_and_holds_a_word():
    for phrase in PHRASES:
        hits = [words for pattern, words in PAIRS if pattern.search(phrase)]
        assert hits, phrase  # the list above covers the regexes' alternatives
        for variant in (phrase, phrase.upper(), phrase.title()):
            for pattern, words in PAIRS:
                if pattern.search(variant):
                    assert holds_word(variant, words), (variant, pattern.pattern)


_PIECES = [
    *PHRASES, *(p.upper() for p in PHRASES), " ", ".", ",", "x", "\u212a", "\u0130", "\u0131",
    "\u017f", "é", "'", "’", "-", "\n", "Step 3:", "ok",
]  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(_PIECES), max_size=12).map("".join))
def test_a_text_without_the_words_matches_no_regex(text: str):
    for pattern, words in PAIRS:
        if pattern.search(text) is not None:
            assert holds_word(text, words), (text, pattern.pattern)


def _rows(table: str) -> list[list[str]]:
    """A table's rows as written: the fragment, then the literal when it has its own."""
    return [re.split(r"\s{2,}", row.strip()) for row in table.strip().split("\n")]


#: Each prefilter table with the word list and the regex the module builds from it.
TABLES = [
    (intent._DEFER_TABLE, DEFER_WORDS, DEFER_RE),
    (intent._PENDING_TABLE, PENDING_WORDS, PENDING_RE),
    (intent._NEXT_TABLE, NEXT_WORDS, NEXT_RE),
    (intent._EXPLICIT_DECISION_TABLE, EXPLICIT_DECISION_WORDS, _DECISION_RES[0][1]),
    (intent._REASONED_DECISION_TABLE, None, _DECISION_RES[1][1]),
    (intent._INTENT_DECISION_TABLE, None, _DECISION_RES[2][1]),
    (intent._NEGATIVE_TABLE, NEGATIVE_WORDS, intent._NEGATIVE_RE),
]


@pytest.mark.parametrize(("table", "words", "pattern"), TABLES)
def test_the_word_lists_and_regexes_are_the_tables(table, words, pattern):
    """Read from the table's text here: the words are its rows' last column, each once, in
    order; the regex its fragments in order, English ones between word boundaries unless
    every one carries its own ``\\b``, CJK ones after them."""
    rows = _rows(table)
    assert all(len(row) in (1, 2) for row in rows) and len(rows) >= 6
    if words is not None:
        assert words == tuple(dict.fromkeys(row[-1] for row in rows))
    english = [row[0] for row in rows if row[0].isascii()]
    cjk = [row[0] for row in rows if not row[0].isascii()]
    bounded = not all(f.startswith("\\b") for f in english)
    head = "|".join(english)
    expected = "|".join([f"\\b(?:{head})\\b" if bounded else head, *cjk])
    assert pattern.pattern == expected and pattern.flags & re.IGNORECASE


def test_the_decision_words_are_the_three_ranks_words():
    ranks = [intent._EXPLICIT_DECISION_TABLE, intent._REASONED_DECISION_TABLE,
             intent._INTENT_DECISION_TABLE]  # fmt: skip
    assert [rank for rank, _ in _DECISION_RES] == [3, 2, 1]
    words = tuple(dict.fromkeys(row[-1] for table in ranks for row in _rows(table)))
    assert words == DECISION_WORDS
    assert set(EXPLICIT_DECISION_WORDS) < set(DECISION_WORDS)


def test_required_literal_stops_where_the_fragment_stops_being_literal():
    assert [required_literal(f) for f in (
        "later", "follow[- ]up", "still need(?:s)? to", "need to .{0,40}later", "trade-?off",
        r"\bnext,? (?:i|we)", r"\bthen i(?:'ll| will)\b", "leave \\w+ alone", "Go+d", "不是现在",
    )] == ["later", "follow", "still need", "need to", "trade", "next", "then i", "leave",
           "go", "不是现在"]  # fmt: skip


def test_a_table_word_a_match_may_lack_is_refused():
    assert intent._table("later\n    trade-?off    trade") == (
        ("later", "later"),
        ("trade-?off", "trade"),
    )
    for row in ("follow[- ]up    followup", "trade-?off    trade-", "next    nest"):
        with pytest.raises(ValueError, match="not in every match"):
            intent._table(row)
