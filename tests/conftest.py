"""Fixtures for every test folder: state, config and caches isolated per test.

The helpers (running the CLI, paths, writing transcripts) are in ``tests/helpers.py``.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# Before any test module imports litellm (some do at collection): offline, its model cost
# map must come from the bundled copy, or the import retries a download for seconds.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


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
