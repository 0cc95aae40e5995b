"""Replay: the event log -> the effective context (docs/design.md section 3, "Replay").

:func:`replay` is one pure, deterministic function. It takes the messages in file order, then
applies each CompactEvent and SummaryEvent in file order:

- a SummaryEvent removes the events it ``replaces`` and puts one ``user`` message (content:
  the summary text, or the selected tier; ``summaryOf``: the SummaryEvent's uuid) in place of
  the first of them. An earlier summary named in ``replaces`` is removed too, so only the
  newest summary of a chain survives. If ``replaces`` covers part of a tool block, the whole
  block is replaced: replay never splits a tool block. A tool result that arrives later in
  the file for a call a summary removed is dropped: it is never orphaned (issue 15, point 14).
- a CompactEvent is applied by the reducer registered for its ``mode`` (micro, rules, dedup
  register themselves; see :func:`reducer`). Reducers change message content, or drop an
  assistant message without tool calls; they never drop a tool block member.

A RevertEvent (appended by ``compactctl undo``) takes back the compact and summary events it
names that come before it: replay skips them, as if they had never been appended
(:func:`reverted`, :func:`live_events`); a revert naming anything else is ignored.

Unknown modes and events of other types are ignored (kept in the file, reported by inspect).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable
from typing import Any

from compactctl.model import CompactEvent, Event, Message, RevertEvent, SummaryEvent

__all__ = [
    "Reducer",
    "View",
    "apply_summary",
    "known_modes",
    "live_events",
    "reducer",
    "replay",
    "reverted",
    "tool_block_keys",
    "tool_names",
]

View = list[Message]
"""The effective context: messages in the order an agent sends them."""

Reducer = Callable[[View, CompactEvent], View]
"""Applies one CompactEvent to the view; returns a new list, never mutates its messages."""

_REDUCERS: dict[str, Reducer] = {}
_BUILTIN_MODES = {
    "micro": "compactctl.layers.micro",
    "rules": "compactctl.layers.rules",
    "dedup": "compactctl.layers.dedup",
}


def reducer(mode: str) -> Callable[[Reducer], Reducer]:
    """Register the replay function for CompactEvents of ``mode`` (a decorator).

    Raises:
        ValueError: a reducer is already registered for ``mode``.
    """

    def register(fn: Reducer) -> Reducer:
        if mode in _REDUCERS and _REDUCERS[mode] is not fn:
            raise ValueError(f"a reducer for mode {mode!r} is already registered")
        _REDUCERS[mode] = fn
        return fn

    return register


def _reducer_for(mode: str) -> Reducer | None:
    if mode not in _REDUCERS and mode in _BUILTIN_MODES:
        try:
            importlib.import_module(_BUILTIN_MODES[mode])
        except ModuleNotFoundError:
            return None
    return _REDUCERS.get(mode)


def known_modes() -> list[str]:
    """The CompactEvent modes replay can apply (built-in ones that are installed)."""
    return sorted(m for m in _BUILTIN_MODES if _reducer_for(m) is not None)


def tool_block_keys(messages: Iterable[Message]) -> dict[str, str]:
    """Map each message uuid that belongs to a tool block to the block's key.

    A tool block is an assistant message with ``toolCalls`` plus the tool messages answering
    them; its key is the assistant message's uuid. Messages outside any block are absent.
    Tool results whose call is unknown are absent too (they form no block).
    """
    owner_of_call: dict[str, str] = {}
    keys: dict[str, str] = {}
    for m in messages:
        uuid = m.uuid
        if uuid is None:
            continue
        calls = m.tool_calls
        if calls:
            keys[uuid] = uuid
            for c in calls:
                cid = c.get("id")
                if isinstance(cid, str):
                    owner_of_call[cid] = uuid
        elif m.role == "tool":
            cid = m.tool_call_id
            if cid is not None and cid in owner_of_call:
                keys[uuid] = owner_of_call[cid]
    return keys


def tool_names(messages: Iterable[Message]) -> dict[str, str]:
    """Map each tool call id to its tool's name (``""`` when the call names none).

    Calls whose id is not a string are skipped (a malformed log must not break a layer).

    >>> from compactctl.model import event_from_dict as ev
    >>> m = ev({"type": "message", "role": "assistant",
    ...         "toolCalls": [{"id": "c1", "name": "bash"}, {"id": ["x"], "name": "odd"}]})
    >>> tool_names([m])
    {'c1': 'bash'}
    """
    return {
        c["id"]: str(c.get("name") or "")
        for m in messages
        for c in m.tool_calls
        if isinstance(c.get("id"), str)
    }


def summary_message(event: SummaryEvent, tier: str | None = None) -> Message:
    """The user message a SummaryEvent puts into the effective context.

    Args:
        event: the SummaryEvent.
        tier: ``"L0"``, ``"L1"`` or ``"L2"`` to show that tier when the event has it;
            ``None`` shows the tier the event selected (``selectedTier``, set by ``tiers``),
            else ``summaryText``.
    """
    chosen = tier or event.data.get("selectedTier")
    text = event.tiers.get(chosen, "") if isinstance(chosen, str) else ""
    data: dict[str, Any] = {
        "type": "message",
        "uuid": event.uuid,
        "turnId": event.last_summarized_turn,
        "role": "user",
        "content": text or event.summary_text,
        "summaryOf": event.uuid,
    }
    if "timestamp" in event.data:
        data["timestamp"] = event.data["timestamp"]
    return Message(data, None, event.line, event.last_summarized_turn)


def _apply_summary(view: View, event: SummaryEvent, tier: str | None) -> View:
    replaced = set(event.replaces)
    if not replaced:
        return view
    blocks = tool_block_keys(view)
    hit_blocks = {blocks[u] for u in replaced if u in blocks}
    out: View = []
    placed = False
    for m in view:
        uuid = m.uuid
        of = m.data.get("summaryOf")  # any JSON value in a hand-edited log: only a str names one
        gone = uuid in replaced or (isinstance(of, str) and of in replaced)
        if not gone and hit_blocks and uuid in blocks:
            gone = blocks[uuid] in hit_blocks
        if gone:
            if not placed:
                out.append(summary_message(event, tier))
                placed = True
        else:
            out.append(m)
    return out


def apply_summary(view: View, event: SummaryEvent) -> View:
    """The effective context after ``event``, given ``view``, the effective context before
    it: ``replay([*view, event])`` without walking ``view`` again as a log (and without
    the calls replay notes for tool results that would follow the summary: none do). A
    new list; ``view`` itself when the event replaces nothing.

    >>> from compactctl.model import event_from_dict as ev
    >>> view = [ev({"type": "message", "uuid": "m1", "role": "user", "content": "a"}),
    ...         ev({"type": "message", "uuid": "m2", "role": "user", "content": "b"})]
    >>> s = ev({"type": "summary", "uuid": "s1", "replaces": ["m1"], "summaryText": "S"})
    >>> [(m.uuid, m.content) for m in apply_summary(view, s)]
    [('s1', 'S'), ('m2', 'b')]
    """
    return _apply_summary(view, event, None)


def reverted(events: Iterable[Event]) -> dict[str, str]:
    """The compact and summary events taken back by a later RevertEvent: ``{uuid: the uuid
    of the revert that names it}`` (the first such revert).

    A revert counts only for compact and summary events before it in the file; one naming
    a message, another revert, or an event after it takes nothing back.

    >>> from compactctl.model import event_from_dict as ev
    >>> reverted([ev({"type": "compact", "uuid": "c1"}), ev({"type": "message", "uuid": "m1"}),
    ...           ev({"type": "revert", "uuid": "r1", "targets": ["c1", "m1", "c2"]}),
    ...           ev({"type": "compact", "uuid": "c2"})])
    {'c1': 'r1'}
    """
    seen: set[str] = set()
    out: dict[str, str] = {}
    for e in events:
        uuid = e.uuid
        if isinstance(e, (CompactEvent, SummaryEvent)) and uuid is not None:
            seen.add(uuid)
        elif isinstance(e, RevertEvent) and uuid is not None:
            for t in e.targets:
                if t in seen and t not in out:
                    out[t] = uuid
    return out


def live_events(events: Iterable[Event]) -> list[Event]:
    """The events replay applies: ``events`` without the RevertEvents and the compact and
    summary events they take back (:func:`reverted`), in file order. The log as it would
    be had the reverted compactions never been appended; the layers plan over it."""
    log = list(events)
    if not any(isinstance(e, RevertEvent) for e in log):
        return log
    gone = reverted(log)
    return [
        e
        for e in log
        if not isinstance(e, RevertEvent)
        and not (isinstance(e, (CompactEvent, SummaryEvent)) and e.uuid in gone)
    ]


def replay(events: Iterable[Event], *, tier: str | None = None) -> View:
    """Rebuild the effective context from an event log. Pure and deterministic.

    Args:
        events: the transcript's events in file order (any iterable; consumed once).
        tier: which summary tier to show (``"L0"``/``"L1"``/``"L2"``), or ``None`` for the
            full ``summaryText``.

    Returns:
        The messages of the effective context, in order. Unchanged messages are the input
        Message objects themselves (their raw bytes intact); changed ones are evolved copies;
        summaries appear as user messages with ``summaryOf``.

    Memory: holds the session's messages (one session at a time, docs/design.md section 7);
    a log with a RevertEvent is held whole first (:func:`live_events`).

    >>> from compactctl.model import event_from_dict as ev
    >>> log = [ev({"type": "message", "uuid": "m1", "role": "user", "content": "a"}),
    ...        ev({"type": "message", "uuid": "m2", "role": "assistant", "content": "b"}),
    ...        ev({"type": "summary", "uuid": "s1", "replaces": ["m1", "m2"],
    ...            "summaryText": "S", "lastSummarizedTurnId": 1})]
    >>> [(m.role, m.content) for m in replay(log)]
    [('user', 'S')]
    """
    view: View = []
    summarized_calls: set[str] = set()  # calls a summary removed: a late result is dropped
    for event in live_events(events):
        if isinstance(event, Message):
            if summarized_calls and event.role == "tool" and event.tool_call_id in summarized_calls:
                continue
            view.append(event)
        elif isinstance(event, SummaryEvent):
            after = _apply_summary(view, event, tier)
            kept = {id(m) for m in after}
            summarized_calls.update(
                c["id"]
                for m in view
                if id(m) not in kept
                for c in m.tool_calls
                if isinstance(c.get("id"), str)
            )
            view = after
        elif isinstance(event, CompactEvent):
            fn = _reducer_for(event.mode)
            if fn is not None:
                view = fn(view, event)
    return view
