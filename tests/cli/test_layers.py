"""`compactctl rules` and `compactctl dedup` end to end: the rule list, a bad rule name, the
dedup report on the small sample, and a pipe of rules | dedup | compact that keeps the input
bytes."""

from __future__ import annotations

from pathlib import Path

import orjson

from compactctl.io.files import read
from tests.helpers import SAMPLES, run_cli


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
