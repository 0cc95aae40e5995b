"""The message builder shared by the Claude Code session-file and stream-json importers.

Both formats carry Messages API content blocks, one block per line for assistant responses
(docs/formats.md sections 1 and 2). :class:`ClaudeBuilder` receives the records of the current
conversation in order and produces canonical events; the two importers differ only in how
they find that order (a ``parentUuid`` tree, or the stream order) and in key spelling.
"""

from __future__ import annotations

from typing import Any

from compactctl.formats._common import (
    JSON,
    SummaryChain,
    Turns,
    Uuids,
    byte_size,
    collapse,
    content_text,
    foreign,
    message_event,
    stable_uuid,
    stamped,
    text_part,
)
from compactctl.text import CLAUDE_CODE_INJECTED

INJECTED_PREFIXES = CLAUDE_CODE_INJECTED
"""Text a person did not type to the model: slash-command echoes, reminders, hook output."""

MISSING_SUMMARY = "[{source} compacted the conversation here; its summary was not recorded]"


def is_injected_text(text: str) -> bool:
    """True for user text that Claude Code injected (tags such as ``<system-reminder>``).

    >>> is_injected_text("<system-reminder>be brief</system-reminder>")
    True
    >>> is_injected_text("Fix the test")
    False
    """
    return text.lstrip().startswith(INJECTED_PREFIXES)


def block_to_part(block: Any) -> JSON | None:
    """A canonical content part from one Messages API block (``None`` for non-dicts).

    Text stays text; images become ``{"type": "image", "mediaType", "data"}`` (or ``url``);
    every other block (thinking, redacted_thinking, document, server tool blocks) is kept
    verbatim as an opaque part, never as text.

    >>> block_to_part({"type": "image", "source": {"type": "base64",
    ...     "media_type": "image/png", "data": "AA"}})
    {'type': 'image', 'mediaType': 'image/png', 'data': 'AA'}
    """
    if not isinstance(block, dict):
        return None
    kind = block.get("type")
    if kind == "text":
        return text_part(str(block.get("text") or ""))
    if kind == "image":
        source = block.get("source")
        if isinstance(source, dict):
            if source.get("type") == "url" and isinstance(source.get("url"), str):
                return {"type": "image", "url": source["url"]}
            return {
                "type": "image",
                "mediaType": source.get("media_type") or source.get("mediaType"),
                "data": source.get("data"),
            }
    return dict(block)


def result_content(value: Any) -> str | list[JSON]:
    """Canonical content of a ``tool_result`` block's ``content`` (string or blocks)."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        parts = [p for p in (block_to_part(b) for b in value) if p is not None]
        return collapse(parts)
    if value is None:
        return ""
    return str(value)


def preserved_uuids(meta: JSON) -> list[str]:
    """The uuids of the records a Claude Code compaction keeps after its summary:
    ``compactMetadata.preservedMessages`` ``{anchorUuid, uuids, allUuids}`` of a
    ``compact_boundary`` (``uuids`` and ``allUuids`` together; snake_case spellings too).

    Claude Code leaves such records where they were on disk (their ``parentUuid``
    unchanged) and, when it loads the session, relinks them after the summary (the
    boundary's ``preservedSegment`` names the first, the last and the ``anchorUuid`` they
    follow, the summary line). Seen in Claude Code 2.1.328 (``fixtures/real/``: a manual
    ``/compact`` kept the last answer); the relinking is described by Claude Code's
    compaction code as published (boundary annotated with ``preservedSegment`` for the
    kept messages, ``messagesToKeep``).

    >>> preserved_uuids({"preservedMessages": {"uuids": ["a"], "allUuids": ["a", "b"]}})
    ['a', 'b']
    >>> preserved_uuids({"trigger": "auto"})
    []
    """
    kept = _get(meta, "preservedMessages", "preserved_messages")
    if not isinstance(kept, dict):
        return []
    found: list[str] = []
    for key in ("uuids", "allUuids", "all_uuids"):
        values = kept.get(key)
        if isinstance(values, list):
            found += [v for v in values if isinstance(v, str) and v not in found]
    return found


def _get(record: JSON, camel: str, snake: str) -> Any:
    value = record.get(camel)
    return record.get(snake) if value is None else value


class ClaudeBuilder:
    """Turns Claude records of one conversation, fed in order, into canonical events.

    - assistant lines sharing ``message.id`` merge into one message: text blocks joined,
      ``tool_use`` blocks to ``toolCalls``, other blocks kept as opaque parts; tool results
      arriving between two lines of the same response do not split it;
    - each ``tool_result`` block becomes one ``tool`` message (``toolCallId``, ``toolName``
      from the matching call, ``isError`` from ``is_error``); the size of the record's
      ``toolUseResult`` copy goes to ``duplicateBytes`` on the first of them;
    - a prompt starts a turn; ``isMeta`` and tag-wrapped injected text stay in the turn as
      ``user`` messages with ``isMeta: true``;
    - ``compact_boundary`` + the ``isCompactSummary`` line become one SummaryEvent, which
      replaces the messages before the boundary: Claude Code sends everything after it, so
      a message between the two lines (the first request ``compact --as native`` keeps)
      stays, and so do the messages the boundary's ``preservedMessages`` lists
      (:func:`preserved_uuids`). When nothing comes before the boundary (a session
      continued from a summary of messages not in its file), the summary is a ``user``
      message with ``summaryOf`` at its line, as in an effective context; a boundary whose
      summary line never comes replaces the messages before it with a placeholder text
      (:data:`MISSING_SUMMARY`).

    Events accumulate in :attr:`out`; :meth:`drain` hands out those that can no longer change.
    """

    def __init__(self, source: str, uuids: Uuids | None = None) -> None:
        self.source = source
        self.uuids = uuids or Uuids()
        self.turns = Turns()
        self.chain = SummaryChain()
        self.out: list[JSON] = []
        self.call_names: dict[str, str] = {}
        self._asst: JSON | None = None
        self._asst_id: Any = None
        self._asst_parts: list[JSON] = []
        self._asst_index = 0
        self._boundary: JSON | None = None
        self._turn_ended = False
        self._from_record: dict[str, str] = {}  # source record uuid -> its message's uuid

    # -- ids and turns -------------------------------------------------------------------

    def _uuid(self, record: JSON, line: int, *salt: object) -> str:
        own = record.get("uuid")
        preferred = own if isinstance(own, str) and own else stable_uuid(self.source, line)
        if salt:
            preferred = stable_uuid(preferred, *salt)
        return self.uuids.take(preferred, line, *salt)

    def _activity_turn(self) -> int:
        if self._turn_ended:
            self._turn_ended = False
            return self.turns.prompt()
        return self.turns.activity()

    def end_turn(self) -> None:
        """The source marked the end of a turn (stream-json ``result``): the next message
        starts a new turn even when no prompt was echoed."""
        self.close_assistant()
        self._turn_ended = True

    # -- output --------------------------------------------------------------------------

    def _message(self, record: JSON, line: int, role: str, turn: int, *salt: object) -> JSON:
        event = message_event(self._uuid(record, line, *salt), turn, role)
        self._remember(record, event)
        return stamped(event, record.get("timestamp"), line)

    def _remember(self, record: JSON, event: JSON) -> None:
        """Note that ``record`` (by its own ``uuid``) is part of message ``event`` (the first
        message made of it), for a compaction that names the records it keeps."""
        own = record.get("uuid")
        if isinstance(own, str):
            self._from_record.setdefault(own, event["uuid"])

    def _emit(self, event: JSON) -> None:
        self.out.append(event)
        if event.get("type") == "message":
            self.chain.add(event)

    def add_foreign(self, record: JSON, line: int, source_type: str, **extra: Any) -> None:
        """Emit a ``foreign`` event for a record that is not part of the conversation."""
        self.out.append(
            foreign(
                source_type,
                self._uuid(record, line),
                line,
                record.get("timestamp"),
                subtype=record.get("subtype"),
                **extra,
            )
        )

    def drain(self) -> list[JSON]:
        """Events that are final: everything before a still-open assistant message."""
        if self._asst is None:
            ready, self.out = self.out, []
        else:
            ready = self.out[: self._asst_index]
            self.out = self.out[self._asst_index :]
            self._asst_index = 0
        return ready

    def finish(self) -> list[JSON]:
        """Close everything and return the remaining events."""
        self.close_assistant()
        self._flush_boundary()
        ready, self.out = self.out, []
        return ready

    # -- assistant -----------------------------------------------------------------------

    def close_assistant(self) -> None:
        """Finalize the open assistant message (its content parts become ``content``)."""
        if self._asst is not None:
            self._asst["content"] = collapse(self._asst_parts)
            self._asst = None
            self._asst_id = None
            self._asst_parts = []

    def assistant(self, record: JSON, line: int) -> None:
        """One ``assistant`` line: start a message or merge into the open one."""
        message = record.get("message")
        if not isinstance(message, dict):
            self.add_foreign(record, line, "assistant", reason="noMessage")
            return
        mid = message.get("id")
        if self._asst is None or mid is None or mid != self._asst_id:
            self.close_assistant()
            event = self._message(record, line, "assistant", self._activity_turn())
            self._emit(event)
            self._asst = event
            self._asst_id = mid
            self._asst_parts = []
            self._asst_index = len(self.out) - 1
        event = self._asst
        self._remember(record, event)
        blocks = message.get("content")
        if isinstance(blocks, str):
            blocks = [{"type": "text", "text": blocks}]
        if not isinstance(blocks, list):
            return
        for block in blocks:
            if isinstance(block, dict) and block.get("type") == "tool_use":
                cid = str(block.get("id") or stable_uuid(event["uuid"], "call", line))
                name = str(block.get("name") or "")
                args = block.get("input")
                calls = event.setdefault("toolCalls", [])
                calls.append({"id": cid, "name": name, "arguments": {} if args is None else args})
                self.call_names[cid] = name
            else:
                part = block_to_part(block)
                if part is not None:
                    self._asst_parts.append(part)

    # -- user ----------------------------------------------------------------------------

    def user(self, record: JSON, line: int) -> None:
        """One ``user`` line: a prompt, injected text, tool results, or the compact summary."""
        message = record.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        if _get(record, "isCompactSummary", "is_compact_summary"):
            self.close_assistant()
            self._summary(record, line, content_text(result_content(content)))
            return
        meta = bool(_get(record, "isMeta", "is_meta"))
        if isinstance(content, str):
            self._user_text(record, line, [text_part(content)], meta or is_injected_text(content))
            return
        if not isinstance(content, list):
            self.add_foreign(record, line, "user", reason="noContent")
            return
        results: list[JSON] = []
        others: list[JSON] = []
        for block in content:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                results.append(block)
            else:
                part = block_to_part(block)
                if part is not None:
                    others.append(part)
        duplicate = _get(record, "toolUseResult", "tool_use_result")
        for i, block in enumerate(results):
            self._tool_result(record, line, block, i, duplicate if i == 0 else None)
        if others:
            text = content_text(others)
            injected = meta or bool(results) or is_injected_text(text)
            self._user_text(record, line, others, injected, "text" if results else None)

    def _user_text(
        self, record: JSON, line: int, parts: list[JSON], injected: bool, salt: str | None = None
    ) -> None:
        if injected:
            turn = self.turns.current
        else:
            self.close_assistant()
            self._turn_ended = False
            turn = self.turns.prompt()
        event = self._message(record, line, "user", turn, *((salt,) if salt else ()))
        event["content"] = collapse(parts)
        if injected:
            event["isMeta"] = True
        self._emit(event)

    def _tool_result(
        self, record: JSON, line: int, block: JSON, index: int, duplicate: Any
    ) -> None:
        salt = (index,) if index else ()
        event = self._message(record, line, "tool", self._activity_turn(), *salt)
        cid = block.get("tool_use_id")
        event["content"] = result_content(block.get("content"))
        if isinstance(cid, str):
            event["toolCallId"] = cid
            name = self.call_names.get(cid)
            if name is not None:
                event["toolName"] = name
        if block.get("is_error") is True:
            event["isError"] = True
        if duplicate is not None:
            event["duplicateBytes"] = byte_size(duplicate)
        self._emit(event)

    # -- native compaction ---------------------------------------------------------------

    def boundary(self, record: JSON, line: int) -> None:
        """A ``compact_boundary`` system line: the next compact-summary line completes it."""
        self.close_assistant()
        self._flush_boundary()
        meta = _get(record, "compactMetadata", "compact_metadata")
        meta = meta if isinstance(meta, dict) else {}
        self._boundary = {
            "record": record,
            "line": line,
            "trigger": meta.get("trigger"),
            "preTokens": _get(meta, "preTokens", "pre_tokens"),
            "cut": self.chain.mark(),
            "preserved": preserved_uuids(meta),
        }

    def _flush_boundary(self) -> None:
        if self._boundary is not None:
            boundary = self._boundary
            self._boundary = None
            self._emit_summary(
                boundary["record"],
                boundary["line"],
                MISSING_SUMMARY.format(source=self.source),
                boundary,
            )

    def _summary(self, record: JSON, line: int, text: str) -> None:
        boundary = self._boundary
        self._boundary = None
        self._emit_summary(record, line, text, boundary)

    def _emit_summary(self, record: JSON, line: int, text: str, boundary: JSON | None) -> None:
        trigger = boundary.get("trigger") if boundary else None
        pre = boundary.get("preTokens") if boundary else None
        cut = boundary.get("cut") if boundary else None
        if self.chain.replaces_nothing(cut):
            if boundary is not None and record is boundary["record"]:  # no summary line
                self.add_foreign(record, line, "system", reason="noSummary")
                return
            event = self._message(record, line, "user", self.turns.current)
            event["content"] = text
            event["summaryOf"] = event["uuid"]
            self._emit(event)
            return
        preserved = boundary.get("preserved", ()) if boundary else ()
        event = self.chain.summary(
            uuid=self._uuid(record, line),
            keep_uuids=[self._from_record[u] for u in preserved if u in self._from_record],
            text=text,
            source=self.source,
            trigger=trigger if isinstance(trigger, str) else None,
            line=line,
            timestamp=record.get("timestamp"),
            stats={"preTokens": pre} if isinstance(pre, int) else None,
            boundaryLine=boundary.get("line") if boundary else None,
            cut=cut,
        )
        self.out.append(event)
