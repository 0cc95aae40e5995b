"""`compactctl compact` end to end: probes kept on every sample, triggers, --check,
--min-saving, stdin to stdout, --materialize and --events."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import orjson
import pytest

from compactctl.io.files import read
from compactctl.model import SummaryEvent
from compactctl.replay import replay
from compactctl.summarize.summary_format import validate_sections
from tests.helpers import SAMPLES, broken_blocks, context_text, run_cli
from tests.sessions import probes

SAMPLE_NAMES = ["small-s1", "messy-s2", "cjk-s3"]


@pytest.mark.parametrize("name", SAMPLE_NAMES)
def test_compact_force_on_each_sample_keeps_probes(tmp_path: Path, name: str):
    path = tmp_path / f"{name}.jsonl"
    original = (SAMPLES / f"{name}.canonical.jsonl").read_bytes()
    path.write_bytes(original)
    r = run_cli("compact", "--force", "--json", str(path))
    assert r.returncode == 0, r.stderr.decode()
    doc = orjson.loads(r.stdout)
    (f,) = doc["files"]
    assert f["changed"] is True and f["summary"]["model"] == "extractive"
    assert f["tokensSaved"] == f["tokensBefore"] - f["tokensAfter"] > 0
    data = path.read_bytes()
    assert data.startswith(original)  # nothing already in the file changed
    events = list(read(str(path)))
    summaries = [e for e in events if isinstance(e, SummaryEvent)]
    assert len(summaries) == 1
    validate_sections(summaries[0].summary_text)
    assert summaries[0].data["triggerMode"] == "manual"
    assert summaries[0].data["stats"]["tokensAfter"] == f["tokensAfter"]
    view = replay(events)
    assert broken_blocks(view) == []
    text = context_text(view)
    ps = probes(name)
    missing = [p for p in ps if p["text"].lower() not in text]
    ledger_missing = [p for p in missing if p["kind"] in {"file_path", "command", "error"}]
    assert ledger_missing == []
    assert len(missing) <= 0.1 * len(ps), missing
    # the second identical run appends nothing
    r2 = run_cli("compact", "--force", "--json", str(path))
    assert r2.returncode == 0
    assert orjson.loads(r2.stdout)["files"][0]["changed"] is False
    assert path.read_bytes() == data


def test_micro_only_and_trigger(tmp_path: Path):
    path = tmp_path / "s.jsonl"
    path.write_bytes((SAMPLES / "small-s1.canonical.jsonl").read_bytes())
    # 7.6k tokens of a 200k window: no trigger fires
    r = run_cli("compact", "--json", str(path))
    f = orjson.loads(r.stdout)["files"][0]
    assert f["changed"] is False and "under 25% of the 200000-token window" in f["reason"]
    # a 20k window: micro (25% = 5000) fires, summarization (90% = 18000) does not
    r = run_cli("compact", "--json", "--context-window", "20000", str(path))
    f = orjson.loads(r.stdout)["files"][0]
    # 10 of the 11 old outputs: a 272-char grep output of three file:line lines is all
    # salient lines, so eliding it would not shorten it (issue 15, point 7)
    assert f["micro"]["targets"] == 10 and f["summary"] is None
    events = list(read(str(path)))
    assert [e.data.get("mode") for e in events if e.type == "compact"] == ["micro"]
    assert r.returncode == 0
    # --check: exit 1 when a trigger fires, 0 when nothing would change
    assert run_cli("compact", "--check", "--force", str(path)).returncode == 1
    assert run_cli("compact", "--check", str(path)).returncode == 0


def test_min_saving_appends_nothing(tmp_path: Path):
    path = tmp_path / "s.jsonl"
    path.write_bytes((SAMPLES / "small-s1.canonical.jsonl").read_bytes())
    r = run_cli("compact", "--force", "--json", "--min-saving", "0.99", str(path))
    f = orjson.loads(r.stdout)["files"][0]
    assert f["changed"] is False and "nothing appended" in f["reason"]
    assert path.read_bytes() == (SAMPLES / "small-s1.canonical.jsonl").read_bytes()


def test_stdin_to_stdout_keeps_raw_bytes_and_materialize(tmp_path: Path):
    original = (SAMPLES / "small-s1.canonical.jsonl").read_bytes()
    r = run_cli("compact", "--force", "-", input=original)
    assert r.returncode == 0
    assert r.stdout.startswith(original)
    extra = r.stdout[len(original) :].splitlines()
    assert [orjson.loads(x)["type"] for x in extra] == ["compact", "summary"]
    r = run_cli("compact", "--force", "--materialize", "--as", "openai", "-", input=original)
    assert r.returncode == 0, r.stderr
    assert r.stderr.startswith(b"-: applied micro compaction")  # stdin to stdout: not appended
    msgs = [orjson.loads(x) for x in r.stdout.splitlines()]
    assert msgs[0]["role"] == "system"
    assert any(m["role"] == "user" and "<summary>" in m["content"] for m in msgs)
    ids = {c["id"] for m in msgs for c in m.get("tool_calls", [])}
    assert {m["tool_call_id"] for m in msgs if m["role"] == "tool"} == ids
    out = tmp_path / "ctx.jsonl"
    r = run_cli("compact", "--force", "--materialize", "-o", str(out), "-", input=original)
    assert r.returncode == 0 and r.stdout == b""
    # the session event first (model, window, session id kept), then the context's messages
    types = [orjson.loads(x)["type"] for x in out.read_bytes().splitlines()]
    assert types[0] == "session" and set(types[1:]) == {"message"}
    assert out.read_bytes().splitlines()[0] == original.splitlines()[0]
    assert b"(effective context of " in r.stderr and b" tokens written to " in r.stderr
    assert b" applied micro" in r.stderr
    dry = tmp_path / "dry.jsonl"
    r = run_cli(
        "compact", "--force", "--materialize", "--dry-run", "-o", str(dry), "-", input=original
    )
    assert r.returncode == 0 and not dry.exists()
    assert b": would apply micro compaction" in r.stderr  # never "would append": it is not


def test_events_on_stderr(tmp_path: Path):
    path = tmp_path / "s.jsonl"
    path.write_bytes((SAMPLES / "small-s1.canonical.jsonl").read_bytes())
    before = dt.datetime.now(dt.UTC).replace(microsecond=0)
    r = run_cli("compact", "--force", "--events", "-q", str(path))
    after = dt.datetime.now(dt.UTC)
    lines = [orjson.loads(x) for x in r.stderr.splitlines()]
    assert [x["event"] for x in lines] == ["compact_start", "compact_done"]
    done = lines[1]
    assert done["applied"] is True and done["triggerMode"] == "manual"
    assert done["path"] == str(path)
    assert done["sessionKey"] == "1027c4d1-c386-4bc4-8d61-3e30d8f16adf"
    assert done["charsSavedRatio"] == round(1 - done["charsAfter"] / done["charsBefore"], 4)
    assert done["tokensSaved"] == done["tokensBefore"] - done["tokensAfter"] > 0
    # every line is stamped with the UTC time it was printed (ISO 8601, Z)
    for line in lines:
        stamp = dt.datetime.fromisoformat(line["timestamp"].replace("Z", "+00:00"))
        assert stamp.utcoffset() == dt.timedelta(0)
        assert before <= stamp <= after  # printed during the run (no wall-clock margin)
    assert all(k == k[:1].lower() + k[1:] and "_" not in k for x in lines for k in x)


def test_an_output_named_gz_is_gzip_that_reads_back(tmp_path: Path) -> None:
    """A fresh-user trial: ``-o out.jsonl.gz`` wrote plain JSON text under a gzip name
    (``file`` said JSON text, ``zcat`` failed). It is gzip now, for ``compact -o``,
    ``--materialize -o`` and ``convert -o``, and every command reads it back."""
    import gzip

    src = tmp_path / "s.jsonl"
    original = (SAMPLES / "small-s1.canonical.jsonl").read_bytes()
    src.write_bytes(original)
    out = tmp_path / "out.jsonl.gz"
    r = run_cli("compact", "--force", "--no-store", "-o", str(out), str(src))
    assert r.returncode == 0, r.stderr.decode()
    assert src.read_bytes() == original
    data = gzip.decompress(out.read_bytes())
    assert data.startswith(original) and data.count(b"\n") == original.count(b"\n") + 2
    r = run_cli("inspect", "--json", "--estimate", str(out))
    (f,) = orjson.loads(r.stdout)["files"]
    assert f["format"] == "canonical" and f["events"]["summary"] == 1
    ctx = tmp_path / "ctx.jsonl.gz"
    r = run_cli("compact", "--force", "--no-store", "--materialize", "-o", str(ctx), str(src))
    assert r.returncode == 0 and b"summaryOf" in gzip.decompress(ctx.read_bytes())
    conv = tmp_path / "c.jsonl.gz"
    r = run_cli("convert", "-o", str(conv), str(SAMPLES / "small-s1.claude-code.jsonl"))
    assert r.returncode == 0, r.stderr.decode()
    assert gzip.decompress(conv.read_bytes()).startswith(b'{"type":"session"')
