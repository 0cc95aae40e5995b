"""Reports people read (``--report PATH``): a Markdown summary or a self-contained HTML page.

The format is chosen by the extension (:data:`PAGES`): ``.md`` for a CI job summary
(``$GITHUB_STEP_SUMMARY``) or a PR comment (a totals line, then a table per file: outcome,
tokens before, after and saved), ``.html`` for a page with the same table, the totals and a
chart of tokens before and after per session (inline SVG bars). The page loads nothing: no
script, no stylesheet, no font, no CDN; it opens offline.

Both are made from the run's :class:`~compactctl.app.report.Report` and its slim rows
(``keep_rows``: path, outcome, the token counts of docs/report.schema.json, the error or
skip reason), so memory is a few dozen bytes per file however large the sessions are.
A token count a command does not measure (``tokensBefore`` of ``rules``) shows as ``-``.
``eval``'s pages add what it measured (:mod:`compactctl.app.report_eval`): the probes in the
totals line, retention and probes kept per file, a file below a gate named so, then the
tables of retention per kind and of the lost probes. Every text is escaped for its page
(:func:`md_text`, :func:`html.escape`): a probe is arbitrary transcript text.
"""

from __future__ import annotations

import html
import os
from collections.abc import Callable
from typing import Any

from compactctl.app.report import Report
from compactctl.app.report_eval import (
    EVAL_COLUMNS,
    Section,
    eval_cells,
    eval_sections,
    gate_cell,
    probes_line,
)
from compactctl.errors import UsageError

__all__ = ["PAGES", "check_page", "html_page", "markdown", "md_text", "write_page"]


def _kind(path: str) -> str:
    return os.path.splitext(path)[1].lower()


def check_page(path: str) -> None:
    """Refuse a ``--report`` path that cannot be written, before any file is processed (so
    exit 2 means nothing was done): an extension no renderer writes, a folder that does not
    exist or cannot be written to, a path that is a folder or a file that cannot be
    written. Before, a bad folder was found only once the run's work had landed (a
    fresh-user trial: ``compact --force --report nodir/r.md`` appended, then exited 2).

    Raises:
        UsageError: the extension is not one of :data:`PAGES` (the message lists them), or
            the page cannot be written there (the message says why).
    """
    if _kind(path) not in PAGES:
        known = ", ".join(sorted(PAGES))
        raise UsageError(
            f"--report {path}: unknown report type {_kind(path) or '(no extension)'!r}; "
            f"the extension chooses it: {known}"
        )
    folder = os.path.dirname(path) or os.curdir
    why = None
    if os.path.isdir(path):
        why = "it is a folder; name a file in it, such as report" + _kind(path)
    elif not os.path.isdir(folder):
        why = f"no folder {folder}; create it first, or name a report in a folder that exists"
    elif not os.access(folder, os.W_OK | os.X_OK) and not os.path.exists(path):
        why = f"the folder {folder} is not writable"
    elif os.path.exists(path) and not os.access(path, os.W_OK):
        why = "the file is not writable"
    if why is not None:
        raise UsageError(f"--report {path}: cannot write: {why} (nothing was done)")


def write_page(path: str, report: Report, verb: str, rest: str = "unchanged") -> None:
    """Write the report of the run to ``path`` as its extension says.

    ``verb`` and ``rest`` are the closing line's (``compacted``, ``unchanged``:
    :meth:`Report.summary`). When ``path`` is the file named by
    ``$GITHUB_STEP_SUMMARY``, the Markdown is appended to it (a job step may write several
    summaries; GitHub shows them all); any other path is replaced.

    Raises:
        UsageError: unknown extension (:func:`check_page`), or the file cannot be written.
    """
    check_page(path)
    text = PAGES[_kind(path)](report, report.summary(verb, rest))
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    mode = "a" if summary and os.path.abspath(summary) == os.path.abspath(path) else "w"
    try:
        with open(path, mode, encoding="utf-8") as f:
            f.write(text)
    except OSError as exc:  # checked before the run (check_page): it changed meanwhile
        raise UsageError(
            f"--report {path}: cannot write: {exc.strerror} (the run's files were processed; "
            "only the report is missing)"
        ) from None


def _n(value: Any) -> str:
    """A token count with thousands separators, ``-`` when not measured."""
    return f"{value:,}" if isinstance(value, int) else "-"


def _totals_line(report: Report, summary: str) -> str:
    """``summary`` (the closing line, ``2 files compacted, 1 failed.``) and the tokens:
    ``Tokens 9,000 -> 3,000 (saved 6,000).``, what a dry run would save; eval adds its probes
    (:func:`~compactctl.app.report_eval.probes_line`)."""
    t = report.totals()
    line = summary
    if t["tokensBefore"] is not None and t["tokensAfter"] is not None:
        saved = _n(t["tokensSaved"])
        line += f" Tokens {_n(t['tokensBefore'])} -> {_n(t['tokensAfter'])} (saved {saved})."
    elif t["tokensSaved"] is not None:
        line += f" Tokens saved: {_n(t['tokensSaved'])}."
    if t.get("tokensWouldSave") is not None:  # --dry-run, --check: nothing was written
        line += f" Would save {_n(t['tokensWouldSave'])} tokens."
    return line + probes_line(report.rows)


def _outcome(row: dict[str, Any]) -> str:
    """The outcome cell: ``changed``, ``failed: why`` / ``skipped: why``, or (eval) ``below
    the minimum: retention 0 < 0.9`` (:func:`~compactctl.app.report_eval.gate_cell`)."""
    why = row.get("error") or row.get("reason")
    return gate_cell(row) or (f"{row['outcome']}: {why}" if why else str(row["outcome"]))


def _title(report: Report) -> str:
    return f"compactctl {report.command}".rstrip()


def _files(report: Report) -> Section:
    """The table of files: outcome, (eval) retention and probes kept, the token counts."""
    evaluated = any("eval" in row for row in report.rows)
    extra = EVAL_COLUMNS if evaluated else []
    columns = [("file", False), ("outcome", False), *extra,
               *((label, True) for label in _KEYS.values())]  # fmt: skip
    cells = [
        [str(row["path"]), _outcome(row), *(eval_cells(row) if evaluated else []),
         *(_n(row.get(k)) for k in _KEYS)]
        for row in report.rows
    ]  # fmt: skip
    classes = tuple(
        f"{row['outcome']} below" if (row.get("eval") or {}).get("below") else str(row["outcome"])
        for row in report.rows
    )
    return Section("Files", "files", columns, cells, classes=classes)


def _sections(report: Report) -> list[Section]:
    """The tables of the page: the files, then eval's (retention per kind, lost probes)."""
    if not report.rows:
        return []
    return [_files(report), *eval_sections(report.rows)]


_MD_SPECIAL = str.maketrans({c: "\\" + c for c in "\\`*_[]<>|~&$"})
"""Markdown's inline punctuation, backslash-escaped in a cell (CommonMark lets any ASCII
punctuation be escaped): code spans, emphasis, links, HTML tags, entities, table pipes,
strikethrough and GitHub's math show as the characters they are."""


def md_text(text: str) -> str:
    """``text`` as literal text in a Markdown table cell: one line, its markup escaped.

    >>> print(md_text("a|b `x` <script>\\n*y*"))
    a\\|b \\`x\\` \\<script\\> \\*y\\*
    """
    return " ".join(text.split()).translate(_MD_SPECIAL)


def _md_table(section: Section, *, titled: bool) -> list[str]:
    lines = ["", f"#### {section.title}"] if titled else []
    if section.rows:
        lines += [
            "",
            "| " + " | ".join(name for name, _ in section.columns) + " |",
            "| " + " | ".join("---:" if n else "---" for _, n in section.columns) + " |",
            *("| " + " | ".join(md_text(c) for c in cells) + " |" for cells in section.rows),
        ]
    if section.note:
        lines += ["", md_text(section.note)]
    return lines


def markdown(report: Report, summary: str) -> str:
    """The Markdown report: a heading, the totals line (``summary``, the run's closing
    line, then the tokens; eval: the probes), a table with a row per file; eval adds
    retention and probes kept to it, then a table of retention per kind and one of the lost
    probes (:mod:`compactctl.app.report_eval`). Cell texts are escaped (:func:`md_text`).

    >>> r = Report(command="compact", keep_rows=True)
    >>> r.done({"path": "a|b.jsonl", "tokensBefore": 10, "tokensAfter": 4, "tokensSaved": 6},
    ...        changed=True)
    >>> print(markdown(r, r.summary("compacted")), end="")
    ### compactctl compact
    <BLANKLINE>
    1 file compacted. Tokens 10 -> 4 (saved 6).
    <BLANKLINE>
    | file | outcome | tokens before | tokens after | tokens saved |
    | --- | --- | ---: | ---: | ---: |
    | a\\|b.jsonl | changed | 10 | 4 | 6 |
    """
    lines = [f"### {_title(report)}", "", _totals_line(report, summary)]
    for i, section in enumerate(_sections(report)):
        lines += _md_table(section, titled=i > 0)
    return "\n".join(lines) + "\n"


_KEYS = {"tokensBefore": "tokens before", "tokensAfter": "tokens after",
         "tokensSaved": "tokens saved"}  # fmt: skip
"""The token counts of a row, and their column headers."""

_STYLE = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; margin-top: 1em; }
th, td { border: 1px solid #ccc; padding: 4px 8px; }
td.n { text-align: right; font-variant-numeric: tabular-nums; }
.failed, .below { color: #b00020; } .skipped { color: #777; }
svg text { font: 12px system-ui, sans-serif; fill: #222; }
.before { fill: #b0b7c3; } .after { fill: #2f6fdf; }
"""

_BAR = 14
"""Height of one bar of the chart, in px (a session has two: before and after)."""

_LABEL_W, _CHART_W = 260, 480
"""Widths of the chart's label column and of its longest bar, in px."""


def _chart(rows: list[dict[str, Any]]) -> str:
    """An inline SVG: per session with both counts, a bar of tokens before and one of
    tokens after, to one scale (the largest count)."""
    measured = [r for r in rows if isinstance(r.get("tokensBefore"), int)
                and isinstance(r.get("tokensAfter"), int)]  # fmt: skip
    if not measured:
        return "<p>No token counts before and after in this run: no chart.</p>"
    top = max(max(r["tokensBefore"], r["tokensAfter"]) for r in measured) or 1
    step = 2 * _BAR + 10
    height = len(measured) * step + 30
    width = _LABEL_W + _CHART_W + 90
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" role="img" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" aria-label="tokens before and after per session">',
        f'<rect class="before" x="{_LABEL_W}" y="2" width="12" height="12"/>'
        f'<text x="{_LABEL_W + 16}" y="12">tokens before</text>'
        f'<rect class="after" x="{_LABEL_W + 130}" y="2" width="12" height="12"/>'
        f'<text x="{_LABEL_W + 146}" y="12">tokens after</text>',
    ]
    for i, r in enumerate(measured):
        y = 24 + i * step
        name = str(r["path"])
        shown = name if len(name) <= 40 else "..." + name[-37:]
        parts.append(
            f'<text x="{_LABEL_W - 6}" y="{y + _BAR + 4}" text-anchor="end">'
            f"<title>{html.escape(name)}</title>{html.escape(shown)}</text>"
        )
        for j, key in enumerate(("tokensBefore", "tokensAfter")):
            value = r[key]
            w = max(1, round(_CHART_W * value / top)) if value else 0
            yy = y + j * _BAR
            cls = "before" if j == 0 else "after"
            parts.append(
                f'<rect class="bar {cls}" x="{_LABEL_W}" y="{yy}" width="{w}" height="{_BAR - 2}">'
                f"<title>{key}: {value:,}</title></rect>"
                f'<text x="{_LABEL_W + w + 4}" y="{yy + _BAR - 3}">{value:,}</text>'
            )
    parts.append("</svg>")
    return "\n".join(parts)


def _html_table(section: Section) -> list[str]:
    out = [f"<h2>{html.escape(section.title)}</h2>"]
    if section.rows:
        head = "".join(f"<th>{html.escape(name)}</th>" for name, _ in section.columns)
        out.append(f'<table id="{section.id}"><thead><tr>{head}</tr></thead><tbody>')
        for i, cells in enumerate(section.rows):
            tds = "".join(
                f'<td class="n">{html.escape(c)}</td>' if n else f"<td>{html.escape(c)}</td>"
                for c, (_, n) in zip(cells, section.columns, strict=True)
            )
            cls = f' class="{html.escape(section.classes[i])}"' if section.classes else ""
            out.append(f"<tr{cls}>{tds}</tr>")
        out.append("</tbody></table>")
    if section.note:
        out.append(f'<p id="{section.id}-note">{html.escape(section.note)}</p>')
    return out


def html_page(report: Report, summary: str) -> str:
    """The HTML report: one self-contained page (inline CSS and SVG, nothing fetched) with
    the totals line (``summary`` and the tokens; eval: the probes), the chart of tokens
    before and after per session, and the tables of :func:`markdown`, every text escaped."""
    title = html.escape(_title(report))
    body = [
        "<!DOCTYPE html>",
        '<html lang="en">',
        '<head><meta charset="utf-8">',
        f"<title>{title}</title>",
        f"<style>{_STYLE}</style>",
        "</head>",
        "<body>",
        f"<h1>{title}</h1>",
        f'<p id="totals">{html.escape(_totals_line(report, summary))}</p>',
        "<h2>Tokens before and after, per session</h2>",
        f'<div id="chart">{_chart(report.rows)}</div>',
    ]
    for section in _sections(report):
        body += _html_table(section)
    body += ["</body>", "</html>"]
    return "\n".join(body) + "\n"


PAGES: dict[str, Callable[[Report, str], str]] = {".md": markdown, ".html": html_page}
"""The report each ``--report`` extension gets (``.md``, ``.html``): ``(report, closing
line) -> text``."""
