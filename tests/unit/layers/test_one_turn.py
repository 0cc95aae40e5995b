"""Issue 15 point 6: every run compacts. An autonomous run is one long turn; its older tool
blocks are summarized, the newest kept whole, no block split."""

from __future__ import annotations

from bench.gen_probed import probed_session
from compactctl.layers.options import CompactOptions
from compactctl.layers.summary import plan_compact
from compactctl.model import event_from_dict
from compactctl.replay import replay

SEED = 9733  # not used by any other test


def test_a_one_turn_run_of_900_messages_compacts_5x_with_tool_blocks_whole() -> None:
    records, _ = probed_session(SEED, 330, one_turn=True)
    log = [event_from_dict(r) for r in records]
    messages = [e for e in log if e.__class__.__name__ == "Message"]
    assert len(messages) >= 900
    assert {r["turnId"] for r in records if r.get("role") not in (None, "system")} == {1}
    plan = plan_compact(log, CompactOptions(force=True))
    assert plan.report["summary"] is not None, plan.report["reason"]
    assert plan.report["tokensBefore"] >= 5 * plan.report["tokensAfter"]
    view = replay([*log, *plan.events])
    calls = {c["id"] for m in view for c in m.tool_calls}
    results = {m.tool_call_id for m in view if m.role == "tool"}
    assert calls == results  # every block whole: no orphaned result, no unanswered call
    assert view[0].role == "system" and view[1].role == "user"  # the request stays pinned
