"""The one ``--json`` report schema (docs/report.schema.json): real reports of every command
validate against it, totals add up, failures are entries of the document, and with stdin
input the report on stderr is one JSON document (``2>report.json; jq``)."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path
from typing import Any

import jsonschema
import orjson
import pytest

from compactctl.app.report import JsonReport, Report
from compactctl.errors import InputError
from tests.helpers import ROOT, SAMPLES, run_cli

SCHEMA = json.loads((ROOT / "docs" / "report.schema.json").read_text())
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)
S1 = SAMPLES / "small-s1.canonical.jsonl"
CLAUDE = SAMPLES / "small-s1.claude-code.jsonl"


def valid(doc: dict[str, Any]) -> dict[str, Any]:
    """``doc``, after checking it against the schema (every error listed on failure)."""
    errors = [f"{list(e.absolute_path)}: {e.message}" for e in VALIDATOR.iter_errors(doc)]
    assert not errors, errors
    return doc


def sums_match(doc: dict[str, Any]) -> None:
    """totals: files by outcome and the token counts summed over the files that have them."""
    files, t = doc["files"], doc["totals"]
    assert t["files"] == len(files)
    for outcome in ("failed", "skipped"):
        assert t[outcome] == sum(f["outcome"] == outcome for f in files)
    if doc["command"] not in ("inspect", "eval"):  # one vocabulary: totals count outcomes
        for outcome in ("changed", "unchanged"):
            assert t[outcome] == sum(f["outcome"] == outcome for f in files), outcome
        assert t["upToDate"] == sum(bool(f.get("upToDate")) for f in files)
    assert t["changed"] + t["unchanged"] + t["failed"] + t["skipped"] == t["files"]
    would = [f["tokensWouldSave"] for f in files if "tokensWouldSave" in f]
    assert t.get("tokensWouldSave") == (sum(would) if would else None)
    assert t["errors"] == [{"path": f["path"], **f["error"]} for f in files if "error" in f]
    for key in ("tokensBefore", "tokensAfter", "tokensSaved"):
        have = [f[key] for f in files if key in f]
        if doc["command"] != "inspect":
            assert t[key] == (sum(have) if have else None), key


@pytest.fixture()
def tree(tmp_path: Path) -> Path:
    for name in ("a", "b"):
        shutil.copy(S1, tmp_path / f"{name}.jsonl")
    shutil.copy(CLAUDE, tmp_path / "claude.jsonl")
    return tmp_path


def json_run(*args: str, cwd: Path, code: int) -> dict[str, Any]:
    r = run_cli(*args, "--json", cwd=cwd)
    assert r.returncode == code, r.stderr.decode()
    doc = orjson.loads(r.stdout)
    sums_match(valid(doc))
    return doc


def test_every_command_reports_in_the_schema(tree: Path) -> None:
    ins = ["a.jsonl", "b.jsonl", "claude.jsonl", "missing.jsonl"]
    doc = json_run("compact", "--force", "--estimate", *ins, cwd=tree, code=3)
    assert [f["outcome"] for f in doc["files"]] == ["failed", "changed", "changed", "failed"]
    missing, a, _, claude = doc["files"]
    assert missing["error"] == {"code": "input", "exitCode": 3, "message": "no such file or folder"}
    assert claude["error"]["message"].startswith("is a claude-code transcript")
    assert a["tokensSaved"] == a["tokensBefore"] - a["tokensAfter"] > 0
    assert doc["totals"]["tokensSaved"] == 2 * a["tokensSaved"]
    again = json_run("compact", "--force", "--estimate", "a.jsonl", cwd=tree, code=0)
    assert again["files"][0]["outcome"] == "unchanged"
    assert again["files"][0]["tokensSaved"] == 0

    rules = json_run("rules", "--dry-run", "a.jsonl", "b.jsonl", cwd=tree, code=0)
    assert rules["totals"]["tokensBefore"] is None  # rules counts its savings only
    assert rules["totals"]["tokensSaved"] == 0  # a dry run lands nothing
    assert rules["totals"]["tokensWouldSave"] == 2 * rules["files"][0]["tokensWouldSave"] > 0
    dedup = json_run("dedup", "a.jsonl", cwd=tree, code=0)
    assert dedup["files"][0]["outcome"] == "unchanged" and "tokensBefore" not in dedup["files"][0]
    tiers = json_run("tiers", "a.jsonl", cwd=tree, code=0)
    t = tiers["files"][0]
    assert t["outcome"] == "changed" and t["tokensSaved"] == t["tokensBefore"] - t["tokensAfter"]
    conv = json_run("convert", "-o", "out/", "claude.jsonl", "a.jsonl", cwd=tree, code=0)
    assert [f["format"] for f in conv["files"]] == ["claude-code", "canonical"]
    assert conv["totals"]["tokensSaved"] is None
    insp = json_run("inspect", "--estimate", "a.jsonl", "missing.jsonl", cwd=tree, code=3)
    gone, a_insp = insp["files"]  # a missing path is found first, before any file is read
    assert (gone["path"], gone["outcome"], a_insp["outcome"]) == ("missing.jsonl", "failed", "ok")
    assert insp["totals"]["tokensBefore"] == a_insp["tokens"]
    assert insp["totals"]["tokensAfter"] == a_insp["effectiveTokens"] < a_insp["tokens"]
    undo = json_run("undo", "--estimate", "a.jsonl", cwd=tree, code=0)
    u = undo["files"][0]  # takes back tiers' run: the whole summary shown again
    assert u["outcome"] == "changed" and u["tokensSaved"] == u["tokensBefore"] - u["tokensAfter"]
    layers = json_run(
        "compact", "--force", "--layers", "all", "--estimate", "b.jsonl", cwd=tree, code=0
    )
    rows = layers["files"][0]["byLayer"]
    assert [r["layer"] for r in rows] == ["rules", "dedup", "micro", "summary", "tiers"]
    assert layers["totals"]["tokensSaved"] == sum(r["tokensSaved"] for r in rows)
    ev = json_run("eval", "--estimate", "a.jsonl", cwd=tree, code=0)
    e = ev["files"][0]
    assert e["outcome"] == "ok" and e["tokensSaved"] == e["tokensBefore"] - e["tokensAfter"] > 0
    assert ev["totals"]["probes"]["retention"] == e["probes"]["retention"]
    assert (e["format"], e["tokenizer"], e["belowMin"]) == ("canonical", "estimate", [])
    # --against, and a file below a gate: outcome ok (it was read), the gate in belowMin
    assert run_cli("compact", "--force", "--estimate", "-q", "--strategy", "full_replace",
                   "--max-summary-chars", "1200", "--materialize", "-o", "ctx.jsonl", str(S1),
                   cwd=tree).returncode == 0  # fmt: skip
    ev = json_run("eval", "--estimate", "--min-retention", "0.9", "--against", str(S1),
                  "ctx.jsonl", cwd=tree, code=1)  # fmt: skip
    (e,) = ev["files"]
    assert (e["outcome"], e["against"]) == ("ok", str(S1))
    assert (
        e["belowMin"]
        == [g["gate"] for g in ev["totals"]["belowMin"]]
        == [
            "retention 0.8056 < 0.9"  # 29 of 36: the 1,200-char summary drops errors
        ]
    )
    assert ev["totals"]["changed"] == 1


@pytest.mark.parametrize("command", [("rules",), ("dedup",), ("compact", "--force"), ("tiers",)])
def test_a_run_that_writes_nothing_saves_nothing(tree: Path, command: tuple[str, ...]) -> None:
    """``tokensSaved`` counts only what landed: a ``--dry-run`` (its saving is
    ``tokensWouldSave``) and a re-run whose ``-o DIR/`` outputs are up to date save 0; an
    up-to-date file's outcome is ``unchanged`` and ``totals.unchanged`` counts it."""
    estimate = () if command[0] == "tiers" else ("--estimate",)
    args = (*command, *estimate, "--no-store", "a.jsonl", "b.jsonl")
    if command[0] == "tiers":  # tiers needs a summary to tier
        assert run_cli("compact", "--force", "--estimate", "--no-store", "-q", "a.jsonl",
                       "b.jsonl", cwd=tree).returncode == 0  # fmt: skip
    dry = json_run(*args, "--dry-run", cwd=tree, code=0)
    written = json_run(*args, "-o", "out/", cwd=tree, code=0)
    again = json_run(*args, "-o", "out/", cwd=tree, code=0)
    saved = [f.get("tokensSaved") for f in written["files"]]
    assert [f.get("tokensWouldSave") for f in dry["files"]] == saved
    assert [f.get("tokensSaved") for f in dry["files"]] == [0 if s is not None else None
                                                            for s in saved]  # fmt: skip
    assert dry["totals"]["tokensSaved"] == (0 if saved[0] is not None else None)
    assert [f["outcome"] for f in again["files"]] == ["unchanged", "unchanged"]
    assert [f["upToDate"] for f in again["files"]] == [True, True]
    t = again["totals"]
    assert (t["changed"], t["unchanged"], t["upToDate"]) == (0, 2, 2)
    assert t["tokensSaved"] == (0 if saved[0] is not None else None)
    assert "tokensWouldSave" not in t
    for d, w in zip(dry["files"], written["files"], strict=True):  # before and after alike
        if "tokensBefore" in w:
            assert d["tokensBefore"] == d["tokensAfter"] == w["tokensBefore"]
    for u, w in zip(again["files"], written["files"], strict=True):
        if "tokensAfter" in w:
            assert u["tokensBefore"] == u["tokensAfter"] == w["tokensAfter"]
    if command[0] != "tiers":
        assert written["totals"]["tokensSaved"] > 0


def test_stdin_report_on_stderr_is_one_json_document(tmp_path: Path) -> None:
    """stdout carries the transcript, so the report goes to stderr: a failure, and a
    warning, are inside it, never loose lines beside it."""
    bad = run_cli("compact", "--force", "--json", "-", input=b'{"type":"message"\n')
    assert bad.returncode == 3 and bad.stdout == b""
    doc = valid(orjson.loads(bad.stderr))
    (f,) = doc["files"]
    assert f["path"] == "-" and f["outcome"] == "failed"
    assert f["error"]["message"].startswith("not a JSON lines transcript")
    # an unknown model: the 128,000-token warning goes into the document
    records = [orjson.loads(x) for x in S1.read_bytes().splitlines()]
    records[0]["model"] = "mystery-model-7"
    del records[0]["contextWindow"]
    data = b"".join(orjson.dumps(r) + b"\n" for r in records)
    ok = run_cli("compact", "--force", "--json", "--estimate", "-", input=data)
    assert ok.returncode == 0, ok.stderr.decode()
    assert ok.stdout.startswith(data)  # the transcript, then the new events
    doc = valid(orjson.loads(ok.stderr))
    assert any("a context window of 128,000 tokens" in w for w in doc["warnings"]), doc.get(
        "warnings"
    )
    assert doc["files"][0]["outcome"] == "changed"


@pytest.mark.parametrize("jobs", ["1", "2"])
@pytest.mark.parametrize("command", ["inspect", "compact"])
def test_each_file_entry_has_its_own_warnings(tmp_path: Path, command: str, jobs: str) -> None:
    """The context-window warning is said on stderr once per run and process, for the first
    file; every file it is true of has it in its entry's ``warnings`` (it was only on
    stderr), as compact has a file's skipped lines; a file without one has no ``warnings``."""
    records = [orjson.loads(x) for x in S1.read_bytes().splitlines()]
    records[0]["model"] = "mystery-model-7"
    del records[0]["contextWindow"]
    for name in ("a", "b", "c"):
        (tmp_path / f"{name}.jsonl").write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
    shutil.copy(SAMPLES / "messy-s2.claude-code.jsonl", tmp_path / "d.jsonl")  # 2 bad lines
    shutil.copy(S1, tmp_path / "e.jsonl")  # its model's window is known
    out = ["-o", "out/"] if command == "compact" else []
    r = run_cli(command, "--estimate", "--json", "--jobs", jobs, *out, ".", cwd=tmp_path)
    assert r.returncode == 0, r.stderr.decode()
    doc = valid(orjson.loads(r.stdout))
    said = {f["path"]: f.get("warnings") for f in doc["files"]}
    window = (
        "model 'mystery-model-7' has no known context window: assuming a context window of "
        "128,000 tokens (pass --context-window N to set it)"
    )
    for name in ("a", "b", "c"):
        assert said[f"{name}.jsonl"] == [f"{name}.jsonl: {window}"]
    assert said["e.jsonl"] is None
    if command == "compact":
        assert (said["d.jsonl"] or [])[0] == (
            "d.jsonl: 2 lines skipped, not read as part of the conversation: line 55 "
            "(malformed JSON), line 94 (torn: the last line has no newline); inspect lists them"
        )
    else:  # inspect lists them as findings, no warning
        assert said["d.jsonl"] is None
    stderr = r.stderr.decode()
    if jobs == "1":  # stderr as before: the first file only
        assert stderr.count(window) == 1 and f"a.jsonl: {window}" in stderr


def test_events_with_the_report_on_stderr_is_refused() -> None:
    r = run_cli("compact", "--json", "--events", "-", input=S1.read_bytes())
    assert r.returncode == 2 and r.stdout == b""
    assert b"--events and --json would share stderr" in r.stderr


def test_skipped_and_failed_entries(capsys: pytest.CaptureFixture[str]) -> None:
    """The entries of the outcomes no fixture run produces here: a skip (left alone on
    purpose) and a failure with a line number."""
    buf = io.BytesIO()

    class Out:
        buffer = buf

        def flush(self) -> None:
            pass

    doc = JsonReport(command="compact")
    doc.stream = Out()  # type: ignore[assignment]
    report = Report(doc=doc)
    report.skipped("old/s.jsonl.gz", "gzip in place: use -o DIR/")
    report.failed("bad.jsonl", InputError("bad JSON", path="bad.jsonl", line=7))
    report.done({"path": "a.jsonl", "changed": True, "tokensBefore": 9, "tokensAfter": 4,
                 "tokensSaved": 5}, changed=True)  # fmt: skip
    doc.close(report.totals())
    out = valid(orjson.loads(buf.getvalue()))
    sums_match(out)
    assert out["files"][0] == {
        "path": "old/s.jsonl.gz",
        "outcome": "skipped",
        "reason": "gzip in place: use -o DIR/",
    }
    assert out["files"][1]["error"] == {
        "code": "input", "exitCode": 3, "message": "bad JSON", "line": 7
    }  # fmt: skip
    assert out["totals"]["skipped"] == 1 and out["totals"]["files"] == 3
    assert report.summary("compacted") == "1 file compacted, 1 skipped, 1 failed."
    # the schema is not a rubber stamp: the old vocabulary and a failure without an error fail
    for broken in (
        {**out["files"][2], "released": 5},
        {**out["files"][2], "promptEstimate": 4},
        {"path": "x", "outcome": "failed"},
        {"path": "x", "outcome": "skipped"},
        {"path": "x", "outcome": "done"},
    ):
        assert list(VALIDATOR.iter_errors({**out, "files": [broken]})), broken
    assert capsys.readouterr().err == ""
