"""The two adapters of the ``inspect`` accumulator never disagree.

``inspect_lines`` (orjson dicts straight from canonical JSON lines) is compared with
``inspect_events`` over the events ``load`` reads (format handling, then Event objects), on
random logs (odd field types, bad lines, a BOM, a torn last line, repeated tool outputs,
compact and summary events) cut into random blocks, and on every sample file. Both feed
``InspectAccumulator``; it is also fed in pieces, which must not change a count.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compactctl.app.inspect import InspectOptions, inspect_path
from compactctl.app.inspect_fast import inspect_lines
from compactctl.app.inspector import InspectAccumulator, _filed, _groups, inspect_events
from compactctl.formats.reader import load, read_transcript
from compactctl.io.jsonl import read_blocks, split_lines, split_lines_nl
from compactctl.model import BadLine, Event, Message
from compactctl.tokens import TokenCounter
from tests.helpers import FIXTURES

TEXT = st.text(alphabet=st.sampled_from(list("ab \n.:你好，。😀é\u4dc0")), max_size=60)
OUTPUTS = ["", "same output", "same outpuT", "other", "x" * 40, "你好" * 5, "\ud800"]
ODD = st.sampled_from([None, 0, 1, True, False, -3, 2.5, "", "?", [], {}, ["x"], {"a": 1}])


@st.composite
def records(draw: st.DrawFn, i: int, calls: list[str]) -> dict[str, Any]:
    """One JSON object: a message, session, compact, summary or other event."""
    kind = draw(st.sampled_from(["user", "assistant", "tool", "tool", "other", "session"]))
    uuid: Any = draw(st.sampled_from([f"u{i}", f"u{i}", f"u{i}", "u0", None, 7]))
    rec: dict[str, Any] = {"type": "message", "uuid": uuid}
    if draw(st.integers(0, 9)) == 0:
        rec["turnId"] = draw(st.sampled_from([0, 3, -1, True, 1.5, "2"]))
    if kind == "session":
        rec = {"type": "session", "uuid": uuid}
        rec["model"] = draw(st.sampled_from(["gpt-4o", "claude-x", None, 5]))
        rec["contextWindow"] = draw(st.sampled_from([1000, 0, -5, True, "9", None]))
    elif kind == "other":
        rec["type"] = draw(
            st.sampled_from(["queue-operation", ["message"], {"t": 1}, 3, "", "compact", "summary"])
        )
        if rec["type"] == "compact":
            rec["mode"] = draw(st.sampled_from(["micro", "rules", "dedup", "zap", 4]))
            rec["targets"] = draw(st.lists(st.sampled_from([f"u{j}" for j in range(9)] + ["?"])))
            rec["params"] = {"minChars": 1, "headRatio": 0.2, "tailRatio": 0.1}
        elif rec["type"] == "summary":
            rec["replaces"] = draw(st.lists(st.sampled_from([f"u{j}" for j in range(9)] + ["?"])))
            rec["summaryText"] = draw(TEXT)
            rec["lastSummarizedTurnId"] = draw(st.sampled_from([1, 0, None]))
            if draw(st.booleans()):
                rec["tiers"] = {"L0": "zero", "L1": 5}
                rec["selectedTier"] = draw(st.sampled_from(["L0", "L1", "L2"]))
            if draw(st.booleans()):
                rec["stats"] = {"tokensBefore": 10}
    elif kind == "user":
        rec["role"] = draw(st.sampled_from(["user", "user", "system", "", None, 3]))
        rec["content"] = draw(
            st.one_of(
                TEXT,
                st.lists(
                    st.fixed_dictionaries(
                        {"type": st.sampled_from(["text", "image"]), "text": TEXT}
                    )
                ),
                ODD,
            )
        )
        if draw(st.integers(0, 5)) == 0:
            rec[draw(st.sampled_from(["isMeta", "summaryOf"]))] = draw(ODD)
    elif kind == "assistant":
        rec["role"] = "assistant"
        rec["content"] = draw(TEXT)
        if draw(st.booleans()):
            made: list[Any] = []
            for j in range(draw(st.integers(0, 3))):
                cid = f"c{i}-{j}"
                calls.append(cid)
                made.append(
                    {
                        "id": draw(st.sampled_from([cid, cid, cid, 5, None, "c0-0"])),
                        "name": draw(st.sampled_from(["bash", "read", "", None, 3])),
                        "arguments": draw(st.sampled_from(['{"a":1}', {"p": "你"}, 7, None])),
                    }
                )
            if draw(st.integers(0, 5)) == 0:
                made.append(draw(ODD))
            rec["toolCalls"] = draw(st.sampled_from([made, made, made, "x", None]))
    else:
        rec["role"] = "tool"
        rec["toolCallId"] = draw(st.sampled_from([*calls[-3:], "nope", None, 9]))
        if draw(st.booleans()):
            rec["toolName"] = draw(st.sampled_from(["bash", "", None, 2]))
        rec["content"] = draw(st.one_of(st.sampled_from(OUTPUTS), TEXT, ODD))
        if draw(st.booleans()):
            rec["isError"] = draw(ODD)
        if draw(st.integers(0, 4)) == 0:
            rec["duplicateBytes"] = draw(st.sampled_from([10, True, "5", -1]))
    return rec


BAD_LINES = [b"not json", b"[1, 2]", b"", b"   ", b'"text"', b"\xff{}", b"{", b"\r"]


@st.composite
def files(draw: st.DrawFn) -> bytes:
    """A canonical JSONL file with random records and bad lines, maybe a BOM, maybe torn."""
    lines: list[bytes] = []
    calls: list[str] = []
    if draw(st.booleans()):
        lines.append(b'{"type":"session","uuid":"s","model":"gpt-4o-mini","contextWindow":99}')
    for i in range(draw(st.integers(0, 25))):
        if draw(st.integers(0, 12)) == 0:
            lines.append(draw(st.sampled_from(BAD_LINES)))
            continue
        rec = draw(records(i, calls))
        if draw(st.integers(0, 15)) == 0:
            rec["note"] = "\ud800"
        try:
            lines.append(orjson.dumps(rec))
        except TypeError:  # lone surrogates: escaped, and only the stdlib reads the line
            lines.append(json.dumps(rec).encode())
    if lines and draw(st.integers(0, 6)) == 0:
        lines[0] = b"\xef\xbb\xbf" + lines[0]
    data = b"\n".join(lines)
    if lines and draw(st.integers(0, 3)) > 0:
        data += b"\n"  # else the last line is torn
    return data


def _blocks(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({min(c, len(data)) for c in cuts})
    return [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True)]


def _slow(data: bytes, **kw: Any) -> dict[str, Any]:
    """The general path: the reader (format detection, import), then inspect_events."""
    fmt, events = read_transcript(io.BytesIO(data), "p")
    return inspect_events(events, path="p", fmt=fmt, **kw)


def _same_events(a: list[Event], b: list[Event]) -> bool:
    def key(e: Event) -> tuple[Any, ...]:
        return (type(e), e.data, e.raw, e.line, e.turn, getattr(e, "problem", None))

    return [key(e) for e in a] == [key(e) for e in b]


@settings(max_examples=400, deadline=None)
@given(
    files(),
    st.lists(st.integers(0, 3000), max_size=4),
    st.sampled_from(["estimate", "estimate", None]),
    st.sampled_from([10, 2, 0, -1]),
    st.sampled_from([None, "L0", "L2"]),
)
def test_inspect_lines_equals_inspect_events(
    data: bytes, cuts: list[int], encoding: str | None, top: int, tier: str | None
) -> None:
    kw: dict[str, Any] = {"context_window": None, "top": top, "tier": tier}
    counter = TokenCounter(encoding) if encoding else None
    fast = _outcome(lambda: inspect_lines(_blocks(data, cuts), path="p", counter=counter, **kw))
    if isinstance(fast, list):  # handed back: exactly the events read_blocks gives
        assert _same_events(fast, list(read_blocks([data])))
        return
    # an error (replay.py raises TypeError on a message whose summaryOf is a list) must be
    # the same error
    slow = _outcome(lambda: _slow(data, counter=TokenCounter(encoding) if encoding else None, **kw))
    assert fast == slow


def _outcome(fn: Any) -> Any:
    """``fn()``, or the repr of the exception it raises."""
    try:
        return fn()
    except Exception as exc:
        return repr(exc)


@settings(max_examples=100, deadline=None)
@given(files())
def test_inspect_path_equals_load_then_inspect_events(tmp_path_factory: Any, data: bytes) -> None:
    path = str(tmp_path_factory.mktemp("fast") / "s.jsonl")
    Path(path).write_bytes(data)
    options = InspectOptions(encoding="estimate", top=3)

    fast = _outcome(lambda: inspect_path(path, options))
    slow = _outcome(
        lambda: inspect_events(
            (r := load(path))[1], path=path, fmt=r[0], counter=TokenCounter("estimate"), top=3
        )
    )
    assert fast == slow


SAMPLE_FILES = sorted(str(p) for p in FIXTURES.rglob("*.jsonl"))


@pytest.mark.parametrize("path", SAMPLE_FILES, ids=[Path(p).name for p in SAMPLE_FILES])
@pytest.mark.parametrize("encoding", ["estimate", None])
def test_samples_equal(path: str, encoding: str | None) -> None:
    def slow() -> dict[str, Any]:
        fmt, events = load(path)
        counter = TokenCounter(encoding) if encoding else None
        return inspect_events(events, path=path, fmt=fmt, counter=counter)

    fast = _outcome(lambda: inspect_path(path, InspectOptions(encoding=encoding)))
    assert fast == _outcome(slow)  # a file of no known format: the same error


def test_bad_lines_reported_with_their_line_numbers(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(
        b'\xef\xbb\xbf{"type":"message","uuid":"a","role":"user","content":"hi"}\n'
        b"not json\n"
        b"[1]\n"
        b"\n"
        b'{"type":"message","uuid":"a","role":"tool","toolCallId":"c","content":"x"}\n'
        b'{"type":"message","role":"user","content":"torn'
    )
    result = inspect_path(str(path), InspectOptions(encoding="estimate"))
    assert isinstance(result, dict)
    assert [(f["line"], f["kind"]) for f in result["findings"]] == [
        (1, "bom"),
        (2, "malformed"),
        (3, "not-object"),
        (4, "blank"),
        (5, "duplicate-uuid"),
        (5, "tool-result-without-call"),
        (6, "torn"),
    ]
    assert result["lines"] == 6
    assert result["events"] == {"bad": 4, "message": 2}
    assert result["messages"] == 2


def test_foreign_lines_are_handed_back_as_events() -> None:
    data = b'{"role":"user","content":"hi"}\n{"role":"assistant","content":"yo"}\n'
    got = inspect_lines([data], path="p", counter=TokenCounter("estimate"))
    assert isinstance(got, list)
    assert _same_events(got, list(read_blocks([data])))


def test_message_before_session_without_counter_is_handed_back() -> None:
    data = (
        b'{"type":"message","uuid":"m","role":"user","content":"hi"}\n'
        b'{"type":"session","uuid":"s","model":"gpt-4o"}\n'
    )
    got = inspect_lines([data], path="p", detect=False)
    assert isinstance(got, list) and [e.line for e in got] == [1, 2]
    assert not any(isinstance(e, BadLine) for e in got)


@given(st.lists(st.sampled_from(["a", "b", "ab", "ba", "c", "d", "e", "f", "g", "h", "i"])))
def test_filed_texts_group_as_counter(texts: list[str]) -> None:
    from collections import Counter

    bucket: Any = None
    for text in texts:
        bucket = text if bucket is None else _filed(bucket, text)
    assert (_groups(bucket) if texts else []) == list(Counter(texts).items())


@given(
    st.lists(st.sampled_from([b"a", b"\n", b"bc", b"\r\n", b"", b"{}"]), max_size=12),
    st.lists(st.integers(0, 30), max_size=5),
)
def test_split_lines_nl_equals_split_lines(pieces: list[bytes], cuts: list[int]) -> None:
    data = b"".join(pieces)
    blocks = _blocks(data, cuts)
    torn: list[bytes] = []
    torn_nl: list[bytes] = []
    lines = list(split_lines(blocks, torn))
    assert list(split_lines_nl(blocks, torn_nl)) == [line + b"\n" for line in lines]
    assert torn_nl == torn


@pytest.mark.parametrize(
    "data",
    [
        b'{"type":"message","uuid":"m","role":"user","content":"hi"}\n',
        b'{"type":"message","uuid":"m","role":"user","content":"hi"}\n'
        + b'{"role":"user","content":"a"}\n' * 3,
        b'{"foo":1}\n{"type":"message","uuid":"m","role":"user","content":"hi"}\n',
    ],
)
def test_unavailable_encoding_fails_as_the_general_path(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(data)

    counter = TokenCounter("no-such-encoding")
    slow = _outcome(lambda: inspect_events(load(str(path))[1], path=str(path), counter=counter))
    fast = _outcome(lambda: inspect_path(str(path), InspectOptions(encoding="no-such-encoding")))
    assert isinstance(fast, str) and fast == slow


@settings(max_examples=200, deadline=None)
@given(files(), st.integers(0, 30), st.sampled_from([None, "L1"]))
def test_feeding_in_pieces_changes_nothing(data: bytes, cut: int, tier: str | None) -> None:
    events = list(read_blocks([data]))
    items = [(e.line, e if isinstance(e, BadLine) else e.data) for e in events]

    def report(*pieces: list[Any]) -> Any:
        acc = InspectAccumulator(TokenCounter("estimate"), top=3)
        acc.bom = data.startswith(b"\xef\xbb\xbf") and not isinstance(events[0], BadLine)
        for piece in pieces:
            acc.feed(piece)
        return _outcome(
            lambda: acc.report(
                path="p", fmt="canonical", context_window=None, tier=tier, events=lambda: events
            )
        )

    assert report(items[:cut], items[cut:]) == report(items)
    assert report(items) == _outcome(
        lambda: inspect_events(events, path="p", counter=TokenCounter("estimate"), top=3, tier=tier)
    )


def test_a_message_before_the_session_needs_a_counter() -> None:
    from compactctl.app.inspector import UnknownCounter

    acc = InspectAccumulator()
    acc.feed([(1, {"type": "session", "uuid": "s", "model": "gpt-4o"})])
    assert acc.counter is not None and acc.counter.encoding_name == "o200k_base"
    late = InspectAccumulator()
    with pytest.raises(UnknownCounter):
        late.feed([(1, {"type": "message", "uuid": "m", "role": "user", "content": "hi"})])


def test_turns_are_derived_as_the_reader_assigns_them() -> None:
    data = (
        b'{"type":"message","uuid":"a","role":"system","content":"s"}\n'
        b'{"type":"message","uuid":"b","role":"user","content":"1"}\n'
        b'{"type":"message","uuid":"c","role":"user","content":"meta","isMeta":true}\n'
        b'{"type":"message","uuid":"d","role":"user","content":"2"}\n'
        b'{"type":"message","uuid":"e","role":"assistant","content":"x","turnId":7}\n'
        b'{"type":"message","uuid":"f","role":"user","content":"3"}\n'
    )
    events = list(read_blocks([data]))
    assert [e.turn for e in events if isinstance(e, Message)] == [0, 1, 1, 2, 7, 8]
    result = inspect_lines([data], path="p", counter=TokenCounter("estimate"))
    assert isinstance(result, dict) and result["turns"] == 8
