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


def _msg(uuid: str, role: str, content: str = "", **extra: object) -> dict[str, object]:
    return {"type": "message", "uuid": uuid, "role": role, "content": content, **extra}


def _block(n: int, out: str, turn: int = 1) -> list[dict[str, object]]:
    call = {"id": f"c{n}", "name": "bash", "arguments": {"command": f"ls {n}"}}
    return [
        _msg(f"a{n}", "assistant", toolCalls=[call], turnId=turn),
        _msg(f"t{n}", "tool", out, toolCallId=f"c{n}", toolName="bash", turnId=turn),
    ]


def test_a_forced_compaction_run_twice_appends_nothing_the_second_time() -> None:
    """Found by tests/system/test_fuzz.py: the first run summarizes the older turns and keeps
    the newest turn whole; the second run saw nothing before that turn and split it (the
    one-long-turn path), summarizing again what the first run had kept."""
    records = [_msg("u1", "user", "Fix the pager.", turnId=1)]
    for n in range(3):
        records += _block(n, "x " * 1000)
    records += [_msg("u2", "user", "Now the export.", turnId=2), *_block(9, "y " * 1000, 2)]
    for keep, tokens in ((0, 8000), (0, None), (1, 8000), (2, 30)):
        log = [event_from_dict(r) for r in records]
        opts = CompactOptions(
            force=True, keep_recent=keep, keep_recent_tokens=tokens, min_saving=0.0
        )
        first = plan_compact(log, opts)
        assert first.report["summary"] is not None, (keep, tokens)
        log += first.events
        again = plan_compact(log, opts)
        assert again.events == [], (keep, tokens, [e.data for e in again.events])


def test_a_long_turn_keeps_compacting_as_it_grows_and_each_run_is_idempotent() -> None:
    """One long turn (an autonomous run) with a tail sized in tokens: every run after new
    tool blocks compacts, the same run again appends nothing, and no block is split."""
    records = [_msg("u1", "user", "Run the migration end to end.", turnId=1)]
    log = [event_from_dict(r) for r in records]
    opts = CompactOptions(force=True, keep_recent=4, keep_recent_tokens=300, min_saving=0.0)
    for round_ in range(3):
        log += [event_from_dict(r) for n in range(8) for r in _block(10 * round_ + n, "z" * 400)]
        plan = plan_compact(log, opts)
        assert plan.report["summary"] is not None, (round_, plan.report["reason"])
        log += plan.events
        assert plan_compact(log, opts).events == [], round_
        view = replay(log)
        calls = {c["id"] for m in view for c in m.tool_calls}
        assert calls == {m.tool_call_id for m in view if m.role == "tool"}
        assert sum(1 for m in view if "summaryOf" in m.data) == 1
