"""Rendering the facts in either summary format, within the character budget.

``sections``: the text is rendered at decreasing levels of detail (:data:`_DETAILS`) until
it fits: first fewer concepts and problem-solving notes, then shorter user-message bodies,
decisions and follow-ups, then user messages cut to their constraint sentences, at last
only the newest user messages that fit (their constraints stay under Primary Request). The
ledger is never shortened: file paths, commands and error lines (each cut only past
:data:`~compactctl.summarize.extractive.prose.LEDGER_LINE_MAX`), user constraints and
pending tasks (to 100 characters). When the ledger alone is longer than the budget, the
ledger wins: the text is longer than ``max_chars`` and a warning says so.

``task-state``: the ``task_state`` JSON keeps every fact in full; the display summary is
kept within ``max_chars`` (NeoCode's compact protocol: 1200 by default) by shortening
bullets (constraints least), then dropping trailing bullets (``done`` first,
``constraints`` last, each section keeps one), at last by
:func:`~compactctl.summarize.summary_format.truncate_at_bullet`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

from compactctl.summarize import SummaryRequest
from compactctl.summarize.extractive.intent import shorten_user
from compactctl.summarize.extractive.ledger import Decision, Facts, FileEntry
from compactctl.summarize.extractive.prose import dedupe_exact, inline, one_line, same_task
from compactctl.summarize.summary_format import (
    DISPLAY_SECTIONS,
    SECTIONS,
    TaskState,
    render_display,
    render_sections,
    render_task_state,
    truncate_at_bullet,
)
from compactctl.text import clip

__all__ = [
    "CONSTRAINT_PREFIX",
    "DONE_PREFIX",
    "FOCUS_PREFIX",
    "NONE_BULLET",
    "render_as_sections",
    "render_as_task_state",
]

#: The placeholder bullet of an empty section.
NONE_BULLET = "None."
#: The prefix of a user constraint under Primary Request.
CONSTRAINT_PREFIX = "Constraint: "
#: The prefix of the focus a request asked for (``instructions``) under Primary Request.
FOCUS_PREFIX = "Focus for this summary: "
#: The prefix of a done item under Problem Solving.
DONE_PREFIX = "Done: "


@dataclass(frozen=True)
class _Detail:
    """One level of detail of the ``sections`` rendering (caps in characters; counts)."""

    user_head: int = 200
    """Characters of the opening sentences kept of each user message (0: constraints only)."""
    user_constraints: bool = True
    """Whether user messages keep their constraint sentences (also listed on their own)."""
    user_last: int = -1
    """-1 keeps every user message; N keeps the newest N and a note."""
    prose_cap: int = 300
    """Characters of a decision or problem-solving note."""
    followup_cap: int = 200
    """Characters of what the assistant said after an error (0: left out)."""
    concepts: int = 15
    """Key technical concepts listed."""
    problem_items: int = 10
    """Problem-solving notes listed (the newest)."""
    done_items: int = 50
    """Done items listed."""
    decision_items: int = 12
    """Decisions listed (the highest ranked, in their order)."""
    current_cap: int = 600
    """Characters of a current-work line."""
    current_items: int = 3
    """Current-work lines listed (the newest)."""
    pending_cap: int = 200
    """Characters of a pending task, a done item and the next step."""
    outcomes: bool = True
    """Whether commands show their outcome."""
    file_actions: bool = True
    """Whether files show what was done to them."""
    full_analysis: bool = True
    """Whether the ``<analysis>`` block has every count, or the span line alone."""


#: Levels of detail, richest first; the first that fits the budget is used. When none fits,
#: the last level is used with only as many of the newest user messages as fit. Every level
#: keeps the ledger in full: file paths, commands and error lines, and also the user
#: constraints and the pending tasks (their first 100 characters).
_DETAILS: tuple[_Detail, ...] = (
    _Detail(),
    _Detail(
        prose_cap=240,
        followup_cap=160,
        concepts=12,
        problem_items=8,
        decision_items=10,
        current_cap=400,
    ),
    _Detail(
        user_head=150,
        prose_cap=200,
        followup_cap=120,
        concepts=10,
        problem_items=6,
        decision_items=8,
        current_cap=300,
    ),
    _Detail(
        user_head=100,
        prose_cap=160,
        followup_cap=80,
        concepts=8,
        problem_items=4,
        done_items=8,
        decision_items=6,
        current_cap=240,
        pending_cap=160,
    ),
    _Detail(
        user_head=60,
        prose_cap=120,
        followup_cap=0,
        concepts=6,
        problem_items=2,
        done_items=6,
        decision_items=5,
        current_cap=160,
        pending_cap=160,
    ),
    _Detail(
        user_head=0,
        prose_cap=100,
        followup_cap=0,
        concepts=4,
        problem_items=0,
        done_items=4,
        decision_items=3,
        current_cap=120,
        pending_cap=120,
        outcomes=False,
    ),
    _Detail(
        user_head=0,
        user_constraints=False,
        prose_cap=80,
        followup_cap=0,
        concepts=0,
        problem_items=0,
        done_items=0,
        decision_items=1,
        current_cap=80,
        current_items=1,
        pending_cap=100,
        outcomes=False,
        file_actions=False,
        full_analysis=False,
    ),
)


def _ordered_files(facts: Facts) -> list[FileEntry]:
    files = list(facts.files.values())
    return [f for f in files if f.modified] + [f for f in files if not f.modified]


def _top_decisions(facts: Facts, count: int) -> list[Decision]:
    chosen = sorted(facts.decisions, key=lambda d: (-d.rank, d.order))[:count]
    return sorted(chosen, key=lambda d: d.order)


def _next_step(facts: Facts) -> str:
    if facts.next_step:
        return facts.next_step
    if facts.pending:
        return "(from the pending tasks) " + facts.pending[0]
    unresolved = [e for e in facts.errors if not e.resolved and not e.found]
    if unresolved:
        return "(unresolved error) " + unresolved[0].ledger()
    return "No next step was stated."


def _analysis(facts: Facts, request: SummaryRequest, full: bool = True) -> str:
    stats = facts.stats
    roles = stats.roles
    turns = sorted(set(stats.turns))
    span = f"{len(turns)} turn(s) ({turns[0]}-{turns[-1]})" if turns else "no numbered turns"
    tools = ", ".join(
        f"{n} {c}" for n, c in sorted(stats.tools.items(), key=lambda kv: (-kv[1], kv[0]))
    )
    lines = [
        "Extractive summary by compactctl (no model call; facts copied from the transcript).",
        f"Span: {sum(roles.values())} messages ({roles['user']} user, {roles['assistant']} "
        f"assistant, {roles['tool']} tool) in {span}.",
        f"Tool calls: {sum(stats.tools.values())}"
        + (f" ({tools})" if tools else "")
        + f"; failed tool results: {stats.failed_results}.",
        f"Ledger: {len(facts.files)} file(s), {len(facts.commands)} command(s), "
        f"{len(facts.errors)} error(s); {len(facts.pending)} pending task(s).",
    ]
    if not full:
        lines = lines[1:2]
    if facts.prior_merged:
        lines.append("Prior summary merged as state (ledger united, current work replaced).")
    if stats.skipped_summaries:
        lines.append(f"Skipped {stats.skipped_summaries} earlier summary message(s).")
    if request.instructions.strip():
        lines.append("Focus requested: " + one_line(request.instructions))
    return "\n".join(lines)


def _sections(facts: Facts, detail: _Detail, request: SummaryRequest) -> dict[str, list[str]]:
    prose = detail.prose_cap
    primary = [
        clip(shorten_user(p, max(detail.user_head, 120), constraints=False), max(prose, 100))
        for p in facts.primary
    ]
    if request.instructions.strip():
        primary.append(FOCUS_PREFIX + clip(one_line(request.instructions), max(prose, 100)))
    primary += [CONSTRAINT_PREFIX + c for c in facts.constraints]
    problem = [c.line(detail.outcomes) for c in facts.commands.values()]
    problem += [
        DONE_PREFIX + clip(inline(d), detail.pending_cap) for d in facts.done[: detail.done_items]
    ]
    if detail.problem_items:
        problem += [clip(p, prose) for p in facts.problem[-detail.problem_items :]]
    users = [
        (f"{label}: " if label else "")
        + shorten_user(text, detail.user_head, detail.user_constraints)
        for label, text in facts.user_messages
    ]
    if 0 <= detail.user_last < len(users):
        omitted = len(users) - detail.user_last
        users = [
            f"({omitted} earlier user message(s) left out for the budget; their "
            "constraints are under Primary Request)"
        ] + users[len(users) - detail.user_last :]
    sections = {
        "Primary Request": primary,
        "Key Technical Concepts": facts.concepts[: detail.concepts],
        "Files and Code Sections": [f.line(detail.file_actions) for f in _ordered_files(facts)],
        "Errors and Fixes": [e.bullet(detail.followup_cap) for e in facts.errors],
        "Problem Solving": problem,
        "Decision Rationale": [
            d.clipped(prose) for d in _top_decisions(facts, detail.decision_items)
        ],
        "All User Messages": users,
        "Pending Tasks": [clip(inline(p), detail.pending_cap) for p in facts.pending],
        "Current Work": [
            clip(c, detail.current_cap) for c in facts.current[-detail.current_items :]
        ],
        "Optional Next Step": [clip(inline(_next_step(facts)), detail.pending_cap)],
    }
    return {name: sections[name] or [NONE_BULLET] for name in SECTIONS}


def render_as_sections(facts: Facts, request: SummaryRequest) -> tuple[str, tuple[str, ...]]:
    """The ``sections`` text of ``facts`` within ``request.max_chars`` characters, and the
    warnings: the richest level of :data:`_DETAILS` that fits; else as many of the newest
    user messages as fit; else the ledger alone is over the budget, kept in full, and a
    warning says so."""
    text = ""
    for detail in _DETAILS:
        analysis = _analysis(facts, request, detail.full_analysis)
        text = render_sections(_sections(facts, detail, request), analysis)
        if len(text) <= request.max_chars:
            return text, ()
    # Last resort before the ledger: keep only as many of the newest user messages as fit.
    detail = _DETAILS[-1]
    analysis = _analysis(facts, request, detail.full_analysis)
    low, high = 0, len(facts.user_messages)
    while low < high:  # the most messages that fit; the length grows with the count
        middle = (low + high + 1) // 2
        candidate = _sections(facts, replace(detail, user_last=middle), request)
        if len(render_sections(candidate, analysis)) <= request.max_chars:
            low = middle
        else:
            high = middle - 1
    text = render_sections(_sections(facts, replace(detail, user_last=low), request), analysis)
    if len(text) <= request.max_chars:
        return text, ()
    return text, (
        f"the ledger (file paths, commands, error lines, constraints, pending tasks) "
        f"needs {len(text)} characters, over the budget of {request.max_chars}; "
        "it is kept in full",
    )


def _task_state(facts: Facts) -> TaskState:
    progress = [inline(d) for d in facts.done]
    progress += ["found: " + e.ledger() for e in facts.errors if e.found]
    progress += ["fixed: " + e.ledger() for e in facts.errors if e.resolved and not e.found]
    goal = shorten_user(facts.primary[0], 300, constraints=False) if facts.primary else ""
    return TaskState(
        goal=goal,
        progress=dedupe_exact(progress),
        open_items=dedupe_exact(inline(p) for p in facts.pending),
        next_step=inline(_next_step(facts)),
        blockers=[e.ledger() for e in facts.errors if not e.resolved and not e.found],
        key_artifacts=[f.line() for f in _ordered_files(facts)]
        + [c.line() for c in facts.commands.values()],
        decisions=[d.text for d in _top_decisions(facts, len(facts.decisions))],
        user_constraints=list(facts.constraints),
    )


def _display(facts: Facts, state: TaskState, cap: int, constraint_cap: int) -> dict[str, list[str]]:
    """The display summary (NeoCode's compact protocol), each bullet cut to ``cap``
    characters (constraints to ``constraint_cap``). The most important bullets of each
    section come first, so that :func:`truncate_at_bullet`, which drops trailing bullets,
    drops the least important."""

    def clip_all(items: Iterable[str], limit: int = cap) -> list[str]:
        return [clip(one_line(i), limit) for i in items if i.strip()]

    done = clip_all(inline(d) for d in reversed(facts.done))  # newest first
    done += clip_all(
        "fixed: " + " | ".join(e.lines)
        for e in facts.errors
        if e.resolved and not e.found and e.lines
    )
    done += clip_all("found: " + " | ".join(e.lines) for e in facts.errors if e.found and e.lines)
    in_progress = clip_all(
        ["next: " + state["next_step"]]
        + [o for o in state["open_items"] if not same_task(o, state["next_step"])]
        + ["blocked: " + b for b in state["blockers"]]
    )
    ranked = sorted(_top_decisions(facts, 8), key=lambda d: (-d.rank, d.order))
    decisions = clip_all(d.clipped(cap, floor=0) for d in ranked)
    changes = clip_all(f.line() for f in _ordered_files(facts) if f.modified)
    sections = {
        "done": done or ["nothing completed yet"],
        "in_progress": in_progress,
        "decisions": decisions or ["no decisions recorded"],
        "code_changes": changes or ["no files changed"],
        "constraints": clip_all(state["user_constraints"], constraint_cap)
        or ["no user constraints stated"],
    }
    return {name: sections[name] for name in DISPLAY_SECTIONS}


#: Display sections in the order they give up their trailing bullets when over budget:
#: constraints last (NeoCode's compact protocol keeps user constraints above all).
_DISPLAY_DROP_ORDER = ("done", "decisions", "code_changes", "in_progress", "constraints")

#: (bullet cap, constraint cap) pairs tried in turn for the display summary, in characters.
_DISPLAY_CAPS = ((400, 400), (240, 240), (160, 200), (120, 200), (90, 160), (60, 160))


def render_as_task_state(
    facts: Facts, request: SummaryRequest
) -> tuple[str, TaskState, tuple[str, ...]]:
    """The ``task-state`` answer of ``facts``, its task state and the warnings: the state
    keeps every fact; the display summary is kept within ``request.max_chars`` characters
    by shorter bullets, then fewer (constraints last), then
    :func:`~compactctl.summarize.summary_format.truncate_at_bullet`."""
    state = _task_state(facts)
    display = ""
    for cap, constraint_cap in _DISPLAY_CAPS:
        sections = _display(facts, state, cap, constraint_cap)
        display = render_display(sections)
        if len(display) <= request.max_chars:
            break
    while len(display) > request.max_chars:
        name = next((n for n in _DISPLAY_DROP_ORDER if len(sections[n]) > 1), None)
        if name is None:
            break
        sections[name].pop()
        display = render_display(sections)
    warnings: tuple[str, ...] = ()
    if len(display) > request.max_chars:
        display = truncate_at_bullet(display, request.max_chars)
        if len(display) > request.max_chars:
            warnings = (
                f"the display summary skeleton needs {len(display)} characters, "
                f"over the budget of {request.max_chars}",
            )
    return render_task_state(state, display), state, warnings
