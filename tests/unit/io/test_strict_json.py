"""Every line compactctl writes is valid JSON for strict parsers (issue 14, point 6).

A lone surrogate escape (``"\\ud800"``: legal JSON text, half a character) read from the input
used to be copied into the appended summary, which orjson and jq then refused. Lines compactctl
serializes now carry U+FFFD in its place, and a warning says so once per run; the input's own
lines are kept byte for byte.
"""

from __future__ import annotations

import json
import re
import warnings
from pathlib import Path

import orjson
import pytest

from compactctl.errors import CompactWarning
from compactctl.model import SURROGATE_NOTE, dumps, without_surrogates
from tests.helpers import SAMPLES, run_cli

SAMPLE = (SAMPLES / "small-s1.canonical.jsonl").read_bytes()
LONE = re.compile(rb"\\u[dD][89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F])")
"""A high surrogate escape not followed by a low one (or see :func:`_strict`)."""


def _strict(line: bytes) -> object:
    """Parse like a strict parser: orjson (RFC 8259 text must be valid Unicode), and the
    stdlib with a check that no string holds a surrogate code point."""
    value = orjson.loads(line)
    stdlib = json.loads(line)
    assert not without_surrogates(stdlib)[1], line[:200]
    return value


def _with_surrogates(path: Path) -> bytes:
    """The sample with a lone high and a lone low surrogate in a user message, a tool output
    and a tool call's arguments (escaped, as JSON writers write them)."""
    lines = SAMPLE.split(b"\n")[:-1]
    extra = [
        {"type": "message", "uuid": "sur-u", "role": "user",
         "content": "please fix \ud800 the file src/caf\udc00.py (it is broken)"},
        {"type": "message", "uuid": "sur-a", "role": "assistant", "content": "",
         "toolCalls": [{"id": "sur-c", "name": "bash", "arguments": {"cmd": "cat caf\ud83d.py"}}]},
        {"type": "message", "uuid": "sur-t", "role": "tool", "toolCallId": "sur-c",
         "toolName": "bash", "content": ("error in caf\ud83d.py line 3\n" * 40)},
    ]  # fmt: skip
    data = b"\n".join(lines[:3] + [json.dumps(x).encode() for x in extra] + lines[3:]) + b"\n"
    path.write_bytes(data)
    return data


@pytest.mark.parametrize(
    "command",
    [["compact", "--force"], ["rules"], ["tiers"], ["dedup"]],
)
def test_appended_lines_parse_strictly(tmp_path: Path, command: list[str]) -> None:
    path = tmp_path / "s.jsonl"
    data = _with_surrogates(path)
    assert LONE.search(data)  # the input does hold them
    if command[0] == "tiers":  # tiers rewrites a summary: compact first
        assert run_cli("compact", "--force", "--no-store", str(path)).returncode == 0
    base = path.read_bytes()
    r = run_cli(*command, "--no-store", str(path))
    assert r.returncode == 0, r.stderr
    new = path.read_bytes()[len(base) :]
    assert path.read_bytes().startswith(data)  # the input's own lines, byte for byte
    lines = new.splitlines()
    if command[0] in ("compact", "rules", "tiers"):
        assert lines, r.stderr
    for line in lines:
        _strict(line)
        assert not LONE.search(line)


def test_the_summary_keeps_the_text_with_u_fffd_and_says_so_once(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    data = _with_surrogates(path)
    r = run_cli("compact", "--force", "--no-store", str(path))
    assert r.returncode == 0, r.stderr
    summary = [_strict(x) for x in path.read_bytes()[len(data) :].splitlines()][-1]
    assert isinstance(summary, dict) and summary["type"] == "summary"
    assert "please fix \ufffd the file src/caf\ufffd.py" in summary["summaryText"]
    assert r.stderr.decode().count("lone surrogate escapes") == 1
    assert f"compactctl: warning: {SURROGATE_NOTE}" in r.stderr.decode()


def test_materialized_and_o_outputs_parse_strictly(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    _with_surrogates(path)
    for args in (["--materialize"], ["--materialize", "--as", "openai"]):
        out = tmp_path / "out.jsonl"
        r = run_cli("rules", "--no-store", *args, "-o", str(out), str(path))
        assert r.returncode == 0, r.stderr
        for line in out.read_bytes().splitlines():
            parsed = orjson.loads(line) if not LONE.search(line) else None
            # a message compactctl did not change is passed through as the input's bytes
            assert parsed is not None or line in path.read_bytes()


def test_dumps_replaces_lone_surrogates_and_keeps_big_ints() -> None:
    value = {"a": "x\ud800y", "k\udc00": ["\ud83d", "fine \U0001f642"], "n": 2**70}
    with pytest.warns(CompactWarning, match="lone surrogate"):
        out = dumps(value)
    parsed = _strict(out)
    assert parsed == {
        "a": "x\ufffdy",
        "k\ufffd": ["\ufffd", "fine \U0001f642"],
        "n": float(2**70),  # orjson reads it as a float ...
    }
    assert json.loads(out)["n"] == 2**70  # ... the bytes hold it exactly
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert dumps({"a": "plain \U0001f642"}) == '{"a":"plain \U0001f642"}'.encode()
