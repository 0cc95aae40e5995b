"""Settings precedence: flag > environment > config file > default."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from compactctl.app.config import Settings, load_config, to_bool
from compactctl.errors import UsageError
from tests.helpers import SAMPLES, run_cli


def test_precedence_and_command_tables():
    table = {"keep_recent": 5, "model": "a", "compact": {"keep_recent": 7}}
    s = Settings(table, "compact", environ={"COMPACTCTL_MODEL": "from-env"})
    assert s.get("keep_recent", None, 10, int) == 7  # [compact] beats the top level
    assert s.get("keep_recent", 3, 10, int) == 3  # the flag beats everything
    assert s.get("model", None, None, str) == "from-env"  # env beats the file
    assert s.get("strategy", None, "keep_recent", str) == "keep_recent"  # default
    assert Settings(table, "rules", environ={}).get("keep_recent", None, 10, int) == 5


def test_bad_values_name_their_source(tmp_path: Path):
    table = {"keep_recent": "many", "compact": {"redact": "maybe"}}
    s = Settings(table, "compact", environ={"COMPACTCTL_JOBS": "x"}, source="/etc/cc.toml")
    with pytest.raises(UsageError) as info:
        s.get("keep_recent", None, 10, int)
    assert str(info.value) == (
        "config /etc/cc.toml: keep_recent = 'many': expected a whole number (e.g. 10); fix "
        "the value or remove the key"
    )
    with pytest.raises(UsageError, match=r"^config /etc/cc.toml: \[compact\] redact = 'maybe': "):
        s.get("redact", None, True, bool)
    with pytest.raises(UsageError) as info:
        s.get("jobs", None, 1, int)
    assert str(info.value) == (
        "environment COMPACTCTL_JOBS='x': expected a whole number (e.g. 10); fix or unset it"
    )
    bad = tmp_path / "bad.toml"
    bad.write_text("keep_recent = [\n")
    with pytest.raises(UsageError, match="invalid TOML"):
        load_config(str(bad))
    assert to_bool("yes") is True and to_bool("0") is False


def test_config_file_and_env_reach_the_cli(tmp_path: Path):
    path = tmp_path / "s.jsonl"
    path.write_bytes((SAMPLES / "small-s1.canonical.jsonl").read_bytes())
    cfg = tmp_path / "c.toml"
    cfg.write_text("[compact]\nmin_saving = 0.99\n")
    r = run_cli("compact", "--force", "--json", "--config", str(cfg), str(path))
    assert orjson.loads(r.stdout)["files"][0]["changed"] is False  # the file's 99% applies
    r = run_cli(
        "compact",
        "--force",
        "--json",
        "--config",
        str(cfg),
        str(path),
        env={"COMPACTCTL_MIN_SAVING": "0.05"},
    )
    assert orjson.loads(r.stdout)["files"][0]["changed"] is True  # env beats the file
    r = run_cli("compact", "--config", str(tmp_path / "missing.toml"), str(path))
    assert r.returncode == 2 and b"config file not found" in r.stderr
