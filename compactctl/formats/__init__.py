"""Importers from agent transcript formats to canonical event dicts (docs/formats.md).

Every importer works on plain dicts, with no dependency on the rest of compactctl:

- line formats: ``to_canonical(records)`` takes ``(line_number, parsed_record)`` pairs and
  yields canonical event dicts, each with ``sourceLine`` (the line it came from);
- whole-document formats: ``document_to_canonical(doc)`` takes the parsed JSON document and
  yields canonical event dicts with ``sourceIndex`` (position in the document's list).

Canonical output: a ``session`` event first when the source names a session or model;
``message`` events (``uuid``, ``turnId``, ``role``, ``content``, ``toolCalls``,
``toolCallId``, ``toolName``, ``isError``, ``timestamp``); ``summary`` events for the agent's
own compaction (``replaces``, ``summaryText``, ``lastSummarizedTurnId``, ``model`` = the
format name, ``triggerMode``); and ``foreign`` events (``sourceType`` = the source record
type, no payload) for records that are not conversation (replay ignores them).

Conventions shared by all importers:

- a turn starts at each real user message; tool results, compaction summaries and injected
  context do not start turns. Injected context keeps role ``user`` with ``isMeta: true``
  (Claude Code ``isMeta``/``<system-reminder>``, SWE-agent observations and demos), except
  Codex's ``<environment_context>``/AGENTS.md/developer items, which become ``system``
  (docs/formats.md section 7). System messages before the first prompt are turn 0; an assistant
  or tool message before any prompt opens turn 1.
- opaque content (thinking, redacted thinking, reasoning, encrypted blobs, documents) is
  kept as non-text parts (``{"type": "thinking", ...}``, ``{"type": "reasoning", ...}``),
  never as text; images become ``{"type": "image", "mediaType", "data"}`` parts.
- source ids are kept as ``uuid`` when there are any; otherwise ids are uuid5 values of the
  source position, so importing the same file twice gives the same ids.
- duplicated payloads are not copied: Claude ``toolUseResult`` is measured into
  ``duplicateBytes`` on its tool message.

>>> sorted(FORMATS) == sorted(known_formats())
True
>>> detect([{"role": "user", "content": "hi"}])
'openai-chat'
>>> detect([{"hello": 1}]) is None
True
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from compactctl.formats import (
    canonical,
    claude_code,
    claude_stream,
    codex_exec,
    codex_rollout,
    openai_chat,
    openhands,
    swe_agent,
)

__all__ = [
    "FORMATS",
    "DocumentImporter",
    "Format",
    "LineImporter",
    "detect",
    "detect_document",
    "known_formats",
]

LineImporter = Callable[[Iterable[tuple[int, dict[str, Any]]]], Iterator[dict[str, Any]]]
"""``to_canonical``: ``(line_number, record)`` pairs -> canonical event dicts."""

DocumentImporter = Callable[[Any], Iterator[dict[str, Any]]]
"""``document_to_canonical``: a parsed JSON document -> canonical event dicts."""


@dataclass(frozen=True)
class Format:
    """One supported transcript format.

    Attributes:
        name: the registry key (``--format`` value), e.g. ``"claude-code"``.
        description: one line for ``--help`` and error messages.
        reference: where the format is described (a section of docs/formats.md or
            docs/design.md).
        to_canonical: the line importer, or ``None`` for whole-document-only formats.
        document_to_canonical: the whole-document importer, or ``None``.
    """

    name: str
    description: str
    reference: str
    to_canonical: LineImporter | None = None
    document_to_canonical: DocumentImporter | None = None


FORMATS: dict[str, Format] = {
    f.name: f
    for f in (
        Format(
            "canonical",
            "compactctl JSONL version 1 (passed through unchanged)",
            "docs/design.md section 3",
            canonical.to_canonical,
        ),
        Format(
            "claude-code",
            "Claude Code session file (~/.claude/projects/*/<session>.jsonl)",
            "docs/formats.md section 1",
            claude_code.to_canonical,
        ),
        Format(
            "claude-stream",
            "claude -p --output-format stream-json",
            "docs/formats.md section 2",
            claude_stream.to_canonical,
        ),
        Format(
            "codex-rollout",
            "Codex CLI rollout file (~/.codex/sessions/**/rollout-*.jsonl)",
            "docs/formats.md section 3",
            codex_rollout.to_canonical,
        ),
        Format(
            "codex-exec",
            "codex exec --json event stream",
            "docs/formats.md section 4",
            codex_exec.to_canonical,
        ),
        Format(
            "openai-chat",
            "OpenAI chat messages, one per line (or a JSON array / {messages})",
            "docs/formats.md section 5",
            openai_chat.to_canonical,
            openai_chat.document_to_canonical,
        ),
        Format(
            "openhands",
            "OpenHands V0 event list (JSON array, or an eval record with history)",
            "docs/formats.md section 6",
            None,
            openhands.document_to_canonical,
        ),
        Format(
            "swe-agent",
            "SWE-agent .traj (or mini-swe-agent .traj.json)",
            "docs/formats.md section 6",
            None,
            swe_agent.document_to_canonical,
        ),
    )
}
"""The registry: format name -> :class:`Format`, in detection priority order."""


def known_formats() -> list[str]:
    """Names of every registered format, for ``--format`` choices and error messages."""
    return list(FORMATS)


CODEX_TYPES = frozenset(
    {"session_meta", "turn_context", "response_item", "event_msg", "compacted", "world_state"}
)
EXEC_TYPES = frozenset(
    {
        "thread.started",
        "turn.started",
        "turn.completed",
        "turn.failed",
        "item.started",
        "item.updated",
        "item.completed",
    }
)
STREAM_TYPES = frozenset(
    {"system", "user", "assistant", "result", "rate_limit_event", "stream_event"}
)
CLAUDE_CONVERSATION = frozenset({"user", "assistant", "system", "attachment", "progress"})
CLAUDE_METADATA = frozenset(
    {
        "file-history-snapshot",
        "queue-operation",
        "last-prompt",
        "custom-title",
        "ai-title",
        "permission-mode",
        "pr-link",
    }
)
CHAT_ROLES = frozenset({"system", "developer", "user", "assistant", "tool", "function"})


def classify(record: dict[str, Any]) -> str | None:
    """The format one parsed record most likely belongs to, or ``None``.

    >>> classify({"timestamp": "t", "type": "session_meta", "payload": {}})
    'codex-rollout'
    >>> classify({"type": "item.completed", "item": {}})
    'codex-exec'
    """
    kind = record.get("type")
    if isinstance(kind, str):
        if kind in CODEX_TYPES and "payload" in record:
            return "codex-rollout"
        if kind in EXEC_TYPES:
            return "codex-exec"
        if canonical.looks_canonical(record) and (
            kind != "message" or "uuid" in record or "turnId" in record
        ):
            return "canonical"
        if kind in STREAM_TYPES and ("session_id" in record or "parent_tool_use_id" in record):
            return "claude-stream"
        if (
            kind in CLAUDE_METADATA
            or "parentUuid" in record
            or (kind in CLAUDE_CONVERSATION and ("sessionId" in record or "isSidechain" in record))
            or (kind == "summary" and "leafUuid" in record)
        ):
            return "claude-code"
        return None
    if kind is None:
        if record.get("role") in CHAT_ROLES:
            return "openai-chat"
        messages = record.get("messages")
        if (
            isinstance(messages, list)
            and messages
            and isinstance(messages[0], dict)
            and messages[0].get("role") in CHAT_ROLES
        ):
            return "openai-chat"
    return None


def detect(first_records: Sequence[dict[str, Any]]) -> str | None:
    """The line format of a file from its first parsed records (about 20 are enough).

    Each record votes with :func:`classify`; the format with most votes wins (ties go to the
    earlier format in :data:`FORMATS`), except that Claude Code metadata records do not
    outvote canonical records (a canonical file keeps them as OtherEvents). ``None`` when
    no record is recognised.
    """
    votes: Counter[str] = Counter()
    claude_metadata_only = 0  # claude-code votes from metadata records alone
    for record in list(first_records)[:50]:
        if isinstance(record, dict):
            name = classify(record)
            if name is not None:
                votes[name] += 1
                if name == "claude-code" and record.get("type") in CLAUDE_METADATA:
                    claude_metadata_only += 1
    if votes["canonical"] and votes["claude-code"] == claude_metadata_only:
        # Claude Code metadata records (file-history-snapshot, ...) kept as OtherEvents in a
        # canonical file are no evidence of a Claude Code file: with no Claude Code
        # conversation record beside canonical ones, the file is canonical.
        del votes["claude-code"]
    if not votes:
        return None
    best = max(votes.values())
    return next(name for name in FORMATS if votes.get(name) == best)


def detect_document(doc: Any) -> str | None:
    """The format of a whole JSON document, or ``None``.

    ``swe-agent`` (``trajectory``/``history``/``info``, or mini-swe-agent ``messages`` with
    ``trajectory_format``), ``openhands`` (events with ``action``/``observation``, as an
    array or an eval record's ``history``), ``openai-chat`` (``{"messages": [...]}``).
    A JSON array of records of a line format gives that format's name; feed it to its
    ``to_canonical`` as ``enumerate(doc, 1)``.

    >>> detect_document({"history": [{"role": "user", "content": "x"}], "trajectory": []})
    'swe-agent'
    >>> detect_document([{"id": 0, "source": "user", "action": "message", "args": {}}])
    'openhands'
    """
    if swe_agent.messages_of(doc) is not None:
        return "swe-agent"
    if openhands.events_of(doc) is not None:
        return "openhands"
    if isinstance(doc, dict):
        if classify(doc) == "openai-chat":
            return "openai-chat"
        return None
    if isinstance(doc, list):
        return detect([r for r in doc[:50] if isinstance(r, dict)])
    return None
