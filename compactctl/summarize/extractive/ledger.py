"""The facts of a span: the ledger of files, commands and errors, and the rest.

The ledger is what a summary keeps in full, never sampled away: every file read or changed,
every command with its outcome, every error. The other facts (decisions, tasks, current
work) are shortened to the budget when rendered.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

from compactctl.summarize.extractive.prose import (
    backticked,
    join_sentences,
    norm,
    split_sentences,
)
from compactctl.text import clip

__all__ = [
    "TEST_IDS_PER_ERROR",
    "CommandEntry",
    "Decision",
    "ErrorEntry",
    "Facts",
    "FileEntry",
    "Stats",
    "dedupe_decisions",
]

#: At most this many failing test ids are listed for one error.
TEST_IDS_PER_ERROR = 5


@dataclass
class FileEntry:
    """A file of the ledger and what was done to it: action -> times (``read``, ``edited``,
    ``written``, ``created``, ``deleted``, ``moved``, ``tested``, ``ran``, ``searched``; with
    `` (failed)`` when the call failed)."""

    path: str
    actions: dict[str, int] = field(default_factory=dict)
    changes: list[str] = field(default_factory=list)
    """What the edits did, in words (``added def x``, ``renamed class A -> B``, ``moved
    here from a.py``), each once, oldest first (issue 15 point 3)."""

    def add(self, action: str, count: int = 1) -> None:
        """Count ``action`` ``count`` more times."""
        self.actions[action] = self.actions.get(action, 0) + count

    def changed(self, changes: list[str]) -> None:
        """Record ``changes`` (see :attr:`changes`), each once."""
        self.changes.extend(c for c in changes if c not in self.changes)

    @property
    def modified(self) -> bool:
        """Whether the file was changed (edited, written, created, deleted or moved)."""
        return any(a in ("edited", "written", "created", "deleted", "moved") for a in self.actions)

    def line(self, with_actions: bool = True) -> str:
        """The ledger line: the path in backticks, then ``— edited ×2, read`` and what the
        edits did, ``; added def x, removed def y`` (the newest 8 changes; no actions: the
        path alone)."""
        if not with_actions or not self.actions:
            return backticked(self.path)
        parts = [a if n == 1 else f"{a} ×{n}" for a, n in self.actions.items()]
        line = f"{backticked(self.path)} — {', '.join(parts)}"
        return line + ("; " + ", ".join(self.changes[-8:]) if self.changes else "")


_FAILING_OUTCOME = ("failed", "exit ", "no result", "output shows", "error")
"""How the outcome of a run that did not pass starts (:attr:`CommandEntry.outcome`)."""
_FAILED_COUNTS_RE = re.compile(r"\b\d+ (?:failed|errors?)\b")


@dataclass
class CommandEntry:
    """A command of the ledger (its :func:`~compactctl.summarize.extractive.tools.command_text`),
    how many times it ran and the outcome of its last run, only what its result says:
    ``ok`` (exit code 0), ``failed`` (``isError``), ``exit N``, ``no result``, the first
    error line its output shows when no exit code says how it ended (``output shows ...``;
    ``error: ...`` in a summary written before it), or
    nothing (``""``: nothing says how it ended), with pytest's counts after (or alone)."""

    command: str
    runs: int = 0
    outcome: str = ""
    failed_before: bool = False
    failures: int = 0
    """How many of the runs failed (0: unknown when ``failed_before``, read back from an
    older summary)."""

    @property
    def passed(self) -> bool:
        """Whether the last run did not fail as far as its result says: no failure, no
        error line, no failed test count (``ok``, ``7 passed``, or no outcome at all).

        >>> [CommandEntry("x", 1, o).passed for o in ("ok, 7 passed", "", "1 failed, 7 passed",
        ...                                        "output shows KeyError: 'a'", "exit 2")]
        [True, True, False, False, False]
        """
        outcome = self.outcome
        return not outcome.lower().startswith(_FAILING_OUTCOME) and not (
            _FAILED_COUNTS_RE.search(outcome)
        )

    @property
    def failing(self) -> bool:
        """Whether the last run's result says it failed: ``failed``, ``exit N``, or failed
        tests in its counts (``1 failed``: a format without ``isError`` nor an exit code,
        such as the OpenAI chat one, says so only there); an ``output shows ...`` is not a
        verdict, and neither is no outcome.

        >>> [CommandEntry("x", 1, o).failing for o in ("exit 2", "failed", "1 failed, 7 passed",
        ...                                         "output shows KeyError: 'a'", "", "ok")]
        [True, True, True, False, False, False]
        """
        outcome = self.outcome
        return outcome.startswith(("failed", "exit ")) or bool(_FAILED_COUNTS_RE.search(outcome))

    @property
    def steady(self) -> bool:
        """Passed (:attr:`passed`) and never seen failing: a compact ledger lists it by name
        alone (``also ran, never failed: ...``)."""
        return self.passed and not self.failed_before

    def line(self, with_outcome: bool = True) -> str:
        """The ledger line, the command's current state (issue 15 point 3): ``ran``, the
        command in backticks, then ``×3 — ok, 7 passed; 2 of 3 runs failed`` (the last
        run's outcome and pytest counts, then how many runs failed)."""
        head = f"ran {backticked(self.command)}" + (f" ×{self.runs}" if self.runs > 1 else "")
        if not with_outcome or not self.outcome:
            return head
        tail = self.outcome
        if self.failures and self.runs > 1:
            tail += f"; {self.failures} of {self.runs} runs failed"
        elif self.failed_before:
            tail += "; earlier runs failed"
        return f"{head} — {tail}"


@dataclass
class ErrorEntry:
    """An error of the ledger: a failed tool result (``found`` False), or error lines seen in
    the output of a tool that did not fail (``found`` True, never unresolved). ``raw`` is the
    ledger line of an error read back from a prior summary (its parts are then unknown)."""

    source: str
    lines: list[str]
    tests: list[str] = field(default_factory=list)
    counts: str = ""
    exit_code: int | None = None
    command: str = ""
    tool_key: str = ""
    found: bool = False
    resolved: bool = False
    repeats: int = 1
    followup: str = ""
    raw: str = ""
    frames: list[str] = field(default_factory=list)
    """The function names and code lines of its traceback's frames (identifiers seen in
    errors; :func:`~compactctl.summarize.extractive.failures.traceback_frames`)."""

    def ledger(self) -> str:
        """The ledger line: source, exit code, repeats, error lines, failing tests, counts,
        and whether it was resolved later."""
        if self.raw:
            return self.raw
        lines = " | ".join(self.lines)
        if self.found:
            return f"seen in the output of {self.source}: {lines}"
        code = f" (exit {self.exit_code})" if self.exit_code not in (None, 0) else ""
        text = f"{self.source} failed{code}" + (f" ×{self.repeats}" if self.repeats > 1 else "")
        text += f": {lines}"
        if self.tests:
            more = len(self.tests) - TEST_IDS_PER_ERROR
            shown = ", ".join(self.tests[:TEST_IDS_PER_ERROR]) + (
                f", +{more} more" if more > 0 else ""
            )
            text += f" [{shown}]"
        if self.counts:
            text += f" ({self.counts})"
        return text + ("; resolved later" if self.resolved else "; unresolved")

    def short(self) -> str:
        """The ledger line of a resolved error (or one seen in a passing output) in one
        line: its source, repeats and first error line (a prior one: its line as it was)."""
        if self.raw:
            return self.raw
        first = self.lines[0] if self.lines else ""
        if self.found:
            return f"seen in the output of {self.source}: {first}"
        times = f" ×{self.repeats}" if self.repeats > 1 else ""
        return f"{self.source} failed{times}: {first}; resolved later"

    def bullet(self, followup_cap: int) -> str:
        """:meth:`ledger`, then what the assistant said next, cut to ``followup_cap``."""
        text = self.ledger()
        if followup_cap > 0 and self.followup:
            text += " → then: " + clip(self.followup, followup_cap)
        return text


@dataclass
class Decision:
    """A decision sentence (with its reason); ``rank`` is
    :func:`~compactctl.summarize.extractive.intent.decision_rank`, ``order`` its place in the
    span."""

    text: str
    rank: int
    order: int

    def clipped(self, cap: int, floor: int = 200) -> str:
        """The decision sentence (up to ``max(cap, floor)`` characters), then as much of its
        reason as fits in ``cap``."""
        sentences = split_sentences(self.text) or [self.text]
        first = clip(sentences[0], max(cap, floor))
        room = cap - len(first) - 1
        rest = join_sentences(sentences[1:])
        if rest and room >= 30:
            return join_sentences([first, clip(rest, room)])
        return first


@dataclass
class Stats:
    """Counts for the ``<analysis>`` block: messages per role, calls per tool, turn ids,
    failed tool results, earlier summaries skipped, user-role messages the user did not
    type (``injected``: notifications, reminders, hook output)."""

    roles: Counter[str] = field(default_factory=Counter)
    tools: Counter[str] = field(default_factory=Counter)
    turns: list[int] = field(default_factory=list)
    failed_results: int = 0
    skipped_summaries: int = 0
    injected: int = 0


@dataclass
class Facts:
    """Everything the summary is made of: the user's request and constraints, the ledger
    (files, commands, errors), decisions, done and pending tasks, the current work.

    ``primary`` holds the first request (one text); ``latest_request`` the newest request
    the user typed, with its turn label in ``latest_label`` (``"T7"``); ``next_step`` only a
    next step stated after that request (an older one is stale, issue 15 point 1)."""

    primary: list[str] = field(default_factory=list)
    latest_request: str = ""
    latest_label: str = ""
    constraints: list[str] = field(default_factory=list)
    user_messages: list[tuple[str, str]] = field(default_factory=list)
    concepts: list[str] = field(default_factory=list)
    files: dict[str, FileEntry] = field(default_factory=dict)
    commands: dict[str, CommandEntry] = field(default_factory=dict)
    errors: list[ErrorEntry] = field(default_factory=list)
    decisions: list[Decision] = field(default_factory=list)
    done: list[str] = field(default_factory=list)
    pending: list[str] = field(default_factory=list)
    problem: list[str] = field(default_factory=list)
    current: list[str] = field(default_factory=list)
    last_message: str = ""
    next_step: str = ""
    stats: Stats = field(default_factory=Stats)
    prior_merged: str = ""
    later_ok: list[str] = field(default_factory=list)
    """The commands (their :func:`~compactctl.summarize.extractive.tools.command_text`) that
    ran without failing in the messages kept after the span, in order: they settle a prior
    summary's failures as the span's own runs do."""
    instructions: dict[str, str] = field(default_factory=dict)
    """Instruction files (AGENTS.md, CLAUDE.md ...), injected or read through a tool: their
    name -> their text, verbatim (issue 15 point 9); the newest text of a name wins."""

    def file(self, path: str) -> FileEntry:
        """The entry of ``path`` (quotes and blanks around it removed), made on first use."""
        path = path.strip().strip("'\"")
        if path not in self.files:
            self.files[path] = FileEntry(path)
        return self.files[path]


def dedupe_decisions(decisions: list[Decision]) -> list[Decision]:
    """The decisions without repeats (same words, letter case and punctuation aside)."""
    seen: set[str] = set()
    out = []
    for decision in decisions:
        key = norm(decision.text)
        if key and key not in seen:
            seen.add(key)
            out.append(decision)
    return out
