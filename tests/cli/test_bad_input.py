"""Bad input (docs/design.md sections 4 and 6): one parameter per kind of damage.

Each case is a transcript (the small sample with the damage in it, or the damage alone) run
through the CLI: ``inspect --json`` names the problem and its line and changes nothing;
``compact --force`` (or ``rules``) either appends after the old bytes, which stay a prefix,
or fails with exit code 3 and a clear message, leaving the file as it was. Never a
traceback. The per-case runs are in-process (typer's CliRunner, fast); one test runs the
whole table again through real ``python -m compactctl`` processes.

Behaviour worth knowing, pinned here:

- a torn last line (no newline) is reported and kept; the append starts on a new line;
- a gzip transcript is read, but never appended to (plain lines after a gzip stream would
  make it unreadable): exit 3, "Pass -o FILE";
- a symlink is followed for reading, and an in-place append goes to the file it points to
  (the link stays a link); ``-o LINK`` replaces the link itself with the new file;
- a binary file reads as lines that are not JSON: reported line by line, nothing appended.
"""

from __future__ import annotations

import gzip
import json
import os
import resource
import stat
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import pytest
from typer.testing import CliRunner

from compactctl.cli import app
from tests.helpers import SAMPLES, run_cli

SMALL = (SAMPLES / "small-s1.canonical.jsonl").read_bytes()
LINES = SMALL.split(b"\n")[:-1]
AT = 20
"""Damage goes after the sample's 20th line: it is line 21."""


def _insert(*bad: bytes) -> bytes:
    return b"\n".join(LINES[:AT] + list(bad) + LINES[AT:]) + b"\n"


def _msg(uuid: str, content: str, role: str = "user", **extra: Any) -> bytes:
    return orjson.dumps(
        {"type": "message", "uuid": uuid, "role": role, "content": content, **extra}
    )


@dataclass(frozen=True)
class Case:
    """A damaged transcript and what compactctl must say about it.

    Attributes:
        data: the file's bytes.
        findings: ``(line, kind, part of the message)`` of ``inspect --json``, in order.
        command: the changing command run on it.
        code: its exit code.
        appends: whether it appends (else the file must stay byte-identical).
        stderr: a part of its message on stderr.
        messages: messages ``inspect`` counts (None: not checked).
    """

    data: bytes
    findings: list[tuple[int, str, str]] = field(default_factory=list)
    command: tuple[str, ...] = ("compact", "--force")
    code: int = 0
    appends: bool = True
    stderr: str = ""
    messages: int | None = None


TORN_UTF8 = _msg("t1", "café au lait").split(b"\xc3")[0] + b"\xc3"  # cut inside "é"
TORN_ESCAPE = b'{"type":"message","uuid":"t2","role":"user","content":"tab\\u00'
BIG_INT = b'{"type":"message","uuid":"n1","role":"user","content":"count","n":123456789012345678901234567890}'  # noqa: E501
SURROGATE = b'{"type":"message","uuid":"s1","role":"user","content":"half \\ud800 a pair   "}'
DUP_KEYS = b'{"type":"message","uuid":"d1","role":"user","content":"first","content":"second"}'
BINARY = bytes(range(128, 256)) * 4 + b"\n" + bytes(range(11, 256))[::-1] * 4 + b"\n\x89PNG\r\n\x1a"

CASES: dict[str, Case] = {
    "empty file": Case(b"", appends=False, messages=0),
    "whitespace only": Case(
        b"  \n\t\n\r\n",
        [(1, "blank", "blank line"), (2, "blank", "blank line"), (3, "blank", "blank line")],
        appends=False,
        messages=0,
    ),
    "BOM": Case(b"\xef\xbb\xbf" + SMALL, [(1, "bom", "UTF-8 BOM (ignored)")], messages=67),
    "CRLF": Case(SMALL.replace(b"\n", b"\r\n"), messages=67),
    "torn last line, mid-UTF-8": Case(
        SMALL + TORN_UTF8, [(69, "torn", "no newline at end of file")], messages=67
    ),
    "torn last line, mid-escape": Case(
        SMALL + TORN_ESCAPE, [(69, "torn", "no newline at end of file")], messages=67
    ),
    "NUL run as a line": Case(
        _insert(b"\x00" * 4096), [(21, "malformed", "malformed JSON")], messages=67
    ),
    "NUL run at the end": Case(
        SMALL + b"\x00" * 4096, [(69, "torn", "no newline at end of file")], messages=67
    ),
    "malformed line in the middle": Case(
        _insert(b'{"type":"message",,"uuid":"x"}'),
        [(21, "malformed", "malformed JSON")],
        command=("rules",),
        messages=67,
    ),
    "non-object JSON line": Case(
        _insert(b"[1, 2, 3]", b'"text"', b"null"),
        [
            (21, "not-object", "a JSON list, not an object"),
            (22, "not-object", "a JSON str, not an object"),
            (23, "not-object", "a JSON NoneType, not an object"),
        ],
        messages=67,
    ),
    "invalid UTF-8": Case(
        _insert(b'{"type":"message","uuid":"u8","role":"user","content":"caf\xe9"}'),
        [(21, "invalid-utf8", "not valid UTF-8 at byte 58")],
        command=("rules",),
        messages=67,
    ),
    "type that is a list": Case(
        _insert(b'{"type":["message"],"uuid":"odd","role":"user","content":"x"}'), messages=67
    ),
    "lone surrogate escape": Case(_insert(SURROGATE), command=("rules",), messages=68),
    "number beyond 2**64": Case(_insert(BIG_INT), messages=68),
    "duplicate keys": Case(_insert(DUP_KEYS), messages=68),
    "deeply nested JSON": Case(
        _insert(b"[" * 100_000 + b"]" * 100_000), [(21, "malformed", "nested too deeply")]
    ),
    "deeply nested field": Case(
        _insert(b'{"type":"message","uuid":"dn","x":' + b"[" * 5000 + b"]" * 5000 + b"}"),
        [(21, "malformed", "nested too deeply")],
        messages=67,
    ),
    "duplicate uuids": Case(
        _insert(LINES[AT - 1]), [(21, "duplicate-uuid", "already used on line 20")]
    ),
    "tool result without its call": Case(
        _insert(_msg("orphan", "output", role="tool", toolCallId="no-such-call")),
        [(21, "tool-result-without-call", "answers unknown call 'no-such-call'")],
        messages=68,
    ),
    "gzip file": Case(
        gzip.compress(SMALL, mtime=0),
        code=3,
        appends=False,
        stderr="is gzip-compressed; compactctl does not append to a compressed transcript "
        "(nothing was written). Pass -o FILE",
        messages=67,
    ),
}


def _invoke(*args: str) -> Any:
    result = CliRunner().invoke(app, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.stderr and "unexpected" not in result.stderr
    return result


def _check_lines_after(data: bytes, old: bytes) -> None:
    """The old bytes are a prefix; what follows is whole records, one per line."""
    assert data.startswith(old)
    new = data[len(old) :]
    assert new.endswith(b"\n")
    if not old.endswith(b"\n") and old:
        assert new.startswith(b"\n")  # a torn last line: the append starts on a new line
        new = new[1:]
    for line in new.split(b"\n")[:-1]:
        assert orjson.loads(line)["type"] in {"compact", "summary"}


@pytest.mark.parametrize("name", list(CASES))
def test_bad_input(tmp_path: Path, name: str) -> None:
    case = CASES[name]
    path = tmp_path / "t.jsonl"
    path.write_bytes(case.data)
    r = _invoke("inspect", "--json", str(path))
    assert r.exit_code == 0, r.stderr
    (f,) = orjson.loads(r.stdout)["files"]
    got = [(x["line"], x["kind"]) for x in f["findings"]]
    assert got == [(line, kind) for line, kind, _ in case.findings]
    for x, (_, _, part) in zip(f["findings"], case.findings, strict=True):
        assert part in x["message"]
    if case.messages is not None:
        assert f["messages"] == case.messages
    assert path.read_bytes() == case.data
    r = _invoke(*case.command, "--no-store", "--json", str(path))
    assert r.exit_code == case.code, r.stderr
    assert case.stderr in r.stderr
    if case.code:
        assert f"{path}: " in r.stderr  # the file is named
    data = path.read_bytes()
    if case.appends:
        assert len(data) > len(case.data), r.stdout
        _check_lines_after(data, case.data)
        # what was damaged stays, reported on the same line (a torn line, now ended by the
        # append, as malformed or not UTF-8)
        again = orjson.loads(_invoke("inspect", "--json", str(path)).stdout)["files"][0]
        assert [x["line"] for x in again["findings"]][: len(got)] == [line for line, _ in got]
    else:
        assert data == case.data


def test_values_orjson_refuses_keep_their_bytes(tmp_path: Path) -> None:
    """Lone surrogates and big integers pass through replay and every output verbatim."""
    path = tmp_path / "t.jsonl"
    path.write_bytes(_insert(SURROGATE, BIG_INT, DUP_KEYS))
    view = _invoke("inspect", "--effective", str(path)).stdout_bytes
    assert SURROGATE in view and BIG_INT in view and DUP_KEYS in view
    out = tmp_path / "out.jsonl"
    r = _invoke("rules", "--no-store", "-o", str(out), str(path))
    assert r.exit_code == 0, r.stderr
    assert out.read_bytes().startswith(path.read_bytes())
    r = _invoke("rules", "--no-store", "--materialize", "-o", "-", str(path))
    view = {m["uuid"]: m for m in map(json.loads, r.stdout_bytes.splitlines())}
    assert view["s1"]["content"] == "half \ufffd a pair"  # rewritten: U+FFFD (issue 14)
    assert view["n1"]["n"] == 123456789012345678901234567890
    assert view["d1"]["content"] == "second"


def test_gzip_file_can_be_written_with_o(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl.gz"
    path.write_bytes(gzip.compress(SMALL, mtime=0))
    out = tmp_path / "out.jsonl"
    r = _invoke("compact", "--force", "--no-store", "-o", str(out), str(path))
    assert r.exit_code == 0, r.stderr
    assert out.read_bytes().startswith(SMALL)
    assert path.read_bytes() == gzip.compress(SMALL, mtime=0)


def test_fifty_megabyte_line(tmp_path: Path) -> None:
    """A 50 MB tool output in the middle: read, reported, micro-compacted, kept verbatim."""
    path = tmp_path / "big.jsonl"
    huge = _msg("huge", "0123456789abcdef" * 3_200_000, role="tool", toolCallId="none")
    assert len(huge) > 50_000_000
    data = _insert(huge)
    path.write_bytes(data)
    r = _invoke("inspect", "--json", "--estimate", str(path))
    assert r.exit_code == 0, r.stderr
    (f,) = orjson.loads(r.stdout)["files"]
    assert f["largestToolOutputs"][0]["uuid"] == "huge"
    assert [(x["line"], x["kind"]) for x in f["findings"]] == [(21, "tool-result-without-call")]
    r = _invoke(
        "compact", "--force", "--micro-only", "--estimate", "--no-store", "--json", str(path)
    )
    assert r.exit_code == 0, r.stderr
    (f,) = orjson.loads(r.stdout)["files"]
    assert f["appended"] == 1 and f["tokensSaved"] > 10_000_000
    new = path.read_bytes()
    assert new.startswith(data) and len(new) - len(data) < 10_000
    _check_lines_after(new, data)


def test_missing_file_and_empty_folder(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    r = _invoke("inspect", "--json", str(tmp_path / "nope.jsonl"), str(tmp_path / "empty"))
    assert r.exit_code == 3
    assert f"{tmp_path / 'nope.jsonl'}: no such file or folder" in r.stderr
    assert f"{tmp_path / 'empty'}: folder has no *.jsonl or *.jsonl.gz transcripts" in r.stderr


# --- permissions, limits, links -------------------------------------------------------------

ROOT = os.geteuid() == 0


def test_unreadable_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "t.jsonl"
    path.write_bytes(SMALL)
    path.chmod(0)
    if ROOT:  # root reads anything: make open() fail as it does for a user
        import compactctl.io.files as files

        def deny(file: Any, mode: str = "r", *a: Any, **k: Any) -> Any:
            if os.fspath(file) == str(path):
                raise PermissionError(13, "Permission denied")
            return open(file, mode, *a, **k)

        monkeypatch.setattr(files, "open", deny, raising=False)
    for args in (["inspect", "--json"], ["compact", "--force", "--no-store"]):
        r = _invoke(*args, str(path))
        assert r.exit_code == 3
        assert f"{path}: permission denied (cannot read the file)" in r.stderr
    path.chmod(0o644)
    assert path.read_bytes() == SMALL


def test_read_only_file_for_compact(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "t.jsonl"
    path.write_bytes(SMALL)
    path.chmod(stat.S_IRUSR | stat.S_IRGRP)
    if ROOT:  # as in tests/test_append.py: root ignores permission bits
        real_open = os.open

        def deny(file: Any, flags: int, *a: Any) -> int:
            if os.fspath(file) == str(path) and flags & (os.O_WRONLY | os.O_RDWR):
                raise PermissionError(13, "Permission denied")
            return real_open(file, flags, *a)

        monkeypatch.setattr(os, "open", deny)
    for command in (["compact", "--force"], ["rules"], ["dedup"]):
        r = _invoke(*command, "--no-store", str(path))
        assert r.exit_code == 3, r.stderr
        assert f"{path}: file is read-only; nothing was written. Use -o FILE" in r.stderr
        assert path.read_bytes() == SMALL
    out = tmp_path / "copy.jsonl"
    r = _invoke("compact", "--force", "--no-store", "-o", str(out), str(path))
    assert r.exit_code == 0 and out.read_bytes().startswith(SMALL)


def _limit(nbytes: int) -> Callable[[], None]:
    def preexec() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (nbytes, nbytes))

    return preexec


def test_file_size_limit_mid_write(tmp_path: Path) -> None:
    """RLIMIT_FSIZE reached during the one write: no partial record, exit 3, target kept."""
    path = tmp_path / "t.jsonl"
    path.write_bytes(SMALL)
    env = dict(os.environ)
    cmd = [sys.executable, "-m", "compactctl", "compact", "--force", "--no-store"]
    r = subprocess.run(
        [*cmd, str(path)], capture_output=True, env=env, preexec_fn=_limit(len(SMALL) + 100)
    )
    assert r.returncode == 3, r.stderr
    err = r.stderr.decode()
    assert f"{path}: append failed (only 100 of " in err
    assert "bytes written: a file size limit or a full disk); the file was restored to its " in err
    assert f"previous {len(SMALL)} bytes, nothing was lost" in err
    assert "Traceback" not in err
    assert path.read_bytes() == SMALL
    # an -o write past the limit: the target is untouched and no temporary file is left
    out = tmp_path / "out.jsonl"
    out.write_bytes(b"old\n")
    r = subprocess.run(
        [*cmd, "-o", str(out), str(path)], capture_output=True, env=env, preexec_fn=_limit(20_000)
    )
    assert r.returncode == 3, r.stderr
    assert f"{out}: cannot write output (File too large); the target is unchanged" in (
        r.stderr.decode()
    )
    assert out.read_bytes() == b"old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.jsonl", "t.jsonl"]


def test_symlink(tmp_path: Path) -> None:
    target = tmp_path / "real.jsonl"
    target.write_bytes(SMALL)
    link = tmp_path / "link.jsonl"
    link.symlink_to(target)
    r = _invoke("inspect", "--json", str(link))
    assert r.exit_code == 0 and orjson.loads(r.stdout)["files"][0]["messages"] == 67
    r = _invoke("compact", "--force", "--no-store", str(link))
    assert r.exit_code == 0, r.stderr
    assert link.is_symlink() and os.readlink(link) == str(target)  # the link stays a link
    _check_lines_after(target.read_bytes(), SMALL)  # the append went to the target
    # -o naming the input through a link is refused; -o onto a link replaces the link
    r = _invoke("rules", "--no-store", "-o", str(link), str(target))
    assert r.exit_code == 2 and "-o names the input" in r.stderr and "itself" in r.stderr
    other = tmp_path / "other.jsonl"
    other.write_bytes(b"")
    out_link = tmp_path / "out-link.jsonl"
    out_link.symlink_to(other)
    r = _invoke("rules", "--no-store", "-o", str(out_link), str(target))
    assert r.exit_code == 0, r.stderr
    assert not out_link.is_symlink() and out_link.read_bytes().startswith(SMALL)
    assert other.read_bytes() == b""


def test_output_file_gets_ordinary_permissions(tmp_path: Path) -> None:
    """``-o`` creates its file with the umask's mode (not the 0600 of a temporary file),
    and keeps the mode of a file it replaces."""
    path = tmp_path / "t.jsonl"
    path.write_bytes(SMALL)
    out = tmp_path / "out.jsonl"
    umask = os.umask(0o022)
    try:
        assert _invoke("rules", "--no-store", "-o", str(out), str(path)).exit_code == 0
        assert stat.S_IMODE(out.stat().st_mode) == 0o644
        out.chmod(0o640)
        assert _invoke("rules", "--no-store", "-o", str(out), str(path)).exit_code == 0
        assert stat.S_IMODE(out.stat().st_mode) == 0o640
    finally:
        os.umask(umask)


# --- the same table through real processes ---------------------------------------------------


def test_table_through_real_processes(tmp_path: Path) -> None:
    """Every case at once through ``python -m compactctl``: no traceback, the failing file
    named, the others done."""
    paths = []
    for n, (name, case) in enumerate(CASES.items()):
        p = tmp_path / f"{n:02d}.jsonl"
        p.write_bytes(case.data)
        paths.append((p, name, case))
    r = run_cli("inspect", "--json", "--jobs", "2", *(str(p) for p, _, _ in paths))
    assert r.returncode == 0, r.stderr.decode()
    assert b"Traceback" not in r.stderr
    doc = orjson.loads(r.stdout)
    assert len(doc["files"]) == len(CASES)
    for f, (p, _name, case) in zip(doc["files"], paths, strict=True):
        assert f["path"] == str(p)
        assert [(x["line"], x["kind"]) for x in f["findings"]] == [
            (line, kind) for line, kind, _ in case.findings
        ]
    r = run_cli("compact", "--force", "--no-store", "--json", *(str(p) for p, _, _ in paths))
    assert r.returncode == 3  # the gzip file could not be appended to; the others are done
    assert b"Traceback" not in r.stderr
    doc = orjson.loads(r.stdout)
    failed = {e["path"] for e in doc["totals"]["errors"]}
    assert failed == {str(p) for p, _, case in paths if case.command[0] == "compact" and case.code}
    for p, _name, case in paths:
        data = p.read_bytes()
        assert data.startswith(case.data)
        if case.code:
            assert data == case.data


@pytest.mark.parametrize(
    "data, line, problem",
    [
        (BINARY, 1, "invalid-utf8"),
        (b"\x00\x00\x00\n", 1, "malformed"),
        (b"\n1\n2\n", 2, "not-object"),
        (b"just some text\nmore text\n", 1, "malformed"),
    ],
)
def test_a_file_with_no_json_object_line_is_refused(
    tmp_path: Path, data: bytes, line: int, problem: str
) -> None:
    """A binary file (or any text that is not JSON lines) is not a transcript: every command
    refuses it with exit 3, naming the file and its first bad line, and leaves it as it was.
    (It used to be read as a canonical transcript whose lines were all bad: exit 0.)"""
    path = tmp_path / "t.jsonl"
    path.write_bytes(data)
    for command in (("inspect",), ("inspect", "--estimate"), ("rules",), ("compact", "--force")):
        r = (
            _invoke(*command, "--no-store", str(path))
            if command[0] != "inspect"
            else _invoke(*command, str(path))
        )
        assert r.exit_code == 3, (command, r.stdout, r.stderr)
        assert f"{path}: not a JSON lines transcript: no line is a JSON object " in r.stderr
        assert f"(line {line}: {problem})" in r.stderr
    assert path.read_bytes() == data


@pytest.mark.parametrize(
    "data", [b"", b"\n  \n", b'{"type":"sess', b'\n\n{"type":"message","uuid":"a","ro']
)
def test_blank_lines_or_a_torn_first_event_are_still_a_transcript(
    tmp_path: Path, data: bytes
) -> None:
    """An empty file, blank lines, or a first event still being written: read, exit 0."""
    path = tmp_path / "t.jsonl"
    path.write_bytes(data)
    r = _invoke("inspect", "--json", str(path))
    assert r.exit_code == 0, r.stderr
    (f,) = orjson.loads(r.stdout)["files"]
    assert f["messages"] == 0 and f["format"] == "canonical"


# --- bugs found by this suite outside files.py / jsonl.py, fixed since -----------------------


def test_dedup_with_duplicate_uuids(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_bytes(_insert(LINES[AT - 1]))
    r = _invoke("dedup", "--no-store", str(path))
    assert r.exit_code == 0, r.stderr


def test_one_record_after_a_blank_line(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_bytes(b"\n" + _msg("m1", "hello") + b"\n")
    r = _invoke("inspect", "--json", str(path))
    assert r.exit_code == 0, r.stderr
    assert orjson.loads(r.stdout)["files"][0]["format"] == "canonical"


def test_tool_call_id_that_is_not_a_string(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_bytes(
        b"\n".join(
            [
                _msg("u1", "do it"),
                _msg("t1", "out", role="tool", toolCallId=["c1"]),
                _msg("u2", "next"),
            ]
        )
        + b"\n"
    )
    r = _invoke("compact", "--force", "--keep-recent", "0", "--min-saving", "0", "--no-store",
                str(path))  # fmt: skip
    assert r.exit_code == 0, r.stderr


def test_deep_value_in_a_changed_message(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    deep = b"[" * 1000 + b"]" * 1000
    call = {"id": "c1", "name": "bash", "arguments": {}}
    path.write_bytes(
        b"\n".join(
            [
                _msg("u1", "go"),
                _msg("a1", "", role="assistant", toolCalls=[call]),
                _msg("t1", "x" * 5000, role="tool", toolCallId="c1")[:-1]
                + b',"meta":'
                + deep
                + b"}",
                _msg("u2", "a"),
                _msg("u3", "b"),
            ]
        )
        + b"\n"
    )
    assert _invoke("compact", "--force", "--micro-only", "--no-store", str(path)).exit_code == 0
    r = CliRunner().invoke(app, ["inspect", "--effective", str(path)])
    assert r.exception is None or isinstance(r.exception, SystemExit)
    assert r.exit_code == 0, r.stderr


def test_a_torn_last_line_is_named_in_the_report_line(tmp_path: Path) -> None:
    """``--json`` says ``tornLine``; the human report line says it too (it said nothing)."""
    path = tmp_path / "t.jsonl"
    path.write_bytes(SMALL + b'{"type":"message","uuid":"cut","role":"us')
    time.sleep(0.3)  # older than COMPACTCTL_TORN_WAIT (0.2 s in tests): a crashed writer
    r = _invoke("rules", "--no-store", str(path))
    assert r.exit_code == 0, r.stderr
    assert r.stderr.startswith(f"{path}: rules applied to ")
    assert "(its torn last line is kept; the new events start on a new line)" in r.stderr
    r = _invoke("rules", "--no-store", str(path))  # nothing to append: no torn note
    assert r.stderr == f"{path}: unchanged: no rule changes any message\n"


# --- lines that are not JSON objects in a foreign file (docs/formats.md section 8) ----------

MISLEADING = SAMPLES.parent / "formats" / "misleading"


@pytest.mark.parametrize(
    "name, line, what",
    [
        ("chat-then-text.jsonl", 3, "it starts '2026-01-01 12:00:01 INFO build started'"),
        ("chat-then-arrays.jsonl", 2, '(a JSON list, not an object; it starts \'["log", 1'),
    ],
)
def test_a_foreign_file_with_a_line_that_is_not_an_object_is_refused(
    tmp_path: Path, name: str, line: int, what: str
) -> None:
    """Text or a JSON array among the records of a foreign file: not a cut-off record, the
    file is not JSON lines of its format; every reading command refuses it, exit 3 (it used
    to be read with the line dropped, exit 0)."""
    path = tmp_path / name
    data = (MISLEADING / name).read_bytes()
    path.write_bytes(data)
    for command in (("inspect",), ("convert", "--dry-run"), ("compact", "--force", "-o", "-")):
        r = _invoke(*command, str(path))
        assert r.exit_code == 3, (command, r.stdout, r.stderr)
        assert f"{path}: line {line} is not a JSON object (" in r.stderr
        assert what in r.stderr
        assert "in a file whose other lines are openai-chat records" in r.stderr
    assert path.read_bytes() == data


def test_a_cut_off_line_in_a_foreign_file_is_skipped_and_reported(tmp_path: Path) -> None:
    """A record cut off mid-file (a crash, then a resume on the next line) is skipped and
    reported with its line number by convert and compact (a warning) and by inspect (a
    finding, no warning); the other records are read."""
    path = tmp_path / "chat.jsonl"
    path.write_bytes((MISLEADING / "chat-cut-off-line.jsonl").read_bytes())
    warning = (
        f"compactctl: warning: {path}: 1 line skipped, not read as part of the conversation: "
        "line 2 (malformed JSON); inspect lists it\n"
    )
    r = _invoke("convert", "-o", str(tmp_path / "out.jsonl"), str(path))
    assert r.exit_code == 0, r.stderr
    assert warning in r.stderr
    r = _invoke("compact", "--force", "--no-store", "-o", str(tmp_path / "c.jsonl"), str(path))
    assert r.exit_code == 0, r.stderr
    assert warning in r.stderr
    r = _invoke("inspect", "--json", str(path))
    assert r.exit_code == 0 and "is not a JSON object" not in r.stderr
    (f,) = orjson.loads(r.stdout)["files"]
    assert f["messages"] == 3
    assert [(x["line"], x["kind"]) for x in f["findings"]] == [(2, "malformed")]


def test_bad_lines_of_a_foreign_file_are_named_by_every_command_and_never_written(
    tmp_path: Path,
) -> None:
    """A Claude Code file with a record cut off at line 40 (the next line is that record
    whole, as after a crash and a resume) and a torn last line: convert, compact and eval
    warn once, naming the file and both lines (the torn line used to pass silently, eval
    warned twice), inspect lists both as findings; what convert and compact -o write holds
    every record read and no line of the two (they used to be written after the
    conversation, the torn one given a newline: a malformed line inside the output)."""
    lines = (SAMPLES / "small-s1.claude-code.jsonl").read_bytes().splitlines(keepends=True)
    assert len(lines) == 102
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"".join([*lines[:39], lines[39][:60] + b"\n", *lines[39:], lines[40][:50]]))
    data = path.read_bytes()
    warning = (
        f"compactctl: warning: {path}: 2 lines skipped, not read as part of the conversation: "
        "line 40 (malformed JSON), line 104 (torn: the last line has no newline); inspect "
        "lists them\n"
    )
    for command in (
        ("convert", "-o", str(tmp_path / "c.jsonl")),
        ("compact", "--force", "--no-store", "-o", str(tmp_path / "o.jsonl")),
        ("eval",),
    ):
        r = _invoke(*command, str(path))
        assert r.exit_code == 0, (command, r.stderr)
        assert r.stderr.count(warning) == 1, (command, r.stderr)
        assert r.stderr.count("warning:") == 1, (command, r.stderr)
    assert path.read_bytes() == data
    want = _invoke("convert", "-o", "-", str(SAMPLES / "small-s1.claude-code.jsonl")).stdout

    def messages(data: bytes) -> list[dict[str, Any]]:
        records = [orjson.loads(line) for line in data.splitlines()]  # each line is JSON
        return [r | {"sourceLine": 0} for r in records if r["type"] == "message"]

    converted = (tmp_path / "c.jsonl").read_bytes()
    assert len(converted.splitlines()) == len(want.splitlines()) == 79
    assert len(messages(want)) == 66 and messages(converted) == messages(want)
    compacted = (tmp_path / "o.jsonl").read_bytes()
    assert messages(compacted) == messages(want)
    assert compacted.startswith(converted) and compacted.count(b"\n") == 81
    r = _invoke("inspect", "--json", str(path))
    assert r.exit_code == 0 and "warning" not in r.stderr
    (f,) = orjson.loads(r.stdout)["files"]
    assert [(x["line"], x["kind"]) for x in f["findings"]] == [(40, "malformed"), (104, "torn")]
    assert f["messages"] == 66


def test_blank_lines_of_a_foreign_file_are_not_moved_to_the_end_of_its_conversion(
    tmp_path: Path,
) -> None:
    """A blank line after every record (the review's ``v_blank.jsonl``): convert writes the
    conversation as from the file without them, and no blank line (it used to write all
    102 at the end of its output, after the conversation); nothing is warned (blank lines
    are ignored, docs/formats.md section 8)."""
    sample = SAMPLES / "small-s1.claude-code.jsonl"
    lines = sample.read_bytes().splitlines(keepends=True)
    path = tmp_path / "blank.jsonl"
    path.write_bytes(b"".join(line + b"\n" for line in lines))
    r = _invoke("convert", "-o", str(tmp_path / "out.jsonl"), str(path))
    assert r.exit_code == 0, r.stderr
    assert "warning" not in r.stderr
    got = (tmp_path / "out.jsonl").read_bytes().splitlines()
    want = _invoke("convert", "-o", "-", str(sample)).stdout.encode().splitlines()
    assert b"" not in got and len(got) == len(want) == 79
    strip = lambda data: [  # noqa: E731  (line numbers differ: every other line is blank)
        {k: v for k, v in orjson.loads(line).items() if k not in ("sourceLine", "uuid")}
        for line in data
    ]
    assert strip(got) == strip(want)


def test_format_reads_text_lines_as_skipped_and_says_so(tmp_path: Path) -> None:
    path = tmp_path / "chat.jsonl"
    path.write_bytes((MISLEADING / "chat-then-text.jsonl").read_bytes())
    r = _invoke("convert", "--format", "openai-chat", "-o", str(tmp_path / "o.jsonl"), str(path))
    assert r.exit_code == 0, r.stderr
    assert (
        f"{path}: 2 lines skipped, not read as part of the conversation: line 3 (malformed "
        "JSON), line 4 (malformed JSON); inspect lists them"
    ) in r.stderr


def test_a_refused_file_is_quoted_without_its_secret(tmp_path: Path) -> None:
    """The refusal quotes how the file starts (stderr, ``--json``, the ``--report`` page, the
    store's run log): a secret in those characters is redacted first (review 11 found 17
    characters of an OpenAI key there)."""
    key = "sk-proj-R11abcdefghijklmnopqrstuvwxyz0123"
    path = tmp_path / "k.jsonl"
    path.write_text(f"OPENAI_API_KEY={key}\n")
    db = tmp_path / "store.sqlite"
    report = tmp_path / "r.html"
    env = {"COMPACTCTL_DB": str(db)}
    r = run_cli("compact", "--json", "--report", str(report), str(path), env=env)
    assert r.returncode == 3, r.stderr
    stderr = r.stderr.decode()
    assert "line 1 starts 'OPENAI_API_KEY=[REDACTED:openai-key]'" in stderr
    store = [p.read_bytes() for p in tmp_path.glob("store.sqlite*")]  # and its -wal
    assert store and any(b"[REDACTED:openai-key]" in data for data in store)  # the run log
    written = [r.stdout, r.stderr, report.read_bytes(), *store]
    assert "[REDACTED:openai-key]" in orjson.loads(r.stdout)["files"][0]["error"]["message"]
    assert all(b"R11abcdefghij" not in data and b"sk-proj-R11" not in data for data in written)
    r = run_cli("inspect", str(tmp_path / "k.jsonl"), env=env)
    assert r.returncode == 3 and b"R11abc" not in r.stderr
    assert "[REDACTED:openai-key]" in r.stderr.decode()


def test_an_empty_stdin_is_said(tmp_path: Path) -> None:
    """``producer | compactctl compact -`` when the producer failed and wrote nothing: the
    run still reads an empty transcript (exit 0, nothing written), and says stdin was empty
    (review 11: it reported success and nothing else). That is its one warning: the
    context window assumed for no model measures nothing there (it was said too)."""
    for command in ("compact", "inspect"):
        r = run_cli(command, "--estimate", "-", input=b"")
        assert r.returncode == 0, r.stderr
        warned = [x for x in r.stderr.decode().splitlines() if "warning" in x]
        assert warned == [
            "compactctl: warning: -: standard input is empty (did the command before the pipe "
            "fail?); read as a transcript without events"
        ], command
        # with --json, the file's entry has it too (on stdout, or on stderr beside the
        # transcript compact writes to stdout)
        r = run_cli(command, "--estimate", "--json", "-", input=b"")
        doc = json.loads(r.stdout if command == "inspect" else r.stderr)
        (entry,) = doc["files"]
        assert entry["warnings"] == [warned[0].removeprefix("compactctl: warning: ")]
    r = run_cli("inspect", "--estimate", "-", input=b"\n")  # a blank line is not nothing
    assert r.returncode == 0 and b"standard input is empty" not in r.stderr


def test_a_bad_setting_names_where_it_came_from_and_what_it_takes(tmp_path: Path) -> None:
    """A config value, an environment value or a flag out of range: exit 2 before any file
    is read, the message names the file and table, the variable or the flag, the value, and
    what it must be (not Python's ``int()`` error)."""
    session = tmp_path / "s.jsonl"
    session.write_bytes((SAMPLES / "small-s1.canonical.jsonl").read_bytes())
    before = session.read_bytes()
    config = tmp_path / "cc.toml"
    config.write_text('[compact]\nkeep_recent = "three"\n')
    cases = [
        ((f"--config={config}",), {},
         f"compactctl: error: config {config}: [compact] keep_recent = 'three': expected a "
         "whole number (e.g. 10); fix the value or remove the key"),
        ((), {"COMPACTCTL_KEEP_RECENT": "x"},
         "compactctl: error: environment COMPACTCTL_KEEP_RECENT='x': expected a whole number "
         "(e.g. 10); fix or unset it"),
        (("--keep-recent", "-5"), {},
         "compactctl: error: --keep-recent (keep_recent) must be 0 or more, not -5"),
        (("--context-window", "0"), {},
         "compactctl: error: invalid value for '--context-window': 0 is not 1 or more"),
    ]  # fmt: skip
    for flags, env, said in cases:
        result = run_cli("compact", "--force", *flags, str(session), env=env)
        assert result.returncode == 2, (flags, result.stderr.decode())
        assert result.stderr.decode().splitlines()[0].startswith(said), flags
    assert session.read_bytes() == before
