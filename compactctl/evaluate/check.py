"""Checking probes against the effective context: exact, then whitespace and case normalised.

:class:`Context` is the text an agent would send now (:func:`compactctl.replay.replay` of a
log): each message's text and, for assistant messages, each tool call's name and the string
values of its arguments (a command or a path is checked as written, not as a JSON-escaped
string). A probe is looked for:

1. in its source message (``Probe.source``), when the context still holds a message with
   that uuid (kept, or reduced by micro compaction or rules): found there, it is ``exact``;
2. else in the whole context, joined once (messages separated by a NUL character, so no
   probe matches across two messages) and :func:`~compactctl.evaluate.probes.normalise`-d
   once (case folded, every whitespace run one space): ``normalised`` when the probe's
   normalised text is there, ``exact`` when its text is also there as written (searched
   only after a normalised hit, so a lost probe costs one search, not two).

An ``identifier`` probe must stand as a whole word (no letter, digit or ``_`` on either
side), so ``page_of`` is not found inside ``pages_of``.

Cost: one search in its source message per kept probe of an uncompacted log (no copy of
the context at all); otherwise two copies of the context's text (about 3 bytes a character
for CJK) and one search per probe stopping at the first hit. Measured in ``make bench`` (the
``eval`` rows).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from functools import cached_property

from compactctl.evaluate.probes import Probe, normalise
from compactctl.model import Message
from compactctl.summarize.extractive.tools import call_arguments
from compactctl.text import string_leaves

__all__ = ["EXACT", "NORMALISED", "Context", "message_strings", "string_leaves"]

EXACT = "exact"
"""The match of a probe found as written."""

NORMALISED = "normalised"
"""The match of a probe found only after whitespace and case normalisation."""

_SEPARATOR = "\n\x00\n"


def message_strings(message: Message) -> Iterator[str]:
    """The texts of one message a probe may be found in: its content text, then each tool
    call's name and the string values of its arguments.

    >>> from compactctl.model import Message
    >>> m = Message({"type": "message", "role": "assistant", "content": "Running it.",
    ...              "toolCalls": [{"name": "bash",
    ...                             "arguments": '{"command": "ls \\\\"a b\\\\""}'}]})
    >>> list(message_strings(m))
    ['Running it.', 'bash', 'ls "a b"']
    """
    text = message.text
    if text:
        yield text
    for call in message.tool_calls:
        yield str(call.get("name") or "")
        yield from string_leaves(call_arguments(call))


def _bounded(haystack: str, needle: str) -> bool:
    """Whether ``needle`` occurs in ``haystack`` with no word character on either side."""
    start = haystack.find(needle)
    while start >= 0:
        end = start + len(needle)
        before = haystack[start - 1] if start else " "
        after = haystack[end] if end < len(haystack) else " "
        if not (before.isalnum() or before == "_" or after.isalnum() or after == "_"):
            return True
        start = haystack.find(needle, start + 1)
    return False


class Context:
    """The effective context, searchable (see the module docstring).

    Args:
        messages: the effective context (a :data:`compactctl.replay.View`), or any
            messages, in order.

    Memory: the messages' uuids; the joined text and its normalised copy only once a probe
    is not found in its source message (each built on first use, held while the checks
    run).
    """

    def __init__(self, messages: Iterable[Message]) -> None:
        self.messages = list(messages)
        self.by_uuid = {u: m for m in self.messages if (u := m.uuid) is not None}

    @cached_property
    def text(self) -> str:
        """Every message's :func:`message_strings`, joined (messages apart by a NUL)."""
        return _SEPARATOR.join(s for m in self.messages for s in message_strings(m))

    @cached_property
    def folded(self) -> str:
        """:attr:`text`, :func:`~compactctl.evaluate.probes.normalise`\\ d."""
        return normalise(self.text)

    def match(self, probe: Probe) -> str | None:
        """How ``probe`` is found: :data:`EXACT`, :data:`NORMALISED`, or ``None`` (lost).

        First in its source message (``probe.source``), when the context still holds a
        message with that uuid: a probe is a substring of its source (:mod:`compactctl.
        evaluate.probes`), so a message kept or only partly reduced usually answers at
        the cost of its own size. Else in the whole context, normalised, then as written.

        >>> from compactctl.model import Message
        >>> ctx = Context([Message({"type": "message", "role": "user",
        ...                         "content": "Do  not add\\nnew deps; see QUI-8564."})])
        >>> [ctx.match(Probe(k, t, 1, 1)) for k, t in [("user_constraint", "do not add new deps"),
        ...  ("identifier", "QUI-8564"), ("identifier", "QUI-856"), ("user_constraint", "see")]]
        ['normalised', 'exact', None, 'exact']
        """
        word = probe.kind == "identifier"
        source = self.by_uuid.get(probe.source) if probe.source is not None else None
        if source is not None and any(
            _contains(s, probe.text, word) for s in message_strings(source)
        ):
            return EXACT
        found = self._in_context(probe.text, word)
        if found is None:  # a summary carries the fact with its secrets redacted
            from compactctl.summarize.redact import redact

            hidden = redact(probe.text)
            if hidden != probe.text:
                found = self._in_context(hidden, word)
        return found

    def _in_context(self, text: str, word: bool) -> str | None:
        key = normalise(text)
        if not key or not _contains(self.folded, key, word):
            return None
        return EXACT if _contains(self.text, text, word) else NORMALISED

    def check(self, probes: Sequence[Probe]) -> list[str | None]:
        """:meth:`match` of each probe, in order."""
        return [self.match(p) for p in probes]


def _contains(haystack: str, needle: str, word: bool) -> bool:
    """``needle in haystack``; with ``word``, as a whole word (:func:`_bounded`)."""
    return _bounded(haystack, needle) if word else needle in haystack
