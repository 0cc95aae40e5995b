"""Nightly runs over mixed folders (issue 19): skips, mirrored outputs, up to date, --check."""

from __future__ import annotations

import gzip
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from tests.helpers import RUN_MAIN, SAMPLES, msg, run_cli, write_jsonl

CLAUDE = SAMPLES / "small-s1.claude-code.jsonl"
CODEX = SAMPLES / "small-s1.codex-rollout.jsonl"
CANONICAL = SAMPLES / "small-s1.canonical.jsonl"
ENV = {"COMPACTCTL_TORN_WAIT": "0"}


def _session(path: Path, n: int, seed: int) -> Path:
    """A small canonical session: ``n`` turns, each with a tool call and a long output."""
    path.parent.mkdir(parents=True, exist_ok=True)
    records = [{"type": "session", "uuid": f"s{seed}", "sessionId": f"sess-{seed}",
                "model": "gpt-4o", "contextWindow": 8000}]  # fmt: skip
    for t in range(n):
        records.append(msg(f"u{seed}-{t}", "user", f"step {t} of task {seed}", turnId=t + 1))
        call = {"id": f"c{seed}-{t}", "name": "bash", "arguments": {"command": f"pytest -k t{t}"}}
        records.append(msg(f"a{seed}-{t}", "assistant", "running", toolCalls=[call], turnId=t + 1))
        out = "\n".join(f"line {i} of output {t} in session {seed}" for i in range(60))
        records.append(
            msg(
                f"t{seed}-{t}",
                "tool",
                out,
                toolCallId=f"c{seed}-{t}",
                toolName="bash",
                turnId=t + 1,
            )  # fmt: skip
        )
    return write_jsonl(path, records)


def _mixed(root: Path) -> dict[str, Path]:
    """A folder of canonical, Claude Code, Codex and gzip transcripts."""
    files = {
        "canonical": _session(root / "a" / "s.jsonl", 8, 1),
        "canonical2": _session(root / "b" / "s.jsonl", 8, 2),
        "claude": root / "a" / "claude.jsonl",
        "codex": root / "b" / "rollout.jsonl",
        "gz": root / "z.jsonl.gz",
    }
    files["claude"].write_bytes(CLAUDE.read_bytes())
    files["codex"].write_bytes(CODEX.read_bytes())
    files["gz"].write_bytes(gzip.compress(CANONICAL.read_bytes(), mtime=0))
    return files


def _snapshot(root: Path) -> dict[str, tuple[bytes, int]]:
    return {
        str(p.relative_to(root)): (p.read_bytes(), p.stat().st_mtime_ns)
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def test_mixed_folder_in_place_skips_foreign_and_gzip_twice(tmp_path: Path) -> None:
    files = _mixed(tmp_path / "t")
    foreign = {k: files[k].read_bytes() for k in ("claude", "codex", "gz")}
    for night in (1, 2):
        r = run_cli("compact", "--force", "--no-store", str(tmp_path / "t"), env=ENV)
        err = r.stderr.decode()
        assert r.returncode == 0, err
        for key in ("claude", "codex", "gz"):
            assert f"{files[key]}: skipped: " in err, (night, key, err)
        assert "claude-code transcript, never appended to; to process it: -o DIR/" in err
        assert "--as native (a new claude-code session)" in err
        assert f"{files['gz']}: skipped: a gzip-compressed transcript" in err
        assert "3 skipped" in err.splitlines()[-1]
        if night == 1:
            assert err.splitlines()[-1].startswith("2 files compacted")
        else:
            assert err.splitlines()[-1].startswith("0 files compacted, 2 unchanged")
    assert {k: files[k].read_bytes() for k in foreign} == foreign


def test_skips_in_json_and_named_foreign_file_still_fails(tmp_path: Path) -> None:
    files = _mixed(tmp_path / "t")
    r = run_cli("rules", "--json", "--no-store", str(tmp_path / "t"), env=ENV)
    assert r.returncode == 0, r.stderr.decode()
    doc = orjson.loads(r.stdout)
    skipped = [f for f in doc["files"] if f.get("outcome") == "skipped"]
    assert sorted(f["path"] for f in skipped) == sorted(
        str(files[k]) for k in ("claude", "codex", "gz")
    )
    assert all(f["reason"].endswith("-o DIR/ (canonical JSONL)") for f in skipped)
    assert (
        doc["totals"]["skipped"] == 3 and doc["totals"]["files"] == 5
    )  # every file given, skipped ones too
    assert doc["totals"]["failed"] == 0
    # named on the command line, a foreign file is still refused (exit 3)
    r = run_cli("rules", "--no-store", str(files["claude"]), str(files["canonical"]), env=ENV)
    assert r.returncode == 3 and b"never appends to another agent's file" in r.stderr


def test_check_exit_codes(tmp_path: Path) -> None:
    clean = tmp_path / "clean"
    _session(clean / "s.jsonl", 2, 3)
    r = run_cli("compact", "--check", str(clean), env=ENV)
    assert r.returncode == 0, r.stderr.decode()
    work = tmp_path / "work"
    _session(work / "s.jsonl", 2, 4)
    _session(work / "deep" / "big.jsonl", 12, 5)  # 12 long outputs in an 8,000-token window
    r = run_cli("compact", "--check", str(work), env=ENV)
    assert r.returncode == 1, r.stderr.decode()
    assert b"big.jsonl: would append micro compaction" in r.stderr
    garbage = tmp_path / "garbage"
    garbage.mkdir()
    (garbage / "x.jsonl").write_bytes(b'{"hello": 1}\n{"world": 2}\n')
    _session(garbage / "s.jsonl", 2, 6)
    for command in ("compact", "rules", "dedup", "tiers"):
        r = run_cli(command, "--check", str(garbage), env=ENV)
        assert r.returncode == 3 and b"unknown transcript format" in r.stderr, command
    # one Claude Code file needing work: judged on its canonical form, exit 1 (not 3)
    cc = tmp_path / "cc"
    cc.mkdir()
    (cc / "session.jsonl").write_bytes(CLAUDE.read_bytes())
    r = run_cli("compact", "--check", "--context-window", "20000", str(cc), env=ENV)
    assert r.returncode == 1, r.stderr.decode()
    assert b"would append micro compaction" in r.stderr
    r = run_cli("compact", "--check", str(cc), env=ENV)  # nothing to do in 200k tokens
    assert r.returncode == 0, r.stderr.decode()
    assert (cc / "session.jsonl").read_bytes() == CLAUDE.read_bytes()


def test_output_dir_mirrors_the_tree_and_never_reads_itself(tmp_path: Path) -> None:
    tree = tmp_path / "t"
    files = _mixed(tree)
    out = tree / "out"
    r = run_cli("compact", "--force", "--no-store", "-o", f"{out}/", str(tree), env=ENV)
    assert r.returncode == 0, r.stderr.decode()
    outputs = sorted(str(p.relative_to(out)) for p in out.rglob("*.jsonl"))
    assert outputs == ["a/claude.jsonl", "a/s.jsonl", "b/rollout.jsonl", "b/s.jsonl", "z.jsonl"]
    # a/s.jsonl and b/s.jsonl kept apart: each output holds its own session
    assert b'"sess-1"' in (out / "a" / "s.jsonl").read_bytes()
    assert b'"sess-2"' in (out / "b" / "s.jsonl").read_bytes()
    assert (files["canonical"]).read_bytes().count(b"\n") == 25  # the source is unchanged
    before = _snapshot(out)
    r = run_cli("compact", "--force", "--no-store", "-o", f"{out}/", str(tree), env=ENV)
    err = r.stderr.decode()
    assert r.returncode == 0, err
    assert "out/" not in "".join(line.split(":")[0] for line in err.splitlines())
    assert err.count("up to date: ") == 5
    assert err.splitlines()[-1] == "0 files compacted, 5 up to date (nothing written)."
    assert _snapshot(out) == before  # no output rewritten, bytes and mtimes the same
    # an input that changes is planned and written again; the others stay
    with files["canonical"].open("ab") as fh:
        fh.write(orjson.dumps(msg("late", "user", "one more thing", turnId=99)) + b"\n")
    r = run_cli("compact", "--force", "--no-store", "-o", f"{out}/", str(tree), env=ENV)
    assert r.returncode == 0 and r.stderr.decode().count("up to date: ") == 4
    assert b"one more thing" in (out / "a" / "s.jsonl").read_bytes()
    # other options are another output: not up to date
    r = run_cli("compact", "--no-store", "--keep-recent", "2", "-o", f"{out}/", str(tree), env=ENV)
    assert r.returncode == 0 and b"up to date" not in r.stderr


def test_transcripts_already_in_an_output_dir_inside_the_tree_are_said(tmp_path: Path) -> None:
    """``compact -o T/sub/ T``: the -o folder is never searched for inputs, and a transcript
    there that no run wrote was left out without a word (review: read as an input?
    skipped?). Now a warning names the folder and it, once a run; compactctl's own outputs
    there are not counted; named in PATHS, it is processed and not counted either."""
    tree = tmp_path / "T"
    (tree / "sub").mkdir(parents=True)
    (tree / "a.jsonl").write_bytes(CANONICAL.read_bytes())
    theirs = CLAUDE.read_bytes()
    (tree / "sub" / "old.jsonl").write_bytes(theirs)
    warning = (
        "compactctl: warning: T/sub: not searched for inputs, being the -o folder (a run never "
        "reads its outputs back): 1 transcript there that compactctl did not write "
        "(T/sub/old.jsonl) left out; to process it, name it in PATHS or write to an -o "
        "folder outside the input tree"
    )
    for night in (1, 2):  # the second night, a.jsonl's output is there too, not counted
        r = run_cli("compact", "--force", "--no-store", "-o", "T/sub/", "T", cwd=tmp_path, env=ENV)
        lines = r.stderr.decode().splitlines()
        assert r.returncode == 0 and lines[0] == warning, lines
        assert [x for x in lines if "warning" in x] == [warning], night
    assert sorted(str(p.relative_to(tree)) for p in tree.rglob("*.jsonl")) == [
        "a.jsonl", "sub/a.jsonl", "sub/old.jsonl"
    ]  # fmt: skip
    assert (tree / "sub" / "old.jsonl").read_bytes() == theirs
    named = run_cli("compact", "--force", "--no-store", "-o", "T/sub/", "T", "./T/sub/old.jsonl",
                    cwd=tmp_path, env=ENV)  # fmt: skip
    assert named.returncode == 0 and b"warning" not in named.stderr, named.stderr
    assert (tree / "sub" / "sub" / "old.jsonl").is_file()
    assert (tree / "sub" / "old.jsonl").read_bytes() == theirs
    again = run_cli("compact", "--force", "--no-store", "-o", "T/sub/", "T", cwd=tmp_path, env=ENV)
    assert b"warning" in again.stderr  # sub/old.jsonl again, not its output sub/sub/old.jsonl
    assert b"(T/sub/old.jsonl) left out" in again.stderr


def test_two_inputs_for_one_output_are_named_with_the_fix(tmp_path: Path) -> None:
    """A fresh-user trial: ``compact -o out2/ tree2/`` with ``archive/old.jsonl`` and
    ``archive/old.jsonl.gz`` said only ``two inputs would both be written to
    out2/archive/old.jsonl``. The refusal names both inputs and the ``--exclude`` that
    fixes it, which does; files named from two folders are told to name the folder."""
    tree = tmp_path / "tree2"
    old = _session(tree / "archive" / "old.jsonl", 2, 1)
    (tree / "archive" / "old.jsonl.gz").write_bytes(gzip.compress(old.read_bytes()))
    _session(tree / "top.jsonl", 2, 2)
    r = run_cli("compact", "--force", "--no-store", "-o", "out2/", "tree2/", cwd=tmp_path)
    assert r.returncode == 2
    assert r.stderr.decode() == (
        "compactctl: error: 2 inputs would both be written to out2/archive/old.jsonl: "
        "tree2/archive/old.jsonl and tree2/archive/old.jsonl.gz (-o DIR/ writes uncompressed "
        "canonical JSONL, named without .gz); leave one out, e.g. --exclude "
        "/archive/old.jsonl.gz (or --exclude '*.gz' for every gzip copy)\n"
    )
    assert old.read_bytes().count(b"\n") == 7  # nothing was appended
    for exclude in ("/archive/old.jsonl.gz", "*.gz"):
        r = run_cli("compact", "--force", "--no-store", "-o", "out2/", "--exclude", exclude,
                    "tree2/", cwd=tmp_path)  # fmt: skip
        assert r.returncode == 0, r.stderr
        written = (tmp_path / "out2").rglob("*.jsonl")
        names = sorted(str(p.relative_to(tmp_path / "out2")) for p in written)
        assert names == ["archive/old.jsonl", "top.jsonl"]
    for d in ("x", "y"):
        _session(tmp_path / d / "s.jsonl", 2, 3)
    r = run_cli("convert", "-o", "out3/", "x/s.jsonl", "y/s.jsonl", cwd=tmp_path)
    assert r.returncode == 2
    assert (
        "2 inputs would both be written to out3/s.jsonl: x/s.jsonl and y/s.jsonl; name the "
        "folder that holds them instead (-o DIR/ mirrors a folder's tree)"
    ) in r.stderr.decode()


def test_a_stray_file_in_a_folder_fails_with_how_to_exclude_it(tmp_path: Path) -> None:
    """A fresh-user trial: one application log named ``*.jsonl`` in the sessions folder
    failed every nightly run, and the message offered only ``--format``. Found by a folder
    walk, it still fails (exit 3: never skipped in silence), and the message adds the
    ``--exclude`` that leaves it out, which does; named, it is not told to exclude itself."""
    tree = tmp_path / "t"
    _session(tree / "s.jsonl", 2, 1)
    log = tree / "logs" / "app.jsonl"
    log.parent.mkdir()
    log.write_bytes(b'{"level": "info", "msg": "up"}\n{"level": "warn", "msg": "slow"}\n')
    hint = (
        "Pass --format NAME to read it as one of them anyway. Found in the folder t: if it "
        "is not a transcript, leave it out with --exclude /logs/app.jsonl"
    )
    for jobs in ("1", "2"):
        r = run_cli("compact", "--force", "--no-store", "--jobs", jobs, "t", cwd=tmp_path, env=ENV)
        assert r.returncode == 3
        err = r.stderr.decode()
        assert "compactctl: t/logs/app.jsonl: unknown transcript format" in err
        assert err.count(hint) == 1, err
    r = run_cli("inspect", "--json", "--estimate", "t", cwd=tmp_path)
    (error,) = orjson.loads(r.stdout)["totals"]["errors"]
    assert r.returncode == 3 and error["code"] == "notATranscript"
    assert error["message"].endswith(hint)
    r = run_cli("compact", "--force", "--no-store", "--exclude", "/logs/app.jsonl", "t",
                cwd=tmp_path, env=ENV)  # fmt: skip
    assert r.returncode == 0, r.stderr
    r = run_cli("inspect", "t/logs/app.jsonl", cwd=tmp_path)
    assert r.returncode == 3 and b"unknown transcript format" in r.stderr
    assert b"--exclude" not in r.stderr  # named: nothing to leave out of a walk


def test_filters_choose_the_files(tmp_path: Path) -> None:
    tree = tmp_path / "t"
    old = _session(tree / "old.jsonl", 2, 7)
    _session(tree / "live.jsonl", 2, 8)
    _session(tree / "archive" / "a.jsonl", 2, 9)
    day_ago = time.time() - 86400
    os.utime(old, (day_ago, day_ago))
    os.utime(tree / "archive" / "a.jsonl", (day_ago, day_ago))

    def names(*args: str) -> list[str]:
        r = run_cli("inspect", "--json", "--estimate", *args, str(tree))
        assert r.returncode == 0, r.stderr.decode()
        return sorted(Path(f["path"]).name for f in orjson.loads(r.stdout)["files"])

    assert names("--older-than", "1h") == ["a.jsonl", "old.jsonl"]
    assert names("--since", "2h") == ["live.jsonl"]
    assert names("--exclude", "archive/") == ["live.jsonl", "old.jsonl"]
    assert names("--glob", "archive/*.jsonl") == ["a.jsonl"]
    assert names("--glob", "*.jsonl", "--exclude", "live.jsonl") == ["a.jsonl", "old.jsonl"]
    r = run_cli("compact", "--older-than", "1w", "--no-store", str(tree), env=ENV)
    assert r.returncode == 0 and b"none of its 3 transcripts passes --older-than" in r.stderr
    r = run_cli("compact", "--older-than", "soon", str(tree))
    assert r.returncode == 2 and b"--older-than takes a duration such as 30m" in r.stderr
    r = run_cli("rules", "--until", "yesterday", str(tree))
    assert r.returncode == 2 and b"--until takes a date (2026-01-31)" in r.stderr


def test_a_named_file_the_filters_leave_out_is_said(tmp_path: Path) -> None:
    """A fresh-user trial: ``compact --force --older-than 2h fresh.jsonl`` printed nothing
    (even with ``-v``), exit 0, and ``--json`` gave ``"files": []`` with no count. A file
    named on the command line that a filter leaves out is named on stderr with the filter
    that left it out, and counted in ``totals.leftOut``, as a folder's files are."""
    fresh = _session(tmp_path / "fresh.jsonl", 2, 3)
    folder = tmp_path / "t"
    _session(folder / "live.jsonl", 2, 4)
    old = _session(folder / "old.jsonl", 2, 5)
    day_ago = time.time() - 86400
    os.utime(old, (day_ago, day_ago))
    half_hour_ago = time.time() - 1800
    os.utime(fresh, (half_hour_ago, half_hour_ago))
    before = fresh.read_bytes()
    r = run_cli("compact", "--force", "--no-store", "--older-than", "2h", str(fresh), env=ENV)
    assert r.returncode == 0 and fresh.read_bytes() == before
    said = (
        re.escape(f"compactctl: warning: {fresh}: left out by the filters (--older-than 2h: ")
        + r"it was modified 30m(\d+s)? ago"
        + re.escape("); nothing was done with it\n")
    )
    assert re.fullmatch(said, r.stderr.decode()), r.stderr
    r = run_cli("compact", "--force", "--no-store", "--json", "--older-than", "2h",
                str(fresh), str(folder), env=ENV)  # fmt: skip
    assert r.returncode == 0, r.stderr
    doc = orjson.loads(r.stdout)
    assert [Path(f["path"]).name for f in doc["files"]] == ["old.jsonl"]
    assert doc["totals"]["leftOut"] == 2 and doc["totals"]["files"] == 1  # fresh and live
    assert r.stderr.decode().count("left out by the filters") == 1  # the named one
    r = run_cli("inspect", "--exclude", "*.jsonl", str(fresh), cwd=tmp_path)
    assert r.returncode == 0
    assert f"{fresh}: left out by the filters (--exclude '*.jsonl' matches it)" in r.stderr.decode()
    r = run_cli("inspect", "-q", "--exclude", "*.jsonl", str(fresh))
    assert r.returncode == 0 and r.stderr == b""  # -q: errors only
    r = run_cli("compact", "--force", "--no-store", "--json", "--older-than", "2h", str(old))
    assert orjson.loads(r.stdout)["totals"]["leftOut"] == 0  # the key is always there


@pytest.mark.parametrize("mode", ["in-place", "output"])
def test_two_hundred_file_mixed_tree_two_nights(tmp_path: Path, mode: str) -> None:
    tree = tmp_path / "sessions"
    foreign = [CLAUDE.read_bytes(), CODEX.read_bytes()]
    for i in range(200):
        folder = tree / f"p{i % 7}" / f"d{i % 3}"
        if i % 10 == 0:
            folder.mkdir(parents=True, exist_ok=True)
            (folder / f"s{i}.jsonl").write_bytes(foreign[(i // 10) % 2])
        elif i % 10 == 5:
            folder.mkdir(parents=True, exist_ok=True)
            data = b"".join(orjson.dumps(msg(f"m{i}-{k}", "user", f"hi {k}")) + b"\n"
                            for k in range(3))  # fmt: skip
            (folder / f"s{i}.jsonl.gz").write_bytes(gzip.compress(data, mtime=0))
        else:
            _session(folder / "s.jsonl" if i < 7 else folder / f"s{i}.jsonl", 3 + i % 9, i)
    assert sum(1 for _ in tree.rglob("*.jsonl*")) == 200
    out = tree / "compacted"
    args = ["compact", "--no-store", "--jobs", "2", str(tree)]
    if mode == "output":
        args[1:1] = ["-o", f"{out}/"]
    snapshots = []
    for night in (1, 2):
        r = run_cli(*args, env=ENV)
        last = r.stderr.decode().splitlines()[-1]
        assert r.returncode == 0, r.stderr.decode()[-2000:]
        snapshots.append(_snapshot(tmp_path))
        if mode == "in-place":
            assert last.endswith("40 skipped."), last  # 20 foreign + 20 gzip
        elif night == 1:
            assert "up to date" not in last and len(list(out.rglob("*.jsonl"))) == 200
        else:
            assert last == "0 files compacted, 200 up to date (nothing written).", last
        if night == 1:
            assert "compacted" in last and not last.startswith("0 files"), last
    assert snapshots[0] == snapshots[1]  # the second night wrote nothing


@pytest.mark.parametrize(
    "command",
    [("rules",), ("dedup",), ("tiers", "--tier", "L0"), ("compact", "--force", "--layers", "all")],
)
def test_every_command_is_up_to_date_on_the_second_night(
    tmp_path: Path, command: tuple[str, ...]
) -> None:
    """The options' fingerprint is the same in every process: rules' options hold a set of
    roles, whose repr order follows the per-process hash seed, so a fingerprint of that repr
    made every night's rules -o DIR/ run rewrite everything."""
    tree = tmp_path / "t"
    _mixed(tree)
    out = tmp_path / "out"
    nights = []
    for seed, quiet in (("1", ()), ("2", ("-q",))):  # -q changes the report, not the output
        env = {**ENV, "PYTHONHASHSEED": seed}
        r = run_cli(*command, *quiet, "--no-store", "-o", f"{out}/", str(tree), env=env)
        assert r.returncode == 0, r.stderr.decode()
        nights.append((r.stderr.decode(), _snapshot(out)))
    assert nights[1][0] == ""  # -q: nothing to say
    assert nights[1][1] == nights[0][1]


def _old_and_live(tmp_path: Path) -> tuple[Path, Path]:
    """A folder of two sessions: ``old.jsonl`` last written 5 hours ago, ``live.jsonl``
    now. Returns ``(folder, old)``."""
    folder = tmp_path / "in"
    folder.mkdir()
    old = folder / "old.jsonl"
    old.write_bytes((SAMPLES / "small-s1.canonical.jsonl").read_bytes())
    (folder / "live.jsonl").write_bytes((SAMPLES / "messy-s2.canonical.jsonl").read_bytes())
    hours_ago = time.time() - 5 * 3600
    os.utime(old, (hours_ago, hours_ago))
    return folder, old


def test_one_output_file_counts_the_inputs_the_filters_keep(tmp_path: Path) -> None:
    """``-o FILE`` takes one transcript: counted after --older-than/--glob, not before (a
    folder of two sessions, one of them live, goes to one output file)."""
    folder, old = _old_and_live(tmp_path)
    out = tmp_path / "out.jsonl"
    r = run_cli("compact", "--force", "--older-than", "2h", "-o", str(out), str(folder))
    assert r.returncode == 0, r.stderr
    assert out.read_bytes().startswith(old.read_bytes())
    r = run_cli("compact", "--force", "-o", str(tmp_path / "two.jsonl"), str(folder))
    assert r.returncode == 2 and b"would receive 2 transcripts" in r.stderr


def test_convert_and_undo_count_the_inputs_the_filters_keep(tmp_path: Path) -> None:
    """``convert`` to stdout and ``undo --event`` take one transcript: counted after the
    filters, as ``-o FILE`` is (a folder with one old session and one live one)."""
    folder, old = _old_and_live(tmp_path)
    r = run_cli("convert", "--older-than", "2h", str(folder))
    assert r.returncode == 0, r.stderr
    assert r.stdout == old.read_bytes()  # canonical already: converted as it is
    r = run_cli("convert", str(folder))
    assert r.returncode == 2 and b"stdout would receive several" in r.stderr
    r = run_cli("undo", "--event", "no-such-event", "--older-than", "2h", str(folder))
    assert r.returncode == 2 and b"old.jsonl: --event no-such-event: no compact" in r.stderr
    r = run_cli("undo", "--event", "no-such-event", str(folder))
    assert r.returncode == 2 and b"--event names an event of one transcript" in r.stderr


_COUNT_WALKS = (
    """
import os, sys
folder = os.path.realpath(sys.argv[1])
walks = []
def hook(event, args):
    if event == "os.scandir" and args[0] is not None:
        if os.path.realpath(os.fsdecode(args[0])) == folder:
            walks.append(1)
sys.addaudithook(hook)
"""
    + RUN_MAIN
    + """
sys.stderr.write(f"EXIT {code} WALKS {len(walks)}\\n")
"""
)
"""Runs ``compactctl ARGS`` (``python -c _COUNT_WALKS FOLDER ARGS...``) and ends its stderr
with ``EXIT C WALKS N``: the exit code, and how many times the folder was listed (the
``os.scandir`` calls an audit hook saw on it: one per walk of PATHS)."""


@pytest.mark.parametrize(
    "args",
    [
        ("convert", "--older-than", "2h"),
        ("convert", "--older-than", "2h", "-o", "{tmp}/one.jsonl"),
        ("convert", "-o", "{tmp}/out/"),
        ("undo", "--event", "no-such-event", "--older-than", "2h"),
        ("undo", "--older-than", "2h", "-o", "{tmp}/undone.jsonl"),
        ("rules", "--no-store", "-o", "{tmp}/mirror/"),
        ("compact", "--force", "--no-store", "--older-than", "2h", "-o", "{tmp}/c.jsonl"),
        ("dedup", "--no-store", "--dry-run"),
    ],
)
def test_a_command_walks_its_folder_once(tmp_path: Path, args: tuple[str, ...]) -> None:
    """The one-input checks (``-o FILE``, ``convert`` to stdout, ``undo --event``), the
    ``-o DIR/`` targets and the run take one walk of PATHS: the folder is listed once."""
    folder, _ = _old_and_live(tmp_path)
    argv = [a.replace("{tmp}", str(tmp_path)) for a in args]
    code = 2 if "--event" in args else 0  # no such event: named as the usage error it is
    proc = subprocess.run(
        [sys.executable, "-c", _COUNT_WALKS, str(folder), *argv, str(folder)],
        capture_output=True,
        env={**os.environ, **ENV},
        timeout=120,
    )
    last = proc.stderr.decode().strip().splitlines()[-1]
    assert last == f"EXIT {code} WALKS 1", proc.stderr.decode()


def test_an_output_changed_since_it_was_written_is_never_overwritten(tmp_path: Path) -> None:
    """An ``-o DIR/`` output an agent resumed (a line appended), or that ``undo`` appended
    to, is someone's data now: the re-run refuses it (exit 3, naming it and how to go on)
    and still does the other files; removed, it is written again."""
    tree = tmp_path / "in"
    _session(tree / "s.jsonl", 8, 1)
    _session(tree / "t.jsonl", 8, 2)
    out = tmp_path / "out"
    args = ("compact", "--force", "--no-store", "-o", f"{out}/", str(tree))
    r = run_cli(*args, env=ENV)
    assert r.returncode == 0, r.stderr.decode()
    resumed = orjson.dumps(msg("resumed", "user", "carry on from the summary", turnId=99))
    with (out / "s.jsonl").open("ab") as fh:
        fh.write(resumed + b"\n")
    grown = (out / "s.jsonl").read_bytes()
    r = run_cli(*args, "--json", env=ENV)
    assert r.returncode == 3, r.stderr.decode()
    assert (out / "s.jsonl").read_bytes() == grown  # the appended line is still there
    entries = {e["path"]: e for e in orjson.loads(r.stdout)["files"]}
    refused = entries[str(tree / "s.jsonl")]
    assert refused["outcome"] == "failed" and refused["error"]["code"] == "outputChanged"
    message = refused["error"]["message"]
    assert f"its output {out}/s.jsonl changed since compactctl wrote it" in message
    assert f"{len(grown) - len(resumed) - 1:,} bytes written, {len(grown):,} bytes now" in message
    assert "Move or remove it to write it again, or write to another -o DIR/" in message
    assert entries[str(tree / "t.jsonl")]["upToDate"] is True
    assert f"{tree}/s.jsonl: its output {out}/s.jsonl changed" in r.stderr.decode()
    # undo appending a revert to the other output: the same case
    r = run_cli("undo", "--no-store", str(out / "t.jsonl"), env=ENV)
    assert r.returncode == 0, r.stderr.decode()
    undone = (out / "t.jsonl").read_bytes()
    r = run_cli(*args, env=ENV)
    assert r.returncode == 3
    assert (out / "t.jsonl").read_bytes() == undone and (out / "s.jsonl").read_bytes() == grown
    assert r.stderr.decode().count("changed since compactctl wrote it") == 2
    # removed, an output is written again, and is up to date on the next run
    (out / "s.jsonl").unlink()
    r = run_cli(*args, env=ENV)
    assert r.returncode == 3 and b"carry on from the summary" not in (out / "s.jsonl").read_bytes()
    rewritten = (out / "s.jsonl").read_bytes()  # the input and this run's two events
    assert rewritten.startswith((tree / "s.jsonl").read_bytes())
    assert rewritten.count(b"\n") == grown.count(b"\n") - 1 == 25 + 2
    (out / "t.jsonl").unlink()
    r = run_cli(*args, env=ENV)
    assert r.returncode == 0 and r.stderr.decode().count("up to date: ") == 1
    r = run_cli(*args, env=ENV)
    last = r.stderr.decode().splitlines()[-1]
    assert r.returncode == 0 and last == "0 files compacted, 2 up to date (nothing written)."


def test_convert_never_overwrites_an_output_changed_since_it_wrote_it(tmp_path: Path) -> None:
    """``convert -o DIR/`` records what it wrote as the other commands do: a converted
    session that an agent then resumed is refused, not converted over."""
    tree = tmp_path / "in"
    _mixed(tree)
    out = tmp_path / "out"
    r = run_cli("convert", "-o", f"{out}/", str(tree), env=ENV)
    assert r.returncode == 0, r.stderr.decode()
    assert (out / ".compactctl" / "a" / "claude.jsonl.json").is_file()
    with (out / "a" / "claude.jsonl").open("ab") as fh:
        fh.write(orjson.dumps(msg("resumed", "user", "go on", turnId=99)) + b"\n")
    grown = (out / "a" / "claude.jsonl").read_bytes()
    before = _snapshot(out)
    r = run_cli("convert", "-o", f"{out}/", str(tree), env=ENV)
    err = r.stderr.decode()
    assert r.returncode == 3, err
    assert f"its output {out}/a/claude.jsonl changed since compactctl wrote it" in err
    assert (out / "a" / "claude.jsonl").read_bytes() == grown
    assert _snapshot(out) == before  # the others held their bytes: not rewritten


@pytest.mark.parametrize("command", [("rules",), ("compact", "--force"), ("convert",)])
def test_a_file_compactctl_did_not_write_is_never_overwritten(
    tmp_path: Path, command: tuple[str, ...]
) -> None:
    """A file at an ``-o DIR/`` output's path with no record of compactctl's (the user's own,
    another tool's) is refused (exit 3, naming it and how to go on), nothing lands for it,
    and the other files are done; compactctl's own output (with its record) is up to date
    on the re-run, and the refused one is written once the file is moved away."""
    tree = tmp_path / "in"
    _session(tree / "s.jsonl", 8, 1)
    _session(tree / "t.jsonl", 8, 2)
    out = tmp_path / "out"
    out.mkdir()
    mine = b"my own notes, not a transcript\n"
    (out / "s.jsonl").write_bytes(mine)
    args = (*command, *(("--no-store",) if command[0] != "convert" else ()), "-o", f"{out}/")
    r = run_cli(*args, "--json", str(tree), env=ENV)
    assert r.returncode == 3, r.stderr.decode()
    assert (out / "s.jsonl").read_bytes() == mine
    assert not (out / ".compactctl" / "s.jsonl.json").exists()
    doc = orjson.loads(r.stdout)
    entries = {e["path"]: e for e in doc["files"]}
    refused = entries[str(tree / "s.jsonl")]
    assert refused["outcome"] == "failed" and refused["error"]["code"] == "outputNotOurs"
    assert refused["error"]["message"] == (
        f"its output {out}/s.jsonl is a file compactctl did not write (there is no record of "
        f"it in {out}/.compactctl): it is not overwritten (nothing was written). Move it away "
        "to have compactctl write there, or write to another -o DIR/"
    )
    done = entries[str(tree / "t.jsonl")]
    assert done.get("written", done.get("output")) == f"{out}/t.jsonl"  # convert: output
    assert doc["totals"]["failed"] == 1 and doc["totals"]["tokensSaved"] == done.get("tokensSaved")
    # the re-run: compactctl's own output is up to date, the user's file still refused
    r = run_cli(*args, str(tree), env=ENV)
    err = r.stderr.decode()
    assert r.returncode == 3 and (out / "s.jsonl").read_bytes() == mine
    assert f"{tree}/s.jsonl: its output {out}/s.jsonl is a file compactctl did not write" in err
    assert f"{tree}/t.jsonl: up to date: {out}/t.jsonl holds this output already" in err
    # moved away, it is written; then both are up to date
    (out / "s.jsonl").rename(tmp_path / "mine.txt")
    r = run_cli(*args, str(tree), env=ENV)
    assert r.returncode == 0, r.stderr.decode()
    assert (out / "s.jsonl").read_bytes().startswith((tree / "s.jsonl").read_bytes()[:40])
    r = run_cli(*args, str(tree), env=ENV)
    assert r.returncode == 0 and r.stderr.decode().count("up to date: ") == 2


def test_a_folder_run_takes_each_file_once_and_stays_inside_the_folder(tmp_path: Path) -> None:
    """A file symlink in a folder is not followed out of it (``elsewhere/private.jsonl``
    is never appended to by a run over ``tree``), and two paths to one file are one job:
    the first found in the walk's order is kept, the other is skipped naming it."""
    tree = tmp_path / "tree"
    a = _session(tree / "a.jsonl", 8, 1)
    (tree / "b.jsonl").symlink_to("a.jsonl")
    private = _session(tmp_path / "elsewhere" / "private.jsonl", 8, 2)
    (tree / "link.jsonl").symlink_to(os.path.join("..", "elsewhere", "private.jsonl"))
    before_a, before_private = a.read_bytes(), private.read_bytes()
    args = ("compact", "--force", "--no-store", "--jobs", "2")
    r = run_cli(*args, "--json", str(tree), env=ENV)
    assert r.returncode == 0, r.stderr.decode()
    assert private.read_bytes() == before_private  # outside the tree: untouched
    grown = a.read_bytes()
    assert grown.startswith(before_a) and grown.count(b"\n") == before_a.count(b"\n") + 2
    doc = orjson.loads(r.stdout)
    entries = {e["path"]: e for e in doc["files"]}
    assert entries[f"{tree}/a.jsonl"]["outcome"] == "changed"
    assert entries[f"{tree}/b.jsonl"] == {
        "path": f"{tree}/b.jsonl",
        "outcome": "skipped",
        "reason": f"the same file as {tree}/a.jsonl, taken already in this run",
    }
    assert entries[f"{tree}/link.jsonl"]["outcome"] == "skipped"
    assert entries[f"{tree}/link.jsonl"]["reason"] == (
        f"a symbolic link to {private}, outside {tree}: a folder run never follows a link out "
        "of its folder (name the file itself to process it)"
    )
    saved = entries[f"{tree}/a.jsonl"]["tokensSaved"]
    assert doc["totals"]["skipped"] == 2 and doc["totals"]["changed"] == 1
    assert saved > 0 and doc["totals"]["tokensSaved"] == saved  # one file's saving, once
    # the summary line counts the skips; each skip is said on stderr
    r = run_cli(*args, str(tree), env=ENV)
    err = r.stderr.decode()
    assert r.returncode == 0, err
    assert err.splitlines()[-1] == "0 files compacted, 1 unchanged, 2 skipped."
    assert f"{tree}/link.jsonl: skipped: a symbolic link to {private}, outside" in err
    assert private.read_bytes() == before_private
    # named on the command line, a symlink is read wherever it leads
    r = run_cli(*args, str(tree / "link.jsonl"), env=ENV)
    assert r.returncode == 0, r.stderr.decode()
    after = private.read_bytes()
    assert after.startswith(before_private) and after.count(b"\n") == 25 + 2
