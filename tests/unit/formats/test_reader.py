"""Format sniffing (:mod:`compactctl.formats.reader`): the first line block of a stream, read
as a slow pipe delivers it, and whether a file may be one JSON document rather than lines."""

from __future__ import annotations

import gc
import io

import pytest

from compactctl.errors import InputError
from compactctl.formats.reader import _may_be_document, first_line_block, read_transcript


def _dribble(data: bytes, size: int = 1):
    """A ``read(n)`` that returns at most ``size`` bytes per call, as a slow pipe does."""
    chunks = iter([data[i : i + size] for i in range(0, len(data), size)])
    return lambda n: next(chunks, b"")


def test_first_line_block_waits_for_the_first_non_blank_line():
    doc = b'\xef\xbb\xbf\n\n  {\n  "history": []\n}\n'
    first = first_line_block(_dribble(doc))
    assert first == b"\xef\xbb\xbf\n\n  {\n"  # BOM skipped, blank lines passed, "{" line ended
    assert _may_be_document(first, None) is True
    lines = b'{"type":"message","role":"user","content":"hi"}\n{"type":"message"}\n'
    first = first_line_block(_dribble(lines, 5))
    assert first == lines[:50] and first.index(b"\n") == 47  # whole 5-byte reads
    assert _may_be_document(first, None) is False
    assert _may_be_document(b'[{"a": 1}', None) is True
    assert _may_be_document(b"[1]", "canonical") is False
    assert first_line_block(_dribble(b"  \n\t")) == b"  \n\t"  # EOF before any content


def test_read_transcript_pauses_the_cyclic_collector_and_restores_it():
    line = b'{"type":"message","uuid":"m1","role":"user","content":"hi"}\n'
    during: list[bool] = []
    name, events = read_transcript(
        io.BytesIO(line), "a.jsonl", None, lambda _: during.append(gc.isenabled())
    )
    assert (name, [e.uuid for e in events]) == ("canonical", ["m1"])
    assert during == [False] and gc.isenabled()  # off while reading, on again after
    with pytest.raises(InputError):  # not a transcript: refused, and the collector is back
        read_transcript(io.BytesIO(b"# notes\nplain text\n"), "notes.txt", None)
    assert gc.isenabled()
    gc.disable()  # a caller that turned it off keeps it off
    try:
        read_transcript(io.BytesIO(line), "a.jsonl", None)
        assert not gc.isenabled()
    finally:
        gc.enable()
