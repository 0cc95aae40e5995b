"""The ``--jobs`` process pool, and how a run stops when it is told to.

A nightly run is often stopped from outside: ``timeout 1h compactctl compact ...`` sends
SIGTERM, a scheduler or a user sends SIGTERM or SIGKILL to the process it started, Ctrl-C
sends SIGINT to the whole foreground group. Before this module, the pool's workers outlived
a parent stopped by SIGTERM or SIGKILL (they waited for files forever, one idle Python
process per ``--jobs`` worker left behind by every stopped run), and a Ctrl-C waited for the
files in progress to end.

- :func:`stop_on_sigterm`: while a run is going, SIGTERM raises :class:`~compactctl.errors.
  Stopped` in the main thread (the CLI says so and exits 143, 128 + 15, as a process killed by
  the signal does), so the run ends as an interrupted one does, not silently.
- :func:`worker_pool`: the pool; when the run ends by an exception (:class:`Stopped`,
  ``KeyboardInterrupt``, a closed stdout), the files not started are cancelled and the
  workers are terminated at once; and each worker ends by itself within
  :data:`PARENT_POLL_S` seconds of its parent's end (:func:`_watch_parent`), which is the
  only way out after a SIGKILL of the parent.

A worker stopped in the middle of a file leaves that file as it was, or with the whole of
its records: every append is one ``os.write`` (:func:`compactctl.io.files.append_events`),
and an ``-o`` output is renamed into place whole. Runs are idempotent, so the next run
finishes what a stopped one left.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from compactctl.errors import Stopped

if TYPE_CHECKING:
    from concurrent.futures import ProcessPoolExecutor

__all__ = ["PARENT_POLL_S", "stop_on_sigterm", "worker_pool"]

PARENT_POLL_S = 0.5
"""How often (seconds) a pool worker checks that its parent is alive (``os.getppid``, a
system call that costs about a microsecond): a worker of a parent killed with SIGKILL ends
within this time."""


@contextlib.contextmanager
def stop_on_sigterm() -> Iterator[None]:
    """While the block runs, SIGTERM raises :class:`~compactctl.errors.Stopped` in the main
    thread; the previous handler is restored after. Outside the main thread (a run started
    by ``serve``), signals are not this code's to handle, and nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise_stopped)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _raise_stopped(signum: int, frame: Any) -> None:
    raise Stopped(signum)


@contextlib.contextmanager
def worker_pool(workers: int) -> Iterator[ProcessPoolExecutor]:
    """A process pool of ``workers`` processes (:func:`_start_worker` in each) that stops
    at once when the block ends by an exception: the files not started are cancelled, the
    workers are sent SIGTERM, and the exception goes on. A block that ends normally waits
    for its work, as ``ProcessPoolExecutor`` does."""
    from concurrent.futures import ProcessPoolExecutor

    pool = ProcessPoolExecutor(
        max_workers=workers, initializer=_start_worker, initargs=(workers, os.getpid())
    )
    try:
        yield pool
    except BaseException:
        _stop(pool)
        raise
    pool.shutdown(wait=True)


def _stop(pool: ProcessPoolExecutor) -> None:
    """Cancel what has not started and end the workers (SIGTERM, which a worker does not
    handle: :func:`_start_worker`), then reap them."""
    import multiprocessing

    pool.shutdown(wait=False, cancel_futures=True)
    children = multiprocessing.active_children()  # the pool's processes (public API)
    for child in children:
        child.terminate()
    for child in children:
        child.join(timeout=5)
    pool.shutdown(wait=True)  # its manager thread sees the workers gone and ends


def _start_worker(workers: int, parent: int) -> None:
    """A pool worker's start: the cores shared among ``workers``
    (:func:`compactctl.tokens.share_cores`), SIGTERM back to its default (the parent's
    handler is inherited by fork: a worker told to end must end, not raise inside a file's
    job and take the next one), and :func:`_watch_parent` on a daemon thread."""
    from compactctl.tokens import share_cores

    share_cores(workers)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    threading.Thread(
        target=_watch_parent, args=(parent,), name="compactctl-parent", daemon=True
    ).start()


def _watch_parent(parent: int) -> None:
    """End this process when ``parent`` is no longer its parent (it ended, and the process
    was given to another: ``os.getppid`` changes), checked every :data:`PARENT_POLL_S`
    seconds. ``os._exit``: no cleanup runs, as for a SIGTERM; exit code 143."""
    while os.getppid() == parent:
        time.sleep(PARENT_POLL_S)
    os._exit(128 + signal.SIGTERM)
