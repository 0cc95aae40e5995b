"""Layer 1 as a filter: deterministic text rules on each message (``rules`` command).

The rules themselves are pure ``str -> str`` functions in :mod:`compactctl.rules_text`
(seed 001's nine, plus ANSI/progress-redraw removal). This module chooses them per message
(smart selection: CJK, tables, code), records one CompactEvent ``mode: "rules"`` naming the
targets and every rule with its version, and registers the replay reducer that re-applies
exactly those versions. The reduced text is never copied into the log.
"""

from __future__ import annotations

import uuid as uuidlib
from collections.abc import Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from .micro import NAMESPACE
from .model import CompactEvent, Event, Message, event_from_dict
from .replay import View, reducer, replay
from .rules_text import (
    APPLY_RULES_VERSION,
    RULES,
    Rule,
    apply_rules,
    get_rule,
    looks_like_code,
    select_rules,
)
from .tokens import TokenCounter, estimate_tokens

__all__ = ["FILE_TOOLS", "RulesOptions", "apply_rules_event", "plan_rules", "rules"]

SELECTION_VERSION = 1
"""Version of the per-message selection logic recorded in ``params`` (replay uses it)."""

FILE_TOOLS = frozenset(
    {"read_file", "Read", "read", "cat", "view", "open_file", "str_replace_editor", "NotebookRead"}
)
"""Tools whose output is file contents: only the rules that cannot change meaning apply."""


@dataclass(frozen=True)
class RulesOptions:
    """Options of the rules layer.

    Attributes:
        only: rule names to consider (``None``: all).
        skip: rule names never applied.
        roles: message roles the rules touch (pinned and summary messages never).
    """

    only: tuple[str, ...] | None = None
    skip: tuple[str, ...] = ()
    roles: frozenset[str] = field(
        default_factory=lambda: frozenset({"user", "assistant", "tool", "system"})
    )

    def chosen(self) -> list[Rule]:
        """The rules in play, current versions, canonical order.

        Raises:
            KeyError: an unknown name in ``only`` or ``skip``.
        """
        for name in (*(self.only or ()), *self.skip):
            get_rule(name)  # raises KeyError naming the known rules
        return [
            r
            for r in RULES.values()
            if (self.only is None or r.name in self.only) and r.name not in self.skip
        ]


def _is_code(m: Message, text: str, tool_of_call: Mapping[str, str]) -> bool:
    if m.role != "tool":
        return False
    name = m.tool_name or tool_of_call.get(m.tool_call_id or "", "")
    return name in FILE_TOOLS or looks_like_code(text)


def _rules_for(text: str, is_code: bool, versions: Mapping[str, int]) -> list[Rule]:
    names = [r.name for r in select_rules(text, is_code=is_code, only=list(versions))]
    return [get_rule(n, versions[n]) for n in names]


def _rewrite(content: Any, is_code: bool, versions: Mapping[str, int]) -> Any:
    if isinstance(content, str):
        return apply_rules(content, _rules_for(content, is_code, versions))
    if isinstance(content, list):
        out = []
        for part in content:
            if isinstance(part, dict) and part.get("type") == "text":
                text = part.get("text")
                if isinstance(text, str):
                    part = {**part, "text": apply_rules(text, _rules_for(text, is_code, versions))}
            out.append(part)
        return out
    return content


def _text_of(content: Any) -> str:
    from .model import message_text

    return message_text(content)


def _tool_names(view: View) -> dict[str, str]:
    return {
        c["id"]: str(c.get("name", ""))
        for m in view
        for c in m.tool_calls
        if isinstance(c.get("id"), str)
    }


@reducer("rules")
def apply_rules_event(view: View, event: CompactEvent) -> View:
    """Replay a rules CompactEvent: re-apply the recorded rule versions to each target."""
    targets = set(event.targets)
    raw = event.params.get("rules")
    versions = {k: int(v) for k, v in raw.items()} if isinstance(raw, dict) else {}
    tool_of_call = _tool_names(view)
    out: View = []
    for m in view:
        if m.uuid in targets:
            code = _is_code(m, m.text, tool_of_call)
            new = _rewrite(m.content, code, versions)
            if new != m.content:
                e = m.evolve(content=new)
                assert isinstance(e, Message)
                m = e
        out.append(m)
    return out


def plan_rules(
    events: Iterable[Event],
    opts: RulesOptions,
    *,
    timestamp: str,
    counter: TokenCounter | None = None,
) -> tuple[CompactEvent | None, dict[str, Any]]:
    """Decide the rules compaction of a session.

    Args:
        events: the whole session (held in memory to replay it).
        opts: which rules, which roles.
        timestamp: RFC 3339 UTC time to record.
        counter: counts tokens per role (``None``: chars-based estimate).

    Returns:
        ``(event, report)``: the CompactEvent (``None`` when no message changes) and
        ``{"targets", "byRule": {name: {"messages", "charsSaved", "tokensSaved"}},
        "byRole": {role: {"messages", "tokensBefore", "tokensAfter", "tokensSaved"}},
        "tokensSaved"}``. Per-rule savings apply the rules one at a time in order and are
        estimates (``ceil(chars/4)``); per-role savings use ``counter``.

    Raises:
        KeyError: an unknown rule name in the options.
    """
    counter = counter or TokenCounter("estimate")
    versions = {r.name: r.version for r in opts.chosen()}
    view = replay(list(events))
    tool_of_call = _tool_names(view)
    targets: list[Message] = []
    by_rule: dict[str, dict[str, int]] = {}
    by_role: dict[str, dict[str, int]] = {}
    for m in view:
        if m.role not in opts.roles or m.pinned or "summaryOf" in m.data or m.uuid is None:
            continue
        text = m.text
        if not text:
            continue
        code = _is_code(m, text, tool_of_call)
        new_content = _rewrite(m.content, code, versions)
        if new_content == m.content:
            continue
        new_text = _text_of(new_content)
        before, after = counter.count_many([text, new_text])
        if after > before:
            continue  # e.g. a small table whose key: value form costs more tokens
        targets.append(m)
        row = by_role.setdefault(
            m.role, {"messages": 0, "tokensBefore": 0, "tokensAfter": 0, "tokensSaved": 0}
        )
        row["messages"] += 1
        row["tokensBefore"] += before
        row["tokensAfter"] += after
        row["tokensSaved"] += before - after
        current = text
        for rule in _rules_for(text, code, versions):
            step = apply_rules(current, [rule])
            if step != current:
                r = by_rule.setdefault(
                    rule.name, {"messages": 0, "charsSaved": 0, "tokensSaved": 0}
                )
                r["messages"] += 1
                r["charsSaved"] += len(current) - len(step)
                r["tokensSaved"] += estimate_tokens(current) - estimate_tokens(step)
                current = step
    report = {
        "targets": len(targets),
        "rules": versions,
        "byRule": dict(sorted(by_rule.items())),
        "byRole": dict(sorted(by_role.items())),
        "tokensSaved": sum(r["tokensSaved"] for r in by_role.values()),
    }
    if not targets:
        return None, report
    ids = [m.uuid for m in targets if m.uuid]
    params = {
        "version": 1,
        "selection": SELECTION_VERSION,
        "apply": APPLY_RULES_VERSION,
        "rules": versions,
    }
    key = orjson.dumps(
        {"mode": "rules", "targets": ids, "params": params}, option=orjson.OPT_SORT_KEYS
    )
    event = event_from_dict(
        {
            "type": "compact",
            "uuid": str(uuidlib.uuid5(NAMESPACE, key.decode())),
            "mode": "rules",
            "startTurnId": min(m.turn or 0 for m in targets),
            "endTurnId": max(m.turn or 0 for m in targets),
            "targets": ids,
            "params": params,
            "stats": {"tokensSaved": report["tokensSaved"]},
            "timestamp": timestamp,
        }
    )
    assert isinstance(event, CompactEvent)
    return event, report


def rules(
    only: Collection[str] | None = None, skip: Collection[str] = (), *, timestamp: str | None = None
) -> Any:
    """The rules filter: passes every event through, then appends its CompactEvent (if any).

    Holds the session in memory. Returns a :data:`~compactctl.model.Filter`.

    >>> from compactctl.model import event_from_dict as ev
    >>> log = [ev({"type": "message", "uuid": "a1", "role": "assistant",
    ...            "content": "Done ✅   \\n\\n\\n\\nNext."})]
    >>> out = list(rules(timestamp="2025-01-01T00:00:00Z")(log))
    >>> replay(out)[0].content
    'Done\\n\\nNext.'
    """
    opts = RulesOptions(only=tuple(only) if only is not None else None, skip=tuple(skip))

    def run(events: Iterable[Event]) -> Iterator[Event]:
        from .timeutil import now_rfc3339

        log = list(events)
        yield from log
        event, _ = plan_rules(log, opts, timestamp=timestamp or now_rfc3339())
        if event is not None:
            yield event

    return run
