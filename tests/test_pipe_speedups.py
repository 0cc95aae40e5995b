"""Speed-ups of the pipe chain never change a result.

- ``rules -q`` plans without the per-rule savings nobody sees (``RulesOptions.by_rule``):
  the same event, the same report but an empty ``byRule``.
- The ``rules()`` filter plans without the per-rule trace and hands its rewriter to replay, so
  the filters after it (dedup, micro) do not run the rules on every target again: the events
  and the replayed context are those of the plain path (``plan_rules``, a fresh replay).
- A stage reading a pipe imports what it will need while the pipe is still empty
  (``runner.warm_while_waiting``): it imports nothing otherwise, and the output is the same.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from hypothesis import HealthCheck, given, settings

from compactctl.layers.dedup import dedup
from compactctl.layers.micro import micro
from compactctl.layers.rules import RulesOptions, _ReplayMemo, plan_rules, rules
from compactctl.model import CompactEvent, Event, event_from_dict
from compactctl.pipeline import pipeline
from compactctl.replay import replay

from .conftest import SAMPLES
from .strategies import sessions

T = "2025-01-01T00:00:00Z"

MESSY = [
    "Done ✅   \n\n\n\nNext.",
    "| a | b |\n|---|---|\n| 1 | 2 |\n",
    "\x1b[31mred\x1b[0m  \n\n\n\nok",
    "- one\n- one\n- two\n\n\n",
    "你好,世界!  \n\n\n",
]


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
    _ReplayMemo.forget()
    fresh = replay(out)  # every target rewritten again
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

    # the same chain, each filter's replay starting from nothing
    def forgetting(events: list[Event]) -> list[Event]:
        _ReplayMemo.forget()
        return events

    step = list(rules(timestamp=T)(log))
    _ReplayMemo.forget()
    step = list(dedup(timestamp=T)(forgetting(step)))
    _ReplayMemo.forget()
    plain = list(micro(timestamp=T)(forgetting(step)))
    assert [e.to_json() for e in chained] == [e.to_json() for e in plain]
    _ReplayMemo.forget()
    assert [m.data for m in replay(chained)] == [m.data for m in replay(plain)]


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


ROOT = Path(__file__).resolve().parent.parent
PROBE = """
import sys, compactctl.cli, compactctl.app.runner as runner
before = set(sys.modules)
runner.warm_while_waiting(sys.argv[1:2], ("compactctl.layers.text_rules",))
sys.stdout.write(str("compactctl.layers.text_rules" in set(sys.modules) - before))
"""


def _probe(stdin: int | None, path: str = "-") -> str:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, path],
        stdin=stdin,
        capture_output=True,
        env=env,
        check=True,
        timeout=60,
    )
    return proc.stdout.decode()


def test_warm_imports_only_while_a_pipe_is_empty(tmp_path: Path) -> None:
    # an empty pipe whose writer is still open: the stage would wait, so it imports now
    r, w = os.pipe()
    try:
        assert _probe(r) == "True"
    finally:
        os.close(r)
        os.close(w)
    # data already waiting in the pipe: nothing to hide the import behind
    r, w = os.pipe()
    os.write(w, b"{}\n")
    os.close(w)
    try:
        assert _probe(r) == "False"
    finally:
        os.close(r)
    # a file on stdin, or stdin not among the paths
    f = tmp_path / "s.jsonl"
    f.write_bytes(b"{}\n")
    with open(f, "rb") as fh:
        assert _probe(fh.fileno()) == "False"
    r, w = os.pipe()
    try:
        assert _probe(r, str(f)) == "False"
    finally:
        os.close(r)
        os.close(w)


def test_a_stage_that_warmed_up_writes_the_same_bytes(tmp_path: Path) -> None:
    sample = sorted(SAMPLES.glob("*.canonical.jsonl"))[0].read_bytes()
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "COMPACTCTL_DB": str(tmp_path / "db.sqlite"),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
    }
    argv = [sys.executable, "-m", "compactctl", "rules", "--estimate", "-q", "-"]
    direct = subprocess.run(argv, input=sample, capture_output=True, env=env, check=True)
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
    time.sleep(0.3)  # the stage is waiting on an empty pipe: it warms up
    piped, _ = proc.communicate(sample, timeout=60)
    assert proc.returncode == 0

    def strip_time(data: bytes) -> list[bytes]:
        return [line.split(b'"timestamp"')[0] for line in data.splitlines()]

    assert strip_time(piped) == strip_time(direct.stdout)
    assert piped.startswith(sample)


def test_tiktoken_is_warmed_only_for_exact_counts() -> None:
    """On an empty pipe: ``"estimate"`` imports no tiktoken; ``None`` (the session's
    encoding, exact) imports it."""
    code = (
        "import sys, compactctl.cli, compactctl.app.runner as runner\n"
        "enc = None if sys.argv[1] == 'None' else sys.argv[1]\n"
        "runner.warm_while_waiting(['-'], ('compactctl.formats',), enc)\n"
        "sys.stdout.write(str('tiktoken' in sys.modules))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    got = {}
    for enc in ("estimate", "None"):
        r, w = os.pipe()
        try:
            proc = subprocess.run(
                [sys.executable, "-c", code, enc],
                stdin=r,
                capture_output=True,
                env=env,
                check=True,
                timeout=60,
            )
        finally:
            os.close(r)
            os.close(w)
        got[enc] = proc.stdout.decode()
    assert got == {"estimate": "False", "None": "True"}
