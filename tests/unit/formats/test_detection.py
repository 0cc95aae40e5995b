"""Detection by evidence (issue 17): misleading files never exit 0 with lost content.

The corpus is ``fixtures/formats/misleading/`` plus the readers' new fixtures in
``fixtures/formats/``; names ending ``-described`` are built from a format's public
description (no such agent ran here). Each file either reads with every message of its own
independent count (hand-counted below from the file), or is refused (exit 3) with a message
that says what the file looks like.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from compactctl.errors import InputError
from compactctl.formats import detect, examine, examine_document
from compactctl.formats.detection import describe
from compactctl.formats.reader import load
from compactctl.model import Message

ROOT = Path(__file__).resolve().parents[3]
FORMATS = ROOT / "fixtures" / "formats"
MISLEADING = FORMATS / "misleading"

REFUSED = {
    "anthropic-agent-events-described.jsonl": "type: session.status_running x1",
    "one-vote.jsonl": "keys: kind x8",
    "dict-content.jsonl": "role: user x1, assistant x1",
    "gemini-contents.jsonl": "keys: role x4, parts x4",
    "notes.json": "a JSON object with keys: title, items",
    # near-misses of the readers added for issue 17
    "cursor-like-string-content.jsonl": "keys: role x2, message x2",
    "telemetry-envelopes.jsonl": "type: page.view x2, page.click x1",
    "droid-like-content.jsonl": "droid (1 of 3 records match, 2 do not)",
    "opencode-like-parts.json": "messages are JSON lines of 1 objects; keys: info x1, parts x1",
}
"""File -> a piece of what the refusal must say the file looks like."""

READ: dict[str, tuple[str, dict[str, int]]] = {
    # format, counts: prompts (user, not isMeta), assistant, toolCalls, tool, isError
    "misleading/chat-pretty.json": (
        "openai-chat",
        {"prompts": 1, "assistant": 2, "calls": 1, "tool": 1, "errors": 0, "system": 1},
    ),
    "misleading/agent-sidechain-described.jsonl": (
        "claude-code",
        {"prompts": 1, "assistant": 2, "calls": 1, "tool": 1, "errors": 0, "system": 0},
    ),
    "cline-api-history-described.json": (
        "anthropic-messages",
        {"prompts": 2, "assistant": 4, "calls": 2, "tool": 2, "errors": 1, "system": 0},
    ),
    "gemini-cli-described.json": (
        "gemini-cli",
        {"prompts": 2, "assistant": 3, "calls": 2, "tool": 2, "errors": 1, "system": 0},
    ),
    "gemini-cli-described.jsonl": (
        "gemini-cli",
        {"prompts": 2, "assistant": 3, "calls": 2, "tool": 2, "errors": 1, "system": 0},
    ),
    "qwen-code-described.jsonl": (
        "qwen-code",
        {"prompts": 1, "assistant": 2, "calls": 1, "tool": 1, "errors": 0, "system": 0},
    ),
    "cursor-agent-described.jsonl": (
        "cursor-agent",
        {"prompts": 1, "assistant": 2, "calls": 1, "tool": 0, "errors": 0, "system": 0},
    ),
    "droid-stream-described.jsonl": (
        "droid",
        {"prompts": 1, "assistant": 2, "calls": 1, "tool": 1, "errors": 1, "system": 0},
    ),
    "copilot-cli-described.jsonl": (
        "copilot-cli",
        {"prompts": 2, "assistant": 5, "calls": 4, "tool": 4, "errors": 2, "system": 0},
    ),
    "opencode-export-described.json": (
        "opencode",
        {"prompts": 2, "assistant": 5, "calls": 4, "tool": 4, "errors": 1, "system": 0},
    ),
    "roo-code-api-history-described.json": (
        "anthropic-messages",
        {"prompts": 1, "assistant": 3, "calls": 2, "tool": 2, "errors": 1, "system": 0},
    ),
    "kimi-cli-described.jsonl": (
        "kimi-cli",
        {"prompts": 1, "assistant": 3, "calls": 3, "tool": 3, "errors": 0, "system": 0},
    ),
    "aider-chat-history-described.md": (
        "aider",
        {"prompts": 4, "assistant": 3, "calls": 0, "tool": 0, "errors": 0, "system": 0},
    ),
    "swe-agent-history-only-described.traj": (
        "swe-agent",
        {"prompts": 1, "assistant": 2, "calls": 2, "tool": 2, "errors": 0, "system": 1},
    ),
}


def counts(events: list[Any]) -> dict[str, int]:
    """The conversation counts of canonical events (messages only)."""
    msgs = [e for e in events if isinstance(e, Message)]
    return {
        "prompts": sum(1 for m in msgs if m.role == "user" and not m.data.get("isMeta")),
        "assistant": sum(1 for m in msgs if m.role == "assistant"),
        "calls": sum(len(m.data.get("toolCalls") or []) for m in msgs),
        "tool": sum(1 for m in msgs if m.role == "tool"),
        "errors": sum(1 for m in msgs if m.data.get("isError")),
        "system": sum(1 for m in msgs if m.role == "system"),
    }


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "compactctl", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_misleading_file_is_refused_with_its_shape(name: str) -> None:
    path = MISLEADING / name
    with pytest.raises(InputError) as info:
        load(str(path))
    message = str(info.value)
    assert "unknown transcript format: the file looks like" in message
    assert REFUSED[name] in message
    assert "Pass --format NAME" in message


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_misleading_file_exits_3_on_every_reading_command(name: str) -> None:
    for command in (["inspect"], ["convert", "--dry-run"]):
        proc = run_cli(*command, str(MISLEADING / name))
        assert proc.returncode == 3, (command, proc.stdout, proc.stderr)
        assert "looks like" in proc.stderr


@pytest.mark.parametrize("name", sorted(READ))
def test_file_reads_whole(name: str) -> None:
    fmt, expected = READ[name]
    got_fmt, events = load(str(FORMATS / name))
    assert got_fmt == fmt
    assert counts(events) == expected


def test_dict_content_is_never_a_python_repr() -> None:
    _, events = load(str(MISLEADING / "dict-content.jsonl"), "openai-chat")
    contents = [e.data["content"] for e in events if isinstance(e, Message)]
    assert contents == [
        [{"type": "opaque", "value": {"text": "fix the bug", "files": ["a.py"]}}],
        [{"type": "opaque", "value": {"text": "done", "edits": 1}}],
    ]


def test_format_openai_chat_reads_a_pretty_printed_document() -> None:
    name, events = load(str(MISLEADING / "chat-pretty.json"), "openai-chat")
    assert name == "openai-chat"
    assert [e.data["role"] for e in events if isinstance(e, Message)] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
    ]


def test_one_vote_names_the_closest_format() -> None:
    records = [json.loads(x) for x in (MISLEADING / "one-vote.jsonl").read_text().splitlines()]
    found = examine(records)
    assert found.name is None and found.reason == "unknown"
    (best,) = [e for e in found.evidence if e.name == "claude-code"]
    assert (best.strong, best.stray) == (1, 8)
    assert "claude-code (1 of 9 records match, 8 do not)" in found.message(["x"])


def test_droid_stream_is_not_claude_stream() -> None:
    lines = (FORMATS / "droid-stream-described.jsonl").read_text().splitlines()
    records = [json.loads(x) for x in lines]
    assert detect(records) == "droid"
    assert detect(records[:1]) == "claude-stream"  # one record alone still looks like it
    found = examine(records)
    (claude,) = [e for e in found.evidence if e.name == "claude-stream"]
    assert (claude.strong, claude.stray) == (1, 5)  # its reader would lose five records


def test_qwen_code_is_not_claude_code() -> None:
    lines = (FORMATS / "qwen-code-described.jsonl").read_text().splitlines()
    assert detect([json.loads(x) for x in lines]) == "qwen-code"


def test_gemini_jsonl_upserts_rewinds_and_sets() -> None:
    _, events = load(str(FORMATS / "gemini-cli-described.jsonl"))
    msgs = [e for e in events if isinstance(e, Message)]
    texts = [m.data["content"] for m in msgs if m.role == "user"]
    assert texts == ["Why does test_parse fail?", "Fix it."]  # g9 was rewound
    tools = [m.data for m in msgs if m.role == "tool"]
    assert [t["content"] for t in tools] == [
        "E   ValueError: bad date\n1 failed",
        "def parse(s): ...",
    ]
    assert [t["toolCallId"] for t in tools] == ["run_shell_command-1", "read_file-2"]


def test_cline_attachments_are_not_prompts() -> None:
    _, events = load(str(FORMATS / "cline-api-history-described.json"))
    users = [(m.data["content"], bool(m.data.get("isMeta"))) for m in events if m.role == "user"]
    assert users[0] == ("<task>\nAdd a --verbose flag to cli.py\n</task>", False)
    assert all(meta for text, meta in users if "<environment_details>" in text)


def test_documents_describe_themselves() -> None:
    assert examine_document({"a": 1, "b": [2]}).shape == "a JSON object with keys: a, b"
    assert examine_document([1, 2]).shape.startswith("a JSON array: JSON lines of 2 values")
    assert describe([]) == "JSON lines of 0 values, none of them an object"


def test_folder_runs_find_recognised_documents_only_when_asked(tmp_path: Path) -> None:
    from compactctl.io.files import discover

    for name in ("gemini-cli-described.json", "swe-agent-history-only-described.traj"):
        (tmp_path / name).write_bytes((FORMATS / name).read_bytes())
    (tmp_path / "notes.json").write_bytes((MISLEADING / "notes.json").read_bytes())
    (tmp_path / "package.json").write_text('{"name": "x", "version": "1.0.0"}')
    (tmp_path / "s.jsonl").write_text('{"role": "user", "content": "hi"}\n')
    names = lambda found: [Path(p).name for p in found[0]]  # noqa: E731
    assert names(discover([str(tmp_path)])) == ["s.jsonl"]
    assert names(discover([str(tmp_path)], documents=True)) == [
        "gemini-cli-described.json",
        "s.jsonl",
        "swe-agent-history-only-described.traj",
    ]


# --- files that mix formats (the review of the readers, 2026-12, finding A1) ----------------

MIXED = {
    # file -> (what the first records are, the first line of another format, that format)
    "mixed-claude-code-chat.jsonl": ("claude-code", 31, "openai-chat"),
    "mixed-codex-rollout-exec.jsonl": ("codex-rollout", 28, "codex-exec"),
    "mixed-gemini-cli-claude-code.jsonl": ("gemini-cli", 12, "claude-code"),
    "claude-code-stray-stream-line.jsonl": ("claude-code", 30, "claude-stream"),
}
"""Each is a shipped file with a few records of another format added: detection (the first
50 records, 20% of them may stray) names the first format, and its reader used to keep the
others as content-less ``foreign`` events or drop them, exit 0."""


@pytest.mark.parametrize("name", sorted(MIXED))
def test_a_file_that_mixes_formats_is_refused_naming_the_line(name: str) -> None:
    first, line, other = MIXED[name]
    with pytest.raises(InputError) as info:
        load(str(MISLEADING / name))
    message = str(info.value)
    assert message.startswith(f"{MISLEADING / name}: mixed transcript formats: ")
    assert f"the first records are {first}, but line {line} looks like {other} (" in message
    assert "Pass --format NAME" in message


@pytest.mark.parametrize("name", sorted(MIXED))
def test_a_file_that_mixes_formats_exits_3_on_every_reading_command(name: str) -> None:
    for command in (["inspect"], ["convert", "--dry-run"], ["compact", "--force", "-o", "-"]):
        proc = run_cli(*command, str(MISLEADING / name))
        assert proc.returncode == 3, (command, proc.stdout, proc.stderr)
        assert f"line {MIXED[name][1]} looks like {MIXED[name][2]}" in proc.stderr


def test_a_record_of_another_format_past_the_detection_window_is_found(tmp_path: Path) -> None:
    sample = ROOT / "fixtures" / "samples" / "small-s1.claude-code.jsonl"
    data = sample.read_bytes()
    assert data.count(b"\n") == 102  # past the 50 records detection reads
    mixed = tmp_path / "s.jsonl"
    mixed.write_bytes(data + b'{"role": "user", "content": "and one more"}\n')
    with pytest.raises(InputError, match="but line 103 looks like openai-chat"):
        load(str(mixed))
    # a Claude Code record type newer than the reader (it keeps those) is not another format
    newer = tmp_path / "newer.jsonl"
    newer.write_bytes(data + b'{"type": "cost-state", "sessionId": "x", "costUSD": 0}\n')
    fmt, events = load(str(newer))
    assert fmt == "claude-code"
    assert [
        e.data["sourceType"] for e in events if e.line == 103 or e.data.get("sourceLine") == 103
    ] == ["cost-state"]
    assert counts(events) == counts(load(str(sample))[1])


def test_format_reads_a_mixed_file_anyway_and_the_session_stays_its_own() -> None:
    """``--format`` reads a mixed file as that format: Gemini's session id stays (a Claude
    line's ``sessionId`` used to become it) and the Claude line is a ``foreign`` event at
    its line (it used to be dropped)."""
    _, alone = load(str(FORMATS / "gemini-cli-described.jsonl"))
    _, events = load(str(MISLEADING / "mixed-gemini-cli-claude-code.jsonl"), "gemini-cli")
    (session,) = [e.data for e in events if e.data.get("type") == "session"]
    assert session["sessionId"] == "5f0c1a2b-0000-4000-8000-000000000002"
    assert [
        (e.data["sourceType"], e.data["sourceLine"])
        for e in events
        if e.data.get("type") == "foreign" and e.data.get("sourceLine") == 12
    ] == [("user", 12)]
    assert [m.data for m in alone if isinstance(m, Message)] == [
        m.data for m in events if isinstance(m, Message)
    ]


def test_a_stray_record_is_never_the_claude_code_leaf(tmp_path: Path) -> None:
    """A Claude Code file without ``last-prompt`` and a ``claude -p`` stream-json line at its
    end, read with ``--format claude-code``: the conversation is the file's own (the stray
    line used to be taken as the leaf: one message instead of the whole branch)."""
    path = MISLEADING / "claude-code-stray-stream-line.jsonl"
    alone = tmp_path / "alone.jsonl"
    alone.write_bytes(b"".join(path.read_bytes().splitlines(keepends=True)[:-1]))
    _, events = load(str(path), "claude-code")
    _, want = load(str(alone), "claude-code")
    got = [m.data for m in events if isinstance(m, Message)]
    assert got == [m.data for m in want if isinstance(m, Message)]
    assert (got[0]["uuid"], got[-1]["uuid"]) == ("u1", "u24")  # the branch of the file's leaf
    stray = [e.data for e in events if e.data.get("sourceLine") == 30]
    assert [(e["type"], e["sourceType"]) for e in stray] == [("foreign", "branch")]


# --- an agent's output no reader reads ------------------------------------------------------

OPENCODE = ROOT / "fixtures" / "real" / "opencode-1.18.33"


@pytest.mark.parametrize("name", ["run-1.jsonl", "run-2.jsonl"])
def test_opencode_run_stream_is_refused_with_how_to_export_it(name: str) -> None:
    """``opencode run --format json`` output (a real one, opencode 1.18.33): refused as
    before, and the refusal now says what it is and how to get a file compactctl reads
    (docs/formats.md section 6 promised it; it only listed the known formats)."""
    path = OPENCODE / name
    hint = (
        "It is the event stream of `opencode run --format json` (session "
        "ses_dcdafc8d6ffe1FeEBEPkwUUyN4), which no reader reads: export the session with "
        "`opencode export ses_dcdafc8d6ffe1FeEBEPkwUUyN4 > session.json` (where it ran) "
        "and read that file. Known formats: "
    )
    with pytest.raises(InputError) as info:
        load(str(path))
    assert "unknown transcript format: the file looks like JSON lines of" in str(info.value)
    assert hint in str(info.value)
    for command in (["inspect"], ["convert", "--dry-run"], ["compact", "--force", "-o", "-"]):
        proc = run_cli(*command, str(path))
        assert proc.returncode == 3, (command, proc.stdout, proc.stderr)
        assert hint in proc.stderr
    # the export of that session is read
    assert load(str(OPENCODE / "ses_dcdafc8d6ffe1FeEBEPkwUUyN4.json"))[0] == "opencode"


def test_other_unknown_files_get_no_opencode_hint() -> None:
    with pytest.raises(InputError) as info:
        load(str(MISLEADING / "telemetry-envelopes.jsonl"))
    assert "opencode" not in str(info.value).split("Known formats")[0]


# --- two Claude Code sessions in one file ---------------------------------------------------

SAMPLE_CLAUDE = ROOT / "fixtures" / "samples" / "small-s1.claude-code.jsonl"
REAL_CLAUDE = ROOT / "fixtures" / "real" / "claude-code-2.1.328"
REAL_SESSION = REAL_CLAUDE / "b7a64efe-cbfe-47e8-a7f2-2c773ad73928.jsonl"


def joined(tmp_path: Path) -> Path:
    """``cat small-s1.claude-code.jsonl <the real 2.1.328 session>``: 102 + 138 lines; the
    real file opens with two ``queue-operation`` records, then its root prompt."""
    path = tmp_path / "joined.jsonl"
    path.write_bytes(SAMPLE_CLAUDE.read_bytes() + REAL_SESSION.read_bytes())
    return path


@pytest.mark.parametrize("fmt", [None, "claude-code"])
def test_two_claude_code_sessions_joined_are_refused(tmp_path: Path, fmt: str | None) -> None:
    """The second session's records used to become abandoned branches of the first, exit 0."""
    path = joined(tmp_path)
    with pytest.raises(InputError) as info:
        load(str(path), fmt)
    message = str(info.value)
    assert message.startswith(
        f"{path}: line 105 starts another conversation (session "
        "b7a64efe-cbfe-47e8-a7f2-2c773ad73928: a root record, no parent) after session "
        "255ea867-c8d3-45c7-b5bd-a9dd578ab5e6: "
    )
    assert "the second session's records start at line 103 (head -n 102 FILE" in message


def test_two_claude_code_sessions_joined_exit_3_on_every_reading_command(tmp_path: Path) -> None:
    path = joined(tmp_path)
    for command in (["inspect"], ["convert", "--dry-run"], ["compact", "--force", "-o", "-"]):
        proc = run_cli(*command, str(path))
        assert proc.returncode == 3, (command, proc.stdout, proc.stderr)
        assert "line 105 starts another conversation" in proc.stderr
        assert proc.stdout == ""


def test_a_session_resumed_in_its_file_reads_whole(tmp_path: Path) -> None:
    """A resumed session keeps writing to its file under a new ``sessionId``, its records
    chaining onto the earlier ones: every message is on the branch (only the first session's
    31 of 66 messages were read when the reader kept to the first ``sessionId``)."""
    resumed = tmp_path / "resumed.jsonl"
    lines = []
    for number, line in enumerate(SAMPLE_CLAUDE.read_text().splitlines(), 1):
        record = json.loads(line)
        if number > 50 and "sessionId" in record:
            assert record["sessionId"] == "255ea867-c8d3-45c7-b5bd-a9dd578ab5e6"
            record["sessionId"] = "99999999-0000-4000-8000-000000000001"
        lines.append(json.dumps(record))
    resumed.write_text("\n".join(lines) + "\n")
    _, want = load(str(SAMPLE_CLAUDE))
    fmt, events = load(str(resumed))
    assert fmt == "claude-code"
    got = [m.data for m in events if isinstance(m, Message)]
    assert len(got) == 66
    assert got == [m.data for m in want if isinstance(m, Message)]
    (session,) = [e.data for e in events if e.data.get("type") == "session"]
    assert session["sessionId"] == "255ea867-c8d3-45c7-b5bd-a9dd578ab5e6"


def _dangling_root(lines: list[bytes]) -> list[bytes]:
    """The real session's lines with its root prompt (line 3) given a parent that is not
    in any file."""
    root = json.loads(lines[2])
    assert root["parentUuid"] is None and root["type"] == "user"
    root["parentUuid"] = "00000000-dead-4000-8000-000000000000"
    return [*lines[:2], json.dumps(root).encode() + b"\n", *lines[3:]]


@pytest.mark.parametrize(
    ("second", "root", "start", "parent"),
    [
        # its root prompt names a parent that is not in the file
        (_dangling_root, 105, 103, "00000000-dead-4000-8000-000000000000"),
        # its first three lines (two queue-operations and the root prompt) cut off: the
        # attachment after the root is its first record, its parent the lost root
        (lambda lines: lines[3:], 103, 103, "c2f1c53d-b698-4153-8a6f-008565d84c34"),
    ],
    ids=["root-with-dangling-parent", "root-cut-off"],
)
def test_a_second_session_starting_with_a_dangling_parent_is_refused(
    tmp_path: Path, second: Any, root: int, start: int, parent: str
) -> None:
    """A dangling parent counted as a link, so a second session whose first record's
    parent is not in the file was read as part of the first (94 messages, exit 0): none of
    its records chains onto the first session's, so it is another conversation."""
    path = tmp_path / "joined.jsonl"
    lines = REAL_SESSION.read_bytes().splitlines(keepends=True)
    path.write_bytes(SAMPLE_CLAUDE.read_bytes() + b"".join(second(lines)))
    with pytest.raises(InputError) as info:
        load(str(path))
    message = str(info.value)
    assert message.startswith(
        f"{path}: line {root} starts another conversation (session "
        f"b7a64efe-cbfe-47e8-a7f2-2c773ad73928: its first record's parent {parent} is not "
        "in the file, and none of its records chains onto the earlier session's) after "
        "session 255ea867-c8d3-45c7-b5bd-a9dd578ab5e6: "
    )
    assert f"start at line {start} (head -n {start - 1} FILE > first.jsonl; " in message
    proc = run_cli("inspect", str(path))
    assert (proc.returncode, proc.stdout) == (3, "")
    assert f"line {root} starts another conversation" in proc.stderr


def _resumed_from(line: int, tmp_path: Path) -> Path:
    """The sample with every record from ``line`` on under a new ``sessionId`` (as if
    resumed there); the sample's line 41 has a dangling parent (its meta file)."""
    path = tmp_path / f"resumed-{line}.jsonl"
    out = []
    for number, text in enumerate(SAMPLE_CLAUDE.read_text().splitlines(), 1):
        record = json.loads(text)
        if number >= line and "sessionId" in record:
            record["sessionId"] = "99999999-0000-4000-8000-000000000001"
        out.append(json.dumps(record))
    path.write_text("\n".join(out) + "\n")
    return path


def test_a_resumed_session_with_a_dangling_parent_after_the_resume_reads_whole(
    tmp_path: Path,
) -> None:
    """The resumed records (line 30 on) chain onto the earlier session's; their own
    dangling parent (line 41) is dropped records, as in one session."""
    _, want = load(str(SAMPLE_CLAUDE))
    fmt, events = load(str(_resumed_from(30, tmp_path)))
    assert fmt == "claude-code"
    got = [m.data for m in events if isinstance(m, Message)]
    assert len(got) == 66
    assert got == [m.data for m in want if isinstance(m, Message)]


def test_a_resume_whose_first_record_has_a_dangling_parent_is_refused(tmp_path: Path) -> None:
    """The documented limit (docs/formats.md section 1): resumed at line 41, whose parent
    is not in the file, nothing ties the new session to the earlier one but file order, as
    in two files joined; it is refused, not guessed."""
    path = _resumed_from(41, tmp_path)
    with pytest.raises(InputError) as info:
        load(str(path))
    assert "line 41 starts another conversation (session 99999999-0000-4000-8000-" in str(
        info.value
    )


def test_a_session_with_its_subagent_sidechains_is_not_two_sessions(tmp_path: Path) -> None:
    """An older file holds its subagents' sidechains (roots of their own, the session's id)
    and a subagent's own file is all sidechain: neither is refused."""
    agent = REAL_CLAUDE / "subagents" / "agent-ae774f986d7c72437.jsonl"
    both = tmp_path / "with-sidechain.jsonl"
    both.write_bytes(REAL_SESSION.read_bytes() + agent.read_bytes())
    _, alone = load(str(REAL_SESSION))
    fmt, events = load(str(both))
    assert fmt == "claude-code"
    assert [m.data for m in events if isinstance(m, Message)] == [
        m.data for m in alone if isinstance(m, Message)
    ]
    after = [e.data for e in events if (e.data.get("sourceLine") or 0) > 138]
    assert sorted({(e["sourceType"], e.get("recordType")) for e in after}) == [
        ("api-request", None),
        ("api-request-blob", None),
        ("api-request-shape", None),
        ("sidechain", "assistant"),
        ("sidechain", "attachment"),
        ("sidechain", "user"),
    ]
    assert counts(load(str(agent))[1])["prompts"] == 1


# --- one whole conversation per line (finding A5) -------------------------------------------


@pytest.mark.parametrize("name", ["chat-request-log.jsonl", "chat-fine-tuning.jsonl"])
@pytest.mark.parametrize("fmt", [None, "openai-chat"])
def test_one_conversation_per_line_is_refused(name: str, fmt: str | None) -> None:
    with pytest.raises(InputError) as info:
        load(str(MISLEADING / name), fmt)
    message = str(info.value)
    assert "lines 1 and 2 each hold a whole conversation" in message
    assert "looks like a request log or a fine-tuning set, one conversation per line" in message


def test_one_conversation_in_one_line_still_reads(tmp_path: Path) -> None:
    path = tmp_path / "one.jsonl"
    first = (MISLEADING / "chat-fine-tuning.jsonl").read_bytes().splitlines(keepends=True)[0]
    path.write_bytes(first)
    fmt, events = load(str(path))
    assert fmt == "openai-chat"
    assert [(m.role, m.data["content"]) for m in events if isinstance(m, Message)] == [
        ("system", "s"),
        ("user", "q0"),
        ("assistant", "a0"),
    ]


def test_a_json_array_that_mixes_formats_is_refused_naming_the_item(tmp_path: Path) -> None:
    lines = (MISLEADING / "mixed-claude-code-chat.jsonl").read_text().splitlines()
    path = tmp_path / "s.json"
    path.write_text("[\n" + ",\n".join(lines) + "\n]\n")
    with pytest.raises(InputError, match="the first records are claude-code, but item 31 looks"):
        load(str(path))
    fmt, events = load(str(path), "claude-code")  # --format: read anyway
    assert fmt == "claude-code"
    assert counts(events) == counts(load(str(FORMATS / "claude-code-branches.jsonl"))[1])
