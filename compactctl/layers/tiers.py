"""Layer 4: the L0 / L1 / L2 tiers of a summary, chosen by section priority (pure, no I/O).

A tier is a shorter copy of a summary that keeps whole bullets of the highest-priority
sections (MoonHub's compactor, "Layer 4: 分层摘要"): L0 about 200 tokens, L1 about 1000, L2
about 3000 (:data:`TIER_BUDGETS`). Nothing is rewritten: every bullet of a tier is a bullet of the
summary, copied verbatim. Tokens are counted with :class:`~compactctl.tokens.TokenCounter`.

Priorities (the table of MoonHub's compactor: identity and user information 10, decisions and
corrections 9, active tasks 8, preferences 7, context and topics 4-5, notes 3), mapped onto
the formats:

=======================  ========  ================================================
``sections`` section     priority  why
=======================  ========  ================================================
Primary Request          10        the user's goal and stated constraints
Errors and Fixes         9         corrections
Decision Rationale       9         decisions
Pending Tasks            8         active tasks
Current Work             8         the active task
Optional Next Step       8         the active task's next action
All User Messages        7         the user's own words: wishes, preferences. Not
                                   10: long, verbatim, and repeating the request
                                   that Primary Request already carries at 10
Key Technical Concepts   5         context
Files and Code Sections  5         context (the artifacts to reopen)
Problem Solving          4         topics: how the work went
``<analysis>`` block     3         notes; one unit, only ever in L2
=======================  ========  ================================================

``task-state`` fields: goal 10; decisions 9; user_constraints 9 (a standing instruction of
the user: forgetting one makes the agent break it, and they are short); open_items,
next_step, blockers 8; progress, key_artifacts 5.

Constraint bullets, in any section or list field, are raised (never lowered): a bullet that
starts with ``Constraint:`` (how summarizers label a user constraint) counts as at least 9,
like ``user_constraints``; a bullet that states one in words ("do not", "don't", "must",
"never", "keep", "always", 不要, 必须, 保留, 禁止, 不能) counts as at least 7, a preference.
So "keep the fix inside config.py" found under Problem Solving outranks the context around
it.

Every tier is a valid document of its format (``sections``: all ten headings; ``task-state``:
a whole ``{"task_state", "display_summary"}`` answer) and carries the goal, every user
constraint and the next step, whatever its budget (issue 15, point 13).

Selection (:func:`derive_tiers`): the required bullets first, then the others sorted by
priority, ties in canonical order (section order of
:data:`~compactctl.summarize.summary_format.SECTIONS` or field order of
:data:`~compactctl.summarize.summary_format.TASK_STATE_FIELDS`, then bullet order). Tiers are built
smallest first; each larger tier starts from the bullets of the smaller one, then adds the
others greedily, so L0 ⊆ L1 ⊆ L2 by bullets always holds. A bullet is added when the whole
rendered tier still counts at most the budget; one too big is skipped and the next one tried;
bullets are never cut.

Sources: MoonHub's compactor (tiers, budgets, priority and selection tables), NeoCode's
compact protocol (task-state), Coding Code's context service (the ten sections),
docs/design.md sections 2, 3, 5 and 9.
"""

from __future__ import annotations

import dataclasses
import json
import re
import time
import uuid as uuidlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from compactctl.errors import UsageError
from compactctl.layers.base import EventLayer, LayerReport, Plan, internal
from compactctl.layers.micro import NAMESPACE
from compactctl.layers.options import TiersOptions
from compactctl.model import Event, Message, SummaryEvent, event_from_dict
from compactctl.session import Session
from compactctl.summarize import Summarizer, SummaryFormat, SummaryRequest, SummaryResult
from compactctl.summarize.summary_format import (
    DISPLAY_MARKER,
    SECTIONS,
    TASK_STATE_FIELDS,
    TASK_STATE_STRING_FIELDS,
    SummaryFormatError,
    TaskState,
    parse_sections,
    parse_task_state,
    validate_sections,
    validate_task_state,
)
from compactctl.summarize.summary_format import section_key as _key
from compactctl.text import FENCE_RE as _FENCE_RE
from compactctl.text import PREFERENCE, constraint_re
from compactctl.tokens import TokenCounter, prompt_tokens

__all__ = [
    "ANALYSIS_PRIORITY",
    "ROOM_SHARE_PERCENT",
    "SECTION_PRIORITY",
    "TASK_STATE_PRIORITY",
    "TIERS",
    "TIER_BUDGETS",
    "TIER_DISPLAY",
    "TiersLayer",
    "TiersOptions",
    "TiersReport",
    "bullet_priority",
    "derive_tiers",
    "parse_tier",
    "redact_tiers",
    "rewrite_tiers_with_model",
    "select_tier",
]

#: Tier names, smallest first.
TIERS: tuple[str, ...] = ("L0", "L1", "L2")

#: Token budget of each tier (MoonHub's compactor: L0 200, L1 1000, L2 3000).
TIER_BUDGETS: Mapping[str, int] = {"L0": 200, "L1": 1000, "L2": 3000}

#: Priority of each ``sections`` section (MoonHub's compactor's table; see the module docstring).
SECTION_PRIORITY: Mapping[str, int] = {
    "Primary Request": 10,
    "Key Technical Concepts": 5,
    "Files and Code Sections": 5,
    "Errors and Fixes": 9,
    "Problem Solving": 4,
    "Decision Rationale": 9,
    "All User Messages": 7,
    "Pending Tasks": 8,
    "Current Work": 8,
    "Optional Next Step": 8,
}

#: Priority of the ``<analysis>`` block: notes (MoonHub's compactor). It is kept only in L2.
ANALYSIS_PRIORITY = 3

#: Priority of each ``task_state`` field (the table of MoonHub's compactor, on the fields of
#: NeoCode's compact protocol).
TASK_STATE_PRIORITY: Mapping[str, int] = {
    "goal": 10,
    "progress": 5,
    "open_items": 8,
    "next_step": 8,
    "blockers": 8,
    "key_artifacts": 5,
    "decisions": 9,
    "user_constraints": 9,
}

#: A tier may take at most this share of the tokens left in the context window.
ROOM_SHARE_PERCENT = 10

_EXPLICIT_CONSTRAINT = 9
_STATED_PREFERENCE = 7
_EXPLICIT_RE = re.compile(r"^\s*\**constraints?\**\s*[:：]", re.IGNORECASE)
_PREFERENCE_RE = constraint_re(PREFERENCE)
_HEADING_RE = re.compile(r"^[ \t]{0,3}#{1,6}[ \t]*(?:\d{1,2}[.)][ \t]*)?(?P<name>.*?)[ \t#:]*$")


def bullet_priority(base: int, text: str) -> int:
    """The priority of one bullet: its section's ``base``, raised for a user constraint.

    >>> bullet_priority(4, "Constraint: keep Python 3.9"), bullet_priority(4, "do not rename it")
    (9, 7)
    >>> bullet_priority(10, "do not rename it"), bullet_priority(4, "ran pytest")
    (10, 4)
    """
    if _EXPLICIT_RE.match(text):
        return max(base, _EXPLICIT_CONSTRAINT)
    if _PREFERENCE_RE.search(text):
        return max(base, _STATED_PREFERENCE)
    return base


@dataclass(frozen=True)
class _Unit:
    """One bullet (or list item, string field, or the analysis block) of a summary.

    ``key`` is the section or field name (``""`` for the analysis); ``position`` is its
    canonical place (section index, bullet index); the analysis comes before every section.
    """

    key: str
    text: str
    priority: int
    position: tuple[int, int]


def _check_format(fmt: str) -> SummaryFormat:
    if fmt == "sections":
        return "sections"
    if fmt == "task-state":
        return "task-state"
    raise UsageError(f"unknown summary format {fmt!r}; expected sections or task-state")


def _check_budgets(budgets: Mapping[str, int]) -> dict[str, int]:
    if sorted(budgets) != sorted(TIERS):
        raise UsageError(f"tier budgets must name exactly {', '.join(TIERS)}; got {list(budgets)}")
    out = {name: budgets[name] for name in TIERS}
    for name, value in out.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise UsageError(f"tier budget {name} must be a whole number of tokens >= 1")
    if not out["L0"] <= out["L1"] <= out["L2"]:
        raise UsageError(f"tier budgets must grow from L0 to L2; got {out}")
    return out


# --------------------------------------------------------------------------- parsing


def _pad_sections(text: str) -> str:
    """``text`` with a bare ``### Name`` heading added before ``</summary>`` for every section
    it lacks, so that :func:`~compactctl.summarize.summary_format.parse_sections` accepts a tier."""
    start, end = text.find("<summary>"), text.rfind("</summary>")
    if start < 0 or end < start:
        return text
    keys = {_key(name): name for name in SECTIONS}
    present = set()
    in_fence = False
    for line in text[start + len("<summary>") : end].split("\n"):
        if _FENCE_RE.match(line):
            in_fence = not in_fence
        elif not in_fence and line.lstrip().startswith("#"):
            match = _HEADING_RE.match(line)
            if match is not None and _key(match.group("name")) in keys:
                present.add(keys[_key(match.group("name"))])
    missing = "".join(f"### {name}\n" for name in SECTIONS if name not in present)
    return text[:end] + ("\n" + missing if missing else "") + text[end:]


def _parse_state(text: str) -> TaskState:
    """A task state from a full task-state answer, or from a tier's bare state object."""
    try:
        data: Any = json.loads(text)
    except ValueError:
        data = None
    if isinstance(data, dict) and not {"task_state", "display_summary"} & data.keys():
        empty = {f: "" if f in TASK_STATE_STRING_FIELDS else [] for f in TASK_STATE_FIELDS}
        return validate_task_state({**empty, **data})
    return parse_task_state(text).task_state


def parse_tier(text: str, fmt: str) -> dict[str, list[str]]:
    """The bullets of a tier (or of a whole summary), by section or field.

    Args:
        text: a tier from :func:`derive_tiers` or :func:`rewrite_tiers_with_model`, or a
            summary text. ``sections``: a ``<summary>`` block in which sections may be
            missing. ``task-state``: a full answer ``{"task_state", "display_summary"}``, or
            the compact state object of a derived tier, in which fields may be missing.
        fmt: ``"sections"`` or ``"task-state"``.

    Returns:
        ``sections``: each of the ten section names -> its bullet texts (the ``<analysis>``
        block is not included). ``task-state``: each of the eight fields -> its items; the
        string fields ``goal`` and ``next_step`` give a one-item list, or ``[]`` when blank.

    Raises:
        SummaryFormatError: the text does not follow its format.
        UsageError: an unknown ``fmt``.

    >>> parse_tier('{"goal":"fix it","decisions":["keep strptime"]}', "task-state")["decisions"]
    ['keep strptime']
    """
    if _check_format(fmt) == "sections":
        parsed = parse_sections(_pad_sections(text))
        return {name: list(parsed.sections.get(name, [])) for name in SECTIONS}
    state: Mapping[str, Any] = _parse_state(text)
    out: dict[str, list[str]] = {}
    for field in TASK_STATE_FIELDS:
        value = state[field]
        out[field] = ([value] if value.strip() else []) if isinstance(value, str) else list(value)
    return out


def _units(summary_text: str, fmt: SummaryFormat) -> list[_Unit]:
    units: list[_Unit] = []
    if fmt == "sections":
        parsed = parse_sections(_pad_sections(summary_text))
        if parsed.analysis:
            units.append(_Unit("", parsed.analysis, ANALYSIS_PRIORITY, (-1, 0)))
        for index, name in enumerate(SECTIONS):
            for number, bullet in enumerate(parsed.sections.get(name, [])):
                priority = bullet_priority(SECTION_PRIORITY[name], bullet)
                units.append(_Unit(name, bullet, priority, (index, number)))
        return units
    for index, (field, items) in enumerate(parse_tier(summary_text, fmt).items()):
        for number, item in enumerate(items):
            priority = bullet_priority(TASK_STATE_PRIORITY[field], item)
            units.append(_Unit(field, item, priority, (index, number)))
    return units


# --------------------------------------------------------------------------- rendering


def _render_sections(units: Sequence[_Unit]) -> str:
    """``<analysis>`` (when chosen) and a ``<summary>`` with all ten sections in canonical
    order, those without a chosen bullet as their heading alone, so that the tier passes
    :func:`~compactctl.summarize.summary_format.validate_sections`."""
    analysis = ""
    chosen: dict[str, list[str]] = {name: [] for name in SECTIONS}
    for unit in units:
        if not unit.key:
            analysis = f"<analysis>\n{unit.text}\n</analysis>\n\n"
        else:
            chosen[unit.key].append("- " + unit.text.strip().replace("\n", "\n  "))
    body = "\n\n".join("\n".join([f"### {name}", *chosen[name]]) for name in SECTIONS)
    return f"{analysis}<summary>\n{body}\n</summary>"


def _render_state(units: Sequence[_Unit]) -> str:
    """The task-state answer of the chosen items (:func:`_state_json`)."""
    state: dict[str, Any] = {}
    for unit in units:
        if unit.key in TASK_STATE_STRING_FIELDS:
            state[unit.key] = unit.text
        else:
            state.setdefault(unit.key, []).append(unit.text)
    return _state_json(state)


#: The display summary of a derived ``task-state`` tier: it points to the state instead of
#: repeating it (the summary's own display summary would double the tier's size), and it
#: makes the tier a valid answer of NeoCode's compact protocol.
TIER_DISPLAY = "\n\n".join(
    [
        DISPLAY_MARKER,
        "done:\n- see task_state.progress",
        "in_progress:\n- see task_state.open_items and task_state.next_step",
        "decisions:\n- see task_state.decisions",
        "code_changes:\n- see task_state.key_artifacts",
        "constraints:\n- see task_state.user_constraints",
    ]
)


def _state_json(state: Mapping[str, Any]) -> str:
    """A complete task-state answer ``{"task_state": {...}, "display_summary": ...}`` as
    compact JSON: every field of ``state`` in field order (a missing one blank or empty),
    and :data:`TIER_DISPLAY`. It passes
    :func:`~compactctl.summarize.summary_format.parse_task_state`."""
    full = {
        f: state.get(f) or ("" if f in TASK_STATE_STRING_FIELDS else []) for f in TASK_STATE_FIELDS
    }
    return json.dumps(
        {"task_state": full, "display_summary": TIER_DISPLAY},
        ensure_ascii=False,
        separators=(",", ":"),
    )


def _filled(value: Any) -> bool:
    return bool(value.strip()) if isinstance(value, str) else bool(value)


# --------------------------------------------------------------------------- tiers


def _required(unit: _Unit, kind: SummaryFormat) -> bool:
    """A bullet every tier carries, whatever its budget (issue 15, point 13): the goal, the
    user's constraints and the next step. ``sections``: the first bullet of Primary Request
    and of Optional Next Step, and every ``Constraint:`` bullet; ``task-state``: ``goal``,
    ``next_step`` and every ``user_constraints`` item."""
    if kind == "task-state":
        return unit.key in ("goal", "next_step", "user_constraints")
    if unit.key in ("Primary Request", "Optional Next Step") and unit.position[1] == 0:
        return True
    return bool(unit.key) and _EXPLICIT_RE.match(unit.text) is not None


def derive_tiers(
    summary_text: str,
    fmt: str,
    counter: TokenCounter,
    budgets: Mapping[str, int] = TIER_BUDGETS,
) -> dict[str, str]:
    """Derive the L0, L1 and L2 tiers of a summary by section priority (MoonHub's compactor).

    Args:
        summary_text: a SummaryEvent's ``summaryText``: a ``sections`` text (Coding Code's
            context service) or a ``task-state`` answer (NeoCode's compact protocol). A tier
            from this function is accepted too.
        fmt: ``"sections"`` or ``"task-state"``.
        counter: counts tokens (``counter.count(text) -> int``); every tier is checked by
            counting its whole rendered text.
        budgets: tokens per tier, ``{"L0": 200, "L1": 1000, "L2": 3000}`` by default.

    Returns:
        ``{"L0": text, "L1": text, "L2": text}``, each a valid document of its format and
        counting at most its budget in tokens, except that the required bullets
        (:func:`_required`: the goal, every constraint, the next step) are in every tier
        even when they alone are over the budget. A summary that already fits a tier's
        budget is that tier, unchanged (usually L2). Otherwise:

        - ``sections``: the ten ``### Name`` headings in canonical order inside
          ``<summary>...</summary>``, each with its chosen ``- `` bullets (a section with
          none is its heading alone); an ``<analysis>`` block only in L2, when it fits. It
          passes :func:`~compactctl.summarize.summary_format.validate_sections`.
        - ``task-state``: a complete answer ``{"task_state": {...}, "display_summary":
          ...}`` as compact JSON: the chosen items, every other field blank or empty, and
          the display summary :data:`TIER_DISPLAY`, which points to the state instead of
          repeating it. It passes
          :func:`~compactctl.summarize.summary_format.parse_task_state`.

        Every bullet of L0 is in L1, and every bullet of L1 is in L2. Deterministic.

    Cost: one token count of the whole rendered tier per bullet tried, so O(bullets x tier
    size); about 0.05 s for the samples' 1-2k-token summaries, about 3 s for a
    2000-bullet, 57k-token one. Memory: the parsed bullets, once.

    Raises:
        SummaryFormatError: the summary does not follow its format.
        UsageError: an unknown format; budgets that do not name L0, L1, L2, are below 1, or
            shrink from L0 to L2.

    >>> text = (
    ...     "<summary>\\n### Primary Request\\n- fix the pager\\n### Problem Solving\\n- "
    ...     + "tried many things " * 40 + "\\n</summary>"
    ... )
    >>> tiers = derive_tiers(text, "sections", TokenCounter("estimate"), {
    ...     "L0": 30, "L1": 30, "L2": 1000})
    >>> tiers["L0"].splitlines()[:3]
    ['<summary>', '### Primary Request', '- fix the pager']
    >>> validate_sections(tiers["L0"])  # all ten headings: a valid sections text
    >>> tiers["L2"] == text
    True
    """
    kind = _check_format(fmt)
    limits = _check_budgets(budgets)
    units = _units(summary_text, kind)
    render: Callable[[Sequence[_Unit]], str] = (
        _render_sections if kind == "sections" else _render_state
    )
    by_priority = sorted(range(len(units)), key=lambda i: (-units[i].priority, units[i].position))
    total = counter.count(summary_text)
    required = {i for i, unit in enumerate(units) if _required(unit, kind)}
    chosen: set[int] = set()
    tiers: dict[str, str] = {}
    for name in TIERS:
        budget = limits[name]
        if total <= budget:
            tiers[name] = summary_text
            chosen = set(range(len(units)))
            continue
        chosen |= required
        for index in by_priority:
            if index in chosen or (not units[index].key and name != "L2"):
                continue
            trial = chosen | {index}
            if counter.count(render([units[i] for i in sorted(trial)])) <= budget:
                chosen = trial
        tiers[name] = render([units[i] for i in sorted(chosen)])
    return tiers


def select_tier(
    history_messages: int,
    *,
    context_window: int | None = None,
    room_tokens: int | None = None,
    tier_tokens: Mapping[str, int] | None = None,
) -> str:
    """Which tier to put in the prompt (MoonHub's compactor, "分层选择策略").

    Without a window (``context_window`` and ``room_tokens`` both ``None``), by the number of
    messages in the history: at most 20 -> ``"L2"``, 21 to 40 -> ``"L1"``, more -> ``"L0"``.

    With a window: the largest tier whose tokens are at most :data:`ROOM_SHARE_PERCENT`
    (10%) of the room left, else ``"L0"``. Ten percent keeps the summary a small preamble:
    90% of the free room stays for the new turns, tool outputs and the answer, so that
    injecting a summary does not itself bring the session back near the 90% summarization
    trigger (docs/design.md section 5). On a fresh 128k window that is 12.8k tokens (L2 fits);
    with 20k left, 2k (L1); under 10k left, L0.

    Args:
        history_messages: messages in the history (``>= 0``).
        context_window: the model's context window, in tokens; the room when ``room_tokens``
            is not given.
        room_tokens: tokens still free in the window for the summary and what follows it.
        tier_tokens: each tier's token count; a tier not given counts as its budget in
            :data:`TIER_BUDGETS` (an upper bound).

    Raises:
        ValueError: a negative count, or ``room_tokens`` larger than ``context_window``.

    >>> select_tier(20), select_tier(21), select_tier(40), select_tier(41)
    ('L2', 'L1', 'L1', 'L0')
    >>> select_tier(5, context_window=128_000, room_tokens=20_000)
    'L1'
    """
    if history_messages < 0:
        raise ValueError(f"history_messages must be >= 0, got {history_messages}")
    if context_window is None and room_tokens is None:
        if history_messages <= 20:
            return "L2"
        return "L1" if history_messages <= 40 else "L0"
    room = room_tokens if room_tokens is not None else context_window
    assert room is not None
    if room < 0 or (context_window is not None and context_window < 0):
        raise ValueError("context_window and room_tokens must be >= 0")
    if context_window is not None and room > context_window:
        raise ValueError(f"room_tokens {room} exceeds the context window {context_window}")
    sizes = {**TIER_BUDGETS, **(tier_tokens or {})}
    for name in reversed(TIERS):
        if sizes[name] * 100 <= room * ROOM_SHARE_PERCENT:
            return name
    return "L0"


_TIER_PROMPT = (
    "Rewrite this summary as tier {name} within {budget} tokens (about {chars} characters), "
    "keeping the highest-priority facts first: the user's request and identity, then "
    "decisions and corrections, then active tasks and the next step, then the user's "
    "preferences and constraints (verbatim), then context and topics; drop notes. Keep the "
    "same format; copy file paths, commands and errors verbatim; invent nothing."
)


def rewrite_tiers_with_model(
    summarizer: Summarizer,
    tiers: Mapping[str, str],
    counter: TokenCounter,
    budgets: Mapping[str, int] = TIER_BUDGETS,
    *,
    fmt: str = "sections",
) -> dict[str, str]:
    """Have a model rewrite L1 and L0 from L2 (the ``--model`` path); L2 is kept as is.

    For L1, then L0, one :meth:`Summarizer.summarize` call with no messages, L2 as the prior
    state, ``max_chars = 4 * budget`` (about 4 characters per token) and instructions naming
    the tier, its budget in tokens and the priority order. The answer must validate
    (:func:`~compactctl.summarize.summary_format.validate_sections`, or
    :func:`~compactctl.summarize.summary_format.parse_task_state`) and count at most the budget:

    - ``sections``: the answer's ``<summary>`` block, without its ``<analysis>``;
    - ``task-state``: the compact JSON of the answer's ``task_state`` (as :func:`derive_tiers`).

    Unlike :func:`derive_tiers`, nesting of bullets is not guaranteed: the model rewrites.

    Args:
        summarizer: any :class:`~compactctl.summarize.Summarizer`.
        tiers: ``{"L0", "L1", "L2"}`` texts, e.g. from :func:`derive_tiers`.
        counter: counts the tokens of each answer.
        budgets: tokens per tier.
        fmt: ``"sections"`` or ``"task-state"``.

    Returns:
        ``{"L0": ..., "L1": ..., "L2": ...}``.

    Raises:
        SummaryFormatError: an answer does not validate or is over its tier's budget.
        SummarizerError: the summarizer failed.
        UsageError: an unknown format or bad budgets.
    """
    kind = _check_format(fmt)
    limits = _check_budgets(budgets)
    top = tiers["L2"]
    state = _parse_state(top) if kind == "task-state" else None
    prior = SummaryResult(text=top, format=kind, task_state=state, model=summarizer.name)
    out = {"L2": top}
    for name in ("L1", "L0"):
        budget = limits[name]
        request = SummaryRequest(
            messages=[],
            prior=prior,
            format=kind,
            max_chars=budget * 4,
            instructions=_TIER_PROMPT.format(name=name, budget=budget, chars=budget * 4),
        )
        answer = summarizer.summarize(request).text
        if kind == "sections":
            validate_sections(answer)
            end = answer.rfind("</summary>") + len("</summary>")
            text = answer[answer.find("<summary>") : end]
        else:
            text = _state_json(parse_task_state(answer).task_state)
        tokens = counter.count(text)
        if tokens > budget:
            raise SummaryFormatError(
                f"model {summarizer.name} wrote tier {name} with {tokens} tokens; "
                f"its budget is {budget}"
            )
        out[name] = text
    return {name: out[name] for name in TIERS}


def redact_tiers(tiers: Mapping[str, str], fmt: str) -> dict[str, str]:
    """``tiers`` with secrets redacted (:func:`compactctl.summarize.redact.redact`); a
    ``task-state`` tier stays valid JSON (its strings are redacted one by one if redacting
    the text whole would break it). A tier without secrets is returned unchanged.

    >>> redact_tiers({"L0": "- set PASSWORD=hunter22 in CI"}, "sections")
    {'L0': '- set PASSWORD=[REDACTED:assigned-secret] in CI'}
    """
    from compactctl.summarize.redact import redact, redact_value

    out = {}
    for name, text in tiers.items():
        new = redact(text)
        if new is not text and fmt == "task-state":
            try:
                json.loads(new)
            except ValueError:
                data = json.loads(text)
                state = data.get("task_state", data) if isinstance(data, dict) else {}
                new = _state_json(redact_value(state))
        out[name] = new
    return out


# --------------------------------------------------------------------------- the layer


def plan_tiers(
    events: Iterable[Event],
    *,
    counter: TokenCounter,
    timestamp: str,
    tier: str = "auto",
    context_window: int | None = None,
    summarizer: Summarizer | None = None,
    budgets: Mapping[str, int] = TIER_BUDGETS,
    redact: bool = True,
    view: list[Message] | None = None,
) -> tuple[SummaryEvent | None, dict[str, Any]]:
    """Decide the tiers of a session's newest summary: the superseding SummaryEvent, if any.

    The newest summary in the effective context gets L0/L1/L2 (:func:`derive_tiers`, or the
    model rewrite when ``summarizer`` is given) on a new SummaryEvent that supersedes it:
    the same ``replaces`` plus the old summary's uuid, ``tiers``, ``selectedTier`` (what
    replay shows; left out while the whole summary stays shown) and ``supersedes``. A
    summary that already has tiers gets nothing, unless the tier to show (``tier``, or the
    ``auto`` choice) is another than the one it shows: then a superseding event with the
    same tiers selects that one.

    Args:
        events: the session's events (held in memory).
        counter: counts tier tokens (the session's tiktoken encoding).
        timestamp: RFC 3339 UTC time to record.
        tier: ``auto``, ``L0``, ``L1`` or ``L2``. ``auto`` with a known window swaps in a
            tier only when the context needs it: when the whole summary is over
            :data:`ROOM_SHARE_PERCENT` of the room left (window minus the tokens of the
            effective context without the summary); then, and without a window, it uses
            :func:`select_tier` (with the room, or with the number of messages in the log).
        context_window: the window in tokens, or ``None``.
        summarizer: rewrite L1 and L0 with this model (validated), or ``None``.
        budgets: tier budgets in tokens.
        redact: redact secrets from new tier texts (:func:`redact_tiers`); tiers already
            on the summary are kept as they are.
        view: the effective context of ``events`` when the caller has it (``None``: it is
            replayed here).

    Returns:
        ``(event, report)``; report: ``{"summary", "tiers": {L: tokens}, "selectedTier",
        "reason", "note"}``. ``selectedTier`` is ``None`` when the whole summary stays
        shown (the event then records the tiers without ``selectedTier``; ``note`` says
        why).

    Raises:
        UsageError: an unknown ``tier``.
        SummaryFormatError: the model's rewrite is invalid or over budget.
    """
    from compactctl.replay import replay

    if tier not in ("auto", *TIERS):
        raise UsageError(f"--tier must be auto, L0, L1 or L2, not {tier!r}")
    log = list(events)
    if view is None:
        view = replay(log)
    current = next((m for m in reversed(view) if "summaryOf" in m.data), None)
    report: dict[str, Any] = {
        "summary": None,
        "tiers": None,
        "selectedTier": None,
        "reason": None,
        "note": None,
    }
    if current is None:
        report["reason"] = "no summary yet: run compactctl compact first"
        return None, report
    old = next((e for e in log if isinstance(e, SummaryEvent) and e.uuid == current.uuid), None)
    if old is None:  # a summary message the file holds as a message: an effective context
        report["reason"] = (
            f"the newest summary (line {current.line}) is a message of this file, not a "
            "summary event (an effective context, or a session an agent continued from a "
            "summary): run tiers on the transcript it was made from"
        )
        return None, report
    report["summary"] = old.uuid
    current_tier = old.data.get("selectedTier") if old.tiers else None
    if old.tiers:
        tiers = dict(old.tiers)  # re-select: the same tiers, another one shown
    else:
        fmt = str(old.data.get("format") or "sections")
        try:
            tiers = derive_tiers(old.summary_text, fmt, counter, budgets)
        except SummaryFormatError:
            if old.data.get("format"):
                raise  # compactctl's own summary, broken: say so
            # no format recorded and not compactctl's sections: the agent's own compaction
            # summary (Claude Code, Codex), imported as it is; no tiers are made from it
            by = old.data.get("model") or "another tool"
            report["reason"] = (
                f"the newest summary is not in compactctl's format (written by {by}, such as "
                "an agent's own compaction): tiers are made from compactctl's summaries; run "
                "compactctl compact --force first"
            )
            return None, report
        if summarizer is not None:
            tiers = rewrite_tiers_with_model(summarizer, tiers, counter, budgets, fmt=fmt)
        if redact:
            tiers = redact_tiers(tiers, fmt)
    sizes = {k: counter.count(v) for k, v in tiers.items()}
    note = None
    chosen: str | None = tier
    if tier == "auto":
        messages = sum(1 for e in log if isinstance(e, Message))
        room = None
        if context_window:
            rest = [m for m in view if m.uuid != current.uuid]
            room = max(0, context_window - prompt_tokens(rest, counter))
        full = counter.count(old.summary_text)
        if room is not None and full * 100 <= room * ROOM_SHARE_PERCENT:
            # the context does not need a smaller tier: the whole summary stays shown
            chosen = None
            note = (
                f"the whole summary ({full} tokens) fits in {ROOM_SHARE_PERCENT}% of the "
                f"{room} tokens free in the {context_window}-token window, so no tier is "
                "swapped in (pass --tier L0, L1 or L2 to show one)"
            )
        else:
            chosen = select_tier(
                messages, context_window=context_window, room_tokens=room, tier_tokens=sizes
            )
    if old.tiers and chosen == current_tier:
        shown = current_tier or "the whole summary"
        report.update(
            tiers=sizes,
            selectedTier=current_tier,
            reason=f"the newest summary already has tiers (showing {shown})"
            + (f"; {note}" if note else "; pass --tier L0, L1 or L2 to show another"),
        )
        return None, report
    key = orjson.dumps(
        {"supersedes": old.uuid, "tiers": sizes, "selected": chosen}, option=orjson.OPT_SORT_KEYS
    ).decode()
    data = dict(old.data)
    data.pop("selectedTier", None)
    data.update(
        uuid=str(uuidlib.uuid5(NAMESPACE, "tiers:" + key)),
        replaces=[*old.replaces, old.uuid],
        supersedes=old.uuid,
        tiers=tiers,
        tierTokens=sizes,
        timestamp=timestamp,
    )
    if chosen is not None:
        data["selectedTier"] = chosen
    event = event_from_dict(data)
    assert isinstance(event, SummaryEvent)
    report.update(tiers=sizes, selectedTier=chosen, note=note, reselected=bool(old.tiers))
    return event, report


@dataclass
class TiersReport(LayerReport):
    """The tiers layer's report.

    Attributes:
        summary: uuid of the newest summary (``None``: no summary yet).
        tiers: ``{L0|L1|L2: tokens}``. selected_tier: the tier replay shows.
        reason: why nothing is appended. session_key, tokenizer: the session's key and
        encoding. duration_ms: planning time in milliseconds. messages: message events in
        the log. replaces, tokens_before, tokens_after, tokens_saved: when an event is
        planned, the uuids it replaces (count), the prompt tokens before and after it and
        their difference.
        reselected: ``True`` when the newest summary had its tiers already and the event
            only changes which one replay shows (``--tier``, or another window).
        tier_texts: the tier texts (for the store; not in JSON).
    """

    summary: str | None
    tiers: dict[str, int] | None
    selected_tier: str | None
    reason: str | None
    session_key: str
    tokenizer: str
    duration_ms: int
    messages: int
    replaces: int | None = dataclasses.field(default=None, metadata={"omit_none": True})
    tokens_before: int | None = dataclasses.field(default=None, metadata={"omit_none": True})
    tokens_after: int | None = dataclasses.field(default=None, metadata={"omit_none": True})
    tokens_saved: int | None = dataclasses.field(default=None, metadata={"omit_none": True})
    reselected: bool | None = dataclasses.field(default=None, metadata={"omit_none": True})
    tier_texts: dict[str, str] | None = internal(None)

    @property
    def targets_count(self) -> int:
        return 1 if self.replaces is not None else 0

    @property
    def tokens_saved_count(self) -> int:
        return self.tokens_saved or 0


class TiersLayer(EventLayer):
    """L0 / L1 / L2 of the newest summary, on a superseding SummaryEvent (``tiers``)."""

    name = "tiers"

    def plan(self, session: Session, options: TiersOptions) -> Plan[TiersReport]:
        """Plan the tiers event of a session (:func:`plan_tiers` with the session's counter
        and context window).

        Raises:
            UsageError: an unknown tier. SummaryFormatError: a model rewrite was invalid.
        """
        started = time.monotonic()
        summarizer = None
        if options.model:
            from compactctl.layers.summary import CompactOptions, make_summarizer

            summarizer = make_summarizer(
                CompactOptions(model=options.model, redact=options.redact), session.meta.model
            )
        events = session.events
        event, found = plan_tiers(
            events,
            counter=session.counter,
            timestamp=self.now(),
            tier=options.tier,
            context_window=session.meta.context_window,
            summarizer=summarizer,
            redact=options.redact,
            view=session.effective(),
        )
        report = TiersReport(
            summary=found["summary"],
            tiers=found["tiers"],
            selected_tier=found["selectedTier"],
            reason=found["reason"],
            session_key=session.meta.key,
            tokenizer=session.counter.encoding_name,
            duration_ms=int((time.monotonic() - started) * 1000),
            messages=session.messages,
        )
        if event is None:
            return Plan([], report)
        report.replaces = len(event.replaces)
        report.tokens_before = session.prompt_estimate()
        report.tokens_after = session.extended([event]).prompt_estimate()
        report.tokens_saved = report.tokens_before - report.tokens_after
        report.tier_texts = event.tiers
        report.reselected = bool(found.get("reselected")) or None
        return Plan([event], report)
