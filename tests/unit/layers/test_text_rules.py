"""Layer 1 text rules: before/after cases, code protection, selection and properties."""

from __future__ import annotations

import dataclasses
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compactctl.layers.text_rules import (
    RULE_VERSIONS,
    RULES,
    Rule,
    apply_rules,
    collapse_whitespace,
    get_rule,
    looks_like_code,
    merge_short_bullets,
    merge_similar_bullets,
    normalize_cjk_punct,
    protected_spans,
    remove_decorative_lines,
    remove_dup_lines,
    remove_empty_sections,
    select_rules,
    strip_ansi,
    strip_emoji,
    tables_to_key_value,
)

ALL = list(RULES.values())


def names(rules: list[Rule]) -> list[str]:
    return [rule.name for rule in rules]


def same(text: str) -> tuple[str, str]:
    """A case the rule must leave unchanged."""
    return (text, text)


# ---------------------------------------------------------------------------------------------
# Registry
# ---------------------------------------------------------------------------------------------


def test_registry_order_versions_and_safety() -> None:
    assert list(RULES) == [
        "ansi",
        "emoji",
        "cjk_punct",
        "decorative",
        "tables",
        "short_bullets",
        "similar_bullets",
        "dup_lines",
        "empty_sections",
        "whitespace",
    ]
    assert all(rule.version == 1 for rule in ALL)
    assert {rule.name for rule in ALL if rule.safe_for_code} == {"ansi", "whitespace"}
    assert all(rule.description and "\n" not in rule.description for rule in ALL)
    assert set(RULE_VERSIONS) == set(RULES)
    for name, rule in RULES.items():
        assert RULE_VERSIONS[name][1] is rule
        assert get_rule(name, 1) is rule
        assert get_rule(name) is rule


def test_get_rule_errors_name_what_exists() -> None:
    with pytest.raises(KeyError, match="unknown rule 'nope'.*known rules: ansi, emoji"):
        get_rule("nope", 1)
    with pytest.raises(KeyError, match="rule 'emoji' has no version 7; released: 1"):
        get_rule("emoji", 7)


def test_rule_is_frozen_and_callable() -> None:
    rule = RULES["whitespace"]
    assert rule("a \n\n\n") == "a\n\n"
    with pytest.raises(dataclasses.FrozenInstanceError):
        rule.version = 2  # type: ignore[misc]


# ---------------------------------------------------------------------------------------------
# Before / after, one rule at a time
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("before", "after"),
    [
        ("你好，世界。", "你好,世界."),
        ("注意：第一、第二；完成！对吗？", "注意:第一,第二;完成!对吗?"),
        ("（括号）【标题】「引用」『书』", '(括号)[标题]"引用""书"'),
        ("“quoted” and ‘single’ ％", "\"quoted\" and 'single' %"),
        # ASCII forms with Markdown or HTML meaning are kept full-width
        same("＃ 标题\n－ 项目\n｜表｜\n《书》～＝＊｀"),
        same("plain ascii, untouched."),
    ],
)
def test_cjk_punct(before: str, after: str) -> None:
    assert normalize_cjk_punct(before) == after


@pytest.mark.parametrize(
    ("before", "after"),
    [
        ("a  \nb\t\n", "a\nb\n"),
        ("a\n\n\n\nb\n\n\n", "a\n\nb\n\n"),
        ("\n\n\na", "\na"),
        ("a\u3000\u00a0\n", "a\n"),
        ("a \r\n\r\n\r\n\r\nb\r\n", "a\r\n\r\nb\r\n"),  # CRLF endings stay CRLF
        ("    indented\n\tcode();  \n", "    indented\n\tcode();\n"),
        same(""),
    ],
)
def test_whitespace(before: str, after: str) -> None:
    assert collapse_whitespace(before) == after


@pytest.mark.parametrize(
    ("before", "after"),
    [
        (
            "Running the test suite\nok\nRunning the test suite\nok\n",
            "Running the test suite\nok\nok\n",
        ),
        # trailing blanks do not hide a duplicate; blank lines are never removed
        ("same line here  \n\n\nsame line here\n\n", "same line here  \n\n\n\n"),
        # short lines, headings, table rows and fence lines repeat legitimately
        same("}\n}\nDone.\nDone.\n"),
        same("## Example output\nx\n## Example output\ny\n"),
        same("| a | b | c | d |\n| a | b | c | d |\n"),
        same("```typescript\n```typescript\n"),
        same("-----------\n-----------\n"),  # no letter or digit
        ("重复的中文句子，很长很长\n重复的中文句子，很长很长", "重复的中文句子，很长很长"),
    ],
)
def test_dup_lines(before: str, after: str) -> None:
    assert remove_dup_lines(before) == after


@pytest.mark.parametrize(
    ("before", "after"),
    [
        ("# A\n## Empty\n\n## Full\ntext\n", "# A\n## Full\ntext\n"),
        # nested empty headings go in one pass, and then their empty parent
        ("intro\n## Parent\n### Child\n\n#### Grandchild\n## Next\nx\n", "intro\n## Next\nx\n"),
        ("# Title\n\nbody\n## Trailing\n\n", "# Title\n\nbody\n"),
        ("### Deeper\ncontent\n## Higher\n", "### Deeper\ncontent\n"),
        same("#hashtag\n#nospace is not a heading\n"),
        same("    # indented 4 is code\n"),
        ("## only\n", ""),
    ],
)
def test_empty_sections(before: str, after: str) -> None:
    assert remove_empty_sections(before) == after


@pytest.mark.parametrize(
    ("before", "after"),
    [
        (
            "| name | size |\n|------|-----:|\n| x | 3 |\n| y | 10 |\n",
            "name: x; size: 3\nname: y; size: 10\n",
        ),
        (
            "Files:\nname | size\n:--- | :---:\na.py | 1\n\nafter\n",
            "Files:\nname: a.py; size: 1\n\nafter\n",
        ),
        # empty cells are left out, cells beyond the header are kept, an empty row is dropped
        (
            "| a | b |\n|---|---|\n|  | 2 |\n| 1 | 2 | 3 |\n|  |  |\n",
            "b: 2\na: 1; b: 2; 3\n",
        ),
        # escaped pipes stay in the cell; the table ends at a line without a pipe
        ("| k | v |\n|---|---|\n| x | a \\| b |\ntext\n", "k: x; v: a \\| b\ntext\n"),
        ("  | h1 | h2 |\n  |----|----|\n  | 1 | 2 |", "  h1: 1; h2: 2"),  # indentation kept
        ("| only | header |\n|---|---|\n", "only; header\n"),
        # not tables: no separator row, column counts differ, a setext underline
        same("a | b\nc | d\n"),
        same("| a | b |\n|---|\n| 1 | 2 |\n"),
        same("Title\n-----\n"),
        ("| 名称 | 大小 |\n|---|---|\n| 文件 | 3 |\n", "名称: 文件; 大小: 3\n"),
    ],
)
def test_tables(before: str, after: str) -> None:
    assert tables_to_key_value(before) == after


@pytest.mark.parametrize(
    ("before", "after"),
    [
        ("✅ Tests pass 🎉\n", "Tests pass\n"),
        ("Family 👨‍👩‍👧‍👦 photo", "Family photo"),  # ZWJ family as one
        ("Flags 🇺🇸 🇫🇷🇩🇪 and 🏴󠁧󠁢󠁳󠁣󠁴󠁿 done", "Flags and done"),  # regional pairs, tag flag
        ("Thumbs 👍🏽 up", "Thumbs up"),  # skin tone modifier
        ("❤️‍🔥 love 🏳️‍🌈 pride", "love pride"),  # ZWJ sequences with VS16 inside
        ("⚠️ Warning: ✔️ ok", "Warning: ok"),  # text-default emoji with VS16
        same("⚠ stays ✓ ✗ ★ ☐ as text"),  # no VS16: text symbols
        ("a → b ➡ c ➡️ d ← e", "a → b ➡ c ➡ d ← e"),  # arrows are text
        same("∑ x ≤ 3 × 4 ÷ 2 ∞"),  # math symbols
        same("你好世界 〽 ㊗ ©"),  # CJK and symbols are not emoji
        ("1️⃣ first 2️⃣ second", "1 first 2 second"),  # keycaps keep their digit
        ("完成✅了", "完成了"),
        ("word✅ next", "word next"),
        ("- 🚀 ✨ Launch", "- Launch"),
        ("    📝 indented note", "    indented note"),
        same("क्‍ष stays"),  # a ZWJ in Devanagari is not an emoji's
        ("only 🎉\n🎉\nend", "only\n\nend"),
    ],
)
def test_emoji(before: str, after: str) -> None:
    assert strip_emoji(before) == after


@pytest.mark.parametrize(
    ("before", "after"),
    [
        ("ok\n---\nnext\n", "ok\nnext\n"),
        ("***\n___\n=====\n~~~~~~\n- - -\n* * *\n-=-=-=\n", ""),
        ("Title\n=====\ntext\n", "Title\ntext\n"),
        same("--\nshort -- kept\n"),  # two are not enough
        same("| a | b |\n|---|:-:|\n| 1 | 2 |\n"),
        same("---|---\n"),
        # identified YAML front matter is kept, later rules are not
        (
            "---\ntitle: Notes\ntags:\n  - a\n# comment\n---\nbody\n---\n",
            "---\ntitle: Notes\ntags:\n  - a\n# comment\n---\nbody\n",
        ),
        # not front matter (no key line, or prose inside): every --- line goes
        ("---\njust prose here\n---\nbody\n", "just prose here\nbody\n"),
        ("text\n---\ntitle: x\n---\n", "text\ntitle: x\n"),
    ],
)
def test_decorative(before: str, after: str) -> None:
    assert remove_decorative_lines(before) == after


@pytest.mark.parametrize(
    ("before", "after"),
    [
        ("\x1b[31mred\x1b[0m and \x1b[1;32mbold green\x1b[m", "red and bold green"),
        ("\x1b]0;window title\x07prompt$ ", "prompt$ "),
        ("\x1b]8;;https://x.y\x1b\\link\x1b]8;;\x1b\\ text", "link text"),
        ("\x1b[2J\x1b[H\x1b[?25lscreen\x1b(B\x1b7", "screen"),
        ("\x9b31mC1 form\x9b0m", "C1 form"),
        ("a\rb\rfinal\n", "final\n"),
        (
            "Downloading  10%\rDownloading  55%\rDownloading 100%\ndone\n",
            "Downloading 100%\ndone\n",
        ),
        ("long progress line\rok\x1b[K\n", "ok\n"),  # erase-line clears the rest
        ("long progress line\r\x1b[2Kshort\n", "short\n"),
        ("abcdef\rxy\n", "xycdef\n"),  # what a terminal shows without erase
        ("line one\r\nline two\r\n", "line one\nline two\n"),
        ("\x1b[33m 50%\x1b[0m\r\x1b[33m100%\x1b[0m", "100%"),
        ("lone escape at the end \x1b", "lone escape at the end "),
        ("double\x1b\x1b[1m bold", "double bold"),
    ],
)
def test_ansi(before: str, after: str) -> None:
    assert strip_ansi(before) == after


@pytest.mark.parametrize(
    ("before", "after"),
    [
        (
            "- run the unit tests for the parser\n- run the unit tests for the parser module\n",
            "- run the unit tests for the parser module\n",
        ),
        # a chain of near-duplicates collapses to the longest
        (
            "* run the full unit test suite for the parser\n"
            "* run the full unit test suite for the parser again\n"
            "* run the full unit test suite for the parser again today\n",
            "* run the full unit test suite for the parser again today\n",
        ),
        same(
            "* update the config loader for yaml files\n* update the config loader for toml files\n"
        ),
        ("- fix bug\n- fix bug\n", "- fix bug\n"),
        ("- 修复解析器的错误处理\n- 修复解析器的错误处理逻辑\n", "- 修复解析器的错误处理逻辑\n"),
        # different lists: marker, indentation, or a line in between
        same("- fix the parser bug\n* fix the parser bug\n"),
        same("- fix the parser bug\n  - fix the parser bug\n"),
        same("- fix the parser bug\ntext\n- fix the parser bug\n"),
        # an item with a continuation line is not merged
        same("- fix the parser bug\n  details here\n- fix the parser bug\n"),
        # ordered items are not bullets here
        same("1. fix the parser bug\n2. fix the parser bug\n"),
    ],
)
def test_similar_bullets(before: str, after: str) -> None:
    assert merge_similar_bullets(before) == after


def test_similar_bullets_never_drop_inline_code() -> None:
    words = "so that the loader reads every config file from the new directory before it starts"
    words += " the web server"
    plain = f"- edit a {words}\n- edit b {words}\n"  # Jaccard 17/21
    assert merge_similar_bullets(plain) == f"- edit b {words}\n"
    with_code = f"- edit `a` {words}\n- edit `b` {words}\n"
    assert merge_similar_bullets(with_code) == with_code
    assert apply_rules(with_code, [RULES["similar_bullets"]]) == with_code
    same_code = f"- edit `a` {words}\n- edit `a` {words} now\n"
    assert merge_similar_bullets(same_code) == f"- edit `a` {words} now\n"


def test_similar_bullets_threshold() -> None:
    text = "- alpha beta gamma delta\n- alpha beta gamma epsilon\n"  # Jaccard 2/4
    assert merge_similar_bullets(text) == text
    assert merge_similar_bullets(text, threshold=0.5) == "- alpha beta gamma epsilon\n"
    for bad in (0.0, -1.0, 1.5):
        with pytest.raises(ValueError, match="threshold must be in"):
            merge_similar_bullets(text, threshold=bad)


@pytest.mark.parametrize(
    ("before", "after"),
    [
        ("- a.py\n- b.py\n- c.py\n", "- a.py; b.py; c.py\n"),
        same("- a.py\n- b.py\n"),  # two are not a run
        (
            "* one\n* two\n* three\n* this bullet is longer than thirty chars\n* x\n* y\n",
            "* one; two; three\n* this bullet is longer than thirty chars\n* x\n* y\n",
        ),
        ("  + x\n  + y\n  + z\ntext\n", "  + x; y; z\ntext\n"),
        same("- a\n- b\n* c\n"),  # a different marker is another list
        same("- a\n- b\n- c\n  - child\n"),  # c has a child
        same("1. a\n2. b\n3. c\n"),
        ("- 苹果\n- 香蕉\n- 橙子\n", "- 苹果; 香蕉; 橙子\n"),
    ],
)
def test_short_bullets(before: str, after: str) -> None:
    assert merge_short_bullets(before) == after


# ---------------------------------------------------------------------------------------------
# Protected spans
# ---------------------------------------------------------------------------------------------

NASTY = "✅ 🇺🇸 👨‍👩‍👧 你好，世界。 \x1b[31mred\x1b[0m a\rb trailing   "
FENCED_DOCS = [
    f"Intro ✅\n```python\n{NASTY}\n---\n| a | b |\n|---|---|\n| 1 | 2 |\n\n\n\n```\nAfter ✅\n",
    f"~~~\n{NASTY}\n```\nnot a closer for tildes\n~~~\ntext\n",
    f"````md\n```\ninner fence\n```\n{NASTY}\n````\n- a\n- b\n- c\n",
    f"> quoted\n> ```\n> {NASTY}\n> ```\n",
    f"Unterminated:\n```js\n{NASTY}\n# heading\n\n\n",
    f"crlf\r\n```\r\n{NASTY}\r\n```\r\nend\r\n",
    f"   ```  info with spaces\n{NASTY}\n   ```   \n",
]


@pytest.mark.parametrize("doc", FENCED_DOCS)
def test_fenced_blocks_come_out_byte_identical(doc: str) -> None:
    blocks = [doc[start:end] for start, end in protected_spans(doc) if "\n" in doc[start:end]]
    assert blocks
    out = apply_rules(doc, ALL)
    position = 0
    for block in blocks:
        found = out.find(block, position)
        assert found >= 0, (block, out)
        position = found + len(block)
    assert apply_rules(out, ALL) == out


def test_fenced_block_in_detail() -> None:
    doc = "## Setup 🚀\n\n\n```bash\necho '✅'   \n---\n```\n## Empty\n"
    assert apply_rules(doc, ALL) == "## Setup\n\n```bash\necho '✅'   \n---\n```\n"


def test_heading_before_code_block_is_not_empty() -> None:
    doc = "## Example\n```\nx = 1\n```\n## Other\n"
    assert apply_rules(doc, [RULES["empty_sections"]]) == "## Example\n```\nx = 1\n```\n"


def test_identical_fenced_blocks_are_not_duplicates() -> None:
    doc = "```\nsame block content here\n```\ntext\n```\nsame block content here\n```\n"
    assert apply_rules(doc, ALL) == doc


@pytest.mark.parametrize(
    ("before", "after"),
    [
        ("Use `--- ✅ 你好，` now ✅", "Use `--- ✅ 你好，` now"),
        ("Run ``echo `x` ✅`` then 你好，", "Run ``echo `x` ✅`` then 你好,"),
        ("Colour `\x1b[31m` kept \x1b[31mred\x1b[0m", "Colour `\x1b[31m` kept red"),
        ("unmatched ` backtick ✅ here", "unmatched ` backtick here"),
        ("| k | v |\n|---|---|\n| `a|b` | 2 |\n", "k: `a|b`; v: 2\n"),  # pipe inside code
        ("- `a`\n- `b`\n- `c`\n", "- `a`; `b`; `c`\n"),
        # the same line with the same code is still a duplicate
        ("run `make test` again now\nrun `make test` again now\n", "run `make test` again now\n"),
    ],
)
def test_inline_code_is_protected(before: str, after: str) -> None:
    assert apply_rules(before, ALL) == after


def test_placeholders_cannot_collide_with_text() -> None:
    fake = "\ue000" + "0000000" + "\ue000"  # looks like a placeholder for sentinel U+E000
    doc = f"keep {fake} and \ue001 ✅ `code ✅`\n```\nblock\n```\n"
    assert apply_rules(doc, ALL) == f"keep {fake} and \ue001 `code ✅`\n```\nblock\n```\n"


def test_unsafe_result_falls_back_to_the_input() -> None:
    # removing the emoji would turn " ```" into a fence opener that swallows the rest
    doc = "✅ ```\ntext ✅\n"
    assert apply_rules(doc, ALL) == doc
    # a \r redraw over part of inline code would break its placeholder
    doc = "progress `x` 1%\rprogress 1\n"
    assert apply_rules(doc, ALL) == doc
    # over all of it, the span is gone, as on a terminal
    assert apply_rules("progress `x` 1%\rprogress 100% done\n", ALL) == "progress 100% done 1%\n"


def test_protected_spans() -> None:
    text = "a `b` c ``d`e`` f\n```\ncode `x`\n```\ng ` h\n~~~\nopen"
    spans = [text[start:end] for start, end in protected_spans(text)]
    assert spans == ["`b`", "``d`e``", "```\ncode `x`\n```", "~~~\nopen"]


def test_apply_rules_with_no_rules_or_text() -> None:
    assert apply_rules("x ✅  \n", []) == "x ✅  \n"
    assert apply_rules("", ALL) == ""


# ---------------------------------------------------------------------------------------------
# Selection
# ---------------------------------------------------------------------------------------------

CONTENT_RULES = {"cjk_punct", "tables"}  # enabled only by what the text contains
BULLET_RULES = {"short_bullets", "similar_bullets"}


def all_but(*excluded: str | set[str]) -> list[str]:
    """Rule names in canonical order, without the excluded names or sets of names."""
    drop: set[str] = set()
    for item in excluded:
        drop |= {item} if isinstance(item, str) else item
    return [name for name in RULES if name not in drop]


@pytest.mark.parametrize(
    ("text", "kwargs", "expected"),
    [
        ("plain prose", {}, all_but(CONTENT_RULES)),
        ("你好，世界", {}, all_but("tables")),
        ("ｆｕｌｌ－width", {}, all_but("tables")),
        ("| a |\n|---|\n| 1 |", {}, all_but("cjk_punct")),
        ("a | b\nno separator", {}, all_but(CONTENT_RULES)),
        ("text\n```\ncode\n```", {}, all_but(CONTENT_RULES, BULLET_RULES)),
        ("text\n~~~\ncode", {}, all_but(CONTENT_RULES, BULLET_RULES)),
        ("你好\n| a |\n|---|\n```\n", {}, all_but(BULLET_RULES)),
        ("你好\n| a |\n|---|", {"is_code": True}, ["ansi", "whitespace"]),
        ("x", {"only": ["emoji", "whitespace", "tables"]}, ["emoji", "whitespace"]),
        ("x", {"skip": ["emoji", "dup_lines"]}, all_but(CONTENT_RULES, "emoji", "dup_lines")),
        ("x", {"only": ["ansi", "emoji"], "skip": ["ansi"], "is_code": True}, []),
    ],
)
def test_select_rules(text: str, kwargs: dict[str, object], expected: list[str]) -> None:
    assert names(select_rules(text, **kwargs)) == expected  # type: ignore[arg-type]


def test_select_rules_rejects_unknown_names() -> None:
    with pytest.raises(KeyError, match="only: unknown rule.*'emojis'"):
        select_rules("x", only=["emojis"])
    with pytest.raises(KeyError, match="skip: unknown rule"):
        select_rules("x", skip=["nope"])
    with pytest.raises(TypeError, match="not a string"):
        select_rules("x", only="emoji")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("import os\n\n\ndef main() -> None:\n    print(os.getcwd())\n", True),
        ("     1\tfoo = 1\n     2\tbar = 2\n     3\t\n     4\tprint(foo)\n", True),
        ("     1→# Title\n     2→Some prose in a file\n     3→more\n", True),
        ('{\n  "name": "x",\n  "version": "1.0"\n}\n', True),
        ("#!/bin/sh\necho hi\n", True),
        ("diff --git a/x b/x\n@@ -1,2 +1,3 @@\n-a\n+b\n", True),
        ("function f(x) {\n  return x + 1;\n}\n", True),
        ("    total = compute(1, value)  # note\n    cache[key] += 1\nmain()\n", True),
        ("The build passed. I updated the parser.\n\n- fixed a bug\n- added tests\n", False),
        ("| a | b |\n|---|---|\n| 1 | 2 |\n", False),
        ("", False),
        ("Note: see below (details).\nAnother line, with a comma,\nthird.\n", False),
    ],
)
def test_looks_like_code(text: str, expected: bool) -> None:
    assert looks_like_code(text) is expected


# ---------------------------------------------------------------------------------------------
# Whole chain
# ---------------------------------------------------------------------------------------------


def test_full_chain_on_an_assistant_message() -> None:
    before = (
        "## Summary ✅\n"
        "\n\n\n"
        "我修改了解析器，测试通过。\n"
        "---\n"
        "| file | lines |\n"
        "|------|------:|\n"
        "| parser.py | 42 |\n"
        "\n"
        "## Notes\n"
        "\n"
        "## Files\n"
        "- a.py\n"
        "- b.py\n"
        "- c.py\n"
        "Run `pytest -q` to check.   \n"
        "Run `pytest -q` to check.\n"
    )
    after = (
        "## Summary\n"
        "\n"
        "我修改了解析器,测试通过.\n"
        "file: parser.py; lines: 42\n"
        "\n"
        "## Files\n"
        "- a.py; b.py; c.py\n"
        "Run `pytest -q` to check.\n"
    )
    assert apply_rules(before, select_rules(before)) == after


def test_sixty_kilobyte_tool_output() -> None:
    # Speed is measured by `make bench` (ratios against baselines), never timed here.
    lines = []
    for i in range(1500):
        lines.append(f"\x1b[32mINFO\x1b[0m step {i % 97}: processed item {i} ✅ in 3 ms  ")
        if i % 40 == 0:
            lines += ["| id | status |", "|----|--------|", f"| {i} | ok |", "", "---"]
        if i % 25 == 0:
            lines += ["- retry", "- skip", "- done", f"Use `cmd --flag {i}` 你好，世界。"]
    text = "\n".join(lines)
    assert len(text) >= 60_000
    out = apply_rules(text, ALL)
    assert "\x1b" not in out and "✅" not in out and "`cmd --flag 25`" in out


# ---------------------------------------------------------------------------------------------
# Properties
# ---------------------------------------------------------------------------------------------

FRAGMENTS = [
    "a", "word", "hello world", "the unit tests", " ", "  ", "\t", "\n", "\n\n", "\n\n\n",
    "- ", "* ", "+ ", "  - ", "1. ", "# ", "## ", "### ", "|", " | ", "|---|---|", "---|---",
    "---", "***", "===", "~~~", "```", "`", "``", "\\|", ":", ";", "key: value", "你好", "世界",
    "，", "。", "（", "）", "「", "」", "：", "✅", "🚀", "👨‍👩‍👧", "🇺🇸", "👍🏽", "⚠️", "⚠", "1️⃣",
    "\u200d", "\ufe0f", "\u20e3", "→", "∑", "\x1b[31m", "\x1b[0m", "\x1b[K", "\x1b]0;t\x07",
    "\x1b", "\r", "\r\n", "\u3000", "\ue000", "0000000",
]  # fmt: skip
WORDS = st.sampled_from(["fix", "the", "parser", "tests", "run", "a", "b", "你好", "✅", "`x`"])
PHRASE = st.lists(WORDS, min_size=1, max_size=8).map(" ".join)
LINE = st.one_of(
    st.lists(st.sampled_from(FRAGMENTS), max_size=8).map("".join),
    PHRASE,
    PHRASE.map(lambda p: "- " + p),
    PHRASE.map(lambda p: "* " + p),
    PHRASE.map(lambda p: "  - " + p),
    PHRASE.map(lambda p: "## " + p),
    st.lists(PHRASE, min_size=1, max_size=3).map(lambda cells: "| " + " | ".join(cells) + " |"),
    st.sampled_from(["|---|", "|---|---|", "| --- | :-: | --: |", "---", "", "```", "~~~"]),
    st.text(max_size=12),
)
MARKDOWNISH = st.one_of(
    st.lists(LINE, max_size=25).map("\n".join),
    st.lists(st.sampled_from(FRAGMENTS), max_size=60).map("".join),
    st.text(max_size=200),
)
PROPERTY_SETTINGS = settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


@pytest.mark.parametrize("rule", ALL, ids=lambda rule: rule.name)
@PROPERTY_SETTINGS
@given(text=MARKDOWNISH)
def test_every_rule_is_idempotent(rule: Rule, text: str) -> None:
    once = rule(text)
    assert rule(once) == once


@PROPERTY_SETTINGS
@given(text=MARKDOWNISH)
def test_apply_rules_is_idempotent(text: str) -> None:
    once = apply_rules(text, ALL)
    assert apply_rules(once, ALL) == once
    selected = select_rules(text)
    once = apply_rules(text, selected)
    assert apply_rules(once, selected) == once


FENCE_LIKE = re.compile(r"^[ \t>]*(```|~~~)", re.M)


@st.composite
def documents_with_fences(draw: st.DrawFn) -> tuple[str, list[str]]:
    """Prose with fenced blocks embedded; returns the document and its blocks in order."""
    parts: list[str] = []
    blocks: list[str] = []
    for _ in range(draw(st.integers(1, 4))):
        prose = draw(st.lists(LINE, max_size=6).map("\n".join))
        if FENCE_LIKE.search(prose) is None:
            parts.append(prose)
        char = draw(st.sampled_from("`~"))
        size = draw(st.integers(3, 5))
        info = draw(st.sampled_from(["", "python", " js title=x", "  ", "md {.x}"]))
        if char == "~":
            info = draw(st.sampled_from([info, " `weird` info"]))
        closer_pattern = re.compile(rf"^[ \t>]*{re.escape(char)}{{{size},}}[ \t\r]*$")
        body = [
            line
            for line in draw(st.lists(LINE, max_size=8))
            for line in line.split("\n")
            if closer_pattern.match(line) is None
        ]
        closer = char * draw(st.integers(size, size + 2)) + draw(st.sampled_from(["", "  "]))
        blocks.append("\n".join([char * size + info, *body, closer]))
        parts.append(blocks[-1])
    if draw(st.booleans()):  # an unterminated fence protects to the end
        closer_pattern = re.compile(r"^[ \t>]*`{3,}[ \t\r]*$")
        body = "\n".join(
            line
            for line in draw(st.lists(LINE, max_size=5).map("\n".join)).split("\n")
            if closer_pattern.match(line) is None
        )
        blocks.append("```\n" + body if body else "```")
        parts.append(blocks[-1])
    return "\n".join(parts) + draw(st.sampled_from(["", "\n"])), blocks


@PROPERTY_SETTINGS
@given(case=documents_with_fences())
def test_apply_rules_leaves_fenced_blocks_byte_identical(case: tuple[str, list[str]]) -> None:
    doc, blocks = case
    for rules in (ALL, select_rules(doc)):
        out = apply_rules(doc, rules)
        position = 0
        for block in blocks:
            found = out.find(block, position)
            assert found >= 0, (block, out)
            position = found + len(block)
        assert apply_rules(out, rules) == out


@PROPERTY_SETTINGS
@given(
    spans=st.lists(
        st.text(st.sampled_from(list("ab ✅🇺🇸，。|-*#\x1b[m~你")), min_size=1, max_size=10),
        min_size=1,
        max_size=5,
    ),
    prose=st.lists(LINE, max_size=10),
)
def test_apply_rules_leaves_inline_code_byte_identical(spans: list[str], prose: list[str]) -> None:
    prose = [line for line in prose if "`" not in line]
    lines = [f"Note {i}: `{span}` end." for i, span in enumerate(spans)]
    doc = "\n".join(line for pair in zip(prose, lines, strict=False) for line in pair)
    doc += "\n" + "\n".join(lines[len(prose) :])
    out = apply_rules(doc, ALL)
    for span in spans:
        assert f"`{span}`" in out


@settings(max_examples=200, deadline=None)
@given(text=st.text(max_size=300))
def test_rules_accept_any_text(text: str) -> None:
    for rule in ALL:
        assert isinstance(rule(text), str)
    assert isinstance(apply_rules(text, ALL), str)
    assert isinstance(looks_like_code(text), bool)
    names(select_rules(text))
