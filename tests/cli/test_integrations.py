"""The GitHub Action (``action.yml``) and the pre-commit hooks (``.pre-commit-hooks.yaml``) of
the repository (issue 19 point 9), run here offline.

The action's ``run`` step is run as GitHub runs it (bash, its ``env`` with the inputs filled
in, ``GITHUB_STEP_SUMMARY`` and ``GITHUB_OUTPUT`` files) with this virtualenv's compactctl on
PATH; its install step needs PyPI and is checked for what it installs. The hooks run through
``pre-commit try-repo`` (a dev dependency) on a scratch git repository; the ``language:
system`` hook installs nothing, and the ``language: python`` one is checked to run the same
command.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import yaml

from tests.helpers import ROOT, SAMPLES

BIN = str(Path(sys.executable).parent)
"""The virtualenv's bin folder: its compactctl and pre-commit."""


def _action() -> dict[str, Any]:
    doc = yaml.safe_load((ROOT / "action.yml").read_text())
    assert isinstance(doc, dict)
    return doc


def _fill(value: str, inputs: dict[str, str]) -> str:
    """``${{ inputs.NAME }}`` replaced by the input's value, as the runner does."""
    return re.sub(r"\$\{\{\s*inputs\.([\w-]+)\s*\}\}", lambda m: inputs[m.group(1)], value)


def _sessions(folder: Path) -> Path:
    """Two canonical sessions: one past its (recorded) window's micro trigger, one not."""
    folder.mkdir()
    lines = (SAMPLES / "small-s1.canonical.jsonl").read_bytes().splitlines()
    head = orjson.loads(lines[0])
    assert head["type"] == "session"
    (folder / "ok.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    big = [orjson.dumps({**head, "contextWindow": 8000}), *lines[1:]]
    (folder / "big.jsonl").write_bytes(b"\n".join(big) + b"\n")
    return folder


def test_the_action_declares_its_inputs_and_installs_from_its_own_checkout():
    action = _action()
    assert action["runs"]["using"] == "composite"
    inputs = action["inputs"]
    assert set(inputs) == {"path", "command", "args", "report", "python-version"}
    assert (inputs["command"]["default"], inputs["report"]["default"]) == ("compact", "true")
    steps = {s.get("id"): s for s in action["runs"]["steps"]}
    assert steps["install"]["env"]["ACTION_PATH"] == "${{ github.action_path }}"
    assert 'pip install --disable-pip-version-check -q "$ACTION_PATH"' in steps["install"]["run"]
    assert action["outputs"]["exit-code"]["value"] == "${{ steps.run.outputs.exit-code }}"


def test_the_action_run_step_writes_the_markdown_report_to_the_job_summary(tmp_path: Path):
    action = _action()
    step = next(s for s in action["runs"]["steps"] if s.get("id") == "run")
    assert step["shell"] == "bash"
    sessions = _sessions(tmp_path / "sessions")
    summary, output = tmp_path / "summary.md", tmp_path / "output"
    summary.write_text("")
    output.write_text("")
    inputs = {k: str(v.get("default", "")) for k, v in action["inputs"].items()}
    inputs.update(path=str(sessions), command="compact", args="--dry-run --estimate")
    env = {k: _fill(v, inputs) for k, v in step["env"].items()}
    env.update(
        PATH=BIN + os.pathsep + os.environ["PATH"],
        GITHUB_STEP_SUMMARY=str(summary),
        GITHUB_OUTPUT=str(output),
    )
    before = {p.name: p.read_bytes() for p in sessions.iterdir()}
    r = subprocess.run(
        ["bash", "-c", step["run"]],
        capture_output=True,
        env={**os.environ, **env},
        cwd=tmp_path,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr.decode()
    assert output.read_text() == "exit-code=0\n"
    text = summary.read_text()
    assert "big.jsonl" in text and "ok.jsonl" in text and "|" in text  # a Markdown table
    assert {p.name: p.read_bytes() for p in sessions.iterdir()} == before  # --dry-run

    # a gate: --check fails the step with exit 1, and says so in the step's output
    inputs["args"] = "--check --estimate"
    env.update({k: _fill(v, inputs) for k, v in step["env"].items()})
    r = subprocess.run(["bash", "-c", step["run"]], capture_output=True,
                       env={**os.environ, **env}, cwd=tmp_path, timeout=300)  # fmt: skip
    assert r.returncode == 1 and output.read_text().endswith("exit-code=1\n")


def _pre_commit(
    repo: Path, hooks: Path, hook: str, *files: str
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": BIN + os.pathsep + os.environ["PATH"],
           "PRE_COMMIT_HOME": str(repo.parent / "pre-commit-home")}  # fmt: skip
    return subprocess.run(
        [str(Path(BIN) / "pre-commit"), "try-repo", str(hooks), hook, "--files", *files],
        capture_output=True,
        text=True,
        env=env,
        cwd=repo,
        timeout=300,
    )


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
    )


def test_the_pre_commit_hook_fails_a_transcript_that_needs_compaction(tmp_path: Path):
    hooks = tmp_path / "hooks"  # the hook definitions as committed in a hooks repository
    hooks.mkdir()
    shutil.copyfile(ROOT / ".pre-commit-hooks.yaml", hooks / ".pre-commit-hooks.yaml")
    _git(hooks, "init", "-q")
    _git(hooks, "add", ".")
    _git(hooks, "commit", "-qm", "hooks")
    repo = _sessions(tmp_path / "repo")
    _git(repo, "init", "-q")
    _git(repo, "add", ".")

    r = _pre_commit(repo, hooks, "compactctl-check-system", "big.jsonl", "ok.jsonl")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "Failed" in r.stdout
    assert "big.jsonl: would append micro compaction" in r.stdout
    assert "ok.jsonl: unchanged" in r.stdout
    r = _pre_commit(repo, hooks, "compactctl-check-system", "ok.jsonl")
    assert r.returncode == 0 and "Passed" in r.stdout, r.stdout + r.stderr
    assert (repo / "big.jsonl").read_bytes().count(b"\n") == 68  # --check wrote nothing

    defs = {h["id"]: h for h in yaml.safe_load((hooks / ".pre-commit-hooks.yaml").read_text())}
    python, system = defs["compactctl-check"], defs["compactctl-check-system"]
    assert (python["language"], system["language"]) == ("python", "system")
    assert python["entry"] == system["entry"] == "compactctl compact --check"
    assert python["files"] == system["files"] == r"\.jsonl$"
