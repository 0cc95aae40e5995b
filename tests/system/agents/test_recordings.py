"""Recordings of real agents (``fixtures/real/``, made by ``scripts/agents/record.py`` against
scripted model servers): compactctl reads each with the user prompts, assistant messages, tool
calls, results and errors of an independent count made from the native records, and compacts
them with every tool block whole (issue 17, "Done when").

The independent count reads the JSON records directly with its own rules (below), never
through compactctl; the scripted server's log in ``manifest.json`` (what the "model" sent)
is a third source for the tool calls.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from compactctl.formats.reader import load
from compactctl.model import Message, SummaryEvent
from compactctl.replay import replay

ROOT = Path(__file__).resolve().parents[3]
REAL = ROOT / "fixtures" / "real"
RECORDINGS = sorted(p for p in REAL.glob("*/") if (p / "manifest.json").is_file())


def _records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _blocks(record: dict[str, Any]) -> list[dict[str, Any]]:
    message = record.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def count_claude(path: Path) -> dict[str, int]:
    """Independent count of a Claude Code session file (main or subagent).

    prompts: ``user`` records whose content is a string not starting with ``<`` (tags that
    Claude Code injects), not ``isMeta``/``isCompactSummary``; assistant: distinct
    ``message.id``; calls/results: distinct ``tool_use`` ids / ``tool_result`` ids; errors:
    results with ``is_error``; compactions: ``compact_boundary`` records. A main file leaves
    sidechain records out; a subagent file is all sidechain.
    """
    records = _records(path)
    subagent = all(r.get("isSidechain") for r in records if r.get("type") in ("user", "assistant"))
    records = [r for r in records if subagent or not r.get("isSidechain")]
    prompts = 0
    assistant: set[str] = set()
    calls: set[str] = set()
    results: set[str] = set()
    errors = 0
    compactions = 0
    for r in records:
        kind = r.get("type")
        content = (r.get("message") or {}).get("content") if kind in ("user", "assistant") else None
        if kind == "user" and isinstance(content, str):
            if not (r.get("isMeta") or r.get("isCompactSummary") or content.startswith("<")):
                prompts += 1
        elif kind == "assistant":
            assistant.add(r["message"]["id"])
            calls.update(b["id"] for b in _blocks(r) if b.get("type") == "tool_use")
        if kind == "user":
            for b in _blocks(r):
                if b.get("type") == "tool_result" and b["tool_use_id"] not in results:
                    results.add(b["tool_use_id"])
                    errors += 1 if b.get("is_error") else 0
        if kind == "system" and r.get("subtype") == "compact_boundary":
            compactions += 1
    return {
        "prompts": prompts,
        "assistant": len(assistant),
        "calls": len(calls),
        "results": len(results),
        "errors": errors,
        "compactions": compactions,
    }


INJECTED = re.compile(r"^\s*(<|# AGENTS\.md)")


def _texts(content: Any) -> str:
    parts = content if isinstance(content, list) else []
    return "\n".join(str(p.get("text", "")) for p in parts if isinstance(p, dict))


def count_codex(path: Path) -> dict[str, int]:
    """Independent count of a Codex rollout.

    prompts: ``response_item`` user messages not starting with a tag or ``# AGENTS.md``;
    assistant: assistant message items; calls/results: call and ``*_output`` items; errors:
    the UI's ``item_completed`` events of commands with a non-zero ``exit_code`` (a record
    compactctl does not read); compactions: ``compacted`` records.
    """
    out = dict.fromkeys(("prompts", "assistant", "calls", "results", "errors", "compactions"), 0)
    for r in _records(path):
        p = r.get("payload") or {}
        kind = r.get("type")
        if kind == "compacted":
            out["compactions"] += 1
        elif kind == "response_item" and p.get("type") == "message":
            if p.get("role") == "user" and not INJECTED.match(_texts(p.get("content"))):
                out["prompts"] += 1
            elif p.get("role") == "assistant":
                out["assistant"] += 1
        elif kind == "response_item" and str(p.get("type")).endswith("_call"):
            out["calls"] += 1
        elif kind == "response_item" and str(p.get("type")).endswith("_output"):
            out["results"] += 1
        elif kind == "event_msg" and p.get("type") == "item_completed":
            item = p.get("item") or {}
            if item.get("type") == "CommandExecution" and item.get("exit_code") not in (0, None):
                out["errors"] += 1
    return out


def count_exec(path: Path) -> dict[str, int]:
    """Independent count of a ``codex exec --json`` stream: completed items by type."""
    out = dict.fromkeys(("prompts", "assistant", "calls", "results", "errors", "compactions"), 0)
    for r in _records(path):
        if r.get("type") != "item.completed":
            continue
        item = r["item"]
        if item.get("type") == "agent_message":
            out["assistant"] += 1
        elif item.get("type") == "command_execution":
            out["calls"] += 1
            out["results"] += 1
            out["errors"] += 1 if item.get("exit_code") not in (0, None) else 0
    return out


def count_gemini(path: Path) -> dict[str, int]:
    """Independent count of a Gemini CLI JSONL chat recording.

    The final message list: records by ``id`` (the last write wins, at the place of the first),
    ``{"$set": {"messages": [...]}}`` replacing the list (Gemini CLI does that when it resumes
    a session), ``{"$rewindTo": id}`` cutting it. prompts: ``user`` records with text parts
    not starting with ``<session_context>``; assistant: ``gemini`` records; calls: distinct
    ids of ``toolCalls`` and ``functionCall`` parts; results: distinct ``functionResponse``
    ids (in ``toolCalls[].result`` or in ``user`` records); errors: ``toolCalls`` with status
    ``error``.
    """
    order: list[str] = []
    latest: dict[str, dict[str, Any]] = {}
    for r in _records(path):
        if "$rewindTo" in r and r["$rewindTo"] in latest:
            cut = order.index(r["$rewindTo"])
            for mid in order[cut:]:
                del latest[mid]
            del order[cut:]
        elif isinstance((r.get("$set") or {}).get("messages"), list):
            order = [m["id"] for m in r["$set"]["messages"]]
            latest = {m["id"]: m for m in r["$set"]["messages"]}
        elif "type" in r and "id" in r:
            if r["id"] not in latest:
                order.append(r["id"])
            latest[r["id"]] = r
    out = dict.fromkeys(("prompts", "assistant", "calls", "results", "errors", "compactions"), 0)
    calls: set[str] = set()
    results: set[str] = set()
    for m in (latest[mid] for mid in order):
        parts = m.get("content") if isinstance(m.get("content"), list) else []
        texts = [p["text"] for p in parts if isinstance(p.get("text"), str)]
        if m["type"] == "user" and texts and not texts[0].startswith("<session_context>"):
            out["prompts"] += 1
        if m["type"] == "gemini":
            out["assistant"] += 1
        calls.update(p["functionCall"]["id"] for p in parts if "functionCall" in p)
        results.update(p["functionResponse"]["id"] for p in parts if "functionResponse" in p)
        for c in m.get("toolCalls") or []:
            calls.add(c["id"])
            results.update(p["functionResponse"]["id"] for p in c.get("result") or [])
            out["errors"] += 1 if c.get("status") == "error" else 0
    out["calls"], out["results"] = len(calls), len(results)
    return out


def count_opencode(path: Path) -> dict[str, int]:
    """Independent count of an opencode export (``{info, messages: [{info, parts}]}``).

    prompts: ``user`` messages with a text part that is not ``synthetic``; assistant: model
    calls (``step-finish`` parts of assistant messages that are not a ``summary``);
    calls: distinct ``tool`` part ``callID``; results: tool parts ``completed`` or ``error``;
    errors: tool parts ``error``; compactions: assistant messages with ``summary: true``.
    """
    doc = json.loads(path.read_text())
    out = dict.fromkeys(("prompts", "assistant", "calls", "results", "errors", "compactions"), 0)
    calls: set[str] = set()
    for m in doc["messages"]:
        info, parts = m["info"], m["parts"]
        if info["role"] == "user":
            texts = [p for p in parts if p["type"] == "text" and not p.get("synthetic")]
            out["prompts"] += 1 if texts else 0
        elif info.get("summary") is True:
            out["compactions"] += 1
        else:
            out["assistant"] += sum(1 for p in parts if p["type"] == "step-finish")
        for p in parts:
            if p["type"] == "tool":
                calls.add(p["callID"])
                status = p["state"]["status"]
                out["results"] += 1 if status in ("completed", "error") else 0
                out["errors"] += 1 if status == "error" else 0
    out["calls"] = len(calls)
    return out


def read_counts(path: Path, kind: str) -> dict[str, int]:
    """The same counts from compactctl's reading of the file (``kind``: ``claude``,
    ``codex``, ``gemini`` or ``exec``; Codex assistant messages are counted when they hold
    text, since the reader opens an empty one for calls that follow no text)."""
    _, events = load(str(path))
    msgs = [e for e in events if isinstance(e, Message)]

    def has_text(m: Message) -> bool:
        c = m.data.get("content")
        if isinstance(c, str):
            return bool(c)
        return any(isinstance(p, dict) and p.get("type") == "text" for p in c or [])

    return {
        "prompts": sum(1 for m in msgs if m.role == "user" and not m.data.get("isMeta")),
        "assistant": sum(1 for m in msgs if m.role == "assistant" and has_text(m))
        if kind not in ("claude", "gemini", "opencode")
        else sum(1 for m in msgs if m.role == "assistant"),
        "calls": sum(len(m.data.get("toolCalls") or []) for m in msgs),
        "results": sum(1 for m in msgs if m.role == "tool"),
        "errors": sum(1 for m in msgs if m.role == "tool" and m.data.get("isError")),
        "compactions": sum(1 for e in events if isinstance(e, SummaryEvent)),
    }


def transcripts() -> Iterator[tuple[str, Path, str]]:
    for rec in RECORDINGS:
        manifest = json.loads((rec / "manifest.json").read_text())
        for name in manifest["files"]:
            agent = manifest["agent"]
            kind = agent if agent in ("claude", "gemini", "opencode") else "codex"
            yield f"{rec.name}/{name}", rec / name, kind
        for name in manifest.get("execStreams", []):
            yield f"{rec.name}/{name}", rec / name, "exec"


CASES = list(transcripts())


def test_there_are_recordings_of_every_agent() -> None:
    agents = {json.loads((r / "manifest.json").read_text())["agent"] for r in RECORDINGS}
    assert agents == {"claude", "codex", "gemini", "opencode"}
    for rec in RECORDINGS:
        size = sum(p.stat().st_size for p in rec.rglob("*") if p.is_file())
        assert size < 1_000_000, (rec.name, size)


@pytest.mark.parametrize(("name", "path", "kind"), CASES, ids=[c[0] for c in CASES])
def test_recording_reads_as_the_independent_count(name: str, path: Path, kind: str) -> None:
    counters = {
        "claude": count_claude,
        "codex": count_codex,
        "gemini": count_gemini,
        "opencode": count_opencode,
    }
    expected = {**counters, "exec": count_exec}[kind](path)
    got = read_counts(path, kind)
    if kind == "exec":  # the stream has no prompts and no compaction records
        got["prompts"] = got["compactions"] = 0
    assert got == expected
    assert expected["calls"] > 0 and expected["results"] == expected["calls"]


@pytest.mark.parametrize("rec", RECORDINGS, ids=[r.name for r in RECORDINGS])
def test_tool_calls_equal_what_the_scripted_model_sent(rec: Path) -> None:
    manifest = json.loads((rec / "manifest.json").read_text())
    sent: dict[str, int] = {}
    for entry in manifest["server"]:
        if not entry["tools"]:
            continue  # a side request (opencode's title): its calls are never run
        key = "sub" if entry["tag"] == "sub" else "main"
        sent[key] = sent.get(key, 0) + entry["outputs"].count("Call")
    read: dict[str, int] = {}
    for name in manifest["files"]:
        key = "sub" if "subagents" in name else "main"
        read[key] = read.get(key, 0) + read_counts(rec / name, manifest["agent"])["calls"]
    assert read == sent


@pytest.mark.parametrize(("name", "path", "kind"), CASES, ids=[c[0] for c in CASES])
def test_recording_compacts_with_every_tool_block_whole(
    name: str, path: Path, kind: str, tmp_path: Path
) -> None:
    out = tmp_path / "out.jsonl"
    proc = subprocess.run(
        [sys.executable, "-m", "compactctl", "compact", "--force", "-o", str(out), str(path)],
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    _, events = load(str(out))
    view = [m for m in replay(events) if isinstance(m, Message)]
    calls = [c["id"] for m in view for c in m.data.get("toolCalls") or []]
    results = [m.data.get("toolCallId") for m in view if m.role == "tool"]
    assert sorted(calls) == sorted(r for r in results if r is not None)
    assert len(set(calls)) == len(calls)


RUN_STREAMS = [
    rec / name
    for rec in RECORDINGS
    for name in json.loads((rec / "manifest.json").read_text()).get("runStreams", [])
]


@pytest.mark.parametrize(
    "path", RUN_STREAMS, ids=[f"{p.parent.name}/{p.name}" for p in RUN_STREAMS]
)
def test_a_real_stream_no_reader_knows_is_refused(path: Path) -> None:
    """``opencode run --format json`` (no reader: read the export) exits 3 saying what it
    looks like, never 0 with lost content."""
    proc = subprocess.run(
        [sys.executable, "-m", "compactctl", "inspect", str(path)],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
    )
    assert proc.returncode == 3, proc.stdout
    assert "the file looks like JSON lines of" in proc.stderr
    assert "keys: type" in proc.stderr and "sessionID" in proc.stderr
    assert "It is the event stream of `opencode run --format json`" in proc.stderr
    assert "export the session with `opencode export ses_" in proc.stderr
