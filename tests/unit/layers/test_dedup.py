"""The dedup layer (Layer 2): which copies go and which stay, and its recall and precision
against exact Jaccard on generated duplicates."""

from __future__ import annotations

from bench.gen_dups import exact_pairs, generate
from compactctl.layers.dedup import DedupOptions, plan_dedup
from compactctl.layers.micro import salient_errors
from compactctl.layers.similarity import jaccard, normalize, shingles
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


def _npm(tail: str) -> str:
    """An ``npm ci`` output of 120 install lines, then ``tail``."""
    lines = [f"added package-{i}@1.{i}.0 from registry (resolved {i * 7} deps)" for i in range(120)]
    return "\n".join([*lines, tail])


def test_an_error_the_newer_output_lacks_is_never_pointed_away():
    """Two commands whose outputs share 120 lines of boilerplate are 97% similar; the older
    one failed (``Error: EACCES``), the newer passed: dedup keeps the failure (a pointer to
    the passing run would lose the error), and still points a plain repeat of it, and an
    older output whose error lines the newer one holds, at the newer copy."""
    deploy = _npm("Error: EACCES: permission denied, open '/srv/app/current' at deploy.js:41")
    test = _npm("Tests: 12 passed, 12 total")
    log = [message("u1", "user", "Deploy the app and run the tests.")]
    for i, (cmd, out) in enumerate(
        [("npm ci && npm run deploy", deploy), ("npm ci && npm run deploy", deploy),
         ("npm ci && npm test", test)], start=1,
    ):  # fmt: skip
        call = {"id": f"c{i}", "name": "bash", "arguments": {"command": cmd}}
        log += [message(f"a{i}", "assistant", "", toolCalls=[call]),
                message(f"t{i}", "tool", out, toolCallId=f"c{i}", toolName="bash")]  # fmt: skip
    event, report = plan_dedup(log, DedupOptions(scope="tool"), timestamp=T)
    assert event is not None
    # t2 (the failure again) stays whole; t1, its exact repeat, points at t2, not at t3
    assert event.data["duplicateOf"] == {"t1": "t2"}
    assert event.data["params"]["similarity"] == {"t1": 1.0}
    view = {m.uuid: m for m in replay(log + [event])}
    assert view["t2"].content == deploy and view["t3"].content == test
    # the error line in the newer output too: the older one is a duplicate again
    fixed = _npm("Tests: 12 passed, 12 total\nError: EACCES: permission denied, open "
                 "'/srv/app/current' at deploy.js:41")  # fmt: skip
    log[-1] = message("t3", "tool", fixed, toolCallId="c3", toolName="bash")
    event, _ = plan_dedup(log, DedupOptions(scope="tool"), timestamp=T)
    assert event is not None and event.data["duplicateOf"] == {"t1": "t3", "t2": "t3"}


def _holds_errors(newer: str, older: str) -> bool:
    """Whether ``newer`` holds every error line of ``older`` (compared normalized)."""
    return all(normalize(e) in normalize(newer) for e in salient_errors(older))


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
    texts = dict(items)
    # the true pairs, but those whose older output holds an error line the newer lacks
    # (dedup keeps them whole: test_an_error_the_newer_output_lacks_is_never_pointed_away)
    truth = exact_pairs(items, 0.6)
    lacking = {o for o, n in truth if not _holds_errors(texts[n], texts[o])}
    should = {older for older, _ in truth} - lacking
    assert should and lacking, "the generated set must hold both sorts of duplicates"
    recall = len(should & set(dup)) / len(should)
    assert recall >= 0.98, recall
    for older, newer in dup.items():  # precision 1.0: every reported pair verified
        assert jaccard(shingles(texts[older]), shingles(texts[newer])) >= 0.6
        assert _holds_errors(texts[newer], texts[older])


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
