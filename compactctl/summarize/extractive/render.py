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
from compactctl.summarize.extractive.intent import (
    DEFER_RE,
    PENDING_RE,
    shorten_user,
    without_label,
)
from compactctl.summarize.extractive.ledger import Decision, Facts, FileEntry
from compactctl.summarize.extractive.prose import (
    backticked,
    dedupe_exact,
    inline,
    join_sentences,
    ledger_line,
    norm,
    one_line,
    same_task,
    split_sentences,
)
from compactctl.summarize.summary_format import (
    DISPLAY_SECTIONS,
    SECTIONS,
    TaskState,
    render_display,
    render_sections,
    render_task_state,
    truncate_at_bullet,
)
from compactctl.text import FENCE_RE, clip

__all__ = [
    "CONSTRAINT_PREFIX",
    "DONE_PREFIX",
    "FOCUS_PREFIX",
    "INSTRUCTIONS_MAX_CHARS",
    "INSTRUCTIONS_PREFIX",
    "LATEST_PREFIX",
    "NONE_BULLET",
    "SEEN_PREFIX",
    "instruction_bullets",
    "latest_line",
    "read_instruction_bullet",
    "render_as_sections",
    "render_as_task_state",
]

#: The placeholder bullet of an empty section.
NONE_BULLET = "None."
#: The prefix of a user constraint under Primary Request.
CONSTRAINT_PREFIX = "Constraint: "
#: The prefix of the focus a request asked for (``instructions``) under Primary Request.
FOCUS_PREFIX = "Focus for this summary: "
#: The prefix of the latest request under Primary Request (then its turn label and ``: ``).
LATEST_PREFIX = "Latest request"
#: The prefix of a done item under Problem Solving.
DONE_PREFIX = "Done: "


#: The prefix of an instruction file's bullet under Primary Request (then its name and
#: :data:`INSTRUCTIONS_LABEL`, then its text on the next lines).
INSTRUCTIONS_PREFIX = "Instructions from "
INSTRUCTIONS_LABEL = " (verbatim):"
#: The characters of instruction-file text a summary copies, all files together (about
#: 1,200 tokens, under a third of the default 4,000-token summary budget); a text past its
#: share is cut at a line end and says how many characters were not copied.
INSTRUCTIONS_MAX_CHARS = 4000


def instruction_bullets(facts: Facts) -> list[str]:
    """One bullet per instruction file of ``facts``: ``Instructions from NAME (verbatim):``
    and its text, every line indented two spaces (so no line of it reads as a heading or a
    bullet of the summary), within :data:`INSTRUCTIONS_MAX_CHARS` in all (the files in the
    order they were seen, each cut at a line end to what is left, with a note)."""
    out = []
    left = INSTRUCTIONS_MAX_CHARS
    for name, body in facts.instructions.items():
        text = body
        if len(text) > left:
            cut = text.rfind("\n", 0, max(left, 0))
            kept = text[: cut if cut > 0 else max(left, 0)].rstrip()
            text = kept + f"\n[{len(body) - len(kept)} more characters of {name} not copied]"
        left -= len(text)
        lines = text.split("\n")
        if sum(1 for line in lines if FENCE_RE.match(line)) % 2:
            lines.append("```")  # an unclosed fence would swallow the sections after it
        out.append(
            INSTRUCTIONS_PREFIX
            + name
            + INSTRUCTIONS_LABEL
            + "\n"
            + "\n".join("  " + x for x in lines)
        )
    return out


def read_instruction_bullet(item: str) -> tuple[str, str] | None:
    """``(name, text)`` of a bullet of :func:`instruction_bullets` read back, else None."""
    head, _, body = item.partition("\n")
    if not (head.startswith(INSTRUCTIONS_PREFIX) and head.endswith(INSTRUCTIONS_LABEL)):
        return None
    name = head[len(INSTRUCTIONS_PREFIX) : -len(INSTRUCTIONS_LABEL)]
    return name, "\n".join(x.removeprefix("  ") for x in body.split("\n"))


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
    ledger: int = 0
    """How far the ledger is compressed (:data:`LEDGER_STEPS`; 0: in full)."""


def _level(
    user_head: int, prose: int, followup: int, concepts: int, problems: int, done: int,
    decisions: int, current: int, pending: int, *, current_items: int = 3,
    user_constraints: bool = True, outcomes: bool = True, file_actions: bool = True,
    full_analysis: bool = True,
) -> _Detail:  # fmt: skip
    """One row of :data:`_DETAILS`: the fields of :class:`_Detail` (caps in characters,
    counts), the caps and counts positional in the table's order."""
    return _Detail(
        user_head=user_head, user_constraints=user_constraints, prose_cap=prose,
        followup_cap=followup, concepts=concepts, problem_items=problems, done_items=done,
        decision_items=decisions, current_cap=current, current_items=current_items,
        pending_cap=pending, outcomes=outcomes, file_actions=file_actions,
        full_analysis=full_analysis,
    )  # fmt: skip


# fmt: off
#: Levels of detail, richest first; the first that fits the budget is used. When none fits,
#: the last level is used with only as many of the newest user messages as fit. Every level
#: keeps the ledger in full: file paths, commands and error lines, and also the user
#: constraints and the pending tasks (their first 100 characters).
_DETAILS: tuple[_Detail, ...] = (
    #      user  prose followup concepts problems done decisions current pending
    _level(200,  300,  200,     15,      10,      50,  12,       600,    200),
    _level(200,  240,  160,     12,      8,       50,  10,       400,    200),
    _level(150,  200,  120,     10,      6,       50,  8,        300,    200),
    _level(100,  160,  80,      8,       4,       8,   6,        240,    160),
    _level(60,   120,  0,       6,       2,       6,   5,        160,    160),
    _level(0,    100,  0,       4,       0,       4,   3,        120,    120, outcomes=False),
    _level(0,    80,   0,       0,       0,       0,   1,        80,     100, outcomes=False,
           user_constraints=False, current_items=1, file_actions=False, full_analysis=False),
)
# fmt: on


#: The prefix of the one bullet that lists the files only read (ledger compressed).
READ_ONLY_PREFIX = "read only: "
#: The prefix of the one bullet that lists the commands that never failed (compressed).
RAN_OK_PREFIX = "also ran, never failed: "
#: The prefix of the one bullet that stands for errors fixed later (compressed).
FIXED_PREFIX = "fixed later: "
#: The prefix of the one bullet that stands for the error lines seen in the outputs of
#: tools that did not fail (compressed): neither failures nor fixed.
SEEN_PREFIX = "seen in passing outputs: "

LEDGER_STEPS = (
    "in full (each later step also lists fewer user messages: 20, 12, 8, 4)",
    "a resolved error (or one seen in a passing output) in one line: its first error line",
    "the files only read in one bullet",
    "the commands that never failed in one bullet",
    "resolved errors in one bullet, error lines seen in passing outputs in another: their "
    "first error lines, without sources",
    "the one-bullet lists cut to their newest 30 items",
)
"""The compression of the ledger, in the order it is applied once no level of
:data:`_DETAILS` fits (issue 15 point 4: the ledger is prioritised and compressed before
anything is cut). What is never compressed: constraints, decisions stated explicitly, the
first and latest request, pending tasks, the next step, unresolved errors and the files
changed."""

_LIST_CAP = 30
#: The newest user messages listed at each step of :data:`LEDGER_STEPS` (their
#: constraints stay under Primary Request, the first and latest request too).
_USERS_KEPT = (-1, 20, 12, 8, 4, 4)


def _listed(prefix: str, items: list[str], cap: bool) -> list[str]:
    """One bullet listing ``items`` (the newest ``_LIST_CAP`` when ``cap``), or none."""
    if not items:
        return []
    if cap and len(items) > _LIST_CAP:
        more = len(items) - _LIST_CAP
        items = items[-_LIST_CAP:] + [f"(+{more} earlier)"]
    return [prefix + ", ".join(items)]


def _file_bullets(facts: Facts, detail: _Detail) -> list[str]:
    files = _ordered_files(facts)
    if detail.ledger < 2:
        return [f.line(detail.file_actions) for f in files]
    changed = [f.line(detail.file_actions) for f in files if f.modified]
    read = [backticked(f.path) for f in files if not f.modified]
    return changed + _listed(READ_ONLY_PREFIX, read, detail.ledger >= 5)


def _command_bullets(facts: Facts, detail: _Detail) -> list[str]:
    commands = list(facts.commands.values())
    if detail.ledger < 3:
        return [c.line(detail.outcomes) for c in commands]
    # steady: passed and never failed, a predicate of the entry's fields, so that "not steady"
    # is what ``c not in steady`` (dataclass equality) was, without a list search per command
    is_steady = [c.steady for c in commands]
    steady = [c for c, s in zip(commands, is_steady, strict=True) if s]
    kept = [c.line(detail.outcomes) for c, s in zip(commands, is_steady, strict=True) if not s]
    names = [backticked(c.command) + (f" ×{c.runs}" if c.runs > 1 else "") for c in steady]
    return kept + _listed(RAN_OK_PREFIX, names, detail.ledger >= 5)


def _error_bullets(facts: Facts, detail: _Detail) -> list[str]:
    if detail.ledger < 1:
        return [e.bullet(detail.followup_cap) for e in facts.errors]
    out: list[str] = []
    fixed: list[str] = []
    seen: list[str] = []
    for error in facts.errors:
        if not error.resolved and not error.found:
            out.append(error.bullet(detail.followup_cap))
        elif detail.ledger < 4:
            out.append(error.short())
        else:  # an error seen in a passing output was never fixed: listed on its own
            first = error.lines[0] if error.lines else error.raw
            (seen if error.found else fixed).append(backticked(clip(first, 200)))
    cap = detail.ledger >= 5
    return (
        out
        + _listed(FIXED_PREFIX, dedupe_exact(fixed), cap)
        + _listed(SEEN_PREFIX, dedupe_exact(seen), cap)
    )


def _ordered_files(facts: Facts) -> list[FileEntry]:
    files = list(facts.files.values())
    return [f for f in files if f.modified] + [f for f in files if not f.modified]


def _top_decisions(facts: Facts, count: int) -> list[Decision]:
    """Every decision stated explicitly (rank 3: "Decision: ...", "we decided"), then the
    best ranked others up to ``count`` in all, in their order (issue 15 point 3)."""
    explicit = [d for d in facts.decisions if d.rank >= 3]
    others = sorted((d for d in facts.decisions if d.rank < 3), key=lambda d: (-d.rank, d.order))[
        : max(0, count - len(explicit))
    ]
    return sorted(explicit + others, key=lambda d: d.order)


def _decision_text(decision: Decision, cap: int) -> str:
    """An explicit decision verbatim (to the ledger line limit); another one clipped."""
    if decision.rank >= 3:
        return ledger_line(decision.text)
    return decision.clipped(cap)


def latest_line(facts: Facts, head: int = 200) -> str:
    """``Latest request (T7): <the request, shortened to about head chars>``, or "" when
    the latest request is the first one (or unknown)."""
    if not facts.latest_request or (
        facts.primary and norm(facts.primary[0]) == norm(facts.latest_request)
    ):
        return ""
    label = f" ({facts.latest_label})" if facts.latest_label else ""
    return f"{LATEST_PREFIX}{label}: " + shorten_user(facts.latest_request, head, False)


def _next_step(facts: Facts) -> str:
    """The next step: the one stated after the latest request, else that request, else an
    open task that is not deferred (deferred work is pending, never next; issue 15)."""
    if facts.next_step:
        return facts.next_step
    now = [s for s in split_sentences(facts.latest_request) if not DEFER_RE.search(s)]
    if now:
        label = f" ({facts.latest_label})" if facts.latest_label else ""
        return f"continue the latest request{label}: " + clip(inline(join_sentences(now)), 200)
    ready = [p for p in facts.pending if not DEFER_RE.search(p)]
    if ready:
        return "(from the pending tasks) " + ready[0]
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


def _sections(
    facts: Facts,
    detail: _Detail,
    request: SummaryRequest,
    shortened: dict[tuple[str, int, bool], str] | None = None,
) -> dict[str, list[str]]:
    """The bullets of each section at ``detail``. ``shortened`` maps ``(text, head,
    constraints)`` to :func:`shorten_user` of it, for the levels of one rendering: each
    level and each step of the search for the user messages that fit shortens them again
    with one of a few heads (the 32 MB bench session: 6,720 calls, 747 messages)."""
    memo = {} if shortened is None else shortened
    prose = detail.prose_cap
    primary = [
        clip(shorten_user(p, max(detail.user_head, 120), constraints=False), max(prose, 100))
        for p in facts.primary
    ]
    latest = latest_line(facts, max(detail.user_head, 120))
    if latest:
        primary.append(clip(latest, max(prose, 100) + 40))
    if request.instructions.strip():
        primary.append(FOCUS_PREFIX + clip(one_line(request.instructions), max(prose, 100)))
    # a pinned constraint is copied as the user wrote it: "Constraints: Keep ..." must not
    # read "Constraint: Constraints: Keep ..."
    primary += [CONSTRAINT_PREFIX + without_label(c) for c in facts.constraints]
    primary += instruction_bullets(facts)
    problem = _command_bullets(facts, detail)
    problem += [
        DONE_PREFIX + clip(inline(d), detail.pending_cap) for d in facts.done[: detail.done_items]
    ]
    if detail.problem_items:
        problem += [clip(p, prose) for p in facts.problem[-detail.problem_items :]]
    user_last = detail.user_last
    if detail.ledger:
        cap = _USERS_KEPT[min(detail.ledger, len(_USERS_KEPT) - 1)]
        user_last = cap if user_last < 0 else min(user_last, cap)
    kept = facts.user_messages
    if 0 <= user_last < len(kept):
        kept = kept[len(kept) - user_last :]  # only these are shortened (and listed)
    users = []
    for label, text in kept:
        key = (text, detail.user_head, detail.user_constraints)
        short = memo.get(key)
        if short is None:
            short = memo[key] = shorten_user(*key)
        users.append((f"{label}: " if label else "") + short)
    if len(kept) < len(facts.user_messages):
        omitted = len(facts.user_messages) - len(kept)
        users = [
            f"({omitted} earlier user message(s) left out for the budget; their "
            "constraints are under Primary Request)",
            *users,
        ]
    sections = {
        "Primary Request": primary,
        "Key Technical Concepts": facts.concepts[: detail.concepts],
        "Files and Code Sections": _file_bullets(facts, detail),
        "Errors and Fixes": _error_bullets(facts, detail),
        "Problem Solving": problem,
        "Decision Rationale": [
            _decision_text(d, prose) for d in _top_decisions(facts, detail.decision_items)
        ],
        "All User Messages": users,
        "Pending Tasks": [clip(inline(p), detail.pending_cap) for p in facts.pending],
        "Current Work": [
            clip(c, detail.current_cap) for c in facts.current[-detail.current_items :]
        ],
        "Optional Next Step": [clip(inline(_next_step(facts)), detail.pending_cap)],
    }
    return {name: sections[name] or [NONE_BULLET] for name in SECTIONS}


#: The levels tried in turn by :func:`render_as_sections`: the first four of
#: :data:`_DETAILS`, then the ledger compressed step by step (:data:`LEDGER_STEPS`) before
#: concepts, decisions and notes are cut further (the later levels of :data:`_DETAILS`,
#: with the ledger compressed as far as it goes).
_TRIES: tuple[_Detail, ...] = (
    *_DETAILS[:4],
    *(replace(_DETAILS[3], ledger=step) for step in range(1, len(LEDGER_STEPS))),
    *(replace(detail, ledger=len(LEDGER_STEPS) - 1) for detail in _DETAILS[4:]),
)


def _fits(text: str, request: SummaryRequest) -> bool:
    """Whether ``text`` is within the request's budgets: ``max_chars`` characters and, when
    set, ``max_tokens`` tokens (:func:`summary_tokens`)."""
    if len(text) > request.max_chars:
        return False
    return request.max_tokens is None or summary_tokens(text) <= request.max_tokens


def summary_tokens(text: str) -> int:
    """A conservative token count of a summary, in tokens: characters / 3.3, CJK characters
    one each. Summaries are dense (paths, backticks, ids): cl100k and o200k measure about 3.7
    characters a token on them, so this errs on the large side.

    >>> summary_tokens("a" * 33), summary_tokens("你好")
    (10, 2)
    """
    wide = sum(1 for ch in text if ord(ch) > 0x2E7F)
    return wide + (len(text) - wide) * 10 // 33


def render_as_sections(facts: Facts, request: SummaryRequest) -> tuple[str, tuple[str, ...]]:
    """The ``sections`` text of ``facts`` within ``request.max_chars`` characters (and
    ``request.max_tokens`` tokens), and the warnings: the richest level of :data:`_DETAILS`
    that fits, the ledger compressed step by step before prose is cut further
    (:data:`_TRIES`); else as many of the newest user messages as fit; else the compressed
    ledger is kept over ``max_chars`` while within ``max_tokens`` (a warning says so); else
    the text is cut at bullet boundaries to ``max_tokens`` and a warning says so."""
    text = ""
    shortened: dict[tuple[str, int, bool], str] = {}  # the user messages, once per head
    for detail in _TRIES:
        analysis = _analysis(facts, request, detail.full_analysis)
        text = render_sections(_sections(facts, detail, request, shortened), analysis)
        if _fits(text, request):
            return text, ()
    # Then keep only as many of the newest user messages as fit.
    low, high = 0, len(facts.user_messages)
    while low < high:  # the most messages that fit; the length grows with the count
        middle = (low + high + 1) // 2
        candidate = _sections(facts, replace(detail, user_last=middle), request, shortened)
        if _fits(render_sections(candidate, analysis), request):
            low = middle
        else:
            high = middle - 1
    last = replace(detail, user_last=low)
    text = render_sections(_sections(facts, last, request, shortened), analysis)
    if _fits(text, request):
        return text, ()
    if request.max_tokens is None or summary_tokens(text) <= request.max_tokens:
        # the compressed ledger wins over a character budget, never over the token budget
        return text, (
            f"the compressed ledger (file paths, commands, error lines, constraints, pending "
            f"tasks) needs {len(text)} characters, over the budget of {request.max_chars}; "
            "it is kept",
        )
    limit = request.max_chars
    if request.max_tokens is not None:
        while limit > 0 and summary_tokens(text[:limit]) > request.max_tokens:
            limit = limit * 9 // 10
    size = len(text)
    text = truncate_at_bullet(text, limit)
    return text, (
        f"the compressed summary needed {size} characters, over the budget; "
        f"cut at bullet boundaries to {len(text)}",
    )


#: (ledger step of :data:`LEDGER_STEPS`, progress items, open items) of each level of the
#: task state, tried in turn until the whole answer fits ``max_tokens`` (issue 15 point 4).
_STATE_LEVELS = ((0, -1, -1), (3, -1, -1), (5, -1, 30), (5, 60, 20), (5, 30, 12), (5, 12, 8))


def _keep_open(items: list[str], count: int) -> list[str]:
    """At most ``count`` of the open ``items``, in order: work put off or left open in so
    many words ("not now, but before the release", "still need to") first, then the
    newest of the others (plan steps)."""
    stated = [i for i, t in enumerate(items) if DEFER_RE.search(t) or PENDING_RE.search(t)]
    others = [i for i in range(len(items)) if i not in set(stated)]
    chosen = set(stated[-count:]) if count else set()
    room = count - len(chosen)
    chosen |= set(others[len(others) - room :] if room > 0 else [])
    return [t for i, t in enumerate(items) if i in chosen]


def _task_state(facts: Facts, level: int = 0) -> TaskState:
    """The task state of ``facts`` at ``level`` of :data:`_STATE_LEVELS` (0: every fact in
    full; later levels compress the ledger and keep the newest progress and open items)."""
    step, progress_kept, open_kept = _STATE_LEVELS[level]
    progress = [inline(d) for d in facts.done]
    if step == 0:
        progress += ["found: " + e.ledger() for e in facts.errors if e.found]
        progress += ["fixed: " + e.ledger() for e in facts.errors if e.resolved and not e.found]
    else:
        progress += ["fixed: " + e.short() for e in facts.errors if e.resolved and not e.found]
    progress = dedupe_exact(progress)
    open_items = dedupe_exact(inline(p) for p in facts.pending)
    if progress_kept >= 0:
        progress = progress[-progress_kept:]
    if open_kept >= 0:
        open_items = _keep_open(open_items, open_kept)
    goal = shorten_user(facts.primary[0], 300, constraints=False) if facts.primary else ""
    latest = latest_line(facts, 300)
    if latest:
        goal = (goal + "\n" if goal else "") + latest
    detail = replace(_DETAILS[0], ledger=step)
    return TaskState(
        goal=goal,
        progress=progress,
        open_items=open_items,
        next_step=inline(_next_step(facts)),
        blockers=[e.ledger() for e in facts.errors if not e.resolved and not e.found],
        key_artifacts=_file_bullets(facts, detail) + _command_bullets(facts, detail),
        decisions=[d.text for d in _top_decisions(facts, len(facts.decisions))],
        # without a label, as under Primary Request: a pinned constraint is verbatim
        user_constraints=[without_label(c) for c in facts.constraints] + instruction_bullets(facts),
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
    latest = latest_line(facts, cap)
    in_progress = clip_all(
        ([latest] if latest else [])
        + ["next: " + state["next_step"]]
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
        # a constraint is never cut ("... must stay exactly as it is…" is another rule);
        # an instruction file's text is (it says so), and the state keeps it whole
        "constraints": [one_line(without_label(c)) for c in facts.constraints if c.strip()]
        + clip_all(instruction_bullets(facts), constraint_cap)
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
    """The ``task-state`` answer of ``facts``, its task state and the warnings. The display
    summary is kept within ``request.max_chars`` characters by shorter bullets, then fewer
    (constraints last), then :func:`~compactctl.summarize.summary_format.truncate_at_bullet`;
    the whole answer, JSON included, within ``request.max_tokens`` tokens by the levels of
    :data:`_STATE_LEVELS` (the ledger compressed, then the newest progress and open items;
    constraints, decisions, blockers and the requests are never dropped)."""
    warnings: tuple[str, ...] = ()
    text = ""
    for level in range(len(_STATE_LEVELS)):
        state = _task_state(facts, level)
        display, warnings = _fit_display(facts, state, request.max_chars)
        text = render_task_state(state, display)
        if request.max_tokens is None or summary_tokens(text) <= request.max_tokens:
            return text, state, warnings
    return (
        text,
        state,
        (
            *warnings,
            f"the task state needs about {summary_tokens(text)} tokens, over the budget of "
            f"{request.max_tokens}: constraints, decisions and blockers are never dropped",
        ),
    )


def _fit_display(facts: Facts, state: TaskState, max_chars: int) -> tuple[str, tuple[str, ...]]:
    """The display summary of ``state`` within ``max_chars`` characters, and warnings."""
    display = ""
    for cap, constraint_cap in _DISPLAY_CAPS:
        sections = _display(facts, state, cap, constraint_cap)
        display = render_display(sections)
        if len(display) <= max_chars:
            break
    while len(display) > max_chars:
        name = next((n for n in _DISPLAY_DROP_ORDER if len(sections[n]) > 1), None)
        if name is None:
            break
        sections[name].pop()
        display = render_display(sections)
    warnings: tuple[str, ...] = ()
    if len(display) > max_chars:
        display = truncate_at_bullet(display, max_chars)
        if len(display) > max_chars:
            warnings = (
                f"the display summary skeleton needs {len(display)} characters, "
                f"over the budget of {max_chars}",
            )
    return display, warnings
