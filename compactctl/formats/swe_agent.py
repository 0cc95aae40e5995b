"""SWE-agent ``.traj`` files (and mini-swe-agent ``.traj.json``) -> canonical.

Source: docs/formats.md section 6 ("SWE-agent"). Input is the whole JSON document:
``{"trajectory": [...], "history": [...], "info": {...}, "replay_config": "..."}``, or
mini-swe-agent's ``{"info", "messages", "trajectory_format"}``. Output is canonical event
dicts with ``sourceIndex`` (position in ``history``/``messages``) instead of ``sourceLine``.

``history`` holds chat messages in OpenAI shape and is converted with
:class:`~compactctl.formats.openai_chat.ChatConverter`, plus:

- ``tool_call_ids`` (a list) -> ``toolCallId`` (its first id);
- ``is_demo`` messages (demonstrations in the prompt) keep their role, stay in the current
  turn (0 before the task) and get ``isDemo: true`` (user ones also ``isMeta: true``);
- a non-demo ``user`` message starts a turn unless it answers an assistant message (the
  previous non-demo message is ``assistant``): that is an environment observation (the
  thought-action parsers' command output, or a format-error requery) and gets
  ``isMeta: true``;
- ``message_type`` is kept as ``messageType``; ``thinking_blocks`` become opaque parts.

``trajectory`` (per-step copies, with ``query`` the full prompt of each step) and ``info``
(exit status, submission, cost) are not conversation: one ``foreign`` event each, with the
step count and ``exit_status`` only. A ``session`` event comes first when a model is known
(``replay_config`` -> ``agent.model.name``, or mini-swe-agent's ``info.config.model``);
``sessionId`` is the problem statement id when present. SWE-agent has no compaction record.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from compactctl.formats._common import JSON, foreign, parse_arguments, stable_uuid
from compactctl.formats.openai_chat import ChatConverter

SOURCE = "swe-agent"


SWE_KEYS = frozenset({"agent", "message_type", "is_demo", "thought", "action"})


def _swe_history(history: list[Any]) -> bool:
    from compactctl.formats.detection import STRONG, score_openai_chat

    messages = [m for m in history if isinstance(m, dict)]
    return (
        len(messages) == len(history)
        and all(score_openai_chat(m) == STRONG for m in messages)
        and any(SWE_KEYS & set(m) for m in messages)
    )


def messages_of(doc: Any) -> list[Any] | None:
    """The message list of a SWE-agent document (``history``, or ``messages`` for mini).

    A trajectory saved with ``history`` alone (no ``trajectory``/``info``) qualifies when its
    history holds OpenAI chat messages and at least one SWE-agent key (``agent``,
    ``message_type``, ``is_demo``, ``thought``, ``action``) (issue 17).

    >>> messages_of({"history": [{"role": "user", "content": "x", "agent": "main"}]})
    [{'role': 'user', 'content': 'x', 'agent': 'main'}]
    >>> messages_of({"history": [{"role": "user", "content": "x"}]}) is None
    True
    >>> messages_of({"info": {}, "messages": [{"info": {}, "parts": []}]}) is None
    True
    """
    if not isinstance(doc, dict):
        return None
    history = doc.get("history")
    if isinstance(history, list) and ("trajectory" in doc or "info" in doc):
        return history
    if isinstance(history, list) and history and _swe_history(history):
        return history
    messages = doc.get("messages")
    if isinstance(messages, list) and "trajectory_format" in doc:
        return messages
    if (
        isinstance(messages, list)
        and "info" in doc
        and messages
        and all(isinstance(m, dict) and isinstance(m.get("role"), str) for m in messages[:50])
    ):
        return messages  # mini-swe-agent without trajectory_format: chat messages only
    return None


def _dig(value: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value


def _session(doc: JSON) -> JSON | None:
    config = doc.get("replay_config")
    config = parse_arguments(config) if isinstance(config, str) else config
    model = _dig(config, "agent", "model", "name")
    sid = _dig(config, "problem_statement", "id")
    if not isinstance(model, str):
        model = _dig(doc, "info", "config", "model", "model_name")
    if not isinstance(model, str):
        return None
    event: JSON = {
        "type": "session",
        "uuid": stable_uuid(SOURCE, "session", sid or ""),
        "model": model,
        "source": SOURCE,
    }
    if isinstance(sid, str):
        event["sessionId"] = sid
    return event


def document_to_canonical(doc: Any) -> Iterator[dict[str, Any]]:
    """Convert a SWE-agent trajectory document to canonical events.

    Args:
        doc: the parsed ``.traj`` JSON object (see the module docstring).

    Yields:
        ``session`` (when a model is known), one event per history message (with
        ``sourceIndex``), then ``foreign`` events for ``trajectory`` and ``info``.
    """
    messages = messages_of(doc)
    if messages is None:
        return
    assert isinstance(doc, dict)
    session = _session(doc)
    conv = ChatConverter(SOURCE)
    if session is not None:
        session["uuid"] = conv.uuids.take(session["uuid"])
        yield session
    previous_role: Any = None
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            continue
        demo = bool(message.get("is_demo"))
        role = message.get("role")
        prompt = None
        if role == "user":  # demonstrations and observations do not start turns
            prompt = not demo and previous_role != "assistant"
        if not demo:
            previous_role = role
        kind = message.get("message_type")
        extra = {"isDemo": True if demo else None, "messageType": kind}
        event = conv.convert(message, None, index, prompt=prompt, extra=extra)
        yield event
    steps = doc.get("trajectory")
    if isinstance(steps, list):
        yield foreign(
            "trajectory", conv.uuids.take(stable_uuid(SOURCE, "trajectory")), steps=len(steps)
        )
    info = doc.get("info")
    if isinstance(info, dict):
        status = info.get("exit_status")
        yield foreign(
            "info",
            conv.uuids.take(stable_uuid(SOURCE, "info")),
            exitStatus=status if isinstance(status, str) else None,
        )
