"""`rules` and `dedup` as filters and commands; every filter under property tests."""

from __future__ import annotations

from pathlib import Path

import orjson
from hypothesis import given, settings

from bench.gen_dups import exact_pairs, generate
from compactctl.io.files import read
from compactctl.layers.dedup import DedupOptions, dedup, plan_dedup
from compactctl.layers.micro import MicroParams, micro
from compactctl.layers.rules import RulesOptions, plan_rules, rules
from compactctl.layers.similarity import jaccard, shingles
from compactctl.model import CompactEvent, Event, Message, event_from_dict
from compactctl.pipeline import pipeline
from compactctl.replay import replay, tool_block_keys

from .conftest import SAMPLES, run_cli
from .strategies import sessions

T = "2025-01-01T00:00:00Z"


def _m(uuid: str, role: str, content: str, **kw) -> Event:
    return event_from_dict(
        {"type": "message", "uuid": uuid, "role": role, "content": content, **kw}
    )


# --- rules -------------------------------------------------------------------------------


def test_rules_event_records_versions_and_replays():
    log = [
        _m("u1", "user", "Fix it 🙂\n\n\n\nplease"),
        _m("a1", "assistant", "| name | size |\n| --- | --- |\n| a.py | 3 |\n\n-----\nDone ✅"),
        _m("t1", "tool", "def f():\n    return 1   \n", toolCallId="c1", toolName="read_file"),
        _m("p1", "user", "keep 🙂   \n\n\n\nme", pinned=True),
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
    log = [_m("a1", "assistant", "Done ✅   \n\n\n\nnext")]
    only, _ = plan_rules(log, RulesOptions(only=("emoji",)), timestamp=T)
    assert only is not None and replay(log + [only])[0].content == "Done   \n\n\n\nnext"
    skip, _ = plan_rules(log, RulesOptions(skip=("emoji",)), timestamp=T)
    assert skip is not None and replay(log + [skip])[0].content == "Done ✅\n\nnext"


def test_rules_cli_list_json_and_bad_name():
    r = run_cli("rules", "--list", "--json")
    names = [x["name"] for x in orjson.loads(r.stdout)]
    assert len(names) == 10 and "ansi" in names and "cjk_punct" in names
    r = run_cli("rules", "--only", "nope", str(SAMPLES / "small-s1.canonical.jsonl"))
    assert r.returncode == 2 and b"unknown rule 'nope'" in r.stderr


def test_pipe_chain_keeps_input_bytes_and_appends_three_layers(tmp_path: Path):
    original = (SAMPLES / "small-s1.canonical.jsonl").read_bytes()
    r1 = run_cli("rules", "-", input=original)
    r2 = run_cli("dedup", "-", input=r1.stdout)
    r3 = run_cli("compact", "--force", "-", input=r2.stdout)
    assert r3.returncode == 0
    assert r3.stdout.startswith(r2.stdout) and r2.stdout.startswith(r1.stdout)
    assert r1.stdout.startswith(original)
    added = [orjson.loads(x) for x in r3.stdout[len(original) :].splitlines()]
    assert [(e["type"], e.get("mode")) for e in added] == [
        ("compact", "rules"),
        ("compact", "dedup"),
        ("compact", "micro"),
        ("summary", None),
    ]


# --- dedup -------------------------------------------------------------------------------


def test_dedup_semantics():
    text = "error: connection refused while fetching package index from the mirror " * 4
    assert len(text) >= 200
    log = [
        _m("u1", "user", text),
        _m("a0", "assistant", "", toolCalls=[{"id": "c1", "name": "bash", "arguments": {}}]),
        _m("t1", "tool", text, toolCallId="c1", toolName="bash"),
        _m("a1", "assistant", text),
        _m("a2", "assistant", "", toolCalls=[{"id": "c2", "name": "bash", "arguments": {}}]),
        _m("t2", "tool", text, toolCallId="c2", toolName="bash"),
        _m("a3", "assistant", text),
        _m("u2", "user", text),
    ]
    event, report = plan_dedup(log, DedupOptions(), timestamp=T)
    assert event is not None
    assert event.data["duplicateOf"] == {"t1": "a3", "a1": "a3", "t2": "a3"}
    assert report["groups"] == 1 and report["exact"] == 3
    view = replay(log + [event])
    by = {m.uuid: m for m in view}
    assert "a1" not in by  # older assistant text dropped
    assert by["t1"].content.startswith("[duplicate of the bash output in message a3")
    assert by["u1"].content == text and by["u2"].content == text  # users never touched
    assert all(m.uuid in by for m in view if m.tool_calls)  # tool blocks stay valid
    tool_only, _ = plan_dedup(log, DedupOptions(scope="tool"), timestamp=T)
    assert tool_only is not None and tool_only.data["duplicateOf"] == {"t1": "t2"}


def test_dedup_recall_and_precision_against_exact_jaccard():
    items, _ = generate(1200, seed=7)
    log: list[Event] = [_m("u0", "user", "go")]
    for i, (key, text) in enumerate(items):
        log.append(
            _m(
                f"a{i}",
                "assistant",
                "",
                toolCalls=[{"id": f"c{i}", "name": "bash", "arguments": {}}],
            )
        )
        log.append(_m(key, "tool", text, toolCallId=f"c{i}", toolName="bash"))
    event, report = plan_dedup(log, DedupOptions(scope="tool", min_chars=0), timestamp=T)
    assert event is not None
    dup = event.data["duplicateOf"]
    truth = exact_pairs(items, 0.6)
    should = {older for older, _ in truth}
    assert should, "the generated set must contain duplicates"
    recall = len(should & set(dup)) / len(should)
    assert recall >= 0.98, recall
    texts = dict(items)
    for older, newer in dup.items():  # precision 1.0: every reported pair verified
        assert jaccard(shingles(texts[older]), shingles(texts[newer])) >= 0.6


def test_dedup_cli_json(tmp_path: Path):
    path = tmp_path / "s.jsonl"
    path.write_bytes((SAMPLES / "small-s1.canonical.jsonl").read_bytes())
    r = run_cli("dedup", "--json", "--scope", "tool", str(path))
    f = orjson.loads(r.stdout)["files"][0]
    # small-s1.meta.json lists 4 duplicate tool outputs of >= 200 bytes (3 exact, 1 near);
    # each older copy points to the newest survivor, so they form 2 groups here.
    assert (f["pairs"], f["groups"], f["exact"], f["near"]) == (4, 2, 3, 1)
    meta = orjson.loads((SAMPLES / "small-s1.meta.json").read_bytes())
    older_calls = {p["older"] for p in meta["duplicateToolOutputs"]["pairs"]}
    events = list(read(str(path)))
    call_of = {e.uuid: e.data.get("toolCallId") for e in events}
    (dedup_event,) = [e for e in events if e.type == "compact"]
    assert {call_of[u] for u in dedup_event.data["duplicateOf"]} == older_calls
    assert f["tokensSaved"] > 0
    r = run_cli("dedup", "--json", "--scope", "tool", str(path))
    assert orjson.loads(r.stdout)["files"][0]["changed"] is False
    assert run_cli("dedup", "--scope", "nope", str(path)).returncode == 2


# --- every filter: never splits a tool block, idempotent, never mutates ------------------


def _blocks_whole(view: list[Message], log: list[Event]) -> bool:
    keys = tool_block_keys([e for e in log if isinstance(e, Message)])
    present = {m.uuid for m in view}
    groups: dict[str, set[str]] = {}
    for u, k in keys.items():
        groups.setdefault(k, set()).add(u)
    return all(not (g & present) or g <= present for g in groups.values())


FILTERS = {
    "rules": lambda: rules(timestamp=T),
    "dedup": lambda: dedup(threshold=0.5, timestamp=T),
    "micro": lambda: micro(MicroParams(keep_turns=0, min_chars=20), timestamp=T),
}


@settings(max_examples=150, deadline=None)
@given(sessions())
def test_filters_keep_blocks_whole_and_are_idempotent(log):
    snapshot = [e.to_json() for e in log]
    for name, make in FILTERS.items():
        once = list(pipeline(log, make()))
        assert [e.to_json() for e in log] == snapshot, name  # input never mutated
        assert _blocks_whole(replay(once), log), name
        twice = list(pipeline(once, make()))
        assert len(twice) == len(once), name  # the second pass appends nothing
    chained = list(pipeline(log, *(make() for make in FILTERS.values())))
    assert _blocks_whole(replay(chained), log)


def test_filters_on_samples_append_at_most_one_event_each():
    log = list(read(str(SAMPLES / "cjk-s3.canonical.jsonl")))
    out = list(pipeline(log, *(make() for make in FILTERS.values())))
    assert [e.data["mode"] for e in out[len(log) :]] == ["rules", "dedup", "micro"]
