"""Issue 15 point 3: per file, what was done and what changed (renames, functions added or
removed) in one line; the current state of each test command (last result, failed runs)."""

from __future__ import annotations

from typing import Any

from compactctl.summarize import SummaryRequest
from compactctl.summarize.extractive import ExtractiveSummarizer
from compactctl.summarize.summary_format import parse_sections


def _call(i: int, name: str, args: dict[str, Any], out: str) -> list[dict[str, Any]]:
    call = {"id": f"c{i}", "name": name, "arguments": args}
    return [
        {"type": "message", "role": "assistant", "turnId": 1, "content": "", "toolCalls": [call]},
        {"type": "message", "role": "tool", "turnId": 1, "toolCallId": f"c{i}", "content": out},
    ]


def _sections(messages: list[dict[str, Any]], prior: Any = None) -> tuple[Any, dict[str, Any]]:
    result = ExtractiveSummarizer().summarize(
        SummaryRequest(messages=messages, prior=prior, max_chars=12_000)
    )
    return result, parse_sections(result.text).sections


def test_file_lines_say_what_changed_and_test_lines_their_state() -> None:
    messages: list[dict[str, Any]] = [
        {"type": "message", "role": "user", "turnId": 1, "content": "Fix the pager."}
    ]
    messages += _call(1, "Edit", {
        "file_path": "src/pager.py",
        "old_string": "def load(x):\n    return x",
        "new_string": "def load_page(x):\n    return x",
    }, "ok")  # fmt: skip
    messages += _call(2, "Write", {
        "file_path": "src/cache.py", "content": "class PageCache:\n    def get(self): ...\n",
    }, "Created src/cache.py")  # fmt: skip
    patch = (
        "*** Begin Patch\n*** Update File: src/util.py\n@@\n-def old_helper():\n+\n*** End Patch"
    )
    messages += _call(3, "apply_patch", {"input": patch}, "Done")
    messages += _call(4, "bash", {"command": "mv src/a.py src/b.py"}, "")
    for i, out in enumerate(["1 failed, 5 passed in 0.3s\nExit code: 1", "6 passed in 0.2s"]):
        messages += _call(10 + i, "bash", {"command": "pytest -q"}, out)
    messages.append({"type": "message", "role": "assistant", "turnId": 1, "content": "Done."})
    result, sections = _sections(messages)
    files = sections["Files and Code Sections"]
    assert "`src/pager.py` — edited; renamed def load -> load_page" in files
    assert "`src/cache.py` — created; added class PageCache, added def get" in files
    assert "`src/util.py` — edited; removed def old_helper" in files
    assert any(
        f.startswith("`src/b.py` — ") and f.endswith("; moved here from src/a.py") for f in files
    ), files
    assert "ran `pytest -q` ×2 — 6 passed; 1 of 2 runs failed" in sections["Problem Solving"]
    # read back by the next pass: the changes stay, the counts add up
    more = _call(20, "bash", {"command": "pytest -q"}, "1 failed, 5 passed\nExit code: 1")
    _, again = _sections(more, prior=result)
    assert (
        "`src/pager.py` — edited; renamed def load -> load_page" in again["Files and Code Sections"]
    )
    assert (
        "ran `pytest -q` ×3 — exit 1, 1 failed, 5 passed; 2 of 3 runs failed"
        in again["Problem Solving"]
    )
