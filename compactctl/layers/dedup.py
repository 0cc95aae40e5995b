"""Layer 2 as a filter: near-duplicate messages (``dedup`` command).

Detection is :func:`compactctl.layers.similarity.find_duplicates` (exact repeats by hash, then word
3-gram shingles with Jaccard >= 0.6, MinHash LSH above a few hundred candidates; seed 001).
The newer copy is kept. An older duplicate tool output is replaced by a short pointer to the
newer one (the tool block stays valid); an older duplicate assistant text without tool
calls is dropped; user, system, pinned and summary messages are never touched.

One CompactEvent ``mode: "dedup"`` records ``targets`` and ``duplicateOf`` (older -> newer)
with the similarity of each pair; the registered reducer applies it on replay.
"""

from __future__ import annotations

import contextlib
import uuid as uuidlib
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import orjson

from compactctl.errors import UsageError
from compactctl.layers.micro import NAMESPACE
from compactctl.model import CompactEvent, Event, Message, event_from_dict
from compactctl.replay import View, reducer, replay, tool_names
from compactctl.tokens import TokenCounter

__all__ = ["DedupOptions", "apply_dedup", "dedup", "plan_dedup", "pointer_text"]

POINTER_PREFIX = "[duplicate of "

#: Characters of candidate text from which :func:`plan_dedup` loads the token encoding before
#: looking for duplicates rather than after: from about there (``similarity``'s numpy path),
#: the search leaves 20-30 MB of RSS behind (numpy, datasketch, freed heap) under which the
#: encoding's build would land. Measured peak RSS with o200k_base, 11 MB bench session:
#: 152 MB after, 130 MB before; 2 MB session: 82 and 70 MB. Below it, a session without
#: duplicates never loads the encoding at all.
_EARLY_ENCODING_CHARS = 1 << 17


@dataclass(frozen=True)
class DedupOptions:
    """Options of the dedup layer.

    Attributes:
        threshold: Jaccard similarity of word 3-gram shingles at or above which two messages
            are duplicates (seed 001: 0.6).
        scope: ``tool`` (tool outputs), ``assistant`` (assistant texts without tool calls)
            or ``all`` (both).
        min_chars: messages shorter than this (normalized chars) are ignored; 200, as the
            samples' duplicate ledger (``duplicateToolOutputs.minBytes``), and longer than
            any pointer, so a pointer never costs more than the text it replaces.
        lsh_min_items: candidate count from which MinHash LSH is used instead of all pairs.
    """

    threshold: float = 0.6
    scope: str = "all"
    min_chars: int = 200
    lsh_min_items: int = 300

    def __post_init__(self) -> None:
        if self.scope not in {"tool", "assistant", "all"}:
            raise UsageError(f"--scope must be tool, assistant or all, not {self.scope!r}")
        if not 0.0 < self.threshold <= 1.0:
            raise UsageError(f"--threshold must be in (0, 1], not {self.threshold}")


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


def _eligible(m: Message, scope: str) -> bool:
    if m.pinned or "summaryOf" in m.data or not m.uuid:
        return False
    if m.role == "tool":
        return scope in {"tool", "all"} and not m.text.startswith(POINTER_PREFIX)
    if m.role == "assistant":
        return scope in {"assistant", "all"} and not m.tool_calls
    return False


@reducer("dedup")
def apply_dedup(view: View, event: CompactEvent) -> View:
    """Replay a dedup CompactEvent: point older tool outputs at the newer copy; drop older
    assistant texts. Tool calls, user and system messages are never dropped."""
    dup = event.data.get("duplicateOf")
    if not isinstance(dup, dict):
        return view
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
    """Decide the dedup compaction of a session.

    Holds the session's messages in memory (all candidates must be compared). A large
    session's token encoding is loaded before the search (see ``_EARLY_ENCODING_CHARS``).

    Returns:
        ``(event, report)``: the CompactEvent (``None`` when there are no duplicates) and
        ``{"candidates", "pairs", "groups", "exact", "near", "tokensBefore", "tokensAfter",
        "tokensSaved"}`` (tokens of the effective context, by ``counter``; a chars-based
        estimate when ``None``).

    Raises:
        ValueError: ``counter``'s encoding is unavailable and there are duplicates to count.
    """
    from compactctl.app.inspector import prompt_tokens
    from compactctl.layers.similarity import find_duplicates

    counter = counter or TokenCounter("estimate")
    log = list(events)
    view = replay(log)
    counts = Counter(m.uuid for m in view)
    # a uuid shared by several messages cannot name one of them: leave those alone
    items = [
        (m.uuid or "", m.text) for m in view if _eligible(m, opts.scope) and counts[m.uuid] == 1
    ]
    if sum(len(text) for _, text in items) >= _EARLY_ENCODING_CHARS:
        # numpy's path: load the encoding first (a no-op for "estimate"), see the constant
        with contextlib.suppress(ValueError):  # raised again by a count, if there is one
            counter.load()
    pairs = find_duplicates(
        items,
        threshold=opts.threshold,
        # the LSH banding of the default 0.6 (0.5); a lower threshold is its own banding
        lsh_threshold=min(0.5, opts.threshold),
        min_chars=opts.min_chars,
        lsh_min_items=opts.lsh_min_items,
    )
    candidates = len(items)
    del items  # the texts of list contents are copies: let them go before counting tokens
    report: dict[str, Any] = {
        "candidates": candidates,
        "pairs": len(pairs),
        "groups": len({p.newer for p in pairs}),
        "exact": sum(p.kind == "exact" for p in pairs),
        "near": sum(p.kind == "near" for p in pairs),
        "tokensBefore": 0,
        "tokensAfter": 0,
        "tokensSaved": 0,
    }
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
    before = prompt_tokens(view, counter)
    after = prompt_tokens(apply_dedup(view, event), counter)
    report.update(tokensBefore=before, tokensAfter=after, tokensSaved=before - after)
    event.data["stats"] = {"tokensBefore": before, "tokensAfter": after, "groups": report["groups"]}
    return event, report


def dedup(threshold: float = 0.6, scope: str = "all", *, timestamp: str | None = None) -> Any:
    """The dedup filter: passes every event through, then appends its CompactEvent (if any).

    Holds the session in memory. Returns a :data:`~compactctl.model.Filter`.

    >>> from compactctl.model import event_from_dict as ev
    >>> text = "the quick brown fox jumps over the lazy dog again and again " * 4
    >>> log = [ev({"type": "message", "uuid": "a1", "role": "assistant", "content": text}),
    ...        ev({"type": "message", "uuid": "a2", "role": "assistant", "content": text})]
    >>> [m.uuid for m in replay(list(dedup(timestamp="t")(log)))]
    ['a2']
    """
    opts = DedupOptions(threshold=threshold, scope=scope)

    def run(events: Iterable[Event]) -> Iterator[Event]:
        from compactctl.timeutil import now_rfc3339

        log = list(events)
        yield from log
        event, _ = plan_dedup(log, opts, timestamp=timestamp or now_rfc3339())
        if event is not None:
            yield event

    return run
