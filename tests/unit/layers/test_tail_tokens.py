"""Issue 15 point 5: the kept tail is budgeted in tokens (``keep_recent_tokens``), tool
blocks whole, and a huge kept output is micro-compacted."""

from __future__ import annotations

from typing import Any

import pytest

from compactctl.errors import UsageError
from compactctl.layers.options import CompactOptions
from compactctl.layers.summary import plan_compact, tail_start
from compactctl.model import CompactEvent, Event, Message, event_from_dict
from compactctl.replay import replay
from compactctl.tokens import TokenCounter, prompt_tokens
from tests.helpers import broken_blocks, msg


def _session(outputs: list[int]) -> list[Event]:
    """A request, then one turn per output: a user message, a bash call and its output of
    that many characters (distinct words, so the estimate counts them)."""
    records: list[dict[str, Any]] = [msg("u0", "user", "Fix the pager. Do not add deps.", turnId=1)]
    for turn, chars in enumerate(outputs, start=2):
        call = {"id": f"c{turn}", "name": "bash", "arguments": {"command": f"cat log{turn}.txt"}}
        words = " ".join(f"w{turn}x{i}" for i in range(chars // 8))
        records += [
            msg(f"u{turn}", "user", f"Look at log {turn}.", turnId=turn),
            msg(f"a{turn}", "assistant", "", toolCalls=[call], turnId=turn),
            msg(f"t{turn}", "tool", words, toolCallId=f"c{turn}", toolName="bash", turnId=turn),
        ]
    return [event_from_dict(r) for r in records]


def _tail_tokens(view: list[Message], counter: TokenCounter) -> int:
    return prompt_tokens([m for m in view if "summaryOf" not in m.data], counter)


def test_the_tail_is_cut_to_its_token_budget_at_block_boundaries() -> None:
    log = _session([4000] * 8)
    counter = TokenCounter("estimate")
    opts = CompactOptions(
        force=True, encoding="estimate", keep_recent_tokens=None, micro_enabled=False
    )
    by_count = replay([*log, *plan_compact(log, opts).events])
    budget = 2500
    plan = plan_compact(log, CompactOptions(**{**opts.__dict__, "keep_recent_tokens": budget}))
    view = replay([*log, *plan.events])
    assert broken_blocks(view) == []
    # more of the session went into the summary than with messages alone
    assert len(view) < len(by_count)
    assert _tail_tokens(view[2:], counter) <= budget  # after the pinned request and summary
    assert view[-1].uuid == "t9" and view[-2].uuid == "a9"  # the newest block whole
    assert plan.report.get("tailMicro") is None  # no output over half the budget


def test_a_huge_kept_output_is_micro_compacted_and_its_block_kept() -> None:
    log = _session([400, 400, 200_000])
    counter = TokenCounter("estimate")
    plan = plan_compact(
        log, CompactOptions(force=True, encoding="estimate", keep_recent_tokens=5000)
    )
    view = replay([*log, *plan.events])
    assert broken_blocks(view) == []
    tail = [e for e in plan.events if isinstance(e, CompactEvent)]
    assert tail and tail[-1].targets == ["t4"], plan.report
    assert plan.report["tailMicro"] == {"uuid": tail[-1].uuid, "targets": 1}
    kept = next(m for m in view if m.uuid == "t4")
    assert len(kept.text) < 2000 and kept.text.startswith("w4x0 ")
    assert _tail_tokens(view[2:], counter) < 5000


def test_tail_start_never_splits_a_block() -> None:
    call = {"id": "c1", "name": "bash", "arguments": {"command": "ls"}}
    records = [
        msg("u", "user", "go"),
        msg("a", "assistant", "", toolCalls=[call, {**call, "id": "c2"}]),
        msg("r1", "tool", "x", toolCallId="c1"),
        msg("r2", "tool", "y", toolCallId="c2"),
    ]
    view = [e for e in map(event_from_dict, records) if isinstance(e, Message)]
    # two messages fit, but the block is three: the newest block is kept whole
    assert tail_start(view, 2, lambda m: 1) == 1
    assert tail_start(view, 3, lambda m: 1) == 1
    assert tail_start(view, 4, lambda m: 1) == 0


def test_keep_recent_tokens_is_checked() -> None:
    with pytest.raises(UsageError, match="keep_recent_tokens"):
        CompactOptions(keep_recent_tokens=0)
