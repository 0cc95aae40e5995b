"""The fast paths of ``compact`` (the summary layer and micro compaction) never change a
result.

Each cache is compared with the slow path it replaces: the replays and token counts
``plan_compact`` used to redo (``replay(log + new)``, ``prompt_tokens``) and the second
elision of micro targets. (The extractive summarizer's prefilters:
``tests/unit/summarize/test_extractive_oracle.py``.)
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from compactctl.errors import SummarizerError
from compactctl.formats.reader import load
from compactctl.layers.micro import MicroParams, plan_micro, plan_micro_view
from compactctl.layers.summary import CompactOptions, plan_compact
from compactctl.media import media_rule_for
from compactctl.model import Event, Message, SessionEvent, event_from_dict
from compactctl.replay import replay
from compactctl.tokens import PromptSizes, TokenCounter, message_payload, prompt_tokens
from tests.fakes import FakeSummarizer
from tests.helpers import SAMPLES
from tests.strategies import logs_with_reductions

NOW = "2025-01-01T00:00:00Z"


# ----------------------------------------------------------------- plan_compact and micro


def _same_view(a: list[Message], b: list[Message]) -> bool:
    return [(type(m), m.data, m.turn) for m in a] == [(type(m), m.data, m.turn) for m in b]


@st.composite
def logs(draw: st.DrawFn) -> list[Event]:
    """Sessions with earlier reductions, some with a uuid used twice (replay goes by uuid)."""
    events = draw(logs_with_reductions())
    messages = [i for i, e in enumerate(events) if isinstance(e, Message)]
    tools = [i for i in messages if events[i].data["role"] == "tool"]
    for i in tools:  # long outputs, for micro compaction to elide
        if draw(st.booleans()):
            e = events[i]
            long = (str(e.data["content"]) + "\nline") * draw(st.integers(10, 40))
            events[i] = event_from_dict({**e.data, "content": long}, turn=e.turn)
    if len(tools) >= 2 and draw(st.booleans()):
        messages = tools  # two micro targets with one uuid
    if len(messages) >= 2 and draw(st.booleans()):
        i, j = draw(st.lists(st.sampled_from(messages), min_size=2, max_size=2, unique=True))
        e = events[j]
        events[j] = event_from_dict({**e.data, "uuid": events[i].uuid}, turn=e.turn)
    return events


MICRO = st.builds(
    MicroParams,
    keep_turns=st.integers(0, 2),
    min_chars=st.sampled_from([10, 60, 120]),
    head_max=st.sampled_from([20, 600]),
    tail_max=st.sampled_from([10, 300]),
)


@settings(max_examples=150, deadline=None)
@given(logs(), MICRO)
def test_micro_view_is_the_replay_of_the_log_and_the_event(log: list[Event], params: MicroParams):
    view = replay(log)
    event, after = plan_micro_view(log, view, params, timestamp=NOW)
    alone = plan_micro(log, params, timestamp=NOW)
    assert (event and event.data) == (alone and alone.data)
    if event is None:
        assert after is view
    else:
        assert _same_view(after, replay([*log, event]))


@settings(max_examples=150, deadline=None)
@given(logs(), st.lists(st.integers(0, 40), max_size=6))
def test_sizes_agree_with_prompt_tokens_over_shared_views(log: list[Event], cuts: list[int]):
    counter = TokenCounter("estimate")
    sizes = PromptSizes(counter)
    view = replay(log)
    views = [view] + [view[:c] + [m.evolve(content="changed") for m in view[c:]] for c in cuts]
    for v in views + views[::-1]:  # shared messages: sized once, then from the cache
        chars = sum(len(message_payload(m.data)) for m in v)
        assert sizes.totals(v) == (prompt_tokens(v, counter), chars)


FAILING = FakeSummarizer(default=SummarizerError("no"), name="failing")
"""A summarizer that always fails: nothing is appended, micro compaction included."""


@st.composite
def options(draw: st.DrawFn) -> tuple[CompactOptions, Any]:
    """Options that reach every step: micro, the summarization trigger, the 5% rule; and
    the summarizer (``None``: the extractive one)."""
    return CompactOptions(
        force=draw(st.booleans()),
        micro_only=draw(st.booleans()),
        micro_enabled=draw(st.booleans()),
        micro=draw(MICRO),
        micro_trigger=0.0,
        summary_trigger=draw(st.sampled_from([0.0, 1e9])),
        context_window=1000,
        strategy=draw(st.sampled_from(["keep_recent", "full_replace"])),
        keep_recent=draw(st.integers(0, 4)),
        format=draw(st.sampled_from(["sections", "task-state"])),
        min_saving=draw(st.sampled_from([0.0, 0.05, 0.9])),
        encoding="estimate",
    ), draw(st.sampled_from([None, FAILING]))


def _check_against_replay(log: list[Event], opts: CompactOptions, summarizer: Any = None) -> None:
    """The report's numbers are those of full replays counted from scratch."""
    plan = plan_compact(log, opts, now=lambda: NOW, summarizer=summarizer)
    counter = TokenCounter(plan.report["tokenizer"])
    # images count by the rule of the session model's provider, as the session's counter does
    counter.media_rule = media_rule_for(
        next((e.model for e in log if isinstance(e, SessionEvent)), None)
    )
    before_view = replay(log)
    after_view = replay(log + plan.events)
    before = prompt_tokens(before_view, counter)
    after = prompt_tokens(after_view, counter)
    chars = [sum(len(message_payload(m.data)) for m in v) for v in (before_view, after_view)]
    report = plan.report
    assert report["tokensBefore"] == before and report["charsBefore"] == chars[0]
    assert report["tokensAfter"] == after and report["charsAfter"] == chars[1]
    for e in plan.events:
        if e.type == "summary":
            assert e.data["stats"]["tokensAfter"] == after
            assert e.data["stats"]["charsAfter"] == chars[1]
    # the estimate between micro compaction and summarization
    window = report["contextWindow"]
    fired = opts.micro_enabled and (
        opts.force or (window is not None and before > opts.micro_trigger * window)
    )
    rule = counter.media_rule or "anthropic"
    micro = plan_micro(log, opts.micro, timestamp=NOW, image_rule=rule) if fired else None
    mid = prompt_tokens(replay(log + ([micro] if micro else [])), counter)
    reason = report["reason"] or ""
    if "under the summarization trigger" in reason:
        assert f"prompt estimate {mid} tokens is under the summarization" in reason


@settings(max_examples=200, deadline=None)
@given(logs(), options())
def test_plan_compact_numbers_equal_full_replays(log: list[Event], choice: tuple[Any, Any]):
    _check_against_replay(log, *choice)


def test_plan_compact_numbers_equal_full_replays_on_the_samples():
    for name in ("small-s1", "messy-s2", "cjk-s3"):
        _, log = load(str(SAMPLES / f"{name}.canonical.jsonl"))
        for opts in (
            CompactOptions(force=True, micro_only=True, encoding="cl100k_base"),
            CompactOptions(force=True, encoding="cl100k_base", min_saving=0.0),
            CompactOptions(force=True, strategy="full_replace", micro=MicroParams(keep_turns=0)),
        ):
            _check_against_replay(log, opts)
            # and again on the compacted log: an incremental summary over a micro event
            log2 = log + plan_compact(log, opts, now=lambda: NOW).events
            _check_against_replay(log2, opts)


# Every character the case-insensitive regex matches to each letter (İ, ı, ſ included).
