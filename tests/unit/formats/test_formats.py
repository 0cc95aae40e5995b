"""Importers (compactctl.formats) against the generated samples and hand-written fixtures.

The samples tell one story in several formats (docs/formats.md section 9); every importer must
yield the canonical sample's conversation: the same messages per role, tool calls, links,
turns, user texts and (where the format's tool wording allows) tool outputs. The fixtures
under ``fixtures/formats/`` cover what the samples do not: branches, sidechains, native
compaction, codex exec, OpenHands and SWE-agent documents, OpenAI chat variants.
"""

from __future__ import annotations

import doctest
import json
import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from compactctl import formats
from compactctl.formats import (
    FORMATS,
    _claude,
    _common,
    canonical,
    claude_code,
    claude_stream,
    codex_exec,
    codex_rollout,
    detect,
    detect_document,
    known_formats,
    openai_chat,
    openhands,
    swe_agent,
)
from tests.helpers import FIXTURES, SAMPLES

FORMAT_FIXTURES = FIXTURES / "formats"

CLAUDE_NAMES = {
    "bash": "Bash",
    "read_file": "Read",
    "edit_file": "Edit",
    "write_file": "Write",
    "grep": "Grep",
    "update_plan": "TodoWrite",
}
CODEX_NAMES = {
    "bash": "exec_command",
    "read_file": "exec_command",
    "grep": "exec_command",
    "edit_file": "apply_patch",
    "write_file": "apply_patch",
    "update_plan": "update_plan",
}
# roles that legitimately differ from the canonical sample, per format:
# Claude Code files and stream-json never contain the system prompt; Codex rollouts carry
# base_instructions plus the injected developer and <environment_context> items (system).
SYSTEM_MESSAGES = {
    "canonical": 1,
    "claude-code": 0,
    "claude-stream": 0,
    "codex-rollout": 3,
    "openai-chat": 1,
}
TOOL_NAMES = {
    "canonical": None,
    "claude-code": CLAUDE_NAMES,
    "claude-stream": CLAUDE_NAMES,
    "codex-rollout": CODEX_NAMES,
    "openai-chat": None,
}


# -- helpers -------------------------------------------------------------------------------


def read_jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line, record)`` pairs: orjson first, the stdlib for lone surrogates; a torn last
    line (no newline) and malformed lines are skipped, as the reader does."""
    data = path.read_bytes()
    lines = data.split(b"\n")
    lines.pop()  # "" after the final newline, or the torn last line
    for number, raw in enumerate(lines, 1):
        try:
            record = orjson.loads(raw)
        except orjson.JSONDecodeError:
            try:
                record = json.loads(raw.decode("utf-8", "surrogatepass"))
            except ValueError:
                continue
        if isinstance(record, dict):
            yield number, record


def import_file(name: str, path: Path) -> list[dict[str, Any]]:
    importer = FORMATS[name].to_canonical
    assert importer is not None
    return list(importer(read_jsonl(path)))


def messages(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in events if e.get("type") == "message"]


def text(event: dict[str, Any]) -> str:
    return _common.content_text(event.get("content"))


def summarize(events: list[dict[str, Any]]) -> dict[str, Any]:
    msgs = messages(events)
    calls = [c for m in msgs for c in m.get("toolCalls", [])]
    return {
        "roles": dict(Counter(m["role"] for m in msgs)),
        "calls": len(calls),
        "byName": dict(Counter(c["name"] for c in calls)),
        "turns": max((m["turnId"] for m in msgs), default=0),
        "errors": sum(1 for m in msgs if m["role"] == "tool" and m.get("isError")),
    }


def assert_links(events: list[dict[str, Any]]) -> None:
    """Every tool message answers a call made earlier; every call is answered."""
    seen: dict[str, str] = {}
    answered: set[str] = set()
    for m in messages(events):
        for call in m.get("toolCalls", []):
            seen[call["id"]] = call["name"]
        if m["role"] == "tool":
            assert m.get("toolCallId") in seen, m
            assert m.get("toolName") == seen[m["toolCallId"]]
            answered.add(m["toolCallId"])
    assert answered == set(seen)


def assert_well_formed(events: list[dict[str, Any]], *, lines: bool = True) -> None:
    uuids = [e["uuid"] for e in events]
    assert len(uuids) == len(set(uuids)), "uuids must be unique"
    for e in events:
        assert e["type"] in {"session", "message", "summary", "foreign"}
        if e["type"] == "message":
            assert isinstance(e["turnId"], int)
            assert e["role"] in {"system", "user", "assistant", "tool"}
            assert isinstance(e["content"], (str, list))
        if e["type"] == "foreign":
            assert len(orjson.dumps(e)) < 600, "foreign events must not copy payloads"
        if lines and e["type"] != "session":
            assert isinstance(e.get("sourceLine"), int), e
    assert_links(events)


def canonical_sample(name: str) -> list[dict[str, Any]]:
    return [r for _, r in read_jsonl(SAMPLES / f"{name}.canonical.jsonl")]


def meta(name: str) -> dict[str, Any]:
    return json.loads((SAMPLES / f"{name}.meta.json").read_text())


def by_role(events: list[dict[str, Any]], role: str) -> list[dict[str, Any]]:
    return [m for m in messages(events) if m["role"] == role]


# -- the small-s1 sample in every format ---------------------------------------------------

SMALL_FORMATS = ["canonical", "claude-code", "claude-stream", "codex-rollout", "openai-chat"]


@pytest.fixture(scope="module")
def small() -> dict[str, list[dict[str, Any]]]:
    return {name: import_file(name, SAMPLES / f"small-s1.{name}.jsonl") for name in SMALL_FORMATS}


def test_canonical_sample_matches_its_meta(small: dict[str, list[dict[str, Any]]]) -> None:
    m = meta("small-s1")
    s = summarize(small["canonical"])
    expected_roles = {k: v for k, v in m["messages"].items() if k != "total"}
    assert s["roles"] == expected_roles == {"system": 1, "user": 6, "assistant": 32, "tool": 28}
    assert s["calls"] == m["toolCalls"]["total"] == 28
    assert s["byName"] == m["toolCalls"]["byName"]
    assert s["turns"] == m["turns"] == 6
    assert s["errors"] == m["toolCalls"]["errors"]
    assert_links(small["canonical"])


@pytest.mark.parametrize("name", SMALL_FORMATS[1:])
def test_small_counts_match_canonical(name: str, small: dict[str, list[dict[str, Any]]]) -> None:
    m = meta("small-s1")
    events = small[name]
    s = summarize(events)
    expected = {k: v for k, v in m["messages"].items() if k != "total"}
    expected["system"] = SYSTEM_MESSAGES[name]
    assert {r: s["roles"].get(r, 0) for r in expected} == expected
    assert s["calls"] == m["toolCalls"]["total"]
    mapping = TOOL_NAMES[name]
    by_name: Counter[str] = Counter()
    for tool, n in m["toolCalls"]["byName"].items():
        by_name[mapping[tool] if mapping else tool] += n
    assert s["byName"] == dict(by_name)
    assert s["turns"] == m["turns"]
    # the OpenAI log has no error flag; the other formats report the three failures
    assert s["errors"] == (0 if name == "openai-chat" else m["toolCalls"]["errors"])
    calls_per_message = [len(x.get("toolCalls", [])) for x in by_role(events, "assistant")]
    assert sum(1 for n in calls_per_message if n) == m["toolCalls"]["assistantMessagesWithCalls"]
    assert sum(1 for n in calls_per_message if n > 1) == m["toolCalls"]["parallelCallMessages"]
    assert_well_formed(events)


@pytest.mark.parametrize("name", SMALL_FORMATS[1:])
def test_small_turns_and_texts_match_canonical(
    name: str, small: dict[str, list[dict[str, Any]]]
) -> None:
    reference = small["canonical"]
    events = small[name]
    for role in ("user", "assistant"):
        ours = by_role(events, role)
        theirs = by_role(reference, role)
        assert [text(x) for x in ours] == [text(x) for x in theirs], role
        assert [x["turnId"] for x in ours] == [x["turnId"] for x in theirs], role
    assert [x["turnId"] for x in by_role(events, "tool")] == [
        x["turnId"] for x in by_role(reference, "tool")
    ]


def test_small_openai_chat_is_the_canonical_conversation(
    small: dict[str, list[dict[str, Any]]],
) -> None:
    keys = ("role", "content", "toolCalls", "toolCallId", "toolName", "turnId")
    ours = messages(small["openai-chat"])
    theirs = messages(small["canonical"])
    assert [{k: m.get(k) for k in keys} for m in ours] == [
        {k: m.get(k) for k in keys} for m in theirs
    ]
    assert {text(m) for m in by_role(small["openai-chat"], "tool")} == {
        text(m) for m in by_role(small["canonical"], "tool")
    }


@pytest.mark.parametrize("name", ["claude-code", "claude-stream", "codex-rollout"])
def test_small_tool_outputs_match_canonical(
    name: str, small: dict[str, list[dict[str, Any]]]
) -> None:
    """Tool output texts equal the canonical ones where the tools' wording is the same:
    command output (Codex wraps it in an ``Exit code``/``Output:`` header, Claude prefixes
    failures with ``Exit code N``), file reads (Claude numbers the lines), searches.
    Edits and plans are worded differently per tool on purpose (docs/formats.md section 9)."""
    compared = 0
    for ours, theirs in zip(
        by_role(small[name], "tool"), by_role(small["canonical"], "tool"), strict=True
    ):
        assert ours["toolCallId"] and ours.get("isError") == theirs.get("isError")
        got = text(ours)
        want = text(theirs)
        tool = theirs["toolName"]
        if tool not in ("bash", "read_file", "grep"):
            continue
        if name == "codex-rollout":
            assert got.startswith("Exit code: ")
            got = got.split("Output:\n", 1)[1]
        elif tool == "read_file":
            got = re.sub(r"(?m)^ *\d+→", "", got)
        elif got.startswith("Exit code "):
            got = got.split("\n", 1)[1]
        assert got.rstrip("\n") == want.rstrip("\n")
        compared += 1
    assert compared == 20


def test_small_codex_tool_ids_are_the_canonical_call_ids(
    small: dict[str, list[dict[str, Any]]],
) -> None:
    ours = [m["toolCallId"] for m in by_role(small["codex-rollout"], "tool")]
    assert ours == [m["toolCallId"] for m in by_role(small["canonical"], "tool")]


def test_small_sessions(small: dict[str, list[dict[str, Any]]]) -> None:
    files = meta("small-s1")["files"]
    for name in ("claude-code", "claude-stream", "codex-rollout"):
        first = small[name][0]
        assert first["type"] == "session"
        assert first["sessionId"] == files[name]["sessionId"]
        assert first["model"]
    assert small["codex-rollout"][0]["model"] == "gpt-5-codex"
    assert small["codex-rollout"][0]["contextWindow"] == 272000
    assert all(e["type"] != "session" for e in small["openai-chat"])


def test_small_metadata_records_become_foreign(small: dict[str, list[dict[str, Any]]]) -> None:
    code = Counter(e["sourceType"] for e in small["claude-code"] if e["type"] == "foreign")
    assert code == {"file-history-snapshot": 6, "last-prompt": 6}
    stream = Counter(e["sourceType"] for e in small["claude-stream"] if e["type"] == "foreign")
    assert stream == {"system": 17, "rate_limit_event": 1, "result": 6}  # thinking_tokens
    codex = Counter(
        (e["sourceType"], e.get("subtype"))
        for e in small["codex-rollout"]
        if e["type"] == "foreign"
    )
    assert codex[("event_msg", "user_message")] == 6
    assert codex[("event_msg", "agent_message")] > 0
    assert codex[("turn_context", None)] == 6


def test_thinking_and_reasoning_are_opaque_parts(small: dict[str, list[dict[str, Any]]]) -> None:
    stream = by_role(small["claude-stream"], "assistant")
    thinking = [p for m in stream if isinstance(m["content"], list) for p in m["content"]]
    assert any(p["type"] == "thinking" and p["thinking"] for p in thinking)
    assert not any("Check what the last output actually says" in text(m) for m in stream)
    codex = by_role(small["codex-rollout"], "assistant")
    parts = [p for m in codex if isinstance(m["content"], list) for p in m["content"]]
    reasoning = [p for p in parts if p["type"] == "reasoning"]
    assert reasoning and all(p["encrypted_content"] for p in reasoning)
    assert not any("Planning the fix" in text(m) for m in codex)


def test_duplicate_tool_results_are_measured_not_counted(
    small: dict[str, list[dict[str, Any]]],
) -> None:
    for name in ("claude-code", "claude-stream"):
        tools = by_role(small[name], "tool")
        assert all(isinstance(m.get("duplicateBytes"), int) for m in tools)
        assert sum(m["duplicateBytes"] for m in tools) > 10_000
        assert not any("oldTodos" in text(m) for m in tools)


def test_claude_code_dangling_parent_falls_back_to_file_order(
    small: dict[str, list[dict[str, Any]]],
) -> None:
    dangling = meta("small-s1")["files"]["claude-code"]["danglingParentUuids"]
    marked = [e for e in small["claude-code"] if "danglingParentUuid" in e]
    assert [e["danglingParentUuid"] for e in marked] == dangling
    assert marked[0]["role"] == "user" and marked[0]["sourceLine"] == 41

    # nothing before the orphan was lost: turn 1 is complete
    def turn_one(events: list[dict[str, Any]]) -> int:
        return sum(1 for m in messages(events) if m["turnId"] == 1)

    assert turn_one(small["claude-code"]) == turn_one(small["canonical"]) == 24


def test_imports_are_deterministic() -> None:
    for name in SMALL_FORMATS:
        path = SAMPLES / f"small-s1.{name}.jsonl"
        assert import_file(name, path) == import_file(name, path)


# -- messy-s2: Claude Code against its canonical twin --------------------------------------


@pytest.fixture(scope="module")
def messy() -> list[dict[str, Any]]:
    return import_file("claude-code", SAMPLES / "messy-s2.claude-code.jsonl")


def test_messy_claude_code_counts(messy: list[dict[str, Any]]) -> None:
    m = meta("messy-s2")
    s = summarize(messy)
    assert s["roles"] == {"user": 4, "assistant": 26, "tool": 26}  # no system prompt in file
    assert s["calls"] == m["toolCalls"]["total"] == 26
    assert s["byName"] == dict(
        Counter({CLAUDE_NAMES[k]: v for k, v in m["toolCalls"]["byName"].items()})
    )
    assert s["turns"] == m["turns"] == 4
    assert s["errors"] == m["toolCalls"]["errors"] == 2
    assert_well_formed(messy)


def test_messy_claude_code_matches_canonical_texts(messy: list[dict[str, Any]]) -> None:
    reference = canonical_sample("messy-s2")
    for role in ("user", "assistant"):
        assert [text(x) for x in by_role(messy, role)] == [
            text(x) for x in by_role(reference, role)
        ]
    # the pasted screenshot: same parts (the Claude file puts the image block first)
    ours = by_role(messy, "user")[0]["content"]
    theirs = by_role(reference, "user")[0]["content"]
    key = json.dumps
    assert sorted(map(key, ours)) == sorted(map(key, theirs))


def test_messy_claude_code_defects(messy: list[dict[str, Any]]) -> None:
    m = meta("messy-s2")
    defects = m["files"]["claude-code"]["defects"]
    lines = {e.get("sourceLine") for e in messy}
    for bad in defects["malformedLines"] + defects["tornLastLine"]:
        assert bad not in lines
    unknown = [e for e in messy if e.get("sourceLine") in defects["unknownTypeLines"]]
    assert [e["type"] for e in unknown] == ["foreign"]
    assert unknown[0]["sourceType"] == "session-heartbeat"
    (long,) = [e for e in messy if e.get("sourceLine") in defects["longLines"]]
    reference = {x.get("toolCallId"): x for x in canonical_sample("messy-s2")}
    want = reference[m["messy"]["longLineCallId"]]["content"]
    assert long["role"] == "tool" and text(long).endswith(want[-2000:])
    (surrogate,) = [e for e in messy if e.get("sourceLine") in defects["invalidSurrogateLines"]]
    assert surrogate["role"] == "tool" and surrogate["content"]
    dangling = [e["danglingParentUuid"] for e in messy if "danglingParentUuid" in e]
    assert dangling == m["files"]["claude-code"]["danglingParentUuids"]


# -- hand-written fixtures -----------------------------------------------------------------


def test_claude_code_branches_sidechains_and_compaction() -> None:
    events = import_file("claude-code", FORMAT_FIXTURES / "claude-code-branches.jsonl")
    assert_well_formed(events)
    s = summarize(events)
    assert s["roles"] == {"user": 6, "assistant": 6, "tool": 3}
    assert s["byName"] == {"Bash": 1, "Read": 2}
    assert s["turns"] == 4 and s["errors"] == 1
    foreign = {e["sourceLine"]: e for e in events if e["type"] == "foreign"}
    assert foreign[8]["sourceType"] == foreign[9]["sourceType"] == "branch"
    assert foreign[11]["sourceType"] == foreign[12]["sourceType"] == "sidechain"
    assert foreign[11]["agentId"] == "a3f9"
    assert foreign[22]["reason"] == "apiError"
    assert foreign[25]["sourceType"] == "attachment"
    assert foreign[29]["sourceType"] == "summary"  # a title, not a compaction
    texts = [text(m) for m in messages(events)]
    assert "Use tabs." not in texts and "Use two spaces, like the rest of the project." in texts
    (summary,) = [e for e in events if e["type"] == "summary"]
    before = [m["uuid"] for m in messages(events) if m["sourceLine"] < 18]
    assert summary["replaces"] == before and len(before) == 10
    assert summary["triggerMode"] == "manual" and summary["stats"] == {"preTokens": 51234}
    assert summary["summaryText"].startswith("This session is being continued")
    assert summary["model"] == "claude-code" and summary["lastSummarizedTurnId"] == 2
    assert summary["uuid"] == "u16" and summary["boundaryLine"] == 18
    assert not any(t.startswith("This session is being continued") for t in texts)
    meta_users = [m for m in by_role(events, "user") if m.get("isMeta")]
    assert [m["sourceLine"] for m in meta_users] == [16, 20]
    (orphan,) = [e for e in events if "danglingParentUuid" in e]
    assert orphan["uuid"] == "u18" and orphan["turnId"] == 3
    first = by_role(events, "assistant")[0]
    assert first["uuid"] == "u2" and first["content"][0]["type"] == "thinking"
    assert text(first) == "Looking at the report command."
    redacted = [m for m in by_role(events, "assistant") if m["uuid"] == "u20"][0]
    assert redacted["content"][0] == {"type": "redacted_thinking", "data": "EmwKAhgBEgy3redacted"}
    tools = by_role(events, "tool")
    # two results in one line: the first keeps the line's uuid, the second gets a derived one
    assert tools[1]["uuid"] == "u12" and tools[2]["uuid"] not in ("u12", "u13")
    assert tools[1]["isError"] is True
    assert tools[1]["duplicateBytes"] == len("Error: File does not exist.")
    image_result = tools[2]["content"]
    assert [p["type"] for p in image_result] == ["text", "image"]
    assert image_result[1]["mediaType"] == "image/png"
    prompt = [m for m in by_role(events, "user") if m["uuid"] == "u23"][0]
    assert prompt["content"][1] == {
        "type": "image",
        "mediaType": "image/png",
        "data": "iVBORw0KGgo=",
    }
    lines = [e["sourceLine"] for e in events if e["type"] != "session"]
    assert lines == sorted(lines)


def test_claude_code_leaf_prefers_newer_records_after_last_prompt() -> None:
    records = list(read_jsonl(FORMAT_FIXTURES / "claude-code-branches.jsonl"))
    extra = {
        "parentUuid": "u24",
        "type": "user",
        "uuid": "u25",
        "sessionId": "7f1c2a9e-0b4d-4c1e-9a55-3d2f8e6b1c00",  # the file's session
        "timestamp": "2025-07-01T09:30:00.000Z",
        "message": {"role": "user", "content": "One more thing."},
    }
    events = list(claude_code.to_canonical([*records, (31, extra)]))
    assert messages(events)[-1]["uuid"] == "u25" and messages(events)[-1]["turnId"] == 5
    # a newer record on another branch does not override the last-prompt leaf
    other = {**extra, "uuid": "u26", "parentUuid": "u7"}
    events = list(claude_code.to_canonical([*records, (31, other)]))
    assert messages(events)[-1]["uuid"] == "u24"
    assert any(e.get("sourceLine") == 31 and e["sourceType"] == "branch" for e in events)
    # a record of a later session that extends the leaf is the session resumed in its file
    resumed = {**extra, "sessionId": "another-session"}
    events = list(claude_code.to_canonical([*records, (31, resumed)]))
    assert messages(events)[-1]["uuid"] == "u25"
    # a record of another format (stream-json: session_id, no sessionId) is never on it
    stray = {k: v for k, v in extra.items() if k != "sessionId"} | {"session_id": "x"}
    events = list(claude_code.to_canonical([*records, (31, stray)]))
    assert messages(events)[-1]["uuid"] == "u24"
    assert [e["sourceType"] for e in events if e.get("sourceLine") == 31] == ["branch"]


def _parallel_calls(results_first: str) -> list[tuple[int, dict[str, Any]]]:
    """Claude Code 2.1.328's parallel calls: one assistant line per ``tool_use`` (same
    ``message.id``), each result line parented on its own call; the results in either order
    (``results_first``: the call answered first), as the live test saw both."""

    def rec(uuid: str, parent: str | None, kind: str, content: Any, **extra: Any):
        return {"parentUuid": parent, "type": kind, "uuid": uuid, "sessionId": "s",
                "timestamp": "2026-01-01T00:00:00.000Z",
                "message": {"role": kind, "content": content, **extra}}  # fmt: skip

    def call(cid: str) -> list[dict[str, Any]]:
        return [{"type": "tool_use", "id": cid, "name": "Bash", "input": {"command": cid}}]

    def result(cid: str) -> list[dict[str, Any]]:
        return [{"type": "tool_result", "tool_use_id": cid, "content": f"out {cid}"}]

    later = "A" if results_first == "B" else "B"
    first_parent, later_parent = ("b", "a") if results_first == "B" else ("a", "b")
    lines = [
        rec("u", None, "user", "run both"),
        rec("a", "u", "assistant", call("A"), id="msg1"),
        rec("b", "a", "assistant", call("B"), id="msg1"),
        rec("r1", first_parent, "user", result(results_first)),
        rec("r2", later_parent, "user", result(later)),
        rec("z", "r2", "assistant", [{"type": "text", "text": "done"}], id="msg2"),
    ]
    return list(enumerate(lines, 1))


@pytest.mark.parametrize("results_first", ["A", "B"])
def test_claude_code_parallel_calls_keep_every_call_and_result(results_first: str) -> None:
    events = messages(list(claude_code.to_canonical(_parallel_calls(results_first))))
    assert [m["role"] for m in events] == ["user", "assistant", "tool", "tool", "assistant"]
    assert [c["id"] for c in events[1]["toolCalls"]] == ["A", "B"]
    later = "A" if results_first == "B" else "B"
    assert [m["toolCallId"] for m in events[2:4]] == [results_first, later]


def test_claude_stream_subagents_compaction_and_turns_without_prompts() -> None:
    events = import_file("claude-stream", FORMAT_FIXTURES / "claude-stream-compact.jsonl")
    assert_well_formed(events)
    s = summarize(events)
    assert s["roles"] == {"assistant": 4, "tool": 2}
    assert s["turns"] == 2 and s["errors"] == 1
    sidechain = [e for e in events if e.get("sourceType") == "sidechain"]
    assert [e["sourceLine"] for e in sidechain] == [4, 5, 6]
    (summary,) = [e for e in events if e["type"] == "summary"]
    assert summary["replaces"] == ["a1", "u1", "a3"]
    assert summary["triggerMode"] == "auto" and summary["stats"] == {"preTokens": 155000}
    assert "Config is loaded" in summary["summaryText"]
    assert all(isinstance(e.get("timestamp"), str) for e in events)


def test_claude_stream_boundary_without_summary_line_gets_placeholder() -> None:
    answer = {"id": "m1", "role": "assistant", "content": [{"type": "text", "text": "yo"}]}
    records = [
        (1, {"type": "system", "subtype": "init", "session_id": "s", "model": "m"}),
        (2, {"type": "user", "session_id": "s", "uuid": "p", "timestamp": "t1",
             "message": {"role": "user", "content": "hi"}}),
        (3, {"type": "assistant", "session_id": "s", "uuid": "a", "message": answer}),
        (4, {"type": "system", "subtype": "compact_boundary", "session_id": "s", "uuid": "b",
             "compact_metadata": {"trigger": "manual", "pre_tokens": 10}}),
        (5, {"type": "user", "session_id": "s", "uuid": "q", "timestamp": "t2",
             "message": {"role": "user", "content": "next"}}),
    ]  # fmt: skip
    events = list(claude_stream.to_canonical(records))
    (summary,) = [e for e in events if e["type"] == "summary"]
    assert summary["replaces"] == ["p", "a"] and summary["sourceLine"] == 4
    assert "not recorded" in summary["summaryText"]
    assert messages(events)[-1]["turnId"] == 2


def test_claude_message_between_boundary_and_summary_is_not_replaced() -> None:
    """Claude Code sends everything after a ``compact_boundary``: a message between it and
    the summary line stays in the context (the summary replaces what came before the
    boundary), and at the start of a file, with nothing before the boundary, the summary is
    a ``summaryOf`` message in its place (``compact --as native`` writes both)."""
    answer = {"id": "m1", "role": "assistant", "content": [{"type": "text", "text": "yo"}]}
    boundary = {"type": "system", "subtype": "compact_boundary", "session_id": "s", "uuid": "b",
                "compact_metadata": {"trigger": "manual", "pre_tokens": 10}}  # fmt: skip
    kept = {"type": "user", "session_id": "s", "uuid": "q", "timestamp": "t2",
            "message": {"role": "user", "content": "the first request, kept"}}  # fmt: skip
    continued = {"role": "user", "content": "This session is being continued"}
    summary_line = {"type": "user", "session_id": "s", "uuid": "c", "isCompactSummary": True,
                    "message": continued}  # fmt: skip
    records = [
        (1, {"type": "user", "session_id": "s", "uuid": "p", "timestamp": "t1",
             "message": {"role": "user", "content": "hi"}}),
        (2, {"type": "assistant", "session_id": "s", "uuid": "a", "message": answer}),
        (3, boundary), (4, kept), (5, summary_line),
    ]  # fmt: skip
    events = list(claude_stream.to_canonical(records))
    (summary,) = [e for e in events if e["type"] == "summary"]
    assert summary["replaces"] == ["p", "a"] and summary["boundaryLine"] == 3
    assert [text(m) for m in messages(events)] == ["hi", "yo", "the first request, kept"]
    events = list(claude_stream.to_canonical(records[2:]))
    assert not [e for e in events if e["type"] == "summary"]
    assert [(text(m), m.get("summaryOf")) for m in messages(events)] == [
        ("the first request, kept", None),
        ("This session is being continued", "c"),
    ]


def test_codex_rollout_compaction_outputs_and_parts() -> None:
    events = import_file("codex-rollout", FORMAT_FIXTURES / "codex-rollout-compacted.jsonl")
    assert_well_formed(events)
    s = summarize(events)
    assert s["roles"] == {"system": 3, "user": 2, "assistant": 6, "tool": 4}
    assert s["byName"] == {"shell": 2, "apply_patch": 1, "local_shell": 1}
    assert s["turns"] == 2 and s["errors"] == 1
    session = events[0]
    assert session["model"] == "gpt-5.1-codex" and session["contextWindow"] == 258400
    calls = {c["id"]: c for m in messages(events) for c in m.get("toolCalls", [])}
    assert calls["call_A1"]["arguments"] == '{"command":["bash","-lc","rg -n flip src"]'
    assert calls["call_A2"]["arguments"]["workdir"] == "/home/dev/work/geo"
    assert calls["call_A3"]["arguments"]["input"].startswith("*** Begin Patch")
    assert calls["call_B1"]["arguments"]["command"] == ["cargo", "test", "tiles"]
    tools = {m["toolCallId"]: m for m in by_role(events, "tool")}
    assert tools["call_A1"]["content"] == "rg: unrecognized flag\n"
    assert tools["call_A1"]["exitCode"] == 2 and tools["call_A1"]["isError"] is True
    assert tools["call_A3"]["exitCode"] == 0 and "isError" not in tools["call_A3"]
    assert tools["call_B1"]["content"] == "test tiles::orientation ... ok\n"
    prompt = by_role(events, "user")[0]
    assert prompt["content"][1] == {
        "type": "image",
        "mediaType": "image/png",
        "data": "iVBORw0KGgoAAAANSUhEUg==",
    }
    first = by_role(events, "assistant")[0]
    assert first["content"][0]["type"] == "reasoning" and text(first) == ""
    (summary,) = [e for e in events if e["type"] == "summary"]
    replaced = {m["uuid"]: m for m in messages(events) if m["uuid"] in summary["replaces"]}
    assert len(replaced) == len(summary["replaces"]) == 7
    assert {m["role"] for m in replaced.values()} == {"assistant", "tool"}
    assert summary["summaryText"].startswith("Summary: the user reported")
    # the model's own web search stays in the context, as an opaque part (issue 17)
    (searched,) = [
        m
        for m in messages(events)
        if isinstance(m["content"], list)
        and any(p.get("type") == "web_search_call" for p in m["content"])
    ]
    assert searched["role"] == "assistant" and text(searched).startswith("Fixed: tiles")
    assert by_role(events, "system")[1]["sourceRole"] == "developer"


def test_codex_exec_items_split_into_call_and_result() -> None:
    events = import_file("codex-exec", FORMAT_FIXTURES / "codex-exec-s1.jsonl")
    assert_well_formed(events)
    s = summarize(events)
    assert s["roles"] == {"assistant": 9, "tool": 6}
    assert s["calls"] == 6 and s["turns"] == 2 and s["errors"] == 2
    assert s["byName"] == {
        "command_execution": 2,
        "file_change": 2,
        "mcp__github__create_issue": 1,
        "mcp__github__add_labels": 1,
    }
    assert events[0]["sessionId"] == "0199a213-81c0-7800-8aa1-bbab2a035a53"
    tools = {m["toolCallId"]: m for m in by_role(events, "tool")}
    assert tools["item_1"]["exitCode"] == 1 and tools["item_1"]["isError"] is True
    assert tools["item_7"]["content"] == "add CHANGELOG.md\ndelete src/legacy.py"
    assert tools["item_6"]["content"] == "Created issue #42"
    assert tools["item_8"]["content"] == "label 'money' does not exist"
    first_call = by_role(events, "assistant")[0]
    assert first_call["content"] == [
        {"type": "reasoning", "text": "**Looking for the failing test**"}
    ]
    kinds = Counter(e["sourceType"] for e in events if e["type"] == "foreign")
    assert kinds == {"turn.started": 2, "turn.completed": 2, "item.started": 2, "item.completed": 1}


def test_openai_chat_variants() -> None:
    events = import_file("openai-chat", FORMAT_FIXTURES / "openai-chat-variants.jsonl")
    assert_well_formed(events)
    s = summarize(events)
    assert s["roles"] == {"system": 1, "user": 2, "assistant": 4, "tool": 2}
    assert s["turns"] == 2
    calls = [c for m in messages(events) for c in m.get("toolCalls", [])]
    assert calls[0]["arguments"] == '{"path": "."'  # invalid JSON kept raw
    assert calls[1]["name"] == "read_file" and calls[1]["arguments"] == {"path": "a.py"}
    legacy = by_role(events, "tool")[1]
    assert legacy["toolCallId"] == calls[1]["id"] and legacy["toolName"] == "read_file"
    reasoning = by_role(events, "assistant")[2]
    assert reasoning["content"][0] == {"type": "reasoning", "text": "The file is a one-liner."}
    assert text(reasoning) == "a.py prints hi."
    image = by_role(events, "user")[1]["content"][1]
    assert image == {"type": "image", "mediaType": "image/jpeg", "data": "/9j/4AAQ"}
    assert by_role(events, "assistant")[3]["refusal"].startswith("I can't")
    assert [e["sourceType"] for e in events if e["type"] == "foreign"] == ["metadata"]
    assert [m.get("sourceIndex") for m in messages(events)[:4]] == [None, 1, 2, 3]


def test_openai_chat_document() -> None:
    doc = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]
    events = list(openai_chat.document_to_canonical(doc))
    assert [e["sourceIndex"] for e in events] == [0, 1]
    assert list(openai_chat.document_to_canonical({"messages": doc})) == events
    assert detect_document(doc) == "openai-chat"
    assert detect_document({"messages": doc}) == "openai-chat"


def test_openhands_document() -> None:
    doc = json.loads((FORMAT_FIXTURES / "openhands-s1.json").read_text())
    events = list(openhands.document_to_canonical(doc))
    assert_well_formed(events, lines=False)
    s = summarize(events)
    assert s["roles"] == {"system": 1, "user": 2, "assistant": 7, "tool": 6}
    assert s["byName"] == {"execute_bash": 2, "str_replace_editor": 4}
    assert s["turns"] == 2 and s["errors"] == 2
    assert events[0]["type"] == "session"
    assert events[0]["model"] == "litellm_proxy/claude-sonnet-4-20250514"
    by_id = {e.get("sourceId"): e for e in events}
    grouped = by_id[7]
    assert [c["id"] for c in grouped["toolCalls"]] == ["toolu_01B", "toolu_01C"]
    assert 8 not in by_id  # the second action of that response is merged into event 7
    assert grouped["toolCalls"][0]["arguments"] == {
        "command": "view",
        "path": "/workspace/datekit/src/datekit/parse.py",
    }
    assert by_id[6]["exitCode"] == 1 and by_id[6]["isError"] is True
    assert by_id[12]["isError"] is True and "exitCode" not in by_id[12]
    summary = by_id[13]
    assert summary["type"] == "summary" and summary["triggerMode"] == "auto"
    replaced = [by_id[i]["uuid"] for i in (5, 6, 7, 9, 10, 11, 12)]
    assert summary["replaces"] == replaced
    assert summary["summaryText"].startswith("USER_CONTEXT:")
    finish = by_id[21]
    assert "toolCalls" not in finish and finish["unansweredCalls"][0]["name"] == "finish"
    assert text(finish).startswith("Fixed the fixture date")
    foreign = Counter(e.get("subtype") for e in events if e["type"] == "foreign")
    assert foreign == {"recall": 2, "agent_state_changed": 3}
    assert all(isinstance(e.get("sourceIndex"), int) for e in events if e["type"] != "session")
    # an eval record wrapping the same events
    wrapped = {
        "instance_id": "datekit-1",
        "history": doc,
        "metadata": {"llm_config": {"model": "x"}},
    }
    again = list(openhands.document_to_canonical(wrapped))
    assert again[0]["sessionId"] == "datekit-1" and again[0]["model"] == "x"
    assert detect_document(wrapped) == "openhands"


def test_openhands_second_condensation_replaces_the_first_summary() -> None:
    doc = json.loads((FORMAT_FIXTURES / "openhands-s1.json").read_text())
    doc.append(
        {"id": 23, "source": "agent", "action": "condensation",
         "args": {"forgotten_event_ids": [14, 15], "summary": None}}
    )  # fmt: skip
    events = list(openhands.document_to_canonical(doc))
    first, second = [e for e in events if e["type"] == "summary"]
    assert second["replaces"][-1] == first["uuid"] and len(second["replaces"]) == 3
    assert second["summaryText"] == "[OpenHands condensation: 2 earlier events forgotten]"


def test_swe_agent_document() -> None:
    doc = json.loads((FORMAT_FIXTURES / "swe-agent-s1.traj").read_text())
    events = list(swe_agent.document_to_canonical(doc))
    assert_well_formed(events, lines=False)
    s = summarize(events)
    assert s["roles"] == {"system": 1, "user": 3, "assistant": 6, "tool": 5}
    assert s["byName"] == {"bash": 2, "str_replace_editor": 2, "submit": 1}
    assert s["turns"] == 1 and s["errors"] == 0
    assert events[0] == {
        "type": "session",
        "uuid": events[0]["uuid"],
        "model": "claude-3-5-sonnet-20241022",
        "source": "swe-agent",
        "sessionId": "marshmallow-code__marshmallow-1867",
    }
    users = by_role(events, "user")
    assert users[0]["isDemo"] is True and users[0]["turnId"] == 0 and users[0]["isMeta"] is True
    assert users[1]["turnId"] == 1 and "isMeta" not in users[1]
    assert text(users[1]).startswith("<uploaded_files>")
    assert users[2]["isMeta"] is True and users[2]["messageType"] == "observation"
    assert [e["sourceType"] for e in events if e["type"] == "foreign"] == ["trajectory", "info"]
    assert [e for e in events if e["type"] == "foreign"][0]["steps"] == 6
    mini = {"info": {"config": {"model": {"model_name": "gpt-4.1"}}}, "messages": doc["history"],
            "trajectory_format": "mini-swe-agent-1.1"}  # fmt: skip
    assert detect_document(mini) == "swe-agent"
    assert next(swe_agent.document_to_canonical(mini))["model"] == "gpt-4.1"


JUNK: list[dict[str, Any]] = [
    {},
    {"type": "assistant"},
    {"type": "assistant", "message": {"id": "m", "content": "plain text"}},
    {"type": "user", "message": {"content": 5}},
    {"type": "user", "message": {"content": [{"type": "tool_result"}, "x", None]}},
    {"type": "system", "subtype": "compact_boundary"},
    {"type": "system", "subtype": "init"},
    {"type": "response_item", "payload": "not a dict"},
    {"type": "response_item", "payload": {"type": "message", "role": "user", "content": None}},
    {"type": "response_item", "payload": {"type": "function_call", "arguments": "{bad"}},
    {"type": "response_item", "payload": {"type": "function_call_output", "output": None}},
    {"type": "compacted", "payload": {}},
    {"type": "item.completed", "item": {"type": "command_execution"}},
    {"type": "item.completed", "item": {"type": "mcp_tool_call", "error": "boom"}},
    {"type": "item.completed", "item": None},
    {"role": "assistant", "tool_calls": [None, {"function": None}], "function_call": {}},
    {"role": "tool"},
    {"role": "function", "name": "x", "content": [{"type": "image_url", "image_url": "u"}]},
    {"messages": [None, {"role": "user", "content": [1, {"type": "x"}]}]},
]


@pytest.mark.parametrize("name", [n for n, f in FORMATS.items() if f.to_canonical])
def test_line_importers_survive_odd_records(name: str) -> None:
    importer = FORMATS[name].to_canonical
    assert importer is not None
    records = list(enumerate(JUNK, 1))
    events = list(importer(records))
    if name == "canonical":  # a pass-through: it yields what it is given
        assert events == JUNK
    else:
        assert all(isinstance(e, dict) and e.get("type") for e in events)
        uuids = [e["uuid"] for e in events]
        assert len(uuids) == len(set(uuids))
    assert list(importer([])) == []


@pytest.mark.parametrize("name", ["openhands", "swe-agent", "openai-chat"])
def test_document_importers_survive_odd_documents(name: str) -> None:
    importer = FORMATS[name].document_to_canonical
    assert importer is not None
    odd: list[Any] = [
        None,
        [],
        {},
        "x",
        [{"id": 1, "action": "run"}, {"id": 2, "observation": "run", "cause": 1}],
        {"history": [None, {"role": "user"}], "trajectory": None, "info": None},
        {"messages": [{"role": "assistant", "tool_calls": "nope"}]},
    ]
    for doc in odd:
        assert all(isinstance(e, dict) for e in importer(doc))


# -- detection and the registry ------------------------------------------------------------

LINE_FILES = [
    (SAMPLES / "small-s1.canonical.jsonl", "canonical"),
    (SAMPLES / "messy-s2.canonical.jsonl", "canonical"),
    (SAMPLES / "cjk-s3.canonical.jsonl", "canonical"),
    (SAMPLES / "small-s1.claude-code.jsonl", "claude-code"),
    (SAMPLES / "messy-s2.claude-code.jsonl", "claude-code"),
    (SAMPLES / "small-s1.claude-stream.jsonl", "claude-stream"),
    (SAMPLES / "small-s1.codex-rollout.jsonl", "codex-rollout"),
    (SAMPLES / "small-s1.openai-chat.jsonl", "openai-chat"),
    (FORMAT_FIXTURES / "claude-code-branches.jsonl", "claude-code"),
    (FORMAT_FIXTURES / "claude-stream-compact.jsonl", "claude-stream"),
    (FORMAT_FIXTURES / "codex-rollout-compacted.jsonl", "codex-rollout"),
    (FORMAT_FIXTURES / "codex-exec-s1.jsonl", "codex-exec"),
    (FORMAT_FIXTURES / "openai-chat-variants.jsonl", "openai-chat"),
]


@pytest.mark.parametrize(("path", "name"), LINE_FILES, ids=lambda v: getattr(v, "name", v))
def test_detect_line_formats(path: Path, name: str) -> None:
    first = [r for _, r in read_jsonl(path)][:20]
    assert detect(first) == name
    assert detect(first[:1]) == name  # the first record alone is enough


def test_detect_unknown_and_documents() -> None:
    assert detect([]) is None
    assert detect([{"foo": 1}, {"type": "weird"}, {"role": "wizard"}]) is None
    assert detect([{"type": "summary", "summary": "A title", "leafUuid": "x"}]) == "claude-code"
    assert (
        detect([{"type": "message", "role": "user", "content": [{"type": "input_text"}]}]) is None
    )
    doc = json.loads((FORMAT_FIXTURES / "openhands-s1.json").read_text())
    assert detect_document(doc) == "openhands"
    assert (
        detect_document(json.loads((FORMAT_FIXTURES / "swe-agent-s1.traj").read_text()))
        == "swe-agent"
    )
    assert detect_document(canonical_sample("small-s1")) == "canonical"
    assert detect_document({"anything": 1}) is None
    assert detect_document("text") is None
    assert detect_document([]) is None


def test_registry() -> None:
    assert known_formats() == [
        "canonical",
        "claude-code",
        "claude-stream",
        "codex-rollout",
        "codex-exec",
        "openai-chat",
        "anthropic-messages",
        "gemini-cli",
        "qwen-code",
        "cursor-agent",
        "copilot-cli",
        "droid",
        "kimi-cli",
        "opencode",
        "aider",
        "openhands",
        "swe-agent",
    ]
    for name, fmt in FORMATS.items():
        assert fmt.name == name and fmt.description and fmt.reference
        assert fmt.to_canonical or fmt.document_to_canonical or fmt.text_to_canonical
    assert FORMATS["aider"].text_to_canonical is not None
    assert FORMATS["openhands"].to_canonical is None
    assert FORMATS["swe-agent"].document_to_canonical is swe_agent.document_to_canonical
    records = list(read_jsonl(SAMPLES / "small-s1.canonical.jsonl"))
    assert list(canonical.to_canonical(records)) == [r for _, r in records]


def test_foreign_events_are_ignored_by_replay_types() -> None:
    """Foreign events use a type replay never reads, and never copy big payloads."""
    events = import_file("codex-rollout", SAMPLES / "small-s1.codex-rollout.jsonl")
    foreign = [e for e in events if e["type"] == "foreign"]
    assert foreign and all("payload" not in e and "base_instructions" not in e for e in foreign)


def test_doctests() -> None:
    modules = [
        formats,
        _common,
        _claude,
        canonical,
        claude_code,
        claude_stream,
        codex_exec,
        codex_rollout,
        openai_chat,
        openhands,
        swe_agent,
    ]
    for module in modules:
        result = doctest.testmod(module)
        assert result.failed == 0, module.__name__


def test_canonical_file_opening_with_claude_metadata_records_is_canonical() -> None:
    """A canonical file keeps Claude Code metadata records as OtherEvents; several of them
    before the first messages must not make it look like a Claude Code file."""
    meta = [
        {"type": "file-history-snapshot", "messageId": f"m{i}", "snapshot": {}} for i in range(4)
    ]
    canon = [
        {"type": "session", "uuid": "s", "model": "gpt-4o"},
        {"type": "message", "uuid": "u1", "role": "user", "content": "hi"},
    ]
    assert detect([*meta, *canon]) == "canonical"
    # metadata beside real Claude Code conversation records is still Claude Code
    claude = [{"type": "user", "uuid": "a", "parentUuid": None, "sessionId": "x"}]
    assert detect([*meta, *claude]) == "claude-code"
    assert detect(meta) == "claude-code"  # metadata alone: nothing says canonical


def test_format_option_help_names_every_known_format() -> None:
    """--format's help is a static string (importing the readers would slow --help by ~80 ms);
    it must name every format the readers know, in their order."""
    import typing

    from compactctl.cli_shell import FormatOpt
    from compactctl.formats import known_formats

    option = typing.get_args(FormatOpt)[1]
    listed = option.help.split("): ", 1)[1].rstrip(".").split(", ")
    assert listed == known_formats()


def test_claude_code_keeps_the_messages_its_compaction_preserved() -> None:
    """Claude Code 2.1.328's manual ``/compact`` kept its last answer ("Done.", line 87): the
    boundary (line 95) lists it in ``compactMetadata.preservedMessages`` and Claude Code
    relinks it after the summary (line 96). The summary replaces the 20 messages before it,
    not that one, which the effective context keeps after the summary."""
    path = FIXTURES / "real" / "claude-code-2.1.328" / "b7a64efe-cbfe-47e8-a7f2-2c773ad73928.jsonl"
    records = list(read_jsonl(path))
    (boundary,) = [r for _, r in records if r.get("subtype") == "compact_boundary"]
    done = "6a575c08-4566-4a81-b9d2-f481a18cb166"
    assert boundary["compactMetadata"]["preservedMessages"]["uuids"] == [done]
    events = list(claude_code.to_canonical(records))
    (summary,) = [e for e in events if e["type"] == "summary"]
    before = [m["uuid"] for m in messages(events) if m["sourceLine"] < 95]
    assert before[-1] == done and len(before) == 21
    assert summary["replaces"] == before[:-1]
    from compactctl.formats.reader import load
    from compactctl.replay import replay

    view = [(m.uuid, m.data["content"]) for m in replay(load(str(path))[1])][:2]
    assert view == [(summary["uuid"], summary["summaryText"]), (done, "Done.")]


def test_a_summary_keeps_preserved_messages_in_its_chain() -> None:
    """A preserved message stays in the chain: the next compaction replaces it."""
    chain = _common.SummaryChain()
    for uuid in ("a", "b", "c"):
        chain.add({"uuid": uuid, "role": "user", "content": uuid})
    first = chain.summary(uuid="s1", text="one", source="x", trigger=None, line=4, keep_uuids=["c"])
    assert first["replaces"] == ["a", "b"]
    chain.add({"uuid": "d", "role": "user", "content": "d"})
    second = chain.summary(uuid="s2", text="two", source="x", trigger=None, line=6)
    assert second["replaces"] == ["c", "d", "s1"]


def test_gemini_jsonl_keeps_unknown_records_and_its_own_session() -> None:
    """A record the Gemini reader does not know is a ``foreign`` event at its line (it used
    to be dropped), and only a header names the session (a Claude line's ``sessionId``, or
    a second header's, used to replace it)."""
    from compactctl.formats import gemini_cli

    records = [
        (1, {"sessionId": "g-1", "projectHash": "p", "startTime": "2026-05-01T10:00:00.000Z"}),
        (2, {"id": "m1", "type": "user", "content": "Run the tests."}),
        (3, {"kind": "telemetry", "sessionId": "other"}),
        (4, {"type": "user", "sessionId": "claude-1", "uuid": "c1", "message": {"content": "x"}}),
        (5, {"sessionId": "g-2", "projectHash": "p"}),
        (6, {"id": "m2", "type": "gemini", "content": "Both pass."}),
    ]
    events = list(gemini_cli.to_canonical(records))
    assert [(e["type"], e.get("sourceType"), e.get("sourceLine")) for e in events] == [
        ("session", None, 1),
        ("message", None, 2),
        ("foreign", "record", 3),
        ("foreign", "user", 4),
        ("message", None, 6),
    ]
    assert events[0]["sessionId"] == "g-1"
