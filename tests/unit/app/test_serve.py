"""``compactctl serve`` in process (issue 21): FastAPI's TestClient against the real app.

The system test (tests/system/test_serve.py) starts the server as a process and drives it
with a real HTTP client; here: the routes, finding sessions, the token, the body limit, the
bind check, and a model failure through the real litellm call path (a connection refused on
127.0.0.1, no network).
"""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from fastapi.testclient import TestClient

from compactctl.app.serve import (
    MAX_BODY_BYTES,
    BodyLimit,
    ServeConfig,
    SessionIndex,
    check_bind,
    claude_project_name,
    create_app,
)
from compactctl.errors import UsageError
from tests.helpers import SAMPLES

SMALL = (SAMPLES / "small-s1.canonical.jsonl").read_bytes()


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """``-work-app/s1.jsonl`` (Claude Code's folder for /work/app), ``other/s1.jsonl`` and
    ``other/s2.jsonl``."""
    base = tmp_path / "root"
    for rel in ("-work-app/s1.jsonl", "other/s1.jsonl", "other/s2.jsonl"):
        (base / rel).parent.mkdir(parents=True, exist_ok=True)
        (base / rel).write_bytes(SMALL)
    return base


def client(root: Path, token: str | None = None, tmp: Path | None = None) -> TestClient:
    db = str((tmp or root.parent) / "state.db")
    app = BodyLimit(create_app(ServeConfig(str(root), token=token, db=db)), MAX_BODY_BYTES)
    return TestClient(app)


def summaries(path: Path) -> int:
    return sum(1 for line in path.read_bytes().splitlines() if b'"type":"summary"' in line)


def test_healthz_and_list(root: Path) -> None:
    c = client(root)
    assert c.get("/healthz").json()["status"] == "ok"
    rows = c.get("/api/sessions").json()["sessions"]
    assert [(r["id"], r["path"], r["bytes"]) for r in rows] == [
        ("s1", "-work-app/s1.jsonl", len(SMALL)),
        ("s1", "other/s1.jsonl", len(SMALL)),
        ("s2", "other/s2.jsonl", len(SMALL)),
    ]
    assert rows[0]["modified"].endswith("Z")


def test_compact_answers_as_the_context_service(root: Path) -> None:
    c = client(root)
    r = c.post("/api/sessions/s2/compact", json={})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["didCompress"] is True
    assert body["released"] == body["tokensBefore"] - body["promptEstimate"] > 0
    # the service's names say what the CLI's shared vocabulary says
    assert (body["released"], body["promptEstimate"]) == (body["tokensSaved"], body["tokensAfter"])
    assert body["path"] == "other/s2.jsonl"
    assert summaries(root / "other/s2.jsonl") == 1
    assert (root / "other/s2.jsonl").read_bytes().startswith(SMALL)  # appended only
    again = c.post("/api/sessions/s2/compact").json()  # no body: force defaults to true
    assert (again["didCompress"], again["released"]) == (False, 0)
    assert summaries(root / "other/s2.jsonl") == 1
    # force false: the triggers decide; a small session is far below them
    (root / "other/s3.jsonl").write_bytes(SMALL)
    lazy = c.post("/api/sessions/s3/compact", json={"force": False}).json()
    assert lazy["didCompress"] is False and lazy["reason"]


def test_cwd_narrows_by_claude_folder_or_sub_folder(root: Path) -> None:
    c = client(root)
    r = c.post("/api/sessions/s1/compact", json={})
    assert r.status_code == 409
    assert "-work-app/s1.jsonl, other/s1.jsonl" in r.json()["detail"]
    r = c.post("/api/sessions/s1/compact", json={"cwd": "/work/app"})
    assert r.status_code == 200 and r.json()["path"] == "-work-app/s1.jsonl"
    assert c.get("/api/sessions/s1", params={"cwd": "other"}).json()["path"] == "other/s1.jsonl"
    assert c.get("/api/sessions/nope").status_code == 404
    assert c.get("/api/sessions/s1", params={"cwd": "/elsewhere"}).status_code == 404


def test_inspect_route_is_the_inspect_report(root: Path) -> None:
    report = client(root).get("/api/sessions/s2").json()
    assert report["path"] == "other/s2.jsonl"
    assert (report["format"], report["messages"]) == ("canonical", 67)
    assert report["tokens"] > 0


@pytest.mark.parametrize(
    ("session_id", "cwd", "status"),
    [
        ("%2E%2E", None, 400),
        ("..x", None, 400),
        (".hidden", None, 400),
        ("s1", "../root", 400),
        ("s1", "other/../../x", 400),
        ("s1", "/../../etc", 404),
    ],
)
def test_nothing_outside_the_root(root: Path, session_id: str, cwd: str | None, status: int):
    c = client(root)
    params = {"cwd": cwd} if cwd is not None else {}
    assert c.get(f"/api/sessions/{session_id}", params=params).status_code == status


def test_symlink_out_of_the_root_is_not_reachable(root: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.jsonl").write_bytes(SMALL)
    (root / "link.jsonl").symlink_to(outside / "secret.jsonl")
    (root / "linkdir").symlink_to(outside, target_is_directory=True)
    c = client(root)
    assert all("secret" not in r["path"] for r in c.get("/api/sessions").json()["sessions"])
    assert c.get("/api/sessions/link").status_code == 404
    assert c.post("/api/sessions/secret/compact", json={"cwd": "linkdir"}).status_code == 400
    assert c.post("/api/sessions/secret/compact", json={}).status_code == 404
    assert (outside / "secret.jsonl").read_bytes() == SMALL


def test_token_is_required_on_the_api(root: Path) -> None:
    c = client(root, token="s3cret")
    assert c.get("/healthz").status_code == 200
    r = c.get("/api/sessions")
    assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
    assert c.get("/api/sessions", headers={"Authorization": "Bearer wrong"}).status_code == 401
    r = c.post("/api/sessions/s2/compact", headers={"Authorization": "Bearer s3cre"})
    assert r.status_code == 401 and summaries(root / "other/s2.jsonl") == 0
    ok = c.get("/api/sessions", headers={"Authorization": "Bearer s3cret"})
    assert ok.status_code == 200


def test_body_limit(root: Path) -> None:
    c = client(root)
    big = orjson.dumps({"cwd": "x" * MAX_BODY_BYTES})
    r = c.post("/api/sessions/s2/compact", content=big,
               headers={"content-type": "application/json"})  # fmt: skip
    assert r.status_code == 413
    chunked = c.post("/api/sessions/s2/compact", content=iter([big[:1000], big[1000:]]),
                     headers={"content-type": "application/json"})  # fmt: skip
    assert chunked.status_code == 413
    assert summaries(root / "other/s2.jsonl") == 0


def test_model_failure_is_502_and_appends_nothing(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the real litellm path to a port nothing listens on: connection refused at once
    monkeypatch.setenv("OPENAI_API_BASE", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("COMPACTCTL_NUM_RETRIES", "0")
    c = client(root)
    r = c.post("/api/sessions/s2/compact", json={"model": "openai/gpt-4o-mini"})
    assert r.status_code == 502, r.text
    assert "gpt-4o-mini" in r.json()["detail"]
    assert (root / "other/s2.jsonl").read_bytes() == SMALL


def test_bad_values_are_400(root: Path) -> None:
    r = client(root).post("/api/sessions/s2/compact", json={"strategy": "everything"})
    assert r.status_code == 400 and "strategy" in r.json()["detail"]


def test_bind_needs_a_token_off_the_loopback() -> None:
    for host in ("127.0.0.1", "::1", "localhost", "127.0.0.2"):
        check_bind(host, None)
    check_bind("0.0.0.0", "t")
    for host in ("0.0.0.0", "192.168.1.5", "::", "example.org"):
        with pytest.raises(UsageError, match="without a token"):
            check_bind(host, None)
        with pytest.raises(UsageError):
            check_bind(host, "")


def test_claude_project_name_and_session_ids(root: Path) -> None:
    assert claude_project_name("/home/me/my.app") == "-home-me-my-app"
    index = SessionIndex(str(root))
    assert index.session_id(Path("a/b.jsonl.gz")) == "b"
    assert index.find("s1", "/work/app") == (root / "-work-app/s1.jsonl").resolve()


def test_foreign_format_is_422_and_untouched(root: Path) -> None:
    native = (SAMPLES / "small-s1.claude-code.jsonl").read_bytes()
    (root / "-work-app" / "cc.jsonl").write_bytes(native)
    r = client(root).post("/api/sessions/cc/compact", json={})
    assert r.status_code == 422 and "claude-code transcript" in r.json()["detail"]
    assert (root / "-work-app" / "cc.jsonl").read_bytes() == native


@pytest.mark.parametrize(
    "body", [b"{", b"[]", b'{"cwd": 5}', b'{"forse": true}', b'{"force": "yes"}']
)
def test_a_bad_body_is_400_and_compacts_nothing(root: Path, body: bytes) -> None:
    r = client(root).post("/api/sessions/s2/compact", content=body,
                          headers={"content-type": "application/json"})  # fmt: skip
    assert r.status_code == 400 and r.json()["detail"].startswith("bad request body")
    assert summaries(root / "other/s2.jsonl") == 0


def test_the_bearer_scheme_is_case_insensitive(root: Path) -> None:
    c = client(root, token="s3cret")
    for header in ("bearer s3cret", "BEARER s3cret", "Bearer  s3cret "):
        assert c.get("/api/sessions", headers={"Authorization": header}).status_code == 200
    for header in ("Basic s3cret", "s3cret", "Bearer"):
        assert c.get("/api/sessions", headers={"Authorization": header}).status_code == 401
