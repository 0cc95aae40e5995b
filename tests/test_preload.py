"""commands.preload_encoding: large transcripts load their encoding before they are read."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from compactctl import tokens
from compactctl.app import commands

SAMPLE = Path(__file__).resolve().parent.parent / "fixtures/samples/small-s1.canonical.jsonl"


@pytest.fixture
def no_encodings(monkeypatch: pytest.MonkeyPatch) -> dict[str, object]:
    """An empty per-process encoding table, so a load shows up in it."""
    table: dict[str, object] = {}
    monkeypatch.setattr(tokens, "_ENCODINGS", table)
    return table


def test_a_large_canonical_file_loads_its_sessions_encoding(no_encodings, tmp_path):
    # small-s1's session names claude-sonnet-4-5: cl100k_base
    assert commands.preload_encoding(str(SAMPLE), None, min_bytes=1) is True
    assert list(no_encodings) == ["cl100k_base"]


def test_the_session_model_picks_the_encoding(no_encodings, tmp_path):
    p = tmp_path / "s.jsonl"
    p.write_bytes(
        b'\xef\xbb\xbf\n{"type":"session","uuid":"s","model":"openai/gpt-4o"}\n'
        + SAMPLE.read_bytes().split(b"\n", 1)[1]
    )
    assert commands.preload_encoding(str(p), None, min_bytes=1) is True
    assert list(no_encodings) == ["o200k_base"]


def test_an_explicit_encoding_wins(no_encodings):
    assert commands.preload_encoding(str(SAMPLE), "p50k_base", min_bytes=1) is True
    assert list(no_encodings) == ["p50k_base"]


@pytest.mark.parametrize(
    "case",
    ["small", "estimate", "stdin", "no session first", "gzip", "not json", "unknown encoding"],
)
def test_nothing_is_loaded(no_encodings, tmp_path, case):
    path, encoding, min_bytes = str(SAMPLE), None, 1
    if case == "small":
        min_bytes = SAMPLE.stat().st_size + 1
    elif case == "estimate":
        encoding = "estimate"
    elif case == "stdin":
        path = "-"
    elif case == "no session first":
        p = tmp_path / "m.jsonl"
        p.write_bytes(SAMPLE.read_bytes().split(b"\n", 1)[1])
        path = str(p)
    elif case == "gzip":
        p = tmp_path / "g.jsonl.gz"
        p.write_bytes(gzip.compress(SAMPLE.read_bytes()))
        path = str(p)
    elif case == "not json":
        p = tmp_path / "b.jsonl"
        p.write_bytes(b"\x00\x01 binary\n" * 10)
        path = str(p)
    elif case == "unknown encoding":
        encoding = "no_such_base"
    assert commands.preload_encoding(path, encoding, min_bytes=min_bytes) is False
    assert no_encodings == {}
