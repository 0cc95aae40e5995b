"""Layer 1 as a filter: deterministic text rules on each message (``rules`` command).

The rules themselves are pure ``str -> str`` functions in :mod:`compactctl.layers.text_rules`
(the nine of MoonHub's compactor, plus ANSI/progress-redraw removal). This module chooses them
per message (smart selection: CJK, tables, code), records one CompactEvent ``mode: "rules"``
naming the targets and every rule with its version, and registers the replay reducer that
re-applies exactly those versions. The reduced text is never copied into the log.
"""

from __future__ import annotations

import uuid as uuidlib
from collections.abc import Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson

from compactctl.layers.base import EventLayer, LayerReport, Plan, plan_events
from compactctl.layers.micro import NAMESPACE
from compactctl.layers.options import RulesOptions
from compactctl.model import CompactEvent, Event, Message, event_from_dict, message_text
from compactctl.replay import View, reducer, replay, tool_names
from compactctl.session import Session
from compactctl.timeutil import now_rfc3339
from compactctl.tokens import BATCH_CHARS, TokenCounter, estimate_tokens

if TYPE_CHECKING:
    from compactctl.layers.text_rules import Rule

# rules_text (dozens of regexes) is imported inside the functions that use it: replay imports
# this module to register the reducer, and ``inspect`` should not pay for compiling the rules.

__all__ = [
    "FILE_TOOLS",
    "RulesLayer",
    "RulesOptions",
    "RulesReport",
    "apply_rules_event",
    "plan_rules",
    "rules",
]

SELECTION_VERSION = 1
"""Version of the per-message selection logic recorded in ``params`` (replay uses it)."""

FILE_TOOLS = frozenset(
    {"read_file", "Read", "read", "cat", "view", "open_file", "str_replace_editor", "NotebookRead"}
)
"""Tools whose output is file contents: only the rules that cannot change meaning apply."""


def _tool_of(m: Message, tool_of_call: Mapping[str, str]) -> str:
    return m.tool_name or tool_of_call.get(m.tool_call_id or "", "")


Effect = tuple[str, int, int]
"""One rule's saving on one text: ``(rule name, chars saved, estimated tokens saved)``."""


class _Rewriter:
    """Applies one set of rule versions to texts, each distinct text once.

    The rules are pure, so the result for a text (with its code flag) is memoized: files read
    again and repeated outputs are rewritten once per session. Holds every distinct text it
    saw, and its result, for as long as it lives (one session). With ``trace``, it also
    records what each rule saves on each text, applying the rules one at a time
    (:meth:`effects`), at little extra cost.
    """

    def __init__(self, versions: Mapping[str, int], *, trace: bool = False) -> None:
        from compactctl.layers import text_rules as rules_text

        self._text = rules_text
        self.versions = dict(versions)
        # The recorded versions are the current ones (the usual case): then select_rules
        # already returns the rules to apply, and every name is known, so ``only`` can be a
        # frozenset (select_rules would build one per call). Otherwise ``only`` stays a list,
        # so that an unknown name raises the same KeyError, naming the rules in their order.
        self._current = all(
            name in rules_text.RULES and rules_text.RULES[name].version == version
            for name, version in self.versions.items()
        )
        self._only: Collection[str] = (
            frozenset(self.versions) if self._current else list(self.versions)
        )
        self._trace = trace
        self._done: dict[tuple[str, bool], str] = {}
        self._code: dict[str, bool] = {}
        self._effects: dict[tuple[str, bool], list[Effect]] = {}
        self._rules: dict[str, Rule] = {}  # name -> the rule at its recorded version

    def is_code(self, m: Message, text: str, tool_of_call: Mapping[str, str]) -> bool:
        """Whether ``m`` is file contents or code: only code-safe rules apply to it.

        Injected user context (``isMeta``: attachments such as Cline's ``<file_content>``
        and ``<environment_details>``, Claude Code reminders) is treated as file contents:
        rules never rewrite an attachment as if a person had typed it (issue 17)."""
        if m.role == "user" and m.data.get("isMeta") is True:
            return True
        if m.role != "tool":
            return False
        if _tool_of(m, tool_of_call) in FILE_TOOLS:
            return True
        code = self._code.get(text)
        if code is None:
            code = self._code[text] = self._text.looks_like_code(text)
        return code

    def rules_for(self, text: str, is_code: bool) -> list[Rule]:
        """The rules :func:`~compactctl.layers.text_rules.select_rules` picks, at the recorded
        versions."""
        selected = self._text.select_rules(text, is_code=is_code, only=self._only)
        if self._current:
            return selected
        rules = self._rules
        chosen = []
        for rule in selected:
            name = rule.name
            recorded = rules.get(name)
            if recorded is None:
                recorded = rules[name] = self._text.get_rule(name, self.versions[name])
            chosen.append(recorded)
        return chosen

    def apply(self, text: str, is_code: bool) -> str:
        key = (text, is_code)
        done = self._done.get(key)
        if done is None:
            if self._trace:
                self._traced(text, is_code)
                return self._done[key]
            done = self._done[key] = self._text.apply_rules(text, self.rules_for(text, is_code))
        return done

    def effects(self, text: str, is_code: bool) -> list[Effect]:
        """What each rule that changes ``text`` saves, applying the rules one at a time in
        order (the report's ``byRule``): chars, and tokens by :func:`estimate_tokens`."""
        found = self._effects.get((text, is_code))
        if found is None:
            found = self._traced(text, is_code)
        return found

    def _traced(self, text: str, is_code: bool) -> list[Effect]:
        rules = self.rules_for(text, is_code)
        result, steps = self._text.apply_rules_stepwise(text, rules)
        effects: list[Effect] = []
        current, current_tokens = text, -1
        for rule, step in zip(rules, steps, strict=True):
            if step != current:
                if current_tokens < 0:
                    current_tokens = estimate_tokens(current)
                step_tokens = estimate_tokens(step)
                effects.append((rule.name, len(current) - len(step), current_tokens - step_tokens))
                current, current_tokens = step, step_tokens
        key = (text, is_code)
        self._done[key] = result
        self._effects[key] = effects
        return effects

    def rewrite(self, content: Any, is_code: bool) -> Any:
        """``content`` (a string or a list of parts) with the rules applied to its text;
        ``content`` itself when no text changes."""
        if isinstance(content, str):
            return self.apply(content, is_code)
        if isinstance(content, list):
            out = []
            changed = False
            for part in content:
                if isinstance(part, dict) and part.get("type") == "text":
                    text = part.get("text")
                    if isinstance(text, str):
                        new = self.apply(text, is_code)
                        changed = changed or new != text
                        part = {**part, "text": new}
                out.append(part)
            return out if changed else content
        return content


class _ReplayMemo:
    """What :func:`apply_rules_event` computed for the last rules event it replayed.

    ``compact`` replays the same log several times (before, during and after micro
    compaction and summarization); the rules are pure, so a target that is the same message
    object, answering the same tool, as last time gets the same resulting message without
    running the rules again. Only the last event's results are kept (one session's rewritten
    targets).
    """

    event: CompactEvent | None = None
    rewriter: _Rewriter | None = None
    # message uuid -> (the message it was computed from, tool name, the resulting message)
    done: dict[str, tuple[Message, str, Message]] = {}

    @classmethod
    def forget(cls) -> None:
        """Drop the results kept (the last session's texts)."""
        cls.event, cls.rewriter, cls.done = None, None, {}


@reducer("rules")
def apply_rules_event(view: View, event: CompactEvent) -> View:
    """Replay a rules CompactEvent: re-apply the recorded rule versions to each target.

    Results are memoized for the last event replayed (see :class:`_ReplayMemo`).
    """
    memo = _ReplayMemo
    if memo.event is not event or memo.rewriter is None:
        raw = event.params.get("rules")
        versions = {k: int(v) for k, v in raw.items()} if isinstance(raw, dict) else {}
        memo.event, memo.rewriter, memo.done = event, _Rewriter(versions), {}
    rw, done = memo.rewriter, memo.done
    targets = set(event.targets)
    tool_of_call = tool_names(view)
    out: View = []
    for m in view:
        uuid = m.uuid
        if uuid in targets:
            assert uuid is not None
            tool = _tool_of(m, tool_of_call) if m.role == "tool" else ""
            seen = done.get(uuid)
            if seen is not None and seen[0] is m and seen[1] == tool:
                m = seen[2]
            else:
                source = m
                content = m.content
                new = rw.rewrite(content, rw.is_code(m, m.text, tool_of_call))
                if new != content:
                    e = m.evolve(content=new)
                    assert isinstance(e, Message)
                    m = e
                done[uuid] = (source, tool, m)
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
        estimates (``ceil(chars/4)``); ``byRule`` is empty when ``opts.by_rule`` is off.
        Per-role savings use ``counter``.

    Raises:
        KeyError: an unknown rule name in the options.
    """
    return plan_events(RulesLayer(now=lambda: timestamp), events, opts, counter)  # type: ignore[return-value]


@dataclass
class RulesReport(LayerReport):
    """The rules layer's report.

    Attributes:
        targets: messages rewritten.
        rules: ``{name: version}`` of the rules in play.
        by_rule: ``{name: {"messages", "charsSaved", "tokensSaved"}}`` (estimates; empty
            without ``RulesOptions.by_rule``).
        by_role: ``{role: {"messages", "tokensBefore", "tokensAfter", "tokensSaved"}}``.
        tokens_saved: tokens saved over the targets, by the session's counter.
    """

    targets: int
    rules: dict[str, int]
    by_rule: dict[str, dict[str, int]]
    by_role: dict[str, dict[str, int]]
    tokens_saved: int

    @property
    def targets_count(self) -> int:
        return self.targets


class RulesLayer(EventLayer):
    """Layer 1: deterministic text rules, one CompactEvent ``mode: "rules"``."""

    name = "rules"

    def plan(self, session: Session, options: RulesOptions) -> Plan[RulesReport]:
        """Plan the rules over the session's effective context (per-role savings by the
        session's counter).

        Raises:
            KeyError: an unknown rule name in the options.
        """
        event, report, rewriter = _plan(
            session.events,
            options,
            timestamp=self.now(),
            counter=session.counter,
            trace=options.by_rule,
            view=session.effective(),
        )
        if event is None:
            return Plan([], report)
        # the replay of this event (a layer after it, compact --layers) takes each text's
        # result from the rewriter that planned it: the rules are pure, the versions the same
        _ReplayMemo.event, _ReplayMemo.rewriter, _ReplayMemo.done = event, rewriter, {}
        return Plan([event], report)


def _plan(
    events: Iterable[Event],
    opts: RulesOptions,
    *,
    timestamp: str,
    counter: TokenCounter | None,
    trace: bool,
    view: View | None = None,
) -> tuple[CompactEvent | None, RulesReport, _Rewriter]:
    """:func:`plan_rules`, and the rewriter that holds each text's result (``view``: the
    effective context of ``events`` when the caller has it, else it is replayed).

    Without ``trace`` the rules run as one chain per text (no per-rule steps) and the
    report's ``byRule`` is empty; the event is the same (its targets and ``tokensSaved``
    come from the token counts alone).
    """
    counter = counter or TokenCounter("estimate")
    versions = {r.name: r.version for r in opts.chosen()}
    rw = _Rewriter(versions, trace=trace)
    if view is None:
        view = replay(list(events))
    tool_of_call = tool_names(view)
    changed: list[tuple[Message, str, bool, str]] = []  # (message, text, code, new text)
    ahead: list[str] = []  # texts to count, queued while the rules go on (count_ahead)
    ahead_chars = 0
    for m in view:
        if m.role not in opts.roles or m.pinned or "summaryOf" in m.data or not m.uuid:
            continue
        text = m.text
        if not text:
            continue
        code = rw.is_code(m, text, tool_of_call)
        new_content = rw.rewrite(m.content, code)
        if new_content == m.content:
            continue
        new_text = message_text(new_content)
        changed.append((m, text, code, new_text))
        ahead += (text, new_text)
        ahead_chars += len(text) + len(new_text)
        if ahead_chars >= BATCH_CHARS:
            counter.count_ahead(ahead)
            ahead, ahead_chars = [], 0
    # one batch: every distinct text is counted once
    counts = counter.count_many([t for _, text, _, new in changed for t in (text, new)])
    targets: list[Message] = []
    by_rule: dict[str, dict[str, int]] = {}
    by_role: dict[str, dict[str, int]] = {}
    for i, (m, text, code, _) in enumerate(changed):
        before, after = counts[2 * i], counts[2 * i + 1]
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
        for name, chars, tokens in rw.effects(text, code) if trace else ():
            r = by_rule.setdefault(name, {"messages": 0, "charsSaved": 0, "tokensSaved": 0})
            r["messages"] += 1
            r["charsSaved"] += chars
            r["tokensSaved"] += tokens
    report = RulesReport(
        targets=len(targets),
        rules=versions,
        by_rule=dict(sorted(by_rule.items())),
        by_role=dict(sorted(by_role.items())),
        tokens_saved=sum(r["tokensSaved"] for r in by_role.values()),
    )
    if not targets:
        return None, report, rw
    ids = [m.uuid for m in targets if m.uuid]
    from compactctl.layers.text_rules import APPLY_RULES_VERSION

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
            "stats": {"tokensSaved": report.tokens_saved},
            "timestamp": timestamp,
        }
    )
    assert isinstance(event, CompactEvent)
    return event, report, rw


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

        log = list(events)
        yield from log
        _ReplayMemo.forget()  # the previous session's texts are not held while planning
        # the report is not returned: no per-rule trace
        event, _, rw = _plan(
            log, opts, timestamp=timestamp or now_rfc3339(), counter=None, trace=False
        )
        if event is not None:
            # the filters after this one replay the event: they reuse the results computed
            # here (the same rule versions, so the same texts) instead of running the rules
            # on every target again
            _ReplayMemo.event, _ReplayMemo.rewriter, _ReplayMemo.done = event, rw, {}
            yield event

    return run
