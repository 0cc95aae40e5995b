"""``--materialize --as openai`` writes a context the Chat Completions API accepts."""

from __future__ import annotations

import orjson

from tests.helpers import run_cli


def _line(**d: object) -> bytes:
    return orjson.dumps({"type": "message", **d}) + b"\n"


def test_openai_materialize_leaves_out_unpaired_tool_messages():
    log = b"".join(
        [
            _line(uuid="u1", role="user", content="start"),
            # a tool result whose call is not in the transcript (a cut-off log)
            _line(uuid="t0", role="tool", toolCallId="lost", content="orphan output"),
            _line(
                uuid="a1",
                role="assistant",
                content="",
                toolCalls=[
                    {"id": "c1", "name": "bash", "arguments": {"command": "ls"}},
                    {"id": "c2", "name": "bash", "arguments": {"command": "pwd"}},
                ],
            ),
            _line(uuid="t1", role="tool", toolCallId="c1", content="a.txt"),
            # c2 never got a result
            _line(uuid="a2", role="assistant", content="", toolCalls=[{"id": "c3", "name": "x"}]),
            _line(uuid="u2", role="user", content="thanks"),
        ]
    )
    r = run_cli("rules", "-q", "--materialize", "--as", "openai", "-", input=log)
    assert r.returncode == 0, r.stderr
    msgs = [orjson.loads(x) for x in r.stdout.splitlines()]
    assert [(m["role"], m.get("tool_call_id")) for m in msgs] == [
        ("user", None),
        ("assistant", None),
        ("tool", "c1"),
        ("assistant", None),
        ("user", None),
    ]
    assert [c["id"] for c in msgs[1]["tool_calls"]] == ["c1"]  # c2 had no result
    assert "tool_calls" not in msgs[3] and msgs[3]["content"] == ""  # c3 had none either
    # the canonical materialization still shows the input as it is
    r = run_cli("rules", "-q", "--materialize", "-", input=log)
    assert [orjson.loads(x)["uuid"] for x in r.stdout.splitlines()] == [
        "u1",
        "t0",
        "a1",
        "t1",
        "a2",
        "u2",
    ]


def test_dry_run_and_check_never_call_the_model(tmp_path):
    """A CI gate (--check) or a preview (--dry-run) must not send the transcript to a paid
    model: the model endpoint here refuses every connection, so a call would fail the run."""
    from tests.helpers import SAMPLES

    path = tmp_path / "s.jsonl"
    path.write_bytes((SAMPLES / "small-s1.canonical.jsonl").read_bytes())
    env = {"OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "OPENAI_API_KEY": "sk-test-not-used"}
    common = ["compact", "--force", "--no-store", "--model", "openai/gpt-4o-mini", "--json"]
    r = run_cli(*common, "--dry-run", str(path), env=env)
    assert r.returncode == 0, r.stderr
    (f,) = orjson.loads(r.stdout)["files"]
    assert f["changed"] is True and f["modelNotCalled"] == "openai/gpt-4o-mini"
    r = run_cli(*common, "--check", str(path), env=env)
    assert r.returncode == 1, r.stderr  # work to do, and still no model call
    assert path.read_bytes() == (SAMPLES / "small-s1.canonical.jsonl").read_bytes()
    # the real run does call it (and fails here, appending nothing); one call without
    # litellm's retries and their backoff (COMPACTCTL_NUM_RETRIES, default 2) is enough
    r = run_cli(
        *common, str(path), env={**env, "COMPACTCTL_DEBUG": "", "COMPACTCTL_NUM_RETRIES": "0"}
    )
    assert r.returncode != 0
    assert path.read_bytes() == (SAMPLES / "small-s1.canonical.jsonl").read_bytes()


def test_json_report_is_streamed_as_one_document(tmp_path):
    """``--json`` is written file by file, yet is byte for byte the indented document a
    single ``orjson.dumps`` would give: for inspect and for a changing command, with files,
    with a failure, and with none."""
    from tests.helpers import SAMPLES

    for i in range(3):
        (tmp_path / f"s{i}.jsonl").write_bytes((SAMPLES / "small-s1.canonical.jsonl").read_bytes())
    (tmp_path / "bad.jsonl").write_bytes((SAMPLES / "small-s1.claude-code.jsonl").read_bytes())
    (tmp_path / "garbage.jsonl").write_bytes(b'{"hello": 1}\n{"world": 2}\n')
    empty = tmp_path / "empty"
    empty.mkdir()
    runs = [
        ("inspect", "--estimate", "--json", "--jobs", "2", str(tmp_path)),
        ("rules", "--no-store", "--json", "--jobs", "2", str(tmp_path)),
        ("inspect", "--json", str(empty)),
        ("rules", "--json", str(empty)),
    ]
    for args in runs:
        r = run_cli(*args)
        doc = orjson.loads(r.stdout)
        assert r.stdout == orjson.dumps(doc, option=orjson.OPT_INDENT_2) + b"\n", args
    doc = orjson.loads(run_cli(*runs[1]).stdout)  # second rules run: nothing left to do
    # the Claude Code file met in the folder is skipped (issue 19), not failed
    skipped = [f for f in doc["files"] if f["outcome"] == "skipped"]
    assert skipped == [
        {
            "path": str(tmp_path / "bad.jsonl"),
            "outcome": "skipped",
            "reason": "a claude-code transcript, never appended to; to process it: -o DIR/ "
            "(canonical JSONL)",
        }
    ]
    done = [f["path"] for f in doc["files"] if f["outcome"] not in {"failed", "skipped"}]
    assert done == [str(tmp_path / f"s{i}.jsonl") for i in range(3)]
    failed = [f for f in doc["files"] if f["outcome"] == "failed"]
    assert [f["path"] for f in failed] == [str(tmp_path / "garbage.jsonl")]
    assert doc["totals"]["files"] == 5 and doc["totals"]["failed"] == 1
    assert doc["totals"]["skipped"] == 1
    assert doc["totals"]["errors"][0]["path"] == str(tmp_path / "garbage.jsonl")
    inspect = orjson.loads(run_cli(*runs[0]).stdout)
    read = [f for f in inspect["files"] if f["outcome"] == "ok"]  # garbage.jsonl failed,
    assert len(read) == 4 and inspect["totals"]["failed"] == 1  # bad.jsonl (Claude Code) read
    assert inspect["totals"]["messages"] == sum(f["messages"] for f in read)
    assert inspect["totals"]["events"] == sum(sum(f["events"].values()) for f in read)
    # stdin through a changing command: the transcript on stdout, the report on stderr
    data = (SAMPLES / "small-s1.canonical.jsonl").read_bytes()
    r = run_cli("rules", "--no-store", "--json", "-", input=data)
    assert r.stdout.startswith(data)
    assert orjson.loads(r.stderr.split(b"\n}\n")[0] + b"\n}")["totals"]["files"] == 1


def test_materialize_reports_the_tokens_of_what_it_wrote(tmp_path):
    """The effective context ``--materialize`` writes frames the summary for the agent that
    resumes (its analysis block left out), so its size differs from the compaction's
    estimate: the report gives the size of what was written, as ``inspect`` counts it."""
    from tests.helpers import SAMPLES

    src = tmp_path / "s.jsonl"
    src.write_bytes((SAMPLES / "small-s1.canonical.jsonl").read_bytes())
    out = tmp_path / "ctx.jsonl"
    done = run_cli("compact", "--force", "--materialize", "--json", "-o", str(out), str(src))
    assert done.returncode == 0, done.stderr
    entry = orjson.loads(done.stdout)["files"][0]
    seen = orjson.loads(run_cli("inspect", "--json", str(out)).stdout)["files"][0]
    assert entry["tokensWritten"] == seen["effectiveTokens"] != entry["tokensAfter"]
    line = run_cli("compact", "--force", "--materialize", "-o", str(tmp_path / "b.jsonl"),
                   str(src)).stderr.decode()  # fmt: skip
    assert f"effective context of {entry['tokensWritten']} tokens written to" in line
