"""The dedup layer (Layer 2): which copies go and which stay, and its recall and precision
against exact Jaccard on generated duplicates."""

from __future__ import annotations

from bench.gen_dups import exact_pairs, generate
from compactctl.layers.dedup import DedupOptions, plan_dedup
from compactctl.layers.similarity import jaccard, shingles
from compactctl.model import Event
from compactctl.replay import replay
from tests.helpers import message

T = "2025-01-01T00:00:00Z"


def test_dedup_semantics():
    text = "error: connection refused while fetching package index from the mirror " * 4
    assert len(text) >= 200
    log = [
        message("u1", "user", text),
        message("a0", "assistant", "", toolCalls=[{"id": "c1", "name": "bash", "arguments": {}}]),
        message("t1", "tool", text, toolCallId="c1", toolName="bash"),
        message("a1", "assistant", text),
        message("a2", "assistant", "", toolCalls=[{"id": "c2", "name": "bash", "arguments": {}}]),
        message("t2", "tool", text, toolCallId="c2", toolName="bash"),
        message("a3", "assistant", text),
        message("u2", "user", text),
    ]
    event, report = plan_dedup(log, DedupOptions(), timestamp=T)
    assert event is not None
    assert event.data["duplicateOf"] == {"t1": "a3", "a1": "a3", "t2": "a3"}
    assert report["groups"] == 1 and report["exact"] == 3
    view = replay(log + [event])
    by = {m.uuid: m for m in view}
    assert "a1" not in by  # older assistant text dropped
    assert by["t1"].content.startswith("[duplicate of the bash output in message a3")
    assert by["u1"].content == text and by["u2"].content == text  # users never touched
    assert all(m.uuid in by for m in view if m.tool_calls)  # tool blocks stay valid
    tool_only, _ = plan_dedup(log, DedupOptions(scope="tool"), timestamp=T)
    assert tool_only is not None and tool_only.data["duplicateOf"] == {"t1": "t2"}


def test_dedup_recall_and_precision_against_exact_jaccard():
    items, _ = generate(1200, seed=7)
    log: list[Event] = [message("u0", "user", "go")]
    for i, (key, text) in enumerate(items):
        log.append(
            message(
                f"a{i}",
                "assistant",
                "",
                toolCalls=[{"id": f"c{i}", "name": "bash", "arguments": {}}],
            )
        )
        log.append(message(key, "tool", text, toolCallId=f"c{i}", toolName="bash"))
    event, report = plan_dedup(log, DedupOptions(scope="tool", min_chars=0), timestamp=T)
    assert event is not None
    dup = event.data["duplicateOf"]
    truth = exact_pairs(items, 0.6)
    should = {older for older, _ in truth}
    assert should, "the generated set must contain duplicates"
    recall = len(should & set(dup)) / len(should)
    assert recall >= 0.98, recall
    texts = dict(items)
    for older, newer in dup.items():  # precision 1.0: every reported pair verified
        assert jaccard(shingles(texts[older]), shingles(texts[newer])) >= 0.6


def test_the_replay_after_a_plan_gets_the_planned_context_and_sizes_agree():
    """DedupLayer sizes its before and after by the session's sizes (the same numbers as
    prompt_tokens), and the replay of the planned event over the same messages gives back
    the planned messages themselves (dedup._PLANNED); any other view is replayed afresh."""
    from compactctl.layers import dedup
    from compactctl.layers.dedup import DedupLayer
    from compactctl.session import Session
    from compactctl.tokens import TokenCounter, prompt_tokens

    text = "error: connection refused while fetching package index from the mirror " * 4
    log = [
        message("u1", "user", "go"),
        message("a0", "assistant", "", toolCalls=[{"id": "c1", "name": "bash", "arguments": {}}]),
        message("t1", "tool", text, toolCallId="c1"),
        message("a2", "assistant", "", toolCalls=[{"id": "c2", "name": "bash", "arguments": {}}]),
        message("t2", "tool", text, toolCallId="c2"),
    ]
    session = Session.from_events(log, counter=TokenCounter("estimate"))
    plan = DedupLayer(now=lambda: T).plan(session, DedupOptions())
    (event,) = plan.events
    assert id(event) in dedup._PLANNED
    extended = session.extended([event]).effective()
    assert id(event) not in dedup._PLANNED  # taken by that replay
    fresh = replay(log + [event])  # computed again
    assert [m.data for m in extended] == [m.data for m in fresh]
    counter = TokenCounter("estimate")
    assert plan.report.tokens_before == prompt_tokens(replay(log), counter)
    assert plan.report.tokens_after == prompt_tokens(fresh, counter)
    assert extended[2].content.startswith("[duplicate of the bash output in message t2")
    # another view (here a message object that is not the planned one) is replayed afresh
    plan = DedupLayer(now=lambda: T).plan(session, DedupOptions())
    (event,) = plan.events
    other = [message("u1", "user", "go"), *session.effective()[1:]]
    assert dedup.apply_dedup(other, event)[0] is other[0]
    assert id(event) in dedup._PLANNED
    assert [m.data for m in dedup.apply_dedup(other, event)] == [m.data for m in fresh]
