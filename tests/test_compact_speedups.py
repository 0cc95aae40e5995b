"""The fast paths of ``compact`` never change a result.

Each cache or literal prefilter is compared with the slow path it replaces: the replays and
token counts ``plan_compact`` used to redo (``replay(log + new)``, ``prompt_tokens``), the
second elision of micro targets, and the regex scans of the extractive summarizer.
"""

from __future__ import annotations

import re
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from compactctl import text as shared_text
from compactctl.app.commands import load
from compactctl.app.inspector import prompt_tokens
from compactctl.errors import SummarizerError
from compactctl.layers.micro import MicroParams, plan_micro, plan_micro_view
from compactctl.layers.summary import CompactOptions, _Sizes, plan_compact
from compactctl.model import Event, Message, event_from_dict
from compactctl.replay import replay
from compactctl.summarize import extractive as X
from compactctl.summarize.extractive import failures as xf
from compactctl.summarize.extractive import intent as xi
from compactctl.summarize.extractive import prose as xp
from compactctl.summarize.extractive import tools as xt
from compactctl.tokens import TokenCounter, message_payload

from .conftest import SAMPLES
from .strategies import logs_with_reductions

NOW = "2025-01-01T00:00:00Z"


# ----------------------------------------------------------------- plan_compact and micro


def _same_view(a: list[Message], b: list[Message]) -> bool:
    return [(type(m), m.data, m.turn) for m in a] == [(type(m), m.data, m.turn) for m in b]


@st.composite
def logs(draw: st.DrawFn) -> list[Event]:
    """Sessions with earlier reductions, some with a uuid used twice (replay goes by uuid)."""
    events = draw(logs_with_reductions())
    messages = [i for i, e in enumerate(events) if isinstance(e, Message)]
    tools = [i for i in messages if events[i].data["role"] == "tool"]
    for i in tools:  # long outputs, for micro compaction to elide
        if draw(st.booleans()):
            e = events[i]
            long = (str(e.data["content"]) + "\nline") * draw(st.integers(10, 40))
            events[i] = event_from_dict({**e.data, "content": long}, turn=e.turn)
    if len(tools) >= 2 and draw(st.booleans()):
        messages = tools  # two micro targets with one uuid
    if len(messages) >= 2 and draw(st.booleans()):
        i, j = draw(st.lists(st.sampled_from(messages), min_size=2, max_size=2, unique=True))
        e = events[j]
        events[j] = event_from_dict({**e.data, "uuid": events[i].uuid}, turn=e.turn)
    return events


MICRO = st.builds(
    MicroParams,
    keep_turns=st.integers(0, 2),
    min_chars=st.sampled_from([10, 60, 120]),
    head_max=st.sampled_from([20, 600]),
    tail_max=st.sampled_from([10, 300]),
)


@settings(max_examples=150, deadline=None)
@given(logs(), MICRO)
def test_micro_view_is_the_replay_of_the_log_and_the_event(log: list[Event], params: MicroParams):
    view = replay(log)
    event, after = plan_micro_view(log, view, params, timestamp=NOW)
    alone = plan_micro(log, params, timestamp=NOW)
    assert (event and event.data) == (alone and alone.data)
    if event is None:
        assert after is view
    else:
        assert _same_view(after, replay([*log, event]))


@settings(max_examples=150, deadline=None)
@given(logs(), st.lists(st.integers(0, 40), max_size=6))
def test_sizes_agree_with_prompt_tokens_over_shared_views(log: list[Event], cuts: list[int]):
    counter = TokenCounter("estimate")
    sizes = _Sizes(counter)
    view = replay(log)
    views = [view] + [view[:c] + [m.evolve(content="changed") for m in view[c:]] for c in cuts]
    for v in views + views[::-1]:  # shared messages: sized once, then from the cache
        chars = sum(len(message_payload(m.data)) for m in v)
        assert sizes.totals(v) == (prompt_tokens(v, counter), chars)


@st.composite
def options(draw: st.DrawFn) -> tuple[CompactOptions, Any]:
    """Options that reach every step: micro, the summarization trigger, the 5% rule; and
    the summarizer (``None``: the extractive one)."""
    return CompactOptions(
        force=draw(st.booleans()),
        micro_only=draw(st.booleans()),
        micro_enabled=draw(st.booleans()),
        micro=draw(MICRO),
        micro_trigger=0.0,
        summary_trigger=draw(st.sampled_from([0.0, 1e9])),
        context_window=1000,
        strategy=draw(st.sampled_from(["keep_recent", "full_replace"])),
        keep_recent=draw(st.integers(0, 4)),
        format=draw(st.sampled_from(["sections", "task-state"])),
        min_saving=draw(st.sampled_from([0.0, 0.05, 0.9])),
        encoding="estimate",
    ), draw(st.sampled_from([None, _Failing()]))


class _Failing:
    """A summarizer that always fails: nothing is appended, micro compaction included."""

    name = "failing"

    def summarize(self, request: Any) -> Any:
        raise SummarizerError("no")


def _check_against_replay(log: list[Event], opts: CompactOptions, summarizer: Any = None) -> None:
    """The report's numbers are those of full replays counted from scratch."""
    plan = plan_compact(log, opts, now=lambda: NOW, summarizer=summarizer)
    counter = TokenCounter(plan.report["tokenizer"])
    before_view = replay(log)
    after_view = replay(log + plan.events)
    before = prompt_tokens(before_view, counter)
    after = prompt_tokens(after_view, counter)
    chars = [sum(len(message_payload(m.data)) for m in v) for v in (before_view, after_view)]
    report = plan.report
    assert report["tokensBefore"] == before and report["charsBefore"] == chars[0]
    assert report["promptEstimate"] == after and report["charsAfter"] == chars[1]
    for e in plan.events:
        if e.type == "summary":
            assert e.data["stats"]["tokensAfter"] == after
            assert e.data["stats"]["charsAfter"] == chars[1]
    # the estimate between micro compaction and summarization
    window = report["contextWindow"]
    fired = opts.micro_enabled and (
        opts.force or (window is not None and before > opts.micro_trigger * window)
    )
    micro = plan_micro(log, opts.micro, timestamp=NOW) if fired else None
    mid = prompt_tokens(replay(log + ([micro] if micro else [])), counter)
    reason = report["reason"] or ""
    if "under the summarization trigger" in reason:
        assert f"prompt estimate {mid} tokens is under the summarization" in reason


@settings(max_examples=200, deadline=None)
@given(logs(), options())
def test_plan_compact_numbers_equal_full_replays(log: list[Event], choice: tuple[Any, Any]):
    _check_against_replay(log, *choice)


def test_plan_compact_numbers_equal_full_replays_on_the_samples():
    for name in ("small-s1", "messy-s2", "cjk-s3"):
        _, log = load(str(SAMPLES / f"{name}.canonical.jsonl"))
        for opts in (
            CompactOptions(force=True, micro_only=True, encoding="cl100k_base"),
            CompactOptions(force=True, encoding="cl100k_base", min_saving=0.0),
            CompactOptions(force=True, strategy="full_replace", micro=MicroParams(keep_turns=0)),
        ):
            _check_against_replay(log, opts)
            # and again on the compacted log: an incremental summary over a micro event
            log2 = log + plan_compact(log, opts, now=lambda: NOW).events
            _check_against_replay(log2, opts)


# ----------------------------------------------------------------- extractive prefilters


def _exit_code_reference(text: str) -> int | None:
    match = xf._EXIT_RE.search(text)
    if match:
        return int(match.group(1) or match.group(2))
    match = xf._JSON_EXIT_RE.search(text[:2000])
    return int(match.group(1)) if match else None


def _found_errors_reference(text: str) -> list[str]:
    found: list[str] = []
    lines = text.split("\n")
    for index, raw in enumerate(lines):
        line = raw.strip()
        if xf._LOG_LEVEL_RE.search(line) and not line.startswith(("def ", "class ", "#", "//")):
            found.append(xf._log_error(line))
        elif line.startswith("Traceback (most recent call last)"):
            for after in lines[index + 1 :]:
                start = xf._EXC_AT_START_RE.match(after.strip())
                if start and xf._exception_name(start.group("name")):
                    found.append(after.strip())
                    break
    return xp.dedupe_exact(found)[: xf.ERROR_LINES_PER_RESULT]


def _pytest_counts_reference(text: str) -> str:
    matches = xf._PYTEST_COUNTS_RE.findall(text[-5000:])
    return matches[-1].strip().rstrip(",") if matches else ""


# Every character the case-insensitive regex matches to each letter (İ, ı, ſ included).
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
        ]
    ),
    st.sampled_from([": ", "=", " ", "\n", "\t", "  \n", "-1", "0", "137", "x", "é", "你好"]),
    st.text(alphabet=st.sampled_from(list('exitrunsaod EXIT:=\n0123-İıſ"_')), max_size=20),
)


@settings(max_examples=500, deadline=None)
@given(st.lists(PIECES, max_size=14))
def test_extractive_prefilters_agree_with_the_regexes(parts: list[str]):
    text = "".join(parts)
    if xf._EXIT_RE.search(text):
        assert xf._may_report_exit(text)
    assert xf.reported_exit_code(text) == _exit_code_reference(text)
    assert xf.found_errors(text) == _found_errors_reference(text)
    assert xf.pytest_counts(text) == _pytest_counts_reference(text)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200))
def test_extractive_prefilters_agree_on_any_text(text: str):
    assert xf.reported_exit_code(text) == _exit_code_reference(text)
    assert xf.found_errors(text) == _found_errors_reference(text)
    assert xf.pytest_counts(text) == _pytest_counts_reference(text)


def test_the_case_folds_the_exit_prefilter_knows_are_all_there_are():
    """Only İ, ı and ſ match a letter of the exit phrases without lowering to it."""
    letters = set("".join(xf._EXIT_PHRASES + xf._RETURN_PHRASES).replace(" ", ""))
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
        assert xf.pytest_counts(text) == _pytest_counts_reference(text)
        assert xi.sentence_flags(text) == (
            tuple(xp.split_sentences(text)),
            tuple(xi.states_constraint(s) for s in xp.split_sentences(text)),
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
    fresh: Any = xt._command_files_cached.__wrapped__(command)  # type: ignore[attr-defined]
    first = xt.command_files(command)
    assert first == list(fresh)
    first.append(("changed", "by the caller"))  # a caller changing its list...
    assert xt.command_files(command) == list(fresh)  # ...changes nothing cached
    for line in command.split("\n"):
        assert xt._shell_tokens(line) == xt._shell_tokens.__wrapped__(line)  # type: ignore[attr-defined]


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
