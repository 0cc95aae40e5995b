"""`eval --judge`: the real litellm call path, answered with ``mock_response`` (no network)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from compactctl.errors import UsageError
from compactctl.evaluate import EvalOptions
from compactctl.evaluate.job import eval_path
from compactctl.evaluate.judge import (
    DIMENSIONS,
    QUESTION_TYPES,
    JudgeError,
    JudgeOptions,
    parse_grades,
)
from tests.fakes import FakeModel, judge_grades
from tests.helpers import run_python, write_jsonl
from tests.sessions import load_records

SECRET = "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789"


def session_with_secret(tmp_path: Path) -> Path:
    records = load_records("small-s1")
    for r in records:
        if r.get("role") == "user":
            r["content"] += f" The staging key is {SECRET}."
            break
    return write_jsonl(tmp_path / "s.jsonl", records)


def judge_options(**kw: Any) -> EvalOptions:
    return EvalOptions(
        encoding="estimate", judge=JudgeOptions("openai/gpt-4o-mini", num_retries=0, **kw)
    )


def test_judge_asks_four_questions_and_grades_six_dimensions(tmp_path, monkeypatch):
    answers: list[Any] = []
    per_type = {"recall": 5, "artifact": 4, "continuation": 2, "decision": 1}
    for qtype in QUESTION_TYPES:
        answers += [f"answer to {qtype}", judge_grades(accuracy=per_type[qtype], continuity=4)]
    model = FakeModel(monkeypatch, *answers)
    result = eval_path(str(session_with_secret(tmp_path)), judge_options())["result"]
    judge = result.judge
    assert len(model.calls) == 8
    assert [c["model"] for c in model.calls] == ["openai/gpt-4o-mini"] * 8
    assert list(judge["scores"]) == list(DIMENSIONS)
    assert judge["scores"]["accuracy"] == 3.0  # (5 + 4 + 2 + 1) / 4
    assert judge["scores"]["continuity"] == 4.0
    assert judge["scores"]["completeness"] == 3.0
    assert judge["byType"]["recall"]["accuracy"] == 5
    assert judge["overall"] == round((3 + 4 + 3 * 4) / 6, 2)
    assert [q["answer"] for q in judge["questions"]] == [f"answer to {t}" for t in QUESTION_TYPES]
    # the answering call gets the effective context; the judge gets the reference facts
    answer_prompt = model.calls[2]["messages"][1]["content"]
    assert "src/quillpad/storage.py" in answer_prompt and "QUESTION: Which files" in answer_prompt
    judge_prompt = model.calls[3]["messages"][1]["content"]
    assert "- file_path: tests/test_storage.py" in judge_prompt
    assert "- command: python -m pytest tests/test_storage.py -q" in judge_prompt
    assert "answer to artifact" in judge_prompt
    # redaction applies to everything sent
    sent = json.dumps([c["messages"] for c in model.calls])
    assert SECRET not in sent and "[REDACTED:openai-key]" in sent
    assert result.counts.retention == 1.0  # the probe results are still there


def test_answer_model_and_no_redact(tmp_path, monkeypatch):
    model = FakeModel(monkeypatch, *["a", judge_grades()] * 4)
    options = judge_options(answer_model="openai/gpt-4.1-nano", redact=False)
    eval_path(str(session_with_secret(tmp_path)), options)
    assert [c["model"] for c in model.calls[:2]] == ["openai/gpt-4.1-nano", "openai/gpt-4o-mini"]
    assert SECRET in model.calls[0]["messages"][1]["content"]


def test_a_judge_answer_without_scores_is_an_error(tmp_path, monkeypatch):
    FakeModel(monkeypatch, "an answer", "I think it is pretty good.")
    with pytest.raises(JudgeError, match="no JSON object"):
        eval_path(str(session_with_secret(tmp_path)), judge_options())


def test_provider_errors(tmp_path, monkeypatch):
    import litellm

    auth = litellm.AuthenticationError("no key", llm_provider="openai", model="gpt-4o-mini")
    FakeModel(monkeypatch, auth)
    with pytest.raises(UsageError, match="OPENAI_API_KEY"):
        eval_path(str(session_with_secret(tmp_path)), judge_options())
    boom = litellm.InternalServerError("boom", llm_provider="openai", model="gpt-4o-mini")
    FakeModel(monkeypatch, boom)
    with pytest.raises(JudgeError, match="failed: InternalServerError"):
        eval_path(str(session_with_secret(tmp_path)), judge_options())


def test_parse_grades_reads_snake_case_and_clamps():
    scores, why = parse_grades(
        'Sure: {"accuracy": 7, "context_awareness": 2, "artifact_trail": 3.4, '
        '"completeness": -1, "continuity": 5, "instruction_following": 4}'
    )
    assert scores == {"accuracy": 5, "contextAwareness": 2, "artifactTrail": 3,
                      "completeness": 0, "continuity": 5, "instructionFollowing": 4}  # fmt: skip
    assert why == ""
    with pytest.raises(JudgeError, match="no number for artifactTrail"):
        parse_grades('{"accuracy": 1, "contextAwareness": 1}')


def test_eval_without_judge_never_imports_litellm(tmp_path):

    path = session_with_secret(tmp_path)
    code = (
        "import sys\nfrom compactctl.evaluate import EvalOptions, eval_path\n"
        f"eval_path({str(path)!r}, EvalOptions(encoding='estimate'))\n"
        "print('litellm' in sys.modules)"
    )
    assert run_python(code).strip() == "False"
