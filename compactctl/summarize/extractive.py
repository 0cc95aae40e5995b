"""The built-in extractive summarizer: offline, deterministic, free (DESIGN.md section 5).

:class:`ExtractiveSummarizer` writes no new prose: it copies facts out of the transcript with
regular expressions and a few token rules, and lays them out in either summary format of
:mod:`compactctl.summarize.summary_format`. Same request, same bytes out: no clock, no
randomness, no model, no network.

What it collects, in one pass over the messages:

- every user message (shortened: the opening ~200 characters and the last sentence; any
  sentence stating a constraint, "do not ...", "must ...", "keep ...", 不要, 必须, 保留 ...,
  is kept in full and also listed as a user constraint);
- the ledger, copied in full and never sampled away:
  files read, edited, written, created or deleted, from tool-call arguments (``path``,
  ``file_path``, ``filePath``, ``filename`` ...), from shell commands (``cat x``,
  ``sed -n .. x``, ``grep p x``, ``> x``, ``pytest x`` ...) and from ``apply_patch``
  headers (``*** Update File: x``); every shell command (``command``/``cmd`` arguments) with
  its outcome (``Exit code: N``, ``exit status N``, JSON ``exit_code``, ``isError``, pytest's
  ``N failed, M passed``); every error: failed tool results (``E   Exc: ...`` lines,
  ``FAILED tests/...``, final exception lines of tracebacks, ``error:`` lines), and
  ``ERROR``/``FATAL`` log lines in other outputs, with the next thing the assistant said;
- decisions the assistant stated ("Decision:", "instead of", "because", "rather than",
  "so that", "I'll", 决定, 因为, 而不是 ...), ranked: explicit > reasoned > stated intent;
- pending tasks: open items of the newest plan (``update_plan``/``TodoWrite``/todo tools),
  unchecked ``- [ ]`` items of the newest status list, sentences such as "not now",
  "later", "still need to", "TODO", 待办, 还需要, 不是现在, and a user message left
  unanswered; done items (completed plan steps, ``- [x]``) remove matching pending ones;
- key identifiers (ticket ids like ``ABC-123``, failing test names, snake_case, CamelCase,
  SCREAMING_CASE and backticked spans) from user messages and errors, ranked: tickets,
  then failing tests, then by frequency;
- the current work (the last request, the last assistant message and its tool calls) and
  the next step the assistant stated ("Next step: ...", "Next, I will ...", 下一步).

Budget (``request.max_chars``, in characters):

- ``sections``: the text is rendered at decreasing levels of detail (:data:`_DETAILS`)
  until it fits: first fewer concepts and problem-solving notes, then shorter user-message
  bodies, decisions and follow-ups, then user messages cut to their constraint sentences,
  at last only the newest user messages that fit (their constraints stay under Primary
  Request). The ledger is never shortened: file paths, commands and error lines (each cut
  only past :data:`LEDGER_LINE_MAX`), user constraints and pending tasks (to 100
  characters). When the ledger alone is longer than the budget, the ledger wins: the text is
  longer than ``max_chars`` and :attr:`SummaryResult.warnings` says so. Repeats are folded:
  a command run N times is one line ``×N``, a failure seen again is one entry, a constraint
  restated (even inside a longer sentence) is listed once.
- ``task-state``: the ``task_state`` JSON keeps every fact in full; the display summary is
  kept within ``max_chars`` (seed 000: 1200 by default) by shortening bullets (constraints
  least), then dropping trailing bullets (``done`` first, ``constraints`` last, each section
  keeps one), at last by :func:`~compactctl.summarize.summary_format.truncate_at_bullet`.

Prior state: ``request.prior`` (a ``sections`` text or a ``task-state`` answer, from any
summarizer) is parsed back into facts and merged: ledger entries, constraints, user
messages, decisions and done items are united (prior first; action and run counts added);
a prior failure is marked resolved when the new span runs the same (or a broader) command
successfully; pending tasks the new span marks done are dropped; current work and next step
are replaced by the new span's. A prior text that does not parse is kept as one note.
Messages carrying ``summaryOf`` (an earlier summary in the view) are skipped, never read as
conversation (DESIGN.md section 3).

All of it is heuristic; see the summary's ``<analysis>`` block for the counts it is based on.
Memory: it reads the whole span (a summarizer needs the whole session, STYLE.md habit 1), and
holds only the extracted facts besides.
"""

from __future__ import annotations

import builtins
import functools
import json
import re
import shlex
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from compactctl.summarize import SummaryRequest, SummaryResult
from compactctl.summarize.redact import FOLDS_TO_ASCII
from compactctl.summarize.summary_format import (
    DISPLAY_SECTIONS,
    SECTIONS,
    SummaryFormatError,
    TaskState,
    parse_sections,
    parse_task_state,
    render_display,
    render_sections,
    render_task_state,
    truncate_at_bullet,
    validate_sections,
)

__all__ = ["ExtractiveSummarizer", "MODEL_NAME"]

#: The ``model`` recorded in a SummaryEvent written by this summarizer (DESIGN.md section 3).
MODEL_NAME = "extractive"

#: A command or error line longer than this many characters is cut (the ledger keeps lines
#: in full, but one pathological line must not eat the whole budget).
LEDGER_LINE_MAX = 1000
#: At most this many distinct error lines are kept from one tool result.
ERROR_LINES_PER_RESULT = 6
#: At most this many failing test ids are listed for one error.
TEST_IDS_PER_ERROR = 5
#: The placeholder bullet of an empty section.
NONE_BULLET = "None."

_ELLIPSIS = "…"


# =========================================================================== text helpers

_CJK_RE = re.compile(r"[\u3000-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef]")
_SENTENCE_SPLIT_RE = re.compile(r"(?<=[.!?])\s+(?=\S)|(?<=[。！？；])")
_FENCE_RE = re.compile(r"^\s*(```|~~~)")
_RULE_RE = re.compile(r"^[-*_━═=~─\s]{3,}$")
_MD_PREFIX_RE = re.compile(r"^(?:#{1,6}\s+|>\s*|[-*+•]\s+(?:\[[ xX]\]\s+)?|\d{1,3}[.)]\s+)+")
_CHECKBOX_RE = re.compile(r"^\s*[-*+]\s+\[(?P<mark>[ xX])\]\s+(?P<text>\S.*?)\s*$")
_SPACE_RE = re.compile(r"\s+")


def _has_cjk(text: str) -> bool:
    return _CJK_RE.search(text) is not None


def _one_line(text: str) -> str:
    """Collapse all whitespace runs to one space.

    >>> _one_line("a\\n\\n  b\\tc ")
    'a b c'
    """
    return _SPACE_RE.sub(" ", text).strip()


def _clip(text: str, limit: int) -> str:
    """Cut ``text`` to at most ``limit`` characters, at a word boundary when one is near.

    >>> _clip("retry the flush once with a fresh lease", 20)
    'retry the flush…'
    >>> _clip("保留 strptime，只在 TIMESTAMP_FORMAT 里加上 %z", 12)
    '保留 strptime…'
    """
    if limit <= 0:
        return ""
    if len(text) <= limit:
        return text
    cut = text[: max(limit - 1, 1)]
    space = cut.rfind(" ")
    if space >= max(limit - 20, limit * 2 // 3):
        cut = cut[:space]
    return cut.rstrip(" ,;:，、") + _ELLIPSIS


def _inline(text: str) -> str:
    """Markdown to one line: drop fences, rules, table rules and heading marks.

    >>> _inline("## Done\\n\\n| a | b |\\n|---|---|\\n- [x] fixed it")
    'Done | a | b | - [x] fixed it'
    """
    kept = []
    for raw in text.split("\n"):
        line = raw.strip()
        if not line or _FENCE_RE.match(line) or _RULE_RE.match(line):
            continue
        if line.startswith("|") and set(line) <= set("|-: \t"):
            continue
        kept.append(re.sub(r"^#{1,6}\s+", "", line))
    return _one_line(" ".join(kept))


def _sentences(text: str) -> list[str]:
    """Split prose into sentences: on newlines, after ``. ! ?`` plus a space, and after
    ``。！？；``. Code fences, tables and rules are skipped; Markdown prefixes removed.

    >>> _sentences("Fixed. Next step: run it.\\n- [ ] 写文档。还需要测试")
    ['Fixed.', 'Next step: run it.', '写文档。', '还需要测试']
    """
    out: list[str] = []
    in_fence = False
    for raw in text.split("\n"):
        if _FENCE_RE.match(raw):
            in_fence = not in_fence
            continue
        line = raw.strip()
        if in_fence or not line or line.startswith("|") or _RULE_RE.match(line):
            continue
        line = _MD_PREFIX_RE.sub("", line).strip()
        out.extend(p.strip() for p in _SENTENCE_SPLIT_RE.split(line) if p.strip())
    return out


def _norm(text: str) -> str:
    """A comparison key: lower case, words and CJK characters only.

    >>> _norm("Noted for later: `write` a note!")
    'noted for later write a note'
    """
    return _one_line(re.sub(r"[^\w\u3000-\u9fff]+", " ", text.casefold()))


def _same_task(a: str, b: str) -> bool:
    """Whether two task descriptions name the same task (equal, or one contains the other).

    >>> _same_task("write a migration note", "Noted for later: write a migration note.")
    True
    """
    x, y = _norm(a), _norm(b)
    if not x or not y:
        return False
    if x == y:
        return True
    short, long_ = sorted((x, y), key=len)
    return len(short) >= 10 and short in long_


def _dedupe(items: Iterable[str], similar: bool = False) -> list[str]:
    """Drop blank items and repeats (same words, letter case and punctuation aside); with
    ``similar``, also an item that contains, or is contained in, an earlier one.

    >>> _dedupe(["Do not add deps.", "do not add deps", "(round 2) Do not add deps."], True)
    ['Do not add deps.']
    """
    seen: set[str] = set()
    kept_keys: list[str] = []
    out = []
    for item in items:
        key = _norm(item) or item
        if not item.strip() or key in seen:
            continue
        if (
            similar
            and len(key) >= 10
            and any((key in k or k in key) for k in kept_keys if len(k) >= 10)
        ):
            continue
        seen.add(key)
        kept_keys.append(key)
        out.append(item)
    return out


def _code(text: str) -> str:
    """Wrap in backticks, with a longer fence when the text holds one.

    >>> _code("ls"), _code("echo `date`")
    ('`ls`', '`` echo `date` ``')
    """
    return f"`` {text} ``" if "`" in text else f"`{text}`"


def _text_of(content: Any) -> str:
    """The text of a message ``content``: a string, or the text parts of a list."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, Mapping):
                if isinstance(part.get("text"), str):
                    parts.append(part["text"])
                elif part.get("type") == "image":
                    parts.append("[image]")
            elif isinstance(part, str):
                parts.append(part)
        return "\n".join(parts)
    return ""


# =========================================================================== keyword rules

_CONSTRAINT_RE = re.compile(
    r"\b(?:do not|don't|dont|never|must|mustn't|keep|without|avoid|make sure|should not|"
    r"shouldn't|cannot|can't|no new|not allowed|leave \w+ alone|stay)\b"
    r"|不要|必须|保留|不能|不得|禁止|务必|只能|不允许|保持|不可以",
    re.IGNORECASE,
)
_DEFER_RE = re.compile(
    r"\b(?:not now|later|todo|to-do|follow[- ]up|at some point|before the release|"
    r"eventually)\b"
    r"|不是现在|以后再|稍后|之后再|回头再",
    re.IGNORECASE,
)
_PENDING_RE = re.compile(
    r"\b(?:left undone|still need(?:s)? to|need to .{0,40}later|todo|to-do|later|"
    r"follow[- ]up|not done|not yet|still open|remaining|pending|open item|"
    r"haven't|have not (?:yet )?(?:done|started|finished))\b"
    r"|待办|还需要|尚未|未完成|还没做|稍后|以后再|之后再做|遗留|记下",
    re.IGNORECASE,
)
_DECISION_RES = (
    (3, re.compile(r"\b(?:decision|decided|decide|we agreed)\b|决定|决策", re.IGNORECASE)),
    (
        2,
        re.compile(
            r"\b(?:instead of|rather than|because|so that|trade-?off)\b"
            r"|而不是|因为|为了|以免|避免|不引入|改用",
            re.IGNORECASE,
        ),
    ),
    (
        1,
        re.compile(
            r"\b(?:i'll|i will|we'll|we will|switching to|going with|chose|choose|"
            r"opted|prefer|keeping)\b|改成|改为|选择|回退|采用",
            re.IGNORECASE,
        ),
    ),
)
_NEXT_RE = re.compile(
    r"\bnext step\b|\bnext,? (?:i|we)(?:'ll| will| should| need)\b|\bnext(?: up)?:"
    r"|\bthen i(?:'ll| will)\b|下一步|接下来",
    re.IGNORECASE,
)

_NEXT_LABEL_RE = re.compile(
    r"^(?:the )?(?:next steps?|next up|next|下一步|接下来)\s*[:：,，]\s*", re.IGNORECASE
)


def _is_constraint(sentence: str) -> bool:
    return _CONSTRAINT_RE.search(sentence) is not None and _DEFER_RE.search(sentence) is None


def _long_enough(sentence: str) -> bool:
    return len(sentence) >= (8 if _has_cjk(sentence) else 20)


def _decision_rank(sentence: str) -> int:
    for rank, pattern in _DECISION_RES:
        if pattern.search(sentence):
            return rank
    return 0


# =========================================================================== tool rules

_SHELL_NAMES = frozenset(
    {
        "bash",
        "shell",
        "sh",
        "zsh",
        "exec",
        "exec_command",
        "run_command",
        "execute_command",
        "run_shell_command",
        "terminal",
        "local_shell",
        "container.exec",
        "run_terminal_cmd",
        "powershell",
        "cmd",
    }
)
_PATH_KEYS = (
    "path",
    "file_path",
    "filePath",
    "filename",
    "file",
    "notebook_path",
    "target_file",
    "targetFile",
    "absolute_path",
)
_PATH_LIST_KEYS = ("paths", "files", "file_paths")
_EDITOR_COMMANDS = {
    "view": "read",
    "create": "created",
    "str_replace": "edited",
    "insert": "edited",
    "undo_edit": "edited",
}
_PLAN_ITEM_KEYS = ("plan", "todos", "items", "tasks", "steps")
_PLAN_TEXT_KEYS = ("step", "content", "text", "title", "task", "description")
_DONE_STATUSES = frozenset({"completed", "complete", "done", "finished", "cancelled", "canceled"})


@functools.lru_cache(maxsize=1024)
def _tool_kind(name: str) -> str:
    """Classify a tool by its name: plan, shell, patch, write, edit, read, search, other.

    Cached: a session calls a handful of tools thousands of times.

    >>> [_tool_kind(n) for n in ("update_plan", "bash", "apply_patch", "read_file")]
    ['plan', 'shell', 'patch', 'read']
    """
    n = name.lower()
    if re.search(r"todo|plan", n):
        return "plan"
    if n in _SHELL_NAMES or re.search(r"bash|shell|terminal|exec", n):
        return "shell"
    if "patch" in n:
        return "patch"
    if re.search(r"edit|replace|modify|insert|update_file", n):
        return "edit"
    if re.search(r"write|create|save|new_file", n):
        return "write"
    if re.search(r"read|view|open|cat\b|show", n):
        return "read"
    if re.search(r"grep|search|find|glob|list|\bls\b", n):
        return "search"
    return "other"


_KIND_ACTION = {"edit": "edited", "write": "written", "read": "read", "search": "searched"}

_PATCH_FILE_RE = re.compile(
    r"^\*\*\* (?P<op>Add|Update|Delete) File: (?P<path>.+?)\s*$", re.MULTILINE
)
_PATCH_MOVE_RE = re.compile(r"^\*\*\* Move to: (?P<path>.+?)\s*$", re.MULTILINE)
_PATCH_ACTION = {"Add": "created", "Update": "edited", "Delete": "deleted"}
_EXT_RE = re.compile(r"\.[A-Za-z0-9]{1,10}$")
_PATH_TOKEN_RE = re.compile(r"^[\w@%+=,.~-]*(?:/[\w@%+=,.~-]*)*$")


def _pathlike(token: str) -> bool:
    """Whether a shell token looks like a file path.

    >>> [_pathlike(t) for t in ("src/a.py", "README.md", "-n", "19", "0.6.0", ".", "1,20p")]
    [True, True, False, False, False, False, False]
    """
    if not token or token.startswith("-") or "://" in token or token in (".", "..", "/", "~"):
        return False
    if re.fullmatch(r"[\d.,]+", token) or not _PATH_TOKEN_RE.match(token):
        return False
    return "/" in token or _EXT_RE.search(token) is not None


def _patch_files(text: str) -> list[tuple[str, str]]:
    """Files named in an ``apply_patch`` body, with their action.

    >>> _patch_files("*** Begin Patch\\n*** Update File: src/a.py\\n@@\\n*** End Patch")
    [('src/a.py', 'edited')]
    """
    found = [(m.group("path"), _PATCH_ACTION[m.group("op")]) for m in _PATCH_FILE_RE.finditer(text)]
    found.extend((m.group("path"), "created") for m in _PATCH_MOVE_RE.finditer(text))
    return found


_WRAPPERS = frozenset({"sudo", "env", "time", "nohup", "command", "exec", "xargs", "timeout"})
_READERS = frozenset(
    {
        "cat",
        "head",
        "tail",
        "less",
        "more",
        "bat",
        "nl",
        "wc",
        "stat",
        "file",
        "md5sum",
        "sha256sum",
        "xxd",
        "hexdump",
        "od",
        "strings",
        "diff",
        "cmp",
        "tac",
        "sort",
        "uniq",
        "cut",
    }
)
_SEARCHERS = frozenset({"grep", "egrep", "fgrep", "rg", "ag", "ack"})
#: Options that take a value, per program family (their value is not an operand).
_VALUE_OPTIONS: dict[str, frozenset[str]] = {
    "read": frozenset({"-n", "-c", "--lines", "--bytes", "-s", "-k", "-t", "-d", "-f"}),
    "search": frozenset(
        {
            "-e",
            "-f",
            "-m",
            "-A",
            "-B",
            "-C",
            "-g",
            "-t",
            "--glob",
            "--type",
            "--max-count",
            "--include",
            "--exclude",
        }
    ),
    "sed": frozenset({"-e", "-f", "-l", "-F", "-v", "--arg", "--argjson"}),
    "pytest": frozenset({"-k", "-m", "-p", "-c", "-o", "-n", "--rootdir", "--tb", "-W"}),
    "": frozenset({"-n", "-e", "-f", "-m", "-k", "-p", "-c", "-o", "-t"}),
}
_SEPARATORS = frozenset({"&&", "||", ";", "|", "&", "(", ")", ";;", "|&"})


@functools.lru_cache(maxsize=4096)
def _shell_tokens(line: str) -> tuple[str, ...]:
    """The shell tokens of one line (shlex, POSIX rules); plain words when it does not lex.

    Cached: agents run the same commands again and again, and shlex is slow. The result is
    a tuple, so no caller can change a cached value.
    """
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        return tuple(lexer)
    except ValueError:
        return tuple(line.split())


def _simple_commands(command: str) -> Iterator[list[str]]:
    """The simple commands of a shell line: split on ``&& || ; |`` and newlines; the body of
    a here-document is not parsed."""
    lines = command.split("\n")
    if any("<<" in line for line in lines):
        lines = lines[:1]
    for line in lines:
        current: list[str] = []
        for token in _shell_tokens(line):
            if token in _SEPARATORS:
                if current:
                    yield current
                current = []
            else:
                current.append(token)
        if current:
            yield current


def _operands(args: list[str], family: str = "") -> list[str]:
    """Arguments that are not options nor option values (``family`` selects which options
    take a value: read, search, sed, pytest)."""
    value_options = _VALUE_OPTIONS.get(family, _VALUE_OPTIONS[""])
    out, skip = [], False
    for arg in args:
        if skip:
            skip = False
        elif arg in value_options:
            skip = True
        elif not arg.startswith("-") or arg == "-":
            out.append(arg)
    return out


def _command_files(command: str) -> list[tuple[str, str]]:
    """Files a shell command reads or writes, by a small table of well-known programs.

    >>> _command_files("sed -n '1,40p' src/app.py && python -m pytest tests/t.py::test_a -q")
    [('src/app.py', 'read'), ('tests/t.py', 'tested')]
    >>> _command_files("grep -n ERROR logs/worker.log > out.txt")
    [('out.txt', 'written'), ('logs/worker.log', 'searched')]
    """
    return list(_command_files_cached(command))


@functools.lru_cache(maxsize=4096)
def _command_files_cached(command: str) -> tuple[tuple[str, str], ...]:
    """:func:`_command_files` as a tuple, cached (a command run N times is parsed once)."""
    found: list[tuple[str, str]] = []
    if "*** Begin Patch" in command:
        found.extend(_patch_files(command))
    for tokens in _simple_commands(command):
        args: list[str] = []
        index = 0
        while index < len(tokens):
            token = tokens[index]
            if token in (">", ">>", "&>", ">|", "<") and index + 1 < len(tokens):
                target = tokens[index + 1]
                if _pathlike(target) and not target.startswith("/dev/"):
                    found.append((target, "read" if token == "<" else "written"))
                index += 2
                continue
            args.append(token)
            index += 1
        while args and (re.fullmatch(r"\w+=.*", args[0]) or args[0] in _WRAPPERS):
            args = args[1:]
        if not args:
            continue
        prog, rest = args[0].rsplit("/", 1)[-1], args[1:]
        if prog in ("python", "python3", "py") and rest[:2] == ["-m", "pytest"]:
            prog, rest = "pytest", rest[2:]
        family = (
            "read"
            if prog in _READERS
            else "search"
            if prog in _SEARCHERS
            else "sed"
            if prog in ("sed", "awk", "gawk", "perl", "jq")
            else "pytest"
            if prog in ("pytest", "py.test")
            else ""
        )
        operands = _operands(rest, family)
        action = ""
        if prog in _READERS:
            action = "read"
        elif prog in _SEARCHERS:
            action = "searched"
            if not any(a in ("-e", "-f") for a in rest):
                operands = operands[1:]
        elif prog in ("sed", "awk", "gawk", "perl", "jq"):
            in_place = any(a.startswith("-i") or a == "--in-place" for a in rest)
            action = "edited" if in_place else "read"
            if not any(a in ("-e", "-f") for a in rest):
                operands = operands[1:]
        elif prog in ("pytest", "py.test"):
            action = "tested"
            operands = [o.split("::", 1)[0] for o in operands]
        elif prog in ("touch",):
            action = "created"
        elif prog in ("tee",):
            action = "written"
        elif prog in ("rm", "unlink"):
            action = "deleted"
        elif prog in ("cp", "mv", "install") and len(operands) >= 2:
            found.extend(
                (o, "read" if prog != "mv" else "moved") for o in operands[:-1] if _pathlike(o)
            )
            operands, action = operands[-1:], "written"
        elif prog in ("python", "python3", "node", "ruby", "bash", "sh") and operands:
            operands, action = operands[:1], "ran"
        if action:
            found.extend((o, action) for o in operands if _pathlike(o))
    return tuple(found)


_EXIT_RE = re.compile(
    r"(?im)^\s*(?:exit code|exit status|exited with code|process exited with code|"
    r"return code|returncode)\s*[:=]?\s*(-?\d+)\b|\bexit status (-?\d+)\b"
)
_JSON_EXIT_RE = re.compile(r'"(?:exit_code|exitCode|returncode|return_code)"\s*:\s*(-?\d+)')
_PYTEST_COUNTS_RE = re.compile(
    r"(?m)^[=\s]*((?:\d+ (?:failed|passed|errors?|skipped|xfailed|xpassed|deselected|"
    r"warnings?|rerun)(?:, )?)+)(?: in [\d.]+s)?(?: \([^)]*\))?[=\s]*$"
)


_EXIT_PHRASES = ("exit code", "exit status", "exited with code")
_RETURN_PHRASES = ("return code", "returncode")
"""Lower-cased literals one of which every :data:`_EXIT_RE` match contains (those of
``_EXIT_PHRASES`` hold ``exit``, those of ``_RETURN_PHRASES`` hold ``return``)."""

_FOLDS_TO_ASCII = FOLDS_TO_ASCII
"""A text holding one of these skips the literal prefilter (see
:data:`compactctl.summarize.redact.FOLDS_TO_ASCII`)."""


def _may_report_exit(text: str) -> bool:
    """False only when :data:`_EXIT_RE` cannot match ``text``: a cheap literal prefilter.

    The regex scans at about 10 MB/s (case-insensitive, multiline, tried at every position);
    ``str.lower`` and ``in`` run at memory speed, and most tool results name no exit code.

    >>> _may_report_exit("EXIT CODE: 1"), _may_report_exit("return 0")
    (True, False)
    """
    if not text.isascii() and any(c in text for c in _FOLDS_TO_ASCII):
        return True
    lowered = text.lower()
    if "exit" in lowered and any(p in lowered for p in _EXIT_PHRASES):
        return True
    return "return" in lowered and any(p in lowered for p in _RETURN_PHRASES)


def _exit_code(text: str) -> int | None:
    """The exit code a tool result reports, if it reports one.

    >>> _exit_code("Exit code: 2\\nWall time: 1s"), _exit_code('{"exit_code": 0}')
    (2, 0)
    """
    match = _EXIT_RE.search(text) if _may_report_exit(text) else None
    if match:
        return int(match.group(1) or match.group(2))
    head = text[:2000]
    match = _JSON_EXIT_RE.search(head) if 'ode"' in head else None
    return int(match.group(1)) if match else None


_PYTEST_WORDS = ("failed", "passed", "error", "skipped", "deselected", "warning", "rerun")
"""Literals one of which every :data:`_PYTEST_COUNTS_RE` match contains (``xfailed`` holds
``failed``, ``xpassed`` holds ``passed``; the regex is case-sensitive)."""


def _pytest_counts(text: str) -> str:
    """The last pytest count line, without its timing.

    >>> _pytest_counts("...\\n1 failed, 7 passed in 1.45s\\n")
    '1 failed, 7 passed'
    """
    tail = text[-5000:]
    if not any(word in tail for word in _PYTEST_WORDS):
        return ""
    matches = _PYTEST_COUNTS_RE.findall(tail)
    return matches[-1].strip().rstrip(",") if matches else ""


_EXC_AT_START_RE = re.compile(r"^(?:[a-z_][\w]*\.)*(?P<name>[A-Z][A-Za-z0-9_]*):(?:\s|$)")
_EXC_IN_LINE_RE = re.compile(r"(?<![\w.])(?:[a-z_][\w]*\.)*(?P<name>[A-Z][A-Za-z0-9_]*):\s")
_ERROR_PREFIX_RE = re.compile(
    r"^(?:error|fatal|panic|ERROR|FATAL|PANIC|Error)(?:\[\w+\])?[:!]\s*\S"
)
_LOG_LEVEL_RE = re.compile(r"\b(?P<level>ERROR|FATAL|CRITICAL)\b")
_FAILED_RE = re.compile(r"^(?:FAILED|ERROR) (?P<test>\S+::\S+|\S+\.py)(?: - (?P<msg>.*))?$")
_TEST_ID_RE = re.compile(r"(?P<file>[\w./-]+\.py)::(?P<name>[\w\[\]./-]+(?:::[\w\[\]-]+)*)")


def _exception_name(name: str) -> bool:
    """Whether ``name`` reads as an exception class (not a warning, not a label).

    >>> [_exception_name(n) for n in ("ValueError", "LeaseExpired", "Decision",
    ...                                "DeprecationWarning")]
    [True, True, False, False]
    """
    if name.endswith("Warning"):
        return False
    if re.search(r"(?:Error|Exception|Exit|Interrupt|Failure|Fault|Timeout)$", name):
        return True
    return len(re.findall(r"[A-Z][a-z0-9]+", name)) >= 2 and name[1:].lower() != name[1:]


def _error_lines(text: str) -> tuple[list[str], list[str]]:
    """The error lines and failing test ids of a failed tool result.

    Kept, in order: pytest ``E   Exc: ...`` lines and any line that starts with an exception
    name (the final line of a traceback), ``error:``/``fatal:`` lines, and log lines at
    ERROR level; the message of ``FAILED test - msg`` lines only when nothing else was found;
    at last the last non-empty line. At most :data:`ERROR_LINES_PER_RESULT` distinct lines.
    """
    lines: list[str] = []
    failed_messages: list[str] = []
    tests: list[str] = []
    for raw in text.split("\n"):
        line = raw.strip()
        if not line:
            continue
        failed = _FAILED_RE.match(line)
        if failed:
            tests.append(failed.group("test"))
            if failed.group("msg"):
                failed_messages.append(failed.group("msg").strip())
            continue
        if line.startswith("E ") or line == "E":
            line = line[1:].strip()
        start = _EXC_AT_START_RE.match(line)
        if (start and _exception_name(start.group("name"))) or _ERROR_PREFIX_RE.match(line):
            lines.append(line)
        elif _LOG_LEVEL_RE.search(line):
            lines.append(_log_error(line))
    if not lines:
        lines = failed_messages
    if not lines:
        tail = [ln.strip() for ln in text.split("\n") if ln.strip()]
        tail = [ln for ln in tail if not _PYTEST_COUNTS_RE.match(ln)] or tail
        lines = tail[-1:]
    return _dedupe_exact(lines)[:ERROR_LINES_PER_RESULT], _dedupe_exact(tests)


def _log_error(line: str) -> str:
    """From an ERROR log line, the part from the exception name (or the level) on."""
    for match in _EXC_IN_LINE_RE.finditer(line):
        if _exception_name(match.group("name")):
            return line[match.start() :]
    level = _LOG_LEVEL_RE.search(line)
    return line[level.start() :] if level else line


_FOUND_ERROR_MARKERS = ("ERROR", "FATAL", "CRITICAL", "Traceback (most recent call last)")
"""Literals one of which a text must hold for :func:`_found_errors` to find anything: every
match of the case-sensitive :data:`_LOG_LEVEL_RE` is one of the first three, and a traceback
starts with the last (a cheap ``in`` test skips the per-line scan of most outputs)."""


def _found_errors(text: str) -> list[str]:
    """Error lines inside the output of a tool that did not fail: ``ERROR``/``FATAL``
    log lines, and the final line of a Python traceback.

    >>> _found_errors("10:... ERROR quillpad.storage LeaseExpired: lease 8525 expired")
    ['LeaseExpired: lease 8525 expired']
    """
    if not any(marker in text for marker in _FOUND_ERROR_MARKERS):
        return []
    found: list[str] = []
    lines = text.split("\n")
    for index, raw in enumerate(lines):
        if (
            "ERROR" not in raw
            and "FATAL" not in raw
            and "CRITICAL" not in raw
            and "Traceback (most recent call last)" not in raw
        ):
            continue  # _FOUND_ERROR_MARKERS: neither branch below can fire on this line
        line = raw.strip()
        if _LOG_LEVEL_RE.search(line) and not line.startswith(("def ", "class ", "#", "//")):
            found.append(_log_error(line))
        elif line.startswith("Traceback (most recent call last)"):
            for after in lines[index + 1 :]:
                start = _EXC_AT_START_RE.match(after.strip())
                if start and _exception_name(start.group("name")):
                    found.append(after.strip())
                    break
    return _dedupe_exact(found)[:ERROR_LINES_PER_RESULT]


def _dedupe_exact(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(i for i in items if i))


def _ledger_line(text: str) -> str:
    return _clip(_one_line(text), LEDGER_LINE_MAX)


# =========================================================================== facts


@dataclass
class _File:
    path: str
    actions: dict[str, int] = field(default_factory=dict)

    def add(self, action: str, count: int = 1) -> None:
        self.actions[action] = self.actions.get(action, 0) + count

    @property
    def modified(self) -> bool:
        return any(a in ("edited", "written", "created", "deleted", "moved") for a in self.actions)

    def line(self, with_actions: bool = True) -> str:
        if not with_actions or not self.actions:
            return _code(self.path)
        parts = [a if n == 1 else f"{a} ×{n}" for a, n in self.actions.items()]
        return f"{_code(self.path)} — {', '.join(parts)}"


@dataclass
class _Command:
    command: str
    runs: int = 0
    outcome: str = ""
    failed_before: bool = False

    def line(self, with_outcome: bool = True) -> str:
        head = f"ran {_code(self.command)}" + (f" ×{self.runs}" if self.runs > 1 else "")
        if not with_outcome or not self.outcome:
            return head
        tail = self.outcome + ("; earlier runs failed" if self.failed_before else "")
        return f"{head} — {tail}"


@dataclass
class _Error:
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

    def ledger(self) -> str:
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

    def bullet(self, followup_cap: int) -> str:
        text = self.ledger()
        if followup_cap > 0 and self.followup:
            text += " → then: " + _clip(self.followup, followup_cap)
        return text


@dataclass
class _Decision:
    text: str
    rank: int
    order: int

    def clipped(self, cap: int, floor: int = 200) -> str:
        """The decision sentence (up to ``max(cap, floor)`` characters), then as much of its
        reason as fits in ``cap``."""
        sentences = _sentences(self.text) or [self.text]
        first = _clip(sentences[0], max(cap, floor))
        room = cap - len(first) - 1
        rest = _join_sentences(sentences[1:])
        if rest and room >= 30:
            return _join_sentences([first, _clip(rest, room)])
        return first


@dataclass
class _Stats:
    roles: Counter[str] = field(default_factory=Counter)
    tools: Counter[str] = field(default_factory=Counter)
    turns: list[int] = field(default_factory=list)
    failed_results: int = 0
    skipped_summaries: int = 0


@dataclass
class _Facts:
    primary: list[str] = field(default_factory=list)
    constraints: list[str] = field(default_factory=list)
    user_messages: list[tuple[str, str]] = field(default_factory=list)
    concepts: list[str] = field(default_factory=list)
    files: dict[str, _File] = field(default_factory=dict)
    commands: dict[str, _Command] = field(default_factory=dict)
    errors: list[_Error] = field(default_factory=list)
    decisions: list[_Decision] = field(default_factory=list)
    done: list[str] = field(default_factory=list)
    pending: list[str] = field(default_factory=list)
    problem: list[str] = field(default_factory=list)
    current: list[str] = field(default_factory=list)
    last_message: str = ""
    next_step: str = ""
    stats: _Stats = field(default_factory=_Stats)
    prior_merged: str = ""

    def file(self, path: str) -> _File:
        path = path.strip().strip("'\"")
        if path not in self.files:
            self.files[path] = _File(path)
        return self.files[path]


# =========================================================================== extraction


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

    def scan(self, text: str, introduce: bool = True) -> None:
        for test in _TEST_ID_RE.finditer(text):
            self.add(test.group("name").split("[")[0], 2) if introduce else None
        for ticket in _TICKET_RE.findall(text):
            if introduce or ticket in self.order:
                self.add(ticket, 3)
        if introduce:
            for span in _BACKTICK_RE.findall(text):
                if not _pathlike(span.strip()):
                    self.add(span.strip())
        plain = _PATH_IN_TEXT_RE.sub(" ", _TICKET_RE.sub(" ", text))
        for ident in _IDENT_RE.findall(plain):
            if introduce or ident in self.order:
                self.add(ident)

    def ranked(self) -> list[str]:
        return sorted(self.order, key=lambda n: (-self.priority[n], -self.counts[n], self.order[n]))


def _tool_calls(message: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The well-formed entries of a message's ``toolCalls`` (anything else is ignored)."""
    calls = message.get("toolCalls")
    return [c for c in calls if isinstance(c, Mapping)] if isinstance(calls, list) else []


def _arguments(call: Mapping[str, Any]) -> dict[str, Any]:
    args = call.get("arguments", call.get("input", {}))
    if isinstance(args, str):
        try:
            parsed = json.loads(args)
        except ValueError:
            return {"input": args}
        return parsed if isinstance(parsed, dict) else {"input": args}
    return dict(args) if isinstance(args, Mapping) else {}


def _shell_command(args: Mapping[str, Any]) -> str:
    """The command string of a shell tool call (``command`` or ``cmd``; a list is joined, and
    ``["bash", "-lc", script]`` gives the script)."""
    value = args.get("command", args.get("cmd"))
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        if len(value) >= 3 and value[-2] in ("-c", "-lc", "-ic"):
            return str(value[-1])
        return shlex.join(value)
    return value if isinstance(value, str) else ""


def _command_text(command: str) -> str:
    """A command as the ledger keeps it: its first line in full (up to
    :data:`LEDGER_LINE_MAX`), with a count of any further lines."""
    lines = command.strip().split("\n")
    head = _clip(lines[0].strip(), LEDGER_LINE_MAX)
    return head + (f" (+{len(lines) - 1} lines)" if len(lines) > 1 else "")


def _runner(command: str) -> tuple[str, frozenset[str]]:
    """(program, positional arguments) used to decide whether a success resolves a failure."""
    tokens = next(iter(_simple_commands(command)), [])
    while tokens and (re.fullmatch(r"\w+=.*", tokens[0]) or tokens[0] in _WRAPPERS):
        tokens = tokens[1:]
    if tokens[:1] in (["uv"], ["poetry"], ["pipenv"]) and tokens[1:2] == ["run"]:
        tokens = tokens[2:]
    if tokens[:1] and tokens[0] in ("python", "python3") and tokens[1:2] == ["-m"]:
        tokens = tokens[2:]
    if not tokens:
        return "", frozenset()
    return tokens[0], frozenset(_operands(tokens[1:]))


def _resolves(success: str, failure: str) -> bool:
    """Whether a successful run of ``success`` shows that the failed ``failure`` is fixed:
    same program, and no positional argument the failure did not have (a broader run).

    >>> _resolves("python -m pytest -q", "python -m pytest tests/test_a.py -q")
    True
    >>> _resolves("make lint", "make test")
    False
    """
    if success == failure:
        return True
    prog_s, args_s = _runner(success)
    prog_f, args_f = _runner(failure)
    return bool(prog_s) and prog_s == prog_f and args_s <= args_f


def _plan_items(args: Mapping[str, Any]) -> list[tuple[str, bool]] | None:
    """(text, done) items of a plan/todo tool call, or None when it carries no list."""
    for key in _PLAN_ITEM_KEYS:
        value = args.get(key)
        if isinstance(value, list):
            items = []
            for item in value:
                if isinstance(item, str):
                    items.append((item, False))
                elif isinstance(item, Mapping):
                    text = next(
                        (item[k] for k in _PLAN_TEXT_KEYS if isinstance(item.get(k), str)), ""
                    )
                    status = str(item.get("status", item.get("state", ""))).lower()
                    if text.strip():
                        items.append(
                            (
                                text.strip(),
                                status in _DONE_STATUSES or item.get("completed") is True,
                            )
                        )
            return items
    return None


_LABEL_PREFIX_RE = re.compile(
    r"^(?:constraints?|requirements?|rules?|please|heads-up|note|important|also|nb|"
    r"约束|要求|注意|另外|提醒)\s*[:：]\s*",
    re.IGNORECASE,
)


def _constraint_text(sentence: str) -> str:
    """A constraint sentence without a leading label such as ``Constraints:``.

    >>> _constraint_text("Heads-up: do not modify the importer.")
    'do not modify the importer.'
    """
    return _clip(_LABEL_PREFIX_RE.sub("", sentence).strip() or sentence, LEDGER_LINE_MAX)


def _shorten_user(text: str, head: int, constraints: bool = True) -> str:
    """A user message for the summary, whole sentences in their order: the opening sentences
    up to ``head`` characters, every constraint sentence in full, and the last sentence;
    ``…`` marks what was left out. ``head`` 0 keeps constraint sentences only (or the first
    60 characters when there are none). ``constraints=False`` leaves constraint sentences
    out (they are listed on their own).

    >>> _shorten_user("Fix the pager. " + "It is slow. " * 30 + "Do not add deps. Thanks!", 30)
    'Fix the pager. It is slow. … Do not add deps. Thanks!'
    >>> _shorten_user("Fix the pager. Do not add deps.", 200, constraints=False)
    'Fix the pager.'
    """
    sentences, flags = _sentence_flags(text)
    plain = sum(len(s) + 1 for s, c in zip(sentences, flags, strict=True) if not c)
    budget = plain if head > 0 and plain <= head + 60 else head
    parts: list[str] = []
    used, gap = 0, False
    for index, (sentence, is_constraint) in enumerate(zip(sentences, flags, strict=True)):
        if is_constraint and not constraints:
            continue
        last = index == len(sentences) - 1
        if is_constraint or (budget > 0 and (used + len(sentence) <= budget or last)):
            piece = sentence if is_constraint else _clip(sentence, max(budget, 80))
        elif budget > 0 and used == 0:
            piece = _clip(sentence, budget)
        else:
            gap = True
            continue
        if gap:
            parts.append(_ELLIPSIS)
            gap = False
        parts.append(_clip(piece, LEDGER_LINE_MAX))
        used += 0 if is_constraint else len(piece) + 1
    if not parts:
        parts = [_clip(_inline(text), 60 if constraints else 40)]
    return re.sub(r"…(?:\s*…)+", _ELLIPSIS, _join_sentences(parts))


@functools.lru_cache(maxsize=1024)
def _sentence_flags(text: str) -> tuple[tuple[str, ...], tuple[bool, ...]]:
    """The sentences of ``text`` and whether each states a constraint, cached: rendering
    shortens every user message once per level of detail tried (up to 15 times)."""
    sentences = tuple(_sentences(text))
    return sentences, tuple(_is_constraint(s) for s in sentences)


def _join_sentences(parts: Sequence[str]) -> str:
    """Join sentences with a space, but none after CJK punctuation.

    >>> _join_sentences(["先复现。", "再修复。", "Then test."])
    '先复现。再修复。Then test.'
    """
    out = ""
    for part in parts:
        out += ("" if not out or out.endswith(("。", "！", "？", "；", "：")) else " ") + part
    return out


class _Extractor:
    """One pass over a span of canonical messages, filling :class:`_Facts`."""

    def __init__(self, messages: Sequence[Mapping[str, Any]]) -> None:
        self.messages = [
            m for m in messages if isinstance(m, Mapping) and m.get("type", "message") == "message"
        ]
        self.facts = _Facts()
        self.concepts = _Concepts()
        self.results: dict[str, Mapping[str, Any]] = {}
        for message in self.messages:
            if message.get("role") == "tool" and isinstance(message.get("toolCallId"), str):
                self.results.setdefault(message["toolCallId"], message)
        self.awaiting_followup: list[_Error] = []
        self.seen_error_lines: dict[str, _Error] = {}
        self.newest_plan: list[tuple[str, bool]] | None = None
        self.newest_checkboxes: list[tuple[str, bool]] = []
        self.sentence_pending: list[str] = []
        self.decision_order = 0
        self.last_user: tuple[int, str, str] | None = None
        self.last_assistant_text_index = -1
        self.last_turn_calls: list[str] = []

    # -- driver

    def run(self) -> _Facts:
        called: set[str] = set()
        for index, message in enumerate(self.messages):
            role = message.get("role")
            turn = message.get("turnId")
            if isinstance(turn, int) and not isinstance(turn, bool) and turn > 0:
                self.facts.stats.turns.append(turn)
            if role in ("user", "assistant", "tool", "system"):
                self.facts.stats.roles[str(role)] += 1
            if role == "user":
                self._user(index, message)
            elif role == "assistant":
                for call in _tool_calls(message):
                    if isinstance(call, Mapping) and isinstance(call.get("id"), str):
                        called.add(call["id"])
                self._assistant(index, message)
            elif role == "tool":
                if message.get("isError"):
                    self.facts.stats.failed_results += 1
                call_id = message.get("toolCallId")
                if not isinstance(call_id, str) or call_id not in called:
                    self._orphan_result(message)
        self._finish()
        return self.facts

    # -- user

    def _user(self, index: int, message: Mapping[str, Any]) -> None:
        if message.get("summaryOf"):
            self.facts.stats.skipped_summaries += 1
            return
        text = _text_of(message.get("content")).strip()
        if not text:
            return
        turn = message.get("turnId")
        label = f"T{turn}" if isinstance(turn, int) else ""
        self.facts.user_messages.append((label, text))
        if not self.facts.primary:
            self.facts.primary.append(text)
        self.last_user = (index, label, text)
        self.last_turn_calls = []
        self.concepts.scan(text)
        for sentence in _sentences(text):
            if sentence.endswith(("?", "？")):
                continue
            if _DEFER_RE.search(sentence) and _long_enough(sentence):
                self.sentence_pending.append(sentence)
            elif _is_constraint(sentence):
                self.facts.constraints.append(_constraint_text(sentence))

    # -- assistant

    def _assistant(self, index: int, message: Mapping[str, Any]) -> None:
        text = _text_of(message.get("content")).strip()
        if text:
            for error in self.awaiting_followup:
                error.followup = _join_sentences(_sentences(text)[:2])
            self.awaiting_followup = []
        calls = _tool_calls(message)
        edits: list[str] = []
        for call in calls:
            edits.extend(self._call(call))
        if not text:
            return
        self.last_assistant_text_index = index
        self.facts.last_message = text
        self.concepts.scan(text, introduce=False)
        self._checkboxes(text)
        sentences = _sentences(text)
        for position, sentence in enumerate(sentences):
            rank = _decision_rank(sentence)
            if rank:
                decision = sentence
                if (
                    rank == 3
                    and position + 1 < len(sentences)
                    and not _decision_rank(sentences[position + 1])
                    and not _NEXT_RE.search(sentences[position + 1])
                ):
                    decision = _join_sentences([decision, sentences[position + 1]])
                self.facts.decisions.append(_Decision(decision, rank, self.decision_order))
                self.decision_order += 1
            if _NEXT_RE.search(sentence):
                self.facts.next_step = _NEXT_LABEL_RE.sub("", sentence).strip() or sentence
            elif (
                _PENDING_RE.search(sentence)
                and _long_enough(sentence)
                and not _CHECKBOX_RE.match(sentence)
            ):
                self.sentence_pending.append(sentence)
        if edits:
            self.facts.problem.append(
                _inline(text) + " (changed " + ", ".join(_dedupe_exact(edits)) + ")"
            )

    def _checkboxes(self, text: str) -> None:
        boxes = []
        for line in text.split("\n"):
            match = _CHECKBOX_RE.match(line)
            if match:
                boxes.append((match.group("text").strip(), match.group("mark") != " "))
        if boxes:
            self.newest_checkboxes = boxes
            self.facts.done.extend(t for t, done in boxes if done)

    # -- tool calls

    def _call(self, call: Mapping[str, Any]) -> list[str]:
        """Record one tool call and its result; return the paths it changed."""
        name = str(call.get("name") or "tool")
        args = _arguments(call)
        result = self.results.get(str(call.get("id")))
        result_text = _text_of(result.get("content")) if result else ""
        failed = bool(result and result.get("isError"))
        code = _exit_code(result_text) if result else None
        if code not in (None, 0):
            failed = True
        self.facts.stats.tools[name] += 1
        kind = _tool_kind(name)
        command = _shell_command(args) if kind in ("shell", "other") else ""
        summary = name
        changed: list[str] = []

        if kind == "plan":
            items = _plan_items(args)
            if items is not None:
                self.newest_plan = items
                self.facts.done.extend(t for t, done in items if done)
        elif command:
            kind = "shell"
            text = _command_text(command)
            summary = f"{name} {_code(text)}"
            record = self.facts.commands.setdefault(text, _Command(text))
            record.failed_before = record.failed_before or (
                record.runs > 0 and record.outcome.startswith(("failed", "exit"))
            )
            record.runs += 1
            record.outcome = self._outcome(result, result_text, failed, code)
            for path, action in _command_files(command):
                self.facts.file(path).add(action + (" (failed)" if failed else ""))
                if action in ("edited", "written", "created", "deleted"):
                    changed.append(path)
            if not failed and result is not None:
                self._resolve(command=text)
        else:
            files = self._call_files(kind, args, result_text)
            for path, action in files:
                self.facts.file(path).add(action + (" (failed)" if failed else ""))
                if action in ("edited", "written", "created", "deleted") and not failed:
                    changed.append(path)
            if files:
                summary = f"{name} {files[0][0]}"
            if not failed and result is not None:
                self._resolve(tool_key=summary)

        self.last_turn_calls.append(summary)
        if result is None:
            return changed
        if failed:
            lines, tests = _error_lines(result_text)
            source = _code(_command_text(command)) if kind == "shell" else summary
            self._add_error(
                _Error(
                    source=source,
                    lines=[_ledger_line(ln) for ln in lines],
                    tests=tests,
                    counts=_pytest_counts(result_text),
                    exit_code=code,
                    command=_command_text(command) if kind == "shell" else "",
                    tool_key="" if kind == "shell" else summary,
                )
            )
        elif kind not in ("read", "edit", "write", "patch", "plan"):
            found = _found_errors(result_text)
            if found:
                source = _code(_command_text(command)) if kind == "shell" else summary
                self._add_error(
                    _Error(
                        source=source,
                        lines=[_ledger_line(x) for x in found],
                        found=True,
                        resolved=True,
                    )
                )
        return changed

    def _call_files(
        self, kind: str, args: Mapping[str, Any], result_text: str
    ) -> list[tuple[str, str]]:
        files: list[tuple[str, str]] = []
        editor = args.get("command")
        action = _EDITOR_COMMANDS.get(editor, "") if isinstance(editor, str) else ""
        action = action or _KIND_ACTION.get(kind, "touched")
        if action == "written" and re.search(
            r"\b(?:created|new file)\b", result_text[:300], re.IGNORECASE
        ):
            action = "created"
        paths = [args[k] for k in _PATH_KEYS if isinstance(args.get(k), str)]
        for key in _PATH_LIST_KEYS:
            value = args.get(key)
            if isinstance(value, list):
                paths.extend(v for v in value if isinstance(v, str))
        for path in paths:
            if kind == "search" and not _pathlike(path):
                continue
            if path.strip() and path.strip() not in (".", "./"):
                files.append((path.strip(), action))
        if kind == "patch" or any(
            isinstance(v, str) and "*** Begin Patch" in v for v in args.values()
        ):
            for value in args.values():
                if isinstance(value, str):
                    files.extend(_patch_files(value))
        return files

    @staticmethod
    def _outcome(
        result: Mapping[str, Any] | None, text: str, failed: bool, code: int | None
    ) -> str:
        if result is None:
            return "no result"
        counts = _pytest_counts(text)
        head = "ok"
        if failed:
            head = f"exit {code}" if code not in (None, 0) else "failed"
        return head + (f", {counts}" if counts else "")

    def _orphan_result(self, message: Mapping[str, Any]) -> None:
        text = _text_of(message.get("content"))
        name = str(message.get("toolName") or "tool")
        if message.get("isError"):
            lines, tests = _error_lines(text)
            self._add_error(
                _Error(
                    source=name,
                    lines=[_ledger_line(x) for x in lines],
                    tests=tests,
                    counts=_pytest_counts(text),
                    tool_key=name,
                )
            )

    # -- errors

    def _add_error(self, error: _Error) -> None:
        fresh = [line for line in error.lines if line not in self.seen_error_lines]
        if not fresh and error.lines:
            earlier = self.seen_error_lines[error.lines[0]]
            if not error.found:
                earlier.repeats += 1
                earlier.resolved = False
            return
        error.lines = fresh
        for line in fresh:
            self.seen_error_lines[line] = error
        for test in error.tests:
            self.concepts.add(test.split("::")[-1].split("[")[0], 2)
        for line in fresh:
            self.concepts.scan(line)
        self.facts.errors.append(error)
        if not error.found:
            self.awaiting_followup.append(error)

    def _resolve(self, command: str = "", tool_key: str = "") -> None:
        for error in self.facts.errors:
            if error.resolved or error.found:
                continue
            by_command = bool(command and error.command and _resolves(command, error.command))
            if by_command or (tool_key and error.tool_key == tool_key):
                error.resolved = True

    # -- end of span

    def _finish(self) -> None:
        facts = self.facts
        facts.concepts = self.concepts.ranked()
        facts.constraints = _dedupe(facts.constraints, similar=True)
        facts.done = _dedupe(facts.done)
        authoritative = [t for t, done in (self.newest_plan or []) if not done]
        authoritative += [t for t, done in self.newest_checkboxes if not done]
        others = [p for p in self.sentence_pending if not any(_same_task(p, d) for d in facts.done)]
        pending: list[str] = []
        for item in authoritative + others:
            if not any(_same_task(item, p) for p in pending):
                pending.append(item)
        if self.last_user is not None and self.last_user[0] > self.last_assistant_text_index:
            pending.append(
                f"answer the last user message ({self.last_user[1]}): "
                + _clip(_inline(self.last_user[2]), 160)
            )
        facts.pending = pending
        facts.decisions = _dedupe_decisions(facts.decisions)
        if self.last_user is not None:
            facts.current.append(
                f"latest request ({self.last_user[1]}): " + _clip(_inline(self.last_user[2]), 200)
            )
        if self.last_turn_calls:
            calls = self.last_turn_calls[-6:]
            more = len(self.last_turn_calls) - len(calls)
            facts.current.append(
                "tool calls since then: "
                + "; ".join(calls)
                + (f" (+{more} earlier)" if more > 0 else "")
            )
        if facts.last_message:
            facts.current.append("last assistant message: " + _inline(facts.last_message))


def _dedupe_decisions(decisions: list[_Decision]) -> list[_Decision]:
    seen: set[str] = set()
    out = []
    for decision in decisions:
        key = _norm(decision.text)
        if key and key not in seen:
            seen.add(key)
            out.append(decision)
    return out


# =========================================================================== prior state

_FILE_LINE_RE = re.compile(r"^(`+) ?(?P<path>.+?) ?\1(?: — (?P<actions>.*))?$")
_COMMAND_LINE_RE = re.compile(
    r"^ran (`+) ?(?P<cmd>.+?) ?\1(?: ×(?P<runs>\d+))?"
    r"(?: — (?P<outcome>.*))?$"
)
_ERROR_SOURCE_RE = re.compile(r"^(`+) ?(?P<cmd>.+?) ?\1 failed")
_ACTION_RE = re.compile(r"^(?P<action>.+?)(?: ×(?P<count>\d+))?$")
_LABEL_RE = re.compile(r"^(?P<label>T\d+): (?P<text>.*)$", re.DOTALL)
_CONSTRAINT_PREFIX = "Constraint: "
_FOCUS_PREFIX = "Focus for this summary: "
_DONE_PREFIX = "Done: "


def _prior_file(facts: _Facts, line: str) -> None:
    match = _FILE_LINE_RE.match(line)
    if not match:
        facts.file(line)
        return
    record = facts.file(match.group("path"))
    for part in (match.group("actions") or "").split(", "):
        action = _ACTION_RE.match(part.strip())
        if action and part.strip():
            record.add(action.group("action"), int(action.group("count") or 1))


def _prior_command(facts: _Facts, line: str) -> bool:
    match = _COMMAND_LINE_RE.match(line)
    if not match:
        return False
    outcome = match.group("outcome") or ""
    failed_before = outcome.endswith("; earlier runs failed")
    outcome = outcome.removesuffix("; earlier runs failed")
    facts.commands[match.group("cmd")] = _Command(
        match.group("cmd"), int(match.group("runs") or 1), outcome, failed_before
    )
    return True


def _prior_error(line: str, resolved: bool | None = None) -> _Error:
    text = line.split(" → then: ")[0]
    source = _ERROR_SOURCE_RE.match(text)
    if resolved is None:
        resolved = not text.endswith("; unresolved")
    return _Error(
        source="",
        lines=[],
        raw=text,
        resolved=resolved,
        found=text.startswith("seen in the output of"),
        command=source.group("cmd") if source else "",
    )


def _facts_from_sections(text: str) -> _Facts:
    parsed = parse_sections(text).sections
    facts = _Facts()
    for item in parsed.get("Primary Request", []):
        if item.startswith(_CONSTRAINT_PREFIX):
            facts.constraints.append(item.removeprefix(_CONSTRAINT_PREFIX))
        elif not item.startswith(_FOCUS_PREFIX) and item != NONE_BULLET:
            facts.primary.append(item)
    facts.concepts = [c for c in parsed.get("Key Technical Concepts", []) if c != NONE_BULLET]
    for item in parsed.get("Files and Code Sections", []):
        if item != NONE_BULLET:
            _prior_file(facts, item)
    facts.errors = [_prior_error(e) for e in parsed.get("Errors and Fixes", []) if e != NONE_BULLET]
    for item in parsed.get("Problem Solving", []):
        if item == NONE_BULLET or _prior_command(facts, item):
            continue
        if item.startswith(_DONE_PREFIX):
            facts.done.append(item.removeprefix(_DONE_PREFIX))
        else:
            facts.problem.append(item)
    facts.decisions = [
        _Decision(d, _decision_rank(d) or 2, i)
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


def _facts_from_task_state(state: Mapping[str, Any]) -> _Facts:
    facts = _Facts()

    def strings(key: str) -> list[str]:
        value = state.get(key)
        return (
            [v for v in value if isinstance(v, str) and v.strip()]
            if isinstance(value, list)
            else []
        )

    goal = state.get("goal")
    if isinstance(goal, str) and goal.strip():
        facts.primary.append(goal)
    for item in strings("progress"):
        if item.startswith(("fixed: ", "found: ")):
            facts.errors.append(_prior_error(item.split(": ", 1)[1], resolved=True))
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
        _Decision(d, _decision_rank(d) or 2, i) for i, d in enumerate(strings("decisions"))
    ]
    facts.constraints = strings("user_constraints")
    return facts


def _facts_from_prior(prior: SummaryResult) -> _Facts:
    """Parse an earlier summary back into facts; an unreadable one becomes one note."""
    if prior.task_state is not None:
        return _facts_from_task_state(prior.task_state)
    try:
        if prior.format == "task-state":
            return _facts_from_task_state(parse_task_state(prior.text).task_state)
        return _facts_from_sections(prior.text)
    except SummaryFormatError:
        facts = _Facts()
        if prior.text.strip():
            facts.problem.append("earlier summary (unparsed): " + _clip(_inline(prior.text), 600))
        return facts


def _merge_errors(prior: list[_Error], new: list[_Error]) -> list[_Error]:
    """Prior errors, then the new ones that are not already there: a new error whose every
    line is in an earlier entry is folded into it (marking it unresolved again when the new
    one is unresolved)."""
    merged: list[_Error] = []
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


def _merge(prior: _Facts, new: _Facts) -> _Facts:
    """Prior state first, then the new span; see the module docstring for the rules."""
    merged = _Facts(stats=new.stats)
    merged.primary = prior.primary or new.primary
    merged.constraints = _dedupe(prior.constraints + new.constraints, similar=True)
    merged.user_messages = prior.user_messages + new.user_messages
    merged.concepts = _dedupe_exact(prior.concepts + new.concepts)
    for source in (prior, new):
        for path, record in source.files.items():
            target = merged.file(path)
            for action, count in record.actions.items():
                target.add(action, count)
        for text, command in source.commands.items():
            old = merged.commands.get(text)
            if old is None:
                merged.commands[text] = _Command(
                    text, command.runs, command.outcome, command.failed_before
                )
            else:
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
            and error.command
            and any(
                _resolves(text, error.command)
                for text, c in new.commands.items()
                if c.outcome.startswith("ok")
            )
        ):
            error.resolved = True
            error.raw = error.raw.removesuffix("; unresolved") + "; resolved later"
    merged.errors = _merge_errors(prior.errors, new.errors)
    offset = len(prior.decisions)
    merged.decisions = _dedupe_decisions(
        prior.decisions + [_Decision(d.text, d.rank, d.order + offset) for d in new.decisions]
    )
    merged.done = _dedupe(prior.done + new.done)
    still_open = [p for p in prior.pending if not any(_same_task(p, d) for d in new.done)]
    merged.pending = []
    for item in still_open + new.pending:
        if not any(_same_task(item, p) for p in merged.pending):
            merged.pending.append(item)
    merged.problem = prior.problem + new.problem
    merged.current = new.current or prior.current
    merged.last_message = new.last_message
    merged.next_step = new.next_step or ("" if new.current else prior.next_step)
    merged.prior_merged = "yes"
    return merged


# =========================================================================== rendering


@dataclass(frozen=True)
class _Detail:
    """One level of detail of the ``sections`` rendering (caps in characters; counts).

    ``user_last`` -1 keeps every user message; N keeps the newest N and a note.
    """

    user_head: int = 200
    user_constraints: bool = True
    user_last: int = -1
    prose_cap: int = 300
    followup_cap: int = 200
    concepts: int = 15
    problem_items: int = 10
    done_items: int = 50
    decision_items: int = 12
    current_cap: int = 600
    current_items: int = 3
    pending_cap: int = 200
    outcomes: bool = True
    file_actions: bool = True
    full_analysis: bool = True


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


def _ordered_files(facts: _Facts) -> list[_File]:
    files = list(facts.files.values())
    return [f for f in files if f.modified] + [f for f in files if not f.modified]


def _top_decisions(facts: _Facts, count: int) -> list[_Decision]:
    chosen = sorted(facts.decisions, key=lambda d: (-d.rank, d.order))[:count]
    return sorted(chosen, key=lambda d: d.order)


def _next_step(facts: _Facts) -> str:
    if facts.next_step:
        return facts.next_step
    if facts.pending:
        return "(from the pending tasks) " + facts.pending[0]
    unresolved = [e for e in facts.errors if not e.resolved and not e.found]
    if unresolved:
        return "(unresolved error) " + unresolved[0].ledger()
    return "No next step was stated."


def _analysis(facts: _Facts, request: SummaryRequest, full: bool = True) -> str:
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
        lines.append("Focus requested: " + _one_line(request.instructions))
    return "\n".join(lines)


def _sections(facts: _Facts, detail: _Detail, request: SummaryRequest) -> dict[str, list[str]]:
    prose = detail.prose_cap
    primary = [
        _clip(_shorten_user(p, max(detail.user_head, 120), constraints=False), max(prose, 100))
        for p in facts.primary
    ]
    if request.instructions.strip():
        primary.append(_FOCUS_PREFIX + _clip(_one_line(request.instructions), max(prose, 100)))
    primary += [_CONSTRAINT_PREFIX + c for c in facts.constraints]
    problem = [c.line(detail.outcomes) for c in facts.commands.values()]
    problem += [
        _DONE_PREFIX + _clip(_inline(d), detail.pending_cap)
        for d in facts.done[: detail.done_items]
    ]
    if detail.problem_items:
        problem += [_clip(p, prose) for p in facts.problem[-detail.problem_items :]]
    users = [
        (f"{label}: " if label else "")
        + _shorten_user(text, detail.user_head, detail.user_constraints)
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
        "Pending Tasks": [_clip(_inline(p), detail.pending_cap) for p in facts.pending],
        "Current Work": [
            _clip(c, detail.current_cap) for c in facts.current[-detail.current_items :]
        ],
        "Optional Next Step": [_clip(_inline(_next_step(facts)), detail.pending_cap)],
    }
    return {name: sections[name] or [NONE_BULLET] for name in SECTIONS}


def _render_sections(facts: _Facts, request: SummaryRequest) -> tuple[str, tuple[str, ...]]:
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


def _task_state(facts: _Facts) -> TaskState:
    progress = [_inline(d) for d in facts.done]
    progress += ["found: " + e.ledger() for e in facts.errors if e.found]
    progress += ["fixed: " + e.ledger() for e in facts.errors if e.resolved and not e.found]
    goal = _shorten_user(facts.primary[0], 300, constraints=False) if facts.primary else ""
    return TaskState(
        goal=goal,
        progress=_dedupe_exact(progress),
        open_items=_dedupe_exact(_inline(p) for p in facts.pending),
        next_step=_inline(_next_step(facts)),
        blockers=[e.ledger() for e in facts.errors if not e.resolved and not e.found],
        key_artifacts=[f.line() for f in _ordered_files(facts)]
        + [c.line() for c in facts.commands.values()],
        decisions=[d.text for d in _top_decisions(facts, len(facts.decisions))],
        user_constraints=list(facts.constraints),
    )


def _display(
    facts: _Facts, state: TaskState, cap: int, constraint_cap: int
) -> dict[str, list[str]]:
    """The display summary of seed 000, each bullet cut to ``cap`` characters (constraints
    to ``constraint_cap``). The most important bullets of each section come first, so that
    :func:`truncate_at_bullet`, which drops trailing bullets, drops the least important."""

    def clip_all(items: Iterable[str], limit: int = cap) -> list[str]:
        return [_clip(_one_line(i), limit) for i in items if i.strip()]

    done = clip_all(_inline(d) for d in reversed(facts.done))  # newest first
    done += clip_all(
        "fixed: " + " | ".join(e.lines)
        for e in facts.errors
        if e.resolved and not e.found and e.lines
    )
    done += clip_all("found: " + " | ".join(e.lines) for e in facts.errors if e.found and e.lines)
    in_progress = clip_all(
        ["next: " + state["next_step"]]
        + [o for o in state["open_items"] if not _same_task(o, state["next_step"])]
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
#: constraints last (seed 000 keeps user constraints above all).
_DISPLAY_DROP_ORDER = ("done", "decisions", "code_changes", "in_progress", "constraints")

#: (bullet cap, constraint cap) pairs tried in turn for the display summary, in characters.
_DISPLAY_CAPS = ((400, 400), (240, 240), (160, 200), (120, 200), (90, 160), (60, 160))


def _render_task_state(
    facts: _Facts, request: SummaryRequest
) -> tuple[str, TaskState, tuple[str, ...]]:
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


# =========================================================================== the summarizer


class ExtractiveSummarizer:
    """The built-in summarizer: offline, deterministic, free (DESIGN.md section 5).

    Implements :class:`~compactctl.summarize.Summarizer`. It keeps no state between
    calls; one instance may serve any number of requests, from any thread.

    >>> request = SummaryRequest(messages=[
    ...     {"role": "user", "turnId": 1, "content": "Fix tests/test_a.py. Do not add deps."}],
    ...     prior=None, format="sections", max_chars=4000)
    >>> result = ExtractiveSummarizer().summarize(request)
    >>> "Constraint: Do not add deps." in result.text, result.model
    (True, 'extractive')
    """

    name = MODEL_NAME

    def summarize(self, request: SummaryRequest) -> SummaryResult:
        """Summarize ``request.messages`` in ``request.format`` within ``request.max_chars``.

        Returns a :class:`SummaryResult` whose text validates with its format's validator.
        For ``sections`` the text may exceed ``max_chars`` only when the ledger alone does
        (a warning says so); for ``task-state`` the display summary stays within
        ``max_chars`` unless its five headings alone do not fit.

        Raises:
            SummaryFormatError: never for valid input; raised if the result failed its own
                validation (a bug), so that nothing invalid is appended.
        """
        try:
            return self._summarize(request)
        finally:
            _clear_caches()

    def _summarize(self, request: SummaryRequest) -> SummaryResult:
        facts = _Extractor(request.messages).run()
        if request.prior is not None:
            facts = _merge(_facts_from_prior(request.prior), facts)
        pinned = [_one_line(c) for c in request.pinned_constraints if c.strip()]
        facts.constraints = _dedupe(pinned + facts.constraints, similar=True)
        if request.format == "task-state":
            text, state, warnings = _render_task_state(facts, request)
            parse_task_state(text)
            return SummaryResult(
                text=text,
                format="task-state",
                task_state=state,
                model=MODEL_NAME,
                warnings=warnings,
            )
        text, warnings = _render_sections(facts, request)
        validate_sections(text)
        return SummaryResult(
            text=text, format="sections", task_state=None, model=MODEL_NAME, warnings=warnings
        )


def _clear_caches() -> None:
    """Empty the caches keyed by transcript text (commands, user messages): they serve one
    request, and must not keep a long run's texts alive (a command can be a large patch).
    Clearing while another thread summarizes costs that thread time, never a wrong result."""
    _shell_tokens.cache_clear()
    _command_files_cached.cache_clear()
    _sentence_flags.cache_clear()
