"""``inspect``: counts, sizes, tokens, compaction history and validation findings of a transcript.

:func:`inspect_events` is the library entry: it takes one session's events and returns a
plain dict (the per-file object of ``inspect --json``; keys camelCase). It holds the
session's messages in memory to replay the effective context (one session at a time).
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Container, Iterable
from typing import Any

from compactctl.model import BadLine, CompactEvent, Event, Message, SessionEvent, SummaryEvent
from compactctl.replay import known_modes, replay
from compactctl.tokens import MESSAGE_OVERHEAD, TokenCounter, context_window_for, message_payload

__all__ = [
    "Finding",
    "bad_line_finding",
    "effective_context",
    "find_problems",
    "history_entry",
    "inspect_events",
    "prompt_tokens",
    "prompt_total",
    "reduction_findings",
    "tool_row",
]

Finding = dict[str, Any]
"""``{"line": int | None, "kind": str, "message": str}``."""

REPLY_PRIMING = 3
"""Tokens every reply is primed with (OpenAI cookbook, "How to count tokens with tiktoken")."""

_BAD_LINE_MESSAGES = {
    "malformed": "malformed JSON line (kept, skipped by replay)",
    "not-object": "line is JSON but not an object (kept, skipped by replay)",
    "torn": "torn last line: no newline at end of file (kept; appends start on a new line)",
    "blank": "blank line (kept, ignored)",
    "invalid-utf8": "line is not valid UTF-8 (kept, skipped by replay)",
}


def prompt_tokens(messages: Iterable[Message], counter: TokenCounter) -> int:
    """The prompt estimate of a message list, in tokens.

    Sum over messages of the tokens of :func:`~compactctl.tokens.message_payload` plus
    ``MESSAGE_OVERHEAD``, plus ``REPLY_PRIMING`` once (OpenAI cookbook counting scheme).
    Zero for an empty list.
    """
    return _prompt_sum(counter.count_many([message_payload(m.data) for m in messages]))


def find_problems(events: list[Event]) -> list[Finding]:
    """Validation findings with line numbers, in line order.

    Kinds: ``malformed``, ``not-object``, ``torn``, ``blank``, ``invalid-utf8``, ``bom``,
    ``missing-uuid``, ``duplicate-uuid``, ``tool-call-without-result``,
    ``tool-result-without-call``, ``unknown-replaces``, ``unknown-target``, ``unknown-mode``.
    """
    findings: list[Finding] = []
    seen: dict[str, int | None] = {}
    calls: dict[str, Event] = {}
    answered: set[str] = set()
    modes = set(known_modes())
    for e in events:
        if isinstance(e, BadLine):
            findings.append(bad_line_finding(e))
            continue
        if e.line == 1 and e.raw is not None and e.raw.startswith(b"\xef\xbb\xbf"):
            findings.append(
                {"line": 1, "kind": "bom", "message": "file starts with a UTF-8 BOM (ignored)"}
            )
        data = e.data
        uuid = data.get("uuid")
        if not isinstance(uuid, str):  # Event.uuid, read directly (hot loop)
            if e.type in {"message", "compact", "summary"}:
                findings.append(
                    {"line": e.line, "kind": "missing-uuid", "message": f"{e.type} has no uuid"}
                )
        elif uuid in seen:
            findings.append(
                {
                    "line": e.line,
                    "kind": "duplicate-uuid",
                    "message": f"uuid {uuid} already used on line {seen[uuid]}",
                }
            )
        else:
            seen[uuid] = e.line
        if isinstance(e, Message):
            tool_calls = data.get("toolCalls")  # Message.tool_calls, without the list
            if isinstance(tool_calls, list):
                for c in tool_calls:
                    if isinstance(c, dict):
                        cid = c.get("id")
                        if isinstance(cid, str):
                            calls[cid] = e
            if data.get("role") == "tool":
                cid = e.tool_call_id
                if cid is None or cid not in calls:
                    findings.append(
                        {
                            "line": e.line,
                            "kind": "tool-result-without-call",
                            "message": f"tool result answers unknown call {cid!r}",
                        }
                    )
                else:
                    answered.add(cid)
        elif isinstance(e, (SummaryEvent, CompactEvent)):
            findings.extend(reduction_findings(e, seen, modes))
    for cid, e in calls.items():
        if cid not in answered:
            findings.append(
                {
                    "line": e.line,
                    "kind": "tool-call-without-result",
                    "message": f"tool call {cid} has no result",
                }
            )
    findings.sort(key=lambda f: (f["line"] or 0, f["kind"]))
    return findings


def bad_line_finding(e: BadLine) -> Finding:
    """The finding for a line that is not a usable JSON object (kind: its ``problem``).

    >>> bad_line_finding(BadLine(b"", 4, "blank", "blank line"))
    {'line': 4, 'kind': 'blank', 'message': 'blank line (kept, ignored)'}
    """
    msg = _BAD_LINE_MESSAGES.get(e.problem, e.problem)
    if e.detail and e.problem in {"malformed", "invalid-utf8", "not-object"}:
        msg = f"{msg}: {e.detail}"
    return {"line": e.line, "kind": e.problem, "message": msg}


def reduction_findings(
    e: SummaryEvent | CompactEvent, seen: Container[str], modes: Container[str]
) -> list[Finding]:
    """Findings of a summary or compact event: ``unknown-replaces`` (a summary),
    ``unknown-mode`` and ``unknown-target`` (a compact event), in that order.

    Args:
        e: the event.
        seen: the uuids of the events before it (and its own).
        modes: the compact modes replay can apply (:func:`~compactctl.replay.known_modes`).
    """
    findings: list[Finding] = []
    if isinstance(e, SummaryEvent):
        unknown = [u for u in e.replaces if u not in seen]
        if unknown:
            findings.append(
                {
                    "line": e.line,
                    "kind": "unknown-replaces",
                    "message": f"replaces {len(unknown)} unknown uuid(s), e.g. {unknown[0]}",
                }
            )
        return findings
    if e.mode not in modes:
        findings.append(
            {
                "line": e.line,
                "kind": "unknown-mode",
                "message": f"compact mode {e.mode!r} is not known to this version "
                "(kept, not applied)",
            }
        )
    unknown = [u for u in e.targets if u not in seen]
    if unknown:
        findings.append(
            {
                "line": e.line,
                "kind": "unknown-target",
                "message": f"targets {len(unknown)} unknown uuid(s), e.g. {unknown[0]}",
            }
        )
    return findings


def effective_context(
    log: Iterable[Event],
    messages: list[Message],
    counts: list[int],
    counter: TokenCounter,
    tier: str | None,
) -> tuple[int, int]:
    """``(effectiveTokens, effectiveMessages)``: the prompt estimate (tokens) and the length
    of the effective context replayed from ``log``.

    Args:
        log: the events in file order (replay reads messages, compact and summary events).
        messages: the log's messages, the objects ``log`` holds, in order.
        counts: the payload tokens of ``messages`` (reused for the messages replay keeps;
            the others are counted with ``counter``).
        counter: the token counter.
        tier: the summary tier to show (``None``: the selected one).
    """
    view = replay(log, tier=tier)
    # the view's unchanged messages are the input objects: reuse their counts
    known = {id(m): n for m, n in zip(messages, counts, strict=True)}
    changed = [m for m in view if id(m) not in known]
    changed_counts = counter.count_many([message_payload(m.data) for m in changed])
    known.update((id(m), n) for m, n in zip(changed, changed_counts, strict=True))
    return _prompt_sum([known[id(m)] for m in view]), len(view)


def history_entry(e: CompactEvent | SummaryEvent) -> dict[str, Any]:
    """The ``history`` item of ``inspect --json`` for a compact or summary event:
    ``{"line", "type", "uuid", "mode", "targets"}`` (compact; ``targets`` a count) or
    ``{"line", "type", "uuid", "format", "model", "triggerMode", "replaces", "tiers"}``
    (summary; ``replaces`` a count, ``tiers`` the tier names), then ``stats`` when recorded
    and ``timestamp``."""
    entry: dict[str, Any] = {"line": e.line, "type": e.type, "uuid": e.uuid}
    if isinstance(e, CompactEvent):
        entry["mode"] = e.mode
        entry["targets"] = len(e.targets)
    else:
        entry["format"] = e.data.get("format")
        entry["model"] = e.data.get("model")
        entry["triggerMode"] = e.data.get("triggerMode")
        entry["replaces"] = len(e.replaces)
        entry["tiers"] = sorted(e.tiers)
    if "stats" in e.data:
        entry["stats"] = e.data["stats"]
    entry["timestamp"] = e.data.get("timestamp")
    return entry


def inspect_events(
    events: Iterable[Event],
    *,
    path: str,
    fmt: str = "canonical",
    counter: TokenCounter | None = None,
    context_window: int | None = None,
    top: int = 10,
    tier: str | None = None,
) -> dict[str, Any]:
    """Inspect one session's events.

    Args:
        events: the events in file order (consumed once; held in memory).
        path: the file name to report.
        fmt: the source format name to report.
        counter: the token counter; ``None`` picks the encoding from the session's model.
        context_window: overrides the session's and litellm's context window (tokens).
        top: how many of the largest tool outputs to list.
        tier: the summary tier the effective context shows (``None``: the selected one).

    Returns:
        ``{"path", "format", "lines", "events", "messages", "turns", "model",
        "contextWindow", "tokenizer", "byRole", "byTool", "tokens", "effectiveTokens",
        "effectiveMessages", "largestToolOutputs", "duplicates", "history", "findings"}``.
        ``tokens`` and ``effectiveTokens`` are prompt estimates in tokens (all messages, and
        the effective context); ``tokenizer`` names the encoding, or ``"estimate"``. Sizes are
        of message text: ``bytes`` UTF-8 bytes, ``chars`` code points.
    """
    from compactctl.tokens import encoding_for_model

    log = list(events)
    session = next((e for e in log if isinstance(e, SessionEvent)), None)
    model = session.model if session else None
    if counter is None:
        counter = TokenCounter(encoding_for_model(model))
    window = context_window or (session.context_window if session else None)
    window = window or context_window_for(model)

    by_type: Counter[str] = Counter()
    messages: list[Message] = []
    for e in log:
        if isinstance(e, Message):
            messages.append(e)
        by_type["bad" if isinstance(e, BadLine) else (e.type or "untyped")] += 1

    payloads = [message_payload(m.data) for m in messages]
    counts = counter.count_many(payloads)
    by_role: dict[str, dict[str, int]] = {}
    by_tool: dict[str, dict[str, int]] = {}
    tool_of_call: dict[str, str] = {}
    outputs: list[tuple[int, int, str]] = []  # (tokens, -index, uuid) heap of largest
    # exact repeats of tool outputs, keyed by the text itself (already in memory)
    dup_hashes: Counter[str] = Counter()
    dup_bytes: dict[str, int] = {}
    foreign_dup_bytes = 0
    for i, (m, text, n) in enumerate(zip(messages, payloads, counts, strict=True)):
        data = m.data
        chars = len(text)
        size = chars if text.isascii() else len(text.encode("utf-8", "surrogatepass"))
        role = m.role
        r = by_role.get(role or "?")
        if r is None:
            r = by_role[role or "?"] = {"messages": 0, "bytes": 0, "chars": 0, "tokens": 0}
        r["messages"] += 1
        r["bytes"] += size
        r["chars"] += chars
        r["tokens"] += n
        calls = data.get("toolCalls")
        if isinstance(calls, list) and calls:  # Message.tool_calls, without the list
            for c in calls:
                if not isinstance(c, dict):
                    continue
                name = str(c.get("name") or "?")
                cid = c.get("id")
                if isinstance(cid, str):
                    tool_of_call[cid] = name
                t = by_tool.get(name)
                if t is None:
                    t = by_tool[name] = tool_row()
                t["calls"] += 1
        if role == "tool":
            name = m.tool_name or tool_of_call.get(m.tool_call_id or "", "?")
            t = by_tool.get(name)
            if t is None:
                t = by_tool[name] = tool_row()
            t["results"] += 1
            t["errors"] += int(m.is_error)
            t["bytes"] += size
            t["chars"] += chars
            t["tokens"] += n
            item = (n, -i, m.uuid or "")
            if len(outputs) < top:
                heapq.heappush(outputs, item)
            elif top:
                heapq.heappushpop(outputs, item)
            if text:
                dup_hashes[text] += 1
                dup_bytes[text] = size
            extra = data.get("duplicateBytes")
            if isinstance(extra, int):
                foreign_dup_bytes += extra

    largest = []
    for n, neg_i, uuid in sorted(outputs, reverse=True):
        m = messages[-neg_i]
        largest.append(
            {
                "uuid": uuid,
                "line": m.line,
                "tool": m.tool_name or tool_of_call.get(m.tool_call_id or "", "?"),
                "tokens": n,
                "chars": len(payloads[-neg_i]),
            }
        )
    groups = {h: c for h, c in dup_hashes.items() if c > 1}
    effective_tokens, effective_messages = effective_context(log, messages, counts, counter, tier)
    turns = max((m.turn or 0 for m in messages), default=0)
    return {
        "path": path,
        "format": fmt,
        "lines": sum(1 for e in log if e.line is not None),
        "events": dict(sorted(by_type.items())),
        "messages": len(messages),
        "turns": turns,
        "model": model,
        "contextWindow": window,
        "tokenizer": counter.encoding_name,
        "byRole": dict(sorted(by_role.items())),
        "byTool": dict(sorted(by_tool.items())),
        "tokens": _prompt_sum(counts),
        "effectiveTokens": effective_tokens,
        "effectiveMessages": effective_messages,
        "largestToolOutputs": largest,
        "duplicates": {
            "exactToolOutputGroups": len(groups),
            "redundantToolOutputs": sum(c - 1 for c in groups.values()),
            "redundantBytes": sum((c - 1) * dup_bytes[h] for h, c in groups.items()),
            "sourceDuplicateBytes": foreign_dup_bytes,
        },
        "history": [history_entry(e) for e in log if isinstance(e, (CompactEvent, SummaryEvent))],
        "findings": find_problems(log),
    }


def _prompt_sum(counts: list[int]) -> int:
    """:func:`prompt_tokens` from the payload counts of the messages."""
    return prompt_total(sum(counts), len(counts))


def prompt_total(payload_tokens: int, messages: int) -> int:
    """:func:`prompt_tokens` from the payload tokens of ``messages`` messages, summed (tokens).

    >>> prompt_total(0, 0), prompt_total(10, 2)
    (0, 19)
    """
    if not messages:
        return 0
    return payload_tokens + MESSAGE_OVERHEAD * messages + REPLY_PRIMING


def tool_row() -> dict[str, int]:
    """A zeroed ``byTool`` row: calls, results, errors (counts), bytes, chars, tokens."""
    return {"calls": 0, "results": 0, "errors": 0, "bytes": 0, "chars": 0, "tokens": 0}
