"""Events (:mod:`compactctl.model`): typed events from their JSON lines, unknown types kept,
``evolve`` never mutating the event it copies."""

from __future__ import annotations

from compactctl.model import Message, OtherEvent, SummaryEvent
from tests.helpers import read_events


def test_typed_events():
    data = (
        b'{"type":"summary","uuid":"s","replaces":["a","b"],"summaryText":"S",'
        b'"lastSummarizedTurnId":3,"tiers":{"L0":"x"}}\n'
    )
    (e,) = read_events(data)
    assert isinstance(e, SummaryEvent)
    assert (e.replaces, e.summary_text, e.last_summarized_turn, e.tiers) == (
        ["a", "b"],
        "S",
        3,
        {"L0": "x"},
    )


def test_evolve_never_mutates():
    (e,) = read_events(b'{"type":"message","uuid":"a","role":"user","content":"x"}\n')
    assert isinstance(e, Message)
    e2 = e.evolve(content="y")
    assert e.data["content"] == "x" and e.raw is not None
    assert e2.data["content"] == "y" and e2.raw is None
    assert e2.to_json() == b'{"type":"message","uuid":"a","role":"user","content":"y"}'


def test_unknown_types_preserved():
    (e,) = read_events(b'{"type":"file-history-snapshot","snapshot":{"x":1}}\n')
    assert isinstance(e, OtherEvent) and e.data["snapshot"] == {"x": 1}
