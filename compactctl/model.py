"""The canonical event types of compactctl JSONL version 1 (docs/design.md section 3).

An :class:`Event` is one line of a transcript: its parsed JSON object (``data``), the raw
bytes it was read from (``raw``, without the trailing ``\\n``) and its 1-based line number.
Events are immutable; a filter that changes one yields ``event.evolve(...)``, which drops the
raw bytes so the writer re-serializes only what changed (docs/style.md habits 2 and 4).

The subclasses give typed access to the fields replay and the layers use:

- :class:`Message` (``type: "message"``): one chat message.
- :class:`CompactEvent` (``type: "compact"``): a deterministic reduction (micro, rules, dedup).
- :class:`SummaryEvent` (``type: "summary"``): a summary that replaces earlier events.
- :class:`RevertEvent` (``type: "revert"``): takes back earlier compact or summary events.
- :class:`SessionEvent` (``type: "session"``): model and context window of the session.
- :class:`OtherEvent`: any other ``type``, kept verbatim and ignored by replay.
- :class:`BadLine`: a line that is not a JSON object (malformed, torn, blank, not UTF-8);
  kept byte for byte, reported by ``inspect`` and skipped by replay.
"""

from __future__ import annotations

import contextlib
import gc
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, ClassVar

import orjson

__all__ = [
    "BadLine",
    "CompactEvent",
    "Event",
    "Filter",
    "Message",
    "OtherEvent",
    "RevertEvent",
    "SessionEvent",
    "SummaryEvent",
    "acyclic",
    "dumps",
    "event_from_dict",
    "message_text",
    "next_turn",
]

JSON = dict[str, Any]


class Event:
    """One transcript event: a JSON object plus where it came from.

    Attributes:
        data: the parsed JSON object (treat as read-only; use :meth:`evolve`).
        raw: the exact bytes of the source line without its ``\\n`` (``\\r`` of a CRLF file
            included), or ``None`` for an event created or changed in memory.
        line: 1-based line number in the source file, or ``None`` for a new event.
        turn: the turn id: ``data["turnId"]`` when present, else assigned by the reader
            (a turn starts at each user message; system messages before it are turn 0).
    """

    __slots__ = ("data", "raw", "line", "turn")
    kind: ClassVar[str] = "event"

    def __init__(
        self,
        data: JSON,
        raw: bytes | None = None,
        line: int | None = None,
        turn: int | None = None,
    ) -> None:
        self.data = data
        self.raw = raw
        self.line = line
        if turn is None:  # as _int("turnId"), inline: every event of a read passes here
            tid = data.get("turnId")
            turn = tid if isinstance(tid, int) and not isinstance(tid, bool) else None
        self.turn = turn

    @property
    def type(self) -> str:
        """The event's ``type`` field (``""`` when missing or not a string)."""
        return self._str("type") or ""

    @property
    def uuid(self) -> str | None:
        """The event's ``uuid`` (``None`` when missing or not a string)."""
        value = self.data.get("uuid")  # as _str("uuid"), inline: the layers ask it 300k
        return value if isinstance(value, str) else None  # times on the 32 MB bench session

    def _str(self, key: str) -> str | None:
        """The field ``key`` when it is a string, else ``None``."""
        value = self.data.get(key)
        return value if isinstance(value, str) else None

    def _int(self, key: str) -> int | None:
        """The field ``key`` when it is an integer (not a boolean), else ``None``."""
        value = self.data.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    def _strs(self, key: str) -> list[str]:
        """The strings of the list field ``key`` (other items left out); ``[]`` when it is
        not a list."""
        value = self.data.get(key)
        return [x for x in value if isinstance(x, str)] if isinstance(value, list) else []

    def evolve(self, **changes: Any) -> Event:
        """Return a copy with ``changes`` merged into ``data``; the raw bytes are dropped.

        A key given the value ``None`` is removed. The input event is never mutated.
        Integers beyond 64 bits, which orjson reads as floats into ``data`` (reading stays
        fast), are re-read exactly from the raw bytes here, so a changed event writes them
        back unchanged.

        >>> e = Message({"type": "message", "uuid": "m1", "role": "user", "content": "hi"})
        >>> e2 = e.evolve(content="hello")
        >>> (e.content, e2.content, type(e2).__name__)
        ('hi', 'hello', 'Message')
        """
        data = dict(self.data)
        if self.raw is not None and _may_hold_big_int(self.raw):
            data = _exact(self.raw) or data
        for key, value in changes.items():
            if value is None:
                data.pop(key, None)
            else:
                data[key] = value
        return type(self)(data, None, self.line, self.turn)

    def to_json(self) -> bytes:
        """The line for this event, without ``\\n``: the raw bytes when unchanged, else orjson.

        Values orjson refuses (lone surrogates, integers beyond 64 bits, both legal in JSON
        and read through the stdlib fallback) are written by :func:`dumps`.
        """
        if self.raw is not None:
            return self.raw
        return dumps(self.data)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(uuid={self.uuid!r}, line={self.line!r})"


class Message(Event):
    """A chat message (``type: "message"``): system, user, assistant or tool."""

    __slots__ = ()
    kind = "message"

    @property
    def role(self) -> str:
        """``system``, ``user``, ``assistant`` or ``tool`` (``""`` when missing)."""
        value = self.data.get("role")  # as _str("role"), inline (a hot path, as uuid)
        return value if isinstance(value, str) else ""

    @property
    def content(self) -> Any:
        """The ``content`` field: a string, a list of parts, or ``None``."""
        return self.data.get("content")

    @property
    def text(self) -> str:
        """The text of ``content``: text parts joined by ``\\n``; images, opaque parts skipped."""
        return message_text(self.data.get("content"))

    @property
    def tool_calls(self) -> list[JSON]:
        """``toolCalls`` of an assistant message: ``[{"id", "name", "arguments"}]``, maybe empty."""
        calls = self.data.get("toolCalls")
        if not isinstance(calls, list):
            return []
        return [c for c in calls if isinstance(c, dict)]

    @property
    def tool_call_id(self) -> str | None:
        """``toolCallId`` of a tool message: the id of the call it answers."""
        value = self.data.get("toolCallId")  # as _str("toolCallId"), inline: eval asks it
        return value if isinstance(value, str) else None  # of every tool message

    @property
    def tool_name(self) -> str | None:
        """``toolName`` of a tool message, when the log records it."""
        return self._str("toolName")

    @property
    def is_error(self) -> bool:
        """``isError`` of a tool message (``False`` when absent)."""
        return self.data.get("isError") is True

    @property
    def pinned(self) -> bool:
        """``pinned: true`` marks a message no layer may change or summarize away."""
        return self.data.get("pinned") is True


class CompactEvent(Event):
    """A deterministic reduction (``type: "compact"``) that replay applies by ``mode``.

    Fields: ``mode`` (``micro``/``rules``/``dedup``), ``targets`` (message uuids),
    ``params`` (what replay needs), ``duplicateOf`` (dedup: ``{older: newer}``),
    ``startTurnId``/``endTurnId``.
    """

    __slots__ = ()
    kind = "compact"

    @property
    def mode(self) -> str:
        """The reduction mode (``""`` when missing)."""
        return self._str("mode") or ""

    @property
    def targets(self) -> list[str]:
        """The uuids of the messages this event changes."""
        return self._strs("targets")

    @property
    def params(self) -> JSON:
        """Everything replay needs to re-apply the reduction."""
        p = self.data.get("params")
        return p if isinstance(p, dict) else {}


class SummaryEvent(Event):
    """A summary (``type: "summary"``) that replaces the events named in ``replaces``."""

    __slots__ = ()
    kind = "summary"

    @property
    def replaces(self) -> list[str]:
        """The uuids replaced: messages, and an earlier summary when incremental."""
        return self._strs("replaces")

    @property
    def summary_text(self) -> str:
        """``summaryText``: the text the effective context shows in place of the span."""
        return self._str("summaryText") or ""

    @property
    def last_summarized_turn(self) -> int:
        """``lastSummarizedTurnId`` (0 when missing)."""
        return self._int("lastSummarizedTurnId") or 0

    @property
    def tiers(self) -> dict[str, str]:
        """``tiers``: ``{"L0": text, "L1": text, "L2": text}`` once computed, else ``{}``."""
        t = self.data.get("tiers")
        if not isinstance(t, dict):
            return {}
        return {k: v for k, v in t.items() if isinstance(v, str)}


class RevertEvent(Event):
    """A revert (``type: "revert"``, appended by ``compactctl undo``): replay skips the
    compact and summary events named in ``targets`` that come before it, as if they had
    never been appended (docs/design.md section 3, "RevertEvent")."""

    __slots__ = ()
    kind = "revert"

    @property
    def targets(self) -> list[str]:
        """The uuids of the compact and summary events taken back."""
        return self._strs("targets")


class SessionEvent(Event):
    """The optional session header (``type: "session"``): ``model``, ``contextWindow``,
    ``peakPromptTokens``."""

    __slots__ = ()
    kind = "session"

    @property
    def model(self) -> str | None:
        """The model the session ran with, when recorded."""
        return self._str("model")

    @property
    def context_window(self) -> int | None:
        """The context window in tokens, when recorded."""
        c = self._int("contextWindow")
        return c if c is not None and c > 0 else None

    @property
    def peak_prompt_tokens(self) -> int | None:
        """The largest prompt, in tokens, the provider reported for one request of the session
        (``peakPromptTokens``: input, cache-read and cache-creation tokens of one response's
        ``usage``), when recorded."""
        c = self.data.get("peakPromptTokens")
        return c if isinstance(c, int) and not isinstance(c, bool) and c > 0 else None


class OtherEvent(Event):
    """An event of a type compactctl does not interpret; kept verbatim, ignored by replay."""

    __slots__ = ()
    kind = "other"


class BadLine(Event):
    """A line that is not a usable JSON object; kept byte for byte, skipped by replay.

    Attributes:
        problem: one of ``malformed`` (not JSON), ``not-object`` (JSON but not an object),
            ``torn`` (last line without ``\\n``: a writer crashed or is mid-line),
            ``blank`` (empty or whitespace only), ``invalid-utf8``.
        detail: a human-readable reason (the parser's message).
    """

    __slots__ = ("problem", "detail")
    kind = "bad"

    def __init__(self, raw: bytes, line: int | None, problem: str, detail: str = "") -> None:
        super().__init__({}, raw, line, None)
        self.problem = problem
        self.detail = detail

    def evolve(self, **changes: Any) -> Event:
        """Bad lines cannot be changed: they pass through as their raw bytes.

        Raises:
            TypeError: always.
        """
        raise TypeError("a BadLine has no JSON object to change")

    def __repr__(self) -> str:
        return f"BadLine(problem={self.problem!r}, line={self.line!r})"


_TYPES: dict[str, type[Event]] = {
    "message": Message,
    "compact": CompactEvent,
    "summary": SummaryEvent,
    "revert": RevertEvent,
    "session": SessionEvent,
}


def event_from_dict(
    data: JSON, raw: bytes | None = None, line: int | None = None, turn: int | None = None
) -> Event:
    """Build the typed event for a JSON object by its ``type`` (unknown types: OtherEvent).

    >>> event_from_dict({"type": "summary", "uuid": "s1", "replaces": ["m1"]}).replaces
    ['m1']
    >>> type(event_from_dict({"type": "queue-operation"})).__name__
    'OtherEvent'
    """
    kind = data.get("type")
    cls = _TYPES.get(kind, OtherEvent) if isinstance(kind, str) else OtherEvent
    return cls(data, raw, line, turn)


def message_text(content: Any) -> str:
    """The text of a message ``content``: the string itself, or its text parts joined by ``\\n``.

    Images, thinking blocks and other opaque parts contribute nothing.

    >>> message_text([{"type": "text", "text": "a"}, {"type": "image"},
    ...               {"type": "text", "text": "b"}])
    'a\\nb'
    """
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [
            p["text"]
            for p in content
            if isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str)
        ]
        return "\n".join(texts)
    return ""


SURROGATE_NOTE = (
    "the input holds lone surrogate escapes (\\ud800-\\udfff, half a character), which "
    "strict JSON parsers (orjson, jq) reject; the lines compactctl writes carry U+FFFD "
    "(the replacement character) instead"
)
"""The warning :func:`dumps` gives (once per process) when it replaces a lone surrogate."""

_SURROGATE = re.compile("[\ud800-\udfff]")


def without_surrogates(value: Any) -> tuple[Any, int]:
    """``value`` with every lone surrogate in its strings (keys too) replaced by U+FFFD,
    and the number of strings changed. Lists and dicts are copied where they change.

    A lone surrogate comes from a ``\\udXXX`` escape in the input that is not half of a
    pair: legal JSON text, read by the stdlib, but not a character, so no valid UTF-8 and
    refused by strict parsers (RFC 8259 section 8.2 leaves such strings' behaviour open).

    >>> without_surrogates({"a": ["x\\ud800y", 1]})
    ({'a': ['x\ufffdy', 1]}, 1)
    """
    if isinstance(value, str):
        fixed, n = _SURROGATE.subn("\ufffd", value)
        return fixed, int(n > 0)
    if isinstance(value, list):
        items = [without_surrogates(v) for v in value]
        count = sum(n for _, n in items)
        return ([v for v, _ in items] if count else value), count
    if isinstance(value, dict):
        count = 0
        out: dict[Any, Any] = {}
        for k, v in value.items():
            k2, nk = without_surrogates(k)
            v2, nv = without_surrogates(v)
            out[k2] = v2
            count += nk + nv
        return (out if count else value), count
    return value, 0


def dumps(value: Any) -> bytes:
    """Serialize to compact JSON bytes that strict parsers accept: orjson, or the stdlib
    where orjson refuses.

    orjson rejects lone surrogates and integers beyond 64 bits. A lone surrogate (from a
    ``\\udXXX`` escape in the input) is replaced by U+FFFD (:func:`without_surrogates`),
    with a :class:`~compactctl.errors.CompactWarning` (:data:`SURROGATE_NOTE`), so no line
    compactctl writes holds one; an integer beyond 64 bits is written exactly by the
    stdlib (non-ASCII then as ``\\uXXXX`` escapes).

    Raises:
        InputError: a value nested deeper than both serializers allow.

    >>> import warnings
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     dumps({"a": "\\ud800", "n": 2**70})
    b'{"a":"\\\\ufffd","n":1180591620717411303424}'
    """
    try:
        return orjson.dumps(value)
    except TypeError:
        pass
    import json
    import sys

    # orjson writes 255 levels and reads 1024; the stdlib needs a little headroom for what
    # orjson read, so the recursion limit is raised for this call only.
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 5000))
    try:
        value, replaced = without_surrogates(value)
        if replaced:
            import warnings

            from compactctl.errors import CompactWarning

            warnings.warn(CompactWarning(SURROGATE_NOTE), stacklevel=2)
            try:
                return orjson.dumps(value)
            except TypeError:
                pass  # also an integer beyond 64 bits, or deeper than orjson writes
        return json.dumps(value, ensure_ascii=True, separators=(",", ":")).encode()
    except RecursionError:
        from compactctl.errors import InputError

        raise InputError(
            "a changed message holds a value nested too deeply to write as JSON "
            "(more levels than Python's recursion limit); its original line is kept"
        ) from None
    finally:
        sys.setrecursionlimit(limit)


_LONG_DIGITS = re.compile(rb"\d{20}|-\d{19}")
"""20+ digits, or a minus and 19: maybe an integer beyond orjson's 64 bits (below -2**63 or
above 2**64 - 1), which orjson reads as a float."""


_DIGITS_TO_ZERO = bytes.maketrans(b"123456789", b"000000000")


def _may_hold_big_int(raw: bytes) -> bool:
    """``_LONG_DIGITS.search(raw)`` in C speed: digits mapped to ``0``, then a substring test.

    >>> _may_hold_big_int(b'{"n":123456789012345678901}'), _may_hold_big_int(b'{"n":12}')
    (True, False)
    """
    zeros = raw.translate(_DIGITS_TO_ZERO)
    return b"0" * 20 in zeros or b"-" + b"0" * 19 in zeros


def _exact(raw: bytes) -> JSON | None:
    """``raw`` parsed by the stdlib, which keeps big integers exact (``None`` if it fails)."""
    import json

    try:
        value = json.loads(raw[3:] if raw.startswith(b"\xef\xbb\xbf") else raw)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


Filter = Callable[[Iterable[Event]], Iterator[Event]]
"""A pipeline step: takes a stream of events, yields a stream of events (never mutates)."""


def is_real_user(data: Mapping[str, Any]) -> bool:
    """True when a message dict is a user message that starts a turn (not a summary insert)."""
    return data.get("role") == "user" and "summaryOf" not in data and not data.get("isMeta")


def next_turn(data: Mapping[str, Any], turn: int) -> int:
    """The turn of the message ``data`` (a message dict) that follows a message of turn
    ``turn``: its recorded ``turnId`` when that is an integer (not a boolean), else
    ``turn + 1`` when it is a real user message (:func:`is_real_user`: a turn starts there,
    docs/design.md section 2), else ``turn``. The one rule of
    :func:`compactctl.io.jsonl.assign_turns` and of ``eval``'s reader
    (:mod:`compactctl.evaluate.lines`), which calls it once per message line.

    >>> next_turn({"role": "user", "content": "go"}, 2), next_turn({"role": "tool"}, 2)
    (3, 2)
    >>> next_turn({"role": "user", "turnId": 7}, 2), next_turn({"role": "user", "turnId": True}, 2)
    (7, 3)
    """
    recorded = data.get("turnId")
    if recorded.__class__ is int:  # bool is a subclass of int, not int itself
        return recorded  # type: ignore[no-any-return]
    return turn + 1 if is_real_user(data) else turn


@contextlib.contextmanager
def acyclic() -> Iterator[None]:
    """Python's cyclic garbage collector paused for the block (re-enabled after, when it
    was on), for code that allocates many objects none of which is in a reference cycle.

    Events hold no reference cycle (parsed JSON is a tree; an event points to its data), so
    the collector never frees one: what reading a session allocates and drops (the source
    records of a foreign format) is freed by reference counting, and each collection of the
    oldest generation in the middle of a read only walks all of it again. Measured: two such
    collections, about 0.2 s of ``Session.open``'s 0.5 s on the 32 MB Claude Code bench
    session; about 8% of ``eval``'s time on the ``make bench`` corpus; and in the pass of
    ``compact --layers all`` over that session (which allocates enough to set them off
    again), two more of 0.19-0.24 s together.

    What the block allocated and still holds is long-lived: it joins the oldest generation
    when the block ends (``gc.freeze()`` then ``gc.unfreeze()``, which moves every tracked
    object there without examining any; skipped when the program froze objects of its own,
    which ``gc.unfreeze`` would thaw too), so the first collection after the block does not
    walk it all (0.03-0.04 s after ``compact --layers all`` on that session). Cyclic garbage
    made in the block (few objects: peak RSS was the same, 188-195 MB) is collected by the
    next collection of the oldest generation.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            if not gc.get_freeze_count():  # never thaw what the host program froze itself
                gc.freeze()
                gc.unfreeze()
            gc.enable()
