"""The rules layer (Layer 1) on a log: the event it plans (versions, targets, what replay
shows), pinned messages and code left alone, ``only`` and ``skip``."""

from __future__ import annotations

from compactctl.layers.rules import RulesOptions, plan_rules
from compactctl.model import CompactEvent
from compactctl.replay import replay
from tests.helpers import message

T = "2025-01-01T00:00:00Z"


# --- rules -------------------------------------------------------------------------------


def test_rules_event_records_versions_and_replays():
    log = [
        message("u1", "user", "Fix it 🙂\n\n\n\nplease"),
        message(
            "a1", "assistant", "| name | size |\n| --- | --- |\n| a.py | 3 |\n\n-----\nDone ✅"
        ),
        message("t1", "tool", "def f():\n    return 1   \n", toolCallId="c1", toolName="read_file"),
        message("p1", "user", "keep 🙂   \n\n\n\nme", pinned=True),
    ]
    event, report = plan_rules(log, RulesOptions(), timestamp=T)
    assert isinstance(event, CompactEvent) and event.mode == "rules"
    assert event.targets == ["u1", "a1", "t1"]
    assert event.params["rules"]["tables"] == 1 and event.params["selection"] == 1
    view = {m.uuid: m.content for m in replay(log + [event])}
    assert view["u1"] == "Fix it\n\nplease"
    assert view["a1"] == "name: a.py; size: 3\n\nDone"
    # file contents get only the rules that cannot change meaning (trailing blanks here)
    assert view["t1"] == "def f():\n    return 1\n"
    assert view["p1"] == "keep 🙂   \n\n\n\nme"  # pinned: untouched
    assert set(report["byRule"]) >= {"emoji", "tables", "decorative", "whitespace"}
    assert report["byRole"]["assistant"]["messages"] == 1
    # a second run on the result finds nothing to do
    again, _ = plan_rules(log + [event], RulesOptions(), timestamp=T)
    assert again is None


def test_rules_only_and_skip():
    log = [message("a1", "assistant", "Done ✅   \n\n\n\nnext")]
    only, _ = plan_rules(log, RulesOptions(only=("emoji",)), timestamp=T)
    assert only is not None and replay(log + [only])[0].content == "Done   \n\n\n\nnext"
    skip, _ = plan_rules(log, RulesOptions(skip=("emoji",)), timestamp=T)
    assert skip is not None and replay(log + [skip])[0].content == "Done ✅\n\nnext"


# --- dedup -------------------------------------------------------------------------------


# --- every filter: never splits a tool block, idempotent, never mutates ------------------
