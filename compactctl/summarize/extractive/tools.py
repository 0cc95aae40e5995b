"""Tool calls, shell commands and file paths: what an agent ran and which files it touched.

A tool is classified by its name (:func:`tool_kind`); the files of a call come from its
path arguments, from ``apply_patch`` headers, or from its shell command, parsed with shlex
and a small table of well-known programs (:func:`command_files`). :func:`resolves` decides
whether a later successful command shows that an earlier failure is fixed.

The shell parsers are cached per command text (agents run the same commands again and
again, and shlex is slow); :func:`clear_caches` empties them after each request.
"""

from __future__ import annotations

import functools
import json
import re
import shlex
from collections.abc import Iterator, Mapping
from typing import Any

from compactctl.summarize.extractive.intent import CHECKBOX_RE
from compactctl.summarize.extractive.prose import LEDGER_LINE_MAX
from compactctl.text import clip

__all__ = [
    "EDITOR_COMMANDS",
    "KIND_ACTION",
    "PATH_KEYS",
    "PATH_LIST_KEYS",
    "CONTENT_KEYS",
    "EDIT_TEXT_KEYS",
    "call_arguments",
    "code_changes",
    "definitions",
    "clear_caches",
    "command_files",
    "command_text",
    "patch_changes",
    "patch_files",
    "pathlike",
    "plan_items",
    "progress_items",
    "resolves",
    "shell_command",
    "tool_calls",
    "tool_kind",
]

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
#: Argument names that hold the path of the file a tool call works on.
PATH_KEYS = (
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
#: Argument names that hold a list of such paths.
PATH_LIST_KEYS = ("paths", "files", "file_paths")
#: The ledger action of each ``command`` of an editor tool (``str_replace_editor``).
EDITOR_COMMANDS = {
    "view": "read",
    "create": "created",
    "str_replace": "edited",
    "insert": "edited",
    "undo_edit": "edited",
}
_PLAN_ITEM_KEYS = ("plan", "todos", "items", "tasks", "steps", "task_list")
_PLAN_TEXT_KEYS = ("step", "content", "text", "title", "task", "description")
_DONE_STATUSES = frozenset({"completed", "complete", "done", "finished", "cancelled", "canceled"})


@functools.lru_cache(maxsize=1024)
def tool_kind(name: str) -> str:
    """Classify a tool by its name: plan, shell, patch, write, edit, read, search, other.

    Cached: a session calls a handful of tools thousands of times.

    >>> [tool_kind(n) for n in ("update_plan", "bash", "apply_patch", "read_file")]
    ['plan', 'shell', 'patch', 'read']
    >>> tool_kind("task_tracker"), tool_kind("TodoWrite")
    ('plan', 'plan')
    """
    n = name.lower()
    if re.search(r"todo|plan|task_tracker", n):
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


#: The ledger action of a file named by a tool call of each kind (:func:`tool_kind`).
KIND_ACTION = {"edit": "edited", "write": "written", "read": "read", "search": "searched"}

_PATCH_FILE_RE = re.compile(
    r"^\*\*\* (?P<op>Add|Update|Delete) File: (?P<path>.+?)\s*$", re.MULTILINE
)
_PATCH_MOVE_RE = re.compile(r"^\*\*\* Move to: (?P<path>.+?)\s*$", re.MULTILINE)
_PATCH_ACTION = {"Add": "created", "Update": "edited", "Delete": "deleted"}
_EXT_RE = re.compile(r"\.[A-Za-z0-9]{1,10}$")
_NUMBERS_RE = re.compile(r"[\d.,]+")
_PATH_TOKEN_RE = re.compile(r"^[\w@%+=,.~-]*(?:/[\w@%+=,.~-]*)*$")


def pathlike(token: str) -> bool:
    """Whether a shell token looks like a file path.

    >>> [pathlike(t) for t in ("src/a.py", "README.md", "-n", "19", "0.6.0", ".", "1,20p")]
    [True, True, False, False, False, False, False]
    """
    if not token or token.startswith("-") or "://" in token or token in (".", "..", "/", "~"):
        return False
    if _NUMBERS_RE.fullmatch(token) or not _PATH_TOKEN_RE.match(token):
        return False
    return "/" in token or _EXT_RE.search(token) is not None


_DEFINITION_RE = re.compile(
    r"^[ \t+-]?[ \t]*(?:export[ \t]+)?(?:async[ \t]+)?(?:pub[ \t]+)?"
    r"(?P<kind>def|class|function|fn|func)[ \t]+(?P<name>[A-Za-z_]\w*)",
    re.MULTILINE,
)
#: (old, new) argument pairs of edit tools: Claude Code's Edit, the str_replace editors,
#: and Cline's ``replace_in_file`` texts.
EDIT_TEXT_KEYS = (
    ("old_string", "new_string"),
    ("old_str", "new_str"),
    ("oldText", "newText"),
    ("old_text", "new_text"),
)
#: Arguments that carry a whole file's new text (write and create tools).
CONTENT_KEYS = ("content", "file_text", "contents", "text")


def definitions(text: str) -> list[tuple[str, str]]:
    """``(kind, name)`` of the functions and classes ``text`` defines (Python ``def`` and
    ``class``, JavaScript ``function``, Rust ``fn``, Go ``func``), in order, each once.

    >>> definitions("class A:\\n    async def run(self):\\n        pass\\nfn main() {}")
    [('class', 'A'), ('def', 'run'), ('fn', 'main')]
    """
    seen: dict[tuple[str, str], None] = {}
    for match in _DEFINITION_RE.finditer(text):
        seen.setdefault((match["kind"], match["name"]), None)
    return list(seen)


def code_changes(old: str, new: str) -> list[str]:
    """What an edit from ``old`` to ``new`` did to definitions, in words: ``added def x``,
    ``removed class Y``, ``renamed def a -> b`` (one of a kind removed, one added).

    >>> code_changes("def load(x):\\n    pass", "def load_page(x):\\n    pass")
    ['renamed def load -> load_page']
    >>> code_changes("", "class Pager:\\n    def flush(self): ...")
    ['added class Pager', 'added def flush']
    """
    before, after = definitions(old), definitions(new)
    added = [d for d in after if d not in before]
    removed = [d for d in before if d not in after]
    if len(added) == len(removed) == 1 and added[0][0] == removed[0][0]:
        return [f"renamed {removed[0][0]} {removed[0][1]} -> {added[0][1]}"]
    return [f"added {k} {n}" for k, n in added] + [f"removed {k} {n}" for k, n in removed]


def patch_changes(text: str) -> dict[str, list[str]]:
    """Per file of an ``apply_patch`` body, :func:`code_changes` of its ``-`` and ``+``
    lines.

    >>> patch_changes("*** Update File: a.py\\n@@\\n-def old():\\n+def new():\\n")
    {'a.py': ['renamed def old -> new']}
    """
    out: dict[str, list[str]] = {}
    path, minus, plus = "", list[str](), list[str]()
    for line in [*text.split("\n"), "*** End Patch"]:
        match = _PATCH_FILE_RE.match(line) if line.startswith("*** ") else None
        if match or line.startswith("*** End Patch"):
            changes = code_changes("\n".join(minus), "\n".join(plus)) if path else []
            if changes:
                out.setdefault(path, []).extend(changes)
            path, minus, plus = (match["path"] if match else ""), [], []
        elif line.startswith("-"):
            minus.append(line[1:])
        elif line.startswith("+"):
            plus.append(line[1:])
    return out


def patch_files(text: str) -> list[tuple[str, str]]:
    """Files named in an ``apply_patch`` body, with their action.

    >>> patch_files("*** Begin Patch\\n*** Update File: src/a.py\\n@@\\n*** End Patch")
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
_ASSIGNMENT_RE = re.compile(r"\w+=.*")
_SEPARATORS = frozenset({"&&", "||", ";", "|", "&", "(", ")", ";;", "|&"})


def _without_wrappers(tokens: list[str]) -> list[str]:
    """A simple command without its leading ``NAME=value`` assignments and wrappers
    (``sudo``, ``env``, ``time``, ...)."""
    while tokens and (_ASSIGNMENT_RE.fullmatch(tokens[0]) or tokens[0] in _WRAPPERS):
        tokens = tokens[1:]
    return tokens


_SHLEX_QUOTING_RE = re.compile(r"[#'\"\\]")
"""The characters that make shlex (POSIX, punctuation chars) do more than split: a comment
(``#``, even inside a word), quotes and the escape."""
_SHLEX_TOKEN_RE = re.compile(r"[();<>|&]+|[^ \t\r\n();<>|&]+")
"""shlex's tokens of a line without :data:`_SHLEX_QUOTING_RE`: runs of its punctuation chars
``();<>|&`` and runs of anything else but its whitespace `` \t\r\n``."""


@functools.lru_cache(maxsize=4096)
def _shell_tokens(line: str) -> tuple[str, ...]:
    """The shell tokens of one line (shlex, POSIX rules); plain words when it does not lex.

    A line without comment, quote or escape characters is split by one regex
    (:data:`_SHLEX_TOKEN_RE`), the tokens shlex gives (``tests/unit/summarize/
    test_shell_tokens.py`` compares them); shlex reads a character at a time and costs
    about 0.2 ms a line to construct.

    Cached: agents run the same commands again and again, and shlex is slow. The result is
    a tuple, so no caller can change a cached value.
    """
    if _SHLEX_QUOTING_RE.search(line) is None:
        return tuple(_SHLEX_TOKEN_RE.findall(line))
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        return tuple(lexer)
    except ValueError:
        return tuple(line.split())


def _simple_commands(command: str) -> Iterator[list[str]]:
    """The simple commands of a shell line: split on ``&& || ; |`` and newlines; the body of
    a here-document is not parsed."""
    # a "<<" on any line (no line holds a newline): only the first line is a command
    lines = command.split("\n", 1)[:1] if "<<" in command else command.split("\n")
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


def command_files(command: str) -> list[tuple[str, str]]:
    """Files a shell command reads or writes, by a small table of well-known programs.

    >>> command_files("sed -n '1,40p' src/app.py && python -m pytest tests/t.py::test_a -q")
    [('src/app.py', 'read'), ('tests/t.py', 'tested')]
    >>> command_files("grep -n ERROR logs/worker.log > out.txt")
    [('out.txt', 'written'), ('logs/worker.log', 'searched')]
    """
    return list(_command_files_cached(command))


@functools.lru_cache(maxsize=4096)
def _command_files_cached(command: str) -> tuple[tuple[str, str], ...]:
    """:func:`command_files` as a tuple, cached (a command run N times is parsed once)."""
    found: list[tuple[str, str]] = []
    if "*** Begin Patch" in command:
        found.extend(patch_files(command))
    for tokens in _simple_commands(command):
        args: list[str] = []
        index = 0
        while index < len(tokens):
            token = tokens[index]
            if token in (">", ">>", "&>", ">|", "<") and index + 1 < len(tokens):
                target = tokens[index + 1]
                if pathlike(target) and not target.startswith("/dev/"):
                    found.append((target, "read" if token == "<" else "written"))
                index += 2
                continue
            args.append(token)
            index += 1
        args = _without_wrappers(args)
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
                (o, "read" if prog != "mv" else "moved") for o in operands[:-1] if pathlike(o)
            )
            operands, action = operands[-1:], "written"
        elif prog in ("python", "python3", "node", "ruby", "bash", "sh") and operands:
            operands, action = operands[:1], "ran"
        if action:
            found.extend((o, action) for o in operands if pathlike(o))
    return tuple(found)


def tool_calls(message: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The well-formed entries of a message's ``toolCalls`` (anything else is ignored)."""
    calls = message.get("toolCalls")
    return [c for c in calls if isinstance(c, Mapping)] if isinstance(calls, list) else []


def call_arguments(call: Mapping[str, Any]) -> dict[str, Any]:
    """The arguments of a tool call (``arguments`` or ``input``): a mapping, or a JSON
    object in a string; a string that is not one becomes ``{"input": text}``.

    >>> call_arguments({"arguments": '{"path": "a.py"}'}), call_arguments({"input": "ls"})
    ({'path': 'a.py'}, {'input': 'ls'})
    """
    args = call.get("arguments", call.get("input", {}))
    if isinstance(args, str):
        try:
            parsed = json.loads(args)
        except ValueError:
            return {"input": args}
        return parsed if isinstance(parsed, dict) else {"input": args}
    return dict(args) if isinstance(args, Mapping) else {}


_REDACTED_ITEM = re.compile(r"\[REDACTED:[\w-]+\]")
"""A list item that is one redaction marker (:func:`compactctl.summarize.redact.redact`)."""


def shell_command(args: Mapping[str, Any]) -> str:
    """The command string of a shell tool call (``command`` or ``cmd``; a list is joined as
    ``shlex.join`` joins it, but for an item that is one redaction marker, left unquoted
    as :func:`~compactctl.summarize.redact.redact` writes it in a joined command, so the
    redacted list and the redacted string read alike; ``["bash", "-lc", script]`` gives the
    script).

    >>> shell_command({"command": ["sshpass", "-p", "[REDACTED:cli-password]", "ssh", "h 1"]})
    "sshpass -p [REDACTED:cli-password] ssh 'h 1'"
    """
    value = args.get("command", args.get("cmd"))
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        if len(value) >= 3 and value[-2] in ("-c", "-lc", "-ic"):
            return str(value[-1])
        return " ".join(v if _REDACTED_ITEM.fullmatch(v) else shlex.quote(v) for v in value)
    return value if isinstance(value, str) else ""


def command_text(command: str) -> str:
    """A command as the ledger keeps it: its first line in full (up to
    :data:`LEDGER_LINE_MAX`), with a count of any further lines."""
    lines = command.strip().split("\n")
    head = clip(lines[0].strip(), LEDGER_LINE_MAX)
    return head + (f" (+{len(lines) - 1} lines)" if len(lines) > 1 else "")


#: Simple commands that only set the scene of the one that runs (``cd /repo && pytest``):
#: never the program a failure or a success is about.
_SETUP_COMMANDS = frozenset(
    {"cd", "pushd", "popd", "source", ".", "export", "set", "unset", "true", ":", "echo"}
)
#: Interpreters: what they run (the script, ``-c CODE``, ``-e CODE``) is part of the command.
_INTERPRETERS = frozenset(
    {"python", "python3", "py", "node", "deno", "bun", "ruby", "perl", "php", "bash", "sh", "zsh"}
)
#: Test runners, type checkers and linters, which check the whole project when given no path:
#: a run of one of them with fewer operands is a broader run of the same check.
_BROAD_RUNNERS = frozenset(
    {
        "pytest",
        "py.test",
        "mypy",
        "pyright",
        "ruff",
        "flake8",
        "pylint",
        "black",
        "isort",
        "jest",
        "vitest",
        "mocha",
        "eslint",
        "tox",
        "nox",
        "cargo",
    }
)
#: Options that narrow which tests run (pytest, jest, vitest, go, cargo): a passing run
#: with one the failed run did not have may have skipped the failing test.
_NARROWING_FLAGS = frozenset({"--lf", "--last-failed", "--sw", "--stepwise", "--only-failures"})
_NARROWING_VALUED = frozenset(
    {"-k", "-m", "-t", "--deselect", "--ignore", "--ignore-glob", "--testNamePattern", "--run"}
)


def _runner(command: str) -> tuple[str, tuple[str, ...], frozenset[str], frozenset[str]]:
    """(program, what an interpreter runs, operands, narrowing options) of a command's main
    simple command (the first that is not a :data:`_SETUP_COMMANDS` one), used to decide
    whether a success resolves a failure."""
    commands = [t for t in (_without_wrappers(c) for c in _simple_commands(command)) if t]
    tokens = next(
        (t for t in commands if t[0] not in _SETUP_COMMANDS), commands[0] if commands else []
    )
    if tokens[:1] in (["uv"], ["poetry"], ["pipenv"]) and tokens[1:2] == ["run"]:
        tokens = tokens[2:]
    if tokens[:1] and tokens[0] in ("python", "python3") and tokens[1:2] == ["-m"]:
        tokens = tokens[2:]
    if not tokens:
        return "", (), frozenset(), frozenset()
    prog, rest = tokens[0], tokens[1:]
    runs: tuple[str, ...] = ()
    if prog.rsplit("/", 1)[-1] in _INTERPRETERS:
        for i, arg in enumerate(rest):
            if arg in ("-c", "-e", "-m") and i + 1 < len(rest):
                runs = (arg, rest[i + 1])
                break
            if not arg.startswith("-"):
                runs = (arg,)
                break
    narrowing = set()
    for i, arg in enumerate(rest):
        name = arg.split("=", 1)[0]
        if name in _NARROWING_FLAGS:
            narrowing.add(name)
        elif name in _NARROWING_VALUED:
            narrowing.add(
                arg if "=" in arg else f"{arg} {rest[i + 1] if i + 1 < len(rest) else ''}"
            )
    family = "pytest" if prog in ("pytest", "py.test") else ""
    return prog, runs, frozenset(_operands(rest, family)), frozenset(narrowing)


def resolves(success: str, failure: str) -> bool:
    """Whether a successful run of ``success`` shows that the failed ``failure`` is fixed:
    the same main program (a ``cd ... &&`` in front aside), running the same script or code
    when it is an interpreter, no option that narrows which tests run that the failure did
    not have, and the same operands; a test runner, type checker or linter
    (:data:`_BROAD_RUNNERS`) may have fewer (a broader run).

    >>> resolves("python -m pytest -q", "python -m pytest tests/test_a.py -q")
    True
    >>> resolves("make lint", "make test"), resolves("make", "make test")
    (False, False)
    >>> resolves("cd /repo && ls", "cd /repo && python reproduce.py")
    False
    >>> resolves("pytest tests/a.py -k other", "pytest tests/a.py")
    False
    """
    if success == failure:
        return True
    prog_s, runs_s, args_s, narrow_s = _runner(success)
    prog_f, runs_f, args_f, narrow_f = _runner(failure)
    if not prog_s or prog_s != prog_f or runs_s != runs_f or not narrow_s <= narrow_f:
        return False
    if prog_s.rsplit("/", 1)[-1] in _BROAD_RUNNERS:
        return args_s <= args_f
    return args_s == args_f


def progress_items(args: Mapping[str, Any]) -> list[tuple[str, bool]] | None:
    """(text, done) items of Cline's focus chain: the Markdown checklist a tool call of any
    tool carries in its ``task_progress`` argument; None when it carries none.

    >>> progress_items({"command": "ls", "task_progress": "- [x] read\\n- [ ] fix"})
    [('read', True), ('fix', False)]
    """
    value = args.get("task_progress")
    if not isinstance(value, str):
        return None
    items = []
    for line in value.split("\n"):
        match = CHECKBOX_RE.match(line)
        if match:
            items.append((match.group("text"), match.group("mark") != " "))
    return items or None


def plan_items(args: Mapping[str, Any]) -> list[tuple[str, bool]] | None:
    """(text, done) items of a plan/todo tool call, or None when it carries no list: the
    ``plan`` of Codex's ``update_plan``, the ``todos`` of Claude Code's ``TodoWrite``, the
    ``task_list`` of OpenHands' ``task_tracker`` (status ``todo``/``in_progress``/``done``)
    and the lists of other todo tools (:data:`_PLAN_ITEM_KEYS`).

    >>> plan_items({"command": "plan", "task_list": [
    ...     {"id": "1", "title": "Fix the pager", "status": "done"},
    ...     {"id": "2", "title": "Add a test", "status": "todo"}]})
    [('Fix the pager', True), ('Add a test', False)]
    """
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


def clear_caches() -> None:
    """Empty the caches keyed by command text (a command can be a large patch)."""
    _shell_tokens.cache_clear()
    _command_files_cached.cache_clear()
