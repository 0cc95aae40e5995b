"""`eval --compare`: compaction configurations side by side, planned in memory."""

from __future__ import annotations

from pathlib import Path

import pytest

from compactctl.errors import UsageError
from compactctl.evaluate import EvalOptions
from compactctl.evaluate.compare import DEFAULT_CONFIGS, compare_table, parse_configs
from compactctl.evaluate.job import eval_path
from compactctl.evaluate.report import eval_table
from tests.helpers import SAMPLES


def test_default_set_side_by_side(tmp_path: Path):
    path = tmp_path / "s.jsonl"
    path.write_bytes((SAMPLES / "small-s1.canonical.jsonl").read_bytes())
    before = path.read_bytes()
    options = EvalOptions(encoding="estimate", compare=parse_configs(["default"]))
    result = eval_path(str(path), options)["result"]
    assert path.read_bytes() == before  # nothing is written
    rows = {r["config"]: r for r in result.compare}
    assert list(rows) == ["as is", *DEFAULT_CONFIGS]
    assert rows["as is"]["tokensAfter"] == result.tokens_after == result.tokens_before
    assert rows["as is"]["probes"]["retention"] == 1.0
    for name in DEFAULT_CONFIGS:
        assert rows[name]["tokensAfter"] < result.tokens_before
        assert list(rows[name]) == ["config", "tokensAfter", "ratio", "probes"]
    # micro compaction elides the middle of old tool outputs but keeps their error lines
    # (issue 15, point 7; before it, 2 of the 5 error probes were kept; 8 since pytest's
    # located lines, ``tests/test_storage.py:12: AssertionError``, are error lines too)
    micro = rows["micro_only=true"]["probes"]
    assert micro["byKind"]["error"]["kept"] == micro["byKind"]["error"]["total"] == 8
    assert rows["micro_only=true"]["tokensAfter"] < result.tokens_before
    # full_replace replaces the newest turn too, and a small budget drops decisions
    small = rows["strategy=full_replace,max_summary_chars=1200"]
    assert small["tokensAfter"] < rows["strategy=full_replace"]["tokensAfter"]
    assert small["probes"]["byKind"]["latest_request"]["kept"] == 1  # every summary states it
    assert rows["strategy=keep_recent"]["probes"]["retention"] == 1.0
    text = eval_table(result)
    assert "configuration" in text and "strategy=full_replace,max_summary_chars=1200" in text


def test_a_compacted_file_compared_as_is(tmp_path: Path):
    from compactctl.app.jobs import OutputOptions, compact_path
    from compactctl.layers.options import CompactOptions

    path = tmp_path / "s.jsonl"
    compact_path(str(SAMPLES / "cjk-s3.canonical.jsonl"), CompactOptions(force=True),
                 OutputOptions(output=str(path), db=""))  # fmt: skip
    options = EvalOptions(encoding="estimate", compare=parse_configs(["strategy=full_replace"]))
    result = eval_path(str(path), options)["result"]
    as_is, full = result.compare
    assert as_is["tokensAfter"] == result.tokens_after < result.tokens_before
    assert as_is["probes"]["retention"] == result.counts.retention
    assert full["config"] == "strategy=full_replace"


def test_parse_configs():
    (config,) = parse_configs(
        ["strategy=keep_recent, keep-recent=4, micro=off, summarizer=extractive"]
    )
    assert dict(config.values) == {"strategy": "keep_recent", "keep_recent": 4,
                                   "micro_enabled": False, "model": "extractive"}  # fmt: skip
    for bad, message in (
        ("strategy=sideways", "unknown strategy"),
        ("keep_recent=many", "not a int"),
        ("colour=blue", "names no setting .'colour'."),
        ("colour", "is not KEY=VALUE"),
        ("", "takes KEY=VALUE"),
        ("micro=maybe", "not a bool"),
    ):
        with pytest.raises(UsageError, match=message):
            parse_configs([bad])


def test_table_shows_only_kinds_some_configuration_loses():
    rows = [
        {"config": "as is", "tokensAfter": 100, "ratio": 1.0,
         "probes": {"retention": 1.0, "byKind": {"error": {"total": 2, "kept": 2},
                                                 "command": {"total": 1, "kept": 1}}}},
        {"config": "x", "tokensAfter": 10, "ratio": 0.1, "error": "boom",
         "probes": {"retention": 0.67, "byKind": {"error": {"total": 2, "kept": 1},
                                                  "command": {"total": 1, "kept": 1}}}},
    ]  # fmt: skip
    text = compare_table(rows)
    assert text.splitlines()[0].split() == [
        "configuration",
        "tokens",
        "ratio",
        "retention",
        "error",
    ]
    assert "x (failed)" in text and "0.50" in text
