"""`compact`: micro compaction and summarization, end to end and through the library."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest

from compactctl.app.commands import OutputOptions, compact_path
from compactctl.app.inspector import prompt_tokens
from compactctl.errors import SummarizerError
from compactctl.io.files import read
from compactctl.layers.summary import CompactOptions, plan_compact, select_span, user_constraints
from compactctl.model import Message, SummaryEvent
from compactctl.replay import replay, tool_block_keys
from compactctl.summarize.summary_format import SECTIONS, parse_task_state, validate_sections
from compactctl.tokens import TokenCounter

from .conftest import SAMPLES, run_cli
from .sessions import grow, load_records, probes, write

SAMPLE_NAMES = ["small-s1", "messy-s2", "cjk-s3"]


def _context_text(view: list[Message]) -> str:
    parts = []
    for m in view:
        parts.append(m.text)
        for c in m.tool_calls:
            parts.append(json.dumps(c.get("arguments"), ensure_ascii=False))
    return "\n".join(parts).lower()


def _split_blocks(view: list[Message]) -> list[str]:
    keys = tool_block_keys(view)
    calls = {c["id"] for m in view for c in m.tool_calls}
    results = {m.tool_call_id for m in view if m.role == "tool"}
    # every result's call is present and every call has its result
    return sorted((results - calls) | (calls - results)) + [
        u for u, k in keys.items() if k not in {m.uuid for m in view}
    ]


@pytest.mark.parametrize("name", SAMPLE_NAMES)
def test_compact_force_on_each_sample_keeps_probes(tmp_path: Path, name: str):
    path = tmp_path / f"{name}.jsonl"
    original = (SAMPLES / f"{name}.canonical.jsonl").read_bytes()
    path.write_bytes(original)
    r = run_cli("compact", "--force", "--json", str(path))
    assert r.returncode == 0, r.stderr.decode()
    doc = orjson.loads(r.stdout)
    (f,) = doc["files"]
    assert f["didCompress"] is True and f["summary"]["model"] == "extractive"
    assert f["released"] == f["tokensBefore"] - f["promptEstimate"] > 0
    data = path.read_bytes()
    assert data.startswith(original)  # nothing already in the file changed
    events = list(read(str(path)))
    summaries = [e for e in events if isinstance(e, SummaryEvent)]
    assert len(summaries) == 1
    validate_sections(summaries[0].summary_text)
    assert summaries[0].data["triggerMode"] == "manual"
    assert summaries[0].data["stats"]["tokensAfter"] == f["promptEstimate"]
    view = replay(events)
    assert _split_blocks(view) == []
    text = _context_text(view)
    ps = probes(name)
    missing = [p for p in ps if p["text"].lower() not in text]
    ledger_missing = [p for p in missing if p["kind"] in {"file_path", "command", "error"}]
    assert ledger_missing == []
    assert len(missing) <= 0.1 * len(ps), missing
    # the second identical run appends nothing
    r2 = run_cli("compact", "--force", "--json", str(path))
    assert r2.returncode == 0
    assert orjson.loads(r2.stdout)["files"][0]["changed"] is False
    assert path.read_bytes() == data


def test_big_session_shrinks_5x_and_keeps_probes(tmp_path: Path):
    records = grow("small-s1", 70)
    path = write(tmp_path / "big.jsonl", records)
    counter = TokenCounter("cl100k_base")
    before_events = list(read(str(path)))
    before = prompt_tokens(replay(before_events), counter)
    assert before >= 500_000
    result = compact_path(str(path), CompactOptions(force=True), OutputOptions(db=""))
    assert result["changed"] is True
    view = replay(list(read(str(path))))
    after = prompt_tokens(view, counter)
    assert before / after >= 5, (before, after)
    text = _context_text(view)
    missing = [p["text"] for p in probes("small-s1") if p["text"].lower() not in text]
    assert missing == []
    assert _split_blocks(view) == []


def test_ten_incremental_runs_stay_within_budget(tmp_path: Path):
    records = load_records("small-s1")
    head, body = records[:2], records[2:]
    path = tmp_path / "grow.jsonl"
    budget = 12000  # the default sections budget (about L2's 3000 tokens)
    opts = CompactOptions(force=True, min_saving=0.0)
    grown = grow("small-s1", 10)
    chunk = (len(grown) - 2) // 10
    write(path, head)
    summaries = []
    for i in range(10):
        with open(path, "ab") as fh:
            for r in grown[2 + i * chunk : 2 + (i + 1) * chunk]:
                fh.write(orjson.dumps(r) + b"\n")
        result = compact_path(str(path), opts, OutputOptions(db=""))
        assert result["changed"], result["reason"]
        events = list(read(str(path)))
        s = [e for e in events if isinstance(e, SummaryEvent)][-1]
        summaries.append(s)
        assert len(s.summary_text) <= budget
        validate_sections(s.summary_text)
        view = replay(events)
        assert sum(1 for m in view if "summaryOf" in m.data) == 1
        assert _split_blocks(view) == []
    # each summary after the first replaces the one before it (incremental chain)
    for prev, cur in zip(summaries, summaries[1:], strict=False):
        assert cur.replaces[0] == prev.uuid
        assert cur.last_summarized_turn >= prev.last_summarized_turn
    del body


def test_keep_recent_keeps_blocks_whole_and_newest_turn():
    events = list(read(str(SAMPLES / "small-s1.canonical.jsonl")))
    view = replay(events)
    span = select_span(view, strategy="keep_recent", keep_recent=3, first_user=view[1].uuid)
    span_ids = {m.uuid for m in span}
    kept = [m for m in view if m.uuid not in span_ids]
    # the newest turn (6) is whole in what is kept
    newest = [m.uuid for m in view if m.turn == 6]
    assert set(newest) <= {m.uuid for m in kept}
    assert view[0].role == "system" and view[0].uuid not in span_ids
    assert view[1].uuid not in span_ids  # the first user message is pinned
    keys = tool_block_keys(view)
    for u, k in keys.items():
        assert (u in span_ids) == (k in span_ids)
    full = select_span(view, strategy="full_replace", keep_recent=3, first_user=view[1].uuid)
    assert len(full) == len(view) - 2


def test_micro_only_and_trigger(tmp_path: Path):
    path = tmp_path / "s.jsonl"
    path.write_bytes((SAMPLES / "small-s1.canonical.jsonl").read_bytes())
    # 7.6k tokens of a 200k window: no trigger fires
    r = run_cli("compact", "--json", str(path))
    f = orjson.loads(r.stdout)["files"][0]
    assert f["changed"] is False and "under 25% of the 200000-token window" in f["reason"]
    # a 20k window: micro (25% = 5000) fires, summarization (90% = 18000) does not
    r = run_cli("compact", "--json", "--context-window", "20000", str(path))
    f = orjson.loads(r.stdout)["files"][0]
    assert f["micro"]["targets"] == 11 and f["summary"] is None
    events = list(read(str(path)))
    assert [e.data.get("mode") for e in events if e.type == "compact"] == ["micro"]
    assert r.returncode == 0
    # --check: exit 1 when a trigger fires, 0 when nothing would change
    assert run_cli("compact", "--check", "--force", str(path)).returncode == 1
    assert run_cli("compact", "--check", str(path)).returncode == 0


def test_min_saving_appends_nothing(tmp_path: Path):
    path = tmp_path / "s.jsonl"
    path.write_bytes((SAMPLES / "small-s1.canonical.jsonl").read_bytes())
    r = run_cli("compact", "--force", "--json", "--min-saving", "0.99", str(path))
    f = orjson.loads(r.stdout)["files"][0]
    assert f["changed"] is False and "nothing appended" in f["reason"]
    assert path.read_bytes() == (SAMPLES / "small-s1.canonical.jsonl").read_bytes()


def test_stdin_to_stdout_keeps_raw_bytes_and_materialize(tmp_path: Path):
    original = (SAMPLES / "small-s1.canonical.jsonl").read_bytes()
    r = run_cli("compact", "--force", "-", input=original)
    assert r.returncode == 0
    assert r.stdout.startswith(original)
    extra = r.stdout[len(original) :].splitlines()
    assert [orjson.loads(x)["type"] for x in extra] == ["compact", "summary"]
    r = run_cli("compact", "--force", "--materialize", "--as", "openai", "-", input=original)
    msgs = [orjson.loads(x) for x in r.stdout.splitlines()]
    assert msgs[0]["role"] == "system"
    assert any(m["role"] == "user" and "<summary>" in m["content"] for m in msgs)
    ids = {c["id"] for m in msgs for c in m.get("tool_calls", [])}
    assert {m["tool_call_id"] for m in msgs if m["role"] == "tool"} == ids
    out = tmp_path / "ctx.jsonl"
    r = run_cli("compact", "--force", "--materialize", "-o", str(out), "-", input=original)
    assert r.returncode == 0 and r.stdout == b""
    assert all(orjson.loads(x)["type"] == "message" for x in out.read_bytes().splitlines())


def test_events_on_stderr(tmp_path: Path):
    path = tmp_path / "s.jsonl"
    path.write_bytes((SAMPLES / "small-s1.canonical.jsonl").read_bytes())
    r = run_cli("compact", "--force", "--events", "-q", str(path))
    lines = [orjson.loads(x) for x in r.stderr.splitlines()]
    assert [x["event"] for x in lines] == ["compact_start", "compact_done"]
    done = lines[1]
    assert done["applied"] is True and done["trigger_mode"] == "manual"
    assert done["transcript_path"] == str(path)
    assert done["transcript_id"] == "1027c4d1-c386-4bc4-8d61-3e30d8f16adf"
    assert done["saved_ratio"] == round(1 - done["after_chars"] / done["before_chars"], 4)


def test_task_state_format(tmp_path: Path):
    events = list(read(str(SAMPLES / "small-s1.canonical.jsonl")))
    plan = plan_compact(events, CompactOptions(force=True, format="task-state"))
    s = [e for e in plan.events if isinstance(e, SummaryEvent)][0]
    parsed = parse_task_state(s.summary_text)
    assert len(parsed.display_summary) <= 1200
    assert s.data["taskState"] == dict(parsed.task_state)
    assert any("new dependencies" in c.lower() for c in parsed.task_state["user_constraints"])


def test_user_constraints_extracted():
    assert user_constraints(
        [
            "Please fix it. Keep the ledger format unchanged. Do not add new dependencies.",
            "不要修改 legacy 目录。谢谢",
        ]
    ) == [
        "Keep the ledger format unchanged.",
        "Do not add new dependencies.",
        "不要修改 legacy 目录。",
    ]


# --- the litellm backend, through its real call path with mock_response ------------------

VALID_SECTIONS = (
    "<analysis>short</analysis>\n<summary>\n"
    + "\n".join(
        f"### {s}\n- {s} item"
        for s in SECTIONS  # the ten sections of Coding Code's context service, in order
    )
    + "\n</summary>"
)


class Recorder:
    """Wraps litellm.completion: records each prompt, answers with the queued responses."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, *answers: Any) -> None:
        import litellm

        self.prompts: list[list[dict[str, str]]] = []
        self.answers = list(answers)
        real = litellm.completion

        def fake(**kwargs: Any) -> Any:
            self.prompts.append(kwargs["messages"])
            answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
            return real(**{**kwargs, "mock_response": answer})

        monkeypatch.setattr(litellm, "completion", fake)


def _model_opts(**kw: Any) -> CompactOptions:
    return CompactOptions(force=True, model="openai/gpt-4o-mini", num_retries=0, **kw)


def test_litellm_valid_answer_appends_summary(tmp_path: Path, monkeypatch):
    rec = Recorder(monkeypatch, VALID_SECTIONS)
    path = write(tmp_path / "s.jsonl", load_records("small-s1"))
    result = compact_path(str(path), _model_opts(), OutputOptions())
    assert result["summary"]["model"] == "openai/gpt-4o-mini"
    s = [e for e in read(str(path)) if isinstance(e, SummaryEvent)][0]
    assert s.summary_text == VALID_SECTIONS
    prompt = rec.prompts[0][1]["content"]
    assert "python -m pytest tests/test_storage.py -q" in prompt
    assert "Do not add new dependencies" in prompt  # constraints carried


def test_litellm_invalid_answer_appends_nothing(tmp_path: Path, monkeypatch):
    Recorder(monkeypatch, "<summary>### Primary Request\n- only one section</summary>")
    path = write(tmp_path / "s.jsonl", load_records("small-s1"))
    before = path.read_bytes()
    with pytest.raises(SummarizerError, match=r"openai/gpt-4o-mini answered an invalid sections"):
        compact_path(str(path), _model_opts(), OutputOptions())
    assert path.read_bytes() == before


def test_litellm_errors_count_toward_breaker(tmp_path: Path, monkeypatch):
    import litellm

    err = litellm.InternalServerError("boom", llm_provider="openai", model="gpt-4o-mini")
    Recorder(monkeypatch, err)
    path = write(tmp_path / "s.jsonl", load_records("small-s1"))
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


def test_litellm_context_length_error_leads_to_reactive_chunks(tmp_path: Path, monkeypatch):
    import litellm

    too_long = litellm.ContextWindowExceededError(
        "maximum context length exceeded", model="gpt-4o-mini", llm_provider="openai"
    )
    rec = Recorder(monkeypatch, too_long, VALID_SECTIONS)
    path = write(tmp_path / "s.jsonl", grow("small-s1", 4))
    result = compact_path(str(path), _model_opts(), OutputOptions())
    assert result["summary"]["triggerMode"] == "reactive"
    s = [e for e in read(str(path)) if isinstance(e, SummaryEvent)][0]
    assert s.data["triggerMode"] == "reactive"
    # one failed call, then the span in chunks: the later chunks carry the prior state
    assert len(rec.prompts) >= 2
    assert "PRIOR STATE" not in rec.prompts[1][1]["content"]
    if len(rec.prompts) > 2:
        assert "PRIOR STATE" in rec.prompts[2][1]["content"]


def test_secrets_never_reach_the_model(tmp_path: Path, monkeypatch):
    rec = Recorder(monkeypatch, VALID_SECTIONS)
    records = load_records("small-s1")
    secret_key = "sk-proj-" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4"
    records[3]["content"] = f"export OPENAI_API_KEY={secret_key}; curl https://admin:s3cretpw@db/x"
    records[6]["content"] = (
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEabc\n-----END RSA PRIVATE KEY-----"
    )
    path = write(tmp_path / "s.jsonl", records)
    compact_path(str(path), _model_opts(), OutputOptions(db=""))
    prompt = json.dumps(rec.prompts)
    for secret in [secret_key, "s3cretpw", "MIIEabc"]:
        assert secret not in prompt
    assert "[REDACTED:" in prompt


def test_model_session_uses_the_logs_model(tmp_path: Path, monkeypatch):
    import litellm

    seen: list[str] = []
    real = litellm.completion

    def fake(**kwargs: Any) -> Any:
        seen.append(kwargs["model"])
        return real(**{**kwargs, "mock_response": VALID_SECTIONS})

    monkeypatch.setattr(litellm, "completion", fake)
    path = write(tmp_path / "s.jsonl", load_records("small-s1"))
    compact_path(str(path), CompactOptions(force=True, model="session"), OutputOptions(db=""))
    assert seen == ["claude-sonnet-4-5"]


def test_extractive_summary_never_stores_a_secret(tmp_path: Path):
    records = load_records("small-s1")
    secret_key = "sk-proj-" + "Z9y8X7w6V5u4T3s2R1q0P9o8N7m6"
    second_user = [i for i, r in enumerate(records) if r.get("role") == "user"][1]
    records[second_user]["content"] += f"\nDo not print OPENAI_API_KEY={secret_key} anywhere."
    path = write(tmp_path / "s.jsonl", records)
    for fmt in ("sections", "task-state"):
        for redact in (False, True):
            opts = CompactOptions(force=True, format=fmt, redact=redact)
            plan = plan_compact(list(read(str(path))), opts)
            (s,) = [e for e in plan.events if isinstance(e, SummaryEvent)]
            stored = orjson.dumps(s.data).decode()
            # without redaction the constraint (and the key) reaches the summary
            assert (secret_key in stored) is (not redact), (fmt, redact)
            if fmt == "task-state":
                parse_task_state(s.summary_text)  # still valid JSON after redaction
