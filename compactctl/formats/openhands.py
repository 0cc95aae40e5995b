"""OpenHands (V0) event lists -> canonical.

Source: docs/formats.md section 6 ("OpenHands"). Input is a whole JSON document: an array of
serialized events (``event_to_dict`` / ``event_to_trajectory``: an export, or the per-event
files of ``sessions/<id>/events/`` collected in id order), or an evaluation record
``{"history": [...], "metadata": {...}}``. Output is canonical event dicts; documents have no
line numbers, so each event carries ``sourceIndex`` (its position in the array) and
``sourceId`` (the OpenHands event ``id``) instead of ``sourceLine``.

Mapping:

- ``action: "system"``: a ``system`` message (``args.content``).
- ``action: "message"``: ``source: "user"`` -> a ``user`` message that starts a turn;
  ``source: "agent"`` -> an ``assistant`` message. ``args.image_urls`` become image parts.
- other agent actions (``run``, ``read``, ``edit``, ``write``, ``run_ipython``, ``browse*``,
  ``think``, ``finish``, ``call_tool_mcp``, ...) -> ``toolCalls``: ``id`` and ``name`` from
  ``tool_call_metadata`` (``tool_call_id``, ``function_name``), ``arguments`` parsed from the
  matching call in ``tool_call_metadata.model_response`` (else ``args`` without
  ``thought``). Actions from one model response (same ``model_response.id``) form one
  assistant message whose text is the response's ``content`` (else the first ``thought``).
  Without ``tool_call_metadata`` the call id is ``openhands-<event id>`` and the name the
  action type. A call no observation answers (``finish``, typically) is left out of
  ``toolCalls`` (replay must never see a call without its result) and listed in
  ``unansweredCalls``; a ``finish`` without text gets its ``final_thought`` as content.
- observations answering an emitted call (their ``cause`` is the action id, or their
  ``tool_call_metadata.tool_call_id`` names the call) -> ``tool`` messages; ``isError`` for
  ``observation: "error"`` or a non-zero ``extras.metadata.exit_code`` (kept as
  ``exitCode``). The copy of the model response in ``tool_call_metadata`` is not copied.
- ``action: "condensation"`` -> a ``summary`` event (``model: "openhands"``): ``replaces`` the
  messages made from ``forgotten_event_ids`` (or ``forgotten_events_start_id`` ..
  ``forgotten_events_end_id``) plus the previous summary (OpenHands shows only the newest
  one); ``summaryText`` is ``summary`` (a placeholder naming the count when the condenser
  only forgot); ``triggerMode`` ``manual`` after a ``condensation_request``, else ``auto``.
- everything else (``recall`` actions and observations with workspace context,
  ``agent_state_changed``, ``change_agent_state``, ``condensation_request``, observations
  without a matching call, user-side non-message actions): ``foreign``.
- ``session``: emitted first when a model is known (``metadata.llm_config.model`` of an
  evaluation record, else ``model`` of the first model response); ``sessionId`` is the
  record's ``instance_id`` when present.

Not handled: V1 (software-agent SDK) events with a ``kind`` field.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from compactctl.formats._common import (
    JSON,
    Turns,
    Uuids,
    as_dict,
    collapse,
    foreign,
    image_from_data_url,
    message_event,
    parse_arguments,
    stable_uuid,
    text_part,
)

SOURCE = "openhands"
NOT_CALLS = frozenset({"change_agent_state", "recall", "condensation_request"})
"""Agent actions that are runtime bookkeeping, not tool calls of the model."""
IGNORED_ARGS = frozenset({"thought", "security_risk", "confirmation_state", "is_confirmed"})


def events_of(doc: Any) -> list[JSON] | None:
    """The event list of an OpenHands document, or ``None`` when it is not one."""
    events = doc
    if isinstance(doc, dict):
        events = doc.get("history", doc.get("events"))
    if not isinstance(events, list) or not events:
        return None
    sample = [e for e in events[:20] if isinstance(e, dict)]
    if sample and all(("action" in e or "observation" in e) for e in sample):
        return [e for e in events if isinstance(e, dict)]
    return None


def _metadata(event: JSON) -> JSON:
    tcm = event.get("tool_call_metadata")
    return tcm if isinstance(tcm, dict) else {}


def _response(tcm: JSON) -> JSON:
    response = tcm.get("model_response")
    return response if isinstance(response, dict) else {}


def _response_message(response: JSON) -> JSON:
    choices = response.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], dict):
        message = choices[0].get("message")
        if isinstance(message, dict):
            return message
    return {}


def _call_of(event: JSON) -> JSON:
    """``{id, name, arguments}`` of an agent action."""
    tcm = _metadata(event)
    args = as_dict(event.get("args"))
    cid = tcm.get("tool_call_id") or f"openhands-{event.get('id')}"
    name = tcm.get("function_name") or event.get("action") or ""
    arguments: Any = None
    calls = _response_message(_response(tcm)).get("tool_calls")
    for call in calls if isinstance(calls, list) else []:
        if isinstance(call, dict) and call.get("id") == cid:
            fn = call.get("function")
            if isinstance(fn, dict):
                arguments = parse_arguments(fn.get("arguments"))
    if arguments is None:
        arguments = {k: v for k, v in args.items() if k not in IGNORED_ARGS}
    return {"id": str(cid), "name": str(name), "arguments": arguments}


def _session(doc: Any, events: list[JSON], uuids: Uuids) -> JSON | None:
    model = None
    sid = None
    if isinstance(doc, dict):
        meta = doc.get("metadata")
        llm = meta.get("llm_config") if isinstance(meta, dict) else None
        model = llm.get("model") if isinstance(llm, dict) else None
        sid = doc.get("instance_id")
    if not isinstance(model, str):
        model = next(
            (
                _response(_metadata(e)).get("model")
                for e in events
                if isinstance(_response(_metadata(e)).get("model"), str)
            ),
            None,
        )
    if not isinstance(model, str):
        return None
    event: JSON = {
        "type": "session",
        "uuid": uuids.take(stable_uuid(SOURCE, "session", sid or "")),
        "model": model,
        "source": SOURCE,
    }
    if sid is not None:
        event["sessionId"] = str(sid)
    ts = next((e["timestamp"] for e in events if isinstance(e.get("timestamp"), str)), None)
    if ts is not None:
        event["timestamp"] = ts
    return event


def _forgotten(args: JSON) -> list[Any]:
    ids = args.get("forgotten_event_ids")
    if isinstance(ids, list):
        return ids
    start = args.get("forgotten_events_start_id")
    end = args.get("forgotten_events_end_id")
    if isinstance(start, int) and isinstance(end, int):
        return list(range(start, end + 1))
    return []


def document_to_canonical(doc: Any) -> Iterator[dict[str, Any]]:
    """Convert an OpenHands event array (or evaluation record) to canonical events.

    Args:
        doc: the parsed JSON document (see the module docstring for the accepted shapes).

    Yields:
        ``session`` (when a model is known), then messages, summaries and ``foreign`` events
        in event order, each with ``sourceIndex`` and ``sourceId``. Memory: the document.
    """
    events = events_of(doc)
    if events is None:
        return
    uuids = Uuids()
    session = _session(doc, events, uuids)
    if session is not None:
        yield session
    # first pass: which actions are answered by an observation
    answered_actions: set[Any] = set()
    answered_calls: set[str] = set()
    for e in events:
        if "observation" in e:
            answered_actions.add(e.get("cause"))
            cid = _metadata(e).get("tool_call_id")
            if isinstance(cid, str):
                answered_calls.add(cid)

    turns = Turns()
    last_summary: str | None = None
    turn_of: dict[str, int] = {}  # canonical message uuid -> turn
    msg_of_event: dict[Any, str] = {}  # OpenHands event id -> canonical message uuid
    call_of_action: dict[Any, JSON] = {}  # action id -> emitted call
    emitted_calls: dict[str, JSON] = {}  # call id -> call
    asst: JSON | None = None
    asst_response: Any = None
    pending_request = False
    out: list[JSON] = []

    def base(e: JSON, index: int, role: str, turn: int) -> JSON:
        event = message_event(
            uuids.take(stable_uuid(SOURCE, e.get("id", index)), index), turn, role
        )
        if isinstance(e.get("timestamp"), str):
            event["timestamp"] = e["timestamp"]
        event["sourceIndex"] = index
        if "id" in e:
            event["sourceId"] = e["id"]
        return event

    def emit(event: JSON, source_id: Any = None) -> None:
        out.append(event)
        if event["type"] == "message":
            turn_of[event["uuid"]] = event["turnId"]
            if source_id is not None:
                msg_of_event[source_id] = event["uuid"]

    def other(e: JSON, index: int, kind: str) -> None:
        sub = e.get(kind)
        out.append(
            foreign(
                kind,
                uuids.take(stable_uuid(SOURCE, e.get("id", index)), index),
                None,
                e.get("timestamp"),
                subtype=sub if isinstance(sub, str) else None,
                sourceIndex=index,
                sourceId=e.get("id"),
            )
        )

    for index, e in enumerate(events):
        eid = e.get("id")
        source = e.get("source")
        args = as_dict(e.get("args"))
        action = e.get("action")
        if "observation" in e:
            asst = None
            tcm_id = _metadata(e).get("tool_call_id")
            call = call_of_action.get(e.get("cause"))
            if call is None and isinstance(tcm_id, str):
                call = emitted_calls.get(tcm_id)
            if call is None:
                other(e, index, "observation")
                continue
            event = base(e, index, "tool", turns.activity())
            content = e.get("content")
            event["content"] = content if isinstance(content, str) else ""
            event["toolCallId"] = call["id"]
            event["toolName"] = call["name"]
            extras = as_dict(e.get("extras"))
            meta = extras.get("metadata")
            code = meta.get("exit_code") if isinstance(meta, dict) else None
            if isinstance(code, int):
                event["exitCode"] = code
            if e.get("observation") == "error" or (isinstance(code, int) and code != 0):
                event["isError"] = True
            emit(event, eid)
        elif action == "system":
            asst = None
            event = base(e, index, "system", turns.current)
            event["content"] = str(args.get("content") or e.get("message") or "")
            emit(event, eid)
        elif action == "message" and source in ("user", "agent"):
            asst = None
            role = "user" if source == "user" else "assistant"
            turn = turns.prompt() if role == "user" else turns.activity()
            event = base(e, index, role, turn)
            parts = [text_part(str(args.get("content") or ""))]
            urls = args.get("image_urls")
            for url in urls if isinstance(urls, list) else []:
                if isinstance(url, str):
                    parts.append(image_from_data_url(url))
            event["content"] = collapse(parts)
            emit(event, eid)
        elif action == "condensation":
            asst = None
            forgotten = _forgotten(args)
            replaces = list(dict.fromkeys(msg_of_event[i] for i in forgotten if i in msg_of_event))
            text = args.get("summary")
            if not isinstance(text, str) or not text:
                text = f"[OpenHands condensation: {len(forgotten)} earlier events forgotten]"
            summary: JSON = {
                "type": "summary",
                "uuid": uuids.take(stable_uuid(SOURCE, eid if eid is not None else index), index),
                # OpenHands shows only the newest condensation's summary
                "replaces": replaces + ([last_summary] if last_summary else []),
                "summaryText": text,
                "lastSummarizedTurnId": max((turn_of[u] for u in replaces), default=0),
                "model": SOURCE,
                "triggerMode": "manual" if pending_request else "auto",
            }
            if isinstance(e.get("timestamp"), str):
                summary["timestamp"] = e["timestamp"]
            summary["sourceIndex"] = index
            summary["sourceId"] = eid
            last_summary = summary["uuid"]
            pending_request = False
            out.append(summary)
        elif source == "agent" and isinstance(action, str) and action not in NOT_CALLS:
            tcm = _metadata(e)
            call = _call_of(e)
            response_id = _response(tcm).get("id")
            if asst is None or response_id is None or response_id != asst_response:
                asst = base(e, index, "assistant", turns.activity())
                text = _response_message(_response(tcm)).get("content")
                if not isinstance(text, str) or not text:
                    text = args.get("thought") if isinstance(args.get("thought"), str) else ""
                if not text and action == "finish":
                    text = str(args.get("final_thought") or e.get("message") or "")
                asst["content"] = text
                asst_response = response_id
                emit(asst, eid)
            else:
                msg_of_event[eid] = asst["uuid"]
            if eid in answered_actions or call["id"] in answered_calls:
                asst.setdefault("toolCalls", []).append(call)
                call_of_action[eid] = call
                emitted_calls[call["id"]] = call
            else:
                asst.setdefault("unansweredCalls", []).append(call)
        else:
            if action == "condensation_request":
                pending_request = True
            other(e, index, "action" if "action" in e else "event")
    yield from out
