"""``eval``'s reader (:mod:`compactctl.evaluate.lines`) gives the events the general reader gives.

Compared on every transcript under ``fixtures/`` (canonical and foreign, documents and JSON
lines) and on the awkward shapes of JSON lines: a BOM, a bad line, a blank line, a torn last
line, a non-object, lone surrogates, recorded and assigned turns, a format detected only
after the first records, fewer records than detection reads.
"""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from compactctl.app.inspect_fast import DETECT_RECORDS
from compactctl.errors import CompactError
from compactctl.evaluate.lines import open_session
from compactctl.model import BadLine, Message
from compactctl.session import Session
from tests.helpers import FIXTURES

TRANSCRIPTS = sorted(
    str(p.relative_to(FIXTURES))
    for p in FIXTURES.rglob("*")
    if p.is_file() and p.suffix in (".jsonl", ".json", ".traj") and ".probes." not in p.name
    and ".meta." not in p.name
)  # fmt: skip


def _same(path: str) -> None:
    try:
        want = Session.open(path, encoding="estimate")
    except CompactError as exc:
        with pytest.raises(type(exc)) as got:
            open_session(path, encoding="estimate")
        assert str(got.value) == str(exc)
        return
    got_session = open_session(path, encoding="estimate")
    assert got_session.format == want.format
    assert len(got_session.events) == len(want.events)
    for a, b in zip(got_session.events, want.events, strict=True):
        assert (type(a), a.data, a.line, a.turn) == (type(b), b.data, b.line, b.turn), a
        if isinstance(b, BadLine):
            assert (a.raw, a.problem) == (b.raw, b.problem)  # type: ignore[attr-defined]
    assert [m.uuid for m in got_session.effective()] == [m.uuid for m in want.effective()]


def test_fixtures_are_many():
    assert len(TRANSCRIPTS) >= 20


@pytest.mark.parametrize("name", TRANSCRIPTS)
def test_every_fixture_reads_as_the_general_reader_reads_it(name: str):
    _same(str(FIXTURES / name))


def _message(i: int, **extra: object) -> bytes:
    record = {"type": "message", "uuid": f"m{i}", "role": "user" if i % 3 == 0 else "assistant",
              "content": f"message {i}", **extra}  # fmt: skip
    return orjson.dumps(record) + b"\n"


SESSION = b'{"type":"session","uuid":"s0","model":"gpt-4o"}\n'


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(b"\xef\xbb\xbf" + SESSION + _message(1), id="bom"),
        pytest.param(
            SESSION + _message(0) + b"not json\n" + b"\n" + b"[1]\n" + _message(3),
            id="bad-blank-not-object",
        ),  # fmt: skip
        pytest.param(SESSION + _message(0) + b'{"type":"message","uuid":"x', id="torn"),
        pytest.param(
            SESSION + b'{"type":"message","uuid":"m","role":"user","content":"\\ud800"}\n',
            id="lone-surrogate",
        ),  # fmt: skip
        pytest.param(
            SESSION + _message(0, turnId=7) + _message(1) + _message(3) + _message(4),
            id="recorded-turns",
        ),  # fmt: skip
        pytest.param(
            SESSION + b"".join(_message(i) for i in range(3 * DETECT_RECORDS)), id="long"
        ),  # fmt: skip
        pytest.param(SESSION + b"".join(_message(i) for i in range(5)), id="short"),
        pytest.param(b"\n\n", id="blank-only"),
        pytest.param(b"", id="empty"),
    ],
)
def test_awkward_json_lines_read_the_same(body: bytes, tmp_path: Path):
    path = tmp_path / "s.jsonl"
    path.write_bytes(body)
    _same(str(path))


def test_messages_carry_no_raw_bytes_and_other_events_do(tmp_path: Path):
    path = tmp_path / "s.jsonl"
    path.write_bytes(SESSION + b"".join(_message(i) for i in range(2 * DETECT_RECORDS)))
    events = open_session(str(path)).events
    assert all(e.raw is None for e in events if isinstance(e, Message))
    assert events[0].raw == SESSION[:-1]
    assert [e.turn for e in events[1:7]] == [1, 1, 1, 2, 2, 2]
