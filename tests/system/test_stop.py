"""A ``--jobs`` run stopped from outside (compactctl.app.pool): ``timeout`` or ``kill`` sends
SIGTERM, a scheduler may send SIGKILL. The pool's workers must not outlive their parent, and
no transcript may change.

The workers are kept busy for as long as the test needs by a model server on 127.0.0.1 that
never answers (``compact --model``, litellm's real call path): each worker waits in its
summary call when the parent is stopped.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import SAMPLES

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="reads /proc for the workers")


class _Silent(BaseHTTPRequestHandler):
    """Takes a request and waits, without an answer, until the test releases it."""

    release: threading.Event
    calls: list[float]

    def do_POST(self) -> None:  # noqa: N802 (the http.server name)
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        type(self).calls.append(time.monotonic())
        type(self).release.wait(60)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def silent_model() -> Iterator[tuple[str, list[float]]]:
    """``(base URL, the times of the calls it took)`` of a model server that never answers."""
    release, calls = threading.Event(), []
    handler = type("Silent", (_Silent,), {"release": release, "calls": calls})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1", calls
    finally:
        release.set()
        server.shutdown()
        server.server_close()


def _children(pid: int) -> list[int]:
    """The live (not zombie) processes whose parent is ``pid``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        state, ppid = stat.rsplit(")", 1)[1].split()[:2]
        if int(ppid) == pid and state != "Z":
            found.append(int(entry))
    return found


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie has ended: it only waits to be reaped)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _start(tmp_path: Path, base: str, calls: list[float]) -> tuple[subprocess.Popen[bytes], Path]:
    """``compact --force --model ... --jobs 2`` over a folder of 4 sessions, once both
    workers wait in a model call; returns the process and the folder."""
    folder = tmp_path / "sessions"
    folder.mkdir()
    for i in range(4):
        shutil.copy(SAMPLES / "messy-s2.canonical.jsonl", folder / f"s{i}.jsonl")
    env = {
        **os.environ,
        "OPENAI_API_KEY": "local-test",
        "OPENAI_BASE_URL": base,
        "OPENAI_API_BASE": base,
    }
    argv = [sys.executable, "-m", "compactctl", "compact", "--force", "--jobs", "2", "-q",
            "--model", "openai/gpt-4o-mini", str(folder)]  # fmt: skip
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while len(calls) < 2:
        assert proc.poll() is None, proc.communicate()[1].decode()
        assert time.monotonic() < deadline, "the workers made no model call in 120 s"
        time.sleep(0.05)
    return proc, folder


def _unchanged(folder: Path) -> None:
    original = (SAMPLES / "messy-s2.canonical.jsonl").read_bytes()
    assert [p.read_bytes() == original for p in sorted(folder.glob("*.jsonl"))] == [True] * 4


def test_sigterm_ends_the_run_and_its_workers(
    tmp_path: Path, silent_model: tuple[str, list[float]]
) -> None:
    proc, folder = _start(tmp_path, *silent_model)
    workers = _children(proc.pid)
    assert len(workers) >= 2, workers
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 143, err.decode()
    assert "stopped by SIGTERM" in err.decode()
    assert "run the command again" in err.decode()
    assert [w for w in workers if _alive(w)] == []  # ended before the parent exited
    _unchanged(folder)


def test_workers_end_with_a_parent_killed_outright(
    tmp_path: Path, silent_model: tuple[str, list[float]]
) -> None:
    from compactctl.app.pool import PARENT_POLL_S

    proc, folder = _start(tmp_path, *silent_model)
    workers = _children(proc.pid)
    assert len(workers) >= 2, workers
    proc.kill()
    proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    deadline = time.monotonic() + PARENT_POLL_S + 10
    while any(map(_alive, workers)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert [w for w in workers if _alive(w)] == []
    _unchanged(folder)
