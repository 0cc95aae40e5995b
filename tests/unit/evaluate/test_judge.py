"""`eval --judge`: the real litellm call path, answered with ``mock_response`` (no network)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from compactctl.evaluate import EvalOptions
from compactctl.evaluate.job import eval_path
from compactctl.evaluate.judge import (
    DIMENSIONS,
    QUESTION_TYPES,
    JudgeError,
    JudgeOptions,
    parse_grades,
)
from compactctl.evaluate.report import eval_table
from tests.fakes import FakeModel, judge_grades
from tests.helpers import msg, run_python, write_jsonl
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


def test_a_judge_failure_keeps_the_probe_results(tmp_path, monkeypatch):
    FakeModel(monkeypatch, "an answer", "I think it is pretty good.")
    result = eval_path(str(session_with_secret(tmp_path)), judge_options())["result"]
    assert result.counts.total == 36 and result.counts.retention == 1.0
    assert result.judge == {
        "model": "openai/gpt-4o-mini",
        "answerModel": "openai/gpt-4o-mini",
        "error": {
            "code": "judge",
            "exitCode": 3,
            "message": "the judge answered no JSON object: 'I think it is pretty good.'",
        },
    }
    assert result.to_json()["probes"]["retention"] == 1.0
    assert "judge openai/gpt-4o-mini (answers: openai/gpt-4o-mini) failed: the judge " in (
        eval_table(result)
    )


def test_provider_errors(tmp_path, monkeypatch):
    """Through the summarizer's call path: a configuration problem is exit 2, any other
    failure exit 3, a context too long for the window (after one refit) exit 3."""
    import litellm

    path = str(session_with_secret(tmp_path))

    def error(*answers: Any) -> dict[str, Any]:
        FakeModel(monkeypatch, *answers)
        judge = eval_path(path, judge_options())["result"].judge
        assert set(judge) == {"model", "answerModel", "error"}
        return judge["error"]

    auth = litellm.AuthenticationError("no key", llm_provider="openai", model="gpt-4o-mini")
    got = error(auth)
    assert (got["code"], got["exitCode"]) == ("usage", 2) and "OPENAI_API_KEY" in got["message"]
    # litellm raises a plain exception for some missing keys: still a configuration problem
    got = error(ValueError("Missing credentials. Please pass an `api_key`"))
    assert (got["code"], got["exitCode"]) == ("usage", 2)
    boom = litellm.InternalServerError("boom", llm_provider="openai", model="gpt-4o-mini")
    got = error(boom)
    assert (got["code"], got["exitCode"]) == ("judge", 3)
    assert got["message"].startswith("--judge model openai/gpt-4o-mini failed: InternalServerError")
    long = litellm.ContextWindowExceededError("too long", "gpt-4o-mini", "openai")
    got = error(long, long)
    assert (got["code"], got["exitCode"]) == ("judge", 3)
    assert "prompt too long" in got["message"]
    got = error("", "unused")
    assert got["message"] == "--judge model openai/gpt-4o-mini returned an empty answer"


def test_a_missing_key_is_named_with_the_option_that_named_the_model(tmp_path, monkeypatch):
    """The review's repro: the judge's missing key said "or pass --model with a provider
    prefix", an option eval does not have, for a model that had a prefix."""
    for key in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(key, raising=False)
    path = str(session_with_secret(tmp_path))
    no_key = ValueError("Missing credentials. Please pass an `api_key`.")
    cases = [
        ({}, "--judge openai/gpt-4o-mini needs OPENAI_API_KEY, which the environment does "
         "not set: set it"),
        ({"answer_model": "anthropic/claude-3-5-haiku-20241022"},
         "--answer-model anthropic/claude-3-5-haiku-20241022 needs ANTHROPIC_API_KEY, which "
         "the environment does not set: set it"),
    ]  # fmt: skip
    for kw, hint in cases:
        FakeModel(monkeypatch, no_key)
        got = eval_path(path, judge_options(**kw))["result"].judge["error"]
        assert (got["code"], got["exitCode"]) == ("usage", 2)
        message = got["message"]
        assert message.startswith(f"model {kw.get('answer_model', 'openai/gpt-4o-mini')}: ")
        assert "Missing credentials" in message and message.endswith(f". {hint}")
        assert "--model" not in message
    # a provider litellm does not know, without a prefix: the option to pass one
    FakeModel(monkeypatch, no_key)
    got = eval_path(path, judge_options(answer_model="my-model"))["result"].judge["error"]
    assert got["message"].endswith(
        "Set the API key variable of --answer-model my-model's provider (e.g. OPENAI_API_KEY), "
        "or pass --answer-model the model with its provider prefix (openai/...)"
    )


def test_a_context_too_long_for_the_model_is_fitted_again(tmp_path, monkeypatch):
    import litellm

    long = litellm.ContextWindowExceededError("too long", "gpt-4o-mini", "openai")
    model = FakeModel(monkeypatch, long, *["an answer", judge_grades()] * 4)
    judge = eval_path(str(session_with_secret(tmp_path)), judge_options())["result"].judge
    assert judge["overall"] == 3.0 and len(model.calls) == 9
    first, again = (c["messages"][1]["content"] for c in model.calls[:2])
    assert len(again) < len(first) // 2 and judge["contextOmitted"] > 0
    # the later questions get the refitted context, not the one that was too long
    assert model.calls[3]["messages"][1]["content"].startswith(again.split("QUESTION:")[0])


def test_the_context_is_fitted_to_a_small_window(tmp_path, monkeypatch):
    from compactctl.summarize.litellm import INPUT_SHARE_PERCENT
    from compactctl.tokens import TokenCounter, encoding_for_model

    model = FakeModel(monkeypatch, *["an answer", judge_grades()] * 4)
    path = str(session_with_secret(tmp_path))
    full = eval_path(path, judge_options(max_input_tokens=1_000_000))["result"].judge
    assert full["contextOmitted"] == 0
    whole = model.calls[0]["messages"][1]["content"]
    model.calls.clear()
    model.enqueue(*["an answer", judge_grades()] * 4)
    judge = eval_path(path, judge_options(max_input_tokens=4000))["result"].judge
    assert 0 < judge["contextOmitted"] < 60 and judge["overall"] == 3.0
    counter = TokenCounter(encoding_for_model("openai/gpt-4o-mini"))
    for call in model.calls[::2]:  # the answering calls
        sent = sum(counter.count(m["content"]) + 4 for m in call["messages"])
        assert sent <= 4000 * INPUT_SHARE_PERCENT // 100 - 2048
    fitted = model.calls[0]["messages"][1]["content"]
    assert len(fitted) < len(whole) // 3
    # the head (up to the first request) and the newest messages stay, the middle goes
    first = "`quillpad list --page 2` shows the last entry of page 1"
    newest = whole.split("\n\nQUESTION:")[0].splitlines()[-1]
    assert newest.startswith("Decision: leave the branch unmerged")
    assert first in fitted and fitted.index(first) < fitted.index("messages left out here")
    assert fitted.split("\n\nQUESTION:")[0].endswith(newest)
    omitted = f"[... {judge['contextOmitted']} messages left out here to fit"
    assert omitted in fitted
    model.enqueue(*["an answer", judge_grades()] * 4)
    table = eval_table(eval_path(path, judge_options(max_input_tokens=4000))["result"])
    assert f"({judge['contextOmitted']} messages of the context left out" in table


def test_multi_part_requests_reach_the_judge(tmp_path, monkeypatch):
    """A reference fact with no secret is sent, even when no single string of its message
    holds it (a request of two text parts, joined by a newline; a list-form command)."""
    commit = ["git", "commit", "-m", "fix bug"]
    records = [
        msg("u1", "user", [{"type": "text", "text": "Fix the pager bug in QUI-12."},
                           {"type": "text", "text": "Do not add new dependencies."}]),
        msg("a1", "assistant", "On it.", toolCalls=[{"id": "c1", "name": "shell",
                                                     "arguments": {"command": commit}}]),
        msg("t1", "tool", "[main 1a2b3c4] fix bug", toolCallId="c1", toolName="shell"),
        msg("u2", "user", f"Use the staging key {SECRET} to reproduce it."),
        msg("a2", "assistant", "Done."),
    ]  # fmt: skip
    path = write_jsonl(tmp_path / "parts.jsonl", records)
    model = FakeModel(monkeypatch, *["an answer", judge_grades()] * 4)
    eval_path(str(path), judge_options())
    recall = model.calls[1]["messages"][1]["content"]
    assert "- first_request: Fix the pager bug in QUI-12.\nDo not add new dependencies." in recall
    artifact = model.calls[3]["messages"][1]["content"]
    assert "- command: git commit -m 'fix bug'" in artifact  # a list-form command, joined
    continuation = model.calls[5]["messages"][1]["content"]
    assert "latest_request" not in continuation  # it holds the key: not sent, even redacted
    sent = json.dumps([c["messages"] for c in model.calls])
    assert SECRET not in sent


def test_parse_grades_reads_snake_case_and_rounds():
    scores, why = parse_grades(
        'Sure: {"accuracy": 0, "context_awareness": 2, "artifact_trail": 3.4, '
        '"completeness": 2.6, "continuity": 5, "instruction_following": 4}'
    )
    assert scores == {"accuracy": 0, "contextAwareness": 2, "artifactTrail": 3,
                      "completeness": 3, "continuity": 5, "instructionFollowing": 4}  # fmt: skip
    assert why == ""
    with pytest.raises(JudgeError, match="no number for artifactTrail"):
        parse_grades('{"accuracy": 1, "contextAwareness": 1}')


@pytest.mark.parametrize(
    ("dim", "value"),
    [("accuracy", "9"), ("contextAwareness", "-2"), ("continuity", "5.3"),
     ("completeness", "-0.4"), ("artifactTrail", "NaN"), ("accuracy", "Infinity")],
)  # fmt: skip
def test_parse_grades_refuses_a_grade_outside_the_scale(dim: str, value: str):
    """The review's repro: accuracy 9 and contextAwareness -2 were clamped to 5 and 0, as
    if the judge had graded on the 0-5 scale; a grade outside it is the judge's error."""
    grades = {d: 3 for d in DIMENSIONS}
    answer = json.dumps({"scores": grades}).replace(f'"{dim}": 3', f'"{dim}": {value}')
    with pytest.raises(JudgeError) as err:
        parse_grades(answer)
    shown = {"NaN": "nan", "Infinity": "inf"}.get(value, value)
    assert str(err.value).startswith(f"the judge graded {dim} {shown}, outside the scale 0-5: ")


def test_a_grade_outside_the_scale_fails_the_judge(tmp_path, monkeypatch):
    FakeModel(monkeypatch, default=judge_grades(accuracy=9))
    judge = eval_path(str(session_with_secret(tmp_path)), judge_options())["result"].judge
    assert (judge["error"]["code"], judge["error"]["exitCode"]) == ("judge", 3)
    assert judge["error"]["message"].startswith("the judge graded accuracy 9, outside the scale")


def test_parse_grades_reads_the_first_json_object():
    grades = judge_grades(accuracy=4)
    expected = {d: 4 if d == "accuracy" else 3 for d in DIMENSIONS}
    for answer in (
        grades + " (scale: {0..5})",  # the review's repro: a later {...} in the text
        f"Here are my grades.\n\n```json\n{grades}\n```\nHope {{this}} helps.",
        "Scale {0-5}, then: " + grades,  # a { that starts no JSON comes first
        grades + "\n" + judge_grades(accuracy=1),  # two objects: the first
    ):
        assert parse_grades(answer) == (expected, "r"), answer
    with pytest.raises(JudgeError, match="no JSON object"):
        parse_grades('{"scores": {"accuracy": 4,} (unfinished)')


def test_eval_without_judge_never_imports_litellm(tmp_path):

    path = session_with_secret(tmp_path)
    code = (
        "import sys\nfrom compactctl.evaluate import EvalOptions, eval_path\n"
        f"eval_path({str(path)!r}, EvalOptions(encoding='estimate'))\n"
        "print('litellm' in sys.modules)"
    )
    assert run_python(code).strip() == "False"
