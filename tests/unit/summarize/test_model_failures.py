"""Model failures (docs/design.md sections 5 and 6), through litellm's real call path.

``litellm.completion`` is wrapped to answer with ``mock_response`` (an exception instance
raises it, as the provider's error would be raised). Every failure: nothing is appended
(not even the micro compaction planned with it), the message names the model and the
cause, the failure counts toward the breaker in the store (a temporary database), and the
CLI exits 3 with the message on stderr.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from typer.testing import CliRunner

from compactctl.app.jobs import OutputOptions, compact_path
from compactctl.app.store import Store, store_key
from compactctl.cli import app
from compactctl.errors import CompactWarning, SummarizerError
from compactctl.io.files import read
from compactctl.layers.summary import CompactOptions
from compactctl.model import SummaryEvent
from compactctl.summarize.summary_format import (
    DISPLAY_SECTIONS,
    SECTIONS,
    parse_task_state,
    render_display,
    render_task_state,
    validate_sections,
)
from tests.helpers import ROOT, SAMPLES

MODEL = "openai/gpt-4o-mini"
SMALL = (SAMPLES / "small-s1.canonical.jsonl").read_bytes()
SESSION = "1027c4d1-c386-4bc4-8d61-3e30d8f16adf"


#: The user constraints of small-s1: a model's answer must carry each.
CONSTRAINTS = [
    "Keep the on-disk ledger format unchanged, existing ledgers must open without a migration.",
    "Do not add new dependencies.",
    "Do not modify src/quillpad/legacy/importer.py at all, another team owns it and has a "
    "refactor in flight.",
    "Without the flag the output must stay exactly as it is today. "
    "(re: `--since-days`, `quillpad export`)",
]


def _sections(bullets: int = 1, width: int = 20) -> str:
    body = "\n".join(
        f"### {s}\n"
        + "\n".join(f"- {s} item {i} " + "x" * width for i in range(bullets))
        + ("".join(f"\n- {c}" for c in CONSTRAINTS) if s == SECTIONS[0] else "")
        for s in SECTIONS
    )
    return f"<analysis>\n{'reasoning. ' * bullets}\n</analysis>\n<summary>\n{body}\n</summary>"


STATE = {
    "goal": "fix the parser",
    "progress": ["read parser.py"],
    "open_items": ["run the tests"],
    "next_step": "run pytest",
    "blockers": [],
    "key_artifacts": ["parser.py"],
    "decisions": ["keep the API"],
    "user_constraints": CONSTRAINTS,
}


def _task_state(bullets: int = 1) -> str:
    display = render_display(
        {s: [f"{s} bullet {i} " + "y" * 40 for i in range(bullets)] for s in DISPLAY_SECTIONS}
    )
    return render_task_state(STATE, display)


class Model:
    """Wraps ``litellm.completion``: answers with the queued responses (the last repeats)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, *answers: Any) -> None:
        import litellm

        self.calls: list[list[dict[str, str]]] = []
        self.answers = list(answers)
        real = litellm.completion

        def fake(**kwargs: Any) -> Any:
            self.calls.append(kwargs["messages"])
            answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
            return real(**{**kwargs, "mock_response": answer})

        monkeypatch.setattr(litellm, "completion", fake)


def _errors() -> dict[str, tuple[Callable[[], Any], str]]:
    """The failures a provider gives: a factory for each, and what the message must say."""
    import litellm

    return {
        "timeout": (
            lambda: litellm.Timeout(
                "Request timed out.", model="gpt-4o-mini", llm_provider="openai"
            ),
            "failed: Timeout: ",
        ),
        "500": (
            lambda: litellm.InternalServerError(
                "upstream exploded", llm_provider="openai", model="gpt-4o-mini"
            ),
            "failed: InternalServerError: ",
        ),
        "429": (
            lambda: litellm.RateLimitError(
                "Rate limit reached for requests", llm_provider="openai", model="gpt-4o-mini"
            ),
            "failed: RateLimitError: ",
        ),
        "empty answer": (lambda: "", "returned an empty answer"),
        "blank answer": (lambda: "  \n ", "returned an empty answer"),
    }


@pytest.fixture()
def transcript(tmp_path: Path) -> Path:
    path = tmp_path / "s.jsonl"
    path.write_bytes(SMALL)
    return path


def _out(tmp_path: Path) -> OutputOptions:
    return OutputOptions(db=str(tmp_path / "state.db"))


def _failures(tmp_path: Path) -> int:
    key = store_key(SESSION, str(tmp_path / "s.jsonl"))
    with Store.open(tmp_path / "state.db") as st:
        row = st._conn.execute(  # noqa: SLF001 - reading the state the breaker uses
            "SELECT consecutive_failures FROM compaction_state WHERE session_key = ?", (key,)
        ).fetchone()
    return int(row[0]) if row else 0


@pytest.mark.parametrize("kind", list(_errors()))
def test_failure_appends_nothing_and_names_model_and_cause(
    tmp_path: Path, transcript: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    make, cause = _errors()[kind]
    model = Model(monkeypatch, make())
    opts = CompactOptions(force=True, model=MODEL, num_retries=0)
    with pytest.raises(SummarizerError) as info:
        compact_path(str(transcript), opts, _out(tmp_path))
    message = str(info.value)
    assert f"model {MODEL} " in message and cause in message, message
    assert "(consecutive failures: 1)" in message
    assert len(model.calls) == 1  # not retried behind the breaker's back
    assert transcript.read_bytes() == SMALL  # not even the micro compaction was appended
    assert _failures(tmp_path) == 1


def test_invalid_task_state_answers_are_retried_then_extractive(
    tmp_path: Path, transcript: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An invalid answer gets one retry naming the rule broken; a second invalid answer
    makes the extractive summary stand in, with a warning: something valid is appended."""
    model = Model(monkeypatch, "")
    for answer, cause in [
        ("Sure! Here is the summary: {task_state: ...}", "not valid JSON"),
        ('{"task_state": {"goal": "g"}, "display_summary": "x"}', "task_state"),
        (json.dumps({"task_state": STATE, "display_summary": "no marker"}), "display"),
        ("[1, 2]", "must be a JSON object"),
    ]:
        transcript.write_bytes(SMALL)
        model.answers, model.calls = [answer], []
        opts = CompactOptions(force=True, model=MODEL, num_retries=0, format="task-state")
        with pytest.warns(CompactWarning) as caught:
            result = compact_path(str(transcript), opts, OutputOptions(db=""))
        message = str(caught[0].message)
        assert f"model {MODEL} answered an invalid task-state summary" in message
        assert cause in message and "extractive summary stands in" in message, message
        assert len(model.calls) == 2 and cause in model.calls[1][-1]["content"]
        assert result["summary"]["model"] == "extractive"
        (s,) = [e for e in read(str(transcript)) if isinstance(e, SummaryEvent)]
        assert parse_task_state(s.summary_text).task_state == s.data["taskState"]


def test_none_only_answer_is_retried_and_the_retry_accepted(
    transcript: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    none_only = "<summary>\n" + "\n".join(f"### {s}\n- none" for s in SECTIONS) + "\n</summary>"
    model = Model(monkeypatch, none_only, _sections())
    opts = CompactOptions(force=True, model=MODEL, num_retries=0)
    result = compact_path(str(transcript), opts, OutputOptions(db=""))
    assert result["summary"]["model"] == MODEL
    assert len(model.calls) == 2
    assert "section 'Primary Request' says only 'none'" in model.calls[1][-1]["content"]
    (s,) = [e for e in read(str(transcript)) if isinstance(e, SummaryEvent)]
    assert s.summary_text == _sections()


def test_answer_dropping_a_pinned_constraint_is_retried(
    transcript: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dropped = _sections().replace(f"\n- {CONSTRAINTS[1]}", "")
    model = Model(monkeypatch, dropped)
    opts = CompactOptions(force=True, model=MODEL, num_retries=0)
    with pytest.warns(CompactWarning, match="missing"):
        result = compact_path(str(transcript), opts, OutputOptions(db=""))
    assert len(model.calls) == 2
    assert repr(CONSTRAINTS[1]) in model.calls[1][-1]["content"]
    assert result["summary"]["model"] == "extractive"
    (s,) = [e for e in read(str(transcript)) if isinstance(e, SummaryEvent)]
    assert all(c in s.summary_text for c in CONSTRAINTS[:2])


def test_over_long_sections_answer_is_cut_at_a_bullet(
    transcript: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    answer = _sections(bullets=40, width=60)
    assert len(answer) > 30_000
    Model(monkeypatch, answer)
    opts = CompactOptions(force=True, model=MODEL, num_retries=0, max_summary_chars=4000)
    result = compact_path(str(transcript), opts, OutputOptions(db=""))
    assert result["changed"]
    (s,) = [e for e in read(str(transcript)) if isinstance(e, SummaryEvent)]
    text = s.summary_text
    assert len(text) <= 4000
    validate_sections(text)
    bullets = [line for line in text.splitlines() if line.startswith("- ")]
    assert bullets and all(line in answer.splitlines() for line in bullets)  # whole bullets
    assert all(f"- {sec} item 0 " in text for sec in SECTIONS)  # each keeps its first


def test_over_long_task_state_display_is_cut_at_a_bullet(
    transcript: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    answer = _task_state(bullets=30)
    Model(monkeypatch, answer)
    opts = CompactOptions(force=True, model=MODEL, num_retries=0, format="task-state")
    compact_path(str(transcript), opts, OutputOptions(db=""))
    (s,) = [e for e in read(str(transcript)) if isinstance(e, SummaryEvent)]
    parsed = parse_task_state(s.summary_text)
    display = parsed.display_summary
    assert len(display) <= 1200 < len(json.loads(answer)["display_summary"])
    original = json.loads(answer)["display_summary"].splitlines()
    assert all(line in original for line in display.splitlines())
    assert dict(parsed.task_state) == STATE and s.data["taskState"] == STATE


def test_breaker_opens_after_three_failures(
    tmp_path: Path, transcript: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import litellm

    err = litellm.InternalServerError("down", llm_provider="openai", model="gpt-4o-mini")
    model = Model(monkeypatch, err)
    auto = CompactOptions(model=MODEL, num_retries=0, input_token_threshold=1000)
    for i in (1, 2, 3):
        with pytest.raises(SummarizerError, match=rf"consecutive failures: {i}\)"):
            compact_path(str(transcript), auto, _out(tmp_path))
    assert len(model.calls) == 3 and transcript.read_bytes() == SMALL
    # open: automatic runs do not call the model for 24 hours
    result = compact_path(str(transcript), auto, _out(tmp_path))
    assert len(model.calls) == 3
    assert "3 consecutive summarization failures: paused for 24 hours" in result["reason"]
    assert transcript.read_bytes() == SMALL  # the micro compaction alone saves < 5% here
    # a manual run (--force) is the user's call: it tries, fails, and counts
    with pytest.raises(SummarizerError, match=r"consecutive failures: 4\)"):
        compact_path(str(transcript), CompactOptions(force=True, model=MODEL, num_retries=0),
                     _out(tmp_path))  # fmt: skip
    assert len(model.calls) == 4
    # 24 hours later the breaker closes; a success resets the count
    later = time.time() + 86_400 + 60
    monkeypatch.setattr(time, "time", lambda: later)
    model.answers = [_sections()]
    result = compact_path(str(transcript), auto, _out(tmp_path))
    assert result["summary"]["model"] == MODEL and len(model.calls) == 5
    assert _failures(tmp_path) == 0


def test_breaker_is_per_session(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import litellm

    Model(monkeypatch, litellm.InternalServerError("down", llm_provider="openai", model="x"))
    a = tmp_path / "a.jsonl"
    a.write_bytes(SMALL)
    b = tmp_path / "b.jsonl"
    b.write_bytes(SMALL.replace(SESSION.encode(), b"another-session"))
    auto = CompactOptions(model=MODEL, num_retries=0, input_token_threshold=1000)
    for _ in range(3):
        with pytest.raises(SummarizerError):
            compact_path(str(a), auto, _out(tmp_path))
    with pytest.raises(SummarizerError, match=r"consecutive failures: 1\)"):
        compact_path(str(b), auto, _out(tmp_path))
    # a copy of a (the same sessionId, another file) has a breaker of its own
    copy = tmp_path / "copy" / "a.jsonl"
    copy.parent.mkdir()
    copy.write_bytes(SMALL)
    with pytest.raises(SummarizerError, match=r"consecutive failures: 1\)"):
        compact_path(str(copy), auto, _out(tmp_path))
    result = compact_path(str(a), auto, _out(tmp_path))  # a's own breaker is still open
    assert "3 consecutive summarization failures: paused for 24 hours" in result["reason"]


def test_reactive_retry_once_per_run(
    tmp_path: Path, transcript: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import litellm

    too_long = litellm.ContextWindowExceededError(
        "This model's maximum context length is 128000 tokens", model="gpt-4o-mini",
        llm_provider="openai",
    )  # fmt: skip
    model = Model(monkeypatch, too_long)
    opts = CompactOptions(force=True, model=MODEL, num_retries=0)
    for run in (1, 2):
        with pytest.raises(SummarizerError) as info:
            compact_path(str(transcript), opts, _out(tmp_path))
        message = str(info.value)
        assert f"model {MODEL}: prompt too long: " in message
        assert "maximum context length" in message
        assert "the reactive retry in chunks failed too" in message
        # one call with the whole span, one with the first chunk: then it gives up
        assert len(model.calls) == 2 * run
        assert transcript.read_bytes() == SMALL
    assert _failures(tmp_path) == 2


def test_reactive_retry_succeeds_in_chunks(
    transcript: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import litellm

    too_long = litellm.ContextWindowExceededError("too long", model="m", llm_provider="openai")
    model = Model(monkeypatch, too_long, _sections())
    opts = CompactOptions(force=True, model=MODEL, num_retries=0)
    result = compact_path(str(transcript), opts, OutputOptions(db=""))
    assert result["summary"]["triggerMode"] == "reactive"
    assert len(model.calls) >= 2
    (s,) = [e for e in read(str(transcript)) if isinstance(e, SummaryEvent)]
    assert s.data["triggerMode"] == "reactive"


# --- through the CLI --------------------------------------------------------------------------


def test_cli_failure_exit_3_and_message(
    tmp_path: Path, transcript: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import litellm

    Model(monkeypatch, litellm.RateLimitError("slow down", llm_provider="openai", model="m"))
    other = tmp_path / "other.jsonl"
    other.write_bytes(SMALL)
    db = str(tmp_path / "state.db")
    r = CliRunner().invoke(
        app,
        ["compact", "--force", "--model", MODEL, "--num-retries", "0", "--db", db, "--events",
         "--json", str(transcript)],
    )  # fmt: skip
    assert r.exit_code == 3, r.stderr
    assert f"compactctl: {transcript}: model {MODEL} failed: RateLimitError: " in r.stderr
    assert "slow down" in r.stderr and "Traceback" not in r.stderr
    events = [orjson.loads(x) for x in r.stderr.splitlines() if x.startswith("{")]
    assert [e["event"] for e in events] == ["compact_start", "compact_error"]
    assert MODEL in events[1]["error"]
    doc = orjson.loads(r.stdout)
    (entry,) = doc["files"]
    assert (entry["path"], entry["outcome"]) == (str(transcript), "failed")
    assert entry["error"]["code"] == "summarizer" and "slow down" in entry["error"]["message"]
    assert doc["totals"]["errors"][0]["path"] == str(transcript)
    assert transcript.read_bytes() == SMALL
    # the store's run log has the failed model call, with the absolute path
    with Store.open(db) as st:
        (run,) = st.runs(time.time())
    assert (run["command"], run["files"], run["failed"], run["exitCode"]) == ("compact", 1, 1, 3)
    # the extractive default needs no model: the same run on another file is unaffected
    r = CliRunner().invoke(app, ["compact", "--force", "--db", db, str(other)])
    assert r.exit_code == 0 and other.read_bytes().startswith(SMALL) and other.read_bytes() != SMALL


_REAL_PROCESS = """
import sys, litellm
real = litellm.completion
def fake(**kw):
    err = litellm.Timeout("Request timed out after 120s", model="m", llm_provider="openai")
    return real(**{**kw, "mock_response": err})
litellm.completion = fake
from compactctl.cli import main
sys.argv = ["compactctl", *sys.argv[1:]]
main()
"""


def test_real_process_failure(tmp_path: Path, transcript: Path) -> None:
    """A real ``compactctl`` process whose litellm is patched before ``main()`` runs."""
    r = subprocess.run(
        [sys.executable, "-c", _REAL_PROCESS, "compact", "--force", "--model", MODEL,
         "--num-retries", "0", "--db", str(tmp_path / "state.db"), str(transcript)],
        capture_output=True,
        cwd=ROOT,
        timeout=300,
    )  # fmt: skip
    err = r.stderr.decode()
    assert r.returncode == 3, err
    assert f"{transcript}: model {MODEL} failed: Timeout: " in err
    assert "Request timed out" in err and "Traceback" not in err
    assert r.stdout == b""
    assert transcript.read_bytes() == SMALL


def test_reactive_retry_sends_smaller_requests(
    transcript: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import litellm

    too_long = litellm.ContextWindowExceededError("too long", model="m", llm_provider="openai")
    model = Model(monkeypatch, too_long, _sections())
    compact_path(str(transcript), CompactOptions(force=True, model=MODEL, num_retries=0),
                 OutputOptions(db=""))  # fmt: skip
    first, *chunks = [len(c[1]["content"]) for c in model.calls]
    assert len(chunks) >= 2 and all(n < first for n in chunks)
