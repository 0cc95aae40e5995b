"""The fast paths of the extractive summarizer never change a result.

Each literal prefilter in front of a regex scan (exit codes, error lines, pytest counts) is
compared with the plain scan, written out here with the regexes as they were first written
(``_REFERENCE_*``), on generated texts full of what the prefilters look for and on the
samples; the cached command parsing is compared with parsing afresh.
"""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from compactctl import text as shared_text
from compactctl.formats.reader import load
from compactctl.model import Message
from compactctl.summarize import extractive as X
from compactctl.summarize.extractive import failures as xf
from compactctl.summarize.extractive import intent as xi
from compactctl.summarize.extractive import prose as xp
from compactctl.summarize.extractive import tools as xt
from tests.helpers import SAMPLES

# ---------------------------------------------------------------------------------------------
# References: the plain scans, with the regexes as first written
# ---------------------------------------------------------------------------------------------

_REFERENCE_EXIT_RE = re.compile(
    r"(?im)^\s*(?:exit code|exit status|exited with code|process exited with code|"
    r"return code|returncode)\s*[:=]?\s*(-?\d+)\b|\bexit status (-?\d+)\b"
)
_REFERENCE_JSON_EXIT_RE = re.compile(
    r'"(?:exit_code|exitCode|returncode|return_code)"\s*:\s*(-?\d+)'
)
_REFERENCE_PYTEST_COUNTS_RE = re.compile(
    r"(?m)^[=\s]*((?:\d+ (?:failed|passed|errors?|skipped|xfailed|xpassed|deselected|"
    r"warnings?|rerun)(?:, )?)+)(?: in [\d.]+s)?(?: \([^)]*\))?[=\s]*$"
)
_REFERENCE_EXC_AT_START_RE = re.compile(r"^(?:[a-z_][\w]*\.)*(?P<name>[A-Z][A-Za-z0-9_]*):(?:\s|$)")
_REFERENCE_EXC_IN_LINE_RE = re.compile(
    r"(?<![\w.])(?:[a-z_][\w]*\.)*(?P<name>[A-Z][A-Za-z0-9_]*):\s"
)
_REFERENCE_LOG_LEVEL_RE = re.compile(r"\b(?P<level>ERROR|FATAL|CRITICAL)\b")


def _reference_exception_name(name: str) -> bool:
    """Whether ``name`` reads as an exception class (not a warning, not a label)."""
    if name.endswith("Warning"):
        return False
    if re.search(r"(?:Error|Exception|Exit|Interrupt|Failure|Fault|Timeout)$", name):
        return True
    return len(re.findall(r"[A-Z][a-z0-9]+", name)) >= 2 and name[1:].lower() != name[1:]


def _reference_log_error(line: str) -> str:
    """From an ERROR log line, the part from the exception name (or the level) on."""
    for match in _REFERENCE_EXC_IN_LINE_RE.finditer(line):
        if _reference_exception_name(match.group("name")):
            return line[match.start() :]
    level = _REFERENCE_LOG_LEVEL_RE.search(line)
    return line[level.start() :] if level else line


def _exit_code_reference(text: str) -> int | None:
    """reported_exit_code without its prefilters: the exit regex over the whole text."""
    match = _REFERENCE_EXIT_RE.search(text)
    if match:
        return int(match.group(1) or match.group(2))
    match = _REFERENCE_JSON_EXIT_RE.search(text[:2000])
    return int(match.group(1)) if match else None


def _found_errors_reference(text: str) -> list[str]:
    """found_errors without its prefilters: every line scanned."""
    found: list[str] = []
    lines = text.split("\n")
    for index, raw in enumerate(lines):
        line = raw.strip()
        if _REFERENCE_LOG_LEVEL_RE.search(line) and not line.startswith(
            ("def ", "class ", "#", "//")
        ):
            found.append(_reference_log_error(line))
        elif line.startswith("Traceback (most recent call last)"):
            for after in lines[index + 1 :]:
                start = _REFERENCE_EXC_AT_START_RE.match(after.strip())
                if start and _reference_exception_name(start.group("name")):
                    found.append(after.strip())
                    break
    return xp.dedupe_exact(found)[: xf.ERROR_LINES_PER_RESULT]


def _located_errors_reference(text: str) -> list[str]:
    """located_errors without its prefilter: every line scanned."""
    found = [
        line.strip()
        for line in text.split("\n")
        if xf._shaped_error(line.strip()) or xf._LOCATED_ERROR_RE.match(line.strip())
    ]
    return xp.dedupe_exact(found)[: xf.ERROR_LINES_PER_RESULT]


def _pytest_counts_reference(text: str) -> str:
    """pytest_counts without its prefilter: the count regex over the last 5000 chars."""
    matches = _REFERENCE_PYTEST_COUNTS_RE.findall(text[-5000:])
    return matches[-1].strip().rstrip(",") if matches else ""


# ---------------------------------------------------------------------------------------------
# Generated texts with the trigger phrases
# ---------------------------------------------------------------------------------------------

_VARIANTS = {c: [c, c.upper()] for c in "abcdefghijklmnopqrstuvwxyz"}
_VARIANTS["i"] += ["\u0130", "\u0131"]
_VARIANTS["s"] += ["\u017f"]


@st.composite
def any_case(draw: st.DrawFn, phrase: str) -> str:
    """``phrase`` with each ASCII letter drawn from the characters that match it."""
    return "".join(
        draw(st.sampled_from(_VARIANTS[c.lower()])) if c.isascii() and c.isalpha() else c
        for c in phrase
    )


EXIT_PHRASES = [
    "exit code",
    "exit status",
    "exited with code",
    "process exited with code",
    "return code",
    "returncode",
]


EXIT_LINES = st.tuples(
    st.sampled_from(["", "\n", "  ", "\n \n", "x"]),
    st.sampled_from(EXIT_PHRASES).flatmap(any_case),  # the exit regex ignores case
    st.sampled_from(["", " ", ": ", "=", " :  "]),
    st.sampled_from(["0", "1", "-2", "137", "x"]),
).map("".join)


#: One line of every form located_errors keeps (each alternative of its two regexes).
LOCATED_SHAPES = [
    "Error: connection refused at scripts/deploy.sh:42",
    "src/a.py:42: error: Incompatible types",
    "a.c:3:5: error: expected ';'",
    "x:3error",
    "a.ts(3,5): error TS2322: Type",
    "a.ts(3) - ERROR TS1",
    "x.ts(3,5) fatal error C1",
    "tests/test_a.py:12: AssertionError",
    "./x.sh: line 42: rsync: command not found",
    "x.sh:42: command not found: rsync",
    "./x.sh: 42: rsync: not found",
    "./x.sh: 4: y: Syntax error: bad",
    "--- FAIL: TestX (0.00s)",
]


def test_every_located_shape_is_found_alone_and_in_an_output():
    for line in LOCATED_SHAPES:
        for text in (line, f"building\n{line}\ndone"):
            assert xf.located_errors(text) == [line], text
            assert _located_errors_reference(text) == [line], text


PIECES = st.one_of(
    EXIT_LINES,
    st.sampled_from(
        [
            '"exit_code": 3',
            '"exitCode":1',
            '"returncode" : -2',
            '"return_code":0',
            "ERROR",
            "FATAL",
            "CRITICAL",
            "Traceback (most recent call last):",
            "ValueError: bad",
            "  raise LeaseExpired()",
            "def f():",
            "# ERROR x",
            "1 failed, 2 passed in 0.1s",
            "3 errors",
            "4 warnings",
            "5 xfailed",
            "1 xpassed",
            "1 deselected",
            "2 rerun",
            "=== 7 skipped ===",
            *LOCATED_SHAPES,
        ]
    ),
    st.sampled_from([": ", "=", " ", "\n", "\t", "  \n", "-1", "0", "137", "x", "é", "你好"]),
    st.text(alphabet=st.sampled_from(list('exitrunsaod EXIT:=\n0123-İıſ"_')), max_size=20),
)


@settings(max_examples=500, deadline=None)
@given(st.lists(PIECES, max_size=14))
def test_extractive_prefilters_agree_with_the_regexes(parts: list[str]):
    text = "".join(parts)
    # (the exit prefilter never hides a match: the code the plain regex finds is reported)
    assert xf.reported_exit_code(text) == _exit_code_reference(text)
    assert xf.found_errors(text) == _found_errors_reference(text)
    assert xf.located_errors(text) == _located_errors_reference(text)
    assert xf.pytest_counts(text) == _pytest_counts_reference(text)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200))
def test_extractive_prefilters_agree_on_any_text(text: str):
    assert xf.reported_exit_code(text) == _exit_code_reference(text)
    assert xf.found_errors(text) == _found_errors_reference(text)
    assert xf.located_errors(text) == _located_errors_reference(text)
    assert xf.pytest_counts(text) == _pytest_counts_reference(text)


def test_the_case_folds_the_exit_prefilter_knows_are_all_there_are():
    """Only İ, ı and ſ match a letter of the exit phrases without lowering to it: the exit
    prefilter lowers the text and looks for the phrases unless one of these is in it."""
    letters = set("".join(EXIT_PHRASES).replace(" ", ""))
    any_letter = re.compile("[" + "".join(sorted(letters)) + "]", re.IGNORECASE)
    odd = {
        chr(cp)
        for cp in range(128, 0x30000)  # every cased character lies below U+30000
        if any_letter.fullmatch(chr(cp)) and chr(cp).lower() not in letters
    }
    assert odd == set(shared_text.FOLDS_TO_ASCII)


def _sample_texts() -> list[str]:
    texts = []
    for path in sorted(SAMPLES.glob("*.canonical.jsonl")):
        _, events = load(str(path))
        texts += [xp.text_of(e.data.get("content")) for e in events if isinstance(e, Message)]
    return texts


def test_extractive_prefilters_agree_on_the_samples():
    texts = _sample_texts()
    assert any(xf.found_errors(t) for t in texts)  # the samples exercise the slow path too
    for text in texts:
        assert xf.reported_exit_code(text) == _exit_code_reference(text)
        assert xf.found_errors(text) == _found_errors_reference(text)
        assert xf.located_errors(text) == _located_errors_reference(text)
        assert xf.pytest_counts(text) == _pytest_counts_reference(text)
        sentences = tuple(xp.split_sentences(text))
        assert xi.sentence_flags(text) == (
            sentences,
            tuple(
                xi.states_constraint(s)
                and not s.endswith(("?", "？"))
                and (
                    not xi.refers_back(s)
                    or (i > 0 and not sentences[i - 1].endswith(("?", "？")))
                    and len(sentences[i - 1]) <= xi.CONTEXT_MAX
                )
                for i, s in enumerate(sentences)
            ),
        )


COMMANDS = st.lists(
    st.sampled_from(
        [
            "cat",
            "sed -n '1,9p'",
            "grep -n ERROR",
            "python -m pytest",
            "cp",
            "mv",
            "rm",
            "touch",
            "src/a.py",
            "b.txt",
            "tests/t.py::test_x",
            ">",
            "&&",
            "|",
            ";",
            "\n",
            "'unclosed",
            "<<EOF",
            "FOO=1",
            "sudo",
        ]
    ),
    max_size=10,
).map(" ".join)


@settings(max_examples=300, deadline=None)
@given(COMMANDS)
def test_cached_command_parsing_equals_parsing_afresh(command: str):
    xt.clear_caches()
    fresh = tuple(xt.command_files(command))  # parsed now: the caches are empty
    first = xt.command_files(command)  # from the cache
    assert first == list(fresh)
    first.append(("changed", "by the caller"))  # a caller changing its list...
    assert xt.command_files(command) == list(fresh)  # ...changes nothing cached
    # each line, parsed with the shell tokens cached by the whole command, then afresh
    lines = command.split("\n")
    warm = [xt.command_files(line) for line in lines]
    xt.clear_caches()
    assert [xt.command_files(line) for line in lines] == warm


@given(st.sampled_from(["bash", "Bash", "update_plan", "read_file", "apply_patch", "x"]))
def test_cached_tool_kind_equals_classifying_afresh(name: str):
    assert xt.tool_kind(name) == xt.tool_kind.__wrapped__(name)  # type: ignore[attr-defined]


def test_text_caches_are_emptied_after_each_summary():
    """The caches keyed by transcript text never outlive a request (memory of long runs)."""
    from compactctl.summarize import SummaryRequest

    messages = [
        {"role": "user", "turnId": 1, "content": "Fix it. Do not add deps."},
        {
            "role": "assistant",
            "turnId": 1,
            "content": "",
            "toolCalls": [{"id": "c1", "name": "bash", "arguments": {"command": "cat a.py"}}],
        },
        {"role": "tool", "turnId": 1, "toolCallId": "c1", "content": "Exit code: 1"},
    ]
    request = SummaryRequest(messages=messages, prior=None, format="sections", max_chars=4000)
    text = X.ExtractiveSummarizer().summarize(request).text
    assert "`cat a.py`" in text
    caches = (xt._shell_tokens, xt._command_files_cached, xi.sentence_flags)
    assert [c.cache_info().currsize for c in caches] == [0, 0, 0]  # type: ignore[attr-defined]
