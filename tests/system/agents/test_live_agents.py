"""Drive the installed agents (Claude Code, Codex CLI, Gemini CLI, opencode) against the
scripted model servers and read what they write (issue 17): the test runs whenever the npm
cache folder holds the pinned versions (``make agents``; ``.ci/run`` installs them, and sets
``COMPACTCTL_AGENTS_REQUIRED=1`` so that a missing install fails instead of being skipped).

One prompt per agent (a listing, two parallel reads, a failing command, a closing text), then
the session file is read by compactctl and compared with the independent count of
``test_recordings`` and with the calls the scripted server sent.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from tests.system.agents.test_recordings import (
    count_claude,
    count_codex,
    count_gemini,
    count_opencode,
    read_counts,
)

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "scripts" / "agents"))

import record  # noqa: E402


def _need(agent: str) -> None:
    if record.installed(agent):
        return
    message = (
        f"{agent} {record.VERSIONS[agent]} is not installed in {record.cache_dir()} "
        "(run `make agents`)"
    )
    if os.environ.get("COMPACTCTL_AGENTS_REQUIRED") == "1":
        pytest.fail(message)
    pytest.skip(message)


def test_claude_code_live(tmp_path: Path) -> None:
    _need("claude")
    facts = record.drive_claude(tmp_path, prompts=record.CLAUDE_PROMPTS[:1])
    assert [r["exit"] for r in facts["runs"]] == [0], facts["runs"]
    (main,) = [p for p in facts["files"] if "subagents" not in p.parts]
    expected = count_claude(main)
    assert expected == {
        "prompts": 1,
        "assistant": 4,
        "calls": 4,
        "results": 4,
        "errors": 1,
        "compactions": 0,
    }
    assert read_counts(main, "claude") == expected
    sent = sum(e["outputs"].count("Call") for e in facts["log"] if e["tag"] == "t1")
    assert sent == expected["calls"]


def test_codex_live(tmp_path: Path) -> None:
    _need("codex")
    facts = record.drive_codex(tmp_path, prompts=record.CODEX_PROMPTS[:1])
    assert [r["exit"] for r in facts["runs"]] == [0], facts["runs"]
    (rollout,) = facts["files"]
    expected = count_codex(rollout)
    assert expected == {
        "prompts": 1,
        "assistant": 1,
        "calls": 4,
        "results": 4,
        "errors": 1,
        "compactions": 0,
    }
    assert read_counts(rollout, "codex") == expected
    sent = sum(e["outputs"].count("Call") for e in facts["log"] if e["tag"] == "c1")
    assert sent == expected["calls"]


def test_gemini_cli_live(tmp_path: Path) -> None:
    _need("gemini")
    facts = record.drive_gemini(tmp_path, prompts=record.GEMINI_PROMPTS[:1])
    assert [r["exit"] for r in facts["runs"]] == [0], facts["runs"]
    (chat,) = facts["files"]
    # a listing, two parallel reads, the failing test, a closing text; Gemini CLI reports a
    # failing command in its output, not as an error
    expected = dict(prompts=1, assistant=4, calls=4, results=4, errors=0, compactions=0)
    assert count_gemini(chat) == expected
    assert read_counts(chat, "gemini") == expected
    assert [e["outputs"].count("Call") for e in facts["log"] if e["tag"] == "g1"] == [1, 2, 1, 0]


def test_opencode_live(tmp_path: Path) -> None:
    _need("opencode")
    facts = record.drive_opencode(tmp_path, prompts=record.OPENCODE_PROMPTS[:1])
    assert [r["exit"] for r in facts["runs"]] == [0], facts["runs"]
    (export,) = facts["files"]
    counted, read = count_opencode(export), read_counts(export, "opencode")
    assert (
        counted == read == dict(prompts=1, assistant=4, calls=4, results=4, errors=0, compactions=0)
    )
    runs = [e["outputs"].count("Call") for e in facts["log"] if e["tag"] == "o1" and e["tools"]]
    assert runs == [1, 2, 1, 0]  # the title request (no tools) left out
