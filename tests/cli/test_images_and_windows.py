"""Images in the prompt estimate and the context window, end to end: 200 old screenshots
trigger compaction and are elided; an unknown model compacts with the stated default window
(and says so); ``--context-window`` exists on every command that uses a window."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from tests.helpers import SAMPLES, msg, run_cli, write_jsonl
from tests.unit.layers.test_micro import screenshot_session


def test_200_old_screenshots_trigger_compaction_and_get_elided(tmp_path: Path):
    path = write_jsonl(tmp_path / "shots.jsonl", [e.data for e in screenshot_session(200)])
    assert path.stat().st_size > 1_200_000
    before = orjson.loads(run_cli("inspect", "--json", str(path)).stdout)["files"][0]
    assert before["tokens"] > 270_000  # 202 screenshots of 1,366 tokens each, and the text
    r = run_cli("compact", "--json", str(path))  # no --force: the triggers decide
    assert r.returncode == 0, r.stderr.decode()
    (f,) = orjson.loads(r.stdout)["files"]
    assert f["trigger"] == "auto" and f["micro"]["targets"] == 199
    after = orjson.loads(run_cli("inspect", "--json", str(path)).stdout)["files"][0]
    assert after["tokens"] == before["tokens"]
    assert after["effectiveTokens"] == f["tokensAfter"] < before["tokens"] / 20
    r = run_cli("inspect", "--effective", str(path))
    assert r.stdout.count(b"[image: 1280x800 png, 1366 tokens, elided]") == 199


def _unknown_model_session(tmp_path: Path) -> Path:
    records = [{"type": "session", "uuid": "s", "model": "acme-coder-7b"}]
    for t in range(1, 4):
        records += [
            msg(f"u{t}", "user", f"step {t}"),
            msg(
                f"a{t}",
                "assistant",
                "",
                toolCalls=[{"id": f"c{t}", "name": "bash", "arguments": {}}],
            ),
            msg(f"t{t}", "tool", "log line\n" * 2000, toolCallId=f"c{t}"),
        ]
    return write_jsonl(tmp_path / "acme.jsonl", records)


def test_an_unknown_model_compacts_with_the_default_window_and_a_warning(tmp_path: Path):
    path = _unknown_model_session(tmp_path)
    r = run_cli("compact", "--json", "--dry-run", str(path))
    assert r.returncode == 0
    assert (
        b"model 'acme-coder-7b' has no known context window: assuming a context window of "
        b"128,000 tokens"
    ) in r.stderr
    (f,) = orjson.loads(r.stdout)["files"]
    assert f["contextWindow"] == 128_000
    assert "under 25% of the 128000-token window" in f["reason"]
    # a small window given on the command line: no warning, and the trigger fires
    r = run_cli("compact", "--json", "--dry-run", "--context-window", "8000", str(path))
    assert r.returncode == 0 and b"warning" not in r.stderr
    (f,) = orjson.loads(r.stdout)["files"]
    assert f["contextWindow"] == 8000 and f["micro"]["targets"] == 1  # turn 1 of 3


def test_a_folder_run_names_the_first_file_without_a_window_once(tmp_path: Path):
    """A cron folder of sessions with no model: the warning names the first file it is
    true of, once per run (review 11: it named none, so which of 200 files?)."""
    folder = tmp_path / "logs"
    folder.mkdir()
    for name in ("a.jsonl", "b.jsonl", "c.jsonl"):
        (folder / name).write_bytes((SAMPLES / "small-s1.openai-chat.jsonl").read_bytes())
    r = run_cli("inspect", "--estimate", "--jobs", "1", str(folder))
    assert r.returncode == 0, r.stderr
    warned = [line for line in r.stderr.decode().splitlines() if "warning" in line]
    assert warned == [
        f"compactctl: warning: {folder / 'a.jsonl'}: no model is recorded: assuming a context "
        "window of 128,000 tokens (pass --context-window N to set it)"
    ]


@pytest.mark.parametrize("command", ["inspect", "compact", "tiers", "eval"])
def test_context_window_is_an_option_of_every_command_that_uses_a_window(command: str):
    r = run_cli(command, "--help")
    assert r.returncode == 0 and b"--context-window" in r.stdout
