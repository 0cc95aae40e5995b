"""Layer 2 as a filter: near-duplicate messages (``dedup`` command).

Detection is :func:`compactctl.layers.similarity.find_duplicates` (exact repeats by hash, then word
3-gram shingles with Jaccard >= 0.6, MinHash LSH above a few hundred candidates; MoonHub's
compactor).
The newer copy is kept. An older duplicate tool output is replaced by a short pointer to the
newer one (the tool block stays valid); an older duplicate assistant text without tool
calls is dropped; user, system, pinned and summary messages are never touched.

One CompactEvent ``mode: "dedup"`` records ``targets`` and ``duplicateOf`` (older -> newer)
with the similarity of each pair; the registered reducer applies it on replay.
"""

from __future__ import annotations

import contextlib
import operator
import threading
import uuid as uuidlib
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson

from compactctl.errors import UsageError
from compactctl.layers.base import EventLayer, LayerReport, Plan, plan_events
from compactctl.layers.micro import NAMESPACE
from compactctl.layers.options import DedupOptions
from compactctl.layers.similarity import DuplicatePair
from compactctl.model import CompactEvent, Event, Message, event_from_dict
from compactctl.replay import View, reducer, tool_names
from compactctl.session import Session
from compactctl.timeutil import now_rfc3339
from compactctl.tokens import PromptSizes, TokenCounter, prompt_tokens

__all__ = [
    "DedupLayer",
    "DedupOptions",
    "DedupReport",
    "apply_dedup",
    "dedup",
    "plan_dedup",
    "pointer_text",
]

POINTER_PREFIX = "[duplicate of "

#: Characters of candidate text from which :func:`plan_dedup` loads the token encoding before
#: looking for duplicates rather than after: from about there (``similarity``'s numpy path),
#: the search leaves 20-30 MB of RSS behind (numpy, datasketch, freed heap) under which the
#: encoding's build would land. Measured peak RSS with o200k_base, 11 MB bench session:
#: 152 MB after, 130 MB before; 2 MB session: 82 and 70 MB. Below it, a session without
#: duplicates never loads the encoding at all.
_EARLY_ENCODING_CHARS = 1 << 17


def pointer_text(newer: str, similarity: float, tool: str | None) -> str:
    """The text an older duplicate tool output is replaced by.

    >>> pointer_text("m9", 1.0, "read_file")
    '[duplicate of the read_file output in message m9 (identical); see that newer result]'
    >>> pointer_text("m9", 0.8312, None)
    '[duplicate of the tool output in message m9 (83% similar); see that newer result]'
    """
    how = "identical" if similarity >= 1.0 else f"{int(similarity * 100)}% similar"
    what = f"the {tool} output" if tool else "the tool output"
    return f"{POINTER_PREFIX}{what} in message {newer} ({how}); see that newer result]"


def _candidates(view: View, scope: str) -> list[tuple[str, str]]:
    """``(uuid, text)`` of the messages of ``view`` dedup may change, in order: tool outputs
    (``scope`` ``tool`` or ``all``) that are no pointer yet, and assistant texts without
    tool calls (``assistant`` or ``all``); never pinned or summary messages, nor a message
    whose uuid is missing or shared by another message (it cannot name one of them). Each
    text is taken once (a list content's text is a join)."""
    tools = scope in {"tool", "all"}
    assistants = scope in {"assistant", "all"}
    counts = Counter(m.uuid for m in view)
    items: list[tuple[str, str]] = []
    for m in view:
        uid = m.uuid
        if not uid or counts[uid] != 1:
            continue
        if m.pinned or "summaryOf" in m.data:
            continue
        role = m.role
        if role == "tool" and tools:
            text = m.text
            if not text.startswith(POINTER_PREFIX):
                items.append((uid, text))
        elif role == "assistant" and assistants and not m.tool_calls:
            items.append((uid, m.text))
    return items


_PLANNED: dict[int, tuple[CompactEvent, Any, Any, list[Message], View]] = {}
"""The context :func:`_plan` computed after each of its newest events: ``id(event) ->
(event, its duplicateOf, its params, the view before, the view after)``. The replay that
follows a plan (``session.extended``) gets that very list of messages back when it applies
the same event to the same messages (the same objects, which are never mutated), so the
prompt sizes find each pointer message already measured (by ``id``). An entry is taken by
the first replay that can use it (or dropped after :data:`_PLANNED_EVENTS` newer ones): it
holds the session's messages."""
_PLANNED_EVENTS = 2
_PLANNED_LOCK = threading.Lock()


def _remember(event: CompactEvent, before: View, after: View) -> None:
    """Keep the context after a planned event (:data:`_PLANNED`)."""
    entry = (event, dict(event.data["duplicateOf"]), dict(event.params), list(before), after)
    with _PLANNED_LOCK:
        _PLANNED[id(event)] = entry
        while len(_PLANNED) > _PLANNED_EVENTS:
            del _PLANNED[next(iter(_PLANNED))]


def _planned(view: View, event: CompactEvent) -> View | None:
    """The context :func:`_plan` computed for ``event`` applied to ``view`` (the same
    message objects in the same order, the event's replay fields unchanged), or ``None``."""
    with _PLANNED_LOCK:
        entry = _PLANNED.get(id(event))
        if entry is None or entry[0] is not event or len(entry[3]) != len(view):
            return None
        if not all(map(operator.is_, entry[3], view)):
            return None
        if entry[1] != event.data.get("duplicateOf") or entry[2] != event.params:
            return None
        del _PLANNED[id(event)]
    return list(entry[4])


@reducer("dedup")
def apply_dedup(view: View, event: CompactEvent) -> View:
    """Replay a dedup CompactEvent: point older tool outputs at the newer copy; drop older
    assistant texts. Tool calls, user and system messages are never dropped."""
    dup = event.data.get("duplicateOf")
    if not isinstance(dup, dict):
        return view
    planned = _planned(view, event)
    if planned is not None:
        return planned
    sims = event.params.get("similarity")
    sims = sims if isinstance(sims, dict) else {}
    tool_of_call = tool_names(view)
    out: View = []
    for m in view:
        newer = dup.get(m.uuid) if m.uuid else None
        if isinstance(newer, str):
            if m.role == "tool":
                tool = m.tool_name or tool_of_call.get(m.tool_call_id or "") or None
                sim = float(sims.get(m.uuid, 1.0))
                e = m.evolve(content=pointer_text(newer, sim, tool))
                assert isinstance(e, Message)
                out.append(e)
                continue
            if m.role == "assistant" and not m.tool_calls:
                continue
        out.append(m)
    return out


def plan_dedup(
    events: Iterable[Event],
    opts: DedupOptions,
    *,
    timestamp: str,
    counter: TokenCounter | None = None,
) -> tuple[CompactEvent | None, dict[str, Any]]:
    """Decide the dedup compaction of a session (the library form of :class:`DedupLayer`).

    Returns:
        ``(event, report)``: the CompactEvent (``None`` when there are no duplicates) and
        :meth:`DedupReport.to_json` (tokens by ``counter``; a chars-based estimate when
        ``None``).

    Raises:
        ValueError: ``counter``'s encoding is unavailable and there are duplicates to count.
    """
    return plan_events(DedupLayer(now=lambda: timestamp), events, opts, counter)  # type: ignore[return-value]


@dataclass
class DedupReport(LayerReport):
    """The dedup layer's report (tokens of the effective context, by the session's counter).

    Attributes:
        candidates: messages compared. pairs: duplicate pairs (older, newer). groups:
        distinct newer messages kept. exact, near: pairs by kind. tokens_before,
        tokens_after: the prompt tokens of the effective context before and after the event
        (``None``, left out of JSON, when there are no duplicates: then nothing is counted).
        tokens_saved: their difference (0 without duplicates).
    """

    candidates: int
    pairs: int
    groups: int
    exact: int
    near: int
    tokens_before: int | None = field(default=None, metadata={"omit_none": True})
    tokens_after: int | None = field(default=None, metadata={"omit_none": True})
    tokens_saved: int = 0

    @property
    def targets_count(self) -> int:
        return self.pairs


class DedupLayer(EventLayer):
    """Layer 2: near-duplicate messages, one CompactEvent ``mode: "dedup"``.

    Holds the session's messages in memory (all candidates must be compared). A large
    session's token encoding is loaded before the search (see ``_EARLY_ENCODING_CHARS``).
    """

    name = "dedup"

    def plan(self, session: Session, options: DedupOptions) -> Plan[DedupReport]:
        """Plan the dedup event of a session.

        Raises:
            ValueError: the session's encoding is unavailable and there are duplicates to
                count.
        """
        event, report = _plan(
            session.effective(), options, self.now(), session.counter, session.sizes
        )
        return Plan([event] if event is not None else [], report)


def _plan(
    view: View,
    opts: DedupOptions,
    timestamp: str,
    counter: TokenCounter,
    sizes: PromptSizes | None = None,
) -> tuple[CompactEvent | None, DedupReport]:
    """The dedup event of ``view`` and its report; the prompt tokens before and after by
    ``sizes`` (the session's, which has sized most messages already) when given, else by
    :func:`~compactctl.tokens.prompt_tokens` (the same numbers)."""
    from compactctl.layers.similarity import find_duplicates

    items = _candidates(view, opts.scope)
    if sum(len(text) for _, text in items) >= _EARLY_ENCODING_CHARS:
        # numpy's path: load the encoding first (a no-op for "estimate"), see the constant
        with contextlib.suppress(ValueError, UsageError):  # raised again by a count, if any
            counter.load()
    pairs = find_duplicates(
        items,
        threshold=opts.threshold,
        # the LSH banding of the default 0.6 (0.5); a lower threshold is its own banding
        lsh_threshold=min(0.5, opts.threshold),
        min_chars=opts.min_chars,
        lsh_min_items=opts.lsh_min_items,
    )
    pairs = _keeping_errors(pairs, dict(items))
    candidates = len(items)
    del items  # the texts of list contents are copies: let them go before counting tokens
    report = DedupReport(
        candidates=candidates,
        pairs=len(pairs),
        groups=len({p.newer for p in pairs}),
        exact=sum(p.kind == "exact" for p in pairs),
        near=sum(p.kind == "near" for p in pairs),
    )
    if not pairs:
        return None, report
    order = {m.uuid: i for i, m in enumerate(view)}
    pairs.sort(key=lambda p: order[p.older])
    params = {
        "version": 1,
        "threshold": opts.threshold,
        "scope": opts.scope,
        "similarity": {p.older: round(p.similarity, 4) for p in pairs},
    }
    duplicate_of = {p.older: p.newer for p in pairs}
    targets = list(duplicate_of)
    key = orjson.dumps(
        {"mode": "dedup", "duplicateOf": duplicate_of, "params": params},
        option=orjson.OPT_SORT_KEYS,
    )
    turns = [view[order[t]].turn or 0 for t in targets]
    event = event_from_dict(
        {
            "type": "compact",
            "uuid": str(uuidlib.uuid5(NAMESPACE, key.decode())),
            "mode": "dedup",
            "startTurnId": min(turns),
            "endTurnId": max(turns),
            "targets": targets,
            "duplicateOf": duplicate_of,
            "params": params,
            "timestamp": timestamp,
        }
    )
    assert isinstance(event, CompactEvent)
    after_view = apply_dedup(view, event)
    if sizes is not None:
        before, after = sizes.totals(view)[0], sizes.totals(after_view)[0]
    else:
        before, after = prompt_tokens(view, counter), prompt_tokens(after_view, counter)
    _remember(event, view, after_view)
    report.tokens_before, report.tokens_after, report.tokens_saved = before, after, before - after
    event.data["stats"] = {"tokensBefore": before, "tokensAfter": after, "groups": report.groups}
    return event, report


def _keeping_errors(pairs: list[DuplicatePair], texts: dict[str, str]) -> list[DuplicatePair]:
    """``pairs`` without the near-duplicates whose older text holds an error line
    (:func:`~compactctl.layers.micro.salient_errors`) that the newer text does not (both
    compared as :func:`~compactctl.layers.similarity.normalize` compares them): two
    outputs that share boilerplate (``npm ci && npm run deploy`` failing with ``Error:
    EACCES``, ``npm ci && npm test`` passing: 97% similar) are no duplicates, and a pointer
    to the newer one would lose the error, which micro compaction itself keeps. The exact
    copies of an older text kept this way point to its newest copy instead (similarity
    1.0). ``texts``: the candidates' texts by uuid.

    >>> from compactctl.layers.similarity import DuplicatePair as P
    >>> texts = {"a": "x\\nError: disk full", "b": "x\\nok", "c": "x\\nError: disk full"}
    >>> _keeping_errors([P("a", "b", 0.9, "near"), P("c", "b", 0.9, "near")], texts)
    [DuplicatePair(older='a', newer='c', similarity=1.0, kind='exact')]
    """
    from compactctl.layers.micro import salient_errors
    from compactctl.layers.similarity import normalize

    errors: dict[str, list[str]] = {}  # by text: an output repeated is searched once
    newers: dict[str, str] = {}  # normalized, by uuid
    kept: list[DuplicatePair] = []
    held: dict[str, list[str]] = {}  # normalized text -> the olders kept, oldest first
    for p in pairs:
        if p.kind == "near":  # an exact pair is the same normalized text
            older = texts[p.older]
            lines = errors.get(older)
            if lines is None:
                lines = errors[older] = [normalize(e) for e in salient_errors(older)]
            if lines:
                newer = newers.get(p.newer)
                if newer is None:
                    newer = newers[p.newer] = normalize(texts[p.newer])
                if any(line not in newer for line in lines):
                    held.setdefault(normalize(older), []).append(p.older)
                    continue
        kept.append(p)
    for group in held.values():  # exact copies: each older one points to the newest
        kept += [DuplicatePair(k, group[-1], 1.0, "exact") for k in group[:-1]]
    return kept


def dedup(
    threshold: float = DedupOptions.threshold,
    scope: str = DedupOptions.scope,
    *,
    timestamp: str | None = None,
) -> Any:
    """The dedup filter: passes every event through, then appends its CompactEvent (if any).

    Holds the session in memory. Returns a :data:`~compactctl.model.Filter`.

    >>> from compactctl.model import event_from_dict as ev
    >>> from compactctl.replay import replay
    >>> text = "the quick brown fox jumps over the lazy dog again and again " * 4
    >>> log = [ev({"type": "message", "uuid": "a1", "role": "assistant", "content": text}),
    ...        ev({"type": "message", "uuid": "a2", "role": "assistant", "content": text})]
    >>> [m.uuid for m in replay(list(dedup(timestamp="t")(log)))]
    ['a2']
    """
    opts = DedupOptions(threshold=threshold, scope=scope)

    def run(events: Iterable[Event]) -> Iterator[Event]:

        log = list(events)
        yield from log
        event, _ = plan_dedup(log, opts, timestamp=timestamp or now_rfc3339())
        if event is not None:
            yield event

    return run
