"""Discovery, reading, and the one safe append path (docs/design.md section 6).

Every byte compactctl writes into an existing transcript goes through :func:`append_events`:
under an exclusive ``flock``, one ``os.write`` of whole records, then ``fsync``. The old file
is always a byte prefix of the new one. Outputs that are not the input transcript (``-o``,
``--materialize``) go through :func:`write_output`, which writes a temporary file and renames
it, so a reader never sees half a file.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import mmap
import os
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import orjson

from compactctl.errors import InputError, LockTimeout, UsageError, WriteError
from compactctl.io.jsonl import parse_line, read_stream
from compactctl.io.locking import DEFAULT_LOCK_TIMEOUT, exclusive_lock
from compactctl.model import Event

__all__ = [
    "AppendResult",
    "FileIdentity",
    "IdentityReader",
    "STDIN",
    "append_events",
    "discover",
    "open_input",
    "read",
    "write_output",
]

STDIN = "-"
GZIP_MAGIC = b"\x1f\x8b"
TRANSCRIPT_SUFFIXES = (".jsonl", ".jsonl.gz")
TORN_WAIT = 2.0
"""Seconds a last line without ``\\n`` must stay unchanged (file mtime) before it is taken
as torn by a crashed writer. A line still being written (the file changed more recently)
is waited for, up to the lock timeout; an old torn line costs no wait at all."""


class NoTranscripts(InputError):
    """A folder argument holds no transcripts: a warning, not a failure (a cron job over a
    folder that is empty tonight has nothing to do; exit code 0)."""

    exit_code = 0


def discover(paths: Sequence[str]) -> tuple[list[str], list[InputError]]:
    """Expand PATHS into transcript files, in a stable order.

    Files are taken as given (any name); folders are searched recursively for ``*.jsonl``
    and ``*.jsonl.gz`` (sorted); ``-`` means standard input and may appear once.

    Returns:
        ``(files, errors)``: the files to process, and one :class:`InputError` per path that
        does not exist, or :class:`NoTranscripts` for a folder without transcripts (the run
        goes on without it).
    """
    files: list[str] = []
    errors: list[InputError] = []
    seen: set[str] = set()
    for arg in paths:
        if arg == STDIN:
            candidates = [STDIN]
        else:
            p = Path(arg)
            if p.is_dir():
                candidates = sorted(
                    str(f)
                    for f in p.rglob("*")
                    if f.name.endswith(TRANSCRIPT_SUFFIXES) and f.is_file()
                )
                if not candidates:
                    errors.append(
                        NoTranscripts("folder has no *.jsonl or *.jsonl.gz transcripts", path=arg)
                    )
            elif p.exists():
                candidates = [arg]
            else:
                errors.append(InputError("no such file or folder", path=arg))
                continue
        for c in candidates:
            if c not in seen:
                seen.add(c)
                files.append(c)
    return files, errors


@dataclass(frozen=True)
class FileIdentity:
    """Which bytes a session was read from: the file and what was read of it.

    Attributes:
        device: ``st_dev`` of the file when it was opened.
        inode: ``st_ino`` of the file when it was opened.
        size: bytes read from the file (compressed bytes for gzip).
        sha256: hex SHA-256 of those bytes.
        compressed: the file is gzip-compressed (never appended to).
    """

    device: int
    inode: int
    size: int
    sha256: str
    compressed: bool


class IdentityReader:
    """A binary stream over an open file that hashes every byte read through it.

    ``file_size`` is the file's size in bytes when it was opened; :meth:`finished` gives
    the :class:`FileIdentity` of what was read.
    """

    def __init__(self, fh: BinaryIO, compressed: bool) -> None:
        st = os.fstat(fh.fileno())
        self._fh = fh
        self._hash = hashlib.sha256()
        self._read = 0
        self.device, self.inode, self.file_size = st.st_dev, st.st_ino, st.st_size
        self.compressed = compressed
        self.name = getattr(fh, "name", "")
        self.mode = "rb"

    def read(self, n: int = -1) -> bytes:
        data = self._fh.read(n)
        self._hash.update(data)
        self._read += len(data)
        return data

    def read1(self, n: int = -1) -> bytes:
        data: bytes = self._fh.read1(n)  # type: ignore[attr-defined]
        self._hash.update(data)
        self._read += len(data)
        return data

    def finished(self) -> FileIdentity:
        """The identity of the bytes read so far."""
        return FileIdentity(
            self.device, self.inode, self._read, self._hash.hexdigest(), self.compressed
        )


@contextlib.contextmanager
def open_input(path: str, identity: list[IdentityReader] | None = None) -> Iterator[BinaryIO]:
    """Open a transcript for reading as a binary stream (``-``: stdin; gzip by magic bytes).

    The file is opened once. With ``identity`` (a file, not stdin), the bytes read are
    hashed as they pass and the :class:`IdentityReader` is appended to that list.

    Raises:
        InputError: the file cannot be opened (missing, a folder, no permission).
    """
    if path == STDIN:
        stream: BinaryIO = sys.stdin.buffer
        head = stream.peek(2)[:2] if hasattr(stream, "peek") else b""
        if head == GZIP_MAGIC:
            with gzip.GzipFile(fileobj=stream) as gz:
                yield gz  # type: ignore[misc]
        else:
            yield stream
        return
    try:
        fh = open(path, "rb")  # noqa: SIM115 - closed below
    except IsADirectoryError:
        raise InputError("is a folder; pass the folder to search it", path=path) from None
    except FileNotFoundError:
        raise InputError("no such file", path=path) from None
    except PermissionError:
        raise InputError("permission denied (cannot read the file)", path=path) from None
    except OSError as exc:
        raise InputError(f"cannot open: {exc.strerror}", path=path) from None
    try:
        compressed = fh.peek(2)[:2] == GZIP_MAGIC
        raw: BinaryIO = fh
        if identity is not None:
            reader = IdentityReader(fh, compressed)
            identity.append(reader)
            raw = reader  # type: ignore[assignment]
        if compressed:
            with gzip.GzipFile(fileobj=raw) as gz:
                yield gz  # type: ignore[misc]
        else:
            yield raw
    finally:
        fh.close()


def read(path: str) -> Iterator[Event]:
    """Stream the events of a canonical transcript (``-`` for stdin), turn ids assigned.

    Streaming: one line in memory at a time. Bad lines come through as ``BadLine`` events.

    Raises:
        InputError: the file cannot be opened, or a gzip stream is corrupt.
    """
    with open_input(path) as stream:
        try:
            yield from read_stream(stream)
        except (OSError, EOFError, gzip.BadGzipFile) as exc:
            raise InputError(f"cannot read: {exc}", path=path) from None


@dataclass(frozen=True)
class AppendResult:
    """What :func:`append_events` did.

    Attributes:
        written: events appended.
        skipped: events already in the file (same uuid), not written again.
        bytes_written: bytes appended, including a leading ``\\n`` after a torn line.
        torn_line: True when the file ended without ``\\n`` and the append began a new line.
        old_size: the offset where the appended bytes begin: the file before them (the
            preserved prefix) is unchanged.
    """

    written: int
    skipped: int
    bytes_written: int
    torn_line: bool
    old_size: int


def _ignore_sigxfsz() -> None:
    # Past RLIMIT_FSIZE the kernel sends SIGXFSZ, whose default action kills the process
    # before we can remove a partial record; ignored, write() fails with EFBIG instead.
    if threading.current_thread() is threading.main_thread() and hasattr(signal, "SIGXFSZ"):
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)


def append_events(
    path: str,
    events: Sequence[Event],
    *,
    lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
    torn_wait: float = TORN_WAIT,
) -> AppendResult:
    """Append events to a transcript safely: the one write path into an existing file.

    Under an exclusive ``flock``: events whose ``uuid`` is already the uuid of a record in
    the file are skipped (idempotence: layers derive uuids from their content; a malformed or
    torn line that merely contains the uuid, such as a record cut short by a crash, does not
    count, so a re-run writes the event whole); if the file does not end in ``\\n``, wait for
    the writer to finish the line (up to ``lock_timeout`` from the start), unless the line
    has not changed for ``torn_wait`` seconds: then it is torn (left in place) and our
    records start on a new line; write every record in one ``os.write`` and ``fsync``. If
    the write fails part way (disk full, ``RLIMIT_FSIZE``), the file is truncated back to its
    old size, so no partial record is left and the old bytes are intact. A process killed
    during the write (SIGKILL, power loss) can leave a torn partial record; it is kept and
    skipped like any torn line, and the next run appends the events whole after it (if the
    kill left one of the records whole but for its ``\\n``, the next run ends that line
    instead of writing the record twice).

    A writer that does not take the lock (an agent) is waited for when it is mid-line; the
    payload is built and the file scanned before that check, which re-reads the size, so only
    the system calls between the check and the write remain as a window in which an agent
    starting a new line in several ``write()`` calls could be joined by our record (an agent
    writing each line with one ``write()``, as ``O_APPEND`` writers do, is never split).

    A gzip-compressed transcript is never appended to (plain lines after a gzip stream would
    make it unreadable): the caller gets a :class:`UsageError` and must pass ``-o``.

    Args:
        path: the transcript (must exist; not ``-``).
        events: new events, each with a ``uuid``.
        lock_timeout: seconds to wait for the lock.
        torn_wait: seconds a last line without ``\\n`` must stay unchanged to count as torn
            (:data:`TORN_WAIT`; ``COMPACTCTL_TORN_WAIT`` / ``torn_wait`` in the CLI).

    Raises:
        LockTimeout: the lock was held by another process for ``lock_timeout`` seconds, or
            the last line was still being written when that time was up.
        WriteError: the file cannot be opened for writing, or the write failed (nothing
            partial remains, unless another process appended after the partial bytes).
        UsageError: ``path`` is ``-`` or a gzip-compressed file (nothing was written).
    """
    if path == STDIN:
        raise UsageError("cannot append to standard input")
    _ignore_sigxfsz()
    try:
        fd = os.open(path, os.O_RDWR | os.O_APPEND)
    except PermissionError:
        raise WriteError(
            "file is read-only; nothing was written. Use -o FILE to write a copy.", path=path
        ) from None
    except OSError as exc:
        raise WriteError(f"cannot open for append: {exc.strerror}", path=path) from None
    try:
        started = time.monotonic()
        with exclusive_lock(fd, path, lock_timeout):
            size = os.fstat(fd).st_size
            if size >= 2 and os.pread(fd, 2, 0) == GZIP_MAGIC:
                raise UsageError(
                    "is gzip-compressed; compactctl does not append to a compressed "
                    "transcript (nothing was written). Pass -o FILE to write the result",
                    path=path,
                )
            fresh, own_tail = _not_in_file(fd, size, events)
            if not fresh and not own_tail:
                return AppendResult(0, len(events), 0, False, size)
            records = b"".join(e.to_json() + b"\n" for e in fresh)
            size, torn = _wait_for_line_end(fd, path, torn_wait, started + lock_timeout)
            payload = b"\n" + records if torn else records
            start = _write_whole(fd, path, payload) if payload else size
            return AppendResult(len(fresh), len(events) - len(fresh), len(payload), torn, start)
    finally:
        os.close(fd)


def _not_in_file(fd: int, size: int, events: Sequence[Event]) -> tuple[list[Event], bool]:
    """``(fresh, own_tail)``: the events whose uuid is not that of a record in the first
    ``size`` bytes, and whether the file ends in one of ``events`` without its ``\\n``.

    ``"uuid":"..."`` is searched for, and a match counts only when its whole line parses as
    an object with that ``uuid``. A record cut short by a crash, or a malformed line, does
    not hide an event that was never written whole. A last line that is one of our records,
    whole but for its ``\\n`` (a crash just before the end of the write), counts as written;
    ``own_tail`` tells the caller to end that line, so replay sees it.
    """
    if size == 0:
        return list(events), False
    with mmap.mmap(fd, size, access=mmap.ACCESS_READ) as mm:
        fresh = [e for e in events if e.uuid is None or not _has_record(mm, e.uuid)]
        own_tail = False
        if mm[size - 1 : size] != b"\n":
            tail = parse_line(mm[mm.rfind(b"\n") + 1 :]).uuid
            own_tail = tail is not None and any(e.uuid == tail for e in events)
        return fresh, own_tail


def _has_record(mm: mmap.mmap, uuid: str) -> bool:
    needle = b'"uuid":' + orjson.dumps(uuid)
    pos = mm.find(needle)
    while pos >= 0:
        end = mm.find(b"\n", pos)
        if end < 0:
            end = len(mm)
        start = mm.rfind(b"\n", 0, pos) + 1
        if parse_line(mm[start:end]).uuid == uuid:
            return True
        pos = mm.find(needle, end)
    return False


def _wait_for_line_end(fd: int, path: str, quiet: float, deadline: float) -> tuple[int, bool]:
    """Return ``(size, torn)`` of the file as it is now, once its last byte is ``\\n`` or its
    last line is torn.

    The size is re-read each time, so the check is made just before the write (an agent may
    have appended while we scanned the file). A last line without ``\\n`` is torn when the
    file has not changed for ``quiet`` seconds (its writer crashed); while it keeps changing
    or is younger than that, a writer is mid-line and we wait for it.

    Raises:
        LockTimeout: at ``deadline`` (monotonic) the line is still being written; nothing
            was written by us, and a retry later will find the line complete.
    """
    while True:
        st = os.fstat(fd)
        size = st.st_size
        if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
            return size, False
        age = time.time() - st.st_mtime
        if age >= quiet:
            return size, True
        if time.monotonic() >= deadline:
            raise LockTimeout(
                "the file ends mid-line and another process is still writing that line; "
                "nothing was written. Retry later, or raise --lock-timeout.",
                path=path,
            )
        time.sleep(max(0.005, min(0.05, quiet - age)))


def _write_whole(fd: int, path: str, payload: bytes) -> int:
    """One ``os.write`` of ``payload``, then fsync; return the offset where it begins.

    On failure our bytes are cut off again (the file is truncated to where they begin),
    unless another writer has appended after them: its bytes are never cut.
    """
    written = 0
    try:
        written = os.write(fd, payload)
        if written != len(payload):
            raise OSError(
                0,
                f"only {written} of {len(payload)} bytes written: a file size limit or a full disk",
            )
        os.fsync(fd)
        return os.lseek(fd, 0, os.SEEK_CUR) - written
    except OSError as exc:
        reason = exc.strerror or str(exc)
        start, restored = os.fstat(fd).st_size, True
        if written:
            end = os.lseek(fd, 0, os.SEEK_CUR)
            start, restored = end - written, False
            with contextlib.suppress(OSError):
                if os.fstat(fd).st_size == end:
                    os.ftruncate(fd, start)
                    os.fsync(fd)
                    restored = True
        if restored:
            raise WriteError(
                f"append failed ({reason}); the file was restored to its previous "
                f"{start} bytes, nothing was lost",
                path=path,
            ) from None
        raise WriteError(
            f"append failed ({reason}); {written} bytes of a partial record remain at byte "
            f"{start} (another process appended after them, so they were not cut); the bytes "
            "before them are intact",
            path=path,
        ) from None


def write_output(target: str, lines: Iterable[bytes]) -> int:
    """Write lines to ``target``: ``-`` streams to stdout, a path is written atomically.

    A file is written to a temporary file in the same folder, fsynced, then renamed over
    ``target``, so the target is either the old file or the complete new one. The new file
    gets the old target's permission bits, or the usual ones (``0o666`` less the umask) for a
    new target. A process killed mid-write leaves the target intact and may leave its
    temporary ``.compactctl-*.tmp`` file behind. A symlink ``target`` is replaced by the new
    file (the file it pointed to is not written).

    Returns:
        bytes written.

    Raises:
        WriteError: the folder is not writable or the disk is full (the target is untouched).
    """
    if target == STDIN:
        out = sys.stdout.buffer
        total = 0
        for chunk in lines:
            out.write(chunk)
            total += len(chunk)
        out.flush()
        return total
    _ignore_sigxfsz()
    folder = os.path.dirname(os.path.abspath(target))
    try:
        fd, tmp = tempfile.mkstemp(prefix=".compactctl-", suffix=".tmp", dir=folder)
    except OSError as exc:
        raise WriteError(f"cannot create output: {exc.strerror}", path=target) from None
    total = 0
    try:
        with os.fdopen(fd, "wb") as fh:
            os.fchmod(fd, _output_mode(target))
            for chunk in lines:
                fh.write(chunk)
                total += len(chunk)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise WriteError(
            f"cannot write output ({exc.strerror or exc}); the target is unchanged", path=target
        ) from None
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return total


def _output_mode(target: str) -> int:
    """Permission bits for a new output: the existing target's, else ``0o666`` less the umask."""
    try:
        return os.stat(target).st_mode & 0o7777
    except OSError:
        umask = os.umask(0o022)
        os.umask(umask)
        return 0o666 & ~umask
