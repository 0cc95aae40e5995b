"""Which rules a text needs: :func:`looks_like_code` and :func:`select_rules`.

Source: MoonHub's compactor, "智能规则选择" (smart rule selection): CJK content enables
the CJK rule, Markdown tables the table rule, and code blocks disable the bullet merges;
compactctl adds the code guess, which keeps only the rules safe for code.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Collection

from compactctl.layers.text_rules.cjk import CJK_RE
from compactctl.layers.text_rules.markdown import TABLE_SEPARATOR, table_header
from compactctl.layers.text_rules.protect import has_fence_opener, may_have_fence
from compactctl.layers.text_rules.registry import RULES, Rule

__all__ = ["looks_like_code", "select_rules"]

# Line-number prefixes and diff hunk headers are counted by regexes run once over the sample,
# its lines joined with "\n" and preceded by one: each pattern starts with the newline before a
# line, so the search jumps from newline to newline, and nothing else in it can match a newline,
# so each match stays in its line and the count of matches is the count of lines.
_NUMBERED_LINE_RE = re.compile(r"\n[ \t]*+\d++(?:\t|→|:[ \t]|\|)")
_DIFF_HUNK_RE = re.compile(r"\n@@ -\d+(?:,\d+)? \+\d+(?:,\d+)? @@")
# A line looks like code when it starts like code (:data:`_CODE_START_RE`) or when its last
# non-blank character is ``{`` or ``;`` (:data:`_CODE_END_RES`). These regexes run over the
# whole sample, whose lines each follow a newline: no part of them can match a newline except
# the one that starts a line (``[^\S\n]`` is ``\s`` without it; ``(?=\n|\Z)`` is the end of a
# line), so each match is one line. ``_CODE_START_RE`` takes the rest of the line, so the lines
# it finds can be looked at again, joined, to count those that are both. Each regex starts with
# a literal, so the search skips to the next newline, ``{`` or ``;`` (a character class would be
# tried at every position). The possessive ``++``/``*+`` never give back what they took: what
# follows each of them cannot start with a character of their class, so giving back could not
# make a match, only cost time (``[\w.]+`` backtracking over a long word).
_CODE_START_RE = re.compile(
    r"\n[ \t]*+(?:def |class |import |from [\w.]++ import |return\b|elif\b|else[^\S\n]*+[:{]"
    r"|try[^\S\n]*+[:{]|except\b|finally[^\S\n]*+[:{]|catch[^\S\n]*+\(|function\b|const |let "
    r"|var |fn |pub |package |impl\b|#include|#define|public |private |protected |static "
    r"|async |await |@\w|//|/\*|\*/|[}\])]++[,;]?[^\S\n]*+(?=\n|\Z)|\"[^\"\n]++\"[^\S\n]*+:"
    r"|[\w.]++(?:(?:\[[^\]\n]*\])?[^\S\n]*+(?:[-+*/%|&^]|//|\*\*|<<|>>)?=(?!=)[^\S\n]*+\S"  # x = 1
    r"|\(.*\)[;,]?[^\S\n]*+(?=\n|\Z)))"  # or a call on its own line
    r"[^\n]*+"
)
_CODE_END_RES = (
    re.compile(r"\{[^\S\n]*+(?=\n|\Z)"),
    re.compile(r";[^\S\n]*+(?=\n|\Z)"),
)
_SHEBANG_RE = re.compile(r"\n[^\S\n]*+#!")
_CODE_SAMPLE_LINES = 500
# A line made only of whitespace, with the newline before it.
_BLANK_LINE_RE = re.compile(r"\n[^\S\n]*+(?=\n|\Z)")
_SAMPLE_HEAD_RE = re.compile(f"(?:\\n[^\\n]*+){{{_CODE_SAMPLE_LINES}}}")
_SAMPLE_CHUNK_CHARS = 1 << 16
# A line that markdown's separator row pattern fullmatches (:func:`table_header`), with the
# newline before it (a separator row follows its header row).
_SEPARATOR_LINE_RE = re.compile(r"\n" + TABLE_SEPARATOR + r"(?=\n|\Z)")


def _code_sample(text: str) -> str:
    """The first :data:`_CODE_SAMPLE_LINES` non-blank lines of ``text`` (split on ``\\n``),
    each preceded by ``\\n`` (``""`` when there is none).

    Looks at about 64 KB of text at a time, so a huge text is not copied whole.
    """
    parts: list[str] = []
    found = 0
    start, size = 0, len(text)
    while True:
        end = text.find("\n", start + _SAMPLE_CHUNK_CHARS)
        if end < 0:
            end = size
        part = _BLANK_LINE_RE.sub("", "\n" + text[start:end])
        parts.append(part)
        found += part.count("\n")
        if found >= _CODE_SAMPLE_LINES or end == size:
            break
        start = end + 1  # the newline at ``end`` is the one added before the next part
    sample = "".join(parts)
    if found > _CODE_SAMPLE_LINES:
        head = _SAMPLE_HEAD_RE.match(sample)
        assert head is not None
        sample = sample[: head.end()]
    return sample


def _count_code_ends(sample: str) -> int:
    """How many lines of ``sample`` end with ``{`` or ``;`` (trailing whitespace aside)."""
    return sum(len(regex.findall(sample)) for regex in _CODE_END_RES) if sample else 0


def looks_like_code(text: str) -> bool:
    """Guess whether a tool output is code or file contents rather than prose.

    Heuristic over the first 500 non-blank lines; True when any of these holds:

    * the first non-blank line is a shebang (``#!``), or a unified-diff hunk header appears;
    * at least 60% of the lines carry a line-number prefix (``cat -n``, ``nl``, ``grep -n``,
      ``12→`` read-tool output), with at least two lines;
    * at least 35% of the lines look like code: start with a keyword (``def``, ``class``,
      ``import``, ``return``, ``function``, ``const``, ``fn``, ``#include``, ...), a
      decorator, a comment marker (``//``, ``/*``), a JSON key, an assignment (``x = 1``,
      ``a.b += f(c)``) or a call alone on its line (``main()``), or only closing brackets, or
      end with ``{`` or ``;``;
    * at least 15% look like code and at least 30% are indented by 4+ spaces or a tab.

    Wrapped prose, bullet lists and tables stay below these ratios. Fenced blocks count too,
    so a message that is mostly one code block looks like code.

    >>> looks_like_code('import os\\n\\ndef main():\\n    return os.getcwd()\\n')
    True
    >>> looks_like_code('Fixed the parser. Tests pass.\\n- next: docs\\n')
    False
    """
    sample = _code_sample(text)
    if not sample:
        return False
    if _SHEBANG_RE.match(sample) or _DIFF_HUNK_RE.search(sample):
        return True
    n = sample.count("\n")
    numbered = len(_NUMBERED_LINE_RE.findall(sample))
    if n >= 2 and numbered >= 0.6 * n:
        return True
    starts = _CODE_START_RE.findall(sample)
    if len(starts) >= 0.35 * n:
        return True  # (the lines that end like code only add to these)
    code = len(starts) + _count_code_ends(sample) - _count_code_ends("".join(starts))
    if code >= 0.35 * n or code < 0.15 * n:
        return code >= 0.35 * n  # (then the indentation does not matter)
    return sample.count("\n    ") + sample.count("\n\t") >= 0.3 * n


def _has_table(text: str) -> bool:
    """Whether a line of ``text`` starts a table (:func:`table_header`): a separator row is
    looked for first (a table needs one, after its header row), in the whole text."""
    if "|" not in text:
        return False
    for match in _SEPARATOR_LINE_RE.finditer(text):
        separator = text[match.start() + 1 : match.end()]
        if "|" not in separator:
            continue
        head_start = text.rfind("\n", 0, match.start()) + 1
        if table_header((text[head_start : match.start()], separator), 0) is not None:
            return True
    return False


def _check_names(names: Collection[str], argument: str) -> None:
    if isinstance(names, str):
        raise TypeError(f"{argument} must be a collection of rule names, not a string")
    if _RULE_NAMES.issuperset(names):
        return
    unknown = [name for name in names if name not in RULES]
    raise KeyError(
        f"{argument}: unknown rule(s) {', '.join(map(repr, unknown))}; "
        f"known rules: {', '.join(RULES)}"
    )


_RULE_NAMES = frozenset(RULES)
_DROP_CJK, _DROP_TABLES, _DROP_BULLETS = 1, 2, 4


@functools.lru_cache(maxsize=256)
def _selection(
    only: frozenset[str] | None, skip: frozenset[str], is_code: bool, drop: int
) -> tuple[Rule, ...]:
    """The rules :func:`select_rules` returns, from its checked arguments and what the text
    lacks (``drop``: ``_DROP_*`` flags)."""
    chosen = [
        rule
        for rule in RULES.values()
        if (only is None or rule.name in only) and rule.name not in skip
    ]
    if is_code:
        return tuple(rule for rule in chosen if rule.safe_for_code)
    dropped: set[str] = set()
    if drop & _DROP_CJK:
        dropped.add("cjk_punct")
    if drop & _DROP_TABLES:
        dropped.add("tables")
    if drop & _DROP_BULLETS:
        dropped.update(("similar_bullets", "short_bullets"))
    return tuple(rule for rule in chosen if rule.name not in dropped)


def select_rules(
    text: str,
    *,
    is_code: bool = False,
    only: Collection[str] | None = None,
    skip: Collection[str] = (),
) -> list[Rule]:
    """The rules worth applying to ``text``, in canonical order (MoonHub's compactor,
    "智能规则选择").

    Start from :data:`RULES` (or the names in ``only``) minus ``skip``, then:

    * ``is_code=True`` (a tool output that is file contents or code, e.g.
      ``looks_like_code(text)``): keep only the rules with ``safe_for_code``;
    * ``cjk_punct`` only when the text contains CJK characters or full-width forms;
    * ``tables`` only when it contains a Markdown table (header row + separator row);
    * ``similar_bullets`` and ``short_bullets`` dropped when it contains a code fence.

    Detection looks at the whole text, fenced blocks included.

    :raises KeyError: a name in ``only`` or ``skip`` is not a rule.
    :raises TypeError: ``only`` or ``skip`` is a single string.

    >>> [rule.name for rule in select_rules('你好，世界', only=['cjk_punct', 'tables'])]
    ['cjk_punct']
    >>> [rule.name for rule in select_rules('ls -la', is_code=True)]
    ['ansi', 'whitespace']
    """
    if only is not None:
        _check_names(only, "only")
    _check_names(skip, "skip")
    drop = 0
    if not is_code:
        if text.isascii() or CJK_RE.search(text) is None:  # every CJK character is non-ASCII
            drop |= _DROP_CJK
        if not _has_table(text):
            drop |= _DROP_TABLES
        if may_have_fence(text) and has_fence_opener(text):
            drop |= _DROP_BULLETS
    return list(
        _selection(None if only is None else frozenset(only), frozenset(skip), is_code, drop)
    )
