"""Probes: the facts of a session that a compaction should keep, read from its original messages.

:func:`extract_probes` reads every ``message`` event of a log in file order (messages a
summary replaced included: the originals stay in the log; a summary message inserted by a
materialized file, ``summaryOf``, is never read as conversation) and returns one
:class:`Probe` per distinct fact, where it first appears (source line and turn):

========================  =================================================================
kind                      from
========================  =================================================================
``first_request``         the first message the user typed (its opening, up to
                          :data:`REQUEST_CHARS` chars)
``latest_request``        the last message the user typed, when it is not the first
``file_path``             path arguments of tool calls, files named by shell commands and
                          ``apply_patch`` headers
``command``               shell commands run (their first line)
``error``                 error lines of failed tool results (tracebacks, assertion,
                          compiler and test failures) and ``ERROR``/``FATAL`` log lines in
                          other outputs
``identifier``            ticket ids (``ABC-123``), failing test names, and the function,
                          class and variable names a user message spells (``snake_case``,
                          ``CamelCase``, backticked names)
``user_constraint``       the constraints of user messages the extractive summarizer lists
                          (:func:`~compactctl.summarize.extractive.intent.constraint_flags`:
                          "do not ...", "must ...", "keep ...", 不要, 必须, 保留 ...; not one
                          that refers back with nothing before it to say what it rules on),
                          split at ``, and`` and ``;`` and without their label
``decision``              the assistant's explicit decisions ("Decision: ...", "decided",
                          决定), without the label and the reason clause
``pending_task``          open plan items, unchecked ``- [ ]`` items, sentences that put
                          something off ("not now", "before the release", 不是现在) or
                          leave it open; an item later done is not pending; of two that
                          name the same task, the shorter words (at the earlier line
                          when they are in its text)
========================  =================================================================

"The user typed" is the summarizer's rule (issue 15, point 10):
:func:`~compactctl.summarize.extractive.intent.spoken_by_user`, so a user-role message that
Claude Code or Codex injected (a ``<task-notification>``, a ``<system-reminder>``, hook and
local-command output, ``isMeta``) is never a request, a constraint or a deferred task.

The parsing is the extractive summarizer's (:mod:`compactctl.summarize.extractive`): its
tool classification, shell-command and path parsing, failure detection, error lines,
constraint and decision rules and sentence splitting are imported, so a probe is what the
built-in summarizer looks for. Three rules are this module's own: a tool result that runs
something and ends with failure counts (``1 failed``, ``2 errors``) is a failure even
without ``isError`` (the OpenAI chat format has no such flag); exit codes and counts are
looked for near the ends of an output only (:data:`EXIT_CODE_SPAN`), and file reads, edits
and plans are never failures by their text; failing test names are also read from pytest's
``____ name ____`` headers.

Every probe text stands in its source message (:func:`occurs`, the rule the check uses): it
is a substring of the message's text, of a tool call's argument strings or of a list-form
command rendered by :func:`~compactctl.summarize.extractive.tools.shell_command` (labels and
clauses are cut, never rewritten; a file a command names with shell quoting that leaves no
such substring, ``"other"'x'.py``, is no probe; a text cut to its opening ends before a
character that is no word character), so an uncompacted log keeps every probe.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from compactctl.layers.text_rules.cjk import normalize_cjk_punct
from compactctl.model import Event, Message, is_real_user
from compactctl.summarize.extractive.failures import (
    error_lines,
    found_errors,
    holds_error_marker,
    reported_exit_code,
)
from compactctl.summarize.extractive.intent import (
    CHECKBOX_RE,
    DEFER_RE,
    DEFER_WORDS,
    EXPLICIT_DECISION_WORDS,
    PENDING_RE,
    PENDING_WORDS,
    constraint_flags,
    decision_rank,
    holds_word,
    long_enough,
    may_hold,
    spoken_by_user,
    states_constraint,
    without_label,
)
from compactctl.summarize.extractive.prose import norm, split_sentences
from compactctl.summarize.extractive.tools import (
    PATH_KEYS,
    PATH_LIST_KEYS,
    call_arguments,
    command_files,
    patch_files,
    pathlike,
    plan_items,
    shell_command,
    tool_kind,
)
from compactctl.text import folds_to_ascii

__all__ = [
    "CODE_KINDS",
    "KINDS",
    "PROBE_CHARS",
    "REQUEST_CHARS",
    "Probe",
    "extract_probes",
    "normalise",
    "occurs",
]

KINDS = (
    "first_request",
    "latest_request",
    "file_path",
    "command",
    "error",
    "identifier",
    "user_constraint",
    "decision",
    "pending_task",
)
"""Every probe kind, in report order. The kinds of the planted probes of
``fixtures/samples/*.probes.json`` are all here."""

REQUEST_CHARS = 200
"""A request probe is the opening of the user message, cut at a word boundary at or before
this many characters (the whole message when shorter)."""

PROBE_CHARS = 300
"""Any other probe text longer than this many characters is cut to its opening, at a word
boundary (a pathological line must not make a probe that only a verbatim copy keeps)."""


@dataclass(frozen=True, slots=True)
class Probe:
    """One fact a compaction should keep.

    Attributes:
        kind: one of :data:`KINDS`.
        text: the fact as it appears in the original (it :func:`occurs` in its source
            message, see the module docstring).
        line: the 1-based line of its source message in the file, where it first appears
            (``None`` for events built in memory).
        turn: that message's turn (``None`` when the log has no turns).
        source: that message's uuid, where the check looks first
            (:meth:`compactctl.evaluate.check.Context.match`); not compared.
    """

    kind: str
    text: str
    line: int | None
    turn: int | None
    source: str | None = field(default=None, compare=False, repr=False)


def normalise(text: str) -> str:
    """The comparison form of a text: case folded, every whitespace run one space, and
    full-width CJK punctuation in its ASCII form (``，。：（）`` as ``,.:()``).

    The punctuation is mapped by the ``rules`` layer's own ``cjk_punct`` rule
    (:func:`~compactctl.layers.text_rules.cjk.normalize_cjk_punct`, its one table), so a
    message that rule rewrote still holds the probes of the message as written. Only a
    text with a non-ASCII character is searched for that punctuation (``str.isascii`` is
    one flag test), and only a text holding some is translated.

    >>> normalise("  Do NOT\\n\\tadd  deps ")
    'do not add deps'
    >>> normalise("不要修改 harborlog.parser 的公共接口，计费服务（和导出服务）都在用它")
    '不要修改 harborlog.parser 的公共接口,计费服务(和导出服务)都在用它'
    """
    folded = " ".join(text.casefold().split())
    return folded if folded.isascii() else normalize_cjk_punct(folded)


CODE_KINDS = frozenset({"command", "file_path", "identifier"})
"""The kinds matched case-sensitively (:mod:`compactctl.evaluate.check`): a command, a path
or a name spelled in another case is another one (``make`` is not "Make sure")."""

_WORD_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")
"""The word characters of a boundary: ``[A-Za-z0-9_]``, ASCII only (CJK text next to a name
is no part of it)."""
_NAME_JOINERS = frozenset(".-")
"""Characters that make a longer name of a command or a path they touch: before it
(``x-a.py``, ``.a.py``), or after it when a word character follows (``a.py.bak``)."""
_NAME_KINDS = frozenset({"command", "file_path"})


def occurs(haystack: str, needle: str, kind: str) -> bool:
    """Whether ``needle`` occurs in ``haystack`` as a fact of ``kind`` stands: with no word
    character (:data:`_WORD_CHARS`) directly before or after it and, for a command or a
    file path, no ``.`` or ``-`` directly before it nor, followed by a word character,
    directly after it (``/`` is a boundary: ``src/a.py`` is in ``/home/u/src/a.py``). Case
    and whitespace are compared as given (the caller normalises both sides); an empty
    ``needle`` occurs nowhere.

    >>> [occurs(h, n, k) for h, n, k in [("see data.py", "a.py", "file_path"),
    ...  ("cat /home/u/src/a.py.", "src/a.py", "file_path"), ("the tools", "ls", "command"),
    ...  ("read a.py.bak", "a.py", "file_path"), ("修改了page_of函数", "page_of", "identifier"),
    ...  ("a book", "ok", "latest_request"), ("ok.", "ok", "latest_request")]]
    [False, True, False, False, True, False, True]
    """
    start = haystack.find(needle) if needle else -1
    if start < 0:
        return False
    word, names, size = _WORD_CHARS, kind in _NAME_KINDS, len(haystack)
    while start >= 0:
        end = start + len(needle)
        before = haystack[start - 1] if start else " "
        after = haystack[end] if end < size else " "
        if before not in word and after not in word:
            if not names:
                return True
            if before not in _NAME_JOINERS and not (
                after in _NAME_JOINERS and end + 1 < size and haystack[end + 1] in word
            ):
                return True
        start = haystack.find(needle, start + 1)
    return False


def _cut(text: str, limit: int) -> str:
    """``text`` stripped, and cut to at most ``limit`` chars at the last whitespace (or,
    when there is none in the second half, before the last character that is neither a
    word character nor a ``.`` or ``-``, so the cut never ends inside a word or a name:
    ``""`` when there is none); never adds an ellipsis, so the result stays a substring of
    ``text`` that :func:`occurs` in it.

    >>> _cut("fix the pager please", 12), _cut("see https://x.io/ab-cd/e.fgh", 20)
    ('fix the', 'see https://x.io')
    """
    text = text.strip()
    if len(text) <= limit:
        return text
    head = text[:limit]
    space = max(head.rfind(" "), head.rfind("\n"))
    if space > limit // 2:
        return head[:space].rstrip()
    at = limit
    while at > 0 and (text[at] in _WORD_CHARS or text[at] in _NAME_JOINERS):
        at -= 1
    return text[:at].rstrip()


_TICKET_RE = re.compile(r"(?<![\w-])[A-Z][A-Z0-9]{1,9}-\d{1,6}(?![\w-])")
_TICKET_HINT_RE = re.compile(r"-\d")
"""What every :data:`_TICKET_RE` match holds: a dash and a digit. Searched first (a literal
first character: ``re`` skips to each dash) where the ticket pattern is tried at every
position; measured on the assistant and user texts of the 20 MB ``make bench`` corpus that
hold a dash: 0.12 ms against 2.1 ms for the pattern alone."""
_NOT_TICKETS = frozenset({"UTF", "ISO", "SHA", "MD", "RFC", "GPT", "TLS", "SSL", "HTTP"})
_CODE_NAME_RE = re.compile(
    r"(?<![\w./-])(?:[A-Za-z_]\w*_\w*[A-Za-z0-9]|[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+"
    r"|[a-z]+[A-Z]\w*)(?![\w/-]|\.\w)"
)
_CODE_NAME_HINT_RE = re.compile(r"[a-z0-9][A-Z]")
"""What a text holds when :data:`_CODE_NAME_RE` matches in it, unless it holds a ``_``
(a ``snake_case`` name): a lower-case letter or a digit then a capital (``CamelCase``,
``camelCase``). Searched first (a one-character class, where the name pattern's lookbehind
is tried at every position): the user texts of the 200 MB ``make bench`` corpus, 116 of
2,089 with a name, took 8.1 ms against 22.1 ms for the pattern alone."""
_BACKTICKED_NAME_RE = re.compile(r"`([A-Za-z_][\w.]{2,60})(?:\(\))?`")
_PYTEST_HEADER_RE = re.compile(r"^_{3,} ([\w.\[\]-]+) _{3,}$", re.MULTILINE)
_DECISION_LABEL_RE = re.compile(
    r"^(?:(?:the |our |my )?decision|decided|we decided|决定|决策)\s*[:：]\s*", re.IGNORECASE
)
_REASON_RE = re.compile(r",\s+(?:so|because|since|which|as)\b.*$", re.DOTALL)
_CLAUSE_SPLIT_RE = re.compile(r",\s+and\s+|;\s*|；")
_TRAILING_RE = re.compile(r"[\s.。!！]+$")
_QUIET_KINDS = frozenset({"read", "edit", "write", "patch", "plan"})
"""Tool kinds whose output is file content or a confirmation: an ``ERROR`` in it is text,
not a failure (the extractive summarizer skips them the same way)."""


def _may_be_pending(text: str, lowered: str) -> bool:
    """``PENDING_RE.search(text)``, tried only when ``lowered`` holds one of
    ``PENDING_WORDS`` (or ``text`` a character that folds to ASCII)."""
    if not may_hold(lowered, PENDING_WORDS) and not folds_to_ascii(text):
        return False
    return PENDING_RE.search(text) is not None


def _log_level_lines(text: str) -> str:
    """The lines of ``text`` that hold ``ERROR``, ``FATAL`` or ``CRITICAL``, in order, joined
    by ``\\n``: for a text without a traceback, the only lines
    :func:`~compactctl.summarize.extractive.failures.found_errors` takes anything from, so it
    gives the same on them as on the whole text (found with ``str.find``: its own scan of a
    long log tests every line).

    >>> _log_level_lines("ok\\n12:00 ERROR db: gone\\nok\\nFATAL: disk\\n")
    '12:00 ERROR db: gone\\nFATAL: disk'
    """
    spans: set[tuple[int, int]] = set()
    for marker in ("ERROR", "FATAL", "CRITICAL"):
        at = text.find(marker)
        while at >= 0:
            end = text.find("\n", at)
            end = len(text) if end < 0 else end
            spans.add((text.rfind("\n", 0, at) + 1, end))
            at = text.find(marker, end)
    return "\n".join(text[start:end] for start, end in sorted(spans))


def _trimmed(text: str) -> str:
    """Trailing sentence punctuation and spaces removed."""
    return _TRAILING_RE.sub("", text)


EXIT_CODE_SPAN = 400
"""An exit code, or failure counts, are looked for in the first and the last this many
characters of a tool result (where runners print them: ``Exit code: N`` first, ``exit
status N`` and pytest's ``1 failed, 7 passed`` last), not in the middle of a large output."""


def _failed(message: Message, text: str, kind: str) -> bool:
    """Whether a tool result reports a failure: ``isError``; or, for a tool that runs
    something (not a file read, edit or plan: their output is content), a non-zero exit
    code or failure counts such as ``1 failed`` or ``2 errors`` near either end."""
    if message.is_error:
        return True
    if kind in _QUIET_KINDS:
        return False
    span = EXIT_CODE_SPAN
    ends = text if len(text) <= 2 * span else text[:span] + "\n" + text[-span:]
    return reported_exit_code(ends) not in (None, 0) or _counts_failures(ends[-span:])


def _counts_failures(tail: str) -> bool:
    """Whether ``tail`` says ``N failed``, ``N error`` or ``N errors`` (a test or lint run
    with failures), found with ``str.find``: a regex tried at every position of every
    tool output costs more than the rest of the extraction.

    >>> _counts_failures("== 1 failed, 7 passed in 1.4s =="), _counts_failures("no errors")
    (True, False)
    """
    for word in (" failed", " error"):
        at = tail.find(word)
        while at > 0:
            if tail[at - 1].isdigit():
                return True
            at = tail.find(word, at + 1)
    return False


Where = tuple[int | None, int | None, str | None]
"""A probe's line, turn and source uuid."""


class _Tasks:
    """Pending-task candidates, decided at the end of the log: the open items of the newest
    plan and of the newest checkbox list (each at the line it first appeared), then the
    sentences that put something off or leave it open; an item done anywhere (a completed
    plan step, a ``- [x]`` item) is not pending (the extractive summarizer's rules)."""

    def __init__(self) -> None:
        self.plan: list[str] = []
        self.boxes: list[str] = []
        self.sentences: list[Probe] = []
        self.done: list[str] = []
        self.seen: dict[str, Where] = {}

    def items(self, items: list[tuple[str, bool]], where: Where, *, plan: bool) -> None:
        """A plan or a checkbox list: it replaces the previous one of its sort."""
        open_items = []
        for text, finished in items:
            if finished:
                self.done.append(text)
            else:
                open_items.append(text)
                self.seen.setdefault(norm(text), where)
        if plan:
            self.plan = open_items
        else:
            self.boxes = open_items

    def pending(self) -> list[Probe]:
        """The pending tasks, each once (two that name the same task: the shorter words, at
        the earlier line when they stand in the earlier text, else at their own: a probe's
        line and source always hold its text)."""
        candidates = [Probe("pending_task", t, *self.seen[norm(t)]) for t in self.plan + self.boxes]
        candidates += self.sentences
        done = [k for k in (norm(d) for d in self.done) if k]
        out: list[tuple[str, Probe]] = []
        for task in candidates:
            key = norm(task.text)
            if not key or any(_same(key, d) for d in done):
                continue
            twin = next((i for i, (k, _) in enumerate(out) if _same(k, key)), None)
            if twin is None:
                out.append((key, task))
                continue
            kept = out[twin][1]
            first, second = sorted((kept, task), key=lambda p: p.line or 0)
            short = second if len(second.text) < len(first.text) else first
            # the earlier line only when its text holds the shorter words as they stand
            at = first if occurs(first.text, short.text, "pending_task") else short
            out[twin] = (norm(short.text), Probe("pending_task", short.text, at.line, at.turn,
                                                 at.source))  # fmt: skip
        return [p for _, p in out]


def _same(a: str, b: str) -> bool:
    """Whether two :func:`~compactctl.summarize.extractive.prose.norm` keys name the same
    task: equal, or the shorter (of 10 characters or more) inside the longer (the rule of
    the extractive summarizer's ``same_task``, on keys computed once)."""
    if a == b:
        return True
    short, long_ = (a, b) if len(a) <= len(b) else (b, a)
    return len(short) >= 10 and short in long_


class _Collector:
    """The one pass of :func:`extract_probes`: probes by ``(kind, normalised text)``, the
    first occurrence kept, and the pending tasks decided at the end (:class:`_Tasks`).

    A tool output read again (same tool kind, error flag and text) is not read again: every
    probe it gives is already kept. An assistant text read again only repeats what depends
    on where it is (its checkbox items and pending sentences, :meth:`prose`)."""

    def __init__(self) -> None:
        self.probes: dict[tuple[str, str], Probe] = {}
        self.seen: set[tuple[str, str]] = set()
        self.call_kinds: dict[str, str] = {}
        self.commands: set[str] = set()
        self.tasks = _Tasks()
        self.first: Message | None = None
        self.latest: Message | None = None
        self.current: Message | None = None
        self.fixed: Where | None = None  # set by finish() for the pending tasks
        self.outputs: set[tuple[str, bool, str]] = set()
        self.texts: dict[str, tuple[list[tuple[str, bool]] | None, list[str]]] = {}

    def add(self, kind: str, text: str, limit: int = PROBE_CHARS) -> None:
        if (kind, text) in self.seen:  # agents repeat themselves: most texts come again
            return
        self.seen.add((kind, text))
        cut = _cut(text, limit)
        key = normalise(cut)
        if len(key) >= 2 and (kind, key) not in self.probes:
            self.probes[(kind, key)] = Probe(kind, cut, *self.where)

    @property
    def where(self) -> Where:
        """The line, turn and uuid of the message read (built only when a probe or a task
        candidate needs them: most messages add neither)."""
        if self.fixed is not None:
            return self.fixed
        m = self.current
        return (None, None, None) if m is None else (m.line, m.turn, m.uuid)

    def message(self, m: Message) -> None:
        self.current = m
        role = m.data.get("role")
        if role == "user":
            if is_real_user(m.data) and spoken_by_user(m.data, m.text):
                self.user(m)
        elif role == "assistant":
            self.assistant(m)
        elif role == "tool":
            self.tool(m)

    # -- user messages

    def user(self, m: Message) -> None:
        text = m.text
        if not text.strip():
            return
        if self.first is None:
            self.first = m
        self.latest = m
        self.names(text, user=True)
        may_defer = holds_word(text, DEFER_WORDS)  # else no sentence of it can match
        sentences = split_sentences(text)
        # the summarizer's constraints (a deferral is never one: states_constraint)
        for sentence, listed in zip(sentences, constraint_flags(sentences), strict=True):
            if listed:
                self.constraint(without_label(sentence))  # not clipped: no ellipsis
            elif (
                may_defer
                and not sentence.endswith(("?", "？"))
                and DEFER_RE.search(sentence)
                and long_enough(sentence)
            ):
                self.tasks.sentences.append(Probe("pending_task", _trimmed(sentence), *self.where))

    def constraint(self, sentence: str) -> None:
        """One probe per clause that states a constraint (the sentence when none does)."""
        clauses = [c for c in _CLAUSE_SPLIT_RE.split(sentence) if states_constraint(c)]
        for clause in clauses or [sentence]:
            self.add("user_constraint", _trimmed(clause.strip()))

    def names(self, text: str, *, user: bool) -> None:
        """Ticket ids in any prose; code names only in what the user wrote."""
        for ticket in _TICKET_RE.findall(text) if _TICKET_HINT_RE.search(text) else ():
            if ticket.split("-", 1)[0] not in _NOT_TICKETS:
                self.add("identifier", ticket)
        if user:
            for name in _BACKTICKED_NAME_RE.findall(text):
                if not pathlike(name):
                    self.add("identifier", name)
            if "_" in text or _CODE_NAME_HINT_RE.search(text):
                for name in _CODE_NAME_RE.findall(text):
                    self.add("identifier", name)

    # -- assistant messages

    def assistant(self, m: Message) -> None:
        for call in m.tool_calls:
            self.call(call)
        text = m.text
        if not text.strip():
            return
        known = self.texts.get(text)
        if known is None:
            known = self.texts[text] = self.prose(text)
        marks, pending = known
        if marks is not None:
            self.tasks.items(marks, self.where, plan=False)
        for sentence in pending:
            self.tasks.sentences.append(Probe("pending_task", sentence, *self.where))

    def prose(self, text: str) -> tuple[list[tuple[str, bool]] | None, list[str]]:
        """An assistant text read once: its ticket ids and decisions added, and what a
        repeat of the same text must do again where it appears (agents repeat themselves):
        its checkbox items (``None``: no checkbox) and its pending sentences."""
        self.names(text, user=False)
        marks = None
        if "[" in text:
            boxes = [b for b in map(CHECKBOX_RE.match, text.split("\n")) if b]
            if boxes:
                marks = [(b.group("text"), b.group("mark") != " ") for b in boxes]
        pending: list[str] = []
        # a text holding no decision word (a sentence of decision rank 3 holds one) and no
        # pending word is not split into sentences: the regexes, tried at every position,
        # cost more than the rest of an assistant message's extraction
        lowered = text.lower()
        if not may_hold(lowered, EXPLICIT_DECISION_WORDS) and not _may_be_pending(text, lowered):
            return marks, pending
        for sentence in split_sentences(text):
            if decision_rank(sentence) == 3:
                decision = _REASON_RE.sub("", _DECISION_LABEL_RE.sub("", sentence))
                self.add("decision", _trimmed(decision))
            elif (
                PENDING_RE.search(sentence)
                and long_enough(sentence)
                and not CHECKBOX_RE.match(sentence)
            ):
                pending.append(_trimmed(sentence))
        return marks, pending

    def call(self, call: Mapping[str, Any]) -> None:
        name = str(call.get("name") or "")
        args = call.get("arguments", call.get("input"))
        if args.__class__ is not dict:  # a JSON string, or missing: parsed (never changed)
            args = call_arguments(call)
        kind = tool_kind(name)
        command = shell_command(args) if kind in ("shell", "other") else ""
        if command:
            kind = "shell"
            if command not in self.commands:  # a repeated command names the same files
                self.commands.add(command)
                self.add("command", command.strip().split("\n", 1)[0])
                for path, _ in command_files(command):
                    if occurs(command, path, "file_path"):  # not one shell quoting rewrote
                        self.add("file_path", path)
        elif kind == "plan":
            items = plan_items(args)
            if items is not None:
                self.tasks.items(items, self.where, plan=True)
        else:
            self.paths(kind, args)
        if isinstance(call.get("id"), str):
            self.call_kinds[call["id"]] = kind

    def paths(self, kind: str, args: Mapping[str, Any]) -> None:
        """File paths in a (non-shell) tool call's arguments and ``apply_patch`` bodies."""
        found = [v for v in map(args.get, PATH_KEYS) if v.__class__ is str]
        for value in map(args.get, PATH_LIST_KEYS):
            if value.__class__ is list:
                found += [v for v in value if isinstance(v, str)]
        for value in args.values():
            if value.__class__ is str and "*** Begin Patch" in value:
                found += [path for path, _ in patch_files(value)]
        for path in found:
            path = path.strip()
            if path not in ("", ".", "./") and (kind != "search" or pathlike(path)):
                self.add("file_path", path)

    # -- tool results

    def tool(self, m: Message) -> None:
        kind = self.call_kinds.get(m.tool_call_id or "") or tool_kind(m.tool_name or "")
        error = m.is_error
        if kind in _QUIET_KINDS and not error:
            return  # file content or a confirmation, not a failure (_failed)
        text = m.text
        failed = _failed(m, text, kind)  # else the kind is not one of _QUIET_KINDS
        if not failed and not holds_error_marker(text):
            return  # no probe in it: not hashed for the repeats below
        key = (kind, error, text)
        if key in self.outputs:
            return  # the same output again: every probe it gives is added already
        self.outputs.add(key)
        if failed:
            lines, tests = error_lines(text)
            for line in lines:
                self.add("error", line)
            for test in tests:
                self.add("identifier", test.split("::")[-1].split("[")[0])
            for header in _PYTEST_HEADER_RE.findall(text):
                self.add("identifier", header.split("[")[0])
        else:
            traceback = "Traceback (most recent call last)" in text
            for line in found_errors(text if traceback else _log_level_lines(text)):
                self.add("error", line)

    # -- the end of the log

    def finish(self) -> list[Probe]:
        """The probes in order of first appearance (requests first)."""
        requests = [
            Probe(kind, text, m.line, m.turn, m.uuid)
            for kind, m in (("first_request", self.first), ("latest_request", self.latest))
            if m is not None and not (kind == "latest_request" and m is self.first)
            if (text := _cut(m.text, REQUEST_CHARS))  # "": one word longer than the cut
        ]
        for task in self.tasks.pending():
            self.fixed = (task.line, task.turn, task.source)
            self.add("pending_task", task.text)
        rest = sorted(self.probes.values(), key=lambda p: p.line or 0)  # stable: kind order kept
        return requests + rest


def extract_probes(events: Iterable[Event]) -> list[Probe]:
    """The probes of a log, from its original messages (see the module docstring).

    Args:
        events: the log's events in file order (any iterable; read once). Only
            :class:`~compactctl.model.Message` events are read; a message carrying
            ``summaryOf`` (a summary a materialized file holds) is skipped.

    Returns:
        The probes, requests first, then by source line; each ``(kind, text)`` once (text
        compared by :func:`normalise`), at its first appearance.

    >>> from compactctl.model import event_from_dict
    >>> log = [event_from_dict(d, line=i) for i, d in enumerate([
    ...     {"type": "message", "role": "user", "turnId": 1,
    ...      "content": "Fix QUI-12 in `page_of`. Do not add new dependencies."},
    ...     {"type": "message", "role": "assistant", "turnId": 1, "content": "",
    ...      "toolCalls": [{"id": "c1", "name": "bash",
    ...                     "arguments": {"command": "pytest tests/test_a.py -q"}}]},
    ... ], start=1)]
    >>> [(p.kind, p.text, p.line) for p in extract_probes(log)][1:]
    ... # doctest: +NORMALIZE_WHITESPACE
    [('identifier', 'QUI-12', 1), ('identifier', 'page_of', 1),
     ('user_constraint', 'Do not add new dependencies', 1),
     ('command', 'pytest tests/test_a.py -q', 2), ('file_path', 'tests/test_a.py', 2)]
    """
    collector = _Collector()
    for event in events:
        if isinstance(event, Message) and "summaryOf" not in event.data:
            collector.message(event)
    return collector.finish()
