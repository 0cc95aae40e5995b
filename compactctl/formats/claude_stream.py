"""Claude Code headless output (``claude -p --output-format stream-json --verbose``) -> canonical.

Source: docs/formats.md section 2. Input is ``(line_number, record)`` pairs; output is canonical
event dicts with ``sourceLine``, streamed (only one model response is held at a time).

The records are the Agent SDK messages, with snake_case keys, in conversation order (no
``parentUuid`` tree to follow). Mapping:

- the first ``system``/``init``: the ``session`` event (``session_id``, ``model``, ``cwd``,
  ``claude_code_version``); later ``init`` lines are ``foreign``.
- ``assistant`` / ``user``: as in the session file (:class:`ClaudeBuilder`): lines merged by
  ``message.id``, ``tool_result`` blocks to ``tool`` messages (``tool_use_result`` size to
  ``duplicateBytes``), thinking blocks as opaque parts, prompts start turns.
- turns: +1 per replayed prompt; when prompts are not echoed, each ``result`` ends a turn so
  the next message starts the following one (a capture starting with an assistant line is
  turn 1).
- subagent traffic (``parent_tool_use_id`` set): ``foreign`` with ``sourceType: "sidechain"``.
- ``system``/``compact_boundary`` (``compact_metadata``): a ``summary`` event replacing the
  messages before it; its text comes from the next user line when that line is a compact
  summary (``isCompactSummary``, or text starting "This session is being continued"), else
  it is a placeholder saying the summary was not recorded.
- ``result``, ``rate_limit_event``, ``stream_event``, other ``system`` subtypes, unknown
  types: ``foreign``.
- timestamps: assistant lines carry none; they get the previous line's timestamp (leading
  ones the first timestamp of the stream).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from compactctl.formats._claude import ClaudeBuilder
from compactctl.formats._common import JSON, Uuids, fill_timestamps, stable_uuid

SOURCE = "claude-stream"
CONTINUATION = "This session is being continued from a previous conversation"


def _session(record: JSON, line: int, uuids: Uuids) -> JSON:
    sid = record.get("session_id")
    event: JSON = {
        "type": "session",
        "uuid": uuids.take(stable_uuid(SOURCE, "session", sid or line)),
        "sessionId": sid,
        "model": record.get("model"),
        "source": SOURCE,
        "cwd": record.get("cwd"),
        "version": record.get("claude_code_version"),
        "timestamp": record.get("timestamp"),
        "sourceLine": line,
    }
    return {k: v for k, v in event.items() if v is not None}


def _is_compact_summary(record: JSON) -> bool:
    if record.get("isCompactSummary") or record.get("is_compact_summary"):
        return True
    message = record.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, list) and content and isinstance(content[0], dict):
        content = content[0].get("text")
    return isinstance(content, str) and content.startswith(CONTINUATION)


def _events(records: Iterable[tuple[int, dict[str, Any]]]) -> Iterator[JSON]:
    uuids = Uuids()
    builder = ClaudeBuilder(SOURCE, uuids)
    have_session = False
    after_boundary = False
    for line, rec in records:
        if not isinstance(rec, dict):
            continue
        kind = rec.get("type")
        subtype = rec.get("subtype")
        if kind == "system" and subtype == "init" and not have_session:
            have_session = True
            yield _session(rec, line, uuids)
            continue
        if kind in ("assistant", "user") and rec.get("parent_tool_use_id"):
            builder.add_foreign(rec, line, "sidechain", recordType=kind)
        elif kind == "assistant":
            builder.assistant(rec, line)
        elif kind == "user":
            if after_boundary and _is_compact_summary(rec):
                rec = {**rec, "isCompactSummary": True}
            builder.user(rec, line)
        elif kind == "system" and subtype == "compact_boundary":
            builder.boundary(rec, line)
            after_boundary = True
        elif kind == "result":
            builder.end_turn()
            builder.add_foreign(rec, line, "result", isError=rec.get("is_error") or None)
        else:
            builder.add_foreign(rec, line, str(kind))
        if kind in ("assistant", "user"):
            after_boundary = False
        yield from builder.drain()
    yield from builder.finish()


def to_canonical(records: Iterable[tuple[int, dict[str, Any]]]) -> Iterator[dict[str, Any]]:
    """Convert a Claude stream-json capture to canonical events (see the module docstring).

    Args:
        records: ``(line_number, parsed_record)`` pairs in stream order.

    Yields:
        The ``session`` event (from ``system``/``init``), then messages, summaries and
        ``foreign`` events in stream order, each with ``sourceLine``.
    """
    return fill_timestamps(_events(records))
