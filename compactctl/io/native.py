"""Native writers: the effective context as a new session in the agent's own format, which
the agent resumes (``compact --as native``, issue 18).

Two agents are written, the two whose session files compactctl reads and whose resume
command finds a session by its id (docs/formats.md sections 2 and 3):

- **Claude Code** (``claude-code``): ``<project folder>/<new id>.jsonl`` beside the
  original, resumed with ``claude --resume ID`` from the session's working folder. The
  summary is written as Claude Code writes its own compaction: a ``system`` record of
  subtype ``compact_boundary`` (``parentUuid: null``: the chain Claude Code loads starts
  there) and a ``user`` record with ``isCompactSummary: true`` carrying the summary; then
  the kept messages, each record's ``parentUuid`` the previous record's ``uuid``. A
  message's tool results are one ``user`` record of ``tool_result`` blocks, as the
  Messages API takes them.
- **Codex CLI** (``codex-rollout``): ``<CODEX_HOME>/sessions/YYYY/MM/DD/rollout-<time>-<new
  id>.jsonl`` under the original's sessions root, resumed with ``codex resume ID`` (``codex
  exec resume ID``). The records are the original's ``session_meta`` (its id replaced), a
  ``compacted`` record whose ``replacement_history`` is the summary as one user message
  (Codex replaces the history it rebuilds with it, then appends the ``response_item``
  records after it), and the kept items. The original's last ``turn_context`` (where Codex
  records the session's ``model``, with its ``cwd`` and policies) goes before the
  ``compacted`` record: Codex resumes with the model of the newest ``turn_context`` (it
  warns when another one is asked for), and a ``turn_context`` before a compaction leaves
  the context it sent as not sent, so Codex sends its full instructions and environment
  again on the next turn (openai/codex ``rollout_reconstruction.rs``: a compaction clears
  the ``reference_context_item`` an older ``turn_context`` set; Codex CLI 0.169.0 sends
  them again in any case, tests/system/agents/test_resume.py). Without a summary
  (``--micro-only``) no ``turn_context`` is written, since there one with no compaction
  after it counts as that baseline and the new session holds none of the instructions (so
  the model is not recorded); nor is one when the original has none (no model invented).

What is written: the effective context (the log replayed after the compaction), so a
micro-compacted output is written elided, as the model would see it. System messages are
left out: the agent sends its own system prompt and context when it resumes. A tool call
without its result in the context (or a result without its call) is left out, since both
APIs reject a request with one. Reasoning items (Codex) and thinking blocks (Claude) of
kept messages: Codex ``reasoning`` parts are written back as they were read; Claude
``thinking`` blocks are left out (a signed block is only valid in its own turn).

The new id is derived from the original's session id, the target format and the
compaction's content (the summary text, and the messages kept with what they hold), and
every record's time is taken from the original, so a second run writes the same bytes to
the same file:
:func:`write_native` then leaves it alone. The original file is never written.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import json
import os
import tempfile
import uuid as uuidlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from compactctl.errors import InputError, UsageError, WriteError
from compactctl.formats.claude_code import is_subagent_file
from compactctl.model import Message, dumps

__all__ = [
    "AS_NATIVE",
    "RESUMABLE",
    "NativeSession",
    "native_format",
    "native_session",
    "paired",
    "write_native",
]

RESUMABLE = ("claude-code", "codex-rollout")
"""The source formats a native session can be written for (the ``--as`` names too)."""
AS_NATIVE = ("native", *RESUMABLE)
"""The ``compact --as`` values that write a native session (``native``: the source's own)."""

SUMMARY_PREAMBLE = (
    "This session continues an earlier conversation, whose older part compactctl replaced "
    "with the summary below. The messages after it are the most recent ones, kept "
    "verbatim.\n\n"
)
"""The text before the summary in the summary message of either agent."""

JSON = dict[str, Any]


@dataclass(frozen=True)
class NativeSession:
    """A native session ready to be written.

    Attributes:
        format: ``claude-code`` or ``codex-rollout``.
        session_id: the new session's id (a UUID string).
        path: where it goes (an absolute path).
        command: the command that resumes it (``claude --resume ID``, ``codex resume ID``).
        cwd: the working folder the agent resumes in (Claude Code finds a session by the
            folder it is started in), or ``None``.
        lines: the JSONL lines, each ending in ``\\n``.
        messages: how many records carry a message (the summary included).
        dropped: messages of the context left out (system messages, unpaired tool calls
            and results).
    """

    format: str
    session_id: str
    path: str
    command: str
    cwd: str | None
    lines: tuple[bytes, ...]
    messages: int
    dropped: int

    def resume(self) -> JSON:
        """The ``"resume"`` object of the ``--json`` report: ``{"sessionId", "path",
        "command", "cwd", "format"}``."""
        return {
            "sessionId": self.session_id,
            "path": self.path,
            "command": self.command,
            "cwd": self.cwd,
            "format": self.format,
        }


_SUBAGENT = (
    "a subagent's transcript (Claude Code writes them in <session>/subagents/, their "
    "records isSidechain): claude --resume finds no session written beside it; compact its "
    "parent session (<session>.jsonl, next to that folder) with --as native, or write this "
    "one with -o"
)


def native_format(as_format: str, source_format: str, path: str) -> str:
    """The format a ``--as`` value writes for a source in ``source_format``.

    >>> native_format("native", "codex-rollout", "r.jsonl")
    'codex-rollout'

    Raises:
        UsageError: the source cannot be resumed (a canonical or another agent's
            transcript, or a Claude Code subagent's, in a ``subagents`` folder), or ``--as``
            names another agent than the source's (exit 2).
    """
    if source_format not in RESUMABLE:
        raise UsageError(
            f"--as {as_format} writes a session that its agent resumes, and this is "
            f"{'an' if source_format[:1] in 'aeio' else 'a'} {source_format} transcript; "
            f"the formats that can be resumed are {', '.join(RESUMABLE)}",
            path=path,
        )
    if source_format == "claude-code" and os.path.basename(os.path.dirname(path)) == "subagents":
        raise UsageError(_SUBAGENT, path=path)
    if as_format not in ("native", source_format):
        raise UsageError(
            f"--as {as_format} needs a {as_format} session, and this is a {source_format} "
            f"one; use --as native (or --as {source_format})",
            path=path,
        )
    return source_format


def paired(view: Iterable[Message]) -> tuple[list[Message], int]:
    """The context without system messages and without unpaired tool calls or results.

    A ``tool`` message is kept when an earlier assistant message made its call; a call is
    kept when a later ``tool`` message answers it (an assistant message left with neither
    text nor calls is dropped). Returns the messages and how many were left out (system
    messages, orphan results, assistant messages emptied; a call taken out of a message
    that stays is not counted).

    >>> ms = [Message({"role": "system", "content": "s"}),
    ...       Message({"role": "tool", "toolCallId": "x", "content": "orphan"}),
    ...       Message({"role": "assistant", "content": "", "toolCalls": [
    ...           {"id": "c1", "name": "a", "arguments": {}}]}),
    ...       Message({"role": "assistant", "content": "hi", "toolCalls": [
    ...           {"id": "c2", "name": "a", "arguments": {}}]}),
    ...       Message({"role": "tool", "toolCallId": "c2", "content": "ok"})]
    >>> kept, dropped = paired(ms)
    >>> [(m.role, [c["id"] for c in m.tool_calls]) for m in kept], dropped
    ([('assistant', ['c2']), ('tool', [])], 3)
    """
    view = list(view)
    messages = [m for m in view if m.role != "system"]
    dropped = 0
    called: set[str] = set()
    answered: set[str] = set()
    for m in messages:
        if m.role == "assistant":
            called.update(c["id"] for c in m.tool_calls if isinstance(c.get("id"), str))
        elif m.role == "tool" and m.tool_call_id in called:
            answered.add(str(m.tool_call_id))
    out: list[Message] = []
    for m in messages:
        if m.role == "tool" and m.tool_call_id not in answered:
            dropped += 1
            continue
        if m.role == "assistant" and m.tool_calls:
            calls = [c for c in m.tool_calls if c.get("id") in answered]
            if len(calls) != len(m.tool_calls):
                data = {**m.data, "toolCalls": calls}
                if not calls:
                    del data["toolCalls"]
                m = Message(data)
            if not calls and not m.text.strip():
                dropped += 1
                continue
        out.append(m)
    return out, dropped + sum(1 for m in view if m.role == "system")


def native_session(
    source_path: str,
    source_format: str,
    view: list[Message],
    *,
    model: str | None = None,
    pre_tokens: int | None = None,
) -> NativeSession:
    """The effective context ``view`` of the session at ``source_path`` as a new native
    session of ``source_format`` (module docstring).

    Args:
        source_path: the original session file (read again here for the fields the agent
            needs: Claude Code's ``cwd``, ``version``, ``gitBranch``; Codex's
            ``session_meta``).
        source_format: ``claude-code`` or ``codex-rollout``.
        view: the effective context after the compaction (``replay``), its summary a user
            message with ``summaryOf``.
        model: the session's model, written on Claude Code's assistant messages.
        pre_tokens: the prompt estimate before the compaction, in tokens (Claude Code's
            ``compactMetadata.preTokens``; ``0`` when not given).

    Raises:
        InputError: the original has no session id, or (Codex) no ``session_meta``.
        UsageError: a source format that cannot be resumed.
    """
    records = list(_records(source_path))
    kept, dropped = paired(view)
    summary = next((m for m in kept if isinstance(m.data.get("summaryOf"), str)), None)
    if source_format == "claude-code":
        return _claude(source_path, records, kept, summary, dropped, model, pre_tokens or 0)
    if source_format == "codex-rollout":
        return _codex(source_path, records, kept, summary, dropped)
    raise UsageError(f"no native writer for {source_format}", path=source_path)


def write_native(native: NativeSession) -> bool:
    """Write ``native`` to its path unless that file is already there with these bytes.

    The file is created whole (a temporary file in the same folder, fsynced, then linked
    to the target name, which fails if the name exists), so an agent never sees half a
    session. A file already at the path that starts with these lines is the same session
    (maybe resumed since, and grown): it is left as it is.

    Returns:
        ``True`` if the file was written, ``False`` if the same session was already there.

    Raises:
        WriteError: the folder cannot be written, or a different file has that name.
    """
    data = b"".join(native.lines)
    target = native.path
    if os.path.exists(target):
        return _same_start(target, data)
    folder = os.path.dirname(target)
    try:
        os.makedirs(folder, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".compactctl-", suffix=".tmp", dir=folder)
    except OSError as exc:
        raise WriteError(f"cannot create the new session: {exc.strerror}", path=target) from None
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o600)
        try:
            os.link(tmp, target)
        except FileExistsError:
            return _same_start(target, data)
    except OSError as exc:
        raise WriteError(f"cannot write the new session: {exc.strerror}", path=target) from None
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
    return True


def _same_start(target: str, data: bytes) -> bool:
    with open(target, "rb") as fh:
        head = fh.read(len(data))
    if head != data:
        raise WriteError(
            "a different file already has the new session's name; nothing was written",
            path=target,
        )
    return False


# --- shared ---------------------------------------------------------------------------------


def _records(path: str) -> Iterator[JSON]:
    """The JSON object records of a session file (other lines skipped)."""
    from compactctl.io.files import open_input

    try:
        with open_input(path) as fh:  # gzip too, as the session was read
            for raw in fh:
                try:
                    rec = json.loads(raw)
                except ValueError:
                    continue
                if isinstance(rec, dict):
                    yield rec
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror}", path=path) from None


def _new_id(
    source_id: str,
    fmt: str,
    summary: Message | None,
    kept: list[Message],
    context: JSON | None = None,
) -> str:
    """A UUID (version 4 layout, bits from SHA-256) of the source id, the target format and
    the compaction's content: what the summary says, and which messages stay with what
    they hold (a micro-compacted message differs from the whole one, so two compactions
    that keep the same messages differently get two ids); and Codex's ``turn_context``
    written (``context``, its model: a session written without it, by compactctl before
    it was written, is another one, not a file in the way)."""
    h = hashlib.sha256(f"{fmt}\0{source_id}\0".encode())
    if context is not None:
        h.update(b"turn_context\0" + dumps(context) + b"\0")
    h.update(summary.text.encode() if summary is not None else b"")
    for m in kept:
        held = b"" if m is summary else dumps(m.data)  # the summary's: its text, above
        h.update(b"\0" + str(m.uuid).encode() + b"\0" + held)
    raw = bytearray(h.digest()[:16])
    raw[6] = (raw[6] & 0x0F) | 0x40
    raw[8] = (raw[8] & 0x3F) | 0x80
    return str(uuidlib.UUID(bytes=bytes(raw)))


def _record_id(session_id: str, index: int) -> str:
    return str(uuidlib.uuid5(uuidlib.UUID(session_id), str(index)))


def _line(record: JSON) -> bytes:
    return dumps(record) + b"\n"


def _last_time(records: list[JSON], view: list[Message]) -> str:
    """The newest timestamp of the original (its records and messages; not a summary's,
    which is the time compactctl ran)."""
    times = [r["timestamp"] for r in records if isinstance(r.get("timestamp"), str)]
    times += [
        m.data["timestamp"]
        for m in view
        if isinstance(m.data.get("timestamp"), str) and "summaryOf" not in m.data
    ]
    return max(times) if times else "1970-01-01T00:00:00.000Z"


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(p.get("text") or "")
            for p in content
            if isinstance(p, dict) and p.get("type") == "text"
        )
    return ""


def _summary_text(summary: Message) -> str:
    return SUMMARY_PREAMBLE + "Summary:\n" + summary.text


# --- Claude Code ----------------------------------------------------------------------------


def _claude(
    path: str,
    records: list[JSON],
    kept: list[Message],
    summary: Message | None,
    dropped: int,
    model: str | None,
    pre_tokens: int,
) -> NativeSession:
    base = next((r for r in records if isinstance(r.get("sessionId"), str) and r.get("cwd")), None)
    if base is None:
        raise InputError("no record with sessionId and cwd: cannot write a session", path=path)
    if is_subagent_file(list(enumerate(records, 1))):  # moved out of subagents/ (by folder:
        raise UsageError(_SUBAGENT, path=path)  # native_format); the reader's own rule
    new = _new_id(str(base["sessionId"]), "claude-code", summary, kept)
    common: JSON = {"userType": "external", "cwd": base["cwd"], "sessionId": new}
    for key in ("version", "gitBranch"):
        if key in base:
            common[key] = base[key]
    last = _last_time(records, kept)
    out: list[JSON] = []

    def add(record: JSON, ts: Any) -> None:
        parent = out[-1]["uuid"] if out else None
        out.append(
            {
                "parentUuid": parent,
                "isSidechain": False,
                **record,
                "uuid": _record_id(new, len(out)),
                "timestamp": ts if isinstance(ts, str) else last,
                **common,
            }
        )

    if summary is not None:
        add(
            {
                "type": "system",
                "subtype": "compact_boundary",
                "content": "Conversation compacted",
                "isMeta": False,
                "level": "info",
                "logicalParentUuid": None,
                "compactMetadata": {"trigger": "manual", "preTokens": pre_tokens},
            },
            None,
        )
    results: list[JSON] = []
    result_time: Any = None
    for m in kept:
        if m.role == "tool":
            results.append(_claude_result(m))
            result_time = result_time or m.data.get("timestamp")
            continue
        if results:
            add({"type": "user", "message": {"role": "user", "content": results}}, result_time)
            results, result_time = [], None
        ts = m.data.get("timestamp") if m is not summary else None  # the summary's: now
        if m is summary:
            message = {"role": "user", "content": _summary_text(m)}
            add({"type": "user", "message": message, "isCompactSummary": True}, ts)
        elif m.role == "assistant":
            add({"type": "assistant", "message": _claude_assistant(m, new, len(out), model)}, ts)
        else:
            add({"type": "user", "message": {"role": "user", "content": _claude_user(m)}}, ts)
    if results:
        add({"type": "user", "message": {"role": "user", "content": results}}, result_time)
    folder = os.path.dirname(os.path.abspath(path))
    return NativeSession(
        format="claude-code",
        session_id=new,
        path=os.path.join(folder, new + ".jsonl"),
        command=f"claude --resume {new}",
        cwd=str(base["cwd"]),
        lines=tuple(_line(r) for r in out),
        messages=sum(1 for r in out if r["type"] != "system"),
        dropped=dropped,
    )


def _claude_blocks(content: Any) -> list[JSON]:
    """Messages API blocks of canonical content: text and images (other parts left out)."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    blocks: list[JSON] = []
    for p in content if isinstance(content, list) else []:
        if not isinstance(p, dict):
            continue
        if p.get("type") == "text" and p.get("text"):
            blocks.append({"type": "text", "text": str(p["text"])})
        elif p.get("type") == "image" and isinstance(p.get("data"), str):
            source = {"type": "base64", "media_type": p.get("mediaType") or "image/png"}
            blocks.append({"type": "image", "source": {**source, "data": p["data"]}})
        elif p.get("type") == "image" and isinstance(p.get("url"), str):
            blocks.append({"type": "image", "source": {"type": "url", "url": p["url"]}})
    return blocks


def _claude_user(m: Message) -> Any:
    if isinstance(m.content, str):
        return m.content
    return _claude_blocks(m.content) or _text_of(m.content)


def _claude_assistant(m: Message, session: str, index: int, model: str | None) -> JSON:
    content = _claude_blocks(m.content)
    for call in m.tool_calls:
        args = call.get("arguments")
        if isinstance(args, str):
            try:
                args = json.loads(args)
            except ValueError:
                args = {"input": args}
        content.append(
            {
                "type": "tool_use",
                "id": call["id"],
                "name": str(call.get("name") or ""),
                "input": args if isinstance(args, dict) else {"input": args},
            }
        )
    return {
        "id": "msg_" + uuidlib.uuid5(uuidlib.UUID(session), f"msg{index}").hex[:24],
        "type": "message",
        "role": "assistant",
        "model": model or "unknown",
        "content": content,
        "stop_reason": "tool_use" if m.tool_calls else "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 0, "output_tokens": 0},
    }


def _claude_result(m: Message) -> JSON:
    content = m.content
    block: JSON = {
        "type": "tool_result",
        "tool_use_id": m.tool_call_id,
        "content": content if isinstance(content, str) else _claude_blocks(content),
    }
    if m.is_error:
        block["is_error"] = True
    return block


# --- Codex ----------------------------------------------------------------------------------


def _codex(
    path: str, records: list[JSON], kept: list[Message], summary: Message | None, dropped: int
) -> NativeSession:
    meta = next((r for r in records if r.get("type") == "session_meta"), None)
    payload = meta.get("payload") if meta else None
    if not isinstance(payload, dict) or not isinstance(payload.get("id"), str):
        raise InputError("no session_meta with an id: cannot write a rollout", path=path)
    context = next((r for r in reversed(records) if r.get("type") == "turn_context"), None)
    if summary is None or context is None or not isinstance(context.get("payload"), dict):
        context = None  # no turn_context written (module docstring)
    new = _new_id(payload["id"], "codex-rollout", summary, kept, context and context["payload"])
    last = _last_time(records, kept)
    calls = _codex_calls(records)
    out: list[JSON] = [
        {
            "timestamp": last,
            "type": "session_meta",
            "payload": {
                **{k: v for k, v in payload.items() if k != "forked_from_id"},
                "id": new,
                **({"session_id": new} if "session_id" in payload else {}),
                "timestamp": last,
            },
        }
    ]
    if context is not None:  # the model Codex resumes with
        out.append({"timestamp": last, "type": "turn_context", "payload": context["payload"]})
    if summary is not None:
        text = _summary_text(summary)
        item = {"type": "message", "role": "user", "content": [_codex_text("user", text)]}
        out.append(
            {
                "timestamp": last,
                "type": "compacted",
                "payload": {"message": text, "replacement_history": [item]},
            }
        )
    for m in kept:
        if m is summary:
            continue
        ts = m.data.get("timestamp") if isinstance(m.data.get("timestamp"), str) else last
        out.extend(
            {"timestamp": ts, "type": "response_item", "payload": i} for i in _items(m, calls)
        )
    # Codex CLI 0.169.0 refuses to resume a rollout whose last record has no ``ordinal``
    # (its position in the file, from 0), which it writes on every record
    out = [{"timestamp": r["timestamp"], "ordinal": i, **r} for i, r in enumerate(out)]
    when = dt.datetime.strptime(last[:19], "%Y-%m-%dT%H:%M:%S")
    root = _sessions_root(path)
    name = f"rollout-{when:%Y-%m-%dT%H-%M-%S}-{new}.jsonl"
    target = root / f"{when:%Y}" / f"{when:%m}" / f"{when:%d}" / name if root else None
    return NativeSession(
        format="codex-rollout",
        session_id=new,
        path=str(target) if target else os.path.join(os.path.dirname(os.path.abspath(path)), name),
        command=f"codex resume {new}",
        cwd=payload.get("cwd") if isinstance(payload.get("cwd"), str) else None,
        lines=tuple(_line(r) for r in out),
        messages=sum(1 for r in out if r["type"] in ("response_item", "compacted")),
        dropped=dropped,
    )


def _sessions_root(path: str) -> Path | None:
    """``CODEX_HOME/sessions`` of a rollout at ``sessions/YYYY/MM/DD/`` (or under
    ``archived_sessions``), else ``None``."""
    p = Path(path).resolve()
    if len(p.parents) > 4 and p.parents[3].name in ("sessions", "archived_sessions"):
        return p.parents[4] / "sessions"
    return None


def _codex_calls(records: list[JSON]) -> dict[str, JSON]:
    """The original call items by ``call_id`` (written back as they were)."""
    calls: dict[str, JSON] = {}
    for r in records:
        item = r.get("payload")
        if r.get("type") == "response_item" and isinstance(item, dict):
            kind = item.get("type")
            if kind in ("function_call", "custom_tool_call", "local_shell_call"):
                cid = item.get("call_id") or item.get("id")
                if isinstance(cid, str):
                    calls[cid] = item
    return calls


def _codex_text(role: str, text: str) -> JSON:
    return {"type": "output_text" if role == "assistant" else "input_text", "text": text}


def _codex_content(role: str, content: Any) -> tuple[list[JSON], list[JSON]]:
    """``(message content, reasoning items)`` of canonical content."""
    parts: list[JSON] = []
    reasoning: list[JSON] = []
    for p in [{"type": "text", "text": content}] if isinstance(content, str) else content or []:
        if not isinstance(p, dict):
            continue
        if p.get("type") == "text" and p.get("text"):
            parts.append(_codex_text(role, str(p["text"])))
        elif p.get("type") == "image" and isinstance(p.get("data"), str) and role == "user":
            url = f"data:{p.get('mediaType') or 'image/png'};base64,{p['data']}"
            parts.append({"type": "input_image", "image_url": url})
        elif p.get("type") == "reasoning" and role == "assistant":
            reasoning.append(dict(p))
    return parts, reasoning


def _items(m: Message, calls: dict[str, JSON]) -> list[JSON]:
    """The ``response_item`` payloads of one kept message."""
    if m.role == "tool":
        cid = str(m.tool_call_id)
        kind = calls.get(cid, {}).get("type")
        output = m.content if isinstance(m.content, str) else _text_of(m.content)
        out_type = (
            "custom_tool_call_output" if kind == "custom_tool_call" else "function_call_output"
        )
        return [{"type": out_type, "call_id": cid, "output": output}]
    role = "assistant" if m.role == "assistant" else "user"
    parts, reasoning = _codex_content(role, m.content)
    items: list[JSON] = list(reasoning)
    if parts:
        items.append({"type": "message", "role": role, "content": parts})
    for call in m.tool_calls:
        cid = str(call["id"])
        if cid in calls:
            items.append(calls[cid])
            continue
        args = call.get("arguments")
        text = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
        items.append(
            {
                "type": "function_call",
                "name": str(call.get("name") or ""),
                "arguments": text,
                "call_id": cid,
            }
        )
    return items
