"""Detection by evidence: which reader, if any, may read a file (issue 17, docs/formats.md).

Every line format has a scorer that rates one parsed record:

- :data:`STRONG` (2): a record only that format writes (a Claude Code ``user`` line with
  ``parentUuid``, a Codex ``response_item`` with ``payload``, an OpenAI chat message whose
  content has the OpenAI shape, ...);
- :data:`WEAK` (1): a record the format writes but that proves little alone (Claude Code
  metadata such as ``file-history-snapshot``, a canonical ``foreign`` record);
- :data:`FITS` (0): a record the reader would keep without understanding it (an unknown record
  type of a format that keeps unknown types);
- ``None``: a record the format never writes.

A format is a *candidate* when at least one record is strong or weak evidence for it and at
most :data:`MAX_STRAY` of the records examined are ``None`` for it (its reader would drop or
misread them). The best candidate wins; a second candidate with as much strong evidence
makes the file ambiguous. No candidate, or an ambiguous file, is a refusal: :func:`examine`
returns a :class:`Detection` without a name, whose :meth:`Detection.message` says what the
file looks like and which formats came closest (the caller raises ``InputError``, exit 3).

Why: one record's vote used to decide a file, so a file of an unknown format that shares a key
with a known one (``role``, ``type: "system"`` with ``session_id``, ``uuid``) was read with
exit 0 and its content lost (issue 17 lists Cursor, Cline, Factory Droid, Qwen Code and
Anthropic managed-agent logs read that way).

>>> examine([{"role": "user", "content": "hi"}]).name
'openai-chat'
>>> examine([{"role": "user", "message": {"content": [{"type": "text", "text": "hi"}]}}]).name
'cursor-agent'
>>> d = examine([{"role": "user", "content": {"text": "hi"}}])  # dict content: no reader's
>>> d.name is None
True
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from compactctl.formats import canonical

__all__ = [
    "MAX_STRAY",
    "SCORERS",
    "STRONG",
    "WEAK",
    "Detection",
    "Evidence",
    "claimant",
    "describe",
    "examine",
    "first_foreign_record",
    "record_shape",
]

STRONG = 2
WEAK = 1
FITS = 0
MAX_STRAY = 0.2
"""At most this share of the records examined may be records a format never writes."""

Score = int | None
Scorer = Callable[[dict[str, Any]], Score]

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
        "error",
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
        "mode",
        "pr-link",
        "summary",
    }
)
CHAT_ROLES = frozenset({"system", "developer", "user", "assistant", "tool", "function"})
OPENAI_PARTS = frozenset(
    {"text", "input_text", "output_text", "image_url", "input_image", "refusal", "input_audio"}
)
ANTHROPIC_BLOCKS = frozenset(
    {
        "text",
        "image",
        "document",
        "tool_use",
        "tool_result",
        "thinking",
        "redacted_thinking",
        "server_tool_use",
        "web_search_tool_result",
    }
)
ANTHROPIC_MESSAGE_KEYS = frozenset(
    {
        "role",
        "content",
        "ts",
        "id",
        "model",
        "stop_reason",
        "usage",
        # Roo Code's additions (ApiMessage in its task-persistence/apiMessages.ts)
        "messageId",
        "isSummary",
        "condenseId",
        "condenseParent",
        "truncationId",
        "truncationParent",
        "isTruncationMarker",
        "reasoning_details",
        "reasoning_content",
    }
)
GEMINI_TYPES = frozenset({"user", "gemini", "info", "error", "warning"})


def _type(record: dict[str, Any]) -> str | None:
    kind = record.get("type")
    return kind if isinstance(kind, str) else None


def _claude_message_ok(record: dict[str, Any]) -> bool:
    """A Claude ``user``/``assistant`` line carries ``message.content`` (a string or blocks),
    never Gemini ``parts`` (Qwen Code writes those in the same envelope)."""
    message = record.get("message")
    if not isinstance(message, dict) or "parts" in message:
        return False
    content = message.get("content")
    return isinstance(content, (str, list))


def score_claude_code(record: dict[str, Any]) -> Score:
    """Claude Code session file (docs/formats.md section 1)."""
    kind = _type(record)
    if not isinstance(kind, str) or "role" in record or "payload" in record:
        return None
    tied = "sessionId" in record or "parentUuid" in record or "isSidechain" in record
    if kind in ("user", "assistant"):
        if not _claude_message_ok(record):
            return None
        return STRONG if tied else None
    if kind in CLAUDE_CONVERSATION:
        return STRONG if tied else None
    if kind == "summary":
        return WEAK if "leafUuid" in record else None
    if kind in CLAUDE_METADATA:
        return WEAK
    if tied or "uuid" in record:
        return FITS  # a record type newer than this reader: kept as foreign
    return None


def score_claude_stream(record: dict[str, Any]) -> Score:
    """``claude -p --output-format stream-json`` (docs/formats.md section 2)."""
    kind = _type(record)
    if kind not in STREAM_TYPES or "role" in record:
        return None
    if kind in ("user", "assistant") and not _claude_message_ok(record):
        return None
    if "session_id" in record or "parent_tool_use_id" in record:
        return STRONG
    return FITS


def score_codex_rollout(record: dict[str, Any]) -> Score:
    """Codex rollout file (docs/formats.md section 3)."""
    kind = _type(record)
    if isinstance(kind, str) and "payload" in record and "timestamp" in record:
        return STRONG if kind in CODEX_TYPES else FITS
    return None


def score_codex_exec(record: dict[str, Any]) -> Score:
    """``codex exec --json`` (docs/formats.md section 4)."""
    kind = _type(record)
    if kind is None or kind not in EXEC_TYPES or "role" in record:
        return None
    if kind.startswith("item.") and not isinstance(record.get("item"), dict):
        return None
    return STRONG if kind != "error" else FITS


def score_canonical(record: dict[str, Any]) -> Score:
    """compactctl JSONL version 1 (docs/design.md section 3)."""
    kind = _type(record)
    if not isinstance(kind, str):
        return None
    if canonical.looks_canonical(record) and (
        kind != "message" or "uuid" in record or "turnId" in record
    ):
        return STRONG
    if kind == "foreign" or kind in CLAUDE_METADATA or kind in canonical.CANONICAL_TYPES:
        return FITS  # kept as OtherEvents, or a canonical event with few fields
    if isinstance(record.get("uuid"), str):
        return FITS  # an unknown type: kept verbatim, ignored by replay (docs/design.md 3)
    return None


def _openai_content_ok(content: Any) -> bool:
    if content is None or isinstance(content, str):
        return True
    if not isinstance(content, list):
        return False
    for part in content:
        if isinstance(part, str):
            continue
        if not isinstance(part, dict) or _type(part) not in OPENAI_PARTS:
            return False
    return True


def _chat_message_ok(record: dict[str, Any]) -> bool:
    return (
        record.get("role") in CHAT_ROLES
        and "message" not in record
        and "parts" not in record
        and ("content" in record or "tool_calls" in record or "function_call" in record)
        and _openai_content_ok(record.get("content"))
    )


def score_openai_chat(record: dict[str, Any]) -> Score:
    """OpenAI Chat Completions messages (docs/formats.md section 5): a message with an
    OpenAI-shaped ``content`` (a string, ``null`` or OpenAI parts), or one conversation per
    line (``{"messages": [...]}`` of such messages)."""
    if "type" in record:
        return None
    if "role" in record:
        return STRONG if _chat_message_ok(record) else None
    messages = record.get("messages")
    if (
        isinstance(messages, list)
        and messages
        and all(isinstance(m, dict) and _chat_message_ok(m) for m in messages)
    ):
        return STRONG
    return None


def _anthropic_content_ok(content: Any) -> bool | None:
    """True: Anthropic blocks with at least one that OpenAI never writes; False: not
    Anthropic; None: a plain string (either API)."""
    if isinstance(content, str):
        return None
    if not isinstance(content, list) or not content:
        return False
    kinds = [_type(p) if isinstance(p, dict) else None for p in content]
    return all(k in ANTHROPIC_BLOCKS for k in kinds)


def score_anthropic_messages(record: dict[str, Any]) -> Score:
    """Anthropic Messages API messages (``{role, content}`` with content blocks), as Cline and
    Roo Code keep them in ``api_conversation_history.json``."""
    if record.get("type") == "reasoning" and "role" not in record:
        return FITS  # Roo Code keeps reasoning items between messages
    if "type" in record or record.get("role") not in ("user", "assistant"):
        return None
    if set(record) - ANTHROPIC_MESSAGE_KEYS:
        return None
    shaped = _anthropic_content_ok(record.get("content"))
    if shaped is None:
        return FITS
    return STRONG if shaped else None


def score_gemini_cli(record: dict[str, Any]) -> Score:
    """Gemini CLI JSONL chat recording (docs/formats.md section 6): the session header, message
    records (``id`` + ``type`` user/gemini/info/error), ``$set`` and ``$rewindTo`` lines."""
    if "$rewindTo" in record or "$set" in record:
        return STRONG
    kind = _type(record)
    if kind in GEMINI_TYPES and "id" in record and "content" in record and "role" not in record:
        return STRONG if "message" not in record and "parentUuid" not in record else None
    if "sessionId" in record and "projectHash" in record and "type" not in record:
        return STRONG
    return None


def score_qwen_code(record: dict[str, Any]) -> Score:
    """Qwen Code chat recording: Claude-like envelopes (``uuid``, ``parentUuid``,
    ``sessionId``, ``type``) around Gemini ``message.parts``."""
    kind = _type(record)
    if not isinstance(kind, str) or "sessionId" not in record or "uuid" not in record:
        return None
    message = record.get("message")
    if isinstance(message, dict) and isinstance(message.get("parts"), list):
        return STRONG
    if kind in ("system", "tool_result", "user", "assistant") and "message" not in record:
        return FITS
    return None


CURSOR_BLOCKS = frozenset({"text", "tool_use", "tool_result", "thinking", "image"})


def score_cursor_agent(record: dict[str, Any]) -> Score:
    """Cursor agent transcript: ``{role, message: {content: [blocks]}}`` and nothing else."""
    if set(record) != {"role", "message"} or record.get("role") not in ("user", "assistant"):
        return None
    content = _dict(record.get("message")).get("content")
    if not isinstance(content, list) or not content:
        return None
    if all(isinstance(b, dict) and _type(b) in CURSOR_BLOCKS for b in content):
        return STRONG
    return None


def score_copilot_cli(record: dict[str, Any]) -> Score:
    """GitHub Copilot CLI ``events.jsonl``: ``{type, data, id, timestamp, parentId}``."""
    from compactctl.formats.copilot_cli import TYPES, is_envelope

    if not is_envelope(record):
        return None
    return STRONG if record["type"] in TYPES else FITS


def score_droid(record: dict[str, Any]) -> Score:
    """Factory Droid stream-json: ``message``/``tool_call``/``tool_result`` records with
    ``session_id`` (its ``system`` line alone is weak: Claude stream-json opens the same way)."""
    from compactctl.formats.droid import TYPES

    kind = _type(record)
    if kind not in TYPES or "session_id" not in record:
        return None
    if kind == "message":
        return STRONG if record.get("role") in ("user", "assistant") and "text" in record else None
    if kind in ("tool_call", "tool_result"):
        return STRONG if "id" in record and ("toolName" in record or "toolId" in record) else None
    if kind == "completion":
        return STRONG if "finalText" in record or "numTurns" in record else FITS
    return WEAK  # system


def score_kimi_cli(record: dict[str, Any]) -> Score:
    """Kimi CLI ``context.jsonl``: ``_checkpoint``/``_usage`` records are strong evidence;
    chat messages (``think`` parts allowed) fit."""
    role = record.get("role")
    if role in ("_checkpoint", "_usage") and "content" not in record:
        return STRONG
    if "type" in record or role not in CHAT_ROLES or "message" in record:
        return None
    content = record.get("content")
    if isinstance(content, list):
        content = [p for p in content if not (isinstance(p, dict) and _type(p) == "think")]
    return FITS if _openai_content_ok(content) else None


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


SCORERS: dict[str, Scorer] = {
    "canonical": score_canonical,
    "claude-code": score_claude_code,
    "claude-stream": score_claude_stream,
    "codex-rollout": score_codex_rollout,
    "codex-exec": score_codex_exec,
    "openai-chat": score_openai_chat,
    "anthropic-messages": score_anthropic_messages,
    "gemini-cli": score_gemini_cli,
    "qwen-code": score_qwen_code,
    "cursor-agent": score_cursor_agent,
    "copilot-cli": score_copilot_cli,
    "droid": score_droid,
    "kimi-cli": score_kimi_cli,
}
"""Line format name -> its record scorer, in detection priority order (ties go first)."""


@dataclass(frozen=True)
class Evidence:
    """What the records examined say for one format.

    Attributes:
        name: the format.
        strong: records only this format writes (:data:`STRONG`).
        weak: records this format writes that prove little alone (:data:`WEAK`).
        fits: records its reader keeps without understanding them.
        stray: records this format never writes (its reader would drop or misread them).
    """

    name: str
    strong: int
    weak: int
    fits: int
    stray: int

    @property
    def total(self) -> int:
        """Records examined."""
        return self.strong + self.weak + self.fits + self.stray

    @property
    def candidate(self) -> bool:
        """Some evidence, and at most :data:`MAX_STRAY` of the records stray (one stray
        record is tolerated beside two strong ones, for short files)."""
        allowed = max(MAX_STRAY * self.total, 1 if self.strong >= 2 else 0)
        return (self.strong + self.weak) > 0 and self.stray <= allowed

    def rank(self) -> tuple[int, int, int]:
        """Sort key, best first when reversed: strong, weak, then fewest strays."""
        return (self.strong, self.weak, -self.stray)


@dataclass(frozen=True)
class Detection:
    """The outcome of :func:`examine`.

    Attributes:
        name: the format to read the file with, or ``None`` (refuse).
        evidence: every format with any evidence, best first.
        shape: what the records look like (:func:`describe`).
        reason: why there is no name (``"unknown"`` or ``"ambiguous"``), or ``""``.
        hint: for a refusal, what the file is when it is a known output no reader reads and
            how to get a file compactctl reads (:func:`unread_output`), or ``""``.
    """

    name: str | None
    evidence: list[Evidence] = field(default_factory=list)
    shape: str = ""
    reason: str = ""
    hint: str = ""

    def message(self, known: Sequence[str]) -> str:
        """The refusal message: what the file looks like, the closest formats, what to do."""
        closest = [
            f"{e.name} ({e.strong + e.weak} of {e.total} records match, {e.stray} do not)"
            for e in self.evidence[:3]
        ]
        head = (
            "ambiguous transcript format"
            if self.reason == "ambiguous"
            else "unknown transcript format"
        )
        text = f"{head}: the file looks like {self.shape}"
        text += "; closest: " + ", ".join(closest) if closest else "; no known format matches"
        if self.hint:
            text += f". {self.hint}"
        return (
            f"{text}. Known formats: {', '.join(known)}. Pass --format NAME to read it as one "
            "of them anyway"
        )


def describe(records: Sequence[Any]) -> str:
    """What a file's first records look like, in a few words: how many, their ``type``
    values (or ``role`` values), and their most common keys.

    >>> describe([{"type": "message", "role": "user"}, {"type": "tool_call", "id": 1}])
    'JSON lines of 2 objects; type: message x1, tool_call x1; keys: type x2, role x1, id x1'
    """
    objects = [r for r in records if isinstance(r, dict)]
    if not objects:
        return f"JSON lines of {len(records)} values, none of them an object"
    types: Counter[str] = Counter()
    roles: Counter[str] = Counter()
    keys: Counter[str] = Counter()
    for r in objects:
        if isinstance(r.get("type"), str):
            types[r["type"]] += 1
        if isinstance(r.get("role"), str):
            roles[r["role"]] += 1
        keys.update(k for k in r if isinstance(k, str))
    parts = [f"JSON lines of {len(objects)} objects"]
    if types:
        parts.append("type: " + ", ".join(f"{k} x{n}" for k, n in types.most_common(6)))
    elif roles:
        parts.append("role: " + ", ".join(f"{k} x{n}" for k, n in roles.most_common(6)))
    parts.append("keys: " + ", ".join(f"{k} x{n}" for k, n in keys.most_common(8)))
    return "; ".join(parts)


def examine(records: Iterable[Any], limit: int = 50) -> Detection:
    """Decide the line format of a file from its first records (``limit`` of them).

    Returns:
        A :class:`Detection`: ``name`` set when exactly one format is a candidate with the
        most evidence; else ``name`` is ``None`` with ``reason`` ``"unknown"`` (no candidate)
        or ``"ambiguous"`` (two candidates with equal strong evidence and no tie-break).
    """
    head = [r for _, r in zip(range(limit), records, strict=False)]
    objects = [r for r in head if isinstance(r, dict)]
    found: list[Evidence] = []
    for name, scorer in SCORERS.items():
        scores = Counter(scorer(r) for r in objects)
        ev = Evidence(name, scores[STRONG], scores[WEAK], scores[FITS], scores[None])
        if ev.strong or ev.weak:
            found.append(ev)
    order = list(SCORERS)
    found.sort(key=lambda e: (e.rank(), -order.index(e.name)), reverse=True)
    shape = describe(head)
    candidates = [e for e in found if e.candidate]
    if not candidates:
        return Detection(None, found, shape, "unknown", unread_output(objects))
    best = candidates[0]
    rival = next((e for e in candidates[1:] if e.strong and e.strong >= best.strong), None)
    if rival is not None and not _tie_break(best, rival):
        return Detection(None, found, shape, "ambiguous", unread_output(objects))
    return Detection(best.name, found, shape)


def unread_output(records: Sequence[dict[str, Any]]) -> str:
    """What a file no reader reads is, when it is a known agent output, and how to get a
    file compactctl reads; ``""`` otherwise.

    Known: ``opencode run --format json`` (docs/formats.md section 6, seen from opencode
    1.18.33 in ``fixtures/real/``): one line per part event, ``{type: step_start | text |
    tool_use | step_finish | ..., timestamp, sessionID, part: {type, ...}}``, when most of
    the records are such; the session's export (``opencode export ID``) is read.

    >>> unread_output([{"type": "text", "timestamp": 1, "sessionID": "ses_1",
    ...                 "part": {"type": "text", "text": "hi"}}])[:63]
    'It is the event stream of `opencode run --format json` (session'
    """
    events = [
        r
        for r in records
        if isinstance(r.get("type"), str)
        and isinstance(r.get("sessionID"), str)
        and isinstance(r.get("part"), dict)
        and isinstance(r["part"].get("type"), str)
    ]
    if not events or 2 * len(events) < len(records):
        return ""
    ids = list(dict.fromkeys(str(r["sessionID"]) for r in events))
    session = ids[0] if len(ids) == 1 else "ID"
    named = ("session " if len(ids) == 1 else "sessions ") + ", ".join(ids[:3])
    return (
        f"It is the event stream of `opencode run --format json` ({named}), which no "
        f"reader reads: export the session with `opencode export {session} > session.json` "
        "(where it ran) and read that file"
    )


def claimant(record: dict[str, Any], besides: str) -> str | None:
    """The format, other than ``besides``, that ``record`` is evidence of: the first one
    (:data:`SCORERS` order) that scores it :data:`STRONG`, else the first that scores it
    :data:`WEAK`; ``None`` when no other format writes such a record.

    >>> claimant({"role": "user", "content": "hi"}, "claude-code")
    'openai-chat'
    >>> claimant({"type": "atis-latch", "sessionId": "s"}, "claude-code") is None
    True
    """
    weak = None
    for name, scorer in SCORERS.items():
        if name == besides:
            continue
        score = scorer(record)
        if score == STRONG:
            return name
        if score == WEAK and weak is None:
            weak = name
    return weak


def first_foreign_record(
    name: str, records: Iterable[tuple[int, dict[str, Any]]]
) -> tuple[int, str, dict[str, Any]] | None:
    """The first record of a file read as ``name`` that belongs to another format:
    ``(line, that format, record)``, or ``None``.

    Such a record is one that ``name`` never writes (its scorer gives ``None``) and that
    another format does write (:func:`claimant`): a file that mixes formats, which
    :func:`examine` may pass (it reads the first 50 records and tolerates
    :data:`MAX_STRAY` of them), and whose reader would keep those records as content-less
    ``foreign`` events or drop them. Records the format keeps without understanding them
    (scored :data:`FITS`, such as Claude Code metadata types newer than its reader) and
    records no format claims pass. Cost: one scorer call per record, and every scorer only
    for the records ``name`` never writes (the review of the readers, 2026-12: a Claude
    Code file with chat lines appended was read with the chat lines lost, exit 0).

    >>> first_foreign_record("openai-chat", [(1, {"role": "user", "content": "hi"}),
    ...     (2, {"type": "user", "sessionId": "s", "parentUuid": None,
    ...          "message": {"content": "hi"}})])[:2]
    (2, 'claude-code')
    """
    own = SCORERS[name]
    for line, record in records:
        if own(record) is None:
            other = claimant(record, name)
            if other is not None:
                return line, other, record
    return None


def record_shape(record: dict[str, Any]) -> str:
    """What one record looks like, in a few words: its ``type`` (or ``role``) and first keys.

    >>> record_shape({"role": "user", "content": "hi"})
    "role 'user', keys: role, content"
    """
    head = ""
    for key in ("type", "role"):
        if isinstance(record.get(key), str):
            head = f"{key} {record[key]!r}, "
            break
    keys = [str(k) for k in list(record)[:8]]
    more = ", ..." if len(record) > 8 else ""
    return f"{head}keys: {', '.join(keys)}{more}"


def _tie_break(best: Evidence, rival: Evidence) -> bool:
    """Whether ``best`` may win over a ``rival`` with as much strong evidence: only when the
    rival has more strays (its reader would lose records ``best`` reads)."""
    return rival.stray > best.stray
