"""Codex CLI rollout files (``~/.codex/sessions/.../rollout-*.jsonl``) -> canonical.

Source: docs/formats.md section 3. Input is ``(line_number, record)`` pairs of
``{"timestamp", "type", "payload"}`` envelopes; output is canonical event dicts with
``sourceLine``, streamed (one model response is held at a time).

Mapping:

- ``session_meta`` (first one): the ``session`` event (``id`` -> ``sessionId``, ``cwd``,
  ``cli_version``), completed with ``model`` from the first ``turn_context`` and
  ``contextWindow`` from the first ``model_context_window`` seen before the first prompt
  or model output (records up to there are held back); its
  ``base_instructions.text`` (the system prompt the model got) becomes a ``system`` message
  in turn 0. Later ``session_meta`` records (resume) are ``foreign``.
- ``response_item``:

  - ``message`` ``assistant``: text from ``output_text``/``refusal`` parts;
  - ``message`` ``developer``/``system``: ``system`` messages;
  - ``message`` ``user``: a prompt (starts a turn), except injected context (text starting
    with ``<environment_context>``, ``<user_instructions>``, ``# AGENTS.md instructions``,
    ``<permissions instructions>``, ``<user_shell_command>``, ``<turn_aborted>``), which is a
    ``system`` message in the current turn (docs/formats.md section 7); images become image parts;
  - ``reasoning``: an opaque ``{"type": "reasoning", ...}`` part of the assistant message it
    precedes (summary and ``encrypted_content`` kept as they are, never as text);
  - ``function_call`` / ``custom_tool_call`` / ``local_shell_call``: ``toolCalls`` of the
    assistant message they follow (or of a new empty one). ``arguments`` is the parsed JSON
    (the raw string if invalid); custom tools get ``{"input": <raw input>}``, local shell
    calls their ``action``;
  - ``function_call_output`` / ``custom_tool_call_output``: ``tool`` messages linked by
    ``call_id``. A JSON ``{"output", "metadata": {"exit_code"}}`` string is unwrapped to its
    ``output``; ``Exit code: N`` text is kept as the model saw it. ``exitCode`` is recorded
    and ``isError`` set when it is not 0; list outputs become parts;
  - ``tool_search_call`` / ``tool_search_output``: a call (``tool_search``) and its result
    (the ``tools`` found, as JSON text);
  - ``web_search_call`` / ``image_generation_call`` (tools the model ran server-side): opaque
    parts of the assistant message (a generated image as an image part); ``agent_message``:
    assistant text (issue 17: these were left out of the context);
  - ``Process exited with code N`` in an ``exec_command`` output header (Codex CLI 0.169.0)
    counts as the exit code, like ``Exit code: N``;
  - other items (``compaction``, ``ghost_snapshot``, ...): ``foreign``.

- ``compacted``: a ``summary`` event (``summaryText`` = ``message``, ``triggerMode: "auto"``:
  the rollout does not record the trigger). It replaces the messages since the previous
  summary, except non-tool messages whose text reappears in ``replacement_history`` (the
  recent user messages Codex keeps).
- ``turn_context``, ``event_msg`` (duplicates of response items and statistics),
  ``world_state`` and unknown types: ``foreign`` (``sourceType`` = envelope type,
  ``subtype`` = ``payload.type``).

Ids: tool messages ``uuid5(call_id)``, assistant messages opened by a call ``uuid5`` of that
call id, everything else ``uuid5`` of the line number (all made unique within the output).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from typing import Any

from compactctl.formats._common import (
    JSON,
    SummaryChain,
    Turns,
    Uuids,
    collapse,
    content_text,
    foreign,
    image_from_data_url,
    message_event,
    parse_arguments,
    stable_uuid,
    stamped,
    text_part,
)
from compactctl.text import CODEX_INJECTED

SOURCE = "codex-rollout"
INJECTED_PREFIXES = CODEX_INJECTED
"""User-role text Codex injected (:data:`compactctl.text.CODEX_INJECTED`): made ``system``."""
CALL_TYPES = frozenset(
    {"function_call", "custom_tool_call", "local_shell_call", "tool_search_call"}
)
MODEL_SIDE_TYPES = frozenset({"web_search_call", "image_generation_call"})
OUTPUT_TYPES = frozenset({"function_call_output", "custom_tool_call_output", "tool_search_output"})


def _parts(content: Any) -> list[JSON]:
    if isinstance(content, str):
        return [text_part(content)]
    parts: list[JSON] = []
    if not isinstance(content, list):
        return parts
    for item in content:
        if not isinstance(item, dict):
            continue
        kind = item.get("type")
        if kind in ("input_text", "output_text", "text"):
            parts.append(text_part(str(item.get("text") or "")))
        elif kind == "refusal":
            parts.append(text_part(str(item.get("refusal") or "")))
        elif kind == "input_image":
            url = item.get("image_url")
            parts.append(image_from_data_url(url) if isinstance(url, str) else dict(item))
        else:
            parts.append(dict(item))
    return parts


_EXITED = re.compile(r"^Process exited with code (-?\d+)$", re.M)


def _exit_code_from_text(text: str) -> int | None:
    """The exit code in a shell output's header: ``Exit code: N`` (shell tool) or ``Process
    exited with code N`` before ``Output:`` (``exec_command``, Codex CLI 0.169.0).

    >>> _exit_code_from_text("Chunk ID: a\\nProcess exited with code 1\\nOutput:\\nx")
    1
    """
    if text.startswith("Exit code: "):
        head = text[11:].split("\n", 1)[0].strip()
        try:
            return int(head)
        except ValueError:
            return None
    header = text.split("\nOutput:", 1)[0] if "\nOutput:" in text else ""
    found = _EXITED.search(header)
    return int(found.group(1)) if found else None


def unwrap_output(output: Any) -> tuple[str | list[JSON], int | None, bool | None]:
    """``(content, exit_code, success)`` of a function-call output (docs/formats.md section 3).

    >>> unwrap_output('{"output": "ok\\\\n", "metadata": {"exit_code": 0}}')
    ('ok\\n', 0, None)
    >>> unwrap_output("Exit code: 2\\nWall time: 0.1 seconds\\nOutput:\\nboom")[1:]
    (2, None)
    """
    if isinstance(output, str):
        if output.startswith("{") and '"output"' in output:
            parsed = parse_arguments(output)
            if isinstance(parsed, dict) and isinstance(parsed.get("output"), str):
                meta = parsed.get("metadata")
                code = meta.get("exit_code") if isinstance(meta, dict) else None
                return parsed["output"], code if isinstance(code, int) else None, None
        return output, _exit_code_from_text(output), None
    if isinstance(output, list):
        return collapse(_parts(output)), None, None
    if isinstance(output, dict):
        success = output.get("success")
        content = output.get("content")
        if isinstance(content, list):
            content = collapse(_parts(content))
        elif not isinstance(content, str):
            content = str(content) if content is not None else ""
        return content, None, success if isinstance(success, bool) else None
    return ("" if output is None else str(output)), None, None


class _Rollout:
    """The state of one rollout conversion (see the module docstring)."""

    def __init__(self) -> None:
        self.uuids = Uuids()
        self.turns = Turns()
        self.chain = SummaryChain()
        self.call_names: dict[str, str] = {}
        self.out: list[JSON] = []
        self.asst: JSON | None = None
        self.asst_parts: list[JSON] = []
        self.asst_text = False
        self.session: JSON | None = None
        self.session_done = False
        self.context_window: int | None = None
        self.model: str | None = None

    # -- output --------------------------------------------------------------------------

    def ready(self) -> list[JSON]:
        """Events that can no longer change (held while the session event is incomplete)."""
        if (self.session is not None and not self.session_done) or self.asst is not None:
            return []
        out, self.out = self.out, []
        return out

    def finish_session(self) -> None:
        """Complete the session event (model, context window): the conversation begins."""
        if self.session is not None and not self.session_done:
            self.session_done = True
            if self.model is not None:
                self.session["model"] = self.model
            if self.context_window is not None:
                self.session["contextWindow"] = self.context_window

    def message(self, line: int, ts: Any, role: str, turn: int, uid: str | None = None) -> JSON:
        """A new message event (content filled by the caller)."""
        event = message_event(self.uuids.take(uid or stable_uuid(SOURCE, line), line), turn, role)
        return stamped(event, ts, line)

    def emit(self, event: JSON) -> None:
        """Queue an event; messages also join the summary chain."""
        self.out.append(event)
        if event["type"] == "message":
            self.chain.add(event)

    def close(self) -> None:
        """Finalize the open assistant message (its parts become ``content``)."""
        if self.asst is not None:
            self.asst["content"] = collapse(self.asst_parts)
            self.asst = None
            self.asst_parts = []
            self.asst_text = False

    def open_assistant(self, line: int, ts: Any, uid: str | None = None) -> JSON:
        """Close any open assistant message and start a new one."""
        self.close()
        self.finish_session()
        event = self.message(line, ts, "assistant", self.turns.activity(), uid)
        self.emit(event)
        self.asst = event
        return event

    # -- records -------------------------------------------------------------------------

    def session_meta(self, line: int, ts: Any, payload: JSON) -> None:
        """The first ``session_meta``: the session event and the instructions message."""
        if self.session is not None:
            self.emit(foreign("session_meta", stable_uuid(SOURCE, line), line, ts))
            return
        sid = payload.get("id")
        self.session = {
            "type": "session",
            "uuid": self.uuids.take(stable_uuid(SOURCE, "session", sid or line)),
            "sessionId": sid,
            "source": SOURCE,
            "cwd": payload.get("cwd"),
            "version": payload.get("cli_version"),
            "timestamp": payload.get("timestamp") or ts,
            "sourceLine": line,
        }
        self.session = {k: v for k, v in self.session.items() if v is not None}
        self.out.insert(0, self.session)
        instructions = payload.get("base_instructions")
        text = instructions.get("text") if isinstance(instructions, dict) else instructions
        if isinstance(text, str) and text:
            event = self.message(line, ts, "system", 0, stable_uuid(SOURCE, line, "instructions"))
            event["content"] = text
            self.emit(event)

    def response_item(self, line: int, ts: Any, payload: JSON) -> None:
        """Dispatch one ``response_item`` by its ``payload.type``."""
        kind = payload.get("type")
        if kind == "message":
            self.message_item(line, ts, payload)
        elif kind == "reasoning":
            part = {"type": "reasoning", **{k: v for k, v in payload.items() if k != "type"}}
            if self.asst is None or self.asst_text or "toolCalls" in self.asst:
                self.open_assistant(line, ts)
            self.asst_parts.append(part)
        elif kind in CALL_TYPES:
            self.call_item(line, ts, payload)
        elif kind in OUTPUT_TYPES:
            self.output_item(line, ts, payload)
        elif kind in MODEL_SIDE_TYPES:
            self.model_side_item(line, ts, payload)
        elif kind == "agent_message":
            text = next(
                (payload[k] for k in ("message", "text") if isinstance(payload.get(k), str)), None
            )
            parts = [text_part(text)] if text is not None else _parts(payload.get("content"))
            self.message_item(line, ts, {"role": "assistant", "content": parts})
        else:
            self.emit(foreign("response_item", stable_uuid(SOURCE, line), line, ts, subtype=kind))

    def model_side_item(self, line: int, ts: Any, payload: JSON) -> None:
        """A tool the model ran on the server side (``web_search_call``,
        ``image_generation_call``): an opaque part of the assistant message it belongs to,
        kept in the context (its results are not in the rollout; a generated image is)."""
        kind = str(payload.get("type"))
        part: JSON = {k: v for k, v in payload.items() if k != "result"}
        result = payload.get("result")
        if kind == "image_generation_call" and isinstance(result, str) and result:
            part = {
                "type": "image",
                "mediaType": "image/png",
                "data": result,
                "source": kind,
                **{k: v for k, v in part.items() if k != "type"},
            }
        if self.asst is None or self.asst_text or "toolCalls" in self.asst:
            self.open_assistant(line, ts)
        self.asst_parts.append(part)

    def message_item(self, line: int, ts: Any, payload: JSON) -> None:
        """A ``message`` item: assistant text, a prompt, or system/injected context."""
        role = payload.get("role")
        parts = _parts(payload.get("content"))
        if role == "assistant":
            if self.asst is None or self.asst_text or "toolCalls" in self.asst:
                self.open_assistant(line, ts)
            self.asst_parts.extend(parts)
            self.asst_text = True
            return
        self.close()
        text = content_text(parts)
        if role == "user" and not text.lstrip().startswith(INJECTED_PREFIXES):
            self.finish_session()
            event = self.message(line, ts, "user", self.turns.prompt())
        else:
            event = self.message(line, ts, "system", self.turns.current)
            if role != "system":
                event["sourceRole"] = role
        event["content"] = collapse(parts)
        self.emit(event)

    def call_item(self, line: int, ts: Any, payload: JSON) -> None:
        """A tool call item: appended to the open assistant message (or a new one)."""
        kind = payload.get("type")
        cid = payload.get("call_id") or payload.get("id") or stable_uuid(SOURCE, line, "call")
        cid = str(cid)
        if kind == "custom_tool_call":
            args: Any = {"input": payload.get("input")}
            name = payload.get("name") or "custom_tool"
        elif kind == "local_shell_call":
            action = payload.get("action")
            args = action if isinstance(action, dict) else {}
            name = "local_shell"
        else:
            args = parse_arguments(payload.get("arguments"))
            name = payload.get("name") or ("tool_search" if kind == "tool_search_call" else "")
        if self.asst is None:
            self.open_assistant(line, ts, stable_uuid(SOURCE, "call", cid))
        assert self.asst is not None
        self.asst.setdefault("toolCalls", []).append(
            {"id": cid, "name": str(name), "arguments": args}
        )
        self.call_names[cid] = str(name)

    def output_item(self, line: int, ts: Any, payload: JSON) -> None:
        """A call output item: one ``tool`` message."""
        self.close()
        cid = str(payload.get("call_id") or "")
        output = payload.get("output")
        if output is None and isinstance(payload.get("tools"), list):  # tool_search_output
            output = json.dumps(payload["tools"], ensure_ascii=False, sort_keys=True)
        content, code, success = unwrap_output(output)
        preferred = stable_uuid(SOURCE, "output", cid) if cid else None
        event = self.message(line, ts, "tool", self.turns.activity(), preferred)
        event["content"] = content
        if cid:
            event["toolCallId"] = cid
            if cid in self.call_names:
                event["toolName"] = self.call_names[cid]
        if code is not None:
            event["exitCode"] = code
        if (code is not None and code != 0) or success is False:
            event["isError"] = True
        self.emit(event)

    def compacted(self, line: int, ts: Any, payload: JSON) -> None:
        """A ``compacted`` record: the SummaryEvent; with nothing before it in the file (a
        session continued from a summary, as ``compact --as native`` writes it), a ``user``
        message with ``summaryOf`` holding the summary (``message``, else the texts of
        ``replacement_history``), as in an effective context: Codex sends it."""
        self.close()
        keep: list[str] = []
        history = payload.get("replacement_history")
        if isinstance(history, list):
            for item in history:
                if isinstance(item, dict) and item.get("type") == "message":
                    keep.append(content_text(collapse(_parts(item.get("content")))))
        text = payload.get("message")
        if self.chain.replaces_nothing():  # a session continued from a summary: no original
            summary = text if isinstance(text, str) and text else "\n\n".join(keep)
            if summary:  # what Codex sends first when it resumes: a summary message
                uid = stable_uuid(SOURCE, line, "compacted")
                event = self.message(line, ts, "user", self.turns.current, uid)
                event["content"] = summary
                event["summaryOf"] = event["uuid"]
                self.emit(event)
            return
        self.emit(
            self.chain.summary(
                uuid=self.uuids.take(stable_uuid(SOURCE, line, "compacted"), line),
                text=text if isinstance(text, str) else "",
                source=SOURCE,
                trigger="auto",
                line=line,
                timestamp=ts,
                keep_texts=keep,
            )
        )

    def record(self, line: int, rec: JSON) -> None:
        """Dispatch one rollout envelope by its ``type``."""
        kind = rec.get("type")
        ts = rec.get("timestamp")
        payload = rec.get("payload")
        if not isinstance(payload, dict):
            payload = {}
        if kind == "response_item":
            self.response_item(line, ts, payload)
        elif kind == "session_meta":
            self.session_meta(line, ts, payload)
        elif kind == "compacted":
            self.compacted(line, ts, payload)
        else:
            subtype = payload.get("type")
            window = payload.get("model_context_window")
            info = payload.get("info")
            if window is None and isinstance(info, dict):
                window = info.get("model_context_window")
            if isinstance(window, int) and self.context_window is None:
                self.context_window = window
            model = payload.get("model")
            if kind == "turn_context" and isinstance(model, str) and self.model is None:
                self.model = model
            self.emit(
                foreign(
                    str(kind),
                    stable_uuid(SOURCE, line),
                    line,
                    ts,
                    subtype=subtype if isinstance(subtype, str) else None,
                )
            )


def to_canonical(records: Iterable[tuple[int, dict[str, Any]]]) -> Iterator[dict[str, Any]]:
    """Convert one Codex rollout file to canonical events (see the module docstring).

    Args:
        records: ``(line_number, parsed_record)`` pairs in file order.

    Yields:
        The ``session`` event, the instructions as a ``system`` message, then messages,
        summaries and ``foreign`` events in file order, each with ``sourceLine``.
    """
    state = _Rollout()
    for line, rec in records:
        if isinstance(rec, dict):
            state.record(line, rec)
            yield from state.ready()
    state.close()
    state.finish_session()
    yield from state.ready()
