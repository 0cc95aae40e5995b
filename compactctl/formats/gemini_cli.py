"""Gemini CLI chat recordings and Qwen Code chat logs -> canonical.

Source: docs/formats.md section 6 and Gemini CLI's ``chatRecordingService`` (the public
description of ``ConversationRecord``/``MessageRecord``/``ToolCallRecord``), from which the
fixtures ``fixtures/formats/gemini-cli-described.*`` are built, and a recording of Gemini CLI
0.61.0 run here (``fixtures/real/gemini-cli-0.61.0/``), which showed three things the
description did not: the ``<session_context>`` user message (read as ``isMeta``), tool results
written again as ``user`` records of ``functionResponse`` parts (read once, never as prompts;
a call without ``result`` gets its result from them), and a resumed history whose ``gemini``
messages carry ``functionCall`` parts instead of ``toolCalls`` (read as calls).

Gemini CLI, two storages of the same records:

- ``chats/session-*.json``: one document ``{sessionId, projectHash, startTime, lastUpdated,
  messages: [...]}`` (:func:`document_to_canonical`);
- JSONL upsert log (:func:`to_canonical`): a header ``{sessionId, projectHash, ...}``, then
  message records, each rewritten in full when it changes (the last write of an ``id`` wins,
  at the position of its first write), ``{"$rewindTo": id}`` (drops that message and every
  later one) and ``{"$set": {...}}`` (metadata; a ``messages`` list there replaces the list:
  that is how a compression shows up).

A message record is ``{id, timestamp, type, content}``: ``user`` -> a ``user`` message that
starts a turn; ``gemini`` -> an ``assistant`` message (``thoughts`` as an opaque reasoning
part, ``toolCalls[] {id, name, args}`` as ``toolCalls``) followed by one ``tool`` message per
call, its content the ``functionResponse.response`` of ``result`` (``output`` when it is the
only key; ``resultDisplay`` is a display copy and is not read), ``isError`` when ``status`` is
``error``; ``info``/``error``/``warning`` are UI notices, never sent to the model: ``foreign``.
``content`` is a string or Gemini parts (``text``; ``inlineData`` -> image parts).

Qwen Code (:func:`qwen_to_canonical`): JSONL of Claude-like envelopes (``uuid``,
``parentUuid``, ``sessionId``, ``timestamp``, ``type``) around a Gemini ``message`` of
``parts``: ``user`` (a prompt), ``assistant`` (``text``, ``thought`` parts opaque,
``functionCall {id, name, args}`` -> ``toolCalls``), ``tool_result`` (each
``functionResponse`` -> one ``tool`` message), ``system`` -> ``foreign``. Read in file order.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from compactctl.formats._common import (
    JSON,
    Turns,
    Uuids,
    collapse,
    foreign,
    merge_by_line,
    message_event,
    stable_uuid,
    text_part,
)

SOURCE = "gemini-cli"
QWEN = "qwen-code"
NOTICES = frozenset({"info", "error", "warning"})
INJECTED_PREFIXES = ("<session_context>",)
"""User text Gemini CLI writes itself (the session context it sends first): ``isMeta``."""


def parts_content(content: Any) -> str | list[JSON]:
    """Canonical content of Gemini ``content``/``parts`` (a string, one part, or parts).

    >>> parts_content([{"text": "a"}, {"text": "b"}])
    'a\\nb'
    >>> parts_content({"inlineData": {"mimeType": "image/png", "data": "AA"}})
    [{'type': 'image', 'mediaType': 'image/png', 'data': 'AA'}]
    """
    if isinstance(content, str):
        return content
    items = content if isinstance(content, list) else [content] if content is not None else []
    return collapse([p for p in map(_part, items) if p is not None])


def _part(part: Any) -> JSON | None:
    """One canonical part of a Gemini part (``None`` for calls, responses and non-parts)."""
    if isinstance(part, str):
        return text_part(part)
    if not isinstance(part, dict) or "functionCall" in part or "functionResponse" in part:
        return None  # calls and results are read by the callers
    if part.get("thought") is True:
        return {"type": "reasoning", "text": str(part.get("text") or "")}
    if isinstance(part.get("text"), str):
        return text_part(part["text"])
    data = part.get("inlineData")
    if isinstance(data, dict):
        return {"type": "image", "mediaType": data.get("mimeType"), "data": data.get("data")}
    return {"type": "opaque", **part}


def response_content(response: Any) -> str | list[JSON]:
    """The text of a ``functionResponse.response`` (``output`` or ``error`` when it is a
    string, else the JSON of the whole response)."""
    if isinstance(response, dict):
        for key in ("output", "error", "llmContent"):
            if isinstance(response.get(key), str):
                return str(response[key])
    if isinstance(response, str):
        return response
    import json

    return json.dumps(response, ensure_ascii=False, sort_keys=True)


def _results(result: Any) -> list[JSON]:
    items = result if isinstance(result, list) else [result] if result is not None else []
    return [
        p["functionResponse"]
        for p in items
        if isinstance(p, dict) and isinstance(p.get("functionResponse"), dict)
    ]


class _Builder:
    def __init__(self, source: str) -> None:
        self.source = source
        self.uuids = Uuids()
        self.turns = Turns()
        self.answered: set[str] = set()

    def message(self, role: str, turn: int, own: Any, at: JSON, *salt: object) -> JSON:
        preferred = own if isinstance(own, str) and own else stable_uuid(self.source, *salt)
        if salt and isinstance(own, str) and own:
            preferred = stable_uuid(own, *salt)
        event = message_event(self.uuids.take(preferred, *salt), turn, role)
        event.update(at)
        return event

    def gemini_message(self, record: JSON, at: JSON) -> Iterator[JSON]:
        kind = record.get("type")
        own = record.get("id")
        ts = record.get("timestamp")
        stamp: JSON = {"timestamp": ts} if isinstance(ts, str) else {}
        if kind == "user":
            content = record.get("content")
            responses = _results(content)
            if responses and len(responses) == len(content if isinstance(content, list) else []):
                yield from self.responses(responses, own, at, stamp)
                return
            text = parts_content(content)
            injected = content_text_of(text).lstrip().startswith(INJECTED_PREFIXES)
            turn = self.turns.current if injected else self.turns.prompt()
            event = self.message("user", turn, own, at)
            event["content"] = text
            if injected:
                event["isMeta"] = True
            yield {**event, **stamp}
            return
        if kind != "gemini":
            uid = self.uuids.take(str(own or stable_uuid(self.source, *at.values())))
            yield foreign(str(kind), uid, at.get("sourceLine"), ts, **_index(at))
            return
        event = self.message("assistant", self.turns.activity(), own, at)
        content = parts_content(record.get("content"))
        thoughts = record.get("thoughts")
        if isinstance(thoughts, list) and thoughts:
            parts = [text_part(content)] if isinstance(content, str) else content
            opaque: list[JSON] = [{"type": "reasoning", "thoughts": thoughts}]
            content = [*opaque, *(p for p in parts if p.get("type") != "text" or p.get("text"))]
        event["content"] = content
        calls = [c for c in record.get("toolCalls") or [] if isinstance(c, dict)]
        listed = {c.get("id") for c in calls}
        raw = record.get("content")
        for part in raw if isinstance(raw, list) else []:
            call = part.get("functionCall") if isinstance(part, dict) else None
            if isinstance(call, dict) and (call.get("id") is None or call["id"] not in listed):
                calls.append(
                    {"id": call.get("id"), "name": call.get("name"), "args": call.get("args")}
                )
        if calls:
            event["toolCalls"] = [
                {
                    "id": str(c.get("id") or stable_uuid(event["uuid"], "call", i)),
                    "name": str(c.get("name") or ""),
                    "arguments": c.get("args") if c.get("args") is not None else {},
                }
                for i, c in enumerate(calls)
            ]
        if isinstance(record.get("model"), str):
            event["model"] = record["model"]
        yield {**event, **stamp}
        for i, (call, spec) in enumerate(zip(calls, event.get("toolCalls", []), strict=False)):
            responses = _results(call.get("result"))
            if not responses:
                continue  # answered by a later user record of functionResponse parts
            self.answered.add(spec["id"])
            tool = self.message("tool", event["turnId"], own, at, "result", i)
            tool["content"] = "\n".join(str(response_content(r.get("response"))) for r in responses)
            tool["toolCallId"] = spec["id"]
            tool["toolName"] = spec["name"]
            if call.get("status") in ("error", "cancelled"):
                tool["isError"] = True
            cts = call.get("timestamp")
            if isinstance(cts, str):
                tool["timestamp"] = cts
            elif stamp:
                tool.update(stamp)
            yield tool

    def responses(self, responses: list[JSON], own: Any, at: JSON, stamp: JSON) -> Iterator[JSON]:
        """A ``user`` record of ``functionResponse`` parts: the results the model was sent.
        A result already read (from the call's ``result``, or an earlier copy: Gemini CLI
        0.61 writes each twice when it resumes a session) is not read again."""
        for i, response in enumerate(responses):
            rid = response.get("id")
            cid = str(rid) if rid else stable_uuid(self.source, *at.values(), "response", i)
            if cid in self.answered:
                continue
            self.answered.add(cid)
            tool = self.message("tool", self.turns.activity(), own, at, "response", i)
            tool["content"] = response_content(response.get("response"))
            tool["toolCallId"] = cid
            if isinstance(response.get("name"), str):
                tool["toolName"] = response["name"]
            yield {**tool, **stamp}


def content_text_of(content: str | list[JSON]) -> str:
    """The text of canonical content (a string, or its text parts joined)."""
    if isinstance(content, str):
        return content
    return "\n".join(str(p.get("text", "")) for p in content if p.get("type") == "text")


def _index(at: JSON) -> JSON:
    return {"sourceIndex": at["sourceIndex"]} if "sourceIndex" in at else {}


def _session(meta: JSON, at: JSON, source: str) -> JSON | None:
    sid = meta.get("sessionId")
    if not isinstance(sid, str):
        return None
    event: JSON = {
        "type": "session",
        "uuid": stable_uuid(source, "session", sid),
        "sessionId": sid,
        "source": source,
    }
    if isinstance(meta.get("startTime"), str):
        event["timestamp"] = meta["startTime"]
    event.update(at)
    return event


def document_to_canonical(doc: Any) -> Iterator[dict[str, Any]]:
    """Convert one ``chats/session-*.json`` document (events carry ``sourceIndex``)."""
    if not isinstance(doc, dict):
        return
    session = _session(doc, {}, SOURCE)
    if session is not None:
        yield session
    builder = _Builder(SOURCE)
    for i, record in enumerate(doc.get("messages") or []):
        if isinstance(record, dict):
            yield from builder.gemini_message(record, {"sourceIndex": i})


def to_canonical(records: Iterable[tuple[int, dict[str, Any]]]) -> Iterator[dict[str, Any]]:
    """Convert a Gemini CLI JSONL upsert log (see the module docstring); events carry the
    ``sourceLine`` of the last write of their message.

    The session is the header's (``{sessionId, projectHash, ...}`` without ``type``, as
    detection knows it; a resume writes it again, and the first ``sessionId`` stays): a
    record of another kind that carries a
    ``sessionId`` (a Claude Code line) never names it. A record of no kind this reader
    knows is a ``foreign`` event at its line (``sourceType``: its ``type``, or
    ``record``), never dropped (the review of the readers, 2026-12: such records were
    discarded and a Claude line's ``sessionId`` became the session's).
    """
    meta: JSON = {}
    meta_line: int | None = None
    order: list[str] = []  # message ids in first-write order
    latest: dict[str, tuple[int, JSON]] = {}
    aside: list[JSON] = []
    for line, rec in records:
        if not isinstance(rec, dict):
            continue
        if "$rewindTo" in rec:
            target = rec["$rewindTo"]
            if target in latest:
                cut = order.index(target)
                for mid in order[cut:]:
                    latest.pop(mid, None)
                del order[cut:]
        elif isinstance(rec.get("$set"), dict):
            patch = rec["$set"]
            meta.update({k: v for k, v in patch.items() if k != "messages"})
            if isinstance(patch.get("messages"), list):
                order, latest = [], {}
                for i, m in enumerate(patch["messages"]):
                    if isinstance(m, dict):
                        mid = str(m.get("id") or stable_uuid(SOURCE, line, i))
                        order.append(mid)
                        latest[mid] = (line, m)
        elif "type" in rec and "id" in rec:
            mid = str(rec["id"])
            if mid not in latest:
                order.append(mid)
            latest[mid] = (line, rec)
        elif "sessionId" in rec and "projectHash" in rec and "type" not in rec:
            first = meta.get("sessionId")
            meta.update(rec)
            if isinstance(first, str):
                meta["sessionId"] = first
            meta_line = meta_line or line
        else:
            kind = rec.get("type")
            source_type = kind if isinstance(kind, str) and kind else "record"
            aside.append(foreign(source_type, stable_uuid(SOURCE, line, "record"), line))
    session = _session(meta, {"sourceLine": meta_line} if meta_line else {}, SOURCE)
    if session is not None:
        yield session
    builder = _Builder(SOURCE)
    conversation: list[JSON] = []
    for mid in order:
        line, record = latest[mid]
        conversation.extend(builder.gemini_message(record, {"sourceLine": line}))
    yield from merge_by_line(conversation, aside) if aside else conversation


def qwen_to_canonical(records: Iterable[tuple[int, dict[str, Any]]]) -> Iterator[dict[str, Any]]:
    """Convert a Qwen Code chat log (see the module docstring); ``sourceLine`` on each event."""
    builder = _Builder(QWEN)
    names: dict[str, str] = {}
    first = True
    for line, rec in records:
        if not isinstance(rec, dict):
            continue
        at: JSON = {"sourceLine": line}
        if first and isinstance(rec.get("sessionId"), str):
            first = False
            session = _session(rec, at, QWEN)
            if session is not None:
                if isinstance(rec.get("model"), str):
                    session["model"] = rec["model"]
                yield session
        kind = rec.get("type")
        message = rec.get("message")
        parts = message.get("parts") if isinstance(message, dict) else None
        own = rec.get("uuid")
        ts = rec.get("timestamp")
        stamp: JSON = {"timestamp": ts} if isinstance(ts, str) else {}
        if kind == "user" and isinstance(parts, list):
            event = builder.message("user", builder.turns.prompt(), own, at)
            event["content"] = parts_content(parts)
            yield {**event, **stamp}
        elif kind == "assistant" and isinstance(parts, list):
            event = builder.message("assistant", builder.turns.activity(), own, at)
            event["content"] = parts_content(parts)
            calls = []
            for i, p in enumerate(parts):
                call = p.get("functionCall") if isinstance(p, dict) else None
                if isinstance(call, dict):
                    cid = str(call.get("id") or stable_uuid(event["uuid"], "call", i))
                    names[cid] = str(call.get("name") or "")
                    calls.append({"id": cid, "name": names[cid], "arguments": call.get("args")})
            if calls:
                event["toolCalls"] = calls
            if isinstance(rec.get("model"), str):
                event["model"] = rec["model"]
            yield {**event, **stamp}
        elif kind == "tool_result" and isinstance(parts, list):
            responses = _results(parts)
            for i, response in enumerate(responses):
                tool = builder.message("tool", builder.turns.activity(), own, at, i)
                tool["content"] = response_content(response.get("response"))
                rid = response.get("id")
                if isinstance(rid, str):
                    tool["toolCallId"] = rid
                name = response.get("name") or (names.get(rid) if isinstance(rid, str) else None)
                if isinstance(name, str):
                    tool["toolName"] = name
                result = rec.get("toolCallResult")
                if isinstance(result, dict) and result.get("status") == "error":
                    tool["isError"] = True
                yield {**tool, **stamp}
        else:
            uid = builder.uuids.take(str(own or stable_uuid(QWEN, line)), line)
            yield foreign(str(kind), uid, line, ts, subtype=rec.get("subtype"))


def is_chat_document(doc: Any) -> bool:
    """Whether ``doc`` is a Gemini CLI ``session-*.json``: ``sessionId`` and ``messages`` whose
    records are Gemini message records (``id``, ``type`` user/gemini/info/error/warning)."""
    if not isinstance(doc, dict) or not isinstance(doc.get("sessionId"), str):
        return False
    messages = doc.get("messages")
    if not isinstance(messages, list):
        return False
    return all(
        isinstance(m, dict) and m.get("type") in ("user", "gemini", *NOTICES) and "id" in m
        for m in messages
    )
