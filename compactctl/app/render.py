"""Human-readable tables for reports (plain text, no terminal library)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["inspect_table", "table"]


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]], indent: str = "  ") -> str:
    """A left/right-aligned plain-text table (numbers right-aligned).

    >>> print(table(["role", "tokens"], [["user", 12], ["tool", 1234]]), end="")
      role  tokens
      user      12
      tool    1234
    """
    cells = [[str(h) for h in headers]] + [[_fmt(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    numeric = [
        all(isinstance(r[i], (int, float)) for r in rows) and rows for i in range(len(headers))
    ]
    out = []
    for r in cells:
        pairs = enumerate(zip(r, widths, strict=True))
        parts = [c.rjust(w) if numeric[i] else c.ljust(w) for i, (c, w) in pairs]
        out.append((indent + "  ".join(parts)).rstrip())
    return "\n".join(out) + "\n"


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.2f}"
    return str(value)


def inspect_table(r: dict[str, Any], *, verbose: bool = False) -> str:
    """The human report of one inspected file (the same numbers as ``--json``)."""
    est = " (estimate)" if r["tokenizer"] == "estimate" else f" ({r['tokenizer']})"
    window = r["contextWindow"]
    # a whole-JSON transcript (opencode's session .json, an Anthropic Messages request) has
    # events but no JSONL lines: say what was read rather than "0 lines"
    document = not r["lines"] and sum(r["events"].values())
    read = "one JSON document" if document else f"{r['lines']} lines"
    lines = [
        f"{r['path']}  [{r['format']}]",
        f"  {read}, {r['messages']} messages, {r['turns']} turns; "
        f"model {r['model'] or '-'}, context window {window or '-'}",
        f"  prompt estimate: {r['tokens']} tokens all messages -> "
        f"{r['effectiveTokens']} tokens effective context{est}"
        + (f", {100 * r['effectiveTokens'] / window:.1f}% of window" if window else ""),
        "  events: " + ", ".join(f"{k} {v}" for k, v in r["events"].items()),
        "",
        table(
            ["role", "messages", "bytes", "chars", "tokens"],
            [
                [k, v["messages"], v["bytes"], v["chars"], v["tokens"]]
                for k, v in r["byRole"].items()
            ],
        ).rstrip("\n"),
    ]
    if r["byTool"]:
        lines += [
            "",
            table(
                ["tool", "calls", "results", "errors", "bytes", "tokens"],
                [
                    [k, v["calls"], v["results"], v["errors"], v["bytes"], v["tokens"]]
                    for k, v in r["byTool"].items()
                ],
            ).rstrip("\n"),
        ]
    if r["largestToolOutputs"]:
        lines += [
            "",
            "  largest tool outputs:",
            table(
                ["line", "tool", "tokens", "uuid"],
                [[o["line"], o["tool"], o["tokens"], o["uuid"]] for o in r["largestToolOutputs"]],
                indent="    ",
            ).rstrip("\n"),
        ]
    d = r["duplicates"]
    if d["redundantToolOutputs"] or d["sourceDuplicateBytes"]:
        lines.append(
            f"  duplicates: {d['redundantToolOutputs']} repeated tool outputs "
            f"({d['redundantBytes']} bytes) in {d['exactToolOutputGroups']} groups"
            + (
                f"; {d['sourceDuplicateBytes']} bytes duplicated by the source format"
                if d["sourceDuplicateBytes"]
                else ""
            )
        )
    if r["history"]:
        lines += ["", "  compaction history:"]
        messages: dict[str, tuple[int, Any]] = {}  # uuid: (messages replaced, line)
        for h in r["history"]:
            if h["type"] == "revert":
                n = len(h["reverts"])
                lines.append(f"    line {h['line']}: revert of {n} compaction{'s' * (n != 1)}")
                continue
            what = h.get("mode") or h.get("format") or "-"
            n = h.get("targets", h.get("replaces", 0))
            if h.get("tiers"):
                what += f" with tiers {', '.join(h['tiers'])}"
            if "supersedes" in h:  # tiers' summary: it replaces the old summary's messages
                n, old_line = messages.get(h["supersedes"], (n - 1, None))
                what += f" in place of line {old_line}'s" if old_line else " in place of another"
            messages[h["uuid"]] = (n, h["line"])
            stats = h.get("stats") or {}
            saved = ""
            if isinstance(stats, dict) and "tokensBefore" in stats and "tokensAfter" in stats:
                saved = f", {stats['tokensBefore']} -> {stats['tokensAfter']} tokens"
            if "selectedTier" in h:  # the stats are the whole summary's: say what is shown
                tier = h["selectedTier"]
                size = (h.get("tierTokens") or {}).get(tier)
                what += f" (replay shows {tier}" + (f", {size} tokens)" if size else ")")
                saved = ""
            line = "-" if h["line"] is None else h["line"]  # a whole-JSON transcript has none
            back = " (taken back by undo)" if h.get("revertedBy") else ""
            lines.append(f"    line {line}: {h['type']} {what}, {n} messages{saved}{back}")
    findings = r["findings"]
    if findings:
        lines += ["", f"  findings ({len(findings)}):"]
        shown = findings if verbose else findings[:20]
        for f in shown:
            lines.append(f"    {r['path']}:{f['line']}: {f['kind']}: {f['message']}")
        if len(shown) < len(findings):
            lines.append(f"    ... {len(findings) - len(shown)} more (use -v or --json)")
    return "\n".join(lines) + "\n\n"


def store_table(doc: dict[str, Any]) -> str:
    """The human report of ``inspect --store`` (the same numbers as ``--json``)."""
    lines = [
        f"{doc['db']}  (schema {doc['schemaVersion']}), {doc['sessions']} sessions",
        f"  tokens saved: {doc['tokensSaved']}",
        "",
    ]
    if doc.get("paths"):
        lines[1:1] = ["  only: " + ", ".join(doc["paths"])]
    per_day = doc.get("compactionsPerDay") or []
    if per_day:
        keys = ("runs", "files", "changed", "failed", "skipped", "tokensSaved")
        lines.append(
            table(
                ["day", "runs", "files", "changed", "failed", "skipped", "tokens saved"],
                [[d["day"], *(d.get(k, 0) for k in keys)] for d in per_day],
            ).rstrip("\n")
        )
    else:
        lines.append("  no runs in the period")
    by_command = doc.get("byCommand") or {}
    if by_command:
        lines += ["", "  runs by command: " + ", ".join(f"{k} {v}" for k, v in by_command.items())]
    breaker = doc.get("sessionsInBreaker") or []
    lines += ["", f"  sessions in breaker state: {len(breaker)}"]
    for b in breaker:
        lines.append(
            f"    {b['sessionKey']}  {b.get('path') or ''}  {b['failures']} failures, "
            f"last {b['lastFailureAt']}"
        )
    return "\n".join(lines) + "\n"


def runs_table(doc: dict[str, Any]) -> str:
    """The human list of ``inspect --store --runs`` (the same rows as ``--json``)."""
    rows = doc["runs"]
    if not rows:
        return f"{doc['db']}: no runs in the period\n"
    keys = ("id", "startedAt", "command", "files", "changed", "unchanged", "failed", "skipped",
            "tokensSaved", "exitCode")  # fmt: skip
    head = ["run", "started", "command", "files", "changed", "unchanged", "failed", "skipped",
            "tokens saved", "exit"]  # fmt: skip
    return table(head, [[r[k] for k in keys] for r in rows], indent="")
