"""Record real agent sessions against the scripted model servers (issue 17).

Usage: ``python scripts/agents/record.py [--out fixtures/real] [--only AGENT]`` (an agent of
:data:`VERSIONS`)
(``make agents`` installs the agents first). The agents come from the npm cache folder
``$COMPACTCTL_AGENTS_CACHE`` (default ``~/.cache/compactctl-agents``), installed at the versions
of :data:`VERSIONS`.

Each agent works in a scratch folder on a small project (``calc.py`` with a bug and a test
that fails) through several prompts, each resumed from the previous session: shell commands,
a failing command, parallel calls, a subagent (Claude Code's Task tool), and the agent's own
compaction (Claude Code ``/compact``; Codex's automatic compaction, forced by a low
``model_auto_compact_token_limit``). The transcripts the agents write are copied to
``OUT/<agent>-<version>/`` with a ``manifest.json``: the versions, the prompts, what the
scripted server answered (calls and texts per request), and the files. Nothing real is in
them: the model is the script, the home folder a scratch one.

:func:`drive` is the same run without copying, for the test that drives the installed agents.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from servers import AnthropicServer, Call, GeminiServer, ResponsesServer, Script, Text  # noqa: E402

VERSIONS = {"claude": "2.1.328", "codex": "0.169.0", "gemini": "0.61.0", "opencode": "1.18.33"}
"""The pinned agent versions (npm ``@anthropic-ai/claude-code``, ``@openai/codex``,
``@google/gemini-cli``, ``opencode-ai``)."""
PACKAGES = {
    "claude": "@anthropic-ai/claude-code",
    "codex": "@openai/codex",
    "gemini": "@google/gemini-cli",
    "opencode": "opencode-ai",
}
FOLDERS = {
    "claude": "claude-code",
    "codex": "codex",
    "gemini": "gemini-cli",
    "opencode": "opencode",
}
"""The agent's folder name in ``fixtures/real/`` (``<folder>-<version>``)."""
WORKDIR = "/tmp/compactctl-agent-work"
"""Where the agents work (a fixed path, so recordings name the same folder every time)."""

CALC = "def add(a, b):\n    return a - b\n"
TEST = "from calc import add\n\nassert add(2, 3) == 5, f'add(2, 3) = {add(2, 3)}'\nprint('ok')\n"


def cache_dir() -> Path:
    """The npm cache folder the agents are installed into (outside the repository)."""
    default = Path.home() / ".cache" / "compactctl-agents"
    return Path(os.environ.get("COMPACTCTL_AGENTS_CACHE") or default)


def binary(agent: str) -> Path:
    """The installed agent's executable (``claude``, ``codex`` or ``gemini``)."""
    return cache_dir() / "node_modules" / ".bin" / agent


def installed(agent: str) -> bool:
    """Whether the pinned version of ``agent`` is in the cache folder."""
    pkg = cache_dir() / "node_modules" / PACKAGES[agent] / "package.json"
    if not pkg.is_file() or not binary(agent).exists():
        return False
    return bool(json.loads(pkg.read_text()).get("version") == VERSIONS[agent])


CLAUDE_PROMPTS = [
    ("t1", "[[t1]] Look at this project and run its test."),
    ("t2", "[[t2]] Fix the bug in calc.py and run the test again."),
    ("t3", "[[t3]] Ask a subagent to count the lines of calc.py."),
    ("compact", "/compact"),
    ("t4", "[[t4]] Show the diff of calc.py against the original."),
]
CLAUDE_SCRIPT: Script = {
    "t1": [
        [Text("Let me look around."), Call("shell", {"command": "ls"})],
        [Call("shell", {"command": "cat calc.py"}), Call("shell", {"command": "cat test_calc.py"})],
        [Call("shell", {"command": "python3 test_calc.py"})],
        [Text("The test fails: add(2, 3) returns -1 because add subtracts.")],
    ],
    "t2": [
        [Call("shell", {"command": "sed -i 's/a - b/a + b/' calc.py"})],
        [Call("shell", {"command": "python3 test_calc.py"})],
        [Text("Fixed: add now adds, and the test prints ok.")],
    ],
    "t3": [
        [
            Call(
                "subagent",
                {
                    "description": "Count lines",
                    "prompt": "[[sub]] Count the lines of calc.py and report the number.",
                },
            )
        ],
        [Text("The subagent reports that calc.py has 2 lines.")],
    ],
    "sub": [
        [Call("shell", {"command": "wc -l calc.py"})],
        [Text("calc.py has 2 lines.")],
    ],
    "t4": [
        [Call("shell", {"command": "cat calc.py"})],
        [Text("calc.py now returns a + b instead of a - b.")],
    ],
    "*compact*": [
        [
            Text(
                "<analysis>The user asked to fix calc.py.</analysis>\n<summary>1. Primary "
                "request: fix add in calc.py (it subtracted) and run test_calc.py.\n2. Done: "
                "changed a - b to a + b; the test prints ok; a subagent counted 2 lines."
                "</summary>"
            )
        ],
    ],
}

CODEX_PROMPTS = [
    ("c1", "[[c1]] Look at this project and run its test."),
    ("c2", "[[c2]] Fix the bug in calc.py and run the test again."),
    ("c3", "[[c3]] Print calc.py once more."),
]
CODEX_SCRIPT: Script = {
    "c1": [
        [Call("shell", {"command": "ls"})],
        [Call("shell", {"command": "cat calc.py"}), Call("shell", {"command": "cat test_calc.py"})],
        [Call("shell", {"command": "python3 test_calc.py"})],
        [Text("The test fails: add(2, 3) returns -1 because add subtracts.")],
    ],
    "c2": [
        [Call("shell", {"command": "sed -i 's/a - b/a + b/' calc.py"})],
        [Call("shell", {"command": "python3 test_calc.py"})],
        [Text("Fixed: add now adds, and the test prints ok.")],
    ],
    "c3": [
        [Call("shell", {"command": "cat calc.py"})],
        [Text("calc.py returns a + b.")],
    ],
    "*compact*": [
        [Text("Summary: calc.py's add subtracted; fixed to a + b; test_calc.py prints ok.")],
    ],
}


GEMINI_PROMPTS = [
    ("g1", "[[g1]] Look at this project and run its test."),
    ("g2", "[[g2]] Fix the bug in calc.py and run the test again."),
]
GEMINI_SCRIPT: Script = {"g1": CLAUDE_SCRIPT["t1"], "g2": CLAUDE_SCRIPT["t2"]}
"""The first two steps of Claude Code's script: a listing, two parallel reads, a failing test,
the fix and the passing test."""
OPENCODE_PROMPTS = [
    ("o1", "[[o1]] Look at this project and run its test."),
    ("o2", "[[o2]] Fix the bug in calc.py and run the test again."),
]
OPENCODE_SCRIPT: Script = {"o1": CLAUDE_SCRIPT["t1"], "o2": CLAUDE_SCRIPT["t2"]}
"""As :data:`GEMINI_SCRIPT`, through opencode's ``anthropic`` provider."""

GEMINI_SETTINGS = {
    "general": {"disableAutoUpdate": True, "disableUpdateNag": True},
    "telemetry": {"enabled": False},
    "privacy": {"usageStatisticsEnabled": False},
    "security": {"auth": {"selectedType": "gemini-api-key"}, "folderTrust": {"enabled": False}},
}
"""Gemini CLI's settings in the scratch home: API-key auth (the key and the base URL come from
the environment), no update check, no telemetry, no folder-trust prompt."""


def _project(work: Path) -> None:
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    (work / "calc.py").write_text(CALC)
    (work / "test_calc.py").write_text(TEST)


def _run(
    cmd: list[str], work: Path, env: dict[str, str], timeout: float
) -> tuple[subprocess.CompletedProcess[str], float]:
    """Run one agent command in ``work`` (no stdin): ``(the process, seconds taken)``."""
    started = time.monotonic()
    proc = subprocess.run(
        cmd,
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=timeout,
        check=False,
    )
    return proc, round(time.monotonic() - started, 1)


def _entry(
    tag: str, prompt: str, proc: subprocess.CompletedProcess[str], seconds: float, **extra: Any
) -> dict[str, Any]:
    """One run of the manifest: the prompt, exit code, seconds, stderr's end and ``extra``."""
    return {
        "tag": tag,
        "prompt": prompt,
        "exit": proc.returncode,
        "seconds": seconds,
        **extra,
        "stderr": proc.stderr[-2000:],
    }


def _env(home: Path, extra: dict[str, str]) -> dict[str, str]:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "TERM": "dumb",
        "NO_COLOR": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    }
    if os.geteuid() == 0:
        env["IS_SANDBOX"] = "1"
    env.update(extra)
    return env


def drive_claude(
    home: Path, timeout: float = 120, prompts: list[tuple[str, str]] | None = None
) -> dict[str, Any]:
    """Run Claude Code through :data:`CLAUDE_PROMPTS`; returns the run's facts (session id,
    the server log, the outputs of each run, the session file paths)."""
    work = Path(WORKDIR) / "claude"
    _project(work)
    runs: list[dict[str, Any]] = []
    session: str | None = None
    with AnthropicServer(CLAUDE_SCRIPT, model="claude-sonnet-4-5") as server:
        env = _env(home, {"ANTHROPIC_BASE_URL": server.url, "ANTHROPIC_API_KEY": "scripted"})
        for tag, prompt in prompts or CLAUDE_PROMPTS:
            cmd = [
                str(binary("claude")),
                "-p",
                prompt,
                "--dangerously-skip-permissions",
                "--output-format",
                "json",
                "--model",
                "claude-sonnet-4-5",
            ]
            if session:
                cmd += ["--resume", session]
            proc, seconds = _run(cmd, work, env, timeout)
            try:
                result = json.loads(proc.stdout.strip().splitlines()[-1])
            except (ValueError, IndexError):
                result = {}
            session = result.get("session_id") or session
            runs.append(_entry(tag, prompt, proc, seconds, result=result.get("result")))
        log = list(server.log)
    files = sorted((home / ".claude" / "projects").rglob("*.jsonl"))
    return {"session": session, "runs": runs, "log": log, "files": files}


def drive_codex(
    home: Path, timeout: float = 120, prompts: list[tuple[str, str]] | None = None
) -> dict[str, Any]:
    """Run Codex CLI through :data:`CODEX_PROMPTS` (``codex exec --json``, resumed); returns
    the run's facts (thread id, server log, the ``--json`` streams, rollout paths)."""
    work = Path(WORKDIR) / "codex"
    _project(work)
    codex_home = home / ".codex"
    codex_home.mkdir(parents=True, exist_ok=True)
    runs: list[dict[str, Any]] = []
    thread: str | None = None
    with ResponsesServer(CODEX_SCRIPT, model="gpt-5") as server:
        provider = (
            'model_providers.mock={name="mock",base_url="' + server.url + '/v1",'
            'env_key="OPENAI_API_KEY",wire_api="responses"}'
        )
        env = _env(home, {"CODEX_HOME": str(codex_home), "OPENAI_API_KEY": "scripted"})
        todo = prompts or CODEX_PROMPTS
        for i, (tag, prompt) in enumerate(todo):
            # the last two prompts report a large usage and the last one runs with a tiny
            # compaction limit: Codex compacts before it (and again within it)
            server.usage_tokens = 200 if i < len(todo) - 2 or prompts else 5000
            cmd = [str(binary("codex")), "exec"]
            if thread:
                cmd += ["resume", thread]
            cmd += [
                "--json",
                "--skip-git-repo-check",
                "--dangerously-bypass-approvals-and-sandbox",
                "-c",
                provider,
                "-c",
                "model_provider=mock",
                "-m",
                "gpt-5",
            ]
            if i == len(todo) - 1 and not prompts:
                cmd += ["-c", "model_auto_compact_token_limit=1000"]
            cmd.append(prompt)
            proc, seconds = _run(cmd, work, env, timeout)
            for line in proc.stdout.splitlines():
                try:
                    event = json.loads(line)
                except ValueError:
                    continue
                if event.get("type") == "thread.started":
                    thread = thread or event.get("thread_id")
            runs.append(_entry(tag, prompt, proc, seconds, stdout=proc.stdout))
        log = list(server.log)
    files = sorted((codex_home / "sessions").rglob("rollout-*.jsonl"))
    return {"session": thread, "runs": runs, "log": log, "files": files}


def drive_gemini(
    home: Path, timeout: float = 120, prompts: list[tuple[str, str]] | None = None
) -> dict[str, Any]:
    """Run Gemini CLI through :data:`GEMINI_PROMPTS` (``gemini -p PROMPT -y``, the second
    prompt resuming the session with ``--resume latest``); returns the run's facts (server
    log, outputs, the chat recordings under ``~/.gemini/tmp/*/chats/``)."""
    work = Path(WORKDIR) / "gemini"
    _project(work)
    settings = home / ".gemini" / "settings.json"
    settings.parent.mkdir(parents=True, exist_ok=True)
    settings.write_text(json.dumps(GEMINI_SETTINGS))
    runs: list[dict[str, Any]] = []
    with GeminiServer(GEMINI_SCRIPT, model="gemini-2.5-flash") as server:
        env = _env(home, {"GOOGLE_GEMINI_BASE_URL": server.url, "GEMINI_API_KEY": "scripted"})
        for i, (tag, prompt) in enumerate(prompts or GEMINI_PROMPTS):
            cmd = [str(binary("gemini")), "-p", prompt, "-y", "-m", "gemini-2.5-flash"]
            if i:
                cmd += ["--resume", "latest"]
            proc, seconds = _run(cmd, work, env, timeout)
            runs.append(_entry(tag, prompt, proc, seconds, result=proc.stdout[-2000:]))
        chats = sorted((home / ".gemini" / "tmp").rglob("chats/session-*.json*"))
        return {"session": None, "runs": runs, "log": list(server.log), "files": chats}


def drive_opencode(
    home: Path, timeout: float = 120, prompts: list[tuple[str, str]] | None = None
) -> dict[str, Any]:
    """Run opencode through :data:`OPENCODE_PROMPTS` (``opencode run --format json``, its
    ``anthropic`` provider pointed at the scripted server by the project's ``opencode.json``;
    the second prompt continues the session with ``--session ID``), then ``opencode export
    ID`` into ``HOME/export/<session>.json``; returns the run's facts (the ``--format json``
    streams of the runs in ``stdout``, the export's path in ``files``)."""
    work = Path(WORKDIR) / "opencode"
    _project(work)
    runs: list[dict[str, Any]] = []
    session: str | None = None
    with AnthropicServer(OPENCODE_SCRIPT, model="claude-sonnet-4-5") as server:
        config = {
            "provider": {"anthropic": {"options": {"baseURL": server.url + "/v1"}}},
            "model": "anthropic/claude-sonnet-4-5",
            "autoupdate": False,
            "share": "disabled",
        }
        (work / "opencode.json").write_text(json.dumps(config))
        extra = {"ANTHROPIC_API_KEY": "scripted", "OPENCODE_DISABLE_AUTOUPDATE": "1"}
        env = _env(home, extra)
        for tag, prompt in prompts or OPENCODE_PROMPTS:
            cmd = [str(binary("opencode")), "run", "--format", "json"]
            if session:
                cmd += ["--session", session]
            proc, seconds = _run([*cmd, prompt], work, env, timeout)
            for line in proc.stdout.splitlines():
                try:
                    event = json.loads(line)
                except ValueError:
                    continue
                session = session or event.get("sessionID")
            runs.append(_entry(tag, prompt, proc, seconds, stdout=proc.stdout))
        log = list(server.log)
    files = []
    if session:
        proc, _ = _run([str(binary("opencode")), "export", session], work, env, timeout)
        target = home / "export" / f"{session}.json"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(proc.stdout)
        files.append(target)
    return {"session": session, "runs": runs, "log": log, "files": files}


def _copy(facts: dict[str, Any], root: Path, out: Path, agent: str) -> None:
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    names = []
    for path in facts["files"]:
        rel = Path(path).relative_to(root)
        target = out / rel.name if "subagents" not in rel.parts else out / "subagents" / rel.name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)
        names.append(str(target.relative_to(out)))
    streams = []
    for i, run in enumerate(facts["runs"]):
        stdout = run.pop("stdout", None)
        if stdout:
            name = f"{'exec' if agent == 'codex' else 'run'}-{i + 1}.jsonl"
            (out / name).write_text(stdout)
            streams.append(name)
    manifest = {
        "agent": agent,
        "package": PACKAGES[agent],
        "version": VERSIONS[agent],
        "workdir": WORKDIR,
        "session": facts["session"],
        "files": names,
        # codex exec --json streams (read as codex-exec); opencode run --format json streams
        # (no reader: a real file detection must refuse)
        "execStreams" if agent == "codex" else "runStreams": streams,
        "runs": facts["runs"],
        "server": facts["log"],
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")


def install() -> int:
    """``npm install`` the pinned :data:`VERSIONS` into :func:`cache_dir` (a no-op when they
    are there). Returns npm's exit code."""
    if all(installed(agent) for agent in VERSIONS):
        print(f"agents already installed in {cache_dir()}")
        return 0
    cache_dir().mkdir(parents=True, exist_ok=True)
    specs = [f"{PACKAGES[a]}@{VERSIONS[a]}" for a in VERSIONS]
    cmd = [
        "npm",
        "install",
        "--prefix",
        str(cache_dir()),
        "--no-audit",
        "--no-fund",
        "--loglevel=error",
        *specs,
    ]
    print(" ".join(cmd))
    started = time.monotonic()
    code = subprocess.run(cmd, check=False).returncode
    print(f"npm exit {code} in {time.monotonic() - started:.0f} s")
    return code


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default="fixtures/real")
    parser.add_argument("--only", choices=list(VERSIONS))
    parser.add_argument("--install", action="store_true", help="install the agents and stop")
    args = parser.parse_args()
    if args.install:
        return install()
    for agent in VERSIONS:
        if args.only and args.only != agent:
            continue
        if not installed(agent):
            print(f"{agent} {VERSIONS[agent]} is not installed in {cache_dir()}: make agents")
            return 2
        with tempfile.TemporaryDirectory(prefix="compactctl-agent-home-") as tmp:
            home = Path(tmp)
            if agent == "claude":
                facts = drive_claude(home)
                root = home / ".claude" / "projects"
            elif agent == "codex":
                facts = drive_codex(home)
                root = home / ".codex" / "sessions"
            elif agent == "gemini":
                facts = drive_gemini(home)
                root = home / ".gemini" / "tmp"
            else:
                facts = drive_opencode(home)
                root = home / "export"
            out = Path(args.out) / f"{FOLDERS[agent]}-{VERSIONS[agent]}"
            _copy(facts, root, out, agent)
            print(f"{agent}: {len(facts['files'])} files, {len(facts['log'])} requests -> {out}")
            for run in facts["runs"]:
                print(f"  {run['tag']}: exit {run['exit']} in {run['seconds']} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
