"""``inspect``: counts, sizes, tokens, compaction history and validation findings of a transcript.

:class:`InspectAccumulator` owns every number of the report and builds its dict in one
place. It consumes a session's lines as ``(line number, JSON object or BadLine)`` pairs
(:data:`Item`), so what is counted is decided here only. Two adapters feed it:

- :func:`inspect_events`, the library entry, with the objects of ``Event`` objects (any
  format, after import);
- :func:`compactctl.app.inspect_fast.inspect_lines` with the dicts orjson parses from
  canonical JSON lines (no ``Event`` per line: the fast path of ``inspect``).
"""

from __future__ import annotations

import heapq
import math
from collections import Counter
from collections.abc import Callable, Container, Iterable
from typing import Any

from compactctl.io.jsonl import BOM
from compactctl.media import media_rule_for, media_tokens
from compactctl.model import (
    BadLine,
    CompactEvent,
    Event,
    RevertEvent,
    SessionEvent,
    SummaryEvent,
    event_from_dict,
    is_real_user,
)
from compactctl.replay import known_modes, replay, reverted
from compactctl.session import context_window as window_of
from compactctl.session import encoding_name, session_model
from compactctl.tokens import TokenCounter, message_payload, messages_tokens, prompt_sum

__all__ = [
    "Finding",
    "InspectAccumulator",
    "bad_line_finding",
    "history_entry",
    "inspect_events",
    "reduction_findings",
]

Finding = dict[str, Any]
"""``{"line": int | None, "kind": str, "message": str}``."""

_BAD_LINE_MESSAGES = {
    "malformed": "malformed JSON line (kept, skipped by replay)",
    "not-object": "line is JSON but not an object (kept, skipped by replay)",
    "torn": "torn last line: no newline at end of file (kept; appends start on a new line)",
    "blank": "blank line (kept, ignored)",
    "invalid-utf8": "line is not valid UTF-8 (kept, skipped by replay)",
}

_ROLE_ROW = ("messages", "bytes", "chars", "tokens")
"""The fields of a ``byRole`` row: messages (a count), bytes, chars, tokens (while fed, a
list of their values in this order: an index is cheaper than a key in the inner loop)."""

_TOOL_ROW = ("calls", "results", "errors", "bytes", "chars", "tokens")
"""The fields of a ``byTool`` row: calls, results, errors (counts), bytes, chars, tokens
(while fed, a list of their values in this order)."""

_DUP_TAIL = 32
"""Chars at the end of a tool output that, with its length, bucket it for the exact repeat
search (texts are compared whole only within a bucket, :func:`_filed`)."""

_Bucket = str | list[list[Any]] | Counter[str]
"""The texts filed in one bucket of the exact repeat search (:func:`_filed`): the one text
filed so far, the ``[text, count]`` groups of its distinct texts (up to 8), or a
``Counter`` of them (more)."""


def _finding(line: int | None, kind: str, message: str) -> Finding:
    return {"line": line, "kind": kind, "message": message}


def bad_line_finding(e: BadLine) -> Finding:
    """The finding for a line that is not a usable JSON object (kind: its ``problem``).

    >>> bad_line_finding(BadLine(b"", 4, "blank", "blank line"))
    {'line': 4, 'kind': 'blank', 'message': 'blank line (kept, ignored)'}
    """
    msg = _BAD_LINE_MESSAGES.get(e.problem, e.problem)
    if e.detail and e.problem in {"malformed", "invalid-utf8", "not-object"}:
        msg = f"{msg}: {e.detail}"
    return _finding(e.line, e.problem, msg)


def reduction_findings(
    e: SummaryEvent | CompactEvent, seen: Container[str], modes: Container[str]
) -> list[Finding]:
    """Findings of a summary or compact event: ``unknown-replaces`` (a summary),
    ``unknown-mode`` and ``unknown-target`` (a compact event), in that order.

    Args:
        e: the event.
        seen: the uuids of the events before it (and its own).
        modes: the compact modes replay can apply (:func:`~compactctl.replay.known_modes`).
    """
    findings: list[Finding] = []
    if isinstance(e, SummaryEvent):
        kind, what, uuids = "unknown-replaces", "replaces", e.replaces
    else:
        kind, what, uuids = "unknown-target", "targets", e.targets
        if e.mode not in modes:
            message = f"compact mode {e.mode!r} is not known to this version (kept, not applied)"
            findings.append(_finding(e.line, "unknown-mode", message))
    unknown = [u for u in uuids if u not in seen]
    if unknown:
        message = f"{what} {len(unknown)} unknown uuid(s), e.g. {unknown[0]}"
        findings.append(_finding(e.line, kind, message))
    return findings


def history_entry(
    e: CompactEvent | SummaryEvent | RevertEvent, reverted_by: str | None = None
) -> dict[str, Any]:
    """The ``history`` item of ``inspect --json`` for a compact, summary or revert event:
    ``{"line", "type", "uuid", "mode", "targets"}`` (compact; ``targets`` a count),
    ``{"line", "type", "uuid", "format", "model", "triggerMode", "replaces", "tiers"}``
    (summary; ``replaces`` a count of uuids, ``tiers`` the tier names, and ``supersedes``,
    the uuid of the summary it takes the place of, for the one ``tiers`` appends: its
    ``replaces`` counts that summary too; ``selectedTier``, the tier replay shows, when one
    is, and ``tierTokens``, each tier's size in tokens) or ``{"line", "type", "uuid",
    "reverts"}`` (revert: the uuids it takes back), then ``stats`` when recorded, ``timestamp``, and
    ``revertedBy`` (the revert's uuid) for a compaction taken back."""
    entry: dict[str, Any] = {"line": e.line, "type": e.type, "uuid": e.uuid}
    if isinstance(e, RevertEvent):
        entry["reverts"] = e.targets
    elif isinstance(e, CompactEvent):
        entry["mode"] = e.mode
        entry["targets"] = len(e.targets)
    else:
        entry["format"] = e.data.get("format")
        entry["model"] = e.data.get("model")
        entry["triggerMode"] = e.data.get("triggerMode")
        entry["replaces"] = len(e.replaces)
        entry["tiers"] = sorted(e.tiers)
        for key in ("supersedes", "selectedTier"):
            if isinstance(e.data.get(key), str):
                entry[key] = e.data[key]
        if isinstance(e.data.get("tierTokens"), dict):
            entry["tierTokens"] = e.data["tierTokens"]
    if "stats" in e.data:
        entry["stats"] = e.data["stats"]
    entry["timestamp"] = e.data.get("timestamp")
    if reverted_by is not None:
        entry["revertedBy"] = reverted_by
    return entry


Item = tuple[int | None, dict[str, Any] | BadLine]
"""One line for :meth:`InspectAccumulator.feed`: ``(line, object)``. ``line`` is its line
number (``None`` for an imported event that has none); ``object`` the parsed JSON object,
or the :class:`~compactctl.model.BadLine` of a line that is none."""


class UnknownCounter(LookupError):
    """A message came before the session event whose model picks the encoding, and the
    accumulator was given no counter (:meth:`InspectAccumulator.feed`)."""


class InspectAccumulator:
    """Every counter of one session's ``inspect`` report, fed the session's lines in order.

    :meth:`feed` consumes the lines (it may be called several times, each continuing where
    the last stopped); :meth:`report` then returns the per-file dict of ``inspect --json``.
    The JSON objects are counted by their ``type`` field, as the reader builds events from
    them: ``message`` (turn ids derived as :func:`~compactctl.io.jsonl.assign_turns` does),
    ``session`` (the first one gives the model and context window), ``compact`` and
    ``summary`` (findings, history, and the replay of the effective context); every object
    counts toward ``events`` and the uuid findings.

    Args:
        counter: the token counter; ``None`` until the first session event, whose model picks
            the encoding (:func:`compactctl.session.encoding_name`).
        top: how many of the largest tool outputs to list (none when ``top <= 0``).

    Attributes:
        counter: the token counter (``None`` while unknown).
        bom: the file starts with a UTF-8 BOM (set by the reader; a ``bom`` finding).
        findings: the findings so far, in feeding order (:meth:`report` adds the unanswered
            tool calls and sorts them).

    Memory: a few ints per message, one text of each distinct tool output (for the exact
    repeats) and the compact and summary events; no message is kept.

    >>> acc = InspectAccumulator(TokenCounter("estimate"))
    >>> acc.feed([(1, {"type": "message", "uuid": "a", "role": "user", "content": "hello"}),
    ...           (2, BadLine(b"{", 2, "malformed", "unexpected end"))])
    >>> r = acc.report(path="p", fmt="canonical", context_window=9, tier=None, events=list)
    >>> r["byRole"]
    {'user': {'messages': 1, 'bytes': 5, 'chars': 5, 'tokens': 2}}
    >>> r["events"], r["tokens"], [f["kind"] for f in r["findings"]]
    ({'bad': 1, 'message': 1}, 8, ['malformed'])
    """

    def __init__(self, counter: TokenCounter | None = None, *, top: int = 10) -> None:
        self.counter = counter
        self.top = top
        self.bom = False
        self.findings: list[Finding] = []
        self._session: SessionEvent | None = None
        self._message_model: str | None = None  # the first message naming a model
        self._lines = 0  # the last source line seen: a foreign line gives 0, 1 or more events
        self._turn = 0  # the running turn id (jsonl.assign_turns)
        self._max_turn: int | None = None
        self._by_type: dict[str, int] = {}
        self._by_role: dict[str, list[int]] = {}  # values in _ROLE_ROW order
        self._by_tool: dict[str, list[int]] = {}  # values in _TOOL_ROW order
        self._counts: list[int] = []  # payload tokens of each message
        self._message_lines: list[int | None] = []
        self._seen: dict[str, int | None] = {}  # uuid -> line of its first use
        self._call_line: dict[str, int | None] = {}  # call id -> line of the last message making it
        self._answered: set[str] = set()
        self._tool_of_call: dict[str, str] = {}
        # heap of the largest tool outputs: (tokens, -index, uuid, line, toolName, callId, chars)
        self._outputs: list[tuple[Any, ...]] = []
        # tool outputs by (length, tail): only texts sharing both are compared whole
        self._buckets: dict[tuple[int, str], _Bucket] = {}
        self._source_dup_bytes = 0
        self._reductions: list[CompactEvent | SummaryEvent | RevertEvent] = []
        self._modes: set[str] | None = None

    def feed(self, items: Iterable[Item]) -> None:
        """Count lines, in file order (see :data:`Item`).

        Per line: its type (``bad``, or the object's ``type``; ``untyped`` when missing or
        not a string) and its findings (a bad line's problem, ``missing-uuid``,
        ``duplicate-uuid``, and those of :func:`reduction_findings`). Per message: its turn,
        its role's messages, bytes, chars (of the text
        :func:`~compactctl.tokens.message_payload` gives) and tokens (of that text, plus its
        images and documents: :func:`~compactctl.tokens.message_tokens`), its tool calls; for a tool
        result, its tool's row, the largest outputs, the exact repeats, the source's
        ``duplicateBytes`` and the ``tool-result-without-call`` finding.

        One loop over local names: this is the inner loop of ``inspect``.

        Raises:
            UnknownCounter: a message comes before the counter is known.
            ValueError: the counter's tiktoken encoding is not available offline.
        """
        counter, top, message_model = self.counter, self.top, self._message_model
        lines, turn, max_turn = self._lines, self._turn, self._max_turn
        messages = 0  # message lines: added to by_type["message"] at the end
        by_type, by_role, by_tool = self._by_type, self._by_role, self._by_tool
        findings, seen, counts = self.findings, self._seen, self._counts
        message_lines, buckets, outputs = self._message_lines, self._buckets, self._outputs
        call_line, answered, tool_of_call = self._call_line, self._answered, self._tool_of_call
        # the tokens a tool output must exceed to enter the largest: any while there is room
        least = outputs[0][0] if 0 < top == len(outputs) else -math.inf if top > 0 else math.inf
        try:
            for line, data in items:
                if line is not None and line > lines:
                    lines = line
                if isinstance(data, BadLine):
                    by_type["bad"] = by_type.get("bad", 0) + 1
                    findings.append(bad_line_finding(data))
                    continue
                t = data.get("type")
                if t == "message":
                    messages += 1
                else:
                    key = t if isinstance(t, str) and t else "untyped"
                    by_type[key] = by_type.get(key, 0) + 1
                uuid = data.get("uuid")
                if not isinstance(uuid, str):
                    if t == "message" or t == "compact" or t == "summary":
                        findings.append(_finding(line, "missing-uuid", f"{t} has no uuid"))
                elif uuid in seen:
                    message = f"uuid {uuid} already used on line {seen[uuid]}"
                    findings.append(_finding(line, "duplicate-uuid", message))
                else:
                    seen[uuid] = line
                if t != "message":
                    if t == "session":
                        if self._session is None:
                            self._session = SessionEvent(data, None, line)
                            if counter is None:
                                counter = TokenCounter(encoding_name(None, self._session.model))
                            if counter.media_rule is None:
                                counter.media_rule = media_rule_for(self._session.model)
                    elif t == "compact" or t == "summary" or t == "revert":
                        self._reduction(data, line)
                    continue

                # a message
                if counter is None:
                    raise UnknownCounter("a message comes before the session event")
                if message_model is None and "model" in data and isinstance(data["model"], str):
                    message_model = data["model"] or None
                role = data.get("role")
                if not isinstance(role, str):
                    role = ""
                tid = data.get("turnId")  # the turn id, as jsonl.assign_turns gives it
                if tid.__class__ is int:  # as model.next_turn: bool is not int itself
                    turn = tid
                elif role == "user" and is_real_user(data):
                    turn += 1
                if max_turn is None or turn > max_turn:
                    max_turn = turn
                content = data.get("content")
                calls = data.get("toolCalls")
                # message_payload, inlined for a plain text message
                text = (
                    content if calls is None and isinstance(content, str) else message_payload(data)
                )
                chars = len(text)
                if text.isascii():  # the UTF-8 size and estimate_tokens, inlined for ASCII
                    size = chars
                    n = (chars + 3) // 4 if counter.is_estimate else counter.count(text)
                else:
                    size = len(text.encode("utf-8", "surrogatepass"))
                    n = counter.count(text)
                if content.__class__ is list:  # images and documents (message_tokens)
                    rule = counter.media_rule or "anthropic"
                    n += media_tokens(content, rule, counter.count)
                index = len(counts)
                counts.append(n)
                message_lines.append(line)
                row = by_role.get(role or "?")
                if row is None:
                    row = by_role[role or "?"] = [0, 0, 0, 0]
                row[0] += 1  # messages, bytes, chars, tokens (_ROLE_ROW)
                row[1] += size
                row[2] += chars
                row[3] += n
                if isinstance(calls, list) and calls:  # Message.tool_calls, without the list
                    for c in calls:
                        if isinstance(c, dict):
                            name = str(c.get("name") or "?")
                            cid = c.get("id")
                            if isinstance(cid, str):
                                tool_of_call[cid] = name
                                call_line[cid] = line
                            row = by_tool.get(name)
                            if row is None:
                                row = by_tool[name] = [0, 0, 0, 0, 0, 0]
                            row[0] += 1  # calls (_TOOL_ROW)
                if role != "tool":
                    continue
                tool_name = data.get("toolName")
                if not isinstance(tool_name, str):
                    tool_name = None
                call_id = data.get("toolCallId")
                if not isinstance(call_id, str):
                    call_id = None
                name = tool_name or tool_of_call.get(call_id or "", "?")
                row = by_tool.get(name)
                if row is None:
                    row = by_tool[name] = [0, 0, 0, 0, 0, 0]
                row[1] += 1  # results, errors, bytes, chars, tokens (_TOOL_ROW)
                if data.get("isError") is True:
                    row[2] += 1
                row[3] += size
                row[4] += chars
                row[5] += n
                if n > least:
                    # (n, -index) is unique: a later output of the least size never enters
                    uid = uuid if isinstance(uuid, str) else ""
                    item = (n, -index, uid, line, tool_name, call_id, chars)
                    if len(outputs) < top:
                        heapq.heappush(outputs, item)
                    else:
                        heapq.heapreplace(outputs, item)
                    if len(outputs) == top:
                        least = outputs[0][0]
                if text:  # filed for the exact repeats (_filed counts them by bucket)
                    bucket = (chars, text[-_DUP_TAIL:])
                    same = buckets.get(bucket)
                    buckets[bucket] = text if same is None else _filed(same, text)
                if "duplicateBytes" in data and isinstance(data["duplicateBytes"], int):
                    self._source_dup_bytes += data["duplicateBytes"]
                if call_id is None or call_id not in call_line:
                    message = f"tool result answers unknown call {call_id!r}"
                    findings.append(_finding(line, "tool-result-without-call", message))
                else:
                    answered.add(call_id)
        finally:
            self.counter, self._message_model = counter, message_model
            self._lines, self._turn, self._max_turn = lines, turn, max_turn
            if messages:
                by_type["message"] = by_type.get("message", 0) + messages

    def replay_lines(self) -> list[int]:
        """The lines of the messages and the compact, summary and revert events fed, in order:
        the lines replay reads (the lines without a number are left out)."""
        messages = [n for n in self._message_lines if n is not None]
        reductions = [e.line for e in self._reductions if e.line is not None]
        return sorted(messages + reductions)

    def _reduction(self, data: dict[str, Any], line: int | None) -> None:
        """A compact or summary event: its findings, its ``history`` entry, and its place for
        the replay of the effective context."""
        e = event_from_dict(data, None, line)
        assert isinstance(e, CompactEvent | SummaryEvent | RevertEvent)
        if self._modes is None:
            self._modes = set(known_modes())
        if not isinstance(e, RevertEvent):
            self.findings.extend(reduction_findings(e, self._seen, self._modes))
        self._reductions.append(e)

    def report(
        self,
        *,
        path: str,
        fmt: str,
        context_window: int | None,
        tier: str | None,
        events: Callable[[], Iterable[Event]],
    ) -> dict[str, Any]:
        """The per-file dict of ``inspect --json`` (see :func:`inspect_events`).

        Args:
            path: the file name to report.
            fmt: the source format name to report.
            context_window: overrides the session's and litellm's context window (tokens;
                :func:`compactctl.session.context_window`).
            tier: the summary tier the effective context shows (``None``: the selected one).
            events: gives the events fed, in order, as ``Event`` objects: at least the
                messages and the compact and summary events (replay ignores others). Called
                only when a compact or summary event was fed (the effective context is then
                replayed; without one it is every message).
        """
        model = session_model(self._session, [self._message_model])
        counter = self.counter or TokenCounter(encoding_name(None, model))
        findings = self.findings + [
            _finding(line, "tool-call-without-result", f"tool call {cid} has no result")
            for cid, line in self._call_line.items()
            if cid not in self._answered
        ]
        if self.bom:
            findings.append(_finding(1, "bom", "file starts with a UTF-8 BOM (ignored)"))
        findings.sort(key=lambda f: (f["line"] or 0, f["kind"]))
        largest = [
            {
                "uuid": uuid,
                "line": line,
                "tool": tool_name or self._tool_of_call.get(call_id or "", "?"),
                "tokens": n,
                "chars": chars,
            }
            for n, _, uuid, line, tool_name, call_id, chars in sorted(self._outputs, reverse=True)
        ]
        repeats = [
            (text, c)
            for same in self._buckets.values()
            if same.__class__ is not str
            for text, c in _groups(same)
            if c > 1
        ]
        tokens = prompt_sum(self._counts)
        effective = (tokens, len(self._counts))
        gone = reverted(self._reductions)
        if self._reductions:
            effective = self._replayed(list(events()), counter, tier)
        return {
            "path": path,
            "format": fmt,
            "lines": self._lines,
            "events": dict(sorted(self._by_type.items())),
            "messages": len(self._counts),
            "turns": self._max_turn or 0,
            "model": model,
            "contextWindow": window_of(
                context_window, self._session, model, path, warn=bool(self._counts)
            ),
            "tokenizer": counter.encoding_name,
            "byRole": _rows(self._by_role, _ROLE_ROW),
            "byTool": _rows(self._by_tool, _TOOL_ROW),
            "tokens": tokens,
            "effectiveTokens": effective[0],
            "effectiveMessages": effective[1],
            "largestToolOutputs": largest,
            "duplicates": {
                "exactToolOutputGroups": len(repeats),
                "redundantToolOutputs": sum(c - 1 for _, c in repeats),
                "redundantBytes": sum((c - 1) * _utf8_size(text) for text, c in repeats),
                "sourceDuplicateBytes": self._source_dup_bytes,
            },
            "history": [history_entry(e, gone.get(e.uuid or "")) for e in self._reductions],
            "findings": findings,
        }

    def _replayed(
        self, log: list[Event], counter: TokenCounter, tier: str | None
    ) -> tuple[int, int]:
        """``(effectiveTokens, effectiveMessages)``: the prompt estimate (tokens) and the
        length of the effective context replayed from ``log``. The counts of the messages
        replay keeps are reused; the others are counted with ``counter``."""
        messages = [e for e in log if e.type == "message"]  # the messages fed, in order
        view = replay(log, tier=tier)
        # the view's unchanged messages are the input objects: reuse their counts
        known = {id(m): n for m, n in zip(messages, self._counts, strict=True)}
        changed = [m for m in view if id(m) not in known]
        changed_counts = messages_tokens([m.data for m in changed], counter)
        known.update((id(m), n) for m, n in zip(changed, changed_counts, strict=True))
        return prompt_sum([known[id(m)] for m in view]), len(view)


def inspect_events(
    events: Iterable[Event],
    *,
    path: str,
    fmt: str = "canonical",
    counter: TokenCounter | None = None,
    context_window: int | None = None,
    top: int = 10,
    tier: str | None = None,
) -> dict[str, Any]:
    """Inspect one session's events.

    Args:
        events: the events in file order (consumed once; held in memory).
        path: the file name to report.
        fmt: the source format name to report.
        counter: the token counter; ``None`` picks the encoding from the session's model.
        context_window: overrides the session's and litellm's context window (tokens).
        top: how many of the largest tool outputs to list.
        tier: the summary tier the effective context shows (``None``: the selected one).

    Returns:
        ``{"path", "format", "lines", "events", "messages", "turns", "model",
        "contextWindow", "tokenizer", "byRole", "byTool", "tokens", "effectiveTokens",
        "effectiveMessages", "largestToolOutputs", "duplicates", "history", "findings"}``.
        ``tokens`` and ``effectiveTokens`` are prompt estimates in tokens (all messages, and
        the effective context); ``tokenizer`` names the encoding, or ``"estimate"``. Sizes are
        of message text: ``bytes`` UTF-8 bytes, ``chars`` code points. ``findings`` are in
        line order, kinds: ``malformed``, ``not-object``, ``torn``, ``blank``,
        ``invalid-utf8``, ``bom``, ``missing-uuid``, ``duplicate-uuid``,
        ``tool-call-without-result``, ``tool-result-without-call``, ``unknown-replaces``,
        ``unknown-target``, ``unknown-mode``.

    Each event is counted from its JSON object (``data``) by its ``type``, as the reader
    builds events, with turn ids derived as :func:`~compactctl.io.jsonl.assign_turns` does
    (:class:`InspectAccumulator`).

    Raises:
        ValueError: the counter's tiktoken encoding is not available offline.
    """
    log = list(events)
    session = next((e for e in log if isinstance(e, SessionEvent)), None)
    model = session.model if session else None
    acc = InspectAccumulator(counter or TokenCounter(encoding_name(None, model)), top=top)
    acc.feed((e.line, e if isinstance(e, BadLine) else e.data) for e in log)
    acc.bom = any(
        e.line == 1 and e.raw is not None and e.raw.startswith(BOM) and not isinstance(e, BadLine)
        for e in log
    )
    return acc.report(
        path=path,
        fmt=fmt,
        context_window=context_window,
        tier=tier,
        events=lambda: log,
    )


def _rows(table: dict[str, list[int]], fields: tuple[str, ...]) -> dict[str, dict[str, int]]:
    """The rows of ``byRole`` or ``byTool`` by key, sorted: each row's values (a list, in the
    order of ``fields``) as a dict of ``fields``."""
    return {key: dict(zip(fields, table[key], strict=True)) for key in sorted(table)}


def _filed(same: _Bucket, text: str) -> _Bucket:
    """The bucket ``same`` with ``text`` filed in it (``same`` may be changed in place).

    Texts are grouped as they come, by ``==`` while few distinct texts share a bucket (a
    compare runs at memory speed where a hash reads the text slower), in a ``Counter`` past
    8: only one text of each group is kept (a repeat is dropped once it is counted).

    >>> _groups(_filed(_filed("a", "b"), "a"))
    [('a', 2), ('b', 1)]
    """
    if same.__class__ is str:
        return [[same, 2]] if same == text else [[same, 1], [text, 1]]
    if isinstance(same, list):
        for g in same:
            if g[0] == text:
                g[1] += 1
                return same
        if len(same) < 8:
            same.append([text, 1])
            return same
        same = Counter({g[0]: g[1] for g in same})  # many distinct texts: hash them
    assert isinstance(same, Counter)
    same[text] += 1
    return same


def _groups(same: _Bucket) -> list[tuple[str, int]]:
    """``(text, count)`` of each distinct text filed in a bucket (:func:`_filed`), in the
    order of their first filing: ``Counter(texts).items()`` of the texts filed."""
    if isinstance(same, str):
        return [(same, 1)]
    if isinstance(same, list):
        return [(g[0], g[1]) for g in same]
    return list(same.items())


def _utf8_size(text: str) -> int:
    """UTF-8 bytes of ``text`` (lone surrogates: 3 bytes each, as ``surrogatepass`` writes)."""
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))
