"""Issue 15 point 2: facts classified honestly. Constraints are standing instructions, not
tasks; an error is unresolved only if no later run of the same command passed; error lines
are kept verbatim, compiler and type-checker ``file.py:N: error:`` lines included."""

from __future__ import annotations

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
        "Without the flag the output must stay exactly as it is today.",
        "Only touch files under src/pager.",
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
