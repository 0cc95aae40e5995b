"""Cursor agent transcripts (``~/.cursor/projects/<project>/agent-transcripts/*.jsonl``) ->
canonical.

Source: the public descriptions of the files (one JSON object per line, ``{"role":
"user"|"assistant", "message": {"content": [blocks]}}``; the blocks are Messages API blocks:
``text``, ``tool_use {name, input}``, sometimes ``tool_result``); no Cursor ran here, so the
fixture is built from those descriptions (``fixtures/formats/cursor-agent-described.jsonl``).

Mapping, through :class:`~compactctl.formats._claude.ClaudeBuilder` (as a Claude Code line
without ids): ``user`` -> a prompt (the ``<user_query>`` wrapper is kept verbatim);
``assistant`` -> one message per line, ``tool_use`` blocks -> ``toolCalls`` (a block without
``id`` gets a uuid5 of its position); ``tool_result`` blocks -> ``tool`` messages. The files
seen in the descriptions hold no tool results: a call then has no answer, as in the source.
Ids: uuid5 of the line.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from compactctl.formats._claude import ClaudeBuilder
from compactctl.formats._common import JSON, stable_uuid

SOURCE = "cursor-agent"
KEYS = frozenset({"role", "message"})
"""The only keys of a record."""


def _with_ids(content: Any, line: int) -> Any:
    if not isinstance(content, list):
        return content
    out: list[Any] = []
    for i, block in enumerate(content):
        if isinstance(block, dict) and block.get("type") == "tool_use" and not block.get("id"):
            block = {**block, "id": stable_uuid(SOURCE, "call", line, i)}
        out.append(block)
    return out


def to_canonical(records: Iterable[tuple[int, dict[str, Any]]]) -> Iterator[dict[str, Any]]:
    """Convert a Cursor agent transcript (see the module docstring); ``sourceLine`` on each
    event."""
    builder = ClaudeBuilder(SOURCE)
    for line, rec in records:
        if not isinstance(rec, dict):
            continue
        role = rec.get("role")
        message = rec.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        record: JSON = {
            "type": role,
            "uuid": stable_uuid(SOURCE, line),
            "message": {"role": role, "content": _with_ids(content, line)},
        }
        if role == "assistant":
            builder.assistant(record, line)
            builder.close_assistant()  # no message ids: every line is one response
        elif role == "user":
            builder.user(record, line)
        else:
            builder.add_foreign(record, line, str(role))
        yield from builder.drain()
    yield from builder.finish()
