"""The literal prefilters in front of the extractive summarizer's per-line and per-sentence
regexes skip nothing a regex would match: every alternative of each regex (in several
cases), random texts built from those pieces, and every line and sentence of the texts in
fixtures/ (all of them, whole: about 14,000 texts, 2.5 MB) give the same result with the
prefilter as without it."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compactctl.summarize.extractive import extract, failures, intent
from compactctl.summarize.extractive.failures import (
    _ERROR_PREFIX_RE,
    _EXC_AT_START_RE,
    _FAILED_RE,
    _LOCATED_ERROR_RE,
    _LOCATED_MESSAGE_RE,
    _SHAPED_ERROR_RE,
    _log_level,
    _may_be_error_line,
    error_lines,
)
from compactctl.summarize.extractive.intent import (
    _CONSTRAINT_RE,
    _NEGATIVE_RE,
    CONSTRAINT_LITERALS,
    DEFER_RE,
    DEFER_WORDS,
    NEGATIVE_WORDS,
    holds_word,
    states_constraint,
)
from compactctl.summarize.extractive.prose import split_sentences
from tests.helpers import fixture_strings

_LINE_RES = (
    _FAILED_RE,
    _EXC_AT_START_RE,
    _ERROR_PREFIX_RE,
    _LOCATED_ERROR_RE,
    _SHAPED_ERROR_RE,
    _LOCATED_MESSAGE_RE,
)

#: One line for every alternative of each regex of error_lines (and a few near misses).
ERROR_SHAPES = [
    "FAILED tests/test_a.py::test_x - AssertionError: boom", "FAILED tests/test_a.py",
    "ERROR tests/test_b.py::test_y", "ERROR tests/test_b.py", "E   ValueError: bad",
    "E", "ValueError: bad value", "pkg.mod.LeaseExpired: lease 1", "KeyError:",
    "error: no such thing", "fatal: not a git repository", "panic! at the disco",
    "ERROR: x", "FATAL! y", "PANIC: z", "Error: oops", "error[E0308]: mismatched types",
    "src/a.py:42: error: Incompatible types", "a.c:3:5: error: expected ';'",
    "a.ts(3,5): error TS2322: Type", "a.ts(3): Error TS1", "x.ts(3,5) fatal error C1",
    "a.ts(3,5):ERROR TS9", "/x/a.py:4:9 - error: bad", "a.rs:3:5: error[E0308]: types",
    "Error: connection refused at scripts/deploy.sh:42", "TypeError! x at (/app/a.js:10:5)",
    "uncaught exception: bad at a.js:1", "tests/test_a.py:12: AssertionError",
    "tests/test_a.py:12: pkg.BadException: x", "./x.sh: line 42: rsync: command not found",
    "x.sh:42: command not found: rsync", "x.sh:42: Permission Denied", "x.sh:4: parse error",
    "x.sh:4: bad substitution", "x.sh:4: no such file or directory: y",
    "./x.sh: 42: rsync: not found", "./x.sh: 4: y: Permission denied",
    "./x.sh: 4: y: Syntax error: bad", "--- FAIL: TestX (0.00s)",
    "./main.go:12:2: undefined: pageSize", "a.go:3: x declared and not used",
    "a.go:3:1: cannot use x", "a.py:3: mismatched input", "a.c:9: Invalid thing",
    "2024-01-01 10:00 ERROR quillpad.storage LeaseExpired: lease 8525 expired",
    "level=FATAL msg=down", "CRITICAL disk full", "    x = compute(y)", "def f(x)",
    "a.ts(3,5) warning TS1", "errors (3)", "(error)", "ok",
]  # fmt: skip


NEAR_MISSES = [
    "E", "    x = compute(y)", "def f(x)", "a.ts(3,5) warning TS1", "errors (3)", "(error)",
    "ok",
]  # fmt: skip


def _regex_would_keep(line: str) -> bool:
    """Whether some regex of error_lines matches ``line`` or its ``E``-stripped form."""
    forms = [line]
    if line.startswith("E ") or line == "E":
        forms.append(line[1:].strip())
    return any(r.match(form) for r in _LINE_RES for form in forms) or any(
        _log_level(form) for form in forms
    )


def _cases(shapes: list[str]) -> list[str]:
    return [v for s in shapes for v in (s, s.upper(), s.lower(), s.title())]


FIXTURE_TEXTS = fixture_strings()


def test_the_fixtures_give_texts_to_check() -> None:
    assert len(FIXTURE_TEXTS) > 1000
    assert any("Traceback" in t for t in FIXTURE_TEXTS)


def test_every_error_shape_matched_by_a_regex_passes_the_line_prefilter() -> None:
    kept = [line for line in _cases(ERROR_SHAPES) if _regex_would_keep(line)]
    for line in kept:
        assert _may_be_error_line(line), line
    # each shape but the near misses reaches a regex as written (some of its other cases
    # may not: most regexes are case-sensitive), so the prefilter is checked on every one
    assert [s for s in ERROR_SHAPES if s not in kept] == NEAR_MISSES


def test_no_character_folds_to_the_letters_of_error_but_its_own() -> None:
    # the "(" shape of the prefilter looks for "error" in line.lower()
    odd = [chr(c) for c in range(0x110000) if re.fullmatch("(?i)[ero]", chr(c))]
    assert sorted(odd) == sorted("eroERO")


_LINE_PIECES = [
    *_cases(ERROR_SHAPES),
    " ",
    ":",
    "(",
    ")",
    "3",
    "E ",
    "!",
    "\u0130",
    "\u212a",
    "é",
    "x",
]


@settings(max_examples=500, deadline=None)
@given(st.lists(st.sampled_from(_LINE_PIECES), max_size=6).map("".join))
def test_a_line_the_prefilter_skips_matches_no_regex(line: str) -> None:
    line = line.strip()
    if line and _regex_would_keep(line):
        assert _may_be_error_line(line), line


def test_every_fixture_line_the_prefilter_skips_matches_no_regex() -> None:
    lines = {ln.strip() for t in FIXTURE_TEXTS for ln in t.split("\n")} - {""}
    assert len(lines) > 1000
    skipped = [ln for ln in lines if not _may_be_error_line(ln)]
    assert skipped  # the prefilter does skip lines
    assert not [ln for ln in skipped if _regex_would_keep(ln)]


def test_error_lines_gives_the_same_with_and_without_the_prefilter(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    texts = [*FIXTURE_TEXTS, "\n".join(_cases(ERROR_SHAPES))]
    fast = [error_lines(t) for t in texts]
    monkeypatch.setattr(failures, "_may_be_error_line", lambda line: True)
    assert [error_lines(t) for t in texts] == fast


#: The alternatives of _NEGATIVE_RE and of the extractive constraint words.
CONSTRAINT_PHRASES = [
    "do not", "don't", "dont", "never", "must not", "mustn't", "should not", "shouldn't",
    "cannot", "can't", "not allowed", "no new", "leave it alone", "leave tests alone", "must",
    "keep", "without", "avoid", "make sure", "stay", "不要", "不能", "不得", "禁止", "不允许",
    "不可以", "必须", "保留", "务必", "只能", "保持", "not now", "later", "todo", "to-do",
    "follow-up", "at some point", "before the release", "eventually", "不是现在", "以后再",
]  # fmt: skip
_WORD_PAIRS = [
    (DEFER_RE, DEFER_WORDS),
    (_NEGATIVE_RE, NEGATIVE_WORDS),
    (_CONSTRAINT_RE, CONSTRAINT_LITERALS),
]


def test_every_constraint_alternative_holds_a_word_of_its_regex() -> None:
    for phrase in _cases(CONSTRAINT_PHRASES):
        assert any(r.search(phrase) for r, _ in _WORD_PAIRS), phrase
        for pattern, words in _WORD_PAIRS:
            if pattern.search(phrase):
                assert holds_word(phrase, words), (phrase, pattern.pattern)


_SENTENCE_PIECES = [
    *_cases(CONSTRAINT_PHRASES), "Step 3: ", "Constraints: ", "please ", "keep going", "add ",
    "fix it", " ", ".", ",", "x", "\u212a", "\u0130", "\u0131", "\u017f", "é", "'", "- ",
]  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(_SENTENCE_PIECES), max_size=8).map("".join))
def test_states_constraint_is_the_same_without_its_word_checks(sentence: str) -> None:
    for pattern, words in _WORD_PAIRS:
        if pattern.search(sentence):
            assert holds_word(sentence, words), (sentence, pattern.pattern)
    with pytest.MonkeyPatch.context() as patched:
        fast = states_constraint(sentence)
        patched.setattr(intent, "may_hold", lambda low, words: True)
        assert states_constraint(sentence) == fast


def test_states_constraint_is_the_same_without_its_word_checks_on_fixtures(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sentences = {s for t in FIXTURE_TEXTS for s in split_sentences(t)}
    assert len(sentences) > 1000
    fast = {s: states_constraint(s) for s in sentences}
    assert any(fast.values()) and not all(fast.values())
    monkeypatch.setattr(intent, "may_hold", lambda low, words: True)
    assert {s: states_constraint(s) for s in sentences} == fast


def test_the_line_prefilter_tests_exactly_its_marks() -> None:
    for mark in failures._ERROR_LINE_MARKS:
        assert _may_be_error_line(f"x {mark} y"), mark
    assert _may_be_error_line("FAILED a") and not _may_be_error_line("x FAILED a")


#: Names of every kind _Concepts.scan counts (tickets, test ids, identifiers, backticks),
#: inside paths and next to the characters its regexes look at.
_NAME_PIECES = [
    "ABC-123", "JIRA-7", "tests/test_a.py::test_load[1]", "a.py::T::test_x", "load_page",
    "LeaseExpired", "pageSize", "`flush_all`", "`src/a.py`", "src/load_page.py", "x.py",
    "https://h/x/pageSize", "-", "_", "/", ".", "::", " ", "\n", "ABC", "-123", "Load",
]  # fmt: skip


def _scan_both(texts: list[tuple[str, bool]]) -> tuple[object, object]:
    fast, slow = extract._Concepts(), extract._Concepts()
    for text, introduce in texts:
        fast.scan(text, introduce)
        slow.scan(text, introduce, prefilter=False)
    return (
        (fast.counts, fast.priority, fast.order, fast.ranked()),
        (slow.counts, slow.priority, slow.order, slow.ranked()),
    )


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(st.lists(st.sampled_from(_NAME_PIECES), max_size=8).map("".join), st.booleans()),
        max_size=6,
    )
)
def test_concept_scan_counts_the_same_without_its_prefilters(
    texts: list[tuple[str, bool]],
) -> None:
    fast, slow = _scan_both(texts)
    assert fast == slow


def test_concept_scan_counts_the_same_without_its_prefilters_on_fixtures() -> None:
    # user texts introduce names; the assistant's only count known ones (as Extractor does)
    texts = [(t, i % 3 == 0) for i, t in enumerate(FIXTURE_TEXTS)]
    fast, slow = _scan_both(texts)
    assert fast == slow
    assert len(slow[2]) > 10  # names were found, and counted again in later texts


def test_concept_scan_skips_a_text_without_a_known_name() -> None:
    concepts = extract._Concepts()
    concepts.scan("Fix load_page for ABC-12.")
    concepts.scan("load_page again, and ABC-12", introduce=False)
    concepts.scan("nothing known here: flush_all", introduce=False)
    assert concepts.counts == {"load_page": 2, "ABC-12": 2}
