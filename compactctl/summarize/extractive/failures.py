"""Failures in tool results: exit codes, pytest counts, error lines, tracebacks.

A failed tool result (``isError``, or a non-zero exit code it reports) gives its error
lines (:func:`error_lines`); the output of a tool that did not fail can still show
``ERROR``/``FATAL`` log lines or a traceback (:func:`found_errors`). Each scan has a cheap
literal prefilter in front of its regex: most tool outputs hold no error at all.
"""

from __future__ import annotations

import re

from compactctl.summarize.extractive.prose import dedupe_exact
from compactctl.text import folds_to_ascii

__all__ = [
    "ERROR_LINES_PER_RESULT",
    "error_lines",
    "found_errors",
    "holds_error_marker",
    "located_errors",
    "pytest_counts",
    "reported_exit_code",
    "shown_error",
    "traceback_frames",
]

#: At most this many distinct error lines are kept from one tool result.
ERROR_LINES_PER_RESULT = 6

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


def _may_report_exit(text: str) -> bool:
    """False only when :data:`_EXIT_RE` cannot match ``text``: a cheap literal prefilter.

    The regex scans at about 10 MB/s (case-insensitive, multiline, tried at every position);
    ``str.lower`` and ``in`` run at memory speed, and most tool results name no exit code.

    >>> _may_report_exit("EXIT CODE: 1"), _may_report_exit("return 0")
    (True, False)
    """
    if folds_to_ascii(text):  # İ ı ſ: the lower-cased literals could miss a match
        return True
    lowered = text.lower()
    if "exit" in lowered and any(p in lowered for p in _EXIT_PHRASES):
        return True
    return "return" in lowered and any(p in lowered for p in _RETURN_PHRASES)


def reported_exit_code(text: str) -> int | None:
    """The exit code a tool result reports, if it reports one.

    >>> reported_exit_code("Exit code: 2\\nWall time: 1s"), reported_exit_code('{"exit_code": 0}')
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


def pytest_counts(text: str) -> str:
    """The last pytest count line, without its timing.

    >>> pytest_counts("...\\n1 failed, 7 passed in 1.45s\\n")
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
_LOG_LEVEL_RE = re.compile(r"(?P<level>ERROR|FATAL|CRITICAL)\b")
"""A log level word; the word boundary before it is :func:`_log_level`'s to check: ``re``
looks for the first letters of a pattern that opens with letters, and tries one that opens
with ``\\b`` at every position (on the 13,054 log lines of the tool outputs of the 200 MB
``make bench`` corpus: 7.0 ms against 12.4 ms)."""
#: A compiler or type checker's located error line, kept verbatim: ``src/a.py:42: error:
#: ...`` (mypy), ``a.c:3:5: error: ...`` (gcc, clang), ``a.ts(3,5): error TS2322: ...``
#: (tsc), ``/x/a.py:4:9 - error: ...`` (pyright), ``a.rs:3:5: error[E0308]: ...``.
_LOCATED_ERROR_RE = re.compile(
    r"^\S+?(?::\d+(?::\d+)?:?|\(\d+(?:,\d+)?\):?)(?:\s+-)?\s*(?:fatal )?error\b", re.IGNORECASE
)
_FAILED_RE = re.compile(r"^(?:FAILED|ERROR) (?P<test>\S+::\S+|\S+\.py)(?: - (?P<msg>.*))?$")
#: Other error lines that name a file and a line, kept verbatim wherever they are seen (issue
#: 15 point 2): an error message located at the end (``Error: connection refused at
#: scripts/deploy.sh:42``, Node's ``... at /app/a.js:10:5``); a test runner's located
#: exception (pytest ``tests/test_a.py:12: AssertionError``); a shell's error in a script
#: (bash ``./x.sh: line 42: rsync: command not found``, zsh ``x.sh:42: command not found:
#: rsync``, dash ``./x.sh: 42: rsync: not found``); a failing Go test (``--- FAIL: TestX``).
_SHAPED_ERROR_RE = re.compile(
    "|".join(
        (
            r"^(?i:(?:\w+ ?)?(?:error|fatal|panic|exception)(?:\[\w+\])?[:!] "
            r".*\bat \(?\S+?:\d+(?::\d+)?\)?)$",
            r"^\S+?:\d+(?::\d+)?: (?:[a-z_]\w*\.)*[A-Z]\w*(?:Error|Exception)(?::|$)",
            r"^\S+: line \d+: \S.*$",
            r"^\S+?:\d+: (?i:command not found|no such file or directory|permission denied|"
            r"parse error|bad substitution)\b",
            r"^\S+: \d+: \S.*: (?:not found|Permission denied|Syntax error.*)$",
            r"^--- FAIL: \S+",
        )
    )
)
#: A compiler's located message without the word "error" (Go: ``./main.go:12:2: undefined:
#: pageSize``): an error line only in the output of a failed command.
_LOCATED_MESSAGE_RE = re.compile(
    r"^\S+?\.\w+:\d+(?::\d+)?: .*\b(?:undefined|undeclared|cannot|can't|not found|"
    r"no such file|permission denied|unexpected|invalid|mismatch(?:ed)?|declared and not used|"
    r"imported and not used)\b",
    re.IGNORECASE,
)


def _shaped_error(line: str) -> bool:
    """Whether ``line`` is an error line of :data:`_SHAPED_ERROR_RE` (a file and a line).

    >>> _shaped_error("Error: connection refused at scripts/deploy.sh:42")
    True
    >>> _shaped_error("src/a.py:12:    raise ValueError(x)")
    False
    """
    return _SHAPED_ERROR_RE.match(line) is not None


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


_ERROR_LINE_MARKS = (":", "!", "ERROR", "FATAL", "CRITICAL")
"""Literals one of which a line holds when a regex of :func:`error_lines` matches it, but
for two shapes :func:`_may_be_error_line` tests apart: :data:`_EXC_AT_START_RE`,
:data:`_LOCATED_MESSAGE_RE` and every alternative of :data:`_SHAPED_ERROR_RE` hold ``:``
(the first one ``[:!]``), as does :data:`_ERROR_PREFIX_RE` (``[:!]``);
:data:`_LOG_LEVEL_RE` is one of ``ERROR``, ``FATAL``, ``CRITICAL`` (case-sensitive), and
so is :data:`_FAILED_RE` when it starts with ``ERROR ``. The two shapes without any:
:data:`_FAILED_RE` starting with ``FAILED `` and :data:`_LOCATED_ERROR_RE` with tsc's
``(3,5)`` location (``(`` then ``error`` in any case)."""


def _may_be_error_line(line: str) -> bool:
    """False only when no regex of :func:`error_lines` can match ``line`` (nor the line
    without a pytest ``E`` prefix, a substring of it): the prefilter of
    :data:`_ERROR_LINE_MARKS`, a few ``in`` tests instead of seven regexes on each line of
    a failed tool's output (most lines are code, diffs or listings).

    >>> _may_be_error_line("    x = compute(y)"), _may_be_error_line("a.ts(3,5): ERROR TS1")
    (False, True)
    """
    for mark in _ERROR_LINE_MARKS:  # a loop, not any(): no generator per line
        if mark in line:
            return True
    if line.startswith("FAILED "):
        return True
    # _LOCATED_ERROR_RE's "(N)" shape; no character but E/e, R/r, O/o folds to them in re
    return "(" in line and "error" in line.lower()


def error_lines(text: str) -> tuple[list[str], list[str]]:
    """The error lines and failing test ids of a failed tool result.

    Kept, in order: pytest ``E   Exc: ...`` lines and any line that starts with an exception
    name (the final line of a traceback), ``error:``/``fatal:`` lines, compiler and type
    checker lines ``file.py:N: error: ...`` (verbatim, issue 15 point 2), the other located
    error shapes of :data:`_SHAPED_ERROR_RE` and :data:`_LOCATED_MESSAGE_RE`, and log lines
    at ERROR level; the message of ``FAILED test - msg`` lines only when nothing else was found;
    at last the last non-empty line. At most :data:`ERROR_LINES_PER_RESULT` distinct lines.
    """
    lines: list[str] = []
    failed_messages: list[str] = []
    tests: list[str] = []
    for raw in text.split("\n"):
        line = raw.strip()
        if not line or not _may_be_error_line(line):
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
        if (
            (start and _exception_name(start.group("name")))
            or _ERROR_PREFIX_RE.match(line)
            or _LOCATED_ERROR_RE.match(line)
            or _shaped_error(line)
            or _LOCATED_MESSAGE_RE.match(line)
        ):
            lines.append(line)
        elif _log_level(line):
            lines.append(_log_error(line))
    if not lines:
        lines = failed_messages
    if not lines:
        tail = [ln.strip() for ln in text.split("\n") if ln.strip()]
        tail = [ln for ln in tail if not _PYTEST_COUNTS_RE.match(ln)] or tail
        lines = tail[-1:]
    return dedupe_exact(lines)[:ERROR_LINES_PER_RESULT], dedupe_exact(tests)


def _log_level(line: str) -> re.Match[str] | None:
    """The first ``ERROR``, ``FATAL`` or ``CRITICAL`` of ``line`` that stands as a word: the
    first match of ``\\b(?P<level>ERROR|FATAL|CRITICAL)\\b`` (:data:`_LOG_LEVEL_RE` with its
    opening ``\\b`` tested here: no word character, as ``re`` reads ``\\w``, before it).

    >>> _log_level("xERROR ERRORS FATAL: y").start(), _log_level("ERRORx") is None
    (14, True)
    """
    match = _LOG_LEVEL_RE.search(line)
    while match is not None:
        start = match.start()
        before = line[start - 1] if start else " "
        if not (before.isalnum() or before == "_"):
            return match
        match = _LOG_LEVEL_RE.search(line, start + 1)
    return None


def _log_error(line: str) -> str:
    """From an ERROR log line, the part from the exception name (or the level) on."""
    if ":" in line:  # every match of _EXC_IN_LINE_RE holds one (it is tried at each position)
        for match in _EXC_IN_LINE_RE.finditer(line):
            if _exception_name(match.group("name")):
                return line[match.start() :]
    level = _log_level(line)
    return line[level.start() :] if level else line


_FOUND_ERROR_MARKERS = ("ERROR", "FATAL", "CRITICAL", "Traceback (most recent call last)")
"""Literals one of which a text must hold for :func:`found_errors` to find anything: every
match of the case-sensitive :data:`_LOG_LEVEL_RE` is one of the first three, and a traceback
starts with the last (a cheap ``in`` test skips the per-line scan of most outputs)."""
_LOCATED_SHAPE_RE = re.compile(r":(?:\d| line \d| \d+: )")
_LOCATED_PAREN_RE = re.compile(r"\(\d+(?:,\d+)?\):?(?:\s+-)?\s*(?:fatal )?error\b", re.IGNORECASE)
"""What every line of :data:`_SHAPED_ERROR_RE` and :data:`_LOCATED_ERROR_RE` holds: a line
number ``:N`` (``file.py:N``), ``: line N:`` (bash) or ``: N:`` (dash), Go's failure
marker ``--- FAIL: ``, or tsc's ``(3,5): error`` (the end of :data:`_LOCATED_ERROR_RE`'s
other form); the prefilter of :func:`located_errors`, which missed bash's, dash's and
tsc's lines in an output holding no ``:N`` when it looked for ``:N`` alone. A regex that
starts with a literal is searched for that character first, 7 times faster on the tool
outputs of the 32 MB bench session than the alternation of all of them."""


def located_errors(text: str) -> list[str]:
    """Error lines that name a file and a line inside the output of a tool that did not
    fail (issue 15 point 2): ``Error: ... at path:line``, a compiler's or type checker's
    ``file.py:N: error: ...``, and the shell and test runner lines of
    :data:`_SHAPED_ERROR_RE`; at most :data:`ERROR_LINES_PER_RESULT`.

    >>> located_errors("Deploying...\\nError: connection refused at scripts/deploy.sh:42\\nok")
    ['Error: connection refused at scripts/deploy.sh:42']
    """
    if (
        "--- FAIL: " not in text
        and _LOCATED_SHAPE_RE.search(text) is None
        and _LOCATED_PAREN_RE.search(text) is None
    ):
        return []
    found = []
    for raw in text.split("\n"):
        line = raw.strip()
        if _shaped_error(line) or _LOCATED_ERROR_RE.match(line):
            found.append(line)
    return dedupe_exact(found)[:ERROR_LINES_PER_RESULT]


def holds_error_marker(text: str) -> bool:
    """Whether ``text`` holds one of :data:`_FOUND_ERROR_MARKERS`, without which
    :func:`found_errors` finds nothing (a loop of ``in`` tests: no generator per tool
    output; ``eval`` tests it before hashing an output, :mod:`compactctl.evaluate.probes`).

    >>> holds_error_marker("12:00 FATAL: disk"), holds_error_marker("error: lower case")
    (True, False)
    """
    for marker in _FOUND_ERROR_MARKERS:  # noqa: SIM110 (the point: no generator)
        if marker in text:
            return True
    return False


def found_errors(text: str) -> list[str]:
    """Error lines inside the output of a tool that did not fail: ``ERROR``/``FATAL``
    log lines, and the final line of a Python traceback (see also :func:`located_errors`).

    >>> found_errors("10:... ERROR quillpad.storage LeaseExpired: lease 8525 expired")
    ['LeaseExpired: lease 8525 expired']
    """
    if not holds_error_marker(text):
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
        if _log_level(line) and not line.startswith(("def ", "class ", "#", "//")):
            found.append(_log_error(line))
        elif line.startswith("Traceback (most recent call last)"):
            for after in lines[index + 1 :]:
                start = _EXC_AT_START_RE.match(after.strip())
                if start and _exception_name(start.group("name")):
                    found.append(after.strip())
                    break
    return dedupe_exact(found)[:ERROR_LINES_PER_RESULT]


_SHOWN_ERROR_MARKS = ("rror", "RROR", "atal", "ATAL", "anic", "ANIC", "xception")
"""Literals one of which a text holds when :func:`shown_error`'s line shapes can match in it
(``error``/``Error``/``ERROR``, ``fatal``/``FATAL``, ``panic``/``PANIC``, a name ending in
``Error`` or ``Exception``): most command outputs hold none, and skip the line loop."""


def shown_error(text: str, found: list[str] | None = None) -> str:
    """The first error line the output of a command shows when nothing says how the
    command ended (no exit code, no ``isError``): the command ledger states that line as
    its outcome instead of ``ok`` (a summary states no fact the transcript does not
    support). ``found``: the output's :func:`located_errors` and :func:`found_errors`
    when the caller has them already; else they are looked for here. Failing those, the
    first line that opens with ``error:``, ``fatal:`` or ``panic:`` (lower case, capitalized
    or upper case, as :data:`_ERROR_PREFIX_RE`: git, make, a compiler's driver) or with an
    exception whose name ends in ``Error`` or ``Exception`` and a colon (Node's
    ``TypeError: ...``, a Python exception printed without its ``Traceback`` header; not any
    CamelCase label, which a log line may open with). ``""`` when the output shows none.

    >>> shown_error("Traceback (most recent call last):\\n  File ...\\nKeyError: 'a'")
    "KeyError: 'a'"
    >>> shown_error("Compiling...\\nerror: could not compile `app`"), shown_error("a.py\\nb.py")
    ('error: could not compile `app`', '')
    """
    if found is None:
        found = located_errors(text) + found_errors(text)
    if found:
        return found[0]
    if not any(mark in text for mark in _SHOWN_ERROR_MARKS):
        return ""
    for raw in text.split("\n"):
        line = raw.strip()
        if not line or (":" not in line and "!" not in line):
            continue
        start = _EXC_AT_START_RE.match(line)
        if (start and start.group("name").endswith(("Error", "Exception"))) or (
            _ERROR_PREFIX_RE.match(line)
        ):
            return line
    return ""


_FRAME_RE = re.compile(
    r'^\s*File "(?P<file>[^"\n]+)", line \d+, in (?P<func>[^\s<>]+|<[^>\n]*>)\s*$'
)
_LIBRARY_RE = re.compile(r"[/\\](?:site|dist)-packages[/\\]|[/\\]lib[/\\]python\d|^<frozen ")


def traceback_frames(text: str) -> list[str]:
    """The function names and source lines of a Python traceback's frames in ``text``:
    from each ``File "...", line N, in func`` its ``func`` (not ``<module>`` nor a dunder
    name) and the indented code line under it, in order (issue 15: identifiers seen in
    errors). Frames of installed libraries (``site-packages``, the standard library) are
    not the project's code and are skipped.

    >>> traceback_frames('Traceback (most recent call last):\\n  File "a.py", line 3, in run'
    ...                  '\\n    MetricCache(size).load()\\nValueError: bad')
    ['run', 'MetricCache(size).load()']
    """
    if 'File "' not in text:
        return []
    out: list[str] = []
    lines = text.split("\n")
    for index, line in enumerate(lines):
        frame = _FRAME_RE.match(line)
        if frame is None or _LIBRARY_RE.search(frame.group("file")):
            continue
        func = frame.group("func")
        if not func.startswith("<") and not (func.startswith("__") and func.endswith("__")):
            out.append(func)
        code = lines[index + 1] if index + 1 < len(lines) else ""
        if code.startswith(" ") and not _FRAME_RE.match(code) and code.strip():
            out.append(code.strip())
    return out
