"""Text helpers of the extractive summarizer: sentences, one-line forms, comparison keys.

Pure functions over ``str``; lengths are in characters (code points). Sentences are split
on newlines and after sentence punctuation (no space is needed after CJK punctuation); code
fences, tables and rules are not prose and are skipped.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from compactctl.text import CJK_SPAN, CJK_SPAN_WIDE, FENCE_RE, clip

__all__ = [
    "LEDGER_LINE_MAX",
    "backticked",
    "dedupe",
    "dedupe_exact",
    "distinct_tasks",
    "has_cjk",
    "inline",
    "join_sentences",
    "ledger_line",
    "norm",
    "one_line",
    "same_task",
    "split_sentences",
    "text_of",
]

#: A command or error line longer than this many characters is cut (the ledger keeps lines
#: in full, but one pathological line must not eat the whole budget).
LEDGER_LINE_MAX = 1000

_SENTENCE_SPLIT_RE = re.compile(r"(?<=[.!?])\s+(?=\S)|(?<=[。！？；])")
_RULE_RE = re.compile(r"^[-*_━═=~─\s]{3,}$")
_MD_PREFIX_RE = re.compile(r"^(?:#{1,6}\s+|>\s*|[-*+•]\s+(?:\[[ xX]\]\s+)?|\d{1,3}[.)]\s+)+")
_SPACE_RE = re.compile(r"\s+")
_HEADING_MARK_RE = re.compile(r"^#{1,6}\s+")
_NON_WORD_RE = re.compile(f"[^\\w{CJK_SPAN}]+")
_CJK_RE = re.compile(f"[{CJK_SPAN_WIDE}]")


def has_cjk(text: str) -> bool:
    """Whether ``text`` holds a character of :data:`compactctl.text.CJK_SPAN_WIDE`.

    >>> has_cjk("fix it"), has_cjk("修好它")
    (False, True)
    """
    return _CJK_RE.search(text) is not None


def one_line(text: str) -> str:
    """Collapse all whitespace runs to one space.

    >>> one_line("a\\n\\n  b\\tc ")
    'a b c'
    """
    return _SPACE_RE.sub(" ", text).strip()


def inline(text: str) -> str:
    """Markdown to one line: drop fences, rules, table rules and heading marks.

    >>> inline("## Done\\n\\n| a | b |\\n|---|---|\\n- [x] fixed it")
    'Done | a | b | - [x] fixed it'
    """
    kept = []
    for raw in text.split("\n"):
        line = raw.strip()
        if not line or FENCE_RE.match(line) or _RULE_RE.match(line):
            continue
        if line.startswith("|") and set(line) <= set("|-: \t"):
            continue
        kept.append(_HEADING_MARK_RE.sub("", line))
    return one_line(" ".join(kept))


def split_sentences(text: str) -> list[str]:
    """Split prose into sentences: on newlines, after ``. ! ?`` plus a space, and after
    ``。！？；``. Code fences, tables and rules are skipped; Markdown prefixes removed.

    >>> split_sentences("Fixed. Next step: run it.\\n- [ ] 写文档。还需要测试")
    ['Fixed.', 'Next step: run it.', '写文档。', '还需要测试']
    """
    out: list[str] = []
    in_fence = False
    for raw in text.split("\n"):
        if FENCE_RE.match(raw):
            in_fence = not in_fence
            continue
        line = raw.strip()
        if in_fence or not line or line.startswith("|") or _RULE_RE.match(line):
            continue
        line = _MD_PREFIX_RE.sub("", line).strip()
        out.extend(p.strip() for p in _SENTENCE_SPLIT_RE.split(line) if p.strip())
    return out


def norm(text: str) -> str:
    """A comparison key: lower case, words and CJK characters only.

    >>> norm("Noted for later: `write` a note!")
    'noted for later write a note'
    """
    return one_line(_NON_WORD_RE.sub(" ", text.casefold()))


def same_task(a: str, b: str) -> bool:
    """Whether two task descriptions name the same task (equal, or one contains the other).

    >>> same_task("write a migration note", "Noted for later: write a migration note.")
    True
    """
    x, y = norm(a), norm(b)
    if not x or not y:
        return False
    if x == y:
        return True
    short, long_ = sorted((x, y), key=len)
    return len(short) >= 10 and short in long_


def distinct_tasks(items: Iterable[str]) -> list[str]:
    """The items in order, without one that names the same task as an earlier one
    (:func:`same_task`).

    >>> distinct_tasks(["write a migration note", "Later: write a migration note.", "x"])
    ['write a migration note', 'x']
    """
    out: list[str] = []
    for item in items:
        if not any(same_task(item, kept) for kept in out):
            out.append(item)
    return out


def dedupe(items: Iterable[str], similar: bool = False) -> list[str]:
    """Drop blank items and repeats (same words, letter case and punctuation aside); with
    ``similar``, also an item that contains, or is contained in, an earlier one.

    >>> dedupe(["Do not add deps.", "do not add deps", "(round 2) Do not add deps."], True)
    ['Do not add deps.']
    """
    seen: set[str] = set()
    kept_keys: list[str] = []
    out = []
    for item in items:
        key = norm(item) or item
        if not item.strip() or key in seen:
            continue
        if (
            similar
            and len(key) >= 10
            and any((key in k or k in key) for k in kept_keys if len(k) >= 10)
        ):
            continue
        seen.add(key)
        kept_keys.append(key)
        out.append(item)
    return out


def backticked(text: str) -> str:
    """Wrap in backticks, with a longer fence when the text holds one.

    >>> backticked("ls"), backticked("echo `date`")
    ('`ls`', '`` echo `date` ``')
    """
    return f"`` {text} ``" if "`" in text else f"`{text}`"


def text_of(content: Any) -> str:
    """The text of a message ``content``: a string, or the text parts of a list."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, Mapping):
                if isinstance(part.get("text"), str):
                    parts.append(part["text"])
                elif part.get("type") == "image":
                    parts.append("[image]")
            elif isinstance(part, str):
                parts.append(part)
        return "\n".join(parts)
    return ""


def dedupe_exact(items: Iterable[str]) -> list[str]:
    """Drop empty items and exact repeats, keeping the first of each in order.

    >>> dedupe_exact(["a", "", "b", "a"])
    ['a', 'b']
    """
    return list(dict.fromkeys(i for i in items if i))


def ledger_line(text: str) -> str:
    """One line of the ledger, cut past :data:`LEDGER_LINE_MAX`: a line is kept as written
    (a type checker's ``error: ...  [code]`` keeps its two spaces: error lines are verbatim,
    issue 15 point 2); text over several lines has its whitespace collapsed.

    >>> ledger_line('a.py:3: error: Bad  [x] '), ledger_line("one\\n  two")
    ('a.py:3: error: Bad  [x]', 'one two')
    """
    if "\n" in text or "\r" in text or "\t" in text:
        text = one_line(text)
    return clip(text.strip(), LEDGER_LINE_MAX)


def join_sentences(parts: Sequence[str]) -> str:
    """Join sentences with a space, but none after CJK punctuation.

    >>> join_sentences(["先复现。", "再修复。", "Then test."])
    '先复现。再修复。Then test.'
    """
    out = ""
    for part in parts:
        out += ("" if not out or out.endswith(("。", "！", "？", "；", "：")) else " ") + part
    return out
