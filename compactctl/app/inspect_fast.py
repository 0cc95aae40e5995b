"""``inspect`` of canonical JSON lines straight from the parsed objects (no Event per line).

:func:`inspect_lines` feeds the dicts orjson parses, line by line, to the
:class:`~compactctl.app.inspector.InspectAccumulator` that
:func:`~compactctl.app.inspector.inspect_events` feeds from events, so it gives the same dict
as ``inspect_events`` over the events :func:`~compactctl.io.jsonl.read_blocks` reads from the
same bytes, in one pass. Only the raw lines are kept (not the parsed objects): when the log
has compact or summary events, those and the messages are parsed again from their lines for
replay (the effective context); otherwise replay is the identity and is not run.

Measured on the 11 MB bench session (in process, CPU time, median of 21 interleaved rounds):
orjson ``loads`` of every line 19 ms, :func:`~compactctl.app.inspect.inspect_path` with
``--estimate`` through this 35 ms.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator
from typing import Any

import orjson

from compactctl.app.inspector import InspectAccumulator, Item, UnknownCounter
from compactctl.errors import UsageError
from compactctl.io.jsonl import (
    BOM,
    TORN_DETAIL,
    assign_turns,
    parse_line,
    read_blocks,
    split_line_lists_nl,
)
from compactctl.model import BadLine, Event
from compactctl.tokens import TokenCounter

__all__ = ["DETECT_RECORDS", "inspect_lines"]

DETECT_RECORDS = 50
"""Records (JSON object lines) format detection looks at, as in
:func:`compactctl.formats.reader.load`."""


def inspect_lines(
    blocks: Iterable[bytes],
    *,
    path: str,
    counter: TokenCounter | None = None,
    context_window: int | None = None,
    top: int = 10,
    tier: str | None = None,
    detect: bool = True,
) -> dict[str, Any] | list[Event]:
    """Inspect a JSON lines byte stream, or hand back its events when it is not canonical.

    Args:
        blocks: the file's bytes as consecutive blocks cut anywhere (as for
            :func:`~compactctl.io.jsonl.read_blocks`); consumed once.
        path: the file name to report.
        counter: the token counter; ``None`` picks the encoding from the session's model.
        context_window: overrides the session's and litellm's context window (tokens).
        top: how many of the largest tool outputs to list.
        tier: the summary tier the effective context shows (``None``: the selected one).
        detect: check the first :data:`DETECT_RECORDS` records with
            :func:`compactctl.formats.detect`; ``False`` when the format is known canonical.

    Returns:
        The per-file dict of ``inspect --json`` (see
        :func:`~compactctl.app.inspector.inspect_events`; ``format`` is ``"canonical"``), or the
        list of all the stream's events, exactly as ``list(read_blocks(blocks))`` gives them,
        when detection does not say canonical (or finds no JSON object to look at), when
        ``counter`` is ``None`` and a message comes before the first session event (its
        encoding is not known yet), or when the encoding is not available before detection
        is done.

    Memory: the raw lines, one text of each distinct tool output and a few ints per message
    (one session at a time); no parsed object outlives its line unless replay needs the
    messages.

    Raises:
        ValueError, UsageError: the counter's tiktoken encoding is not available offline, or
            unknown.
    """
    torn: list[bytes] = []
    # the lines keep their \n (orjson reads it as whitespace): no copy of each line without it
    chunks = split_line_lists_nl(blocks, torn)
    raws: list[bytes] = []  # every line so far (with its \n), to parse again when needed
    head: list[dict[str, Any]] | None = [] if detect else None
    acc = InspectAccumulator(counter, top=top)

    def items() -> Iterator[Item]:
        """The lines as :class:`~compactctl.app.inspector.Item`, the first
        :data:`DETECT_RECORDS` records checked (``head``) on the way.

        Raises:
            _NotCanonical: detection says another format.
        """
        nonlocal head
        loads = orjson.loads
        decode_error = orjson.JSONDecodeError
        number = 0
        for lines in chunks:
            raws.extend(lines)
            first = number + 1  # the line numbers go on across blocks
            for number, raw in enumerate(lines, first):
                try:
                    data = loads(raw)
                except decode_error:
                    data = None
                if data.__class__ is not dict:  # not JSON to orjson, a BOM, or not an object
                    event = parse_line(raw[:-1], number)
                    if isinstance(event, BadLine):
                        yield number, event
                        continue
                    data = event.data
                    if number == 1 and raw.startswith(BOM):  # orjson refuses a BOM: only here
                        acc.bom = True
                if head is not None:
                    head.append(data)
                    if len(head) == DETECT_RECORDS:
                        if not _is_canonical(head):
                            raise _NotCanonical
                        head = None
                yield number, data
        if torn:
            yield number + 1, BadLine(torn[0], number + 1, "torn", TORN_DETAIL)

    try:
        acc.feed(items())
    except (_NotCanonical, UnknownCounter):
        # not canonical, or a message whose encoding depends on a session event not read yet
        return _events(raws, chunks, torn)
    except (ValueError, UsageError):  # the tiktoken encoding is unknown or not offline
        if head is None:
            raise
        return _events(raws, chunks, torn)  # the general path reports an unknown format first
    if head is not None and (not head or not _is_canonical(head)):
        # not canonical, or no JSON object at all: the reader decides whether it is a
        # transcript (formats.reader refuses most files without one)
        return _events(raws, chunks, torn)

    def events() -> list[Event]:
        """The messages and the compact and summary events parsed again from their lines,
        turn ids assigned as the reader does (for replay)."""
        return list(assign_turns(parse_line(raws[n - 1][:-1], n) for n in acc.replay_lines()))

    return acc.report(
        path=path, fmt="canonical", context_window=context_window, tier=tier, events=events
    )


class _NotCanonical(Exception):
    """Detection says the lines are not canonical (:func:`inspect_lines` hands them back)."""


def _is_canonical(records: list[dict[str, Any]]) -> bool:
    from compactctl.formats import detect

    return detect(records) == "canonical"


def _events(raws: list[bytes], rest: Iterator[list[bytes]], torn: list[bytes]) -> list[Event]:
    """The events of the lines read so far (``raws``) and of the ``rest`` (lists of lines
    with their ``\\n``), exactly as :func:`~compactctl.io.jsonl.read_blocks` gives them
    (``torn``: the bytes after the last ``\\n``, filled once ``rest`` is exhausted)."""
    return list(read_blocks(itertools.chain(raws, itertools.chain.from_iterable(rest), torn)))
