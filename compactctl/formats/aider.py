"""Aider's markdown chat history (``.aider.chat.history.md``) -> canonical.

Source: the public description of how Aider appends to the file (``InputOutput`` in its
``io.py``): each run opens with ``# aider chat started at YYYY-MM-DD HH:MM:SS``; what the
person typed is written with ``#### `` before each line; Aider's own notices and tool output
(files added, edits applied, commits, command output) are blockquotes (``> ``); the model's
reply is plain markdown in between. No Aider ran here, so the fixture is built from that
description (``fixtures/formats/aider-chat-history-described.md``).

Mapping (``sourceLine`` = the first line of the block):

- ``# aider chat started at ...``: a ``foreign`` event ``aider-chat-started`` (one per run;
  its time is in ``startedAt``);
- consecutive ``#### `` lines: one ``user`` message (a turn starts), ``####`` stripped;
- consecutive ``> `` lines (``>`` and a space: ``>>>>>>> REPLACE`` ends an edit block) and
  the lines that continue them up to a blank line: one ``user``
  message with ``isMeta: true`` (Aider's notices, which the model did not necessarily see);
- the other non-blank text up to the next prompt, notice or run header: one ``assistant``
  message, verbatim (edit blocks included).

Aider makes no tool calls in the model's API (edits are text in the reply), so a history has
none. A reply line that itself starts with ``> `` (a markdown quote) is read as a notice.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from compactctl.formats._common import JSON, foreign, stable_uuid
from compactctl.formats._events import MessageBuilder

SOURCE = "aider"
HEADER = "# aider chat started at"
_HEADER = re.compile(r"^# aider chat started at (.*)$")


def looks_like(head: str) -> bool:
    """Whether a text opens as an Aider history: its first non-blank line is the run header.

    >>> looks_like("\\n# aider chat started at 2026-05-01 10:00:00\\n"), looks_like("# Notes")
    (True, False)
    """
    return head.lstrip().startswith(HEADER)


def text_to_canonical(text: str) -> Iterator[dict[str, Any]]:
    """Convert an Aider chat history (see the module docstring)."""
    builder = MessageBuilder(SOURCE)
    kind: str | None = None  # "user", "notice", "assistant"
    block: list[str] = []
    start = 0

    def flush() -> Iterator[JSON]:
        nonlocal kind, block
        body = "\n".join(block).strip("\n")
        if kind is not None and body.strip():
            at: JSON = {"sourceLine": start}
            if kind == "user":
                yield builder.message("user", body, at)
            elif kind == "notice":
                yield builder.message("user", body, at, meta=True)
            else:
                yield builder.message("assistant", body, at)
        kind, block = None, []

    for number, raw in enumerate(text.split("\n"), 1):
        line = raw.rstrip("\r")
        header = _HEADER.match(line)
        if header:
            yield from flush()
            uid = builder.uuids.take(stable_uuid(SOURCE, "run", number))
            yield foreign("aider-chat-started", uid, number, startedAt=header.group(1).strip())
            continue
        if line.startswith("####"):
            if kind != "user":
                yield from flush()
                kind, start = "user", number
            block.append(line[5:].rstrip() if line.startswith("#### ") else line[4:].strip())
            continue
        if line.startswith("> ") or line == ">":
            if kind != "notice":
                yield from flush()
                kind, start = "notice", number
            block.append(line[2:].rstrip())
            continue
        if not line.strip():
            if kind in ("user", "notice"):
                yield from flush()
            elif kind == "assistant":
                block.append("")
            continue
        if kind == "notice":  # a notice goes on until a blank line
            block.append(line.rstrip())
            continue
        if kind != "assistant":
            yield from flush()
            kind, start = "assistant", number
        block.append(line)
    yield from flush()
