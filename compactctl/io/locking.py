"""The exclusive lock held around every write to a transcript.

``flock(2)`` on the transcript's own descriptor: the lock belongs to the open file
description, so it survives other descriptors of the same file being closed (``fcntl.lockf``
/ POSIX record locks do not: they vanish when *any* descriptor of the file is closed, which
is why docs/style.md pitfalls ban them). We do not use the ``filelock`` package here: it
opens its lock path with ``O_TRUNC``, so it can only lock a sidecar file, and a sidecar lock
is invisible to an agent that flocks the transcript itself.
"""

from __future__ import annotations

import fcntl
import time
from collections.abc import Iterator
from contextlib import contextmanager

from compactctl.errors import LockTimeout

__all__ = ["DEFAULT_LOCK_TIMEOUT", "exclusive_lock"]

DEFAULT_LOCK_TIMEOUT = 10.0
"""Seconds to wait for another writer's lock before giving up (exit code 75)."""

_POLL = 0.02


@contextmanager
def exclusive_lock(fd: int, path: str, timeout: float = DEFAULT_LOCK_TIMEOUT) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``fd`` for the body of the ``with`` block.

    Args:
        fd: an open descriptor of the transcript.
        path: the file's path, for the error message.
        timeout: seconds to wait for the lock; ``0`` tries once.

    Raises:
        LockTimeout: another process held the lock for ``timeout`` seconds.
    """
    deadline = time.monotonic() + timeout
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            if time.monotonic() >= deadline:
                raise LockTimeout(
                    f"another process has held the lock for {timeout:g}s; nothing was written. "
                    "Retry later, or raise --lock-timeout.",
                    path=path,
                ) from None
            time.sleep(_POLL)
    try:
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
