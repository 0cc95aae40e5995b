"""Micro compaction: elide the middle of old, long tool outputs (no model call).

Source: Coding Code's context service ("微压缩", micro compaction): tool outputs in turns
older than ``currentTurnId - 1``, at least 120 chars, keep a head and a tail and elide the
middle; triggered when the prompt estimate passes 25% of the context window. NeoCode's compact
protocol: every tool participates unless it declares that its old results must be preserved.

The decision is one CompactEvent ``mode: "micro"`` naming its ``targets`` and the ``params``
replay needs; :func:`apply_micro` (registered with replay) re-derives the same cut from the
text, so the reduced text is never copied into the log.
"""

from __future__ import annotations

import uuid as uuidlib
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from compactctl.layers.base import EventLayer, LayerReport, Plan, internal
from compactctl.layers.options import MicroParams
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
]

NAMESPACE = uuidlib.UUID("6b1f0c6e-4c1d-4b8a-9a4e-2f1f3f6d9c11")
"""uuid5 namespace of events compactctl derives from their content (idempotent appends)."""


def elide(text: str, params: Mapping[str, Any]) -> str:
    """Keep a head and a tail of ``text`` and replace the middle by a marker.

    The head is ``min(headMax, headRatio * len)`` chars and the tail ``min(tailMax,
    tailRatio * len)`` chars, each moved to a line boundary when one lies in its second
    half. The marker is ``[... N chars elided ...]`` on its own line, N the chars removed.
    Text shorter than ``minChars``, or where eliding would not shorten it, is returned as is.

    >>> out = elide("a" * 200, {"minChars": 120, "headRatio": 0.2, "tailRatio": 0.1,
    ...                        "headMax": 600, "tailMax": 300})
    >>> out == "a" * 40 + "\\n[... 140 chars elided ...]\\n" + "a" * 20
    True
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
    marker = f"\n[... {removed} chars elided ...]\n"
    if removed <= len(marker):
        return text
    return text[:head] + marker + text[start_tail:]


def _elide_content(content: Any, params: Mapping[str, Any]) -> Any:
    if isinstance(content, str):
        return elide(content, params)
    if isinstance(content, list):
        out = []
        for part in content:
            if (
                isinstance(part, dict)
                and part.get("type") == "text"
                and isinstance(part.get("text"), str)
            ):
                part = {**part, "text": elide(part["text"], params)}
            out.append(part)
        return out
    return content


@reducer("micro")
def apply_micro(view: View, event: CompactEvent) -> View:
    """Replay a micro CompactEvent: elide each target's text with the recorded params."""
    return _apply(view, event, {})


def _apply(view: View, event: CompactEvent, elided: Mapping[int, tuple[Message, Any]]) -> View:
    """:func:`apply_micro`, reusing the elided contents already computed for some messages.

    ``elided`` maps ``id(message)`` to ``(message, _elide_content(message.content,
    event.params))``; it holds the message so that the id cannot be reused. Messages it
    misses are elided here, so the result is always that of :func:`apply_micro`.
    """
    targets = set(event.targets)
    params = event.params
    out: View = []
    for m in view:
        if m.uuid in targets:
            known = elided.get(id(m))
            new = known[1] if known is not None else _elide_content(m.content, params)
            if new != m.content:
                e = m.evolve(content=new)
                assert isinstance(e, Message)
                m = e
        out.append(m)
    return out


def _micro_targets(
    view: View, params: MicroParams, done: Collection[str]
) -> list[tuple[Message, Any]]:
    """The target messages of the view, in order, each with its elided content."""
    current = max((m.turn or 0 for m in view), default=0)
    limit = current - params.keep_turns
    rp = params.replay_params()
    tool_of_call = tool_names(view)
    found = []
    for m in view:
        if m.role != "tool" or not m.uuid or m.uuid in done or m.pinned:
            continue
        if (m.turn or 0) >= limit:
            continue
        name = m.tool_name or tool_of_call.get(m.tool_call_id or "", "")
        if name in params.preserve:
            continue
        content = m.content
        new = _elide_content(content, rp)
        if new != content:
            found.append((m, new))
    return found


def plan_micro(
    events: Iterable[Event], params: MicroParams, *, timestamp: str
) -> CompactEvent | None:
    """Decide a micro compaction of a session: the CompactEvent to append, or ``None``.

    Targets are tool messages of the effective context in turns older than
    ``current - keep_turns``, whose text eliding would shorten, from tools not in
    ``preserve``, not pinned, and not already targeted by an earlier micro or dedup event.

    Args:
        events: the whole session (held in memory to replay it).
        params: the micro parameters.
        timestamp: RFC 3339 UTC time to record.

    Returns:
        The CompactEvent (uuid derived from targets and params, so a re-run is a no-op), or
        ``None`` when nothing qualifies.
    """
    log = list(events)
    return plan_micro_view(log, replay(log), params, timestamp=timestamp)[0]


def plan_micro_view(
    log: Sequence[Event], view: View, params: MicroParams, *, timestamp: str
) -> tuple[CompactEvent | None, View]:
    """:func:`plan_micro` for a session already replayed, with the view after the event.

    Args:
        log: the whole session, in file order.
        view: ``replay(log)`` (not recomputed here).
        params: the micro parameters.
        timestamp: RFC 3339 UTC time to record.

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
    found = _micro_targets(view, params, done)
    if not found:
        return None, view
    rp = params.replay_params()
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
    return event, _apply(view, event, {id(m): (m, new) for m, new in found})


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
        event, after = plan_micro_view(session.events, view, options, timestamp=self.now())
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
