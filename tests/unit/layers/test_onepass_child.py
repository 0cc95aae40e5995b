"""``compact --layers`` on a large file counts in a child process (``tokens.warm_counting``,
``TokenCounter.prefetch(child=True)``): the plan is the one counted in this process."""

from __future__ import annotations

from typing import Any

import pytest

from compactctl import tokens
from compactctl.layers.onepass import OnePassOptions, plan_onepass
from compactctl.layers.options import CompactOptions
from compactctl.session import Session
from tests.helpers import SAMPLES


def _timeless(value: Any) -> Any:
    """``value`` without its ``durationMs`` fields (each run times its own)."""
    if isinstance(value, dict):
        return {k: _timeless(v) for k, v in value.items() if k != "durationMs"}
    if isinstance(value, list):
        return [_timeless(v) for v in value]
    return value


@pytest.mark.parametrize("name", ["messy-s2.claude-code.jsonl", "small-s1.canonical.jsonl"])
def test_the_one_pass_plans_the_same_with_a_counting_child(
    monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    monkeypatch.setattr(tokens, "count_threads", lambda: 2)
    path = str(SAMPLES / name)
    options = OnePassOptions(layers="all", compact=CompactOptions(force=True))

    def plan(child: bool) -> tuple[list[bytes], list[dict], Session]:
        monkeypatch.setattr(tokens, "COUNT_PROCESS_MIN_BYTES", 0 if child else 1 << 62)
        with tokens.warm_counting(path, None):
            session = Session.open(path)
            result = plan_onepass(session, options, now=lambda: "2026-12-02T00:00:00Z")
        rows = [_timeless(r.to_json()) for r in result.rows]
        return [e.to_json() for e in result.events], rows, session

    events, rows, session = plan(child=True)
    queue = session.counter._queue
    assert queue is not None and queue._process is not None and not queue._process._gone
    alone_events, alone_rows, alone = plan(child=False)
    assert alone.counter._queue is None or alone.counter._queue._process is None
    assert events and rows[0]["tokensBefore"] > 0
    assert (events, rows) == (alone_events, alone_rows)
