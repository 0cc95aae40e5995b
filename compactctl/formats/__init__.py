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

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from compactctl.formats import (
    aider,
    anthropic_messages,
    canonical,
    claude_code,
    claude_stream,
    codex_exec,
    codex_rollout,
    copilot_cli,
    cursor_agent,
    droid,
    gemini_cli,
    kimi_cli,
    openai_chat,
    opencode,
    openhands,
    swe_agent,
)
from compactctl.formats.detection import SCORERS, STRONG, WEAK, Detection, examine

__all__ = [
    "FORMATS",
    "DocumentImporter",
    "Format",
    "LineImporter",
    "TextImporter",
    "detect",
    "detect_document",
    "examine",
    "examine_document",
    "known_formats",
]

LineImporter = Callable[[Iterable[tuple[int, dict[str, Any]]]], Iterator[dict[str, Any]]]
"""``to_canonical``: ``(line_number, record)`` pairs -> canonical event dicts."""

DocumentImporter = Callable[[Any], Iterator[dict[str, Any]]]
"""``document_to_canonical``: a parsed JSON document -> canonical event dicts."""

TextImporter = Callable[[str], Iterator[dict[str, Any]]]
"""``text_to_canonical``: a whole text transcript (Aider's markdown) -> canonical event dicts."""


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
        text_to_canonical: the importer of a text (not JSON) transcript, or ``None``.
    """

    name: str
    description: str
    reference: str
    to_canonical: LineImporter | None = None
    document_to_canonical: DocumentImporter | None = None
    text_to_canonical: TextImporter | None = None


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
            "anthropic-messages",
            "Anthropic Messages API messages (Cline / Roo Code api_conversation_history.json)",
            "compactctl/formats/anthropic_messages.py",
            anthropic_messages.to_canonical,
            anthropic_messages.document_to_canonical,
        ),
        Format(
            "gemini-cli",
            "Gemini CLI chat recording (chats/session-*.json, or the JSONL upsert log)",
            "docs/formats.md section 6",
            gemini_cli.to_canonical,
            gemini_cli.document_to_canonical,
        ),
        Format(
            "qwen-code",
            "Qwen Code chat log (~/.qwen/projects/*/chats/<session>.jsonl)",
            "compactctl/formats/gemini_cli.py",
            gemini_cli.qwen_to_canonical,
        ),
        Format(
            "cursor-agent",
            "Cursor agent transcript (~/.cursor/projects/*/agent-transcripts/*.jsonl)",
            "docs/formats.md section 6",
            cursor_agent.to_canonical,
        ),
        Format(
            "copilot-cli",
            "GitHub Copilot CLI session events (~/.copilot/session-state/*/events.jsonl)",
            "docs/formats.md section 6",
            copilot_cli.to_canonical,
        ),
        Format(
            "droid",
            "Factory Droid: droid exec --output-format stream-json",
            "docs/formats.md section 6",
            droid.to_canonical,
        ),
        Format(
            "kimi-cli",
            "Kimi CLI session context (~/.kimi/sessions/*/*/context.jsonl)",
            "docs/formats.md section 6",
            kimi_cli.to_canonical,
        ),
        Format(
            "opencode",
            "opencode session export (opencode export ID: {info, messages: [{info, parts}]})",
            "docs/formats.md section 6",
            None,
            opencode.document_to_canonical,
        ),
        Format(
            "aider",
            "Aider markdown chat history (.aider.chat.history.md)",
            "docs/formats.md section 6",
            None,
            None,
            aider.text_to_canonical,
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


def classify(record: dict[str, Any]) -> str | None:
    """The format one parsed record is strong evidence of, or ``None`` (the first such
    format in :data:`compactctl.formats.detection.SCORERS` order).

    >>> classify({"timestamp": "t", "type": "session_meta", "payload": {}})
    'codex-rollout'
    >>> classify({"type": "item.completed", "item": {}})
    'codex-exec'
    """
    return next(
        (name for name, score in SCORERS.items() if score(record) == STRONG),
        next((name for name, score in SCORERS.items() if score(record) == WEAK), None),
    )


def detect(first_records: Sequence[dict[str, Any]]) -> str | None:
    """The line format of a file from its first parsed records (about 20 are enough), or
    ``None`` when no format has the evidence (see :func:`compactctl.formats.detection.examine`:
    a refusal says what the file looks like)."""
    return examine(first_records).name


def detect_document(doc: Any) -> str | None:
    """The format of a whole JSON document, or ``None`` (see :func:`examine_document`).

    >>> detect_document({"history": [{"role": "user", "content": "x"}], "trajectory": []})
    'swe-agent'
    >>> detect_document([{"id": 0, "source": "user", "action": "message", "args": {}}])
    'openhands'
    """
    return examine_document(doc).name


def examine_document(doc: Any) -> Detection:
    """Decide the format of a whole JSON document, by evidence.

    ``swe-agent`` (``trajectory``/``history``/``info``, a history-only trajectory whose
    ``history`` holds OpenAI chat messages, or mini-swe-agent ``messages`` with
    ``trajectory_format``), ``openhands`` (events with ``action``/``observation``, as an array
    or an eval record's ``history``), ``gemini-cli`` (``{sessionId, messages}`` of Gemini
    message records), ``anthropic-messages`` and ``openai-chat`` (an array of messages, or
    ``{"messages": [...]}``, whose content has that API's shape). A JSON array of records of a
    line format gives that format's name; feed it to its ``to_canonical`` as
    ``enumerate(doc, 1)``. Anything else: a :class:`Detection` without a name whose message
    says what the document looks like.

    >>> examine_document({"title": "notes", "items": [1, 2]}).shape
    'a JSON object with keys: title, items'
    """
    if opencode.messages_of(doc) is not None:  # before swe-agent: both have ``messages``
        return Detection("opencode")
    if swe_agent.messages_of(doc) is not None:
        return Detection("swe-agent")
    if openhands.events_of(doc) is not None:
        return Detection("openhands")
    if gemini_cli.is_chat_document(doc):
        return Detection("gemini-cli")
    if anthropic_messages.messages_of(doc) is not None:
        return Detection("anthropic-messages")
    if isinstance(doc, dict):
        if SCORERS["openai-chat"](doc) == STRONG:
            return Detection("openai-chat")
        messages = doc.get("messages")
        if isinstance(messages, list):
            found = examine(messages)
            return Detection(
                None, found.evidence, "a JSON object whose messages are " + (found.shape), "unknown"
            )
        keys = ", ".join(str(k) for k in list(doc)[:12])
        return Detection(None, [], f"a JSON object with keys: {keys}", "unknown")
    if isinstance(doc, list):
        found = examine(doc)
        if found.name is None:
            return Detection(None, found.evidence, "a JSON array: " + found.shape, found.reason)
        return found
    return Detection(None, [], f"a JSON {type(doc).__name__}", "unknown")
