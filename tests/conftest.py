"""Shared test helpers: run the CLI in a subprocess, write transcripts, isolate state."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import orjson
import pytest

# Before any test module imports litellm (some do at collection): offline, its model cost
# map must come from the bundled copy, or the import retries a download for seconds.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
SAMPLES = FIXTURES / "samples"


@pytest.fixture(scope="session")
def _shared_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One cache folder for the whole run (the tiktoken encoding cache is built once)."""
    return tmp_path_factory.mktemp("cache")


@pytest.fixture(autouse=True)
def _isolated_state(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch, _shared_cache: Path
):
    """Point every state, config and cache location at a temporary folder (no test touches
    $HOME)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(_shared_cache))
    base = tmp_path_factory.mktemp("state")
    monkeypatch.setenv("XDG_STATE_HOME", str(base / "state"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(base / "config"))
    monkeypatch.setenv("COMPACTCTL_DB", str(base / "compactctl.db"))
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    # fixtures are written just before use, so a torn last line is only milliseconds old:
    # take it as torn after 0.2 s instead of the default 2 s (tests of the wait set it)
    monkeypatch.setenv("COMPACTCTL_TORN_WAIT", "0.2")
    monkeypatch.delenv("COMPACTCTL_CONFIG", raising=False)


def run_cli(
    *args: str,
    input: bytes | None = None,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
) -> subprocess.CompletedProcess[bytes]:
    """Run ``python -m compactctl ARGS`` and capture stdout/stderr as bytes."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "compactctl", *args],
        input=input,
        capture_output=True,
        env=full_env,
        cwd=cwd,
        timeout=300,
    )


def write_jsonl(path: Path, records: Iterable[dict[str, Any]]) -> Path:
    """Write records as compact JSONL (orjson), one per line."""
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
    return path


def msg(uuid: str, role: str, content: Any = "", **extra: Any) -> dict[str, Any]:
    """A canonical message record."""
    return {"type": "message", "uuid": uuid, "role": role, "content": content, **extra}
