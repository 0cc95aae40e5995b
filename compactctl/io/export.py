"""The effective context as output: canonical JSONL or OpenAI Chat Completions messages
(``--materialize``, ``--as openai``, ``inspect --effective``)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from compactctl.errors import UsageError
from compactctl.io.jsonl import dump_events
from compactctl.model import Message, SessionEvent, dumps

__all__ = ["framed", "materialized_lines", "openai_messages", "to_openai"]


def materialized_lines(
    view: list[Message],
    as_format: str,
    transcript_path: str | None = None,
    *,
    session: SessionEvent | None = None,
) -> Iterator[bytes]:
    """The effective context as JSONL: canonical messages, or OpenAI Chat Completions ones.

    Canonical output starts with ``session``, the log's session event, when there is one:
    its model, session id and context window stay with the context (``inspect`` and ``eval``
    of the file then count and size it as the original's). OpenAI messages have no place
    for it.

    This is what a resuming agent is given, so a summary is framed for it
    (:func:`~compactctl.summarize.summary_format.resume_text`: the session continues from a
    compacted conversation, the full transcript is at ``transcript_path``), never a bare
    user message starting with ``<analysis>``.

    With ``openai``, tool results and tool calls left unpaired by the *input* (replay never
    splits a tool block, but a transcript may already hold an orphan) are left out, since
    the Chat Completions API rejects the whole request for one; ``inspect`` reports them
    as findings.

    Raises:
        UsageError: an unknown ``as_format``.
    """
    if as_format not in ("canonical", "openai"):
        raise UsageError(f"unknown --as {as_format!r}; use canonical or openai")
    view = framed(view, transcript_path)
    if as_format == "canonical":
        return dump_events([session, *view] if session is not None else view)
    if as_format == "openai":
        return (dumps(msg) + b"\n" for msg in openai_messages(view))
    raise UsageError(f"unknown --as {as_format!r}; use canonical or openai")


def framed(view: list[Message], transcript_path: str | None) -> list[Message]:
    """``view`` as :func:`materialized_lines` writes it: each summary message (``summaryOf``)
    framed for the agent that resumes from it (:func:`~compactctl.summarize.summary_format.
    resume_text`), the other messages as they are."""
    return [_framed(m, transcript_path) if "summaryOf" in m.data else m for m in view]


def _framed(m: Message, transcript_path: str | None) -> Message:
    from compactctl.summarize.summary_format import resume_text

    framed = m.evolve(content=resume_text(m.text, transcript_path))
    assert isinstance(framed, Message)
    return framed


def openai_messages(view: list[Message]) -> list[dict[str, Any]]:
    """The effective context as OpenAI Chat Completions messages that the API accepts.

    Each ``tool`` message must answer a ``tool_calls`` id of an earlier assistant message,
    and each such id must be answered, or the API rejects the request (HTTP 400). A tool
    result with no earlier call is left out; a call with no result is taken out of its
    assistant message (the message stays, ``tool_calls`` dropped if none remain).

    >>> view = [Message({"role": "tool", "toolCallId": "x", "content": "orphan"}),
    ...         Message({"role": "assistant", "content": "ok", "toolCalls": [
    ...             {"id": "c1", "name": "a", "arguments": {}},
    ...             {"id": "c2", "name": "b", "arguments": {}}]}),
    ...         Message({"role": "tool", "toolCallId": "c1", "content": "done"})]
    >>> [(m["role"], [c["id"] for c in m.get("tool_calls", [])]) for m in openai_messages(view)]
    [('assistant', ['c1']), ('tool', [])]
    """
    called: set[str] = set()
    answered: set[str] = set()
    for m in view:
        if m.role == "assistant":
            called.update(c["id"] for c in m.tool_calls if isinstance(c.get("id"), str))
        elif m.role == "tool":
            cid = m.tool_call_id
            if cid is not None and cid in called:
                answered.add(cid)
    out: list[dict[str, Any]] = []
    for m in view:
        if m.role == "tool" and m.tool_call_id not in answered:
            continue
        msg = to_openai(m.data)
        calls = msg.get("tool_calls")
        if calls is not None:
            kept = [c for c in calls if c.get("id") in answered]
            if kept:
                msg["tool_calls"] = kept
            else:
                del msg["tool_calls"]
                if msg.get("content") is None:
                    msg["content"] = ""
        out.append(msg)
    return out


def to_openai(data: Mapping[str, Any]) -> dict[str, Any]:
    """A canonical message as an OpenAI Chat Completions message.

    >>> to_openai({"role": "assistant", "content": "", "toolCalls": [
    ...     {"id": "c1", "name": "bash", "arguments": {"command": "ls"}}]})["tool_calls"][0]
    {'id': 'c1', 'type': 'function', 'function': {'name': 'bash', 'arguments': '{"command":"ls"}'}}
    """
    role = data.get("role")
    content = data.get("content")
    if isinstance(content, list):
        parts = []
        for p in content:
            if not isinstance(p, dict):
                continue
            if p.get("type") == "text":
                parts.append({"type": "text", "text": p.get("text", "")})
            elif p.get("type") == "image" and isinstance(p.get("data"), str):
                url = f"data:{p.get('mediaType', 'image/png')};base64,{p['data']}"
                parts.append({"type": "image_url", "image_url": {"url": url}})
        content = parts
    msg: dict[str, Any] = {"role": role, "content": content}
    calls = data.get("toolCalls")
    if role == "assistant" and isinstance(calls, list) and calls:
        msg["tool_calls"] = [
            {
                "id": c.get("id"),
                "type": "function",
                "function": {
                    "name": c.get("name"),
                    "arguments": c["arguments"]
                    if isinstance(c.get("arguments"), str)
                    else dumps(c.get("arguments", {})).decode(),
                },
            }
            for c in calls
            if isinstance(c, dict)
        ]
        if not content:
            msg["content"] = None
    if role == "tool":
        msg["tool_call_id"] = data.get("toolCallId")
        if data.get("toolName"):
            msg["name"] = data["toolName"]
    return msg
