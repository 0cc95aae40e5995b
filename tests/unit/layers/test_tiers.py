"""Layer 4 tiers: budgets on the canonical samples, priority, nesting, selection, model path."""

from __future__ import annotations

import json
from typing import Any

import pytest

from compactctl.errors import UsageError
from compactctl.layers.tiers import (
    TIER_BUDGETS,
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
    render_display,
    render_sections,
    render_task_state,
)
from compactctl.tokens import TokenCounter
from tests.fakes import FakeSummarizer
from tests.sessions import load_messages

NAMES = ("small-s1", "messy-s2", "cjk-s3")
COUNTER = TokenCounter("cl100k_base")


def sample_summary(name: str, fmt: SummaryFormat) -> str:
    request = SummaryRequest(messages=load_messages(name), format=fmt, max_chars=12000)
    return ExtractiveSummarizer().summarize(request).text


def bullets(text: str, fmt: str) -> set[tuple[str, str]]:
    return {(key, item) for key, items in parse_tier(text, fmt).items() for item in items}


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
    for tier, budget in TIER_BUDGETS.items():
        assert counts[tier] <= budget
        assert bullets(tiers[tier], "sections")
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
    for tier, budget in TIER_BUDGETS.items():
        assert COUNTER.count(tiers[tier]) <= budget
        assert bullets(tiers[tier], "task-state")
    assert COUNTER.count(tiers["L0"]) < COUNTER.count(tiers["L1"]) <= COUNTER.count(tiers["L2"])
    assert_nested(tiers, "task-state")
    l0 = json.loads(tiers["L0"])
    assert l0["goal"] == json.loads(summary)["task_state"]["goal"]
    assert "decisions" in l0 and len(tiers["L0"]) < len(tiers["L1"])


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
    assert "### Problem Solving" not in tiers["L0"]  # empty sections are left out
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
        {"Primary Request": ["huge " + LONG * 10, "the short one"], "Current Work": ["editing"]}
    )
    tiers = derive_tiers(summary, "sections", COUNTER)
    l0 = parse_tier(tiers["L0"], "sections")
    assert l0["Primary Request"] == ["the short one"]
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
    l0 = json.loads(tiers["L0"])
    assert l0 == {
        "goal": "Fix the pager (PAG-12).",
        "open_items": ["add a test for an empty file"],
        "next_step": "run the suite",
        "key_artifacts": ["viewer.py"],
        "decisions": ["slice by rows"],
        "user_constraints": ["do not change the CLI flags"],
    }
    assert 0 < len(json.loads(tiers["L1"])["progress"]) < 10
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
    tiers = derive_tiers(summary, "task-state", COUNTER, {"L0": 30, "L1": 100, "L2": 3000})
    answer = state_answer(goal="Fix the pager.", decisions=["rows"])
    fake = FakeSummarizer(answer, answer)
    out = rewrite_tiers_with_model(
        fake, tiers, COUNTER, {"L0": 30, "L1": 100, "L2": 3000}, fmt="task-state"
    )
    assert json.loads(out["L0"]) == {"goal": "Fix the pager.", "decisions": ["rows"]}
    assert fake.requests[0].prior is not None
    assert fake.requests[0].prior.task_state is not None
    with pytest.raises(SummaryFormatError):
        rewrite_tiers_with_model(FakeSummarizer("{}"), tiers, COUNTER, fmt="task-state")
