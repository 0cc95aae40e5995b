"""``make bench`` rows for ``--dask`` (issue 20).

A ``dask scheduler`` and two single-threaded ``dask worker`` processes on 127.0.0.1 (the
scheduler settings of compactctl.app.cluster.SCHEDULER_CONFIG). On the bench corpus:
``compact --force`` (on copies) and ``inspect`` through the cluster against ``--jobs 2`` in
the same run (goal: the cluster takes at most 1.3x the time); over 100 and 1,000 small
sessions: the client's peak memory (it must stay flat in the number of files: at most
:data:`compactctl.app.cluster.WINDOW` files in flight).
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

BIN = Path(sys.executable).parent


@contextlib.contextmanager
def two_workers(env: dict[str, str], logs: Path) -> Iterator[str]:
    """A scheduler and two workers on 127.0.0.1 for the ``with`` block; yields the address."""
    from distributed import Client

    from compactctl.app.cluster import SCHEDULER_CONFIG

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    address = f"tcp://127.0.0.1:{port}"
    denv = dict(env)
    for key, value in SCHEDULER_CONFIG.items():
        denv["DASK_" + key.upper().replace(".", "__").replace("-", "_")] = str(value)
    logs.mkdir(parents=True, exist_ok=True)
    procs = [
        subprocess.Popen(
            [
                str(BIN / "dask"),
                "scheduler",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--no-dashboard",
            ],
            stdout=subprocess.DEVNULL,
            stderr=(logs / "scheduler.log").open("wb"),
            env=denv,
        )
    ]
    for i in range(2):
        procs.append(
            subprocess.Popen(
                [
                    str(BIN / "dask"),
                    "worker",
                    address,
                    "--nthreads",
                    "1",
                    "--nworkers",
                    "1",
                    "--host",
                    "127.0.0.1",
                    "--no-dashboard",
                ],
                stdout=subprocess.DEVNULL,
                stderr=(logs / f"worker{i}.log").open("wb"),
                env=denv,
            )
        )
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with Client(address, timeout=5) as client:  # type: ignore[no-untyped-call]
                    client.wait_for_workers(2, timeout=60)
                break
            except (OSError, TimeoutError):
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
        yield address
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in procs:
            p.wait(timeout=30)


def dask_rows(
    bench: Any,
    run_proc: Callable[..., Any],
    copy_corpus: Callable[[Sequence[Path], Path], list[Path]],
    many: Sequence[Path],
    row: Callable[..., Any],
) -> None:
    """Add the ``--dask`` rows to ``bench`` (bench/run.py's Bench): ratios against
    ``--jobs 2`` measured in the same run, and the client's peak RSS (MB) over ``many``'s
    first 100 and all its files."""
    cc = bench.cc
    with two_workers(bench.env, bench.tmp / "dask-logs") as address:
        for label, args, fresh in (
            ("inspect --estimate", ["inspect", "--estimate", "--json"], False),
            ("compact --force", ["compact", "--force", "-q", "--json"], True),
        ):
            times = {}
            for mode, extra in (("jobs 2", ["--jobs", "2"]), ("dask", ["--dask", address])):
                files = bench.files
                if fresh:
                    files = copy_corpus(bench.files, bench.tmp / f"dask-{mode.replace(' ', '')}")
                proc = run_proc([*cc, *args, *extra, str(files[0].parent)], env=bench.env)
                times[mode] = proc.seconds
            bench.rows.append(
                row(
                    f"{label} --dask (2 workers)",
                    seconds=times["dask"],
                    mb=bench.total,
                    baseline=f"{label} --jobs 2",
                    ratio=times["jobs 2"] / times["dask"],
                    target="ratio >= 0.77 (overhead <= 1.3x)",
                    note=f"{times['dask']:.1f} s vs {times['jobs 2']:.1f} s",
                )
            )
        for n in (100, len(many)):
            work = copy_corpus(list(many[:n]), bench.tmp / f"dask-many-{n}")
            proc = run_proc(
                [*cc, "inspect", "--estimate", "--json", "--dask", address, str(work[0].parent)],
                env=bench.env,
                stdout=subprocess.DEVNULL,
            )
            bench.rows.append(
                row(
                    f"inspect --dask, {n} files (client memory)",
                    seconds=proc.seconds,
                    peak_mb=proc.peak_kb / 1024,
                    note=f"client peak RSS {proc.peak_kb / 1024:.0f} MB",
                )
            )
