"""``make bench`` rows for ``compactctl serve`` (issue 21): requests per second.

A folder of small sessions (copies of fixtures/samples/small-s1.canonical.jsonl, 43 KB,
67 messages) is served by ``compactctl serve --port 0``; a real HTTP client (httpx, 4
threads) sends ``GET /api/sessions/{id}`` (the inspect report) and ``POST
/api/sessions/{id}/compact`` (a forced extractive compaction, each on its own session). The
baseline is what a runtime without ``serve`` pays: one ``compactctl inspect`` / ``compactctl
compact --force`` process per request, measured in the same run; the ratio is serve's rate
over the process-per-request rate.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SMALL = ROOT / "fixtures" / "samples" / "small-s1.canonical.jsonl"
THREADS = 4


def _start(root: Path, env: dict[str, str], db: Path) -> tuple[subprocess.Popen[bytes], str]:
    import httpx

    err = root.parent / "serve.err"
    with err.open("wb") as stream:
        proc = subprocess.Popen(
            [sys.executable, "-m", "compactctl", "serve", "--root", str(root), "--port", "0",
             "--db", str(db)],
            stdout=subprocess.DEVNULL, stderr=stream, env=env, cwd=ROOT,
        )  # fmt: skip
    deadline = time.monotonic() + 60
    while True:
        found = re.search(r"listening on (http://127\.0\.0\.1:\d+)", err.read_text())
        if found:
            try:
                httpx.get(f"{found.group(1)}/healthz", timeout=5)
                return proc, found.group(1)
            except httpx.TransportError:
                pass
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"serve did not start: {err.read_text()[-2000:]}")
        time.sleep(0.05)


def _rate(calls: list[Any], threads: int = THREADS) -> float:
    """Requests per second of ``calls`` (zero-argument functions) on ``threads`` threads."""
    started = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(lambda f: f(), calls))
    return len(calls) / (time.perf_counter() - started)


def serve_rates(tmp: Path, env: dict[str, str], requests: int = 200) -> dict[str, float]:
    """``{"inspect", "compact", "inspectProcess", "compactProcess"}``: requests per second
    through ``serve`` and with one ``compactctl`` process per request."""
    import httpx

    root = tmp / "serve-root"
    compacts = max(8, requests // 5)
    shutil.rmtree(root, ignore_errors=True)
    for i in range(compacts * 2 + 1):
        (root / f"p{i % 10}").mkdir(parents=True, exist_ok=True)
        shutil.copyfile(SMALL, root / f"p{i % 10}" / f"s{i}.jsonl")
    proc, url = _start(root, env, tmp / "serve.db")
    try:
        with httpx.Client(timeout=120) as http:

            def ok(r: httpx.Response) -> None:
                if r.status_code != 200:
                    raise RuntimeError(f"{r.status_code} {r.text[:300]}")

            inspect = _rate([lambda: ok(http.get(f"{url}/api/sessions/s0"))] * requests)
            compact = _rate([
                (lambda i=i: ok(http.post(f"{url}/api/sessions/s{i}/compact", json={})))
                for i in range(1, compacts + 1)
            ])  # fmt: skip
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    cc = [sys.executable, "-m", "compactctl"]

    def run(*argv: str) -> None:
        subprocess.run([*cc, *argv], env=env, cwd=ROOT, check=True, capture_output=True)

    few = max(4, compacts // 2)
    path = str(root / "p0" / "s0.jsonl")
    inspect_proc = _rate([lambda: run("inspect", "--json", path)] * few)
    compact_proc = _rate([
        (lambda i=i: run("compact", "--force", "--json",
                         str(root / f"p{i % 10}" / f"s{i}.jsonl")))
        for i in range(compacts + 1, compacts + 1 + few)
    ])  # fmt: skip
    return {
        "inspect": inspect,
        "compact": compact,
        "inspectProcess": inspect_proc,
        "compactProcess": compact_proc,
    }


if __name__ == "__main__":  # a quick look: python bench/serve_bench.py
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        rates = serve_rates(Path(d), dict(os.environ), requests=int(sys.argv[1:2][0])
                            if sys.argv[1:] else 100)  # fmt: skip
    for name, value in rates.items():
        print(f"{name:16} {value:8.1f} req/s")
