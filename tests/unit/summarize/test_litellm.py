"""The litellm summarizer through its real call path (``mock_response``, no network), driven
by ``compact``: a valid answer is appended, an invalid one appends nothing, errors count toward
the breaker, a context-length error leads to reactive chunks, secrets never reach the model,
``--model session`` uses the log's model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from compactctl.app.jobs import OutputOptions, compact_path
from compactctl.errors import CompactWarning, SummarizerError
from compactctl.io.files import read
from compactctl.layers.summary import CompactOptions
from compactctl.model import SummaryEvent
from compactctl.summarize.summary_format import SECTIONS
from tests.fakes import FakeModel
from tests.helpers import write_jsonl
from tests.sessions import grow, load_records

#: The user constraints of the sample small-s1 (``user_constraints`` of its user messages):
#: an answer must carry each, or it is rejected.
CONSTRAINTS = (
    "Keep the on-disk ledger format unchanged, existing ledgers must open without a migration.",
    "Do not add new dependencies.",
    "Heads-up: do not modify src/quillpad/legacy/importer.py at all, another team owns it and "
    "has a refactor in flight.",
    "Without the flag the output must stay exactly as it is today. "
    "(re: `--since-days`, `quillpad export`)",
)

VALID_SECTIONS = (
    "<analysis>short</analysis>\n<summary>\n"
    + "\n".join(
        f"### {s}\n- {s} item"
        + ("".join(f"\n- Constraint: {c}" for c in CONSTRAINTS) if s == SECTIONS[0] else "")
        for s in SECTIONS  # the ten sections of Coding Code's context service, in order
    )
    + "\n</summary>"
)


def _model_opts(**kw: object) -> CompactOptions:
    return CompactOptions(force=True, model="openai/gpt-4o-mini", num_retries=0, **kw)


def test_litellm_valid_answer_appends_summary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = FakeModel(monkeypatch, default=VALID_SECTIONS)
    path = write_jsonl(tmp_path / "s.jsonl", load_records("small-s1"))
    result = compact_path(str(path), _model_opts(), OutputOptions())
    assert result["summary"]["model"] == "openai/gpt-4o-mini"
    s = [e for e in read(str(path)) if isinstance(e, SummaryEvent)][0]
    assert s.summary_text == VALID_SECTIONS
    prompt = model.prompts[0][1]["content"]
    assert "python -m pytest tests/test_storage.py -q" in prompt
    assert "Do not add new dependencies" in prompt  # constraints carried


def test_litellm_invalid_answer_is_retried_then_extractive(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = FakeModel(
        monkeypatch, default="<summary>### Primary Request\n- only one section</summary>"
    )
    path = write_jsonl(tmp_path / "s.jsonl", load_records("small-s1"))
    with pytest.warns(CompactWarning, match=r"openai/gpt-4o-mini answered an invalid sections"):
        result = compact_path(str(path), _model_opts(), OutputOptions())
    # the first answer, then one retry that names the rule broken, then no more calls
    assert len(model.prompts) == 2
    retry = model.prompts[1]
    assert retry[-2] == {"role": "assistant", "content": model.prompts[1][-2]["content"]}
    assert "missing section(s)" in retry[-1]["content"]
    assert result["summary"]["model"] == "extractive"
    s = [e for e in read(str(path)) if isinstance(e, SummaryEvent)][0]
    assert s.data["model"] == "extractive" and "Do not add new dependencies" in s.summary_text


def test_litellm_errors_count_toward_breaker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import litellm

    err = litellm.InternalServerError("boom", llm_provider="openai", model="gpt-4o-mini")
    FakeModel(monkeypatch, default=err)
    path = write_jsonl(tmp_path / "s.jsonl", load_records("small-s1"))
    before = path.read_bytes()
    auto = CompactOptions(model="openai/gpt-4o-mini", num_retries=0, input_token_threshold=1000)
    for i in range(1, 4):
        with pytest.raises(SummarizerError) as info:
            compact_path(str(path), auto, OutputOptions())
        assert "openai/gpt-4o-mini failed: InternalServerError" in str(info.value)
        assert f"consecutive failures: {i}" in str(info.value)
    assert path.read_bytes() == before
    # the fourth automatic run does not call the model: the breaker is open for 24 hours
    result = compact_path(str(path), auto, OutputOptions())
    assert result["summary"] is None
    assert "paused for 24 hours" in result["reason"]


def test_litellm_context_length_error_leads_to_reactive_chunks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import litellm

    too_long = litellm.ContextWindowExceededError(
        "maximum context length exceeded", model="gpt-4o-mini", llm_provider="openai"
    )
    model = FakeModel(monkeypatch, too_long, default=VALID_SECTIONS)
    path = write_jsonl(tmp_path / "s.jsonl", grow("small-s1", 4))
    result = compact_path(str(path), _model_opts(), OutputOptions())
    assert result["summary"]["triggerMode"] == "reactive"
    s = [e for e in read(str(path)) if isinstance(e, SummaryEvent)][0]
    assert s.data["triggerMode"] == "reactive"
    # one failed call, then the span in chunks: the later chunks carry the prior state
    assert len(model.prompts) >= 2
    assert "PRIOR STATE" not in model.prompts[1][1]["content"]
    if len(model.prompts) > 2:
        assert "PRIOR STATE" in model.prompts[2][1]["content"]


def test_secrets_never_reach_the_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = FakeModel(monkeypatch, default=VALID_SECTIONS)
    records = load_records("small-s1")
    secret_key = "sk-proj-" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4"
    records[3]["content"] = f"export OPENAI_API_KEY={secret_key}; curl https://admin:s3cretpw@db/x"
    records[6]["content"] = (
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEabc\n-----END RSA PRIVATE KEY-----"
    )
    path = write_jsonl(tmp_path / "s.jsonl", records)
    compact_path(str(path), _model_opts(), OutputOptions(db=""))
    prompt = json.dumps(model.prompts)
    for secret in [secret_key, "s3cretpw", "MIIEabc"]:
        assert secret not in prompt
    assert "[REDACTED:" in prompt


def test_model_session_uses_the_logs_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = FakeModel(monkeypatch, default=VALID_SECTIONS)
    path = write_jsonl(tmp_path / "s.jsonl", load_records("small-s1"))
    compact_path(str(path), CompactOptions(force=True, model="session"), OutputOptions(db=""))
    assert model.models == ["claude-sonnet-4-5"]
