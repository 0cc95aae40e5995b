"""Issue 15 points 1 and 10: the first and the latest request in every summary, the next
step that follows the latest request, deferred work never next, and only the user speaking
as the user (task notifications, system reminders, hook output are never requests)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from bench.gen_probed import probed_session
from compactctl.layers.options import CompactOptions
from compactctl.layers.summary import plan_compact
from compactctl.model import SummaryEvent, event_from_dict
from compactctl.summarize import SummaryRequest
from compactctl.summarize.extractive import ExtractiveSummarizer
from compactctl.summarize.extractive.intent import spoken_by_user
from compactctl.summarize.summary_format import parse_sections

SEED = 9173  # not used by any other test


def _user(text: str, turn: int, **extra: Any) -> dict[str, Any]:
    return {"type": "message", "role": "user", "turnId": turn, "content": text, **extra}


def _say(text: str, turn: int) -> dict[str, Any]:
    return {"type": "message", "role": "assistant", "turnId": turn, "content": text}


def _summary(records: list[dict[str, Any]], **options: Any) -> SummaryEvent:
    events = [event_from_dict(r) for r in records]
    plan = plan_compact(events, CompactOptions(force=True, **options))
    summaries = [e for e in plan.events if isinstance(e, SummaryEvent)]
    assert summaries, plan.report
    return summaries[-1]


def _requests(probes: list[dict[str, Any]]) -> tuple[str, str]:
    first = next(p["text"] for p in probes if p["kind"] == "first_request")
    latest = next(p["text"] for p in probes if p["kind"] == "latest_request")
    return first, latest


@pytest.mark.parametrize("strategy", ["keep_recent", "full_replace"])
@pytest.mark.parametrize("fmt", ["sections", "task-state"])
def test_every_summary_states_the_first_and_the_latest_request(strategy: str, fmt: str) -> None:
    records, probes = probed_session(SEED, 40)
    first, latest = _requests(probes)
    summary = _summary(records, strategy=strategy, format=fmt)
    text = summary.data["summaryText"]
    # the first request is pinned (never in the span), yet the summary states it
    assert first.split(":")[0] in text and first[:60] in text
    assert latest in text
    if fmt == "task-state":
        state = summary.data["taskState"]
        assert state["goal"].startswith(first[:60])
        assert latest in state["goal"]
        assert latest in state["next_step"]
        assert latest in json.loads(text)["display_summary"] or "Latest request" in text
    else:
        sections = parse_sections(text).sections
        primary = sections["Primary Request"]
        assert primary[0].startswith(first[:60])
        assert primary[1].startswith("Latest request (T") and latest in primary[1]
        assert latest[:60] in sections["Optional Next Step"][0]


def test_a_task_notification_after_the_latest_request_is_not_a_request() -> None:
    records, probes = probed_session(SEED, 40)
    assert "<task-notification>" in records[-1]["content"]  # the generator's last message
    _, latest = _requests(probes)
    text = _summary(records, strategy="full_replace").data["summaryText"]
    sections = parse_sections(text).sections
    assert latest in sections["Primary Request"][1]
    assert not any("task-notification" in m for m in sections["All User Messages"])
    assert "task-notification" not in "\n".join(sections["Pending Tasks"])


def test_next_step_stated_before_the_latest_request_is_stale() -> None:
    messages = [
        _user("Fix the pager.", 1),
        _say("Fixed. Next step: rename the helper module.", 1),
        _user("Now add a --json flag to list.", 2),
        _say("Looking at the list command.", 2),
    ]
    request = SummaryRequest(messages=messages, max_chars=20_000)
    sections = parse_sections(ExtractiveSummarizer().summarize(request).text).sections
    assert sections["Primary Request"][:2] == [
        "Fix the pager.",
        "Latest request (T2): Now add a --json flag to list.",
    ]
    assert sections["Optional Next Step"] == [
        "continue the latest request (T2): Now add a --json flag to list."
    ]


def test_a_next_step_stated_after_the_latest_request_wins() -> None:
    messages = [
        _user("Fix the pager.", 1),
        _say("Reproduced it. Next step: fix the slice in page_of.", 1),
    ]
    request = SummaryRequest(messages=messages, max_chars=20_000)
    sections = parse_sections(ExtractiveSummarizer().summarize(request).text).sections
    assert sections["Optional Next Step"] == ["fix the slice in page_of."]


def test_deferred_work_is_pending_never_next() -> None:
    messages = [
        _user("Fix the pager. Not now, but before the release, write a migration note.", 1),
        _say("Fixed the pager. Next step: not now, but before the release, the note.", 1),
    ]
    for fmt in ("sections", "task-state"):
        result = ExtractiveSummarizer().summarize(
            SummaryRequest(messages=messages, format=fmt, max_chars=20_000)  # type: ignore[arg-type]
        )
        if result.task_state is not None:
            assert "migration note" in " ".join(result.task_state["open_items"])
            assert "migration" not in result.task_state["next_step"]
            assert "before the release" not in result.task_state["next_step"]
        else:
            sections = parse_sections(result.text).sections
            assert any("migration note" in p for p in sections["Pending Tasks"])
            assert "before the release" not in sections["Optional Next Step"][0]


def test_first_request_given_by_the_caller_wins_over_the_span() -> None:
    request = SummaryRequest(
        messages=[_user("Go on.", 3), _say("Going on.", 3)],
        max_chars=20_000,
        first_request="Fix QUI-1 in the pager.",
        latest_request=("T9", "Now release it."),
    )
    sections = parse_sections(ExtractiveSummarizer().summarize(request).text).sections
    assert sections["Primary Request"][:2] == [
        "Fix QUI-1 in the pager.",
        "Latest request (T9): Now release it.",
    ]
    # the latest request came after the span: the span's own next step is stale
    assert sections["Optional Next Step"] == ["continue the latest request (T9): Now release it."]


@pytest.mark.parametrize(
    "text",
    [
        "<task-notification>\n<status>completed</status>\n</task-notification>",
        "<system-reminder>Do not forget the todo list.</system-reminder>",
        "<local-command-stdout>Do not panic</local-command-stdout>",
        "<user-prompt-submit-hook>Never push.</user-prompt-submit-hook>",
        "Caveat: The messages below were generated by the user while running local commands.",
    ],
)
def test_injected_user_text_is_never_a_request_or_constraint(text: str) -> None:
    assert not spoken_by_user({"role": "user"}, text)
    messages = [_user("Fix the pager.", 1), _say("Done.", 1), _user(text, 1)]
    result = ExtractiveSummarizer().summarize(SummaryRequest(messages=messages, max_chars=20_000))
    sections = parse_sections(result.text).sections
    assert sections["Primary Request"] == ["Fix the pager."]
    assert sections["All User Messages"] == ["T1: Fix the pager."]
    assert "answer the last user message" not in result.text


def test_is_meta_user_messages_are_not_the_user() -> None:
    messages = [
        _user("Fix the pager.", 1),
        _say("Done.", 1),
        _user("Please never use tabs.", 1, isMeta=True),
    ]
    result = ExtractiveSummarizer().summarize(SummaryRequest(messages=messages, max_chars=20_000))
    sections = parse_sections(result.text).sections
    assert sections["All User Messages"] == ["T1: Fix the pager."]
    assert not any("tabs" in c for c in sections["Primary Request"])
