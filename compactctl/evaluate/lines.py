"""``eval``'s reader: canonical JSON lines to events in one tight loop, as ``inspect``'s fast path.

:func:`open_session` is :meth:`compactctl.session.Session.open` for what ``eval`` needs: the
events of a transcript, read once, never written back. For canonical JSON lines (the format
every compactctl output and most logs it checks are in), each line is parsed with orjson and
wrapped in its event directly (no generator stack per line, no file identity hashed, no
second copy of each message line kept as its raw bytes), with the turns assigned by
:func:`compactctl.model.next_turn` (the rule of :func:`compactctl.io.jsonl.assign_turns`)
and the first :data:`~compactctl.app.inspect_fast.DETECT_RECORDS` records checked by format
detection on the way, as :func:`compactctl.app.inspect_fast.inspect_lines` checks them.
Anything else (another format, a whole JSON document, stdin holding either) goes through
the general reader (:func:`compactctl.formats.reader.read_transcript`), so the events are
the same either way: ``tests/unit/evaluate/test_lines.py`` compares them on every fixture.

The one difference: a message event holds no raw bytes (``raw`` is ``None``), since eval
never writes an event; its ``data`` is what orjson parsed, as in the general reader.

Measured in ``make bench`` (the ``eval`` rows, against ``inspect`` in the same run).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import orjson

from compactctl.app.inspect_fast import DETECT_RECORDS
from compactctl.io.jsonl import BOM, TORN_DETAIL, parse_line, read_blocks, split_lines_nl
from compactctl.model import BadLine, Event, Message, event_from_dict, next_turn
from compactctl.session import Session

__all__ = ["open_session"]


def open_session(
    path: str,
    fmt: str | None = None,
    *,
    encoding: str | None = None,
    context_window: int | None = None,
) -> Session:
    """A transcript read for ``eval``: its format and events, as :meth:`Session.open
    <compactctl.session.Session.open>` gives them (see the module docstring).

    Args:
        path: the file, or ``-`` (stdin); gzip by magic bytes.
        fmt: its format (``None``: detected from the first records).
        encoding: the ``--encoding`` override (``"estimate"``: chars-based counts).
        context_window: the ``--context-window`` override, in tokens.

    Raises:
        InputError: the file cannot be read, or its format is unknown.
        UsageError: ``fmt`` is unknown, or a whole-document format given for JSON lines.
    """
    from compactctl.formats.reader import check_format, read_input, to_canonical_events
    from compactctl.io.files import READ_ERRORS, open_input, read_error

    check_format(fmt)
    if fmt not in (None, "canonical"):
        session = Session.open(path, fmt, encoding=encoding, context_window=context_window)
        _warn_bad_lines(session)
        return session
    with open_input(path) as stream:
        try:
            doc, got = read_input(stream, fmt, _events)
        except READ_ERRORS as exc:
            raise read_error(exc, path) from None
    if isinstance(got, _Canonical):
        name, events = "canonical", got.events
    else:
        name, events = to_canonical_events(path, fmt, doc, got)
    session = Session.from_events(
        events, path, fmt=name, encoding=encoding, context_window=context_window
    )
    _warn_bad_lines(session)
    return session


def _warn_bad_lines(session: Session) -> None:
    """Warn of the lines of a canonical file that hold no event (malformed JSON, a torn last
    line: :class:`~compactctl.model.BadLine`), which eval skips as replay does: a probe in
    one of them is neither counted nor checked. A foreign file's were reported by its
    reader. The one wording: :func:`compactctl.formats.reader.warn_skipped_lines`."""
    from compactctl.formats.reader import warn_skipped_lines

    if session.format == "canonical":
        warn_skipped_lines(session.path, session.events, stacklevel=3)


class _Canonical:
    """The events of lines detection called canonical."""

    __slots__ = ("events",)

    def __init__(self, events: list[Event]) -> None:
        self.events = events


def _events(blocks: Iterator[bytes]) -> _Canonical | list[Event]:
    """The events of a JSON lines stream: :class:`_Canonical` when the first records are
    canonical, else every event exactly as :func:`~compactctl.io.jsonl.read_blocks` gives
    them (the general reader imports them, or, for a forced ``--format canonical``, refuses
    a file it reads nothing from: :func:`compactctl.formats.reader.to_canonical_events`).

    Two loops: the first :data:`DETECT_RECORDS` records (kept, to hand back when detection
    says another format), then the rest, where a message line is parsed, its turn assigned
    and wrapped inline (this is the inner loop of ``eval``'s reading)."""
    torn: list[bytes] = []
    lines = split_lines_nl(blocks, torn)
    events: list[Event] = []
    kept: list[bytes] = []  # the lines read while detection decides
    head: list[dict[str, Any]] = []
    number = turn = 0
    for raw in lines:
        kept.append(raw)
        number += 1
        event, turn = _event(raw, number, turn)
        events.append(event)
        if not isinstance(event, BadLine):
            head.append(event.data)
            if len(head) == DETECT_RECORDS:
                break
    if not head or not _is_canonical(head):
        return list(read_blocks(itertools.chain(kept, lines, torn)))
    del kept, head
    append = events.append
    loads = orjson.loads
    decode_error = orjson.JSONDecodeError
    for raw in lines:
        number += 1
        try:
            data = loads(raw)
        except decode_error:
            data = None
        if data.__class__ is dict and data.get("type") == "message" and number > 1:
            turn = next_turn(data, turn)
            append(Message(data, None, number, turn))
        else:
            event, turn = _event(raw, number, turn)
            append(event)
    if torn:
        events.append(BadLine(torn[0], number + 1, "torn", TORN_DETAIL))
    return _Canonical(events)


def _event(raw: bytes, number: int, turn: int) -> tuple[Event, int]:
    """The event of one line (with its ``\\n``) and the turn after it, as
    :func:`~compactctl.io.jsonl.read_blocks` gives them (``turn``: the turn so far)."""
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError:
        data = None
    if data.__class__ is not dict or (number == 1 and raw.startswith(BOM)):
        event = parse_line(raw[:-1], number)  # a bad line, a BOM, or not an object
    elif data.get("type") == "message":
        event = Message(data, None, number)
    else:
        event = event_from_dict(data, raw[:-1], number)
    if isinstance(event, Message):
        turn = event.turn = next_turn(event.data, turn)
    return event, turn


def _is_canonical(records: list[dict[str, Any]]) -> bool:
    from compactctl.formats import detect

    return detect(records) == "canonical"
