"""Speed-ups of the rules layer in a pipe chain never change a result.

- ``rules -q`` plans without the per-rule savings nobody sees (``RulesOptions.by_rule``):
  the same event, the same report but an empty ``byRule``.
- The ``rules()`` filter plans without the per-rule trace and hands its rewriter to replay, so
  the filters after it (dedup, micro) do not run the rules on every target again: the events
  and the replayed context are those of the plain path (``plan_rules``, and a fresh replay:
  of copies of the events, which the memo of the last replayed event does not know).

(A stage warming its imports while its pipe is empty: ``tests/unit/app/test_runner.py``.)
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings

from compactctl.layers.dedup import dedup
from compactctl.layers.micro import micro
from compactctl.layers.rules import RulesOptions, _ReplayMemo, plan_rules, rules
from compactctl.model import CompactEvent, Event, event_from_dict
from compactctl.pipeline import pipeline
from compactctl.replay import replay
from tests.strategies import sessions

T = "2025-01-01T00:00:00Z"

MESSY = [
    "Done ✅   \n\n\n\nNext.",
    "| a | b |\n|---|---|\n| 1 | 2 |\n",
    "\x1b[31mred\x1b[0m  \n\n\n\nok",
    "- one\n- one\n- two\n\n\n",
    "你好,世界!  \n\n\n",
]


def _copies(events: list[Event]) -> list[Event]:
    """New event objects with the same data: replayed afresh, nothing reused from a memo."""
    return [type(e)(e.data, raw=e.raw, line=e.line, turn=e.turn) for e in events]


def _with_messy_texts(log: list[Event]) -> list[Event]:
    """``log`` with some contents replaced by texts that several rules change."""
    out = []
    for i, e in enumerate(log):
        if i % 2 == 0 and e.type == "message" and isinstance(e.data.get("content"), str):
            e = event_from_dict({**e.data, "content": MESSY[i % len(MESSY)] * 3}, turn=e.turn)
        out.append(e)
    return out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sessions(max_turns=5))
def test_rules_filter_matches_plan_rules_and_a_fresh_replay(log: list[Event]) -> None:
    log = _with_messy_texts(log)
    planned, _ = plan_rules(log, RulesOptions(), timestamp=T)
    out = list(rules(timestamp=T)(log))
    added = out[len(log) :]
    assert [e.data for e in added] == ([planned.data] if planned is not None else [])
    seeded = replay(out)  # through the rewriter the filter left behind
    fresh = replay(_copies(out))  # every target rewritten again
    assert [m.data for m in seeded] == [m.data for m in fresh]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sessions(max_turns=5))
def test_rules_without_by_rule_plan_the_same_event(log: list[Event]) -> None:
    log = _with_messy_texts(log)
    traced, full = plan_rules(log, RulesOptions(), timestamp=T)
    plain, report = plan_rules(log, RulesOptions(by_rule=False), timestamp=T)
    assert (plain.data if plain else None) == (traced.data if traced else None)
    assert report["byRule"] == {}
    assert {k: v for k, v in report.items() if k != "byRule"} == {
        k: v for k, v in full.items() if k != "byRule"
    }


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sessions(max_turns=5))
def test_library_chain_matches_the_chain_without_the_handed_over_results(
    log: list[Event],
) -> None:
    log = _with_messy_texts(log)
    chained = list(pipeline(iter(log), rules(timestamp=T), dedup(timestamp=T), micro(timestamp=T)))

    # the same chain, each filter's replay starting from nothing (copies of what it reads)
    step = list(rules(timestamp=T)(log))
    step = list(dedup(timestamp=T)(_copies(step)))
    plain = list(micro(timestamp=T)(_copies(step)))
    assert [e.to_json() for e in chained] == [e.to_json() for e in plain]
    assert [m.data for m in replay(_copies(chained))] == [m.data for m in replay(plain)]


def test_rules_filter_hands_over_its_results_and_forgets_the_last_session() -> None:
    log = [
        event_from_dict({"type": "message", "uuid": "a1", "role": "assistant", "content": MESSY[0]})
    ]
    out = list(rules(timestamp=T)(log))
    event = out[-1]
    assert isinstance(event, CompactEvent)
    assert _ReplayMemo.event is event
    assert _ReplayMemo.rewriter is not None
    assert replay(out)[0].content == "Done\n\nNext."
    # a session where no rule changes anything: nothing of the previous one is kept
    plain = [event_from_dict({"type": "message", "uuid": "b1", "role": "user", "content": "hi"})]
    assert list(rules(timestamp=T)(plain)) == plain
    assert _ReplayMemo.event is None and _ReplayMemo.rewriter is None
