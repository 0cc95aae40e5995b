"""Layer 4 tiers: budgets on the canonical samples, priority, nesting, selection, model path."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from compactctl.errors import UsageError
from compactctl.layers.tiers import (
    TIER_BUDGETS,
    TIER_DISPLAY,
    bullet_priority,
    derive_tiers,
    parse_tier,
    rewrite_tiers_with_model,
    select_tier,
)
from compactctl.summarize import Summarizer, SummaryFormat, SummaryRequest
from compactctl.summarize.extractive import ExtractiveSummarizer
from compactctl.summarize.summary_format import (
    DISPLAY_SECTIONS,
    SummaryFormatError,
    parse_sections,
    parse_task_state,
    render_display,
    render_sections,
    render_task_state,
    validate_sections,
)
from compactctl.tokens import TokenCounter
from tests.fakes import FakeSummarizer
from tests.helpers import SAMPLES
from tests.sessions import load_messages

NAMES = ("small-s1", "messy-s2", "cjk-s3")
COUNTER = TokenCounter("cl100k_base")


def sample_summary(name: str, fmt: SummaryFormat) -> str:
    request = SummaryRequest(messages=load_messages(name), format=fmt, max_chars=12000)
    return ExtractiveSummarizer().summarize(request).text


def bullets(text: str, fmt: str) -> set[tuple[str, str]]:
    return {(key, item) for key, items in parse_tier(text, fmt).items() for item in items}


def required_only(summary: str, fmt: str) -> str:
    """The tier of the required bullets alone (goal, constraints, next step): what every
    tier carries, even over its budget."""
    return derive_tiers(summary, fmt, COUNTER, {"L0": 1, "L1": 1, "L2": 1})["L0"]


def assert_nested(tiers: dict[str, str], fmt: str) -> None:
    l0, l1, l2 = (bullets(tiers[name], fmt) for name in ("L0", "L1", "L2"))
    assert l0 <= l1 <= l2


# ----------------------------------------------------------------------- the samples


@pytest.mark.parametrize("name", NAMES)
def test_sample_sections_tiers_fit_their_budgets(name: str) -> None:
    summary = sample_summary(name, "sections")
    assert COUNTER.count(summary) > TIER_BUDGETS["L1"]  # a realistic, long summary
    tiers = derive_tiers(summary, "sections", COUNTER)
    counts = {tier: COUNTER.count(text) for tier, text in tiers.items()}
    floor = required_only(summary, "sections")
    for tier, budget in TIER_BUDGETS.items():
        assert counts[tier] <= max(budget, COUNTER.count(floor))
        assert bullets(floor, "sections") <= bullets(tiers[tier], "sections")
        validate_sections(tiers[tier])  # a valid document of its format
    assert counts["L0"] < counts["L1"] < counts["L2"]
    assert tiers["L2"] == summary  # it fits 3000 tokens: L2 is the summary itself
    assert "<analysis>" not in tiers["L0"] and "<analysis>" not in tiers["L1"]
    assert_nested(tiers, "sections")
    # The user's request survives into the smallest tier.
    request = parse_sections(summary).sections["Primary Request"][0]
    assert ("Primary Request", request) in bullets(tiers["L0"], "sections")


@pytest.mark.parametrize("name", NAMES)
def test_sample_task_state_tiers_fit_their_budgets(name: str) -> None:
    summary = sample_summary(name, "task-state")
    tiers = derive_tiers(summary, "task-state", COUNTER)
    floor = required_only(summary, "task-state")
    for tier, budget in TIER_BUDGETS.items():
        assert COUNTER.count(tiers[tier]) <= max(budget, COUNTER.count(floor))
        assert bullets(tiers[tier], "task-state")
        parse_task_state(tiers[tier])  # a valid document of its format
    assert COUNTER.count(tiers["L0"]) < COUNTER.count(tiers["L1"]) <= COUNTER.count(tiers["L2"])
    assert_nested(tiers, "task-state")
    state = json.loads(summary)["task_state"]
    assert state["user_constraints"] and state["next_step"]
    for tier in ("L0", "L1"):  # the constraints (the sample has 4 to 6) and the next step
        t = json.loads(tiers[tier])["task_state"]
        assert t["goal"] == state["goal"] and t["next_step"] == state["next_step"]
        assert t["user_constraints"] == state["user_constraints"]
    assert len(tiers["L0"]) < len(tiers["L1"])


def test_derive_is_deterministic() -> None:
    summary = sample_summary("small-s1", "sections")
    assert derive_tiers(summary, "sections", COUNTER) == derive_tiers(
        summary, "sections", TokenCounter("cl100k_base")
    )


# ----------------------------------------------------------------------- priority


LONG = (
    "walked through the retry loop of the flush worker line by line, comparing the lease "
    "renewal timestamps in the log against the scheduler's clock and the broker's acks "
)


def hand_summary() -> str:
    return render_sections(
        {
            "Primary Request": ["Fix the pager in viewer.py (ticket PAG-12)."],
            "Decision Rationale": ["Decision: slice by screen rows, not by bytes."],
            "Problem Solving": [f"step {i}: " + LONG * 5 for i in range(12)],
            "Pending Tasks": ["add a test for an empty file"],
        },
        analysis="12 problem-solving notes",
    )


def test_l0_keeps_request_and_decisions_not_problem_solving() -> None:
    summary = hand_summary()
    tiers = derive_tiers(summary, "sections", COUNTER)
    l0 = parse_tier(tiers["L0"], "sections")
    assert l0["Primary Request"] == ["Fix the pager in viewer.py (ticket PAG-12)."]
    assert l0["Decision Rationale"] == ["Decision: slice by screen rows, not by bytes."]
    assert l0["Pending Tasks"] == ["add a test for an empty file"]
    assert l0["Problem Solving"] == []
    assert "### Problem Solving\n\n###" in tiers["L0"]  # an empty section: its heading
    validate_sections(tiers["L0"])
    l1 = parse_tier(tiers["L1"], "sections")
    kept = len(l1["Problem Solving"])
    assert 0 < kept < 12  # the first ones, in order, as many as fit
    assert l1["Problem Solving"] == [f"step {i}: " + (LONG * 5).strip() for i in range(kept)]
    assert tiers["L2"] == summary
    assert_nested(tiers, "sections")
    # Canonical order in the tier, whatever the priority order was.
    assert tiers["L0"].index("### Primary Request") < tiers["L0"].index("### Decision")
    assert tiers["L0"].index("### Decision") < tiers["L0"].index("### Pending Tasks")


def test_constraint_bullets_are_raised() -> None:
    assert bullet_priority(4, "Constraint: keep Python 3.9 support") == 9
    assert bullet_priority(5, "do not rename the cache_dir key") == 7
    assert bullet_priority(4, "必须继续支持 Python 3.9") == 7
    assert bullet_priority(10, "must stay") == 10
    assert bullet_priority(4, "ran the tests") == 4
    summary = render_sections(
        {
            "Primary Request": ["Fix the pager."],
            "Problem Solving": [
                *(f"step {i}: " + LONG * 2 for i in range(3)),
                "Constraint: keep the public API of viewer.py.",
            ],
        }
    )
    tiers = derive_tiers(summary, "sections", COUNTER, {"L0": 40, "L1": 40, "L2": 3000})
    assert parse_tier(tiers["L0"], "sections")["Problem Solving"] == [
        "Constraint: keep the public API of viewer.py."
    ]


def test_too_big_bullet_is_skipped_and_the_next_tried() -> None:
    summary = render_sections(
        {
            "Primary Request": ["the request", "huge " + LONG * 10, "the short one"],
            "Current Work": ["editing"],
        }
    )
    tiers = derive_tiers(summary, "sections", COUNTER)
    l0 = parse_tier(tiers["L0"], "sections")
    assert l0["Primary Request"] == ["the request", "the short one"]
    assert l0["Current Work"] == ["editing"]
    assert COUNTER.count(tiers["L0"]) <= 200
    assert_nested(tiers, "sections")


def test_analysis_only_in_l2_when_it_fits() -> None:
    summary = hand_summary()
    tiers = derive_tiers(summary, "sections", COUNTER, {"L0": 60, "L1": 200, "L2": 500})
    assert tiers["L2"] != summary
    assert tiers["L2"].startswith("<analysis>\n12 problem-solving notes\n</analysis>")
    assert "<analysis>" not in tiers["L1"]
    assert COUNTER.count(tiers["L2"]) <= 500
    assert_nested(tiers, "sections")


def test_small_summary_is_every_tier() -> None:
    summary = render_sections({"Primary Request": ["fix it"]}, "1 message")
    assert derive_tiers(summary, "sections", COUNTER) == dict.fromkeys(("L0", "L1", "L2"), summary)


def test_tier_of_a_tier_is_itself() -> None:
    tiers = derive_tiers(hand_summary(), "sections", COUNTER)
    assert derive_tiers(tiers["L1"], "sections", COUNTER)["L1"] == tiers["L1"]


def test_errors() -> None:
    with pytest.raises(SummaryFormatError):
        derive_tiers("no summary block here", "sections", COUNTER)
    with pytest.raises(SummaryFormatError):
        derive_tiers("{not json", "task-state", COUNTER)
    with pytest.raises(UsageError):
        derive_tiers(hand_summary(), "markdown", COUNTER)
    with pytest.raises(UsageError):
        derive_tiers(hand_summary(), "sections", COUNTER, {"L0": 500, "L1": 100, "L2": 3000})
    with pytest.raises(UsageError):
        derive_tiers(hand_summary(), "sections", COUNTER, {"L0": 200, "L1": 1000})


# ----------------------------------------------------------------------- task-state


def state_answer(**fields: Any) -> str:
    state: dict[str, Any] = {
        "goal": "",
        "progress": [],
        "open_items": [],
        "next_step": "",
        "blockers": [],
        "key_artifacts": [],
        "decisions": [],
        "user_constraints": [],
    }
    state.update(fields)
    return render_task_state(state, render_display({s: ["x"] for s in DISPLAY_SECTIONS}))


def test_task_state_tiers_by_field_priority() -> None:
    summary = state_answer(
        goal="Fix the pager (PAG-12).",
        progress=[f"step {i}: " + LONG * 5 for i in range(10)],
        open_items=["add a test for an empty file"],
        next_step="run the suite",
        key_artifacts=["viewer.py"],
        decisions=["slice by rows"],
        user_constraints=["do not change the CLI flags"],
    )
    tiers = derive_tiers(summary, "task-state", COUNTER)
    l0 = parse_task_state(tiers["L0"])
    assert l0.task_state == {
        "goal": "Fix the pager (PAG-12).",
        "progress": [],
        "open_items": ["add a test for an empty file"],
        "next_step": "run the suite",
        "blockers": [],
        "key_artifacts": ["viewer.py"],
        "decisions": ["slice by rows"],
        "user_constraints": ["do not change the CLI flags"],
    }
    assert l0.display_summary == TIER_DISPLAY
    assert 0 < len(json.loads(tiers["L1"])["task_state"]["progress"]) < 10
    assert tiers["L2"] == summary
    assert parse_tier(tiers["L0"], "task-state")["progress"] == []
    assert parse_tier(tiers["L0"], "task-state")["goal"] == ["Fix the pager (PAG-12)."]
    assert_nested(tiers, "task-state")
    with pytest.raises(SummaryFormatError):
        parse_tier('{"goal": "g", "mood": "happy"}', "task-state")


# ----------------------------------------------------------------------- select_tier


@pytest.mark.parametrize(
    ("messages", "tier"), [(0, "L2"), (20, "L2"), (21, "L1"), (40, "L1"), (41, "L0"), (500, "L0")]
)
def test_select_tier_by_history_length(messages: int, tier: str) -> None:
    assert select_tier(messages) == tier


@pytest.mark.parametrize(
    ("room", "tier"),
    [(128_000, "L2"), (30_000, "L2"), (29_999, "L1"), (10_000, "L1"), (9_999, "L0"), (0, "L0")],
)
def test_select_tier_by_room_left(room: int, tier: str) -> None:
    # Budgets as sizes: L2 needs 30k of room, L1 10k (10% rule); the message count is ignored.
    assert select_tier(100, context_window=128_000, room_tokens=room) == tier


def test_select_tier_with_measured_tiers() -> None:
    sizes = {"L0": 150, "L1": 700, "L2": 1800}
    assert select_tier(3, context_window=200_000, room_tokens=18_000, tier_tokens=sizes) == "L2"
    assert select_tier(3, context_window=200_000, room_tokens=17_999, tier_tokens=sizes) == "L1"
    assert select_tier(3, context_window=200_000, room_tokens=1_000, tier_tokens=sizes) == "L0"
    assert select_tier(3, context_window=8_000, tier_tokens=sizes) == "L1"  # room = window
    with pytest.raises(ValueError):
        select_tier(3, context_window=8_000, room_tokens=9_000)
    with pytest.raises(ValueError):
        select_tier(-1)


# ----------------------------------------------------------------------- the model path


def test_rewrite_with_model_valid_answers() -> None:
    tiers = derive_tiers(hand_summary(), "sections", COUNTER)
    l1 = render_sections({"Primary Request": ["Fix the pager."], "Problem Solving": ["rows"]}, "a")
    l0 = render_sections({"Primary Request": ["Fix the pager."]}, "b")
    fake = FakeSummarizer(l1, l0, name="fake/tiers")
    assert isinstance(fake, Summarizer)
    out = rewrite_tiers_with_model(fake, tiers, COUNTER)
    assert out["L2"] == tiers["L2"]
    assert out["L1"] == l1[l1.index("<summary>") :]  # the <analysis> is dropped
    assert out["L0"] == l0[l0.index("<summary>") :]
    assert parse_tier(out["L0"], "sections")["Primary Request"] == ["Fix the pager."]
    first, second = fake.requests
    assert (first.max_chars, second.max_chars) == (4000, 800)
    assert "tier L1 within 1000 tokens" in first.instructions
    assert "tier L0 within 200 tokens" in second.instructions
    assert first.messages == [] and first.format == "sections"
    assert first.prior is not None and first.prior.text == tiers["L2"]


def test_rewrite_with_model_invalid_answers() -> None:
    tiers = derive_tiers(hand_summary(), "sections", COUNTER)
    ok = render_sections({"Primary Request": ["Fix the pager."]})
    with pytest.raises(SummaryFormatError, match="no <summary>"):
        rewrite_tiers_with_model(FakeSummarizer("Sure! Here is the summary."), tiers, COUNTER)
    too_long = render_sections({"Problem Solving": [LONG * 10]})
    with pytest.raises(SummaryFormatError, match="tier L0 with .* tokens; its budget is 200"):
        rewrite_tiers_with_model(FakeSummarizer(ok, too_long), tiers, COUNTER)


def test_rewrite_with_model_task_state() -> None:
    summary = state_answer(goal="Fix the pager.", progress=[LONG * 3] * 2, decisions=["rows"])
    budgets = {"L0": 130, "L1": 200, "L2": 3000}
    tiers = derive_tiers(summary, "task-state", COUNTER, budgets)
    answer = state_answer(goal="Fix the pager.", decisions=["rows"])
    fake = FakeSummarizer(answer, answer)
    out = rewrite_tiers_with_model(fake, tiers, COUNTER, budgets, fmt="task-state")
    l0 = parse_task_state(out["L0"]).task_state
    assert (l0["goal"], l0["decisions"], l0["progress"]) == ("Fix the pager.", ["rows"], [])
    assert fake.requests[0].prior is not None
    assert fake.requests[0].prior.task_state is not None
    with pytest.raises(SummaryFormatError):
        rewrite_tiers_with_model(FakeSummarizer("{}"), tiers, COUNTER, fmt="task-state")


# ----------------------------------------------------------------------- plan_tiers


def test_tiers_swap_in_a_smaller_tier_only_when_the_context_needs_it(tmp_path: Path) -> None:
    from compactctl.app.jobs import OutputOptions, compact_path
    from compactctl.formats.reader import load
    from compactctl.layers.summary import CompactOptions
    from compactctl.layers.tiers import plan_tiers
    from compactctl.model import SummaryEvent
    from compactctl.replay import replay

    path = tmp_path / "s.jsonl"
    path.write_bytes((SAMPLES / "small-s1.canonical.jsonl").read_bytes())
    compact_path(str(path), CompactOptions(force=True), OutputOptions(db=""))
    _, events = load(str(path))
    (summary,) = [e for e in events if isinstance(e, SummaryEvent)]
    full = COUNTER.count(summary.summary_text)
    # 200k tokens, nearly all free: the whole summary stays (its ledger of commands intact)
    event, report = plan_tiers(events, counter=COUNTER, timestamp="t", context_window=200_000)
    assert event is not None and report["selectedTier"] is None
    assert "selectedTier" not in event.data and set(event.tiers) == {"L0", "L1", "L2"}
    assert f"the whole summary ({full} tokens) fits" in report["note"]
    shown = [m.content for m in replay([*events, event]) if "summaryOf" in m.data]
    assert shown == [summary.summary_text]
    # run again: nothing to do
    again, report = plan_tiers([*events, event], counter=COUNTER, timestamp="t",
                               context_window=200_000)  # fmt: skip
    assert again is None and "showing the whole summary" in report["reason"]
    # the same context in a window with little room left: a tier is swapped in
    rest = [m for m in replay(events) if "summaryOf" not in m.data]
    from compactctl.tokens import prompt_tokens

    tight = prompt_tokens(rest, COUNTER) + 12_000  # 10% of the room: 1,200 tokens
    swapped, report = plan_tiers([*events, event], counter=COUNTER, timestamp="t",
                                 context_window=tight)  # fmt: skip
    assert swapped is not None and report["selectedTier"] == "L1"
    assert COUNTER.count(swapped.tiers["L1"]) <= 1_200 < full
    shown = [m.content for m in replay([*events, event, swapped]) if "summaryOf" in m.data]
    assert shown == [event.tiers["L1"]]
