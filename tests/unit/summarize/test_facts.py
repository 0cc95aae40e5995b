"""Issue 15 point 2: facts classified honestly. Constraints are standing instructions, not
tasks; an error is unresolved only if no later run of the same command passed; error lines
are kept verbatim, compiler and type-checker ``file.py:N: error:`` lines included."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from compactctl.layers.summary import user_constraints
from compactctl.summarize import SummaryRequest, SummaryResult
from compactctl.summarize.extractive import ExtractiveSummarizer
from compactctl.summarize.extractive.failures import error_lines
from compactctl.summarize.extractive.intent import states_constraint
from compactctl.summarize.summary_format import parse_sections

MYPY_LINE = (
    'src/pkg/a.py:4: error: Incompatible return value type (got "int", expected "str")'
    "  [return-value]"
)


def _user(text: str, turn: int = 1) -> dict[str, Any]:
    return {"type": "message", "role": "user", "turnId": turn, "content": text}


def _run(call_id: str, command: str, out: str, *, error: bool = False) -> list[dict[str, Any]]:
    call = {"id": call_id, "name": "bash", "arguments": {"command": command}}
    return [
        {"type": "message", "role": "assistant", "turnId": 1, "content": "", "toolCalls": [call]},
        {
            "type": "message",
            "role": "tool",
            "turnId": 1,
            "toolCallId": call_id,
            "toolName": "bash",
            "content": out,
            "isError": error,
        },
    ]


def _summarize(messages: list[dict[str, Any]], prior: SummaryResult | None = None) -> SummaryResult:
    request = SummaryRequest(messages=messages, prior=prior, max_chars=20_000)
    return ExtractiveSummarizer().summarize(request)


@pytest.mark.parametrize(
    "sentence",
    [
        "Do not add new dependencies.",
        "Never change the signature of parse_window.",
        "Always run ruff check src before you report back.",
        "Keep src/legacy.py as it is.",
        "Without the `--since-days` flag the output must stay exactly as it is today.",
        "Only touch files under src/pager.",
        "Please only use the standard library.",
        "不要修改公共接口。",
    ],
)
def test_standing_instructions_are_constraints(sentence: str) -> None:
    assert states_constraint(sentence)
    assert user_constraints([sentence]) == [sentence]


@pytest.mark.parametrize(
    "sentence",
    [
        "Add a record for the empty page and make sure validation rejects it.",
        "Write a test that must fail before the fix.",
        "Fix the pager so the last entry stays on page one.",
        "Not now, but before the release, do not forget the migration note.",
        "The bug only shows up on page two.",
        # "only" opening a statement of which, how many or when is no rule
        "Only the second test fails.",
        "Only 3 tests fail now.",
        "Only then did the export work.",
        "Only after the rebase I saw it.",
    ],
)
def test_tasks_are_not_constraints(sentence: str) -> None:
    assert not states_constraint(sentence)
    assert user_constraints([sentence]) == []
    sections = parse_sections(_summarize([_user(sentence)]).text).sections
    assert not any(p.startswith("Constraint:") for p in sections["Primary Request"])


def test_type_checker_lines_are_kept_verbatim() -> None:
    out = f"{MYPY_LINE}\nFound 1 error in 1 file (checked 3 source files)\nExit code: 1"
    assert error_lines(out)[0] == [MYPY_LINE]
    tsc = "src/a.ts(3,5): error TS2322: Type 'number' is not assignable to type 'string'."
    gcc = "src/m.c:3:5: fatal error: x.h: No such file or directory"
    assert error_lines(f"{tsc}\n{gcc}\n")[0] == [tsc, gcc]
    text = _summarize([_user("Fix types."), *_run("c1", "mypy src/pkg", out, error=True)]).text
    assert MYPY_LINE in text


def _fail_pass(rounds: int) -> list[dict[str, Any]]:
    messages = [_user("Fix types.")]
    for i in range(rounds):
        messages += _run(f"f{i}", "mypy src/pkg", f"{MYPY_LINE}\nExit code: 1", error=True)
        messages += _run(f"p{i}", "mypy src/pkg", "Success: no issues found\nExit code: 0")
    return messages


def test_an_error_followed_by_a_passing_run_is_resolved() -> None:
    errors = parse_sections(_summarize(_fail_pass(6)).text).sections["Errors and Fixes"]
    assert len(errors) == 1
    assert "×6" in errors[0] and errors[0].endswith("; resolved later")


def test_resolution_carries_across_incremental_passes() -> None:
    messages = _fail_pass(3)
    first = _summarize(messages[:3])  # the failure only
    errors = parse_sections(first.text).sections["Errors and Fixes"]
    assert errors[0].endswith("; unresolved")
    second = _summarize(messages[3:], prior=first)
    errors = parse_sections(second.text).sections["Errors and Fixes"]
    assert len(errors) == 1 and errors[0].endswith("; resolved later")
    assert MYPY_LINE in errors[0]


def test_an_error_whose_command_never_passed_stays_unresolved() -> None:
    messages = [
        _user("Fix types."),
        *_run("f", "mypy src/pkg", f"{MYPY_LINE}\nExit code: 1", error=True),
    ]
    messages += _run("p", "mypy src/other", "Success: no issues found\nExit code: 0")
    errors = parse_sections(_summarize(messages).text).sections["Errors and Fixes"]
    assert errors[0].endswith("; unresolved")


# -- found by a new user: facts the transcript does not support


def _assistant(text: str, turn: int = 1) -> dict[str, Any]:
    return {"type": "message", "role": "assistant", "turnId": turn, "content": text}


def _call(call_id: str, name: str, args: dict[str, Any], out: str, *, error: bool = False):
    return [
        {
            "type": "message",
            "role": "assistant",
            "turnId": 1,
            "content": "",
            "toolCalls": [{"id": call_id, "name": name, "arguments": args}],
        },
        {
            "type": "message",
            "role": "tool",
            "turnId": 1,
            "toolCallId": call_id,
            "toolName": name,
            "content": out,
            "isError": error,
        },
    ]


def _errors(messages: list[dict[str, Any]], max_chars: int = 20_000) -> list[str]:
    request = SummaryRequest(messages=messages, prior=None, max_chars=max_chars)
    text = ExtractiveSummarizer().summarize(request).text
    return parse_sections(text).sections["Errors and Fixes"]


@pytest.mark.parametrize(
    ("failed", "later"),
    [
        ("cd /repo && python reproduce.py", "cd /repo && ls"),  # only the `cd` is shared
        ("python reproduce.py", "python -c 'print(1)'"),  # another script
        ("make test", "make"),  # the default target is not the test target
        ("python -m pytest tests/test_a.py -q", "python -m pytest tests/test_a.py -q -k other"),
    ],
)
def test_an_unrelated_success_does_not_fix_an_error(failed: str, later: str) -> None:
    messages = [
        _user("Run the reproduction."),
        *_run("f", failed, "E   KeyError: 'page_size'\nExit code: 1", error=True),
        _user("Thanks. Also look at the README when you can.", 2),
        _assistant("Sure, reading it now.", 2),
        *_run("p", later, "README.md\nsrc\nExit code: 0"),
    ]
    errors = _errors(messages)
    assert errors[0].endswith("; unresolved"), errors  # no run of the same command passed
    assert "→ then:" not in errors[0]  # the next message is not about the error


def test_a_success_of_the_same_tool_with_other_arguments_fixes_nothing() -> None:
    messages = [
        _user("Fetch the docs."),
        *_call("f", "web_fetch", {"url": "https://a.example/x"}, "HTTP 404", error=True),
        *_call("p", "web_fetch", {"url": "https://b.example/y"}, "<html>ok</html>"),
    ]
    assert _errors(messages)[0] == "web_fetch failed: HTTP 404; unresolved"
    messages += _call("q", "web_fetch", {"url": "https://a.example/x"}, "<html>ok</html>")
    assert _errors(messages)[0] == "web_fetch failed: HTTP 404; resolved later"


def test_an_error_that_comes_back_is_open_again() -> None:
    line = "E   KeyError: 'page_size'"
    messages = [
        _user("Fix the pager."),
        *_run("f1", "pytest -q", f"{line}\nExit code: 1", error=True),
        *_run("p1", "pytest -q", "6 passed\nExit code: 0"),
        *_run("f2", "pytest -q", f"{line}\nE   ValueError: bad page\nExit code: 1", error=True),
    ]
    errors = _errors(messages)
    assert all(e.endswith("; unresolved") for e in errors), errors


def test_an_error_seen_in_a_passing_output_is_never_listed_as_fixed() -> None:
    messages = [_user("Look at the worker log.")]
    for i in range(40):  # a ledger too long for the budget: compressed to one-line lists
        out = f"ERROR worker-{i} LeaseExpired: lease {i} expired" if i == 0 else "ok"
        messages += _run(f"c{i}", f"tail -n {i + 5} logs/worker-{i}.log", out)
    request = SummaryRequest(messages=messages, prior=None, max_chars=1500)
    text = ExtractiveSummarizer().summarize(request).text
    assert "LeaseExpired: lease 0 expired" in text
    assert "fixed later" not in text and "resolved later" not in text


@pytest.mark.parametrize(
    "sentence",
    ["Step 3: keep going.", "Keep going.", "continue", "Continue without stopping.", "继续。"],
)
def test_progress_prompts_are_not_constraints(sentence: str) -> None:
    assert not states_constraint(sentence)
    assert user_constraints([sentence]) == []
    sections = parse_sections(_summarize([_user("Fix the pager."), _user(sentence, 2)]).text)
    assert not any(p.startswith("Constraint:") for p in sections.sections["Primary Request"])


def test_a_constraint_names_its_referent_without_the_task_before_it() -> None:
    """A rule that refers back ("Without the flag ...") is listed with the names of the
    sentence before it, never with that sentence: it is the task the rule goes with, and a
    task listed as a standing constraint is done again by an agent that resumes (a
    fresh-user trial of small-s1). The task stays in the user's message."""
    task = "Next, add a `--since-days` option to `quillpad export`."
    rule = "Without the flag the output must stay exactly as it is today."
    listed = f"{rule} (re: `--since-days`, `quillpad export`)"
    pinned = user_constraints([f"{task} {rule}"])
    assert pinned == [listed]
    request = SummaryRequest(
        messages=[_user("Fix the pager."), _user(f"{task} {rule}", 2)],
        prior=None,
        max_chars=20_000,
        pinned_constraints=pinned,
    )
    summary = parse_sections(ExtractiveSummarizer().summarize(request).text).sections
    constraints = [p for p in summary["Primary Request"] if p.startswith("Constraint:")]
    assert constraints == [f"Constraint: {listed}"]
    assert summary["All User Messages"][-1] == f"T2: {task} {rule}"
    state = ExtractiveSummarizer().summarize(replace(request, format="task-state")).task_state
    assert state is not None and state["user_constraints"] == [listed]
    # a sentence before it that names nothing is quoted as what the rule is about
    assert user_constraints([f"Add a verbose flag. {rule}"]) == [
        f"{rule} (re: Add a verbose flag.)"
    ]
    # with no sentence before it to name the flag, it is not stated at all
    assert user_constraints([rule]) == []
    alone = _summarize([_user("Fix the pager."), _user(rule, 2)]).text
    assert "Constraint: Without the flag" not in alone and rule in alone


def test_error_lines_located_by_file_and_line_are_caught() -> None:
    deploy = "Error: connection refused at scripts/deploy.sh:42"
    messages = [
        _user("Deploy it."),
        *_run("d", "scripts/deploy.sh", f"Deploying build 41...\n{deploy}\nDone."),
    ]
    assert any(deploy in e for e in _errors(messages))
    shapes = [
        "./deploy.sh: line 42: rsync: command not found",
        "deploy.sh:42: command not found: rsync",
        "tests/test_pager.py:12: AssertionError",
        "./main.go:12:2: undefined: pageSize",
        "--- FAIL: TestPager (0.00s)",
    ]
    for shape in shapes:
        out = f"building...\n{shape}\nsome trailing log line\nExit code: 1"
        assert shape in error_lines(out)[0], shape


def test_identifiers_of_traceback_frames_count_as_identifiers_seen_in_errors() -> None:
    out = (
        "Traceback (most recent call last):\n"
        '  File "scripts/replay.py", line 12, in <module>\n'
        "    MetricCache(window=-3).run()\n"
        '  File "src/pkg/cache.py", line 88, in check_window\n'
        "    raise ValueError(window_size)\n"
        "ValueError: window size must be positive, got -3\nExit code: 1"
    )
    messages = [_user("Replay it."), *_run("r", "python scripts/replay.py", out, error=True)]
    text = _summarize(messages).text
    concepts = parse_sections(text).sections["Key Technical Concepts"]
    assert {"MetricCache", "check_window", "window_size"} <= set(concepts), concepts


# ------------------------------------------------------- what the kept messages settle

_FAILED_RUN = (
    "F.\nE   TypeError: cmd_export() got an unexpected keyword argument 'since_days'\n"
    "FAILED tests/test_export.py::test_since_days - TypeError\n1 failed, 1 passed in 0.5s"
)


def _errors_of(request: SummaryRequest) -> list[str]:
    """The Errors and Fixes bullets of the summary of ``request``."""
    text = ExtractiveSummarizer().summarize(request).text
    return parse_sections(text).sections["Errors and Fixes"]


def test_a_failure_a_kept_message_fixes_is_resolved_later() -> None:
    """The span ends on a failed run; the messages kept after it run the same command (or a
    broader one) and it passes: the summary must not call the failure unresolved (a
    fresh-user trial of small-s1 found "...; unresolved" above a kept "2 passed")."""
    span = [
        _user("Add --since-days."),
        *_run("a", "pytest tests/test_export.py", _FAILED_RUN, error=True),
    ]
    alone = SummaryRequest(messages=span, max_chars=20_000)
    assert _errors_of(alone)[0].endswith("(1 failed, 1 passed); unresolved")
    for command in ("pytest tests/test_export.py", "pytest -q"):
        later = _run("b", command, "..\n2 passed in 0.5s")
        (bullet,) = _errors_of(replace(alone, later=later))
        assert bullet.startswith("`pytest tests/test_export.py` failed: TypeError: cmd_export()")
        assert bullet.endswith("(1 failed, 1 passed); resolved later"), command
        state = (
            ExtractiveSummarizer()
            .summarize(replace(alone, later=later, format="task-state"))
            .task_state
        )
        assert state is not None and state["blockers"] == []
    # what the later messages say is read, not summarized
    later = _run("b", "pytest tests/test_export.py", "..\n2 passed in 0.5s")
    text = ExtractiveSummarizer().summarize(replace(alone, later=later)).text
    assert "2 passed" not in text


def test_a_kept_run_of_another_command_or_a_failing_one_settles_nothing() -> None:
    span = [
        _user("Add --since-days."),
        *_run("a", "pytest tests/test_export.py", _FAILED_RUN, error=True),
    ]
    alone = SummaryRequest(messages=span, max_chars=20_000)
    for later in (
        _run("b", "pytest tests/test_other.py", "..\n2 passed in 0.5s"),  # narrower: no proof
        _run("b", "pytest tests/test_export.py", _FAILED_RUN, error=True),
        # passed, then failed again with the same error: open again
        _run("b", "pytest -q", "..\n2 passed")
        + _run("c", "pytest tests/test_export.py", _FAILED_RUN, error=True),
    ):
        (bullet,) = _errors_of(replace(alone, later=later))
        assert bullet.endswith("; unresolved"), later


def test_a_prior_failure_a_kept_message_fixes_is_resolved_later() -> None:
    """An unresolved failure of an earlier summary is settled by a kept run as by one of
    the new span."""
    first = [
        _user("Add --since-days."),
        *_run("a", "pytest tests/test_export.py", _FAILED_RUN, error=True),
    ]
    prior = _summarize(first)
    assert any(
        b.endswith("; unresolved") for b in parse_sections(prior.text).sections["Errors and Fixes"]
    )
    request = SummaryRequest(
        messages=[_user("Now look at the docs.", 2)],
        prior=prior,
        max_chars=20_000,
        later=_run("b", "pytest tests/test_export.py", "..\n2 passed"),
    )
    (bullet,) = _errors_of(request)
    assert bullet.startswith("`pytest tests/test_export.py` failed: TypeError")
    assert bullet.endswith("; resolved later")


def test_the_goal_leaves_out_a_sentence_that_only_introduced_the_constraints() -> None:
    """cjk-s3: "两点要求：" ("two requirements:") introduces two constraints, listed on their
    own; with them left out of the goal it introduced the screenshot sentence instead
    ("two requirements: attach the CI screenshot", a fresh-user trial)."""
    request = (
        "harborlog 里的 `parse_record` 不接受带时区偏移的时间戳，请帮忙修一下。对应的工单是 "
        "HAR-2273。\n\n两点要求：\n- 不要修改 harborlog.parser 的公共接口，计费服务和导出服务都"
        "在用它。\n- 代码必须继续支持 Python 3.9，批处理机器上只有这个版本。\n\n"
        "附上 CI 失败页面的截图。"
    )
    state = (
        ExtractiveSummarizer()
        .summarize(SummaryRequest(messages=[_user(request)], format="task-state", max_chars=20_000))
        .task_state
    )
    assert state is not None
    assert state["goal"] == (
        "harborlog 里的 `parse_record` 不接受带时区偏移的时间戳，请帮忙修一下。对应的工单是 "
        "HAR-2273。附上 CI 失败页面的截图。"
    )
    assert state["user_constraints"] == [
        "不要修改 harborlog.parser 的公共接口，计费服务和导出服务都在用它。",
        "代码必须继续支持 Python 3.9，批处理机器上只有这个版本。",
    ]


def test_an_earlier_summary_listing_the_task_with_the_rule_is_not_repeated() -> None:
    """An earlier summary (before the rule was listed alone) holds "TASK. RULE" as a
    constraint; the next summary lists the pinned "RULE (re: ...)" only, not both."""
    task = "Next, add a `--since-days` option to `quillpad export`."
    rule = "Without the flag the output must stay exactly as it is today."
    first = ExtractiveSummarizer().summarize(
        SummaryRequest(
            messages=[_user("Fix it.")], max_chars=20_000, pinned_constraints=[f"{task} {rule}"]
        )
    )
    pinned = user_constraints([f"{task} {rule}"])
    request = SummaryRequest(
        messages=[_user("Go on with the docs.", 2)],
        prior=first,
        max_chars=20_000,
        pinned_constraints=pinned,
    )
    summary = parse_sections(ExtractiveSummarizer().summarize(request).text).sections
    constraints = [p for p in summary["Primary Request"] if p.startswith("Constraint:")]
    assert constraints == [f"Constraint: {rule} (re: `--since-days`, `quillpad export`)"]
