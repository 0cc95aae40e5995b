"""compactctl's own format (docs/design.md section 3): recognised, and passed through unchanged.

Registered as ``canonical`` so callers can treat every input alike: its ``to_canonical``
yields the records it is given, untouched (no ``sourceLine`` is added: the line number of a
canonical event is simply its line).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

CANONICAL_TYPES = frozenset(("message", "session", "compact", "summary", "revert"))
"""The event types of compactctl JSONL version 1 (docs/design.md section 3)."""
CAMEL_KEYS = frozenset(
    {
        "turnId",
        "toolCalls",
        "toolCallId",
        "toolName",
        "sessionId",
        "contextWindow",
        "summaryText",
        "lastSummarizedTurnId",
        "startTurnId",
        "endTurnId",
        "replaces",
        "targets",
    }
)


def looks_canonical(record: dict[str, Any]) -> bool:
    """True for a record of compactctl JSONL version 1.

    It has a ``type`` in message/session/compact/summary/revert and a camelCase canonical field
    (``turnId``, ``toolCalls``, ``summaryText``, ...) or, for messages, a ``role``; records of
    other formats that reuse these type names (Claude Code's title ``summary`` lines, with
    ``leafUuid``) do not qualify.

    >>> looks_canonical({"type": "message", "uuid": "m1", "role": "user", "turnId": 1})
    True
    >>> looks_canonical({"type": "summary", "summary": "Title", "leafUuid": "x"})
    False
    """
    kind = record.get("type")
    if kind not in CANONICAL_TYPES or "payload" in record or "leafUuid" in record:
        return False
    if kind == "message" and "role" in record:
        return True
    return any(key in record for key in CAMEL_KEYS)


def to_canonical(records: Iterable[tuple[int, dict[str, Any]]]) -> Iterator[dict[str, Any]]:
    """Yield the records unchanged (they already are canonical events)."""
    for _, record in records:
        yield record
