"""Kimi CLI session context (``~/.kimi/sessions/<work dir hash>/<session>/context.jsonl``) ->
canonical.

Source: the public descriptions of the file (Kimi CLI's ``wiki/context-management.md``): one
JSON object per line, chat messages ``{"role": "user"|"assistant"|"tool", "content",
"tool_calls", "tool_call_id"}`` in the OpenAI Chat shape (content a string or parts: ``text``,
``think`` for the model's reasoning, ``image_url``), and bookkeeping records whose role starts
with ``_``: ``{"role": "_checkpoint", "id": N}`` (a restore point) and ``{"role": "_usage",
"token_count": N}`` (the context's size so far). No Kimi CLI ran here, so the fixture is built
from that description (``fixtures/formats/kimi-cli-described.jsonl``).

Mapping: messages through :class:`~compactctl.formats.openai_chat.ChatConverter` (``think``
parts become opaque ``{"type": "reasoning", "text"}`` parts); ``_checkpoint``/``_usage`` and
other ``_`` records -> ``foreign`` (``checkpoint``/``tokenCount`` kept).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from compactctl.formats._common import JSON, foreign, stable_uuid
from compactctl.formats.openai_chat import ChatConverter

SOURCE = "kimi-cli"


def is_bookkeeping(record: dict[str, Any]) -> bool:
    """A ``_checkpoint``/``_usage`` record (a role starting with ``_``, no ``content``)."""
    role = record.get("role")
    return isinstance(role, str) and role.startswith("_") and "content" not in record


def _reasoning(message: JSON) -> JSON:
    content = message.get("content")
    if not isinstance(content, list):
        return message
    parts = [
        {"type": "reasoning", "text": p.get("think")}
        if isinstance(p, dict) and p.get("type") == "think"
        else p
        for p in content
    ]
    return {**message, "content": parts}


def to_canonical(records: Iterable[tuple[int, dict[str, Any]]]) -> Iterator[dict[str, Any]]:
    """Convert a Kimi CLI ``context.jsonl`` (see the module docstring)."""
    conv = ChatConverter(SOURCE)
    for line, rec in records:
        if not isinstance(rec, dict):
            continue
        if is_bookkeeping(rec) or "role" not in rec:
            kind = str(rec.get("role") or rec.get("type") or "record").lstrip("_")
            yield foreign(
                kind,
                stable_uuid(SOURCE, line),
                line,
                checkpoint=rec.get("id"),
                tokenCount=rec.get("token_count"),
            )
        else:
            yield conv.convert(_reasoning(rec), line)
