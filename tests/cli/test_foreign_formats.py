"""Every command reads every format: foreign samples through the CLI end to end."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from compactctl.formats.reader import load
from compactctl.model import Message
from compactctl.replay import replay
from tests.helpers import FIXTURES, SAMPLES, run_cli

FOREIGN = [
    ("small-s1.claude-code.jsonl", "claude-code"),
    ("small-s1.claude-stream.jsonl", "claude-stream"),
    ("small-s1.codex-rollout.jsonl", "codex-rollout"),
    ("small-s1.openai-chat.jsonl", "openai-chat"),
    ("messy-s2.claude-code.jsonl", "claude-code"),
]
DOCUMENTS = [
    (FIXTURES / "formats" / "openhands-s1.json", "openhands"),
    (FIXTURES / "formats" / "swe-agent-s1.traj", "swe-agent"),
    (FIXTURES / "formats" / "codex-exec-s1.jsonl", "codex-exec"),
]


def _no_split_block(view: list[Message]) -> bool:
    calls = {c["id"] for m in view for c in m.tool_calls}
    results = {m.tool_call_id for m in view if m.role == "tool"}
    return calls == results


@pytest.mark.parametrize(("name", "fmt"), FOREIGN)
def test_compact_force_with_output_on_each_foreign_sample(tmp_path: Path, name: str, fmt: str):
    src = tmp_path / name
    src.write_bytes((SAMPLES / name).read_bytes())
    before = src.read_bytes()
    out = tmp_path / "out.jsonl"
    r = run_cli("compact", "--force", "--json", "-o", str(out), str(src))
    assert r.returncode == 0, r.stderr.decode()
    (f,) = orjson.loads(r.stdout)["files"]
    assert f["format"] == fmt and f["changed"] is True
    assert src.read_bytes() == before  # a foreign file is never changed
    fmt_out, events = load(str(out))
    assert fmt_out == "canonical"
    view = replay(events)
    assert _no_split_block(view)
    assert sum(1 for m in view if "summaryOf" in m.data) == 1


@pytest.mark.parametrize(("name", "fmt"), FOREIGN[:1])
def test_foreign_file_is_never_appended_to(tmp_path: Path, name: str, fmt: str):
    src = tmp_path / name
    src.write_bytes((SAMPLES / name).read_bytes())
    r = run_cli("compact", "--force", str(src))
    assert r.returncode == 3  # this input could not be processed as asked (others would be)
    assert f"is a {fmt} transcript; compactctl never appends".encode() in r.stderr
    assert b"-o FILE, -o DIR/" in r.stderr
    assert src.read_bytes() == (SAMPLES / name).read_bytes()
    # --dry-run refuses it the same way; --check judges its canonical form (issue 19: a CI
    # gate tells "needs work", 1, from "cannot be read", 3)
    r = run_cli("compact", "--force", "--dry-run", str(src))
    assert r.returncode == 3 and b"never appends" in r.stderr
    r = run_cli("compact", "--force", "--check", str(src))
    assert r.returncode == 1 and b"would append micro compaction" in r.stderr
    assert src.read_bytes() == (SAMPLES / name).read_bytes()
    # printing the effective context needs no -o
    r = run_cli("compact", "--force", "--materialize", "--no-store", str(src))
    assert r.returncode == 0 and r.stdout.count(b"\n") > 10


@pytest.mark.parametrize(("path", "fmt"), DOCUMENTS)
def test_documents_and_exec_streams_inspect_and_compact(tmp_path: Path, path: Path, fmt: str):
    r = run_cli("inspect", "--json", "--estimate", str(path))
    (f,) = orjson.loads(r.stdout)["files"]
    assert f["format"] == fmt and f["messages"] > 0
    out = tmp_path / "out.jsonl"
    r = run_cli("compact", "--force", "--min-saving", "0", "-o", str(out), str(path))
    assert r.returncode == 0, r.stderr.decode()
    assert _no_split_block(replay(load(str(out))[1]))


def test_inspect_reports_source_duplicates_and_bad_records(tmp_path: Path):
    # Claude Code repeats tool output in toolUseResult: reported, not counted as context.
    r = run_cli("inspect", "--json", "--estimate", str(SAMPLES / "small-s1.claude-code.jsonl"))
    (f,) = orjson.loads(r.stdout)["files"]
    assert f["duplicates"]["sourceDuplicateBytes"] > 0
    # a malformed record in the middle of a foreign file: a finding with its line, the rest read
    lines = (SAMPLES / "small-s1.openai-chat.jsonl").read_bytes().splitlines(keepends=True)
    broken = b"".join(lines[:10] + [b'{"role": "assistant", "content": \n'] + lines[10:])
    p = tmp_path / "chat.jsonl"
    p.write_bytes(broken)
    r = run_cli("inspect", "--json", "--estimate", str(p))
    (f,) = orjson.loads(r.stdout)["files"]
    assert f["format"] == "openai-chat" and f["messages"] == 67
    assert [(x["line"], x["kind"]) for x in f["findings"]] == [(11, "malformed")]


def test_unknown_format_is_a_clear_error(tmp_path: Path):
    p = tmp_path / "x.jsonl"
    p.write_bytes(b'{"hello": 1}\n{"world": 2}\n')
    r = run_cli("inspect", str(p))
    assert r.returncode == 3
    assert b"unknown transcript format" in r.stderr and b"claude-code" in r.stderr
    r = run_cli("inspect", "--format", "nope", str(p))
    assert b"unknown --format 'nope'" in r.stderr


@pytest.mark.parametrize(
    ("name", "forced", "detected"),
    [
        ("small-s1.canonical.jsonl", "codex-rollout", "canonical"),
        ("small-s1.claude-code.jsonl", "canonical", "claude-code"),
        ("small-s1.codex-rollout.jsonl", "claude-stream", "codex-rollout"),
    ],
)
def test_a_forced_format_that_reads_nothing_is_refused(
    tmp_path: Path, name: str, forced: str, detected: str
) -> None:
    """A fresh-user trial: ``inspect --format codex-rollout`` on a canonical file said
    ``0 messages ... events: foreign 68``, exit 0, and ``compact -o`` wrote a copy of it.
    Every command refuses such a file (exit 3), names it, says what format detection makes
    of it and how to go on, and writes nothing."""
    src = tmp_path / name
    src.write_bytes((SAMPLES / name).read_bytes())
    before = src.read_bytes()
    records = before.count(b"\n")
    out = tmp_path / "out.jsonl"
    for args in (
        ("inspect",),
        ("inspect", "--json"),
        ("compact", "--force", "--no-store", "-o", str(out)),
        ("convert", "-o", str(out)),
        ("eval",),
    ):
        r = run_cli(*args, "--format", forced, str(src))
        err = r.stderr.decode()
        assert r.returncode == 3, (args, err)
        assert f"{src}: --format {forced} reads nothing from this file" in err, (args, err)
        assert f"none of its {records} records is one {forced} reads" in err
        assert f"format detection says it is {detected}: drop --format" in err
        assert not out.exists() and src.read_bytes() == before
        if "--json" in args:
            (f,) = orjson.loads(r.stdout)["files"]
            assert f["outcome"] == "failed" and f["error"]["exitCode"] == 3
    # the format it is, forced, still reads it
    r = run_cli("inspect", "--json", "--format", detected, str(src))
    assert r.returncode == 0 and orjson.loads(r.stdout)["files"][0]["messages"] > 0


def test_a_forced_format_refusal_says_when_no_format_fits(tmp_path: Path) -> None:
    p = tmp_path / "x.jsonl"
    p.write_bytes(b'{"hello": 1}\n{"world": 2}\n')
    r = run_cli("inspect", "--format", "codex-rollout", str(p))
    assert r.returncode == 3
    assert (
        b"none of its 2 records is one codex-rollout reads, so it would be read as a session "
        b"of 0 messages; format detection knows no format it fits (it looks like JSON lines "
        b"of 2 objects; keys: hello x1, world x1): pass the format it is" in r.stderr
    )


def test_a_forced_format_that_knows_the_records_is_not_refused(tmp_path: Path) -> None:
    """A Claude Code file of metadata records only (no message yet) is read as one of 0
    messages when ``--format claude-code`` is forced: its records are that format's, and
    nothing in it is lost."""
    p = tmp_path / "meta.jsonl"
    p.write_bytes(
        b'{"type": "file-history-snapshot", "messageId": "m1", "snapshot": {}}\n'
        b'{"type": "queue-operation", "operation": "enqueue", "sessionId": "s1"}\n'
    )
    r = run_cli("inspect", "--json", "--format", "claude-code", str(p))
    assert r.returncode == 0, r.stderr
    (f,) = orjson.loads(r.stdout)["files"]
    assert f["format"] == "claude-code" and f["messages"] == 0


def test_convert_writes_canonical(tmp_path: Path):
    out = tmp_path / "c.jsonl"
    r = run_cli("convert", "-o", str(out), str(SAMPLES / "small-s1.codex-rollout.jsonl"))
    assert r.returncode == 0
    fmt, events = load(str(out))
    assert fmt == "canonical"
    roles = [m.role for m in replay(events)]
    assert roles.count("user") == 6 and roles.count("tool") == 28
    r = run_cli("convert", "--list-formats", "--json")
    assert {f["name"] for f in orjson.loads(r.stdout)} >= {"claude-code", "swe-agent"}


CONVERT_INPUTS = [
    "small-s1.codex-rollout.jsonl",
    "small-s1.claude-code.jsonl",
    "small-s1.openai-chat.jsonl",
    "small-s1.canonical.jsonl",
]


def test_convert_many_files_in_parallel_equals_one_at_a_time(tmp_path: Path):
    srcs = [str(SAMPLES / n) for n in CONVERT_INPUTS]
    before = [Path(s).read_bytes() for s in srcs]
    one, two = tmp_path / "one", tmp_path / "two"
    assert run_cli("convert", "-q", "--jobs", "1", "-o", f"{one}/", *srcs).returncode == 0
    r = run_cli("convert", "--jobs", "2", "--json", "-o", f"{two}/", *srcs)
    assert r.returncode == 0
    report = orjson.loads(r.stdout)
    assert [f["format"] for f in report["files"]] == [
        "codex-rollout",
        "claude-code",
        "openai-chat",
        "canonical",
    ]
    assert [f["changed"] for f in report["files"]] == [True, True, True, False]
    # the outputs, and the folder of their records (what -o DIR/ wrote, to refuse
    # overwriting an output changed since)
    assert sorted(p.name for p in two.iterdir()) == sorted([*CONVERT_INPUTS, ".compactctl"])
    assert sorted(p.name for p in (two / ".compactctl").iterdir()) == sorted(
        [".lock", *(f"{n}.json" for n in CONVERT_INPUTS)]  # .lock: two runs take turns
    )
    for name in CONVERT_INPUTS:
        assert (two / name).read_bytes() == (one / name).read_bytes()
    # the canonical input comes back byte for byte; no source changed
    assert (two / "small-s1.canonical.jsonl").read_bytes() == before[-1]
    assert [Path(s).read_bytes() for s in srcs] == before


def test_convert_check_and_dry_run_write_nothing(tmp_path: Path):
    foreign = str(SAMPLES / "small-s1.codex-rollout.jsonl")
    canonical = str(SAMPLES / "small-s1.canonical.jsonl")
    out = tmp_path / "out"
    r = run_cli("convert", "--check", "-o", f"{out}/", foreign, canonical)
    assert r.returncode == 1 and not out.exists()
    assert b"1 file would be converted, 1 unchanged" in r.stderr
    assert run_cli("convert", "--check", canonical).returncode == 0
    r = run_cli("convert", "--dry-run", foreign)
    assert r.returncode == 0 and r.stdout == b""
    assert b"codex-rollout -> canonical, 177 events (would write stdout)" in r.stderr


def test_convert_dry_run_refuses_what_the_run_refuses_and_check_does_not(tmp_path: Path):
    """Several inputs and no -o DIR/: the real run is a usage error, so is its dry run;
    --check (a gate that writes nothing) reports each file without claiming an output."""
    foreign = str(SAMPLES / "small-s1.codex-rollout.jsonl")
    canonical = str(SAMPLES / "small-s1.canonical.jsonl")
    for flags in ([], ["--dry-run"]):
        r = run_cli("convert", *flags, foreign, canonical)
        assert r.returncode == 2 and r.stdout == b"", flags
        assert b"give a folder (-o DIR/) to write one file per input" in r.stderr
    r = run_cli("convert", "--check", foreign, canonical)
    assert r.returncode == 1 and r.stdout == b""
    assert b"codex-rollout -> canonical, 177 events (would convert)" in r.stderr
    assert b"canonical -> canonical, 68 events (already canonical)" in r.stderr
    assert b"would write stdout" not in r.stderr
    r = run_cli("convert", "--dry-run", "-o", f"{tmp_path}/", foreign, canonical)
    assert r.returncode == 0 and list(tmp_path.iterdir()) == []


def test_convert_never_mixes_sessions_in_one_output(tmp_path: Path):
    a, b = (str(SAMPLES / n) for n in CONVERT_INPUTS[:2])
    for args in ([], ["-o", str(tmp_path / "one.jsonl")], ["-o", "-"]):
        r = run_cli("convert", *args, a, b)
        assert r.returncode == 2 and r.stdout == b"", args
        assert b"give a folder (-o DIR/) to write one file per input" in r.stderr
    assert not (tmp_path / "one.jsonl").exists()
    assert run_cli("convert", "-q", "-o", str(tmp_path), a, b).returncode == 0  # an existing dir
    outputs = sorted(p.name for p in tmp_path.iterdir() if p.name != ".compactctl")
    assert outputs == sorted(Path(x).name for x in (a, b))


def test_documents_in_folders_are_opt_in(tmp_path: Path) -> None:
    """Folder runs take .json/.traj/.md transcripts only with --documents (issue 17,
    point 4), and then only those a reader recognises, never other JSON."""
    import shutil

    shutil.copyfile(FIXTURES / "formats" / "gemini-cli-described.json", tmp_path / "g.json")
    shutil.copyfile(SAMPLES / "small-s1.canonical.jsonl", tmp_path / "s.jsonl")
    (tmp_path / "package.json").write_text('{"name": "app", "version": "1.0.0"}\n')
    plain = run_cli("inspect", "--json", "--estimate", str(tmp_path))
    names = [Path(f["path"]).name for f in orjson.loads(plain.stdout)["files"]]
    assert plain.returncode == 0 and names == ["s.jsonl"]
    opted = run_cli("inspect", "--json", "--estimate", "--documents", str(tmp_path))
    found = {Path(f["path"]).name: f["format"] for f in orjson.loads(opted.stdout)["files"]}
    assert opted.returncode == 0 and found == {"g.json": "gemini-cli", "s.jsonl": "canonical"}


def test_documents_with_o_dir_refuse_two_inputs_for_one_output(tmp_path: Path) -> None:
    import shutil

    for name in ("gemini-cli-described.json", "gemini-cli-described.jsonl"):
        shutil.copyfile(FIXTURES / "formats" / name, tmp_path / name)
    out = tmp_path / "out"
    r = run_cli("compact", "--force", "--documents", "-o", f"{out}/", str(tmp_path))
    assert r.returncode == 2
    assert (
        f"2 inputs would both be written to {out}/gemini-cli-described.jsonl: "
        f"{tmp_path}/gemini-cli-described.json and {tmp_path}/gemini-cli-described.jsonl; "
        "leave one out, e.g. --exclude /gemini-cli-described.jsonl"
    ) in r.stderr.decode()
    assert not out.exists() or not list(out.iterdir())


@pytest.mark.parametrize(
    ("pattern", "model"),
    [("gemini-cli-0.61.0/session-*.jsonl", "gemini-2.5-flash"),
     ("opencode-1.18.33/ses_*.json", "claude-sonnet-4-5")],
)  # fmt: skip
def test_the_model_of_answers_names_the_session_model(pattern: str, model: str) -> None:
    """Gemini CLI and opencode record the model on each answer, not on the session: it is
    the session's model (its window, no 'no model is recorded' warning)."""
    from compactctl.session import Session

    (path,) = sorted((FIXTURES / "real").glob(pattern))
    r = run_cli("inspect", "--json", "--estimate", str(path))
    doc = orjson.loads(r.stdout)["files"][0]
    assert r.returncode == 0 and doc["model"] == model
    assert b"no model is recorded" not in r.stderr
    session = Session.open(str(path), encoding="estimate")
    assert session.meta.model == model
    assert session.meta.context_window == doc["contextWindow"] >= 200_000
