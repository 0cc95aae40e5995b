"""OpenAI Chat Completions message logs -> canonical.

Source: docs/formats.md section 5. Line format: one chat message per line, or one conversation
per line (``{"messages": [...], "tools": [...]}``); :func:`document_to_canonical` also takes
a whole JSON array of messages (or one ``{"messages": [...]}`` object).

Mapping (:class:`ChatConverter`, also used by the SWE-agent importer):

- ``role``: ``system``/``developer`` -> ``system``; ``user``; ``assistant``; ``tool`` and
  legacy ``function`` -> ``tool``; other roles -> ``foreign``.
- ``content``: a string stays a string (``null`` -> ``""``); a list of parts becomes text
  joined by newlines, or canonical parts when it holds images (``image_url`` data URLs ->
  ``{"type": "image", "mediaType", "data"}``); unknown parts are kept opaque.
- ``tool_calls[].function`` -> ``toolCalls`` ``{id, name, arguments}`` with ``arguments``
  parsed from its JSON string (the raw string when invalid). Legacy ``function_call`` gets a
  deterministic id; the next ``function`` message of that name is linked to it.
- ``tool_call_id`` -> ``toolCallId`` (else the first of ``tool_call_ids``, else the oldest
  unanswered call of that ``name``); ``name`` -> ``toolName`` (else the call's name).
- ``reasoning_content`` / ``reasoning`` (strings) and ``thinking_blocks`` -> opaque
  ``{"type": "reasoning", "text"}`` / thinking parts, never text; ``refusal`` is kept.
- turns: +1 per ``user`` message; ``system`` messages before the first one are turn 0.
- ids: the source has none, so ``uuid`` = uuid5 of (line number, index in the line, hash of
  the message); ``timestamp`` only when the message has ``timestamp``/``created_at``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from typing import Any

from compactctl.formats._common import (
    JSON,
    Turns,
    Uuids,
    as_dict,
    collapse,
    content_hash,
    foreign,
    image_from_data_url,
    parse_arguments,
    stable_uuid,
    text_part,
)

SOURCE = "openai-chat"
ROLES = {
    "system": "system",
    "developer": "system",
    "user": "user",
    "assistant": "assistant",
    "tool": "tool",
    "function": "tool",
}


def chat_content(content: Any) -> str | list[JSON]:
    """Canonical content of an OpenAI ``content`` value.

    >>> chat_content([{"type": "text", "text": "a"}, {"type": "text", "text": "b"}])
    'a\\nb'
    >>> chat_content(None)
    ''
    >>> chat_content({"parts": ["x"]})
    [{'type': 'opaque', 'value': {'parts': ['x']}}]
    """
    if isinstance(content, str):
        return content
    if content is None:
        return ""
    if isinstance(content, dict):  # not OpenAI's shape: kept whole, never its Python repr
        if content.get("type") == "text" and isinstance(content.get("text"), str):
            return str(content["text"])
        return [dict(content) if "type" in content else {"type": "opaque", "value": content}]
    if not isinstance(content, list):
        return str(content)
    parts: list[JSON] = []
    for part in content:
        if isinstance(part, str):
            parts.append(text_part(part))
        elif not isinstance(part, dict):
            continue
        elif part.get("type") in ("text", "input_text", "output_text"):
            parts.append(text_part(str(part.get("text") or "")))
        elif part.get("type") in ("image_url", "input_image"):
            url = part.get("image_url")
            if isinstance(url, dict):
                url = url.get("url")
            parts.append(image_from_data_url(url) if isinstance(url, str) else dict(part))
        else:
            parts.append(dict(part))
    return collapse(parts)


def _timestamp(message: JSON) -> str | None:
    value = message.get("timestamp", message.get("created_at"))
    if isinstance(value, str):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = value / 1000 if value > 1e11 else value
        return datetime.fromtimestamp(seconds, UTC).isoformat().replace("+00:00", "Z")
    return None


class ChatConverter:
    """Converts chat messages one at a time, keeping turns and call links across them."""

    def __init__(self, source: str = SOURCE) -> None:
        self.source = source
        self.uuids = Uuids()
        self.turns = Turns()
        self.pending: list[tuple[str, str]] = []  # unanswered calls: (id, name)
        self.names: dict[str, str] = {}

    def _position(self, line: int | None, index: int) -> JSON:
        if line is None:
            return {"sourceIndex": index}
        return {"sourceLine": line} if index == 0 else {"sourceLine": line, "sourceIndex": index}

    def convert(
        self,
        message: JSON,
        line: int | None,
        index: int = 0,
        *,
        prompt: bool | None = None,
        extra: JSON | None = None,
    ) -> JSON:
        """One canonical event for one chat message.

        Args:
            message: the chat message dict.
            line: its line number (``None`` inside a whole-document source).
            index: its position in the line's (or document's) message list.
            prompt: for ``user`` messages, whether it starts a turn (default: yes); a user
                message that does not gets ``isMeta: true``.
            extra: fields added to the event (``isDemo``, ``messageType``, ...).
        """
        role = ROLES.get(str(message.get("role")))
        preferred = stable_uuid(self.source, line, index, content_hash(message))
        uid = self.uuids.take(preferred, line, index)
        ts = _timestamp(message)
        if role is None:
            return foreign(
                "message", uid, line, ts, role=message.get("role"), sourceIndex=index or None
            )
        if role == "user":
            starts = prompt is not False
            turn = self.turns.prompt() if starts else self.turns.current
        elif role == "system":
            turn = self.turns.current
            starts = True
        else:
            turn = self.turns.activity()
            starts = True
        event: JSON = {"type": "message", "uuid": uid, "turnId": turn, "role": role}
        content = chat_content(message.get("content"))
        if role == "assistant":
            content = self._assistant(message, event, content, preferred)
        elif role == "tool":
            self._tool(message, event)
        event["content"] = content
        if not starts:
            event["isMeta"] = True
        if isinstance(message.get("refusal"), str):
            event["refusal"] = message["refusal"]
        if ts is not None:
            event["timestamp"] = ts
        event.update(self._position(line, index))
        if extra:
            event.update({k: v for k, v in extra.items() if v is not None})
        return event

    def _assistant(
        self, message: JSON, event: JSON, content: str | list[JSON], preferred: str
    ) -> str | list[JSON]:
        calls: list[JSON] = []
        raw_calls = message.get("tool_calls")
        for i, call in enumerate(raw_calls if isinstance(raw_calls, list) else []):
            if not isinstance(call, dict):
                continue
            fn = as_dict(call.get("function")) or call
            cid = call.get("id") or stable_uuid(preferred, "call", i)
            calls.append(
                {
                    "id": str(cid),
                    "name": str(fn.get("name") or ""),
                    "arguments": parse_arguments(fn.get("arguments")),
                }
            )
        legacy = message.get("function_call")
        if isinstance(legacy, dict):
            calls.append(
                {
                    "id": "call_" + stable_uuid(preferred, "function_call").replace("-", "")[:24],
                    "name": str(legacy.get("name") or ""),
                    "arguments": parse_arguments(legacy.get("arguments")),
                }
            )
        for call in calls:
            self.pending.append((call["id"], call["name"]))
            self.names[call["id"]] = call["name"]
        if calls:
            event["toolCalls"] = calls
        opaque: list[JSON] = []
        for key in ("reasoning_content", "reasoning"):
            if isinstance(message.get(key), str) and message[key]:
                opaque.append({"type": "reasoning", "text": message[key]})
                break
        blocks = message.get("thinking_blocks")
        if isinstance(blocks, list):
            opaque.extend(dict(b) for b in blocks if isinstance(b, dict))
        if not opaque:
            return content
        parts = [text_part(content)] if isinstance(content, str) else content
        return [*opaque, *(p for p in parts if p.get("type") != "text" or p.get("text"))]

    def _tool(self, message: JSON, event: JSON) -> None:
        cid = message.get("tool_call_id")
        ids = message.get("tool_call_ids")
        if not isinstance(cid, str) and isinstance(ids, list) and ids:
            cid = str(ids[0])
        name = message.get("name")
        if not isinstance(cid, str):
            for pid, pname in self.pending:
                if not isinstance(name, str) or pname == name:
                    cid = pid
                    break
        if isinstance(cid, str):
            event["toolCallId"] = cid
            self.pending = [(i, n) for i, n in self.pending if i != cid]
            if not isinstance(name, str):
                name = self.names.get(cid)
        if isinstance(name, str):
            event["toolName"] = name
        if message.get("is_error") is True or message.get("isError") is True:
            event["isError"] = True


def conversation_lines(records: Iterable[tuple[int, Any]]) -> list[int]:
    """The lines that each hold a whole conversation (``{"messages": [...]}``), at most the
    first two: a file with two is a request log (every request repeats the growing history
    of one conversation) or a fine-tuning set (one conversation per line), not one session,
    and the caller refuses it (the review of the readers, 2026-12: such files were read as
    one session, their conversations concatenated).

    >>> conversation_lines([(1, {"messages": []}), (2, {"role": "user"}), (3, {"messages": []})])
    [1, 3]
    """
    found: list[int] = []
    for line, rec in records:
        if isinstance(rec, dict) and isinstance(rec.get("messages"), list):
            found.append(line)
            if len(found) == 2:
                break
    return found


def to_canonical(records: Iterable[tuple[int, dict[str, Any]]]) -> Iterator[dict[str, Any]]:
    """Convert an OpenAI chat log (one message, or one ``{"messages"}`` object, per line;
    a file of several such objects is refused by the caller, :func:`conversation_lines`).

    Args:
        records: ``(line_number, parsed_record)`` pairs in file order.

    Yields:
        One canonical event per message, with ``sourceLine`` (and ``sourceIndex`` for the
        second and later messages of a line); lines that are neither become ``foreign``.
    """
    conv = ChatConverter()
    for line, rec in records:
        if not isinstance(rec, dict):
            continue
        messages = rec.get("messages")
        if isinstance(messages, list):
            for i, message in enumerate(messages):
                if isinstance(message, dict):
                    yield conv.convert(message, line, i)
        elif "role" in rec:
            yield conv.convert(rec, line)
        else:
            kind = rec.get("type")
            yield foreign(
                str(kind) if kind else "record", stable_uuid(SOURCE, line, "record"), line
            )


def document_to_canonical(doc: Any) -> Iterator[dict[str, Any]]:
    """Convert a whole JSON document: an array of messages or ``{"messages": [...]}``.

    Events carry ``sourceIndex`` (position in the array) instead of ``sourceLine``.
    """
    messages = doc.get("messages") if isinstance(doc, dict) else doc
    if not isinstance(messages, list):
        return
    conv = ChatConverter()
    for i, message in enumerate(messages):
        if isinstance(message, dict):
            yield conv.convert(message, None, i)
