"""Factory Droid ``droid exec --output-format stream-json`` -> canonical.

Source: the public description of Droid's stream-json output (one JSON object per line, each
with ``type`` and ``session_id``): ``system`` (``subtype: init``, ``cwd``, ``tools``,
``model``), ``message`` (``role`` user/assistant, ``id``, ``text``, ``timestamp`` in ms),
``tool_call`` (``id``, ``toolName``, ``parameters``), ``tool_result`` (``id`` of the call,
``isError``, ``value``) and ``completion`` (``finalText``, ``numTurns``, ``durationMs``). No
Droid ran here, so the fixture is built from that description
(``fixtures/formats/misleading/droid-stream-described.jsonl``).

It opens like Claude stream-json (``type: system`` with ``session_id``) but its other records
are not Claude's: detection reads it as Droid only when the ``message``/``tool_call``/
``tool_result`` records are there (docs/formats.md, detection).

Mapping (``sourceLine`` on every event): ``system init`` -> the ``session`` event;
``message`` -> a ``user`` (a prompt) or ``assistant`` message; ``tool_call`` -> an
``assistant`` message with that one call (Droid gives each call its own ``messageId``);
``tool_result`` -> the ``tool`` message (``isError``);
``completion`` and other records -> ``foreign`` (``finalText`` repeats the last reply).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from compactctl.formats._common import JSON, foreign, stable_uuid
from compactctl.formats._events import MessageBuilder, epoch_ms_to_iso

SOURCE = "droid"
TYPES = frozenset({"system", "message", "tool_call", "tool_result", "completion"})


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    import json

    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def to_canonical(records: Iterable[tuple[int, dict[str, Any]]]) -> Iterator[dict[str, Any]]:
    """Convert a Droid stream-json log (see the module docstring)."""
    builder = MessageBuilder(SOURCE)
    session_done = False
    for line, rec in records:
        if not isinstance(rec, dict):
            continue
        kind = rec.get("type")
        at: JSON = {"sourceLine": line}
        ts = epoch_ms_to_iso(rec.get("timestamp"))
        own = rec.get("id")
        sid = rec.get("session_id")
        if kind == "system" and not session_done and isinstance(sid, str):
            session_done = True
            event: JSON = {
                "type": "session",
                "uuid": builder.uuids.take(stable_uuid(SOURCE, "session", sid)),
                "sessionId": sid,
                "source": SOURCE,
                "sourceLine": line,
            }
            if isinstance(rec.get("model"), str):
                event["model"] = rec["model"]
            yield event
        elif kind == "message" and rec.get("role") in ("user", "assistant"):
            yield builder.message(str(rec["role"]), _text(rec.get("text")), at, own, timestamp=ts)
        elif kind == "tool_call":
            name = rec.get("toolName") or rec.get("toolId")
            call = builder.call(own, name, rec.get("parameters"), line)
            event = builder.message("assistant", "", at, rec.get("messageId"), timestamp=ts)
            event["toolCalls"] = [call]
            yield event
        elif kind == "tool_result":
            cid = str(own or stable_uuid(SOURCE, "call", line))
            yield builder.result(
                cid,
                _text(rec.get("value")),
                at,
                error=rec.get("isError") is True,
                name=rec.get("toolName") or rec.get("toolId"),
                timestamp=ts,
            )
        else:
            uid = builder.uuids.take(stable_uuid(SOURCE, line))
            yield foreign(str(kind), uid, line, ts, subtype=rec.get("subtype"))
