"""`tiers` after `compact`, the store's history rows, and `inspect --store`."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import orjson

from compactctl.formats.reader import load
from compactctl.layers.tiers import TIER_BUDGETS, derive_tiers
from compactctl.model import SummaryEvent
from compactctl.replay import replay
from compactctl.summarize.summary_format import resume_text, validate_sections
from compactctl.tokens import TokenCounter
from tests.helpers import SAMPLES, run_cli


def test_tiers_after_compact_budgets_idempotence_and_replay(tmp_path: Path):
    db = tmp_path / "state.db"
    path = tmp_path / "s.jsonl"
    path.write_bytes((SAMPLES / "cjk-s3.canonical.jsonl").read_bytes())
    env = {"COMPACTCTL_DB": str(db)}
    assert run_cli("compact", "--force", str(path), env=env).returncode == 0
    r = run_cli("tiers", "--json", str(path), env=env)
    assert r.returncode == 0, r.stderr.decode()
    (f,) = orjson.loads(r.stdout)["files"]
    assert f["changed"] is True
    _, events = load(str(path))
    old, new = [e for e in events if isinstance(e, SummaryEvent)]
    assert new.data["supersedes"] == old.uuid
    assert new.replaces == [*old.replaces, old.uuid]
    counter = TokenCounter(f["tokenizer"])
    # the goal, the constraints and the next step are in every tier, even over its budget
    floor = derive_tiers(old.summary_text, "sections", counter, {"L0": 1, "L1": 1, "L2": 1})
    for tier, budget in TIER_BUDGETS.items():
        assert 0 < counter.count(new.tiers[tier]) <= max(budget, counter.count(floor["L0"]))
        assert f["tiers"][tier] == counter.count(new.tiers[tier])
        validate_sections(new.tiers[tier])
    assert counter.count(new.tiers["L0"]) < counter.count(new.tiers["L1"])
    # the 200k-token window has room for the whole summary: no tier is swapped in
    assert f["selectedTier"] is None and "selectedTier" not in new.data
    view = replay(events)
    shown = [m for m in view if "summaryOf" in m.data]
    assert len(shown) == 1 and shown[0].content == old.summary_text
    l0_view = [m.content for m in replay(events, tier="L0") if "summaryOf" in m.data]
    assert l0_view == [new.tiers["L0"]]
    # inspect --tier counts the effective context with that tier
    eff = {}
    for tier in ("L0", "L2"):
        doc = orjson.loads(run_cli("inspect", "--json", "--tier", tier, str(path), env=env).stdout)
        eff[tier] = doc["files"][0]["effectiveTokens"]
    assert eff["L0"] < eff["L2"]
    # a second run appends nothing
    size = path.stat().st_size
    r2 = run_cli("tiers", "--json", str(path), env=env)
    assert orjson.loads(r2.stdout)["files"][0]["changed"] is False
    assert path.stat().st_size == size
    # --materialize with a tier
    out = tmp_path / "ctx.jsonl"
    assert (
        run_cli(
            "tiers", "--tier", "L0", "--materialize", "-o", str(out), str(path), env=env
        ).returncode
        == 0
    )
    msgs = [orjson.loads(x) for x in out.read_bytes().splitlines()]
    # framed for the resuming agent, with the transcript's path as given
    framed = resume_text(new.tiers["L0"], str(path))
    assert [m["content"] for m in msgs if "summaryOf" in m] == [framed]
    assert framed.endswith("\n\n" + new.tiers["L0"]) and f"is at {path}." in framed
    # the store holds the tiers
    with sqlite3.connect(db) as conn:
        row = conn.execute("select l0, l1, l2 from tiered_summaries").fetchone()
    assert row == (new.tiers["L0"], new.tiers["L1"], new.tiers["L2"])


def test_tiers_without_summary_says_what_to_do(tmp_path: Path):
    path = tmp_path / "s.jsonl"
    path.write_bytes((SAMPLES / "small-s1.canonical.jsonl").read_bytes())
    r = run_cli("tiers", "--no-store", str(path))
    assert r.returncode == 0
    assert b"no summary yet: run compactctl compact first" in r.stderr


def test_every_changing_command_writes_history_and_inspect_store(tmp_path: Path):
    db = tmp_path / "state.db"
    path = tmp_path / "s.jsonl"
    path.write_bytes((SAMPLES / "small-s1.canonical.jsonl").read_bytes())
    env = {"COMPACTCTL_DB": str(db)}
    for args in (["rules"], ["dedup"], ["compact", "--force"], ["tiers"]):
        assert run_cli(*args, str(path), env=env).returncode == 0
    # unchanged runs write no row
    assert run_cli("dedup", str(path), env=env).returncode == 0
    with sqlite3.connect(db) as conn:
        rows = conn.execute(
            "select command, tokens_before, tokens_after, rules_applied from compaction_history"
            " order by id"
        ).fetchall()
    assert [r[0] for r in rows] == ["rules", "dedup", "compact", "tiers"]
    assert rows[2][1] > rows[2][2] > 0  # compact: tokens before > after
    assert "whitespace" in orjson.loads(rows[0][3])
    r = run_cli("inspect", "--store", "--json", env=env)
    doc = orjson.loads(r.stdout)
    # the run log has every run, the unchanged second dedup too
    assert doc["byCommand"] == {"compact": 1, "dedup": 2, "rules": 1, "tiers": 1}
    # rules reports its saving alone (no count of the whole context before and after)
    with sqlite3.connect(db) as conn:
        saved = conn.execute("select command, tokens_saved from run_files order by id").fetchall()
    assert saved[0][0] == "rules" and saved[0][1] > 0 and saved[-1] == ("dedup", 0)
    assert doc["tokensSaved"] == saved[0][1] + sum(b - a for _, b, a, _ in rows[1:])
    assert doc["sessionsInBreaker"] == []
    r = run_cli("inspect", "--db", str(db))
    assert r.returncode == 0 and b"runs by command: " in r.stdout


def test_inspect_history_names_the_tiers_summary_and_what_it_replaces(tmp_path: Path):
    """The summary ``tiers`` appends replaces the old summary's messages and the old summary:
    inspect's history says so (its messages counted once, the line it takes the place of, the
    tier replay shows), and ``--json`` gives ``supersedes`` and ``selectedTier``."""
    path = tmp_path / "s.jsonl"
    path.write_bytes((SAMPLES / "small-s1.canonical.jsonl").read_bytes())
    env = {"COMPACTCTL_DB": str(tmp_path / "state.db")}
    assert run_cli("compact", "--force", str(path), env=env).returncode == 0
    assert run_cli("tiers", str(path), env=env).returncode == 0
    chosen = run_cli("tiers", "--tier", "L0", str(path), env=env)
    assert chosen.returncode == 0
    assert chosen.stderr.decode() == (  # the tiers were there: only what replay shows changed
        f"{path}: replay now shows L0 (the tiers as they were: L0 216, L1 1000, L2 1578 "
        "tokens, cl100k_base)\n"
    )
    table = run_cli("inspect", str(path)).stdout.decode()
    text = table.split("compaction history:\n", 1)[1].split("\n\n", 1)[0]
    history = [line.strip() for line in text.splitlines()]
    summary, first, second = history[1:]
    lines = [int(line.split(":", 1)[0].removeprefix("line ")) for line in history]
    assert summary.startswith(f"line {lines[1]}: summary sections, 54 messages, ")
    assert first.startswith(
        f"line {lines[2]}: summary sections with tiers L0, L1, L2 in place of line "
        f"{lines[1]}'s, 54 messages, "
    )
    assert second == (  # what replay shows, not the whole summary's stats
        f"line {lines[3]}: summary sections with tiers L0, L1, L2 in place of line "
        f"{lines[2]}'s (replay shows L0, 216 tokens), 54 messages"
    )
    doc = orjson.loads(run_cli("inspect", "--json", str(path)).stdout)
    entries = doc["files"][0]["history"]
    assert [e.get("supersedes") for e in entries] == [None, None, entries[1]["uuid"],
                                                      entries[2]["uuid"]]  # fmt: skip
    assert [e.get("selectedTier") for e in entries] == [None, None, None, "L0"]
    assert entries[3]["tierTokens"]["L0"] == 216
    assert [e.get("replaces") for e in entries] == [None, 54, 55, 56]
