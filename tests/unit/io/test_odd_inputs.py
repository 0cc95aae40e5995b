"""Corrupt gzip, NUL bytes, CR-only line endings (issue 14, point 8).

- a corrupt ``.jsonl.gz`` (bad deflate data, or cut short) is exit 3 naming the file ("cannot
  read: corrupt gzip data ..."), never "unexpected error";
- a file without a single newline-terminated JSON object line is refused as not JSON lines
  (exit 3) when its text cannot be a first event still being written: NUL bytes, CR-only line
  endings, or text that does not open a JSON object. An empty file, blank lines, or a first
  event still being written are still read (tests/cli/test_bad_input.py).
"""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from compactctl.errors import InputError
from compactctl.formats.reader import load
from compactctl.session import Session
from tests.helpers import SAMPLES, run_cli

SAMPLE = (SAMPLES / "small-s1.canonical.jsonl").read_bytes()
COMMANDS = (["inspect"], ["inspect", "--estimate"], ["rules"], ["compact", "--force"], ["convert"])


def _args(command: list[str], path: Path, *, out: bool) -> list[str]:
    """The command on ``path``: the store off where there is one, ``-o -`` if ``out``."""
    extra = [] if command[0] in ("inspect", "convert") else ["--no-store"]
    if out or command[0] == "convert":
        extra += [] if command[0] == "inspect" else ["-o", "-"]
    return [*command, *extra, str(path)]


def _corrupt_gzip(path: Path) -> bytes:
    data = gzip.compress(SAMPLE)
    bad = data[:40] + b"garbage!" * 40 + data[360:]
    path.write_bytes(bad)
    return bad


@pytest.mark.parametrize("kind", ["corrupt", "cut-short"])
def test_a_bad_gzip_file_is_exit_3_naming_the_file(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "s.jsonl.gz"
    if kind == "corrupt":
        data = _corrupt_gzip(path)
        expected = (
            f"compactctl: {path}: cannot read: corrupt gzip data (Error -3 while decompressing data"
        )
    else:
        data = gzip.compress(SAMPLE)[:500]
        path.write_bytes(data)
        expected = (
            f"compactctl: {path}: cannot read: Compressed file ended before the end-of-stream"
        )
    for command in COMMANDS:
        r = run_cli(*_args(command, path, out=True))
        assert r.returncode == 3, (command, r.stderr)
        assert r.stderr.decode().startswith(expected), (command, r.stderr)
        assert b"unexpected" not in r.stderr
    assert path.read_bytes() == data


def test_a_bad_gzip_stream_on_stdin(tmp_path: Path) -> None:
    data = _corrupt_gzip(tmp_path / "s.jsonl.gz")
    r = run_cli("inspect", "-", input=data)
    assert r.returncode == 3
    assert r.stderr.startswith(b"compactctl: -: cannot read: corrupt gzip data (")


def test_the_library_raises_input_error(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl.gz"
    _corrupt_gzip(path)
    for read in (lambda: Session.open(str(path)), lambda: load(str(path))):
        with pytest.raises(InputError, match="corrupt gzip data") as info:
            read()
        assert info.value.path == str(path) and info.value.exit_code == 3


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (b"\x00" * 4096, "torn, NUL bytes and no newline"),
        (b"\x00\x00\x00", "torn, NUL bytes and no newline"),
        (SAMPLE.replace(b"\n", b"\r"), "torn, CR-only line endings (JSON lines end in LF)"),
        (
            b"\n\nplain text without a newline",
            "torn, no newline and not the start of a JSON object",
        ),
        (b'{"type":"message"\x00\x00\x00\x00', "torn, NUL bytes and no newline"),
    ],
    ids=["nul-4k", "nul-3", "cr-only", "text", "nul-after-brace"],
)
def test_no_newline_terminated_object_line_is_not_json_lines(
    tmp_path: Path, data: bytes, why: str
) -> None:
    path = tmp_path / "t.jsonl"
    path.write_bytes(data)
    for command in COMMANDS:
        r = run_cli(*_args(command, path, out=False))
        assert r.returncode == 3, (command, r.stdout, r.stderr)
        text = r.stderr.decode()
        assert f"{path}: not a JSON lines transcript: no line is a JSON object (line " in text
        assert f": {why});" in text, text
    assert path.read_bytes() == data


def test_cr_lf_files_are_still_json_lines(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_bytes(SAMPLE.replace(b"\n", b"\r\n"))
    r = run_cli("inspect", "--estimate", str(path))
    assert r.returncode == 0, r.stderr
    assert b"67 messages" in r.stdout
