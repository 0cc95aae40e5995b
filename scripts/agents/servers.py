"""Scripted model servers on 127.0.0.1 for driving real coding agents offline (issue 17).

Two HTTP servers (stdlib ``http.server``, one thread per request) that answer an agent's model
API with a script instead of a model, so the agent runs real tools and writes a real
transcript:

- :class:`AnthropicServer`: the Anthropic Messages API as Claude Code uses it (``POST
  /v1/messages`` with ``stream: true``; Server-Sent Events ``message_start``,
  ``content_block_start``/``content_block_delta`` (``text_delta``, ``input_json_delta``)/
  ``content_block_stop``, ``message_delta``, ``message_stop``; ``/v1/messages/count_tokens``).
- :class:`ResponsesServer`: the OpenAI Responses API as Codex CLI uses it (``POST
  /v1/responses`` with ``stream: true``; events ``response.created``,
  ``response.output_item.done``, ``response.completed`` with usage).
- :class:`GeminiServer`: the Gemini API as Gemini CLI uses it (``POST
  /v1beta/models/<model>:streamGenerateContent?alt=sse``, unnamed ``data:`` events of
  ``GenerateContentResponse``; ``:generateContent`` and ``:countTokens`` answered plainly).

A script maps a *tag* to a list of steps. A prompt (or a subagent's task) carries its tag as
``[[tag]]``; the server finds the newest user message of the request that is not only tool
results (the prompt being answered), reads its tag and counts the model outputs after it
(assistant messages, or runs of Responses output items): that count
is the index of the step to answer. The servers are therefore stateless across retries and
resumes. A request without a tag (title generation, a summary for the agent's own compaction,
quota probes) gets :data:`FALLBACK_TEXT`, or the script's ``"*compact*"`` step when the request
asks for a summary. A step is a list of :class:`Text` and :class:`Call` outputs; a tag whose
steps are used up answers a short text, so the agent ends its turn.

Every request is appended to :attr:`ScriptedServer.log` (path, tag, step, the tools offered)
for the recorder's manifest.
"""

from __future__ import annotations

import json
import re
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

TAG = re.compile(r"\[\[([a-z0-9_-]+)\]\]")
FALLBACK_TEXT = "Done."
SUMMARY_HINTS = ("summary of the conversation", "create a detailed summary", "checkpoint")


def _asks_summary(last: str) -> bool:
    """Whether the request's last message asks for the agent's own compaction summary."""
    low = last.lower()
    return "<task-notification>" not in low and any(h in low for h in SUMMARY_HINTS)


@dataclass(frozen=True)
class Text:
    """A text answer (ends the agent's turn when it is the step's only output)."""

    text: str


@dataclass(frozen=True)
class Call:
    """A tool call: ``tool`` is a name the agent offers (or ``"shell"``: the server picks the
    agent's shell tool and shapes ``args`` for it from ``{"command": ...}``)."""

    tool: str
    args: dict[str, Any]


Step = list[Text | Call]
Script = dict[str, list[Step]]


@dataclass
class ScriptedServer:
    """A scripted model API on 127.0.0.1 (subclasses speak one API)."""

    script: Script
    model: str = "scripted-model"
    log: list[dict[str, Any]] = field(default_factory=list)
    port: int = 0
    _server: ThreadingHTTPServer | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    # -- lifecycle -----------------------------------------------------------------------

    def __enter__(self) -> Self:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                return

            def do_GET(self) -> None:  # noqa: N802
                self._json(200, {"data": [], "object": "list"})

            def do_HEAD(self) -> None:  # noqa: N802
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    body = {}
                status, events, doc = owner.answer(self.path, body)
                if events is None:
                    self._json(status, doc)
                    return
                payload = b"".join(
                    (f"event: {name}\n" if name else "").encode()
                    + f"data: {json.dumps(data)}\n\n".encode()
                    for name, data in events
                )
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def _json(self, status: int, doc: Any) -> None:
                data = json.dumps(doc).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.port = self._server.server_address[1]
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT``."""
        return f"http://127.0.0.1:{self.port}"

    # -- the script ----------------------------------------------------------------------

    def pick(self, tag: str | None, step: int, summary: bool) -> Step:
        """The outputs for ``step`` of ``tag`` (see the module docstring)."""
        if tag is None:
            if summary and "*compact*" in self.script:
                return self.script["*compact*"][0]
            return [Text(FALLBACK_TEXT)]
        steps = self.script.get(tag, [])
        return steps[step] if step < len(steps) else [Text(FALLBACK_TEXT)]

    def record(self, entry: dict[str, Any]) -> None:
        with self._lock:
            self.log.append(entry)

    def answer(
        self, path: str, body: dict[str, Any]
    ) -> tuple[int, list[tuple[str, Any]] | None, Any]:
        """``(status, SSE events or None, JSON document)`` for one request."""
        raise NotImplementedError


def _texts(content: Any) -> Iterator[str]:
    if isinstance(content, str):
        yield content
    elif isinstance(content, list):
        for block in content:
            if isinstance(block, dict):
                for key in ("text", "content"):
                    value = block.get(key)
                    if isinstance(value, str):
                        yield value
                    elif key == "content" and isinstance(value, list):
                        yield from _texts(value)


def _tag_of(texts: Iterator[str]) -> str | None:
    for text in texts:
        found = TAG.search(text)
        if found:
            return found.group(1)
    return None


class AnthropicServer(ScriptedServer):
    """The Anthropic Messages API (streamed), scripted."""

    def answer(
        self, path: str, body: dict[str, Any]
    ) -> tuple[int, list[tuple[str, Any]] | None, Any]:
        if path.startswith("/v1/messages/count_tokens"):
            return 200, None, {"input_tokens": 100}
        if not path.startswith("/v1/messages"):
            return 404, None, {"type": "error", "error": {"type": "not_found_error"}}
        messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
        tag, step = None, 0
        for i in range(len(messages) - 1, -1, -1):
            m = messages[i]
            if m.get("role") == "user" and not _only_results(m.get("content")):
                tag = _tag_of(_texts(m.get("content")))
                step = sum(1 for x in messages[i + 1 :] if x.get("role") == "assistant")
                break
        last = " ".join(_texts(messages[-1].get("content"))) if messages else ""
        summary = tag is None and _asks_summary(last)
        tools = [t.get("name") for t in body.get("tools") or [] if isinstance(t, dict)]
        outputs = self.pick(tag, step, summary)
        self.record(
            {
                "api": "anthropic",
                "tag": tag,
                "step": step,
                "summary": summary,
                "tools": tools,
                "outputs": [type(o).__name__ for o in outputs],
            }
        )
        blocks: list[dict[str, Any]] = []
        for out in outputs:
            if isinstance(out, Text):
                blocks.append({"type": "text", "text": out.text})
            else:
                name, args = _claude_call(out, tools)
                blocks.append(
                    {
                        "type": "tool_use",
                        "id": "toolu_" + uuid.uuid4().hex[:24],
                        "name": name,
                        "input": args,
                    }
                )
        stop = "tool_use" if any(b["type"] == "tool_use" for b in blocks) else "end_turn"
        message: dict[str, Any] = {
            "id": "msg_" + uuid.uuid4().hex[:24],
            "type": "message",
            "role": "assistant",
            "model": body.get("model") or self.model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": 120, "output_tokens": 1},
        }
        if not body.get("stream"):
            return (
                200,
                None,
                {
                    **message,
                    "content": blocks,
                    "stop_reason": stop,
                    "usage": {"input_tokens": 120, "output_tokens": 20},
                },
            )
        events: list[tuple[str, Any]] = [
            ("message_start", {"type": "message_start", "message": message})
        ]
        for index, block in enumerate(blocks):
            start: dict[str, Any]
            if block["type"] == "text":
                start = {"type": "text", "text": ""}
                delta = {"type": "text_delta", "text": block["text"]}
            else:
                start = {**block, "input": {}}
                delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
            events += [
                (
                    "content_block_start",
                    {"type": "content_block_start", "index": index, "content_block": start},
                ),
                (
                    "content_block_delta",
                    {"type": "content_block_delta", "index": index, "delta": delta},
                ),
                ("content_block_stop", {"type": "content_block_stop", "index": index}),
            ]
        events += [
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": stop, "stop_sequence": None},
                    "usage": {"output_tokens": 20},
                },
            ),
            ("message_stop", {"type": "message_stop"}),
        ]
        return 200, events, None


def _only_results(content: Any) -> bool:
    return (
        isinstance(content, list)
        and bool(content)
        and all(isinstance(b, dict) and b.get("type") == "tool_result" for b in content)
    )


def _claude_call(call: Call, tools: list[Any]) -> tuple[str, dict[str, Any]]:
    if call.tool == "shell":
        name = "bash" if "bash" in tools and "Bash" not in tools else "Bash"  # opencode: bash
        return name, {"command": call.args["command"], "description": "run a command"}
    if call.tool == "subagent":  # the Task tool (renamed Agent in some releases)
        name = next((t for t in ("Task", "Agent") if t in tools), "Task")
        return name, {"subagent_type": "general-purpose", **call.args}
    return call.tool, call.args


class ResponsesServer(ScriptedServer):
    """The OpenAI Responses API (streamed), scripted."""

    usage_tokens: int = 200

    def answer(
        self, path: str, body: dict[str, Any]
    ) -> tuple[int, list[tuple[str, Any]] | None, Any]:
        if not path.rstrip("/").endswith("/responses"):
            return 200, None, {"object": "list", "data": [{"id": self.model, "object": "model"}]}
        items = [i for i in body.get("input") or [] if isinstance(i, dict)]
        tag, step = None, 0
        for i in range(len(items) - 1, -1, -1):
            item = items[i]
            if item.get("type", "message") == "message" and item.get("role") == "user":
                tag = _tag_of(_texts(item.get("content")))
                step = _output_runs(items[i + 1 :])
                break
        last = " ".join(_texts(items[-1].get("content"))) if items else ""
        summary = tag is None and _asks_summary(last)
        tools = [
            t.get("name") or t.get("type") for t in body.get("tools") or [] if isinstance(t, dict)
        ]
        outputs = self.pick(tag, step, summary)
        self.record(
            {
                "api": "responses",
                "tag": tag,
                "step": step,
                "summary": summary,
                "tools": tools,
                "outputs": [type(o).__name__ for o in outputs],
            }
        )
        rid = "resp_" + uuid.uuid4().hex[:24]
        events: list[tuple[str, Any]] = [
            ("response.created", {"type": "response.created", "response": {"id": rid}})
        ]
        for out in outputs:
            if isinstance(out, Text):
                item = {
                    "type": "message",
                    "role": "assistant",
                    "id": "msg_" + uuid.uuid4().hex[:24],
                    "content": [{"type": "output_text", "text": out.text, "annotations": []}],
                }
            else:
                name, args = _codex_call(out, tools)
                item = {
                    "type": "function_call",
                    "id": "fc_" + uuid.uuid4().hex[:24],
                    "call_id": "call_" + uuid.uuid4().hex[:24],
                    "name": name,
                    "arguments": json.dumps(args),
                }
            events.append(
                ("response.output_item.done", {"type": "response.output_item.done", "item": item})
            )
        usage = {
            "input_tokens": self.usage_tokens,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 20,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": self.usage_tokens + 20,
        }
        events.append(
            (
                "response.completed",
                {"type": "response.completed", "response": {"id": rid, "usage": usage}},
            )
        )
        return 200, events, None


MODEL_ITEMS = frozenset(
    {"function_call", "custom_tool_call", "local_shell_call", "reasoning", "web_search_call"}
)


def _output_runs(items: list[dict[str, Any]]) -> int:
    """How many model responses follow: runs of model output items (assistant messages and
    calls) separated by tool outputs or user messages."""
    runs = 0
    inside = False
    for item in items:
        kind = item.get("type", "message")
        model = kind in MODEL_ITEMS or (kind == "message" and item.get("role") == "assistant")
        if model and not inside:
            runs += 1
        inside = model
    return runs


def _codex_call(call: Call, tools: list[Any]) -> tuple[str, dict[str, Any]]:
    if call.tool != "shell":
        return call.tool, call.args
    command = call.args["command"]
    if "exec_command" in tools:
        return "exec_command", {"cmd": command}
    if "shell_command" in tools:
        return "shell_command", {"command": command}
    return "shell", {"command": ["bash", "-lc", command]}


class GeminiServer(ScriptedServer):
    """The Gemini API (``generateContent``, streamed or not), scripted."""

    def answer(
        self, path: str, body: dict[str, Any]
    ) -> tuple[int, list[tuple[str, Any]] | None, Any]:
        if ":countTokens" in path:
            return 200, None, {"totalTokens": 100}
        if ":generateContent" not in path and ":streamGenerateContent" not in path:
            return 200, None, {"models": [{"name": "models/" + self.model}]}
        contents = [c for c in body.get("contents") or [] if isinstance(c, dict)]
        tag, step = None, 0
        for i in range(len(contents) - 1, -1, -1):
            c = contents[i]
            parts = [p for p in c.get("parts") or [] if isinstance(p, dict)]
            if c.get("role") == "user" and not all("functionResponse" in p for p in parts):
                tag = _tag_of(p["text"] for p in parts if isinstance(p.get("text"), str))
                step = sum(1 for x in contents[i + 1 :] if x.get("role") == "model")
                break
        tools = [
            d.get("name")
            for t in body.get("tools") or []
            if isinstance(t, dict)
            for d in t.get("functionDeclarations") or []
            if isinstance(d, dict)
        ]
        json_only = bool((body.get("generationConfig") or {}).get("responseJsonSchema")) or bool(
            (body.get("generationConfig") or {}).get("responseSchema")
        )
        outputs = self.pick(tag if tools else None, step, False)
        self.record(
            {
                "api": "gemini",
                "path": path.split("?")[0].rsplit(":", 1)[-1],
                "tag": tag,
                "step": step,
                "tools": tools,
                "outputs": [type(o).__name__ for o in outputs],
            }
        )
        if json_only:  # a side request (next speaker, loop check): a JSON answer
            text = json.dumps({"next_speaker": "user", "reasoning": "done"})
            outputs = [Text(text)]
        parts_out: list[dict[str, Any]] = []
        for out in outputs:
            if isinstance(out, Text):
                parts_out.append({"text": out.text})
            else:
                name, args = _gemini_call(out)
                parts_out.append({"functionCall": {"name": name, "args": args}})
        response = {
            "candidates": [
                {
                    "content": {"role": "model", "parts": parts_out},
                    "finishReason": "STOP",
                    "index": 0,
                }
            ],
            "usageMetadata": {
                "promptTokenCount": 120,
                "candidatesTokenCount": 20,
                "totalTokenCount": 140,
            },
            "modelVersion": self.model,
        }
        if ":streamGenerateContent" in path:
            return 200, [("", response)], None
        return 200, None, response


def _gemini_call(call: Call) -> tuple[str, dict[str, Any]]:
    if call.tool == "shell":
        return "run_shell_command", {"command": call.args["command"], "description": "run"}
    return call.tool, call.args
