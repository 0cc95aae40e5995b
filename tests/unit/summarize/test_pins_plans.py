"""Issue 15 point 9: instruction files stay verbatim in the summary (bounded), injected or
read through a tool, and across incremental passes; plans and todo lists of every agent
carry over as open items."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import orjson
import pytest

from compactctl.layers.options import DEFAULT_PIN_PATTERNS
from compactctl.summarize import SummaryRequest
from compactctl.summarize.extractive import ExtractiveSummarizer
from compactctl.summarize.extractive.render import INSTRUCTIONS_MAX_CHARS, INSTRUCTIONS_PREFIX
from compactctl.summarize.summary_format import parse_sections
from tests.helpers import SAMPLES

CLAUDE_MD = (
    "# Project rules\n\n## Style\n- Use tabs in Makefiles.\n- Never push to main.\n\n"
    "```sh\nmake lint\n```\n1. Run the tests first."
)


def _m(role: str, content: str = "", **extra: Any) -> dict[str, Any]:
    return {"type": "message", "role": role, "turnId": 1, "content": content, **extra}


def _read(path: str, output: str, name: str = "Read") -> list[dict[str, Any]]:
    call = {"id": "r1", "name": name, "arguments": {"file_path": path}}
    return [_m("assistant", toolCalls=[call]), _m("tool", output, toolCallId="r1")]


def _summary(messages: list[dict[str, Any]], fmt: str = "sections", prior: Any = None) -> Any:
    request = SummaryRequest(
        messages=messages, prior=prior, format=fmt, max_chars=12_000 if fmt == "sections" else 1200
    )
    return ExtractiveSummarizer().summarize(request)


def _instructions(text: str) -> list[str]:
    primary = parse_sections(text).sections["Primary Request"]
    return [b for b in primary if b.startswith(INSTRUCTIONS_PREFIX)]


def test_an_instruction_file_read_through_a_tool_is_kept_verbatim_over_passes() -> None:
    first = _summary([_m("user", "Fix the build."), *_read("/repo/CLAUDE.md", CLAUDE_MD)])
    [bullet] = _instructions(first.text)
    # every line verbatim, indented two spaces (blank lines are not read back)
    assert bullet == "Instructions from /repo/CLAUDE.md (verbatim):\n" + "\n".join(
        "  " + line for line in CLAUDE_MD.split("\n") if line
    )
    assert "\n    ## Style\n    - Use tabs in Makefiles." in first.text
    # a second pass that never sees the file keeps it, word for word
    second = _summary([_m("user", "Now the docs.")], prior=first)
    assert _instructions(second.text) == [bullet]
    state = _summary([_m("user", "Fix it."), *_read("CLAUDE.md", CLAUDE_MD)], "task-state")
    assert any("Never push to main." in c for c in state.task_state["user_constraints"])


@pytest.mark.parametrize(
    "injected",
    [
        "--- Context from: GEMINI.md ---\nNever push to main.\n"
        "--- End of Context from: GEMINI.md ---",
        "<user_instructions>\nNever push to main.\n</user_instructions>",
        "Contents of /repo/AGENTS.md (project instructions):\n\nNever push to main.",
    ],
)
def test_injected_instruction_blocks_are_kept_and_pinned(injected: str) -> None:
    assert any(re.search(p, injected) for p in DEFAULT_PIN_PATTERNS)
    result = _summary([_m("user", injected), _m("user", "Fix the build.")])
    [bullet] = _instructions(result.text)
    assert bullet.endswith("(verbatim):\n  Never push to main.")


def test_instruction_text_is_bounded_and_says_what_was_cut() -> None:
    huge = "\n".join(f"- rule {i}: keep module {i} as it is" for i in range(600))
    result = _summary([_m("user", "Go."), *_read("AGENTS.md", huge)])
    [bullet] = _instructions(result.text)
    assert len(bullet) < INSTRUCTIONS_MAX_CHARS + 400
    assert bullet.split("\n")[1] == "  - rule 0: keep module 0 as it is"
    assert bullet.endswith("more characters of AGENTS.md not copied]")


PLANS = {
    "TodoWrite": {
        "todos": [
            {"content": "Fix the pager", "status": "completed"},
            {"content": "Add a regression test", "status": "pending"},
        ]
    },
    "update_plan": {
        "plan": [
            {"step": "Fix the pager", "status": "completed"},
            {"step": "Add a regression test", "status": "in_progress"},
        ]
    },
    "task_tracker": {
        "command": "plan",
        "task_list": [
            {"id": "1", "title": "Fix the pager", "status": "done"},
            {"id": "2", "title": "Add a regression test", "status": "todo"},
        ],
    },
    "execute_command": {
        "command": "ls",
        "task_progress": "- [x] Fix the pager\n- [ ] Add a regression test",
    },
}


@pytest.mark.parametrize("tool", sorted(PLANS))
def test_plans_and_todo_lists_carry_over_as_open_items(tool: str) -> None:
    call = {"id": "p1", "name": tool, "arguments": PLANS[tool]}
    messages = [
        _m("user", "Fix the pager."),
        _m("assistant", toolCalls=[call]),
        _m("tool", "ok", toolCallId="p1"),
        _m("assistant", "The plan is updated."),
    ]
    sections = parse_sections(_summary(messages).text).sections
    assert sections["Pending Tasks"] == ["Add a regression test"]
    assert "Done: Fix the pager" in sections["Problem Solving"]
    state = _summary(messages, "task-state").task_state
    assert state is not None and state["open_items"] == ["Add a regression test"]


def test_no_false_pending_reply_and_no_doubled_constraint_label(tmp_path: Path) -> None:
    """Found by a new user reading the shipped fixtures' summaries: a pending "answer the
    last user message (T3)" when T3 was answered after the span (the user spoke again,
    T4), and "Constraint: Constraints: Keep ..." for a pinned constraint with its label."""
    from compactctl.app.jobs import OutputOptions, compact_path
    from compactctl.layers.options import CompactOptions

    texts = {}
    for name in ("small-s1", "messy-s2"):
        path = tmp_path / f"{name}.jsonl"
        path.write_bytes((SAMPLES / f"{name}.canonical.jsonl").read_bytes())
        compact_path(str(path), CompactOptions(force=True),
                     OutputOptions(db="", torn_wait=0))  # fmt: skip
        last = path.read_bytes().rstrip(b"\n").rsplit(b"\n", 1)[-1]
        texts[name] = orjson.loads(last)["summaryText"]
    assert "Constraint: Keep the on-disk ledger format unchanged" in texts["small-s1"]
    assert "Constraint: Constraints:" not in texts["small-s1"]
    assert "answer the last user message" not in texts["messy-s2"]
    assert "Latest request (T4)" in texts["messy-s2"] or "(T4)" in texts["messy-s2"]
