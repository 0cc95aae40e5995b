"""`compactctl eval` end to end: tables, --json, gates and exit codes, stdin, folders."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from compactctl.app.report_render import md_text
from compactctl.evaluate.probes import KINDS
from tests.fakes import FakeModel, judge_grades
from tests.helpers import SAMPLES, run_cli
from tests.sessions import nothing_to_report


def _json(*args: str, input: bytes | None = None, cwd: Path | None = None) -> tuple[int, dict]:  # type: ignore[type-arg]
    out = run_cli("eval", "--json", "--estimate", *args, input=input, cwd=cwd)
    return out.returncode, json.loads(out.stdout)


def test_table_for_people(tmp_path: Path):
    out = run_cli("eval", "--estimate", str(nothing_to_report(tmp_path)))
    assert out.returncode == 0, out.stderr
    text = out.stdout.decode()
    assert "probes: 0 of 36 kept, retention 0.00" in text
    assert "line 9  command: python -m pytest tests/test_storage.py -q" in text
    assert "(+16 more; -v lists all, --json too)" in text
    every = run_cli("eval", "--estimate", "-v", str(tmp_path / "nothing.jsonl")).stdout.decode()
    assert "more; -v" not in every and every.count("\n    line ") == 36
    assert out.stderr == b""


def test_json_schema_exactly_as_the_issue_says(tmp_path: Path):
    code, doc = _json(str(nothing_to_report(tmp_path)), str(SAMPLES / "cjk-s3.canonical.jsonl"))
    assert code == 0
    assert list(doc) == ["schemaVersion", "command", "files", "totals"]
    assert (doc["schemaVersion"], doc["command"]) == (1, "eval")
    nothing, cjk = doc["files"]
    issue = ["path", "tokensBefore", "tokensAfter", "ratio", "probes"]  # issue 16's shape
    for f in doc["files"]:
        assert list(f) == ["path", "outcome", "format", "tokenizer", "tokensBefore",
                           "tokensAfter", "tokensSaved", "ratio", "probes", "belowMin"]  # fmt: skip
        assert [k for k in f if k in issue] == issue
        assert (f["format"], f["tokenizer"], f["belowMin"]) == ("canonical", "estimate", [])
        assert f["tokensSaved"] == f["tokensBefore"] - f["tokensAfter"]
        assert list(f["probes"]) == ["total", "kept", "retention", "byKind", "lost"]
        assert list(f["probes"]["byKind"]) == list(KINDS)
        assert all(list(x) == ["kind", "text", "line"] for x in f["probes"]["lost"])
    assert nothing["probes"]["retention"] == 0.0 and len(nothing["probes"]["lost"]) == 36
    assert cjk["probes"] == {**cjk["probes"], "total": 33, "kept": 33, "retention": 1.0,
                             "lost": []}  # fmt: skip
    totals = doc["totals"]
    assert totals["files"] == 2 and totals["failed"] == 0
    assert totals["probes"]["total"] == 69 and totals["probes"]["kept"] == 33
    assert totals["probes"]["retention"] == round(33 / 69, 4)
    assert totals["tokensBefore"] == nothing["tokensBefore"] + cjk["tokensBefore"]
    assert totals["belowMin"] == [] and totals["errors"] == []


def test_min_retention_is_a_ci_gate(tmp_path: Path):
    bad = nothing_to_report(tmp_path)
    out = run_cli("eval", "--estimate", "--min-retention", "0.9", str(bad))
    assert out.returncode == 1
    assert b"below the minimum: retention 0 < 0.9" in out.stderr
    good = str(SAMPLES / "small-s1.canonical.jsonl")
    assert run_cli("eval", "--estimate", "-q", "--min-retention", "0.9", good).returncode == 0
    code, doc = _json("--min", "error=1", "--min", "command=0.5", str(bad), good)
    assert code == 1
    assert doc["totals"]["belowMin"] == [
        {"path": str(bad), "gate": "error retention 0 < 1"},
        {"path": str(bad), "gate": "command retention 0 < 0.5"},
    ]
    assert [f["probes"]["retention"] for f in doc["files"]] == [0.0, 1.0]
    # below a gate, a file was still read and measured: outcome ok, its gates in belowMin
    assert [(f["outcome"], f["belowMin"]) for f in doc["files"]] == [
        ("ok", ["error retention 0 < 1", "command retention 0 < 0.5"]),
        ("ok", []),
    ]
    page = tmp_path / "eval.md"
    assert run_cli("eval", "--estimate", "-q", "--min-retention", "0.9", "--report", str(page),
                   str(bad), good).returncode == 1  # fmt: skip
    rows = [line for line in page.read_text().splitlines() if line.startswith("| ")]
    assert rows[2].startswith(f"| {md_text(str(bad))} | below the minimum: retention 0 \\< 0.9 | ")
    assert rows[3].startswith(f"| {md_text(good)} | ok | ")


def test_usage_and_input_errors(tmp_path: Path):
    good = str(SAMPLES / "small-s1.canonical.jsonl")
    for args in (["--min", "colour=1"], ["--min-retention", "2"], ["--compare", "strategy=x"]):
        out = run_cli("eval", "--estimate", *args, good)
        assert out.returncode == 2, (args, out.stderr)
        assert out.stderr.startswith(b"compactctl: error: "), out.stderr
        assert out.stdout == b""
    junk = tmp_path / "junk.jsonl"
    junk.write_bytes(b"\x00\x01 not a transcript\n")
    out = run_cli("eval", "--estimate", str(junk), good)
    assert out.returncode == 3
    assert b"junk.jsonl" in out.stderr
    assert b"small-s1.canonical.jsonl  [canonical]" in out.stdout  # the other file was done
    missing = run_cli("eval", "--estimate", str(tmp_path / "nope.jsonl"))
    assert missing.returncode == 3


def test_stdin_and_folders(tmp_path: Path):
    data = (SAMPLES / "small-s1.claude-code.jsonl").read_bytes()
    code, doc = _json("-", input=data)
    assert code == 0
    (entry,) = doc["files"]
    assert entry["path"] == "-" and entry["probes"]["total"] == 39
    folder = tmp_path / "sessions" / "nested"
    folder.mkdir(parents=True)
    for name in ("small-s1.canonical.jsonl", "cjk-s3.canonical.jsonl"):
        (folder / name).write_bytes((SAMPLES / name).read_bytes())
    code, doc = _json("--jobs", "2", str(tmp_path / "sessions"))
    assert code == 0
    assert sorted(Path(f["path"]).name for f in doc["files"]) == [
        "cjk-s3.canonical.jsonl",
        "small-s1.canonical.jsonl",
    ]
    assert doc["totals"]["probes"]["total"] == 36 + 33


def test_a_pipe_from_compact(tmp_path: Path):
    data = (SAMPLES / "cjk-s3.canonical.jsonl").read_bytes()
    compacted = run_cli("compact", "--force", "--estimate", "-q", "-", input=data)
    assert compacted.returncode == 0
    code, doc = _json("-", input=compacted.stdout)
    (entry,) = doc["files"]
    assert entry["probes"]["total"] == 33 and entry["probes"]["retention"] == 1.0
    assert entry["tokensAfter"] < entry["tokensBefore"]


def test_judge_through_the_cli(tmp_path: Path, monkeypatch):
    from typer.testing import CliRunner

    from compactctl.cli import app

    # two runs of 8 calls
    model = FakeModel(monkeypatch, *["an answer", judge_grades(accuracy=5)] * 8)
    path = str(SAMPLES / "small-s1.canonical.jsonl")
    r = CliRunner().invoke(app, ["eval", "--estimate", "--json", "--judge", "openai/gpt-4o-mini",
                                 "--jobs", "1", path])  # fmt: skip
    assert r.exit_code == 0, r.stderr
    (entry,) = json.loads(r.stdout)["files"]
    assert entry["judge"]["scores"]["accuracy"] == 5.0
    assert entry["judge"]["scores"]["continuity"] == 3.0
    assert json.loads(r.stdout)["totals"]["judge"]["accuracy"] == 5.0
    assert len(model.calls) == 8
    table = CliRunner().invoke(app, ["eval", "--estimate", "--judge", "openai/gpt-4o-mini", path])
    assert "judge openai/gpt-4o-mini (answers: openai/gpt-4o-mini)" in table.stdout
    assert table.stdout.count("accuracy") == 1 and len(model.calls) == 16


def test_a_failed_judge_keeps_the_probe_results_and_exits_3(tmp_path: Path, monkeypatch):
    import litellm
    from typer.testing import CliRunner

    from compactctl.cli import app

    boom = litellm.InternalServerError("boom", llm_provider="openai", model="gpt-4o-mini")
    FakeModel(monkeypatch, default=boom)
    path = str(SAMPLES / "small-s1.canonical.jsonl")
    args = ["eval", "--estimate", "--judge", "openai/gpt-4o-mini", "--jobs", "1"]
    r = CliRunner().invoke(app, [*args, "--json", path, str(SAMPLES / "cjk-s3.canonical.jsonl")])
    assert r.exit_code == 3, r.stderr
    doc = json.loads(r.stdout)
    small, cjk = doc["files"]
    assert small["outcome"] == "ok" and small["probes"]["total"] == 36
    assert small["probes"]["retention"] == 1.0 and cjk["probes"]["total"] == 33
    assert small["judge"]["error"]["exitCode"] == 3
    assert small["judge"]["error"]["message"].startswith(
        "--judge model openai/gpt-4o-mini failed: InternalServerError"
    )
    assert doc["totals"]["failed"] == 0 and doc["totals"]["probes"]["total"] == 69
    assert "judge" not in doc["totals"]  # no grades to average
    assert f"compactctl: {path}: judge failed (the probe results stand): --judge" in r.stderr
    # the table says it; a gate that fails still exits 3: the judge's failure ranks higher
    nothing = str(nothing_to_report(tmp_path))
    table = CliRunner().invoke(app, [*args, "--min-retention", "1", path, nothing])
    assert table.exit_code == 3
    assert "1 file below the minimum, 1 passed, 2 with the judge failed." in table.stderr
    assert "judge openai/gpt-4o-mini (answers: openai/gpt-4o-mini) failed: --judge" in (
        table.stdout
    )
    assert "probes: 36 of 36 kept, retention 1.00" in table.stdout
    assert f"compactctl: {nothing}: below the minimum: retention 0 < 1" in table.stderr
    # so does --json, whose totals still name the file below the gate (the README says so)
    r = CliRunner().invoke(app, [*args, "--min-retention", "1", "--json", path, nothing])
    assert r.exit_code == 3
    totals = json.loads(r.stdout)["totals"]
    assert totals["belowMin"] == [{"path": nothing, "gate": "retention 0 < 1"}]
    assert (totals["failed"], totals["changed"]) == (0, 1)
    # a configuration problem (no key) is exit 2, and the probe results still stand
    auth = litellm.AuthenticationError("no key", llm_provider="openai", model="gpt-4o-mini")
    FakeModel(monkeypatch, default=auth)
    r = CliRunner().invoke(app, [*args, "--json", path])
    assert r.exit_code == 2
    (entry,) = json.loads(r.stdout)["files"]
    assert entry["judge"]["error"]["code"] == "usage" and entry["probes"]["total"] == 36


def test_after_compact_and_against_a_materialized_output(tmp_path: Path):
    src = tmp_path / "s.jsonl"
    src.write_bytes((SAMPLES / "small-s1.canonical.jsonl").read_bytes())
    ctx = tmp_path / "ctx.jsonl"
    args = ["compact", "--force", "--estimate", "-q"]
    assert run_cli(*args, "--materialize", "-o", str(ctx), str(src)).returncode == 0
    assert run_cli(*args, str(src)).returncode == 0
    _, log = _json(str(src))
    _, against = _json("--against", str(src), str(ctx))
    (a,), (b,) = log["files"], against["files"]
    assert a["probes"] == b["probes"]
    # the materialized summary is framed for the resuming agent: the only difference
    from compactctl.io.files import read
    from compactctl.model import Message, SummaryEvent
    from compactctl.tokens import TokenCounter, message_payload

    (summary,) = [e for e in read(str(src)) if isinstance(e, SummaryEvent)]
    (framed,) = [e for e in read(str(ctx)) if isinstance(e, Message) and "summaryOf" in e.data]
    est = TokenCounter("estimate")
    frame = est.count(message_payload(framed.data)) - est.count(
        message_payload({**framed.data, "content": summary.summary_text})
    )
    assert (a["tokensBefore"], a["tokensAfter"] + frame) == (b["tokensBefore"], b["tokensAfter"])
    assert a["tokensAfter"] < a["tokensBefore"] // 2 and a["probes"]["retention"] == 1.0
    # without --against, the effective context would be its own original: refused (exit 3)
    r = run_cli("eval", "--estimate", "--min-retention", "0.9", str(ctx))
    assert r.returncode == 3 and r.stdout == b""
    assert b"an effective context, not a log" in r.stderr and b"--against ORIGINAL" in r.stderr


def test_cjk_punctuation_the_rules_layer_rewrote_is_still_the_same_text(tmp_path: Path):
    """The review's repro: ``compact --layers all`` (no summary written) on cjk-s3, whose
    ``rules`` layer writes the user's ，。：（） as ,.:(); before, eval lost the first and
    the latest request and the 3 user constraints (retention 0.85)."""
    src = tmp_path / "s.jsonl"
    src.write_bytes((SAMPLES / "cjk-s3.canonical.jsonl").read_bytes())
    done = run_cli("compact", "--layers", "all", "--estimate", "--no-store", str(src))
    assert done.returncode == 0, done.stderr
    assert b"appended rules -" in done.stderr and b"summary unchanged" in done.stderr
    code, doc = _json(str(src))
    (entry,) = doc["files"]
    assert code == 0 and entry["tokensAfter"] < entry["tokensBefore"]
    by_kind = entry["probes"]["byKind"]
    for kind in ("first_request", "latest_request", "user_constraint"):
        assert by_kind[kind]["kept"] == by_kind[kind]["total"] > 0, kind
    assert (entry["probes"]["total"], entry["probes"]["retention"]) == (33, 1.0)
    assert entry["probes"]["lost"] == []


def test_against_another_sessions_transcript_is_refused(tmp_path: Path):
    """The review's repro: ``--against`` cjk-s3 for an output made from small-s1 exited 0
    with retention 0.09. Both record a session id (a materialized output keeps its
    input's session event), and they differ: refused, naming both files."""
    src = tmp_path / "s1.jsonl"
    src.write_bytes((SAMPLES / "small-s1.canonical.jsonl").read_bytes())
    _materialize("X.ctx.jsonl", "s1.jsonl", cwd=tmp_path)
    other = str(SAMPLES / "cjk-s3.canonical.jsonl")
    r = run_cli("eval", "--estimate", "--against", other, "X.ctx.jsonl", cwd=tmp_path)
    assert r.returncode == 3 and r.stdout == b""
    assert r.stderr.decode() == (
        f"compactctl: X.ctx.jsonl: --against {other} is another session (session id "
        "ea7b5bf5-5eb5-41a4-a163-63698b529b4a; X.ctx.jsonl records "
        "1027c4d1-c386-4bc4-8d61-3e30d8f16adf): its probes would be looked for in another "
        "session's context, which measures nothing; pass --against the transcript "
        "X.ctx.jsonl was made from (its session event has sessionId "
        "1027c4d1-c386-4bc4-8d61-3e30d8f16adf)\n"
    )
    code, doc = _json("--against", "s1.jsonl", "X.ctx.jsonl", cwd=tmp_path)
    assert code == 0 and doc["files"][0]["probes"]["retention"] == 1.0
    # an original that records no session id (an OpenAI messages array) is taken as given
    lines = [json.loads(line) for line in src.read_text().splitlines()]
    said = [{"role": d["role"], "content": d["content"]} for d in lines
            if d["type"] == "message" and d["role"] in ("system", "user")]  # fmt: skip
    (tmp_path / "s1.openai.json").write_text(json.dumps(said))
    code, doc = _json("--against", "s1.openai.json", "X.ctx.jsonl", cwd=tmp_path)
    assert code == 0 and doc["files"][0]["probes"]["total"] > 0


def test_compare_side_by_side():
    out = run_cli("eval", "--estimate", "--compare", "default",
                  "--compare", "strategy=full_replace,max_summary_chars=4000",
                  str(SAMPLES / "small-s1.canonical.jsonl"))  # fmt: skip
    assert out.returncode == 0, out.stderr
    text = out.stdout.decode()
    lines = [line.split() for line in text.splitlines()]
    rows = {cells[0]: cells for cells in lines if cells and "=" in cells[0]}
    assert "strategy=full_replace,max_summary_chars=4000" in rows
    assert (
        rows["strategy=full_replace,max_summary_chars=1200"][3] == "0.81"
    )  # retention (29 of 36: a 1,200-char budget drops errors)
    code, doc = _json("--compare", "strategy=keep_recent", str(SAMPLES / "cjk-s3.canonical.jsonl"))
    (entry,) = doc["files"]
    assert [r["config"] for r in entry["compare"]] == ["as is", "strategy=keep_recent"]


def test_help_has_examples_and_no_litellm():
    out = run_cli("eval", "--help")
    assert out.returncode == 0
    text = out.stdout.decode()
    for option in ("--against", "--min-retention", "--min", "--judge", "--compare", "--json"):
        assert option in text
    assert "Examples:" in text and "compactctl eval --min-retention 0.9" in text


def test_lines_that_hold_no_event_are_named_on_stderr(tmp_path: Path):
    """A malformed line and a torn last line are skipped by eval as by replay (a probe in
    them is neither counted nor checked): eval says so, naming the file and the lines,
    and still evaluates the rest (exit 0)."""
    path = tmp_path / "m.jsonl"
    path.write_bytes((SAMPLES / "messy-s2.canonical.jsonl").read_bytes())
    done = run_cli("eval", "--json", str(path))
    assert done.returncode == 0
    assert (
        f"compactctl: warning: {path}: 2 lines skipped, not read as part of the conversation: "
        "line 34 (malformed JSON), line 61 (torn: the last line has no newline); inspect "
        "lists them"
    ) in done.stderr.decode()
    assert json.loads(done.stdout)["files"][0]["probes"]["retention"] == 1.0
    clean = run_cli("eval", str(SAMPLES / "small-s1.canonical.jsonl"))
    assert clean.returncode == 0 and b"skipped" not in clean.stderr


def _materialize(out: str, *inputs: str, cwd: Path, more: tuple[str, ...] = ()) -> None:
    args = ("compact", "--force", "--estimate", "-q", *more, "--materialize", "-o", out)
    done = run_cli(*args, *inputs, cwd=cwd)
    assert done.returncode == 0, done.stderr


def _originals(doc: dict) -> list[tuple[str, str, int]]:  # type: ignore[type-arg]
    return [(f["path"], f["against"], f["tokensBefore"]) for f in doc["files"]]


def test_against_a_folder_pairs_each_file_as_o_dir_named_it(tmp_path: Path):
    """``-o DIR/`` mirrors subfolders, so ``in/a/s.jsonl`` and ``in/b/s.jsonl`` are written
    to ``out/a/s.jsonl`` and ``out/b/s.jsonl``: each is measured against its own input,
    by the record ``-o DIR/`` keeps, and by its path when there is no record."""
    for sub, sample in (("a", "small-s1"), ("b", "cjk-s3")):
        (tmp_path / "in" / sub).mkdir(parents=True)
        (tmp_path / "in" / sub / "s.jsonl").write_bytes(
            (SAMPLES / f"{sample}.canonical.jsonl").read_bytes()
        )
    _materialize("out/", "in", cwd=tmp_path)
    alone = {s: _json(str(tmp_path / "in" / s / "s.jsonl"))[1]["files"][0] for s in "ab"}
    code, doc = _json("--against", "in", "out", "--jobs", "1", cwd=tmp_path)
    assert code == 0
    assert _originals(doc) == [
        ("out/a/s.jsonl", "in/a/s.jsonl", alone["a"]["tokensBefore"]),
        ("out/b/s.jsonl", "in/b/s.jsonl", alone["b"]["tokensBefore"]),
    ]
    assert [f["probes"]["total"] for f in doc["files"]] == [36, 33]
    shutil.rmtree(tmp_path / "out" / ".compactctl")  # no record: the mirrored path decides
    code, again = _json("--against", "in", "out", cwd=tmp_path)
    assert code == 0 and _originals(again) == _originals(doc)
    # a file named by itself, whose name two inputs share: refused, naming both
    named = run_cli("eval", "--estimate", "--against", "in", "out/b/s.jsonl", cwd=tmp_path)
    assert named.returncode == 3 and named.stdout == b""
    assert named.stderr.decode() == (
        "compactctl: out/b/s.jsonl: --against in: 2 transcripts there could be its original, "
        "in/a/s.jsonl and in/b/s.jsonl; pass --against the original file itself\n"
    )


def test_against_never_pairs_a_file_with_itself(tmp_path: Path):
    """The review's repro: the output folder inside the input folder. Before, ``eval
    --against sess sess/compacted`` took ``sess/compacted/s.jsonl`` as its own original
    (ratio 1.00, retention 1.00)."""
    (tmp_path / "sess").mkdir()
    (tmp_path / "sess" / "s.jsonl").write_bytes((SAMPLES / "small-s1.canonical.jsonl").read_bytes())
    _materialize("sess/compacted/", "sess/s.jsonl", cwd=tmp_path)
    _, log = _json("sess/s.jsonl", cwd=tmp_path)
    for record in (True, False):
        if not record:
            shutil.rmtree(tmp_path / "sess" / "compacted" / ".compactctl")
        code, doc = _json("--against", "sess", "sess/compacted", cwd=tmp_path)
        (entry,) = doc["files"]
        assert code == 0 and entry["against"] == "sess/s.jsonl"
        assert entry["tokensBefore"] == log["files"][0]["tokensBefore"]
        assert entry["ratio"] < 0.5
    itself = run_cli("eval", "--estimate", "--against", "sess/compacted/s.jsonl",
                     "sess/compacted/s.jsonl", cwd=tmp_path)  # fmt: skip
    assert itself.returncode == 3
    assert b"is the file evaluated itself: pass the transcript it was made from" in itself.stderr


def test_against_stdin_once(tmp_path: Path):
    """``--against -`` reads stdin once: with two PATHS (a pool worker, or the second file,
    found it empty) or with ``-`` among PATHS (which reads it first), the original was empty
    and every probe "kept" (retention 1.00, exit 0). Now a usage error; an original with no
    messages is an error naming it."""
    original = (SAMPLES / "small-s1.canonical.jsonl").read_bytes()
    ctx = tmp_path / "ctx.jsonl"
    _materialize(str(ctx), str(SAMPLES / "small-s1.canonical.jsonl"), cwd=tmp_path)
    shutil.copy(ctx, tmp_path / "ctx2.jsonl")
    for paths, what in (([str(ctx), str(tmp_path / "ctx2.jsonl")], "2 files"),
                        (["-"], "- among PATHS too")):  # fmt: skip
        out = run_cli("eval", "--estimate", "--against", "-", *paths, input=original)
        assert out.returncode == 2 and out.stdout == b""
        assert out.stderr.decode() == (
            f"compactctl: error: --against - reads the original from stdin, once, and this "
            f"run has {what}; give one PATH that is a file, or pass --against the original's "
            "path\n"
        )
    code, doc = _json("--against", "-", str(ctx), input=original)
    (entry,) = doc["files"]
    assert code == 0 and entry["against"] == "-" and entry["probes"]["total"] == 36
    assert entry["tokensBefore"] > entry["tokensAfter"]
    empty = run_cli("eval", "--estimate", "--against", "-", str(ctx), input=b"")
    assert empty.returncode == 3
    said = empty.stderr.decode().splitlines()
    assert said[0].startswith("compactctl: warning: -: standard input is empty")
    assert said[1].startswith(
        f"compactctl: {ctx}: --against -: the original has no messages, so there is nothing "
        "to measure against"
    )


def test_a_materialized_output_without_a_summary_is_refused(tmp_path: Path):
    """Micro compaction alone leaves no summary message: its materialized output was scored
    against itself (38 of 38, ratio 1.00). Its elision markers, which compactctl alone
    writes in place of text, give it away; so does the record of ``-o DIR/`` (a rules
    output holds no marker)."""
    sample = str(SAMPLES / "small-s1.canonical.jsonl")
    _materialize("m2/", sample, cwd=tmp_path, more=("--micro-only",))
    ctx = "m2/small-s1.canonical.jsonl"
    out = run_cli("eval", "--estimate", ctx, cwd=tmp_path)
    assert out.returncode == 3 and out.stdout == b""
    message = out.stderr.decode()
    assert message.startswith(f"compactctl: {ctx}: an effective context, not a log: line ")
    assert " chars elided, " in message and "pass --against ORIGINAL, the transcript" in message
    code, doc = _json("--against", sample, ctx, cwd=tmp_path)
    (entry,) = doc["files"]
    assert code == 0 and entry["ratio"] < 0.8 and entry["against"] == sample
    rules = run_cli("rules", "-q", "--materialize", "-o", "r/", sample, cwd=tmp_path)
    assert rules.returncode == 0
    out = run_cli("eval", "--estimate", "r/small-s1.canonical.jsonl", cwd=tmp_path)
    assert out.returncode == 3
    assert (
        "an effective context, not a log: its record "
        f"{tmp_path / 'r' / '.compactctl' / 'small-s1.canonical.jsonl.json'} says -o "
        f"--materialize wrote it from {sample};"
    ) in out.stderr.decode()
    assert f"pass --against ORIGINAL ({sample}, if it still" in out.stderr.decode()


def test_compare_with_against_measures_against_the_original(tmp_path: Path):
    """``--compare`` took the PATH's own messages as the base: its ``as is`` row said ratio
    1.00 below a report that said 0.31."""
    sample = str(SAMPLES / "small-s1.canonical.jsonl")
    _materialize("ctx.jsonl", sample, cwd=tmp_path)
    code, doc = _json("--against", sample, "--compare", "micro_only=true", "ctx.jsonl",
                      cwd=tmp_path)  # fmt: skip
    (entry,) = doc["files"]
    as_is, micro = entry["compare"]
    assert code == 0 and entry["ratio"] < 0.5
    assert (as_is["tokensAfter"], as_is["ratio"]) == (entry["tokensAfter"], entry["ratio"])
    assert as_is["probes"] == {k: v for k, v in entry["probes"].items() if k != "lost"}
    assert micro["ratio"] == round(micro["tokensAfter"] / entry["tokensBefore"], 4)
