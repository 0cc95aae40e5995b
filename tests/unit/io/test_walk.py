"""Finding files (:func:`compactctl.io.files.walk`), the cron filters, ``-o DIR/`` names,
and deciding that an output is up to date (issue 19)."""

from __future__ import annotations

import datetime as dt
import gzip
import os
import time
from dataclasses import replace
from pathlib import Path

import pytest

from compactctl.app import provenance
from compactctl.app.jobs import OutputOptions, mirrored_name
from compactctl.errors import UsageError
from compactctl.io.files import Found, walk, write_output, write_unless_same
from compactctl.io.filters import FileFilter, parse_duration, parse_when
from compactctl.session import Session
from tests.helpers import msg, write_jsonl


def _tree(root: Path) -> list[Path]:
    paths = [root / "a" / "s.jsonl", root / "b" / "s.jsonl", root / "b" / "c" / "t.jsonl.gz",
             root / "top.jsonl", root / "notes.txt"]  # fmt: skip
    for p in paths:
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(b"{}\n")
    return paths


def test_walk_finds_files_with_their_root_in_order(tmp_path: Path) -> None:
    _tree(tmp_path / "t")
    named = tmp_path / "t" / "top.jsonl"
    found = walk([str(tmp_path / "t"), str(named), "-"])
    root = str(tmp_path / "t")
    assert found.files == [
        Found(f"{root}/a/s.jsonl", root),
        Found(f"{root}/b/c/t.jsonl.gz", root),
        Found(f"{root}/b/s.jsonl", root),
        Found(f"{root}/top.jsonl", root),  # found in the folder first: it keeps that root
        Found("-", None),
    ]
    assert walk([str(named)]).files == [Found(str(named), None)]
    assert found.errors == [] and found.left_out == 0


def test_walk_takes_each_file_once_and_no_link_out_of_a_folder(tmp_path: Path) -> None:
    root = tmp_path / "t"
    _tree(root)
    os.link(root / "top.jsonl", root / "hard.jsonl")  # a hard link: one file, two names
    (root / "a" / "via.jsonl").symlink_to(os.path.join("..", "b", "s.jsonl"))
    (tmp_path / "x.jsonl").write_bytes(b"{}\n")
    (root / "out.jsonl").symlink_to(tmp_path / "x.jsonl")
    found = walk([str(root), f"{root}/../t/top.jsonl", str(root / "out.jsonl")])
    t = str(root)
    assert [f.path for f in found.files] == [f"{t}/a/s.jsonl", f"{t}/a/via.jsonl",
        f"{t}/b/c/t.jsonl.gz", f"{t}/hard.jsonl", f"{t}/out.jsonl"]  # fmt: skip
    assert found.files[-1].root is None  # named: read wherever its link leads
    assert found.skipped == [
        (f"{t}/b/s.jsonl", f"the same file as {t}/a/via.jsonl, taken already in this run"),
        (f"{t}/top.jsonl", f"the same file as {t}/hard.jsonl, taken already in this run"),
        (f"{t}/../t/top.jsonl", f"the same file as {t}/hard.jsonl, taken already in this run"),
    ]  # fmt: skip
    # found in the folder alone, the link out of it is skipped
    assert walk([str(root)]).skipped[1] == (
        f"{t}/out.jsonl", f"a symbolic link to {tmp_path}/x.jsonl, outside {t}: a folder run "
        "never follows a link out of its folder (name the file itself to process it)")  # fmt: skip


def test_walk_never_enters_a_skipped_folder(tmp_path: Path) -> None:
    _tree(tmp_path / "t")
    out = tmp_path / "t" / "out"
    (out / "a").mkdir(parents=True)
    (out / "a" / "s.jsonl").write_bytes(b"{}\n")
    every = [f.path for f in walk([str(tmp_path / "t")]).files]
    assert f"{out}/a/s.jsonl" in every
    # the same folder through another spelling of its path is still skipped
    found = walk([str(tmp_path / "t")], skip=[f"{tmp_path}/t/../t/out/"])
    assert [f.path for f in found.files] == [p for p in every if "/out/" not in p]
    assert len(found.files) == 4
    # the folder left unsearched is listed, with the transcripts it holds
    assert found.unsearched == [(str(out), [f"{out}/a/s.jsonl"])]
    b = tmp_path / "t" / "b"
    assert walk([str(tmp_path / "t")], skip=[str(b)]).unsearched == [
        (str(b), [f"{b}/c/t.jsonl.gz", f"{b}/s.jsonl"])
    ]
    (out / "a" / "s.jsonl").unlink()  # none there: not listed
    assert walk([str(tmp_path / "t")], skip=[str(out)]).unsearched == []


def test_patterns_are_gitignore_style_relative_to_the_folder(tmp_path: Path) -> None:
    _tree(tmp_path / "t")

    def rel(filters: FileFilter) -> list[str]:
        found = walk([str(tmp_path / "t")], filters=filters)
        return [os.path.relpath(f.path, tmp_path / "t") for f in found.files]

    assert rel(FileFilter(excludes=("b/",))) == ["a/s.jsonl", "top.jsonl"]
    assert rel(FileFilter(excludes=("*.gz",))) == ["a/s.jsonl", "b/s.jsonl", "top.jsonl"]
    assert rel(FileFilter(globs=("/top.jsonl",))) == ["top.jsonl"]
    assert rel(FileFilter(globs=("s.jsonl",))) == ["a/s.jsonl", "b/s.jsonl"]
    assert rel(FileFilter(globs=("b/",), excludes=("c/",))) == ["b/s.jsonl"]
    assert rel(FileFilter(excludes=("*.jsonl", "!b/s.jsonl"))) == ["b/c/t.jsonl.gz", "b/s.jsonl"]
    found = walk([str(tmp_path / "t")], filters=FileFilter(globs=("nothing/",)))
    assert found.files == [] and found.left_out == 4
    assert "none of its 4 transcripts passes --glob" in str(found.errors[0])


def test_time_filters_use_the_modification_time(tmp_path: Path) -> None:
    a, b, *_ = _tree(tmp_path / "t")
    now = time.time()
    os.utime(a, (now - 3 * 3600, now - 3 * 3600))
    os.utime(b, (now - 30, now - 30))
    f = FileFilter(older_than=3600)
    assert f.keeps(str(a), "a/s.jsonl", now) and not f.keeps(str(b), "b/s.jsonl", now)
    f = FileFilter(since=now - 3600)
    assert not f.keeps(str(a), "", now) and f.keeps(str(b), "", now)
    f = FileFilter(until=now - 3600)
    assert f.keeps(str(a), "", now) and not f.keeps(str(b), "", now)
    assert FileFilter(since=now - 3600).keeps(str(tmp_path / "gone.jsonl"), "", now)
    with pytest.raises(UsageError, match="modification time"):
        walk(["memory://bucket/in/"], filters=FileFilter(older_than=60))


def test_parse_durations_and_times() -> None:
    assert parse_duration("30m") == 1800 and parse_duration("1w") == 7 * 86400
    assert parse_duration("1h30m") == 5400 and parse_duration("1.5h") == 5400
    for bad in ("", "5", "2 hours", "h", "3y", "-1h"):
        with pytest.raises(UsageError, match="takes a duration"):
            parse_duration(bad)
    assert parse_when("2026-12-01T00:00Z", "--since") == 1796083200.0
    assert parse_when("2026-12-01T02:00+02:00", "--since") == 1796083200.0
    local = dt.datetime(2026, 12, 1).timestamp()
    assert parse_when("2026-12-01", "--until") == local
    assert parse_when("2d", "--since", now=1e6) == 1e6 - 2 * 86400
    with pytest.raises(UsageError, match="--until takes a date"):
        parse_when("yesterday", "--until")


def test_mirrored_names() -> None:
    roots = ("in", "other/")
    assert mirrored_name("in/a/s.jsonl", roots) == "a/s.jsonl"
    assert mirrored_name("in/b/s.jsonl", roots) == "b/s.jsonl"
    assert mirrored_name("other/x/r.jsonl.gz", roots) == "x/r.jsonl"
    assert mirrored_name("in/h.traj", roots) == "h.jsonl"
    assert mirrored_name("elsewhere/s.jsonl", roots) == "s.jsonl"  # named: its own name
    assert mirrored_name("in-not/s.jsonl", roots) == "s.jsonl"  # a prefix is not a parent
    assert mirrored_name("-", roots) == "stdin.jsonl"


def test_write_unless_same_leaves_an_identical_output(tmp_path: Path) -> None:
    t = tmp_path / "o.jsonl"
    assert write_unless_same(str(t), [b"a\n", b"b\n"]) == 4
    ino, mtime = t.stat().st_ino, t.stat().st_mtime_ns
    assert write_unless_same(str(t), [b"a\n", b"b\n"]) is None
    assert (t.stat().st_ino, t.stat().st_mtime_ns) == (ino, mtime)
    assert write_unless_same(str(t), [b"a\n", b"c\n"]) == 4 and t.read_bytes() == b"a\nc\n"
    assert write_unless_same(str(t), [b"a\n"]) == 2 and t.read_bytes() == b"a\n"  # shorter
    assert write_unless_same(str(t), [b"a\n", b"d\n"]) == 4 and t.read_bytes() == b"a\nd\n"


def test_an_output_named_gz_is_written_gzip_and_compared_uncompressed(tmp_path: Path) -> None:
    """A fresh-user trial: ``-o out.jsonl.gz`` wrote plain JSON text (``zcat`` failed).
    A ``.gz`` target is one gzip stream, the same bytes for the same lines (no time nor
    name in its header), compared by what it holds uncompressed."""
    t = tmp_path / "o.jsonl.gz"
    size = write_unless_same(str(t), [b"a\n", b"b\n"])
    raw = t.read_bytes()
    assert raw[:2] == b"\x1f\x8b" and size == len(raw)
    assert gzip.decompress(raw) == b"a\nb\n"
    assert raw[4:8] == b"\0\0\0\0"  # the header's modification time: 0, reproducible
    ino, mtime = t.stat().st_ino, t.stat().st_mtime_ns
    assert write_unless_same(str(t), [b"a\n", b"b\n"]) is None  # up to date: not rewritten
    assert (t.stat().st_ino, t.stat().st_mtime_ns) == (ino, mtime)
    assert write_unless_same(str(t), [b"a\n", b"c\n"]) is not None
    assert gzip.decompress(t.read_bytes()) == b"a\nc\n"
    assert write_unless_same(str(t), [b"a\n"]) is not None  # shorter
    assert gzip.decompress(t.read_bytes()) == b"a\n"
    for old in (b"a\nb\n", raw[:-5], b"\x1f\x8b junk"):  # plain, cut short, corrupt
        t.write_bytes(old)
        assert write_unless_same(str(t), [b"a\n", b"b\n"]) is not None
        assert gzip.decompress(t.read_bytes()) == b"a\nb\n"
    plain = tmp_path / "o.jsonl"
    write_output(str(plain), [b"a\n"])
    assert plain.read_bytes() == b"a\n"


def test_an_output_is_up_to_date_only_while_input_options_and_output_hold(
    tmp_path: Path,
) -> None:
    (tmp_path / "in").mkdir()
    src = write_jsonl(tmp_path / "in" / "s.jsonl", [msg("m1", "user", "hi")])
    target = tmp_path / "out" / "s.jsonl"
    target.parent.mkdir()
    target.write_bytes(src.read_bytes())
    folder = str(tmp_path / "out") + "/"
    out = OutputOptions(output_dir=folder, roots=(str(tmp_path / "in"),))
    fp = provenance.fingerprint("rules", ("options",), out)

    def up_to_date(fingerprint: str, where: str = str(target)) -> dict[str, object] | None:
        return provenance.recorded_result(str(src), where, folder, fingerprint)

    assert up_to_date(fp) is None  # no record yet
    identity = Session.open(str(src)).identity
    result = {"path": str(src), "changed": True}
    provenance.record(str(src), str(target), folder, fp, identity, result)
    assert (tmp_path / "out" / ".compactctl" / "s.jsonl.json").is_file()
    hit = up_to_date(fp)
    assert hit == {"path": str(src), "changed": False, "upToDate": True, "written": None,
                   "appended": 0, "output": str(target)}  # fmt: skip
    other = provenance.fingerprint("rules", ("options",), replace(out, materialize=True))
    assert up_to_date(other) is None
    assert provenance.fingerprint("dedup", ("options",), out) != fp
    # the output edited since: not up to date
    target.write_bytes(src.read_bytes() + b"\n")
    assert up_to_date(fp) is None
    target.write_bytes(src.read_bytes())
    assert up_to_date(fp) is not None
    # the input changed, same size: not up to date
    src.write_bytes(src.read_bytes().replace(b"hi", b"ho"))
    assert up_to_date(fp) is None
    # stdout is never up to date
    assert up_to_date(fp, "-") is None


def test_a_fingerprint_kept_for_equal_options_is_never_given_for_other_ones(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """fingerprint keeps its last answer for equal arguments (each file of a run asks): a
    copy of the options gets it, any change to the options, the command or the output's
    shape a fingerprint of its own, and the first options theirs again after."""
    from compactctl.layers.options import CompactOptions

    out = OutputOptions(output_dir="out/")
    options = CompactOptions(keep_recent=4)
    fp = provenance.fingerprint("compact", options, out)
    assert len(fp) == 64 and int(fp, 16) >= 0
    assert provenance.fingerprint("compact", replace(options), out) == fp  # an equal copy
    others = [
        provenance.fingerprint("compact", replace(options, keep_recent=5), out),
        provenance.fingerprint("compact", replace(options, completion_kwargs={"a": 1}), out),
        provenance.fingerprint("dedup", options, out),
        provenance.fingerprint("compact", options, replace(out, tier="L1")),
    ]
    assert len({fp, *others}) == 5
    assert provenance.fingerprint("compact", options, out) == fp
    monkeypatch.setattr(provenance, "_LAST", None)  # computed afresh: the same answer
    assert provenance.fingerprint("compact", options, out) == fp
