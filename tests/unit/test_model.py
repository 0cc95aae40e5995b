"""Events (:mod:`compactctl.model`): typed events from their JSON lines, unknown types kept,
``evolve`` never mutating the event it copies."""

from __future__ import annotations

import gc
import weakref

from compactctl.model import Message, OtherEvent, SummaryEvent, acyclic
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


class _Node:
    """An object that can be in a reference cycle and be watched by a weak reference."""

    def __init__(self) -> None:
        self.other: object = None


def test_acyclic_moves_what_it_kept_to_the_oldest_generation_and_cycles_are_still_freed():
    assert gc.isenabled()
    with acyclic():
        assert not gc.isenabled()
        kept = [{"n": i, "parts": [i]} for i in range(50)]
        a, b = _Node(), _Node()
        a.other, b.other = b, a  # a cycle, dropped inside the block
        watch = weakref.ref(a)
        del a, b
    assert gc.isenabled() and gc.get_freeze_count() == 0  # nothing left frozen
    oldest = {id(o) for o in gc.get_objects(generation=2)}
    assert id(kept[0]) in oldest and id(kept[-1]["parts"]) in oldest
    gc.collect()
    assert watch() is None  # the cycle was freed by the next full collection


def test_acyclic_leaves_what_the_program_froze_frozen():
    held = [{"frozen": "by the host program"}]
    gc.freeze()
    try:
        before = gc.get_freeze_count()
        with acyclic():
            more = [{"n": i} for i in range(10)]
        assert gc.get_freeze_count() == before and gc.isenabled() and more and held
    finally:
        gc.unfreeze()
