"""`compactctl undo` (issue 19 point 7): a revert event that replay honours.

The effective context after ``undo`` is compared with the one replayed before the compaction
it takes back, on the shipped samples, for every command that appends a compaction
(compact, rules, dedup, tiers). The file only grows (its old bytes are a prefix), a second
``undo`` appends nothing, and a compaction after the undo compacts again.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import orjson
import pytest

from compactctl.io.files import read
from compactctl.model import event_from_dict
from compactctl.replay import live_events, replay, reverted
from compactctl.tokens import TokenCounter, messages_tokens, prompt_sum
from tests.helpers import SAMPLES, run_cli


def _view(path: Path) -> list[dict[str, Any]]:
    return [m.data for m in replay(read(str(path)))]


def _tokens(view: list[dict[str, Any]]) -> int:
    """The prompt estimate of a view (the chars-based estimate, as ``--encoding estimate``)."""
    return prompt_sum(messages_tokens(view, TokenCounter("estimate")))


def _copy(tmp_path: Path, sample: str) -> Path:
    path = tmp_path / "s.jsonl"
    shutil.copyfile(SAMPLES / sample, path)
    return path


def _ok(*args: str, input: bytes | None = None) -> Any:
    r = run_cli(*args, input=input)
    assert r.returncode == 0, r.stderr.decode()
    return r


EST = ("--encoding", "estimate")

STEPS = {
    "compact": (("compact", "--force"), ()),
    "rules": (("rules",), ()),
    "dedup": (("dedup", "--scope", "all"), ()),
    "tiers": (("tiers", "--tier", "L0"), (("compact", "--force"),)),
}


@pytest.mark.parametrize("sample", ["small-s1.canonical.jsonl", "cjk-s3.canonical.jsonl"])
@pytest.mark.parametrize("command", sorted(STEPS))
def test_undo_gives_back_the_context_before_the_compaction(
    tmp_path: Path, command: str, sample: str
):
    path = _copy(tmp_path, sample)
    step, setup = STEPS[command]
    for args in setup:
        _ok(*args, *EST, str(path))
    before = _view(path)
    r = _ok(*step, *EST, "--json", str(path))
    assert orjson.loads(r.stdout)["files"][0]["changed"] is True
    compacted = _view(path)
    assert compacted != before
    grown = path.read_bytes()

    r = _ok("undo", *EST, "--json", str(path))
    report = orjson.loads(r.stdout)["files"][0]
    assert report["changed"] is True and report["appended"] == 1
    assert _view(path) == before
    after = path.read_bytes()
    assert after.startswith(grown)
    (revert,) = [orjson.loads(x) for x in after[len(grown) :].splitlines()]
    assert revert["type"] == "revert" and revert["uuid"] == report["revert"]
    added = [orjson.loads(x) for x in grown.splitlines()[-len(revert["targets"]) :]]
    assert revert["targets"] == [e["uuid"] for e in added]  # the run's events, all of them
    assert {e["type"] for e in added} <= {"compact", "summary"}

    # the same command again takes back nothing more: one run, once
    r = _ok("undo", *EST, str(path))
    assert path.read_bytes() == after
    assert b"taken back already" in r.stderr


def test_undo_takes_back_a_compact_run_whole_and_compact_compacts_again(tmp_path: Path):
    path = _copy(tmp_path, "small-s1.canonical.jsonl")
    before = _view(path)
    _ok("compact", "--force", *EST, str(path))
    compacted = _view(path)
    run = [orjson.loads(x) for x in path.read_bytes().splitlines()[-2:]]
    assert [e["type"] for e in run] == ["compact", "summary"]
    assert run[0]["timestamp"] == run[1]["timestamp"]  # one run, one timestamp

    r = _ok("undo", *EST, "--json", str(path))
    report = orjson.loads(r.stdout)["files"][0]
    assert [e["uuid"] for e in report["reverted"]] == [e["uuid"] for e in run]
    assert (report["tokensBefore"], report["tokensAfter"]) == (_tokens(compacted), _tokens(before))
    assert _view(path) == before

    size = path.stat().st_size
    _ok("compact", "--force", *EST, str(path))
    assert path.stat().st_size > size  # compacted again
    new = [orjson.loads(x) for x in path.read_bytes().splitlines()[-2:]]
    assert [e["type"] for e in new] == ["compact", "summary"]
    assert {e["uuid"] for e in new}.isdisjoint(e["uuid"] for e in run)
    # the same context as the first compaction, but for the summary's new uuid
    view = _view(path)
    assert [m["content"] for m in view] == [m["content"] for m in compacted]
    assert [m.get("summaryOf") for m in view if "summaryOf" in m] == [new[1]["uuid"]]

    # a second compact appends nothing; undo now takes back the new run
    size = path.stat().st_size
    _ok("compact", "--force", *EST, str(path))
    assert path.stat().st_size == size
    r = _ok("undo", *EST, "--json", str(path))
    assert [e["uuid"] for e in orjson.loads(r.stdout)["files"][0]["reverted"]] == [
        e["uuid"] for e in new
    ]
    assert _view(path) == before


def test_undo_event_names_one_compaction_and_refuses_what_it_cannot_take_back(tmp_path: Path):
    path = _copy(tmp_path, "small-s1.canonical.jsonl")
    _ok("rules", *EST, str(path))
    after_rules = _view(path)
    _ok("dedup", "--scope", "all", *EST, str(path))
    events = list(read(str(path)))
    rules_uuid = next(e.uuid for e in events if e.data.get("mode") == "rules")
    dedup_uuid = next(e.uuid for e in events if e.data.get("mode") == "dedup")
    message_uuid = next(e.uuid for e in events if e.type == "message")
    size = path.stat().st_size

    r = run_cli("undo", "--event", "no-such-id", str(path))
    assert r.returncode == 2 and b"no compact or summary event has that uuid" in r.stderr
    assert dedup_uuid.encode() in r.stderr  # the newest ones are listed
    r = run_cli("undo", "--event", str(message_uuid), str(path))
    assert r.returncode == 2 and b"is a message event" in r.stderr
    assert path.stat().st_size == size

    # --dry-run and --check write nothing; --check exits 1 when there is something to undo
    assert _ok("undo", "--dry-run", "--event", str(dedup_uuid), str(path))
    assert run_cli("undo", "--check", str(path)).returncode == 1
    assert path.stat().st_size == size

    r = _ok("undo", "--json", *EST, "--event", str(dedup_uuid), str(path))
    assert [e["mode"] for e in orjson.loads(r.stdout)["files"][0]["reverted"]] == ["dedup"]
    assert _view(path) == after_rules
    grown = path.read_bytes()
    r = _ok("undo", "--event", str(dedup_uuid), str(path))  # idempotent for a named event
    assert path.read_bytes() == grown and b"taken back already" in r.stderr
    assert run_cli("undo", "--check", str(path)).returncode == 0  # the newest run is undone

    # an older compaction is named with --event; the undone dedup stays undone
    _ok("undo", *EST, "--event", str(rules_uuid), str(path))
    assert _view(path) == [e.data for e in events if e.type == "message"]
    assert set(reverted(read(str(path)))) == {rules_uuid, dedup_uuid}


def test_undo_refuses_a_summary_a_later_summary_builds_on(tmp_path: Path):
    path = _copy(tmp_path, "small-s1.canonical.jsonl")
    _ok("compact", "--force", *EST, str(path))
    first = orjson.loads(path.read_bytes().splitlines()[-1])
    with path.open("ab") as f:  # the session goes on, then is compacted again
        for i in range(12):
            role = "user" if i % 2 == 0 else "assistant"
            f.write(orjson.dumps({"type": "message", "uuid": f"late-{i}", "role": role,
                                  "content": f"later message {i} " * 20}) + b"\n")  # fmt: skip
    _ok("compact", "--force", *EST, str(path))
    second = orjson.loads(path.read_bytes().splitlines()[-1])
    assert second["type"] == "summary" and first["uuid"] in second["replaces"]
    size = path.stat().st_size
    r = run_cli("undo", "--event", first["uuid"], str(path))
    assert r.returncode == 2 and second["uuid"].encode() in r.stderr
    assert b"undo it first" in r.stderr and path.stat().st_size == size
    # the newest run first, then the older summary
    _ok("undo", *EST, str(path))
    _ok("undo", *EST, "--event", first["uuid"], str(path))
    assert not any("summaryOf" in m for m in _view(path))


def test_undo_on_stdin_streams_the_input_then_the_revert(tmp_path: Path):
    original = (SAMPLES / "small-s1.canonical.jsonl").read_bytes()
    compacted = _ok("compact", "--force", *EST, "-", input=original).stdout
    r = run_cli("undo", *EST, "-", input=compacted)
    assert r.returncode == 0 and r.stdout.startswith(compacted)
    (revert,) = [orjson.loads(x) for x in r.stdout[len(compacted) :].splitlines()]
    assert revert["type"] == "revert" and len(revert["targets"]) == 2
    events = [event_from_dict(orjson.loads(x)) for x in r.stdout.splitlines()]
    assert [m.data for m in replay(events)] == [
        orjson.loads(x) for x in original.splitlines() if b'"type":"message"' in x
    ]


def test_a_revert_takes_back_only_compactions_before_it():
    def ev(**data: Any) -> Any:
        return event_from_dict(data)

    log = [
        ev(type="message", uuid="m1", role="user", content="a"),
        ev(type="message", uuid="m2", role="assistant", content="b"),
        ev(type="summary", uuid="s1", replaces=["m1", "m2"], summaryText="S"),
        ev(type="revert", uuid="r1", targets=["m1", "s1", "s2"]),
        ev(type="summary", uuid="s2", replaces=["m1"], summaryText="T"),
    ]
    assert reverted(log) == {"s1": "r1"}
    assert [e.uuid for e in live_events(log)] == ["m1", "m2", "s2"]
    # m1 stays (a revert never removes a message), s2 (after the revert) applies
    assert [m.data["content"] for m in replay(log)] == ["T", "b"]


def test_undo_takes_back_a_one_pass_run_whole_and_it_compacts_again(tmp_path: Path):
    """`compact --layers all` appends one batch (rules, dedup, micro, summary, tiers events):
    one undo takes all of it back, and the one pass after the undo plans over the live log."""
    path = _copy(tmp_path, "small-s1.canonical.jsonl")
    before = _view(path)
    size = path.stat().st_size
    _ok("compact", "--force", "--layers", "all", *EST, str(path))
    run = [orjson.loads(x) for x in path.read_bytes()[size:].splitlines()]
    assert len(run) >= 3 and len({e["timestamp"] for e in run}) == 1
    compacted = _view(path)

    r = _ok("undo", *EST, "--json", str(path))
    assert [e["uuid"] for e in orjson.loads(r.stdout)["files"][0]["reverted"]] == [
        e["uuid"] for e in run
    ]
    assert _view(path) == before

    size = path.stat().st_size
    _ok("compact", "--force", "--layers", "all", *EST, str(path))
    again = [orjson.loads(x) for x in path.read_bytes()[size:].splitlines()]
    assert [e["type"] for e in again] == [e["type"] for e in run]
    assert [m["content"] for m in _view(path)] == [m["content"] for m in compacted]
