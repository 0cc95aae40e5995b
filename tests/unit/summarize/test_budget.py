"""Issue 15 points 3 and 4: every explicit decision verbatim; a summary bounded in tokens
(``max_summary_tokens``, task-state JSON included) whatever the session and the number of
incremental passes, the ledger compressed before anything is cut."""

from __future__ import annotations

from typing import Any

import pytest

from bench.gen_probed import probed_session
from compactctl.evaluate.check import Context
from compactctl.evaluate.probes import Probe
from compactctl.layers.options import CompactOptions
from compactctl.layers.summary import plan_compact
from compactctl.model import Event, SummaryEvent, event_from_dict
from compactctl.replay import replay
from compactctl.summarize import SummaryRequest
from compactctl.summarize.extractive import ExtractiveSummarizer
from compactctl.summarize.extractive.render import summary_tokens
from compactctl.summarize.summary_format import parse_sections
from compactctl.tokens import TokenCounter

SEED = 9511  # not used by any other test


def _passes(records: list[dict[str, Any]], passes: int, fmt: str) -> tuple[list[Event], list[int]]:
    """The log after ``passes`` compactions, the session growing between them, and the
    token count of each pass's summary (o200k_base)."""
    users = [i for i, r in enumerate(records) if r.get("role") == "user"]
    cuts = [users[len(users) * k // passes] for k in range(1, passes)] + [len(records)]
    counter = TokenCounter("o200k_base")
    log: list[Event] = []
    sizes = []
    start = 0
    for cut in cuts:
        log += [event_from_dict(r) for r in records[start:cut]]
        start = cut
        plan = plan_compact(log, CompactOptions(force=True, format=fmt))
        log += plan.events
        summary = [e for e in log if isinstance(e, SummaryEvent)][-1]
        sizes.append(counter.count(summary.data["summaryText"]))
    return log, sizes


@pytest.mark.parametrize("passes", [10, 30])
@pytest.mark.parametrize("fmt", ["sections", "task-state"])
def test_budget_holds_over_incremental_passes(fmt: str, passes: int) -> None:
    """A 330-turn session compacted in ``passes`` steps (append a part, compact, repeat):
    every summary within ``max_summary_tokens``, and every constraint and decision, those of
    the first pass included, still in the effective context at the end."""
    records, probes = probed_session(SEED, 330)
    log, sizes = _passes(records, passes, fmt)
    assert max(sizes) <= CompactOptions().max_summary_tokens, sizes
    # the size stays flat: the last pass is no bigger than 1.5x the median pass
    assert sizes[-1] <= 1.5 * sorted(sizes)[len(sizes) // 2] + 500, sizes
    context = Context(replay(log))
    users = [r.get("turnId") for r in records if r.get("role") == "user"]
    first_cut = users[len(users) // passes]
    first = [p for p in probes if p["kind"] in ("user_constraint", "decision")]
    assert any(p["turn"] < first_cut for p in first)  # the first pass had some to keep
    for kind in ("user_constraint", "decision", "first_request", "latest_request"):
        lost = [
            p["text"]
            for p in probes
            if p["kind"] == kind and context.match(Probe(kind, p["text"], None, None)) is None
        ]
        assert not lost, (kind, lost)


def test_explicit_decisions_are_kept_verbatim_and_all() -> None:
    decisions = [
        f"Decision: cache the offsets of shard {i} in a dict instead of scanning, because "
        f"the scan costs {i} ms on every page and the pager calls it twice per request."
        for i in range(20)
    ]
    messages = [{"type": "message", "role": "user", "turnId": 1, "content": "Speed it up."}]
    messages += [
        {"type": "message", "role": "assistant", "turnId": 1, "content": d} for d in decisions
    ]
    result = ExtractiveSummarizer().summarize(SummaryRequest(messages=messages, max_chars=12_000))
    kept = parse_sections(result.text).sections["Decision Rationale"]
    assert kept == decisions


def test_the_ledger_is_compressed_before_the_budget_is_broken() -> None:
    messages: list[dict[str, Any]] = [
        {"type": "message", "role": "user", "turnId": 1, "content": "Fix it. Do not add deps."}
    ]
    for i in range(400):
        call = {"id": f"c{i}", "name": "bash", "arguments": {"command": f"cat src/mod_{i}.py"}}
        messages.append(
            {
                "type": "message",
                "role": "assistant",
                "turnId": 1,
                "content": "",
                "toolCalls": [call],
            }
        )
        messages.append(
            {"type": "message", "role": "tool", "turnId": 1, "toolCallId": f"c{i}", "content": "x"}
        )
    request = SummaryRequest(messages=messages, max_chars=12_000, max_tokens=3000)
    result = ExtractiveSummarizer().summarize(request)
    assert len(result.text) <= 12_000 and summary_tokens(result.text) <= 3000
    sections = parse_sections(result.text).sections
    assert "Constraint: Do not add deps." in sections["Primary Request"]
    assert any(f.startswith("read only: ") for f in sections["Files and Code Sections"])
    state = ExtractiveSummarizer().summarize(
        SummaryRequest(messages=messages, format="task-state", max_chars=1200, max_tokens=3000)
    )
    assert summary_tokens(state.text) <= 3000
    assert state.task_state is not None
    assert state.task_state["user_constraints"] == ["Do not add deps."]
