"""``codex exec --json`` event streams -> canonical.

Source: docs/formats.md section 4. Input is ``(line_number, record)`` pairs of UI events
(``thread.started``, ``turn.started``, ``item.started``/``updated``/``completed``,
``turn.completed``, ``turn.failed``, ``error``); output is canonical event dicts with
``sourceLine``, streamed.

The stream has no prompt, no timestamps and no compaction record. Mapping:

- ``thread.started``: the ``session`` event (``thread_id`` -> ``sessionId``).
- ``turn.started``: starts the next turn (the prompt itself is not in the stream).
- ``item.completed`` (an item is final only there; ``item.started``/``item.updated`` are
  ``foreign``):

  - ``agent_message``: an ``assistant`` message (``text``);
  - ``reasoning``: an opaque ``{"type": "reasoning", "text"}`` part of the next assistant
    message of the turn (``foreign`` if none follows);
  - ``command_execution``: an assistant message with one call ``command_execution``
    ``{"command"}`` and a ``tool`` message with ``aggregated_output``; ``exitCode``;
    ``isError`` when the exit code is not 0 or the status is ``failed``;
  - ``file_change``: call ``file_change`` ``{"changes": [{"path", "kind"}]}``; the result is
    one ``<kind> <path>`` line per change followed by any ``diff`` (``kind`` may be a string
    or ``{"type": ...}``);
  - ``mcp_tool_call``: call ``mcp__<server>__<tool>`` with its ``arguments`` (parsed when a
    JSON string); the result is the text of ``result.content`` (or the JSON of ``result``),
    or ``error`` with ``isError``;
  - other items (``web_search``, ``todo_list``, ``error``): ``foreign``.

- call ids are the ``item.id``; the call message gets ``uuid5(item id, "call")`` and the
  result ``uuid5(item id, "result")`` (made unique with the line number if an id repeats).
- ``turn.completed``, ``turn.failed``, ``error`` and unknown events: ``foreign``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from compactctl.formats._common import (
    JSON,
    Turns,
    Uuids,
    dumps,
    foreign,
    message_event,
    parse_arguments,
    stable_uuid,
    stamped,
    text_part,
)

SOURCE = "codex-exec"
TOOL_ITEMS = frozenset({"command_execution", "file_change", "mcp_tool_call"})


def _kind(value: Any) -> str:
    if isinstance(value, dict):
        return str(value.get("type") or "update")
    return str(value or "update")


def _mcp_result(result: Any) -> str:
    if isinstance(result, dict):
        content = result.get("content")
        if isinstance(content, list):
            texts = [
                str(c.get("text"))
                for c in content
                if isinstance(c, dict) and isinstance(c.get("text"), str)
            ]
            if texts:
                return "\n".join(texts)
        return dumps(result).decode("utf-8", "replace")
    if isinstance(result, str):
        return result
    return "" if result is None else dumps(result).decode("utf-8", "replace")


def split_tool_item(item: JSON) -> tuple[str, Any, str, int | None, bool]:
    """``(tool name, arguments, result text, exit code, is_error)`` of a tool item.

    >>> split_tool_item({"type": "command_execution", "command": "ls",
    ...     "aggregated_output": "a\\n", "exit_code": 0, "status": "completed"})
    ('command_execution', {'command': 'ls'}, 'a\\n', 0, False)
    """
    kind = item.get("type")
    status = item.get("status")
    if kind == "command_execution":
        code = item.get("exit_code")
        code = code if isinstance(code, int) else None
        failed = status == "failed" or (code is not None and code != 0)
        output = item.get("aggregated_output")
        return (
            "command_execution",
            {"command": item.get("command")},
            output if isinstance(output, str) else "",
            code,
            failed,
        )
    if kind == "file_change":
        changes = item.get("changes")
        changes = changes if isinstance(changes, list) else []
        listed = [
            {"path": c.get("path"), "kind": _kind(c.get("kind"))}
            for c in changes
            if isinstance(c, dict)
        ]
        lines = [f"{c['kind']} {c['path']}" for c in listed]
        diffs = [
            c["diff"] for c in changes if isinstance(c, dict) and isinstance(c.get("diff"), str)
        ]
        text = "\n".join(lines + diffs)
        return "file_change", {"changes": listed}, text, None, status == "failed"
    server = item.get("server") or "mcp"
    tool = item.get("tool") or "tool"
    error = item.get("error")
    args = parse_arguments(item.get("arguments"))
    if error:
        message = error.get("message") if isinstance(error, dict) else error
        return f"mcp__{server}__{tool}", args, str(message), None, True
    return f"mcp__{server}__{tool}", args, _mcp_result(item.get("result")), None, status == "failed"


def to_canonical(records: Iterable[tuple[int, dict[str, Any]]]) -> Iterator[dict[str, Any]]:
    """Convert a ``codex exec --json`` capture to canonical events (see the module docstring).

    Args:
        records: ``(line_number, parsed_record)`` pairs in stream order.

    Yields:
        The ``session`` event, then messages and ``foreign`` events with ``sourceLine``.
        Events carry no ``timestamp``: the stream has none.
    """
    uuids = Uuids()
    turns = Turns()
    reasoning: list[tuple[int, JSON]] = []

    def message(line: int, role: str, turn: int, preferred: str) -> JSON:
        return stamped(message_event(uuids.take(preferred, line), turn, role), line=line)

    def leftover_reasoning() -> Iterator[JSON]:
        for line, _part in reasoning:
            yield foreign("item.completed", stable_uuid(SOURCE, line), line, subtype="reasoning")
        reasoning.clear()

    def with_reasoning(event: JSON, text: str) -> JSON:
        parts = [part for _, part in reasoning]
        reasoning.clear()
        if parts:
            event["content"] = [*parts, text_part(text)] if text else parts
        else:
            event["content"] = text
        return event

    for line, rec in records:
        if not isinstance(rec, dict):
            continue
        kind = rec.get("type")
        item = rec.get("item")
        if kind == "thread.started":
            sid = rec.get("thread_id")
            yield {
                "type": "session",
                "uuid": uuids.take(stable_uuid(SOURCE, "session", sid or line)),
                "sessionId": sid,
                "source": SOURCE,
                "sourceLine": line,
            }
            continue
        if kind == "turn.started":
            yield from leftover_reasoning()
            turns.prompt()
        if kind != "item.completed" or not isinstance(item, dict):
            subtype = item.get("type") if isinstance(item, dict) else None
            yield foreign(str(kind), stable_uuid(SOURCE, line), line, subtype=subtype)
            continue
        item_type = item.get("type")
        item_id = str(item.get("id") or stable_uuid(SOURCE, line, "item"))
        if item_type == "agent_message":
            event = message(line, "assistant", turns.activity(), stable_uuid(SOURCE, item_id))
            yield with_reasoning(event, str(item.get("text") or ""))
        elif item_type == "reasoning":
            reasoning.append((line, {"type": "reasoning", "text": item.get("text")}))
        elif item_type in TOOL_ITEMS:
            name, args, result, code, failed = split_tool_item(item)
            turn = turns.activity()
            call = message(line, "assistant", turn, stable_uuid(SOURCE, item_id, "call"))
            call = with_reasoning(call, "")
            call["toolCalls"] = [{"id": item_id, "name": name, "arguments": args}]
            yield call
            out = message(line, "tool", turn, stable_uuid(SOURCE, item_id, "result"))
            out["content"] = result
            out["toolCallId"] = item_id
            out["toolName"] = name
            if code is not None:
                out["exitCode"] = code
            if failed:
                out["isError"] = True
            yield out
        else:
            yield foreign("item.completed", stable_uuid(SOURCE, line), line, subtype=item_type)
    yield from leftover_reasoning()
