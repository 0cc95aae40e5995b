"""The per-file jobs on a Dask cluster (issue 20), on an in-process ``LocalCluster`` of two
single-threaded worker processes: input order, a bounded number in flight, a worker that
dies mid-file (retried once elsewhere, then that file failed while the others finish)."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from compactctl.app import cluster
from compactctl.errors import CompactError, InputError


@pytest.fixture(scope="module")
def address() -> Iterator[str]:
    import dask
    from distributed import LocalCluster

    with (
        dask.config.set(cluster.SCHEDULER_CONFIG),
        LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
        ) as local,  # fmt: skip
    ):
        yield local.scheduler_address


def job(path: str) -> dict[str, Any] | CompactError:
    """A stand-in per-file job: sleeps by name, dies by name, or fails by name."""
    name = os.path.basename(path)
    if name.startswith("die-once"):
        marker = Path(path + ".died")
        if not marker.exists():
            marker.touch()
            os._exit(1)  # the worker process dies mid-file
    if name.startswith("die-always"):
        os._exit(1)
    if name.startswith("bad"):
        return InputError("not a transcript", path=path)
    time.sleep(0.3 if name.startswith("slow") else 0.01)
    return {"path": path, "pid": os.getpid()}


def test_results_in_input_order_and_errors_as_values(address: str, tmp_path: Path) -> None:
    files = [str(tmp_path / n) for n in ("slow-a", "b", "bad-c", "slow-d", "e", "f")]
    out = list(cluster.cluster_outcomes(files, job, address, window=3))
    assert [p for p, _ in out] == files
    assert isinstance(out[2][1], InputError) and out[2][1].message == "not a transcript"
    results = [r for _, r in out if isinstance(r, dict)]
    assert len({r["pid"] for r in results}) == 2  # both workers took files
    assert os.getpid() not in {r["pid"] for r in results}


def test_window_bounds_the_files_in_flight(
    address: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from distributed import Client

    submitted: list[int] = []
    real_submit = Client.submit

    def counting(self: Any, *args: Any, **kwargs: Any) -> Any:
        submitted.append(1)
        return real_submit(self, *args, **kwargs)

    monkeypatch.setattr(Client, "submit", counting)
    files = [str(tmp_path / f"f{i}") for i in range(20)]
    seen = 0
    for _ in cluster.cluster_outcomes(files, job, address, window=4):
        seen += 1
        assert len(submitted) - seen <= 4 - 1  # at most 4 in flight, one just yielded
    assert seen == len(submitted) == 20


def test_a_dead_worker_is_retried_once_then_the_file_fails(address: str, tmp_path: Path) -> None:
    files = [str(tmp_path / n) for n in ("a", "die-once", "b", "die-always", "c")]
    out = dict(cluster.cluster_outcomes(files, job, address))
    assert isinstance(out[files[1]], dict), out  # died once, retried on a worker, done
    assert (tmp_path / "die-once.died").exists()
    failed = out[files[3]]
    assert isinstance(failed, InputError)
    assert "KilledWorker" in failed.message and failed.path == files[3]
    assert all(isinstance(out[f], dict) for f in (files[0], files[2], files[4]))


def test_an_unreachable_scheduler_says_how_to_start_one(monkeypatch: pytest.MonkeyPatch) -> None:
    from compactctl.errors import UsageError

    # nothing listens on port 9: the client retries until its timeout, then the message.
    # 1 s instead of CONNECT_TIMEOUT_S (10 s) reaches the same message 9 s sooner
    monkeypatch.setattr(cluster, "CONNECT_TIMEOUT_S", 1)
    with (
        pytest.raises(UsageError, match="dask scheduler"),
        cluster.connect("tcp://127.0.0.1:9") as _,
    ):
        pass


def test_relative_paths_mean_what_they_mean_here(
    address: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "rel.jsonl").write_bytes(b"x")
    monkeypatch.chdir(tmp_path)

    def size(path: str) -> dict[str, Any]:
        return {"path": path, "bytes": os.path.getsize(path), "cwd": os.getcwd()}

    ((path, result),) = list(cluster.cluster_outcomes(["rel.jsonl"], size, address))
    assert path == "rel.jsonl" and isinstance(result, dict)
    assert result["bytes"] == 1 and result["cwd"] == str(tmp_path)


def test_a_bad_address_is_a_usage_error() -> None:
    from compactctl.errors import UsageError

    with pytest.raises(UsageError, match="cannot reach the scheduler"), cluster.connect("bogus"):
        pass
