"""Replay: pure, deterministic, never splits a tool block, newest summary wins."""

from __future__ import annotations

from hypothesis import given, settings

from compactctl.model import event_from_dict
from compactctl.replay import apply_summary, replay
from tests.helpers import message, split_blocks
from tests.strategies import logs_with_reductions


@settings(max_examples=300, deadline=None)
@given(logs_with_reductions())
def test_replay_is_deterministic_and_keeps_blocks_whole(log):
    a = replay(log)
    b = replay(list(log))
    assert [m.to_json() for m in a] == [m.to_json() for m in b]
    assert split_blocks(a, log) == []
    # the view never holds two messages from the same summary chain
    summary_ids = [m.data["summaryOf"] for m in a if "summaryOf" in m.data]
    assert len(summary_ids) == len(set(summary_ids))
    # replay never mutates its input
    assert all(e.raw is None or e.to_json() == e.raw for e in log)


def test_summary_replaces_span_in_place_of_first_event():
    log = [
        message("sys", "system"),
        message("u1", "user", "one"),
        message("a1", "assistant", "two"),
        message("u2", "user", "three"),
        event_from_dict(
            {
                "type": "summary",
                "uuid": "s1",
                "replaces": ["u1", "a1"],
                "summaryText": "S1",
                "lastSummarizedTurnId": 1,
            }
        ),
    ]
    view = replay(log)
    assert [(m.uuid, m.role, m.content) for m in view] == [
        ("sys", "system", "x"),
        ("s1", "user", "S1"),
        ("u2", "user", "three"),
    ]
    assert view[1].data["summaryOf"] == "s1"


def test_newest_summary_of_chain_survives_and_tiers_select():
    log = [
        message("u1", "user"),
        message("a1", "assistant"),
        message("u2", "user"),
        message("a2", "assistant"),
        event_from_dict(
            {
                "type": "summary",
                "uuid": "s1",
                "replaces": ["u1", "a1"],
                "summaryText": "S1",
                "lastSummarizedTurnId": 1,
            }
        ),
        message("u3", "user", "new"),
        event_from_dict(
            {
                "type": "summary",
                "uuid": "s2",
                "replaces": ["s1", "u2", "a2"],
                "summaryText": "S2",
                "lastSummarizedTurnId": 2,
                "tiers": {"L0": "tiny", "L1": "mid", "L2": "S2"},
            }
        ),
    ]
    assert [(m.uuid, m.content) for m in replay(log)] == [("s2", "S2"), ("u3", "new")]
    assert replay(log, tier="L0")[0].content == "tiny"


def test_summary_covering_part_of_a_tool_block_takes_the_whole_block():
    log = [
        message("u1", "user"),
        message(
            "a1",
            "assistant",
            "",
            toolCalls=[
                {"id": "c1", "name": "bash", "arguments": {}},
                {"id": "c2", "name": "bash", "arguments": {}},
            ],
        ),
        message("t1", "tool", "r1", toolCallId="c1"),
        message("t2", "tool", "r2", toolCallId="c2"),
        message("a2", "assistant", "done"),
        event_from_dict(
            {
                "type": "summary",
                "uuid": "s1",
                "replaces": ["u1", "t1"],
                "summaryText": "S",
                "lastSummarizedTurnId": 1,
            }
        ),
    ]
    assert [m.uuid for m in replay(log)] == ["s1", "a2"]


def test_unknown_compact_mode_is_ignored():
    log = [
        message("u1", "user", "keep me"),
        event_from_dict({"type": "compact", "uuid": "k", "mode": "future", "targets": ["u1"]}),
    ]
    assert [m.content for m in replay(log)] == ["keep me"]


def test_micro_event_elides_old_output():
    text = "line\n" * 100
    log = [
        message("t1", "tool", text, toolCallId="c1"),
        event_from_dict(
            {
                "type": "compact",
                "uuid": "k",
                "mode": "micro",
                "targets": ["t1"],
                "params": {
                    "minChars": 120,
                    "headRatio": 0.2,
                    "tailRatio": 0.1,
                    "headMax": 600,
                    "tailMax": 300,
                },
            }
        ),
    ]
    (m,) = replay(log)
    # 500 chars, newlines at 5k+4. Head 100 -> cut at the newline at 99; tail 50 -> from 450,
    # moved past the newline at 454 to 455; removed 455 - 99 = 356 chars.
    assert m.content == text[:99] + "\n[... 356 chars elided ...]\n" + text[455:]


def test_a_message_whose_summary_of_is_not_a_string_is_kept():
    """``summaryOf`` holding a list or object (a hand-edited log) once raised TypeError
    (unhashable) in replay, so inspect and compact failed on the whole file."""
    odd = event_from_dict(
        {"type": "message", "uuid": "x1", "role": "user", "content": "odd", "summaryOf": ["s1"]}
    )
    log = [
        message("u1", "user", "one"),
        odd,
        event_from_dict({"type": "summary", "uuid": "s1", "replaces": ["u1"], "summaryText": "S1"}),
    ]
    assert [(m.uuid, m.content) for m in replay(log)] == [("s1", "S1"), ("x1", "odd")]


@settings(max_examples=200, deadline=None)
@given(logs_with_reductions())
def test_apply_summary_is_replay_of_the_view_and_the_summary(log):
    # the compact layer applies its summary to the context it planned on this way
    view = replay(log)
    uuids = [m.uuid for m in view if m.uuid]
    for replaced in (uuids[:1], uuids[1 : len(uuids) // 2], uuids[len(uuids) // 2 :], []):
        summary = event_from_dict(
            {"type": "summary", "uuid": "s-new", "replaces": replaced, "summaryText": "S"}
        )
        expected = replay([*view, summary])
        assert [m.to_json() for m in apply_summary(view, summary)] == [
            m.to_json() for m in expected
        ]
