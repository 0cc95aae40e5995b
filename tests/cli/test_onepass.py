"""`compact --layers`: the layers in one pass give what their commands give run one after the
other (the same events, the same effective context), append one batch, append nothing the
second time, and read the file once."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from tests.helpers import SAMPLES, count_opens, run_cli

SEPARATE = {
    "rules": ["rules"],
    "dedup": ["dedup"],
    "micro": ["compact", "--micro-only"],
    "summary": ["compact", "--no-micro"],
    "micro,summary": ["compact"],
    "tiers": ["tiers"],
}
"""The command each layer (or micro and summary together) is, run on its own."""


def _records(data: bytes) -> list[object]:
    """The lines' objects, timestamps left out (each run stamps its own time); a line that
    is not JSON (the messy samples' torn and malformed lines) as its bytes."""
    out: list[object] = []
    for line in data.splitlines():
        try:
            d = orjson.loads(line)
        except orjson.JSONDecodeError:
            out.append(line)
            continue
        if isinstance(d, dict):
            d.pop("timestamp", None)
        out.append(d)
    return out


def _effective(path: Path, env: dict[str, str]) -> list[object]:
    """The effective context (``inspect --effective``), timestamps left out (a summary's
    message carries its event's)."""
    r = run_cli("inspect", "--effective", str(path), env=env)
    assert r.returncode == 0, r.stderr.decode()
    return _records(r.stdout)


def _commands(layers: str) -> list[list[str]]:
    names = (
        layers.split(",") if layers != "all" else ["rules", "dedup", "micro", "summary", "tiers"]
    )
    if "micro" in names and "summary" in names:
        i = names.index("micro")
        names[i : i + 2] = ["micro,summary"]
    return [SEPARATE[n] for n in names]


CASES = [
    ("small-s1.canonical.jsonl", "all", ["--force"], []),
    ("small-s1.canonical.jsonl", "rules,dedup,micro,summary,tiers", [], []),
    ("small-s1.canonical.jsonl", "dedup,summary,tiers", ["--force"], []),
    ("cjk-s3.canonical.jsonl", "all", ["--force"], []),
    ("messy-s2.canonical.jsonl", "rules,micro,summary", ["--force"], ["--torn-wait", "0"]),
    ("small-s1.canonical.jsonl", "rules,micro", ["--context-window", "8000"], []),
]
"""(sample, --layers, compact's flags, flags every command takes). The second case runs on
the triggers alone: nothing summarizes, micro compaction fires past 25% of the window."""


@pytest.mark.parametrize(("name", "layers", "flags", "shared"), CASES)
def test_one_pass_equals_the_commands_in_order(
    tmp_path: Path, name: str, layers: str, flags: list[str], shared: list[str]
) -> None:
    """In place: the one pass appends the events the commands append one after the other
    (timestamps aside), in one write, and the effective context is the same."""
    env = {"COMPACTCTL_DB": str(tmp_path / "db.sqlite")}
    source = (SAMPLES / name).read_bytes()
    one, each = tmp_path / "one.jsonl", tmp_path / "each.jsonl"
    one.write_bytes(source)
    each.write_bytes(source)
    r = run_cli("compact", *flags, *shared, "--layers", layers, "--json", str(one), env=env)
    assert r.returncode == 0, r.stderr.decode()
    result = orjson.loads(r.stdout)["files"][0]
    for argv in _commands(layers):
        extra = flags if argv[0] == "compact" else []
        done = run_cli(*argv, *extra, *shared, str(each), env=env)
        assert done.returncode == 0, (argv, done.stderr.decode())
    assert one.read_bytes().startswith(source)
    appended = _records(one.read_bytes()[len(source) :])
    assert appended == _records(each.read_bytes()[len(source) :])
    assert appended, "every case appends something"
    assert _effective(one, env) == _effective(each, env)
    # the report: one row per layer named, their events adding up to what was appended
    rows = result["byLayer"]
    assert [row["layer"] for row in rows] == (
        ["rules", "dedup", "micro", "summary", "tiers"] if layers == "all" else layers.split(",")
    )
    new = [d for d in appended if isinstance(d, dict)]  # after a torn line: its \n first
    assert sum(row["events"] for row in rows) == len(new) == result["appended"]
    assert rows[0]["tokensBefore"] == result["tokensBefore"]
    for a, b in zip(rows, rows[1:], strict=False):
        assert a["tokensAfter"] == b["tokensBefore"]
    assert rows[-1]["tokensAfter"] == result["tokensAfter"]
    assert result["tokensSaved"] == sum(row["tokensSaved"] for row in rows) > 0


def test_foreign_format_through_o_and_stdin_equal_the_commands(tmp_path: Path) -> None:
    """A Claude Code session (never appended to): ``-o`` writes canonical JSONL with the
    events, as ``rules -o`` then the other commands on that output; stdin to stdout too."""
    env = {"COMPACTCTL_DB": str(tmp_path / "db.sqlite")}
    source = SAMPLES / "messy-s2.claude-code.jsonl"
    one, each = tmp_path / "one.jsonl", tmp_path / "each.jsonl"
    r = run_cli("compact", "--force", "--layers", "all", "-o", str(one), str(source), env=env)
    assert r.returncode == 0, r.stderr.decode()
    assert run_cli("rules", "-o", str(each), str(source), env=env).returncode == 0
    for argv in (["dedup"], ["compact", "--force"], ["tiers"]):
        assert run_cli(*argv, str(each), env=env).returncode == 0
    assert _records(one.read_bytes()) == _records(each.read_bytes())
    kinds = [(d["type"], d.get("mode")) for d in _records(one.read_bytes())
             if isinstance(d, dict) and d.get("type") in ("compact", "summary")]  # fmt: skip
    assert kinds == [("compact", "rules"), ("compact", "dedup"), ("compact", "micro"),
                     ("summary", None), ("summary", None)]  # fmt: skip
    piped = run_cli("compact", "--force", "--layers", "all", "-", input=source.read_bytes(),
                    env=env)  # fmt: skip
    assert piped.returncode == 0, piped.stderr.decode()
    assert _records(piped.stdout) == _records(one.read_bytes())
    assert b"rules -" in piped.stderr and b"prompt estimate" in piped.stderr


def test_second_run_appends_nothing(tmp_path: Path) -> None:
    env = {"COMPACTCTL_DB": str(tmp_path / "db.sqlite")}
    path = tmp_path / "s.jsonl"
    path.write_bytes((SAMPLES / "small-s1.canonical.jsonl").read_bytes())
    first = run_cli("compact", "--force", "--layers", "all", str(path), env=env)
    assert first.returncode == 0, first.stderr.decode()
    size = path.stat().st_size
    again = run_cli("compact", "--force", "--layers", "all", "--json", str(path), env=env)
    assert again.returncode == 0
    result = orjson.loads(again.stdout)["files"][0]
    assert (result["changed"], result["appended"], path.stat().st_size) == (False, 0, size)
    check = run_cli("compact", "--force", "--layers", "all", "--check", str(path), env=env)
    assert check.returncode == 0


def test_unknown_or_misordered_layers_are_usage_errors(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes((SAMPLES / "small-s1.canonical.jsonl").read_bytes())
    before = path.read_bytes()
    for value, says in (
        ("rules,bogus", b"unknown layer 'bogus'"),
        ("summary,micro", b"out of order"),
        ("rules,rules", b"named twice"),
        (",", b"no layer named"),
    ):
        r = run_cli("compact", "--layers", value, str(path))
        assert r.returncode == 2, r.stderr
        assert says in r.stderr and b"rules,dedup,micro,summary,tiers" in r.stderr
    r = run_cli("compact", "--layers", "all", "--micro-only", str(path))
    assert r.returncode == 2 and b"leave out --micro-only" in r.stderr
    assert path.read_bytes() == before


def test_layers_not_named_do_not_run(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    source = (SAMPLES / "small-s1.canonical.jsonl").read_bytes()
    path.write_bytes(source)
    r = run_cli("compact", "--force", "--layers", "dedup", "--no-store", str(path))
    assert r.returncode == 0, r.stderr.decode()
    added = _records(path.read_bytes()[len(source) :])
    assert [(d["type"], d.get("mode")) for d in added if isinstance(d, dict)] == [
        ("compact", "dedup")
    ]


def test_one_pass_reads_and_parses_the_file_once(tmp_path: Path) -> None:
    """Audit hooks see every ``open`` of the file (as strace would): one to read, one to
    append; the reader's ``read_transcript`` (what ``Session.open`` parses with) runs once."""
    path = tmp_path / "s.jsonl"
    path.write_bytes((SAMPLES / "small-s1.canonical.jsonl").read_bytes())
    env = {"COMPACTCTL_DB": str(tmp_path / "db.sqlite")}
    argv = ["compact", "--force", "--layers", "all", "--jobs", "1", str(path)]
    line = count_opens(path, *argv, env=env)
    assert line.startswith("EXIT 0 OPENS 2 PARSED 1 "), line
    added = path.read_bytes()[len((SAMPLES / "small-s1.canonical.jsonl").read_bytes()) :]
    assert len(added.splitlines()) == 5  # rules, dedup, micro, summary, tiers


@pytest.mark.parametrize("name", ["claude-stream-compact.jsonl", "codex-rollout-compacted.jsonl"])
def test_an_agents_own_summary_gets_no_tiers_and_fails_nothing(tmp_path: Path, name: str) -> None:
    """A session the agent compacted itself ends with the agent's summary, imported as it is
    (no ``format``: not compactctl's sections): tiers leave it alone and say why, so
    ``--layers all`` (and ``tiers``) exit 0 instead of failing on its text."""
    from tests.helpers import FIXTURES

    source = FIXTURES / "formats" / name
    out = tmp_path / "out.jsonl"
    r = run_cli("compact", "--layers", "all", "--estimate", "--no-store", "--json",
                "-o", str(out), str(source))  # fmt: skip
    assert r.returncode == 0, r.stderr.decode()
    (entry,) = orjson.loads(r.stdout)["files"]
    tiers = next(row for row in entry["byLayer"] if row["layer"] == "tiers")
    assert tiers["events"] == 0
    assert "not in compactctl's format" in tiers["report"]["reason"]
    # the tiers command alone on the canonical form: exit 0, the same reason, nothing written
    canonical = tmp_path / "canonical.jsonl"
    canonical.write_bytes(run_cli("convert", str(source)).stdout)
    before = canonical.read_bytes()
    r = run_cli("tiers", "--no-store", str(canonical))
    assert r.returncode == 0 and b"not in compactctl's format" in r.stderr, r.stderr.decode()
    assert canonical.read_bytes() == before
