"""The per-file jobs on a Dask distributed cluster: ``--dask ADDRESS`` (issue 20).

Past one machine the same per-file functions run on an existing distributed engine, Dask,
not on a scheduler of compactctl's own (docs/design.md section 7). :func:`cluster_outcomes`
is what :func:`compactctl.app.runner.run_files` uses instead of its process pool when an
address is given (``--dask``, ``COMPACTCTL_DASK`` or the config key ``dask``):

- the job of each file (the function ``--jobs`` would run in a process) is submitted to the
  cluster through ``distributed.Client``; results are yielded in input order, as the local
  pool yields them, so the report lines, ``--json`` and the exit codes are the same;
- at most ``window`` files are in flight (submitted and not yet yielded): the client's memory
  stays flat in the number of files;
- a worker that dies while it runs a file: the scheduler runs the file again on another
  worker, and after ``allowed_failures`` deaths reports it failed (``KilledWorker``), which
  becomes that file's error while the others finish. ``--dask local`` sets it to 1 (retried
  once); a scheduler you start reads it from ``distributed.scheduler.allowed-failures``
  (Dask's default 3; ``DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES=1`` for "once", and
  ``DASK_DISTRIBUTED__SCHEDULER__WORKER_SATURATION=1.0`` so that a worker's death counts
  against the file it runs only: :data:`SCHEDULER_CONFIG`). A
  retried file is never written twice: appends skip the records already in the file
  (content-derived ids) and ``-o`` outputs are written to a temporary file and renamed;
- ``--dask local`` starts a ``LocalCluster`` on this machine (one single-threaded worker
  process per core; its dashboard address is printed).

The workers must see the files at the paths given (a shared file system) and have
compactctl installed. Dask is the optional extra ``compactctl[dask]``; this module is
imported only when ``--dask`` is used.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from compactctl.errors import CompactError, InputError, UsageError

__all__ = ["LOCAL", "SCHEDULER_CONFIG", "WINDOW", "cluster_outcomes", "connect"]

LOCAL = "local"
"""The ``--dask`` value that starts a ``LocalCluster`` instead of connecting to one."""

WINDOW = 256
"""Files in flight at most (submitted, result not yet yielded)."""

CONNECT_TIMEOUT_S = 10

SCHEDULER_CONFIG = {
    "distributed.scheduler.allowed-failures": 1,
    "distributed.scheduler.worker-saturation": 1.0,
}
"""The scheduler settings of ``--dask local`` (and the ones to give a scheduler you start):
a file whose worker dies is run once more elsewhere, then failed; and a worker holds only
the files it runs (Dask's default saturation 1.1 gives a one-thread worker a second file,
which a death there would count against too)."""
"""Seconds to wait for the scheduler at ``--dask ADDRESS`` before giving up."""


@contextlib.contextmanager
def connect(address: str, workers: int | None = None) -> Iterator[Any]:
    """A ``distributed.Client`` for ``address`` (``tcp://host:port``, ``host:port``) or, for
    ``local``, for a new ``LocalCluster`` of ``workers`` processes (default: the cores),
    closed on exit.

    Raises:
        UsageError: the extra is not installed, or the scheduler cannot be reached (the
            message says how to start one).
    """
    try:
        import dask
        from distributed import Client, LocalCluster
    except ImportError as exc:
        raise UsageError(
            f"--dask needs Dask distributed ({exc.name} is missing): pip install 'compactctl[dask]'"
        ) from None
    if address == LOCAL:
        with dask.config.set(SCHEDULER_CONFIG):
            cluster = LocalCluster(  # type: ignore[no-untyped-call]
                n_workers=workers or os.cpu_count() or 1,
                threads_per_worker=1,
                processes=True,
                dashboard_address="127.0.0.1:0",
            )
        sys.stderr.write(f"compactctl: dask: LocalCluster, dashboard {cluster.dashboard_link}\n")
        with cluster, Client(cluster) as client:  # type: ignore[no-untyped-call]
            yield client
        return
    try:
        client = Client(address, timeout=CONNECT_TIMEOUT_S)  # type: ignore[no-untyped-call]
    except (OSError, TimeoutError, ValueError) as exc:  # ValueError: not an address
        raise UsageError(
            f"--dask {address}: cannot reach the scheduler ({exc}); start one with "
            "`dask scheduler` and workers with `dask worker ADDRESS`, or use --dask local"
        ) from None
    with client:
        yield client


class InFolder:
    """A per-file task run in a given working directory (the client's), so that relative
    PATHS and ``-o`` targets mean on a worker what they mean where the command was typed.

    Picklable (it travels to the workers). Workers are single-threaded per file: the
    directory is changed for the task and restored after it.
    """

    def __init__(self, cwd: str, task: Callable[[str], dict[str, Any] | CompactError]) -> None:
        self.cwd = cwd
        self.task = task

    def __call__(self, path: str) -> dict[str, Any] | CompactError:
        try:
            before = os.getcwd()
        except OSError:
            before = None
        try:
            os.chdir(self.cwd)
        except OSError:
            return InputError(
                f"the Dask worker has no folder {self.cwd} (the working directory of the "
                "command): --dask needs the files on a file system the workers share, at the "
                "same paths",
                path=path,
            )
        try:
            return self.task(path)
        finally:
            if before is not None:
                with contextlib.suppress(OSError):
                    os.chdir(before)


def cluster_outcomes(
    files: Sequence[str],
    task: Callable[[str], dict[str, Any] | CompactError],
    address: str,
    window: int = WINDOW,
) -> Iterator[tuple[str, dict[str, Any] | CompactError]]:
    """``(path, task(path))`` for every file, in input order, computed on the cluster.

    ``task`` returns the job's result or its :class:`~compactctl.errors.CompactError`
    (:func:`compactctl.app.runner._guarded`), so a file's error comes back as a value; a
    file whose workers kept dying (``KilledWorker``), or whose task failed in Dask itself,
    comes back as an :class:`~compactctl.errors.InputError` naming the cause.

    Raises:
        UsageError: as :func:`connect`.
    """
    if not files:
        return
    with connect(address) as client:
        pending: deque[tuple[str, Any]] = deque()
        items = iter(enumerate(files))

        def submit_next() -> bool:
            for i, path in items:
                # a key of its own per file and run: two runs of one file never share a result
                key = f"compactctl-{os.getpid()}-{id(pending)}-{i}"
                job = InFolder(os.getcwd(), task)
                pending.append((path, client.submit(job, path, key=key, pure=False)))
                return True
            return False

        while len(pending) < window and submit_next():
            pass
        while pending:
            path, future = pending.popleft()
            try:
                outcome = future.result()
            except Exception as exc:  # KilledWorker, a lost connection, a task Dask failed
                outcome = InputError(
                    f"failed on the Dask cluster: {type(exc).__name__}: {exc}", path=path
                )
            finally:
                future.release()
            yield path, outcome
            submit_next()
