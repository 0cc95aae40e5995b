"""The native writers (``compact --as native``, issue 18) on the real recordings of
fixtures/real: the records each agent needs, tool pairs whole, the original untouched, the
same session on a second run, and the refusals."""

from __future__ import annotations

import gzip
import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from compactctl.app.jobs import OutputOptions, compact_path
from compactctl.errors import CompactWarning, UsageError, WriteError
from compactctl.io.native import native_format, native_session, write_native
from compactctl.layers.options import CompactOptions, MicroParams
from compactctl.session import Session
from compactctl.summarize.summary_format import parse_sections
from tests.helpers import FIXTURES, run_cli

CLAUDE = FIXTURES / "real" / "claude-code-2.1.328" / "b7a64efe-cbfe-47e8-a7f2-2c773ad73928.jsonl"
CODEX = next((FIXTURES / "real" / "codex-0.169.0").glob("rollout-*.jsonl"))
OPTIONS = CompactOptions(force=True, keep_recent=4, min_saving=0.0)
NATIVE = OutputOptions(as_format="native", db="")


def _claude(tmp: Path) -> Path:
    folder = tmp / ".claude" / "projects" / "-tmp-compactctl-agent-work-claude"
    folder.mkdir(parents=True)
    return Path(shutil.copy(CLAUDE, folder))


def _codex(tmp: Path) -> Path:
    """The Codex recording up to its own first compaction (two turns, six calls), each
    command's output made 40 numbered lines longer so that a summary saves something."""
    folder = tmp / ".codex" / "sessions" / "2026" / "12" / "01"
    folder.mkdir(parents=True)
    out = []
    for rec in _records(CODEX):
        if rec["type"] == "compacted":
            break
        if rec["payload"].get("type") == "function_call_output":
            more = "".join(f"\nline {n} of the listing" for n in range(40))
            rec["payload"]["output"] += more
        out.append(json.dumps(rec) + "\n")
    path = folder / CODEX.name
    path.write_text("".join(out))
    return path


def _records(path: str | Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in Path(path).read_text().splitlines()]


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _compact_new(src: Path) -> tuple[dict[str, Any], Path]:
    """``compact --as native`` on ``src``: the job's result and the new session's path; the
    original keeps every byte."""
    before = _digest(src)
    result = compact_path(str(src), OPTIONS, NATIVE)
    new = Path(result["resume"]["path"])
    assert result["changed"] is True and result["written"] == str(new) and new.is_file()
    assert _digest(src) == before
    return result, new


def test_claude_code_session(tmp_path: Path) -> None:
    src = _claude(tmp_path)
    result, new = _compact_new(src)
    resume = result["resume"]
    assert new.parent == src.parent and new.name == resume["sessionId"] + ".jsonl"
    assert resume["command"] == f"claude --resume {resume['sessionId']}"
    assert resume["cwd"] == "/tmp/compactctl-agent-work/claude"

    records = _records(new)
    assert records[0]["type"] == "system" and records[0]["subtype"] == "compact_boundary"
    assert records[0]["parentUuid"] is None
    assert records[0]["compactMetadata"]["preTokens"] == result["tokensBefore"] > 0
    for prev, rec in zip(records, records[1:], strict=False):
        assert rec["parentUuid"] == prev["uuid"]
    assert len({r["uuid"] for r in records}) == len(records)
    for rec in records:
        assert rec["sessionId"] == resume["sessionId"]
        assert (rec["cwd"], rec["version"], rec["gitBranch"]) == (resume["cwd"], "2.1.328", "HEAD")
    (summary,) = [r for r in records if r.get("isCompactSummary")]
    text = summary["message"]["content"]
    assert "Summary:\n" in text and "compactctl replaced" in text
    # every tool_use is answered by a later tool_result, and no result lacks its call
    uses: list[str] = []
    for rec in records:
        content = rec.get("message", {}).get("content")
        for block in content if isinstance(content, list) else []:
            if block["type"] == "tool_use":
                uses.append(block["id"])
            elif block["type"] == "tool_result":
                assert block["tool_use_id"] in uses
                uses.remove(block["tool_use_id"])
    assert uses == []
    assert result["nativeMessages"] == len(records) - 1

    # compactctl reads it back as Claude Code: the summary, then the kept messages
    back = Session.open(str(new))
    assert back.format == "claude-code"
    kept = [m for m in Session.open(str(src)).effective() if m.role != "system"][-3:]
    assert [m.text for m in back.effective()][-3:] == [m.text for m in kept]


def test_claude_code_second_run_writes_nothing(tmp_path: Path) -> None:
    src = _claude(tmp_path)
    first = compact_path(str(src), OPTIONS, NATIVE)
    data = Path(first["written"]).read_bytes()
    second = compact_path(str(src), OPTIONS, NATIVE)
    assert second["resume"] == first["resume"]
    assert second["changed"] is False and second["appended"] == 0
    assert Path(first["written"]).read_bytes() == data
    assert sorted(p.name for p in src.parent.iterdir()) == sorted(
        [src.name, Path(first["written"]).name]
    )
    # another compaction (other messages kept) is another session
    other = compact_path(str(src), CompactOptions(force=True, keep_recent=6, min_saving=0), NATIVE)
    assert other["resume"]["sessionId"] != first["resume"]["sessionId"]


def test_codex_rollout(tmp_path: Path) -> None:
    src = _codex(tmp_path)
    result, new = _compact_new(src)
    resume = result["resume"]
    sid = resume["sessionId"]
    assert new.name.startswith("rollout-2026-12-01T") and new.name.endswith(f"-{sid}.jsonl")
    assert new.parents[3] == tmp_path / ".codex" / "sessions"
    assert resume["command"] == f"codex resume {sid}"

    records = _records(new)
    assert [r["ordinal"] for r in records] == list(range(len(records)))
    meta, context, compacted = records[0], records[1], records[2]
    assert meta["type"] == "session_meta" and meta["payload"]["id"] == sid
    original_meta = _records(src)[0]["payload"]
    assert meta["payload"]["base_instructions"] == original_meta["base_instructions"]
    assert meta["payload"]["cwd"] == original_meta["cwd"] == resume["cwd"]
    # the model, where Codex records it: the original's last turn_context, as it was
    contexts = [r["payload"] for r in _records(src) if r["type"] == "turn_context"]
    assert len(contexts) == 2 and contexts[1]["turn_id"] != contexts[0]["turn_id"]
    assert context["type"] == "turn_context" and context["payload"] == contexts[1]
    assert context["payload"]["model"] == "gpt-5"
    assert [r for r in records if r["type"] == "turn_context"] == [context]
    assert compacted["type"] == "compacted"
    (item,) = compacted["payload"]["replacement_history"]
    assert item["role"] == "user" and "Summary:\n" in item["content"][0]["text"]
    assert compacted["payload"]["message"] == item["content"][0]["text"]
    items = [r["payload"] for r in records[3:]]
    assert {r["type"] for r in records[3:]} == {"response_item"}
    calls = [i["call_id"] for i in items if i["type"] == "function_call"]
    outputs = [i["call_id"] for i in items if i["type"] == "function_call_output"]
    assert calls and calls == outputs
    # calls are written back as the original recorded them
    originals = {
        r["payload"]["call_id"]: r["payload"]
        for r in _records(src)
        if r["type"] == "response_item" and r["payload"].get("type") == "function_call"
    }
    assert all(i == originals[i["call_id"]] for i in items if i["type"] == "function_call")

    back = Session.open(str(new))
    assert back.format == "codex-rollout"
    assert back.meta.model == "gpt-5"  # it was None: no model, a 128,000-token window assumed
    tools = [m for m in back.effective() if m.role == "tool"]
    assert [m.tool_call_id for m in tools] == outputs


def test_codex_rollout_without_a_model_or_a_summary_gets_no_turn_context(tmp_path: Path) -> None:
    """No model is invented: an original without ``turn_context`` gives a session without
    one; and a micro-only compaction (no ``compacted`` record) writes none (module
    docstring), so the model is not recorded there."""
    src = _codex(tmp_path)
    bare = src.with_name(src.name.replace("-01a231af", "-01a231a0"))
    lines = src.read_text().splitlines(keepends=True)
    bare.write_text("".join(line for line in lines if '"turn_context"' not in line))
    assert Session.open(str(bare)).meta.model is None
    micro_only = CompactOptions(
        force=True, micro_only=True, micro=MicroParams(keep_turns=0), min_saving=0
    )
    for path, options in ((bare, OPTIONS), (src, micro_only)):
        result = compact_path(str(path), options, NATIVE)
        records = _records(result["written"])
        assert records[0]["type"] == "session_meta"
        assert [r for r in records if r["type"] == "turn_context"] == []
        assert '"model"' not in json.dumps([r for r in records if r["type"] != "session_meta"])
        with pytest.warns(CompactWarning, match="no model is recorded: assuming a context"):
            assert Session.open(result["written"]).meta.model is None
    assert [r["type"] for r in _records(result["written"])][1] == "response_item"  # micro


def test_dry_run_and_check_write_nothing(tmp_path: Path) -> None:
    src = _claude(tmp_path)
    for out in (OutputOptions(as_format="native", db="", dry_run=True),
                OutputOptions(as_format="native", db="", check=True)):  # fmt: skip
        result = compact_path(str(src), OPTIONS, out)
        assert result["written"] is None and result["changed"] is True
        assert not Path(result["resume"]["path"]).exists()
    assert [p.name for p in src.parent.iterdir()] == [src.name]
    done = compact_path(str(src), OPTIONS, NATIVE)
    assert done["resume"] == result["resume"]
    again = compact_path(str(src), OPTIONS, OutputOptions(as_format="native", db="", check=True))
    assert again["changed"] is False  # --check: nothing left to write


def test_a_different_file_at_the_name_is_left_alone(tmp_path: Path) -> None:
    src = _claude(tmp_path)
    session = Session.open(str(src))
    native = native_session(str(src), "claude-code", session.effective(), model="m")
    Path(native.path).write_text("someone else's\n")
    with pytest.raises(WriteError, match="different file"):
        write_native(native)
    assert Path(native.path).read_text() == "someone else's\n"


def test_formats_that_cannot_be_resumed() -> None:
    with pytest.raises(UsageError, match="can be resumed are claude-code, codex-rollout"):
        native_format("native", "canonical", "s.jsonl")
    with pytest.raises(UsageError, match="use --as native"):
        native_format("claude-code", "codex-rollout", "r.jsonl")
    assert native_format("claude-code", "claude-code", "s.jsonl") == "claude-code"


def test_cli_refusals(tmp_path: Path) -> None:
    canonical = tmp_path / "s.jsonl"
    canonical.write_bytes((FIXTURES / "samples" / "small-s1.canonical.jsonl").read_bytes())
    r = run_cli("compact", "--force", "--as", "native", "--no-store", str(canonical))
    assert r.returncode == 2
    assert b"the formats that can be resumed are claude-code, codex-rollout" in r.stderr
    src = _claude(tmp_path)
    r = run_cli("compact", "--as", "native", "-o", str(tmp_path / "o.jsonl"), str(src))
    assert r.returncode == 2 and b"it takes neither -o nor --materialize" in r.stderr
    r = run_cli("rules", "--as", "native", str(src))
    assert r.returncode == 2 and b"compact also takes native" in r.stderr
    assert sorted(p.name for p in src.parent.iterdir()) == [src.name]


@pytest.mark.parametrize("sample", ["real", "pinned"])
def test_claude_code_session_reads_back_as_written(tmp_path: Path, sample: str) -> None:
    """compactctl reads its own Claude Code session as Claude Code loads it: everything after
    the ``compact_boundary`` is sent, so a first request kept between the boundary and the
    summary line (``pinned``: the sample session, whose first request the summary layer
    pins) stays, and the summary (of messages that are not in the new file) is a
    ``summaryOf`` message at its line; nothing is replaced, and ``eval`` refuses the file
    without ``--against`` (its originals are elsewhere)."""
    if sample == "real":
        src = _claude(tmp_path)
    else:
        folder = tmp_path / "project"
        folder.mkdir()
        src = Path(shutil.copy(FIXTURES / "samples" / "small-s1.claude-code.jsonl", folder))
    _, new = _compact_new(src)
    records = _records(new)
    back = Session.open(str(new))
    assert not any(e.type == "summary" for e in back.events)
    view = back.effective()
    assert [m.uuid for m in view] == [m.uuid for m in back.events if m.type == "message"]
    (at,) = [i for i, r in enumerate(records) if r.get("isCompactSummary")]
    (summary,) = [i for i, m in enumerate(view) if "summaryOf" in m.data]
    assert view[summary].data["summaryOf"] == view[summary].uuid
    assert view[summary].text == records[at]["message"]["content"]
    if sample == "pinned":  # boundary, the first request, then the summary
        first = next(m for m in Session.open(str(src)).effective() if m.role == "user")
        assert (at, summary) == (2, 1)
        assert (view[0].role, view[0].text) == ("user", first.text)
    else:  # the summary right after the boundary, as Claude Code writes its own
        assert (at, summary) == (1, 0)
    line = at + 1
    refused = run_cli("eval", str(new))
    assert refused.returncode == 3
    assert f"line {line} is a summary message".encode() in refused.stderr
    assert run_cli("eval", "--against", str(src), str(new)).returncode == 0


def test_native_session_id_follows_what_is_kept_gzip_and_subagents(tmp_path: Path) -> None:
    """Two compactions that keep the same messages differently (micro-compacted or whole)
    write two sessions, not one id for two contents; a gzipped session is read as the
    compaction read it; a subagent's transcript, which ``claude --resume`` cannot find, is
    refused with what to do instead."""
    folder = tmp_path / "project"
    folder.mkdir()
    src = shutil.copy(FIXTURES / "samples" / "small-s1.claude-code.jsonl", folder)
    both = ("compact", "--force", "--as", "native", "--keep-recent", "30", "--json")
    micro = run_cli(*both, src)
    whole = run_cli(*both, "--no-micro", src)  # the same summary and messages, not micro'd
    assert micro.returncode == whole.returncode == 0, whole.stderr
    ids = [json.loads(r.stdout)["files"][0]["resume"]["sessionId"] for r in (micro, whole)]
    assert ids[0] != ids[1]
    assert all((folder / f"{i}.jsonl").is_file() for i in ids)

    gz = tmp_path / "gz"
    gz.mkdir()
    packed = gz / "s.jsonl.gz"
    packed.write_bytes(gzip.compress(Path(src).read_bytes()))
    done = run_cli(*both, str(packed))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["files"][0]["resume"]["sessionId"] == ids[0]

    sub = tmp_path / "p" / "b7a64efe" / "subagents"
    sub.mkdir(parents=True)
    agent = shutil.copy(next((CLAUDE.parent / "subagents").glob("*.jsonl")), sub)
    refused = run_cli("compact", "--force", "--as", "native", agent)
    assert refused.returncode == 2
    assert b"a subagent's transcript" in refused.stderr and b"compact its parent" in refused.stderr
    assert sorted(p.name for p in sub.iterdir()) == [Path(agent).name]


def test_a_subagent_transcript_moved_out_of_its_folder_is_refused_by_its_records(
    tmp_path: Path,
) -> None:
    """The writer's second check: a subagent's transcript outside ``subagents/`` (so the
    folder check passes) with enough to compact, every conversation record ``isSidechain``
    (the sample session made a subagent's: 66 messages, 6 turns). Refused, exit 2, nothing
    written beside it; the same records as a main session are written. The shipped
    subagent file has nothing to compact, so no test reached this check before."""
    folder = tmp_path / "project"
    folder.mkdir()
    records = [
        json.loads(line)
        for line in (FIXTURES / "samples" / "small-s1.claude-code.jsonl").read_text().splitlines()
    ]
    for record in records:
        if record["type"] in ("user", "assistant", "system", "attachment", "progress"):
            record.update(isSidechain=True, agentId="a1b2c3d")
    agent = folder / "agent-a1b2c3d.jsonl"
    agent.write_text("".join(json.dumps(r) + "\n" for r in records))
    assert len([e for e in Session.open(str(agent)).events if e.type == "message"]) == 66
    refused = run_cli("compact", "--force", "--as", "native", "--no-store", str(agent))
    assert refused.returncode == 2, refused.stderr
    assert b"a subagent's transcript" in refused.stderr and b"compact its parent" in refused.stderr
    assert [p.name for p in folder.iterdir()] == [agent.name]
    main = folder / "main.jsonl"
    main.write_bytes((FIXTURES / "samples" / "small-s1.claude-code.jsonl").read_bytes())
    done = run_cli("compact", "--force", "--as", "native", "--no-store", "--json", str(main))
    assert done.returncode == 0, done.stderr
    new = json.loads(done.stdout)["files"][0]["resume"]["sessionId"]
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        [agent.name, main.name, f"{new}.jsonl"]
    )


CLAUDE_OWN_SUMMARY = (
    "This session is being continued from a previous conversation that ran out of context. "
    "The summary below covers the earlier portion of the conversation.\n\n"
    "<system-reminder>\n<tools-used-before-summary>Bash</tools-used-before-summary>\n"
    "</system-reminder>\nSummary:\n"
    "1. Primary Request and Intent:\n"
    "   The user reported that `quillpad list --page 2` repeats the last entry of page 1.\n"
    "2. Key Technical Concepts:\n   - offset pagination in src/quillpad/store.py\n"
    "3. Errors and fixes:\n   - off-by-one in the page offset: fixed; the test suite passes.\n"
    "4. Pending Tasks:\n   - migrate the notes table to the new schema before the release\n"
    "5. Current Work:\n   Ran the whole test suite: all green.\n\n"
    "If you need specific details from before compaction, read the full transcript.\n"
    "Continue the conversation from where it left off without asking the user any further "
    "questions."
)
"""A summary in the shape Claude Code 2.1.328 writes its own (``fixtures/real/``: the
preamble, a reminder, ``Summary:``, numbered sections, the instructions after them)."""


def test_claude_code_own_summary_is_carried_as_a_summary(tmp_path: Path) -> None:
    """compact --as native on a session Claude Code had compacted itself (a boundary and its
    ``isCompactSummary`` line before the fourth prompt of the sample): the new session's
    summary carries Claude's summary, section by section, without its framing (it used to
    be one note ``earlier summary (unparsed): `` + its first 600 characters, the preamble
    included)."""
    records = _records(FIXTURES / "samples" / "small-s1.claude-code.jsonl")
    at = 53  # line 54: the prompt of turn 3
    assert records[at]["message"]["content"].startswith("The nightly job job-bfad32 failed")
    base = {k: records[at][k] for k in ("isSidechain", "userType", "cwd", "sessionId")}
    boundary = {
        **base, "parentUuid": None, "logicalParentUuid": records[at]["parentUuid"],
        "type": "system", "subtype": "compact_boundary", "uuid": "c0000000-0000-4000-8000-0b",
        "timestamp": records[at]["timestamp"], "compactMetadata": {"trigger": "manual"},
    }  # fmt: skip
    summary = {
        **base, "parentUuid": boundary["uuid"], "type": "user", "isCompactSummary": True,
        "uuid": "c0000000-0000-4000-8000-05", "timestamp": records[at]["timestamp"],
        "message": {"role": "user", "content": CLAUDE_OWN_SUMMARY},
    }  # fmt: skip
    records[at] = {**records[at], "parentUuid": summary["uuid"]}
    src = tmp_path / "own.jsonl"
    lines = [*records[:at], boundary, summary, *records[at:]]
    src.write_text("".join(json.dumps(r) + "\n" for r in lines))
    (prior,) = [e for e in Session.open(str(src)).events if e.type == "summary"]
    assert prior.data["model"] == "claude-code"
    result, new = _compact_new(src)
    (text,) = [r["message"]["content"] for r in _records(new) if r.get("isCompactSummary")]
    sections = parse_sections(text[text.index("<analysis>") :]).sections
    assert "offset pagination in src/quillpad/store.py" in sections["Key Technical Concepts"]
    assert sections["Pending Tasks"] == [
        "migrate the notes table to the new schema before the release"
    ]
    notes = sections["Problem Solving"]
    assert (
        "Primary Request and Intent: The user reported that `quillpad list --page 2` repeats "
        "the last entry of page 1."
    ) in notes
    assert "Errors and fixes: off-by-one in the page offset: fixed; the test suite passes." in (
        notes
    )
    assert "unparsed" not in text and "being continued" not in text
    assert "Continue the conversation" not in text and "tools-used-before-summary" not in text


def test_codex_session_reads_back_as_written(tmp_path: Path) -> None:
    """compactctl reads its own Codex session as Codex resumes it: the ``compacted`` record,
    with nothing before it in the new file, is a ``summaryOf`` message holding the summary
    (a SummaryEvent replacing nothing dropped it: the context lost the summary, and eval
    scored 15 of 41 probes against the original where 41 are there); eval refuses the file
    without ``--against``."""
    src = _codex(tmp_path)
    _, new = _compact_new(src)
    records = _records(new)
    (at,) = [i for i, r in enumerate(records) if r["type"] == "compacted"]
    back = Session.open(str(new))
    assert not any(e.type == "summary" for e in back.events)
    view = back.effective()
    assert [m.uuid for m in view] == [m.uuid for m in back.events if m.type == "message"]
    (summary,) = [m for m in view if "summaryOf" in m.data]
    assert summary.text == records[at]["payload"]["message"] and summary.line == at + 1
    assert [m for m in view if m.role != "system"][0] is summary
    refused = run_cli("eval", str(new))
    assert refused.returncode == 3
    assert f"line {at + 1} is a summary message".encode() in refused.stderr
    doc = json.loads(run_cli("eval", "--json", "--against", str(src), str(new)).stdout)
    assert doc["files"][0]["probes"]["retention"] == 1.0
