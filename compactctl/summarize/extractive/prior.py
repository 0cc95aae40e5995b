"""Prior state: an earlier summary read back into facts and merged with the new span.

``request.prior`` (a ``sections`` text or a ``task-state`` answer, from any summarizer) is
parsed back into facts (:func:`facts_from_prior`; an agent's own compaction summary, e.g.
Claude Code's, by its headings) and merged (:func:`merge`): ledger entries, constraints,
user messages, decisions and done items are united (prior first; action and run counts
added); a prior failure is marked resolved when the new span, or the messages kept after
it, run the same (or a broader) command successfully; pending tasks the new span marks done
are dropped; current work and next step are replaced by the new span's. A prior text
without headings is kept whole as one note.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from compactctl.summarize import SummaryResult
from compactctl.summarize.extractive.intent import decision_rank
from compactctl.summarize.extractive.ledger import (
    CommandEntry,
    Decision,
    ErrorEntry,
    Facts,
    dedupe_decisions,
)
from compactctl.summarize.extractive.prose import (
    dedupe,
    dedupe_exact,
    distinct_tasks,
    inline,
    same_task,
)
from compactctl.summarize.extractive.render import (
    CONSTRAINT_PREFIX,
    DONE_PREFIX,
    FIXED_PREFIX,
    FOCUS_PREFIX,
    LATEST_PREFIX,
    NONE_BULLET,
    RAN_OK_PREFIX,
    READ_ONLY_PREFIX,
    SEEN_PREFIX,
    read_instruction_bullet,
)
from compactctl.summarize.extractive.tools import resolves
from compactctl.summarize.summary_format import (
    SummaryFormatError,
    parse_sections,
    parse_task_state,
)

__all__ = ["facts_from_prior", "merge"]

_FILE_LINE_RE = re.compile(r"^(`+) ?(?P<path>.+?) ?\1(?: — (?P<actions>.*))?$")
_COMMAND_LINE_RE = re.compile(
    r"^ran (`+) ?(?P<cmd>.+?) ?\1(?: ×(?P<runs>\d+))?"
    r"(?: — (?P<outcome>.*))?$"
)
_FAILED_RUNS_RE = re.compile(r"; (?P<failed>\d+) of \d+ runs failed$")
_ERROR_SOURCE_RE = re.compile(r"^(`+) ?(?P<cmd>.+?) ?\1 failed")
_ACTION_RE = re.compile(r"^(?P<action>.+?)(?: ×(?P<count>\d+))?$")
_LABEL_RE = re.compile(r"^(?P<label>T\d+): (?P<text>.*)$", re.DOTALL)
_LATEST_RE = re.compile(
    "^" + LATEST_PREFIX + r"(?: \((?P<label>[^)]*)\))?: (?P<text>.*)$", re.DOTALL
)


def _prior_instructions(facts: Facts, item: str) -> bool:
    """Read an ``Instructions from NAME (verbatim):`` bullet into ``facts``; False for any
    other bullet."""
    found = read_instruction_bullet(item)
    if found is not None:
        facts.instructions[found[0]] = found[1]
    return found is not None


def _prior_latest(facts: Facts, item: str) -> bool:
    """Read a ``Latest request (T7): ...`` line into ``facts``; False for any other line."""
    match = _LATEST_RE.match(item)
    if match is None:
        return False
    facts.latest_label = match.group("label") or ""
    facts.latest_request = match.group("text")
    return True


_LISTED_RE = re.compile(r"(`+) ?(?P<item>.+?) ?\1(?: ×(?P<runs>\d+))?(?:, |$)")


def _listed(line: str) -> list[tuple[str, int]]:
    """The backticked items of a compressed one-bullet list, with their ``×N``."""
    return [(m.group("item"), int(m.group("runs") or 1)) for m in _LISTED_RE.finditer(line)]


def _prior_file(facts: Facts, line: str) -> None:
    if line.startswith(READ_ONLY_PREFIX):
        for path, _ in _listed(line.removeprefix(READ_ONLY_PREFIX)):
            facts.file(path).add("read")
        return
    match = _FILE_LINE_RE.match(line)
    if not match:
        facts.file(line)
        return
    record = facts.file(match.group("path"))
    actions, _, changes = (match.group("actions") or "").partition("; ")
    record.changed([c for c in changes.split(", ") if c])
    for part in actions.split(", "):
        action = _ACTION_RE.match(part.strip())
        if action and part.strip():
            record.add(action.group("action"), int(action.group("count") or 1))


def _prior_command(facts: Facts, line: str) -> bool:
    if line.startswith(RAN_OK_PREFIX):
        for command, runs in _listed(line.removeprefix(RAN_OK_PREFIX)):
            # "never failed" is all the line says: not that a run reported exit 0 ("ok")
            facts.commands[command] = CommandEntry(command, runs, "")
        return True
    match = _COMMAND_LINE_RE.match(line)
    if not match:
        return False
    outcome = match.group("outcome") or ""
    failed_before = outcome.endswith("; earlier runs failed")
    outcome = outcome.removesuffix("; earlier runs failed")
    counted = _FAILED_RUNS_RE.search(outcome)
    failures = int(counted.group("failed")) if counted else 0
    outcome = outcome[: counted.start()] if counted else outcome
    facts.commands[match.group("cmd")] = CommandEntry(
        match.group("cmd"),
        int(match.group("runs") or 1),
        outcome,
        failed_before or failures > 0,
        failures,
    )
    return True


def _prior_error(line: str, resolved: bool | None = None) -> ErrorEntry:
    """An error bullet read back: resolved only when it says so (``; resolved later``, or
    ``resolved`` given); a line seen in a passing output is neither failed nor fixed."""
    text = line.split(" → then: ")[0]
    source = _ERROR_SOURCE_RE.match(text)
    found = text.startswith("seen in the output of")
    if resolved is None:
        resolved = text.endswith("; resolved later")
    return ErrorEntry(
        source="",
        lines=[],
        raw=text,
        resolved=resolved and not found,
        found=found,
        command=source.group("cmd") if source else "",
    )


def _facts_from_sections(text: str) -> Facts:
    parsed = parse_sections(text).sections
    facts = Facts()
    for item in parsed.get("Primary Request", []):
        if item.startswith(CONSTRAINT_PREFIX):
            facts.constraints.append(item.removeprefix(CONSTRAINT_PREFIX))
        elif _prior_instructions(facts, item) or _prior_latest(facts, item):
            continue
        elif not item.startswith(FOCUS_PREFIX) and item != NONE_BULLET:
            facts.primary.append(item)
    facts.concepts = [c for c in parsed.get("Key Technical Concepts", []) if c != NONE_BULLET]
    for item in parsed.get("Files and Code Sections", []):
        if item != NONE_BULLET:
            _prior_file(facts, item)
    for item in parsed.get("Errors and Fixes", []):
        if item.startswith(FIXED_PREFIX):
            for line, _ in _listed(item.removeprefix(FIXED_PREFIX)):
                facts.errors.append(ErrorEntry(source="", lines=[], raw=line, resolved=True))
        elif item.startswith(SEEN_PREFIX):
            for line, _ in _listed(item.removeprefix(SEEN_PREFIX)):
                facts.errors.append(ErrorEntry(source="", lines=[], raw=line, found=True))
        elif item != NONE_BULLET:
            facts.errors.append(_prior_error(item))
    for item in parsed.get("Problem Solving", []):
        if item == NONE_BULLET or _prior_command(facts, item):
            continue
        if item.startswith(DONE_PREFIX):
            facts.done.append(item.removeprefix(DONE_PREFIX))
        else:
            facts.problem.append(item)
    facts.decisions = [
        Decision(d, decision_rank(d) or 2, i)
        for i, d in enumerate(parsed.get("Decision Rationale", []))
        if d != NONE_BULLET
    ]
    for item in parsed.get("All User Messages", []):
        match = _LABEL_RE.match(item)
        facts.user_messages.append(
            (match.group("label"), match.group("text")) if match else ("", item)
        )
    facts.pending = [p for p in parsed.get("Pending Tasks", []) if p != NONE_BULLET]
    facts.current = [c for c in parsed.get("Current Work", []) if c != NONE_BULLET]
    steps = [s for s in parsed.get("Optional Next Step", []) if s != NONE_BULLET]
    facts.next_step = steps[0] if steps else ""
    return facts


def _facts_from_task_state(state: Mapping[str, Any]) -> Facts:
    facts = Facts()

    def strings(key: str) -> list[str]:
        value = state.get(key)
        return (
            [v for v in value if isinstance(v, str) and v.strip()]
            if isinstance(value, list)
            else []
        )

    goal = state.get("goal")
    if isinstance(goal, str) and goal.strip():
        first, _, latest = goal.partition("\n" + LATEST_PREFIX)
        if latest:
            _prior_latest(facts, LATEST_PREFIX + latest)
        if first.strip():
            facts.primary.append(first)
    for item in strings("progress"):
        if item.startswith(("fixed: ", "found: ")):
            facts.errors.append(_prior_error(item.split(": ", 1)[1], item.startswith("fixed")))
        else:
            facts.done.append(item)
    facts.pending = strings("open_items")
    step = state.get("next_step")
    facts.next_step = step if isinstance(step, str) else ""
    facts.errors.extend(_prior_error(b, resolved=False) for b in strings("blockers"))
    for item in strings("key_artifacts"):
        if not _prior_command(facts, item):
            _prior_file(facts, item)
    facts.decisions = [
        Decision(d, decision_rank(d) or 2, i) for i, d in enumerate(strings("decisions"))
    ]
    facts.constraints = [
        c for c in strings("user_constraints") if not _prior_instructions(facts, c)
    ]
    return facts


def facts_from_prior(prior: SummaryResult) -> Facts:
    """Parse an earlier summary (``sections`` or ``task-state``, from any summarizer) back
    into facts; one that does not parse becomes one note under Problem Solving."""
    if prior.task_state is not None:
        return _facts_from_task_state(prior.task_state)
    try:
        if prior.format == "task-state":
            return _facts_from_task_state(parse_task_state(prior.text).task_state)
        return _facts_from_sections(prior.text)
    except SummaryFormatError:
        return _facts_from_agent_summary(prior)


_AGENT_FRAMING_END = (
    "If you need specific details from before compaction",
    "Continue the conversation from where it left off",
    "Please continue the conversation from where we left it off",
    "The messages after this summary are the most recent messages",
)
"""Where the instructions Claude Code appends to its compaction summary start (its
continuation message, seen in 2.1.328's ``/compact`` in ``fixtures/real/``): not summary."""

_SYSTEM_REMINDER_RE = re.compile(r"<system-reminder>.*?</system-reminder>\s*", re.DOTALL)
_AGENT_HEADING_RE = re.compile(
    r"^(?:\d+\.|#{1,4})\s*\**(?P<name>[A-Za-z][^:*\n]{0,60}?)\**\s*:\s*(?P<rest>.*)$"
)
_AGENT_BULLET_RE = re.compile(r"^(?:[-*+]|\d+\.)\s+")


def _agent_summary_body(text: str) -> str:
    """The summary an agent's own compaction wrote, without its framing: Claude Code's
    continuation preamble (everything through the line ``Summary:``), ``<system-reminder>``
    blocks and the instructions after the summary (:data:`_AGENT_FRAMING_END`).

    >>> _agent_summary_body("This session is being continued...\\n\\nSummary:\\n1. Done: x"
    ...                     "\\n\\nContinue the conversation from where it left off.")
    '1. Done: x'
    """
    body = _SYSTEM_REMINDER_RE.sub("", text)
    lines = body.split("\n")
    start = next((i + 1 for i, line in enumerate(lines) if line.strip() == "Summary:"), 0)
    body = "\n".join(lines[start:])
    cut = min((i for m in _AGENT_FRAMING_END if (i := body.find(m)) >= 0), default=len(body))
    return body[:cut].strip()


def _facts_from_agent_summary(prior: SummaryResult) -> Facts:
    """An earlier summary not in compactctl's formats, read as the summary it is: the one an
    agent's own compaction wrote (Claude Code's ``isCompactSummary`` text, ``model``
    ``claude-code``) or a model's free text. Without its framing
    (:func:`_agent_summary_body`), its numbered or ``#`` headings (``1. Primary Request and
    Intent:``, the sections Claude Code's compaction asks for, as compactctl's ``sections``
    do) go to the matching facts: concepts, pending tasks, current work, next step, user
    messages (as prose; never into the ledger of files, commands and errors, whose entries
    it does not state in that form); any other heading's items (its primary request and
    intent, which the first request in the transcript replaces under Primary Request, and
    the files and errors it lists) are Problem Solving notes named by their heading.
    A text without headings is one note, ``earlier summary (by MODEL): ...``. It used to be
    one note ``earlier summary (unparsed): `` + its first 600 characters, framing included.
    """
    facts = Facts()
    body = _agent_summary_body(prior.text)
    if not body:
        return facts
    items: list[tuple[str, str]] = []  # (heading, item)
    heading = ""
    for raw in body.split("\n"):
        line = raw.strip()
        if not line:
            continue
        found = _AGENT_HEADING_RE.match(line) if raw[:1] not in " \t" else None
        if found is not None:
            heading = found.group("name").strip()
            if found.group("rest").strip():
                items.append((heading, found.group("rest").strip()))
            continue
        if _AGENT_BULLET_RE.match(line) or not items or items[-1][0] != heading:
            items.append((heading, _AGENT_BULLET_RE.sub("", line)))
        else:
            items[-1] = (heading, items[-1][1] + " " + line)
    if not any(name for name, _ in items):
        facts.problem.append(f"earlier summary (by {prior.model}): " + inline(body))
        return facts
    for name, item in items:
        key = name.lower()
        if "concept" in key:
            facts.concepts.append(item)
        elif "pending" in key:
            facts.pending.append(item)
        elif "current work" in key:
            facts.current.append(item)
        elif "next step" in key:
            facts.next_step = facts.next_step or item
        elif "user message" in key:
            facts.user_messages.append(("", item))
        elif "problem solving" in key:
            facts.problem.append(item)
        else:
            facts.problem.append(f"{name}: {item}" if name else item)
    return facts


def _merge_errors(prior: list[ErrorEntry], new: list[ErrorEntry]) -> list[ErrorEntry]:
    """Prior errors, then the new ones that are not already there: a new error whose every
    line is in an earlier entry is folded into it (marking it unresolved again when the new
    one is unresolved)."""
    merged: list[ErrorEntry] = []
    seen: set[str] = set()
    for error in prior:
        if error.raw not in seen:
            seen.add(error.raw)
            merged.append(error)
    for error in new:
        earlier = next(
            (e for e in merged if e.raw and error.lines and all(x in e.raw for x in error.lines)),
            None,
        )
        if earlier is None:
            merged.append(error)
        elif not error.resolved and not error.found and earlier.resolved:
            earlier.resolved = False
            earlier.raw = earlier.raw.removesuffix("; resolved later") + "; unresolved"
    return merged


def merge(prior: Facts, new: Facts) -> Facts:
    """Prior state first, then the new span; the rules are in the module docstring."""
    merged = Facts(stats=new.stats)
    merged.primary = prior.primary or new.primary
    if new.latest_request:
        merged.latest_request, merged.latest_label = new.latest_request, new.latest_label
    else:
        merged.latest_request, merged.latest_label = prior.latest_request, prior.latest_label
    merged.constraints = dedupe(prior.constraints + new.constraints, similar=True)
    merged.user_messages = prior.user_messages + new.user_messages
    merged.concepts = dedupe_exact(prior.concepts + new.concepts)
    for source in (prior, new):
        for path, record in source.files.items():
            target = merged.file(path)
            for action, count in record.actions.items():
                target.add(action, count)
            target.changed(record.changes)
        for text, command in source.commands.items():
            old = merged.commands.get(text)
            if old is None:
                merged.commands[text] = CommandEntry(
                    text, command.runs, command.outcome, command.failed_before, command.failures
                )
            else:
                old.failures += command.failures
                old.failed_before = (
                    old.failed_before
                    or command.failed_before
                    or old.outcome.startswith(("failed", "exit"))
                )
                old.runs += command.runs
                old.outcome = command.outcome
    for error in prior.errors:
        if (
            not error.resolved
            and not error.found
            and error.command
            and any(
                resolves(text, error.command)
                for text in [t for t, c in new.commands.items() if c.passed] + new.later_ok
            )
        ):
            error.resolved = True
            error.raw = error.raw.removesuffix("; unresolved") + "; resolved later"
    merged.errors = _merge_errors(prior.errors, new.errors)
    offset = len(prior.decisions)
    merged.decisions = dedupe_decisions(
        prior.decisions + [Decision(d.text, d.rank, d.order + offset) for d in new.decisions]
    )
    merged.done = dedupe(prior.done + new.done)
    still_open = [p for p in prior.pending if not any(same_task(p, d) for d in new.done)]
    merged.pending = distinct_tasks(still_open + new.pending)
    merged.problem = prior.problem + new.problem
    merged.current = new.current or prior.current
    merged.last_message = new.last_message
    merged.next_step = new.next_step or ("" if new.current else prior.next_step)
    merged.instructions = {**prior.instructions, **new.instructions}
    merged.prior_merged = "yes"
    return merged
