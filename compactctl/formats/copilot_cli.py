"""GitHub Copilot CLI session event logs -> canonical.

Source: the public descriptions of Copilot CLI's session files
(``~/.copilot/session-state/<session id>/events.jsonl``, older releases
``session-state/<session id>.jsonl``): every line is an envelope ``{type, data, id,
timestamp, parentId}``; no Copilot CLI ran here, so the fixture is built from those
descriptions (``fixtures/formats/copilot-cli-described.jsonl``).

Mapping (``sourceLine`` on every event):

- ``session.start`` (``data.sessionId``, ``copilotVersion``, ``startTime``): the ``session``
  event;
- ``user.message`` (``data.content``): a ``user`` message that starts a turn;
- ``assistant.message`` (``data.content``, ``reasoningText``, ``toolRequests[] {toolCallId,
  name, arguments}``): an ``assistant`` message, the requests as ``toolCalls``, the reasoning as
  an opaque ``{"type": "reasoning", "text"}`` part;
- ``tool.execution_start`` (``toolCallId``, ``toolName``, ``arguments``): a call no
  ``assistant.message`` requested becomes an ``assistant`` message with that one call
  (otherwise ``foreign``: it repeats the request);
- ``tool.execution_complete`` (``toolCallId``, ``success``, ``result.content``, ``error``):
  the ``tool`` message; ``isError`` when ``success`` is false; the content is
  ``result.content`` (what the model sees; ``detailedContent`` is a display copy), else the
  error's ``message``;
- everything else (``session.info``, ``session.model_change``, ``assistant.turn_start``/
  ``turn_end``, ``assistant.message_delta``, ...): ``foreign``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from compactctl.formats._common import JSON, as_dict, foreign, stable_uuid, text_part
from compactctl.formats._events import MessageBuilder

SOURCE = "copilot-cli"
TYPES = frozenset(
    {
        "session.start",
        "session.resume",
        "session.info",
        "session.error",
        "session.model_change",
        "session.truncation",
        "session.compaction_start",
        "session.compaction_complete",
        "user.message",
        "assistant.message",
        "assistant.message_delta",
        "assistant.reasoning",
        "assistant.turn_start",
        "assistant.turn_end",
        "assistant.usage",
        "tool.execution_start",
        "tool.execution_partial_result",
        "tool.execution_complete",
        "tool.user_requested",
        "abort",
    }
)
"""Event types of the public descriptions (a record of another type with the same envelope
is kept as ``foreign``)."""


def is_envelope(record: dict[str, Any]) -> bool:
    """Whether ``record`` has Copilot CLI's envelope: ``type`` with a dot, a ``data`` object,
    ``id`` and ``timestamp``."""
    kind = record.get("type")
    return (
        isinstance(kind, str)
        and "." in kind
        and isinstance(record.get("data"), dict)
        and "id" in record
        and "timestamp" in record
    )


def _result_text(data: JSON) -> str:
    result = data.get("result")
    if isinstance(result, dict) and isinstance(result.get("content"), str):
        return str(result["content"])
    if isinstance(result, str):
        return result
    error = data.get("error")
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return str(error["message"])
    return error if isinstance(error, str) else ""


def to_canonical(records: Iterable[tuple[int, dict[str, Any]]]) -> Iterator[dict[str, Any]]:
    """Convert a Copilot CLI ``events.jsonl`` (see the module docstring)."""
    builder = MessageBuilder(SOURCE)
    requested: set[str] = set()
    for line, rec in records:
        if not isinstance(rec, dict):
            continue
        kind = rec.get("type")
        data = as_dict(rec.get("data"))
        ts = rec.get("timestamp")
        at: JSON = {"sourceLine": line}
        own = rec.get("id")
        if kind == "session.start" and isinstance(data.get("sessionId"), str):
            event: JSON = {
                "type": "session",
                "uuid": builder.uuids.take(stable_uuid(SOURCE, "session", data["sessionId"])),
                "sessionId": data["sessionId"],
                "source": SOURCE,
                "sourceLine": line,
            }
            if isinstance(ts, str):
                event["timestamp"] = ts
            if isinstance(data.get("copilotVersion"), str):
                event["version"] = data["copilotVersion"]
            yield event
        elif kind == "user.message":
            text = data.get("content") if isinstance(data.get("content"), str) else ""
            yield builder.message("user", text, at, own, timestamp=ts)
        elif kind == "assistant.message":
            content: Any = data.get("content") if isinstance(data.get("content"), str) else ""
            reasoning = data.get("reasoningText")
            if isinstance(reasoning, str) and reasoning:
                parts: list[JSON] = [{"type": "reasoning", "text": reasoning}]
                if content:
                    parts.append(text_part(content))
                content = parts
            event = builder.message("assistant", content, at, own, timestamp=ts)
            calls = []
            for i, req in enumerate(data.get("toolRequests") or []):
                if isinstance(req, dict):
                    calls.append(
                        builder.call(
                            req.get("toolCallId"), req.get("name"), req.get("arguments"), (line, i)
                        )
                    )
            if calls:
                event["toolCalls"] = calls
                requested.update(c["id"] for c in calls)
            if isinstance(data.get("model"), str):
                event["model"] = data["model"]
            yield event
        elif kind == "tool.execution_start" and str(data.get("toolCallId") or "") not in requested:
            call = builder.call(
                data.get("toolCallId"), data.get("toolName"), data.get("arguments"), line
            )
            requested.add(call["id"])
            event = builder.message("assistant", "", at, own, timestamp=ts)
            event["toolCalls"] = [call]
            yield event
        elif kind == "tool.execution_complete":
            cid = str(data.get("toolCallId") or stable_uuid(SOURCE, "call", line))
            yield builder.result(
                cid,
                _result_text(data),
                at,
                error=data.get("success") is False,
                name=data.get("toolName"),
                timestamp=ts,
            )
        else:
            uid = builder.uuids.take(str(own or stable_uuid(SOURCE, line)), line)
            yield foreign(str(kind), uid, line, ts)
