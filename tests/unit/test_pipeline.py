"""Every filter (rules, dedup, micro) alone and chained with ``pipeline``: never splits a tool
block, never mutates its input, appends nothing on a second pass, at most one event each."""

from __future__ import annotations

from hypothesis import given, settings

from compactctl.io.files import read
from compactctl.layers.dedup import dedup
from compactctl.layers.micro import MicroParams, micro
from compactctl.layers.rules import rules
from compactctl.pipeline import pipeline
from compactctl.replay import replay
from tests.helpers import SAMPLES, split_blocks
from tests.strategies import sessions

T = "2025-01-01T00:00:00Z"


FILTERS = {
    "rules": lambda: rules(timestamp=T),
    "dedup": lambda: dedup(threshold=0.5, timestamp=T),
    "micro": lambda: micro(MicroParams(keep_turns=0, min_chars=20), timestamp=T),
}


@settings(max_examples=150, deadline=None)
@given(sessions())
def test_filters_keep_blocks_whole_and_are_idempotent(log):
    snapshot = [e.to_json() for e in log]
    for name, make in FILTERS.items():
        once = list(pipeline(log, make()))
        assert [e.to_json() for e in log] == snapshot, name  # input never mutated
        assert split_blocks(replay(once), log) == [], name
        twice = list(pipeline(once, make()))
        assert len(twice) == len(once), name  # the second pass appends nothing
    chained = list(pipeline(log, *(make() for make in FILTERS.values())))
    assert split_blocks(replay(chained), log) == []


def test_filters_on_samples_append_at_most_one_event_each():
    log = list(read(str(SAMPLES / "cjk-s3.canonical.jsonl")))
    out = list(pipeline(log, *(make() for make in FILTERS.values())))
    assert [e.data["mode"] for e in out[len(log) :]] == ["rules", "dedup", "micro"]
