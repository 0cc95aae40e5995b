"""Anthropic Messages API message lists (Cline, Roo Code ``api_conversation_history.json``).

Source: the Messages API request shape (``messages: [{role, content}]``, content a string or
a list of ``text``/``image``/``tool_use``/``tool_result``/``thinking`` blocks), which Cline and
Roo Code store as ``tasks/<id>/api_conversation_history.json`` (a JSON array; Cline adds ``ts``
to some messages). Also read as JSON lines, one message per line.

Mapping (through :class:`~compactctl.formats._claude.ClaudeBuilder`, as a Claude Code line):

- ``assistant``: one message; ``tool_use`` blocks -> ``toolCalls`` ``{id, name, arguments:
  input}``; thinking blocks -> opaque parts.
- ``user``: each ``tool_result`` block -> one ``tool`` message (``toolCallId`` =
  ``tool_use_id``); the other text is the prompt (a turn starts) unless the message also
  carries tool results (then it is injected text, ``isMeta: true``). Text blocks that the agent
  attaches (``<environment_details>``, ``<file_content``, ...) are split off as a separate
  ``user`` message with ``isMeta: true`` in the same turn, so rules never take them for what a
  person typed (issue 17, point 5).
- ids: uuid5 of the position (the source has none); ``timestamp`` from ``ts`` (ms) when set.

>>> events = list(document_to_canonical([
...     {"role": "user", "content": [{"type": "text", "text": "<task>fix</task>"},
...                                  {"type": "text", "text": "<environment_details>x"}]},
...     {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "ls",
...                                        "input": {}}]},
...     {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
...                                   "content": "a.py"}]}]))
>>> [(e["role"], e.get("isMeta", False), e["turnId"]) for e in events]
[('user', False, 1), ('user', True, 1), ('assistant', False, 1), ('tool', False, 1)]
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from typing import Any

from compactctl.formats._claude import ClaudeBuilder
from compactctl.formats._common import JSON, stable_uuid

SOURCE = "anthropic-messages"
ATTACHMENT_PREFIXES = (
    "<environment_details>",
    "<file_content",
    "<explicit_instructions",
    "<slash-command",
)
"""Text blocks the agent (Cline, Roo Code) attaches to a user message: context, not a prompt
(``<feedback>`` wraps what the person typed in reply, so it stays a prompt)."""


def _timestamp(message: JSON) -> str | None:
    ts = message.get("ts")
    if isinstance(ts, (int, float)) and not isinstance(ts, bool):
        seconds = ts / 1000 if ts > 1e11 else ts
        return datetime.fromtimestamp(seconds, UTC).isoformat().replace("+00:00", "Z")
    return None


def _is_attachment(block: Any) -> bool:
    return (
        isinstance(block, dict)
        and block.get("type") == "text"
        and isinstance(block.get("text"), str)
        and block["text"].lstrip().startswith(ATTACHMENT_PREFIXES)
    )


def _convert(messages: Iterable[tuple[int, Any]], by_line: bool) -> Iterator[JSON]:
    builder = ClaudeBuilder(SOURCE)
    for position, message in messages:
        if not isinstance(message, dict):
            continue
        role = message.get("role")
        record: JSON = {
            "type": role,
            "uuid": stable_uuid(SOURCE, position),
            "message": {"role": role, "content": message.get("content")},
        }
        ts = _timestamp(message)
        if ts is not None:
            record["timestamp"] = ts
        if role == "assistant":
            builder.assistant(record, position)
            builder.close_assistant()  # no message ids: every message is one response
        elif role == "user":
            content = message.get("content")
            if isinstance(content, list) and any(_is_attachment(b) for b in content):
                own = [b for b in content if not _is_attachment(b)]
                attached = [b for b in content if _is_attachment(b)]
                if own:
                    builder.user({**record, "message": {"role": role, "content": own}}, position)
                meta = {
                    **record,
                    "uuid": stable_uuid(SOURCE, position, "attached"),
                    "isMeta": True,
                    "message": {"role": role, "content": attached},
                }
                builder.user(meta, position)
            else:
                builder.user(record, position)
        else:
            builder.add_foreign(record, position, "message", role=str(role))
    for event in builder.finish():
        if not by_line:
            event["sourceIndex"] = event.pop("sourceLine")
        yield event


def to_canonical(records: Iterable[tuple[int, dict[str, Any]]]) -> Iterator[dict[str, Any]]:
    """Convert Messages API messages given one per line (``sourceLine`` on each event)."""
    return _convert(records, True)


def document_to_canonical(doc: Any) -> Iterator[dict[str, Any]]:
    """Convert a JSON array of Messages API messages (or ``{"messages": [...]}``); events
    carry ``sourceIndex`` (position in the array)."""
    messages = doc.get("messages") if isinstance(doc, dict) else doc
    if not isinstance(messages, list):
        return iter(())
    return _convert(enumerate(messages), False)


def messages_of(doc: Any) -> list[Any] | None:
    """The message list when ``doc`` is an Anthropic message list (the first messages have
    Anthropic content blocks that OpenAI never writes), else ``None``."""
    from compactctl.formats.detection import score_anthropic_messages

    messages = doc.get("messages") if isinstance(doc, dict) else doc
    if not isinstance(messages, list) or not messages:
        return None
    scores = [score_anthropic_messages(m) if isinstance(m, dict) else None for m in messages[:50]]
    if None in scores or 2 not in scores:
        return None
    return messages
