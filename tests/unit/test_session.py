"""Session: a transcript opened once, its identity and metadata, the encoding preload."""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import io
import sys

import pytest

from compactctl import session as session_mod
from compactctl import tokens
from compactctl.errors import CompactWarning, InputError
from compactctl.session import (
    DEFAULT_CONTEXT_WINDOW,
    Session,
    context_window,
    encoding_name,
    session_key,
)
from tests.helpers import ROOT, count_opens, msg, write_jsonl

SAMPLE = ROOT / "fixtures/samples/small-s1.canonical.jsonl"


@pytest.fixture
def no_encodings(monkeypatch: pytest.MonkeyPatch) -> dict[str, object]:
    """An empty per-process encoding table, so a load shows up in it; every file counts as
    large enough to preload."""
    table: dict[str, object] = {}
    monkeypatch.setattr(tokens, "_ENCODINGS", table)
    monkeypatch.setattr(session_mod, "PRELOAD_MIN_BYTES", 1)
    return table


def test_identity_is_the_bytes_read():
    s = Session.open(str(SAMPLE))
    data = SAMPLE.read_bytes()
    st = SAMPLE.stat()
    assert s.identity is not None
    assert (s.identity.device, s.identity.inode) == (st.st_dev, st.st_ino)
    assert s.identity.size == len(data)
    assert s.identity.sha256 == hashlib.sha256(data).hexdigest()
    assert s.identity.compressed is False
    assert s.format == "canonical"


def test_gzip_identity_hashes_the_compressed_bytes(tmp_path):
    p = tmp_path / "s.jsonl.gz"
    p.write_bytes(gzip.compress(SAMPLE.read_bytes()))
    s = Session.open(str(p))
    assert s.identity is not None and s.identity.compressed
    assert s.identity.sha256 == hashlib.sha256(p.read_bytes()).hexdigest()
    assert len(s.events) == len(Session.open(str(SAMPLE)).events)


def test_a_gzip_file_to_append_to_is_refused_before_it_is_read(tmp_path):
    p = tmp_path / "s.jsonl.gz"
    p.write_bytes(gzip.compress(SAMPLE.read_bytes()))
    with pytest.raises(InputError, match="gzip-compressed"):
        Session.open(str(p), refuse_compressed=True)


def test_meta_is_decided_once_from_the_session_event(tmp_path):
    p = write_jsonl(
        tmp_path / "s.jsonl",
        [
            {"type": "session", "uuid": "s", "sessionId": "abc", "model": "openai/gpt-4o"},
            msg("u1", "user", "hi"),
        ],
    )
    s = Session.open(str(p))
    assert s.meta.key == "abc"
    assert s.meta.model == "openai/gpt-4o"
    assert s.meta.encoding == "o200k_base"
    assert s.meta.context_window == tokens.context_window_for("openai/gpt-4o")
    assert s.counter is s.counter  # one counter per session
    over = Session.open(str(p), encoding="estimate", context_window=1234)
    assert (over.meta.encoding, over.meta.context_window) == ("estimate", 1234)


def test_the_rules_of_the_metadata():
    assert session_key(None, "a.jsonl") == "a.jsonl"
    with pytest.warns(
        CompactWarning, match="no model is recorded: assuming a context window of 128,000"
    ):
        assert context_window(None, None, None) == DEFAULT_CONTEXT_WINDOW == 128_000
    assert context_window(5, None, "openai/gpt-4o") == 5
    assert encoding_name(None, None) == "cl100k_base"


def test_effective_is_cached_and_a_fresh_list(tmp_path):
    p = write_jsonl(tmp_path / "s.jsonl", [msg("u1", "user", "a"), msg("a1", "assistant", "b")])
    s = Session.open(str(p))
    first = s.effective()
    first.pop()
    assert [m.uuid for m in s.effective()] == ["u1", "a1"]


def test_prompt_totals_are_summed_once_per_session(tmp_path, monkeypatch):
    p = write_jsonl(
        tmp_path / "s.jsonl", [msg("u1", "user", "a" * 40), msg("a1", "assistant", "b")]
    )
    s = Session.open(str(p), encoding="estimate", context_window=1000)
    calls: list[int] = []
    real = tokens.PromptSizes.totals

    def totals(self, view):
        calls.append(len(view))
        return real(self, view)

    monkeypatch.setattr(tokens.PromptSizes, "totals", totals)
    expected = real(s.sizes, s.effective())
    assert s.prompt_totals() == expected and s.prompt_estimate() == expected[0]
    assert calls == [2]  # the second ask is the first one's answer
    later = s.extended([])  # another session sharing the sizes: its own sum, once
    assert later.prompt_estimate() == expected[0] and later.prompt_totals() == expected
    assert calls == [2, 2]


def test_a_large_canonical_file_loads_its_sessions_encoding(no_encodings):
    # small-s1's session names claude-sonnet-4-5: cl100k_base
    Session.open(str(SAMPLE))
    assert list(no_encodings) == ["cl100k_base"]


def test_the_session_model_picks_the_encoding(no_encodings, tmp_path):
    p = tmp_path / "s.jsonl"
    p.write_bytes(
        b'\xef\xbb\xbf\n{"type":"session","uuid":"s","model":"openai/gpt-4o"}\n'
        + SAMPLE.read_bytes().split(b"\n", 1)[1]
    )
    Session.open(str(p))
    assert list(no_encodings) == ["o200k_base"]


def test_an_explicit_encoding_wins(no_encodings):
    Session.open(str(SAMPLE), encoding="p50k_base")
    assert list(no_encodings) == ["p50k_base"]


def test_a_gzip_file_preloads_from_its_decompressed_first_line(no_encodings, tmp_path):
    p = tmp_path / "g.jsonl.gz"
    p.write_bytes(gzip.compress(SAMPLE.read_bytes()))
    Session.open(str(p))
    assert list(no_encodings) == ["cl100k_base"]


@pytest.mark.parametrize(
    "case", ["small", "estimate", "stdin", "no session first", "not json", "unknown encoding"]
)
def test_nothing_is_loaded(no_encodings, tmp_path, monkeypatch, case):
    path, encoding = str(SAMPLE), None
    if case == "small":
        monkeypatch.setattr(session_mod, "PRELOAD_MIN_BYTES", SAMPLE.stat().st_size + 1)
    elif case == "estimate":
        encoding = "estimate"
    elif case == "stdin":
        path = "-"
        stream = io.TextIOWrapper(io.BufferedReader(io.BytesIO(SAMPLE.read_bytes())))
        monkeypatch.setattr(sys, "stdin", stream)
    elif case == "no session first":
        p = tmp_path / "m.jsonl"
        p.write_bytes(SAMPLE.read_bytes().split(b"\n", 1)[1])
        path = str(p)
    elif case == "not json":
        p = tmp_path / "b.jsonl"
        p.write_bytes(b"\x00\x01 binary\n" * 10)
        path = str(p)
    elif case == "unknown encoding":
        encoding = "no_such_base"
    with contextlib.suppress(InputError):  # "not json" is refused after the first line
        Session.open(path, encoding=encoding)
    assert no_encodings == {}


def test_compact_force_opens_the_transcript_twice(tmp_path):
    """One ``compact --force FILE`` opens FILE twice: once to read, once to append (audit
    hooks see every ``open``/``os.open`` in the process, as strace would)."""
    p = tmp_path / "s.jsonl"
    p.write_bytes(SAMPLE.read_bytes())
    env = {"COMPACTCTL_DB": str(tmp_path / "db.sqlite")}
    line = count_opens(p, "compact", "--force", "--jobs", "1", str(p), env=env)
    assert line.startswith("EXIT 0 OPENS 2 PARSED 1 "), line
    assert p.stat().st_size > len(SAMPLE.read_bytes())  # the append landed
