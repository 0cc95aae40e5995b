"""``--report PATH``: the Markdown summary (checked exactly, against a golden written by
hand), the self-contained HTML page (its structure, and opened in a headless browser when
one is installed), the extension that chooses them, ``$GITHUB_STEP_SUMMARY``, and what
``eval``'s pages say: retention, the file below the gate, the lost probes (their text
escaped)."""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import SAMPLES, run_cli, write_jsonl
from tests.sessions import load_records

S1 = SAMPLES / "small-s1.canonical.jsonl"

CLAUDE_REFUSED = (
    "is a claude-code transcript; compactctl never appends to another agent's file (nothing "
    "was written). Pass -o FILE, -o DIR/ (many files) or -o - to write canonical JSONL with "
    "the result; or, with compact, --as native to write a new claude-code session the agent "
    "resumes"
)

# Checked by hand: small-s1 counts 7,320 tokens (--estimate) before `compact --force` and
# 2,274 after (inspect --estimate says the same of the compacted file), so two copies sum to
# 14,640 -> 4,548, saved 10,092; the Claude Code file is refused in place.
GOLDEN_MD = f"""\
### compactctl compact

2 files compacted, 1 failed. Tokens 14,640 -> 4,548 (saved 10,092).

| file | outcome | tokens before | tokens after | tokens saved |
| --- | --- | ---: | ---: | ---: |
| a.jsonl | changed | 7,320 | 2,274 | 5,046 |
| b.jsonl | changed | 7,320 | 2,274 | 5,046 |
| claude.jsonl | failed: {CLAUDE_REFUSED} | - | - | - |
"""


@pytest.fixture()
def tree(tmp_path: Path) -> Path:
    for name in ("a", "b"):
        shutil.copy(S1, tmp_path / f"{name}.jsonl")
    shutil.copy(SAMPLES / "small-s1.claude-code.jsonl", tmp_path / "claude.jsonl")
    return tmp_path


def compact(tree: Path, report: str, env: dict[str, str] | None = None) -> None:
    r = run_cli("compact", "--force", "--estimate", "--report", report,
                "a.jsonl", "b.jsonl", "claude.jsonl", cwd=tree, env=env)  # fmt: skip
    assert r.returncode == 3, r.stderr.decode()  # the Claude Code file fails in place
    assert r.stdout == b""


def test_markdown_report_is_exact(tree: Path) -> None:
    compact(tree, "summary.md")
    assert (tree / "summary.md").read_text() == GOLDEN_MD


def test_step_summary_is_appended_to(tree: Path) -> None:
    summary = tree / "step_summary.md"
    summary.write_text("## earlier step output\n")
    compact(tree, str(summary), env={"GITHUB_STEP_SUMMARY": str(summary)})
    assert summary.read_text() == "## earlier step output\n" + GOLDEN_MD


def test_unknown_extension_is_a_usage_error(tree: Path) -> None:
    r = run_cli("rules", "--report", "out.txt", "a.jsonl", cwd=tree)
    assert r.returncode == 2
    said = b"--report out.txt: unknown report type '.txt'; the extension chooses it: .html, .md"
    assert said in r.stderr
    assert not (tree / "out.txt").exists()
    assert (tree / "a.jsonl").read_bytes() == S1.read_bytes()  # refused before any file


class _Page(HTMLParser):
    """What the page holds: tags, attributes that could load something, rects, text."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.loads: list[tuple[str, str, str]] = []
        self.rects: list[dict[str, str | None]] = []
        self.text: list[str] = []
        self.rows = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        for k, v in attrs:
            if k in {"src", "href", "xlink:href", "srcset"} or (v and "url(" in v):
                self.loads.append((tag, k, v or ""))
        if tag == "rect":
            self.rects.append(dict(attrs))
        if tag == "tr":
            self.rows += 1

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def test_html_report_is_self_contained(tree: Path) -> None:
    compact(tree, "report.html")
    source = (tree / "report.html").read_text()
    page = _Page()
    page.feed(source)
    assert page.loads == [] and "script" not in page.tags and "link" not in page.tags
    assert (
        "@import" not in source
        and "url(" not in source
        and "http://" not in source.replace('xmlns="http://www.w3.org/2000/svg"', "")
    )
    assert page.tags.count("svg") == 1
    text = " ".join(page.text)
    assert "2 files compacted, 1 failed. Tokens 14,640 -> 4,548 (saved 10,092)." in text
    # the chart: a legend swatch of each, then a bar before and a bar after per session
    # (the refused file has no counts, so no bars), to one scale: 480 px for 7,320 tokens
    assert [r["class"] for r in page.rects[:2]] == ["before", "after"]  # the legend
    bars = page.rects[2:]
    assert [r["class"] for r in bars] == ["bar before", "bar after"] * 2
    assert [r["width"] for r in bars] == ["480", str(round(480 * 2274 / 7320))] * 2
    assert page.rows == 4  # the header and a row per file
    assert CLAUDE_REFUSED in text


CHROMIUM = shutil.which("chromium-headless-shell") or shutil.which("chromium")


def _missing(why: str, required: bool) -> None:
    """Skip for want of a browser; fail instead where it must run (``.ci/run`` sets
    ``COMPACTCTL_BROWSER_REQUIRED=1`` once the browser is installed)."""
    if required:
        pytest.fail(why)
    pytest.skip(why)


@contextlib.contextmanager
def opened(path: Path) -> Iterator[tuple[Any, list[str]]]:
    """The page at ``path`` open in headless Chromium, and the URLs it requested so far."""
    required = os.environ.get("COMPACTCTL_BROWSER_REQUIRED") == "1"  # .ci/run sets it
    if CHROMIUM is None:
        why = "no headless Chromium: apt-get install chromium-headless-shell (Debian) to run it"
        _missing(why, required)
    try:
        from playwright import sync_api
    except ImportError:
        _missing("playwright not installed: pip install playwright (make install does)", required)
    requests: list[str] = []
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM)
        try:
            page = browser.new_page()
            page.on("request", lambda r: requests.append(r.url))
            page.goto(path.resolve().as_uri())
            yield page, requests
        finally:
            browser.close()


def test_html_report_in_a_headless_browser(tree: Path) -> None:
    """Opened in Chromium: the chart is drawn (bar widths as laid out), the totals and the
    table are shown, and the page asked for nothing over the network."""
    compact(tree, "report.html")
    with opened(tree / "report.html") as (page, requests):
        assert page.title() == "compactctl compact"
        totals = page.locator("#totals").inner_text()
        widths = page.evaluate(
            "[...document.querySelectorAll('#chart rect')].map(r => r.getBBox().width)"
        )
        cells = page.locator("#files tbody tr").all_inner_texts()
    assert totals == "2 files compacted, 1 failed. Tokens 14,640 -> 4,548 (saved 10,092)."
    assert widths == [12, 12] + [480, round(480 * 2274 / 7320)] * 2
    assert [c.split("\t")[:2] for c in cells] == [
        ["a.jsonl", "changed"],
        ["b.jsonl", "changed"],
        ["claude.jsonl", f"failed: {CLAUDE_REFUSED}"],
    ]
    assert requests == [(tree / "report.html").resolve().as_uri()]


# --- eval: what the report says a compaction kept -----------------------------------------

MARKUP = "<script>window.leaked = 1</script> a|b c\\|d `x` __init__ *y* &amp; $z$\nsecond line. "
"""Put before small-s1's first request: markup of HTML, Markdown and GitHub (a pipe, one
after a backslash, backticks, emphasis, an entity, math) and a newline."""


@pytest.fixture()
def evaluated(tmp_path: Path) -> Path:
    """odd.jsonl: small-s1 with MARKUP opening its first request and a summary that replaces
    every message by "Nothing to report." (it keeps no probe); s1.jsonl: small-s1 as is."""
    records = load_records("small-s1")
    first = next(r for r in records if r.get("role") == "user")
    first["content"] = MARKUP + first["content"]
    uuids = [r["uuid"] for r in records if r["type"] == "message"]
    summary = {"type": "summary", "uuid": "s-nothing", "replaces": uuids,
               "summaryText": "Nothing to report.", "lastSummarizedTurnId": 6,
               "timestamp": "2025-05-16T10:00:00Z"}  # fmt: skip
    write_jsonl(tmp_path / "odd.jsonl", [*records, summary])
    shutil.copy(S1, tmp_path / "s1.jsonl")
    return tmp_path


def run_eval(tree: Path, report: str) -> None:
    r = run_cli("eval", "--estimate", "--min-retention", "0.9", "--report", report,
                "odd.jsonl", "s1.jsonl", cwd=tree)  # fmt: skip
    assert r.returncode == 1, r.stderr.decode()  # odd.jsonl is below the gate
    assert b"odd.jsonl: below the minimum: retention 0 < 0.9" in r.stderr


# Checked by hand: `inspect --estimate odd.jsonl` counts 7,341 tokens and an effective
# context of 11 (the summary); small-s1 counts 7,320 and has 36 probes (`eval` keeps all 36
# of s1 and none of odd's 36: 36 of 72, 0.5 per kind too). The first request's probe is its
# opening, cut by the report at 160 chars; `eval --json` lists these five lost first.
EVAL_ROWS = [
    "| s1.jsonl | ok | 1 | 36 of 36 | 7,320 | 7,320 | 0 |",
    "| file | first_request | latest_request | file_path | command | error | identifier "
    "| user_constraint | decision | pending_task |",
    "| odd.jsonl | 0 (0/1) | 0 (0/1) | 0 (0/5) | 0 (0/7) | 0 (0/8) | 0 (0/4) | 0 (0/4) "
    "| 0 (0/3) | 0 (0/3) |",
    "| all files | 0.5 (1/2) | 0.5 (1/2) | 0.5 (5/10) | 0.5 (7/14) | 0.5 (8/16) | 0.5 (4/8) "
    "| 0.5 (4/8) | 0.5 (3/6) | 0.5 (3/6) |",
    "| odd.jsonl | 63 | latest\\_request | Let's stop here for today. Give me a short status: "
    "what is done, and what is still open? |",
    "| odd.jsonl | 3 | user\\_constraint | Do not add new dependencies |",
    "| odd.jsonl |  |  | and 31 more (compactctl eval -v lists them all) |",
]


def test_eval_markdown_says_what_eval_found(evaluated: Path) -> None:
    run_eval(evaluated, "eval.md")
    text = (evaluated / "eval.md").read_text()
    lines = text.splitlines()
    assert lines[:3] == [
        "### compactctl eval",
        "",
        "1 file below the minimum, 1 passed. Tokens 14,661 -> 7,331 (saved 7,330). "
        "Probes: 36 of 72 kept, retention 0.5.",
    ]
    odd = next(line for line in lines if line.startswith("| odd.jsonl | below the minimum"))
    assert odd.endswith(" | 0 | 0 of 36 | 7,341 | 11 | 7,330 |")
    assert all(row in lines for row in EVAL_ROWS), text
    assert "#### Retention by kind" in lines and "#### Lost probes" in lines
    # the text a Markdown renderer (CommonMark with GitHub's tables) shows is the probe's
    # own, on one line: no tag, code span, emphasis or split cell made of it
    from markdown_it import MarkdownIt

    rendered = MarkdownIt("commonmark", {"html": True}).enable("table").render(text)
    page = _Page()
    page.feed(rendered)
    cells = [t for t in page.text if t.startswith("<script>")]
    opening = " ".join(MARKUP.split()) + " `quillpad list --page 2` shows the last entry"
    assert len(cells) == 1 and cells[0].startswith(opening), cells
    assert cells[0].endswith("page 1 again, and the…") and len(cells[0]) <= 160
    assert {"script", "code", "em", "strong"}.isdisjoint(page.tags)


def test_eval_html_page_in_a_headless_browser(evaluated: Path) -> None:
    """Opened in Chromium: the totals give the probes, the files table each file's retention
    and the file below the gate, the lost probes table the probe with markup as its text
    (no script ran)."""
    run_eval(evaluated, "eval.html")
    with opened(evaluated / "eval.html") as (page, requests):
        totals = page.locator("#totals").inner_text()
        files = page.locator("#files tbody tr").all_inner_texts()
        below = page.locator("#files tr.below td").first.inner_text()
        kinds = page.locator("#kinds tbody tr").all_inner_texts()
        lost = page.locator("#lost tbody tr").all_inner_texts()
        leaked = page.evaluate("[window.leaked, document.scripts.length]")
    assert totals.endswith("Probes: 36 of 72 kept, retention 0.5.")
    assert [row.split("\t")[2:4] for row in files] == [["0", "0 of 36"], ["1", "36 of 36"]]
    assert files[0].split("\t")[1].startswith("below the minimum") and below == "odd.jsonl"
    assert kinds[-1].split("\t")[:4] == ["all files", "0.5 (1/2)", "0.5 (1/2)", "0.5 (5/10)"]
    first = lost[0].split("\t")
    assert first[:3] == ["odd.jsonl", "3", "first_request"]
    assert first[3].startswith(" ".join(MARKUP.split()))  # the markup shown as text
    assert lost[-1].split("\t")[-1] == "and 31 more (compactctl eval -v lists them all)"
    assert len(lost) == 6 and leaked == [None, 0]
    assert requests == [(evaluated / "eval.html").resolve().as_uri()]


def test_eval_pages_give_the_judges_grades(evaluated: Path, monkeypatch) -> None:
    """``eval --judge --report``: a table of each file's grades per dimension and overall, a
    failed judge's row saying why (its probe results still in the other tables), the mean of
    the graded files, on the Markdown page and the HTML page; ``--json`` counts the failed
    judges in ``totals.judgeFailed``."""
    import json

    import litellm
    from typer.testing import CliRunner

    from compactctl.cli import app
    from tests.fakes import FakeModel, judge_grades

    boom = litellm.InternalServerError("boom", llm_provider="openai", model="gpt-4o-mini")
    # odd.jsonl first: its 4 questions answered and graded; then every call fails (s1.jsonl)
    FakeModel(monkeypatch, *["an answer", judge_grades(accuracy=5)] * 4, default=boom)
    monkeypatch.chdir(evaluated)
    args = ["eval", "--estimate", "--jobs", "1", "--judge", "openai/gpt-4o-mini"]
    r = CliRunner().invoke(app, [*args, "--json", "--report", "eval.md", "odd.jsonl", "s1.jsonl"])
    assert r.exit_code == 3, r.stderr  # a failed judge: exit 3, the probe results stand
    totals = json.loads(r.stdout)["totals"]  # one failed judge counted, the graded averaged
    assert totals["judgeFailed"] == 1 and totals["judge"]["accuracy"] == 5.0
    lines = (evaluated / "eval.md").read_text().splitlines()
    at = lines.index("#### Judge (grades 0-5)")
    failed = (
        "failed: --judge model openai/gpt-4o-mini failed: InternalServerError: "
        "litellm.InternalServerError: boom"
    )
    # odd.jsonl: accuracy 5 on each of the 4 questions, every other dimension 3: overall
    # (5 + 5 * 3) / 6 = 3.33; the mean of the graded files is odd.jsonl's own
    assert lines[at + 2 : at + 8] == [
        "| file | judge | accuracy | contextAwareness | artifactTrail | completeness "
        "| continuity | instructionFollowing | overall |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
        "| odd.jsonl | openai/gpt-4o-mini | 5.00 | 3.00 | 3.00 | 3.00 | 3.00 | 3.00 | 3.33 |",
        f"| s1.jsonl | openai/gpt-4o-mini | - | - | - | - | - | - | {failed} |",
        "| all files |  | 5.00 | 3.00 | 3.00 | 3.00 | 3.00 | 3.00 | 3.33 |",
        "",
    ]
    assert lines[at + 8] == "The judge failed on 1 file: its probe results stand."
    assert "| s1.jsonl | ok | 1 | 36 of 36 | 7,320 | 7,320 | 0 |" in lines
    # the HTML page: the same table, in #judge
    FakeModel(monkeypatch, *["an answer", judge_grades(accuracy=5)] * 4, default=boom)
    r = CliRunner().invoke(app, [*args, "--report", "eval.html", "odd.jsonl", "s1.jsonl"])
    assert r.exit_code == 3, r.stderr
    page = _Page()
    page.feed((evaluated / "eval.html").read_text())
    assert "Judge (grades 0-5)" in page.text and failed in page.text
