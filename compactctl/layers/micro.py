"""Micro compaction: elide the middle of old, long tool outputs (no model call).

Source: Coding Code's context service ("微压缩", micro compaction): tool outputs in turns
older than ``currentTurnId - 1``, at least 120 chars, keep a head and a tail and elide the
middle; triggered when the prompt estimate passes 25% of the context window. NeoCode's compact
protocol: every tool participates unless it declares that its old results must be preserved.

Since params version 2 (issue 15), the elided middle keeps its salient lines verbatim
(:func:`salient_lines`: errors and tracebacks, ``file:line`` references, test results;
bounded, see :class:`~compactctl.layers.options.MicroParams`), and old images, in tool
results and in user messages, become a placeholder naming their size and tokens
(``[image: 1280x800 png, 1366 tokens, elided]``). Version 1 events replay as written.

The decision is one CompactEvent ``mode: "micro"`` naming its ``targets`` and the ``params``
replay needs; :func:`apply_micro` (registered with replay) re-derives the same cut from the
text, so the reduced text is never copied into the log.
"""

from __future__ import annotations

import re
import threading
import uuid as uuidlib
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

import orjson

from compactctl.layers.base import EventLayer, LayerReport, Plan, internal
from compactctl.layers.options import MicroParams
from compactctl.media import MEDIA_RULES, MediaRule, image_info
from compactctl.model import CompactEvent, Event, Message, event_from_dict, message_text
from compactctl.replay import View, reducer, replay, tool_names
from compactctl.session import Session
from compactctl.timeutil import now_rfc3339

__all__ = [
    "MicroLayer",
    "MicroParams",
    "MicroReport",
    "apply_micro",
    "elide",
    "micro",
    "plan_micro",
    "plan_micro_view",
    "salient_errors",
    "salient_lines",
]

NAMESPACE = uuidlib.UUID("6b1f0c6e-4c1d-4b8a-9a4e-2f1f3f6d9c11")
"""uuid5 namespace of events compactctl derives from their content (idempotent appends)."""


def elide(text: str, params: Mapping[str, Any]) -> str:
    """Keep a head and a tail of ``text`` and replace the middle by a marker.

    The head is ``min(headMax, headRatio * len)`` chars and the tail ``min(tailMax,
    tailRatio * len)`` chars, each moved to a line boundary when one lies in its second
    half. Version 1 params: the marker is ``[... N chars elided ...]`` on its own line, N the
    chars removed. Version 2 params also keep the salient lines of the middle
    (:func:`salient_lines`: errors and tracebacks, ``file:line`` references, test results)
    after a marker ``[... N chars elided, K lines of them kept ...]`` (or ``K of M matching
    lines kept`` when more matched than fit), closed by ``[...]``. Text shorter than
    ``minChars``, or where eliding would not shorten it, is returned as is.

    >>> out = elide("a" * 200, {"minChars": 120, "headRatio": 0.2, "tailRatio": 0.1,
    ...                        "headMax": 600, "tailMax": 300})
    >>> out == "a" * 40 + "\\n[... 140 chars elided ...]\\n" + "a" * 20
    True
    >>> log = "run\\n" + "ok\\n" * 300 + "src/a.py:3: error: bad\\n" + "ok\\n" * 300 + "done"
    >>> print(elide(log, {**MicroParams().replay_params(), "headMax": 8, "tailMax": 5}))
    run
    ok
    [... 1798 chars elided, 1 line of them kept ...]
    src/a.py:3: error: bad
    [...]
    done
    """
    n = len(text)
    if n < int(params.get("minChars", 120)):
        return text
    head = min(int(params.get("headMax", 600)), int(n * float(params.get("headRatio", 0.2))))
    tail = min(int(params.get("tailMax", 300)), int(n * float(params.get("tailRatio", 0.1))))
    cut = text.rfind("\n", head // 2, head)
    if cut > 0:
        head = cut
    start_tail = n - tail
    nl = text.find("\n", start_tail, start_tail + tail // 2)
    if nl >= 0:
        start_tail = nl + 1
    removed = start_tail - head
    if int(params.get("version", 1)) >= 2 and removed > 0:
        kept, matched = salient_lines(
            text[head:start_tail],
            int(params.get("keepLines", 40)),
            int(params.get("keepChars", 3000)),
            int(params.get("lineChars", 240)),
        )
        if kept:
            removed -= sum(len(line) + 1 for line in kept)  # the kept lines' own chars
            k = len(kept)
            what = f"{k} of {matched} matching" if matched > k else str(k)
            what += " line" if what == "1" else " lines"
            lines = "\n".join(kept)
            out = (
                f"{text[:head]}\n[... {removed} chars elided, {what} of them kept ...]\n"
                f"{lines}\n[...]\n{text[start_tail:]}"
            )
            return out if len(out) < n else text
    marker = f"\n[... {removed} chars elided ...]\n"
    if removed <= len(marker):
        return text
    return text[:head] + marker + text[start_tail:]


_TEST_RESULT_COUNTS = r"\b\d+ (?:passed|failed|passing|failing|pending)\b"  # pytest, mocha, jest
_TEST_RESULT = (
    r"^=+ .*\b(?:passed|failed|errors?|skipped|xfailed|xpassed|no tests ran)\b.*=+$"  # pytest
    r"|^(?:FAILED|ERROR|PASSED|XFAIL) \S+"  # pytest -ra / -v result lines
    r"|^(?:Tests|Test Suites|Snapshots):\s+\d"  # jest
    r"|^(?:ok|FAIL)\s+\S+\s+(?:[\d.]+s|\(cached\))|^(?:PASS|FAIL)$|^--- (?:FAIL|PASS|SKIP):"  # go
    r"|^test result: |^failures:$"  # cargo test
    r"|^Ran \d+ tests? in |^(?:OK|FAILED) ?\(|^OK$"  # unittest
    r"|^Found \d+ errors? in |^Success: no issues found"  # mypy
    r"|" + _TEST_RESULT_COUNTS
)
_ERROR = (
    r"\b(?:[A-Z]\w*(?:Error|Exception)|error|ERROR|Error|fatal|FATAL|panic|Traceback)\b"
    r"|^\s*File \"[^\"]+\", line \d+"  # a Python traceback frame
    r"|^E {3}"  # pytest's failure detail lines
)  # JavaScript and Java stack frames (at f (a.js:3:9)) are file:line references
_FILE_LINE = r"\w\.[A-Za-z][A-Za-z0-9]{0,9}[:(]\d"  # no leading path: linear time
_SALIENT = [re.compile(p, re.MULTILINE) for p in (_TEST_RESULT, _ERROR, _FILE_LINE)]
"""What :func:`salient_lines` keeps, most wanted first: test results, errors and traceback
frames, ``file:line`` references (``src/a.py:12``, ``main.go:33:5``, ``Foo.java(10)``)."""

# :func:`_salient_rank`'s split of :data:`_SALIENT`, the same verdict on a line (one without
# a newline, where ``^`` matches only at its start): the anchored test results are tried at
# the line's start only, the rest after a substring that every match holds.
_TEST_RESULT_HEAD = re.compile(_TEST_RESULT[: -len(_TEST_RESULT_COUNTS) - 1], re.MULTILINE)
_TEST_RESULT_COUNT = re.compile(_TEST_RESULT_COUNTS)
_ERROR_WORD = re.compile(r"rror|RROR|xception|fatal|FATAL|panic|Traceback|File \"")


def _salient_rank(line: str) -> int | None:
    """The index in :data:`_SALIENT` of the first pattern ``line`` (no newline in it)
    matches, or ``None``: ``next(r for r, p in enumerate(_SALIENT) if p.search(line))``,
    without a search where a pattern cannot match (on the candidate lines of the 32 MB bench
    session 3 to 4 times faster: most match none, and the test-result pattern, tried at every
    position, cost 7 us a line)."""
    if _TEST_RESULT_HEAD.match(line) or (
        ("pass" in line or "fail" in line or "pending" in line) and _TEST_RESULT_COUNT.search(line)
    ):
        return 0
    if (line.startswith("E   ") or _ERROR_WORD.search(line)) and _SALIENT[1].search(line):
        return 1
    if "." in line and ("(" in line or ":" in line) and _SALIENT[2].search(line):
        return 2
    return None


_CANDIDATES = (
    re.compile(
        r"\n(?:=|FAILED |ERROR |PASSED |XFAIL |Test|Snapshots:|ok|FAIL|PASS|--- |"
        r"failures:|Ran |OK|Found |Success: |E   )"
    ),
    re.compile(r"\.[A-Za-z][A-Za-z0-9]{0,9}[:(]\d"),
)
_HINTS = (
    "rror", "RROR", "xception", "atal", "ATAL", "panic", "Traceback", 'File "', "pass",
    "fail", "pending",
)  # fmt: skip
"""Where a line of :data:`_SALIENT` can be: every line that matches one of its patterns
matches one of these regexes (each starts with a literal, which ``re`` finds fast) or holds
one of these strings (found by ``str.find``). Only those lines are tested against
:data:`_SALIENT`: on the 6.5 MB of old tool outputs of a 7.7 MB session the line-by-line
search took 6 s, this 0.6 s (micro compaction without salient lines: 0.2 s)."""


def _candidate_lines(text: str) -> list[int]:
    """The start offsets of the lines of ``text`` that may match :data:`_SALIENT`, sorted
    (the first line always; each line found once per pattern, whatever its length)."""
    starts = {0}

    def add(i: int) -> int:
        """Record the line holding offset ``i``; return the offset after it."""
        starts.add(text.rfind("\n", 0, i) + 1)
        end = text.find("\n", i)
        return len(text) if end < 0 else end

    for pattern in _CANDIDATES:
        m = pattern.search(text)
        while m is not None:
            if pattern is _CANDIDATES[0]:
                starts.add(m.start() + 1)
                m = pattern.search(text, m.start() + 1)
            else:
                m = pattern.search(text, add(m.start()))
    for hint in _HINTS:
        i = text.find(hint)
        while i >= 0:
            i = text.find(hint, add(i))
    return sorted(starts)


def salient_errors(text: str) -> list[str]:
    """The error lines of ``text``, stripped, each once, in text order: the lines
    :func:`salient_lines` ranks as errors or traceback frames (``Error: EACCES ...``,
    ``Traceback ...``, ``E   assert ...``), not test results nor bare ``file:line``
    references. ``dedup`` keeps an older output whose error lines the newer one lacks.

    >>> salient_errors("added 120 packages\\nError: EACCES at deploy.js:41\\nTests: 3 passed")
    ['Error: EACCES at deploy.js:41']
    """
    return [stripped for stripped, (rank, _, _) in _salient(text).items() if rank == 1]


def _salient(text: str) -> dict[str, tuple[int, int, str]]:
    """The lines of ``text`` that match :data:`_SALIENT`, in text order: ``{stripped line:
    (rank, offset, line without trailing whitespace)}``, a repeated line once (its first)."""
    found: dict[str, tuple[int, int, str]] = {}
    for start in _candidate_lines(text):
        end = text.find("\n", start)
        line = text[start : len(text) if end < 0 else end].rstrip()
        stripped = line.strip()
        if not stripped or stripped in found:
            continue
        rank = _salient_rank(line)
        if rank is not None:
            found[stripped] = (rank, start, line)
    return found


def salient_lines(
    text: str, max_lines: int = 40, max_chars: int = 3000, line_chars: int = 240
) -> tuple[list[str], int]:
    """The lines of ``text`` worth keeping when it is elided, and how many matched.

    A line matches when it is a test result (pytest, jest, go test, cargo test, unittest and
    mypy summaries and result lines), an error or a traceback frame, or holds a
    ``file:line`` reference. Repeated lines count once; a kept line keeps its indentation.
    When more match than fit ``max_lines`` lines and ``max_chars`` chars, test results are
    kept first, then errors, then references, each group in text order; the kept lines come
    back in text order, each cut at ``line_chars`` chars (an ellipsis marks a cut).

    Args:
        text: the text to search (the middle micro compaction elides).
        max_lines, max_chars, line_chars: the bounds (lines; chars).

    Returns:
        ``(kept lines, matching lines)``.

    >>> salient_lines("ok\\nsrc/x.py:4: error: no\\n3 failed, 1 passed in 0.2s\\nok")
    (['src/x.py:4: error: no', '3 failed, 1 passed in 0.2s'], 2)
    """
    found = _salient(text)
    chosen: list[tuple[int, str]] = []
    used = 0
    for _, pos, line in sorted(found.values()):
        if len(chosen) >= max_lines:
            break
        if len(line) > line_chars:
            line = line[: line_chars - 1] + "…"
        if used + len(line) + 1 > max_chars:
            continue
        used += len(line) + 1
        chosen.append((pos, line))
    return [line for _, line in sorted(chosen)], len(found)


def _elide_content(content: Any, params: Mapping[str, Any], *, text: bool = True) -> Any:
    """``content`` with its text elided (:func:`elide`; not when ``text`` is false) and, for
    version 2 params, its images replaced by their placeholder text
    (:meth:`compactctl.media.ImageInfo.placeholder`)."""
    if isinstance(content, str):
        return elide(content, params) if text else content
    if isinstance(content, list):
        images = int(params.get("version", 1)) >= 2
        raw = params.get("imageRule")
        rule: MediaRule = cast("MediaRule", raw) if raw in MEDIA_RULES else "anthropic"
        out = []
        for part in content:
            if isinstance(part, dict):
                kind = part.get("type")
                if text and kind == "text" and isinstance(part.get("text"), str):
                    part = {**part, "text": elide(part["text"], params)}
                elif images and kind == "image":
                    part = {"type": "text", "text": image_info(part, rule).placeholder()}
            out.append(part)
        return out
    return content


def _has_image(content: Any) -> bool:
    return isinstance(content, list) and any(
        isinstance(p, dict) and p.get("type") == "image" for p in content
    )


_PLANNED: dict[int, tuple[CompactEvent, Any, dict[int, tuple[Message, Message]]]] = {}
"""The messages :func:`plan_micro_view` elided for its newest events: ``id(event) ->
(event, its params, {id(message before): (message before, message after)})``. The replay
that follows a plan (``session.extended``) then elides nothing again (on the 32 MB bench
session, 2,199 outputs: half the time of micro compaction) and gives back the very message
objects the plan made, which the prompt sizes have measured already (by ``id``). An entry
is used only for that very event with the same params and the same message objects (which
are never mutated; elision is a function of the message and the params alone), so a replay
is the same with or without it; it is taken by the first replay that uses it (or dropped
after :data:`_PLANNED_EVENTS` newer ones), as it holds messages of the session."""
_PLANNED_EVENTS = 4  # the micro event and the kept tail's of one run, with room to spare
_PLANNED_LOCK = threading.Lock()


def _remember(event: CompactEvent, before: View, after: View) -> None:
    """Keep the messages a planned event elided (:data:`_PLANNED`); ``after`` is
    ``apply_micro(before, event)``, message for message."""
    changed = {id(m): (m, e) for m, e in zip(before, after, strict=True) if e is not m}
    with _PLANNED_LOCK:
        _PLANNED[id(event)] = (event, dict(event.params), changed)
        while len(_PLANNED) > _PLANNED_EVENTS:
            del _PLANNED[next(iter(_PLANNED))]


@reducer("micro")
def apply_micro(view: View, event: CompactEvent) -> View:
    """Replay a micro CompactEvent: elide each target's text with the recorded params (a tool
    output's text; a user message's images only, from version 2)."""
    with _PLANNED_LOCK:
        planned = _PLANNED.get(id(event))
        if planned is not None and (planned[0] is not event or planned[1] != event.params):
            planned = None
        if planned is not None:
            del _PLANNED[id(event)]
    return _apply(view, event, {}, planned[2] if planned is not None else {})


def _apply(
    view: View,
    event: CompactEvent,
    elided: Mapping[int, tuple[Message, Any]],
    known: Mapping[int, tuple[Message, Message]] | None = None,
) -> View:
    """:func:`apply_micro`, reusing what was already computed for some messages.

    ``elided`` maps ``id(message)`` to ``(message, _elide_content(message.content,
    event.params))``, ``known`` to ``(message, the message after)``; each holds the message
    so that the id cannot be reused. Messages both miss are elided here, so the result is
    always that of :func:`apply_micro`.
    """
    targets = set(event.targets)
    params = event.params
    out: View = []
    for m in view:
        if m.uuid in targets:
            done = known.get(id(m)) if known else None
            if done is not None and done[0] is m:
                out.append(done[1])
                continue
            hit = elided.get(id(m))
            new = (
                hit[1]
                if hit is not None
                else _elide_content(m.content, params, text=m.role == "tool")
            )
            if new != m.content:
                e = m.evolve(content=new)
                assert isinstance(e, Message)
                m = e
        out.append(m)
    return out


def _micro_targets(
    view: View, params: MicroParams, done: Collection[str], rp: Mapping[str, Any]
) -> Iterator[tuple[Message, Any]]:
    """The target messages of the view, in order, each with its elided content (``rp``: the
    replay params of the event)."""
    current = max((m.turn or 0 for m in view), default=0)
    limit = current - params.keep_turns
    tool_of_call = tool_names(view)
    for m in view:
        if not m.uuid or m.uuid in done or m.pinned or (m.turn or 0) >= limit:
            continue
        if m.role == "tool":
            name = m.tool_name or tool_of_call.get(m.tool_call_id or "", "")
            if name in params.preserve:
                continue
        elif m.role != "user" or not _has_image(m.content):
            continue
        content = m.content
        new = _elide_content(content, rp, text=m.role == "tool")
        if new != content:
            yield m, new


def plan_micro(
    events: Iterable[Event],
    params: MicroParams,
    *,
    timestamp: str,
    image_rule: MediaRule = "anthropic",
) -> CompactEvent | None:
    """Decide a micro compaction of a session: the CompactEvent to append, or ``None``.

    Targets are messages of the effective context in turns older than ``current -
    keep_turns``, not pinned, and not already targeted by an earlier micro or dedup event:
    tool messages from tools not in ``preserve`` whose text eliding would shorten or that
    hold images, and user messages that hold images (their text is left as it is). Images
    become placeholders such as ``[image: 1280x800 png, 1366 tokens, elided]``.

    Args:
        events: the whole session (held in memory to replay it).
        params: the micro parameters.
        timestamp: RFC 3339 UTC time to record.
        image_rule: the provider rule the placeholders count image tokens by
            (:func:`compactctl.media.media_rule_for` of the session's model).

    Returns:
        The CompactEvent (uuid derived from targets and params, so a re-run is a no-op), or
        ``None`` when nothing qualifies.
    """
    log = list(events)
    view = replay(log)
    return plan_micro_view(log, view, params, timestamp=timestamp, image_rule=image_rule)[0]


def plan_micro_view(
    log: Sequence[Event],
    view: View,
    params: MicroParams,
    *,
    timestamp: str,
    image_rule: MediaRule = "anthropic",
) -> tuple[CompactEvent | None, View]:
    """:func:`plan_micro` for a session already replayed, with the view after the event.

    Args:
        log: the whole session, in file order.
        view: ``replay(log)`` (not recomputed here).
        params: the micro parameters.
        timestamp: RFC 3339 UTC time to record.
        image_rule: as :func:`plan_micro`.

    Returns:
        ``(event, after)``: the CompactEvent or ``None``, and ``replay([*log, event])``
        (``view`` itself when there is no event), built by eliding each target once.
    """
    done = {  # already elided, or already a pointer to a newer duplicate
        t
        for e in log
        if isinstance(e, CompactEvent) and e.mode in {"micro", "dedup"}
        for t in e.targets
    }
    rp = params.replay_params(image_rule)
    found = list(_micro_targets(view, params, done, rp))
    if not found:
        return None, view
    targets = [m for m, _ in found]
    before = sum(len(message_text(m.content)) for m in targets)
    after = sum(len(message_text(new)) for _, new in found)
    ids = [m.uuid for m in targets if m.uuid]
    key = orjson.dumps({"mode": "micro", "targets": ids, "params": rp}, option=orjson.OPT_SORT_KEYS)
    data = {
        "type": "compact",
        "uuid": str(uuidlib.uuid5(NAMESPACE, key.decode())),
        "mode": "micro",
        "startTurnId": min(m.turn or 0 for m in targets),
        "endTurnId": max(m.turn or 0 for m in targets),
        "targets": ids,
        "params": rp,
        "stats": {"charsBefore": before, "charsAfter": after},
        "timestamp": timestamp,
    }
    event = event_from_dict(data)
    assert isinstance(event, CompactEvent)
    elided = _apply(view, event, {id(m): (m, new) for m, new in found})
    _remember(event, view, elided)
    return event, elided


@dataclass
class MicroReport(LayerReport):
    """The micro layer's report.

    Attributes:
        uuid: the CompactEvent's uuid (``None``: nothing to elide).
        targets: tool outputs elided.
        chars_before, chars_after: chars of those outputs before and after (not in JSON;
            the event's ``stats`` carries them).
    """

    uuid: str | None
    targets: int
    chars_before: int = internal(0)
    chars_after: int = internal(0)

    @property
    def targets_count(self) -> int:
        return self.targets


class MicroLayer(EventLayer):
    """Micro compaction: elide the middle of old, long tool outputs (no model call).

    Plans whatever the triggers say (the compact layer decides when it runs). The plan's
    ``view`` attribute is not kept: :meth:`plan_view` returns the context after the event
    too, for callers that size it.
    """

    name = "micro"

    def plan(self, session: Session, options: MicroParams) -> Plan[MicroReport]:
        """Plan the micro CompactEvent of a session (none when nothing qualifies)."""
        return self.plan_view(session, session.effective(), options)[0]

    def plan_view(
        self, session: Session, view: View, options: MicroParams
    ) -> tuple[Plan[MicroReport], View]:
        """:meth:`plan` over ``view`` (the session's effective context, already replayed),
        with the context after the event (``view`` itself when there is none)."""
        rule = session.counter.media_rule or "anthropic"
        event, after = plan_micro_view(
            session.events, view, options, timestamp=self.now(), image_rule=rule
        )
        if event is None:
            return Plan([], MicroReport(None, 0)), after
        stats = event.data["stats"]
        report = MicroReport(
            event.uuid, len(event.targets), stats["charsBefore"], stats["charsAfter"]
        )
        return Plan([event], report), after


def micro(params: MicroParams | None = None, *, timestamp: str | None = None) -> Any:
    """The micro compaction filter: passes every event through, then appends its CompactEvent.

    Holds the session in memory (it must replay it). Returns a
    :data:`~compactctl.model.Filter`.

    >>> from compactctl.model import event_from_dict as ev
    >>> log = [ev({"type": "message", "uuid": "u1", "role": "user", "content": "go"}, turn=1),
    ...        ev({"type": "message", "uuid": "a1", "role": "assistant", "content": "",
    ...            "toolCalls": [{"id": "c1", "name": "bash", "arguments": {}}]}, turn=1),
    ...        ev({"type": "message", "uuid": "t1", "role": "tool", "toolCallId": "c1",
    ...            "content": "x" * 500}, turn=1),
    ...        ev({"type": "message", "uuid": "u2", "role": "user", "content": "a"}, turn=2),
    ...        ev({"type": "message", "uuid": "u3", "role": "user", "content": "b"}, turn=3)]
    >>> out = list(micro(timestamp="2025-01-01T00:00:00Z")(log))
    >>> out[-1].data["mode"], out[-1].data["targets"]
    ('micro', ['t1'])
    """
    p = params or MicroParams()

    def run(events: Iterable[Event]) -> Iterator[Event]:
        log = list(events)
        yield from log
        session = Session.from_events(log, encoding="estimate")
        yield from MicroLayer(now=lambda: timestamp or now_rfc3339()).plan(session, p).events

    return run
