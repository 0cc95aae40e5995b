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
from typing import Any

from compactctl.formats._claude import ClaudeBuilder
from compactctl.formats._common import JSON, content_text, merge_by_line, stable_uuid
from compactctl.formats._events import epoch_ms_to_iso

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
    return epoch_ms_to_iso(message.get("ts"))


def _is_attachment(block: Any) -> bool:
    return (
        isinstance(block, dict)
        and block.get("type") == "text"
        and isinstance(block.get("text"), str)
        and block["text"].lstrip().startswith(ATTACHMENT_PREFIXES)
    )


def _convert(messages: Iterable[tuple[int, Any]], by_line: bool) -> Iterator[JSON]:
    builder = ClaudeBuilder(SOURCE)
    summaries: list[tuple[int, JSON]] = []
    hidden: dict[str, list[int]] = {}  # condenseId -> positions of the messages it hides
    for position, message in messages:
        if not isinstance(message, dict):
            continue
        role = message.get("role")
        parent = message.get("condenseParent")
        if isinstance(parent, str):
            hidden.setdefault(parent, []).append(position)
        if message.get("isSummary") is True:
            summaries.append((position, message))
            continue
        if message.get("type") == "reasoning" and role is None:
            builder.add_foreign({"uuid": stable_uuid(SOURCE, position)}, position, "reasoning")
            continue
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
    events = builder.finish()
    if summaries:
        events = list(merge_by_line(events, _summaries(summaries, hidden, events)))
    for event in events:
        if not by_line:
            event["sourceIndex"] = event.pop("sourceLine")
        yield event


def _summaries(
    summaries: list[tuple[int, JSON]], hidden: dict[str, list[int]], events: list[JSON]
) -> list[JSON]:
    """Roo Code's condensed context: one ``summary`` event per ``isSummary`` message, which
    replaces the messages whose ``condenseParent`` is its ``condenseId`` (none in older files,
    where Roo Code removed them from the file) and the summary before it."""
    by_position: dict[int, list[str]] = {}
    turn_of: dict[str, int] = {}
    for e in events:
        if e.get("type") == "message":
            by_position.setdefault(int(e["sourceLine"]), []).append(str(e["uuid"]))
            turn_of[str(e["uuid"])] = int(e.get("turnId") or 0)
    out: list[JSON] = []
    previous: str | None = None
    for position, message in summaries:
        uid = stable_uuid(SOURCE, position, "summary")
        condense = message.get("condenseId")
        replaces = [
            u
            for p in (hidden.get(condense, []) if isinstance(condense, str) else [])
            for u in by_position.get(p, [])
        ]
        if previous is not None:
            replaces.append(previous)
        event: JSON = {
            "type": "summary",
            "uuid": uid,
            "replaces": replaces,
            "summaryText": content_text(message.get("content"))
            if not isinstance(message.get("content"), str)
            else message["content"],
            "lastSummarizedTurnId": max((turn_of.get(u, 0) for u in replaces), default=0),
            "model": SOURCE,
            "sourceLine": position,
        }
        ts = _timestamp(message)
        if ts is not None:
            event["timestamp"] = ts
        out.append(event)
        previous = uid
    return out


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
