"""Reading canonical JSONL: raw bytes kept, bad lines reported, never a crash."""

from __future__ import annotations

import gzip
import io
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from compactctl.io.files import read
from compactctl.io.jsonl import dump_events, read_blocks, read_bytes, read_stream
from compactctl.model import BadLine
from tests.helpers import read_events


def test_round_trip_keeps_raw_bytes_of_odd_lines():
    # Spacing, key order, \u escapes, a lone surrogate (stdlib-only), an int beyond 2**64,
    # a CRLF ending and a BOM: all come back byte for byte.
    data = (
        b'\xef\xbb\xbf{"type":"message", "uuid":"a","role":"user","content":"caf\\u00e9"}\r\n'
        b'{"content":"\\ud800 lone","role":"assistant","type":"message","uuid":"b"}\n'
        b'{"type":"message","uuid":"c","role":"tool","content":"n","big":123456789012345678901234567890}\n'
        b'{"type":"queue-operation","operation":"enqueue"}\n'
    )
    events = read_events(data)
    assert [type(e).__name__ for e in events] == ["Message", "Message", "Message", "OtherEvent"]
    assert events[0].data["content"] == "café"
    assert events[1].data["content"] == "\ud800 lone"
    # reading keeps orjson's speed (a float here); a changed event re-reads the int exactly
    assert events[2].evolve(content="m").data["big"] == 123456789012345678901234567890
    assert b"".join(dump_events(events)) == data


def test_bad_lines_are_kept_and_classified():
    data = (
        b'{"type":"message","uuid":"a","role":"user","content":"x"}\n'
        b'\n[1,2]\n{"a":\n\xff\xfe\n{"type":"mess'
    )
    events = read_events(data)
    assert [(e.line, e.problem) for e in events if isinstance(e, BadLine)] == [
        (2, "blank"),
        (3, "not-object"),
        (4, "malformed"),
        (5, "invalid-utf8"),
        (6, "torn"),
    ]
    # nothing dropped: writing back gives the input plus the newline the torn line lacked
    assert b"".join(dump_events(events)) == data + b"\n"


def test_turns_assigned_from_user_messages():
    data = (
        b'{"type":"message","uuid":"s","role":"system","content":"sys"}\n'
        b'{"type":"message","uuid":"u1","role":"user","content":"a"}\n'
        b'{"type":"message","uuid":"a1","role":"assistant","content":"b"}\n'
        b'{"type":"message","uuid":"u2","role":"user","content":"c"}\n'
        b'{"type":"message","uuid":"a2","role":"assistant","content":"d","turnId":7}\n'
        b'{"type":"message","uuid":"a3","role":"assistant","content":"e"}\n'
    )
    assert [e.turn for e in read_events(data)] == [0, 1, 1, 2, 7, 7]


def test_read_gzip_and_plain(tmp_path: Path):
    line = b'{"type":"message","uuid":"a","role":"user","content":"x"}\n'
    (tmp_path / "a.jsonl.gz").write_bytes(gzip.compress(line * 3))
    (tmp_path / "b.jsonl").write_bytes(line)
    assert len(list(read(str(tmp_path / "a.jsonl.gz")))) == 3
    assert [e.uuid for e in read(str(tmp_path / "b.jsonl"))] == ["a"]


_LINE_PIECES = [
    b'{"type":"message","uuid":"u1","role":"user","content":"hi"}',
    b'{"type":"message","role":"assistant","content":"ok","turnId":7}',
    b'{"type":"message","role":"user","content":"x","isMeta":true}',
    b'{"type":"compact","uuid":"c","mode":"micro","targets":[]}',
    b"\xef\xbb\xbf{}",
    b"   ",
    b"",
    b"\r",
    b"[1,2]",
    b'{"type":',
    b"\xff\xfe",
    b'{"a":"\\ud800"}',
]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.sampled_from(_LINE_PIECES), max_size=12),
    st.booleans(),
    st.sampled_from([b"", b'{"type":"message","role":"user"', b" "]),
)
def test_read_bytes_equals_read_stream(lines: list[bytes], newline_at_end: bool, tail: bytes):
    """``load``'s fast reader gives the same events (class, data, raw, line, turn, problem)
    as the streaming reader, torn last lines included."""
    data = b"\n".join(lines) + (b"\n" if newline_at_end and lines else b"") + tail

    def shape(events: list) -> list[tuple]:
        return [
            (
                type(e).__name__,
                getattr(e, "data", None),
                e.raw,
                e.line,
                e.turn,
                getattr(e, "problem", None),
            )
            for e in events
        ]

    assert shape(read_bytes(data)) == shape(list(read_stream(io.BytesIO(data))))


def test_read_bytes_torn_and_empty():
    assert read_bytes(b"") == []
    events = read_bytes(b'{"type":"message","role":"user","content":"a"}\n{"ty')
    assert [type(e).__name__ for e in events] == ["Message", "BadLine"]
    assert (events[1].problem, events[1].line, events[1].raw) == ("torn", 2, b'{"ty')
    assert events[0].turn == 1


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.sampled_from(_LINE_PIECES), max_size=10),
    st.sampled_from([b"", b'{"type":"message","role":"user"', b"\n"]),
    st.lists(st.integers(min_value=0, max_value=400), max_size=6),
)
def test_blocks_cut_anywhere_give_the_same_events(lines, tail, cuts):
    """A stream read in blocks cut at any byte (mid-line, mid-BOM, mid-UTF-8) gives the same
    events as the whole bytes at once."""
    data = b"\n".join(lines) + tail
    points = sorted({min(c, len(data)) for c in cuts})
    blocks = [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True)]
    blocks = [b for b in blocks if b]  # streams never yield empty blocks before EOF

    def shape(events: list) -> list[tuple]:
        return [(type(e).__name__, e.raw, e.line, e.turn) for e in events]

    assert shape(list(read_blocks(blocks))) == shape(read_bytes(data))
