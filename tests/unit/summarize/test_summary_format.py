"""The two summary formats: render/parse round trips, validators, truncation.

Rules under test come from Coding Code's context service (ten ``### `` sections inside
``<summary>``) and NeoCode's compact protocol (task_state with exactly eight fields, a
``[compact_summary]`` display summary with five sections of at least one non-empty bullet,
1200 characters by default).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compactctl.errors import SummarizerError
from compactctl.summarize.summary_format import (
    DEFAULT_MAX_SUMMARY_CHARS,
    DISPLAY_SECTIONS,
    MIN_BULLET_CHARS,
    SECTIONS,
    TASK_STATE_FIELDS,
    SummaryFormatError,
    parse_display,
    parse_sections,
    parse_task_state,
    render_display,
    render_sections,
    render_task_state,
    truncate_at_bullet,
    validate_display,
    validate_sections,
    validate_task_state,
)


def _state(**changes: Any) -> dict[str, Any]:
    state: dict[str, Any] = {
        "goal": "fix pagination (QUI-8564)",
        "progress": ["fixed the slice start in storage.page_of"],
        "open_items": ["write a migration note for the 0.6.0 release"],
        "next_step": "write the migration note",
        "blockers": [],
        "key_artifacts": ["`src/quillpad/storage.py` — edited"],
        "decisions": ["fix the slice instead of compensating in the CLI"],
        "user_constraints": ["Do not add new dependencies"],
    }
    state.update(changes)
    return state


DISPLAY = (
    "[compact_summary]\n\n"
    "done:\n- fixed the slice start\n\n"
    "in_progress:\n- write the migration note\n\n"
    "decisions:\n- fix the slice instead of compensating in the CLI\n\n"
    "code_changes:\n- src/quillpad/storage.py: start = (page - 1) * page_size\n\n"
    "constraints:\n- Do not add new dependencies"
)


def _answer(state: dict[str, Any] | None = None, display: str = DISPLAY, **top: Any) -> str:
    data: dict[str, Any] = {
        "task_state": _state() if state is None else state,
        "display_summary": display,
    }
    data.update(top)
    return json.dumps(data, ensure_ascii=False)


def _sections(**overrides: list[str]) -> dict[str, list[str]]:
    sections = {name: [f"{name.lower()} item"] for name in SECTIONS}
    sections.update(overrides)
    return sections


# ----------------------------------------------------------------------- sections format


def test_render_sections_has_the_ten_section_layout() -> None:
    text = render_sections(_sections(), analysis="3 messages")
    assert text.startswith(
        "<analysis>\n3 messages\n</analysis>\n\n<summary>\n### Primary Request\n"
        "- primary request item\n\n### Key Technical Concepts\n"
    )
    assert text.endswith("### Optional Next Step\n- optional next step item\n</summary>")
    assert [line for line in text.split("\n") if line.startswith("### ")] == [
        f"### {name}" for name in SECTIONS
    ]


def test_sections_round_trip() -> None:
    sections = _sections(
        **{
            "Files and Code Sections": ["`src/a.py` — edited", "`src/b.py` — read ×2"],
            "Errors and Fixes": ["AssertionError: assert 1 == 2\nthen fixed the slice"],
            "Pending Tasks": [],
        }
    )
    text = render_sections(sections, analysis="line one\nline two")
    parsed = parse_sections(text)
    assert parsed.analysis == "line one\nline two"
    assert list(parsed.sections) == list(SECTIONS)
    assert parsed.sections["Files and Code Sections"] == [
        "`src/a.py` — edited",
        "`src/b.py` — read ×2",
    ]
    assert parsed.sections["Errors and Fixes"] == [
        "AssertionError: assert 1 == 2\nthen fixed the slice"
    ]
    assert parsed.sections["Pending Tasks"] == []
    assert render_sections(parsed.sections, parsed.analysis) == text


def test_parse_sections_tolerates_model_spellings() -> None:
    body = "\n".join(f"## {name.upper()}:\n* point\n1. numbered" for name in SECTIONS)
    parsed = parse_sections(f"preamble\n<summary>\n{body}\n</summary>\ntrailer")
    assert parsed.analysis == ""
    assert parsed.sections["Current Work"] == ["point", "numbered"]


def test_parse_sections_keeps_code_fences_inside_a_bullet() -> None:
    files = "### Files and Code Sections\n- `a.py`\n```python\n# not a heading\n\nx = 1\n```"
    body = "\n\n".join(
        files if name == "Files and Code Sections" else f"### {name}\n- x" for name in SECTIONS
    )
    parsed = parse_sections(f"<summary>\n{body}\n</summary>")
    assert parsed.sections["Files and Code Sections"] == [
        "`a.py`\n```python\n# not a heading\n\nx = 1\n```"
    ]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("### Primary Request\n- x", "no <summary>...</summary> block"),
        ("<summary>\n### Primary Request\n- x", "not closed by </summary>"),
        (
            "<summary>\n" + "\n".join(f"### {n}\n- x" for n in SECTIONS[:-1]) + "\n</summary>",
            "missing section(s): 'Optional Next Step'",
        ),
        (
            "<summary>\n### Primary Request\n- x\n### Weather\n- sunny\n</summary>",
            "unknown section heading '### Weather'",
        ),
        (
            "<summary>\n### Primary Request\n- x\n### Primary Request\n- y\n</summary>",
            "section 'Primary Request' appears twice",
        ),
        (
            "<summary>\nhello\n### Primary Request\n- x\n</summary>",
            "text before the first section heading: 'hello'",
        ),
    ],
)
def test_validate_sections_rejects(text: str, message: str) -> None:
    with pytest.raises(SummaryFormatError) as info:
        validate_sections(text)
    assert message in str(info.value)


def test_render_sections_rejects_unknown_names() -> None:
    with pytest.raises(SummaryFormatError, match="unknown section 'Weather'"):
        render_sections({"Weather": ["sunny"]})


def test_summary_format_error_is_a_value_error_and_a_summarizer_error() -> None:
    with pytest.raises(ValueError) as info:
        validate_sections("nothing")
    assert isinstance(info.value, SummarizerError)
    assert info.value.exit_code == 3


# ----------------------------------------------------------------------- display summary


def test_display_round_trip() -> None:
    sections = {name: [f"{name} one", f"{name} two"] for name in DISPLAY_SECTIONS}
    text = render_display(sections)
    assert text.startswith("[compact_summary]\n\ndone:\n- done one\n- done two\n\nin_progress:")
    assert parse_display(text) == sections


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            DISPLAY.replace("[compact_summary]", "[summary]"),
            "display_summary must start with [compact_summary]",
        ),
        (
            DISPLAY.replace(
                "decisions:\n- fix the slice instead of compensating in the CLI\n\n", ""
            ),
            "display_summary is missing section 'decisions'",
        ),
        (
            DISPLAY.replace("- write the migration note", "- "),
            "display_summary section 'in_progress' has no non-empty bullet",
        ),
        (
            DISPLAY.replace("- write the migration note", ""),
            "display_summary section 'in_progress' has no non-empty bullet",
        ),
        (DISPLAY + "\n\nweather:\n- sunny", "unknown display_summary section 'weather'"),
        (DISPLAY + "\n\ndone:\n- again", "display_summary section 'done' appears twice"),
        (
            DISPLAY.replace("- fixed the slice start", "fixed the slice start"),
            "display_summary section 'done': line 'fixed the slice start' is not a '- ' bullet",
        ),
        (
            DISPLAY.replace("[compact_summary]\n", "[compact_summary]\nA title\n"),
            "display_summary has text before its first section: 'A title'",
        ),
    ],
)
def test_validate_display_rejects(text: str, message: str) -> None:
    with pytest.raises(SummaryFormatError) as info:
        validate_display(text)
    assert message in str(info.value)


def test_display_continuation_lines_belong_to_their_bullet() -> None:
    text = DISPLAY.replace("- fixed the slice start", "- fixed the slice start\n  in page_of")
    assert parse_display(text)["done"] == ["fixed the slice start\nin page_of"]


# ----------------------------------------------------------------------- task-state format


def test_task_state_round_trip() -> None:
    text = render_task_state(_state(), DISPLAY)
    data = json.loads(text)
    assert list(data) == ["task_state", "display_summary"]
    assert list(data["task_state"]) == list(TASK_STATE_FIELDS)
    parsed = parse_task_state(text)
    assert parsed.task_state == _state()
    assert parsed.display_summary == DISPLAY
    assert parsed.display_sections["code_changes"] == [
        "src/quillpad/storage.py: start = (page - 1) * page_size"
    ]


@pytest.mark.parametrize("fence", ["```json\n{}\n```", "```\n{}\n```", "  ```JSON\n{}```  "])
def test_parse_task_state_accepts_a_fenced_answer(fence: str) -> None:
    parsed = parse_task_state(fence.replace("{}", _answer()))
    assert parsed.task_state["goal"] == "fix pagination (QUI-8564)"
    assert parsed.display_sections["constraints"] == ["Do not add new dependencies"]


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (_answer(_state(notes=["x"])), "task_state has key(s) outside the fixed fields: notes"),
        (
            _answer({k: v for k, v in _state().items() if k != "blockers"}),
            "task_state is missing field(s): blockers",
        ),
        (_answer(_state(goal=["a list"])), "task_state.goal must be a string, got list"),
        (_answer(_state(progress="done")), "task_state.progress must be a list of strings"),
        (_answer(_state(decisions=["ok", 3])), "task_state.decisions[1] must be a string"),
        (_answer(_state(open_items=["  "])), "task_state.open_items[0] is blank"),
        (
            _answer(display=DISPLAY.replace("[compact_summary]\n", "")),
            "display_summary must start with [compact_summary]",
        ),
        (
            _answer(display=DISPLAY.replace("- Do not add new dependencies", "-")),
            "display_summary section 'constraints' has no non-empty bullet",
        ),
        (_answer(extra="x"), "unexpected top-level key(s): extra"),
        (json.dumps({"task_state": _state()}), "the task-state answer has no 'display_summary'"),
        (json.dumps([1, 2]), "must be a JSON object, got list"),
        ("{not json", "not valid JSON"),
        (
            json.dumps({"task_state": "x", "display_summary": DISPLAY}),
            "task_state must be a JSON object, got str",
        ),
    ],
)
def test_parse_task_state_rejects(answer: str, message: str) -> None:
    with pytest.raises(SummaryFormatError) as info:
        parse_task_state(answer)
    assert message in str(info.value)


def test_render_task_state_refuses_invalid_input() -> None:
    with pytest.raises(SummaryFormatError, match="outside the fixed fields: extra"):
        render_task_state(_state(extra=[]), DISPLAY)
    with pytest.raises(SummaryFormatError, match="must start with"):
        render_task_state(_state(), "done:\n- x")


def test_validate_task_state_returns_the_fields_in_order() -> None:
    shuffled = dict(reversed(list(_state().items())))
    assert list(validate_task_state(shuffled)) == list(TASK_STATE_FIELDS)


# ----------------------------------------------------------------------- truncation


def _long_display() -> str:
    return render_display(
        {
            "done": [f"done item {i}: " + "d" * 60 for i in range(12)],
            "in_progress": ["write the migration note", "document --since-days in README.md"],
            "decisions": [f"decision {i}: " + "x" * 40 for i in range(4)],
            "code_changes": ["`src/quillpad/storage.py` — edited"],
            "constraints": ["Do not add new dependencies", "Keep the ledger format unchanged"],
        }
    )


def _bullets(text: str) -> list[str]:
    return [line for line in text.split("\n") if line.startswith("- ")]


def test_truncate_is_a_no_op_when_the_text_fits() -> None:
    assert truncate_at_bullet(DISPLAY, len(DISPLAY)) == DISPLAY
    assert truncate_at_bullet(DISPLAY) == DISPLAY
    assert DEFAULT_MAX_SUMMARY_CHARS == 1200


def test_truncate_display_drops_trailing_bullets_of_the_longest_section() -> None:
    text = _long_display()
    assert len(text) > 1200
    cut = truncate_at_bullet(text)
    assert len(cut) <= 1200
    validate_display(cut)
    # cut at bullet boundaries: every kept bullet is an original bullet, in the same order
    kept = _bullets(cut)
    original = _bullets(text)
    assert kept == [b for b in original if b in kept]
    sections = parse_display(cut)
    # only the longest section ("done") lost bullets, from its end
    assert sections["done"] == parse_display(text)["done"][: len(sections["done"])]
    assert len(sections["done"]) < 12
    for name in ("in_progress", "decisions", "code_changes", "constraints"):
        assert sections[name] == parse_display(text)[name]


def test_truncate_keeps_the_first_bullet_of_every_section_then_shortens() -> None:
    text = _long_display()
    cut = truncate_at_bullet(text, 300)
    assert len(cut) <= 300
    sections = parse_display(cut)
    assert all(len(bullets) == 1 for bullets in sections.values())
    assert sections["constraints"] == ["Do not add new dependencies"]
    assert sections["done"][0].startswith("done item 0: ddd")
    assert sections["done"][0].endswith("…")


def test_truncate_returns_a_valid_skeleton_when_the_budget_is_impossible() -> None:
    cut = truncate_at_bullet(_long_display(), 50)
    validate_display(cut)
    assert len(cut) > 50
    assert all(len(b) <= MIN_BULLET_CHARS for b in _bullets(cut))


def test_truncate_sections_drops_the_analysis_first() -> None:
    text = render_sections(_sections(), analysis="\n".join(f"reasoning {i}" for i in range(40)))
    cut = truncate_at_bullet(text, len(text) - 100)
    parsed = parse_sections(cut)
    assert parsed.sections == parse_sections(text).sections
    assert parsed.analysis.split("\n")[0] == "reasoning 0"
    assert len(cut) <= len(text) - 100


def test_truncate_sections_stays_valid_and_within_budget() -> None:
    sections = _sections(
        **{
            "All User Messages": [f"T{i}: " + "u" * 80 for i in range(20)],
            "Files and Code Sections": [f"`src/f{i}.py` — edited" for i in range(10)],
        }
    )
    text = render_sections(sections, analysis="counts")
    cut = truncate_at_bullet(text, 1500)
    assert len(cut) <= 1500
    parsed = parse_sections(cut)
    assert all(parsed.sections[name] for name in SECTIONS)
    assert len(parsed.sections["All User Messages"]) < 20
    assert parsed.sections["Primary Request"] == ["primary request item"]


def test_truncate_never_leaves_a_code_fence_open() -> None:
    code = "`a.py`\n```python\n" + "\n".join(f"line_{i} = {i}" for i in range(60)) + "\n```"
    text = render_sections(_sections(**{"Files and Code Sections": [code]}))
    cut = truncate_at_bullet(text, 900)
    assert len(cut) <= 900
    assert sum(1 for line in cut.split("\n") if line.strip().startswith("```")) % 2 == 0
    validate_sections(cut)


_bullet_text = st.text(alphabet=st.sampled_from("abc xyz。中文-_:`"), min_size=1, max_size=90)


@settings(max_examples=150, deadline=None)
@given(
    sections=st.fixed_dictionaries(
        {name: st.lists(_bullet_text, min_size=1, max_size=8) for name in DISPLAY_SECTIONS}
    ),
    max_chars=st.integers(min_value=0, max_value=1500),
)
def test_truncate_display_property(sections: dict[str, list[str]], max_chars: int) -> None:
    sections = {k: [b if b.strip() else "x" for b in v] for k, v in sections.items()}
    text = render_display(sections)
    cut = truncate_at_bullet(text, max_chars)
    validate_display(cut)
    skeleton = len(DISPLAY_SECTIONS) * (MIN_BULLET_CHARS + 16) + 20
    if max_chars >= skeleton:
        assert len(cut) <= max_chars
    if len(text) <= max_chars:
        assert cut == text


def test_resume_text_frames_a_summary_for_the_resuming_agent() -> None:
    from compactctl.summarize.summary_format import RESUME_PREAMBLE, resume_text

    sections = render_sections({"Primary Request": ["fix the pager"]}, "my notes")
    framed = resume_text(sections, "/work/s.jsonl")
    preamble, body = framed.split("\n\n", 1)
    assert preamble.startswith(RESUME_PREAMBLE + ": the summary below replaces")
    assert "the full transcript is at /work/s.jsonl." in preamble
    assert body == sections[sections.index("<summary>") :]  # the notes are left out
    assert "my notes" not in framed and not framed.startswith("<analysis>")
    # stdin has no path to name; a task-state answer follows whole
    answer = '{"task_state": {}, "display_summary": "[compact_summary]"}'
    framed = resume_text(answer, "-")
    assert framed.endswith("\n\n" + answer) and "transcript is at" not in framed
