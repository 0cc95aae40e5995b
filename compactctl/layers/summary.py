"""``compact``: micro compaction, then summarization when a trigger fires (Layer 3).

Sources: Coding Code's context service (micro at 25% of the context window, summarization at
90% of the model's max input tokens, incremental after ``lastSummarizedTurnId``, 3 failures ->
24 h pause), NeoCode's compact protocol (keep_recent 10 messages with tool blocks whole,
full_replace, max_summary_chars 1200, manual/auto/reactive triggers, reactive retry once per
run, compact_start / compact_done / compact_error events), docs/design.md sections 5 and 9.

:func:`plan_compact` is the library entry: it takes one session's events and returns the
events to append (a micro CompactEvent and/or a SummaryEvent) with a report. It writes
nothing; the caller appends (the per-file jobs of :mod:`compactctl.app.jobs`).
"""

from __future__ import annotations

import re
import sys
import time
import uuid as uuidlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import orjson

from compactctl.errors import SummarizerError, UsageError
from compactctl.layers.base import LayerReport, Plan
from compactctl.layers.micro import NAMESPACE, MicroLayer, apply_micro, plan_micro_view
from compactctl.layers.options import CompactOptions
from compactctl.model import (
    CompactEvent,
    Event,
    Message,
    SummaryEvent,
    event_from_dict,
    is_real_user,
)
from compactctl.replay import View, apply_summary, tool_block_keys
from compactctl.session import Session
from compactctl.text import PINNED, constraint_re
from compactctl.timeutil import now_rfc3339
from compactctl.tokens import (
    TokenCounter,
    context_window_for,
    message_payload,
)

if TYPE_CHECKING:  # imported where summarization runs: micro compaction needs neither
    from compactctl.summarize import Summarizer, SummaryResult

__all__ = [
    "CompactLayer",
    "CompactOptions",
    "CompactReport",
    "CompactPlan",
    "make_summarizer",
    "plan_compact",
    "select_span",
    "tail_start",
    "user_constraints",
]


@dataclass
class CompactPlan:
    """The outcome of :func:`plan_compact`.

    Attributes:
        events: the events to append (possibly empty).
        report: the per-file report: ``tokensBefore``, ``tokensAfter`` (the prompt
            estimate before and after), ``tokensSaved`` (tokens freed), ``charsBefore``,
            ``charsAfter``, ``trigger``, ``micro`` and ``summary`` details, ``reason`` when
            nothing was done, ``sessionKey``.
        summary_failed: a summarizer error, when summarization was attempted and failed.
    """

    events: list[Event]
    report: dict[str, Any]
    summary_failed: SummarizerError | None = None


def make_summarizer(opts: CompactOptions, session_model: str | None) -> Summarizer:
    """The summarizer the options ask for (litellm is not imported here).

    Raises:
        UsageError: ``--model session`` on a transcript that records no model.
    """
    name = opts.model
    if name == "session":
        if not session_model:
            raise UsageError("--model session: the transcript records no model; pass --model NAME")
        name = session_model
    if not name or name == "extractive":
        from compactctl.summarize.extractive import ExtractiveSummarizer

        return ExtractiveSummarizer()
    from compactctl.summarize.litellm import LiteLLMSummarizer

    return LiteLLMSummarizer(
        name,
        timeout=opts.timeout,
        num_retries=opts.num_retries,
        completion_kwargs=opts.completion_kwargs,
        redact=opts.redact,
    )


_CONSTRAINT = constraint_re(PINNED)


def user_constraints(texts: Iterable[str], limit: int = 20) -> list[str]:
    """Sentences of user messages that state a standing instruction ("do not...", "never",
    "always...", "keep X as it is") with a pin word (``always``, ``only`` too), tasks and
    prompts to go on left out ("add X and make sure Y", "keep going"): the constraints of
    :func:`~compactctl.summarize.extractive.intent.constraint_sentences` (issue 15, point
    2), so one that refers back ("Without the flag ...") comes with what the sentence before
    it names, "(re: `--since-days`)" (that sentence itself when it names nothing), or not at
    all.

    Each is kept verbatim, its label too (a sentence of at most 300 chars; the sentence
    before it at most ``CONTEXT_MAX``), first occurrence first, at most ``limit``.

    >>> user_constraints(["Fix it. Do not add new dependencies. Thanks!"])
    ['Do not add new dependencies.']
    """
    from compactctl.summarize.extractive.intent import constraint_sentences

    out: list[str] = []
    seen: set[str] = set()
    for text in texts:
        for rule, s in constraint_sentences(text, _CONSTRAINT, pairs=True):
            if len(rule) <= 300 and rule.lower() not in seen:  # a rule restated: once
                seen.add(rule.lower())
                out.append(s)
                if len(out) >= limit:
                    return out
    return out


def _pinned(m: Message, first_user: str | None, patterns: Sequence[re.Pattern[str]]) -> bool:
    if m.pinned or m.role == "system" or (first_user is not None and m.uuid == first_user):
        return True
    if m.role in {"user", "system"} and patterns:
        text = m.text
        return any(p.search(text) for p in patterns)
    return False


def tail_start(
    view: View,
    budget: int,
    size: Callable[[Message], int],
    *,
    blocks: Mapping[str, str] | None = None,
    index: Mapping[str | None, int] | None = None,
) -> int:
    """Where a tail of at most ``budget`` tokens starts: the smallest index ``i`` such that
    ``view[i:]`` splits no tool block and its messages' ``size`` (tokens) sum to at most
    ``budget``; the start of the newest block (or message) when even that one is larger.
    ``blocks`` (:func:`~compactctl.replay.tool_block_keys` of ``view``) and ``index`` (each
    uuid's position in ``view``) are computed when not given.

    >>> from compactctl.model import Message
    >>> view = [Message({"type": "message", "uuid": str(i), "role": "user", "content": "x"})
    ...         for i in range(5)]
    >>> tail_start(view, 3, lambda m: 1), tail_start(view, 0, lambda m: 1)
    (2, 4)
    """
    if blocks is None:
        blocks = tool_block_keys(view)
    if index is None:
        index = {m.uuid: i for i, m in enumerate(view) if m.uuid is not None}
    start = len(view)
    used = 0
    need = len(view)  # the earliest block start any message from i on belongs to
    for i in range(len(view) - 1, -1, -1):
        used += size(view[i])
        key = blocks.get(view[i].uuid or "")
        if key is not None:
            need = min(need, index.get(key, i))
        if need < i:
            continue  # i is inside a block that starts earlier: no cut here
        if used > budget and start < len(view):
            break
        start = i
        if used > budget:
            break  # the newest block alone is over the budget: it is kept whole
    return start


def select_span(
    view: View,
    *,
    strategy: str,
    keep_recent: int,
    first_user: str | None,
    patterns: Sequence[re.Pattern[str]] = (),
    keep_recent_tokens: int | None = None,
    size: Callable[[Message], int] | None = None,
) -> list[Message]:
    """The messages of the effective context a summary replaces (in order).

    keep_recent keeps the newest ``keep_recent`` messages, extended back so no tool block is
    split and so the newest turn is kept whole, unless that leaves nothing to summarize (one
    long autonomous turn, its request pinned or summarized): then the turn's older tool
    blocks are summarized. A turn whose request comes after an earlier summary was kept
    whole by it and is not split (the same run twice summarizes nothing the second time). With
    ``keep_recent_tokens`` and ``size`` (a message's tokens), the tail is cut further to
    that many tokens (:func:`tail_start`: never a block split, never less than the newest
    block; the newest turn's request is then summarized, and stays in the summary as the
    latest request). full_replace takes every message but the newest tool block when one
    of its calls has no result yet (it is still running).
    Pinned messages (system, the first user message, ``pinned: true``, pin patterns), the
    earlier summary and a message whose uuid a kept message repeats are never in the span.
    """
    if strategy == "full_replace":
        start = len(view)
        # a call still waiting for its result stays, with all after it: the result will
        # arrive after the summary and must find its call (issue 15, point 14)
        last = next((i for i in range(len(view) - 1, -1, -1) if view[i].tool_calls), None)
        if last is not None:
            answered = {m.tool_call_id for m in view[last:] if m.role == "tool"}
            if any(c.get("id") not in answered for c in view[last].tool_calls):
                start = last
    else:
        start = max(0, len(view) - keep_recent)
        blocks = tool_block_keys(view)
        index = {m.uuid: i for i, m in enumerate(view)}
        if start < len(view):
            key = blocks.get(view[start].uuid or "")
            if key is not None and key in index:
                start = min(start, index[key])
        within_turn = start
        last_turn = max((m.turn or 0 for m in view if "summaryOf" not in m.data), default=0)
        request = None  # where the newest turn's request is in the view
        for i, m in enumerate(view):
            if "summaryOf" not in m.data and (m.turn or 0) == last_turn and m.role == "user":
                start, request = min(start, i), i
                break
        if keep_recent_tokens is not None and size is not None:
            by_tokens = tail_start(view, keep_recent_tokens, size, blocks=blocks, index=index)
            start, within_turn = max(start, by_tokens), max(within_turn, by_tokens)
        span = _span(view, start, first_user, patterns)
        if span or within_turn == start:
            return span
        if request is not None and any("summaryOf" in m.data for m in view[:request]):
            # An earlier summary kept this turn whole (it summarized what came before): the
            # turn stays whole, or the same run twice would summarize again what the first
            # run kept (found by tests/system/test_fuzz.py). Only its token budget cuts it.
            return span
        # One long turn (an autonomous run): its older tool blocks are summarized, the
        # newest keep_recent messages kept, no block split (issue 15, point 6).
        start = within_turn
    return _span(view, start, first_user, patterns)


def _span(
    view: View, start: int, first_user: str | None, patterns: Sequence[re.Pattern[str]]
) -> list[Message]:
    """The messages of ``view[:start]`` a summary may replace: not pinned, not an earlier
    summary, and not sharing its uuid with a message that stays (a summary replaces by uuid:
    it would take the kept one with it; a log can repeat a uuid)."""
    stays = {m.uuid for m in view[start:] if m.uuid}
    head = [(m, "summaryOf" in m.data or _pinned(m, first_user, patterns)) for m in view[:start]]
    stays |= {m.uuid for m, kept in head if kept and m.uuid}
    return [m for m, kept in head if not kept and not (m.uuid and m.uuid in stays)]


def _redact_result(result: SummaryResult) -> SummaryResult:
    """The summary with secrets redacted from every string (JSON stays valid for task-state).

    The request was redacted before the summarizer read it; this is the second line of
    defence (a model's answer could hold what it was never sent).
    """
    from compactctl.summarize.redact import redact

    if result.format == "task-state":
        import json

        def walk(value: Any) -> Any:
            if isinstance(value, str):
                return redact(value)
            if isinstance(value, list):
                return [walk(v) for v in value]
            if isinstance(value, dict):
                return {k: walk(v) for k, v in value.items()}
            return value

        try:
            doc = json.loads(result.text)
        except ValueError:
            return result
        text = json.dumps(walk(doc), ensure_ascii=False, indent=2)
        state = walk(result.task_state) if result.task_state is not None else None
        return replace(result, text=text, task_state=state)
    return replace(result, text=redact(result.text))


def _chunks(messages: list[dict[str, Any]], budget: int, counter: TokenCounter) -> list[list[Any]]:
    """Split messages into runs of at most ``budget`` tokens, never inside a tool block."""
    units: list[list[dict[str, Any]]] = []
    for m in messages:
        if m.get("role") == "tool" and units:
            units[-1].append(m)
        else:
            units.append([m])
    chunks: list[list[dict[str, Any]]] = [[]]
    used = 0
    for unit in units:
        n = sum(counter.count(message_payload(m)) for m in unit)
        if chunks[-1] and used + n > budget:
            chunks.append([])
            used = 0
        chunks[-1].extend(unit)
        used += n
    return [c for c in chunks if c]


def _emit(enabled: bool, name: str, payload: Mapping[str, Any]) -> None:
    """One ``--events`` line on stderr: ``{"event", "timestamp" (RFC 3339 UTC, when it was
    printed), ...payload}``, camelCase keys as the ``--json`` report (docs/design.md)."""
    if enabled:
        line = {"event": name, "timestamp": now_rfc3339(), **payload}
        sys.stderr.buffer.write(orjson.dumps(line) + b"\n")
        sys.stderr.flush()


def plan_compact(
    events: Iterable[Event],
    opts: CompactOptions,
    *,
    path: str = "-",
    summarizer: Summarizer | None = None,
    breaker_open: Callable[[str], bool] | None = None,
    now: Callable[[], str] = now_rfc3339,
) -> CompactPlan:
    """Decide the compaction of one session (the library form of :class:`CompactLayer`).

    Args:
        events: the session's events in file order (held in memory).
        opts: the options (``opts.encoding`` and ``opts.context_window`` override the
            session's).
        path: the transcript path, for reports and events.
        summarizer, breaker_open, now: as :class:`CompactLayer`.

    Returns:
        A :class:`CompactPlan` whose report is :meth:`CompactReport.to_json`.

    Raises:
        UsageError: bad options (e.g. ``--model session`` without a recorded model).
    """
    session = Session.from_events(
        events, path, encoding=opts.encoding, context_window=opts.context_window
    )
    layer = CompactLayer(summarizer=summarizer, breaker_open=breaker_open, now=now)
    plan = layer.plan(session, opts)
    return CompactPlan(plan.events, plan.report.to_json(), layer.failed)


@dataclass
class CompactReport(LayerReport):
    """The compact layer's report (tokens of the prompt estimate, chars of the payloads).

    Attributes:
        path: the transcript. session_key: :func:`compactctl.session.session_key`.
        messages: message events in the log. did_compress: events would be appended (not
        in JSON: the jobs report it as ``changed``). tokens_before: the prompt estimate
        before, tokens_after: after the events, tokens_saved: their difference (the report
        vocabulary of docs/report.schema.json). chars_before, chars_after: payload chars.
        context_window: the session's window in tokens (``None``: unknown).
        tokenizer: the encoding name or ``estimate``. trigger: ``manual``, ``auto`` or
        ``reactive`` when something is appended. micro: ``{"uuid", "targets"}`` of the
        micro event. summary: ``{"uuid", "replaces", "model", "format", "triggerMode"}``.
        reason: why nothing is appended. duration_ms: planning time in milliseconds.
        model_not_called: the model a dry run did not call (the extractive summarizer
        stood in). tail_micro: ``{"uuid", "targets"}`` of the micro event for the huge
        outputs of the kept tail (``keep_recent_tokens``), when there is one.
    """

    path: str
    session_key: str
    messages: int
    did_compress: bool = field(metadata={"json": False})
    tokens_before: int
    tokens_after: int
    tokens_saved: int
    chars_before: int
    chars_after: int
    context_window: int | None
    tokenizer: str
    trigger: str | None = None
    micro: dict[str, Any] | None = None
    summary: dict[str, Any] | None = None
    reason: str | None = None
    duration_ms: int | None = field(default=None, metadata={"omit_none": True})
    model_not_called: str | None = field(default=None, metadata={"omit_none": True})
    tail_micro: dict[str, Any] | None = field(default=None, metadata={"omit_none": True})

    @property
    def targets_count(self) -> int:
        micro = self.micro["targets"] if self.micro else 0
        tail = self.tail_micro["targets"] if self.tail_micro else 0
        return int(micro) + int(tail) + (int(self.summary["replaces"]) if self.summary else 0)

    @property
    def tokens_saved_count(self) -> int:
        return self.tokens_saved


class CompactLayer:
    """Micro compaction, then summarization when a trigger fires (the ``compact`` command).

    Args:
        summarizer: overrides :func:`make_summarizer` (tests, library users, dry runs).
        breaker_open: ``session_key -> bool``; True skips summarization (the 24-hour
            breaker after 3 consecutive failures, kept in the store) unless ``force``.
        now: the clock, returning RFC 3339 UTC.

    After :meth:`plan`, ``failed`` holds the summarizer's error when summarization failed
    (the plan then has no events: nothing is appended).
    """

    name = "compact"

    def __init__(
        self,
        summarizer: Summarizer | None = None,
        breaker_open: Callable[[str], bool] | None = None,
        now: Callable[[], str] = now_rfc3339,
    ) -> None:
        self.summarizer = summarizer
        self.breaker_open = breaker_open
        self.now = now
        self.failed: SummarizerError | None = None

    def plan(self, session: Session, options: CompactOptions) -> Plan[CompactReport]:
        """Decide the compaction of one session: what to append, and the numbers.

        Raises:
            UsageError: bad options (e.g. ``--model session`` without a recorded model).
        """
        stamp = self.now()  # one run, one timestamp: undo takes back a run's events together
        event, report, failed = _plan_compact(
            session, options, self.summarizer, self.breaker_open, lambda: stamp
        )
        self.failed = failed
        return Plan(event, report)


def _plan_compact(
    session: Session,
    opts: CompactOptions,
    summarizer: Summarizer | None,
    breaker_open: Callable[[str], bool] | None,
    now: Callable[[], str],
) -> tuple[list[Event], CompactReport, SummarizerError | None]:
    started = time.monotonic()
    log = session.events
    path, session_model, session_key = session.path, session.meta.model, session.meta.key
    counter = session.counter
    window = session.meta.context_window
    view = session.effective()
    sizes = session.sizes
    before, chars_before = session.prompt_totals()
    trigger = "reactive" if opts.reactive else ("manual" if opts.force else "auto")
    manual = opts.force or opts.reactive
    report = CompactReport(
        path=path,
        session_key=session_key,
        messages=session.messages,
        did_compress=False,
        tokens_before=before,
        tokens_after=before,
        tokens_saved=0,
        chars_before=chars_before,
        chars_after=chars_before,
        context_window=window,
        tokenizer=counter.encoding_name,
    )
    base = {"sessionKey": session_key, "path": path}
    new: list[Event] = []
    reasons: list[str] = []

    # 1. micro compaction
    view2 = view  # the context after micro compaction: replay(log + new)
    if opts.micro_enabled:
        micro_fires = manual or (window is not None and before > opts.micro_trigger * window)
        if micro_fires:
            micro_plan, view2 = MicroLayer(now=now).plan_view(session, view, opts.micro)
            if micro_plan.events:
                new.extend(micro_plan.events)
                report.micro = micro_plan.report.to_json()
            else:
                reasons.append("no tool output old and long enough for micro compaction")
        elif window is None:
            reasons.append("no context window known (pass --context-window, or --force)")
        else:
            reasons.append(
                f"prompt estimate {before} tokens is under {opts.micro_trigger:.0%} of the "
                f"{window}-token window"
            )

    # 2. summarization
    failed: SummarizerError | None = None
    if not opts.micro_only:
        work = log + new
        # A manual run summarizes whatever the estimate: it is not counted then (most of
        # the micro-compacted messages are about to be summarized away, never counted).
        mid = 0 if manual else sizes.totals(view2)[0]
        fires = manual or (
            (window is not None and mid > opts.summary_trigger * window)
            or (opts.input_token_threshold is not None and mid > opts.input_token_threshold)
        )
        if not fires:
            reasons.append(
                f"prompt estimate {mid} tokens is under the summarization trigger "
                + (f"({opts.summary_trigger:.0%} of {window})" if window else "(no window known)")
            )
        elif breaker_open is not None and not manual and breaker_open(session_key):
            reasons.append("3 consecutive summarization failures: paused for 24 hours")
        else:
            _emit(opts.emit_events, "compact_start", {**base, "triggerMode": trigger})
            try:
                summary = _summarize(
                    log, work, view2, opts, trigger, summarizer, session_model, counter, now
                )
            except SummarizerError as exc:
                failed = exc
                _emit(
                    opts.emit_events,
                    "compact_error",
                    {**base, "triggerMode": trigger, "error": str(exc)},
                )
                summary = None
                new = []
            if summary is not None:
                new.append(summary)
                trigger = summary.data["triggerMode"]
                report.summary = {
                    "uuid": summary.uuid,
                    "replaces": len(summary.replaces),
                    "model": summary.data["model"],
                    "format": summary.data["format"],
                    "triggerMode": trigger,
                }
            elif failed is None:
                reasons.append("nothing to summarize: every message is recent or pinned")

    # 3. the saving, and the 5% rule
    # replay(log + new), from the views already built: replay applies events in order, so
    # the context after log + [micro] is view2, and a summary is applied to it alone.
    summaries = [e for e in new if isinstance(e, SummaryEvent)]
    after_view = view if not new else view2
    for summary_event in summaries:
        after_view = apply_summary(after_view, summary_event)
    if summaries and opts.micro_enabled and opts.keep_recent_tokens is not None:
        tail_event, after_view = _micro_tail(log + new, after_view, opts, counter, now)
        if tail_event is not None:
            new.append(tail_event)
            report.tail_micro = {"uuid": tail_event.uuid, "targets": len(tail_event.targets)}
    after, chars_after = sizes.totals(after_view)
    if new and before and (before - after) / before < opts.min_saving:
        reasons.append(
            f"would save only {before - after} of {before} tokens "
            f"(< {opts.min_saving:.0%}); nothing appended"
        )
        new, after, chars_after = [], before, chars_before
        report.micro = report.summary = report.tail_micro = None
    for e in new:
        if isinstance(e, SummaryEvent):
            e.data["stats"] = {
                "tokensBefore": before,
                "tokensAfter": after,
                "charsBefore": chars_before,
                "charsAfter": chars_after,
                "messagesReplaced": len(e.replaces),
            }
    report.did_compress = bool(new)
    report.tokens_saved = before - after
    report.tokens_after = after
    report.chars_after = chars_after
    report.trigger = trigger if new else None
    report.reason = None if new else ("; ".join(reasons) or "nothing to do")
    report.duration_ms = int((time.monotonic() - started) * 1000)
    if failed is None and report.summary is not None:
        saved = (chars_before - chars_after) / chars_before if chars_before else 0.0
        _emit(
            opts.emit_events,
            "compact_done",
            {
                **base,
                "applied": bool(new),
                "triggerMode": trigger,
                "tokensBefore": before,
                "tokensAfter": after,
                "tokensSaved": before - after,
                "charsBefore": chars_before,
                "charsAfter": chars_after,
                "charsSavedRatio": round(saved, 4),
            },
        )
    return new, report, failed


def _micro_tail(
    log: list[Event],
    view: View,
    opts: CompactOptions,
    counter: TokenCounter,
    now: Callable[[], str],
) -> tuple[CompactEvent | None, View]:
    """A micro CompactEvent for the huge outputs of the kept tail (issue 15 point 5), and
    the context after it: every tool output of ``view`` (the context after the summary)
    over half of ``opts.keep_recent_tokens`` tokens, in any turn, the current one included
    (micro compaction alone never touches it), except the tools of ``opts.micro.preserve``
    and pinned messages. Its middle is elided as micro compaction elides it."""
    assert opts.keep_recent_tokens is not None
    limit = opts.keep_recent_tokens // 2
    huge = [m for m in view if m.role == "tool" and counter.count(message_payload(m.data)) > limit]
    if not huge:
        return None, view
    # keep_turns -1: no turn is protected, the current one included
    event, _ = plan_micro_view(log, huge, replace(opts.micro, keep_turns=-1), timestamp=now())
    if event is None:
        return None, view
    return event, apply_micro(view, event)


def _summarize(
    log: list[Event],
    work: list[Event],
    view: View,
    opts: CompactOptions,
    trigger: str,
    summarizer: Summarizer | None,
    session_model: str | None,
    counter: TokenCounter,
    now: Callable[[], str],
) -> SummaryEvent | None:
    from compactctl.summarize import SummaryRequest, SummaryResult

    first_user = next(
        (e.uuid for e in log if isinstance(e, Message) and is_real_user(e.data)), None
    )
    patterns = [re.compile(p) for p in opts.pin_patterns]
    span = select_span(
        view,
        strategy=opts.strategy,
        keep_recent=opts.keep_recent,
        first_user=first_user,
        patterns=patterns,
        keep_recent_tokens=opts.keep_recent_tokens,
        size=lambda m: counter.count(message_payload(m.data)),
    )
    if not span:
        return None
    prior_msg = next((m for m in reversed(view) if "summaryOf" in m.data), None)
    prior_event = None
    if prior_msg is not None:
        prior_event = next(
            (e for e in work if isinstance(e, SummaryEvent) and e.uuid == prior_msg.uuid), None
        )
    prior = SummaryResult.from_event(prior_event.data) if prior_event else None
    originals = {e.uuid: e for e in log if isinstance(e, Message)}

    def original(m: Message) -> dict[str, Any]:
        data = dict(originals.get(m.uuid, m).data)
        data.setdefault("turnId", m.turn)
        return data

    messages = [original(m) for m in span]
    # the kept tail, read but not summarized: what became of the span (a failure that a
    # later run passed is no blocker)
    in_span = {id(m) for m in span}
    end = max(i for i, m in enumerate(view) if id(m) in in_span)
    kept = [original(m) for m in view[end + 1 :] if "summaryOf" not in m.data]
    from compactctl.summarize.extractive.intent import spoken_by_user

    spoken = [
        e
        for e in log
        if isinstance(e, Message) and is_real_user(e.data) and spoken_by_user(e.data, e.text)
    ]
    users = [e.text for e in spoken]
    constraints = user_constraints(users)
    latest = None
    if spoken:
        turn = spoken[-1].turn
        latest = (f"T{turn}" if isinstance(turn, int) else "", spoken[-1].text)
    engine = summarizer or make_summarizer(opts, session_model)

    def request(
        msgs: list[dict[str, Any]], prior_state: SummaryResult | None, later: list[dict[str, Any]]
    ) -> SummaryRequest:
        req = SummaryRequest(
            messages=msgs,
            later=later,
            prior=prior_state,
            format=opts.format,  # type: ignore[arg-type]
            max_chars=opts.summary_budget,
            max_tokens=opts.max_summary_tokens,
            instructions=opts.instructions,
            pinned_constraints=constraints,
            first_request=users[0] if users else "",
            latest_request=latest,
        )
        if not opts.redact:
            return req
        # redacted before any summarizer reads it: what a summary clips or quotes
        # (half a token, a key body without its BEGIN line) was already redacted whole
        from compactctl.summarize.redact import redact_request

        return redact_request(req)

    from compactctl.summarize.litellm import ContextTooLong

    try:
        result = engine.summarize(request(messages, prior, kept))
    except ContextTooLong:
        # reactive retry, once per run: summarize in chunks that fit, chaining the state.
        # Each chunk is at most half the span (so the failed request is never re-sent whole)
        # and at most half the summarizer's window when litellm knows it.
        span_tokens = sum(counter.count(message_payload(m)) for m in messages)
        budget = max(1, span_tokens // 2)
        window = context_window_for(engine.name)
        if window:
            budget = min(budget, window // 2)
        state = prior
        done = 0
        for chunk in _chunks(messages, budget, counter):
            done += len(chunk)
            try:
                state = engine.summarize(request(chunk, state, messages[done:] + kept))
            except ContextTooLong as exc:
                raise SummarizerError(f"{exc}; the reactive retry in chunks failed too") from exc
        assert state is not None
        result = state
        trigger = "reactive"
    if opts.redact:
        result = _redact_result(result)
    replaces = ([prior_event.uuid] if prior_event and prior_event.uuid else []) + [
        m.uuid for m in span if m.uuid
    ]
    key = orjson.dumps(
        {"replaces": replaces, "format": result.format, "model": result.model},
        option=orjson.OPT_SORT_KEYS,
    ).decode()
    data: dict[str, Any] = {
        "type": "summary",
        "uuid": str(uuidlib.uuid5(NAMESPACE, "summary:" + key)),
        "replaces": replaces,
        "summaryText": result.text,
        "lastSummarizedTurnId": max(m.turn or 0 for m in span),
        "format": result.format,
        "model": result.model,
        "triggerMode": trigger,
        "strategy": opts.strategy,
        "timestamp": now(),
    }
    if result.task_state is not None:
        data["taskState"] = dict(result.task_state)
    event = event_from_dict(data)
    assert isinstance(event, SummaryEvent)
    return event
