"""The extractive summarizer on the three canonical samples and on small synthetic spans.

The probes (``fixtures/samples/*.probes.json``) are facts a good summary must keep. Ledger
probes (file paths, commands, error lines) must appear verbatim; all probes together must
reach 90% recall (case-insensitive substring).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compactctl.errors import UsageError
from compactctl.summarize import Summarizer, SummaryRequest, SummaryResult
from compactctl.summarize.extractive import ExtractiveSummarizer
from compactctl.summarize.summary_format import (
    DISPLAY_SECTIONS,
    TASK_STATE_FIELDS,
    parse_sections,
    parse_task_state,
    validate_sections,
)
from tests.helpers import ROOT
from tests.sessions import load_messages
from tests.sessions import probes as load_probes

NAMES = ("small-s1", "messy-s2", "cjk-s3")
LEDGER_KINDS = ("file_path", "command", "error")


def summarize(
    messages: Sequence[Mapping[str, Any]],
    fmt: str = "sections",
    max_chars: int = 6000,
    prior: SummaryResult | None = None,
    **extra: Any,
) -> SummaryResult:
    request = SummaryRequest(
        messages=messages,
        prior=prior,
        format=fmt,  # type: ignore[arg-type]
        max_chars=max_chars,
        **extra,
    )
    return ExtractiveSummarizer().summarize(request)


def state_text(result: SummaryResult) -> str:
    """Every task_state value, one per line (the JSON-decoded strings)."""
    assert result.task_state is not None
    lines = []
    for key in TASK_STATE_FIELDS:
        value = result.task_state[key]  # type: ignore[literal-required]
        lines.extend(value if isinstance(value, list) else [value])
    return "\n".join(lines)


def check_probes(text: str, probes: list[dict[str, Any]], minimum: float = 0.9) -> float:
    verbatim_missing = [p for p in probes if p["kind"] in LEDGER_KINDS and p["text"] not in text]
    missing = [p for p in probes if p["text"].lower() not in text.lower()]
    recall = 1 - len(missing) / len(probes)
    report = "\n".join(f"  missing {p['kind']}: {p['text']}" for p in missing + verbatim_missing)
    assert not verbatim_missing, "ledger probes not verbatim:\n" + report
    assert recall >= minimum, f"recall {recall:.2f} < {minimum}:\n{report}"
    return recall


# ----------------------------------------------------------------------- the samples


@pytest.mark.parametrize("name", NAMES)
def test_sections_summary_keeps_the_probes(name: str) -> None:
    result = summarize(load_messages(name), "sections", 6000)
    assert result.format == "sections"
    assert result.model == "extractive"
    assert result.task_state is None
    assert result.warnings == ()
    assert len(result.text) <= 6000
    validate_sections(result.text)
    assert check_probes(result.text, load_probes(name)) == 1.0


@pytest.mark.parametrize("name", NAMES)
def test_task_state_summary_keeps_the_probes(name: str) -> None:
    result = summarize(load_messages(name), "task-state", 3000)
    parsed = parse_task_state(result.text)
    assert parsed.task_state == result.task_state
    assert len(parsed.display_summary) <= 3000
    assert set(parsed.display_sections) == set(DISPLAY_SECTIONS)
    # the durable state alone carries the facts
    assert check_probes(state_text(result), load_probes(name)) == 1.0


@pytest.mark.parametrize("name", NAMES)
def test_task_state_fields_hold_the_right_kind_of_fact(name: str) -> None:
    result = summarize(load_messages(name), "task-state", 1200)
    assert result.task_state is not None
    state = result.task_state
    by_field = {
        "file_path": "\n".join(state["key_artifacts"]),
        "command": "\n".join(state["key_artifacts"]),
        "error": "\n".join(state["progress"] + state["blockers"]),
        "user_constraint": "\n".join(state["user_constraints"]),
        "pending_task": "\n".join(state["open_items"]),
        "decision": "\n".join(state["decisions"]),
    }
    for probe in load_probes(name):
        if probe["kind"] in by_field:
            assert probe["text"].lower() in by_field[probe["kind"]].lower(), probe
    display = parse_task_state(result.text).display_summary
    assert display.startswith("[compact_summary]\n\ndone:\n- ")
    assert len(display) <= 1200


@pytest.mark.parametrize("name", NAMES)
def test_sections_put_each_fact_in_its_section(name: str) -> None:
    sections = parse_sections(summarize(load_messages(name)).text).sections
    where = {
        "file_path": "Files and Code Sections",
        "error": "Errors and Fixes",
        "decision": "Decision Rationale",
        "pending_task": "Pending Tasks",
        "identifier": "Key Technical Concepts",
    }
    for probe in load_probes(name):
        if probe["kind"] in where:
            text = "\n".join(sections[where[probe["kind"]]])
            assert probe["text"].lower() in text.lower(), probe


@pytest.mark.parametrize("fmt", ["sections", "task-state"])
@pytest.mark.parametrize("name", NAMES)
def test_summaries_are_deterministic(name: str, fmt: str) -> None:
    messages = load_messages(name)
    first = summarize(messages, fmt, 2500)
    second = ExtractiveSummarizer().summarize(
        SummaryRequest(
            messages=list(messages),
            prior=None,
            format=fmt,  # type: ignore[arg-type]
            max_chars=2500,
        )
    )
    assert first == second
    assert first.text.encode() == second.text.encode()


def _split_at_turn(messages: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], int]:
    """Index of the first user message at or after the middle, and its turn."""
    middle = len(messages) // 2
    index = next(i for i in range(middle, len(messages)) if messages[i]["role"] == "user")
    return messages[:index], int(messages[index]["turnId"])


@pytest.mark.parametrize("fmt", ["sections", "task-state"])
@pytest.mark.parametrize("name", NAMES)
def test_prior_state_keeps_the_first_half_ledger(name: str, fmt: str) -> None:
    messages = load_messages(name)
    first, split_turn = _split_at_turn(messages)
    second = messages[len(first) :]
    prior = summarize(first, fmt, 6000)
    merged = summarize(second, fmt, 6000, prior=prior)
    text = merged.text if fmt == "sections" else state_text(merged)
    early = [p for p in load_probes(name) if p["kind"] in LEDGER_KINDS and p["turn"] < split_turn]
    assert early, "the split must leave ledger probes in the first half"
    for probe in early:
        assert probe["text"] in text, probe
    # the whole session through two summaries still keeps what one summary keeps
    check_probes(text, load_probes(name))
    if fmt == "sections":
        analysis = parse_sections(merged.text).analysis
        assert "Prior summary merged as state" in analysis


def test_prior_from_a_summary_event_dict() -> None:
    messages = load_messages("small-s1")
    first, _ = _split_at_turn(messages)
    prior = summarize(first, "task-state", 1200)
    event = {
        "summaryText": prior.text,
        "format": "task-state",
        "taskState": dict(prior.task_state or {}),
        "model": "extractive",
    }
    merged = summarize(
        messages[len(first) :], "sections", 8000, prior=SummaryResult.from_event(event)
    )
    assert "AssertionError: assert ['e-3', 'e-4', 'e-5'] == ['e-4', 'e-5', 'e-6']" in merged.text
    assert "Do not add new dependencies" in merged.text


# ----------------------------------------------------------------------- CJK


def test_cjk_session() -> None:
    result = summarize(load_messages("cjk-s3"), "sections", 6000)
    sections = parse_sections(result.text).sections
    assert (
        "Constraint: 不要修改 harborlog.parser 的公共接口，计费服务和导出服务都在用它。"
        in (sections["Primary Request"])
    )
    assert (
        "Constraint: 保留 build_payload 作为已弃用的别名，避免外部调用方出错。"
        in (sections["Primary Request"])
    )
    assert sections["Decision Rationale"][0].startswith(
        "决定：保留 strptime，只在 TIMESTAMP_FORMAT 里加上 %z，不引入 python-dateutil。新的运行时"
    )
    assert sections["Pending Tasks"] == [
        "给 report 命令加一个 --json 选项",
        "合并前在生产账本的副本上验证 HAR-2273 的修复",
    ]
    assert sections["Optional Next Step"] == ["给 report 命令加一个 --json 选项。"]
    assert sections["Key Technical Concepts"][:2] == ["HAR-2273", "test_parse_record_with_offset"]
    # sentences split on 。 and re-joined without spaces
    assert "T3: 请把 build_payload 全部重命名为 fetch_payload。保留 build_payload" in "\n".join(
        sections["All User Messages"]
    )


def test_cjk_task_state_display_is_within_the_default_max_summary_chars() -> None:
    result = summarize(load_messages("cjk-s3"), "task-state", 1200)
    parsed = parse_task_state(result.text)
    assert len(parsed.display_summary) <= 1200
    assert parsed.task_state["next_step"] == "给 report 命令加一个 --json 选项。"
    assert parsed.display_sections["constraints"][0] == (
        "不要修改 harborlog.parser 的公共接口，计费服务和导出服务都在用它。"
    )


# ----------------------------------------------------------------------- budget


def test_tight_budget_shortens_prose_and_keeps_the_ledger() -> None:
    messages = load_messages("small-s1")
    rich = summarize(messages, "sections", 100_000)
    tight = summarize(messages, "sections", 3000)
    assert len(rich.text) > 3000
    assert len(tight.text) <= 3000
    assert tight.warnings == ()
    validate_sections(tight.text)
    for probe in load_probes("small-s1"):
        if probe["kind"] in LEDGER_KINDS:
            assert probe["text"] in tight.text, probe


def test_when_the_ledger_does_not_fit_it_is_compressed_then_cut() -> None:
    # issue 15 point 4: the budget holds; the ledger no longer wins over it
    messages = load_messages("messy-s2")
    result = summarize(messages, "sections", 500)
    validate_sections(result.text)
    assert len(result.text) < len(summarize(messages, "sections", 100_000).text)
    assert "over the budget" in result.warnings[0]


def test_task_state_display_fits_even_a_small_budget() -> None:
    result = summarize(load_messages("messy-s2"), "task-state", 400)
    parsed = parse_task_state(result.text)
    assert len(parsed.display_summary) <= 400
    assert result.warnings == ()
    # the durable state is not cut
    assert "AssertionError: assert '/srv/cache' == '/tmp/override-cache'" in state_text(result)


# ----------------------------------------------------------------------- synthetic spans


def _user(text: str, turn: int = 1) -> dict[str, Any]:
    return {"type": "message", "role": "user", "turnId": turn, "content": text}


def _call(
    name: str,
    args: dict[str, Any],
    result: str,
    call_id: str,
    *,
    error: bool = False,
    text: str = "",
    turn: int = 1,
) -> list[dict[str, Any]]:
    return [
        {
            "type": "message",
            "role": "assistant",
            "turnId": turn,
            "content": text,
            "toolCalls": [{"id": call_id, "name": name, "arguments": args}],
        },
        {
            "type": "message",
            "role": "tool",
            "turnId": turn,
            "toolCallId": call_id,
            "toolName": name,
            "content": result,
            "isError": error,
        },
    ]


def _say(text: str, turn: int = 1) -> dict[str, Any]:
    return {"type": "message", "role": "assistant", "turnId": turn, "content": text}


def _sections_of(messages: list[dict[str, Any]], **extra: Any) -> dict[str, list[str]]:
    return parse_sections(summarize(messages, "sections", 20_000, **extra).text).sections


def test_exit_codes_and_shell_file_paths() -> None:
    messages = [
        _user("Look at the build."),
        *_call(
            "shell",
            {"command": ["bash", "-lc", "sed -n '1,40p' src/app.py"]},
            "Exit code: 0\nOutput:\nimport os",
            "c1",
        ),
        *_call(
            "exec_command",
            {"cmd": "make build > build.log"},
            "Exit code: 2\nOutput:\nerror: linker failed",
            "c2",
        ),
        *_call("bash", {"command": "cat docs/notes.md"}, '{"exit_code": 1, "output": ""}', "c3"),
        *_call("bash", {"command": "false"}, "exit status 3", "c4"),
        _say("The linker failed. Next, I will check the linker flags."),
    ]
    sections = _sections_of(messages)
    assert sections["Files and Code Sections"] == [
        "`src/app.py` — read",
        "`build.log` — written (failed)",
        "`docs/notes.md` — read (failed)",
    ]
    commands = [b for b in sections["Problem Solving"] if b.startswith("ran ")]
    assert commands == [
        "ran `sed -n '1,40p' src/app.py` — ok",
        "ran `make build > build.log` — exit 2",
        "ran `cat docs/notes.md` — exit 1",
        "ran `false` — exit 3",
    ]
    assert sections["Errors and Fixes"][0].startswith(
        "`make build > build.log` failed (exit 2): error: linker failed; unresolved → then: "
        "The linker failed."
    )
    assert sections["Optional Next Step"] == ["I will check the linker flags."]


def test_apply_patch_and_file_tools() -> None:
    patch = (
        "*** Begin Patch\n*** Update File: src/a.py\n@@\n-x\n+y\n"
        "*** Add File: src/new.py\n+z\n*** Delete File: old.txt\n*** End Patch"
    )
    messages = [
        _user("Refactor it."),
        *_call("apply_patch", {"input": patch}, "Done!", "c1"),
        *_call("Write", {"file_path": "/repo/README.md", "content": "x"}, "File created", "c2"),
        *_call("str_replace_based_edit_tool", {"command": "view", "path": "src/b.py"}, "...", "c3"),
        *_call(
            "Edit", {"filePath": "src/b.py", "old": "a", "new": "b"}, "no match", "c4", error=True
        ),
        _say("Done."),
    ]
    files = _sections_of(messages)["Files and Code Sections"]
    assert files == [
        "`src/a.py` — edited",
        "`src/new.py` — created",
        "`old.txt` — deleted",
        "`/repo/README.md` — created",
        "`src/b.py` — read, edited (failed)",
    ]


def test_pending_tasks_from_plans_sentences_and_unanswered_requests() -> None:
    messages = [
        _user("Fix the flaky test. Later we should also bump the CI image, not now."),
        *_call(
            "TodoWrite",
            {
                "todos": [
                    {"content": "fix flaky test", "status": "completed"},
                    {"content": "update the changelog", "status": "in_progress"},
                ]
            },
            "ok",
            "c1",
        ),
        _say("Fixed the flaky test. I still need to update the changelog for this change."),
        _user("Also rename the job to nightly-full.", turn=2),
    ]
    sections = _sections_of(messages)
    assert sections["Pending Tasks"] == [
        "update the changelog",
        "Later we should also bump the CI image, not now.",
        "answer the last user message (T2): Also rename the job to nightly-full.",
    ]
    assert "Done: fix flaky test" in sections["Problem Solving"]


def test_prior_pending_tasks_marked_done_are_dropped() -> None:
    first = [
        _user("Ship the release."),
        *_call(
            "update_plan",
            {
                "plan": [
                    {"step": "tag v1.2", "status": "pending"},
                    {"step": "write release notes", "status": "pending"},
                ]
            },
            "ok",
            "c1",
        ),
        _say("Planned."),
    ]
    prior = summarize(first, "sections", 20_000)
    assert parse_sections(prior.text).sections["Pending Tasks"] == [
        "tag v1.2",
        "write release notes",
    ]
    second = [
        _user("Go on.", turn=2),
        _say("Status:\n- [x] tag v1.2\n- [ ] write release notes", turn=2),
    ]
    merged = parse_sections(summarize(second, "sections", 20_000, prior=prior).text).sections
    assert merged["Pending Tasks"] == ["write release notes"]
    assert merged["All User Messages"] == ["T1: Ship the release.", "T2: Go on."]
    assert merged["Primary Request"] == ["Ship the release.", "Latest request (T2): Go on."]


def test_failed_tests_count_a_run_failed_without_an_error_flag() -> None:
    """A format with no ``isError`` and no exit code (the OpenAI chat one) says a run failed
    only in its counts: ``1 failed`` counts that run among the failed ones (the trial's
    ``×3 — 53 passed`` said nothing of the run that had failed); an ``output shows`` line is
    no verdict and counts as none."""
    messages = [
        _user("Run the tests until they pass, and check the log."),
        *_call("bash", {"command": "pytest -q"}, "....\n4 passed in 0.1s\n", "c1"),
        *_call("bash", {"command": "pytest -q"}, "F...\n1 failed, 3 passed in 0.1s\n", "c2"),
        *_call("bash", {"command": "pytest -q"}, "....\n4 passed in 0.1s\n", "c3"),
        *_call("bash", {"command": "grep ERROR app.log"}, "ERROR db: gone\n", "c4"),
        *_call("bash", {"command": "grep ERROR app.log"}, "ERROR db: gone\n", "c5"),
        _say("All green."),
    ]
    commands = [b for b in _sections_of(messages)["Problem Solving"] if b.startswith("ran ")]
    assert commands == [
        "ran `pytest -q` ×3 — 4 passed; 1 of 3 runs failed",
        "ran `grep ERROR app.log` ×2 — output shows ERROR db: gone",
    ]


def test_a_command_outcome_says_only_what_its_result_does() -> None:
    """No exit code and no ``isError``: ``ok`` is not what the result says. A traceback or
    an ``error:`` line is the outcome; an output with neither has none; pytest's counts stay
    (they used to read ``ok``, also ``ok, 1 failed``)."""
    traceback = (
        'Traceback (most recent call last):\n  File "migrate.py", line 3, in <module>\n'
        "    import yaml\nModuleNotFoundError: No module named 'yaml'\n"
    )
    messages = [
        _user("Run the migration, the linter and the tests."),
        *_call("bash", {"command": "python migrate.py"}, traceback, "c1"),
        *_call(
            "bash",
            {"command": "make lint"},
            "error: src/a.py: cannot parse\nmake: *** [lint] Error 1\n",
            "c2",
        ),
        *_call("bash", {"command": "ls src"}, "a.py\nb.py\n", "c3"),
        *_call(
            "bash",
            {"command": "pytest tests/test_a.py -q"},
            "F...\nFAILED tests/test_a.py::test_x - assert 1 == 2\n1 failed, 3 passed in 0.2s\n",
            "c4",
        ),
        *_call("bash", {"command": "pytest -q"}, "....\n4 passed in 0.1s\nExit code: 0", "c5"),
        _say("The migration needs yaml."),
    ]
    sections = _sections_of(messages)
    commands = [b for b in sections["Problem Solving"] if b.startswith("ran ")]
    assert commands == [
        "ran `python migrate.py` — output shows ModuleNotFoundError: No module named 'yaml'",
        "ran `make lint` — output shows error: src/a.py: cannot parse",
        "ran `ls src`",
        "ran `pytest tests/test_a.py -q` — 1 failed, 3 passed",
        "ran `pytest -q` — ok, 4 passed",
    ]
    # a compact ledger lists by name only the commands that did not fail, ``ls`` among them
    short = parse_sections(summarize(messages, "sections", 900).text).sections["Problem Solving"]
    assert "also ran, never failed: `ls src`, `pytest -q`" in short
    # read back, "never failed" is all that line says: no "ok" in the next summary
    later = [*_call("bash", {"command": "git status"}, "clean", "c6", turn=2), _say("Done.", 2)]
    merged = _sections_of(later, prior=summarize(messages, "sections", 900))
    assert "ran `ls src`" in merged["Problem Solving"]
    assert "ran `pytest -q`" in merged["Problem Solving"]


def test_an_error_seen_in_a_later_run_does_not_resolve_a_failure() -> None:
    """A failure is fixed only by a later run that passed: one whose output shows an error
    line (no exit code) or failed tests did not."""
    messages = [
        _user("Make the tests pass."),
        *_call("bash", {"command": "pytest"}, "E   KeyError: 'user'\n1 failed", "c1", error=True),
        *_call("bash", {"command": "pytest"}, "ERROR conftest: ImportError: no module x", "c2"),
        _say("Still broken."),
    ]
    assert _sections_of(messages)["Errors and Fixes"] == [
        "`pytest` failed: KeyError: 'user' (1 failed); unresolved → then: Still broken.",
        "seen in the output of `pytest`: ImportError: no module x",
    ]


def test_prior_unresolved_error_is_resolved_by_a_later_success() -> None:
    first = [
        _user("Make the tests pass."),
        *_call(
            "bash",
            {"command": "pytest tests/test_a.py"},
            "E   KeyError: 'user'\nFAILED tests/test_a.py::test_login - KeyError: 'user'\n"
            "1 failed in 0.1s",
            "c1",
            error=True,
        ),
        _say("A key is missing."),
    ]
    prior = summarize(first, "task-state", 1200)
    assert prior.task_state is not None
    assert prior.task_state["blockers"] == [
        "`pytest tests/test_a.py` failed: KeyError: 'user' [tests/test_a.py::test_login] "
        "(1 failed); unresolved"
    ]
    second = [
        *_call("bash", {"command": "pytest"}, "3 passed in 0.2s", "c2", turn=2),
        _say("All green.", turn=2),
    ]
    merged = summarize(second, "task-state", 1200, prior=prior)
    assert merged.task_state is not None
    assert merged.task_state["blockers"] == []
    assert any(
        "KeyError: 'user'" in p and p.endswith("resolved later")
        for p in merged.task_state["progress"]
    )


def test_pinned_constraints_instructions_and_skipped_summary_messages() -> None:
    messages = [
        {"type": "message", "role": "user", "content": "<summary>old</summary>", "summaryOf": "s1"},
        _user("Speed up the importer."),
        _say("I'll profile it first because the slow part is unknown."),
    ]
    result = summarize(
        messages,
        "sections",
        20_000,
        pinned_constraints=["Never touch the public API"],
        instructions="focus on the importer",
    )
    parsed = parse_sections(result.text)
    assert parsed.sections["Primary Request"] == [
        "Speed up the importer.",
        "Focus for this summary: focus on the importer",
        "Constraint: Never touch the public API",
    ]
    assert "Skipped 1 earlier summary message(s)." in parsed.analysis
    assert "Focus requested: focus on the importer" in parsed.analysis
    assert parsed.sections["Decision Rationale"] == [
        "I'll profile it first because the slow part is unknown."
    ]


def test_empty_span_still_validates() -> None:
    for fmt in ("sections", "task-state"):
        result = summarize([], fmt, 1200)
        if fmt == "sections":
            assert parse_sections(result.text).sections["Pending Tasks"] == ["None."]
        else:
            assert parse_task_state(result.text).display_sections["done"] == [
                "nothing completed yet"
            ]


def test_request_validation_and_protocol() -> None:
    assert isinstance(ExtractiveSummarizer(), Summarizer)
    assert ExtractiveSummarizer.name == "extractive"
    with pytest.raises(UsageError, match="unknown summary format 'prose'"):
        SummaryRequest(messages=[], prior=None, format="prose", max_chars=10)  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="max_chars must be at least 1"):
        SummaryRequest(messages=[], prior=None, format="sections", max_chars=0)


# ----------------------------------------------------------------------- long sessions


def _repeat(messages: list[dict[str, Any]], copies: int) -> list[dict[str, Any]]:
    """The span repeated ``copies`` times: turn ids shifted, call ids and user text varied."""
    turns = max(int(m.get("turnId", 0)) for m in messages)
    out = []
    for k in range(copies):
        for m in messages:
            if m["role"] == "system":
                continue
            m2 = json.loads(json.dumps(m))
            m2["turnId"] = m["turnId"] + k * turns
            for call in m2.get("toolCalls", []):
                call["id"] = f"{call['id']}-{k}"
            if "toolCallId" in m2:
                m2["toolCallId"] = f"{m2['toolCallId']}-{k}"
            if m2["role"] == "user" and k:
                m2["content"] = f"(round {k}) {m2['content']}"
            out.append(m2)
    return out


def test_a_long_repetitive_session_fits_and_keeps_every_probe() -> None:
    messages = _repeat(load_messages("small-s1"), 40)
    result = summarize(messages, "sections", 12_000)
    assert result.warnings == ()
    assert len(result.text) <= 12_000
    check_probes(result.text, load_probes("small-s1"), minimum=1.0)
    sections = parse_sections(result.text).sections
    # repeated constraints ("(round k) Heads-up: do not modify ...") are listed once
    constraints = [b for b in sections["Primary Request"] if b.startswith("Constraint: ")]
    assert len(constraints) == 4
    # repeated failures are one entry each
    assert len(sections["Errors and Fixes"]) == 4
    assert sections["All User Messages"][0].startswith("(")  # older messages left out


def test_ten_incremental_summaries_do_not_grow_the_ledger() -> None:
    messages = _repeat(load_messages("small-s1"), 10)
    size = len(messages) // 10
    prior: SummaryResult | None = None
    lengths = []
    for i in range(10):
        prior = summarize(messages[i * size : (i + 1) * size], "sections", 12_000, prior=prior)
        assert prior.warnings == ()
        lengths.append(len(prior.text))
    assert prior is not None and max(lengths) <= 12_000
    sections = parse_sections(prior.text).sections
    assert len(sections["Errors and Fixes"]) == 4
    assert len(sections["Files and Code Sections"]) == 5
    assert "`src/quillpad/storage.py` — read ×40, edited ×10" in sections["Files and Code Sections"]
    check_probes(prior.text, load_probes("small-s1"), minimum=1.0)


def test_display_summary_keeps_constraints_before_done_items() -> None:
    result = summarize(load_messages("small-s1"), "task-state", 1200)
    parsed = parse_task_state(result.text)
    assert len(parsed.display_summary) <= 1200
    assert parsed.display_sections["constraints"] == [
        "Keep the on-disk ledger format unchanged, existing ledgers must open without a migration.",
        "Do not add new dependencies.",
        "do not modify src/quillpad/legacy/importer.py at all, another team owns it and has a "
        "refactor in flight.",
        # the rule alone with what it is about: the task before it is no constraint
        "Without the flag the output must stay exactly as it is today. "
        "(re: `--since-days`, `quillpad export`)",
    ]
    # newest done items first
    assert parsed.display_sections["done"][0] == "`--since-days` for `quillpad export`"


# ----------------------------------------------------------------------- robustness


def test_output_does_not_depend_on_the_hash_seed() -> None:
    script = (
        "import hashlib, sys\n"
        "from tests.unit.summarize.test_extractive import load_messages, summarize\n"
        "h = hashlib.sha256()\n"
        "for name in ('small-s1', 'messy-s2', 'cjk-s3'):\n"
        "    for fmt in ('sections', 'task-state'):\n"
        "        h.update(summarize(load_messages(name), fmt, 1500).text.encode())\n"
        "print(h.hexdigest())\n"
    )
    digests = {
        subprocess.run(
            [sys.executable, "-c", script],
            cwd=ROOT,
            env={**os.environ, "PYTHONHASHSEED": seed},
            capture_output=True,
            check=True,
            text=True,
        ).stdout
        for seed in ("1", "2")
    }
    assert len(digests) == 1


_text = st.lists(
    st.sampled_from(
        [
            "a",
            " ",
            "\n",
            "/",
            ".py",
            "`",
            "。",
            "决定",
            "不要",
            "Exit code: 1",
            "</summary>",
            "### Pending Tasks",
            "- [ ] todo",
            "E   ValueError: x",
            "FAILED t.py::test_a - E",
            "```",
            "*** Update File: a.py",
            "Decision: ",
            "Next step: ",
            "[compact_summary]",
        ]
    ),
    max_size=20,
).map("".join)
_value = st.recursive(
    st.none() | st.booleans() | st.integers() | _text,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.sampled_from(["path", "command", "plan", "status", "step"]), inner)
    ),
    max_leaves=6,
)
_message = st.fixed_dictionaries(
    {
        "role": st.sampled_from(["user", "assistant", "tool", "system"]),
        "content": st.one_of(_text, _value),
    },
    optional={
        "turnId": st.one_of(st.integers(-1, 5), st.none(), _text),
        "toolCalls": st.one_of(
            st.lists(
                st.fixed_dictionaries(
                    {
                        "id": st.sampled_from(["c1", "c2"]),
                        "name": st.sampled_from(["bash", "read_file", "update_plan", "x"]),
                        "arguments": _value,
                    }
                ),
                max_size=3,
            ),
            _value,
        ),
        "toolCallId": st.sampled_from(["c1", "c2"]),
        "isError": st.booleans(),
    },
)


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    messages=st.lists(_message, max_size=10),
    fmt=st.sampled_from(["sections", "task-state"]),
    max_chars=st.integers(1, 3000),
)
def test_any_message_shapes_give_a_valid_summary(
    messages: list[dict[str, Any]], fmt: str, max_chars: int
) -> None:
    first = summarize(messages, fmt, max_chars)
    result = summarize(messages, fmt, max_chars, prior=first)
    if fmt == "sections":
        validate_sections(result.text)
        size = len(result.text)
    else:
        size = len(parse_task_state(result.text).display_summary)
    assert size <= max_chars or result.warnings
