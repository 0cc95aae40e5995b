"""Bytes lines <-> events. No file system here: callers hand in a binary stream.

JSONL is split on ``\\n`` only (never ``str.splitlines``, which also splits on U+2028 and
friends; docs/style.md pitfalls). Each line is parsed with orjson; when orjson refuses a line that
the stdlib accepts (lone surrogate escapes), the stdlib result is used and the line still
passes through as its raw bytes. Integers beyond 64 bits, which orjson reads as floats, stay
exact in the raw bytes (and :meth:`~compactctl.model.Event.evolve` re-reads them exactly).
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterable, Iterator
from typing import BinaryIO

import orjson

from compactctl.model import BadLine, Event, OtherEvent, event_from_dict, next_turn

__all__ = [
    "BOM",
    "assign_turns",
    "dump_events",
    "parse_line",
    "read_bytes",
    "read_stream",
    "split_line_lists_nl",
    "split_lines",
    "split_lines_nl",
]

BOM = b"\xef\xbb\xbf"


def parse_line(raw: bytes, line: int | None = None) -> Event:
    """Parse one line (without ``\\n``) into a typed event, or a :class:`BadLine`.

    Never raises on bad input: a line that is blank, not JSON, not an object, not UTF-8 or
    nested deeper than the parsers allow (orjson: 1024 levels) becomes a BadLine carrying the
    reason; an object whose ``type`` is a list or an object is an OtherEvent. A leading UTF-8
    BOM is ignored for parsing (the raw bytes keep it). A trailing ``\\r`` (CRLF files) is
    JSON whitespace and is accepted.

    >>> parse_line(b'{"type":"message","uuid":"m1","role":"user","content":"hi"}', 1).role
    'user'
    >>> parse_line(b'[1, 2]', 2).problem
    'not-object'
    """
    body = raw[3:] if raw.startswith(BOM) else raw
    if not body or body.isspace():  # not body.strip(): no copy of every line
        return BadLine(raw, line, "blank", "blank line")
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError as uexc:
            return BadLine(raw, line, "invalid-utf8", f"not valid UTF-8 at byte {uexc.start}")
        try:
            data = json.loads(text)
        except ValueError:
            return BadLine(raw, line, "malformed", f"malformed JSON: {exc}")
        except RecursionError:
            return BadLine(raw, line, "malformed", f"malformed JSON: nested too deeply ({exc})")
    if not isinstance(data, dict):
        return BadLine(raw, line, "not-object", f"a JSON {type(data).__name__}, not an object")
    if isinstance(data.get("type"), (list, dict)):  # no known type, and unhashable
        return OtherEvent(data, raw, line)
    return event_from_dict(data, raw, line)


BLOCK = 1 << 20
"""Bytes read at a time by :func:`read_stream` (1 MiB)."""


def read_stream(stream: BinaryIO) -> Iterator[Event]:
    """Read a canonical JSONL stream into events, with turn ids assigned (streaming).

    Reads blocks of up to :data:`BLOCK` bytes (``read1`` where the stream has it, so a pipe
    yields what it has) and splits each once; memory is one block plus the longest line.
    A last line without ``\\n`` is yielded as a ``BadLine(problem="torn")`` and not parsed
    (docs/design.md section 6): a writer may have crashed mid-line.
    """
    read = getattr(stream, "read1", None) or stream.read
    return read_blocks(iter(lambda: read(BLOCK), b""))


def read_bytes(data: bytes) -> list[Event]:
    """:func:`read_stream` over bytes already in memory: the same events, as a list.

    >>> [type(e).__name__ for e in read_bytes(b'{"type":"message","role":"user"}\\n{"ty')]
    ['Message', 'BadLine']
    """
    return list(read_blocks([data]))


def read_blocks(blocks: Iterable[bytes]) -> Iterator[Event]:
    """Events of a JSONL byte stream given as consecutive blocks cut anywhere.

    Each block is split on ``\\n`` once; a line that spans blocks is joined from its pieces
    (no quadratic re-copying of a long line). Line numbers start at 1; turn ids are
    assigned; a last line without ``\\n`` is a torn ``BadLine``; no bytes give no events.
    """

    def events() -> Iterator[Event]:
        number = 0
        torn: list[bytes] = []
        for raw in split_lines(blocks, torn):
            number += 1
            yield parse_line(raw, number)
        if torn:
            yield BadLine(torn[0], number + 1, "torn", TORN_DETAIL)

    return assign_turns(events())


TORN_DETAIL = "last line has no newline (torn write)"
"""The ``detail`` of the ``BadLine`` a torn last line becomes."""

HARMLESS_PROBLEMS = frozenset({"torn", "blank"})
"""``BadLine`` problems that do not make a file with no JSON object line a non-transcript
(an empty file with blank lines, a first event still being written)."""


def split_lines(blocks: Iterable[bytes], torn: list[bytes]) -> Iterator[bytes]:
    """The lines (without ``\\n``) of a byte stream given as consecutive blocks cut anywhere.

    Each block is split once; a line that spans blocks is joined from its pieces (no
    quadratic re-copying of a long line). Bytes after the last ``\\n`` are not yielded: once
    the iterator is exhausted they are appended to ``torn`` (nothing is appended when the
    stream ends with ``\\n`` or is empty).

    >>> torn = []
    >>> list(split_lines([b"a\\nb", b"c\\n\\nd"], torn)), torn
    ([b'a', b'bc', b''], [b'd'])
    """
    head: list[bytes] = []  # pieces of a line whose \n has not come yet
    for block in blocks:
        lines = block.split(b"\n")
        if head:
            head.append(lines[0])
            if len(lines) == 1:
                continue
            lines[0] = b"".join(head)
        tail = lines.pop()
        head = [tail] if tail else []
        yield from lines
    if head:
        torn.append(b"".join(head))


def split_lines_nl(blocks: Iterable[bytes], torn: list[bytes]) -> Iterator[bytes]:
    """:func:`split_lines`, but each line keeps its ``\\n`` (and is found by ``memchr``):
    the lines of :func:`split_line_lists_nl`, one by one.

    >>> torn = []
    >>> list(split_lines_nl([b"a\\nb", b"c\\n\\nd"], torn)), torn
    ([b'a\\n', b'bc\\n', b'\\n'], [b'd'])
    """
    for lines in split_line_lists_nl(blocks, torn):
        yield from lines


def split_line_lists_nl(blocks: Iterable[bytes], torn: list[bytes]) -> Iterator[list[bytes]]:
    """The lines of a byte stream given as consecutive blocks cut anywhere, each keeping its
    ``\\n``, as one list per block: the lines that end in that block (a line that spans
    blocks is joined from its pieces, in the list of the block where it ends; a block with
    no ``\\n`` gives no list).

    ``bytes.split`` compares byte by byte; here each block's lines are read off a ``BytesIO``
    over the block itself (no copy of it) by its ``readlines`` (``memchr``, and no Python
    step per line): reading and splitting the 200 MB bench corpus takes 0.10 CPU s, 0.18 s
    with :func:`split_lines`. Bytes after the last ``\\n`` go to ``torn`` as in
    :func:`split_lines`.

    >>> torn = []
    >>> list(split_line_lists_nl([b"a\\nb", b"c", b"\\n\\nd"], torn)), torn
    ([[b'a\\n'], [b'bc\\n', b'\\n']], [b'd'])
    """
    head: list[bytes] = []  # pieces of a line whose \n has not come yet
    for block in blocks:
        end = block.rfind(b"\n") + 1
        if not end:
            if block:
                head.append(block)
            continue
        lines = io.BytesIO(block).readlines()  # shares the block's bytes: no copy of it
        if head:
            head.append(lines[0])
            lines[0] = b"".join(head)
        head = [lines.pop()] if end < len(block) else []
        yield lines
    if head:
        torn.append(b"".join(head))


def assign_turns(events: Iterable[Event]) -> Iterator[Event]:
    """Give every message a turn id: the one it records, else the running count.

    A turn starts at each real user message (docs/design.md section 2); messages before the first
    user message are turn 0. A recorded ``turnId`` resets the count, so logs that number
    their own turns keep them. Only the ``turn`` attribute is set: data and raw bytes are
    untouched.
    """
    current = 0
    for event in events:
        if event.type == "message":
            if event.turn is None:  # else its turnId (Event), or a turn given to it
                event.turn = next_turn(event.data, current)
            current = event.turn
        yield event


def dump_events(events: Iterable[Event]) -> Iterator[bytes]:
    """Serialize events to lines (each ending in ``\\n``): raw bytes when unchanged."""
    for event in events:
        yield event.to_json() + b"\n"
