"""The readers added for issue 17 (GitHub Copilot CLI, opencode, Cursor agent, Factory Droid,
Roo Code, Aider): what each keeps, links and marks, beyond the counts of
``test_detection.READ``; and that each compacts with every tool block whole. The fixtures are
built from each format's public description (``*-described.*``: no such agent ran here)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from compactctl.formats.reader import load
from compactctl.model import Message, SummaryEvent
from compactctl.replay import replay

ROOT = Path(__file__).resolve().parents[3]
FORMATS = ROOT / "fixtures" / "formats"
MISLEADING = FORMATS / "misleading"


def messages(name: str) -> list[dict[str, Any]]:
    _, events = load(str(FORMATS / name))
    return [e.data for e in events if isinstance(e, Message)]


def test_copilot_results_answer_their_calls_in_any_order() -> None:
    msgs = messages("copilot-cli-described.jsonl")
    calls = [c["id"] for m in msgs for c in m.get("toolCalls", [])]
    assert calls == ["call_a", "call_b", "call_c", "call_d"]  # execution_start adds none twice
    tools = {
        m["toolCallId"]: (m["content"], m["toolName"], bool(m.get("isError")))
        for m in msgs
        if m["role"] == "tool"
    }
    assert tools == {
        "call_a": ("E   ValueError: bad date\n1 failed", "bash", True),
        "call_b": ("def parse(s): ...", "view", False),
        "call_c": ("def test_parse(): parse('2026-13-01')", "view", False),
        "call_d": ("old_str matched twice", "edit", True),
    }
    first = next(m for m in msgs if m["role"] == "assistant")
    assert first["content"][0] == {"type": "reasoning", "text": "Run pytest first."}


def test_opencode_steps_synthetic_text_and_compaction() -> None:
    _, events = load(str(FORMATS / "opencode-export-described.json"))
    msgs = [e.data for e in events if isinstance(e, Message)]
    meta = [m["content"] for m in msgs if m.get("isMeta")]
    assert meta == ['Called the Read tool with the following input: {"filePath":"parse.py"}']
    steps = [[c["id"] for c in m.get("toolCalls", [])] for m in msgs if m["role"] == "assistant"]
    assert steps == [["toolu_1"], ["toolu_2", "toolu_3"], [], ["toolu_4"], []]
    errors = [(m["toolCallId"], m["content"]) for m in msgs if m.get("isError")]
    assert errors == [("toolu_3", "Error: command timed out")]
    (summary,) = [e for e in events if isinstance(e, SummaryEvent)]
    assert summary.data["summaryText"] == "Summary: test_parse uses month 13; parse rejects it."
    before = {m["uuid"] for m in msgs if m["turnId"] == 1}
    assert set(summary.data["replaces"]) == before
    view = replay(events)
    assert [m.role for m in view if "summaryOf" not in m.data][:1] == ["user"]
    assert [m.text for m in view if m.role == "user" and "summaryOf" not in m.data] == [
        "Fix the test."
    ]


def test_roo_code_condensed_messages_are_replaced_by_the_summary() -> None:
    _, events = load(str(FORMATS / "roo-code-api-history-described.json"))
    msgs = [e.data for e in events if isinstance(e, Message)]
    (summary,) = [e for e in events if isinstance(e, SummaryEvent)]
    # the three condensed source messages (index 0-2) became five canonical messages
    hidden = [m["uuid"] for m in msgs if m["sourceIndex"] in (0, 1, 2)]
    assert len(hidden) == 5 and summary.data["replaces"] == hidden
    foreign = [e.data["sourceType"] for e in events if e.data.get("type") == "foreign"]
    assert foreign == ["reasoning"]
    view = replay(events)
    assert {m.uuid for m in view}.isdisjoint(hidden)
    assert any("toolu_r2" in [c["id"] for c in m.tool_calls] for m in view)


def test_aider_keeps_edit_blocks_and_marks_notices() -> None:
    msgs = messages("aider-chat-history-described.md")
    first = next(m for m in msgs if m["role"] == "assistant")["content"]
    assert first.startswith("The test passes month 13")
    assert first.endswith("    if month > 12:  # months are 1-12\n>>>>>>> REPLACE\n```")
    notices = [m["content"].splitlines()[0] for m in msgs if m.get("isMeta")]
    assert notices == [
        "/usr/bin/aider --model sonnet",
        "Applied edit to parse.py",
        "E   ValueError: bad date",
    ]
    prompts = [m["content"] for m in msgs if m["role"] == "user" and not m.get("isMeta")]
    assert prompts[0] == "Why does test_parse fail?\nIt says bad date."


def test_markdown_that_is_not_aider_is_refused() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "compactctl", "inspect", str(MISLEADING / "notes-like-aider.md")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    assert proc.returncode == 3 and "not a JSON lines transcript" in proc.stderr
    assert "(line 1: malformed); line 1 starts '# Notes on aider';" in proc.stderr


NEW = [
    "copilot-cli-described.jsonl",
    "opencode-export-described.json",
    "cursor-agent-described.jsonl",
    "droid-stream-described.jsonl",
    "roo-code-api-history-described.json",
    "cline-api-history-described.json",
    "gemini-cli-described.json",
    "qwen-code-described.jsonl",
    "kimi-cli-described.jsonl",
]


@pytest.mark.parametrize("name", NEW)
def test_compacts_with_every_tool_block_whole(tmp_path: Path, name: str) -> None:
    src = FORMATS / name
    before = src.read_bytes()
    out = tmp_path / "out.jsonl"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "compactctl",
            "compact",
            "--force",
            "--json",
            "-o",
            str(out),
            str(src),
        ],
        capture_output=True,
        cwd=ROOT,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr.decode()
    report = json.loads(proc.stdout)["files"][0]
    assert report["format"] != "canonical" and report["written"] == str(out)
    assert src.read_bytes() == before
    _, source_events = load(str(src))
    answered = {
        e.data["toolCallId"] for e in source_events if isinstance(e, Message) and e.role == "tool"
    }
    view = replay(load(str(out))[1])
    calls = {c["id"] for m in view for c in m.tool_calls}
    results = {m.tool_call_id for m in view if m.role == "tool"}
    assert results <= calls  # no result without its call
    assert calls & answered <= results  # no answered call without its result


def test_folder_runs_find_new_documents_and_aider_histories_only_when_asked(tmp_path: Path) -> None:
    from compactctl.io.files import discover

    for name in ("opencode-export-described.json", "roo-code-api-history-described.json"):
        (tmp_path / name).write_bytes((FORMATS / name).read_bytes())
    (tmp_path / ".aider.chat.history.md").write_bytes(
        (FORMATS / "aider-chat-history-described.md").read_bytes()
    )
    for name in ("notes-like-aider.md", "opencode-like-parts.json"):
        (tmp_path / name).write_bytes((MISLEADING / name).read_bytes())
    (tmp_path / "README.md").write_text("# aider notes\n")
    found = sorted(Path(p).name for p in discover([str(tmp_path)], documents=True)[0])
    assert found == [
        ".aider.chat.history.md",
        "opencode-export-described.json",
        "roo-code-api-history-described.json",
    ]
    assert discover([str(tmp_path)])[0] == []


def test_rules_never_rewrite_an_attachment_as_user_text(tmp_path: Path) -> None:
    """A Cline ``<file_content>`` attachment gets what a file read gets (whitespace only):
    its table, decorative line and repeated lines stay (issue 17, point 5)."""
    src = FORMATS / "cline-attachment-described.json"
    out = tmp_path / "out.jsonl"
    proc = subprocess.run(
        [sys.executable, "-m", "compactctl", "rules", "-o", str(out), str(src)],
        capture_output=True,
        cwd=ROOT,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr.decode()
    (attached,) = [m for m in replay(load(str(out))[1]) if m.data.get("isMeta")]
    assert attached.text == (
        '<file_content path="cli.py">\n# ----------\nx = 1\nx = 1\n\n'
        "| a | b |\n|---|---|\n| 1 | 2 |\n</file_content>"
    )


def test_doctests_of_the_new_modules() -> None:
    import doctest

    from compactctl.formats import _events, aider, anthropic_messages, swe_agent

    for module in (_events, aider, anthropic_messages, swe_agent):
        result = doctest.testmod(module)
        assert result.failed == 0 and result.attempted > 0, module.__name__
