"""No secret of the corpus reaches a model or a written byte (issue 14, point 9), end to end
through the command line: ``compact --force`` (extractive, and through litellm to a local
HTTP server that records every request body), ``tiers`` (derived and rewritten by a model),
``tiers --materialize``, ``eval --judge``, and every text column of the SQLite store."""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from compactctl.summarize.summary_format import SECTIONS
from compactctl.text import string_leaves
from tests.fakes import judge_grades
from tests.helpers import SAMPLES, run_cli, write_jsonl

from .secret_corpus import Secret, corpus, transcript

CASES = corpus()
MODEL = "openai/gpt-4o-mini"
SUMMARY = (
    "<analysis>short</analysis>\n<summary>\n"
    + "\n".join(f"### {s}\n- {s} item" for s in SECTIONS)
    + "\n</summary>"
)


def _leaks(text: str, cases: list[Secret] = CASES) -> list[tuple[str, str]]:
    return [(c.kind, v) for c in cases for v in c.values if v in text]


def _store_texts(db: Path) -> list[str]:
    """Every text value of every table of the store."""
    conn = sqlite3.connect(db)
    try:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        out = []
        for table in tables:
            for row in conn.execute(f'SELECT * FROM "{table}"'):
                out += [v for v in row if isinstance(v, str)]
        return out
    finally:
        conn.close()


class _Recorder(BaseHTTPRequestHandler):
    """An OpenAI-compatible ``/chat/completions`` that records each request body and answers
    as the caller needs: a sections summary (compact, tiers), an answer (eval's answering
    model) or grades (eval's judge)."""

    bodies: list[bytes] = []

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        type(self).bodies.append(body)
        system = json.loads(body)["messages"][0]["content"]
        if "You grade" in system:
            answer = judge_grades()
        elif "continuing a session" in system:
            answer = "I do not know."
        else:
            answer = SUMMARY
        reply = {
            "id": "chatcmpl-local",
            "object": "chat.completion",
            "created": 0,
            "model": "gpt-4o-mini",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": answer},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }
        data = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def model_server() -> Iterator[tuple[str, list[bytes]]]:
    """A local model endpoint on 127.0.0.1: ``(base URL, request bodies)``."""
    bodies: list[bytes] = []
    handler = type("Recorder", (_Recorder,), {"bodies": bodies})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1", bodies
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def secrets_session(tmp_path: Path) -> Path:
    return write_jsonl(tmp_path / "secrets.jsonl", transcript(CASES))


def _run(*args: str, env: dict[str, str] | None = None, codes: tuple[int, ...] = (0,)) -> str:
    result = run_cli(*args, env=env)
    assert result.returncode in codes, result.stderr.decode()
    return result.stdout.decode() + result.stderr.decode()


def _every_case_was_sent(prompt: str) -> None:
    """The prompt holds every case's turn, each secret in its place replaced by a marker: the
    model saw the text around each secret (no case is absent merely because it was clipped)."""
    for turn, case in enumerate(CASES, start=1):
        assert f"Step {turn} done: `{case.kind}` handled." in prompt, case.kind
    assert prompt.count("[REDACTED:") >= len(CASES)


def test_the_session_holds_every_secret(secrets_session: Path) -> None:
    raw = secrets_session.read_text()
    decoded = "\n".join(string_leaves([json.loads(line) for line in raw.splitlines()]))
    assert _leaks(decoded) == [(c.kind, v) for c in CASES for v in c.values]


def test_extractive_compact_and_tiers_write_no_secret(secrets_session: Path, tmp_path: Path):
    db = tmp_path / "store.db"
    before = secrets_session.read_bytes()
    output = _run("compact", "--force", "--db", str(db), str(secrets_session))
    output += _run("tiers", "--db", str(db), str(secrets_session))
    out = tmp_path / "ctx.jsonl"
    output += _run("tiers", "--tier", "L2", "--materialize", "-o", str(out), str(secrets_session))
    appended = secrets_session.read_bytes()[len(before) :].decode()
    records = [json.loads(line) for line in appended.splitlines()]
    assert [r["type"] for r in records] == ["compact", "summary", "summary"]
    assert records[2]["tiers"] and "[REDACTED:" in records[1]["summaryText"]
    written = "\n".join([appended, output, out.read_text(), *string_leaves(records)])
    assert _leaks(written) == []
    texts = _store_texts(db)
    assert any("[REDACTED:" in t for t in texts)  # the tier texts are stored
    assert _leaks("\n".join(texts)) == []


def test_model_requests_and_writes_hold_no_secret(
    secrets_session: Path, tmp_path: Path, model_server: tuple[str, list[bytes]]
) -> None:
    base, bodies = model_server
    env = {"OPENAI_API_KEY": "local-test", "OPENAI_BASE_URL": base, "OPENAI_API_BASE": base}
    db = tmp_path / "store.db"
    before = secrets_session.read_bytes()
    output = _run("compact", "--force", "--model", MODEL, "--db", str(db), str(secrets_session),
                  env=env)  # fmt: skip
    summaries = len(bodies)
    output += _run("tiers", "--model", MODEL, "--db", str(db), str(secrets_session), env=env)
    tiers = len(bodies) - summaries
    # eval's report (stdout) lists the probes it looked for, as the original has them: not
    # checked here; what it sends to the judge is
    _run("eval", "--judge", MODEL, str(secrets_session), env=env, codes=(0, 1))
    judged = len(bodies) - summaries - tiers
    assert summaries >= 1 and tiers == 2 and judged >= 8
    for body in bodies:
        sent = "\n".join(string_leaves(json.loads(body)["messages"]))
        assert _leaks(sent) == [] and _leaks(body.decode()) == []
    prompt = "\n".join(string_leaves(json.loads(bodies[0])["messages"]))
    assert "TRANSCRIPT SPAN" in prompt
    _every_case_was_sent(prompt)
    appended = secrets_session.read_bytes()[len(before) :].decode()
    assert _leaks(appended + output) == []
    assert _leaks("\n".join(_store_texts(db))) == []


@pytest.mark.parametrize("shift", [1, 2, 3])
def test_every_case_in_every_place_reaches_no_request(
    tmp_path: Path, model_server: tuple[str, list[bytes]], shift: int
) -> None:
    """The other three rotations of the places (the tests above use shift 0): every case as
    the user's text, a tool's output, a tool call's arguments and a tool's JSON document,
    summarized through litellm; nothing sent, appended or stored holds a secret."""
    base, bodies = model_server
    env = {"OPENAI_API_KEY": "local-test", "OPENAI_BASE_URL": base, "OPENAI_API_BASE": base}
    path = write_jsonl(tmp_path / "secrets.jsonl", transcript(CASES, shift))
    db = tmp_path / "store.db"
    before = path.read_bytes()
    output = _run("compact", "--force", "--model", MODEL, "--db", str(db), str(path), env=env)
    assert len(bodies) >= 1
    for body in bodies:
        assert _leaks(body.decode()) == []
        assert _leaks("\n".join(string_leaves(json.loads(body)["messages"]))) == []
    _every_case_was_sent("\n".join(string_leaves(json.loads(bodies[0])["messages"])))
    appended = path.read_bytes()[len(before) :].decode()
    assert '"type":"summary"' in appended
    assert _leaks(appended + output) == []
    assert _leaks("\n".join(_store_texts(db))) == []


def test_a_lone_surrogate_in_the_session_reaches_the_model_as_fffd(
    tmp_path: Path, model_server: tuple[str, list[bytes]]
) -> None:
    """messy-s2 holds ``"\\ud83d"`` (half an emoji): the request used to fail before it was
    sent (UTF-8 cannot encode it), on every try, counting toward the breaker (found by a new
    user through ``serve``)."""
    base, bodies = model_server
    session = tmp_path / "messy.jsonl"
    session.write_bytes((SAMPLES / "messy-s2.canonical.jsonl").read_bytes())
    assert b"\\ud83d" in session.read_bytes()
    env = {"OPENAI_API_KEY": "local-test", "OPENAI_BASE_URL": base, "OPENAI_API_BASE": base,
           "COMPACTCTL_NUM_RETRIES": "0", "COMPACTCTL_TORN_WAIT": "0"}  # fmt: skip
    _run("compact", "--force", "--model", MODEL, "--db", "", str(session), env=env)
    assert len(bodies) >= 1
    assert "\ufffd" in "".join(string_leaves(json.loads(bodies[0])["messages"]))
