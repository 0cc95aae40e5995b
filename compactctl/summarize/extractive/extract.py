"""One pass over a span of messages: the user, the assistant, tool calls and results.

:class:`Extractor` reads canonical messages in order and fills the
:class:`~compactctl.summarize.extractive.ledger.Facts` of the span: user messages and
their constraints, the ledger (from tool calls, shell commands and tool results), errors
with what the assistant said next, decisions, done and pending tasks, key identifiers, and
the current work.
"""

from __future__ import annotations

import builtins
import json
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from compactctl.summarize.extractive.failures import (
    error_lines,
    found_errors,
    located_errors,
    pytest_counts,
    reported_exit_code,
    shown_error,
    traceback_frames,
)
from compactctl.summarize.extractive.intent import (
    CHECKBOX_RE,
    DECISION_WORDS,
    DEFER_RE,
    DEFER_WORDS,
    NEXT_LABEL_RE,
    NEXT_RE,
    NEXT_WORDS,
    PENDING_RE,
    PENDING_WORDS,
    constraint_sentences,
    constraint_text,
    decision_rank,
    holds_word,
    injected_instructions,
    instruction_file,
    long_enough,
    spoken_by_user,
)
from compactctl.summarize.extractive.ledger import (
    CommandEntry,
    Decision,
    ErrorEntry,
    Facts,
    dedupe_decisions,
)
from compactctl.summarize.extractive.prose import (
    backticked,
    dedupe,
    dedupe_exact,
    distinct_tasks,
    inline,
    join_sentences,
    ledger_line,
    same_task,
    split_sentences,
    text_of,
)
from compactctl.summarize.extractive.tools import (
    CONTENT_KEYS,
    EDIT_TEXT_KEYS,
    EDITOR_COMMANDS,
    KIND_ACTION,
    PATH_KEYS,
    PATH_LIST_KEYS,
    call_arguments,
    code_changes,
    command_files,
    command_text,
    patch_changes,
    patch_files,
    pathlike,
    plan_items,
    progress_items,
    resolves,
    shell_command,
    tool_calls,
    tool_kind,
)
from compactctl.text import clip

__all__ = ["Extractor"]

_TEST_ID_RE = re.compile(r"(?P<file>[\w./-]+\.py)::(?P<name>[\w\[\]./-]+(?:::[\w\[\]-]+)*)")
_TICKET_RE = re.compile(r"\b[A-Z][A-Z0-9]{1,9}-\d{1,6}\b")
_IDENT_RE = re.compile(
    r"(?<![\w-])(?:[A-Za-z_][A-Za-z0-9]*_[A-Za-z0-9_]*[A-Za-z0-9]|[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+"
    r"|[a-z]+[A-Z][A-Za-z0-9]*)(?![\w-])"
)
_BACKTICK_RE = re.compile(r"`([^`\n]{2,40})`")
_PATH_IN_TEXT_RE = re.compile(
    r"\S*/\S*|\b[\w-]+\.(?:py|md|toml|json|yaml|yml|txt|cfg|ini|js|ts|"
    r"rs|go|java|c|h|cpp|log|sh|lock|csv|html|css)\b"
)


_FEW_NAMES = 64
"""Up to this many known names, :meth:`_Concepts.scan` looks for each in a text (a
``str.find`` each) before its regex passes (about 40 us per 200 chars), which it skips when
none is there; with more, the passes run."""


def _is_builtin_exception(name: str) -> bool:
    value = getattr(builtins, name, None)
    return isinstance(value, type) and issubclass(value, BaseException)


class _Concepts:
    """Identifier candidates and their counts; ranked tickets > failing tests > frequency."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self.priority: dict[str, int] = {}
        self.order: dict[str, int] = {}

    def add(self, name: str, priority: int = 1) -> None:
        if _is_builtin_exception(name) or len(name) < 3:
            return
        self.order.setdefault(name, len(self.order))
        self.priority[name] = max(self.priority.get(name, 0), priority)
        self.counts[name] += 1

    def scan(self, text: str, introduce: bool = True, *, prefilter: bool = True) -> None:
        """Count the names of ``text``; with ``introduce`` false, only names already known.

        The prefilters (``prefilter`` false skips them, for tests; the counts are the same)
        spare regex passes that cannot count anything: a text that holds no known name is
        not searched for known names (each name counted is a substring of ``text``: a
        ticket, or an identifier, whose characters the path and ticket replacements never
        touch), a failing test id holds ``.py::``, and the tickets are replaced only where
        one was found. On the 32 MB bench session's 4,252 scans the passes took 0.13 s,
        most of it on assistant texts holding none of the 3 known names.
        """
        if prefilter and not introduce:
            if not self.order:
                return
            if len(self.order) <= _FEW_NAMES and not any(n in text for n in self.order):
                return
        if introduce and (".py::" in text or not prefilter):
            for test in _TEST_ID_RE.finditer(text):
                self.add(test.group("name").split("[")[0], 2)
        tickets = _TICKET_RE.findall(text)
        for ticket in tickets:
            if introduce or ticket in self.order:
                self.add(ticket, 3)
        if introduce:
            for span in _BACKTICK_RE.findall(text):
                if not pathlike(span.strip()):
                    self.add(span.strip())
        untagged = _TICKET_RE.sub(" ", text) if tickets or not prefilter else text
        plain = _PATH_IN_TEXT_RE.sub(" ", untagged)
        for ident in _IDENT_RE.findall(plain):
            if introduce or ident in self.order:
                self.add(ident)

    def ranked(self) -> list[str]:
        return sorted(self.order, key=lambda n: (-self.priority[n], -self.counts[n], self.order[n]))


def _failure(
    source: str, text: str, *, exit_code: int | None = None, command: str = "", tool_key: str = ""
) -> ErrorEntry:
    """The error of a failed tool result ``text`` (its error lines, failing tests, counts)."""
    lines, tests = error_lines(text)
    return ErrorEntry(
        source=source,
        lines=[ledger_line(line) for line in lines],
        tests=tests,
        counts=pytest_counts(text),
        exit_code=exit_code,
        command=command,
        tool_key=tool_key,
        frames=traceback_frames(text),
    )


_FIX_WORDS_RE = re.compile(
    r"\b(?:fix\w*|caus\w*|because|bug\w*|errors?|fail\w*|broke\w*|wrong|missing|typo|"
    r"traceback|exception|crash\w*|resolv\w*|workaround|the (?:problem|issue))\b"
    r"|修复|修正|原因|因为|所以|导致|错误|报错|失败|问题",
    re.IGNORECASE,
)
_WORD_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{3,}")
_CREATED_RE = re.compile(r"\b(?:created|new file)\b", re.IGNORECASE)  # a write's result
_NAME_RE = re.compile(r"[A-Za-z_]\w*")  # a traceback frame's function name
_NO_FOUND_ERRORS = frozenset({"read", "edit", "write", "patch", "plan"})
"""The tool kinds whose output is not searched for error lines unless the call failed: a
file's text (read, or echoed by an edit) is the file's, not an error the tool met."""


def _about(error: ErrorEntry, text: str) -> bool:
    """Whether ``text`` (what the assistant said after an error) speaks of it: it names a
    cause or a fix ("because", "fix", "error" ...), or a word of 4 letters or more of its
    error lines or failing tests."""
    if _FIX_WORDS_RE.search(text):
        return True
    said = {w.strip("_").lower() for w in _WORD_RE.findall(text)}
    named = _WORD_RE.findall(" ".join(error.lines + error.tests))
    return any(w.strip("_").lower() in said for w in named)


def _call_key(name: str, args: Mapping[str, Any]) -> str:
    """What identifies a call of a tool that names no file: its name and its arguments
    (a success of the same tool with other arguments fixes nothing)."""
    try:
        return name + " " + json.dumps(args, sort_keys=True, default=str)
    except (TypeError, ValueError):
        return name + " " + repr(sorted(args.items(), key=lambda kv: str(kv[0])))


def _messages(events: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The message dicts of ``events`` (anything else skipped)."""
    return [m for m in events if isinstance(m, Mapping) and m.get("type", "message") == "message"]


def _results(messages: Sequence[Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    """The tool results of ``messages`` by their call id (the first one of an id)."""
    results: dict[str, Mapping[str, Any]] = {}
    for message in messages:
        if message.get("role") == "tool" and isinstance(message.get("toolCallId"), str):
            results.setdefault(message["toolCallId"], message)
    return results


class Extractor:
    """One pass over a span of canonical messages, filling a
    :class:`~compactctl.summarize.extractive.ledger.Facts`.

    ``messages`` are canonical message dicts (docs/design.md section 3); anything else is
    skipped. ``first_request`` is the session's first request when the caller knows it (it
    is pinned, so usually not among ``messages``); else the first request of the span is.
    ``latest_request`` (``(turn label, text)``) is the session's newest request when the
    caller knows it; one that is not the span's own newest came after the span, which makes
    every next step stated in the span stale. ``later`` are the messages kept after the span
    (:attr:`~compactctl.summarize.SummaryRequest.later`): only their tool calls are read, to
    settle the span's failures (:meth:`_later`). :meth:`run` reads them once, in order.
    """

    def __init__(
        self,
        messages: Sequence[Mapping[str, Any]],
        first_request: str = "",
        latest_request: tuple[str, str] | None = None,
        later: Sequence[Mapping[str, Any]] = (),
    ) -> None:
        self.first_request = first_request.strip()
        self.latest_request = latest_request
        self.messages = _messages(messages)
        self.later = _messages(later)
        self.facts = Facts()
        self.concepts = _Concepts()
        self.results = _results(self.messages)
        self.awaiting_followup: list[ErrorEntry] = []
        self.seen_error_lines: dict[str, ErrorEntry] = {}
        self.newest_plan: list[tuple[str, bool]] | None = None
        self.newest_checkboxes: list[tuple[str, bool]] = []
        self.sentence_pending: list[str] = []
        self.decision_order = 0
        self.last_user: tuple[int, str, str] | None = None
        self.index = -1
        self.next_index = -1
        self.plan_index = -1
        self.last_assistant_text_index = -1
        self.last_turn_calls: list[str] = []
        # exit codes by result text: a span repeats tool outputs (the 32 MB bench session:
        # 5,369 results, 3,209 distinct texts)
        self.exit_codes: dict[str, int | None] = {}

    # -- driver

    def run(self) -> Facts:
        """Read every message and return the facts (call once)."""
        called: set[str] = set()
        for index, message in enumerate(self.messages):
            self.index = index
            role = message.get("role")
            turn = message.get("turnId")
            if isinstance(turn, int) and not isinstance(turn, bool) and turn > 0:
                self.facts.stats.turns.append(turn)
            if role in ("user", "assistant", "tool", "system"):
                self.facts.stats.roles[str(role)] += 1
            if role == "user":
                self._user(index, message)
            elif role == "assistant":
                for call in tool_calls(message):
                    if isinstance(call, Mapping) and isinstance(call.get("id"), str):
                        called.add(call["id"])
                self._assistant(index, message)
            elif role == "tool":
                if message.get("isError"):
                    self.facts.stats.failed_results += 1
                call_id = message.get("toolCallId")
                if not isinstance(call_id, str) or call_id not in called:
                    self._orphan_result(message)
        self._later()
        self._finish()
        return self.facts

    def _later(self) -> None:
        """Settle the span's failures by the tool calls of the messages kept after it, in
        order, by the rules of the span (:meth:`_resolve`, :meth:`_add_error`): a call that
        succeeds marks resolved the failures it fixes (a run of the same or a broader
        command, :func:`~compactctl.summarize.extractive.tools.resolves`; the same call of a
        tool that names no file), and its command goes to
        :attr:`~compactctl.summarize.extractive.ledger.Facts.later_ok` (for the failures of
        a prior summary); a failure with an error line of a resolved one opens it again.
        Nothing else of those messages is read: the agent that resumes has them whole.
        Before, a failure fixed in the kept tail was listed as unresolved (a fresh-user
        trial: "`pytest tests/x.py` failed ...; unresolved" above a kept "2 passed")."""
        results = _results(self.later)
        for message in self.later:
            if message.get("role") != "assistant":
                continue
            for call in tool_calls(message):
                result = results.get(str(call.get("id"))) if isinstance(call, Mapping) else None
                if result is None:
                    continue
                name = str(call.get("name") or "tool")
                args = call_arguments(call)
                text = text_of(result.get("content"))
                code = reported_exit_code(text)
                failed = bool(result.get("isError")) or code not in (None, 0)
                kind = tool_kind(name)
                command = shell_command(args) if kind in ("shell", "other") else ""
                if failed:
                    lines = {ledger_line(line) for line in error_lines(text)[0]}
                    for error in self.facts.errors:
                        if error.resolved and not lines.isdisjoint(error.lines):
                            error.resolved = False
                elif command:
                    found = dedupe_exact(located_errors(text) + found_errors(text))
                    outcome = self._outcome(result, text, failed, code, found)
                    if CommandEntry(command_text(command), 1, outcome).passed:  # as in the span
                        self._resolve(command=command_text(command))
                        self.facts.later_ok.append(command_text(command))
                elif kind != "plan":
                    files = self._call_files(kind, args, text)
                    self._resolve(
                        tool_key=f"{name} {files[0][0]}" if files else _call_key(name, args)
                    )

    # -- user

    def _user(self, index: int, message: Mapping[str, Any]) -> None:
        if message.get("summaryOf"):
            self.facts.stats.skipped_summaries += 1
            return
        text = text_of(message.get("content")).strip()
        if not text:
            return
        for name, body in injected_instructions(text):
            self.facts.instructions[name] = body
        if not spoken_by_user(message, text):
            self.facts.stats.injected += 1
            return
        turn = message.get("turnId")
        self.awaiting_followup = []  # what the assistant says next answers the user
        label = f"T{turn}" if isinstance(turn, int) else ""
        self.facts.user_messages.append((label, text))
        if not self.facts.primary:
            self.facts.primary.append(text)
        self.last_user = (index, label, text)
        self.last_turn_calls = []
        self.concepts.scan(text)
        may_defer = holds_word(text, DEFER_WORDS)  # else no sentence of it can match
        for sentence in split_sentences(text):
            if sentence.endswith(("?", "？")):
                continue
            if may_defer and DEFER_RE.search(sentence) and long_enough(sentence):
                self.sentence_pending.append(sentence)
        self.facts.constraints.extend(constraint_text(c) for c in constraint_sentences(text))

    # -- assistant

    def _assistant(self, index: int, message: Mapping[str, Any]) -> None:
        text = text_of(message.get("content")).strip()
        sentences = split_sentences(text) if text else []
        if text:
            followup = join_sentences(sentences[:2])
            for error in self.awaiting_followup:
                if _about(error, followup):  # never a next message on something else
                    error.followup = followup
            self.awaiting_followup = []
        calls = tool_calls(message)
        edits: list[str] = []
        for call in calls:
            edits.extend(self._call(call))
        if not text:
            return
        self.last_assistant_text_index = index
        self.facts.last_message = text
        self.concepts.scan(text, introduce=False)
        self._checkboxes(text)
        # a regex that cannot match the text cannot match any of its sentences
        may_decide = holds_word(text, DECISION_WORDS)
        may_next = holds_word(text, NEXT_WORDS)
        may_pend = holds_word(text, PENDING_WORDS)
        for position, sentence in enumerate(sentences):
            rank = decision_rank(sentence) if may_decide else 0
            if rank:
                decision = sentence
                if (
                    rank == 3
                    and position + 1 < len(sentences)
                    and not decision_rank(sentences[position + 1])
                    and not NEXT_RE.search(sentences[position + 1])
                ):
                    decision = join_sentences([decision, sentences[position + 1]])
                self.facts.decisions.append(Decision(decision, rank, self.decision_order))
                self.decision_order += 1
            if may_next and NEXT_RE.search(sentence) and not DEFER_RE.search(sentence):
                self.facts.next_step = NEXT_LABEL_RE.sub("", sentence).strip() or sentence
                self.next_index = index
            elif (
                may_pend
                and PENDING_RE.search(sentence)
                and long_enough(sentence)
                and not CHECKBOX_RE.match(sentence)
            ):
                self.sentence_pending.append(sentence)
        if edits:
            self.facts.problem.append(
                inline(text) + " (changed " + ", ".join(dedupe_exact(edits)) + ")"
            )

    def _checkboxes(self, text: str) -> None:
        boxes = []
        for line in text.split("\n"):
            match = CHECKBOX_RE.match(line)
            if match:
                boxes.append((match.group("text").strip(), match.group("mark") != " "))
        if boxes:
            self.newest_checkboxes = boxes
            self.facts.done.extend(t for t, done in boxes if done)

    # -- tool calls

    def _call(self, call: Mapping[str, Any]) -> list[str]:
        """Record one tool call and its result; return the paths it changed."""
        name = str(call.get("name") or "tool")
        args = call_arguments(call)
        result = self.results.get(str(call.get("id")))
        result_text = text_of(result.get("content")) if result else ""
        failed = bool(result and result.get("isError"))
        code = None
        if result:
            if result_text in self.exit_codes:
                code = self.exit_codes[result_text]
            else:
                code = self.exit_codes[result_text] = reported_exit_code(result_text)
        if code not in (None, 0):
            failed = True
        self.facts.stats.tools[name] += 1
        kind = tool_kind(name)
        command = shell_command(args) if kind in ("shell", "other") else ""
        summary = key = name
        changed: list[str] = []
        # error lines in the output of a tool that did not fail: the errors' "seen in the
        # output" entry, and a command's outcome when no exit code says how it ended
        found: list[str] = []
        if result is not None and not failed and kind not in _NO_FOUND_ERRORS:
            found = dedupe_exact(located_errors(result_text) + found_errors(result_text))

        progress = progress_items(args)  # Cline's focus chain rides on any tool call
        if progress is not None:
            self._plan(progress)
        if kind == "plan":
            items = plan_items(args)
            if items is not None:
                self._plan(items)
        elif command:
            kind = "shell"
            text = command_text(command)
            summary = f"{name} {backticked(text)}"
            record = self.facts.commands.setdefault(text, CommandEntry(text))
            record.failed_before = record.failed_before or (record.runs > 0 and record.failing)
            record.runs += 1
            record.outcome = self._outcome(result, result_text, failed, code, found)
            record.failures += int(record.failing)
            named = command_files(command)
            for path, action in named:
                self._instructions_read(path, action, result_text, failed or result is None)
                self.facts.file(path).add(action + (" (failed)" if failed else ""))
                if action in ("edited", "written", "created", "deleted"):
                    changed.append(path)
            moved = [p for p, a in named if a == "moved"]
            if moved and not failed:
                for path in (p for p, a in named if a == "written"):
                    self.facts.file(path).changed([f"moved here from {m}" for m in moved])
            if result is not None and record.passed:  # no error line, no failed test either
                self._resolve(command=text)
        else:
            files = self._call_files(kind, args, result_text)
            key = _call_key(name, args) if not files else ""
            for path, action in files:
                self._instructions_read(path, action, result_text, failed or result is None)
                self.facts.file(path).add(action + (" (failed)" if failed else ""))
                if action in ("edited", "written", "created", "deleted") and not failed:
                    changed.append(path)
            if files and not failed:
                self._code_changes(kind, args, files)
            if files:
                summary = key = f"{name} {files[0][0]}"
            if not failed and result is not None:
                self._resolve(tool_key=key)

        self.last_turn_calls.append(summary)
        if result is None:
            return changed
        if failed:
            source = backticked(command_text(command)) if kind == "shell" else summary
            self._add_error(
                _failure(
                    source,
                    result_text,
                    exit_code=code,
                    command=command_text(command) if kind == "shell" else "",
                    tool_key="" if kind == "shell" else key,
                )
            )
        elif found:
            source = backticked(command_text(command)) if kind == "shell" else summary
            self._add_error(
                ErrorEntry(
                    source=source,
                    lines=[ledger_line(x) for x in found],
                    found=True,
                    frames=traceback_frames(result_text),
                )
            )
        return changed

    def _code_changes(
        self, kind: str, args: Mapping[str, Any], files: list[tuple[str, str]]
    ) -> None:
        """What an edit, write or patch call did to functions and classes, per file."""
        for value in args.values():
            if isinstance(value, str) and "*** Begin Patch" in value:
                for path, changes in patch_changes(value).items():
                    self.facts.file(path).changed(changes)
        if kind not in ("edit", "write"):
            return
        path = files[0][0]
        for old_key, new_key in EDIT_TEXT_KEYS:
            old, new = args.get(old_key), args.get(new_key)
            if isinstance(old, str) and isinstance(new, str):
                self.facts.file(path).changed(code_changes(old, new))
                return
        content = next((args[k] for k in CONTENT_KEYS if isinstance(args.get(k), str)), None)
        if content is not None and files[0][1] == "created":
            self.facts.file(path).changed(code_changes("", content)[:8])

    def _instructions_read(self, path: str, action: str, text: str, failed: bool) -> None:
        """An instruction file read through a tool: its output is kept verbatim."""
        if action == "read" and not failed and text.strip() and instruction_file(path):
            self.facts.instructions[path.strip()] = text.strip()

    def _plan(self, items: list[tuple[str, bool]]) -> None:
        """A plan or todo list: the newest one's open items are the pending tasks."""
        self.newest_plan = items
        self.plan_index = self.index
        self.facts.done.extend(t for t, done in items if done)

    def _call_files(
        self, kind: str, args: Mapping[str, Any], result_text: str
    ) -> list[tuple[str, str]]:
        files: list[tuple[str, str]] = []
        editor = args.get("command")
        action = EDITOR_COMMANDS.get(editor, "") if isinstance(editor, str) else ""
        action = action or KIND_ACTION.get(kind, "touched")
        if action == "written" and _CREATED_RE.search(result_text[:300]):
            action = "created"
        paths = [args[k] for k in PATH_KEYS if isinstance(args.get(k), str)]
        for key in PATH_LIST_KEYS:
            value = args.get(key)
            if isinstance(value, list):
                paths.extend(v for v in value if isinstance(v, str))
        for path in paths:
            if kind == "search" and not pathlike(path):
                continue
            if path.strip() and path.strip() not in (".", "./"):
                files.append((path.strip(), action))
        if kind == "patch" or any(
            isinstance(v, str) and "*** Begin Patch" in v for v in args.values()
        ):
            for value in args.values():
                if isinstance(value, str):
                    files.extend(patch_files(value))
        return files

    @staticmethod
    def _outcome(
        result: Mapping[str, Any] | None,
        text: str,
        failed: bool,
        code: int | None,
        found: list[str],
    ) -> str:
        """A command's outcome in the ledger (:class:`CommandEntry`), only what its result
        says: ``no result``; ``exit N`` (a non-zero exit code it reports) or ``failed``
        (``isError``); ``ok`` only for a reported exit code 0; with no exit code and no
        ``isError``, the first error line the output shows (``output shows ...``, from
        :func:`~compactctl.summarize.extractive.failures.shown_error`, ``found``: the
        output's error lines already found), else nothing (``""``: nothing says how it
        ended; a traceback or ``error:`` lines in an output used to make it ``ok``). Then
        pytest's counts (``, 1 failed, 7 passed``; alone when there is no head).
        """
        if result is None:
            return "no result"
        counts = pytest_counts(text)
        if failed:
            head = f"exit {code}" if code not in (None, 0) else "failed"
        elif code == 0:
            head = "ok"
        else:
            error = shown_error(text, found)
            head = ""
            if error:  # what the output shows, not a verdict: `grep ERROR log` did not fail
                head = f"output shows {ledger_line(error)}"
        return ", ".join(part for part in (head, counts) if part)

    def _orphan_result(self, message: Mapping[str, Any]) -> None:
        text = text_of(message.get("content"))
        name = str(message.get("toolName") or "tool")
        if message.get("isError"):
            self._add_error(_failure(name, text, tool_key=name))

    # -- errors

    def _add_error(self, error: ErrorEntry) -> None:
        fresh = [line for line in error.lines if line not in self.seen_error_lines]
        if not error.found:  # an error line seen before failed again: open again
            for line in error.lines:
                earlier = self.seen_error_lines.get(line)
                if earlier is not None:
                    earlier.resolved = False
        if not fresh and error.lines:
            earlier = self.seen_error_lines[error.lines[0]]
            if not error.found and earlier.found:  # seen in a passing output, now a failure
                earlier.found = False
                earlier.source, earlier.command, earlier.tool_key = (
                    error.source,
                    error.command,
                    error.tool_key,
                )
                earlier.exit_code, earlier.tests, earlier.counts = (
                    error.exit_code,
                    error.tests,
                    error.counts,
                )
                self.awaiting_followup.append(earlier)
            elif not error.found:
                earlier.repeats += 1
            return
        error.lines = fresh
        for line in fresh:
            self.seen_error_lines[line] = error
        for test in error.tests:
            self.concepts.add(test.split("::")[-1].split("[")[0], 2)
        for line in fresh:
            self.concepts.scan(line)
        for frame in error.frames:  # a frame's function, or the code line under it
            if _NAME_RE.fullmatch(frame):
                self.concepts.add(frame)
            else:
                self.concepts.scan(frame)
        self.facts.errors.append(error)
        if not error.found:
            self.awaiting_followup.append(error)

    def _resolve(self, command: str = "", tool_key: str = "") -> None:
        for error in self.facts.errors:
            if error.resolved or error.found:
                continue
            by_command = bool(command and error.command and resolves(command, error.command))
            if by_command or (tool_key and error.tool_key == tool_key):
                error.resolved = True

    # -- end of span

    def _finish(self) -> None:
        facts = self.facts
        facts.concepts = self.concepts.ranked()
        facts.constraints = dedupe(facts.constraints, similar=True)
        facts.done = dedupe(facts.done)
        authoritative = [t for t, done in (self.newest_plan or []) if not done]
        authoritative += [t for t, done in self.newest_checkboxes if not done]
        others = [p for p in self.sentence_pending if not any(same_task(p, d) for d in facts.done)]
        pending = distinct_tasks(authoritative + others)
        latest_index = self.last_user[0] if self.last_user is not None else -1
        given = self.latest_request
        later = (  # the user spoke again after the span: its last message got its turn there
            given is not None
            and self.last_user is not None
            and given[1].strip() != self.last_user[2].strip()
        )
        if (
            self.last_user is not None
            and not later
            and latest_index > self.last_assistant_text_index
        ):
            pending.append(
                f"answer the last user message ({self.last_user[1]}): "
                + clip(inline(self.last_user[2]), 160)
            )
        facts.pending = pending
        facts.decisions = dedupe_decisions(facts.decisions)
        if self.first_request:
            facts.primary = [self.first_request]
        if self.last_user is not None:
            facts.latest_label, facts.latest_request = self.last_user[1], self.last_user[2]
        if given is not None and given[1].strip() != facts.latest_request.strip():
            facts.latest_label, facts.latest_request = given[0], given[1].strip()
            latest_index = len(self.messages)  # after the span
        if self.next_index < latest_index:
            facts.next_step = ""  # stated before the latest request: stale
            plan_open = [t for t, done in (self.newest_plan or []) if not done]
            if self.plan_index > latest_index and plan_open:
                facts.next_step = "(from the plan) " + plan_open[0]
        if self.last_turn_calls:
            calls = self.last_turn_calls[-6:]
            more = len(self.last_turn_calls) - len(calls)
            since = "the latest request"
            if latest_index == len(self.messages) and self.last_user is not None:
                # the latest request comes after the span: these calls followed an earlier one
                since = f"the request of {self.last_user[1]}"
            facts.current.append(
                f"tool calls since {since}: "
                + "; ".join(calls)
                + (f" (+{more} earlier)" if more > 0 else "")
            )
        if facts.last_message:
            facts.current.append("last assistant message: " + inline(facts.last_message))
