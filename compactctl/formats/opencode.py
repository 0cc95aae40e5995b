"""opencode sessions (``opencode export <session id>``, or the message list of its server's
``GET /session/<id>/message``) -> canonical.

Source: the public descriptions of opencode's message model (``MessageV2``: a message is
``{info, parts}``; ``info`` has ``id``, ``sessionID``, ``role`` ``user``/``assistant``,
``time.created`` in ms, an assistant's ``modelID`` and ``summary: true`` for a compaction
summary; parts have ``type``), from which ``fixtures/formats/opencode-export-described.json``
is built (with a compaction and a failed call), checked against a real export of opencode
1.18.33 (``fixtures/real/opencode-1.18.33/``). The on-disk storage
(``storage/message/<session>/<message>.json`` and ``storage/part/<message>/<part>.json``,
one file per record) is not read: export the session first.

Accepted documents: ``{info: <session>, messages: [{info, parts}]}`` (the export), or a bare
list of ``{info, parts}``. Mapping (``sourceIndex`` = the message's position):

- ``user``: its ``text`` parts are the prompt (a turn starts); ``synthetic`` text parts
  (text opencode adds, such as a file it read for an ``@`` mention) become a separate ``user``
  message with ``isMeta: true``; ``file`` parts with an image data URL become image parts,
  other files ``{"type": "opaque"}`` parts; a user message holding only a ``compaction`` part
  is the request to compact, not a prompt (``foreign``).
- ``assistant``: split at each ``step-start`` part (one model call each): a step's ``text``
  parts are its content, ``reasoning`` parts opaque ``{"type": "reasoning", "text"}`` parts,
  ``tool`` parts ``toolCalls`` ``{id: callID, name: tool, arguments: state.input}``, each
  followed by its ``tool`` message (``state.output``, or ``state.error`` with ``isError``;
  a call still ``pending``/``running`` has no result). ``step-finish``, ``snapshot``,
  ``patch`` and ``agent`` parts are bookkeeping and are not read.
- an assistant message with ``summary: true`` is the agent's own compaction: a canonical
  ``summary`` event that replaces everything before it (its text the summary).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from compactctl.formats._common import (
    JSON,
    SummaryChain,
    as_dict,
    collapse,
    content_text,
    foreign,
    image_from_data_url,
    stable_uuid,
    text_part,
)
from compactctl.formats._events import MessageBuilder, epoch_ms_to_iso

SOURCE = "opencode"
ROLES = frozenset({"user", "assistant"})
PART_TYPES = frozenset(
    {
        "text",
        "reasoning",
        "tool",
        "file",
        "step-start",
        "step-finish",
        "snapshot",
        "patch",
        "agent",
        "compaction",
        "subtask",
        "retry",
    }
)


def messages_of(doc: Any) -> list[Any] | None:
    """The ``{info, parts}`` list when ``doc`` is an opencode export (or message list): every
    message has an ``info`` with a user/assistant ``role`` and ``parts`` of known types, else
    ``None``."""
    messages = doc.get("messages") if isinstance(doc, dict) else doc
    if isinstance(doc, dict) and not isinstance(doc.get("info"), dict):
        return None
    if not isinstance(messages, list) or not messages:
        return None
    for m in messages[:50]:
        if not isinstance(m, dict) or set(m) - {"info", "parts"}:
            return None
        info, parts = m.get("info"), m.get("parts")
        if not isinstance(info, dict) or info.get("role") not in ROLES or "id" not in info:
            return None
        if not isinstance(parts, list):
            return None
        if any(not isinstance(p, dict) or p.get("type") not in PART_TYPES for p in parts):
            return None
    return messages


def _file_part(part: JSON) -> JSON:
    url = part.get("url")
    mime = part.get("mime")
    if isinstance(url, str) and url.startswith("data:image/"):
        return image_from_data_url(url)
    keep = {k: part[k] for k in ("mime", "filename", "url") if k in part}
    return (
        {"type": "opaque", "value": {"type": "file", **keep}}
        if mime or keep
        else {"type": "opaque", "value": {}}
    )


class _Reader:
    def __init__(self) -> None:
        self.builder = MessageBuilder(SOURCE)
        self.chain = SummaryChain()

    def emit(self, event: JSON) -> JSON:
        if event.get("type") == "message":
            self.chain.add(event)
        return event

    def user(self, info: JSON, parts: list[JSON], at: JSON, ts: str | None) -> Iterator[JSON]:
        own = info.get("id")
        prompt: list[JSON] = []
        injected: list[JSON] = []
        for p in parts:
            kind = p.get("type")
            if kind == "text" and isinstance(p.get("text"), str):
                (injected if p.get("synthetic") else prompt).append(text_part(p["text"]))
            elif kind == "file":
                prompt.append(_file_part(p))
        if not prompt and not injected:
            kinds = ",".join(sorted({str(p.get("type")) for p in parts})) or None
            uid = self.builder.uuids.take(str(own or stable_uuid(SOURCE, *at.values())))
            yield foreign("user", uid, None, ts, parts=kinds, **at)
            return
        if prompt:
            yield self.emit(self.builder.message("user", collapse(prompt), at, own, timestamp=ts))
        if injected:
            meta = self.builder.message(
                "user", collapse(injected), at, own, "synthetic", meta=True, timestamp=ts
            )
            yield self.emit(meta)

    def assistant(self, info: JSON, parts: list[JSON], at: JSON, ts: str | None) -> Iterator[JSON]:
        own = info.get("id")
        if info.get("summary") is True:
            text = content_text(
                collapse(
                    [
                        text_part(p["text"])
                        for p in parts
                        if isinstance(p.get("text"), str) and p.get("type") == "text"
                    ]
                )
            )
            uid = self.builder.uuids.take(str(own or stable_uuid(SOURCE, *at.values())))
            yield self.chain.summary(
                uuid=uid, text=text, source=SOURCE, trigger=None, line=None, timestamp=ts, **at
            )
            return
        steps: list[list[JSON]] = [[]]
        for p in parts:
            if p.get("type") == "step-start" and steps[-1]:
                steps.append([])
            steps[-1].append(p)
        for n, step in enumerate(steps):
            content: list[JSON] = []
            calls: list[JSON] = []
            tools: list[JSON] = []
            for p in step:
                kind = p.get("type")
                if kind == "text" and isinstance(p.get("text"), str):
                    content.append(text_part(p["text"]))
                elif kind == "reasoning" and isinstance(p.get("text"), str):
                    content.append({"type": "reasoning", "text": p["text"]})
                elif kind == "file":
                    content.append(_file_part(p))
                elif kind == "tool":
                    state = as_dict(p.get("state"))
                    calls.append(
                        self.builder.call(
                            p.get("callID"), p.get("tool"), state.get("input"), (own, n, len(calls))
                        )
                    )
                    tools.append(p)
            if not content and not calls:
                continue
            salt = (n,) if n else ()
            event = self.builder.message(
                "assistant", collapse(content), at, own, *salt, timestamp=ts
            )
            if calls:
                event["toolCalls"] = calls
            if isinstance(info.get("modelID"), str):
                event["model"] = info["modelID"]
            yield self.emit(event)
            for call, p in zip(calls, tools, strict=True):
                state = as_dict(p.get("state"))
                status = state.get("status")
                if status not in ("completed", "error"):
                    continue
                error = status == "error"
                output = state.get("error") if error else state.get("output")
                end = epoch_ms_to_iso(as_dict(state.get("time")).get("end")) or ts
                result = self.builder.result(
                    call["id"],
                    output if isinstance(output, str) else "",
                    at,
                    error=error,
                    timestamp=end,
                )
                yield self.emit(result)


def document_to_canonical(doc: Any) -> Iterator[dict[str, Any]]:
    """Convert an opencode export (see the module docstring); events carry ``sourceIndex``."""
    messages = messages_of(doc)
    if messages is None:
        return
    session = as_dict(doc.get("info")) if isinstance(doc, dict) else {}
    if isinstance(session.get("id"), str):
        event: JSON = {
            "type": "session",
            "uuid": stable_uuid(SOURCE, "session", session["id"]),
            "sessionId": session["id"],
            "source": SOURCE,
        }
        created = epoch_ms_to_iso(as_dict(session.get("time")).get("created"))
        if created:
            event["timestamp"] = created
        if isinstance(session.get("version"), str):
            event["version"] = session["version"]
        yield event
    reader = _Reader()
    for i, m in enumerate(messages):
        if not isinstance(m, dict):
            continue
        info = as_dict(m.get("info"))
        parts = [p for p in m.get("parts") or [] if isinstance(p, dict)]
        ts = epoch_ms_to_iso(as_dict(info.get("time")).get("created"))
        at: JSON = {"sourceIndex": i}
        if info.get("role") == "user":
            yield from reader.user(info, parts, at, ts)
        else:
            yield from reader.assistant(info, parts, at, ts)
