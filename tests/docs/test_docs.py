"""Every reference in the code resolves inside the repository.

Docstrings and comments (of compactctl/, tests/, bench/, scripts/) cite ``docs/design.md
section 5``, ``docs/formats.md sections 1 and 2``, ``docs/style.md habit 6``: the file must
exist and so must the numbered section (or habit). They must not cite what is not in the
repository: the design's sources by seed number (``seed 001``; docs/design.md section 9
names them), ``../shared``, or the old upper-case ``DESIGN.md`` / ``FORMATS.md`` /
``STYLE.md``.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

import pytest

from tests.helpers import ROOT

DOCS = ROOT / "docs"
CODE = sorted(
    path
    for folder in ("compactctl", "tests", "bench", "scripts")
    for path in (ROOT / folder).rglob("*.py")
    if path != Path(__file__).resolve()
    and not any(part.startswith(".") for part in path.relative_to(ROOT).parts)  # .venv-peers
)
"""The modules whose docstrings and comments are checked (this one quotes the bad patterns)."""

CITATION = re.compile(
    r"\bdocs/(?P<page>[\w-]+\.md),?\s+(?P<kind>sections?|habits?)\s+"
    r"(?P<numbers>\d+(?:(?:\s*,\s*|\s*-\s*|\s+and\s+|\s+or\s+)\d+)*)"
)
"""``docs/PAGE.md section N`` (also ``sections N and M``, ``habits N-M``)."""

DOC_PATH = re.compile(r"\bdocs/[\w./-]*[\w/]")
"""Any path under ``docs/`` (a trailing ``.`` or ``,`` is punctuation, not path)."""

OUTSIDE = re.compile(
    r"(?i:\bseeds?[\s_]+0\d\d\b|seed_0\d\d)|\.\./shared|\bshared/(?:seeds|samples)"
    r"|\b(?:DESIGN|FORMATS|STYLE)\.md\b"
)
"""References to files outside the repository."""


def _comments_and_strings(path: Path) -> list[tuple[int, str]]:
    """``(line, text)`` of the comments and docstrings of a module (in compactctl/, of every
    string literal: a format's ``reference`` is data that cites docs/formats.md), and of every
    name with ``seed_`` in it. Whitespace and comment markers are collapsed, so a citation
    wrapped over lines reads as one."""
    source = path.read_text(encoding="utf-8")
    every_string = path.is_relative_to(ROOT / "compactctl")
    docstrings = {
        node.lineno
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    }
    found: list[tuple[int, str]] = []
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if (
            tok.type == tokenize.COMMENT
            or (tok.type == tokenize.STRING and (every_string or tok.start[0] in docstrings))
            or (tok.type == tokenize.NAME and "seed_" in tok.string.lower())
        ):
            found.append((tok.start[0], tok.string))
    # consecutive comment lines form one text
    merged: list[tuple[int, str]] = []
    for line, text in found:
        if merged and text.startswith("#") and merged[-1][1].startswith("#"):
            merged[-1] = (merged[-1][0], merged[-1][1] + " " + text.lstrip("#"))
        else:
            merged.append((line, text))
    return [(line, re.sub(r"\s+", " ", text)) for line, text in merged]


def _texts() -> list[tuple[str, str]]:
    return [
        (f"{path.relative_to(ROOT)}:{line}", text)
        for path in CODE
        for line, text in _comments_and_strings(path)
    ]


def _numbers(spec: str) -> list[int]:
    """``"4 and 6"`` -> [4, 6]; ``"2-4"`` -> [2, 3, 4]."""
    out: list[int] = []
    for part in re.split(r"\s*,\s*|\s+and\s+|\s+or\s+", spec):
        if "-" in part:
            lo, hi = (int(x) for x in part.split("-"))
            out.extend(range(lo, hi + 1))
        else:
            out.append(int(part))
    return out


def _sections(page: str) -> set[int]:
    """Numbered sections (``## N. Title``) of a docs page."""
    text = (DOCS / page).read_text(encoding="utf-8")
    return {int(m) for m in re.findall(r"^## (\d+)\. ", text, re.M)}


def _habits() -> set[int]:
    """Numbers of the habits in docs/style.md."""
    text = (DOCS / "style.md").read_text(encoding="utf-8")
    body = text.split("## Twelve habits", 1)[1].split("\n## ", 1)[0]
    return {int(m) for m in re.findall(r"^(\d+)\. ", body, re.M)}


def test_the_docs_pages_exist() -> None:
    for page in ("README.md", "design.md", "formats.md", "architecture.md", "style.md"):
        assert (DOCS / page).is_file(), page
    assert _sections("design.md") == set(range(1, 10))
    assert _sections("formats.md") == set(range(0, 11))
    assert _habits() == set(range(1, 13))


def test_every_cited_docs_path_exists() -> None:
    missing = [
        f"{where}: {m.group(0)}"
        for where, text in _texts()
        for m in DOC_PATH.finditer(text)
        if not (ROOT / m.group(0)).exists()
    ]
    assert missing == []


def test_every_cited_section_exists() -> None:
    cited = 0
    missing: list[str] = []
    for where, text in _texts():
        for m in CITATION.finditer(text):
            page, kind = m.group("page"), m.group("kind")
            if not (DOCS / page).is_file():
                missing.append(f"{where}: {m.group(0)} (no such page)")
                continue
            known = _habits() if kind.startswith("habit") else _sections(page)
            for n in _numbers(m.group("numbers")):
                cited += 1
                if n not in known:
                    missing.append(f"{where}: {m.group(0)} (no {kind} {n} in docs/{page})")
    assert missing == []
    assert cited > 20  # the code does cite the design: the pattern still matches


def test_no_reference_leaves_the_repository() -> None:
    outside = [f"{where}: {m.group(0)}" for where, text in _texts() for m in OUTSIDE.finditer(text)]
    assert outside == []


@pytest.mark.parametrize(
    "text, bad",
    [
        ("Source: seed 001 Layer 1 table", True),
        ("Seed 000: every tool participates", True),
        ("Source: seed\n    001 Layer 1 table", True),
        ("see DESIGN.md section 3", True),
        ("in ../shared/samples", True),
        ("MinHash with seed :data:`MINHASH_SEED`", False),
        ("docs/design.md section 3", False),
    ],
)
def test_the_outside_pattern(text: str, bad: bool) -> None:
    assert bool(OUTSIDE.search(re.sub(r"\s+", " ", text))) is bad


def test_the_citation_pattern() -> None:
    found = [
        (m.group("page"), _numbers(m.group("numbers")))
        for m in CITATION.finditer(
            "docs/design.md section 3, docs/design.md sections 4 and 6, "
            "docs/formats.md sections 1 and 2; docs/style.md habits 2 and 4"
        )
    ]
    assert found == [
        ("design.md", [3]),
        ("design.md", [4, 6]),
        ("formats.md", [1, 2]),
        ("style.md", [2, 4]),
    ]


def test_docs_links_resolve() -> None:
    broken = [
        f"docs/{page.name}: {target}"
        for page in DOCS.glob("*.md")
        for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", page.read_text(encoding="utf-8"))
        if "://" not in target and not (page.parent / target).exists()
    ]
    assert broken == []
