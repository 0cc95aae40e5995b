"""Resume a compacted session in the agent itself (issue 18): the real Claude Code and Codex
CLI make a session of 24 tool calls against the scripted model server, ``compactctl compact
--as native`` writes the compacted session beside it, and the agent resumes it.

What the agent sends when it resumes (the request body the scripted server received) must
hold the summary and the kept messages, pair every tool call with its result, and be at least
3 times smaller than what it sends when it resumes the original, which still holds the whole
history afterwards. Like ``test_live_agents``, this runs whenever the pinned agents are
installed (``make agents``) and fails when they are missing with
``COMPACTCTL_AGENTS_REQUIRED=1``. The sizes measured are printed (``pytest -s``).
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.system.agents.test_live_agents import _need

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "scripts" / "agents"))

import record  # noqa: E402
from servers import AnthropicServer, Call, ResponsesServer, Script, Text  # noqa: E402

CALLS = 24
PER_STEP = 3
LINES = 400
FILES = [f"part_{i:02d}.txt" for i in range(CALLS)]
SCRIPT: Script = {
    "r1": [
        [Call("shell", {"command": f"cat {name}"}) for name in FILES[i : i + PER_STEP]]
        for i in range(0, CALLS, PER_STEP)
    ]
    + [[Text("All 24 parts are read; part_23.txt ends the series.")]],
}
KEEP_RECENT = "5"
KEEP_RECENT_TOKENS = {"claude": "20000", "codex": "10000"}
"""The tail's token budget, by agent: the last step's three outputs are about 17,000 tokens
as Claude Code records them (about 8,000 as Codex does), over the default 8,000, which would
keep none of its calls (the closing text is the newest block); these keep that step and not
the one before. This test is about the calls and results of a kept tail."""
"""Messages kept verbatim: the last step (an assistant message of 3 calls, their 3 results)
and the closing text. The agents' own system prompt and tools are about 100 KB of every
request, so the history left must be small for the request to be 3 times smaller."""
PROMPT = "[[r1]] Read every part file of this project, one after another."
RESUME = "continue"


def _project(work: Path) -> None:
    """The scratch project: 24 files of about 23 KB each (numbered lines), below the 30,000
    characters Claude Code keeps of a command's output."""
    record._project(work)
    for i, name in enumerate(FILES):
        lines = (f"part {i} line {n}: {'x' * 40}" for n in range(LINES))
        (work / name).write_text("\n".join(lines) + "\n")


def _bodies(server_cls: type[Any]) -> type[Any]:
    """A scripted server that also keeps every request body (path, raw JSON) it answers."""

    class Recording(server_cls):  # type: ignore[misc, valid-type]
        bodies: list[tuple[str, dict[str, Any]]]

        def answer(self, path: str, body: dict[str, Any]) -> Any:
            self.bodies.append((path, body))
            return super().answer(path, body)

    return Recording


@dataclass
class Agent:
    """One agent's commands and the requests its runs sent."""

    name: str
    home: Path
    work: Path
    server: Any
    env: dict[str, str] = field(default_factory=dict)

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        self.server.bodies = []
        proc = subprocess.run(
            [str(record.binary(self.name)), *args],
            cwd=self.work,
            env=self.env,
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            timeout=300,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
        return proc

    def turn_request(self, prompt: str) -> dict[str, Any]:
        """The first model request of the last run that carries ``prompt`` as its newest user
        text (title and other side requests do not)."""
        for path, body in self.server.bodies:
            if path.split("?")[0].rstrip("/").endswith(("/messages", "/responses")):
                items = body.get("messages") or body.get("input") or []
                if any(prompt == t.strip() for t in _user_texts(items[-1:])):
                    return body
        seen = [(p, json.dumps(b)[-600:]) for p, b in self.server.bodies]
        raise AssertionError(f"no request with {prompt!r}: {seen}")


def _user_texts(items: list[Any]) -> list[str]:
    out = []
    for item in items:
        content = item.get("content") if isinstance(item, dict) else None
        if isinstance(content, str):
            out.append(content)
        elif isinstance(content, list):
            out += [str(b.get("text")) for b in content if isinstance(b, dict) and "text" in b]
    return out


def _compactctl(path: Path, tmp: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [sys.executable, "-m", "compactctl", "compact", "--force", "--as", "native",
         "--keep-recent", KEEP_RECENT, "--keep-recent-tokens",
         KEEP_RECENT_TOKENS["codex" if path.name.startswith("rollout-") else "claude"],
         "--db", str(tmp / "store.db"), *flags, str(path)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return proc


def _compact_twice(path: Path, tmp: Path) -> dict[str, Any]:
    """``compact --as native --json`` (its result), then once more for people: the same
    session is found, nothing written, and the stderr line names the way back in."""
    result: dict[str, Any] = json.loads(_compactctl(path, tmp, "--json").stdout)["files"][0]
    assert result["changed"] is True and result["written"] == result["resume"]["path"]
    line = _compactctl(path, tmp).stderr
    resume = result["resume"]
    assert "was already written (the file there begins with these lines: left as it is)" in line, (
        line
    )
    assert f"resume it: cd {resume['cwd']} && {resume['command']}" in line, line
    return result


def _size(body: dict[str, Any]) -> int:
    return len(json.dumps(body, separators=(",", ":")).encode())


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# --- the request's conversation, per API ---------------------------------------------------


def _anthropic_pairs(messages: list[dict[str, Any]]) -> tuple[list[str], list[str], str]:
    """``(tool_use ids, tool_result ids, all text)`` of a Messages API conversation."""
    uses, results, texts = [], [], []
    for m in messages:
        content = m.get("content")
        if isinstance(content, str):
            texts.append(content)
            continue
        for b in content or []:
            if b.get("type") == "tool_use":
                uses.append(b["id"])
                texts.append(json.dumps(b.get("input")))
            elif b.get("type") == "tool_result":
                results.append(b["tool_use_id"])
                c = b.get("content")
                texts.append(c if isinstance(c, str) else json.dumps(c))
            elif b.get("type") == "text":
                texts.append(b["text"])
    return uses, results, "\n".join(texts)


def _responses_pairs(items: list[dict[str, Any]]) -> tuple[list[str], list[str], str]:
    """``(call ids, output ids, all text)`` of a Responses API input."""
    calls, outputs, texts = [], [], []
    for item in items:
        kind = item.get("type", "message")
        if kind in ("function_call", "custom_tool_call"):
            calls.append(item["call_id"])
            texts.append(str(item.get("arguments") or item.get("input")))
        elif kind in ("function_call_output", "custom_tool_call_output"):
            outputs.append(item["call_id"])
            out = item.get("output")
            texts.append(out if isinstance(out, str) else json.dumps(out))
        elif kind == "message":
            texts += _user_texts([item])
    return calls, outputs, "\n".join(texts)


def _check_round_trip(
    agent: Agent, original: Path, new: Path, result: dict[str, Any], resumed: dict[str, Any],
    again: dict[str, Any], conversation: str,
) -> None:  # fmt: skip
    """The assertions both agents share (module docstring)."""
    pairs = _anthropic_pairs if conversation == "messages" else _responses_pairs
    calls, outputs, text = pairs(resumed[conversation])
    all_calls, all_outputs, all_text = pairs(again[conversation])
    # every call of the resumed request is answered, once, and no answer lacks its call
    assert sorted(calls) == sorted(outputs) and len(set(calls)) == len(calls), (calls, outputs)
    # the original resumed afterwards still shows the whole history: 24 calls, 24 results
    assert len(all_calls) == CALLS and sorted(all_calls) == sorted(all_outputs)
    # the summary is in the request, and the kept calls are the newest of the original
    assert result["summary"]["replaces"] > 0
    assert "compactctl replaced" in text and "Summary:" in text
    assert 0 < len(calls) < CALLS and calls == all_calls[-len(calls) :]
    assert f"part 23 line {LINES - 1}" in text and f"part 0 line {LINES - 1}" not in text
    assert "All 24 parts are read" in text
    small, large = _size(resumed), _size(again)
    print(f"\n{agent.name}: resuming the compacted session sent {small} bytes "
          f"({len(calls)} calls), the original {large} bytes ({len(all_calls)} calls): "
          f"{large / small:.1f}x; new session {new.stat().st_size} bytes, original "
          f"{original.stat().st_size} bytes")  # fmt: skip
    assert large >= 3 * small, (small, large)


def test_claude_code_resumes_compacted(tmp_path: Path) -> None:
    _need("claude")
    work = Path(record.WORKDIR) / "claude-resume"
    _project(work)
    server_cls = _bodies(AnthropicServer)
    with server_cls(SCRIPT, model="claude-sonnet-4-5") as server:
        env = record._env(
            tmp_path, {"ANTHROPIC_BASE_URL": server.url, "ANTHROPIC_API_KEY": "scripted"}
        )
        agent = Agent("claude", tmp_path, work, server, env)
        flags = ["--dangerously-skip-permissions", "--output-format", "json", "--model",
                 "claude-sonnet-4-5"]  # fmt: skip
        made = json.loads(agent.run("-p", PROMPT, *flags).stdout.strip().splitlines()[-1])
        sent = sum(isinstance(o, Call) for step in SCRIPT["r1"] for o in step)
        assert sent == CALLS
        (original,) = (tmp_path / ".claude" / "projects").rglob(f"{made['session_id']}.jsonl")
        before = _digest(original)

        result = _compact_twice(original, tmp_path)
        resume = result["resume"]
        new = Path(resume["path"])
        assert new.parent == original.parent and resume["cwd"] == str(work)
        assert resume["command"] == f"claude --resume {resume['sessionId']}"
        assert _digest(original) == before
        assert sorted(original.parent.glob("*.jsonl")) == sorted([original, new])

        records = [json.loads(line) for line in new.read_text().splitlines()]
        assert records[0]["subtype"] == "compact_boundary" and records[0]["parentUuid"] is None
        summaries = [r for r in records if r.get("isCompactSummary")]
        assert len(summaries) == 1 and summaries[0]["type"] == "user"
        assert all(r["parentUuid"] == p["uuid"] for p, r in zip(records, records[1:], strict=False))
        assert {r["sessionId"] for r in records} == {resume["sessionId"]}

        agent.run("-p", RESUME, "--resume", resume["sessionId"], *flags)
        resumed = agent.turn_request(RESUME)
        agent.run("-p", RESUME, "--resume", made["session_id"], *flags)
        again = agent.turn_request(RESUME)
    _check_round_trip(agent, original, new, result, resumed, again, "messages")


def test_codex_resumes_compacted(tmp_path: Path) -> None:
    _need("codex")
    work = Path(record.WORKDIR) / "codex-resume"
    _project(work)
    codex_home = tmp_path / ".codex"
    codex_home.mkdir()
    server_cls = _bodies(ResponsesServer)
    with server_cls(SCRIPT, model="gpt-5") as server:
        provider = (
            'model_providers.mock={name="mock",base_url="' + server.url + '/v1",'
            'env_key="OPENAI_API_KEY",wire_api="responses"}'
        )
        env = record._env(tmp_path, {"CODEX_HOME": str(codex_home), "OPENAI_API_KEY": "scripted"})
        agent = Agent("codex", tmp_path, work, server, env)
        flags = ["--json", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox",
                 "-c", provider, "-c", "model_provider=mock", "-m", "gpt-5"]  # fmt: skip
        agent.run("exec", *flags, PROMPT)
        (original,) = (codex_home / "sessions").rglob("rollout-*.jsonl")
        thread = original.stem[-36:]
        before = _digest(original)

        result = _compact_twice(original, tmp_path)
        resume = result["resume"]
        new = Path(resume["path"])
        assert new.name.endswith(f"-{resume['sessionId']}.jsonl")
        assert new.parents[3] == codex_home / "sessions"
        assert resume["command"] == f"codex resume {resume['sessionId']}"
        assert _digest(original) == before
        assert sorted((codex_home / "sessions").rglob("*.jsonl")) == sorted([original, new])

        records = [json.loads(line) for line in new.read_text().splitlines()]
        assert [r["type"] for r in records[:3]] == ["session_meta", "turn_context", "compacted"]
        assert records[0]["payload"]["id"] == resume["sessionId"]
        assert records[1]["payload"]["model"] == "gpt-5"

        agent.run("exec", "resume", resume["sessionId"], *flags, RESUME)
        resumed = agent.turn_request(RESUME)
        agent.run("exec", "resume", thread, *flags, RESUME)
        again = agent.turn_request(RESUME)
        # Codex takes the model from the new session's turn_context (the original's last)
        other = ["gpt-5-mini" if f == "gpt-5" else f for f in flags]
        warned = agent.run("exec", "resume", resume["sessionId"], *other, RESUME).stdout
        assert "This session was recorded with model `gpt-5` but is resuming with" in warned
    # Codex still sends its instructions and environment again (the new session has none)
    texts = _user_texts(resumed["input"])
    assert any(t.startswith("<environment_context>") for t in texts), texts[-3:]
    _check_round_trip(agent, original, new, result, resumed, again, "input")
