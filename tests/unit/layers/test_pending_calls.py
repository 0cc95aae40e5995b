"""Issue 15 point 14: a tool result that arrives after a full_replace compaction is never
orphaned: the pending call stays out of the summary, and replay drops a late result whose
call a summary removed."""

from __future__ import annotations

from typing import Any

from compactctl.layers.options import CompactOptions
from compactctl.layers.summary import plan_compact
from compactctl.model import Event, event_from_dict
from compactctl.replay import replay


def _m(uuid: str, role: str, content: str = "", **extra: Any) -> Event:
    return event_from_dict(
        {"type": "message", "uuid": uuid, "role": role, "turnId": 1, "content": content, **extra}
    )


def _call(uuid: str, call_id: str) -> Event:
    calls = [{"id": call_id, "name": "bash", "arguments": {"command": "make"}}]
    return _m(uuid, "assistant", "", toolCalls=calls)


def _orphans(view: list[Any]) -> list[str]:
    calls = {c["id"] for m in view for c in m.tool_calls}
    return [m.uuid for m in view if m.role == "tool" and m.tool_call_id not in calls]


def test_full_replace_keeps_a_call_still_waiting_for_its_result() -> None:
    log = [_m("u1", "user", "Build it. " * 50)]
    for i in range(6):
        log += [_call(f"a{i}", f"c{i}"), _m(f"t{i}", "tool", "output " * 200, toolCallId=f"c{i}")]
    log.append(_call("pending", "cp"))
    plan = plan_compact(log, CompactOptions(force=True, strategy="full_replace"))
    summary = plan.events[-1]
    assert "pending" not in summary.data["replaces"]
    assert "a5" in summary.data["replaces"]
    after = [*log, *plan.events, _m("late", "tool", "done", toolCallId="cp")]
    view = replay(after)
    assert _orphans(view) == []
    assert [m.uuid for m in view][-2:] == ["pending", "late"]


def test_replay_drops_a_late_result_whose_call_was_summarized() -> None:
    log = [
        _m("u1", "user", "go"),
        _call("a1", "c1"),
        event_from_dict(
            {
                "type": "summary",
                "uuid": "s1",
                "replaces": ["u1", "a1"],
                "summaryText": "S",
                "lastSummarizedTurnId": 1,
            }
        ),
        _m("t1", "tool", "late result", toolCallId="c1"),
        _m("a2", "assistant", "ok"),
    ]
    view = replay(log)
    assert [(m.role, m.text) for m in view] == [("user", "S"), ("assistant", "ok")]
    assert _orphans(view) == []
