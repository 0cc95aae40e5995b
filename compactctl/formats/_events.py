"""A small message builder for the readers of event-log formats (GitHub Copilot CLI,
opencode, Factory Droid, Aider): unique ids, turn numbers and the canonical message shape.

The Claude-shaped formats use :class:`compactctl.formats._claude.ClaudeBuilder`; the formats
read here carry one message (or one call, one result) per record, so a message needs only an
id, a role, a turn and its position in the source.
"""

from __future__ import annotations

from typing import Any

from compactctl.formats._common import JSON, Turns, Uuids, stable_uuid


class MessageBuilder:
    """Canonical ``message`` events for one transcript, in source order.

    Attributes:
        source: the format name (salt of invented ids).
        uuids: the ids handed out so far (unique within the output).
        turns: the turn counter (a prompt starts a turn, docs/design.md section 2).
        call_names: tool call id -> tool name, for results that do not repeat the name.
    """

    __slots__ = ("call_names", "source", "turns", "uuids")

    def __init__(self, source: str) -> None:
        self.source = source
        self.uuids = Uuids()
        self.turns = Turns()
        self.call_names: dict[str, str] = {}

    def message(
        self,
        role: str,
        content: Any,
        at: JSON,
        own: Any = None,
        *salt: object,
        meta: bool = False,
        timestamp: Any = None,
    ) -> JSON:
        """A ``message`` event.

        Args:
            role: ``user``, ``assistant``, ``tool`` or ``system``; a ``user`` message that is
                not ``meta`` starts the next turn; ``assistant``/``tool`` keep the current one
                (at least 1); ``system`` and ``meta`` keep the current one (0 before any
                prompt).
            content: canonical content (a string or parts).
            at: the source position (``{"sourceLine": n}`` or ``{"sourceIndex": i}``).
            own: the source's id of the record, used as the uuid when free; else a uuid5 of
                the source name, the position and ``salt``.
            meta: injected context (``isMeta: true``), never a prompt.
            timestamp: an ISO 8601 string, or anything else (then not set).
        """
        preferred = own if isinstance(own, str) and own else None
        if preferred is not None and salt:
            preferred = stable_uuid(preferred, *salt)
        if preferred is None:
            preferred = stable_uuid(self.source, *at.values(), *salt)
        if role == "user" and not meta:
            turn = self.turns.prompt()
        elif role in ("assistant", "tool"):
            turn = self.turns.activity()
        else:
            turn = self.turns.current
        event: JSON = {
            "type": "message",
            "uuid": self.uuids.take(preferred, *at.values(), *salt),
            "turnId": turn,
            "role": role,
            "content": content,
        }
        if meta:
            event["isMeta"] = True
        if isinstance(timestamp, str):
            event["timestamp"] = timestamp
        event.update(at)
        return event

    def call(self, call_id: Any, name: Any, arguments: Any, position: object) -> JSON:
        """One canonical tool call ``{id, name, arguments}``; remembers the name of the id
        (an id the source lacks is a uuid5 of the source and ``position``)."""
        cid = str(call_id) if call_id else stable_uuid(self.source, "call", position)
        self.call_names[cid] = str(name or "")
        return {
            "id": cid,
            "name": str(name or ""),
            "arguments": {} if arguments is None else arguments,
        }

    def result(self, call_id: str, content: Any, at: JSON, **how: Any) -> JSON:
        """The ``tool`` message answering ``call_id``.

        ``how``: ``error`` (true: ``isError``), ``name`` (``toolName``; default: the name of
        the call seen before), ``timestamp`` (as for :meth:`message`).
        """
        stamp = how.get("timestamp")
        event = self.message("tool", content, at, call_id, "result", timestamp=stamp)
        event["toolCallId"] = call_id
        name = how.get("name")
        tool_name = name if isinstance(name, str) and name else self.call_names.get(call_id)
        if tool_name:
            event["toolName"] = tool_name
        if how.get("error"):
            event["isError"] = True
        return event


def epoch_ms_to_iso(value: Any) -> str | None:
    """An ISO 8601 UTC string from epoch milliseconds (or seconds below 1e11), else ``None``.

    >>> epoch_ms_to_iso(1760000000000)
    '2025-10-09T08:53:20Z'
    >>> epoch_ms_to_iso("x") is None
    True
    """
    from datetime import UTC, datetime

    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    seconds = value / 1000 if value > 1e11 else value
    try:
        return datetime.fromtimestamp(seconds, UTC).isoformat().replace("+00:00", "Z")
    except (OverflowError, OSError, ValueError):
        return None
