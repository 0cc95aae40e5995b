"""``compactctl serve`` as a process, driven by a real HTTP client (issue 21).

One server (``python -m compactctl serve --port 0 --token ...``) over a folder of sessions:
a compaction, 401 without the token, traversal refused, 8 concurrent calls on one session
appending exactly one summary, a failing model (litellm to a port nothing listens on)
answering 502 with nothing appended, one access log line per request on stderr, and the
refusal to listen off the loopback without a token.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from tests.helpers import ROOT, SAMPLES, run_cli

SMALL = (SAMPLES / "small-s1.canonical.jsonl").read_bytes()
TOKEN = "t0ken-for-tests"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


class Server:
    def __init__(self, proc: subprocess.Popen[bytes], url: str, stderr: Path) -> None:
        self.proc, self.url, self.stderr = proc, url, stderr


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    root = tmp_path / "root"
    for rel in ("-work-app/s1.jsonl", "other/s1.jsonl", "other/busy.jsonl", "other/fail.jsonl"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(SMALL)
    stderr = tmp_path / "serve.err"
    env = dict(os.environ, OPENAI_API_BASE="http://127.0.0.1:9/v1", OPENAI_API_KEY="sk-test",
               COMPACTCTL_NUM_RETRIES="0", COMPACTCTL_TOKEN=TOKEN)  # fmt: skip
    with stderr.open("wb") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "compactctl", "serve", "--root", str(root), "--port", "0",
             "--db", str(tmp_path / "state.db")],
            stdout=subprocess.DEVNULL, stderr=err, env=env, cwd=ROOT,
        )  # fmt: skip
    deadline = time.monotonic() + 60
    url = None
    while url is None:
        assert proc.poll() is None, stderr.read_text()
        assert time.monotonic() < deadline, "serve did not start"
        found = re.search(r"listening on (http://127\.0\.0\.1:\d+)", stderr.read_text())
        url = found.group(1) if found else None
        time.sleep(0.05)
    while True:  # announced before uvicorn accepts: wait for the first answer
        try:
            httpx.get(f"{url}/healthz", timeout=5)
            break
        except httpx.TransportError:
            assert time.monotonic() < deadline
            time.sleep(0.05)
    yield Server(proc, url, stderr)
    proc.terminate()
    proc.wait(timeout=30)


def summaries(path: Path) -> int:
    return sum(1 for line in path.read_bytes().splitlines() if b'"type":"summary"' in line)


def test_serve_end_to_end(server: Server, tmp_path: Path) -> None:
    root = tmp_path / "root"
    api = f"{server.url}/api/sessions"
    with httpx.Client(timeout=120) as http:
        # the token
        assert http.post(f"{api}/s1/compact", json={"cwd": "/work/app"}).status_code == 401
        assert summaries(root / "-work-app/s1.jsonl") == 0
        # a compaction, as Coding Code's context service answers it
        r = http.post(f"{api}/s1/compact", json={"cwd": "/work/app"}, headers=AUTH)
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["didCompress"] is True and body["released"] > 0
        assert body["promptEstimate"] == body["tokensBefore"] - body["released"]
        assert summaries(root / "-work-app/s1.jsonl") == 1
        assert (root / "-work-app/s1.jsonl").read_bytes().startswith(SMALL)
        # traversal and ambiguity
        up = http.post(f"{api}/s1/compact", json={"cwd": "../.."}, headers=AUTH)
        assert up.status_code == 400
        assert http.get(f"{api}/%2E%2E", headers=AUTH).status_code == 400
        assert http.post(f"{api}/s1/compact", json={}, headers=AUTH).status_code == 409
        # a failing model: 502 with the error, nothing appended
        r = http.post(f"{api}/fail/compact", json={"model": "openai/gpt-4o-mini"}, headers=AUTH)
        assert r.status_code == 502 and "gpt-4o-mini" in r.json()["detail"]
        assert (root / "other/fail.jsonl").read_bytes() == SMALL

    def call(_: int) -> httpx.Response:
        return httpx.post(f"{api}/busy/compact", json={}, headers=AUTH, timeout=120)

    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(call, range(8)))
    assert [a.status_code for a in answers] == [200] * 8
    assert sorted(a.json()["didCompress"] for a in answers) == [False] * 7 + [True]
    assert summaries(root / "other/busy.jsonl") == 1
    # one access log line per request (3 + 1 + 3 + 1 + 8 above, and the health checks)
    log = server.stderr.read_text()
    assert log.count('"POST /api/sessions/busy/compact HTTP/1.1" 200') == 8
    assert log.count('"POST /api/sessions/s1/compact HTTP/1.1" 401') == 1


def test_serve_refuses_another_address_without_a_token(tmp_path: Path) -> None:
    env = {"COMPACTCTL_TOKEN": ""}
    r = run_cli("serve", "--root", str(tmp_path), "--host", "0.0.0.0", "--port", "0", env=env)
    assert r.returncode == 2
    assert b"refusing to listen on 0.0.0.0 without a token" in r.stderr
