"""``--dask ADDRESS`` against a real cluster (issue 20): ``dask scheduler`` and two ``dask
worker`` processes on 127.0.0.1, driven through the CLI.

- the same report (``--json``) and exit code as the local run on an identical folder;
- a worker killed (SIGKILL) while it compacts a large session: the file is run again on the
  other worker, the run exits 0, and the session gets exactly one summary.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from tests.helpers import SAMPLES, run_cli, write_jsonl
from tests.sessions import grow

BIN = Path(sys.executable).parent
ENV = {
    "DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES": "1",
    "DASK_DISTRIBUTED__SCHEDULER__WORKER_SATURATION": "1.0",
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def scheduler(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    logs = tmp_path_factory.mktemp("dask")
    port = _free_port()
    address = f"tcp://127.0.0.1:{port}"
    env = dict(os.environ, **ENV)
    procs = [
        subprocess.Popen(
            [str(BIN / "dask"), "scheduler", "--host", "127.0.0.1", "--port", str(port),
             "--no-dashboard"],
            stdout=subprocess.DEVNULL, stderr=(logs / "scheduler.log").open("wb"), env=env,
        )
    ]  # fmt: skip
    from distributed import Client

    deadline = time.monotonic() + 90
    for i in range(2):
        procs.append(
            subprocess.Popen(
                [str(BIN / "dask"), "worker", address, "--nthreads", "1", "--nworkers", "1",
                 "--host", "127.0.0.1", "--no-dashboard", "--name", f"w{i}"],
                stdout=subprocess.DEVNULL, stderr=(logs / f"worker{i}.log").open("wb"),
                env=env,
            )
        )  # fmt: skip
    while True:
        try:
            with Client(address, timeout=5) as client:
                client.wait_for_workers(2, timeout=60)
            break
        except (OSError, TimeoutError):
            assert time.monotonic() < deadline, (logs / "scheduler.log").read_text()
            time.sleep(0.5)
    yield address
    for p in reversed(procs):
        p.terminate()
    for p in procs:
        p.wait(timeout=30)


def _folder(base: Path) -> Path:
    base.mkdir()
    for i in range(6):
        shutil.copyfile(SAMPLES / "small-s1.canonical.jsonl", base / f"s{i}.jsonl")
    shutil.copyfile(SAMPLES / "small-s1.claude-code.jsonl", base / "cc.jsonl")
    return base


def _appended(path: Path) -> list[tuple[str, str]]:
    size = (SAMPLES / "small-s1.canonical.jsonl").stat().st_size
    lines = path.read_bytes()[size:].splitlines()
    assert len(lines) == 2
    return [(e["type"], e["uuid"]) for e in map(orjson.loads, lines)]


def _report(stdout: bytes, root: Path) -> list[dict[str, object]]:
    files = orjson.loads(stdout)["files"]
    for f in files:
        f.pop("durationMs", None)
        for h in f.get("history") or []:  # when each run appended differs
            h.pop("timestamp", None)
        f["path"] = str(Path(str(f["path"])).relative_to(root))
        if isinstance(f.get("written"), str):
            f["written"] = str(Path(str(f["written"])).relative_to(root))
    return files


def test_same_report_and_exit_code_as_local(scheduler: str, tmp_path: Path) -> None:
    local, remote = _folder(tmp_path / "local"), _folder(tmp_path / "remote")
    env = {"COMPACTCTL_DB": str(tmp_path / "state.db")}
    a = run_cli("compact", "--force", "--json", "--jobs", "1", str(local), env=env)
    b = run_cli("compact", "--force", "--json", "--dask", scheduler, str(remote), env=env)
    assert (a.returncode, b.returncode) == (0, 0)  # cc.jsonl is skipped in both (a folder run)
    assert [f["outcome"] for f in orjson.loads(b.stdout)["files"]].count("skipped") == 1
    assert _report(b.stdout, remote) == _report(a.stdout, local)
    for i in range(6):  # the same events appended (ids derive from content; times differ)
        assert _appended(remote / f"s{i}.jsonl") == _appended(local / f"s{i}.jsonl")
    c = run_cli("inspect", "--json", "--dask", scheduler, str(remote), env=env)
    d = run_cli("inspect", "--json", str(local), env=env)
    assert c.returncode == d.returncode
    assert _report(c.stdout, remote) == _report(d.stdout, local)


def _untimed(lines: bytes) -> list[dict[str, object]]:
    """Effective-context records without their ``timestamp`` (a summary is dated when its
    compaction ran)."""
    records = [orjson.loads(line) for line in lines.splitlines()]
    for r in records:
        r.pop("timestamp", None)
    return records


def _ran_on_scheduler(address: str) -> int:
    """How many compactctl tasks the scheduler has run to completion: its task prefix
    ``compactctl`` counts every task that reached each state (``memory``: done), also after
    the tasks are forgotten."""
    from distributed import Client

    def count(dask_scheduler: object) -> int:
        prefix = dask_scheduler.task_prefixes.get("compactctl")  # type: ignore[attr-defined]
        return 0 if prefix is None else int(prefix.state_counts["memory"])

    with Client(address, timeout=10) as client:
        return int(client.run_on_scheduler(count))


def test_forty_files_equal_a_jobs_2_run(scheduler: str, tmp_path: Path) -> None:
    local, remote = tmp_path / "local", tmp_path / "remote"
    for folder in (local, remote):
        folder.mkdir()
        for i in range(40):
            name = "small-s1" if i % 2 else "messy-s2"
            shutil.copyfile(SAMPLES / f"{name}.canonical.jsonl", folder / f"s{i:02}.jsonl")
            os.utime(folder / f"s{i:02}.jsonl", (0, 0))  # messy-s2's torn line: long quiet
    env = {"COMPACTCTL_DB": str(tmp_path / "state.db")}
    before = _ran_on_scheduler(scheduler)
    a = run_cli("compact", "--force", "--jobs", "2", str(local), env=env)
    b = run_cli("compact", "--force", "--dask", scheduler, str(remote), env=env)
    assert (a.returncode, b.returncode) == (0, 0), b.stderr
    assert _ran_on_scheduler(scheduler) - before == 40
    mine = run_cli("inspect", "--effective", str(remote), env=env)  # all 40, one after another
    theirs = run_cli("inspect", "--effective", str(local), env=env)
    assert mine.returncode == theirs.returncode == 0
    assert len(mine.stdout.splitlines()) > 40 * 10
    assert _untimed(mine.stdout) == _untimed(theirs.stdout)


def test_a_worker_killed_mid_file_is_retried_elsewhere(scheduler: str, tmp_path: Path) -> None:
    from distributed import Client

    folder = tmp_path / "big"
    folder.mkdir()
    big = folder / "a-big.jsonl"
    write_jsonl(big, grow("small-s1", 250))
    for i in range(3):
        shutil.copyfile(SAMPLES / "small-s1.canonical.jsonl", folder / f"s{i}.jsonl")
    before = big.read_bytes()
    env = dict(os.environ, COMPACTCTL_DB=str(tmp_path / "state.db"))
    run = subprocess.Popen(
        [sys.executable, "-m", "compactctl", "compact", "--force", "--dask", scheduler,
         str(folder)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
    )  # fmt: skip
    killed = None
    with Client(scheduler, timeout=10) as client:
        deadline = time.monotonic() + 120
        while killed is None and time.monotonic() < deadline and run.poll() is None:
            for worker, keys in client.processing().items():
                if any(re.fullmatch(r"compactctl-\d+-\d+-0", str(k)) for k in keys):
                    pid = client.run(os.getpid, workers=[worker])[worker]
                    os.kill(pid, signal.SIGKILL)
                    killed = worker
                    break
            time.sleep(0.02)
    out, err = run.communicate(timeout=300)
    assert killed is not None, "the large file finished before it could be killed"
    assert run.returncode == 0, err.decode()
    data = big.read_bytes()
    assert data.startswith(before)
    assert data[len(before) :].count(b'"type":"summary"') == 1
    assert err.decode().count("appended") == 4


def test_object_storage_urls_on_the_cluster(scheduler: str, tmp_path: Path) -> None:
    src = _folder(tmp_path / "in")
    (src / "cc.jsonl").unlink()
    env = {"COMPACTCTL_DB": str(tmp_path / "state.db")}
    r = run_cli("compact", "--force", "--dask", scheduler, "-o", f"file://{tmp_path}/out/",
                f"file://{src}/", env=env)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [f"s{i}.jsonl" for i in range(6)]
    for i in range(6):
        assert _appended(tmp_path / "out" / f"s{i}.jsonl")[1][0] == "summary"
        assert (src / f"s{i}.jsonl").read_bytes() == (
            SAMPLES / "small-s1.canonical.jsonl"
        ).read_bytes()
