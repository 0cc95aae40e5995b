"""Helpers shared by the importers: ids, turns, parts, foreign events, summary chains.

Everything here works on plain dicts and has no dependency on the rest of compactctl, so the
importers can run in a worker process with nothing but the standard library and orjson.
"""

from __future__ import annotations

import hashlib
import json
import uuid as _uuid
from collections.abc import Iterable, Iterator
from typing import Any

import orjson

JSON = dict[str, Any]

NAMESPACE = _uuid.UUID("6c3f7b9e-2d1a-5e4b-9c8d-0a1b2c3d4e5f")
"""uuid5 namespace of every id an importer has to invent (fixed forever: ids must be stable)."""


def as_dict(value: Any) -> JSON:
    """``value`` when it is a dict, else an empty dict (for optional nested objects)."""
    return value if isinstance(value, dict) else {}


def stable_uuid(*parts: object) -> str:
    """A deterministic uuid5 from ``parts`` (joined with a unit separator).

    >>> stable_uuid("openai-chat", 3, 0) == stable_uuid("openai-chat", 3, 0)
    True
    >>> stable_uuid("a", 1) != stable_uuid("a", 2)
    True
    """
    return str(_uuid.uuid5(NAMESPACE, "\x1f".join(str(p) for p in parts)))


def dumps(value: Any) -> bytes:
    """JSON bytes of ``value``; falls back to the stdlib for strings orjson rejects.

    orjson refuses lone surrogates, which Python writers leave in truncated text
    (docs/formats.md section 8); the stdlib escapes them instead.
    """
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    except TypeError:
        return json.dumps(value, sort_keys=True, default=str).encode("ascii")


def content_hash(value: Any) -> str:
    """A short, stable hash of a JSON value (key order does not matter).

    >>> content_hash({"a": 1, "b": 2}) == content_hash({"b": 2, "a": 1})
    True
    """
    return hashlib.blake2b(dumps(value), digest_size=12).hexdigest()


def byte_size(value: Any) -> int:
    """Size in bytes of a value as the source file stores it (strings: UTF-8 length)."""
    if isinstance(value, str):
        return len(value.encode("utf-8", "surrogatepass"))
    if value is None:
        return 0
    return len(dumps(value))


def parse_arguments(raw: Any) -> Any:
    """Tool-call arguments: a JSON-object string becomes a dict; anything else is kept raw.

    An empty string or ``None`` gives ``{}`` (a call without arguments); invalid JSON, or
    JSON that is not an object, stays the original string (docs/formats.md section 5).

    >>> parse_arguments('{"path": "a.py"}')
    {'path': 'a.py'}
    >>> parse_arguments('{"path": "a.py"')
    '{"path": "a.py"'
    >>> parse_arguments(None)
    {}
    """
    if isinstance(raw, dict):
        return raw
    if raw is None or raw == "":
        return {}
    if not isinstance(raw, str):
        return raw
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        try:
            value = json.loads(raw)
        except ValueError:
            return raw
    return value if isinstance(value, dict) else raw


def text_part(text: str) -> JSON:
    """A canonical text part."""
    return {"type": "text", "text": text}


def image_from_data_url(url: str) -> JSON:
    """An image part from a ``data:<media type>;base64,<data>`` URL (or a plain URL).

    >>> image_from_data_url("data:image/png;base64,AAAA")
    {'type': 'image', 'mediaType': 'image/png', 'data': 'AAAA'}
    >>> image_from_data_url("https://x/y.png")
    {'type': 'image', 'url': 'https://x/y.png'}
    """
    if url.startswith("data:"):
        head, sep, data = url.partition(",")
        if sep:
            media = head[5:].split(";", 1)[0] or "application/octet-stream"
            return {"type": "image", "mediaType": media, "data": data}
    return {"type": "image", "url": url}


def collapse(parts: list[JSON], sep: str = "\n") -> str | list[JSON]:
    """Content from parts: a plain string when every part is text, else the list itself.

    >>> collapse([text_part("a"), text_part("b")])
    'a\\nb'
    >>> collapse([])
    ''
    >>> collapse([{"type": "image", "url": "u"}])
    [{'type': 'image', 'url': 'u'}]
    """
    if all(p.get("type") == "text" for p in parts):
        return sep.join(str(p.get("text", "")) for p in parts)
    return parts


def content_text(content: Any) -> str:
    """The text of canonical ``content`` (string, or text parts joined by newlines)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            p["text"]
            for p in content
            if isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str)
        )
    return ""


def foreign(
    source_type: str,
    uuid: str,
    line: int | None = None,
    timestamp: Any = None,
    **extra: Any,
) -> JSON:
    """A ``foreign`` event: a source record that is not a message (kept for traceability).

    Replay ignores it (it reads only message, compact and summary events). Payloads are
    never copied: only the small identifying fields given in ``extra``.
    """
    event: JSON = {"type": "foreign", "uuid": uuid, "sourceType": source_type}
    return stamped(event, timestamp, line, **extra)


def stamped(event: JSON, timestamp: Any = None, line: int | None = None, **extra: Any) -> JSON:
    """``event`` with where it came from, in this key order: ``timestamp`` (only when it is a
    string), ``sourceLine`` (the 1-based source line, when known), then each ``extra`` field
    that is not ``None``. Changes and returns the same dict.

    >>> stamped({"type": "foreign"}, 5, 3, subtype="x", note=None)
    {'type': 'foreign', 'sourceLine': 3, 'subtype': 'x'}
    """
    if isinstance(timestamp, str):
        event["timestamp"] = timestamp
    if line is not None:
        event["sourceLine"] = line
    for key, value in extra.items():
        if value is not None:
            event[key] = value
    return event


def message_event(uuid: str, turn: int, role: str) -> JSON:
    """A canonical message event before its content is known (``content`` ``""``; the
    importer fills it and stamps the event, :func:`stamped`).

    >>> message_event("u1", 2, "user")
    {'type': 'message', 'uuid': 'u1', 'turnId': 2, 'role': 'user', 'content': ''}
    """
    return {"type": "message", "uuid": uuid, "turnId": turn, "role": role, "content": ""}


class Uuids:
    """Hands out uuids that are unique within one output file.

    The preferred id (a source uuid, or one derived from a call id) is used when it is still
    free; otherwise a uuid5 of the preferred id and ``salt`` (the source position) is used.
    """

    __slots__ = ("_used",)

    def __init__(self) -> None:
        self._used: set[str] = set()

    def take(self, preferred: str, *salt: object) -> str:
        """Reserve and return ``preferred``, or a deterministic substitute when it is taken."""
        candidate = preferred
        n = 0
        while candidate in self._used:
            n += 1
            candidate = stable_uuid(preferred, *salt, n)
        self._used.add(candidate)
        return candidate


class Turns:
    """Turn numbering shared by every importer (docs/design.md section 2: ``turnId``).

    A turn starts at each real user message (:meth:`prompt`). Everything else keeps the
    current turn, with one exception: an assistant or tool message before any prompt (a
    capture that starts mid-conversation) opens turn 1, so turn 0 holds only system and
    injected context.
    """

    __slots__ = ("current",)

    def __init__(self) -> None:
        self.current = 0

    def prompt(self) -> int:
        """A real user message: start the next turn and return its id."""
        self.current += 1
        return self.current

    def activity(self) -> int:
        """An assistant or tool message: the current turn (at least 1)."""
        if self.current == 0:
            self.current = 1
        return self.current


class SummaryChain:
    """Tracks the messages a native compaction would remove from the model's view.

    Importers :meth:`add` every message they emit; :meth:`summary` builds the SummaryEvent of a
    compaction marker: it replaces every message added since the previous summary, plus that
    previous summary (so only the newest of a chain survives replay, docs/design.md section 3).
    """

    __slots__ = ("_since", "_last", "_turn")

    def __init__(self) -> None:
        self._since: list[tuple[str, str, str]] = []
        self._last: str | None = None
        self._turn = 0

    def add(self, event: JSON) -> None:
        """Record one emitted message event (its uuid, role, text and turn).

        System messages are not recorded: agents keep (or re-inject) their instructions
        when they compact, so a native compaction never replaces them.
        """
        role = str(event.get("role", ""))
        if role == "system":
            return
        text = content_text(event.get("content")) if role != "tool" else ""
        self._since.append((str(event["uuid"]), role, text))
        turn = event.get("turnId")
        if isinstance(turn, int):
            self._turn = turn

    def mark(self) -> tuple[int, int]:
        """Where a compaction cuts, for :meth:`summary`'s ``cut`` when its summary comes
        later (Claude Code's ``compact_boundary`` line, then the summary line): ``(messages
        added so far, their last turn)``."""
        return len(self._since), self._turn

    def replaces_nothing(self, cut: tuple[int, int] | None = None) -> bool:
        """Whether a summary at ``cut`` (default: now) would replace nothing: no message
        added before it and no earlier summary (a session that starts from a summary of
        messages that are not in its file)."""
        upto = len(self._since) if cut is None else cut[0]
        return upto == 0 and self._last is None

    def summary(
        self,
        *,
        uuid: str,
        text: str,
        source: str,
        trigger: str | None,
        line: int | None,
        timestamp: Any = None,
        keep_texts: Iterable[str] = (),
        keep_uuids: Iterable[str] = (),
        cut: tuple[int, int] | None = None,
        **extra: Any,
    ) -> JSON:
        """The SummaryEvent for a compaction marker; resets the chain.

        ``keep_texts``: texts of non-tool messages the agent kept after compacting (Codex
        ``replacement_history``); messages with those texts are not replaced.
        ``keep_uuids``: uuids of messages the agent kept after its summary (Claude Code's
        ``compactMetadata.preservedMessages``): not replaced, and they stay in the chain
        (the next compaction replaces them). ``cut``: a :meth:`mark` taken at the marker,
        when messages were added between it and the summary: only the messages before it
        are replaced; those after it stay in the context and in the chain (the next
        compaction replaces them).
        """
        kept = set(keep_texts)
        keep = set(keep_uuids)
        upto, turn = cut if cut is not None else (len(self._since), self._turn)
        before = self._since[:upto]
        replaces = [
            u for u, role, txt in before if u not in keep and (role == "tool" or txt not in kept)
        ]
        if self._last is not None:
            replaces.append(self._last)
        event: JSON = {
            "type": "summary",
            "uuid": uuid,
            "replaces": replaces,
            "summaryText": text,
            "lastSummarizedTurnId": turn,
            "model": source,
        }
        if trigger:
            event["triggerMode"] = trigger
        self._since = [e for e in before if e[0] in keep] + self._since[upto:]
        self._last = uuid
        return stamped(event, timestamp, line, **extra)


def fill_timestamps(events: Iterable[JSON]) -> Iterator[JSON]:
    """Give events without a ``timestamp`` the last one seen (leading ones: the first one).

    For sources that stamp only some lines (Claude stream-json stamps user lines, not
    assistant lines). Holds back only the leading events that precede the first timestamp.
    """
    last: str | None = None
    held: list[JSON] = []
    for event in events:
        ts = event.get("timestamp")
        if isinstance(ts, str):
            if held:
                for h in held:
                    h["timestamp"] = ts
                yield from held
                held = []
            last = ts
            yield event
        elif last is not None:
            event["timestamp"] = last
            yield event
        else:
            held.append(event)
    yield from held


def merge_by_line(primary: list[JSON], others: list[JSON]) -> Iterator[JSON]:
    """Interleave ``others`` (sorted by ``sourceLine``) into ``primary`` without reordering it.

    Each event of ``others`` is placed before the first primary event with a larger
    ``sourceLine``; the order of ``primary`` (the conversation) is authoritative.
    """
    others.sort(key=lambda e: e.get("sourceLine") or 0)
    i = 0
    n = len(others)
    for event in primary:
        line = event.get("sourceLine")
        if isinstance(line, int):
            while i < n and (others[i].get("sourceLine") or 0) < line:
                yield others[i]
                i += 1
        yield event
    yield from others[i:]
